"""protolab browse: Datasette over a run, started as a person starts it, fetched over HTTP once it
says where it listens (no sleeping: the test reads the line the command prints when it is ready)."""

import json
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import urllib.request
from urllib.parse import quote
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import run_cli

from sim.runner import run_scenario
from sim.scenario import load_scenario
from sim.store import Store
from sim.store.browse import FACETS, QUERIES, TABLES

pytest.importorskip("datasette", reason="datasette is a dependency of protolab: pip install -e .")


def _run(tmp_path: Path, name: str, **kw) -> Path:
    db = tmp_path / name
    run_scenario(load_scenario("publish-report"), db=db, **kw).close()
    return db


@contextmanager
def browsing(db: Path, *extra: str):
    """``protolab browse --db DB --port 0`` running; yields (base URL, the process). Stopped with Ctrl-C
    (SIGINT) on the way out, and it must stop cleanly."""
    p = subprocess.Popen([sys.executable, "-m", "sim.cli", "browse", "--db", str(db), "--port", "0", *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()  # blocks until the server is ready (or the command ended)
        assert "http://127.0.0.1:" in line, (line, p.stderr.read() if p.poll() is not None else "")
        url = line[line.index("http://"):].split()[0]
        yield url, p
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise
    assert p.returncode == 0, err
    assert "Traceback" not in err and "stopped" in err


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as r:
        assert r.status == 200
        return r.read().decode("utf-8")


def test_browse_serves_every_table_described_with_facets_queries_and_links_and_never_writes(tmp_path):
    db = _run(tmp_path, "naive.db", policy="naive", faults=["duplicate", "late-failure"])
    before = db.read_bytes()
    with browsing(db) as (url, _p):
        base = url + "naive"
        home = _get(base)
        for q in QUERIES.values():
            assert q[0] in home  # every canned query listed by its title
        for table, (description, _columns) in TABLES.items():
            page = _get(f"{base}/{table}")
            assert description.split(". ")[0] in page.replace("&#39;", "'"), table
        data = json.loads(_get(f"{base}/deliveries.json?_facet=decision&_size=0&_extra=facet_results"))
        facets = data["facet_results"]
        facets = facets.get("results", facets)
        counts = {f["value"]: f["count"] for f in facets["decision"]["results"]}
        assert counts.get("accepted", 0) > 0
        deliveries = _get(f"{base}/deliveries")
        for col in FACETS["deliveries"]:
            assert f'id="facet-{col}" data-column="{col}"' in deliveries  # the default facets shown
        events = _get(f"{base}/events")
        assert 'href="/naive/deliveries/1"' in events  # an event links to its delivery
        assert 'href="/naive/tasks/T-1"' in events  # and to its task
        # canned queries: the naive run published twice, under two keys for one target
        eff = json.loads(_get(f"{base}/effects_per_key.json?_shape=array"))
        assert len(eff) == 2 and {e["keys_for_target"] for e in eff} == {2}
        dup = json.loads(_get(f"{base}/transitions_of_task.json?_shape=array&task_id=T-1"))
        assert [t["new_state"] for t in dup][:3] == ["ready", "running", "succeeded"]
        assert dup[-1]["new_state"] == "failed"  # naive let the late failure regress T-1
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["naive.db"]  # not even -wal or -shm


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
def test_the_canned_queries_find_a_resent_intent_and_a_frozen_conflict(tmp_path):
    dup = _run(tmp_path, "dup.db", faults=["duplicate"])
    conflict = _run(tmp_path, "conflict.db", faults=["conflicting-digest"])
    with Store.open(dup, readonly=True) as store:
        twice = next(d for d in store.iter_deliveries_with_messages() if d["delivery_decision"] == "duplicate")
    with browsing(dup) as (url, _p):
        rows = json.loads(_get(f"{url}dup/deliveries_of_intent.json?_shape=array&task_id={twice['task_id']}"
                               f"&idempotency_key={quote(twice['idempotency_key'])}"))
        assert [r["decision"] for r in rows] == ["accepted", "duplicate"]
        assert len({r["payload_digest"] for r in rows}) == 1
    with browsing(conflict) as (url, _p):
        rows = json.loads(_get(f"{url}conflict/needs_review_payloads.json?_shape=array"))
        assert len(rows) == 2 and rows[0]["task_id"] == rows[1]["task_id"]
        assert [r["arrival"] for r in rows] == sorted(r["arrival"] for r in rows)
        assert len({r["payload_digest"] for r in rows}) == 2


def test_browse_refuses_a_port_in_use_and_a_file_that_is_not_a_run(tmp_path, capsys):
    good = _run(tmp_path, "good.db")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        code, _out, err = run_cli(capsys, "browse", "--db", good, "--port", port)
    assert code == 2 and err.startswith("error: E_PORT_IN_USE: ") and err.count("\n") == 1, err
    foreign = tmp_path / "foreign.db"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    newer = tmp_path / "newer.db"
    shutil.copyfile(good, newer)
    con = sqlite3.connect(newer)
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    for db, want in ((tmp_path / "none.db", "E_DB_MISSING"), (foreign, "E_DB_NOT_PROTOLAB"),
                     (newer, "E_DB_SCHEMA_NEWER")):
        code, _out, err = run_cli(capsys, "browse", "--db", db, "--port", "0")
        assert code == 2 and err.startswith(f"error: {want}: ") and err.count("\n") == 1, err
    code, _out, err = run_cli(capsys, "browse", "--db", good, "--port", "70000")
    assert code == 2 and err.startswith("error: E_USAGE: "), err


def test_a_big_run_is_faceted_without_task_id_and_without_suggested_facets():
    from sim.store.browse import BIG_RUN, metadata

    small = metadata("run", title="t", tasks=3)["databases"]["run"]["tables"]
    big = metadata("run", title="t", tasks=BIG_RUN + 1)["databases"]["run"]["tables"]
    assert small["deliveries"]["facets"] == ["decision", "type", "task_id"]
    assert big["deliveries"]["facets"] == ["decision", "type"] and big["tasks"]["facets"] == ["state"]
    assert all("task_id" not in t.get("facets", []) for t in big.values())
