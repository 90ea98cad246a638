"""Reconciliation closes: a late result that touches a published effect opens a reconciliation;
a reviewer keeps the effect or retracts it (a compensating effect), from retained evidence, as a
message through intake; events, state and check show it; the TUI's r offers it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sim.errors import ProtolabError
from sim.invariants import check
from sim.replay import replay_report
from sim.runner import run_scenario
from sim.runtime import resolve_reconciliation
from sim.scenario import load_scenario


def _late():
    return run_scenario(load_scenario("publish-report"), faults=["late-failure:M-6"])


@pytest.mark.parametrize("decision,effects", [
    ("keep", ["publish:R-1:T-2"]),
    ("retract", ["publish:R-1:T-2", "retract:publish:R-1:T-2"]),
])
def test_a_reviewer_closes_the_reconciliation_and_it_is_recorded_everywhere(decision, effects):
    store = _late()
    try:
        (opened,) = store.open_reconciliations()
        assert (opened["task_id"], opened["message_id"], opened["effects"]) == ("T-2", "M-7", ["publish:R-1:T-2"])
        out = resolve_reconciliation(store, "T-2", decision, by="reviewer", evidence=["M-7"])
        assert out.decision == "accepted" and out.state == "succeeded"  # the task's state does not move
        assert store.open_reconciliations() == []
        assert sorted(e["effect_key"] for e in store.effects()) == effects
        assert [a["decision"] for a in store.approvals()] == [f"reconcile:{decision}"]
        resolved = [e for e in store.events() if e["type"] == "reconciliation_resolved"]
        assert resolved and resolved[0]["data"]["of"] == "M-7" and resolved[0]["data"]["evidence"] == ["M-7"]
        assert store.message_by_id(out.message_id)["type"] == "review_decision"  # a message, in the log
        assert [r.name for r in check(store) if not r.ok] == []
        rep = replay_report(store)
        assert rep["match"] and rep["redelivery"]["effects_committed_again"] == []
    finally:
        store.close()


@pytest.mark.parametrize("kwargs,code", [
    ({"by": "writer", "evidence": ["M-7"]}, "E_ROLE_NOT_ALLOWED"),
    ({"by": "reviewer", "evidence": []}, "E_EVIDENCE_REQUIRED"),
    ({"by": "reviewer", "evidence": ["M-404"]}, "E_EVIDENCE_UNRESOLVED"),
    ({"by": "reviewer", "evidence": ["M-7"], "of": "M-3"}, "E_NOT_RECONCILING"),
])
def test_a_reconciliation_is_refused_without_a_reviewer_evidence_or_an_open_case(kwargs, code):
    store = _late()
    try:
        with pytest.raises(ProtolabError) as e:
            resolve_reconciliation(store, "T-2", "retract", **kwargs)
        assert e.value.code == code
        assert len(store.open_reconciliations()) == 1 and len(store.effects()) == 1
    finally:
        store.close()


def test_a_forged_reconciliation_message_from_a_writer_is_rejected_by_intake():
    from sim.envelope import build_envelope
    from sim.runtime import deliver

    store = _late()
    try:
        env = build_envelope(message_id="X-1", trace_id="R-1", task_id="T-2", sender="writer", recipient="manager",
                             type="review_decision", payload={"reconcile": "retract", "of": "M-7"},
                             idempotency_key="forged", created_at="2026-07-13T05:00:00Z", evidence_refs=["M-7"])
        out = deliver(store, env)
        # after the fence the conversation refuses it first; intake's own refusal is in the reason
        assert (out.decision, out.code) == ("rejected", "E_POST_TERMINAL_MESSAGE") and "E_ROLE_NOT_ALLOWED" in out.reason
        assert len(store.effects()) == 1 and len(store.open_reconciliations()) == 1
    finally:
        store.close()


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
def test_check_names_the_open_reconciliation_and_reconcile_closes_it(tmp_path):
    db = str(tmp_path / "r.db")
    cmd = [sys.executable, "-m", "sim"]
    subprocess.run([*cmd, "run", "--fault", "late-failure:M-6", "--db", db], check=True, capture_output=True)
    out = subprocess.run([*cmd, "check", "--db", db], capture_output=True, text=True)
    assert out.returncode == 0 and "open reconciliation: T-2: late failed result M-7" in out.stdout
    out = subprocess.run([*cmd, "reconcile", "T-2", "--decision", "retract", "--by", "reviewer", "--evidence", "M-7",
                          "--db", db], capture_output=True, text=True)
    assert out.returncode == 0 and "retract:publish:R-1:T-2" in out.stdout
    out = subprocess.run([*cmd, "check", "--db", db], capture_output=True, text=True)
    assert out.returncode == 0 and "open reconciliation" not in out.stdout
    again = subprocess.run([*cmd, "reconcile", "T-2", "--decision", "keep", "--by", "reviewer", "--evidence", "M-7",
                            "--db", db], capture_output=True, text=True)
    assert again.returncode == 2 and again.stderr.startswith("error: E_NOT_RECONCILING:")
    events = subprocess.run([*cmd, "events", "--db", db], capture_output=True, text=True, env={"COLUMNS": "200"})
    assert "reconciliation_resolved" in events.stdout and "retract" in events.stdout


async def test_r_in_the_tui_offers_keep_or_retract_for_an_open_reconciliation():
    pytest.importorskip("textual")
    from sim.live import LiveRun
    from sim.tui.app import ProtolabApp
    from sim.tui.screens import Reconcile

    live = LiveRun(load_scenario("publish-report"), faults=["late-failure:M-6"])
    try:
        live.run_to_end()
        app = ProtolabApp(live.store, live=live)
        async with app.run_test(size=(120, 35)) as pilot:
            await pilot.pause()
            await pilot.press("r")
            await pilot.pause()
            assert isinstance(app.screen, Reconcile) and app.screen.late == "M-7"
            await pilot.press("down", "enter", "tab", "enter")  # retract, evidence M-7 as offered
            await pilot.pause()
            assert live.store.open_reconciliations() == []
            assert "retract:publish:R-1:T-2" in {e["effect_key"] for e in live.store.effects()}
    finally:
        live.close()


def test_a_publication_resting_on_a_result_later_contradicted_goes_to_reconciliation_and_stays_open_past_a_cancel():
    """The seed: a contradiction of a result a validated side effect rests on goes through reconciliation.
    M-6, the writer's result, published R-1; a second payload under M-6's key freezes T-2 and opens a
    reconciliation of its own publication, which a reviewer's cancel of the task does not close."""
    from sim.runtime import resolve_reconciliation, review

    store = run_scenario(load_scenario("publish-report"), faults=["conflicting-digest:M-6"])
    try:
        twin = next(e for e in store.events() if e["type"] == "fault_injected")["data"]["twin"]
        (opened,) = store.open_reconciliations("T-2")
        assert opened["message_id"] == twin and opened["effects"] == ["publish:R-1:T-2"]
        assert store.get_task("T-2").state.value == "needs_review"
        assert review(store, "T-2", "canceled", by="reviewer", evidence=["M-6", twin]).decision == "accepted"
        assert [o["message_id"] for o in store.open_reconciliations("T-2")] == [twin]  # still the reviewer's to decide
        out = resolve_reconciliation(store, "T-2", "retract", by="reviewer", evidence=[twin])
        assert out.decision == "accepted" and store.open_reconciliations("T-2") == []
        assert [e["effect_key"] for e in store.effects()] == ["publish:R-1:T-2", "retract:publish:R-1:T-2"]
    finally:
        store.close()


def test_a_contradiction_arriving_after_the_fence_changes_nothing_and_is_sent_to_reconciliation():
    store = run_scenario(load_scenario("publish-report"), faults=["late-conflict:M-6"])
    try:
        twin = next(e for e in store.events() if e["type"] == "fault_injected")["data"]["twin"]
        (dv,) = [d for d in store.deliveries() if d["message_id"] == twin]
        assert (dv["decision"], dv["code"]) == ("rejected", "E_POST_TERMINAL_MESSAGE")
        assert store.get_task("T-2").state.value == "succeeded"  # the fence closed semantic mutation
        (opened,) = store.open_reconciliations("T-2")
        assert opened["message_id"] == twin and opened["effects"] == ["publish:R-1:T-2"]
    finally:
        store.close()
