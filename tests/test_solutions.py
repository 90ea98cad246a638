"""Judging the judges of every exercise: each model answer gets full marks (public and hidden
tests), each starter scores less, and each planted wrong answer fails the tests its expect.toml
names, each failure carrying its hint. New exercises are picked up from the catalog."""

import tomllib
from pathlib import Path

import pytest

from sim.course.catalog import exercises, solutions_dir
from sim.course.evaluate import evaluate

EXERCISES = exercises()


def _copy_files(ex, folder: Path, tmp_path: Path) -> Path:
    """The files a student edits, from ``folder``, in a folder of their own."""
    import shutil

    d = tmp_path / folder.name
    shutil.copytree(ex.folder, d, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ex.files:
        if (folder / name).exists():
            shutil.copy(folder / name, d / name)
    return d


def _wrong_answers():
    for ex in EXERCISES:
        sol = solutions_dir(ex)
        if sol is None or not (sol / "wrong").is_dir():
            continue
        for w in sorted(p for p in (sol / "wrong").iterdir() if p.is_dir()):
            yield pytest.param(ex, w, id=f"{ex.dirname}/{w.name}")


def test_every_exercise_has_a_solution_hidden_tests_and_at_least_two_wrong_answers():
    assert EXERCISES, "no exercises shipped"
    for ex in EXERCISES:
        sol = solutions_dir(ex)
        assert sol is not None, ex.dirname
        assert ex.hidden_tests() or ex.extensions(), f"{ex.dirname} has neither hidden tests nor hidden cases"
        assert len([p for p in (sol / "wrong").iterdir() if p.is_dir()]) >= 2, ex.dirname
        if ex.hidden_tests():
            assert ex.hidden_points() == sum(t.points for t in ex.hidden_tests())
        assert (ex.folder / "README.md").is_file()
        for t in (*ex.tests, *ex.hidden_tests()):
            assert t.hint.strip(), f"{ex.dirname}:{t.name} has no hint"


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.dirname)
def test_every_test_of_an_exercise_weighs_in_the_students_kit_what_the_grader_weighs(ex):
    tests = (*ex.tests, *ex.hidden_tests())  # exercise.toml's (and hidden.toml's) points: what a student's kit shows
    graded = ex.graded_tests(True)  # the grader's: the course's rubric (tests/test_rubric.py holds it)
    assert [t.name for t in graded] == [t.name for t in tests]
    assert {t.name: t.points for t in ex.tests} == {t.name: t.points for t in graded if not t.hidden}
    assert sum(t.points for t in graded) == sum(t.points for t in tests), "the rubric keeps each exercise's total"


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.dirname)
def test_public_tests_say_which_of_them_have_hidden_cases(ex):
    flagged = {t.name for t in ex.tests if t.hidden_cases}
    assert flagged == set(ex.extensions()), "exercise.toml's hidden_cases = true and hidden.toml's [[extend]] disagree"


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.dirname)
def test_every_hint_table_names_only_symptoms_a_judge_reports(ex):
    from sim.course.hints import check_symptoms

    assert check_symptoms(ex) == []


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.dirname)
def test_the_model_answer_gets_full_marks_on_public_and_hidden_tests(ex, tmp_path):
    d = _copy_files(ex, solutions_dir(ex), tmp_path)
    report = evaluate(ex, d, hidden=True, isolate=False)
    failing = [(r.name, r.message) for r in report.results if not r.passed]
    assert not failing and report.score == report.max_score, failing


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.dirname)
def test_the_starter_runs_and_scores_less_than_full_marks(ex, tmp_path):
    report = evaluate(ex, _copy_files(ex, ex.folder, tmp_path), hidden=True, isolate=False)
    assert report.score < report.max_score
    assert any(r.points > 0 or r.passed for r in report.results) or report.score == 0
    for r in report.results:
        if not r.passed:
            assert r.message and r.hint, r.name


@pytest.mark.quick_sample("group")
@pytest.mark.parametrize("ex, wrong", list(_wrong_answers()))
def test_a_planted_wrong_answer_fails_the_tests_it_should_with_their_hints(ex, wrong, tmp_path):
    expect = tomllib.loads((wrong / "expect.toml").read_text())
    report = evaluate(ex, _copy_files(ex, wrong, tmp_path), hidden=True, isolate=False)
    by_name = {r.name: r for r in report.results}
    share = min(r.max_points for r in report.results)
    assert report.score <= report.max_score - share, "a wrong answer must lose at least one rule's share"
    assert not report.grader_errors, [(r.name, r.grader_error) for r in report.grader_errors]
    # exactly the tests its expect.toml names fail, each all or nothing (the exercises' own judge tests
    # used to grade every wrong answer again to check this; it is checked here, once)
    failed = sorted(r.name for r in report.results if not r.passed)
    assert failed == sorted(expect["fails"]), (wrong.name, failed)
    # its score is what the rubric makes of the rules it broke (their points lost, then any cap), and what
    # its expect.toml says: written there from what the grader computed, so a change of weights shows here
    raw = report.max_score - sum(by_name[n].max_points for n in failed)
    caps = [by_name[n].cap for n in failed if by_name[n].cap is not None]
    assert report.score == round(min([raw] + [report.max_score * c / 100 for c in caps]), 2)
    assert report.score == expect["score"], (wrong.name, report.score, expect["score"])
    if any(by_name[n].core for n in failed):  # a core rule broken: at most 75% of the marks
        assert report.score <= 0.75 * report.max_score, (wrong.name, report.score)
    for name in expect["fails"]:
        assert name in by_name, f"expect.toml names unknown test {name}"
        assert not by_name[name].passed, (name, by_name[name].message)
        assert by_name[name].points == 0, "a rule broken anywhere is worth nothing"
        assert by_name[name].hint and by_name[name].message
    # the feedback names this answer's own mistake (words its expect.toml lists), whichever case failed first
    feedback = " ".join(f"{r.message} {r.hint}" for r in report.results if not r.passed).casefold()
    assert expect.get("names"), f"{wrong.name}: expect.toml names no words of its mistake"
    for words in expect["names"]:
        assert words.casefold() in feedback, f"the feedback never says {words!r}: {feedback[:600]}"
