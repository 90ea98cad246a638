"""The intake decision: what one delivery means, decided without I/O.

``decide`` is a pure function. The runtime gathers its inputs from the store
(the task as it is now, the intents already recorded under the delivery's
``(task_id, idempotency_key)``, the task's rule book, and which evidence refs do
not resolve), calls it, and turns the :class:`Verdict` into events inside one
transaction. Because it is pure, a student's implementation with the same
signature can be plugged into the real runtime and run through the same
contract suite (``sim.contracts.intake``).

The five decisions:

``accepted``   a new intent; the move (if any) is in the allowlist for the sender's role.
``duplicate``  same key and the same payload digest under one scheme: record it, execute
               nothing, and hand back the result stored when the intent was first accepted.
``conflict``   same key, a different payload: never last-write-wins. The task is frozen in
               needs_review, both payloads are kept in arrival order, the result is untrusted.
``late``       a new key for a terminal task: recorded, the state never regresses.
``rejected``   unknown task, a move outside the allowlist, a role that may not make it, a
               stale state_version or lease, a review citing evidence that is not retained, a
               succeeded result citing no evidence at all (a paraphrase), a result citing a message
               the log does not hold (a made-up source). Recorded, nothing else.

An artifact ref that does not resolve is not a reason to refuse a message (an artifact may be
stored after the message that cites it); the runtime records an ``evidence_unresolved`` event
instead, so the gap stays visible. A message id cannot land later than a message quoting it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from . import digest as _digest
from . import versions as _versions
from .envelope import Envelope, role_of
from .frozen import quick_init
from .machine import TERMINAL, RuleBook, TaskState
from .privacy import is_redacted

__all__ = [
    "Decision",
    "TaskView",
    "IntentRecord",
    "Move",
    "Verdict",
    "decide",
    "target_state",
    "RESULT_TARGET",
]


class Decision(str, enum.Enum):
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    CONFLICT = "conflict"
    LATE = "late"
    REJECTED = "rejected"


@quick_init
@dataclass(frozen=True)
class TaskView:
    """What intake may know about a task: a read of the ``tasks`` row."""

    task_id: str
    state: TaskState
    state_version: int
    machine_version: str
    assignee: str | None = None
    lease_holder: str | None = None
    lease_version: int = 0
    budget_left: int = 0
    trusted: bool = True
    has_effects: bool = False


@quick_init
@dataclass(frozen=True)
class IntentRecord:
    """One recorded (task_id, idempotency_key, payload_digest, digest_scheme) and its result."""

    task_id: str
    idempotency_key: str
    payload_digest: str
    digest_scheme: str
    message_id: str
    payload: dict = field(compare=False, hash=False)
    arrival: int = 0
    result: dict | None = field(default=None, compare=False, hash=False)


@quick_init
@dataclass(frozen=True)
class Move:
    """A proposed transition, made by ``executor`` acting as ``role``."""

    from_state: TaskState
    to_state: TaskState
    reason: str
    executor: str
    role: str


@quick_init
@dataclass(frozen=True)
class Verdict:
    """The outcome of :func:`decide`. ``code`` is set for rejections (and says why a late one is late)."""

    decision: Decision
    reason: str
    code: str | None = None
    move: Move | None = None
    create: bool = False
    grant_lease: int | None = None
    record_intent: bool = False
    duplicate_of: IntentRecord | None = None
    conflict_with: IntentRecord | None = None
    needs_reconciliation: bool = False
    held: tuple[str, ...] = ()  # set by the runtime: untrusted inputs this success rests on (no effect commits)


RESULT_TARGET = {
    "succeeded": TaskState.SUCCEEDED,
    "failed": TaskState.FAILED,
    "denied": TaskState.DENIED,
    "waiting_human": TaskState.WAITING_HUMAN,
    "retry": TaskState.RETRY_WAIT,
}


def target_state(env: Envelope) -> TaskState | None:
    """The state an envelope asks its task to move to (``None`` for an ack)."""
    t = env.type
    if t == "task_request":
        return TaskState.READY
    if t == "task_started":
        return TaskState.RUNNING
    if t == "task_result":
        return RESULT_TARGET[env.payload["status"]]
    if t == "cancel":
        return TaskState.CANCELED
    if t == "review_decision":
        # a reconciliation (payload "reconcile") moves no state: None, like an ack
        return TaskState(env.payload["decision"]) if "decision" in env.payload else None
    return None


def _same_payload(prior: IntentRecord, env: Envelope) -> bool:
    """Compare digests under one scheme at a time.

    If the schemes differ, each payload is re-digested under the other's scheme and both
    must match, so the answer does not depend on which one arrived first (``1`` and ``1.0``
    are equal under jcs-v2 but not under json-sorted-v1: they are a conflict either way).
    """
    if prior.digest_scheme == env.digest_scheme:
        return prior.payload_digest == env.payload_digest
    try:
        ours = _digest.digest(env.payload, prior.digest_scheme) == prior.payload_digest
        if is_redacted(prior.payload):
            # The log kept [redacted] for the prior's sensitive values (sim.privacy): the new payload,
            # digested under the prior's scheme, is the whole comparison.
            return ours
        return ours and _digest.digest(prior.payload, env.digest_scheme) == env.payload_digest
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
    """Decide one delivery. See the module docstring for the five outcomes."""
    role = role_of(env.sender)

    # 0. A schema this runtime does not speak is refused before anything is read from it.
    # Negotiated per message: a major this runtime does not read, or a minor newer than it reads.
    why = _versions.refusal(env.schema_version)
    if why is not None:
        return _reject("E_SCHEMA_VERSION", why)

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
            # A success states findings; findings without the evidence they rest on are a paraphrase.
            return _reject(
                "E_EVIDENCE_REQUIRED",
                f"{env.message_id} reports success but cites no evidence (evidence_refs is empty): a conclusion "
                "without the evidence it rests on is not accepted",
            )
        phantom = sorted(r for r in unresolved if not r.startswith("sha256:"))
        if phantom:
            # An artifact may be stored after the message citing it; a message cannot be carried after a
            # message that quotes it. A cited message the log does not hold was never sent: a made-up source.
            return _reject(
                "E_EVIDENCE_UNRESOLVED",
                f"{env.message_id} cites {', '.join(phantom)}: the log holds no other message by that id, so the "
                "source was never sent (made up, or the message itself) and is no evidence",
            )
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
