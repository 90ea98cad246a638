"""protolab timeline's decisions at their edges (issue 48, part 1; bugs planted by hand in sim/timeline.py):
which delivery a broken invariant's witness marks, what the header says was checked and counted, where a
fault sits, how many witnesses are listed, where a payload is cut. Seeded runs of publish-report, no timing."""

import json

import pytest

import sim.invariants
from sim import timeline
from sim.invariants import InvariantResult
from sim.runner import run_scenario
from sim.scenario import load_scenario
from sim.store import Store


@pytest.fixture(scope="module")
def dup(tmp_path_factory):
    """A naive run with a duplicated result and a late failure: a message delivered twice, faults, breaks."""
    db = tmp_path_factory.mktemp("tl") / "dup.db"
    run_scenario(load_scenario("publish-report"), policy="naive", faults=["duplicate", "late-failure"], db=db).close()
    return db


def _picture(db, **kw):
    with Store.open(db, readonly=True) as store:
        return timeline.read_run(store, db.name, **kw), store.deliveries(), list(store.iter_events())


def test_a_run_not_checked_says_nothing_of_its_invariants(dup):
    checked, _d, _e = _picture(dup)
    assert checked.breaks, "the naive run breaks an invariant"
    unchecked, _d, _e = _picture(dup, check=False)
    for p in (checked, unchecked):
        text = timeline.render([p])
        assert "every invariant holds" not in text
    assert "broken invariants" not in timeline.render([unchecked])


def test_a_witness_marks_the_delivery_it_names_else_the_first_delivery_of_its_message(dup, monkeypatch):
    _pic, deliveries, events = _picture(dup)
    twice = next(d["message_id"] for d in deliveries if sum(x["message_id"] == d["message_id"] for x in deliveries) > 1)
    rows = [i for i, d in enumerate(deliveries) if d["message_id"] == twice]
    later = deliveries[rows[1]]
    event = next(e for e in events if e["delivery_id"] == later["delivery_id"])
    witnesses = ({"message_id": twice}, {"message": twice}, {"first": twice}, {"second": twice}, {"late": twice},
                 # a delivery named wins over the message it carries, even nested; then a message; then an event
                 {"task_id": later["task_id"], "message_id": twice, "seen": [{"delivery_id": later["delivery_id"]}]},
                 {"event_seq": event["seq"], "note": "an event of the second delivery"},
                 {"delivery": True, "message": "M-nobody"})
    monkeypatch.setattr(sim.invariants, "check", lambda store: [InvariantResult("SOME", False, "some", witnesses)])
    pic, _d, _e = _picture(dup)
    assert [row for row, _w in pic.breaks[0]["witnesses"]] == [rows[0]] * 5 + [rows[1], rows[1], None]
    data = json.loads(timeline._data(pic).replace("\\u003c", "<"))
    assert sorted(map(int, data["breaks"])) == sorted({rows[0], rows[1]})


def test_the_header_counts_each_decision_and_the_state_column_each_move(dup):
    pic, deliveries, _events = _picture(dup)
    want = {d: sum(x["decision"] == d for x in deliveries) for d in timeline.DECISIONS}
    assert pic.decisions == want and sum(want.values()) == len(deliveries)
    assert sum(n > 1 for n in want.values()) or max(want.values()) > 1
    text = timeline.render([pic])
    for d, n in want.items():
        if n:
            assert f">{n} {d}</span>" in text
    seen, moved = {}, []
    for d in deliveries:
        if d["state_after"] is not None and d["state_version_after"] != seen.get(d["task_id"]):
            seen[d["task_id"]] = d["state_version_after"]
            moved.append(d["delivery_id"])
    assert [r["d"] for r in pic.rows if r["moved"]] == moved
    assert len(moved) < len([d for d in deliveries if d["state_after"] is not None])  # some delivery moved nothing


def test_each_event_outside_a_delivery_sits_with_the_next_delivery_and_each_fault_on_the_delivery_it_hit(dup):
    pic, deliveries, events = _picture(dup)
    row_of = {d["delivery_id"]: i for i, d in enumerate(deliveries)}
    want_row, pending = {}, []
    for e in events:
        if e["delivery_id"] is None:
            pending.append(e["seq"])
            continue
        for s in pending + [e["seq"]]:
            want_row[s] = row_of[e["delivery_id"]]
        pending = []
    for s in pending:
        want_row[s] = len(deliveries) - 1
    got = {ev[0]: i for i, r in enumerate(pic.rows) for ev in r["ev"]}
    assert got == want_row and len(got) == len(events)
    faults = [e for e in events if e["type"] == "fault_injected"]
    assert {e["data"]["fault"] for e in faults} == {"duplicate", "late-failure"}
    hit = {}
    for e in faults:  # told here from each fault's own detail, as a reader of the log would
        if e["data"]["fault"] == "late-failure":  # the failed result it made
            [d] = [d for d in deliveries if d["message_id"] == e["data"]["late"]]
        else:  # the duplicate: the copy of its message that arrived at the tick it names
            [d] = [d for d in deliveries if d["message_id"] == e["message_id"] and d["tick"] == e["data"]["again_at"]]
            assert d != next(x for x in deliveries if x["message_id"] == e["message_id"])  # the copy, not the first
        hit[e["seq"]] = row_of[d["delivery_id"]]
        assert hit[e["seq"]] != want_row[e["seq"]]  # not where the event sits (the next delivery: another message)
    assert [(f["row"], f["seq"]) for f in pic.faults] == sorted((hit[e["seq"]], e["seq"]) for e in faults)
    assert [f["delivery"] for f in pic.faults] == [pic.rows[f["row"]]["d"] for f in pic.faults]


def test_past_the_cap_the_witnesses_left_out_are_counted(dup, monkeypatch):
    many = tuple({"task_id": f"T-{i}", "delivery_id": 1} for i in range(timeline.WITNESS_CAP + 7))
    monkeypatch.setattr(sim.invariants, "check", lambda store: [
        InvariantResult("MANY", False, "many witnesses", many), InvariantResult("FINE", True, "holds", ())])
    pic, _d, _e = _picture(dup)
    assert [b["name"] for b in pic.breaks] == ["MANY"]
    (b,) = pic.breaks
    assert len(b["witnesses"]) == timeline.WITNESS_CAP and b["more"] == 7
    text = timeline.render([pic])
    assert text.count('data-goto="0"') == 20  # the header lists 20, then counts the rest
    assert f"… {timeline.WITNESS_CAP + 7 - 20} more witnesses" in text


def test_a_payload_is_cut_only_past_the_cap():
    def payload(n):  # a payload whose JSON text is n characters
        return {"x": "a" * (n - len('{"x": ""}'))}

    at = payload(timeline.PAYLOAD_CAP)
    assert len(json.dumps(at)) == timeline.PAYLOAD_CAP
    assert timeline._payload(at) == at
    over = timeline._payload(payload(timeline.PAYLOAD_CAP + 1))
    assert "(cut)" in over and len(over["start"]) == timeline.PAYLOAD_CAP


def test_lanes_run_manager_first_then_the_roles_then_any_other_agent_by_name():
    agents = ["zz-1", "writer-1", "aa-2", "researcher-2", "manager", "researcher-1", "reviewer"]
    assert sorted(agents, key=timeline._lane_key) == ["manager", "researcher-1", "researcher-2", "writer-1", "reviewer",
                                                        "aa-2", "zz-1"]


def test_an_event_after_the_last_delivery_sits_on_the_last_row(dup, tmp_path):
    import shutil

    from sim.runtime import record_fault

    db = tmp_path / "tail.db"
    shutil.copy(dup, db)
    with Store.open(db) as store:
        last = store.deliveries()[-1]
        record_fault(store, "drop", message_id=last["message_id"], task_id=last["task_id"], detail={"note": "tail"})
        seq = store.last_event()
    pic, deliveries, events = _picture(db)
    assert events[-1]["seq"] == seq and events[-1]["delivery_id"] is None
    assert pic.rows[-1]["ev"][-1][0] == seq
    # nothing was delivered after it: its mark sits where its event does, naming no delivery
    assert pic.faults[-1]["row"] == len(deliveries) - 1 and pic.faults[-1]["fault"] == "drop"
    assert pic.faults[-1]["delivery"] is None


def test_a_window_marks_a_fault_on_the_delivery_it_hit_though_its_event_is_in_another_window(tmp_path):
    """A delayed result arrives many deliveries after the fault's event: each window that holds the delivery
    marks it there, as the whole page does; a window that holds only the event marks nothing."""
    db = tmp_path / "delay.db"
    run_scenario(load_scenario("publish-report"), policy="naive", faults=["delay", "duplicate", "late-failure"],
                 db=db).close()
    with Store.open(db, readonly=True) as store:
        whole = timeline.read_run(store, "x")
        n = len(whole.rows)
        delayed = [f for f in whole.faults if f["fault"] == "delay"]
        assert delayed and all(f["delivery"] is not None for f in delayed)
        event_rows = {ev[0]: i for i, r in enumerate(whole.rows) for ev in r["ev"]}
        assert any(event_rows[f["seq"]] < f["row"] - 1 for f in delayed)  # its event sits rows earlier
        for first in range(1, n + 1):
            for last in range(first, n + 1):
                part = timeline.read_window(store, "x", first, last)
                assert part.faults == [dict(f, row=f["row"] - (first - 1)) for f in whole.faults
                                       if first - 1 <= f["row"] < last], (first, last)
