"""Offline validator for ``conversation-trace-v2`` traces.

A trace records one closed conversation between participants that other systems
already admitted: the bound snapshot (protocol, conversation, epoch, scope,
deadline, message ceiling, participants with their body generation and the
audience labels each one accepts), the messages in the order they were supplied,
the gathers with frozen membership, and an optional terminal with its fence.

``validate(trace)`` takes a parsed JSON value (it reads no file) and returns a
:class:`Report`. It works in two layers over one pass of the messages (after a light
pre-pass that finds the fences and the gather openers):

* shape: every mismatch with the JSON Schema shipped beside this module
  (``conversation-trace-v2.schema.json``) becomes a :class:`Finding` with its JSON
  pointer. The check is hand-written for speed; ``tests/test_protocol.py`` proves it
  agrees with ``jsonschema``. A few schema violations carry a sharper code than
  ``E_SCHEMA`` (an unknown kind, a malformed verification reference, a broken
  gather declaration); the pointer is the same either way.
* meaning: duplicates, per-sender sequence, epoch, generation, scope, audience
  labels, causation, expiry, deadlines, gathers, the fence and acknowledgements.

Filter before reduce: a message with any finding is rejected and never reaches a
reducer (gather evaluation, acknowledgement counting). Every finding is
reported, not only the first.

What a valid report means, and no more: the supplied messages were accepted in
the supplied order. It does not verify identity, signatures, receipts, delivery,
transport deduplication or the truth of any payload, and every terminal carries
``truthEffect: NONE`` and ``authorityEffect: NONE``. An acknowledgement is a
receipt assertion, never proof that work is done. A gather result is a
deterministic reduction of accepted inputs, never a verdict on truth.

Times are UTC at second precision (``YYYY-MM-DDTHH:MM:SSZ``) so that string order
is time order. When a message carries its ``payload``, ``payloadDigest`` must be
the ``jcs-v2`` digest of it (``sim.digest``); ``stateDigest`` and
``stateDigestAfter`` are checked for form only (there is no reducer state here).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Iterable

from .. import digest as _digest
from ..errors import InputError

__all__ = [
    "SCHEMA_NAME",
    "KINDS",
    "TERMINALS",
    "RULES",
    "TIE_BREAKS",
    "GATHER_STATUSES",
    "PAYLOAD_DIGEST_SCHEME",
    "TIME_PATTERN",
    "DIGEST_PATTERN",
    "VERIFICATION_REF_PATTERN",
    "PROTOCOL_PATTERN",
    "CODES",
    "SHAPE_CODES",
    "Finding",
    "GatherResult",
    "Report",
    "check_shape",
    "evaluate_gather",
    "validate",
]

SCHEMA_NAME = "conversation-trace-v2"
KINDS = ("REQUEST", "RESPONSE", "CONTRIBUTION", "CRITIQUE", "HANDOFF", "GATHER_RESULT", "FENCE", "ACK")
TERMINALS = ("COMPLETED", "BLOCKED", "TIMED_OUT", "CANCELLED", "DISSENT_RECORDED")
RULES = ("ALL", "QUORUM", "FIRST_SUCCESS")
#: how FIRST_SUCCESS picks among successful candidates, never by the senders' clocks: the first in the
#: supplied order, or the lowest sender ref (both deterministic replays of the same trace)
TIE_BREAKS = ("supplied-order", "lowest-sender")
GATHER_STATUSES = ("complete", "partial", "blocked")
PAYLOAD_DIGEST_SCHEME = "jcs-v2"

# The schema file uses exactly these patterns (a test pins them). Times and digests
# also carry a maxLength, so a trailing newline (which ``$`` tolerates) is refused.
TIME_PATTERN = r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]Z$"
TIME_LENGTH = 20
DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
DIGEST_LENGTH = 71
VERIFICATION_REF_PATTERN = r"^[a-z][a-z0-9-]*:[^\s]+$"
PROTOCOL_PATTERN = r"^[a-z0-9][a-z0-9._-]*/v[0-9]+$"

_TIME_MATCH = re.compile(TIME_PATTERN).match
_VREF_SEARCH = re.compile(VERIFICATION_REF_PATTERN).search
_PROTOCOL_SEARCH = re.compile(PROTOCOL_PATTERN).search
_HEX = "0123456789abcdef"

CODES: dict[str, str] = {
    # shape
    "E_SCHEMA": "the trace does not match the conversation-trace-v2 JSON Schema at the pointer given",
    "E_UNKNOWN_KIND": "a message kind outside the closed list; unknown kinds fail closed",
    "E_BAD_VERIFICATION_REF": "verificationRef is present but empty or not of the form kind:value",
    # ordering and replay
    "E_DUPLICATE_MESSAGE": "a message id seen earlier in the trace; the duplicate never reaches a reducer",
    "E_SEQUENCE_GAP": "seq is not the exact next for its sender, epoch and generation (a gap or a later message "
                      "first)",
    "E_STALE_EPOCH": "the message epoch is not the conversation's epoch",
    "E_STALE_GENERATION": "the sender's body generation is not the one speaking for it at that point of the trace "
                          "(its current one, or an earlier body before it was replaced), or a participant's earlier "
                          "generations are out of order or replaced at a point that is not in the trace",
    "E_CAUSATION_GAP": "a causedBy parent is unknown or is not an earlier accepted message",
    "E_MESSAGE_CEILING": "the trace holds more messages than its messageCeiling; the excess is rejected",
    "E_DEADLINE": "a message is dated after the conversation deadline",
    "E_EXPIRED_MESSAGE": "a message is dated after its own expiresAt",
    "E_PAYLOAD_DIGEST": "payloadDigest is not the jcs-v2 digest of the payload the message carries",
    # audience
    "E_AUDIENCE_SCOPE": "an unknown sender, recipient or required acknowledger, or a message scope other than "
                        "the conversation's",
    "E_AUDIENCE_LABEL": "a recipient does not advertise every audience label the message declares, or the "
                        "labels are empty, repeated or not strings",
    "E_DUPLICATE_PARTICIPANT": "two participants share one ref, so the snapshot binds nobody unambiguously",
    # gathers
    "E_UNKNOWN_GATHER": "a message names a gatherId that no gather declares",
    "E_DUPLICATE_GATHER": "one gather id is declared twice (with the same membership)",
    "E_GATHER_MEMBERSHIP": "a contribution from a non-member, a membership that is not sorted, unique, nonempty "
                           "and known, or a gather redeclared with other members: membership is frozen",
    "E_GATHER_OPENER": "a gather's opener names no message of the trace",
    "E_GATHER_NOT_OPEN": "a contribution arrives before the gather's opener was accepted",
    "E_GATHER_CLOSED": "a contribution or a second GATHER_RESULT after the gather's GATHER_RESULT",
    "E_DUPLICATE_CONTRIBUTION": "a second contribution from the same member to one gather",
    "E_LATE_GATHER_CONTRIBUTION": "a contribution dated after its gather's deadline",
    "E_QUORUM_THRESHOLD": "a QUORUM gather without an integer threshold between 1 and the size of its "
                          "membership",
    "E_FIRST_SUCCESS_TIE_BREAK": "a FIRST_SUCCESS gather without a deterministic tie-break",
    "E_GATHER_RESULT_MISMATCH": "a gather's recorded result differs from the reduction of its accepted contributions",
    # terminal
    "E_TERMINAL_FENCE": "the terminal's fence names no message, or a message that is not a FENCE",
    "E_SECOND_FENCE": "a FENCE other than the conversation's one terminal fence",
    "E_POST_TERMINAL_MESSAGE": "a message after the fence other than one acknowledgement of it per required participant",
    "E_ACK_NOT_FENCE": "an ACK after the fence from a required participant that does not cite the fence in causedBy",
}

# Codes a shape violation may carry (check_shape never yields any other).
SHAPE_CODES = frozenset(
    {"E_SCHEMA", "E_UNKNOWN_KIND", "E_BAD_VERIFICATION_REF", "E_GATHER_MEMBERSHIP", "E_AUDIENCE_LABEL",
     "E_QUORUM_THRESHOLD", "E_FIRST_SUCCESS_TIE_BREAK"}
)


@dataclass(frozen=True)
class Finding:
    """One fault: its code, the message concerned (if any), a JSON pointer and one line."""

    code: str
    message_id: str | None
    pointer: str
    message: str

    def to_dict(self) -> dict:
        return {"code": self.code, "messageId": self.message_id, "pointer": self.pointer, "message": self.message}


@dataclass(frozen=True)
class GatherResult:
    """The deterministic reduction of a gather's accepted contributions.

    ``status`` is ``complete`` (the rule's predicate is met), ``partial`` (ALL or
    QUORUM without enough contributions: ``missing`` lists who did not contribute)
    or ``blocked`` (FIRST_SUCCESS without a successful candidate, conflicting QUORUM
    verdicts, or a gather declared without what its rule needs). Nothing missing is
    ever invented; ``dissent`` keeps every contribution that disagrees with the value.
    It is not a truth verdict and grants no authority.
    """

    gather_id: str | None
    rule: str | None
    status: str
    value: Any
    contributors: tuple[str, ...]
    missing: tuple[str, ...]
    dissent: tuple[dict, ...]
    inputs: tuple[str, ...]
    selected: str | None = None
    ignored: tuple[str, ...] = ()
    reason: str = ""

    def to_json(self) -> dict:
        """The form recorded in a trace under ``gathers[].result``."""
        out = {
            "status": self.status,
            "value": self.value,
            "contributors": list(self.contributors),
            "missing": list(self.missing),
            "dissent": [dict(d) for d in self.dissent],
            "inputs": list(self.inputs),
        }
        if self.selected is not None:
            out["selected"] = self.selected
        return out


@dataclass(frozen=True)
class Report:
    """What ``validate`` found. ``valid`` is True exactly when ``errors`` is empty."""

    valid: bool
    terminal: str | None  # None when invalid: an invalid trace has no terminal at face value
    reason: str
    errors: tuple[Finding, ...] = ()
    #: the terminal the trace declares or would reach, had it been valid (said beside the errors, never as its terminal)
    terminal_if_valid: str | None = None
    accepted: tuple[str, ...] = ()
    #: index in the supplied message list of each accepted message (a duplicated id is accepted once)
    accepted_positions: tuple[int, ...] = ()
    gathers: dict[str, GatherResult] = field(default_factory=dict)

    @property
    def codes(self) -> tuple[str, ...]:
        """The distinct error codes, in the order first found."""
        return tuple(dict.fromkeys(f.code for f in self.errors))

    def to_dict(self) -> dict:
        return {
            "valid": self.valid,
            "terminal": self.terminal,
            "terminal_if_valid": self.terminal_if_valid,
            "reason": self.reason,
            "errors": [f.to_dict() for f in self.errors],
            "accepted": list(self.accepted),
            "gathers": {k: v.to_json() for k, v in self.gathers.items()},
        }

    def raise_if_invalid(self) -> None:
        """Raise :class:`sim.errors.InputError` carrying the first finding's code."""
        if not self.valid:
            first = self.errors[0]
            raise InputError(f"{first.pointer or '/'}: {first.message}", code=first.code)


# --------------------------------------------------------------------------- shape

_MISSING = object()
_NO_BAD: frozenset = frozenset()
_ALL_BAD = frozenset({"*"})

_TOP_REQUIRED = ("schema", "protocol", "conversationId", "epoch", "scope", "deadline", "messageCeiling",
                 "participants", "messages", "gathers")
_TOP_ALLOWED = frozenset(_TOP_REQUIRED + ("terminal", "stateDigest"))
_PART_REQUIRED = ("ref", "principal", "generation", "audiences")
_PART_ALLOWED = frozenset(_PART_REQUIRED + ("earlierGenerations",))
_EARLIER_REQUIRED = ("generation", "replacedAfter")
_EARLIER_ALLOWED = frozenset(_EARLIER_REQUIRED)
_MSG_REQUIRED_T = ("id", "sender", "generation", "seq", "epoch", "scope", "audienceLabels", "recipients",
                   "kind", "causedBy", "at", "payloadDigest")
_MSG_REQUIRED = frozenset(_MSG_REQUIRED_T)
_REQUIRED_OF = itemgetter(*_MSG_REQUIRED_T)
_MSG_ALLOWED = frozenset(_MSG_REQUIRED_T + ("expiresAt", "verificationRef", "gatherId", "payload", "stateDigestAfter"))
_GATHER_REQUIRED = ("id", "membership", "rule", "deadline", "opener")
_GATHER_ALLOWED = frozenset(_GATHER_REQUIRED + ("threshold", "tieBreak", "result"))
_RESULT_REQUIRED = ("status", "value", "contributors", "missing", "dissent", "inputs")
_RESULT_ALLOWED = frozenset(_RESULT_REQUIRED + ("selected",))
_DISSENT_REQUIRED = ("message", "sender", "value")
_DISSENT_ALLOWED = frozenset(_DISSENT_REQUIRED)
_TERMINAL_REQUIRED = ("state", "fence", "requiredAcks", "truthEffect", "authorityEffect")
_TERMINAL_ALLOWED = frozenset(_TERMINAL_REQUIRED)
_KIND_SET = frozenset(KINDS)
# list fields of a message: (name, minItems, code for a shape fault); labels are the audience rule's
_LIST_FIELDS = (("audienceLabels", 1, "E_AUDIENCE_LABEL"), ("recipients", 1, "E_SCHEMA"), ("causedBy", 0, "E_SCHEMA"))
_TERMINAL_SET = frozenset(TERMINALS)
_RULE_SET = frozenset(RULES)
_STATUS_SET = frozenset(GATHER_STATUSES)


def _jtype(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer()):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def _is_int(v) -> bool:
    """JSON Schema's integer: not a boolean; a float with no fraction counts."""
    t = type(v)
    return t is int or (t is float and v.is_integer())


def _is_time(v) -> bool:
    return type(v) is str and len(v) == TIME_LENGTH and _TIME_MATCH(v) is not None


def _is_digest(v) -> bool:
    return type(v) is str and len(v) == DIGEST_LENGTH and v[:7] == "sha256:" and not v[7:].strip(_HEX)


def _ckey(v):
    """A hashable key with JSON Schema's equality (1 == 1.0, true != 1)."""
    if v is True or v is False:
        return ("b", v)
    if isinstance(v, (int, float)):
        return ("n", v)
    if isinstance(v, str):
        return ("s", v)
    if isinstance(v, list):
        return ("l", tuple(_ckey(x) for x in v))
    if isinstance(v, dict):
        return ("d", frozenset((k, _ckey(x)) for k, x in v.items()))
    return ("z", None)


def _unique(items: list) -> bool:
    try:
        if len(set(items)) != len(items):
            # set() merges 1/True and 1/1.0; settle with JSON Schema's equality
            return len({_ckey(x) for x in items}) == len(items)
        return True
    except TypeError:
        return len({_ckey(x) for x in items}) == len(items)


class _Shape:
    """Emits shape findings into ``out``; each check returns True when the value is fine."""

    __slots__ = ("out",)

    def __init__(self, out: list):
        self.out = out

    def add(self, ptr: str, text: str, mid=None, code="E_SCHEMA") -> None:
        self.out.append(Finding(code, mid, ptr, text))

    def obj(self, v, ptr, what, required, allowed, mid=None) -> set | None:
        """Check an object's keys. Returns the set of missing keys, or None if not an object."""
        if type(v) is not dict:
            self.add(ptr, f"{what} is {_jtype(v)}, expected an object", mid)
            return None
        missing = {k for k in required if k not in v}
        for k in required:
            if k in missing:
                self.add(ptr, f"{what} lacks the required field {k!r}", mid)
        extra = sorted(k for k in v if k not in allowed)
        if extra:
            self.add(ptr, f"{what} has unknown field(s) {', '.join(map(repr, extra))}", mid)
        return missing

    def string(self, v, ptr, what, mid=None, code="E_SCHEMA") -> bool:
        if type(v) is not str:
            self.add(ptr, f"{what} is {_jtype(v)}, expected a string", mid, code)
            return False
        if not v:
            self.add(ptr, f"{what} is empty", mid, code)
            return False
        return True

    def integer(self, v, ptr, what, mid=None, code="E_SCHEMA") -> bool:
        if not _is_int(v):
            self.add(ptr, f"{what} is {_jtype(v)} {v!r}, expected an integer", mid, code)
            return False
        if v < 1:
            self.add(ptr, f"{what} is {v!r}, expected at least 1", mid, code)
            return False
        return True

    def time(self, v, ptr, what, mid=None) -> bool:
        if _is_time(v):
            return True
        if type(v) is not str:
            self.add(ptr, f"{what} is {_jtype(v)}, expected a UTC time string", mid)
        else:
            self.add(ptr, f"{what} {v!r} is not a UTC time YYYY-MM-DDTHH:MM:SSZ", mid)
        return False

    def digest(self, v, ptr, what, mid=None) -> bool:
        if _is_digest(v):
            return True
        if type(v) is not str:
            self.add(ptr, f"{what} is {_jtype(v)}, expected sha256:<64 lowercase hex>", mid)
        else:
            self.add(ptr, f"{what} {v[:80]!r} is not sha256:<64 lowercase hex>", mid)
        return False

    def strings(self, v, ptr, what, *, min_items=0, mid=None, code="E_SCHEMA") -> bool:
        """An array of nonempty strings, unique; at least ``min_items`` long."""
        if type(v) is not list:
            self.add(ptr, f"{what} is {_jtype(v)}, expected an array", mid, code)
            return False
        ok = True
        if len(v) < min_items:
            self.add(ptr, f"{what} is empty; at least {min_items} entry is required", mid, code)
            ok = False
        for j, x in enumerate(v):
            if type(x) is not str:
                self.add(f"{ptr}/{j}", f"{what}[{j}] is {_jtype(x)}, expected a string", mid, code)
                ok = False
            elif not x:
                self.add(f"{ptr}/{j}", f"{what}[{j}] is empty", mid, code)
                ok = False
        if not _unique(v):
            self.add(ptr, f"{what} repeats an entry", mid, code)
            ok = False
        return ok

    def enum(self, v, ptr, what, allowed, mid=None, code="E_SCHEMA") -> bool:
        if type(v) is str and v in allowed:
            return True
        options = ", ".join(sorted(allowed))
        self.add(ptr, f"{what} {v!r} is not one of {options}", mid, code)
        return False

    # ---- the parts of a trace

    def header(self, t: dict) -> dict:
        """Check everything but the messages. Returns {field: usable value or None}."""
        ok: dict[str, Any] = {}
        missing = self.obj(t, "", "the trace", _TOP_REQUIRED, _TOP_ALLOWED) or set()
        g = t.get
        v = g("schema", _MISSING)
        if v is not _MISSING and v != SCHEMA_NAME:
            self.add("/schema", f"schema is {v!r}, expected {SCHEMA_NAME!r}")
        v = g("protocol", _MISSING)
        if v is not _MISSING:
            if type(v) is not str:
                self.add("/protocol", f"protocol is {_jtype(v)}, expected a string like name/v1")
            elif not _PROTOCOL_SEARCH(v):
                self.add("/protocol", f"protocol {v!r} is not of the form name/vN")
        for key in ("conversationId", "scope"):
            v = g(key, _MISSING)
            if v is not _MISSING and self.string(v, f"/{key}", key):
                ok[key] = v
        for key in ("epoch", "messageCeiling"):
            v = g(key, _MISSING)
            if v is not _MISSING and self.integer(v, f"/{key}", key):
                ok[key] = v
        v = g("deadline", _MISSING)
        if v is not _MISSING and self.time(v, "/deadline", "deadline"):
            ok["deadline"] = v
        v = g("stateDigest", _MISSING)
        if v is not _MISSING:
            self.digest(v, "/stateDigest", "stateDigest")
        ok["participants"] = self.participants(g("participants", _MISSING))
        ok["gathers"] = self.gathers(g("gathers", _MISSING))
        ok["terminal"] = self.terminal(g("terminal", _MISSING))
        v = g("messages", _MISSING)
        if v is not _MISSING and type(v) is not list:
            self.add("/messages", f"messages is {_jtype(v)}, expected an array")
        ok["messages"] = v if type(v) is list else None
        ok["_missing"] = missing
        return ok

    def participants(self, v) -> list | None:
        """Returns [(index, ref, generation or None, audiences frozenset or None, earlier)]; ``earlier``
        lists the bodies this participant had before its current one, oldest first, as
        (index, generation, id of the message after which it was replaced, or None: before the first)."""
        if v is _MISSING:
            return None
        if type(v) is not list:
            self.add("/participants", f"participants is {_jtype(v)}, expected an array")
            return None
        if not v:
            self.add("/participants", "participants is empty; at least one participant is required")
        rows = []
        for j, p in enumerate(v):
            ptr = f"/participants/{j}"
            if self.obj(p, ptr, f"participant {j}", _PART_REQUIRED, _PART_ALLOWED) is None:
                continue
            ref = p.get("ref", _MISSING)
            ref_ok = ref is not _MISSING and self.string(ref, f"{ptr}/ref", "ref")
            pr = p.get("principal", _MISSING)
            if pr is not _MISSING:
                self.string(pr, f"{ptr}/principal", "principal")
            gen = p.get("generation", _MISSING)
            gen_ok = gen is not _MISSING and self.integer(gen, f"{ptr}/generation", "generation")
            aud = p.get("audiences", _MISSING)
            aud_ok = aud is not _MISSING and self.strings(aud, f"{ptr}/audiences", "audiences", min_items=1)
            earlier = self.earlier(p.get("earlierGenerations", _MISSING), ptr)
            if ref_ok:
                rows.append((j, ref, gen if gen_ok else None, frozenset(aud) if aud_ok else None, earlier))
        return rows

    def earlier(self, v, ptr: str) -> tuple:
        """A participant's earlier body generations, as written (their order is checked by
        :func:`validate`); ``replacedAfter`` a message id, or null for a body replaced before the first."""
        if v is _MISSING:
            return ()
        ptr = f"{ptr}/earlierGenerations"
        if type(v) is not list:
            self.add(ptr, f"earlierGenerations is {_jtype(v)}, expected an array")
            return ()
        out = []
        for k, e in enumerate(v):
            eptr = f"{ptr}/{k}"
            if self.obj(e, eptr, f"earlier generation {k}", _EARLIER_REQUIRED, _EARLIER_ALLOWED) is None:
                continue
            gen = e.get("generation", _MISSING)
            after = e.get("replacedAfter", _MISSING)
            gen_ok = gen is not _MISSING and self.integer(gen, f"{eptr}/generation", "generation")
            after_ok = after is None or (after is not _MISSING and self.string(after, f"{eptr}/replacedAfter",
                                                                                "replacedAfter"))
            if gen_ok and after_ok:
                out.append((k, gen, after))
        return tuple(out)

    def gathers(self, v) -> list | None:
        if v is _MISSING:
            return None
        if type(v) is not list:
            self.add("/gathers", f"gathers is {_jtype(v)}, expected an array")
            return None
        rows = []
        for j, gd in enumerate(v):
            ptr = f"/gathers/{j}"
            missing = self.obj(gd, ptr, f"gather {j}", _GATHER_REQUIRED, _GATHER_ALLOWED)
            if missing is None:
                continue
            row: dict[str, Any] = {"index": j}
            gid = gd.get("id", _MISSING)
            if gid is not _MISSING and self.string(gid, f"{ptr}/id", "gather id"):
                row["id"] = gid
            mem = gd.get("membership", _MISSING)
            if mem is not _MISSING and self.strings(mem, f"{ptr}/membership", "membership", min_items=1,
                                                    code="E_GATHER_MEMBERSHIP"):
                row["membership"] = tuple(mem)
            rule = gd.get("rule", _MISSING)
            if rule is not _MISSING and self.enum(rule, f"{ptr}/rule", "rule", _RULE_SET):
                row["rule"] = rule
            dl = gd.get("deadline", _MISSING)
            if dl is not _MISSING and self.time(dl, f"{ptr}/deadline", "gather deadline"):
                row["deadline"] = dl
            op = gd.get("opener", _MISSING)
            if op is not _MISSING and self.string(op, f"{ptr}/opener", "opener"):
                row["opener"] = op
            # threshold only with QUORUM (required there); tieBreak only with FIRST_SUCCESS
            rname = rule if rule is not _MISSING else None
            th = gd.get("threshold", _MISSING)
            if rule == "QUORUM":
                if th is _MISSING:
                    self.add(ptr, "a QUORUM gather needs an integer threshold", code="E_QUORUM_THRESHOLD")
                elif self.integer(th, f"{ptr}/threshold", "threshold", code="E_QUORUM_THRESHOLD"):
                    row["threshold"] = th
            elif th is not _MISSING:
                self.add(f"{ptr}/threshold", f"threshold belongs to QUORUM gathers only, not {rname!r}")
            tb = gd.get("tieBreak", _MISSING)
            if rule == "FIRST_SUCCESS":
                if tb is _MISSING:
                    self.add(ptr, "a FIRST_SUCCESS gather needs a deterministic tieBreak ('supplied-order' or "
                                  "'lowest-sender')",
                             code="E_FIRST_SUCCESS_TIE_BREAK")
                elif self.enum(tb, f"{ptr}/tieBreak", "tieBreak", frozenset(TIE_BREAKS),
                               code="E_FIRST_SUCCESS_TIE_BREAK"):
                    row["tieBreak"] = tb
            elif tb is not _MISSING:
                self.add(f"{ptr}/tieBreak", f"tieBreak belongs to FIRST_SUCCESS gathers only, not {rname!r}")
            res = gd.get("result", _MISSING)
            if res is not _MISSING and self.result(res, f"{ptr}/result"):
                row["result"] = res
            rows.append(row)
        return rows

    def result(self, r, ptr) -> bool:
        n = len(self.out)
        if self.obj(r, ptr, "gather result", _RESULT_REQUIRED, _RESULT_ALLOWED) is None:
            return False
        if "status" in r:
            self.enum(r["status"], f"{ptr}/status", "status", _STATUS_SET)
        for key in ("contributors", "missing", "inputs"):
            if key in r:
                self.strings(r[key], f"{ptr}/{key}", key)
        if "selected" in r:
            self.string(r["selected"], f"{ptr}/selected", "selected")
        if "dissent" in r:
            d = r["dissent"]
            if type(d) is not list:
                self.add(f"{ptr}/dissent", f"dissent is {_jtype(d)}, expected an array")
            else:
                for k, item in enumerate(d):
                    p = f"{ptr}/dissent/{k}"
                    if self.obj(item, p, f"dissent {k}", _DISSENT_REQUIRED, _DISSENT_ALLOWED) is None:
                        continue
                    for key in ("message", "sender"):
                        if key in item:
                            self.string(item[key], f"{p}/{key}", key)
        return len(self.out) == n

    def terminal(self, v) -> dict | None:
        if v is _MISSING:
            return None
        if self.obj(v, "/terminal", "terminal", _TERMINAL_REQUIRED, _TERMINAL_ALLOWED) is None:
            return None
        row: dict[str, Any] = {}
        st = v.get("state", _MISSING)
        if st is not _MISSING and self.enum(st, "/terminal/state", "terminal state", _TERMINAL_SET):
            row["state"] = st
        fe = v.get("fence", _MISSING)
        if fe is not _MISSING and self.string(fe, "/terminal/fence", "fence"):
            row["fence"] = fe
        ra = v.get("requiredAcks", _MISSING)
        if ra is not _MISSING and self.strings(ra, "/terminal/requiredAcks", "requiredAcks"):
            row["requiredAcks"] = tuple(ra)
        for key in ("truthEffect", "authorityEffect"):
            e = v.get(key, _MISSING)
            if e is not _MISSING and e != "NONE":
                self.add(f"/terminal/{key}", f"{key} is {e!r}; a protocol terminal never has an effect on "
                                             "truth or authority, so it must be 'NONE'")
        return row

    def message(self, m, i: int) -> frozenset | set:
        """Check one message. Returns the names of unusable fields (empty when all is well)."""
        if type(m) is not dict:
            self.add(f"/messages/{i}", f"message {i} is {_jtype(m)}, expected an object")
            return _ALL_BAD
        keys = m.keys()
        bad: set | frozenset = _NO_BAD
        g = m.get
        if keys <= _MSG_ALLOWED and keys >= _MSG_REQUIRED:
            mid, sender, gen, seq, ep, scope, labels, recips, kind, caused, at, pd = _REQUIRED_OF(m)
        else:
            mid, sender, gen, seq, ep, scope, labels, recips, kind, caused, at, pd = map(g, _MSG_REQUIRED_T)
            mid0 = mid if type(mid) is str else None
            bad = set(_MSG_REQUIRED - keys)
            for k in _MSG_REQUIRED_T:
                if k in bad:
                    self.add(f"/messages/{i}", f"message {i} lacks the required field {k!r}", mid0)
            extra = sorted(k for k in keys if k not in _MSG_ALLOWED)
            if extra:
                self.add(f"/messages/{i}", f"message {i} has unknown field(s) {', '.join(map(repr, extra))}", mid0)
        # Fast checks first; the slow branch below re-checks and reports on failure.
        if type(mid) is not str or not mid:
            if "id" not in bad:
                bad = set(bad)
                bad.add("id")
                self.string(mid, f"/messages/{i}/id", "id")
            mid = None
        if (type(sender) is not str or not sender) and "sender" not in bad:
            bad = self._bad(bad, "sender", self.string(sender, f"/messages/{i}/sender", "sender", mid))
        if (type(gen) is not int or gen < 1) and "generation" not in bad:
            bad = self._bad(bad, "generation", self.integer(gen, f"/messages/{i}/generation", "generation", mid))
        if (type(seq) is not int or seq < 1) and "seq" not in bad:
            bad = self._bad(bad, "seq", self.integer(seq, f"/messages/{i}/seq", "seq", mid))
        if (type(ep) is not int or ep < 1) and "epoch" not in bad:
            bad = self._bad(bad, "epoch", self.integer(ep, f"/messages/{i}/epoch", "epoch", mid))
        if (type(scope) is not str or not scope) and "scope" not in bad:
            bad = self._bad(bad, "scope", self.string(scope, f"/messages/{i}/scope", "scope", mid))
        for (key, least, code), v in zip(_LIST_FIELDS, (labels, recips, caused)):
            if type(v) is list and len(v) >= least:
                if len(v) == 1:
                    x = v[0]
                    if type(x) is str and x:
                        continue
                elif all(type(x) is str and x for x in v) and len(set(v)) == len(v):
                    continue
            if key not in bad:
                bad = self._bad(bad, key, self.strings(v, f"/messages/{i}/{key}", key, min_items=least, mid=mid,
                                                       code=code))
        if not (type(kind) is str and kind in _KIND_SET) and "kind" not in bad:
            self.add(f"/messages/{i}/kind", f"kind {kind!r} is not one of the closed kinds {', '.join(KINDS)}",
                     mid, "E_UNKNOWN_KIND")
            bad = self._bad(bad, "kind", False)
        # _is_time and _is_digest, written out: this runs once per message
        if not (type(at) is str and len(at) == TIME_LENGTH and _TIME_MATCH(at) is not None) and "at" not in bad:
            bad = self._bad(bad, "at", self.time(at, f"/messages/{i}/at", "at", mid))
        if not (type(pd) is str and len(pd) == DIGEST_LENGTH and pd[:7] == "sha256:" and not pd[7:].strip(_HEX)) \
                and "payloadDigest" not in bad:
            bad = self._bad(bad, "payloadDigest", self.digest(pd, f"/messages/{i}/payloadDigest", "payloadDigest", mid))
        if len(keys) > 12 or bad is not _NO_BAD:  # optional fields may be present
            v = g("expiresAt", _MISSING)
            if v is not _MISSING and not _is_time(v):
                bad = self._bad(bad, "expiresAt", self.time(v, f"/messages/{i}/expiresAt", "expiresAt", mid))
            v = g("verificationRef", _MISSING)
            if v is not _MISSING and not (type(v) is str and _VREF_SEARCH(v)):
                if type(v) is not str:
                    text = f"verificationRef is {_jtype(v)}, expected a string kind:value"
                elif not v:
                    text = "verificationRef is present but empty"
                else:
                    text = f"verificationRef {v[:80]!r} is not of the form kind:value"
                self.add(f"/messages/{i}/verificationRef", text, mid, "E_BAD_VERIFICATION_REF")
                bad = self._bad(bad, "verificationRef", False)
            v = g("gatherId", _MISSING)
            if v is not _MISSING and (type(v) is not str or not v):
                bad = self._bad(bad, "gatherId", self.string(v, f"/messages/{i}/gatherId", "gatherId", mid))
            v = g("payload", _MISSING)
            if v is not _MISSING and type(v) is not dict:
                self.add(f"/messages/{i}/payload", f"payload is {_jtype(v)}, expected an object", mid)
                bad = self._bad(bad, "payload", False)
            v = g("stateDigestAfter", _MISSING)
            if v is not _MISSING and not _is_digest(v):
                bad = self._bad(bad, "stateDigestAfter",
                                self.digest(v, f"/messages/{i}/stateDigestAfter", "stateDigestAfter", mid))
        if kind == "GATHER_RESULT" and "gatherId" not in keys:
            self.add(f"/messages/{i}", f"GATHER_RESULT message {i} lacks the required field 'gatherId'", mid)
            bad = self._bad(bad, "gatherId", False)
        return bad

    @staticmethod
    def _bad(bad, key, ok):
        if ok:
            return bad
        bad = set(bad)
        bad.add(key)
        return bad


def check_shape(trace) -> tuple[Finding, ...]:
    """Every JSON Schema violation of ``trace`` (hand-written; agrees with ``jsonschema``)."""
    out: list[Finding] = []
    sh = _Shape(out)
    if type(trace) is not dict:
        sh.add("", f"the trace is {_jtype(trace)}, expected an object")
        return tuple(out)
    head = sh.header(trace)
    msgs = head["messages"]
    if msgs is not None:
        for i, m in enumerate(msgs):
            sh.message(m, i)
    return tuple(out)


# --------------------------------------------------------------------------- gathers


def _value_of(c: dict):
    """A contribution's inert value: payload value, else its vote, else its payload digest."""
    p = c.get("payload")
    if isinstance(p, dict):
        if "value" in p:
            return p["value"]
        if "vote" in p:
            return p["vote"]
    return c.get("payloadDigest")


def _verdict_of(c: dict):
    p = c.get("payload")
    if isinstance(p, dict) and "vote" in p:
        return p["vote"]
    return _value_of(c)


def _succeeded(c: dict) -> bool:
    """A FIRST_SUCCESS candidate succeeds unless its payload says ``success: false`` or votes reject."""
    p = c.get("payload")
    if isinstance(p, dict):
        return p.get("success", True) is not False and p.get("vote") != "reject"
    return True


def _vkey(v) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _dissent(c: dict, value) -> dict:
    return {"message": c.get("id"), "sender": c.get("sender"), "value": value}


def evaluate_gather(gather: dict, contributions: Iterable[dict]) -> GatherResult:
    """Reduce a gather's contributions under its frozen rule.

    ``gather`` is a gather object as written in a trace; ``contributions`` are the
    accepted CONTRIBUTION messages for it, in accepted order. As a second line of
    defence the reducer ignores (and lists under ``ignored``) contributions from
    non-members, for another gather, dated after the gather deadline, or a second one
    from the same member: it never counts them and never invents missing input.

    * ALL: complete when every member contributed once; otherwise partial.
      ``value`` maps each contributor to its value; votes of ``reject`` are dissent.
    * QUORUM: complete when one verdict (payload ``vote``, else ``value``) has at least
      ``threshold`` contributions and more than any other; every contribution with
      another verdict is kept in ``dissent``. Short of the threshold: partial.
      Two verdicts tied at or above the threshold: blocked.
    * FIRST_SUCCESS: a successful candidate, picked without the senders' clocks (a
      backdated ``at`` buys nothing): under tie-break ``supplied-order`` the first in the
      supplied order, under ``lowest-sender`` the one from the lowest sender ref. An inert
      candidate only, never a verdict on truth. No success: blocked.
    """
    gid = gather.get("id")
    rule = gather.get("rule")
    raw = gather.get("membership")
    members = tuple(raw) if isinstance(raw, list) and all(isinstance(x, str) for x in raw) else ()
    member_set = set(members)
    deadline = gather.get("deadline") if _is_time(gather.get("deadline")) else None
    inputs: list[dict] = []
    ignored: list[str] = []
    by_member: dict[str, dict] = {}
    for c in contributions:
        s = c.get("sender")
        gref = c.get("gatherId", gid)
        at = c.get("at")
        late = deadline is not None and isinstance(at, str) and at > deadline
        if s not in member_set or s in by_member or gref != gid or late:
            ignored.append(c.get("id"))
            continue
        by_member[s] = c
        inputs.append(c)
    contributors = tuple(m for m in members if m in by_member)
    missing = tuple(m for m in members if m not in by_member)
    ids = tuple(c.get("id") for c in inputs)
    common = dict(gather_id=gid, rule=rule, contributors=contributors, missing=missing, inputs=ids,
                  ignored=tuple(ignored))
    waiting = f"; no input from {', '.join(missing)}" if missing else ""

    if rule == "ALL":
        value = {m: _value_of(by_member[m]) for m in contributors}
        dissent = tuple(_dissent(c, _verdict_of(c)) for c in inputs if _verdict_of(c) == "reject")
        if not missing:
            return GatherResult(status="complete", value=value, dissent=dissent,
                                reason=f"gather {gid}: all {len(members)} members contributed", **common)
        return GatherResult(status="partial", value=value, dissent=dissent,
                            reason=f"gather {gid}: partial, {len(contributors)} of {len(members)} contributed{waiting}",
                            **common)

    if rule == "QUORUM":
        th = gather.get("threshold")
        if not (_is_int(th) and 1 <= th <= max(len(members), 1)) or not members:
            return GatherResult(status="blocked", value=None, dissent=(),
                                reason=f"gather {gid}: QUORUM without a usable threshold", **common)
        tally: dict[str, list] = {}
        for c in inputs:
            v = _verdict_of(c)
            tally.setdefault(_vkey(v), [v, 0])[1] += 1
        reached = sorted((n, k) for k, (v, n) in tally.items() if n >= th)
        if not reached:
            best = max((n for _, n in tally.values()), default=0)
            return GatherResult(status="partial", value=None, dissent=(),
                                reason=f"gather {gid}: partial, no verdict reached {th} (best {best}){waiting}",
                                **common)
        top = reached[-1][0]
        if len([1 for n, _ in reached if n == top]) > 1:
            return GatherResult(status="blocked", value=None, dissent=(),
                                reason=f"gather {gid}: blocked, two verdicts tie at {top} of threshold {th}",
                                **common)
        value = tally[reached[-1][1]][0]
        key = reached[-1][1]
        dissent = tuple(_dissent(c, _verdict_of(c)) for c in inputs if _vkey(_verdict_of(c)) != key)
        kept = f", {len(dissent)} dissent kept" if dissent else ""
        return GatherResult(status="complete", value=value, dissent=dissent,
                            reason=f"gather {gid}: {top} of {len(members)} for {_vkey(value)} (threshold {th}){kept}",
                            **common)

    if rule == "FIRST_SUCCESS":
        if gather.get("tieBreak") not in TIE_BREAKS:
            return GatherResult(status="blocked", value=None, dissent=(),
                                reason=f"gather {gid}: FIRST_SUCCESS without a deterministic tie-break", **common)
        ok = [c for c in inputs if _succeeded(c)]
        if not ok:
            return GatherResult(status="blocked", value=None, dissent=(),
                                reason=f"gather {gid}: blocked, no successful candidate{waiting}", **common)
        if gather.get("tieBreak") == "lowest-sender":
            chosen, how = min(ok, key=lambda c: str(c.get("sender"))), "the lowest sender"
        else:
            chosen, how = ok[0], "the first success in the supplied order"
        return GatherResult(status="complete", value=_value_of(chosen), dissent=(), selected=chosen.get("id"),
                            reason=f"gather {gid}: candidate {chosen.get('id')} from {chosen.get('sender')} "
                                   f"({how}, never the senders' clocks); a candidate, not a verdict", **common)

    return GatherResult(status="blocked", value=None, dissent=(),
                        reason=f"gather {gid}: unknown rule {rule!r}", **common)


# --------------------------------------------------------------------------- validate


class _G:
    """A gather as the validator tracks it."""

    __slots__ = ("index", "id", "decl", "members", "deadline", "opener", "opener_known", "closed_by",
                 "contributions", "contributed")

    def __init__(self, row: dict, decl: dict):
        self.index = row["index"]
        self.id = row["id"]
        self.decl = decl
        mem = row.get("membership")
        self.members = frozenset(mem) if mem is not None else None
        self.deadline = row.get("deadline")
        self.opener = row.get("opener")
        self.opener_known = False
        self.closed_by: str | None = None
        self.contributions: list[dict] = []
        self.contributed: set[str] = set()


@dataclass
class Scan:
    """What judging one message needs to know of the whole list before the first: how many messages
    there are, where the fences are, and where a few named ids first appear (the messages a body was
    replaced after, the gathers' openers, the terminal's fence). :func:`scan_messages` finds it in a
    list; a caller that streams the messages (a run exported a row at a time) supplies it."""

    count: int
    #: (index, id) of every FENCE message, in order
    fences: list = field(default_factory=list)
    #: id -> index of the first message carrying it, for each id asked for
    first_at: dict = field(default_factory=dict)
    #: id -> kind of that first message
    kind_at: dict = field(default_factory=dict)


def wanted_ids(trace: dict) -> set:
    """The ids a :class:`Scan` of ``trace`` must place: earlier bodies' ``replacedAfter``, gather
    openers, the terminal's fence."""
    want = []
    for p in trace.get("participants") if type(trace.get("participants")) is list else ():
        if type(p) is dict and type(p.get("earlierGenerations")) is list:
            want.extend(e.get("replacedAfter") for e in p["earlierGenerations"] if type(e) is dict)
    for g in trace.get("gathers") if type(trace.get("gathers")) is list else ():
        if type(g) is dict:
            want.append(g.get("opener"))
    if type(trace.get("terminal")) is dict:
        want.append(trace["terminal"].get("fence"))
    return {x for x in want if type(x) is str}


def scan_messages(messages: list, want: set) -> Scan:
    """The :class:`Scan` of a list of messages, placing the ids in ``want``."""
    scan = Scan(len(messages))
    fences, first_at, kind_at = scan.fences, scan.first_at, scan.kind_at
    for i, m in enumerate(messages):
        if type(m) is dict:
            if m.get("kind") == "FENCE":
                fences.append((i, m.get("id")))
            mid = m.get("id")
            if type(mid) is str and mid in want and mid not in first_at:
                first_at[mid] = i
                kind_at[mid] = m.get("kind")
    return scan


def validate(trace, *, check_payload_digests: bool = True) -> Report:
    """Validate a parsed ``conversation-trace-v2`` trace. See the module docstring.

    ``check_payload_digests`` recomputes ``payloadDigest`` (jcs-v2) for every message
    that carries its ``payload``; turn it off only to time the rest.
    """
    judge = _Judge(trace, None, None, set(), set(), check_payload_digests, None)
    for _ in judge.run():
        pass
    return judge.report


class StreamJudge:
    """:func:`validate` a message at a time, for a trace too big to hold: the header (the trace
    without its messages), the :class:`Scan` of the messages, and where to remember the ids seen and
    accepted (anything with ``in`` and ``add``: a set, or a table on disk). ``judge(messages)`` yields,
    per message, whether it was accepted; afterwards ``report`` is the :class:`Report`, holding the
    first ``keep`` findings (the rest are counted) and no list of accepted ids."""

    def __init__(self, header: dict, scan: Scan, *, seen=None, accepted=None, keep: int = 1000,
                 check_payload_digests: bool = True):
        self.header, self.scan, self.keep = header, scan, keep
        self.seen = set() if seen is None else seen
        self.accepted = set() if accepted is None else accepted
        self.check = check_payload_digests
        self.report: Report | None = None

    def judge(self, messages: Iterable) -> Iterable[bool]:
        judge = _Judge(self.header, self.scan, messages, self.seen, self.accepted, self.check, self.keep)
        yield from judge.run()
        self.report = judge.report


class _Judge:
    """The validator over one trace, one method per part of the check. :meth:`run` judges the header
    (:meth:`envelope`, :meth:`participants`, :meth:`declared_gathers`, :meth:`terminal_fence`), then
    each message in :meth:`judge_messages` (its shape, id and place under the ceiling, then
    :meth:`speaker`: sender, epoch, generation, sequence; :meth:`audience`; :meth:`causes`;
    :meth:`timing`; :meth:`fenced`; :meth:`gathered`; :meth:`payload`; accepted if none found a
    fault), yielding whether each was accepted, then the gathers (:meth:`reduce_gathers`) and the
    terminal (:meth:`acknowledgements`); the :class:`Report` is then in ``report``. Findings come out
    in that order. A method's guard that holds for most messages is tested in the loop before the call.

    ``stream`` is None to judge ``trace["messages"]`` (and find the :class:`Scan` in it); ``keep`` is
    None to keep every finding and the accepted ids. ``seen`` and ``acc_index`` remember the ids seen
    and accepted (anything with ``in`` and ``add``)."""

    __slots__ = ("acc_index", "accepted", "acked", "add", "bodies", "ceiling", "check_digests", "conv_deadline",
                 "conv_epoch", "conv_scope", "count", "dropped", "fence_at", "fence_id", "gathers", "head", "keep",
                 "known_parts", "last_ok", "messages", "n_accepted", "next_seq", "out", "parts", "positions",
                 "remember", "report", "required", "required_set", "results", "scan", "seen", "sh", "stream", "t_fence",
                 "t_state", "terminal", "trace")

    def __init__(self, trace, scan: Scan | None, stream, seen, acc_index, check_payload_digests: bool,
                 keep: int | None, remember: bool = True):
        self.trace, self.scan, self.stream, self.keep = trace, scan, stream, keep
        # keep the accepted ids and positions for the Report (the caller may record them itself, from
        # what run() yields, when there are millions)
        self.remember = remember and keep is None
        self.seen, self.acc_index, self.check_digests = seen, acc_index, check_payload_digests
        self.out: list[Finding] = []
        self.add = self.out.append
        self.sh = _Shape(self.out)
        # participants: ref -> (generation, audiences); a repeated ref is a fault
        self.parts: dict[str, tuple] = {}
        # ref -> [(generation, index of the last message it may send)] for each earlier body, oldest first
        self.bodies: dict[str, list] = {}
        self.gathers: dict[str, _G] = {}
        # what the messages leave behind
        self.accepted: list[str] = []
        self.positions: list[int] = []
        self.n_accepted = self.dropped = 0
        self.next_seq: dict[tuple, int] = {}
        self.acked: dict[str, str] = {}
        self.results: dict[str, GatherResult] = {}
        self.report: Report | None = None

    def run(self) -> Iterable[bool]:
        """The whole check, in order; yields per message whether it was accepted."""
        trace = self.trace
        if type(trace) is not dict:
            self.sh.add("", f"the trace is {_jtype(trace)}, expected an object")
            self.report = _report(self.out, None, [], {}, None)
            return
        self.judge_header(trace)
        yield from self.judge_messages()
        self.finish()

    def judge_header(self, trace: dict) -> None:
        """Everything before the first message (``sim.protocol.fast`` runs it too)."""
        self.envelope(trace)
        self.participants()
        self.declared_gathers()
        self.terminal_fence()

    def finish(self) -> None:
        """Everything after the last message: the gathers, the terminal, the :class:`Report`."""
        self.reduce_gathers()
        missing_acks, unresolved = self.acknowledgements()
        required, acked = self.required, self.acked
        self.report = _report(self.out, self.terminal, self.accepted, self.results, self.fence_id, self.t_state,
                              missing_acks, unresolved, [r for r in (required or ()) if r in acked],
                              self.positions, self.n_accepted, self.dropped)

    # ---- the header

    def envelope(self, trace: dict) -> None:
        """The header's shape, and what the messages are judged against: epoch, scope, deadline,
        ceiling, terminal, and the messages with their :class:`Scan`."""
        head = self.head = self.sh.header(trace)
        self.conv_epoch = head.get("epoch")
        self.conv_scope = head.get("scope")
        self.conv_deadline = head.get("deadline")
        self.ceiling = head.get("messageCeiling")
        self.terminal = head["terminal"]
        if self.stream is None:
            self.messages = head["messages"] or []
            self.scan = scan_messages(self.messages, wanted_ids(trace))
        else:
            self.messages = self.stream
        self.count = self.scan.count

    def participants(self) -> None:
        """Each participant once; each earlier body older than the next, replaced after a message of
        the trace, in order."""
        parts, bodies, add = self.parts, self.bodies, self.add
        prows = self.head["participants"]
        if prows is not None:
            first_at = self.scan.first_at
            for j, ref, gen, aud, earlier in prows:
                if ref in parts:
                    add(Finding("E_DUPLICATE_PARTICIPANT", None, f"/participants/{j}/ref",
                                f"participant ref {ref!r} is declared twice"))
                    continue
                parts[ref] = (gen, aud)
                last, prev = -1, 0
                for k, egen, after in earlier:
                    at = -1 if after is None else first_at.get(after)
                    ptr = f"/participants/{j}/earlierGenerations/{k}"
                    if egen <= prev or (gen is not None and egen >= gen):
                        add(Finding("E_STALE_GENERATION", None, f"{ptr}/generation",
                                    f"{ref}: earlier generation {egen} is not between {prev} and the current generation "
                                    f"{gen} (earlier generations come oldest first, each older than the next)"))
                        continue
                    if at is None:
                        add(Finding("E_STALE_GENERATION", None, f"{ptr}/replacedAfter",
                                    f"{ref}: generation {egen} is replaced after {after}, which names no message of the trace"))
                        continue
                    if at < last:
                        add(Finding("E_STALE_GENERATION", None, f"{ptr}/replacedAfter",
                                    f"{ref}: generation {egen} is replaced after {after}, before the body it replaced was"))
                        continue
                    last, prev = at, egen
                    bodies.setdefault(ref, []).append((egen, at, after))
        self.known_parts = prows is not None

    def declared_gathers(self) -> None:
        """Gathers: the first declaration of an id is the frozen one; members sorted, participants, at
        least as many as the threshold."""
        gathers, parts, known_parts, add = self.gathers, self.parts, self.known_parts, self.add
        trace = self.trace
        raw_gathers = trace.get("gathers") if type(trace.get("gathers")) is list else []
        for row in self.head["gathers"] or ():
            j = row["index"]
            if "id" not in row:
                continue
            gid = row["id"]
            mem = row.get("membership")
            prev = gathers.get(gid)
            if prev is not None:
                if mem is not None and prev.members is not None and frozenset(mem) != prev.members:
                    add(Finding("E_GATHER_MEMBERSHIP", None, f"/gathers/{j}/membership",
                                f"gather {gid} is declared again with other members; membership is frozen when "
                                f"it opens (first declared as {', '.join(sorted(prev.members))})"))
                else:
                    add(Finding("E_DUPLICATE_GATHER", None, f"/gathers/{j}/id", f"gather {gid} is declared twice"))
                continue
            gathers[gid] = _G(row, raw_gathers[j])
            if mem is not None:
                if list(mem) != sorted(mem):
                    add(Finding("E_GATHER_MEMBERSHIP", None, f"/gathers/{j}/membership",
                                f"gather {gid} membership is not sorted ({', '.join(mem)})"))
                if known_parts:
                    for k, ref in enumerate(mem):
                        if ref not in parts:
                            add(Finding("E_GATHER_MEMBERSHIP", None, f"/gathers/{j}/membership/{k}",
                                        f"gather {gid} member {ref!r} is not a participant"))
                th = row.get("threshold")
                if th is not None and th > len(mem):
                    add(Finding("E_QUORUM_THRESHOLD", None, f"/gathers/{j}/threshold",
                                f"gather {gid} threshold {th} exceeds its {len(mem)} member(s)"))

    def terminal_fence(self) -> None:
        """The terminal, and from the scan: where the fence is, and which gather openers exist."""
        terminal, scan = self.terminal, self.scan
        self.t_state = terminal.get("state") if terminal else None
        t_fence = self.t_fence = terminal.get("fence") if terminal else None
        required = self.required = terminal.get("requiredAcks") if terminal else None
        self.required_set = frozenset(required) if required is not None else None

        fences = scan.fences
        for g in self.gathers.values():
            if type(g.opener) is str and g.opener in scan.first_at:
                g.opener_known = True
        fence_at: int | None = None
        fence_id = None
        if fences:
            fence_at, fence_id = fences[0]
            if t_fence is not None:
                for i, fid in fences:
                    if fid == t_fence:
                        fence_at, fence_id = i, fid
                        break
        self.fence_at, self.fence_id = fence_at, fence_id
        ceiling = self.ceiling
        self.last_ok = ceiling if ceiling is not None else self.count + 1  # index of the first message over the ceiling

    # ---- each message

    def judge_messages(self) -> Iterable[bool]:
        """Each message in order: its shape, then each part of the check; yields whether it was
        accepted (filter before reduce: only a message without any finding is)."""
        out, add, keep, last_ok, seen, acc_index = self.out, self.add, self.keep, self.last_ok, self.seen, self.acc_index
        accepted, positions, acked = self.accepted, self.positions, self.acked
        shape_message = self.sh.message
        n_accepted = 0
        speaker, audience, causes, timing = self.speaker, self.audience, self.causes, self.timing
        fenced, gathered, payload = self.fenced, self.gathered, self.payload
        fence_at, check_digests, remember = self.fence_at, self.check_digests, self.remember
        for i, m in enumerate(self.messages):
            n0 = len(out)
            bad = shape_message(m, i)
            if bad is _ALL_BAD:
                yield False
                continue
            if bad is _NO_BAD:  # every required field is there and usable: fetch them at once
                mid, sender, gen, seq, ep, sc, labels, recips, kind, caused, at, pd = _REQUIRED_OF(m)
            else:
                mid, sender, gen, seq, ep, sc, labels, recips, kind, caused, at, pd = map(m.get, _MSG_REQUIRED_T)
                if "sender" in bad:
                    sender = None
                if "kind" in bad:
                    kind = None
                if "at" in bad:
                    at = None
                if "causedBy" in bad:
                    caused = None
            dup = False  # an id seen earlier: rejected; what else is wrong with it is still reported, but it moves nothing
            if "id" in bad:
                mid = None
            else:
                if mid in seen:
                    dup = True
                    add(Finding("E_DUPLICATE_MESSAGE", mid, f"/messages/{i}/id",
                                f"message id {mid} was seen earlier; a duplicate never reaches a reducer"))
                seen.add(mid)
            if i == last_ok:
                after = self.count - i - 1
                add(Finding("E_MESSAGE_CEILING", mid, f"/messages/{i}",
                            f"message {mid} is number {i + 1} but the ceiling is {self.ceiling}; "
                            + (f"it and the {after} message(s) after it are rejected" if after else "it is rejected")))
            # each part of the check, where it applies
            speaker(i, mid, sender, gen, seq, ep, bad, dup)
            audience(i, mid, sc, labels, recips, bad)
            if caused:
                causes(i, mid, caused)
            if at is not None:
                timing(i, m, mid, at, bad)
            if fence_at is not None and kind is not None and not dup:
                fenced(i, mid, sender, kind, caused)
            gid = m.get("gatherId")
            gth = None
            if gid is not None and "gatherId" not in bad:
                gth = gathered(i, mid, gid, sender, kind, at, dup)
            if check_digests and "payload" in m and "payload" not in bad and "payloadDigest" not in bad:
                payload(i, m, mid, pd)

            if len(out) != n0 or i >= last_ok or mid is None:
                if keep is not None and len(out) > keep:
                    self.dropped += len(out) - keep
                    del out[keep:]
                yield False
                continue
            n_accepted += 1
            self.n_accepted = n_accepted
            if remember:
                accepted.append(mid)
                positions.append(i)
            acc_index.add(mid)
            if gth is not None:
                if kind == "CONTRIBUTION":
                    gth.contributions.append(m)
                    gth.contributed.add(sender)
                elif kind == "GATHER_RESULT":
                    gth.closed_by = mid
            if kind == "ACK" and fence_at is not None and i > fence_at:
                acked[sender] = mid
            yield True

    def speaker(self, i: int, mid, sender, gen, seq, ep, bad, dup) -> None:
        """Who is speaking, in which epoch and body generation, at which sequence: the sender is a
        participant, the message in the conversation's epoch, its body the one in force for the sender
        at this point of the trace, its seq the exact next of that body (a new body starts again at 1).
        A stale or duplicate message moves no sequence."""
        add = self.add
        p = None
        if sender is not None and self.known_parts:
            p = self.parts.get(sender)
            if p is None:
                add(Finding("E_AUDIENCE_SCOPE", mid, f"/messages/{i}/sender",
                            f"{mid}: sender {sender!r} is not a participant of this conversation"))
        stale = False
        conv_epoch = self.conv_epoch
        if conv_epoch is not None and "epoch" not in bad:
            if ep != conv_epoch:
                stale = True
                add(Finding("E_STALE_EPOCH", mid, f"/messages/{i}/epoch",
                            f"{mid}: epoch {ep} is not the conversation's epoch {conv_epoch}"))
        if p is not None and p[0] is not None and "generation" not in bad:
            bodies = self.bodies
            in_force, until = p[0], None  # the body speaking for sender at this point of the trace
            for egen, last, after in bodies.get(sender, ()):
                if i <= last:
                    in_force, until = egen, after
                    break
            if gen != in_force:
                stale = True
                replaced = [after for egen, _, after in bodies.get(sender, ()) if egen == gen]
                if replaced:
                    why = (f"{sender} generation {gen} was replaced "
                           + (f"after {replaced[0]}" if replaced[0] is not None else "before the first message")
                           + f"; generation {in_force} speaks for it here")
                elif until is not None or in_force != p[0]:
                    why = f"{sender} generation {gen} is not yet in force: generation {in_force} is, until after {until}"
                else:
                    why = f"{sender} generation {gen} is not its current generation {p[0]}"
                add(Finding("E_STALE_GENERATION", mid, f"/messages/{i}/generation", f"{mid}: {why}"))
        if p is not None and not stale and not dup and "seq" not in bad and "epoch" not in bad and "generation" not in bad:
            body = (sender, gen)  # a new body starts its sequence again at 1
            next_seq = self.next_seq
            want = next_seq.get(body, 1)
            if seq == want:
                next_seq[body] = want + 1
            else:
                add(Finding("E_SEQUENCE_GAP", mid, f"/messages/{i}/seq",
                            f"{mid}: seq {seq} from {sender} where the exact next is {want}"
                            + (" (a gap, or a later message first)" if seq > want else " (replayed or reordered)")))

    def audience(self, i: int, mid, sc, labels, recips, bad) -> None:
        """The conversation's scope; each recipient a participant accepting every audience label."""
        conv_scope = self.conv_scope
        if conv_scope is not None and "scope" not in bad:
            if sc != conv_scope:
                self.add(Finding("E_AUDIENCE_SCOPE", mid, f"/messages/{i}/scope",
                                 f"{mid}: scope {sc!r} is not the conversation's scope {conv_scope!r}"))
        if self.known_parts and "recipients" not in bad:
            if "audienceLabels" in bad:
                labels = ()
            part_get = self.parts.get
            for j, r in enumerate(recips):
                q = part_get(r)
                if q is None:
                    self.add(Finding("E_AUDIENCE_SCOPE", mid, f"/messages/{i}/recipients/{j}",
                                     f"{mid}: recipient {r!r} is not a participant of this conversation"))
                elif q[1] is not None and not q[1].issuperset(labels):  # (a frozenset; labels are strings)
                    lack = [lab for lab in labels if lab not in q[1]]
                    self.add(Finding("E_AUDIENCE_LABEL", mid, f"/messages/{i}/recipients/{j}",
                                     f"{mid}: recipient {r} does not accept audience label(s) {', '.join(lack)}"))

    def causes(self, i: int, mid, caused) -> None:
        """The causal chain: each causedBy parent an earlier accepted message."""
        acc_index = self.acc_index
        for j, parent in enumerate(caused):
            if parent not in acc_index:
                if parent == mid:
                    why = "is the message itself"
                elif parent in self.seen:
                    why = "was not accepted"
                else:
                    why = "is not an earlier message of the trace"
                self.add(Finding("E_CAUSATION_GAP", mid, f"/messages/{i}/causedBy/{j}",
                                 f"{mid}: causedBy parent {parent} {why}"))

    def timing(self, i: int, m: dict, mid, at, bad) -> None:
        """When: dated before it expires and before the conversation's deadline (a message with a
        date)."""
        exp = m.get("expiresAt")
        if exp is not None and "expiresAt" not in bad and at > exp:
            self.add(Finding("E_EXPIRED_MESSAGE", mid, f"/messages/{i}/expiresAt",
                             f"{mid}: dated {at}, after it expired at {exp}"))
        conv_deadline = self.conv_deadline
        if conv_deadline is not None and at > conv_deadline:
            self.add(Finding("E_DEADLINE", mid, f"/messages/{i}/at",
                             f"{mid}: dated {at}, after the conversation deadline {conv_deadline}"))

    def fenced(self, i: int, mid, sender, kind, caused) -> None:
        """The fence and after it: one FENCE only, and after it only one acknowledgement of it from
        each required acknowledger (a first-seen message of a known kind, in a trace with a fence)."""
        fence_at, fence_id = self.fence_at, self.fence_id
        if i > fence_at:
            if kind == "ACK":
                required_set, acked = self.required_set, self.acked
                if required_set is not None and sender not in required_set:
                    self.add(Finding("E_POST_TERMINAL_MESSAGE", mid, f"/messages/{i}",
                                     f"{mid}: ACK after the fence {fence_id} from {sender}, who is not in "
                                     "the required acknowledgement set"))
                elif caused is not None and fence_id not in caused:
                    self.add(Finding("E_ACK_NOT_FENCE", mid, f"/messages/{i}/causedBy",
                                     f"{mid}: ACK after the fence does not cite the fence {fence_id}"))
                elif sender in acked:
                    self.add(Finding("E_POST_TERMINAL_MESSAGE", mid, f"/messages/{i}",
                                     f"{mid}: {sender} already acknowledged the fence with {acked[sender]}"))
            elif kind == "FENCE":
                self.add(Finding("E_SECOND_FENCE", mid, f"/messages/{i}/kind",
                                 f"{mid}: a second FENCE after {fence_id}; exactly one fence closes the conversation"))
            else:
                self.add(Finding("E_POST_TERMINAL_MESSAGE", mid, f"/messages/{i}",
                                 f"{mid}: {kind} after the terminal fence {fence_id}; only acknowledgements "
                                 "of the fence may follow it"))
        elif kind == "FENCE" and i < fence_at:
            self.add(Finding("E_SECOND_FENCE", mid, f"/messages/{i}/kind",
                             f"{mid}: a FENCE other than the terminal fence {fence_id}; exactly one fence "
                             "closes the conversation"))

    def gathered(self, i: int, mid, gid, sender, kind, at, dup):
        """Gathers (a message naming one): the gather is declared; a contribution comes after its
        opener, before its result, from a member, once, by the deadline; a gather has one result.
        Returns the gather, or None."""
        gth = self.gathers.get(gid)
        if gth is None:
            self.add(Finding("E_UNKNOWN_GATHER", mid, f"/messages/{i}/gatherId",
                             f"{mid}: gatherId {gid!r} names no declared gather"))
        elif kind == "CONTRIBUTION" and not dup:
            add = self.add
            if gth.opener_known and gth.opener not in self.acc_index:
                add(Finding("E_GATHER_NOT_OPEN", mid, f"/messages/{i}/gatherId",
                            f"{mid}: contribution to {gid} before its opener {gth.opener} was accepted"))
            if gth.closed_by is not None:
                add(Finding("E_GATHER_CLOSED", mid, f"/messages/{i}/gatherId",
                            f"{mid}: contribution to {gid} after its result {gth.closed_by}"))
            if sender is not None and gth.members is not None and sender not in gth.members:
                add(Finding("E_GATHER_MEMBERSHIP", mid, f"/messages/{i}/sender",
                            f"{mid}: {sender} is not a member of gather {gid} "
                            f"({', '.join(sorted(gth.members))})"))
            elif sender in gth.contributed:
                add(Finding("E_DUPLICATE_CONTRIBUTION", mid, f"/messages/{i}/sender",
                            f"{mid}: {sender} already contributed to gather {gid}"))
            if at is not None and gth.deadline is not None and at > gth.deadline:
                add(Finding("E_LATE_GATHER_CONTRIBUTION", mid, f"/messages/{i}/at",
                            f"{mid}: contribution dated {at}, after gather {gid}'s deadline {gth.deadline}"))
        elif kind == "GATHER_RESULT" and gth.closed_by is not None and not dup:
            self.add(Finding("E_GATHER_CLOSED", mid, f"/messages/{i}/gatherId",
                             f"{mid}: a second result for gather {gid} after {gth.closed_by}"))
        return gth

    def payload(self, i: int, m: dict, mid, pd) -> None:
        """The payload it carries (a message with a usable payload and payloadDigest, when digests
        are checked) hashes to its payloadDigest."""
        try:
            actual = _digest.digest(m["payload"], PAYLOAD_DIGEST_SCHEME)
        except Exception as e:  # DigestError: a value jcs-v2 cannot write
            actual = f"(not computable: {e})"
        if actual != pd:
            self.add(Finding("E_PAYLOAD_DIGEST", mid, f"/messages/{i}/payloadDigest",
                             f"{mid}: payloadDigest is not the {PAYLOAD_DIGEST_SCHEME} digest of the payload "
                             f"(computed {actual})"))

    # ---- after the messages

    def reduce_gathers(self) -> None:
        """Gathers: openers, reductions, recorded results."""
        out, add, results = self.out, self.add, self.results
        for gid, gth in self.gathers.items():
            j = gth.index
            if gth.opener is not None and not gth.opener_known:
                add(Finding("E_GATHER_OPENER", None, f"/gathers/{j}/opener",
                            f"gather {gid} opener {gth.opener} names no message of the trace"))
            res = evaluate_gather(gth.decl, gth.contributions)
            results[gid] = res
            recorded = gth.decl.get("result")
            if recorded is not None and type(recorded) is dict and not any(
                f.pointer.startswith(f"/gathers/{j}/result") for f in out
            ):
                computed = res.to_json()
                if recorded != computed:
                    diff = [k for k in sorted(set(recorded) | set(computed)) if recorded.get(k) != computed.get(k)]
                    add(Finding("E_GATHER_RESULT_MISMATCH", None, f"/gathers/{j}/result",
                                f"gather {gid}: the recorded result differs from the reduction of accepted "
                                f"contributions in {', '.join(diff)} (computed {res.status})"))

    def acknowledgements(self) -> tuple[list[str], list[GatherResult]]:
        """The terminal: its fence is the trace's FENCE, its required acknowledgers participants.
        Returns who has not acknowledged, and (for a COMPLETED terminal) the gathers not complete."""
        missing_acks: list[str] = []
        unresolved: list[GatherResult] = []
        if self.terminal is not None:
            t_fence, required, add = self.t_fence, self.required, self.add
            if t_fence is not None:
                if self.fence_at is None or self.fence_id != t_fence:
                    scan = self.scan
                    why = (f"{t_fence} is a {scan.kind_at[t_fence]}, not a FENCE" if t_fence in scan.first_at
                           else f"{t_fence} names no message of the trace")
                    add(Finding("E_TERMINAL_FENCE", None, "/terminal/fence", f"the terminal fence {why}"))
            if required is not None:
                known_parts, parts = self.known_parts, self.parts
                for j, r in enumerate(required):
                    if known_parts and r not in parts:
                        add(Finding("E_AUDIENCE_SCOPE", None, f"/terminal/requiredAcks/{j}",
                                    f"required acknowledger {r!r} is not a participant of this conversation"))
                missing_acks = [r for r in required if r not in self.acked]
            if self.t_state == "COMPLETED":
                unresolved = [r for r in self.results.values() if r.status != "complete"]
        return missing_acks, unresolved


def _report(out, terminal, accepted, results, fence_id, t_state=None, missing_acks=(), unresolved=(),
            acked_by=(), positions=(), n_accepted=None, dropped=0) -> Report:
    effective = None
    if terminal is not None and t_state is not None:
        effective = "BLOCKED" if (missing_acks or unresolved) else t_state
    if out:
        first = out[0]
        n = len(out) + dropped
        codes = list(dict.fromkeys(f.code for f in out)) + (["..."] if dropped else [])
        reason = (f"invalid: {n} error{'s' if n != 1 else ''} ({', '.join(codes)}); first "
                  f"{first.code} at {first.pointer or '/'}: {first.message}"
                  + (f"; had it been valid, its terminal would be {effective}" if effective else ""))
    elif terminal is None:
        tail = f", fence {fence_id} appended" if fence_id else ", no terminal yet"
        reason = f"valid: open conversation, {len(accepted) if n_accepted is None else n_accepted} message(s) accepted{tail}"
    elif effective == "BLOCKED" and t_state != "BLOCKED":
        parts = []
        if missing_acks:
            parts.append(f"fence {fence_id} lacks acknowledgements from {', '.join(missing_acks)}")
        for r in unresolved:
            parts.append(f"gather {r.gather_id} is {r.status}"
                         + (f", missing {', '.join(r.missing)}" if r.missing else ""))
        reason = f"valid: BLOCKED — {'; '.join(parts)} (declared {t_state}, never complete)"
    else:
        ackd = (f"acknowledged by {', '.join(acked_by)}" if acked_by else "with no acknowledgement required")
        reason = f"valid: {effective}, fence {fence_id} {ackd}"
    return Report(valid=not out, terminal=None if out else effective, reason=reason, errors=tuple(out),
                  accepted=tuple(accepted), accepted_positions=tuple(positions), gathers=results,
                  terminal_if_valid=effective)
