"""The reducer: how each event type changes the state tables. Replay folds through exactly this."""

from __future__ import annotations

from ..errors import StaleWrite, StoreError
from .. import events as ev_
from ..events import REGISTRY as EVENT_REGISTRY
from ..events import EventDraft
from .schema import _dumps


class Reducer:
    """Mixin of :class:`~sim.store.Store`: one ``_fold_<type>`` per event type that changes state."""

    #: While a delivery's events are folded together (``Writes.append_events``): the task-row updates
    #: not yet written, by task: [{column: value}, {column: amount added}, the compare-and-swap (state,
    #: state_version) or None]. Written once per task at the end (:meth:`_flush_tasks`): the same row as
    #: the updates one by one (each column's last value, each counter's sum; no fold reads the row).
    #: None: each update is written as its event is folded (replay, ``append_event``).
    _pending: dict | None = None

    def _defer(self, task_id: str, sets: dict, adds: dict | None = None, cas: tuple | None = None) -> None:
        got = self._pending.get(task_id)
        if got is not None and cas is not None and got[2] is not None:  # (a second move: the first written first)
            self._flush_task(task_id, got)
            got = None
        if got is None:
            got = self._pending[task_id] = [{}, {}, None]
        got[0].update(sets)
        if adds:
            a = got[1]
            for k, v in adds.items():
                a[k] = a.get(k, 0) + v
        if cas is not None:
            got[2] = cas

    def _flush_tasks(self) -> None:
        pending, self._pending = self._pending, None
        if pending:
            for task_id, got in pending.items():
                self._flush_task(task_id, got)

    def _flush_task(self, task_id: str, got: list) -> None:
        sets, adds, cas = got
        shape = (tuple(sets), tuple(adds), cas is not None)
        sql = _UPDATE_SQL.get(shape)
        if sql is None:
            parts = [f"{k} = ?" for k in sets] + [f"{k} = {k} + ?" for k in adds]
            sql = _UPDATE_SQL[shape] = (f"UPDATE tasks SET {', '.join(parts)} WHERE task_id = ?"
                                        + (" AND state = ? AND state_version = ?" if cas is not None else ""))
        params = (*sets.values(), *adds.values(), task_id, *(cas or ()))
        cur = self.conn.run(sql, params)
        if cas is not None and cur.rowcount != 1:
            raise StaleWrite(
                f"task {task_id} is no longer {cas[0]} at state_version {cas[1]}; reread and retry", task_id=task_id)

    def _fold(self, ev: EventDraft, tick: int) -> None:
        """The reducer: how each event changes state (one ``_fold_<type>`` per type that changes
        any, handed the typed event; the others change nothing). Replay runs exactly this."""
        fold = _FOLDS.get(ev.type)
        if fold is not None:
            fold(self, ev.event(), ev.task_id, ev.message_id, tick)
        elif ev.type not in EVENT_REGISTRY:  # pragma: no cover - the runtime only appends known types
            raise StoreError(f"unknown event type {ev.type!r}", code="E_UNKNOWN_EVENT")

    def _fold_machine_loaded(self, e: ev_.MachineLoaded, task_id: str | None, message_id: str | None, tick: int) -> None:
        c = self.conn
        c.run(
            "INSERT INTO machines (version, description, loaded_tick) VALUES (?, ?, ?)",
            (e.version, e.description, tick),
        )
        c.run_many(
            "INSERT INTO transition_rules (machine_version, from_state, to_state, roles, reason) VALUES (?, ?, ?, ?, ?)",
            [(e.version, r[0], r[1], ",".join(r[2]), r[3]) for r in e.rules],
        )
        c.run("UPDATE meta SET value = ? WHERE key = 'current_machine'", (e.version,))
        self._meta["current_machine"] = e.version

    def _fold_task_created(self, e: ev_.TaskCreated, task_id: str | None, message_id: str | None, tick: int) -> None:
        c = self.conn
        if self._pending and task_id in self._pending:  # (an update before the row exists: written first, as before)
            self._flush_task(task_id, self._pending.pop(task_id))
        c.run(
            "INSERT INTO tasks (task_id, trace_id, goal, state, state_version, machine_version, assignee, "
            "lease_holder, lease_version, budget_total, budget_left, trusted, late_results, rejected, created_tick, updated_tick) "
            "VALUES (?, ?, ?, 'pending', 0, ?, NULL, NULL, 0, ?, ?, 1, 0, 0, ?, ?)",
            (task_id, e.trace_id, e.goal, e.machine_version, e.budget, e.budget, tick, tick),
        )
        c.run(
            "INSERT INTO budget (task_id, delta, reason, message_id, tick) VALUES (?, ?, 'allotted', ?, ?)",
            (task_id, e.budget, message_id, tick),
        )

    def _fold_transition_applied(self, e: ev_.TransitionApplied, task_id: str | None, message_id: str | None, tick: int) -> None:
        c = self.conn
        trusted = 0 if e.to == "needs_review" else (1 if e.from_state == "needs_review" else None)
        if self._pending is not None:
            sets = {"state": e.to, "updated_tick": tick}
            if e.assignee is not None:
                sets["assignee"] = e.assignee
            if trusted is not None:
                sets["trusted"] = trusted
            self._defer(task_id, sets, {"state_version": 1}, (e.from_state, e.from_version))
        else:
            cur = c.run(
                "UPDATE tasks SET state = ?, state_version = state_version + 1, updated_tick = ?, "
                "assignee = COALESCE(?, assignee), trusted = COALESCE(?, trusted) "
                "WHERE task_id = ? AND state = ? AND state_version = ?",
                (e.to, tick, e.assignee, trusted, task_id, e.from_state, e.from_version),
            )
            if cur.rowcount != 1:
                raise StaleWrite(
                    f"task {task_id} is no longer {e.from_state} at state_version {e.from_version}; reread and retry",
                    task_id=task_id,
                )
        c.run(
            "INSERT INTO transitions (task_id, old_state, new_state, reason, executor, role, tick, created_at, "
            "state_version, machine_version, message_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                task_id, e.from_state, e.to, e.reason, e.executor, e.role, tick, self.time_at(tick),
                e.from_version + 1, e.machine_version, message_id,
            ),
        )

    def _fold_lease_granted(self, e: ev_.LeaseGranted, task_id: str | None, message_id: str | None, tick: int) -> None:
        if self._pending is not None:
            self._defer(task_id, {"lease_holder": e.holder, "lease_version": e.lease_version, "updated_tick": tick})
            return
        c = self.conn
        c.run(
            "UPDATE tasks SET lease_holder = ?, lease_version = ?, updated_tick = ? WHERE task_id = ?",
            (e.holder, e.lease_version, tick, task_id),
        )

    def _fold_lease_expired(self, e: ev_.LeaseExpired, task_id: str | None, message_id: str | None, tick: int) -> None:
        if self._pending is not None:
            self._defer(task_id, {"lease_holder": None, "updated_tick": tick})
            return
        c = self.conn
        c.run("UPDATE tasks SET lease_holder = NULL, updated_tick = ? WHERE task_id = ?", (tick, task_id))

    def _fold_budget_charged(self, e: ev_.BudgetCharged, task_id: str | None, message_id: str | None, tick: int) -> None:
        c = self.conn
        c.run(
            "INSERT INTO budget (task_id, delta, reason, message_id, tick) VALUES (?, ?, ?, ?, ?)",
            (task_id, -e.amount, e.reason, message_id, tick),
        )
        if self._pending is not None:
            self._defer(task_id, {}, {"budget_left": -e.amount})
        else:
            c.run("UPDATE tasks SET budget_left = budget_left - ? WHERE task_id = ?", (e.amount, task_id))

    def _fold_intent_recorded(self, e: ev_.IntentRecorded, task_id: str | None, message_id: str | None, tick: int) -> None:
        c = self.conn
        c.run(
            "INSERT INTO intents (task_id, idempotency_key, payload_digest, digest_scheme, message_id, arrival, "
            "decision, trusted, seen, payload, result) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?) "
            # Under the safe policy a (key, digest, scheme) is recorded once; a policy that
            # does not deduplicate records it again, and the last write wins.
            "ON CONFLICT (task_id, idempotency_key, payload_digest, digest_scheme) DO UPDATE SET "
            "seen = seen + 1, message_id = excluded.message_id, result = excluded.result",
            (
                task_id, e.key, e.digest, e.scheme, message_id, e.arrival, e.decision,
                0 if e.decision == "conflict" else 1, _dumps(e.payload), _dumps(e.result),
            ),
        )
        self._next_arrival = max(self._next_arrival, e.arrival + 1)

    def _fold_duplicate_recorded(self, e: ev_.DuplicateRecorded, task_id: str | None, message_id: str | None, tick: int) -> None:
        c = self.conn
        c.run(
            "UPDATE intents SET seen = seen + 1 WHERE task_id = ? AND idempotency_key = ? AND payload_digest = ? "
            "AND digest_scheme = ?",
            (task_id, e.key, e.digest, e.scheme),
        )

    def _fold_conflict_recorded(self, e: ev_.ConflictRecorded, task_id: str | None, message_id: str | None, tick: int) -> None:
        c = self.conn
        c.run("UPDATE intents SET trusted = 0 WHERE task_id = ? AND idempotency_key = ?", (task_id, e.key))
        if self._pending is not None:
            self._defer(task_id, {"trusted": 0, "updated_tick": tick})
        else:
            c.run("UPDATE tasks SET trusted = 0, updated_tick = ? WHERE task_id = ?", (tick, task_id))

    def _fold_late_recorded(self, e: ev_.LateRecorded, task_id: str | None, message_id: str | None, tick: int) -> None:
        if self._pending is not None:
            self._defer(task_id, {}, {"late_results": 1})
            return
        c = self.conn
        c.run("UPDATE tasks SET late_results = late_results + 1 WHERE task_id = ?", (task_id,))

    def _fold_transition_rejected(self, e: ev_.TransitionRejected, task_id: str | None, message_id: str | None, tick: int) -> None:
        if task_id is None:
            return
        if self._pending is not None:
            self._defer(task_id, {}, {"rejected": 1})
            return
        self.conn.run("UPDATE tasks SET rejected = rejected + 1 WHERE task_id = ?", (task_id,))

    def _fold_artifact_stored(self, e: ev_.ArtifactStored, task_id: str | None, message_id: str | None, tick: int) -> None:
        c = self.conn
        c.run(
            "INSERT OR IGNORE INTO artifacts (ref, scheme, kind, size, content, task_id, message_id, first_tick) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (e.ref, e.scheme, e.kind, e.size, _dumps(e.content), task_id, message_id, tick),
        )

    def _fold_effect_committed(self, e: ev_.EffectCommitted, task_id: str | None, message_id: str | None, tick: int) -> None:
        c = self.conn
        c.run(
            "INSERT INTO effects (effect_key, task_id, kind, target, message_id, result_digest, tick) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (e.effect_key, task_id, e.kind, e.target, message_id, e.result_digest, tick),
        )

    def _fold_reconciliation_resolved(self, e: ev_.ReconciliationResolved, task_id: str | None, message_id: str | None, tick: int) -> None:
        c = self.conn
        c.run(
            "INSERT INTO approvals (task_id, decision, reviewer, evidence, message_id, tick) VALUES (?, ?, ?, ?, ?, ?)",
            (task_id, f"reconcile:{e.decision}", e.reviewer, _dumps(e.evidence), message_id, tick),
        )

    def _fold_review_decided(self, e: ev_.ReviewDecided, task_id: str | None, message_id: str | None, tick: int) -> None:
        c = self.conn
        c.run(
            "INSERT INTO approvals (task_id, decision, reviewer, evidence, message_id, tick) VALUES (?, ?, ?, ?, ?, ?)",
            (task_id, e.decision, e.reviewer, _dumps(e.evidence), message_id, tick),
        )


#: the task-row UPDATE of each shape of deferred changes (see ``Reducer._flush_task``)
_UPDATE_SQL: dict[tuple, str] = {}

#: The reducer by event type: each type whose folding changes state has its ``Store._fold_<type>``
#: (a type declared as changing state without one fails here, at import).
_FOLDS = {t: getattr(Reducer, f"_fold_{t}") for t, cls in EVENT_REGISTRY.items() if cls.CHANGES_STATE}
