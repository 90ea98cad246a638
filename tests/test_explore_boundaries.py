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
