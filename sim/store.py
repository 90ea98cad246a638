"""The SQLite store: the only module that knows SQL.

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
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import time
import urllib.parse
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

import sqlite_utils

from .envelope import Envelope
from .errors import StaleWrite, StoreError
from .events import REGISTRY as EVENT_REGISTRY
from .events import EventDraft, MachineLoaded
from .intake import IntentRecord, TaskView
from .machine import Rule, RuleBook, TaskState
from .privacy import Privacy

__all__ = [
    "Store",
    "SCHEMA_VERSION",
    "APP_ID",
    "STATE_TABLES",
    "DEFAULT_START",
    "EVENT_TYPES",
    "rows_by_tick",
    "write_rows_bare",
    "write_recorder",
    "replay_writes",
]

SCHEMA_VERSION = 2
APP_ID = "protolab"
DEFAULT_START = "2026-07-13T04:00:00Z"

#: The tables that make up authoritative state, in digest order.
STATE_TABLES = (
    "machines",
    "transition_rules",
    "tasks",
    "transitions",
    "intents",
    "artifacts",
    "effects",
    "approvals",
    "budget",
)

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

CREATE TABLE messages (
    msg_seq INTEGER PRIMARY KEY,
    message_id TEXT NOT NULL,
    envelope_digest TEXT NOT NULL,
    trace_id TEXT NOT NULL, task_id TEXT NOT NULL,
    sender TEXT NOT NULL, recipient TEXT NOT NULL, type TEXT NOT NULL,
    schema_version TEXT NOT NULL, created_at TEXT NOT NULL,
    idempotency_key TEXT NOT NULL, payload_digest TEXT NOT NULL, digest_scheme TEXT NOT NULL,
    payload TEXT NOT NULL, evidence_refs TEXT NOT NULL,
    first_tick INTEGER NOT NULL,
    sender_seq INTEGER, sender_generation INTEGER,
    UNIQUE (message_id, envelope_digest)
);
CREATE INDEX messages_by_id ON messages (message_id);

CREATE TABLE deliveries (
    delivery_id INTEGER PRIMARY KEY,
    tick INTEGER NOT NULL,
    msg_seq INTEGER NOT NULL REFERENCES messages (msg_seq),
    message_id TEXT NOT NULL, task_id TEXT NOT NULL, type TEXT NOT NULL,
    decision TEXT NOT NULL CHECK (decision IN ('accepted','duplicate','conflict','late','rejected')),
    code TEXT, reason TEXT NOT NULL,
    state_after TEXT, state_version_after INTEGER
);

CREATE TABLE events (
    seq INTEGER PRIMARY KEY,
    tick INTEGER NOT NULL, created_at TEXT NOT NULL,
    type TEXT NOT NULL, task_id TEXT, message_id TEXT, delivery_id INTEGER,
    data TEXT NOT NULL
);
CREATE INDEX events_by_task ON events (task_id);

CREATE TABLE machines (
    version TEXT PRIMARY KEY, description TEXT NOT NULL, loaded_tick INTEGER NOT NULL
);
CREATE TABLE transition_rules (
    machine_version TEXT NOT NULL REFERENCES machines (version),
    from_state TEXT NOT NULL, to_state TEXT NOT NULL,
    roles TEXT NOT NULL, reason TEXT NOT NULL,
    PRIMARY KEY (machine_version, from_state, to_state)
);

CREATE TABLE tasks (
    task_id TEXT PRIMARY KEY,
    trace_id TEXT NOT NULL, goal TEXT NOT NULL,
    state TEXT NOT NULL, state_version INTEGER NOT NULL,
    machine_version TEXT NOT NULL REFERENCES machines (version),
    assignee TEXT, lease_holder TEXT, lease_version INTEGER NOT NULL,
    budget_total INTEGER NOT NULL, budget_left INTEGER NOT NULL,
    trusted INTEGER NOT NULL,
    late_results INTEGER NOT NULL, rejected INTEGER NOT NULL,
    created_tick INTEGER NOT NULL, updated_tick INTEGER NOT NULL
);

CREATE TABLE transitions (
    seq INTEGER PRIMARY KEY,
    task_id TEXT NOT NULL, old_state TEXT NOT NULL, new_state TEXT NOT NULL,
    reason TEXT NOT NULL, executor TEXT NOT NULL, role TEXT NOT NULL,
    tick INTEGER NOT NULL, created_at TEXT NOT NULL,
    state_version INTEGER NOT NULL, machine_version TEXT NOT NULL,
    message_id TEXT
);
CREATE INDEX transitions_by_task ON transitions (task_id);

CREATE TABLE intents (
    task_id TEXT NOT NULL, idempotency_key TEXT NOT NULL,
    payload_digest TEXT NOT NULL, digest_scheme TEXT NOT NULL,
    message_id TEXT NOT NULL, arrival INTEGER NOT NULL,
    decision TEXT NOT NULL, trusted INTEGER NOT NULL, seen INTEGER NOT NULL,
    payload TEXT NOT NULL, result TEXT NOT NULL,
    PRIMARY KEY (task_id, idempotency_key, payload_digest, digest_scheme)
);

CREATE TABLE artifacts (
    ref TEXT PRIMARY KEY, scheme TEXT NOT NULL, kind TEXT NOT NULL,
    size INTEGER NOT NULL, content TEXT NOT NULL,
    task_id TEXT, message_id TEXT, first_tick INTEGER NOT NULL
);

CREATE TABLE effects (
    effect_key TEXT PRIMARY KEY,
    task_id TEXT NOT NULL, kind TEXT NOT NULL, target TEXT NOT NULL,
    message_id TEXT NOT NULL, result_digest TEXT NOT NULL, tick INTEGER NOT NULL
);

CREATE TABLE approvals (
    approval_id INTEGER PRIMARY KEY,
    task_id TEXT NOT NULL, decision TEXT NOT NULL, reviewer TEXT NOT NULL,
    evidence TEXT NOT NULL, message_id TEXT NOT NULL, tick INTEGER NOT NULL
);

CREATE TABLE budget (
    entry INTEGER PRIMARY KEY,
    task_id TEXT NOT NULL, delta INTEGER NOT NULL, reason TEXT NOT NULL,
    message_id TEXT, tick INTEGER NOT NULL
);
"""

#: Every event type the runtime may append, and what folding it changes (from sim.events).
EVENT_TYPES = {t: cls.FOLDS for t, cls in EVENT_REGISTRY.items()}

_TASK_COLS = (
    "task_id, state, state_version, machine_version, assignee, lease_holder, lease_version, budget_left, trusted"
)


def _dumps(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class Store:
    """A protolab database. Open with :meth:`create`, :meth:`open` or :meth:`memory`."""

    def __init__(self, db: sqlite_utils.Database, path: str | None):
        self.db = db
        self.conn: sqlite3.Connection = db.conn
        self.path = path
        self._rulebooks: dict[str, RuleBook] = {}
        self._meta: dict[str, str] = {}
        self._tick = 0
        self.commits = 0  # transactions committed through this handle (the benchmark floor matches it)
        self._next_delivery = 1
        self._next_arrival = 1
        self._time_cache: tuple[int, str] = (-1, "")
        self._start: datetime | None = None
        self.readonly = False
        # PRAGMA data_version as of this handle's last look: it changes exactly when another
        # connection (another process) commits, and then the counters are read again.
        self._data_version: int | None = None
        if isinstance(self.conn, _Connection):
            self.conn.path = path

    # ------------------------------------------------------------------ opening

    @staticmethod
    def _connect(path: str, tracer=None) -> sqlite_utils.Database:
        # isolation_level=None: we issue BEGIN/COMMIT ourselves, one transaction per delivery.
        # timeout: how long BEGIN IMMEDIATE waits for another process's write transaction.
        try:
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, factory=_Connection,
                                   timeout=_BUSY_SECONDS)
        except sqlite3.Error as e:
            raise _translate(e, path) from e
        conn.path = path
        conn.tracer = tracer
        return sqlite_utils.Database(conn)

    @staticmethod
    def _connect_readonly(path: Path) -> sqlite_utils.Database:
        # mode=ro: SQLite refuses every write. A run closed cleanly has no -wal file: open it
        # immutable, so not even the -shm/-wal side files appear beside it. A -wal left by a
        # writer still running (or one that crashed) must be read through: plain mode=ro.
        wal = Path(str(path) + "-wal")
        live = wal.exists() and wal.stat().st_size > 0
        # In a folder we may not write, a live -wal can only be read if its -shm is there too.
        uri = "file:" + urllib.parse.quote(str(path.resolve())) + ("?mode=ro" if live else "?mode=ro&immutable=1")
        try:
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, factory=_Connection,
                                   timeout=_BUSY_SECONDS)
            conn.path = str(path)
            if live:
                conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        except StoreError as e:
            folder = path.resolve().parent
            if live and not os.access(folder, os.W_OK):
                raise StoreError(
                    f"{path} has changes in {wal.name} not yet in the file, and its folder {folder} is not writable, "
                    f"so SQLite cannot read them read-only; copy {path.name} with its -wal and -shm to a writable folder",
                    code="E_DB_READONLY") from None
            raise e
        except sqlite3.Error as e:
            raise _translate(e, str(path)) from e
        return sqlite_utils.Database(conn)

    @classmethod
    def create(
        cls, path: str | os.PathLike | None, *, start_time: str = DEFAULT_START, rulebook: RuleBook | None = None,
        empty: bool = False, tracer=None,
    ) -> "Store":
        """Create a new database at ``path`` (``None`` for in-memory). Refuses an existing file.

        ``empty`` leaves out the default machine (a replay folds the run's own machine_loaded event).
        ``tracer(sql, params, many)`` (see :func:`write_recorder`) sees every statement the store
        executes (``many``: an executemany, ``params`` its rows).
        """
        if path is not None:
            p = Path(path)
            if p.exists():
                raise StoreError(f"{p} already exists; choose another --db or remove it", code="E_DB_EXISTS")
            if not p.parent.exists():
                raise StoreError(f"folder {p.parent} does not exist", code="E_DB_MISSING")
            if not os.access(p.parent, os.W_OK | os.X_OK):
                raise StoreError(f"cannot write in {p.parent.resolve()}: the folder is read-only", code="E_DB_READONLY")
        _parse_time(start_time)
        try:
            db = cls._connect(str(path) if path is not None else ":memory:", tracer)
            store = cls(db, str(path) if path is not None else None)
            store._pragmas()
            with store.transaction():
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        store.conn.execute(statement)
                for k, v in (
                    ("app", APP_ID),
                    ("schema_version", str(SCHEMA_VERSION)),
                    ("start_time", start_time),
                    ("current_machine", ""),
                ):
                    store.conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (k, v))
            store._load_meta()
            if not empty:
                if rulebook is None:
                    from .machine import default_rulebook

                    rulebook = default_rulebook()
                with store.transaction():
                    store.load_machine(rulebook, description="the course's default task machine")
        except sqlite3.Error as e:
            raise _translate(e, str(path) if path is not None else None) from e
        return store

    @classmethod
    def memory(cls, **kw) -> "Store":
        """A fresh in-memory store (tests, benchmarks, replays)."""
        return cls.create(None, **kw)

    @classmethod
    def open(cls, path: str | os.PathLike, *, readonly: bool = False, verify: bool = True) -> "Store":
        """Open an existing protolab database, checking it is one and that its schema is known.

        ``readonly`` opens it so that nothing can be written to the file (SQLite's read-only
        mode, immutable when no -wal holds changes): commands that only read, and the TUI, open
        a run that way. An older schema is then migrated in a private in-memory copy, never in
        the file. Without ``readonly`` the file and its folder must be writable (WAL puts -wal
        and -shm beside it), or nothing is opened. ``verify`` runs SQLite's quick_check first,
        so a damaged file is refused (E_DB_CORRUPT) before anything reads or writes it.
        """
        p = Path(path)
        if not p.exists():
            raise StoreError(f"{p} does not exist; create it with 'protolab init --db {p}'", code="E_DB_MISSING")
        if p.is_dir():
            raise StoreError(f"{p} is a folder, not a database file", code="E_DB_NOT_PROTOLAB")
        try:
            with open(p, "rb") as fh:
                head = fh.read(16)
        except OSError as e:
            raise StoreError(f"cannot read {p}: {e.strerror}", code="E_DB_UNREADABLE") from None
        if head and head != b"SQLite format 3\x00":
            raise StoreError(f"{p} is not an SQLite database (corrupt or another kind of file)", code="E_DB_CORRUPT")
        if not head:
            raise StoreError(f"{p} is empty, not a protolab database", code="E_DB_NOT_PROTOLAB")
        if not readonly:
            _check_writable(p)
        db = None
        try:
            db = cls._connect_readonly(p) if readonly else cls._connect(str(p))
            store = cls(db, str(p))
            store.readonly = readonly
            if verify:
                store._verify()
            names = set(db.table_names())
            if "meta" not in names:
                db.conn.close()
                raise StoreError(f"{p} is an SQLite database but not protolab's (no meta table)", code="E_DB_NOT_PROTOLAB")
            cols = {r[1] for r in db.conn.execute("PRAGMA table_info(meta)")}
            if not {"key", "value"} <= cols:
                db.conn.close()
                raise StoreError(f"{p} is an SQLite database but not protolab's", code="E_DB_NOT_PROTOLAB")
            meta = dict(db.conn.execute("SELECT key, value FROM meta").fetchall())
            if meta.get("app") != APP_ID:
                db.conn.close()
                raise StoreError(f"{p} is an SQLite database but not protolab's", code="E_DB_NOT_PROTOLAB")
            try:
                version = int(meta.get("schema_version", ""))
            except ValueError:
                db.conn.close()
                raise StoreError(f"{p} has an unreadable schema_version", code="E_DB_CORRUPT") from None
            if version > SCHEMA_VERSION:
                db.conn.close()
                raise StoreError(
                    f"{p} has schema version {version}, newer than this protolab understands ({SCHEMA_VERSION}); upgrade protolab",
                    code="E_DB_SCHEMA_NEWER",
                )
            missing = set(STATE_TABLES + ("messages", "deliveries", "events")) - names
            if missing:
                db.conn.close()
                raise StoreError(f"{p} lacks tables {', '.join(sorted(missing))}; it is damaged", code="E_DB_CORRUPT")
            if readonly:
                if version < SCHEMA_VERSION:
                    mem = store.copy()
                    store.close()
                    mem._migrate(version)
                    mem.conn.execute("PRAGMA query_only = ON")  # read-only like the file it came from
                    mem.path, mem.readonly = str(p), True
                    store = mem
                store._load_meta()
                return store
            store._pragmas()
            if version < SCHEMA_VERSION:
                store._migrate(version)
            store._load_meta()
        except BaseException as e:
            if db is not None:
                with contextlib.suppress(sqlite3.Error):
                    db.conn.close()
            if isinstance(e, sqlite3.Error):
                raise _translate(e, str(p)) from e
            raise
        return store

    def _verify(self) -> None:
        """SQLite's quick_check (page structure, records, free list): a damaged file is refused."""
        rows = self.conn.execute("PRAGMA quick_check(1)").fetchall()
        if rows != [("ok",)]:
            found = " ".join(str(rows[0][0]).split()) if rows else "no answer"
            raise StoreError(f"{self.path} is damaged (SQLite's integrity check: {found}); restore it from a copy or "
                             "run the scenario again", code="E_DB_CORRUPT")

    #: Schema changes, one step per version: the statements that take version N-1 to N.
    _MIGRATIONS = {
        2: (
            # The transport's per-sender sequence number and the sender's body generation,
            # recorded when a message is sent (the simulator's runs are conversations).
            "ALTER TABLE messages ADD COLUMN sender_seq INTEGER",
            "ALTER TABLE messages ADD COLUMN sender_generation INTEGER",
        ),
    }

    def _migrate(self, version: int) -> None:
        """Bring an older database up to this schema, in one transaction."""
        with self.transaction():
            for v in range(version + 1, SCHEMA_VERSION + 1):
                for statement in self._MIGRATIONS[v]:
                    self.conn.execute(statement)
            self.conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))

    def _pragmas(self) -> None:
        if self.path is not None:
            mode = self.conn.execute("PRAGMA journal_mode").fetchone()[0]
            if mode != "wal":
                self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA foreign_keys=ON")

    def _load_meta(self) -> None:
        self._meta = dict(self.conn.execute("SELECT key, value FROM meta").fetchall())
        self._start = _parse_time(self._meta["start_time"])
        self._sync_counters()

    def _sync_counters(self) -> None:
        # The logical clock is the tick of the newest event: every tick appends at least one.
        # Each read is an index lookup (newest row by rowid), never a scan: it runs inside every
        # write transaction that follows another process's commit.
        # data_version is read first: outside a transaction (at open) another process may commit
        # between these reads, and then the next transaction sees a newer data_version and reads
        # everything again. Read last, it could hide that commit and leave the counters stale.
        c = self.conn
        self._data_version = c.execute("PRAGMA data_version").fetchone()[0]
        self._tick = c.execute("SELECT COALESCE((SELECT tick FROM events ORDER BY seq DESC LIMIT 1), 0)").fetchone()[0]
        self._next_delivery = c.execute("SELECT COALESCE(MAX(delivery_id), 0) + 1 FROM deliveries").fetchone()[0]
        self._next_arrival = c.execute(
            "SELECT COALESCE((SELECT arrival FROM intents ORDER BY rowid DESC LIMIT 1), 0) + 1").fetchone()[0]

    def _refresh(self) -> None:
        """Inside BEGIN IMMEDIATE: if another connection committed since this handle last looked,
        read the counters (tick, next delivery id, next arrival) and meta again, so the clock and
        the ids this transaction assigns follow everything committed before it."""
        if self.conn.execute("PRAGMA data_version").fetchone()[0] != self._data_version:
            self._load_meta()

    def poll(self) -> bool:
        """Whether another connection (another process) committed since this handle last looked;
        if so, its counters and meta are read again. A view watching a file calls it on a timer."""
        try:
            now = self.conn.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.Error as e:
            raise _translate(e, self.path) from e
        if now == self._data_version:
            return False
        self._load_meta()
        return True

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ transactions

    @contextlib.contextmanager
    def transaction(self) -> Iterator["Store"]:
        """One atomic unit: BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any error."""
        saved = (self._tick, self._next_delivery, self._next_arrival, self._meta.get("current_machine"),
                 self._data_version)
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as e:
            raise _translate(e, self.path) from e
        try:
            if self._start is not None:  # (a store being created has no meta yet)
                self._refresh()
            yield self
            self.conn.execute("COMMIT")
            self.commits += 1
        except BaseException as e:
            (self._tick, self._next_delivery, self._next_arrival, self._meta["current_machine"],
             self._data_version) = saved
            with contextlib.suppress(sqlite3.Error, StoreError):
                self.conn.execute("ROLLBACK")
            if isinstance(e, sqlite3.Error):
                raise _translate(e, self.path) from e
            raise

    # ------------------------------------------------------------------ clock

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
            assert self._start is not None
            self._time_cache = (tick, (self._start + timedelta(seconds=tick)).strftime("%Y-%m-%dT%H:%M:%SZ"))
        return self._time_cache[1]

    def get_meta(self, key: str) -> str | None:
        return self._meta.get(key)

    def set_meta(self, values: dict[str, str]) -> None:
        """Record facts about the database itself (scenario, seed, policy): not state, not digested."""
        with self.transaction():
            self.conn.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                list(values.items()),
            )
        self._meta.update(values)

    def privacy(self) -> Privacy:
        """The run's declaration of sensitive fields (its ``privacy`` meta; empty when none)."""
        text = self._meta.get("privacy")
        cached = getattr(self, "_privacy", None)
        if cached is None or cached[0] != text:
            cached = self._privacy = (text, Privacy.from_meta(text))
        return cached[1]

    @property
    def start_time(self) -> str:
        return self._meta["start_time"]

    @property
    def current_machine(self) -> str:
        return self._meta.get("current_machine", "")

    # ------------------------------------------------------------------ reads for intake

    def get_task(self, task_id: str) -> TaskView | None:
        row = self.conn.execute(
            f"SELECT {_TASK_COLS}, EXISTS (SELECT 1 FROM effects e WHERE e.task_id = tasks.task_id) "
            "FROM tasks WHERE task_id = ?",
            (task_id,),
        ).fetchone()
        if row is None:
            return None
        return TaskView(
            task_id=row[0],
            state=TaskState(row[1]),
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
        rows = self.conn.execute(
            "SELECT task_id, idempotency_key, payload_digest, digest_scheme, message_id, payload, arrival, result "
            "FROM intents WHERE task_id = ? AND idempotency_key = ? ORDER BY arrival",
            (task_id, key),
        ).fetchall()
        return tuple(
            IntentRecord(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6], json.loads(r[7])) for r in rows
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
                tuple(Rule(version, TaskState(f), TaskState(t), tuple(r.split(",")), reason) for f, t, r, reason in rows),
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
                hit = self.conn.execute("SELECT 1 FROM artifacts WHERE ref = ?", (ref,)).fetchone()
            else:
                hit = self.conn.execute("SELECT 1 FROM messages WHERE message_id = ? LIMIT 1", (ref,)).fetchone()
            if hit is None:
                missing.add(ref)
        return frozenset(missing)

    def untrusted_inputs(self, refs, *, besides: str) -> list[tuple[str, str]]:
        """The refs (artifacts or message ids) that belong to a task other than ``besides`` which is
        untrusted now (frozen for review): [(ref, task_id)], in the order given."""
        out = []
        for ref in refs:
            if ref.startswith("sha256:"):
                row = self.conn.execute(
                    "SELECT t.task_id FROM artifacts a JOIN tasks t ON t.task_id = a.task_id WHERE a.ref = ? "
                    "AND t.trusted = 0 AND t.task_id != ?", (ref, besides)).fetchone()
            else:
                row = self.conn.execute(
                    "SELECT t.task_id FROM messages m JOIN tasks t ON t.task_id = m.task_id WHERE m.message_id = ? "
                    "AND t.trusted = 0 AND t.task_id != ? LIMIT 1", (ref, besides)).fetchone()
            if row is not None:
                out.append((ref, row[0]))
        return out

    def effects_resting_on(self, task_id: str) -> list[dict]:
        """Effects of other tasks committed by a message that cites an artifact or a message of ``task_id``."""
        rows = self.conn.execute(
            "SELECT DISTINCT e.effect_key, e.task_id, e.message_id FROM effects e JOIN messages m ON m.message_id = "
            "e.message_id, json_each(m.evidence_refs) r WHERE e.task_id != ? AND e.kind != 'retract' AND ("
            "r.value IN (SELECT ref FROM artifacts WHERE task_id = ?) OR r.value IN (SELECT message_id FROM messages "
            "WHERE task_id = ?)) ORDER BY e.effect_key", (task_id, task_id, task_id)).fetchall()
        return [{"effect_key": k, "task_id": t, "message_id": m} for k, t, m in rows]

    def open_reconciliations(self, task_id: str | None = None) -> list[dict]:
        """Every reconciliation_required event (of ``task_id``) that no reconciliation_resolved names
        yet: {seq, tick, task_id, message_id, effects, status}, oldest first."""
        rows = self.conn.execute(
            "SELECT r.seq, r.tick, r.task_id, r.message_id, r.data FROM events r WHERE r.type = 'reconciliation_required' "
            "AND (? IS NULL OR r.task_id = ?) AND NOT EXISTS (SELECT 1 FROM events x WHERE x.type = "
            "'reconciliation_resolved' AND x.task_id = r.task_id AND json_extract(x.data, '$.of') = r.message_id) "
            "ORDER BY r.seq",
            (task_id, task_id),
        ).fetchall()
        out = []
        for seq, tick, tid, mid, data in rows:
            d = json.loads(data)
            out.append({"seq": seq, "tick": tick, "task_id": tid, "message_id": mid, "effects": d.get("effects", []),
                        "status": d.get("status")})
        return out

    def effects_of(self, task_id: str) -> list[dict]:
        """The effects ``task_id`` committed, in the order :meth:`effects` lists them."""
        return self._rows("SELECT * FROM effects WHERE task_id = ? ORDER BY tick, effect_key", (task_id,))

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
        out["content"] = json.loads(out["content"])
        return out

    # ------------------------------------------------------------------ message log

    def record_message(
        self, env: Envelope, envelope_digest: str, sent: tuple[int, int] | None = None
    ) -> tuple[int, bool]:
        """Store the envelope unless this exact envelope is stored; return (msg_seq, new).

        ``sent`` is what the transport knows of the send: (per-sender sequence, sender generation).
        """
        seq, gen = sent if sent is not None else (None, None)
        cur = self.conn.execute(
            "INSERT OR IGNORE INTO messages (message_id, envelope_digest, trace_id, task_id, sender, recipient, type, "
            "schema_version, created_at, idempotency_key, payload_digest, digest_scheme, payload, evidence_refs, first_tick, "
            "sender_seq, sender_generation) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                env.message_id, envelope_digest, env.trace_id, env.task_id, env.sender, env.recipient, env.type,
                env.schema_version, env.created_at, env.idempotency_key, env.payload_digest, env.digest_scheme,
                _dumps(env.payload), _dumps(list(env.evidence_refs)), self._tick, seq, gen,
            ),
        )
        if cur.rowcount == 1:
            return cur.lastrowid, True
        row = self.conn.execute(
            "SELECT msg_seq FROM messages WHERE message_id = ? AND envelope_digest = ?",
            (env.message_id, envelope_digest),
        ).fetchone()
        return row[0], False

    def first_msg_seq(self, message_id: str) -> int | None:
        """The message-log row of the first envelope that used ``message_id``."""
        row = self.conn.execute("SELECT MIN(msg_seq) FROM messages WHERE message_id = ?", (message_id,)).fetchone()
        return row[0]

    def record_delivery(
        self, delivery_id: int, msg_seq: int, env: Envelope, decision: str, code: str | None, reason: str,
        state_after: str | None, version_after: int | None,
    ) -> int:
        """Write the delivery row (after its events, which already carry its id)."""
        if delivery_id != self._next_delivery:
            raise StoreError(f"delivery id {delivery_id} is not the next one ({self._next_delivery})", code="E_DB_WRITE")
        self.conn.execute(
            "INSERT INTO deliveries (delivery_id, tick, msg_seq, message_id, task_id, type, decision, code, reason, "
            "state_after, state_version_after) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (delivery_id, self._tick, msg_seq, env.message_id, env.task_id, env.type, decision, code, reason,
             state_after, version_after),
        )
        self._next_delivery = delivery_id + 1
        return delivery_id

    # ------------------------------------------------------------------ events and the reducer

    def append_event(self, ev: EventDraft, *, delivery_id: int | None = None) -> int:
        """Append one event at the current tick and fold it into state. Inside a transaction."""
        cur = self.conn.execute(
            "INSERT INTO events (tick, created_at, type, task_id, message_id, delivery_id, data) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (self._tick, self.time_at(self._tick), ev.type, ev.task_id, ev.message_id, delivery_id, _dumps(ev.data)),
        )
        self._fold(ev.type, ev.task_id, ev.message_id, ev.data, self._tick)
        return cur.lastrowid

    def _fold(self, etype: str, task_id: str | None, message_id: str | None, d: dict, tick: int) -> None:
        """The reducer: how each event type changes state (one ``_fold_<type>`` per type that
        changes any; the others change nothing). Replay runs exactly this."""
        fold = _FOLDS.get(etype)
        if fold is not None:
            fold(self, task_id, message_id, d, tick)
        elif etype not in EVENT_REGISTRY:  # pragma: no cover - the runtime only appends known types
            raise StoreError(f"unknown event type {etype!r}", code="E_UNKNOWN_EVENT")

    def _fold_machine_loaded(self, task_id: str | None, message_id: str | None, d: dict, tick: int) -> None:
        c = self.conn
        c.execute(
            "INSERT INTO machines (version, description, loaded_tick) VALUES (?, ?, ?)",
            (d["version"], d["description"], tick),
        )
        c.executemany(
            "INSERT INTO transition_rules (machine_version, from_state, to_state, roles, reason) VALUES (?, ?, ?, ?, ?)",
            [(d["version"], r[0], r[1], ",".join(r[2]), r[3]) for r in d["rules"]],
        )
        c.execute("UPDATE meta SET value = ? WHERE key = 'current_machine'", (d["version"],))
        self._meta["current_machine"] = d["version"]

    def _fold_task_created(self, task_id: str | None, message_id: str | None, d: dict, tick: int) -> None:
        c = self.conn
        c.execute(
            "INSERT INTO tasks (task_id, trace_id, goal, state, state_version, machine_version, assignee, "
            "lease_holder, lease_version, budget_total, budget_left, trusted, late_results, rejected, created_tick, updated_tick) "
            "VALUES (?, ?, ?, 'pending', 0, ?, NULL, NULL, 0, ?, ?, 1, 0, 0, ?, ?)",
            (task_id, d["trace_id"], d["goal"], d["machine_version"], d["budget"], d["budget"], tick, tick),
        )
        c.execute(
            "INSERT INTO budget (task_id, delta, reason, message_id, tick) VALUES (?, ?, 'allotted', ?, ?)",
            (task_id, d["budget"], message_id, tick),
        )

    def _fold_transition_applied(self, task_id: str | None, message_id: str | None, d: dict, tick: int) -> None:
        c = self.conn
        trusted = 0 if d["to"] == "needs_review" else (1 if d["from"] == "needs_review" else None)
        cur = c.execute(
            "UPDATE tasks SET state = ?, state_version = state_version + 1, updated_tick = ?, "
            "assignee = COALESCE(?, assignee), trusted = COALESCE(?, trusted) "
            "WHERE task_id = ? AND state = ? AND state_version = ?",
            (d["to"], tick, d.get("assignee"), trusted, task_id, d["from"], d["from_version"]),
        )
        if cur.rowcount != 1:
            raise StaleWrite(
                f"task {task_id} is no longer {d['from']} at state_version {d['from_version']}; reread and retry",
                task_id=task_id,
            )
        c.execute(
            "INSERT INTO transitions (task_id, old_state, new_state, reason, executor, role, tick, created_at, "
            "state_version, machine_version, message_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                task_id, d["from"], d["to"], d["reason"], d["executor"], d["role"], tick, self.time_at(tick),
                d["from_version"] + 1, d["machine_version"], message_id,
            ),
        )

    def _fold_lease_granted(self, task_id: str | None, message_id: str | None, d: dict, tick: int) -> None:
        c = self.conn
        c.execute(
            "UPDATE tasks SET lease_holder = ?, lease_version = ?, updated_tick = ? WHERE task_id = ?",
            (d["holder"], d["lease_version"], tick, task_id),
        )

    def _fold_lease_expired(self, task_id: str | None, message_id: str | None, d: dict, tick: int) -> None:
        c = self.conn
        c.execute("UPDATE tasks SET lease_holder = NULL, updated_tick = ? WHERE task_id = ?", (tick, task_id))

    def _fold_budget_charged(self, task_id: str | None, message_id: str | None, d: dict, tick: int) -> None:
        c = self.conn
        c.execute(
            "INSERT INTO budget (task_id, delta, reason, message_id, tick) VALUES (?, ?, ?, ?, ?)",
            (task_id, -d["amount"], d["reason"], message_id, tick),
        )
        c.execute("UPDATE tasks SET budget_left = budget_left - ? WHERE task_id = ?", (d["amount"], task_id))

    def _fold_intent_recorded(self, task_id: str | None, message_id: str | None, d: dict, tick: int) -> None:
        c = self.conn
        c.execute(
            "INSERT INTO intents (task_id, idempotency_key, payload_digest, digest_scheme, message_id, arrival, "
            "decision, trusted, seen, payload, result) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?) "
            # Under the safe policy a (key, digest, scheme) is recorded once; a policy that
            # does not deduplicate records it again, and the last write wins.
            "ON CONFLICT (task_id, idempotency_key, payload_digest, digest_scheme) DO UPDATE SET "
            "seen = seen + 1, message_id = excluded.message_id, result = excluded.result",
            (
                task_id, d["key"], d["digest"], d["scheme"], message_id, d["arrival"], d["decision"],
                0 if d["decision"] == "conflict" else 1, _dumps(d["payload"]), _dumps(d["result"]),
            ),
        )
        self._next_arrival = max(self._next_arrival, d["arrival"] + 1)

    def _fold_duplicate_recorded(self, task_id: str | None, message_id: str | None, d: dict, tick: int) -> None:
        c = self.conn
        c.execute(
            "UPDATE intents SET seen = seen + 1 WHERE task_id = ? AND idempotency_key = ? AND payload_digest = ? "
            "AND digest_scheme = ?",
            (task_id, d["key"], d["digest"], d["scheme"]),
        )

    def _fold_conflict_recorded(self, task_id: str | None, message_id: str | None, d: dict, tick: int) -> None:
        c = self.conn
        c.execute("UPDATE intents SET trusted = 0 WHERE task_id = ? AND idempotency_key = ?", (task_id, d["key"]))
        c.execute("UPDATE tasks SET trusted = 0, updated_tick = ? WHERE task_id = ?", (tick, task_id))

    def _fold_late_recorded(self, task_id: str | None, message_id: str | None, d: dict, tick: int) -> None:
        c = self.conn
        c.execute("UPDATE tasks SET late_results = late_results + 1 WHERE task_id = ?", (task_id,))

    def _fold_transition_rejected(self, task_id: str | None, message_id: str | None, d: dict, tick: int) -> None:
        c = self.conn
        if task_id is not None:
            c.execute("UPDATE tasks SET rejected = rejected + 1 WHERE task_id = ?", (task_id,))

    def _fold_artifact_stored(self, task_id: str | None, message_id: str | None, d: dict, tick: int) -> None:
        c = self.conn
        c.execute(
            "INSERT OR IGNORE INTO artifacts (ref, scheme, kind, size, content, task_id, message_id, first_tick) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (d["ref"], d["scheme"], d["kind"], d["size"], _dumps(d["content"]), task_id, message_id, tick),
        )

    def _fold_effect_committed(self, task_id: str | None, message_id: str | None, d: dict, tick: int) -> None:
        c = self.conn
        c.execute(
            "INSERT INTO effects (effect_key, task_id, kind, target, message_id, result_digest, tick) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (d["effect_key"], task_id, d["kind"], d["target"], message_id, d["result_digest"], tick),
        )

    def _fold_reconciliation_resolved(self, task_id: str | None, message_id: str | None, d: dict, tick: int) -> None:
        c = self.conn
        c.execute(
            "INSERT INTO approvals (task_id, decision, reviewer, evidence, message_id, tick) VALUES (?, ?, ?, ?, ?, ?)",
            (task_id, f"reconcile:{d['decision']}", d["reviewer"], _dumps(d["evidence"]), message_id, tick),
        )

    def _fold_review_decided(self, task_id: str | None, message_id: str | None, d: dict, tick: int) -> None:
        c = self.conn
        c.execute(
            "INSERT INTO approvals (task_id, decision, reviewer, evidence, message_id, tick) VALUES (?, ?, ?, ?, ?, ?)",
            (task_id, d["decision"], d["reviewer"], _dumps(d["evidence"]), message_id, tick),
        )

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

    # ------------------------------------------------------------------ views

    def _rows(self, sql: str, params=()) -> list[dict]:
        return list(self.db.query(sql, params))

    def messages(self) -> list[dict]:
        rows = self._rows("SELECT * FROM messages ORDER BY msg_seq")
        for r in rows:
            r["payload"] = json.loads(r["payload"])
            r["evidence_refs"] = json.loads(r["evidence_refs"])
        return rows

    def deliveries(self) -> list[dict]:
        return self._rows("SELECT * FROM deliveries ORDER BY delivery_id")

    def events(self, *, after: int = 0, limit: int | None = None) -> list[dict]:
        sql = "SELECT * FROM events WHERE seq > ? ORDER BY seq"
        params: tuple = (after,)
        if limit is not None:
            sql += " LIMIT ?"
            params = (after, limit)
        rows = self._rows(sql, params)
        for r in rows:
            r["data"] = json.loads(r["data"])
        return rows

    def _paged(self, sql: str, key: str, batch: int) -> Iterator[dict]:
        """Rows of ``sql`` (which takes ``key > ?`` and ``LIMIT ?``) a batch at a time, in flat memory."""
        after = 0
        while True:
            rows = self._rows(sql, (after, batch))
            if not rows:
                return
            yield from rows
            after = rows[-1][key]

    def events_of_type(self, etype: str) -> list[dict]:
        """The events of one type, in order."""
        rows = self._rows("SELECT * FROM events WHERE type = ? ORDER BY seq", (etype,))
        for r in rows:
            r["data"] = json.loads(r["data"])
        return rows

    def iter_events(self, batch: int = 5000) -> Iterator[dict]:
        """Every event in order (replay of large runs)."""
        for r in self._paged("SELECT * FROM events WHERE seq > ? ORDER BY seq LIMIT ?", "seq", batch):
            r["data"] = json.loads(r["data"])
            yield r

    def iter_deliveries_with_messages(self, batch: int = 5000) -> Iterator[dict]:
        """Each delivery in order joined with the envelope it delivered."""
        sql = (
            "SELECT d.delivery_id, d.tick AS delivery_tick, d.decision AS delivery_decision, m.* FROM deliveries d "
            "JOIN messages m ON m.msg_seq = d.msg_seq "
            "WHERE d.delivery_id > ? ORDER BY d.delivery_id LIMIT ?"
        )
        for r in self._paged(sql, "delivery_id", batch):
            r["payload"] = json.loads(r["payload"])
            r["evidence_refs"] = json.loads(r["evidence_refs"])
            yield r

    # ------------------------------------------------------------------ browsing (the TUI pages through these)

    def _scope(self, task_id: str | None, trace_id: str | None, col: str = "task_id") -> tuple[str, list]:
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

    def events_at(self, seqs: list[int]) -> list[dict]:
        """The events with these sequence numbers, in the order given (data left as JSON text)."""
        if not seqs:
            return []
        lo, hi = min(seqs), max(seqs)
        rows = {r["seq"]: r for r in self._rows("SELECT * FROM events WHERE seq BETWEEN ? AND ?", (lo, hi))} \
            if hi - lo < 4 * len(seqs) + 64 else \
            {r["seq"]: r for r in self._rows(f"SELECT * FROM events WHERE seq IN ({','.join('?' * len(seqs))})", seqs)}
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

    def deliveries_at(self, ids: list[int]) -> list[dict]:
        """These deliveries joined with who sent what to whom, in the order given."""
        if not ids:
            return []
        lo, hi = min(ids), max(ids)
        if hi - lo < 4 * len(ids) + 64:
            rows = self._rows(self._DELIVERY_SQL + "WHERE d.delivery_id BETWEEN ? AND ?", (lo, hi))
        else:
            rows = self._rows(self._DELIVERY_SQL + f"WHERE d.delivery_id IN ({','.join('?' * len(ids))})", ids)
        by = {r["delivery_id"]: r for r in rows}
        return [by[i] for i in ids if i in by]

    def delivery(self, delivery_id: int) -> dict | None:
        rows = self._rows(self._DELIVERY_SQL + "WHERE d.delivery_id = ?", (delivery_id,))
        return rows[0] if rows else None

    def message_at(self, msg_seq: int) -> dict | None:
        """One stored envelope, whole (payload and evidence parsed)."""
        rows = self._rows("SELECT * FROM messages WHERE msg_seq = ?", (msg_seq,))
        if not rows:
            return None
        r = rows[0]
        r["payload"] = json.loads(r["payload"])
        r["evidence_refs"] = json.loads(r["evidence_refs"])
        return r

    def deliveries_of(self, message_id: str) -> list[dict]:
        return self._rows("SELECT * FROM deliveries WHERE message_id = ? ORDER BY delivery_id", (message_id,))

    def events_of_delivery(self, delivery_id: int) -> list[dict]:
        rows = self._rows("SELECT * FROM events WHERE delivery_id = ? ORDER BY seq", (delivery_id,))
        for r in rows:
            r["data"] = json.loads(r["data"])
        return rows

    def event(self, seq: int) -> dict | None:
        rows = self._rows("SELECT * FROM events WHERE seq = ?", (seq,))
        for r in rows:
            r["data"] = json.loads(r["data"])
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
            r["payload"] = json.loads(r["payload"])
            r["result"] = json.loads(r["result"])
        return rows[0] if rows else None

    def message_by_id(self, message_id: str) -> dict | None:
        """The first envelope stored under ``message_id`` (evidence may cite a message)."""
        rows = self._rows("SELECT msg_seq FROM messages WHERE message_id = ? ORDER BY msg_seq LIMIT 1", (message_id,))
        return self.message_at(rows[0]["msg_seq"]) if rows else None

    def copy(self) -> "Store":
        """An in-memory copy of this database (to try something without touching the file)."""
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False, factory=_Connection)
        self.conn.backup(conn)
        other = Store(sqlite_utils.Database(conn), None)
        other._pragmas()
        other._load_meta()
        return other

    def save_copy(self, path: str | os.PathLike) -> None:
        """Write a consistent copy of the whole database to a new file ``path`` (one file, no WAL)."""
        p = Path(path)
        if p.exists():
            raise StoreError(f"{p} already exists", code="E_DB_EXISTS")
        try:
            dst = sqlite3.connect(str(p))
            try:
                self.conn.backup(dst)
            finally:
                dst.close()
        except (sqlite3.Error, StoreError) as e:
            raise StoreError(f"cannot write {p}: {e}", code="E_DB_WRITE") from e

    def tasks(self) -> list[dict]:
        return self._rows("SELECT * FROM tasks ORDER BY created_tick, task_id")

    def transitions(self, task_id: str | None = None) -> list[dict]:
        if task_id is None:
            return self._rows("SELECT * FROM transitions ORDER BY seq")
        return self._rows("SELECT * FROM transitions WHERE task_id = ? ORDER BY seq", (task_id,))

    def transition_rules(self) -> list[dict]:
        return self._rows("SELECT * FROM transition_rules ORDER BY machine_version, from_state, to_state")

    def machines(self) -> list[dict]:
        return self._rows("SELECT * FROM machines ORDER BY loaded_tick, version")

    def intents(self) -> list[dict]:
        rows = self._rows("SELECT * FROM intents ORDER BY arrival")
        for r in rows:
            r["payload"] = json.loads(r["payload"])
            r["result"] = json.loads(r["result"])
        return rows

    def intents_of_task(self, task_id: str) -> list[dict]:
        rows = self._rows("SELECT * FROM intents WHERE task_id = ? ORDER BY arrival", (task_id,))
        for r in rows:
            r["payload"] = json.loads(r["payload"])
            r["result"] = json.loads(r["result"])
        return rows

    def artifacts(self) -> list[dict]:
        return self._rows("SELECT ref, scheme, kind, size, task_id, message_id, first_tick FROM artifacts ORDER BY first_tick, ref")

    def effects(self) -> list[dict]:
        return self._rows("SELECT * FROM effects ORDER BY tick, effect_key")

    def approvals(self) -> list[dict]:
        rows = self._rows("SELECT * FROM approvals ORDER BY approval_id")
        for r in rows:
            r["evidence"] = json.loads(r["evidence"])
        return rows

    def budget_ledger(self) -> list[dict]:
        return self._rows("SELECT * FROM budget ORDER BY entry")

    def counts(self) -> dict[str, int]:
        """Row counts of every table, for summaries."""
        out = {}
        for t in ("messages", "deliveries", "events") + STATE_TABLES:
            out[t] = self.conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
        return out

    def run_summary(self) -> dict:
        """A run's figures aggregated in SQL (memory flat in the run's size): each task's state, the
        effect keys, row counts, deliveries by decision, events by type and the faults injected."""
        q = self.conn.execute
        return {
            "tasks": dict(q("SELECT task_id, state FROM tasks ORDER BY created_tick, task_id")),
            "effects": [r[0] for r in q("SELECT effect_key FROM effects ORDER BY tick, effect_key")],
            "messages": q("SELECT COUNT(*) FROM messages").fetchone()[0],
            "deliveries": q("SELECT COUNT(*) FROM deliveries").fetchone()[0],
            "events": q("SELECT COUNT(*) FROM events").fetchone()[0],
            "deliveries_by_decision": dict(q("SELECT decision, COUNT(*) FROM deliveries GROUP BY decision ORDER BY decision")),
            "events_by_type": dict(q("SELECT type, COUNT(*) FROM events GROUP BY type ORDER BY type")),
            "faults_injected": [
                {"fault": json.loads(d)["fault"], "message_id": m, "task_id": t}
                for d, m, t in q("SELECT data, message_id, task_id FROM events WHERE type = 'fault_injected' ORDER BY seq")
            ],
        }

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


# ---------------------------------------------------------------------------- benchmark floor

_READS = ("SELECT", "WITH", "EXPLAIN", "PRAGMA DATA_VERSION", "PRAGMA QUICK_CHECK")
_BUSY_SECONDS = 60.0  # how long a writer waits for another process's transaction before E_DB_BUSY


class _Cursor(sqlite3.Cursor):
    """A cursor whose driver errors, on execute and on every fetch, leave as StoreError."""

    def execute(self, sql, params=()):
        try:
            return super().execute(sql, params)
        except sqlite3.Error as e:
            raise _translate(e, self.connection.path) from e

    def executemany(self, sql, rows):
        try:
            return super().executemany(sql, rows)
        except sqlite3.Error as e:
            raise _translate(e, self.connection.path) from e

    def __next__(self):
        try:
            return super().__next__()
        except sqlite3.Error as e:
            raise _translate(e, self.connection.path) from e

    def fetchone(self):
        try:
            return super().fetchone()
        except sqlite3.Error as e:
            raise _translate(e, self.connection.path) from e

    def fetchmany(self, *a):
        try:
            return super().fetchmany(*a)
        except sqlite3.Error as e:
            raise _translate(e, self.connection.path) from e

    def fetchall(self):
        try:
            return super().fetchall()
        except sqlite3.Error as e:
            raise _translate(e, self.connection.path) from e


class _Connection(sqlite3.Connection):
    """The store's connection: every statement and every row fetched goes through :class:`_Cursor`,
    so every sqlite3 error, on reads as on writes, is translated in one place (:func:`_translate`)."""

    path: str | None = None
    #: called with (sql, params, many) before each statement runs (a benchmark records the writes); see
    #: :func:`write_recorder`. Passed in when the store is created, never a global.
    tracer = None

    def cursor(self, factory=_Cursor):
        return super().cursor(factory)

    def execute(self, sql, params=()):
        if self.tracer is not None:
            self.tracer(sql, params, False)
        return self.cursor().execute(sql, params)

    def executemany(self, sql, rows):
        if self.tracer is not None:
            rows = [list(r) for r in rows]
            self.tracer(sql, rows, True)
        return self.cursor().executemany(sql, rows)

    def backup(self, target, **kw):
        try:
            return super().backup(target, **kw)
        except sqlite3.Error as e:
            raise _translate(e, self.path) from e


#: The files SQLite keeps beside a database while it is open or after it was not closed cleanly.
SIDE_FILES = ("-wal", "-shm", "-journal")


def remove_database(path, *, side_files_only: bool = False) -> None:
    """Remove a database file and its side files (``side_files_only``: leave the file itself, as
    before an atomic rename over it: a stale -wal must never be read into the new file)."""
    for suffix in SIDE_FILES if side_files_only else ("",) + SIDE_FILES:
        Path(f"{path}{suffix}").unlink(missing_ok=True)


#: The reducer by event type: each type whose folding changes state has its ``Store._fold_<type>``
#: (a type declared as changing state without one fails here, at import).
_FOLDS = {t: getattr(Store, f"_fold_{t}") for t, cls in EVENT_REGISTRY.items() if cls.CHANGES_STATE}


def write_recorder(fh):
    """A tracer (``Store.create(..., tracer=...)``) that writes every statement but reads, with its
    parameters, to ``fh`` as one JSON line each: the benchmark floor replays them."""

    def record(sql, params, many: bool):
        if many:
            fh.write(json.dumps(["*", sql, params], ensure_ascii=False) + "\n")
        elif not sql.lstrip().upper().startswith(_READS):
            fh.write(json.dumps([sql, list(params)], ensure_ascii=False) + "\n")

    return record


def replay_writes(path: str, lines) -> tuple[float, int]:
    """The floor: bare sqlite3 executing recorded write statements with their parameters (so
    prepared statements are reused), no reads, no logic. Returns (seconds executing, commits)."""
    import time

    conn = sqlite3.connect(path, isolation_level=None)
    clock = time.perf_counter
    spent, commits = 0.0, 0
    for line in lines:
        item = json.loads(line)
        t0 = clock()
        if item[0] == "*":
            conn.executemany(item[1], item[2])
        else:
            conn.execute(item[0], item[1])
            if item[0].startswith("COMMIT"):
                commits += 1
        spent += clock() - t0
    conn.close()
    return spent, commits


def rows_by_tick(store: Store, lo: int = 0, hi: int | None = None) -> list[tuple[int, dict[str, list[tuple]], list[tuple]]]:
    """Every row the store holds, grouped by the tick (delivery) that wrote it.

    Returns ``[(tick, {table: [row, ...]}, [(state, state_version, task_id), ...])]``: the
    inserts of that tick and the task updates it made. The benchmark floor writes exactly
    these rows with bare sqlite3, so the floor and the project write the same data.
    """
    c = store.conn
    tick_col = {
        "messages": "first_tick", "deliveries": "tick", "events": "tick", "transitions": "tick",
        "budget": "tick", "effects": "tick", "artifacts": "first_tick", "tasks": "created_tick",
    }
    hi = 2**62 if hi is None else hi
    out: dict[int, dict[str, list[tuple]]] = {}
    for table, col in tick_col.items():
        for row in c.execute(f"SELECT *, {col} FROM {table} WHERE {col} >= ? AND {col} < ? ORDER BY rowid", (lo, hi)):
            out.setdefault(row[-1], {}).setdefault(table, []).append(tuple(row[:-1]))
    # intents carry no tick of their own: the intent_recorded event that made each one does.
    for row in c.execute(
        "SELECT i.*, e.tick FROM intents i JOIN events e ON e.type = 'intent_recorded' AND e.task_id = i.task_id "
        "AND e.message_id = i.message_id AND json_extract(e.data, '$.arrival') = i.arrival "
        "WHERE e.tick >= ? AND e.tick < ? ORDER BY i.arrival",
        (lo, hi),
    ):
        out.setdefault(row[-1], {}).setdefault("intents", []).append(tuple(row[:-1]))
    updates: dict[int, list[tuple]] = {}
    for tick, state, version, task_id in c.execute(
        "SELECT tick, new_state, state_version, task_id FROM transitions WHERE tick >= ? AND tick < ? ORDER BY seq", (lo, hi)
    ):
        updates.setdefault(tick, []).append((state, version, task_id))
    return [(t, out[t], updates.get(t, [])) for t in sorted(out)]


def write_rows_bare(path: str, batches, *, machines: list[tuple] = ()) -> None:
    """The floor: write ``rows_by_tick`` batches with bare sqlite3, one transaction per batch, and
    the reads a delivery cannot do without, the plainest way: the intent under the message's key
    (deduplication), the task row, and each task update as a compare-and-swap on ``state_version``.
    Same schema, same foreign keys (``machines``: the machine rows they point at), same durability;
    no parsing, no validation, no decisions."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    for statement in _SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)
    if machines:
        conn.executemany("INSERT INTO machines VALUES (?, ?, ?)", machines)
    order = ("messages", "tasks", "deliveries", "events", "intents", "transitions", "budget", "effects", "artifacts")
    sql: dict[str, str] = {}
    dedup = ("SELECT * FROM intents WHERE task_id = ? AND idempotency_key = "
             "(SELECT idempotency_key FROM messages WHERE msg_seq = ?)")
    for tick, tables, updates in batches:
        conn.execute("BEGIN IMMEDIATE")
        for table in sorted(tables, key=lambda t: order.index(t) if t in order else len(order)):
            rows = tables[table]
            if table == "deliveries":  # what intake reads before it decides
                for d in rows:
                    conn.execute(dedup, (d[4], d[2])).fetchall()
                    conn.execute("SELECT * FROM tasks WHERE task_id = ?", (d[4],)).fetchone()
            q = sql.get(table)
            if q is None:
                q = sql[table] = f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})"
            conn.executemany(q, rows)
        if updates:
            conn.executemany("UPDATE tasks SET state = ?, state_version = ? WHERE task_id = ? AND state_version = ?",
                             [(st, v, tid, v - 1) for st, v, tid in updates])
        conn.execute("COMMIT")
    conn.close()


def machine_rows(store: "Store") -> list[tuple]:
    """Every row of the machines table as it is stored (the floor's foreign keys point at them)."""
    return [tuple(r) for r in store.conn.execute("SELECT * FROM machines")]


def probe_file(path) -> tuple[bool, bool]:
    """What the crash bench asks of a file a killed run left: is it whole (``PRAGMA
    integrity_check`` ok) and does it hold protolab's schema? ``(False, False)`` if SQLite cannot
    read it at all."""
    try:
        con = sqlite3.connect(str(path))
        try:
            ok = con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            has_schema = bool(con.execute("SELECT count(*) FROM sqlite_master WHERE name = 'meta'").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return False, False
    return ok, has_schema


def bare_read_first(path: str, rows: int) -> float:
    """The TUI bench's floor: bare sqlite3 opens the file read-only and reads the first screenful
    of events and of deliveries. Returns seconds."""
    t0 = time.perf_counter()
    conn = sqlite3.connect(f"file:{urllib.parse.quote(path)}?mode=ro&immutable=1", uri=True)
    conn.execute("SELECT COUNT(*) FROM events").fetchone()
    conn.execute("SELECT * FROM events ORDER BY seq LIMIT ?", (rows,)).fetchall()
    conn.execute("SELECT * FROM deliveries ORDER BY delivery_id LIMIT ?", (rows,)).fetchall()
    conn.close()
    return time.perf_counter() - t0


def bare_read_at(path: str, starts: list[int], rows: int) -> list[float]:
    """The TUI bench's floor: one screenful of events read at each of ``starts``; seconds each."""
    conn = sqlite3.connect(f"file:{urllib.parse.quote(path)}?mode=ro&immutable=1", uri=True)
    out = []
    for at in starts:
        t0 = time.perf_counter()
        conn.execute("SELECT * FROM events WHERE seq BETWEEN ? AND ?", (at, at + rows - 1)).fetchall()
        out.append(time.perf_counter() - t0)
    conn.close()
    return out


def _translate(e: sqlite3.Error, path: str | None = None) -> StoreError:
    """The one place a driver error becomes a :class:`StoreError` with a stable code."""
    msg = str(e)
    name = path or "the in-memory database"
    kind = getattr(e, "sqlite_errorname", "") or ""
    if kind in ("SQLITE_FULL", "SQLITE_IOERR_WRITE", "SQLITE_IOERR_FSYNC", "SQLITE_IOERR_TRUNCATE", "SQLITE_IOERR_SHMSIZE"):
        return StoreError(f"cannot write {name}: {msg} (is the disk full, or the file over a size limit?)",
                          code="E_DB_FULL")
    if isinstance(e, sqlite3.IntegrityError):
        return StoreError(f"{name} refused a write: {msg}", code="E_DB_CONSTRAINT")
    if "readonly" in msg or "read-only" in msg:
        return StoreError(f"cannot write {name}: {msg} (the file or its folder is read-only)", code="E_DB_READONLY")
    if "locked" in msg or "busy" in msg:
        return StoreError(f"{name} is busy (another process holds it too long): {msg}", code="E_DB_BUSY")
    if "disk is full" in msg or "too big" in msg:
        return StoreError(f"cannot write {name}: {msg}", code="E_DB_FULL")
    if "malformed" in msg or "not a database" in msg or "corrupt" in msg:
        return StoreError(f"{name} is damaged: {msg}", code="E_DB_CORRUPT")
    if "unable to open" in msg:
        return StoreError(f"cannot open {name}: {msg}", code="E_DB_UNREADABLE")
    if "disk I/O" in msg:
        return StoreError(f"{name} could not be read or written: {msg}", code="E_DB_IO")
    return StoreError(f"database error on {name}: {msg}", code="E_DB_WRITE")


def _check_writable(p: Path) -> None:
    """Before a command that writes opens ``p``: the file, and its folder (where WAL keeps -wal and
    -shm), must be writable; the error names the path that is not."""
    if not os.access(p, os.W_OK):
        raise StoreError(f"cannot write {p}: the file is read-only (commands that only read still work)",
                         code="E_DB_READONLY")
    folder = p.resolve().parent
    wal = Path(str(p) + "-wal")
    if not os.access(folder, os.W_OK | os.X_OK) and not (wal.exists() and os.access(wal, os.W_OK)):
        raise StoreError(f"cannot write in {folder}: the folder is read-only and a write needs {p.name}-wal and "
                         f"{p.name}-shm beside the file (commands that only read still work)", code="E_DB_READONLY")


def _parse_time(text: str) -> datetime:
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        raise StoreError(f"start time {text!r} is not an RFC 3339 UTC time like {DEFAULT_START}", code="E_FIELD_VALUE") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


# ---------------------------------------------------------------------------------- lab progress
#
# A learner's progress through the labs lives in its own small file (protolab-progress.db by
# default), beside the learner's runs and never inside one: checkpoints met, answers given,
# actions a run's database cannot show (a time-travel visit), and time spent.

PROGRESS_APP = "protolab-progress"
PROGRESS_SCHEMA_VERSION = 1

_PROGRESS_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE checkpoints (
    lab INTEGER NOT NULL, checkpoint TEXT NOT NULL, met_at TEXT NOT NULL, saw TEXT NOT NULL,
    PRIMARY KEY (lab, checkpoint)
);
CREATE TABLE answers (
    lab INTEGER NOT NULL, question TEXT NOT NULL, answer TEXT NOT NULL, correct INTEGER NOT NULL,
    tries INTEGER NOT NULL, at TEXT NOT NULL,
    PRIMARY KEY (lab, question)
);
CREATE TABLE actions (
    n INTEGER PRIMARY KEY, lab INTEGER NOT NULL, kind TEXT NOT NULL, data TEXT NOT NULL, at TEXT NOT NULL
);
CREATE TABLE sessions (
    lab INTEGER PRIMARY KEY, db TEXT NOT NULL, seconds REAL NOT NULL, started TEXT NOT NULL
);
"""


def _now_text() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class ProgressStore:
    """The learner's lab progress file (see the comment above)."""

    def __init__(self, conn: sqlite3.Connection, path: str | None):
        self.conn = conn
        self.path = path

    @classmethod
    def open(cls, path: str | os.PathLike | None, *, create: bool = True, readonly: bool = False) -> "ProgressStore":
        """Open (or with ``create`` make) a progress file; ``None`` keeps it in memory."""
        if path is None:
            conn = sqlite3.connect(":memory:")
            conn.executescript(_PROGRESS_SCHEMA)
            conn.executemany("INSERT INTO meta VALUES (?, ?)", [("app", PROGRESS_APP),
                                                               ("schema_version", str(PROGRESS_SCHEMA_VERSION))])
            return cls(conn, None)
        p = Path(path)
        if p.is_dir():
            raise StoreError(f"{p} is a folder, not a progress file", code="E_PROGRESS_FILE")
        if not p.exists():
            if not create or readonly:
                raise StoreError(f"{p} does not exist (no lab progress recorded yet)", code="E_PROGRESS_MISSING")
            if not p.parent.exists():
                raise StoreError(f"folder {p.parent} does not exist", code="E_PROGRESS_FILE")
            try:
                conn = sqlite3.connect(str(p))
                with conn:
                    conn.executescript(_PROGRESS_SCHEMA)
                    conn.executemany("INSERT INTO meta VALUES (?, ?)", [("app", PROGRESS_APP),
                                                                       ("schema_version", str(PROGRESS_SCHEMA_VERSION))])
            except sqlite3.Error as e:
                raise StoreError(f"cannot create the progress file {p}: {e}", code="E_PROGRESS_FILE") from e
            return cls(conn, str(p))
        with open(p, "rb") as fh:
            head = fh.read(16)
        if head != b"SQLite format 3\x00":
            raise StoreError(f"{p} is not a progress file (not an SQLite database)", code="E_PROGRESS_CORRUPT")
        try:
            uri = f"file:{urllib.parse.quote(str(p.resolve()))}?mode=ro" if readonly else str(p)
            conn = sqlite3.connect(uri, uri=readonly)
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            if meta.get("app") != PROGRESS_APP:
                conn.close()
                raise StoreError(f"{p} is an SQLite database but not a protolab progress file", code="E_PROGRESS_CORRUPT")
            if int(meta.get("schema_version", "0")) > PROGRESS_SCHEMA_VERSION:
                conn.close()
                raise StoreError(f"{p} was written by a newer protolab; upgrade protolab", code="E_DB_SCHEMA_NEWER")
            for table in ("checkpoints", "answers", "actions", "sessions"):
                conn.execute(f"SELECT * FROM {table} LIMIT 0")
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{p} cannot be read as a progress file: {e}", code="E_PROGRESS_CORRUPT") from e
        except ValueError as e:
            raise StoreError(f"{p} has an unreadable schema_version", code="E_PROGRESS_CORRUPT") from e
        return cls(conn, str(p))

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.conn.close()

    def _write(self, sql: str, params=()) -> None:
        try:
            with self.conn:
                self.conn.execute(sql, params)
        except sqlite3.Error as e:
            raise StoreError(f"cannot write the progress file {self.path}: {e}", code="E_PROGRESS_FILE") from e

    # -- checkpoints
    def met(self, lab: int) -> dict[str, dict]:
        rows = self.conn.execute("SELECT checkpoint, met_at, saw FROM checkpoints WHERE lab = ?", (lab,)).fetchall()
        return {c: {"met_at": at, "saw": saw} for c, at, saw in rows}

    def mark_met(self, lab: int, checkpoint: str, saw: str) -> None:
        self._write("INSERT OR IGNORE INTO checkpoints VALUES (?, ?, ?, ?)", (lab, checkpoint, _now_text(), saw))

    def reset(self, lab: int) -> None:
        """Forget a lab's progress (a fresh start of its run)."""
        try:
            with self.conn:
                for table in ("checkpoints", "answers", "actions", "sessions"):
                    self.conn.execute(f"DELETE FROM {table} WHERE lab = ?", (lab,))
        except sqlite3.Error as e:
            raise StoreError(f"cannot write the progress file {self.path}: {e}", code="E_PROGRESS_FILE") from e

    # -- answers
    def answers(self, lab: int) -> dict[str, dict]:
        rows = self.conn.execute("SELECT question, answer, correct, tries FROM answers WHERE lab = ?", (lab,)).fetchall()
        return {q: {"answer": a, "correct": bool(c), "tries": t} for q, a, c, t in rows}

    def record_answer(self, lab: int, question: str, answer: str, correct: bool) -> None:
        prev = self.answers(lab).get(question)
        if prev is not None and prev["correct"]:
            return  # a question answered right stays answered
        tries = (prev["tries"] if prev else 0) + 1
        self._write("INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?)",
                    (lab, question, answer, int(correct), tries, _now_text()))

    # -- actions
    def record_action(self, lab: int, kind: str, data: dict) -> None:
        self._write("INSERT INTO actions (lab, kind, data, at) VALUES (?, ?, ?, ?)",
                    (lab, kind, json.dumps(data, sort_keys=True), _now_text()))

    def actions(self, lab: int, kind: str | None = None) -> list[dict]:
        sql = "SELECT kind, data, at FROM actions WHERE lab = ?" + (" AND kind = ?" if kind else "") + " ORDER BY n"
        rows = self.conn.execute(sql, (lab, kind) if kind else (lab,)).fetchall()
        return [{"kind": k, "data": json.loads(d), "at": at} for k, d, at in rows]

    # -- sessions
    def session(self, lab: int) -> dict | None:
        row = self.conn.execute("SELECT db, seconds, started FROM sessions WHERE lab = ?", (lab,)).fetchone()
        return None if row is None else {"db": row[0], "seconds": row[1], "started": row[2]}

    def start_session(self, lab: int, db: str) -> None:
        prev = self.session(lab)
        if prev is None:
            self._write("INSERT INTO sessions VALUES (?, ?, ?, ?)", (lab, db, 0.0, _now_text()))
        elif prev["db"] != db:
            self._write("UPDATE sessions SET db = ? WHERE lab = ?", (db, lab))

    def add_time(self, lab: int, seconds: float) -> None:
        self._write("UPDATE sessions SET seconds = seconds + ? WHERE lab = ?", (max(0.0, seconds), lab))

    def dump(self, lab: int) -> dict:
        """Everything recorded for ``lab`` (a submission carries it)."""
        return {"checkpoints": self.met(lab), "answers": self.answers(lab), "actions": self.actions(lab),
                "session": self.session(lab)}
