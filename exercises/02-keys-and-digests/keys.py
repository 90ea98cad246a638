"""Exercise 2: payload digests and idempotency keys.

Fill in the three functions below. Read README.md first; `protolab exercise check 2` judges your
file and says what broke. You may import anything from Python's standard library and the
``rfc8785`` package (installed with protolab).
"""

from __future__ import annotations

import hashlib
import json

SCHEMES = ("json-sorted-v1", "jcs-v2")


def canonical_bytes(value, scheme: str = "json-sorted-v1") -> bytes:
    """The exact bytes ``scheme`` hashes for ``value``; raise ValueError for what it cannot write."""
    # TODO: this is close to json-sorted-v1 but not it. Which options are missing? And jcs-v2?
    return json.dumps(value, sort_keys=True).encode("utf-8")


def digest(value, scheme: str = "json-sorted-v1") -> str:
    """``sha256:`` followed by the 64 lowercase hex digits of SHA-256 over ``canonical_bytes``."""
    return "sha256:" + hashlib.sha256(canonical_bytes(value, scheme)).hexdigest()


def idempotency_key(trace_id: str, task_id: str, sender: str, step: str, attempt: int, answers: str | None = None) -> str:
    """The key of one logical intent: ``sender`` means ``step`` (request, start, result, ack, cancel,
    ...) about ``task_id`` in conversation ``trace_id``, for ``attempt``; an ack ``answers`` a message id.
    """
    # TODO: is this the same for the same intent, different for different intents, and a valid id?
    return f"{trace_id}:{task_id}:{step}"
