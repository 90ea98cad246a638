"""The SQLite store: the only package that knows SQL.

Three kinds of data live here and are never mixed:

* the **message log**: ``messages`` (one row per message_id; a second row only when the same
  message_id arrives with different content, which is itself evidence) and ``deliveries``
  (one row per delivery attempt, with the intake decision);
* the **event log**: ``events``, append-only and numbered, written only by the runtime;
* the **state**: ``tasks``, ``transitions``, ``transition_rules``/``machines``, ``intents``,
  ``artifacts``, ``effects``, ``approvals``, ``budget``. State is never written directly:
  every change is an event, and :meth:`Store.append_event` folds the event into the state
  tables through one reducer (``_fold``). Replaying the event log through the same reducer
  into an empty database must give the same state digest.

A delivery is one transaction (:meth:`Store.transaction`): the delivery row, its events and
the state they fold into commit together or not at all. Task moves use compare-and-swap on
``state_version``; a lost race raises :class:`~sim.errors.StaleWrite` and rolls back.

Driver errors are translated into :class:`~sim.errors.StoreError` with a stable code.

Split by job: ``schema`` (tables, version), ``driver`` (the connection through which every error is
translated), ``core`` (opening, creating, verifying, migrating; the Store class), ``writes``
(transactions, clock, message log, appending events), ``reducer`` (the row changes of :mod:`sim.folds` made in SQL), ``reads`` (intake's
reads, views, pages), ``floor`` (benchmark floors and the write tracer), ``progress`` (lab progress).
"""

from ..events import EventDraft
from .core import Store
from .driver import SIDE_FILES, probe_file, remove_database
from .floor import BareWriter, StatementReplayer, bare_read_at, bare_read_first, bare_table_page, machine_rows, replay_writes, rows_by_tick, write_recorder, write_rows_bare
from .progress import ProgressStore
from .reducer import _FOLDS
from .schema import APP_ID, DEFAULT_START, EVENT_TYPES, SCHEMA_VERSION, STATE_TABLES
from .writes import GROUP_COMMITS


__all__ = [
    "GROUP_COMMITS",
    "Store",
    "ProgressStore",
    "EventDraft",
    "SCHEMA_VERSION",
    "APP_ID",
    "STATE_TABLES",
    "DEFAULT_START",
    "EVENT_TYPES",
    "SIDE_FILES",
    "remove_database",
    "probe_file",
    "rows_by_tick",
    "BareWriter",
    "StatementReplayer",
    "write_rows_bare",
    "write_recorder",
    "replay_writes",
    "machine_rows",
    "bare_read_first",
    "bare_read_at",
    "bare_table_page",
    "_FOLDS",
]
