import signal

import pytest
from hypothesis import settings

from sim.store import Store

# Property tests judge what the code does, never how fast: on a loaded machine (CI on two cores, a
# mutation run) one example can take longer than hypothesis's default 200 ms deadline.
settings.register_profile("protolab", deadline=None)
settings.load_profile("protolab")

# A test run started in the background by a shell (`pytest &`, a CI script's job) inherits SIGINT
# ignored, and so would every command the tests start: the Ctrl-C tests would see a command that
# cannot be interrupted. A handler here is reset to the default in each child at exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def run_cli(capsys, *args) -> tuple[int, str, str]:
    """The one way tests call the CLI in-process: ``(exit status, stdout, stderr)``. Arguments may be
    paths; a traceback is never an answer the CLI may give."""
    from sim.cli import main

    capsys.readouterr()
    code = 0
    try:
        main([str(a) for a in args])
    except SystemExit as e:
        code = e.code or 0
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, (out + err)[-3000:]
    return code, out, err


@pytest.fixture
def store():
    """A fresh in-memory protolab store with the default machine loaded."""
    s = Store.memory()
    yield s
    s.close()


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", default=False,
                     help="also run the tests marked slow (CI and the README's test command do)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: runs with --run-slow (CI runs the slow set after the README's quick loop)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
