"""One submission, one score (issue 41, item 4).

* Every way to grade gives the same files the same score and the same per-test results: ``kit
  verify``'s judgement, ``protolab grade`` at ``-j 1`` and ``-j 2`` (a class graded at once, a warm
  judge process grading one student after another), the Gradescope autograder's entry, and
  ``exercise check``, which runs the public tests only: on each of them it says what the grader
  says, but where the grader's hidden cases of that test catch more (those tests are named by
  ``hidden_cases = true``; the check then passes what the grader fails, never the other way). Judged
  twice, to catch a verdict that is not a function of the files.
* Where the student's code computes each answer is the judges' choice, never how many calls came
  before: a call names its process (:mod:`sim.course.remote`), and a run makes a resent intent's
  envelope in the other process (:class:`sim.course.judges.Resends`).
* A starter, or a submission that does nothing, passes no test but those listed in :data:`KEPT`,
  each with why its rule holds for that submission (a rule it keeps, not one it dodges by doing
  nothing): a test added later is held to it too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scoring_paths import by_autograder, by_check, by_grade, by_verify, stage, submissions
from sim.course.catalog import exercises, get_exercise
from sim.course.evaluate import evaluate

NUMBERS = [ex.number for ex in exercises()]

#: A submission that does nothing, per exercise: its functions return constants, None or nothing;
#: its data says nothing (exercise 4's table has one harmless row: a table with none does not load).
NOTHING = {
    1: {"design.py": 'DIGEST_SCHEME = "json-sorted-v1"\n\n\ndef idempotency_key(intent):\n    return "k"\n\n\n'
                     'def payload(intent):\n    return {}\n\n\ndef evidence_refs(intent):\n    return []\n'},
    2: {"keys.py": 'SCHEMES = ("json-sorted-v1", "jcs-v2")\n\n\ndef canonical_bytes(value, scheme="json-sorted-v1"):\n'
                   '    return b""\n\n\ndef digest(value, scheme="json-sorted-v1"):\n    return "sha256:" + "0" * 64\n\n\n'
                   'def idempotency_key(trace_id, task_id, sender, step, attempt, answers=None):\n    return "k"\n'},
    3: {"decide.py": 'def consume(delivery, task, recorded, allowed, missing_refs):\n'
                     '    return {"decision": "rejected", "code": "E_TRANSITION_NOT_ALLOWED", "reason": "nothing"}\n'},
    4: {"machine.toml": 'version = "nothing-v1"\n\n[[rule]]\nfrom = "pending"\nto = "ready"\nroles = ["manager"]\n'
                        'reason = "assigned"\n'},
    5: {"effects.py": "def effect_key(result, delivery_id):\n    return None\n"},
    6: {"trace.json": "{}\n"},
    7: {"answers.toml": ""},
}

#: The only tests a starter ("starter") or a submission that does nothing ("nothing") passes, each
#: with why: its rule is one that submission keeps (every other test of the exercise must fail on it).
KEPT = {
    (2, "starter", "same-intent-same-key"): "the starter's key is trace:task:step, a function of the intent's "
                                           "values alone: the same in every call and process (it fails to tell "
                                           "intents apart, which key-injective judges)",
    (3, "starter", "acks"): "the starter accepts an ack as a receipt and never moves the task for it: the "
                            "ack rule as the seed states it",
    (4, "starter", "loads"): "the starter's table parses, names its own version and leaves no finished state",
    (4, "starter", "results-from-running"): "every result the starter's table allows comes from running",
    (4, "starter", "nothing-more"): "every row of the starter is a move of the seed's, by its owners: no extra door",
    (4, "nothing", "loads"): "a one-row table (the manager assigns) parses and names its own version",
    (4, "nothing", "results-from-running"): "it allows no result from anywhere but running (it allows none)",
    (4, "nothing", "nothing-more"): "its one row is a move of the seed's, by its owner: no extra door",
    (5, "starter", "none-lost"): "the starter keys by message id: every message commits its own row, so no "
                                 "different effect is ever suppressed (it commits repeats too: at-most-once fails)",
    (6, "starter", "gather-membership"): "the starter ships the gather as the README gives it (membership, rule, "
                                         "opener); the student writes the messages around it",
}


def _nothing(ex, dest: Path) -> Path:
    d = stage(ex, ex.folder, dest)
    for name, text in NOTHING[int(ex.number)].items():
        (d / name).write_text(text, encoding="utf-8")
    return d


def _passing(rep) -> set[str]:
    return {r.name for r in rep.results if r.passed}


def _slow_unless(*quick):
    return [n if n in quick else pytest.param(n, marks=pytest.mark.slow) for n in NUMBERS]


@pytest.mark.parametrize("number", _slow_unless(6, 7))
def test_a_starter_or_a_submission_that_does_nothing_passes_only_the_rules_it_keeps(number, tmp_path):
    ex = get_exercise(number)
    for who, folder in (("starter", stage(ex, ex.folder, tmp_path / "starter")), ("nothing", _nothing(ex, tmp_path / "nothing"))):
        rep = evaluate(ex, folder, hidden=True, isolate=False)
        assert not rep.grader_errors, [(r.name, r.grader_error) for r in rep.grader_errors]
        kept = {t for (n, w, t) in KEPT if n == int(number) and w == who}
        assert _passing(rep) == kept, (who, {r.name: r.message for r in rep.results if r.passed and r.name not in kept},
                                       kept - _passing(rep))


def test_the_kept_list_names_real_tests_with_a_reason_each():
    for (n, who, test), why in KEPT.items():
        ex = get_exercise(n)
        assert who in ("starter", "nothing") and len(why) > 20
        assert test in {t.name for t in ex.graded_tests(True)}, (n, test)


def test_a_design_that_does_nothing_fails_the_search_it_used_to_pass(tmp_path):
    """Exercise 1's search looks for a broken invariant in every order; a design whose every message
    is refused breaks none, and the search now says its story did nothing instead of passing."""
    from sim.course.sandbox import judge_here

    ex = get_exercise(1)
    test = next(t for t in ex.tests if t.name == "search")
    j = judge_here(test.judge, stage(ex, ex.folder, tmp_path / "starter"), test.args)  # its successes cite nothing
    assert j.score == 0.0, j.message
    assert "did not do its job" in j.message and j.signature["symptoms"] == ["search-run-idle"], j.message
    assert "T-1 ended running (the course's own part ends it succeeded)" in j.message
    j = judge_here(test.judge, _nothing(ex, tmp_path / "nothing"), test.args)  # its payloads are refused at once
    assert j.score == 0.0 and j.signature["symptoms"] == ["design-error"], j.message
    sol = judge_here(test.judge, stage(ex, ex.solutions(), tmp_path / "solution"), test.args)
    assert sol.score == 1.0, sol.message


# ------------------------------------------------------------------------------ the four ways to grade


def _all_paths(ex, folders: dict[str, Path], tmp: Path, public: set[str]) -> dict[str, dict]:
    return {
        "kit verify": by_verify(ex, folders),
        "kit verify, again": by_verify(ex, folders),
        "grade -j 1": by_grade(ex, folders, tmp / "class-j1", 1),
        "grade -j 2": by_grade(ex, folders, tmp / "class-j2", 2),
        "autograder": {k: by_autograder(ex, d, tmp / f"auto-{i}") for i, (k, d) in enumerate(folders.items())},
        "exercise check": {k: by_check(ex, d) for k, d in folders.items()},
    }


def _assert_one_score(ex, got: dict[str, dict]) -> None:
    graded = {p: v for p, v in got.items() if p != "exercise check"}
    with_cases = {t.name for t in ex.tests if t.hidden_cases}
    for label in got["kit verify"]:
        seen = {p: (v[label]["score"], json.dumps(v[label]["tests"], sort_keys=True)) for p, v in graded.items()}
        assert len(set(seen.values())) == 1, (label, seen)
        tests = got["kit verify"][label]["tests"]
        check = got["exercise check"][label]["tests"]
        assert set(check) == {t.name for t in ex.tests}
        for name, points in check.items():
            if name in with_cases:  # the grader's hidden cases may catch what the public ones do not
                assert points >= tests[name], (label, name, points, tests[name])
            else:
                assert points == tests[name], (label, name, points, tests[name])


@pytest.mark.slow
def test_the_issues_submission_gets_one_score_from_every_way_to_grade(tmp_path):
    """Exercise 1's builtin-hash (issue 41: kit verify 40/70, grade 30/70): the same 30, test for
    test, from kit verify's judgement, grade, the autograder and exercise check (the whole matrix,
    grade at -j 1 and -j 2 and every submission, is the slow test below)."""
    ex = get_exercise(1)
    folders = {"wrong/builtin-hash": stage(ex, submissions(ex)["wrong/builtin-hash"], tmp_path / "builtin-hash")}
    got = {"kit verify": by_verify(ex, folders, jobs=1), "grade -j 1": by_grade(ex, folders, tmp_path / "class", 1),
           "autograder": {"wrong/builtin-hash": by_autograder(ex, folders["wrong/builtin-hash"], tmp_path / "auto")},
           "exercise check": {"wrong/builtin-hash": by_check(ex, folders["wrong/builtin-hash"])}}
    _assert_one_score(ex, got)
    import tomllib

    from sim.course.catalog import solutions_dir

    expect = tomllib.loads((solutions_dir(ex) / "wrong" / "builtin-hash" / "expect.toml").read_text())
    assert got["grade -j 1"]["wrong/builtin-hash"]["score"] == expect["score"] == 24  # 70 less the rubric's 20+10+8+8
    failed = {t for t, p in got["autograder"]["wrong/builtin-hash"]["tests"].items() if p == 0}
    assert failed == {"keys-name-intents", "payload-conflict", "fault-matrix", "search"}


def test_a_tests_verdict_does_not_depend_on_the_tests_judged_before_it(tmp_path):
    """The same files, the same test, after other tests of the submission or alone (the calls that
    came before once decided whether a key was computed in another process): one verdict."""
    from sim.course.evaluate import judge_tests

    ex = get_exercise(1)
    folder = stage(ex, submissions(ex)["wrong/builtin-hash"], tmp_path / "builtin-hash")
    tests = {t.name: t for t in ex.graded_tests(True)}
    seen = set()
    # (with hosts that took turns, payload-conflict alone failed and after evidence-by-reference passed)
    for before in ([], ["evidence-by-reference"]):
        got = judge_tests([tests[n] for n in before] + [tests["payload-conflict"]], folder, ex.dirname)
        r = got["payload-conflict"]
        seen.add((r.points, r.message))
    assert len(seen) == 1 and next(iter(seen))[0] == 0, seen


@pytest.mark.slow
@pytest.mark.parametrize("number", NUMBERS)
def test_every_submission_the_kit_holds_gets_one_score_from_every_way_to_grade(number, tmp_path):
    """Every planted wrong answer, the starter, the model answer and a submission that does nothing."""
    ex = get_exercise(number)
    folders = {k: stage(ex, v, tmp_path / k.replace("/", "_")) for k, v in submissions(ex).items()}
    folders["nothing"] = _nothing(ex, tmp_path / "nothing")
    _assert_one_score(ex, _all_paths(ex, folders, tmp_path, {t.name for t in ex.tests}))


# ------------------------------------------------------------------------------ where the code runs


def test_a_call_is_answered_by_the_process_it_names_whatever_came_before(tmp_path):
    from sim.course.remote import A, B, RemoteModule

    f = tmp_path / "design.py"
    f.write_text("def salted():\n    return hash('protolab') & 0xFFFF\n", encoding="utf-8")
    mod = RemoteModule(f)
    try:
        first_a, first_b = mod.call("salted"), mod.call("salted", process=B)
        assert first_a != first_b  # two hash seeds: a value made with hash() differs between them
        for _ in range(3):  # any number of calls before: A answers as A, B as B
            assert mod.call("salted", process=A) == first_a
            assert mod.call("salted", process=B) == first_b
            mod.call("salted")
    finally:
        mod.close()


def test_a_run_makes_an_intent_in_process_a_and_its_resend_in_process_b():
    from sim.course.judges import A, B, Resends
    from sim.design import Intent

    where = Resends()
    first = Intent("task_result", "writer", "manager", "R-1", "T-2", body={"status": "succeeded"}, message_id="M-6")
    resend = Intent("task_result", "writer", "manager", "R-1", "T-2", body={"status": "succeeded"}, message_id="M-9",
                    created_at="2026-07-13T04:00:15Z")
    other = Intent("task_result", "writer", "manager", "R-1", "T-2", body={"status": "failed"}, message_id="M-10")
    assert [where.process_of(i) for i in (first, first, resend, other)] == [A, A, B, A]
    assert Resends().process_of(resend) == A  # another run: its first sending of the intent
