"""Policies: the rules a runtime applies to each delivery.

``SAFE`` is the course's runtime: the reference intake (:func:`sim.intake.decide`) and
idempotent side effects (one effect key per kind, target and task). ``NAIVE`` is what many
multi-agent systems do by accident, kept here so a workshop can show the regression it
causes: last write wins, no deduplication, no allowlist, no lease fencing, side effects
keyed by delivery (so a redelivered result publishes again), an ack from the task's worker taken
as its completion, every message read as schema 1.0 whatever version it declares (a field a newer
minor added is dropped, a major it cannot read is read anyway), gathers reduced by majority (dissent
dropped) or by the senders' clocks, a payload_digest believed without digesting the payload again (a
payload changed in transit is taken), no care for sensitive fields (every recipient is sent all of them, and the logs keep them in the clear), and open payloads (a field
no message type declares is taken, and a self-reported ``budget_left`` is believed), and no conversation rules (a message after the fence, or one
whose sender's sequence went back, is taken like any other, and nothing puts a sender's messages back in
sequence: no session, sim.session).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .envelope import Envelope, role_of
from .errors import InputError, friendly_list
from .intake import Decision, Move, TaskView, Verdict, decide as reference_decide, target_state
from .machine import TERMINAL, RuleBook, TaskState
from .versions import Version

__all__ = ["Policy", "SAFE", "NAIVE", "POLICIES", "naive_decide", "get_policy"]


@dataclass(frozen=True)
class Policy:
    """An intake function and a rule for keying side effects.

    ``effect_rule(result, delivery_id) -> str | None``, when set, names the unique key a
    successful result's side effect commits under (``None``: commit nothing); otherwise effects
    are keyed by kind, target and task (``idempotent_effects``) or, naively, by delivery.
    """

    name: str
    decide: Callable[..., Verdict]
    idempotent_effects: bool
    description: str
    effect_rule: Callable[[Envelope, int], "str | None"] | None = None
    # Where a scenario declares sensitive fields (sim.privacy): send each recipient only the ones it
    # needs, and keep [redacted] in the logs. The naive runtime sends everything and logs it.
    minimise: bool = True
    redact: bool = True
    # A success resting on an input of a task frozen for review is frozen too, and commits nothing.
    hold_untrusted: bool = True
    # None: every message is read at the version it declares, or refused by intake (E_SCHEMA_VERSION).
    # A version: the runtime reads every message as that version, whatever it declares, silently
    # dropping what later minors added (sim.versions.read_as), and never refuses a version.
    reads_as: Version | None = None
    # Every envelope's payload digested again at intake, under its digest_scheme, wherever the envelope was
    # built (parsed from JSON, or made in memory by the simulator): one whose payload is not the one its
    # payload_digest was made of is refused (E_DIGEST_MISMATCH) before anything reads it. Off: the digest is
    # believed (the naive runtime takes a payload changed in transit).
    checks_digests: bool = True
    # Payloads held to their declared shape (sim.versions.shape, plus the run's sensitive fields): a field
    # nobody declared is refused (E_UNKNOWN_FIELD). Off: any field is taken.
    closed_payloads: bool = True
    # What a sender says about the runtime's own state is believed: a self-reported budget_left becomes
    # the task's budget (the naive runtime; the safe one keeps its own ledger).
    believes_payloads: bool = False
    # How a scenario's gathers are reduced (sim.gathers): "declared", under their frozen rule, keeping
    # dissent and using the declared tie-break; "majority", the most common verdict taken as the answer
    # (dissent dropped) and the first success by the senders' own clocks.
    gathers: str = "declared"
    # The conversation's rules kept at intake (sim.planner): nothing but acks of the fence after it (whatever
    # intake made of a message, filter before reduce), no sequence number used twice by one body on one task,
    # no body replaced by a restart speaking, no recipient outside a message's audience; and a session before
    # intake that hands it each sender's messages in sequence (sim.session). Off: whatever arrives is taken.
    conversation_rules: bool = True


def naive_decide(env: Envelope, task: TaskView | None, prior, rules: RuleBook, unresolved=frozenset()) -> Verdict:
    """Last write wins: every delivery is applied, whatever came before it."""
    role = role_of(env.sender)
    if task is None:
        if env.type != "task_request":
            return Verdict(Decision.REJECTED, f"task {env.task_id} does not exist", code="E_UNKNOWN_TASK")
        return Verdict(
            Decision.ACCEPTED, "created",
            move=Move(TaskState.PENDING, TaskState.READY, "last write wins", env.sender, role),
            create=True, record_intent=True,
        )
    if (env.type == "ack" and task.assignee is not None and env.sender == task.assignee
            and task.state not in TERMINAL and task.state != TaskState.SUCCEEDED):
        # The worker said it got the task; a runtime that reads a receipt as an answer calls it done.
        return Verdict(
            Decision.ACCEPTED, f"{task.state.value} -> succeeded: the worker acknowledged, taken as done",
            move=Move(task.state, TaskState.SUCCEEDED, "acknowledged: taken as done", env.sender, role),
            record_intent=True,
        )
    target = target_state(env)  # None for any other ack
    grant = task.lease_version + 1 if env.type == "task_started" else None
    if target is None or target == task.state:
        return Verdict(Decision.ACCEPTED, "applied (no change)", grant_lease=grant, record_intent=True)
    return Verdict(
        Decision.ACCEPTED, f"{task.state.value} -> {target.value}: last write wins",
        move=Move(task.state, target, "last write wins", env.sender, role),
        grant_lease=grant, record_intent=True,
    )


SAFE = Policy(
    "safe", reference_decide, True,
    "deduplicate by key and digest, freeze conflicts, never regress, allowlist and leases enforced, effects once",
)
NAIVE = Policy(
    "naive", naive_decide, False,
    "last write wins: no deduplication, no allowlist, no lease fencing, effects keyed by delivery; "
    "every message read as schema 1.0 whatever it says; every recipient is sent everything and the logs keep it",
    minimise=False, redact=False, hold_untrusted=False, reads_as=Version(1, 0), closed_payloads=False,
    believes_payloads=True, gathers="majority", conversation_rules=False, checks_digests=False,
)
POLICIES = {p.name: p for p in (SAFE, NAIVE)}


def get_policy(name: str) -> Policy:
    try:
        return POLICIES[name]
    except KeyError:
        raise InputError(
            f"unknown policy {name!r}; expected one of: {friendly_list(POLICIES)}", code="E_UNKNOWN_POLICY"
        ) from None
