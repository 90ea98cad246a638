"""A regrade merges into the gradebook: `grade N class/one --csv grades.csv` onto an existing 42-line
gradebook replaces that student's row only, keeps every other row byte for byte, and keeps the score
it replaced in the row's history; a file that is not this exercise's gradebook is refused before anything
is graded, and the file is only ever replaced whole. On Gradescope, a hidden test's result shows nowhere
before grades are published: no total, no subtotal that tells it."""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from conftest import run_cli

from sim.course.catalog import get_exercise, solutions_dir

EX5 = get_exercise(5)


def _student(root, name, answer):
    d = root / name
    d.mkdir(parents=True)
    shutil.copy(answer / "effects.py", d / "effects.py")
    return d


def _rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


@pytest.fixture
def gradebook(tmp_path, capsys):
    """A class of two graded into grades.csv, then 39 rows of other students added: 42 lines."""
    cls = tmp_path / "class"
    _student(cls, "alice", solutions_dir(EX5))
    _student(cls, "bob", solutions_dir(EX5) / "wrong" / "by-target")
    out = tmp_path / "grades.csv"
    code, _, err = run_cli(capsys, "grade", "5", cls, "--csv", out)
    assert code == 0, err
    rows = _rows(out)
    assert [r[0] for r in rows[1:]] == ["alice", "bob"] and rows[2][1:3] == ["55", "80"]
    with open(out, "a", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        for i in range(39):
            w.writerow([f"student-{i:02d}", "80", "80", "25", "25", "15", "15", "", ""])
    assert len(out.read_text().splitlines()) == 42
    return cls, out


def test_a_regrade_of_one_student_replaces_that_row_and_keeps_the_other_40(gradebook, capsys):
    cls, out = gradebook
    before = _rows(out)
    shutil.copy(solutions_dir(EX5) / "effects.py", cls / "bob" / "effects.py")  # bob fixed his answer
    code, text, err = run_cli(capsys, "grade", "5", cls / "bob", "--csv", out)
    assert code == 0, err
    said = " ".join(text.split())
    assert "1 row(s) replaced" in said and "40 other row(s) kept" in said
    after = _rows(out)
    assert len(after) == 42 and after[0] == before[0]
    assert [r[0] for r in after] == [r[0] for r in before]  # the same students in the same order
    assert [r for r in after if r[0] != "bob"] == [r for r in before if r[0] != "bob"]  # every other row as it was
    bob = next(r for r in after if r[0] == "bob")
    history = after[0].index("history")
    assert bob[1:3] == ["80", "80"] and bob[history].startswith("55/80 until ")
    # a second regrade keeps both earlier scores, newest first
    shutil.copy(solutions_dir(EX5) / "wrong" / "by-target" / "effects.py", cls / "bob" / "effects.py")
    assert run_cli(capsys, "grade", "5", cls / "bob", "--csv", out)[0] == 0
    bob = next(r for r in _rows(out) if r[0] == "bob")
    assert bob[1] == "55" and bob[history].startswith("80/80 until ") and "; 55/80 until " in bob[history]
    assert len(_rows(out)) == 42
    assert sorted(p.name for p in out.parent.iterdir() if p.name.startswith(".")) == []  # no partial file left


@pytest.mark.parametrize("content, says", [
    ("name,email\nalice,a@example.org\n", "is not a protolab gradebook"),
    ("student,score,max,keys-name-intents /20,note,history\nalice,20,70,20,,\n", "graded on other rules"),
    ("student,score,max,at-most-once /40,none-lost /10,key-names-the-effect /15,search /15,note,history\n"
     "carol,80,80,40,10,15,15,,\n", "graded with other weights"),
    ("student,score,max,at-most-once /25,none-lost /25,key-names-the-effect /15,search /15,note,history\n"
     "carol,80,80,25\n", "line 2 has 4 cells"),
    (b"\xff\xfe student", "not UTF-8"),
])
def test_a_file_that_is_not_this_exercises_gradebook_is_refused_before_grading_and_left_as_it_was(
        tmp_path, capsys, content, says):
    cls = tmp_path / "class"
    alice = _student(cls, "alice", solutions_dir(EX5))
    out = tmp_path / "grades.csv"
    out.write_bytes(content if isinstance(content, bytes) else content.encode())
    before = out.read_bytes()
    code, text, err = run_cli(capsys, "grade", "5", alice, "--csv", out)
    assert code == 2 and err.startswith("error: E_GRADEBOOK: ") and err.count("\n") == 1 and says in err, err
    assert out.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["class", "grades.csv"]
    assert sorted(p.name for p in cls.iterdir()) == ["alice"]  # nothing graded: nothing written beside it


def test_the_gradebook_is_replaced_only_whole(gradebook, capsys, monkeypatch):
    """A write that stops half way (here: the disk fills after the first rows) leaves the old file as it was."""
    import sim.course.gradebook as gb

    cls, out = gradebook
    before = out.read_bytes()
    real = gb.csv.writer

    class Half:
        def __init__(self, f):
            self.w = real(f)
            self.writerow = self.w.writerow

        def writerows(self, rows):
            self.w.writerows(list(rows)[:3])
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(gb.csv, "writer", Half)
    code, _, err = run_cli(capsys, "grade", "5", cls / "bob", "--csv", out)
    assert code == 2 and err.startswith("error: E_OUTPUT: ") and "No space left" in err
    assert out.read_bytes() == before
    assert not [p.name for p in out.parent.iterdir() if p.name.startswith(".")]  # no partial file left


def test_gradescope_shows_no_total_that_tells_a_hidden_test_before_publication(tmp_path, capsys):
    """Exercise 6's uncaused-verdicts breaks the hidden causal-chain rule only: "Score 90/100 ... Hidden tests: 1
    (10 points)" would tell the student which hidden test failed before grades are published."""
    ex = get_exercise(6)
    d = tmp_path / "class" / "alice"
    d.mkdir(parents=True)
    shutil.copy(solutions_dir(ex) / "wrong" / "uncaused-verdicts" / "trace.json", d / "trace.json")
    code, _, err = run_cli(capsys, "grade", "6", d, "--gradescope", tmp_path / "gs")
    assert code == 0, err
    res = json.loads((tmp_path / "gs" / "alice" / "results.json").read_text())
    hidden = [t for t in res["tests"] if t["extra_data"]["hidden"]]
    assert [t["extra_data"]["test"] for t in hidden] == ["causal-chain"] and hidden[0]["status"] == "failed"
    assert hidden[0]["visibility"] == "after_published"
    assert all(t["visibility"] == "visible" for t in res["tests"] if not t["extra_data"]["hidden"])
    assert res["visibility"] == "after_published"  # the total (which counts the hidden test) waits with it
    said = res["output"]
    assert "Score" not in said and f"{res['score']:g}" not in said.split("Sandbox:")[0].replace("90 of 90", "")
    assert "Public tests: 9 of 9 pass (90 of 90 points). Hidden tests: 1 (10 points), shown when grades are " \
           "published" in said
