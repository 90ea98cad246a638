"""A pure in-memory model of the authoritative state (no SQLite): what the runtime keeps, as plain data.

The engine keeps a run's state in SQLite: the runtime reads what intake needs (:func:`sim.runtime.read_context`,
:func:`~sim.runtime.read_for_plan`), asks the policy (:func:`sim.planner.judge`, pure), plans the events
(:func:`sim.planner.plan`, pure) and the store folds them into its tables (``sim/store/reducer.py``). The
:class:`Model` does the same with dicts and lists: the reads written over its own data, the same pure
judge and planner, the folds written again. It keeps what decides what happens to the next delivery:

* tasks: state and version, assignee, lease (holder and version), budget, trusted (frozen for review or
  not), late results and rejections counted;
* intents: one record per (task, idempotency key, payload digest, scheme), with the decision that recorded
  it, how often it was seen and the result kept (the dedup records);
* effects (publications) by effect key; transitions; the budget ledger; approvals; artifacts by ref;
* the message log as far as intake reads it (ids, senders' sequences and bodies), the fence, the faults.

It is driven by the run's inputs in order (:class:`Op`): each delivery (the envelope as sent, its round,
the transport's sequence), each lease the monitor expires, each artifact a worker stores, each fault the
transport records. :func:`ops_of` reads them back from a run's log (inputs only: what intake decided,
the model decides again). :func:`agreement` compares the model with a store: the same tasks, states,
versions, leases and budgets, the same dedup decisions and intents, the same effects, transitions and
deliveries' decisions. Covered: the built-in policies (safe, naive) with the reference design and machine,
the scenarios without gathers, privacy or reviews (reconciliations and reviewers' decisions are refused
with :class:`NotModelled`); plugged-in code (--design, --intake, --effects, --machine) is not modelled.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from dataclasses import dataclass, field

from . import versions as _versions
from . import planner as _planner
from .envelope import Envelope
from .intake import Decision, IntentRecord, TaskView
from .machine import RuleBook, TaskState, default_rulebook

__all__ = ["Model", "Op", "NotModelled", "ops_of", "agreement", "projection", "store_projection"]


class NotModelled(Exception):
    """A run the model does not cover (a review, a gather, a plugged-in part)."""


@dataclass(frozen=True)
class Op:
    """One input of a run, in order: ``deliver`` (env, sent), ``expire`` (task), ``artifact`` (content,
    kind, task), ``fault`` (name, message, task, detail); each at ``tick``."""

    kind: str
    tick: int
    env: Envelope | None = None
    sent: tuple[int, int] | None = None
    task_id: str | None = None
    content: object = None
    artifact_kind: str | None = None
    fault: str | None = None
    message_id: str | None = None
    detail: dict | None = None


def _envelope_digest(env: Envelope) -> str:  # as sim.runtime computes it (the message log's identity)
    return "sha256:" + hashlib.sha256(env.to_json().encode("utf-8")).hexdigest()


@dataclass
class Model:
    """The authoritative state as plain data; :meth:`apply` one input at a time."""

    policy: object  # a sim.policy.Policy (safe or naive)
    rules: RuleBook = field(default_factory=default_rulebook)
    tick: int = 0
    tasks: dict = field(default_factory=dict)  # task_id -> {state, state_version, ...}
    intents: dict = field(default_factory=dict)  # (task, key, digest, scheme) -> {message_id, arrival, ...}
    effects: dict = field(default_factory=dict)  # effect_key -> {task_id, kind, target, message_id, result_digest}
    artifacts: dict = field(default_factory=dict)  # ref -> task_id
    transitions: list = field(default_factory=list)
    budget: list = field(default_factory=list)
    approvals: list = field(default_factory=list)
    deliveries: list = field(default_factory=list)  # (message_id, decision, code, state_after, version_after)
    messages: dict = field(default_factory=dict)  # message_id -> [(msg_seq, envelope digest, task, sender, gen, seq, key)]
    refs: dict = field(default_factory=dict)  # msg_seq -> the evidence refs of that stored envelope
    msg_seq: int = 0
    event_seq: int = 0
    named: dict = field(default_factory=dict)  # task_id -> message ids its events name
    faults: list = field(default_factory=list)  # (task_id, fault, message_id)
    fences: dict = field(default_factory=dict)  # trace_id -> event seq of its last fence
    last_review: int = 0  # event seq of the last review or reconciliation decision
    next_arrival: int = 1
    next_delivery: int = 1

    def __post_init__(self) -> None:
        p = self.policy
        if p.effect_rule is not None or p.decide is not _builtin_decide(p.name):
            raise NotModelled("the model covers the built-in policies only (safe, naive)")

    def copy(self) -> "Model":
        return copy.deepcopy(self, {id(self.policy): self.policy, id(self.rules): self.rules})

    # ------------------------------------------------------------------ the reads intake makes

    def task_view(self, task_id: str) -> TaskView | None:
        t = self.tasks.get(task_id)
        if t is None:
            return None
        return TaskView(task_id, TaskState(t["state"]), t["state_version"], t["machine_version"], t["assignee"],
                        t["lease_holder"], t["lease_version"], t["budget_left"], bool(t["trusted"]),
                        any(e["task_id"] == task_id for e in self.effects.values()))

    def _prior(self, task_id: str, key: str) -> tuple[IntentRecord, ...]:
        rows = [(k, r) for k, r in self.intents.items() if k[0] == task_id and k[1] == key]
        rows.sort(key=lambda kr: kr[1]["arrival"])
        return tuple(IntentRecord(k[0], k[1], k[2], k[3], r["message_id"], r["payload"], r["arrival"], r["result"])
                     for k, r in rows)

    def _unresolved(self, refs) -> frozenset[str]:
        return frozenset(r for r in refs if (r not in self.artifacts if r.startswith("sha256:") else r not in self.messages))

    def _untrusted_inputs(self, refs, besides: str) -> tuple:
        out = []
        for ref in refs:
            if ref.startswith("sha256:"):
                owners = [self.artifacts.get(ref)] if ref in self.artifacts else []
            else:
                owners = [m[2] for m in self.messages.get(ref, [])]
            for tid in owners:
                t = self.tasks.get(tid) if tid is not None else None
                if t is not None and not t["trusted"] and tid != besides:
                    out.append((ref, tid))
                    break
        return tuple(out)

    def _effects_of(self, task_id: str) -> tuple:
        return tuple(sorted(({"effect_key": k, **e} for k, e in self.effects.items() if e["task_id"] == task_id),
                            key=lambda e: (e["tick"], e["effect_key"])))

    def _seq_used(self, task_id, sender, gen, seq, message_id, key) -> bool:
        for mid in self.named.get(task_id, ()):
            for _s, _d, _t, snd, g, sq, k in self.messages.get(mid, ()):
                if snd == sender and (g or 1) == gen and sq == seq and mid != message_id and k != key:
                    return True
        return False

    def _body_replaced(self, task_id, sender, gen, seq) -> bool:
        for tid, fault, mid in self.faults:
            if tid == task_id and fault in _planner.RESTART_FAULTS:
                for _s, _d, _t, snd, g, sq, _k in self.messages.get(mid, ()):
                    if snd == sender and (g or 1) == gen and sq is not None and sq < seq:
                        return True
        for mid in self.named.get(task_id, ()):
            for _s, _d, _t, snd, g, _sq, _k in self.messages.get(mid, ()):
                if snd == sender and (g or 1) > gen:
                    return True
        return False

    def _fenced(self, trace_id: str) -> bool:
        at = self.fences.get(trace_id)
        return at is not None and self.last_review < at

    # ------------------------------------------------------------------ the inputs

    def apply(self, op: Op) -> None:
        if op.tick < self.tick:
            raise ValueError(f"tick {op.tick} is before the model's clock {self.tick}")
        self.tick = op.tick
        if op.kind == "deliver":
            self.deliver(op.env, op.sent)
        elif op.kind == "expire":
            self.expire(op.task_id)
        elif op.kind == "artifact":
            self._append(_planner.artifact_event(op.content, op.artifact_kind, op.task_id, None))
        elif op.kind == "fault":
            self.faults.append((op.task_id, op.fault, op.message_id))
            self._name(op.task_id, op.message_id)
            self.event_seq += 1
        else:  # pragma: no cover
            raise NotModelled(f"input {op.kind}")

    def expire(self, task_id: str) -> bool:
        """The lease monitor (:func:`sim.runtime.expire_lease`): a running task goes to retry_wait."""
        t = self.tasks.get(task_id)
        if t is None or t["state"] != "running":
            return False
        if not self.rules.allows(TaskState.RUNNING, TaskState.RETRY_WAIT, "runtime"):
            return False
        from . import events as ev_

        self._append(ev_.LeaseExpired(holder=t["lease_holder"], lease_version=t["lease_version"]).draft(task_id, None))
        self._append(ev_.TransitionApplied(
            from_state="running", to="retry_wait", from_version=t["state_version"],
            reason=f"lease v{t['lease_version']} of {t['lease_holder']} expired", executor="runtime", role="runtime",
            machine_version=t["machine_version"], assignee=None).draft(task_id, None))
        return True

    def deliver(self, env: Envelope, sent: tuple[int, int] | None) -> str:
        """One delivery, as :func:`sim.runtime.deliver` makes it: its decision."""
        policy = self.policy
        if env.type == "review_decision":
            raise NotModelled("reviews and reconciliations")
        logged = env  # (no privacy in a modelled run: nothing is redacted)
        msg_seq, first = self._record_message(env, sent)
        if policy.reads_as is not None:
            env = logged = _versions.read_as(env, policy.reads_as)
        task = self.task_view(env.task_id)
        ctx = _planner.Context(
            task=task, prior=self._prior(env.task_id, env.idempotency_key), rules=self.rules,
            unresolved=self._unresolved(env.evidence_refs) | frozenset(r for r in env.evidence_refs if r == env.message_id),
            id_reused=msg_seq != first, next_arrival=self.next_arrival, delivery_id=self.next_delivery,
            untrusted_inputs=(self._untrusted_inputs(env.evidence_refs, env.task_id)
                              if _planner.wants_untrusted_check(env, policy.hold_untrusted) else ()))
        if policy.closed_payloads and _versions.shape_refusal(env) is not None:
            ctx = dataclasses.replace(ctx, payload_refusal=_versions.shape_refusal(env, allowed=frozenset()))
        elif policy.believes_payloads and type(env.payload.get("budget_left")) is int:
            ctx = dataclasses.replace(ctx, reported_budget=env.payload["budget_left"])
        verdict = _planner.judge(env, ctx, policy.decide, hold_untrusted=policy.hold_untrusted)
        if policy.conversation_rules and _planner.wants_conversation_check(env, verdict):
            gen = (sent[1] or 1) if sent is not None else 1
            seq_used = sent is not None and self._seq_used(env.task_id, env.sender, gen, sent[0], env.message_id,
                                                           env.idempotency_key)
            stale = sent is not None and self._body_replaced(env.task_id, env.sender, gen, sent[0])
            verdict = _planner.conversation_rule(env, verdict, fenced=self._fenced(env.trace_id), seq_used=seq_used,
                                                 stale_body=stale)
        d = verdict.decision
        more: dict = {}
        if d == Decision.CONFLICT:
            more["resting_on"] = self._resting_on(env.task_id)
        elif d == Decision.LATE and verdict.needs_reconciliation:
            more["task_effects"] = self._effects_of(env.task_id)
        elif d == Decision.ACCEPTED:
            key = _planner.planned_effect_key(env, ctx.delivery_id, idempotent_effects=policy.idempotent_effects,
                                              effect_rule=policy.effect_rule)
            more["effect_key"] = key
            more["committed_keys"] = (frozenset({key}) & frozenset(self.effects)
                                      if key is not None and env.payload.get("status") == "succeeded" else frozenset())
        if more:
            ctx = dataclasses.replace(ctx, **more)
        events, state, version = _planner.plan(logged, ctx, verdict)
        for ev in events:
            self._append(ev)
        self.deliveries.append((env.message_id, d.value, verdict.code, state, version))
        self.next_delivery += 1
        return d.value

    def _resting_on(self, task_id: str) -> tuple:
        mine = {r for r, t in self.artifacts.items() if t == task_id}
        mine |= {mid for mid, rows in self.messages.items() if any(r[2] == task_id for r in rows)}
        out = []
        for k, e in sorted(self.effects.items()):
            if e["task_id"] == task_id or e["kind"] == "retract":
                continue
            refs = {r for row in self.messages.get(e["message_id"], ()) for r in self.refs.get(row[0], ())}
            if refs & mine:
                out.append({"effect_key": k, "task_id": e["task_id"], "message_id": e["message_id"]})
        return tuple(out)

    def _record_message(self, env: Envelope, sent) -> tuple[int, int]:
        digest = _envelope_digest(env)
        rows = self.messages.setdefault(env.message_id, [])
        same = [r[0] for r in rows if r[1] == digest]
        if same:
            return same[0], rows[0][0]
        self.msg_seq += 1
        seq, gen = sent if sent is not None else (None, None)
        rows.append((self.msg_seq, digest, env.task_id, env.sender, gen, seq, env.idempotency_key))
        self.refs[self.msg_seq] = tuple(env.evidence_refs)
        return self.msg_seq, rows[0][0]

    def _name(self, task_id, message_id) -> None:
        if task_id is not None and message_id is not None:
            self.named.setdefault(task_id, set()).add(message_id)

    # ------------------------------------------------------------------ the folds (sim/store/reducer.py)

    def _append(self, draft) -> None:
        self.event_seq += 1
        self._name(draft.task_id, draft.message_id)
        e, tid, mid, tick = draft.event(), draft.task_id, draft.message_id, self.tick
        t = draft.type
        task = self.tasks.get(tid) if tid is not None else None
        if t == "task_created":
            self.tasks[tid] = {"trace_id": e.trace_id, "goal": e.goal, "state": "pending", "state_version": 0,
                               "machine_version": e.machine_version, "assignee": None, "lease_holder": None,
                               "lease_version": 0, "budget_total": e.budget, "budget_left": e.budget, "trusted": 1,
                               "late_results": 0, "rejected": 0}
            self.budget.append((tid, e.budget, "allotted", mid))
        elif t == "transition_applied":
            if task is None or task["state"] != e.from_state or task["state_version"] != e.from_version:
                raise AssertionError(f"model: task {tid} is not {e.from_state} at version {e.from_version}")
            task["state"], task["state_version"] = e.to, task["state_version"] + 1
            if e.assignee is not None:
                task["assignee"] = e.assignee
            if e.to == "needs_review":
                task["trusted"] = 0
            elif e.from_state == "needs_review":
                task["trusted"] = 1
            self.transitions.append((tid, e.from_state, e.to, e.reason, e.executor, e.role, e.from_version + 1,
                                     e.machine_version, mid))
        elif t == "lease_granted":
            task["lease_holder"], task["lease_version"] = e.holder, e.lease_version
        elif t == "lease_expired":
            task["lease_holder"] = None
        elif t == "budget_charged":
            self.budget.append((tid, -e.amount, e.reason, mid))
            task["budget_left"] -= e.amount
        elif t == "intent_recorded":
            k = (tid, e.key, e.digest, e.scheme)
            row = self.intents.get(k)
            if row is None:
                self.intents[k] = {"message_id": mid, "arrival": e.arrival, "decision": e.decision,
                                   "trusted": 0 if e.decision == "conflict" else 1, "seen": 1, "payload": e.payload,
                                   "result": e.result}
            else:  # a policy that does not deduplicate records it again: the last write wins
                row.update(seen=row["seen"] + 1, message_id=mid, result=e.result)
            self.next_arrival = max(self.next_arrival, e.arrival + 1)
        elif t == "duplicate_recorded":
            row = self.intents.get((tid, e.key, e.digest, e.scheme))
            if row is not None:
                row["seen"] += 1
        elif t == "conflict_recorded":
            for k, row in self.intents.items():
                if k[0] == tid and k[1] == e.key:
                    row["trusted"] = 0
            task["trusted"] = 0
        elif t == "late_recorded":
            task["late_results"] += 1
        elif t == "transition_rejected":
            if task is not None:
                task["rejected"] += 1
        elif t == "artifact_stored":
            self.artifacts.setdefault(e.ref, tid)
        elif t == "effect_committed":
            if e.effect_key in self.effects:
                raise AssertionError(f"model: effect {e.effect_key} committed twice")
            self.effects[e.effect_key] = {"task_id": tid, "kind": e.kind, "target": e.target, "message_id": mid,
                                          "result_digest": e.result_digest, "tick": tick}
        elif t == "fence_recorded":
            self.fences[tid] = self.event_seq
        elif t in ("review_decided", "reconciliation_resolved"):
            self.last_review = self.event_seq
            self.approvals.append((tid, getattr(e, "decision", None), mid))
        elif t in ("machine_loaded", "gather_reduced"):
            raise NotModelled(t)


def _builtin_decide(name: str):
    from .policy import POLICIES

    return POLICIES[name].decide if name in POLICIES else None


# ---------------------------------------------------------------------------- reading a run's inputs back


def ops_of(store, *, after: int = 0) -> tuple[list[Op], int]:
    """The inputs of the run in ``store`` after event ``after``, in order, and the last event read: each
    delivery's envelope as it was sent (from the message log) with its round and the transport's
    sequence; each lease expired, artifact stored and fault recorded outside a delivery. What intake
    decided is not read: the model decides it again."""
    ops: list[Op] = []
    seen_delivery: set[int] = set()
    last = after
    for ev in store.events(after=after):
        last = ev.seq
        if ev.delivery_id is not None:
            if ev.delivery_id in seen_delivery:
                continue
            seen_delivery.add(ev.delivery_id)
            d = store.delivery(ev.delivery_id)
            m = store.message_at(d.msg_seq)
            env = Envelope(m.message_id, m.trace_id, m.task_id, m.sender, m.recipient, m.type, m.schema_version,
                           m.created_at, m.idempotency_key, m.payload_digest, m.digest_scheme, m.payload,
                           tuple(m.evidence_refs))
            # the transport's (sequence, generation) goes with a message's first delivery only
            first = min(x["delivery_id"] for x in store.deliveries_of(m.message_id))
            sent = (m.sender_seq, m.sender_generation) if m.sender_seq is not None and first == d.delivery_id else None
            ops.append(Op("deliver", d.tick, env=env, sent=sent))
        elif ev.type == "lease_expired":
            ops.append(Op("expire", ev.tick, task_id=ev.task_id))
        elif ev.type == "transition_applied":
            continue  # (the lease monitor's move, made again by ``expire``)
        elif ev.type == "artifact_stored":
            ops.append(Op("artifact", ev.tick, task_id=ev.task_id, content=ev.data["content"],
                          artifact_kind=ev.data["kind"]))
        elif ev.type == "fault_injected":
            ops.append(Op("fault", ev.tick, task_id=ev.task_id, message_id=ev.message_id, fault=ev.data["fault"],
                          detail=ev.data.get("detail")))
        elif ev.type == "machine_loaded":
            continue  # (the default machine: the model's rules)
        else:
            raise NotModelled(f"event {ev.type} outside a delivery")
    # a delivery whose events are all after ``after`` but which wrote none is impossible: every delivery
    # records at least an intent, a duplicate or a rejection
    return ops, last


# ---------------------------------------------------------------------------- comparing with the engine


def projection(model: Model) -> dict:
    """What the model says the authoritative state is, in the shape :func:`store_projection` reads."""
    return {
        "tasks": sorted((tid, t["state"], t["state_version"], t["assignee"], t["lease_holder"], t["lease_version"],
                         t["budget_left"], t["trusted"], t["late_results"], t["rejected"])
                        for tid, t in model.tasks.items()),
        "intents": sorted((k[0], k[1], k[2], k[3], r["message_id"], r["arrival"], r["decision"], r["trusted"], r["seen"])
                          for k, r in model.intents.items()),
        "effects": sorted((k, e["task_id"], e["kind"], e["target"], e["message_id"]) for k, e in model.effects.items()),
        "transitions": [(t[0], t[1], t[2], t[6], t[4], t[8]) for t in model.transitions],
        "budget": [(b[0], b[1], b[2]) for b in model.budget],
        "deliveries": list(model.deliveries),
    }


def store_projection(store) -> dict:
    """The same projection read from the engine's store."""
    return {
        "tasks": sorted((t["task_id"], t["state"], t["state_version"], t["assignee"], t["lease_holder"],
                         t["lease_version"], t["budget_left"], t["trusted"], t["late_results"], t["rejected"])
                        for t in store.tasks()),
        "intents": sorted((r["task_id"], r["idempotency_key"], r["payload_digest"], r["digest_scheme"], r["message_id"],
                           r["arrival"], r["decision"], r["trusted"], r["seen"]) for r in store.intents()),
        "effects": sorted((e["effect_key"], e["task_id"], e["kind"], e["target"], e["message_id"])
                          for e in store.effects()),
        "transitions": [(t["task_id"], t["old_state"], t["new_state"], t["state_version"], t["executor"],
                         t["message_id"]) for t in store.transitions()],
        "budget": [(b["task_id"], b["delta"], b["reason"]) for b in store.budget_ledger()],
        "deliveries": [(d["message_id"], d["decision"], d["code"], d["state_after"], d["state_version_after"])
                       for d in store.deliveries()],
    }


def agreement(model: Model, store) -> list[str]:
    """Where the model and the engine's store disagree (empty: they agree), one line per part."""
    ours, theirs = projection(model), store_projection(store)
    return [f"{part}: model {ours[part]!r} != engine {theirs[part]!r}" for part in ours if ours[part] != theirs[part]]
