"""Every clause probed from both sides (issue 42, part 2): four wrong designs of a hidden class got full
marks, each one clause of a rule no case probed from both sides. The judges now probe by the rule, not
by the cases someone thought of, and each of the four loses its rule with its own message and hint:

* a value a key must not depend on that no case varied: exercise 1 varies every field of an Intent alone,
  on every kind of message, and holds the key to what the rule owes it (``KEY_OWES``); exercise 2 varies
  every field of its key's signature;
* an answer's field checked for being *some* recorded value rather than the right one: exercise 3 compares
  every field of an answer with the reference intake's, and the contract holds ``duplicate_of`` to the
  intent whose payload is repeated;
* a version boundary no case crossed, and a comparison whose one side no case reached: the contract's
  generated boundary cases (every version around those read; each lease, budget and state_version
  comparison one below, at and one above).

A test here fails if the probe it names is taken away: each asserts on what a student or an instructor
would read (the rule lost, the words of the message and hint) on a design with exactly one such mistake.
"""

from __future__ import annotations

import dataclasses
import shutil
import textwrap
from pathlib import Path

import pytest

from sim.contracts.intake import CASES, boundary_cases, check_tagged, version_spellings
from sim.course.catalog import get_exercise, solutions_dir
from sim.course.evaluate import evaluate
from sim.design import Intent
from sim.intake import decide as reference
from sim.versions import READS, refusal

EX1, EX2, EX3 = get_exercise(1), get_exercise(2), get_exercise(3)
MODEL3 = (solutions_dir(EX3) / "decide.py").read_text(encoding="utf-8")


def _consume(tmp_path: Path, body: str) -> Path:
    d = tmp_path / "sub"
    shutil.copytree(EX3.folder, d, ignore=shutil.ignore_patterns("__pycache__"))
    (d / "decide.py").write_text(body, encoding="utf-8")
    return d


def _one(body: str, old: str, new: str) -> str:
    assert body.count(old) == 1, old
    return body.replace(old, new)


def _failed(report) -> dict:
    return {r.name: f"{r.message} {r.hint}" for r in report.results if not r.passed}


# ------------------------------------------------------------------------------------------ the contract


def test_every_version_boundary_is_crossed_and_each_side_agrees_with_the_runtime():
    spellings = dict(version_spellings())
    newest = max(READS)
    # each version read (bare and with a patch), the next minor of the major read, the next major
    for v in READS:
        assert spellings[f"{v.major}.{v.minor}"] is True and spellings[f"{v.major}.{v.minor}.7"] is True
    assert spellings["1"] is True
    assert spellings[f"{newest.major}.{newest.minor + 1}"] is False
    assert spellings[f"{newest.major + 1}"] is False and spellings[f"{newest.major + 1}.0"] is False
    for text, read in spellings.items():  # the contract's side is the runtime's (sim.versions)
        assert (refusal(text) is None) == read, text
    ids = {c.id for c in boundary_cases() if c.family == "schema-version"}
    assert {"bound-schema-1-1-start", "bound-schema-1-2-start", "bound-schema-1-2-repeat", "bound-schema-2-0-start"} <= ids


@pytest.mark.parametrize("family, prefix", [("leases", "bound-start-lease-first"), ("leases", "bound-start-lease-after-retry"),
                                            ("leases", "bound-result-lease-first"), ("leases", "bound-result-lease-second"),
                                            ("leases", "bound-start-budget"), ("compare-and-swap", "bound-cas-cancel"),
                                            ("compare-and-swap", "bound-cas-result"), ("compare-and-swap", "bound-cas-review")])
def test_every_comparison_is_tried_one_below_at_and_one_above(family, prefix):
    sides = {c.id.rsplit("-", 1)[1]: c for c in boundary_cases() if c.id.startswith(prefix + "-")}
    assert {"equal", "above"} <= set(sides) and all(c.family == family for c in sides.values())
    # (a lease below 1 is no envelope: the first start's "below" is the stale-lease case the contract has)
    assert "below" in sides or prefix in ("bound-start-lease-first", "bound-result-lease-first")
    assert sides["equal"].decision.value == "accepted"
    assert all(c.decision.value == "rejected" and c.code for side, c in sides.items() if side != "equal"
               and not prefix.endswith("budget"))


def test_the_generated_cases_hold_for_the_reference_intake_and_the_model_answer():
    from sim.plugins import load_intake

    model = load_intake(str(solutions_dir(EX3) / "decide.py"))
    for c in boundary_cases():
        assert check_tagged(reference, c)[1] == [], c.id
        assert check_tagged(model, c)[1] == [], c.id
    assert len(CASES) == len({c.id for c in CASES}) > 129  # the 129 written cases, and the boundaries


def test_a_duplicate_must_name_the_intent_it_repeats_not_any_recorded_one():
    from sim.intake import Verdict

    case = next(c for c in CASES if c.id == "bound-dup-names-second-in-order")
    right = reference(case.envelope, case.task, case.prior, None, case.unresolved)
    other = next(p for p in case.prior if p != right.duplicate_of)
    wrong = Verdict(right.decision, right.reason, duplicate_of=other)
    fails = check_tagged(lambda *a: wrong, case)[1]
    assert [k for k, _m in fails] == ["duplicate-of"]
    assert other.message_id in fails[0][1] and right.duplicate_of.message_id not in fails[0][1]


def test_every_field_of_an_answer_is_compared_with_the_reference_and_the_message_keeps_the_answer_back():
    from dataclasses import replace

    from sim.course.judges.intake import field_differences
    from sim.machine import default_rulebook

    rules = default_rulebook()
    start = next(c for c in CASES if c.id == "bound-start-lease-after-retry-equal")
    late = next(c for c in CASES if c.id == "late-second-success")
    v = reference(start.envelope, start.task, start.prior, rules, start.unresolved)
    assert field_differences(v, start) == []
    assert field_differences(replace(v, grant_lease=v.grant_lease + 1), start) == [("lease", "3")]
    assert [f for f, _s in field_differences(replace(v, create=True), start)] == ["create"]
    lv = reference(late.envelope, late.task, late.prior, rules, late.unresolved)
    assert field_differences(replace(lv, needs_reconciliation=False), late) == [("reconcile", "False")]
    # what the student said is shown capped and with control and bidi characters escaped
    from sim.intake import Decision

    said = dict(field_differences(replace(v, decision=Decision.REJECTED, code="E_" + "X" * 5000 + "\u202e\n"), start))
    assert len(said["code"]) <= 60 and "\u202e" not in said["code"] and "\n" not in said["code"]


# ------------------------------------------------------------------------------------------ exercise 3: the planted three


@pytest.mark.parametrize("name, rule, symptom_words", [
    ("duplicate-of-first", "duplicates", "names the recorded intent it repeats"),
    ("any-minor", "schema-version", "minor newer than this runtime reads"),
    ("start-lease-below", "leases", "refuses only the old side"),
])
def test_exercise_3s_planted_designs_lose_their_rule_with_its_own_hint(name, rule, symptom_words):
    sub = solutions_dir(EX3) / "wrong" / name
    rep = evaluate(EX3, sub, only=[rule], hidden=True, isolate=False)
    (res,) = rep.results
    assert not res.passed and res.points == 0
    assert symptom_words in res.hint, res.hint


def test_a_consumer_that_compares_a_lease_with_greater_than_only_fails_leases_publicly(tmp_path):
    """The public check (no hidden cases) already shows the other side of the comparison."""
    body = _one(MODEL3, '        if msg["payload"]["lease_version"] != task["lease_version"]:',
                '        if msg["payload"]["lease_version"] < task["lease_version"]:')
    rep = evaluate(EX3, _consume(tmp_path, body), hidden=False, isolate=False)
    failed = _failed(rep)
    assert set(failed) == {"leases"}, failed
    assert "(above)" in failed["leases"] and "lease_version 2 when the current lease is 1" in failed["leases"]


def test_a_consumer_that_reads_only_bare_1_refuses_the_minor_the_runtime_reads(tmp_path):
    body = _one(MODEL3, '    if not reads(msg["schema_version"]):', '    if msg["schema_version"] != "1":')
    rep = evaluate(EX3, _consume(tmp_path, body), only=["schema-version"], hidden=False, isolate=False)
    (res,) = rep.results
    assert not res.passed and "schema 1.1" in res.message and "Parse the version" in res.hint


# ------------------------------------------------------------------------------------------ exercises 1 and 2: keys


def test_every_field_of_an_intent_is_classified_and_varied_alone():
    from sim.course.judges.design import KEY_OWES, _field_variants

    assert set(KEY_OWES) == {f.name for f in dataclasses.fields(Intent)}
    i = Intent(type="task_result", sender="researcher", recipient="manager", trace_id="R-1", task_id="T-1",
               attempt=2, body={"status": "succeeded", "lease_version": 2}, refs=("sha256:" + "a" * 64,),
               content={"rows": [1]}, context={"notes": "x"}, message_id="M-3", created_at="2026-01-01T00:00:00Z")
    varied = {}
    for name, owes, _what, j in _field_variants(i, "2026-01-01T00:09:00Z"):
        assert owes == KEY_OWES[name]
        moved = {f.name for f in dataclasses.fields(Intent) if getattr(j, f.name) != getattr(i, f.name)}
        assert moved <= {name, "body"} and name in moved  # alone (an attempt's lease follows it in the body)
        varied.setdefault(name, []).append(j)
    assert set(varied) == {n for n, o in KEY_OWES.items() if o != "free"} - {"answers"}  # a result answers nothing
    assert sorted(j.attempt for j in varied["attempt"]) == [1, 3]  # one below, one above


def _design(tmp_path: Path, key: str) -> Path:
    d = tmp_path / "sub"
    d.mkdir()
    (d / "design.py").write_text(textwrap.dedent('''
        DIGEST_SCHEME = "jcs-v2"

        def idempotency_key(intent):
            about = f":of:{intent.answers}" if intent.answers else ""
            return KEY

        def payload(intent):
            return dict(intent.body)

        def evidence_refs(intent):
            return list(intent.refs)
        ''').replace("KEY", key))
    return d


@pytest.mark.parametrize("key, rule, words", [
    ('f"{intent.trace_id}:{intent.task_id}:{intent.step}:{intent.attempt}{about}:{intent.sender}:to:{intent.recipient}"',
     "keys-name-intents", "only recipient"),
    pytest.param('f"{intent.trace_id}:{intent.task_id}:{intent.step}:{intent.attempt}{about}:{intent.sender}:'
                 '{\'.\'.join(sorted(intent.context))}"', "payload-conflict", "only its context revised",
                 marks=pytest.mark.slow),  # (three tests of a design each: the recipient's case stays quick)
    pytest.param('f"{intent.trace_id}:{intent.task_id}:{intent.step}:{intent.attempt}{about}:{intent.sender}:'
                 '{intent.type == \'fence\'}"', None, None, marks=pytest.mark.slow),
])
def test_exercise_1_holds_the_key_to_every_field_alone(tmp_path, key, rule, words):
    rep = evaluate(EX1, _design(tmp_path, key), only=["keys-name-intents", "distinct-intents", "payload-conflict"],
                   hidden=False, isolate=False)
    failed = _failed(rep)
    if rule is None:  # a key that names every field it owes and nothing else passes
        assert failed == {}, failed
    else:
        assert set(failed) == {rule} and words in failed[rule], failed


def test_exercise_2_varies_every_field_of_the_signature_alone():
    from sim.course.judges.keys import _BASES, _FIELDS, _changes

    changes = _changes()
    for base in _BASES:
        for at, name in enumerate(_FIELDS):
            alone = [c for c in changes if c != base and all(c[k] == base[k] for k in range(len(base)) if k != at)]
            assert alone, name
    attempts = {c[4] for c in changes if c[:4] == _BASES[1][:4] and c[5] == _BASES[1][5]}
    assert {1, 2, 3} <= attempts  # one below, at and one above the second base's attempt


def test_the_mutation_run_counts_a_mutant_killed_by_a_contract_case_without_playing_its_runs():
    """A rule is all or nothing: a mutant (or planted design) that breaks one case of a test loses that
    test, so the mutation run need not play every run to know it; one that breaks no case is graded in
    full (certain_failures says nothing of it)."""
    from sim.course.judges.intake import certain_failures
    from sim.course.mutants import certain_of

    assert certain_of(EX3) is certain_failures and certain_of(EX1) is None
    tests = EX3.graded_tests(True)
    assert certain_failures(solutions_dir(EX3), tests) == []
    assert certain_failures(solutions_dir(EX3) / "wrong" / "any-minor", tests) == ["schema-version"]
    assert certain_failures(solutions_dir(EX3) / "wrong" / "start-lease-below", tests) == ["leases"]
