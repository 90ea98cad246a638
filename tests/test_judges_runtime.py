"""Judging the runtime (sim/runtime.py): each test pins one thing a delivery, the lease monitor, a
reviewer's reconciliation or a review does, and fails if that thing is planted wrong (issue 25's
mutation run of the runtime; figures in docs/performance.md)."""

from __future__ import annotations

import pytest

from sim import samples
from sim.envelope import build_envelope
from sim.errors import ProtolabError, StaleWrite, StoreError
from sim.invariants import check
from sim.machine import parse_rulebook
from sim.policy import NAIVE, SAFE
from sim.replay import replay_report
from sim.runtime import (Outcome, deliver, expire_lease, put_artifact, record_fault, resolve_reconciliation,
                         review)
from sim.store import Store

PUBLISH = "publish:R-1:T-2"
RETRACT = "retract:publish:R-1:T-2"


def _env(mid, task, sender, typ, payload, key, *, second=20, refs=(), recipient="manager", trace="R-1"):
    return build_envelope(message_id=mid, trace_id=trace, task_id=task, sender=sender, recipient=recipient, type=typ,
                          payload=payload, idempotency_key=key, created_at=f"2026-07-13T04:01:{second:02d}Z",
                          evidence_refs=list(refs))


def _published() -> Store:
    """The happy path by hand: T-1 gathers facts, T-2 drafts from them and publishes (one effect)."""
    store = Store.memory()
    put_artifact(store, samples.FACTS, kind="fact-table", task_id="T-1")
    put_artifact(store, samples.draft(), kind="draft", task_id="T-2")
    for e in samples.happy_path():
        deliver(store, e)
    assert [e["effect_key"] for e in store.effects()] == [PUBLISH]
    return store


def _late(store: Store, mid: str, second: int = 20):
    """A late failure of T-2's first attempt, under a key of its own: it touches the publication."""
    return deliver(store, _env(mid, "T-2", "writer", "task_result", {"status": "failed", "lease_version": 1,
                                                                      "error": f"late {mid}"},
                               f"R-1:T-2:attempt-1:{mid}", second=second))


def _broken(store: Store) -> list[str]:
    return [r.name for r in check(store) if not r.ok]


def _effect_events(store: Store) -> list[str]:
    return [e["data"]["effect_key"] for e in store.events() if e["type"] == "effect_committed"]


# ------------------------------------------------------------------------------------- reconciliation


def test_two_reconciliations_naming_one_effect_retract_it_once():
    store = _published()
    assert _late(store, "L-1").decision == "late"
    assert _late(store, "L-2").decision == "late"
    opened = store.open_reconciliations("T-2")
    assert [(o["message_id"], o["effects"]) for o in opened] == [("L-1", [PUBLISH]), ("L-2", [PUBLISH])]

    first = resolve_reconciliation(store, "T-2", "retract", by="reviewer", evidence=["L-1"])
    assert (first.decision, first.effects) == ("accepted", (RETRACT,))
    second = resolve_reconciliation(store, "T-2", "retract", by="reviewer", evidence=["L-2"])
    assert (second.decision, second.effects) == ("accepted", ())  # already withdrawn: nothing commits again

    assert [e["effect_key"] for e in store.effects()] == [PUBLISH, RETRACT]
    assert _effect_events(store) == [PUBLISH, RETRACT]
    retraction = store.effects()[1]
    assert (retraction["kind"], retraction["target"], retraction["task_id"]) == ("retract", "R-1", "T-2")
    assert retraction["message_id"] == first.message_id
    assert store.open_reconciliations() == []
    assert [a["decision"] for a in store.approvals()] == ["reconcile:retract", "reconcile:retract"]
    assert _broken(store) == []
    rep = replay_report(store)
    assert rep["match"] and rep["redelivery"]["effects_committed_again"] == []


def test_keeping_one_reconciliation_and_retracting_the_other_withdraws_the_effect_once():
    store = _published()
    _late(store, "L-1")
    _late(store, "L-2")
    kept = resolve_reconciliation(store, "T-2", "keep", by="reviewer", evidence=["L-1"], of="L-1")
    assert kept.effects == () and [e["effect_key"] for e in store.effects()] == [PUBLISH]
    withdrawn = resolve_reconciliation(store, "T-2", "retract", by="reviewer", evidence=["L-2"])
    assert withdrawn.effects == (RETRACT,)
    assert [e["effect_key"] for e in store.effects()] == [PUBLISH, RETRACT]


def test_a_late_result_after_a_retraction_asks_about_the_publication_not_the_retraction():
    store = _published()
    _late(store, "L-1")
    resolve_reconciliation(store, "T-2", "retract", by="reviewer", evidence=["L-1"])
    _late(store, "L-3")
    (opened,) = store.open_reconciliations("T-2")
    assert (opened["message_id"], opened["effects"]) == ("L-3", [PUBLISH])
    again = resolve_reconciliation(store, "T-2", "retract", by="reviewer", evidence=["L-3"])
    assert again.effects == ()  # never a retraction of the retraction
    assert [e["effect_key"] for e in store.effects()] == [PUBLISH, RETRACT]
    assert _broken(store) == []


def test_a_reconciliation_names_the_oldest_open_case_unless_told_which():
    store = _published()
    _late(store, "L-1")
    _late(store, "L-2")
    out = resolve_reconciliation(store, "T-2", "keep", by="reviewer", evidence=["L-2"], of="L-2", note="seen it")
    assert out.message_id == "REC-T-2-L-2" and out.type == "review_decision" and out.task_id == "T-2"
    assert [o["message_id"] for o in store.open_reconciliations()] == ["L-1"]
    msg = store.message_by_id("REC-T-2-L-2")
    assert msg["payload"] == {"reconcile": "keep", "of": "L-2", "note": "seen it"}
    assert msg["idempotency_key"] == "reconcile:T-2:L-2" and msg["evidence_refs"] == ["L-2"]
    assert (msg["sender"], msg["recipient"], msg["trace_id"]) == ("reviewer", "manager", "R-1")
    out = resolve_reconciliation(store, "T-2", "keep", by="reviewer", evidence=["L-1"])
    assert out.message_id == "REC-T-2-L-1"
    assert "note" not in store.message_by_id("REC-T-2-L-1")["payload"]
    assert store.open_reconciliations() == []


def test_one_tasks_open_reconciliations_are_the_runs_of_that_task_read_through_the_index():
    """A reconciliation envelope reads its task's open cases on every delivery: through the index of
    events by task (a condition that also allows "every task" read the whole event log), the same cases as
    the whole run's list filtered to the task."""
    store = _published()
    _late(store, "L-1")
    _late(store, "L-2")
    resolve_reconciliation(store, "T-2", "keep", by="reviewer", evidence=["L-1"], of="L-1")
    everything = store.open_reconciliations()
    assert [o["message_id"] for o in everything] == ["L-2"]
    for task in ("T-1", "T-2", "T-9"):
        assert store.open_reconciliations(task) == [o for o in everything if o["task_id"] == task]
    seen = []
    store.conn.set_trace_callback(seen.append)
    store.open_reconciliations("T-2")
    store.conn.set_trace_callback(None)
    (sql,) = [q for q in seen if "reconciliation_required" in q]
    plan = [r[3] for r in store.conn.execute("EXPLAIN QUERY PLAN " + sql)]
    assert plan[0].startswith("SEARCH r USING INDEX events_by_task"), plan


@pytest.mark.parametrize("args, kwargs, code, words", [
    (("T-2", "undo"), {"by": "reviewer", "evidence": ["L-1"]}, "E_UNKNOWN_VALUE", "decision 'undo'; expected one of"),
    (("T-2", "keep"), {"by": "writer", "evidence": ["L-1"]}, "E_ROLE_NOT_ALLOWED", "writer is a writer; only a reviewer"),
    (("T-9", "keep"), {"by": "reviewer", "evidence": ["L-1"]}, "E_UNKNOWN_TASK", "task T-9 does not exist"),
    (("T-1", "keep"), {"by": "reviewer", "evidence": ["L-1"]}, "E_NOT_RECONCILING", "task T-1 has no open reconciliation"),
    (("T-2", "keep"), {"by": "reviewer", "evidence": ["L-1"], "of": "M-6"}, "E_NOT_RECONCILING",
     "no open reconciliation of T-2 is about M-6 (open: L-1)"),
    (("T-2", "keep"), {"by": "reviewer", "evidence": []}, "E_EVIDENCE_REQUIRED", "cite at least one"),
    (("T-2", "keep"), {"by": "reviewer", "evidence": ["L-1", "X-404", "X-403"]}, "E_EVIDENCE_UNRESOLVED",
     "evidence X-403, X-404 is not retained"),
])
def test_a_reconciliation_is_refused_before_anything_is_written(args, kwargs, code, words):
    store = _published()
    _late(store, "L-1")
    before = (store.last_event(), store.state_digest(), len(store.messages()))
    with pytest.raises(ProtolabError) as e:
        resolve_reconciliation(store, *args, **kwargs)
    assert e.value.code == code and words in str(e.value), str(e.value)
    assert (store.last_event(), store.state_digest(), len(store.messages())) == before


# ------------------------------------------------------------------------------------- the lease monitor


def _task_in(state: str) -> Store:
    store = Store.memory()
    deliver(store, samples.m1())
    if state == "ready":
        return store
    deliver(store, samples.m2())
    if state == "running":
        return store
    if state == "retry_wait":
        assert expire_lease(store, "T-1")
    elif state == "succeeded":
        deliver(store, samples.m3())
    elif state == "failed":
        deliver(store, _env("M-3", "T-1", "researcher", "task_result", {"status": "failed", "lease_version": 1,
                                                                         "error": "x"}, "R-1:T-1:attempt-1"))
    elif state == "needs_review":
        deliver(store, samples.m3())
        deliver(store, samples.conflicting_m3())
    elif state == "canceled":
        deliver(store, _env("X-1", "T-1", "manager", "cancel", {"reason": "stop", "expected_state_version": 2},
                            "R-1:T-1:cancel"))
    assert store.get_task("T-1").state.value == state
    return store


@pytest.mark.parametrize("state", ["ready", "retry_wait", "succeeded", "failed", "needs_review", "canceled"])
def test_expire_lease_leaves_a_task_that_is_not_running_alone(state):
    store = _task_in(state)
    before = (store.last_event(), store.state_digest(), store.tick)
    assert expire_lease(store, "T-1", tick=store.tick + 5) is False
    assert (store.last_event(), store.state_digest(), store.tick) == before
    assert store.get_task("T-1").state.value == state


def test_expire_lease_on_a_task_that_does_not_exist_writes_nothing():
    store = _task_in("running")
    before = (store.last_event(), store.state_digest(), store.tick)
    assert expire_lease(store, "T-404") is False
    assert (store.last_event(), store.state_digest(), store.tick) == before


def test_expire_lease_writes_nothing_where_the_machine_has_no_move_for_the_runtime():
    rb = parse_rulebook({"version": "nolease-v1", "rule": [
        {"from": "pending", "to": "ready", "roles": ["manager"], "reason": "a"},
        {"from": "ready", "to": "running", "roles": ["researcher"], "reason": "b"},
        {"from": "running", "to": "retry_wait", "roles": ["manager"], "reason": "the manager's, not the runtime's"},
        {"from": "running", "to": "succeeded", "roles": ["researcher"], "reason": "c"}]})
    store = Store.create(None, rulebook=rb)
    deliver(store, samples.m1())
    deliver(store, samples.m2())
    before = (store.last_event(), store.state_digest(), store.tick)
    assert expire_lease(store, "T-1") is False
    assert (store.last_event(), store.state_digest(), store.tick) == before
    assert store.get_task("T-1").state.value == "running"


def test_expire_lease_on_a_running_task_records_the_expiry_and_the_move_at_the_tick_given():
    store = _task_in("running")
    last, tick = store.last_event(), store.tick
    assert expire_lease(store, "T-1", tick=tick + 3) is True
    new = store.events(after=last)
    assert [e["type"] for e in new] == ["lease_expired", "transition_applied"]
    assert all(e["tick"] == tick + 3 and e["task_id"] == "T-1" and e["message_id"] is None for e in new)
    assert new[0]["data"] == {"holder": "researcher", "lease_version": 1}
    move = new[1]["data"]
    assert (move["from"], move["to"], move["from_version"]) == ("running", "retry_wait", 2)
    assert move["reason"] == "lease v1 of researcher expired"
    assert (move["executor"], move["role"], move["machine_version"], move["assignee"]) == (
        "runtime", "runtime", "task-v1", None)
    t = store.get_task("T-1")
    assert (t.state.value, t.state_version, t.lease_holder, t.lease_version) == ("retry_wait", 3, None, 1)
    assert t.assignee == "researcher"  # the move names no new assignee
    # without a tick, the next one
    store2 = _task_in("running")
    t0 = store2.tick
    expire_lease(store2, "T-1")
    assert store2.tick == t0 + 1


# ------------------------------------------------------------------------------------- one delivery


def test_an_outcome_says_what_the_delivery_did():
    store = Store.memory()
    o1 = deliver(store, samples.m1())
    assert o1 == Outcome(1, 1, "M-1", "T-1", "task_request", "accepted", None, o1.reason, "ready", 1, None, ())
    assert o1.reason
    o2 = deliver(store, samples.m1(), tick=9)
    assert (o2.delivery_id, o2.tick, o2.decision, o2.state, o2.state_version) == (2, 9, "duplicate", "ready", 1)
    assert o2.reused == {"decision": "accepted", "state": "ready", "state_version": 1}
    d = o2.to_dict()
    assert d["effects"] == [] and isinstance(d["effects"], list)
    assert d["reused"] == o2.reused and d["delivery_id"] == 2 and d["message_id"] == "M-1"
    bad = deliver(store, _env("M-9", "T-1", "writer", "task_started", {"lease_version": 1}, "k-9"))
    assert (bad.decision, bad.code, bad.state) == ("rejected", "E_NOT_ASSIGNEE", "ready")
    row = store.deliveries()[-1]
    assert (row["delivery_id"], row["decision"], row["code"], row["state_after"], row["state_version_after"]) == (
        3, "rejected", "E_NOT_ASSIGNEE", "ready", 1)
    assert row["reason"] == bad.reason


def test_an_outcome_lists_the_effects_its_delivery_committed():
    store = _published()
    row = [d for d in store.deliveries() if d["message_id"] == "M-6"][0]
    assert row["decision"] == "accepted"
    again = deliver(store, _env("M-6b", "T-2", "writer", "task_result",
                                {"status": "succeeded", "lease_version": 1, "draft": samples.draft_ref(),
                                 "effect": {"kind": "publish", "target": "R-1"}}, "R-1:T-2:attempt-1b"))
    assert again.effects == () and again.decision == "late"
    store2 = Store.memory()
    put_artifact(store2, samples.FACTS, kind="fact-table", task_id="T-1")
    put_artifact(store2, samples.draft(), kind="draft", task_id="T-2")
    outs = [deliver(store2, e) for e in samples.happy_path()]
    assert [o.effects for o in outs if o.effects] == [(PUBLISH,)]


def test_the_message_log_keeps_the_digest_of_the_whole_envelope():
    import hashlib

    store = Store.memory()
    env = samples.m1()
    deliver(store, env)
    (msg,) = store.messages()
    assert msg["envelope_digest"] == "sha256:" + hashlib.sha256(env.to_json().encode("utf-8")).hexdigest()


def test_a_delivery_that_loses_every_compare_and_swap_raises_after_its_attempts(monkeypatch):
    from sim import runtime

    calls = []

    def always_stale(*a, **k):
        calls.append(1)
        raise StaleWrite("planted", task_id="T-1")

    monkeypatch.setattr(runtime, "_deliver_once", always_stale)
    store = Store.memory()
    with pytest.raises(StaleWrite):
        deliver(store, samples.m1(), attempts=3)
    assert len(calls) == 3
    calls.clear()
    with pytest.raises(StaleWrite):
        deliver(store, samples.m1())
    assert len(calls) == 3  # three attempts by default


def test_a_delivery_that_loses_one_compare_and_swap_is_decided_again_from_a_fresh_read(monkeypatch):
    from sim import runtime

    real = runtime._deliver_once
    lost = []

    def once_stale(*a, **k):
        if not lost:
            lost.append(1)
            raise StaleWrite("planted", task_id="T-1")
        return real(*a, **k)

    monkeypatch.setattr(runtime, "_deliver_once", once_stale)
    store = Store.memory()
    out = deliver(store, samples.m1())
    assert out.decision == "accepted" and lost == [1] and len(store.deliveries()) == 1


def test_the_naive_policy_commits_a_redelivered_result_again_and_safe_does_not():
    for policy, keys in ((SAFE, [PUBLISH]), (NAIVE, None)):
        store = Store.memory()
        put_artifact(store, samples.FACTS, kind="fact-table", task_id="T-1")
        put_artifact(store, samples.draft(), kind="draft", task_id="T-2")
        for e in samples.happy_path():
            deliver(store, e, policy=policy)
        m6 = [e for e in samples.happy_path() if e.message_id == "M-6"][0]
        out = deliver(store, m6, policy=policy)
        effects = [e["effect_key"] for e in store.effects()]
        if keys is not None:
            assert effects == keys and out.decision == "duplicate"
        else:
            assert len(effects) == 2 and all(k.startswith(PUBLISH + "#d") for k in effects)
            assert out.effects == (effects[-1],)


def test_a_plugged_intake_decides_instead_of_the_policys():
    from sim.intake import Decision, Verdict

    def refuse_all(env, task, prior, rules, unresolved=frozenset()):
        return Verdict(Decision.REJECTED, "planted refusal", code="E_PLANTED")

    store = Store.memory()
    out = deliver(store, samples.m1(), decide=refuse_all)
    assert (out.decision, out.code, out.reason) == ("rejected", "E_PLANTED", "planted refusal")
    assert store.get_task("T-1") is None


def test_an_accepted_result_commits_its_effect_even_when_a_plugged_intake_also_asks_for_reconciliation():
    # needs_reconciliation belongs to a late verdict: on an accepted one (a student's intake may set it)
    # the runtime still plans the accepted success, effect included
    from dataclasses import replace as _replace

    from sim.intake import Decision
    from sim.intake import decide as reference

    def eager(env, task, prior, rules, unresolved=frozenset()):
        v = reference(env, task, prior, rules, unresolved)
        return _replace(v, needs_reconciliation=True) if v.decision == Decision.ACCEPTED else v

    store = Store.memory()
    put_artifact(store, samples.FACTS, kind="fact-table", task_id="T-1")
    put_artifact(store, samples.draft(), kind="draft", task_id="T-2")
    outs = [deliver(store, e, decide=eager) for e in samples.happy_path()]
    assert [e["effect_key"] for e in store.effects()] == [PUBLISH]
    assert [o.effects for o in outs if o.effects] == [(PUBLISH,)]


def test_a_message_cannot_be_its_own_evidence():
    store = Store.memory()
    deliver(store, samples.m1())
    env = _env("M-2", "T-1", "researcher", "task_started", {"lease_version": 1}, "R-1:T-1:attempt-1:started",
               refs=("M-2",))
    deliver(store, env)
    unresolved = [e for e in store.events() if e["type"] == "evidence_unresolved"]
    assert [e["data"]["refs"] for e in unresolved] == [["M-2"]]


def test_a_reused_message_id_is_refused_by_the_runtime():
    store = Store.memory()
    deliver(store, samples.m1())
    other = _env("M-1", "T-5", "manager", "task_request", {"goal": "other", "budget": 1}, "R-1:T-5:request",
                 recipient="researcher")
    out = deliver(store, other)
    assert (out.decision, out.code) == ("rejected", "E_MESSAGE_ID_REUSED")
    assert store.get_task("T-5") is None


def test_a_success_citing_a_frozen_input_is_frozen_under_safe_and_publishes_under_naive():
    for policy, state, effects in ((SAFE, "needs_review", []), (NAIVE, "succeeded", 1)):
        store = Store.memory()
        put_artifact(store, samples.FACTS, kind="fact-table", task_id="T-1")
        put_artifact(store, samples.draft(), kind="draft", task_id="T-2")
        steps = samples.happy_path()
        for e in steps[:6]:  # up to T-2 started
            deliver(store, e, policy=policy)
        deliver(store, samples.conflicting_m3("M-3c", 9), policy=policy)  # T-1 no longer trusted
        out = deliver(store, steps[6], policy=policy)  # M-6 cites T-1's fact table
        assert out.state == state, (policy.name, out)
        got = [e["effect_key"] for e in store.effects()]
        assert (got == effects) if isinstance(effects, list) else (len(got) == effects)


def test_a_policy_that_redacts_logs_the_sensitive_fields_and_keeps_the_digest_of_what_was_sent():
    from sim.privacy import REDACTED, Privacy

    for policy, logged in ((SAFE, REDACTED), (NAIVE, "a@b.c")):
        store = Store.memory()
        store.set_meta({"privacy": Privacy(("email",), {}).to_meta()})
        env = _env("M-1", "T-1", "manager", "task_request", {"goal": "g", "budget": 2, "email": "a@b.c"},
                   "R-1:T-1:request", recipient="researcher")
        deliver(store, env, policy=policy)
        (msg,) = store.messages()
        assert msg["payload"]["email"] == logged and msg["payload"]["goal"] == "g"
        assert msg["payload_digest"] == env.payload_digest
        (intent,) = store.intents_of_task("T-1")
        assert intent["payload"]["email"] == logged
        # a payload holding no sensitive field is logged as it came
        deliver(store, samples.m2(), policy=policy)
        assert store.messages()[-1]["payload"] == samples.m2().payload


# ------------------------------------------------------------------------------------- artifacts, faults


def test_put_artifact_stores_content_under_its_digest_at_the_tick_given():
    store = Store.memory()
    ref = put_artifact(store, {"rows": [1, 2]}, kind="fact-table", task_id="T-1", tick=4)
    assert ref.startswith("sha256:") and len(ref) == 71
    art = store.artifact(ref)
    assert (art["kind"], art["task_id"], art["content"], art["first_tick"], art["message_id"]) == (
        "fact-table", "T-1", {"rows": [1, 2]}, 4, None)
    assert put_artifact(store, {"rows": [1, 2]}) == ref  # content-addressed: the same ref again
    assert store.tick == 5
    plain = put_artifact(store, ["x"])
    assert store.artifact(plain)["kind"] == "document" and store.artifact(plain)["task_id"] is None


def test_record_fault_logs_what_the_transport_did():
    store = Store.memory()
    last = store.last_event()
    record_fault(store, "resend", message_id="M-1", task_id="T-1", detail={"copies": 2}, tick=3)
    (e,) = store.events(after=last)
    assert (e["type"], e["message_id"], e["task_id"], e["tick"]) == ("fault_injected", "M-1", "T-1", 3)
    assert e["data"] == {"fault": "resend", "copies": 2}
    record_fault(store, "drop", message_id=None, task_id=None, detail={})
    assert store.tick == 4 and store.events()[-1]["data"]["fault"] == "drop"


# ------------------------------------------------------------------------------------- a human review


def _frozen() -> Store:
    store = _task_in("needs_review")
    return store


def test_a_review_releases_a_frozen_task_from_retained_evidence():
    store = _frozen()
    t = store.get_task("T-1")
    out = review(store, "T-1", "ready", by="reviewer", evidence=["M-3", "M-4"], note="rerun")
    assert (out.decision, out.state) == ("accepted", "ready")
    assert out.message_id == f"REV-T-1-v{t.state_version}"
    msg = store.message_by_id(out.message_id)
    assert msg["payload"] == {"decision": "ready", "expected_state_version": t.state_version, "note": "rerun"}
    assert msg["idempotency_key"] == f"review:T-1:v{t.state_version}"
    assert (msg["sender"], msg["recipient"], msg["type"], msg["trace_id"]) == ("reviewer", "manager",
                                                                              "review_decision", "R-1")
    assert msg["evidence_refs"] == ["M-3", "M-4"]
    assert [a["decision"] for a in store.approvals()] == ["ready"]
    store2 = _frozen()
    out2 = review(store2, "T-1", "canceled", by="reviewer", evidence=["M-3"])
    assert out2.state == "canceled" and "note" not in store2.message_by_id(out2.message_id)["payload"]


def test_a_review_from_an_earlier_read_carries_the_version_it_read_and_is_refused_when_stale():
    store = _frozen()
    v = store.get_task("T-1").state_version
    out = review(store, "T-1", "ready", by="reviewer", evidence=["M-3"], read_version=v)
    assert out.decision == "accepted" and out.message_id == f"REV-T-1-v{v}-ready"
    assert store.message_by_id(out.message_id)["idempotency_key"] == f"review:T-1:v{v}:ready"
    late = review(store, "T-1", "canceled", by="reviewer", evidence=["M-3"], read_version=v)
    assert (late.decision, late.code) == ("rejected", "E_STALE_VERSION")
    assert store.message_by_id(late.message_id)["payload"]["expected_state_version"] == v


@pytest.mark.parametrize("args, kwargs, code, words", [
    (("T-1", "ready"), {"by": "writer", "evidence": ["M-3"]}, "E_ROLE_NOT_ALLOWED", "writer is a writer; only a reviewer"),
    (("T-1", "running"), {"by": "reviewer", "evidence": ["M-3"]}, "E_UNKNOWN_VALUE", "decision 'running'"),
    (("T-9", "ready"), {"by": "reviewer", "evidence": ["M-3"]}, "E_UNKNOWN_TASK", "task T-9 does not exist"),
    (("T-1", "ready"), {"by": "reviewer", "evidence": []}, "E_EVIDENCE_REQUIRED", "cite at least one"),
    (("T-1", "ready"), {"by": "reviewer", "evidence": ["M-404"]}, "E_EVIDENCE_UNRESOLVED", "evidence M-404"),
])
def test_a_review_is_refused_before_anything_is_written(args, kwargs, code, words):
    store = _frozen()
    before = (store.last_event(), store.state_digest(), len(store.messages()))
    with pytest.raises(ProtolabError) as e:
        review(store, *args, **kwargs)
    assert e.value.code == code and words in str(e.value), str(e.value)
    assert (store.last_event(), store.state_digest(), len(store.messages())) == before


def test_a_review_of_a_task_not_in_review_is_refused_unless_it_comes_from_an_earlier_read():
    store = _task_in("running")
    with pytest.raises(ProtolabError) as e:
        review(store, "T-1", "ready", by="reviewer", evidence=["M-2"])
    assert e.value.code == "E_NOT_IN_REVIEW" and "task T-1 is running, not needs_review" in str(e.value)
    out = review(store, "T-1", "ready", by="reviewer", evidence=["M-2"], read_version=1)
    assert out.decision == "rejected"  # it reaches intake, which refuses it


def test_a_review_the_machine_has_no_move_for_is_refused():
    rb = parse_rulebook({"version": "nocancel-v1", "rule": [
        {"from": "pending", "to": "ready", "roles": ["manager"], "reason": "a"},
        {"from": "ready", "to": "running", "roles": ["researcher"], "reason": "b"},
        {"from": "running", "to": "succeeded", "roles": ["researcher"], "reason": "c"},
        {"from": "*nonterminal", "to": "needs_review", "roles": ["runtime"], "reason": "d"},
        {"from": "succeeded", "to": "needs_review", "roles": ["runtime"], "reason": "d"},
        {"from": "needs_review", "to": "ready", "roles": ["reviewer"], "reason": "e"}]})
    store = Store.create(None, rulebook=rb)
    for e in (samples.m1(), samples.m2(), samples.m3(), samples.conflicting_m3()):
        deliver(store, e)
    assert store.get_task("T-1").state.value == "needs_review"
    with pytest.raises(ProtolabError) as e:
        review(store, "T-1", "canceled", by="reviewer", evidence=["M-3"])
    assert e.value.code == "E_TRANSITION_NOT_ALLOWED" and "nocancel-v1 has no needs_review -> canceled" in str(e.value)


def test_a_review_is_decided_by_the_intake_function_it_is_given():
    from sim.intake import Decision, Verdict

    seen = []

    def planted(env, task, prior, rules, unresolved=frozenset()):
        seen.append(env.type)
        return Verdict(Decision.REJECTED, "planted", code="E_PLANTED")

    store = _frozen()
    out = review(store, "T-1", "ready", by="reviewer", evidence=["M-3"], decide=planted)
    assert seen == ["review_decision"] and out.code == "E_PLANTED"


def test_a_store_error_is_not_retried_as_a_lost_race(monkeypatch):
    from sim import runtime

    calls = []

    def broken(*a, **k):
        calls.append(1)
        raise StoreError("planted", code="E_PLANTED")

    monkeypatch.setattr(runtime, "_deliver_once", broken)
    with pytest.raises(StoreError):
        deliver(Store.memory(), samples.m1())
    assert calls == [1]


def test_the_message_log_keeps_what_the_transport_knows_of_the_send():
    store = Store.memory()
    deliver(store, samples.m1(), sent=(4, 2))
    deliver(store, samples.m2())
    first, second = store.messages()
    assert (first["sender_seq"], first["sender_generation"]) == (4, 2)
    assert (second["sender_seq"], second["sender_generation"]) == (None, None)


def test_a_reviewers_message_is_dated_at_the_tick_it_is_delivered():
    store = _published()
    _late(store, "L-1")
    out = resolve_reconciliation(store, "T-2", "keep", by="reviewer", evidence=["L-1"])
    assert store.message_by_id(out.message_id)["created_at"] == store.time_at(out.tick)
    frozen = _frozen()
    out = review(frozen, "T-1", "ready", by="reviewer", evidence=["M-3"])
    assert frozen.message_by_id(out.message_id)["created_at"] == frozen.time_at(out.tick)


def _load_bare_machine(store: Store) -> None:
    """A newer machine that allows almost nothing: tasks created before it keep their own rules."""
    bare = parse_rulebook({"version": "bare-v2", "rule": [
        {"from": "pending", "to": "ready", "roles": ["manager"], "reason": "assigned"}]})
    with store.transaction():
        store.load_machine(bare)
    assert store.current_machine == "bare-v2"


def test_a_delivery_is_judged_by_the_machine_its_task_was_created_under():
    store = Store.memory()
    deliver(store, samples.m1())
    _load_bare_machine(store)
    out = deliver(store, samples.m2())
    assert (out.decision, out.state) == ("accepted", "running")
    move = [e for e in store.events() if e["type"] == "transition_applied"][-1]
    assert move["data"]["machine_version"] == "task-v1"


def test_the_lease_monitor_uses_the_machine_of_the_task():
    store = _task_in("running")
    _load_bare_machine(store)
    assert expire_lease(store, "T-1") is True
    assert store.get_task("T-1").state.value == "retry_wait"


def test_a_review_is_allowed_by_the_machine_of_the_task():
    store = _frozen()
    _load_bare_machine(store)
    out = review(store, "T-1", "canceled", by="reviewer", evidence=["M-3"])
    assert (out.decision, out.state) == ("accepted", "canceled")


def test_a_reconciliation_may_only_close_a_case_of_its_own_task():
    store = _published()
    _late(store, "L-1")  # T-2's case
    late_t1 = deliver(store, _env("L-9", "T-1", "researcher", "task_result", {"status": "failed", "lease_version": 1},
                                  "R-1:T-1:late"))
    assert late_t1.decision == "late" and store.open_reconciliations("T-1") == []  # T-1 published nothing
    forged = _env("REC-X", "T-1", "reviewer", "review_decision", {"reconcile": "retract", "of": "L-1"}, "rec-x",
                  refs=("L-1",))
    out = deliver(store, forged)
    assert (out.decision, out.code) == ("rejected", "E_NOT_RECONCILING")
    assert out.reason == "no open reconciliation of T-1 is about 'L-1' (open: none)"
    assert [e["effect_key"] for e in store.effects()] == [PUBLISH]


def test_refusals_of_a_reconciliation_or_a_review_say_exactly_what_is_missing():
    store = _published()
    _late(store, "L-1")
    _late(store, "L-2")
    with pytest.raises(ProtolabError) as e:
        resolve_reconciliation(store, "T-2", "keep", by="reviewer", evidence=["L-1"], of="M-6")
    assert e.value.message == "no open reconciliation of T-2 is about M-6 (open: L-1, L-2)"
    with pytest.raises(ProtolabError) as e:
        resolve_reconciliation(store, "T-2", "keep", by="reviewer", evidence=[])
    assert e.value.message == "cite at least one piece of retained evidence (--evidence)"
    with pytest.raises(ProtolabError) as e:
        resolve_reconciliation(store, "T-2", "keep", by="reviewer", evidence=["X-2", "L-1", "X-1"])
    assert e.value.message == ("evidence X-1, X-2 is not retained in this database (cite a message id or an artifact "
                               "ref)")


def test_a_task_released_and_run_again_does_not_publish_a_second_time():
    store = _published()
    m6 = [e for e in samples.happy_path() if e.message_id == "M-6"][0]
    other = _env("M-6c", "T-2", "writer", "task_result", dict(m6.payload, summary="another draft"), m6.idempotency_key,
                 refs=m6.evidence_refs)  # T-2's result under its key with another payload: frozen for review
    assert deliver(store, other).decision == "conflict"
    review(store, "T-2", "ready", by="reviewer", evidence=["M-6", "M-6c"])
    assert deliver(store, _env("M-5b", "T-2", "writer", "task_started", {"lease_version": 2},
                               "R-1:T-2:attempt-2:started")).state == "running"
    again = deliver(store, _env("M-6b", "T-2", "writer", "task_result",
                                {"status": "succeeded", "lease_version": 2, "draft": samples.draft_ref(),
                                 "effect": {"kind": "publish", "target": "R-1"}}, "R-1:T-2:attempt-2",
                                refs=m6.evidence_refs))
    assert (again.decision, again.state, again.effects) == ("accepted", "succeeded", ())
    assert [e["effect_key"] for e in store.effects()] == [PUBLISH]
    suppressed = [e for e in store.events() if e["type"] == "effect_suppressed"]
    assert [(e["message_id"], e["data"]["effect_key"]) for e in suppressed] == [("M-6b", PUBLISH)]


def test_a_plugged_effect_rule_names_the_key_an_effect_commits_under():
    from dataclasses import replace as _replace

    ruled = _replace(SAFE, effect_rule=lambda e, d: f"once:{e.payload['effect']['target']}")
    store = Store.memory()
    put_artifact(store, samples.FACTS, kind="fact-table", task_id="T-1")
    put_artifact(store, samples.draft(), kind="draft", task_id="T-2")
    outs = [deliver(store, e, policy=ruled) for e in samples.happy_path()]
    assert [o.effects for o in outs if o.effects] == [("once:R-1",)]
    assert [e["effect_key"] for e in store.effects()] == ["once:R-1"]
    silent = _replace(SAFE, effect_rule=lambda e, d: None)
    store2 = Store.memory()
    for e in samples.happy_path():
        deliver(store2, e, policy=silent)
    assert store2.effects() == [] and store2.get_task("T-2").state.value == "succeeded"


def test_a_conflict_on_an_input_sends_what_was_published_from_it_to_reconciliation():
    store = _published()
    out = deliver(store, samples.conflicting_m3("M-3c", 30))
    assert out.decision == "conflict" and store.get_task("T-1").state.value == "needs_review"
    (opened,) = store.open_reconciliations()
    assert (opened["task_id"], opened["message_id"], opened["effects"], opened["status"]) == (
        "T-2", "M-3c", [PUBLISH], "untrusted input")
    required = [e for e in store.events() if e["type"] == "reconciliation_required"]
    assert [(e["task_id"], e["data"]["input"]) for e in required] == [("T-2", "T-1")]
