"""Runs and delivery by hand: init, tour, deliver, run, demo, tui, reconcile, digest."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import List, Optional

import typer

from ..errors import InputError, ProtolabError
from ..files import check_output
from ..palette import DECISION_STYLE as _DECISION_STYLE  # the colours live once
from ..palette import STATE_STYLE as _STATE_STYLE
from .common import output_rows, DB_OPT, DESIGN_OPT, EFFECTS_OPT, FAULT_OPT, INTAKE_OPT, JSON_OPT, MACHINE_OPT, SCENARIO_ARG, _SCENARIOS, _check_run_args, _console, _designs, _interactive, _interrupted, _judged, _load_scenario, _mark, _open, _plugins, _print_json, _progress, _read_file, _resolve, _short, _sides, _signals_deferred, _styled, _witness_line
from .inspect import compare
from ..web.serve import MAX_SESSIONS  # stdlib only: aiohttp and textual-serve are imported when serving

commands = typer.Typer()  # this group's top-level commands (sim/cli/__init__.py adds them to the app)


@commands.command()
def init(
    db: Path = DB_OPT,
    machine: Optional[Path] = typer.Option(None, "--machine", help="Start with this machine file instead of task-v1."),
    start_time: str = typer.Option("2026-07-13T04:00:00Z", "--start-time", help="Logical time zero (UTC)."),
):
    """Create an empty protolab database with the task state machine loaded."""
    from ..machine import load_rulebook
    from ..runner import refuse_lab_run
    from ..store import Store

    refuse_lab_run(db)
    rb = load_rulebook(_resolve(machine)) if machine else None
    store = Store.create(db, start_time=start_time, rulebook=rb)
    version = store.current_machine
    store.close()
    typer.echo(f"created {db} (schema 1, machine {version}, time zero {start_time})")


def _outcome_rows(outcomes) -> list[list]:
    return [
        [
            o.delivery_id, o.message_id, o.type, o.task_id, _styled(o.decision, _DECISION_STYLE),
            f"{_styled(o.state, _STATE_STYLE)} v{o.state_version}" if o.state else "-",
            f"{o.code}: {o.reason}" if o.code else o.reason,
        ]
        for o in outcomes
    ]


_OUTCOME_COLS = ["#", "message", "type", "task", "decision", "state", "why"]


@commands.command()
def tour(db: Path = typer.Option("tour.db", "--db", help="Where to write the tour (replaced if it is a protolab database)."),
         no_pause: bool = typer.Option(False, "--no-pause", help="Print every step at once (piped output never pauses).")):
    """A guided hand-delivery: the default story and each fault, delivered one step at a time."""
    from ..tour import delivered_twice, deliver_step, open_tour, release, store_artifacts, tour_steps

    con = _console()
    store = open_tour(db)
    try:
        fr, dr = store_artifacts(store)
        con.print(f"[bold]protolab tour[/] -> {db}\nartifacts stored first: fact table {_short(fr)}, draft {_short(dr)}\n")
        steps = tour_steps()
        pause = _interactive() and not no_pause
        for i, (title, envs) in enumerate(steps, 1):
            output_rows(f"step {i} of {len(steps)}: {title}", _OUTCOME_COLS, _outcome_rows(deliver_step(store, envs)),
                        con=con)
            if pause:  # in a terminal, one step at a time; piped, it prints through
                try:
                    input("enter: the next step (ctrl+c ends the tour; what was delivered stays in the file) ")
                except EOFError:
                    pause = False
        r = release(store, steps)
        output_rows(f"reconcile: the reviewer releases {r.task_id} from retained evidence ({', '.join(r.evidence)})",
                    _OUTCOME_COLS, _outcome_rows([r.outcome]), con=con)
        tasks, effects, digest_, counts = store.tasks(), store.effects(), store.state_digest(), store.counts()
    finally:
        store.close()
    twice = ", ".join(delivered_twice(steps))
    output_rows(
        "state now",
        ["task", "state", "ver", "trusted", "late", "rejected"],
        [[t["task_id"], _styled(t["state"], _STATE_STYLE), t["state_version"], "yes" if t["trusted"] else "NO",
          t["late_results"], t["rejected"]] for t in tasks],
        caption=f"effects committed: {', '.join(e['effect_key'] for e in effects) or 'none'} (once, though {twice} arrived twice)",
        con=con,
    )
    con.print(
        f"{counts['messages']} messages, {counts['deliveries']} deliveries, {counts['events']} events; state digest {digest_}\n"
        f"Look at each kind of data on its own:\n"
        f"  protolab messages --db {db}\n  protolab events --db {db}\n  protolab state --db {db}",
        soft_wrap=True,
    )


@commands.command()
def deliver(
    file: Path = typer.Argument(..., help="A JSON file holding one envelope or an array delivered in order ('-' for stdin)."),
    db: Path = DB_OPT,
    as_json: bool = JSON_OPT,
):
    """Deliver envelopes through intake, one transaction each; print each decision."""
    from ..envelope import parse_envelopes
    from ..runtime import deliver as _deliver

    check_output(db, [file], option="--db")  # the envelopes' file is read, the run written
    envelopes = parse_envelopes(_read_file(file, "envelope file"), source=str(file))
    outcomes = []
    try:
        with _open(db) as store:
            for env in envelopes:
                with _signals_deferred():  # a signal lands between deliveries, so the count below is exact
                    outcomes.append(_deliver(store, env))
    except KeyboardInterrupt as e:  # each delivery is its own transaction, and each made stays
        _interrupted(e, f"interrupted by {{sig}} after {len(outcomes)} of {len(envelopes)} deliveries into {db} "
                        f"(each made stays); deliver the file again to finish: what landed comes back as duplicates")
    output_rows(f"{len(outcomes)} deliver{'y' if len(outcomes) == 1 else 'ies'} into {db}", _OUTCOME_COLS,
                _outcome_rows(outcomes), as_json=as_json, data=[o.to_dict() for o in outcomes])


@commands.command()
def run(
    scenario: str = SCENARIO_ARG,
    seed: Optional[int] = typer.Option(None, "--seed", min=0, help="The run's seed (default: the scenario's)."),
    fault: List[str] = FAULT_OPT,
    policy: Optional[str] = typer.Option(None, "--policy", help="safe (the course's rules) or naive (last write wins); "
                                         "default: the scenario's policy, else safe."),
    db: Path = DB_OPT,
    tasks: Optional[int] = typer.Option(None, "--tasks", help="For stress scenarios: how many tasks."),
    as_json: bool = JSON_OPT,
    design: Optional[Path] = DESIGN_OPT,
    intake: Optional[Path] = INTAKE_OPT,
    effects: Optional[Path] = EFFECTS_OPT,
    machine: Optional[Path] = MACHINE_OPT,
    agent: List[str] = typer.Option([], "--agent", metavar="ROLE=CMD", help="Play a worker's role by a process: CMD "
                                    "(split as a shell would) reads and writes JSON lines, the wire of docs/wire.md. "
                                    "Repeat for more roles."),
    agent_deadline: float = typer.Option(10.0, "--agent-deadline", min=0.01, metavar="SECONDS",
                                         help="How long an --agent may stay silent before it is recorded as silent "
                                         "and stopped."),
):
    """Run a scenario's scripted agents over a fresh database; print what happened."""
    from ..runner import run_scenario, summarize

    check_output(db, [Path(scenario), design, intake, effects, machine], option="--db")
    sc = _load_scenario(scenario, tasks)
    policy = policy or sc.policy or "safe"  # a scenario written by explore or shrink pins its policy
    _check_run_args(policy, fault)
    agents = _agents(agent, sc)
    plugins = _plugins(design, intake, effects, machine)
    _default_db_for(db, sc.name)
    try:
        with _progress(sc.stress is not None) as bar:
            store = run_scenario(sc, policy=policy, seed=seed, faults=fault, db=db, progress=bar if sc.stress else None,
                                 plugins=plugins, agents=agents or None, agent_deadline=agent_deadline)
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM/SIGHUP (main turns them into this): the partial file is gone
        _interrupted(e, f"the run was interrupted by {{sig}} and nothing was written ({db} is as it was)")
    try:
        results = _judged(store, sc.stress is not None)  # once: the summary reuses it
        summary = summarize(store, results)
        if agents:
            from ..procagent import agents_report

            summary["agents"] = agents_report(store, agents)
    finally:
        store.close()
    if as_json:
        _print_json(summary)
        return
    con = _console()
    con.print(f"[bold]{summary['scenario']}[/] seed {summary['seed']}, policy {summary['policy']}, "
              f"faults: {', '.join(summary['faults']) or 'none'} -> {db} ({summary['rounds']} rounds)")
    for k, v in summary.get("plugins", {}).items():
        con.print(f"  {k}: {v}")
    for role, rep in summary.get("agents", {}).items():
        con.print(f"  agent {role}: {rep['command']}", soft_wrap=True, markup=False)
        for st in rep["stopped"]:
            con.print(f"  agent {role} (generation {st['generation']}) stopped: {st['code']}: {st['reason']}; the run "
                      "went on without it", soft_wrap=True, markup=False)
        if rep["refused"]:
            con.print(f"  agent {role}: lines refused: {', '.join(f'{c} {n}' for c, n in rep['refused'].items())} "
                      f"(protolab events --db {db} --type agent_output_refused)", soft_wrap=True, markup=False)

    injected = summary.get("faults_injected")
    if injected is not None and 0 < len(injected) <= 12:
        output_rows("Faults injected", ["fault", "message", "task"],
                    [[f["fault"], f["message_id"], f["task_id"]] for f in injected], con=con)
    elif summary["faults_by_kind"]:  # a big run: how many of each ('events --type fault_injected' lists them)
        output_rows("Faults injected", ["fault", "times"], [[k, v] for k, v in summary["faults_by_kind"].items()], con=con)
    n_tasks = sum(summary["tasks_by_state"].values())
    if n_tasks <= 20:
        output_rows("Tasks", ["task", "final state"], [[k, _styled(v, _STATE_STYLE)] for k, v in summary["tasks"].items()],
                    con=con)
    else:
        output_rows(f"Tasks ({n_tasks:,})", ["final state", "tasks"],
                    [[_styled(k, _STATE_STYLE), v] for k, v in summary["tasks_by_state"].items()], con=con)
    c = summary["counts"]
    con.print(f"{c['messages']} messages, {c['deliveries']} deliveries "
              f"({', '.join(f'{k} {v}' for k, v in c['deliveries_by_decision'].items())}), {c['events']} events")
    con.print(f"effects committed: {', '.join(summary['effects']) or 'none'}")
    output_rows("Invariants", ["invariant", "result", "witness"], [[r.name, _mark(r.ok), _witness_line(r)] for r in results],
                con=con)
    con.print(f"state digest {summary['state_digest']}", soft_wrap=True)
    # replay redelivers through the run's own intake and effect rule: the line names them as they were given
    again = "".join(f" --{opt} {shlex.quote(str(f))}" for opt, f in (("intake", intake), ("effects", effects)) if f)
    con.print(f"next: protolab check --db {db}  |  protolab replay --db {db}{again}  |  protolab events --db {db}",
              soft_wrap=True)


def _agents(options: list[str], sc) -> dict[str, list[str]]:
    """--agent ROLE=CMD, each read and its role checked against the scenario's workers before anything runs."""
    from ..procagent import parse_agent_option

    agents: dict[str, list[str]] = {}
    for text in options:
        role, argv = parse_agent_option(text)
        if role not in sc.workers:
            raise InputError(f"--agent {role}: the scenario {sc.name} has no worker {role!r}; workers: "
                             f"{', '.join(sorted(sc.workers))}", code="E_AGENT_ROLE")
        if role in agents:
            raise InputError(f"--agent {role} is given twice", code="E_AGENT_OPTION")
        # a shipped agent named by its path in the checkout (data/agents/researcher.py) works from any folder
        agents[role] = [str(_resolve(Path(a))) if a.startswith("data/") else a for a in argv]
    return agents


DEFAULT_DB = Path("protolab.db")


def _default_db_for(db: Path, scenario: str) -> None:
    """The rule for the default database: ``protolab.db`` holds the latest simulator run, whatever
    its scenario; a run of another scenario there is replaced, with a notice (name a --db to keep
    runs side by side). A named --db is never replaced by another scenario's run, and hand-delivered
    messages are never replaced."""
    from ..runner import refuse_lab_run, scenario_of

    refuse_lab_run(db)  # a lab's run, wherever it is, is never replaced
    if db != DEFAULT_DB or not db.exists():
        return

    previous = scenario_of(db)
    if previous is None or previous == scenario:
        return  # hand-delivered: refused as before; the same scenario: replaced as before
    from ..store import remove_database

    remove_database(db)
    sys.stderr.write(f"note: {db} held a run of {previous}; it now holds this run of {scenario} "
                     "(use --db FILE to keep runs side by side)\n")


def _tui_here() -> bool:
    """A TUI can be shown: a terminal, or a browser tab (a process textual-serve started)."""
    from ..web.serve import served_here

    return _interactive() or served_here()


SERVE_OPT = typer.Option(False, "--serve", help="Serve the TUI to a browser on localhost (textual-serve); the URL is "
                         "printed; each tab is its own run; Ctrl-C stops it.")
PORT_OPT = typer.Option(8000, "--port", min=0, max=65535, help="With --serve: the port on localhost (0: any free port).")
ALLOW_HOST_OPT = typer.Option([], "--allow-host", metavar="NAME", help="With --serve: answer pages under this host name "
                              "too (repeatable; for a classroom behind a proxy or tunnel). Only localhost by default.")
MAX_SESSIONS_OPT = typer.Option(MAX_SESSIONS, "--max-sessions", min=1, metavar="N", help="With --serve: at most N browser tabs "
                                "at once (each runs a process); one more is refused.")


def _serve(argv: list[str], *, port: int, title: str, run_db: str | None = None, allow_host=(),
           max_sessions: int = MAX_SESSIONS) -> None:
    """``protolab ARGV`` served to a browser until Ctrl-C (sim.web.serve)."""
    from ..web.guard import check_allowed_host
    from ..web.serve import serve_tui

    names = [check_allowed_host(n) for n in allow_host]

    def ready(url: str) -> None:
        print(f"serving '{title}' at {url}  (each browser tab is its own run; Ctrl-C stops it)", flush=True)

    serve_tui(argv, port=port, title=title, ready=ready, run_db=run_db, allow_hosts=names, max_sessions=max_sessions)
    sys.stderr.write("stopped\n")


def _tui_live(sc, *, seed, fault, policy, db, paused: bool, headless: bool, plugins=None) -> None:
    """Open the TUI on a live run of ``sc`` written to ``db`` (headless: run it through, print).
    The caller has checked policy and faults."""
    if headless or not _tui_here():
        if not headless:
            sys.stderr.write(
                f"protolab: not a terminal, so no TUI: running {sc.name} through instead "
                f"(open it later with 'protolab tui --db {db}')\n"
            )
        p = plugins
        run(scenario=sc.name, seed=seed, fault=fault, policy=policy, db=db, tasks=None, as_json=False,
            design=p.design if p else None, intake=p.intake if p else None, effects=p.effects if p else None,
            machine=p.machine if p else None)
        return
    from ..live import LiveRun
    from ..tui.app import ProtolabApp

    live = LiveRun(sc, policy=policy, seed=seed, faults=fault, db=db, plugins=plugins)
    try:
        app = ProtolabApp(live.store, live=live, play=not paused)
        app.run()
    finally:
        live.close()
    if app.failure is not None:  # the learner's code stopped the run: the app showed it; one line and exit 2 here
        sys.stderr.write(f"note: what was delivered before it stopped is in {db}\n")
        raise app.failure
    for unmatched in live.unmatched_faults():
        sys.stderr.write(f"note: fault selector {unmatched} matched no message in this run\n")
    if _interactive():  # a served tab's stdout is the web driver's: nothing more goes there
        print(f"the run is in {db}: protolab check --db {db}  |  protolab tui --db {db}")


@commands.command()
def demo(
    mode: str = typer.Argument("run", help="'run' (the default scenario, live) or 'regression' (workshop: naive beside safe)."),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, help="The seed (default: the scenario's, 0)."),
    fault: List[str] = typer.Option([], "--fault", "-f", help="For regression: the faults both runs get (default: late-failure)."),
    db: Path = DB_OPT,
    paused: bool = typer.Option(False, "--paused", help="Start paused (space steps one delivery)."),
    story: Optional[bool] = typer.Option(None, "--story/--autoplay", help="For regression: stop at each moment that "
                                         "matters (space goes on, r restarts, f switches the fault), or play every "
                                         "delivery on a timer. Default: --story in a terminal (--autoplay with "
                                         "--paused or --serve)."),
    headless: bool = typer.Option(False, "--headless", help="No TUI: run it through and print the result."),
    design: List[Path] = typer.Option([], "--design", help="An envelope design (.py). With 'run': watch it live. "
                                      "With 'regression': one design beside the reference design, or two side by side."),
    serve: bool = SERVE_OPT,
    port: int = PORT_OPT,
    allow_host: List[str] = ALLOW_HOST_OPT,
    max_sessions: int = MAX_SESSIONS_OPT,
):
    """Open the TUI on the default scenario (seed 0), live, on protolab.db in this folder."""
    if mode not in ("run", "regression"):
        raise InputError(f"unknown demo {mode!r}; expected one of: 'run' or 'regression'", code="E_UNKNOWN_VALUE")
    sc = _load_scenario("publish-report", None)
    _check_run_args("safe", fault)
    designs = _designs(design)
    if mode == "run" and story is not None:
        raise InputError("--story and --autoplay are for 'demo regression'", code="E_USAGE")
    if serve:
        if headless:
            raise InputError("--serve shows the TUI in a browser; --headless shows none: give one of them", code="E_USAGE")
        argv = ["demo", mode, *(["--seed", str(seed)] if seed is not None else []),
                *[x for f in fault for x in ("--fault", f)], *(["--paused"] if paused else []),
                *(["--story"] if story and mode == "regression" else []),
                *[x for d in design for x in ("--design", str(Path(d).resolve()))]]
        _serve(argv, port=port, title="protolab demo " + mode, run_db="--db" if mode == "run" else None,
               allow_host=allow_host, max_sessions=max_sessions)
        return
    if mode == "run":
        if len(designs) > 1:
            raise InputError("'demo run' takes one --design; 'demo regression' shows two side by side", code="E_USAGE")
        _default_db_for(db, sc.name)
        _tui_live(sc, seed=seed, fault=fault, policy="safe", db=db, paused=paused, headless=headless,
                  plugins=_plugins(design=designs[0]) if designs else None)
        return
    if story is None:  # a story in a terminal; a served tab (and --paused) plays on a timer as before
        from ..web.serve import served_here

        story = not paused and _interactive() and not served_here()
    _workshop(sc, seed=seed, fault=list(fault) or (["resend"] if designs else ["late-failure"]), paused=paused,
              headless=headless, designs=designs, story=story)


def _workshop(sc, *, seed, fault, paused: bool, headless: bool, designs=(), story: bool = False) -> None:
    if headless or not _tui_here():
        if not headless:
            sys.stderr.write("protolab: not a terminal, so no TUI: comparing the two sides instead\n")
        compare(scenario=sc.name, seed=seed, fault=fault, as_json=False, design=list(designs), tasks=None)
        return
    from ..live import LiveRun
    from ..tui.workshop import WorkshopApp

    sides = _sides(list(designs))
    if designs:
        # The side that may break goes on the left, where the workshop names the broken invariant.
        left, right = sides if len(designs) == 2 else (sides[1], sides[0])
        labels = tuple(label if plugged is None else f"design {label}" for label, _p, plugged in (left, right))
    else:
        left, right = ("naive", "naive", None), ("safe", "safe", None)
        labels = ("naive: last write wins", "safe: the course's rules")

    def factory(side: str, faults) -> LiveRun:
        """A side's run (naive: the left one), in memory: r restarts with it, f switches its fault."""
        _label, policy, plugins = left if side == "naive" else right
        return LiveRun(sc, policy=policy, seed=seed, faults=list(faults), plugins=plugins)

    app = WorkshopApp(factory("naive", fault), factory("safe", fault), play=not paused, labels=labels, story=story,
                      factory=factory, faults=fault)
    try:
        app.run()
    finally:
        app.naive.close()  # the runs on screen at the end (r and f replace them)
        app.safe.close()
    if app.failure is not None:  # a design raised: the app showed it; one line and exit 2 here
        raise app.failure


@commands.command()
def tui(
    scenario: Optional[str] = typer.Argument(None, help=f"A scenario to run live ({_SCENARIOS}, or a .toml)."),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, help="The run's seed (default: the scenario's)."),
    fault: List[str] = FAULT_OPT,
    policy: Optional[str] = typer.Option(None, "--policy", help="safe (the course's rules) or naive (last write wins); "
                                         "default: the scenario's policy, else safe."),
    db: Optional[Path] = typer.Option(None, "--db", help="With a scenario: where the live run is written "
                                      "(default protolab.db). Without: a finished run to open read-only."),
    paused: bool = typer.Option(False, "--paused", help="Start paused (space steps one delivery)."),
    design: Optional[Path] = DESIGN_OPT,
    intake: Optional[Path] = INTAKE_OPT,
    effects: Optional[Path] = EFFECTS_OPT,
    machine: Optional[Path] = MACHINE_OPT,
    serve: bool = SERVE_OPT,
    port: int = PORT_OPT,
    allow_host: List[str] = ALLOW_HOST_OPT,
    max_sessions: int = MAX_SESSIONS_OPT,
):
    """The TUI: run a scenario live, or open a finished run read-only (--db FILE)."""
    live_flags = bool(fault) or any(x is not None for x in (seed, design, intake, effects, machine, policy))
    if serve:
        _serve_tui_args(scenario, seed=seed, fault=fault, policy=policy, db=db, paused=paused, design=design,
                        intake=intake, effects=effects, machine=machine, port=port, live=live_flags,
                        guard={"allow_host": allow_host, "max_sessions": max_sessions})
        return
    if scenario is None and db is not None and not live_flags:
        from ..store import Store

        store = Store.open(db, readonly=True)
        try:
            if not _tui_here():
                raise InputError("the TUI needs a terminal; for a finished run try 'protolab state/events/messages --db "
                                 f"{db}'", code="E_NOT_A_TERMINAL")
            from ..tui.app import ProtolabApp

            ProtolabApp(store).run()
        finally:
            store.close()
        return
    sc = _load_scenario(scenario or "publish-report", None)
    policy = policy or sc.policy or "safe"  # as 'run' does: a scenario written by explore or shrink pins its policy
    _check_run_args(policy, fault)
    plugins = _plugins(design, intake, effects, machine)
    from ..runner import refuse_lab_run

    refuse_lab_run(db or DEFAULT_DB)  # a lab's run is never replaced, terminal or not
    if not _tui_here():
        raise InputError(f"the TUI needs a terminal; 'protolab run {sc.name}' runs it without one", code="E_NOT_A_TERMINAL")
    _default_db_for(db or DEFAULT_DB, sc.name)
    _tui_live(sc, seed=seed, fault=fault, policy=policy, db=db or Path("protolab.db"), paused=paused, headless=False,
              plugins=plugins)


def _serve_tui_args(scenario, *, seed, fault, policy, db, paused, design, intake, effects, machine, port, live,
                    guard: dict) -> None:
    """'protolab tui ... --serve': everything checked here, then each browser tab runs the same command
    (a live run on its own file in the server's temporary folder; a finished run read-only)."""
    if scenario is None and db is not None and not live:
        with _open(db, readonly=True):  # a run this program can open, or one line and exit 2
            pass
        _serve(["tui", "--db", str(Path(db).resolve())], port=port, title=f"protolab tui --db {db}", **guard)
        return
    sc = _load_scenario(scenario or "publish-report", None)
    policy = policy or sc.policy or "safe"
    _check_run_args(policy, fault)
    _plugins(design, intake, effects, machine)
    files = [(flag, p) for flag, p in (("--design", design), ("--intake", intake), ("--effects", effects),
                                        ("--machine", machine)) if p is not None]
    argv = ["tui", str(Path(scenario).resolve()) if scenario and scenario.endswith(".toml") else sc.name,
            "--policy", policy, *(["--seed", str(seed)] if seed is not None else []),
            *[x for f in fault for x in ("--fault", f)], *(["--paused"] if paused else []),
            *[x for flag, p in files for x in (flag, str(Path(p).resolve()))]]
    _serve(argv, port=port, title=f"protolab tui {sc.name}", run_db="--db", **guard)


@commands.command()
def reconcile(
    task_id: str = typer.Argument(..., help="The needs_review task to decide, or a finished task with an open "
                                            "reconciliation."),
    decision: str = typer.Option(..., "--decision", help="needs_review: ready (run it again) or canceled. An open "
                                 "reconciliation (a late result touched a committed effect): keep or retract."),
    of: Optional[str] = typer.Option(None, "--of", help="Which late message's reconciliation (default: the oldest open)."),
    by: str = typer.Option(..., "--by", help="Who decides; must be a reviewer (reviewer or reviewer-NAME)."),
    evidence: List[str] = typer.Option(..., "--evidence", help="Retained evidence: a message id or an artifact ref. Repeat for more."),
    note: str = typer.Option("", "--note", help="Why, in a sentence."),
    db: Path = DB_OPT,
    as_json: bool = JSON_OPT,
):
    """A reviewer decides from retained evidence: a frozen (needs_review) task, or an open
    reconciliation (keep the committed effect, or retract it with a compensating effect)."""
    from ..envelope import RECONCILE_DECISIONS, role_of
    from ..runtime import resolve_reconciliation, review

    role_of(by)
    with _open(db) as store:
        if decision in RECONCILE_DECISIONS:
            o = resolve_reconciliation(store, task_id, decision, by=by, evidence=list(evidence), of=of, note=note)
        else:
            o = review(store, task_id, decision, by=by, evidence=list(evidence), note=note)
        effects = [e["effect_key"] for e in store.effects() if e["task_id"] == task_id]
    if o.decision != "accepted":
        raise ProtolabError(f"the review was {o.decision}: {o.reason}", code=o.code or "E_REVIEW_NOT_APPLIED")
    if as_json:
        _print_json(o.to_dict())
        return
    if decision in RECONCILE_DECISIONS:
        typer.echo(f"{o.message_id}: {o.reason}; {task_id} stays {o.state}; its effects now: {', '.join(effects)}")
        return
    typer.echo(f"{o.message_id}: {o.decision} -> {task_id} is {o.state} (state_version {o.state_version}); approval recorded")


@commands.command()
def digest(
    file: Path = typer.Argument(..., help="A JSON file ('-' for stdin)."),
    scheme: str = typer.Option("json-sorted-v1", "--scheme", help="json-sorted-v1 or jcs-v2."),
    show_bytes: bool = typer.Option(False, "--bytes", help="Also print the canonical bytes that are hashed."),
):
    """Print the digest of a JSON value, to fill in an envelope's payload_digest by hand."""
    from .. import digest as _digest
    from ..envelope import loads_strict

    value = loads_strict(_read_file(file, "file"), source=str(file))
    if show_bytes:
        typer.echo(_digest.canonical_bytes(value, scheme).decode("utf-8"))
    typer.echo(_digest.digest(value, scheme))

