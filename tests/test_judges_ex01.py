"""Exercise 1's judges (sim/course/judges/design.py): one test per rule, all or nothing; the wrong
designs a class wrote from the exercise text (issue 25) lose marks, each told its own mistake; no
answer of any shape makes a judge fail (a grader error); the rules' cases hold for the course's own
design; runs are shared between the tests of a submission."""

import textwrap
from pathlib import Path

import pytest

from sim.course.rubric import course_rubric

from sim.course.catalog import get_exercise, solutions_dir
from sim.course.evaluate import evaluate
from sim.course.judges import design as judges

EX = get_exercise(1)
SOL = solutions_dir(EX)
RULES = ["keys-name-intents", "distinct-intents", "payload-conflict", "evidence-by-reference", "minimal-payloads",
         "fault-matrix", "search"]

GOOD_KEY = '''
def idempotency_key(intent):
    about = f":of:{intent.answers}" if intent.answers else ""
    return f"{intent.trace_id}:{intent.task_id}:{intent.step}:a{intent.attempt}:r{intent.retry}{about}:{intent.sender}"
'''
GOOD_REST = '''
DIGEST_SCHEME = "json-sorted-v1"

def payload(intent):
    return dict(intent.body)

def evidence_refs(intent):
    return list(intent.refs)
'''


def _folder(tmp_path: Path, source: str, name: str = "sub") -> Path:
    d = tmp_path / name
    d.mkdir(parents=True)
    (d / "design.py").write_text(textwrap.dedent(source))
    return d


def _grade(folder: Path, hidden: bool = True):
    return evaluate(EX, folder, hidden=hidden, isolate=False)


def _share(report) -> float:
    return min(r.max_points for r in report.results)


# ------------------------------------------------------------------------------------------ the exercise's shape


def test_one_test_per_rule_of_equal_weight_each_with_hidden_cases():
    assert [t.name for t in EX.tests] == RULES
    assert {t.name: t.points for t in EX.tests} == course_rubric(EX).weights and EX.hidden_tests() == ()  # exercise.toml carries the rubric's weights
    # the search explores the same small run everywhere: it has no hidden cases
    assert set(EX.extensions()) == set(RULES) - {"search"} and all(t.hidden_cases for t in EX.tests if t.name != "search")
    assert set(judges.SYMPTOMS) >= {"key-differs-between-processes", "key-from-payload", "senders-share-key",
                                    "false-duplicate", "conflict-unseen"}


def test_the_readme_says_what_each_rule_judges_and_that_each_is_all_or_nothing():
    text = (EX.folder / "README.md").read_text()
    judged = text[text.index("## What is judged"):]
    assert "all or nothing" in judged
    for name in RULES:
        assert f"`{name}`" in judged


# ------------------------------------------------------------------------------------------ the escaped designs

PAYLOAD_DIGEST = GOOD_REST + '''
import hashlib, json

def idempotency_key(intent):
    said = hashlib.sha256(json.dumps(intent.body, sort_keys=True).encode()).hexdigest()[:24]
    return f"{intent.trace_id}:{intent.task_id}:{intent.type}:{intent.sender}:{said}"
'''
PAYLOAD_DIGEST_OF_EVERYTHING = GOOD_REST + '''
import hashlib, json

def idempotency_key(intent):
    said = {"body": intent.body, "refs": list(intent.refs), "content": intent.content}
    digest = hashlib.sha256(json.dumps(said, sort_keys=True, default=str).encode()).hexdigest()[:24]
    return f"{intent.trace_id}:{intent.task_id}:{intent.step}:attempt-{intent.attempt}:{intent.answers}:{intent.sender}:{digest}"
'''
NO_SENDER = GOOD_REST + '''
def idempotency_key(intent):
    about = f":of:{intent.answers}" if intent.answers else ""
    return f"{intent.trace_id}:{intent.task_id}:{intent.step}:attempt-{intent.attempt}{about}"
'''
BUILTIN_HASH = GOOD_REST + '''
def idempotency_key(intent):
    return f"k{hash((intent.trace_id, intent.task_id, intent.step, intent.attempt, intent.answers, intent.sender)) & 0xffffffff:x}"
'''
BUILTIN_HASH_OF_A_STRING = GOOD_REST + '''
def idempotency_key(intent):
    name = f"{intent.trace_id}/{intent.task_id}/{intent.step}/{intent.attempt}/{intent.answers}/{intent.sender}"
    return name[:40] + ":" + str(abs(hash(name)))
'''
COUNTER = GOOD_REST + '''
import itertools
_n = itertools.count()

def idempotency_key(intent):
    return f"{intent.trace_id}:{intent.task_id}:{intent.step}:{intent.attempt}:{intent.sender}:{next(_n)}"
'''


@pytest.mark.quick_sample(2)
@pytest.mark.parametrize("source, rule, symptom", [
    (PAYLOAD_DIGEST, "payload-conflict", "key-from-payload"),
    (PAYLOAD_DIGEST_OF_EVERYTHING, "payload-conflict", "key-from-payload"),
    (NO_SENDER, "distinct-intents", "senders-share-key"),
    (BUILTIN_HASH, "keys-name-intents", "key-differs-between-processes"),
    (BUILTIN_HASH_OF_A_STRING, "keys-name-intents", "key-differs-between-processes"),
    (COUNTER, "keys-name-intents", "key-differs-between-processes"),
], ids=["payload-digest", "digest-of-everything", "no-sender", "builtin-hash", "hash-of-a-string", "counter"])
def test_the_designs_that_escaped_lose_a_rule_with_its_own_hint_and_the_public_check_already_says_so(
        tmp_path, source, rule, symptom):
    for hidden in (True, False):
        report = _grade(_folder(tmp_path / str(hidden), source), hidden=hidden)
        by = {r.name: r for r in report.results}
        assert not report.grader_errors
        assert report.score <= report.max_score - _share(report), [(r.name, r.points) for r in report.results]
        assert not by[rule].passed and by[rule].points == 0, by[rule].message
        assert symptom in by[rule].signature["symptoms"]
        hint_of = next(h.text for h in _hints() if h.when.get("symptom") == (symptom,))
        assert by[rule].hint == hint_of


def _hints():
    from sim.course.hints import load_hints

    return load_hints(EX)


def test_a_key_from_the_payload_is_caught_through_the_students_own_key_not_the_faults_copy(tmp_path):
    # The conflicting-digest fault copies the first envelope's key onto its second payload, so it
    # never asks the design: the rule's own probe asks the design for both, through the runtime.
    d = _folder(tmp_path, PAYLOAD_DIGEST)
    report = _grade(d, hidden=False)
    by = {r.name: r for r in report.results}
    assert by["fault-matrix"].passed  # the fault matrix alone would never see it
    r = by["payload-conflict"]
    assert not r.passed and "conflict-unseen" in r.signature["symptoms"]
    played = judges._play(d, "publish-report", (), 0, probe=True)
    assert {c["decision"] for c in played.probes["conflicts"]} <= {"late", "accepted"}
    assert all(not c["same_key"] for c in played.probes["conflicts"])


def test_a_clean_run_with_a_false_duplicate_fails_on_either_story(tmp_path):
    d = _folder(tmp_path, NO_SENDER)
    for story in ("publish-report", "fan-out"):
        v = judges.distinct_intents(d, {"probes": [{"scenario": story, "seed": 0}]})
        assert v.score == 0 and "false-duplicate" in v.signature["symptoms"], v.message
        assert "duplicate" in v.message and "ack of the fence" in v.message


# ------------------------------------------------------------------------------------------ the rules hold for the course


@pytest.mark.parametrize("story", ["publish-report", "fan-out"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_clean_run_of_the_course_design_records_no_duplicate_no_conflict_and_no_shared_key(story, seed):
    from sim.runner import run_scenario
    from sim.scenario import load_scenario

    store = run_scenario(load_scenario(story), seed=seed)
    try:
        assert {d["decision"] for d in store.deliveries()} == {"accepted"}
        keys = [m["idempotency_key"] for m in store.messages()]
        assert len(keys) == len(set(keys))
    finally:
        store.close()


def test_the_model_answer_passes_every_case_and_the_probes_reach_the_runtime(tmp_path):
    d = _folder(tmp_path, (SOL / "design.py").read_text())
    report = _grade(d)
    assert report.score == report.max_score == 70, [(r.name, r.message) for r in report.results if not r.passed]
    played = judges._play(d, "fan-out", (), 0, probe=True)
    assert {r["decision"] for r in played.probes["resends"]} == {"duplicate"}
    assert {c["decision"] for c in played.probes["conflicts"]} == {"conflict"}
    assert {r["kind"] for r in played.probes["keys"]} == {"task_request", "task_started", "task_result", "ack", "fence",
                                                          "fence-ack"}


def test_a_submissions_tests_share_its_runs(tmp_path, monkeypatch):
    d = _folder(tmp_path, (SOL / "design.py").read_text())
    played = []
    real = judges._facts
    monkeypatch.setattr(judges, "_facts", lambda run, out: (played.append((out.scenario, out.faults, out.seed)),
                                                           real(run, out))[1])
    _grade(d)
    assert len(played) == len(set(played)), "a run was played twice for one submission"
    cases = set()
    for t in EX.graded_tests(True):
        for c in t.args.get("cases", []) + [dict(p, faults=[]) for p in t.args.get("probes", [])]:
            cases.add((c["scenario"], tuple(c.get("faults", ())), c.get("seed", 0)))
    assert set(played) == cases


# ------------------------------------------------------------------------------------------ no answer makes a judge fail

SHAPES = {
    "key-none": GOOD_REST + "\ndef idempotency_key(intent):\n    return None\n",
    "key-int": GOOD_REST + "\ndef idempotency_key(intent):\n    return 7\n",
    "key-dict": GOOD_REST + "\ndef idempotency_key(intent):\n    return {'k': intent.task_id}\n",
    "key-empty": GOOD_REST + "\ndef idempotency_key(intent):\n    return ''\n",
    "key-huge": GOOD_REST + "\ndef idempotency_key(intent):\n    return 'k' * 100_000\n",
    "key-unicode": GOOD_REST + "\ndef idempotency_key(intent):\n    return f'{intent.task_id}:{intent.step}:ü'\n",
    "key-raises": GOOD_REST + "\ndef idempotency_key(intent):\n    return intent.answers + ':ack'\n",
    "key-constant": GOOD_REST + "\ndef idempotency_key(intent):\n    return 'same'\n",
    "payload-none": GOOD_KEY + "DIGEST_SCHEME = 'jcs-v2'\ndef payload(intent):\n    return None\n"
                    "def evidence_refs(intent):\n    return list(intent.refs)\n",
    "payload-list": GOOD_KEY + "DIGEST_SCHEME = 'jcs-v2'\ndef payload(intent):\n    return [intent.body]\n"
                    "def evidence_refs(intent):\n    return list(intent.refs)\n",
    "payload-empty": GOOD_KEY + "DIGEST_SCHEME = 'jcs-v2'\ndef payload(intent):\n    return {}\n"
                     "def evidence_refs(intent):\n    return list(intent.refs)\n",
    "payload-float-nan": GOOD_KEY + "DIGEST_SCHEME = 'jcs-v2'\ndef payload(intent):\n    return {**intent.body, 'x': float('nan')}\n"
                         "def evidence_refs(intent):\n    return list(intent.refs)\n",
    "payload-everything": GOOD_KEY + "DIGEST_SCHEME = 'jcs-v2'\ndef payload(intent):\n"
                          "    return {**intent.body, 'content': intent.content, **intent.context}\n"
                          "def evidence_refs(intent):\n    return list(intent.refs)\n",
    "refs-string": GOOD_KEY + "DIGEST_SCHEME = 'jcs-v2'\ndef payload(intent):\n    return dict(intent.body)\n"
                   "def evidence_refs(intent):\n    return ','.join(intent.refs)\n",
    "refs-none": GOOD_KEY + "DIGEST_SCHEME = 'jcs-v2'\ndef payload(intent):\n    return dict(intent.body)\n"
                 "def evidence_refs(intent):\n    return None\n",
    "refs-ints": GOOD_KEY + "DIGEST_SCHEME = 'jcs-v2'\ndef payload(intent):\n    return dict(intent.body)\n"
                 "def evidence_refs(intent):\n    return [1, None, {}]\n",
    "refs-made-up": GOOD_KEY + "DIGEST_SCHEME = 'jcs-v2'\ndef payload(intent):\n    return dict(intent.body)\n"
                    "def evidence_refs(intent):\n    return ['sha256:' + '0' * 64, 'M-999']\n",
    "scheme-unknown": GOOD_KEY + "DIGEST_SCHEME = 'md5'\ndef payload(intent):\n    return dict(intent.body)\n"
                      "def evidence_refs(intent):\n    return list(intent.refs)\n",
    "scheme-int": GOOD_KEY + "DIGEST_SCHEME = 3\ndef payload(intent):\n    return dict(intent.body)\n"
                  "def evidence_refs(intent):\n    return list(intent.refs)\n",
    "no-payload": GOOD_KEY + "DIGEST_SCHEME = 'jcs-v2'\ndef evidence_refs(intent):\n    return list(intent.refs)\n",
    "functions-are-not": GOOD_REST + "\nidempotency_key = 'not a function'\n",
    "raises-on-acks": GOOD_REST + GOOD_KEY.replace("    about =", "    assert intent.type != 'ack'\n    about ="),
}


@pytest.mark.quick_sample(6)
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_no_answer_of_any_shape_makes_a_judge_fail(tmp_path, shape):
    report = _grade(_folder(tmp_path, SHAPES[shape]))
    assert not report.grader_errors, [(r.name, r.grader_error) for r in report.grader_errors]
    assert report.score < report.max_score
    for r in report.results:
        assert r.message and "\n" not in r.message and "Traceback" not in r.message


# ------------------------------------------------------------------------------------------ planted wrong answers


# Each planted wrong answer failing exactly the tests its expect.toml names, with feedback naming its
# mistake, is checked once for every exercise in tests/test_solutions.py.


# ------------------------------------------------------------------------------------------ mutation score


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
def test_behaviour_is_deterministic_and_abstracts_key_strings(tmp_path):
    a = _folder(tmp_path, (SOL / "design.py").read_text(), "a")
    b = _folder(tmp_path, (SOL / "design.py").read_text().replace(":attempt-", ":try-").replace(":of:", ":acking:"), "b")
    assert judges.behaviour(a) == judges.behaviour(b)


CI_MUTANTS = 60  # the slow mutation test's even sample (None: all)


@pytest.mark.slow
def test_the_grade_notices_at_least_95_percent_of_the_model_answers_mutants():
    from sim.course.mutants import TARGET, mutation_run

    # CI judges an even sample (60 mutants); the full run is
    # 'protolab kit verify --mutants -e 1', its figure in docs/performance.md

    report = mutation_run(EX, jobs=2, limit=CI_MUTANTS)
    survivors = [(r.mutant.what, r.differs) for r in report.survivors]
    assert report.score is not None and report.score >= TARGET, survivors
