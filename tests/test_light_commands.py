"""The light commands (messages, events, state, check, machine show) run without Typer (sim/views.py,
from sim/entry.py), and say exactly what the Typer commands say: the same bytes on stdout and stderr and
the same exit status, for good input and bad; and that path loads no part of the command line."""

import json
import os
import subprocess
import sys

import pytest

from sim.views import LIGHT, parse_light

#: the Typer path, forced: sim.cli.main, as before the light path existed
TYPER = "import sys; from sim.cli import main; main(sys.argv[1:])"

#: the light path, and which of the house's heavy libraries it loaded (written at exit, whatever the status)
LIGHT_PATH = """
import atexit, json, os, sys
def _loaded():
    with open(os.environ["LIGHT_MODULES"], "w") as f:
        json.dump(sorted({m.split(".")[0] for m in sys.modules}), f)
atexit.register(_loaded)
sys.argv = ["protolab"] + sys.argv[1:]
from sim.entry import main
main()
"""

HEAVY = {"typer", "click", "pydantic", "textual", "sqlite_utils", "asyncio"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A run where every invariant holds, one where some are broken, a corrupt file and a missing one."""
    d = tmp_path_factory.mktemp("light")
    good, broken = d / "good.db", d / "broken.db"
    for db, extra in ((good, []), (broken, ["--policy", "naive", "--fault", "duplicate", "--fault", "conflicting-digest"])):
        subprocess.run([sys.executable, "-m", "sim", "run", "publish-report", "--db", str(db), *extra], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    corrupt = d / "corrupt.db"
    corrupt.write_bytes(good.read_bytes()[:5000] + b"\x00garbage" * 500)
    notes = d / "notes.db"
    notes.write_text("not a database\n")
    return {"good": str(good), "broken": str(broken), "corrupt": str(corrupt), "notes": str(notes),
            "missing": str(d / "missing.db")}


def _run(code: str, args: list[str], tmp_path, columns: str = "80") -> tuple[int, bytes, bytes, list[str]]:
    mods = tmp_path / "modules.json"
    mods.unlink(missing_ok=True)
    env = dict(os.environ, COLUMNS=columns, LIGHT_MODULES=str(mods))
    env.pop("FORCE_COLOR", None)
    env.pop("TTY_COMPATIBLE", None)
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, env=env, cwd=tmp_path)
    loaded = json.loads(mods.read_text()) if mods.exists() else []
    return p.returncode, p.stdout, p.stderr, loaded


CASES = [
    # (args, with the db named as {good}, {broken}...; whether the light path runs it (else Typer reads it))
    (["state", "--db", "{good}"], True),
    (["state", "--db={good}", "--json"], True),
    (["state", "--db", "{good}", "--task", "T-2"], True),
    (["state", "--task=T-9", "--db", "{good}"], True),  # E_UNKNOWN_TASK
    (["state", "--db", "{missing}"], True),  # E_DB_MISSING
    (["state", "--db", "{corrupt}"], True),
    (["state", "--db", "{notes}", "--json"], True),
    (["state"], True),  # the default --db, protolab.db, is not here
    (["events", "--db", "{good}"], True),
    (["events", "--db", "{good}", "--json", "--task", "T-1"], True),
    (["events", "--db", "{good}", "--type", "bogus"], True),  # E_UNKNOWN_VALUE
    (["events", "--db", "{broken}", "--type", "intent_recorded"], True),
    (["messages", "--db", "{good}"], True),
    (["messages", "--db", "{broken}", "--payloads", "--task", "T-1"], True),
    (["messages", "--json", "--db", "{good}"], True),
    (["messages", "--db", "{missing}", "--json"], True),
    (["check", "--db", "{good}"], True),
    (["check", "--db", "{broken}"], True),  # exit 1, the witnesses
    (["check", "--db", "{broken}", "--json"], True),
    (["check", "--db", "{corrupt}"], True),
    (["machine", "show"], True),
    (["machine", "show", "--json"], True),
    (["machine", "show", "--db", "{good}", "--version", "task-v1"], True),
    (["machine", "show", "--version", "nope"], True),  # E_UNKNOWN_MACHINE
    (["machine", "show", "--db", "{missing}"], True),
    # Typer's to read: its words for the error (or its help)
    (["state", "--db", "{good}", "--bogus"], False),
    (["state", "--db"], False),
    (["events", "--db", "{good}", "--db", "{good}"], False),
    (["check", "--db", "{good}", "--json=1"], False),
    (["messages", "--help"], False),
    (["machine", "show", "extra"], False),
    (["check", "--db", "--json"], False),
]


@pytest.mark.parametrize("args,light", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_the_light_path_prints_what_typer_prints_with_the_same_exit_status(args, light, runs, tmp_path):
    argv = [a.format(**runs) for a in args]
    assert (parse_light(argv) is not None) == light
    code, out, err, loaded = _run(LIGHT_PATH, argv, tmp_path)
    t_code, t_out, t_err, _ = _run(TYPER, argv, tmp_path)
    assert (code, out, err) == (t_code, t_out, t_err)
    if light:
        assert not HEAVY & set(loaded), sorted(HEAVY & set(loaded))
        if "--json" in argv or code == 2:  # nothing drawn: not even Rich
            assert "rich" not in loaded
    else:
        assert "typer" in loaded
    if "{broken}" in args and args[0] == "check":
        assert code == 1
    if "{missing}" in args:
        assert code == 2 and err.startswith(b"error: E_DB_MISSING: ") and err.count(b"\n") == 1 and out == b""


def test_a_wide_terminal_draws_the_same_tables_both_ways(runs, tmp_path):
    """Rich measures the width (COLUMNS) the same way on both paths: the optional columns come back alike."""
    for args in (["state", "--db", runs["good"]], ["machine", "show", "--db", runs["good"]]):
        light = _run(LIGHT_PATH, args, tmp_path, columns="200")[:3]
        assert light == _run(TYPER, args, tmp_path, columns="200")[:3]
        assert light[1] != _run(LIGHT_PATH, args, tmp_path, columns="80")[1]  # the width did matter


def test_every_light_command_is_one_typer_declares_with_the_same_options():
    """The light path reads only what the Typer command declares (a new option there is Typer's until
    LIGHT names it: never an option the light path reads and Typer would refuse)."""
    import click
    import typer.main

    from sim.cli import app

    root = typer.main.get_command(app)
    for words, (options, _fn, names) in LIGHT.items():
        cmd = root
        for w in words:
            cmd = cmd.commands[w] if isinstance(cmd, click.Group) else cmd.get_command(None, w)
        declared = {o for p in cmd.params for o in p.opts}
        assert set(options) <= declared and set(names) == set(options), (words, set(options) - declared)


@pytest.mark.parametrize("args", [
    ["state", "--help"], ["state", "-h"], ["state", "--db"], ["state", "--db", ""], ["state", "--db", "-x"],
    ["state", "--json", "--json"], ["state", "--json=yes"], ["state", "positional"], ["state", "--"],
    ["replay", "--db", "x.db"], ["machine"], ["machine", "check", "f.toml"], ["events", "--typ", "x"], [],
])
def test_what_the_light_path_does_not_read_as_typer_would_is_left_to_typer(args):
    assert parse_light(args) is None
