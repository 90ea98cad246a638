"""Closed payloads (issue 29, item 6): each message type declares its payload fields (sim.versions.shape,
versioned with the envelope); the safe runtime refuses a field nobody declared (E_UNKNOWN_FIELD, with
the declared fields in the reason), the naive one takes it and believes what it says."""

import pytest

from sim import samples, versions
from sim.envelope import build_envelope
from sim.policy import NAIVE
from sim.runner import run_scenario
from sim.runtime import deliver
from sim.scenario import load_scenario
from sim.store import Store


def _result(extra: dict, version: str = "1"):
    payload = {"status": "succeeded", "lease_version": 1, "summary": "3 claims", **extra}
    return build_envelope(message_id="M-3", trace_id="R-1", task_id="T-1", sender="researcher", recipient="manager",
                          type="task_result", payload=payload, idempotency_key="R-1:T-1:attempt-1",
                          created_at="2026-07-13T04:00:03Z", evidence_refs=[samples.facts_ref()],
                          schema_version=version)


def _delivered(last, policy=None):
    store = Store.memory()
    for env in (samples.m1(), samples.m2()):
        deliver(store, env)
    return store, (deliver(store, last, policy=policy) if policy else deliver(store, last))


def test_a_field_a_later_minor_added_is_declared_only_from_that_minor_on():
    assert "partial" not in versions.shape("task_result", versions.Version(1, 0))
    assert versions.shape("task_result", versions.Version(1, 1))["partial"].type is bool
    assert versions.shape("fence")["to"].required


def test_safe_refuses_a_self_reported_approval_and_says_which_fields_are_declared():
    _store, out = _delivered(_result({"approved": True}))
    assert (out.decision, out.code) == ("rejected", "E_UNKNOWN_FIELD")
    assert "payload.approved is not declared for task_result in schema 1.0" in out.reason
    assert "lease_version" in out.reason


def test_a_declared_field_of_the_wrong_type_is_refused_too():
    _store, out = _delivered(_result({"summary": 3}))
    assert out.code == "E_UNKNOWN_FIELD" and "payload.summary of task_result must be str" in out.reason


def test_naive_takes_an_undeclared_field():
    _store, out = _delivered(_result({"approved": True}), policy=NAIVE)
    assert out.decision == "accepted"


def test_the_shipped_samples_fit_their_shapes():
    store = Store.memory()
    outcomes = [deliver(store, e) for e in samples.happy_path()]
    assert all(o.code != "E_UNKNOWN_FIELD" for o in outcomes)
    for env in (samples.conflicting_m3(), samples.late_failure()):
        assert versions.shape_refusal(env) is None


@pytest.mark.parametrize("scenario,faults", [
    ("publish-report", ["conflicting-digest", "transient"]),
    ("publish-report", ["upgrade"]),
    ("sensitive-source", ["duplicate"]),
    ("fan-out", ["crash", "late-conflict"]),
])
def test_what_the_kit_itself_sends_is_never_refused_for_its_shape(scenario, faults):
    run = run_scenario(load_scenario(scenario), policy="safe", faults=faults, seed=0)
    assert not [d for d in run.deliveries() if d["code"] == "E_UNKNOWN_FIELD"]


def test_safe_refuses_a_self_reported_budget_and_the_workers_retry_lands():
    run = run_scenario(load_scenario("publish-report"), policy="safe", faults=["self-report"], seed=0)
    codes = [d["code"] for d in run.deliveries() if d["type"] == "task_result"]
    assert codes[0] == "E_UNKNOWN_FIELD" and codes[1:] == [None, None]
    assert {t.task_id: t.budget_left for t in run.tasks()}["T-1"] == 2


def test_naive_believes_a_self_reported_budget_and_credits_the_task_with_it():
    run = run_scenario(load_scenario("publish-report"), policy="naive", faults=["self-report"], seed=0)
    assert {t.task_id: t.budget_left for t in run.tasks()}["T-1"] == 99
    credits = [b for b in run.budget_ledger() if b["task_id"] == "T-1" and b["reason"].startswith("budget_left")]
    assert [(c["delta"], c["reason"]) for c in credits] == [(97, "budget_left 99 reported by researcher")]
