"""'protolab --help', a bare 'protolab' and '--version' answer without importing the command line
(sim/entry.py), and say exactly what Typer would say.

After a deliberate change to the commands or their help: ``PROTOLAB_UPDATE_GOLDEN=1 pytest
tests/test_startup.py`` rewrites sim/cli/help.txt; read the diff."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sim.entry import help_path

_PROBE = """
import sys
from sim.entry import main
sys.argv = ["protolab", *{args!r}]
try:
    main()
finally:
    loaded = sorted(m for m in ("typer", "click", "rich", "sim.cli", "sqlite3") if m in sys.modules)
    sys.stderr.write("loaded: " + ",".join(loaded) + "\\n")
"""


def _run(args, columns="100"):
    env = dict(os.environ, COLUMNS=columns)
    p = subprocess.run([sys.executable, "-c", _PROBE.format(args=list(args))], capture_output=True, text=True, env=env,
                       timeout=120)
    loaded = [line for line in p.stderr.splitlines() if line.startswith("loaded: ")][-1][len("loaded: "):]
    return p.returncode, p.stdout, loaded


def _typer_says(args, columns="100"):
    """What the command line itself (Typer) prints for ``args``."""
    code = (f"import sys\nfrom sim.cli import main\nsys.argv = ['protolab', *{list(args)!r}]\nmain()\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, COLUMNS=columns))
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_the_kept_help_is_what_typer_renders_today():
    rendered = _typer_says(["--help"])
    if os.environ.get("PROTOLAB_UPDATE_GOLDEN"):
        Path(help_path()).write_text(rendered, encoding="utf-8")
    assert Path(help_path()).read_text(encoding="utf-8") == rendered, (
        "sim/cli/help.txt is not what 'protolab --help' renders: a command or its help changed. "
        "Rewrite it with PROTOLAB_UPDATE_GOLDEN=1 pytest tests/test_startup.py")
    assert _typer_says([]) == rendered  # a bare 'protolab' shows the same help


@pytest.mark.parametrize("args", [["--help"], ["-h"], []], ids=["--help", "-h", "bare"])
def test_the_help_is_answered_without_importing_the_command_line(args):
    code, out, loaded = _run(args)
    assert code == 0 and out == Path(help_path()).read_text(encoding="utf-8")
    assert loaded == ""  # neither Typer, click, rich nor the command modules (nor the store) were imported


def test_the_version_is_answered_without_importing_the_command_line_and_says_what_typer_says():
    code, out, loaded = _run(["--version"])
    assert code == 0 and out.startswith("protolab ") and loaded == ""
    assert out == _typer_says(["--version"]) == _run(["-V"])[1]


def test_a_narrow_terminal_and_every_other_command_go_to_typer():
    code, out, loaded = _run(["--help"], columns="60")
    assert code == 0 and "typer" in loaded.split(",")
    assert out == _typer_says(["--help"], columns="60") != Path(help_path()).read_text(encoding="utf-8")
    code, out, loaded = _run(["machine", "--help"])
    assert code == 0 and "Usage: protolab machine" in out and "typer" in loaded.split(",")


def test_the_installed_version_is_the_one_the_package_says():
    from importlib.metadata import version

    import sim

    assert version("protolab") == sim.__version__  # pyproject.toml reads sim/__init__.py's __version__


def test_the_store_is_opened_without_numpy_or_pandas_and_in_one_thread():
    """sqlite-utils imports numpy and pandas when they are installed (copydetect brings numpy): a fifth of
    a second more for every command, and a BLAS thread that took the Ctrl-C a delivery held. The store
    imports sqlite-utils without them (sim/store/lib.py); numpy still imports afterwards for who wants it."""
    pytest.importorskip("numpy", reason="numpy is not installed here: nothing to keep out")
    code = ("import os, sys, sim.runtime, sim.store.gradebook; "
            "print(len(os.listdir('/proc/self/task')), 'numpy' in sys.modules, 'pandas' in sys.modules); "
            "import numpy; print(numpy.zeros(2).sum())")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["1 False False", "0.0"]
