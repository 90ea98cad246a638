"""parse_envelope's quick path (sim.envelope._quick) never decides differently from the careful walk:
on every envelope, good or damaged, it gives the careful walk's envelope, or None and lets the careful
walk decide (and word the refusal)."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim import digest as _digest
from sim.envelope import FIELDS, _careful, _quick, build_envelope, parse_envelope
from sim.errors import ProtolabError


def _good(**over) -> dict:
    payload = {"status": "succeeded", "lease_version": 1}
    raw = build_envelope(message_id="M-1", trace_id="R-1", task_id="T-1", sender="researcher-2", recipient="manager",
                         type="task_result", payload=payload, idempotency_key="T-1:result",
                         created_at="2026-07-13T04:00:00Z", evidence_refs=["M-0"]).to_dict()
    raw.update(over)
    return raw


def _both(raw, check_digest=True):
    """(careful outcome, quick outcome): an Envelope, or the refusal's code."""
    try:
        careful = _careful(copy.deepcopy(raw), None, check_digest)
    except ProtolabError as e:
        careful = e.code
    quick = _quick(copy.deepcopy(raw), check_digest)
    return careful, quick


_BAD_VALUES = [None, True, 0, 1.5, "", [], {}, "x" * 300, "bad id!", "nobody", "2026-02-30T00:00:00Z", "9.9",
               "sha256:" + "0" * 64, "jcs-v2", "M-1", "researcher", "task_started", "1.1", "\ud800",
               "2026-07-13T04:00:00+00:00", "2026-07-13 04:00:00Z", "2026-07-13T04:00:00.5Z"]


def _damaged():
    yield "good", _good()
    for name in FIELDS:
        missing = _good()
        del missing[name]
        yield f"no {name}", missing
        for i, bad in enumerate(_BAD_VALUES):
            yield f"{name}={i}", _good(**{name: bad})
    yield "unknown field", _good(extra=1)
    yield "payload lease 0", _good(payload={"status": "succeeded", "lease_version": 0})
    yield "payload wrong status", _good(payload={"status": "maybe", "lease_version": 1})
    wrong_digest = _good()
    wrong_digest["payload"] = {"status": "failed", "lease_version": 1}
    yield "digest of another payload", wrong_digest
    yield "refs not strings", _good(evidence_refs=[1])
    yield "refs empty string", _good(evidence_refs=[""])
    yield "refs lone surrogate", _good(evidence_refs=["\udc00"])
    yield "refs non-ascii", _good(evidence_refs=["café"])
    yield "not a dict", ["M-1"]
    nan = _good()
    nan["payload"] = {"status": "succeeded", "lease_version": 1, "score": float("nan")}
    yield "nan payload", nan


@pytest.mark.parametrize("raw", [r for _, r in _damaged()], ids=[n for n, _ in _damaged()])
def test_quick_path_agrees_with_the_careful_walk(raw):
    careful, quick = _both(raw)
    if quick is not None:  # the quick path decided: it accepted, and so does the careful walk, alike
        assert careful == quick and careful.payload == quick.payload
        assert careful.evidence_refs == quick.evidence_refs
        # the payload's text it kept from the digest check is the store's writer's
        assert quick.payload_json() == careful.payload_json() == _digest.sorted_dumps(quick.payload)
        assert quick.to_json() == _digest.sorted_dumps(quick.to_dict())
    # what the caller sees is the careful walk's decision, either way
    try:
        seen = parse_envelope(copy.deepcopy(raw))
    except ProtolabError as e:
        seen = e.code
    assert seen == careful


def test_the_quick_path_takes_ordinary_envelopes():
    """(Else the quick path is never used, and the speed it exists for is gone.)"""
    raw = _good()
    parse_envelope(copy.deepcopy(raw))  # the careful walk learns the participants and the time once
    assert _quick(raw, True) == _careful(copy.deepcopy(raw), None, True)


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                     lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids, max_size=3),
                     max_leaves=8)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(list(FIELDS)), value=_json, check=st.booleans())
def test_any_value_in_any_field(field, value, check):
    raw = _good(**{field: value})
    if field == "payload" and isinstance(value, dict) and check and value:
        raw["payload_digest"] = _digest.digest(value) if all(isinstance(k, str) for k in value) else raw["payload_digest"]
    careful, quick = _both(raw, check)
    if quick is not None:
        assert careful == quick


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(st.text(), min_size=12, max_size=12), refs=st.lists(st.text(), max_size=3), payload=_json,
       odd=st.sampled_from([None, 7, 1.5, ["x"]]), where=st.integers(0, 11))
def test_to_json_is_the_sorted_writer_byte_for_byte(texts, refs, payload, odd, where):
    """Envelope.to_json writes its fields one by one; it must be sorted_dumps(to_dict()) exactly, for any
    strings (quotes, backslashes, controls, non-ASCII, lone surrogates) and for a field that is not a string."""
    from sim.envelope import Envelope

    names = [n for n in FIELDS if n not in ("payload", "evidence_refs")]
    values = dict(zip(names, texts[:11]))
    env = Envelope(**values, payload={"p": payload}, evidence_refs=tuple(refs))
    assert env.to_json() == _digest.sorted_dumps(env.to_dict())
    values[names[where % len(names)]] = odd
    env = Envelope(**values, payload={"p": payload}, evidence_refs=tuple(refs))
    assert env.to_json() == _digest.sorted_dumps(env.to_dict())


_payload = st.dictionaries(st.sampled_from(["note", "goal", "é", "a\u2028", "z"]), _json, max_size=4)


@settings(max_examples=200, deadline=None)
@given(payload=_payload, scheme=st.sampled_from(sorted(_digest.SCHEMES)))
def test_a_built_envelope_keeps_the_stores_text_of_its_payload(payload, scheme):
    """build_envelope keeps the text its digest was taken of (json-sorted-v1's bytes are how the store
    keeps a payload), so a delivery does not write the payload again: the text kept must be the store's
    writer's, and the digest the scheme's, for any payload under any scheme."""
    payload = {"note": "x", **payload}
    try:
        env = build_envelope(message_id="M-1", trace_id="R-1", task_id="T-1", sender="manager",
                             recipient="researcher-2", type="task_request", payload={"goal": "g", **payload},
                             idempotency_key="T-1:request", created_at="2026-07-13T04:00:00Z", digest_scheme=scheme)
    except ProtolabError:
        return  # (a payload the kit refuses: nothing is kept)
    assert env.payload_json() == _digest.sorted_dumps(env.payload)
    assert env.payload_digest == _digest.digest(env.payload, scheme)
    assert ("_payload_json" in env.__dict__) == (scheme == _digest.DEFAULT_SCHEME)
    assert env.to_json() == _digest.sorted_dumps(env.to_dict())


def _outcome(f, text):
    import json

    try:
        return "value", f(text)
    except json.JSONDecodeError as e:
        return "refused", e.msg, e.pos, e.lineno, e.colno
    except Exception as e:  # noqa: BLE001 - whatever either raises, both must raise it alike
        return type(e).__name__, str(e)


_json_text = st.one_of(
    st.text(alphabet=' \t\n{}[]":,0123456789.-+eEtrufalsnNIiy\\\u00e9\ud800', max_size=30),
    _json.map(lambda v: __import__("json").dumps(v)),
    st.tuples(_json, st.sampled_from(["", " ", "\n", " x", ",", "]", "}", "  1"])).map(
        lambda p: " " + __import__("json").dumps(p[0]) + p[1]),
)


@settings(max_examples=500, deadline=None)
@given(text=_json_text)
def test_the_strict_reader_written_out_decides_as_the_decoder_does(text):
    """loads_strict calls the decoder's scanner directly (sim.envelope._decode_strict); on any text it must
    give the value the decoder gives, or refuse with the same words at the same place."""
    from sim.envelope import _STRICT, _decode_strict

    assert _outcome(_decode_strict, text) == _outcome(_STRICT.decode, text)
