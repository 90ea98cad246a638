"""The planner: what one delivery means, as a pure function of what was read for it.

The runtime reads a :class:`Context` from the store (the task, the intents under the key, the
machine, which evidence resolves, whether the message id was used before, what rests on what),
then asks :func:`judge` for the verdict and :func:`plan` for the events that record it. Neither
reads anything else: the same planner serves the runtime, replay and the grader, and every rule
that decides what a delivery means lives here or in :mod:`sim.intake`, never in the runtime.

``judge`` routes the message (a conversation's fence and its acks, a reviewer's reconciliation,
or the intake function of the policy), then applies the two rules that hold whatever intake said:
a message id reused for another envelope is refused, and a success that rests on an untrusted
input is frozen for review. ``plan`` turns the verdict into events (``sim.events``) and says the
task's state and version after them.

Part of the domain: no I/O.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any, Callable

from . import digest as _digest
from . import events as ev_
from .envelope import RECONCILE_DECISIONS, Envelope, EnvelopeError, role_of
from .errors import ProtolabError, raised_at
from .events import EventDraft
from .frozen import quick_init
from .intake import Decision, IntentRecord, Move, TaskView, Verdict, target_state
from .machine import STATE_BY_NAME, RuleBook, TaskState

__all__ = [
    "Context", "IntakeFn", "judge", "plan", "route", "effect_key", "planned_effect_key", "wants_untrusted_check",
    "DEFAULT_BUDGET", "ATTEMPT_COST", "CONVERSATION_CODES", "RESTART_FAULTS", "LIVE_BODY_RESTARTS",
    "wants_conversation_check",
    "conversation_rule", "fence_applies", "after_fence", "refused", "bounds_refusal", "ceiling_room", "AUDIENCE_OF", "AUDIENCES", "LABELS", "audiences_of", "audience_refusal",
]

DEFAULT_BUDGET = 5
ATTEMPT_COST = 1

IntakeFn = Callable[[Envelope, "TaskView | None", tuple, RuleBook, frozenset], Verdict]


@quick_init
@dataclass(frozen=True)
class Context:
    """What the store said about one delivery, read before deciding (``judge`` needs the first
    part) and, for what only some verdicts need, after (``plan`` needs the rest)."""

    task: TaskView | None
    prior: tuple[IntentRecord, ...]
    rules: RuleBook
    #: evidence refs naming neither a stored artifact nor another stored message
    unresolved: frozenset[str]
    #: the message id was first stored with a different envelope
    id_reused: bool
    next_arrival: int
    delivery_id: int
    #: for a reviewer's reconciliation: the task's open reconciliations, oldest first
    open_reconciliations: tuple[dict, ...] = ()
    #: for a success under a policy that holds untrusted inputs: [(ref, task)] of cited inputs
    #: whose task is untrusted now
    untrusted_inputs: tuple[tuple[str, str], ...] = ()
    # -- read after the verdict, only when it needs them
    #: the key this delivery's side effect commits under (None: none)
    effect_key: str | None = None
    #: of the keys this delivery could commit (its effect's, retractions), those already committed
    committed_keys: frozenset[str] = frozenset()
    #: the effects this task committed ({effect_key, target, ...}), in commit order
    task_effects: tuple[dict, ...] = ()
    #: effects of other tasks committed from this task's products ({effect_key, task_id, ...})
    resting_on: tuple[dict, ...] = ()
    #: under a policy that checks digests: why ``env``'s payload is not the one its payload_digest was made of
    digest_refusal: str | None = None
    #: under a policy that closes payloads: why ``env``'s payload does not fit its declared shape
    payload_refusal: str | None = None
    #: under a policy that believes what payloads say: the budget_left the sender reported
    reported_budget: int | None = None


def effect_key(env: Envelope) -> str | None:
    """The unique key of the side effect a successful result asks for, if any."""
    eff = env.payload.get("effect") if env.type == "task_result" else None
    if not eff:
        return None
    return f"{eff['kind']}:{eff['target']}:{env.task_id}"


def planned_effect_key(env: Envelope, delivery_id: int, *, idempotent_effects: bool = True, effect_rule=None) -> str | None:
    """The key an accepted ``env`` commits its effect under: keyed by what it does (idempotent), by
    delivery (naive: a redelivered result does it again), or by a plugged-in effect rule."""
    key = effect_key(env)
    if key is not None and env.payload.get("status") == "succeeded":
        if effect_rule is not None:
            key = _ruled_key(effect_rule, env, delivery_id)
        elif not idempotent_effects:
            key = f"{key}#d{delivery_id}"
    return key


def wants_untrusted_check(env: Envelope, hold_untrusted: bool) -> bool:
    """Whether judging ``env`` asks which of its inputs are untrusted (a success, under a policy
    that holds what rests on untrusted results)."""
    return (hold_untrusted and env.type == "task_result" and env.payload.get("status") == "succeeded"
            and bool(env.evidence_refs))


def is_reconciliation(env: Envelope) -> bool:
    return env.type == "review_decision" and "reconcile" in env.payload


def route(env: Envelope, ctx: Context, decide: IntakeFn) -> IntakeFn:
    """Who decides ``env``: a message about the conversation (its task_id is its trace_id) is
    recorded or refused by the conversation's own rule, a reviewer's reconciliation by the
    reconciliation rule, anything else by the policy's intake function."""
    if env.task_id == env.trace_id:
        return _conversation_decide
    if is_reconciliation(env):
        open_now = list(ctx.open_reconciliations)
        return lambda e, t, p, r, u=frozenset(): _reconcile_decide(e, t, p, r, u, open_now)  # type: ignore[misc]  # a lambda with a default argument
    return decide


def judge(env: Envelope, ctx: Context, decide: IntakeFn, *, hold_untrusted: bool = True) -> Verdict:
    """The verdict on ``env``: the routed intake function's, then the rules that hold whatever it
    said (a reused message id is refused; a success resting on an untrusted input is frozen)."""
    if ctx.digest_refusal is not None:
        # A payload that is not the one its digest was made of is not what the sender sent: nothing in it is read.
        return Verdict(Decision.REJECTED, ctx.digest_refusal, code="E_DIGEST_MISMATCH")
    if ctx.payload_refusal is not None:
        # A field nobody declared is refused before anyone reads it (a version not read is intake's to refuse).
        return Verdict(Decision.REJECTED, ctx.payload_refusal, code="E_UNKNOWN_FIELD")
    verdict = _check_verdict(route(env, ctx, decide)(env, ctx.task, ctx.prior, ctx.rules, ctx.unresolved))

    # One message_id, two different envelopes, and not the same intent: the id was reused.
    if verdict.decision in (Decision.ACCEPTED, Decision.LATE) and ctx.id_reused:
        verdict = Verdict(
            Decision.REJECTED,
            f"message_id {env.message_id} was already used for a different envelope",
            code="E_MESSAGE_ID_REUSED",
        )

    # What rests on an untrusted result commits nothing: a success citing an input of a task frozen
    # for review is frozen too (needs_review), until a reviewer releases the input and decides it.
    task = ctx.task
    if (hold_untrusted and verdict.decision == Decision.ACCEPTED and env.type == "task_result"
            and env.payload.get("status") == "succeeded" and task is not None):
        tainted = ctx.untrusted_inputs
        if tainted and ctx.rules.allows(task.state, TaskState.NEEDS_REVIEW, "runtime"):
            names = ", ".join(f"{r[:15]}… of {t}" if r.startswith("sha256:") else f"{r} of {t}" for r, t in tainted)
            verdict = replace(
                verdict, reason=f"{verdict.reason}; but it rests on untrusted input ({names}): frozen for review, "
                                "no effect committed",
                move=Move(task.state, TaskState.NEEDS_REVIEW, f"rests on untrusted input ({names})", "runtime", "runtime"),
                held=tuple(r for r, _t in tainted),
            )
    return verdict


#: The codes a runtime that keeps the conversation's rules refuses a message with, the validator's own
#: (sim.protocol.trace.CODES): a message refused so never entered the conversation, and an exported trace
#: leaves it out (sim.conversation).
CONVERSATION_CODES = ("E_POST_TERMINAL_MESSAGE", "E_SEQUENCE_GAP", "E_STALE_GENERATION", "E_AUDIENCE_LABEL",
                      "E_AUDIENCE_SCOPE", "E_STALE_EPOCH", "E_EXPIRED_MESSAGE", "E_DEADLINE", "E_MESSAGE_CEILING")

#: Message type -> the audience label it is addressed under.
AUDIENCE_OF = {
    "task_request": "control",
    "cancel": "control",
    "review_decision": "control",
    "task_started": "results",
    "task_result": "results",
    "ack": "receipts",
    "fence": "control",
}
#: Every audience label, in order.
LABELS = ("control", "receipts", "results")
#: Role -> the audience labels a participant of that role accepts: the manager hears what it is told
#: (results), receipts and the reviewers' decisions (control); a worker hears what it is asked (control)
#: and receipts, never another worker's results; a reviewer only decides.
AUDIENCES = {
    "manager": ("control", "receipts", "results"),
    "researcher": ("control", "receipts"),
    "writer": ("control", "receipts"),
    "reviewer": ("control",),
}


def audiences_of(participant: str) -> tuple[str, ...]:
    """The audience labels ``participant`` accepts (by its role; every label for one the kit cannot place)."""
    try:
        return AUDIENCES.get(role_of(participant), LABELS)
    except EnvelopeError:
        return LABELS


def audience_refusal(env: Envelope) -> Verdict | None:
    """A message addressed to a recipient outside its audience (a worker sent another worker's result) is
    refused whatever intake would make of it: filter before reduce (E_AUDIENCE_LABEL). None: it may be heard."""
    label = AUDIENCE_OF.get(env.type)
    if label is None or label in audiences_of(env.recipient):
        return None
    return Verdict(Decision.REJECTED, f"{env.recipient} is not in the audience of a {env.type} ({label}); "
                   f"it accepts {', '.join(audiences_of(env.recipient))}", code="E_AUDIENCE_LABEL")


#: The faults after which a worker has a new body (the next generation): the message each names is
#: the point its old body was replaced after (sim.recovery; the export's ``earlierGenerations``).
RESTART_FAULTS = ("crash", "zombie")
#: Of those, the restarts whose old body was left running (fault zombie): the runtime's generation rule
#: (``Store.body_replaced``) refuses what such a body says afterwards, under however current a lease. A
#: crashed body answers only after recovery, under a stale lease: lease fencing is what refuses it (the
#: crash lesson, and exercise 3's grading of an intake that forgets the lease, rely on that being the
#: only rule in its way), so the generation rule leaves it to the lease.
LIVE_BODY_RESTARTS = ("zombie",)


def fence_applies(env: Envelope, verdict: Verdict, *, copy: bool = False) -> bool:
    """Whether a fence that closed ``env``'s conversation refuses it: every message about a task does, but
    a reviewer's decision intake accepts (it reopens the conversation in its next epoch) and the network's
    copy of an envelope already delivered that intake recorded duplicate (the transport's own
    deduplication, which the conversation never sees: ``copy``); the conversation's own messages (the
    fence, its acknowledgements) are the conversation rule's to judge."""
    if env.task_id == env.trace_id or (env.type == "review_decision" and verdict.decision == Decision.ACCEPTED):
        return False
    return not (copy and verdict.decision == Decision.DUPLICATE)


def after_fence(env: Envelope, verdict: Verdict) -> Verdict:
    """``env`` arrived after the fence closed its conversation: refused whatever intake made of it (filter
    before reduce: E_POST_TERMINAL_MESSAGE), so nothing changes after the fence (see :func:`refused`)."""
    return refused(env, verdict, "E_POST_TERMINAL_MESSAGE",
                   f"the conversation {env.trace_id} is fenced: after its fence only acknowledgements of it are taken")


def refused(env: Envelope, verdict: Verdict, code: str, reason: str) -> Verdict:
    """``env`` refused under one of the conversation's rules (``code``), whatever intake made of it: filter
    before reduce. What intake found is not lost: a result contradicting the one recorded under its key (a
    conflict), or a late result for a task whose side effect committed, is kept in the message log and goes
    to reconciliation, where a reviewer keeps or retracts what rests on it (and, deciding after the fence,
    reopens the conversation)."""
    reconcile = verdict.decision == Decision.CONFLICT or (verdict.decision == Decision.LATE
                                                           and verdict.needs_reconciliation)
    if verdict.decision != Decision.REJECTED:
        reason += f" (intake would have recorded it {verdict.decision.value})"
    elif verdict.code:
        reason += f" (intake refused it too: {verdict.code}: {verdict.reason})"
    if reconcile:
        reason += "; it contradicts what was recorded, so it goes to reconciliation"
    return Verdict(Decision.REJECTED, reason, code=code, needs_reconciliation=reconcile,
                   conflict_with=verdict.conflict_with)


def ceiling_room(acknowledgers: int) -> int:
    """Room a conversation keeps under its message ceiling for closing: its fence, and the acknowledgement
    each of ``acknowledgers`` owes it. Messages about tasks stop this far below the ceiling."""
    return 1 + acknowledgers


def bounds_refusal(env: Envelope, *, trace: str | None, epoch: int, at: str, deadline: str | None,
                   taken: int | None, ceiling: int | None, room: int) -> tuple[str, str] | None:
    """Which of the conversation's declared bounds ``env`` breaks, as (code, reason), or None: a message
    of another conversation (E_AUDIENCE_SCOPE), of an earlier epoch (E_STALE_EPOCH), delivered after the
    epoch's deadline (E_DEADLINE) or after it expired (E_EXPIRED_MESSAGE), or one the conversation has
    no room for under its ceiling (E_MESSAGE_CEILING: ``taken`` messages so far; the last ``room`` places
    are kept for the fence and its acknowledgements). ``at`` is when it is delivered; ``taken`` None:
    far below the ceiling, not counted."""
    if trace is not None and env.trace_id != trace:
        return ("E_AUDIENCE_SCOPE", f"{env.message_id} belongs to conversation {env.trace_id}, not {trace}: "
                f"outside this conversation's scope")
    fence_ack = env.type == "ack" and env.task_id == env.trace_id  # (it belongs to the epoch of the fence it answers)
    if env.spoken_epoch < epoch and not fence_ack:
        return ("E_STALE_EPOCH", f"{env.message_id} was sent in epoch {env.spoken_epoch}; the conversation is "
                f"in epoch {epoch} since a reviewer reopened it")
    if deadline is not None and at > deadline:
        return ("E_DEADLINE", f"delivered at {at}, after the conversation's deadline {deadline}")
    if env.expires_at is not None and at > env.expires_at:
        return ("E_EXPIRED_MESSAGE", f"{env.message_id} expired at {env.expires_at} and was delivered at {at}")
    if taken is not None and ceiling is not None:
        closing = env.type == "fence" or (env.type == "ack" and env.task_id == env.trace_id)
        limit = ceiling if closing else ceiling - room
        if taken >= limit:
            return ("E_MESSAGE_CEILING", f"the conversation took {taken} of its {ceiling} messages"
                    + ("" if closing else f" (the last {room} are kept for its fence and acknowledgements)"))
    return None


def wants_conversation_check(env: Envelope, verdict: Verdict) -> bool:
    """Whether ``verdict`` is one the conversation's rules may still refuse: an acceptance of anything but
    an acknowledgement (a receipt changes nothing) or a reviewer's decision (which reopens a fenced
    conversation). A duplicate, a conflict or a late message is recorded and changes no state either way."""
    return verdict.decision == Decision.ACCEPTED and env.type not in ("ack", "review_decision")


def conversation_rule(env: Envelope, verdict: Verdict, *, fenced: bool, seq_used: bool,
                      stale_body: bool = False) -> Verdict:
    """The verdict once the conversation's rules have spoken (see :func:`wants_conversation_check`): after
    the fence nothing but its acknowledgements is taken (E_POST_TERMINAL_MESSAGE), a body of the sender
    that has been replaced no longer speaks for it (E_STALE_GENERATION: a zombie, however current the
    lease it still holds), and a sender's body may not number two messages about one task alike
    (E_SEQUENCE_GAP: its sequence went back)."""
    if fenced and env.task_id != env.trace_id:
        return Verdict(Decision.REJECTED, f"the conversation {env.trace_id} is fenced: after its fence only "
                       "acknowledgements of it are taken", code="E_POST_TERMINAL_MESSAGE")
    if stale_body:
        return Verdict(Decision.REJECTED, f"this body of {env.sender} was replaced by a newer one (a restart); "
                       "only the newest body speaks for it", code="E_STALE_GENERATION")
    if seq_used:
        return Verdict(Decision.REJECTED, f"{env.sender} already numbered another message about {env.task_id} "
                       "with this sequence number: its sequence went back", code="E_SEQUENCE_GAP")
    return verdict


def _conversation_decide(env: Envelope, task, prior, rules, unresolved=frozenset()) -> Verdict:
    """A message whose task_id is its trace_id speaks about the conversation: only a fence and
    acknowledgements of it may; they are recorded (deduplicated by key and digest) and never
    touch task state."""
    if env.type not in ("fence", "ack"):
        return Verdict(
            Decision.REJECTED, f"{env.type} names the trace {env.trace_id} as its task; only a fence or an ack may",
            code="E_NOT_A_TASK",
        )
    for p in prior:
        if p.payload_digest == env.payload_digest and p.digest_scheme == env.digest_scheme:
            return Verdict(Decision.DUPLICATE, f"{env.type} {env.idempotency_key} already recorded", duplicate_of=p)
    if prior:
        return Verdict(Decision.REJECTED, f"key {env.idempotency_key} was recorded with another payload",
                       code="E_CONVERSATION_CONFLICT")
    return Verdict(Decision.ACCEPTED, f"{env.type} recorded for conversation {env.trace_id}", record_intent=True)


def _reconcile_decide(env: Envelope, task, prior, rules, unresolved, open_now: list[dict]) -> Verdict:
    """A reviewer's decision on an open reconciliation: keep the committed effect, or retract it (a
    compensating effect). Never a move of the task's state; refused unless a reviewer decides a
    reconciliation that is open, citing retained evidence."""
    for p in prior:
        if p.payload_digest == env.payload_digest and p.digest_scheme == env.digest_scheme:
            return Verdict(Decision.DUPLICATE, f"reconciliation {env.idempotency_key} already recorded", duplicate_of=p)
    if role_of(env.sender) != "reviewer":
        return Verdict(Decision.REJECTED, f"{env.sender} is a {role_of(env.sender)}; only a reviewer reconciles",
                       code="E_ROLE_NOT_ALLOWED")
    if env.payload.get("reconcile") not in RECONCILE_DECISIONS:
        return Verdict(Decision.REJECTED, f"reconcile {env.payload.get('reconcile')!r}; expected one of: 'keep' or "
                       "'retract'", code="E_UNKNOWN_VALUE")
    if not env.evidence_refs:
        return Verdict(Decision.REJECTED, "a reconciliation must cite retained evidence in evidence_refs",
                       code="E_EVIDENCE_REQUIRED")
    if unresolved:
        return Verdict(Decision.REJECTED, f"evidence_refs {', '.join(sorted(unresolved))} name no stored artifact or "
                       "message", code="E_EVIDENCE_UNRESOLVED")
    of = env.payload.get("of")
    if not any(o["message_id"] == of for o in open_now):
        opened = ", ".join(o["message_id"] for o in open_now) or "none"
        return Verdict(Decision.REJECTED, f"no open reconciliation of {env.task_id} is about {of!r} (open: {opened})",
                       code="E_NOT_RECONCILING")
    return Verdict(Decision.ACCEPTED, f"reconciliation of {of}: {env.payload['reconcile']}, decided by {env.sender}",
                   record_intent=True)


def _check_verdict(v) -> Verdict:
    if not isinstance(v, Verdict) or not isinstance(v.decision, Decision):
        raise ProtolabError(
            f"the intake function returned {type(v).__name__}, not a Verdict with a Decision",
            code="E_BAD_VERDICT",
        )
    return v


def _ruled_key(rule, env: Envelope, delivery_id: int) -> str | None:
    """A pluggable effect-commit rule's key for ``env``'s side effect (``None``: nothing commits)."""
    try:
        key = rule(env, delivery_id)
    except ProtolabError:
        raise
    except (Exception, SystemExit) as e:
        what = f"called sys.exit({e.code!r})" if isinstance(e, SystemExit) else f"raised {type(e).__name__}"
        raise ProtolabError(f"the effect rule {what} on {env.message_id}: {e}{raised_at(e)}",
                            code="E_EFFECT_RULE") from e
    if key is not None and (not isinstance(key, str) or not key):
        raise ProtolabError(f"the effect rule returned {key!r} for {env.message_id}; expected a non-empty string or None",
                            code="E_EFFECT_RULE")
    return key


def artifact_event(content, kind: str, task_id: str | None, message_id: str | None) -> EventDraft:
    """The event that stores ``content`` content-addressed (its ref is the digest of its bytes)."""
    raw = _digest.canonical_bytes(content, "json-sorted-v1")
    ref, size = "sha256:" + hashlib.sha256(raw).hexdigest(), len(raw)
    return ev_.ArtifactStored(ref=ref, scheme="json-sorted-v1", kind=kind, size=size, content=content).draft(task_id, message_id)


def _intent_event(env: Envelope, arrival: int, decision: str, state: str | None, version: int | None) -> EventDraft:
    return ev_.IntentRecorded(
        key=env.idempotency_key, digest=env.payload_digest, scheme=env.digest_scheme, arrival=arrival,
        decision=decision, payload=env.payload, result={"decision": decision, "state": state, "state_version": version},
    ).drafted(env.task_id, env.message_id, env.payload_json())


#: the event types after which ``view_after`` does not follow the task (a new machine, a reviewer's
#: decision): it answers None, and the caller reads the task again
_GIVES_UP = frozenset({"machine_loaded", "review_decided", "reconciliation_resolved"})


def view_after(task: TaskView | None, task_id: str, events: list[EventDraft]) -> TaskView | None:
    """What a fresh read of ``task_id`` shows once ``events`` have folded, from ``task`` (its view before
    them, read in the same transaction): the reducer's changes to the columns a view shows, made to the
    view. None when the task does not exist after them, or when an event it does not follow came by (read
    it again). ``tests/test_simulator.py`` checks it against a fresh read after every delivery of whole runs."""
    cols = None if task is None else dict(vars(task))  # (the view's fields, changed event by event)
    for ev in events:
        if ev.task_id != task_id:
            continue
        t = ev.type
        if t == "task_created":
            e: Any = ev.event()  # (the type, t, chose its class)
            cols = vars(TaskView(task_id, TaskState.PENDING, 0, e.machine_version, budget_left=e.budget)).copy()
        elif cols is None or t in _GIVES_UP:
            return None
        elif t == "transition_applied":
            e = ev.event()
            if e.to == "needs_review":
                cols["trusted"] = False
            elif e.from_state == "needs_review":
                cols["trusted"] = True
            cols["state"], cols["state_version"] = STATE_BY_NAME.get(e.to) or TaskState(e.to), cols["state_version"] + 1
            if e.assignee is not None:
                cols["assignee"] = e.assignee
        elif t == "lease_granted":
            e = ev.event()
            cols["lease_holder"], cols["lease_version"] = e.holder, e.lease_version
        elif t == "lease_expired":
            cols["lease_holder"] = None
        elif t == "budget_charged":
            cols["budget_left"] -= ev.event().amount  # type: ignore[attr-defined]  # budget_charged's event
        elif t == "conflict_recorded":
            cols["trusted"] = False
        elif t == "effect_committed":
            cols["has_effects"] = True
    return None if cols is None else TaskView(**cols)


def _reconciliations(ctx: Context, tid: str, mid: str, status: str | None, *, always: bool = False) -> list[EventDraft]:
    """What a contradiction of ``tid``'s recorded result sends to reconciliation: the task's own committed
    effects (a publication made from the result now in doubt; never a reviewer's retraction, which is not
    itself kept or retracted) and the effects of other tasks committed from its products. ``always``: one
    open reconciliation even when no effect rests on it (a contradiction the fence kept from freezing the
    task is a reviewer's to see)."""
    out = []
    own = [e["effect_key"] for e in ctx.task_effects if e.get("kind") != "retract"]
    if own or (always and not ctx.resting_on):
        out.append(ev_.ReconciliationRequired(effects=own, status=status).draft(tid, mid))
    by_task: dict[str, list[str]] = {}
    for e in ctx.resting_on:
        by_task.setdefault(e["task_id"], []).append(e["effect_key"])
    for dep, keys in sorted(by_task.items()):
        out.append(ev_.ReconciliationRequired(effects=keys, status="untrusted input", input=tid).draft(dep, mid))
    return out


def plan(env: Envelope, ctx: Context, v: Verdict) -> tuple[list[EventDraft], str | None, int | None]:
    """Turn a verdict into the events that record it; also return the task's state and version after them.
    ``env`` is the envelope as the logs keep it (redacted where the policy redacts). Evidence that
    resolves to nothing stored is recorded last, for every decision but a refusal."""
    events, state, version = _plan(env, ctx, v)
    if ctx.unresolved and v.decision != Decision.REJECTED:
        events.append(ev_.EvidenceUnresolved(refs=sorted(ctx.unresolved)).draft(env.task_id, env.message_id))
    return events, state, version


def _plan(env: Envelope, ctx: Context, v: Verdict) -> tuple[list[EventDraft], str | None, int | None]:
    task, rules = ctx.task, ctx.rules
    tid, mid = env.task_id, env.message_id
    out: list[EventDraft] = []
    d = v.decision
    state = task.state.value if task else None
    version = task.state_version if task else None

    if d == Decision.DUPLICATE:
        p = v.duplicate_of
        assert p is not None
        out.append(
            ev_.DuplicateRecorded(
                key=p.idempotency_key, digest=p.payload_digest, scheme=p.digest_scheme, first_message_id=p.message_id,
                reused=p.result,
            ).draft(tid, mid)
        )
        return out, state, version

    if d == Decision.REJECTED:
        target = None
        if env.type not in ("ack",):
            t = target_state(env)
            target = t.value if t else None
        out.append(
            ev_.TransitionRejected(
                code=v.code, reason=v.reason, type_=env.type, sender=env.sender,  # type: ignore[arg-type]  # Optional as the envelope gives it; the event keeps what was sent
                from_state=task.state.value if task else None, proposed=target, task_id=tid,
            ).draft(tid if task is not None else None, mid)
        )
        if v.needs_reconciliation:  # refused after the fence, but it contradicts what was recorded
            if v.conflict_with is not None:
                out += _reconciliations(ctx, tid, mid, "conflict after the fence", always=True)
            else:
                out += _reconciliations(replace(ctx, resting_on=()), tid, mid, env.payload.get("status"))
        return out, state, version

    if v.create:
        budget = env.payload.get("budget", DEFAULT_BUDGET)
        out.append(
            ev_.TaskCreated(
                trace_id=env.trace_id, goal=env.payload.get("goal", ""), budget=budget, machine_version=rules.version,
            ).draft(tid, mid)
        )
        state, version = TaskState.PENDING.value, 0

    move_events: list[EventDraft] = []
    if v.move is not None:
        m = v.move
        move_events.append(
            ev_.TransitionApplied(
                from_state=m.from_state.value, to=m.to_state.value, from_version=version, reason=m.reason,
                executor=m.executor, role=m.role, machine_version=rules.version,
                assignee=env.recipient if env.type == "task_request" and d == Decision.ACCEPTED else None,
            ).draft(tid, mid)
        )
        state, version = m.to_state.value, (version or 0) + 1

    if d == Decision.CONFLICT:
        first = v.conflict_with
        assert first is not None
        a1 = artifact_event(first.payload, "conflicting-payload", tid, first.message_id)
        a2 = artifact_event(env.payload, "conflicting-payload", tid, mid)
        out += [a1, a2, _intent_event(env, ctx.next_arrival, d.value, state, version)]
        out.append(
            ev_.ConflictRecorded(
                key=env.idempotency_key,
                first={"message_id": first.message_id, "digest": first.payload_digest, "scheme": first.digest_scheme,
                       "artifact": a1.data["ref"], "arrival": first.arrival},
                second={"message_id": mid, "digest": env.payload_digest, "scheme": env.digest_scheme,
                        "artifact": a2.data["ref"], "arrival": ctx.next_arrival},
                state_version=task.state_version if task else None,
                trusted=False,
            ).draft(tid, mid)
        )
        # Effects already committed from this task's result or its products now rest on an untrusted
        # input: each goes to reconciliation (a reviewer keeps or retracts it).
        move_events += _reconciliations(ctx, tid, mid, "conflict")
        return out + move_events, state, version

    if d == Decision.LATE:
        out.append(_intent_event(env, ctx.next_arrival, d.value, state, version))
        out.append(
            ev_.LateRecorded(type_=env.type, status=env.payload.get("status"), state=state, reason=v.reason).draft(tid, mid)  # type: ignore[arg-type]  # Optional as the envelope gives it; the event keeps what was sent
        )
        if v.needs_reconciliation:
            # The task's own effects, not a reviewer's compensation of one (a retraction is never
            # itself kept or retracted: that would withdraw the publication a second time).
            keys = [e["effect_key"] for e in ctx.task_effects if e.get("kind") != "retract"]
            out.append(ev_.ReconciliationRequired(effects=keys, status=env.payload.get("status")).draft(tid, mid))
        return out, state, version

    # ACCEPTED
    out += move_events
    if env.type == "task_started":
        out.append(ev_.TaskStarted(worker=env.sender, lease_version=v.grant_lease).draft(tid, mid))
    if env.type == "task_result" and env.payload.get("tool") and env.payload.get("status") != "succeeded":
        out.append(ev_.ToolFailed(tool=env.payload["tool"], status=env.payload.get("status"),  # type: ignore[arg-type]  # Optional as the envelope gives it; the event keeps what was sent
                                  error=env.payload.get("error")).draft(tid, mid))
    if v.grant_lease is not None:
        out.append(ev_.LeaseGranted(holder=env.sender, lease_version=v.grant_lease).draft(tid, mid))
        out.append(ev_.BudgetCharged(amount=ATTEMPT_COST, reason=f"attempt {v.grant_lease}").draft(tid, mid))
    if ctx.reported_budget is not None and ctx.task is not None and ctx.reported_budget != ctx.task.budget_left:
        # A runtime that believes a self-reported budget_left sets the task's budget to it: a charge
        # (negative: a credit) that no allotment and no attempt accounts for.
        out.append(ev_.BudgetCharged(amount=ctx.task.budget_left - ctx.reported_budget,
                                     reason=f"budget_left {ctx.reported_budget} reported by {env.sender}").draft(tid, mid))
    if env.type == "ack":
        out.append(ev_.AckRecorded(of=env.payload.get("of"), from_sender=env.sender).draft(tid, mid))
    if env.type == "fence":
        out.append(ev_.FenceRecorded(to=env.payload["to"], terminal=env.payload["terminal"]).draft(tid, mid))
    if is_reconciliation(env):
        of = env.payload["of"]
        opened = next((o for o in ctx.open_reconciliations if o["message_id"] == of), None)
        effects = opened["effects"] if opened else []
        out.append(ev_.ReconciliationResolved(
            of=of, decision=env.payload["reconcile"], reviewer=env.sender, evidence=list(env.evidence_refs),
            effects=effects).draft(tid, mid))
        if env.payload["reconcile"] == "retract":
            by_key = {e["effect_key"]: e for e in ctx.task_effects}
            for k in effects:
                orig = by_key.get(k)
                retract = f"retract:{k}"
                if orig is not None and retract not in ctx.committed_keys:
                    # A compensating effect: the publication is withdrawn, under its own unique key.
                    out.append(ev_.EffectCommitted(
                        effect_key=retract, kind="retract", target=orig["target"],
                        result_digest=env.payload_digest).draft(tid, mid))
    if env.type == "review_decision" and v.move is not None:
        out.append(ev_.ReviewDecided(
            decision=env.payload["decision"], reviewer=env.sender, evidence=list(env.evidence_refs)).draft(tid, mid))
    key = ctx.effect_key
    if v.held:
        out.append(ev_.InputUntrusted(refs=list(v.held), effect_key=key).draft(tid, mid))
    elif key is not None and env.payload.get("status") == "succeeded":
        eff = env.payload["effect"]
        if env.payload.get("partial") is True:
            # Schema 1.1: the sender said its product covers only part of the goal; nothing is published
            # from it (a consumer that reads only 1.0 never sees the field, and publishes).
            out.append(ev_.EffectWithheld(effect_key=key, reason="the result is marked partial").draft(tid, mid))
        elif key in ctx.committed_keys:
            out.append(ev_.EffectSuppressed(effect_key=key).draft(tid, mid))
        else:
            out.append(ev_.EffectCommitted(
                effect_key=key, kind=eff["kind"], target=eff["target"], result_digest=env.payload_digest).draft(tid, mid))
    out.append(_intent_event(env, ctx.next_arrival, d.value, state, version))
    return out, state, version
