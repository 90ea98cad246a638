"""Plausible mistake: the key is a digest of what the intent says, so "the same thing again" gets
the same key and anything else gets another. Resends and duplicates pass; but two payloads of one
intent get two keys, so a contradiction can never be seen as a conflict."""

import hashlib
import json

DIGEST_SCHEME = "json-sorted-v1"


def idempotency_key(intent) -> str:
    said = json.dumps(intent.body, sort_keys=True, separators=(",", ":"))
    about = f":of:{intent.answers}" if intent.answers else ""
    digest = hashlib.sha256(said.encode("utf-8")).hexdigest()[:32]
    return f"{intent.trace_id}:{intent.task_id}:{intent.step}{about}:{intent.sender}:{digest}"


def payload(intent) -> dict:
    return dict(intent.body)


def evidence_refs(intent) -> list[str]:
    return list(intent.refs)
