"""'protolab bench': the project's figures beside a floor measured in the same run."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..errors import InputError
from .common import output_rows, COURSE_OPT, JSON_OPT, _console, _course, _print_json, _progress


def _machine_load() -> float:
    """The machine's load average over the last minute (a figure is only worth reading beside it)."""
    import os

    return round(os.getloadavg()[0], 2)


def _load_after(before: float) -> dict:
    import os

    return {"before": before, "after": _machine_load(), "cores": os.cpu_count()}


def _loaded(run, *args, **kw) -> dict:
    """``run(*args, **kw)``'s figures with the machine's load before and after them (``load``)."""
    before = _machine_load()
    result = run(*args, **kw)
    result["load"] = _load_after(before)
    return result


def _load_text(result: dict) -> str:
    load = result["load"]
    return f"load {load['before']:.2f} -> {load['after']:.2f} on {load['cores']} cores"


bench_app = typer.Typer(help="Benchmarks: the project's figure beside a bare-sqlite3 floor measured in the same run.", no_args_is_help=True)


@bench_app.command("intake")
def bench_intake(
    n: int = typer.Option(5000, "-n", help="Deliveries to time."),
    repeat: int = typer.Option(3, "--repeat", "-r", min=1,
                               help="Rounds, each timing the project and its floor alternately, 250 deliveries at a time; "
                                    "the round with the median ratio counts."),
    as_json: bool = JSON_OPT,
):
    """Deliveries per second through parse, digest, intake and transaction, beside bare sqlite3."""
    from ..bench import bench_intake as run

    if n < 10:
        raise InputError("-n must be at least 10", code="E_USAGE")
    result = _loaded(run, n, progress=not as_json, repeat=repeat)
    if as_json:
        _print_json(result)
        return
    spread = f", rounds {' '.join(f'{x:.2f}' for x in result['ratios'])}" if result["repeat"] > 1 else ""
    typer.echo(
        f"intake: {result['project_per_s']:,.0f} deliveries/s (protolab)  |  floor {result['floor_per_s']:,.0f}/s "
        f"(bare sqlite3, same rows)  |  ratio {result['ratio']:.2f}  (n={n}, median of {result['repeat']}{spread}; "
        f"target >= 0.6)  |  {_load_text(result)}"
    )


@bench_app.command("instructions")
def bench_instructions(
    n: int = typer.Option(1000, "-n", help="Deliveries to count (after 300 uncounted ones)."),
    as_json: bool = JSON_OPT,
):
    """Instructions a delivery (valgrind's callgrind) through the intake path, beside its floor: the same count
    each run, for comparing two versions of the code on a busy machine. Needs valgrind."""
    from ..bench import bench_instructions as run

    if n < 10:
        raise InputError("-n must be at least 10", code="E_USAGE")
    result = _loaded(run, n, progress=not as_json)
    if as_json:
        _print_json(result)
        return
    typer.echo(
        f"intake: {result['project_per_delivery']:,} instructions a delivery (protolab)  |  floor "
        f"{result['floor_per_delivery']:,} (bare sqlite3, same rows)  |  ratio {result['ratio']:.3f} (project over floor)  (n={n}, after "
        f"{result['warm']} uncounted; user-space instructions, not time: bench intake times the same work)"
    )


@bench_app.command("sim")
def bench_sim(
    sizes: str = typer.Option("1000,10000,100000", "--sizes", help="Comma-separated task counts for the stress scenario "
                                                                   "(100,000 tasks takes several minutes)."),
    repeat: int = typer.Option(3, "--repeat", "-r", min=1,
                               help="Runs of each size up to 10,000 tasks (larger: one); the median ratio counts."),
    as_json: bool = JSON_OPT,
):
    """The stress scenario at each size: deliveries/s beside bare sqlite3 on the same rows, and peak memory."""
    from ..bench import bench_sim as run

    try:
        ns = [int(x) for x in sizes.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--sizes {sizes!r} must be comma-separated integers", code="E_USAGE") from None
    if not ns or min(ns) < 1:
        raise InputError("--sizes needs at least one positive task count", code="E_USAGE")
    result = _loaded(run, ns, progress=not as_json, repeat=repeat)
    output_rows(
        "bench sim: stress scenario (5% duplicates, 1% conflicting digests)",
        ["tasks", "deliveries", "protolab/s", "floor/s", "ratio", "grouped: protolab/s", "floor/s", "ratio",
         "peak RSS MB (simulation)", "peak RSS MB ('protolab run')"],
        [[f"{r['tasks']:,}", f"{r['deliveries']:,}", f"{r['project_per_s']:,.0f}", f"{r['floor_per_s']:,.0f}",
          f"{r['ratio']:.2f}", f"{r['grouped']['project_per_s']:,.0f}", f"{r['grouped']['floor_per_s']:,.0f}",
          f"{r['grouped']['ratio']:.2f}", r["peak_rss_mb"], r["command_peak_rss_mb"]] for r in result["sizes"]],
        caption="floor: bare sqlite3 replaying the run's own write statements, same transactions; first one "
                "transaction per delivery, the run and its floor timed alternately every 250 deliveries (target "
                "ratio >= 0.5; up to 10,000 tasks the median of --repeat runs, "
                "each run's ratio in --json), then grouped commits as 'protolab run' makes them; "
                "'protolab run': the whole command (simulation, summary, invariants) in its own process; "
                f"ratios project over floor; {_load_text(result)}",
        as_json=as_json, data=result,
    )


@bench_app.command("writers")
def bench_writers_cmd(
    processes: int = typer.Option(4, "--processes", help="Concurrent 'protolab deliver' processes on one database."),
    n: int = typer.Option(10_000, "-n", help="Deliveries of its own per process (plus contended ones)."),
    as_json: bool = JSON_OPT,
):
    """Many writers on one database: deliveries/s, lost (must be 0), clock violations (must be 0), beside one process."""
    from ..bench import bench_writers as run

    if processes < 1 or n < 10:
        raise InputError("--processes must be at least 1 and -n at least 10", code="E_USAGE")
    result = run(processes, n, shared=max(1, n // 100))
    output_rows(
        f"bench writers: {processes} processes x {n:,} deliveries (+ contended ones) on one database",
        ["", "processes", "deliveries", "seconds", "deliveries/s", "lost", "clock violations"],
        [[k, r["processes"], f"{r['deliveries']:,}", r["seconds"], f"{r['per_s']:,.0f}", r["lost"], r["clock_violations"]]
         for k, r in (("concurrent", result["concurrent"]), ("one process", result["one_process"]))],
        caption="lost and clock violations must be 0; each process pays its own start-up",
        as_json=as_json, data=result,
    )


def _played_lab(folder: Path, number: int = 4):
    """A lab played by its reference path into ``folder``: (its number, its run, its progress file)."""
    from ..labs.catalog import get_lab
    from ..labs.paths import play, reference
    from ..labs.resume import open_lab_run
    from ..labs.session import LabSession
    from ..store import ProgressStore

    lab = get_lab(str(number))
    db, prog = folder / lab.default_db, folder / "progress.db"
    run = open_lab_run(lab, db)  # as 'protolab lab start' makes it: marked, with the journal verify replays
    progress = ProgressStore.open(prog)
    try:
        session = LabSession(lab, run.store, progress)
        session.refresh()
        play(run.live, session, reference(lab))
    finally:
        run.close()
        progress.close()
    return lab.number, db, prog


@bench_app.command("crash")
def bench_crash_cmd(
    cycles: int = typer.Option(200, "--cycles", help="How many kills (200 x 20,000 tasks takes about an hour; "
                               "with --command all, shared between the commands)."),
    tasks: int = typer.Option(20_000, "--tasks", help="Tasks in the stress run that is killed."),
    seed: int = typer.Option(0, "--seed", min=0, help="Seeds the moments of the kills."),
    command: Optional[str] = typer.Option(None, "--command", help="run, deliver, lab-submit or all: kill that "
                                          "command at every phase, half the kills at hook steps (every step of "
                                          "putting a run in place, commits, the output file's rename), half at "
                                          "random moments, and report per phase. Without it: the random kills of "
                                          "'run stress' alone, as before."),
    envelopes: int = typer.Option(2000, "--envelopes", help="With --command deliver or all: envelopes in the file delivered."),
    as_json: bool = JSON_OPT,
):
    """The crash loop: kill -9 a run at random moments; the partial file must be whole, hold every invariant and replay."""
    from ..bench import CRASH_COMMANDS, bench_crash, bench_crash_all

    if cycles < 1 or tasks < 100:
        raise InputError("--cycles must be at least 1 and --tasks at least 100", code="E_USAGE")
    if command is not None:
        if command not in (*CRASH_COMMANDS, "all"):
            raise InputError(f"--command must be one of {', '.join(CRASH_COMMANDS)} or all, not {command!r}",
                             code="E_USAGE")
        if envelopes < 30:
            raise InputError("--envelopes must be at least 30", code="E_USAGE")
        commands = CRASH_COMMANDS if command == "all" else (command,)
        kw = dict(commands=commands, tasks=tasks, envelopes=envelopes, lab_setup=_played_lab, seed=seed)
        if as_json:
            r = bench_crash_all(cycles, **kw)
        else:
            from rich.progress import Progress

            with Progress(console=_console(), transient=True) as bar:
                r = bench_crash_all(cycles, progress=bar, **kw)
        rows = []
        for name, o in r["commands"].items():
            for phase, n in sorted(o["phases"].items()):
                rows.append([name, phase, n])
        problems = ["corrupt", "lost", "not_a_prefix", "invariant_failures", "replay_mismatches", "partials_left",
                    "inputs_changed"]
        caption = "; ".join(
            f"{name}: {o['kills']} kills of {o['attempts']} attempts ({o['finished_before_kill']} ended first), "
            + ", ".join(f"{k.replace('_', ' ')} {o[k]}" for k in problems)
            + f", temporary folders left {o['temporary_folders_left']}, whole run {o['whole_seconds']} s"
            for name, o in r["commands"].items())
        output_rows(f"bench crash: {r['kills']} x kill -9, {r['problems']} problems (must be 0), {r['seconds']} s",
                    ["command", "phase", "kills"], rows, caption=caption, as_json=as_json, data=r)
        return
    if as_json:
        r = bench_crash(cycles, tasks, seed=seed)
    else:
        from rich.progress import Progress

        with Progress(console=_console(), transient=True) as bar:
            r = bench_crash(cycles, tasks, seed=seed, progress=bar)
    output_rows(
        f"bench crash: {r['cycles']} x kill -9 of a {tasks:,}-task run ({r['whole_run_seconds']} s whole)",
        ["corrupt", "replay mismatches", "invariant failures", "completed db replaced", "killed before the schema",
         "deliveries in the partials"],
        [[r["corrupt"], r["replay_mismatches"], r["invariant_failures"], r["replaced"], r["empty"],
          f"{r['partial_deliveries_min']:,} to {r['partial_deliveries_max']:,}"]],
        caption="the first four must be 0" + (
            f"; {r['finished_before_kill']} run(s) ended before their moment to die (a busy machine) and are not counted"
            if r["finished_before_kill"] else ""),
        as_json=as_json, data=r,
    )


@bench_app.command("lab")
def bench_lab_cmd(
    events: int = typer.Option(100_000, "--events", help="Events in the run the checkpoints are evaluated on (100,000 takes a few minutes)."),
    steps: int = typer.Option(300, "--steps", help="Deliveries timed, each followed by a checkpoint refresh."),
    as_json: bool = JSON_OPT,
):
    """A lab's checkpoints re-checked after each delivery on a large run, beside reading the same new rows; and lab start."""
    from ..tui.bench import FRAME_MS, bench_lab

    if events < 100 or steps < 10:
        raise InputError("--events must be at least 100 and --steps at least 10", code="E_USAGE")
    if as_json:
        _print_json(bench_lab(events, steps))
        return
    from rich.progress import Progress

    with Progress(console=_console(), transient=True) as bar:
        task = bar.add_task("building the run", total=events)
        r = bench_lab(events, steps, progress=lambda done, total: bar.update(task, completed=done))
    typer.echo(f"lab checkpoints on a {r['events']:,}-event run: {r['tick_median_ms']} ms per refresh (median, "
               f"p99 {r['tick_p99_ms']} ms; one frame is {FRAME_MS:.1f} ms)  |  floor {r['floor_median_ms']} ms "
               f"(reading the same new rows)  |  ratio {r['ratio']}  |  first refresh {r['cold_refresh_ms']} ms")
    typer.echo(f"lab start: {r['lab_start_ms']} ms to the first frame  |  floor {r['plain_start_ms']} ms (the same run "
               f"without a lab)  |  ratio {r['start_ratio']}")


@bench_app.command("grade")
def bench_grade_cmd(
    n: int = typer.Option(200, "-n", help="Generated submissions of exercise 1 (200 takes a few minutes on 2 cores)."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, help="Tests judged at once (default: every core)."),
    as_json: bool = JSON_OPT,
    course: Optional[Path] = COURSE_OPT,
):
    """The grader on a generated class (correct, partly wrong and hostile mixed): submissions per minute
    and peak memory, beside the same class judged in one process with no isolation."""
    from ..course.benchgrade import bench_grade

    _course(course)
    if n < 10:
        raise InputError("-n must be at least 10", code="E_USAGE")
    if as_json:
        _print_json(_loaded(bench_grade, n, jobs))
        return
    from rich.progress import Progress

    with Progress(console=_console(), transient=True) as bar:
        tasks = {}

        def step(stage, done, total):
            if stage not in tasks:
                tasks[stage] = bar.add_task("grading (isolated)" if stage == "grader" else "the floor (one process)",
                                            total=total)
            bar.update(tasks[stage], completed=done)

        r = _loaded(bench_grade, n, jobs, progress=step)
    typer.echo(f"grader: {r['submissions']} submissions x {r['tests_each']} tests in {r['seconds']} s = "
               f"{r['per_minute']} per minute on {r['jobs']} jobs in {r['sandbox']}  |  peak memory {r['grader_peak_mb']} MB "
               f"(largest child {r['largest_child_mb']} MB)")
    typer.echo(f"floor: {r['floor_submissions']} submissions in {r['floor_seconds']} s = {r['floor_per_minute']} per "
               f"minute, one process, no isolation ({r['floor_skipped']} hostile ones skipped: they would end it)  |  "
               f"ratio {r['ratio']} (time per submission, grader over floor: what isolation costs)  |  {_load_text(r)}")
    for line in r["unexpected_scores"]:
        typer.echo(f"  unexpected: {line}")


@bench_app.command("trace")
def bench_trace(
    n: int = typer.Option(1_000_000, "-n", help="Messages in the generated trace."),
    repeat: int = typer.Option(1, "--repeat", "-r", min=1, help="Time each command this many times, interleaved; the best counts."),
    memory: Optional[str] = typer.Option(None, "--memory", help="Instead: peak memory of trace validate and trace diagram "
                                         "at these sizes (e.g. 10000,100000,1000000) beside the floors."),
    as_json: bool = JSON_OPT,
):
    """Validate a generated trace beside json.load of the same file, in process and as the command a user
    runs; the command beside two floors: python -c json.load, and msgspec's raw decode (collector off).
    With --memory: each command's peak resident memory at each size, beside the floors."""
    from ..bench import bench_trace as run

    if memory is not None:
        from ..bench import trace_memory

        try:
            sizes = tuple(int(x) for x in memory.split(",") if x.strip())
        except ValueError:
            raise InputError(f"--memory takes sizes like 10000,100000: {memory!r}", code="E_USAGE") from None
        if not sizes or min(sizes) < 12:
            raise InputError("--memory: each size must be at least 12", code="E_USAGE")
        r = trace_memory(sizes)
        if as_json:
            _print_json(r)
            return
        typer.echo("peak resident memory (MB), each command a process of its own:")
        typer.echo(f"{'messages':>10} {'file':>8} {'validate':>9} {'diagram':>8} {'json.load':>10} {'read':>6}"
                   "  validate/json.load  validate/read  diagram/read")
        for row in r["sizes"]:
            typer.echo(f"{row['messages']:>10,} {row['file_mb']:>7}M {row['validate_mb']:>9} {row['diagram_mb']:>8} "
                       f"{row['floor_json_load_mb']:>10} {row['floor_read_mb']:>6}  {row['validate_vs_json_load']:>18}"
                       f"  {row['validate_vs_read']:>13}  {row['diagram_vs_read']:>12}")
        typer.echo("(trace export needs a run of that size: docs/performance.md has its figures)")
        return

    if n < 12:
        raise InputError("-n must be at least 12", code="E_USAGE")
    r = run(n, repeat)
    if as_json:
        _print_json(r)
        return
    typer.echo(f"trace: {r['messages']:,} messages ({r['file_mb']} MB)\n"
               f"  in process: validate {r['validate_seconds']} s (the fast path from the bytes, collector off: {r['fast_validate_seconds']} s)"
               f"  |  floor json.load {r['json_load_seconds']} s  |  ratio {r['ratio']:.2f}  |  peak RSS {r['peak_rss_mb']} MB\n"
               f"  the command: protolab trace validate {r['command_seconds']} s (peak RSS {r['command_peak_rss_mb']} MB; "
               f"json.load {r['json_load_command_peak_rss_mb']} MB, msgspec {r['msgspec_command_peak_rss_mb']} MB)"
               + (f", best of {r['repeat']}" if r["repeat"] > 1 else "") + "\n"
               f"    floor python -c json.load {r['json_load_command_seconds']} s  |  ratio {r['command_ratio']:.2f} "
               "(target: at most 1.0)\n"
               f"    floor msgspec raw decode {r['msgspec_command_seconds']} s  |  ratio {r['msgspec_ratio']:.2f} "
               "(target: at most 2.0)")


@bench_app.command("tui")
def bench_tui_cmd(
    events: int = typer.Option(100_000, "--events", help="Build a finished stress run with about this many events."),
    db: Optional[Path] = typer.Option(None, "--db", help="Measure this finished run instead of building one."),
    samples: int = typer.Option(300, "--samples", help="Random scroll positions to draw (at least 10)."),
    datatable: bool = typer.Option(False, "--datatable", help="Also time Textual's DataTable holding every event row."),
    as_json: bool = JSON_OPT,
):
    """Open a large finished run in the TUI (headless) and scroll it; floors: bare sqlite3 reads."""
    import tempfile

    from ..tui.bench import bench_tui, make_run

    if events < 100 or samples < 10:
        raise InputError("--events must be at least 100 and --samples at least 10", code="E_USAGE")
    load = _machine_load()
    with tempfile.TemporaryDirectory() as tmp:
        path = db
        if path is None:
            path = Path(tmp) / "bench-tui.db"
            with _progress(True) as bar:
                make_run(path, events, progress=bar)
        else:
            from ..store import Store

            Store.open(path, readonly=True).close()  # refuses a missing, corrupt or foreign file
        out = bench_tui(path, samples=samples, datatable=datatable)
    out["load"] = _load_after(load)
    if as_json:  # (the rows below read keys a JSON reader does not need)
        _print_json(out)
        return
    rows = [
        ["open to first frame", f"{out['open_s']:.3f} s", f"{out['floor_open_s'] * 1000:.2f} ms",
         ("under 2 s" if out["open_s"] < 2 else "OVER 2 s") + "; floor: bare sqlite3 reads"],
        ["  an empty Textual app, for scale", "", f"{out['floor_empty_app_s']:.3f} s", "floor: Textual's own start"],
        ["one frame while scrolling (median)", f"{out['frame_ms_median']} ms", f"{out['floor_frame_ms_median']} ms",
         f"p95 {out['frame_ms_p95']} ms"],
        ["page down, through the keyboard", f"{out['pagedown_ms']} ms", f"{out['floor_key_ms']} ms", "floor: an unbound key"],
    ]
    if "datatable_open_s" in out:
        rows.append(["DataTable with every row (avoided)", f"{out['datatable_open_s']} s", "", ""])
    output_rows(f"bench tui: {out['events']:,} events at {out['terminal']}", ["", "protolab", "floor", "note"], rows,
                caption=f"ratios project over floor: open {out['open_ratio']}, frame {out['frame_ratio']}; {_load_text(out)}")


@bench_app.command("startup")
def bench_startup(as_json: bool = JSON_OPT, repeat: int = typer.Option(21, "--repeat", min=1, help="Rounds (help, version, the floor and the light commands take turns); the best of each is kept."),
                  commands: bool = typer.Option(True, "--commands/--no-commands", help="Time the light commands (state, events, messages, machine show, check) on a small run too.")):
    """Wall time of 'protolab --help', '--version' and the light commands beside a bare 'python -c pass'
    (target: each within 3x)."""
    from ..bench import bench_startup as run

    result = _loaded(run, repeat, commands=commands)
    if as_json:
        _print_json(result)
        return
    light = result.get("commands") or {}
    cmds = ("  |  light commands on a small run (ms, over the floor): "
            + ", ".join(f"{name} {c['ms']:.0f} ({c['ratio']:.2f})" for name, c in light.items())
            + f", target at most 3: {'within' if result.get('commands_within_3x') else 'OVER'}") if light else ""
    typer.echo(
        f"startup: protolab --help {result['help_ms']:.0f} ms, --version {result['version_ms']:.0f} ms  |  "
        f"floor python -c pass {result['floor_ms']:.0f} ms  |  ratio {result['ratio']:.2f} (--help over the floor; "
        f"--version {result['version_ratio']:.2f})  |  target at most 3: {'within' if result['within_3x'] else 'OVER'}"
        f"{cmds}  |  {_load_text(result)}"
    )



@bench_app.command("web")
def bench_web_cmd(
    deliveries: str = typer.Option("1000,10000", "--deliveries", help="Comma-separated run sizes, in deliveries "
                                                                     "(stress runs of about that many)."),
    repeat: int = typer.Option(5, "--repeat", min=1, help="Times each figure is taken (best or median kept)."),
    as_json: bool = JSON_OPT,
):
    """The timeline page (size, write time) beside the same rows written as plain JSON, and Datasette's
    table pages (in-process, no server) beside the same query through bare sqlite3."""
    from ..bench import bench_web as run
    from ..web.datasette import time_pages

    try:
        ns = [int(x) for x in deliveries.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--deliveries {deliveries!r} must be comma-separated integers", code="E_USAGE") from None
    if not ns or min(ns) < 10:
        raise InputError("--deliveries needs at least one size, each at least 10", code="E_USAGE")
    with _progress(not as_json) as bar:
        result = run(ns, pages=time_pages, repeat=repeat, progress=bar)
    output_rows(
        "bench web: the timeline page beside plain JSON of the same rows",
        ["deliveries", "page MB", "write s", "--no-check s", "floor s", "ratio", "--no-check ratio"],
        [[f"{r['deliveries']:,}", f"{r['timeline']['page_bytes'] / 1e6:.2f}", f"{r['timeline']['write_seconds']:.3f}",
          f"{r['timeline']['no_check_seconds']:.3f}", f"{r['timeline']['floor_seconds']:.3f}",
          f"{r['timeline']['ratio']:.2f}", f"{r['timeline']['no_check_ratio']:.2f}"] for r in result["sizes"]],
        caption="write: read through the store, invariants checked, page drawn and written (best of "
                f"{result['repeat']}); floor: the same deliveries, envelopes and events read through the store and "
                "written with json.dumps",
        as_json=as_json, data=result,
    )
    if as_json:
        return
    output_rows(
        "bench web: Datasette's table pages (in-process client) beside the same query through sqlite3",
        ["deliveries", "page", "Datasette ms", "floor ms", "ratio"],
        [[f"{r['deliveries']:,}", "/ (first fetch)", f"{r['datasette_first_ms']:.0f}", "", ""] for r in result["sizes"]]
        + [[f"{r['deliveries']:,}", f"/{t}", f"{p['page_ms']:.1f}", f"{p['floor_ms']:.2f}", f"{p['ratio']:.0f}x"]
           for r in result["sizes"] for t, p in r["datasette"].items()],
        caption=f"median of {result['repeat']}; floor: the page's 51 rows and the table's count, bare sqlite3, "
                "no facets, no HTML",
    )


@bench_app.command("memory")
def bench_memory_cmd(
    sizes: str = typer.Option("10000,100000", "--sizes", help="Comma-separated task counts of the stress runs "
                              "(100,000 tasks: about half an hour on 2 busy cores; 1,000,000: hours)."),
    folder: Optional[Path] = typer.Option(None, "--dir", help="Keep the runs in this folder, and reuse those already "
                                          "there (a reused run's own figures are the ones kept beside it); default: "
                                          "a scratch folder, removed after."),
    as_json: bool = JSON_OPT,
):
    """Each command's whole peak memory and CPU (wait4) beside 'protolab run''s, at each size, and each
    command's CPU factor from one size to the next (linear: about the sizes' ratio; issue 50 asks under 1.1x it)."""
    import tempfile

    from ..benchmem import bench_memory as run

    try:
        ns = [int(x) for x in sizes.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--sizes {sizes!r} must be comma-separated integers", code="E_USAGE") from None
    if not ns or min(ns) < 1:
        raise InputError("--sizes needs at least one positive task count", code="E_USAGE")
    with tempfile.TemporaryDirectory(prefix="protolab-bench-memory-") as scratch, \
            _progress(not as_json, redirect_stdout=False) as bar:
        result = run(ns, folder or Path(scratch), progress=bar)
    names = list(result["sizes"][0]["commands"])
    columns = ["command"] + [f"{r['tasks']:,} tasks" for r in result["sizes"]] + \
              [f"CPU x ({f['from']:,} to {f['to']:,})" for f in result["factors"]]
    rows = []
    for name in names:
        cells = []
        for r in result["sizes"]:
            f = r["commands"][name]
            cells.append(f"{f['peak_mb']:,.0f} MB, {f['cpu_s']:,.1f} s" + (" (kept)" if f.get("reused") else "")
                         + (" FAILED" if f.get("failed") else ""))
        rows.append([name] + cells + [f"{f['cpu'][name]:.2f} (runs x{f['size_ratio']:g})" for f in result["factors"]])
    output_rows("bench memory: each command's peak RSS and CPU (user + system), in its own process",
                columns, rows, as_json=as_json, data=result,
                caption="stress runs: " + ", ".join(f"{r['tasks']:,} tasks = {r['deliveries']:,} deliveries"
                                                    for r in result["sizes"]) + "; "
                        "'run' is the whole command (simulation, summary, invariants); kept: figures recorded when "
                        "the run was made (--dir)")
