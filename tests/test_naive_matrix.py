"""Every invariant can be watched breaking: under the naive policy, some scenario and one planted
fault break it (and the safe policy keeps it on the same run). An invariant no naive run can break
teaches nothing in a workshop; one that declares ``never_under_naive=`` (today CLOCK_MONOTONIC, the
reason kept with it in sim/invariants.py) is a known gap, and the test fails as soon as it starts
breaking (so it moves to ``broken_by=``).

Both lists are read from the registry: each invariant declares ``broken_by=(scenario, fault)``, the
naive run that breaks it, or ``never_under_naive=`` why none does; nothing here is written by hand."""

import pytest

from sim.faults import FAULTS, parse_fault
from sim.faults import REGISTRY as FAULT_REGISTRY
from sim.invariants import INVARIANTS, REGISTRY, check
from sim.runner import run_scenario
from sim.scenario import load_scenario, scenario_names


def breaks() -> dict[str, tuple[str, str]]:
    """invariant -> (scenario, fault) of a naive run that breaks it, as the registry declares."""
    return {name: inv.broken_by for name, inv in REGISTRY.items() if inv.broken_by is not None}


def never_under_naive() -> dict[str, str]:
    """invariant -> why no naive run breaks it (a known gap)."""
    return {name: inv.never_under_naive for name, inv in REGISTRY.items() if inv.never_under_naive is not None}


def test_every_invariant_is_either_broken_by_a_naive_run_or_a_named_gap():
    assert set(breaks()) | set(never_under_naive()) == set(INVARIANTS)
    assert not set(breaks()) & set(never_under_naive())
    assert all(why.strip() for why in never_under_naive().values())


@pytest.mark.parametrize("name", sorted(breaks()))
def test_the_declared_run_names_a_shipped_scenario_and_a_fault_the_kit_has(name):
    scenario, fault = breaks()[name]
    assert scenario in scenario_names(), scenario
    parse_fault(fault)  # refuses an unknown fault or a malformed selector


def _story(fault: str) -> str:
    """The scenario a fault's README row tells (publish-report unless its story names another)."""
    named = [s for s in scenario_names() if f"`{s}`" in FAULT_REGISTRY[fault].story]
    return named[0] if named else "publish-report"


@pytest.mark.parametrize("name", sorted(n for n, (scenario, fault) in breaks().items()
                                        if fault in FAULT_REGISTRY and scenario == _story(fault)))
def test_the_fault_that_breaks_it_on_its_own_story_says_so_in_its_readme_row(name):
    # broken_by= names the run; the fault's naive_breaks= (its README row) must name the invariant too
    fault = breaks()[name][1]
    assert name in FAULT_REGISTRY[fault].naive_breaks, f"add {name!r} to naive_breaks= of @fault({fault!r})"


@pytest.mark.parametrize("name", sorted(breaks()))
def test_the_naive_run_breaks_the_invariant_and_the_safe_run_keeps_it(name):
    scenario, fault = breaks()[name]
    naive = run_scenario(load_scenario(scenario), policy="naive", faults=[fault], seed=0)
    assert not {r.name: r for r in check(naive)}[name].ok
    safe = run_scenario(load_scenario(scenario), policy="safe", faults=[fault], seed=0)
    assert {r.name: r for r in check(safe)}[name].ok


@pytest.mark.parametrize("name", sorted(never_under_naive()))
def test_a_named_gap_is_still_a_gap_on_the_default_story(name):
    # Were one of these to break under some fault, give it broken_by= instead of never_under_naive=.
    for fault in FAULTS:  # every fault the kit has (one aimed at another scenario's message just finds none here)
        naive = run_scenario(load_scenario("publish-report"), policy="naive", faults=[fault], seed=0,
                             strict_faults=False)
        assert {r.name: r for r in check(naive)}[name].ok, fault
