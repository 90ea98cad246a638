"""LiveRun (the simulator stepped by hand) and Timeline (state as of any event)."""

from __future__ import annotations

import pytest

from sim.errors import InputError
from sim.invariants import check
from sim.live import INJECTABLE, LiveRun, Timeline
from sim.replay import rebuild
from sim.runner import run_scenario
from sim.scenario import load_scenario
from sim.store import EventDraft, Store


@pytest.fixture
def sc():
    return load_scenario("publish-report")


def _states(store):
    return {t["task_id"]: t["state"] for t in store.tasks()}


@pytest.mark.parametrize("faults", [(), ("duplicate",), ("late-failure",), ("crash",), ("conflicting-digest",)])
def test_stepping_a_live_run_reaches_the_batch_runs_state(sc, faults):
    live = LiveRun(sc, faults=faults)
    n = live.run_to_end()
    batch = run_scenario(sc, faults=faults)
    try:
        assert n == len(batch.deliveries()) == live.delivered
        assert live.store.state_digest() == batch.state_digest()
        assert live.finished and live.step() is None
    finally:
        batch.close()
        live.close()


def test_a_live_run_on_a_file_is_an_ordinary_run(sc, tmp_path):
    live = LiveRun(sc, db=tmp_path / "live.db")
    live.run_to_end()
    digest = live.store.state_digest()
    live.close()
    with Store.open(tmp_path / "live.db", readonly=True) as s:
        assert s.state_digest() == digest
        assert s.get_meta("scenario") == "publish-report" and s.get_meta("rounds")


def _step(live, n):
    for _ in range(n):
        assert live.step() is not None


def test_inject_duplicate_conflict_and_late_failure_on_a_delivered_message(sc):
    live = LiveRun(sc)
    _step(live, 4)  # M-3, the researcher's result, is delivered
    assert "M-3 will be delivered again" in live.inject("duplicate", "M-3")
    out = live.step()
    assert (out.message_id, out.decision) == ("M-3", "duplicate")
    said = live.inject("late-failure", "M-3")
    late_id = said.split()[0]
    outs = []
    while (o := live.step()) is not None:
        outs.append(o)
    late = next(o for o in outs if o.message_id == late_id)
    assert late.decision == "late" and _states(live.store)["T-1"] == "succeeded"
    assert all(r.ok for r in check(live.store))
    # each by-hand fault is in the log as what the transport did
    faults = [e["data"] for e in live.store.events() if e["type"] == "fault_injected"]
    assert [(f["fault"], f["selector"]) for f in faults] == [("duplicate", "by hand"), ("late-failure", "by hand")]
    live.close()


def test_a_conflicting_digest_by_hand_freezes_the_task_and_what_rests_on_it_and_reviewers_release_both(sc):
    live = LiveRun(sc)
    _step(live, 4)
    twin = live.inject("conflicting-digest", "M-3").split()[0]
    live.run_to_end()
    assert _states(live.store)["T-1"] == "needs_review"
    conflict = [d for d in live.store.deliveries() if d["message_id"] == twin]
    assert conflict[0]["decision"] == "conflict"
    # the twin is a message of its own, under the sender's next number: the conversation stays in order,
    # and the contradiction is the key's
    seqs = {m["message_id"]: m["sender_seq"] for m in live.store.messages()}
    assert seqs[twin] == seqs["M-3"] + 1
    with pytest.raises(Exception) as e:
        live.reconcile("T-1", "ready", ["M-99"])
    assert e.value.code == "E_EVIDENCE_UNRESOLVED"
    assert live.reconcile("T-1", "ready", ["M-3", twin]).decision == "accepted"
    # the reviewer's decision was made by hand: no design sends it again (a resend, a tool failure...)
    decision = next(d["message_id"] for d in live.store.deliveries() if d["type"] == "review_decision")
    for fault in sorted(f for f in INJECTABLE if f != "duplicate"):
        with pytest.raises(Exception) as e:
            live.inject(fault, decision)
        assert e.value.code == "E_FAULT_NOT_APPLICABLE" and "made by hand" in str(e.value), fault
    live.run_to_end()
    tasks = {t["task_id"]: t for t in live.store.tasks()}
    assert tasks["T-1"]["state"] == "succeeded" and tasks["T-1"]["lease_version"] == 2
    # T-2 was assigned from T-1's first table before the conflict: its success rested on an
    # untrusted input, so it was frozen too and published nothing; a reviewer releases it.
    assert tasks["T-2"]["state"] == "needs_review" and live.store.effects() == []
    held = next(e for e in live.store.events() if e["type"] == "input_untrusted")
    assert live.reconcile("T-2", "ready", [held["message_id"]]).decision == "accepted"
    live.run_to_end()
    assert {t["task_id"]: t["state"] for t in live.store.tasks()}["T-2"] == "succeeded"
    assert [e["effect_key"] for e in live.store.effects()] == ["publish:R-1:T-2"]
    assert all(r.ok for r in check(live.store))
    live.close()


def test_crash_by_hand_expires_the_lease_and_fences_the_old_body(sc):
    live = LiveRun(sc)
    with pytest.raises(InputError) as e:
        live.crash("researcher")  # nothing started yet
    assert e.value.code == "E_NOTHING_TO_CRASH"
    with pytest.raises(InputError) as e:
        live.crash("nobody")
    assert e.value.code == "E_UNKNOWN_WORKER"
    _step(live, 2)  # the researcher holds lease v1 of T-1
    assert "lease v1 of T-1" in live.crash("researcher")
    live.run_to_end()
    tasks = {t["task_id"]: t for t in live.store.tasks()}
    assert tasks["T-1"]["state"] == "succeeded" and tasks["T-1"]["lease_version"] == 2
    assert any(d["code"] == "E_STALE_LEASE" for d in live.store.deliveries())
    assert all(r.ok for r in check(live.store))
    live.close()


def test_inject_refuses_what_does_not_apply(sc):
    live = LiveRun(sc)
    _step(live, 1)
    for fault, msg, code in [
        ("late-failure", "M-1", "E_FAULT_NOT_APPLICABLE"),
        ("duplicate", "M-42", "E_UNKNOWN_MESSAGE"),
        ("drop", "M-1", "E_UNKNOWN_FAULT"),
    ]:
        with pytest.raises(InputError) as e:
            live.inject(fault, msg)
        assert e.value.code == code
    live.close()


def _prefix_store(store, upto):
    """The reference: fold events 1..upto into a fresh store by hand."""
    fresh = Store.create(None, start_time=store.start_time, empty=True)
    with fresh.transaction():
        for ev in store.events():
            if ev["seq"] > upto:
                break
            fresh.advance(to=max(fresh.tick, ev["tick"]))
            fresh.append_event(EventDraft(ev["type"], ev["task_id"], ev["message_id"], ev["data"]), delivery_id=ev["delivery_id"])
    return fresh


def test_timeline_gives_state_as_of_every_event_in_any_order(sc):
    store = run_scenario(sc, faults=["conflicting-digest"])
    last = store.last_event()
    tl = Timeline(store, every=5)  # small checkpoints: backward moves restart from them
    order = [last, 3, 17, last - 1, 0, 9, 10, 11, 4, last]
    for seq in order:
        got = tl.at(seq).state_digest()
        ref = _prefix_store(store, seq)
        assert got == ref.state_digest(), seq
        ref.close()
    assert tl.at(last).state_digest() == store.state_digest() == rebuild(store).state_digest()
    assert tl.cost(last) == 0 and tl.cost(2) <= 5
    tl.close()
    store.close()
