"""Grading lab submissions (``protolab lab submit``): each run re-delivered through the reference
runtime (:func:`sim.labs.submit.verify_submission`), then its checkpoints and answers worked out
again from the run, never taken from what the file claims.

A folder holds one ``.protolab`` file per student (``alice.protolab``) or one folder per student
holding one. Score: a point per checkpoint met and per question answered right; 0 when the run
is not genuine (re-delivery does not give the submitted state), when the file is another lab's,
or when it is not a lab submission at all, each with the reason.
"""

from __future__ import annotations

import csv
from pathlib import Path

from ..errors import InputError, ProtolabError
from ..files import written_whole

__all__ = ["collect_labs", "grade_labs", "write_lab_gradebook"]


def collect_labs(path: Path) -> list[tuple[str, Path | None, str | None]]:
    """``(student, file, problem)`` for every submission at ``path``."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path} does not exist", code="E_FILE_MISSING")
    if path.is_file():
        return [(path.stem, path, None)]
    out = []
    for p in sorted(path.iterdir(), key=lambda p: p.name):
        if p.name.startswith("."):
            continue
        if p.is_file() and p.suffix == ".protolab":
            out.append((p.stem, p, None))
        elif p.is_dir():
            files = sorted(p.rglob("*.protolab"))
            if len(files) == 1:
                out.append((p.name, files[0], None))
            elif not files:
                out.append((p.name, None, "no .protolab file in the folder (protolab lab submit N -o FILE makes one)"))
            else:
                out.append((p.name, None, f"{len(files)} .protolab files in the folder; submit one"))
    if not out:
        raise InputError(f"{path} holds no lab submissions (.protolab files, or one folder per student)",
                         code="E_NO_SUBMISSIONS")
    return out


def _one(lab, student: str, file: Path | None, problem: str | None) -> dict:
    from ..labs.submit import verify_submission

    total = len(lab.checkpoints)
    maxs = total + len(lab.questions)
    base = {"student": student, "file": str(file) if file else None, "score": 0, "max_score": maxs, "done": 0,
            "total": total, "answered": 0, "questions": len(lab.questions), "genuine": False, "note": ""}
    if problem:
        return {**base, "note": problem}
    try:
        v = verify_submission(file)
    except ProtolabError as e:
        return {**base, "note": f"{e.code}: {e.message}"}
    base.update(total=v["total"], max_score=v["total"] + v["questions"])
    if v["lab"] != lab.number:
        return {**base, "note": f"this is a submission of lab {v['lab']}, not lab {lab.number}"}
    if not v["genuine"]:
        return {**base, "done": v["done"], "answered": v["answered"],
                "note": f"not genuine: re-delivering its messages does not give its state ({v['difference']})"}
    unmet = [c.get("title") or c.get("id") for c in v.get("checkpoints", []) if not c.get("met")]
    note = ("unmet: " + "; ".join(map(str, unmet[:3])) + (" …" if len(unmet) > 3 else "")) if unmet else ""
    return {**base, "genuine": True, "done": v["done"], "answered": v["answered"],
            "score": v["done"] + v["answered"], "note": note}


def grade_labs(lab, subs, progress=None) -> list[dict]:
    out = []
    for i, (student, file, problem) in enumerate(subs, 1):
        out.append(_one(lab, student, file, problem))
        if progress is not None:
            progress(i, len(subs), student)
    return out


def write_lab_gradebook(path: Path, results: list[dict], *, reads=()) -> None:
    with written_whole(path, newline="", code="E_OUTPUT", reads=reads, option="--csv") as f:
        w = csv.writer(f)
        w.writerow(["student", "score", "max", "checkpoints", "answers", "genuine", "note"])
        for r in results:
            w.writerow([r["student"], r["score"], r["max_score"], r["done"], r["answered"],
                        "yes" if r["genuine"] else "no", r["note"]])
