"""Plausible mistake: an ack's key does not say which message it acknowledges."""

DIGEST_SCHEME = "json-sorted-v1"


def idempotency_key(intent) -> str:
    return f"{intent.trace_id}:{intent.task_id}:{intent.step}:attempt-{intent.attempt}:retry-{intent.retry}:{intent.sender}"


def payload(intent) -> dict:
    return dict(intent.body)


def evidence_refs(intent) -> list[str]:
    return list(intent.refs)
