"""What a run's ``[[gather]]`` reduction shows at its boundaries (issue 48, part 1: bugs planted by hand in
sim/gathers.py, tests/gathers_versions_planted.py): the deadline round exactly (a reply at the deadline
counts, one a round later does not, the gather is reduced the round after), a quorum one short, the order
results were taken in, a member's first accepted result (a retry, a refused envelope), and one reduction
per gather. The gathers story (lab 14): requests delivered at round 2, results at round 6, the delayed
T-4 and T-7 results at round 14. Seeded runs: nothing here depends on timing."""

import dataclasses

import pytest

from sim.invariants import check
from sim.runner import run_scenario
from sim.scenario import load_scenario


def _run(keep=("g-first",), policy="safe", faults=None, **change):
    sc = load_scenario("gathers")
    gathers = tuple(dataclasses.replace(g, **change) for g in sc.gathers if g.id in keep)
    sc = dataclasses.replace(sc, gathers=gathers, **({} if faults is None else {"faults": tuple(faults)}))
    store = run_scenario(sc, policy=policy, seed=0)
    reduced = [e for e in store.events() if e["type"] == "gather_reduced"]
    return store, reduced


def _senders(e):
    return [c["sender"] for c in e["data"]["contributions"]]


def test_the_shipped_story_waits_for_every_member_and_takes_results_in_delivery_order():
    store, (e,) = _run()  # shipped faults: T-4's result delayed to round 14
    try:
        assert _senders(e) == ["researcher-5", "researcher-6", "researcher-4"]
        assert e["data"]["status"] == "complete" and e["data"]["selected"] == "M-23"  # supplied order: T-5 first
        assert e["message_id"] == "M-22"  # the result that completed it: the last one taken
        assert all(r.ok for r in check(store))
    finally:
        store.close()


@pytest.mark.parametrize("deadline, senders, tick", [
    (12, ["researcher-5", "researcher-6", "researcher-4"], 15),  # T-4's reply at round 14 = 2 + 12: in time
    (11, ["researcher-5", "researcher-6"], 14),  # round 14 is past 2 + 11: reduced then, T-4's reply late
])
def test_a_gather_is_reduced_the_round_after_its_deadline_and_a_reply_after_it_does_not_count(deadline, senders, tick):
    store, reduced = _run(deadline=deadline)
    try:
        (e,) = reduced  # reduced once, never again when the late reply arrives
        assert _senders(e) == senders and e["tick"] == tick
        assert e["data"]["status"] == "complete"
        assert all(r.ok for r in check(store))
    finally:
        store.close()


def test_a_quorum_one_short_of_its_threshold_is_partial():
    store, (e,) = _run(keep=("g-review",), faults=(), threshold=3)  # two reject, one accept: 2 < 3
    try:
        assert e["data"]["status"] == "partial"
        assert all(r.ok for r in check(store))
    finally:
        store.close()


def test_naive_majority_answers_with_the_most_common_vote():
    store, (e,) = _run(keep=("g-review",), policy="naive", faults=())
    try:
        assert e["data"]["value"] == "reject" and e["data"]["dissent"] == []
        assert not all(r.ok for r in check(store))  # DISSENT_KEPT says what it dropped
    finally:
        store.close()


def test_a_member_contributes_its_first_accepted_result_a_retry_is_no_success():
    store, (e,) = _run(faults=("transient:M-23",))  # T-5's first result says retry; its second succeeds
    try:
        by = {c["sender"]: c for c in e["data"]["contributions"]}
        assert by["researcher-5"]["id"] == "M-23" and by["researcher-5"]["payload"]["success"] is False
        assert e["data"]["selected"] == "M-22"
    finally:
        store.close()


def test_naive_first_success_skips_a_retry_even_the_earliest_by_clock():
    store, (e,) = _run(policy="naive", faults=("transient:M-24",))  # researcher-6: the clock behind, says retry
    try:
        by = {c["id"]: c for c in e["data"]["contributions"]}
        assert by["M-24"]["payload"]["success"] is False
        assert e["data"]["selected"] != "M-24" and by[e["data"]["selected"]]["payload"]["success"] is True
    finally:
        store.close()


def test_a_refused_result_is_no_contribution_the_accepted_resend_is():
    store, (e,) = _run(faults=("new-major:M-23",))  # T-5's result in schema 2.0: refused, sent again as M-28
    try:
        assert [c["id"] for c in e["data"]["contributions"]] == ["M-22", "M-24", "M-28"]
    finally:
        store.close()


@pytest.mark.parametrize("deadline, status, tick", [(4, "complete", 13), (3, "blocked", 12)])
def test_a_refused_request_does_not_open_the_gather_the_accepted_one_does(deadline, status, tick):
    # T-4's request in a stale schema is refused at round 2 and sent again, accepted at round 8: the gather
    # opens at 8, so with a deadline of 4 its result at round 12 is in time; with 3 it is late
    store, (e,) = _run(faults=("stale-schema:M-4",), over=("T-4",), deadline=deadline)
    try:
        assert (e["data"]["status"], e["tick"]) == (status, tick)
        assert _senders(e) == (["researcher-4"] if status == "complete" else [])
    finally:
        store.close()


@pytest.mark.parametrize("deadline, status, ids, tick", [
    (4, "complete", ["M-22", "M-23", "M-24"], 7),  # results at round 6 = 2 + 4: at the deadline, counted
    (3, "blocked", [], 6),  # past 2 + 3 at round 6, before the results of that round: none
])
def test_a_reply_at_the_deadline_round_counts_while_its_member_is_still_open(deadline, status, ids, tick):
    # T-4's result at round 6 says retry: T-4 stays open, so the gather is reduced by its deadline, not
    # because every member settled; what arrived by the deadline round (inclusive) is what it takes
    store, (e,) = _run(faults=("transient:M-22",), deadline=deadline)
    try:
        assert (e["data"]["status"], e["tick"]) == (status, tick)
        assert [c["id"] for c in e["data"]["contributions"]] == ids
        if ids:
            assert e["data"]["selected"] == "M-23"  # T-4's retry is no success
    finally:
        store.close()
