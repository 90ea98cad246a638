"""Issue 43, part 5: every reader refuses damage in one line.

A run file SQLite finds whole but with a damaged row (JSON that does not parse in ``messages.payload`` or
``events.data``, a task state no machine has) is ``error: E_DB_CORRUPT: <table> row <id>: ...``, exit 2,
in every command that reads the row (the store decodes every row in one place). A FIFO, a device or a folder
where a file is expected is refused at once (E_NOT_A_FILE), never waited on. ``explore`` refuses a fault
selector no run matches as ``run`` does. All through the CLI, as a user runs it.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"


def cli(*args, cwd) -> subprocess.CompletedProcess:
    # a timeout only so that a hang fails the test instead of the suite: nothing here waits on time
    return subprocess.run([sys.executable, "-m", "sim.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120, stdin=subprocess.DEVNULL)


def one_error_line(p, code: str) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout[-500:], p.stderr[-2000:])
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {code}: "), p.stderr
    return lines[0]


@pytest.fixture(scope="module")
def broken_run(tmp_path_factory) -> bytes:
    """A naive run with a late failure: it breaks an invariant, so shrink has something to shrink."""
    db = tmp_path_factory.mktemp("run") / "run.db"
    p = cli("run", "--policy", "naive", "--fault", "late-failure", "--db", db, cwd=db.parent)
    assert p.returncode in (0, 1), p.stderr
    return db.read_bytes()


def _damaged(tmp_path: Path, run: bytes, sql: str, *params) -> Path:
    db = tmp_path / "damaged.db"
    db.write_bytes(run)
    con = sqlite3.connect(db)
    assert con.execute(sql, params).rowcount == 1
    con.commit()
    con.close()
    assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone() == ("ok",)  # SQLite finds it whole
    for side in ("-wal", "-shm"):
        Path(f"{db}{side}").unlink(missing_ok=True)
    return db


READERS = {
    "timeline": ["timeline", "--db", "damaged.db", "-o", "out.html"],
    "a2a export": ["a2a", "export", "--db", "damaged.db", "-o", "out.json"],
    "trace export": ["trace", "export", "--db", "damaged.db", "-o", "out.json"],
    "shrink": ["shrink", "--db", "damaged.db", "-o", "out.toml"],
    "replay": ["replay", "--db", "damaged.db"],
}


@pytest.mark.parametrize("argv", READERS.values(), ids=READERS.keys())
def test_a_message_payload_that_is_not_json_is_one_line_naming_the_row(tmp_path, broken_run, argv):
    _damaged(tmp_path, broken_run, "UPDATE messages SET payload = '{bad' WHERE msg_seq = 3")
    line = one_error_line(cli(*argv, cwd=tmp_path), "E_DB_CORRUPT")
    assert "messages row 3: payload is not JSON" in line
    assert sorted(os.listdir(tmp_path)) == ["damaged.db"], "something was written"


@pytest.mark.parametrize("argv", [READERS["timeline"], READERS["replay"], ["events", "--db", "damaged.db"]],
                         ids=["timeline", "replay", "events"])
def test_event_data_that_is_not_json_is_one_line_naming_the_row(tmp_path, broken_run, argv):
    _damaged(tmp_path, broken_run, "UPDATE events SET data = '{bad' WHERE seq = 6")
    line = one_error_line(cli(*argv, cwd=tmp_path), "E_DB_CORRUPT")
    assert "events row 6: data is not JSON" in line


def test_event_data_that_is_json_but_not_an_object_is_damage_too(tmp_path, broken_run):
    _damaged(tmp_path, broken_run, "UPDATE events SET data = '[1, 2]' WHERE seq = 6")
    line = one_error_line(cli(*READERS["replay"], cwd=tmp_path), "E_DB_CORRUPT")
    assert "events row 6: data is list, not an object" in line


@pytest.mark.parametrize("argv", [READERS["a2a export"], ["state", "--db", "damaged.db"], READERS["replay"]],
                         ids=["a2a export", "state", "replay"])
def test_an_unknown_task_state_is_one_line_naming_the_task(tmp_path, broken_run, argv):
    _damaged(tmp_path, broken_run, "UPDATE tasks SET state = 'weird' WHERE task_id = 'T-1'")
    line = one_error_line(cli(*argv, cwd=tmp_path), "E_DB_CORRUPT")
    assert "tasks row T-1: state 'weird' is not a task state" in line


# ---------------------------------------------------------------------------- not a file


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


NOT_FILES = {
    "trace validate FIFO": (["trace", "validate", "{fifo}"], "trace file {fifo} is a FIFO (named pipe)"),
    "check --db FIFO": (["check", "--db", "{fifo}"], "--db {fifo} is a FIFO (named pipe)"),
    "deliver FIFO": (["deliver", "{fifo}", "--db", "x.db"], "envelope file {fifo} is a FIFO (named pipe)"),
    "lab verify FIFO": (["lab", "verify", "{fifo}"], "submission {fifo} is a FIFO (named pipe)"),
    "machine check FIFO": (["machine", "check", "{fifo}"], "machine file {fifo} is a FIFO (named pipe)"),
    "state --db a device": (["state", "--db", "/dev/null"], "--db /dev/null is a device"),
    "trace validate a device": (["trace", "validate", "/dev/zero"], "trace file /dev/zero is a device"),
    "lab verify a folder": (["lab", "verify", "{folder}"], "submission {folder} is a folder"),
    "machine check a folder": (["machine", "check", "{folder}"], "machine file {folder} is a folder"),
}


@pytest.mark.parametrize("argv,says", NOT_FILES.values(), ids=NOT_FILES.keys())
def test_a_fifo_a_device_or_a_folder_where_a_file_is_expected_is_refused_at_once(tmp_path, fifo, argv, says):
    """A FIFO with no writer would block the reader's open forever: the command must not open it."""
    names = {"fifo": fifo, "folder": tmp_path}
    p = cli(*[a.format(**names) for a in argv], cwd=tmp_path)
    assert says.format(**names) in one_error_line(p, "E_NOT_A_FILE")
    assert sorted(os.listdir(tmp_path)) == ["pipe"], "something was written"


def test_a_scenario_that_is_a_fifo_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "s.toml")
    p = cli("run", "s.toml", "--db", "x.db", cwd=tmp_path)
    assert "scenario s.toml is a FIFO (named pipe)" in one_error_line(p, "E_NOT_A_FILE")


# ---------------------------------------------------------------------------- explore's faults as run's


def test_explore_refuses_a_fault_selector_no_run_matches_as_run_does(tmp_path):
    ran = one_error_line(cli("run", "--fault", "duplicate:M-999", "--db", "x.db", cwd=tmp_path), "E_FAULT_NO_MATCH")
    explored = one_error_line(cli("explore", "--fault", "duplicate:M-999", "--depth", "3", cwd=tmp_path),
                              "E_FAULT_NO_MATCH")
    assert explored == ran and "duplicate:M-999" in explored
    assert os.listdir(tmp_path) == []


def test_explore_still_takes_a_selector_the_run_matches(tmp_path):
    p = cli("explore", "--fault", "duplicate:M-1", "--depth", "2", "--json", cwd=tmp_path)
    assert p.returncode in (0, 1), p.stderr
