"""Plausible mistake: "each recipient gets only what it needs", read as "only the fields intake
checks". The budget, the publication target and the product's ref never reach their recipient, and
two results with different products get one digest."""

DIGEST_SCHEME = "json-sorted-v1"

_NEEDED = ("goal", "status", "lease_version", "effect", "of", "to", "terminal")


def idempotency_key(intent) -> str:
    about = f":of:{intent.answers}" if intent.answers else ""
    return f"{intent.trace_id}:{intent.task_id}:{intent.step}:attempt-{intent.attempt}:retry-{intent.retry}{about}:{intent.sender}"


def payload(intent) -> dict:
    return {k: v for k, v in intent.body.items() if k in _NEEDED}


def evidence_refs(intent) -> list[str]:
    return list(intent.refs)
