"""The CSV gradebook: one row per student, merged into the file it is written over.

Columns: ``student``, ``score``, ``max``, one per rule headed ``NAME /POINTS`` (its weight in the
rubric, so the file says what each rule was worth), ``note`` (why a submission could not be graded, or
the cap that lowered its score) and ``history`` (earlier scores of that student, newest first).

Writing onto an existing gradebook of the same exercise replaces the rows of the students just graded
and keeps every other row as it was: ``grade 1 class/alice --csv grades.csv`` regrades alice alone. The
row replaced leaves its score in ``history`` (``82/110 until 2026-12-07T09:14Z``). A file that is not
such a gradebook, or one whose other rows were graded under other rules or weights, is refused before
anything is graded (E_GRADEBOOK) and left as it was. The new file is written beside it, read back and
compared with what was meant, and only then renamed over it: never half a gradebook.

Every text cell is cleaned and neutralised against spreadsheet formulas
(:func:`sim.course.safetext.csv_cell`); numeric columns are plain numbers.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..errors import InputError
from ..files import written_whole
from .safetext import csv_cell

__all__ = ["Gradebook", "read_gradebook", "check_gradebook", "write_gradebook", "rule_columns", "zero_reason"]

_HEAD = ["student", "score", "max"]
_WEIGHT = re.compile(r"^(?P<name>.+) /(?P<points>[0-9.]+)$")


def _num(x) -> str:
    return f"{x:g}"


def rule_columns(tests) -> list[str]:
    """The rule columns of a gradebook of ``tests`` (Tests or TestResults): ``NAME /POINTS``."""
    return [f"{t.name} /{_num(t.max_points if hasattr(t, 'max_points') else t.points)}" for t in tests]


@dataclass
class Gradebook:
    path: Path
    header: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)

    @property
    def rules(self) -> list[str]:
        """The rule columns as written (``NAME /POINTS``, or a bare name in an older gradebook)."""
        end = self.header.index("note") if "note" in self.header else len(self.header)
        return self.header[3:end]


def _refuse(path: Path, why: str) -> InputError:
    return InputError(f"{path}: {why}; nothing was graded or written (name a new --csv file, or that exercise's "
                      "gradebook)", code="E_GRADEBOOK")


def read_gradebook(path: Path) -> Gradebook | None:
    """The gradebook at ``path``, checked; None when there is no file. E_GRADEBOOK when it is not one."""
    path = Path(path)
    if not path.exists() or path.is_dir():  # nothing to merge into (a folder: the write says it cannot)
        return None
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise _refuse(path, f"is not UTF-8 text (byte {e.start}), so not a protolab gradebook") from None
    except OSError as e:
        raise _refuse(path, f"cannot be read ({e.strerror or e})") from None
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as e:
        raise _refuse(path, f"is not a CSV file ({e})") from None
    if not rows:
        raise _refuse(path, "is empty, not a protolab gradebook")
    header = rows[0]
    if header[:3] != _HEAD or "note" not in header[3:]:
        raise _refuse(path, f"is not a protolab gradebook (its header is {', '.join(header[:4])}..., a gradebook's "
                            "is student, score, max, one column per rule, note)")
    for i, row in enumerate(rows[1:], 2):
        if len(row) != len(header):
            raise _refuse(path, f"line {i} has {len(row)} cells where its header has {len(header)}")
    return Gradebook(path, header, rows[1:])


def _bare(column: str) -> str:
    m = _WEIGHT.match(column)
    return m.group("name") if m else column


def check_gradebook(book: Gradebook | None, tests, students) -> None:
    """Refuse (E_GRADEBOOK) to merge the grades of ``students`` under ``tests`` into ``book`` when a row
    it keeps was graded under other rules or other weights."""
    if book is None:
        return
    want = rule_columns(tests)
    if book.rules == want:
        return
    if [_bare(c) for c in book.rules] != [_bare(c) for c in want]:
        raise _refuse(book.path, f"its rows were graded on other rules ({', '.join(map(_bare, book.rules[:4]))}"
                                 f"{' ...' if len(book.rules) > 4 else ''}), not this exercise's "
                                 f"({', '.join(map(_bare, want[:4]))}{' ...' if len(want) > 4 else ''})")
    kept = [r for r in book.rows if r[0] not in {csv_cell(s) for s in students}]
    if not kept:  # other weights, but every row of it is graded again now
        return
    if any(_WEIGHT.match(c) for c in book.rules):
        raise _refuse(book.path, f"its rows were graded with other weights ({', '.join(book.rules)}; now "
                                 f"{', '.join(want)}): regrade the whole class into it, or grade with the rubric it "
                                 "was written with (--rubric)")
    total = sum(float(_WEIGHT.match(c).group("points")) for c in want)
    if any(_safe_float(r[2]) != total for r in kept):
        raise _refuse(book.path, f"its rows were graded out of another total (now {_num(total)}): regrade the whole "
                                 "class into it, or grade with the rubric it was written with (--rubric)")


def _safe_float(x: str):
    try:
        return float(x)
    except ValueError:
        return None


def _note(report) -> str:
    """Why the row could not be graded, or how a cap set its score; and the warning of a row graded
    without an operating-system sandbox (sim.course.sandbox.warning), on every such row."""
    from .sandbox import warning

    capped = getattr(report, "capped", None)
    why = report.problem or (f"capped at {_num(capped[0])}% of the total: {', '.join(capped[1])} broke"
                             if capped else "") or zero_reason(report)
    flags = list(getattr(report, "flags", None) or ())  # similarity (sim.course.similarity), when it was asked for
    return "; ".join(x for x in (why, *flags, warning(report.sandbox)) if x)


def zero_reason(report) -> str:
    """Why a report scored 0, in one line (empty when it did not): the one cause every failing test
    gave (the file does not import, the sandbox refused what the code did, it ran out of memory), or
    the first broken rule and how many broke."""
    if report.score > 0 or not report.results:
        return ""
    failed = [r for r in report.results if not r.passed]
    if not failed:
        return ""
    firsts = [(r.message or "").splitlines()[0] if r.message else "" for r in failed]
    if len(set(firsts)) == 1 and firsts[0]:
        return f"0: every test failed for one reason: {firsts[0]}"
    first = next(((r, m) for r, m in zip(failed, firsts) if m), (failed[0], "no reason given"))
    return (f"0: {len(failed)} of {len(report.results)} rules broke, none earned points; first: {first[0].name}: "
            f"{first[1]}")


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%MZ")


def write_gradebook(path: Path, subs, reports, *, when: str | None = None, reads=()) -> dict:
    """Write the gradebook of ``reports`` (one per submission of ``subs``) to ``path``, merged into the
    gradebook already there (see the module's text). Returns what happened: ``{"replaced": [...],
    "added": [...], "kept": N}``."""
    path = Path(path)
    results = reports[0].results if reports else []
    want = rule_columns(results)
    header = [*_HEAD, *want, "note", "history"]
    book = read_gradebook(path)
    check_gradebook(book, results, [s.name for s in subs])
    when = when or _now()
    fresh: dict[str, list] = {}
    for s, r in zip(subs, reports):
        by = {x.name: x.points for x in r.results}
        fresh[csv_cell(s.name)] = [csv_cell(s.name), _num(r.score), _num(r.max_score),
                                   *[_num(by.get(x.name, 0)) for x in results], csv_cell(_note(r))]
    rows, replaced, kept = [], [], 0
    if book is not None:
        old_history = book.header.index("history") if "history" in book.header else None
        for old in book.rows:
            name = old[0]
            if name not in fresh:  # another student's row: as it was, under the new header's columns
                rows.append(_reshaped(old, book.header, header))
                kept += 1
                continue
            if name in replaced:  # a second row of one student: the first one's place holds the new grade
                continue
            before = old[old_history] if old_history is not None else ""
            entry = f"{old[1]}/{old[2]} until {when}"
            rows.append([*fresh[name], csv_cell("; ".join(x for x in (entry, before) if x))])
            replaced.append(name)
    added = [n for n in fresh if n not in replaced]
    rows += [[*fresh[n], ""] for n in added]
    with written_whole(path, newline="", code="E_OUTPUT", reads=reads, option="--csv") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
        f.flush()
        with open(f.name, newline="", encoding="utf-8") as back:  # read back what was written: whole, as meant
            if list(csv.reader(back)) != [header, *[[str(c) for c in r] for r in rows]]:
                raise InputError(f"{path}: the gradebook written did not read back as written; the old file "
                                 "was left as it was", code="E_OUTPUT")
    return {"replaced": replaced, "added": added, "kept": kept}


def _reshaped(row: list[str], old: list[str], new: list[str]) -> list[str]:
    """A kept row under the new header: its cells by column (a rule column by its name), a missing one empty."""
    by = {_bare(c): v for c, v in zip(old, row)}
    return [by.get(_bare(c), "") for c in new]
