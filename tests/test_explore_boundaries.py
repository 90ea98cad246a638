"""explore's decisions at their edges (issue 48, part 1; bugs planted by hand in sim/explore.py): what it
refuses, the search's depth, which invariant it reports. The tiny story, a few states, no timing."""

from __future__ import annotations

import pytest

from sim.errors import InputError
from sim.explore import explore
from tests.test_explore import TINY, _cli


@pytest.mark.parametrize("depth", [0, -1])
def test_a_search_of_no_depth_is_refused(depth, capsys):
    with pytest.raises(InputError) as e:
        explore(TINY, depth=depth)
    assert e.value.code == "E_USAGE" and "--depth must be at least 1" in str(e.value)
    code, _out, err = _cli(capsys, "explore", "publish-report", "--depth", str(depth))
    assert code == 2 and "'--depth'" in err and err.startswith("error: E_USAGE")


def test_a_search_of_depth_1_explores_one_delivery():
    r = explore(TINY, depth=1)
    assert r.depth_reached == 1 and not r.exhausted and r.found is None and r.transitions >= 1


def test_a_fault_is_placed_anywhere_only_on_the_types_it_can_touch():
    from types import SimpleNamespace

    from sim.explore import eligible
    from sim.faults import REGISTRY

    types = ("task_request", "task_started", "task_result", "ack", "fence")
    limited = [n for n, f in REGISTRY.items() if f.only]
    assert "late-failure" in limited and "crash" in limited
    for name in limited:
        for t in types:
            assert eligible(name, SimpleNamespace(type=t), anywhere=True) == (t in REGISTRY[name].only), (name, t)
    assert all(eligible("duplicate", SimpleNamespace(type=t), anywhere=True) for t in types)


def test_a_rate_is_refused_and_a_message_id_a_type_or_a_name_taken():
    from sim.explore import explore_args

    with pytest.raises(InputError) as e:
        explore_args(["duplicate", "late-failure:0.5"])
    assert e.value.code == "E_USAGE" and "late-failure:0.5 is a rate" in str(e.value)
    explore_args(["duplicate", "duplicate:task_result", "late-failure:M-3"])  # no refusal


def test_a_type_the_run_never_sends_is_refused_as_run_refuses_it():
    from sim.explore import refuse_unmatched

    with pytest.raises(InputError) as e:
        refuse_unmatched(TINY, "safe", None, ["duplicate:cancel"])
    assert e.value.code == "E_FAULT_NO_MATCH"
    with pytest.raises(InputError) as e:
        refuse_unmatched(TINY, "safe", None, ["duplicate:M-99"])
    assert e.value.code == "E_FAULT_NO_MATCH"
    refuse_unmatched(TINY, "safe", None, ["duplicate:task_result", "duplicate"])  # sent: no refusal


def test_each_fault_is_placed_at_most_once_and_named_once_on_every_path():
    """Anywhere: a duplicate may hit the request, the start or the result, but only one of them."""
    from sim.explore import placed_faults, settle, starts, successors

    level, names_seen = list(starts(TINY, policy="safe", faults=["duplicate", "late-failure"], place="any")), set()
    for _ in range(3):
        nxt = []
        for node in level:
            for child in successors(node):
                placed = placed_faults(child.run)
                names = [p.split(":", 1)[0] for p in placed]
                assert len(names) == len(set(names)) and len(placed) == len(set(placed)), placed
                names_seen.update(names)
                nxt.append(settle(child))
        level = [n for n in nxt if not n.ended]
    assert names_seen == {"duplicate", "late-failure"}


def test_a_fault_that_fired_twice_on_one_message_is_named_once_where_it_first_fired():
    """A counterexample's faults are placements, each named once: a message sent again under its own id (as
    a session resends it) meets its fault again, and a placement written twice would be placed twice when
    the counterexample runs. Explore runs without the session, so the recorder is given the repeat here."""
    from types import SimpleNamespace

    from sim.explore import placed_faults

    fired = [("duplicate", "M-6"), ("late-failure:M-8", "M-8"), ("duplicate:M-6", "M-6"), ("late-failure", "M-8")]
    run = SimpleNamespace(bus=SimpleNamespace(_record=SimpleNamespace(placed=fired)))
    assert placed_faults(run) == ("duplicate:M-6", "late-failure:M-8")


def test_the_break_reported_is_the_first_invariant_broken_in_the_registrys_order():
    from sim.explore import counterexample
    from sim.invariants import STATE_INVARIANTS, check
    from sim.runner import run_scenario

    r = explore(TINY, policy="naive", faults=["late-failure"], depth=8)  # (two break at once: a regression, a move)
    assert r.found is not None and len(r.found.broken) == 2
    store = run_scenario(counterexample(TINY, "naive", r.found.path, r.found.faults), policy="naive")
    try:
        broken = [x.name for x in check(store, only=frozenset(STATE_INVARIANTS)) if not x.ok]
    finally:
        store.close()
    assert list(r.found.broken) == broken and r.found.invariant == broken[0]


@pytest.mark.parametrize("rounds", [3, 5])
def test_no_state_of_the_search_goes_past_the_runs_last_round(rounds):
    import dataclasses

    from sim.explore import settle, starts, successors

    short = dataclasses.replace(TINY, settings=dataclasses.replace(TINY.settings, max_rounds=rounds))
    level, seen = list(starts(short, policy="safe", faults=[])), 0
    for _ in range(6):
        nxt = []
        for node in level:
            assert node.run.now <= rounds
            for child in successors(node):
                settle(child)
                seen += 1
                assert child.run.now <= rounds, (child.run.now, rounds)
                nxt.append(child)
        level = [n for n in nxt if not n.ended]
    assert seen and not level  # the run ended by its last round in every order
