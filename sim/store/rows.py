"""Typed rows: what the store's shared reads of the message log, the deliveries and the tasks hand out.

A row is a dict of its table's columns (tables, JSON and witnesses take it as it is) whose class
declares those columns, each readable as an attribute too: ``d.decision`` as well as
``d["decision"]``. ``tests/test_store.py`` holds each class to its table's columns, so a column
added to the schema and not here fails there. The event log's rows are
:class:`~sim.events.StoredEvent` (read-only, with the typed event); these are plain data.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = ["Delivery", "DeliveryView", "Message", "Row", "TaskRow"]


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
