"""Judging the planner (sim/planner.py): what each verdict is recorded as, event by event and field
by field, from a Context built by hand. A planner planted to record a field wrong, drop an event,
route a message to the wrong rule or word a refusal differently fails here (issue 25's mutation run
of the planner; figures in docs/performance.md)."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest

from sim import digest as _digest
from sim import planner
from sim.envelope import build_envelope
from sim.errors import ProtolabError
from sim.intake import Decision, IntentRecord, Move, TaskView, Verdict, decide
from sim.machine import TaskState, default_rulebook, parse_rulebook

RULES = default_rulebook()
REF_A = "sha256:" + "a" * 64
REF_B = "sha256:" + "b" * 64


def env(mid="M-3", typ="task_result", payload=None, *, task="T-1", trace="R-1", key=None, sender="researcher",
        recipient="manager", refs=(REF_A,), scheme="json-sorted-v1"):
    if payload is None:
        payload = {"status": "succeeded", "lease_version": 1}
    return build_envelope(message_id=mid, trace_id=trace, task_id=task, sender=sender, recipient=recipient, type=typ,
                          payload=payload, idempotency_key=key or f"key-{mid}", created_at="2026-01-01T00:00:04Z",
                          evidence_refs=list(refs), digest_scheme=scheme)


def view(state=TaskState.RUNNING, version=2, **kw):
    base = dict(machine_version=RULES.version, assignee="researcher", lease_holder="researcher", lease_version=1,
                budget_left=2)
    base.update(kw)
    return TaskView("T-1", state, version, **base)


def ctx(task="running", **kw):
    base = dict(task=view() if task == "running" else task, prior=(), rules=RULES, unresolved=frozenset(),
                id_reused=False, next_arrival=7, delivery_id=5)
    base.update(kw)
    return planner.Context(**base)


def record(e, mid="M-1", task="T-1", arrival=3, result=None):
    return IntentRecord(task, e.idempotency_key, e.payload_digest, e.digest_scheme, mid, e.payload, arrival=arrival,
                        result=result)


def drafts(events):
    return [(e.type, e.task_id, e.message_id, e.data) for e in events]


def intent(e, decision, state, version, arrival=7, payload=None):
    return ("intent_recorded", e.task_id, e.message_id, {
        "key": e.idempotency_key, "digest": e.payload_digest, "scheme": e.digest_scheme, "arrival": arrival,
        "decision": decision, "payload": e.payload if payload is None else payload,
        "result": {"decision": decision, "state": state, "state_version": version}})


def never(*a, **k):  # an intake function that must not be asked
    raise AssertionError("the policy's intake was asked")


# ------------------------------------------------------------------------------------- effect keys


def test_the_effect_key_names_kind_target_and_task_of_a_result_that_asks_for_one():
    pub = env(payload={"status": "succeeded", "lease_version": 1, "effect": {"kind": "publish", "target": "R-9"}})
    assert planner.effect_key(pub) == "publish:R-9:T-1"
    assert planner.effect_key(env()) is None
    # an empty effect (which parsing refuses) asks for nothing
    assert planner.effect_key(replace(pub, payload={"status": "succeeded", "lease_version": 1, "effect": {}})) is None
    assert planner.effect_key(env(typ="task_started", payload={"lease_version": 1,
                                                                "effect": {"kind": "k", "target": "t"}})) is None


def test_the_planned_key_is_by_effect_by_delivery_or_by_the_plugged_rule_and_only_for_a_success():
    pub = {"status": "succeeded", "lease_version": 1, "effect": {"kind": "publish", "target": "R-1"}}
    ok = env(payload=pub)
    assert planner.planned_effect_key(ok, 9) == "publish:R-1:T-1"
    assert planner.planned_effect_key(ok, 9, idempotent_effects=False) == "publish:R-1:T-1#d9"
    rule = lambda e, d: f"mine:{e.message_id}:{d}"  # noqa: E731
    assert planner.planned_effect_key(ok, 9, effect_rule=rule) == "mine:M-3:9"
    assert planner.planned_effect_key(ok, 9, idempotent_effects=False, effect_rule=rule) == "mine:M-3:9"
    assert planner.planned_effect_key(ok, 9, effect_rule=lambda e, d: None) is None
    failed = env(payload=dict(pub, status="failed"))
    for kw in ({}, {"idempotent_effects": False}, {"effect_rule": rule}):
        assert planner.planned_effect_key(failed, 9, **kw) == "publish:R-1:T-1"  # not a success: as asked
    assert planner.planned_effect_key(env(), 9, idempotent_effects=False, effect_rule=rule) is None


def test_a_plugged_effect_rule_that_raises_or_answers_nonsense_is_refused_with_a_code():
    ok = env(payload={"status": "succeeded", "lease_version": 1, "effect": {"kind": "publish", "target": "R-1"}})

    def boom(e, d):
        raise KeyError("effect")

    with pytest.raises(ProtolabError) as e:
        planner.planned_effect_key(ok, 1, effect_rule=boom)
    assert e.value.code == "E_EFFECT_RULE"
    assert e.value.message.startswith("the effect rule raised KeyError on M-3: 'effect'")  # (and where, if known)
    assert isinstance(e.value.__cause__, KeyError)
    for bad in ("", 7, ["k"]):
        with pytest.raises(ProtolabError) as e:
            planner.planned_effect_key(ok, 1, effect_rule=lambda en, d, b=bad: b)
        assert e.value.code == "E_EFFECT_RULE"
        assert e.value.message == f"the effect rule returned {bad!r} for M-3; expected a non-empty string or None"

    def own(e, d):
        raise ProtolabError("the rule's own refusal", code="E_MINE")

    with pytest.raises(ProtolabError) as e:
        planner.planned_effect_key(ok, 1, effect_rule=own)
    assert e.value.code == "E_MINE"


def test_a_plugged_effect_rule_that_exits_is_refused_saying_it_called_sys_exit_with_its_code():
    ok = env(payload={"status": "succeeded", "lease_version": 1, "effect": {"kind": "publish", "target": "R-1"}})

    def leaves(e, d):
        raise SystemExit(3)

    with pytest.raises(ProtolabError) as e:
        planner.planned_effect_key(ok, 1, effect_rule=leaves)
    assert e.value.code == "E_EFFECT_RULE"
    assert e.value.message.startswith("the effect rule called sys.exit(3) on M-3: 3")
    assert isinstance(e.value.__cause__, SystemExit)


def test_only_a_success_citing_evidence_under_a_holding_policy_asks_which_inputs_are_untrusted():
    assert planner.wants_untrusted_check(env(), True) is True
    assert planner.wants_untrusted_check(env(), False) is False
    assert planner.wants_untrusted_check(env(refs=()), True) is False
    assert planner.wants_untrusted_check(env(payload={"status": "failed", "lease_version": 1}), True) is False
    assert planner.wants_untrusted_check(env(typ="task_started", payload={"lease_version": 1}), True) is False


# ------------------------------------------------------------------------------------- routing


def _fence(mid="F-1", **kw):
    return env(mid, "fence", {"to": ["researcher"], "terminal": "COMPLETED"}, task="R-1", key="R-1:fence",
               sender="manager", recipient="researcher", refs=(), **kw)


def _reconcile(mid="REC-1", payload=None, *, sender="reviewer", refs=("L-1",)):
    e = env(mid, "review_decision", {"reconcile": "retract", "of": "L-1"}, task="T-2", sender=sender, refs=refs,
            key=f"reconcile:{mid}")
    # the payload as given, even one parsing would refuse (the planner holds its own rule)
    return e if payload is None else replace(e, payload=payload, payload_digest=_digest.digest(payload))


def test_a_message_is_routed_to_the_conversation_the_reconciliation_or_the_policy():
    assert planner.route(_fence(), ctx(), never) is planner._conversation_decide
    assert planner.route(env(), ctx(), decide) is decide
    review = env("RV", "review_decision", {"decision": "ready"}, sender="reviewer")
    assert planner.is_reconciliation(_reconcile()) and not planner.is_reconciliation(review)
    assert not planner.is_reconciliation(env(payload={"status": "succeeded", "lease_version": 1, "reconcile": "x"}))
    assert planner.route(review, ctx(), decide) is decide
    r = planner.route(_reconcile(), ctx(open_reconciliations=({"message_id": "L-1", "effects": []},)), never)
    assert r not in (decide, never, planner._conversation_decide)
    assert r(_reconcile(), None, (), RULES).decision == Decision.ACCEPTED  # unresolved defaults to none
    # a reconciliation naming the trace as its task speaks about the conversation, not a task
    trace_rec = env("REC-2", "review_decision", {"reconcile": "keep", "of": "L-1"}, task="R-1", sender="reviewer")
    assert planner.route(trace_rec, ctx(), never) is planner._conversation_decide


def test_the_conversation_records_a_fence_once_refuses_another_payload_under_its_key_and_any_other_type():
    f = _fence()
    c = ctx(task=None)
    v = planner.judge(f, c, never)
    assert (v.decision, v.reason) == (Decision.ACCEPTED, "fence recorded for conversation R-1")
    same = replace(record(f, "F-0"), payload_digest=f.payload_digest)
    dup = planner.judge(f, replace(c, prior=(same,)), never)
    assert (dup.decision, dup.duplicate_of, dup.reason) == (Decision.DUPLICATE, same, "fence R-1:fence already recorded")
    other_scheme = replace(same, digest_scheme="jcs-v2")
    other_digest = replace(same, payload_digest=REF_B)
    for prior in ((other_scheme,), (other_digest,)):
        v = planner.judge(f, replace(c, prior=prior), never)
        assert (v.decision, v.code) == (Decision.REJECTED, "E_CONVERSATION_CONFLICT")
        assert v.reason == "key R-1:fence was recorded with another payload"
    # the duplicate is found among several priors
    v = planner.judge(f, replace(c, prior=(other_digest, same)), never)
    assert v.decision == Decision.DUPLICATE and v.duplicate_of is same
    ack = env("A-1", "ack", {"of": "F-1"}, task="R-1", refs=())
    assert planner.judge(ack, c, never).reason == "ack recorded for conversation R-1"
    bad = env("X-1", "task_result", task="R-1")
    v = planner.judge(bad, c, never)
    assert (v.decision, v.code) == (Decision.REJECTED, "E_NOT_A_TASK")
    assert v.reason == "task_result names the trace R-1 as its task; only a fence or an ack may"


# ------------------------------------------------------------------------------------- reconciliation rule


def _rctx(**kw):
    base = dict(task=view(TaskState.SUCCEEDED, 3), open_reconciliations=({"message_id": "L-1", "effects": ["e:1"]},))
    base.update(kw)
    return ctx(**base)


def test_a_reviewer_may_decide_an_open_reconciliation_from_retained_evidence():
    v = planner.judge(_reconcile(), _rctx(), never)
    assert (v.decision, v.code, v.move) == (Decision.ACCEPTED, None, None)
    assert v.reason == "reconciliation of L-1: retract, decided by reviewer"
    keep = planner.judge(_reconcile(payload={"reconcile": "keep", "of": "L-1"}, sender="reviewer-2"), _rctx(), never)
    assert keep.reason == "reconciliation of L-1: keep, decided by reviewer-2"


@pytest.mark.parametrize("kw, ckw, code, reason", [
    ({"sender": "writer"}, {}, "E_ROLE_NOT_ALLOWED", "writer is a writer; only a reviewer reconciles"),
    ({"payload": {"reconcile": "undo", "of": "L-1"}}, {}, "E_UNKNOWN_VALUE",
     "reconcile 'undo'; expected one of: 'keep' or 'retract'"),
    ({"refs": ()}, {}, "E_EVIDENCE_REQUIRED", "a reconciliation must cite retained evidence in evidence_refs"),
    ({}, {"unresolved": frozenset({"X-2", "X-1"})}, "E_EVIDENCE_UNRESOLVED",
     "evidence_refs X-1, X-2 name no stored artifact or message"),
    ({"payload": {"reconcile": "keep", "of": "L-9"}}, {}, "E_NOT_RECONCILING",
     "no open reconciliation of T-2 is about 'L-9' (open: L-1, L-2)"),
])
def test_a_reconciliation_is_refused_in_order_saying_why(kw, ckw, code, reason):
    opened = ({"message_id": "L-1", "effects": []}, {"message_id": "L-2", "effects": []})
    v = planner.judge(_reconcile(**kw), _rctx(open_reconciliations=opened, **ckw), never)
    assert (v.decision, v.code, v.reason) == (Decision.REJECTED, code, reason)


def test_a_reconciliation_with_none_open_says_so_and_a_repeat_is_a_duplicate():
    v = planner.judge(_reconcile(), _rctx(open_reconciliations=()), never)
    assert v.reason == "no open reconciliation of T-2 is about 'L-1' (open: none)"
    r = _reconcile()
    same = record(r, "REC-0", task="T-2")
    other = replace(same, payload_digest=REF_B)
    for prior in ((same,), (other, same)):
        v = planner.judge(r, _rctx(prior=prior), never)
        assert (v.decision, v.duplicate_of) == (Decision.DUPLICATE, same)
        assert v.reason == "reconciliation reconcile:REC-1 already recorded"
    for prior in ((other,), (replace(same, digest_scheme="jcs-v2"),)):
        assert planner.judge(r, _rctx(prior=prior), never).decision == Decision.ACCEPTED
    # a duplicate is recognised before the sender is: a writer's copy of a reviewer's decision is a duplicate
    assert planner.judge(_reconcile(sender="writer"), _rctx(prior=(replace(same),)), never).decision == Decision.DUPLICATE


# ------------------------------------------------------------------------------------- judge's own rules


def test_a_verdict_that_is_not_a_verdict_is_refused():
    for bad, name in ((None, "NoneType"), ("accepted", "str"), (Verdict("accepted", "r"), "Verdict")):
        with pytest.raises(ProtolabError) as e:
            planner.judge(env(), ctx(), lambda *a, b=bad: b)
        assert e.value.code == "E_BAD_VERDICT"
        assert e.value.message == f"the intake function returned {name}, not a Verdict with a Decision"


@pytest.mark.parametrize("decision, refused", [(Decision.ACCEPTED, True), (Decision.LATE, True),
                                               (Decision.DUPLICATE, False), (Decision.CONFLICT, False),
                                               (Decision.REJECTED, False)])
def test_a_reused_message_id_refuses_only_what_would_be_recorded(decision, refused):
    v0 = Verdict(decision, "as intake said", code="E_X" if decision == Decision.REJECTED else None)
    v = planner.judge(env("M-7"), ctx(id_reused=True), lambda *a: v0)
    if refused:
        assert (v.decision, v.code) == (Decision.REJECTED, "E_MESSAGE_ID_REUSED")
        assert v.reason == "message_id M-7 was already used for a different envelope"
    else:
        assert v is v0
    assert planner.judge(env("M-7"), ctx(), lambda *a: v0) is v0


def test_a_success_on_an_untrusted_input_is_frozen_naming_each_input():
    e = env(refs=(REF_B, "M-2"))
    c = ctx(untrusted_inputs=((REF_B, "T-0"), ("M-2", "T-5")))
    v = planner.judge(e, c, decide)
    names = f"{REF_B[:15]}… of T-0, M-2 of T-5"
    assert v.decision == Decision.ACCEPTED and v.held == (REF_B, "M-2")
    assert v.move == Move(TaskState.RUNNING, TaskState.NEEDS_REVIEW, f"rests on untrusted input ({names})", "runtime",
                          "runtime")
    assert v.reason.endswith(f"; but it rests on untrusted input ({names}): frozen for review, no effect committed")
    assert v.reason.startswith(decide(e, c.task, (), RULES).reason)


def test_only_an_accepted_success_of_a_known_task_the_machine_can_freeze_is_frozen():
    c = ctx(untrusted_inputs=((REF_B, "T-0"),))
    for case in (
        dict(e=env(), c=c, kw={"hold_untrusted": False}),
        dict(e=env(payload={"status": "failed", "lease_version": 1}), c=c, kw={}),
        dict(e=env(), c=replace(c, untrusted_inputs=()), kw={}),
        dict(e=env(), c=replace(c, id_reused=True), kw={}),  # refused: nothing to freeze
    ):
        v = planner.judge(case["e"], case["c"], decide, **case["kw"])
        assert not v.held and (v.move is None or v.move.to_state != TaskState.NEEDS_REVIEW)
    # a task_started is not a result, whatever it carries
    started = env("M-2", "task_started", {"lease_version": 2, "status": "succeeded"})
    v = planner.judge(started, replace(c, task=view(TaskState.READY, 1, lease_holder=None, lease_version=1)), decide)
    assert v.decision == Decision.ACCEPTED and not v.held
    # no task: nothing to freeze (an accepted success of an unknown task, as a plugged intake might say)
    ok = Verdict(Decision.ACCEPTED, "planted")
    assert planner.judge(env(), replace(c, task=None), lambda *a: ok) is ok
    # a machine without a move to needs_review for the runtime cannot freeze it
    nofreeze = parse_rulebook({"version": "nofreeze-v1", "rule": [
        {"from": "pending", "to": "ready", "roles": ["manager"], "reason": "a"},
        {"from": "ready", "to": "running", "roles": ["researcher"], "reason": "b"},
        {"from": "running", "to": "succeeded", "roles": ["researcher"], "reason": "c"}]})
    v = planner.judge(env(), replace(c, rules=nofreeze, task=view(machine_version="nofreeze-v1")), decide)
    assert v.decision == Decision.ACCEPTED and not v.held and v.move.to_state == TaskState.SUCCEEDED


# ------------------------------------------------------------------------------------- events: refusals, duplicates


def test_a_refusal_is_one_event_naming_what_was_proposed_and_from_where():
    e = env("M-9", payload={"status": "failed", "lease_version": 4})
    v = Verdict(Decision.REJECTED, "stale lease", code="E_STALE_LEASE")
    events, state, version = planner.plan(e, ctx(unresolved=frozenset({"X-1"})), v)
    assert drafts(events) == [("transition_rejected", "T-1", "M-9", {
        "code": "E_STALE_LEASE", "reason": "stale lease", "type": "task_result", "sender": "researcher",
        "from": "running", "proposed": "failed", "task_id": "T-1"})]
    assert (state, version) == ("running", 2)
    ack = env("A-1", "ack", {"of": "M-3"}, refs=())
    events, state, version = planner.plan(ack, ctx(task=None), v)
    assert drafts(events) == [("transition_rejected", None, "A-1", {
        "code": "E_STALE_LEASE", "reason": "stale lease", "type": "ack", "sender": "researcher", "from": None,
        "proposed": None, "task_id": "T-1"})]
    assert (state, version) == (None, None)
    fence = _fence()
    events, _, _ = planner.plan(fence, ctx(task=None), v)
    assert events[0].data["proposed"] is None


def test_a_duplicate_is_one_event_handing_back_the_first_result():
    e = env("M-4")
    first = record(env("M-3"), "M-3", result={"decision": "accepted", "state": "succeeded", "state_version": 3})
    v = Verdict(Decision.DUPLICATE, "seen", duplicate_of=first)
    events, state, version = planner.plan(e, ctx(unresolved=frozenset({"X-1"})), v)
    assert drafts(events) == [
        ("duplicate_recorded", "T-1", "M-4", {"key": first.idempotency_key, "digest": first.payload_digest,
                                             "scheme": "json-sorted-v1", "first_message_id": "M-3",
                                             "reused": first.result}),
        ("evidence_unresolved", "T-1", "M-4", {"refs": ["X-1"]}),
    ]
    assert (state, version) == ("running", 2)


# ------------------------------------------------------------------------------------- events: accepted


def test_a_request_creates_the_task_and_moves_it_to_ready_assigned_to_its_recipient():
    e = env("M-1", "task_request", {"goal": "collect", "budget": 3}, sender="manager", recipient="researcher-2",
            refs=())
    c = ctx(task=None)
    v = planner.judge(e, c, decide)
    events, state, version = planner.plan(e, c, v)
    assert drafts(events) == [
        ("task_created", "T-1", "M-1", {"trace_id": "R-1", "goal": "collect", "budget": 3, "machine_version": "task-v1"}),
        ("transition_applied", "T-1", "M-1", {"from": "pending", "to": "ready", "from_version": 0,
                                             "reason": v.move.reason, "executor": "manager", "role": "manager",
                                             "machine_version": "task-v1", "assignee": "researcher-2"}),
        intent(e, "accepted", "ready", 1),
    ]
    assert (state, version) == ("ready", 1)


def test_a_request_without_a_goal_or_budget_gets_the_defaults():
    e = env("M-1", "task_request", {"goal": "g"}, sender="manager", recipient="researcher", refs=())
    e = replace(e, payload={})  # parsing requires a goal; the planner does not
    events, _, _ = planner.plan(e, ctx(task=None), Verdict(Decision.ACCEPTED, "ok", create=True))
    assert events[0].data == {"trace_id": "R-1", "goal": "", "budget": planner.DEFAULT_BUDGET,
                              "machine_version": "task-v1"}
    assert planner.DEFAULT_BUDGET == 5 and planner.ATTEMPT_COST == 1
    assert [x.type for x in events] == ["task_created", "intent_recorded"]
    assert events[-1].data["result"] == {"decision": "accepted", "state": "pending", "state_version": 0}


def test_a_start_is_granted_the_lease_and_charged_one_attempt():
    e = env("M-2", "task_started", {"lease_version": 1}, refs=())
    c = ctx(task=view(TaskState.READY, 1, lease_holder=None, lease_version=0))
    v = planner.judge(e, c, decide)
    events, state, version = planner.plan(e, c, v)
    assert drafts(events) == [
        ("transition_applied", "T-1", "M-2", {"from": "ready", "to": "running", "from_version": 1,
                                             "reason": v.move.reason, "executor": "researcher", "role": "researcher",
                                             "machine_version": "task-v1", "assignee": None}),
        ("task_started", "T-1", "M-2", {"worker": "researcher", "lease_version": 1}),
        ("lease_granted", "T-1", "M-2", {"holder": "researcher", "lease_version": 1}),
        ("budget_charged", "T-1", "M-2", {"amount": 1, "reason": "attempt 1"}),
        intent(e, "accepted", "running", 2),
    ]
    assert (state, version) == ("running", 2)


def test_a_move_of_a_task_with_no_version_starts_from_zero():
    e = env("M-2", "task_started", {"lease_version": 1}, refs=())
    mv = Move(TaskState.READY, TaskState.RUNNING, "r", "researcher", "researcher")
    task = view(TaskState.READY, None)
    events, state, version = planner.plan(e, ctx(task=task), Verdict(Decision.ACCEPTED, "ok", move=mv))
    assert events[0].data["from_version"] is None and (state, version) == ("running", 1)


def test_an_accepted_success_commits_its_effect_or_suppresses_it_when_committed():
    pub = {"status": "succeeded", "lease_version": 1, "effect": {"kind": "publish", "target": "R-1"}}
    e = env(payload=pub)
    c = ctx(effect_key="publish:R-1:T-1")
    v = planner.judge(e, c, decide)
    events, state, version = planner.plan(e, c, v)
    assert drafts(events)[1:] == [
        ("effect_committed", "T-1", "M-3", {"effect_key": "publish:R-1:T-1", "kind": "publish", "target": "R-1",
                                           "result_digest": e.payload_digest}),
        intent(e, "accepted", "succeeded", 3),
    ]
    events, _, _ = planner.plan(e, replace(c, committed_keys=frozenset({"publish:R-1:T-1"})), v)
    assert drafts(events)[1] == ("effect_suppressed", "T-1", "M-3", {"effect_key": "publish:R-1:T-1"})
    assert [x.type for x in events] == ["transition_applied", "effect_suppressed", "intent_recorded"]
    # another key committed does not suppress this one
    events, _, _ = planner.plan(e, replace(c, committed_keys=frozenset({"other"})), v)
    assert events[1].type == "effect_committed"
    # a failure carrying an effect commits nothing
    failed = env(payload=dict(pub, status="failed"))
    events, _, _ = planner.plan(failed, c, planner.judge(failed, c, decide))
    assert [x.type for x in events] == ["transition_applied", "intent_recorded"]
    # no key: nothing
    events, _, _ = planner.plan(e, ctx(), v)
    assert [x.type for x in events] == ["transition_applied", "intent_recorded"]


def test_a_frozen_success_records_its_untrusted_inputs_instead_of_an_effect():
    pub = {"status": "succeeded", "lease_version": 1, "effect": {"kind": "publish", "target": "R-1"}}
    e = env(payload=pub, refs=(REF_B,))
    c = ctx(untrusted_inputs=((REF_B, "T-0"),), effect_key="publish:R-1:T-1")
    v = planner.judge(e, c, decide)
    events, state, version = planner.plan(e, c, v)
    assert drafts(events)[1:] == [
        ("input_untrusted", "T-1", "M-3", {"refs": [REF_B], "effect_key": "publish:R-1:T-1"}),
        intent(e, "accepted", "needs_review", 3),
    ]
    assert events[0].data["to"] == "needs_review" and (state, version) == ("needs_review", 3)
    events, _, _ = planner.plan(e, replace(c, effect_key=None), v)
    assert events[1].data == {"refs": [REF_B], "effect_key": None}


def test_an_ack_and_a_fence_are_recorded_as_what_they_say():
    ack = env("A-3", "ack", {"of": "M-3"}, sender="manager", recipient="researcher", refs=())
    c = ctx(task=view(TaskState.SUCCEEDED, 3))
    events, state, version = planner.plan(ack, c, planner.judge(ack, c, decide))
    assert drafts(events) == [("ack_recorded", "T-1", "A-3", {"of": "M-3", "from": "manager"}),
                              intent(ack, "accepted", "succeeded", 3)]
    f = _fence()
    events, state, version = planner.plan(f, ctx(task=None), planner.judge(f, ctx(task=None), never))
    assert drafts(events) == [("fence_recorded", "R-1", "F-1", {"to": ["researcher"], "terminal": "COMPLETED"}),
                              intent(f, "accepted", None, None)]
    assert (state, version) == (None, None)


def test_a_review_decision_that_moves_the_task_is_recorded_with_its_reviewer_and_evidence():
    e = env("RV-1", "review_decision", {"decision": "ready", "expected_state_version": 4}, sender="reviewer",
            refs=("M-3", "M-4"))
    c = ctx(task=view(TaskState.NEEDS_REVIEW, 4))
    v = planner.judge(e, c, decide)
    events, state, version = planner.plan(e, c, v)
    assert [x.type for x in events] == ["transition_applied", "review_decided", "intent_recorded"]
    assert events[1].data == {"decision": "ready", "reviewer": "reviewer", "evidence": ["M-3", "M-4"]}
    assert (state, version) == ("ready", 5)
    # a refused-by-nobody review that moves nothing records no decision
    events, _, _ = planner.plan(e, c, Verdict(Decision.ACCEPTED, "no move"))
    assert [x.type for x in events] == ["intent_recorded"]


def test_a_retraction_commits_one_compensating_effect_per_committed_effect_it_names():
    e = _reconcile()
    opened = ({"message_id": "L-0", "effects": ["x:0"]}, {"message_id": "L-1", "effects": ["p:1", "p:2", "p:3"]})
    task_effects = ({"effect_key": "p:1", "target": "R-1"}, {"effect_key": "p:2", "target": "R-2"})
    c = _rctx(open_reconciliations=opened, task_effects=task_effects, committed_keys=frozenset({"retract:p:2"}))
    v = planner.judge(e, c, never)
    events, state, version = planner.plan(e, c, v)
    assert drafts(events) == [
        ("reconciliation_resolved", "T-2", "REC-1", {"of": "L-1", "decision": "retract", "reviewer": "reviewer",
                                                    "evidence": ["L-1"], "effects": ["p:1", "p:2", "p:3"]}),
        # p:2's retraction is committed already; p:3 was never committed by this task
        ("effect_committed", "T-2", "REC-1", {"effect_key": "retract:p:1", "kind": "retract", "target": "R-1",
                                             "result_digest": e.payload_digest}),
        intent(e, "accepted", "succeeded", 3),
    ]
    keep = _reconcile(payload={"reconcile": "keep", "of": "L-1"})
    events, _, _ = planner.plan(keep, c, planner.judge(keep, c, never))
    assert [x.type for x in events] == ["reconciliation_resolved", "intent_recorded"]
    assert events[0].data["decision"] == "keep" and events[0].data["effects"] == ["p:1", "p:2", "p:3"]
    # a decision about a case that is not open (a planted intake let it through) names no effects
    gone = _reconcile(payload={"reconcile": "retract", "of": "L-9"})
    events, _, _ = planner.plan(gone, c, Verdict(Decision.ACCEPTED, "planted"))
    assert events[0].data["effects"] == [] and [x.type for x in events] == ["reconciliation_resolved", "intent_recorded"]


# ------------------------------------------------------------------------------------- events: conflict, late


def test_a_conflict_stores_both_payloads_records_the_intent_and_freezes_the_task():
    first = env("M-3", refs=())
    second = env("M-4", payload={"status": "succeeded", "lease_version": 1, "note": "other"}, key=first.idempotency_key,
                 refs=())
    prior = (record(first, "M-3", arrival=4),)
    c = ctx(task=view(TaskState.SUCCEEDED, 3), prior=prior)
    v = planner.judge(second, c, decide)
    assert v.decision == Decision.CONFLICT
    rest = ({"effect_key": "publish:R-1:T-2", "task_id": "T-2", "message_id": "M-6"},
            {"effect_key": "publish:R-2:T-9", "task_id": "T-9", "message_id": "M-8"},
            {"effect_key": "mail:R-1:T-2", "task_id": "T-2", "message_id": "M-7"})
    events, state, version = planner.plan(second, replace(c, resting_on=rest), v)
    a1, a2 = planner.artifact_event(first.payload, "conflicting-payload", "T-1", "M-3"), \
        planner.artifact_event(second.payload, "conflicting-payload", "T-1", "M-4")
    assert drafts(events) == [
        drafts([a1])[0], drafts([a2])[0],
        intent(second, "conflict", "needs_review", 4),
        ("conflict_recorded", "T-1", "M-4", {
            "key": first.idempotency_key,
            "first": {"message_id": "M-3", "digest": first.payload_digest, "scheme": "json-sorted-v1",
                      "artifact": a1.data["ref"], "arrival": 4},
            "second": {"message_id": "M-4", "digest": second.payload_digest, "scheme": "json-sorted-v1",
                       "artifact": a2.data["ref"], "arrival": 7},
            "state_version": 3, "trusted": False}),
        ("transition_applied", "T-1", "M-4", {"from": "succeeded", "to": "needs_review", "from_version": 3,
                                             "reason": v.move.reason, "executor": "runtime", "role": "runtime",
                                             "machine_version": "task-v1", "assignee": None}),
        ("reconciliation_required", "T-2", "M-4", {"effects": ["publish:R-1:T-2", "mail:R-1:T-2"],
                                                  "status": "untrusted input", "input": "T-1"}),
        ("reconciliation_required", "T-9", "M-4", {"effects": ["publish:R-2:T-9"], "status": "untrusted input",
                                                  "input": "T-1"}),
    ]
    assert (state, version) == ("needs_review", 4)


def test_a_conflict_the_machine_cannot_freeze_or_about_no_task_still_records_both_payloads():
    first = env("M-3", refs=())
    second = env("M-4", payload={"status": "succeeded", "lease_version": 1, "note": "other"}, key=first.idempotency_key,
                 refs=())
    v = Verdict(Decision.CONFLICT, "planted", conflict_with=record(first, "M-3", arrival=2))
    events, state, version = planner.plan(second, ctx(task=None), v)
    assert [x.type for x in events] == ["artifact_stored", "artifact_stored", "intent_recorded", "conflict_recorded"]
    assert events[3].data["state_version"] is None and (state, version) == (None, None)
    assert events[2].data["result"] == {"decision": "conflict", "state": None, "state_version": None}


def test_a_late_result_is_recorded_with_the_state_it_found_and_asks_for_reconciliation_when_told():
    e = env("L-1", payload={"status": "failed", "lease_version": 1}, refs=())
    task = view(TaskState.SUCCEEDED, 3, has_effects=True)
    c = ctx(task=task, task_effects=({"effect_key": "publish:R-1:T-1", "kind": "publish", "target": "R-1"},
                                     {"effect_key": "retract:publish:R-1:T-1", "kind": "retract", "target": "R-1"},
                                     {"effect_key": "mail:R-1:T-1", "target": "R-1"}))
    v = planner.judge(e, c, decide)
    assert v.decision == Decision.LATE and v.needs_reconciliation
    events, state, version = planner.plan(e, c, v)
    assert drafts(events) == [
        intent(e, "late", "succeeded", 3),
        ("late_recorded", "T-1", "L-1", {"type": "task_result", "status": "failed", "state": "succeeded",
                                        "reason": v.reason}),
        ("reconciliation_required", "T-1", "L-1", {"effects": ["publish:R-1:T-1", "mail:R-1:T-1"], "status": "failed"}),
    ]
    assert (state, version) == ("succeeded", 3)
    events, _, _ = planner.plan(e, c, replace(v, needs_reconciliation=False))
    assert [x.type for x in events] == ["intent_recorded", "late_recorded"]
    ack = env("A-9", "ack", {"of": "M-3"}, refs=())
    events, _, _ = planner.plan(ack, c, Verdict(Decision.LATE, "planted"))
    assert events[1].data["status"] is None and events[1].data["type"] == "ack"


# ------------------------------------------------------------------------------------- helpers of the plan


def test_an_artifact_is_stored_under_the_digest_of_its_canonical_bytes():
    content = {"b": [1, 2], "a": "é"}
    raw = _digest.canonical_bytes(content, "json-sorted-v1")
    ev = planner.artifact_event(content, "fact-table", "T-1", "M-3")
    assert drafts([ev]) == [("artifact_stored", "T-1", "M-3", {
        "ref": "sha256:" + hashlib.sha256(raw).hexdigest(), "scheme": "json-sorted-v1", "kind": "fact-table",
        "size": len(raw), "content": content})]
    assert ev.data["ref"] == _digest.digest(content, "json-sorted-v1")


def test_unresolved_evidence_is_recorded_last_and_sorted_for_every_decision_but_a_refusal():
    # artifacts not stored yet (an artifact may be stored after the message citing it; a cited message
    # the log does not hold is refused instead: E_EVIDENCE_UNRESOLVED)
    x1, x2 = "sha256:" + "1" * 64, "sha256:" + "2" * 64
    e = env(refs=(x2, x1))
    c = ctx(unresolved=frozenset({x2, x1}))
    for v in (planner.judge(e, c, decide), Verdict(Decision.LATE, "late"),
              Verdict(Decision.DUPLICATE, "dup", duplicate_of=record(e, "M-0"))):
        events, _, _ = planner.plan(e, c, v)
        assert drafts(events)[-1] == ("evidence_unresolved", "T-1", "M-3", {"refs": [x1, x2]})
    events, _, _ = planner.plan(e, c, Verdict(Decision.REJECTED, "no", code="E_X"))
    assert [x.type for x in events] == ["transition_rejected"]
    events, _, _ = planner.plan(e, replace(c, unresolved=frozenset()), planner.judge(e, c, decide))
    assert "evidence_unresolved" not in [x.type for x in events]


def test_the_intent_is_recorded_as_the_logs_keep_the_payload():
    logged = env(payload={"status": "succeeded", "lease_version": 1, "email": "[redacted]"})
    v = Verdict(Decision.ACCEPTED, "ok")
    events, _, _ = planner.plan(logged, ctx(next_arrival=12), v)
    assert events[-1].data["payload"]["email"] == "[redacted]" and events[-1].data["arrival"] == 12


def test_a_verdict_is_recorded_whole_even_one_the_reference_intake_never_gives():
    # The runtime applies whatever the policy decides (invariants judge it): a plugged intake's
    # conflict on a task it also creates keeps the creation.
    first = env("M-3", refs=())
    second = env("M-4", payload={"status": "succeeded", "lease_version": 1, "note": "other"}, key=first.idempotency_key,
                 refs=())
    v = Verdict(Decision.CONFLICT, "planted", create=True, conflict_with=record(first, "M-3"))
    events, state, version = planner.plan(second, ctx(task=None), v)
    assert [x.type for x in events] == ["task_created", "artifact_stored", "artifact_stored", "intent_recorded",
                                        "conflict_recorded"]
    assert (state, version) == ("pending", 0)
