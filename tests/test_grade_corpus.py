"""Every exercise's generated class (the model answer, the starter, every planted wrong answer and
every hostile kind) graded as an instructor grades it: each gets the score it must get, the batch
completes, the kit's own files are untouched, nothing of the model answers reaches anything a
student sees (the Gradescope files, the explanation), and nothing hostile escaped its folder."""

from __future__ import annotations

import hashlib
import html
import json
import sqlite3
from pathlib import Path

import pytest

from sim.course import sandbox
from sim.course.catalog import exercises, solutions_dir, use_course
from sim.course.corpus import build_corpus
from sim.course.kit import copy_project
from sim.course.grade import collect, grade_all
from sim.course.feedback import render
from sim.course.gradebook import _note
from sim.course.gradescope import results_json, validate_results

ROOT = Path(__file__).resolve().parents[1]
EXERCISES = exercises()


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if "__pycache__" in p.parts:
            continue
        h.update(str(p.relative_to(root)).encode())
        if p.is_symlink():
            h.update(b"link " + str(p.readlink()).encode())
        elif p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def _secret_lines(ex) -> list[str]:
    """Lines of the model answer that appear nowhere a student can already read (the starter, the
    exercise's texts, the engine's sources)."""
    sol = solutions_dir(ex)
    # feedback quotes the hidden tests' titles and hints on purpose: those are not the answer
    shipped = [*sorted(ex.folder.rglob("*")), *sorted((ROOT / "sim").rglob("*.py")), *sorted((ROOT / "sim").rglob("*.toml")),
               sol / "hidden.toml", sol / "hints.toml"]
    known = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in shipped if p.is_file())
    out = []
    for f in ex.files:
        for line in (sol / f).read_text(encoding="utf-8").splitlines():
            text = line.strip().lstrip("#").strip()
            if len(text) > 30 and text not in known:
                out.append(text)
    return out


def _check_class(ex, tmp_path: Path, *, slow: bool) -> None:
    """The class built from a copy of the course (so that what hostile code aims at, the model answer's
    path, the checkout, is a tree nobody else touches while it is graded) and a run database elsewhere."""
    course = tmp_path / "course"
    copy_project(ROOT, course, solutions=[ex.dirname])
    run_db = tmp_path / "elsewhere" / "run.db"
    run_db.parent.mkdir()
    con = sqlite3.connect(run_db)
    con.execute("CREATE TABLE effects (effect_key TEXT)")
    con.execute("INSERT INTO effects VALUES ('publish:R-1:T-2')")
    con.commit()
    con.close()
    classroom = tmp_path / "class"
    use_course(course)
    try:
        entries = build_corpus(ex, classroom, slow=slow, run_db=run_db)
    finally:
        use_course(None)
    kinds = {e.name: e for e in entries}
    before = _digest(course), run_db.read_bytes()
    markers = [Path(p) for p in ("/tmp/protolab-hostile-was-here", "/tmp/protolab-hostile-attach.db",
                                 "/tmp/protolab-hostile-vacuum.db")]
    for m in markers:
        m.unlink(missing_ok=True)
    subs = collect(ex, classroom, tmp_path / "work")
    reports = grade_all(ex, subs, jobs=2)
    assert [s.name for s in subs] == sorted(kinds)  # a report for everyone: the batch completed
    wrong = []
    for s, r in zip(subs, reports):
        e = kinds[s.name]
        ok = {"full": r.score == r.max_score, "less": r.score < r.max_score,
              "zero": r.score == 0 and all(x.points == 0 for x in r.results)}[e.expect]
        if not ok:
            wrong.append((s.name, r.score, [x.message[:120] for x in r.results if x.points > 0][:2]))
        if e.kind == "hostile":  # 0, each test with a reason a student can read
            assert all(x.message.strip() for x in r.results), s.name
    assert not wrong, wrong
    assert (_digest(course), run_db.read_bytes()) == before
    assert not [m for m in markers if m.exists()], "a submission wrote outside its folder"
    said = {r.sandbox for r in reports}  # every report says which sandbox judged it, the same for all
    assert len(said) == 1 and said.pop().split(":")[0].split(" ")[0] == sandbox.box().kind
    # what students see: Gradescope's files (valid), with no line of the model answers
    secret = _secret_lines(ex)
    for s, r in zip(subs, reports):
        d = results_json(r)
        validate_results(d)
        text = json.dumps(d)
        leaked = [line for line in secret if json.dumps(line)[1:-1] in text]
        assert not leaked, (s.name, leaked[:2])
        # the feedback handed back (issue 44): no line of the model answer either, in HTML or Markdown
        for fmt in ("html", "md"):
            page = render({"student": s.name, **r.to_dict()}, ex, fmt)
            leaked = [line for line in secret if line in page or html.escape(line, quote=True) in page]
            assert not leaked, (s.name, fmt, leaked[:2])
        # every 0 says why in the gradebook's note (issue 44: 28 of 30 hostile zeros had an empty one)
        if r.score == 0:
            assert _note(r).strip(), s.name


@pytest.mark.slow
@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.dirname)
def test_every_generated_submission_gets_the_score_it_must(ex, tmp_path):
    _check_class(ex, tmp_path, slow=False)


@pytest.mark.slow
def test_endless_loops_score_0_within_their_time_limits(tmp_path):
    """The two loops (on import, in every call) of exercise 1, with its real time limits."""
    ex = next(e for e in EXERCISES if e.number == 1)
    classroom = tmp_path / "class"
    entries = [e for e in build_corpus(ex, classroom, slow=True) if e.slow]
    assert {e.name for e in entries} == {"hostile-loop-on-import", "hostile-loop-in-call"}
    for p in classroom.iterdir():
        if p.name not in {e.name for e in entries}:
            import shutil

            shutil.rmtree(p)
    subs = collect(ex, classroom, tmp_path / "work")
    reports = grade_all(ex, subs, jobs=2)
    for s, r in zip(subs, reports):
        assert r.score == 0, s.name
        assert all("an endless loop, or far too slow" in x.message or "did not finish within" in x.message
                   for x in r.results), [x.message for x in r.results]
