"""The driver: the store's sqlite3 connection and cursor, through which every statement and every
fetched row passes, so every sqlite3 error, on reads and on writes, is translated in one place
(:func:`_translate`) into a :class:`~sim.errors.StoreError` with a stable code; and the files a
database keeps beside it."""

from __future__ import annotations

import os
import sqlite3
from typing import Any
from pathlib import Path

from ..errors import StoreError


_READS = ("SELECT", "WITH", "EXPLAIN", "PRAGMA DATA_VERSION", "PRAGMA QUICK_CHECK")


_BUSY_SECONDS = 60.0
_BATCH = 256  # rows a cursor's iteration fetches at once  # how long a writer waits for another process's transaction before E_DB_BUSY


class _Cursor(sqlite3.Cursor):
    """A cursor whose driver errors, on execute and on every fetch, leave as StoreError."""

    connection: _Connection  # (the store's: _Connection.cursor makes every cursor)

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

    def __iter__(self):
        """Rows a batch at a time (``fetchmany``), each batch's error translated: a ``for`` over a cursor
        costs one Python call per :data:`_BATCH` rows, not one per row (a big ``check`` fetched 1.35
        million rows through ``__next__``, a fifth of its time in this wrapper)."""
        return self._batched()

    def _batched(self):
        fetch = sqlite3.Cursor.fetchmany
        while True:
            try:
                rows = fetch(self, _BATCH)
            except sqlite3.Error as e:
                raise _translate(e, self.connection.path) from e
            if not rows:
                return
            yield from rows

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
        try:  # a closed connection refuses here, before any statement: translated like the rest
            return super().cursor(factory)
        except sqlite3.Error as e:
            raise _translate(e, self.path) from e

    def commit(self):
        try:
            return super().commit()
        except sqlite3.Error as e:
            raise _translate(e, self.path) from e

    def rollback(self):
        try:
            return super().rollback()
        except sqlite3.Error as e:
            raise _translate(e, self.path) from e

    def execute(self, sql, params=()):
        if self.tracer is not None:
            self.tracer(sql, params, False)
        return self.cursor().execute(sql, params)

    def executemany(self, sql, rows):
        if self.tracer is not None:
            rows = [list(r) for r in rows]
            self.tracer(sql, rows, True)
        return self.cursor().executemany(sql, rows)

    @property
    def in_transaction(self) -> bool:
        try:  # (a closed connection refuses: translated like the rest)
            return super().in_transaction
        except sqlite3.Error as e:
            raise _translate(e, self.path) from e

    # -- the store's own hot statements (a delivery's reads and writes): one reused plain cursor, no
    # cursor object per statement. Errors are translated here as everywhere; the tracer sees them too.
    _plain: sqlite3.Cursor | None = None

    def _plain_cursor(self) -> sqlite3.Cursor:
        cur = self._plain = sqlite3.Cursor(self)
        return cur

    def run(self, sql, params=()) -> sqlite3.Cursor:
        """Execute one statement on the store's reused cursor: read ``rowcount``/``lastrowid`` at once
        (the next statement reuses the cursor); for rows, :meth:`one` and :meth:`all`. (``_on_plain``
        written out: a delivery runs about ten of these.)"""
        if self.tracer is not None:
            self.tracer(sql, params, False)
        try:
            return (self._plain or self._plain_cursor()).execute(sql, params)
        except sqlite3.Error as e:
            raise _translate(e, self.path) from e

    def run_many(self, sql, rows) -> None:
        """``executemany`` on the store's reused cursor (``rows`` a list)."""
        if self.tracer is not None:
            self.tracer(sql, [list(r) for r in rows], True)
        try:
            (self._plain or self._plain_cursor()).executemany(sql, rows)
        except sqlite3.Error as e:
            raise _translate(e, self.path) from e

    def _on_plain(self, sql, params, fetch=None):
        """``sql`` executed on the reused cursor, traced, errors translated; ``fetch`` reads its rows
        before the next statement reuses the cursor (None: the cursor itself)."""
        if self.tracer is not None:
            self.tracer(sql, params, False)
        try:
            cur = (self._plain or self._plain_cursor()).execute(sql, params)
            return cur if fetch is None else fetch(cur)
        except sqlite3.Error as e:
            raise _translate(e, self.path) from e

    def one(self, sql, params=()):
        """The row of a statement that gives at most one (None: none), read at once: reading it steps
        the statement to its end, so nothing is left open on the reused cursor."""
        return self._on_plain(sql, params, sqlite3.Cursor.fetchone)

    def all(self, sql, params=()) -> list:
        """Every row of a statement, read at once."""
        return self._on_plain(sql, params, sqlite3.Cursor.fetchall)

    def backup(self, target, **kw):
        try:
            return super().backup(target, **kw)
        except sqlite3.Error as e:
            raise _translate(e, self.path) from e


#: SQLite's primary result codes (``sqlite_errorname`` without its extended part) -> protolab's code.
_CODE_BY_SQLITE = {
    "SQLITE_FULL": "E_DB_FULL", "SQLITE_TOOBIG": "E_DB_FULL",
    "SQLITE_CONSTRAINT": "E_DB_CONSTRAINT",
    "SQLITE_READONLY": "E_DB_READONLY",
    "SQLITE_BUSY": "E_DB_BUSY", "SQLITE_LOCKED": "E_DB_BUSY",
    "SQLITE_CORRUPT": "E_DB_CORRUPT", "SQLITE_NOTADB": "E_DB_CORRUPT",
    "SQLITE_CANTOPEN": "E_DB_UNREADABLE",
    "SQLITE_IOERR": "E_DB_IO",
}
#: extended I/O errors that mean a write could not be made room for (a full disk, a size limit)
_FULL_IO = ("SQLITE_IOERR_WRITE", "SQLITE_IOERR_FSYNC", "SQLITE_IOERR_TRUNCATE", "SQLITE_IOERR_SHMSIZE")


def _code_of(e: sqlite3.Error) -> str:
    """protolab's code for a driver error: by SQLite's result code where the driver gives one (every
    error SQLite itself raises), by the exception's class and words only where it does not (errors
    the Python module raises itself, such as a closed connection)."""
    kind = getattr(e, "sqlite_errorname", "") or ""
    if kind in _FULL_IO:
        return "E_DB_FULL"
    primary = "_".join(kind.split("_")[:2])
    if primary in _CODE_BY_SQLITE:
        return _CODE_BY_SQLITE[primary]
    if isinstance(e, sqlite3.IntegrityError):
        return "E_DB_CONSTRAINT"
    msg = str(e)
    if isinstance(e, sqlite3.ProgrammingError) and "closed" in msg:
        return "E_DB_CLOSED"
    for words, code in (
        (("readonly", "read-only"), "E_DB_READONLY"), (("locked", "busy"), "E_DB_BUSY"),
        (("disk is full", "too big"), "E_DB_FULL"), (("malformed", "not a database", "corrupt"), "E_DB_CORRUPT"),
        (("unable to open",), "E_DB_UNREADABLE"), (("disk I/O",), "E_DB_IO"),
    ):
        if any(w in msg for w in words):
            return code
    return "E_DB_WRITE"


_SAYS = {
    "E_DB_FULL": "cannot write {name}: {msg} (is the disk full, or the file over a size limit?)",
    "E_DB_CONSTRAINT": "{name} refused a write: {msg}",
    "E_DB_READONLY": "cannot write {name}: {msg} (the file or its folder is read-only)",
    "E_DB_BUSY": "{name} is busy (another process holds it too long): {msg}",
    "E_DB_CORRUPT": "{name} is damaged: {msg}",
    "E_DB_UNREADABLE": "cannot open {name}: {msg}",
    "E_DB_IO": "{name} could not be read or written: {msg}",
    "E_DB_WRITE": "database error on {name}: {msg}",
    "E_DB_CLOSED": "{name} was already closed: {msg} (the kit's bug: a store used after close)",
}


def _translate(e: sqlite3.Error, path: str | None = None) -> StoreError:
    """The one place a driver error becomes a :class:`StoreError` with a stable code."""
    code = _code_of(e)
    return StoreError(_SAYS[code].format(name=path or "the in-memory database", msg=str(e)), code=code)


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


#: The files SQLite keeps beside a database while it is open or after it was not closed cleanly.
SIDE_FILES = ("-wal", "-shm", "-journal")


def remove_database(path, *, side_files_only: bool = False) -> None:
    """Remove a database file and its side files (``side_files_only``: leave the file itself, as
    before an atomic rename over it: a stale -wal must never be read into the new file)."""
    for suffix in SIDE_FILES if side_files_only else ("",) + SIDE_FILES:
        Path(f"{path}{suffix}").unlink(missing_ok=True)


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


class Database:
    """The store's handle on its connection: what it used of sqlite-utils' ``Database`` (``conn``,
    ``table_names``, ``query``), without importing sqlite-utils (and click with it): that import was a
    third of the start of a command that only reads a run (``state``, ``events``...). Opening one turns
    on recursive triggers, as sqlite-utils' does."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn: Any = conn  # the driver's factory's connection (_Connection) when the store opened it
        conn.execute("PRAGMA recursive_triggers=on;")

    def table_names(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()]

    def query(self, sql: str, params=()):
        """The rows of a SELECT, each a dict of its columns."""
        cursor = self.conn.execute(sql, params if params is not None else ())
        keys = [d[0] for d in cursor.description]
        return (dict(zip(keys, row)) for row in cursor)

