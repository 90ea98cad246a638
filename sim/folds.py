"""The folds: how each event type that changes state changes the state tables, written once.

A fold is a pure function ``(event, task_id, message_id, tick, time) -> tuple of row changes``: the
typed event (:mod:`sim.events`), the columns the event log keeps beside it, the tick it was appended at
and that tick's ``created_at`` text. A row change is a small immutable value that names a table and its
columns, never a statement:

* :class:`Insert` a row (``on_conflict``: ``"fail"``, ``"ignore"``);
* :class:`Upsert` a row: on a row already under ``key``, ``bump`` its counters by one and ``replace``
  the named columns with the new row's;
* :class:`Update` the rows under ``key``: ``set`` columns, ``keep`` columns (``COALESCE``: the new value
  unless it is ``None``), ``add`` to counters, and ``expect`` columns to hold the values read (a
  compare-and-swap: exactly one row must match, or :class:`~sim.errors.StaleWrite` with ``stale``);
* :class:`SetMeta` one of the run's meta values; :class:`AtLeast` raises a counter the store keeps
  beside its tables (``next_arrival``).

Two stores apply the same changes: the SQLite store (``sim/store/reducer.py``, one statement compiled
per table and columns) and the in-memory model (``sim/model.py``, over dicts). :data:`FOLDS` is built
at import from the event registry: a type declared ``CHANGES_STATE`` without its ``fold_<type>`` here
fails at import (:func:`folds_for`).

JSON columns (:data:`JSON_COLUMNS`) are handed over as their JSON text, the bytes the store keeps.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from . import events as ev_
from .digest import sorted_dumps as _dumps
from .events import REGISTRY as EVENT_REGISTRY

__all__ = ["stale_message", "stale_context", "Insert", "Upsert", "Update", "SetMeta", "AtLeast", "FOLDS", "JSON_COLUMNS", "folds_for", "changes_of"]


class Insert(NamedTuple):
    """A new row of ``table``: ``values`` in the order of ``columns``. ``on_conflict`` ``"fail"`` (a row
    already under the table's key is an error) or ``"ignore"`` (it stays as it was)."""

    table: str
    columns: tuple
    values: tuple
    on_conflict: str = "fail"


class Upsert(NamedTuple):
    """A new row of ``table``, or, when a row under ``key`` (columns) exists, that row with each of
    ``bump`` raised by one and each of ``replace`` taken from the new row."""

    table: str
    columns: tuple
    values: tuple
    key: tuple
    bump: tuple = ()
    replace: tuple = ()


class Update(NamedTuple):
    """The rows of ``table`` whose ``key`` columns equal their values (a ``None`` matches nothing):
    ``set`` columns given, ``keep`` columns given unless ``None`` (``COALESCE``), ``add`` values added to
    counters. With ``expect`` (a compare-and-swap), exactly one row must also hold the expected values or
    nothing changes and :class:`~sim.errors.StaleWrite` is raised with ``stale`` (formatted with the key
    and expected values by column). ``values``: those of ``set``, ``keep``, ``add``, ``key`` and
    ``expect``, in that order (one tuple: the statement's parameters as they are)."""

    table: str
    key: tuple
    set: tuple
    keep: tuple
    add: tuple
    expect: tuple
    values: tuple
    stale: str = ""


class SetMeta(NamedTuple):
    """The run's meta value ``key`` becomes ``value``."""

    key: str
    value: str


class AtLeast(NamedTuple):
    """A counter the store keeps beside its tables (``next_arrival``) raised to at least ``value``."""

    counter: str
    value: int


#: The columns kept as JSON text (a store parses them when it reads them back).
JSON_COLUMNS = {"intents": ("payload", "result"), "artifacts": ("content",), "approvals": ("evidence",)}

_TASK_COLUMNS = ("task_id", "trace_id", "goal", "state", "state_version", "machine_version", "assignee",
                 "lease_holder", "lease_version", "budget_total", "budget_left", "trusted", "late_results",
                 "rejected", "created_tick", "updated_tick")
_BUDGET_COLUMNS = ("task_id", "delta", "reason", "message_id", "tick")
_TRANSITION_COLUMNS = ("task_id", "old_state", "new_state", "reason", "executor", "role", "tick", "created_at",
                       "state_version", "machine_version", "message_id")
_INTENT_COLUMNS = ("task_id", "idempotency_key", "payload_digest", "digest_scheme", "message_id", "arrival",
                   "decision", "trusted", "seen", "payload", "result")
_INTENT_KEY = ("task_id", "idempotency_key", "payload_digest", "digest_scheme")
_APPROVAL_COLUMNS = ("task_id", "decision", "reviewer", "evidence", "message_id", "tick")
_TASK_KEY = ("task_id",)
_STALE_TASK = "task {task_id} is no longer {state} at state_version {state_version}; reread and retry"


def fold_machine_loaded(e: ev_.MachineLoaded, task_id, message_id, tick: int, time: str) -> tuple:
    return (
        Insert("machines", ("version", "description", "loaded_tick"), (e.version, e.description, tick)),
        *(Insert("transition_rules", ("machine_version", "from_state", "to_state", "roles", "reason"),
                 (e.version, r[0], r[1], ",".join(r[2]), r[3])) for r in e.rules),
        SetMeta("current_machine", e.version),
    )


def fold_task_created(e: ev_.TaskCreated, task_id, message_id, tick: int, time: str) -> tuple:
    return (
        Insert("tasks", _TASK_COLUMNS, (task_id, e.trace_id, e.goal, "pending", 0, e.machine_version, None, None, 0,
                                        e.budget, e.budget, 1, 0, 0, tick, tick)),
        Insert("budget", _BUDGET_COLUMNS, (task_id, e.budget, "allotted", message_id, tick)),
    )


def fold_transition_applied(e: ev_.TransitionApplied, task_id, message_id, tick: int, time: str) -> tuple:
    # into review the task is frozen (untrusted); out of review it is trusted again; otherwise as it was
    trusted = 0 if e.to == "needs_review" else (1 if e.from_state == "needs_review" else None)
    return (
        Update("tasks", _TASK_KEY, ("state", "updated_tick"), ("assignee", "trusted"), ("state_version",),
               ("state", "state_version"), (e.to, tick, e.assignee, trusted, 1, task_id, e.from_state, e.from_version),
               _STALE_TASK),
        Insert("transitions", _TRANSITION_COLUMNS, (task_id, e.from_state, e.to, e.reason, e.executor, e.role, tick,
                                                    time, e.from_version + 1,  # type: ignore[operator]  # from_version None only at a task's creation, folded by task_created
                                                    e.machine_version, message_id)),
    )


def fold_lease_granted(e: ev_.LeaseGranted, task_id, message_id, tick: int, time: str) -> tuple:
    return (Update("tasks", _TASK_KEY, ("lease_holder", "lease_version", "updated_tick"), (), (), (),
                   (e.holder, e.lease_version, tick, task_id)),)


def fold_lease_expired(e: ev_.LeaseExpired, task_id, message_id, tick: int, time: str) -> tuple:
    return (Update("tasks", _TASK_KEY, ("lease_holder", "updated_tick"), (), (), (), (None, tick, task_id)),)


def fold_budget_charged(e: ev_.BudgetCharged, task_id, message_id, tick: int, time: str) -> tuple:
    return (
        Insert("budget", _BUDGET_COLUMNS, (task_id, -e.amount, e.reason, message_id, tick)),
        Update("tasks", _TASK_KEY, (), (), ("budget_left",), (), (-e.amount, task_id)),
    )


def fold_intent_recorded(e: ev_.IntentRecorded, task_id, message_id, tick: int, time: str) -> tuple:
    # Under the safe policy a (key, digest, scheme) is recorded once; a policy that does not deduplicate
    # records it again, and the last write wins. (The JSON texts the delivery already made, when it did.)
    return (
        Upsert("intents", _INTENT_COLUMNS, (
            task_id, e.key, e.digest, e.scheme, message_id, e.arrival, e.decision, 0 if e.decision == "conflict" else 1,
            1, e.__dict__.get("_payload_json") or _dumps(e.payload), e.__dict__.get("_result_json") or _dumps(e.result),
        ), _INTENT_KEY, ("seen",), ("message_id", "result")),
        AtLeast("next_arrival", e.arrival + 1),
    )


def fold_duplicate_recorded(e: ev_.DuplicateRecorded, task_id, message_id, tick: int, time: str) -> tuple:
    return (Update("intents", _INTENT_KEY, (), (), ("seen",), (), (1, task_id, e.key, e.digest, e.scheme)),)


def fold_conflict_recorded(e: ev_.ConflictRecorded, task_id, message_id, tick: int, time: str) -> tuple:
    return (
        Update("intents", ("task_id", "idempotency_key"), ("trusted",), (), (), (), (0, task_id, e.key)),
        Update("tasks", _TASK_KEY, ("trusted", "updated_tick"), (), (), (), (0, tick, task_id)),
    )


def fold_late_recorded(e: ev_.LateRecorded, task_id, message_id, tick: int, time: str) -> tuple:
    return (Update("tasks", _TASK_KEY, (), (), ("late_results",), (), (1, task_id)),)


def fold_transition_rejected(e: ev_.TransitionRejected, task_id, message_id, tick: int, time: str) -> tuple:
    if task_id is None:
        return ()
    return (Update("tasks", _TASK_KEY, (), (), ("rejected",), (), (1, task_id)),)


def fold_artifact_stored(e: ev_.ArtifactStored, task_id, message_id, tick: int, time: str) -> tuple:
    return (Insert("artifacts", ("ref", "scheme", "kind", "size", "content", "task_id", "message_id", "first_tick"),
                   (e.ref, e.scheme, e.kind, e.size, _dumps(e.content), task_id, message_id, tick), "ignore"),)


def fold_effect_committed(e: ev_.EffectCommitted, task_id, message_id, tick: int, time: str) -> tuple:
    return (Insert("effects", ("effect_key", "task_id", "kind", "target", "message_id", "result_digest", "tick"),
                   (e.effect_key, task_id, e.kind, e.target, message_id, e.result_digest, tick)),)


def fold_reconciliation_resolved(e: ev_.ReconciliationResolved, task_id, message_id, tick: int, time: str) -> tuple:
    return (Insert("approvals", _APPROVAL_COLUMNS, (task_id, f"reconcile:{e.decision}", e.reviewer,
                                                    _dumps(e.evidence), message_id, tick)),)


def fold_review_decided(e: ev_.ReviewDecided, task_id, message_id, tick: int, time: str) -> tuple:
    return (Insert("approvals", _APPROVAL_COLUMNS, (task_id, e.decision, e.reviewer, _dumps(e.evidence), message_id,
                                                    tick)),)


def stale_message(ch: Update) -> str:
    """What a compare-and-swap that lost says: ``ch.stale`` with the key and expected values by column."""
    n = len(ch.key) + len(ch.expect)
    return ch.stale.format(**dict(zip(ch.key + ch.expect, ch.values[len(ch.values) - n:])))


def stale_context(ch: Update) -> dict:
    """The key of the row a lost compare-and-swap aimed at, by column (the error's context)."""
    n = len(ch.key) + len(ch.expect)
    return dict(zip(ch.key, ch.values[len(ch.values) - n:]))


Fold = Callable[..., tuple]


def folds_for(registry: dict, where: dict) -> dict[str, Fold]:
    """The fold of each type of ``registry`` that changes state, found as ``fold_<type>`` in ``where``
    (a module's namespace): a type declared ``CHANGES_STATE`` without one raises ``TypeError``, a fold of
    a type that changes nothing (or of no type) too."""
    missing = [t for t, cls in registry.items() if cls.CHANGES_STATE and f"fold_{t}" not in where]
    if missing:
        raise TypeError(f"event types that change state without a fold in sim/folds.py: {', '.join(missing)}")
    stray = [n for n in where if n.startswith("fold_") and callable(where[n])
             and not (n[5:] in registry and registry[n[5:]].CHANGES_STATE)]
    if stray:
        raise TypeError(f"folds of no event type that changes state: {', '.join(stray)}")
    return {t: where[f"fold_{t}"] for t, cls in registry.items() if cls.CHANGES_STATE}


#: The fold of each event type that changes state (built at import: a missing one fails here).
FOLDS: dict[str, Fold] = folds_for(EVENT_REGISTRY, globals())


def changes_of(etype: str, event, task_id, message_id, tick: int, time: str) -> tuple:
    """The row changes an event of ``etype`` makes (none for a type that changes nothing)."""
    fold = FOLDS.get(etype)
    return () if fold is None else fold(event, task_id, message_id, tick, time)
