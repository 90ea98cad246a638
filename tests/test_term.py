"""The instructor's term (issue 44, parts 1 and 2): a course file and a roster (protolab course init),
submissions matched to the roster (folder, zip, Gradescope's submission_metadata.json), late days, one
SQLite gradebook that every grade writes an attempt into, overrides kept beside the attempts, and the
Canvas, Moodle and CSV exports checked against their column specs."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import sqlite3
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from conftest import journaled, run_cli

from sim.course.term import (LatePolicy, lateness, load_course, load_roster, match, read_metadata,
                             submitted_time)
from sim.labs.catalog import get_lab
from sim.labs.paths import play, reference
from sim.labs.session import LabSession
from sim.live import LiveRun
from sim.scenario import load_scenario
from sim.store import ProgressStore
from sim.store.gradebook import GRADEBOOK_SCHEMA, open_gradebook

ROOT = Path(__file__).resolve().parent.parent

ROSTER = ("id,name,email,lms_id,section\n"
          "alice,Alice Liddell,alice@example.edu,1001,A\n"
          "bob,Bob Tables,bob@example.edu,1002,A\n"
          "carol,\"=HYPERLINK(\"\"x\"\")\",carol@example.edu,1003,B\n")


def _cli(capsys, *args):
    return run_cli(capsys, *args)


def _csv(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"), newline="")))


def _term(tmp_path: Path, capsys, *extra) -> Path:
    (tmp_path / "roster.csv").write_text(ROSTER, encoding="utf-8")
    (tmp_path / "term").mkdir()
    code, out, err = _cli(capsys, "course", "init", tmp_path / "term", "--roster", tmp_path / "roster.csv",
                          "--start", "2026-09-07", "--assignments", "ex1,lab1,lab2", *extra)
    assert code == 0, err
    return tmp_path / "term" / "course.toml"


def _lab_submission(lab_number: int, work: Path, out: Path, capsys, *, done: bool = True) -> Path:
    """A learner's lab submission (.protolab), played by the lab's reference path (``done``) or not at all."""
    lab = get_lab(lab_number)
    work.mkdir(parents=True, exist_ok=True)
    db, prog = work / lab.default_db, work / "progress.db"
    live = journaled(LiveRun(load_scenario(lab.scenario), seed=lab.seed, policy=lab.policy, faults=list(lab.faults),
                             db=db))
    progress = ProgressStore.open(prog)
    session = LabSession(lab, live.store, progress)
    session.refresh()
    play(live, session, reference(lab) if done else [])
    live.close()
    progress.close()
    out.parent.mkdir(parents=True, exist_ok=True)
    code, _, err = _cli(capsys, "lab", "submit", str(lab_number), "-o", out, "--db", db, "--progress", prog)
    assert code == 0, err
    return out


def _nothing_new(folder: Path, before: set[str]) -> None:
    assert {p.name for p in folder.iterdir()} == before


# --- the course file and the roster ------------------------------------------------------------------


def test_course_init_writes_a_course_file_with_due_dates_and_a_checked_roster(tmp_path, capsys):
    path = _term(tmp_path, capsys, "--tz", "+02:00", "--late-per-day", "20", "--max-late-days", "2")
    course = load_course(path)
    assert [a.id for a in course.assignments] == ["ex1", "lab1", "lab2"]
    assert [(a.kind, a.number) for a in course.assignments] == [("exercise", 1), ("lab", 1), ("lab", 2)]
    assert course.assignments[0].due == datetime(2026, 9, 14, 23, 59, tzinfo=timezone(timedelta(hours=2)))
    assert '"2026-09-14T23:59:00+02:00"' in path.read_text()
    assert course.late == LatePolicy(per_day_percent=20, grace_minutes=15, max_late_days=2)
    assert [s.id for s in course.roster.students] == ["alice", "bob", "carol"]
    assert course.gradebook_path == path.parent / "gradebook.db"
    # a second init over it writes nothing
    code, _, err = _cli(capsys, "course", "init", path.parent, "--roster", tmp_path / "roster.csv")
    assert code == 2 and err.startswith("error: E_EXISTS:") and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("text,says", [
    ("id,name,email\nalice,A,a@x.edu\n", "header"),
    ("id,name,email,lms_id\nalice,A,a@x.edu,1\nalice,B,b@x.edu,2\n", "line 3"),
    ("id,name,email,lms_id\nalice,A,a@x.edu,1\nbob,B,A@X.EDU,2\n", "already line 2"),
    ("id,name,email,lms_id\nalice,A,not-an-address,1\n", "not an address"),
    ("id,name,email,lms_id\n../etc,A,a@x.edu,1\n", "is not one"),
    ("id,name,email,lms_id\nalice,A,a@x.edu\n", "cells"),
    ("id,name,email,lms_id\n", "no student"),
    ("", "empty"),
])
def test_a_bad_roster_is_refused_in_one_line_and_nothing_is_written(tmp_path, capsys, text, says):
    (tmp_path / "roster.csv").write_text(text, encoding="utf-8")
    (tmp_path / "term").mkdir()
    code, out, err = _cli(capsys, "course", "init", tmp_path / "term", "--roster", tmp_path / "roster.csv")
    assert code == 2 and err.startswith("error: E_ROSTER:") and len(err.strip().splitlines()) == 1, err
    assert says in err
    assert list((tmp_path / "term").iterdir()) == []


def test_a_roster_that_is_not_text_is_refused(tmp_path):
    (tmp_path / "r.csv").write_bytes(b"id,name,email,lms_id\n\xff\xfe,x,y@z,1\n")
    with pytest.raises(Exception) as e:
        load_roster(tmp_path / "r.csv")
    assert getattr(e.value, "code", "") == "E_ROSTER"


@pytest.mark.parametrize("edit,says", [
    (lambda t: t.replace('due = "2026-09-14T23:59:00+00:00"', 'due = "2026-09-14T23:59:00"'), "no time zone"),
    (lambda t: t.replace('kind = "lab"\nnumber = 1', 'kind = "lab"\nnumber = 999'), "no lab 999"),
    (lambda t: t.replace("per_day_percent = 10", "per_day_percent = 150"), "per_day_percent"),
    (lambda t: t.replace("[course]", "[cours]"), "[course]"),
    (lambda t: t + "\n[[assignment]]\nid = \"ex1\"\nkind = \"exercise\"\nnumber = 2\n", "twice"),
    (lambda t: t + "\nnot toml at all [", "not TOML"),
])
def test_a_bad_course_file_is_refused_before_anything_is_graded_or_written(tmp_path, capsys, edit, says):
    path = _term(tmp_path, capsys)
    path.write_text(edit(path.read_text()), encoding="utf-8")
    (tmp_path / "class").mkdir()
    before = {p.name for p in path.parent.iterdir()}
    code, out, err = _cli(capsys, "grade", "lab", "1", tmp_path / "class", "--course-file", path)
    assert code == 2 and err.startswith("error: E_COURSE_FILE:") and len(err.strip().splitlines()) == 1, err
    assert says in err
    _nothing_new(path.parent, before)


def test_the_course_file_is_the_named_one_else_course_toml_here_else_none(tmp_path, capsys, monkeypatch):
    from sim.course.term import find_course_file

    monkeypatch.chdir(tmp_path)
    assert find_course_file(None) is None
    (tmp_path / "course.toml").write_text("x")
    assert find_course_file(None) == Path("course.toml")
    with pytest.raises(Exception) as e:
        find_course_file(tmp_path / "missing.toml")
    assert e.value.code == "E_COURSE_FILE"
    code, _, err = _cli(capsys, "gradebook", "show", "--course-file", tmp_path / "missing.toml")
    assert code == 2 and err.startswith("error: E_COURSE_FILE:")


# --- matching and lateness ------------------------------------------------------------------------


def test_submissions_match_by_name_email_lms_id_and_gradescope_metadata(tmp_path):
    (tmp_path / "roster.csv").write_text(ROSTER)
    roster = load_roster(tmp_path / "roster.csv")
    assert [s.id for s in match("alice", tmp_path / "alice", roster)] == ["alice"]
    assert [s.id for s in match("BOB@example.edu", tmp_path / "x", roster)] == ["bob"]
    assert [s.id for s in match("1003", tmp_path / "x", roster)] == ["carol"]
    assert [s.id for s in match("alice~2", tmp_path / "x", roster)] == ["alice"]
    assert match("mallory", tmp_path / "mallory", roster) == []
    # Gradescope's export: a folder named for the submission id, the users in submission_metadata.json
    meta = {"id": 123456, "created_at": "2026-09-16T01:30:00.000000-07:00",
            "assignment": {"due_date": "2026-09-14T23:59:00.000000-07:00", "title": "ex1"},
            "users": [{"email": "bob@example.edu", "id": 77, "name": "Bob"},
                      {"email": "alice@example.edu", "id": 78, "name": "Alice"}]}
    folder = tmp_path / "submission_123456"
    folder.mkdir()
    (folder / "submission_metadata.json").write_text(json.dumps(meta))
    got = read_metadata(folder)
    assert [s.id for s in match(folder.name, folder, roster, got)] == ["bob", "alice"]  # a group: both
    at, how = submitted_time(folder, got, None)
    assert at == datetime(2026, 9, 16, 8, 30, tzinfo=timezone.utc) and how == "submission_metadata.json created_at"
    with zipfile.ZipFile(tmp_path / "submission_9.zip", "w") as z:
        z.writestr("submission_9/submission_metadata.json", json.dumps({**meta, "users": [meta["users"][1]]}))
    assert [s.id for s in match("submission_9", tmp_path / "submission_9.zip", roster,
                                read_metadata(tmp_path / "submission_9.zip"))] == ["alice"]
    (folder / "submission_metadata.json").write_text("[not, json")
    assert read_metadata(folder) is None
    # no metadata: the time given, else the files' modification time, said as such
    given = datetime(2026, 9, 15, tzinfo=timezone.utc)
    assert submitted_time(tmp_path / "x", None, given) == (given, "--submitted-at")
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "design.py").write_text("x")
    os.utime(tmp_path / "m" / "design.py", (1_790_000_000, 1_790_000_000))
    assert submitted_time(tmp_path / "m", None, None) == (datetime.fromtimestamp(1_790_000_000, timezone.utc),
                                                          "file mtime")


def test_late_days_count_each_started_day_after_the_grace_and_past_the_limit_give_zero():
    due = datetime(2026, 9, 14, 23, 59, tzinfo=timezone.utc)
    p = LatePolicy(per_day_percent=10, grace_minutes=15, max_late_days=3)
    assert lateness(due, due + timedelta(minutes=15), p) == (0, 0.0, "")
    assert lateness(due, due + timedelta(minutes=16), p)[:2] == (1, 10.0)
    assert lateness(due, due + timedelta(days=1, minutes=16), p)[:2] == (2, 20.0)
    assert lateness(due, due + timedelta(days=3, minutes=15), p)[:2] == (3, 30.0)
    days, pct, why = lateness(due, due + timedelta(days=3, minutes=16), p)
    assert (days, pct) == (4, 100.0) and "more than the 3 late day(s)" in why
    assert lateness(None, due, p) == (0, 0.0, "") and lateness(due, None, p) == (0, 0.0, "")
    other_zone = datetime(2026, 9, 15, 1, 0, tzinfo=timezone(timedelta(hours=2)))  # 23:00 UTC: on time
    assert lateness(due, other_zone, p) == (0, 0.0, "")


# --- the gradebook ----------------------------------------------------------------------------------


def _row(students, name, score, mx=10.0, late=0, pct=0.0, zero=""):
    return {"students": students, "submitted_as": name, "submitted_at": "2026-09-15T00:00:00+00:00",
            "submitted_from": "--submitted-at", "raw_score": score, "max_score": mx, "late_days": late,
            "penalty_percent": pct, "score": score * (1 - pct / 100), "breakdown": {"r1": {"points": score, "max": mx}},
            "sandbox": "bubblewrap", "zero_reason": zero, "note": ""}


def _book(tmp_path, capsys):
    path = _term(tmp_path, capsys)
    course = load_course(path)
    from sim.course.term import assignment_rows

    book = open_gradebook(course.gradebook_path, create=course.name)
    return course, book, assignment_rows(course)


def test_a_regrade_adds_an_attempt_the_latest_counts_and_an_override_is_kept_beside_them(tmp_path, capsys):
    course, book, assignments = _book(tmp_path, capsys)
    students = course.roster.students
    book.record(students, assignments, "ex1", [_row(["alice"], "alice", 4), _row(["bob"], "bob", 0, zero="no file"),
                                               _row([], "mallory", 9)], "t1")
    book.record(students, assignments, "ex1", [_row(["alice"], "alice", 8, late=1, pct=10)], "t2")
    assert [(a["attempt"], a["score"]) for a in book.attempts("alice", "ex1")] == [(1, 4.0), (2, 7.2)]
    assert book.latest_attempt("alice", "ex1")["breakdown"] == {"r1": {"points": 8, "max": 10.0}}
    g = {x["student"]: x for x in book.grades() if x["assignment"] == "ex1"}
    assert g["alice"]["score"] == 7.2 and g["alice"]["source"] == "attempt 2" and g["alice"]["late_days"] == 1
    assert g["bob"]["score"] == 0 and g["bob"]["why"] == "no file"
    assert g["carol"]["score"] is None
    book.override("bob", "ex1", 6, "regraded by hand: the file was misnamed", "ta1", "t3")
    book.record(students, assignments, "ex1", [_row(["bob"], "bob", 1)], "t4")  # an attempt after: kept, the override stands
    g = {x["student"]: x for x in book.grades() if x["assignment"] == "ex1"}
    assert g["bob"]["score"] == 6 and g["bob"]["source"] == "override"
    assert [a["attempt"] for a in book.attempts("bob", "ex1")] == [1, 2]
    assert book.overrides("bob")[0]["by"] == "ta1"
    assert [u["submitted_as"] for u in book.unmatched()] == ["mallory"]
    with pytest.raises(Exception) as e:
        book.override("nobody", "ex1", 1, "x", "me", "t")
    assert e.value.code == "E_USAGE"
    book.close()


def test_exports_follow_the_canvas_and_moodle_column_specs(tmp_path, capsys):
    course, book, assignments = _book(tmp_path, capsys)
    book.record(course.roster.students, assignments, "ex1",
                [_row(["alice"], "alice", 7), _row(["bob"], "bob", 3), _row([], "mallory", 9)], "t1")
    book.record(course.roster.students, assignments, "lab1", [_row(["alice"], "alice", 5, mx=6)], "t1")
    book.override("bob", "ex1", 5, "appeal", "ta", "t2")
    book.close()
    cf = course.path
    for fmt in ("canvas", "moodle", "csv"):
        code, out, err = _cli(capsys, "gradebook", "export", "--format", fmt, "-o", tmp_path / f"{fmt}.csv",
                              "--course-file", cf)
        assert code == 0, err
        assert ("unmatched" in err) == (fmt != "csv")
    canvas = _csv(tmp_path / "canvas.csv")
    # Canvas: Student, ID, SIS User ID, SIS Login ID, Section, then "Name (id)" per assignment; then Points Possible
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Envelope design (ex1)",
                         f"{get_lab(1).title} (lab1)", f"{get_lab(2).title} (lab2)"]
    assert canvas[1] == ["    Points Possible", "", "", "", "", "10", "6", ""]
    assert canvas[2] == ["Alice Liddell", "1001", "alice", "alice@example.edu", "A", "7", "5", ""]
    assert canvas[3] == ["Bob Tables", "1002", "bob", "bob@example.edu", "A", "5", "", ""]  # the override
    assert canvas[4][0].startswith("'=")  # a student's text never a formula
    assert len(canvas) == 5  # mallory is not on the roster: left out (and said so)
    moodle = _csv(tmp_path / "moodle.csv")
    assert moodle[0][:3] == ["ID number", "Email address", "Full name"] and len(moodle[0]) == 6
    assert moodle[1] == ["alice", "alice@example.edu", "Alice Liddell", "7", "5", ""]
    assert len(moodle) == 4
    whole = _csv(tmp_path / "csv.csv")
    assert whole[0][:7] == ["student", "name", "email", "lms_id", "section", "ex1", "ex1 source"]
    assert whole[2][5:7] == ["5", "override"]
    assert whole[-1][:2] == ["", "unmatched: mallory"] and whole[-1][5] == "9"
    code, _, err = _cli(capsys, "gradebook", "export", "--format", "blackboard", "-o", tmp_path / "x.csv",
                        "--course-file", cf)
    assert code == 2 and err.startswith("error: E_USAGE:") and not (tmp_path / "x.csv").exists()


def _canvas_id_of(header: str) -> str | None:
    """The Canvas assignment id Canvas's importer reads in a column header (Assignment.title_and_id: a
    header that ends in a space and a number in brackets names that assignment; anything else is a
    title, made a new assignment when none has it)."""
    import re

    m = re.fullmatch(r"(.*)\s\((\d+)\)", header)
    return m.group(2) if m else None


def test_a_canvas_id_in_the_course_file_heads_its_column_so_canvas_fills_the_existing_assignment(tmp_path, capsys):
    course, book, assignments = _book(tmp_path, capsys)
    book.record(course.roster.students, assignments, "ex1", [_row(["alice"], "alice", 7)], "t1")
    book.record(course.roster.students, assignments, "lab1", [_row(["bob"], "bob", 4, mx=6)], "t1")
    book.close()
    text = course.path.read_text(encoding="utf-8")
    course.path.write_text(text.replace('id = "ex1"\n', 'id = "ex1"\ncanvas_id = 48213\n')
                           .replace('id = "lab1"\n', 'id = "lab1"\ncanvas_id = "48214"\n'), encoding="utf-8")
    code, out, err = _cli(capsys, "gradebook", "export", "--format", "canvas", "-o", tmp_path / "c.csv",
                          "--course-file", course.path)
    assert code == 0, err
    rows = _csv(tmp_path / "c.csv")
    # Canvas's gradebook CSV: the student columns, in this order, then the assignments; then Points Possible
    assert rows[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert rows[0][5:] == ["Envelope design (48213)", f"{get_lab(1).title} (48214)", f"{get_lab(2).title} (lab2)"]
    assert [_canvas_id_of(h) for h in rows[0][5:]] == ["48213", "48214", None]  # lab2: a new Canvas assignment
    assert "Points Possible" in rows[1][0] and rows[1][1:5] == ["", "", "", ""] and rows[1][5:7] == ["10", "6"]
    assert rows[2][:6] == ["Alice Liddell", "1001", "alice", "alice@example.edu", "A", "7"]
    assert rows[3][1] == "1002" and rows[3][6] == "4"
    said = [line for line in out.splitlines() if line.startswith("no canvas_id")]
    assert len(said) == 1 and said[0].split(" for: ")[1].startswith("lab2 (")  # one line: the assignments without
    # moodle and csv are not Canvas's: their headers stay the course's own
    code, out, err = _cli(capsys, "gradebook", "export", "--format", "moodle", "-o", tmp_path / "m.csv",
                          "--course-file", course.path)
    assert code == 0 and "no canvas_id" not in out and _csv(tmp_path / "m.csv")[0][3] == "Envelope design (ex1)"
    # with no canvas_id at all, the line still names each assignment it means
    course.path.write_text(text, encoding="utf-8")
    code, out, err = _cli(capsys, "gradebook", "export", "--format", "canvas", "-o", tmp_path / "c2.csv",
                          "--course-file", course.path)
    said = [line for line in out.splitlines() if line.startswith("no canvas_id")]
    assert code == 0 and len(said) == 1 and said[0].split(" for: ")[1].startswith("ex1, lab1, lab2 ("), said


def test_an_assignment_id_of_digits_is_never_read_by_canvas_as_another_assignments_id():
    from sim.course.term import _canvas_column

    assert _canvas_id_of(_canvas_column({"title": "Midterm", "id": "2024"}, None)) is None
    assert _canvas_id_of(_canvas_column({"title": "Midterm", "id": "2024"}, 777)) == "777"


@pytest.mark.parametrize("value", ['"abc"', "0", "-3", "1.5", "true", "48213"])
def test_a_bad_canvas_id_is_refused_in_one_line_before_anything_is_written(tmp_path, capsys, value):
    path = _term(tmp_path, capsys)
    text = path.read_text(encoding="utf-8").replace('id = "ex1"\n', 'id = "ex1"\ncanvas_id = 48213\n')
    path.write_text(text.replace('id = "lab1"\n', f'id = "lab1"\ncanvas_id = {value}\n'), encoding="utf-8")
    code, out, err = _cli(capsys, "gradebook", "export", "--format", "canvas", "-o", tmp_path / "c.csv",
                          "--course-file", path)
    assert code == 2 and err.startswith("error: E_COURSE_FILE: ") and "canvas_id" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "c.csv").exists()


@pytest.mark.slow  # measured over 25 s in the quick loop at load 6-10 on 2 cores (2026-12-07)
def test_an_unmatched_submission_is_overridden_by_its_name_and_a_typo_is_refused(tmp_path, capsys):
    course, book, assignments = _book(tmp_path, capsys)
    book.record(course.roster.students, assignments, "ex1", [_row(["alice"], "alice", 7), _row([], "mallory", 2)], "t1")
    book.close()
    cf = course.path
    before = course.gradebook_path.read_bytes()
    for who, assignment in (("malory", "ex1"), ("mallory", "lab1"), ("Alice", "ex1")):
        code, out, err = _cli(capsys, "gradebook", "override", who, assignment, "5", "--comment", "x", "--course-file", cf)
        assert code == 2 and out == "" and err.startswith("error: E_USAGE: ") and len(err.strip().splitlines()) == 1
        assert course.gradebook_path.read_bytes() == before  # nothing written
    assert "did you mean 'mallory'" in _cli(capsys, "gradebook", "override", "malory", "ex1", "5", "--comment", "x",
                                            "--course-file", cf)[2]
    code, out, err = _cli(capsys, "gradebook", "override", "mallory", "ex1", "6", "--comment", "she is Mal Lory, "
                          "enrolled late", "--by", "prof", "--course-file", cf)
    assert code == 0 and "not on the roster" in out, err
    code, out, err = _cli(capsys, "gradebook", "show", "--course-file", cf, "--json")
    shown = json.loads(out)
    o = shown["unmatched_overrides"]
    assert [(x["submitted_as"], x["student"], x["score"], x["by"]) for x in o] == [("mallory", "", 6.0, "prof")]
    assert all(g["score"] != 6.0 for g in shown["grades"])  # no roster student's grade changed
    code, out, err = _cli(capsys, "gradebook", "show", "--course-file", cf)
    assert "mallory  ex1 override: 6*" in out
    code, out, err = _cli(capsys, "gradebook", "export", "--format", "csv", "-o", tmp_path / "all.csv", "--course-file", cf)
    last = _csv(tmp_path / "all.csv")[-1]
    assert last[:2] == ["", "unmatched: mallory"] and last[5:7] == ["6", "override"]
    # and shown on its own, by the same name: the grade that counts, the attempt, the override
    code, out, err = _cli(capsys, "gradebook", "show", "mallory", "--course-file", cf)
    assert code == 0 and "not on the roster" in out and "ex1: 6/10 from override" in out, (out, err)
    assert "ex1 attempt 1: 2/10" in out and "enrolled late" in out
    one = json.loads(_cli(capsys, "gradebook", "show", "mallory", "--course-file", cf, "--json")[1])
    assert one["unmatched"] == "mallory" and one["grades"]["ex1"]["score"] == 6.0 and len(one["attempts"]) == 1
    code, out, err = _cli(capsys, "gradebook", "show", "malory", "--course-file", cf)
    assert code == 2 and err.startswith("error: E_USAGE: ") and len(err.strip().splitlines()) == 1


def test_an_override_of_someone_not_on_the_roster_before_any_grading_makes_no_gradebook(tmp_path, capsys):
    path = _term(tmp_path, capsys)
    code, out, err = _cli(capsys, "gradebook", "override", "zed", "ex1", "5", "--comment", "x", "--course-file", path)
    assert code == 2 and err.startswith("error: E_USAGE: ") and len(err.strip().splitlines()) == 1
    assert not (path.parent / "gradebook.db").exists()
    code, out, err = _cli(capsys, "gradebook", "override", "alice", "ex9", "5", "--comment", "x", "--course-file", path)
    assert code == 2 and err.startswith("error: E_USAGE: ") and not (path.parent / "gradebook.db").exists()


@pytest.mark.slow  # measured over 25 s in the quick loop at load 6-10 on 2 cores (2026-12-07)
def test_a_newer_a_damaged_a_foreign_or_a_read_only_gradebook_is_refused_and_left_as_it_was(tmp_path, capsys):
    course, book, _ = _book(tmp_path, capsys)
    book.close()
    gb = course.gradebook_path
    (tmp_path / "class").mkdir()

    def refused(code_expected: str):
        before = gb.read_bytes()
        code, _, err = _cli(capsys, "gradebook", "override", "alice", "ex1", "5", "--comment", "x",
                            "--course-file", course.path)
        assert code == 2 and err.startswith(f"error: {code_expected}:") and len(err.strip().splitlines()) == 1, err
        code, _, err = _cli(capsys, "grade", "lab", "1", tmp_path / "class", "--course-file", course.path)
        assert code == 2 and err.startswith(f"error: {code_expected}:"), err
        assert gb.read_bytes() == before

    saved = gb.read_bytes()
    con = sqlite3.connect(gb)
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(GRADEBOOK_SCHEMA + 1)])
    con.commit()
    con.close()
    refused("E_GRADEBOOK_NEWER")
    gb.write_bytes(saved[:4096] + b"\0" * 100)
    refused("E_GRADEBOOK")
    gb.write_bytes(b"student,score,max\n")
    refused("E_GRADEBOOK")
    con = sqlite3.connect(gb.with_name("other.db"))
    con.execute("CREATE TABLE meta (key, value)")
    con.commit()
    con.close()
    shutil.copy(gb.with_name("other.db"), gb)
    refused("E_GRADEBOOK")
    gb.write_bytes(saved)
    gb.chmod(0o444)
    refused("E_GRADEBOOK_READONLY")
    gb.chmod(0o644)
    code, _, err = _cli(capsys, "gradebook", "override", "alice", "ex1", "5", "--comment", "ok", "--by", "ta",
                        "--course-file", course.path)
    assert code == 0, err


# --- a term graded through the command line ---------------------------------------------------------


def test_a_lab_term_matched_late_regraded_overridden_and_exported(tmp_path, capsys):
    """grade lab with a course file: a folder per student, one by Gradescope's metadata (late), one
    nobody on the roster; a regrade; an override; the exports."""
    path = _term(tmp_path, capsys)
    sub = _lab_submission(1, tmp_path / "play", tmp_path / "done.protolab", capsys)
    empty = _lab_submission(1, tmp_path / "play0", tmp_path / "empty.protolab", capsys, done=False)
    klass = tmp_path / "lab1-class"
    (klass / "alice").mkdir(parents=True)
    shutil.copy(sub, klass / "alice" / "lab1.protolab")
    (klass / "submission_555").mkdir()
    shutil.copy(empty, klass / "submission_555" / "lab1.protolab")
    (klass / "submission_555" / "submission_metadata.json").write_text(json.dumps(
        {"id": 555, "created_at": "2026-09-23T10:00:00-07:00", "users": [{"email": "bob@example.edu", "id": 1}]}))
    shutil.copy(sub, klass / "mallory.protolab")
    code, out, err = _cli(capsys, "grade", "lab", "1", klass, "--course-file", path,
                          "--submitted-at", "2026-09-21T12:00:00+00:00")
    assert code == 0, err
    assert "3 attempt(s) of lab1 recorded" in out
    assert "late: submission_555, 2 day(s), -20%" in out  # due 2026-09-21T23:59Z, submitted 09-23 17:00Z
    assert "unmatched: 1 submission(s)" in out and "mallory" in out
    book = open_gradebook(path.parent / "gradebook.db", readonly=True)
    alice = book.latest_attempt("alice", "lab1")
    assert alice["submitted_from"] == "--submitted-at" and alice["late_days"] == 0
    assert alice["score"] == alice["max_score"] > 0 and alice["sandbox"].startswith("re-delivery")
    bob = book.latest_attempt("bob", "lab1")
    assert bob["submitted_as"] == "submission_555" and bob["submitted_from"] == "submission_metadata.json created_at"
    assert bob["score"] == 0 and bob["zero_reason"]  # every zero has its reason
    book.close()
    # a regrade of alice alone: a second attempt, the first kept
    (tmp_path / "again" / "alice").mkdir(parents=True)
    shutil.copy(sub, tmp_path / "again" / "alice" / "lab1.protolab")
    code, out, err = _cli(capsys, "grade", "lab", "1", tmp_path / "again", "--course-file", path,
                          "--submitted-at", "2026-09-22T00:20:00+00:00")
    assert code == 0 and "1 regrade(s)" in out, err
    code, out, err = _cli(capsys, "gradebook", "override", "bob", "lab1", "2", "--comment", "partial credit",
                          "--by", "prof", "--course-file", path)
    assert code == 0, err
    code, out, err = _cli(capsys, "gradebook", "show", "--course-file", path, "--json")
    shown = json.loads(out)
    g = {(x["student"], x["assignment"]): x for x in shown["grades"]}
    assert g[("alice", "lab1")]["source"] == "attempt 2" and g[("alice", "lab1")]["late_days"] == 1
    assert g[("bob", "lab1")]["score"] == 2 and g[("bob", "lab1")]["why"] == "partial credit"
    assert [u["submitted_as"] for u in shown["unmatched"]] == ["mallory"]
    code, out, err = _cli(capsys, "gradebook", "show", "alice", "--course-file", path)
    assert code == 0 and "lab1 attempt 1" in out and "lab1 attempt 2" in out and "late 1 day(s): -10%" in out
    code, out, err = _cli(capsys, "gradebook", "show", "--course-file", path)
    assert code == 0 and "mallory" in out and "2*" in out
    code, out, err = _cli(capsys, "gradebook", "export", "--format", "canvas", "-o", tmp_path / "c.csv",
                          "--course-file", path)
    rows = _csv(tmp_path / "c.csv")
    lab = get_lab(1)
    col = rows[0].index(f"{lab.title} (lab1)")
    assert rows[2][2] == "alice" and float(rows[2][col]) == round(alice["max_score"] * 0.9, 2)
    assert rows[3][2] == "bob" and rows[3][col] == "2"


def test_the_course_file_in_the_current_folder_is_used_and_csv_gradebooks_still_work(tmp_path, capsys,
                                                                                      monkeypatch):
    path = _term(tmp_path, capsys)
    sub = _lab_submission(1, tmp_path / "play", tmp_path / "done.protolab", capsys)
    (tmp_path / "k").mkdir()
    shutil.copy(sub, tmp_path / "k" / "alice.protolab")
    monkeypatch.chdir(path.parent)
    code, out, err = _cli(capsys, "grade", "lab", "1", tmp_path / "k", "--csv", tmp_path / "lab.csv")
    assert code == 0, err
    assert "gradebook gradebook.db: 1 attempt(s) of lab1" in out
    assert _csv(tmp_path / "lab.csv")[1][0] == "alice"
    code, _, err = _cli(capsys, "grade", "lab", "1", tmp_path / "k", "--csv", path.parent / "gradebook.db")
    assert code == 2 and "E_OUTPUT_IS_INPUT" in err  # the gradebook is never a CSV's output


# --- a term with an exercise graded in the sandbox (slow: student code runs) ------------------------


@pytest.mark.slow
def test_a_scripted_term_with_an_exercise_a_late_submission_and_a_regrade(tmp_path, capsys):
    path = _term(tmp_path, capsys)
    code, _, err = _cli(capsys, "kit", "classroom", "1", tmp_path / "gen", "--course", ROOT)
    assert code == 0, err
    klass = tmp_path / "ex1"
    klass.mkdir()
    shutil.copytree(tmp_path / "gen" / "solution", klass / "alice")
    shutil.make_archive(str(klass / "bob"), "zip", tmp_path / "gen" / "wrong-no-attempt")
    shutil.copytree(tmp_path / "gen" / "starter", klass / "zed")
    code, out, err = _cli(capsys, "grade", "1", klass, "--course-file", path, "--course", ROOT,
                          "--submitted-at", "2026-09-15T12:00:00+00:00", "--csv", tmp_path / "ex1.csv")
    assert code == 0, err
    assert "late: alice, 1 day(s), -10%" in out and "unmatched: 1 submission(s)" in out and "zed" in out
    book = open_gradebook(path.parent / "gradebook.db", readonly=True)
    a = book.latest_attempt("alice", "ex1")
    assert a["raw_score"] == a["max_score"] and a["score"] == round(a["max_score"] * 0.9, 2)
    assert a["sandbox"] and set(a["breakdown"]) == {r for r in _csv(tmp_path / "ex1.csv")[0][3:-2]
                                                  for r in [r.split(" /")[0]]}
    b = book.latest_attempt("bob", "ex1")
    assert b["submitted_as"] == "bob" and b["score"] < b["max_score"]
    assert book.unmatched()[0]["submitted_as"] == "zed"
    book.close()
    code, out, err = _cli(capsys, "grade", "1", klass / "alice", "--course-file", path, "--course", ROOT,
                          "--submitted-at", "2026-09-14T20:00:00+00:00")
    assert code == 0 and "1 regrade(s)" in out, err
    book = open_gradebook(path.parent / "gradebook.db", readonly=True)
    assert [x["score"] for x in book.attempts("alice", "ex1")] == [round(a["max_score"] * 0.9, 2), a["max_score"]]
    book.close()
    # the feedback to hand back, from the gradebook: graded in the sandbox, the hints kept with each attempt
    code, out, err = _cli(capsys, "feedback", "export", "--gradebook", path.parent / "gradebook.db", "--out",
                          tmp_path / "fb")
    assert code == 0, err
    assert sorted(p.relative_to(tmp_path / "fb").as_posix() for p in (tmp_path / "fb").rglob("*.html")) == [
        "alice/ex1.html", "bob/ex1.html", "zed/ex1.html"]
    bob = (tmp_path / "fb" / "bob" / "ex1.html").read_text(encoding="utf-8")
    assert "What broke" in bob and "Hint: " in bob and "To see it yourself" in bob and str(klass) not in bob
    assert "From attempt 2" in (tmp_path / "fb" / "alice" / "ex1.html").read_text(encoding="utf-8")
    assert "not matched to anyone on the course roster" in (tmp_path / "fb" / "zed" / "ex1.html").read_text()


def test_browse_serves_a_gradebook_with_its_facets_and_queries(tmp_path, capsys):
    import asyncio

    from sim.web.datasette import make_app

    course, book, assignments = _book(tmp_path, capsys)
    book.record(course.roster.students, assignments, "ex1",
                [_row(["alice"], "alice", 7, late=1, pct=10), _row(["bob"], "bob", 0, zero="no design.py"),
                 _row([], "mallory", 9)], "t1")
    book.close()
    gb = course.gradebook_path

    async def pages():
        app = make_app(gb, None)
        await app.invoke_startup()
        attempts = (await app.client.get("/gradebook/attempts.json?_extra=facet_results")).json()
        zeros = (await app.client.get("/gradebook/zeros.json?_shape=objects")).json()
        unmatched = (await app.client.get("/gradebook/unmatched.json?_shape=objects")).json()
        return attempts, zeros, unmatched

    attempts, zeros, unmatched = asyncio.run(pages())
    facets = attempts["facet_results"]["results"] if "results" in attempts["facet_results"] else attempts["facet_results"]
    assert {"assignment", "late_days", "submitted_from", "sandbox"} <= set(facets)
    assert [(r["student"], r["zero_reason"]) for r in zeros["rows"]] == [("bob", "no design.py")]
    assert [r["submitted_as"] for r in unmatched["rows"]] == ["mallory"]
    # a file that is neither a run nor a gradebook is refused in one line
    (tmp_path / "x.db").write_bytes(b"not a database")
    code, _, err = _cli(capsys, "browse", tmp_path / "x.db", "--port", "0")
    assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1


def test_an_exercise_not_in_the_course_file_or_a_bad_rubric_override_is_refused_before_grading(tmp_path, capsys):
    path = _term(tmp_path, capsys)
    (tmp_path / "class").mkdir()
    before = {p.name for p in path.parent.iterdir()}
    code, _, err = _cli(capsys, "grade", "2", tmp_path / "class", "--course-file", path, "--course", ROOT)
    assert code == 2 and err.startswith("error: E_COURSE_FILE:") and "exercise 2" in err, err
    path.write_text(path.read_text().replace('# rubric = "rubrics/ex1.toml"', 'rubric = "rubrics/ex1.toml"'))
    assert load_course(path).assignments[0].rubric == path.parent / "rubrics" / "ex1.toml"
    code, _, err = _cli(capsys, "grade", "1", tmp_path / "class", "--course-file", path, "--course", ROOT)
    assert code == 2 and err.startswith("error: E_FILE_MISSING:") and "ex1.toml" in err, err
    (path.parent / "rubrics").mkdir()
    (path.parent / "rubrics" / "ex1.toml").write_text("[rules]\nno-such-rule = 5\n")
    code, _, err = _cli(capsys, "grade", "1", tmp_path / "class", "--course-file", path, "--course", ROOT)
    assert code == 2 and err.startswith("error: E_RUBRIC:"), err
    _nothing_new(path.parent, before | {"rubrics"})
    code, _, err = _cli(capsys, "grade", "lab", "1", tmp_path / "class", "--submitted-at", "yesterday",
                        "--course-file", path)
    assert code == 2 and err.startswith("error: E_USAGE:") and "ISO 8601" in err
