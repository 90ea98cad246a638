"""The rubric an instructor owns (solutions/NN-slug/rubric.toml, `protolab kit rubric`): each rule's
points and cap. The default makes breaking an exercise's core rule cost at least a quarter of the marks;
a rubric written, edited and graded with changes the score as its weights say; a bad one is one line,
E_RUBRIC, exit 2, and nothing is graded or written."""

from __future__ import annotations

import csv
import json
import tomllib
from pathlib import Path

import pytest

from conftest import run_cli

from sim.course.catalog import exercises, get_exercise, solutions_dir
from sim.course.evaluate import Report
from sim.course.evaluate import TestResult as Result
from sim.course.gradescope import results_json, validate_results
from sim.course.rubric import CORE_SHARE, course_rubric, parse_rubric, rubric_toml

EXERCISES = exercises()
ROOT_DIR = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.dirname)
def test_every_exercise_ships_a_rubric_whose_core_rule_costs_at_least_a_quarter(ex):
    rubric = course_rubric(ex)
    assert rubric is not None and rubric.source.endswith(f"{ex.dirname}/rubric.toml")
    assert rubric.core and len(rubric.why) > 80, "the file names its core rule and says why"
    names = [t.name for t in (*ex.tests, *ex.hidden_tests())]
    assert list(rubric.weights) == names
    for rule in rubric.core:  # breaking it alone keeps at most 75%
        assert rubric.kept_if_only(rule) <= 1 - CORE_SHARE, (rule, rubric.kept_if_only(rule))
    # what the file says is what the renderer writes: an editable copy reads back the same
    again = parse_rubric(ex, tomllib.loads(rubric_toml(ex, rubric)), "copy")
    assert (again.weights, again.caps, again.core, again.why) == (rubric.weights, rubric.caps, rubric.core, rubric.why)


def test_every_planted_wrong_answer_that_breaks_a_core_rule_keeps_at_most_75_percent():
    """By the scores the grader computed (test_solutions.py holds each expect.toml's score to the grader's)."""
    seen = 0
    for ex in EXERCISES:
        rubric = course_rubric(ex)
        total = rubric.total
        for w in sorted(p for p in (solutions_dir(ex) / "wrong").iterdir() if p.is_dir()):
            expect = tomllib.loads((w / "expect.toml").read_text())
            assert isinstance(expect.get("score"), (int, float)), f"{w}: expect.toml has no score"
            if set(expect["fails"]) & set(rubric.core):
                seen += 1
                assert expect["score"] <= 0.75 * total, (w.name, expect["score"], total)
    assert seen >= 20


def test_the_issues_one_broken_core_rule_no_longer_keeps_90_percent():
    """Exercise 3's scheme-blind breaks deduplication alone (it kept 100 of 110); exercise 4's
    answer-restarts breaks the allowlist alone (90 of 100); exercise 6's truth-confirmed the fence (90)."""
    for n, name, rule in ((3, "scheme-blind", "duplicates"), (4, "answer-restarts", "nothing-more"),
                          (6, "truth-confirmed", "terminal-fence")):
        ex = get_exercise(n)
        expect = tomllib.loads((solutions_dir(ex) / "wrong" / name / "expect.toml").read_text())
        assert expect["fails"] == [rule] and rule in course_rubric(ex).core
        assert expect["score"] <= 0.75 * course_rubric(ex).total


def _planted(n: int, name: str, tmp_path):
    """A copy of a planted wrong answer, so that nothing the grader writes lands beside the original."""
    import shutil

    ex = get_exercise(n)
    d = tmp_path / name
    shutil.copytree(solutions_dir(ex) / "wrong" / name, d, ignore=shutil.ignore_patterns("expect.toml"))
    return d


@pytest.mark.slow  # grading/killing real processes: seconds each; the slow set (CI) runs it
def test_a_rubric_round_trip_write_edit_grade_changes_the_score_as_computed(tmp_path, capsys):
    wrong = _planted(5, "by-target", tmp_path)  # breaks none-lost, and only it
    copy = tmp_path / "rubric.toml"
    code, out, err = run_cli(capsys, "kit", "rubric", "5", "-o", copy)
    assert code == 0 and copy.is_file() and "none-lost" in out and "core" in out
    code, out, _ = run_cli(capsys, "grade", "5", wrong, "--json")
    before = json.loads(out)[0]
    assert (before["score"], before["max_score"]) == (55, 80)  # 80 - none-lost's 25
    text = copy.read_text()
    assert "\nnone-lost            = 25 " in text
    copy.write_text(text.replace("\nnone-lost            = 25 ", "\nnone-lost            = 5  ")
                    .replace("\nsearch               = 15", "\nsearch               = 35"))
    code, out, _ = run_cli(capsys, "kit", "rubric", "5", "--check", copy)
    assert code == 0 and "a valid rubric of exercise 5" in out
    assert "note: breaking the core rule none-lost alone keeps 94%" in " ".join(out.split())  # 75 of 80: said
    code, out, _ = run_cli(capsys, "grade", "5", wrong, "--json", "--rubric", copy)
    after = json.loads(out)[0]
    by = {t["name"]: t for t in after["tests"]}
    assert by["none-lost"]["max_points"] == 5 and by["search"]["max_points"] == 35
    assert (after["score"], after["max_score"]) == (80 - 5, 25 + 5 + 15 + 35)  # the weights it was given
    # a cap: breaking none-lost now keeps at most 40% of the total
    copy.write_text(copy.read_text() + "none-lost = 40\n")
    code, out, _ = run_cli(capsys, "grade", "5", wrong, "--json", "--rubric", copy)
    capped = json.loads(out)[0]
    assert capped["score"] == 32 and capped["capped"] == {"cap_percent": 40, "rules": ["none-lost"]}


@pytest.mark.parametrize("text, says", [
    ("exercise = 5\n[weight]\nat-most-once = 25\n", "gives no points to none-lost"),
    ("exercise = 4\n", "this is the rubric of exercise 5"),
    ("exercise = 5\n[weight]\nat-most-once = 25\nnone-lost = 25\nkey-names-the-effect = 15\nsearch = 15\n"
     "at-most-twice = 3\n", "did you mean 'at-most-once'"),
    ("exercise = 5\n[weight]\nat-most-once = -1\nnone-lost = 25\nkey-names-the-effect = 15\nsearch = 15\n",
     "0 or more"),
    ("exercise = 5\n[weight]\nat-most-once = 25\nnone-lost = 25\nkey-names-the-effect = 15\nsearch = 15\n"
     "[cap]\nnone-lost = 140\n", "0 to 100"),
    ("exercise = 5\nweights = 3\n", "unknown key 'weights'"),
    ("exercise = 5\n[weight\n", "not valid TOML"),
    ("exercise = 5\ncore = [\"everything\"]\n[weight]\nat-most-once = 25\nnone-lost = 25\nkey-names-the-effect = 15\n"
     "search = 15\n", "core names 'everything'"),
    ("a = " + "[" * 3000 + "]" * 3000 + "\n", "nested too deeply"),
])
def test_a_bad_rubric_is_one_line_e_rubric_exit_2_and_nothing_is_graded_or_written(tmp_path, capsys, text, says):
    bad = tmp_path / "rubric.toml"
    bad.write_text(text)
    code, out, err = run_cli(capsys, "kit", "rubric", "5", "--check", bad)
    assert code == 2 and out == "" and err.startswith("error: E_RUBRIC: ") and err.count("\n") == 1, err
    assert says in err
    grades = tmp_path / "grades.csv"
    code, out, err = run_cli(capsys, "grade", "5", _planted(5, "by-target", tmp_path), "--rubric", bad, "--csv", grades)
    assert code == 2 and err.startswith("error: E_RUBRIC: ") and not grades.exists()


def test_kit_rubric_refuses_to_write_over_a_file(tmp_path, capsys):
    there = tmp_path / "r.toml"
    there.write_text("mine")
    code, _, err = run_cli(capsys, "kit", "rubric", "3", "-o", there)
    assert code == 2 and "E_OUTPUT_EXISTS" in err and there.read_text() == "mine"


def _rep(*results) -> Report:
    rep = Report(get_exercise(3), __import__("pathlib").Path("/x/alice"), hidden_ran=False)
    rep.results = list(results)
    return rep


def _r(name, points, max_points, **kw) -> Result:
    return Result(name=name, title=name, hidden=False, points=points, max_points=max_points,
                      passed=points == max_points, message="m", **kw)


def test_a_cap_lowers_the_total_and_every_output_says_so():
    rep = _rep(_r("duplicates", 0, 30, cap=60, core=True), _r("conflicts", 12, 12), _r("acks", 68, 68))
    assert rep.score == 66 and rep.capped == (60, ["duplicates"])
    d = results_json(rep)
    assert validate_results(d) == [] and d["score"] == 66 and d["extra_data"]["capped"]["cap_percent"] == 60
    assert d["tests"][0]["extra_data"] == {"test": "duplicates", "hidden": False, "seconds": 0.0, "core": True,
                                           "cap_percent": 60}
    assert "core rule" in d["tests"][0]["output"] and "caps the exercise at 60%" in d["tests"][0]["output"]
    assert "Capped at 60% of the total: duplicates broke." in d["output"]
    # a cap never raises a score: with the rest broken too, the points earned are the score
    low = _rep(_r("duplicates", 0, 30, cap=60), _r("conflicts", 0, 12), _r("acks", 10, 68))
    assert low.score == 10 and low.capped is None


@pytest.mark.slow  # grading/killing real processes: seconds each; the slow set (CI) runs it
def test_the_gradebook_and_explain_show_the_weights(tmp_path, capsys):
    grades = tmp_path / "grades.csv"
    wrong = _planted(3, "scheme-blind", tmp_path)
    code, out, _ = run_cli(capsys, "grade", "3", wrong, "--csv", grades)
    assert code == 0
    with open(grades, newline="") as f:
        rows = list(csv.reader(f))
    weights = course_rubric(get_exercise(3)).weights
    assert rows[0] == ["student", "score", "max", *[f"{n} /{w}" for n, w in weights.items()], "note", "history"]
    assert rows[1][:4] == ["scheme-blind", "66", "110", "0"]
    assert rows[1][-2] == "capped at 60% of the total: duplicates broke"
    code, out, _ = run_cli(capsys, "grade", "3", wrong, "--explain")
    assert "FAIL 0/30  duplicates" in out and "[core, caps at 60%]" in out
    assert "score: 66/110 (capped at 60% of the total: duplicates broke; the rules that hold add up to 80)" in " ".join(out.split())


# ---------------------------------------------------------------------------------- the student's copy


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.dirname)
def test_a_students_check_weighs_each_public_rule_as_the_grader_does(ex):
    """The student kit has no rubric.toml: its check weighs by exercise.toml. Each public rule's
    points, cap and core there are the course rubric's, so one submission gets one score."""
    from sim.course.rubric import equal_rubric

    course, kit = course_rubric(ex), equal_rubric(ex)
    assert course is not None
    for t in ex.tests:
        assert kit.weights[t.name] == course.weights[t.name], t.name
        assert kit.caps.get(t.name) == course.caps.get(t.name), t.name
        assert (t.name in kit.core) == (t.name in course.core), t.name
    # a check without the course's rubric (the kit's) and the grader's public tests weigh the same
    assert [(t.name, t.points, t.cap, t.core) for t in ex.graded_tests(False, equal_rubric(ex))] == \
        [(t.name, t.points, t.cap, t.core) for t in ex.graded_tests(False)]


def test_the_readmes_say_the_weights_the_rubric_gives():
    """Each exercise's README states its weights in a block written from the rubric; a stale one fails."""
    from sim.course.rubric import _main, readme_with_rubric, weights_text

    assert _main(["--check"]) == 0
    ex = get_exercise(3)
    text = (ex.folder / "README.md").read_text(encoding="utf-8")
    rubric = course_rubric(ex)
    assert weights_text(ex, rubric) in text
    assert f"`duplicates` {rubric.weights['duplicates']} (core)" in text
    assert f"at most {int(rubric.caps['duplicates'])}% of its total" in text
    edited = parse_rubric(ex, {"exercise": 3, "core": ["duplicates"], "weight": {**rubric.weights, "duplicates": 40},
                               "cap": {"duplicates": 50}}, "edited")
    new = readme_with_rubric(text, ex, edited)
    assert "`duplicates` 40 (core)" in new and "at most 50% of its total" in new and new != text
    for other in EXERCISES:  # no prose figure left beside the block: "10 points each" was false
        assert "points each" not in (other.folder / "README.md").read_text(encoding="utf-8")


@pytest.mark.slow  # grading/killing real processes: seconds each; the slow set (CI) runs it
def test_a_kit_carries_the_instructors_edited_rubric_to_the_students_check(tmp_path):
    """An instructor edits rubric.toml; the kit's exercise.toml and README then weigh as it does."""
    from sim.course.catalog import load_tests
    from sim.course.kit import build_student_kit, copy_project

    root = tmp_path / "course"
    copy_project(ROOT_DIR, root, solutions=[e.dirname for e in EXERCISES])
    path = root / "solutions" / "03-deduplicating-consumer" / "rubric.toml"
    text = path.read_text(encoding="utf-8")
    text = text.replace("duplicates       = 30", "duplicates       = 40").replace("duplicates       = 60", "duplicates       = 50")
    path.write_text(text, encoding="utf-8")
    build_student_kit(tmp_path / "kit", root=root, smoke=False)
    ex_dir = tmp_path / "kit" / "exercises" / "03-deduplicating-consumer"
    tests = {t.name: t for t in load_tests(ex_dir / "exercise.toml")}
    assert (tests["duplicates"].points, tests["duplicates"].cap, tests["duplicates"].core) == (40, 50.0, True)
    assert (tests["conflicts"].points, tests["conflicts"].cap, tests["conflicts"].core) == (12, None, False)
    readme = (ex_dir / "README.md").read_text(encoding="utf-8")
    assert "`duplicates` 40 (core)" in readme and "at most 50% of its total" in readme
    # the checkout's own copies are untouched
    assert (ROOT_DIR / "exercises" / "03-deduplicating-consumer" / "exercise.toml").read_text() != \
        (ex_dir / "exercise.toml").read_text()


@pytest.mark.parametrize("bad,says", [("cap = 120", "0 to 100"), ("cap = true", "0 to 100"), ('core = "yes"', "core = true")])
def test_a_bad_cap_or_core_in_exercise_toml_is_one_coded_error(tmp_path, bad, says):
    from sim.course.catalog import load_tests
    from sim.errors import InputError

    p = tmp_path / "exercise.toml"
    p.write_text(f'[[test]]\nname = "a"\npoints = 10\njudge = "x.y"\n{bad}\n', encoding="utf-8")
    with pytest.raises(InputError) as e:
        load_tests(p)
    assert e.value.code == "E_EXERCISE_FILE" and says in e.value.message
