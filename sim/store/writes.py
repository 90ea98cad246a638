"""Writes: transactions, the logical clock, the message log and appending events (each folded)."""

from __future__ import annotations

import contextlib
import sqlite3
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Iterator

from ..envelope import Envelope
from ..errors import StoreError
from .. import files as _files
from ..events import EventDraft, MachineLoaded
from ..machine import RuleBook
from .schema import _dumps
from .driver import _translate

if TYPE_CHECKING:  # typing only: core imports this module
    from .core import Store
    from .driver import _Connection


_INSERT_MESSAGE = (
    "INSERT OR IGNORE INTO messages (message_id, envelope_digest, trace_id, task_id, sender, recipient, type, "
    "schema_version, created_at, idempotency_key, payload_digest, digest_scheme, payload, evidence_refs, first_tick, "
    "sender_seq, sender_generation, epoch, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
_INSERT_EVENT = ("INSERT INTO events (tick, created_at, type, task_id, message_id, delivery_id, data) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?)")
#: the events after which no conversation is fenced any more (a reviewer's decision reopens it)
_REOPENS = ("review_decided", "reconciliation_resolved")

#: the seconds of a minute as a time's text ends them ("00Z" ... "59Z")
_SECONDS = tuple(f"{s:02d}Z" for s in range(60))

#: A batch writer (a simulator run, a redelivery on a throwaway copy) commits once every this many units.
GROUP_COMMITS = 256


class Writes:
    """Mixin of :class:`~sim.store.Store`: everything that writes."""

    if TYPE_CHECKING:  # for the type checker: the store's connection, and what Store's other parts give
        conn: _Connection
        path: str | None
        commits: int
        _pre: list | None
        _tick: int
        _next_delivery: int
        _next_arrival: int
        _data_version: int | None
        _group: int | None
        _group_units: int
        _group_open: bool
        _time_cache: tuple[int, str]
        _minute: tuple[int, str]
        _start: datetime | None

        def __getattr__(self, name: str) -> Any: ...

    def transaction(self) -> "_Unit":
        """One atomic unit: BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any error. Inside
        :meth:`group_commits`, a savepoint of the group's transaction instead (see there).
        (A context manager: ``with store.transaction(): ...``.)"""
        if self._group is not None and self._group > 1:
            return _Grouped(self)  # type: ignore[arg-type]  # a Writes is always a Store (its mixin)
        # (a group of one is a transaction of its own: a savepoint in it would roll back nothing more,
        # and would keep a copy of every page the unit changes)
        return _Unit(self)  # type: ignore[arg-type]  # a Writes is always a Store (its mixin)

    def _restore(self, saved: tuple) -> None:
        (self._tick, self._next_delivery, self._next_arrival, self._meta["current_machine"],
         self._data_version) = saved
        self._forget()

    def _commit_group(self) -> None:
        if self._group_open:
            if _files.HOOKED:
                _files.hook_step("committing")
            try:
                self.conn.execute("COMMIT")
            except sqlite3.Error as e:
                raise _translate(e, self.path) from e
            if _files.HOOKED:
                _files.hook_step("committed")
            self._group_open = False
            self.commits += 1
        self._group_units = 0

    @contextlib.contextmanager
    def group_commits(self, every: int = GROUP_COMMITS) -> Iterator["Store"]:
        """Batch mode (the simulator): each :meth:`transaction` inside is a savepoint, and one
        COMMIT lands every ``every`` of them, and at the end. The rows written are the same as with
        one transaction per unit; what a crash can lose is the uncommitted tail of the group (up to
        ``every - 1`` units), all or nothing, never part of one. Interactive writers (``deliver``,
        the live TUI, a reviewer's decision) keep one transaction per unit, and so does ``every=1``
        (each unit its own transaction, no savepoint)."""
        if every < 1:
            raise ValueError("every must be at least 1")
        if self._group is not None:
            raise ValueError("group_commits is already on for this store")
        self._group, self._group_units, self._group_open = every, 0, False
        try:
            yield self  # type: ignore[misc]  # a Writes is always a Store (its mixin)
            self._commit_group()
        except BaseException:
            if self._group_open:
                with contextlib.suppress(sqlite3.Error, StoreError):
                    self.conn.execute("ROLLBACK")
                self._group_open = False
                self._load_meta()  # the counters as the file holds them
            raise
        finally:
            self._group = None

    @property
    def tick(self) -> int:
        return self._tick

    def advance(self, to: int | None = None) -> int:
        """Move the logical clock (inside a transaction): one tick, or to tick ``to``.

        The simulator delivers several messages in one round and passes the round as ``to``;
        time never goes backwards.
        """
        if to is None:
            self._tick += 1
        else:
            if to < self._tick:
                raise StoreError(f"tick {to} is before the store's clock {self._tick}", code="E_CLOCK")
            self._tick = to
        return self._tick

    def time_at(self, tick: int) -> str:
        """``created_at`` of a tick: time zero plus one second per tick (logical time)."""
        if self._time_cache[0] != tick:
            first, minute = self._minute  # the tick that began the minute last formatted, and its text up to it
            if first <= tick < first + 60:
                text = minute + _SECONDS[tick - first]
            else:
                # Another minute: formatted once and kept (a delivery asks for its own tick and, under declared
                # bounds, its conversation's deadline, minutes apart: one remembered minute thrashed between them)
                assert self._start is not None
                t = self._start + timedelta(seconds=tick)
                first = tick - t.second
                minutes = self._minutes
                if minutes.get("start") is not self._start:  # (formatted from another start time: forgotten)
                    minutes.clear()
                    minutes["start"] = self._start
                minute = minutes.get(first)
                if minute is None:
                    if len(minutes) > 256:
                        minutes.clear()
                        minutes["start"] = self._start
                    minute = minutes[first] = t.strftime("%Y-%m-%dT%H:%M:%SZ")[:-3]
                self._minute = (first, minute)
                text = minute + _SECONDS[t.second]
            self._time_cache = (tick, text)
        return self._time_cache[1]

    def record_message(
        self, env: Envelope, envelope_digest: str, sent: tuple[int, int] | None = None
    ) -> tuple[int, bool]:
        """Store the envelope unless this exact envelope is stored; return (msg_seq, new).

        ``sent`` is what the transport knows of the send: (per-sender sequence, sender generation).
        """
        seq, gen = sent if sent is not None else (None, None)
        mid = env.message_id
        values = (
            mid, envelope_digest, env.trace_id, env.task_id, env.sender, env.recipient, env.type,
            env.schema_version, env.created_at, env.idempotency_key, env.payload_digest, env.digest_scheme,
            env.payload_json(), _dumps(list(env.evidence_refs)) if env.evidence_refs else "[]", self._tick, seq, gen,
            env.epoch, env.expires_at,
        )
        c = self.conn
        # The id's stored envelopes, oldest first (usually none): whether this one is among them, and the
        # id's first row, which intake asks next (first_msg_seq: remembered here, not read again).
        pre = self._pre
        if pre is not None and pre[3] is not None and pre[0] == mid:
            rows, pre[3] = pre[3], None  # (read by prefetch; handed out once)
        else:
            rows = c.all("SELECT msg_seq, envelope_digest FROM messages WHERE message_id = ? ORDER BY msg_seq", (mid,))
        same = [s for s, d in rows if d == envelope_digest]
        if same:  # this exact envelope is stored
            at, new = same[0], False
        else:  # a new envelope (if the id was used for another one, this one is stored too: evidence)
            cur = c.run(_INSERT_MESSAGE, values)
            if cur.rowcount != 1:  # stored meanwhile by another connection (outside a write transaction only)
                self._first_seq = None
                return c.one("SELECT msg_seq FROM messages WHERE message_id = ? AND envelope_digest = ?",
                             (mid, envelope_digest))[0], False
            at, new = cur.lastrowid, True
        self._first_seq = (mid, rows[0][0] if rows else at)
        self._number_was_taken = (mid, self._take_number(env.sender, gen or 1, seq)) if new and seq else None
        return at, new

    def _take_number(self, sender: str, generation: int, seq: int) -> bool:
        """Mark number ``seq`` of the body taken; whether another message had taken it before."""
        body = (sender, generation)
        bits = self._numbers.get(body)
        if bits is None:  # (once per body and handle: its numbers stored so far, this one among them)
            bits = self._numbers[body] = bytearray()
            for (n,) in self.conn.all("SELECT sender_seq FROM messages WHERE sender = ? AND COALESCE(sender_generation, "
                                      "1) = ? AND sender_seq IS NOT NULL AND msg_seq < (SELECT MAX(msg_seq) FROM "
                                      "messages)", body):
                if n > 0:
                    if n >= len(bits):
                        bits.extend(bytes(n + 1 - len(bits)))
                    bits[n] = 1
        if seq >= len(bits):
            bits.extend(bytes(seq + 1 - len(bits)))
        was = bits[seq] == 1
        bits[seq] = 1
        return was

    def number_taken_before(self, message_id: str) -> bool:
        """Whether the message just stored (``message_id``) carries a number its body's earlier messages had
        taken: its sender's sequence went back, whatever task it is about."""
        known = self._number_was_taken
        return known is not None and known[0] == message_id and known[1]

    def record_delivery(
        self, delivery_id: int, msg_seq: int, env: Envelope, decision: str, code: str | None, reason: str,
        state_after: str | None, version_after: int | None,
    ) -> int:
        """Write the delivery row (after its events, which already carry its id)."""
        if delivery_id != self._next_delivery:
            raise StoreError(f"delivery id {delivery_id} is not the next one ({self._next_delivery})", code="E_DB_WRITE")
        self.conn.run(
            "INSERT INTO deliveries (delivery_id, tick, msg_seq, message_id, task_id, type, decision, code, reason, "
            "state_after, state_version_after) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (delivery_id, self._tick, msg_seq, env.message_id, env.task_id, env.type, decision, code, reason,
             state_after, version_after),
        )
        self._next_delivery = delivery_id + 1
        return delivery_id

    def append_event(self, ev: EventDraft, *, delivery_id: int | None = None) -> int:
        """Append one event at the current tick and fold it into state. Inside a transaction."""
        self._pre = None  # (what a prefetch read is true only before the first write to state)
        tick = self._tick
        at = self.time_at(tick)
        cur = self.conn.run(
            _INSERT_EVENT, (tick, at, ev.type, ev.task_id, ev.message_id, delivery_id, ev.text or _dumps(ev.data)),
        )
        seq = cur.lastrowid
        self._fold(ev, tick, at)
        self._saw(ev)
        return seq  # type: ignore[return-value]  # an INSERT sets lastrowid

    def append_events(self, evs: list[EventDraft], *, delivery_id: int | None = None) -> None:
        """Append a delivery's events at the current tick in one statement, then fold each in order
        (the same rows as :meth:`append_event` one by one: no fold reads the event log). Inside a
        transaction."""
        self._pre = None  # (what a prefetch read is true only before the first write to state)
        if not evs:
            return
        tick = self._tick
        at = self.time_at(tick)
        self.conn.run_many(
            _INSERT_EVENT, [(tick, at, ev.type, ev.task_id, ev.message_id, delivery_id, ev.text or _dumps(ev.data))
                            for ev in evs])
        for ev in evs:
            self._fold(ev, tick, at)
            self._saw(ev)

    def _saw(self, ev: EventDraft) -> None:
        """Keep what this handle remembers of the log (see :meth:`fenced_now`) true after ``ev``."""
        t = ev.type
        if t == "fence_recorded":
            self._fenced[ev.task_id] = True  # the newest fence of its conversation: nothing reopened it yet
        elif t in _REOPENS:
            self._fenced.clear()
            self._epochs.clear()

    def _forget(self) -> None:
        """Drop what this handle remembers of the log (a rollback, another writer's commit)."""
        self._first_seq = None
        self._fenced.clear()
        self._epochs.clear()
        self.conversation_walk = None
        self._numbers.clear()
        self._number_was_taken = None
        self._pre = None

    def load_machine(self, rb: RuleBook, *, description: str = "") -> None:
        """Load a machine version (inside a transaction); new tasks use it from now on."""
        if rb.version in self.machine_versions():
            raise StoreError(
                f"machine version {rb.version!r} is already loaded; give the new machine a new version",
                code="E_MACHINE_EXISTS",
            )
        self.append_event(MachineLoaded(
            version=rb.version, description=description,
            rules=[[r.from_state.value, r.to_state.value, list(r.roles), r.reason] for r in rb.rules],
        ).draft(None, None))


class _Unit:
    """What :meth:`Writes.transaction` returns outside a group: BEGIN IMMEDIATE on entry (then a look at
    other writers' commits), COMMIT on a clean exit; on any error, the handle's counters as they were, a
    ROLLBACK, and a driver error translated into a StoreError. (A class, not a generator: a delivery
    opens one, and this costs half as much.)"""

    __slots__ = ("store", "saved")
    #: the statement that ends the unit well, and those that undo it
    END: str = "COMMIT"
    UNDO: tuple[str, ...] = ("ROLLBACK",)

    def __init__(self, store: "Store") -> None:
        self.store = store

    def _save(self, store: "Store") -> None:
        self.saved = (store._tick, store._next_delivery, store._next_arrival, store._meta.get("current_machine"),
                      store._data_version)

    def __enter__(self) -> "Store":
        store = self.store
        self._save(store)
        store.conn.run("BEGIN IMMEDIATE")  # (the driver translates its errors)
        try:
            if store._start is not None:  # (a store being created has no meta yet)
                store._refresh()
        except BaseException as e:
            self._abort(e)
            raise
        return store

    def __exit__(self, etype, e, tb) -> None:
        if e is not None:
            self._abort(e)  # (and e goes on)
            return
        store = self.store
        try:
            store._pre = None
            if _files.HOOKED and self.END == "COMMIT":
                _files.hook_step("committing")
            store.conn.run(self.END)
        except BaseException as failed:
            self._abort(failed)
            raise
        if _files.HOOKED and self.END == "COMMIT":
            _files.hook_step("committed")
        self._ended(store)

    def _ended(self, store: "Store") -> None:
        store.commits += 1

    def _abort(self, e: BaseException) -> None:
        """The counters back, the transaction (or savepoint) undone, then ``e`` raised on: as a StoreError
        when it is a driver error, else left to the caller to raise."""
        store = self.store
        store._restore(self.saved)
        with contextlib.suppress(sqlite3.Error, StoreError):
            for statement in self.UNDO:
                store.conn.execute(statement)
        if isinstance(e, sqlite3.Error):
            raise _translate(e, store.path) from e


class _Grouped(_Unit):
    """One unit of a group (:meth:`Writes.group_commits`): a savepoint, released into the group's open
    transaction, which commits every ``every`` units. A unit that fails rolls back to its savepoint alone."""

    __slots__ = ()
    END, UNDO = "RELEASE unit", ("ROLLBACK TO unit", "RELEASE unit")

    def __enter__(self) -> "Store":
        store = self.store
        self._save(store)
        if not store._group_open:
            store.conn.run("BEGIN IMMEDIATE")  # (the driver translates its errors)
            store._group_open = True
            if store._start is not None:
                store._refresh()
        store.conn.run("SAVEPOINT unit")
        return store

    def _ended(self, store: "Store") -> None:
        store._group_units += 1
        if store._group_units >= store._group:  # type: ignore[operator]  # _group is set while a group's units run
            store._commit_group()
