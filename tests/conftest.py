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


#: Tests measured at 3 s or more in the quick loop on a quiet 2-core machine (pytest --durations,
#: 2026-12-05; docs/performance.md), run with the slow set so that the README's loop stays quick. Each
#: names one test (or one parameter of it); a name that matches nothing fails the quick loop, so the
#: list cannot outlive the tests it names. Their families keep a faster member in the quick loop where
#: one exists.
SLOW_BY_MEASURE = (
    "tests/test_sandbox_hostile.py::test_a_looping_submission_is_reported_once_for_the_whole_submission_not_per_test[import]",
    "tests/test_sandbox_hostile.py::test_a_host_killed_for_a_loop_takes_its_whole_sandbox_with_it",
    "tests/test_sandbox_hostile.py::test_hostile_code_the_os_wall_is_for_scores_0_and_touches_nothing[fallback]",
    "tests/test_validator_reports.py::test_on_every_damaged_trace_the_shape_checker_and_the_json_schema_point_at_the_same_places",
    "tests/test_judges_ex05.py::test_valid_but_wrong_answers_of_every_shape_get_a_verdict_not_a_grader_error[returns-huge]",
    "tests/test_reliability.py::test_kill_9_during_concurrent_delivers_leaves_a_sound_database_and_redelivery_finishes[0.3]",
    "tests/test_reliability.py::test_deliver_reconcile_and_artifact_put_processes_share_one_database",
    "tests/test_properties.py::TestProtocolMachine",
    "tests/test_store.py::test_a_grouped_run_writes_the_same_rows_as_one_transaction_per_delivery[stress-faults3-safe]",
    "tests/test_lab_runs.py::test_lab_start_resumes_and_fresh_starts_over_in_a_terminal",
    "tests/test_judges_ex06.py::test_no_value_of_any_shape_anywhere_makes_a_judge_raise",
    "tests/test_course.py::test_check_watch_checks_again_when_a_file_changes",
    "tests/test_invariant_shards.py::test_judging_shard_by_shard_gives_the_whole_runs_verdicts[stress-naive-]",
    "tests/test_tui_logview.py::test_page_cache_is_bounded",
)


def pytest_collection_modifyitems(config, items):
    named = {i.nodeid for i in items}
    measured = [n for n in SLOW_BY_MEASURE if n in named or any(x.startswith(n + "::") for x in named)]
    for item in items:
        if item.nodeid in SLOW_BY_MEASURE or any(item.nodeid.startswith(n + "::") for n in SLOW_BY_MEASURE):
            item.add_marker(pytest.mark.slow)
    if len(items) > 2000 and len(measured) != len(SLOW_BY_MEASURE):  # a whole run: every name must match
        gone = sorted(set(SLOW_BY_MEASURE) - set(measured))
        raise pytest.UsageError(f"tests/conftest.py SLOW_BY_MEASURE names tests that do not exist: {gone}")
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: runs with --run-slow (CI runs the slow set after the README's quick loop)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
