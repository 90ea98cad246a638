"""The course gradebook: one SQLite file for the term (``gradebook.db`` beside the course file), built
with sqlite-utils. All of its SQL is here; what a row holds is worked out in :mod:`sim.course.term`.

Tables:

* ``meta`` (key, value): ``app = protolab-gradebook``, ``schema_version``, the course's name;
* ``students``: the roster (id, name, email, lms_id, section), replaced from the roster at each grade;
* ``assignments``: the course file's (id, kind, number, title, due, max_points, position);
* ``attempts``: one row per student x assignment x attempt: the attempt number (1, 2, ... per
  student and assignment: a regrade adds one, the latest counts), when graded, when submitted and
  how that is known, raw score, max, late days, penalty percent, score, the per-rule breakdown
  (JSON), the sandbox used, the reason of a zero, a note, and ``feedback``: what the student's
  feedback page needs (JSON, see :func:`sim.course.feedback.handback`; empty for a lab, and for attempts
  recorded before schema 2). A submission matched to nobody on the roster has ``student`` empty and
  its name in ``submitted_as``: it is kept, never dropped;
* ``overrides``: a manual score (student, assignment, score, comment, by, at), kept beside the
  attempts, which it never changes; the newest override of a student and assignment is the grade.
  An override of an unmatched submission has ``student`` empty and the submission's name in
  ``submitted_as`` (schema 2);
* the view ``grades``: per student and assignment, the grade that counts (the newest override, else
  the latest attempt) and where it comes from.

A new gradebook is built in a partial file beside its place and renamed over it once complete;
every change to one is one SQLite transaction. Opening checks it first: not a protolab gradebook
or damaged (E_GRADEBOOK), written by a newer protolab (E_GRADEBOOK_NEWER), or not writable
(E_GRADEBOOK_READONLY): one line, nothing written.

Schema 1 -> 2 (the ``feedback`` column of attempts, the ``submitted_as`` column of overrides) is one
transaction, made when a schema 1 gradebook is opened for writing; opened read-only, a schema 1
gradebook is read as it is (no stored feedback, no override of an unmatched submission).
"""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import contextmanager, suppress
from pathlib import Path

from .lib import sqlite_utils

from ..errors import InputError, StoreError
from .driver import _Connection

__all__ = ["GRADEBOOK_APP", "GRADEBOOK_SCHEMA", "Gradebook", "open_gradebook", "is_gradebook"]

GRADEBOOK_APP = "protolab-gradebook"
GRADEBOOK_SCHEMA = 2
_SQLITE_MAGIC = b"SQLite format 3\x00"

_ATTEMPT_COLUMNS = {
    "id": int, "student": str, "submitted_as": str, "assignment": str, "attempt": int, "graded_at": str,
    "submitted_at": str, "submitted_from": str, "raw_score": float, "max_score": float, "late_days": int,
    "penalty_percent": float, "score": float, "breakdown": str, "sandbox": str, "zero_reason": str, "note": str,
    "feedback": str,
}

_GRADES_VIEW = """
CREATE VIEW grades AS
WITH latest AS (
  SELECT a.* FROM attempts a
  WHERE a.student != '' AND a.attempt = (SELECT MAX(b.attempt) FROM attempts b
                                          WHERE b.student = a.student AND b.assignment = a.assignment)
), newest_override AS (
  SELECT o.* FROM overrides o
  WHERE o.id = (SELECT MAX(p.id) FROM overrides p WHERE p.student = o.student AND p.assignment = o.assignment)
)
SELECT s.id AS student, s.name AS name, g.id AS assignment,
       COALESCE(o.score, l.score) AS score, g.max_points AS max_score,
       CASE WHEN o.id IS NOT NULL THEN 'override' WHEN l.id IS NOT NULL THEN 'attempt ' || l.attempt ELSE '' END
         AS source,
       l.attempt AS attempts, l.late_days AS late_days, l.penalty_percent AS penalty_percent,
       COALESCE(o.comment, l.zero_reason) AS why
FROM students s CROSS JOIN assignments g
LEFT JOIN latest l ON l.student = s.id AND l.assignment = g.id
LEFT JOIN newest_override o ON o.student = s.id AND o.assignment = g.id
ORDER BY s.id, g.position
"""


def _uri(path: Path) -> str:
    """SQLite's URI of ``path`` (a name holding ? or # stays a name)."""
    import urllib.parse

    return "file:" + urllib.parse.quote(str(Path(path).resolve()))


def _refuse(path, why: str, code: str = "E_GRADEBOOK") -> InputError:
    return InputError(f"{path}: {why}; nothing was written", code=code)


def is_gradebook(path: str | os.PathLike) -> bool:
    """True when ``path`` is an SQLite file whose meta table says it is a protolab gradebook."""
    try:
        with open(path, "rb") as fh:
            if fh.read(16) != _SQLITE_MAGIC:
                return False
        # immutable: a run in WAL mode gets no -wal or -shm beside it from being asked
        conn = sqlite3.connect(f"{_uri(Path(path))}?mode=ro&immutable=1", uri=True, factory=_Connection)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'app'").fetchone()
        finally:
            conn.close()
        return bool(row) and row[0] == GRADEBOOK_APP
    except (OSError, sqlite3.Error, StoreError):
        return False


def _create(db: sqlite_utils.Database, course_name: str) -> None:
    db["meta"].create({"key": str, "value": str}, pk="key")
    db["meta"].insert_all([{"key": "app", "value": GRADEBOOK_APP},
                           {"key": "schema_version", "value": str(GRADEBOOK_SCHEMA)},
                           {"key": "course", "value": course_name}])
    db["students"].create({"id": str, "name": str, "email": str, "lms_id": str, "section": str}, pk="id")
    db["assignments"].create({"id": str, "kind": str, "number": int, "title": str, "due": str,
                              "max_points": float, "position": int}, pk="id")
    db["attempts"].create(_ATTEMPT_COLUMNS, pk="id", not_null={"student", "submitted_as", "assignment", "attempt"})
    db["attempts"].create_index(["student", "assignment", "attempt"])
    db["attempts"].create_index(["assignment"])
    db["overrides"].create({"id": int, "student": str, "assignment": str, "score": float, "comment": str,
                            "by": str, "at": str, "submitted_as": str}, pk="id",
                           not_null={"student", "assignment", "score"}, defaults={"submitted_as": ""})
    db.execute(_GRADES_VIEW)
    db.execute("PRAGMA user_version = %d" % GRADEBOOK_SCHEMA)


def _migrate(db: sqlite_utils.Database, version: int) -> None:
    """Inside a transaction: a gradebook of schema ``version`` brought to :data:`GRADEBOOK_SCHEMA`."""
    if version < 2:
        db.execute("ALTER TABLE attempts ADD COLUMN feedback TEXT")
        db.execute("ALTER TABLE overrides ADD COLUMN submitted_as TEXT NOT NULL DEFAULT ''")
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(GRADEBOOK_SCHEMA)])
    db.execute("PRAGMA user_version = %d" % GRADEBOOK_SCHEMA)


class Gradebook:
    """An open gradebook (:func:`open_gradebook`). Writes are transactions; reads are plain rows."""

    def __init__(self, db: sqlite_utils.Database, path: Path, version: int = GRADEBOOK_SCHEMA):
        self.db = db
        self.path = path
        self.version = version  # a schema 1 gradebook opened read-only stays schema 1

    def close(self) -> None:
        self.db.conn.close()

    @contextmanager
    def transaction(self):
        conn = self.db.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield
            conn.execute("COMMIT")
        except (sqlite3.Error, StoreError) as e:
            with suppress(sqlite3.Error, StoreError):
                conn.execute("ROLLBACK")
            raise _refuse(self.path, f"cannot be written ({e})") from None
        except BaseException:
            with suppress(sqlite3.Error, StoreError):
                conn.execute("ROLLBACK")
            raise

    # --- writes ---------------------------------------------------------------------------------

    def _sync_course(self, students, assignments) -> None:
        """Inside a transaction: the roster and the course file's assignments, as they are now."""
        self.db["students"].insert_all(
            [{"id": s.id, "name": s.name, "email": s.email, "lms_id": s.lms_id, "section": s.section}
             for s in students], replace=True)
        keep = {a["id"] for a in assignments}
        for a in assignments:
            old = self.db.execute("SELECT max_points FROM assignments WHERE id = ?", [a["id"]]).fetchone()
            row = {**a, "max_points": a.get("max_points") if a.get("max_points") is not None
                   else (old[0] if old else None)}
            self.db["assignments"].insert(row, replace=True)
        for (aid,) in self.db.execute("SELECT id FROM assignments").fetchall():
            if aid not in keep and not self.db.execute("SELECT 1 FROM attempts WHERE assignment = ? LIMIT 1",
                                                       [aid]).fetchone():
                self.db.execute("DELETE FROM assignments WHERE id = ?", [aid])

    def record(self, students, assignments, assignment: str, rows: list[dict], graded_at: str) -> list[dict]:
        """One transaction: the roster and assignments brought up to date, then an attempt per row and
        per student it matched (an unmatched row once, with ``student`` empty). Returns the attempts
        written (``student``, ``submitted_as``, ``attempt``)."""
        written = []
        with self.transaction():
            self._sync_course(students, assignments)
            if rows:
                self.db.execute("UPDATE assignments SET max_points = ? WHERE id = ?",
                                [max(r["max_score"] for r in rows), assignment])
            for r in rows:
                for student in (r["students"] or [""]):
                    key = student or r["submitted_as"]
                    col = "student" if student else "submitted_as"
                    extra = "" if student else " AND student = ''"
                    n = self.db.execute(f"SELECT COALESCE(MAX(attempt), 0) FROM attempts WHERE {col} = ? "
                                        f"AND assignment = ?{extra}", [key, assignment]).fetchone()[0] + 1
                    row = {"student": student, "submitted_as": r["submitted_as"], "assignment": assignment,
                           "attempt": n, "graded_at": graded_at,
                           **{k: r[k] for k in ("submitted_at", "submitted_from", "raw_score", "max_score",
                                                "late_days", "penalty_percent", "score", "sandbox", "zero_reason",
                                                "note")},
                           "breakdown": json.dumps(r["breakdown"], ensure_ascii=False),
                           "feedback": json.dumps(r["feedback"], ensure_ascii=False) if r.get("feedback") else ""}
                    self.db["attempts"].insert(row)
                    written.append({"student": student, "submitted_as": r["submitted_as"], "attempt": n})
        return written

    def whose(self, student: str, assignment: str, *, students=None, assignments=None) -> bool:
        """Whom an override of ``student`` on ``assignment`` is for, read only: True for a roster id (the
        roster given, else the gradebook's), False for the name an unmatched submission of
        ``assignment`` was recorded under. Anything else, or an unknown assignment: E_USAGE, naming what
        is known (the nearest name)."""
        import difflib

        roster = ({s.id for s in students} if students is not None
                  else {r[0] for r in self.db.execute("SELECT id FROM students").fetchall()})
        known = ([a["id"] for a in assignments] if assignments is not None
                 else [r[0] for r in self.db.execute("SELECT id FROM assignments ORDER BY position").fetchall()])
        if assignment not in known:
            raise InputError(f"{assignment!r} is not an assignment of the course ({', '.join(known)})",
                             code="E_USAGE")
        if student in roster:
            return True
        unmatched = sorted({r[0] for r in self.db.execute(
            "SELECT DISTINCT submitted_as FROM attempts WHERE student = '' AND assignment = ?",
            [assignment]).fetchall()})
        if student not in unmatched:
            near = difflib.get_close_matches(student, sorted(roster) + unmatched, n=1)
            raise InputError(f"{student!r} is not on the roster nor an unmatched submission of {assignment}"
                             + (f" (did you mean {near[0]!r}?)" if near else "")
                             + "; protolab gradebook show lists both", code="E_USAGE")
        return False

    def override(self, student: str, assignment: str, score: float, comment: str, by: str, at: str, *,
                 students=None, assignments=None) -> dict:
        """A manual score, kept beside the attempts (the roster and assignments brought up to date first
        when given, in the same transaction). ``student`` is a roster id, else the name an unmatched
        submission of ``assignment`` was recorded under (:meth:`whose`; then the override is the
        submission's: ``student`` empty, the name in ``submitted_as``). Anything else: E_USAGE, nothing
        written. Returns ``{"id", "on_roster"}``."""
        on_roster = self.whose(student, assignment, students=students, assignments=assignments)
        if not on_roster and self.version < 2:
            raise _refuse(self.path, "is a schema 1 gradebook opened read-only; an unmatched submission's "
                                     "override needs it writable")
        with self.transaction():
            if students is not None:
                self._sync_course(students, assignments or [])
            self.db["overrides"].insert({"student": student if on_roster else "", "assignment": assignment,
                                         "score": score, "comment": comment, "by": by, "at": at,
                                         "submitted_as": "" if on_roster else student})
            oid = self.db.execute("SELECT MAX(id) FROM overrides").fetchone()[0]
        return {"id": oid, "on_roster": on_roster}

    # --- reads ----------------------------------------------------------------------------------

    def _rows(self, sql: str, params=()) -> list[dict]:
        cur = self.db.execute(sql, list(params))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]

    def meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
        return row[0] if row else None

    def students(self) -> list[dict]:
        return self._rows("SELECT * FROM students ORDER BY id")

    def assignments(self) -> list[dict]:
        return self._rows("SELECT * FROM assignments ORDER BY position, id")

    def grades(self, student: str | None = None) -> list[dict]:
        """The grade that counts per student and assignment (the view ``grades``)."""
        if student is None:
            return self._rows("SELECT * FROM grades")
        return self._rows("SELECT * FROM grades WHERE student = ?", [student])

    def attempts(self, student: str | None = None, assignment: str | None = None) -> list[dict]:
        """Every attempt (of ``student``, of ``assignment``), oldest first; ``breakdown`` decoded."""
        where, params = [], []
        if student is not None:
            where.append("student = ?")
            params.append(student)
        if assignment is not None:
            where.append("assignment = ?")
            params.append(assignment)
        rows = self._rows("SELECT * FROM attempts" + (" WHERE " + " AND ".join(where) if where else "")
                          + " ORDER BY student, assignment, attempt, id", params)
        for r in rows:
            r["breakdown"] = json.loads(r["breakdown"] or "{}")
        return rows

    def latest_attempt(self, student: str, assignment: str) -> dict | None:
        """The attempt that counts (the newest) of ``student`` on ``assignment``, breakdown decoded."""
        rows = self._rows("SELECT * FROM attempts WHERE student = ? AND assignment = ? ORDER BY attempt DESC LIMIT 1",
                          [student, assignment])
        if not rows:
            return None
        rows[0]["breakdown"] = json.loads(rows[0]["breakdown"] or "{}")
        return rows[0]

    def overrides(self, student: str | None = None) -> list[dict]:
        if student is None:
            return self._rows("SELECT * FROM overrides ORDER BY id")
        return self._rows("SELECT * FROM overrides WHERE student = ? ORDER BY id", [student])

    def unmatched(self) -> list[dict]:
        """The attempts of submissions matched to nobody on the roster."""
        return self._rows("SELECT submitted_as, assignment, attempt, score, max_score, graded_at FROM attempts "
                          "WHERE student = '' ORDER BY assignment, submitted_as, attempt")

    def unmatched_overrides(self) -> list[dict]:
        """The overrides of unmatched submissions (by the name they were recorded under), oldest first."""
        if self.version < 2:
            return []
        return self._rows("SELECT * FROM overrides WHERE student = '' ORDER BY id")

    def latest_unmatched(self, submitted_as: str, assignment: str) -> dict | None:
        """The newest attempt of the unmatched submission ``submitted_as`` on ``assignment``, decoded."""
        rows = self._rows("SELECT * FROM attempts WHERE student = '' AND submitted_as = ? AND assignment = ? "
                          "ORDER BY attempt DESC LIMIT 1", [submitted_as, assignment])
        if not rows:
            return None
        rows[0]["breakdown"] = json.loads(rows[0]["breakdown"] or "{}")
        return rows[0]

    def counted(self) -> list[dict]:
        """What each student's (and each unmatched submission's) feedback speaks of, per assignment: the
        newest attempt (``attempt``, breakdown decoded) and the newest override (``override``, or None).
        Roster students first (by id), then unmatched submissions (``student`` empty), by name."""
        rows = self._rows("SELECT * FROM attempts a WHERE attempt = (SELECT MAX(b.attempt) FROM attempts b WHERE "
                          "b.student = a.student AND b.assignment = a.assignment AND (a.student != '' OR "
                          "b.submitted_as = a.submitted_as)) ORDER BY a.student = '', a.student, a.submitted_as, "
                          "a.assignment, a.id")
        overrides: dict[tuple[str, str, str], dict] = {}
        for o in self.overrides() if self.version >= 2 else self._rows("SELECT *, '' AS submitted_as FROM overrides "
                                                                       "ORDER BY id"):
            overrides[(o["student"], o["submitted_as"] if not o["student"] else "", o["assignment"])] = o
        out, seen = [], set()
        for r in rows:
            key = (r["student"], "" if r["student"] else r["submitted_as"], r["assignment"])
            if key in seen:  # two rows of one attempt number (never written so; read defensively)
                continue
            seen.add(key)
            r["breakdown"] = json.loads(r["breakdown"] or "{}")
            out.append({"attempt": r, "override": overrides.get(key)})
        return out


def _writable(path: Path) -> bool:
    """Writable by this process, and not marked read-only (no owner write bit: root writes through any
    mode, and a gradebook made read-only by its owner is refused for root too)."""
    try:
        return os.access(path, os.W_OK) and bool(os.stat(path).st_mode & 0o200)
    except OSError:
        return False


def _check(path: Path, *, write: bool) -> int:
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except IsADirectoryError:
        raise _refuse(path, "is a folder, not a gradebook") from None
    except OSError as e:
        raise _refuse(path, f"cannot be read ({e.strerror or e})") from None
    if head != _SQLITE_MAGIC:
        raise _refuse(path, "is not a protolab gradebook (not an SQLite database)")
    try:
        conn = sqlite3.connect(f"{_uri(path)}?mode=ro", uri=True, factory=_Connection)
        try:
            ok = conn.execute("PRAGMA quick_check").fetchone()
            if not ok or ok[0] != "ok":
                raise _refuse(path, f"is damaged (SQLite's check: {ok[0] if ok else 'no answer'}); restore it from "
                                    "a copy")
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if "meta" not in tables:
                raise _refuse(path, "is an SQLite database but not a protolab gradebook (no meta table)")
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        finally:
            conn.close()
    except (sqlite3.DatabaseError, StoreError) as e:
        raise _refuse(path, f"is damaged or not a gradebook ({e})") from None
    if meta.get("app") != GRADEBOOK_APP:
        raise _refuse(path, "is an SQLite database but not a protolab gradebook")
    try:
        version = int(meta.get("schema_version", ""))
    except ValueError:
        raise _refuse(path, "has no schema version; it is damaged") from None
    if version > GRADEBOOK_SCHEMA:
        raise _refuse(path, f"was written by a newer protolab (gradebook schema {version}; this one knows "
                            f"{GRADEBOOK_SCHEMA}); upgrade protolab", code="E_GRADEBOOK_NEWER")
    missing = {"students", "assignments", "attempts", "overrides"} - tables
    if missing:
        raise _refuse(path, f"lacks the table(s) {', '.join(sorted(missing))}; it is damaged")
    if write and (not _writable(path) or not _writable(path.parent)):
        raise _refuse(path, "is read-only (the file or its folder); make it writable or copy it",
                      code="E_GRADEBOOK_READONLY")
    return version


def _connect(path: Path, *, readonly: bool) -> sqlite_utils.Database:
    uri = f"{_uri(path)}?mode={'ro' if readonly else 'rw'}"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, factory=_Connection)
    conn.path = str(path)
    conn.execute("PRAGMA busy_timeout = 5000")
    if not readonly:
        conn.execute("PRAGMA foreign_keys = ON")
    return sqlite_utils.Database(conn, execute_plugins=False)


def open_gradebook(path: str | os.PathLike, *, create: str | None = None, readonly: bool = False) -> Gradebook:
    """The gradebook at ``path``, checked. None there and ``create`` (the course's name) given: a new
    one, built in a partial file and renamed into place whole. None there otherwise: E_GRADEBOOK."""
    path = Path(path)
    if not path.exists():
        if create is None:
            raise InputError(f"{path} does not exist; 'protolab grade ... --course-file' writes it", code="E_GRADEBOOK")
        if not path.parent.is_dir():
            raise InputError(f"folder {path.parent} does not exist; nothing was written", code="E_GRADEBOOK")
        if not _writable(path.parent):
            raise _refuse(path, "cannot be created (its folder is read-only)", code="E_GRADEBOOK_READONLY")
        tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
        tmp.unlink(missing_ok=True)
        try:
            conn = sqlite3.connect(str(tmp), isolation_level=None, factory=_Connection)
            try:
                db = sqlite_utils.Database(conn, execute_plugins=False)
                conn.execute("BEGIN")
                _create(db, create)
                conn.execute("COMMIT")
                if conn.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
                    raise sqlite3.DatabaseError("the new gradebook does not check")
            finally:
                conn.close()
            os.replace(tmp, path)
        except (OSError, sqlite3.Error, StoreError) as e:
            tmp.unlink(missing_ok=True)
            raise _refuse(path, f"cannot be created ({e})") from None
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    version = _check(path, write=not readonly)
    try:
        book = Gradebook(_connect(path, readonly=readonly), path, version)
    except (sqlite3.Error, StoreError) as e:
        raise _refuse(path, f"cannot be opened ({e})") from None
    if version < GRADEBOOK_SCHEMA and not readonly:
        try:
            with book.transaction():
                _migrate(book.db, version)
        except BaseException:
            book.close()
            raise
        book.version = GRADEBOOK_SCHEMA
    return book


#: What ``protolab browse GRADEBOOK.db`` shows (Datasette's metadata): table -> (description, columns, facets)
BROWSE_TABLES: dict[str, tuple[str, dict[str, str], list[str]]] = {
    "attempts": ("One row per student x assignment x attempt: a regrade adds one, the latest counts (unless "
                 "overridden). A submission matched to nobody on the roster has student empty.", {
        "student": "The roster id ('' when the submission matched nobody).",
        "submitted_as": "The submission's folder or zip name.",
        "attempt": "1, 2, ... per student and assignment.",
        "submitted_from": "How the submission time is known: submission_metadata.json created_at, --submitted-at "
                          "or file mtime.",
        "raw_score": "The score before the late penalty.", "score": "The score after it.",
        "late_days": "Started days past the due date and its grace.", "penalty_percent": "The late penalty.",
        "breakdown": "Per rule: points, max, passed, why (JSON).", "sandbox": "What judged it.",
        "zero_reason": "Why the score is 0 (empty when it is not).",
        "feedback": "What the student's feedback page says of this attempt (JSON: each test's result, what broke, "
                    "the command, the hint; empty for a lab): protolab feedback export --gradebook writes it.",
    }, ["assignment", "late_days", "submitted_from", "sandbox"]),
    "overrides": ("Manual grades, with who and why; kept beside the attempts, which they never change. The "
                  "newest override of a student and assignment is the grade. An unmatched submission's override "
                  "has student empty and the submission's name in submitted_as.", {}, ["assignment", "by"]),
    "students": ("The roster.", {}, ["section"]),
    "assignments": ("The course file's assignments, due dates and points possible.", {}, ["kind"]),
    "grades": ("The grade that counts per student and assignment: the newest override, else the latest attempt.",
               {}, ["assignment", "source"]),
}

BROWSE_QUERIES = {
    "zeros": ("Every zero and its reason", "The latest attempts that scored 0, with why.",
              "SELECT student, submitted_as, assignment, attempt, zero_reason FROM attempts a WHERE score = 0 AND "
              "attempt = (SELECT MAX(attempt) FROM attempts b WHERE b.student = a.student AND b.submitted_as = "
              "a.submitted_as AND b.assignment = a.assignment) ORDER BY assignment, student, submitted_as"),
    "unmatched": ("Unmatched submissions", "Submissions matched to nobody on the roster (kept, never dropped).",
                  "SELECT submitted_as, assignment, attempt, score, max_score, graded_at FROM attempts "
                  "WHERE student = '' ORDER BY assignment, submitted_as, attempt"),
    "late": ("Late submissions", "Attempts past their due date, with the penalty applied.",
             "SELECT student, submitted_as, assignment, attempt, submitted_at, submitted_from, late_days, "
             "penalty_percent, raw_score, score FROM attempts WHERE late_days > 0 ORDER BY assignment, student"),
}


def browse_metadata(database: str, *, title: str) -> dict:
    """Datasette's metadata for a gradebook opened under the name ``database``."""
    tables = {name: {"description": d, "columns": dict(cols), "facets": list(f)}
              for name, (d, cols, f) in BROWSE_TABLES.items()}
    queries = {n: {"title": t, "description": d, "sql": q} for n, (t, d, q) in BROWSE_QUERIES.items()}
    return {"title": title, "description": "A protolab course gradebook, read-only: attempts, overrides, the roster, "
                                           "and the grade that counts (grades).",
            "databases": {database: {"tables": tables, "queries": queries}}}
