"""Lab progress: a small SQLite file of checkpoints met, apart from any run."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import urllib.parse
from datetime import datetime, timezone
from pathlib import Path

from ..errors import StoreError
from ..files import not_a_file


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
        if (special := not_a_file(p, "progress file")) is not None:  # a FIFO or a device: never waited on
            raise special
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
