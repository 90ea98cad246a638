"""Plausible mistake: the key is made unique with the time the message was sent."""

DIGEST_SCHEME = "json-sorted-v1"


def idempotency_key(intent) -> str:
    return f"{intent.trace_id}:{intent.task_id}:{intent.step}:attempt-{intent.attempt}:{intent.created_at}:{intent.sender}"


def payload(intent) -> dict:
    return dict(intent.body)


def evidence_refs(intent) -> list[str]:
    return list(intent.refs)
