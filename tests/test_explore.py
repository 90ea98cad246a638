"""explore (every delivery order, breadth-first) and shrink (a failing run made minimal), and the
delivery schedules they write: checked against an independent brute force and against 'protolab run'."""

from __future__ import annotations

import dataclasses
import tomllib

import pytest

from sim.cli import main
from sim.explore import counterexample, explore, placed_faults, settle, starts, successors
from sim.invariants import STATE_INVARIANTS, check
from sim.runner import new_run, run_scenario
from sim.policy import get_policy
from sim.runner import fault_specs
from sim.scenario import load_scenario, parse_scenario, scenario_toml
from sim.schedule import DeliveryPlan
from sim.shrink import breaks, shrink
from sim.store import Store

TINY = parse_scenario({
    "name": "tiny-publish", "workers": ["researcher"],
    "task": [{"id": "T-1", "goal": "collect and publish", "worker": "researcher", "publish": "R-9"}],
    "settings": {"work_ticks": 1},
}, source="tiny")


def _cli(capsys, *args) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(list(args))
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


# ---------------------------------------------------------------- an independent brute force


class _Choice(Exception):
    def __init__(self, now, ids):
        self.now, self.ids = now, ids


class _Probe(DeliveryPlan):
    """A schedule that, once played, stops the run where the next delivery would be chosen."""

    @property
    def done(self) -> bool:
        return False

    def take(self, run):
        if self.next >= len(self.entries) and run.bus.in_flight():
            raise _Choice(run.now, [e.message_id for e in run.bus.in_flight()])
        return super().take(run)

    def refuse_unfinished(self, run) -> None:
        pass


def _probe(sc, policy, faults, prefix):
    """Play ``prefix`` through the ordinary rounds (Run.steps): (broken invariants, the next choices or None)."""
    run = new_run(sc, get_policy(policy), None, fault_specs(sc, faults), None)
    run.plan = _Probe(prefix)
    try:
        run.run()
        choice = None
    except _Choice as c:
        choice = c
    try:
        # (the invariants a search judges: those of state; its orders bypass the safe runtime's session)
        broken = {r.name for r in check(run.store, only=STATE_INVARIANTS) if not r.ok}
    finally:
        run.store.close()
    return broken, choice


def _brute_force(sc, policy, faults, depth):
    """Every order up to ``depth`` deliveries, no state merging: the length of the shortest breaking
    one (None: none), and how many orders were played."""
    shortest, played = None, 0
    stack = [()]
    while stack:
        prefix = stack.pop()
        broken, choice = _probe(sc, policy, faults, prefix)
        played += 1
        if broken:
            shortest = len(prefix) if shortest is None else min(shortest, len(prefix))
            continue
        if choice is None or len(prefix) >= depth:
            continue
        stack += [prefix + ((choice.now, mid),) for mid in choice.ids]
    return shortest, played


def test_under_naive_explore_finds_a_break_by_a_path_no_brute_force_order_beats():
    result = explore(TINY, policy="naive", faults=["duplicate"], depth=8, place=False)  # as the brute force fires it
    assert result.found is not None and result.found.invariant == "EFFECT_AT_MOST_ONCE"
    shortest, played = _brute_force(TINY, "naive", ["duplicate"], 8)
    assert played > len(result.found.path)  # the brute force really tried several orders
    assert len(result.found.path) == shortest == 4
    assert [s.message_id for s in result.found.path][-2:] == ["M-3", "M-3"]  # the publishing result, twice


def test_under_safe_explore_finds_nothing_and_says_its_search_was_exhaustive():
    result = explore(TINY, policy="safe", faults=["duplicate"], depth=30, place=False, engine="model")
    assert result.found is None
    # every order of this run ends within 8 deliveries (the manager acknowledges nothing once it has fenced)
    assert result.exhausted and result.depth_reached == 8
    assert result.ended >= 1 and result.transitions > result.states - 1  # some orders merged
    shortest, played = _brute_force(TINY, "safe", ["duplicate"], 6)
    assert shortest is None and played > 20


@pytest.mark.slow
def test_under_safe_two_faults_break_nothing_in_any_order_or_placement_of_the_tiny_run():
    """Every order and every placement (each fault on any message it may hit, or nowhere) of the one-task
    run ends within 9 deliveries (request, start, result and its duplicate, the late failure, two acks,
    the fence and its ack: after the fence nobody speaks again, so a late copy there is never acked): the
    search is exhaustive, and nothing breaks (about 800 states)."""
    result = explore(TINY, policy="safe", faults=["duplicate", "late-failure"], depth=30)
    assert result.found is None and result.exhausted and result.depth_reached == 9
    seeded = explore(TINY, policy="safe", faults=["duplicate", "late-failure"], depth=30, place=False)
    assert seeded.exhausted and seeded.states < result.states  # placing the faults is more than where a run fires them


@pytest.mark.parametrize("fault, invariant, deliveries, placed", [
    ("duplicate", "EFFECT_AT_MOST_ONCE", 9, ("duplicate:M-6",)),
    ("late-failure", "NO_STATE_REGRESSION", 5, ("late-failure:M-3",)),
])
def test_under_naive_every_placement_finds_each_lessons_break_and_run_of_it_reproduces_it(fault, invariant,
                                                                                            deliveries, placed):
    story = load_scenario("publish-report")
    result = explore(story, policy="naive", faults=[fault], depth=12)
    f = result.found
    assert f is not None and f.invariant == invariant and len(f.path) == deliveries and f.faults == placed
    store = run_scenario(counterexample(story, "naive", f.path, f.faults), policy="naive")
    try:
        assert [d["message_id"] for d in store.deliveries()] == [s.message_id for s in f.path]
        assert invariant in {r.name for r in check(store) if not r.ok}
    finally:
        store.close()


@pytest.mark.parametrize("fault, place, expected", [("duplicate", True, 4), ("late-failure", True, 4),
                                                    ("duplicate", "any", 3)])
def test_no_order_and_placement_a_brute_force_tries_breaks_sooner_than_the_search_says(fault, place, expected):
    """Every order (no merging) under every single placement of the fault, each played by the ordinary
    rounds with the fault given by message id: none breaks an invariant in fewer deliveries than the
    search's path. Placed where its default selector picks (the one-task run's only publishing, successful
    result is M-3) duplicate and late-failure break at 4; anywhere, a duplicated request breaks at 3."""
    result = explore(TINY, policy="naive", faults=[fault], depth=8, place=place)
    assert result.found is not None and len(result.found.path) == expected and result.confirmed
    where = ["M-3"] if place is True else [f"M-{i}" for i in range(1, 7)] + [f"A-{i}" for i in range(1, 4)]
    shortest = [_brute_force(TINY, "naive", [f"{fault}:{mid}"] if mid else [], expected)[0] for mid in [None, *where]]
    assert min(n for n in shortest if n is not None) == expected
    if place is True:
        assert result.found.faults == (f"{fault}:M-3",)
    else:
        assert result.found.faults == ("duplicate:M-1",) and result.found.invariant == "TRANSITIONS_ALLOWED"


def test_explore_places_anywhere_when_asked_and_refuses_it_beside_seeded_faults(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny.toml").write_text(scenario_toml(TINY))
    code, out, _ = _cli(capsys, "explore", "tiny.toml", "--faults", "duplicate", "--policy", "naive", "--depth", "6",
                        "--place-anywhere", "--out", "ce.toml")
    assert code == 1 and "(every placement, anywhere)" in out and "TRANSITIONS_ALLOWED BROKEN after 3" in out
    assert load_scenario(str(tmp_path / "ce.toml")).faults == ("duplicate:M-1",)
    assert "--place-anywhere" in (tmp_path / "ce.toml").read_text().splitlines()[0]
    code, _, err = _cli(capsys, "explore", "tiny.toml", "--faults", "duplicate", "--seeded-faults", "--place-anywhere")
    assert code == 2 and err.startswith("error: E_USAGE:") and err.count("\n") == 1


def test_the_search_places_a_fault_where_a_seeded_run_never_fires_it_and_run_replays_that_placement():
    """late-failure fires, in a run, on the first successful result (T-1's M-3); the search also places it on
    T-2's result, and the engine playing that counterexample reaches the searched state exactly."""
    story = load_scenario("publish-report")
    level, found = list(starts(story, policy="naive", faults=["late-failure"])), None
    for _ in range(8):
        nxt = []
        for node in level:
            for child in successors(node):
                placed = placed_faults(child.run)
                if found is None and placed and placed != ("late-failure:M-3",):
                    found = (child.path, placed, child.run.store.state_digest())
                nxt.append(settle(child))
        level = nxt
        if found:
            break
    assert found is not None
    path, placed, digest = found
    assert placed[0].startswith("late-failure:") and placed != ("late-failure:M-3",)
    store = run_scenario(counterexample(story, "naive", path, placed), policy="naive")
    try:
        assert store.state_digest() == digest
    finally:
        store.close()


def test_explore_stops_when_interrupted_and_says_what_it_reached():
    """Ctrl-C, injected without timing: a hook raising KeyboardInterrupt after 25 transitions, and a
    progress callback raising it."""
    n = [0]

    def after_25() -> bool:
        n[0] += 1
        return n[0] == 25

    result = explore(load_scenario("publish-report"), faults=["duplicate", "late-failure"], depth=14,
                     interrupt=after_25)
    assert result.interrupted and not result.exhausted and result.found is None
    assert result.transitions == 25 and result.states > 10 and 0 < result.depth_reached < 14
    assert result.to_dict()["interrupted"] is True and result.states_per_second > 0

    def ctrl_c(r):
        raise KeyboardInterrupt

    result = explore(TINY, faults=["duplicate"], depth=30, progress=ctrl_c, every=7)
    assert result.interrupted and result.transitions == 7 and not result.exhausted


@pytest.mark.parametrize("as_json", [False, True])
def test_ctrl_c_during_the_cli_search_prints_what_was_reached_and_exits_130(capsys, monkeypatch, as_json):
    import json

    import sim.explore as ex

    real, calls = ex.check, [0]

    def check_then_ctrl_c(store, **kw):
        calls[0] += 1
        if calls[0] == 30:
            raise KeyboardInterrupt
        return real(store, **kw)

    monkeypatch.setattr(ex, "check", check_then_ctrl_c)
    code, out, err = _cli(capsys, "explore", "publish-report", "--faults", "duplicate,late-failure", "--depth", "14",
                          *(["--json"] if as_json else []))
    assert code == 130
    assert err == "error: E_ABORTED: interrupted (Ctrl-C)\n" and "Traceback" not in out + err
    if as_json:
        data = json.loads(out)
        assert data["interrupted"] is True and data["transitions"] == 30 and data["found"] is None
    else:
        assert out.splitlines()[0].startswith("explore publish-report policy safe")
        assert "interrupted: what was reached so far (depth " in out and "states/s" in out
        assert "30 orders tried" in out


def test_sigint_to_a_running_explore_ends_it_with_what_was_reached(tmp_path):
    """A real Ctrl-C: SIGINT sent once the process has printed its first line (the search is under way:
    publish-report to depth 14 takes minutes), not after a sleep."""
    import os
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "sim", "explore", "publish-report", "--faults",
                             "duplicate,late-failure", "--depth", "14", "--out", str(tmp_path / "ce.toml")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env={**os.environ, "COLUMNS": "200"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        first = proc.stdout.readline()
        assert first.startswith("explore publish-report"), first
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "error: E_ABORTED: interrupted (Ctrl-C)" and "Traceback" not in err
    assert "interrupted: what was reached so far" in rest and "states/s" in rest
    assert not (tmp_path / "ce.toml").exists()  # no break found: nothing to write


def test_a_ctrl_c_during_explore_is_a_flag_the_search_reads_and_a_second_one_stops_at_once():
    """explore takes Ctrl-C as a flag the search reads after each transition, so a SIGINT that lands where
    Python cannot pass a KeyboardInterrupt on (inside the import machinery, as CI once saw: the search then
    ran to its end and exited 0) is not lost. A second Ctrl-C raises as usual; outside, the handler is back."""
    import os
    import signal

    from sim.cli.explore import _ctrl_c

    before = signal.getsignal(signal.SIGINT)
    with _ctrl_c() as asked:
        assert asked() is False
        os.kill(os.getpid(), signal.SIGINT)
        signal.pthread_sigmask(signal.SIG_BLOCK, [])  # (a point where the handler has run)
        assert asked() is True
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            signal.pthread_sigmask(signal.SIG_BLOCK, [])
    assert signal.getsignal(signal.SIGINT) is before


def test_every_state_explore_reaches_by_copying_is_the_state_a_run_of_its_counterexample_reaches():
    """Forks (a store copy and a deep copy), with every placement of the faults, agree with the engine
    playing the path from the start with the faults placed where the search placed them."""
    story = load_scenario("publish-report")
    level = list(starts(story, policy="naive", faults=["duplicate", "late-failure"]))
    checked, placements = 0, set()
    for _ in range(6):
        nxt = []
        for node in level:
            for child in successors(node):
                placed = placed_faults(child.run)
                placements.add(placed)
                sc = counterexample(story, "naive", child.path, placed)
                store = run_scenario(sc, policy="naive")
                try:
                    assert store.state_digest() == child.run.store.state_digest(), (child.path, placed)
                    assert [d["message_id"] for d in store.deliveries()] == [s.message_id for s in child.path]
                finally:
                    store.close()
                checked += 1
                nxt.append(settle(child))
        level = nxt
    assert checked > 20
    assert {(), ("late-failure:M-3",)} <= placements  # no fault, and the late failure on T-1's result


def test_the_shipped_story_under_safe_breaks_nothing_to_depth_8():
    result = explore(load_scenario("publish-report"), policy="safe", faults=["duplicate", "late-failure"], depth=8)
    assert result.found is None and result.depth_reached == 8 and result.states > 50


def test_explore_writes_a_counterexample_that_run_and_check_reproduce_byte_for_byte(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = _cli(capsys, "explore", "publish-report", "--faults", "duplicate", "--policy", "naive",
                        "--depth", "12", "--out", "ce.toml")
    assert code == 1  # a break found
    assert "EFFECT_AT_MOST_ONCE BROKEN after 9 deliveries" in out
    sc = load_scenario(str(tmp_path / "ce.toml"))
    assert sc.policy == "naive" and sc.faults == ("duplicate:M-6",) and len(sc.deliveries) == 9
    assert sc.deliveries[-2:] == ((8, "M-6"), (9, "M-6"))
    for db in ("a.db", "b.db"):
        code, _, err = _cli(capsys, "run", "ce.toml", "--db", db)
        assert code == 0, err
    assert (tmp_path / "a.db").read_bytes() == (tmp_path / "b.db").read_bytes()
    code, out, _ = _cli(capsys, "check", "--db", "a.db", "--json")
    assert code == 1
    with Store.open(tmp_path / "a.db", readonly=True) as store:
        assert [(d["tick"], d["message_id"]) for d in store.deliveries()] == list(sc.deliveries)
        # the state invariant the search found; and, judged on the run, its conversation: naive took M-6 twice
        assert {r.name for r in check(store) if not r.ok} == {"EFFECT_AT_MOST_ONCE", "SEQUENCE_KEPT"}


def test_explore_json_under_safe_says_nothing_was_found(capsys):
    code, out, _ = _cli(capsys, "explore", "publish-report", "--faults", "duplicate,late-failure", "--depth", "4", "--json")
    assert code == 0
    import json

    data = json.loads(out)
    assert data["found"] is None and data["depth_reached"] == 4 and data["states"] >= 4


def test_explore_refuses_a_rate_fault_and_an_unknown_policy_in_one_line(capsys):
    code, out, err = _cli(capsys, "explore", "publish-report", "--faults", "duplicate:0.5")
    assert code == 2 and err.startswith("error: E_USAGE:") and err.count("\n") == 1
    code, out, err = _cli(capsys, "explore", "publish-report", "--policy", "lazy")
    assert code == 2 and err.startswith("error: E_UNKNOWN_POLICY:")


def test_a_schedule_naming_a_message_not_on_the_bus_is_refused(tmp_path, capsys):
    sc = dataclasses.replace(load_scenario("publish-report"), deliveries=((1, "M-1"), (2, "M-9")))
    f = tmp_path / "bad.toml"
    f.write_text(scenario_toml(sc))
    code, _, err = _cli(capsys, "run", str(f), "--db", str(tmp_path / "x.db"))
    assert code == 2 and err.startswith("error: E_SCHEDULE:") and "M-9" in err
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize("entries, word", [([[0, "M-1"]], "round 0"), ([[2, "M-1"], [1, "M-2"]], "round 1"),
                                           ([[1, "nope"]], "not a message id"), ([["1", "M-1"]], "ROUND")])
def test_a_malformed_schedule_is_refused_with_what_is_allowed(entries, word):
    from sim.errors import InputError

    with pytest.raises(InputError) as e:
        parse_scenario({"name": "x", "workers": ["researcher"], "deliveries": entries,
                        "task": [{"id": "T-1", "goal": "g", "worker": "researcher"}]}, source="x.toml")
    assert word in str(e.value)


def test_a_scenario_file_round_trips_with_its_schedule_and_policy():
    for name in ("publish-report", "fan-out", "sensitive-source", "gathers"):
        sc = dataclasses.replace(load_scenario(name), policy="naive", deliveries=((1, "M-1"), (2, "M-2"), (2, "A-1")))
        assert parse_scenario(tomllib.loads(scenario_toml(sc, "a comment")), source="x") == sc


# ---------------------------------------------------------------- shrink


def _one_minimal(sc, invariant, policy):
    for i in range(len(sc.deliveries)):
        fewer = dataclasses.replace(sc, deliveries=sc.deliveries[:i] + sc.deliveries[i + 1:])
        if fewer.deliveries and breaks(fewer, invariant, policy=policy, seed=sc.seed):
            return f"without delivery {i + 1}"
    for i in range(len(sc.faults)):
        fewer = dataclasses.replace(sc, faults=sc.faults[:i] + sc.faults[i + 1:])
        if breaks(fewer, invariant, policy=policy, seed=sc.seed):
            return f"without fault {sc.faults[i]}"
    return None


def test_shrink_gives_a_1_minimal_run_that_still_breaks_the_same_invariant(tmp_path, capsys):
    db = tmp_path / "failing.db"
    store = run_scenario(load_scenario("publish-report"), policy="naive", faults=["duplicate", "late-failure"], db=db)
    n = len(store.deliveries())
    store.close()
    code, out, err = _cli(capsys, "shrink", "--db", str(db), "-o", str(tmp_path / "minimal.toml"),
                          "--invariant", "EFFECT_AT_MOST_ONCE")
    assert code == 0, err
    assert f"{n} deliveries ->" in out
    sc = load_scenario(str(tmp_path / "minimal.toml"))
    assert 0 < len(sc.deliveries) < n
    assert breaks(sc, "EFFECT_AT_MOST_ONCE", policy="naive", seed=sc.seed)
    assert _one_minimal(sc, "EFFECT_AT_MOST_ONCE", "naive") is None
    assert any(f.startswith("duplicate:") for f in sc.faults)  # what publishes twice stays
    code, _, err = _cli(capsys, "run", str(tmp_path / "minimal.toml"), "--db", str(tmp_path / "m.db"))
    assert code == 0, err
    code, _, _ = _cli(capsys, "check", "--db", str(tmp_path / "m.db"))
    assert code == 1


def test_shrink_drops_a_task_the_failure_does_not_need():
    sc = load_scenario("fan-out")
    store = run_scenario(sc, policy="naive", faults=["late-failure"])
    try:
        broken = [r.name for r in check(store) if not r.ok]
        assert "NO_STATE_REGRESSION" in broken
        result = shrink(store, invariant="NO_STATE_REGRESSION")
    finally:
        store.close()
    assert len(result.after.tasks) == 1  # one researcher's task, its late failure: the rest goes
    assert breaks(result.after, "NO_STATE_REGRESSION", policy="naive", seed=0)
    assert _one_minimal(result.after, "NO_STATE_REGRESSION", "naive") is None


def test_shrink_refuses_a_run_that_breaks_nothing(tmp_path, capsys):
    db = tmp_path / "ok.db"
    run_scenario(load_scenario("publish-report"), policy="safe", faults=["duplicate"], db=db).close()
    code, _, err = _cli(capsys, "shrink", "--db", str(db), "-o", str(tmp_path / "m.toml"))
    assert code == 2 and err.startswith("error: E_SHRINK_NOT_FAILING:")
    assert not (tmp_path / "m.toml").exists()


# ---------------------------------------------------------------- the TUI honours a scenario's policy


def _naive_counterexample(tmp_path, capsys) -> None:
    f = tmp_path / "ce.toml"
    sc = TINY
    result = explore(sc, policy="naive", faults=["duplicate"], depth=6)
    assert result.found is not None and result.found.invariant == "EFFECT_AT_MOST_ONCE"
    from sim.explore import counterexample

    f.write_text(scenario_toml(counterexample(sc, "naive", result.found.path, result.found.faults)))


@pytest.mark.parametrize("flag, expected", [((), "naive"), (("--policy", "safe"), "safe")])
def test_tui_of_a_scenario_file_runs_under_its_policy_unless_told_otherwise(tmp_path, capsys, monkeypatch, flag, expected):
    """'protolab tui ce.toml' plays the run 'protolab run ce.toml' writes: the file's policy, unless --policy names one."""
    import sim.cli.run as run_cli
    from sim.live import LiveRun

    monkeypatch.chdir(tmp_path)
    _naive_counterexample(tmp_path, capsys)
    seen = {}

    def live(sc, *, seed, fault, policy, db, paused, headless, plugins=None):  # the TUI's live run, played through
        seen["policy"] = policy
        run = LiveRun(sc, policy=policy, seed=seed, faults=fault, db=db, plugins=plugins)
        try:
            run.run_to_end()
            seen["digest"] = run.store.state_digest()
        finally:
            run.close()

    monkeypatch.setattr(run_cli, "_tui_here", lambda: True)
    monkeypatch.setattr(run_cli, "_tui_live", live)
    code, _, err = _cli(capsys, "tui", "ce.toml", *flag, "--db", "tui.db")
    assert code in (0, None), err
    assert seen["policy"] == expected
    code, _, err = _cli(capsys, "run", "ce.toml", *flag, "--db", "run.db")
    assert code == 0, err
    with Store.open(tmp_path / "run.db", readonly=True) as store:
        assert store.state_digest() == seen["digest"]
        assert store.get_meta("policy") == expected


# ---------------------------------------------------------------- the grader's search test


def _graded(exercise: int, answer: str, tmp_path):
    import shutil

    from sim.course.catalog import get_exercise, solutions_dir
    from sim.course.evaluate import evaluate

    ex = get_exercise(exercise)
    sol = solutions_dir(ex)
    src = sol if answer == "model" else sol / "wrong" / answer
    d = tmp_path / answer
    shutil.copytree(ex.folder, d)
    for name in ex.files:
        shutil.copy(src / name, d / name)
    return ex, d, evaluate(ex, d, hidden=True, isolate=False, only=["search"], shown=answer)


def test_the_search_test_shows_the_shortest_break_as_a_table_and_attaches_a_scenario_that_replays_it(tmp_path, capsys,
                                                                                                     monkeypatch):
    from rich.console import Console

    from sim.cli.course import _render_report
    from sim.course.gradescope import results_json

    ex, d, report = _graded(5, "by-delivery", tmp_path)
    (r,) = report.results
    assert not r.passed and r.points == 0
    assert "\n" not in r.message  # one line; the path is in the attachment
    assert "EFFECT_AT_MOST_ONCE broke after 4 deliveries" in r.message and "duplicate:M-3" in r.message
    rows = [ln.split() for ln in r.attachment["text"].splitlines() if ln.startswith("# ")]
    table = [row for row in rows if len(row) > 3 and row[1].isdigit()]  # '#  1  1  M-1 ...' (the comment's table)
    assert [row[3] for row in table] == ["M-1", "M-2", "M-3", "M-3"]  # the path: M-3 delivered twice
    assert "seed" not in r.message
    assert r.attachment["name"] == "counterexample.toml" and "by-delivery/effects.py" in r.attachment["text"]
    # the file replays the break with the student's rule
    monkeypatch.chdir(tmp_path)
    (tmp_path / "by-delivery" / "counterexample.toml").write_text(r.attachment["text"])  # as exercise check writes it
    assert r.reproduce.startswith("protolab run by-delivery/counterexample.toml --effects by-delivery/effects.py")
    code, _, err = _cli(capsys, "run", "by-delivery/counterexample.toml", "--effects", "by-delivery/effects.py",
                        "--db", "ex5.db")
    assert code == 0, err
    with Store.open(tmp_path / "ex5.db", readonly=True) as store:
        assert not next(x for x in check(store) if x.name == "EFFECT_AT_MOST_ONCE").ok
        assert len(store.deliveries()) == 4
    # --explain and Gradescope's output carry the table and the file
    con = Console(record=True, width=200)
    _render_report(report, con)
    shown = con.export_text()
    assert "M-3      task_result" in shown and 'faults = ["duplicate:M-3"]' in shown
    out = results_json(report, shown_dir="05-exactly-once")["tests"][0]["output"]
    assert "counterexample.toml" in out and 'deliveries = [' in out and "M-3      task_result" in out


@pytest.mark.parametrize("exercise", [1, 3, 5])
def test_the_model_answers_pass_the_search_test(exercise, tmp_path):
    _ex, _d, report = _graded(exercise, "model", tmp_path)
    (r,) = report.results
    assert r.passed and r.attachment is None, r.message
