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

from ..envelope import Envelope, build_envelope, role_of
from ..intake import Decision, IntentRecord, Move, TaskView, Verdict
from ..machine import RuleBook, TaskState, default_rulebook

__all__ = ["Case", "CASES", "boundary_cases", "version_spellings", "check", "check_tagged", "run", "report",
           "TASK_ID", "TRACE_ID"]

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
    id: str = ""  # a short stable name (a grader's test lists the cases of its rule by it)
    symptom: str = ""  # what a failure of this case shows: the mistake's tag (see sim.course.judges.intake)
    envelope: Envelope
    task: TaskView | None
    prior: tuple[IntentRecord, ...] = ()
    unresolved: frozenset[str] = frozenset()
    decision: Decision  # expected
    code: str | None = None  # expected code of a rejection (None: not checked)
    to_state: TaskState | None = None  # expected move target; None means "no move allowed"
    lease: int | None = None  # expected grant_lease, checked when not None
    reconcile: bool | None = None  # expected needs_reconciliation of a late verdict, checked when not None
    family: str = ""  # a generated boundary case: the rule whose boundaries it crosses (see boundary_cases)


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
# After a reviewer released a frozen task (needs_review -> ready); a task answered by a person.
RELEASED = _view("ready", 5, holder="researcher", lease=1, budget=4, trusted=False)
RETRY_RESULT = _result("retry", error="source timed out")

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
        id="create-by-manager",
        symptom="legal-move-refused",
        name="a manager's task_request for a new task creates it and moves it pending -> ready",
        rule="only a task_request creates a task; the manager assigns it",
        envelope=REQUEST, task=None, decision=A, to_state=S.READY,
    ),
    Case(
        id="create-by-writer-refused",
        symptom="wrong-role-moved",
        name="a writer's task_request for a new task is refused: only a manager assigns tasks",
        rule=_MOVE_RULE,
        envelope=_env("task_request", {"goal": "x"}, sender="writer", recipient="researcher", key="w:1", mid="M-190"),
        task=None, decision=REJ, code="E_ROLE_NOT_ALLOWED",
    ),
    Case(
        id="unknown-task-started",
        symptom="unknown-task-accepted",
        name="a task_started for a task that does not exist is refused as unknown",
        rule="only a task_request creates a task; any other message needs an existing task",
        envelope=STARTED, task=None, decision=REJ, code="E_UNKNOWN_TASK",
    ),
    Case(
        id="unknown-task-result",
        symptom="unknown-task-accepted",
        name="a task_result for a task that does not exist is refused as unknown",
        rule="only a task_request creates a task; any other message needs an existing task",
        envelope=SUCCEEDED, task=None, decision=REJ, code="E_UNKNOWN_TASK",
    ),
    Case(
        id="unknown-task-ack",
        symptom="unknown-task-accepted",
        name="an ack for a task that does not exist is refused as unknown",
        rule="only a task_request creates a task; any other message needs an existing task",
        envelope=ACK, task=None, decision=REJ, code="E_UNKNOWN_TASK",
    ),
    # ---- starting: assignee, lease, budget
    Case(
        id="start-by-assignee",
        symptom="holder-refused",
        name="task_started from the assignee moves ready -> running and grants lease 1",
        rule="the assignee starts the task and takes the next lease (lease_version + 1), spending budget",
        envelope=STARTED, task=READY, decision=A, to_state=S.RUNNING, lease=1,
    ),
    Case(
        id="start-without-asked-lease",
        symptom="holder-refused",
        name="task_started without an asked lease_version still gets the next lease",
        rule="the assignee starts the task and takes the next lease (lease_version + 1)",
        envelope=_env("task_started", {}, sender="researcher", key=K_START, mid="M-101"),
        task=READY, decision=A, to_state=S.RUNNING, lease=1,
    ),
    Case(
        id="start-after-retry-next-lease",
        symptom="holder-refused",
        name="task_started after a retry grants lease_version + 1, not 1",
        rule="leases are fenced: each attempt gets a strictly larger lease_version",
        envelope=_env("task_started", {"lease_version": 2}, sender="researcher", key="start-2", mid="M-120"),
        task=READY_AGAIN, decision=A, to_state=S.RUNNING, lease=2,
    ),
    Case(
        id="start-by-non-assignee",
        symptom="non-assignee-started",
        name="task_started from a worker that is not the assignee is refused",
        rule="only the assignee may start the task",
        envelope=_env("task_started", {"lease_version": 1}, sender="writer", key="start-w", mid="M-104"),
        task=READY, decision=REJ, code="E_NOT_ASSIGNEE",
    ),
    Case(
        id="start-asks-stale-lease",
        symptom="stale-lease-accepted",
        name="task_started asking for a lease_version other than the next one is refused as a stale lease",
        rule="a worker that read an old lease must reread before it starts",
        envelope=_env("task_started", {"lease_version": 1}, sender="researcher", key="start-2", mid="M-120"),
        task=READY_AGAIN, decision=REJ, code="E_STALE_LEASE",
    ),
    Case(
        id="start-without-budget",
        symptom="budget-ignored",
        name="task_started with no budget left is refused",
        rule="budget usage comes from the runtime's record: no budget, no new attempt",
        envelope=STARTED, task=_view("ready", 1, budget=0), decision=REJ, code="E_BUDGET_EXHAUSTED",
    ),
    Case(
        id="start-last-budget",
        symptom="holder-refused",
        name="the last unit of budget still pays for an attempt",
        rule="budget usage comes from the runtime's record: no budget, no new attempt",
        envelope=STARTED, task=_view("ready", 1, budget=1), decision=A, to_state=S.RUNNING, lease=1,
    ),
    Case(
        id="schema-unknown-on-create",
        symptom="unknown-schema-accepted",
        name="a schema version this runtime does not speak is refused before anything is read",
        rule="a message in an unknown schema_version is refused, never guessed at",
        envelope=_replace_env(REQUEST, schema_version="9"), task=None, decision=REJ, code="E_SCHEMA_VERSION",
    ),
    Case(
        id="fence-names-a-task",
        symptom="fence-accepted",
        name="a fence naming a task instead of its conversation is refused",
        rule="a terminal fence closes the whole conversation: its task_id is its trace_id",
        envelope=_env("fence", {"to": ["researcher"], "terminal": "COMPLETED"}, sender="manager", recipient="researcher",
                      key="fence-1", mid="M-150"),
        task=RUNNING, decision=REJ, code="E_FENCE_SCOPE",
    ),
    Case(
        id="start-while-running",
        symptom="illegal-move-made",
        name="task_started on a task that is already running is an illegal move",
        rule=_MOVE_RULE,
        envelope=_env("task_started", {}, sender="researcher", key="start-again", mid="M-105"),
        task=RUNNING, decision=REJ, code="E_TRANSITION_NOT_ALLOWED",
    ),
    # ---- results under the current lease
    Case(
        id="result-succeeded",
        symptom="holder-refused",
        name="a succeeded result from the lease holder with the current lease moves running -> succeeded",
        rule=_LEASE_RULE,
        envelope=SUCCEEDED, task=RUNNING, decision=A, to_state=S.SUCCEEDED,
    ),
    Case(
        id="success-without-evidence",
        symptom="success-without-evidence",
        name="a succeeded result that cites no evidence is refused: a conclusion without its evidence is lost evidence",
        rule=_EVIDENCE_RULE,
        envelope=_result("succeeded", summary="3 sources, trust me", evidence=(), mid="M-102p"),
        task=RUNNING, decision=REJ, code="E_EVIDENCE_REQUIRED",
    ),
    Case(
        id="failure-needs-no-evidence",
        symptom="evidence-over-demanded",
        name="a failed result needs no evidence: it states no findings",
        rule=_EVIDENCE_RULE,
        envelope=_result("failed", error="source unreachable", mid="M-102f"),
        task=RUNNING, decision=A, to_state=S.FAILED,
    ),
    Case(
        id="result-failed",
        symptom="holder-refused",
        name="a failed result from the lease holder with the current lease moves running -> failed",
        rule=_LEASE_RULE,
        envelope=_result("failed"), task=RUNNING, decision=A, to_state=S.FAILED,
    ),
    Case(
        id="result-denied",
        symptom="holder-refused",
        name="a denied result from the lease holder with the current lease moves running -> denied",
        rule=_LEASE_RULE,
        envelope=_result("denied"), task=RUNNING, decision=A, to_state=S.DENIED,
    ),
    Case(
        id="result-waiting-human",
        symptom="holder-refused",
        name="a waiting_human result from the lease holder moves running -> waiting_human",
        rule=_LEASE_RULE,
        envelope=_result("waiting_human"), task=RUNNING, decision=A, to_state=S.WAITING_HUMAN,
    ),
    Case(
        id="result-retry",
        symptom="holder-refused",
        name="a retry result from the lease holder moves running -> retry_wait",
        rule=_LEASE_RULE,
        envelope=_result("retry"), task=RUNNING, decision=A, to_state=S.RETRY_WAIT,
    ),
    Case(
        id="result-second-lease",
        symptom="holder-refused",
        name="a result under the second lease from its holder succeeds",
        rule=_LEASE_RULE,
        envelope=_result("succeeded", 2, key="result-2", mid="M-121"),
        task=RUNNING_L2_SAME, decision=A, to_state=S.SUCCEEDED,
    ),
    Case(
        id="zombie-old-lease",
        symptom="stale-lease-accepted",
        name="a zombie result carrying the old lease_version after recovery is refused as a stale lease",
        rule=_LEASE_RULE + " (a fenced, stale worker cannot commit)",
        envelope=_result("succeeded", 1), task=RUNNING_L2_SAME, decision=REJ, code="E_STALE_LEASE",
    ),
    Case(
        id="result-future-lease",
        symptom="stale-lease-accepted",
        name="a result naming a future lease_version is refused as a stale lease",
        rule=_LEASE_RULE,
        envelope=_result("succeeded", 2), task=RUNNING, decision=REJ, code="E_STALE_LEASE",
    ),
    Case(
        id="result-not-holder",
        symptom="wrong-holder-accepted",
        name="a result from a worker that does not hold the lease is refused",
        rule=_LEASE_RULE,
        envelope=_result("succeeded", 1, sender="writer"), task=RUNNING, decision=REJ, code="E_NOT_LEASE_HOLDER",
    ),
    Case(
        id="zombie-old-holder",
        symptom="wrong-holder-accepted",
        name="a zombie result from the previous lease holder after the task moved to another worker is refused",
        rule=_LEASE_RULE,
        envelope=_result("succeeded", 1), task=RUNNING_L2_WRITER, decision=REJ, code="E_NOT_LEASE_HOLDER",
    ),
    Case(
        id="result-on-ready",
        symptom="illegal-move-made",
        name="a result for a task that is ready again (not running) is an illegal move",
        rule=_MOVE_RULE,
        envelope=_result("succeeded", 1, key="result-r", mid="M-122"), task=READY_AGAIN,
        decision=REJ, code="E_TRANSITION_NOT_ALLOWED",
    ),
    # ---- duplicates
    Case(
        id="dup-exact-result",
        name="same key and same digest is a duplicate that reuses the stored result",
        rule=_DUP_RULE,
        envelope=SUCCEEDED, task=DONE, prior=(_intent(SUCCEEDED, 3, "succeeded", 3),), decision=DUP,
    ),
    Case(
        id="dup-jcs-after-sorted",
        name="the same payload digested under jcs-v2 after json-sorted-v1 is still a duplicate",
        rule=_DUP_RULE + "; digests under different schemes are compared by re-digesting under one scheme",
        envelope=SUCCEEDED_JCS, task=DONE, prior=(_intent(SUCCEEDED, 3, "succeeded", 3),), decision=DUP,
    ),
    Case(
        id="dup-sorted-after-jcs",
        name="the same payload digested under json-sorted-v1 after jcs-v2 is still a duplicate",
        rule=_DUP_RULE + "; digests under different schemes are compared by re-digesting under one scheme",
        envelope=SUCCEEDED, task=DONE, prior=(_intent(SUCCEEDED_JCS, 3, "succeeded", 3),), decision=DUP,
    ),
    Case(
        id="dup-scheme-strings-differ-jcs",
        name="a payload whose schemes write different digest strings is still one intent (jcs-v2 after json-sorted-v1)",
        rule=_DUP_RULE + "; digests under different schemes are compared by re-digesting under one scheme",
        envelope=SCORED_JCS, task=DONE, prior=(_intent(SCORED, 3, "succeeded", 3),), decision=DUP,
    ),
    Case(
        id="dup-scheme-strings-differ-sorted",
        name="a payload whose schemes write different digest strings is still one intent (json-sorted-v1 after jcs-v2)",
        rule=_DUP_RULE + "; digests under different schemes are compared by re-digesting under one scheme",
        envelope=SCORED, task=DONE, prior=(_intent(SCORED_JCS, 3, "succeeded", 3),), decision=DUP,
    ),
    Case(
        id="conflict-one-vs-one-point-zero",
        name="1 and 1.0 are one number under jcs-v2 but two under json-sorted-v1: the same key with them is a conflict",
        rule=_CONFLICT_RULE + "; payloads are one intent only if each scheme agrees",
        envelope=SCORED_INT_JCS, task=DONE, prior=(_intent(SCORED, 3, "succeeded", 3),), decision=CON,
        to_state=S.NEEDS_REVIEW,
    ),
    Case(
        id="dup-exact-started",
        name="a redelivered task_started while the task is running is a duplicate: no second lease, no move",
        rule=_DUP_RULE,
        envelope=STARTED, task=RUNNING, prior=(_intent(STARTED, 2, "running", 2),), decision=DUP,
    ),
    Case(
        id="dup-exact-result-terminal",
        name="a duplicate of a result for a task that is now terminal is a duplicate, not late",
        rule=_DUP_RULE + "; the key check comes before the terminal check",
        envelope=_result("failed"), task=FAILED, prior=(_intent(_result("failed"), 3, "failed", 3),), decision=DUP,
    ),
    Case(
        id="dup-exact-request",
        name="a redelivered task_request for an existing task is a duplicate, not a second creation",
        rule=_DUP_RULE,
        envelope=REQUEST, task=RUNNING, prior=(_intent(REQUEST, 1, "ready", 1),), decision=DUP,
    ),
    Case(
        id="dup-second-payload-of-conflict",
        name="after a conflict, redelivering the second payload is a duplicate of it",
        rule=_DUP_RULE + "; both payloads of a conflict are recorded intents",
        envelope=_result("failed", mid="M-102b2"), task=REVIEW,
        prior=(_intent(SUCCEEDED, 3, "succeeded", 3), _intent(_result("failed", mid="M-102b2"), 4, "needs_review", 4)),
        decision=DUP,
    ),
    # ---- conflicts
    Case(
        id="conflict-started-running",
        name="same key with a different digest while running is a conflict that freezes the task in needs_review",
        rule=_CONFLICT_RULE,
        envelope=_env("task_started", {"lease_version": 1, "note": "second worker"}, sender="researcher",
                      key=K_START, mid="M-128"),
        task=RUNNING, prior=(_intent(STARTED, 2, "running", 2),), decision=CON, to_state=S.NEEDS_REVIEW,
    ),
    Case(
        id="conflict-result-succeeded",
        name="same key with a different digest on a succeeded task escalates it to needs_review",
        rule=_CONFLICT_RULE + "; the only way out of a terminal state is to needs_review",
        envelope=_result("failed"), task=DONE,
        prior=(_intent(SUCCEEDED, 3, "succeeded", 3),), decision=CON, to_state=S.NEEDS_REVIEW,
    ),
    Case(
        id="conflict-ignores-lease",
        name="a conflict ignores the lease: a wrong-lease payload under a recorded key still freezes the task",
        rule=_CONFLICT_RULE + "; the key check comes before lease checks",
        envelope=_result("failed", 7), task=DONE,
        prior=(_intent(SUCCEEDED, 3, "succeeded", 3),), decision=CON, to_state=S.NEEDS_REVIEW,
    ),
    Case(
        id="conflict-on-frozen-task",
        name="a conflict on a task already in needs_review is recorded without a move",
        rule=_CONFLICT_RULE + "; a frozen task stays frozen",
        envelope=_result("denied"), task=REVIEW,
        prior=(_intent(SUCCEEDED, 3, "succeeded", 3), _intent(_result("failed", mid="M-102b2"), 4, "needs_review", 4)),
        decision=CON,
    ),
    Case(
        id="conflict-request",
        name="a conflicting task_request under the creating key freezes the task",
        rule=_CONFLICT_RULE,
        envelope=_env("task_request", {"goal": "something else"}, sender="manager", recipient="researcher",
                      key=K_REQUEST, mid="M-106"),
        task=RUNNING, prior=(_intent(REQUEST, 1, "ready", 1),), decision=CON, to_state=S.NEEDS_REVIEW,
    ),
    # ---- late
    Case(
        id="late-second-success",
        name="a second succeeded result under a new key for a succeeded task is late and moves nothing",
        rule=_LATE_RULE,
        envelope=_result("succeeded", key="result-1b", mid="M-107"), task=DONE, decision=LATE, reconcile=True,
    ),
    Case(
        id="late-failure-after-success",
        name="a late failed result after success does not overwrite succeeded",
        rule=_LATE_RULE,
        envelope=_result("failed", key="result-1c", mid="M-108"), task=DONE, decision=LATE, reconcile=True,
    ),
    Case(
        id="late-result-failed-task",
        name="a new result for a failed task is late",
        rule=_LATE_RULE,
        envelope=_result("succeeded", key="result-1d", mid="M-109"), task=FAILED, decision=LATE, reconcile=False,
    ),
    Case(
        id="late-result-denied-task",
        name="a new result for a denied task is late",
        rule=_LATE_RULE,
        envelope=_result("succeeded", key="result-1e", mid="M-110"), task=DENIED, decision=LATE, reconcile=False,
    ),
    Case(
        id="late-result-canceled-task",
        name="a result arriving after the task was canceled is late",
        rule=_LATE_RULE,
        envelope=_result("succeeded", key="result-1f", mid="M-111"), task=CANCELED, decision=LATE, reconcile=False,
    ),
    Case(
        id="late-start-canceled-task",
        name="a task_started arriving after the task was canceled is late, not a restart",
        rule=_LATE_RULE,
        envelope=_env("task_started", {}, sender="researcher", key="start-late", mid="M-112"),
        task=CANCELED, decision=LATE, reconcile=False,
    ),
    Case(
        id="late-cancel-succeeded-task",
        name="a cancel for a succeeded task is late, not a regression",
        rule=_LATE_RULE,
        envelope=_env("cancel", {"reason": "too slow"}, sender="manager", recipient="researcher",
                      key="cancel-late", mid="M-113"),
        task=DONE, decision=LATE, reconcile=False,
    ),
    # ---- acks
    Case(
        id="ack-running",
        symptom="ack-refused",
        name="an ack on a running task is accepted and moves nothing",
        rule="a delivery acknowledgment is a receipt, not progress: it never changes task state",
        envelope=ACK, task=RUNNING, decision=A,
    ),
    Case(
        id="ack-succeeded",
        symptom="ack-refused",
        name="an ack with a new key on a succeeded task is accepted, not late, and moves nothing",
        rule="a delivery acknowledgment is a receipt, not progress: acks follow completion and are never late",
        envelope=ACK, task=DONE, decision=A,
    ),
    Case(
        id="ack-canceled",
        symptom="ack-refused",
        name="an ack on a canceled task is accepted and moves nothing",
        rule="a delivery acknowledgment is a receipt, not progress",
        envelope=_env("ack", {}, sender="researcher", key="ack-c", mid="M-114"), task=CANCELED, decision=A,
    ),
    Case(
        id="dup-exact-ack",
        name="a redelivered ack is a duplicate",
        rule=_DUP_RULE,
        envelope=ACK, task=DONE, prior=(_intent(ACK, 5, "succeeded", 3),), decision=DUP,
    ),
    # ---- cancel
    Case(
        id="cancel-running",
        symptom="legal-move-refused",
        name="a manager's cancel of a running task moves it to canceled",
        rule="any nonterminal state -> canceled, by a manager or reviewer",
        envelope=_env("cancel", {"reason": "no longer needed"}, sender="manager", recipient="researcher",
                      key="cancel-1", mid="M-115"),
        task=RUNNING, decision=A, to_state=S.CANCELED,
    ),
    Case(
        id="cancel-retry-wait",
        symptom="legal-move-refused",
        name="a manager's cancel of a retry_wait task moves it to canceled",
        rule="any nonterminal state -> canceled, by a manager or reviewer",
        envelope=_env("cancel", {}, sender="manager", recipient="researcher", key="cancel-2", mid="M-116"),
        task=RETRY, decision=A, to_state=S.CANCELED,
    ),
    Case(
        id="cancel-frozen-by-manager",
        symptom="non-reviewer-released",
        name="a manager's cancel of a needs_review task is refused: only a reviewer decides frozen tasks",
        rule=_REVIEW_RULE,
        envelope=_env("cancel", {}, sender="manager", recipient="researcher", key="cancel-3", mid="M-117"),
        task=REVIEW, decision=REJ, code="E_ROLE_NOT_ALLOWED",
    ),
    Case(
        id="cancel-by-worker",
        symptom="wrong-role-moved",
        name="a worker's cancel of its own running task is refused",
        rule=_MOVE_RULE,
        envelope=_env("cancel", {}, sender="researcher", key="cancel-4", mid="M-118"),
        task=RUNNING, decision=REJ, code="E_ROLE_NOT_ALLOWED",
    ),
    # ---- review decisions
    Case(
        id="review-release",
        symptom="review-refused",
        name="a reviewer's review_decision citing retained evidence releases needs_review -> ready",
        rule=_REVIEW_RULE,
        envelope=_env("review_decision", {"decision": "ready", "expected_state_version": 4}, sender="reviewer",
                      key="review:T-20:v4", mid="REV-1", evidence=("M-102",)),
        task=REVIEW, decision=A, to_state=S.READY,
    ),
    Case(
        id="review-cancel",
        symptom="review-refused",
        name="a reviewer's review_decision citing retained evidence cancels a needs_review task",
        rule=_REVIEW_RULE,
        envelope=_env("review_decision", {"decision": "canceled"}, sender="reviewer", key="review:T-20:v4",
                      mid="REV-2", evidence=("M-102", "sha256:" + "a" * 64)),
        task=REVIEW, decision=A, to_state=S.CANCELED,
    ),
    Case(
        id="review-on-waiting-human",
        symptom="illegal-move-made",
        name="a reviewer's review_decision on a waiting_human task is refused: the seed's table (task-v1) leaves "
             "waiting_human only by a cancel or a freeze",
        rule="the allowlist: waiting_human -> ready is no move of the seed's (a kit row, in task-v2 only)",
        envelope=_env("review_decision", {"decision": "ready"}, sender="reviewer", key="review:wh", mid="REV-3",
                      evidence=("M-102",)),
        task=WAITING, decision=REJ, code="E_TRANSITION_NOT_ALLOWED",
    ),
    Case(
        id="review-by-writer",
        symptom="non-reviewer-released",
        name="a review_decision from a writer is refused: only a reviewer decides",
        rule=_REVIEW_RULE,
        envelope=_env("review_decision", {"decision": "ready"}, sender="writer", key="review:w", mid="REV-4",
                      evidence=("M-102",)),
        task=REVIEW, decision=REJ, code="E_ROLE_NOT_ALLOWED",
    ),
    Case(
        id="review-without-evidence",
        symptom="review-without-evidence",
        name="a review_decision without evidence_refs is refused",
        rule=_REVIEW_RULE,
        envelope=_env("review_decision", {"decision": "ready"}, sender="reviewer", key="review:e", mid="REV-5"),
        task=REVIEW, decision=REJ, code="E_EVIDENCE_REQUIRED",
    ),
    Case(
        id="review-unretained-evidence",
        symptom="unretained-evidence-accepted",
        name="a review_decision citing evidence that is not retained is refused",
        rule=_REVIEW_RULE + "; an unretained citation proves nothing",
        envelope=_env("review_decision", {"decision": "ready"}, sender="reviewer", key="review:u", mid="REV-6",
                      evidence=("M-102", "M-404")),
        task=REVIEW, unresolved=frozenset({"M-404"}), decision=REJ, code="E_EVIDENCE_UNRESOLVED",
    ),
    Case(
        id="review-on-running",
        symptom="illegal-move-made",
        name="a review_decision on a running task is an illegal move",
        rule=_MOVE_RULE,
        envelope=_env("review_decision", {"decision": "ready"}, sender="reviewer", key="review:r", mid="REV-7",
                      evidence=("M-102",)),
        task=RUNNING, decision=REJ, code="E_TRANSITION_NOT_ALLOWED",
    ),
    # ---- compare-and-swap on state_version
    Case(
        id="cas-stale-cancel",
        symptom="stale-version-accepted",
        name="a cancel written against an old state_version is refused as stale",
        rule="writes are compare-and-swap on state_version: reread and merge when it moved",
        envelope=_env("cancel", {"expected_state_version": 1}, sender="manager", recipient="researcher",
                      key="cancel-5", mid="M-119"),
        task=RUNNING, decision=REJ, code="E_STALE_VERSION",
    ),
    Case(
        id="cas-current-cancel",
        symptom="current-version-refused",
        name="a cancel written against the current state_version is accepted",
        rule="writes are compare-and-swap on state_version",
        envelope=_env("cancel", {"expected_state_version": 2}, sender="manager", recipient="researcher",
                      key="cancel-6", mid="M-123"),
        task=RUNNING, decision=A, to_state=S.CANCELED,
    ),
    Case(
        id="cas-stale-review",
        symptom="stale-version-accepted",
        name="a review_decision written against an old state_version is refused as stale",
        rule="writes are compare-and-swap on state_version",
        envelope=_env("review_decision", {"decision": "ready", "expected_state_version": 3}, sender="reviewer",
                      key="review:T-20:v3", mid="REV-8", evidence=("M-102",)),
        task=REVIEW, decision=REJ, code="E_STALE_VERSION",
    ),
    Case(
        id="cas-stale-result",
        symptom="stale-version-accepted",
        name="a result written against an old state_version is refused as stale",
        rule="writes are compare-and-swap on state_version",
        envelope=_result("succeeded", expected_state_version=1), task=RUNNING, decision=REJ, code="E_STALE_VERSION",
    ),
    # ---- retry
    Case(
        id="request-retry-wait",
        symptom="legal-move-refused",
        name="a manager's task_request for a retry_wait task makes it ready again",
        rule="retry_wait -> ready when the manager reassigns the task",
        envelope=_env("task_request", {"goal": "collect evidence"}, sender="manager", recipient="researcher",
                      key=f"{TRACE_ID}:{TASK_ID}:attempt-2", mid="M-124"),
        task=RETRY, decision=A, to_state=S.READY,
    ),
    Case(
        id="request-retry-by-writer",
        symptom="wrong-role-moved",
        name="a writer's task_request for a retry_wait task is refused",
        rule=_MOVE_RULE,
        envelope=_env("task_request", {"goal": "collect evidence"}, sender="writer", recipient="researcher",
                      key="attempt-w", mid="M-125"),
        task=RETRY, decision=REJ, code="E_ROLE_NOT_ALLOWED",
    ),
    Case(
        id="request-running",
        symptom="illegal-move-made",
        name="a new task_request for a running task is an illegal move",
        rule=_MOVE_RULE,
        envelope=_env("task_request", {"goal": "again"}, sender="manager", recipient="writer", key="attempt-r",
                      mid="M-126"),
        task=RUNNING, decision=REJ, code="E_TRANSITION_NOT_ALLOWED",
    ),
    Case(
        id="request-frozen-by-manager",
        symptom="non-reviewer-released",
        name="a manager's task_request for a needs_review task is refused: only a reviewer releases it",
        rule=_REVIEW_RULE,
        envelope=_env("task_request", {"goal": "again"}, sender="manager", recipient="researcher", key="attempt-n",
                      mid="M-127"),
        task=REVIEW, decision=REJ, code="E_ROLE_NOT_ALLOWED",
    ),
    # ---- added for the grader (issue 25): minimal pairs that tell the common mistakes apart.
    # The same key and payload under a NEW message id (a resend) beside the very same message again
    # (an exact copy): deduplicating by message id passes the second and fails the first.
    Case(
        id="dup-resend-result",
        name="the same result resent under a new message id (same key, same payload) is a duplicate, not a new result",
        rule=_DUP_RULE + "; a message id names a message, the key names the intent",
        envelope=_result("succeeded", summary="3 sources", effect={"kind": "publish", "target": "R-1"}, mid="M-102r"),
        task=DONE, prior=(_intent(SUCCEEDED, 3, "succeeded", 3),), decision=DUP,
    ),
    Case(
        id="dup-resend-started",
        name="a task_started resent under a new message id while running is a duplicate: no second lease, no move",
        rule=_DUP_RULE + "; a message id names a message, the key names the intent",
        envelope=_env("task_started", {"lease_version": 1}, sender="researcher", key=K_START, mid="M-101r"),
        task=RUNNING, prior=(_intent(STARTED, 2, "running", 2),), decision=DUP,
    ),
    Case(
        id="dup-resend-request",
        name="a task_request resent under a new message id is a duplicate, not a second assignment",
        rule=_DUP_RULE + "; a message id names a message, the key names the intent",
        envelope=_env("task_request", {"goal": "collect evidence"}, sender="manager", recipient="researcher",
                      key=K_REQUEST, mid="M-100r"),
        task=READY, prior=(_intent(REQUEST, 1, "ready", 1),), decision=DUP,
    ),
    Case(
        id="dup-resend-ack",
        name="an ack resent under a new message id is a duplicate receipt",
        rule=_DUP_RULE + "; a message id names a message, the key names the intent",
        envelope=_env("ack", {"of": "M-102"}, sender="manager", recipient="researcher", key=K_ACK, mid="M-103r"),
        task=DONE, prior=(_intent(ACK, 5, "succeeded", 3),), decision=DUP,
    ),
    Case(
        id="dup-resend-retry",
        name="a retry result resent under a new message id while the task waits to retry is a duplicate",
        rule=_DUP_RULE + "; a message id names a message, the key names the intent",
        envelope=_result("retry", error="source timed out", mid="M-102r"),
        task=RETRY, prior=(_intent(RETRY_RESULT, 3, "retry_wait", 3),), decision=DUP,
    ),
    Case(
        id="dup-exact-retry",
        name="the very same retry result delivered again while the task waits to retry is a duplicate",
        rule=_DUP_RULE,
        envelope=RETRY_RESULT, task=RETRY, prior=(_intent(RETRY_RESULT, 3, "retry_wait", 3),), decision=DUP,
    ),
    Case(
        id="dup-exact-old-lease",
        name="a redelivered result of an earlier lease is a duplicate (the key is looked up before the lease)",
        rule=_DUP_RULE + "; the key check comes before the lease checks",
        envelope=RETRY_RESULT, task=RUNNING_L2_SAME, prior=(_intent(RETRY_RESULT, 3, "retry_wait", 3),), decision=DUP,
    ),
    Case(
        id="dup-exact-cancel-terminal",
        name="a redelivered cancel of a canceled task is a duplicate, not late",
        rule=_DUP_RULE + "; the key check comes before the terminal check",
        envelope=_env("cancel", {"reason": "no longer needed"}, sender="manager", recipient="researcher",
                      key="cancel-1", mid="M-115"),
        task=CANCELED,
        prior=(_intent(_env("cancel", {"reason": "no longer needed"}, sender="manager", recipient="researcher",
                            key="cancel-1", mid="M-115"), 3, "canceled", 3),),
        decision=DUP,
    ),
    Case(
        id="dup-resend-cross-scheme-running",
        name="a task_started resent under jcs-v2 after json-sorted-v1 while running is a duplicate",
        rule=_DUP_RULE + "; digests under different schemes are compared by re-digesting under one scheme",
        envelope=_env("task_started", {"lease_version": 1}, sender="researcher", key=K_START, mid="M-101j", scheme="jcs-v2"),
        task=RUNNING, prior=(_intent(STARTED, 2, "running", 2),), decision=DUP,
    ),
    # ---- conflicts where the second payload, judged as a new intent, would be applied or refused
    Case(
        id="conflict-receipt",
        name="two different receipts under one ack key are a conflict that freezes the task",
        rule=_CONFLICT_RULE + "; a conflicting receipt is a conflict too",
        envelope=_env("ack", {"of": "M-104"}, sender="manager", recipient="researcher", key=K_ACK, mid="M-103c"),
        task=DONE, prior=(_intent(ACK, 5, "succeeded", 3),), decision=CON, to_state=S.NEEDS_REVIEW,
    ),
    Case(
        id="conflict-review-decision",
        name="a second review_decision under the key of an applied one, deciding otherwise, freezes the task again",
        rule=_CONFLICT_RULE + "; never last-write-wins",
        envelope=_env("review_decision", {"decision": "canceled", "expected_state_version": 4}, sender="reviewer",
                      key="review:T-20:v4", mid="REV-9", evidence=("M-102",)),
        task=RELEASED,
        prior=(_intent(_env("review_decision", {"decision": "ready", "expected_state_version": 4}, sender="reviewer",
                            key="review:T-20:v4", mid="REV-1", evidence=("M-102",)), 6, "ready", 5),),
        decision=CON, to_state=S.NEEDS_REVIEW,
    ),
    Case(
        id="conflict-retry-result",
        name="a second retry result under the same key with another error freezes the task waiting to retry",
        rule=_CONFLICT_RULE,
        envelope=_result("retry", error="quota exceeded", mid="M-102x"),
        task=RETRY, prior=(_intent(RETRY_RESULT, 3, "retry_wait", 3),), decision=CON, to_state=S.NEEDS_REVIEW,
    ),
    Case(
        id="conflict-denied-result",
        name="a denied result under a recorded key with another reason freezes the denied task",
        rule=_CONFLICT_RULE + "; the only way out of a terminal state is to needs_review",
        envelope=_result("denied", error="policy P-2", mid="M-102y"),
        task=DENIED, prior=(_intent(_result("denied", error="policy P-1"), 3, "denied", 3),), decision=CON,
        to_state=S.NEEDS_REVIEW,
    ),
    Case(
        id="conflict-request-ready",
        name="a second task_request under the creating key with another goal freezes a ready task",
        rule=_CONFLICT_RULE,
        envelope=_env("task_request", {"goal": "collect other evidence"}, sender="manager", recipient="researcher",
                      key=K_REQUEST, mid="M-106b"),
        task=READY, prior=(_intent(REQUEST, 1, "ready", 1),), decision=CON, to_state=S.NEEDS_REVIEW,
    ),
    Case(
        id="conflict-cross-scheme",
        name="another payload under another digest scheme is still a conflict, not a new intent",
        rule=_CONFLICT_RULE + "; payloads are one intent only if each scheme agrees",
        envelope=_result("succeeded", summary="4 sources", effect={"kind": "publish", "target": "R-1"}, scheme="jcs-v2",
                         mid="M-102d"),
        task=DONE, prior=(_intent(SUCCEEDED, 3, "succeeded", 3),), decision=CON, to_state=S.NEEDS_REVIEW,
    ),
    Case(
        id="conflict-one-point-zero-after-one",
        name="1.0 under json-sorted-v1 after 1 under jcs-v2 is a conflict too: the answer does not depend on which "
             "arrived first",
        rule=_CONFLICT_RULE + "; payloads are one intent only if each scheme agrees",
        envelope=_result("succeeded", summary="3 sources", score=1.0, effect={"kind": "publish", "target": "R-1"},
                         mid="M-102e"),
        task=DONE, prior=(_intent(SCORED_INT_JCS, 3, "succeeded", 3),), decision=CON, to_state=S.NEEDS_REVIEW,
    ),
    Case(
        id="conflict-undigestible-prior",
        name="a recorded payload the incoming scheme cannot digest is not the incoming payload: a conflict",
        rule=_CONFLICT_RULE + "; a payload one scheme cannot write is no proof of sameness",
        envelope=_result("succeeded", summary="3 sources", rows=2 ** 52, scheme="jcs-v2", mid="M-102g"),
        task=DONE, prior=(_intent(_result("succeeded", summary="3 sources", rows=2 ** 60), 3, "succeeded", 3),),
        decision=CON, to_state=S.NEEDS_REVIEW,
    ),
    Case(
        id="conflict-names-first-arrival",
        name="a third payload under a key names the payload that arrived first, whatever the message ids say",
        rule=_CONFLICT_RULE + "; both payloads are kept in arrival order",
        envelope=_result("denied", key="result-3p", mid="M-160"), task=REVIEW,
        prior=(_intent(_result("failed", key="result-3p", mid="M-109a"), 5, "needs_review", 4),
               _intent(_result("succeeded", key="result-3p", mid="M-201"), 4, "succeeded", 3)),
        decision=CON,
    ),
    # ---- late results
    Case(
        id="late-request-succeeded",
        name="a new task_request for a succeeded task is late, not a reassignment",
        rule=_LATE_RULE,
        envelope=_env("task_request", {"goal": "collect evidence"}, sender="manager", recipient="researcher",
                      key=f"{TRACE_ID}:{TASK_ID}:attempt-9", mid="M-130"),
        task=DONE, decision=LATE, reconcile=False,
    ),
    Case(
        id="late-start-succeeded",
        name="a task_started for a succeeded task is late, not a restart",
        rule=_LATE_RULE,
        envelope=_env("task_started", {"lease_version": 2}, sender="researcher", key="start-9", mid="M-131"),
        task=DONE, decision=LATE, reconcile=False,
    ),
    Case(
        id="late-review-canceled",
        name="a reviewer's decision for a canceled task is late, not a release",
        rule=_LATE_RULE,
        envelope=_env("review_decision", {"decision": "ready"}, sender="reviewer", key="review:late", mid="REV-10",
                      evidence=("M-102",)),
        task=CANCELED, decision=LATE, reconcile=False,
    ),
    Case(
        id="late-retry-denied",
        name="a late retry result for a denied task moves nothing",
        rule=_LATE_RULE,
        envelope=_result("retry", key="result-1g", mid="M-132"), task=DENIED, decision=LATE, reconcile=False,
    ),
    # ---- acknowledgements
    Case(
        id="ack-ready",
        name="an ack on a ready task is accepted and moves nothing",
        rule="a delivery acknowledgment is a receipt, not progress: it never changes task state",
        symptom="ack-refused",
        envelope=_env("ack", {"of": "M-100"}, sender="researcher", key="ack-r", mid="M-133"), task=READY, decision=A,
    ),
    Case(
        id="ack-failed",
        name="an ack with a new key on a failed task is accepted, not late",
        rule="a delivery acknowledgment is a receipt, not progress: acks follow completion and are never late",
        symptom="ack-refused",
        envelope=_env("ack", {"of": "M-102"}, sender="manager", recipient="researcher", key="ack-f", mid="M-134"),
        task=FAILED, decision=A,
    ),
    Case(
        id="ack-frozen",
        name="an ack on a task frozen in needs_review is accepted and moves nothing",
        rule="a delivery acknowledgment is a receipt, not progress: it never changes task state",
        symptom="ack-refused",
        envelope=_env("ack", {"of": "M-102"}, sender="manager", recipient="researcher", key="ack-n", mid="M-135"),
        task=REVIEW, decision=A,
    ),
    Case(
        id="ack-waiting-human",
        name="an ack on a task waiting for a person is accepted and moves nothing",
        rule="a delivery acknowledgment is a receipt, not progress: it never changes task state",
        symptom="ack-refused",
        envelope=_env("ack", {"of": "M-102"}, sender="manager", recipient="researcher", key="ack-w", mid="M-136"),
        task=WAITING, decision=A,
    ),
    # ---- leases
    Case(
        id="result-new-holder",
        name="the new holder's result under the second lease commits",
        rule=_LEASE_RULE,
        symptom="holder-refused",
        envelope=_result("succeeded", 2, sender="writer", key="result-w2", mid="M-137"),
        task=RUNNING_L2_WRITER, decision=A, to_state=S.SUCCEEDED,
    ),
    Case(
        id="zombie-old-lease-failure",
        name="a zombie's failed result under the old lease_version is refused as a stale lease",
        rule=_LEASE_RULE + " (a fenced, stale worker cannot commit)",
        symptom="stale-lease-accepted",
        envelope=_result("failed", 1, key="result-z", mid="M-138"), task=RUNNING_L2_SAME, decision=REJ,
        code="E_STALE_LEASE",
    ),
    Case(
        id="zombie-old-holder-failure",
        name="the previous holder's failed result after the task moved to another worker is refused",
        rule=_LEASE_RULE,
        symptom="wrong-holder-accepted",
        envelope=_result("failed", 2, key="result-z2", mid="M-139"), task=RUNNING_L2_WRITER, decision=REJ,
        code="E_NOT_LEASE_HOLDER",
    ),
    Case(
        id="result-before-start",
        name="a result for a task nobody has started yet (it overtook its start) is refused as a stale lease",
        rule=_LEASE_RULE + " (no lease has been granted yet)",
        symptom="stale-lease-accepted",
        envelope=_result("succeeded", key="result-early", mid="M-155"), task=READY, decision=REJ, code="E_STALE_LEASE",
    ),
    Case(
        id="zombie-after-expiry",
        name="a result after its lease expired, while nobody holds the lease, is refused as a stale lease",
        rule=_LEASE_RULE + " (a fenced, stale worker cannot commit)",
        symptom="stale-lease-accepted",
        envelope=_result("succeeded", key="result-exp", mid="M-156"),
        task=_view("retry_wait", 3, holder=None, lease=1, budget=4), decision=REJ, code="E_STALE_LEASE",
    ),
    Case(
        id="start-by-other-assignee",
        name="task_started from the researcher for a task assigned to the writer is refused",
        rule="only the assignee may start the task",
        symptom="non-assignee-started",
        envelope=_env("task_started", {}, sender="researcher", key="start-x", mid="M-140"),
        task=_view("ready", 4, assignee="writer", holder="researcher", lease=1, budget=4), decision=REJ,
        code="E_NOT_ASSIGNEE",
    ),
    # ---- compare-and-swap
    Case(
        id="cas-zero",
        name="a cancel written against state_version 0 of a task at version 2 is refused as stale (0 is a version)",
        rule="writes are compare-and-swap on state_version",
        symptom="version-zero-ignored",
        envelope=_env("cancel", {"expected_state_version": 0}, sender="manager", recipient="researcher",
                      key="cancel-7", mid="M-141"),
        task=RUNNING, decision=REJ, code="E_STALE_VERSION",
    ),
    Case(
        id="cas-future",
        name="a cancel written against a state_version the task never had yet is refused as stale",
        rule="writes are compare-and-swap on state_version",
        symptom="stale-version-accepted",
        envelope=_env("cancel", {"expected_state_version": 3}, sender="manager", recipient="researcher",
                      key="cancel-8", mid="M-142"),
        task=RUNNING, decision=REJ, code="E_STALE_VERSION",
    ),
    Case(
        id="cas-stale-start",
        name="a task_started written against an old state_version is refused as stale",
        rule="writes are compare-and-swap on state_version",
        symptom="stale-version-accepted",
        envelope=_env("task_started", {"expected_state_version": 0}, sender="researcher", key="start-s", mid="M-143"),
        task=READY, decision=REJ, code="E_STALE_VERSION",
    ),
    Case(
        id="cas-stale-request",
        name="a task_request reassigning a task, written against an old state_version, is refused as stale",
        rule="writes are compare-and-swap on state_version",
        symptom="stale-version-accepted",
        envelope=_env("task_request", {"goal": "collect evidence", "expected_state_version": 2}, sender="manager",
                      recipient="researcher", key=f"{TRACE_ID}:{TASK_ID}:attempt-3", mid="M-144"),
        task=RETRY, decision=REJ, code="E_STALE_VERSION",
    ),
    Case(
        id="cas-current-result",
        name="a result written against the current state_version is accepted",
        rule="writes are compare-and-swap on state_version",
        symptom="current-version-refused",
        envelope=_result("succeeded", expected_state_version=2, mid="M-145"), task=RUNNING, decision=A,
        to_state=S.SUCCEEDED,
    ),
    Case(
        id="cas-current-review",
        name="a review_decision written against the current state_version is accepted",
        rule="writes are compare-and-swap on state_version",
        symptom="current-version-refused",
        envelope=_env("review_decision", {"decision": "ready", "expected_state_version": 4}, sender="reviewer",
                      key="review:T-20:v4c", mid="REV-11", evidence=("M-102",)),
        task=REVIEW, decision=A, to_state=S.READY,
    ),
    # ---- review and evidence
    Case(
        id="frozen-cancel-by-reviewer",
        name="a reviewer's plain cancel of a frozen task is refused: it is left only by a review_decision citing evidence",
        rule=_REVIEW_RULE,
        symptom="frozen-left-without-review",
        envelope=_env("cancel", {}, sender="reviewer", key="cancel-9", mid="M-146"), task=REVIEW, decision=REJ,
        code="E_EVIDENCE_REQUIRED",
    ),
    Case(
        id="frozen-request-by-reviewer",
        name="a reviewer's task_request for a frozen task is refused: it is left only by a review_decision",
        rule=_REVIEW_RULE,
        symptom="frozen-left-without-review",
        envelope=_env("task_request", {"goal": "again"}, sender="reviewer", recipient="researcher", key="attempt-v",
                      mid="M-147"),
        task=REVIEW, decision=REJ, code="E_EVIDENCE_REQUIRED",
    ),
    Case(
        id="review-by-manager",
        name="a manager's review_decision releasing a frozen task is refused: only a reviewer decides",
        rule=_REVIEW_RULE,
        symptom="non-reviewer-released",
        envelope=_env("review_decision", {"decision": "ready"}, sender="manager", recipient="researcher",
                      key="review:m", mid="REV-12", evidence=("M-102",)),
        task=REVIEW, decision=REJ, code="E_ROLE_NOT_ALLOWED",
    ),
    Case(
        id="review-by-worker-waiting",
        name="a worker's review_decision on a waiting_human task is refused: task-v1 has no waiting_human -> ready",
        rule="the allowlist: waiting_human -> ready is no move of the seed's",
        symptom="illegal-move-made",
        envelope=_env("review_decision", {"decision": "ready"}, sender="researcher", key="review:rw", mid="REV-13",
                      evidence=("M-102",)),
        task=WAITING, decision=REJ, code="E_TRANSITION_NOT_ALLOWED",
    ),
    Case(
        id="review-unretained-waiting",
        name="a review_decision answering a waiting_human task while citing evidence that is not retained is refused",
        rule=_REVIEW_RULE + "; an unretained citation proves nothing",
        symptom="unretained-evidence-accepted",
        envelope=_env("review_decision", {"decision": "ready"}, sender="reviewer", key="review:wu", mid="REV-14",
                      evidence=("M-404",)),
        task=WAITING, unresolved=frozenset({"M-404"}), decision=REJ, code="E_EVIDENCE_UNRESOLVED",
    ),
    Case(
        id="review-cancel-unretained",
        name="a review_decision canceling a frozen task while citing evidence that is not retained is refused",
        rule=_REVIEW_RULE + "; an unretained citation proves nothing",
        symptom="unretained-evidence-accepted",
        envelope=_env("review_decision", {"decision": "canceled"}, sender="reviewer", key="review:cu", mid="REV-15",
                      evidence=("sha256:" + "c" * 64,)),
        task=REVIEW, unresolved=frozenset({"sha256:" + "c" * 64}), decision=REJ, code="E_EVIDENCE_UNRESOLVED",
    ),
    Case(
        id="review-waiting-without-evidence",
        name="a review_decision answering a waiting_human task without evidence_refs is refused",
        rule=_REVIEW_RULE,
        symptom="review-without-evidence",
        envelope=_env("review_decision", {"decision": "ready"}, sender="reviewer", key="review:we", mid="REV-16"),
        task=WAITING, decision=REJ, code="E_EVIDENCE_REQUIRED",
    ),
    Case(
        id="success-evidence-not-yet-stored",
        name="a succeeded result citing an artifact not stored yet is accepted (the artifact may land later)",
        rule=_EVIDENCE_RULE + "; unresolved evidence on a result does not refuse it",
        symptom="evidence-over-demanded",
        envelope=_result("succeeded", evidence=("sha256:" + "d" * 64,), mid="M-148"),
        task=RUNNING, unresolved=frozenset({"sha256:" + "d" * 64}), decision=A, to_state=S.SUCCEEDED,
    ),
    # ---- the allowlist and its roles
    Case(
        id="start-on-retry-wait",
        name="task_started on a task waiting to retry (not reassigned yet) is an illegal move",
        rule=_MOVE_RULE,
        symptom="illegal-move-made",
        envelope=_env("task_started", {}, sender="researcher", key="start-rw", mid="M-149"), task=RETRY, decision=REJ,
        code="E_TRANSITION_NOT_ALLOWED",
    ),
    Case(
        id="result-on-waiting-human",
        name="a result for a task waiting for a person is an illegal move",
        rule=_MOVE_RULE,
        symptom="illegal-move-made",
        envelope=_result("succeeded", key="result-wh", mid="M-150"), task=WAITING, decision=REJ,
        code="E_TRANSITION_NOT_ALLOWED",
    ),
    Case(
        id="cancel-waiting-by-reviewer",
        name="a reviewer's cancel of a task waiting for a person moves it to canceled",
        rule="any nonterminal state -> canceled, by a manager or reviewer",
        symptom="legal-move-refused",
        envelope=_env("cancel", {}, sender="reviewer", key="cancel-10", mid="M-151"), task=WAITING, decision=A,
        to_state=S.CANCELED,
    ),
    Case(
        id="result-on-reassigned-ready",
        name="a result from the last lease holder after the task was reassigned to another worker (ready again) is an "
             "illegal move",
        rule=_MOVE_RULE + " (a result moves only a running task)",
        symptom="illegal-move-made",
        envelope=_result("succeeded", key="result-ra", mid="M-157"),
        task=_view("ready", 4, assignee="writer", holder="researcher", lease=1, budget=4), decision=REJ,
        code="E_TRANSITION_NOT_ALLOWED",
    ),
    Case(
        id="create-by-reviewer",
        name="a reviewer's task_request for a new task is refused: only a manager assigns tasks",
        rule=_MOVE_RULE,
        symptom="wrong-role-moved",
        envelope=_env("task_request", {"goal": "x"}, sender="reviewer", recipient="researcher", key="v:1", mid="M-152"),
        task=None, decision=REJ, code="E_ROLE_NOT_ALLOWED",
    ),
    Case(
        id="start-by-manager",
        name="a manager's task_started is refused: only a worker starts a task",
        rule=_MOVE_RULE,
        symptom="wrong-role-moved",
        envelope=_env("task_started", {}, sender="manager", recipient="researcher", key="start-m", mid="M-153"),
        task=_view("ready", 1, assignee=None), decision=REJ, code="E_ROLE_NOT_ALLOWED",
    ),
    Case(
        id="fence-unknown-task",
        name="a fence naming a task that does not exist is refused as out of scope",
        rule="a terminal fence closes the whole conversation: its task_id is its trace_id",
        symptom="fence-accepted",
        envelope=_env("fence", {"to": ["researcher"], "terminal": "COMPLETED"}, sender="manager", recipient="researcher",
                      key="fence-2", mid="M-154"),
        task=None, decision=REJ, code="E_FENCE_SCOPE",
    ),
    # ---- schema versions
    Case(
        id="schema-unknown-result",
        name="a result in a schema version this runtime does not speak is refused, even from the lease holder",
        rule="a message in an unknown schema_version is refused, never guessed at",
        symptom="unknown-schema-accepted",
        envelope=_replace_env(SUCCEEDED, schema_version="2"), task=RUNNING, decision=REJ, code="E_SCHEMA_VERSION",
    ),
    Case(
        id="schema-unknown-repeat",
        name="an unknown schema version under a recorded key is refused, not read as a duplicate",
        rule="a message in an unknown schema_version is refused, never guessed at",
        symptom="unknown-schema-accepted",
        envelope=_replace_env(SUCCEEDED, schema_version="9", message_id="M-102s"), task=DONE,
        prior=(_intent(SUCCEEDED, 3, "succeeded", 3),), decision=REJ, code="E_SCHEMA_VERSION",
    ),
    Case(
        id="schema-unknown-ack",
        name="an ack in a schema version this runtime does not speak is refused",
        rule="a message in an unknown schema_version is refused, never guessed at",
        symptom="unknown-schema-accepted",
        envelope=_replace_env(ACK, schema_version="0"), task=RUNNING, decision=REJ, code="E_SCHEMA_VERSION",
    ),
)


# ---------------------------------------------------------------------------
# boundaries, generated from the rules (issue 42): every version boundary crossed, every comparison of
# the lease, budget, compare-and-swap and arrival rules tried at equal, one below and one above. A case
# someone thought of probes one side of a clause; these probe both, for every clause, so a consumer that
# compares with < where the rule says != (or reads only a version's major) meets the side it gets wrong.
# Each names its ``family``: the exercise's test that owns it lists the family, not each id.


def version_spellings() -> list[tuple[str, bool]]:
    """``(schema_version as sent, read?)`` around every boundary of what the runtime reads
    (:data:`sim.versions.READS`): each version read, as MAJOR.MINOR, with a patch (ignored) and, for
    MAJOR.0, as a bare major; the minor just past the newest read of each major read; the major
    after the newest and the one before the oldest, bare and with a minor."""
    from ..versions import READS

    out: dict[str, bool] = {}
    for v in sorted(READS):
        out[f"{v.major}.{v.minor}"] = True
        out[f"{v.major}.{v.minor}.7"] = True
        if v.minor == 0:
            out[f"{v.major}"] = True
    majors = sorted({v.major for v in READS})
    for m in majors:
        newest = max(v.minor for v in READS if v.major == m)
        out.setdefault(f"{m}.{newest + 1}", False)
        out.setdefault(f"{m}.{newest + 1}.0", False)
    for m in (max(majors) + 1, min(majors) - 1):
        if m >= 0:
            out.setdefault(f"{m}", False)
            out.setdefault(f"{m}.0", False)
            out.setdefault(f"{m}.9", False)
    return list(out.items())


def _version_symptom(text: str) -> str:
    """What accepting ``text`` (a version the runtime does not read) shows: a newer minor of a major it
    reads, or a version it does not speak at all."""
    from ..versions import READS

    major = text.split(".")[0]
    return "newer-minor-accepted" if any(str(v.major) == major for v in READS) else "unknown-schema-accepted"


def _around(n: int, least: int = 0) -> tuple[tuple[str, int], ...]:
    """A comparison's three sides: one below ``n``, ``n`` itself, one above (none below ``least``, the
    smallest value an envelope may carry there)."""
    return tuple((side, x) for side, x in (("below", n - 1), ("equal", n), ("above", n + 1)) if x >= least)


def boundary_cases() -> tuple[Case, ...]:
    """The generated boundary cases (see the comment above)."""
    out: list[Case] = []
    n = iter(range(600, 10_000))

    # -- schema versions: a start, accepted when read; a repeat of a recorded result, refused when not read
    for text, read in version_spellings():
        tag = text.replace(".", "-")
        start = _replace_env(_env("task_started", {"lease_version": 1}, sender="researcher",
                                  key=f"start-v{tag}", mid=f"M-{next(n)}"), schema_version=text)
        out.append(Case(
            id=f"bound-schema-{tag}-start", family="schema-version",
            symptom="read-version-refused" if read else _version_symptom(text),
            name=f"a task_started in schema {text} is {'read (the runtime reads it)' if read else 'refused: the runtime does not read it'}",
            rule="the runtime reads schema 1.0 and 1.1 (MAJOR.MINOR; a bare major is MAJOR.0, a patch is ignored); "
                 "any other version, a newer minor or another major, is refused before anything is read",
            envelope=start, task=READY,
            **(dict(decision=A, to_state=S.RUNNING, lease=1) if read else dict(decision=REJ, code="E_SCHEMA_VERSION")),
        ))
        if read:  # (a read version's repeat is a duplicate: the duplicates rule's to judge, not this one's)
            continue
        repeat = _replace_env(SUCCEEDED, schema_version=text, message_id=f"M-{next(n)}")
        out.append(Case(
            id=f"bound-schema-{tag}-repeat", family="schema-version",
            symptom=_version_symptom(text),
            name=f"a repeat of a recorded result in schema {text} is refused, not read as a duplicate",
            rule="the runtime reads schema 1.0 and 1.1 (MAJOR.MINOR; a bare major is MAJOR.0, a patch is ignored); "
                 "any other version is refused before its key is looked up",
            envelope=repeat, task=DONE, prior=(_intent(SUCCEEDED, 3, "succeeded", 3),),
            decision=REJ, code="E_SCHEMA_VERSION",
        ))

    # -- leases: the lease a start asks for against the next one, a result's against the current one
    for label, task in (("first", READY), ("after-retry", READY_AGAIN)):
        nxt = task.lease_version + 1
        for side, asked in _around(nxt, least=1):  # (an envelope's lease_version is >= 1)
            ok = side == "equal"
            out.append(Case(
                id=f"bound-start-lease-{label}-{side}", family="leases",
                symptom="holder-refused" if ok else "lease-above-accepted" if side == "above" else "stale-lease-accepted",
                name=f"a start asking for lease_version {asked} when the next lease is {nxt} ({side}) is "
                     + ("accepted" if ok else "refused as a stale lease"),
                rule="a start takes exactly the next lease (lease_version + 1): one below or above it is stale",
                envelope=_env("task_started", {"lease_version": asked}, sender="researcher",
                              key=f"start-b-{label}-{asked}", mid=f"M-{next(n)}"),
                task=task,
                **(dict(decision=A, to_state=S.RUNNING, lease=nxt) if ok else dict(decision=REJ, code="E_STALE_LEASE")),
            ))
    for label, task in (("first", RUNNING), ("second", RUNNING_L2_SAME)):
        cur = task.lease_version
        for side, carried in _around(cur, least=1):
            ok = side == "equal"
            out.append(Case(
                id=f"bound-result-lease-{label}-{side}", family="leases",
                symptom="holder-refused" if ok else "lease-above-accepted" if side == "above" else "stale-lease-accepted",
                name=f"a result from the holder carrying lease_version {carried} when the current lease is {cur} "
                     f"({side}) is " + ("accepted" if ok else "refused as a stale lease"),
                rule=_LEASE_RULE + ": one below or above it is stale",
                envelope=_result("succeeded", carried, key=f"result-b-{label}-{carried}", mid=f"M-{next(n)}"),
                task=task,
                **(dict(decision=A, to_state=S.SUCCEEDED) if ok else dict(decision=REJ, code="E_STALE_LEASE")),
            ))
    for side, budget in _around(1):
        ok = budget >= 1
        out.append(Case(
            id=f"bound-start-budget-{side}", family="leases",
            symptom="holder-refused" if ok else "budget-ignored",
            name=f"a start with {budget} unit(s) of budget left is " + ("accepted" if ok else "refused: no budget left"),
            rule="budget usage comes from the runtime's record: an attempt needs at least one unit left",
            envelope=_env("task_started", {"lease_version": 1}, sender="researcher", key=f"start-budget-{budget}",
                          mid=f"M-{next(n)}"),
            task=_view("ready", 1, budget=budget),
            **(dict(decision=A, to_state=S.RUNNING, lease=1) if ok else dict(decision=REJ, code="E_BUDGET_EXHAUSTED")),
        ))

    # -- compare-and-swap: expected_state_version against the task's, for every kind of write
    writes = (
        ("cancel", RUNNING, lambda esv, mid: _env("cancel", {"expected_state_version": esv}, sender="manager",
                                                  recipient="researcher", key=f"cancel-b-{esv}", mid=mid),
         dict(decision=A, to_state=S.CANCELED)),
        ("result", RUNNING, lambda esv, mid: _result("succeeded", key=f"result-cas-{esv}", mid=mid,
                                                     expected_state_version=esv),
         dict(decision=A, to_state=S.SUCCEEDED)),
        ("start", READY, lambda esv, mid: _env("task_started", {"lease_version": 1, "expected_state_version": esv},
                                               sender="researcher", key=f"start-cas-{esv}", mid=mid),
         dict(decision=A, to_state=S.RUNNING, lease=1)),
        ("request", RETRY, lambda esv, mid: _env("task_request", {"goal": "collect evidence",
                                                                  "expected_state_version": esv},
                                                 sender="manager", recipient="researcher",
                                                 key=f"{TRACE_ID}:{TASK_ID}:attempt-cas-{esv}", mid=mid),
         dict(decision=A, to_state=S.READY)),
        ("review", REVIEW, lambda esv, mid: _env("review_decision", {"decision": "ready", "expected_state_version": esv},
                                                 sender="reviewer", key=f"review:cas:{esv}", mid=mid,
                                                 evidence=("M-102",)),
         dict(decision=A, to_state=S.READY)),
    )
    for kind, task, make, accepted in writes:
        for side, esv in _around(task.state_version):
            ok = side == "equal"
            out.append(Case(
                id=f"bound-cas-{kind}-{side}", family="compare-and-swap",
                symptom="current-version-refused" if ok else "stale-version-accepted",
                name=f"a {kind} written against state_version {esv} of a task at {task.state_version} ({side}) is "
                     + ("accepted" if ok else "refused as stale"),
                rule="writes are compare-and-swap on state_version: only the task's own version is current",
                envelope=make(esv, f"M-{next(n)}"), task=task,
                **(accepted if ok else dict(decision=REJ, code="E_STALE_VERSION")),
            ))

    # -- a conflict freezes the task whatever state it is in: one case per state a task can be in (the
    # allowlist says whether the runtime's freeze is a move from there; needs_review itself stays)
    versions = {"ready": 1, "running": 2, "succeeded": 3, "failed": 3, "denied": 3, "canceled": 3,
                "waiting_human": 3, "retry_wait": 3, "needs_review": 4}
    for state in TaskState:
        if state == TaskState.PENDING:  # (a task_request creates a task and readies it at once)
            continue
        started = state != TaskState.READY
        task = _view(state.value, versions[state.value], holder="researcher" if started else None,
                     lease=1 if started else 0, budget=4, trusted=state != TaskState.NEEDS_REVIEW,
                     has_effects=state == TaskState.SUCCEEDED)
        freeze = state != TaskState.NEEDS_REVIEW and _RULES.allows(state, S.NEEDS_REVIEW, "runtime")
        out.append(Case(
            id=f"bound-conflict-on-{state.value}", family="conflicts",
            symptom="conflict-not-frozen" if freeze else "frozen-task-moved",
            name=f"another payload under a recorded key on a {state.value} task is a conflict"
                 + (" that freezes it in needs_review" if freeze else " that leaves it where it is"),
            rule=_CONFLICT_RULE + "; whatever state the task is in",
            envelope=_result("failed", error="another payload", key=K_RESULT, mid=f"M-{next(n)}"), task=task,
            prior=(_intent(SUCCEEDED, 3, "succeeded", 3),), decision=CON,
            **({"to_state": S.NEEDS_REVIEW} if freeze else {}),
        ))

    # -- arrival order and which recorded intent an answer names: both orders of two recorded payloads
    first_rec = _intent(_result("failed", key="result-ord", mid="M-170"), 5, "succeeded", 3)
    second_rec = _intent(_result("denied", key="result-ord", mid="M-171"), 6, "needs_review", 4)
    for order, prior in (("in-order", (first_rec, second_rec)), ("out-of-order", (second_rec, first_rec))):
        out.append(Case(
            id=f"bound-conflict-arrival-{order}", family="conflicts", symptom="wrong-conflict-with",
            name=f"a third payload under a key with two recorded ({order.replace('-', ' ')} in the list) names the "
                 "one that arrived first",
            rule=_CONFLICT_RULE + "; conflict_with is the earliest arrival, whatever the list's order",
            envelope=_result("retry", key="result-ord", mid=f"M-{next(n)}"), task=REVIEW, prior=prior,
            decision=CON,
        ))
        for which, rec in (("first", first_rec), ("second", second_rec)):
            out.append(Case(
                id=f"bound-dup-names-{which}-{order}", family="duplicates", symptom="wrong-duplicate-of",
                name=f"a repeat of the {which} of two payloads recorded under one key ({order.replace('-', ' ')} in "
                     "the list) names that one, not the other",
                rule=_DUP_RULE + "; duplicate_of is the recorded intent whose payload it repeats",
                envelope=_replace_env(_result(rec.payload["status"], key="result-ord", mid=rec.message_id),
                                      message_id=f"M-{next(n)}"),
                task=REVIEW, prior=prior, decision=DUP,
            ))
    return tuple(out)


CASES = CASES + boundary_cases()


# ---------------------------------------------------------------------------
# the runner


def _state_name(s) -> str:
    return s.value if isinstance(s, TaskState) else repr(s)


def check(decide: DecideFn, case: Case, rules: RuleBook | None = None) -> list[str]:
    """Run ``decide`` on one case; return what is wrong (``[]`` when it passes). Never raises."""
    return [msg for _kind, msg in check_tagged(decide, case, rules)[1]]


def check_tagged(decide: DecideFn, case: Case, rules: RuleBook | None = None) -> tuple[object, list[tuple[str, str]]]:
    """Like :func:`check`, but return ``(what decide returned, [(kind, message), ...])``: each failure
    with the kind of check it failed (``raised``, ``not-a-verdict``, ``uninspectable``, ``decision``,
    ``code``, ``reason``, ``no-move-expected``, ``move-expected``, ``move-type``, ``move-target``,
    ``move-start``, ``create``, ``allowlist``, ``executor``, ``lease``, ``lease-not-start``,
    ``reconcile``, ``duplicate-of``, ``conflict-with``), so a grader can tell the mistakes apart."""
    rules = rules or _RULES
    try:
        v = decide(case.envelope, case.task, case.prior, rules, case.unresolved)
    except Exception as e:  # a crash is a failure to report, not to propagate
        if getattr(e, "code", None) == "E_BAD_ANSWER":  # a consumer's answer that cannot be read (sim.consumer)
            return None, [("not-a-verdict", str(getattr(e, "message", e)))]
        said = getattr(e, "message", None) if getattr(e, "code", None) else None  # a line of the kit's, with its code
        return None, [("raised", said or f"decide raised {type(e).__name__}: {e}")]
    if not isinstance(v, Verdict):
        return v, [("not-a-verdict", f"decide returned {type(v).__name__}, not a sim.intake.Verdict")]
    try:
        return v, _compare(v, case, rules)
    except Exception as e:  # a malformed verdict (e.g. a move that is not a Move)
        return v, [("uninspectable", f"the verdict could not be inspected ({type(e).__name__}: {e}): {v!r}")]


def _role(env: Envelope) -> str:
    try:
        return role_of(env.sender)
    except Exception:  # a sender that names no role: no move can be its own
        return ""


def _compare(v: Verdict, case: Case, rules: RuleBook) -> list[tuple[str, str]]:
    fails: list[tuple[str, str]] = []
    if not isinstance(v.decision, Decision):
        fails.append(("decision", f"verdict.decision is {v.decision!r} ({type(v.decision).__name__}), not a sim.intake.Decision"))
    got = v.decision.value if isinstance(v.decision, Decision) else v.decision
    if got != case.decision.value:
        fails.append((
            "decision",
            f"decision: expected {case.decision.value}, got {got}"
            + (f" ({v.code})" if v.code else "")
            + f" -- {v.reason}",
        ))
    if case.code is not None and v.code != case.code:
        fails.append(("code", f"code: expected {case.code}, got {v.code}"))
    if not isinstance(v.reason, str) or not v.reason.strip():
        fails.append(("reason", f"the verdict gives no reason ({v.reason!r}): every decision must say why, in words"))

    move = v.move
    if case.to_state is None:
        if move is not None:
            fails.append((
                "no-move-expected",
                f"expected no move, got {_state_name(getattr(move, 'from_state', move))} -> "
                f"{_state_name(getattr(move, 'to_state', move))}",
            ))
    elif move is None:
        fails.append(("move-expected", f"expected a move to {case.to_state.value}, got no move"))
    else:
        if not isinstance(move, Move):
            fails.append(("move-type", f"verdict.move is a {type(move).__name__}, not a sim.intake.Move"))
        if move.to_state != case.to_state:
            fails.append(("move-target", f"move target: expected {case.to_state.value}, got {_state_name(move.to_state)}"))
        start = case.task.state if case.task is not None else TaskState.PENDING
        if move.from_state != start:
            fails.append(("move-start", f"move starts from {_state_name(move.from_state)}, but the task is {start.value}"))
        if case.task is None and not v.create:
            fails.append(("create", "a move that creates the task must set create=True"))
    if move is not None and isinstance(move, Move):
        if not rules.allows(move.from_state, move.to_state, move.role):
            fails.append((
                "allowlist",
                f"move {_state_name(move.from_state)} -> {_state_name(move.to_state)} by role {move.role!r} "
                f"is not in {rules.version}'s allowlist",
            ))
        maker = ("runtime", "runtime") if got == Decision.CONFLICT.value else (case.envelope.sender, _role(case.envelope))
        if (move.executor, move.role) != maker:
            fails.append((
                "executor",
                f"the move says it was made by {move.executor!r} as {move.role!r}: a move names who made it (the "
                "sender, in the sender's role; the runtime, when it freezes a conflict)",
            ))
    if case.lease is not None and v.grant_lease != case.lease:
        fails.append(("lease", f"grant_lease: expected {case.lease}, got {v.grant_lease}"))
    if v.grant_lease is not None and got == Decision.ACCEPTED.value and case.envelope.type != "task_started":
        fails.append(("lease-not-start", f"grant_lease is {v.grant_lease} for a {case.envelope.type}: only a task_started "
                                         "takes a lease"))
    if case.reconcile is not None and got == Decision.LATE.value and bool(v.needs_reconciliation) != case.reconcile:
        fails.append((
            "reconcile",
            "needs_reconciliation: a late result for a task whose side effect already committed goes to reconciliation"
            if case.reconcile else
            "needs_reconciliation: only a late result that touches a committed side effect goes to reconciliation",
        ))

    if got == Decision.DUPLICATE.value and case.decision == Decision.DUPLICATE:
        if v.duplicate_of is None:
            fails.append(("duplicate-of", "a duplicate must name the recorded intent it repeats (duplicate_of)"))
        elif v.duplicate_of not in case.prior:
            fails.append(("duplicate-of", f"duplicate_of {getattr(v.duplicate_of, 'message_id', v.duplicate_of)} is not "
                                          "one of the recorded intents"))
        elif v.duplicate_of not in _repeated(case):
            fails.append(("duplicate-of", f"duplicate_of {v.duplicate_of.message_id} is a recorded intent, but not the "
                                          "one whose payload this delivery repeats"))
    if got == Decision.CONFLICT.value and case.decision == Decision.CONFLICT:
        first = min(case.prior, key=lambda p: p.arrival)
        if v.conflict_with is None:
            fails.append(("conflict-with", "a conflict must name the recorded intent it collides with (conflict_with)"))
        elif v.conflict_with != first:
            fails.append((
                "conflict-with",
                f"conflict_with is {getattr(v.conflict_with, 'message_id', v.conflict_with)}; the first recorded payload "
                f"is {first.message_id}",
            ))
    return fails


def _repeated(case: Case) -> list[IntentRecord]:
    """The recorded intents whose payload ``case``'s delivery repeats (compared under one scheme)."""
    from ..intake import _same_payload

    return [p for p in case.prior if _same_payload(p, case.envelope)]


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
