"""Exercise 2's judges (sim/course/judges/keys.py): each test is one rule judged all or nothing;
the judges turn any valid-but-wrong answer into a verdict (never a grader error); keys computed
in two processes must match (the student's file runs in two host processes that take turns), so a
key from Python's hash() or from a counter loses a rule's share and its feedback names it; the
planted wrong designs are named by their feedback."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sim.course.rubric import course_rubric

from sim.course.catalog import get_exercise
from sim.course.evaluate import evaluate
from sim.course.sandbox import judge_here

EX = get_exercise(2)
ROOT = Path(__file__).resolve().parents[1]
MODEL = (ROOT / "solutions" / EX.dirname / "keys.py").read_text(encoding="utf-8")
KEY_AT = MODEL.index("    whole = json.dumps([trace_id")


def _submission(tmp_path: Path, body: str, name: str = "sub") -> Path:
    d = tmp_path / name
    shutil.copytree(EX.folder, d, ignore=shutil.ignore_patterns("__pycache__"))
    (d / "keys.py").write_text(body, encoding="utf-8")
    return d


def _with_key(body: str) -> str:
    """The model answer with the body of idempotency_key replaced."""
    return MODEL[:KEY_AT] + body


def _feedback(report) -> str:
    return " ".join(f"{r.message} {r.hint}" for r in report.results if not r.passed).casefold()


HASH_KEY = _with_key("    return f'k{hash((trace_id, task_id, sender, step, attempt, answers)) & 0xFFFFFFFF:08x}'\n")
COUNTER_KEY = _with_key("    global _n\n    _n += 1\n    return f'{trace_id[:40]}/{task_id[:40]}/{step[:20]}/a{attempt}/n{_n}'\n\n\n_n = 0\n")


def test_the_rules_are_six_of_equal_weight_and_the_model_answer_holds_them_all(tmp_path):
    assert [t.name for t in EX.tests] == ["digest-under-its-scheme", "refusals", "same-intent-same-key", "key-injective",
                                          "key-is-an-id", "keys-in-the-run"]
    assert {t.name: t.points for t in EX.tests} == course_rubric(EX).weights and all(t.hidden_cases for t in EX.tests)  # exercise.toml carries the rubric's weights
    r = evaluate(EX, _submission(tmp_path, MODEL), hidden=True, isolate=False)
    assert r.score == r.max_score == 60, [(x.name, x.message) for x in r.results if not x.passed]


def test_keys_from_two_processes_must_match_so_a_hash_key_loses_and_is_named(tmp_path):
    r = evaluate(EX, _submission(tmp_path, HASH_KEY), hidden=True, isolate=False)
    by = {x.name: x for x in r.results}
    assert not by["same-intent-same-key"].passed and by["same-intent-same-key"].points == 0
    assert not by["keys-in-the-run"].passed
    assert r.score <= r.max_score - sum(x.max_points for x in r.results if not x.passed) and not r.grader_errors
    assert "not the same in every process" in _feedback(r) and "hash()" in _feedback(r)
    sig = by["same-intent-same-key"].signature
    assert sig["symptoms"] == ["key-differs-between-processes"]
    assert "--processes 2" in by["same-intent-same-key"].reproduce  # two processes show it
    # the other key rules judge within one process: a hash() key is neither excused nor blamed there
    assert by["key-injective"].passed and by["key-is-an-id"].passed


def test_calling_twice_is_enough_to_see_a_key_from_another_process(tmp_path):
    v = judge_here("keys.same_intent_same_key", _submission(tmp_path, HASH_KEY), {"sets": [{"kind": "changes"}]})
    assert v.score == 0 and v.grader_error is None
    assert "key-differs-between-processes" in v.signature["symptoms"]


def test_a_counter_key_loses_and_is_named_a_counter(tmp_path):
    r = evaluate(EX, _submission(tmp_path, COUNTER_KEY), hidden=True, isolate=False)
    by = {x.name: x for x in r.results}
    assert not by["same-intent-same-key"].passed and not by["keys-in-the-run"].passed
    assert "key-differs-between-calls" in by["same-intent-same-key"].signature["symptoms"]
    assert "counter" in _feedback(r)


def test_a_key_without_the_sender_is_a_false_duplicate_in_a_clean_run(tmp_path):
    body = _with_key("    whole = json.dumps([trace_id, task_id, step, attempt, answers])\n"
                     "    return 'k' + hashlib.sha256(whole.encode()).hexdigest()[:40]\n")
    v = judge_here("keys.keys_in_the_run", _submission(tmp_path, body), {"cases": [{"scenario": "publish-report"}]})
    assert v.score == 0 and v.signature["symptoms"] == ["new-taken-as-repeat"], v.message


WRONG_KEYS = {
    "none": "    return None\n",
    "empty": "    return ''\n",
    "int": "    return 42\n",
    "list": "    return [trace_id, task_id]\n",
    "dict": "    return {'k': trace_id}\n",
    "huge": "    return 'k' * 300_000\n",  # far past any id's length
    "object": "    return object()\n",
    "raises": "    raise KeyError(trace_id)\n",
    "raises-on-none": "    return trace_id + task_id + sender + step + str(attempt) + answers\n",
    "starts-badly": "    return '-' + trace_id\n",
    "bad-chars": "    return f'{trace_id} {task_id}'\n",
}
WRONG_DIGESTS = {
    "digest-none": "def digest(value, scheme='json-sorted-v1'):\n    return None\n",
    "digest-bytes-hex": "def digest(value, scheme='json-sorted-v1'):\n    return hashlib.sha256(canonical_bytes(value, scheme)).hexdigest()\n",
    "digest-upper": "def digest(value, scheme='json-sorted-v1'):\n    return 'sha256:' + hashlib.sha256(canonical_bytes(value, scheme)).hexdigest().upper()\n",
    "digest-raises-type": "def digest(value, scheme='json-sorted-v1'):\n    raise TypeError('no')\n",
    "digest-dict": "def digest(value, scheme='json-sorted-v1'):\n    return {'sha256': 1}\n",
    "digest-object": "def digest(value, scheme='json-sorted-v1'):\n    return object()\n",
}
WHOLE_FILES = {
    "empty-file": "",
    "no-digest": "def idempotency_key(trace_id, task_id, sender, step, attempt, answers=None):\n    return trace_id\n",
    "not-callable": "digest = 'sha256:'\nidempotency_key = 'k'\n",
    "wrong-arity": MODEL[:KEY_AT].replace("def idempotency_key(trace_id: str, task_id: str, sender: str, step: str, "
                                          "attempt: int, answers: str | None = None) -> str:",
                                          "def idempotency_key(intent):") + "    return 'k'\n",
}


def _wrong_digest(body: str) -> str:
    start = MODEL.index("def digest(")
    end = MODEL.index("def idempotency_key(")
    return MODEL[:start] + body + "\n\n" + MODEL[end:]


SHAPES = {**{f"key-{k}": _with_key(v) for k, v in WRONG_KEYS.items()},
          **{k: _wrong_digest(v) for k, v in WRONG_DIGESTS.items()}, **WHOLE_FILES}


@pytest.mark.quick_sample(5)
@pytest.mark.slow_cases("key-huge")  # measured at 2 s or more on 2 cores
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_valid_but_wrong_answers_of_every_shape_get_a_verdict_not_a_grader_error(name, tmp_path):
    r = evaluate(EX, _submission(tmp_path, SHAPES[name]), hidden=True, isolate=False)
    assert not r.grader_errors, [(x.name, x.grader_error) for x in r.grader_errors]
    assert r.score < r.max_score
    for x in r.results:
        assert x.points in (0, x.max_points), "a rule is all or nothing"
        if not x.passed:
            assert x.message and "grader error" not in x.message


@pytest.mark.parametrize("judge,args", [
    ("keys.digest_under_its_scheme", {"cases": [{"scheme": "md5", "group": "key-order"}]}),
    ("keys.digest_under_its_scheme", {"cases": "all"}),
    ("keys.refusals", {"cases": [{"value": "nope", "scheme": "jcs-v2"}]}),
    ("keys.key_injective", {"sets": [{"kind": "pairs", "names": ["nope"]}]}),
    ("keys.key_is_an_id", {"sets": [5]}),
    ("keys.keys_in_the_run", {"cases": ["publish-report"]}),
])
def test_a_malformed_case_list_is_the_exercise_files_error_not_a_crash(judge, args, tmp_path):
    v = judge_here(judge, _submission(tmp_path, MODEL), args)
    assert v.grader_error is None and v.score == 0 and "E_EXERCISE_FILE" in v.message


CI_MUTANTS = 80  # the slow mutation test's even sample (None: all)


@pytest.mark.slow
def test_the_grade_notices_at_least_95_percent_of_the_model_answers_mutants():
    from sim.course.mutants import TARGET, mutation_run

    # CI judges an even sample (80 mutants); the full run is
    # 'protolab kit verify --mutants -e 2', its figure in docs/performance.md

    rep = mutation_run(EX, jobs=2, limit=CI_MUTANTS)
    assert not rep.problem, rep.problem
    assert rep.score is not None and rep.score >= TARGET, [(r.mutant.what, r.differs) for r in rep.survivors]
