"""Judging the grader's arithmetic: a judge's verdict as a test's points (sim/course/evaluate.py
to_result), a report's score and maximum, the gradebook's numbers and the fault grid
(sim/course/grade.py), and the scores in Gradescope's results.json (sim/course/gradescope.py).
Each test builds TestResult/Report values by hand, with fractional points (a test worth 15 points
judged 0.37 of the way is worth 5.55, not 6), so a grader that rounds or drops a part fails here."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from sim.course.catalog import Exercise
from sim.course.catalog import Test as CatalogTest
from sim.course.evaluate import Report, to_result
from sim.course.evaluate import TestResult as Result
from sim.course.grade import Submission, fault_grid, write_gradebook
from sim.course.gradescope import feedback, results_json, ungradable, validate_results
from sim.errors import InputError


def _test(name="t1", points=15, *, hidden=False, hint="the test's own hint", visibility="", title=None):
    return CatalogTest(name=name, title=title or f"Title of {name}", points=points, timeout=5.0, judge="design.none",
                hint=hint, hidden=hidden, visibility=visibility)


def _exercise(*tests: CatalogTest, folder: Path = Path("/nonexistent/99-scoring")) -> Exercise:
    # number 99 has no solutions folder: the exercise has no hidden tests of its own in this install
    return Exercise(number=99, slug="scoring", title="Scoring by hand", minutes=30, files=("design.py",),
                    summary="", folder=folder, tests=tuple(tests))


def _result(name, points, max_points, *, passed=None, hidden=False, **kw) -> Result:
    return Result(name=name, title=f"Title of {name}", hidden=hidden, points=points, max_points=max_points,
                      passed=(points == max_points) if passed is None else passed, message=kw.pop("message", "m"), **kw)


def _report(*results: Result, problem=None, submission="/sandbox/alice") -> Report:
    ex = _exercise(*(_test(r.name, r.max_points, hidden=r.hidden) for r in results))
    rep = Report(ex, Path(submission), hidden_ran=any(r.hidden for r in results), problem=problem)
    rep.results = list(results)
    return rep


# ------------------------------------------------------------------------------------- a verdict as points


@pytest.mark.parametrize("score, points, passed", [
    (0.37, 5.55, False),    # a part of a test is worth a part of its points, to the cent
    (1 / 3, 5.0, False),    # 4.99999... rounds to 5.0 at two places
    (0.123, 1.84, False),   # 1.845 (1.8449999... in binary) -> two places
    (0.998, 14.97, False),  # almost is not passed
    (0.999, 14.98, True),   # the pass mark
    (1.0, 15.0, True),
    (0.0, 0.0, False),
])
def test_a_verdict_is_worth_its_fraction_of_the_tests_points_to_two_places(score, points, passed):
    r = to_result(_test(points=15), {"score": score, "message": "m"}, ".")
    assert r.points == pytest.approx(points, abs=1e-9) and r.max_points == 15 and r.passed is passed
    assert isinstance(r.points, float)


def test_a_verdict_says_which_sandbox_judged_it():
    assert to_result(_test(), {"score": 1.0, "sandbox": "bubblewrap"}, ".").sandbox == "bubblewrap"
    assert to_result(_test(), {"score": 0.5, "sandbox": None}, ".").sandbox == ""
    assert to_result(_test(), {"score": 0.5}, ".").sandbox == ""


def test_a_verdict_without_a_score_is_worth_nothing():
    r = to_result(_test(points=10), {"message": "the judge said nothing"}, ".")
    assert (r.points, r.passed, r.message) == (0.0, False, "the judge said nothing")


def test_a_failed_verdict_keeps_what_a_student_acts_on_and_a_passed_one_drops_it():
    t = _test("faults", points=30, hidden=True, visibility="after_due_date")
    v = {"score": 0.5, "message": "broke in {dir}/design.py", "reproduce": "protolab run --design {dir}/design.py",
         "witness": {"task_id": "T-1"}, "output": "printed", "seconds": 1.25, "grid": [{"run": "r"}],
         "signature": {"invariant": "X"}}
    r = to_result(t, v, "01-design")
    assert (r.name, r.title, r.hidden, r.visibility) == ("faults", "Title of faults", True, "after_due_date")
    assert r.points == 15.0 and r.max_points == 30 and not r.passed
    assert r.message == "broke in 01-design/design.py"
    assert r.reproduce == "protolab run --design 01-design/design.py"
    assert r.witness == {"task_id": "T-1"} and r.signature == {"invariant": "X"}
    assert r.hint == "the test's own hint"  # no hint table: the test's own
    assert (r.output, r.seconds, r.grid) == ("printed", 1.25, [{"run": "r"}])
    assert r.grader_error == ""
    ok = to_result(t, dict(v, score=1.0), "01-design")
    assert ok.passed and ok.points == 30.0
    assert (ok.hint, ok.reproduce, ok.witness, ok.signature) == ("", None, None, None)
    assert ok.message == "broke in 01-design/design.py" and ok.grid == [{"run": "r"}]
    broken = to_result(t, {"score": 0.0, "message": "not graded", "grader_error": "KeyError in judge"}, ".")
    assert broken.grader_error == "KeyError in judge" and broken.hint == "" and broken.points == 0.0
    bare = to_result(_test(), {"score": 0.2, "output": None}, ".")
    assert (bare.output, bare.seconds, bare.message, bare.reproduce, bare.visibility) == ("", 0.0, "", None, "")
    assert to_result(_test(), {"score": 0.2}, ".").output == ""  # a verdict that says nothing of output


def test_a_failed_verdict_gets_the_hint_its_signature_picks():
    from sim.course.hints import HintRule

    rules = [HintRule({"invariant": "EFFECT_AT_MOST_ONCE"}, "key the effect by what it does")]
    t = _test("faults", points=30)
    picked = to_result(t, {"score": 0.5, "signature": {"invariant": "EFFECT_AT_MOST_ONCE"}}, ".", rules)
    assert picked.hint == "key the effect by what it does"
    other = to_result(t, {"score": 0.5, "signature": {"invariant": "CLOCK_MONOTONIC"}}, ".", rules)
    assert other.hint == "the test's own hint"


def test_a_verdict_says_whether_its_test_carries_hidden_cases_and_ran_them():
    from dataclasses import replace

    t = replace(_test("rules"), hidden_cases=True)
    r = to_result(t, {"score": 1.0}, ".")
    assert (r.hidden_cases, r.hidden_cases_ran) == (True, False)
    r = to_result(replace(t, extended=True), {"score": 1.0}, ".")
    assert (r.hidden_cases, r.hidden_cases_ran) == (True, True)
    r = to_result(_test("plain"), {"score": 1.0}, ".")
    assert (r.hidden_cases, r.hidden_cases_ran) == (False, False)


# ------------------------------------------------------------------------------------- a report's score


def test_a_report_scores_the_sum_of_its_fractional_points_to_two_places():
    rep = _report(_result("a", 5.55, 15), _result("b", 14.99, 15, passed=True), _result("c", 0.1, 10),
                  _result("d", 0.2, 5))
    assert rep.score == 20.84 and rep.max_score == 45  # 20.840000000000003 summed, 20.84 shown
    assert isinstance(rep.max_score, int)
    d = rep.to_dict()
    assert (d["score"], d["max_score"], d["exercise"], d["slug"]) == (20.84, 45, 99, "scoring")
    assert d["submission"] == "/sandbox/alice" and d["public_only"] is True and d["problem"] is None
    assert [t["points"] for t in d["tests"]] == [5.55, 14.99, 0.1, 0.2]
    assert d["all_passed"] is False and d["hidden_points"] is None
    assert d["sandbox"] == "" and sorted(d) == ["all_passed", "capped", "exercise", "flags", "hidden_points", "max_score",
                                                "problem", "public_only", "sandbox", "score", "slug", "submission",
                                                "tests", "zero_reason"]
    rep.sandbox = "bubblewrap"
    assert rep.to_dict()["sandbox"] == "bubblewrap"  # the report says which sandbox judged it
    assert _report().score == 0 and _report().max_score == 0


def test_a_report_says_whether_all_passed_which_failed_first_and_which_the_grader_could_not_judge():
    a, b = _result("a", 15, 15), _result("b", 7.5, 15)
    c = _result("c", 0.0, 10, grader_error="judge raised")
    rep = _report(a, b, c)
    assert not rep.all_passed and rep.first_failure() is b and rep.grader_errors == [c]
    assert _report(a).all_passed and _report(a).first_failure() is None and _report(a).grader_errors == []
    hidden = _report(a, _result("h", 3.25, 5, hidden=True))
    assert hidden.to_dict()["public_only"] is False and hidden.score == 18.25


# ------------------------------------------------------------------------------------- the gradebook


def _rows(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def test_the_gradebook_writes_fractional_points_as_they_were_earned(tmp_path):
    subs = [Submission("alice", tmp_path / "alice"), Submission("bob", tmp_path / "bob.zip"),
            Submission("carol", tmp_path / "carol")]
    reports = [
        _report(_result("a", 5.55, 15), _result("b", 15.0, 15)),
        _report(_result("a", 15.0, 15), _result("b", 0.37, 15)),
        _report(_result("a", 0.0, 15), _result("b", 0.0, 15), problem="no design.py in the submission"),
    ]
    out = tmp_path / "grades.csv"
    write_gradebook(out, subs, reports)
    assert _rows(out) == [
        ["student", "score", "max", "a /15", "b /15", "note", "history"],  # each rule headed with its weight
        ["alice", "20.55", "30", "5.55", "15", "", ""],
        ["bob", "15.37", "30", "15", "0.37", "", ""],
        ["carol", "0", "30", "0", "0", "no design.py in the submission", ""],
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["grades.csv"]  # no partial file left beside it


def test_the_gradebook_puts_a_test_a_report_lacks_at_zero_and_reads_columns_from_the_first_report(tmp_path):
    subs = [Submission("alice", tmp_path / "a"), Submission("bob", tmp_path / "b")]
    reports = [_report(_result("a", 1.5, 15), _result("b", 2.25, 15)), _report(_result("b", 4.75, 15))]
    out = tmp_path / "g.csv"
    write_gradebook(out, subs, reports)
    assert _rows(out)[1:] == [["alice", "3.75", "30", "1.5", "2.25", "", ""], ["bob", "4.75", "15", "0", "4.75", "", ""]]
    fresh = tmp_path / "fresh.csv"
    write_gradebook(fresh, [], [])
    assert _rows(fresh) == [["student", "score", "max", "note", "history"]]


def test_a_gradebook_that_cannot_be_written_is_one_error_and_leaves_no_partial_file(tmp_path):
    target = tmp_path / "grades.csv"
    target.mkdir()  # a folder where the file should go
    with pytest.raises(InputError) as e:
        write_gradebook(target, [Submission("alice", tmp_path)], [_report(_result("a", 1.5, 15))])
    assert e.value.code == "E_OUTPUT" and e.value.message == f"cannot write {target}: Is a directory"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grades.csv"]
    with pytest.raises(InputError) as e:
        write_gradebook(tmp_path / "missing" / "g.csv", [], [])
    assert e.value.code == "E_OUTPUT"


# ------------------------------------------------------------------------------------- the fault grid


def test_the_fault_grid_lists_each_run_once_with_every_test_that_played_it():
    g1 = {"run": "clean", "scenario": "publish-report", "faults": [], "invariants": {"EFF": True, "CLOCK": True},
          "ok": True}
    g2 = {"run": "resend", "scenario": "publish-report", "faults": ["resend"], "invariants": {"EFF": False, "RSND": True},
          "ok": False}
    g1_again = dict(g1, invariants={"EFF": True, "CLOCK": False, "NEW": True}, ok=False)
    rep = _report(_result("a", 15, 15, grid=[g1, g2]), _result("b", 0, 15, grid=[g1_again]), _result("c", 5, 5))
    names, rows = fault_grid(rep)
    assert names == ["EFF", "CLOCK", "RSND", "NEW"]
    assert rows == [
        {"run": "clean", "scenario": "publish-report", "faults": [], "tests": ["a", "b"],
         "invariants": {"EFF": True, "CLOCK": False, "NEW": True}, "ok": False},
        {"run": "resend", "scenario": "publish-report", "faults": ["resend"], "tests": ["a"],
         "invariants": {"EFF": False, "RSND": True}, "ok": False},
    ]


def test_a_fault_grid_row_holds_only_while_every_test_that_played_it_says_so():
    broke_then_held = [{"run": "r", "invariants": {"X": 0}}, {"run": "r", "invariants": {"X": 1}, "ok": 1}]
    rep = _report(_result("a", 1, 1, grid=broke_then_held[:1]), _result("b", 1, 1, grid=broke_then_held[1:]))
    names, rows = fault_grid(rep)
    assert names == ["X"]
    assert rows == [{"run": "r", "scenario": "", "faults": [], "tests": ["a", "b"], "invariants": {"X": False},
                     "ok": True}]
    assert rows[0]["invariants"]["X"] is False and rows[0]["ok"] is True
    held = _report(_result("a", 1, 1, grid=[{"run": "r", "invariants": {"X": 1}, "ok": 0}]))
    assert fault_grid(held)[1][0]["invariants"] == {"X": True} and fault_grid(held)[1][0]["ok"] is False
    assert fault_grid(_report(_result("a", 1, 1))) == ([], [])
    bare = _report(_result("a", 1, 1, grid=[{"run": "r0"}]))  # a run that judged no invariant
    assert fault_grid(bare) == ([], [{"run": "r0", "scenario": "", "faults": [], "tests": ["a"], "invariants": {},
                                      "ok": True}])


# ------------------------------------------------------------------------------------- Gradescope's scores


def test_results_json_carries_fractional_points_to_gradescope():
    rep = _report(_result("a", 5.55, 15), _result("b", 14.99, 15, passed=True), _result("h", 0.37, 10, hidden=True))
    d = results_json(rep, execution_time=12.2)
    assert validate_results(d) == [] and validate_results(d, use_jsonschema=False) == []
    assert d["score"] == 20.91 and isinstance(d["score"], float)
    assert [(t["score"], t["max_score"], t["status"]) for t in d["tests"]] == [
        (5.55, 15.0, "failed"), (14.99, 15.0, "passed"), (0.37, 10.0, "failed")]
    assert all(isinstance(t["score"], float) and isinstance(t["max_score"], float) for t in d["tests"])
    assert d["extra_data"]["max_score"] == 40 and d["extra_data"]["hidden_ran"] is True
    assert d["execution_time"] == 13
    # the hidden test is shown once grades are published: until then no total, no subtotal that tells it
    assert "20.91" not in d["output"] and "Score" not in d["output"] and d["visibility"] == "after_published"
    assert "Public tests: 1 of 2 pass (20.54 of 30 points). Hidden tests: 1 (10 points)" in d["output"]
    assert d["tests"][0]["output"].startswith("Failed (5.55/15 points).")
    assert d["tests"][1]["output"].startswith("Passed (14.99/15 points).")
    assert [t["number"] for t in d["tests"]] == ["99.1", "99.2", "99.3"]
    assert [t["tags"] for t in d["tests"]] == [["scoring", "public"], ["scoring", "public"], ["scoring", "hidden"]]
    assert [t["extra_data"] for t in d["tests"]] == [{"test": "a", "hidden": False, "seconds": 0.0},
                                                     {"test": "b", "hidden": False, "seconds": 0.0},
                                                     {"test": "h", "hidden": True, "seconds": 0.0}]
    assert d["extra_data"] == {"exercise": 99, "slug": "scoring", "max_score": 40, "hidden_ran": True, "problem": None}


def test_results_json_names_the_students_own_folder_in_what_failed_and_how_to_reproduce_it():
    r = _result("a", 7.5, 15, message="broke in /sandbox/alice/design.py", reproduce="protolab run --design "
                "/sandbox/alice/design.py", seconds=2.5)
    d = results_json(_report(r, submission="/sandbox/alice"), shown_dir="01-envelope-design")
    out = d["tests"][0]["output"]
    assert "What failed: broke in 01-envelope-design/design.py" in out
    assert "Reproduce it: protolab run --design 01-envelope-design/design.py" in out
    assert d["tests"][0]["extra_data"]["seconds"] == 2.5
    kept = results_json(_report(r, submission="/sandbox/alice"))["tests"][0]["output"]
    assert "What failed: broke in /sandbox/alice/design.py" in kept


@pytest.mark.parametrize("seconds, shown", [(0.0, 0), (0.2, 1), (3.0, 3), (-1.0, 0)])
def test_results_json_rounds_the_execution_time_up_to_whole_seconds(seconds, shown):
    d = results_json(_report(_result("a", 1.5, 15)), execution_time=seconds)
    assert d["execution_time"] == shown
    assert "execution_time" not in results_json(_report(_result("a", 1.5, 15)))


def _with_hidden(tmp_path, monkeypatch) -> Exercise:
    """Exercise 99 with two public tests and, in an instructor's solutions folder, one hidden test."""
    folder = tmp_path / "exercises" / "99-scoring"
    folder.mkdir(parents=True)
    (folder / "exercise.toml").write_text("hidden_points = 10\n")
    sol = tmp_path / "solutions" / "99-scoring"
    sol.mkdir(parents=True)
    (sol / "hidden.toml").write_text('[[test]]\nname = "h1"\ntitle = "Hidden one"\npoints = 10\njudge = "design.none"\n')
    monkeypatch.setenv("PROTOLAB_SOLUTIONS", str(tmp_path / "solutions"))
    return _exercise(_test("a", 15, visibility="visible"), _test("b", 7, visibility="visible"), folder=folder)


def test_an_ungradable_submission_scores_zero_of_every_tests_points_hidden_ones_included(tmp_path, monkeypatch):
    ex = _with_hidden(tmp_path, monkeypatch)
    d = ungradable(ex, "  no design.py\n in the zip ", execution_time=0.5)
    assert validate_results(d) == []
    assert d["score"] == 0.0 and [t["score"] for t in d["tests"]] == [0.0, 0.0, 0.0]
    assert [t["max_score"] for t in d["tests"]] == [15.0, 7.0, 10.0] and d["extra_data"]["max_score"] == 32
    assert [t["extra_data"]["test"] for t in d["tests"]] == ["a", "b", "h1"]
    assert [t["extra_data"]["hidden"] for t in d["tests"]] == [False, False, True]
    assert [t["visibility"] for t in d["tests"]] == ["visible", "visible", "after_published"]
    assert [t["status"] for t in d["tests"]] == ["failed"] * 3 and d["execution_time"] == 1
    assert d["tests"][0]["output"] == "Failed (0/15 points).\nWhat failed: not graded: no design.py in the zip"
    assert d["extra_data"]["problem"] == "no design.py in the zip" and d["extra_data"]["hidden_ran"] is True
    assert d["output"].startswith("Exercise 99: Scoring by hand. Your submission could not be graded: no design.py in "
                                  "the zip.")
    public = ungradable(ex, "", hidden=False)
    assert [t["extra_data"]["test"] for t in public["tests"]] == ["a", "b"]
    assert public["extra_data"]["hidden_ran"] is False and "execution_time" not in public
    assert public["extra_data"]["problem"] == "the submission cannot be graded"


def test_a_submission_the_grader_cannot_judge_scores_zero_of_every_tests_points_saying_why(tmp_path, monkeypatch):
    # grade_all's report for a submission it cannot open (a bad zip), and evaluate's for a folder it
    # cannot copy: every test it would have run, at 0 of its points, with the problem as the message
    from sim.course.evaluate import _not_judged
    from sim.course.grade import _ungradable

    ex = _with_hidden(tmp_path, monkeypatch)
    tests = [*ex.graded_tests(True), _test("c", 5)]  # c: a test with no visibility of its own
    sub = Submission("bob", tmp_path / "bob.zip", problem="bob.zip is not a zip file")
    rep = _ungradable(ex, sub, tests)
    assert rep.exercise is ex and rep.submission == tmp_path / "bob.zip" and rep.problem == "bob.zip is not a zip file"
    assert rep.hidden_ran is True and rep.hidden_points == 10
    assert rep.score == 0.0 and rep.max_score == 37 and rep.all_passed is False
    why = "not graded: bob.zip is not a zip file"
    assert rep.results == [
        Result(name="a", title="Title of a", hidden=False, points=0.0, max_points=15, passed=False, message=why,
               visibility="visible"),
        Result(name="b", title="Title of b", hidden=False, points=0.0, max_points=7, passed=False, message=why,
               visibility="visible"),
        Result(name="h1", title="Hidden one", hidden=True, points=0.0, max_points=10, passed=False, message=why,
               visibility="after_published"),
        Result(name="c", title="Title of c", hidden=False, points=0.0, max_points=5, passed=False, message=why),
    ]
    assert _ungradable(ex, sub, tests[:2]).hidden_ran is False  # no hidden test would have run
    assert [_not_judged(t, "the folder cannot be copied") for t in (tests[2], tests[3])] == [
        Result(name="h1", title="Hidden one", hidden=True, points=0.0, max_points=10, passed=False,
               message="not graded: the folder cannot be copied", visibility="after_published"),
        Result(name="c", title="Title of c", hidden=False, points=0.0, max_points=5, passed=False,
               message="not graded: the folder cannot be copied"),
    ]


def test_feedback_shows_the_points_earned_of_the_points_possible():
    assert feedback(_result("a", 5.55, 15, message="half")).startswith("Failed (5.55/15 points).\nWhat failed: half")
    assert feedback(_result("a", 15.0, 15, message="fine")) == "Passed (15/15 points). fine"


def test_feedback_on_a_failure_gives_the_hint_and_the_end_of_what_the_code_printed():
    printed = "x" * 1490 + "\n" + "y" * 20 + "\n"  # 1,511 characters: the first 11 are cut
    r = _result("a", 2.5, 15, message="", hint="read the rule about keys", output=printed)
    assert feedback(r) == ("Failed (2.5/15 points).\nWhat failed: (the judge gave no reason)\nHint: read the rule about "
                           "keys\n\nYour code printed (the end of it):\n" + "x" * 1479 + "\n" + "y" * 20)
    assert feedback(_result("b", 7, 7, message="fine", output="  hello\n")) == ("Passed (7/7 points). fine\n\n"
                                                                                "Your code printed:\nhello")
    assert feedback(_result("b", 7, 7, message="", output="")) == "Passed (7/7 points)."


def test_the_summary_counts_public_passes_and_says_when_hidden_tests_are_shown():
    rep = _report(_result("a", 15, 15), _result("b", 3, 7),
                  _result("h1", 0, 10, hidden=True, visibility="after_due_date"),
                  _result("h2", 5, 5, hidden=True, visibility="hidden"),
                  _result("h3", 1, 1, hidden=True, visibility="visible"))
    assert results_json(rep)["output"] == ("Exercise 99: Scoring by hand. Public tests: 1 of 2 pass (18 of 22 points). "
                                           "Hidden tests: 3 (16 points), shown after the due date or to your instructor "
                                           "only; your score counts them and is shown with them.")
    assert results_json(rep)["visibility"] == "after_published"  # the total too, as long as the hidden tests
    shown_now = _report(_result("a", 15, 15), _result("h3", 1, 1, hidden=True, visibility="visible"))
    assert results_json(shown_now)["output"] == ("Exercise 99: Scoring by hand. Score 16/16. Public tests: 1 of 1 pass. "
                                                 "Hidden tests: 1 (1 points).")
    assert results_json(shown_now)["visibility"] == "visible"
    due = _report(_result("a", 15, 15), _result("h1", 0, 10, hidden=True, visibility="after_due_date"))
    assert results_json(due)["visibility"] == "after_due_date"
    published = _report(_result("a", 15, 15), _result("h4", 2, 4, hidden=True, visibility="after_published"))
    assert results_json(published)["output"].endswith(" Hidden tests: 1 (4 points), shown when grades are published; "
                                                      "your score counts them and is shown with them.")
    broken = _report(_result("a", 0.0, 15), problem="no design.py in the zip")
    assert results_json(broken)["output"] == ("Exercise 99: Scoring by hand. Your submission could not be graded: no "
                                              "design.py in the zip. Every test scores 0; fix this and submit again.")


def test_a_tests_visibility_is_its_results_own_else_its_catalog_tests_else_the_default_for_its_kind():
    ex = _exercise(_test("a", 5, visibility="visible"), _test("b", 5, visibility="after_due_date"), _test("c", 5))
    rep = Report(ex, Path("/sandbox/alice"), hidden_ran=True)
    rep.results = [_result("a", 5, 5, visibility="hidden"), _result("b", 5, 5), _result("c", 5, 5),
                   _result("h", 5, 5, hidden=True)]  # h: a hidden test this install does not list
    assert [t["visibility"] for t in results_json(rep)["tests"]] == ["hidden", "after_due_date", "visible",
                                                                     "after_published"]


def test_an_ungradable_submission_of_an_exercise_without_hidden_tests_ran_none(tmp_path):
    (tmp_path / "exercise.toml").write_text("")
    ex = _exercise(_test("a", 15), _test("b", 7), folder=tmp_path)  # number 99: no solutions, no hidden tests
    d = ungradable(ex, "no design.py")
    assert d["extra_data"]["hidden_ran"] is False and [t["extra_data"]["test"] for t in d["tests"]] == ["a", "b"]
