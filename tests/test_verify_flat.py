"""Verification by re-delivery stays flat (issue 31: every command flat): the re-delivered run is
written to a scratch file and the recorded deliveries are read beside it a page at a time, so five
times the run costs about the same memory (an in-memory copy and a dict of every delivery grew with
it). Also: a submission's run is copied out of the zip a block at a time."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import zipfile

import pytest

from sim.runner import run_scenario
from sim.scenario import load_scenario

_CHILD = """
import resource, sys
from sim.store import Store
from sim.labs.verify import verify_run
with Store.open(sys.argv[1], readonly=True) as s:
    r = verify_run(s)
print(r["ok"], resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _stress(tasks: int):
    sc = load_scenario("stress")
    return dataclasses.replace(sc, stress=dataclasses.replace(sc.stress, tasks=tasks))


def _verified_peak_kb(db) -> int:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(db)], capture_output=True, text=True, check=True).stdout
    ok, kb = out.split()
    assert ok == "True"
    return int(kb)


@pytest.mark.slow
def test_verifying_five_times_the_run_costs_about_the_same_memory(tmp_path):
    dbs = {}
    for tasks in (400, 2000):
        dbs[tasks] = tmp_path / f"s{tasks}.db"
        run_scenario(_stress(tasks), policy="safe", faults=["crash", "duplicate"], seed=1, db=str(dbs[tasks]),
                     strict_faults=False).close()
    small, big = _verified_peak_kb(dbs[400]), _verified_peak_kb(dbs[2000])
    # the in-memory re-delivery and the dict of recorded deliveries grew by about 25 MB here
    assert big - small < 8_000, (small, big)


def test_a_submission_whose_run_lost_a_message_is_not_genuine(tmp_path):
    """The recorded deliveries and their envelopes are paired as they stream: a delivery whose
    message row is gone is a difference, not a crash and not a pass."""
    import sqlite3

    from sim.labs.verify import verify_run
    from sim.store import Store

    db = tmp_path / "run.db"
    run_scenario(load_scenario("publish-report"), policy="safe", db=str(db)).close()
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA foreign_keys=OFF")
    seq = conn.execute("SELECT msg_seq FROM deliveries ORDER BY delivery_id LIMIT 1 OFFSET 3").fetchone()[0]
    conn.execute("DELETE FROM messages WHERE msg_seq = ?", (seq,))
    conn.commit()
    conn.close()
    with Store.open(db, readonly=True) as s:
        verdict = verify_run(s)
    assert not verdict["ok"] and "names no recorded message" in verdict["difference"]


def test_a_truncated_submission_is_refused_in_one_line(tmp_path, capsys):
    from conftest import run_cli

    sub = tmp_path / "s.protolab"
    with zipfile.ZipFile(sub, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("manifest.json", json.dumps({"format": "protolab-lab-submission/1", "lab": 3}))
        z.writestr("run.db", b"x" * 200_000)
    data = sub.read_bytes()
    i = data.index(b"run.db") + 200  # inside run.db's compressed bytes
    sub.write_bytes(data[:i] + bytes(b ^ 0xFF for b in data[i:i + 64]) + data[i + 64:])
    code, _, err = run_cli(capsys, "lab", "verify", str(sub))
    assert code == 2 and err.startswith("error: E_NOT_A_SUBMISSION") and err.count("\n") == 1, err
