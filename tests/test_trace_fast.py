"""The fast path of 'protolab trace validate' (sim/protocol/fast.py) says what the careful path says.

For every trace of the validator-report corpus (samples, invalid samples, exported runs, every mutation,
the planted and the damaged traces), written two ways, the fast path either gives up (None: the careful
parse and ``validate`` decide) or gives the very report the careful path gives; and it gives up on no
valid trace of the corpus. A repeated key anywhere in a trace is still refused, with the careful parse's
own line; so are what the stdlib refuses, and what msgspec reads differently (escapes, floats, deep values,
a byte order mark, text that is not ASCII).
"""

import json
from pathlib import Path

import pytest

from sim.cli import main
from sim.protocol import fast, validate
from test_validator_reports import corpus

TRACES = Path(__file__).resolve().parent.parent / "data" / "traces"


def _forms(trace) -> list[bytes]:
    return [json.dumps(trace, indent=2, ensure_ascii=False).encode(), json.dumps(trace, separators=(",", ":")).encode()]


def test_msgspec_is_there():
    assert fast.AVAILABLE  # a hard dependency: without it every trace takes the careful path


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
def test_on_the_whole_corpus_the_fast_path_gives_the_careful_report_or_gives_up_and_takes_every_valid_trace():
    took, gave_up_on_valid = 0, []
    for key, trace in corpus().items():
        for raw in _forms(trace):
            careful = validate(json.loads(raw))
            quick = fast.validate_bytes(raw)
            if quick is None:
                if careful.valid:
                    gave_up_on_valid.append(key)
                continue
            took += 1
            assert quick == careful, key
            assert quick.to_dict() == careful.to_dict() and quick.accepted_positions == careful.accepted_positions, key
    assert gave_up_on_valid == []
    assert took >= 120


def test_the_fast_path_gives_up_on_every_message_finding():
    """Each invalid sample with a finding on a message: None (the careful path reports it)."""
    for p in sorted((TRACES / "invalid").glob("*.json")):
        careful = validate(json.loads(p.read_bytes()))
        quick = fast.validate_bytes(p.read_bytes())
        if any(f.pointer.startswith("/messages") for f in careful.errors):
            assert quick is None, p.name
        else:
            assert quick in (None, careful), p.name


def _objects(value, path=()):
    """The path of every JSON object in ``value``."""
    if isinstance(value, dict):
        yield path
        for k, v in value.items():
            yield from _objects(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _objects(v, (*path, i))


def _with_repeated_key(trace, path, which: str) -> bytes:
    """``trace`` as text, the object at ``path`` repeating its first or last key (with another value
    first, the value the careful parse would otherwise keep last)."""
    marker = "@@repeat@@"
    t = json.loads(json.dumps(trace))
    obj = t
    for step in path:
        obj = obj[step]
    key = next(iter(obj)) if which == "first" else list(obj)[-1]
    obj[marker] = None
    text = json.dumps(t, indent=2)
    return text.replace(json.dumps(marker) + ": null", f"{json.dumps(key)}: 0").encode()


@pytest.mark.slow_cases("valid-trace.json")  # measured over 25 s in the quick loop at load 6-10 on 2 cores (2026-12-07)
@pytest.mark.parametrize("name", ["valid-trace.json", "quorum-trace.json", "first-success-trace.json"])
def test_a_repeated_key_in_any_object_of_a_trace_is_refused_with_the_careful_line(tmp_path, capsys, name):
    trace = json.loads((TRACES / name).read_text())
    paths = list(_objects(trace))
    assert len(paths) > 20
    for path in paths:
        if not trace_at(trace, path):
            continue  # an empty object has no key to repeat
        for which in ("first", "last"):
            raw = _with_repeated_key(trace, path, which)
            assert fast.validate_bytes(raw) is None, (path, which)
            f = tmp_path / "t.json"
            f.write_bytes(raw)
            with pytest.raises(SystemExit) as e:
                main(["trace", "validate", str(f)])
            err = capsys.readouterr().err
            assert e.value.code == 2 and err.startswith("error: E_DUPLICATE_KEY:") and "repeats the key" in err, (path, err)


def trace_at(trace, path):
    for step in path:
        trace = trace[step]
    return trace


def test_a_repeated_key_with_the_same_value_is_refused_too():
    raw = (TRACES / "valid-trace.json").read_bytes()
    same = raw.replace(b'"kind": "REQUEST",', b'"kind": "REQUEST", "kind": "REQUEST",', 1)
    assert same != raw and fast.validate_bytes(same) is None
    assert fast.validate_bytes(raw) is not None


def test_a_float_anywhere_is_left_to_the_careful_parse():
    """The two parsers read floats alike; nothing here needs to rely on it."""
    raw = (TRACES / "valid-trace.json").read_bytes()
    assert fast.validate_bytes(raw) is not None
    for a, b in [(b'"epoch": 1,', b'"epoch": 1.0,'), (b'"source": "RFC 9293 section 3.4"', b'"source": 0.5')]:
        assert a in raw
        assert fast.validate_bytes(raw.replace(a, b, 1)) is None, b


@pytest.mark.parametrize("change", [
    lambda t: t.replace(b'"m1"', b'"m\\u0031"'),          # an escape: the same trace, read the careful way
    lambda t: b"\xef\xbb\xbf" + t,                        # a byte order mark (the careful path drops it)
    lambda t: t.replace(b'"S-1"', "\"S-\u00e9\"".encode()) if b'"S-1"' in t else t.replace(b'"epoch": 1', b'"epoch": 1', 1),
    lambda t: t.replace(b'"epoch": 1', b'"epoch": 1.0', 1),  # a float
    lambda t: t.replace(b"\n", b"\r\n"),
])
def test_what_msgspec_might_read_otherwise_gets_the_careful_report(tmp_path, capsys, change):
    raw = change((TRACES / "valid-trace.json").read_bytes())
    text = raw.decode("utf-8").removeprefix("\ufeff")
    careful = validate(json.loads(text))
    quick = fast.validate_bytes(raw)
    assert quick is None or quick == careful
    f = tmp_path / "t.json"
    f.write_bytes(raw)
    with pytest.raises(SystemExit) as e:
        main(["trace", "validate", str(f), "--json"])
    assert e.value.code == (0 if careful.valid else 1)
    assert json.loads(capsys.readouterr().out) == careful.to_dict()


@pytest.mark.parametrize("content, errcode", [(b"{", "E_JSON"), (b"\xff\xfe", "E_NOT_UTF8"), (b'{"a": NaN}', "E_NAN"),
                                              (b'{"messages": [], "x": 1e400}', None), (b"[" * 5000 + b"]" * 5000, "E_JSON")])
def test_what_the_careful_parse_refuses_is_refused_the_same_way(tmp_path, capsys, content, errcode):
    assert fast.validate_bytes(content) is None
    f = tmp_path / "t.json"
    f.write_bytes(content)
    with pytest.raises(SystemExit) as e:
        main(["trace", "validate", str(f)])
    err = capsys.readouterr().err
    if errcode is None:
        assert e.value.code == 1  # parsed (1e400 is inf to the stdlib), then invalid
    else:
        assert e.value.code == 2 and err.startswith(f"error: {errcode}:")


def test_without_msgspec_every_trace_takes_the_careful_path(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(fast, "AVAILABLE", False)
    raw = (TRACES / "valid-trace.json").read_bytes()
    assert fast.validate_bytes(raw) is None
    with pytest.raises(SystemExit) as e:
        main(["trace", "validate", str(TRACES / "valid-trace.json"), "--json"])
    assert e.value.code == 0
    assert json.loads(capsys.readouterr().out) == validate(json.loads(raw)).to_dict()


def test_a_big_synthetic_trace_takes_the_fast_path_with_the_careful_report():
    from sim.protocol import synthetic_trace

    trace = synthetic_trace(5000)
    raw = json.dumps(trace).encode()
    quick = fast.validate_bytes(raw)
    assert quick is not None and quick == validate(trace)


BAD_TIMES = ["2026-13-13T04:00:00Z", "2026-00-13T04:00:00Z", "2026-07-32T04:00:00Z", "2026-07-00T04:00:00Z",
             "2026-07-13T24:00:00Z", "2026-07-13T04:60:00Z", "2026-07-13T04:00:60Z", "2026-07-13 04:00:00Z",
             "2026-07-13T04:00:00z", "2026-07-13T04-00:00Z", "2026-07-13T04:00-00Z", "2026/07-13T04:00:00Z",
             "2026-07/13T04:00:00Z", "2026-07-13T04:0a:00Z", "2026-07-13T04:00:0aZ", "202a-07-13T04:00:00Z",
             "2026-07-13T04:00:00ZZ", "2026-07-13T4:00:00Z"]
BAD_DIGESTS = ["sha256:" + "A" * 64, "sha256:" + "0" * 63 + "g", "sha257:" + "0" * 64, "sha256;" + "0" * 64,
               "Sha256:" + "0" * 64, "sha256:" + "0" * 63, "sha256:" + "0" * 65, "sha256:sha256:" + "0" * 57]


@pytest.mark.parametrize("field, bad", [("at", t) for t in BAD_TIMES] + [("expiresAt", t) for t in BAD_TIMES]
                         + [("payloadDigest", d) for d in BAD_DIGESTS] + [("stateDigestAfter", d) for d in BAD_DIGESTS])
def test_a_time_or_digest_out_of_form_in_any_message_gives_the_careful_report(field, bad):
    from sim.protocol import synthetic_trace

    # the sample's messages carry their payloads; the synthetic trace's do not (a digest is only a form there)
    for trace in (json.loads((TRACES / "valid-trace.json").read_text()), synthetic_trace(12)):
        for i in sorted({0, len(trace["messages"]) // 2, len(trace["messages"]) - 1}):
            t = json.loads(json.dumps(trace))
            t["messages"][i][field] = bad
            raw = json.dumps(t, indent=2).encode()
            careful = validate(json.loads(raw))
            assert not careful.valid
            assert fast.validate_bytes(raw) is None, (i, field, bad)


def _planted_for_the_fast_path():
    """One fault each, where the fast path has its own check (found by bugs planted in it)."""
    valid = json.loads((TRACES / "valid-trace.json").read_text())
    out = {}

    def variant(name, change):
        t = json.loads(json.dumps(valid))
        change(t, {m["id"]: m for m in t["messages"]})
        out[name] = t

    def closed(t, at):  # researcher-2 contributes after the gather's result, and only then
        m3 = at["m3"]
        t["messages"].remove(m3)
        t["messages"].insert(t["messages"].index(at["m4"]) + 1, m3)
        at["m4"]["causedBy"] = ["m2"]
    variant("a contribution after its gather's result", closed)

    def not_an_ack(t, at):
        at["m10"]["kind"] = "RESPONSE"
    variant("a RESPONSE after the fence from a required acknowledger citing it", not_an_ack)

    def twice(t, at):
        again = dict(json.loads(json.dumps(at["m3"])), id="m3b", seq=2, at="2026-07-13T04:07:40Z")
        t["messages"].insert(t["messages"].index(at["m3"]) + 1, again)
        at["m9"]["seq"] = 3
    variant("a second contribution from one member", twice)

    def early(t, at):  # a contribution before the gather's opener
        m2 = at["m2"]
        t["messages"].remove(m2)
        t["messages"].insert(0, m2)
        m2["causedBy"] = []
    variant("a contribution before its opener", early)

    def same_id(t, at):  # the writer's acknowledgement reuses researcher-2's id, every number in order
        at["m10"]["id"] = "m9"
    variant("an id used twice, each message otherwise in order", same_id)

    def twice_in_a_list(field, mid, values):
        def change(t, at):
            at[mid][field] = values
        return change
    variant("a recipient named twice", twice_in_a_list("recipients", "m1", ["researcher-1", "researcher-1"]))
    variant("an audience label named twice", twice_in_a_list("audienceLabels", "m1", ["research", "research"]))
    variant("a cause named twice", twice_in_a_list("causedBy", "m4", ["m2", "m2"]))

    def unknown_gather(t, at):
        at["m5"]["gatherId"] = "g9"
    variant("a message naming a gather nobody declared", unknown_gather)

    def replaced(t, at):  # researcher-1 on its third body, two earlier ones replaced; a gap in the first's numbers
        ids = [m["id"] for m in t["messages"]]
        r1 = [m for m in t["messages"] if m["sender"] == "researcher-1"]
        (p,) = [p for p in t["participants"] if p["ref"] == "researcher-1"]
        p["generation"] = 3
        p["earlierGenerations"] = [{"generation": 1, "replacedAfter": r1[-1]["id"]},
                                   {"generation": 2, "replacedAfter": ids[-1]}]
        r1[-1]["seq"] += 1
    variant("a gap in the numbers of a body replaced since", replaced)

    def own_opener(t, at):
        t["gathers"][0]["opener"] = "m2"
    variant("a contribution that is its gather's opener", own_opener)

    def later_epoch(t, at):
        t["epoch"] = 2
    variant("every message of an earlier epoch", later_epoch)

    def result_without_gather(t, at):  # once read as valid by the fast path (issue 48): _optional skipped it
        for k in ("gatherId", "payload", "verificationRef", "expiresAt", "stateDigestAfter"):
            at["m4"].pop(k, None)
        del t["gathers"][0]["result"]
    variant("a GATHER_RESULT without a gatherId or any optional field, other messages carrying theirs", result_without_gather)

    from sim.protocol import synthetic_trace

    bare = synthetic_trace(12)  # no optional field in any message
    bare["messages"][3]["kind"] = "GATHER_RESULT"
    out["a GATHER_RESULT without a gatherId, no optional field anywhere"] = bare
    return out


@pytest.mark.parametrize("name, trace", sorted(_planted_for_the_fast_path().items()))
def test_faults_the_fast_path_checks_itself_give_the_careful_report(name, trace):
    for raw in _forms(trace):
        careful = validate(json.loads(raw))
        assert not careful.valid and any(f.pointer.startswith("/messages") for f in careful.errors), careful.reason
        assert fast.validate_bytes(raw) is None, name


def test_without_the_msgspec_module_the_command_still_validates(tmp_path):
    import subprocess
    import sys

    code = ("import sys; sys.modules['msgspec'] = None\n"
            "from sim.protocol import fast; assert not fast.AVAILABLE\n"
            "from sim.cli import main; main(['trace', 'validate', sys.argv[1], '--json'])")
    out = subprocess.run([sys.executable, "-c", code, str(TRACES / "valid-trace.json")], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == validate(json.loads((TRACES / "valid-trace.json").read_text())).to_dict()


def test_bench_trace_times_the_command_beside_both_floors():
    from sim.bench import trace_one

    r = trace_one(12)
    assert r["valid"] is True and r["messages"] == 12
    for key in ("command_seconds", "json_load_command_seconds", "msgspec_command_seconds", "command_peak_rss_mb"):
        assert r[key] > 0, key
    c = r["command_seconds"]
    for ratio, floor in (("command_ratio", "json_load_command_seconds"), ("msgspec_ratio", "msgspec_command_seconds")):
        f = r[floor]  # seconds are rounded to 0.01, ratios computed before
        assert (c - 0.005) / (f + 0.005) - 0.001 <= r[ratio] <= (c + 0.005) / max(f - 0.005, 1e-9) + 0.001, ratio


ODD_VALUES = [{}, [], {"a": []}, {"a": {}}, {"k": [[], [{}], [[1]]]}, "plain", 5, None, True, {1: "int key"}, (1, 2),
              {"s": "x\u00e9\u2028\x7f\x01\b\f\n\t\r\"\\/"}, 1e16, 1e-5, 0.1, -0.0, 2.5, {"x": 2 ** 64}, {"x": 2 ** 63},
              {"x": -2 ** 63 - 1}, {"x": -2 ** 63}, {"s": "\ud800"}, float("nan"), float("inf"), {True: 1, None: 2, 1.5: 3}]


@pytest.mark.parametrize("value", ODD_VALUES + [json.loads((TRACES / "valid-trace.json").read_text())])
def test_the_writer_writes_json_dumps_bytes(value):
    assert fast.dumps_indented(value) == json.dumps(value, indent=2, ensure_ascii=False)


def test_the_writer_writes_json_dumps_bytes_for_a_deep_value():
    deep: list = []
    x = deep
    for _ in range(fast.MAX_DEPTH + 20):
        x.append([])
        x = x[0]
    assert fast.dumps_indented(deep) == json.dumps(deep, indent=2, ensure_ascii=False)


@pytest.mark.parametrize("name, policy, faults", [("publish-report", "safe", ()), ("fan-out", "safe", ("crash",)),
                                                  ("fan-out", "naive", ("resend", "reorder")),
                                                  ("publish-report", "naive", ("duplicate", "late-failure"))])
def test_trace_export_writes_the_old_writers_bytes(name, policy, faults, tmp_path):
    """The export's text, written by msgspec, is what the stdlib writer wrote (each message through
    json.dumps(indent=2)), on runs with payloads, gathers, earlier generations and faults."""
    import io

    from sim.conversation import TraceExport, export_trace
    from sim.runner import run_scenario
    from sim.scenario import load_scenario

    store = run_scenario(load_scenario(name), policy=policy, faults=list(faults), seed=3, strict_faults=False)
    try:
        buf = io.StringIO()
        TraceExport(store).write(buf)
        old = json.dumps(export_trace(store), indent=2, ensure_ascii=False) + "\n"
    finally:
        store.close()
    assert buf.getvalue() == old
    raw = old.encode()
    assert fast.validate_bytes(raw) in (None, validate(json.loads(raw)))
