"""The intake contract: what ``decide`` must answer, as data plus a runner.

Each :class:`Case` is one delivery (an envelope, the task as intake would read it,
the intents already recorded under the envelope's key, the evidence refs that do
not resolve) and the verdict the seed's rules require. :func:`check` runs one case
against any function with the signature of :func:`sim.intake.decide` and returns
human-readable failures (never raises); :func:`run` runs them all::

    from sim.contracts.intake import run, report
    results = run(my_decide)
    print(report(results))

The suite is pinned against the reference :func:`sim.intake.decide`
(``tests/test_intake_contract.py``). Besides the expected decision, code, move
target and granted lease, :func:`check` enforces three things the runtime relies on:
a move starts from the task's current state (``pending`` when a task_request creates
the task, with ``create`` set), every move is in the machine's allowlist for the role
it names, and a duplicate / conflict verdict points at the recorded intent it matched
(``duplicate_of``) or collided with (``conflict_with``, the earliest arrival).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from ..envelope import Envelope, build_envelope
from ..intake import Decision, IntentRecord, Move, TaskView, Verdict
from ..machine import RuleBook, TaskState, default_rulebook

__all__ = ["Case", "CASES", "check", "run", "report", "TASK_ID", "TRACE_ID"]

TASK_ID = "T-20"
TRACE_ID = "R-7"
_CREATED_AT = "2026-07-13T04:00:00Z"
_RULES = default_rulebook()

DecideFn = Callable[..., object]


@dataclass(frozen=True, kw_only=True)
class Case:
    """One delivery and the verdict the protocol requires for it."""

    name: str  # a sentence naming the situation and the expected outcome
    rule: str  # the seed rule this case pins
    envelope: Envelope
    task: TaskView | None
    prior: tuple[IntentRecord, ...] = ()
    unresolved: frozenset[str] = frozenset()
    decision: Decision  # expected
    code: str | None = None  # expected code of a rejection (None: not checked)
    to_state: TaskState | None = None  # expected move target; None means "no move allowed"
    lease: int | None = None  # expected grant_lease, checked when not None


# ---------------------------------------------------------------------------
# builders


def _env(
    type: str,
    payload: dict,
    *,
    sender: str,
    key: str,
    mid: str,
    recipient: str = "manager",
    evidence: Iterable[str] = (),
    scheme: str = "json-sorted-v1",
    task_id: str = TASK_ID,
) -> Envelope:
    return build_envelope(
        message_id=mid,
        trace_id=TRACE_ID,
        task_id=task_id,
        sender=sender,
        recipient=recipient,
        type=type,
        payload=payload,
        idempotency_key=key,
        created_at=_CREATED_AT,
        evidence_refs=tuple(evidence),
        digest_scheme=scheme,
    )


def _view(
    state: str,
    version: int,
    *,
    assignee: str | None = "researcher",
    holder: str | None = None,
    lease: int = 0,
    budget: int = 5,
    trusted: bool = True,
    has_effects: bool = False,
) -> TaskView:
    return TaskView(
        task_id=TASK_ID,
        state=TaskState(state),
        state_version=version,
        machine_version=_RULES.version,
        assignee=assignee,
        lease_holder=holder,
        lease_version=lease,
        budget_left=budget,
        trusted=trusted,
        has_effects=has_effects,
    )


def _intent(env: Envelope, arrival: int, state: str | None = None, version: int | None = None) -> IntentRecord:
    """The intent the runtime would have recorded when ``env`` was first accepted."""
    return IntentRecord(
        task_id=env.task_id,
        idempotency_key=env.idempotency_key,
        payload_digest=env.payload_digest,
        digest_scheme=env.digest_scheme,
        message_id=env.message_id,
        payload=dict(env.payload),
        arrival=arrival,
        result={"decision": "accepted", "state": state, "state_version": version},
    )


def _replace_env(env: Envelope, **changes) -> Envelope:
    """``env`` with fields changed as they would arrive (no re-validation: intake must refuse them)."""
    from dataclasses import replace

    return replace(env, **changes)


# Keys and envelopes of one ordinary run of task T-20.
K_REQUEST = f"{TRACE_ID}:{TASK_ID}:attempt-1"
K_START = f"{TRACE_ID}:{TASK_ID}:start-1"
K_RESULT = f"{TRACE_ID}:{TASK_ID}:result-1"
K_ACK = f"{TRACE_ID}:{TASK_ID}:ack-1"

REQUEST = _env("task_request", {"goal": "collect evidence"}, sender="manager", recipient="researcher",
               key=K_REQUEST, mid="M-100")
STARTED = _env("task_started", {"lease_version": 1}, sender="researcher", key=K_START, mid="M-101")


#: The artifact a succeeded result cites (its fact table): a success cites the evidence it rests on.
FACTS_REF = "sha256:" + "ab" * 32


def _result(status: str, lease: int = 1, *, sender: str = "researcher", key: str = K_RESULT, mid: str = "M-102",
            scheme: str = "json-sorted-v1", evidence: Iterable[str] | None = None, **extra) -> Envelope:
    if evidence is None:
        evidence = (FACTS_REF,) if status == "succeeded" else ()
    return _env("task_result", {"status": status, "lease_version": lease, **extra}, sender=sender, key=key, mid=mid,
                scheme=scheme, evidence=evidence)


SUCCEEDED = _result("succeeded", summary="3 sources", effect={"kind": "publish", "target": "R-1"})
SUCCEEDED_JCS = _result("succeeded", summary="3 sources", effect={"kind": "publish", "target": "R-1"},
                        scheme="jcs-v2", mid="M-102b")
# A payload whose two schemes write different bytes: json-sorted-v1 writes 1.0 as "1.0", jcs-v2 as "1",
# so the same payload has two different digest strings and only a scheme-aware comparison sees one intent.
SCORED = _result("succeeded", summary="3 sources", score=1.0, effect={"kind": "publish", "target": "R-1"})
SCORED_JCS = _result("succeeded", summary="3 sources", score=1.0, effect={"kind": "publish", "target": "R-1"},
                     scheme="jcs-v2", mid="M-102b")
# Equal under jcs-v2 (1 and 1.0 are one number) but not under json-sorted-v1: a different payload.
SCORED_INT_JCS = _result("succeeded", summary="3 sources", score=1, effect={"kind": "publish", "target": "R-1"},
                         scheme="jcs-v2", mid="M-102c")
ACK = _env("ack", {"of": "M-102"}, sender="manager", recipient="researcher", key=K_ACK, mid="M-103")

# Task views along that run (state_version counts applied moves).
READY = _view("ready", 1)
RUNNING = _view("running", 2, holder="researcher", lease=1, budget=4)
DONE = _view("succeeded", 3, holder="researcher", lease=1, budget=4, has_effects=True)
FAILED = _view("failed", 3, holder="researcher", lease=1, budget=4)
DENIED = _view("denied", 3, holder="researcher", lease=1, budget=4)
CANCELED = _view("canceled", 3, holder="researcher", lease=1, budget=4)
WAITING = _view("waiting_human", 3, holder="researcher", lease=1, budget=4)
RETRY = _view("retry_wait", 3, holder="researcher", lease=1, budget=4)
REVIEW = _view("needs_review", 4, holder="researcher", lease=1, budget=4, trusted=False)
# After a retry: reassigned to ready, then recovered by a second lease.
READY_AGAIN = _view("ready", 4, holder="researcher", lease=1, budget=4)
RUNNING_L2_SAME = _view("running", 5, holder="researcher", lease=2, budget=3)
RUNNING_L2_WRITER = _view("running", 5, assignee="writer", holder="writer", lease=2, budget=3)

A = Decision.ACCEPTED
DUP = Decision.DUPLICATE
CON = Decision.CONFLICT
LATE = Decision.LATE
REJ = Decision.REJECTED
S = TaskState

_LEASE_RULE = "a result commits only under the current lease: the sender must hold it and name its lease_version"
_MOVE_RULE = "only moves in the machine's allowlist are made, and only by the roles it names"
_DUP_RULE = "same key and same payload digest (under one scheme) is a duplicate: record it, re-execute nothing, reuse the stored result"
_CONFLICT_RULE = "same key with a different digest is never last-write-wins: freeze the task in needs_review and keep both"
_LATE_RULE = "a new key for a terminal task is recorded as late and never regresses its state"
_REVIEW_RULE = "only a reviewer leaves needs_review, deciding from retained evidence"
_EVIDENCE_RULE = "a success states findings: it cites the evidence they rest on in evidence_refs (no paraphrase)"


CASES: tuple[Case, ...] = (
    # ---- creation and unknown tasks
    Case(
        name="a manager's task_request for a new task creates it and moves it pending -> ready",
        rule="only a task_request creates a task; the manager assigns it",
        envelope=REQUEST, task=None, decision=A, to_state=S.READY,
    ),
    Case(
        name="a writer's task_request for a new task is refused: only a manager assigns tasks",
        rule=_MOVE_RULE,
        envelope=_env("task_request", {"goal": "x"}, sender="writer", recipient="researcher", key="w:1", mid="M-190"),
        task=None, decision=REJ, code="E_ROLE_NOT_ALLOWED",
    ),
    Case(
        name="a task_started for a task that does not exist is refused as unknown",
        rule="only a task_request creates a task; any other message needs an existing task",
        envelope=STARTED, task=None, decision=REJ, code="E_UNKNOWN_TASK",
    ),
    Case(
        name="a task_result for a task that does not exist is refused as unknown",
        rule="only a task_request creates a task; any other message needs an existing task",
        envelope=SUCCEEDED, task=None, decision=REJ, code="E_UNKNOWN_TASK",
    ),
    Case(
        name="an ack for a task that does not exist is refused as unknown",
        rule="only a task_request creates a task; any other message needs an existing task",
        envelope=ACK, task=None, decision=REJ, code="E_UNKNOWN_TASK",
    ),
    # ---- starting: assignee, lease, budget
    Case(
        name="task_started from the assignee moves ready -> running and grants lease 1",
        rule="the assignee starts the task and takes the next lease (lease_version + 1), spending budget",
        envelope=STARTED, task=READY, decision=A, to_state=S.RUNNING, lease=1,
    ),
    Case(
        name="task_started without an asked lease_version still gets the next lease",
        rule="the assignee starts the task and takes the next lease (lease_version + 1)",
        envelope=_env("task_started", {}, sender="researcher", key=K_START, mid="M-101"),
        task=READY, decision=A, to_state=S.RUNNING, lease=1,
    ),
    Case(
        name="task_started after a retry grants lease_version + 1, not 1",
        rule="leases are fenced: each attempt gets a strictly larger lease_version",
        envelope=_env("task_started", {"lease_version": 2}, sender="researcher", key="start-2", mid="M-120"),
        task=READY_AGAIN, decision=A, to_state=S.RUNNING, lease=2,
    ),
    Case(
        name="task_started from a worker that is not the assignee is refused",
        rule="only the assignee may start the task",
        envelope=_env("task_started", {"lease_version": 1}, sender="writer", key="start-w", mid="M-104"),
        task=READY, decision=REJ, code="E_NOT_ASSIGNEE",
    ),
    Case(
        name="task_started asking for a lease_version other than the next one is refused as a stale lease",
        rule="a worker that read an old lease must reread before it starts",
        envelope=_env("task_started", {"lease_version": 1}, sender="researcher", key="start-2", mid="M-120"),
        task=READY_AGAIN, decision=REJ, code="E_STALE_LEASE",
    ),
    Case(
        name="task_started with no budget left is refused",
        rule="budget usage comes from the runtime's record: no budget, no new attempt",
        envelope=STARTED, task=_view("ready", 1, budget=0), decision=REJ, code="E_BUDGET_EXHAUSTED",
    ),
    Case(
        name="the last unit of budget still pays for an attempt",
        rule="budget usage comes from the runtime's record: no budget, no new attempt",
        envelope=STARTED, task=_view("ready", 1, budget=1), decision=A, to_state=S.RUNNING, lease=1,
    ),
    Case(
        name="a schema version this runtime does not speak is refused before anything is read",
        rule="a message in an unknown schema_version is refused, never guessed at",
        envelope=_replace_env(REQUEST, schema_version="9"), task=None, decision=REJ, code="E_SCHEMA_VERSION",
    ),
    Case(
        name="a fence naming a task instead of its conversation is refused",
        rule="a terminal fence closes the whole conversation: its task_id is its trace_id",
        envelope=_env("fence", {"to": ["researcher"], "terminal": "COMPLETED"}, sender="manager", recipient="researcher",
                      key="fence-1", mid="M-150"),
        task=RUNNING, decision=REJ, code="E_FENCE_SCOPE",
    ),
    Case(
        name="task_started on a task that is already running is an illegal move",
        rule=_MOVE_RULE,
        envelope=_env("task_started", {}, sender="researcher", key="start-again", mid="M-105"),
        task=RUNNING, decision=REJ, code="E_TRANSITION_NOT_ALLOWED",
    ),
    # ---- results under the current lease
    Case(
        name="a succeeded result from the lease holder with the current lease moves running -> succeeded",
        rule=_LEASE_RULE,
        envelope=SUCCEEDED, task=RUNNING, decision=A, to_state=S.SUCCEEDED,
    ),
    Case(
        name="a succeeded result that cites no evidence is refused: a conclusion without its evidence is lost evidence",
        rule=_EVIDENCE_RULE,
        envelope=_result("succeeded", summary="3 sources, trust me", evidence=(), mid="M-102p"),
        task=RUNNING, decision=REJ, code="E_EVIDENCE_REQUIRED",
    ),
    Case(
        name="a failed result needs no evidence: it states no findings",
        rule=_EVIDENCE_RULE,
        envelope=_result("failed", error="source unreachable", mid="M-102f"),
        task=RUNNING, decision=A, to_state=S.FAILED,
    ),
    Case(
        name="a failed result from the lease holder with the current lease moves running -> failed",
        rule=_LEASE_RULE,
        envelope=_result("failed"), task=RUNNING, decision=A, to_state=S.FAILED,
    ),
    Case(
        name="a denied result from the lease holder with the current lease moves running -> denied",
        rule=_LEASE_RULE,
        envelope=_result("denied"), task=RUNNING, decision=A, to_state=S.DENIED,
    ),
    Case(
        name="a waiting_human result from the lease holder moves running -> waiting_human",
        rule=_LEASE_RULE,
        envelope=_result("waiting_human"), task=RUNNING, decision=A, to_state=S.WAITING_HUMAN,
    ),
    Case(
        name="a retry result from the lease holder moves running -> retry_wait",
        rule=_LEASE_RULE,
        envelope=_result("retry"), task=RUNNING, decision=A, to_state=S.RETRY_WAIT,
    ),
    Case(
        name="a result under the second lease from its holder succeeds",
        rule=_LEASE_RULE,
        envelope=_result("succeeded", 2, key="result-2", mid="M-121"),
        task=RUNNING_L2_SAME, decision=A, to_state=S.SUCCEEDED,
    ),
    Case(
        name="a zombie result carrying the old lease_version after recovery is refused as a stale lease",
        rule=_LEASE_RULE + " (a fenced, stale worker cannot commit)",
        envelope=_result("succeeded", 1), task=RUNNING_L2_SAME, decision=REJ, code="E_STALE_LEASE",
    ),
    Case(
        name="a result naming a future lease_version is refused as a stale lease",
        rule=_LEASE_RULE,
        envelope=_result("succeeded", 2), task=RUNNING, decision=REJ, code="E_STALE_LEASE",
    ),
    Case(
        name="a result from a worker that does not hold the lease is refused",
        rule=_LEASE_RULE,
        envelope=_result("succeeded", 1, sender="writer"), task=RUNNING, decision=REJ, code="E_NOT_LEASE_HOLDER",
    ),
    Case(
        name="a zombie result from the previous lease holder after the task moved to another worker is refused",
        rule=_LEASE_RULE,
        envelope=_result("succeeded", 1), task=RUNNING_L2_WRITER, decision=REJ, code="E_NOT_LEASE_HOLDER",
    ),
    Case(
        name="a result for a task that is ready again (not running) is an illegal move",
        rule=_MOVE_RULE,
        envelope=_result("succeeded", 1, key="result-r", mid="M-122"), task=READY_AGAIN,
        decision=REJ, code="E_TRANSITION_NOT_ALLOWED",
    ),
    # ---- duplicates
    Case(
        name="same key and same digest is a duplicate that reuses the stored result",
        rule=_DUP_RULE,
        envelope=SUCCEEDED, task=DONE, prior=(_intent(SUCCEEDED, 3, "succeeded", 3),), decision=DUP,
    ),
    Case(
        name="the same payload digested under jcs-v2 after json-sorted-v1 is still a duplicate",
        rule=_DUP_RULE + "; digests under different schemes are compared by re-digesting under one scheme",
        envelope=SUCCEEDED_JCS, task=DONE, prior=(_intent(SUCCEEDED, 3, "succeeded", 3),), decision=DUP,
    ),
    Case(
        name="the same payload digested under json-sorted-v1 after jcs-v2 is still a duplicate",
        rule=_DUP_RULE + "; digests under different schemes are compared by re-digesting under one scheme",
        envelope=SUCCEEDED, task=DONE, prior=(_intent(SUCCEEDED_JCS, 3, "succeeded", 3),), decision=DUP,
    ),
    Case(
        name="a payload whose schemes write different digest strings is still one intent (jcs-v2 after json-sorted-v1)",
        rule=_DUP_RULE + "; digests under different schemes are compared by re-digesting under one scheme",
        envelope=SCORED_JCS, task=DONE, prior=(_intent(SCORED, 3, "succeeded", 3),), decision=DUP,
    ),
    Case(
        name="a payload whose schemes write different digest strings is still one intent (json-sorted-v1 after jcs-v2)",
        rule=_DUP_RULE + "; digests under different schemes are compared by re-digesting under one scheme",
        envelope=SCORED, task=DONE, prior=(_intent(SCORED_JCS, 3, "succeeded", 3),), decision=DUP,
    ),
    Case(
        name="1 and 1.0 are one number under jcs-v2 but two under json-sorted-v1: the same key with them is a conflict",
        rule=_CONFLICT_RULE + "; payloads are one intent only if each scheme agrees",
        envelope=SCORED_INT_JCS, task=DONE, prior=(_intent(SCORED, 3, "succeeded", 3),), decision=CON,
        to_state=S.NEEDS_REVIEW,
    ),
    Case(
        name="a redelivered task_started while the task is running is a duplicate: no second lease, no move",
        rule=_DUP_RULE,
        envelope=STARTED, task=RUNNING, prior=(_intent(STARTED, 2, "running", 2),), decision=DUP,
    ),
    Case(
        name="a duplicate of a result for a task that is now terminal is a duplicate, not late",
        rule=_DUP_RULE + "; the key check comes before the terminal check",
        envelope=_result("failed"), task=FAILED, prior=(_intent(_result("failed"), 3, "failed", 3),), decision=DUP,
    ),
    Case(
        name="a redelivered task_request for an existing task is a duplicate, not a second creation",
        rule=_DUP_RULE,
        envelope=REQUEST, task=RUNNING, prior=(_intent(REQUEST, 1, "ready", 1),), decision=DUP,
    ),
    Case(
        name="after a conflict, redelivering the second payload is a duplicate of it",
        rule=_DUP_RULE + "; both payloads of a conflict are recorded intents",
        envelope=_result("failed"), task=REVIEW,
        prior=(_intent(SUCCEEDED, 3, "succeeded", 3), _intent(_result("failed"), 4, "needs_review", 4)),
        decision=DUP,
    ),
    # ---- conflicts
    Case(
        name="same key with a different digest while running is a conflict that freezes the task in needs_review",
        rule=_CONFLICT_RULE,
        envelope=_env("task_started", {"lease_version": 1, "note": "second worker"}, sender="researcher",
                      key=K_START, mid="M-128"),
        task=RUNNING, prior=(_intent(STARTED, 2, "running", 2),), decision=CON, to_state=S.NEEDS_REVIEW,
    ),
    Case(
        name="same key with a different digest on a succeeded task escalates it to needs_review",
        rule=_CONFLICT_RULE + "; the only way out of a terminal state is to needs_review",
        envelope=_result("failed"), task=DONE,
        prior=(_intent(SUCCEEDED, 3, "succeeded", 3),), decision=CON, to_state=S.NEEDS_REVIEW,
    ),
    Case(
        name="a conflict ignores the lease: a wrong-lease payload under a recorded key still freezes the task",
        rule=_CONFLICT_RULE + "; the key check comes before lease checks",
        envelope=_result("failed", 7), task=DONE,
        prior=(_intent(SUCCEEDED, 3, "succeeded", 3),), decision=CON, to_state=S.NEEDS_REVIEW,
    ),
    Case(
        name="a conflict on a task already in needs_review is recorded without a move",
        rule=_CONFLICT_RULE + "; a frozen task stays frozen",
        envelope=_result("denied"), task=REVIEW,
        prior=(_intent(SUCCEEDED, 3, "succeeded", 3), _intent(_result("failed"), 4, "needs_review", 4)),
        decision=CON,
    ),
    Case(
        name="a conflicting task_request under the creating key freezes the task",
        rule=_CONFLICT_RULE,
        envelope=_env("task_request", {"goal": "something else"}, sender="manager", recipient="researcher",
                      key=K_REQUEST, mid="M-106"),
        task=RUNNING, prior=(_intent(REQUEST, 1, "ready", 1),), decision=CON, to_state=S.NEEDS_REVIEW,
    ),
    # ---- late
    Case(
        name="a second succeeded result under a new key for a succeeded task is late and moves nothing",
        rule=_LATE_RULE,
        envelope=_result("succeeded", key="result-1b", mid="M-107"), task=DONE, decision=LATE,
    ),
    Case(
        name="a late failed result after success does not overwrite succeeded",
        rule=_LATE_RULE,
        envelope=_result("failed", key="result-1c", mid="M-108"), task=DONE, decision=LATE,
    ),
    Case(
        name="a new result for a failed task is late",
        rule=_LATE_RULE,
        envelope=_result("succeeded", key="result-1d", mid="M-109"), task=FAILED, decision=LATE,
    ),
    Case(
        name="a new result for a denied task is late",
        rule=_LATE_RULE,
        envelope=_result("succeeded", key="result-1e", mid="M-110"), task=DENIED, decision=LATE,
    ),
    Case(
        name="a result arriving after the task was canceled is late",
        rule=_LATE_RULE,
        envelope=_result("succeeded", key="result-1f", mid="M-111"), task=CANCELED, decision=LATE,
    ),
    Case(
        name="a task_started arriving after the task was canceled is late, not a restart",
        rule=_LATE_RULE,
        envelope=_env("task_started", {}, sender="researcher", key="start-late", mid="M-112"),
        task=CANCELED, decision=LATE,
    ),
    Case(
        name="a cancel for a succeeded task is late, not a regression",
        rule=_LATE_RULE,
        envelope=_env("cancel", {"reason": "too slow"}, sender="manager", recipient="researcher",
                      key="cancel-late", mid="M-113"),
        task=DONE, decision=LATE,
    ),
    # ---- acks
    Case(
        name="an ack on a running task is accepted and moves nothing",
        rule="a delivery acknowledgment is a receipt, not progress: it never changes task state",
        envelope=ACK, task=RUNNING, decision=A,
    ),
    Case(
        name="an ack with a new key on a succeeded task is accepted, not late, and moves nothing",
        rule="a delivery acknowledgment is a receipt, not progress: acks follow completion and are never late",
        envelope=ACK, task=DONE, decision=A,
    ),
    Case(
        name="an ack on a canceled task is accepted and moves nothing",
        rule="a delivery acknowledgment is a receipt, not progress",
        envelope=_env("ack", {}, sender="researcher", key="ack-c", mid="M-114"), task=CANCELED, decision=A,
    ),
    Case(
        name="a redelivered ack is a duplicate",
        rule=_DUP_RULE,
        envelope=ACK, task=DONE, prior=(_intent(ACK, 5, "succeeded", 3),), decision=DUP,
    ),
    # ---- cancel
    Case(
        name="a manager's cancel of a running task moves it to canceled",
        rule="any nonterminal state -> canceled, by a manager or reviewer",
        envelope=_env("cancel", {"reason": "no longer needed"}, sender="manager", recipient="researcher",
                      key="cancel-1", mid="M-115"),
        task=RUNNING, decision=A, to_state=S.CANCELED,
    ),
    Case(
        name="a manager's cancel of a retry_wait task moves it to canceled",
        rule="any nonterminal state -> canceled, by a manager or reviewer",
        envelope=_env("cancel", {}, sender="manager", recipient="researcher", key="cancel-2", mid="M-116"),
        task=RETRY, decision=A, to_state=S.CANCELED,
    ),
    Case(
        name="a manager's cancel of a needs_review task is refused: only a reviewer decides frozen tasks",
        rule=_REVIEW_RULE,
        envelope=_env("cancel", {}, sender="manager", recipient="researcher", key="cancel-3", mid="M-117"),
        task=REVIEW, decision=REJ, code="E_ROLE_NOT_ALLOWED",
    ),
    Case(
        name="a worker's cancel of its own running task is refused",
        rule=_MOVE_RULE,
        envelope=_env("cancel", {}, sender="researcher", key="cancel-4", mid="M-118"),
        task=RUNNING, decision=REJ, code="E_ROLE_NOT_ALLOWED",
    ),
    # ---- review decisions
    Case(
        name="a reviewer's review_decision citing retained evidence releases needs_review -> ready",
        rule=_REVIEW_RULE,
        envelope=_env("review_decision", {"decision": "ready", "expected_state_version": 4}, sender="reviewer",
                      key="review:T-20:v4", mid="REV-1", evidence=("M-102",)),
        task=REVIEW, decision=A, to_state=S.READY,
    ),
    Case(
        name="a reviewer's review_decision citing retained evidence cancels a needs_review task",
        rule=_REVIEW_RULE,
        envelope=_env("review_decision", {"decision": "canceled"}, sender="reviewer", key="review:T-20:v4",
                      mid="REV-2", evidence=("M-102", "sha256:" + "a" * 64)),
        task=REVIEW, decision=A, to_state=S.CANCELED,
    ),
    Case(
        name="a reviewer's review_decision answers a waiting_human task and makes it ready",
        rule="waiting_human -> ready when a person (a reviewer) answers",
        envelope=_env("review_decision", {"decision": "ready"}, sender="reviewer", key="review:wh", mid="REV-3",
                      evidence=("M-102",)),
        task=WAITING, decision=A, to_state=S.READY,
    ),
    Case(
        name="a review_decision from a writer is refused: only a reviewer decides",
        rule=_REVIEW_RULE,
        envelope=_env("review_decision", {"decision": "ready"}, sender="writer", key="review:w", mid="REV-4",
                      evidence=("M-102",)),
        task=REVIEW, decision=REJ, code="E_ROLE_NOT_ALLOWED",
    ),
    Case(
        name="a review_decision without evidence_refs is refused",
        rule=_REVIEW_RULE,
        envelope=_env("review_decision", {"decision": "ready"}, sender="reviewer", key="review:e", mid="REV-5"),
        task=REVIEW, decision=REJ, code="E_EVIDENCE_REQUIRED",
    ),
    Case(
        name="a review_decision citing evidence that is not retained is refused",
        rule=_REVIEW_RULE + "; an unretained citation proves nothing",
        envelope=_env("review_decision", {"decision": "ready"}, sender="reviewer", key="review:u", mid="REV-6",
                      evidence=("M-102", "M-404")),
        task=REVIEW, unresolved=frozenset({"M-404"}), decision=REJ, code="E_EVIDENCE_UNRESOLVED",
    ),
    Case(
        name="a review_decision on a running task is an illegal move",
        rule=_MOVE_RULE,
        envelope=_env("review_decision", {"decision": "ready"}, sender="reviewer", key="review:r", mid="REV-7",
                      evidence=("M-102",)),
        task=RUNNING, decision=REJ, code="E_TRANSITION_NOT_ALLOWED",
    ),
    # ---- compare-and-swap on state_version
    Case(
        name="a cancel written against an old state_version is refused as stale",
        rule="writes are compare-and-swap on state_version: reread and merge when it moved",
        envelope=_env("cancel", {"expected_state_version": 1}, sender="manager", recipient="researcher",
                      key="cancel-5", mid="M-119"),
        task=RUNNING, decision=REJ, code="E_STALE_VERSION",
    ),
    Case(
        name="a cancel written against the current state_version is accepted",
        rule="writes are compare-and-swap on state_version",
        envelope=_env("cancel", {"expected_state_version": 2}, sender="manager", recipient="researcher",
                      key="cancel-6", mid="M-123"),
        task=RUNNING, decision=A, to_state=S.CANCELED,
    ),
    Case(
        name="a review_decision written against an old state_version is refused as stale",
        rule="writes are compare-and-swap on state_version",
        envelope=_env("review_decision", {"decision": "ready", "expected_state_version": 3}, sender="reviewer",
                      key="review:T-20:v3", mid="REV-8", evidence=("M-102",)),
        task=REVIEW, decision=REJ, code="E_STALE_VERSION",
    ),
    Case(
        name="a result written against an old state_version is refused as stale",
        rule="writes are compare-and-swap on state_version",
        envelope=_result("succeeded", expected_state_version=1), task=RUNNING, decision=REJ, code="E_STALE_VERSION",
    ),
    # ---- retry
    Case(
        name="a manager's task_request for a retry_wait task makes it ready again",
        rule="retry_wait -> ready when the manager reassigns the task",
        envelope=_env("task_request", {"goal": "collect evidence"}, sender="manager", recipient="researcher",
                      key=f"{TRACE_ID}:{TASK_ID}:attempt-2", mid="M-124"),
        task=RETRY, decision=A, to_state=S.READY,
    ),
    Case(
        name="a writer's task_request for a retry_wait task is refused",
        rule=_MOVE_RULE,
        envelope=_env("task_request", {"goal": "collect evidence"}, sender="writer", recipient="researcher",
                      key="attempt-w", mid="M-125"),
        task=RETRY, decision=REJ, code="E_ROLE_NOT_ALLOWED",
    ),
    Case(
        name="a new task_request for a running task is an illegal move",
        rule=_MOVE_RULE,
        envelope=_env("task_request", {"goal": "again"}, sender="manager", recipient="writer", key="attempt-r",
                      mid="M-126"),
        task=RUNNING, decision=REJ, code="E_TRANSITION_NOT_ALLOWED",
    ),
    Case(
        name="a manager's task_request for a needs_review task is refused: only a reviewer releases it",
        rule=_REVIEW_RULE,
        envelope=_env("task_request", {"goal": "again"}, sender="manager", recipient="researcher", key="attempt-n",
                      mid="M-127"),
        task=REVIEW, decision=REJ, code="E_ROLE_NOT_ALLOWED",
    ),
)


# ---------------------------------------------------------------------------
# the runner


def _state_name(s) -> str:
    return s.value if isinstance(s, TaskState) else repr(s)


def check(decide: DecideFn, case: Case, rules: RuleBook | None = None) -> list[str]:
    """Run ``decide`` on one case; return what is wrong (``[]`` when it passes). Never raises."""
    rules = rules or _RULES
    try:
        v = decide(case.envelope, case.task, case.prior, rules, case.unresolved)
    except Exception as e:  # a crash is a failure to report, not to propagate
        return [f"decide raised {type(e).__name__}: {e}"]
    if not isinstance(v, Verdict):
        return [f"decide returned {type(v).__name__}, not a sim.intake.Verdict"]
    try:
        return _compare(v, case, rules)
    except Exception as e:  # a malformed verdict (e.g. a move that is not a Move)
        return [f"the verdict could not be inspected ({type(e).__name__}: {e}): {v!r}"]


def _compare(v: Verdict, case: Case, rules: RuleBook) -> list[str]:
    fails: list[str] = []
    if not isinstance(v.decision, Decision):
        fails.append(f"verdict.decision is {v.decision!r} ({type(v.decision).__name__}), not a sim.intake.Decision")
    got = v.decision.value if isinstance(v.decision, Decision) else v.decision
    if got != case.decision.value:
        fails.append(
            f"decision: expected {case.decision.value}, got {got}"
            + (f" ({v.code})" if v.code else "")
            + f" -- {v.reason}"
        )
    if case.code is not None and v.code != case.code:
        fails.append(f"code: expected {case.code}, got {v.code}")
    if not isinstance(v.reason, str) or not v.reason.strip():
        fails.append(f"the verdict gives no reason ({v.reason!r}): every decision must say why, in words")

    move = v.move
    if case.to_state is None:
        if move is not None:
            fails.append(
                f"expected no move, got {_state_name(move.from_state)} -> {_state_name(move.to_state)}"
            )
    elif move is None:
        fails.append(f"expected a move to {case.to_state.value}, got no move")
    else:
        if not isinstance(move, Move):
            fails.append(f"verdict.move is a {type(move).__name__}, not a sim.intake.Move")
        if move.to_state != case.to_state:
            fails.append(f"move target: expected {case.to_state.value}, got {_state_name(move.to_state)}")
        start = case.task.state if case.task is not None else TaskState.PENDING
        if move.from_state != start:
            fails.append(f"move starts from {_state_name(move.from_state)}, but the task is {start.value}")
        if case.task is None and not v.create:
            fails.append("a move that creates the task must set create=True")
    if move is not None and isinstance(move, Move):
        if not rules.allows(move.from_state, move.to_state, move.role):
            fails.append(
                f"move {_state_name(move.from_state)} -> {_state_name(move.to_state)} by role {move.role!r} "
                f"is not in {rules.version}'s allowlist"
            )
    if case.lease is not None and v.grant_lease != case.lease:
        fails.append(f"grant_lease: expected {case.lease}, got {v.grant_lease}")

    if got == Decision.DUPLICATE.value and case.decision == Decision.DUPLICATE:
        if v.duplicate_of is None:
            fails.append("a duplicate must name the recorded intent it repeats (duplicate_of)")
        elif v.duplicate_of not in case.prior:
            fails.append(f"duplicate_of {v.duplicate_of.message_id} is not one of the recorded intents")
    if got == Decision.CONFLICT.value and case.decision == Decision.CONFLICT:
        first = min(case.prior, key=lambda p: p.arrival)
        if v.conflict_with is None:
            fails.append("a conflict must name the recorded intent it collides with (conflict_with)")
        elif v.conflict_with != first:
            fails.append(
                f"conflict_with is {v.conflict_with.message_id}; the first recorded payload is {first.message_id}"
            )
    return fails


def run(decide: DecideFn, cases: Iterable[Case] = CASES) -> list[tuple[Case, list[str]]]:
    """Check every case; return ``(case, failures)`` pairs in suite order."""
    return [(c, check(decide, c)) for c in cases]


def report(results: list[tuple[Case, list[str]]]) -> str:
    """A plain-text summary of :func:`run`'s results."""
    lines = []
    failed = [(c, f) for c, f in results if f]
    for c, f in failed:
        lines.append(f"FAIL {c.name}\n     rule: {c.rule}")
        lines.extend(f"     - {msg}" for msg in f)
    lines.append(f"{len(results) - len(failed)}/{len(results)} intake contract cases pass")
    return "\n".join(lines)
