"""Reads: what intake needs, the views and the pages the TUI browses."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any, Iterator, TypeVar

from ..errors import StoreError, damaged_row, stored_json
from ..events import StoredEvent
from ..intake import IntentRecord, TaskView
from ..machine import STATE_BY_NAME, Rule, RuleBook, TaskState
from .rows import (Approval, ArtifactRow, BudgetEntry, Delivery, DeliveryView, Effect, Intent, Message, TaskRow,
                   Transition)
from .schema import STATE_TABLES, _TASK_COLS, _dumps

if TYPE_CHECKING:
    from .driver import _Connection

_R = TypeVar("_R", bound=dict)

_GET_TASK = (f"SELECT {_TASK_COLS}, EXISTS (SELECT 1 FROM effects e WHERE e.task_id = tasks.task_id) "
             "FROM tasks WHERE task_id = ?")

#: A delivery's first reads in one statement (see :meth:`Reads.prefetch`): the stored envelopes of its message
#: id (tag 0, by msg_seq), its task (tag 1) and the intents under its key (tag 2, by arrival). (PRAGMA
#: data_version stays its own statement: as pragma_data_version() it costs more than alone.)
_PREFETCH = (
    "SELECT 0, msg_seq, envelope_digest, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM messages "
    "WHERE message_id = ?1 "
    f"UNION ALL SELECT 1, 0, {_TASK_COLS}, EXISTS (SELECT 1 FROM effects e WHERE e.task_id = tasks.task_id) "
    "FROM tasks WHERE task_id = ?2 "
    "UNION ALL SELECT 2, arrival, task_id, idempotency_key, payload_digest, digest_scheme, message_id, payload, "
    "result, NULL, NULL, NULL FROM intents WHERE task_id = ?2 AND idempotency_key = ?3")

#: Whether another message about task ?1 (through the task's events: another id ?5, under another key ?6)
#: came from body ?3 of sender ?2 numbered ?4 (:meth:`Reads.sequence_used`). (A join, not ``IN (SELECT
#: DISTINCT ...)``: existence needs no distinct list, and the join builds no temporary b-tree.)
_SEQUENCE_USED = (
    "EXISTS (SELECT 1 FROM events e JOIN messages m ON m.message_id = e.message_id WHERE e.task_id = ?1 "
    "AND m.sender = ?2 AND COALESCE(m.sender_generation, 1) = ?3 AND m.sender_seq = ?4 AND m.message_id != ?5 "
    "AND m.idempotency_key != ?6)")
#: Whether a restart (a fault named in ?7...) recorded on task ?1 names a message of body ?3 of sender ?2
#: numbered below ?4 (:meth:`Reads.body_replaced`; ``{marks}``: ?7, ?8 ..., one per restart fault).
_BODY_REPLACED = (
    "EXISTS (SELECT 1 FROM events e JOIN messages m ON m.message_id = e.message_id WHERE e.task_id = ?1 "
    "AND e.type = 'fault_injected' AND json_extract(e.data, '$.fault') IN ({marks}) AND m.sender = ?2 "
    "AND COALESCE(m.sender_generation, 1) = ?3 AND m.sender_seq < ?4)")


def _body_replaced(faults: int) -> str:
    return _BODY_REPLACED.format(marks=",".join(f"?{7 + i}" for i in range(faults)))


#: :meth:`Reads.numbering_marks`' statement, by the number of restart faults it names (written once each)
_NUMBERING: dict[int, str] = {}


#: Effects of tasks other than ?1 committed by a message citing an artifact or a message of ?1
#: (:meth:`Reads.effects_resting_on`). Each cited ref is looked up by key (an artifact by its ref, a message by
#: its id), not compared with the task's artifacts and messages listed first: a list scans the whole artifact
#: store and message log.
_RESTING_ON = (
    "SELECT DISTINCT e.effect_key, e.task_id, e.message_id FROM effects e JOIN messages m ON m.message_id = "
    "e.message_id, json_each(m.evidence_refs) r WHERE e.task_id != ?1 AND e.kind != 'retract' AND ("
    "EXISTS (SELECT 1 FROM artifacts a WHERE a.ref = r.value AND a.task_id = ?1) OR EXISTS (SELECT 1 FROM "
    "messages x WHERE x.message_id = r.value AND x.task_id = ?1)) ORDER BY e.effect_key")


#: The event log's columns, in the order :class:`~sim.events.StoredEvent` takes them.
_EVENT_COLS = "seq, tick, created_at, type, task_id, message_id, delivery_id, data"


#: Per table: the column that names a row in an error, and the columns that must name a task state.
_ROW_KEYS = {
    "tasks": ("task_id", ("state",)), "transitions": ("seq", ("old_state", "new_state")), "intents": ("arrival", ()),
    "effects": ("effect_key", ()), "artifacts": ("ref", ()), "approvals": ("approval_id", ()), "budget": ("entry", ()),
    "messages": ("msg_seq", ()), "deliveries": ("delivery_id", ()),
}


def _state(table: str, row_id, column: str, name) -> TaskState:
    """The task state ``name`` stored in ``table``'s row; one no machine has is a damaged row."""
    try:
        return TaskState(name)
    except ValueError:
        raise damaged_row(table, row_id, f"{column} {name!r} is not a task state") from None


class Reads:
    """Mixin of :class:`~sim.store.Store`: everything that reads."""

    if TYPE_CHECKING:  # for the type checker: the store's connection, and what Store's other parts give
        conn: _Connection

        def __getattr__(self, name: str) -> Any: ...

    #: what :meth:`prefetch` read for the delivery in flight, each part handed out once:
    #: (message_id, task_id, key, [the id's (msg_seq, envelope_digest)], the task's row or None, [intent rows])
    _pre: list | None = None

    def prefetch(self, message_id: str, task_id: str, key: str) -> None:
        """A delivery's first reads (inside its transaction, after its look at other writers, before anything
        is written) in one statement: the stored envelopes of ``message_id`` (:meth:`record_message`), the
        task (:meth:`get_task`) and the intents under ``(task_id, key)`` (:meth:`intents_for`), each then
        handed out once (and dropped at the first write, a rollback or another writer's commit)."""
        rows = self.conn.all(_PREFETCH, (message_id, task_id, key))
        msgs, task, intents = [], None, []
        for r in rows:
            tag = r[0]
            if tag == 0:
                msgs.append((r[1], r[2]))
            elif tag == 1:
                task = r[2:]
            else:
                intents.append(r)
        # (UNION ALL gives each part's rows in turn; within a part, the order each read asks for)
        msgs.sort()
        intents.sort(key=lambda r: r[1])
        self._pre = [message_id, task_id, key, msgs, task, intents]

    def get_task(self, task_id: str) -> TaskView | None:
        pre = self._pre
        if pre is not None and pre[4] is not False and pre[1] == task_id:
            row, pre[4] = pre[4], False  # (handed out once)
        else:
            row = self.conn.one(_GET_TASK, (task_id,))
        if row is None:
            return None
        return TaskView(
            task_id=row[0],
            state=STATE_BY_NAME.get(row[1]) or _state("tasks", row[0], "state", row[1]),
            state_version=row[2],
            machine_version=row[3],
            assignee=row[4],
            lease_holder=row[5],
            lease_version=row[6],
            budget_left=row[7],
            trusted=bool(row[8]),
            has_effects=bool(row[9]),
        )

    def task_trace(self, task_id: str) -> str | None:
        row = self.conn.execute("SELECT trace_id FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
        return row[0] if row else None

    def intents_for(self, task_id: str, key: str) -> tuple[IntentRecord, ...]:
        pre = self._pre
        if pre is not None and pre[5] is not None and pre[1] == task_id and pre[2] == key:
            rows, pre[5] = pre[5], None  # (handed out once)
            return tuple(IntentRecord(r[2], r[3], r[4], r[5], r[6], stored_json("intents", r[1], "payload", r[7]), r[1],
                                      stored_json("intents", r[1], "result", r[8])) for r in rows)
        rows = self.conn.all(
            "SELECT task_id, idempotency_key, payload_digest, digest_scheme, message_id, payload, arrival, result "
            "FROM intents WHERE task_id = ? AND idempotency_key = ? ORDER BY arrival",
            (task_id, key),
        )
        if not rows:
            return ()
        return tuple(
            IntentRecord(r[0], r[1], r[2], r[3], r[4], stored_json("intents", r[6], "payload", r[5]), r[6],
                         stored_json("intents", r[6], "result", r[7])) for r in rows
        )

    def next_arrival(self) -> int:
        """The arrival number the next recorded intent gets (arrival order is kept)."""
        return self._next_arrival

    def next_delivery_id(self) -> int:
        return self._next_delivery

    def rulebook(self, version: str | None = None) -> RuleBook:
        """The rules of ``version`` (default: the version new tasks get)."""
        version = version or self.current_machine
        rb = self._rulebooks.get(version)
        if rb is None:
            rows = self.conn.execute(
                "SELECT from_state, to_state, roles, reason FROM transition_rules WHERE machine_version = ? "
                "ORDER BY from_state, to_state",
                (version,),
            ).fetchall()
            if not rows:
                raise StoreError(f"machine version {version!r} is not loaded", code="E_UNKNOWN_MACHINE")
            rb = RuleBook(
                version,
                tuple(Rule(version, _state("transition_rules", f"{version} {f}->{t}", "from_state", f),
                           _state("transition_rules", f"{version} {f}->{t}", "to_state", t), tuple(r.split(",")), reason)
                      for f, t, r, reason in rows),
            )
            self._rulebooks[version] = rb
        return rb

    def machine_versions(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT version FROM machines ORDER BY loaded_tick, version")]

    def unresolved_refs(self, refs) -> frozenset[str]:
        """Which evidence refs name neither a stored artifact (sha256:...) nor a stored message id."""
        missing = set()
        for ref in refs:
            if ref.startswith("sha256:"):
                hit = self.conn.one("SELECT 1 FROM artifacts WHERE ref = ?", (ref,))
            else:
                hit = self.conn.one("SELECT 1 FROM messages WHERE message_id = ? LIMIT 1", (ref,))
            if hit is None:
                missing.add(ref)
        return frozenset(missing)

    def untrusted_inputs(self, refs, *, besides: str) -> list[tuple[str, str]]:
        """The refs (artifacts or message ids) that belong to a task other than ``besides`` which is
        untrusted now (frozen for review): [(ref, task_id)], in the order given."""
        out = []
        for ref in refs:
            if ref.startswith("sha256:"):
                row = self.conn.one(  # (the reused cursor: a delivery citing evidence asks this)
                    "SELECT t.task_id FROM artifacts a JOIN tasks t ON t.task_id = a.task_id WHERE a.ref = ? "
                    "AND t.trusted = 0 AND t.task_id != ?", (ref, besides))
            else:
                row = self.conn.one(
                    "SELECT t.task_id FROM messages m JOIN tasks t ON t.task_id = m.task_id WHERE m.message_id = ? "
                    "AND t.trusted = 0 AND t.task_id != ? LIMIT 1", (ref, besides))
            if row is not None:
                out.append((ref, row[0]))
        return out

    def effects_resting_on(self, task_id: str) -> list[dict]:
        """Effects of other tasks committed by a message that cites an artifact or a message of ``task_id``."""
        rows = self.conn.execute(_RESTING_ON, (task_id,)).fetchall()
        return [{"effect_key": k, "task_id": t, "message_id": m} for k, t, m in rows]

    def open_reconciliations(self, task_id: str | None = None) -> list[dict]:
        """Every reconciliation_required event (of ``task_id``) that no reconciliation_resolved names
        yet: {seq, tick, task_id, message_id, effects, status}, oldest first."""
        # (one task's through the index of events by task; ``? IS NULL OR r.task_id = ?`` would read every event)
        of_task = "AND r.task_id = ? " if task_id is not None else ""
        rows = self.conn.execute(
            "SELECT r.seq, r.tick, r.task_id, r.message_id, r.data FROM events r WHERE r.type = 'reconciliation_required' "
            f"{of_task}AND NOT EXISTS (SELECT 1 FROM events x WHERE x.type = "
            "'reconciliation_resolved' AND x.task_id = r.task_id AND json_extract(x.data, '$.of') = r.message_id) "
            "ORDER BY r.seq",
            (task_id,) if task_id is not None else (),
        ).fetchall()
        out = []
        for seq, tick, tid, mid, data in rows:
            d = stored_json("events", seq, "data", data)
            out.append({"seq": seq, "tick": tick, "task_id": tid, "message_id": mid, "effects": d.get("effects", []),
                        "status": d.get("status")})
        return out

    def effects_of(self, task_id: str) -> list[dict]:
        """The effects ``task_id`` committed, in the order :meth:`effects` lists them."""
        # (the plain connection, as every read a delivery makes: no savepoint of sqlite-utils' around it)
        cur = self.conn.execute("SELECT * FROM effects WHERE task_id = ? ORDER BY tick, effect_key", (task_id,))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]

    def committed_among(self, keys) -> frozenset[str]:
        """Which of ``keys`` are committed effect keys."""
        keys = list(keys)
        if not keys:
            return frozenset()
        marks = ", ".join("?" * len(keys))
        return frozenset(r[0] for r in self.conn.execute(f"SELECT effect_key FROM effects WHERE effect_key IN ({marks})", keys))

    def artifact(self, ref: str) -> dict | None:
        row = self.conn.execute(
            "SELECT ref, scheme, kind, size, content, task_id, message_id, first_tick FROM artifacts WHERE ref = ?", (ref,)
        ).fetchone()
        if row is None:
            return None
        keys = ("ref", "scheme", "kind", "size", "content", "task_id", "message_id", "first_tick")
        out = dict(zip(keys, row))
        out["content"] = stored_json("artifacts", ref, "content", out["content"])
        return out

    def first_msg_seq(self, message_id: str) -> int | None:
        """The message-log row of the first envelope that used ``message_id``."""
        known = self._first_seq  # (record_message found it when it stored the id's envelope)
        if known is not None and known[0] == message_id:
            return known[1]
        return self.conn.one("SELECT MIN(msg_seq) FROM messages WHERE message_id = ?", (message_id,))[0]

    def fenced_now(self, trace_id: str) -> bool:
        """Whether the conversation ``trace_id`` is fenced now: its fence was recorded and no reviewer's
        decision has reopened it since (``sim.conversation.epochs_of`` walks the same rule). Inside a
        write transaction, remembered per conversation: nobody else writes until it ends, another
        connection's commit is seen when the next one begins (and forgets it all), and this handle's own
        appends keep it true (a fence fences its conversation, a reviewer's decision reopens every one:
        see ``Writes._saw``). Outside one, always read."""
        if not self.conn.in_transaction:
            return self._fence_lookup(trace_id)
        known = self._fenced.get(trace_id)
        if known is not None:
            return known
        if len(self._fenced) >= 4096:  # (a bound: a long run has many conversations)
            self._fenced.clear()
        fenced = self._fenced[trace_id] = self._fence_lookup(trace_id)
        return fenced

    def first_outcome(self, task_id: str | None, message_id: str) -> dict | None:
        """What the first delivery of ``message_id`` about ``task_id`` recorded first: the data of its first
        event (a refusal's code and reason, say), with its ``type``; None when it was never delivered. Looked
        up through the task's events, so the cost stays that of one task's history."""
        row = self.conn.execute(
            "SELECT type, data, seq FROM events WHERE task_id IS ? AND message_id = ? AND delivery_id IS NOT NULL "
            "AND type != 'digest_scheme_assumed' ORDER BY seq LIMIT 1", (task_id, message_id)).fetchone()
        return None if row is None else {**stored_json("events", row[2], "data", row[1]), "type": row[0]}

    def conversation_epoch(self, trace_id: str) -> tuple[int, int]:
        """The epoch conversation ``trace_id`` is in now and the tick it opened (1 and 0 until a reviewer's
        decision after a fence reopens it: ``sim.conversation.epochs_of`` walks the same rule). Remembered
        like :meth:`fenced_now` (a reviewer's decision or another writer's commit forgets it)."""
        known = self._epochs.get(trace_id)
        if known is not None:
            return known
        epoch, opened, fenced = 1, 0, False
        for tick, typ, task in self.conn.execute(
                "SELECT tick, type, task_id FROM events WHERE type IN ('fence_recorded', 'review_decided', "
                "'reconciliation_resolved') ORDER BY seq"):
            if typ == "fence_recorded":
                fenced = fenced or task == trace_id
            elif fenced:
                epoch, opened, fenced = epoch + 1, tick, False
        if len(self._epochs) >= 4096:
            self._epochs.clear()
        self._epochs[trace_id] = (epoch, opened)
        return epoch, opened

    def _fence_lookup(self, trace_id: str) -> bool:
        row = self.conn.execute("SELECT MAX(seq) FROM events WHERE task_id = ? AND type = 'fence_recorded'",
                                (trace_id,)).fetchone()
        if row[0] is None:
            return False
        later = self.conn.execute("SELECT 1 FROM events WHERE seq > ? AND type IN ('review_decided', "
                                  "'reconciliation_resolved') LIMIT 1", (row[0],)).fetchone()
        return later is None

    def sequence_used(self, task_id: str, sender: str, generation: int, seq: int, message_id: str, key: str) -> bool:
        """Whether another message about ``task_id`` (another id, under another key: an equivocating twin
        shares its key and is intake's to judge) came from the same body of ``sender`` under ``seq``.
        Looked up through the task's events, so the cost stays that of one task's history."""
        return self.conn.one(f"SELECT {_SEQUENCE_USED}", (task_id, sender, generation, seq, message_id, key))[0] == 1

    def numbering_marks(self, task_id: str, sender: str, generation: int, seq: int, message_id: str, key: str,
                        restarts) -> tuple[bool, bool]:
        """:meth:`sequence_used` and :meth:`body_replaced` of one message, in one statement (a delivery under
        the conversation rules asks both)."""
        sql = _NUMBERING.get(len(restarts))
        if sql is None:
            sql = _NUMBERING[len(restarts)] = f"SELECT {_SEQUENCE_USED}, {_body_replaced(len(restarts))}"
        row = self.conn.one(sql, (task_id, sender, generation, seq, message_id, key, *restarts))
        return row[0] == 1, row[1] == 1

    def body_replaced(self, task_id: str, sender: str, generation: int, seq: int, restarts) -> bool:
        """Whether body ``generation`` of ``sender`` had been replaced before it numbered a message about
        ``task_id`` ``seq``: a restart (a fault named in ``restarts``) recorded on the task names one of that
        body's messages numbered below ``seq`` as the point it was replaced after. Looked up through the
        task's events, so the cost stays that of one task's history."""
        # (?5 and ?6 are sequence_used's, unused here)
        return self.conn.one(f"SELECT {_body_replaced(len(restarts))}",
                             (task_id, sender, generation, seq, None, None, *restarts))[0] == 1

    def _rows(self, sql: str, params=()) -> list[dict]:
        return list(self.db.query(sql, params))

    @staticmethod
    def _mapped(cls: type[_R], cur, parsed: tuple[str, ...] = (), table: str | None = None) -> Iterator[_R]:
        """The one mapper from a cursor's rows to a typed row class of :mod:`sim.store.rows`, the
        ``parsed`` columns read from their stored JSON, the columns of ``table`` that name a task state
        checked: a damaged row is E_DB_CORRUPT naming ``table`` and the row (:func:`~sim.errors.damaged_row`)."""
        names = [d[0] for d in cur.description]
        key, states = _ROW_KEYS.get(table, (None, ()))  # type: ignore[arg-type]  # a row class is a dict; None (no table) takes the default
        states = [c for c in states if c in names]  # type: ignore[assignment]  # the columns of this cursor among them
        loads = json.loads
        for r in cur:
            row = cls(zip(names, r))
            for col in parsed:
                try:
                    row[col] = loads(row[col])
                except (ValueError, TypeError, RecursionError):  # (the quick path above; the error below)
                    row[col] = stored_json(table or "a", row.get(key, "?"), col, row[col])
            for col in states:
                if row[col] not in STATE_BY_NAME:
                    _state(table, row.get(key, "?"), col, row[col])  # type: ignore[arg-type]  # a row class is a dict; None (no table) takes the default
            yield row

    def _typed(self, cls: type[_R], sql: str, params=()) -> list[_R]:
        return list(self._mapped(cls, self.conn.execute(sql, params)))

    def _messages(self, sql: str, params=()) -> list[Message]:
        return list(self._mapped(Message, self.conn.execute(sql, params), self._VIEWS["messages"][3], "messages"))

    #: The views a command may stream whole: (select, order, row class, JSON columns). Every read of
    #: one of these tables, whole or by task, goes through :meth:`iter_view` (one SQL per view).
    _VIEWS = {
        "tasks": ("SELECT * FROM tasks", "created_tick, task_id", TaskRow, ()),
        "transitions": ("SELECT * FROM transitions", "seq", Transition, ()),
        "intents": ("SELECT * FROM intents", "arrival", Intent, ("payload", "result")),
        "effects": ("SELECT * FROM effects", "tick, effect_key", Effect, ()),
        "artifacts": ("SELECT ref, scheme, kind, size, task_id, message_id, first_tick FROM artifacts", "first_tick, ref",
                      ArtifactRow, ()),
        "approvals": ("SELECT * FROM approvals", "approval_id", Approval, ("evidence",)),
        "budget": ("SELECT * FROM budget", "entry", BudgetEntry, ()),
        "messages": ("SELECT * FROM messages", "msg_seq", Message, ("payload", "evidence_refs")),
        "deliveries": ("SELECT * FROM deliveries", "delivery_id", Delivery, ()),
    }

    def iter_view(self, view: str, *, task_id: str | None = None) -> Iterator[dict]:
        """The rows of ``view`` (of one task), in its order, streamed from one cursor: a command can
        print a million rows in flat memory. See :data:`_VIEWS`."""
        conn = self.conn  # (a closed store says so here, before anything else)
        select, order, cls, parsed = self._view(view)
        where, params = (" WHERE task_id = ?", (task_id,)) if task_id is not None else ("", ())
        yield from self._mapped(cls, conn.execute(f"{select}{where} ORDER BY {order}", params), parsed, view)

    def count_view(self, view: str, *, task_id: str | None = None) -> int:
        """How many rows :meth:`iter_view` gives."""
        conn = self.conn
        table = self._view(view)[0].rsplit(" FROM ", 1)[1]
        if task_id is None:
            return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        return conn.execute(f"SELECT COUNT(*) FROM {table} WHERE task_id = ?", (task_id,)).fetchone()[0]

    def _view(self, view: str) -> tuple:
        try:
            return self._VIEWS[view]
        except KeyError:
            raise StoreError(f"no view {view!r}; the views: {', '.join(self._VIEWS)}", code="E_UNKNOWN_VIEW") from None

    def _events(self, sql: str, params=()) -> list[StoredEvent]:
        """The one mapper from event rows to :class:`~sim.events.StoredEvent` (``sql`` selects
        ``_EVENT_COLS``); ``data`` is parsed when first read."""
        return [StoredEvent(*r) for r in self.conn.execute(sql, params)]

    def messages(self) -> list[Message]:
        return list(self.iter_view("messages"))  # type: ignore[arg-type]  # a row class is a dict; None (no table) takes the default

    def deliveries(self) -> list[Delivery]:
        return list(self.iter_view("deliveries"))  # type: ignore[arg-type]  # a row class is a dict; None (no table) takes the default

    def events(self, *, after: int = 0, limit: int | None = None) -> list[StoredEvent]:
        sql = f"SELECT {_EVENT_COLS} FROM events WHERE seq > ? ORDER BY seq"
        params: tuple = (after,)
        if limit is not None:
            sql += " LIMIT ?"
            params = (after, limit)
        return self._events(sql, params)

    def _paged(self, sql: str, key: str, batch: int, cls: type[dict] = dict, after=0) -> Iterator[dict]:
        """Rows of ``sql`` (which takes ``key > ?`` and ``LIMIT ?``) a batch at a time, in flat memory."""
        while True:
            rows = self._typed(cls, sql, (after, batch))
            if not rows:
                return
            yield from rows
            after = rows[-1][key]

    def events_of_type(self, etype: str) -> list[StoredEvent]:
        """The events of one type, in order."""
        return self._events(f"SELECT {_EVENT_COLS} FROM events WHERE type = ? ORDER BY seq", (etype,))

    def iter_events(
        self, batch: int = 5000, *, task_id: str | None = None, etype: str | None = None
    ) -> Iterator[StoredEvent]:
        """Every event in order, or those of one task and/or type, a page at a time (flat memory)."""
        where = "".join(f" AND {col} = ?" for col, v in (("task_id", task_id), ("type", etype)) if v is not None)
        fixed = [v for v in (task_id, etype) if v is not None]
        after = 0
        while True:
            rows = self._events(f"SELECT {_EVENT_COLS} FROM events WHERE seq > ?{where} ORDER BY seq LIMIT ?",
                                (after, *fixed, batch))
            if not rows:
                return
            yield from rows
            after = rows[-1].seq

    def id_widths(self) -> tuple[int, int]:
        """The longest task id and message id in the event log (a streamed view's column widths)."""
        row = self.conn.execute("SELECT MAX(LENGTH(task_id)), MAX(LENGTH(message_id)) FROM events").fetchone()
        return row[0] or 0, row[1] or 0

    def count_events(self, *, task_id: str | None = None, etype: str | None = None) -> int:
        where = " AND ".join(f"{col} = ?" for col, v in (("task_id", task_id), ("type", etype)) if v is not None)
        params = [v for v in (task_id, etype) if v is not None]
        return self.conn.execute("SELECT COUNT(*) FROM events" + (f" WHERE {where}" if where else ""), params).fetchone()[0]

    def iter_deliveries_with_messages(self, batch: int = 5000, *, after: int = 0) -> Iterator[dict]:
        """Each delivery in order (those after delivery ``after``) joined with the envelope it delivered."""
        sql = (
            "SELECT d.delivery_id, d.tick AS delivery_tick, d.decision AS delivery_decision, d.code AS delivery_code, m.* "
            "FROM deliveries d "
            "JOIN messages m ON m.msg_seq = d.msg_seq "
            "WHERE d.delivery_id > ? ORDER BY d.delivery_id LIMIT ?"
        )
        for r in self._paged(sql, "delivery_id", batch, after=after):
            r["payload"] = stored_json("messages", r["msg_seq"], "payload", r["payload"])
            r["evidence_refs"] = stored_json("messages", r["msg_seq"], "evidence_refs", r["evidence_refs"])
            yield r

    def _scope(self, task_id: str | None, trace_id: str | None, col: str = "task_id") -> tuple[list[str], list]:
        where, params = [], []
        if task_id is not None:
            where.append(f"{col} = ?")
            params.append(task_id)
        if trace_id is not None:
            where.append(f"({col} = ? OR {col} IN (SELECT task_id FROM tasks WHERE trace_id = ?))")
            params += [trace_id, trace_id]
        return where, params

    def event_ids(self, *, task_id: str | None = None, trace_id: str | None = None, upto: int | None = None) -> list[int]:
        """Event sequence numbers in log order, filtered by task or trace, up to event ``upto``."""
        where, params = self._scope(task_id, trace_id)
        if upto is not None:
            where.append("seq <= ?")
            params.append(upto)
        sql = "SELECT seq FROM events" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY seq"
        return [r[0] for r in self.conn.execute(sql, params)]

    def events_at(self, seqs: list[int]) -> list[StoredEvent]:
        """The events with these sequence numbers, in the order given (data parsed when read)."""
        if not seqs:
            return []
        lo, hi = min(seqs), max(seqs)
        rows = {r.seq: r for r in self._events(f"SELECT {_EVENT_COLS} FROM events WHERE seq BETWEEN ? AND ?", (lo, hi))} \
            if hi - lo < 4 * len(seqs) + 64 else \
            {r.seq: r for r in self._events(
                f"SELECT {_EVENT_COLS} FROM events WHERE seq IN ({','.join('?' * len(seqs))})", seqs)}
        return [rows[s] for s in seqs if s in rows]

    def delivery_ids(
        self, *, task_id: str | None = None, trace_id: str | None = None, upto_event: int | None = None
    ) -> list[int]:
        """Delivery ids in order, filtered by task or trace; with ``upto_event``, only the
        deliveries whose events (or absence of any) came at or before that event."""
        where, params = self._scope(task_id, trace_id)
        if upto_event is not None:
            last = self.conn.execute(
                "SELECT COALESCE(MAX(delivery_id), 0) FROM events WHERE seq <= ? AND delivery_id IS NOT NULL", (upto_event,)
            ).fetchone()[0]
            where.append("delivery_id <= ?")
            params.append(last)
        sql = "SELECT delivery_id FROM deliveries" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY delivery_id"
        return [r[0] for r in self.conn.execute(sql, params)]

    _DELIVERY_SQL = (
        "SELECT d.*, m.sender, m.recipient, m.trace_id, m.idempotency_key, m.sender_seq, m.sender_generation "
        "FROM deliveries d JOIN messages m ON m.msg_seq = d.msg_seq "
    )

    def deliveries_at(self, ids: list[int]) -> list[DeliveryView]:
        """These deliveries joined with who sent what to whom, in the order given."""
        if not ids:
            return []
        lo, hi = min(ids), max(ids)
        if hi - lo < 4 * len(ids) + 64:
            rows = self._typed(DeliveryView, self._DELIVERY_SQL + "WHERE d.delivery_id BETWEEN ? AND ?", (lo, hi))
        else:
            rows = self._typed(DeliveryView, self._DELIVERY_SQL + f"WHERE d.delivery_id IN ({','.join('?' * len(ids))})",
                               ids)
        by = {r["delivery_id"]: r for r in rows}
        return [by[i] for i in ids if i in by]

    def delivery(self, delivery_id: int) -> DeliveryView | None:
        rows = self._typed(DeliveryView, self._DELIVERY_SQL + "WHERE d.delivery_id = ?", (delivery_id,))
        return rows[0] if rows else None

    def message_at(self, msg_seq: int) -> Message | None:
        """One stored envelope, whole (payload and evidence parsed)."""
        rows = self._messages("SELECT * FROM messages WHERE msg_seq = ?", (msg_seq,))
        return rows[0] if rows else None

    def deliveries_of(self, message_id: str) -> list[Delivery]:
        return self._typed(Delivery, "SELECT * FROM deliveries WHERE message_id = ? ORDER BY delivery_id", (message_id,))

    def events_of_delivery(self, delivery_id: int) -> list[StoredEvent]:
        return self._events(f"SELECT {_EVENT_COLS} FROM events WHERE delivery_id = ? ORDER BY seq", (delivery_id,))

    def event(self, seq: int) -> StoredEvent | None:
        rows = self._events(f"SELECT {_EVENT_COLS} FROM events WHERE seq = ?", (seq,))
        return rows[0] if rows else None

    def next_delivery_span(self, after: int) -> tuple[int, int] | None:
        """The first delivery with events after event ``after``: (delivery_id, its last event)."""
        row = self.conn.execute(
            "SELECT delivery_id FROM events WHERE seq > ? AND delivery_id IS NOT NULL ORDER BY seq LIMIT 1", (after,)
        ).fetchone()
        if row is None:
            return None
        end = self.conn.execute("SELECT MAX(seq) FROM events WHERE delivery_id = ?", (row[0],)).fetchone()[0]
        return row[0], end

    def last_delivery(self) -> int:
        return self.conn.execute("SELECT COALESCE(MAX(delivery_id), 0) FROM deliveries").fetchone()[0]

    def last_event(self) -> int:
        return self.conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0]

    def intent_of(self, task_id: str, key: str, payload_digest: str, scheme: str) -> dict | None:
        rows = self._rows(
            "SELECT * FROM intents WHERE task_id = ? AND idempotency_key = ? AND payload_digest = ? AND digest_scheme = ?",
            (task_id, key, payload_digest, scheme),
        )
        for r in rows:
            r["payload"] = stored_json("intents", r["arrival"], "payload", r["payload"])
            r["result"] = stored_json("intents", r["arrival"], "result", r["result"])
        return rows[0] if rows else None

    def message_by_id(self, message_id: str) -> Message | None:
        """The first envelope stored under ``message_id`` (evidence may cite a message)."""
        rows = self._rows("SELECT msg_seq FROM messages WHERE message_id = ? ORDER BY msg_seq LIMIT 1", (message_id,))
        return self.message_at(rows[0]["msg_seq"]) if rows else None

    def tasks(self) -> list[TaskRow]:
        return list(self.iter_view("tasks"))  # type: ignore[arg-type]  # a row class is a dict; None (no table) takes the default

    def transitions(self, task_id: str | None = None) -> list[dict]:
        return list(self.iter_view("transitions", task_id=task_id))

    def transition_rules(self) -> list[dict]:
        return self._rows("SELECT * FROM transition_rules ORDER BY machine_version, from_state, to_state")

    def machines(self) -> list[dict]:
        return self._rows("SELECT * FROM machines ORDER BY loaded_tick, version")

    def intents(self) -> list[dict]:
        return list(self.iter_view("intents"))

    def intents_of_task(self, task_id: str) -> list[dict]:
        return list(self.iter_view("intents", task_id=task_id))

    def artifacts(self) -> list[dict]:
        return list(self.iter_view("artifacts"))

    def effects(self) -> list[dict]:
        return list(self.iter_view("effects"))

    def approvals(self) -> list[dict]:
        return list(self.iter_view("approvals"))

    def budget_ledger(self) -> list[dict]:
        return list(self.iter_view("budget"))

    def counts(self) -> dict[str, int]:
        """Row counts of every table, for summaries."""
        return {t: self.count_of(t) for t in ("messages", "deliveries", "events") + STATE_TABLES}

    def count_of(self, table: str) -> int:
        """How many rows one table of the run holds."""
        if table not in ("messages", "deliveries", "events") + STATE_TABLES:
            raise ValueError(f"not a table of the run: {table!r}")
        return self.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]

    def count_upto(self, table: str, limit: int) -> int:
        """How many rows one table holds, counted no further than ``limit`` + 1 (cheap on any run:
        enough to tell whether it holds more than ``limit``)."""
        if table not in ("messages", "deliveries", "events") + STATE_TABLES:
            raise ValueError(f"not a table of the run: {table!r}")
        return self.conn.execute(f"SELECT COUNT(*) FROM (SELECT 1 FROM {table} LIMIT ?)", (limit + 1,)).fetchone()[0]

    def run_summary(self, list_limit: int = 10_000) -> dict:
        """A run's figures aggregated in SQL (memory flat in the run's size): tasks by final state,
        row counts, deliveries by decision, events by type, faults by kind, effects committed; and,
        when there are at most ``list_limit`` of them, each task's state, each effect key and each
        fault injected (a big run's lists are what 'state', 'events' and --json views are for)."""
        q = self.conn.execute
        out = {
            "tasks_by_state": dict(q("SELECT state, COUNT(*) FROM tasks GROUP BY state ORDER BY state")),
            "effects_committed": q("SELECT COUNT(*) FROM effects").fetchone()[0],
            "messages": q("SELECT COUNT(*) FROM messages").fetchone()[0],
            "deliveries": q("SELECT COUNT(*) FROM deliveries").fetchone()[0],
            "events": q("SELECT COUNT(*) FROM events").fetchone()[0],
            "deliveries_by_decision": dict(q("SELECT decision, COUNT(*) FROM deliveries GROUP BY decision ORDER BY decision")),
            "events_by_type": dict(q("SELECT type, COUNT(*) FROM events GROUP BY type ORDER BY type")),
            "faults_by_kind": dict(q("SELECT json_extract(data, '$.fault'), COUNT(*) FROM events "
                                     "WHERE type = 'fault_injected' GROUP BY 1 ORDER BY 1")),
        }
        if sum(out["tasks_by_state"].values()) <= list_limit:
            out["tasks"] = dict(q("SELECT task_id, state FROM tasks ORDER BY created_tick, task_id"))
        if out["effects_committed"] <= list_limit:
            out["effects"] = [r[0] for r in q("SELECT effect_key FROM effects ORDER BY tick, effect_key")]
        if sum(out["faults_by_kind"].values()) <= list_limit:
            out["faults_injected"] = [
                {"fault": (stored_json("events", s, "data", d) or {}).get("fault"), "message_id": m, "task_id": t}
                for d, m, t, s in q("SELECT data, message_id, task_id, seq FROM events WHERE type = 'fault_injected' "
                                    "ORDER BY seq")
            ]
        return out

    def state_digest(self) -> str:
        """sha256 over every state table, rows in primary-key order: equal digests, equal state."""
        h = hashlib.sha256()
        for t in STATE_TABLES:
            h.update(t.encode() + b"\n")
            ncols = len(self.conn.execute(f"PRAGMA table_info({t})").fetchall())
            order = ", ".join(str(i) for i in range(1, min(ncols, 4) + 1))
            cur = self.conn.execute(f"SELECT * FROM {t} ORDER BY {order}")
            for row in cur:
                h.update(_dumps(list(row)).encode("utf-8") + b"\n")
        return "sha256:" + h.hexdigest()

    # ---------------------------------------------------------------- a big run, a shard at a time
    # The judges (sim.invariants) read a run of millions of rows in shards of tasks: every row of
    # some tasks at once, and point lookups for what crosses tasks. The shard index lives in the
    # connection's temp database (it works on a read-only file too, and goes with the connection).

    def shard_plan(self, size: int) -> list[tuple[int, int]]:
        """Number every task id the events and messages name (sorted), and index the tables without
        a task_id index by it; return the ranges of ``size`` numbers (the first also carries the rows
        that name no task)."""
        c = self.conn
        for t in ("shard_keys", "shard_deliveries", "shard_messages", "shard_effects", "shard_artifacts"):
            c.execute(f"DROP TABLE IF EXISTS temp.{t}")
        c.execute("CREATE TEMP TABLE shard_keys (k INTEGER PRIMARY KEY, task_id TEXT NOT NULL UNIQUE)")
        c.execute("INSERT INTO temp.shard_keys (task_id) SELECT task_id FROM events WHERE task_id IS NOT NULL "
                  "UNION SELECT task_id FROM messages WHERE task_id IS NOT NULL ORDER BY 1")
        for table, key in (("deliveries", "delivery_id"), ("messages", "msg_seq"), ("effects", "rowid"),
                           ("artifacts", "rowid")):
            c.execute(f"CREATE TEMP TABLE shard_{table} AS SELECT task_id, {key} AS id FROM main.{table}")
            c.execute(f"CREATE INDEX temp.shard_{table}_by_task ON shard_{table} (task_id, id)")
        n = c.execute("SELECT COUNT(*) FROM temp.shard_keys").fetchone()[0]
        return [(lo, min(lo + size - 1, n)) for lo in range(1, n + 1, size)] or [(1, 0)]

    def shard_rows(self, lo: int, hi: int) -> dict[str, list[dict]]:
        """Every row of the tasks numbered ``lo``..``hi`` by :meth:`shard_plan`, in the order the whole
        views give them (events, deliveries, messages, transitions, effects, artifacts)."""
        keys = "SELECT task_id FROM temp.shard_keys WHERE k BETWEEN ? AND ?"
        none = lo == 1  # rows that name no task go with the first shard
        p = (lo, hi)

        def via(table: str) -> str:
            return (f"SELECT id FROM temp.shard_{table} WHERE task_id IN ({keys})"
                    + (f" UNION ALL SELECT id FROM temp.shard_{table} WHERE task_id IS NULL" if none else ""))

        events = self._events(f"SELECT {_EVENT_COLS} FROM events WHERE task_id IN ({keys})"
                              + (" OR task_id IS NULL" if none else "") + " ORDER BY seq", p)
        messages = self._rows(f"SELECT * FROM messages WHERE msg_seq IN ({via('messages')}) ORDER BY msg_seq", p)
        for r in messages:
            r["payload"] = stored_json("messages", r["msg_seq"], "payload", r["payload"])
            r["evidence_refs"] = stored_json("messages", r["msg_seq"], "evidence_refs", r["evidence_refs"])
        return {
            "events": events,  # type: ignore[dict-item]  # a StoredEvent is a read-only mapping of its columns
            "deliveries": self._rows(f"SELECT * FROM deliveries WHERE delivery_id IN ({via('deliveries')}) "
                                     "ORDER BY delivery_id", p),
            "messages": messages,
            "transitions": self._rows(f"SELECT * FROM transitions WHERE task_id IN ({keys}) ORDER BY seq", p),
            "effects": self._rows(f"SELECT * FROM effects WHERE rowid IN ({via('effects')}) ORDER BY tick, effect_key", p),
            "artifacts": self._rows("SELECT ref, scheme, kind, size, task_id, message_id, first_tick FROM artifacts "
                                    f"WHERE rowid IN ({via('artifacts')}) ORDER BY first_tick, ref", p),
        }

    def scratch_map(self, name: str) -> "ScratchMap":
        """A string-keyed map in the connection's temp database (a file SQLite removes with the
        connection): what a streamed export must remember of millions of rows, in flat memory. Works
        on a read-only file."""
        return ScratchMap(self.conn, name)

    def has_message_id(self, message_id: str) -> bool:
        return self.conn.execute("SELECT 1 FROM messages WHERE message_id = ? LIMIT 1", (message_id,)).fetchone() is not None

    def evidence_refs_of(self, message_id: str) -> list[str] | None:
        """The evidence_refs of every envelope stored under ``message_id``, in order (None: no such message)."""
        rows = self.conn.execute("SELECT evidence_refs, msg_seq FROM messages WHERE message_id = ? ORDER BY msg_seq",
                                 (message_id,)).fetchall()
        return [r for refs, seq in rows for r in stored_json("messages", seq, "evidence_refs", refs)] if rows else None

    def participants(self) -> list[str]:
        """Every participant the run names (a sender, a recipient or a task's assignee), sorted."""
        return [r[0] for r in self.conn.execute(
            "SELECT sender FROM messages UNION SELECT recipient FROM messages "
            "UNION SELECT assignee FROM tasks WHERE assignee IS NOT NULL ORDER BY 1")]

    def task_of_message(self, message_id: str) -> str | None:
        row = self.conn.execute("SELECT task_id FROM messages WHERE message_id = ? ORDER BY msg_seq DESC LIMIT 1",
                                (message_id,)).fetchone()
        return row[0] if row else None

    def artifact_task(self, ref: str) -> tuple[bool, str | None]:
        """Whether an artifact ``ref`` is stored, and the task it belongs to."""
        row = self.conn.execute("SELECT task_id FROM artifacts WHERE ref = ?", (ref,)).fetchone()
        return (row is not None, row[0] if row else None)

    def last_event_before_delivery(self, delivery_id: int) -> int:
        """The newest event of any delivery numbered below ``delivery_id`` (0: none)."""
        row = self.conn.execute("SELECT MAX(seq) FROM events WHERE delivery_id IS NOT NULL AND delivery_id < ?",
                                (delivery_id,)).fetchone()
        return row[0] or 0

    def iter_deliveries(self, batch: int = 5000, *, after: int = 0) -> Iterator[Delivery]:
        """Every delivery in delivery_id order (those after delivery ``after``), a page at a time."""
        return self._paged("SELECT * FROM deliveries WHERE delivery_id > ? ORDER BY delivery_id LIMIT ?",  # type: ignore[return-value]  # _paged yields the row class it is handed
                           "delivery_id", batch, Delivery, after=after)

    def events_naming_no_delivery(self) -> list[StoredEvent]:
        """Events whose delivery_id names no recorded delivery (a broken writer's), in order."""
        return self._events(f"SELECT {_EVENT_COLS} FROM events WHERE delivery_id IS NOT NULL AND delivery_id NOT IN "
                            "(SELECT delivery_id FROM deliveries) ORDER BY seq")

    def iter_delivered_kinds(self) -> Iterator[tuple]:
        """Each delivery in order as (delivery_id, decision, message_id, type, task_id, trace_id) of the
        envelope it delivered: what a judge of the conversation's order reads of every delivery, streamed
        from one cursor without the payloads."""
        yield from self.conn.execute(
            "SELECT d.delivery_id, d.decision, m.message_id, m.type, m.task_id, m.trace_id FROM deliveries d "
            "JOIN messages m ON m.msg_seq = d.msg_seq ORDER BY d.delivery_id")

    def iter_event_clocks(self) -> Iterator[tuple]:
        """Each event in order as (seq, tick, type, task_id, message_id, delivery_id): the log's clock,
        streamed from one cursor without the events' data."""
        yield from self.conn.execute("SELECT seq, tick, type, task_id, message_id, delivery_id FROM events ORDER BY seq")

    def iter_delivery_clocks(self) -> Iterator[tuple]:
        """Each delivery in delivery_id order as (delivery_id, tick, message_id, task_id), from one cursor."""
        yield from self.conn.execute("SELECT delivery_id, tick, message_id, task_id FROM deliveries ORDER BY delivery_id")

    # ---------------------------------------------------------------- a window of a big run (the timeline)
    # A page of a run of millions of deliveries shows some thousands of them: each read below costs the
    # window (or one pass of SQL over a table), never a Python list of the whole run.

    def deliveries_by_decision(self) -> dict[str, int]:
        """How many deliveries each decision got (decisions in name order)."""
        return dict(self.conn.execute("SELECT decision, COUNT(*) FROM deliveries GROUP BY decision ORDER BY decision"))

    def iter_events_between(self, after: int, upto: int | None = None, batch: int = 5000) -> Iterator[StoredEvent]:
        """The events numbered above ``after`` and at most ``upto`` (None: to the end), in order, a page at a time."""
        while True:
            rows = self._events(f"SELECT {_EVENT_COLS} FROM events WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
                                (after, upto if upto is not None else (1 << 62), batch))
            if not rows:
                return
            yield from rows
            after = rows[-1].seq

    def last_event_of_deliveries_upto(self, delivery_id: int) -> int:
        """The newest event that names a delivery numbered at most ``delivery_id`` (0: none). The runtime
        appends a delivery's events in delivery order, so this is a search over the log (a few point
        reads, whatever its size), not a scan; a log out of that order (CLOCK_MONOTONIC's to judge) is
        answered by a scan."""
        q = self.conn.execute

        def next_named(seq: int):  # the first event at or after seq that names a delivery: (seq, delivery)
            return q("SELECT seq, delivery_id FROM events WHERE seq >= ? AND delivery_id IS NOT NULL "
                     "ORDER BY seq LIMIT 1", (seq,)).fetchone()

        lo, hi = 1, self.last_event() + 1  # the first event naming a later delivery is in [lo, hi]
        while lo < hi:
            mid = (lo + hi) // 2
            row = next_named(mid)
            if row is None or row[1] > delivery_id:
                hi = mid
            else:
                lo = row[0] + 1
        row = q("SELECT seq FROM events WHERE seq < ? AND delivery_id IS NOT NULL ORDER BY seq DESC LIMIT 1",
                (lo,)).fetchone()
        found = row[0] if row else 0
        later = next_named(found + 1) if found else next_named(1)
        if later is not None and later[1] <= delivery_id:  # out of order: the plain question
            return q("SELECT COALESCE(MAX(seq), 0) FROM events WHERE delivery_id IS NOT NULL AND delivery_id <= ?",
                     (delivery_id,)).fetchone()[0]
        return found

    def first_deliveries_of_messages(self, message_ids) -> dict[str, int]:
        """The first delivery of each of ``message_ids`` that was delivered (one pass over the deliveries)."""
        ids = sorted(set(message_ids))
        if not ids:
            return {}
        return dict(self.conn.execute("SELECT message_id, MIN(delivery_id) FROM deliveries WHERE message_id IN "
                                      "(SELECT value FROM json_each(?)) GROUP BY message_id", (json.dumps(ids),)))

    def deliveries_of_messages(self, message_ids) -> dict[str, list[tuple[int, int]]]:
        """Every delivery of each of ``message_ids`` that was delivered, as (delivery_id, tick) in delivery
        order (one pass over the deliveries)."""
        ids = sorted(set(message_ids))
        out: dict[str, list[tuple[int, int]]] = {}
        if not ids:
            return out
        for mid, d, t in self.conn.execute("SELECT message_id, delivery_id, tick FROM deliveries WHERE message_id IN "
                                           "(SELECT value FROM json_each(?)) ORDER BY delivery_id", (json.dumps(ids),)):
            out.setdefault(mid, []).append((d, t))
        return out

    def deliveries_of_events(self, seqs) -> dict[int, int]:
        """The delivery each of these events belongs to on a page of the log: the delivery it names, else
        (an event naming none) the delivery of the next event that names one."""
        out = {}
        for s in sorted(set(seqs)):
            row = self.conn.execute("SELECT delivery_id FROM events WHERE seq >= ? AND delivery_id IS NOT NULL "
                                    "ORDER BY seq LIMIT 1", (s,)).fetchone()
            if row is not None and self.conn.execute("SELECT 1 FROM events WHERE seq = ?", (s,)).fetchone():
                out[s] = row[0]
        return out

    def state_versions_before(self, delivery_id: int, task_ids) -> dict[str, int]:
        """For each of ``task_ids``, the state_version_after of its last delivery before ``delivery_id`` that
        left one (one pass over the deliveries before it)."""
        ids = sorted(set(task_ids))
        if not ids:
            return {}
        return {t: v for t, v, _d in self.conn.execute(
            "SELECT task_id, state_version_after, MAX(delivery_id) FROM deliveries WHERE delivery_id < ? AND "
            "state_after IS NOT NULL AND task_id IN (SELECT value FROM json_each(?)) GROUP BY task_id",
            (delivery_id, json.dumps(ids)))}


class ScratchMap:
    """A map of strings to strings or integers kept in a temp table (see :meth:`Reads.scratch_map`);
    ``in``, ``add`` (as a set: the value 1), ``get`` and item assignment.

    Writes wait in a bounded buffer (:data:`BUFFER` entries) and go to the table together, one
    ``executemany``; a read looks in the buffer first, and every statement goes through one cursor.
    (Statement by statement, a big export's judging spent a fifth of ``check``'s time making cursors
    and binding one row at a time.)"""

    __slots__ = ("_cur", "_has", "_get", "_put", "_pending")

    BUFFER = 8192

    def __init__(self, conn, name: str):
        if not name.isidentifier():
            raise ValueError(f"not a table name: {name!r}")
        conn.execute(f"DROP TABLE IF EXISTS temp.{name}")
        conn.execute(f"CREATE TEMP TABLE {name} (k TEXT PRIMARY KEY, v) WITHOUT ROWID")
        self._cur = conn.cursor()
        self._has = f"SELECT 1 FROM temp.{name} WHERE k = ?"
        self._get = f"SELECT v FROM temp.{name} WHERE k = ?"
        self._put = f"INSERT OR REPLACE INTO temp.{name} (k, v) VALUES (?, ?)"
        self._pending: dict = {}

    def _write(self, k, v) -> None:
        pending = self._pending
        pending[k] = v
        if len(pending) >= self.BUFFER:
            self._cur.executemany(self._put, pending.items())
            pending.clear()

    def __contains__(self, k) -> bool:
        return k in self._pending or self._cur.execute(self._has, (k,)).fetchone() is not None

    def add(self, k) -> None:
        self._write(k, 1)

    def get(self, k, default=None):
        pending = self._pending
        if k in pending:
            return pending[k]
        row = self._cur.execute(self._get, (k,)).fetchone()
        return default if row is None else row[0]

    def __setitem__(self, k, v) -> None:
        self._write(k, v)

    def setdefault(self, k, v):
        """Set ``k`` to ``v`` unless it has a value; its value."""
        old = self.get(k, _MISSING)
        if old is not _MISSING:
            return old
        self._write(k, v)
        return v


_MISSING = object()
