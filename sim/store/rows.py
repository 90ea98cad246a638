"""Typed rows: what the store's shared reads hand out (the message log, the deliveries and every state view).

A row is a dict of its table's columns (tables, JSON and witnesses take it as it is) whose class
declares those columns, each readable as an attribute too: ``d.decision`` as well as
``d["decision"]``. ``tests/test_store.py`` holds each class to its table's columns, so a column
added to the schema and not here fails there. The event log's rows are
:class:`~sim.events.StoredEvent` (read-only, with the typed event); these are plain data.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = ["Approval", "ArtifactRow", "BudgetEntry", "Delivery", "DeliveryView", "Effect", "Intent", "Message", "Row",
           "TaskRow", "Transition"]


class Row(dict):
    """A row: its columns as keys and as attributes. ``COLUMNS`` lists what the class declares."""

    __slots__ = ()
    COLUMNS: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        own = tuple(k for k in cls.__dict__.get("__annotations__", {}) if k != "COLUMNS")
        cls.COLUMNS = tuple(dict.fromkeys(cls.COLUMNS + own))

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no column {name!r}") from None


class Message(Row):
    """One stored envelope (payload and evidence parsed)."""

    __slots__ = ()
    msg_seq: int
    message_id: str
    envelope_digest: str
    trace_id: str
    task_id: str
    sender: str
    recipient: str
    type: str
    schema_version: str
    created_at: str
    idempotency_key: str
    payload_digest: str
    digest_scheme: str
    payload: Any
    evidence_refs: list
    first_tick: int
    sender_seq: int | None
    sender_generation: int | None
    epoch: int | None
    expires_at: str | None


class Delivery(Row):
    """One delivery of a stored envelope and what intake decided."""

    __slots__ = ()
    delivery_id: int
    tick: int
    msg_seq: int
    message_id: str
    task_id: str
    type: str
    decision: str
    code: str | None
    reason: str
    state_after: str | None
    state_version_after: int | None


class DeliveryView(Delivery):
    """A delivery joined with who sent what to whom (the TUI's and the labs' view of one)."""

    __slots__ = ()
    sender: str
    recipient: str
    trace_id: str
    idempotency_key: str
    sender_seq: int | None
    sender_generation: int | None


class TaskRow(Row):
    """One task as the ``tasks`` table keeps it."""

    __slots__ = ()
    task_id: str
    trace_id: str
    goal: str
    state: str
    state_version: int
    machine_version: str
    assignee: str | None
    lease_holder: str | None
    lease_version: int
    budget_total: int
    budget_left: int
    trusted: int
    late_results: int
    rejected: int
    created_tick: int
    updated_tick: int


class Transition(Row):
    """One applied move of a task (the state machine's audit trail)."""

    __slots__ = ()
    seq: int
    task_id: str
    old_state: str
    new_state: str
    reason: str
    executor: str
    role: str
    tick: int
    created_at: str
    state_version: int
    machine_version: str
    message_id: str | None


class Intent(Row):
    """One recorded intent: what deduplication compares (payload and result parsed)."""

    __slots__ = ()
    task_id: str
    idempotency_key: str
    payload_digest: str
    digest_scheme: str
    message_id: str
    arrival: int
    decision: str
    trusted: int
    seen: int
    payload: Any
    result: Any


class ArtifactRow(Row):
    """One stored artifact, without its content (``Store.artifact(ref)`` reads that)."""

    __slots__ = ()
    ref: str
    scheme: str
    kind: str
    size: int
    task_id: str | None
    message_id: str | None
    first_tick: int


class Effect(Row):
    """One committed side effect, once per key."""

    __slots__ = ()
    effect_key: str
    task_id: str
    kind: str
    target: str
    message_id: str
    result_digest: str
    tick: int


class Approval(Row):
    """One reviewer's decision (evidence parsed)."""

    __slots__ = ()
    approval_id: int
    task_id: str
    decision: str
    reviewer: str
    evidence: list
    message_id: str
    tick: int


class BudgetEntry(Row):
    """One line of the budget ledger."""

    __slots__ = ()
    entry: int
    task_id: str
    delta: int
    reason: str
    message_id: str | None
    tick: int
