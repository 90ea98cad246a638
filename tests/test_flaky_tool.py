"""The shipped scenario flaky-tool (issue 29, item 7): a tool failure that is the scenario's own, not
asked for on the command line. The researcher's web-search fails on attempt 1; the run records
tool_failed, the retry lands, and the safe runtime keeps every invariant."""

from pathlib import Path

from conftest import run_cli

from sim.invariants import check
from sim.runner import run_scenario
from sim.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent


def test_running_the_scenario_file_shows_a_tool_failed_event_without_any_fault_asked_for(tmp_path, capsys,
                                                                                         monkeypatch):
    monkeypatch.chdir(ROOT)
    db = tmp_path / "flaky.db"
    code, out, err = run_cli(capsys, "run", "data/scenarios/flaky-tool.toml", "--db", db)
    assert code == 0, err
    assert "tool-failure" in out  # the scenario declared it; the run says which fault it injected
    code, out, err = run_cli(capsys, "events", "--db", db, "--json")
    assert code == 0, err
    assert "tool_failed" in out and "web-search" in out


def test_the_tool_failure_is_recorded_beside_the_retry_and_the_second_attempt_publishes_once():
    store = run_scenario(load_scenario("flaky-tool"), policy="safe", seed=0)
    try:
        events = store.events()
        (failed,) = [e for e in events if e["type"] == "tool_failed"]
        assert (failed["task_id"], failed["message_id"]) == ("T-1", "M-3")
        assert failed["data"]["tool"] == "web-search" and failed["data"]["status"] == "retry"
        faults = [e["data"]["fault"] for e in events if e["type"] == "fault_injected"]
        assert faults == ["tool-failure"]
        assert store.get_meta("faults") == "tool-failure"
        tasks = {t.task_id: t for t in store.tasks()}
        assert tasks["T-1"].state == "succeeded" and tasks["T-1"].budget_left == 0  # two attempts, both used
        assert [e["effect_key"] for e in store.effects()] == ["publish:R-1:T-2"]
    finally:
        store.close()


def test_under_safe_every_invariant_holds_on_the_scenario():
    store = run_scenario(load_scenario("flaky-tool"), policy="safe", seed=0)
    try:
        broken = [r.name for r in check(store) if not r.ok]
        assert broken == []
    finally:
        store.close()


def test_the_same_scenario_and_seed_give_the_same_database(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    for p in (a, b):
        run_scenario(load_scenario("flaky-tool"), policy="safe", seed=0, db=str(p)).close()
    assert a.read_bytes() == b.read_bytes()


def test_the_shipped_file_named_by_its_checkout_path_runs_from_any_folder(tmp_path, monkeypatch, capsys):
    """The README says `protolab run data/scenarios/flaky-tool.toml`: from a folder without data/, the
    path names the shipped copy (as it does for every other data/... argument); a file that is not
    shipped is still unknown, in one line."""
    from conftest import run_cli

    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, "run", "data/scenarios/flaky-tool.toml", "--db", "ft.db")
    assert code == 0, err
    code, out, _ = run_cli(capsys, "events", "--db", "ft.db", "--type", "tool_failed", "--json")
    assert code == 0 and '"tool_failed"' in out
    code, _, err = run_cli(capsys, "run", "data/scenarios/nope.toml", "--db", "x.db")
    assert code == 2 and err.startswith("error: E_UNKNOWN_SCENARIO") and not (tmp_path / "x.db").exists()
