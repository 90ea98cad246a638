"""A store opened on a run part-way through numbers what comes next as the run itself would: the next
intent's arrival follows the newest arrival handed out, also when a policy that does not deduplicate
recorded a (key, digest) again (its row keeps the first arrival; the rows alone once gave the second
arrival's number out twice after a reopen, which explore's model check found)."""

from __future__ import annotations

import pytest

from sim.live import LiveRun
from sim.scenario import load_scenario
from sim.store import Store


@pytest.mark.parametrize("policy", ["naive", "safe"])
@pytest.mark.parametrize("faults", [["duplicate", "crash"], ["duplicate", "late-failure"]])
def test_a_reopened_run_numbers_the_next_arrival_and_delivery_as_the_running_one(tmp_path, policy, faults):
    db = tmp_path / "run.db"
    run = LiveRun(load_scenario("publish-report"), policy=policy, seed=1, faults=faults, db=db)
    differ = []
    try:
        while run.step() is not None:
            with Store.open(db, readonly=True) as other:
                got = (other.next_arrival(), other._next_delivery, other._tick)
            want = (run.store.next_arrival(), run.store._next_delivery, run.store._tick)
            if got != want:
                differ.append((run.store.last_delivery(), got, want))
    finally:
        run.close()
    assert not differ, differ
