"""Issue 44's parts 3 to 5: similarity over a class (copydetect), feedback files to hand back, and the
grader's output off a terminal (no wrap at 80 columns, every zero's reason in the note, the progress
bar's ETA, the --explain grid's headers as its legend names them).

The quick tests read text only (similarity never runs code) or judge the kit's own planted wrong
answer in-process; the whole command line (`grade --similarity --feedback --csv`, piped) and the
feedback page in Chromium are in the slow set."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from conftest import run_cli

from sim.course.catalog import get_exercise, solutions_dir
from sim.course.evaluate import Report
from sim.course.evaluate import TestResult as Result

EX = get_exercise(1)
SOL = solutions_dir(EX)

ALICE = '''"""Alice's envelope design."""

DIGEST_SCHEME = "jcs-v2"


def idempotency_key(intent) -> str:
    parts = [intent.trace_id, intent.task_id, str(intent.step), str(intent.attempt), str(intent.retry)]
    if intent.answers:
        parts.append("ack-" + str(intent.answers))
    parts.append(intent.sender)
    return "|".join(parts)


def payload(intent) -> dict:
    kept = {}
    for name, value in intent.body.items():
        kept[name] = value
    return kept


def evidence_refs(intent) -> list[str]:
    refs = []
    for r in intent.refs:
        if r not in refs:
            refs.append(r)
    return refs
'''

BOB = '''# bob's design
DIGEST_SCHEME = "jcs-v2"

_FIELDS = ("trace_id", "task_id", "step", "attempt", "retry", "answers", "sender")


def idempotency_key(intent) -> str:
    values = []
    for field_name in _FIELDS:
        value = getattr(intent, field_name, None)
        values.append("-" if value is None else str(value))
    key = "/".join(values)
    while "//" in key:
        key = key.replace("//", "/-/")
    return key


def payload(intent) -> dict:
    body = intent.body
    result = {key: body[key] for key in sorted(body)}
    return result


def evidence_refs(intent) -> list[str]:
    return sorted(set(intent.refs), key=lambda ref: (not ref.startswith("sha256:"), ref))
'''


def _renamed(text: str) -> str:
    """``text`` with every identifier of its own renamed (what a student hides a copy behind)."""
    for a, b in (("_FIELDS", "WANTED"), ("values", "pieces"), ("field_name", "fname"), ("value", "v"),
                 ("result", "out"), ("body = intent.body", "b0dy = intent.body"), ("body[key]", "b0dy[key]"),
                 ("sorted(body)", "sorted(b0dy)"), ("lambda ref", "lambda cit"), ("ref.startswith", "cit.startswith"),
                 ("), ref)", "), cit)"), ("# bob's design", "# my own design")):
        text = text.replace(a, b)
    return text


def _class(root: Path) -> Path:
    """alice and bob wrote their own; carol copied bob, dave copied bob and renamed everything; eve
    handed in the model answer, frank the starter; huge, binary and linked files beside them."""
    files = {"alice": ALICE, "bob": BOB, "carol": BOB, "dave": _renamed(BOB),
             "eve": (SOL / "design.py").read_text(encoding="utf-8"),
             "frank": (EX.folder / "design.py").read_text(encoding="utf-8"),
             "huge": "".join(f"table_{i} = [{i}, {i * 7 % 13}, '{i:x}']\n" for i in range(12_000))}  # 330 KB, his own
    for name, text in files.items():
        (root / name).mkdir(parents=True)
        (root / name / "design.py").write_text(text, encoding="utf-8")
    (root / "binary").mkdir()
    (root / "binary" / "design.py").write_bytes(b"\x7fELF\x00\x00" + os.urandom(4000))
    return root


def _collect(root: Path, work: Path):
    from sim.course.grade import collect

    work.mkdir(exist_ok=True)
    return collect(EX, root, work)


# ------------------------------------------------------------------------------------------ similarity


@pytest.mark.slow  # measured over 25 s in the quick loop at load 6-10 on 2 cores (2026-12-07)
def test_similarity_flags_the_copies_the_renamed_copy_and_the_model_answer_and_not_the_honest_answer(tmp_path):
    pytest.importorskip("copydetect", reason="copydetect is not installed (pip install -e '.[test]')")
    from sim.course.similarity import check_similarity

    subs = _collect(_class(tmp_path / "class"), tmp_path / "work")
    got = check_similarity(EX, subs, threshold=0.6, report=tmp_path / "out" / "similarity.html")
    pairs = {frozenset((f.student, f.other)) for f in got.flags if f.kind == "pair"}
    assert pairs == {frozenset(("bob", "carol")), frozenset(("bob", "dave")), frozenset(("carol", "dave"))}
    assert [f.student for f in got.flags if f.kind == "model"] == ["eve"]
    assert [f.student for f in got.flags if f.kind == "starter"] == ["frank"]
    assert not got.of("alice") and not got.of("huge")  # their own work: nothing
    assert all(f.similarity >= 0.6 for f in got.flags)
    assert "model answer" in got.of("eve")[0].text and "dave" in " ".join(f.text for f in got.of("bob"))
    # the hostile files: said, not compared (binary) or compared on their first 256 KB (huge)
    skipped = dict(got.skipped)
    assert "binary" in skipped["binary"] and "not compared" in skipped["binary"]
    assert "only its first 256 KB compared" in skipped["huge"]
    assert got.compared == 7  # every student but the binary one
    # copydetect's report of the matching lines: written, naming students, not the private copies' paths
    html = (tmp_path / "out" / "similarity.html").read_text(encoding="utf-8")
    assert got.report == tmp_path / "out" / "similarity.html"
    assert "highlight-red" in html and "bob/design.py" in html and "protolab-similarity-" not in html


def test_a_higher_threshold_flags_less_and_a_bad_one_is_refused(tmp_path):
    pytest.importorskip("copydetect", reason="copydetect is not installed (pip install -e '.[test]')")
    from sim.course.similarity import check_similarity
    from sim.errors import InputError

    root = tmp_path / "class"
    for name, text in (("alice", ALICE), ("bob", BOB), ("half", BOB.split("def payload")[0] + ALICE.split("def payload")[1])):
        (root / name).mkdir(parents=True)
        (root / name / "design.py").write_text(text, encoding="utf-8")
    subs = _collect(root, tmp_path / "work")
    low = check_similarity(EX, subs, threshold=0.3)
    high = check_similarity(EX, subs, threshold=0.99)
    assert any(f.kind == "pair" for f in low.flags) and not any(f.kind == "pair" for f in high.flags)
    assert low.report is None  # none asked for
    with pytest.raises(InputError) as e:
        check_similarity(EX, subs, threshold=0)
    assert e.value.code == "E_USAGE"


def test_similarity_reads_no_link_and_nothing_outside_the_submissions_folder(tmp_path):
    from sim.course.similarity import FILE_CAP, _vet

    folder = tmp_path / "alice"
    folder.mkdir()
    (folder / "design.py").symlink_to(SOL / "design.py")
    text, why = _vet(folder / "design.py", folder)
    assert text is None and "symbolic link" in why
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "design.py").write_text("x = 1\n")
    (folder / "sub").symlink_to(outside)  # a folder link: the file's real path leaves the folder
    text, why = _vet(folder / "sub" / "design.py", folder)
    assert text is None and "outside the submission's folder" in why
    (folder / "big.py").write_text("é" * FILE_CAP)  # 2 bytes a character: cut in the middle of one, still text
    text, why = _vet(folder / "big.py", folder)
    assert text is not None and len(text.encode()) <= FILE_CAP and "first 256 KB" in why
    (folder / "latin.py").write_bytes(b"caf\xe9 = 1\n")
    assert _vet(folder / "latin.py", folder) == (None, "latin.py is not UTF-8 text: not compared")


def test_without_copydetect_similarity_is_refused_before_anything_is_graded(tmp_path, capsys, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_copydetect(name, *a, **kw):
        if name == "copydetect" or name.startswith("copydetect."):
            raise ImportError("no copydetect")
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_copydetect)
    root = _class(tmp_path / "class")
    code, out, err = run_cli(capsys, "grade", "1", root, "--similarity", "--csv", tmp_path / "g.csv")
    assert code == 2 and out == "" and err.startswith("error: E_NO_SIMILARITY: ") and len(err.strip().splitlines()) == 1
    assert "pip install 'protolab[similarity]'" in err
    assert not (tmp_path / "g.csv").exists()


# ------------------------------------------------------------------------------------------ zero reasons


def _report(results, problem=None) -> Report:
    rep = Report(EX, Path("class/x"), results=results, hidden_ran=True, hidden_points=0, problem=problem)
    rep.sandbox = "bubblewrap"
    return rep


def _result(name, points, message, passed=None, max_points=10):
    return Result(name=name, title=name, hidden=False, points=points, max_points=max_points,
                      passed=points >= max_points if passed is None else passed, message=message)


def test_every_zero_says_why_in_the_gradebook_note_and_in_json():
    from sim.course.gradebook import _note

    one_cause = _report([_result("a", 0, "your code tried to start a process (os.fork) at design.py line 44"),
                         _result("b", 0, "your code tried to start a process (os.fork) at design.py line 44")])
    many = _report([_result("a", 0, "the key changed\nmore lines"), _result("b", 0, "a conflict was missed")])
    not_graded = _report([_result("a", 0, "not graded: no design.py")], problem="no design.py in the submission")
    some = _report([_result("a", 10, "ok"), _result("b", 0, "a conflict was missed")])
    assert _note(one_cause) == "0: every test failed for one reason: your code tried to start a process (os.fork) at design.py line 44"
    assert _note(many) == "0: 2 of 2 rules broke, none earned points; first: a: the key changed"
    assert _note(not_graded) == "no design.py in the submission"
    assert _note(some) == ""  # not a zero: the rule columns say what broke
    assert one_cause.to_dict()["zero_reason"].startswith("0: every test failed for one reason")
    assert not_graded.to_dict()["zero_reason"] == "0: no design.py in the submission"
    assert some.to_dict()["zero_reason"] == ""
    flagged = _report([_result("a", 10, "ok")])
    flagged.flags = ["similarity: 100% of design.py matches the model answer"]
    assert _note(flagged) == "similarity: 100% of design.py matches the model answer"
    assert flagged.to_dict()["flags"] == flagged.flags


# ------------------------------------------------------------------------------------------ feedback


def _secret_lines() -> list[str]:
    """Lines of the model answer a student cannot read elsewhere (the starter, the exercise's texts)."""
    known = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in sorted(EX.folder.rglob("*")) if p.is_file())
    out = []
    for line in (SOL / "design.py").read_text(encoding="utf-8").splitlines():
        text = line.strip().lstrip("#").strip()
        if len(text) > 20 and text not in known:
            out.append(text)
    assert len(out) > 5
    return out


@pytest.fixture(scope="module")
def wrong():
    """The planted wrong answer no-attempt, judged in this process (the kit's own file): its Report."""
    from sim.course.evaluate import evaluate

    return evaluate(EX, SOL / "wrong" / "no-attempt", hidden=True, isolate=False)


@pytest.fixture(scope="module")
def graded(wrong):
    """A planted wrong answer (the kit's own file, so judged in this process) as 'grade --json' gives it,
    and a hostile one made by hand: markup, a control character, a U+202E, 6 MB."""
    rep = wrong
    real = {"student": "no-attempt", **rep.to_dict()}
    evil = "<script>alert(1)</script>\u202e\x1b[31m" + "B" * 6_000_000
    hostile = _report([_result("keys-name-intents", 0, f"your key {evil} changed", max_points=20),
                       _result("payload-conflict", 10, "ok")])
    hostile = {"student": "<img src=x onerror=alert(1)>`**x**`", **hostile.to_dict()}
    hostile["tests"][0]["reproduce"] = "protolab exercise try 1 class/x -c \"print('```')\""
    hostile["tests"][0]["hint"] = "look at <b>this</b>"
    return real, hostile


def test_the_feedback_page_says_the_score_each_rule_what_broke_the_command_and_the_hint(graded):
    from sim.course.feedback import render

    real, _ = graded
    page = render(real, EX)
    assert page.startswith("<!DOCTYPE html>") and f"Score: {real['score']:g} / {real['max_score']:g}" in page
    for t in real["tests"]:
        assert f"<code>{t['name']}</code>" in page
    broken = [t for t in real["tests"] if not t["passed"]]
    assert broken
    for t in broken:
        assert t["hint"] and _esc(t["hint"]) in page
        assert t["reproduce"] and "To see it yourself" in page
        assert _esc(t["reproduce"].replace(real["submission"], EX.dirname)) in page  # the student's folder, not ours
    assert real["submission"] not in page  # no instructor's path
    assert "<script" not in page and "http" not in page.split("</style>")[1]  # self-contained: nothing fetched
    md = render(real, EX, "md")
    assert md.startswith("# Exercise 1") and f"**Score: {real['score']:g} / {real['max_score']:g}**" in md
    assert all(f"`{t['name']}`" in md for t in real["tests"])


def _esc(text: str) -> str:
    import html

    return html.escape(text, quote=True)


def test_the_feedback_never_holds_the_model_answer(graded, tmp_path):
    from sim.course.feedback import render

    real, _ = graded
    for fmt in ("html", "md"):
        text = render(real, EX, fmt)
        leaked = [line for line in _secret_lines() if line in text or _esc(line) in text]
        assert not leaked, leaked[:3]


def test_student_text_in_the_feedback_is_escaped_capped_and_cleaned(graded):
    from sim.course.feedback import render

    _, hostile = graded
    page = render(hostile, EX)
    assert "<script" not in page and "<img" not in page and "<b>" not in page
    assert "&lt;script&gt;" in page and "\u202e" not in page and "\x1b" not in page
    assert len(page) < 100_000 and "(cut: " in page
    md = render(hostile, EX, "md")
    assert "\u202e" not in md and len(md) < 100_000
    # the student's text sits in fenced blocks no backquote run of theirs can close
    fences = re.findall(r"(?m)^(`{3,})text$", md)
    assert fences and all(len(f) >= 4 for f in fences if "```" in md.split(f + "text", 1)[1].split("\n" + f, 1)[0])
    assert "\\<img src=x onerror=alert\\(1\\)\\>" in md  # the name: escaped, not markup


def test_feedback_export_writes_a_file_per_student_from_grade_json(graded, tmp_path, capsys):
    real, hostile = graded
    results = tmp_path / "results.json"
    results.write_text(json.dumps([real, hostile]), encoding="utf-8")
    code, out, err = run_cli(capsys, "feedback", "export", "--results", results, "--out", tmp_path / "fb")
    assert code == 0, err
    pages = sorted((tmp_path / "fb").rglob("*.html"))
    assert [p.relative_to(tmp_path / "fb").as_posix() for p in pages] == [
        "_img_src_x_onerror_alert_1_____x___/01-envelope-design.html", "no-attempt/01-envelope-design.html"]
    assert "wrote 2 feedback file(s)" in out
    code, out, err = run_cli(capsys, "feedback", "export", "--results", results, "--out", tmp_path / "md", "--format", "md")
    assert code == 0 and len(list((tmp_path / "md").rglob("*.md"))) == 2


@pytest.mark.parametrize("content, code", [("not json", "E_RESULTS"), ('{"a": 1}', "E_RESULTS"), ("[]", "E_RESULTS"),
                                           (None, "E_FILE_MISSING")])
def test_bad_results_are_refused_in_one_line_and_nothing_is_written(tmp_path, capsys, content, code):
    results = tmp_path / "results.json"
    if content is not None:
        results.write_text(content)
    rc, out, err = run_cli(capsys, "feedback", "export", "--results", results, "--out", tmp_path / "fb")
    assert rc == 2 and out == "" and err.startswith(f"error: {code}: ") and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "fb").exists()


def test_feedback_export_refuses_a_format_it_does_not_know(graded, tmp_path, capsys):
    results = tmp_path / "results.json"
    results.write_text(json.dumps([graded[0]]))
    rc, out, err = run_cli(capsys, "feedback", "export", "--results", results, "--out", tmp_path / "fb", "--format", "pdf")
    assert rc == 2 and err.startswith("error: E_USAGE: ") and not (tmp_path / "fb").exists()


# ------------------------------------------------------------------------------ feedback from the gradebook

ROSTER = ("id,name,email,lms_id,section\n"
          "alice,Alice Liddell,alice@example.edu,1001,A\n"
          "bob,Bob Tables,bob@example.edu,1002,A\n")


def _graded_term(tmp_path: Path, capsys, wrong):
    """A term in tmp_path/term: alice's ex1 graded twice (all passing, then the planted wrong answer, one
    day late: the second counts), mallory's ex1 (not on the roster), bob's lab1 (a lab: no stored
    details) overridden with a comment. Returns the course."""
    from datetime import datetime, timezone
    from types import SimpleNamespace

    from sim.course.term import assignment_rows, exercise_row, load_course

    (tmp_path / "roster.csv").write_text(ROSTER, encoding="utf-8")
    (tmp_path / "term").mkdir()
    code, _, err = run_cli(capsys, "course", "init", tmp_path / "term", "--roster", tmp_path / "roster.csv",
                           "--start", "2026-09-07", "--assignments", "ex1,lab1")
    assert code == 0, err
    course = load_course(tmp_path / "term" / "course.toml")
    ex1 = course.assignment_for("exercise", 1)
    src = SOL / "wrong" / "no-attempt"
    at = datetime(2026, 9, 15, 12, tzinfo=timezone.utc)  # due 2026-09-14 23:59 UTC: 1 day late
    first = _report([_result(t.name, t.max_points, "ok", max_points=t.max_points) for t in wrong.results])
    from sim.store.gradebook import open_gradebook

    book = open_gradebook(course.gradebook_path, create=course.name)
    students, rows = course.roster.students, assignment_rows(course)
    book.record(students, rows, "ex1", [exercise_row(course, ex1, SimpleNamespace(name="alice", source=src), first,
                                                     given=at)], "2026-09-16T08:00:00+00:00")
    book.record(students, rows, "ex1", [exercise_row(course, ex1, SimpleNamespace(name=n, source=src), wrong, given=at)
                                        for n in ("alice", "mallory")], "2026-09-17T08:00:00+00:00")
    book.record(students, rows, "lab1", [{
        "students": ["bob"], "submitted_as": "bob", "submitted_at": "", "submitted_from": "", "raw_score": 3.0,
        "max_score": 9.0, "late_days": 0, "penalty_percent": 0.0, "score": 3.0, "sandbox": "re-delivery",
        "zero_reason": "", "note": "", "breakdown": {"checkpoints": {"points": 3, "max": 6},
                                                     "answers": {"points": 0, "max": 3}, "genuine": True}}],
        "2026-09-17T09:00:00+00:00")
    book.close()
    code, _, err = run_cli(capsys, "gradebook", "override", "bob", "lab1", "8", "--comment", "checkpoint 4 met on "
                           "the lab machine", "--by", "prof", "--course-file", course.path)
    assert code == 0, err
    return course


def test_feedback_export_from_the_gradebook_writes_the_latest_attempt_or_the_override_per_student(
        wrong, tmp_path, capsys):
    course = _graded_term(tmp_path, capsys, wrong)
    out = tmp_path / "fb"
    code, said, err = run_cli(capsys, "feedback", "export", "--gradebook", course.gradebook_path, "--out", out)
    assert code == 0, err
    pages = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert pages == ["alice/ex1.html", "bob/lab1.html", "mallory/ex1.html"]
    assert "wrote 3 feedback file(s)" in said and "1 from an override" in said and "mallory" in said
    alice = (out / "alice" / "ex1.html").read_text(encoding="utf-8")
    # the latest attempt (the wrong answer, late), not the first (all passing)
    late_score = round(wrong.score * 0.9, 2)
    assert f"Score: {late_score:g} / {wrong.max_score:g}" in alice and "From attempt 2" in alice
    assert "Submitted late by 1 day(s): -10%" in alice
    broken = [r for r in wrong.results if not r.passed]
    assert broken and all(f"<code>{r.name}</code>" in alice for r in wrong.results)
    for r in broken:  # what broke, the command to see it (in the student's folder) and the hint, kept since grading
        assert r.hint and _esc(r.hint) in alice
        assert r.reproduce and _esc(r.reproduce.replace(str(SOL / "wrong" / "no-attempt"), EX.dirname)) in alice
    assert str(SOL) not in alice and "<script" not in alice
    bob = (out / "bob" / "lab1.html").read_text(encoding="utf-8")
    assert "Score: 8 / 9" in bob and "set by your instructor (prof" in bob and "checkpoint 4 met on the lab machine" in bob
    assert "scored 3 / 9" in bob and "<code>checkpoints</code>" in bob and "were not kept" in bob
    mallory = (out / "mallory" / "ex1.html").read_text(encoding="utf-8")
    assert "not matched to anyone on the course roster" in mallory and "Feedback for <strong>mallory" in mallory
    for page in (alice, mallory):  # never the model answer
        leaked = [line for line in _secret_lines() if line in page or _esc(line) in page]
        assert not leaked, leaked[:3]
    code, said, err = run_cli(capsys, "feedback", "export", "--gradebook", course.gradebook_path, "--out",
                              tmp_path / "md", "--assignment", "ex1", "--format", "md")
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "md").rglob("*.md")) == ["ex1.md", "ex1.md"]
    md = (tmp_path / "md" / "alice" / "ex1.md").read_text(encoding="utf-8")
    assert md.startswith("# Exercise 1") and all(f"`{r.name}`" in md for r in broken)


@pytest.mark.parametrize("args, code", [
    (["--assignment", "ex9"], "E_USAGE"),                      # no such assignment
    (["--results", "{results}"], "E_USAGE"),                   # a results file and the gradebook: one of them
    (["--format", "pdf"], "E_USAGE"),
    (["--out", "{book}"], "E_OUTPUT_IS_INPUT"),                # never over the gradebook it reads
])
def test_a_bad_feedback_export_from_the_gradebook_is_one_line_and_writes_nothing(wrong, tmp_path, capsys, args, code):
    course = _graded_term(tmp_path, capsys, wrong)
    before = course.gradebook_path.read_bytes()
    (tmp_path / "results.json").write_text("[]")
    args = [a.replace("{results}", str(tmp_path / "results.json")).replace("{book}", str(course.gradebook_path))
            for a in args]
    if "--out" not in args:
        args += ["--out", tmp_path / "fb"]
    rc, out, err = run_cli(capsys, "feedback", "export", "--gradebook", course.gradebook_path, *args)
    assert rc == 2 and out == "" and err.startswith(f"error: {code}: ") and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "fb").exists() and course.gradebook_path.read_bytes() == before


def test_a_schema_1_gradebook_is_read_as_it_is_and_brought_to_schema_2_when_written(wrong, tmp_path, capsys):
    """A gradebook written before attempts kept their feedback: its pages give each rule's points and
    reason and say the rest was not kept; the first write migrates it, in one transaction."""
    import sqlite3

    from sim.store.gradebook import GRADEBOOK_SCHEMA, open_gradebook

    course = _graded_term(tmp_path, capsys, wrong)
    con = sqlite3.connect(course.gradebook_path)
    con.execute("DELETE FROM overrides")
    con.execute("ALTER TABLE attempts DROP COLUMN feedback")
    con.execute("ALTER TABLE overrides DROP COLUMN submitted_as")
    con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    code, _, err = run_cli(capsys, "feedback", "export", "--gradebook", course.gradebook_path, "--out", tmp_path / "fb")
    assert code == 0, err
    alice = (tmp_path / "fb" / "alice" / "ex1.html").read_text(encoding="utf-8")
    assert "were not kept" in alice and all(f"<code>{r.name}</code>" in alice for r in wrong.results)
    assert open_gradebook(course.gradebook_path, readonly=True).version == 1  # reading changed nothing
    before = course.gradebook_path.read_bytes()
    code, out, err = run_cli(capsys, "gradebook", "override", "malory", "ex1", "5", "--comment", "x",
                             "--course-file", course.path)
    assert code == 2 and err.startswith("error: E_USAGE: ") and course.gradebook_path.read_bytes() == before
    code, out, err = run_cli(capsys, "gradebook", "override", "mallory", "ex1", "5", "--comment", "it is Mal",
                             "--course-file", course.path)
    assert code == 0 and "not on the roster" in out, err
    book = open_gradebook(course.gradebook_path, readonly=True)
    assert book.version == GRADEBOOK_SCHEMA and book.unmatched_overrides()[0]["submitted_as"] == "mallory"
    book.close()


# ------------------------------------------------------------------------------------------ off a terminal


def test_the_progress_bar_has_an_eta():
    from rich.progress import TimeRemainingColumn

    from sim.cli.common import _progress

    assert any(isinstance(c, TimeRemainingColumn) for c in _progress().columns)


def test_the_explain_grid_heads_each_column_with_its_legend_label_whole(graded):
    from rich.console import Console

    from sim.cli.course import _grid_tables
    from sim.course.grade import SHORT, fault_grid

    rep = Report(EX, Path("x"))
    names = list(SHORT)
    rep.results = [Result(name="fault-matrix", title="", hidden=False, points=0, max_points=8, passed=False,
                              message="", grid=[{"run": "r1", "scenario": "publish-report", "faults": ["resend:task_request"],
                                                 "invariants": {n: True for n in names}, "ok": True}])]
    assert fault_grid(rep)[0] == names
    for width in (80, 120, 10_000):
        con = Console(width=width, file=io.StringIO(), color_system=None)
        heads = []
        for t in _grid_tables(rep, width):
            con.print(t)
            heads += [c.header for c in t.columns[1:-1]]
        text = con.file.getvalue()
        assert heads == [SHORT[n] for n in names]  # every invariant once, in order, under its legend's label
        assert "…" not in "\n".join(line for line in text.splitlines() if "regr" in line or "scenario" in line)
        for label in heads:
            assert re.search(rf"(?<!\S){re.escape(label)}(?!\S)", text), (width, label)
        assert max(len(line.rstrip()) for line in text.splitlines()) <= width


@pytest.mark.slow
def test_grade_off_a_terminal_similarity_feedback_and_notes_end_to_end(tmp_path, capsys, monkeypatch):
    """The whole command, piped: one line per student however long its problem, the flags in the
    table, the CSV's note and --json, the report's path printed, a feedback page per student."""
    monkeypatch.delenv("COLUMNS", raising=False)  # piped, no width said (a test before it in this process may have set one)
    pytest.importorskip("copydetect", reason="copydetect is not installed (pip install -e '.[test]')")
    root = _class(tmp_path / "class")
    shutil.rmtree(root / "huge")  # 330 KB of tables is for the similarity test alone
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    code, out, err = run_cli(capsys, "grade", "1", root, "--csv", out_dir / "grades.csv", "--feedback", out_dir / "fb",
                             "--similarity")
    assert code == 0, err
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.lstrip().startswith("student"))
    rows = {line.split()[0]: line for line in lines[head + 2:head + 2 + 7]}
    assert set(rows) == {"alice", "binary", "bob", "carol", "dave", "eve", "frank"}  # one line each: nothing wrapped
    assert "…" not in rows["frank"] and len(rows["frank"]) > 200  # the problem whole, past 80 columns
    assert "matches the model answer" in rows["eve"] and "starter unchanged" in rows["frank"]
    assert f"the matching lines: {out_dir / 'grades.similarity.html'}" in out
    assert (out_dir / "grades.similarity.html").is_file()
    book = {r["student"]: r for r in csv.DictReader(io.StringIO((out_dir / "grades.csv").read_text()))}
    assert "matches carol's" in book["dave"]["note"] and "matches dave's" in book["bob"]["note"]
    for name, r in book.items():
        if float(r["score"]) == 0:
            assert r["note"].startswith(("0: ", "no design.py")) or "0: " in r["note"], (name, r["note"])
    assert not any("similarity" in r["note"] for n, r in book.items() if n == "alice")
    pages = sorted(p.parent.name for p in (out_dir / "fb").rglob("01-envelope-design.html"))
    assert pages == sorted(book)
    assert not list((out_dir / "fb").rglob("*similarity*"))  # the report quotes the model answer: never handed back
