"""The named invariants, checked over real runs of the runtime.

Every scenario drives ``sim.runtime.deliver`` with hand-built envelopes (mostly the default
story's, from ``sim.samples``). Under the safe policy all eight invariants hold; under the
naive one each fault breaks exactly the invariant(s) it is about, and the witnesses name the
messages that did it.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from sim import samples
from sim.envelope import build_envelope, role_of
from sim.intake import Decision, Move, Verdict
from sim.faults import REGISTRY as FAULT_REGISTRY
from sim.invariants import INVARIANTS, REGISTRY, InvariantResult, check
from sim.machine import TaskState
from sim.policy import NAIVE, SAFE, naive_decide
from sim.runtime import deliver, expire_lease, put_artifact, review
from sim.store import Store

ALL = frozenset(INVARIANTS)


# ---------------------------------------------------------------------------- helpers


def _env(mid, task, sender, recipient, typ, payload, key, second, refs=()):
    return build_envelope(
        message_id=mid, trace_id="R-1", task_id=task, sender=sender, recipient=recipient, type=typ,
        payload=payload, idempotency_key=key, created_at=f"2026-07-13T04:00:{second:02d}Z", evidence_refs=refs,
    )


def _store_with_artifacts() -> Store:
    s = Store.memory()
    put_artifact(s, samples.FACTS, kind="fact-table", task_id="T-1")
    put_artifact(s, samples.draft(), kind="draft", task_id="T-2")
    return s


def _run(steps, policy, decide=None) -> Store:
    """Deliver ``steps`` (envelopes, or callables taking the store) in order under ``policy``.

    ``decide`` overrides the policy's intake function (the runtime's plug-in point).
    """
    s = _store_with_artifacts()
    for step in steps:
        if callable(step):
            step(s)
        else:
            deliver(s, step, policy=policy, decide=decide)
    return s


def ack_as_completion(env, task, prior, rules, unresolved=frozenset()):
    """The anti-pattern the seed warns about: last write wins, and a delivery receipt read as "done".

    ``NAIVE`` no longer reads an ack as completion (sim/policy.py: "even a naive runtime knows a
    receipt is not a result"), so the ack fault plugs this intake into the naive runtime instead.
    """
    if env.type == "ack" and task is not None and task.state != TaskState.SUCCEEDED:
        return Verdict(
            Decision.ACCEPTED, f"{task.state.value} -> succeeded: the ack says it is done",
            move=Move(task.state, TaskState.SUCCEEDED, "ack taken for completion", env.sender, role_of(env.sender)),
            record_intent=True,
        )
    return naive_decide(env, task, prior, rules, unresolved)


def _by_name(results) -> dict[str, InvariantResult]:
    return {r.name: r for r in results}


def _broken(results) -> set[str]:
    return {r.name for r in results if not r.ok}


def _ack_of_m2():
    return _env("A-2", "T-1", "manager", "researcher", "ack", {"of": "M-2"}, "R-1:T-1:ack:M-2", 3)


def _crash(second_worker: str):
    """M-1, M-2 (lease 1); the lease expires; T-1 is reassigned and restarted (lease 2); then the zombie's M-3."""
    h = samples.happy_path()
    return [
        h[0],
        h[1],
        lambda s: expire_lease(s, "T-1"),
        _env("M-7", "T-1", "manager", second_worker, "task_request", {"goal": "collect evidence, second attempt"},
             "R-1:T-1:request:attempt-2", 5),
        _env("M-8", "T-1", second_worker, "manager", "task_started", {"lease_version": 2}, "R-1:T-1:attempt-2:started", 6),
        samples.m3(),  # the zombie: lease_version 1, written before the crash, delivered after
    ]


def _unstored_evidence():
    h = samples.happy_path()
    ghost = "sha256:" + "0" * 64
    bad = _env(
        "M-3", "T-1", "researcher", "manager", "task_result",
        {"status": "succeeded", "lease_version": 1, "summary": "trust me", "fact_table": ghost},
        "R-1:T-1:attempt-1", 3, refs=[ghost],
    )
    return [h[0], h[1], bad], ghost


def _garbled(env):
    """``env`` as the transport's garble fault delivers it: its summary changed, its digest the sender's."""
    from sim.faults import _garbled as garbled  # (the fault's own change)

    return replace(env, payload={**env.payload, "summary": garbled(env.payload["summary"])})


# name -> (steps, invariants that break under NAIVE, the message the witnesses must name, naive intake override)
def _faults():
    h = samples.happy_path()
    return {
        # (naive re-executes M-6: its conversation took one message id twice)
        "duplicate of M-6": (h + [h[6]], {"EFFECT_AT_MOST_ONCE", "SEQUENCE_KEPT"}, "M-6", None),
        "conflicting M-3": (h[:3] + [samples.conflicting_m3()], {"CONFLICT_FROZEN"}, "M-4", None),
        "late failure": (h[:3] + [samples.late_failure()], {"NO_STATE_REGRESSION", "TRANSITIONS_ALLOWED"}, "M-4", None),
        "crashed worker's zombie result": (_crash("researcher"), {"NO_LOST_UPDATE"}, "M-3", None),
        "zombie result after reassignment": (_crash("researcher-2"), {"NO_LOST_UPDATE"}, "M-3", None),
        # (its summary changed after it was digested: naive takes it, safe refuses it with E_DIGEST_MISMATCH)
        "garbled M-3": (h[:2] + [_garbled(h[2])], set(FAULT_REGISTRY["garble"].naive_breaks), "M-3", None),
        "ack of M-2": (
            h[:2] + [_ack_of_m2()], {"ACK_IS_NOT_COMPLETION", "TRANSITIONS_ALLOWED"}, "A-2", ack_as_completion,
        ),
    }


FAULTS = list(_faults())


# ---------------------------------------------------------------------------- the default story


def test_check_returns_every_name_in_invariants_order():
    s = _run(samples.happy_path(), SAFE)
    results = check(s)
    assert [r.name for r in results] == list(INVARIANTS)
    # INVARIANTS is the registry in the order the invariants are declared (no list of names by hand: a new
    # one is one decorated function, tests/test_where_things_go.py); the seed's first one leads
    assert INVARIANTS == tuple(REGISTRY) and INVARIANTS[0] == "NO_STATE_REGRESSION"
    assert all(isinstance(r, InvariantResult) and r.description.strip() for r in results)


def test_the_default_story_holds_all_seven_under_safe():
    results = check(_run(samples.happy_path(), SAFE))
    assert _broken(results) == set()
    assert all(r.witnesses == () for r in results)


def test_an_empty_store_holds_all_seven():
    assert _broken(check(Store.memory())) == set()


def test_the_whole_demo_with_every_fault_holds_all_seven_under_safe():
    s = _store_with_artifacts()
    for _title, envs in samples.demo_steps():
        for env in envs:
            deliver(s, env, policy=SAFE)
    assert _broken(check(s)) == set()


# ---------------------------------------------------------------------------- each fault, both policies


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_holds_all_seven_under_safe(fault):
    steps, _breaks, _mid, _decide = _faults()[fault]
    assert _broken(check(_run(steps, SAFE))) == set()


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_breaks_exactly_the_expected_invariants_under_naive(fault):
    steps, breaks, mid, decide = _faults()[fault]
    results = _by_name(check(_run(steps, NAIVE, decide)))
    assert {n for n, r in results.items() if not r.ok} == breaks
    for name in breaks:
        assert mid in json.dumps(results[name].witnesses), (name, results[name].witnesses)


def test_a_redelivered_publishing_result_publishes_twice_under_naive_and_the_witness_shows_both():
    h = samples.happy_path()
    (w,) = _by_name(check(_run(h + [h[6]], NAIVE)))["EFFECT_AT_MOST_ONCE"].witnesses
    assert (w["task_id"], w["kind"], w["target"], w["times_committed"]) == ("T-2", "publish", "R-1", 2)
    assert w["message_ids"] == ["M-6"]
    assert [e["delivery_id"] for e in w["effects"]] == [7, 9]
    assert {e["effect_key"] for e in w["effects"]} == {"publish:R-1:T-2#d7", "publish:R-1:T-2#d9"}


def test_a_swallowed_conflict_names_both_messages_and_the_state_the_task_kept():
    h = samples.happy_path()
    (w,) = _by_name(check(_run(h[:3] + [samples.conflicting_m3()], NAIVE)))["CONFLICT_FROZEN"].witnesses
    assert w["task_id"] == "T-1" and w["idempotency_key"] == "R-1:T-1:attempt-1"
    assert (w["first"]["message_id"], w["second"]["message_id"]) == ("M-3", "M-4")
    assert w["first"]["payload_digest"] != w["second"]["payload_digest"]
    assert w["state_instead"] == "succeeded"


def test_a_late_failure_witness_is_the_regressing_transition():
    h = samples.happy_path()
    r = _by_name(check(_run(h[:3] + [samples.late_failure()], NAIVE)))
    (w,) = r["NO_STATE_REGRESSION"].witnesses
    assert (w["task_id"], w["old_state"], w["new_state"], w["state_version"], w["message_id"]) == (
        "T-1", "succeeded", "failed", 4, "M-4",
    )
    (a,) = r["TRANSITIONS_ALLOWED"].witnesses
    assert (a["old_state"], a["new_state"], a["role"], a["message_id"]) == ("succeeded", "failed", "researcher", "M-4")


def test_the_zombie_result_is_rejected_under_safe_and_applied_under_naive():
    safe = _run(_crash("researcher"), SAFE)
    zombie = [d for d in safe.deliveries() if d["message_id"] == "M-3"]
    assert [(d["decision"], d["code"]) for d in zombie] == [("rejected", "E_STALE_LEASE")]
    naive = _run(_crash("researcher"), NAIVE)
    (w,) = _by_name(check(naive))["NO_LOST_UPDATE"].witnesses
    assert w["problem"] == "stale lease_version"
    assert (w["task_id"], w["message_id"], w["carried_lease_version"]) == ("T-1", "M-3", 1)
    assert w["current_lease"]["lease_version"] == 2 and w["current_lease"]["holder"] == "researcher"
    assert (w["transition"]["from"], w["transition"]["to"]) == ("running", "succeeded")


def test_a_zombie_after_reassignment_is_not_the_lease_holder():
    (w,) = _by_name(check(_run(_crash("researcher-2"), NAIVE)))["NO_LOST_UPDATE"].witnesses
    assert w["problem"] == "sender is not the lease holder"
    assert (w["sender"], w["current_lease"]["holder"]) == ("researcher", "researcher-2")


def test_an_ack_read_as_completion_is_witnessed_with_the_move_it_caused():
    s = _run(samples.happy_path()[:2] + [_ack_of_m2()], NAIVE, ack_as_completion)
    (w,) = _by_name(check(s))["ACK_IS_NOT_COMPLETION"].witnesses
    assert (w["ack_message_id"], w["of"], w["task_id"]) == ("A-2", "M-2", "T-1")
    assert (w["move"]["from"], w["move"]["to"]) == ("running", "succeeded")


def test_the_checker_agrees_with_whatever_the_naive_policy_does_with_an_ack():
    s = _run(samples.happy_path()[:2] + [_ack_of_m2()], NAIVE)
    moved_by_ack = [t for t in s.transitions() if t["message_id"] == "A-2"]
    assert _by_name(check(s))["ACK_IS_NOT_COMPLETION"].ok == (not moved_by_ack)


@pytest.mark.parametrize("policy", [SAFE, NAIVE], ids=["safe", "naive"])
def test_a_result_citing_an_artifact_never_stored_breaks_evidence_resolves_under_either_policy(policy):
    steps, ghost = _unstored_evidence()
    s = _run(steps, policy)
    delivered = [d for d in s.deliveries() if d["message_id"] == "M-3"]
    assert [d["decision"] for d in delivered] == ["accepted"]  # the safe intake records the gap but accepts
    results = check(s)
    assert _broken(results) == {"EVIDENCE_RESOLVES"}
    (w,) = _by_name(results)["EVIDENCE_RESOLVES"].witnesses
    assert (w["message_id"], w["ref"], w["ref_kind"]) == ("M-3", ghost, "artifact")


def test_an_artifact_stored_after_the_message_that_cites_it_resolves():
    h = samples.happy_path()
    s = Store.memory()
    for env in h[:3]:  # M-3 cites the fact table before it is stored
        deliver(s, env)
    assert not _by_name(check(s))["EVIDENCE_RESOLVES"].ok
    put_artifact(s, samples.FACTS, kind="fact-table", task_id="T-1")
    assert _by_name(check(s))["EVIDENCE_RESOLVES"].ok


def test_a_message_citing_itself_does_not_resolve():
    h = samples.happy_path()
    selfish = _env("M-4", "T-2", "manager", "writer", "task_request", {"goal": "draft"}, "R-1:T-2:request", 5, refs=["M-4"])
    s = _run(h[:3] + [selfish], SAFE)
    (w,) = _by_name(check(s))["EVIDENCE_RESOLVES"].witnesses
    assert (w["message_id"], w["ref"], w["problem"]) == ("M-4", "M-4", "cites itself")


# ---------------------------------------------------------------------------- conflicts and review


def test_after_a_reviewers_reconcile_of_a_conflicted_task_conflict_frozen_holds():
    h = samples.happy_path()
    s = _run(h[:3] + [samples.conflicting_m3()], SAFE)
    assert s.get_task("T-1").state.value == "needs_review"
    out = review(s, "T-1", "ready", by="reviewer", evidence=["M-3", "M-4"], note="the 3-claim table is right")
    assert (out.decision, out.state) == ("accepted", "ready")
    # a redelivery of the conflicting result after the decision is a duplicate, not a new conflict
    deliver(s, samples.conflicting_m3(), policy=SAFE)
    results = check(s)
    assert _broken(results) == set()


def test_a_frozen_task_released_without_a_review_breaks_conflict_frozen():
    h = samples.happy_path()
    s = _run(h[:3] + [samples.conflicting_m3()], SAFE)
    reassign = _env("M-9", "T-1", "manager", "researcher", "task_request", {"goal": "again"}, "R-1:T-1:request-2", 9)
    deliver(s, reassign, policy=NAIVE)  # last write wins: needs_review -> ready, no reviewer involved
    results = _by_name(check(s))
    (w,) = results["CONFLICT_FROZEN"].witnesses
    assert w["problem"] == "left needs_review before any review_decided"
    assert (w["second"]["message_id"], w["move"]["message_id"], w["state_instead"]) == ("M-4", "M-9", "ready")
    assert not results["TRANSITIONS_ALLOWED"].ok  # needs_review -> ready is the reviewer's move, not the manager's


def test_a_review_written_against_a_stale_state_version_is_a_lost_update_under_naive():
    h = samples.happy_path()
    s = _run(h[:3] + [samples.conflicting_m3()], SAFE)  # T-1 frozen at state_version 4
    stale = _env(
        "REV-1", "T-1", "reviewer", "manager", "review_decision",
        {"decision": "ready", "expected_state_version": 3}, "review:T-1:v3", 9, refs=["M-3"],
    )
    assert deliver(s, stale, policy=SAFE).code == "E_STALE_VERSION"
    deliver(s, stale, policy=NAIVE)
    results = _by_name(check(s))
    (w,) = results["NO_LOST_UPDATE"].witnesses
    assert w["problem"] == "stale expected_state_version"
    assert (w["message_id"], w["expected_state_version"], w["actual_state_version"]) == ("REV-1", 3, 4)
    assert results["CONFLICT_FROZEN"].ok  # a review (however stale) released it


def test_a_conflicting_receipt_may_freeze_the_task_without_breaking_ack_is_not_completion():
    h = samples.happy_path()
    other_ack = _env("A-3b", "T-1", "manager", "researcher", "ack", {"of": "M-4"}, "R-1:T-1:ack:M-3", 5)
    s = _run(h[:4] + [other_ack], SAFE)
    assert s.get_task("T-1").state.value == "needs_review"
    # (the conversation's own rule notices the second receipt acknowledges a message nobody delivered)
    assert _broken(check(s)) == {"SEQUENCE_KEPT"}
    assert [w["code"] for w in _by_name(check(s))["SEQUENCE_KEPT"].witnesses] == ["E_CAUSATION_GAP"]


# ---------------------------------------------------------------------------- witness hygiene


def _all_runs():
    for fault in FAULTS:
        steps, _breaks, _mid, decide = _faults()[fault]
        yield f"{fault}/safe", _run(steps, SAFE)
        yield f"{fault}/naive", _run(steps, NAIVE, decide)
    steps, _ghost = _unstored_evidence()
    yield "unstored evidence/safe", _run(steps, SAFE)


def test_failing_results_have_json_ready_witnesses_and_passing_results_have_none():
    failures = 0
    for label, s in _all_runs():
        for r in check(s):
            assert r.ok == (r.witnesses == ()), (label, r.name)
            assert isinstance(r.witnesses, tuple)
            if not r.ok:
                failures += 1
                assert r.witnesses, (label, r.name)
                assert all(isinstance(w, dict) for w in r.witnesses)
                assert json.loads(json.dumps(list(r.witnesses))) == list(r.witnesses), (label, r.name)
            json.dumps(r.to_dict())
    assert failures >= 9  # every naive fault broke something, and so did the unstored evidence


def test_checking_changes_nothing_in_the_store():
    s = _run(_crash("researcher"), NAIVE)
    before = (s.state_digest(), len(s.events()), len(s.deliveries()))
    check(s)
    check(s)
    assert (s.state_digest(), len(s.events()), len(s.deliveries())) == before


def test_the_same_payload_under_another_digest_scheme_is_not_a_conflict():
    h = samples.happy_path()
    jcs = build_envelope(
        message_id="M-1", trace_id="R-1", task_id="T-1", sender="manager", recipient="researcher", type="task_request",
        payload={"goal": "collect evidence", "budget": 3}, idempotency_key="R-1:T-1:request",
        created_at="2026-07-13T04:00:01Z", digest_scheme="jcs-v2",
    )
    s = _run(h[:3] + [jcs], SAFE)
    assert [d["decision"] for d in s.deliveries() if d["message_id"] == "M-1"] == ["accepted", "duplicate"]
    assert _broken(check(s)) == set()
