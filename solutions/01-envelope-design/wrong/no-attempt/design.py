"""Plausible mistake: the key names the task and the step but not the attempt."""

DIGEST_SCHEME = "json-sorted-v1"


def idempotency_key(intent) -> str:
    about = f":{intent.answers}" if intent.answers else ""
    return f"{intent.trace_id}:{intent.task_id}:{intent.step}{about}:{intent.sender}"


def payload(intent) -> dict:
    return dict(intent.body)


def evidence_refs(intent) -> list[str]:
    return list(intent.refs)
