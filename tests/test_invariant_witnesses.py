"""Every witness in full: for each case of the invariants' contract, the whole verdict of every
invariant (ok, and each witness with all its fields) is what a reviewer read and accepted, kept in
``tests/data/invariant-witnesses.json``.

The contract (``sim/contracts/invariants.py``) pins each verdict and the fields a case names; this
pins the rest of what ``protolab check`` prints, so a judge that names the wrong row, drops a field,
or breaks an invariant the case is not about is caught. After a deliberate change, rewrite the file
with ``PROTOLAB_UPDATE_GOLDEN=1 pytest tests/test_invariant_witnesses.py`` and read the diff.
"""

import json
import os
from pathlib import Path

import pytest

from sim.contracts.invariants import CASES
from sim.invariants import check

GOLDEN = Path(__file__).parent / "data" / "invariant-witnesses.json"


def _verdicts(case) -> dict:
    store = case.build()
    try:
        return {r.name: {"ok": r.ok, "witnesses": json.loads(json.dumps(list(r.witnesses), default=str))}
                for r in check(store)}
    finally:
        store.close()


def _key(case) -> str:
    return f"{case.invariant}: {case.name}"


def test_the_case_names_are_unique_so_each_has_one_golden_entry():
    names = [_key(c) for c in CASES]
    assert len(names) == len(set(names))


@pytest.mark.skipif(not os.environ.get("PROTOLAB_UPDATE_GOLDEN"), reason="rewrites the golden file")
def test_rewrite_the_golden_witnesses():
    GOLDEN.write_text(json.dumps({_key(c): _verdicts(c) for c in CASES}, indent=1, sort_keys=True) + "\n")


@pytest.mark.parametrize("case", CASES, ids=_key)
def test_every_invariant_says_on_the_case_exactly_what_was_reviewed(case):
    golden = json.loads(GOLDEN.read_text())
    assert _key(case) in golden, "a new case: rewrite the golden file (see the module's docstring)"
    assert _verdicts(case) == golden[_key(case)]


def test_the_golden_file_has_no_case_the_contract_lost():
    assert set(json.loads(GOLDEN.read_text())) == {_key(c) for c in CASES}
