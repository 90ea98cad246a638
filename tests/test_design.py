"""The envelope-design seam: the reference design changes no database, plugged-in designs,
intakes, effect rules and machines drive the real simulator, and the resend and transient faults
show a bad key design with a witness."""

import hashlib
import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from sim.cli import main
from sim.design import REFERENCE, DesignError, Intent, build_from
from sim.invariants import check
from sim.plugins import Plugins, load_design
from sim.runner import run_scenario
from sim.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = json.loads((Path(__file__).parent / "data" / "reference-design-dbs.json").read_text())
SOLUTION = ROOT / "solutions" / "01-envelope-design" / "design.py"
WRONG = ROOT / "solutions" / "01-envelope-design" / "wrong"


def _dump_hash(path: Path) -> str:
    """Every row of the file but meta.commits, which says how it was written: a run commits in
    groups since issue 12 (the pins were re-taken then, after checking that one transaction per
    delivery still wrote every database exactly as pinned and that the grouped rows were the same).
    Re-taken again for issue 29, when every accepted start gained a task_started event: each run
    was written before and after, and apart from those events (one per lease granted) and the
    event seqs they shift, every row of every table was the same. Re-taken for schema version 3 (an
    index on effects by task): every dump, without that index's line and with the old version in
    meta, hashed to its old pin. Re-taken for issue 41, whose behaviour changes every run on purpose:
    the conversation's declared bounds in meta, the trace's epoch and expiry columns, a conflicting
    twin under its sender's next number, no acknowledgement after the fence, publish-report's declared
    expiry on every envelope (the tests of those changes hold each one); and task-v1 became the seed's
    state machine move for move (the kit's waiting_human -> ready row left it: played under the old and
    the new task-v1, the two dumps differed only by that row of transition_rules and the same row in the
    machine_loaded event's list of rules)."""
    c = sqlite3.connect(path)
    try:
        lines = [line for line in c.iterdump() if not line.startswith("INSERT INTO \"meta\" VALUES('commits'")]
        return hashlib.sha256("\n".join(lines).encode()).hexdigest()
    finally:
        c.close()


def _broken(store) -> set[str]:
    return {r.name for r in check(store) if not r.ok}


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_the_reference_design_writes_every_database_exactly_as_before_designs_were_pluggable(case, tmp_path):
    # The pins were written by the simulator as it was before the seam (agents building keys inline).
    scenario, seed, faults, policy = case.split("|")
    sc = load_scenario(scenario)
    if scenario == "stress":
        sc = replace(sc, stress=replace(sc.stress, tasks=40))
    db = tmp_path / "run.db"
    try:
        run_scenario(sc, policy=policy, seed=int(seed), faults=[f for f in faults.split(",") if f], db=db).close()
    except Exception as e:
        assert GOLDEN[case] == "error:" + str(getattr(e, "code", type(e).__name__))
        return
    assert _dump_hash(db) == GOLDEN[case]


def test_a_run_with_a_plugged_design_records_which_file_it_used(tmp_path):
    store = run_scenario(load_scenario("publish-report"), plugins=Plugins(design=SOLUTION))
    assert store.get_meta("plugin_design").startswith("design.py sha256:")
    assert _broken(store) == set()


def test_a_resend_is_a_duplicate_under_the_reference_design_and_the_safe_runtime():
    store = run_scenario(load_scenario("publish-report"), faults=["resend"])
    (fault,) = [e for e in store.events() if e["type"] == "fault_injected"]
    copy = fault["data"]["resend"]
    (dv,) = [d for d in store.deliveries() if d["message_id"] == copy]
    assert dv["decision"] == "duplicate"
    assert fault["data"]["key"] == fault["data"]["resend_key"]
    assert len(store.effects()) == 1
    assert _broken(store) == set()


def test_a_resend_breaks_resend_deduplicated_under_naive_and_publishes_twice():
    store = run_scenario(load_scenario("publish-report"), faults=["resend"], policy="naive")
    results = {r.name: r for r in check(store)}
    assert not results["RESEND_DEDUPLICATED"].ok and not results["EFFECT_AT_MOST_ONCE"].ok
    (w,) = results["RESEND_DEDUPLICATED"].witnesses
    assert w["resend_decision"] == "accepted" and w["original_key"] == w["resend_key"]


def test_a_clock_derived_key_turns_a_resend_into_a_late_result_with_a_witness():
    store = run_scenario(load_scenario("publish-report"), faults=["resend"],
                         plugins=Plugins(design=WRONG / "clock-key" / "design.py"))
    (r,) = [r for r in check(store) if not r.ok]
    assert r.name == "RESEND_DEDUPLICATED"
    (w,) = r.witnesses
    assert w["resend_decision"] == "late" and w["original_key"] != w["resend_key"]
    assert w["original_message_id"] in json.dumps(w) and w["message_id"] != w["original_message_id"]


def test_a_transient_failure_makes_a_second_attempt_that_succeeds_with_another_payload():
    store = run_scenario(load_scenario("publish-report"), faults=["transient"])
    t1 = store.get_task("T-1")
    assert t1.state.value == "succeeded" and t1.lease_version == 2
    results = [m for m in store.messages() if m["task_id"] == "T-1" and m["type"] == "task_result"]
    assert [m["payload"]["status"] for m in results] == ["retry", "succeeded"]
    assert results[0]["idempotency_key"] != results[1]["idempotency_key"]
    assert _broken(store) == set()


def test_a_key_without_the_attempt_freezes_a_healthy_task_under_the_transient_fault():
    store = run_scenario(load_scenario("publish-report"), faults=["transient"], strict_faults=False,
                         plugins=Plugins(design=WRONG / "no-attempt" / "design.py"))
    assert store.get_task("T-1").state.value == "needs_review"
    conflicts = [d for d in store.deliveries() if d["decision"] == "conflict"]
    assert conflicts and conflicts[0]["task_id"] == "T-1"
    assert store.effects() == []


def test_a_design_that_returns_a_non_dict_payload_is_refused_naming_the_intent():
    class Bad(type(REFERENCE)):
        def payload(self, intent):
            return ["not", "a", "dict"]

    bad = Bad()
    i = Intent(type="task_request", sender="manager", recipient="researcher", trace_id="R-1", task_id="T-1",
               body={"goal": "g"}, message_id="M-1", created_at="2026-07-13T04:00:01Z")
    with pytest.raises(DesignError) as e:
        build_from(bad, i)
    assert e.value.code == "E_DESIGN_OUTPUT" and "T-1" in e.value.message and "list" in e.value.message


@pytest.mark.parametrize("source, code", [
    ("def idempotency_key(i): return 'k'\n", "E_PLUGIN_INCOMPLETE"),
    ("import nonexistent_module_xyz\n", "E_PLUGIN_IMPORT"),
    ("def idempotency_key(i:\n", "E_PLUGIN_IMPORT"),
    ("DIGEST_SCHEME='md5'\ndef idempotency_key(i): return 'k'\ndef payload(i): return {}\ndef evidence_refs(i): return []\n",
     "E_PLUGIN_INCOMPLETE"),
])
def test_a_design_file_that_cannot_be_used_is_one_error_line_and_nothing_written(tmp_path, capsys, source, code):
    f = tmp_path / "design.py"
    f.write_text(source)
    db = tmp_path / "run.db"
    with pytest.raises(SystemExit) as e:
        main(["run", "--design", str(f), "--db", str(db)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {code}: ") and err.count("\n") == 1 and "Traceback" not in err
    assert not db.exists() and list(tmp_path.iterdir()) == [f]


def test_a_design_whose_payload_breaks_the_envelope_rules_stops_the_run_with_one_line(tmp_path, capsys):
    f = tmp_path / "design.py"
    f.write_text("DIGEST_SCHEME='jcs-v2'\ndef idempotency_key(i): return 'bad key with spaces'\n"
                 "def payload(i): return dict(i.body)\ndef evidence_refs(i): return list(i.refs)\n")
    with pytest.raises(SystemExit) as e:
        main(["run", "--design", str(f), "--db", str(tmp_path / "run.db")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: E_DESIGN_OUTPUT: ") and "idempotency_key" in err
    assert not (tmp_path / "run.db").exists()


def test_run_with_a_naive_intake_file_breaks_the_invariants_the_naive_policy_breaks(tmp_path, capsys):
    f = tmp_path / "decide.py"
    f.write_text("from sim.policy import naive_decide as decide\n")
    main_rc = None
    try:
        main(["run", "--intake", str(f), "--fault", "late-failure", "--db", str(tmp_path / "r.db"), "--json"])
    except SystemExit as e:
        main_rc = e.code
    assert main_rc in (0, None)
    out = json.loads(capsys.readouterr().out)
    assert out["invariants"]["NO_STATE_REGRESSION"] is False
    assert out["plugins"]["intake"].startswith("decide.py sha256:")


def test_an_idempotent_effect_rule_keeps_even_the_naive_intake_from_publishing_twice(tmp_path):
    f = tmp_path / "effects.py"
    f.write_text("def effect_key(result, delivery_id):\n    e = result.payload['effect']\n"
                 "    return f\"{e['kind']}:{e['target']}:{result.task_id}\"\n")
    naive = run_scenario(load_scenario("publish-report"), policy="naive", faults=["duplicate"])
    assert "EFFECT_AT_MOST_ONCE" in _broken(naive)
    ruled = run_scenario(load_scenario("publish-report"), policy="naive", faults=["duplicate"], plugins=Plugins(effects=f))
    assert "EFFECT_AT_MOST_ONCE" not in _broken(ruled)
    assert len(ruled.effects()) == 1


def test_run_with_a_machine_file_pins_the_tasks_to_that_machine(tmp_path):
    store = run_scenario(load_scenario("publish-report"), plugins=Plugins(machine=ROOT / "data" / "machines" / "task-v2.toml"))
    versions = {t["machine_version"] for t in store.tasks()}
    assert versions == {"task-v2"}


def test_compare_shows_a_design_beside_the_reference_design(capsys):
    main_rc = None
    try:
        main(["compare", "--design", str(WRONG / "clock-key" / "design.py"), "--fault", "resend"])
    except SystemExit as e:
        main_rc = e.code
    assert main_rc in (0, None)
    out = capsys.readouterr().out
    assert "reference design" in out and "design.py" in out and "RESEND_DEDUPLICATED" in out and "BROKEN" in out


def test_the_reference_design_as_a_file_gives_the_same_state_digest_as_the_built_in_one(tmp_path):
    f = tmp_path / "design.py"
    f.write_text(
        "from sim.design import REFERENCE\nDIGEST_SCHEME = REFERENCE.digest_scheme\n"
        "idempotency_key = REFERENCE.idempotency_key\npayload = REFERENCE.payload\nevidence_refs = REFERENCE.evidence_refs\n"
    )
    for faults in ([], ["crash"], ["transient", "resend"]):
        a = run_scenario(load_scenario("fan-out"), faults=faults)
        b = run_scenario(load_scenario("fan-out"), faults=faults, plugins=Plugins(design=f))
        assert a.state_digest() == b.state_digest(), faults
    assert load_design(f).digest_scheme == "json-sorted-v1"


def test_a_resend_injected_by_hand_in_a_live_run_is_a_duplicate_of_the_original():
    from sim.live import LiveRun

    live = LiveRun(load_scenario("publish-report"))
    try:
        while not any(d["message_id"] == "M-3" for d in live.store.deliveries()):
            live.step()
        said = live.inject("resend", "M-3")
        assert "M-3" in said
        live.run_to_end()
        (fault,) = [e for e in live.store.events() if e["type"] == "fault_injected"]
        copy = fault["data"]["resend"]
        (dv,) = [d for d in live.store.deliveries() if d["message_id"] == copy]
        assert dv["decision"] == "duplicate" and fault["data"]["selector"] == "by hand"
        assert _broken(live.store) == set()
        # once the conversation is fenced, a resend is a message after its terminal: refused, changing nothing
        again = live.inject("resend", "M-3").split()[0]
        live.run_to_end()
        (dv,) = [d for d in live.store.deliveries() if d["message_id"] == again]
        assert (dv["decision"], dv["code"]) == ("rejected", "E_POST_TERMINAL_MESSAGE")
        assert _broken(live.store) == set()
    finally:
        live.close()


def test_run_plugs_a_machine_and_an_effect_rule_from_the_command_line(tmp_path, capsys):
    eff = tmp_path / "effects.py"
    eff.write_text("def effect_key(result, delivery_id):\n    return f\"{result.payload['effect']['target']}:{result.task_id}\"\n")
    code = None
    try:
        main(["run", "--machine", str(ROOT / "data" / "machines" / "task-v2.toml"), "--effects", str(eff),
              "--policy", "naive", "--fault", "duplicate", "--db", str(tmp_path / "r.db"), "--json"])
    except SystemExit as e:
        code = e.code
    assert code in (0, None)
    out = json.loads(capsys.readouterr().out)
    assert out["effects"] == ["R-1:T-2"] and out["invariants"]["EFFECT_AT_MOST_ONCE"] is True
    assert set(out["plugins"]) == {"machine", "effects"}


def test_an_effect_rule_that_returns_a_number_stops_the_run_with_one_line(tmp_path, capsys):
    eff = tmp_path / "effects.py"
    eff.write_text("def effect_key(result, delivery_id):\n    return 7\n")
    with pytest.raises(SystemExit) as e:
        main(["run", "--effects", str(eff), "--db", str(tmp_path / "r.db")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: E_EFFECT_RULE: ") and not (tmp_path / "r.db").exists()
