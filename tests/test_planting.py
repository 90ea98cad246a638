"""The measure itself is checked: tests/planting.py (the scripts that plant bugs by hand) refuses a bug whose
text is not in its file exactly once, and always writes the original back."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from planting import Bug, PlantError, choose, main, planted, replaced, summary  # noqa: E402

SRC = "def f(a, b):\n    if a < b:\n        return a\n    return b\n"


def test_a_text_that_occurs_once_is_replaced():
    assert replaced(SRC, "a < b", "a <= b") == SRC.replace("a < b", "a <= b")


@pytest.mark.parametrize("text", ["a > b", "return", "\n"])  # absent; twice; many times
def test_a_text_absent_or_repeated_is_refused(text):
    with pytest.raises(PlantError, match="not once"):
        replaced(SRC, text, "x")


def test_a_replacement_equal_to_its_text_is_no_bug():
    with pytest.raises(PlantError):
        replaced(SRC, "a < b", "a < b")


def test_planting_restores_the_file_byte_for_byte_even_when_the_run_raises(tmp_path):
    f = tmp_path / "m.py"
    original = SRC.encode() + b"\r\n# trailing \xc3\xa9\n"
    f.write_bytes(original)
    bug = Bug("B1", "m.py", "< to <=", "a < b", "a <= b")
    with pytest.raises(RuntimeError, match="boom"):
        with planted(bug, tmp_path):
            assert b"a <= b" in f.read_bytes()
            raise RuntimeError("boom")
    assert f.read_bytes() == original


def test_planting_a_text_occurring_twice_leaves_the_file_alone(tmp_path):
    f = tmp_path / "m.py"
    f.write_text(SRC)
    with pytest.raises(PlantError, match="2 times"):
        with planted(Bug("B2", "m.py", "twice", "return", "yield"), tmp_path):
            pass
    assert f.read_text() == SRC


def test_main_refuses_an_ambiguous_bug_before_running_any(tmp_path):
    (tmp_path / "m.py").write_text(SRC)
    ran = []
    bugs = [Bug("B1", "m.py", "fine", "a < b", "a <= b"), Bug("B2", "m.py", "absent", "a > b", "a >= b")]
    with pytest.raises(PlantError, match="0 times"):
        main([], bugs, run=lambda b: ran.append(b.id) or (True, ""), root=tmp_path)
    assert ran == [] and (tmp_path / "m.py").read_text() == SRC


def test_main_runs_each_chosen_bug_planted_and_scores_the_non_equivalent(tmp_path, capsys):
    (tmp_path / "m.py").write_text(SRC)
    seen = {}

    def run(bug):
        seen[bug.id] = (tmp_path / "m.py").read_text()
        return bug.id == "B1", "FAILED tests/x.py::t"

    bugs = [Bug("B1", "m.py", "< to <=", "a < b", "a <= b"),
            Bug("B2", "m.py", "a for b", "return a\n", "return b\n", equivalent="why not"),
            Bug("B3", "m.py", "b dropped", "return b\n", "return 0\n")]
    assert main(["B1", "3"], bugs, run=run, root=tmp_path) == 1  # B3 survived
    assert set(seen) == {"B1", "B3"} and "a <= b" in seen["B1"] and "return 0" in seen["B3"]
    assert (tmp_path / "m.py").read_text() == SRC
    out = capsys.readouterr().out
    assert "SURVIVED" in out and '"score": 50.0' in out
    assert [b.id for b in choose(bugs, ["B3", "1"])] == ["B1", "B3"]
    with pytest.raises(SystemExit):
        choose(bugs, ["B9"])


def test_the_score_leaves_the_equivalent_out():
    rs = [{"bug": "A", "file": "f", "caught": True, "equivalent": False},
          {"bug": "B", "file": "f", "caught": False, "equivalent": True},
          {"bug": "C", "file": "g", "caught": False, "equivalent": False}]
    s = summary(rs)
    assert s["f"] == {"planted": 2, "equivalent": 1, "caught": 1, "non_equivalent_caught": 1, "non_equivalent": 1,
                      "score": 100.0, "survived": []}
    assert s["all"]["score"] == 50.0 and s["all"]["survived"] == ["C"]
