"""Work after a fence (issue 13, item 5): a reviewer's decision after the manager's fence reopens the
conversation in the next epoch, with a fresh participant snapshot; the re-run work is valid there and
the manager fences the new epoch. Nothing of it is E_POST_TERMINAL_MESSAGE in the closed epoch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sim.conversation import epoch_count, export_trace
from sim.invariants import check
from sim.live import LiveRun
from sim.protocol import validate
from sim.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent


def _reopened(name="publish-report", db=None) -> LiveRun:
    live = LiveRun(load_scenario(name), faults=["conflicting-digest"], db=db)
    live.run_to_end()
    fence = [m for m in live.store.messages() if m["type"] == "fence"]
    assert [m["payload"]["terminal"] for m in fence] == ["BLOCKED"]
    assert live.reconcile("T-1", "ready", ["M-3", "M-4"]).decision == "accepted"
    live.run_to_end()
    return live


@pytest.mark.parametrize("name", ["publish-report", "fan-out"])
def test_a_release_after_the_fence_reopens_the_conversation_in_epoch_2_and_it_completes(name):
    live = _reopened(name)
    try:
        store = live.store
        assert epoch_count(store) == 2
        assert all(r.ok for r in check(store)), [r for r in check(store) if not r.ok]
        second = export_trace(store)  # the last epoch by default
        r = validate(second)
        assert (r.valid, r.terminal) == (True, "COMPLETED"), r.errors
        assert second["epoch"] == 2 and {m["epoch"] for m in second["messages"]} == {2}
        first_msg = second["messages"][0]
        assert first_msg["kind"] == "CRITIQUE" and first_msg["sender"] == "reviewer"  # the decision that reopened it
        assert "reviewer" in {p["ref"] for p in second["participants"]}  # a fresh snapshot
        for sender in {m["sender"] for m in second["messages"]}:  # every sender counts from 1 again
            assert min(m["seq"] for m in second["messages"] if m["sender"] == sender) == 1
        fences = [m for m in second["messages"] if m["kind"] == "FENCE"]
        assert len(fences) == 1 and second["terminal"]["fence"] == fences[0]["id"]
        first = validate(export_trace(store, 1))
        assert "E_POST_TERMINAL_MESSAGE" not in first.codes
        assert first.terminal_if_valid == "BLOCKED" or first.terminal == "BLOCKED"
    finally:
        live.close()


def test_without_a_reviewers_decision_a_message_after_the_fence_is_still_post_terminal():
    # (naive: it takes the resend, where safe refuses it after the fence and leaves it out of the conversation)
    live = LiveRun(load_scenario("publish-report"), policy="naive")
    try:
        live.run_to_end()
        live.inject("resend", "M-3")  # the sender sends it again after the fence: nobody reopened anything
        live.run_to_end()
        assert epoch_count(live.store) == 1
        r = validate(export_trace(live.store))
        assert "E_POST_TERMINAL_MESSAGE" in r.codes, r.codes
    finally:
        live.close()


def test_trace_export_takes_an_epoch_and_refuses_one_that_does_not_exist(tmp_path):
    db = tmp_path / "reopened.db"
    _reopened(db=db).close()

    def cli(*a):
        return subprocess.run([sys.executable, "-m", "sim.cli", *map(str, a)], capture_output=True, text=True, cwd=ROOT)

    p = cli("trace", "export", "--db", db, "--epoch", "1")
    assert p.returncode == 0 and json.loads(p.stdout)["epoch"] == 1
    p = cli("trace", "export", "--db", db, "-o", tmp_path / "e2.json")
    assert p.returncode == 0 and "epoch 2 of 2" in p.stdout
    assert cli("trace", "validate", tmp_path / "e2.json").returncode == 0
    p = cli("trace", "export", "--db", db, "--epoch", "3")
    assert p.returncode == 2 and p.stderr.startswith("error: E_NO_SUCH_EPOCH: ") and "Traceback" not in p.stderr


async def test_the_conversation_view_shows_each_epoch_and_the_reopened_one_valid():
    from test_tui import SIZE, press, shown

    from sim.tui.app import ProtolabApp
    from sim.tui.screens import Conversation

    live = _reopened()
    try:
        app = ProtolabApp(live.store, live=live)
        async with app.run_test(size=SIZE) as pilot:
            await press(pilot, "v")
            assert isinstance(app.screen, Conversation)
            body = shown(app, "#conv-body")
            assert "Epoch 1 of 2" in body and "Epoch 2 of 2" in body
            second = body[body.index("Epoch 2 of 2"):]
            assert second.split("\n", 2)[-1].lstrip().startswith("valid") or "valid  terminal COMPLETED" in second
            assert "E_POST_TERMINAL_MESSAGE" not in body
            assert "2 epochs" in shown(app, "#conv-title")
    finally:
        live.close()


def _samples() -> dict[str, dict]:
    from sim.runner import run_scenario

    live = _reopened()
    try:
        reopened = export_trace(live.store, 2)
    finally:
        live.close()
    # (naive: it takes the crashed body's late commit, so the trace shows it stale; safe's lease refuses it)
    store = run_scenario(load_scenario("fan-out"), faults=["crash"], seed=3, policy="naive")
    try:
        crash = export_trace(store)
    finally:
        store.close()
    return {"reopened-epoch-2-trace.json": reopened, "crash-generations-trace.json": crash}


def test_the_shipped_reopened_and_crash_samples_are_what_the_runs_export():
    """data/traces/reopened-epoch-2-trace.json (publish-report, a conflict released after the BLOCKED
    fence: epoch 2, valid, COMPLETED) and crash-generations-trace.json (fan-out seed 3 with a crash, under
    naive: the crashed body's messages before the crash accepted, its zombie's late one stale). Rewrite them
    with PROTOLAB_UPDATE_GOLDEN=1 after a deliberate change."""
    import os

    folder = ROOT / "data" / "traces"
    for name, trace in _samples().items():
        if os.environ.get("PROTOLAB_UPDATE_GOLDEN"):
            (folder / name).write_text(json.dumps(trace, indent=2, ensure_ascii=False) + "\n")
        assert json.loads((folder / name).read_text()) == trace, f"{name} is stale"
    r = validate(json.loads((folder / "reopened-epoch-2-trace.json").read_text()))
    assert (r.valid, r.terminal) == (True, "COMPLETED")
    r = validate(json.loads((folder / "crash-generations-trace.json").read_text()))
    assert "E_STALE_GENERATION" in r.codes and "M-3" in r.accepted


def test_a_reconcile_on_a_finished_file_opens_epoch_2_which_validates_as_open(tmp_path):
    """No simulator to re-run the work: the reviewer's decision is epoch 2's only message, an open
    conversation (valid, no terminal yet); epoch 1 keeps its BLOCKED fence."""
    from sim.runner import run_scenario
    from sim.runtime import review

    store = run_scenario(load_scenario("publish-report"), faults=["conflicting-digest"])
    try:
        assert review(store, "T-1", "ready", by="reviewer", evidence=["M-3", "M-4"]).decision == "accepted"
        assert epoch_count(store) == 2
        r = validate(export_trace(store))
        assert (r.valid, r.terminal, len(r.accepted)) == (True, None, 1)
        assert export_trace(store, 1)["terminal"]["state"] == "BLOCKED"
    finally:
        store.close()
