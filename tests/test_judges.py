"""Judging the judges: each behaviour below is one a grade rests on (intake, the machine parser,
the store's fold and compare-and-swap, the runtime's planning, the invariants, the validator), and
each test fails if that behaviour is planted wrong. The list follows issue 16's mutation report."""

from __future__ import annotations

import copy
import json
import sqlite3
from dataclasses import replace

import pytest

from sim import samples
from sim.envelope import build_envelope
from sim.errors import StaleWrite
from sim.intake import Decision
from sim.intake import decide as reference_decide
from sim.invariants import check
from sim.machine import parse_rulebook
from sim.policy import NAIVE, SAFE
from sim.runtime import deliver, expire_lease
from sim.store import STATE_TABLES, EventDraft, Store

START = "2026-07-13T04:00:00Z"


def _env(mid, typ, payload, key, *, task="T-1", sender="researcher", recipient="manager", second=10, refs=(),
         scheme="json-sorted-v1"):
    return build_envelope(message_id=mid, trace_id="R-1", task_id=task, sender=sender, recipient=recipient, type=typ,
                          payload=payload, idempotency_key=key, created_at=f"2026-07-13T04:00:{second:02d}Z",
                          evidence_refs=refs, digest_scheme=scheme)


def _store_through(*envs, policy=SAFE) -> Store:
    store = Store.memory()
    for e in envs:
        deliver(store, e, policy=policy)
    return store


def _results(store) -> dict:
    return {r.name: r for r in check(store)}


# ------------------------------------------------------------------------------------- trust


def test_a_conflict_marks_the_task_and_both_payloads_untrusted():
    store = _store_through(samples.m1(), samples.m2(), samples.m3(), samples.conflicting_m3())
    task = store.get_task("T-1")
    assert task.state.value == "needs_review" and task.trusted is False
    intents = store.intents_of_task("T-1")
    under_key = [i for i in intents if i["idempotency_key"] == "R-1:T-1:attempt-1"]
    assert len(under_key) == 2 and all(not i["trusted"] for i in under_key)
    assert [i["trusted"] for i in intents if i["idempotency_key"] != "R-1:T-1:attempt-1"] == [1, 1]


def test_a_conflict_marks_the_task_untrusted_even_where_the_machine_cannot_freeze_it():
    # A table without '* -> needs_review' (exercise 4's starter, say): the conflict cannot move the
    # task, yet its result is no longer trusted.
    rb = parse_rulebook({"version": "nofreeze-v1", "rule": [
        {"from": "pending", "to": "ready", "roles": ["manager"], "reason": "a"},
        {"from": "ready", "to": "running", "roles": ["researcher", "writer"], "reason": "b"},
        {"from": "running", "to": "succeeded", "roles": ["researcher", "writer"], "reason": "c"}]})
    store = Store.create(None, rulebook=rb)
    for e in (samples.m1(), samples.m2(), samples.m3(), samples.conflicting_m3()):
        deliver(store, e)
    assert [d["decision"] for d in store.deliveries()][-1] == "conflict"
    task = store.get_task("T-1")
    assert task.state.value == "succeeded" and task.trusted is False


# ------------------------------------------------------------------------------------- leases


def test_a_result_under_an_expired_first_lease_is_fenced_as_stale():
    store = _store_through(samples.m1(), samples.m2())
    assert expire_lease(store, "T-1")
    out = deliver(store, samples.m3())
    assert out.decision == "rejected" and out.code == "E_STALE_LEASE", out.reason


def test_a_start_asking_for_a_lease_beyond_the_next_one_is_refused():
    store = _store_through(samples.m1())
    out = deliver(store, _env("M-2", "task_started", {"lease_version": 2}, "R-1:T-1:attempt-2:started"))
    assert out.decision == "rejected" and out.code == "E_STALE_LEASE"


def test_lease_expiry_clears_the_holder_and_touches_only_running_tasks():
    store = _store_through(samples.m1())
    before = store.state_digest()
    assert expire_lease(store, "T-1") is False  # ready: nothing to expire
    assert store.state_digest() == before
    deliver(store, samples.m2())
    assert expire_lease(store, "T-1") is True
    t = store.get_task("T-1")
    assert t.lease_holder is None and t.lease_version == 1 and t.state.value == "retry_wait"


# ------------------------------------------------------------------------------------- versions


@pytest.mark.parametrize("expected", [0, 1, 5])
def test_a_write_against_any_version_but_the_current_one_is_refused(expected):
    store = _store_through(samples.m1(), samples.m2())  # T-1 running at state_version 2
    out = deliver(store, _env("X-1", "cancel", {"reason": "stop", "expected_state_version": expected},
                              "R-1:T-1:cancel", sender="manager"))
    assert (out.decision, out.code) == ("rejected", "E_STALE_VERSION")
    ok = deliver(store, _env("X-2", "cancel", {"reason": "stop", "expected_state_version": 2}, "R-1:T-1:cancel-2",
                             sender="manager"))
    assert ok.decision == "accepted" and ok.state == "canceled"


def test_the_compare_and_swap_checks_the_state_as_well_as_the_version():
    store = _store_through(samples.m1(), samples.m2())  # running, version 2
    draft = EventDraft("transition_applied", "T-1", None, {
        "from": "ready", "to": "canceled", "from_version": 2, "reason": "planted", "executor": "manager",
        "role": "manager", "machine_version": "task-v1", "assignee": None})
    with pytest.raises(StaleWrite):
        with store.transaction():
            store.append_event(draft)
    assert store.get_task("T-1").state.value == "running"


# ------------------------------------------------------------------------------------- digests


def _scored(mid, scheme, score=1.0):
    return _env(mid, "task_result", {"status": "succeeded", "lease_version": 1, "score": score}, "R-1:T-1:attempt-1",
                scheme=scheme, refs=("M-1",))


#: ``score`` is no field a task_result declares (closed payloads would refuse it before intake): the
#: digest comparison is what these two tests are about, so the payloads are left open.
OPEN = replace(SAFE, closed_payloads=False)


def test_one_payload_under_two_schemes_is_a_duplicate_in_intake_and_in_the_invariants():
    a, b = _scored("M-3", "json-sorted-v1"), _scored("M-3b", "jcs-v2")
    assert a.payload_digest != b.payload_digest  # 1.0 is written "1.0" by one scheme and "1" by the other
    store = _store_through(samples.m1(), samples.m2(), a, b, policy=OPEN)
    assert [d["decision"] for d in store.deliveries()][-1] == "duplicate"
    assert _results(store)["CONFLICT_FROZEN"].ok


def test_one_number_written_two_ways_is_a_conflict_under_the_scheme_that_tells_them_apart():
    a, b = _scored("M-3", "json-sorted-v1", 1.0), _scored("M-3b", "jcs-v2", 1)
    store = _store_through(samples.m1(), samples.m2(), a, b, policy=OPEN)
    assert [d["decision"] for d in store.deliveries()][-1] == "conflict"
    assert store.get_task("T-1").state.value == "needs_review"


# ------------------------------------------------------------------------------------- invariants


def _naive_through(*envs, expire_after: str | None = None) -> Store:
    store = Store.memory()
    for e in envs:
        deliver(store, e, policy=NAIVE)
        if expire_after is not None and e.message_id == expire_after:
            expire_lease(store, e.task_id)
    return store


def test_no_lost_update_breaks_when_a_commit_comes_under_a_lease_that_expired():
    store = _naive_through(samples.m1(), samples.m2(), samples.m3(), expire_after="M-2")
    r = _results(store)["NO_LOST_UPDATE"]
    assert not r.ok and r.witnesses[0]["message_id"] == "M-3"


def test_no_lost_update_breaks_when_a_commit_names_a_future_lease():
    future = _env("M-3", "task_result", {"status": "succeeded", "lease_version": 2}, "R-1:T-1:attempt-1")
    store = _naive_through(samples.m1(), samples.m2(), future)
    r = _results(store)["NO_LOST_UPDATE"]
    assert not r.ok and r.witnesses[0]["message_id"] == "M-3"


def test_no_lost_update_holds_on_the_safe_run_of_the_same_deliveries():
    store = _store_through(samples.m1(), samples.m2(), samples.m3())
    assert _results(store)["NO_LOST_UPDATE"].ok


def _planted(fn):
    return replace(SAFE, name="planted", decide=fn)


def test_an_ack_that_moves_a_task_breaks_ack_is_not_completion_even_to_needs_review():
    from sim.intake import Move, Verdict
    from sim.machine import TaskState

    def ack_freezes(env, task, prior, rules, unresolved=frozenset()):
        if env.type == "ack" and task is not None and task.state != TaskState.NEEDS_REVIEW:
            return Verdict(Decision.ACCEPTED, "planted", move=Move(task.state, TaskState.NEEDS_REVIEW, "planted",
                                                                    env.sender, "runtime"), record_intent=True)
        return reference_decide(env, task, prior, rules, unresolved)

    ack = _env("A-3", "ack", {"of": "M-2"}, "R-1:T-1:ack:M-2", sender="manager", recipient="researcher")
    store = _store_through(samples.m1(), samples.m2(), ack, policy=_planted(ack_freezes))
    r = _results(store)["ACK_IS_NOT_COMPLETION"]
    assert not r.ok and r.witnesses[0]["ack_message_id"] == "A-3"


def test_a_conflict_recorded_as_late_breaks_conflict_frozen():
    def conflict_as_late(env, task, prior, rules, unresolved=frozenset()):
        v = reference_decide(env, task, prior, rules, unresolved)
        if v.decision == Decision.CONFLICT:
            return replace(v, decision=Decision.LATE, move=None)
        return v

    store = _store_through(samples.m1(), samples.m2(), samples.m3(), samples.conflicting_m3(),
                           policy=_planted(conflict_as_late))
    assert [d["decision"] for d in store.deliveries()][-1] == "late"
    r = _results(store)["CONFLICT_FROZEN"]
    assert not r.ok and r.witnesses[0]["task_id"] == "T-1"


@pytest.mark.parametrize("table", STATE_TABLES)
def test_the_state_digest_covers_every_state_table(table, tmp_path):
    from sim.live import LiveRun
    from sim.scenario import load_scenario

    live = LiveRun(load_scenario("publish-report"), faults=["conflicting-digest"], db=tmp_path / "run.db")
    live.run_to_end()
    frozen = [i["message_id"] for i in live.store.intents_of_task("T-1") if not i["trusted"]]
    live.reconcile("T-1", "ready", frozen)  # an approval, and the story goes on to publish
    live.run_to_end()
    live.close()
    store = Store.open(tmp_path / "run.db")
    before = store.state_digest()
    store.close()
    con = sqlite3.connect(tmp_path / "run.db")
    assert con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] > 0, f"the run leaves {table} empty"
    con.execute(f"DELETE FROM {table} WHERE rowid = (SELECT MAX(rowid) FROM {table})")
    con.commit()
    con.close()
    store = Store.open(tmp_path / "run.db", readonly=True)
    assert store.state_digest() != before
    store.close()


# ------------------------------------------------------------------------------------- machine files


def _book(*rules):
    return parse_rulebook({"version": "t-1", "rule": [dict(r, reason=r.get("reason", "x")) for r in rules]})


def test_two_rules_for_one_move_merge_their_roles():
    rb = _book({"from": "ready", "to": "canceled", "roles": ["manager"]},
               {"from": "ready", "to": "canceled", "roles": ["reviewer"]})
    from sim.machine import TaskState

    assert rb.find(TaskState.READY, TaskState.CANCELED).roles == ("manager", "reviewer")


def test_nonterminal_includes_needs_review_and_no_rule_moves_a_state_to_itself():
    from sim.machine import TaskState

    rb = _book({"from": "*nonterminal", "to": "canceled", "roles": ["reviewer"]},
               {"from": ["pending", "ready", "retry_wait"], "to": "ready", "roles": ["manager"]})
    froms = {r.from_state for r in rb.rules if r.to_state == TaskState.CANCELED}
    assert TaskState.NEEDS_REVIEW in froms and TaskState.SUCCEEDED not in froms
    assert rb.find(TaskState.READY, TaskState.READY) is None
    assert rb.find(TaskState.CANCELED, TaskState.CANCELED) is None
    assert rb.find(TaskState.PENDING, TaskState.READY) is not None


# ------------------------------------------------------------------------------------- store and runtime


def test_an_intent_recorded_again_keeps_the_newest_message_and_counts_it():
    resend = _env("M-3r", "task_result", samples.m3().payload, "R-1:T-1:attempt-1", refs=samples.m3().evidence_refs)
    store = _naive_through(samples.m1(), samples.m2(), samples.m3(), resend)
    row = next(i for i in store.intents_of_task("T-1") if i["idempotency_key"] == "R-1:T-1:attempt-1")
    assert row["message_id"] == "M-3r" and row["seen"] == 2


def test_a_database_one_schema_version_newer_is_refused(tmp_path):
    from sim.errors import StoreError
    from sim.store import SCHEMA_VERSION

    Store.create(tmp_path / "x.db").close()
    con = sqlite3.connect(tmp_path / "x.db")
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    con.commit()
    con.close()
    with pytest.raises(StoreError) as e:
        Store.open(tmp_path / "x.db")
    assert e.value.code == "E_DB_SCHEMA_NEWER"


def test_a_reused_message_id_is_refused_even_when_the_verdict_would_be_late():
    store = _store_through(samples.m1(), samples.m2(), samples.m3())
    reuse = _env("M-2", "task_result", {"status": "failed", "lease_version": 1}, "R-1:T-1:attempt-1:failure")
    out = deliver(store, reuse)
    assert (out.decision, out.code) == ("rejected", "E_MESSAGE_ID_REUSED")
    assert next(t for t in store.tasks() if t["task_id"] == "T-1")["late_results"] == 0


def test_unresolved_evidence_is_recorded_for_a_late_delivery_too():
    store = _store_through(samples.m1(), samples.m2(), samples.m3())
    late = _env("M-4", "task_result", {"status": "failed", "lease_version": 1}, "R-1:T-1:attempt-1:failure",
                refs=["M-99"])
    out = deliver(store, late)
    assert out.decision == "late"
    kinds = [e["type"] for e in store.events_of_delivery(out.delivery_id)]
    assert "evidence_unresolved" in kinds


def test_a_review_decision_that_moves_nothing_records_no_approval():
    store = _naive_through(samples.m1())  # T-1 ready
    review = _env("REV-1", "review_decision", {"decision": "ready"}, "review:T-1:v1", sender="reviewer",
                  refs=["M-1"])
    out = deliver(store, review, policy=NAIVE)
    assert out.decision == "accepted" and out.state == "ready"
    assert store.approvals() == []
    assert "review_decided" not in [e["type"] for e in store.events_of_delivery(out.delivery_id)]


def test_only_a_late_result_on_a_task_with_effects_asks_for_reconciliation():
    m = samples.happy_path()
    store = _store_through(*m)
    assert store.get_task("T-2").has_effects if hasattr(store.get_task("T-2"), "has_effects") else True
    late_start = _env("M-9", "task_started", {"lease_version": 2}, "R-1:T-2:attempt-2:started", task="T-2",
                      sender="writer")
    out = deliver(store, late_start)
    assert out.decision == "late"
    assert "reconciliation_required" not in [e["type"] for e in store.events_of_delivery(out.delivery_id)]
    late_result = _env("M-10", "task_result", {"status": "failed", "lease_version": 1}, "R-1:T-2:attempt-1:failure",
                       task="T-2", sender="writer")
    out = deliver(store, late_result)
    assert out.decision == "late"
    assert "reconciliation_required" in [e["type"] for e in store.events_of_delivery(out.delivery_id)]


# ------------------------------------------------------------------------------------- the validator


def _trace():
    from pathlib import Path

    return json.loads((Path(__file__).resolve().parent.parent / "data/traces/valid-trace.json").read_text())


def _validate(t):
    from sim.protocol.trace import validate

    return validate(t)


def _restamp(t):
    from sim.digest import digest

    for m in t["messages"]:
        if "payload" in m:
            m["payloadDigest"] = digest(m["payload"], "jcs-v2")
    return t


def _msg(t, mid):
    return next(m for m in t["messages"] if m["id"] == mid)


def test_a_future_epoch_and_a_future_generation_are_refused():
    t = copy.deepcopy(_trace())
    _msg(t, "m2")["epoch"] = 2
    assert not _validate(t).valid and "m2" in {f.message_id for f in _validate(t).errors}
    t = copy.deepcopy(_trace())
    _msg(t, "m2")["generation"] = 2
    assert not _validate(t).valid and "m2" in {f.message_id for f in _validate(t).errors}


def test_a_second_ack_of_the_fence_from_one_participant_is_refused():
    t = copy.deepcopy(_trace())
    again = copy.deepcopy(_msg(t, "m10"))
    again.update(id="m11", seq=3, at="2026-07-13T04:21:40Z")
    t["messages"].append(again)
    r = _validate(t)
    assert not r.valid and "m11" in {f.message_id for f in r.errors}


def test_a_message_exactly_at_the_deadline_is_on_time_and_one_second_later_is_not():
    t = copy.deepcopy(_trace())
    _msg(t, "m10")["at"] = t["deadline"]
    assert _validate(t).valid
    t = copy.deepcopy(_trace())
    _msg(t, "m10")["at"] = "2026-07-13T05:00:01Z"
    assert not _validate(t).valid


def test_a_contribution_exactly_at_the_gather_deadline_counts_and_one_second_later_does_not():
    t = copy.deepcopy(_trace())
    _msg(t, "m3")["at"] = t["gathers"][0]["deadline"]
    assert _validate(t).valid
    t = copy.deepcopy(_trace())
    _msg(t, "m3")["at"] = "2026-07-13T04:30:01Z"
    assert not _validate(t).valid


def test_citing_a_rejected_message_as_a_cause_is_refused():
    t = copy.deepcopy(_trace())
    _msg(t, "m2")["epoch"] = 9  # m2 is rejected ...
    r = _validate(t)
    assert "m4" in {f.message_id for f in r.errors}  # ... so m4, caused by it, is refused too


def test_a_fence_before_the_terminal_fence_is_refused():
    t = copy.deepcopy(_trace())
    early = copy.deepcopy(_msg(t, "m7"))
    early.update(id="m5f", seq=3, causedBy=["m4"], at="2026-07-13T04:08:30Z")
    i = next(i for i, m in enumerate(t["messages"]) if m["id"] == "m5")
    t["messages"].insert(i, early)
    for m in t["messages"][i + 1:]:
        if m["sender"] == "manager":
            m["seq"] += 1
    r = _validate(t)
    assert not r.valid and "m5f" in {f.message_id for f in r.errors}


def _contribution(mid, sender, vote):
    return {"id": mid, "sender": sender, "kind": "CONTRIBUTION", "gatherId": "g1", "at": "2026-07-13T04:05:00Z",
            "payload": {"vote": vote}}


def test_an_all_gather_keeps_a_rejecting_vote_as_dissent():
    from sim.protocol.trace import evaluate_gather

    g = {"id": "g1", "membership": ["a", "b"], "rule": "ALL", "deadline": "2026-07-13T05:00:00Z", "opener": "m1"}
    r = evaluate_gather(g, [_contribution("m2", "a", "approve"), _contribution("m3", "b", "reject")])
    assert r.status == "complete" and [(d["sender"], d["message"]) for d in r.dissent] == [("b", "m3")]


def test_a_quorum_of_zero_is_refused_by_the_reducer_and_the_validator():
    from sim.protocol.trace import evaluate_gather

    g = {"id": "g1", "membership": ["a", "b"], "rule": "QUORUM", "threshold": 0, "deadline": "2026-07-13T05:00:00Z",
         "opener": "m1"}
    assert evaluate_gather(g, [_contribution("m2", "a", "approve")]).status == "blocked"
    t = copy.deepcopy(_trace())
    t["gathers"][0]["rule"] = "QUORUM"
    t["gathers"][0]["threshold"] = 0
    assert not _validate(t).valid


# ------------------------------------------------------------------------------------- the CLI


def test_ctrl_c_exits_130_with_one_line(monkeypatch, capsys):
    from sim import cli
    from sim.cli import run as run_group

    def interrupted(*a, **k):
        raise KeyboardInterrupt  # as if Ctrl-C came while the run was being set up

    monkeypatch.setattr(run_group, "_load_scenario", interrupted)
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "--db", "never-written.db"])
    assert e.value.code == 130
    err = capsys.readouterr().err
    assert err.startswith("error: E_ABORTED: ") and err.count("\n") == 1


# ------------------------------------------------------------------------------------- machine files, refused

_OK_RULE = {"from": "pending", "to": "ready", "roles": ["manager"], "reason": "assigned"}


def _bad(rule2=None, **top):
    data = {"version": "t-1", "rule": [dict(_OK_RULE)] + ([rule2] if rule2 is not None else [])}
    data.update(top)
    return data


@pytest.mark.parametrize("data, code, words", [
    ([], "E_MACHINE", ["my.toml", "expected a table"]),
    (_bad(extra=1), "E_MACHINE", ["my.toml", "unknown key 'extra'"]),
    (_bad(version=""), "E_MISSING_FIELD", ["my.toml", "'version'"]),
    (_bad(version=3), "E_MISSING_FIELD", ["'version'"]),
    ({"version": "t-1", "rule": []}, "E_MISSING_FIELD", ["my.toml", "[[rule]]"]),
    ({"version": "t-1"}, "E_MISSING_FIELD", ["[[rule]]"]),
    (_bad("not a table"), "E_MACHINE", ["my.toml rule 2", "expected a table"]),
    (_bad(dict(_OK_RULE, who="x")), "E_MACHINE", ["my.toml rule 2", "unknown key 'who'"]),
    (_bad({k: v for k, v in _OK_RULE.items() if k != "roles"}), "E_MISSING_FIELD", ["my.toml rule 2", "'roles' is missing"]),
    (_bad(dict(_OK_RULE, to=["ready"])), "E_FIELD_TYPE", ["rule 2", "'to' must be a state name"]),
    (_bad(dict(_OK_RULE, roles="manager")), "E_FIELD_TYPE", ["rule 2", "'roles'"]),
    (_bad(dict(_OK_RULE, roles=[])), "E_FIELD_TYPE", ["rule 2", "'roles'"]),
    (_bad(dict(_OK_RULE, roles=["manager", 3])), "E_FIELD_TYPE", ["rule 2", "'roles'"]),
    (_bad(dict(_OK_RULE, roles=["boss"])), "E_UNKNOWN_ROLE", ["rule 2", "'boss'"]),
    (_bad(dict(_OK_RULE, reason=5)), "E_FIELD_TYPE", ["rule 2", "'reason'"]),
    (_bad(dict(_OK_RULE, **{"from": []})), "E_MACHINE", ["rule 2", "'from' must be"]),
    (_bad(dict(_OK_RULE, **{"from": {}})), "E_MACHINE", ["rule 2", "'from' must be"]),
    (_bad(dict(_OK_RULE, **{"from": ["ready", 1]})), "E_FIELD_TYPE", ["rule 2", "'from' holds 1"]),
    (_bad(dict(_OK_RULE, **{"from": "succeeded"})), "E_TERMINAL_EXIT", ["rule 2", "succeeded is terminal"]),
    (_bad(dict(_OK_RULE, to="finished")), "E_UNKNOWN_STATE", ["'finished'"]),
])
def test_a_bad_machine_file_is_refused_with_its_code_and_where(data, code, words):
    from sim.errors import ProtolabError

    with pytest.raises(ProtolabError) as e:
        parse_rulebook(data, source="my.toml")
    assert e.value.code == code
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_a_machine_file_is_read_and_refused_by_path(tmp_path):
    from sim.errors import ProtolabError
    from sim.machine import load_rulebook

    cases = [(tmp_path / "missing.toml", None, "E_FILE_MISSING"),
             (tmp_path / "latin.toml", b"version = \"caf\xe9\"\n", "E_NOT_UTF8"),
             (tmp_path / "broken.toml", b"version = \n", "E_TOML"),
             (tmp_path / "bad.toml", b'version = "v"\n[[rule]]\nfrom = "pending"\nto = "ready"\nroles = ["boss"]\nreason = "r"\n',
              "E_UNKNOWN_ROLE")]
    for path, content, code in cases:
        if content is not None:
            path.write_bytes(content)
        with pytest.raises(ProtolabError) as e:
            load_rulebook(path)
        assert e.value.code == code and path.name in str(e.value), (code, str(e.value))
    good = tmp_path / "good.toml"
    good.write_text('version = "v-9"\n[[rule]]\nfrom = "pending"\nto = "ready"\nroles = ["manager"]\nreason = "r"\n')
    rb = load_rulebook(good)
    assert rb.version == "v-9" and all(r.machine_version == "v-9" for r in rb.rules)


def test_merged_rules_keep_the_first_reason_and_the_default_machine_is_task_v1():
    from sim.machine import TaskState, default_rulebook

    rb = _book({"from": "ready", "to": "canceled", "roles": ["manager"], "reason": "first"},
               {"from": "ready", "to": "canceled", "roles": ["reviewer"], "reason": "second"})
    assert rb.find(TaskState.READY, TaskState.CANCELED).reason == "first"
    assert default_rulebook() is default_rulebook() and default_rulebook().version == "task-v1"
    assert TaskState.parse("needs_review") is TaskState.NEEDS_REVIEW


def test_a_from_list_naming_the_target_itself_still_yields_its_other_moves():
    from sim.machine import TaskState

    rb = _book({"from": ["ready", "pending", "retry_wait"], "to": "ready", "roles": ["manager"]})
    assert rb.find(TaskState.PENDING, TaskState.READY) is not None
    assert rb.find(TaskState.RETRY_WAIT, TaskState.READY) is not None
    assert rb.find(TaskState.READY, TaskState.READY) is None


def test_an_unnamed_machine_source_is_called_a_machine_file():
    from sim.errors import ProtolabError

    with pytest.raises(ProtolabError) as e:
        parse_rulebook({"version": ""})
    assert str(e.value).startswith("machine file: ")


# ------------------------------------------------------------------------------------- digests, refused


@pytest.mark.parametrize("value, scheme, code, words", [
    ({"a": [1, {"b": float("nan")}]}, "json-sorted-v1", "E_NAN", ["$.a[1].b", "NaN"]),
    ({"a": [1, {"b": float("inf")}]}, "jcs-v2", "E_NAN", ["$.a[1].b"]),
    ({"a": {"b": {1, 2}}}, "json-sorted-v1", "E_DIGEST_DOMAIN", ["$.a.b", "set", "not a JSON value"]),
    ({"a": {3: "x"}}, "jcs-v2", "E_DIGEST_DOMAIN", ["$.a", "non-string key"]),
    ({"t": "half \ud800"}, "json-sorted-v1", "E_DIGEST_DOMAIN", ["lone surrogate"]),
    ({"n": 2**60}, "jcs-v2", "E_DIGEST_DOMAIN", ["2**53", "string"]),
    ({"t": "half \ud800"}, "jcs-v2", "E_DIGEST_DOMAIN", ["jcs-v2"]),
    ({"a": 1}, "md5-v0", "E_UNKNOWN_SCHEME", ["'md5-v0'", "json-sorted-v1"]),
])
def test_a_value_with_no_canonical_bytes_is_refused_saying_where_and_why(value, scheme, code, words):
    from sim.digest import digest
    from sim.errors import DigestError

    with pytest.raises(DigestError) as e:
        digest(value, scheme)
    assert e.value.code == code
    for w in words:
        assert w in str(e.value), (w, str(e.value))


# ------------------------------------------------------------------------------------- intake under a student's machine
# task-v1 never lets anyone but a reviewer leave needs_review, nor leaves a state with no move out; a
# student's machine may do both, and intake's own rules must still hold under it.


def _student_view(state, *, version=3, lease=0, holder=None, assignee="researcher"):
    from sim.intake import TaskView
    from sim.machine import TaskState

    return TaskView(task_id="T-1", state=TaskState(state), state_version=version, machine_version="student-v1",
                    assignee=assignee, lease_holder=holder, lease_version=lease, budget_left=3)


def _student_book(*rules):
    return parse_rulebook({"version": "student-v1", "rule": [
        {"from": f, "to": t, "roles": roles, "reason": "student rule"} for f, t, roles in rules]})


def test_a_machine_letting_a_manager_cancel_a_frozen_task_still_needs_a_review_decision_to_leave_needs_review():
    rb = _student_book(("pending", "ready", ["manager"]), ("needs_review", "canceled", ["manager", "reviewer"]))
    cancel = _env("C-1", "cancel", {"reason": "stop"}, "R-1:T-1:cancel", sender="manager", recipient="researcher")
    v = reference_decide(cancel, _student_view("needs_review"), (), rb)
    assert (v.decision, v.code, v.reason) == (
        Decision.REJECTED, "E_EVIDENCE_REQUIRED", "needs_review is left only through a review_decision citing retained evidence")
    # the same machine lets the manager cancel from anywhere else it lists
    rb2 = _student_book(("pending", "ready", ["manager"]), ("ready", "canceled", ["manager"]))
    assert reference_decide(cancel, _student_view("ready"), (), rb2).decision == Decision.ACCEPTED


def test_a_state_with_no_move_out_says_so_in_words():
    rb = _student_book(("pending", "ready", ["manager"]))
    start = _env("M-2", "task_started", {"lease_version": 1}, "R-1:T-1:attempt-1:started")
    v = reference_decide(start, _student_view("ready"), (), rb)
    assert (v.code, v.reason) == ("E_TRANSITION_NOT_ALLOWED",
                                  "ready -> running is not in student-v1; from ready the allowed moves are to: nothing")


def test_a_result_for_a_task_never_leased_is_not_said_to_carry_an_expired_lease():
    from sim.intake import decide
    from sim.machine import default_rulebook

    result = _env("M-3", "task_result", {"status": "succeeded", "lease_version": 1, "summary": "s"},
                  "R-1:T-1:attempt-1", refs=("sha256:" + "a" * 64,))
    v = decide(result, _student_view("ready", version=1, lease=0), (), default_rulebook())
    assert (v.code, v.reason) == ("E_STALE_LEASE", "result carries lease_version 1; the current lease is 0 "
                                                   "(a fenced, stale worker)")
    # once that lease was granted and has expired, the same result is fenced as expired
    v = decide(result, _student_view("running", version=2, lease=1), (), default_rulebook())
    assert v.code == "E_STALE_LEASE" and "expired and nobody holds it" in v.reason


def test_a_payload_the_earlier_scheme_cannot_digest_is_a_conflict_not_a_duplicate():
    from sim.intake import IntentRecord, decide
    from sim.machine import default_rulebook

    first = _env("M-3", "task_result", {"status": "succeeded", "lease_version": 1, "n": 1}, "R-1:T-1:attempt-1",
                 refs=("sha256:" + "a" * 64,), scheme="jcs-v2")
    prior = IntentRecord(task_id="T-1", idempotency_key=first.idempotency_key, payload_digest=first.payload_digest,
                         digest_scheme="jcs-v2", message_id="M-3", payload=dict(first.payload), arrival=3,
                         result={"decision": "accepted", "state": "succeeded", "state_version": 3})
    huge = _env("M-9", "task_result", {"status": "succeeded", "lease_version": 1, "n": 2 ** 60}, "R-1:T-1:attempt-1",
                refs=("sha256:" + "a" * 64,))  # json-sorted-v1 writes it; jcs-v2 cannot represent it exactly
    v = decide(huge, _student_view("succeeded", lease=1, holder="researcher"), (prior,), default_rulebook())
    assert v.decision == Decision.CONFLICT, (v.decision, v.reason)
