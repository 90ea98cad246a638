"""The TUI commands as a person runs them: in a real (pseudo-)terminal, and with bad input."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from ptyrun import Terminal

PROTOLAB = [sys.executable, "-m", "sim"]


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _run(args, cwd, **kw):
    return subprocess.run(PROTOLAB + args, cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL, **kw)


def test_demo_opens_the_tui_with_three_separate_panes_and_steps(tmp_path):
    t = Terminal(PROTOLAB + ["demo", "--paused"], cwd=tmp_path, size=(120, 36))
    screen = t.wait_for("State", "Events", "Messages", "paused", "Step")
    assert "Traceback" not in screen
    t.press("   ")  # three deliveries
    t.wait_for("3 deliveries")
    t.press("q")
    assert t.finish() == 0
    assert "the run is in protolab.db" in t.text
    assert (tmp_path / "protolab.db").exists()
    # what the TUI wrote is an ordinary run: the CLI reads it
    r = _run(["state", "--db", "protolab.db", "--json"], tmp_path)
    assert r.returncode == 0, r.stderr


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
def test_demo_played_to_the_end_writes_the_same_state_as_protolab_run(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    t = Terminal(PROTOLAB + ["demo"], cwd=tmp_path / "a", size=(120, 36))
    t.wait_for("State", "Events", "Messages")
    t.press("++++")  # faster
    t.wait_for("finished", timeout=60)
    t.press("q")
    assert t.finish() == 0
    _run(["run"], tmp_path / "b").check_returncode()
    from sim.store import Store

    digests = []
    for d in ("a", "b"):
        with Store.open(tmp_path / d / "protolab.db", readonly=True) as s:
            digests.append((s.state_digest(), s.counts()))
    assert digests[0] == digests[1]


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
def test_tui_opens_a_finished_run_read_only_and_writes_nothing(tmp_path):
    _run(["run"], tmp_path).check_returncode()
    db = tmp_path / "protolab.db"
    before, mtime, listing = _sha(db), db.stat().st_mtime_ns, sorted(p.name for p in tmp_path.iterdir())
    t = Terminal(PROTOLAB + ["tui", "--db", "protolab.db"], cwd=tmp_path, size=(120, 36))
    t.wait_for("read-only", "State", "Events", "Messages")
    t.press(" ")  # walks the finished run: time travel, one delivery
    t.wait_for("TIME TRAVEL")
    t.press("dkp")  # live-only keys say so and do nothing
    t.wait_for("read-only: this run is finished")
    t.press("q")
    assert t.finish() == 0
    assert _sha(db) == before and db.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in tmp_path.iterdir()) == listing  # no -wal or -shm left beside it


def test_a_terminal_too_small_says_so_on_screen(tmp_path):
    t = Terminal(PROTOLAB + ["demo", "--paused"], cwd=tmp_path, size=(50, 12))
    t.wait_for("needs at least")
    t.press("q")
    assert t.finish() == 0
    assert "Traceback" not in t.text


def test_workshop_mode_opens_naive_beside_safe(tmp_path):
    t = Terminal(PROTOLAB + ["demo", "regression", "--paused"], cwd=tmp_path, size=(160, 40))
    t.wait_for("naive", "safe")
    t.press("e")
    t.wait_for("BROKEN NO_STATE_REGRESSION", "every invariant holds")
    t.press("q")
    assert t.finish() == 0


def test_demo_without_a_terminal_runs_headless_and_prints_the_run(tmp_path):
    r = _run(["demo"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "publish:R-1:T-2" in r.stdout and "state digest sha256:" in r.stdout
    assert "not a terminal" in r.stderr and "Traceback" not in r.stderr
    assert (tmp_path / "protolab.db").exists()
    r = _run(["demo", "regression"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "BROKEN" in r.stdout and "NO_STATE_REGRESSION" in r.stdout


@pytest.mark.quick_sample(3)
@pytest.mark.parametrize(
    "args, code",
    [
        (["tui", "--db", "missing.db"], "E_DB_MISSING"),
        (["tui", "--db", "corrupt.db"], "E_DB_CORRUPT"),
        (["tui", "no-such-scenario"], "E_UNKNOWN_SCENARIO"),
        (["tui", "broken.toml"], "E_"),
        (["tui", "--fault", "bogus"], "E_UNKNOWN_FAULT"),
        (["tui", "--policy", "weird"], "E_UNKNOWN_POLICY"),
        (["demo", "bogus"], "E_UNKNOWN_VALUE"),
        (["demo", "regression", "--fault", "nope"], "E_UNKNOWN_FAULT"),
        (["tui", "--db", "ok.db"], "E_NOT_A_TERMINAL"),
    ],
)
def test_bad_input_gets_one_line_and_exit_2_and_writes_nothing(tmp_path, args, code):
    (tmp_path / "corrupt.db").write_bytes(b"this is not sqlite at all" * 10)
    (tmp_path / "broken.toml").write_text("name = [unclosed\n")
    _run(["run", "--db", "ok.db"], tmp_path).check_returncode()
    before = {p.name: _sha(p) for p in tmp_path.iterdir()}
    r = _run(args, tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {code}"), r.stderr
    assert "Traceback" not in r.stderr
    assert {p.name: _sha(p) for p in tmp_path.iterdir()} == before


def test_a_bad_db_in_a_terminal_is_one_line_not_a_screen(tmp_path):
    (tmp_path / "corrupt.db").write_bytes(b"garbage" * 100)
    t = Terminal(PROTOLAB + ["tui", "--db", "corrupt.db"], cwd=tmp_path, size=(100, 30))
    assert t.finish() == 2
    assert "error: E_DB_CORRUPT" in t.text and "Traceback" not in t.text
