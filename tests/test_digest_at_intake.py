"""Safe checks what it receives (issue 46, item 2). Under the safe policy intake digests every envelope's
payload again, under its digest_scheme, wherever the envelope was built (parsed from JSON or made in
memory by the simulator), and refuses one whose payload is not the one its payload_digest was made of
(E_DIGEST_MISMATCH). The transport's ``garble`` fault changes a payload in transit and keeps the sender's
digest: naive takes it and PAYLOAD_MATCHES_DIGEST breaks; safe refuses it and every invariant holds. A
fault injected by hand sends the envelope the transport kept, never the message log's redacted copy."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import run_cli
from sim import digest as _digest
from sim import samples
from sim.contracts.invariants import CASES, check_case
from sim.envelope import build_envelope
from sim.errors import InputError
from sim.faults import FAULTS, INJECTABLE, REGISTRY
from sim.invariants import DESCRIPTIONS, check
from sim.live import LiveRun
from sim.policy import NAIVE, POLICIES, SAFE
from sim.privacy import REDACTED
from sim.runner import run_scenario
from sim.runtime import deliver, put_artifact
from sim.scenario import load_scenario
from sim.store import Store

NAME = "PAYLOAD_MATCHES_DIGEST"


def _matches(env) -> bool:
    return _digest.digest(env.payload, env.digest_scheme) == env.payload_digest


def _broken(store) -> dict:
    return {r.name: r for r in check(store) if not r.ok}


# ---------------------------------------------------------------------------- the fault, as a student runs it


def test_naive_takes_the_garbled_result_and_check_names_it_from_the_cli(capsys, tmp_path):
    db = tmp_path / "naive.db"
    code, out, _ = run_cli(capsys, "run", "publish-report", "--policy", "naive", "--fault", "garble", "--db", db)
    assert code == 0 and "garble" in out
    code, out, _ = run_cli(capsys, "check", "--db", db, "--json")
    assert code == 1  # a broken invariant
    verdicts = {r["name"]: r for r in json.loads(out)}
    assert [n for n, r in verdicts.items() if not r["ok"]] == [NAME]
    (w,) = verdicts[NAME]["witnesses"]
    assert (w["message_id"], w["task_id"], w["decision"], w["type"]) == ("M-3", "T-1", "accepted", "task_result")
    assert w["computed"] != w["payload_digest"] and w["digest_scheme"] == "json-sorted-v1"


def test_safe_refuses_the_garbled_result_and_every_invariant_holds_from_the_cli(capsys, tmp_path):
    db = tmp_path / "safe.db"
    assert run_cli(capsys, "run", "publish-report", "--policy", "safe", "--fault", "garble", "--db", db)[0] == 0
    code, out, _ = run_cli(capsys, "check", "--db", db, "--json")
    assert code == 0 and all(r["ok"] for r in json.loads(out))
    code, out, _ = run_cli(capsys, "messages", "--db", db, "--json")
    deliveries = json.loads(out)["deliveries"]
    refused = [d for d in deliveries if d["decision"] == "rejected"]
    assert [(d["message_id"], d["code"]) for d in refused] == [("M-3", "E_DIGEST_MISMATCH")]
    assert "changed after it was digested" in refused[0]["reason"]
    # the researcher's retry, the payload it digested, lands (T-1 succeeded) and the report is published once
    code, out, _ = run_cli(capsys, "messages", "--db", db, "--json")
    logged = json.loads(out)
    taken = [d for d in logged["deliveries"] if d["task_id"] == "T-1" and d["type"] == "task_result"
             and d["decision"] == "accepted"]
    assert len(taken) == 1 and taken[0]["delivery_id"] > refused[0]["delivery_id"]
    assert taken[0]["state_after"] == "succeeded"
    retry = next(m for m in logged["messages"] if m["message_id"] == taken[0]["message_id"])
    assert _digest.digest(retry["payload"], retry["digest_scheme"]) == retry["payload_digest"]
    assert retry["payload"]["summary"].startswith("3 item(s)")


def test_the_fault_changes_the_summary_and_keeps_the_senders_digest_and_says_so_in_the_log():
    store = run_scenario(load_scenario("publish-report"), policy="naive", faults=["garble"], seed=0)
    try:
        (ev,) = [e for e in store.events() if e["type"] == "fault_injected"]
        d = ev["data"]
        assert (ev["message_id"], d["field"], d["was"], d["now"]) == ("M-3", "summary", "3 item(s) in " + d["was"][13:],
                                                                     "4 item(s) in " + d["was"][13:])
        # what the README's fault table says the fault does, as this run did it
        readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
        row = next(ln for ln in readme.splitlines() if ln.startswith("| `garble` |"))
        assert "`3 item(s)` arrives as `4 item(s)`" in row and "`E_DIGEST_MISMATCH`" in row and NAME in row
        (m3,) = [m for m in store.messages() if m["message_id"] == "M-3"]
        assert m3["payload"]["summary"] == d["now"] and m3["payload_digest"] == d["payload_digest"]
        # the digest is of what the researcher sent: the payload with the summary it wrote
        assert _digest.digest({**m3["payload"], "summary": d["was"]}, m3["digest_scheme"]) == m3["payload_digest"]
    finally:
        store.close()


def test_garble_is_a_registered_fault_not_injected_by_hand_and_naive_is_the_policy_that_believes_digests():
    assert "garble" in FAULTS and REGISTRY["garble"].only == ("task_result",)
    assert "garble" not in INJECTABLE and REGISTRY["garble"].tui_key is None
    assert SAFE.checks_digests and not NAIVE.checks_digests
    assert set(POLICIES) == {"safe", "naive"}


def test_the_rule_is_written_for_a_student_and_has_its_column():
    from sim.invariants import REGISTRY as INV

    text = DESCRIPTIONS[NAME]
    assert "payload_digest" in text and "digest_scheme" in text and "[redacted]" in text
    assert INV[NAME].short == "pdig"


# ---------------------------------------------------------------------------- intake, unit by unit


def _store() -> Store:
    s = Store.memory()
    put_artifact(s, samples.FACTS, kind="fact-table", task_id="T-1")  # (the fact table M-3 cites)
    for env in samples.happy_path()[:2]:
        assert deliver(s, env, policy=SAFE).decision == "accepted"
    return s


def _m3(**kw):
    m3 = samples.happy_path()[2]
    return build_envelope(message_id=m3.message_id, trace_id=m3.trace_id, task_id=m3.task_id, sender=m3.sender,
                          recipient=m3.recipient, type=m3.type, payload=dict(m3.payload),
                          idempotency_key=m3.idempotency_key, created_at=m3.created_at,
                          evidence_refs=list(m3.evidence_refs), **kw)


@pytest.mark.parametrize("scheme", _digest.SCHEMES)
def test_an_in_memory_envelope_whose_payload_changed_after_its_digest_is_refused_under_safe(scheme):
    env = _m3(digest_scheme=scheme)
    garbled = replace(env, payload={**env.payload, "summary": "4 claims, each with a source"})
    assert not _matches(garbled)
    s = _store()
    out = deliver(s, garbled, policy=SAFE)
    assert (out.decision, out.code, out.state) == ("rejected", "E_DIGEST_MISMATCH", "running")
    assert scheme in out.reason and NAME not in _broken(s)
    # the sender's retry, the payload it digested under a new message id, is taken
    assert deliver(s, replace(env, message_id="M-4"), policy=SAFE).decision == "accepted"
    assert not _broken(s)


@pytest.mark.parametrize("quick", [True, False], ids=["msgspec-loaded", "standard-library"])
def test_a_payload_changed_in_place_inside_a_built_envelope_is_refused_too(quick, monkeypatch):
    """The check holds the payload to its digest again: it does not trust what the envelope remembers of it
    (with msgspec loaded, the payload is written again and compared with the text the digest was made of)."""
    if quick:
        assert _digest.use_quick_writer()
    else:
        monkeypatch.setattr(_digest, "_quick", None)
    env = _m3()
    env.payload["summary"] = "4 claims, each with a source"  # (the dict inside a frozen envelope)
    out = deliver(_store(), env, policy=SAFE)
    assert (out.decision, out.code) == ("rejected", "E_DIGEST_MISMATCH")


def test_an_in_memory_copy_with_the_same_payload_is_taken_and_its_log_row_is_the_originals():
    env = _m3()
    copy = replace(env, payload=dict(env.payload))  # (built in memory again: nothing remembered of the payload)
    a, b = _store(), _store()
    assert deliver(a, env, policy=SAFE).decision == deliver(b, copy, policy=SAFE).decision == "accepted"
    assert a.messages() == b.messages() and a.state_digest() == b.state_digest()


def test_naive_takes_the_changed_payload_and_the_invariant_names_it():
    env = _m3()
    garbled = replace(env, payload={**env.payload, "summary": "4 claims, each with a source"})
    s = Store.memory()
    for e in samples.happy_path()[:2]:
        deliver(s, e, policy=NAIVE)
    assert deliver(s, garbled, policy=NAIVE).decision == "accepted"
    (w,) = _broken(s)[NAME].witnesses
    assert (w["message_id"], w["decision"], w["payload_digest"]) == ("M-3", "accepted", env.payload_digest)


def test_the_digest_is_checked_before_anything_reads_the_payload():
    env = _m3()
    garbled = replace(env, payload={**env.payload, "budget_left": 99})  # also a field nobody declared
    assert deliver(_store(), garbled, policy=SAFE).code == "E_DIGEST_MISMATCH"


@pytest.mark.parametrize("case", [c for c in CASES if c.invariant == NAME], ids=lambda c: c.name)
def test_every_contract_case_of_the_invariant(case):
    assert check_case(check, case) == []


def test_the_contract_has_both_kinds_and_a_planted_runtime_that_keeps_every_other_rule():
    cases = [c for c in CASES if c.invariant == NAME]
    assert {c.holds for c in cases} == {True, False}
    assert any("keeps every other rule" in c.name for c in cases)


# ---------------------------------------------------------------------------- by hand, under privacy


def _live_until(message_id: str, policy: str = "safe") -> LiveRun:
    live = LiveRun(load_scenario("sensitive-source"), policy=policy, seed=0)
    while (out := live.step()) is not None and out.message_id != message_id:
        pass
    assert out is not None
    return live


def test_a_by_hand_duplicate_under_privacy_resends_the_envelope_as_sent_and_is_recorded_duplicate():
    live = _live_until("M-3")
    (logged,) = [m for m in live.store.messages() if m["message_id"] == "M-3"]
    hidden = [k for k, v in logged["payload"].items() if v == REDACTED]
    assert hidden  # the log keeps [redacted]: a copy of it would not be what was sent
    sent = live.run.bus.sent_as("M-3")
    assert _matches(sent) and all(sent.payload[k] != REDACTED for k in hidden)
    live.inject("duplicate", "M-3")
    assert live.run.bus.carries("M-3")
    while (out := live.step()) is not None and out.message_id != "M-3":
        pass
    assert (out.decision, out.code) == ("duplicate", None)
    # the copy is byte for byte the envelope first logged: one message row, one envelope digest
    assert [m["message_id"] for m in live.store.messages()].count("M-3") == 1
    live.run_to_end()
    assert not _broken(live.store)


def test_a_by_hand_conflict_under_privacy_is_made_from_the_envelope_as_sent():
    live = _live_until("M-3")
    twin = live.run.bus.sent_as(live.inject("conflicting-digest", "M-3").split()[0])
    assert twin is not None and _matches(twin)
    assert REDACTED not in json.dumps(twin.payload)  # the source's contact as sent, not the log's brackets
    while (out := live.step()) is not None and out.message_id != twin.message_id:
        pass
    assert out.decision == "conflict"


def test_a_message_the_transport_never_carried_and_the_log_keeps_redacted_cannot_be_sent_again():
    live = _live_until("M-3")
    live.run.bus.sent.pop("M-3")  # (as if the transport had never carried it)
    with pytest.raises(InputError) as e:
        live.inject("duplicate", "M-3")
    assert e.value.code == "E_FAULT_NOT_APPLICABLE" and "redacted" in str(e.value)


def test_garble_cannot_be_injected_by_hand():
    live = _live_until("M-3")
    with pytest.raises(InputError) as e:
        live.inject("garble", "M-3")
    assert e.value.code == "E_UNKNOWN_FAULT"


def test_a_live_run_keeps_what_its_transport_sent_from_its_first_message():
    live = LiveRun(load_scenario("publish-report"), seed=0)
    assert live.run.bus.sent == {}
    first = live.step()
    assert first.message_id == "M-1" and _matches(live.run.bus.sent_as("M-1"))


# ---------------------------------------------------------------------------- a log delivered again


@pytest.mark.parametrize("scenario", ["publish-report", "sensitive-source"])
def test_a_run_with_a_garbled_result_re_delivered_from_its_log_decides_the_same(scenario):
    """Re-delivery (lab verify, replay) reads envelopes back from the message log: a payload the log shows is
    digested again (the garbled one refused again); one the log keeps [redacted] cannot be, and keeps the
    verdict recorded for it (sensitive-source's garbled result carries the source's contact)."""
    from sim.labs.verify import rebuild_by_redelivery
    from sim.replay import redeliver

    store = run_scenario(load_scenario(scenario), policy="safe", faults=["garble", "duplicate"], seed=0)
    try:
        refused = [d for d in store.deliveries() if d["code"] == "E_DIGEST_MISMATCH"]
        assert [d["message_id"] for d in refused] == ["M-3"]
        (m3,) = [m for m in store.messages() if m["message_id"] == "M-3"]
        assert (REDACTED in json.dumps(m3["payload"])) == (scenario == "sensitive-source")
        fresh, difference = rebuild_by_redelivery(store)
        fresh.close()
        assert difference is None
        report = redeliver(store)
        assert report["decisions"].get("rejected", 0) >= 1 and report["effects_committed_again"] == []
    finally:
        store.close()


def test_writing_a_payload_again_never_vouches_for_nan_where_the_text_had_null():
    assert _digest.use_quick_writer()
    assert _digest.writes_as({"a": None, "b": "x"}, '{"a":null,"b":"x"}') is False  # (digest it instead)
    assert _digest.writes_as({"a": float("nan")}, '{"a":null}') is False
    assert _digest.writes_as({"b": "x", "a": 1}, '{"a":1,"b":"x"}') is True
    assert _digest.writes_as({"a": 2}, '{"a":1}') is False
