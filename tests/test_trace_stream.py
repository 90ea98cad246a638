"""'trace validate' and 'trace diagram' read a big trace a message at a time (issue 49): the same report,
byte for byte, as the whole parse; the same one-line refusal for a document the whole parse refuses."""

import io
import json
import random
from pathlib import Path

import pytest

from sim.cli import main
from sim.cli import trace as trace_cli
from sim.errors import InputError
from sim.protocol import loads_trace, validate
from sim.protocol.stream import IdSet, TraceFile, validate_file
from sim.store.scratch import scratch_ids
from test_validator_reports import corpus

DATA = Path(__file__).resolve().parent.parent / "data" / "traces"


def _whole(raw: bytes):
    """What the whole read says: the report, or the refusal's code and line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return ("E_NOT_UTF8", f"trace file X is not UTF-8 ({e.reason} at byte {e.start})")
    try:
        return validate(loads_trace(text, "trace file X")).to_dict()
    except InputError as e:
        return (e.code, str(e))


def _streamed(raw: bytes, chunk: int, *, spill: bool = False):
    tf = TraceFile(lambda: io.BytesIO(raw), "trace file X", "X", chunk=chunk)
    accepted: list = []
    try:
        with scratch_ids() as tables:
            import sim.protocol.stream as stream

            old = stream.SPILL_AT
            stream.SPILL_AT = 0 if spill else old
            try:
                r = validate_file(tf, tables=tables, on_accepted=lambda i, mid: accepted.append(mid))
            finally:
                stream.SPILL_AT = old
    except InputError as e:
        return (e.code, str(e))
    d = r.to_dict()
    d["accepted"] = accepted
    return d


@pytest.mark.slow  # measured over 25 s in the quick loop at load 6-10 on 2 cores (2026-12-07)
def test_on_the_whole_corpus_a_trace_read_a_message_at_a_time_gives_the_same_report():
    traces = corpus()
    assert len(traces) > 1000
    for k, (key, trace) in enumerate(list(traces.items())[::6]):
        # two layouts: compact, and the export's indent=2 with the header after the messages
        raw = json.dumps(trace).encode() if k % 2 else json.dumps(trace, indent=2).encode()
        assert _streamed(raw, (97, 1024, 1 << 16)[k % 3], spill=k % 5 == 0) == _whole(raw), key


def test_every_cut_of_a_trace_is_refused_with_the_whole_parses_line():
    raw = (DATA / "valid-trace.json").read_bytes()
    for n in list(range(0, len(raw), 11)) + list(range(len(raw) - 40, len(raw))):
        cut = raw[:n]
        got = _streamed(cut, 61)
        assert got == _whole(cut), n
        if raw[n:].strip():  # a truncated trace is never a verdict
            assert isinstance(got, tuple) and got[0] == "E_JSON", n


def test_a_damaged_trace_is_refused_or_judged_as_the_whole_parse_does():
    raw = (DATA / "quorum-trace.json").read_bytes()
    rnd = random.Random(49)
    tokens = [b"{", b"}", b"[", b"]", b",", b":", b'"', b"\\", b" ", b"\n", b"1", b"e", b"-", b".", b"NaN",
              b"\xff", b"\xc3", b"\\u12", b"\t", b'"id"', b"1e999999"]
    for _ in range(300):
        x = bytearray(raw)
        for _ in range(rnd.randint(1, 3)):
            p = rnd.randrange(len(x))
            op = rnd.random()
            if op < 0.4:
                x[p:p + 1] = rnd.choice(tokens)
            elif op < 0.7:
                x[p:p] = rnd.choice(tokens)
            else:
                del x[p:p + rnd.randint(1, 5)]
        x = bytes(x)
        assert _streamed(x, rnd.choice((7, 16, 64))) == _whole(x), x


def test_an_id_set_is_exact_past_its_bloom_filter():
    with scratch_ids() as tables:
        ids = IdSet(10, tables("t"), flush_at=3)
        for k in range(2000):
            ids.add(f"m{k}")
        assert all(f"m{k}" in ids for k in range(2000))
        assert not any(f"n{k}" in ids for k in range(5000))
        assert 1 not in ids and None not in ids


@pytest.fixture
def streamed(monkeypatch):
    """The CLI reads every trace a message at a time (as it does past STREAM_AT bytes)."""
    monkeypatch.setattr(trace_cli, "STREAM_AT", -1)


def _run(capsys, *argv):
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in argv])
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


@pytest.mark.parametrize("name", ["valid-trace.json", "crash-generations-trace.json", "quorum-trace.json",
                                  "invalid/sequence-gap.json", "invalid/duplicate-message.json"])
@pytest.mark.parametrize("as_json", [False, True])
def test_the_command_writes_the_same_bytes_streamed(capsys, monkeypatch, name, as_json):
    path = DATA / name
    if not path.exists():
        pytest.skip(f"no fixture {name}")
    argv = ["trace", "validate", path] + (["--json"] if as_json else [])
    whole = _run(capsys, *argv)
    monkeypatch.setattr(trace_cli, "STREAM_AT", -1)
    assert _run(capsys, *argv) == whole


def test_a_truncated_big_trace_is_an_error_not_a_verdict(tmp_path, capsys, streamed):
    raw = (DATA / "valid-trace.json").read_bytes()
    p = tmp_path / "cut.json"
    p.write_bytes(raw[: len(raw) * 2 // 3])
    code, out, err = _run(capsys, "trace", "validate", p)
    assert code == 2 and out == ""
    assert err.startswith("error: E_JSON: trace file") and err.count("\n") == 1


@pytest.mark.parametrize("extra", [[], ["--text"], ["--from", "2", "--count", "3"], ["--count", "4", "--text"]])
@pytest.mark.parametrize("name", ["quorum-trace.json", "invalid/sequence-gap.json"])
def test_a_diagram_is_the_same_read_a_message_at_a_time(capsys, monkeypatch, name, extra):
    argv = ["trace", "diagram", DATA / name, *extra]
    whole = _run(capsys, *argv)
    monkeypatch.setattr(trace_cli, "STREAM_AT", -1)
    assert _run(capsys, *argv) == whole


def test_a_long_trace_is_drawn_a_window_at_a_time_and_says_so(capsys):
    code, out, _ = _run(capsys, "trace", "diagram", DATA / "quorum-trace.json", "--count", "3", "--text")
    assert code == 0
    first = out.splitlines()[0]
    assert first.startswith("messages 1-3 of ") and "--from N --count K" in first
    code, out, _ = _run(capsys, "trace", "diagram", DATA / "invalid" / "sequence-gap.json", "--count", "2")
    lines = out.splitlines()
    assert lines[0] == "sequenceDiagram" and lines[1].startswith("  %% messages ")
    assert "rejected E_SEQUENCE_GAP" in out  # the default window holds the first rejected message
