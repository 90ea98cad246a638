"""``protolab bench grade``: the grader's figure beside its floor, in one run, saying which sandbox."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # a benchmark: two passes over a generated class
def test_bench_grade_prints_the_graders_rate_beside_the_floor_and_names_the_sandbox(tmp_path):
    r = subprocess.run([sys.executable, "-m", "sim", "bench", "grade", "-n", "10", "--json", "--course", str(ROOT)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["submissions"] == 10 and out["per_minute"] > 0 and out["floor_per_minute"] > 0
    # the ratio is the grader's seconds per submission over the floor's (the same class, one process)
    per_sub, floor_per_sub = out["seconds"] / 10, out["floor_seconds"] / out["floor_submissions"]
    assert abs(out["ratio"] - per_sub / floor_per_sub) < 0.02
    assert out["sandbox"].startswith(("bubblewrap", "fallback: "))
    # a generated class scores as it was written to (correct full, wrong less, hostile 0)
    assert out["unexpected_scores"] == []
    assert list(tmp_path.iterdir()) == []  # it writes nothing where it runs
