"""Every witness in full: for each case of the invariants' contract, the whole verdict of every
invariant (ok, and each witness with all its fields) is what a reviewer read and accepted, kept in
``tests/data/witnesses/<INVARIANT>.json``, one file per invariant, keyed by the names of that
invariant's cases (a new invariant brings its own file). Each case keeps its own invariant's verdict and
every other invariant's that breaks on it; one not listed holds (ok, no witnesses).

The contract (``sim/contracts/invariants.py``) pins each verdict and the fields a case names; this
pins the rest of what ``protolab check`` prints, so a judge that names the wrong row, drops a field,
or breaks an invariant the case is not about is caught. After a deliberate change (or a new invariant),
rewrite the files with ``PROTOLAB_UPDATE_GOLDEN=1 pytest tests/test_invariant_witnesses.py`` and read the diff.
"""

import json
import os
from pathlib import Path

import pytest

from sim.contracts.invariants import CASES
from sim.invariants import INVARIANTS, check

GOLDEN = Path(__file__).parent / "data" / "witnesses"


def golden_file(invariant: str) -> Path:
    """The file holding the reviewed verdicts on ``invariant``'s contract cases."""
    return GOLDEN / f"{invariant}.json"


def _verdicts(case) -> dict:
    """Every invariant's verdict on ``case``: the case's own always, every other one that breaks on it (one
    that holds has no witnesses, so leaving it out says all there is: a new invariant that holds on the other
    invariants' cases changes no file but its own)."""
    store = case.build()
    try:
        return {r.name: {"ok": r.ok, "witnesses": json.loads(json.dumps(list(r.witnesses), default=str))}
                for r in check(store) if r.name == case.invariant or not r.ok}
    finally:
        store.close()


def _key(case) -> str:
    return f"{case.invariant}: {case.name}"


def _golden(invariant: str) -> dict:
    path = golden_file(invariant)
    assert path.exists(), f"{path.name}: no reviewed witnesses for {invariant} (see the module's docstring)"
    return json.loads(path.read_text())


def test_the_case_names_are_unique_so_each_has_one_golden_entry():
    names = [_key(c) for c in CASES]
    assert len(names) == len(set(names))


@pytest.mark.skipif(not os.environ.get("PROTOLAB_UPDATE_GOLDEN"), reason="rewrites the golden files")
def test_rewrite_the_golden_witnesses():
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for old in GOLDEN.glob("*.json"):
        old.unlink()
    for name in INVARIANTS:
        cases = {c.name: _verdicts(c) for c in CASES if c.invariant == name}
        golden_file(name).write_text(json.dumps(cases, indent=1, sort_keys=True) + "\n")


@pytest.mark.parametrize("case", CASES, ids=_key)
def test_every_invariant_says_on_the_case_exactly_what_was_reviewed(case):
    golden = _golden(case.invariant)
    assert case.name in golden, "a new case: rewrite the golden files (see the module's docstring)"
    assert _verdicts(case) == golden[case.name]


def test_each_invariant_has_its_file_and_no_file_has_a_case_the_contract_lost():
    assert sorted(p.stem for p in GOLDEN.glob("*.json")) == sorted(INVARIANTS)
    for name in INVARIANTS:
        assert set(_golden(name)) == {c.name for c in CASES if c.invariant == name}, name
