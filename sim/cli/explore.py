"""Search and shrink: explore (every delivery order up to a depth), shrink (a failing run made minimal),
and 'bench explore' (added to the bench group)."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from pathlib import Path
from typing import List, Optional

import typer

from ..errors import InputError
from ..files import check_output, written_whole
from ..palette import DECISION_STYLE as _DECISION_STYLE
from .bench import bench_app
from .common import (DESIGN_OPT, EFFECTS_OPT, FAULT_OPT, INTAKE_OPT, JSON_OPT, MACHINE_OPT, SCENARIO_ARG, _check_run_args,
                     _console, _load_scenario, _open, _plugins, _print_json, _progress, _styled, output_rows)


@contextlib.contextmanager
def _ctrl_c():
    """While inside: the first SIGINT (Ctrl-C) sets a flag, which the callable yielded reports (the search asks
    it after each transition and ends with what was reached); a second one raises KeyboardInterrupt as usual.
    Outside the main thread (where no handler can be set) the callable always answers False."""
    pressed: list[bool] = []
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return

    def on_sigint(signum, frame) -> None:
        if pressed:
            raise KeyboardInterrupt
        pressed.append(True)

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield lambda: bool(pressed)
    finally:
        signal.signal(signal.SIGINT, previous)


commands = typer.Typer()  # this group's top-level commands (sim/cli/__init__.py adds them to the app)

_PATH_COLS = ["#", "round", "message", "type", "from", "to", "task", "decision"]


def _path_rows(path) -> list[list]:
    return [[i, s.round, s.message_id, s.type, s.sender, s.recipient, s.task_id, _styled(s.decision, _DECISION_STYLE)]
            for i, s in enumerate(path, 1)]


def _faults_of(fault: list[str], faults: Optional[str]) -> list[str]:
    out = list(fault)
    if faults:
        out += [f.strip() for f in faults.split(",") if f.strip()]
    return out


def _write_new(out: Path, text: str, reads=()) -> None:
    """Write ``text`` to ``out`` whole (a partial file never stays): written aside, then renamed; never over
    one of the files the command ``reads`` (E_OUTPUT_IS_INPUT)."""
    with written_whole(out, code="E_WRITE", reads=reads, option="--out") as fh:
        fh.write(text)


@commands.command()
def explore(
    scenario: str = SCENARIO_ARG,
    fault: List[str] = FAULT_OPT,
    faults: Optional[str] = typer.Option(None, "--faults", help="Faults as one comma-separated list (duplicate,late-failure); "
                                         "with --fault, both count."),
    depth: int = typer.Option(14, "--depth", min=1, help="How many deliveries deep to search."),
    policy: Optional[str] = typer.Option(None, "--policy", help="safe or naive (default: the scenario's policy, else safe)."),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, help="The run's seed (default: the scenario's)."),
    design: Optional[Path] = DESIGN_OPT,
    intake: Optional[Path] = INTAKE_OPT,
    effects: Optional[Path] = EFFECTS_OPT,
    machine: Optional[Path] = MACHINE_OPT,
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write the counterexample here as a scenario file "
                                       "(protolab run FILE replays it)."),
    seeded: bool = typer.Option(False, "--seeded-faults", help="Fire each fault where a run puts it (the first "
                                "message it picks) instead of trying every placement."),
    anywhere: bool = typer.Option(False, "--place-anywhere", help="Place each fault on any message of a type it "
                                  "can touch (duplicate: any message), not only those its default selector picks "
                                  "(duplicate: a publishing result). A bigger search."),
    engine: str = typer.Option("model", "--engine", help="Where each state is kept: model (the pure in-memory "
                               "model of the store, faster; a break is confirmed on SQLite before it is shown) or "
                               "sqlite (the engine's store). --machine and scenarios with gathers are explored "
                               "on sqlite."),
    as_json: bool = JSON_OPT,
):
    """Every delivery order of a small run up to --depth, and every placement of each fault given without
    a selector (on any message it may hit, at most once, or nowhere), breadth-first with state hashing:
    the first invariant broken, by a shortest path (exit 1), or none (exit 0). Ctrl-C stops the search
    and prints what was reached (exit 130). Each state is a forked run of the real runtime and agents,
    its store the pure in-memory model (--engine model) or SQLite in memory (--engine sqlite; --machine
    always); a break is run again from the start on SQLite before it is shown (not for plugged-in code,
    whose search confirms itself on its forks), and its counterexample is checked (it loads, runs at the
    search's seed and policy, breaks the same invariant, needs each fault it places, and no shorter prefix
    of its path breaks it): otherwise E_EXPLORE_UNCHECKED, exit 2, nothing shown or written."""
    from ..explore import Exploration, counterexample, explore as search, explore_args, refuse_unmatched
    from ..shrinkcheck import require
    from ..scenario import scenario_toml

    sc = _load_scenario(scenario, None)
    fs = _faults_of(fault, faults)
    pol = policy or sc.policy or "safe"
    _check_run_args(pol, fs)
    explore_args(fs)
    plugins = _plugins(design, intake, effects, machine)
    if engine not in ("model", "sqlite"):
        raise InputError(f"--engine {engine!r}; expected one of: 'model' or 'sqlite'", code="E_USAGE")
    # a plugged-in machine (the model keeps the default one) or gathers (the model does not reduce them): SQLite
    on = "sqlite" if machine is not None or sc.gathers else engine
    if out is not None and out.suffix != ".toml":
        raise InputError(f"--out {out} must name a .toml file (a scenario)", code="E_USAGE")
    reads = [Path(scenario), design, intake, effects, machine]
    if out is not None:
        check_output(out, reads, option="--out")
    if seeded and anywhere:
        raise InputError("--seeded-faults fires each fault where a run does; --place-anywhere places it: "
                         "give one", code="E_USAGE")
    refuse_unmatched(sc, pol, seed, fs, plugins)  # a selector no run matches: refused as 'run' refuses it
    con = _console()
    with _progress(not as_json) as bar:
        job = bar.add_task(f"explore {sc.name} ({pol}) to depth {depth}", total=None)

        def told(r) -> None:
            bar.update(job, description=f"explore {sc.name} ({pol}): depth {r.depth_reached + 1} of {depth}, "
                                        f"{r.states:,} states, {r.states_per_second:,.0f} states/s")

        try:
            # Ctrl-C sets a flag the search reads after each transition (a KeyboardInterrupt raised where Python
            # cannot pass it on, as inside the import machinery, would be lost); a second Ctrl-C stops at once.
            with _ctrl_c() as asked:
                if not as_json:  # the first line, as the search starts (a script may wait for it, then Ctrl-C)
                    con.print(f"[bold]explore {sc.name}[/] policy {pol}, faults: {', '.join(fs) or 'none'} "
                              f"({'where a run fires them' if seeded else 'every placement, anywhere' if anywhere else 'every placement'})"
                              f", depth {depth}, on {on}",
                              soft_wrap=True)
                    sys.stdout.flush()
                result = search(sc, policy=pol, seed=seed, faults=fs, depth=depth, plugins=plugins, progress=told,
                                every=50, interrupt=asked, place=False if seeded else ("any" if anywhere else True),
                                engine=on)
        except KeyboardInterrupt:  # before the search's own loop began: nothing reached
            result = Exploration(sc.name, pol, tuple(fs), depth, interrupted=True)
    found = result.found
    ce = None
    if found is not None:
        ce = counterexample(sc, pol, found.path, found.faults, seed=seed)
        # checked, not trusted (sim/shrinkcheck.py): it loads, runs at the search's seed and policy, breaks the
        # same invariant, loses it with any one fault less, and no shorter prefix of its path breaks it (a shortest
        # path); otherwise E_EXPLORE_UNCHECKED, and nothing is printed or written
        require(sc, ce, found.invariant, policy=pol, seed=sc.seed if seed is None else seed, faults=fs,
                plugins=plugins, minimal="shortest", what="explore's counterexample", code="E_EXPLORE_UNCHECKED")
        if out is not None:
            plugged = " ".join(f"--{k} {v}" for k, v in (("design", design), ("intake", intake), ("effects", effects),
                                                          ("machine", machine)) if v is not None)
            _write_new(out, scenario_toml(ce, comment=(
                f"A counterexample found by: protolab explore {sc.name} --policy {pol} --faults {','.join(fs)} "
                f"--depth {depth}{' --seeded-faults' if seeded else ''}{' --place-anywhere' if anywhere else ''}"
                f"{' ' + plugged if plugged else ''}\n"
                f"The faults are placed on the messages they hit: {', '.join(found.faults) or 'none'}.\n"
                f"{found.invariant} breaks after these {len(found.path)} deliveries (no shorter order breaks an invariant).\n"
                f"Replay it: protolab run {out.name}{' ' + plugged if plugged else ''} --db counterexample.db && "
                "protolab check --db counterexample.db")), reads)
    if as_json:
        data = result.to_dict()
        data["out"] = str(out) if out is not None and found is not None else None
        _print_json(data)
    else:
        if result.interrupted:
            con.print(f"interrupted: what was reached so far (depth {result.depth_reached} fully explored)",
                      soft_wrap=True)
        con.print(f"{result.states:,} states ({result.transitions:,} orders tried, the rest merged) in "
                  f"{result.seconds:.2f} s: {result.states_per_second:,.0f} states/s; depth reached {result.depth_reached}",
                  soft_wrap=True)
        if found is not None:
            con.print(f"[bold red]{found.invariant} BROKEN[/] after {len(found.path)} deliveries: no shorter order breaks "
                      f"an invariant" + (f" (also broken: {', '.join(found.broken[1:])})" if len(found.broken) > 1 else ""),
                      soft_wrap=True)
            con.print(f"faults placed: {', '.join(found.faults) or 'none'}"
                      + ("; confirmed: the engine ran it from the start on SQLite and reached the same state"
                         if result.confirmed else ""), soft_wrap=True)
            output_rows("The shortest path", _PATH_COLS, _path_rows(found.path), con=con)
            if out is not None:
                con.print(f"wrote {out}: protolab run {out} --db counterexample.db && protolab check --db counterexample.db",
                          soft_wrap=True)
            else:
                con.print("write it as a scenario with --out FILE.toml", soft_wrap=True)
        elif result.exhausted:
            con.print(f"[green]no invariant broken[/]: every order ends within {result.depth_reached} deliveries, so "
                      "the search is exhaustive", soft_wrap=True)
        elif result.interrupted:
            con.print(f"no invariant broken in the {result.states:,} states reached before the interruption "
                      "(the search stops at its first break, so there is no counterexample yet)", soft_wrap=True)
        else:
            con.print(f"[green]no invariant broken[/] in any order up to {depth} deliveries (orders go on past it)",
                      soft_wrap=True)
    if result.interrupted:  # (main says 'error: E_ABORTED: interrupted (Ctrl-C)' on stderr, once)
        raise typer.Exit(130)
    if found is not None:
        raise typer.Exit(1)


@commands.command()
def shrink(
    db: Path = typer.Option(..., "--db", help="A run that breaks an invariant (from 'protolab run')."),
    out: Path = typer.Option(..., "--out", "-o", help="Where to write the minimal scenario (.toml)."),
    invariant: Optional[str] = typer.Option(None, "--invariant", help="Which broken invariant to keep (default: the first)."),
    scenario: Optional[str] = typer.Option(None, "--scenario", help="The run's scenario file, when it is not a shipped one."),
    design: Optional[Path] = DESIGN_OPT,
    intake: Optional[Path] = INTAKE_OPT,
    effects: Optional[Path] = EFFECTS_OPT,
    machine: Optional[Path] = MACHINE_OPT,
    as_json: bool = JSON_OPT,
):
    """Shrink a failing run to a minimal scenario that still breaks the same invariant: fewer tasks,
    faults and deliveries (delta debugging; removing any one more task, fault or delivery mends it).
    The result is checked before it is written (it loads, runs at the run's seed and policy, breaks the
    same invariant, keeps what its tasks depend on, and is 1-minimal): otherwise E_SHRINK_UNCHECKED, exit 2.
    Ctrl-C stops it and writes the smallest run found so far, checked but for minimality (exit 130)."""
    from ..scenario import scenario_toml
    from ..shrink import shrink as run_shrink
    from ..shrinkcheck import require

    if out.suffix != ".toml":
        raise InputError(f"--out {out} must name a .toml file (a scenario)", code="E_USAGE")
    reads = [db, None if scenario is None else Path(scenario), design, intake, effects, machine]
    check_output(out, reads, option="--out")
    sc = _load_scenario(scenario, None) if scenario else None
    plugins = _plugins(design, intake, effects, machine)
    with _open(db, readonly=True) as store, _progress(not as_json) as bar:
        job = bar.add_task(f"shrink {db}", total=None)
        result = run_shrink(store, scenario=sc, invariant=invariant, plugins=plugins,
                            progress=lambda n: bar.update(job, description=f"shrink {db}: {n} runs"))
    after = result.after
    # checked, not trusted (sim/shrinkcheck.py, no code shared with the search): it loads, runs at the run's
    # seed and policy, breaks the same invariant, keeps what its tasks depend on, and (unless interrupted)
    # loses the failure with any one task, fault or delivery less; otherwise E_SHRINK_UNCHECKED, nothing written
    require(result.before, after, result.invariant, policy=result.policy, seed=result.seed,
            faults=result.faults_before, plugins=plugins, minimal=None if result.interrupted else "one")
    _write_new(out, scenario_toml(after, comment=(
        f"{result.invariant} still breaks in this run, shrunk from {db} ({result.deliveries_before} deliveries, "
        f"{len(result.before.tasks)} tasks, faults {', '.join(result.faults_before) or 'none'}).\n"
        "Removing any one task, fault or delivery makes it hold (checked before this file was written)." + ("" if not result.interrupted else
                                                              "\n(interrupted: smaller than the run, maybe not minimal)")
        + f"\nReplay it: protolab run {out.name} --db minimal.db && protolab check --db minimal.db")), reads)
    if as_json:
        _print_json({**result.to_dict(), "out": str(out)})
    else:
        con = _console()
        con.print(f"[bold]{result.invariant}[/] still breaks: {result.deliveries_before} deliveries -> "
                  f"{len(after.deliveries)}, tasks {len(result.before.tasks)} -> {len(after.tasks)}, faults "
                  f"{', '.join(result.faults_before) or 'none'} -> {', '.join(after.faults) or 'none'} ({result.runs} runs)",
                  soft_wrap=True)
        output_rows("The minimal schedule", ["#", "round", "message"],
                    [[i, r, m] for i, (r, m) in enumerate(after.deliveries, 1)], con=con)
        con.print(f"wrote {out}: protolab run {out} --db minimal.db && protolab check --db minimal.db", soft_wrap=True)
    if result.interrupted:  # (main says 'error: E_ABORTED: interrupted (Ctrl-C)' on stderr, once)
        if not as_json:
            _console().print("interrupted: the smallest run found so far was written (maybe not minimal)")
        raise typer.Exit(130)


@bench_app.command("explore")
def bench_explore(
    scenario: str = SCENARIO_ARG,
    faults: str = typer.Option("duplicate,late-failure", "--faults", help="Comma-separated faults."),
    depth: int = typer.Option(10, "--depth", min=1, help="Search depth."),
    policy: str = typer.Option("safe", "--policy", help="safe (nothing found: the whole space to depth) or naive."),
    as_json: bool = JSON_OPT,
):
    """States per second of 'explore' on SQLite (forked runs, the store in memory), of the same search
    on the pure model of the state (--engine model, sim/model.py), of the search on SQLite with the model
    checked against every state, and of a floor: the same breadth-first search over a minimal in-memory
    dict model of the protocol (no engine, no database)."""
    from ..explore import bench as run

    fs = [f.strip() for f in faults.split(",") if f.strip()]
    _check_run_args(policy, fs)
    sc = _load_scenario(scenario, None)
    with _progress(not as_json) as bar:
        job = bar.add_task(f"bench explore {sc.name} to depth {depth}", total=4)
        phases: list[str] = []

        def told(what: str) -> None:  # a phase begins: the ones before it are done
            bar.update(job, description=f"bench explore {sc.name}: {what}", completed=len(phases))
            phases.append(what)

        result = run(sc, policy=policy, faults=fs, depth=depth, progress=told)
    if as_json:
        _print_json(result)
        return
    typer.echo(
        f"explore {sc.name} ({policy}, {', '.join(fs)}, depth {depth}): {result['states']:,} states, "
        f"{result['transitions']:,} orders tried in {result['seconds']:.2f} s: {result['project_per_s']:,.0f} states/s "
        f"(protolab on SQLite)  |  {result['model_per_s']:,.0f} states/s on the pure model ({result['model_seconds']:.2f} s)"
        f"  |  {result['checked_per_s']:,.0f} states/s on SQLite with the model checked on each of "
        f"{result['model_checked']:,}  |  floor {result['floor_per_s']:,.0f} states/s (dict model, "
        f"{result['floor_states']:,} states)  |  "
        f"ratio {result['ratio']:.3f}" + ("  |  exhausted" if result["exhausted"] else ""))
