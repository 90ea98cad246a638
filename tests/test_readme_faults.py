"""The README's fault table is a claim about runs: it lists every fault the kit has, and each invariant its
'naive breaks' column names is one the naive run of that fault breaks, while the safe run of it keeps every
invariant. The scenario is publish-report unless the row names another (`fan-out`, `reopened`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sim.faults import FAULTS
from sim.invariants import INVARIANTS, check
from sim.runner import run_scenario
from sim.scenario import load_scenario, scenario_names

README = Path(__file__).resolve().parent.parent / "README.md"


def _rows() -> dict[str, tuple[str, set[str]]]:
    """fault -> (its scenario, the invariants its 'naive breaks' cell names)."""
    text = README.read_text(encoding="utf-8")
    table = text[text.index("| fault | what the transport does | safe | naive breaks |"):]
    out = {}
    for line in table.splitlines()[2:]:
        if not line.startswith("| `"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        name = cells[0].strip("`")
        named = [s for s in scenario_names() if f"`{s}`" in cells[1]]
        out[name] = (named[0] if named else "publish-report", set(re.findall(r"\b[A-Z][A-Z_]+[A-Z]\b", cells[3]))
                     & set(INVARIANTS))
    return out


ROWS = _rows()


def test_the_table_lists_every_fault_once():
    assert sorted(ROWS) == sorted(FAULTS)


@pytest.mark.parametrize("fault", sorted(ROWS))
def test_what_the_row_says_naive_breaks_it_breaks_and_safe_keeps_everything(fault):
    scenario, named = ROWS[fault]
    naive = run_scenario(load_scenario(scenario), policy="naive", faults=[fault])
    safe = run_scenario(load_scenario(scenario), policy="safe", faults=[fault])
    try:
        broken = {r.name for r in check(naive) if not r.ok}
        assert named <= broken, (fault, named - broken)
        assert all(r.ok for r in check(safe)), [r.name for r in check(safe) if not r.ok]
    finally:
        naive.close()
        safe.close()
