"""Plausible mistake: the key names who the message is for as well as who says it.

It looks like more of the intent, but the recipient is where the transport takes a message, not what
the sender means: the same intent sent to another recipient (a request re-addressed to the replica now
serving the role, an acknowledgement routed through another participant) gets another key, so it is
judged as new work instead of a duplicate.
"""

DIGEST_SCHEME = "jcs-v2"


def idempotency_key(intent) -> str:
    about = f":of:{intent.answers}" if intent.answers else ""
    return (f"{intent.trace_id}:{intent.task_id}:{intent.step}:attempt-{intent.attempt}:retry-{intent.retry}{about}"
            f":{intent.sender}:to:{intent.recipient}")


def payload(intent) -> dict:
    return dict(intent.body)


def evidence_refs(intent) -> list[str]:
    return list(intent.refs)
