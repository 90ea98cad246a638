"""'protolab lab': guided labs: the menu, list, status, start, check, submit, verify."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

import typer

from ..errors import InputError, ProtolabError
from .common import JSON_OPT, _console, _interactive, _progress


lab_app = typer.Typer(help="Guided labs played in the TUI, checked live from your own run: list, start, check, "
                           "status, submit, verify. 'protolab lab' alone opens the lab menu.",
                      invoke_without_command=True)


PROGRESS_FILE = "protolab-progress.db"


PROGRESS_OPT = typer.Option(None, "--progress",
                            help=f"Your lab progress file (checkpoints' actions, answers, time spent; default: {PROGRESS_FILE} "
                                 "in this folder or the nearest folder above it that has one).")
LAB_DB_OPT = typer.Option(None, "--db", help="Your run (default: the one your progress file recorded, "
                                             "else labNN.db beside it).")


def _shown_path(p: Path) -> Path:
    """``p`` as a learner would type it from here: relative to this folder when it is below it."""
    try:
        full, here = Path(p).resolve(), Path.cwd().resolve()
        return Path(os.path.relpath(full, here)) if full.is_relative_to(here) else full
    except (OSError, ValueError):
        return Path(p)


def _find_progress(progress: Optional[Path]) -> tuple[Path, bool]:
    """The progress file: the one given, or ``protolab-progress.db`` in this folder or the nearest
    folder above it that has one (like git finds its repository). ``(path, exists)``; when none
    is found, the path is this folder's (where 'lab start' creates it)."""
    if progress is not None:
        return progress, progress.exists()
    here = Path.cwd()
    for d in (here, *here.parents):
        if (d / PROGRESS_FILE).is_file():
            return _shown_path(d / PROGRESS_FILE), True
    return Path(PROGRESS_FILE), False


def _not_found(progress: Optional[Path]) -> str:
    if progress is not None:
        return f"{progress} does not exist"
    return (f"no {PROGRESS_FILE} in {Path.cwd()} or any folder above it: run from the folder where you played the labs, "
            "or point to the file with --progress FILE")


def _lab_db(lab, db: Optional[Path], progress_path: Path, prog) -> Path:
    """The lab's run: the --db given, else the one the progress file recorded for the lab (a path
    relative to the progress file's folder), else labNN.db beside the progress file."""
    if db is not None:
        return db
    rec = prog.session(lab.number) if prog is not None else None
    if rec:
        p = Path(rec["db"])
        return _shown_path(p if p.is_absolute() else Path(progress_path).parent / p)
    return _shown_path(Path(progress_path).parent / lab.default_db)


def _recorded_db(db: Path, progress_path: Path) -> str:
    """How the progress file records a lab's run: relative to its own folder when below it."""
    full, base = Path(db).resolve(), Path(progress_path).resolve().parent
    return str(full.relative_to(base)) if full.is_relative_to(base) else str(full)


def _lab_judged(lab, db: Path, prog):
    """The lab's judgement of the run at ``db`` (:mod:`sim.labs.judge`: re-delivered, checkpoints
    and answers evaluated afresh), with what ``prog`` recorded (None: nothing recorded)."""
    from ..labs.judge import check_file_fits, judge_progress
    from ..store import ProgressStore, Store

    check_file_fits(lab, db)
    store = Store.open(db, readonly=True)
    empty = ProgressStore.open(None) if prog is None else None
    try:
        return judge_progress(lab, store, prog if prog is not None else empty)
    finally:
        store.close()
        if empty is not None:
            empty.close()


def _lab_rows(progress: Optional[Path]) -> tuple[list[dict], Path, bool]:
    """Every lab with its run judged as 'lab check' judges it (rows, the progress file, found)."""
    from ..labs.catalog import labs

    path, found = _find_progress(progress)
    prog = _open_progress(path, must_exist=False)
    try:
        rows = []
        for lab in labs():
            session = prog.session(lab.number) if prog else None
            db = _lab_db(lab, None, path, prog)
            row = {"number": lab.number, "slug": lab.slug, "title": lab.title, "minutes": lab.minutes,
                   "needs": list(lab.needs), "checkpoints": len(lab.checkpoints), "done": 0,
                   "questions": len(lab.questions), "answered": 0,
                   "seconds": round(session["seconds"]) if session else 0, "run": None, "genuine": None, "note": ""}
            if db.exists():
                row["run"] = str(db)
                try:
                    j = _lab_judged(lab, db, prog)
                    row.update(done=j.done, answered=j.answered, genuine=j.genuine)
                    if j.genuine is False:
                        row["note"] = "run not genuine: verification gives it 0"
                except ProtolabError as e:
                    row["note"] = f"{e.code}: {e.message}"
            rows.append(row)
        return rows, path, found
    finally:
        if prog is not None:
            prog.close()


def _open_progress(path: Path, *, must_exist: bool, readonly: bool = True):
    """The progress file; None when it does not exist and need not."""
    from ..store import ProgressStore

    if not Path(path).exists() and not must_exist:
        return None
    return ProgressStore.open(path, create=not readonly, readonly=readonly)


@lab_app.callback()
def lab_menu(ctx: typer.Context, progress: Optional[Path] = PROGRESS_OPT):
    """The lab menu in the TUI (with no command): number, title, minutes, checkpoints, progress."""
    if ctx.invoked_subcommand is not None:
        return
    if not _interactive():
        raise InputError("the lab menu needs a terminal; 'protolab lab list' prints it", code="E_NOT_A_TERMINAL")
    rows, _path, _found = _lab_rows(progress)
    from ..tui.guide import LabMenu

    chosen = LabMenu(rows).run()
    if chosen is not None:
        lab_start(None, str(chosen), db=None, progress=progress, fresh=False)  # reopens (resumes) the lab's run


def _progress_given(ctx, progress: Optional[Path]) -> Optional[Path]:
    """--progress after the subcommand, or before it ('protolab lab --progress F check 3')."""
    if progress is not None or ctx is None or ctx.parent is None:
        return progress
    return ctx.parent.params.get("progress")


@lab_app.command("list")
def lab_list(ctx: typer.Context, as_json: bool = JSON_OPT, progress: Optional[Path] = PROGRESS_OPT):
    """Every lab: number, title, minutes, what it needs first, checkpoints done of total (your runs, judged)."""
    progress = _progress_given(ctx, progress)
    rows, path, found = _lab_rows(progress)
    if as_json:
        keep = ("number", "slug", "title", "minutes", "needs", "checkpoints", "done")
        typer.echo(json.dumps([{k: r[k] for k in keep} for r in rows], indent=2))
        return
    from rich.table import Table

    from ..tui.guide import progress_bar

    t = Table(box=None, header_style="bold")
    for col in ("#", "lab", "min", "needs", "checkpoints", ""):
        t.add_column(col, overflow="fold")
    for r in rows:
        t.add_row(str(r["number"]), r["title"], str(r["minutes"]), ", ".join(map(str, r["needs"])) or "-",
                  f"{r['done']}/{r['checkpoints']}", progress_bar(r["done"], r["checkpoints"]))
    _console().print(t)
    typer.echo("protolab lab start N opens lab N in the TUI"
               + (f" (progress: {path})" if found else f"; {_not_found(progress)}"))


@lab_app.command("status")
def lab_status(ctx: typer.Context, as_json: bool = JSON_OPT, progress: Optional[Path] = PROGRESS_OPT):
    """Your progress over all labs, each run judged as 'lab check' and 'lab verify' judge it:
    checkpoints met, questions answered right, time spent."""
    progress = _progress_given(ctx, progress)
    rows, path, found = _lab_rows(progress)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    from rich.table import Table

    from ..tui.guide import progress_bar

    t = Table(box=None, header_style="bold")
    for col in ("#", "lab", "checkpoints", "", "questions", "time", "run"):
        t.add_column(col)
    for r in rows:
        t.add_row(str(r["number"]), r["title"], f"{r['done']}/{r['checkpoints']}", progress_bar(r["done"], r["checkpoints"]),
                  f"{r['answered']}/{r['questions']}", f"{r['seconds'] // 60} min" if r["seconds"] else "-",
                  r["note"] or (r["run"] or "-"))
    _console().print(t)
    done = sum(r["done"] == r["checkpoints"] and r["answered"] == r["questions"] and r["genuine"] is not False
               for r in rows)
    typer.echo(f"{done} of {len(rows)} labs complete" + (f" (progress: {path})" if found else f"; {_not_found(progress)}"))


@lab_app.command("start")
def lab_start(
    ctx: typer.Context,
    which: str = typer.Argument(..., help="The lab: its number (3) or slug (duplicate-delivery)."),
    db: Optional[Path] = typer.Option(None, "--db", help="Where your run is written (default: the one your progress "
                                                         "file recorded, else labNN.db beside it)."),
    progress: Optional[Path] = PROGRESS_OPT,
    fresh: bool = typer.Option(False, "--fresh", help="Start the lab over: a new run replaces this lab's run, and "
                                                      "the lab's progress (actions, answers) is forgotten."),
):
    """Open a lab in the TUI: the run, paused, with the Guide panel beside State, Events and Messages.
    A lab played before is resumed where you left it (its run is replayed from its journal)."""
    from ..labs.catalog import get_lab

    progress = _progress_given(ctx, progress)
    lab = get_lab(which)
    if not _interactive():
        raise InputError(f"a lab is played in the TUI, which needs a terminal; 'protolab lab check {lab.number}' "
                         "checks a run from the shell", code="E_NOT_A_TERMINAL")
    import shutil

    from ..labs.resume import open_lab_run
    from ..labs.session import LabSession
    from ..store import ProgressStore
    from ..tui.app import MIN_SIZE, ProtolabApp

    cols, rows = shutil.get_terminal_size((80, 24))
    if cols < MIN_SIZE[0] or rows < MIN_SIZE[1]:
        raise InputError(f"the terminal is {cols}x{rows}; a lab needs at least {MIN_SIZE[0]}x{MIN_SIZE[1]} "
                         "(80x24 or more is comfortable)", code="E_TERMINAL_TOO_SMALL")
    path, _found = _find_progress(progress)
    prog = ProgressStore.open(path)
    try:
        db = _lab_db(lab, db, path, prog)
        run = open_lab_run(lab, db, fresh=fresh)  # refuses (and keeps every file) before anything is forgotten
        try:
            if fresh:
                prog.reset(lab.number)
            prog.start_session(lab.number, _recorded_db(db, path))
            session = LabSession(lab, run.store, prog)
            said = (f"your run of lab {lab.number}, resumed: {run.store.last_delivery()} deliveries"
                    if run.resumed else "")
            if lab.mode == "hand-delivery":
                app = ProtolabApp(run.store, lab=session, watch=True,
                                  label=f"lab {lab.number} · delivered by hand: protolab deliver FILE --db {db}")
            elif lab.mode == "workshop":
                # naive beside the learner's (safe) run: same scenario, seed and faults, in memory;
                # the checks read the learner's run, which is the file lab check and submit use
                from ..tui.workshop import WorkshopApp

                app = WorkshopApp(run.naive, run.live, lab=session)
            else:
                app = ProtolabApp(run.store, live=run.live, play=False, lab=session)
            app.message_line = said
            app.run()
        finally:
            run.close()
        j = _lab_judged(lab, db, prog)
        typer.echo(f"lab {lab.number}: {j.done}/{j.total} checkpoints met, {j.answered}/{j.questions} questions answered; "
                   f"your run is in {db} (protolab lab check {lab.number}; protolab lab start {lab.number} resumes it)")
    finally:
        prog.close()


@lab_app.command("check")
def lab_check(
    ctx: typer.Context,
    which: str = typer.Argument(..., help="The lab: its number or slug."),
    db: Optional[Path] = LAB_DB_OPT,
    progress: Optional[Path] = PROGRESS_OPT,
    as_json: bool = JSON_OPT,
):
    """The lab judged as 'lab verify' and 'grade lab' will judge it: your run re-delivered, every
    checkpoint evaluated on it afresh. Exit 0 when the run is genuine and every checkpoint is met,
    1 otherwise (each unmet one with its hint)."""
    from ..labs.catalog import get_lab

    progress = _progress_given(ctx, progress)
    lab = get_lab(which)
    path, found = _find_progress(progress)
    prog = _open_progress(path, must_exist=False)
    try:
        db = _lab_db(lab, db, path, prog)
        if not db.exists():
            where = "" if found or progress is not None else f" ({_not_found(progress)})"
            raise InputError(f"{db} does not exist; play the lab first with 'protolab lab start {lab.number}'{where}",
                             code="E_DB_MISSING")
        j = _lab_judged(lab, db, prog)
    finally:
        if prog is not None:
            prog.close()
    summary = j.to_dict()
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        typer.echo(f"lab {lab.number}: {lab.title}  ({j.done}/{j.total} checkpoints, run {db})")
        if j.genuine is False:
            typer.echo(f"  run: NOT genuine: {j.difference} (lab verify and grade lab give it 0)")
        if not j.made_by_lab:
            typer.echo(f"  note: 'protolab lab start {lab.number}' did not make this run; what you did in the TUI on "
                       "the lab's own run does not count here")
        for c in summary["checkpoints"]:
            typer.echo(f"  {'✓' if c['met'] else '✗'} {c['title']}" + (" (self-reported)" if c["self_reported"] else ""))
            if c["met"] and c["shows"]:
                typer.echo(f"      {c['shows']}")
            if not c["met"]:
                typer.echo(f"      hint: {c['hint']}")
        typer.echo(f"questions answered right: {j.answered}/{j.questions} (press a in the TUI)"
                   + ("" if found or progress is not None else f"; {_not_found(progress)}"))
        if j.self_reported:
            typer.echo("self-reported: met by what you did on screen (a view opened, a visit in time), which nothing "
                       "can replay; 'lab verify' lists it apart and your instructor decides whether it counts")
    if not j.all_met:
        raise typer.Exit(1)


@lab_app.command("submit")
def lab_submit(
    ctx: typer.Context,
    which: str = typer.Argument(..., help="The lab: its number or slug."),
    out: Path = typer.Option(..., "-o", "--output", help="The submission file to write (.protolab)."),
    db: Optional[Path] = LAB_DB_OPT,
    progress: Optional[Path] = PROGRESS_OPT,
):
    """One file for your instructor: the run, your actions and answers, and the judgement 'lab verify' will repeat."""
    from ..labs.catalog import get_lab
    from ..files import check_output
    from ..labs.submit import write_submission

    check_output(out, [db, progress])  # before anything is looked for: never written over a run or progress it reads
    progress = _progress_given(ctx, progress)
    lab = get_lab(which)
    path, found = _find_progress(progress)
    prog = _open_progress(path, must_exist=False)
    try:
        db = _lab_db(lab, db, path, prog)
    finally:
        if prog is not None:
            prog.close()
    summary = write_submission(lab, db, path, out)
    typer.echo(f"wrote {out}: lab {lab.number}, {summary['done']}/{summary['total']} checkpoints, "
               f"{summary['answered']}/{len(summary['questions'])} questions (run {db})")
    if summary["genuine"] is False:
        typer.echo(f"warning: the run is NOT genuine ({summary['difference']}): verification gives it 0", err=True)
    if not found:
        typer.echo(f"note: {_not_found(progress)}; without it, no action or answer of yours is in the file", err=True)


@lab_app.command("verify")
def lab_verify(
    submission: Path = typer.Argument(..., help="A lab submission (.protolab) to verify."),
    as_json: bool = JSON_OPT,
):
    """(Instructors) re-deliver the submitted run through the reference runtime, make it again from the
    lab's start and its journal, and re-check it: exit 0 when the run is genuine (every event explained)
    and every checkpoint is met, 1 otherwise. A checkpoint met only by a screen action the learner's file
    lists (a view opened, a visit in time: nothing can replay it) is listed as self-reported."""
    from ..labs.submit import verify_submission

    with _progress(not as_json) as bar:
        job = bar.add_task("re-delivering the run", total=None)
        result = verify_submission(submission, progress=lambda done, total: bar.update(job, completed=done, total=total))
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        typer.echo(f"lab {result['lab']}: {result['title']}")
        genuine = "genuine (re-delivery gives the same state digest, and the lab's story explains every event)"
        typer.echo(f"  run: {genuine if result['genuine'] else 'NOT genuine: ' + result['difference']}")
        typer.echo(f"  checkpoints: {result['verified']}/{result['total']} verified from the run"
                   + (f", {result['self_reported']} self-reported" if result["self_reported"] else "")
                   + f"  questions: {result['answered']}/{result['questions']}")
        reported = [c for c in result["checkpoints"] if c.get("self_reported")]
        if reported:
            typer.echo("  self-reported (met only by a screen action the file lists, which nothing can replay; "
                       "'grade lab' counts these only with --count-self-reported):")
            for c in reported:
                typer.echo(f"    {c['id']}: {c['title']}")
    if not (result["genuine"] and result["done"] == result["total"]):
        raise typer.Exit(1)

