"""The seeded simulator: scenarios, agents, the fault-injecting transport, and the CLI over them.

Most runs are in memory (``run_scenario(load_scenario(...))`` with no db): a publish-report
run takes a few hundredths of a second. The CLI tests run in ``tmp_path`` (``monkeypatch.chdir``)
through :func:`sim.cli.main`, which always ends in ``SystemExit``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import sqlite3
from collections import Counter
from datetime import date
from functools import lru_cache
from pathlib import Path

import pytest

from sim.cli import main
from sim.errors import InputError
from sim.faults import FAULTS, parse_fault
from sim.faults import REGISTRY as FAULT_REGISTRY
from sim.invariants import INVARIANTS, check
from sim.runner import run_scenario, summarize
from sim.runtime import ATTEMPT_COST
from sim.scenario import load_scenario
from sim.store import Store

ERROR_LINE = re.compile(r"^error: (E_[A-Z0-9_]+): .+$")

#: What the naive policy is expected to break, per fault of the seed's four: what each fault declares
#: (``naive_breaks=`` in sim/faults.py, its README row; tests/test_readme_faults.py runs every fault's).
NAIVE_BREAKS = {name: set(FAULT_REGISTRY[name].naive_breaks)
                for name in ("duplicate", "conflicting-digest", "late-failure", "crash")}


# ---------------------------------------------------------------------------- helpers


@lru_cache(maxsize=None)
def _scenario(name: str):
    return load_scenario(name)


@lru_cache(maxsize=None)
def _run(name: str = "publish-report", policy: str = "safe", faults: tuple[str, ...] = (), seed: int | None = None) -> Store:
    """One in-memory run per argument set (the stores are only read, never written, by the tests)."""
    return run_scenario(_scenario(name), policy=policy, faults=list(faults), seed=seed)


@lru_cache(maxsize=None)
def _summary(name: str = "publish-report", policy: str = "safe", faults: tuple[str, ...] = (), seed: int | None = None) -> dict:
    return summarize(_run(name, policy, faults, seed))


def _messages(store: Store) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for m in store.messages():
        out.setdefault(m["message_id"], []).append(m)
    return out


def _message(store: Store, message_id: str) -> dict:
    rows = _messages(store)[message_id]
    assert len(rows) == 1, f"{message_id} has {len(rows)} rows"
    return rows[0]


def _deliveries_of(store: Store, message_id: str) -> list[dict]:
    return [d for d in store.deliveries() if d["message_id"] == message_id]


def _events(store: Store, etype: str) -> list[dict]:
    return [e for e in store.events() if e["type"] == etype]


def _task(store: Store, task_id: str) -> dict | None:
    return next((t for t in store.tasks() if t["task_id"] == task_id), None)


def _broken(store: Store) -> set[str]:
    return {r.name for r in check(store) if not r.ok}


def _invoke(args) -> tuple[object, bool]:
    try:
        main([str(a) for a in args])
    except SystemExit as e:
        return e.code, True
    except Exception as e:  # noqa: BLE001 - exactly what must never happen
        return f"uncaught {type(e).__name__}: {e}", False
    return None, False


def cli(capsys, *args) -> tuple[object, str, str]:
    """Run the CLI in-process; return (exit status, stdout, stderr)."""
    capsys.readouterr()
    code, exited = _invoke(args)
    out, err = capsys.readouterr()
    if not exited:
        pytest.fail(f"protolab {' '.join(map(str, args))} did not end in SystemExit ({code})")
    assert "Traceback" not in out + err
    return code, out, err


def cli_ok(capsys, *args) -> str:
    code, out, err = cli(capsys, *args)
    assert code == 0, f"protolab {' '.join(map(str, args))} exited {code}: {err}"
    return out


def error_code(err: str) -> str:
    """The code of the ``error: CODE: ...`` line (the last non-blank line of stderr)."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines, "nothing on stderr"
    assert len(lines) == 1, f"more than one error line: {err!r}"
    m = ERROR_LINE.match(lines[-1])
    assert m, f"stderr does not read 'error: E_CODE: message': {err!r}"
    return m.group(1)


def assert_one_error_line(code, out: str, err: str, expected: str) -> None:
    """Exit 2, exactly one ``error: CODE: message`` line on stderr, nothing on stdout."""
    assert code == 2, f"exit {code}, stderr {err!r}"
    assert err.endswith("\n") and err.count("\n") == 1, f"stderr is not exactly one line: {err!r}"
    m = ERROR_LINE.match(err.rstrip("\n"))
    assert m, f"stderr does not read 'error: E_CODE: message': {err!r}"
    assert m.group(1) == expected, err
    assert out == ""


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# ---------------------------------------------------------------------------- 1. the default run


def test_the_default_run_is_publish_report_seed_0_safe_and_both_tasks_succeed():
    sc = _scenario("publish-report")
    assert (sc.name, sc.seed, sc.faults) == ("publish-report", 0, ())
    s = _summary()
    assert (s["scenario"], s["seed"], s["policy"], s["faults"]) == ("publish-report", 0, "safe", [])
    assert s["tasks"] == {"T-1": "succeeded", "T-2": "succeeded"}
    assert s["unfinished"] == 0
    assert s["faults_injected"] == []
    assert set(s["invariants"]) == set(INVARIANTS) and all(s["invariants"].values())
    assert s["counts"]["deliveries_by_decision"] == {"accepted": s["counts"]["deliveries"]}


def test_message_ids_m1_to_m6_follow_the_design_story():
    store = _run()
    story = [
        ("M-1", "task_request", "T-1", "manager", "researcher"),
        ("M-2", "task_started", "T-1", "researcher", "manager"),
        ("M-3", "task_result", "T-1", "researcher", "manager"),
        ("M-4", "task_request", "T-2", "manager", "writer"),
        ("M-5", "task_started", "T-2", "writer", "manager"),
        ("M-6", "task_result", "T-2", "writer", "manager"),
    ]
    ms = [m for m in store.messages() if m["message_id"].startswith("M-")]
    # M-7 closes the conversation: the manager's fence, addressed to every worker
    assert [(m["message_id"], m["type"], m["task_id"], m["sender"], m["recipient"]) for m in ms] == story + [
        ("M-7", "fence", "R-1", "manager", "researcher")]
    assert ms[-1]["payload"] == {"to": ["researcher", "writer"], "terminal": "COMPLETED"}
    story_ids = [mid for mid, *_ in story]
    for mid, *_ in story:
        assert [d["decision"] for d in _deliveries_of(store, mid)] == ["accepted"]
    assert _message(store, "M-3")["payload"]["status"] == "succeeded"
    assert _message(store, "M-6")["payload"]["status"] == "succeeded"
    assert _message(store, "M-6")["payload"]["effect"] == {"kind": "publish", "target": "R-1"}
    # the deliveries are in story order too (acks interleave)
    order = [d["message_id"] for d in store.deliveries() if d["message_id"] in story_ids]
    assert order == story_ids


def test_the_default_run_commits_exactly_one_publish_effect():
    store = _run()
    effects = store.effects()
    assert [e["effect_key"] for e in effects] == ["publish:R-1:T-2"]
    assert (effects[0]["kind"], effects[0]["target"], effects[0]["task_id"], effects[0]["message_id"]) == (
        "publish", "R-1", "T-2", "M-6")
    assert len(_events(store, "effect_committed")) == 1
    assert not _events(store, "effect_suppressed")


def test_acks_acknowledge_a_message_each_and_change_no_state():
    store = _run()
    acks = [m for m in store.messages() if m["type"] == "ack"]
    assert [m["message_id"] for m in acks] == ["A-1", "A-2", "A-3", "A-4", "A-5", "A-6"]
    assert [m["payload"]["of"] for m in acks] == ["M-2", "M-3", "M-5", "M-6", "M-7", "M-7"]
    assert [m["sender"] for m in acks] == ["manager"] * 4 + ["researcher", "writer"]  # the workers ack the fence
    # an ack's events are the receipt and its intent: no move, no lease, no budget, no effect
    for e in store.events():
        if (e["message_id"] or "").startswith("A-"):
            assert e["type"] in ("ack_recorded", "intent_recorded"), e
    # the task's state and version right after an ack equal those right before it
    last: dict[str, tuple] = {}
    for d in store.deliveries():
        after = (d["state_after"], d["state_version_after"])
        if d["type"] == "ack":
            assert d["decision"] == "accepted"
            assert after == last[d["task_id"]], d
        last[d["task_id"]] = after
    assert not [t for t in store.transitions() if (t["message_id"] or "").startswith("A-")]


def test_the_researchers_result_cites_a_stored_fact_table_artifact():
    store = _run()
    m3 = _message(store, "M-3")
    ref = m3["payload"]["artifact"]
    assert ref.startswith("sha256:")
    assert m3["evidence_refs"] == [ref]
    art = store.artifact(ref)
    assert art is not None and art["kind"] == "fact-table" and art["task_id"] == "T-1"
    assert art["content"]["kind"] == "fact-table"


def test_the_t2_request_cites_the_fact_table_by_reference_not_by_copy():
    store = _run()
    ref = _message(store, "M-3")["payload"]["artifact"]
    m4 = _message(store, "M-4")
    assert m4["evidence_refs"] == [ref]
    # the payload names the ref at most; none of the fact table's content travels in the message
    content = store.artifact(ref)["content"]
    text = json.dumps(m4["payload"])
    for claim, source, _when in content["rows"]:
        assert claim not in text and source not in text
    assert "rows" not in m4["payload"]
    # and the writer's result cites its draft first, then the same fact table
    m6 = _message(store, "M-6")
    assert m6["evidence_refs"] == [m6["payload"]["artifact"], ref]
    draft = store.artifact(m6["payload"]["artifact"])
    assert draft["kind"] == "draft" and draft["content"]["cites"] == [ref]


def test_the_fact_table_has_faker_rows_of_claim_source_and_date():
    store = _run()
    content = store.artifact(_message(store, "M-3")["payload"]["artifact"])["content"]
    assert content["columns"] == ["claim", "source", "date"]
    assert content["task_id"] == "T-1" and content["goal"] == "collect evidence"
    assert len(content["rows"]) == 3
    for claim, source, when in content["rows"]:
        assert isinstance(claim, str) and claim.endswith(".") and len(claim.split()) >= 3
        assert re.match(r"^https?://", source)
        assert date(2025, 1, 1) <= date.fromisoformat(when) <= date(2026, 6, 30)
    assert len({row[0] for row in content["rows"]}) == 3


@pytest.mark.parametrize("faults", [(), ("crash",)], ids=["default", "crash"])
def test_budget_is_charged_in_the_ledger_once_per_attempt(faults):
    store = _run(faults=faults)
    ledger = store.budget_ledger()
    grants = _events(store, "lease_granted")
    for t in store.tasks():
        rows = [r for r in ledger if r["task_id"] == t["task_id"]]
        allotted = [r for r in rows if r["reason"] == "allotted"]
        debits = [r for r in rows if r["reason"] != "allotted"]
        task_grants = [g for g in grants if g["task_id"] == t["task_id"]]
        assert len(allotted) == 1 and allotted[0]["delta"] == t["budget_total"] == 3
        # one debit per lease granted (per attempt), of the runtime's fixed cost, named after the attempt
        assert len(debits) == len(task_grants) >= 1
        assert [r["delta"] for r in debits] == [-ATTEMPT_COST] * len(debits)
        assert [r["reason"] for r in debits] == [f"attempt {g['data']['lease_version']}" for g in task_grants]
        assert [r["message_id"] for r in debits] == [g["message_id"] for g in task_grants]
        assert t["budget_left"] == t["budget_total"] - ATTEMPT_COST * len(debits)
    if faults == ("crash",):
        assert len([r for r in ledger if r["task_id"] == "T-1" and r["delta"] < 0]) == 2


def test_the_budget_charge_does_not_come_from_any_agent_field():
    store = _run()
    ledger = store.budget_ledger()
    by_id = {m["message_id"]: m for m in store.messages()}
    for r in ledger:
        if r["reason"] == "allotted":
            continue
        msg = by_id[r["message_id"]]
        # the charge is triggered by a task_started, which carries nothing but the lease it asks for
        assert msg["type"] == "task_started"
        assert set(msg["payload"]) == {"lease_version"}
    for e in _events(store, "budget_charged"):
        assert e["data"]["amount"] == ATTEMPT_COST


# ---------------------------------------------------------------------------- 2. determinism


@pytest.mark.parametrize("faults", [(), ("crash", "duplicate:0.5")], ids=["no-faults", "crash+duplicate-rate"])
def test_the_same_scenario_seed_and_faults_give_byte_identical_databases(faults, tmp_path):
    sc = _scenario("publish-report")
    digests = []
    for name in ("a.db", "b.db"):
        st = run_scenario(sc, seed=3, faults=list(faults), db=tmp_path / name)
        digests.append(st.state_digest())
        st.close()
    assert listing(tmp_path) == ["a.db", "b.db"]
    dumps = []
    for name in ("a.db", "b.db"):
        conn = sqlite3.connect(tmp_path / name)
        try:
            dumps.append(list(conn.iterdump()))
        finally:
            conn.close()
    assert dumps[0] == dumps[1]
    assert (tmp_path / "a.db").read_bytes() == (tmp_path / "b.db").read_bytes()
    assert digests[0] == digests[1]
    with Store.open(tmp_path / "a.db") as again:
        assert again.state_digest() == digests[0]


def test_a_different_seed_gives_a_different_digest_because_the_faker_facts_differ():
    a, b = _run(seed=0), _run(seed=1)
    assert a.state_digest() != b.state_digest()
    rows_a = a.artifact(_message(a, "M-3")["payload"]["artifact"])["content"]["rows"]
    rows_b = b.artifact(_message(b, "M-3")["payload"]["artifact"])["content"]["rows"]
    assert rows_a != rows_b
    # the story is the same: only the facts (and what depends on them) differ
    assert _summary(seed=1)["tasks"] == _summary(seed=0)["tasks"]
    assert [m["type"] for m in a.messages()] == [m["type"] for m in b.messages()]


# ---------------------------------------------------------------------------- 3. the fault matrix


@pytest.mark.parametrize("fault", FAULTS)
def test_under_safe_every_invariant_holds_whatever_the_fault(fault):
    store = _run(faults=(fault,))
    results = check(store)
    assert [r.name for r in results] == list(INVARIANTS)
    assert all(r.ok for r in results), [r.to_dict() for r in results if not r.ok]
    assert _summary(faults=(fault,))["unfinished"] == 0
    assert len(store.effects()) <= 1


@pytest.mark.parametrize("fault", sorted(NAIVE_BREAKS))
def test_under_naive_the_expected_invariants_break(fault):
    broken = _broken(_run(policy="naive", faults=(fault,)))
    assert NAIVE_BREAKS[fault] <= broken, broken


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("policy", ["safe", "naive"])
def test_each_fault_leaves_a_fault_injected_event_naming_it(fault, policy):
    store = _run(policy=policy, faults=(fault,))
    injected = _events(store, "fault_injected")
    assert injected, "no fault_injected event"
    assert {e["data"]["fault"] for e in injected} == {fault}
    assert all(e["data"]["selector"] == fault for e in injected)
    assert all(e["message_id"] and e["task_id"] for e in injected)
    assert _summary(policy=policy, faults=(fault,))["faults_injected"] == [
        {"fault": fault, "message_id": e["message_id"], "task_id": e["task_id"]} for e in injected
    ]


def test_every_accepted_start_is_recorded_as_task_started_right_after_its_move():
    store = _run()
    events = list(store.events())
    started = [e for e in events if e["type"] == "task_started"]
    assert [(e["task_id"], e["data"]["worker"]) for e in started] == [("T-1", "researcher"), ("T-2", "writer")]
    for e in started:
        before = events[[x["seq"] for x in events].index(e["seq"]) - 1]
        assert before["type"] == "transition_applied" and before["message_id"] == e["message_id"]
        assert before["data"]["to"] == "running"
    # one per lease granted: no start is accepted without it
    assert len(started) == len(_events(store, "lease_granted"))


def test_a_tool_failure_is_recorded_beside_the_retry_and_the_next_attempt_publishes():
    for policy in ("safe", "naive"):
        store = _run(policy=policy, faults=("tool-failure",))
        (failed,) = _events(store, "tool_failed")
        (injected,) = _events(store, "fault_injected")
        assert failed["message_id"] == injected["message_id"] and failed["task_id"] == "T-1"
        assert failed["data"]["tool"] == "web-search" and failed["data"]["status"] == "retry"
        # it follows the move it explains, in the same delivery
        seqs = [e["seq"] for e in store.events() if e["message_id"] == failed["message_id"]]
        moved = next(e for e in _events(store, "transition_applied") if e["message_id"] == failed["message_id"])
        assert moved["data"]["to"] == "retry_wait" and moved["seq"] < failed["seq"] <= max(seqs)
        assert len(store.effects()) == 1  # published once, by the attempt after
    # without the fault nobody's tool fails
    assert _events(_run(), "tool_failed") == []


def test_duplicate_under_safe_is_a_duplicate_delivery_and_still_one_effect():
    store = _run(faults=("duplicate",))
    (ev,) = _events(store, "fault_injected")
    assert ev["message_id"] == "M-6"  # the publishing result
    assert [d["decision"] for d in _deliveries_of(store, "M-6")] == ["accepted", "duplicate"]
    assert [e["effect_key"] for e in store.effects()] == ["publish:R-1:T-2"]
    assert len(_events(store, "effect_committed")) == 1


def test_conflicting_digest_under_safe_freezes_t1_untrusted_and_never_creates_t2():
    store = _run(faults=("conflicting-digest",))
    (ev,) = _events(store, "fault_injected")
    twin = ev["data"]["twin"]
    t1 = _task(store, "T-1")
    assert t1["state"] == "needs_review" and t1["trusted"] == 0
    assert _task(store, "T-2") is None
    assert [d["decision"] for d in _deliveries_of(store, twin)] == ["conflict"]
    assert _message(store, twin)["idempotency_key"] == _message(store, ev["message_id"])["idempotency_key"]
    assert store.effects() == []
    assert all(i["trusted"] == 0 for i in store.intents() if i["idempotency_key"] == ev["data"]["key"])


def test_late_failure_under_safe_is_a_late_delivery_and_t1_still_succeeded():
    store = _run(faults=("late-failure",))
    (ev,) = _events(store, "fault_injected")
    late = ev["data"]["late"]
    assert _message(store, late)["payload"]["status"] == "failed"
    assert [d["decision"] for d in _deliveries_of(store, late)] == ["late"]
    assert _task(store, "T-1")["state"] == "succeeded"
    assert _task(store, "T-1")["late_results"] == 1
    assert not [t for t in store.transitions("T-1") if t["new_state"] == "failed"]


def test_reorder_under_naive_lets_the_result_overtake_its_start_and_safe_parks_it_until_the_start_arrives():
    # naive: no session between the network and intake, so the result arrives before the start it follows
    naive = _run(policy="naive", faults=("reorder",))
    (ev,) = _events(naive, "fault_injected")
    held = ev["message_id"]
    assert _message(naive, held)["type"] == "task_started"
    order = [d["message_id"] for d in naive.deliveries() if d["task_id"] == "T-1" and d["type"] != "ack"]
    assert order.index("M-3") < order.index(held)
    # safe: the session parks the result (one number ahead of the researcher's next) until the start arrives
    store = _run(faults=("reorder",))
    ds = store.deliveries()
    t1 = [(d["message_id"], d["type"], d["decision"]) for d in ds if d["task_id"] == "T-1" and d["type"] != "ack"]
    assert t1 == [("M-1", "task_request", "accepted"), (held, "task_started", "accepted"),
                  ("M-3", "task_result", "accepted")]
    assert not [d for d in ds if d["code"] == "E_STALE_LEASE"]
    assert not _events(store, "message_sent_again")  # nothing was lost: nothing is sent twice
    assert _task(store, "T-1")["state"] == "succeeded"


def test_drop_under_naive_is_retried_under_a_new_key_and_under_safe_the_session_sends_the_lost_one_again():
    naive = _run(policy="naive", faults=("drop",))
    (ev,) = _events(naive, "fault_injected")
    dropped = ev["message_id"]
    # never delivered, so never in the message log either
    assert dropped not in _messages(naive) and _deliveries_of(naive, dropped) == []
    won = [d for d in naive.deliveries() if d["type"] == "task_result" and d["task_id"] == "T-1"]
    retry = _message(naive, won[0]["message_id"])
    assert retry["message_id"] != dropped and retry["sender"] == "researcher"
    # the first attempt's key is R-1:T-1:attempt-1; the retry is a new attempt with a new key
    assert retry["idempotency_key"] == "R-1:T-1:attempt-1:retry-1"

    store = _run(faults=("drop",))
    (ev,) = _events(store, "fault_injected")
    assert ev["message_id"] == dropped
    # the researcher's retry is numbered after the lost result: it waits, and a round later the session
    # sends the lost one again, the same envelope under the same number
    (again,) = _events(store, "message_sent_again")
    assert again["message_id"] == dropped and again["data"]["sender"] == "researcher"
    assert again["data"]["seq"] == 2 and again["data"]["waiting"] == [retry["message_id"]]
    retry_sent = ev["tick"] + _scenario("publish-report").settings.retry_ticks
    assert again["tick"] <= retry_sent + 2
    assert not _events(store, "message_copy_dropped")  # lost, not late: no other copy ever came
    results = [d for d in store.deliveries() if d["type"] == "task_result" and d["task_id"] == "T-1"]
    assert results[0]["message_id"] == dropped and results[0]["decision"] == "accepted"
    assert results[1]["message_id"] == retry["message_id"] and results[1]["decision"] == "late"
    assert [i["idempotency_key"] for i in store.intents() if i["idempotency_key"] == "R-1:T-1:attempt-1"]
    assert _message(store, dropped)["sender_seq"] == 2 and _message(store, retry["message_id"])["sender_seq"] == 3
    assert _task(store, "T-1")["state"] == "succeeded"


def test_crash_under_safe_expires_the_lease_grants_a_second_and_fences_the_zombie():
    store = _run(faults=("crash",))
    (ev,) = _events(store, "fault_injected")
    assert ev["data"]["worker"] == "researcher" and ev["task_id"] == "T-1"
    expired = _events(store, "lease_expired")
    assert [(e["task_id"], e["data"]["lease_version"]) for e in expired] == [("T-1", 1)]
    grants = [(g["data"]["holder"], g["data"]["lease_version"]) for g in _events(store, "lease_granted") if g["task_id"] == "T-1"]
    assert grants == [("researcher", 1), ("researcher", 2)]
    assert any(t["old_state"] == "running" and t["new_state"] == "retry_wait" and t["executor"] == "runtime"
               for t in store.transitions("T-1"))
    zombie = [d for d in store.deliveries() if d["type"] == "task_result" and d["decision"] == "rejected"]
    assert [d["code"] for d in zombie] == ["E_STALE_LEASE"]
    zmsg = _message(store, zombie[0]["message_id"])
    assert zmsg["payload"]["lease_version"] == 1 and zmsg["idempotency_key"] == "R-1:T-1:attempt-1"
    won = [d for d in store.deliveries() if d["type"] == "task_result" and d["task_id"] == "T-1" and d["decision"] == "accepted"]
    assert len(won) == 1 and _message(store, won[0]["message_id"])["payload"]["lease_version"] == 2
    t1 = _task(store, "T-1")
    assert t1["state"] == "succeeded" and t1["lease_version"] == 2


def test_stale_schema_under_safe_is_rejected_with_e_schema_version_then_succeeds():
    store = _run(faults=("stale-schema",))
    (ev,) = _events(store, "fault_injected")
    assert _message(store, ev["message_id"])["schema_version"] == "0"
    ds = store.deliveries()
    assert (ds[0]["message_id"], ds[0]["decision"], ds[0]["code"]) == (ev["message_id"], "rejected", "E_SCHEMA_VERSION")
    assert ds[0]["state_after"] is None  # the task did not come into being from it
    assert _summary(faults=("stale-schema",))["tasks"] == {"T-1": "succeeded", "T-2": "succeeded"}


def test_delay_under_naive_delivers_the_delayed_original_late_and_safe_keeps_the_retry_behind_it():
    naive = _run(policy="naive", faults=("delay",))
    (ev,) = _events(naive, "fault_injected")
    original = ev["message_id"]
    (d,) = _deliveries_of(naive, original)
    assert d["tick"] == ev["data"]["arrives_at"]
    first = [x for x in naive.deliveries() if x["type"] == "task_result" and x["task_id"] == "T-1"][0]
    assert first["message_id"] != original and first["delivery_id"] < d["delivery_id"]  # the retry overtook it

    store = _run(faults=("delay",))
    (ev,) = _events(store, "fault_injected")
    # the retry is a number ahead of the delayed original: it waits, and the session, which cannot tell
    # late from lost, has the original sent again; that copy lands, then the retry (late)
    (again,) = _events(store, "message_sent_again")
    assert again["message_id"] == original and again["tick"] < ev["data"]["arrives_at"]
    (d,) = _deliveries_of(store, original)
    assert d["decision"] == "accepted" and d["tick"] == again["tick"] + 1
    results = [x for x in store.deliveries() if x["type"] == "task_result" and x["task_id"] == "T-1"]
    assert [x["message_id"] for x in results][0] == original
    assert [x["decision"] for x in results[1:]] == ["late"] * (len(results) - 1) and len(results) > 1
    # the delayed copy arrives after all: the same envelope, already taken, dropped before intake
    (dropped,) = _events(store, "message_copy_dropped")
    assert dropped["message_id"] == original and dropped["tick"] == ev["data"]["arrives_at"]
    assert _task(store, "T-1")["state"] == "succeeded"


def test_a_crash_whose_start_message_was_lost_still_recovers():
    s = summarize(run_scenario(_scenario("publish-report"), faults=["crash", "drop:M-2"]))
    assert s["unfinished"] == 0
    assert s["tasks"] == {"T-1": "succeeded", "T-2": "succeeded"}


def test_a_crash_in_a_stress_run_strands_none_of_the_workers_other_tasks():
    sc = _scenario("stress")
    sc = dataclasses.replace(
        sc,
        stress=dataclasses.replace(sc.stress, tasks=8, duplicate_rate=0.0, conflict_rate=0.0),
        settings=dataclasses.replace(sc.settings, max_rounds=300),  # the shipped 1,000,000 takes minutes
    )
    s = summarize(run_scenario(sc, faults=["crash"]))  # the first task_started: T-4, by researcher-1 (T-8 is its too)
    assert [f["task_id"] for f in s["faults_injected"]] == ["T-4"]
    assert s["unfinished"] == 0, s["tasks"]
    assert set(s["tasks"].values()) == {"succeeded"}
    assert s["rounds"] < 100


# ---------------------------------------------------------------------------- 4. selectors


def test_a_message_id_selector_targets_exactly_that_message():
    store = _run(faults=("duplicate:M-3",))
    assert [(e["message_id"], e["data"]["selector"]) for e in _events(store, "fault_injected")] == [("M-3", "duplicate:M-3")]
    assert [d["decision"] for d in _deliveries_of(store, "M-3")] == ["accepted", "duplicate"]
    for mid in ("M-1", "M-2", "M-4", "M-5", "M-6"):
        assert len(_deliveries_of(store, mid)) == 1, mid


def test_a_type_selector_duplicates_every_task_result():
    store = _run(faults=("duplicate:task_result",))
    results = [m["message_id"] for m in store.messages() if m["type"] == "task_result"]
    assert results == ["M-3", "M-6"]
    assert [e["message_id"] for e in _events(store, "fault_injected")] == results
    for mid in results:
        assert [d["decision"] for d in _deliveries_of(store, mid)] == ["accepted", "duplicate"]
    assert [e["effect_key"] for e in store.effects()] == ["publish:R-1:T-2"]
    assert not _broken(store)


def test_a_rate_selector_is_deterministic_per_seed():
    sc = _scenario("publish-report")
    picked = {}
    for seed in (0, 1):
        runs = [summarize(run_scenario(sc, seed=seed, faults=["duplicate:0.5"])) for _ in range(2)]
        assert runs[0]["faults_injected"] == runs[1]["faults_injected"]
        assert runs[0]["state_digest"] == runs[1]["state_digest"]
        assert runs[0]["faults_injected"], "a 0.5 rate duplicated nothing"
        assert all(r for r in runs[0]["invariants"].values())
        picked[seed] = [f["message_id"] for f in runs[0]["faults_injected"]]
    assert picked[0] != picked[1]


def test_a_selector_that_matches_nothing_is_e_fault_no_match_and_leaves_no_file(tmp_path):
    sc = _scenario("publish-report")
    with pytest.raises(InputError) as e:
        run_scenario(sc, faults=["duplicate:M-99"])
    assert e.value.code == "E_FAULT_NO_MATCH" and "duplicate:M-99" in e.value.message
    with pytest.raises(InputError) as e:
        run_scenario(sc, faults=["duplicate:M-99"], db=tmp_path / "run.db")
    assert e.value.code == "E_FAULT_NO_MATCH"
    assert listing(tmp_path) == []


def test_a_failed_run_over_an_earlier_run_keeps_the_earlier_database(tmp_path):
    db = tmp_path / "run.db"
    run_scenario(_scenario("publish-report"), db=db).close()
    before = sha(db)
    with pytest.raises(InputError):
        run_scenario(_scenario("publish-report"), faults=["duplicate:M-99"], db=db)
    assert sha(db) == before and listing(tmp_path) == ["run.db"]


@pytest.mark.parametrize(
    "text, code",
    [
        ("explode", "E_UNKNOWN_FAULT"),
        ("Duplicate", "E_UNKNOWN_FAULT"),
        ("late-failure:task_request", "E_FAULT_SELECTOR"),
        ("crash:task_result", "E_FAULT_SELECTOR"),
        ("duplicate:0", "E_FAULT_SELECTOR"),
        ("duplicate:2", "E_FAULT_SELECTOR"),
        ("drop:-0.1", "E_FAULT_SELECTOR"),
        ("duplicate:nan", "E_FAULT_SELECTOR"),
        ("duplicate:often", "E_FAULT_SELECTOR"),
    ],
)
def test_bad_fault_text_is_refused_before_anything_is_written(text, code, tmp_path):
    with pytest.raises(InputError) as e:
        parse_fault(text)
    assert e.value.code == code
    with pytest.raises(InputError) as e:
        run_scenario(_scenario("publish-report"), faults=[text], db=tmp_path / "run.db")
    assert e.value.code == code
    assert listing(tmp_path) == []


def test_good_selectors_parse_into_their_kind():
    assert parse_fault("duplicate").kind == "default"
    assert (parse_fault("duplicate:M-3").kind, parse_fault("duplicate:M-3").value) == ("message", "M-3")
    assert (parse_fault("duplicate:task_result").kind, parse_fault("duplicate:task_result").value) == ("type", "task_result")
    assert (parse_fault("duplicate:0.5").kind, parse_fault("duplicate:0.5").value) == ("rate", 0.5)
    assert parse_fault("drop:1").value == 1.0


# ---------------------------------------------------------------------------- 5. fan-out and stress


def test_fan_out_requests_the_writer_only_after_both_researchers_succeeded():
    store = _run("fan-out")
    assert _summary("fan-out")["tasks"] == {"T-1": "succeeded", "T-2": "succeeded", "T-3": "succeeded"}
    requests = [m for m in store.messages() if m["type"] == "task_request" and m["task_id"] == "T-3"]
    assert len(requests) == 1
    req = requests[0]
    assert req["recipient"] == "writer"
    done_at = [t["created_at"] for t in store.transitions() if t["task_id"] in ("T-1", "T-2") and t["new_state"] == "succeeded"]
    assert len(done_at) == 2
    assert req["created_at"] > max(done_at)
    refs = [_single_result(store, tid)["payload"]["artifact"] for tid in ("T-1", "T-2")]
    assert req["evidence_refs"] == refs
    assert all(store.artifact(r)["kind"] == "fact-table" for r in refs)
    assert [e["effect_key"] for e in store.effects()] == ["publish:R-2:T-3"]
    draft = store.artifact(_single_result(store, "T-3")["payload"]["artifact"])
    assert draft["content"]["cites"] == refs


def _single_result(store: Store, task_id: str) -> dict:
    won = [d for d in store.deliveries() if d["type"] == "task_result" and d["task_id"] == task_id and d["decision"] == "accepted"]
    assert len(won) == 1
    return _message(store, won[0]["message_id"])


def test_fan_out_waits_for_the_slower_researcher():
    store = _run("fan-out", faults=("delay",))  # T-1's first result is delayed; its retry wins later
    req = next(m for m in store.messages() if m["type"] == "task_request" and m["task_id"] == "T-3")
    done = {t["task_id"]: t["created_at"] for t in store.transitions() if t["new_state"] == "succeeded"}
    assert done["T-1"] > done["T-2"]
    assert req["created_at"] > done["T-1"]
    assert len(store.effects()) == 1 and not _broken(store)


def test_fan_out_never_requests_the_writer_when_a_researcher_is_frozen():
    s = _summary("fan-out", faults=("conflicting-digest",))
    assert s["tasks"]["T-1"] == "needs_review" and "T-3" not in s["tasks"]
    assert s["effects"] == [] and s["unfinished"] == 0 and all(s["invariants"].values())


@lru_cache(maxsize=None)
def _stress(seed: int) -> dict:
    sc = _scenario("stress")
    sc = dataclasses.replace(sc, stress=dataclasses.replace(sc.stress, tasks=60))
    store = run_scenario(sc, seed=seed)
    try:
        s = summarize(store)
        s["_messages"] = len(store.messages())
        return s
    finally:
        store.close()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_small_stress_run_settles_every_task_with_every_invariant_holding(seed):
    s = _stress(seed)
    assert len(s["tasks"]) == 60 and s["unfinished"] == 0
    assert set(s["tasks"].values()) <= {"succeeded", "needs_review"}
    assert all(s["invariants"].values()), [k for k, v in s["invariants"].items() if not v]
    assert s["effects"] == []  # stress tasks publish nothing


def test_stress_shows_duplicates_and_conflicts_at_the_scenarios_rates():
    spec = _scenario("stress").stress
    dup = conf = sent = 0
    for seed in (0, 1, 2):
        s = _stress(seed)
        kinds = Counter(f["fault"] for f in s["faults_injected"])
        assert set(kinds) <= {"duplicate", "conflicting-digest"}
        assert s["counts"]["deliveries_by_decision"].get("duplicate", 0) >= kinds["duplicate"]
        assert s["counts"]["deliveries_by_decision"].get("conflict", 0) == kinds["conflicting-digest"]
        # every conflict leaves its task frozen for review
        assert sum(1 for v in s["tasks"].values() if v == "needs_review") == kinds["conflicting-digest"]
        dup += kinds["duplicate"]
        conf += kinds["conflicting-digest"]
        sent += s["_messages"] - kinds["conflicting-digest"]  # what agents sent (twins are the transport's)
    assert dup > 0 and conf > 0
    assert spec.duplicate_rate / 2 <= dup / sent <= spec.duplicate_rate * 2, (dup, sent)
    assert conf / sent <= spec.conflict_rate * 4, (conf, sent)


# ---------------------------------------------------------------------------- 6. the CLI


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "220")
    return tmp_path


def test_run_json_prints_the_summary_and_writes_protolab_db_in_the_cwd(cwd, capsys):
    s = json.loads(cli_ok(capsys, "run", "--json"))
    assert listing(cwd) == ["protolab.db"]
    for key in ("state_digest", "tasks", "counts", "effects", "invariants", "faults_injected"):
        assert key in s
    assert s["tasks"] == {"T-1": "succeeded", "T-2": "succeeded"}
    assert s["effects"] == ["publish:R-1:T-2"]
    assert s["faults_injected"] == []
    assert s["invariants"] == {name: True for name in INVARIANTS}
    assert all(isinstance(v, bool) for v in s["invariants"].values())
    c = s["counts"]
    assert c["deliveries_by_decision"] == {"accepted": 13}  # 6 task messages, 4 acks, the fence and its 2 acks
    assert c["events_by_type"]["effect_committed"] == 1 and c["events_by_type"]["ack_recorded"] == 6 and c["events_by_type"]["fence_recorded"] == 1
    assert sum(c["events_by_type"].values()) == c["events"]
    assert s["state_digest"] == _run().state_digest()
    with Store.open(cwd / "protolab.db") as st:
        assert st.state_digest() == s["state_digest"]
        assert st.get_meta("scenario") == "publish-report"


def test_run_json_lists_the_faults_injected(cwd, capsys):
    s = json.loads(cli_ok(capsys, "run", "--fault", "duplicate", "-f", "late-failure", "--db", "f.db", "--json"))
    assert s["faults"] == ["duplicate", "late-failure"]
    assert sorted((f["fault"], f["message_id"], f["task_id"]) for f in s["faults_injected"]) == [
        ("duplicate", "M-7", "T-2"), ("late-failure", "M-3", "T-1")]
    assert s["counts"]["deliveries_by_decision"]["duplicate"] >= 1
    assert s["counts"]["deliveries_by_decision"]["late"] == 1
    assert all(s["invariants"].values())


def test_run_prints_tables_naming_the_database_and_the_invariants(cwd, capsys):
    out = cli_ok(capsys, "run", "--db", "t.db")
    assert "publish-report" in out and "t.db" in out
    for name in INVARIANTS:
        assert re.search(rf"{name}\s+holds", out), name
    assert "publish:R-1:T-2" in out


def test_running_the_same_scenario_again_replaces_the_database(cwd, capsys):
    first = json.loads(cli_ok(capsys, "run", "--json"))
    second = json.loads(cli_ok(capsys, "run", "--seed", "1", "--json"))
    assert first["state_digest"] != second["state_digest"]
    assert listing(cwd) == ["protolab.db"]
    with Store.open(cwd / "protolab.db") as st:
        assert st.state_digest() == second["state_digest"]
        assert st.get_meta("seed") == "1"


def _other_scenario_db(cwd, capsys) -> Path:
    cli_ok(capsys, "run", "fan-out", "--db", "shared.db", "--json")
    return cwd / "shared.db"


def _hand_delivery_db(cwd, capsys) -> Path:
    cli_ok(capsys, "init", "--db", "shared.db")
    return cwd / "shared.db"


@pytest.mark.parametrize("make", [_other_scenario_db, _hand_delivery_db], ids=["fan-out-run", "init"])
def test_a_database_of_another_kind_is_refused_and_left_unchanged(make, cwd, capsys):
    db = make(cwd, capsys)
    before = sha(db)
    code, out, err = cli(capsys, "run", "publish-report", "--db", db.name)
    assert code == 2
    assert error_code(err) == "E_DB_OTHER_SCENARIO"
    assert out == ""
    assert sha(db) == before
    assert listing(cwd) == ["shared.db"]


@pytest.mark.parametrize("case", ["fan-out-run", "init", "no-match"])
def test_errors_raised_during_a_run_are_still_exactly_one_stderr_line(case, cwd, capsys):
    if case == "fan-out-run":
        _other_scenario_db(cwd, capsys)
        args, expected = ("run", "--db", "shared.db"), "E_DB_OTHER_SCENARIO"
    elif case == "init":
        _hand_delivery_db(cwd, capsys)
        args, expected = ("run", "--db", "shared.db"), "E_DB_OTHER_SCENARIO"
    else:
        args, expected = ("run", "--fault", "duplicate:M-99"), "E_FAULT_NO_MATCH"
    code, out, err = cli(capsys, *args)
    assert_one_error_line(code, out, err, expected)


def test_a_selector_matching_nothing_on_the_cli_exits_2_and_creates_no_file(cwd, capsys):
    code, out, err = cli(capsys, "run", "--fault", "duplicate:M-99")
    assert code == 2 and out == ""
    assert error_code(err) == "E_FAULT_NO_MATCH"
    assert listing(cwd) == []


@pytest.mark.parametrize(
    "args, expected",
    [
        (("run", "no-such-scenario"), "E_UNKNOWN_SCENARIO"),
        (("run", "bad.toml"), "E_TOML"),
        (("run", "--seed", "abc"), "E_USAGE"),
        (("run", "--fault", "explode"), "E_UNKNOWN_FAULT"),
        (("run", "--fault", "late-failure:task_request"), "E_FAULT_SELECTOR"),
        (("run", "--fault", "duplicate:2"), "E_FAULT_SELECTOR"),
        (("run", "--policy", "reckless"), "E_UNKNOWN_POLICY"),
        (("compare", "no-such-scenario"), "E_UNKNOWN_SCENARIO"),
        (("compare", "--fault", "explode"), "E_UNKNOWN_FAULT"),
    ],
    ids=["unknown-scenario", "malformed-toml", "seed-abc", "unknown-fault", "late-failure-selector",
         "rate-2", "unknown-policy", "compare-unknown-scenario", "compare-unknown-fault"],
)
def test_bad_run_input_exits_2_with_one_error_line_and_creates_no_file(args, expected, cwd, capsys):
    (cwd / "bad.toml").write_text('name = "broken\nworkers = [\n', encoding="utf-8")
    code, out, err = cli(capsys, *args)
    assert_one_error_line(code, out, err, expected)
    assert listing(cwd) == ["bad.toml"]


def test_compare_json_shows_t1_succeeded_under_safe_and_failed_under_naive(cwd, capsys):
    out = json.loads(cli_ok(capsys, "compare", "--fault", "late-failure", "--json"))
    assert set(out) == {"safe", "naive"}
    assert out["safe"]["policy"] == "safe" and out["naive"]["policy"] == "naive"
    assert out["safe"]["tasks"]["T-1"] == "succeeded"
    assert out["naive"]["tasks"]["T-1"] == "failed"
    assert out["safe"]["invariants"]["NO_STATE_REGRESSION"] is True
    assert out["naive"]["invariants"]["NO_STATE_REGRESSION"] is False
    assert out["safe"]["faults"] == out["naive"]["faults"] == ["late-failure"]
    assert listing(cwd) == []  # compare runs in memory


def test_compare_runs_a_stress_scenario_at_the_size_asked_for(cwd, capsys):
    out = json.loads(cli_ok(capsys, "compare", "stress", "--tasks", "40", "--json"))
    assert len(out["safe"]["tasks"]) == len(out["naive"]["tasks"]) == 40
    code, out, err = cli(capsys, "compare", "fan-out", "--tasks", "40")
    assert_one_error_line(code, out, err, "E_USAGE")


def test_compare_table_marks_no_state_regression_broken_on_the_naive_side(cwd, capsys):
    out = cli_ok(capsys, "compare", "--fault", "late-failure")
    line = next(ln for ln in out.splitlines() if "NO_STATE_REGRESSION" in ln)
    assert re.search(r"NO_STATE_REGRESSION\s+holds\s+BROKEN", line), line
    t1 = next(ln for ln in out.splitlines() if "task T-1" in ln)
    assert re.search(r"succeeded\s+failed", t1), t1
    ok_line = next(ln for ln in out.splitlines() if "EFFECT_AT_MOST_ONCE" in ln)
    assert "BROKEN" not in ok_line


def test_check_exits_0_on_a_safe_run(cwd, capsys):
    cli_ok(capsys, "run", "--db", "safe.db", "--json")
    cli_ok(capsys, "check", "--db", "safe.db")
    results = json.loads(cli_ok(capsys, "check", "--db", "safe.db", "--json"))
    assert [r["name"] for r in results] == list(INVARIANTS)
    assert all(r["ok"] and r["witnesses"] == [] for r in results)


def test_check_exits_1_on_a_naive_late_failure_run_with_witnesses(cwd, capsys):
    cli_ok(capsys, "run", "--policy", "naive", "--fault", "late-failure", "--db", "naive.db", "--json")
    code, out, err = cli(capsys, "check", "--db", "naive.db", "--json")
    assert code == 1
    results = {r["name"]: r for r in json.loads(out)}
    bad = results["NO_STATE_REGRESSION"]
    assert bad["ok"] is False and bad["witnesses"]
    w = bad["witnesses"][0]
    assert (w["task_id"], w["old_state"], w["new_state"]) == ("T-1", "succeeded", "failed")
    assert results["TRANSITIONS_ALLOWED"]["ok"] is False
    assert results["EFFECT_AT_MOST_ONCE"]["ok"] is True
    code, out, _ = cli(capsys, "check", "--db", "naive.db")
    assert code == 1 and "BROKEN" in out and "NO_STATE_REGRESSION" in out


def test_a_big_runs_summary_counts_tasks_effects_and_faults_instead_of_listing_them(tmp_path, monkeypatch, capsys):
    import sim.runner as runner
    from sim.cli import main

    monkeypatch.setattr(runner, "SUMMARY_LIST_LIMIT", 5)
    db = tmp_path / "big.db"
    with pytest.raises(SystemExit) as e:
        main(["run", "stress", "--tasks", "40", "--db", str(db), "--json"])
    assert e.value.code == 0
    s = json.loads(capsys.readouterr().out)
    assert "tasks" not in s and "faults_injected" not in s  # more than 5 of each
    assert sum(s["tasks_by_state"].values()) == 40 and s["unfinished"] == 0
    assert sum(s["faults_by_kind"].values()) == s["counts"]["events_by_type"]["fault_injected"]
    assert s["effects_committed"] == len(s.get("effects", [])) or "effects" not in s
    with pytest.raises(SystemExit):
        main(["run", "stress", "--tasks", "40", "--db", str(tmp_path / "again.db")])
    out = capsys.readouterr().out
    assert "Tasks (40)" in out and "Faults injected" in out
    monkeypatch.setattr(runner, "SUMMARY_LIST_LIMIT", 10_000)
    with pytest.raises(SystemExit):
        main(["run", "stress", "--tasks", "40", "--db", str(tmp_path / "small.db"), "--json"])
    small = json.loads(capsys.readouterr().out)
    assert len(small["tasks"]) == 40 and small["tasks_by_state"] == s["tasks_by_state"]


def test_a_fact_table_is_exactly_what_fakers_own_calls_give_from_the_same_generator():
    """sim.agents.facts_table draws from the run's Faker generator directly (Faker's machinery around
    each draw was a fifth of a stress run outside the store); it must give what Faker's own sentence,
    word, random_int and date_between give, and leave the generator where they leave it, so every run's
    database stays byte for byte what it was (tests/test_design.py pins them)."""
    from datetime import date

    from faker import Faker

    from sim.agents import facts_table

    def by_faker(fake, task_id, goal):
        return {"kind": "fact-table", "task_id": task_id, "goal": goal, "columns": ["claim", "source", "date"],
                "rows": [[fake.sentence(nb_words=8), f"https://{fake.word()}.example.org/notes/{fake.random_int(100, 999)}",
                          fake.date_between(date(2025, 1, 1), date(2026, 6, 30)).isoformat()] for _ in range(3)]}

    theirs, ours = Faker("en_US"), Faker("en_US")
    for seed in range(120):
        theirs.seed_instance(seed)
        ours.seed_instance(seed)
        for i in range(3):
            assert facts_table(ours, f"T-{i}", "g") == by_faker(theirs, f"T-{i}", "g"), seed
        assert ours.random.getstate() == theirs.random.getstate()


@pytest.mark.parametrize("policy", ["safe", "naive"])
def test_a_delivery_that_says_it_left_its_task_unchanged_did(policy, tmp_path, monkeypatch):
    """The simulator keeps an agent's view of a task across a delivery whose Outcome says the task did
    not change (an ack, a duplicate, a refusal): the view read after every such delivery must equal
    the one read before it, and both kinds must occur."""
    import sim.schedule

    real = sim.schedule.deliver
    seen = {True: 0, False: 0, "computed": 0}

    def checked(store, env, **kw):
        before = store.get_task(env.task_id)
        out = real(store, env, **kw)
        if not out.task_changed:
            assert store.get_task(env.task_id) == before, (env.message_id, out.decision)
        elif out.task_after is not None:  # the view the delivery's events make is the one a fresh read shows
            assert out.task_after == store.get_task(env.task_id), (env.message_id, out.decision)
            seen["computed"] += 1
        seen[out.task_changed] += 1
        return out

    monkeypatch.setattr(sim.schedule, "deliver", checked)
    import dataclasses

    sc = load_scenario("stress")
    sc = dataclasses.replace(sc, stress=dataclasses.replace(sc.stress, tasks=40))
    # (no drop: under the naive policy a lost result leaves its task running until the round cap)
    faults = ["duplicate:0.2", "conflicting-digest", "late-failure"]
    run_scenario(sc, policy=policy, seed=3, faults=faults, db=tmp_path / "run.db").close()
    for name, more in [("publish-report", ["conflicting-digest", "late-failure"]), ("fan-out", ["crash", "duplicate"]),
                       ("publish-report", ["late-conflict"]), ("fan-out", ["crash", "zombie"])]:
        try:
            run_scenario(load_scenario(name), policy=policy, seed=1, faults=more, db=tmp_path / f"{name}-{len(more)}.db").close()
        except InputError:  # (a fault a scenario has no place for)
            pass
    assert seen[True] > 0 and seen[False] > 0 and seen["computed"] > seen[True] // 2


@pytest.mark.parametrize("policy", ["safe", "naive"])
def test_every_view_an_agent_is_handed_is_what_the_store_holds(policy, tmp_path, monkeypatch):
    """The agents read tasks through the run's cache of views (a stress run's new tasks start as "none yet",
    unread; a delivery hands the view after it): every view an agent is handed must be what a fresh read of
    the store shows at that moment, under duplicates, conflicts, late failures and drops."""
    import dataclasses

    from sim.world import RunWorld

    real = RunWorld.task
    handed = {"none": 0, "some": 0}

    def checked(self, task_id):
        view = real(self, task_id)
        assert view == self.store.get_task(task_id), (task_id, view)
        handed["none" if view is None else "some"] += 1
        return view

    monkeypatch.setattr(RunWorld, "task", checked)
    sc = load_scenario("stress")
    sc = dataclasses.replace(sc, stress=dataclasses.replace(sc.stress, tasks=60))
    run_scenario(sc, policy=policy, seed=5, faults=["duplicate:0.2", "conflicting-digest", "late-failure"],
                 db=tmp_path / "run.db").close()
    assert handed["none"] > 0 and handed["some"] > handed["none"]


def test_the_event_types_said_to_leave_a_task_view_alone_do(tmp_path):
    """Each event type the runtime counts as leaving a TaskView unchanged (sim.runtime._CHANGES_VIEW's
    complement among those that fold) is appended alone to a task: its view reads the same after. And
    every type in the set, appended alone, does change it (or the set is wider than it needs to be)."""
    from sim import events as ev_
    from sim.envelope import build_envelope
    from sim.planner import view_after
    from sim.runtime import _CHANGES_VIEW, deliver

    store = Store.create(tmp_path / "s.db")
    deliver(store, build_envelope(message_id="M-1", trace_id="R-1", task_id="T-1", sender="manager",
                                  recipient="researcher", type="task_request", payload={"goal": "g"},
                                  idempotency_key="T-1:request", created_at="2026-07-13T04:00:00Z"))
    view = store.get_task("T-1")
    alone = {
        "intent_recorded": ev_.IntentRecorded(key="k", digest="sha256:" + "1" * 64, scheme="json-sorted-v1", arrival=99,
                                              decision="accepted", payload={}, result={}),
        "duplicate_recorded": ev_.DuplicateRecorded(key="T-1:request", digest="x", scheme="json-sorted-v1",
                                                    first_message_id="M-1", reused=None),
        "transition_rejected": ev_.TransitionRejected(code="E_X", reason="r", type_="ack", sender="manager"),
        "late_recorded": ev_.LateRecorded(type_="task_result", state="ready", reason="r"),
        "artifact_stored": ev_.ArtifactStored(ref="sha256:" + "2" * 64, scheme="json-sorted-v1", kind="k", size=2,
                                              content={}),
        "budget_charged": ev_.BudgetCharged(amount=1, reason="r"),
        "lease_granted": ev_.LeaseGranted(holder="researcher", lease_version=1),
        "lease_expired": ev_.LeaseExpired(holder="researcher", lease_version=1),
        "conflict_recorded": ev_.ConflictRecorded(key="T-1:request", first={}, second={}),
        "effect_committed": ev_.EffectCommitted(effect_key="e", kind="publish", target="R-1", result_digest="d"),
        "transition_applied": ev_.TransitionApplied(from_state="ready", to="canceled", from_version=view.state_version,
                                                    reason="r", executor="manager", role="manager",
                                                    machine_version=view.machine_version),
    }
    folding = {t for t, cls in ev_.REGISTRY.items() if cls.CHANGES_STATE}
    assert folding - {"machine_loaded", "task_created", "review_decided", "reconciliation_resolved"} <= set(alone)
    for etype, event in alone.items():
        before = store.get_task("T-1")
        with store.transaction():
            store.append_events([event.draft("T-1", "M-1")])
        after = store.get_task("T-1")
        assert (after != before) == (etype in _CHANGES_VIEW), etype
        # and the view the runtime computes from the event is the one read (sim.planner.view_after)
        assert view_after(before, "T-1", [event.draft("T-1", "M-1")]) == after, etype
