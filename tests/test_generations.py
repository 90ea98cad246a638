"""A body generation changes at a point of the trace (issue 13, item 6): a crashed worker's messages
sent before it was replaced stay valid, what its old body sends afterwards (a zombie's late result) is
stale, and the new body starts its sequence at 1. A message with a duplicate id still has its other
faults reported (issue 13, item 9)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from sim.conversation import export_trace
from sim.protocol import load_schema, validate
from sim.protocol.trace import check_shape
from sim.runner import run_scenario
from sim.scenario import load_scenario

TRACES = Path(__file__).resolve().parent.parent / "data" / "traces"


@pytest.fixture(scope="module")
def crash_trace() -> dict:
    # under naive: the old body's late commit is taken, so the conversation shows it (under safe the lease
    # refuses it, and it never enters the conversation: the export validates)
    store = run_scenario(load_scenario("fan-out"), policy="naive", faults=["crash"], seed=3)
    try:
        return export_trace(store)
    finally:
        store.close()


def _codes_of(report, mid):
    return [f.code for f in report.errors if f.message_id == mid]


def test_a_crashed_workers_message_before_the_crash_is_accepted_and_its_zombies_after_is_stale(crash_trace):
    (r1,) = [p for p in crash_trace["participants"] if p["ref"] == "researcher-1"]
    assert r1["generation"] == 2 and r1["earlierGenerations"] == [{"generation": 1, "replacedAfter": "M-3"}]
    report = validate(crash_trace)
    assert "M-3" in report.accepted and _codes_of(report, "M-3") == []
    # the new body's messages, numbered from 1 again, are accepted
    new_body = [m["id"] for m in crash_trace["messages"] if m["sender"] == "researcher-1" and m["generation"] == 2]
    assert new_body and set(new_body) <= set(report.accepted)
    # the old body's late contribution, sent after it was replaced, is the only fault
    zombie = [m for m in crash_trace["messages"] if m["sender"] == "researcher-1" and m["generation"] == 1
              and m["id"] != "M-3"]
    stale = [f for f in report.errors if f.code == "E_STALE_GENERATION"]
    assert [f.message_id for f in stale] == [m["id"] for m in zombie] and zombie
    assert "replaced after M-3" in stale[0].message
    assert Draft202012Validator(load_schema()).is_valid(crash_trace)


def test_under_safe_the_crashed_bodys_refused_commit_never_enters_the_conversation():
    store = run_scenario(load_scenario("fan-out"), policy="safe", faults=["crash"], seed=3)
    try:
        refused = [d for d in store.deliveries() if d["code"] == "E_STALE_LEASE"]
        trace = export_trace(store)
    finally:
        store.close()
    assert refused and not {d["message_id"] for d in refused} & {m["id"] for m in trace["messages"]}
    assert validate(trace).valid, validate(trace).errors


def _two_bodies() -> dict:
    """The valid sample with researcher-1 re-admitted as generation 2 right after its contribution."""
    t = json.loads((TRACES / "valid-trace.json").read_text())
    (p,) = [p for p in t["participants"] if p["ref"] == "researcher-1"]
    mine = [m for m in t["messages"] if m["sender"] == "researcher-1"]
    point = mine[0]["id"]
    p["generation"] = 2
    p["earlierGenerations"] = [{"generation": 1, "replacedAfter": point}]
    for k, m in enumerate(mine[1:], start=1):  # the new body's messages: generation 2, numbered from 1
        m["generation"], m["seq"] = 2, k
    return t


def test_a_body_replaced_at_a_point_keeps_its_earlier_messages_and_the_new_one_counts_from_1():
    t = _two_bodies()
    assert validate(t).valid, validate(t).errors
    assert check_shape(t) == ()


def test_the_old_body_speaking_after_the_point_is_stale():
    t = _two_bodies()
    mine = [m for m in t["messages"] if m["sender"] == "researcher-1"]
    later = mine[1]
    later["generation"], later["seq"] = 1, 2  # the old body, continuing its own sequence, after it was replaced
    r = validate(t)
    assert _codes_of(r, later["id"]) == ["E_STALE_GENERATION"]
    assert "was replaced after" in next(f.message for f in r.errors if f.message_id == later["id"])


def test_the_new_body_speaking_before_the_point_is_stale():
    t = _two_bodies()
    mine = [m for m in t["messages"] if m["sender"] == "researcher-1"]
    t["participants"][[p["ref"] for p in t["participants"]].index("researcher-1")]["earlierGenerations"] = [
        {"generation": 1, "replacedAfter": mine[-1]["id"]}]
    r = validate(t)
    assert "E_STALE_GENERATION" in _codes_of(r, mine[1]["id"])
    assert "not yet in force" in next(f.message for f in r.errors if f.message_id == mine[1]["id"])


@pytest.mark.parametrize("earlier,words", [
    ([{"generation": 1, "replacedAfter": "no-such-message"}], "names no message"),
    ([{"generation": 2, "replacedAfter": None}], "not between"),
    ([{"generation": 1, "replacedAfter": "m3"}, {"generation": 1, "replacedAfter": "m4"}], "not between"),
])
def test_earlier_generations_out_of_order_or_at_no_point_are_refused(earlier, words):
    t = _two_bodies()
    (p,) = [p for p in t["participants"] if p["ref"] == "researcher-1"]
    p["earlierGenerations"] = earlier
    r = validate(t)
    found = [f for f in r.errors if f.pointer.startswith("/participants/")]
    assert found and found[0].code == "E_STALE_GENERATION" and words in found[0].message, r.errors


def test_a_malformed_earlier_generation_is_a_schema_fault_the_json_schema_agrees_with():
    t = _two_bodies()
    (p,) = [p for p in t["participants"] if p["ref"] == "researcher-1"]
    p["earlierGenerations"] = [{"generation": "one", "replacedAfter": 3, "extra": True}]
    mine = {f.pointer for f in check_shape(t)}
    theirs = {"".join("/" + str(x) for x in e.absolute_path) for e in Draft202012Validator(load_schema()).iter_errors(t)}
    assert mine == theirs and mine


def test_a_duplicate_id_is_rejected_and_its_other_faults_are_still_reported():
    t = json.loads((TRACES / "valid-trace.json").read_text())
    again = copy.deepcopy(t["messages"][1])
    again["scope"] = "trace:elsewhere"
    again["recipients"] = ["auditor"]
    t["messages"].insert(2, again)
    r = validate(t)
    codes = _codes_of(r, again["id"])
    assert codes[0] == "E_DUPLICATE_MESSAGE"
    assert {"E_AUDIENCE_SCOPE"} <= set(codes)
    assert any(f.pointer == "/messages/2/scope" for f in r.errors)
    # the original still stands, once; nothing else about the trace changes
    assert r.accepted.count(again["id"]) == 1
    assert {c for c in r.codes} == {"E_DUPLICATE_MESSAGE", "E_AUDIENCE_SCOPE"}


async def test_the_conversation_view_accepts_what_the_crashed_body_sent_before_it_was_replaced(tmp_path):
    from test_tui import SIZE, press, shown

    from sim.store import Store
    from sim.tui.app import ProtolabApp
    from sim.tui.screens import Conversation

    db = tmp_path / "crash.db"
    run_scenario(load_scenario("fan-out"), policy="naive", faults=["crash"], seed=3, db=db).close()
    store = Store.open(db, readonly=True)
    app = ProtolabApp(store)
    async with app.run_test(size=SIZE) as pilot:
        await press(pilot, "v")
        assert isinstance(app.screen, Conversation)
        body = shown(app, "#conv-body")
        assert "researcher-1 (generation 1)" in body and "researcher-1 (generation 2)" in body
        m3 = next(line for line in body.splitlines() if " M-3 " in line)
        assert "✗" not in m3, m3
        assert "E_STALE_GENERATION: M-3" not in body and "M-3 RESPONSE ✗" not in body
        assert "E_STALE_GENERATION: M-8: researcher-1 generation 1 was replaced after M-3" in body
    store.close()


def test_an_invalid_report_raises_its_first_finding_as_pointer_and_words():
    from sim.errors import InputError

    t = json.loads((TRACES / "invalid" / "sequence-gap.json").read_text())
    r = validate(t)
    first = r.errors[0]
    with pytest.raises(InputError) as e:
        r.raise_if_invalid()
    assert (e.value.code, str(e.value)) == (first.code, f"{first.pointer}: {first.message}")
    with pytest.raises(InputError) as e:
        validate([]).raise_if_invalid()  # a finding about the whole document points at the root
    assert str(e.value).startswith("/: ")
    validate(json.loads((TRACES / "valid-trace.json").read_text())).raise_if_invalid()  # valid: nothing raised
