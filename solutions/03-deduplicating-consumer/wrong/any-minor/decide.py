"""Plausible mistake: only the major of schema_version is read (as if every minor of a major were one
version), so a minor newer than this runtime reads (1.2) is taken as understood, and what that minor
added is silently dropped.
"""

import re

from sim.digest import digest
from sim.envelope import role_of
from sim.errors import DigestError

READS = {(1, 0), (1, 1)}  # (major, minor)
VERSION = re.compile(r"(0|[1-9][0-9]{0,5})(?:\.(0|[1-9][0-9]{0,5})(?:\.(0|[1-9][0-9]{0,5}))?)?")
FINISHED = ("succeeded", "failed", "denied", "canceled")
STATUS_TO_STATE = {"succeeded": "succeeded", "failed": "failed", "denied": "denied",
                   "waiting_human": "waiting_human", "retry": "retry_wait"}


def same_payload(rec, msg):
    """One payload, whatever scheme each side was digested under (each side checked both ways)."""
    if rec["digest_scheme"] == msg["digest_scheme"]:
        return rec["payload_digest"] == msg["payload_digest"]
    try:
        return (digest(msg["payload"], rec["digest_scheme"]) == rec["payload_digest"]
                and digest(rec["payload"], msg["digest_scheme"]) == msg["payload_digest"])
    except DigestError:
        return False


def reads(version):
    """Whether this runtime reads a message written in schema ``version``."""
    m = VERSION.fullmatch(version) if isinstance(version, str) else None
    return m is not None and int(m[1]) in {major for major, _minor in READS}


def refuse(code, reason):
    return {"decision": "rejected", "code": code, "reason": reason}


def wanted_state(msg):
    kind, body = msg["type"], msg["payload"]
    if kind == "task_request":
        return "ready"
    if kind == "task_started":
        return "running"
    if kind == "task_result":
        return STATUS_TO_STATE[body["status"]]
    if kind == "cancel":
        return "canceled"
    return body["decision"]  # a review_decision


def consume(delivery, task, recorded, allowed, missing_refs):
    msg = delivery
    role = role_of(msg["sender"])
    if not reads(msg["schema_version"]):
        return refuse("E_SCHEMA_VERSION", f"schema_version {msg['schema_version']} is not one this runtime reads")
    if msg["type"] == "fence":
        return refuse("E_FENCE_SCOPE", "a fence is for a whole trace, not a task")

    for rec in recorded:
        if same_payload(rec, msg):
            return {"decision": "duplicate", "reason": f"repeats {rec['message_id']}: nothing runs again",
                    "duplicate_of": rec["message_id"]}
    if recorded:
        first = min(recorded, key=lambda rec: rec["arrival"])
        freeze = None
        if task is not None and task["state"] != "needs_review" and allowed(task["state"], "needs_review", "runtime"):
            freeze = {"from": task["state"], "to": "needs_review"}
        return {"decision": "conflict", "reason": f"one key, two payloads ({first['message_id']} came first)",
                "move": freeze, "conflict_with": first["message_id"]}

    if task is None:
        if msg["type"] != "task_request":
            return refuse("E_UNKNOWN_TASK", f"no task {msg['task_id']}")
        if not allowed("pending", "ready", role):
            return refuse("E_ROLE_NOT_ALLOWED", f"a {role} does not hand out work")
        return {"decision": "accepted", "reason": "task created", "move": {"from": "pending", "to": "ready"},
                "create": True}
    if msg["type"] == "ack":
        return {"decision": "accepted", "reason": "receipt noted"}
    if msg["type"] == "review_decision" and missing_refs:
        return refuse("E_EVIDENCE_UNRESOLVED", f"cites what is not stored: {sorted(missing_refs)}")
    read_at = msg["payload"].get("expected_state_version")
    if read_at is not None and read_at != task["state_version"]:
        return refuse("E_STALE_VERSION", f"written at version {read_at}, task is at {task['state_version']}")
    now = task["state"]
    if now in FINISHED:
        return {"decision": "late", "reason": f"task already {now}",
                "reconcile": msg["type"] == "task_result" and task["has_effects"]}

    target = wanted_state(msg)
    lease = None
    if msg["type"] == "task_started":
        if task["assignee"] is not None and msg["sender"] != task["assignee"]:
            return refuse("E_NOT_ASSIGNEE", f"assigned to {task['assignee']}")
        if task["budget_left"] <= 0:
            return refuse("E_BUDGET_EXHAUSTED", "no budget left")
        lease = task["lease_version"] + 1
        if msg["payload"].get("lease_version", lease) != lease:
            return refuse("E_STALE_LEASE", f"the next lease is {lease}")
    elif msg["type"] == "task_result":
        if task["lease_holder"] is None and task["lease_version"] > 0:
            return refuse("E_STALE_LEASE", "the lease expired")
        if task["lease_holder"] is not None and msg["sender"] != task["lease_holder"]:
            return refuse("E_NOT_LEASE_HOLDER", f"leased to {task['lease_holder']}")
        if msg["payload"]["lease_version"] != task["lease_version"]:
            return refuse("E_STALE_LEASE", f"the current lease is {task['lease_version']}")
        if msg["payload"]["status"] == "succeeded" and not msg["evidence_refs"]:
            return refuse("E_EVIDENCE_REQUIRED", "a success cites its evidence")
    elif msg["type"] == "review_decision" and not msg["evidence_refs"]:
        return refuse("E_EVIDENCE_REQUIRED", "a review cites its evidence")

    if now == target or not allowed(now, target):
        return refuse("E_TRANSITION_NOT_ALLOWED", f"{now} -> {target} is not a move of the machine")
    if not allowed(now, target, role):
        return refuse("E_ROLE_NOT_ALLOWED", f"a {role} may not move {now} -> {target}")
    if now == "needs_review" and msg["type"] != "review_decision":
        return refuse("E_EVIDENCE_REQUIRED", "only a review decision leaves needs_review")
    return {"decision": "accepted", "reason": f"{now} -> {target}", "move": {"from": now, "to": target},
            "lease": lease}
