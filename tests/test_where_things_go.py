"""docs/architecture.md's "Where a new thing goes", checked: for a kind of thing, add one sample
entry in the one place the table names, and it appears everywhere it should (the CLI, the TUI, the
grader, the labs) with nothing else edited. Each test removes its entry again."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]


def test_the_table_names_a_place_for_each_kind_tested_here():
    table = (ROOT / "docs" / "architecture.md").read_text().split("## Where a new thing goes", 1)[1].split("\n## ", 1)[0]
    kinds = {m.group(1).strip() for m in re.finditer(r"^\| ([^|]+) \|", table, re.M)} - {"a new ...", "---"}
    assert {"event type", "invariant", "lab check", "hostile kind"} <= kinds


def test_a_new_event_type_is_one_class_and_the_store_both_faces_and_the_labs_know_it(tmp_path, capsys):
    from sim import events
    from sim.labs.checks import Facts
    from sim.store import Store
    from sim.tui.rows import event_row, event_style

    @dataclass(frozen=True)
    class SampleNoted(events.Event):
        TYPE = "sample_noted"
        FOLDS = "nothing"
        STYLE = "italic"
        what: str = ""

        def summary(self) -> str:
            return f"noted {self.what}"

    try:
        db = tmp_path / "run.db"
        store = Store.create(db, start_time="2026-07-13T04:00:00Z")
        with store.transaction():
            store.append_event(SampleNoted(what="x").draft(None, None))
        row = store.event(store.last_event())
        assert row.event == SampleNoted(what="x")  # read back typed, as its class
        store.close()
        code, out, _ = run_cli(capsys, "events", "--db", db)
        assert code == 0 and "sample_noted" in out and "noted x" in out  # the CLI
        assert "noted x" in event_row(row).plain and event_style("sample_noted") == "italic"  # the TUI
        assert "sample_noted" in Facts._KEEP and "sample_noted" in set(Facts._KEEP)  # a lab's 'event' check may name it
    finally:
        events.REGISTRY.pop("sample_noted", None)


def test_a_new_invariant_is_one_decorated_function_and_check_the_grid_and_sharded_runs_know_it(tmp_path, capsys):
    from sim import invariants
    from sim.course.grade import SHORT
    from sim.runner import run_scenario
    from sim.scenario import load_scenario

    invariants.invariant("SAMPLE_NO_TASKS", short="smpl", description="A run creates no task.")(
        lambda run: [{"task_id": e["task_id"]} for e in run.events if e["type"] == "task_created"][:1])
    try:
        db = tmp_path / "run.db"
        store = run_scenario(load_scenario("publish-report"), db=db)
        store.close()
        code, out, _ = run_cli(capsys, "check", "--db", db)
        assert code == 1 and "SAMPLE_NO_TASKS" in out  # the CLI's check (and the TUI's Check pane: the same call)
        assert SHORT["SAMPLE_NO_TASKS"] == "smpl"  # the grader's grid
        from sim.store import Store

        s = Store.open(db, readonly=True)
        try:  # judged shard by shard too
            sharded = {r.name: r.ok for r in invariants.check(s, shard_size=1)}
        finally:
            s.close()
        assert sharded["SAMPLE_NO_TASKS"] is False
    finally:
        invariants.REGISTRY.pop("SAMPLE_NO_TASKS", None)


def test_a_new_lab_check_is_one_decorated_function_that_a_lab_file_can_name(tmp_path):
    from sim.labs import checks
    from sim.labs.catalog import load_lab

    @checks.check("sample_always", codes=("quiet",))
    def _sample(ctx, *, word: str):
        return checks.Seen(True, "met", {"word": word})

    try:
        lab = tmp_path / "03-duplicate-delivery"
        shutil.copytree(ROOT / "labs" / "03-duplicate-delivery", lab)
        toml = (lab / "lab.toml").read_text()
        toml = toml.replace("[[checkpoint]]", '[[checkpoint]]\nid = "sample"\ntitle = "x"\ncheck = "sample_always"\n'
                            'args = { word = "hello" }\nhint = "x"\n\n[[checkpoint]]', 1)
        toml = re.sub(r'(\[\[step\]\][^\[]*?checkpoints = \[)', r'\1"sample", ', toml, count=1)
        (lab / "lab.toml").write_text(toml)
        loaded = load_lab(lab)
        assert loaded.checkpoint("sample").check == "sample_always"
        assert checks.case_codes("sample_always") == {"quiet"}  # what the lab's hints for it may be keyed by
    finally:
        checks.CHECKS.pop("sample_always", None)
        checks.CODES.pop("sample_always", None)


def test_each_check_declares_exactly_the_codes_its_code_reports():
    from sim.labs import checks

    assert set(checks.CODES) == set(checks.CHECKS)
    for name in checks.CHECKS:
        assert checks.case_codes(name) == checks.codes_in_source(name), name
    with pytest.raises(ValueError, match="declared twice"):
        checks.check("delivery", codes=())(lambda ctx: None)


def test_a_new_hostile_kind_is_one_entry_and_the_corpus_has_it(tmp_path, monkeypatch):
    from sim.course import corpus
    from sim.course.catalog import get_exercise

    monkeypatch.setitem(corpus.HOSTILE_CODE, "sample-prints", ("before", "print('hello')\n", "prints on import", False))
    entries = corpus.build_corpus(get_exercise(1), tmp_path / "class", slow=False)
    names = [e.name for e in entries]
    assert "hostile-sample-prints" in names and (tmp_path / "class" / "hostile-sample-prints").is_dir()


def test_a_fault_injected_by_hand_declares_its_key_and_the_tui_keys_are_made_from_the_registry():
    from sim import faults
    from sim.tui.app import KEYS, RunScreen

    declared = {f.tui_key[0]: f"inject('{f.name}')" for f in faults.REGISTRY.values() if f.tui_key}
    assert set(declared.values()) == {f"inject('{n}')" for n in faults.INJECTABLE}
    rows = {k: action for k, action, *_ in KEYS if action.startswith("inject(")}
    assert rows == declared  # no fault key is written by hand
    bound = {b.key: b.action.removeprefix("app.") for b in RunScreen.BINDINGS if "inject(" in b.action}
    assert bound == declared
    with pytest.raises(ValueError, match="needs its TUI key"):
        faults.fault("sample", "x", default_target="x", default_match=lambda env: False, by_hand="x")
    with pytest.raises(ValueError, match="another fault's"):
        faults.fault("sample", "x", default_target="x", default_match=lambda env: False, by_hand="x",
                     tui_key=("d", "X", "X", "X"))
