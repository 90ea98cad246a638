"""Plausible mistake: "cite the evidence by digest", so the design digests the content itself and
cites that. Its serialisation is not the store's, so the ref names nothing stored, and a message
without content (the writer's request) cites nothing at all."""

import hashlib
import json

DIGEST_SCHEME = "jcs-v2"


def idempotency_key(intent) -> str:
    about = f":of:{intent.answers}" if intent.answers else ""
    return f"{intent.trace_id}:{intent.task_id}:{intent.step}:attempt-{intent.attempt}:retry-{intent.retry}{about}:{intent.sender}"


def payload(intent) -> dict:
    return dict(intent.body)


def evidence_refs(intent) -> list[str]:
    if intent.content is None:
        return []
    return ["sha256:" + hashlib.sha256(json.dumps(intent.content).encode("utf-8")).hexdigest()]
