"""A big run is judged a shard of tasks at a time (flat memory): the verdicts and witnesses must be
the ones the whole run gives, on runs where every kind of invariant breaks, whatever the shard size."""

from __future__ import annotations

import json

import pytest

from sim.faults import FAULTS
from sim.invariants import check
from sim.runner import run_scenario
from sim.scenario import load_scenario


def _verdicts(results) -> dict:
    return {r.name: (r.ok, sorted(json.dumps(w, sort_keys=True) for w in r.witnesses)) for r in results}


RUNS = [
    ("publish-report", "naive", ("duplicate", "late-failure", "conflicting-digest")),
    ("publish-report", "naive", ("late-conflict",)),
    ("publish-report", "naive", ("lost-evidence", "resend")),
    ("publish-report", "safe", ("late-conflict", "crash")),
    ("fan-out", "naive", ("conflicting-digest", "silent", "stale-schema")),
    ("fan-out", "safe", ("transient", "delay", "reorder")),
    ("sensitive-source", "naive", ()),
    ("stress", "naive", ()),
]


@pytest.mark.parametrize("scenario,policy,faults", RUNS, ids=lambda v: v if isinstance(v, str) else "+".join(v))
def test_judging_shard_by_shard_gives_the_whole_runs_verdicts(tmp_path, scenario, policy, faults):
    db = tmp_path / "run.db"
    run_scenario(load_scenario(scenario), policy=policy, faults=list(faults), db=db, strict_faults=False).close()
    from sim.store import Store

    with Store.open(str(db), readonly=True) as store:
        whole = _verdicts(check(store))
        for size in (1, 2, 7):
            assert _verdicts(check(store, shard_size=size)) == whole, size
    if policy == "naive" and scenario != "stress":
        assert any(not ok for ok, _ in whole.values())  # the comparison is not of empty verdicts


def test_the_runs_compared_break_every_invariant_that_can_break_under_naive_somewhere(tmp_path):
    from sim.store import Store

    broken = set()
    for scenario, policy, faults in RUNS:
        db = tmp_path / f"{scenario}-{policy}-{'+'.join(faults)}.db"
        run_scenario(load_scenario(scenario), policy=policy, faults=list(faults), db=db, strict_faults=False).close()
        with Store.open(str(db), readonly=True) as store:
            broken |= {r.name for r in check(store, shard_size=3) if not r.ok}
    assert {"EFFECT_AT_MOST_ONCE", "CONFLICT_FROZEN", "NO_EFFECT_FROM_UNTRUSTED", "EFFECT_HAS_EVIDENCE",
            "RESEND_DEDUPLICATED", "PAYLOAD_MINIMIZATION"} <= broken, broken


def test_a_run_over_the_threshold_is_sharded_and_progress_is_told(tmp_path, monkeypatch):
    import sim.invariants as inv
    from sim.store import Store

    db = tmp_path / "run.db"
    run_scenario(load_scenario("fan-out"), policy="naive", faults=["conflicting-digest"], db=db).close()
    seen = []
    with Store.open(str(db), readonly=True) as store:
        whole = _verdicts(check(store))
        monkeypatch.setattr(inv, "SHARD_AT", 0)
        monkeypatch.setattr(inv, "SHARD_SIZE", 2)
        assert _verdicts(check(store, progress=lambda done, total: seen.append((done, total)))) == whole
    assert seen and seen[-1][0] == seen[-1][1] and [d for d, _ in seen] == list(range(1, len(seen) + 1))
