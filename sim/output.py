"""What a command prints, and how: the console, tables (drawn, or streamed when long), JSON, progress
bars on stderr, opening --db, and the invariants' verdicts. Typer-free, so the light commands
(:mod:`sim.views`) print through it without loading the command line; :mod:`sim.cli.common` re-exports
it for the Typer commands. Rich is imported inside the functions that draw, never at import time."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

#: The width of output that is not a terminal (a file, a pipe) when the caller asks for it wide: no line
#: is wrapped or cut to fit a screen nobody is looking at.
WIDE = 10_000


def _console(wide: bool = False):
    """The console of stdout. ``wide``: when stdout is not a terminal (and COLUMNS does not say a width),
    lines are as long as they are (:data:`WIDE`) rather than wrapped at Rich's 80 columns."""
    # Rich here, not at the top: rich.console with the table, text and box modules took 62 ms of a light
    # command's start (best of 11, load 8 on 2 cores, 2026-12-07); --json and the errors draw nothing
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
    from .files import write_json_fields

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



def _open(db: Path, *, readonly: bool = False):
    """Open --db: read-only (no side files; works in a read-only folder) for commands that only read.
    A writer is refused a lab's simulator run (:func:`sim.runner.refuse_lab_run` says why)."""
    # the store here, not at the top: 105 ms in the same measurement; machine show without --db never opens one
    from .store import Store

    store = Store.open(db, readonly=readonly)
    if not readonly:
        from .runner import refuse_lab_run

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
    seen: dict[str, str] = {}  # each cell's text read once (a column is measured three or four times below)

    def plain(v) -> str:
        if isinstance(v, Text):
            return v.plain
        text = str(v)
        if text not in seen:
            try:
                seen[text] = Text.from_markup(text).plain
            except Exception:  # not markup after all: as written
                seen[text] = text
        return seen[text]

    @functools.cache
    def widest(i: int) -> int:
        return max([len(columns[i])] + [max((len(x) for x in plain(r[i]).split("\n")), default=0)
                                         for r in rows if i < len(r) and r[i] is not None])

    @functools.cache
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


class _NoBar(contextlib.AbstractContextManager):
    """A progress bar that is not drawn (stderr is not a terminal, or nobody asked for one)."""

    def add_task(self, *_args, **_kw) -> int:
        return 0

    def update(self, *_args, **_kw) -> None:
        pass

    def __exit__(self, *_exc) -> None:
        return None


def _bar(enabled: bool = True, **kw):
    """:func:`_progress`, or when Rich would not draw it (stderr is not a terminal) a bar that loads nothing:
    rich.progress is 11 ms of a light command's start (load 8, 2026-12-07) for a bar nobody sees."""
    if not enabled or not (sys.stderr.isatty() or "FORCE_COLOR" in os.environ or "TTY_COMPATIBLE" in os.environ):
        return _NoBar()
    return _progress(enabled, **kw)


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
    with _bar(show, redirect_stdout=False) as bar:
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
    from .invariants import check as run_checks  # (49 ms in the same measurement: only check judges)

    with _bar(show) as bar:
        return run_checks(store, progress=judging_step(bar))


def _mark(ok: bool) -> str:
    return "[green]holds[/]" if ok else "[bold red]BROKEN[/]"


def judging_step(bar):
    """The ``progress`` callback of a sharded invariant check, drawn on ``bar`` (its task added at the
    first call, when the total is known)."""
    job = None

    def step(done: int, total: int) -> None:
        nonlocal job
        if job is None:
            job = bar.add_task("judging the invariants, 500 tasks at a time", total=total)
        bar.update(job, completed=done)

    return step
