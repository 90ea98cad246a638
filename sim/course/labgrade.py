"""Grading lab submissions (``protolab lab submit``): each run re-delivered through the reference
runtime (:func:`sim.labs.submit.verify_submission`), then its checkpoints and answers worked out
again from the run, never taken from what the file claims.

A folder holds one ``.protolab`` file per student (``alice.protolab``) or one folder per student
holding one. Score: a point per checkpoint met and per question answered right; 0 when the run
is not genuine (re-delivery does not give the submitted state, or an event in it is explained by
nothing the lab did), when the file is another lab's, or when it is not a lab submission at all,
each with the reason.

A checkpoint met only through a screen action the submission lists (a view opened, a visit in time)
is self-reported: nothing can replay it, and a hand-edited manifest adds one as easily as a learner
earns it. By default it is left out, of the score and of the maximum (the lab's checkpoints that
only a screen action can meet), and the row says how many were left out; ``count_self_reported``
(the instructor's ``--count-self-reported``) counts them as met.
"""

from __future__ import annotations

import csv
from pathlib import Path

from ..errors import InputError, ProtolabError
from ..files import written_whole

__all__ = ["collect_labs", "grade_labs", "screen_checkpoints", "write_lab_gradebook"]


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


def screen_checkpoints(lab) -> int:
    """How many of ``lab``'s checkpoints only a screen action can meet (self-reported once met)."""
    from ..labs.checks import self_reported

    return sum(self_reported(c.check, c.args) for c in lab.checkpoints)


def _one(lab, student: str, file: Path | None, problem: str | None, *, count_self_reported: bool = False) -> dict:
    from ..labs.submit import verify_submission

    total = len(lab.checkpoints)
    countable = total if count_self_reported else total - screen_checkpoints(lab)
    base = {"student": student, "file": str(file) if file else None, "score": 0,
            "max_score": countable + len(lab.questions), "done": 0, "total": total, "answered": 0,
            "questions": len(lab.questions), "genuine": False, "self_reported": 0, "self_reported_left_out": 0,
            "note": ""}
    if problem:
        return {**base, "note": problem}
    try:
        v = verify_submission(file)
    except ProtolabError as e:
        return {**base, "note": f"{e.code}: {e.message}"}
    if v["lab"] != lab.number:
        return {**base, "note": f"this is a submission of lab {v['lab']}, not lab {lab.number}"}
    reported = v.get("self_reported", 0)
    left_out = 0 if count_self_reported else reported
    done = v["done"] - left_out
    base.update(self_reported=reported, self_reported_left_out=left_out)
    if not v["genuine"]:
        return {**base, "done": done, "answered": v["answered"],
                "note": f"not genuine: re-delivering its messages does not give its state ({v['difference']})"}
    unmet = [c.get("title") or c.get("id") for c in v.get("checkpoints", []) if not c.get("met")]
    notes = []
    if unmet:
        notes.append("unmet: " + "; ".join(map(str, unmet[:3])) + (" …" if len(unmet) > 3 else ""))
    if left_out:
        notes.append(f"{left_out} self-reported checkpoint{'s' if left_out != 1 else ''} left out "
                     "(met only by a screen action the file lists; --count-self-reported counts them)")
    elif reported:
        notes.append(f"{reported} self-reported checkpoint{'s' if reported != 1 else ''} counted")
    return {**base, "genuine": True, "done": done, "answered": v["answered"],
            "score": done + v["answered"], "note": "; ".join(notes)}


def grade_labs(lab, subs, progress=None, *, count_self_reported: bool = False) -> list[dict]:
    """Each submission graded (``count_self_reported``: checkpoints met only by a screen action count)."""
    out = []
    for i, (student, file, problem) in enumerate(subs, 1):
        out.append(_one(lab, student, file, problem, count_self_reported=count_self_reported))
        if progress is not None:
            progress(i, len(subs), student)
    return out


def write_lab_gradebook(path: Path, results: list[dict], *, reads=()) -> None:
    with written_whole(path, newline="", code="E_OUTPUT", reads=reads, option="--csv") as f:
        w = csv.writer(f)
        w.writerow(["student", "score", "max", "checkpoints", "answers", "genuine", "self-reported left out", "note"])
        for r in results:
            w.writerow([r["student"], r["score"], r["max_score"], r["done"], r["answered"],
                        "yes" if r["genuine"] else "no", r["self_reported_left_out"], r["note"]])
