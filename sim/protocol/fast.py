"""The fast path of ``protolab trace validate``: the same :class:`~sim.protocol.trace.Report` as
``validate(strict_json_parse(raw))``, or None when it cannot say so cheaply.

:func:`validate_bytes` decodes the file's bytes with msgspec into typed structs (:class:`Message`,
:class:`Trace`: the types, the required fields and the closed field lists checked in C) and judges
them with the validator's own header and tail (``_Judge.judge_header``, ``_Judge.finish``) around a
loop written for the common case, a trace in which every message is accepted. It gives up (returns
None) at the first thing that is not that case: a byte that is not ASCII or UTF-8 it did not check, an
escape in a string, a float, a deep value, a duplicate key, anything msgspec refuses, and any finding
of any message. The caller then parses the text the careful way (the stdlib, refusing repeated keys)
and runs :func:`~sim.protocol.trace.validate`, so the findings, their codes and their order are the
validator's own. A trace with findings costs the fast attempt and then the careful path.

Repeated keys: msgspec keeps the last value of a repeated key without a word. The fast path proves
there is none by counting. In a JSON text without a backslash every ``"`` opens or closes a string
(a string cannot hold one unescaped), so the text holds ``count('"') / 2`` strings, keys included.
Decoding keeps one entry per distinct key of each object: counted back over the decoded value (each
key present, each string value), the total equals the text's exactly when no object repeats a key,
and falls short otherwise (the repeated key, and whatever its dropped value held). No msgspec: None
always (the careful path)."""

from __future__ import annotations

import codecs
import json
from itertools import compress
from operator import attrgetter, itemgetter
from typing import Any

from . import trace as _t
from .. import digest as _digest

try:  # a hard dependency (pyproject.toml); without it every trace takes the careful path
    import msgspec
    from msgspec import UNSET, Meta, Struct, UnsetType
except ImportError:  # pragma: no cover - exercised by a test that hides msgspec
    msgspec = None

__all__ = ["AVAILABLE", "validate_bytes", "decode", "dumps_indented"]

AVAILABLE = msgspec is not None
#: deeper than this, a header value or payload is left to the careful path (the stdlib parser's
#: recursion limit is not this module's to predict)
MAX_DEPTH = 64
#: integers the careful path reads the same way whatever their size; beyond, the careful path decides
INT_MIN, INT_MAX = -(2 ** 63), 2 ** 64

if AVAILABLE:
    from typing import Annotated, Literal

    _Str = Annotated[str, Meta(min_length=1)]
    _Strs = list[_Str]
    _Strs1 = Annotated[list[_Str], Meta(min_length=1)]
    _Kind = Literal[_t.KINDS]  # checked in C, and each kind the one interned string

    class Message(Struct, forbid_unknown_fields=True, gc=False):
        """One message as the schema allows it (the values' forms are checked in :func:`_judge`)."""

        id: _Str
        sender: _Str
        generation: int
        seq: int
        epoch: int
        scope: _Str
        audienceLabels: _Strs1
        recipients: _Strs1
        kind: _Kind
        causedBy: _Strs
        at: str
        payloadDigest: str
        expiresAt: str | UnsetType = UNSET
        verificationRef: str | UnsetType = UNSET
        gatherId: _Str | UnsetType = UNSET
        payload: dict | UnsetType = UNSET
        stateDigestAfter: str | UnsetType = UNSET

    class Trace(Struct, forbid_unknown_fields=True, gc=False):
        """A trace: its messages typed, the rest (small) as decoded and checked by the validator."""

        messages: list[Message]
        schema: Any = UNSET
        protocol: Any = UNSET
        conversationId: Any = UNSET
        epoch: Any = UNSET
        scope: Any = UNSET
        deadline: Any = UNSET
        messageCeiling: Any = UNSET
        participants: Any = UNSET
        gathers: Any = UNSET
        terminal: Any = UNSET
        stateDigest: Any = UNSET

    _DECODER = msgspec.json.Decoder(Trace)
    _OPTIONAL = ("expiresAt", "verificationRef", "gatherId", "payload", "stateDigestAfter")
    _OPTIONAL_OF = attrgetter(*_OPTIONAL)
    _NO_OPTIONAL = (UNSET,) * len(_OPTIONAL)
    _HEADER_FIELDS = tuple(f for f in Trace.__struct_fields__ if f != "messages")


class _Unusual(Exception):
    """Not the common case: the careful path decides."""


def _strings(v, depth: int = 0) -> int:
    """The strings of a decoded JSON value (each object key, each string), as its text spells them;
    raises :class:`_Unusual` on a float, a big integer or a deep value."""
    t = type(v)
    if t is str:
        return 1
    if t is dict:
        if depth > MAX_DEPTH:
            raise _Unusual
        return len(v) + sum(_strings(x, depth + 1) for x in v.values())
    if t is list:
        if depth > MAX_DEPTH:
            raise _Unusual
        return sum(_strings(x, depth + 1) for x in v)
    if t is int:
        if not INT_MIN <= v < INT_MAX:
            raise _Unusual
        return 0
    if v is None or t is bool:
        return 0
    raise _Unusual  # a float: the two parsers agree, but nothing here needs to rely on it


def decode(raw: bytes):
    """The :class:`Trace` in ``raw``, or None when the careful parse must decide (see the module)."""
    if not AVAILABLE or b"\\" in raw:
        return None
    view = memoryview(raw)
    if not raw.isascii():
        if raw.startswith(b"\xef\xbb\xbf"):  # the careful path drops one byte order mark too
            view = view[3:]
        check = codecs.getincrementaldecoder("utf-8")()
        try:
            for k in range(0, len(view), 1 << 24):
                check.decode(view[k:k + (1 << 24)])
            check.decode(b"", final=True)
        except UnicodeDecodeError:
            return None
    try:
        trace = _DECODER.decode(view)
    except (msgspec.DecodeError, RecursionError, ValueError):
        return None
    return trace


def validate_bytes(raw: bytes, *, check_payload_digests: bool = True):
    """The :class:`Report` ``validate`` gives for the JSON text ``raw``, or None: the careful path must
    parse and judge it (anything unusual, any finding on a message; see the module)."""
    trace = decode(raw)
    if trace is None:
        return None
    try:
        return _judge(trace, raw, check_payload_digests)
    except (_Unusual, RecursionError):
        return None


def _judge(trace, raw: bytes, check_digests: bool):
    msgs = trace.messages
    n = len(msgs)
    ids = list(map(attrgetter("id"), msgs))
    kinds = list(map(attrgetter("kind"), msgs))
    scan = _t.Scan(n)
    scan.fences = [(i, ids[i]) for i in _positions(kinds, "FENCE")]
    header = {f: getattr(trace, f) for f in _HEADER_FIELDS if getattr(trace, f) is not UNSET}
    strings = 1 + sum(1 + _strings(v) for v in header.values())  # "messages", and each header field
    header["messages"] = msgs
    want = _t.wanted_ids(header)
    first = dict(zip(ids, range(n))) if len(want) > 8 else None
    for x in want:
        k = first.get(x) if first is not None else _index(ids, x)
        if k is not None:
            scan.first_at[x] = k
            scan.kind_at[x] = kinds[k]
    first = None
    j = _t._Judge(header, scan, msgs, set(), set(), check_digests, None)
    j.judge_header(header)
    if j.out:
        raise _Unusual  # the header has findings
    # what holds of every message at once: under the ceiling, one FENCE at most, and only
    # acknowledgements after it; the conversation's epoch; times and digests
    fence_at = j.fence_at
    if n > j.last_ok or len(scan.fences) > 1 or (
            fence_at is not None and kinds[fence_at + 1:].count("ACK") != n - fence_at - 1):
        raise _Unusual
    if n and set(map(attrgetter("epoch"), msgs)) != {j.conv_epoch}:
        raise _Unusual
    at_of, digest_of, deadline = attrgetter("at"), attrgetter("payloadDigest"), j.conv_deadline
    for k in range(0, n, _CHUNK):  # a block at a time: a few MB of text, not a few hundred
        block = msgs[k:k + _CHUNK]
        ats = list(map(at_of, block))
        if not _times(ats) or max(ats) > deadline or not _digests(list(map(digest_of, block))):
            raise _Unusual
    try:
        strings += _messages(j, msgs)
    except KeyError:  # a recipient or sender who is not a participant
        raise _Unusual from None
    # each message: 12 keys, 6 strings (id, sender, scope, kind, at, payloadDigest), its lists (above)
    strings += 18 * n
    quotes = raw.count(b'"')
    if quotes != 2 * strings:
        # optional fields (which add strings), or a repeated key (which takes some away): had there
        # been no optional field, the text could not hold more strings than were decoded
        strings += _optional(j, msgs, scan, check_digests)
    if quotes != 2 * strings:
        raise _Unusual  # a repeated key somewhere
    for i in _positions(kinds, "GATHER_RESULT"):
        if msgs[i].gatherId is UNSET:
            # a GATHER_RESULT without its gatherId, whether or not any message carries an optional field
            # (_optional sees only the messages that carry one)
            raise _Unusual
    j.accepted = ids
    j.positions = list(range(n))
    j.n_accepted = n
    j.finish()
    return j.report


def _index(items: list, value):
    try:
        return items.index(value)
    except ValueError:
        return None


def _positions(items: list, value) -> list:
    out, k = [], -1
    try:
        while True:
            k = items.index(value, k + 1)
            out.append(k)
    except ValueError:
        return out


_CHUNK = 65536
_DIGITS = "0123456789"
_SIXTY = "012345"


def _times(ats: list) -> bool:
    """Every one of ``ats`` matches TIME_PATTERN. A time is its hour (``YYYY-MM-DDTHH``, 13
    characters: a few distinct ones, each matched whole) and ``:MM:SSZ`` (checked a column at a
    time over all of them)."""
    n = len(ats)
    if set(map(len, ats)) != {_t.TIME_LENGTH}:
        return False
    if not all(_t._TIME_MATCH(h + ":00:00Z") for h in set(map(itemgetter(slice(0, 13)), ats))):
        return False
    text = "".join(ats)
    col = [text[k::_t.TIME_LENGTH] for k in range(13, _t.TIME_LENGTH)]
    return (col[0] == ":" * n and not col[1].strip(_SIXTY) and not col[2].strip(_DIGITS) and col[3] == ":" * n
            and not col[4].strip(_SIXTY) and not col[5].strip(_DIGITS) and col[6] == "Z" * n)


def _digests(pds: list) -> bool:
    """Every one of ``pds`` is ``sha256:`` and 64 lowercase hex: the prefix checked a column at a
    time, and what is not hex in all of them together is the prefixes' ``s``, ``h`` and ``:``."""
    n = len(pds)
    if set(map(len, pds)) != {_t.DIGEST_LENGTH}:
        return False
    text = "".join(pds)
    if not all(text[k::_t.DIGEST_LENGTH] == c * n for k, c in enumerate("sha256:")):
        return False
    return text.isascii() and text.encode().translate(None, _t._HEX.encode()) == b"sh:" * n


def _messages(j, msgs: list) -> int:
    """Each message in order, as ``_Judge.judge_messages`` would accept it (its optional fields aside:
    :func:`_optional`); raises :class:`_Unusual` at the first that it would not. Returns the strings
    in the messages' three lists."""
    parts, bodies = j.parts, j.bodies
    fence_at, fence_id, required_set, acked = j.fence_at, j.fence_id, j.required_set, j.acked
    # per sender: [the generation speaking for it, its next seq], or None for one with earlier bodies
    state = {ref: (None if ref in bodies else [p[0], 1]) for ref, p in parts.items()}
    audiences = {ref: p[1] for ref, p in parts.items()}
    next_seq: dict = {}  # (sender, generation) -> next seq, for a sender with earlier bodies
    scope = j.conv_scope
    earlier = set()  # the ids before this message (each accepted, or the fast path would have stopped)
    add = earlier.add
    strings = 0
    for i, m in enumerate(msgs):
        mid = m.id
        if m.scope != scope:
            raise _Unusual
        sender = m.sender
        st = state[sender]
        if st is not None:
            if m.generation != st[0] or m.seq != st[1]:
                raise _Unusual
            st[1] += 1
        else:
            gen, in_force = m.generation, parts[sender][0]
            for egen, last, _after in bodies[sender]:
                if i <= last:
                    in_force = egen
                    break
            if gen != in_force:
                raise _Unusual
            body = (sender, gen)
            want = next_seq.get(body, 1)
            if m.seq != want:
                raise _Unusual
            next_seq[body] = want + 1
        labels = m.audienceLabels
        recips = m.recipients
        caused = m.causedBy
        strings += len(labels) + len(recips) + len(caused)
        if len(labels) > 1 and len(set(labels)) != len(labels):
            raise _Unusual
        if len(recips) > 1 and len(set(recips)) != len(recips):
            raise _Unusual
        for r in recips:
            if not audiences[r].issuperset(labels):
                raise _Unusual
        if caused:
            if len(caused) > 1 and len(set(caused)) != len(caused):
                raise _Unusual
            for parent in caused:
                if parent not in earlier:
                    raise _Unusual
        if fence_at is not None and i > fence_at:  # an ACK (checked before)
            if (required_set is not None and sender not in required_set) or fence_id not in caused or sender in acked:
                raise _Unusual
            acked[sender] = mid
        add(mid)
    if len(earlier) != len(msgs):
        raise _Unusual  # a repeated id (a message citing one is judged against its first copy: given up too)
    return strings


def _optional(j, msgs: list, scan, check_digests: bool) -> int:
    """The messages carrying an optional field, in order: their forms, expiry, gathers and payload
    digests, as ``_Judge.judge_messages`` would accept them; raises :class:`_Unusual` at the first
    that it would not. Returns the strings these fields hold (keys included)."""
    gathers, first_at = j.gathers, scan.first_at
    optional = list(map(_OPTIONAL_OF, msgs))
    n = len(msgs)
    strings = 0
    for i in compress(range(n), map(_NO_OPTIONAL.__ne__, optional)):
        m = msgs[i]
        exp, vref, gid, payload, sda = optional[i]
        kind = m.kind
        if exp is not UNSET:
            strings += 2
            if not _t._is_time(exp) or m.at > exp:
                raise _Unusual
        if vref is not UNSET:
            strings += 2
            if not _t._VREF_SEARCH(vref):
                raise _Unusual
        if sda is not UNSET:
            strings += 2
            if not _t._is_digest(sda):
                raise _Unusual
        if gid is not UNSET:
            strings += 2
            gth = gathers.get(gid)
            if gth is None:
                raise _Unusual
            if kind == "CONTRIBUTION":
                if ((gth.opener_known and first_at[gth.opener] >= i) or gth.closed_by is not None
                        or (gth.members is not None and m.sender not in gth.members) or m.sender in gth.contributed
                        or (gth.deadline is not None and m.at > gth.deadline)):
                    raise _Unusual
                gth.contributions.append({f: v for f in m.__struct_fields__ if (v := getattr(m, f)) is not UNSET})
                gth.contributed.add(m.sender)
            elif kind == "GATHER_RESULT":
                if gth.closed_by is not None:
                    raise _Unusual
                gth.closed_by = m.id
        if payload is not UNSET:
            strings += 1 + _strings(payload)
            if check_digests:
                try:
                    actual = _digest.digest(payload, _t.PAYLOAD_DIGEST_SCHEME)
                except Exception:  # the careful path reports it
                    raise _Unusual from None
                if actual != m.payloadDigest:
                    raise _Unusual
    return strings


# --------------------------------------------------------------------------- the writer


def dumps_indented(value) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=False)``, byte for byte; written by msgspec (about ten
    times faster) when ``value`` holds nothing msgspec writes otherwise: no float (msgspec spells some
    of them another way: ``1e16``, ``0.00001``), no integer past 64 bits, nothing deeper than
    ``MAX_DEPTH``, no string a UTF-8 encoder refuses (a lone surrogate). Else the stdlib writes it."""
    if AVAILABLE:
        try:
            _strings(value)
            return msgspec.json.format(msgspec.json.encode(value), indent=2).decode()
        except (_Unusual, RecursionError, TypeError, msgspec.EncodeError, UnicodeError):
            pass
    return json.dumps(value, indent=2, ensure_ascii=False)
