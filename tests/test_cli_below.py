"""What the CLI's commands orchestrate, called without Typer (issue 27, point 1): the tour's steps
(sim/tour.py), the one refusal of a lab's run (sim.runner.refuse_lab_run), and the one output helper
(sim.cli.common.output_rows)."""

from __future__ import annotations

import json

import pytest

from sim import tour
from sim.errors import InputError, StoreError
from sim.runner import JOURNAL_META, LAB_META, refuse_lab_run
from sim.store import Store


def test_the_tour_delivers_each_step_and_releases_the_task_the_conflict_froze(tmp_path):
    steps = tour.tour_steps()
    store = tour.open_tour(tmp_path / "tour.db")
    try:
        facts, draft = tour.store_artifacts(store)
        assert store.artifact(facts) is not None and store.artifact(draft) is not None
        for _title, envs in steps:
            outcomes = tour.deliver_step(store, envs)
            assert [o.message_id for o in outcomes] == [e.message_id for e in envs]
        frozen = {t["task_id"]: t["state"] for t in store.tasks()}
        r = tour.release(store, steps)
        assert frozen[r.task_id] == "needs_review"
        assert r.outcome.decision == "accepted" and r.outcome.state == "ready"
        assert r.evidence == ["M-3", "M-8"]  # read from the steps, not written in the command
    finally:
        store.close()


def test_the_evidence_and_the_duplicate_come_from_the_steps_delivered():
    from sim.samples import conflicting_m3, happy_path

    happy = happy_path()
    steps = [("story", happy), ("again", [happy[6]]), ("conflict", [conflicting_m3("M-42", 11)])]
    assert tour.conflict_evidence(steps) == ("T-1", ["M-3", "M-42"])
    assert tour.delivered_twice(steps) == [happy[6].message_id]
    with pytest.raises(ValueError):
        tour.conflict_evidence([("story", happy)])


def test_the_tour_replaces_its_own_file_but_never_a_lab_run_or_a_foreign_file(tmp_path):
    db = tmp_path / "tour.db"
    tour.open_tour(db).close()
    tour.open_tour(db).close()  # an earlier tour: replaced
    other = tmp_path / "notes.db"
    other.write_bytes(b"not a database")
    with pytest.raises(StoreError):
        tour.open_tour(other)
    assert other.read_bytes() == b"not a database"


def _lab_run(path, *, journal: bool):
    store = Store.create(path)
    store.set_meta({LAB_META: "3", **({JOURNAL_META: "[]"} if journal else {})})
    store.close()


def test_one_function_refuses_a_lab_run_to_replacers_and_to_writers_by_hand(tmp_path):
    from sim.labs.judge import LAB_KEY
    from sim.labs.resume import JOURNAL_KEY

    assert (LAB_META, JOURNAL_META) == (LAB_KEY, JOURNAL_KEY)  # the labs' keys, not a copy that could drift
    sim_run, hand_run, plain = tmp_path / "lab3.db", tmp_path / "hand.db", tmp_path / "plain.db"
    _lab_run(sim_run, journal=True)
    _lab_run(hand_run, journal=False)
    Store.create(plain).close()
    for db in (sim_run, hand_run):  # replacing: refused, whatever the lab
        with pytest.raises(StoreError) as e:
            refuse_lab_run(db)
        assert e.value.code == "E_DB_LAB_RUN" and "not replaced" in str(e.value)
    refuse_lab_run(plain)
    refuse_lab_run(tmp_path / "missing.db")
    store = Store.open(sim_run)  # writing by hand into a lab's simulator run: refused, and the store closed
    with pytest.raises(InputError) as e:
        refuse_lab_run(sim_run, store)
    assert e.value.code == "E_DB_LAB_RUN" and "only the lab writes" in str(e.value)
    for db in (hand_run, plain):  # a hand-delivery lab's run, or no lab: written into by hand
        with Store.open(db) as store:
            refuse_lab_run(db, store)
            store.get_meta(LAB_META)  # still open


def test_output_rows_prints_a_table_or_the_json_it_is_given(capsys):
    from sim.cli.common import _print_json, output_rows

    output_rows("Things", ["name", "count"], [["a", 1], ["b", 2]], as_json=True)
    assert json.loads(capsys.readouterr().out) == [{"name": "a", "count": 1}, {"name": "b", "count": 2}]
    data = {"things": ["a", "b"], "ü": None}
    output_rows("Things", ["name"], [["a"]], as_json=True, data=data)
    out = capsys.readouterr().out
    _print_json(data)
    assert out == capsys.readouterr().out  # the bytes every --json wrote before
    output_rows("Things", ["name", "count"], [["a", 1]], caption="one row")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].strip() == "Things" and lines[-1].strip() == "one row"
    assert any(line.split() == ["a", "1"] for line in lines)
