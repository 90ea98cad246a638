"""'protolab artifact': content-addressed artifacts: put and show."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..errors import InputError
from .common import DB_OPT, _open, _print_json, _read_file


artifact_app = typer.Typer(help="Content-addressed artifacts (fact tables, drafts): put and show.", no_args_is_help=True)


@artifact_app.command("put")
def artifact_put(
    file: Path = typer.Argument(..., help="A JSON file (a fact table, a draft...)."),
    db: Path = DB_OPT,
    kind: str = typer.Option("document", "--kind", help="What it is, e.g. fact-table or draft."),
    task: Optional[str] = typer.Option(None, "--task", help="The task it belongs to."),
):
    """Store a JSON artifact content-addressed and print its ref (for evidence_refs)."""
    from ..envelope import loads_strict
    from ..runtime import put_artifact

    from ..files import check_output

    check_output(db, [file], option="--db")  # the run written is not the artifact read
    value = loads_strict(_read_file(file, "artifact file"), source=str(file))
    with _open(db) as store:
        ref = put_artifact(store, value, kind=kind, task_id=task)
    typer.echo(ref)


@artifact_app.command("show")
def artifact_show(ref: str = typer.Argument(..., help="sha256:..."), db: Path = DB_OPT):
    """Print a stored artifact's content."""
    with _open(db, readonly=True) as store:
        art = store.artifact(ref)
    if art is None:
        raise InputError(f"no artifact {ref} in {db}", code="E_UNKNOWN_ARTIFACT")
    _print_json(art)

