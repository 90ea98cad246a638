"""Student text in feedback is cleaned and capped in every output: a 6 MB answer appears whole nowhere
(--explain, --json, the table, the CSV, Gradescope's results.json), control and bidirectional characters
(U+202E) never reach a terminal or a spreadsheet, folder names print on one line, and a CSV text cell is
never a formula."""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from conftest import run_cli

from sim.course.catalog import get_exercise, solutions_dir
from sim.course.evaluate import to_result
from sim.course.gradescope import feedback
from sim.course.safetext import CAP, clean_text, csv_cell

RLO = "\u202e"


def test_clean_text_replaces_control_and_bidi_characters_and_caps_each_line():
    assert clean_text(f"ok{RLO}txt.exe\x1b[31m\x07\u2066x\u200by") == "ok?txt.exe?[31m??x?y"
    assert clean_text("two\nlines\r\n") == "two\nlines\n"
    assert clean_text("two\nlines", lines=False) == "two?lines"
    big = clean_text("x" * 6_000_000)
    assert len(big) < CAP + 80 and big.endswith("(cut: 6,000,000 characters in all)")
    many = clean_text("\n".join(["y" * 100] * 10_000))
    assert len(many) < 5 * CAP


@pytest.mark.parametrize("cell, written", [
    ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"), ("+1", "'+1"), ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"),
    ("\tx", " x"), ("alice", "alice"), ("", ""), (f"{RLO}moc.exe", "?moc.exe"), ("a\nb", "a?b"),
])
def test_a_csv_text_cell_is_never_a_formula(cell, written):
    assert csv_cell(cell) == written
    assert csv_cell(55) == 55 and csv_cell(0.5) == 0.5  # numbers stay numbers


def test_a_verdict_quoting_6_mb_is_capped_in_every_field_of_the_result():
    ex = get_exercise(5)
    huge = "A" + RLO + "B" * 6_000_000
    v = {"score": 0.0, "message": f"your key {huge!s} is wrong", "reproduce": "protolab x", "output": huge,
         "witness": {"key": huge, "keys": [huge] * 500}, "signature": {"symptoms": [huge]},
         "attachment": {"name": "counterexample.toml", "text": huge}}
    r = to_result(ex.tests[0], v, ".")
    text = json.dumps(r.to_dict(), ensure_ascii=False)
    assert len(text) < 200_000 and RLO not in text
    assert len(r.message) < CAP + 100 and "(cut: " in r.message
    said = feedback(r)
    assert len(said) < 40_000 and RLO not in said


@pytest.fixture(scope="module")
def huge_answer(tmp_path_factory):
    """Exercise 4's model table with a rule whose state is 6 MB (and U+202E in it): every judge quotes it."""
    ex = get_exercise(4)
    root = tmp_path_factory.mktemp("huge")
    d = root / "class" / "alice"
    d.mkdir(parents=True)
    table = (solutions_dir(ex) / "machine.toml").read_text()
    state = ("Z" + RLO) * 1_500_000
    (d / "machine.toml").write_text(table.replace("[[rule]]", f'[[rule]]\nfrom = "{state}"\nto = "ready"\n'
                                                              'roles = ["manager"]\nreason = "r"\n\n[[rule]]', 1))
    assert (d / "machine.toml").stat().st_size > 6_000_000
    return root, d


@pytest.mark.slow  # grades a whole class in the sandbox: seconds; the slow set (CI) runs it
def test_a_6_mb_answer_appears_whole_nowhere(huge_answer, capsys):
    root, d = huge_answer
    code, out, err = run_cli(capsys, "grade", "4", d, "--json", "--csv", root / "g.csv", "--gradescope", root / "gs")
    assert code == 0, err
    rows = json.loads(out)
    assert rows[0]["score"] == 0 and len(out) < 100_000
    for t in rows[0]["tests"]:
        assert "unknown task state" in t["message"] and len(t["message"]) < CAP + 200
    gs = (root / "gs" / "alice" / "results.json").read_text()
    assert len(gs) < 100_000 and RLO not in gs
    assert (root / "g.csv").stat().st_size < 10_000
    code, out, _ = run_cli(capsys, "grade", "4", d, "--explain")
    assert len(out) < 100_000 and RLO not in out and "unknown task state" in out


@pytest.mark.slow  # grades a whole class in the sandbox: seconds; the slow set (CI) runs it
def test_folder_names_with_a_newline_a_bidi_override_or_a_formula_print_cleaned(tmp_path, capsys):
    cls = tmp_path / "class"
    names = ["two\nlines", f"evil{RLO}txt.py", "=HYPERLINK(\"x\",\"y\")", "-1"]
    for n in names:
        (cls / n).mkdir(parents=True)
        shutil.copy(solutions_dir(get_exercise(5)) / "effects.py", cls / n / "effects.py")
    code, out, err = run_cli(capsys, "grade", "5", cls, "--csv", tmp_path / "g.csv")
    assert code == 0, err
    assert RLO not in out and "two\nlines" not in out
    assert "two?lines" in out and "evil?txt.py" in out
    with open(tmp_path / "g.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert sorted(r[0] for r in rows[1:]) == sorted(["'-1", "'=HYPERLINK(\"x\",\"y\")", "evil?txt.py",
                                                     "two?lines"])
    assert all(r[1] == "80" and r[2] == "80" for r in rows[1:])  # numbers stay numbers
    code, out, _ = run_cli(capsys, "grade", "5", cls, "--json")
    assert sorted(r["student"] for r in json.loads(out)) == sorted(["-1", "=HYPERLINK(\"x\",\"y\")",
                                                                   "evil?txt.py", "two?lines"])
