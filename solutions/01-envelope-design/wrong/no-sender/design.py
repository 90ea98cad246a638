"""Plausible mistake: the key names trace, task, step, attempt and the acknowledged message, but
not who speaks. Two workers' acks of the one fence get one key: the second is dropped as a
duplicate of the first."""

DIGEST_SCHEME = "jcs-v2"


def idempotency_key(intent) -> str:
    about = f":of:{intent.answers}" if intent.answers else ""
    return f"{intent.trace_id}:{intent.task_id}:{intent.step}:attempt-{intent.attempt}:retry-{intent.retry}{about}"


def payload(intent) -> dict:
    return dict(intent.body)


def evidence_refs(intent) -> list[str]:
    return list(intent.refs)
