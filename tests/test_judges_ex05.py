"""Exercise 5's judges (sim/course/judges/effects.py): each test is one rule judged all or nothing;
the judges turn any valid-but-wrong answer into a verdict (never a grader error); the designs that
escaped in issue 25 (a key from Python's hash(), a key of task and kind) and issue 26 (a key that
follows the attempt, which the public tests let through) lose at least one rule's share, and
their feedback names their mistake."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sim.course.catalog import get_exercise
from sim.course.evaluate import evaluate
from sim.course.sandbox import judge_here

EX = get_exercise(5)


def _submission(tmp_path: Path, body: str, name: str = "sub") -> Path:
    d = tmp_path / name
    shutil.copytree(EX.folder, d, ignore=shutil.ignore_patterns("__pycache__"))
    (d / "effects.py").write_text(body, encoding="utf-8")
    return d


def _feedback(report) -> str:
    return " ".join(f"{r.message} {r.hint}" for r in report.results if not r.passed).casefold()


HASH_KEY = '''
def effect_key(result, delivery_id):
    e = result.payload["effect"]
    return f"fx-{hash((e['kind'], e['target'], result.task_id)) & 0xFFFFFFFF:08x}"
'''
TASK_AND_KIND = '''
def effect_key(result, delivery_id):
    return f"{result.payload['effect']['kind']}:{result.task_id}"
'''
BY_INTENT = '''
def effect_key(result, delivery_id):
    return "publish:" + result.idempotency_key
'''
COUNTER = '''
import itertools
_n = itertools.count()

def effect_key(result, delivery_id):
    e = result.payload["effect"]
    return f"{e['kind']}:{e['target']}:{result.task_id}:{next(_n)}"
'''


def test_the_model_answer_holds_every_rule_with_hidden_cases(tmp_path):
    body = (Path(__file__).resolve().parents[1] / "solutions" / EX.dirname / "effects.py").read_text()
    r = evaluate(EX, _submission(tmp_path, body), hidden=True, isolate=False)
    assert r.score == r.max_score == 80, [(x.name, x.message) for x in r.results if not x.passed]
    assert {t.name for t in EX.tests} == {"at-most-once", "none-lost", "key-names-the-effect", "search"}
    assert all(t.hidden_cases for t in EX.tests if t.name != "search")  # the search has no hidden cases


def test_a_hash_key_loses_at_most_once_and_is_named_not_the_same_in_every_process(tmp_path):
    r = evaluate(EX, _submission(tmp_path, HASH_KEY), hidden=True, isolate=False)
    failed = {x.name for x in r.results if not x.passed}
    assert {"at-most-once", "key-names-the-effect"} <= failed
    assert r.score <= r.max_score - 2 * 20
    assert not r.grader_errors
    assert "not the same in every process" in _feedback(r)
    amo = next(x for x in r.results if x.name == "at-most-once")
    assert "key-differs-between-processes" in amo.signature["symptoms"]
    assert "--processes 2" in (amo.reproduce or ""), "the reproduction must key the result in two processes"


def test_the_crash_and_restart_keys_the_restarted_side_in_another_process(tmp_path):
    """The README's own crash command as a case: the stale and the restarted result are keyed in
    two processes, so a hash() key publishes twice."""
    case = {"cases": [{"scenario": "publish-report", "policy": "naive", "faults": ["crash:M-5"]}]}
    v = judge_here("effects.at_most_once", _submission(tmp_path, HASH_KEY), case)
    assert v.score == 0 and v.grader_error is None
    assert {"commits-per-attempt", "key-differs-between-processes"} <= set(v.signature["symptoms"])
    ok = judge_here("effects.at_most_once", _submission(tmp_path, (Path(__file__).resolve().parents[1] / "solutions" /
                                                                     EX.dirname / "effects.py").read_text(), "m"), case)
    assert ok.score == 1, ok.message


def test_a_task_and_kind_key_loses_none_lost_naming_another_target(tmp_path):
    r = evaluate(EX, _submission(tmp_path, TASK_AND_KIND), hidden=True, isolate=False)
    by = {x.name: x for x in r.results}
    assert not by["none-lost"].passed and by["none-lost"].points == 0
    assert r.score <= r.max_score - 20
    assert "another target" in _feedback(r)
    assert "effect-lost-target" in by["none-lost"].signature["symptoms"]


def test_the_public_tests_alone_catch_a_key_that_follows_the_attempt(tmp_path):
    """Issue 26: a plausible wrong key got every public point although the README's crash command
    shows it publishing twice; the public at-most-once test now runs that command's case."""
    r = evaluate(EX, _submission(tmp_path, BY_INTENT), hidden=False, isolate=False)
    amo = next(x for x in r.results if x.name == "at-most-once")
    assert not amo.passed and "crash" in amo.message
    assert "commits-per-attempt" in amo.signature["symptoms"]


def test_a_counter_in_the_key_is_told_apart_from_a_per_process_key(tmp_path):
    v = judge_here("effects.key_names_the_effect", _submission(tmp_path, COUNTER), {"same": ["another-delivery"]})
    assert v.score == 0 and "key-differs-between-calls" in v.signature["symptoms"]


WRONG_SHAPES = {
    "returns-none": "def effect_key(result, delivery_id):\n    return None\n",
    "returns-empty": "def effect_key(result, delivery_id):\n    return ''\n",
    "returns-int": "def effect_key(result, delivery_id):\n    return 42\n",
    "returns-list": "def effect_key(result, delivery_id):\n    return ['publish', result.task_id]\n",
    "returns-dict": "def effect_key(result, delivery_id):\n    return dict(result.payload['effect'])\n",
    "returns-bool": "def effect_key(result, delivery_id):\n    return True\n",
    "returns-huge": "def effect_key(result, delivery_id):\n    return 'k' * 2_000_000\n",
    "returns-object": "def effect_key(result, delivery_id):\n    return object()\n",
    "raises-keyerror": "def effect_key(result, delivery_id):\n    return result.payload['nope']\n",
    "raises-attribute": "def effect_key(result, delivery_id):\n    return result.effect.kind\n",
    "wrong-arity": "def effect_key(result):\n    return 'publish'\n",
    "not-callable": "effect_key = 'publish:R-1:T-2'\n",
    "missing": "def other(result, delivery_id):\n    return 'x'\n",
    "empty-file": "",
    "returns-none-sometimes": "def effect_key(result, delivery_id):\n    return None if delivery_id % 2 else 'publish:' + result.task_id\n",
}


@pytest.mark.quick_sample(4)
@pytest.mark.slow_cases("returns-huge")  # measured at 2 s or more on 2 cores
@pytest.mark.parametrize("name", sorted(WRONG_SHAPES))
def test_valid_but_wrong_answers_of_every_shape_get_a_verdict_not_a_grader_error(name, tmp_path):
    r = evaluate(EX, _submission(tmp_path, WRONG_SHAPES[name]), hidden=True, isolate=False)
    assert not r.grader_errors, [(x.name, x.grader_error) for x in r.grader_errors]
    assert r.score < r.max_score
    for x in r.results:
        assert x.points in (0, x.max_points), "a rule is all or nothing"
        if not x.passed:
            assert x.message and "grader error" not in x.message


@pytest.mark.parametrize("args", [
    {"cases": [{"scenario": "publish-report", "policy": "naive", "faults": "duplicate"}]},  # a fault, not a list
    {"cases": []},
    {"policies": ["naive"], "faults": [["duplicate"]]},  # the older form
    {"cases": [{"policy": "safe"}]},
])
def test_at_most_once_takes_its_case_lists_in_every_form(args, tmp_path):
    body = (Path(__file__).resolve().parents[1] / "solutions" / EX.dirname / "effects.py").read_text()
    v = judge_here("effects.at_most_once", _submission(tmp_path, body), args)
    assert v.grader_error is None and v.score == 1, v.message


CI_MUTANTS = None  # the slow mutation test's even sample (None: all)


@pytest.mark.slow
def test_the_grade_notices_at_least_95_percent_of_the_model_answers_mutants():
    from sim.course.mutants import TARGET, mutation_run

    # CI judges an even sample (every mutant); the full run is
    # 'protolab kit verify --mutants -e 5', its figure in docs/performance.md

    rep = mutation_run(EX, jobs=2, limit=CI_MUTANTS)
    assert not rep.problem, rep.problem
    assert rep.score is not None and rep.score >= TARGET, [(r.mutant.what, r.differs) for r in rep.survivors]
