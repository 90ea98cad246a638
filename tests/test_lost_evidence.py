"""Lost evidence: a success that cites nothing is refused under safe (its retry publishes with the
evidence), accepted and published under naive, and EFFECT_HAS_EVIDENCE names the publication."""

from __future__ import annotations

import subprocess
import sys

from sim.invariants import check
from sim.runner import run_scenario
from sim.scenario import load_scenario


def _run(policy):
    return run_scenario(load_scenario("publish-report"), policy=policy, faults=["lost-evidence"])


def test_safe_refuses_the_paraphrase_and_publishes_the_retry_with_its_evidence():
    store = _run("safe")
    try:
        dels = store.deliveries()
        bare = [d for d in dels if d["code"] == "E_EVIDENCE_REQUIRED"]
        assert [(d["message_id"], d["decision"]) for d in bare] == [("M-6", "rejected")]
        (effect,) = store.effects()
        publisher = next(d for d in dels if d["delivery_id"] == max(x["delivery_id"] for x in dels
                                                                     if x["task_id"] == "T-2" and x["decision"] == "accepted"
                                                                     and x["type"] == "task_result"))
        msg = store.message_by_id(publisher["message_id"])
        assert any(r.startswith("sha256:") for r in msg["evidence_refs"])
        assert effect["task_id"] == "T-2"
        assert all(r.ok for r in check(store)), [r.name for r in check(store) if not r.ok]
    finally:
        store.close()


def test_naive_publishes_the_paraphrase_and_the_invariant_names_it():
    store = _run("naive")
    try:
        r = next(r for r in check(store) if r.name == "EFFECT_HAS_EVIDENCE")
        assert not r.ok
        w = r.witnesses[0]
        assert (w["message_id"], w["task_id"], w["evidence_refs"]) == ("M-6", "T-2", [])
        assert store.message_by_id("M-6")["payload"]["summary"].startswith("paraphrased")
    finally:
        store.close()


def test_the_fault_is_listed_and_refused_on_a_message_it_cannot_bend(tmp_path):
    out = subprocess.run([sys.executable, "-m", "sim", "run", "--fault", "lost-evidence:task_request", "--db",
                          str(tmp_path / "x.db")], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.startswith("error: E_FAULT_SELECTOR:") and out.stderr.count("\n") == 1
