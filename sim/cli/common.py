"""What every command group shares: the options (--db, --json, --course, a scenario and its faults and
plugged files), reading input files and signals; the console, tables, JSON, progress bars and opening --db
are :mod:`sim.output`'s, re-exported. Nothing here imports the store or Rich at import time."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Optional

import typer

from ..errors import InputError
from ..files import not_a_file

from ..faults import FAULTS as _FAULT_NAMES  # (the help lists the registry's names)
# what a command prints, and how (Typer-free, shared with the light commands of sim.views)
from ..output import (PROGRESS_ROWS, TABLE_ROWS, WIDE, _console, _digest_cell, _json_default, _judged,  # noqa: F401
                      _markup_plain, _mark, _open, _plain, _print_json, _print_json_fields, _print_json_rows, _progress,
                      _rows_progress, _short, _show, _stream_table, _styled, _table, output_rows, show_view)


DB_OPT = typer.Option("protolab.db", "--db", help="The protolab database file.")


JSON_OPT = typer.Option(False, "--json", help="Print JSON instead of tables.")


COURSE_OPT = typer.Option(None, "--course", metavar="DIR", help="(Instructors) the course: your protolab checkout, "
                          "the folder holding pyproject.toml, exercises/ and solutions/ (default: the current folder "
                          "or its parents).")


def _resolve(path: Path) -> Path:
    """A relative path that does not exist here but names a shipped file (data/..., labs/...)
    resolves to the copy inside the installed package, so samples work from any folder."""
    if path.is_absolute() or path.exists() or not path.parts or path.parts[0] not in ("data", "labs", "exercises"):
        return path
    from ..resources import shipped

    candidate = shipped(*path.parts)
    return candidate if candidate.exists() else path


def _read_file(path: Path, what: str) -> bytes:
    if str(path) == "-":
        return sys.stdin.buffer.read()
    path = _resolve(path)
    special = not_a_file(path, what)
    if special is not None and not path.is_dir():  # a FIFO or a device: refused at once, never waited on
        raise special
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{what} {path} does not exist", code="E_FILE_MISSING") from None
    except IsADirectoryError:
        raise InputError(f"{what} {path} is a folder, not a file", code="E_FILE_MISSING") from None
    except OSError as e:
        raise InputError(f"cannot read {what} {path}: {e.strerror}", code="E_FILE_MISSING") from None



def _shipped_scenarios() -> str:
    """The shipped scenarios' names, read from the data folder (not a list kept by hand)."""
    from ..resources import shipped

    return ", ".join(sorted(p.stem for p in shipped("data", "scenarios").glob("*.toml")))


_SCENARIOS = _shipped_scenarios()


SCENARIO_ARG = typer.Argument("publish-report", help=f"A shipped scenario ({_SCENARIOS}) or a .toml file.")


FAULT_OPT = typer.Option(
    [], "--fault", "-f",
    help="NAME, NAME:M-3, NAME:task_result or NAME:0.1. Names: " + ", ".join(_FAULT_NAMES) + ". Repeat for more.",
)


DESIGN_OPT = typer.Option(None, "--design", help="An envelope design (.py: idempotency_key, payload, evidence_refs, "
                          "DIGEST_SCHEME) every agent send goes through, instead of the reference design.")


INTAKE_OPT = typer.Option(None, "--intake", help="An intake policy (.py defining decide(env, task, prior, rules, unresolved)).")


EFFECTS_OPT = typer.Option(None, "--effects", help="An effect-commit rule (.py defining effect_key(result, delivery_id)).")


MACHINE_OPT = typer.Option(None, "--machine", help="A transition table (.toml) for the run's tasks instead of task-v1.")


def _plugins(design=None, intake=None, effects=None, machine=None):
    """The files a run plugs in, checked (they load, they define what they must) before anything is written."""
    from ..plugins import Plugins

    p = Plugins(design=design, intake=intake, effects=effects, machine=machine)
    if p.any():
        p.load("safe")
    return p


def _load_scenario(scenario: str, tasks: Optional[int]):
    from dataclasses import replace

    from ..scenario import load_scenario

    # a shipped file named by its path in the checkout (data/scenarios/x.toml) works from any folder
    sc = load_scenario(str(_resolve(Path(scenario))) if scenario.endswith(".toml") else scenario)
    if tasks is not None:
        if sc.stress is None:
            raise InputError(f"--tasks applies to stress scenarios; {sc.name} has a fixed task list", code="E_USAGE")
        if tasks < 1:
            raise InputError("--tasks must be at least 1", code="E_USAGE")
        sc = replace(sc, stress=replace(sc.stress, tasks=tasks))
    return sc



def _interactive() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty() and os.environ.get("TERM", "") != "dumb"


def _check_run_args(policy: str, faults) -> None:
    """Refuse an unknown policy or a malformed fault before anything is opened or written."""
    from ..faults import parse_fault
    from ..policy import get_policy

    get_policy(policy)
    for f in faults:
        parse_fault(f)


def _designs(design: list[Path]) -> list[Path]:
    if len(design) > 2:
        raise InputError("at most two --design files: one beside the reference, or two side by side", code="E_USAGE")
    for d in design:
        _plugins(design=d)  # load and check each before anything runs
    return list(design)


def _sides(designs: list[Path], policy: str = "safe") -> list[tuple[str, str, object]]:
    """(label, policy, plugins) of the two sides a comparison shows."""
    from ..plugins import Plugins

    if not designs:
        return [("safe", "safe", None), ("naive", "naive", None)]
    if len(designs) == 1:
        return [("reference design", policy, None), (designs[0].name, policy, Plugins(design=designs[0]))]
    a, b = designs
    la, lb = (a.name, b.name) if a.name != b.name else (str(a), str(b))
    return [(la, policy, Plugins(design=a)), (lb, policy, Plugins(design=b))]


_WITNESS_KEYS = (
    "problem", "task_id", "message_id", "key", "old_state", "new_state", "times_committed",
    "carried_lease_version", "current_lease_version", "ref",
)


def _witness_line(r) -> str:
    """The first witness, shortened to the fields a person reads first (--json has all of it)."""
    if r.ok or not r.witnesses:
        return ""
    w = r.witnesses[0]
    parts = [f"{k}={w[k]}" for k in _WITNESS_KEYS if w.get(k) is not None and not isinstance(w[k], (dict, list))]
    if not parts:
        parts = [f"{k}={v}" for k, v in list(w.items())[:4] if not isinstance(v, (dict, list))]
    more = f" (+{len(r.witnesses) - 1} more)" if len(r.witnesses) > 1 else ""
    return ", ".join(parts) + more


def _click_errors(name: str) -> tuple[type, ...]:
    """Click's exception class ``name`` and Typer's vendored copy of it (Typer >= 0.29 has its own)."""
    import click

    mods = [click.exceptions]
    try:
        import typer._click.exceptions as vendored  # type: ignore[import-not-found]

        mods.append(vendored)
    except ImportError:
        pass
    return tuple(getattr(m, name) for m in mods if hasattr(m, name))


def _course(course: Optional[Path]) -> None:
    """--course DIR: the course's solutions (hidden tests, model answers) from now on in this command."""
    if course is not None:
        from ..course.catalog import use_course

        use_course(course)


@contextlib.contextmanager
def _signals_deferred():
    """Hold SIGINT, SIGTERM and SIGHUP until the block ends (one delivery: its commit and its
    outcome stay together); a signal sent meanwhile is raised again as soon as the block ends.

    Held by a handler, not by a signal mask: a mask holds a signal only in the thread that sets it, and
    the kernel gives a signal sent to the process to any thread not holding it (a library's thread, such
    as a BLAS pool's), whose arrival Python then handles in the main thread at once, in the middle of the
    block. A Python handler runs in the main thread whichever thread received the signal."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():  # (handlers are the main thread's)
        yield
        return
    pending: list[int] = []

    def hold(signum, _frame):
        pending.append(signum)

    held = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {}
    try:
        for s in held:
            old[s] = signal.signal(s, hold)
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        if pending:
            signal.raise_signal(pending[0])  # handled now, as it would have been (KeyboardInterrupt...)


def _interrupted(e: BaseException, message: str):
    """Raise :class:`~sim.errors.Interrupted` for a signal that stopped a command (exit 128 + n)."""
    import signal

    from ..errors import Interrupted, signal_of

    signum = signal_of(e) or int(signal.SIGINT)
    raise Interrupted(message.replace("{sig}", signal.Signals(signum).name), signum=signum) from None

