"""'protolab a2a': a run seen through A2A's objects (Agent Card, Task, Message, Part, Artifact)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer

from ..errors import InputError
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

    with _open(db, readonly=True) as store:
        export = A2AExport(store)
        if output is None:
            export.write(sys.stdout)
            return
        # beside the destination, renamed over it when whole: an interrupted export leaves no half a file
        tmp = output.with_name(f".{output.name}.partial-{os.getpid()}")
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                export.write(fh)
            os.replace(tmp, output)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise InputError(f"cannot write {output}: {e.strerror}", code="E_FILE_WRITE") from None
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    c = export.counts
    typer.echo(f"wrote {output}: {c['agentCards']} agent cards, {c['tasks']} tasks, {c['messages']} messages, "
               f"{c['artifacts']} artifacts (A2A 1.0 shapes; the kit's fields under its extension)")
