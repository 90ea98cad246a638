"""Plausible mistake: a compact key from Python's built-in hash() of the intent's identity. It is
the same for the same intent within one process, but str hashes are salted per process: a
restarted worker or another replica computes another key for the same intent."""

DIGEST_SCHEME = "json-sorted-v1"


def idempotency_key(intent) -> str:
    h = hash((intent.trace_id, intent.task_id, intent.step, intent.attempt, intent.retry, intent.answers,
              intent.sender))
    return f"{intent.task_id}:{h & 0xFFFFFFFFFFFF:012x}"


def payload(intent) -> dict:
    return dict(intent.body)


def evidence_refs(intent) -> list[str]:
    return list(intent.refs)
