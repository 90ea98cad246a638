"""Every intake verdict in full: for each case of the intake contract, what the reference intake says
(decision, code, the reason a student reads, the move, the lease it grants, whether it creates the
task or asks for reconciliation) is what a reviewer read and accepted, kept in
``tests/data/intake-verdicts.json``. The contract pins decisions and codes; this pins the words too.
After a deliberate change: ``PROTOLAB_UPDATE_GOLDEN=1 pytest tests/test_intake_verdicts.py``, then
read the diff."""

import json
import os
from pathlib import Path

import pytest

from sim.contracts.intake import CASES
from sim.intake import decide
from sim.machine import default_rulebook

GOLDEN = Path(__file__).parent / "data" / "intake-verdicts.json"
RULES = default_rulebook()


def _verdict(case) -> dict:
    v = decide(case.envelope, case.task, case.prior, RULES, case.unresolved)
    return {
        "decision": v.decision.value, "code": v.code, "reason": v.reason,
        "move": [v.move.from_state.value, v.move.to_state.value, v.move.executor, v.move.role, v.move.reason]
        if v.move else None,
        "grant_lease": v.grant_lease, "create": v.create, "needs_reconciliation": v.needs_reconciliation,
        "duplicate_of": v.duplicate_of.message_id if v.duplicate_of else None,
        "conflict_with": v.conflict_with.message_id if v.conflict_with else None,
    }


@pytest.mark.skipif(not os.environ.get("PROTOLAB_UPDATE_GOLDEN"), reason="rewrites the golden file")
def test_rewrite_the_golden_verdicts():
    GOLDEN.write_text(json.dumps({c.name: _verdict(c) for c in CASES}, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


def test_every_case_has_one_golden_verdict():
    assert len({c.name for c in CASES}) == len(CASES)
    assert set(json.loads(GOLDEN.read_text())) == {c.name for c in CASES}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_reference_intake_says_exactly_what_was_reviewed(case):
    assert _verdict(case) == json.loads(GOLDEN.read_text())[case.name]
