"""The planner (sim/planner.py): what a delivery means is a pure function of what was read for it.
No store here: each case builds the Context by hand, as a grader or a replay could."""

from dataclasses import replace

from sim import planner
from sim.envelope import build_envelope
from sim.intake import Decision, IntentRecord, TaskView, decide
from sim.machine import TaskState, default_rulebook

RULES = default_rulebook()


def result(mid="M-3", *, key="R-1:T-1:attempt-1", status="succeeded", evidence=("sha256:" + "a" * 64,), lease=1,
           sender="researcher", effect=None, body=None):
    payload = {"status": status, "lease_version": lease, **(body or {})}
    if effect:
        payload["effect"] = effect
    return build_envelope(message_id=mid, trace_id="R-1", task_id="T-1", sender=sender, recipient="manager",
                          type="task_result", payload=payload, idempotency_key=key,
                          created_at="2026-01-01T00:00:04Z", evidence_refs=list(evidence))


def running(**kw):
    return TaskView("T-1", TaskState.RUNNING, 2, RULES.version, assignee="researcher", lease_holder="researcher",
                    lease_version=1, budget_left=2, **kw)


def ctx(task=None, **kw):
    base = dict(task=task if task is not None else running(), prior=(), rules=RULES, unresolved=frozenset(),
                id_reused=False, next_arrival=7, delivery_id=5)
    base.update(kw)
    return planner.Context(**base)


def test_an_accepted_success_commits_its_effect_once_and_records_its_intent_at_the_arrival_it_was_given():
    env = result(effect={"kind": "publish", "target": "R-1"})
    c = ctx()
    v = planner.judge(env, c, decide)
    assert v.decision == Decision.ACCEPTED
    c = replace(c, effect_key="publish:R-1:T-1")
    events, state, version = planner.plan(env, c, v)
    types = [e.type for e in events]
    assert types == ["transition_applied", "effect_committed", "intent_recorded"]
    assert (state, version) == ("succeeded", 3)
    assert events[-1].data["arrival"] == 7
    # the same plan where the key is already committed: suppressed, not committed again
    again, _, _ = planner.plan(env, replace(c, committed_keys=frozenset({"publish:R-1:T-1"})), v)
    assert [e.type for e in again] == ["transition_applied", "effect_suppressed", "intent_recorded"]


def test_a_reused_message_id_is_refused_whatever_intake_said():
    env = result()
    v = planner.judge(env, ctx(id_reused=True), decide)
    assert (v.decision, v.code) == (Decision.REJECTED, "E_MESSAGE_ID_REUSED")
    events, state, version = planner.plan(env, ctx(id_reused=True), v)
    assert [e.type for e in events] == ["transition_rejected"] and (state, version) == ("running", 2)


def test_a_success_resting_on_an_untrusted_input_is_frozen_and_commits_nothing():
    env = result(effect={"kind": "publish", "target": "R-1"}, evidence=("sha256:" + "b" * 64,))
    c = ctx(untrusted_inputs=(("sha256:" + "b" * 64, "T-0"),))
    v = planner.judge(env, c, decide)
    assert v.decision == Decision.ACCEPTED and v.move.to_state == TaskState.NEEDS_REVIEW and v.held
    events, state, _ = planner.plan(env, replace(c, effect_key="publish:R-1:T-1"), v)
    assert "effect_committed" not in [e.type for e in events] and "input_untrusted" in [e.type for e in events]
    assert state == "needs_review"
    # under a policy that does not hold untrusted inputs, the same delivery publishes
    v2 = planner.judge(env, c, decide, hold_untrusted=False)
    assert v2.move.to_state == TaskState.SUCCEEDED


def test_a_conflict_sends_what_rests_on_the_task_to_reconciliation_and_stores_both_payloads():
    first = result()
    second = result("M-3-c", body={"note": "another"})
    prior = (IntentRecord("T-1", first.idempotency_key, first.payload_digest, first.digest_scheme, "M-3",
                          first.payload, arrival=4),)
    task = TaskView("T-1", TaskState.SUCCEEDED, 3, RULES.version, lease_holder="researcher", lease_version=1)
    c = ctx(task=task, prior=prior)
    v = planner.judge(second, c, decide)
    assert v.decision == Decision.CONFLICT
    c = replace(c, resting_on=({"effect_key": "publish:R-1:T-2", "task_id": "T-2", "message_id": "M-6"},))
    events, state, _ = planner.plan(second, c, v)
    types = [e.type for e in events]
    assert types.count("artifact_stored") == 2 and "conflict_recorded" in types and state == "needs_review"
    rec = [e for e in events if e.type == "reconciliation_required"]
    assert [(e.task_id, e.data["effects"], e.data["input"]) for e in rec] == [("T-2", ["publish:R-1:T-2"], "T-1")]
    conflict = next(e for e in events if e.type == "conflict_recorded")
    assert (conflict.data["first"]["arrival"], conflict.data["second"]["arrival"]) == (4, 7)


def test_a_late_failure_after_an_effect_asks_for_reconciliation_naming_the_tasks_effects():
    env = result("M-9", key="R-1:T-1:attempt-1:late", status="failed")
    task = TaskView("T-1", TaskState.SUCCEEDED, 3, RULES.version, lease_holder="researcher", lease_version=1,
                    has_effects=True)
    c = ctx(task=task)
    v = planner.judge(env, c, decide)
    assert v.decision == Decision.LATE and v.needs_reconciliation
    c = replace(c, task_effects=({"effect_key": "publish:R-1:T-1", "target": "R-1"},))
    events, state, _ = planner.plan(env, c, v)
    assert [e.type for e in events] == ["intent_recorded", "late_recorded", "reconciliation_required"]
    assert events[-1].data["effects"] == ["publish:R-1:T-1"] and state == "succeeded"


def test_unresolved_evidence_is_recorded_last_for_every_decision_but_a_refusal():
    env = result(evidence=("sha256:" + "c" * 64,))
    c = ctx(unresolved=frozenset({"sha256:" + "c" * 64}))
    v = planner.judge(env, c, decide)
    events, _, _ = planner.plan(env, c, v)
    assert events[-1].type == "evidence_unresolved"
    refused = planner.judge(env, replace(c, id_reused=True), decide)
    events, _, _ = planner.plan(env, replace(c, id_reused=True), refused)
    assert "evidence_unresolved" not in [e.type for e in events]


def test_a_message_about_the_conversation_is_routed_to_its_own_rule_not_to_the_policy():
    fence = build_envelope(message_id="M-7", trace_id="R-1", task_id="R-1", sender="manager", recipient="researcher",
                           type="fence", payload={"to": ["researcher"], "terminal": "COMPLETED"},
                           idempotency_key="R-1:fence", created_at="2026-01-01T00:00:09Z", evidence_refs=[])

    def never(*a):
        raise AssertionError("the policy's intake is not asked about the conversation")

    v = planner.judge(fence, ctx(task=None), never)
    assert v.decision == Decision.ACCEPTED
    events, _, _ = planner.plan(fence, ctx(task=None), v)
    assert [e.type for e in events] == ["fence_recorded", "intent_recorded"]


def test_the_planner_is_the_runtimes_planner():
    from sim import runtime

    assert runtime.effect_key is planner.effect_key and runtime.ATTEMPT_COST == planner.ATTEMPT_COST
