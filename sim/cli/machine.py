"""'protolab machine': task state machines: show, check and load versions."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..files import not_a_file
from .. import views
from .common import DB_OPT, JSON_OPT, _open, _resolve


def _machine_file(file: Path) -> Path:
    """The machine file given, refused at once when it is a folder, a FIFO or a device (E_NOT_A_FILE)."""
    path = _resolve(file)
    if (special := not_a_file(path, "machine file")) is not None:
        raise special
    return path


machine_app = typer.Typer(help="Task state machines: show, check and load versions.", no_args_is_help=True)


@machine_app.command("show")
def machine_show(
    db: Optional[Path] = typer.Option(None, "--db", help="Show the versions loaded in this database."),
    version: Optional[str] = typer.Option(None, "--version", help="Only this machine version."),
    as_json: bool = JSON_OPT,
):
    """The allowlist: every allowed move, the roles that may make it, and whether the move is the
    seed's (its state machine) or the kit's own addition."""
    views.machine_show(db, version, as_json)


@machine_app.command("check")
def machine_check(file: Path = typer.Argument(..., help="A machine file (TOML).")):
    """Validate a machine file without loading it."""
    from ..machine import load_rulebook

    rb = load_rulebook(_machine_file(file))
    typer.echo(f"{file}: machine {rb.version}, {len(rb.rules)} allowed moves")


@machine_app.command("load")
def machine_load(file: Path = typer.Argument(..., help="A machine file (TOML) with a new version."), db: Path = DB_OPT):
    """Load a new machine version: new tasks use it; existing tasks keep theirs."""
    from ..machine import load_rulebook

    from ..files import check_output

    check_output(db, [file], option="--db")  # the run written is not the machine read
    rb = load_rulebook(_machine_file(file))
    with _open(db) as store:
        with store.transaction():
            store.advance()
            store.load_machine(rb, description=f"loaded from {file.name}")
    typer.echo(f"loaded {rb.version} ({len(rb.rules)} moves) into {db}; new tasks use it, existing tasks keep their version")

