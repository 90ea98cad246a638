"""Plausible mistake: digests compared as strings, without their scheme: one payload under json-sorted-v1 and jcs-v2 looks like two.

The order of the checks is the lesson:

1. A schema this runtime does not speak is refused before anything is read from it.
2. The INTENT comes first: has (task_id, idempotency_key) been recorded, and with which payload?
   Same payload (compared under one digest scheme): a duplicate; nothing runs again, the stored
   result is reused. Another payload: a conflict, never last-write-wins: the task is frozen in
   needs_review, both payloads are kept, and the external result is untrusted. This check comes
   before the terminal check (a duplicate of a result is a duplicate, not late) and before the
   lease checks (a conflict is a conflict whoever sends it).
3. Only a task_request creates a task. An ack is a receipt and never moves anything.
4. A stale expected_state_version is refused: writes are compare-and-swap.
5. A terminal task never moves again: a new key for it is recorded as late.
6. Leases fence stale workers: a result commits only from the lease holder under the current
   lease_version; a start takes exactly the next lease.
7. Every move must be a row of the machine's allowlist for the sender's role, and a frozen task is
   left only by a reviewer's decision citing retained evidence.
"""

from __future__ import annotations

from sim import digest as _digest
from sim.envelope import SCHEMA_VERSIONS, Envelope, role_of
from sim.intake import Decision, IntentRecord, Move, TaskView, Verdict, target_state
from sim.machine import TERMINAL, RuleBook, TaskState


def _same_payload(prior: IntentRecord, env: Envelope) -> bool:
    """Compare digests under one scheme at a time.

    If the schemes differ, each payload is re-digested under the other's scheme and both
    must match, so the answer does not depend on which one arrived first (``1`` and ``1.0``
    are equal under jcs-v2 but not under json-sorted-v1: they are a conflict either way).
    """
    # The mistake: digest strings compared as they are, whatever scheme made each of them.
    return prior.payload_digest == env.payload_digest
    try:
        return (
            _digest.digest(prior.payload, env.digest_scheme) == env.payload_digest
            and _digest.digest(env.payload, prior.digest_scheme) == prior.payload_digest
        )
    except _digest.DigestError:
        return False


def _reject(code: str, reason: str) -> Verdict:
    return Verdict(Decision.REJECTED, reason, code=code)


def decide(
    env: Envelope,
    task: TaskView | None,
    prior: tuple[IntentRecord, ...] | list[IntentRecord],
    rules: RuleBook,
    unresolved: frozenset[str] = frozenset(),
) -> Verdict:
    """Decide one delivery (see the module docstring for the order of the checks)."""
    role = role_of(env.sender)

    # 0. A schema this runtime does not speak is refused before anything is read from it.
    if env.schema_version not in SCHEMA_VERSIONS:
        return _reject(
            "E_SCHEMA_VERSION",
            f"schema_version {env.schema_version!r} is not supported (this runtime speaks {', '.join(SCHEMA_VERSIONS)})",
        )

    if env.type == "fence":
        return _reject("E_FENCE_SCOPE", "a fence closes the whole conversation: its task_id must be its trace_id")

    # 1. The intent: has this (task_id, idempotency_key) been seen, and with which payload?
    if prior:
        for p in prior:
            if _same_payload(p, env):
                return Verdict(
                    Decision.DUPLICATE,
                    f"key {env.idempotency_key} already recorded from {p.message_id} with the same "
                    "payload digest; nothing re-executed, stored result reused",
                    duplicate_of=p,
                )
        first = min(prior, key=lambda p: p.arrival)
        move = None
        if task is not None and task.state != TaskState.NEEDS_REVIEW:
            if rules.allows(task.state, TaskState.NEEDS_REVIEW, "runtime"):
                move = Move(
                    task.state,
                    TaskState.NEEDS_REVIEW,
                    f"key {env.idempotency_key} arrived with two payloads ({first.message_id}, {env.message_id})",
                    "runtime",
                    "runtime",
                )
        return Verdict(
            Decision.CONFLICT,
            f"key {env.idempotency_key} was recorded from {first.message_id} with {first.payload_digest[:15]}…; "
            f"{env.message_id} carries {env.payload_digest[:15]}…: both kept, result untrusted, task frozen for review",
            move=move,
            record_intent=True,
            conflict_with=first,
        )

    # 2. A new intent.
    if task is None:
        if env.type != "task_request":
            return _reject("E_UNKNOWN_TASK", f"task {env.task_id} does not exist; only a task_request creates a task")
        if not rules.allows(TaskState.PENDING, TaskState.READY, role):
            return _reject(
                "E_ROLE_NOT_ALLOWED", f"{env.sender} ({role}) may not assign tasks under {rules.version}"
            )
        return Verdict(
            Decision.ACCEPTED,
            f"task {env.task_id} created and assigned to {env.recipient}",
            move=Move(TaskState.PENDING, TaskState.READY, f"assigned to {env.recipient}", env.sender, role),
            create=True,
            record_intent=True,
        )

    if env.type == "ack":
        # A receipt: recorded, never a state change, never "late" (acks follow completion).
        return Verdict(Decision.ACCEPTED, f"receipt from {env.sender} recorded; task state unchanged", record_intent=True)

    if env.type == "review_decision" and unresolved:
        # A person decides from *retained* evidence; an unretained citation proves nothing.
        return _reject(
            "E_EVIDENCE_UNRESOLVED",
            f"evidence_refs {', '.join(sorted(unresolved))} name no stored artifact or message",
        )

    expected = env.payload.get("expected_state_version")
    if expected is not None and expected != task.state_version:
        return _reject(
            "E_STALE_VERSION",
            f"{env.message_id} was written against state_version {expected}; task {env.task_id} is at "
            f"{task.state_version} (reread and merge)",
        )

    if task.state in TERMINAL:
        has_effect_claim = env.type == "task_result" and task.has_effects
        return Verdict(
            Decision.LATE,
            f"task {env.task_id} is already {task.state.value}; {env.type} recorded as late, state unchanged"
            + ("; it touches a committed side effect, so reconciliation is required" if has_effect_claim else ""),
            record_intent=True,
            needs_reconciliation=has_effect_claim,
        )

    target = target_state(env)
    grant = None
    if env.type == "task_started":
        if task.assignee is not None and env.sender != task.assignee:
            return _reject("E_NOT_ASSIGNEE", f"{env.task_id} is assigned to {task.assignee}, not {env.sender}")
        if task.budget_left <= 0:
            return _reject("E_BUDGET_EXHAUSTED", f"task {env.task_id} has no budget left for another attempt")
        grant = task.lease_version + 1
        asked = env.payload.get("lease_version")
        if asked is not None and asked != grant:
            return _reject(
                "E_STALE_LEASE", f"lease_version {asked} asked; the next lease of {env.task_id} is {grant}"
            )
    elif env.type == "task_result":
        if task.lease_holder is None and task.lease_version > 0:
            return _reject(
                "E_STALE_LEASE",
                f"lease v{task.lease_version} of {env.task_id} expired and nobody holds it now (a fenced, stale worker)",
            )
        if task.lease_holder is not None and env.sender != task.lease_holder:
            return _reject(
                "E_NOT_LEASE_HOLDER", f"{env.task_id} is leased to {task.lease_holder}, not {env.sender}"
            )
        if env.payload["lease_version"] != task.lease_version:
            return _reject(
                "E_STALE_LEASE",
                f"result carries lease_version {env.payload['lease_version']}; the current lease is "
                f"{task.lease_version} (a fenced, stale worker)",
            )
        if env.payload.get("status") == "succeeded" and not env.evidence_refs:
            return _reject("E_EVIDENCE_REQUIRED", f"{env.message_id} reports success but cites no evidence")
    elif env.type == "review_decision":
        if not env.evidence_refs:
            return _reject("E_EVIDENCE_REQUIRED", "a review decision must cite retained evidence in evidence_refs")

    assert target is not None
    rule = rules.find(task.state, target)
    if rule is None or task.state == target:
        allowed = sorted(r.to_state.value for r in rules.rules if r.from_state == task.state)
        return _reject(
            "E_TRANSITION_NOT_ALLOWED",
            f"{task.state.value} -> {target.value} is not in {rules.version}; from {task.state.value} the "
            f"allowed moves are to: {', '.join(allowed) or 'nothing'}",
        )
    if role not in rule.roles:
        return _reject(
            "E_ROLE_NOT_ALLOWED",
            f"{task.state.value} -> {target.value} may be made by {', '.join(rule.roles)}, not {env.sender} ({role})",
        )
    if task.state == TaskState.NEEDS_REVIEW and env.type != "review_decision":
        # A frozen task is released only by a decision that cites retained evidence.
        return _reject(
            "E_EVIDENCE_REQUIRED",
            "needs_review is left only through a review_decision citing retained evidence",
        )
    return Verdict(
        Decision.ACCEPTED,
        f"{task.state.value} -> {target.value}: {rule.reason}",
        move=Move(task.state, target, rule.reason, env.sender, role),
        grant_lease=grant,
        record_intent=True,
    )
