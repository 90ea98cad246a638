"""The student kit (protolab kit student) and the instructor's verification of every exercise's
answers (protolab kit verify).

The kit is checked by what its files hold, not by their folder names: a solution copied in under
another name, a hidden test's title in prose, a hint table keyed by a hidden test's name are all
leaks. Its public checks run in a child process that has only the kit on its path."""

import json
import shutil
import tomllib
from pathlib import Path

import pytest

from conftest import run_cli

from sim.course.catalog import exercises, solutions_dir
from sim.course.kit import (
    KIT_MARKER,
    _secrets,
    build_student_kit,
    check_kit_content,
    copy_project,
    project_root,
    smoke_check,
    verify_kit,
)
from sim.errors import InputError, ProtolabError

ROOT = Path(__file__).resolve().parent.parent


_cli = run_cli  # conftest's: the one way tests call the CLI in-process


@pytest.fixture(scope="module")
def kit_copy(tmp_path_factory) -> Path:
    """What the kit copies from the checkout, without the kit's own checks (each test checks)."""
    d = tmp_path_factory.mktemp("kit") / "kit"
    copy_project(ROOT, d)
    return d


def test_the_kit_is_built_from_the_checkout_and_copies_no_solutions_folder(kit_copy):
    assert project_root() == ROOT
    top = {p.name for p in kit_copy.iterdir()}
    assert {"sim", "data", "labs", "exercises", "pyproject.toml", "README.md"} <= top
    assert "solutions" not in top and "tests" not in top and "docs" not in top
    assert not list(kit_copy.rglob("__pycache__")) and not list(kit_copy.rglob("hidden.toml"))
    assert sorted(p.name for p in (kit_copy / "exercises").iterdir()) == [e.dirname for e in exercises()]


def test_every_solution_file_has_lines_the_content_check_can_recognise():
    sec = _secrets(ROOT)
    for ex in exercises():
        for name in ex.files:  # the model answers: a copy of any of them is recognisable
            assert f"solutions/{ex.dirname}/{name}" not in sec.empty
    assert sec.titles and sec.names


@pytest.mark.slow  # measured over 25 s in the quick loop at load 6-10 on 2 cores (2026-12-07)
def test_the_content_check_finds_solutions_and_hidden_tests_by_content_not_by_folder_name(kit_copy, tmp_path):
    kit = tmp_path / "kit"
    shutil.copytree(kit_copy, kit)
    sol1 = solutions_dir(exercises()[0])
    # a model answer and a planted wrong answer under innocent names, far from any solutions/ folder
    shutil.copy(sol1 / "design.py", kit / "labs" / "example_design.py")
    shutil.copy(sol1 / "wrong" / "clock-key" / "design.py", kit / "data" / "notes.txt")
    # exercise 3's answer is mostly the engine's reference decide (which the kit ships); its own lines still show
    shutil.copy(ROOT / "solutions" / "03-deduplicating-consumer" / "decide.py", kit / "sim" / "scratch_decide.py")
    # a hidden test's title in prose, a hidden test's name as a key, hidden.toml pasted into a string
    (kit / "exercises" / "06-conversation-trace" / "NOTES.md").write_text(
        "Also graded: every message hangs from the opening request,\nafter its causes.\n")
    # (a hidden test's name: exercise 1 keeps none, its rules are public with hidden cases)
    hider = next(ex for ex in exercises() if ex.hidden_tests())
    hidden_name = hider.hidden_tests()[0].name
    (kit / "exercises" / hider.dirname / "extra.toml").write_text(f'[[hint]]\ntest = "{hidden_name}"\ntext = "x"\n')
    hidden7 = (ROOT / "solutions" / "07-self-check" / "hidden.toml").read_text()
    (kit / "sim" / "embedded.py").write_text(f"TESTS = {hidden7!r}\n")
    found = "\n".join(check_kit_content(kit, root=ROOT))
    assert "labs/example_design.py line" in found and "solutions/01-envelope-design/design.py" in found
    assert "data/notes.txt line" in found and "wrong/clock-key/design.py" in found
    assert "sim/scratch_decide.py line" in found and "solutions/03-deduplicating-consumer/decide.py" in found
    assert "exercises/06-conversation-trace/NOTES.md holds the title of 06-conversation-trace hidden test causal-chain" in found
    assert f"exercises/{hider.dirname}/extra.toml holds the name of {hider.dirname} hidden test {hidden_name}" in found
    assert "sim/embedded.py" in found
    # the starter itself, the engine and the judges' own docstrings are not leaks
    for rel in ("exercises/01-envelope-design/design.py", "sim/intake.py", "sim/course/judges/trace.py"):
        assert rel not in found


@pytest.mark.slow  # measured over 25 s in the quick loop at load 6-10 on 2 cores (2026-12-07)
def test_the_student_kit_holds_no_solution_and_no_hidden_test(kit_copy):
    """What 'kit student' copies from this checkout, checked by content (the test above shows what
    that catches); a leak here makes 'protolab kit student' refuse with E_KIT_LEAK."""
    assert check_kit_content(kit_copy, root=ROOT) == []


@pytest.mark.slow
def test_the_kit_runs_its_public_tests_with_only_the_kit_on_its_path_and_knows_no_hidden_tests(kit_copy):
    seen = []
    problems, rows = smoke_check(kit_copy, progress=lambda done, total, name: seen.append((done, total)))
    assert problems == []
    assert [r["dirname"] for r in rows] == [e.dirname for e in exercises()]
    assert seen[-1] == (len(rows), len(rows))
    for r, ex in zip(rows, exercises()):
        assert r["hidden"] == [] and r["solutions"] == "" and r["hidden_ran"] is False
        assert [t["name"] for t in r["tests"]] == [t.name for t in ex.tests]
        assert r["score"] < r["max_score"] and all(t["message"] for t in r["tests"])


@pytest.mark.slow
def test_the_smoke_check_notices_a_kit_that_finds_hidden_tests(kit_copy, tmp_path):
    kit = tmp_path / "kit"
    shutil.copytree(kit_copy, kit)
    (kit / "solutions" / "07-self-check").mkdir(parents=True)
    shutil.copy(ROOT / "solutions" / "07-self-check" / "hidden.toml", kit / "solutions" / "07-self-check")
    problems, _ = smoke_check(kit)
    assert any("exercise 7: the kit knows of hidden tests" in p for p in problems), problems


def test_kit_student_refuses_a_folder_that_is_not_a_kit_and_writes_nothing(tmp_path, capsys):
    dest = tmp_path / "notes"
    dest.mkdir()
    (dest / "mine.txt").write_text("keep me")
    code, out, err = _cli(capsys, "kit", "student", str(dest))
    assert code == 2 and out == ""
    assert err.startswith("error: E_OUTPUT_EXISTS: ") and err.count("\n") == 1 and "Traceback" not in err
    assert [p.name for p in dest.iterdir()] == ["mine.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["notes"]  # no partial folder left behind
    (tmp_path / "afile").write_text("x")
    with pytest.raises(InputError) as e:
        build_student_kit(tmp_path / "afile")
    assert e.value.code == "E_OUTPUT_EXISTS"
    with pytest.raises(InputError) as e:
        build_student_kit(ROOT / "sim" / "kit-here")
    assert e.value.code == "E_OUTPUT_INSIDE"


@pytest.mark.slow
def test_a_kit_is_built_checked_and_run_replaces_a_previous_kit_and_a_leak_stops_the_build(tmp_path):
    root = tmp_path / "project"  # a copy of the project, so the check is of a tree this test controls
    copy_project(ROOT, root, solutions=[e.dirname for e in exercises()])
    for hints in (root / "exercises").glob("*/hints.toml"):  # this test is about replacing, not the shipped hints
        hints.unlink()
    dest = tmp_path / "kit"
    seen = []
    first = build_student_kit(dest, root=root, progress=lambda done, total, name: seen.append(name))
    assert not first.replaced and json.loads((dest / KIT_MARKER).read_text())["kind"] == "protolab-student-kit"
    assert seen == [e.dirname for e in exercises()] and [r["dirname"] for r in first.exercises] == seen
    assert not (dest / "solutions").exists() and check_kit_content(dest, root=root) == []
    (dest / "stale.txt").write_text("from the previous kit")
    again = build_student_kit(dest, root=root, smoke=False)
    assert again.replaced and not (dest / "stale.txt").exists() and (dest / "sim" / "cli" / "__init__.py").is_file()
    # a leak in the project: the build stops, and the previous kit stays as it was
    (root / "exercises" / "01-envelope-design" / "ANSWER.md").write_text(
        (root / "solutions" / "01-envelope-design" / "design.py").read_text())
    with pytest.raises(ProtolabError) as e:
        build_student_kit(dest, root=root, smoke=False)
    assert e.value.code == "E_KIT_LEAK" and "exercises/01-envelope-design/ANSWER.md" in e.value.message
    assert not (dest / "exercises" / "01-envelope-design" / "ANSWER.md").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kit", "project"]  # no partial folder left
    # a copy of a model answer inside the project's engine does not whitelist itself (exercise 3's
    # answer shares most lines with sim/intake.py, which does not make sim/intake.py a leak)
    (root / "exercises" / "01-envelope-design" / "ANSWER.md").unlink()
    shutil.copy(root / "solutions" / "03-deduplicating-consumer" / "decide.py", root / "sim" / "reference_decide.py")
    with pytest.raises(ProtolabError) as e:
        build_student_kit(dest, root=root, smoke=False)
    assert "sim/reference_decide.py line" in e.value.message and "sim/intake.py" not in e.value.message
    # an instructors' hint table: its text is theirs, its conditions are public vocabulary
    (root / "sim" / "reference_decide.py").unlink()
    (root / "solutions" / "01-envelope-design" / "hints.toml").write_text(
        '[[hint]]\ninvariant = "RESEND_DEDUPLICATED"\ntext = "instructors only: a resend of T-2 keeps its key"\n')
    (root / "exercises" / "01-envelope-design" / "hints.toml").write_text(
        '[[hint]]\ninvariant = "RESEND_DEDUPLICATED"\ntext = "look at the key"\n')
    kit = tmp_path / "plain"
    copy_project(root, kit)
    assert check_kit_content(kit, root=root) == []
    (kit / "exercises" / "01-envelope-design" / "hints.toml").write_text(
        '[[hint]]\ninvariant = "RESEND_DEDUPLICATED"\ntext = "instructors only: a resend of T-2 keeps its key"\n')
    assert [f.split(":")[0] for f in check_kit_content(kit, root=root)] == [
        "exercises/01-envelope-design/hints.toml line 3 holds a line of solutions/01-envelope-design/hints.toml"]


@pytest.mark.slow
def test_kit_verify_passes_on_an_exercise_and_fails_when_its_solution_is_wrong(tmp_path, capsys):
    code, out, err = _cli(capsys, "kit", "verify", "--exercise", "7")
    assert code == 0, out
    assert "solution" in out and "starter" in out and "wrong/" in out and "WRONG" not in out
    # the same exercise where the model answer is the starter: verify must say so and exit 1
    root = tmp_path / "project"
    copy_project(ROOT, root, solutions=["07-self-check"])
    ex_dir, sol = root / "exercises" / "07-self-check", root / "solutions" / "07-self-check"
    for name in tomllib.loads((ex_dir / "exercise.toml").read_text())["files"]:
        shutil.copy(ex_dir / name, sol / name)
    rows = verify_kit(root=root, only=["7"])
    by = {r.submission: r for r in rows}
    assert not by["solution"].ok and by["solution"].score < by["solution"].max_score
    assert by["solution"].problem.startswith("fails ")
    assert by["starter"].ok and all(r.ok for r in rows if r.submission.startswith("wrong/"))
    with pytest.raises(InputError) as e:
        verify_kit(root=root, only=["99"])
    assert e.value.code == "E_UNKNOWN_EXERCISE"
