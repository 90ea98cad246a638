"""The four ways to grade a submission, each as its user runs it, reduced to what a score is: the
total and each test's points. Used by tests/test_one_score.py (and handy by hand:
``python -m tests.scoring_paths 1`` prints every path's scores of exercise 1's submissions).

* ``kit verify``: :func:`sim.course.kit.verify_kit` (its rows' scores) and, per test, the report it
  judges each submission with (``evaluate(hidden=True)`` on the submission staged as verify stages it,
  in a pool shared by the submissions, as verify's is);
* ``grade -j 1`` and ``grade -j 2``: ``protolab grade N CLASS --json -j J`` on a class folder holding
  every submission, one folder per student;
* the Gradescope autograder: :func:`sim.course.autograder.run` on ``ROOT/submission``, its
  ``results/results.json``;
* ``exercise check``: ``protolab exercise check N FOLDER --json`` (the public tests only).
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def submissions(ex) -> dict[str, Path]:
    """Every submission the kit holds for ``ex``: the model answer, the starter and each planted
    wrong answer (label -> the folder of its files)."""
    from sim.course.catalog import solutions_dir

    sol = solutions_dir(ex)
    out = {"solution": sol, "starter": ex.folder}
    for w in sorted((sol / "wrong").iterdir()) if (sol / "wrong").is_dir() else ():
        if w.is_dir():
            out[f"wrong/{w.name}"] = w
    return out


def stage(ex, src: Path, dest: Path) -> Path:
    """A student's folder: the exercise's folder with ``src``'s copies of the files a student edits
    (what 'protolab exercise start' gives, edited), as kit verify stages it."""
    shutil.copytree(ex.folder, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*", "*.db"))
    for name in ex.files:
        if (src / name).is_file():
            shutil.copyfile(src / name, dest / name)
    return dest


def _cli(*argv) -> tuple[int, str]:
    from sim.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in argv])
        except SystemExit as e:
            code = e.code or 0
    assert "Traceback" not in out.getvalue() + err.getvalue(), err.getvalue()[-2000:]
    return code, out.getvalue()


def by_verify(ex, folders: dict[str, Path], jobs: int = 2) -> dict[str, dict]:
    """kit verify's judgement of each folder: ``{label: {"score", "tests": {name: points}}}``."""
    from concurrent.futures import ThreadPoolExecutor

    from sim.course.evaluate import evaluate
    from sim.course.pool import JudgePool

    with JudgePool(jobs) as pool, ThreadPoolExecutor(jobs) as threads:
        reps = dict(zip(folders, threads.map(
            lambda d: evaluate(ex, d, hidden=True, isolate=True, pool=pool, shown=ex.dirname), folders.values())))
    return {k: {"score": r.score, "tests": {t.name: t.points for t in r.results}} for k, r in reps.items()}


def by_grade(ex, folders: dict[str, Path], class_dir: Path, jobs: int) -> dict[str, dict]:
    """``protolab grade N CLASS --json -j jobs`` on a class of the folders (one student each)."""
    if not class_dir.exists():
        class_dir.mkdir(parents=True)
        for i, (_label, d) in enumerate(folders.items()):
            shutil.copytree(d, class_dir / f"s{i:03d}")
    names = {f"s{i:03d}": label for i, label in enumerate(folders)}
    code, out = _cli("grade", ex.number, class_dir, "--json", "-j", jobs)
    assert code == 0, out[-2000:]
    rows = json.loads(out)
    return {names[r["student"]]: {"score": r["score"], "tests": {t["name"]: t["points"] for t in r["tests"]}}
            for r in rows}


def by_autograder(ex, folder: Path, work: Path) -> dict:
    """The Gradescope autograder's entry on ``folder`` as its submission: results.json's total and
    each test's score."""
    from sim.course import autograder

    work.mkdir(parents=True)
    shutil.copytree(folder, work / "submission")
    with contextlib.redirect_stdout(io.StringIO()):
        assert autograder.run(ex.number, work) == 0
    res = json.loads((work / "results" / "results.json").read_text())
    return {"score": res["score"], "tests": {t["extra_data"]["test"]: t["score"] for t in res["tests"]}}


def by_check(ex, folder: Path) -> dict:
    """``protolab exercise check N FOLDER --json``: the public tests' total and each one's points."""
    code, out = _cli("exercise", "check", ex.number, folder, "--json")
    assert code in (0, 1), out[-2000:]
    rep = json.loads(out)
    return {"score": rep["score"], "tests": {t["name"]: t["points"] for t in rep["tests"]}}


if __name__ == "__main__":  # pragma: no cover - by hand
    import tempfile

    from sim.course.catalog import get_exercise

    ex = get_exercise(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        folders = {k: stage(ex, v, Path(tmp) / k.replace("/", "_")) for k, v in submissions(ex).items()}
        v = by_verify(ex, folders)
        g1 = by_grade(ex, folders, Path(tmp) / "class1", 1)
        for k in folders:
            print(k, v[k]["score"], g1[k]["score"], by_check(ex, folders[k])["score"])
