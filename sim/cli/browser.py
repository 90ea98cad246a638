"""A run in a browser: timeline (one self-contained HTML page) and browse (Datasette, read-only).
The served TUI is '--serve' on 'demo' and 'tui' (run.py), over :mod:`sim.web.serve`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from ..errors import InputError
from ..files import check_output
from .common import _open

commands = typer.Typer()  # this group's top-level commands (sim/cli/__init__.py adds them to the app)

PORT_OPT = typer.Option(8000, "--port", min=0, max=65535, help="The port on localhost (0: any free port).")
ALLOW_HOST_OPT = typer.Option([], "--allow-host", metavar="NAME", help="Answer requests that name this host too "
                              "(repeatable; for a classroom behind a proxy or tunnel). Only localhost by default.")


@commands.command()
def timeline(
    db: Optional[List[Path]] = typer.Option(None, "--db", help="A run (default protolab.db). Twice: two runs side "
                                            "by side, row n beside row n (the naive/safe regression)."),
    out: Path = typer.Option(Path("timeline.html"), "--out", "-o", help="The page to write."),
    check: bool = typer.Option(True, "--check/--no-check", help="Mark broken invariants (--no-check: skip the "
                               "check, for a very big run)."),
    title: Optional[str] = typer.Option(None, "--title", help="The page's title."),
    first: Optional[int] = typer.Option(None, "--from", metavar="N", help="Show a window from delivery N "
                                        "(a run of more than 10,000 deliveries is always shown a window at a time)."),
    around: Optional[int] = typer.Option(None, "--around", metavar="DELIVERY", help="Show a window with this "
                                         "delivery in its middle (default for a big run: around the first delivery "
                                         "where an invariant broke, or from the start)."),
    count: Optional[int] = typer.Option(None, "--count", metavar="K", help="Deliveries in the window (default "
                                        "2,000; at most 10,000)."),
):
    """One self-contained HTML page of a run: lanes per agent, an arrow per delivery coloured by the
    intake's decision, faults, task states and broken invariants; click a row for its envelope and events.
    A big run is shown a window of deliveries at a time; the page says which and how to see another."""
    import shlex

    from .. import timeline as tl
    from .common import _progress
    from ..output import judging_step

    dbs = list(db or [Path("protolab.db")])
    if len(dbs) > 4:
        raise InputError(f"{len(dbs)} runs given; the page shows at most 4 side by side", code="E_USAGE")
    if not out.parent.exists() or not out.parent.is_dir():
        raise InputError(f"folder {out.parent} does not exist; choose another -o", code="E_OUTPUT")
    if out.exists() and out.is_dir():
        raise InputError(f"{out} is a folder; -o takes a file name such as run.html", code="E_OUTPUT")
    check_output(out, dbs)  # before anything is read: never written over a run it reads
    stores = []
    try:
        for d in dbs:  # every file checked before anything is read or written
            stores.append(_open(d, readonly=True))
        again = " ".join(["protolab timeline"] + [f"--db {shlex.quote(str(d))}" for d in dbs]
                         + [f"-o {shlex.quote(str(out))}"] + ([] if check else ["--no-check"]))
        with _progress() as bar:
            step = judging_step(bar)
            pictures = tl.read_runs(stores, [_label(d, s, dbs) for d, s in zip(dbs, stores)], check=check,
                                    first=first, around=around, count=count, again=again, progress=step)
    finally:
        for s in stores:
            s.close()
    size = tl.write(pictures, out, reads=dbs, title=title or "protolab timeline: " + " beside ".join(p.label for p in pictures))
    w = pictures[0].window
    if w is None:
        rows = ", ".join(f"{p.label}: {len(p.rows)} deliveries" for p in pictures)
    else:
        rows = (f"deliveries {w.first:,} to {w.last:,} of {max(p.total or 0 for p in pictures):,}, {w.why}; "
                "the page says how to see another window")
    typer.echo(f"wrote {out} ({size / 1024:,.0f} KB; {rows}): open it in a browser, no network needed")


def _label(db: Path, store, dbs: list[Path]) -> str:
    names = [d.name for d in dbs]
    name = db.name if names.count(db.name) == 1 else str(db)
    policy = store.get_meta("policy")
    return f"{name} ({policy})" if policy else name


@commands.command()
def browse(
    path: Optional[Path] = typer.Argument(None, metavar="[FILE]", help="A run or a course gradebook (the same as --db)."),
    db: Optional[Path] = typer.Option(None, "--db", help="The run (default protolab.db) or course gradebook to browse "
                                                         "(never written)."),
    port: int = PORT_OPT,
    allow_host: List[str] = ALLOW_HOST_OPT,
):
    """Datasette over a run, read-only, on localhost: every table described, facets on decision,
    type, task and state, canned queries (every delivery of one intent, tasks in needs_review with
    both payloads, effects per key, the transitions of one task). Over a course gradebook
    (gradebook.db): attempts, overrides, the roster and the grades that count, with facets on
    assignment, late days and sandbox, and canned queries (zeros and why, unmatched, late). Ctrl-C stops it."""
    from ..store.gradebook import is_gradebook, open_gradebook
    from ..web import datasette
    from ..web.guard import check_allowed_host

    if path is not None and db is not None:
        raise InputError("name the file once: protolab browse FILE, or --db FILE", code="E_USAGE")
    db = path or db or Path("protolab.db")
    names = [check_allowed_host(n) for n in allow_host]
    if is_gradebook(db):
        open_gradebook(db, readonly=True).close()  # checked: a newer or damaged gradebook is one line and exit 2
        store = None
    else:
        store = _open(db, readonly=True)  # a protolab run this program knows, or one line and exit 2
    try:
        def ready(url: str) -> None:
            print(f"browsing {db} (read-only) at {url}  (Ctrl-C stops it)", flush=True)

        datasette.serve(db, store, port=port, ready=ready, allow_hosts=names)
    finally:
        if store is not None:
            store.close()
    sys.stderr.write("stopped\n")
