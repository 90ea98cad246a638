"""The crash loop over every command that writes (issue 43, part 6): ``protolab bench crash --command
run|deliver|lab-submit|all``. Half the kills land at hook steps (the process stops itself there and is
killed: each step reached for sure, no timing), half at seeded random moments; what each kill leaves is
checked. These run a few cycles: the figures of a real loop are in docs/performance.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sim.bench import bench_crash_all
from sim.runfile import STEPS

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = ("corrupt", "lost", "not_a_prefix", "invariant_failures", "replay_mismatches", "partials_left",
            "inputs_changed")


def _sound(r: dict, command: str, cycles: int) -> dict:
    o = r["commands"][command]
    assert {k: o[k] for k in PROBLEMS} == dict.fromkeys(PROBLEMS, 0), o
    assert o["kills"] == cycles and sum(o["phases"].values()) == cycles, o
    return o


@pytest.mark.slow  # grading/killing real processes: seconds each; the slow set (CI) runs it
def test_the_deliver_loop_kills_at_its_commits_and_finds_every_delivery_made():
    r = bench_crash_all(4, commands=("deliver",), envelopes=40, seed=3)
    o = _sound(r, "deliver", 4)
    # the hooked kills, whatever the machine's speed: just before the first commit, then just after it
    assert o["phases"].get("committing#1 (step)") == 1 and o["phases"].get("committed#1 (step)") == 1, o
    assert r["problems"] == 0 and r["kills"] == 4


def test_bench_crash_refuses_an_unknown_command_and_too_few_envelopes():
    for argv, word in ((["--command", "nope"], "--command"), (["--command", "run", "--envelopes", "3"], "--envelopes")):
        p = subprocess.run([sys.executable, "-m", "sim.cli", "bench", "crash", *argv], capture_output=True, text=True,
                           cwd=ROOT)
        assert p.returncode == 2 and "Traceback" not in p.stderr
        assert p.stderr.startswith("error: E_USAGE: ") and word in p.stderr and len(p.stderr.splitlines()) == 1


@pytest.mark.slow
def test_bench_crash_command_from_the_shell_prints_per_phase_rows_and_json():
    p = subprocess.run([sys.executable, "-m", "sim.cli", "bench", "crash", "--command", "deliver", "--cycles", "2",
                        "--envelopes", "40", "--json"], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["kills"] == 2 and r["problems"] == 0 and list(r["commands"]) == ["deliver"]
    p = subprocess.run([sys.executable, "-m", "sim.cli", "bench", "crash", "--command", "deliver", "--cycles", "1",
                        "--envelopes", "40"], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert "1 x kill -9, 0 problems" in p.stdout and "committing#1 (step)" in p.stdout


@pytest.mark.slow
def test_the_run_loop_kills_at_every_step_of_putting_the_run_in_place():
    """Twenty kills of 'run stress': ten at the hook steps (the first group commit before and after, then
    every step of put_in_place, the window between the checkpoint and the rename included), ten at random."""
    r = bench_crash_all(20, commands=("run",), tasks=300, seed=1)
    o = _sound(r, "run", 20)
    for step in ("committing#1", "committed#1", *STEPS):
        assert o["phases"].get(f"{step} (step)", 0) >= 1, (step, o["phases"])


@pytest.mark.slow
def test_the_lab_submit_loop_leaves_no_submission_or_a_whole_one():
    from sim.cli.bench import _played_lab
    from sim.files import FILE_STEPS

    r = bench_crash_all(6, commands=("lab-submit",), lab_setup=_played_lab, seed=2)
    o = _sound(r, "lab-submit", 6)
    assert o["temporary_folders_left"] == 0  # its copy of the run is beside the submission, swept with its partial
    for step in FILE_STEPS:
        assert o["phases"].get(f"{step} (step)", 0) >= 1, (step, o["phases"])
