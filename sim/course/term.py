"""The instructor's term: a course file (``course.toml``), a roster, due dates and a late policy, and
how a graded submission becomes a gradebook row (:mod:`sim.store.gradebook` keeps the rows).

The course file (``protolab course init`` writes one)::

    [course]
    name = "Agent protocols, fall 2026"
    roster = "roster.csv"          # beside the course file
    gradebook = "gradebook.db"     # beside the course file

    [late]
    per_day_percent = 10           # each late day (started) costs this much of the score
    grace_minutes = 15             # later than the due date by at most this much: on time
    max_late_days = 3              # later than this many days: 0

    [[assignment]]
    id = "ex1"                     # the gradebook's and the exports' name for it
    kind = "exercise"              # or "lab"
    number = 1
    title = "Envelope design"
    due = "2026-09-14T23:59:00+00:00"   # ISO 8601 with its offset
    rubric = "rubrics/ex1.toml"    # optional: weigh this exercise's rules by this file (protolab kit rubric)
    canvas_id = 12345              # optional: the Canvas assignment's id (its URL: /courses/N/assignments/12345),
                                   # so that 'gradebook export --format canvas' fills that column, not a new one

Which course file a command uses: the one ``--course-file`` names, else ``course.toml`` in the
current folder, else none (``grade`` then writes no course gradebook; ``gradebook`` refuses).

The roster is a CSV file with the columns ``id, name, email, lms_id`` (and optionally ``section``).
A submission is matched to a roster row by its folder's name or its zip's stem (equal to the row's
id, email or lms_id, case aside), or by the users of Gradescope's ``submission_metadata.json``
beside its files (their email or id; see :func:`read_metadata`). A submission matched by nothing is
kept: graded, listed, and written to the gradebook as unmatched.

The time a submission was made (for lateness): ``created_at`` of its ``submission_metadata.json``,
else the time the instructor gives (``--submitted-at``), else the newest modification time of its
files; each row says which (``submitted_from``).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import tomllib
import zipfile
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path

from ..errors import InputError
from .safetext import clean_name, clean_text

__all__ = ["COURSE_FILE", "Assignment", "Course", "LatePolicy", "Student", "Roster", "find_course_file",
           "load_course", "load_roster", "course_toml", "match", "read_metadata", "submitted_time", "lateness",
           "exercise_row", "lab_row", "parse_time", "export_table", "assignment_rows", "canvas_ids",
           "unmatched_grades"]

#: The course file a command finds in the current folder when none is named.
COURSE_FILE = "course.toml"
ROSTER_COLUMNS = ("id", "name", "email", "lms_id")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$")
_EMAIL = re.compile(r"^[^@\s,;<>\"]{1,64}@[^@\s,;<>\"]{1,190}$")
#: a submission_metadata.json larger than this is not Gradescope's
_METADATA_LIMIT = 1024 * 1024


def _roster_error(path, line, why) -> InputError:
    where = f"{path}" + (f" line {line}" if line else "")
    return InputError(f"{where}: {why}; nothing was written", code="E_ROSTER")


def _course_error(path, why) -> InputError:
    return InputError(f"{path}: {why}; nothing was graded or written", code="E_COURSE_FILE")


@dataclass(frozen=True)
class Student:
    id: str
    name: str
    email: str
    lms_id: str = ""
    section: str = ""


@dataclass
class Roster:
    students: list[Student]

    def by_key(self) -> dict[str, Student]:
        keys: dict[str, Student] = {}
        for s in self.students:
            for k in (s.id, s.email, s.lms_id):
                if k:
                    keys.setdefault(k.casefold(), s)
        return keys


def load_roster(path: Path) -> Roster:
    """The roster at ``path``, checked: a header with ``id, name, email, lms_id`` (``section``
    optional, no other column), an id (letters, digits, ``._@+-``, at most 64) and an email on every
    row, no id, email or lms_id twice. Anything else: E_ROSTER, naming the line."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise _roster_error(path, None, "does not exist") from None
    except IsADirectoryError:
        raise _roster_error(path, None, "is a folder, not a CSV file") from None
    except OSError as e:
        raise _roster_error(path, None, f"cannot be read ({e.strerror or e})") from None
    if len(raw) > 8 * 1024 * 1024:
        raise _roster_error(path, None, "is larger than 8 MB; a roster is one line per student")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise _roster_error(path, None, f"is not UTF-8 text (byte {e.start}); save it as CSV UTF-8") from None
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as e:
        raise _roster_error(path, None, f"is not a CSV file ({e})") from None
    if not rows:
        raise _roster_error(path, None, "is empty; its first line names the columns id,name,email,lms_id")
    header = [h.strip().lower() for h in rows[0]]
    missing = [c for c in ROSTER_COLUMNS if c not in header]
    extra = [c for c in header if c not in (*ROSTER_COLUMNS, "section")]
    if missing or extra or len(set(header)) != len(header):
        raise _roster_error(path, 1, f"the header is {','.join(clean_name(h) for h in rows[0])[:120]}; a roster's "
                                     "columns are id,name,email,lms_id (and optionally section), each once")
    at = {c: header.index(c) for c in header}
    students: list[Student] = []
    seen: dict[str, tuple[str, int]] = {}
    for n, row in enumerate(rows[1:], 2):
        if not any(c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise _roster_error(path, n, f"has {len(row)} cells where the header has {len(header)}")
        cell = {c: row[i].strip() for c, i in at.items()}
        if not _ID.match(cell["id"]):
            raise _roster_error(path, n, f"the id {clean_name(cell['id'])!r} is not one: letters, digits and ._@+- "
                                         "(at most 64, starting with a letter or digit)")
        if not _EMAIL.match(cell["email"]):
            raise _roster_error(path, n, f"the email {clean_name(cell['email'])!r} is not an address")
        if cell["lms_id"] and not _ID.match(cell["lms_id"]):
            raise _roster_error(path, n, f"the lms_id {clean_name(cell['lms_id'])!r} is not one: letters, digits "
                                         "and ._@+- (at most 64)")
        if not cell["name"]:
            raise _roster_error(path, n, "has no name")
        for col in ("id", "email", "lms_id"):
            v = cell[col].casefold()
            if not v:
                continue
            if v in seen:
                other_col, other_line = seen[v]
                raise _roster_error(path, n, f"its {col} {clean_name(cell[col])!r} is already line {other_line}'s "
                                             f"{other_col}; each student once, each key once")
            seen[v] = (col, n)
        students.append(Student(id=cell["id"], name=clean_name(cell["name"]), email=cell["email"],
                                lms_id=cell["lms_id"], section=clean_name(cell.get("section", ""))))
    if not students:
        raise _roster_error(path, None, "has a header and no student")
    return Roster(students)


@dataclass(frozen=True)
class LatePolicy:
    per_day_percent: float = 10.0
    grace_minutes: float = 0.0
    max_late_days: int = 3


@dataclass(frozen=True)
class Assignment:
    id: str
    kind: str  # "exercise" or "lab"
    number: int
    title: str
    due: datetime | None
    rubric: Path | None = None
    canvas_id: int | None = None  # the Canvas assignment this one is (its gradebook CSV header says it)


@dataclass
class Course:
    path: Path
    name: str
    roster_path: Path
    gradebook_path: Path
    late: LatePolicy
    assignments: list[Assignment] = field(default_factory=list)
    _roster: Roster | None = None

    @property
    def roster(self) -> Roster:
        if self._roster is None:
            self._roster = load_roster(self.roster_path)
        return self._roster

    def assignment_for(self, kind: str, number: int) -> Assignment:
        for a in self.assignments:
            if a.kind == kind and a.number == number:
                return a
        raise InputError(f"{self.path} has no assignment for {kind} {number} (its assignments: "
                         f"{', '.join(a.id for a in self.assignments) or 'none'}); add an [[assignment]] with "
                         f"kind = \"{kind}\" and number = {number}, or grade without --course-file",
                         code="E_COURSE_FILE")


def parse_time(text: str, what: str) -> datetime:
    """An ISO 8601 time with its offset (``2026-09-14T23:59:00+02:00``, ``...Z``); E_USAGE otherwise."""
    try:
        t = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InputError(f"{what} {clean_name(str(text))!r} is not an ISO 8601 time (2026-09-14T23:59:00+02:00)",
                         code="E_USAGE") from None
    if t.tzinfo is None:
        raise InputError(f"{what} {clean_name(str(text))!r} has no time zone; add its offset (+00:00, +02:00, Z)",
                         code="E_USAGE")
    return t


def find_course_file(named: Path | None) -> Path | None:
    """The rule: ``--course-file`` when given (it must exist), else ``course.toml`` in the current
    folder when there is one, else None."""
    if named is not None:
        if not Path(named).is_file():
            raise InputError(f"--course-file {named} does not exist (or is not a file); protolab course init "
                             "writes one", code="E_COURSE_FILE")
        return Path(named)
    here = Path(COURSE_FILE)
    return here if here.is_file() else None


def _num(v, where: str, path: Path, *, lo: float = 0, hi: float | None = None) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < lo or (hi is not None and v > hi):
        raise _course_error(path, f"{where} must be a number from {lo:g}" + (f" to {hi:g}" if hi is not None else " up"))
    return float(v)


def load_course(path: Path) -> Course:
    """The course file at ``path``, checked (E_COURSE_FILE, naming what is wrong). Its roster is read
    (and checked) when first asked for."""
    from .catalog import get_exercise

    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise _course_error(path, f"cannot be read ({e.strerror or e})") from None
    except UnicodeDecodeError:
        raise _course_error(path, "is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise _course_error(path, f"is not TOML ({e})") from None
    head = data.get("course")
    if not isinstance(head, dict):
        raise _course_error(path, "has no [course] table; protolab course init writes a course file")
    known = {"course", "late", "assignment"}
    if set(data) - known:
        raise _course_error(path, f"has unknown table(s) {', '.join(sorted(set(data) - known))} (known: "
                                  "course, late, assignment)")
    base = path.parent
    def rel(key: str, default: str) -> Path:
        v = head.get(key, default)
        if not isinstance(v, str) or not v:
            raise _course_error(path, f"[course] {key} must be a file name")
        return base / v
    late = data.get("late", {})
    if not isinstance(late, dict) or set(late) - {"per_day_percent", "grace_minutes", "max_late_days"}:
        raise _course_error(path, "[late] takes per_day_percent, grace_minutes and max_late_days")
    mld = late.get("max_late_days", 3)
    if isinstance(mld, bool) or not isinstance(mld, int) or mld < 0:
        raise _course_error(path, "[late] max_late_days must be a whole number from 0 up")
    policy = LatePolicy(per_day_percent=_num(late.get("per_day_percent", 10), "[late] per_day_percent", path, hi=100),
                        grace_minutes=_num(late.get("grace_minutes", 0), "[late] grace_minutes", path),
                        max_late_days=mld)
    items = data.get("assignment", [])
    if not isinstance(items, list) or not items:
        raise _course_error(path, "has no [[assignment]]; each names kind (exercise or lab), number, id and due")
    out: list[Assignment] = []
    for i, a in enumerate(items, 1):
        where = f"assignment {i}"
        if not isinstance(a, dict):
            raise _course_error(path, f"{where} is not a table")
        unknown = set(a) - {"id", "kind", "number", "title", "due", "rubric", "canvas_id"}
        if unknown:
            raise _course_error(path, f"{where} has unknown key(s) {', '.join(sorted(unknown))}")
        kind, number = a.get("kind"), a.get("number")
        if kind not in ("exercise", "lab"):
            raise _course_error(path, f"{where}: kind must be \"exercise\" or \"lab\"")
        if isinstance(number, bool) or not isinstance(number, int):
            raise _course_error(path, f"{where}: number must be the {kind}'s number")
        try:
            if kind == "exercise":
                title = get_exercise(number).title
            else:
                from ..labs.catalog import get_lab

                title = get_lab(number).title
        except InputError:
            raise _course_error(path, f"{where}: there is no {kind} {number}") from None
        aid = a.get("id", f"{'ex' if kind == 'exercise' else 'lab'}{number}")
        if not isinstance(aid, str) or not _ID.match(aid):
            raise _course_error(path, f"{where}: id must be letters, digits and ._@+- (ex1, lab3)")
        if any(o.id == aid for o in out) or any(o.kind == kind and o.number == number for o in out):
            raise _course_error(path, f"{where}: {aid} ({kind} {number}) is in the course file twice")
        due = None
        if "due" in a:
            try:
                due = parse_time(a["due"], f"{where}: due")
            except InputError as e:
                raise _course_error(path, e.message) from None
        rubric = a.get("rubric")
        if rubric is not None:
            if kind != "exercise" or not isinstance(rubric, str):
                raise _course_error(path, f"{where}: rubric is a file name, for an exercise")
            rubric = base / rubric
        title = a.get("title", title)
        if not isinstance(title, str):
            raise _course_error(path, f"{where}: title must be text")
        canvas_id = a.get("canvas_id")
        if canvas_id is not None:
            if isinstance(canvas_id, str) and canvas_id.strip().isdigit():
                canvas_id = int(canvas_id.strip())
            if isinstance(canvas_id, bool) or not isinstance(canvas_id, int) or canvas_id <= 0:
                raise _course_error(path, f"{where}: canvas_id is the Canvas assignment's number (the end of its "
                                          "URL, /courses/N/assignments/12345)")
            if any(o.canvas_id == canvas_id for o in out):
                raise _course_error(path, f"{where}: canvas_id {canvas_id} is another assignment's already")
        out.append(Assignment(id=aid, kind=kind, number=number, title=clean_name(title), due=due, rubric=rubric,
                              canvas_id=canvas_id))
    name = head.get("name", path.parent.name)
    if not isinstance(name, str):
        raise _course_error(path, "[course] name must be text")
    return Course(path=path, name=clean_name(name), roster_path=rel("roster", "roster.csv"),
                  gradebook_path=rel("gradebook", "gradebook.db"), late=policy, assignments=out)


def _q(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def course_toml(name: str, assignments: list[tuple[str, int, str]], start: date, tz, late: LatePolicy) -> str:
    """The text of a new course file: ``assignments`` as (kind, number, title), one due a week from
    ``start`` (23:59 in ``tz``), in order."""
    lines = ["# A protolab course file (protolab course init). Due dates are ISO 8601 with their offset;",
             "# the late policy: each started late day costs per_day_percent of the score, up to",
             "# max_late_days, after which the score is 0; within grace_minutes of the due date is on time.",
             "", "[course]", f"name = {_q(name)}", 'roster = "roster.csv"', 'gradebook = "gradebook.db"', "",
             "[late]", f"per_day_percent = {late.per_day_percent:g}", f"grace_minutes = {late.grace_minutes:g}",
             f"max_late_days = {late.max_late_days}"]
    for k, (kind, number, title) in enumerate(assignments):
        due = datetime.combine(start + timedelta(weeks=k + 1), time(23, 59), tzinfo=tz)
        aid = f"{'ex' if kind == 'exercise' else 'lab'}{number}"
        lines += ["", "[[assignment]]", f'id = "{aid}"', f'kind = "{kind}"', f"number = {number}",
                  f"title = {_q(title)}", f'due = "{due.isoformat()}"']
        if kind == "exercise":
            lines.append(f'# rubric = "rubrics/{aid}.toml"   # protolab kit rubric {number} -o rubrics/{aid}.toml')
        lines.append("# canvas_id = 12345   # the Canvas assignment's number (its URL's end): the canvas export fills it")
    return "\n".join(lines) + "\n"


def read_metadata(source: Path) -> dict | None:
    """Gradescope's ``submission_metadata.json`` of a submission (a folder holding it, or a zip holding
    it at its top or one folder down), or None. Its format (Gradescope's autograder documentation,
    https://gradescope-autograders.readthedocs.io/en/latest/submission_metadata/): ``id``,
    ``created_at`` (the submission time, ISO 8601 with offset), ``assignment`` {``due_date``, ...},
    ``users`` [{``email``, ``id``, ``name``}] (more than one for a group), ``previous_submissions``.
    What is not such an object is read as no metadata."""
    source = Path(source)
    text = None
    try:
        if source.is_dir() and not source.is_symlink():
            for p in (source / "submission_metadata.json", *sorted(source.glob("*/submission_metadata.json"))):
                if p.is_file() and not p.is_symlink() and p.stat().st_size <= _METADATA_LIMIT:
                    text = p.read_text(encoding="utf-8")
                    break
        elif source.is_file() and source.suffix.lower() == ".zip":
            with zipfile.ZipFile(source) as z:
                for zi in sorted(z.infolist(), key=lambda zi: zi.filename.count("/")):
                    parts = [x for x in zi.filename.split("/") if x]
                    if parts and parts[-1] == "submission_metadata.json" and len(parts) <= 2 \
                            and zi.file_size <= _METADATA_LIMIT:
                        text = z.read(zi).decode("utf-8")
                        break
    except (OSError, UnicodeDecodeError, zipfile.BadZipFile, RuntimeError, ValueError, NotImplementedError):
        return None
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    users = data.get("users")
    data["users"] = [u for u in users if isinstance(u, dict)] if isinstance(users, list) else []
    return data


def match(name: str, source: Path, roster: Roster, metadata: dict | None = None) -> list[Student]:
    """The roster rows a submission is: by the users of its ``submission_metadata.json`` (email, then
    Gradescope's user id as an lms_id), else by its name (a folder's name, a zip's stem; a second
    submission of one name, ``alice~2``, as ``alice``). Empty when none matches."""
    keys = roster.by_key()
    if metadata and metadata.get("users"):
        found: list[Student] = []
        for u in metadata["users"]:
            for k in (u.get("email"), u.get("id"), u.get("sid")):
                s = keys.get(str(k).casefold()) if k not in (None, "") else None
                if s is not None and s not in found:
                    found.append(s)
                    break
        if found:
            return found
    base = re.sub(r"~\d+$", "", name)
    s = keys.get(base.casefold())
    return [s] if s is not None else []


def _newest_mtime(source: Path) -> float | None:
    try:
        if source.is_dir():
            times = [p.stat().st_mtime for p in source.rglob("*") if p.is_file() and not p.is_symlink()]
            return max(times) if times else source.stat().st_mtime
        return source.stat().st_mtime
    except OSError:
        return None


def submitted_time(source: Path, metadata: dict | None, given: datetime | None) -> tuple[datetime | None, str]:
    """(when, how it is known): ``submission_metadata.json created_at``, ``--submitted-at`` or
    ``file mtime``."""
    if metadata and isinstance(metadata.get("created_at"), str):
        try:
            return parse_time(metadata["created_at"], "created_at"), "submission_metadata.json created_at"
        except InputError:
            pass
    if given is not None:
        return given, "--submitted-at"
    m = _newest_mtime(Path(source))
    if m is None:
        return None, ""
    return datetime.fromtimestamp(m, tz=timezone.utc), "file mtime"


def lateness(due: datetime | None, at: datetime | None, policy: LatePolicy) -> tuple[int, float, str]:
    """(late days, penalty percent, why): a day is counted for each started 24 hours past the due date
    and its grace; past ``max_late_days`` the penalty is 100 and the reason says so."""
    if due is None or at is None:
        return 0, 0.0, ""
    late = (at - due).total_seconds() - policy.grace_minutes * 60
    if late <= 0:
        return 0, 0.0, ""
    days = math.ceil(late / 86400)
    if days > policy.max_late_days:
        return days, 100.0, (f"late by {days} day(s), more than the {policy.max_late_days} late day(s) the course "
                             "allows: 0")
    pct = min(100.0, days * policy.per_day_percent)
    return days, pct, f"late by {days} day(s): -{pct:g}%"


def _round(x: float) -> float:
    return float(f"{x:.2f}")


def _row(assignment: Assignment, policy: LatePolicy, *, submitted_as: str, source: Path, students: list[Student],
         raw: float, maximum: float, breakdown: dict, sandbox: str, reason: str, note: str,
         metadata: dict | None, given: datetime | None) -> dict:
    at, how = submitted_time(source, metadata, given)
    days, pct, why = lateness(assignment.due, at, policy)
    score = _round(raw * (1 - pct / 100))
    zero = ""
    if score == 0:
        zero = why if pct >= 100 and raw > 0 else (reason or note or "no rule passed")
    return {"students": [s.id for s in students], "submitted_as": clean_name(submitted_as),
            "submitted_at": at.isoformat() if at else "", "submitted_from": how,
            "raw_score": _round(raw), "max_score": _round(maximum), "late_days": days, "penalty_percent": pct,
            "score": score, "breakdown": breakdown, "sandbox": clean_text(sandbox, lines=False),
            "zero_reason": clean_text(zero, lines=False), "note": clean_text("; ".join(x for x in (note, why) if x),
                                                                             lines=False)}


def exercise_row(course: Course, assignment: Assignment, sub, report, *, given: datetime | None = None) -> dict:
    """The gradebook row of one graded exercise submission (:class:`sim.course.grade.Submission` and
    its :class:`sim.course.evaluate.Report`)."""
    from .gradebook import _note

    meta = read_metadata(sub.source)
    students = match(sub.name, sub.source, course.roster, meta)
    breakdown = {r.name: {"points": r.points, "max": r.max_points, "passed": r.passed,
                          **({"why": clean_text(r.message.splitlines()[0] if r.message else "", lines=False)}
                             if not r.passed else {})}
                 for r in report.results}
    failed = next((f"{r.name}: {r.message.splitlines()[0]}" for r in report.results if not r.passed and r.message), "")
    from .feedback import handback

    row = _row(assignment, course.late, submitted_as=sub.name, source=sub.source, students=students,
               raw=report.score, maximum=report.max_score, breakdown=breakdown, sandbox=report.sandbox,
               reason=report.problem or failed, note=_note(report), metadata=meta, given=given)
    row["feedback"] = handback(report.to_dict())
    return row


def lab_row(course: Course, assignment: Assignment, student: str, file: Path | None, result: dict, *,
            folder: Path | None = None, given: datetime | None = None) -> dict:
    """The gradebook row of one graded lab submission (a result of :func:`sim.course.labgrade.grade_labs`)."""
    source = folder if folder is not None else file if file is not None else Path(student)
    meta = read_metadata(source) if folder is not None else None
    students = match(student, source, course.roster, meta)
    breakdown = {"checkpoints": {"points": result["done"], "max": result["max_score"] - result["questions"]},
                 "answers": {"points": result["answered"], "max": result["questions"]},
                 "genuine": result["genuine"]}
    return _row(assignment, course.late, submitted_as=student, source=source, students=students,
                raw=float(result["score"]), maximum=float(result["max_score"]), breakdown=breakdown,
                sandbox="re-delivery (no student code run)", reason=result.get("note", ""), note=result.get("note", ""),
                metadata=meta, given=given)


def default_start() -> date:
    return datetime.now(timezone.utc).date()


def tz_named(name: str):
    """A time zone by IANA name (Europe/Paris) or offset (+02:00, UTC)."""
    if name.upper() in ("UTC", "Z"):
        return timezone.utc
    m = re.fullmatch(r"([+-])(\d{2}):?(\d{2})", name)
    if m:
        sign = 1 if m.group(1) == "+" else -1
        return timezone(sign * timedelta(hours=int(m.group(2)), minutes=int(m.group(3))))
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(name)
    except Exception:  # noqa: BLE001 - zoneinfo raises several kinds
        raise InputError(f"--tz {clean_name(name)!r} is not a time zone (UTC, +02:00, Europe/Paris)",
                         code="E_USAGE") from None


def write_new(dest: Path, files: dict[str, bytes]) -> None:
    """Write ``files`` (name -> bytes) into ``dest`` whole: every one to a partial file first, then
    renamed; none is written when one of them exists already."""
    for n in files:
        if (dest / n).exists():
            raise InputError(f"{dest / n} already exists; nothing was written (choose another folder)",
                             code="E_EXISTS")
    done = []
    try:
        for n, data in files.items():
            tmp = dest / f".{n}.partial-{os.getpid()}"
            tmp.write_bytes(data)
            done.append((tmp, dest / n))
        for tmp, final in done:
            os.replace(tmp, final)
    except OSError as e:
        for tmp, _ in done:
            tmp.unlink(missing_ok=True)
        raise InputError(f"cannot write in {dest}: {e.strerror or e}", code="E_OUTPUT") from None


def _score_cell(x) -> str:
    return "" if x is None else f"{x:g}"


def _column(a: dict) -> str:
    return f"{a['title']} ({a['id']})"


def _canvas_column(a: dict, canvas_id: int | None) -> str:
    """A Canvas header: ``Title (canvas id)`` matches that Canvas assignment (Canvas reads a header that
    ends in a space and a number in brackets as the assignment's id; any other header as the name of an
    assignment, made new when no assignment has it). Without a canvas id, ``Title (ex1)``; an id of
    digits only is written ``Title (assignment 2024)``, so that Canvas never reads it as another
    assignment's id."""
    if canvas_id is not None:
        return f"{a['title']} ({canvas_id})"
    return f"{a['title']} (assignment {a['id']})" if str(a["id"]).isdigit() else _column(a)


def canvas_ids(course: "Course | None") -> dict[str, int]:
    """The course file's Canvas assignment ids, by assignment id."""
    return {a.id: a.canvas_id for a in (course.assignments if course else ()) if a.canvas_id is not None}


def export_table(book, fmt: str, course: "Course | None" = None) -> tuple[list[str], list[list], int]:
    """(header, rows, unmatched left out) of the gradebook ``book`` (:class:`sim.store.gradebook.Gradebook`)
    as ``fmt`` imports it: the grade that counts per student and assignment (the newest override, else
    the latest attempt; an assignment not submitted is an empty cell).

    * ``canvas``: Canvas's gradebook CSV (Canvas Instructor Guide, "How do I import grades in the
      Gradebook?", https://community.canvaslms.com/t5/Instructor-Guide/How-do-I-import-grades-in-the-Gradebook/ta-p/807,
      the layout its "Export" writes, and its importer, which finds the header by ``Student`` and
      ``ID`` first and ``Section`` last of the student columns, skips a row whose first cell holds
      ``Points Possible``, and matches an assignment column by the number in ``Name (number)``):
      ``Student, ID, SIS User ID, SIS Login ID, Section``, then one column per assignment headed
      ``Name (canvas_id)`` when the course file gives the assignment's ``canvas_id`` (the existing
      Canvas assignment's column is filled), else ``Name (id)`` (Canvas makes a new assignment of
      that name); the second row is ``    Points Possible`` with each assignment's maximum. ID is the
      roster's lms_id (Canvas's user id), SIS User ID its id, SIS Login ID its email.
    * ``moodle``: Moodle's grade import CSV (Moodle docs, "Grade import",
      https://docs.moodle.org/en/Grade_import: a column that identifies the user, mapped to "Email
      address" or "ID number" on import, and one column per grade item): ``ID number, Email address,
      Full name``, then one column per assignment.
    * ``csv``: everything: ``student, name, email, lms_id, section``, then per assignment its score
      and ``ID source`` (the attempt or the override that counts), and the unmatched submissions'
      latest attempts as rows of their own (student empty, name ``unmatched: NAME``).

    Unmatched submissions cannot be imported into an LMS: canvas and moodle leave them out and say how
    many (the third value)."""
    from .safetext import csv_cell

    assignments = book.assignments()
    students = book.students()
    grades = {(g["student"], g["assignment"]): g for g in book.grades()}
    unmatched = book.unmatched()
    left_out = len({(u["submitted_as"], u["assignment"]) for u in unmatched})
    cols = [_column(a) for a in assignments]
    if fmt == "canvas":
        ids = canvas_ids(course)
        header = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                  *[_canvas_column(a, ids.get(a["id"])) for a in assignments]]
        rows = [["    Points Possible", "", "", "", "", *[_score_cell(a["max_points"]) for a in assignments]]]
        for s in students:
            rows.append([csv_cell(s["name"]), csv_cell(s["lms_id"]), csv_cell(s["id"]), csv_cell(s["email"]),
                         csv_cell(s["section"]),
                         *[_score_cell(grades.get((s["id"], a["id"]), {}).get("score")) for a in assignments]])
        return header, rows, left_out
    if fmt == "moodle":
        header = ["ID number", "Email address", "Full name", *cols]
        rows = [[csv_cell(s["id"]), csv_cell(s["email"]), csv_cell(s["name"]),
                 *[_score_cell(grades.get((s["id"], a["id"]), {}).get("score")) for a in assignments]]
                for s in students]
        return header, rows, left_out
    if fmt == "csv":
        header = ["student", "name", "email", "lms_id", "section"]
        for a in assignments:
            header += [a["id"], f"{a['id']} source"]
        rows = []
        for s in students:
            row = [csv_cell(s["id"]), csv_cell(s["name"]), csv_cell(s["email"]), csv_cell(s["lms_id"]),
                   csv_cell(s["section"])]
            for a in assignments:
                g = grades.get((s["id"], a["id"]), {})
                row += [_score_cell(g.get("score")), csv_cell(g.get("source") or "")]
            rows.append(row)
        latest = unmatched_grades(book)
        for name in sorted(latest):
            row = ["", csv_cell(f"unmatched: {name}"), "", "", ""]
            for a in assignments:
                u = latest[name].get(a["id"])
                row += [_score_cell(u["score"]) if u else "", csv_cell(u["source"]) if u else ""]
            rows.append(row)
        return header, rows, 0
    raise InputError(f"--format {clean_name(fmt)!r}: canvas, moodle or csv", code="E_USAGE")


def unmatched_grades(book) -> dict[str, dict[str, dict]]:
    """Per unmatched submission name and assignment, the grade that counts: ``score``, ``source``
    (``override`` or ``attempt N``), ``attempt``, ``max_score``, ``comment`` (the override's)."""
    out: dict[str, dict[str, dict]] = {}
    for u in book.unmatched():  # ordered by attempt: the last stays
        out.setdefault(u["submitted_as"], {})[u["assignment"]] = {
            "score": u["score"], "source": f"attempt {u['attempt']}", "attempt": u["attempt"],
            "max_score": u["max_score"], "comment": ""}
    for o in book.unmatched_overrides():  # oldest first: the newest stays
        g = out.get(o["submitted_as"], {}).get(o["assignment"])
        if g is not None:
            g.update(score=o["score"], source="override", comment=o["comment"])
    return out


def assignment_rows(course: Course) -> list[dict]:
    """The course file's assignments as the gradebook keeps them (max_points: None until graded)."""
    return [{"id": a.id, "kind": a.kind, "number": a.number, "title": a.title,
             "due": a.due.isoformat() if a.due else "", "max_points": None, "position": i}
            for i, a in enumerate(course.assignments, 1)]
