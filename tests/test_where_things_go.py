"""docs/architecture.md's "Where a new thing goes", checked: for a kind of thing, add one sample
entry in the one place the table names, and it appears everywhere it should (the CLI, the TUI, the
grader, the labs) with nothing else edited. Each test removes its entry again."""

from __future__ import annotations

import dataclasses
import json
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


SAMPLE = "SAMPLE_SUCCESS_FINAL"


def _sample_invariant(run) -> list[dict]:
    return [{"task_id": t["task_id"], "new_state": t["new_state"]} for t in run.transitions
            if t["old_state"] == "succeeded" and t["new_state"] == "failed"]


def _register_sample_invariant():
    from sim import invariants

    invariants.invariant(SAMPLE, short="smpl", description="A succeeded task never fails afterwards.",
                         broken_by=("publish-report", "late-failure"), gist="a succeeded task never fails afterwards",
                         )(_sample_invariant)


def _register_sample_fault():
    from sim import faults

    faults.fault("sample-noop", "nothing, to a message no story sends", default_target="none",
                 default_match=lambda env: False, story="touches nothing", safe="nothing to refuse",
                 naive_breaks=(SAMPLE,), naive_note="a sample")(lambda bus, spec, s: None)


def test_a_new_invariant_is_one_decorated_function_and_check_the_grid_and_sharded_runs_know_it(tmp_path, capsys):
    from sim import invariants
    from sim.course.grade import SHORT
    from sim.runner import run_scenario
    from sim.scenario import load_scenario

    _register_sample_invariant()
    try:
        db = tmp_path / "run.db"
        store = run_scenario(load_scenario("publish-report"), db=db, policy="naive", faults=["late-failure"])
        store.close()
        code, out, _ = run_cli(capsys, "check", "--db", db)
        assert code == 1 and SAMPLE in out  # the CLI's check (and the TUI's Check pane: the same call)
        assert SHORT[SAMPLE] == "smpl"  # the grader's grid
        from sim.store import Store

        s = Store.open(db, readonly=True)
        try:  # judged shard by shard too
            sharded = {r.name: r.ok for r in invariants.check(s, shard_size=1)}
        finally:
            s.close()
        assert sharded[SAMPLE] is False
    finally:
        invariants.REGISTRY.pop(SAMPLE, None)


def _table_row(kind: str) -> str:
    table = (ROOT / "docs" / "architecture.md").read_text().split("## Where a new thing goes", 1)[1].split("\n## ", 1)[0]
    return next(line for line in table.splitlines() if line.startswith(f"| {kind} |"))


def test_a_new_fault_and_invariant_touch_exactly_the_places_the_table_names(tmp_path, monkeypatch):
    """Declared in the registries alone, a sample fault and invariant fail exactly the checks of the places the
    table names; once each place is filled, every check passes and the naive matrix runs the sample."""
    import test_invariant_contract as contract_test
    import test_invariant_witnesses as witness_test
    import test_naive_matrix as matrix_test

    from sim import docs, faults, invariants
    from sim.contracts import invariants as contract

    readme = tmp_path / "README.md"
    readme.write_text(docs.README.read_text(encoding="utf-8"), encoding="utf-8")
    golden = tmp_path / "witnesses"
    shutil.copytree(witness_test.GOLDEN, golden)
    monkeypatch.setattr(witness_test, "GOLDEN", golden)

    def places() -> set[str]:
        """The places whose check fails for the samples, by the file the table names for each."""
        out = set()
        try:
            contract_test.test_every_invariant_has_cases_where_it_holds_and_where_it_breaks()
        except AssertionError:
            out.add("sim/contracts/invariants.py")
        try:
            witness_test.test_each_invariant_has_its_file_and_no_file_has_a_case_the_contract_lost()
        except AssertionError:
            out.add(f"tests/data/witnesses/{SAMPLE}.json")
        try:
            for name in matrix_test.breaks():
                if name == SAMPLE:
                    matrix_test.test_the_fault_that_breaks_it_on_its_own_story_says_so_in_its_readme_row(name)
        except AssertionError:
            out.add("naive_breaks=")
        out |= {f"README.md {section}" for section in docs.stale(readme)}
        return out

    assert places() == set()
    _register_sample_invariant()
    _register_sample_fault()
    for module in (invariants, contract_test, witness_test):  # as a declaration in sim/invariants.py would be
        monkeypatch.setattr(module, "INVARIANTS", tuple(invariants.REGISTRY))
    try:
        # the matrix's parametrisation reads the registry: the sample is in it, with its run
        assert matrix_test.breaks()[SAMPLE] == ("publish-report", "late-failure")
        assert places() == {"sim/contracts/invariants.py", f"tests/data/witnesses/{SAMPLE}.json", "naive_breaks=",
                            "README.md faults", "README.md invariants"}
        # each is a place the table's rows name
        row = _table_row("invariant") + _table_row("fault")
        for named in ("sim/invariants.py", "broken_by=", "sim/contracts/invariants.py", "tests/data/witnesses/NAME.json",
                      "naive_breaks=", "story=", "safe=", "python -m sim.docs", "sim/faults.py"):
            assert named in row, named

        # fill each place, as the table says
        cases = contract.CASES + (
            contract.Case("a late failure recorded as late leaves the success final", SAMPLE, True,
                          contract._scenario(faults=["late-failure"])),
            contract.Case("last-write-wins fails a succeeded task", SAMPLE, False,
                          contract._scenario(policy="naive", faults=["late-failure"]), {"task_id": "T-1"}),
        )
        for module in (contract, contract_test, witness_test):
            monkeypatch.setattr(module, "CASES", cases)
        sample_cases = [c for c in cases if c.invariant == SAMPLE]
        witness_test.golden_file(SAMPLE).write_text(
            json.dumps({c.name: witness_test._verdicts(c) for c in sample_cases}, indent=1, sort_keys=True) + "\n")
        late = faults.REGISTRY["late-failure"]
        monkeypatch.setitem(faults.REGISTRY, "late-failure",
                            dataclasses.replace(late, naive_breaks=late.naive_breaks + (SAMPLE,)))
        readme.write_text(docs.render(readme.read_text(encoding="utf-8")), encoding="utf-8")
        assert places() == set()

        # and what those places feed says so
        for case in sample_cases:
            assert contract.check_case(invariants.check, case) == []
            witness_test.test_every_invariant_says_on_the_case_exactly_what_was_reviewed(case)
        matrix_test.test_the_naive_run_breaks_the_invariant_and_the_safe_run_keeps_it(SAMPLE)
        text = " ".join(readme.read_text(encoding="utf-8").split())  # (paragraphs wrap)
        assert f"{SAMPLE} (a succeeded task never fails afterwards)" in text
        assert f"all {docs.number_words(len(invariants.REGISTRY))} in every shipped scenario" in text
        assert "| `sample-noop` | touches nothing | nothing to refuse | SAMPLE_SUCCESS_FINAL (a sample) |" in text
    finally:
        invariants.REGISTRY.pop(SAMPLE, None)
        faults.REGISTRY.pop("sample-noop", None)


def test_a_fault_or_invariant_without_its_readme_words_or_naive_run_is_refused():
    from sim import faults, invariants

    with pytest.raises(ValueError, match="README"):
        faults.fault("sample-bare", "x", default_target="x", default_match=lambda env: False)(lambda bus, spec, s: None)
    assert "sample-bare" not in faults.REGISTRY
    with pytest.raises(ValueError, match="broken_by"):
        invariants.invariant("SAMPLE_BARE", short="bare", description="x")
    with pytest.raises(ValueError, match="one of"):
        invariants.invariant("SAMPLE_BARE", short="bare", description="x", broken_by=("publish-report", "drop"),
                             never_under_naive="both")


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
