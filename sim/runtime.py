"""The runtime: applies one delivery atomically.

Agents only propose (they send envelopes); the runtime is the only writer of events
and state. For each delivery it reads what intake needs from the store, asks the
intake function (:func:`sim.intake.decide`, or any function with the same
signature, such as a student's) for a verdict, and turns the verdict into events in
one transaction: the delivery row, its events and the state they fold into commit
together. A lost compare-and-swap rolls the whole delivery back and decides again
from a fresh read.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field, replace

from . import digest as _digest
from . import planner as _planner
from . import versions as _versions
from .conversation import taken_in_epoch
from .envelope import RECONCILE_DECISIONS, Envelope, build_envelope, role_of, scheme_assumed
from .errors import ProtolabError, StaleWrite, StoreError
from .frozen import quick_init
from .intake import Decision, TaskView, Verdict, decide as _reference_decide
from .machine import TaskState
from . import events as ev_
from .planner import ATTEMPT_COST, DEFAULT_BUDGET, Context, IntakeFn, effect_key  # noqa: F401  (re-exported)
from .store import Store

from .policy import SAFE, Policy
from .privacy import is_redacted

__all__ = [
    "Outcome",
    "IntakeFn",
    "deliver",
    "resolve_reconciliation",
    "put_artifact",
    "review",
    "DEFAULT_BUDGET",
    "ATTEMPT_COST",
    "effect_key",
    "record_fault",
    "record_sent_again",
    "record_agent",
    "record_negotiation",
    "record_copy_dropped",
    "expire_lease",
    "digest_as_logged",
]


@quick_init
@dataclass(frozen=True)
class Outcome:
    """What one delivery did. ``reused`` is the stored result a duplicate handed back."""

    delivery_id: int
    tick: int
    message_id: str
    task_id: str
    type: str
    decision: str
    code: str | None
    reason: str
    state: str | None
    state_version: int | None
    reused: dict | None = None
    effects: tuple[str, ...] = ()
    #: whether the delivery changed what a TaskView of its task shows (False: an ack, a duplicate, a
    #: refusal: a view read before it is still true). Not part of what a delivery reports.
    task_changed: bool = field(default=True, compare=False, repr=False)
    #: (the task's view before the delivery and the delivery's events, for ``task_after``)
    folded: tuple | None = field(default=None, compare=False, repr=False)

    @property
    def task_after(self) -> TaskView | None:
        """When the delivery changed its task: the task's view after it (``sim.planner.view_after``,
        worked out when asked; None: read it again)."""
        if not self.task_changed or self.folded is None:
            return None
        return _planner.view_after(self.folded[0], self.task_id, self.folded[1])

    def to_dict(self) -> dict:
        d = asdict(self)
        d["effects"] = list(self.effects)
        del d["task_changed"], d["folded"]
        return d


#: The event types that change a task's row or its effects (what a TaskView shows): every type whose
#: fold changes state, but those known to touch only other tables or counters a view leaves out
#: (tests/test_simulator.py appends each alone to a task and reads its view before and after).
_CHANGES_VIEW = frozenset(t for t, cls in ev_.REGISTRY.items() if cls.CHANGES_STATE) - {
    "intent_recorded", "duplicate_recorded", "transition_rejected", "late_recorded", "artifact_stored"}


_sha256 = hashlib.sha256


def _envelope_digest(env: Envelope) -> str:
    # The payload was checked when the envelope was parsed or built, so the sorted JSON form
    # is exactly json-sorted-v1 here; hashing it directly skips a second walk of the payload.
    return "sha256:" + _sha256(env.to_json().encode("utf-8")).hexdigest()


def _digest_refusal(env: Envelope) -> str | None:
    """Why ``env``'s payload is not the one its ``payload_digest`` was made of (None: it is), digested again
    under its ``digest_scheme`` whoever built the envelope: parsed from JSON, or made in memory by the
    simulator, whose transport may have changed the payload since (fault ``garble``). Under json-sorted-v1
    the bytes hashed are the text the message log keeps: kept on the envelope when they match, so writing
    the message row does not spell the payload a second time; an envelope that keeps that text already (it
    was parsed with its digest checked, or built with its digest made from it) is held to it by writing the
    payload again and comparing bytes (a payload changed since, in place too, no longer spells it)."""
    scheme = env.digest_scheme
    if scheme == _digest.DEFAULT_SCHEME:
        kept = env.__dict__.get("_payload_json")  # (the text its digest was checked against, or made from)
        if kept is not None and _digest.writes_as(env.payload, kept):
            return None  # the payload is still the one that text spells: no walk, no hash
    try:
        raw = _digest.canonical_bytes(env.payload, scheme)
    except ProtolabError as e:  # (a value the scheme cannot write, or a scheme nobody knows)
        return (f"{env.message_id}'s payload cannot be digested under {scheme} ({e}), so nothing shows it is the "
                f"payload its payload_digest {env.payload_digest} was made of; nothing in it is read")
    actual = "sha256:" + _sha256(raw).hexdigest()
    if actual != env.payload_digest:
        return (f"payload_digest {env.payload_digest[:19]}… is not the {scheme} digest of the payload "
                f"{env.message_id} carries ({actual[:19]}…): the payload was changed after it was digested; nothing "
                "in it is read")
    if scheme == _digest.DEFAULT_SCHEME and "_payload_json" not in env.__dict__:
        env.__dict__["_payload_json"] = raw.decode("utf-8")  # (the store's text of it, as a parse keeps it)
    return None


def digest_as_logged(row: dict, reason: str | None = None) -> bool | str | None:
    """For a message log's row delivered again (a re-delivery: sim.replay, sim.labs.verify), what ``deliver``'s
    ``digest_ok`` must be: None when the logged payload shows everything (digest it again, as for any
    envelope); for a payload the log keeps with [redacted] values (sim.privacy), which cannot be digested,
    the verdict recorded when it was first delivered: True, or, refused with E_DIGEST_MISMATCH then, the
    reason recorded (``reason``, the delivery's; else one that says so)."""
    if not is_redacted(row.get("payload")):
        return None
    if row.get("delivery_code", row.get("code")) != "E_DIGEST_MISMATCH":
        return True
    return reason or (f"{row.get('message_id')}'s payload was not the one its payload_digest was made of when it "
                      "was first delivered (the log keeps [redacted] values, which cannot be digested again)")


def deliver(
    store: Store,
    env: Envelope,
    *,
    decide: IntakeFn | None = None,
    policy: "Policy | None" = None,
    tick: int | None = None,
    sent: tuple[int, int] | None = None,
    attempts: int = 3,
    digest_ok: bool | str | None = None,
) -> Outcome:
    """Deliver one envelope: one transaction, retried if a compare-and-swap loses a race.

    ``policy`` (default :data:`sim.policy.SAFE`) chooses the intake function and how side
    effects are keyed; ``decide`` overrides just the intake function (a student's, say).
    ``tick`` pins the logical time (the simulator delivers several messages per round);
    by default each delivery is the next tick. ``sent`` is the transport's (per-sender
    sequence, sender generation) for the message, kept in the message log. ``digest_ok``: None (every
    envelope from a sender) digests the payload again under a policy that checks digests; a re-delivery of a
    log's copy whose [redacted] values cannot be digested passes the verdict recorded for it
    (:func:`digest_as_logged`: True, or the reason it was refused).
    """
    policy = policy or SAFE
    decide = decide or policy.decide
    for attempt in range(attempts):
        try:
            with store.transaction():
                store.prefetch(env.message_id, env.task_id, env.idempotency_key)
                return _deliver_once(store, env, decide, policy, tick, sent, digest_ok)
        except StaleWrite:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _deliver_once(
    store: Store, env: Envelope, decide: IntakeFn, policy: "Policy", at: int | None, sent: tuple[int, int] | None,
    digest_ok: bool | str | None = None,
) -> Outcome:
    tick = store.advance(to=at)
    # What the logs keep: under a policy that redacts, [redacted] for each sensitive value the run
    # declared (sim.privacy). The digests stay those of what was sent, so they still verify, and
    # deduplication and conflict detection (which compare digests) are unchanged.
    logged = env
    if policy.redact:
        private = store.privacy()
        if private and private.in_clear(env.payload):
            logged = replace(env, payload=private.redact(env.payload))
    # Whatever built the envelope, its payload is digested again before anything reads it (sim.policy).
    refused_digest = None
    if policy.checks_digests:
        if digest_ok is None:
            refused_digest = _digest_refusal(env)
        elif digest_ok is not True:  # (a log's redacted copy of a message refused so when it was first delivered)
            refused_digest = digest_ok if isinstance(digest_ok, str) else (
                f"{env.message_id}'s payload was not the one its payload_digest was made of when it was first "
                "delivered (as recorded)")
    msg_seq, new = store.record_message(logged, _envelope_digest(env), sent)
    if policy.reads_as is not None:
        # A lenient reader: the message log keeps what was sent, the runtime acts on what it understood.
        env, logged = _versions.read_as(env, policy.reads_as), _versions.read_as(logged, policy.reads_as)
    ctx = read_context(store, env, msg_seq, hold_untrusted=policy.hold_untrusted)
    if refused_digest is not None:
        ctx = replace(ctx, digest_refusal=refused_digest)
    elif policy.closed_payloads and _versions.shape_refusal(env) is not None:
        # (the run's declared sensitive fields read only when a field is not in the kit's own shapes)
        ctx = replace(ctx, payload_refusal=_versions.shape_refusal(env, allowed=frozenset(store.privacy().sensitive)))
    elif policy.believes_payloads and type(env.payload.get("budget_left")) is int:
        ctx = replace(ctx, reported_budget=env.payload["budget_left"])
    verdict = _planner.judge(env, ctx, decide, hold_untrusted=policy.hold_untrusted)
    copy = not new and not ctx.id_reused  # the envelope was delivered before: the network's copy of it
    leak = _planner.audience_refusal(env) if policy.conversation_rules else None
    bound = None
    if policy.conversation_rules and leak is None:
        refused_before = _refused_before(store, env) if copy else None
        if refused_before is not None:  # the same envelope again: refused as it was the first time
            bound = refused_before
        elif not (copy and verdict.decision == Decision.DUPLICATE):
            bound = _bounds(store, env, tick)  # (a copy of one the conversation took never reaches it again)
    if leak is not None:  # a recipient outside the message's audience: refused, whatever intake made of it
        verdict = leak
    elif bound is not None:  # outside the conversation's declared bounds: refused, whatever intake made of it
        verdict = _planner.refused(env, verdict, *bound)
    elif policy.conversation_rules and _planner.fence_applies(env, verdict, copy=copy) \
            and store.fenced_now(env.trace_id):
        verdict = _planner.after_fence(env, verdict)  # nothing is taken after the fence
    elif policy.conversation_rules and _planner.wants_conversation_check(env, verdict):
        seq_used, stale = (False, False) if sent is None else store.numbering_marks(
            env.task_id, env.sender, sent[1] or 1, sent[0], env.message_id, env.idempotency_key,
            _planner.LIVE_BODY_RESTARTS)
        # (a number another message of the body took, about any task: the sender's sequence went back)
        seq_used = seq_used or (sent is not None and store.number_taken_before(env.message_id))
        verdict = _planner.conversation_rule(env, verdict, fenced=store.fenced_now(env.trace_id), seq_used=seq_used,
                                             stale_body=stale)
    ctx = read_for_plan(store, env, ctx, verdict, policy)
    delivery_id = ctx.delivery_id
    events, state, version = _planner.plan(logged, ctx, verdict)
    if scheme_assumed(env):  # the seed's twelve fields: the scheme the digest was read under, on record
        events.insert(0, ev_.DigestSchemeAssumed(scheme=env.digest_scheme).draft(
            env.task_id if ctx.task is not None else None, env.message_id))
    store.append_events(events, delivery_id=delivery_id)
    effects = [ev.data["effect_key"] for ev in events if ev.type == "effect_committed"]
    store.record_delivery(delivery_id, msg_seq, env, verdict.decision.value, verdict.code, verdict.reason, state, version)
    reused = verdict.duplicate_of.result if verdict.duplicate_of is not None else None
    changed = any(ev.type in _CHANGES_VIEW for ev in events)
    return Outcome(
        delivery_id, tick, env.message_id, env.task_id, env.type, verdict.decision.value, verdict.code,
        verdict.reason, state, version, reused, tuple(effects), changed, (ctx.task, events) if changed else None,
    )


def _refused_before(store: Store, env: Envelope) -> tuple[str, str] | None:
    """When this very envelope was delivered before and refused under one of the conversation's rules, that
    refusal (code, reason): the network's copy of a message the conversation refused is refused alike."""
    first = store.first_outcome(env.task_id if store.get_task(env.task_id) is not None else None, env.message_id)
    if first is not None and first["type"] == "transition_rejected" and first.get("code") in _planner.CONVERSATION_CODES:
        return first["code"], f"the same envelope again: {first.get('reason')}"
    return None


def _bounds(store: Store, env: Envelope, tick: int) -> tuple[str, str] | None:
    """Which of the run's declared bounds ``env``, delivered at ``tick``, breaks (sim.planner.bounds_refusal;
    None for a run that declared none). The messages the conversation took are counted only once there have
    been enough deliveries to fill it. A reviewer's decision that reopens the conversation after its fence
    is the first message of the next epoch."""
    b = store.bounds()
    if b is None:
        return None
    reopens = env.type == "review_decision" and env.task_id != env.trace_id and store.fenced_now(env.trace_id)
    deadline_ticks = b["deadline_ticks"]
    epoch, opened = store.conversation_epoch(env.trace_id)  # (remembered by the handle: a lookup a delivery)
    if reopens:  # a reviewer's decision after the fence opens the next epoch: its deadline starts with it
        epoch, opened = env.spoken_epoch, tick
    ceiling, room = b["message_ceiling"], _planner.ceiling_room(b.get("acknowledgers", 0))
    taken = None
    if not reopens and store.next_delivery_id() > ceiling - room:
        taken = taken_in_epoch(store, epoch)
    return _planner.bounds_refusal(env, trace=b.get("trace"), epoch=epoch, at=store.time_at(tick),
                                   deadline=store.time_at(opened + deadline_ticks), taken=taken, ceiling=ceiling,
                                   room=room)


def read_context(store: Store, env: Envelope, msg_seq: int, *, hold_untrusted: bool = True) -> Context:
    """What judging ``env`` needs from the store, read up front (inside the delivery's transaction)."""
    task = store.get_task(env.task_id)
    return Context(
        task=task,
        prior=store.intents_for(env.task_id, env.idempotency_key),
        rules=store.rulebook(task.machine_version if task else None),
        # A message cannot be its own evidence (it is stored by now, so exclude it explicitly).
        unresolved=store.unresolved_refs(env.evidence_refs) | frozenset(r for r in env.evidence_refs if r == env.message_id),
        id_reused=msg_seq != store.first_msg_seq(env.message_id),
        next_arrival=store.next_arrival(),
        delivery_id=store.next_delivery_id(),
        open_reconciliations=(tuple(store.open_reconciliations(env.task_id))
                              if _planner.is_reconciliation(env) and env.task_id != env.trace_id else ()),
        untrusted_inputs=(tuple(store.untrusted_inputs(env.evidence_refs, besides=env.task_id))
                          if _planner.wants_untrusted_check(env, hold_untrusted) else ()),
    )


def read_for_plan(store: Store, env: Envelope, ctx: Context, verdict: Verdict, policy: "Policy") -> Context:
    """What planning ``verdict`` needs beyond what judging read: only what this verdict uses (what
    rests on a task that just became untrusted, the task's effects, which keys are committed)."""
    d = verdict.decision
    more: dict = {}
    if d == Decision.CONFLICT or (d == Decision.REJECTED and verdict.needs_reconciliation):
        more["resting_on"] = tuple(store.effects_resting_on(env.task_id))
        more["task_effects"] = tuple(store.effects_of(env.task_id))
    elif d == Decision.LATE and verdict.needs_reconciliation:
        more["task_effects"] = tuple(store.effects_of(env.task_id))
    elif d == Decision.ACCEPTED:
        key = _planner.planned_effect_key(env, ctx.delivery_id, idempotent_effects=policy.idempotent_effects,
                                          effect_rule=policy.effect_rule)
        candidates = {key} if key is not None and env.payload.get("status") == "succeeded" else set()
        if _planner.is_reconciliation(env) and env.payload.get("reconcile") == "retract":
            more["task_effects"] = tuple(store.effects_of(env.task_id))
            candidates |= {f"retract:{k}" for o in ctx.open_reconciliations for k in o["effects"]}
        if key is not None or candidates:  # (otherwise the context already says so: no key, none committed)
            more["effect_key"] = key
            more["committed_keys"] = store.committed_among(candidates) if candidates else frozenset()
    return replace(ctx, **more) if more else ctx


def put_artifact(
    store: Store, content, *, kind: str = "document", task_id: str | None = None, tick: int | None = None
) -> str:
    """Store ``content`` (any JSON value) content-addressed; return its ``sha256:`` ref."""
    ev = _planner.artifact_event(content, kind, task_id, None)
    with store.transaction():
        store.advance(to=tick)
        store.append_event(ev)
    return ev.data["ref"]


def _record_transport(store: Store, event, *, task_id: str | None, message_id: str | None, tick: int | None) -> None:
    """Append one event about what the transport did, in its own transaction at round ``tick``."""
    with store.transaction():
        store.advance(to=tick)
        store.append_event(event.draft(task_id, message_id))


def record_fault(store: Store, fault: str, *, message_id: str | None, task_id: str | None, detail: dict, tick: int | None = None) -> None:
    """Record that the transport did something to the run (so the log says what was done)."""
    _record_transport(store, ev_.FaultInjected(fault=fault, detail=dict(detail)), task_id=task_id,
                      message_id=message_id, tick=tick)


def record_negotiation(store: Store, sender: str, offered, reads, chosen, *, task_id: str | None = None,
                       message_id: str | None = None, tick: int | None = None) -> None:
    """Record that ``sender`` and the runtime negotiated a schema version (sim.versions.negotiate)."""
    _record_transport(store, ev_.VersionNegotiated(sender=sender, offered=[str(v) for v in offered],
                                                   reads=[str(v) for v in reads],
                                                   chosen=None if chosen is None else str(chosen)),
                      task_id=task_id, message_id=message_id, tick=tick)


def record_agent(store: Store, event, *, tick: int | None = None) -> None:
    """Record what a process agent did wrong (sim.procagent: a refused line, an exit, a silence), at round ``tick``."""
    _record_transport(store, event, task_id=None, message_id=None, tick=tick)


def record_sent_again(store: Store, env, *, seq: int, generation: int, waiting: list[str], tick: int | None = None) -> None:
    """Record that the session sent ``env`` again: its number was missing and later ones waited (sim.session)."""
    _record_transport(store, ev_.MessageSentAgain(sender=env.sender, seq=seq, generation=generation,
                                                  waiting=list(waiting)),
                      task_id=env.task_id, message_id=env.message_id, tick=tick)


def record_copy_dropped(store: Store, env, *, tick: int | None = None) -> None:
    """Record that the session dropped the other copy of a message it had sent again (sim.session)."""
    _record_transport(store, ev_.MessageCopyDropped(sender=env.sender), task_id=env.task_id,
                      message_id=env.message_id, tick=tick)


def expire_lease(store: Store, task_id: str, *, tick: int | None = None) -> bool:
    """The runtime's lease monitor: a running task whose lease ran out goes to retry_wait.

    The holder keeps nothing: its lease_version is now stale, so a late commit from it is
    fenced. Returns False (and writes nothing) if the task is not running.
    """
    with store.transaction():
        task = store.get_task(task_id)
        if task is None or task.state != TaskState.RUNNING:
            return False
        rules = store.rulebook(task.machine_version)
        if not rules.allows(TaskState.RUNNING, TaskState.RETRY_WAIT, "runtime"):
            return False
        store.advance(to=tick)
        store.append_event(
            ev_.LeaseExpired(holder=task.lease_holder, lease_version=task.lease_version).draft(task_id, None)  # type: ignore[arg-type]  # Optional in the row; set on this path (a leased task, a task of a trace)
        )
        store.append_event(
            ev_.TransitionApplied(
                from_state="running", to="retry_wait", from_version=task.state_version,
                reason=f"lease v{task.lease_version} of {task.lease_holder} expired", executor="runtime",
                role="runtime", machine_version=task.machine_version, assignee=None,
            ).draft(task_id, None)
        )
    return True


def _require_retained(store: Store, evidence: list[str]) -> None:
    """A reviewer decides from retained evidence: at least one ref, each a stored message or artifact."""
    if not evidence:
        raise ProtolabError("cite at least one piece of retained evidence (--evidence)", code="E_EVIDENCE_REQUIRED")
    missing = store.unresolved_refs(evidence)
    if missing:
        raise ProtolabError(
            f"evidence {', '.join(sorted(missing))} is not retained in this database (cite a message id or an artifact ref)",
            code="E_EVIDENCE_UNRESOLVED",
        )


def resolve_reconciliation(store: Store, task_id: str, decision: str, *, by: str, evidence: list[str],
                           of: str | None = None, note: str = "") -> Outcome:
    """A reviewer resolves an open reconciliation of ``task_id`` (the late message ``of``; default the
    oldest open one): ``keep`` the committed effect, or ``retract`` it with a compensating effect.
    Delivered as a review_decision envelope through intake, so it is in the message log."""
    if decision not in RECONCILE_DECISIONS:
        raise ProtolabError(f"decision {decision!r}; expected one of: 'keep' or 'retract'", code="E_UNKNOWN_VALUE")
    if role_of(by) != "reviewer":
        raise ProtolabError(f"{by} is a {role_of(by)}; only a reviewer reconciles", code="E_ROLE_NOT_ALLOWED")
    task = store.get_task(task_id)
    if task is None:
        raise StoreError(f"task {task_id} does not exist", code="E_UNKNOWN_TASK")
    open_now = store.open_reconciliations(task_id)
    if not open_now:
        raise ProtolabError(f"task {task_id} has no open reconciliation", code="E_NOT_RECONCILING")
    target = of or open_now[0]["message_id"]
    if not any(o["message_id"] == target for o in open_now):
        raise ProtolabError(f"no open reconciliation of {task_id} is about {target} (open: "
                            f"{', '.join(o['message_id'] for o in open_now)})", code="E_NOT_RECONCILING")
    _require_retained(store, evidence)
    payload = {"reconcile": decision, "of": target}
    if note:
        payload["note"] = note
    trace = store.task_trace(task_id)
    env = build_envelope(
        message_id=f"REC-{task_id}-{target}", trace_id=trace, task_id=task_id, sender=by,  # type: ignore[arg-type]  # Optional in the row; set on this path (a leased task, a task of a trace)
        recipient="manager", type="review_decision", payload=payload, idempotency_key=f"reconcile:{task_id}:{target}",
        created_at=store.time_at(store.tick + 1), evidence_refs=evidence, epoch=_epoch_of_decision(store, trace),  # type: ignore[arg-type]  # Optional in the row; set on this path (a leased task, a task of a trace)
    )
    return deliver(store, env)


def review(
    store: Store,
    task_id: str,
    decision: str,
    *,
    by: str,
    evidence: list[str],
    note: str = "",
    decide: IntakeFn = _reference_decide,
    read_version: int | None = None,
    tick: int | None = None,
    policy: "Policy | None" = None,
) -> Outcome:
    """A human reviewer's decision on a needs_review task, delivered as a review_decision envelope.

    Refused before anything is written unless ``by`` is a reviewer, the task is in
    needs_review, and every piece of evidence is retained in the store.

    ``read_version`` is a decision taken from an earlier read of the task (a reviewer looking at
    state_version N of a task that has moved on since): the reviewer's own check ran against that
    read, so it goes to intake carrying ``expected_state_version`` N, where compare-and-swap
    refuses it if the task is no longer at N. ``tick`` pins the logical time (a run's round);
    ``policy``, the run's policy (its intake decides; default: the reference intake, ``decide``).
    """
    if role_of(by) != "reviewer":
        raise ProtolabError(
            f"{by} is a {role_of(by)}; only a reviewer may decide a needs_review task", code="E_ROLE_NOT_ALLOWED"
        )
    if decision not in ("ready", "canceled"):
        raise ProtolabError(f"decision {decision!r}; expected one of: 'ready' or 'canceled'", code="E_UNKNOWN_VALUE")
    task = store.get_task(task_id)
    if task is None:
        raise StoreError(f"task {task_id} does not exist", code="E_UNKNOWN_TASK")
    if task.state != TaskState.NEEDS_REVIEW and read_version is None:
        raise ProtolabError(
            f"task {task_id} is {task.state.value}, not needs_review; there is nothing to reconcile",
            code="E_NOT_IN_REVIEW",
        )
    rules = store.rulebook(task.machine_version)
    if not rules.allows(TaskState.NEEDS_REVIEW, TaskState(decision), role_of(by)):
        raise ProtolabError(
            f"machine {task.machine_version} has no needs_review -> {decision} move for {by}",
            code="E_TRANSITION_NOT_ALLOWED",
        )
    _require_retained(store, evidence)
    trace = store.task_trace(task_id)
    version = task.state_version if read_version is None else read_version
    payload = {"decision": decision, "expected_state_version": version}
    if note:
        payload["note"] = note
    env = build_envelope(
        message_id=f"REV-{task_id}-v{task.state_version}" if read_version is None else f"REV-{task_id}-v{version}-{decision}",
        trace_id=trace,  # type: ignore[arg-type]  # Optional in the row; set on this path (a leased task, a task of a trace)
        task_id=task_id,
        sender=by,
        recipient="manager",
        type="review_decision",
        payload=payload,
        idempotency_key=f"review:{task_id}:v{task.state_version}" if read_version is None else f"review:{task_id}:v{version}:{decision}",
        created_at=store.time_at(store.tick + 1),
        evidence_refs=evidence,
        epoch=_epoch_of_decision(store, trace),  # type: ignore[arg-type]  # Optional in the row; set on this path (a leased task, a task of a trace)
    )
    return deliver(store, env, decide=decide if policy is None else None, policy=policy, tick=tick)


def _epoch_of_decision(store: Store, trace: str) -> int | None:
    """The epoch a reviewer's decision speaks in: the conversation's, or the next one when the conversation
    is fenced (the decision reopens it). None for the first (an envelope names no epoch then)."""
    epoch = store.conversation_epoch(trace)[0] + (1 if store.fenced_now(trace) else 0)
    return epoch if epoch > 1 else None
