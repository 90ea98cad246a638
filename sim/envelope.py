"""Message envelopes: strict parsing and building.

An envelope is the unit agents exchange. It is parsed strictly, because the
envelope is what deduplication and compare-and-swap rely on: duplicate JSON keys,
an unknown field, a missing field, a wrong type, an unknown message type, role or
digest scheme, NaN, and a ``payload_digest`` that does not match the payload are
all refused, each with its own stable code.
"""

from __future__ import annotations

import hashlib
import json
import operator
import re
from dataclasses import dataclass, field
from datetime import datetime

from . import digest as _digest
from . import versions as _versions
from .errors import EnvelopeError, InputError, friendly_list
from .frozen import quick_init

__all__ = [
    "Envelope",
    "MESSAGE_TYPES",
    "ROLES",
    "RESULT_STATUSES",
    "REVIEW_DECISIONS",
    "SCHEMA_VERSIONS",
    "FIELDS",
    "OPTIONAL_FIELDS",
    "DEFAULTED_FIELDS",
    "scheme_assumed",
    "loads_strict",
    "parse_envelope",
    "parse_envelopes",
    "build_envelope",
    "role_of",
]

MESSAGE_TYPES = ("task_request", "task_started", "task_result", "ack", "cancel", "review_decision", "fence")
ROLES = ("manager", "researcher", "writer", "reviewer")
RESULT_STATUSES = ("succeeded", "failed", "denied", "waiting_human", "retry")
REVIEW_DECISIONS = ("ready", "canceled")
RECONCILE_DECISIONS = ("keep", "retract")  # a review_decision that resolves an open reconciliation
#: The spellings of the versions the kit's runtime reads (``sim.versions``: a bare major means MAJOR.0, a
#: patch is accepted and ignored, so "1.0.3" is read as 1.0 too).
SCHEMA_VERSIONS = ("1", "1.0", "1.1")

# field name -> (python type, required). The seed's envelope has twelve fields; digest_scheme is the course's
# thirteenth, and may be left out: an envelope without it is read under the course's default scheme
# (json-sorted-v1), and the runtime records that it assumed so (digest_scheme_assumed).
FIELDS: dict[str, tuple[type, bool]] = {
    "message_id": (str, True),
    "trace_id": (str, True),
    "task_id": (str, True),
    "sender": (str, True),
    "recipient": (str, True),
    "type": (str, True),
    "schema_version": (str, True),
    "created_at": (str, True),
    "idempotency_key": (str, True),
    "payload_digest": (str, True),
    "digest_scheme": (str, True),
    "payload": (dict, True),
    "evidence_refs": (list, True),
}
#: Fields an envelope may carry beyond those: the conversation's epoch the sender spoke in (absent: the
#: first, 1) and when the message stops being valid (absent: never). A receiver that keeps the
#: conversation's rules refuses a message of an earlier epoch (E_STALE_EPOCH) or one delivered after it
#: expired (E_EXPIRED_MESSAGE). Written only when present, so an envelope without them is what it was.
OPTIONAL_FIELDS: dict[str, type] = {"epoch": int, "expires_at": str}
#: The fields a sender may leave out, each read as the course's default.
DEFAULTED_FIELDS = ("digest_scheme",)

_FIELD_NAMES = frozenset(FIELDS)
_ALL_FIELD_NAMES = _FIELD_NAMES | frozenset(OPTIONAL_FIELDS)
#: one JSON string as the store's writer spells it (json's own quoting: ``"``, ``\\`` and controls escaped)
_quote = json.encoder.encode_basestring
assert sorted(FIELDS) == ["created_at", "digest_scheme", "evidence_refs", "idempotency_key", "message_id", "payload",
                          "payload_digest", "recipient", "schema_version", "sender", "task_id", "trace_id", "type"]
_PARTICIPANT_RE = re.compile(r"^(manager|researcher|writer|reviewer)(?:-[A-Za-z0-9_]+)?$")
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:#/-]{0,199}$")
_TIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z$")


def envelope_from_row(row: dict) -> Envelope:
    """The envelope a stored message row holds (its FIELDS and optional fields; evidence_refs back to a tuple)."""
    return Envelope(**{k: row[k] for k in FIELDS if k != "evidence_refs"}, evidence_refs=tuple(row["evidence_refs"]),
                    **{k: row.get(k) for k in OPTIONAL_FIELDS})  # type: ignore[arg-type]  # the optional fields: None when absent, their defaults


_ROLE_OF: dict[str, str] = {}  # participants already read (a run has a handful)


def role_of(participant: str) -> str:
    """The role of a participant id: ``researcher-2`` plays ``researcher``."""
    known = _ROLE_OF.get(participant) if type(participant) is str else None
    if known is not None:
        return known
    m = _PARTICIPANT_RE.match(participant)
    if not m:
        raise EnvelopeError(
            f"unknown participant {participant!r}; expected a role ({friendly_list(ROLES)}), "
            "optionally followed by -NAME",
            code="E_UNKNOWN_ROLE",
        )
    role = m.group(1)
    if len(_ROLE_OF) < 1024:
        _ROLE_OF[participant] = role
    return role


@quick_init
@dataclass(frozen=True)
class Envelope:
    """One message between two participants. Frozen: nobody edits a sent message."""

    message_id: str
    trace_id: str
    task_id: str
    sender: str
    recipient: str
    type: str
    schema_version: str
    created_at: str
    idempotency_key: str
    payload_digest: str
    digest_scheme: str
    payload: dict = field(hash=False, compare=True)
    evidence_refs: tuple[str, ...] = ()
    #: the conversation epoch the sender spoke in (None: the first)
    epoch: int | None = None
    #: when the message stops being valid, UTC RFC 3339 (None: never)
    expires_at: str | None = None

    @property
    def sender_role(self) -> str:
        return role_of(self.sender)

    @property
    def spoken_epoch(self) -> int:
        """The epoch the message belongs to (1 when it names none)."""
        return 1 if self.epoch is None else self.epoch

    def to_dict(self) -> dict:
        """The envelope as JSON-ready data (field order as in :data:`FIELDS`; an optional field only when set)."""
        d = {name: getattr(self, name) for name in FIELDS}
        d["evidence_refs"] = list(self.evidence_refs)
        if self.epoch is not None:
            d["epoch"] = self.epoch
        if self.expires_at is not None:
            d["expires_at"] = self.expires_at
        return d

    def payload_json(self) -> str:
        """The payload as the store keeps it (``sorted_dumps``): written once, when the envelope was parsed
        and its digest checked under json-sorted-v1 (the same text), else now."""
        text = self.__dict__.get("_payload_json")
        return text if text is not None else _digest.sorted_dumps(self.payload)

    def to_json(self) -> str:
        """Stable JSON form (sorted keys), used for storage and envelope digests: exactly
        ``sorted_dumps(self.to_dict())``, written field by field (the fields' order is fixed, so there is
        nothing to sort but the payload; a delivery writes one, and this takes half the time)."""
        q = _quote
        if self.epoch is not None or self.expires_at is not None:  # (an optional field: the general writer)
            return _digest.sorted_dumps(self.to_dict())
        try:  # (one f-string: the text is assembled once, where a chain of + copies it at every step)
            return (
                f'{{"created_at":{q(self.created_at)},"digest_scheme":{q(self.digest_scheme)},"evidence_refs":['
                f'{",".join(map(q, self.evidence_refs))}],"idempotency_key":{q(self.idempotency_key)},'
                f'"message_id":{q(self.message_id)},"payload":{self.payload_json()},'
                f'"payload_digest":{q(self.payload_digest)},"recipient":{q(self.recipient)},'
                f'"schema_version":{q(self.schema_version)},"sender":{q(self.sender)},"task_id":{q(self.task_id)},'
                f'"trace_id":{q(self.trace_id)},"type":{q(self.type)}}}'
            )
        except TypeError:  # a field that is not a string (an envelope built by hand): the general writer
            return _digest.sorted_dumps(self.to_dict())


# ---------------------------------------------------------------------------
# strict JSON


def _no_duplicate_keys(pairs):
    seen = dict(pairs)
    if len(seen) == len(pairs):  # no key twice (the loop below finds the first one that is)
        return seen
    seen = {}
    for k, v in pairs:
        if k in seen:
            raise InputError(f"duplicate JSON key {k!r} in one object", code="E_DUPLICATE_KEY")
        seen[k] = v
    return seen


def _refuse_constant(name):
    raise InputError(f"{name} is not JSON and cannot be digested", code="E_NAN")


_STRICT = json.JSONDecoder(object_pairs_hook=_no_duplicate_keys, parse_constant=_refuse_constant)
_SCAN = _STRICT.scan_once  # type: ignore[attr-defined]  # json's own scanner and whitespace, as json.loads uses them
_SPACE = json.decoder.WHITESPACE.match  # type: ignore[attr-defined]  # json's own scanner and whitespace, as json.loads uses them


def _decode_strict(text: str):
    """``_STRICT.decode(text)`` written out (its ``raw_decode`` frame and all): the same value, the same
    errors with the same words and positions."""
    try:
        value, end = _SCAN(text, _SPACE(text, 0).end())
    except StopIteration as err:
        raise json.JSONDecodeError("Expecting value", text, err.value) from None
    end = _SPACE(text, end).end()
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def loads_strict(text: str | bytes, *, source: str = "input"):
    """Parse JSON refusing duplicate keys, NaN and Infinity, and invalid UTF-8."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"{source} is not UTF-8 ({e.reason} at byte {e.start})", code="E_NOT_UTF8") from e
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        # json.loads(text, object_pairs_hook=..., parse_constant=...), without a decoder built per call
        if text.startswith("\ufeff"):  # (a second BOM: json.loads refuses it so)
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        return _decode_strict(text)
    except json.JSONDecodeError as e:
        raise InputError(
            f"{source} is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}", code="E_JSON"
        ) from e
    except RecursionError as e:
        raise InputError(f"{source} nests too deeply to be an envelope", code="E_JSON") from e
    except ValueError as e:  # e.g. an integer beyond Python's int-from-str digit limit
        raise InputError(f"{source} holds a number too long to read: {e}", code="E_JSON") from e


# ---------------------------------------------------------------------------
# envelope validation


def _where(raw: dict, index: int | None) -> str:
    mid = raw.get("message_id") if isinstance(raw, dict) else None
    parts = []
    if index is not None:
        parts.append(f"entry {index}")
    if isinstance(mid, str):
        parts.append(mid)
    return f"envelope ({', '.join(parts)})" if parts else "envelope"


def _require_str(payload: dict, key: str, where: str, allowed=None, required=True):
    if key not in payload:
        if required:
            raise EnvelopeError(f"{where}: payload.{key} is missing", code="E_MISSING_FIELD")
        return None
    val = payload[key]
    if not isinstance(val, str):
        raise EnvelopeError(
            f"{where}: payload.{key} must be a string, got {type(val).__name__}", code="E_FIELD_TYPE"
        )
    if allowed is not None and val not in allowed:
        raise EnvelopeError(
            f"{where}: payload.{key} is {val!r}; expected one of: {friendly_list(allowed)}",
            code="E_UNKNOWN_VALUE",
        )
    return val


def _require_int(payload: dict, key: str, where: str, required=True, minimum=0):
    if key not in payload:
        if required:
            raise EnvelopeError(f"{where}: payload.{key} is missing", code="E_MISSING_FIELD")
        return None
    val = payload[key]
    if isinstance(val, bool) or not isinstance(val, int):
        raise EnvelopeError(
            f"{where}: payload.{key} must be an integer, got {type(val).__name__}", code="E_FIELD_TYPE"
        )
    if val < minimum:
        raise EnvelopeError(f"{where}: payload.{key} must be >= {minimum}, got {val}", code="E_FIELD_VALUE")
    return val


def _check_payload(env_type: str, payload: dict, where: str, version: "_versions.Version" = _versions.Version(1, 0)) -> None:
    """Per-type payload rules: the closed payload vocabulary of each message type."""
    # A field a later minor added is part of the payload only from that minor on.
    newer, added = _versions.fields_read(env_type, version)
    for name, since in newer.items():
        if name in payload and (since.major != version.major or since > version):
            raise EnvelopeError(
                f"{where}: payload.{name} was added in schema_version {since}; this envelope says {version}",
                code="E_SCHEMA_FIELD",
            )
    for name, (typ, _why) in added.items():
        if name in payload and (type(payload[name]) is not typ):
            raise EnvelopeError(
                f"{where}: payload.{name} must be a {typ.__name__}, got {type(payload[name]).__name__}",
                code="E_FIELD_TYPE",
            )
    if env_type == "task_request":
        _require_str(payload, "goal", where)
        _require_int(payload, "budget", where, required=False)
    elif env_type == "task_started":
        _require_int(payload, "lease_version", where, required=False, minimum=1)
    elif env_type == "task_result":
        _require_str(payload, "status", where, allowed=RESULT_STATUSES)
        _require_int(payload, "lease_version", where, minimum=1)
        if "effect" in payload:
            eff = payload["effect"]
            if not isinstance(eff, dict):
                raise EnvelopeError(f"{where}: payload.effect must be an object", code="E_FIELD_TYPE")
            _require_str(eff, "kind", where + " effect")
            _require_str(eff, "target", where + " effect")
    elif env_type == "review_decision":
        if "reconcile" in payload:  # resolving an open reconciliation of a finished task (sim.runtime)
            _require_str(payload, "reconcile", where, allowed=RECONCILE_DECISIONS)
            _require_str(payload, "of", where)
        else:
            _require_str(payload, "decision", where, allowed=REVIEW_DECISIONS)
    elif env_type == "ack":
        _require_str(payload, "of", where, required=False)
    elif env_type == "fence":
        # The conversation's terminal fence: who must acknowledge it, and the terminal it closes with.
        to = payload.get("to")
        if not isinstance(to, list) or not to or not all(isinstance(p, str) for p in to):
            raise EnvelopeError(f"{where}: payload.to must be a non-empty list of participants", code="E_FIELD_TYPE")
        for p in to:
            role_of(p)
        _require_str(payload, "terminal", where, allowed=("COMPLETED", "BLOCKED", "TIMED_OUT", "CANCELLED", "DISSENT_RECORDED"))
    # "cancel" takes any payload (a reason, usually).
    if "expected_state_version" in payload:
        _require_int(payload, "expected_state_version", where)


#: the envelope's values in FIELDS order (which is also Envelope's field order)
_VALUES = operator.itemgetter(*FIELDS)
_TYPES = frozenset(MESSAGE_TYPES)
#: created_at values already found to be real UTC times (bounded: a run stamps one a tick)
_TIMES_OK: set[str] = set()


def _quick(raw, check_digest: bool) -> Envelope | None:
    """The envelope ``raw`` holds when it is an ordinary one (exactly the fields, each of its exact JSON
    type, ids, roles, version, time, scheme and digest already seen to be well formed or checked here),
    else None: :func:`parse_envelope`'s careful walk then decides, and words any refusal. Never accepts
    what the careful walk refuses: each check here is the careful one, or stricter."""
    if type(raw) is not dict or raw.keys() != _FIELD_NAMES:
        return None
    (mid, trace, task, sender, recipient, typ, version, created, key, pd, scheme, payload, refs) = _VALUES(raw)
    for v in (mid, trace, task, sender, recipient, typ, version, created, key, pd, scheme):
        if type(v) is not str or not v:
            return None
    if type(payload) is not dict or type(refs) is not list or typ not in _TYPES:
        return None
    if sender not in _ROLE_OF or recipient not in _ROLE_OF:  # (the careful walk learns a participant once)
        return None
    match = _ID_RE.match
    if not (match(mid) and match(trace) and match(task) and match(key)):
        return None
    if _versions.refusal(version) is not None or scheme not in _digest.SCHEMES or not _digest.is_digest(pd):
        return None
    if created not in _TIMES_OK:
        if not _TIME_RE.match(created):
            return None
        try:
            datetime.fromisoformat(created.replace("Z", "+00:00"))
        except ValueError:
            return None
        if len(_TIMES_OK) >= 4096:
            _TIMES_OK.clear()
        _TIMES_OK.add(created)
    for ref in refs:
        if type(ref) is not str or not ref or not ref.isascii():
            return None
    text = None
    try:
        _check_payload(typ, payload, "", _versions.parse_version(version))
        if check_digest:
            if scheme == _digest.DEFAULT_SCHEME:  # (its bytes are also how the store keeps the payload)
                raw_bytes = _digest.canonical_bytes(payload, scheme)
                if "sha256:" + hashlib.sha256(raw_bytes).hexdigest() != pd:
                    return None
                text = raw_bytes.decode("utf-8")
            else:
                _digest.verify(payload, pd, scheme)
    except (EnvelopeError, _digest.DigestError):
        return None
    env = Envelope(mid, trace, task, sender, recipient, typ, version, created, key, pd, scheme, payload, tuple(refs))
    if text is not None:
        env.__dict__["_payload_json"] = text  # (not a field: a copy made by replace() has none, and writes its own)
    return env


def parse_envelope(raw, *, index: int | None = None, check_digest: bool = True) -> Envelope:
    """Validate one decoded JSON value and return an :class:`Envelope`."""
    env = _quick(raw, check_digest)
    return env if env is not None else _careful(raw, index, check_digest)


def _careful(raw, index: int | None, check_digest: bool) -> Envelope:
    """:func:`parse_envelope` the long way: every check in turn, each refusal worded with where it is."""
    if not isinstance(raw, dict):
        raise EnvelopeError(
            f"entry {index if index is not None else 0} is a {type(raw).__name__}; an envelope is a JSON object",
            code="E_FIELD_TYPE",
        )
    where = _where(raw, index)
    unknown = sorted(raw.keys() - _ALL_FIELD_NAMES)
    if unknown:
        raise EnvelopeError(
            f"{where}: unknown field {unknown[0]!r}; expected only: {friendly_list([*FIELDS, *OPTIONAL_FIELDS])}",
            code="E_UNKNOWN_FIELD",
        )
    assumed = "digest_scheme" not in raw
    if assumed:  # the seed's twelve fields: the course's default scheme, and the envelope says it was assumed
        raw = {**raw, "digest_scheme": _digest.DEFAULT_SCHEME}
    for name, (typ, _required) in FIELDS.items():
        if name not in raw:
            raise EnvelopeError(f"{where}: field {name!r} is missing", code="E_MISSING_FIELD")
        val = raw[name]
        if isinstance(val, bool) or not isinstance(val, typ):
            want = {str: "a string", dict: "an object", list: "an array"}[typ]  # type: ignore[index]  # typ is one of these three
            raise EnvelopeError(
                f"{where}: field {name!r} must be {want}, got {type(val).__name__}", code="E_FIELD_TYPE"
            )
        if typ is str and not val:
            raise EnvelopeError(f"{where}: field {name!r} is empty", code="E_FIELD_VALUE")
    for name in ("message_id", "trace_id", "task_id", "idempotency_key"):
        if not _ID_RE.match(raw[name]):
            raise EnvelopeError(
                f"{where}: {name} {raw[name]!r} must be 1-200 characters of letters, digits and _.:#/-",
                code="E_FIELD_VALUE",
            )
    if raw["type"] not in MESSAGE_TYPES:
        raise EnvelopeError(
            f"{where}: unknown message type {raw['type']!r}; expected one of: {friendly_list(MESSAGE_TYPES)}",
            code="E_UNKNOWN_TYPE",
        )
    role_of(raw["sender"])
    role_of(raw["recipient"])
    why = _versions.refusal(raw["schema_version"])
    if why is not None:
        raise EnvelopeError(
            f"{where}: {why}; expected MAJOR.MINOR, one of: {_versions.version_text()} (a bare major means MAJOR.0, "
            "a patch is ignored; a major this runtime does not read may change what any field means)",
            code="E_SCHEMA_VERSION",
        )
    if not _TIME_RE.match(raw["created_at"]):
        raise EnvelopeError(
            f"{where}: created_at {raw['created_at']!r} must be UTC RFC 3339 like 2026-07-13T04:00:00Z",
            code="E_FIELD_VALUE",
        )
    try:
        datetime.fromisoformat(raw["created_at"].replace("Z", "+00:00"))
    except ValueError as e:
        raise EnvelopeError(f"{where}: created_at {raw['created_at']!r} is not a real time", code="E_FIELD_VALUE") from e
    if raw["digest_scheme"] not in _digest.SCHEMES:
        raise EnvelopeError(
            f"{where}: unknown digest scheme {raw['digest_scheme']!r}; "
            f"expected one of: {friendly_list(_digest.SCHEMES)}",
            code="E_UNKNOWN_SCHEME",
        )
    if not _digest.is_digest(raw["payload_digest"]):
        raise EnvelopeError(
            f"{where}: payload_digest must look like sha256:<64 lowercase hex>", code="E_FIELD_VALUE"
        )
    for i, ref in enumerate(raw["evidence_refs"]):
        if not isinstance(ref, str) or not ref:
            raise EnvelopeError(f"{where}: evidence_refs[{i}] must be a non-empty string", code="E_FIELD_TYPE")
        try:
            ref.encode("utf-8")
        except UnicodeEncodeError:
            raise EnvelopeError(
                f"{where}: evidence_refs[{i}] holds a lone surrogate, which has no UTF-8 form", code="E_DIGEST_DOMAIN"
            ) from None
    epoch, expires = raw.get("epoch"), raw.get("expires_at")
    if epoch is not None and (type(epoch) is not int or epoch < 1):
        raise EnvelopeError(f"{where}: epoch must be a whole number of at least 1, got {epoch!r}",
                            code="E_FIELD_TYPE" if type(epoch) is not int else "E_FIELD_VALUE")
    if expires is not None:
        if type(expires) is not str or not _TIME_RE.match(expires):
            raise EnvelopeError(f"{where}: expires_at {expires!r} must be UTC RFC 3339 like 2026-07-13T04:00:00Z",
                                code="E_FIELD_VALUE")
        try:
            datetime.fromisoformat(expires.replace("Z", "+00:00"))
        except ValueError as e:
            raise EnvelopeError(f"{where}: expires_at {expires!r} is not a real time", code="E_FIELD_VALUE") from e
    _check_payload(raw["type"], raw["payload"], where, _versions.parse_version(raw["schema_version"]))
    if check_digest:
        try:
            _digest.verify(raw["payload"], raw["payload_digest"], raw["digest_scheme"])
        except _digest.DigestError as e:
            e.message = f"{where}: {e.message}" + (
                f" (digest_scheme was absent and read as {_digest.DEFAULT_SCHEME}, the course's default)"
                if assumed else "")
            raise
    env = Envelope(
        **{k: raw[k] for k in FIELDS if k != "evidence_refs"},
        evidence_refs=tuple(raw["evidence_refs"]), epoch=epoch, expires_at=expires,
    )
    if assumed:
        env.__dict__["_scheme_assumed"] = True  # (not a field: the runtime records it; a copy made by replace() has none)
    return env


def scheme_assumed(env: Envelope) -> bool:
    """Whether ``env`` was sent without a digest_scheme and read under the course's default."""
    return env.__dict__.get("_scheme_assumed", False)


def parse_envelopes(text: str | bytes, *, source: str = "input") -> list[Envelope]:
    """Parse a file holding one envelope or a JSON array of envelopes (order kept)."""
    data = loads_strict(text, source=source)
    if isinstance(data, list):
        if not data:
            raise InputError(f"{source} holds an empty array; nothing to deliver", code="E_EMPTY")
        return [parse_envelope(item, index=i) for i, item in enumerate(data)]
    return [parse_envelope(data)]


def build_envelope(
    *,
    message_id: str,
    trace_id: str,
    task_id: str,
    sender: str,
    recipient: str,
    type: str,
    payload: dict,
    idempotency_key: str,
    created_at: str,
    evidence_refs=(),
    digest_scheme: str = _digest.DEFAULT_SCHEME,
    schema_version: str = "1",
    epoch: int | None = None,
    expires_at: str | None = None,
) -> Envelope:
    """Build a valid envelope, computing ``payload_digest`` under ``digest_scheme``."""
    text = None
    if digest_scheme == _digest.DEFAULT_SCHEME:  # (its bytes are also how the store keeps the payload)
        raw_bytes = _digest.canonical_bytes(payload, digest_scheme)
        payload_digest = "sha256:" + hashlib.sha256(raw_bytes).hexdigest()
        text = raw_bytes.decode("utf-8")
    else:
        payload_digest = _digest.digest(payload, digest_scheme)
    raw = {
        "message_id": message_id,
        "trace_id": trace_id,
        "task_id": task_id,
        "sender": sender,
        "recipient": recipient,
        "type": type,
        "schema_version": schema_version,
        "created_at": created_at,
        "idempotency_key": idempotency_key,
        "payload_digest": payload_digest,
        "digest_scheme": digest_scheme,
        "payload": payload,
        "evidence_refs": list(evidence_refs),
    }
    if epoch is not None:
        raw["epoch"] = epoch  # type: ignore[assignment]  # the raw envelope's values are of every JSON type
    if expires_at is not None:
        raw["expires_at"] = expires_at
    env = parse_envelope(raw, check_digest=False)
    if text is not None:  # (the payload passed the checks: the text is the store's, as a parse keeps it)
        env.__dict__["_payload_json"] = text
    return env
