"""The Store: opening, creating, verifying and migrating a database, its meta and copies; reads,
writes and the reducer come from their own modules."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import urllib.parse
from datetime import datetime
from pathlib import Path


from ..errors import StoreError
from ..files import not_a_file
from ..machine import RuleBook
from ..privacy import Privacy
from .schema import APP_ID, DEFAULT_START, SCHEMA_VERSION, STATE_TABLES, _SCHEMA, _parse_time
from .driver import _BUSY_SECONDS, SIDE_FILES, Database, _check_writable, _Connection, _translate, remove_database
from .reads import Reads
from .reducer import Reducer
from .writes import Writes


#: An environment variable for tests: ``PROTOLAB_MAX_PAGES=N`` caps every database file a process opens for
#: writing at N pages of 4 KiB (SQLite's ``max_page_count``), so a write past it fails as on a full disk
#: (E_DB_FULL). Unset (the default), nothing is capped.
MAX_PAGES_ENV = "PROTOLAB_MAX_PAGES"


class Store(Reads, Writes, Reducer):
    """A protolab database. Open with :meth:`create`, :meth:`open` or :meth:`memory`."""

    def __init__(self, db: Database, path: str | None):
        self.db = db
        self.conn: _Connection = db.conn  # (opened with the driver's factory: open, create)
        self.path = path
        self._rulebooks: dict[str, RuleBook] = {}
        self._meta: dict[str, str] = {}
        self._tick = 0
        self.commits = 0  # transactions committed through this handle (the benchmark floor matches it)
        # group_commits: commit every this many transactions (None: each one commits)
        self._group: int | None = None
        self._group_units = 0
        self._group_open = False
        self._next_delivery = 1
        self._next_arrival = 1
        self._time_cache: tuple[int, str] = (-1, "")
        self._minute: tuple[int, str] = (-(2**62), "")  # (see time_at)
        self._minutes: dict = {}  # (see time_at: each minute's text, by the tick that began it)
        self._start: datetime | None = None
        self.readonly = False
        # PRAGMA data_version as of this handle's last look: it changes exactly when another
        # connection (another process) commits, and then the counters are read again.
        self._data_version: int | None = None
        # What this handle remembers of the log between statements, true while nobody else writes (it is
        # dropped when another connection commits, and on a rollback): the first row of the message id
        # stored last (record_message -> first_msg_seq), and which conversations are fenced (fenced_now).
        self._first_seq: tuple[str, int] | None = None
        self._fenced: dict[str, bool] = {}
        self._epochs: dict[str, tuple[int, int]] = {}  # trace id -> (its epoch now, the tick it opened)
        #: what a walk of the log learned of the conversation so far (sim.conversation.taken_in_epoch carries
        #: it on from the last delivery it read; forgotten with the rest when another writer commits)
        self.conversation_walk = None
        #: each body's numbers taken so far, (sender, generation) -> a byte per number (1: a message took it),
        #: read once per body and kept as messages are stored (forgotten with the rest)
        self._numbers: dict[tuple[str, int], bytearray] = {}
        self._number_was_taken: tuple[str, bool] | None = None  # (message id, its number taken before it?)
        if isinstance(self.conn, _Connection):
            self.conn.path = path

    @staticmethod
    def _connect(path: str, tracer=None) -> Database:
        # isolation_level=None: we issue BEGIN/COMMIT ourselves, one transaction per delivery.
        # timeout: how long BEGIN IMMEDIATE waits for another process's write transaction.
        try:
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, factory=_Connection,
                                   timeout=_BUSY_SECONDS)
        except sqlite3.Error as e:
            raise _translate(e, path) from e
        conn.path = path
        conn.tracer = tracer
        # (no sqlite-utils: no plugin installed on the machine hooks the store's connection; see driver.Database)
        return Database(conn)

    @staticmethod
    def _connect_readonly(path: Path) -> Database:
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
        return Database(conn)

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
                    from ..machine import default_rulebook

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
        if (special := not_a_file(p, "--db")) is not None:  # a FIFO or a device: opening it would wait
            raise special
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
                if any(v > version for v in store._READERS_NEED):
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
        3: (
            # A task's effects found through an index (every delivery asks whether its task has any):
            # without it each asking scans every effect of the run.
            "CREATE INDEX IF NOT EXISTS effects_by_task ON effects (task_id)",
        ),
        4: (
            # The envelope's optional fields: the conversation epoch its sender spoke in, and when it expires
            # (both NULL for an envelope without them, as every one stored before).
            "ALTER TABLE messages ADD COLUMN epoch INTEGER",
            "ALTER TABLE messages ADD COLUMN expires_at TEXT",
            # The events that open and close a conversation's epochs, found without a scan of the log.
            "CREATE INDEX IF NOT EXISTS events_of_epochs ON events (seq) WHERE type IN ('fence_recorded', "
            "'review_decided', 'reconciliation_resolved')",
        ),
    }
    #: The versions whose step changes what a reader sees (columns, not only indexes): a file older than
    #: one of these opened read-only is migrated in a copy in memory; one older only than the others is
    #: read as it is (it answers the same, a little slower). Version 4's columns (an envelope's epoch and
    #: expiry) are optional: every reader takes a row without them as an envelope that carries neither.
    _READERS_NEED = frozenset({2})

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
        if self.path is not None and (cap := os.environ.get(MAX_PAGES_ENV, "").strip()):
            # A full disk on demand, without root (tests/test_runfile.py): every write that would grow a
            # file this process writes past N pages fails with SQLITE_FULL, as on a full disk. Per
            # connection, never stored in the file.
            self.conn.execute(f"PRAGMA max_page_count = {int(cap)}")

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
        self._forget()
        self._data_version = c.execute("PRAGMA data_version").fetchone()[0]
        self._tick = c.execute("SELECT COALESCE((SELECT tick FROM events ORDER BY seq DESC LIMIT 1), 0)").fetchone()[0]
        self._next_delivery = c.execute("SELECT COALESCE(MAX(delivery_id), 0) + 1 FROM deliveries").fetchone()[0]
        # The newest arrival is the newest intent_recorded event's, not the newest intents row's: a
        # policy that records a (key, digest) again updates its row in place and keeps the row's first
        # arrival, so the rows alone would hand that second arrival's number out again after a reopen.
        # (Read from the end of the log: the newest such event is a few rows back, not a scan.)
        self._next_arrival = c.execute(
            "SELECT COALESCE((SELECT json_extract(data, '$.arrival') FROM events WHERE type = 'intent_recorded' "
            "ORDER BY seq DESC LIMIT 1), 0) + 1").fetchone()[0]

    def _refresh(self) -> None:
        """Inside BEGIN IMMEDIATE: if another connection committed since this handle last looked,
        read the counters (tick, next delivery id, next arrival) and meta again, so the clock and
        the ids this transaction assigns follow everything committed before it."""
        if self.conn.one("PRAGMA data_version")[0] != self._data_version:
            self._load_meta()

    def poll(self) -> bool:
        """Whether another connection (another process) committed since this handle last looked;
        if so, its counters and meta are read again. A view watching a file calls it on a timer."""
        now = self.conn.execute("PRAGMA data_version").fetchone()[0]  # the driver translates errors
        if now == self._data_version:
            return False
        self._load_meta()
        return True

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.conn.close()

    def seal_file(self, step=None) -> None:
        """Make this store's file whole on its own, checked, then close it; raise (StoreError) if it is not.

        What a run's partial file must pass before it may replace the run it replaces
        (:func:`sim.runfile.put_in_place`): every committed frame of the WAL copied into the file by a
        TRUNCATE checkpoint whose result is checked (not busy, every frame checkpointed, the -wal
        empty), SQLite's ``integrity_check`` ok (about 1% of a run's time: docs/performance.md), the
        connection closed without an error, and no side file left (-wal, -shm, -journal): the file
        alone is the run. ``step(name)`` is called after ``"checkpointed"`` and ``"checked"`` (the
        runfile's test hook stops or fails there). Nothing here changes the file's bytes beyond the
        checkpoint a clean close makes anyway, so a run stays byte for byte deterministic."""
        if self.path is None:
            raise ValueError("seal_file needs a store with a file")
        step = step or (lambda name: None)
        conn, path = self.conn, self.path
        try:
            if conn.in_transaction:
                raise StoreError(f"{path}: a transaction is still open; the run was not finished",
                                 code="E_DB_WRITE")
            # nobody else reads a partial file: a checkpoint that cannot finish at once will not later
            conn.execute("PRAGMA busy_timeout = 0")
            busy, log, done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy:
                raise StoreError(f"cannot finish {path}: another connection holds its WAL, so its checkpoint "
                                 "could not complete", code="E_DB_BUSY")
            wal = Path(path + "-wal")
            if log != done or (wal.exists() and wal.stat().st_size != 0):
                raise StoreError(f"cannot finish {path}: its checkpoint copied {done} of {log} WAL frames "
                                 "(is the disk full?)", code="E_DB_FULL")
            step("checkpointed")
            rows = conn.execute("PRAGMA integrity_check(1)").fetchall()
            if rows != [("ok",)]:
                found = " ".join(str(rows[0][0]).split()) if rows else "no answer"
                raise StoreError(f"{path} is damaged (SQLite's integrity check: {found})", code="E_DB_CORRUPT")
            step("checked")
        except BaseException:
            self.close()
            raise
        try:
            conn.close()
        except sqlite3.Error as e:
            raise _translate(e, path) from e
        left = [s for s in SIDE_FILES if Path(path + s).exists()]
        if left:
            raise StoreError(f"cannot finish {path}: {', '.join(path + s for s in left)} left beside it on close "
                             "(is the disk full?)", code="E_DB_IO")

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

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

    def bounds(self) -> dict | None:
        """The conversation's declared bounds (its ``conversation`` meta: deadline_ticks, message_ceiling,
        expires_ticks), or None for a run that declared none (hand-delivered messages, an older run)."""
        text = self._meta.get("conversation")
        cached = getattr(self, "_bounds", None)
        if cached is None or cached[0] != text:
            cached = self._bounds = (text, json.loads(text) if text else None)
        return cached[1]

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

    def copy(self, path: str | os.PathLike | None = None) -> "Store":
        """A copy of this database to try something without touching the file: in memory, or in a
        new file ``path`` (a big run: memory stays flat)."""
        target = ":memory:" if path is None else str(path)
        if path is not None and Path(path).exists():
            raise StoreError(f"{path} already exists", code="E_DB_EXISTS")
        try:
            conn = sqlite3.connect(target, isolation_level=None, check_same_thread=False, factory=_Connection)
            conn.path = None if path is None else target
            self.conn.backup(conn)
        except sqlite3.Error as e:
            raise _translate(e, target) from e
        other = Store(Database(conn), None if path is None else target)
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
                self.conn.backup(dst)  # the driver translates this side's errors (a closed store: E_DB_CLOSED)
            finally:
                dst.close()
        except StoreError:
            remove_database(p)
            raise
        except sqlite3.Error as e:  # the new file's side: a connection the driver does not own
            remove_database(p)
            raise StoreError(f"cannot write {p}: {e}", code="E_DB_WRITE") from e
