"""The ``protolab`` command line (Typer), one module per command group.

Bad input never produces a traceback: every :class:`~sim.errors.ProtolabError` and every
usage error becomes one line ``error: CODE: message`` on stderr and exit status 2, and
nothing is written. Heavy modules (the store, Textual) are imported inside the commands
that need them so that ``protolab --help`` stays fast.

The groups (a new command goes in its group's module):

    run.py       init, tour, deliver, run, demo, tui, reconcile, digest (runs, and delivery by hand)
    inspect.py   messages, events, state, check, replay, compare (what a run holds, judged)
    trace.py     trace validate, export, replay, mutate, diagram
    machine.py   machine show, check, load
    a2a.py       a2a export (a run as A2A-shaped JSON)
    artifact.py  artifact put, show
    bench.py     bench intake, instructions, sim, writers, crash, lab, grade, trace, tui, startup
    course.py    exercise list, start, check, hint; kit student, classroom, rubric, verify; autograder; grade
    term.py      course init; gradebook show, override, export (the instructor's term)
    lab.py       lab (the menu), list, status, start, check, submit, verify
    explore.py   explore (every delivery order to a depth), shrink (a failing run made minimal); bench explore
    browser.py   timeline (a run as one HTML page), browse (Datasette over a run); --serve lives on demo and tui
    common.py    shared options, opening --db, the console, tables, output_rows, progress bars, signals

This module builds ``app`` from them and holds ``main``, the entry point.
"""

from __future__ import annotations

import sys

import typer

from ..errors import ProtolabError
from . import a2a, artifact, bench, browser, course, explore, inspect, lab, machine, run, term, trace
from .common import _click_errors, _interrupted

__all__ = ["app", "main"]

app = typer.Typer(
    name="protolab",
    help=(
        "protolab: a lab kit for agent message protocols and shared state.\n\n"
        "Start with 'protolab demo' (the terminal UI: a run, stepped, with faults injected live), "
        "'protolab demo regression' (naive beside safe), 'protolab run' (a simulated run, then 'check' "
        "and 'replay') or 'protolab tour' (hand-delivery, step by step). "
        "Messages, events and state are kept apart: look at each with 'messages', 'events' and 'state'."
    ),
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from .. import __version__  # the one place the version is written (pyproject.toml reads it too)

        typer.echo(f"protolab {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                       help="Print protolab's version and exit.")) -> None:
    """protolab: a lab kit for agent message protocols and shared state."""


#: The top-level commands in the order 'protolab --help' lists them (a command not named here comes after them).
_ORDER = ("init", "tour", "deliver", "messages", "events", "state", "run", "demo", "tui", "compare", "replay", "check",
          "explore", "shrink", "reconcile", "digest", "autograder", "grade")


def _name(info) -> str:
    return info.name or info.callback.__name__.replace("_", "-")


app.registered_commands = sorted(
    (c for group in (run, inspect, explore, course, browser) for c in group.commands.registered_commands),
    key=lambda c: _ORDER.index(_name(c)) if _name(c) in _ORDER else len(_ORDER),
)
for _group, _group_name in ((machine.machine_app, "machine"), (artifact.artifact_app, "artifact"),
                            (bench.bench_app, "bench"), (course.exercise_app, "exercise"), (trace.trace_app, "trace"),
                            (course.kit_app, "kit"), (course.feedback_app, "feedback"), (lab.lab_app, "lab"),
                            (a2a.a2a_app, "a2a"), (term.course_app, "course"), (term.gradebook_app, "gradebook")):
    app.add_typer(_group, name=_group_name)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the app, turning every error into one line and exit 2.

    SIGTERM and SIGHUP unwind like Ctrl-C (every cleanup runs) and exit with 128 + the signal."""
    from ..errors import catch_termination, signal_of

    catch_termination()
    try:
        try:
            rv = app(args=argv, prog_name="protolab", standalone_mode=False)
        except SystemExit as e:
            # click answers a closed pipe with exit 1 after muting stdout: end quietly instead
            if e.code == 1 and "PacifyFlushWrapper" in type(sys.stdout).__name__:
                sys.exit(0)
            raise
        except (KeyboardInterrupt, *_click_errors("Abort")) as e:
            if signal_of(e) is None:
                raise
            _interrupted(e, "interrupted by {sig}; every transaction committed before it stays, the one under way "
                            "was rolled back")
    except ProtolabError as e:
        sys.stderr.write(f"error: {e.one_line()}\n")
        sys.exit(getattr(e, "exit_status", 2))
    except _click_errors("NoArgsIsHelpError") as e:
        # bare 'protolab' or 'protolab bench': show the help; that is not an error
        ctx = getattr(e, "ctx", None)
        if ctx is not None:
            sys.stdout.write(ctx.get_help() + "\n")
        sys.exit(0)
    except _click_errors("UsageError") as e:
        msg = " ".join(e.format_message().split())
        sys.stderr.write(f"error: E_USAGE: {msg}\n")
        sys.exit(2)
    except _click_errors("Abort"):
        sys.stderr.write("error: E_ABORTED: interrupted\n")
        sys.exit(1)
    except _click_errors("Exit") as e:
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("error: E_ABORTED: interrupted\n")
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    if rv == 130:  # Typer turns Ctrl-C inside a command into exit status 130: say so, in one line
        from .. import errors

        if errors.LAST_SIGNAL is not None:  # it was SIGTERM or SIGHUP, cleaned up the same way
            import signal

            sys.stderr.write(f"error: E_ABORTED: interrupted by {signal.Signals(errors.LAST_SIGNAL).name}\n")
            sys.exit(128 + errors.LAST_SIGNAL)
        sys.stderr.write("error: E_ABORTED: interrupted (Ctrl-C)\n")
    sys.exit(rv if isinstance(rv, int) else 0)
