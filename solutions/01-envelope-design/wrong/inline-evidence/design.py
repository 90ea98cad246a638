"""Plausible mistake: good keys, but the fact table travels inside the payload."""

DIGEST_SCHEME = "json-sorted-v1"


def idempotency_key(intent) -> str:
    about = f":of:{intent.answers}" if intent.answers else ""
    return f"{intent.trace_id}:{intent.task_id}:{intent.step}:attempt-{intent.attempt}:retry-{intent.retry}{about}:{intent.sender}"


def payload(intent) -> dict:
    out = dict(intent.body)
    if intent.content is not None:
        out["fact_table"] = intent.content
    for task, given in intent.context.get("inputs", {}).items():
        out.setdefault("inputs", {})[task] = given["content"]
    return out


def evidence_refs(intent) -> list[str]:
    return list(intent.refs)  # cited, too: the mistake is only the copy
