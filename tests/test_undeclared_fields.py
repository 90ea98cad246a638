"""NO_STATE_FROM_UNDECLARED (issue 29, item 6): the closed-payload lesson as an invariant. Naive takes
the researcher's self-reported budget_left and the task's budget becomes the 99 it claimed: the
invariant breaks with a witness naming the message and the field. Safe refuses the message
(E_UNKNOWN_FIELD) and holds. Each way the check could be weakened is pinned by a case of the
invariants' contract (sim/contracts/invariants.py); these tests say the lesson in the lab's terms."""

import pytest

from sim.contracts.invariants import CASES, check_case
from sim.invariants import DESCRIPTIONS, REGISTRY, check
from sim.runner import run_scenario
from sim.scenario import load_scenario

NAME = "NO_STATE_FROM_UNDECLARED"


def _verdict(scenario, policy, faults):
    store = run_scenario(load_scenario(scenario), policy=policy, faults=list(faults), seed=0)
    try:
        return {r.name: r for r in check(store)}[NAME], store.deliveries()
    finally:
        store.close()


@pytest.mark.parametrize("scenario", ["publish-report", "flaky-tool"])
def test_naive_believes_a_self_reported_budget_and_the_witness_names_the_message_and_the_field(scenario):
    r, _ = _verdict(scenario, "naive", ["self-report"])
    assert not r.ok
    (w,) = r.witnesses  # one message carried the claim, once
    assert (w["message_id"], w["task_id"], w["type"], w["sender"]) == ("M-3", "T-1", "task_result", "researcher")
    assert w["fields"] == ["budget_left"] and w["claimed"] == {"budget_left": 99}
    b = w["believed"]["budget_left"]
    assert b["after"] == 99 and b["before"] < 99  # the task's own ledger took the worker's word
    assert "payload.budget_left is not declared for task_result" in w["problem"]
    assert "budget_left went from" in w["problem"] and "budget_charged" in {c["type"] for c in w["changed"]}


@pytest.mark.parametrize("scenario", ["publish-report", "flaky-tool"])
def test_safe_refuses_the_claim_with_e_unknown_field_and_the_invariant_holds(scenario):
    r, deliveries = _verdict(scenario, "safe", ["self-report"])
    assert r.ok and not r.witnesses
    refused = [d for d in deliveries if d["code"] == "E_UNKNOWN_FIELD"]
    assert [d["message_id"] for d in refused] == ["M-3"]


def test_the_rule_is_written_for_a_student_and_has_its_column():
    text = DESCRIPTIONS[NAME]
    assert "budget_left" in text and "declare" in text and "sim/versions.py" in text
    assert REGISTRY[NAME].short == "undcl"


@pytest.mark.parametrize("case", [c for c in CASES if c.invariant == NAME], ids=lambda c: c.name)
def test_every_contract_case_of_the_invariant(case):
    assert check_case(check, case) == []


def test_the_contract_has_both_kinds_and_a_planted_runtime_that_keeps_every_other_rule():
    cases = [c for c in CASES if c.invariant == NAME]
    assert {c.holds for c in cases} == {True, False}
    assert any("keeps every other rule" in c.name for c in cases)
