"""Benchmarks run and report both figures; speed itself is never asserted in a test."""

import json

import pytest

from sim.bench import bench_intake, intake_workload
from sim.cli import main


def test_the_intake_workload_has_tasks_and_redeliveries():
    texts = intake_workload(400)
    assert len(texts) == 400
    assert len(set(texts)) < len(texts)  # some envelopes are delivered twice


def test_the_intake_workload_takes_the_success_path_not_a_refusal(tmp_path):
    """What bench intake measures is a task's whole way to succeeded: every result cites its evidence (once,
    each was refused with E_EVIDENCE_REQUIRED and no task ever succeeded)."""
    from sim.envelope import loads_strict, parse_envelope
    from sim.runtime import deliver
    from sim.store import Store

    st = Store.create(tmp_path / "w.db")
    for t in intake_workload(400):
        deliver(st, parse_envelope(loads_strict(t)))
    states = [r[0] for r in st.conn.execute("SELECT state FROM tasks")]
    codes = [r[0] for r in st.conn.execute("SELECT code FROM deliveries WHERE decision = 'rejected'")]
    st.close()
    assert len(states) > 90 and states.count("succeeded") >= len(states) - 1, states  # (the last may stop mid-way)
    assert codes == [], codes


def test_the_intake_benchmark_reports_project_floor_and_ratio_for_the_same_rows():
    r = bench_intake(200)
    assert r["n"] == 200 and r["rows"]["deliveries"] == 200
    assert r["project_per_s"] > 0 and r["floor_per_s"] > 0
    assert abs(r["ratio"] - r["project_per_s"] / r["floor_per_s"]) < 0.01
    # three rounds, each the project beside its floor; the median round is the one reported
    assert r["repeat"] == 3 and len(r["ratios"]) == 3 and sorted(r["ratios"])[1] == r["ratio"]


def test_bench_intake_json_prints_the_three_figures(capsys):
    try:
        main(["bench", "intake", "-n", "100", "--json"])
    except SystemExit as e:
        assert e.code == 0
    out = json.loads(capsys.readouterr().out)
    assert {"project_per_s", "floor_per_s", "ratio"} <= set(out)


def test_the_sim_benchmark_replays_the_same_writes_as_its_floor():
    from sim.bench import sim_one

    r = sim_one(30)
    assert r["tasks"] == 30 and r["deliveries"] > 30 * 4
    assert r["deterministic"] is True  # the floor's statements come from an identical second run
    # the same transactions on both sides: one per delivery, and grouped as 'protolab run' commits
    assert r["floor_transactions"] == r["project_transactions"] >= r["deliveries"]
    g = r["grouped"]
    assert g["floor_transactions"] == g["project_transactions"] and 0 < g["project_transactions"] < r["deliveries"]
    assert g["project_per_s"] > 0 and g["floor_per_s"] > 0 and g["ratio"] > 0
    assert r["project_per_s"] > 0 and r["floor_per_s"] > 0 and r["peak_rss_mb"] > 0
    assert r["command_peak_rss_mb"] > 0  # the whole 'protolab run', measured in its own process


def test_bench_sim_refuses_bad_sizes(capsys):
    try:
        main(["bench", "sim", "--sizes", "ten"])
    except SystemExit as e:
        assert e.code == 2
    assert capsys.readouterr().err.startswith("error: E_USAGE:")


@pytest.mark.parametrize("argv", [
    ["intake", "-n", "9"], ["intake", "--repeat", "0"], ["instructions", "-n", "9"],
    ["sim", "--sizes", "0"], ["sim", "--sizes", "ten"], ["sim", "--repeat", "0"],
    ["startup", "--repeat", "0"], ["startup", "--repeat", "-3"], ["startup", "--repeat", "x"],
    ["tui", "--events", "0"], ["tui", "--samples", "0"], ["tui", "--samples", "9"],
    ["grade", "-n", "9"], ["grade", "--jobs", "0"],
    ["writers", "--processes", "0"], ["writers", "-n", "9"], ["crash", "--cycles", "0"], ["crash", "--tasks", "99"],
    ["lab", "--events", "99"], ["lab", "--steps", "9"], ["trace", "-n", "11"], ["trace", "--repeat", "0"],
    ["web", "--deliveries", "9"], ["web", "--repeat", "0"],
])
def test_every_benchs_numeric_options_refuse_bad_input_in_one_line_with_exit_2(argv, capsys):
    """Before any work: one line ``error: E_USAGE: ...`` on stderr, exit 2 (``bench startup --repeat 0`` once ran
    and exited 0)."""
    with pytest.raises(SystemExit) as e:
        main(["bench", *argv])
    assert e.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: E_USAGE: "), captured.err


def test_bench_startup_prints_its_ratio_project_over_floor_and_the_machines_load(capsys, monkeypatch):
    """The ratio is --help's time over the floor's (over 1: the project is slower), as every bench prints it."""
    import sim.bench as b

    monkeypatch.setattr(b, "bench_startup", lambda repeat, commands=True: {
        "help_ms": 30.0, "version_ms": 24.0, "floor_ms": 15.0, "ratio": 2.0, "version_ratio": 1.6,
        "within_3x": True, "commands": {"state": {"ms": 60.0, "ratio": 4.0}, "machine show": {"ms": 45.0, "ratio": 3.0}},
        "commands_within_3x": False})
    with pytest.raises(SystemExit) as e:
        main(["bench", "startup", "--repeat", "1"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "ratio 2.00" in out and "--version 1.60" in out and " on " in out and "load " in out
    assert "state 60 (4.00)" in out and "machine show 45 (3.00)" in out and "at most 3: OVER" in out


def test_bench_startup_times_each_light_command_on_a_small_run_over_the_same_floor():
    """``commands``: state, events, messages, machine show and check, each its best time and its ratio over
    ``python -c pass`` (the shape, not the seconds)."""
    from sim.bench import LIGHT_COMMANDS, bench_startup

    r = bench_startup(1)
    assert list(r["commands"]) == ["state", "events", "messages", "machine show", "check"] == [
        " ".join(w) for w in LIGHT_COMMANDS]
    for c in r["commands"].values():
        # the ratio is of the unrounded times, the ms printed to 0.1: they agree to within that rounding (about
        # 0.4% of a ratio over a 14 ms floor), so a relative bound, not an absolute one (25x differed by 0.052)
        assert c["ms"] > 0 and abs(c["ratio"] - c["ms"] / r["floor_ms"]) <= 0.01 * c["ratio"]
    assert r["commands_within_3x"] == all(c["ratio"] <= 3 for c in r["commands"].values())
    assert bench_startup(1, commands=False)["commands"] == {}


def test_bench_startups_figures_put_the_project_over_the_floor():
    from sim.bench import bench_startup

    r = bench_startup(1)
    assert r["ratio"] > 0 and abs(r["ratio"] - r["help_ms"] / r["floor_ms"]) < 0.05
    assert abs(r["version_ratio"] - r["version_ms"] / r["floor_ms"]) < 0.05


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
def test_bench_lab_reports_the_refresh_beside_reading_the_same_rows_and_lab_start(capsys):
    try:
        main(["bench", "lab", "--events", "400", "--steps", "10", "--json"])
    except SystemExit as e:
        assert e.code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["events"] >= 400 and out["steps"] == 10
    assert out["tick_median_ms"] > 0 and out["floor_median_ms"] > 0 and out["ratio"] > 0
    assert out["lab_start_ms"] > 0 and out["plain_start_ms"] > 0


def test_the_intake_floor_writes_the_projects_rows_under_the_same_foreign_keys_and_compare_and_swap(tmp_path):
    """Like for like: the floor ends with the same tasks, deliveries, events, intents and transitions
    as the project, with foreign keys on; it writes a task's row at every tick that changed it, as the
    project does (a task inserted as it was created, not as it ended), each write a compare-and-swap that
    matched (the floor refuses to go on past one that matched nothing)."""
    import sqlite3

    from sim.bench import intake_workload
    from sim.envelope import loads_strict, parse_envelope
    from sim.runtime import deliver
    from sim.store import Store, rows_by_tick, write_rows_bare

    st = Store.create(tmp_path / "p.db")
    for t in intake_workload(300):
        deliver(st, parse_envelope(loads_strict(t)))
    batches = [b for b in rows_by_tick(st) if b[0] > 0]
    machines = [tuple(r) for r in st.conn.execute("SELECT * FROM machines")]
    q = {"tasks": "SELECT * FROM tasks", "deliveries": "SELECT * FROM deliveries", "intents": "SELECT * FROM intents",
         "transitions": "SELECT * FROM transitions", "events": "SELECT * FROM events WHERE tick > 0"}
    project = {k: sorted(st.conn.execute(v).fetchall()) for k, v in q.items()}
    moved = {(t, task) for t, task in st.conn.execute(
        "SELECT DISTINCT tick, task_id FROM events WHERE tick > 0 AND type IN ('transition_applied', 'lease_granted', "
        "'budget_charged', 'transition_rejected')")}
    steps = st.conn.execute("SELECT task_id, tick FROM transitions").fetchall()
    final = dict(st.conn.execute("SELECT task_id, state_version FROM tasks").fetchall())
    st.close()
    # every tick that changed a task row (a transition, a lease, a charge, a refusal's counter) writes it
    changed = {(b[0], u[-2]) for b in batches for u in b[2]}
    created = {(b[0], r[0]) for b in batches for r in b[1].get("tasks", [])}
    assert moved and moved <= changed | created
    # a task is inserted as it stood when its creating tick ended, not as it ended the run
    for b in batches:
        for r in b[1].get("tasks", []):
            assert r[4] == sum(1 for task, t in steps if task == r[0] and t <= b[0]), r
    assert any(r[4] < final[r[0]] for b in batches for r in b[1].get("tasks", []))
    write_rows_bare(str(tmp_path / "f.db"), batches, machines=machines)
    con = sqlite3.connect(tmp_path / "f.db")
    assert con.execute("PRAGMA foreign_key_check").fetchall() == []
    for k, v in q.items():
        assert sorted(con.execute(v).fetchall()) == project[k], k
    con.close()
    # a compare-and-swap that cannot match (the version before the tick wrong) is refused, not skipped
    tick, tables, updates = next(b for b in batches if b[2])
    wrong = [b if b[0] != tick else (tick, tables, [u[:-1] + (u[-1] + 7,) for u in updates]) for b in batches]
    with pytest.raises(AssertionError, match="matched no row"):
        write_rows_bare(str(tmp_path / "g.db"), wrong, machines=machines)


def test_the_write_recorder_is_passed_to_one_store_and_sees_only_that_stores_writes(tmp_path):
    import io
    import json

    from sim.runtime import put_artifact
    from sim.store import Store, write_recorder

    fh = io.StringIO()
    traced = Store.create(tmp_path / "traced.db", tracer=write_recorder(fh))
    other = Store.create(tmp_path / "other.db")
    before = fh.getvalue()
    put_artifact(other, {"untraced": True})
    assert fh.getvalue() == before  # another store's writes are not recorded: no global
    put_artifact(traced, {"traced": True})
    lines = [json.loads(x) for x in fh.getvalue()[len(before):].splitlines()]
    sql = [x[0] if x[0] != "*" else x[1] for x in lines]
    assert sql[0].startswith("BEGIN") and sql[-1].startswith("COMMIT")
    assert any("INTO artifacts" in q for q in sql) and not any(q.lstrip().upper().startswith("SELECT") for q in sql)
    traced.close(), other.close()


def test_bench_web_reports_the_timeline_and_datasette_each_beside_its_floor(capsys):
    try:
        main(["bench", "web", "--deliveries", "60", "--repeat", "1", "--json"])
    except SystemExit as e:
        assert e.code == 0
    out = json.loads(capsys.readouterr().out)
    (r,) = out["sizes"]
    assert r["deliveries"] >= 30
    t = r["timeline"]
    assert t["page_bytes"] > 0 and t["floor_bytes"] > 0  # the page and the same rows as plain JSON
    assert t["write_seconds"] > 0 and t["no_check_seconds"] > 0 and t["floor_seconds"] > 0 and t["ratio"] > 0
    assert set(r["datasette"]) == {"tasks", "deliveries", "events", "messages"}
    for page in r["datasette"].values():  # each page beside the same SELECT through sqlite3
        assert page["page_ms"] > 0 and page["floor_ms"] > 0 and page["ratio"] > 0


def test_bench_web_refuses_bad_sizes(capsys):
    try:
        main(["bench", "web", "--deliveries", "ten"])
    except SystemExit as e:
        assert e.code == 2
    assert capsys.readouterr().err.startswith("error: E_USAGE:")


@pytest.mark.slow
def test_bench_sim_runs_a_small_size_three_times_and_reports_the_median_run():
    from sim.bench import bench_sim

    r = bench_sim((20,), repeat=3)["sizes"][0]
    assert r["tasks"] == 20 and len(r["ratios"]) == 3
    assert r["ratio"] == sorted(r["ratios"])[1]


def test_a_run_hands_each_delivery_to_on_delivery_as_it_happens_and_the_floor_replays_in_slices(tmp_path):
    """bench sim alternates the project's run and the floor: the run calls ``on_delivery`` with each
    delivery's outcome and its store (the commits so far), and the floor, played up to a number of
    commits at a time, writes what it writes in one go."""
    import dataclasses
    import sqlite3

    from sim.runner import run_scenario
    from sim.scenario import load_scenario
    from sim.store import StatementReplayer, replay_writes, write_recorder

    sc = load_scenario("stress")
    sc = dataclasses.replace(sc, stress=dataclasses.replace(sc.stress, tasks=12))
    seen = []
    with open(tmp_path / "w.sql", "w", encoding="utf-8") as fh:
        st = run_scenario(sc, db=tmp_path / "a.db", group_commits=1, tracer=write_recorder(fh),
                          on_delivery=lambda out, store: seen.append((out.delivery_id, store.commits)))
    assert [d for d, _ in seen] == list(range(1, st.counts()["deliveries"] + 1))
    assert all(a <= b for (_, a), (_, b) in zip(seen, seen[1:])) and seen[-1][1] > seen[0][1]
    plain = run_scenario(sc, db=tmp_path / "b.db", group_commits=1)
    assert plain.state_digest() == st.state_digest()
    plain.close()
    st.close()
    whole_s, whole_commits = replay_writes(str(tmp_path / "whole.db"), open(tmp_path / "w.sql", encoding="utf-8"))
    floor = StatementReplayer(str(tmp_path / "sliced.db"), open(tmp_path / "w.sql", encoding="utf-8"))
    for _, commits in seen[::5]:
        floor.play(until_commits=commits)
        assert floor.commits == commits
    floor.play()
    floor.close()
    assert floor.commits == whole_commits > 0 and floor.spent > 0
    dump = {p: list(sqlite3.connect(tmp_path / p).iterdump()) for p in ("whole.db", "sliced.db")}
    assert dump["whole.db"] == dump["sliced.db"] and len(dump["whole.db"]) > 50


def test_bench_intake_alternates_the_project_and_its_floor_slice_by_slice(monkeypatch):
    """Each round hands the floor the batches of the ticks the project just delivered, slice after slice,
    in order and each once, so the two are timed under the same load."""
    import sim.bench as bench
    from sim.store import BareWriter

    calls = []
    real = BareWriter.write

    def spy(self, batches):
        calls.append([b[0] for b in batches])
        return real(self, batches)

    monkeypatch.setattr(BareWriter, "write", spy)
    monkeypatch.setattr(bench, "INTAKE_SLICE", 40)
    r = bench.bench_intake(200, repeat=2)
    per_round = [c for c in calls if c]  # (the last call of a round hands over what is left: nothing)
    assert len(per_round) == 2 * 5 and r["slice"] == 40
    for round_calls in (per_round[:5], per_round[5:]):
        ticks = [t for c in round_calls for t in c]
        assert ticks == sorted(ticks) and len(ticks) == len(set(ticks)) == 200  # every tick once, in order
        assert all(max(c) - min(c) < 40 for c in round_calls)


def test_bench_sim_plays_its_floor_in_slices_between_the_runs_deliveries(monkeypatch):
    import sim.bench as bench
    from sim.store import StatementReplayer

    plays = []
    real = StatementReplayer.play

    def spy(self, until_commits=None):
        plays.append(until_commits)
        return real(self, until_commits)

    monkeypatch.setattr(StatementReplayer, "play", spy)
    monkeypatch.setattr(bench, "SIM_SLICE", 25)
    r = bench.sim_one(10)
    sliced = [p for p in plays if p is not None]
    assert len(sliced) == r["deliveries"] // 25 and sliced == sorted(sliced) and sliced[0] > 0
    assert r["deterministic"] is True and r["floor_transactions"] == r["project_transactions"]


def test_bench_instructions_without_valgrind_says_so_in_one_line(monkeypatch, capsys):
    """Counting instructions needs valgrind: without it the command says what to install, one line, exit 2."""
    import shutil

    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "valgrind" else real(name, *a, **k))
    with pytest.raises(SystemExit) as e:
        main(["bench", "instructions", "-n", "20"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: E_NO_VALGRIND:") and "valgrind" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(SystemExit) as e:
        main(["bench", "instructions", "-n", "3"])
    assert e.value.code == 2 and capsys.readouterr().err.startswith("error: E_USAGE:")


def test_the_instruction_children_do_the_same_before_the_counted_deliveries(tmp_path):
    """Each side's child prepares the same whatever it counts (the texts of the whole workload, the floor's
    rows), so two runs differ by the counted deliveries alone; the floor's child writes the project's rows."""
    import pickle

    from sim.bench import instructions_child
    from sim.envelope import loads_strict, parse_envelope
    from sim.runtime import deliver
    from sim.store import Store, machine_rows, rows_by_tick

    store = Store.create(tmp_path / "rows.db")
    for text in intake_workload(30):
        deliver(store, parse_envelope(loads_strict(text)))
    with open(tmp_path / "rows.pickle", "wb") as fh:
        pickle.dump(([b for b in rows_by_tick(store) if b[0] > 0], machine_rows(store)), fh)
    for side in ("project", "floor"):
        instructions_child(side, 10, 20, 0, str(tmp_path))
        instructions_child(side, 10, 20, 20, str(tmp_path))
    done = Store.open(tmp_path / "project-20.db")
    assert done.counts()["deliveries"] == 30 and done.state_digest() == store.state_digest()
    assert Store.open(tmp_path / "project-0.db").counts()["deliveries"] == 10
    import sqlite3

    floor = sqlite3.connect(tmp_path / "floor-20.db")
    assert floor.execute("SELECT COUNT(*) FROM deliveries").fetchone()[0] == 30
    assert sqlite3.connect(tmp_path / "floor-0.db").execute("SELECT COUNT(*) FROM deliveries").fetchone()[0] == 10
    assert floor.execute("SELECT * FROM tasks ORDER BY task_id").fetchall() == [
        tuple(r) for r in store.conn.execute("SELECT * FROM tasks ORDER BY task_id")]


@pytest.mark.slow
def test_bench_instructions_counts_the_same_each_run():
    """The point of counting: two runs of the same code give the same count (to a few instructions in a million:
    the temporary folder's name differs), and the floor costs less."""
    import shutil

    from sim.bench import bench_instructions

    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed (Debian's package valgrind): bench instructions says so and stops")
    a, b = bench_instructions(20), bench_instructions(20)
    for side in ("project_per_delivery", "floor_per_delivery"):
        assert abs(a[side] - b[side]) <= a[side] / 1000, (a, b)
    # the ratio is project over floor, as every bench's: instructions, so over 1
    assert 0 < a["floor_per_delivery"] < a["project_per_delivery"] and a["ratio"] > 1
    assert a["floor_batches"] == 20


def test_the_sim_floor_ends_its_file_as_a_run_is_put_in_place_and_times_it(tmp_path):
    """The floor's durable end (issue 50): the run's own checkpoint and check are among the statements it
    replays; ``finish`` adds what a run's file gets after them (closed, the file and its folder fsynced), timed
    into ``spent``; the file holds the run's rows alone afterwards."""
    import dataclasses
    import io
    import sqlite3

    from sim.runner import run_scenario
    from sim.scenario import load_scenario
    from sim.store import StatementReplayer, write_recorder

    sc = load_scenario("stress")
    sc = dataclasses.replace(sc, stress=dataclasses.replace(sc.stress, tasks=5))
    fh = io.StringIO()
    store = run_scenario(sc, seed=0, db=tmp_path / "run.db", tracer=write_recorder(fh), group_commits=1)
    deliveries = store.counts()["deliveries"]
    store.close()
    path = str(tmp_path / "floor.db")
    floor = StatementReplayer(path, fh.getvalue().splitlines())
    floor.play()
    played = floor.spent
    floor.finish(path)
    floor.close()
    assert floor.spent > played
    wal = tmp_path / "floor.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0
    assert sqlite3.connect(path).execute("SELECT COUNT(*) FROM deliveries").fetchone()[0] == deliveries
