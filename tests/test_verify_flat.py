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


def _lab_submission(tmp_path, db, name="sub.protolab", lab=3):
    """A submission file packed by hand around ``db`` (the way a hostile one would be)."""
    sub = tmp_path / name
    with zipfile.ZipFile(sub, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("manifest.json", json.dumps({"format": "protolab-lab-submission/1", "lab": lab, "progress": {}}))
        z.write(db, "run.db")
    return sub


def _renamed_stress(tmp_path, tasks: int):
    """A stress run passed off as lab 3's story (its scenario rewritten in meta)."""
    import sqlite3

    db = tmp_path / "stress.db"
    run_scenario(_stress(tasks), policy="safe", seed=1, db=str(db)).close()
    con = sqlite3.connect(db)
    con.execute("UPDATE meta SET value = 'publish-report' WHERE key = 'scenario'")
    con.commit()
    con.close()
    return db


def test_a_run_far_larger_than_the_labs_story_is_refused_before_it_is_read_by_submit_verify_and_grade(tmp_path, capsys):
    """A lab's run is its story: a stress run renamed as lab 3's is refused in one line, naming the
    file the user gave (not a scratch copy), by submit, verify and grade (score 0, the reason)."""
    from conftest import run_cli

    db = _renamed_stress(tmp_path, 30)
    code, _, err = run_cli(capsys, "lab", "submit", "3", "--db", db, "-o", tmp_path / "x.protolab")
    assert code == 2 and err.startswith(f"error: E_LAB_RUN_TOO_LARGE: {db} holds more tasks than lab 3's story")
    assert err.count("\n") == 1 and not (tmp_path / "x.protolab").exists()
    sub = _lab_submission(tmp_path, db)
    code, _, err = run_cli(capsys, "lab", "verify", sub)
    assert code == 2 and err.startswith(f"error: E_LAB_RUN_TOO_LARGE: {sub}'s run holds more tasks"), err
    (tmp_path / "class" / "mallory").mkdir(parents=True)
    sub.rename(tmp_path / "class" / "mallory" / "lab3.protolab")
    code, out, _ = run_cli(capsys, "grade", "lab", "3", tmp_path / "class", "--json")
    row = json.loads(out)[0] if isinstance(json.loads(out), list) else json.loads(out)["rows"][0]
    assert row["score"] == 0 and row["note"].startswith("E_LAB_RUN_TOO_LARGE"), row


def test_a_lab_run_past_the_delivery_bound_is_refused_and_a_run_within_it_is_judged(tmp_path, capsys, monkeypatch):
    from sim.labs import judge
    from sim.labs.catalog import get_lab
    from sim.labs.submit import verify_submission

    db = tmp_path / "lab3.db"
    lab = get_lab("3")
    run_scenario(load_scenario(lab.scenario), policy=lab.policy, seed=lab.seed, db=str(db)).close()
    sub = _lab_submission(tmp_path, db)
    seen = []
    result = verify_submission(sub, progress=lambda done, total: seen.append((done, total)))
    assert result["genuine"] and seen and seen[-1][0] == seen[-1][1] > 0  # the bar ends full
    deliveries = seen[-1][1]
    monkeypatch.setattr(judge, "LAB_RUN_MAX_DELIVERIES", deliveries - 1)
    with pytest.raises(Exception) as e:
        verify_submission(sub)
    assert getattr(e.value, "code", None) == "E_LAB_RUN_TOO_LARGE" and f"more than {deliveries - 1}" in str(e.value)


def test_a_submission_that_unpacks_past_the_bound_is_refused_before_it_is_unpacked(tmp_path, capsys, monkeypatch):
    from conftest import run_cli
    from sim.labs import submit

    db = tmp_path / "lab3.db"
    run_scenario(load_scenario("publish-report"), policy="safe", db=str(db)).close()
    sub = _lab_submission(tmp_path, db)
    monkeypatch.setattr(submit, "MAX_BYTES", db.stat().st_size - 1)
    code, _, err = run_cli(capsys, "lab", "verify", sub)
    assert code == 2 and err.startswith(f"error: E_LAB_RUN_TOO_LARGE: {sub} unpacks to more than") and err.count("\n") == 1


def test_lab_check_and_submit_refuse_a_file_past_the_bound_before_opening_it(tmp_path, capsys, monkeypatch):
    """Opening a store checks every page (minutes on a million-task file): a file far larger than any
    lab's run is refused by its size first, in one line, and nothing is written."""
    from conftest import run_cli
    from sim.labs import judge

    db = tmp_path / "lab3.db"
    run_scenario(load_scenario("publish-report"), policy="safe", db=str(db)).close()
    monkeypatch.setattr(judge, "LAB_RUN_MAX_BYTES", db.stat().st_size - 1)
    opened = []
    monkeypatch.setattr("sim.store.Store.open", classmethod(lambda cls, *a, **k: opened.append(a) or 1 / 0))
    for args in (("lab", "check", "3", "--db", db), ("lab", "submit", "3", "--db", db, "-o", tmp_path / "s.protolab")):
        code, _, err = run_cli(capsys, *args)
        assert code == 2 and err.startswith(f"error: E_LAB_RUN_TOO_LARGE: {db} is 0 MB; a run of lab 3") and err.count("\n") == 1, err
    assert not opened and not (tmp_path / "s.protolab").exists()
