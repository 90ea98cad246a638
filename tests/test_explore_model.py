"""The pure in-memory model of the authoritative state (sim/model.py, no SQLite) and the real engine agree
on every state explore visits; a break explore finds is confirmed by the engine running it from the start."""

from __future__ import annotations

import dataclasses

import pytest

from sim.explore import NotConfirmed, confirm, explore, settle, starts, successors
from sim.model import Model, NotModelled, agreement, ops_of, projection, store_projection
from sim.policy import NAIVE, SAFE, Policy, get_policy
from sim.scenario import load_scenario
from tests.test_explore import TINY

TWO = ["duplicate", "late-failure"]


@pytest.mark.parametrize("policy", ["safe", "naive"])
@pytest.mark.parametrize("story, depth", [("tiny", 5), ("publish-report", 6)])
def test_the_model_and_the_engine_agree_on_every_state_explore_visits(story, depth, policy):
    """Every state (every order and fault placement, merged by fingerprint) to the depth: the model, driven
    by the same inputs, has the engine's tasks, states, versions, leases, budgets, intents (dedup records
    and decisions), effects, transitions and each delivery's decision. Under naive nothing is judged, so
    the search goes on past the breaks."""
    sc = TINY if story == "tiny" else load_scenario(story)
    result = explore(sc, policy=policy, faults=TWO, depth=depth, check_model=True,
                     invariants=() if policy == "naive" else None)
    assert result.found is None and result.model_checked == result.transitions + 1 > 20


@pytest.mark.slow
@pytest.mark.parametrize("policy, depth", [("safe", 30), ("naive", 8)])
def test_the_model_and_the_engine_agree_on_the_whole_tiny_search(policy, depth):
    result = explore(TINY, policy=policy, faults=TWO, depth=depth, check_model=True,
                     invariants=() if policy == "naive" else None)
    assert result.model_checked == result.transitions + 1 > 900
    if policy == "safe":
        assert result.exhausted and result.found is None


def test_the_model_decides_each_lessons_break_as_the_engine_does():
    """Under naive the model, on its own, publishes twice (duplicate) and lets a late failure regress a
    succeeded task: the same decisions the engine made on the counterexample's path."""
    story = load_scenario("publish-report")
    for fault in ("duplicate", "late-failure"):
        result = explore(story, policy="naive", faults=[fault], depth=12, check_model=True)
        assert result.found is not None and result.confirmed
    level = list(starts(TINY, policy="naive", faults=["duplicate"]))
    twice = None
    for _ in range(4):
        nxt = []
        for node in level:
            for child in successors(node):
                if [s.message_id for s in child.path][-2:] == ["M-3", "M-3"] and twice is None:
                    model = Model(NAIVE)
                    for op in ops_of(child.run.store)[0]:
                        model.apply(op)
                    twice = (model, child.run.store.copy())
                nxt.append(settle(child))
        level = nxt
    model, store = twice
    try:
        assert len(model.effects) == 2 and [d[1] for d in model.deliveries][-2:] == ["accepted", "accepted"]
        assert agreement(model, store) == [] and projection(model) == store_projection(store)
    finally:
        store.close()


def test_a_disagreement_is_reported_part_by_part():
    story = load_scenario("publish-report")
    node = next(starts(story, policy="safe", faults=[]))
    child = next(successors(node))
    model = Model(SAFE)
    for op in ops_of(child.run.store)[0]:
        model.apply(op)
    assert agreement(model, child.run.store) == []
    model.tasks["T-1"]["state_version"] += 1
    differ = agreement(model, child.run.store)
    assert len(differ) == 1 and differ[0].startswith("tasks: model ")


def test_the_model_refuses_what_it_does_not_cover():
    with pytest.raises(NotModelled):
        Model(dataclasses.replace(SAFE, effect_rule=lambda result, delivery_id: "k"))
    with pytest.raises(NotModelled):
        Model(Policy("student", lambda *a, **k: None, True, "a plugged-in intake"))
    assert Model(get_policy("naive")).policy is NAIVE


def test_a_break_the_engine_does_not_reach_again_is_not_reported():
    story = load_scenario("publish-report")
    result = explore(story, policy="naive", faults=["late-failure"], depth=8)
    assert result.found is not None and result.confirmed
    with pytest.raises(NotConfirmed):
        confirm(story, "naive", result.found, "sha256:" + "0" * 64)
    shorter = dataclasses.replace(result.found, path=result.found.path[:-1])
    with pytest.raises(NotConfirmed):
        confirm(story, "naive", shorter, "sha256:" + "0" * 64)


def test_bench_explore_reports_the_engine_the_model_and_the_floor(capsys):
    from sim.cli import main
    from sim.explore import bench

    figures = bench(TINY, depth=4)
    assert figures["model_checked"] == figures["transitions"] + 1 and figures["model_per_s"] > 0
    assert figures["project_per_s"] > 0 and figures["checked_per_s"] > 0 and figures["floor_per_s"] > 0
    with pytest.raises(SystemExit) as e:
        main(["bench", "explore", "publish-report", "--depth", "3"])
    out = capsys.readouterr().out
    assert e.value.code in (0, None)
    assert "(protolab: the engine)" in out and "model alone" in out and "floor" in out
