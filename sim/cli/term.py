"""The instructor's term: 'protolab course init' (a course file and its roster) and 'protolab gradebook'
(show, override, export); 'grade' writes into the gradebook through :class:`CourseGrading`."""

from __future__ import annotations

import getpass
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import typer

from ..errors import InputError
from .common import JSON_OPT, _print_json, output_rows

course_app = typer.Typer(help="(Instructors) the term: 'course init' writes a course file (assignments, due dates, "
                              "late policy, rubric overrides) beside its roster.", no_args_is_help=True)
gradebook_app = typer.Typer(help="(Instructors) the course gradebook that 'grade --course-file' writes: show it, "
                                 "override a grade with a comment, export it for Canvas, Moodle or as CSV.",
                            no_args_is_help=True)

COURSE_FILE_OPT = typer.Option(None, "--course-file", metavar="FILE",
                               help="The course file (protolab course init writes one). Default: course.toml in the "
                                    "current folder, when there is one.")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class CourseGrading:
    """What 'grade' does with a course file: everything checked before grading (course file, roster,
    gradebook writable), then one transaction of attempts after it."""

    def __init__(self, course_file: Path, kind: str, number: int, submitted_at: Optional[str]):
        from ..course.term import load_course, parse_time
        from ..store.gradebook import open_gradebook

        self.given = parse_time(submitted_at, "--submitted-at") if submitted_at else None
        self.course = load_course(course_file)
        self.assignment = self.course.assignment_for(kind, number)
        self.course.roster  # noqa: B018 - checked now, before anything is graded
        path = self.course.gradebook_path
        self.book = None  # a new gradebook is made only once there is something to record in it
        if path.exists() or path.is_symlink():
            self.book = open_gradebook(path)  # checked now: not one, newer, damaged or read-only: refused
        elif not path.parent.is_dir() or not os.access(path.parent, os.W_OK):
            raise InputError(f"{path}: its folder is missing or read-only, so the gradebook cannot be made; nothing "
                             "was graded or written", code="E_GRADEBOOK_READONLY")

    @property
    def rubric(self) -> Optional[Path]:
        return self.assignment.rubric

    def record(self, rows: list[dict], *, as_json: bool) -> None:
        from ..course.term import assignment_rows

        from ..store.gradebook import open_gradebook

        if self.book is None:
            self.book = open_gradebook(self.course.gradebook_path, create=self.course.name)
        try:
            written = self.book.record(self.course.roster.students, assignment_rows(self.course),
                                       self.assignment.id, rows, _now())
        finally:
            self.book.close()
        out = sys.stderr if as_json else sys.stdout
        again = sum(1 for w in written if w["attempt"] > 1)
        print(f"gradebook {self.course.gradebook_path}: {len(written)} attempt(s) of {self.assignment.id} recorded"
              + (f" ({again} regrade(s): a new attempt each, the latest counts)" if again else ""), file=out)
        late = [(r["submitted_as"], r["late_days"], r["penalty_percent"]) for r in rows if r["late_days"]]
        for name, days, pct in late:
            print(f"  late: {name}, {days} day(s), -{pct:g}%", file=out)
        unmatched = [r["submitted_as"] for r in rows if not r["students"]]
        if unmatched:
            print(f"unmatched: {len(unmatched)} submission(s) not on the roster (graded and kept in the gradebook as "
                  f"unmatched): {', '.join(unmatched)}", file=out)


def course_grading(course_file: Optional[Path], kind: str, number: int,
                   submitted_at: Optional[str]) -> Optional[CourseGrading]:
    """The course this 'grade' writes into: --course-file, else ./course.toml, else none."""
    from ..course.term import find_course_file

    found = find_course_file(course_file)
    if found is None:
        if submitted_at is not None:
            raise InputError("--submitted-at is for a course's gradebook (late days); name the course file with "
                             "--course-file", code="E_USAGE")
        return None
    return CourseGrading(found, kind, number, submitted_at)


@course_app.command("init")
def course_init(
    folder: Path = typer.Argument(Path("."), help="Where to write course.toml and roster.csv (default: here)."),
    roster: Path = typer.Option(..., "--roster", help="The roster: a CSV file with the columns id, name, email, "
                                                      "lms_id (and optionally section); copied beside the course file."),
    name: Optional[str] = typer.Option(None, "--name", help="The course's name (default: the folder's name)."),
    start: Optional[str] = typer.Option(None, "--start", metavar="YYYY-MM-DD",
                                        help="The term's first day: assignment k is due k weeks later, at 23:59 "
                                             "(default: today)."),
    tz: str = typer.Option("UTC", "--tz", help="The due dates' time zone (UTC, +02:00, Europe/Paris)."),
    only: Optional[str] = typer.Option(None, "--assignments", metavar="LIST",
                                       help="The assignments, in order: ex1,ex2,lab1 (default: every exercise, then "
                                            "every lab)."),
    per_day: float = typer.Option(10, "--late-per-day", min=0, max=100, help="Percent of the score each late day costs."),
    grace: float = typer.Option(15, "--grace-minutes", min=0, help="Minutes after the due date still on time."),
    max_days: int = typer.Option(3, "--max-late-days", min=0, help="Later than this many days: 0."),
):
    """Write a course file (course.toml: the assignments of the term, their due dates, the late policy,
    where rubric overrides go) and a checked copy of the roster. Nothing is written when the roster or
    an option is wrong, or when either file exists."""
    import re
    from datetime import date

    from ..course.catalog import exercises
    from ..course.term import LatePolicy, course_toml, default_start, load_roster, tz_named, write_new
    from ..labs.catalog import labs

    if not folder.is_dir():
        raise InputError(f"folder {folder} does not exist; make it first", code="E_DIR_MISSING")
    text = load_roster(roster)  # checked: E_ROSTER before anything is written
    zone = tz_named(tz)
    try:
        first = date.fromisoformat(start) if start else default_start()
    except ValueError:
        raise InputError(f"--start {start!r} is not a date (YYYY-MM-DD)", code="E_USAGE") from None
    every = [("exercise", e.number, e.title) for e in exercises()] + [("lab", x.number, x.title) for x in labs()]
    if only:
        chosen = []
        for item in [x.strip() for x in only.split(",") if x.strip()]:
            m = re.fullmatch(r"(ex|lab)(\d+)", item)
            hit = [a for a in every if m and a[0] == ("exercise" if m.group(1) == "ex" else "lab")
                   and a[1] == int(m.group(2))]
            if not hit:
                raise InputError(f"--assignments: {item!r} is no exercise or lab (ex1 ... ex{len(exercises())}, lab1 "
                                 f"... lab{len(labs())})", code="E_USAGE")
            chosen.append(hit[0])
        every = chosen
    body = course_toml(name or folder.resolve().name, every, first, zone,
                       LatePolicy(per_day_percent=per_day, grace_minutes=grace, max_late_days=max_days))
    write_new(folder, {"course.toml": body.encode("utf-8"), "roster.csv": roster.read_bytes()})
    typer.echo(f"wrote {folder / 'course.toml'} ({len(every)} assignments, due weekly from {first}) and "
               f"{folder / 'roster.csv'} ({len(text.students)} students)")
    typer.echo(f"  grade into its gradebook: protolab grade 1 SUBMISSIONS --course-file {folder / 'course.toml'}")


def _book(course_file: Optional[Path], *, readonly: bool, create: bool = False):
    from ..course.term import find_course_file, load_course
    from ..store.gradebook import open_gradebook

    found = find_course_file(course_file)
    if found is None:
        raise InputError("no course file: name it with --course-file, or run where course.toml is",
                         code="E_COURSE_FILE")
    course = load_course(found)
    return course, open_gradebook(course.gradebook_path, readonly=readonly, create=course.name if create else None)


@gradebook_app.command("show")
def gradebook_show(
    student: Optional[str] = typer.Argument(None, help="One student (their roster id, or an unmatched submission's "
                                                       "name): every attempt and override."),
    course_file: Optional[Path] = COURSE_FILE_OPT,
    as_json: bool = JSON_OPT,
):
    """The grade that counts per student and assignment (the newest override, else the latest attempt),
    and the unmatched submissions; with STUDENT, their every attempt and override."""
    course, book = _book(course_file, readonly=True)
    try:
        if student is None:
            grades, unmatched, assignments = book.grades(), book.unmatched(), book.assignments()
            if as_json:
                _print_json({"grades": grades, "unmatched": unmatched,
                             "unmatched_overrides": book.unmatched_overrides()})
                return
            by = {(g["student"], g["assignment"]): g for g in grades}
            rows = []
            for s in book.students():
                cells = []
                for a in assignments:
                    g = by.get((s["id"], a["id"]), {})
                    mark = "*" if g.get("source") == "override" else ""
                    cells.append("" if g.get("score") is None else f"{g['score']:g}{mark}")
                rows.append([s["id"], s["name"], *cells])
            output_rows(f"Gradebook of {course.name} ({book.path})", ["student", "name", *[a["id"] for a in assignments]],
                        rows, caption="* an override; the grade that counts is the newest override, else the latest "
                                      "attempt. protolab gradebook show STUDENT lists every attempt.")
            maxes = ", ".join(f"{a['id']} /{a['max_points']:g}" for a in assignments if a["max_points"] is not None)
            if maxes:
                typer.echo(f"out of: {maxes}")
            if unmatched:
                from ..course.term import unmatched_grades

                counted = unmatched_grades(book)
                typer.echo(f"unmatched submissions (not on the roster), {len(unmatched)} attempt(s):")
                for u in unmatched:
                    typer.echo(f"  {u['submitted_as']}  {u['assignment']} attempt {u['attempt']}: "
                               f"{u['score']:g}/{u['max_score']:g}")
                for name, per in sorted(counted.items()):
                    for aid, g in per.items():
                        if g["source"] == "override":
                            typer.echo(f"  {name}  {aid} override: {g['score']:g}* ({g['comment']})")
            return
        if not any(s["id"] == student for s in book.students()):
            from ..course.term import unmatched_grades

            counted = unmatched_grades(book)
            if student not in counted:
                raise InputError(f"{student!r} is not on the roster of {book.path}, nor an unmatched submission's "
                                 "name (protolab gradebook show lists both)", code="E_USAGE")
            attempts = [u for u in book.unmatched() if u["submitted_as"] == student]
            overrides = [o for o in book.unmatched_overrides() if o["submitted_as"] == student]
            if as_json:
                _print_json({"unmatched": student, "grades": counted[student], "attempts": attempts,
                             "overrides": overrides})
                return
            typer.echo(f"{student}: an unmatched submission (not on the roster); the grade that counts:")
            for aid, g in counted[student].items():
                typer.echo(f"  {aid}: {g['score']:g}/{g['max_score']:g} from {g['source']}"
                           + (f" ({g['comment']})" if g["comment"] else ""))
            typer.echo(f"{student}: attempts, oldest first")
            for a in attempts:
                typer.echo(f"  {a['assignment']} attempt {a['attempt']}: {a['score']:g}/{a['max_score']:g}; "
                           f"graded {a['graded_at']}")
            if overrides:
                output_rows(f"{student}: overrides", ["assignment", "score", "by", "at", "comment"],
                            [[o["assignment"], f"{o['score']:g}", o["by"], o["at"], o["comment"]] for o in overrides])
            return
        attempts, overrides = book.attempts(student), book.overrides(student)
        if as_json:
            _print_json({"grades": book.grades(student), "attempts": attempts, "overrides": overrides})
            return
        output_rows(f"{student}: grades", ["assignment", "score", "out of", "from", "why"],
                    [[g["assignment"], "" if g["score"] is None else f"{g['score']:g}",
                      "" if g["max_score"] is None else f"{g['max_score']:g}", g["source"], g["why"] or ""]
                     for g in book.grades(student)])
        typer.echo(f"{student}: attempts, oldest first (the latest of each assignment counts, unless overridden)")
        for a in attempts:
            late = (f", late {a['late_days']} day(s): -{a['penalty_percent']:g}%" if a["late_days"] else "")
            typer.echo(f"  {a['assignment']} attempt {a['attempt']}: {a['score']:g}/{a['max_score']:g} "
                       f"(raw {a['raw_score']:g}{late})")
            typer.echo(f"    submitted {a['submitted_at'] or '?'} ({a['submitted_from'] or 'unknown'}) as "
                       f"{a['submitted_as']}; graded {a['graded_at']}; sandbox: {a['sandbox']}")
            rules = [f"{k} {v['points']:g}/{v['max']:g}" for k, v in a["breakdown"].items() if isinstance(v, dict)]
            if rules:
                typer.echo(f"    per rule: {', '.join(rules)}")
            if a["zero_reason"]:
                typer.echo(f"    zero because: {a['zero_reason']}")
        if overrides:
            output_rows(f"{student}: overrides", ["assignment", "score", "by", "at", "comment"],
                        [[o["assignment"], f"{o['score']:g}", o["by"], o["at"], o["comment"]] for o in overrides])
    finally:
        book.close()


@gradebook_app.command("override")
def gradebook_override(
    student: str = typer.Argument(..., help="The student's roster id, or the name an unmatched submission was "
                                           "recorded under (gradebook show lists them)."),
    assignment: str = typer.Argument(..., help="The assignment's id in the course file (ex1, lab3)."),
    score: float = typer.Argument(..., help="The score that counts from now on."),
    comment: str = typer.Option(..., "--comment", help="Why (kept with the override)."),
    by: Optional[str] = typer.Option(None, "--by", help="Who (default: the operating-system user)."),
    course_file: Optional[Path] = COURSE_FILE_OPT,
):
    """Record a manual grade with who and why. The attempts stay as they were; the newest override is the
    grade that counts (show and export say so). STUDENT is a roster id, or an unmatched submission's name
    (its override is kept as not on the roster); anything else is refused and nothing is written."""
    from ..course.safetext import clean_name, clean_text

    if score != score or score < 0:
        raise InputError(f"SCORE {score} must be a number from 0 up", code="E_USAGE")
    if not comment.strip():
        raise InputError("--comment says why; it cannot be empty", code="E_USAGE")
    who = by
    if who is None:
        try:
            who = getpass.getuser()
        except (KeyError, OSError):
            who = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
    from ..course.term import assignment_rows, find_course_file, load_course

    found = find_course_file(course_file)
    if found is None:
        raise InputError("no course file: name it with --course-file, or run where course.toml is",
                         code="E_COURSE_FILE")
    course = load_course(found)
    rows = assignment_rows(course)
    if assignment not in {a["id"] for a in rows}:
        raise InputError(f"{clean_name(assignment)!r} is not an assignment of {course.path} "
                         f"({', '.join(a['id'] for a in rows)})", code="E_USAGE")
    on_roster = any(s.id == student for s in course.roster.students)
    if not on_roster and not course.gradebook_path.exists():  # no gradebook: no unmatched submission either
        raise InputError(f"{clean_name(student)!r} is not on the roster of {course.path}, and no submission was "
                         "graded yet; nothing was written", code="E_USAGE")
    if course.gradebook_path.exists():  # checked read-only first: a refused name writes nothing (no migration)
        _, book = _book(found, readonly=True)
        try:
            book.whose(student, assignment, students=course.roster.students, assignments=rows)
        finally:
            book.close()
    _, book = _book(found, readonly=False, create=on_roster)
    try:
        done = book.override(student, assignment, float(score), clean_text(comment, lines=False), clean_name(who),
                             _now(), students=course.roster.students, assignments=rows)
    finally:
        book.close()
    typer.echo(f"override: {clean_name(student)} {assignment} = {score:g} (by {clean_name(who)}: "
               f"{clean_text(comment, lines=False)}); the attempts are kept"
               + ("" if done["on_roster"] else "; not on the roster: the unmatched submission of that name"))


@gradebook_app.command("export")
def gradebook_export(
    fmt: str = typer.Option(..., "--format", metavar="canvas|moodle|csv",
                            help="canvas: Canvas's gradebook import CSV; moodle: Moodle's grade import CSV (map "
                                 "'ID number' or 'Email address'); csv: every column, unmatched submissions too."),
    out: Path = typer.Option(..., "-o", "--output", help="The CSV file to write (written whole)."),
    course_file: Optional[Path] = COURSE_FILE_OPT,
):
    """Write the grades that count (the newest override, else the latest attempt) as an LMS imports them."""
    import csv

    from ..course.term import canvas_ids, export_table
    from ..files import check_output, written_whole

    if fmt not in ("canvas", "moodle", "csv"):
        raise InputError(f"--format {fmt!r}: canvas, moodle or csv", code="E_USAGE")
    course, book = _book(course_file, readonly=True)
    try:
        check_output(out, [book.path, course.path, course.roster_path])
        header, rows, left_out = export_table(book, fmt, course)
        no_lms = [a["id"] for a in book.assignments() if a["id"] not in canvas_ids(course)]
    finally:
        book.close()
    with written_whole(out, newline="", code="E_OUTPUT", reads=[book.path, course.path, course.roster_path]) as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    typer.echo(f"wrote {out} ({fmt}: {len(rows)} row(s))")
    if fmt == "canvas" and no_lms:
        typer.echo(f"no canvas_id in {course.path} for: {', '.join(no_lms)} (Canvas makes a new assignment "
                   "for each; add canvas_id = N, the Canvas assignment's number, to its [[assignment]] to fill the "
                   "existing one)")
    if left_out:
        typer.echo(f"warning: {left_out} unmatched submission(s) left out (not on the roster, so {fmt} cannot take "
                   "them): protolab gradebook show lists them", err=True)
