"""The pure in-memory model of the run's state (sim/model.py, no SQLite) and the real engine agree on every
state explore visits; explore searches on the model; a break it finds is confirmed by the engine."""

from __future__ import annotations

import pytest

from sim.explore import NotConfirmed, confirm, explore, settle, starts, successors
from sim.model import TABLES, Model, NotModelled, agreement, apply, model_run, ops_of, rows_of
from sim.policy import NAIVE, SAFE
from sim.runner import run_scenario
from sim.scenario import load_scenario
from tests.test_explore import TINY

TWO = ["duplicate", "late-failure"]


@pytest.mark.parametrize("policy", ["safe", "naive"])
@pytest.mark.parametrize("story, depth", [("tiny", 5), ("publish-report", 6)])
def test_the_model_and_the_engine_agree_on_every_state_explore_visits(story, depth, policy):
    """Every state (every order and fault placement, merged by fingerprint) to the depth: the model, driven
    by the same inputs through the runtime's own code, has every row the engine has: tasks (state, version,
    lease, budget, trusted), intents (the dedup records and their decisions), effects, transitions, budget,
    artifacts, approvals, the message log, each delivery's decision and the event log. Under naive nothing
    is judged, so the search goes on past the breaks."""
    sc = TINY if story == "tiny" else load_scenario(story)
    result = explore(sc, policy=policy, faults=TWO, depth=depth, check_model=True,
                     invariants=() if policy == "naive" else None)
    assert result.found is None and result.model_checked == result.transitions + 1 > 20


@pytest.mark.slow
@pytest.mark.parametrize("policy, depth", [("safe", 30), ("naive", 8)])
def test_the_model_and_the_engine_agree_on_the_whole_tiny_search(policy, depth):
    result = explore(TINY, policy=policy, faults=TWO, depth=depth, check_model=True,
                     invariants=() if policy == "naive" else None)
    assert result.model_checked == result.transitions + 1 > 900
    if policy == "safe":
        assert result.exhausted and result.found is None


@pytest.mark.parametrize("story, policy, depth", [("tiny", "safe", 5), ("tiny", "naive", 8),
                                                  ("publish-report", "safe", 7), ("publish-report", "naive", 12)])
def test_a_search_on_the_model_visits_the_engines_states_and_finds_its_break(story, policy, depth):
    """The same search on the model: as many states, orders and ended runs as on SQLite, and the same
    break by the same path and placement, confirmed by the engine running it from the start."""
    sc = TINY if story == "tiny" else load_scenario(story)
    on_sqlite = explore(sc, policy=policy, faults=TWO, depth=depth)
    on_model = explore(sc, policy=policy, faults=TWO, depth=depth, engine="model")
    assert on_model.engine == "model" and on_model.to_dict()["engine"] == "model"
    for field in ("states", "transitions", "ended", "depth_reached", "exhausted"):
        assert getattr(on_model, field) == getattr(on_sqlite, field), field
    if policy == "naive":
        assert on_model.found is not None and on_model.confirmed and on_sqlite.confirmed
        assert on_model.found.to_dict() == on_sqlite.found.to_dict()
    else:
        assert on_model.found is None and on_sqlite.found is None


def test_the_model_decides_each_lessons_break_as_the_engine_does():
    """Under naive the model, driven by the path's inputs alone, publishes twice: the engine's decisions."""
    level = list(starts(TINY, policy="naive", faults=["duplicate"]))
    twice = None
    for _ in range(4):
        nxt = []
        for node in level:
            for child in successors(node):
                if [s.message_id for s in child.path][-2:] == ["M-3", "M-3"] and twice is None:
                    model = Model(start_time=TINY.start_time)
                    for op in ops_of(child.run.store)[0]:
                        apply(model, op, NAIVE)
                    twice = (model, child.run.store.copy())
                nxt.append(settle(child))
        level = nxt
    model, store = twice
    try:
        assert len(model.effects()) == 2 and [d["decision"] for d in model.deliveries()][-2:] == ["accepted", "accepted"]
        assert agreement(model, store) == []
    finally:
        store.close()


def test_a_disagreement_is_reported_table_by_table():
    story = load_scenario("publish-report")
    child = next(successors(next(starts(story, policy="safe", faults=[]))))
    model = Model(start_time=story.start_time)
    for op in ops_of(child.run.store)[0]:
        apply(model, op, SAFE)
    assert agreement(model, child.run.store) == [] and set(TABLES) >= {"tasks", "intents", "effects", "events"}
    model._tasks["T-1"]["state_version"] += 1
    differ = agreement(model, child.run.store)
    assert len(differ) == 1 and differ[0].startswith("tasks: row 1 differs")
    assert rows_of(model, "tasks")[0]["state_version"] == rows_of(child.run.store, "tasks")[0]["state_version"] + 1


def test_the_model_refuses_what_it_does_not_cover():
    model = Model()
    with pytest.raises(NotModelled):
        model.copy("file.db")
    with pytest.raises(NotModelled):
        model.rulebook("task-v2")
    with pytest.raises(NotModelled):
        model.load_machine(model.rulebook())
    run = model_run(TINY, SAFE, None, [])
    assert isinstance(run.store, Model) and run.store.get_meta("scenario") == "tiny-publish"


def test_a_break_the_engine_does_not_reach_again_is_not_reported():
    story = load_scenario("publish-report")
    result = explore(story, policy="naive", faults=["late-failure"], depth=8, engine="model")
    assert result.found is not None and result.confirmed
    empty = Model(start_time=story.start_time)
    with pytest.raises(NotConfirmed, match="differs from the state the search reached"):
        confirm(story, "naive", result.found, empty)


def test_bench_explore_reports_the_engine_the_model_and_the_floor(capsys):
    from sim.cli import main
    from sim.explore import bench

    figures = bench(TINY, depth=4)
    assert figures["model_checked"] == figures["transitions"] + 1
    assert figures["project_per_s"] > 0 and figures["model_per_s"] > 0 and figures["floor_per_s"] > 0
    assert figures["model_states"] == figures["states"]
    with pytest.raises(SystemExit) as e:
        main(["bench", "explore", "publish-report", "--depth", "3"])
    out = capsys.readouterr().out
    assert e.value.code in (0, None)
    assert "SQLite" in out and "model" in out and "floor" in out


def test_the_model_searches_a_run_with_sensitive_fields_as_sqlite_does_and_refuses_gathers(capsys):
    """sensitive-source under safe redacts its log: the model engine visits SQLite's states (the runtime
    redacts on it too), but a model cannot be driven from that log (its inputs are [redacted] there).
    Gathers are not modelled: the library refuses them on the model, the CLI explores them on SQLite."""
    from sim.cli import main
    from sim.errors import InputError

    story = load_scenario("sensitive-source")
    on_sqlite = explore(story, faults=["duplicate"], depth=6)
    on_model = explore(story, faults=["duplicate"], depth=6, engine="model")
    assert (on_model.states, on_model.transitions) == (on_sqlite.states, on_sqlite.transitions)
    with pytest.raises(NotModelled, match="redacted"):
        explore(story, faults=["duplicate"], depth=6, check_model=True)
    with pytest.raises(InputError, match="gathers"):
        explore(load_scenario("gathers"), depth=2, engine="model")
    with pytest.raises(SystemExit) as e:
        main(["explore", "gathers", "--depth", "1"])
    assert e.value.code == 0 and ", on sqlite" in capsys.readouterr().out.splitlines()[0]


def test_the_model_and_the_store_agree_a_newer_body_having_spoken_does_not_replace_an_older_one(tmp_path):
    """Store.body_replaced asks only for a restart recorded on the task that names a message of that body
    numbered below this one (since 0179d2d: a newer body having spoken is not, by itself, a replacement);
    the model must answer the same, or a search on it decides messages the store decides otherwise."""
    from sim.envelope import build_envelope
    from sim.runtime import deliver
    from sim.store import Store

    def env(mid, typ, sender, recipient, payload, key):
        return build_envelope(message_id=mid, trace_id="R-1", task_id="T-1", sender=sender, recipient=recipient,
                              type=typ, payload=payload, idempotency_key=key, created_at="2026-07-13T04:00:00Z")

    sends = [(env("M-1", "task_request", "manager", "researcher", {"goal": "g"}, "T-1:request"), (1, 1)),
             (env("M-2", "ack", "researcher", "manager", {"of": "M-1"}, "T-1:ack:2"), (1, 2))]  # a second body
    store, model = Store.create(tmp_path / "s.db"), Model(start_time="2026-07-13T04:00:00Z")
    for e, sent in sends:
        for s in (store, model):
            deliver(s, e, sent=sent)
    for gen, seq in [(1, 1), (1, 5), (2, 1), (3, 1)]:
        assert model.body_replaced("T-1", "researcher", gen, seq, ("zombie",)) == \
            store.body_replaced("T-1", "researcher", gen, seq, ("zombie",)), (gen, seq)


#: sequence_used as it was written before it became a join (the list of the task's message ids, then the
#: messages among them): the join must answer exactly as this did.
_SEQUENCE_USED_AS_A_LIST = (
    "SELECT 1 FROM messages m WHERE m.message_id IN (SELECT DISTINCT message_id FROM events WHERE task_id = ? "
    "AND message_id IS NOT NULL) AND m.sender = ? AND COALESCE(m.sender_generation, 1) = ? "
    "AND m.sender_seq = ? AND m.message_id != ? AND m.idempotency_key != ? LIMIT 1")


@pytest.mark.parametrize("faults", [["zombie"], ["rewind"], ["zombie", "duplicate", "rewind"]])
def test_a_deliverys_numbering_marks_in_one_statement_answer_as_the_two_checks_and_the_model_do(faults):
    """The runtime asks sequence_used and body_replaced in one statement (numbering_marks). Over every
    message of whole runs with the faults that reuse a number or replace a body, and over numbers each
    sender did and did not use: the one statement, the two checks, the query as first written, and the
    model all answer the same; and both answers come out true somewhere, so a check that always says
    no fails here."""
    from sim.planner import LIVE_BODY_RESTARTS

    store = run_scenario(load_scenario("publish-report"), policy="naive", faults=faults)
    rows = store.conn.execute(
        "SELECT DISTINCT e.task_id, m.sender, COALESCE(m.sender_generation, 1), m.sender_seq, m.message_id, "
        "m.idempotency_key FROM events e JOIN messages m ON m.message_id = e.message_id "
        "WHERE m.sender_seq IS NOT NULL ORDER BY e.seq").fetchall()
    assert rows
    model = Model(start_time=load_scenario("publish-report").start_time)
    for op in ops_of(store)[0]:
        apply(model, op, NAIVE)
    seen = set()
    for task, sender, gen, seq, mid, key in rows:
        for g, s, m, k in [(gen, seq, mid, key), (gen, seq, "other", "other"), (gen, seq, mid, "other"),
                           (gen, seq, "other", key), (gen, seq + 1, mid, key),
                           (gen + 1, seq, "other", key), (gen, seq + 3, "other", "other")]:
            marks = store.numbering_marks(task, sender, g, s, m, k, LIVE_BODY_RESTARTS)
            assert marks == (store.sequence_used(task, sender, g, s, m, k),
                             store.body_replaced(task, sender, g, s, LIVE_BODY_RESTARTS)), (task, sender, g, s)
            listed = store.conn.execute(_SEQUENCE_USED_AS_A_LIST, (task, sender, g, s, m, k)).fetchone() is not None
            assert marks[0] == listed, (task, sender, g, s, m, k)
            assert model.numbering_marks(task, sender, g, s, m, k, LIVE_BODY_RESTARTS) == marks
            seen.add(marks)
    assert (True, False) in seen or (True, True) in seen
    if "zombie" in faults:
        assert any(m[1] for m in seen)
    store.close()
