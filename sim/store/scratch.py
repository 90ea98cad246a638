"""Scratch tables that belong to no run: exact sets of strings on disk for a reader that must
remember millions of them in flat memory (``trace validate`` of a million-message trace remembers
every id it has seen and accepted). Each set is a table in SQLite's private temporary database (an
empty file name: a file SQLite removes when the connection closes)."""

from __future__ import annotations

import sqlite3

from ..errors import StoreError
from .driver import _Connection

__all__ = ["ScratchIds", "scratch_ids"]


class ScratchIds:
    """A set of strings in one scratch table: ``add_many`` and ``has``; ``close`` drops it all."""

    __slots__ = ("_conn", "_has", "_ins")

    def __init__(self, conn: sqlite3.Connection, name: str):
        if not name.isidentifier():
            raise ValueError(f"not a table name: {name!r}")
        self._conn = conn
        try:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {name} (k TEXT PRIMARY KEY) WITHOUT ROWID")
        except sqlite3.Error as e:
            raise StoreError(f"cannot make a scratch table: {e}") from e
        self._has = f"SELECT 1 FROM {name} WHERE k = ?"
        self._ins = f"INSERT OR IGNORE INTO {name} (k) VALUES (?)"

    def add_many(self, keys) -> None:
        try:
            self._conn.executemany(self._ins, ((k,) for k in keys))
        except sqlite3.Error as e:
            raise StoreError(f"cannot write a scratch table: {e}") from e

    def has(self, key: str) -> bool:
        try:
            return self._conn.execute(self._has, (key,)).fetchone() is not None
        except sqlite3.Error as e:
            raise StoreError(f"cannot read a scratch table: {e}") from e


class _Scratch:
    """The factory ``scratch_ids()`` returns: ``tables(name)`` gives a :class:`ScratchIds`; a context
    manager closing the connection (and so removing the file)."""

    def __init__(self):
        try:
            self.conn = sqlite3.connect("", isolation_level=None, factory=_Connection)
            self.conn.path = "(scratch)"
            self.conn.execute("PRAGMA journal_mode=OFF")
            self.conn.execute("PRAGMA synchronous=OFF")
            self.conn.execute("BEGIN")  # one transaction: nothing here must survive a crash
        except sqlite3.Error as e:
            raise StoreError(f"cannot open a scratch database: {e}") from e

    def __call__(self, name: str) -> ScratchIds:
        return ScratchIds(self.conn, name)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def scratch_ids() -> _Scratch:
    """A private scratch database on disk: ``with scratch_ids() as tables: ids = tables("seen")``."""
    return _Scratch()
