"""The shape of 'trace validate' and 'trace diagram' memory (issue 49): read a message at a time, ten
times the messages cost about the same peak, never ten times it (the whole parse grew with the file).
Figures, not seconds: each command's peak resident memory, as `protolab bench trace --memory` takes it."""

import json
import os
import subprocess
import sys

import pytest

from sim.benchmem import command_figures


def _peak_kb(argv: list[str], env: dict) -> int:
    f = command_figures(argv, env=env)
    assert f["exit"] in (0, 1), f["stderr"]
    return int(f["peak_mb"] * 1024)


@pytest.mark.slow
def test_ten_times_the_messages_cost_about_the_same_peak(tmp_path):
    env = {**os.environ, "PROTOLAB_TRACE_STREAM_AT": "0"}  # streamed at both sizes
    peaks: dict = {}
    for n in (20_000, 200_000):
        path = tmp_path / f"t{n}.json"
        subprocess.run([sys.executable, "-c", "import json, sys; from sim.protocol import synthetic_trace; "
                        "json.dump(synthetic_trace(int(sys.argv[2])), open(sys.argv[1], 'w', encoding='utf-8'))",
                        str(path), str(n)], check=True)
        peaks[n] = {
            "validate": _peak_kb([sys.executable, "-m", "sim.cli", "trace", "validate", str(path), "--json"], env),
            "diagram": _peak_kb([sys.executable, "-m", "sim.cli", "trace", "diagram", str(path)], env),
        }
    for cmd in ("validate", "diagram"):
        small, big = peaks[20_000][cmd], peaks[200_000][cmd]
        assert big < 1.5 * small, json.dumps(peaks)  # flat: the whole parse grew about tenfold
