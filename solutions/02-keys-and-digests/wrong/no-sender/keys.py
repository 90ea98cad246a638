"""Plausible mistake: the key leaves out the sender (the task already says who works on it), so the
two workers' acknowledgements of one fence share a key."""

from __future__ import annotations

import hashlib
import json

SCHEMES = ("json-sorted-v1", "jcs-v2")


def canonical_bytes(value, scheme: str = "json-sorted-v1") -> bytes:
    """The exact bytes ``scheme`` hashes for ``value``; ValueError for what it cannot write."""
    if scheme == "json-sorted-v1":
        # allow_nan=False: NaN and Infinity are not JSON. ensure_ascii=False: text as UTF-8 itself;
        # encoding a lone surrogate raises UnicodeEncodeError, a ValueError.
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return text.encode("utf-8")
    if scheme == "jcs-v2":
        # RFC 8785 is a standard with its own test vectors: use a maintained implementation rather
        # than a look-alike (keys in UTF-16 order, numbers in ECMAScript form, |ints| >= 2**53
        # refused). Its errors are ValueErrors.
        import rfc8785

        return rfc8785.dumps(value)
    raise ValueError(f"unknown digest scheme {scheme!r}; expected one of {', '.join(SCHEMES)}")


def digest(value, scheme: str = "json-sorted-v1") -> str:
    """``sha256:`` and the 64 lowercase hex digits of the SHA-256 of ``canonical_bytes``."""
    return "sha256:" + hashlib.sha256(canonical_bytes(value, scheme)).hexdigest()


def idempotency_key(trace_id: str, task_id: str, sender: str, step: str, attempt: int, answers: str | None = None) -> str:
    """A key for one logical intent.

    A readable head (trace, task, step, attempt: what a person scanning a log wants) and a hash of
    the whole intent written as a JSON array, so that no choice of ids can make two intents share
    a key (the array keeps the fields apart; a separator inside an id cannot move a boundary) and
    the key stays within the 200 characters an id may have.
    """
    whole = json.dumps([trace_id, task_id, step, attempt, answers], separators=(",", ":"), ensure_ascii=False)
    tag = hashlib.sha256(whole.encode("utf-8")).hexdigest()[:32]
    return f"{trace_id[:40]}/{task_id[:40]}/{step[:20]}/a{attempt}/{tag}"
