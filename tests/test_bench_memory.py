"""protolab bench memory: every command's whole peak memory and CPU beside run's, at each size; and the
shape it holds (slow): memory flat and CPU linear in the run's size."""

import json

import pytest
from conftest import run_cli

from sim import benchmem


def test_each_command_is_measured_in_its_own_process_and_a_kept_run_is_reused(tmp_path):
    commands = [c for c in benchmem.COMMANDS if c[0] in ("check", "timeline")]
    first = benchmem.bench_memory([20, 40], tmp_path, commands=commands)
    assert [r["tasks"] for r in first["sizes"]] == [20, 40]
    for r in first["sizes"]:
        assert set(r["commands"]) == {"run", "check", "timeline"} and r["deliveries"] > 0
        for name, f in r["commands"].items():
            assert f["exit"] == 0 and "failed" not in f, (name, f)
            assert f["peak_mb"] > 10 and f["cpu_s"] > 0  # a whole Python process: tens of MB, some CPU
        assert r["commands"]["run"]["reused"] is False
        kept = json.loads((tmp_path / f"stress-{r['tasks']}.json").read_text())
        assert kept["peak_mb"] == r["commands"]["run"]["peak_mb"]
    (f,) = first["factors"]
    assert f["from"] == 20 and f["to"] == 40 and f["size_ratio"] == 2
    a, b = (r["commands"]["check"]["cpu_s"] for r in first["sizes"])
    assert f["cpu"]["check"] == round(b / a, 2)
    # a second bench over the same folder reuses the runs and their recorded figures
    again = benchmem.bench_memory([40], tmp_path, commands=commands[:1])
    run = again["sizes"][0]["commands"]["run"]
    assert run["reused"] is True and run["peak_mb"] == first["sizes"][1]["commands"]["run"]["peak_mb"]
    assert not list(tmp_path.glob("out-*"))  # each command's output went with it


def test_bench_memory_refuses_bad_sizes_in_one_line(capsys):
    for sizes in ("x", "0", ""):
        code, _out, err = run_cli(capsys, "bench", "memory", "--sizes", sizes)
        assert code == 2 and err.startswith("error: E_USAGE: ") and err.count("\n") == 1, (sizes, err)


@pytest.mark.slow
def test_every_command_stays_flat_and_linear_from_2000_to_20000_tasks(tmp_path):
    """Issue 49/50's shape: ten times the run, each command's peak memory about the same and its CPU growing
    linearly, not quadratically (a command that read a whole-run list or did quadratic work would break
    one or the other).

    The CPU bound tells the two shapes apart without leaning on the machine's speed: for 10x the run,
    linear work takes about 10x, SQLite's B-trees and the spill to temp tables past 20,000 deliveries add
    a log factor (about 12x), and CPU seconds on a shared, busy machine wander by a third either way (CI
    measured 'check' at 13.5x, this machine at 8-11.5x); quadratic work takes about 100x. The figure
    itself, and issue 50's 11x, are the bench's to print (docs/performance.md), not a test's to time."""
    result = benchmem.bench_memory([2000, 20000], tmp_path)
    small, big = (r["commands"] for r in result["sizes"])
    (f,) = result["factors"]
    for name in big:
        assert "failed" not in big[name] and "failed" not in small[name], name
        if name == "trace validate":
            continue  # reads its file whole (issue 49's trace part, another session's)
        assert big[name]["peak_mb"] <= 1.5 * small[name]["peak_mb"] + 40, (name, small[name], big[name])
    for name in ("check", "events", "timeline", "state", "messages", "messages --json", "state --json"):
        assert f["cpu"][name] < 20, (name, f["cpu"][name], small[name], big[name])
