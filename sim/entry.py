"""The ``protolab`` entry point.

``protolab --help``, ``-h``, a bare ``protolab`` and ``--version`` are answered here, without
importing the command line (Typer, click and rich cost some 100 ms before a word is printed):
the help is the text Typer renders, kept in ``sim/cli/help.txt`` (a test holds it to what Typer
renders today; ``PROTOLAB_UPDATE_GOLDEN=1`` rewrites it). On a terminal narrower than 80 columns,
where Typer would wrap the text otherwise, and for every other command, :func:`sim.cli.main` runs, except
the light commands (``messages``, ``events``, ``state``, ``check``, ``machine show``), which
:func:`sim.views.light` reads and runs without Typer when their options are ones it reads as Typer does.
"""

from __future__ import annotations

import os
import sys

#: Click wraps help at the terminal's width less 2, up to 78: from 80 columns on it is the same text.
_WIDE = 80


def _columns() -> int:
    """The terminal's width as click reads it (``shutil.get_terminal_size``, without importing shutil)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
        if columns <= 0:
            columns = 80  # shutil's fallback
    return columns


def help_path() -> str:
    return os.path.join(os.path.dirname(__file__), "cli", "help.txt")


def _answer(args: list[str]) -> bool:
    """Answer ``args`` here if it asks only for the help or the version; True if it did."""
    if args in ([], ["--help"], ["-h"]) and _columns() >= _WIDE:
        try:
            with open(help_path(), encoding="utf-8") as f:
                text = f.read()
        except OSError:  # a build without the file: Typer renders it
            return False
        sys.stdout.write(text)
        sys.stdout.flush()
        return True
    if args in (["--version"], ["-V"]):
        from . import __version__

        sys.stdout.write(f"protolab {__version__}\n")
        return True
    return False


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        if _answer(args):
            return
    except BrokenPipeError:  # 'protolab --help | head -1'
        sys.exit(0)
    try:
        # messages, events, state, check and machine show read without Typer (sim/views.py)
        from .views import light

        if light(args):
            return
    except KeyboardInterrupt:  # Ctrl-C while the store loads: as below
        sys.stderr.write("error: E_ABORTED: interrupted (Ctrl-C)\n")
        sys.exit(130)
    try:
        from .cli import main as cli_main  # (Typer, click, rich: the longest moment before a command runs)
    except KeyboardInterrupt:  # Ctrl-C while the command line loads: one line, as anywhere else
        sys.stderr.write("error: E_ABORTED: interrupted (Ctrl-C)\n")
        sys.exit(130)
    cli_main(argv)


if __name__ == "__main__":  # pragma: no cover
    main()
