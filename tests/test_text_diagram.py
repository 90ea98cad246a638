"""The plain-text sequence diagram (the TUI's conversation view and `trace diagram --text`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sim.protocol import text_sequence, validate

ROOT = Path(__file__).resolve().parent.parent


def _trace(name: str) -> dict:
    return json.loads((ROOT / "data" / "traces" / name).read_text())


def test_one_labelled_arrow_per_message_between_the_right_lanes():
    trace = _trace("valid-trace.json")
    lines = text_sequence(trace, validate(trace), width=90)
    head, *_ = lines
    refs = [p["ref"] for p in trace["participants"]]
    assert all(r in head[0] for r in refs)
    labels = [t for t, k in lines if k == "label"]
    arrows = [(t, k) for t, k in lines if k in ("arrow", "fence")]
    assert len(labels) == len(arrows) == len(trace["messages"])
    for m, label in zip(trace["messages"], labels):
        assert f"{m['id']} {m['kind']}" in label
    # the fence goes to every recipient: one arrowhead per recipient
    fence_i = next(i for i, m in enumerate(trace["messages"]) if m["kind"] == "FENCE")
    line, kind = arrows[fence_i]
    assert kind == "fence" and line.count("▶") + line.count("◀") == len(trace["messages"][fence_i]["recipients"])
    assert all(len(t) <= 92 for t, _ in lines)


def test_a_rejected_message_is_drawn_with_its_code():
    trace = _trace("invalid/sequence-gap.json")
    report = validate(trace)
    assert not report.valid
    lines = text_sequence(trace, report, width=100)
    bad = [t for t, k in lines if k == "rejected"]
    assert bad and any("E_SEQUENCE_GAP" in t for t in bad)


def test_trace_diagram_text_on_the_command_line():
    r = subprocess.run([sys.executable, "-m", "sim", "trace", "diagram", "data/traces/valid-trace.json", "--text"],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "FENCE" in r.stdout and "▶" in r.stdout and "sequenceDiagram" not in r.stdout
