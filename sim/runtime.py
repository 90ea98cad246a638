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

from dataclasses import asdict, dataclass, replace
from typing import Callable

from . import digest as _digest
from .envelope import RECONCILE_DECISIONS, Envelope, build_envelope, role_of
from .errors import ProtolabError, StaleWrite, StoreError
from .intake import Decision, Move, TaskView, Verdict, decide as _reference_decide
from .machine import RuleBook, TaskState
from . import events as ev_
from .events import EventDraft
from .store import Store

from .policy import Policy

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
    "expire_lease",
]

DEFAULT_BUDGET = 5
ATTEMPT_COST = 1

IntakeFn = Callable[[Envelope, "TaskView | None", tuple, RuleBook, frozenset], Verdict]


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

    def to_dict(self) -> dict:
        d = asdict(self)
        d["effects"] = list(self.effects)
        return d


def effect_key(env: Envelope) -> str | None:
    """The unique key of the side effect a successful result asks for, if any."""
    eff = env.payload.get("effect") if env.type == "task_result" else None
    if not eff:
        return None
    return f"{eff['kind']}:{eff['target']}:{env.task_id}"


def _envelope_digest(env: Envelope) -> str:
    # The payload was checked when the envelope was parsed or built, so the sorted JSON form
    # is exactly json-sorted-v1 here; hashing it directly skips a second walk of the payload.
    import hashlib

    return "sha256:" + hashlib.sha256(env.to_json().encode("utf-8")).hexdigest()


def deliver(
    store: Store,
    env: Envelope,
    *,
    decide: IntakeFn | None = None,
    policy: "Policy | None" = None,
    tick: int | None = None,
    sent: tuple[int, int] | None = None,
    attempts: int = 3,
) -> Outcome:
    """Deliver one envelope: one transaction, retried if a compare-and-swap loses a race.

    ``policy`` (default :data:`sim.policy.SAFE`) chooses the intake function and how side
    effects are keyed; ``decide`` overrides just the intake function (a student's, say).
    ``tick`` pins the logical time (the simulator delivers several messages per round);
    by default each delivery is the next tick. ``sent`` is the transport's (per-sender
    sequence, sender generation) for the message, kept in the message log.
    """
    from .policy import SAFE

    policy = policy or SAFE
    decide = decide or policy.decide
    for attempt in range(attempts):
        try:
            with store.transaction():
                return _deliver_once(store, env, decide, policy, tick, sent)
        except StaleWrite:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


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


def _deliver_once(
    store: Store, env: Envelope, decide: IntakeFn, policy: "Policy", at: int | None, sent: tuple[int, int] | None
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
    msg_seq, _new = store.record_message(logged, _envelope_digest(env), sent)
    task = store.get_task(env.task_id)
    prior = store.intents_for(env.task_id, env.idempotency_key)
    rules = store.rulebook(task.machine_version if task else None)
    if env.task_id == env.trace_id:
        # About the conversation, not a task (its fence and the acks of it): no intake policy applies.
        decide = _conversation_decide
    elif env.type == "review_decision" and "reconcile" in env.payload:
        # A reviewer resolving an open reconciliation of a finished task: not a move of its state.
        open_now = store.open_reconciliations(env.task_id)
        decide = lambda e, t, p, r, u=frozenset(): _reconcile_decide(e, t, p, r, u, open_now)  # noqa: E731
    # A message cannot be its own evidence (it is stored by now, so exclude it explicitly).
    unresolved = store.unresolved_refs(env.evidence_refs) | frozenset(r for r in env.evidence_refs if r == env.message_id)
    verdict = _check_verdict(decide(env, task, prior, rules, unresolved))

    # One message_id, two different envelopes, and not the same intent: the id was reused.
    if verdict.decision in (Decision.ACCEPTED, Decision.LATE) and msg_seq != store.first_msg_seq(env.message_id):
        verdict = Verdict(
            Decision.REJECTED,
            f"message_id {env.message_id} was already used for a different envelope",
            code="E_MESSAGE_ID_REUSED",
        )

    # What rests on an untrusted result commits nothing: a success citing an input of a task frozen
    # for review is frozen too (needs_review), until a reviewer releases the input and decides it.
    if (policy.hold_untrusted and verdict.decision == Decision.ACCEPTED and env.type == "task_result"
            and env.payload.get("status") == "succeeded" and task is not None):
        tainted = store.untrusted_inputs(env.evidence_refs, besides=env.task_id)
        if tainted and rules.allows(task.state, TaskState.NEEDS_REVIEW, "runtime"):
            names = ", ".join(f"{r[:15]}… of {t}" if r.startswith("sha256:") else f"{r} of {t}" for r, t in tainted)
            verdict = replace(
                verdict, reason=f"{verdict.reason}; but it rests on untrusted input ({names}): frozen for review, "
                                "no effect committed",
                move=Move(task.state, TaskState.NEEDS_REVIEW, f"rests on untrusted input ({names})", "runtime", "runtime"),
                held=tuple(r for r, _t in tainted),
            )

    delivery_id = store.next_delivery_id()
    events, state, version = plan_events(store, logged, task, rules, verdict, policy.idempotent_effects, delivery_id,
                                         effect_rule=policy.effect_rule)
    if unresolved and verdict.decision != Decision.REJECTED:
        events.append(
            ev_.EvidenceUnresolved(refs=sorted(unresolved)).draft(env.task_id, env.message_id)
        )
    effects = []
    for ev in events:
        store.append_event(ev, delivery_id=delivery_id)
        if ev.type == "effect_committed":
            effects.append(ev.data["effect_key"])
    store.record_delivery(delivery_id, msg_seq, env, verdict.decision.value, verdict.code, verdict.reason, state, version)
    reused = verdict.duplicate_of.result if verdict.duplicate_of is not None else None
    return Outcome(
        delivery_id, tick, env.message_id, env.task_id, env.type, verdict.decision.value, verdict.code,
        verdict.reason, state, version, reused, tuple(effects),
    )


def _intent_event(env: Envelope, store: Store, decision: str, state: str | None, version: int | None) -> EventDraft:
    return ev_.IntentRecorded(
        key=env.idempotency_key, digest=env.payload_digest, scheme=env.digest_scheme, arrival=store.next_arrival(),
        decision=decision, payload=env.payload, result={"decision": decision, "state": state, "state_version": version},
    ).draft(env.task_id, env.message_id)


def _artifact_event(content, kind: str, task_id: str | None, message_id: str | None) -> EventDraft:
    import hashlib

    raw = _digest.canonical_bytes(content, "json-sorted-v1")
    ref, size = "sha256:" + hashlib.sha256(raw).hexdigest(), len(raw)
    return ev_.ArtifactStored(ref=ref, scheme="json-sorted-v1", kind=kind, size=size, content=content).draft(task_id, message_id)


def plan_events(
    store: Store, env: Envelope, task: TaskView | None, rules: RuleBook, v: Verdict,
    idempotent_effects: bool = True, delivery_id: int = 0, effect_rule=None,
) -> tuple[list[EventDraft], str | None, int | None]:
    """Turn a verdict into the events that record it; also return the task's state and version after them."""
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
            from .intake import target_state

            t = target_state(env)
            target = t.value if t else None
        out.append(
            ev_.TransitionRejected(
                code=v.code, reason=v.reason, type_=env.type, sender=env.sender,
                from_state=task.state.value if task else None, proposed=target, task_id=tid,
            ).draft(tid if task is not None else None, mid)
        )
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
        a1 = _artifact_event(first.payload, "conflicting-payload", tid, first.message_id)
        a2 = _artifact_event(env.payload, "conflicting-payload", tid, mid)
        out += [a1, a2, _intent_event(env, store, d.value, state, version)]
        out.append(
            ev_.ConflictRecorded(
                key=env.idempotency_key,
                first={
                        "message_id": first.message_id,
                        "digest": first.payload_digest,
                        "scheme": first.digest_scheme,
                        "artifact": a1.data["ref"],
                    "arrival": first.arrival,
                },
                second={
                        "message_id": mid,
                        "digest": env.payload_digest,
                        "scheme": env.digest_scheme,
                        "artifact": a2.data["ref"],
                    "arrival": store.next_arrival(),
                },
                state_version=task.state_version if task else None,
                trusted=False,
            ).draft(tid, mid)
        )
        # Effects already committed from this task's products now rest on an untrusted input: each
        # goes to reconciliation (a reviewer keeps or retracts it).
        by_task: dict[str, list[str]] = {}
        for e in store.effects_resting_on(tid):
            by_task.setdefault(e["task_id"], []).append(e["effect_key"])
        for dep, keys in sorted(by_task.items()):
            move_events.append(ev_.ReconciliationRequired(effects=keys, status="untrusted input", input=tid).draft(dep, mid))
        return out + move_events, state, version

    if d == Decision.LATE:
        out.append(_intent_event(env, store, d.value, state, version))
        out.append(
            ev_.LateRecorded(type_=env.type, status=env.payload.get("status"), state=state, reason=v.reason).draft(tid, mid)
        )
        if v.needs_reconciliation:
            keys = [e["effect_key"] for e in store.effects() if e["task_id"] == tid]
            out.append(ev_.ReconciliationRequired(effects=keys, status=env.payload.get("status")).draft(tid, mid))
        return out, state, version

    # ACCEPTED
    out += move_events
    if v.grant_lease is not None:
        out.append(ev_.LeaseGranted(holder=env.sender, lease_version=v.grant_lease).draft(tid, mid))
        out.append(ev_.BudgetCharged(amount=ATTEMPT_COST, reason=f"attempt {v.grant_lease}").draft(tid, mid))
    if env.type == "ack":
        out.append(ev_.AckRecorded(of=env.payload.get("of"), from_sender=env.sender).draft(tid, mid))
    if env.type == "fence":
        out.append(ev_.FenceRecorded(to=env.payload["to"], terminal=env.payload["terminal"]).draft(tid, mid))
    if env.type == "review_decision" and "reconcile" in env.payload:
        of = env.payload["of"]
        opened = next((o for o in store.open_reconciliations(tid) if o["message_id"] == of), None)
        effects = opened["effects"] if opened else []
        out.append(ev_.ReconciliationResolved(
            of=of, decision=env.payload["reconcile"], reviewer=env.sender, evidence=list(env.evidence_refs),
            effects=effects).draft(tid, mid))
        if env.payload["reconcile"] == "retract":
            by_key = {e["effect_key"]: e for e in store.effects() if e["task_id"] == tid}
            for k in effects:
                orig = by_key.get(k)
                retract = f"retract:{k}"
                if orig is not None and not store.effect_exists(retract):
                    # A compensating effect: the publication is withdrawn, under its own unique key.
                    out.append(ev_.EffectCommitted(
                        effect_key=retract, kind="retract", target=orig["target"],
                        result_digest=env.payload_digest).draft(tid, mid))
    if env.type == "review_decision" and v.move is not None:
        out.append(ev_.ReviewDecided(
            decision=env.payload["decision"], reviewer=env.sender, evidence=list(env.evidence_refs)).draft(tid, mid))
    key = effect_key(env)
    if key is not None and env.payload.get("status") == "succeeded":
        # Only an accepted success reaches here. Idempotent effects are keyed by what they do;
        # a naive runtime keys them by delivery, so a redelivered result does it again.
        if effect_rule is not None:
            key = _ruled_key(effect_rule, env, delivery_id)
        elif not idempotent_effects:
            key = f"{key}#d{delivery_id}"
    if v.held:
        out.append(ev_.InputUntrusted(refs=list(v.held), effect_key=key).draft(tid, mid))
    elif key is not None and env.payload.get("status") == "succeeded":
        eff = env.payload["effect"]
        if store.effect_exists(key):
            out.append(ev_.EffectSuppressed(effect_key=key).draft(tid, mid))
        else:
            out.append(ev_.EffectCommitted(
                effect_key=key, kind=eff["kind"], target=eff["target"], result_digest=env.payload_digest).draft(tid, mid))
    out.append(_intent_event(env, store, d.value, state, version))
    return out, state, version


def _ruled_key(rule, env: Envelope, delivery_id: int) -> str | None:
    """A pluggable effect-commit rule's key for ``env``'s side effect (``None``: nothing commits)."""
    try:
        key = rule(env, delivery_id)
    except ProtolabError:
        raise
    except Exception as e:
        raise ProtolabError(f"the effect rule raised {type(e).__name__} on {env.message_id}: {e}",
                            code="E_EFFECT_RULE") from e
    if key is not None and (not isinstance(key, str) or not key):
        raise ProtolabError(f"the effect rule returned {key!r} for {env.message_id}; expected a non-empty string or None",
                            code="E_EFFECT_RULE")
    return key


def put_artifact(
    store: Store, content, *, kind: str = "document", task_id: str | None = None, tick: int | None = None
) -> str:
    """Store ``content`` (any JSON value) content-addressed; return its ``sha256:`` ref."""
    ev = _artifact_event(content, kind, task_id, None)
    with store.transaction():
        store.advance(to=tick)
        store.append_event(ev)
    return ev.data["ref"]


def record_fault(store: Store, fault: str, *, message_id: str | None, task_id: str | None, detail: dict, tick: int | None = None) -> None:
    """Record that the transport did something to the run (so the log says what was done)."""
    with store.transaction():
        store.advance(to=tick)
        store.append_event(ev_.FaultInjected(fault=fault, detail=dict(detail)).draft(task_id, message_id))


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
            ev_.LeaseExpired(holder=task.lease_holder, lease_version=task.lease_version).draft(task_id, None)
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
    env = build_envelope(
        message_id=f"REC-{task_id}-{target}", trace_id=store.task_trace(task_id), task_id=task_id, sender=by,
        recipient="manager", type="review_decision", payload=payload, idempotency_key=f"reconcile:{task_id}:{target}",
        created_at=store.time_at(store.tick + 1), evidence_refs=evidence,
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
) -> Outcome:
    """A human reviewer's decision on a needs_review task, delivered as a review_decision envelope.

    Refused before anything is written unless ``by`` is a reviewer, the task is in
    needs_review, and every piece of evidence is retained in the store.

    ``read_version`` is a decision taken from an earlier read of the task (a reviewer looking at
    state_version N of a task that has moved on since): the reviewer's own check ran against that
    read, so it goes to intake carrying ``expected_state_version`` N, where compare-and-swap
    refuses it if the task is no longer at N.
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
        trace_id=trace,
        task_id=task_id,
        sender=by,
        recipient="manager",
        type="review_decision",
        payload=payload,
        idempotency_key=f"review:{task_id}:v{task.state_version}" if read_version is None else f"review:{task_id}:v{version}:{decision}",
        created_at=store.time_at(store.tick + 1),
        evidence_refs=evidence,
    )
    return deliver(store, env, decide=decide)
