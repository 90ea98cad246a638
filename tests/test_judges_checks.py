"""Judging the lab checks (sim/labs/checks.py): each named check called on a run built for it,
met and every way of being unmet, with the facts it says it saw (which the lab's hints quote).
A check planted to look at the wrong message, miscount, or report the wrong fact fails here
(issue 25's mutation run of the lab checks; figures in docs/performance.md)."""

from __future__ import annotations

import pytest

from sim import samples
from sim.envelope import build_envelope
from sim.labs.checks import CHECKS, Ctx, Facts, Seen, redeliver_under
from sim.live import LiveRun
from sim.policy import NAIVE
from sim.runner import run_scenario
from sim.runtime import deliver, put_artifact, record_fault, review
from sim.scenario import load_scenario
from sim.store import ProgressStore, Store

LAB = 3


class Like:
    """What a check must have seen: met or not, its case, and these facts among those it names."""

    def __init__(self, ok: bool, code: str, saw: dict | None = None):
        self.ok, self.code, self.saw = ok, code, dict(saw or {})

    def __eq__(self, other) -> bool:
        return (isinstance(other, Seen) and (other.ok, other.code) == (self.ok, self.code)
                and all(k in other.saw and other.saw[k] == v for k, v in self.saw.items()))

    def __repr__(self) -> str:
        return f"Like({self.ok}, {self.code!r}, {self.saw!r})"


def ctx_of(store: Store, *, expected=None, progress=None) -> Ctx:
    facts = Facts(store)
    facts.update()
    return Ctx(store, facts, progress or ProgressStore.open(None), LAB, expected_tasks=expected)


def run(ctx: Ctx, name: str, **args) -> Seen:
    ctx.facts.update()
    return CHECKS[name](ctx, **args)


def env(mid, task, sender, typ, payload, key, *, recipient="manager", refs=()):
    return build_envelope(message_id=mid, trace_id="R-1", task_id=task, sender=sender, recipient=recipient, type=typ,
                          payload=payload, idempotency_key=key, created_at="2026-07-13T04:01:00Z",
                          evidence_refs=list(refs))


def happy(*, policy=None, upto=None) -> Store:
    """The default story by hand: T-1 gathers facts, T-2 drafts and publishes (eight deliveries)."""
    store = Store.memory()
    put_artifact(store, samples.FACTS, kind="fact-table", task_id="T-1")
    put_artifact(store, samples.draft(), kind="draft", task_id="T-2")
    for e in samples.happy_path()[:upto]:
        deliver(store, e, **({"policy": policy} if policy else {}))
    return store


def m6():
    return next(e for e in samples.happy_path() if e.message_id == "M-6")


def reason_of(store: Store, mid: str) -> str:
    return next(d["reason"] for d in store.deliveries() if d["message_id"] == mid)


def live_steps(n: int, scenario="publish-report", **kw) -> LiveRun:
    live = LiveRun(load_scenario(scenario), seed=0, **kw)
    for _ in range(n):
        live.step()
    return live


# ------------------------------------------------------------------------------------- Seen, Facts, Ctx


def test_a_seen_summary_lists_the_words_and_numbers_it_saw_in_order():
    s = Seen(True, "met", {"message_id": "M-3", "count": 2, "code": "", "refs": ["a"], "none": None, "ok": True})
    assert s.summary() == "message_id=M-3, count=2, ok=True"
    assert Seen(False, "none").summary() == "" and Seen(False, "none").saw == {}


def test_facts_read_every_delivery_and_kept_event_once_and_say_when_something_is_new():
    store = happy(upto=3)
    facts = Facts(store)
    assert facts.version == 0
    assert facts.update() is True and facts.version == 1
    assert facts.update() is False and facts.version == 1
    for e in samples.happy_path()[3:]:
        deliver(store, e)
    assert facts.update() is True and facts.version == 2
    assert [d["delivery_id"] for d in facts.deliveries] == [d["delivery_id"] for d in store.deliveries()]
    assert [d["message_id"] for d in facts.deliveries] == [e.message_id for e in samples.happy_path()]
    assert facts.last_delivery == 8 and facts.last_event == store.last_event()
    kept = [e for e in store.events() if e["type"] in Facts._KEEP]
    assert sum(len(v) for v in facts.events_by_type.values()) == len(kept)
    assert [e["seq"] for e in facts.events("transition_applied")] == [
        e["seq"] for e in kept if e["type"] == "transition_applied"]
    assert facts.events("intent_recorded") == [] and facts.events("no_such_type") == []
    assert [d["message_id"] for d in facts.by_type["task_result"]] == ["M-3", "M-6"]
    assert [d["message_id"] for d in facts.by_type_task[("task_result", "T-2")]] == ["M-6"]
    assert [d["message_id"] for d in facts.by_type_decision[("ack", "accepted")]] == ["A-3", "A-6"]
    assert [d["delivery_id"] for d in facts.deliveries_of["M-6"]] == [7]
    assert facts.task_states == {"T-1": "succeeded", "T-2": "succeeded"} and facts.open_tasks == set()
    assert facts.message("M-6")["type"] == "task_result" and facts.message("M-404") is None


def _ev(seq, etype, task_id, message_id):
    from sim.events import StoredEvent

    return StoredEvent(seq=seq, tick=0, created_at="", type=etype, task_id=task_id, message_id=message_id,
                       delivery_id=None, data={})


class _LongLog:
    """A store's reading side with a log longer than the batches Facts reads it in."""

    def __init__(self, events: int, deliveries: int):
        self.rows = [_ev(i, "task_created" if i % 2 else "lease_granted", f"T-{i}", f"M-{i}")
                     for i in range(1, events + 1)]
        self.dels = {i: {"delivery_id": i, "message_id": f"M-{i}", "type": "ack", "decision": "accepted",
                         "task_id": "T-1", "code": None} for i in range(1, deliveries + 1)}
        self.asked: list = []

    def last_event(self):
        return len(self.rows)

    def events(self, *, after=0, limit=None):
        self.asked.append(("events", after, limit))
        return self.rows[after:after + limit]

    def last_delivery(self):
        return len(self.dels)

    def deliveries_at(self, ids):
        self.asked.append(("deliveries", ids[0], ids[-1]))
        return [self.dels[i] for i in ids]


def test_facts_read_a_log_longer_than_one_batch_whole_a_batch_at_a_time():
    log = _LongLog(12_001, 10_001)
    facts = Facts(log)
    assert facts.update() is True and facts.version == 1
    assert facts.last_event == 12_001 and facts.last_delivery == 10_001
    assert [d["delivery_id"] for d in facts.deliveries] == list(range(1, 10_002))
    assert len(facts.events("task_created")) == 6001 and len(facts.events("lease_granted")) == 6000
    assert len(facts.task_states) == 6001 and facts.open_tasks == set(facts.task_states)
    assert log.asked == [("events", 0, 5000), ("events", 5000, 5000), ("events", 10_000, 5000),
                         ("deliveries", 1, 5000), ("deliveries", 5001, 10_000), ("deliveries", 10_001, 10_001)]
    log.asked.clear()
    assert facts.update() is False and log.asked == [] and facts.version == 1
    log.rows.append(_ev(12_002, "fence_recorded", None, "F"))
    assert facts.update() is True and log.asked == [("events", 12_001, 5000)] and facts.version == 2
    log.dels[10_002] = dict(log.dels[1], delivery_id=10_002, code="E_X")
    assert facts.update() is True and facts.deliveries[-1]["delivery_id"] == 10_002


def test_facts_stop_reading_when_the_log_gives_nothing_more():
    log = _LongLog(3, 0)
    log.last_event = lambda: 10  # the log says more than it gives
    facts = Facts(log)
    assert facts.update() is True and facts.last_event == 3
    assert log.asked == [("events", 0, 5000), ("events", 3, 5000)]


def test_facts_follow_each_tasks_state_in_and_out_of_the_terminal_states():
    store = happy(upto=3)
    deliver(store, samples.conflicting_m3())  # T-1: succeeded -> needs_review, open again
    facts = Facts(store)
    facts.update()
    assert facts.task_states == {"T-1": "needs_review"} and facts.open_tasks == {"T-1"}
    review(store, "T-1", "canceled", by="reviewer", evidence=["M-3"])
    facts.update()
    assert facts.task_states == {"T-1": "canceled"} and facts.open_tasks == set()


def test_a_ctx_computes_once_what_never_changes_and_again_what_changes_with_the_run():
    store = happy(upto=2)
    ctx = ctx_of(store)
    calls = []
    make = lambda: calls.append(1) or len(calls)  # noqa: E731
    assert ctx.once("k", make) == 1 and ctx.once("k", make) == 1 and ctx.once("j", make) == 2
    calls.clear()
    assert ctx.cached("c", make) == 1 and ctx.cached("c", make) == 1 and ctx.cached("d", make) == 2
    deliver(store, samples.happy_path()[2])
    ctx.facts.update()
    assert ctx.cached("c", make) == 3 and ctx.cached("c", make) == 3
    assert list(ctx._cache) == [("c", ctx.facts.version)]  # what an older state cached is dropped
    assert ctx.once("k", make) == 1


def test_a_ctx_reads_the_learners_actions_of_its_own_lab():
    progress = ProgressStore.open(None)
    progress.record_action(LAB, "visit", {"seq": 4})
    progress.record_action(LAB + 1, "visit", {"seq": 9})
    ctx = ctx_of(happy(upto=1), progress=progress)
    assert [a["data"] for a in ctx.actions("visit")] == [{"seq": 4}]


def test_the_naive_redelivery_keeps_the_runtimes_own_events():
    store = happy()
    fresh = redeliver_under(store, "naive")
    try:
        assert len(fresh.deliveries()) == len(store.deliveries())
        assert {a["ref"] for a in fresh.artifacts()} == {a["ref"] for a in store.artifacts()}
    finally:
        fresh.close()


# ------------------------------------------------------------------------------------- delivery


def test_delivery_is_met_by_enough_deliveries_of_a_type_and_decision_and_names_the_first():
    store = happy()
    ctx = ctx_of(store)
    assert run(ctx, "delivery", type="task_result", decision="accepted") == Like(True, "met", {
        "message_id": "M-3", "task_id": "T-1", "decision": "accepted", "code": "", "reason": reason_of(store, "M-3"),
        "count": 2})
    assert run(ctx, "delivery", type="task_result", decision="accepted", count=2).ok
    assert run(ctx, "delivery", type="task_result", decision="accepted", task="T-2").saw["message_id"] == "M-6"
    assert run(ctx, "delivery", type="task_result", decision="accepted", count=3) == Like(False, "other-decision", {
        "message_id": "M-6", "task_id": "T-2", "decision": "accepted", "code": "", "reason": reason_of(store, "M-6"),
        "count": 2})
    assert run(ctx, "delivery", type="task_result", decision="duplicate", task="T-1") == Like(False, "other-decision", {
        "message_id": "M-3", "task_id": "T-1", "decision": "accepted", "code": "", "reason": reason_of(store, "M-3"),
        "count": 0})
    assert run(ctx, "delivery", type="cancel", decision="accepted") == Like(False, "none", {"count": 0})
    assert run(ctx, "delivery", type="task_result", decision="accepted", task="T-9") == Like(False, "none", {"count": 0})


def test_delivery_can_ask_for_a_refusals_code():
    store = happy(upto=1)
    bad = deliver(store, env("X-1", "T-1", "writer", "task_started", {"lease_version": 1}, "k-x1"))
    ctx = ctx_of(store)
    met = run(ctx, "delivery", type="task_started", decision="rejected", code=bad.code)
    assert met == Like(True, "met", {"message_id": "X-1", "task_id": "T-1", "decision": "rejected", "code": bad.code,
                                     "reason": bad.reason, "count": 1})
    other = run(ctx, "delivery", type="task_started", decision="rejected", code="E_STALE_LEASE")
    assert (other.code, other.saw["code"], other.saw["count"]) == ("other-decision", bad.code, 0)


# ------------------------------------------------------------------------------------- task_state, all_terminal


def test_task_state_is_met_now_or_ever_and_says_where_the_task_is():
    store = happy()
    deliver(store, samples.conflicting_m3("M-3c", 20))  # T-1 frozen: needs_review
    ctx = ctx_of(store)
    assert run(ctx, "task_state", task="T-1", state="needs_review") == Like(True, "met", {"task_id": "T-1",
                                                                                         "state": "needs_review"})
    assert run(ctx, "task_state", task="T-1", state="running") == Like(False, "other", {
        "task_id": "T-1", "state": "needs_review", "wanted": "running"})
    assert run(ctx, "task_state", task="T-1", state="running", ever=True) == Like(True, "met", {
        "task_id": "T-1", "state": "running", "now": "needs_review"})
    assert run(ctx, "task_state", task="T-2", state="needs_review", ever=True) == Like(False, "other", {
        "task_id": "T-2", "state": "succeeded", "wanted": "needs_review"})
    assert run(ctx, "task_state", task="T-9", state="ready") == Like(False, "missing", {"task_id": "T-9"})


def test_all_terminal_waits_for_every_task_of_the_story():
    assert run(ctx_of(Store.memory()), "all_terminal") == Like(False, "empty", {})
    done = ctx_of(happy())
    assert run(done, "all_terminal") == Like(True, "met", {"tasks": 2})
    assert run(ctx_of(happy(), expected=2), "all_terminal").ok
    assert run(ctx_of(happy(), expected=3), "all_terminal") == Like(False, "open", {
        "task_id": "1 task(s) not created yet", "state": "to come", "open": 1})
    partway = happy(upto=6)  # T-1 done, T-2 running
    assert run(ctx_of(partway, expected=3), "all_terminal") == Like(False, "open", {
        "task_id": "1 task(s) not created yet", "state": "to come", "open": 2})
    assert run(ctx_of(partway), "all_terminal") == Like(False, "open", {"task_id": "T-2", "state": "running",
                                                                         "open": 1})
    two_open = happy(upto=5)
    deliver(two_open, samples.conflicting_m3("M-3c", 20))
    assert run(ctx_of(two_open), "all_terminal") == Like(False, "open", {"task_id": "T-1", "state": "needs_review",
                                                                          "open": 2})


# ------------------------------------------------------------------------------------- injected, crashed


def test_injected_names_the_message_the_fault_was_put_on():
    store = happy()
    record_fault(store, "duplicate", message_id="M-6", task_id="T-2", detail={"selector": "by hand"})
    ctx = ctx_of(store)
    assert run(ctx, "injected", fault="duplicate") == Like(True, "met", {
        "message_id": "M-6", "type": "task_result", "task_id": "T-2", "target": "", "fault": "duplicate"})
    assert run(ctx, "injected", fault="duplicate", on_type="task_result").ok
    assert run(ctx, "injected", fault="duplicate", on="publishing").saw["target"] == "M-6"
    assert run(ctx, "injected", fault="resend") == Like(False, "none", {"fault": "resend"})
    assert run(ctx, "injected", fault="duplicate", on_type="ack") == Like(False, "wrong-message", {
        "message_id": "M-6", "type": "task_result", "task_id": "T-2",
        "target": "(not yet sent: step until the report is published)", "fault": "duplicate"})


def test_injected_on_the_publishing_result_wants_the_message_that_committed_the_publication():
    store = happy()
    record_fault(store, "duplicate", message_id="M-3", task_id="T-1", detail={})
    ctx = ctx_of(store)
    assert run(ctx, "injected", fault="duplicate", on="publishing") == Like(False, "wrong-message", {
        "message_id": "M-3", "type": "task_result", "task_id": "T-1", "target": "M-6", "fault": "duplicate"})
    record_fault(store, "duplicate", message_id="M-6", task_id="T-2", detail={})
    record_fault(store, "duplicate", message_id="A-6", task_id="T-2", detail={})
    met = run(ctx, "injected", fault="duplicate", on="publishing")
    assert met.ok and met.saw["message_id"] == "M-6" and met.saw["target"] == "M-6"
    unmet = run(ctx, "injected", fault="duplicate", on_type="fence")
    assert unmet.saw["message_id"] == "A-6" and unmet.saw["type"] == "ack"  # the last one injected
    early = happy(upto=3)
    record_fault(early, "duplicate", message_id="M-3", task_id="T-1", detail={})
    got = run(ctx_of(early), "injected", fault="duplicate", on="publishing")
    assert got.code == "wrong-message" and got.saw["target"] == "(not yet sent: step until the report is published)"


def test_injected_on_no_message_reports_empty_names():
    store = happy(upto=1)
    record_fault(store, "drop", message_id=None, task_id=None, detail={})
    assert run(ctx_of(store), "injected", fault="drop") == Like(True, "met", {
        "message_id": "", "type": "", "task_id": "", "target": "", "fault": "drop"})
    assert run(ctx_of(store), "injected", fault="drop", on_type="ack") == Like(False, "wrong-message", {
        "message_id": "", "type": "", "task_id": "", "target": "(not yet sent: step until the report is published)",
        "fault": "drop"})


def test_injected_on_a_redacted_message_wants_one_whose_log_keeps_redacted_values():
    store = run_scenario(load_scenario("sensitive-source"), seed=0)
    try:
        redacted = [d["message_id"] for d in store.deliveries()
                    if "[redacted]" in str(store.message_by_id(d["message_id"])["payload"])]
        assert redacted
        record_fault(store, "duplicate", message_id="M-2", task_id="T-1", detail={})
        ctx = ctx_of(store)
        unmet = run(ctx, "injected", fault="duplicate", on="redacted")
        assert (unmet.code, unmet.saw["message_id"], unmet.saw["target"]) == ("wrong-message", "M-2", redacted[0])
        record_fault(store, "duplicate", message_id=redacted[-1], task_id=None, detail={})
        met = run(ctx, "injected", fault="duplicate", on="redacted")
        assert met.ok and met.saw["message_id"] == redacted[-1] and met.saw["target"] == redacted[0]
    finally:
        store.close()


def test_crashed_wants_a_crash_by_hand_and_names_the_worker_and_its_lease():
    store = happy(upto=2)
    record_fault(store, "crash", message_id=None, task_id="T-1", detail={"selector": "rate 0.1", "worker": "researcher",
                                                                          "lease_version": 1})
    ctx = ctx_of(store)
    assert run(ctx, "crashed") == Like(False, "none", {})
    assert run(ctx, "crashed", by_hand=False) == Like(True, "met", {"worker": "researcher", "task_id": "T-1",
                                                                     "lease_version": 1})
    record_fault(store, "drop", message_id=None, task_id="T-1", detail={"selector": "by hand"})
    assert run(ctx, "crashed") == Like(False, "none", {})
    record_fault(store, "crash", message_id=None, task_id=None, detail={"selector": "by hand"})
    assert run(ctx, "crashed") == Like(True, "met", {"worker": "", "task_id": "", "lease_version": ""})


# ------------------------------------------------------------------------------------- effect_once


def test_effect_once_wants_the_publishing_result_delivered_again_and_published_once():
    store = happy()
    ctx = ctx_of(store)
    assert run(ctx, "effect_once") == Like(False, "not-repeated", {"message_id": "M-6", "deliveries": 1})
    assert run(ctx, "effect_once", kind="mail") == Like(False, "none", {"kind": "mail"})
    deliver(store, m6())
    assert run(ctx, "effect_once") == Like(True, "met", {"message_id": "M-6", "deliveries": 2,
                                                          "effect_key": "publish:R-1:T-2", "suppressed": 0})


def test_effect_once_counts_a_copy_under_another_message_id_recorded_as_a_duplicate():
    store = happy()
    from dataclasses import replace

    deliver(store, replace(m6(), message_id="M-6r"))  # a resend: a new id, the same intent
    assert run(ctx_of(store), "effect_once").saw["deliveries"] == 2
    deliver(store, env("X-1", "T-2", "writer", "task_result", {"status": "failed", "lease_version": 1},
                       "R-1:T-2:late"))  # a late one of the same task: not a copy
    ctx = ctx_of(store)
    assert [d["decision"] for d in store.deliveries()][-2:] == ["duplicate", "late"]
    assert run(ctx, "effect_once").saw["deliveries"] == 2


def test_effect_once_is_unmet_when_the_publication_committed_twice():
    store = happy(policy=NAIVE)
    deliver(store, m6(), policy=NAIVE)
    assert run(ctx_of(store), "effect_once") == Like(False, "twice", {"message_id": "M-6", "effects": 2})


# ------------------------------------------------------------------------------------- invariants


def test_invariants_hold_counts_what_it_checked_and_names_the_first_broken():
    ctx = ctx_of(happy())
    met = run(ctx, "invariants_hold")
    assert met.ok and met.saw == {"checked": len(ctx.invariants())} and met.saw["checked"] >= 10
    assert run(ctx, "invariants_hold", after="fence_recorded") == Like(False, "not-yet", {"after": "fence_recorded"})
    assert run(ctx, "invariants_hold", after="review_decision") == Like(False, "not-yet", {"after": "review_decision"})
    assert run(ctx, "invariants_hold", after="task_result").ok  # a delivery type
    assert run(ctx, "invariants_hold", after="effect_committed").ok  # an event type
    naive = happy(policy=NAIVE)
    deliver(naive, m6(), policy=NAIVE)
    broken = run(ctx_of(naive), "invariants_hold")
    first = next(r for r in ctx_of(naive).invariants() if not r.ok)
    w = first.witnesses[0]
    assert broken == Like(False, "broken", {"name": first.name, "task_id": w.get("task_id", ""),
                                            "message_id": w.get("message_id", "")})
    assert broken.saw["task_id"] == "T-2"


def test_naive_breaks_replays_the_learners_deliveries_under_naive():
    store = happy()
    deliver(store, m6())  # safe: a duplicate; naive: a second publication
    ctx = ctx_of(store)
    met = run(ctx, "naive_breaks", invariant="EFFECT_AT_MOST_ONCE")
    w = {r.name: r for r in ctx.naive_invariants()}["EFFECT_AT_MOST_ONCE"].witnesses[0]
    assert met == Like(True, "met", {"name": "EFFECT_AT_MOST_ONCE", "task_id": "T-2", "message_id": "",
                                     "old_state": "", "new_state": ""})
    assert w["message_ids"] == ["M-6"]  # this witness names its messages in a list
    holds = run(ctx, "naive_breaks", invariant="CLOCK_MONOTONIC")
    others = [r.name for r in ctx.naive_invariants() if not r.ok]
    assert holds == Like(False, "holds", {"name": "CLOCK_MONOTONIC", "others": ", ".join(others)})
    assert "EFFECT_AT_MOST_ONCE" in others
    assert run(ctx, "naive_breaks", invariant="NO_SUCH") == Like(False, "unknown", {"name": "NO_SUCH"})
    quiet = ctx_of(happy())
    assert run(quiet, "naive_breaks", invariant="CLOCK_MONOTONIC").saw["others"] == "none"
    naive = happy(policy=NAIVE)
    deliver(naive, m6(), policy=NAIVE)
    assert run(ctx_of(naive), "naive_breaks", invariant="EFFECT_AT_MOST_ONCE") == Like(
        False, "safe-broken", {"name": "EFFECT_AT_MOST_ONCE"})


def test_naive_breaks_reports_the_states_of_a_regression():
    store = happy(upto=3)
    deliver(store, env("X-1", "T-1", "researcher", "task_result", {"status": "failed", "lease_version": 1},
                       "R-1:T-1:late"))  # late under safe; under naive it moves T-1 back
    ctx = ctx_of(store)
    seen = run(ctx, "naive_breaks", invariant="NO_STATE_REGRESSION")
    assert seen.ok and (seen.saw["old_state"], seen.saw["new_state"]) == ("succeeded", "failed")
    assert seen.saw["message_id"] == "X-1" and seen.saw["task_id"] == "T-1"


def test_naive_run_breaks_runs_the_same_scenario_under_the_naive_runtime():
    store = run_scenario(load_scenario("sensitive-source"), seed=0)
    try:
        ctx = ctx_of(store)
        inv = "PAYLOAD_MINIMIZATION"
        assert run(ctx, "naive_run_breaks", invariant=inv, problem="does not need it") == Like(True, "met", {
            "name": inv, "message_id": "M-4", "problem": "sent to writer, which does not need it", "task_id": "T-2",
            "recipient": "writer", "fields": "source_email, source_phone"})
        log = run(ctx, "naive_run_breaks", invariant=inv, problem="in the clear in the message log")
        assert log.ok and log.saw["message_id"] == "M-3" and log.saw["recipient"] == "manager"
        assert run(ctx, "naive_run_breaks", invariant=inv).saw["message_id"] == "M-3"
        assert run(ctx, "naive_run_breaks", invariant="CLOCK_MONOTONIC") == Like(False, "holds",
                                                                                   {"name": "CLOCK_MONOTONIC"})
        assert run(ctx, "naive_run_breaks", invariant=inv, problem="no such words") == Like(False, "holds",
                                                                                              {"name": inv})
        assert run(ctx, "naive_run_breaks", invariant="NO_SUCH") == Like(False, "unknown", {"name": "NO_SUCH"})
    finally:
        store.close()
    naive = run_scenario(load_scenario("sensitive-source"), seed=0, policy="naive")
    try:
        assert run(ctx_of(naive), "naive_run_breaks", invariant="PAYLOAD_MINIMIZATION") == Like(
            False, "safe-broken", {"name": "PAYLOAD_MINIMIZATION"})
    finally:
        naive.close()
    live = live_steps(2, "sensitive-source")  # M-1 and M-2 delivered: none of the naive run's witnesses yet
    try:
        ctx = ctx_of(live.store)
        assert run(ctx, "naive_run_breaks", invariant="PAYLOAD_MINIMIZATION", problem="does not need it") == Like(
            False, "not-yet", {"name": "PAYLOAD_MINIMIZATION", "message_id": "M-4",
                               "problem": "sent to writer, which does not need it", "recipient": "writer",
                               "fields": "source_email, source_phone"})
    finally:
        live.close()


# ------------------------------------------------------------------------------------- reviewed


def frozen() -> Store:
    store = happy(upto=3)
    deliver(store, samples.conflicting_m3())
    return store


def test_reviewed_waits_for_a_frozen_task_and_is_met_by_the_reviewers_decision():
    assert run(ctx_of(happy()), "reviewed") == Like(False, "none", {})
    store = frozen()
    ctx = ctx_of(store)
    assert run(ctx, "reviewed") == Like(False, "waiting", {"task_id": "T-1"})
    out = review(store, "T-1", "ready", by="reviewer", evidence=["M-3", "M-4"])
    assert run(ctx, "reviewed") == Like(True, "met", {"message_id": out.message_id, "task_id": "T-1", "state": "ready",
                                                      "evidence": "M-3, M-4"})
    assert run(ctx, "reviewed", decision="ready", task="T-1").ok
    assert run(ctx, "reviewed", decision="canceled") == Like(False, "other-decision", {
        "decision": "accepted", "state": "ready", "task_id": "T-1"})
    assert run(ctx, "reviewed", task="T-2") == Like(False, "none", {})


def test_reviewed_reports_a_refused_reconciliation_before_another_decision():
    store = frozen()
    review(store, "T-1", "ready", by="reviewer", evidence=["M-3"])
    progress = ProgressStore.open(None)
    progress.record_action(LAB, "reconcile-refused", {"code": "E_OLD", "reason": "first", "task_id": "T-1"})
    progress.record_action(LAB, "reconcile-refused", {"code": "E_STALE_VERSION", "reason": "stale", "task_id": "T-1"})
    ctx = ctx_of(store, progress=progress)
    assert run(ctx, "reviewed", decision="canceled") == Like(False, "refused", {
        "code": "E_STALE_VERSION", "reason": "stale", "task_id": "T-1"})
    progress.record_action(LAB, "reconcile-refused", {})
    assert run(ctx, "reviewed", decision="canceled") == Like(False, "refused", {"code": "", "reason": "",
                                                                                "task_id": ""})
    assert run(ctx, "reviewed").ok


def test_reviewed_wants_an_accepted_decision():
    store = frozen()
    v = store.get_task("T-1").state_version
    review(store, "T-1", "ready", by="reviewer", evidence=["M-3"], read_version=v)
    stale = review(store, "T-1", "canceled", by="reviewer", evidence=["M-3"], read_version=v)
    assert stale.decision == "rejected"
    ctx = ctx_of(store)
    assert run(ctx, "reviewed", decision="canceled") == Like(False, "other-decision", {
        "decision": "rejected", "state": "ready", "task_id": "T-1"})


# ------------------------------------------------------------------------------------- visited, opened


def test_visited_wants_a_visit_to_an_event_before_the_first_of_its_type():
    store = happy()
    first_effect = next(e["seq"] for e in store.events() if e["type"] == "effect_committed")
    first_running = next(e["seq"] for e in store.events()
                         if e["type"] == "transition_applied" and e["data"]["to"] == "running")
    progress = ProgressStore.open(None)
    ctx = ctx_of(store, progress=progress)
    assert run(ctx, "visited", before="lease_expired") == Like(False, "no-event", {"before": "lease_expired"})
    assert run(ctx, "visited", before="transition_applied", field="to", value="denied") == Like(
        False, "no-event", {"before": "transition_applied"})
    assert run(ctx, "visited", before="effect_committed") == Like(False, "none", {"seq": first_effect})
    progress.record_action(LAB, "open-detail", {"message_id": "M-1"})  # not a visit
    assert run(ctx, "visited", before="effect_committed") == Like(False, "none", {"seq": first_effect})
    progress.record_action(LAB, "visit", {"seq": first_effect + 3})
    progress.record_action(LAB, "visit", {"seq": first_effect})
    assert run(ctx, "visited", before="effect_committed") == Like(False, "too-late", {"seq": first_effect,
                                                                                      "before_seq": first_effect})
    progress.record_action(LAB, "visit", {"seq": 2})
    progress.record_action(LAB, "visit", {"seq": first_effect - 1})
    progress.record_action(LAB, "visit", {"seq": first_effect + 9})
    assert run(ctx, "visited", before="effect_committed") == Like(True, "met", {"seq": first_effect - 1,
                                                                                "before_seq": first_effect})
    assert 2 < first_running < first_effect - 1
    assert run(ctx, "visited", before="transition_applied", field="to", value="running") == Like(
        True, "met", {"seq": 2, "before_seq": first_running})
    progress.record_action(LAB, "visit", {})
    assert run(ctx, "visited", before="effect_committed").saw["seq"] == 0  # a visit without a seq is at the start


def test_opened_wants_a_view_of_a_message_of_a_type_sent_to_a_recipient():
    store = happy()
    progress = ProgressStore.open(None)
    ctx = ctx_of(store, progress=progress)
    assert run(ctx, "opened", what="detail") == Like(False, "none", {"wanted": ""})
    assert run(ctx, "opened", what="detail", type="task_request", recipient="writer") == Like(
        False, "none", {"wanted": "task_request to writer"})
    progress.record_action(LAB, "open-detail", {"message_id": "M-1", "type": "task_request"})
    progress.record_action(LAB, "open-conversation", {"message_id": "M-4", "type": "task_request"})
    assert run(ctx, "opened", what="detail", type="task_request", recipient="writer") == Like(
        False, "other", {"message_id": "M-1", "type": "task_request", "recipient": "researcher",
                         "wanted": "task_request to writer"})
    assert run(ctx, "opened", what="detail", recipient="researcher") == Like(
        True, "met", {"message_id": "M-1", "type": "task_request", "recipient": "researcher"})
    assert run(ctx, "opened", what="detail", type="ack").saw["wanted"] == "ack"
    assert run(ctx, "opened", what="conversation", type="task_request", recipient="writer").ok
    progress.record_action(LAB, "open-detail", {"message_id": "M-4", "type": "task_request"})
    assert run(ctx, "opened", what="detail", type="task_request", recipient="writer").saw["message_id"] == "M-4"
    progress.record_action(LAB, "open-detail", {"type": "ack"})  # an action that names no message
    assert run(ctx, "opened", what="detail", type="task_result") == Like(False, "other", {
        "message_id": "", "type": "ack", "recipient": "", "wanted": "task_result"})


# ------------------------------------------------------------------------------------- trace, event, witness


def test_trace_reports_the_validators_verdict_terminal_and_codes():
    good = run_scenario(load_scenario("publish-report"), seed=0)
    bad = run_scenario(load_scenario("publish-report"), seed=0, faults=["reorder"], policy="naive")
    try:
        ctx = ctx_of(good)
        reason = "valid: COMPLETED, fence M-7 acknowledged by researcher, writer"
        saw = {"terminal": "COMPLETED", "codes": "none", "reason": reason}
        assert run(ctx, "trace") == Like(True, "met", saw)
        assert run(ctx, "trace", valid=True, terminal="COMPLETED") == Like(True, "met", saw)
        assert run(ctx, "trace", valid=False) == Like(False, "valid", saw)
        assert run(ctx, "trace", terminal="BLOCKED") == Like(False, "other-terminal", dict(saw, wanted="BLOCKED"))
        assert run(ctx, "trace", code="E_SEQUENCE_GAP") == Like(False, "absent", dict(saw, code="E_SEQUENCE_GAP"))
        ctx = ctx_of(bad)
        got = run(ctx, "trace", code="E_SEQUENCE_GAP", valid=False)
        assert got.ok and got.code == "met"
        assert (got.saw["code"], got.saw["message_id"], got.saw["sender"]) == ("E_SEQUENCE_GAP", "M-3", "researcher")
        assert got.saw["codes"] == "E_SEQUENCE_GAP, E_CAUSATION_GAP" and got.saw["terminal"] == ""
        assert run(ctx, "trace", valid=True).code == "invalid"
        assert run(ctx, "trace", code="E_CAUSATION_GAP").saw["message_id"] == "A-1"
    finally:
        good.close()
        bad.close()
    assert run(ctx_of(Store.memory()), "trace") == Like(False, "empty", {})


def test_trace_is_worked_out_once_per_state_of_the_run(monkeypatch):
    import sim.protocol.trace as trace_mod

    calls = []
    real = trace_mod.validate
    monkeypatch.setattr(trace_mod, "validate", lambda t: calls.append(1) or real(t))
    store = happy()
    ctx = ctx_of(store)
    run(ctx, "trace")
    run(ctx, "trace", valid=True)
    assert len(calls) == 1


@pytest.mark.parametrize("etype", ["fault_injected", "effect_committed", "effect_suppressed", "transition_applied",
                                   "lease_expired", "fence_recorded", "duplicate_recorded", "lease_granted",
                                   "review_decided", "reconciliation_required", "task_created", "ack_recorded"])
def test_event_may_name_any_event_type_a_lab_indexes(etype):
    ctx = ctx_of(Store.memory())
    assert run(ctx, "event", type=etype) == Like(False, "none", {"type": etype})


def test_event_names_the_first_event_of_its_type_and_task():
    store = happy()
    ctx = ctx_of(store)
    first = next(e for e in store.events() if e["type"] == "lease_granted")
    second = [e for e in store.events() if e["type"] == "lease_granted" and e["task_id"] == "T-2"][0]
    assert run(ctx, "event", type="lease_granted") == Like(True, "met", {"seq": first["seq"], "task_id": "T-1",
                                                                         "message_id": "M-2"})
    assert run(ctx, "event", type="lease_granted", task="T-2") == Like(True, "met", {
        "seq": second["seq"], "task_id": "T-2", "message_id": "M-5"})
    record_fault(store, "drop", message_id=None, task_id=None, detail={})
    assert run(ctx, "event", type="fault_injected") == Like(True, "met", {
        "seq": store.last_event(), "task_id": "", "message_id": ""})
    with pytest.raises(TypeError, match="event type 'intent_recorded' is not indexed for labs"):
        run(ctx, "event", type="intent_recorded")


def test_opened_witness_wants_the_learner_to_open_a_delivery_that_broke_the_invariant():
    naive = happy(policy=NAIVE)
    deliver(naive, m6(), policy=NAIVE)
    progress = ProgressStore.open(None)
    ctx = ctx_of(naive, progress=progress)
    inv = "EFFECT_AT_MOST_ONCE"
    w = {r.name: r for r in ctx.invariants()}[inv].witnesses[0]
    assert run(ctx, "opened_witness", invariant="CLOCK_MONOTONIC") == Like(False, "holds", {"name": "CLOCK_MONOTONIC"})
    assert run(ctx, "opened_witness", invariant="NO_SUCH") == Like(False, "holds", {"name": "NO_SUCH"})
    assert run(ctx, "opened_witness", invariant=inv, problem="no such words") == Like(False, "holds", {"name": inv})
    assert run(ctx, "opened_witness", invariant=inv) == Like(False, "not-opened", {
        "name": inv, "opened": "nothing", "task_id": "T-2"})
    progress.record_action(LAB, "open-detail", {"message_id": "M-1"})
    progress.record_action(LAB, "open-detail", {})
    progress.record_action(LAB, "open-conversation", {"message_id": "M-6"})
    assert run(ctx, "opened_witness", invariant=inv) == Like(False, "not-opened", {
        "name": inv, "opened": "M-1", "task_id": "T-2"})
    again = w["effects"][1]["delivery_id"]  # the delivery that published a second time
    progress.record_action(LAB, "open-detail", {"message_id": "M-6", "delivery_id": again})
    assert run(ctx, "opened_witness", invariant=inv) == Like(True, "met", {
        "name": inv, "message_id": "M-6", "witness": "M-6", "task_id": "T-2"})


@pytest.mark.parametrize("status", ["failed", "denied"])
def test_a_task_that_failed_or_was_denied_is_finished(status):
    store = happy(upto=2)
    deliver(store, env("M-3", "T-1", "researcher", "task_result", {"status": status, "lease_version": 1},
                       "R-1:T-1:attempt-1"))
    assert store.get_task("T-1").state.value == status
    assert run(ctx_of(store), "all_terminal") == Like(True, "met", {"tasks": 1})


# ------------------------------------------------------------------------------------- issue 26's judgement


def test_only_the_actions_recorded_on_this_run_count():
    progress = ProgressStore.open(None)
    progress.record_action(LAB, "visit", {"seq": 1, "run": "run-a"})
    progress.record_action(LAB, "visit", {"seq": 2, "run": "run-b"})
    progress.record_action(LAB, "visit", {"seq": 3})
    store = happy(upto=1)
    facts = Facts(store)
    assert [a["data"]["seq"] for a in Ctx(store, facts, progress, LAB, run_id="run-a").actions("visit")] == [1]
    assert [a["data"]["seq"] for a in Ctx(store, facts, progress, LAB).actions("visit")] == [3]


def test_invariants_hold_says_nothing_of_an_empty_run_and_can_wait_for_a_decision():
    empty = ctx_of(Store.memory())
    assert run(empty, "invariants_hold") == Like(False, "empty", {"after": ""})
    assert run(empty, "invariants_hold", after="fence_recorded") == Like(False, "empty", {"after": "fence_recorded"})
    assert run(empty, "invariants_hold", after_decision="late") == Like(False, "empty", {"after": "late"})
    store = happy()
    ctx = ctx_of(store)
    assert run(ctx, "invariants_hold", after_decision="late") == Like(False, "not-yet", {"after": "late"})
    deliver(store, env("L-1", "T-1", "researcher", "task_result", {"status": "failed", "lease_version": 1},
                       "R-1:T-1:late"))
    assert run(ctx, "invariants_hold", after_decision="late").ok
    assert run(ctx, "invariants_hold", after="task_result", after_decision="late").ok


def test_naive_breaks_says_nothing_of_an_empty_run_and_can_ask_for_the_learners_own_refused_message():
    assert run(ctx_of(Store.memory()), "naive_breaks", invariant="NO_LOST_UPDATE") == Like(
        False, "empty", {"name": "NO_LOST_UPDATE"})
    store = happy(upto=2)
    stale = deliver(store, env("X-1", "T-1", "manager", "cancel", {"reason": "stop", "expected_state_version": 0},
                               "R-1:T-1:cancel"))
    assert (stale.decision, stale.code) == ("rejected", "E_STALE_VERSION")
    ctx = ctx_of(store)
    assert run(ctx, "naive_breaks", invariant="NO_LOST_UPDATE", witness_code="E_STALE_VERSION") == Like(True, "met", {
        "name": "NO_LOST_UPDATE", "task_id": "T-1", "message_id": "X-1", "old_state": "running",
        "new_state": "canceled", "expected_version": 0, "actual_version": 2})
    others = ", ".join(r.name for r in ctx.naive_invariants() if not r.ok)
    assert run(ctx, "naive_breaks", invariant="NO_LOST_UPDATE", witness_code="E_NOT_ASSIGNEE") == Like(
        False, "not-yours", {"name": "NO_LOST_UPDATE", "code": "E_NOT_ASSIGNEE", "others": others})
    assert run(ctx, "naive_breaks", invariant="NO_LOST_UPDATE").saw["message_id"] == "X-1"


def test_opened_detail_is_judged_on_the_delivery_opened():
    store = happy()
    deliver(store, m6())  # M-6 again: delivery 9, a duplicate
    progress = ProgressStore.open(None)
    ctx = ctx_of(store, progress=progress)
    progress.record_action(LAB, "open-detail", {"message_id": "M-6", "type": "task_result", "delivery_id": 7})
    assert run(ctx, "opened", what="detail", type="task_result") == Like(True, "met", {
        "message_id": "M-6", "type": "task_result", "recipient": "manager", "delivery_id": 7, "decision": "accepted",
        "state": "succeeded", "task_id": "T-2"})
    wanted = "task_result to manager of T-2 decided duplicate"
    assert run(ctx, "opened", what="detail", type="task_result", recipient="manager", task="T-2",
               decision="duplicate") == Like(False, "other", {
        "message_id": "M-6", "type": "task_result", "recipient": "manager", "wanted": wanted, "decision": "accepted",
        "state": "succeeded", "task_id": "T-2"})
    progress.record_action(LAB, "open-detail", {"message_id": "M-6", "type": "task_result", "delivery_id": 9})
    assert run(ctx, "opened", what="detail", type="task_result", task="T-2", decision="duplicate") == Like(
        True, "met", {"delivery_id": 9, "decision": "duplicate"})
    assert run(ctx, "opened", what="detail", type="task_result", task="T-1").code == "other"
    assert run(ctx, "opened", what="detail", type="task_result", decision="accepted").saw["delivery_id"] == 7
    # an action without a delivery id looks at every delivery of its message
    progress.record_action(LAB, "open-detail", {"message_id": "M-2", "type": "task_started"})
    assert run(ctx, "opened", what="detail", type="task_started", state_after="running") == Like(True, "met", {
        "message_id": "M-2", "delivery_id": 2, "state": "running", "task_id": "T-1"})
    assert run(ctx, "opened", what="detail", type="task_started", state_after="ready") == Like(False, "other", {
        "wanted": "task_started while its task was ready", "decision": "accepted", "state": "running",
        "task_id": "T-1"})
    # a conversation view is about the message, not one delivery
    progress.record_action(LAB, "open-conversation", {"message_id": "M-6", "type": "task_result"})
    assert run(ctx, "opened", what="conversation", type="task_result", decision="late") == Like(True, "met", {
        "message_id": "M-6", "type": "task_result", "recipient": "manager"})
    assert run(ctx, "opened", what="conversation", type="ack") == Like(False, "other", {
        "message_id": "M-6", "decision": "", "state": "", "task_id": ""})


def test_opened_names_the_last_delivery_seen_when_none_matches():
    store = happy()
    deliver(store, m6())
    progress = ProgressStore.open(None)
    progress.record_action(LAB, "open-detail", {"message_id": "M-6", "type": "task_result"})
    ctx = ctx_of(store, progress=progress)
    assert run(ctx, "opened", what="detail", type="task_result", decision="late") == Like(False, "other", {
        "message_id": "M-6", "decision": "duplicate", "wanted": "task_result decided late"})
    assert run(ctx, "opened", what="detail", type="task_result", decision="duplicate").saw["delivery_id"] == 9


def test_naive_run_breaks_can_wait_for_the_learner_to_open_the_message():
    live = live_steps(0, "sensitive-source")
    try:
        assert run(ctx_of(live.store), "naive_run_breaks", invariant="PAYLOAD_MINIMIZATION") == Like(
            False, "empty", {"name": "PAYLOAD_MINIMIZATION"})
    finally:
        live.close()
    store = run_scenario(load_scenario("sensitive-source"), seed=0)
    try:
        progress = ProgressStore.open(None)
        ctx = ctx_of(store, progress=progress)
        inv, problem = "PAYLOAD_MINIMIZATION", "does not need it"
        assert run(ctx, "naive_run_breaks", invariant=inv, problem=problem, opened=True) == Like(False, "not-opened", {
            "name": inv, "message_id": "M-4", "problem": "sent to writer, which does not need it", "task_id": "T-2",
            "recipient": "writer", "fields": "source_email, source_phone"})
        progress.record_action(LAB, "open-detail", {"message_id": "M-1"})
        assert run(ctx, "naive_run_breaks", invariant=inv, problem=problem, opened=True).code == "not-opened"
        progress.record_action(LAB, "open-detail", {"message_id": "M-4"})
        assert run(ctx, "naive_run_breaks", invariant=inv, problem=problem, opened=True) == Like(True, "met", {
            "message_id": "M-4", "recipient": "writer"})
        # the first witness the learner opened counts, not only the first one delivered
        log = "in the clear in the message log"
        assert run(ctx, "naive_run_breaks", invariant=inv, problem=log, opened=True).saw["message_id"] == "M-4"
    finally:
        store.close()


def test_opened_witness_wants_the_second_payload_of_a_conflict_not_the_first():
    naive = happy(policy=NAIVE, upto=3)
    deliver(naive, samples.conflicting_m3(), policy=NAIVE)  # not frozen under naive: CONFLICT_FROZEN breaks
    progress = ProgressStore.open(None)
    ctx = ctx_of(naive, progress=progress)
    progress.record_action(LAB, "open-detail", {"message_id": "M-3", "delivery_id": 3})
    assert run(ctx, "opened_witness", invariant="CONFLICT_FROZEN") == Like(False, "not-opened", {
        "name": "CONFLICT_FROZEN", "opened": "M-3 (delivery #3)", "task_id": "T-1"})
    progress.record_action(LAB, "open-detail", {"message_id": "M-4", "delivery_id": 3})  # another delivery
    assert run(ctx, "opened_witness", invariant="CONFLICT_FROZEN").code == "not-opened"
    progress.record_action(LAB, "open-detail", {"message_id": "M-4", "delivery_id": 4})
    assert run(ctx, "opened_witness", invariant="CONFLICT_FROZEN") == Like(True, "met", {
        "name": "CONFLICT_FROZEN", "message_id": "M-4", "witness": "M-4", "task_id": "T-1", "delivery_id": 4})


def test_opened_witness_takes_any_delivery_of_a_message_a_witness_names_alone():
    store = happy(upto=3)
    deliver(store, env("X-1", "T-1", "researcher", "task_result", {"status": "failed", "lease_version": 1},
                       "R-1:T-1:late"), policy=NAIVE)  # naive: T-1 goes back from succeeded to failed
    progress = ProgressStore.open(None)
    ctx = ctx_of(store, progress=progress)
    assert not {r.name: r for r in ctx.invariants()}["NO_STATE_REGRESSION"].ok
    progress.record_action(LAB, "open-detail", {"message_id": "X-1"})
    assert run(ctx, "opened_witness", invariant="NO_STATE_REGRESSION") == Like(True, "met", {
        "message_id": "X-1", "witness": "X-1", "task_id": "T-1", "delivery_id": ""})


def test_opened_witness_counts_every_commit_after_the_first_publication():
    naive = happy(policy=NAIVE)
    deliver(naive, m6(), policy=NAIVE)
    deliver(naive, m6(), policy=NAIVE)
    progress = ProgressStore.open(None)
    ctx = ctx_of(naive, progress=progress)
    w = {r.name: r for r in ctx.invariants()}["EFFECT_AT_MOST_ONCE"].witnesses[0]
    first, second, third = (e["delivery_id"] for e in w["effects"])
    progress.record_action(LAB, "open-detail", {"message_id": "M-6", "delivery_id": first})
    assert run(ctx, "opened_witness", invariant="EFFECT_AT_MOST_ONCE").code == "not-opened"
    progress.record_action(LAB, "open-detail", {"message_id": "M-6", "delivery_id": third})
    assert run(ctx, "opened_witness", invariant="EFFECT_AT_MOST_ONCE") == Like(True, "met", {"delivery_id": third})
    assert second < third


def test_a_task_created_but_never_moved_is_open_and_pending():
    from sim.intake import Decision, Verdict

    def create_only(env_, task, prior, rules, unresolved=frozenset()):  # a plugged intake: creates, moves nothing
        return Verdict(Decision.ACCEPTED, "created", create=True)

    store = Store.memory()
    deliver(store, samples.m1(), decide=create_only)
    assert store.get_task("T-1").state.value == "pending"
    assert run(ctx_of(store), "all_terminal") == Like(False, "open", {"task_id": "T-1", "state": "pending", "open": 1})


def test_injected_looks_past_a_fault_on_another_type_and_on_a_run_with_nothing_redacted():
    store = happy()
    record_fault(store, "duplicate", message_id="A-6", task_id="T-2", detail={})
    record_fault(store, "duplicate", message_id="M-6", task_id="T-2", detail={})
    ctx = ctx_of(store)
    assert run(ctx, "injected", fault="duplicate", on_type="task_result") == Like(True, "met", {"message_id": "M-6"})
    assert run(ctx, "injected", fault="duplicate", on="redacted") == Like(False, "wrong-message", {
        "message_id": "M-6", "target": "(not yet sent: step until the report is published)"})


def test_the_naive_redelivery_skips_a_runtime_action_that_no_longer_applies():
    store = happy(upto=2)
    out = deliver(store, env("X-1", "T-1", "writer", "task_result", {"status": "failed", "lease_version": 1},
                             "R-1:T-1:x"))
    assert out.decision == "rejected"  # safe: not the lease holder; naive: T-1 fails
    from sim.runtime import expire_lease

    assert expire_lease(store, "T-1")  # safe: T-1 was still running
    fresh = redeliver_under(store, "naive")
    try:
        assert len(fresh.deliveries()) == 3 and fresh.get_task("T-1").state.value == "failed"
        assert "lease_expired" in {e["type"] for e in fresh.events()}  # applied; its move no longer could be
    finally:
        fresh.close()
    assert run(ctx_of(store), "naive_breaks", invariant="CLOCK_MONOTONIC").code == "holds"


# ------------------------------------------------------------------------------------- what a check says of a bare witness
# Witnesses differ by invariant: some name a message, some a list of them, some the two payloads of a
# conflict; few name a recipient, fields or versions. A check reports what its witness names and ""
# for what it does not (a hint quoting a fact must never show "None"), and finds the message it names
# whichever way it names it. These runs stand in for the invariants' verdicts to give them such witnesses.


def _broken(name: str, *witnesses: dict):
    from sim.invariants import InvariantResult

    return InvariantResult(name, False, "stand-in", tuple(witnesses))


def _naive_run_of(monkeypatch, *witnesses: dict, name="PAYLOAD_MINIMIZATION"):
    import sim.labs.checks as checks

    monkeypatch.setattr(checks, "_naive_run", lambda store: {name: _broken(name, *witnesses)})


def test_naive_run_breaks_runs_the_learners_scenario_seed_and_starting_faults_under_naive(monkeypatch):
    import sim.runner as runner

    calls = []
    monkeypatch.setattr(runner, "run_scenario", lambda scenario, **kw: calls.append((scenario.name, kw)) or Store.memory())
    store = happy()
    store.set_meta({"scenario": "publish-report", "seed": "7", "faults": "duplicate:M-6,crash:writer"})
    assert run(ctx_of(store), "naive_run_breaks", invariant="EFFECT_AT_MOST_ONCE") == Like(
        False, "holds", {"name": "EFFECT_AT_MOST_ONCE"})
    assert calls == [("publish-report", {"policy": "naive", "seed": 7, "faults": ["duplicate:M-6", "crash:writer"],
                                         "strict_faults": False})]
    bare = happy()  # a run that recorded no seed and no faults: seed 0, none
    bare.set_meta({"scenario": "publish-report"})
    run(ctx_of(bare), "naive_run_breaks", invariant="EFFECT_AT_MOST_ONCE")
    assert calls[1] == ("publish-report", {"policy": "naive", "seed": 0, "faults": [], "strict_faults": False})


def test_naive_run_breaks_reports_blanks_for_what_a_witness_does_not_name(monkeypatch):
    ctx = ctx_of(happy())
    _naive_run_of(monkeypatch, {"message_id": "M-3"})
    assert run(ctx, "naive_run_breaks", invariant="PAYLOAD_MINIMIZATION").saw == {
        "name": "PAYLOAD_MINIMIZATION", "message_id": "M-3", "problem": "", "task_id": "", "recipient": "",
        "fields": ""}
    ctx = ctx_of(happy())
    _naive_run_of(monkeypatch, {"message_ids": ["M-404"], "message_id": ""})  # named, never delivered here
    assert run(ctx, "naive_run_breaks", invariant="PAYLOAD_MINIMIZATION") == Like(False, "not-yet", {
        "message_id": "M-404", "problem": "", "recipient": "", "fields": ""})
    ctx = ctx_of(happy())
    _naive_run_of(monkeypatch, {"problem": "names no message"})
    assert run(ctx, "naive_run_breaks", invariant="PAYLOAD_MINIMIZATION") == Like(False, "not-yet", {
        "message_id": "", "problem": "names no message"})


def test_naive_run_breaks_filters_by_problem_past_a_witness_that_states_none(monkeypatch):
    _naive_run_of(monkeypatch, {"message_id": "M-1"}, {"message_id": "M-3", "problem": "sent to writer"})
    assert run(ctx_of(happy()), "naive_run_breaks", invariant="PAYLOAD_MINIMIZATION", problem="writer") == Like(
        True, "met", {"message_id": "M-3", "problem": "sent to writer"})


@pytest.mark.parametrize("witness, mid", [
    ({"first": {"message_id": "M-1"}, "second": {"message_id": "M-3"}}, "M-3"),  # a conflict: the second payload
    ({"first": {"message_id": "M-1"}}, "M-1"),
    ({"message_ids": ["M-404", "M-4"]}, "M-4"),  # the first of a list that this run delivered
])
def test_naive_run_breaks_finds_the_message_a_witness_names_however_it_names_it(monkeypatch, witness, mid):
    _naive_run_of(monkeypatch, witness)
    assert run(ctx_of(happy()), "naive_run_breaks", invariant="PAYLOAD_MINIMIZATION") == Like(
        True, "met", {"message_id": mid})


def test_naive_run_breaks_counts_only_a_detail_opened_not_a_conversation(monkeypatch):
    _naive_run_of(monkeypatch, {"message_id": "M-3"})
    progress = ProgressStore.open(None)
    ctx = ctx_of(happy(), progress=progress)
    progress.record_action(LAB, "open-conversation", {"message_id": "M-3"})
    assert run(ctx, "naive_run_breaks", invariant="PAYLOAD_MINIMIZATION", opened=True).code == "not-opened"
    progress.record_action(LAB, "open-detail", {"message_id": "M-3"})
    assert run(ctx, "naive_run_breaks", invariant="PAYLOAD_MINIMIZATION", opened=True).ok


def test_invariants_hold_names_what_the_first_broken_witness_names_and_blanks_the_rest():
    ctx = ctx_of(happy())
    ctx.invariants = lambda: [_broken("NO_STATE_REGRESSION", {"message_id": "M-3"})]
    assert run(ctx, "invariants_hold") == Like(False, "broken", {"name": "NO_STATE_REGRESSION", "message_id": "M-3",
                                                                 "task_id": ""})


def test_naive_breaks_lists_every_other_broken_invariant_and_blanks_what_its_witness_does_not_name():
    ctx = ctx_of(happy())
    ctx.naive_invariants = lambda: [_broken("NO_STATE_REGRESSION", {"message_id": "M-3"}),
                                    _broken("EFFECT_AT_MOST_ONCE", {"message_ids": ["M-6"]}),
                                    {r.name: r for r in ctx_of(happy()).invariants()}["CLOCK_MONOTONIC"]]
    assert run(ctx, "naive_breaks", invariant="NO_STATE_REGRESSION").saw == {
        "name": "NO_STATE_REGRESSION", "task_id": "", "message_id": "M-3", "old_state": "", "new_state": "",
        "expected_version": "", "actual_version": ""}
    assert run(ctx, "naive_breaks", invariant="CLOCK_MONOTONIC") == Like(False, "holds", {
        "others": "NO_STATE_REGRESSION, EFFECT_AT_MOST_ONCE"})


def test_opened_witness_takes_a_message_of_a_witness_that_names_a_list_and_says_what_was_opened():
    progress = ProgressStore.open(None)
    ctx = ctx_of(happy(), progress=progress)
    ctx.invariants = lambda: [_broken("NO_STATE_REGRESSION", {"message_ids": ["M-3"], "problem": "went back"})]
    inv = "NO_STATE_REGRESSION"
    assert run(ctx, "opened_witness", invariant=inv, problem="went back") == Like(False, "not-opened", {
        "name": inv, "opened": "nothing", "task_id": ""})
    progress.record_action(LAB, "open-detail", {"message_id": "M-1"})
    progress.record_action(LAB, "open-detail", {"message_id": "M-2", "delivery_id": 2})
    assert run(ctx, "opened_witness", invariant=inv) == Like(False, "not-opened", {
        "opened": "M-1, M-2 (delivery #2)", "task_id": ""})
    progress.record_action(LAB, "open-detail", {"message_id": "M-3", "delivery_id": 3})
    assert run(ctx, "opened_witness", invariant=inv) == Like(True, "met", {
        "name": inv, "message_id": "M-3", "witness": "M-3", "task_id": "", "delivery_id": 3})


def test_opened_names_no_message_or_type_an_action_did_not_record():
    store = happy(upto=1)
    deliver(store, env("X-9", "T-9", "researcher", "task_result", {"status": "failed", "lease_version": 1},
                       "R-1:T-9:x"))  # refused, E_UNKNOWN_TASK: it left no task in any state
    progress = ProgressStore.open(None)
    ctx = ctx_of(store, progress=progress)
    progress.record_action(LAB, "open-conversation", {})
    assert run(ctx, "opened", what="conversation") == Like(True, "met", {"message_id": "", "type": "",
                                                                          "recipient": ""})
    progress.record_action(LAB, "open-detail", {"message_id": "M-1"})
    assert run(ctx, "opened", what="detail", type="ack") == Like(False, "other", {"message_id": "M-1", "type": "",
                                                                                  "recipient": "researcher"})
    progress.record_action(LAB, "open-detail", {"message_id": "X-9", "type": "task_result"})
    assert run(ctx, "opened", what="detail", decision="rejected") == Like(True, "met", {
        "message_id": "X-9", "decision": "rejected", "state": "", "task_id": "T-9"})


def test_reviewed_names_no_state_for_a_decision_that_left_none_and_reads_only_refusals():
    store = happy(upto=1)
    deliver(store, env("V-9", "T-9", "reviewer", "review_decision", {"decision": "ready"}, "R-1:T-9:r"))
    progress = ProgressStore.open(None)
    ctx = ctx_of(store, progress=progress)
    assert run(ctx, "reviewed") == Like(False, "other-decision", {"decision": "rejected", "state": "",
                                                                  "task_id": "T-9"})
    progress.record_action(LAB, "reconcile-refused", {"code": "E_STALE_VERSION", "reason": "stale", "task_id": "T-1"})
    progress.record_action(LAB, "visit", {"seq": 3})  # another kind of action, later
    assert run(ctx, "reviewed") == Like(False, "refused", {"code": "E_STALE_VERSION", "task_id": "T-1"})


def test_trace_names_no_message_or_sender_for_an_error_about_the_whole_trace(monkeypatch):
    import dataclasses

    import sim.protocol.trace as trace_mod

    real = trace_mod.validate
    whole = trace_mod.Finding("E_DUPLICATE_PARTICIPANT", None, "/participants/1/ref", "a participant twice")
    monkeypatch.setattr(trace_mod, "validate", lambda t: dataclasses.replace(real(t), valid=False, errors=(whole,)))
    assert run(ctx_of(happy()), "trace", code="E_DUPLICATE_PARTICIPANT") == Like(True, "met", {
        "code": "E_DUPLICATE_PARTICIPANT", "message_id": "", "sender": ""})
