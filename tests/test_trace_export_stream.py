"""`protolab trace export` a message at a time (issue 12: flat memory at any run size).

The exporter never holds the conversation: one pass over the message log learns what the header
needs, a second writes each message judged by the validator as it goes. What it must remember of
every message (ids seen and accepted, each task's last request, where ids first appear) lives in sets
and dicts for a small run and in temp tables on disk past ``SPILL_AT``. These tests pin that the
streamed export is exactly what validating and annotating the whole trace gives, in both modes, and
that its text is the one ``json.dumps`` would write.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

import sim.conversation as conversation
from sim.conversation import TraceExport, export_trace
from sim.live import LiveRun
from sim.protocol import validate
from sim.protocol.replay import annotate, replay
from sim.runner import run_scenario
from sim.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent
RUNS = [
    ("publish-report", "safe", ()),
    ("publish-report", "naive", ("duplicate", "late-failure")),
    ("fan-out", "safe", ("crash",)),  # earlier body generations, a gather
    ("fan-out", "safe", ("silent",)),
    ("fan-out", "naive", ("resend", "reorder")),
    ("stress", "safe", ("duplicate", "reorder", "crash")),
]


def _stress(tasks: int) -> object:
    sc = load_scenario("stress")
    return dataclasses.replace(sc, stress=dataclasses.replace(sc.stress, tasks=tasks))


def _store(name, policy, faults, db=None):
    sc = _stress(60) if name == "stress" else load_scenario(name)
    return run_scenario(sc, policy=policy, faults=list(faults), seed=3, strict_faults=False, db=db)


def _slim(trace: dict) -> dict:
    """The trace without its reducer outputs."""
    out = json.loads(json.dumps(trace))
    out.pop("stateDigest", None)
    for m in out["messages"]:
        m.pop("stateDigestAfter", None)
    for g in out["gathers"]:
        g.pop("result", None)
    return out


def _reopened() -> LiveRun:
    live = LiveRun(load_scenario("fan-out"), faults=["conflicting-digest"])
    live.run_to_end()
    assert live.reconcile("T-1", "ready", ["M-3", "M-4"]).decision == "accepted"
    live.run_to_end()
    return live


def _exports(store) -> list[dict]:
    n = conversation.epoch_count(store)
    return [export_trace(store, e) for e in range(1, n + 1)]


@pytest.mark.parametrize("run", RUNS, ids=lambda r: " ".join((r[0], r[1], *r[2])))
def test_the_streamed_export_is_what_validating_the_whole_trace_annotates(run, monkeypatch):
    store = _store(*run)
    try:
        trace = export_trace(store)
        # the judge that ran beside the writer said what the whole-trace validator says
        assert annotate(_slim(trace)) == trace
        assert replay(trace).equivalent
        # spilled to temp tables, every byte is the same
        monkeypatch.setattr(conversation, "SPILL_AT", 0)
        assert export_trace(store) == trace
    finally:
        store.close()


def test_every_epoch_of_a_reopened_conversation_streams_the_same_in_both_modes(monkeypatch):
    live = _reopened()
    try:
        kept = _exports(live.store)
        assert len(kept) == 2
        for trace in kept:
            assert annotate(_slim(trace)) == trace
        assert validate(kept[1]).terminal == "COMPLETED"
        monkeypatch.setattr(conversation, "SPILL_AT", 0)
        assert _exports(live.store) == kept
    finally:
        live.close()


def test_the_written_text_is_json_dumps_of_the_trace(tmp_path, monkeypatch):
    import io

    store = _store("fan-out", "safe", ("crash",))
    try:
        buf = io.StringIO()
        TraceExport(store).write(buf)
        trace = export_trace(store)
        assert buf.getvalue() == json.dumps(trace, indent=2, ensure_ascii=False) + "\n"
        monkeypatch.setattr(conversation, "SPILL_AT", 0)
        again = io.StringIO()
        TraceExport(store).write(again)
        assert again.getvalue() == buf.getvalue()
    finally:
        store.close()


def test_the_tail_is_known_only_after_the_messages():
    store = _store("publish-report", "safe", ())
    try:
        ex = TraceExport(store)
        with pytest.raises(RuntimeError):
            ex.tail()
        n = sum(1 for _ in ex.messages())
        assert n == ex.count and ex.tail()["stateDigest"].startswith("sha256:")
    finally:
        store.close()


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "sim", *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_the_command_writes_the_same_trace_to_a_file_and_to_stdout_and_leaves_no_partial(tmp_path):
    db = tmp_path / "run.db"
    store = _store("fan-out", "safe", ("crash",), db=db)
    try:
        expected = json.dumps(export_trace(store), indent=2, ensure_ascii=False) + "\n"
    finally:
        store.close()
    out = tmp_path / "trace.json"
    r = _cli("trace", "export", "--db", str(db), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_text() == expected
    assert "messages of conversation" in r.stdout
    r = _cli("trace", "export", "--db", str(db))
    assert r.returncode == 0 and r.stdout == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.db", "trace.json"]


def test_an_unwritable_destination_is_one_line_and_nothing_is_left(tmp_path):
    db = tmp_path / "run.db"
    _store("publish-report", "safe", (), db=db).close()
    r = _cli("trace", "export", "--db", str(db), "-o", str(tmp_path / "no-such-folder" / "t.json"))
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error: E_FILE_WRITE: cannot write ") and len(r.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.db"]


def _peak_of_export(tasks: int, tmp_path: Path) -> int:
    db = tmp_path / f"s{tasks}.db"
    run_scenario(_stress(tasks), policy="safe", faults=["crash", "reorder"], seed=1, db=db, strict_faults=False).close()
    from sim.store import Store

    store = Store.open(db, readonly=True)
    try:
        tracemalloc.start()
        ex = TraceExport(store)
        with open(tmp_path / f"s{tasks}.json", "w") as fh:
            ex.write(fh)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return peak
    finally:
        store.close()


@pytest.mark.slow
def test_a_spilled_export_holds_no_more_for_three_times_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(conversation, "SPILL_AT", 0)
    # both past the first page of rows the store reads at a time (5,000 deliveries)
    small, big = _peak_of_export(2400, tmp_path), _peak_of_export(7200, tmp_path)
    # three times the messages, the same memory (give or take the capped findings)
    assert big < small * 1.15, (small, big)


def test_a_stream_judge_says_what_validate_says_keeping_the_first_findings_and_counting_the_rest():
    from sim.protocol.trace import StreamJudge, scan_messages, wanted_ids

    trace = json.loads((ROOT / "data" / "traces" / "valid-trace.json").read_text())
    msgs = trace["messages"]
    # a replayed message, one from a stranger, and one dated after the deadline: several findings
    trace["messages"] = msgs[:3] + [dict(msgs[1])] + [dict(msgs[2], id="x-1", sender="stranger")] + msgs[3:]
    trace["messageCeiling"] = len(trace["messages"])
    full = validate(trace)
    assert len(full.errors) >= 3
    header = dict(trace, messages=[])
    judge = StreamJudge(header, scan_messages(trace["messages"], wanted_ids(trace)), keep=2)
    flags = list(judge.judge(iter(trace["messages"])))
    assert flags == [i in full.accepted_positions for i in range(len(trace["messages"]))]
    r = judge.report
    assert r.errors == full.errors[:2] and not r.valid
    assert r.reason.startswith(f"invalid: {len(full.errors)} errors (")
    assert (r.terminal, r.terminal_if_valid) == (full.terminal, full.terminal_if_valid)
    assert {k: g.to_json() for k, g in r.gathers.items()} == {k: g.to_json() for k, g in full.gathers.items()}
    # keeping everything, it is validate's report, but for the accepted ids it was not asked to list
    everything = StreamJudge(header, scan_messages(trace["messages"], wanted_ids(trace)), keep=10**6)
    list(everything.judge(trace["messages"]))
    assert everything.report.errors == full.errors and everything.report.reason == full.reason


def test_each_pass_reports_how_far_it_is():
    store = _store("stress", "safe", ())
    try:
        heard = []
        ex = TraceExport(store, progress=lambda what, done, total: heard.append((what, done, total)))
        assert heard[-1][0] == "reading the message log" and heard[-1][1] == heard[-1][2] == store.count_of("deliveries")
        text = json.dumps(ex.as_dict())
        assert heard[-1] == ("writing the trace", heard[-1][2], heard[-1][2])
        # one epoch: every delivery but the network's copies the runtime deduplicated is a message, well under
        # the ceiling the run declared before it began
        assert len(json.loads(text)["messages"]) <= heard[-1][2] <= json.loads(text)["messageCeiling"]
        assert json.loads(text)["messageCeiling"] == store.bounds()["message_ceiling"]
    finally:
        store.close()
