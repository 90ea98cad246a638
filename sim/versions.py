"""Envelope schema versions: what ``schema_version`` says, which versions a consumer reads, and
what a consumer that reads an older version makes of a newer message.

A version is ``MAJOR.MINOR``. A third number (a patch, ``1.0.3``) is accepted and ignored: two
versions that differ only in their patch are read the same way, so a patch never takes part in
deciding compatibility (A2A negotiates the same way). A bare major (``"1"``, the form of the course's
own example envelope and what this kit's agents send) means ``MAJOR.0``.

Inside one major, a newer minor only *adds*: an optional payload field that an older message never
carries. A new major may change what any field means, so a consumer refuses a major it does not
read before it looks at anything else (``E_SCHEMA_VERSION``). A minor newer than the consumer reads
is refused the same way by a strict consumer: the alternative, reading it as the older minor and
dropping what it does not know, loses what the sender said (a lenient reader, :func:`read_as`, is
what the naive policy does).

The digest schemes (``json-sorted-v1``, ``jcs-v2``) are versioned on their own: any envelope
version may carry either, and ``digest_scheme`` names the one used.

Part of the domain: pure, no I/O.
"""

from __future__ import annotations

import dataclasses
import re
from typing import NamedTuple

from .errors import EnvelopeError

__all__ = [
    "Version", "KNOWN", "READS", "ADDED", "parse_version", "refusal", "negotiate", "added_fields", "read_as",
    "version_text", "Field", "SHAPES", "COMMON", "shape", "shape_refusal",
]


class Version(NamedTuple):
    """A schema version: ``(major, minor)``; ordered, so ``max`` picks the newer."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


#: Every envelope version the kit defines, oldest first. 1.1 adds optional payload fields (ADDED);
#: 2.0 exists only to be refused: no consumer in this kit reads it.
KNOWN: tuple[Version, ...] = (Version(1, 0), Version(1, 1), Version(2, 0))

#: What the course's runtime reads (the safe policy); the naive one reads only 1.0 and never checks.
READS: tuple[Version, ...] = (Version(1, 0), Version(1, 1))

#: What each minor adds to a message type's payload: {version: {type: {field: (python type, why)}}}.
ADDED: dict[Version, dict[str, dict[str, tuple[type, str]]]] = {
    Version(1, 1): {
        "task_result": {
            "partial": (bool, "the product covers only part of the goal: its side effect must wait"),
        },
    },
}

class Field(NamedTuple):
    """One declared payload field: its JSON type (as the Python type it parses to), whether every
    message of the type carries it, and what it is for."""

    type: type
    required: bool
    why: str


def _req(t: type, why: str) -> Field:
    return Field(t, True, why)


def _opt(t: type, why: str) -> Field:
    return Field(t, False, why)


#: The payload of each message type in schema 1.0: every field a message may carry. A later minor's
#: fields (ADDED) are optional on top of these, from that minor on (:func:`shape`).
SHAPES: dict[str, dict[str, Field]] = {
    "task_request": {
        "goal": _req(str, "what the task is for, in words"),
        "budget": _opt(int, "attempts the task may use"),
        "attempt": _opt(int, "which attempt this request assigns (a retry says so)"),
        "publish": _opt(str, "where the task's product is to be published"),
    },
    "task_started": {
        "lease_version": _opt(int, "the lease the worker asks for"),
    },
    "task_result": {
        "status": _req(str, "succeeded, failed, denied, waiting_human or retry"),
        "lease_version": _req(int, "the lease the result was produced under"),
        "artifact": _opt(str, "the sha256 ref of the stored product"),
        "summary": _opt(str, "the findings in a line"),
        "effect": _opt(dict, "the side effect a success asks for: kind and target"),
        "error": _opt(str, "why the attempt did not succeed"),
        "tool": _opt(str, "the tool whose failure ended the attempt (a result that did not succeed)"),
        "fact_table": _opt(str, "the sha256 ref of a stored fact table (the shipped samples)"),
        "draft": _opt(str, "the sha256 ref of a stored draft (the shipped samples)"),
    },
    "ack": {
        "of": _opt(str, "the message acknowledged"),
    },
    "cancel": {
        "reason": _opt(str, "why the task is cancelled"),
    },
    "review_decision": {
        "decision": _opt(str, "a reviewer's release (ready) or cancellation of a frozen task"),
        "note": _opt(str, "the reviewer's note"),
        "reconcile": _opt(str, "how an open reconciliation of a finished task is resolved"),
        "of": _opt(str, "the reconciliation resolved"),
    },
    "fence": {
        "to": _req(list, "the participants the conversation is closed for"),
        "terminal": _req(str, "how the conversation ended"),
    },
}

#: Fields any message type may carry.
COMMON: dict[str, Field] = {
    "expected_state_version": _opt(int, "the task's state_version the sender read (a stale one is refused)"),
    "variant": _opt(str, "a sender's label telling apart two payloads it sent under one key"),
}


def shape(msg_type: str, version: Version = Version(1, 0)) -> dict[str, Field]:
    """Every payload field a ``msg_type`` message in ``version`` may carry."""
    out = {**SHAPES.get(msg_type, {}), **COMMON}
    for name, (typ, why) in added_fields(msg_type, version).items():
        out[name] = _opt(typ, why)
    return out


_SHAPES_SEEN: dict[tuple[str, Version], dict[str, Field]] = {}


def _shape_of(msg_type: str, version: Version) -> dict[str, Field]:
    """:func:`shape`, built once per (type, version) for :func:`shape_refusal` (which only reads it)."""
    out = _SHAPES_SEEN.get((msg_type, version))
    if out is None:
        out = shape(msg_type, version)
        if len(_SHAPES_SEEN) < 256:
            _SHAPES_SEEN[(msg_type, version)] = out
    return out


def _type_ok(value, typ: type) -> bool:
    if typ is int:
        return type(value) is int  # a JSON true is no count
    return isinstance(value, typ)


def shape_refusal(env, allowed: frozenset[str] = frozenset()) -> str | None:
    """Why a consumer that holds payloads to their declared shape refuses ``env`` (``None``: it fits).
    ``allowed``: further field names the run declares (a scenario's sensitive fields, sim.privacy).
    A version the consumer does not read is left to the version check."""
    try:
        version = parse_version(env.schema_version)
    except EnvelopeError:
        return None
    fields = _shape_of(env.type, version)
    payload = env.payload
    if payload.keys() <= fields.keys():  # (the usual case: every field declared; only the types to check)
        for k, v in payload.items():
            typ = fields[k].type
            if not (type(v) is int if typ is int else isinstance(v, typ)):
                break
        else:
            return None
    unknown = sorted(k for k in env.payload if k not in fields and k not in allowed)
    if unknown:
        names = ", ".join(f"payload.{k}" for k in unknown)
        return (f"{names} {'is' if len(unknown) == 1 else 'are'} not declared for {env.type} in schema {version} "
                f"(its fields: {', '.join(sorted(fields))}); a field nobody declared is a claim nobody checks")
    for k, f in fields.items():
        if k in env.payload and not _type_ok(env.payload[k], f.type):
            return (f"payload.{k} of {env.type} must be {f.type.__name__} in schema {version}, "
                    f"got {type(env.payload[k]).__name__}")
    return None


_RE = re.compile(r"^(0|[1-9][0-9]{0,5})(?:\.(0|[1-9][0-9]{0,5})(?:\.(0|[1-9][0-9]{0,5}))?)?$")


#: versions already read, by their spelling (a run uses two or three: each is parsed once)
_PARSED: dict[str, Version] = {}


def parse_version(text: str) -> Version:
    """``"1"`` -> 1.0, ``"1.1"`` -> 1.1, ``"1.0.3"`` -> 1.0 (the patch ignored); anything else is
    ``E_SCHEMA_VERSION``."""
    if isinstance(text, str):
        known = _PARSED.get(text)
        if known is not None:
            return known
    m = _RE.match(text) if isinstance(text, str) else None
    if not m:
        raise EnvelopeError(
            f"schema_version {text!r} is not MAJOR.MINOR (like 1.1; a bare 1 means 1.0, a patch like 1.0.3 is ignored)",
            code="E_SCHEMA_VERSION",
        )
    v = Version(int(m.group(1)), int(m.group(2) or 0))
    if len(_PARSED) < 64:
        _PARSED[text] = v
    return v


def version_text(versions=READS) -> str:
    """``1.0 or 1.1``: versions as a person reads them."""
    names = [str(v) for v in versions]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def refusal(text: str, reads: tuple[Version, ...] = READS) -> str | None:
    """Why a consumer that reads ``reads`` refuses a message in ``text`` (``None``: it reads it)."""
    try:
        v = parse_version(text)
    except EnvelopeError as e:
        return e.message
    if v in reads:
        return None
    majors = sorted({r.major for r in reads})
    if v.major not in majors:
        # (worded as before versions had minors, so runs of the stale-schema fault keep their pinned bytes)
        return f"schema_version {text!r} is not supported (this runtime speaks {', '.join(map(str, majors))})"
    newest = max(r for r in reads if r.major == v.major)
    if v > newest:
        return (f"schema_version {text!r} is newer than this runtime reads ({version_text(reads)}): reading it as "
                f"{newest} would drop what {v} added; send {newest} or lower")
    return f"schema_version {text!r} is not one this runtime reads ({version_text(reads)})"


def negotiate(sender: tuple[Version, ...], consumer: tuple[Version, ...] = READS) -> Version:
    """The version a sender that speaks ``sender`` uses towards a consumer that reads ``consumer``:
    the newest both know; ``E_SCHEMA_VERSION`` when they share none."""
    common = set(sender) & set(consumer)
    if not common:
        raise EnvelopeError(
            f"no common schema version: the sender speaks {version_text(sender)}, the consumer reads "
            f"{version_text(consumer)}",
            code="E_SCHEMA_VERSION",
        )
    return max(common)


def added_fields(msg_type: str, version: Version) -> dict[str, tuple[type, str]]:
    """The payload fields of ``msg_type`` that minors after ``MAJOR.0`` and up to ``version`` added."""
    out: dict[str, tuple[type, str]] = {}
    for v, by_type in ADDED.items():
        if v.major == version.major and v <= version:
            out.update(by_type.get(msg_type, {}))
    return out


def newer_fields(msg_type: str) -> dict[str, Version]:
    """Every payload field of ``msg_type`` that some minor added, and the version that added it."""
    return {f: v for v, by_type in ADDED.items() for f in by_type.get(msg_type, {})}


_READ_ONCE: dict[tuple, dict] = {}


def fields_read(msg_type: str, version: Version) -> tuple[dict[str, Version], dict[str, tuple[type, str]]]:
    """(:func:`newer_fields`, :func:`added_fields`) of ``msg_type`` in ``version``, built once each for
    the envelope parser, which only reads them (a run sends a few types in a few versions)."""
    key = (msg_type, version)
    out = _READ_ONCE.get(key)
    if out is None:
        out = (newer_fields(msg_type), added_fields(msg_type, version))
        if len(_READ_ONCE) < 256:
            _READ_ONCE[key] = out
    return out


def read_as(env, version: Version):
    """``env`` as a lenient consumer that reads only ``version`` sees it: every payload field a
    later minor added is dropped, silently. ``schema_version`` is left as sent. (What the naive
    policy does; the course's runtime refuses a minor it does not read instead.)"""
    drop = [f for f, v in newer_fields(env.type).items() if v > version and f in env.payload]
    if not drop:
        return env
    return dataclasses.replace(env, payload={k: v for k, v in env.payload.items() if k not in drop})
