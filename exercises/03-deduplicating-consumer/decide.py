"""Exercise 3: a deduplicating consumer.

consume() decides what one delivery means (accepted, duplicate, conflict, late or rejected) and
which move, if any, its task makes. Everything it gets and gives is plain data (see the README's
tables); the runtime turns your answer into events and state, and the invariants judge the result.

This starter applies whatever the allowlist permits and knows nothing of keys, digests, leases
or versions. It runs. Try:

    protolab run --intake decide.py --fault resend --db ex3.db && protolab check --db ex3.db   # exit 1 on the starter
    protolab exercise check 3         # exit 1 on the starter; exit 0 on a right answer
"""

from sim.envelope import role_of

STATE_ASKED = {"task_request": "ready", "task_started": "running", "cancel": "canceled"}
RESULT_STATE = {"succeeded": "succeeded", "failed": "failed", "denied": "denied", "waiting_human": "waiting_human",
                "retry": "retry_wait"}


def consume(delivery, task, recorded, allowed, missing_refs):
    """delivery: the envelope as a dict (its wire JSON). task: the task as stored now, a dict (None
    if it does not exist yet). recorded: the intents already recorded under (task_id,
    idempotency_key), a list of dicts. allowed(from_state, to_state, role): the task's allowlist.
    missing_refs: the evidence_refs that name nothing stored. Returns a dict (the README says which)."""
    role = role_of(delivery["sender"])
    if task is None:
        if delivery["type"] != "task_request":
            return {"decision": "rejected", "code": "E_UNKNOWN_TASK", "reason": "no such task"}
        return {"decision": "accepted", "reason": "created", "move": {"from": "pending", "to": "ready"},
                "create": True}
    if delivery["type"] == "ack":
        return {"decision": "accepted", "reason": "receipt recorded"}
    if delivery["type"] == "task_result":
        target = RESULT_STATE[delivery["payload"]["status"]]
    elif delivery["type"] == "review_decision":
        target = delivery["payload"]["decision"]
    else:
        target = STATE_ASKED.get(delivery["type"], task["state"])
    lease = task["lease_version"] + 1 if delivery["type"] == "task_started" else None
    if allowed(task["state"], target, role):
        return {"decision": "accepted", "reason": f"{task['state']} -> {target}",
                "move": {"from": task["state"], "to": target}, "lease": lease}
    return {"decision": "rejected", "code": "E_TRANSITION_NOT_ALLOWED",
            "reason": f"{task['state']} -> {target} is not allowed"}
