"""The reducer: how each event type changes the state tables. Replay folds through exactly this."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import StaleWrite, StoreError
from .. import events as ev_
from ..events import REGISTRY as EVENT_REGISTRY
from ..events import EventDraft
from .schema import _dumps

if TYPE_CHECKING:
    from .driver import _Connection


class Reducer:
    """Mixin of :class:`~sim.store.Store`: one ``_fold_<type>`` per event type that changes state."""

    if TYPE_CHECKING:  # for the type checker: the store's connection, and what Store's other parts give
        conn: _Connection
        _next_arrival: int

        def __getattr__(self, name: str) -> Any: ...

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
                e.from_version + 1, e.machine_version, message_id,  # type: ignore[operator]  # a transition's fold: from_version None only at a task's creation, folded by task_created
            ),
        )

    def _fold_lease_granted(self, e: ev_.LeaseGranted, task_id: str | None, message_id: str | None, tick: int) -> None:
        c = self.conn
        c.run(
            "UPDATE tasks SET lease_holder = ?, lease_version = ?, updated_tick = ? WHERE task_id = ?",
            (e.holder, e.lease_version, tick, task_id),
        )

    def _fold_lease_expired(self, e: ev_.LeaseExpired, task_id: str | None, message_id: str | None, tick: int) -> None:
        c = self.conn
        c.run("UPDATE tasks SET lease_holder = NULL, updated_tick = ? WHERE task_id = ?", (tick, task_id))

    def _fold_budget_charged(self, e: ev_.BudgetCharged, task_id: str | None, message_id: str | None, tick: int) -> None:
        c = self.conn
        c.run(
            "INSERT INTO budget (task_id, delta, reason, message_id, tick) VALUES (?, ?, ?, ?, ?)",
            (task_id, -e.amount, e.reason, message_id, tick),
        )
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
                0 if e.decision == "conflict" else 1, e.__dict__.get("_payload_json") or _dumps(e.payload),
                e.__dict__.get("_result_json") or _dumps(e.result),
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
        c.run("UPDATE tasks SET trusted = 0, updated_tick = ? WHERE task_id = ?", (tick, task_id))

    def _fold_late_recorded(self, e: ev_.LateRecorded, task_id: str | None, message_id: str | None, tick: int) -> None:
        c = self.conn
        c.run("UPDATE tasks SET late_results = late_results + 1 WHERE task_id = ?", (task_id,))

    def _fold_transition_rejected(self, e: ev_.TransitionRejected, task_id: str | None, message_id: str | None, tick: int) -> None:
        c = self.conn
        if task_id is not None:
            c.run("UPDATE tasks SET rejected = rejected + 1 WHERE task_id = ?", (task_id,))

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


#: The reducer by event type: each type whose folding changes state has its ``Store._fold_<type>``
#: (a type declared as changing state without one fails here, at import).
_FOLDS = {t: getattr(Reducer, f"_fold_{t}") for t, cls in EVENT_REGISTRY.items() if cls.CHANGES_STATE}
