import os
import signal
import sys

# pytest keeps each test module with its assertions rewritten in tests/__pycache__, so that the next
# run (and each xdist worker after the first) loads it instead of rewriting it again: about 7 s of
# every worker's start on 2 cores. A shell with PYTHONDONTWRITEBYTECODE set (some images set it) turns
# that cache off; the suite turns it back on for its own modules.
sys.dont_write_bytecode = False

import pytest  # noqa: E402 (after the bytecode switch above)
from hypothesis import settings  # noqa: E402

from sim.store import Store  # noqa: E402

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


def journaled(live):
    """``live`` (a LiveRun written to a file) keeping its journal in the file, as 'protolab lab start'
    does: 'lab verify' makes a lab's run again from its journal, and a run without one is only its
    story played to the end. Returns ``live``."""
    import json

    from sim.labs.resume import JOURNAL_KEY

    live.on_journal = lambda journal: live.store.set_meta({JOURNAL_KEY: json.dumps(journal, separators=(",", ":"))})
    live.store.set_meta({JOURNAL_KEY: "[]"})
    return live


@pytest.fixture
def store():
    """A fresh in-memory protolab store with the default machine loaded."""
    s = Store.memory()
    yield s
    s.close()


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", default=False,
                     help="also run the tests marked slow (CI and the README's test command do)")


#: The quick loop's limit on one test, in seconds on a machine no busier than its cores: a test not marked
#: slow whose call took longer (pytest's own measure, ``report.duration``, what ``--durations`` prints) fails
#: the quick run, naming it. The machines are shared, so the limit grows with the load: it is QUICK_LIMIT
#: times the 1-minute load average per core when the test ended, if that is over 1 (at load 4 on 2 cores,
#: 40 s). A test of 2 s on a quiet machine takes about 2 s times the load per core on a busy one: 10 times
#: under the limit at any load. Measured (pytest --durations=60, the whole quick loop at load 6-10 on 2
#: cores, 2026-12-07, 44 minutes): the tests over 25 s were marked slow; the slowest left took 25 s, a
#: limit of 90-100 s at that load, 4 times over it. One that takes 20 s quiet is a slow test: mark it so
#: beside it,
#: ``@pytest.mark.slow`` (a whole test, class or module: ``pytestmark``), or
#: ``@pytest.mark.slow_cases("id", ...)`` for some cases of a parametrized test. PROTOLAB_QUICK_LIMIT sets
#: another number of seconds (0: no limit); a mutation run (mutmut sets MUTANT_UNDER_TEST) traces every
#: line, and no limit applies to it.
QUICK_LIMIT = 20.0


def pytest_configure(config):
    config.addinivalue_line("markers", "slow_cases(*ids): the cases of a parametrized test with these ids "
                            "(what pytest shows in brackets) are slow: they run with --run-slow")
    config.addinivalue_line("markers", "quick_sample(keep): a parametrized family whose cases are many and costly: "
                            "the quick loop keeps `keep` cases spread over it (\"group\": the first case of each "
                            "group, the part of the id before '/'); the slow set runs every case")


def _quick_limit() -> float:
    if "MUTANT_UNDER_TEST" in os.environ:
        return 0.0
    raw = os.environ.get("PROTOLAB_QUICK_LIMIT", "").strip()
    try:
        return float(raw) if raw else QUICK_LIMIT
    except ValueError:
        raise pytest.UsageError(f"PROTOLAB_QUICK_LIMIT must be a number of seconds, not {raw!r}") from None


def _load_per_core() -> float:
    """The 1-minute load average per core, at least 1 (a machine no busier than its cores)."""
    try:
        return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
    except OSError:  # (no load average on this system)
        return 1.0


def _family(item) -> str:
    """A test's node id without its case: the function (or method) every case of it shares."""
    return item.nodeid.split("[", 1)[0]


def _sampled_out(items) -> list:
    """The cases of the families marked ``quick_sample`` that the quick loop leaves to the slow set."""
    families: dict[str, list] = {}
    for item in items:
        if item.get_closest_marker("quick_sample") is not None and "[" in item.nodeid:
            families.setdefault(_family(item), []).append(item)
    out = []
    for cases in families.values():
        keep = cases[0].get_closest_marker("quick_sample").args[0]
        if keep == "group":
            seen: set[str] = set()
            for case in cases:
                group = case.callspec.id.split("/", 1)[0]
                if group in seen:
                    out.append(case)
                seen.add(group)
        elif len(cases) > keep:
            kept = {round(k * (len(cases) - 1) / max(keep - 1, 1)) for k in range(keep)}
            out.extend(case for n, case in enumerate(cases) if n not in kept)
    return out


def pytest_collection_modifyitems(config, items):
    ids_of: dict[str, set[str]] = {}
    for item in items:
        callspec = getattr(item, "callspec", None)
        ids_of.setdefault(_family(item), set()).add(callspec.id if callspec else "")
    stale = []
    for item in items:
        for mark in item.iter_markers("slow_cases"):
            callspec = getattr(item, "callspec", None)
            if callspec is not None and callspec.id in mark.args:
                item.add_marker(pytest.mark.slow)
            if len(items) > 2000:  # a whole run: every id a mark names is a case (a renamed case fails here)
                stale += [f"{_family(item)}[{i}]" for i in mark.args if i not in ids_of[_family(item)]]
    if stale:
        raise pytest.UsageError(f"@pytest.mark.slow_cases names cases that do not exist: {sorted(set(stale))}")
    for item in _sampled_out(items):
        item.add_marker(pytest.mark.slow)
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: runs with --run-slow (CI runs the slow set after the README's quick loop)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


#: (node id, seconds, limit) of each quick test over the limit, in this process (the controller, under xdist)
_OVER: list[tuple[str, float, float]] = []


def pytest_runtest_logreport(report):
    """Every test's call, measured by pytest (under xdist the workers' reports reach the controller here):
    a quick test over the limit is remembered, and the session fails at its end."""
    if report.when != "call" or "slow" in report.keywords:
        return
    limit = _quick_limit() * _load_per_core()
    if limit and report.duration > limit:
        _OVER.append((report.nodeid, report.duration, limit))


def pytest_sessionfinish(session, exitstatus):
    if _OVER and not session.config.getoption("--run-slow") and not hasattr(session.config, "workerinput"):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _OVER or config.getoption("--run-slow"):
        return
    terminalreporter.section("quick tests over the quick loop's limit", sep="=", red=True, bold=True)
    for nodeid, seconds, limit in sorted(_OVER, key=lambda o: -o[1]):
        terminalreporter.line(f"{nodeid}: {seconds:.1f} s (limit {limit:.0f} s at this load)", red=True)
    terminalreporter.line("Each is slower than a quick test may be: mark it slow beside it (@pytest.mark.slow, "
                          "or @pytest.mark.slow_cases(...) for some of its cases), or make it quicker; "
                          "tests/conftest.py's QUICK_LIMIT says why the limit is what it is.")


@pytest.fixture(autouse=True)
def _forget_the_course():
    """A command run in this process with ``--course DIR`` keeps that course for the rest of the process
    (as one command should); a test must not hand it to the next test in the same worker."""
    yield
    from sim.course import catalog

    catalog._COURSE.clear()
