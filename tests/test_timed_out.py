"""TIMED_OUT from a run: a member that never answers (fault silent) makes the fan-out's gather miss
its deadline; the manager cancels what is still open and fences TIMED_OUT with the partial gather."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sim.conversation import export_trace
from sim.invariants import check
from sim.protocol.trace import validate
from sim.runner import run_scenario
from sim.scenario import load_scenario

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "traces" / "timed-out-trace.json"


@pytest.mark.parametrize("policy", ["safe", "naive"])
def test_a_silent_member_makes_the_gather_time_out_with_what_did_arrive(policy):
    store = run_scenario(load_scenario("fan-out"), policy=policy, faults=["silent"])
    try:
        states = {t["task_id"]: t["state"] for t in store.tasks()}
        assert states == {"T-1": "canceled", "T-2": "succeeded"}  # T-3 never created: nothing made up
        trace = export_trace(store)
        report = validate(trace)
        assert report.valid and report.terminal == "TIMED_OUT", report.codes
        (g,) = trace["gathers"]
        assert g["result"]["status"] == "partial" and g["result"]["missing"] == ["researcher-1"]
        assert g["result"]["contributors"] == ["researcher-2"]
        if policy == "safe":
            assert all(r.ok for r in check(store))
    finally:
        store.close()


def test_without_the_fault_the_fan_out_completes_well_inside_its_deadline():
    store = run_scenario(load_scenario("fan-out"), faults=["crash"])  # the slowest recovery in the story
    try:
        report = validate(export_trace(store))
        assert report.terminal_if_valid == "COMPLETED"
        assert {t["task_id"]: t["state"] for t in store.tasks()}["T-3"] == "succeeded"
    finally:
        store.close()


def test_the_shipped_sample_is_the_run_and_validates_timed_out():
    store = run_scenario(load_scenario("fan-out"), faults=["silent"])
    try:
        assert json.loads(SAMPLE.read_text()) == export_trace(store)
    finally:
        store.close()
    out = subprocess.run([sys.executable, "-m", "sim", "trace", "validate", str(SAMPLE)], capture_output=True, text=True)
    assert out.returncode == 0 and "terminal TIMED_OUT" in out.stdout and "missing researcher-1" in out.stdout
