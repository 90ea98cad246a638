"""'protolab a2a': a run seen through A2A's objects (Agent Card, Task, Message, Part, Artifact)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from ..files import check_output, written_whole
from .common import DB_OPT, _open


a2a_app = typer.Typer(help="A2A: a run's tasks, messages and artifacts as A2A-shaped JSON.", no_args_is_help=True)


@a2a_app.command("export")
def a2a_export(
    db: Path = DB_OPT,
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the JSON here (default: stdout)."),
):
    """A run as A2A v1.0 objects: an Agent Card per agent, Tasks (states mapped), Messages with parts,
    Artifacts; the kit's own fields marked under its extension."""
    from ..a2a import A2AExport

    if output is not None:
        check_output(output, [db])  # before anything is read: never written over the run it reads
    with _open(db, readonly=True) as store:
        export = A2AExport(store)
        if output is None:
            export.write(sys.stdout)
            return
        with written_whole(output, reads=[db]) as fh:  # an interrupted export leaves no half a file
            export.write(fh)
    c = export.counts
    typer.echo(f"wrote {output}: {c['agentCards']} agent cards, {c['tasks']} tasks, {c['messages']} messages, "
               f"{c['artifacts']} artifacts (A2A 1.0 shapes; the kit's fields under its extension)")
