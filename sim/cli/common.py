"""What every command group shares: the options (--db, --json, --course, a scenario and its faults and
plugged files), opening --db, reading input files, the console, tables (drawn, or streamed when long),
JSON, progress bars on stderr, and signals. Nothing here imports the store or Rich at import time."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from pathlib import Path
from collections.abc import Mapping
from typing import Optional

import typer

from ..errors import InputError
from ..files import not_a_file

from ..faults import FAULTS as _FAULT_NAMES  # (the help lists the registry's names)


DB_OPT = typer.Option("protolab.db", "--db", help="The protolab database file.")


JSON_OPT = typer.Option(False, "--json", help="Print JSON instead of tables.")


COURSE_OPT = typer.Option(None, "--course", metavar="DIR", help="(Instructors) the course: your protolab checkout, "
                          "the folder holding pyproject.toml, exercises/ and solutions/ (default: the current folder "
                          "or its parents).")


#: The width of output that is not a terminal (a file, a pipe) when the caller asks for it wide: no line
#: is wrapped or cut to fit a screen nobody is looking at.
WIDE = 10_000


def _console(wide: bool = False):
    """The console of stdout. ``wide``: when stdout is not a terminal (and COLUMNS does not say a width),
    lines are as long as they are (:data:`WIDE`) rather than wrapped at Rich's 80 columns."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich mutes stdout and exits 1; a closed pipe (`protolab run | head -1`) is the reader
            # having had enough: main() ends quietly with 0, as `events | head` does
            super_ = super()
            try:
                super_.on_broken_pipe()
            except SystemExit:
                raise BrokenPipeError from None

    width = None
    if wide and not os.environ.get("COLUMNS") and not sys.stdout.isatty():
        width = WIDE
    return _Console(highlight=False, soft_wrap=False, emoji=False, width=width)


def _json_default(value):
    """What JSON makes of a typed row (a stored event is a read-only mapping of its columns)."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _print_json(value) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=_json_default) + "\n")


def _print_json_rows(rows) -> None:
    """A JSON array written row by row as ``rows`` yields them: the bytes ``_print_json(list(rows))``
    would write, in flat memory (a run's log can hold millions of rows)."""
    out = sys.stdout.write
    first = True
    for r in rows:
        body = json.dumps(r, indent=2, ensure_ascii=False, default=_json_default).replace("\n", "\n  ")
        out(("[\n  " if first else ",\n  ") + body)
        first = False
    out("[]\n" if first else "\n]\n")


def _print_json_fields(fields) -> None:
    """A JSON object written field by field: ``fields`` is ``(key, value)`` pairs, a value that is
    an iterator of rows being written row by row as it yields them. The bytes ``_print_json(dict(...))``
    would write, in flat memory (``state --json`` of a million tasks)."""
    from ..files import write_json_fields

    write_json_fields(sys.stdout.write, fields, default=_json_default)


def show_view(con, title: str, columns: list[str], rows, count: int, *, caption: str | None = None,
              optional: tuple[str, ...] = ()) -> None:
    """One view of ``count`` rows, ``rows`` an iterator: drawn as a table when it is short, streamed
    as plain columns as it is read when it is long (flat memory; the widths from its first rows)."""
    if count > TABLE_ROWS:
        con.file.flush()
        sys.stdout.flush()
        _stream_table(f"{title} ({count})", columns, rows)
        if caption:
            sys.stdout.write(caption + "\n")
        sys.stdout.write("\n")
    else:
        con.print(_table(title, columns, list(rows), caption=caption, optional=optional))


#: A view with more rows than this is streamed as plain aligned text instead of drawn as one table
#: (a table measures every row before it prints the first; a big run's log has millions).
TABLE_ROWS = 2000

_ROWS = object()  # output_rows' default JSON: the rows themselves


def output_rows(title: str, columns: list[str], rows: list[list], *, as_json: bool = False, data=_ROWS,
                caption: str | None = None, optional: tuple[str, ...] = (), stream: bool = False, con=None) -> None:
    """The one way a command prints rows: a table titled ``title`` (see :func:`_table`: columns wrap at
    words; ``optional`` ones are left out, and said so, when it would not fit), or with ``as_json`` the
    command's JSON instead, ``data`` (default: one object per row, keyed by column), as ``_print_json``
    writes it. ``stream``: a view that may be long is streamed as plain columns past ``TABLE_ROWS`` rows."""
    if as_json:
        _print_json([dict(zip(columns, r)) for r in rows] if data is _ROWS else data)
        return
    con = con or _console()
    if stream:
        _show(con, title, columns, rows, caption=caption, optional=optional)
    else:
        con.print(_table(title, columns, rows, caption=caption, optional=optional))


def _show(con, title: str, columns: list[str], rows: list[list], **kw) -> None:
    """One view's table: drawn when it is short, streamed as plain columns when it is long."""
    if len(rows) > TABLE_ROWS:
        sys.stdout.flush()
        _stream_table(f"{title} ({len(rows)})", columns, rows, sample=len(rows))  # in hand: measure them all
        if kw.get("caption"):
            sys.stdout.write(kw["caption"] + "\n")
        sys.stdout.write("\n")
    else:
        con.print(_table(title, columns, rows, **kw))


def _stream_table(title: str, columns: list[str], rows, widths: dict[str, int] | None = None, sample: int = 200) -> None:
    """Rows printed as they are read, in columns as wide as the first rows need or ``widths`` says
    (a wider value pushes its line out rather than being cut: nothing is hidden)."""
    from itertools import chain, islice

    def plain(v) -> str:
        if v is None:
            return ""
        s = str(v)
        # only a cell with a bracket can hold markup: the rest is printed as it is (parsing every
        # cell of a million rows as markup was most of a big table's time)
        return (_markup_plain(s) if "[" in s else s).replace("\n", " ")

    rows = iter(rows)
    head = [[plain(v) for v in r] for r in islice(rows, sample)]
    widths = [max([len(c), (widths or {}).get(c, 0)] + [len(r[i]) for r in head]) for i, c in enumerate(columns)]
    widths[-1] = 0  # the last column is never padded

    def line(cells) -> str:
        return " ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip() + "\n"

    out = sys.stdout.write
    out(f"{title}\n")
    out(line(columns))
    out(" ".join("-" * max(w, len(c)) for c, w in zip(columns, widths)) + "\n")
    for r in chain(head, ([plain(v) for v in r] for r in rows)):
        out(line(r))


@functools.lru_cache(maxsize=4096)
def _markup_plain(text: str) -> str:
    """A cell's text without its markup (``[green]holds[/]``: ``holds``), as the drawn table shows it
    (no emoji codes replaced, as :func:`_console` draws); text that is not markup after all, as written.
    Cached: a long view repeats a few styled cells (states, decisions) a million times."""
    from rich.text import Text

    try:
        return Text.from_markup(text, emoji=False).plain
    except Exception:
        return text


def _resolve(path: Path) -> Path:
    """A relative path that does not exist here but names a shipped file (data/..., labs/...)
    resolves to the copy inside the installed package, so samples work from any folder."""
    if path.is_absolute() or path.exists() or not path.parts or path.parts[0] not in ("data", "labs", "exercises"):
        return path
    from ..resources import shipped

    candidate = shipped(*path.parts)
    return candidate if candidate.exists() else path


def _read_file(path: Path, what: str) -> bytes:
    if str(path) == "-":
        return sys.stdin.buffer.read()
    path = _resolve(path)
    special = not_a_file(path, what)
    if special is not None and not path.is_dir():  # a FIFO or a device: refused at once, never waited on
        raise special
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{what} {path} does not exist", code="E_FILE_MISSING") from None
    except IsADirectoryError:
        raise InputError(f"{what} {path} is a folder, not a file", code="E_FILE_MISSING") from None
    except OSError as e:
        raise InputError(f"cannot read {what} {path}: {e.strerror}", code="E_FILE_MISSING") from None


def _open(db: Path, *, readonly: bool = False):
    """Open --db: read-only (no side files; works in a read-only folder) for commands that only read.
    A writer is refused a lab's simulator run (:func:`sim.runner.refuse_lab_run` says why)."""
    from ..store import Store

    store = Store.open(db, readonly=readonly)
    if not readonly:
        from ..runner import refuse_lab_run

        refuse_lab_run(db, store)
    return store


def _styled(text, styles) -> str:
    if text is None:
        return ""
    style = styles.get(str(text))
    return f"[{style}]{text}[/]" if style else str(text)


def _short(digest: str | None, hexchars: int = 8) -> str:
    """``sha256:6e1bdb2d…``: enough to tell digests apart on screen; --json has them whole."""
    if not digest:
        return ""
    keep = len("sha256:") + hexchars if digest.startswith("sha256:") else hexchars
    return digest[:keep] + "…" if len(digest) > keep + 1 else digest


def _digest_cell(digest: str, scheme: str) -> str:
    return _short(digest) + (" (jcs)" if scheme == "jcs-v2" else "")


def _plain(text: str):
    """``text`` as a table cell shown exactly (brackets and all, never read as markup)."""
    from rich.text import Text

    return Text(text)


def _table(title: str, columns: list[str], rows: list[list], *, caption: str | None = None,
           optional: tuple[str, ...] = (), width: int | None = None):
    """A plain table for the views. ``optional`` names columns, least important first, that are left
    out (and said so under the table) when the table would not fit the terminal or pipe width."""
    from rich import box
    from rich.measure import Measurement
    from rich.table import Table
    from rich.text import Text

    if optional:
        con = _console()
        t = _table(title, columns, rows, caption=caption)
        hidden: list[str] = []
        for name in optional:
            if Measurement.get(con, con.options.update_width(10_000), t).maximum <= con.width or name not in columns:
                break
            i = columns.index(name)
            columns = columns[:i] + columns[i + 1:]
            rows = [r[:i] + r[i + 1:] for r in rows]
            hidden.append(name)
            t = _table(title, columns, rows, caption=caption)
        if hidden:
            note = f"(narrow terminal: {', '.join(hidden)} not shown; --json has everything)"
            caption = f"{caption}\n{note}" if caption else note

    t = Table(
        title=title, title_justify="left", title_style="bold", caption=caption, caption_justify="left",
        box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1),
    )
    def plain(v) -> str:
        if isinstance(v, Text):
            return v.plain
        try:
            return Text.from_markup(str(v)).plain
        except Exception:  # not markup after all: as written
            return str(v)

    def widest(i: int) -> int:
        return max([len(columns[i])] + [max((len(x) for x in plain(r[i]).split("\n")), default=0)
                                         for r in rows if i < len(r) and r[i] is not None])

    def longest_word(i: int) -> int:
        return max([len(w) for r in rows if i < len(r) and r[i] is not None for w in plain(r[i]).split()]
                   + [len(w) for w in columns[i].split()] + [1])

    # a wrapping column keeps its longest word whole whenever the table can afford it
    n = len(columns)
    shorts = [i for i in range(n) if widest(i) <= 18]
    con = _console()
    width = width or con.width  # the console's the table is printed on, when it is not stdout's usual one
    probe = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    for _ in range(n):
        probe.add_column(width=1)
    overhead = Measurement.get(con, con.options.update_width(10_000), probe).maximum - n  # edges, gaps, padding
    floor = sum(widest(i) for i in shorts) + sum(longest_word(i) for i in range(n) if i not in shorts) + overhead
    fixed: dict[int, int] = {}
    natural = sum(widest(i) for i in range(n)) + overhead
    if floor <= width < natural:
        # too wide as it is: each wrapping column gets its longest word, then a share of what is left
        # in proportion to what it still lacks; Rich's own squeeze would cut words to fit
        wrap = [i for i in range(n) if i not in shorts]
        fixed = {i: longest_word(i) for i in wrap}
        spare = width - floor
        lack = {i: widest(i) - fixed[i] for i in wrap}
        total = sum(lack.values()) or 1
        for i in wrap:
            fixed[i] += min(lack[i], spare * lack[i] // total)
    for i, c in enumerate(columns):
        # Short columns (ids, codes, states) never wrap; a long one (free text, a list of roles, a key)
        # wraps at word boundaries, in the width worked out above when the table is too wide.
        short = widest(i) <= 18
        t.add_column(c, no_wrap=short, overflow="ellipsis" if short else "fold", width=fixed.get(i))
    for r in rows:
        # a Text cell is shown as it is (no markup: "[redacted]" stays); a str cell may carry markup
        t.add_row(*["" if v is None else v if isinstance(v, Text) else str(v) for v in r])
    return t


def _shipped_scenarios() -> str:
    """The shipped scenarios' names, read from the data folder (not a list kept by hand)."""
    from ..resources import shipped

    return ", ".join(sorted(p.stem for p in shipped("data", "scenarios").glob("*.toml")))


_SCENARIOS = _shipped_scenarios()


SCENARIO_ARG = typer.Argument("publish-report", help=f"A shipped scenario ({_SCENARIOS}) or a .toml file.")


FAULT_OPT = typer.Option(
    [], "--fault", "-f",
    help="NAME, NAME:M-3, NAME:task_result or NAME:0.1. Names: " + ", ".join(_FAULT_NAMES) + ". Repeat for more.",
)


DESIGN_OPT = typer.Option(None, "--design", help="An envelope design (.py: idempotency_key, payload, evidence_refs, "
                          "DIGEST_SCHEME) every agent send goes through, instead of the reference design.")


INTAKE_OPT = typer.Option(None, "--intake", help="An intake policy (.py defining decide(env, task, prior, rules, unresolved)).")


EFFECTS_OPT = typer.Option(None, "--effects", help="An effect-commit rule (.py defining effect_key(result, delivery_id)).")


MACHINE_OPT = typer.Option(None, "--machine", help="A transition table (.toml) for the run's tasks instead of task-v1.")


def _plugins(design=None, intake=None, effects=None, machine=None):
    """The files a run plugs in, checked (they load, they define what they must) before anything is written."""
    from ..plugins import Plugins

    p = Plugins(design=design, intake=intake, effects=effects, machine=machine)
    if p.any():
        p.load("safe")
    return p


def _load_scenario(scenario: str, tasks: Optional[int]):
    from dataclasses import replace

    from ..scenario import load_scenario

    # a shipped file named by its path in the checkout (data/scenarios/x.toml) works from any folder
    sc = load_scenario(str(_resolve(Path(scenario))) if scenario.endswith(".toml") else scenario)
    if tasks is not None:
        if sc.stress is None:
            raise InputError(f"--tasks applies to stress scenarios; {sc.name} has a fixed task list", code="E_USAGE")
        if tasks < 1:
            raise InputError("--tasks must be at least 1", code="E_USAGE")
        sc = replace(sc, stress=replace(sc.stress, tasks=tasks))
    return sc


def _progress(enabled: bool = True, *, redirect_stdout: bool = True):
    """A progress bar on stderr, only when stderr is a terminal (a pipe gets no stray lines).
    ``redirect_stdout`` off when the command's output goes to stdout while the bar runs (Rich would
    otherwise print it through the bar's console, on stderr)."""
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    console = Console(stderr=True)
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TextColumn("ETA"), TimeRemainingColumn(),
                    console=console, transient=True, disable=not (enabled and console.is_terminal),
                    redirect_stdout=redirect_stdout)


#: Rows a view streams before a progress bar is worth showing (about a second's reading and writing).
PROGRESS_ROWS = 20_000


@contextlib.contextmanager
def _rows_progress(total: int, what: str):
    """``counted(rows)``: ``rows`` passed through, counted on a progress bar on stderr while a long
    output (``total`` rows over :data:`PROGRESS_ROWS`) goes to a file or a pipe. Nothing is drawn
    when stdout is the terminal (the rows themselves show it) or stderr is not one."""
    show = total > PROGRESS_ROWS and not sys.stdout.isatty()
    with _progress(show, redirect_stdout=False) as bar:
        job = bar.add_task(what, total=total) if show else None
        done = 0  # over every view counted under this bar

        def counted(rows):
            nonlocal done
            if job is None:
                yield from rows
                return
            for r in rows:
                yield r
                done += 1
                if done % 1000 == 0:
                    bar.update(job, completed=done)
            bar.update(job, completed=done)

        yield counted


def _judged(store, show: bool):
    """The invariants' verdicts on ``store``; a big run (judged shard by shard) shows a progress bar."""
    from ..invariants import check as run_checks

    with _progress(show) as bar:
        job = None

        def step(done: int, total: int) -> None:
            nonlocal job
            if job is None:
                job = bar.add_task("judging the invariants, 500 tasks at a time", total=total)
            bar.update(job, completed=done)

        return run_checks(store, progress=step)


def _mark(ok: bool) -> str:
    return "[green]holds[/]" if ok else "[bold red]BROKEN[/]"


def _interactive() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty() and os.environ.get("TERM", "") != "dumb"


def _check_run_args(policy: str, faults) -> None:
    """Refuse an unknown policy or a malformed fault before anything is opened or written."""
    from ..faults import parse_fault
    from ..policy import get_policy

    get_policy(policy)
    for f in faults:
        parse_fault(f)


def _designs(design: list[Path]) -> list[Path]:
    if len(design) > 2:
        raise InputError("at most two --design files: one beside the reference, or two side by side", code="E_USAGE")
    for d in design:
        _plugins(design=d)  # load and check each before anything runs
    return list(design)


def _sides(designs: list[Path], policy: str = "safe") -> list[tuple[str, str, object]]:
    """(label, policy, plugins) of the two sides a comparison shows."""
    from ..plugins import Plugins

    if not designs:
        return [("safe", "safe", None), ("naive", "naive", None)]
    if len(designs) == 1:
        return [("reference design", policy, None), (designs[0].name, policy, Plugins(design=designs[0]))]
    a, b = designs
    la, lb = (a.name, b.name) if a.name != b.name else (str(a), str(b))
    return [(la, policy, Plugins(design=a)), (lb, policy, Plugins(design=b))]


_WITNESS_KEYS = (
    "problem", "task_id", "message_id", "key", "old_state", "new_state", "times_committed",
    "carried_lease_version", "current_lease_version", "ref",
)


def _witness_line(r) -> str:
    """The first witness, shortened to the fields a person reads first (--json has all of it)."""
    if r.ok or not r.witnesses:
        return ""
    w = r.witnesses[0]
    parts = [f"{k}={w[k]}" for k in _WITNESS_KEYS if w.get(k) is not None and not isinstance(w[k], (dict, list))]
    if not parts:
        parts = [f"{k}={v}" for k, v in list(w.items())[:4] if not isinstance(v, (dict, list))]
    more = f" (+{len(r.witnesses) - 1} more)" if len(r.witnesses) > 1 else ""
    return ", ".join(parts) + more


def _click_errors(name: str) -> tuple[type, ...]:
    """Click's exception class ``name`` and Typer's vendored copy of it (Typer >= 0.29 has its own)."""
    import click

    mods = [click.exceptions]
    try:
        import typer._click.exceptions as vendored  # type: ignore[import-not-found]

        mods.append(vendored)
    except ImportError:
        pass
    return tuple(getattr(m, name) for m in mods if hasattr(m, name))


def _course(course: Optional[Path]) -> None:
    """--course DIR: the course's solutions (hidden tests, model answers) from now on in this command."""
    if course is not None:
        from ..course.catalog import use_course

        use_course(course)


@contextlib.contextmanager
def _signals_deferred():
    """Hold SIGINT, SIGTERM and SIGHUP until the block ends (one delivery: its commit and its
    outcome stay together); a signal sent meanwhile is raised again as soon as the block ends.

    Held by a handler, not by a signal mask: a mask holds a signal only in the thread that sets it, and
    the kernel gives a signal sent to the process to any thread not holding it (a library's thread, such
    as a BLAS pool's), whose arrival Python then handles in the main thread at once, in the middle of the
    block. A Python handler runs in the main thread whichever thread received the signal."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():  # (handlers are the main thread's)
        yield
        return
    pending: list[int] = []

    def hold(signum, _frame):
        pending.append(signum)

    held = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {}
    try:
        for s in held:
            old[s] = signal.signal(s, hold)
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        if pending:
            signal.raise_signal(pending[0])  # handled now, as it would have been (KeyboardInterrupt...)


def _interrupted(e: BaseException, message: str):
    """Raise :class:`~sim.errors.Interrupted` for a signal that stopped a command (exit 128 + n)."""
    import signal

    from ..errors import Interrupted, signal_of

    signum = signal_of(e) or int(signal.SIGINT)
    raise Interrupted(message.replace("{sig}", signal.Signals(signum).name), signum=signum) from None

