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


#: Tests measured at 3 s or more in the quick loop on a quiet 2-core machine (pytest --durations,
#: 2026-12-05; docs/performance.md), run with the slow set so that the README's loop stays quick. Each
#: names one test (or one parameter of it); a name that matches nothing fails the quick loop, so the
#: list cannot outlive the tests it names. Their families keep a faster member in the quick loop where
#: one exists.
SLOW_BY_MEASURE = (
    # the digest's property tests under the standard library's writer (the quick loop keeps them under msgspec's,
    # which a long-running process uses, and every pinned vector under both)
    "tests/test_digest.py::test_property_jcs_digest_survives_a_trip_through_json_sorted_v1_bytes[stdlib]",
    "tests/test_digest.py::test_property_json_sorted_v1_bytes_round_trip_through_json_loads[stdlib]",
    "tests/test_digest.py::test_property_digest_is_deterministic_under_both_schemes[stdlib]",
    "tests/test_digest.py::test_property_nested_dict_insertion_order_does_not_matter_either[stdlib]",
    "tests/test_digest.py::test_property_jcs_bytes_are_valid_json_for_an_equal_value[stdlib]",
    "tests/test_sandbox_hostile.py::test_a_looping_submission_is_reported_once_for_the_whole_submission_not_per_test[import]",
    "tests/test_sandbox_hostile.py::test_a_host_killed_for_a_loop_takes_its_whole_sandbox_with_it",
    "tests/test_sandbox_hostile.py::test_hostile_code_the_os_wall_is_for_scores_0_and_touches_nothing[fallback]",
    "tests/test_validator_reports.py::test_on_every_damaged_trace_the_shape_checker_and_the_json_schema_point_at_the_same_places",
    "tests/test_judges_ex05.py::test_valid_but_wrong_answers_of_every_shape_get_a_verdict_not_a_grader_error[returns-huge]",
    "tests/test_reliability.py::test_kill_9_during_concurrent_delivers_leaves_a_sound_database_and_redelivery_finishes[20]",
    "tests/test_reliability.py::test_deliver_reconcile_and_artifact_put_processes_share_one_database",
    "tests/test_properties.py::TestProtocolMachine",
    "tests/test_store.py::test_a_grouped_run_writes_the_same_rows_as_one_transaction_per_delivery[stress-faults3-safe]",
    "tests/test_lab_runs.py::test_lab_start_resumes_and_fresh_starts_over_in_a_terminal",
    "tests/test_judges_ex06.py::test_no_value_of_any_shape_anywhere_makes_a_judge_raise",
    "tests/test_course.py::test_check_watch_checks_again_when_a_file_changes",
    "tests/test_invariant_shards.py::test_judging_shard_by_shard_gives_the_whole_runs_verdicts[stress-naive-]",
    "tests/test_tui_logview.py::test_page_cache_is_bounded",
    # measured at 2 s or more on 2 cores (2026-12-05, third session); the quick loop keeps one of each kind
    "tests/test_sandbox_hostile.py::test_a_looping_submission_is_reported_once_for_the_whole_submission_not_per_test[call]",
    "tests/test_trace_fast.py::test_on_the_whole_corpus_the_fast_path_gives_the_careful_report_or_gives_up_and_takes_every_valid_trace",
    "tests/test_course.py::test_hostile_student_code_scores_zero_with_a_reason_and_no_traceback",
    "tests/test_sandbox_hostile.py::test_grade_says_which_sandbox_judged_the_class",
    "tests/test_untrusted.py::test_c_on_m3_after_the_writer_got_the_table_freezes_both_in_the_tui",
    "tests/test_tui_snapshots.py::test_main_screen_screenshot_is_reproducible",
    "tests/test_judges_ex02.py::test_valid_but_wrong_answers_of_every_shape_get_a_verdict_not_a_grader_error[key-huge]",
    "tests/test_reliability.py::test_a_read_only_file_in_a_read_only_folder_reads_and_refuses_writes_naming_the_path",
    "tests/test_first_use.py::test_tables_at_80_columns_keep_words_keys_and_states_whole",
    "tests/test_reliability.py::test_kill_9_during_run_keeps_the_completed_db_and_the_next_run_sweeps_the_partial",
    "tests/test_tui_cli.py::test_tui_opens_a_finished_run_read_only_and_writes_nothing",
    "tests/test_reliability.py::test_reads_leave_no_side_files_in_a_writable_folder",
    "tests/test_validator_reports.py::test_the_corpus_is_the_one_reviewed",
    "tests/test_serve.py::test_a_live_tui_is_served_on_a_file_of_its_own_and_a_finished_run_read_only",
    "tests/test_reliability.py::test_a_signal_during_deliver_keeps_each_delivery_made_and_says_how_far_it_got[15]",
    "tests/test_reliability.py::test_a_signal_during_deliver_keeps_each_delivery_made_and_says_how_far_it_got[2]",
    "tests/test_reliability.py::test_concurrent_deliver_processes_land_every_delivery_exactly_once[8-40-8]",
    "tests/test_reliability.py::test_concurrent_deliver_processes_land_every_delivery_exactly_once[4-120-10]",
    "tests/test_tui_cli.py::test_demo_played_to_the_end_writes_the_same_state_as_protolab_run",
    "tests/test_tui_snapshots.py::test_time_travel_five_events_back",
    "tests/test_bench.py::test_bench_lab_reports_the_refresh_beside_reading_the_same_rows_and_lab_start",
    "tests/test_judges_ex03.py::test_the_model_answer_decides_every_recorded_run_input_as_the_engine_does",
    "tests/test_tui.py::test_palette_commands_do_what_their_keys_do",
    "tests/test_digest.py::test_property_digest_does_not_depend_on_dict_insertion_order",
    "tests/test_first_use.py::test_the_tour_waits_for_enter_between_steps_in_a_terminal",
    "tests/test_reconciliation.py::test_check_names_the_open_reconciliation_and_reconcile_closes_it",
    "tests/test_tui.py::test_the_palette_runs_a_step_by_its_title",
    "tests/test_judges_ex01.py::test_behaviour_is_deterministic_and_abstracts_key_strings",
    "tests/test_tui_snapshots.py::test_lab_in_progress_with_its_guide_and_hint",
    "tests/test_tui_snapshots.py::test_delivery_detail_of_task_result",
    "tests/test_course.py::test_exercise_check_finds_the_folder_from_below_and_says_where_it_looked_when_it_cannot",
    "tests/test_browse.py::test_the_canned_queries_find_a_resent_intent_and_a_frozen_conflict",
    "tests/test_tui.py::test_f_with_an_unknown_id_is_an_error_and_a_trace_id_filters_by_trace",
    "tests/test_tui.py::test_workshop_p_plays_and_plus_minus_change_speed_and_q_quits",
    "tests/test_instructor_anywhere.py::test_with_course_or_from_inside_it_the_commands_find_the_checkout",
    "tests/test_tui.py::test_read_only_refuses_to_change_the_run",
)


#: Parametrized families whose cases are many and costly (pytest --durations, 2026-12-06: together about
#: 85 s of the quick loop's 340 s of test time on 2 cores): the quick loop keeps a sample of each, spread
#: over the family, and the slow set runs every case. The number is how many cases stay quick; "group"
#: keeps the first case of each group (the part of the case's id before "/": one wrong answer per
#: exercise). Every case still runs in CI (`.ci/run` runs the slow set after the quick loop).
SAMPLED_FAMILIES = {
    "tests/test_solutions.py::test_a_planted_wrong_answer_fails_the_tests_it_should_with_their_hints": "group",
    "tests/test_tui_guide.py::test_every_step_is_shown_whole_and_no_notice_covers_the_guide": 4,
    "tests/test_judges_ex01.py::test_no_answer_of_any_shape_makes_a_judge_fail": 6,
    "tests/test_judges_ex01.py::test_the_designs_that_escaped_lose_a_rule_with_its_own_hint_and_the_public_check_already_says_so": 2,
    "tests/test_judges_ex02.py::test_valid_but_wrong_answers_of_every_shape_get_a_verdict_not_a_grader_error": 5,
    "tests/test_judges_ex03.py::test_an_escaped_design_loses_at_least_a_rule_and_its_feedback_names_it": 2,
    "tests/test_judges_ex03.py::test_no_answer_of_any_shape_makes_the_judge_fail": 6,
    "tests/test_judges_ex03.py::test_a_malformed_answer_is_the_students_error_in_one_line_naming_the_field": 3,
    "tests/test_judges_ex04.py::test_no_judge_raises_a_grader_error_on_a_table_of_any_shape": 3,
    "tests/test_judges_ex04.py::test_the_escaped_transition_table_mistakes_lose_at_least_a_rule_with_feedback_naming_them": 3,
    "tests/test_judges_ex05.py::test_valid_but_wrong_answers_of_every_shape_get_a_verdict_not_a_grader_error": 4,
    "tests/test_tui_cli.py::test_bad_input_gets_one_line_and_exit_2_and_writes_nothing": 3,
    "tests/test_tui_student_code.py::test_a_raising_design_or_intake_stops_the_run_in_one_line_and_the_app_stays_up": 2,
}


def _sampled_out(items) -> list:
    """The cases of :data:`SAMPLED_FAMILIES` the quick loop leaves to the slow set."""
    out = []
    for family, keep in SAMPLED_FAMILIES.items():
        cases = [i for i in items if i.nodeid.startswith(family + "[")]
        if keep == "group":
            seen: set[str] = set()
            for case in cases:
                group = case.nodeid[len(family) + 1:].split("/", 1)[0]
                if group in seen:
                    out.append(case)
                seen.add(group)
        elif len(cases) > keep:
            kept = {round(k * (len(cases) - 1) / max(keep - 1, 1)) for k in range(keep)}
            out.extend(case for n, case in enumerate(cases) if n not in kept)
    return out


def pytest_collection_modifyitems(config, items):
    named = {i.nodeid for i in items}
    # a name is a test, a class (every test in it) or a parametrized function (every case of it)
    def under(nodeid: str, n: str) -> bool:
        return nodeid == n or nodeid.startswith(n + "::") or nodeid.startswith(n + "[")

    measured = [n for n in SLOW_BY_MEASURE if any(under(x, n) for x in named)]
    for item in items:
        if any(under(item.nodeid, n) for n in SLOW_BY_MEASURE):
            item.add_marker(pytest.mark.slow)
    for item in _sampled_out(items):
        item.add_marker(pytest.mark.slow)
    if len(items) > 2000:  # a whole run: every name must match
        gone = sorted(set(SLOW_BY_MEASURE) - set(measured))
        gone += sorted(f for f in SAMPLED_FAMILIES if not any(x.startswith(f + "[") for x in named))
        if gone:
            raise pytest.UsageError(f"tests/conftest.py SLOW_BY_MEASURE or SAMPLED_FAMILIES names tests that do not exist: {gone}")
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: runs with --run-slow (CI runs the slow set after the README's quick loop)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _forget_the_course():
    """A command run in this process with ``--course DIR`` keeps that course for the rest of the process
    (as one command should); a test must not hand it to the next test in the same worker."""
    yield
    from sim.course import catalog

    catalog._COURSE.clear()
