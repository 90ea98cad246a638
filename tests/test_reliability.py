"""Issue 12: many writers on one database, damaged and read-only files, signals.

Every test here drives real ``protolab`` processes (``python -m sim.cli``) where the property is about
processes: several ``deliver`` at once on one file, a read-only file in a read-only folder, SIGTERM
and SIGHUP in the middle of ``run`` and ``bench sim``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from sim.bench import writers_workload
from sim.errors import StoreError
from sim.runtime import put_artifact
from sim.invariants import check
from sim.store import Store

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"


def cli(*args, cwd=None, env=None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or ROOT, env=env, **kw)


def spawn(*args, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sim.cli", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, **kw)


def one_error_line(p, code: str) -> str:
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {code}: "), p.stderr
    return lines[0]


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


# ---------------------------------------------------------------------------- 1. many writers


@pytest.mark.slow_cases("8-40-8", "4-120-10")  # measured at 2 s or more on 2 cores
@pytest.mark.parametrize("writers,own,shared", [(2, 60, 6), (4, 120, 10), (8, 40, 8)])
def test_concurrent_deliver_processes_land_every_delivery_exactly_once(tmp_path, writers, own, shared):
    db = tmp_path / "run.db"
    assert cli("init", "--db", db).returncode == 0
    batches = []
    for w in range(writers):
        path = tmp_path / f"w{w}.json"
        batch = writers_workload(w, own, shared=shared)
        path.write_text(json.dumps(batch))
        batches.append(batch)
    procs = [spawn("deliver", tmp_path / f"w{w}.json", "--db", db, "--json") for w in range(writers)]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (_out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    outcomes = [o for out, _ in outs for o in json.loads(out)]
    total = sum(len(b) for b in batches)
    assert len(outcomes) == total
    # every delivery exactly once: the ids the processes were told are 1..total, each once
    assert sorted(o["delivery_id"] for o in outcomes) == list(range(1, total + 1))
    with Store.open(db, readonly=True) as store:
        deliveries = store.deliveries()
        assert [d["delivery_id"] for d in deliveries] == list(range(1, total + 1))
        assert {(d["delivery_id"], d["message_id"], d["decision"]) for d in deliveries} == \
               {(o["delivery_id"], o["message_id"], o["decision"]) for o in outcomes}
        ticks = [e["tick"] for e in store.events()]
        assert ticks == sorted(ticks)
        tasks = {t["task_id"]: t for t in store.tasks()}
        assert len(tasks) == writers * own + shared
        # contended: one request of each shared task accepted, the rest duplicates; one start moved it
        by = Counter((d["task_id"], d["type"], d["decision"]) for d in deliveries if d["task_id"].startswith("S-"))
        for k in range(shared):
            assert by[(f"S-{k}", "task_request", "accepted")] == 1
            assert by[(f"S-{k}", "task_request", "duplicate")] == writers - 1
            assert by[(f"S-{k}", "task_started", "accepted")] == 1
            assert by[(f"S-{k}", "task_started", "rejected")] == writers - 1
            assert tasks[f"S-{k}"]["state"] == "running" and tasks[f"S-{k}"]["state_version"] == 2
        assert all(r.ok for r in check(store)), [r for r in check(store) if not r.ok]
    assert cli("replay", "--db", db).returncode == 0
    c = cli("check", "--db", db, "--json")
    assert c.returncode == 0 and {r["name"]: r["ok"] for r in json.loads(c.stdout)}["CLOCK_MONOTONIC"] is True


def test_two_handles_in_one_process_share_one_clock_and_one_id_sequence(tmp_path):
    from sim import samples
    from sim.runtime import deliver, put_artifact

    db = tmp_path / "run.db"
    Store.create(db).close()
    a, b = Store.open(db), Store.open(db)  # both read the counters now; only a writes next
    try:
        envs = samples.happy_path()
        for env in envs[:3]:
            deliver(a, env)
        ref = put_artifact(b, {"kind": "note"})  # b's clock is read inside its transaction: tick 4, not 1
        o = deliver(b, envs[3])
        assert o.delivery_id == 4 and o.tick == 5
        o = deliver(a, envs[4])
        assert o.delivery_id == 5 and o.tick == 6
        assert b.artifact(ref)["first_tick"] == 4
        assert {r.name: r.ok for r in check(a)}["CLOCK_MONOTONIC"]
    finally:
        a.close()
        b.close()


# ---------------------------------------------------------------------------- 3. read-only files and folders


def _finished_run(folder: Path) -> Path:
    folder.mkdir(exist_ok=True)
    db = folder / "run.db"
    assert cli("run", "--db", db, "--json").returncode == 0  # every invariant holds: check exits 0
    assert sorted(p.name for p in folder.iterdir()) == ["run.db"]  # closed: no side files
    return db


READS = [
    ["state", "--db", "{db}", "--json"], ["check", "--db", "{db}"], ["replay", "--db", "{db}"],
    ["events", "--db", "{db}"], ["messages", "--db", "{db}"], ["trace", "export", "--db", "{db}"],
    ["machine", "show", "--db", "{db}"],
]


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
def test_reads_leave_no_side_files_in_a_writable_folder(tmp_path):
    db = _finished_run(tmp_path / "run")
    before = files(db.parent)
    for argv in READS:
        p = cli(*[a.format(db=db) for a in argv])
        assert p.returncode == 0, (argv, p.stderr)
        assert files(db.parent) == before, argv  # no -wal, no -shm, the bytes unchanged


def _unprivileged():
    """(command prefix, environment) running protolab as a user for whom permissions bite, or None.

    As root (this sandbox), ``runuser -u nobody`` with a Python that user may execute (the venv's may
    live under /root) and the venv's packages on PYTHONPATH."""
    import sysconfig

    if os.geteuid() != 0:
        return [sys.executable], dict(os.environ, PYTHONPATH=str(ROOT))
    runuser = shutil.which("runuser")
    if runuser is None:
        return None
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
           "PYTHONPATH": f"{ROOT}:{sysconfig.get_paths()['purelib']}"}
    for python in (sys.executable, f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"):
        probe = subprocess.run([runuser, "-u", "nobody", "--", python, "-c", "import sim.cli, sqlite_utils, typer"],
                               capture_output=True, env=env, cwd="/")
        if probe.returncode == 0:
            return [runuser, "-u", "nobody", "--", python], env
    return None


@pytest.fixture
def public_tmp():
    """A folder every user may enter (pytest's tmp_path is root's own)."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="protolab-ro-"))
    folder.chmod(0o755)
    yield folder
    for q in folder.rglob("*"):
        q.chmod(0o755 if q.is_dir() else 0o644)
    shutil.rmtree(folder)


def _as_user(who, *args, cwd):
    prefix, env = who
    return subprocess.run([*prefix, "-m", "sim.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env)


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
def test_a_read_only_file_in_a_read_only_folder_reads_and_refuses_writes_naming_the_path(public_tmp):
    tmp_path = public_tmp
    prefix = _unprivileged()
    if prefix is None:
        pytest.skip("running as root without runuser: permissions would not bite")
    db = _finished_run(tmp_path / "ro")
    os.chmod(db, 0o444)
    os.chmod(db.parent, 0o555)
    try:
        before = files(db.parent)
        for argv in READS:
            p = _as_user(prefix, *[a.format(db=db) for a in argv], cwd=tmp_path)
            assert p.returncode == 0, (argv, p.stderr)
        assert files(db.parent) == before
        p = _as_user(prefix, "deliver", DATA / "envelopes" / "duplicate.json", "--db", db, cwd=tmp_path)
        line = one_error_line(p, "E_DB_READONLY")
        assert str(db) in line
        os.chmod(db.parent, 0o777)  # a writable folder, the file still read-only
        p = _as_user(prefix, "artifact", "put", DATA / "artifacts" / "facts-T-1.json", "--db", db, cwd=tmp_path)
        assert str(db) in one_error_line(p, "E_DB_READONLY")
        assert files(db.parent) == before
    finally:
        os.chmod(db.parent, 0o755)
        os.chmod(db, 0o644)


def test_a_writable_file_in_a_read_only_folder_is_refused_for_writes_naming_the_folder(public_tmp):
    tmp_path = public_tmp
    prefix = _unprivileged()
    if prefix is None:
        pytest.skip("running as root without runuser: permissions would not bite")
    db = _finished_run(tmp_path / "ro")
    os.chmod(db, 0o666)
    os.chmod(db.parent, 0o555)
    try:
        p = _as_user(prefix, "deliver", DATA / "envelopes" / "duplicate.json", "--db", db, cwd=tmp_path)
        line = one_error_line(p, "E_DB_READONLY")
        assert str(db.parent) in line and "-wal" in line
    finally:
        os.chmod(db.parent, 0o755)


def test_read_only_opens_use_an_immutable_uri_when_no_wal_holds_changes(tmp_path):
    db = _finished_run(tmp_path / "run")
    with Store.open(db, readonly=True) as s:
        uri = s.conn.execute("PRAGMA database_list").fetchall()[0][2]
        assert s.readonly and uri.endswith("run.db")
        with pytest.raises(StoreError) as e:
            put_artifact(s, {"kind": "note"})
        assert e.value.code == "E_DB_READONLY" and str(db) in e.value.message
    assert sorted(p.name for p in db.parent.iterdir()) == ["run.db"]


# ---------------------------------------------------------------------------- 4. signals


def _size(q: Path) -> int:
    """A file's size, or 0 if it went meanwhile (SQLite's side files come and go)."""
    try:
        return q.stat().st_size
    except FileNotFoundError:
        return 0


def _wait_for(pred, timeout=60.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_during_run_removes_the_partial_files_and_says_so(tmp_path, sig):
    db = tmp_path / "out.db"
    p = spawn("run", "stress", "--tasks", "3000", "--db", db, "--json")
    partial = lambda: [q for q in tmp_path.iterdir() if q.name.startswith(".out.db.partial-")]  # noqa: E731
    assert _wait_for(lambda: any(_size(q) > 200_000 for q in partial())), p.stderr.read() if p.poll() else ""
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 128 + sig, (p.returncode, err)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: E_ABORTED: ") and "nothing was written" in lines[0], err
    assert signal.Signals(sig).name in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_a_completed_db_is_kept_when_a_later_run_is_interrupted(tmp_path):
    db = tmp_path / "out.db"
    assert cli("run", "stress", "--tasks", "20", "--db", db, "--json").returncode == 0
    before = files(tmp_path)
    p = spawn("run", "stress", "--tasks", "3000", "--db", db, "--json")
    partial = lambda: [q for q in tmp_path.iterdir() if q.name.startswith(".out.db.partial-")]  # noqa: E731
    assert _wait_for(lambda: any(_size(q) > 200_000 for q in partial()))
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=60)
    assert p.returncode == 128 + signal.SIGTERM
    assert files(tmp_path) == before


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_trace_export_keeps_the_earlier_trace_and_leaves_no_partial(tmp_path, sig):
    db = tmp_path / "run.db"
    assert cli("run", "stress", "--tasks", "2000", "--db", db, "--json").returncode == 0
    out = tmp_path / "trace.json"
    out.write_text("an earlier trace\n")
    before = files(tmp_path)
    p = spawn("trace", "export", "--db", db, "-o", out)
    partial = lambda: [q for q in tmp_path.iterdir() if q.name.startswith(".trace.json.partial-")]  # noqa: E731
    assert _wait_for(lambda: any(_size(q) > 100_000 for q in partial())), p.stderr.read() if p.poll() else ""
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 128 + sig, (p.returncode, err)
    assert "Traceback" not in err and err.strip().startswith("error: E_ABORTED: ")
    assert files(tmp_path) == before


def test_a_run_removes_stale_partial_files_of_a_dead_process(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / f".out.db.partial-{pid}{suffix}").write_bytes(b"x" * 100)
    (tmp_path / f".out.db.partial-{os.getpid()}").write_bytes(b"alive")  # a live process's: kept
    assert cli("run", "--db", tmp_path / "out.db", "--json").returncode == 0
    assert sorted(q.name for q in tmp_path.iterdir()) == sorted(["out.db", f".out.db.partial-{os.getpid()}"])


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_bench_sim_removes_its_temporary_folders(tmp_path, sig):
    env = dict(os.environ, TMPDIR=str(tmp_path))
    p = subprocess.Popen([sys.executable, "-m", "sim.cli", "bench", "sim", "--sizes", "4000", "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    found = lambda: [q for q in tmp_path.rglob("*.db*") if _size(q) > 100_000]  # noqa: E731
    assert _wait_for(lambda: bool(found()), 60), "the bench never started writing"
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 128 + sig, (p.returncode, err)
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("error: E_ABORTED: ")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_signal_during_bench_crash_stops_the_run_it_was_about_to_kill(tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path))
    p = subprocess.Popen([sys.executable, "-m", "sim.cli", "bench", "crash", "--cycles", "3", "--tasks", "3000", "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    # the loop has begun (the timed whole run is done) and its first run is writing
    started = lambda: (any(tmp_path.rglob("timing.db"))  # noqa: E731
                       and any(_size(q) > 100_000 for q in tmp_path.rglob(".out.db.partial-*")))
    assert _wait_for(started, 180), "no run to kill ever started"
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 128 + signal.SIGTERM, (p.returncode, err)
    assert "Traceback" not in err
    # nothing of it goes on: no run still writing into the removed folder, and the folder is gone
    left = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True).stdout.split()
    assert left == [], left
    assert list(tmp_path.iterdir()) == []


def test_tui_and_lab_check_refuse_a_damaged_file_before_anything_else(tmp_path):
    db = _finished_run(tmp_path / "run")
    raw = bytearray(db.read_bytes())
    mid = len(raw) // 2 // 4096 * 4096
    raw[mid:mid + 64] = bytes(64)
    db.write_bytes(bytes(raw))
    before = files(db.parent)
    for argv in (["tui", "--db", db], ["lab", "check", "1", "--db", db, "--progress", tmp_path / "p.db"]):
        p = cli(*argv)
        assert str(db) in one_error_line(p, "E_DB_CORRUPT"), argv
    assert files(db.parent) == before


def test_bench_writers_small_loses_nothing_and_keeps_the_clock():
    from sim.bench import bench_writers

    r = bench_writers(2, 30, shared=3)
    for side in ("concurrent", "one_process"):
        assert r[side]["lost"] == 0 and r[side]["clock_violations"] == 0
        assert r[side]["deliveries"] == 2 * (30 + 2 * 3)


# ---------------------------------------------------------------------------- full disk


def _limited(limit: int):
    """A child whose files may not grow past ``limit`` bytes (a full disk, as a write sees it):
    SIGXFSZ ignored, so the write fails with EFBIG rather than killing the process."""
    import resource

    def pre():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return pre


def test_a_run_on_a_full_disk_says_so_and_leaves_nothing(tmp_path):
    p = cli("run", "--db", tmp_path / "out.db", preexec_fn=_limited(40_000))
    line = one_error_line(p, "E_DB_FULL")
    assert str(tmp_path / "out.db") in line and "nothing was written" in line and "partial" not in line
    assert list(tmp_path.iterdir()) == []


def test_a_delivery_on_a_full_disk_is_refused_and_the_run_is_as_it_was(tmp_path):
    db = _finished_run(tmp_path / "run")
    before = db.read_bytes()
    with Store.open(db, readonly=True) as s:
        digest, n = s.state_digest(), len(s.deliveries())
    for argv in (["deliver", DATA / "envelopes" / "duplicate.json", "--db", db],
                 ["artifact", "put", DATA / "artifacts" / "facts-T-1.json", "--db", db]):
        p = cli(*argv, preexec_fn=_limited(4000))  # not one page more, in the file or beside it
        assert str(db) in one_error_line(p, "E_DB_FULL"), argv
    assert db.read_bytes() == before
    with Store.open(db, readonly=True) as s:
        assert (s.state_digest(), len(s.deliveries())) == (digest, n)
    assert cli("check", "--db", db).returncode == 0


# ---------------------------------------------------------------------------- kill -9


def _sound(db: Path) -> None:
    """What must hold after any crash: SQLite finds the file whole, every invariant holds (the clock's
    and delivery ids' too), and replaying the log rebuilds the same state."""
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    con.close()
    c = cli("check", "--db", db, "--json")
    assert c.returncode == 0, c.stdout + c.stderr
    assert cli("replay", "--db", db).returncode == 0


def _landed(db: Path) -> int:
    """How many deliveries the file holds now, read beside the writers (0 while it cannot be read)."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.1)
        try:
            return con.execute("SELECT COALESCE(MAX(delivery_id), 0) FROM deliveries").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


@pytest.mark.slow_cases("20")  # measured at 2 s or more on 2 cores
@pytest.mark.parametrize("landed_first", [20, pytest.param(1500, marks=pytest.mark.slow),
                                          pytest.param(3000, marks=pytest.mark.slow)])
def test_kill_9_during_concurrent_delivers_leaves_a_sound_database_and_redelivery_finishes(tmp_path, landed_first):
    """Three writers are killed once ``landed_first`` of their 4,515 deliveries are in the file (a signal
    the file gives, not a time: a busy machine only makes the wait longer)."""
    db = tmp_path / "run.db"
    assert cli("init", "--db", db).returncode == 0
    batches = []
    for w in range(3):
        batch = writers_workload(w, 1500, shared=5)
        (tmp_path / f"w{w}.json").write_text(json.dumps(batch))
        batches.append(batch)
    procs = [spawn("deliver", tmp_path / f"w{w}.json", "--db", db, "--json") for w in range(3)]
    assert _wait_for(lambda: _landed(db) >= landed_first or all(p.poll() is not None for p in procs))
    for p in procs:
        p.kill()
        p.communicate(timeout=60)
    _sound(db)
    with Store.open(db, readonly=True) as s:
        landed = len(s.deliveries())
        assert [d["delivery_id"] for d in s.deliveries()] == list(range(1, landed + 1))
    assert landed < sum(map(len, batches)), "the kill came after every delivery: nothing was tested"
    for w in range(3):  # deliver everything again: what landed comes back as a duplicate, the rest lands
        assert cli("deliver", tmp_path / f"w{w}.json", "--db", db, "--json").returncode == 0
    _sound(db)
    with Store.open(db, readonly=True) as s:
        first = Counter(d["message_id"] for d in s.deliveries() if d["decision"] in ("accepted", "rejected"))
        assert set(first) == {e["message_id"] for b in batches for e in b}
        # each request landed once, however many times it was delivered
        assert all(n == 1 for m, n in first.items() if not m.startswith("S-") or "request" in m)
        assert len(s.tasks()) == 3 * 1500 + 5


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
def test_kill_9_during_run_keeps_the_completed_db_and_the_next_run_sweeps_the_partial(tmp_path):
    db = tmp_path / "out.db"
    assert cli("run", "stress", "--tasks", "20", "--db", db, "--json").returncode == 0
    before = files(tmp_path)
    p = spawn("run", "stress", "--tasks", "3000", "--db", db, "--json")
    partial = lambda: [q for q in tmp_path.iterdir() if q.name.startswith(".out.db.partial-")]  # noqa: E731
    assert _wait_for(lambda: any(_size(q) > 200_000 for q in partial()))
    p.kill()
    p.communicate(timeout=60)
    assert {q.name: q.read_bytes() for q in tmp_path.iterdir() if q.name == "out.db"} == before
    assert partial(), "kill -9 leaves the partial file: nothing could remove it"
    _sound(db)
    assert cli("run", "stress", "--tasks", "20", "--db", db, "--json").returncode == 0
    assert sorted(q.name for q in tmp_path.iterdir()) == ["out.db"]
    _sound(db)


# ---------------------------------------------------------------------------- signals during deliver


@pytest.mark.slow  # SIGTERM, SIGINT: 2 s or more on 2 cores (2026-12-05); SIGHUP: over 25 s at load 6-10 (2026-12-07)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_during_deliver_keeps_each_delivery_made_and_says_how_far_it_got(tmp_path, sig):
    db = tmp_path / "run.db"
    assert cli("init", "--db", db).returncode == 0
    batch = writers_workload(0, 20_000)
    (tmp_path / "big.json").write_text(json.dumps(batch))
    p = spawn("deliver", tmp_path / "big.json", "--db", db, "--json")

    def landed():
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
                return con.execute("SELECT count(*) FROM deliveries").fetchone()[0]
        except sqlite3.Error:
            return 0

    assert _wait_for(lambda: landed() > 200)
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 128 + sig, (p.returncode, err)
    line = one_error_line(type("P", (), {"returncode": 2, "stderr": err})(), "E_ABORTED")
    assert signal.Signals(sig).name in line and "deliver the file again" in line
    made = int(line.split(" after ")[1].split(" of ")[0])
    assert f"of {len(batch)} deliveries" in line
    _sound(db)
    with Store.open(db, readonly=True) as s:
        assert len(s.deliveries()) == made


# ---------------------------------------------------------------------------- every kind of writer at once


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
def test_deliver_reconcile_and_artifact_put_processes_share_one_database(tmp_path):
    """Two reviewers release one frozen task while two deliverers and four artifact puts write the
    same file: exactly one review lands (the other is told the task is no longer in review), every
    artifact is stored, every delivery is there once, and the run stays sound."""
    db = tmp_path / "run.db"
    assert cli("init", "--db", db).returncode == 0
    for name in ("facts-T-1.json", "draft-T-2.json"):  # the evidence the envelopes cite, as the README stores it
        assert cli("artifact", "put", DATA / "artifacts" / name, "--db", db).returncode == 0
    assert cli("deliver", DATA / "envelopes" / "conflicting-digest.json", "--db", db).returncode == 0
    for w in range(2):
        # (the same conversation as the envelopes the README delivers: one database is one conversation)
        (tmp_path / f"w{w}.json").write_text(json.dumps(writers_workload(w, 400, shared=4, trace="R-1")))
    for a in range(4):
        (tmp_path / f"a{a}.json").write_text(json.dumps({"table": f"facts {a}", "rows": list(range(a * 50))}))
    procs = [spawn("deliver", tmp_path / f"w{w}.json", "--db", db, "--json") for w in range(2)]
    procs += [spawn("artifact", "put", tmp_path / f"a{a}.json", "--kind", "fact-table", "--db", db) for a in range(4)]
    reviews = [spawn("reconcile", "T-1", "--decision", "ready", "--by", f"reviewer-{r}", "--evidence", "M-3",
                     "--evidence", "M-4", "--db", db, "--json") for r in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
    results = [(p, *p.communicate(timeout=240)) for p in reviews]
    assert sorted(p.returncode for p, _, _ in results) == [0, 2], [e for _, _, e in results]
    refused = next(e for p, _, e in results if p.returncode == 2)
    # the loser either finds the task released already, or its decision (the same one) recognised as a duplicate
    assert refused.startswith(("error: E_NOT_IN_REVIEW: ", "error: E_REVIEW_NOT_APPLIED: ")), refused
    assert len(refused.splitlines()) == 1 and "Traceback" not in refused
    _sound(db)
    with Store.open(db, readonly=True) as s:
        assert len(s.approvals()) == 1
        assert {t["task_id"]: t["state"] for t in s.tasks()}["T-1"] == "ready"
        assert len(s.artifacts()) >= 4
        mids = [d["message_id"] for d in s.deliveries()]
        assert len(set(m for m in mids if m.startswith("M-0-") or m.startswith("M-1-"))) == 800


@pytest.mark.slow
def test_bench_crash_small_finds_no_damage_no_mismatch_and_keeps_the_completed_db():
    from sim.bench import bench_crash

    r = bench_crash(3, 400, seed=1)
    # a run that ended before its kill (a busy machine) tested no crash and is counted apart
    assert r["cycles"] + r["finished_before_kill"] == 3 and r["cycles"] >= 1, r
    assert (r["corrupt"], r["replay_mismatches"], r["invariant_failures"], r["replaced"]) == (0, 0, 0, 0), r


def test_bench_crash_refuses_sizes_it_cannot_use():
    p = cli("bench", "crash", "--cycles", "0")
    one_error_line(p, "E_USAGE")
