"""Every gather reduction in full: ``evaluate_gather`` over a matrix of declarations (ALL, QUORUM with
each threshold, FIRST_SUCCESS under each tie-break and none, an unknown rule, odd memberships and
deadlines) and contribution lists (members and outsiders, late ones, repeats, another gather's,
dissenting votes, failed candidates, in two orders), each result with every field, as reviewed, in
``tests/data/gather-reductions.json``. Rewrite after a deliberate change with
``PROTOLAB_UPDATE_GOLDEN=1 pytest tests/test_gather_reductions.py`` and read the diff."""

import dataclasses
import json
import os
from pathlib import Path

import pytest

from sim.protocol import evaluate_gather

GOLDEN = Path(__file__).parent / "data" / "gather-reductions.json"
T = "2026-07-13T04:{:02d}:00Z"


def _c(mid, sender, minute, gather="g", **payload):
    m = {"id": mid, "sender": sender, "kind": "CONTRIBUTION", "gatherId": gather, "at": T.format(minute)}
    if payload:
        m["payload"] = payload
    return m


POOL = {
    "a accepts": _c("m1", "a", 1, vote="accept", value="A"),
    "b rejects": _c("m2", "b", 2, vote="reject", why="weak"),
    "c accepts": _c("m3", "c", 3, vote="accept", value="C"),
    "a again": _c("m4", "a", 4, vote="reject"),
    "z outsider": _c("m5", "z", 5, vote="accept"),
    "c late": _c("m6", "c", 45, vote="accept"),
    "b other gather": _c("m7", "b", 6, gather="h", vote="accept"),
    "b failed": _c("m8", "b", 7, success=False, value="broken"),
    "c backdated success": _c("m9", "c", 0, success=True, value="from c"),
    "a plain value": _c("m10", "a", 8, value={"n": 1}),
    "b no payload": _c("m11", "b", 9),
    "a votes a table": _c("m12", "a", 10, vote={"source": "S-1", "rows": 3}),
    "b votes the same table": _c("m13", "b", 11, vote={"rows": 3, "source": "S-1"}),  # other key order, same verdict
    "c votes in French": _c("m14", "c", 12, vote="adopté"),
    "a votes in French": _c("m15", "a", 13, vote="adopté"),
    "c rejects with a value": _c("m16", "c", 14, vote="reject", value="not this one"),
}
SETS = {
    "none": [],
    "all three": ["a accepts", "b rejects", "c accepts"],
    "all three reversed": ["c accepts", "b rejects", "a accepts"],
    "two": ["a accepts", "b rejects"],
    "repeat and outsider": ["a accepts", "a again", "z outsider", "b rejects"],
    "late and other gather": ["a accepts", "c late", "b other gather"],
    "candidates": ["b failed", "c backdated success", "a plain value"],
    "candidates reversed": ["a plain value", "c backdated success", "b failed"],
    "no payloads": ["b no payload", "a plain value"],
    "only failures": ["b failed"],
    "tables in two key orders": ["a votes a table", "b votes the same table", "c accepts"],
    "accents": ["c votes in French", "a votes in French", "b rejects"],
    "a rejection is no success": ["c rejects with a value", "a plain value"],
}
BASE = {"id": "g", "membership": ["a", "b", "c"], "deadline": T.format(30), "opener": "m0"}
DECLS = {
    "ALL": {"rule": "ALL"},
    **{f"QUORUM {th}": {"rule": "QUORUM", "threshold": th} for th in (0, 1, 2, 3, 4)},
    "QUORUM without threshold": {"rule": "QUORUM"},
    "FIRST_SUCCESS supplied-order": {"rule": "FIRST_SUCCESS", "tieBreak": "supplied-order"},
    "FIRST_SUCCESS lowest-sender": {"rule": "FIRST_SUCCESS", "tieBreak": "lowest-sender"},
    "FIRST_SUCCESS without tie-break": {"rule": "FIRST_SUCCESS"},
    "unknown rule": {"rule": "MAJORITY"},
    "ALL, no deadline": {"rule": "ALL", "deadline": None},
    "ALL, odd membership": {"rule": "ALL", "membership": ["a", 3]},
    "QUORUM 2, empty membership": {"rule": "QUORUM", "threshold": 2, "membership": []},
}


def _cases():
    for dname, decl in DECLS.items():
        for sname, names in SETS.items():
            yield f"{dname} / {sname}", {**BASE, **decl}, [POOL[n] for n in names]


def _result(gather, contributions) -> dict:
    r = evaluate_gather(gather, contributions)
    return {"result": json.loads(json.dumps(dataclasses.asdict(r), default=str)),
            "to_json": json.loads(json.dumps(r.to_json(), default=str))}


@pytest.mark.skipif(not os.environ.get("PROTOLAB_UPDATE_GOLDEN"), reason="rewrites the golden file")
def test_rewrite_the_golden_reductions():
    GOLDEN.write_text(json.dumps({k: _result(g, c) for k, g, c in _cases()}, indent=1, sort_keys=True) + "\n")


def test_every_reduction_is_the_one_reviewed():
    golden = json.loads(GOLDEN.read_text())
    cases = list(_cases())
    assert {k for k, _, _ in cases} == set(golden)
    wrong = [k for k, g, c in cases if _result(g, c) != golden[k]]
    assert not wrong, f"{len(wrong)} reductions differ, first: {wrong[0]}"


def test_the_reviewed_reductions_say_what_the_rules_promise():
    golden = json.loads(GOLDEN.read_text())
    r = lambda k: golden[k]["result"]  # noqa: E731
    assert r("ALL / all three")["status"] == "complete" and r("ALL / two")["missing"] == ["c"]
    assert [d["message"] for d in r("QUORUM 2 / all three")["dissent"]] == ["m2"]
    assert r("QUORUM 0 / all three")["status"] == "blocked" and r("QUORUM 4 / all three")["status"] == "blocked"
    assert r("QUORUM 1 / two")["status"] == "blocked"  # two verdicts tie at the threshold
    assert r("FIRST_SUCCESS supplied-order / candidates")["selected"] == "m9"
    assert r("FIRST_SUCCESS supplied-order / candidates reversed")["selected"] == "m10"
    assert r("FIRST_SUCCESS lowest-sender / candidates reversed")["selected"] == "m10"
    assert r("FIRST_SUCCESS without tie-break / candidates")["status"] == "blocked"
    assert set(r("ALL / repeat and outsider")["ignored"]) == {"m4", "m5"}
    assert set(r("ALL / late and other gather")["ignored"]) == {"m6", "m7"}
    assert r("QUORUM 2 / tables in two key orders")["status"] == "complete"  # one verdict, whatever the key order
    assert "adopté" in r("QUORUM 2 / accents")["reason"]
    assert r("FIRST_SUCCESS supplied-order / a rejection is no success")["selected"] == "m10"
