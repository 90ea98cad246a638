"""Replay: state is the fold of the event log, and publication cannot run twice.

``sim.replay.rebuild`` folds a run's events into an empty store; ``redeliver`` hands every
delivered envelope to intake again on a copy. ``protolab replay --db`` does both and exits 1
if the digests differ or a side effect commits again.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from functools import lru_cache

import pytest

from conftest import run_cli

from sim.cli import main
from sim.faults import FAULTS
from sim.replay import rebuild, redeliver, replay_report
from sim.runner import run_scenario
from sim.scenario import load_scenario
from sim.store import STATE_TABLES, Store

POLICIES = ("safe", "naive")


@lru_cache(maxsize=None)
def _run(policy: str = "safe", faults: tuple[str, ...] = (), scenario: str = "publish-report") -> Store:
    """One in-memory run per argument set; tests only read it (redeliver works on a copy)."""
    return run_scenario(load_scenario(scenario), policy=policy, faults=list(faults))


def _rows(store: Store, table: str) -> list[tuple]:
    return sorted(store.conn.execute(f"SELECT * FROM {table}").fetchall(), key=repr)


_cli = run_cli  # conftest's: the one way tests call the CLI in-process


# ---------------------------------------------------------------------------- rebuild


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("fault", (None, *FAULTS))
def test_rebuilding_from_the_event_log_gives_the_live_state_digest(fault, policy):
    store = _run(policy, (fault,) if fault else ())
    fresh = rebuild(store)
    try:
        assert fresh.state_digest() == store.state_digest()
        assert fresh.counts()["events"] == store.counts()["events"]
    finally:
        fresh.close()


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("fault", (None, *FAULTS))
def test_the_rebuilt_store_holds_the_same_rows_in_every_state_table(fault, policy):
    store = _run(policy, (fault,) if fault else ())
    fresh = rebuild(store)
    try:
        for table in STATE_TABLES:
            assert _rows(fresh, table) == _rows(store, table), table
        # and the rebuilt store is state only: the message log is not copied
        assert fresh.counts()["messages"] == 0 and fresh.counts()["deliveries"] == 0
    finally:
        fresh.close()


def test_rebuilding_a_fan_out_run_gives_the_live_digest():
    store = _run("safe", ("crash", "duplicate:0.5"), "fan-out")
    fresh = rebuild(store)
    try:
        assert fresh.state_digest() == store.state_digest()
    finally:
        fresh.close()


# ---------------------------------------------------------------------------- redeliver


@pytest.mark.parametrize("fault", (None, *FAULTS))
def test_redelivering_a_safe_run_commits_no_effect_again(fault):
    store = _run("safe", (fault,) if fault else ())
    digest, effects = store.state_digest(), store.effects()
    r = redeliver(store)
    assert r["policy"] == "safe"
    assert r["redelivered"] == len(store.deliveries())
    assert sum(r["decisions"].values()) == r["redelivered"]
    assert set(r["decisions"]) <= {"duplicate", "late", "rejected"}, r["decisions"]
    assert r["effects_before"] == len(effects)
    assert r["effects_committed_again"] == []
    # it worked on a copy: the run itself is untouched
    assert store.state_digest() == digest and store.effects() == effects


@pytest.mark.parametrize("fault", (None, "duplicate", "late-failure", "crash"))
def test_redelivering_a_naive_run_commits_the_publication_again(fault):
    store = _run("naive", (fault,) if fault else ())
    r = redeliver(store)
    assert r["policy"] == "naive"
    assert r["effects_committed_again"], r
    assert all(k.startswith("publish:R-1:T-2#") for k in r["effects_committed_again"])
    # Task messages are all executed again; the conversation's fence and its acks are not task
    # intake (no policy applies) and deduplicate by key and digest under any policy.
    conversation = sum(1 for d in store.deliveries() if d["task_id"] == "R-1")
    assert r["decisions"] == {"accepted": r["redelivered"] - conversation, "duplicate": conversation}


def test_redeliver_under_an_explicit_policy_overrides_the_runs_own():
    store = _run("safe")
    assert redeliver(store, policy="naive")["effects_committed_again"]
    assert redeliver(store, policy="safe")["effects_committed_again"] == []


def test_replay_report_matches_and_carries_the_redelivery():
    store = _run("safe", ("duplicate",))
    rep = replay_report(store)
    assert rep["match"] is True and rep["state_digest"] == rep["live_digest"] == store.state_digest()
    assert rep["events"] == store.counts()["events"]
    assert rep["redelivery"]["effects_committed_again"] == []


# ---------------------------------------------------------------------------- protolab replay


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "220")
    return tmp_path


def _make_run(capsys, *args) -> dict:
    code, out, err = _cli(capsys, "run", *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_protolab_replay_exits_0_with_match_on_a_safe_run(cwd, capsys):
    live = _make_run(capsys, "--fault", "duplicate", "--db", "safe.db")
    before = hashlib.sha256((cwd / "safe.db").read_bytes()).hexdigest()
    code, out, err = _cli(capsys, "replay", "--db", "safe.db")
    assert code == 0, err
    assert "match" in out and "MISMATCH" not in out
    assert "no side effect committed twice" in out
    code, out, err = _cli(capsys, "replay", "--db", "safe.db", "--json")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["match"] is True
    assert rep["state_digest"] == rep["live_digest"] == live["state_digest"]
    assert rep["effects_at_most_once_under_redelivery"] is True
    assert rep["redelivery"]["effects_committed_again"] == []
    assert rep["redelivery"]["policy"] == "safe"
    # replaying reads the database; it does not write it
    assert hashlib.sha256((cwd / "safe.db").read_bytes()).hexdigest() == before


def test_protolab_replay_exits_1_on_a_naive_run_because_effects_commit_again(cwd, capsys):
    live = _make_run(capsys, "--policy", "naive", "--db", "naive.db")
    code, out, err = _cli(capsys, "replay", "--db", "naive.db", "--json")
    assert code == 1
    rep = json.loads(out)
    assert rep["match"] is True and rep["state_digest"] == live["state_digest"]
    assert rep["effects_at_most_once_under_redelivery"] is False
    assert rep["redelivery"]["policy"] == "naive"
    assert rep["redelivery"]["effects_committed_again"]
    code, out, err = _cli(capsys, "replay", "--db", "naive.db")
    assert code == 1 and "effects committed again" in out


def test_protolab_replay_exits_1_with_mismatch_on_a_tampered_database(cwd, capsys):
    live = _make_run(capsys, "--db", "tampered.db")
    conn = sqlite3.connect(cwd / "tampered.db")
    try:
        with conn:
            n = conn.execute("UPDATE tasks SET state = 'failed' WHERE task_id = 'T-1'").rowcount
        assert n == 1
    finally:
        conn.close()
    code, out, err = _cli(capsys, "replay", "--db", "tampered.db", "--json")
    assert code == 1, err
    rep = json.loads(out)
    assert rep["match"] is False
    assert rep["live_digest"] != live["state_digest"]  # the tampered state
    assert rep["state_digest"] != rep["live_digest"]
    assert rep["state_digest"] == live["state_digest"]  # the events still fold into the untouched state
    code, out, err = _cli(capsys, "replay", "--db", "tampered.db")
    assert code == 1 and "MISMATCH" in out


@pytest.mark.parametrize("policy", POLICIES)
def test_replay_on_scratch_files_says_what_it_says_in_memory_and_leaves_nothing(policy, tmp_path):
    store = _run(policy, ("duplicate", "late-failure"))
    in_memory = replay_report(store)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    on_files = replay_report(store, scratch=scratch)
    assert on_files == in_memory
    assert {p.name for p in scratch.iterdir()} <= {"copy.db", "copy.db-shm", "copy.db-wal", "rebuilt.db",
                                                    "rebuilt.db-shm", "rebuilt.db-wal"}
    with Store.open(str(scratch / "rebuilt.db"), readonly=True) as rebuilt:
        assert rebuilt.state_digest() == store.state_digest()


def test_the_replay_command_leaves_no_scratch_file_behind(tmp_path, monkeypatch, capsys):
    import tempfile

    db = tmp_path / "run.db"
    run_scenario(load_scenario("publish-report"), db=db).close()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    with pytest.raises(SystemExit) as e:
        main(["replay", "--db", str(db)])
    assert e.value.code == 0, capsys.readouterr()
    assert list(tmp.iterdir()) == []


_BY_EFFECT = '''
def effect_key(result, delivery_id):
    e = result.payload["effect"]
    return f"{e['kind']}:{e['target']}:{result.task_id}"
'''
_BY_DELIVERY = '''
def effect_key(result, delivery_id):
    return f"effect:{delivery_id}"
'''


def test_a_run_made_with_an_effect_rule_is_replayed_through_it_and_replay_refuses_without_it(tmp_path, monkeypatch, capsys):
    """Exercise 5's README: a naive run with a right effect rule, then replay. Through the kit's own
    rule the redelivery would commit again (the issue's "replay FAILED" for a correct key); through the
    run's rule it commits nothing again. Without --effects replay refuses, naming the command."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "effects.py").write_text(_BY_EFFECT)
    (tmp_path / "delivery.py").write_text(_BY_DELIVERY)
    code, out, _ = _cli(capsys, "run", "--policy", "naive", "--effects", "effects.py", "--fault", "resend:task_result",
                        "--db", "ex5.db")
    assert code == 0 and "protolab replay --db ex5.db --effects effects.py" in out  # the run's own next step
    before = (tmp_path / "ex5.db").read_bytes()
    code, out, err = _cli(capsys, "replay", "--db", "ex5.db")
    assert code == 2 and err.startswith("error: E_PLUGIN_NEEDED: ex5.db was made with --effects effects.py sha256:")
    assert err.strip().endswith("protolab replay --db ex5.db --effects effects.py") and out == ""
    code, out, err = _cli(capsys, "replay", "--db", "ex5.db", "--effects", "effects.py")
    assert code == 0 and "no side effect committed twice" in out and "effects effects.py" in out and err == ""
    # the rule is what is judged: a key per delivery commits again when the log is delivered again
    code, out, err = _cli(capsys, "replay", "--db", "ex5.db", "--effects", "delivery.py", "--json")
    rep = json.loads(out)
    assert code == 1 and rep["redelivery"]["effects_committed_again"] and rep["plugged"]["effects"].startswith("delivery.py")
    assert "delivery.py changed since the run was made" in err
    assert (tmp_path / "ex5.db").read_bytes() == before  # replay reads; it writes nothing


def test_a_run_made_with_an_intake_needs_it_again_and_a_design_or_machine_needs_nothing(tmp_path, monkeypatch, capsys):
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "decide.py").write_text((root / "solutions/03-deduplicating-consumer/decide.py").read_text())
    (tmp_path / "design.py").write_text((root / "solutions/01-envelope-design/design.py").read_text())
    assert _cli(capsys, "run", "--intake", "decide.py", "--db", "in.db")[0] == 0
    code, _, err = _cli(capsys, "replay", "--db", "in.db")
    assert code == 2 and "E_PLUGIN_NEEDED" in err and "--intake decide.py" in err
    assert _cli(capsys, "replay", "--db", "in.db", "--intake", "decide.py")[0] == 0
    assert _cli(capsys, "run", "--design", "design.py", "--machine", str(root / "data/machines/task-v2.toml"),
                "--db", "d.db")[0] == 0
    code, out, err = _cli(capsys, "replay", "--db", "d.db")
    assert code == 0 and "match" in out and err == ""
    # the kit's own run, replayed through a student's rule: allowed, and said
    assert _cli(capsys, "run", "--db", "plain.db")[0] == 0
    (tmp_path / "effects.py").write_text(_BY_EFFECT)
    code, _, err = _cli(capsys, "replay", "--db", "plain.db", "--effects", "effects.py")
    assert code == 0 and "the run was made with the kit's effect rule; redelivering through effects.py instead" in err
