"""The driver: the store's sqlite3 connection and cursor, through which every statement and every
fetched row passes, so every sqlite3 error, on reads and on writes, is translated in one place
(:func:`_translate`) into a :class:`~sim.errors.StoreError` with a stable code; and the files a
database keeps beside it."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ..errors import StoreError


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
