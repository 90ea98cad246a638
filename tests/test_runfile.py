"""Issue 43, part 1: a run file is replaced only by a whole, checked run.

A finished run's partial file is checkpointed (the result checked), integrity-checked, closed with no
side file left and fsynced before it is renamed over the run it replaces (sim/runfile.py). Every write
step is made to fail here: SQLite's own writes by ``PROTOLAB_MAX_PAGES`` (SQLITE_FULL without root), the
steps of the replace by the runfile's test hook (``fail@STEP``: ENOSPC there), the checkpoint by a real
small tmpfs (slow set); and the process is killed with SIGKILL at each step of the replace, stopped there
by the hook (``stop@STEP``: SIGSTOP itself, which the test waits for with waitpid: no timing). Whatever
fails, the earlier run is byte for byte as it was and no partial file is left.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sim.errors import StoreError
from sim.runfile import HOOK_ENV, STEPS
from sim.store import Store

ROOT = Path(__file__).resolve().parent.parent


def cli(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env=None if env is None else dict(os.environ, **env))


def one_error_line(p, code: str) -> str:
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {code}: "), p.stderr
    return lines[0]


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def whole(db: Path) -> bool:
    """SQLite's integrity check of ``db`` alone (immutable: no side file read or made)."""
    con = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        con.close()


@pytest.fixture(scope="module")
def old_run(tmp_path_factory) -> bytes:
    """A finished run of the default scenario (seed 1): the file every test here must not lose."""
    db = tmp_path_factory.mktemp("old") / "out.db"
    assert cli("run", "--seed", "1", "--db", db).returncode == 0
    return db.read_bytes()


def _with_old(tmp_path, old_run) -> Path:
    db = tmp_path / "out.db"
    db.write_bytes(old_run)
    return db


# ---------------------------------------------------------------------------- SQLite's writes fail


def test_a_finished_run_leaves_one_checked_file_and_nothing_beside_it(tmp_path, old_run):
    db = _with_old(tmp_path, old_run)
    assert cli("run", "--seed", "2", "--db", db).returncode == 0
    assert sorted(files(tmp_path)) == ["out.db"] and db.read_bytes() != old_run and whole(db)


@pytest.fixture(scope="module")
def new_pages(tmp_path_factory) -> int:
    """How many pages the new run (seed 2) needs, from a run of it with no cap."""
    db = tmp_path_factory.mktemp("new") / "out.db"
    assert cli("run", "--seed", "2", "--db", db).returncode == 0
    return len(db.read_bytes()) // 4096


@pytest.mark.parametrize("share", [0.0, 0.3, 0.7, 1.0])
def test_a_full_disk_at_any_write_of_the_run_keeps_the_old_run_byte_for_byte(tmp_path, old_run, new_pages, share):
    """A cap of 2 pages fails while the schema is written, a third or two thirds of the run's pages during the
    deliveries, one page short at the last commit."""
    pages = max(2, min(new_pages - 1, int(new_pages * share)))
    db = _with_old(tmp_path, old_run)
    p = cli("run", "--seed", "2", "--db", db, env={"PROTOLAB_MAX_PAGES": str(pages)})
    line = one_error_line(p, "E_DB_FULL")
    assert str(db) in line and "nothing was written" in line and "partial" not in line
    assert files(tmp_path) == {"out.db": old_run}


def test_the_page_cap_is_what_makes_those_runs_fail(tmp_path, old_run, new_pages):
    """The runs above fail because of the cap, not by chance: with room for the whole run it succeeds."""
    db = _with_old(tmp_path, old_run)
    with_room = cli("run", "--seed", "2", "--db", db, env={"PROTOLAB_MAX_PAGES": str(new_pages)})
    assert with_room.returncode == 0, with_room.stderr
    assert sorted(files(tmp_path)) == ["out.db"] and whole(db)
    assert len(db.read_bytes()) == new_pages * 4096


# ---------------------------------------------------------------------------- each step of the replace fails


@pytest.mark.parametrize("step", STEPS[:STEPS.index("renamed")])
def test_a_failure_at_each_step_before_the_rename_keeps_the_old_run_and_removes_every_partial(tmp_path, old_run,
                                                                                              step):
    db = _with_old(tmp_path, old_run)
    p = cli("run", "--seed", "2", "--db", db, env={HOOK_ENV: f"fail@{step}"})
    line = one_error_line(p, "E_DB_FULL")
    assert f"injected at step {step}" in line and "nothing was written" in line
    assert files(tmp_path) == {"out.db": old_run}


def test_a_failure_after_the_rename_says_the_new_run_is_in_place(tmp_path, old_run):
    db = _with_old(tmp_path, old_run)
    p = cli("run", "--seed", "2", "--db", db, env={HOOK_ENV: "fail@renamed"})
    assert "is in place but its folder could not be synced" in one_error_line(p, "E_DB_IO")
    assert sorted(files(tmp_path)) == ["out.db"] and db.read_bytes() != old_run and whole(db)


def test_a_checkpoint_that_cannot_finish_is_refused_and_closes_the_store(tmp_path):
    """The TRUNCATE checkpoint's result is read: a reader holding the WAL makes it busy, and the file is
    not called whole."""
    path = tmp_path / "s.db"
    store = Store.create(path)
    store.set_meta({"x": "1"})
    reader = sqlite3.connect(path)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM meta").fetchone()
    try:
        with pytest.raises(StoreError) as e:
            store.seal_file()
        assert e.value.code == "E_DB_BUSY" and "checkpoint" in str(e.value)
    finally:
        reader.close()
    with pytest.raises(StoreError) as closed:
        store.get_meta("x") is None or store.conn.execute("SELECT 1")
    assert closed.value.code == "E_DB_CLOSED"


# ---------------------------------------------------------------------------- kill -9 at each step


def _stopped_at(step: str, db: Path) -> subprocess.Popen:
    """A run of ``db`` stopped (SIGSTOP, by the hook) at ``step``: waitpid returns when it has stopped."""
    p = subprocess.Popen([sys.executable, "-m", "sim.cli", "run", "--seed", "2", "--db", str(db)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT,
                         env=dict(os.environ, **{HOOK_ENV: f"stop@{step}"}))
    _, status = os.waitpid(p.pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status), f"the run ended without reaching step {step}: {p.stderr.read()!r}"
    return p


@pytest.mark.parametrize("step", STEPS)
def test_kill_9_at_each_step_of_the_replace_leaves_the_old_run_or_the_new_one_whole(tmp_path, old_run, step):
    db = _with_old(tmp_path, old_run)
    p = _stopped_at(step, db)
    p.kill()
    p.wait()
    p.stderr.close()
    if STEPS.index(step) < STEPS.index("renamed"):
        assert db.read_bytes() == old_run, "the old run was touched before the rename"
        assert any(n.startswith(".out.db.partial-") for n in files(tmp_path)), "the kill left no partial file"
    else:
        assert sorted(files(tmp_path)) == ["out.db"]
        assert db.read_bytes() != old_run and whole(db)
    assert whole(db)
    if step in ("checked", "renamed"):  # (two steps, to keep the quick loop quick: the sweep is the same code)
        # the next run sweeps what the dead one left and replaces the run
        assert cli("run", "--seed", "3", "--db", db).returncode == 0
        assert sorted(files(tmp_path)) == ["out.db"] and whole(db) and cli("check", "--db", db).returncode == 0


# ---------------------------------------------------------------------------- a real full disk (root)


@pytest.fixture
def small_tmpfs(tmp_path):
    folder = tmp_path / "tmpfs"
    folder.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(folder)], capture_output=True,
                           text=True)
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a 3 MB tmpfs here (needs root): {mount.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


@pytest.mark.slow
def test_a_run_that_fills_a_real_disk_keeps_the_earlier_run_byte_for_byte(small_tmpfs):
    """Issue 43's report: on a 3 MB tmpfs a 20-task run fits, a 120-task run does not (its WAL and the
    checkpoint into the file need more than the disk has); the 20-task run must stay as it was."""
    db = small_tmpfs / "x.db"
    assert cli("run", "stress", "--tasks", "20", "--db", db).returncode == 0
    before = files(small_tmpfs)
    p = cli("run", "stress", "--tasks", "120", "--db", db)
    assert "nothing was written" in one_error_line(p, "E_DB_FULL")
    assert files(small_tmpfs) == before and whole(db)
    assert cli("check", "--db", db).returncode == 0
