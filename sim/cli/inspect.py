"""What a run holds, each kind of data on its own, and judged: messages, events, state, check, replay,
compare."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..palette import STATE_STYLE as _STATE_STYLE
from .. import views
from .common import DB_OPT, FAULT_OPT, JSON_OPT, SCENARIO_ARG, _check_run_args, _console, _designs, _load_scenario, _mark, _open, _print_json, output_rows, _sides, _styled, _witness_line

commands = typer.Typer()  # this group's top-level commands (sim/cli/__init__.py adds them to the app)


@commands.command()
def messages(db: Path = DB_OPT, as_json: bool = JSON_OPT, task: Optional[str] = typer.Option(None, help="Only this task."),
             payloads: bool = typer.Option(False, "--payloads", help="Print each envelope's payload as the log keeps it "
                                           "(sensitive values the run declared show [redacted] under the safe policy).")):
    """The message log: every envelope, and every delivery with its decision."""
    views.messages(db, as_json, task, payloads)


@commands.command()
def events(
    db: Path = DB_OPT,
    as_json: bool = JSON_OPT,
    task: Optional[str] = typer.Option(None, help="Only this task."),
    type_: Optional[str] = typer.Option(None, "--type", help="Only this event type."),
):
    """The event log: append-only facts, numbered, written only by the runtime."""
    views.events(db, as_json, task, type_)


@commands.command()
def state(db: Path = DB_OPT, as_json: bool = JSON_OPT, task: Optional[str] = typer.Option(None, help="Only this task.")):
    """Authoritative state: tasks, transitions, intents, effects, artifacts, approvals, budget."""
    views.state(db, as_json, task)


#: A run with more deliveries than this is compared without exporting its conversation (a stress run).
COMPARE_TRACE_UP_TO = 20_000


def _conversation_of(store) -> dict | None:
    """The run exported as a trace and validated: {valid, codes, first} (None for a run too big to export
    here: 'protolab trace export' then 'trace validate' do it on a file)."""
    if store.next_delivery_id() - 1 > COMPARE_TRACE_UP_TO:
        return None
    from ..conversation import export_trace
    from ..protocol.trace import validate

    report = validate(export_trace(store))
    first = report.errors[0] if report.errors else None
    return {"valid": report.valid, "codes": list(report.codes),
            "first": f"{first.code} on {first.message_id}" if first is not None else ""}


def _conversation_mark(c: dict) -> str:
    return "[green]valid[/]" if c["valid"] else "[bold red]" + ", ".join(c["codes"]) + "[/]"


@commands.command()
def compare(
    scenario: str = SCENARIO_ARG,
    seed: Optional[int] = typer.Option(None, "--seed", min=0, help="The seed both runs use."),
    fault: List[str] = FAULT_OPT,
    as_json: bool = JSON_OPT,
    design: List[Path] = typer.Option([], "--design", help="An envelope design (.py) beside the reference design; "
                                      "twice: two designs side by side (both under the safe runtime)."),
    tasks: Optional[int] = typer.Option(None, "--tasks", help="For stress scenarios: how many tasks."),
):
    """The same seed and faults under the safe and the naive policy (or two envelope designs), side by side."""
    from ..invariants import check
    from ..runner import run_scenario, summarize

    sc = _load_scenario(scenario, tasks)
    _check_run_args("safe", fault)
    sides = _sides(_designs(list(design)))
    import tempfile

    out = {}
    with tempfile.TemporaryDirectory(prefix="protolab-compare-") as scratch:
        for k, (label, pol, plugins) in enumerate(sides):
            # each side on a scratch file, not in memory: a big run keeps memory flat
            store = run_scenario(sc, policy=pol, seed=seed, faults=fault, plugins=plugins,
                                 db=Path(scratch) / f"side-{k}.db")
            try:
                results = check(store)
                summary = summarize(store, results)
                summary["conversation"] = _conversation_of(store)
                out[label] = (summary, results)
            finally:
                store.close()
    (la, _pa, _xa), (lb, _pb, _xb) = sides
    safe, naive = out[la][0], out[lb][0]
    rows = []
    if "tasks" in safe and "tasks" in naive:
        for t in sorted(set(safe["tasks"]) | set(naive["tasks"])):
            a, b = safe["tasks"].get(t, "-"), naive["tasks"].get(t, "-")
            rows.append([f"task {t}", _styled(a, _STATE_STYLE), _styled(b, _STATE_STYLE), "" if a == b else "<- differs"])
    else:  # a big run: how many tasks ended in each state
        for st in sorted(set(safe["tasks_by_state"]) | set(naive["tasks_by_state"])):
            a, b = safe["tasks_by_state"].get(st, 0), naive["tasks_by_state"].get(st, 0)
            rows.append([f"tasks {_styled(st, _STATE_STYLE)}", a, b, "" if a == b else "<- differs"])
    rows.append(["effects committed", safe["effects_committed"], naive["effects_committed"],
                 "" if safe["effects_committed"] == naive["effects_committed"] else "<- differs"])
    for (rs, rn) in zip(out[la][1], out[lb][1]):
        rows.append([rs.name, _mark(rs.ok), _mark(rn.ok), _witness_line(rn) if not rn.ok else ""])
    ca, cb = safe["conversation"], naive["conversation"]
    if ca is not None and cb is not None:  # the run exported as a trace and validated, as 'trace validate' does
        rows.append(["conversation (trace)", _conversation_mark(ca), _conversation_mark(cb),
                     cb["first"] if cb["codes"] else ""])
    faults = ", ".join(safe["faults"]) or "none"
    output_rows(f"{sc.name}, seed {safe['seed']}, faults: {faults}", ["", la, lb, f"{lb}'s witness"], rows,
                as_json=as_json, data={label: summary for label, (summary, _) in out.items()})


@commands.command()
def replay(db: Path = DB_OPT, as_json: bool = JSON_OPT,
           effects: Optional[Path] = typer.Option(None, "--effects", help="The effect-commit rule the run was made with "
                                                  "(run --effects): the redelivery commits through it again."),
           intake: Optional[Path] = typer.Option(None, "--intake", help="The intake the run was made with (run "
                                                 "--intake): the redelivery decides through it again.")):
    """Rebuild state from the event log alone and compare digests; redeliver every message and count effects.
    A run made with --intake or --effects is redelivered through the same files, given again (a plugged
    design or machine needs nothing: the log holds its envelopes, the store its table). Exit 0 when the
    states match and no effect is committed again, 1 otherwise."""
    from ..replay import replay_parts, replay_report

    import tempfile

    with _open(db, readonly=True) as store, tempfile.TemporaryDirectory(prefix="protolab-replay-") as scratch:
        policy, plugged, notes = replay_parts(store, db_name=str(db), intake=intake, effects=effects)
        for note in notes:
            typer.echo(f"note: {note}", err=True)
        report = replay_report(store, scratch=scratch, policy=policy)  # on files: flat memory at any run size
    report["plugged"] = plugged
    proof = not report["redelivery"]["effects_committed_again"]
    report["effects_at_most_once_under_redelivery"] = proof
    if as_json:
        _print_json(report)
    else:
        con = _console()
        con.print(f"replayed {report['events']} events into an empty store", soft_wrap=True)
        con.print(f"  live state digest     {report['live_digest']}", soft_wrap=True)
        con.print(f"  replayed state digest {report['state_digest']}", soft_wrap=True)
        con.print("  [green]match[/]: state is the fold of the event log" if report["match"]
                  else "  [bold red]MISMATCH[/]: state holds something the events do not explain")
        r = report["redelivery"]
        through = "".join(f", {k} {v.split(' ')[0]}" for k, v in plugged.items())
        con.print(f"redelivered all {r['redelivered']} messages through intake ({r['policy']} policy{through}): "
                  f"{', '.join(f'{k} {v}' for k, v in r['decisions'].items())}", soft_wrap=True, highlight=False)
        con.print("  [green]no side effect committed twice[/]" if proof
                  else f"  [bold red]effects committed again[/]: {', '.join(r['effects_committed_again'])}", soft_wrap=True)
    if not report["match"] or not proof:
        if not as_json:
            why = [w for w, bad in (("the replayed state differs from the live one", not report["match"]),
                                    ("redelivering the log commits side effects again", not proof)) if bad]
            _console().print(f"replay FAILED: {'; '.join(why)} (exit status 1)", soft_wrap=True, highlight=False)
        raise typer.Exit(1)


@commands.command()
def check(db: Path = DB_OPT, as_json: bool = JSON_OPT):
    """Named invariants over a run, each holding or broken, with the rows that witness a failure.
    Exit 0 when every invariant holds, 1 when one is broken."""
    rc = views.check(db, as_json)
    if rc:
        raise typer.Exit(rc)
