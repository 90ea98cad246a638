"""'protolab machine': task state machines: show, check and load versions."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..errors import InputError
from ..files import not_a_file
from .common import output_rows, DB_OPT, JSON_OPT, _console, _open, _print_json, _resolve


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
    from ..machine import A2A_EXTENSION_STATES, A2A_NOTES, A2A_STATE, TaskState, default_rulebook, move_source

    if db is None:
        rb = default_rulebook()
        rules = [{"machine_version": r.machine_version, "from_state": r.from_state.value, "to_state": r.to_state.value,
                  "roles": ",".join(r.roles), "reason": r.reason} for r in rb.rules]
        current = rb.version
    else:
        store = _open(db, readonly=True)
        try:
            rules, current = store.transition_rules(), store.current_machine
        finally:
            store.close()
    if version:
        rules = [r for r in rules if r["machine_version"] == version]
        if not rules:
            raise InputError(f"machine version {version!r} is not loaded", code="E_UNKNOWN_MACHINE")
    rules = [{**r, "source": move_source(r["from_state"], r["to_state"])} for r in rules]
    a2a = {s.value: A2A_STATE[s] for s in TaskState}
    if as_json:
        _print_json({"current": current, "rules": rules, "a2a": a2a,
                     "a2a_notes": {s.value: A2A_NOTES[s] for s in TaskState if s in A2A_NOTES},
                     "a2a_extensions": [s.value for s in TaskState if s in A2A_EXTENSION_STATES]})
        return
    con = _console()
    kit = sum(r["source"] == "kit" for r in rules)
    output_rows(f"Transition rules (new tasks use {current})", ["machine", "from", "to", "roles", "source", "reason"],
                [[r["machine_version"], r["from_state"], r["to_state"], r["roles"].replace(",", ", "), r["source"],
                  r["reason"]] for r in rules], optional=("machine",), con=con,
                caption=("source: seed, a move of the seed's state machine; kit, a move beyond it that this kit (or "
                         f"the table's author) added: {kit} here" if kit else
                         "source: every move here is one of the seed's state machine (none is the kit's own)"))
    output_rows("A2A v1.0 export ('protolab a2a export')", ["state", "A2A task state", "note"],
                [[s.value + (" *" if s in A2A_EXTENSION_STATES else ""), A2A_STATE[s], A2A_NOTES.get(s, "")]
                 for s in TaskState],
                caption="* a course extension: A2A defines no such state. The export keeps the kit's own state in "
                        "each task's metadata under the kit's extension.", con=con)


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

