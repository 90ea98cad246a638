"""Plausible mistake: one way of writing bytes for every scheme name; jcs-v2 and unknown schemes get
json-sorted-v1's bytes."""

from __future__ import annotations

import hashlib
import json

SCHEMES = ("json-sorted-v1", "jcs-v2")


def canonical_bytes(value, scheme: str = "json-sorted-v1") -> bytes:
    """The exact bytes ``scheme`` hashes for ``value``; ValueError for what it cannot write."""
    # every scheme is written the same way
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8")


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
    whole = json.dumps([trace_id, task_id, sender, step, attempt, answers], separators=(",", ":"), ensure_ascii=False)
    tag = hashlib.sha256(whole.encode("utf-8")).hexdigest()[:32]
    return f"{trace_id[:40]}/{task_id[:40]}/{step[:20]}/a{attempt}/{tag}"
