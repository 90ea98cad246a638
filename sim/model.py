"""A pure in-memory model of the run's state (no SQLite): the store's tables as plain Python data.

The engine keeps a run in SQLite: the runtime (:func:`sim.runtime.deliver`, the lease monitor, the
workers' artifacts, the transport's faults) reads what it needs through the store's methods, asks the
policy (:func:`sim.planner.judge`, pure), plans the events (:func:`sim.planner.plan`, pure) and the
store appends them and folds each into its tables (the pure folds of :mod:`sim.folds`, their row changes
made in SQL by ``sim/store/reducer.py``). :class:`Model` has the same methods over dicts and lists: the
reads the runtime, the run's agents and the invariants make, written over its own rows, and the same
folds' row changes applied over its dicts. So the same runtime code runs on it unchanged (nothing of the
intake flow, and nothing of how an event changes state, is written twice), and it keeps what the engine
keeps:

* tasks: state and version, assignee, lease (holder and version), budget, trusted (frozen for review or
  not), late results and rejections counted;
* intents: one record per (task, idempotency key, payload digest, scheme), with the decision that
  recorded it, how often it was seen and the result kept (the dedup records);
* effects (publications) by effect key; transitions; the budget ledger; approvals; artifacts;
* the message log, the deliveries and what intake decided, the event log.

Two uses. :func:`model_run` is a run whose store is a model (``explore --engine model`` searches on it;
a break it finds is confirmed by the engine before it is reported). And a model driven by a run's
inputs (:class:`Op`, read back by :func:`ops_of`: each delivery's envelope as sent, each lease expired,
artifact stored and fault recorded; what intake decided is not read, the model decides it again) must
reach the engine's rows: :func:`agreement` compares every table, the event log and the deliveries.

Covered: the built-in machine (task-v1) and any policy or envelope design run by the runtime's own code
(the reads and folds are the store's); not: gathers (their reduction reads the store's joined views),
a machine loaded from a file (one machine only), and copies to a file. Those raise :class:`NotModelled`.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from .digest import sorted_dumps as _dumps
from .envelope import Envelope
from .errors import StaleWrite, StoreError
from .events import EventDraft, MachineLoaded, StoredEvent
from .folds import FOLDS, JSON_COLUMNS, AtLeast, Insert, SetMeta, Update, Upsert, stale_context, stale_message
from .intake import IntentRecord, TaskView
from .machine import RuleBook, TaskState, default_rulebook
from .privacy import Privacy, is_redacted

__all__ = ["Model", "Op", "NotModelled", "ops_of", "agreement", "model_run", "rows_of", "TABLES"]


class NotModelled(Exception):
    """A run the model does not cover (a gather, a second machine, a copy to a file)."""


def _json(value):
    """A value as the store gives it back: through its JSON text (tuples become lists)."""
    return json.loads(_dumps(value))


_loads = json.loads

#: Where the model keeps each state table: (its attribute, the key its dict is by (a list: ``None``;
#: one column: the value itself, more: a tuple), the serial column a list numbers its rows by).
_LAYOUT = {
    "machines": ("_machines", None, None),
    "transition_rules": ("_rules", None, None),
    "tasks": ("_tasks", ("task_id",), None),
    "transitions": ("_transitions", None, "seq"),
    "intents": ("_intents", ("task_id", "idempotency_key", "payload_digest", "digest_scheme"), None),
    "artifacts": ("_artifacts", ("ref",), None),
    "effects": ("_effects", ("effect_key",), None),
    "approvals": ("_approvals", None, "approval_id"),
    "budget": ("_budget", None, "entry"),
}


class Model:
    """The store's tables as dicts and lists, with the store's methods (those the runtime, a run's
    agents, :func:`sim.invariants.check` and :func:`sim.explore.fingerprint` call: the
    :class:`sim.store_api.Store` protocol, which :class:`sim.store.Store` implements on SQLite)."""

    def __init__(self, *, start_time: str = "2026-01-01T00:00:00Z", rulebook: RuleBook | None = None):
        self._start = datetime.fromisoformat(start_time.replace("Z", "+00:00")).astimezone(timezone.utc)
        self._meta: dict[str, str] = {"start_time": start_time, "current_machine": ""}
        self._tick = 0
        self._next_arrival = 1
        self._next_delivery = 1
        self.commits = 0
        self._tasks: dict[str, dict] = {}  # task_id -> its row (changes)
        self._intents: dict[tuple, dict] = {}  # (task, key, digest, scheme) -> its row (changes)
        self._transitions: list[dict] = []  # the rows below are appended, never changed
        self._artifacts: dict[str, dict] = {}
        self._effects: dict[str, dict] = {}
        self._approvals: list[dict] = []
        self._budget: list[dict] = []
        self._messages: list[dict] = []
        self._by_id: dict[str, list[dict]] = {}  # message_id -> its rows, in order
        self._deliveries: list[dict] = []
        self._events: list[StoredEvent] = []
        self._named: dict[str, list[str]] = {}  # task_id -> the message ids its events name (in order)
        self._machines: list[dict] = []
        self._rules: list[dict] = []
        self._rulebook: RuleBook | None = None
        self.closed = False
        rb = rulebook or default_rulebook()
        self.append_event(MachineLoaded(
            version=rb.version, description="the course's default task machine",
            rules=[[r.from_state.value, r.to_state.value, list(r.roles), r.reason] for r in rb.rules],
        ).draft(None, None))
        self._rulebook = rb

    # ------------------------------------------------------------------ the store's housekeeping

    def copy(self, path=None) -> "Model":
        """A copy to go on from (what changes is copied, rows never changed again are shared)."""
        if path is not None:
            raise NotModelled("a model copies in memory only")
        other = object.__new__(Model)
        other.__dict__.update(self.__dict__)
        other._meta = dict(self._meta)
        other._tasks = {k: dict(v) for k, v in self._tasks.items()}
        other._intents = {k: dict(v) for k, v in self._intents.items()}
        for name in ("_transitions", "_approvals", "_budget", "_messages", "_deliveries", "_events",
                     "_machines", "_rules"):
            setattr(other, name, list(getattr(self, name)))
        other._artifacts = dict(self._artifacts)
        other._effects = dict(self._effects)
        other._by_id = {k: list(v) for k, v in self._by_id.items()}
        other._named = {k: list(v) for k, v in self._named.items()}
        if "_numbers" in self.__dict__:
            other._numbers = set(self._numbers)
        return other

    def close(self) -> None:
        self.closed = True

    @contextlib.contextmanager
    def transaction(self):
        """One delivery's writes. The run is one thread and nothing else writes, so a compare-and-swap
        never loses; a fold that fails leaves the model unusable (it is a bug, not a race): the model cannot
        roll back, so after a compare-and-swap lost (:class:`~sim.errors.StaleWrite`, as on SQLite) the
        runtime's retry is refused rather than run on half a delivery."""
        lost = self.__dict__.get("_lost")
        if lost is not None:
            raise AssertionError(f"model: a compare-and-swap lost earlier ({lost}); the model cannot roll back")
        try:
            yield self
        except StaleWrite as e:
            self._lost = e.message
            raise
        self.commits += 1

    def prefetch(self, message_id: str, task_id: str, key: str) -> None:
        """The store reads a delivery's first rows in one statement here; the model's are at hand."""

    @contextlib.contextmanager
    def group_commits(self, every: int = 256):
        yield self

    def get_meta(self, key: str) -> str | None:
        return self._meta.get(key)

    def set_meta(self, values: dict) -> None:
        self._meta.update(values)

    def bounds(self) -> dict | None:
        text = self._meta.get("conversation")
        return json.loads(text) if text else None

    def privacy(self) -> Privacy:
        return Privacy.from_meta(self._meta.get("privacy"))

    @property
    def current_machine(self) -> str:
        return self._meta.get("current_machine", "")

    @property
    def tick(self) -> int:
        return self._tick

    def advance(self, to: int | None = None) -> int:
        if to is None:
            self._tick += 1
        else:
            if to < self._tick:
                raise ValueError(f"tick {to} is before the model's clock {self._tick}")
            self._tick = to
        return self._tick

    def time_at(self, tick: int) -> str:
        return (self._start + timedelta(seconds=tick)).strftime("%Y-%m-%dT%H:%M:%SZ")

    # ------------------------------------------------------------------ the reads intake makes

    def get_task(self, task_id: str) -> TaskView | None:
        t = self._tasks.get(task_id)
        if t is None:
            return None
        return TaskView(task_id, TaskState(t["state"]), t["state_version"], t["machine_version"], t["assignee"],
                        t["lease_holder"], t["lease_version"], t["budget_left"], bool(t["trusted"]),
                        any(e["task_id"] == task_id for e in self._effects.values()))

    def task_trace(self, task_id: str) -> str | None:
        t = self._tasks.get(task_id)
        return t["trace_id"] if t else None

    def intents_for(self, task_id: str, key: str) -> tuple[IntentRecord, ...]:
        rows = sorted((r for k, r in self._intents.items() if k[0] == task_id and k[1] == key),
                      key=lambda r: r["arrival"])
        return tuple(IntentRecord(r["task_id"], r["idempotency_key"], r["payload_digest"], r["digest_scheme"],
                                  r["message_id"], _json(r["payload"]), r["arrival"], _json(r["result"])) for r in rows)

    def next_arrival(self) -> int:
        return self._next_arrival

    def next_delivery_id(self) -> int:
        return self._next_delivery

    def rulebook(self, version: str | None = None) -> RuleBook:
        version = version or self.current_machine
        if version != self._rulebook.version:
            raise NotModelled(f"machine {version!r}: the model keeps one machine ({self._rulebook.version})")
        return self._rulebook

    def machine_versions(self) -> list[str]:
        return [m["version"] for m in self._machines]

    def unresolved_refs(self, refs) -> frozenset[str]:
        return frozenset(r for r in refs if (r not in self._artifacts if r.startswith("sha256:") else r not in self._by_id))

    def untrusted_inputs(self, refs, *, besides: str) -> list[tuple[str, str]]:
        out = []
        for ref in refs:
            if ref.startswith("sha256:"):
                a = self._artifacts.get(ref)
                owners = [a["task_id"]] if a is not None else []
            else:
                owners = [m["task_id"] for m in self._by_id.get(ref, ())]
            for tid in owners:
                t = self._tasks.get(tid) if tid is not None else None
                if t is not None and not t["trusted"] and tid != besides:
                    out.append((ref, tid))
                    break
        return out

    def effects_resting_on(self, task_id: str) -> list[dict]:
        mine = {r for r, a in self._artifacts.items() if a["task_id"] == task_id}
        mine |= {m["message_id"] for m in self._messages if m["task_id"] == task_id}
        out = set()
        for k, e in self._effects.items():
            if e["task_id"] == task_id or e["kind"] == "retract":
                continue
            if any(r in mine for m in self._by_id.get(e["message_id"], ()) for r in m["evidence_refs"]):
                out.add((k, e["task_id"], e["message_id"]))
        return [{"effect_key": k, "task_id": t, "message_id": m} for k, t, m in sorted(out)]

    def open_reconciliations(self, task_id: str | None = None) -> list[dict]:
        resolved = {(e.task_id, e.data.get("of")) for e in self._events if e.type == "reconciliation_resolved"}
        return [{"seq": e.seq, "tick": e.tick, "task_id": e.task_id, "message_id": e.message_id,
                 "effects": e.data.get("effects", []), "status": e.data.get("status")}
                for e in self._events if e.type == "reconciliation_required"
                and (task_id is None or e.task_id == task_id) and (e.task_id, e.message_id) not in resolved]

    def effects_of(self, task_id: str) -> list[dict]:
        return [dict(e) for e in self.effects() if e["task_id"] == task_id]

    def committed_among(self, keys) -> frozenset[str]:
        return frozenset(k for k in keys if k in self._effects)

    def first_msg_seq(self, message_id: str) -> int | None:
        rows = self._by_id.get(message_id)
        return min(r["msg_seq"] for r in rows) if rows else None

    def fenced_now(self, trace_id: str) -> bool:
        fences = [e.seq for e in self._events if e.task_id == trace_id and e.type == "fence_recorded"]
        if not fences:
            return False
        return not any(e.seq > fences[-1] and e.type in ("review_decided", "reconciliation_resolved")
                       for e in self._events)

    def first_outcome(self, task_id: str | None, message_id: str) -> dict | None:
        for e in self._events:
            if e.task_id == task_id and e.message_id == message_id and e.delivery_id is not None \
                    and e.type != "digest_scheme_assumed":
                return {**e.data, "type": e.type}
        return None

    def conversation_epoch(self, trace_id: str) -> tuple[int, int]:
        epoch, opened, fenced = 1, 0, False
        for e in self._events:
            if e.type == "fence_recorded":
                fenced = fenced or e.task_id == trace_id
            elif e.type in ("review_decided", "reconciliation_resolved") and fenced:
                epoch, opened, fenced = epoch + 1, e.tick, False
        return epoch, opened

    def _messages_of_task(self, task_id: str):
        for mid in dict.fromkeys(self._named.get(task_id, ())):
            yield from self._by_id.get(mid, ())

    def sequence_used(self, task_id: str, sender: str, generation: int, seq: int, message_id: str, key: str) -> bool:
        return any(m["sender"] == sender and (m["sender_generation"] or 1) == generation and m["sender_seq"] == seq
                   and m["message_id"] != message_id and m["idempotency_key"] != key
                   for m in self._messages_of_task(task_id))

    def numbering_marks(self, task_id: str, sender: str, generation: int, seq: int, message_id: str, key: str,
                        restarts) -> tuple[bool, bool]:
        return (self.sequence_used(task_id, sender, generation, seq, message_id, key),
                self.body_replaced(task_id, sender, generation, seq, restarts))

    def body_replaced(self, task_id: str, sender: str, generation: int, seq: int, restarts) -> bool:
        for e in self._events:
            if e.task_id == task_id and e.type == "fault_injected" and e.data.get("fault") in restarts:
                for m in self._by_id.get(e.message_id, ()):
                    if (m["sender"] == sender and (m["sender_generation"] or 1) == generation
                            and m["sender_seq"] is not None and m["sender_seq"] < seq):
                        return True
        # (only by the restart's recorded point, as Store.body_replaced: a newer body having spoken about the
        # task is not by itself a replacement, since 0179d2d)
        return False

    def artifact(self, ref: str) -> dict | None:
        a = self._artifacts.get(ref)
        return None if a is None else {**a, "content": _json(a["content"])}

    def has_message_id(self, message_id: str) -> bool:
        return message_id in self._by_id

    # ------------------------------------------------------------------ the writes

    def record_message(self, env: Envelope, envelope_digest: str, sent=None) -> tuple[int, bool]:
        rows = self._by_id.setdefault(env.message_id, [])
        same = [r["msg_seq"] for r in rows if r["envelope_digest"] == envelope_digest]
        if same:
            return same[0], False
        seq, gen = sent if sent is not None else (None, None)
        row = {"msg_seq": len(self._messages) + 1, "message_id": env.message_id, "envelope_digest": envelope_digest,
               "trace_id": env.trace_id, "task_id": env.task_id, "sender": env.sender, "recipient": env.recipient,
               "type": env.type, "schema_version": env.schema_version, "created_at": env.created_at,
               "idempotency_key": env.idempotency_key, "payload_digest": env.payload_digest,
               "digest_scheme": env.digest_scheme, "payload": _json(env.payload),
               "evidence_refs": list(env.evidence_refs), "first_tick": self._tick, "sender_seq": seq,
               "sender_generation": gen, "epoch": env.epoch, "expires_at": env.expires_at}
        self._messages.append(row)
        rows.append(row)
        self._number_was_taken = None
        if seq:
            taken = self.__dict__.setdefault("_numbers", set())
            body = (env.sender, gen or 1, seq)
            self._number_was_taken = (env.message_id, body in taken)
            taken.add(body)
        return row["msg_seq"], True

    def number_taken_before(self, message_id: str) -> bool:
        known = self.__dict__.get("_number_was_taken")
        return known is not None and known[0] == message_id and known[1]

    def record_delivery(self, delivery_id: int, msg_seq: int, env: Envelope, decision: str, code, reason: str,
                        state_after, version_after) -> int:
        if delivery_id != self._next_delivery:
            raise ValueError(f"delivery id {delivery_id} is not the next one ({self._next_delivery})")
        self._deliveries.append({"delivery_id": delivery_id, "tick": self._tick, "msg_seq": msg_seq,
                                 "message_id": env.message_id, "task_id": env.task_id, "type": env.type,
                                 "decision": decision, "code": code, "reason": reason, "state_after": state_after,
                                 "state_version_after": version_after})
        self._next_delivery = delivery_id + 1
        return delivery_id

    def append_event(self, ev: EventDraft, *, delivery_id: int | None = None) -> int:
        seq = len(self._events) + 1
        tick = self._tick
        at = self.time_at(tick)
        self._events.append(StoredEvent(seq, tick, at, ev.type, ev.task_id, ev.message_id,
                                        delivery_id, _dumps(ev.data)))
        if ev.task_id is not None and ev.message_id is not None:
            self._named.setdefault(ev.task_id, []).append(ev.message_id)
        if ev.type == "gather_reduced":
            raise NotModelled("gathers")
        fold = FOLDS.get(ev.type)
        if fold is not None:
            self._apply(fold(ev.event(), ev.task_id, ev.message_id, tick, at))
        return seq

    def append_events(self, evs, *, delivery_id: int | None = None) -> None:
        for ev in evs:
            self.append_event(ev, delivery_id=delivery_id)

    def load_machine(self, rb: RuleBook, *, description: str = "") -> None:
        raise NotModelled("a second machine")

    # ------------------------------------------------------------------ the folds (sim/folds.py), applied over dicts

    def _apply(self, changes) -> None:
        """Make ``changes`` (row changes of :mod:`sim.folds`, the ones the store makes in SQL) in the
        model's tables, in order, as SQLite would."""
        for ch in changes:
            kind = type(ch)
            if kind is Update:
                self._update(ch)
            elif kind is Insert:
                self._insert(ch.table, dict(zip(ch.columns, ch.values)), ch.on_conflict)
            elif kind is Upsert:
                self._upsert(ch)
            elif kind is AtLeast:
                name = "_" + ch.counter
                setattr(self, name, max(getattr(self, name), ch.value))
            elif kind is SetMeta:
                self._meta[ch.key] = ch.value
            else:  # pragma: no cover - sim.folds makes only the kinds above
                raise TypeError(f"not a row change: {ch!r}")

    def _insert(self, table: str, row: dict, on_conflict: str) -> None:
        attr, key, serial = _LAYOUT[table]
        for c in JSON_COLUMNS.get(table, ()):
            row[c] = _loads(row[c])
        rows = getattr(self, attr)
        if key is None:
            if table == "machines" and rows:
                raise NotModelled("a second machine")
            if serial is not None:
                row = {serial: len(rows) + 1, **row}
            rows.append(row)
            return
        k = row[key[0]] if len(key) == 1 else tuple(row[c] for c in key)
        if k in rows:
            if on_conflict == "ignore":
                return
            raise StoreError(f"{table}: a row under {k!r} already exists", code="E_DB_CONSTRAINT")
        rows[k] = row

    def _upsert(self, ch: Upsert) -> None:
        row = dict(zip(ch.columns, ch.values))
        k = tuple(row[c] for c in ch.key)
        old = getattr(self, _LAYOUT[ch.table][0]).get(k if len(k) > 1 else k[0])
        if old is None:
            self._insert(ch.table, row, "fail")
            return
        for c in ch.bump:
            old[c] += 1
        parse = JSON_COLUMNS.get(ch.table, ())
        for c in ch.replace:
            old[c] = _loads(row[c]) if c in parse else row[c]

    def _update(self, ch: Update) -> None:
        attr, key, _ = _LAYOUT[ch.table]
        vals = ch.values
        ns, nk, na = len(ch.set), len(ch.keep), len(ch.add)
        at = ns + nk + na
        kv = vals[at:at + len(ch.key)]
        table = getattr(self, attr)
        if None in kv:  # (as in SQL: NULL equals nothing)
            rows = []
        elif ch.key == key:
            row = table.get(kv[0] if len(kv) == 1 else kv)
            rows = [] if row is None else [row]
        else:
            rows = [r for r in (table.values() if key is not None else table)
                    if all(r[c] == v for c, v in zip(ch.key, kv))]
        if ch.expect:
            rows = [r for r in rows if all(r[c] == v for c, v in zip(ch.expect, vals[at + len(ch.key):]))]
            if len(rows) != 1:
                raise StaleWrite(stale_message(ch), **stale_context(ch))
        for r in rows:
            for c, v in zip(ch.set, vals):
                r[c] = v
            for c, v in zip(ch.keep, vals[ns:]):
                if v is not None:
                    r[c] = v
            for c, v in zip(ch.add, vals[ns + nk:at]):
                r[c] += v

    # ------------------------------------------------------------------ the rows, as the store lists them

    def tasks(self) -> list[dict]:
        return [dict(t) for t in sorted(self._tasks.values(), key=lambda t: (t["created_tick"], t["task_id"]))]

    def transitions(self, task_id: str | None = None) -> list[dict]:
        return [dict(t) for t in self._transitions if task_id is None or t["task_id"] == task_id]

    def transition_rules(self) -> list[dict]:
        return [dict(r) for r in sorted(self._rules, key=lambda r: (r["machine_version"], r["from_state"], r["to_state"]))]

    def machines(self) -> list[dict]:
        return [dict(m) for m in self._machines]

    def intents(self) -> list[dict]:
        return [dict(r) for r in sorted(self._intents.values(), key=lambda r: r["arrival"])]

    def artifacts(self) -> list[dict]:
        rows = sorted(self._artifacts.values(), key=lambda a: (a["first_tick"], a["ref"]))
        return [{k: v for k, v in a.items() if k != "content"} for a in rows]

    def effects(self) -> list[dict]:
        return [dict(e) for e in sorted(self._effects.values(), key=lambda e: (e["tick"], e["effect_key"]))]

    def approvals(self) -> list[dict]:
        return [dict(a) for a in self._approvals]

    def budget_ledger(self) -> list[dict]:
        return [dict(b) for b in self._budget]

    def messages(self) -> list[dict]:
        return [dict(m) for m in self._messages]

    def deliveries(self) -> list[dict]:
        return [dict(d) for d in self._deliveries]

    def events(self, *, after: int = 0, limit: int | None = None) -> list[StoredEvent]:
        out = self._events[after:]
        return out[:limit] if limit is not None else list(out)

    def delivery(self, delivery_id: int) -> dict | None:
        return dict(self._deliveries[delivery_id - 1]) if 0 < delivery_id <= len(self._deliveries) else None

    def message_at(self, msg_seq: int) -> dict | None:
        return dict(self._messages[msg_seq - 1]) if 0 < msg_seq <= len(self._messages) else None

    def deliveries_of(self, message_id: str) -> list[dict]:
        return [dict(d) for d in self._deliveries if d["message_id"] == message_id]


# ---------------------------------------------------------------------------- a run on a model


def model_run(scenario, policy, seed, specs, *, design=None, plugged=None):
    """A run not yet started, like :func:`sim.runner.new_run` of no file, whose store is a :class:`Model`."""
    from .runner import start_run

    seed = scenario.seed if seed is None else seed
    return start_run(scenario, policy, seed, specs, Model(start_time=scenario.start_time), design=design,
                     plugged=plugged)


# ---------------------------------------------------------------------------- a model driven by a run's inputs


@dataclass(frozen=True)
class Op:
    """One input of a run, in order: ``deliver`` (the envelope as sent, the transport's sequence),
    ``expire`` (a lease the monitor expires), ``artifact`` (what a worker stored), ``fault`` (what the
    transport recorded); each at ``tick``."""

    kind: str
    tick: int
    env: Envelope | None = None
    sent: tuple | None = None
    task_id: str | None = None
    content: object = None
    artifact_kind: str | None = None
    fault: str | None = None
    message_id: str | None = None
    detail: dict | None = None


def apply(model: Model, op: Op, policy) -> None:
    """Apply one input to ``model`` through the runtime's own functions (under ``policy``)."""
    from .runtime import deliver, expire_lease, put_artifact, record_fault

    if op.kind == "deliver":
        deliver(model, op.env, policy=policy, tick=op.tick, sent=op.sent)
    elif op.kind == "expire":
        expire_lease(model, op.task_id, tick=op.tick)
    elif op.kind == "artifact":
        put_artifact(model, op.content, kind=op.artifact_kind, task_id=op.task_id, tick=op.tick)
    elif op.kind == "fault":
        record_fault(model, op.fault, message_id=op.message_id, task_id=op.task_id, detail=op.detail or {},
                     tick=op.tick)
    else:  # pragma: no cover
        raise NotModelled(f"input {op.kind}")


def ops_of(store, *, after: int = 0) -> tuple[list[Op], int]:
    """The inputs of the run in ``store`` after event ``after``, in order, and the last event read: each
    delivery's envelope as it was sent (from the message log) with its round and the transport's
    sequence (which goes with a message's first delivery only); each lease expired, artifact stored and
    fault recorded outside a delivery. What intake decided is not read: the model decides it again."""
    ops: list[Op] = []
    done: set[int] = set()
    last = after
    for ev in store.events(after=after):
        last = ev.seq
        if ev.delivery_id is not None:
            if ev.delivery_id in done:
                continue
            done.add(ev.delivery_id)
            d = store.delivery(ev.delivery_id)
            m = store.message_at(d["msg_seq"])
            if is_redacted(m["payload"]):  # a policy that redacts logs [redacted]: what was sent is not in the log
                raise NotModelled(f"{m['message_id']} is logged with [redacted] values: its input cannot be read back")
            env = Envelope(m["message_id"], m["trace_id"], m["task_id"], m["sender"], m["recipient"], m["type"],
                           m["schema_version"], m["created_at"], m["idempotency_key"], m["payload_digest"],
                           m["digest_scheme"], m["payload"], tuple(m["evidence_refs"]), m.get("epoch"),
                           m.get("expires_at"))
            first = min(x["delivery_id"] for x in store.deliveries_of(m["message_id"]))
            sent = ((m["sender_seq"], m["sender_generation"])
                    if m["sender_seq"] is not None and first == d["delivery_id"] else None)
            ops.append(Op("deliver", d["tick"], env=env, sent=sent))
        elif ev.type == "lease_expired":
            ops.append(Op("expire", ev.tick, task_id=ev.task_id))
        elif ev.type in ("transition_applied", "machine_loaded"):
            continue  # (the lease monitor's move, made again by ``expire``; the machine every model starts with)
        elif ev.type == "artifact_stored":
            ops.append(Op("artifact", ev.tick, task_id=ev.task_id, content=ev.data["content"],
                          artifact_kind=ev.data["kind"]))
        elif ev.type == "fault_injected":
            ops.append(Op("fault", ev.tick, task_id=ev.task_id, message_id=ev.message_id, fault=ev.data["fault"],
                          detail=ev.event.detail))
        else:
            raise NotModelled(f"event {ev.type} outside a delivery")
    return ops, last


# ---------------------------------------------------------------------------- comparing with the engine

#: What :func:`agreement` compares: every state table, the message log, the deliveries and the event log.
TABLES = ("machines", "transition_rules", "tasks", "transitions", "intents", "artifacts", "effects", "approvals",
          "budget", "messages", "deliveries", "events")


def rows_of(store, table: str, *, selectors: bool = True) -> list:
    """One table's rows as plain data, from a store or a model (``selectors=False``: a fault's record
    without the selector it was given by, ``duplicate`` or ``duplicate:M-3``, which name one placement)."""
    if table == "budget":
        return [dict(r) for r in store.budget_ledger()]
    if table == "events":
        return [(e.seq, e.tick, e.type, e.task_id, e.message_id, e.delivery_id,
                 e.data if selectors or e.type != "fault_injected" else
                 {k: v for k, v in e.data.items() if k != "selector"}) for e in store.events()]
    return [dict(r) for r in getattr(store, table)()]


def agreement(model, store, *, selectors: bool = True) -> list[str]:
    """Where ``model`` (or any store) and the engine's ``store`` disagree, one line per table (empty: every
    row of every table, the event log included, is the same)."""
    out = []
    for table in TABLES:
        ours, theirs = rows_of(model, table, selectors=selectors), rows_of(store, table, selectors=selectors)
        if ours != theirs:
            diff = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
            out.append(f"{table}: row {diff + 1} differs (model {ours[diff] if diff < len(ours) else 'none'!r}, "
                       f"engine {theirs[diff] if diff < len(theirs) else 'none'!r}; {len(ours)} rows against "
                       f"{len(theirs)})")
    return out
