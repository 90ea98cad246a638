"""The safe runtime's session (sim.session): each sender's messages reach intake in sequence.

Under naive a drop, a delay or a reorder reaches intake as it happens and the exported trace has a gap
(E_SEQUENCE_GAP); under safe the session parks what is early and sends again what was lost, and the
export of the same run holds."""

from __future__ import annotations

from collections import Counter

import pytest

from sim.conversation import export_trace
from sim.envelope import build_envelope
from sim.protocol.trace import validate
from sim.runner import run_scenario
from sim.scenario import load_scenario
from sim.session import Session


def _env(mid: str, sender: str = "researcher") -> object:
    return build_envelope(message_id=mid, trace_id="R-1", task_id="T-1", sender=sender, recipient="manager",
                          type="ack", payload={"of": "M-1"}, idempotency_key=f"k-{mid}",
                          created_at="2026-01-01T00:00:00Z")


def _deliver(session: Session, arrivals, meta, now: int) -> list[str]:
    out = []
    for env in session.order(arrivals, meta.get, now):
        out.append(env.message_id)
        meta.pop(env.message_id, None)  # the run forgets a send's number at its first delivery
    return out


def test_a_message_ahead_of_its_senders_next_number_waits_for_the_missing_one_then_follows_it():
    s = Session(window=5)
    a, b, c = _env("M-1"), _env("M-2"), _env("M-3")
    meta = {"M-1": (1, 1), "M-2": (2, 1), "M-3": (3, 1)}
    for e in (a, b, c):
        s.track(e)
    assert _deliver(s, [c, b], meta, now=1) == []  # 3 and 2 before 1: both wait
    assert s.busy() and s.tasks() == {"T-1"}
    assert _deliver(s, [a], meta, now=2) == ["M-1", "M-2", "M-3"]  # in number order, not arrival order
    assert not s.busy() and s.next == {("researcher", 1): 4}
    assert s.unsent == {}


def test_each_body_is_its_own_sequence():
    s = Session(window=5)
    meta = {"M-1": (1, 1), "W-1": (1, 1), "M-2": (2, 1), "Z-1": (1, 2)}
    got = _deliver(s, [_env("M-2"), _env("W-1", "writer"), _env("Z-1")], meta, now=1)
    # the writer's first and the researcher's second body's first go; the researcher's 2 waits for its 1
    assert got == ["W-1", "Z-1"]
    assert _deliver(s, [_env("M-1")], meta, now=2) == ["M-1", "M-2"]


def test_a_number_below_the_next_one_and_an_unnumbered_delivery_go_through_for_the_rules_to_judge():
    s = Session(window=5)
    meta = {"M-1": (1, 1), "M-2": (2, 1), "M-9": (1, 1)}
    assert _deliver(s, [_env("M-1"), _env("M-2")], meta, now=1) == ["M-1", "M-2"]
    # a sequence that went back (rewind, a twin under the same number) and a second delivery (no number)
    assert _deliver(s, [_env("M-9"), _env("M-1")], meta, now=2) == ["M-9", "M-1"]
    assert s.next[("researcher", 1)] == 3


def test_a_lost_number_is_sent_again_unchanged_only_after_the_window():
    s = Session(window=5)
    lost, later = _env("M-1"), _env("M-2")
    meta = {"M-1": (1, 1), "M-2": (2, 1)}
    s.track(lost)  # sent, then dropped by the network: never arrives
    s.track(later)
    assert _deliver(s, [later], meta, now=3) == []
    for now in range(3, 8):  # a late message may still be on its way: nothing is sent twice
        assert s.overdue(now, meta.get) == ([], [])
    again, released = s.overdue(8, meta.get)
    assert again == [lost] and released == [] and list(s.retransmitted) == ["M-1"] and s.resent == 1
    assert again[0] is lost  # the same envelope, under the same number
    assert s.overdue(9, meta.get) == ([], [])  # its wait starts again: not sent every round
    assert _deliver(s, [lost], meta, now=9) == ["M-1", "M-2"]
    assert not s.busy()


def test_a_number_nobody_can_send_again_is_given_up_after_a_second_window():
    s = Session(window=4)
    meta = {"M-2": (2, 1), "M-3": (3, 1)}
    assert _deliver(s, [_env("M-3"), _env("M-2")], meta, now=1) == []
    assert s.overdue(5, meta.get) == ([], [])  # number 1 was never sent: nothing to send again
    again, released = s.overdue(9, meta.get)
    assert again == [] and [e.message_id for e in released] == ["M-2", "M-3"]
    assert not s.busy() and s.next[("researcher", 1)] == 4


def _codes(store) -> Counter:
    return Counter(f.code for f in validate(export_trace(store)).errors)


# (fan-out's first start is reordered behind another sender's message: no sender's order changes, no gap)
@pytest.mark.parametrize("scenario, fault", [(s, f) for s in ("publish-report", "fan-out", "sensitive-source", "flaky-tool")
                                             for f in ("drop", "delay", "reorder") if (s, f) != ("fan-out", "reorder")])
def test_a_gap_naive_lets_in_is_held_by_safe(scenario, fault):
    sc = load_scenario(scenario)
    naive = run_scenario(sc, policy="naive", faults=[fault])
    safe = run_scenario(sc, policy="safe", faults=[fault])
    try:
        assert _codes(naive)["E_SEQUENCE_GAP"] >= 1
        assert _codes(safe)["E_SEQUENCE_GAP"] == 0
        # a drop and a delay look alike to the receiver (a number missing behind a later one): sent again;
        # a reorder's held message arrives in the same round as the one that overtook it
        assert (len(safe.events_of_type("message_sent_again")) >= 1) == (fault in ("drop", "delay"))
        assert (len(safe.events_of_type("message_copy_dropped")) >= 1) == (fault == "delay")
        assert not naive.events_of_type("message_sent_again")
    finally:
        naive.close()
        safe.close()


def test_the_gathers_scenario_exports_a_valid_conversation_under_safe_despite_its_delay():
    store = run_scenario(load_scenario("gathers"), policy="safe")
    try:
        report = validate(export_trace(store))
        assert report.valid, report.codes
    finally:
        store.close()


def test_a_session_makes_the_same_run_byte_for_byte(tmp_path):
    sc = load_scenario("publish-report")
    dumps = []
    for i in range(2):
        store = run_scenario(sc, faults=["drop", "reorder"], seed=5, db=tmp_path / f"r{i}.db")
        store.close()
        dumps.append((tmp_path / f"r{i}.db").read_bytes())
    assert dumps[0] == dumps[1]


@pytest.mark.parametrize("fault", ["drop", "delay", "transient", "tool-failure"])
def test_a_retried_member_of_a_gather_contributes_once_under_safe(fault):
    # fan-out's draft gathers the research results: a retry the runtime recorded late, or a result that
    # asks for another attempt, is not a second contribution from that member
    store = run_scenario(load_scenario("fan-out"), policy="safe", faults=[fault])
    try:
        trace = export_trace(store)
        report = validate(trace)
        assert report.valid, report.codes
        members = Counter(m["sender"] for m in trace["messages"] if m["kind"] == "CONTRIBUTION")
        assert members and set(members.values()) == {1}
    finally:
        store.close()


def test_naive_takes_a_late_failure_as_a_second_contribution():
    store = run_scenario(load_scenario("fan-out"), policy="naive", faults=["late-failure"])
    try:
        assert _codes(store)["E_DUPLICATE_CONTRIBUTION"] == 1
    finally:
        store.close()


def test_two_messages_parked_under_one_number_follow_in_arrival_order_and_neither_is_lost():
    # a sender that numbered two messages alike (a twin under the same number) while both were early
    s = Session(window=5)
    meta = {"M-1": (1, 1), "T-1": (2, 1), "T-2": (2, 1), "M-3": (3, 1)}
    assert _deliver(s, [_env("M-3"), _env("T-1"), _env("T-2")], meta, now=1) == []
    assert _deliver(s, [_env("M-1")], meta, now=2) == ["M-1", "T-1", "T-2", "M-3"]
    assert not s.busy()


def test_every_number_missing_below_a_parked_one_is_sent_again_once_and_the_late_copy_is_dropped():
    s = Session(window=1)
    m1, m2, m3, m4 = (_env(f"M-{i}") for i in range(1, 5))
    meta = {"M-1": (1, 1), "M-2": (2, 1), "M-3": (3, 1), "M-4": (4, 1)}
    for e in (m1, m2, m3, m4):
        s.track(e)
    # 1 and 3 are late or lost; 2 and 4 arrive
    assert _deliver(s, [m2, m4], meta, now=1) == []
    again, released = s.overdue(2, meta.get)
    assert [e.message_id for e in again] == ["M-1", "M-3"] and released == []  # selective repeat
    assert s.overdue(3, meta.get) == ([], [])  # each once
    # the copies sent again land; then the late originals come after all: dropped, not delivered twice
    assert _deliver(s, [m1, m3], meta, now=3) == ["M-1", "M-2", "M-3", "M-4"]
    assert _deliver(s, [m3, m1], meta, now=9) == []
    assert [e.message_id for e in s.dropped] == ["M-3", "M-1"]
    # a redelivery the network makes of a message never sent again still reaches intake
    assert _deliver(s, [m2], meta, now=10) == ["M-2"]


def test_a_copy_sent_again_whose_original_was_lost_is_forgotten_once_taken():
    s = Session(window=1)
    meta = {"M-1": (1, 1), "M-2": (2, 1)}
    lost, later = _env("M-1"), _env("M-2")
    s.track(lost)
    assert _deliver(s, [later], meta, now=1) == []
    (again,), _ = s.overdue(2, meta.get)
    taken = list(s.order([again], meta.get, 3, on_the_way=lambda mid: False))
    assert [e.message_id for e in taken] == ["M-1", "M-2"]
    assert s._copies == {} and s.unsent == {}  # nothing kept of a message the network lost


def test_a_stress_run_with_drops_keeps_nothing_of_the_messages_it_sent_again():
    import dataclasses

    from sim.policy import get_policy
    from sim.runner import fault_specs, new_run

    sc = load_scenario("stress")
    sc = dataclasses.replace(sc, stress=dataclasses.replace(sc.stress, tasks=200))
    run = new_run(sc, get_policy("safe"), None, fault_specs(sc, ["drop:0.1"]), None)
    try:
        run.run()
        assert run.unfinished == 0 and run.session.resent > 20 and len(run.session.retransmitted) == min(run.session.resent, 1000)
        assert len(run.session._copies) == 0 and len(run.session.unsent) == 0 and not run.session.busy()
    finally:
        run.store.close()


def test_what_waits_is_said_in_a_few_words_for_the_status_line():
    s = Session(window=1)
    assert s.waiting_text() == ""
    meta = {"M-4": (3, 1), "M-5": (4, 1)}
    _deliver(s, [_env("M-4")], meta, now=1)
    assert s.waiting_text() == "M-4 waits for researcher #1"
    _deliver(s, [_env("M-5")], meta, now=1)
    assert s.waiting_text() == "2 messages wait in sequence"


@pytest.mark.parametrize("fault, code", [("drop", "E_SEQUENCE_GAP"), ("zombie", "E_STALE_GENERATION"),
                                         ("overshare", "E_AUDIENCE_LABEL"), ("afterthought", "E_POST_TERMINAL_MESSAGE")])
def test_compare_says_whose_conversation_validates(capsys, fault, code):
    import json

    from sim.cli import main

    with pytest.raises(SystemExit) as e:
        main(["compare", "publish-report", "-f", fault, "--json"])
    assert e.value.code in (0, None)
    out = json.loads(capsys.readouterr().out)
    assert out["safe"]["conversation"] == {"valid": True, "codes": [], "first": ""}
    naive = out["naive"]["conversation"]
    assert naive["valid"] is False and code in naive["codes"] and naive["first"].startswith(naive["codes"][0])
