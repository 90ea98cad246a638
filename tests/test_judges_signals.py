"""Judging the CLI's exit status when a signal stops a command (sim/cli.py main): Ctrl-C is 130,
SIGTERM 143, SIGHUP 129, each with one line on stderr. Two paths lead there and each is pinned
with a real process and a real signal, sent once the command says it is waiting: a command that
lets the interruption reach Typer (the tour, paused at its prompt: Typer answers exit status 130
and main tells the signals apart), and one that turns it into its own error (run)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from ptyrun import Terminal

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and a pseudo-terminal")


@pytest.mark.parametrize("sig, status, words", [
    (signal.SIGINT, 130, "error: E_ABORTED: interrupted (Ctrl-C)"),
    (signal.SIGTERM, 143, "error: E_ABORTED: interrupted by SIGTERM"),
    (signal.SIGHUP, 129, "error: E_ABORTED: interrupted by SIGHUP"),
])
def test_a_signal_at_the_tours_prompt_exits_128_plus_the_signal_with_one_line(tmp_path, sig, status, words):
    term = Terminal([sys.executable, "-m", "sim.cli", "tour", "--db", str(tmp_path / "tour.db")], cwd=ROOT)
    try:
        term.wait_for("enter: the next step")  # step 1 delivered; the tour now waits on its terminal
        term.proc.send_signal(sig)
        assert term.finish() == status, term.text[-2000:]
    finally:
        if term.proc.poll() is None:  # pragma: no cover - only when an assertion above failed
            term.proc.kill()
    # the line follows the prompt it interrupted: "enter: the next step (...) error: E_ABORTED: ..."
    after = term.text.split("what was delivered stays in the file)", 1)[1]
    assert "Traceback" not in term.text
    assert [line.strip() for line in after.splitlines() if line.strip()] == [words]
    assert "step 2 of" not in after  # nothing more was delivered


@pytest.mark.slow  # the same path runs by default in tests/test_reliability.py; here through a terminal
@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_during_a_run_exits_128_plus_the_signal_and_writes_nothing(tmp_path, sig, status):
    # run turns the interruption into its own one-line error (its partial file removed)
    db = tmp_path / "out.db"
    term = Terminal([sys.executable, "-m", "sim.cli", "run", "stress", "--tasks", "3000", "--db", str(db), "--json"],
                    cwd=ROOT)
    try:
        # the run has started writing once its partial file exists
        _wait_for_file(term, tmp_path, ".out.db.partial-")
        term.proc.send_signal(sig)
        assert term.finish(timeout=60) == status, term.text[-2000:]
    finally:
        if term.proc.poll() is None:  # pragma: no cover
            term.proc.kill()
    assert "Traceback" not in term.text
    lines = [line.strip() for line in term.text.splitlines() if line.strip().startswith("error:")]
    assert len(lines) == 1 and lines[0].startswith("error: E_ABORTED: ")
    assert signal.Signals(sig).name in lines[0] and "nothing was written" in lines[0]
    assert list(tmp_path.iterdir()) == []


def _wait_for_file(term: Terminal, folder: Path, prefix: str) -> None:
    import select

    for _ in range(3000):  # each look waits for output or 0.02 s of nothing; the file is the signal
        if any(p.name.startswith(prefix) for p in folder.iterdir()):
            return
        if term.proc.poll() is not None:
            break
        select.select([term.master], [], [], 0.02)
        term.read(0.0)
    raise AssertionError(f"the run never started writing; screen:\n{term.text[-2000:]}")
