"""Every validator report in full: for a corpus of traces (the samples, every invalid sample, traces
exported from runs with faults, and every mutation of every valid one), the whole report (valid,
terminal, terminal_if_valid, reason, each finding's code, message id, pointer and text, the accepted
messages and their positions, each gather's reduction) is what a reviewer read and accepted, kept in
``tests/data/validator-reports.json``.

The rule tests pin each code; this pins the rest of what ``protolab trace validate --json`` prints, so a
validator that names the wrong message, points at the wrong field, or reduces a gather differently is
caught. After a deliberate change, rewrite the file with
``PROTOLAB_UPDATE_REPORTS=1 pytest tests/test_validator_reports.py`` and read the diff.
"""

import dataclasses
import json
import os
from functools import lru_cache
from pathlib import Path

import pytest

from sim.protocol import validate
from sim.protocol.mutate import MUTATIONS

TRACES = Path(__file__).resolve().parent.parent / "data" / "traces"
GOLDEN = Path(__file__).parent / "data" / "validator-reports.json"
RUNS = [("publish-report", "safe", ()), ("publish-report", "naive", ("duplicate", "late-failure")),
        ("fan-out", "safe", ("crash",)), ("fan-out", "safe", ("silent",)), ("fan-out", "naive", ("resend",))]


@lru_cache(maxsize=None)
def corpus() -> dict[str, dict]:
    from sim.conversation import export_trace
    from sim.runner import run_scenario
    from sim.scenario import load_scenario

    out = {}
    for p in sorted(TRACES.glob("*.json")) + sorted((TRACES / "invalid").glob("*.json")):
        out[str(p.relative_to(TRACES))] = json.loads(p.read_text())
    for name, policy, faults in RUNS:
        store = run_scenario(load_scenario(name), policy=policy, faults=list(faults), seed=3, strict_faults=False)
        try:
            out[f"run {name} {policy} {'+'.join(faults) or 'no faults'}"] = export_trace(store)
        finally:
            store.close()
    for base in sorted(k for k in out if "/" not in k):
        if not validate(out[base]).valid:
            continue
        for mu in MUTATIONS:
            try:
                out[f"{base} mutated: {mu.name}"] = mu.apply(out[base])
            except Exception:  # nothing of the kind this mutation breaks in this trace
                continue
    return out


def _report(trace: dict) -> dict:
    r = validate(trace)
    d = r.to_dict()
    d["accepted_positions"] = list(r.accepted_positions)
    d["gathers"] = {k: json.loads(json.dumps(dataclasses.asdict(g), default=str)) for k, g in r.gathers.items()}
    return json.loads(json.dumps(d, default=str))


@pytest.mark.skipif(not os.environ.get("PROTOLAB_UPDATE_REPORTS"), reason="rewrites the golden file")
def test_rewrite_the_golden_reports():
    GOLDEN.write_text(json.dumps({k: _report(t) for k, t in corpus().items()}, indent=1, sort_keys=True) + "\n")


def test_the_corpus_is_the_one_reviewed():
    assert set(corpus()) == set(json.loads(GOLDEN.read_text()))


def test_the_validator_says_on_every_trace_exactly_what_was_reviewed():
    golden = json.loads(GOLDEN.read_text())
    wrong = [k for k, t in corpus().items() if _report(t) != golden.get(k)]
    assert not wrong, f"{len(wrong)} reports differ, first: {wrong[0]}"
