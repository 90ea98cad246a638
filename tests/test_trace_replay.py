"""Semantic replay of traces: reducer outputs recorded at export are recomputed and compared."""

import copy

import pytest

from sim.conversation import export_trace
from sim.protocol import validate
from sim.protocol.replay import annotate, replay
from sim.runner import run_scenario
from sim.scenario import load_scenario

FAULTS = [[], ["duplicate"], ["reorder"], ["drop"], ["crash"], ["conflicting-digest"], ["late-failure"]]


def exported(faults=(), scenario="publish-report", policy="safe"):
    store = run_scenario(load_scenario(scenario), faults=list(faults), policy=policy)
    try:
        return export_trace(store)
    finally:
        store.close()


@pytest.mark.parametrize("faults", FAULTS, ids=lambda f: "+".join(f) or "clean")
def test_an_exported_run_replays_equivalent_and_carries_its_reducer_outputs(faults):
    trace = exported(faults)
    assert trace["stateDigest"].startswith("sha256:")
    assert any("stateDigestAfter" in m for m in trace["messages"])
    result = replay(trace)
    assert result.equivalent and result.first_divergence is None
    assert result.state_digest == trace["stateDigest"]


def test_the_same_run_exports_the_same_trace():
    assert exported(["crash"]) == exported(["crash"])


def test_a_tampered_payload_is_found_at_its_own_position():
    trace = exported()
    i = next(i for i, m in enumerate(trace["messages"]) if m["id"] == "M-3")
    trace["messages"][i]["payload"]["summary"] = "edited after the run"
    result = replay(trace)
    assert not result.equivalent
    d = result.first_divergence
    assert (d.position, d.message_id, d.what) == (i, "M-3", "stateDigestAfter")
    assert d.expected != d.found and d.found is None  # the edited message is rejected: it reaches no reducer


def test_swapping_two_accepted_messages_of_different_senders_diverges_at_the_first_of_them():
    trace = exported()
    msgs = trace["messages"]
    i = next(i for i in range(len(msgs) - 1) if msgs[i]["sender"] != msgs[i + 1]["sender"]
             and msgs[i + 1]["id"] not in msgs[i]["causedBy"] and msgs[i]["id"] not in msgs[i + 1]["causedBy"])
    msgs[i], msgs[i + 1] = msgs[i + 1], msgs[i]
    d = replay(trace).first_divergence
    assert d is not None and d.position == i


def test_a_rejected_message_never_reaches_a_reducer():
    trace = exported(["duplicate"], policy="naive")  # (safe deduplicates the copy before the conversation)
    report = validate(trace)
    dup = next(e.message_id for e in report.errors if e.code == "E_DUPLICATE_MESSAGE")
    positions = [i for i, m in enumerate(trace["messages"]) if m["id"] == dup]
    assert len(positions) == 2
    assert "stateDigestAfter" not in trace["messages"][positions[1]]
    # drop the rejected copy: the accepted history, and so the state, is the same
    slim = copy.deepcopy(trace)
    del slim["messages"][positions[1]]  # (the ceiling is the run's declared one: unchanged)
    # (the chain's head after the last accepted message; the final digest also holds the terminal, which the
    # rejected copy, once gone, no longer keeps from being valid)
    heads = [m["stateDigestAfter"] for m in annotate(slim)["messages"] if "stateDigestAfter" in m]
    assert heads[-1] == [m["stateDigestAfter"] for m in trace["messages"] if "stateDigestAfter" in m][-1]


def test_a_changed_recorded_gather_result_is_reported(tmp_path):
    from pathlib import Path
    import json

    trace = annotate(json.loads((Path(__file__).resolve().parent.parent / "data/traces/valid-trace.json").read_text()))
    assert replay(trace).equivalent
    trace["gathers"][0]["result"]["missing"] = ["researcher-2"]
    d = replay(trace).first_divergence
    assert d is not None and d.what.startswith("gather ")


def test_the_fan_out_export_gathers_both_researchers_results():
    trace = exported(scenario="fan-out")
    (g,) = trace["gathers"]
    assert g["rule"] == "ALL" and g["membership"] == ["researcher-1", "researcher-2"]
    report = validate(trace)
    assert report.valid
    result = report.gathers[g["id"]]
    assert result.status == "complete" and result.missing == ()
    contributions = [m for m in trace["messages"] if m.get("gatherId") == g["id"]]
    assert {m["sender"] for m in contributions} == {"researcher-1", "researcher-2"}
    assert all(m["kind"] == "CONTRIBUTION" for m in contributions)
    assert g["result"] == result.to_json()  # the recorded reduction travels with the trace
