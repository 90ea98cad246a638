"""Judges judged on doctored logs: a finished run whose rows are changed the way a broken writer
would leave them (a clock gone backwards, an id used twice or skipped, an event naming no
delivery), read through a proxy so the store itself never holds the damage. Each planted fault must
break exactly its invariant, and the witness must name exactly the rows, in words a student reads.
Also the payload comparison the judges share with intake (_same_payload), case by case."""

import copy

import pytest

from sim import digest as _digest
from sim.invariants import _same_payload, check
from sim.runner import run_scenario
from sim.scenario import load_scenario


def _editable(events) -> list[dict]:
    """The run's events as plain rows a test may doctor (the store hands out read-only ones;
    the judges read any mapping of the event log's columns)."""
    return [copy.deepcopy(dict(e)) for e in events]


class Doctored:
    """A store as the judges see it, with some rows replaced (``events`` and ``deliveries``)."""

    def __init__(self, store, *, events=None, deliveries=None):
        self._store = store
        self._events = events
        self._deliveries = deliveries

    def events(self):
        return self._events if self._events is not None else self._store.events()

    def deliveries(self):
        return self._deliveries if self._deliveries is not None else self._store.deliveries()

    def __getattr__(self, name):
        return getattr(self._store, name)


@pytest.fixture(scope="module")
def run():
    store = run_scenario(load_scenario("publish-report"))
    yield store
    store.close()


def _clock(store) -> list[dict]:
    (r,) = [r for r in check(store) if r.name == "CLOCK_MONOTONIC"]
    broken = [r.name for r in check(store) if not r.ok]
    assert broken in ([], ["CLOCK_MONOTONIC"]), broken
    return list(r.witnesses)


def test_the_untouched_run_keeps_its_clock(run):
    assert _clock(run) == []


def test_an_event_dated_before_the_one_before_it_is_named_with_both_ticks(run):
    events = _editable(run.events())
    k = next(i for i, e in enumerate(events) if i > 0 and e["tick"] > 1 and e["delivery_id"] is not None)
    prev = events[k - 1]
    events[k]["tick"] = prev["tick"] - 1
    e = events[k]
    assert _clock(Doctored(run, events=events)) == [{
        "problem": "an event's tick is before the previous event's", "event_seq": e["seq"], "tick": e["tick"],
        "previous_event_seq": prev["seq"], "previous_tick": prev["tick"], "type": e["type"], "task_id": e["task_id"],
        "message_id": e["message_id"], "delivery_id": e["delivery_id"],
    }]


def test_a_delivery_id_used_twice_names_both_messages(run):
    dels = copy.deepcopy(run.deliveries())
    twin = dict(dels[2], message_id="M-twin", task_id="T-9")
    dels.insert(3, twin)
    assert _clock(Doctored(run, deliveries=dels)) == [{
        "problem": "a delivery id is used twice", "delivery_id": dels[2]["delivery_id"], "message_id": "M-twin",
        "other_message_id": dels[2]["message_id"], "task_id": "T-9",
    }]


def test_a_skipped_delivery_id_is_named_with_what_is_missing(run):
    dels = copy.deepcopy(run.deliveries())
    for d in dels[3:]:
        d["delivery_id"] += 2  # ids 4 and 5 never written
    events = _editable(run.events())
    for e in events:
        if e["delivery_id"] is not None and e["delivery_id"] >= 4:
            e["delivery_id"] += 2
    assert _clock(Doctored(run, events=events, deliveries=dels)) == [{
        "problem": "delivery ids skip", "delivery_id": 4, "missing": [4, 5], "next_delivery_id": 6,
        "previous_delivery_id": 3,
    }]


def test_a_first_delivery_id_other_than_one_is_a_gap_with_no_previous(run):
    dels = copy.deepcopy(run.deliveries())
    events = _editable(run.events())
    for d in dels:
        d["delivery_id"] += 1
    for e in events:
        if e["delivery_id"] is not None:
            e["delivery_id"] += 1
    assert _clock(Doctored(run, events=events, deliveries=dels)) == [{
        "problem": "delivery ids skip", "delivery_id": 1, "missing": [1], "next_delivery_id": 2,
        "previous_delivery_id": None,
    }]


def test_a_long_gap_lists_its_first_ten_missing_ids(run):
    dels = copy.deepcopy(run.deliveries())
    events = _editable(run.events())
    for d in dels[1:]:
        d["delivery_id"] += 20
    for e in events:
        if e["delivery_id"] is not None and e["delivery_id"] >= 2:
            e["delivery_id"] += 20
    (w,) = _clock(Doctored(run, events=events, deliveries=dels))
    assert w["missing"] == list(range(2, 12)) and w["next_delivery_id"] == 22 and w["delivery_id"] == 2


def test_a_delivery_dated_before_the_one_before_it_is_named_with_both_ticks(run):
    dels = copy.deepcopy(run.deliveries())
    d, prev = dels[4], dels[3]
    d["tick"] = prev["tick"] - 1
    assert _clock(Doctored(run, deliveries=dels)) == [{
        "problem": "a delivery's tick is before the previous delivery's", "delivery_id": d["delivery_id"],
        "tick": d["tick"], "previous_delivery_id": prev["delivery_id"], "previous_tick": prev["tick"],
        "message_id": d["message_id"], "task_id": d["task_id"],
    }]


def test_a_delivery_at_the_same_tick_as_the_one_before_is_no_violation(run):
    dels = copy.deepcopy(run.deliveries())
    dels[4]["tick"] = dels[3]["tick"]
    events = _editable(run.events())
    assert _clock(Doctored(run, events=events, deliveries=dels)) == []


def test_an_event_naming_a_delivery_that_is_not_recorded_is_named(run):
    events = _editable(run.events())
    e = next(e for e in events if e["delivery_id"] is not None)
    e["delivery_id"] = 999
    assert _clock(Doctored(run, events=events)) == [{
        "problem": "an event names a delivery that is not recorded", "event_seq": e["seq"], "delivery_id": 999,
        "type": e["type"], "task_id": e["task_id"], "message_id": e["message_id"],
    }]


# ---------------------------------------------------------------------------- the payload comparison

P = {"status": "succeeded", "facts": ["a", "b"], "n": 1}
Q = {"status": "succeeded", "facts": ["a", "c"], "n": 1}


def _row(payload, scheme):
    return {"payload": payload, "digest_scheme": scheme, "payload_digest": _digest.digest(payload, scheme)}


@pytest.mark.parametrize("a, b, same", [
    (_row(P, "json-sorted-v1"), _row(P, "json-sorted-v1"), True),
    (_row(P, "json-sorted-v1"), _row(Q, "json-sorted-v1"), False),
    (_row(P, "json-sorted-v1"), _row(P, "jcs-v2"), True),  # one payload, two schemes: the same intent
    (_row(P, "jcs-v2"), _row(P, "json-sorted-v1"), True),
    (_row(P, "json-sorted-v1"), _row(Q, "jcs-v2"), False),
    (_row(Q, "jcs-v2"), _row(P, "json-sorted-v1"), False),
    # a digest that does not match its own payload: compared across schemes, the recomputed one decides
    (dict(_row(P, "json-sorted-v1"), payload_digest="sha256:" + "0" * 64), _row(P, "jcs-v2"), False),
    (_row(P, "json-sorted-v1"), dict(_row(P, "jcs-v2"), payload_digest="sha256:" + "0" * 64), False),
])
def test_two_deliveries_carry_the_same_payload_exactly_when_their_digests_agree_under_one_scheme(a, b, same):
    assert _same_payload(a, b) is same


def test_redacted_payloads_are_compared_as_the_log_kept_them():
    shown = {"source": "[redacted]", "claim": "x"}
    other = {"source": "[redacted]", "claim": "y"}
    a = {"payload": shown, "digest_scheme": "json-sorted-v1", "payload_digest": "sha256:" + "1" * 64}
    b = {"payload": dict(shown), "digest_scheme": "jcs-v2", "payload_digest": "sha256:" + "2" * 64}
    assert _same_payload(a, b) is True  # both redacted: what the log kept is all there is, and it agrees
    assert _same_payload(a, dict(b, payload=other)) is False
    # one side redacted: only the other side's digest can be checked against the redacted one's payload
    clear = _row({"source": "Ann", "claim": "x"}, "jcs-v2")
    assert _same_payload(a, clear) is False
    assert _same_payload(_row({"source": "[redacted]", "claim": "x"}, "json-sorted-v1") | {"payload": shown},
                         _row(shown, "jcs-v2")) is True


def test_a_payload_with_no_canonical_bytes_is_never_the_same():
    bad = {"payload": {"x": float("nan")}, "digest_scheme": "jcs-v2", "payload_digest": "sha256:" + "3" * 64}
    assert _same_payload(_row(P, "json-sorted-v1"), bad) is False


def test_a_verdict_reads_as_json_with_its_name_words_and_witnesses(run):
    from sim.invariants import DESCRIPTIONS, InvariantResult

    r = InvariantResult("CLOCK_MONOTONIC", False, DESCRIPTIONS["CLOCK_MONOTONIC"], ({"delivery_id": 4},))
    assert r.to_dict() == {"name": "CLOCK_MONOTONIC", "ok": False, "description": DESCRIPTIONS["CLOCK_MONOTONIC"],
                           "witnesses": [{"delivery_id": 4}]}
    assert [x.to_dict()["witnesses"] for x in check(run)] == [[] for _ in check(run)]


# ---------------------------------------------------------------------------- NO_LOST_UPDATE on doctored logs


class DoctoredAll(Doctored):
    def __init__(self, store, *, events=None, deliveries=None, messages=None):
        super().__init__(store, events=events, deliveries=deliveries)
        self._messages = messages

    def messages(self):
        return self._messages if self._messages is not None else self._store.messages()


def _lost(store) -> list[dict]:
    (r,) = [r for r in check(store) if r.name == "NO_LOST_UPDATE"]
    return list(r.witnesses)


def _moves(store):
    from sim.invariants import _move_witness, _Run

    return {m["event_seq"]: (m, _move_witness(m)) for m in _Run(store).moves}


def _result_moves(store):
    return [(m, w) for m, w in _moves(store).values() if m["message"] and m["message"]["type"] == "task_result"]


def test_a_result_on_a_task_no_lease_was_ever_granted_for_is_a_lost_update(run):
    events = [e for e in _editable(run.events()) if e["type"] != "lease_granted"]
    doctored = Doctored(run, events=events)
    expected = [{"problem": "no lease was ever granted", "task_id": m["task_id"], "message_id": m["message"]["message_id"],
                 "sender": m["message"]["sender"], "carried_lease_version": m["message"]["payload"].get("lease_version"),
                 "current_lease": None, "transition": w} for m, w in _result_moves(doctored)]
    assert expected and _lost(doctored) == expected


def test_a_lease_that_expired_without_a_grant_on_record_still_fences_the_commit(run):
    events = _editable(run.events())
    first_result = min(m["event_seq"] for m, _w in _result_moves(run))
    i = next(i for i, e in enumerate(events) if e["seq"] == first_result)
    target = events[i]
    events = [e for e in events if not (e["type"] == "lease_granted" and e["task_id"] == target["task_id"])]
    expired = {"seq": target["seq"] - 0.5, "tick": target["tick"], "type": "lease_expired", "task_id": target["task_id"],
               "message_id": None, "delivery_id": None, "data": {"holder": "researcher", "lease_version": 1},
               "created_at": target.get("created_at")}
    events.insert(events.index(target), expired)
    doctored = Doctored(run, events=events)
    got = [w for w in _lost(doctored) if w["task_id"] == target["task_id"]]
    assert got[0]["problem"] == "the lease had expired"
    assert got[0]["current_lease"] == {"holder": "researcher", "lease_version": 1, "expired": True,
                                       "event_seq": target["seq"] - 0.5}


def test_a_move_made_from_a_state_version_its_message_did_not_expect_is_a_lost_update(run):
    msgs = copy.deepcopy(run.messages())
    (m, w) = next((m, w) for m, w in _moves(run).values()
                  if m["message"] and m["message"]["type"] == "task_request")
    doctored_msg = next(x for x in msgs if x["msg_seq"] == m["message"]["msg_seq"])
    doctored_msg["payload"]["expected_state_version"] = m["from_version"] + 5
    doctored = DoctoredAll(run, messages=msgs)
    assert _lost(doctored) == [{
        "problem": "stale expected_state_version", "task_id": m["task_id"], "message_id": doctored_msg["message_id"],
        "sender": doctored_msg["sender"], "expected_state_version": m["from_version"] + 5,
        "actual_state_version": m["from_version"], "transition": _moves(doctored)[m["event_seq"]][1],
    }]
    # the version it did expect is no violation
    doctored_msg["payload"]["expected_state_version"] = m["from_version"]
    assert _lost(DoctoredAll(run, messages=msgs)) == []


# ---------------------------------------------------------------------------- CONFLICT_FROZEN on doctored logs


@pytest.fixture(scope="module")
def conflicted():
    store = run_scenario(load_scenario("publish-report"), seed=2, faults=["conflicting-digest"])
    yield store
    store.close()


def _frozen(store) -> list[dict]:
    (r,) = [r for r in check(store) if r.name == "CONFLICT_FROZEN"]
    return list(r.witnesses)


def _conflict_delivery(store):
    return next(d for d in store.deliveries() if d["decision"] == "conflict")


def test_the_conflicting_run_holds_conflict_frozen(conflicted):
    assert _frozen(conflicted) == []


def test_a_second_payload_whose_delivery_left_no_events_is_judged_at_the_last_event_before_it(conflicted):
    """Another implementation's log may write no event for a delivery: the point 'right after it' is
    then the last event of the deliveries before it, where the task was not yet frozen."""
    second = _conflict_delivery(conflicted)
    events = [e for e in _editable(conflicted.events()) if e["delivery_id"] != second["delivery_id"]]
    before = max(e["seq"] for e in events if e["delivery_id"] is not None and e["delivery_id"] < second["delivery_id"])
    (w,) = _frozen(Doctored(conflicted, events=events))
    assert w["problem"] == "not frozen when the second payload was delivered"
    assert w["event_seq"] == before and w["state_instead"] == "succeeded" and w["expected_state"] == "needs_review"


def test_a_refused_delivery_with_another_payload_under_the_key_is_no_conflict(conflicted):
    second = _conflict_delivery(conflicted)
    dels = copy.deepcopy(conflicted.deliveries())
    for d in dels:
        if d["delivery_id"] == second["delivery_id"]:
            d["decision"] = "rejected"
    events = [e for e in _editable(conflicted.events())
              if not (e["delivery_id"] == second["delivery_id"] and e["type"] == "transition_applied")]
    # the freeze is gone from the log too: with the second payload refused there is nothing to freeze
    assert _frozen(Doctored(conflicted, events=events, deliveries=dels)) == []
    # counted as delivered, the same log is a conflict nobody froze
    dels2 = copy.deepcopy(conflicted.deliveries())
    (w,) = _frozen(Doctored(conflicted, events=events, deliveries=dels2))
    assert w["problem"] == "not frozen when the second payload was delivered" and w["second"]["message_id"] == second["message_id"]


# ---------------------------------------------------------------------------- EFFECT_HAS_EVIDENCE on doctored logs
# publish-report under safe: T-2's result M-6 (delivery 9) commits publish:R-1:T-2 and cites T-2's own
# artifact and T-1's. M-4 (T-2's request) cites T-1's artifact; M-5 (T-2's start) cites nothing.


class DoctoredRows(DoctoredAll):
    def __init__(self, store, *, artifacts=None, **kw):
        super().__init__(store, **kw)
        self._artifacts = artifacts

    def artifacts(self):
        return self._artifacts if self._artifacts is not None else self._store.artifacts()


def _only(store, name) -> list[dict]:
    results = check(store)
    (r,) = [r for r in results if r.name == name]
    return list(r.witnesses)


def _with_refs(store, **refs) -> list[dict]:
    msgs = copy.deepcopy(store.messages())
    for m in msgs:
        if m["message_id"] in refs:
            m["evidence_refs"] = refs[m["message_id"]]
    return msgs


def _effect_event(store, key="publish:R-1:T-2"):
    return next(e for e in store.events() if e["type"] == "effect_committed" and e["data"]["effect_key"] == key)


def test_the_untouched_run_publishes_with_evidence(run):
    assert _only(run, "EFFECT_HAS_EVIDENCE") == []


def test_a_result_that_cites_nothing_is_named_with_its_effect_and_delivery(run):
    e = _effect_event(run)
    got = _only(DoctoredAll(run, messages=_with_refs(run, **{"M-6": []})), "EFFECT_HAS_EVIDENCE")
    assert got == [{"problem": "committed from a result that cites no stored evidence", "effect_key": "publish:R-1:T-2",
                    "task_id": "T-2", "message_id": "M-6", "delivery_id": e["delivery_id"], "event_seq": e["seq"],
                    "evidence_refs": []}]


def test_a_result_whose_citations_reach_no_stored_artifact_is_named_with_what_it_cited(run):
    ghost = "sha256:" + "0" * 64
    got = _only(DoctoredAll(run, messages=_with_refs(run, **{"M-6": [ghost, "M-5"]})), "EFFECT_HAS_EVIDENCE")
    assert [(w["problem"], w["message_id"], w["evidence_refs"]) for w in got] == [
        ("its evidence reaches no stored artifact", "M-6", [ghost, "M-5"])]


def test_evidence_reached_through_a_chain_of_cited_messages_counts(run):
    msgs = _with_refs(run, **{"M-6": ["M-5"], "M-5": ["M-4"]})  # M-4 cites T-1's artifact
    assert _only(DoctoredAll(run, messages=msgs), "EFFECT_HAS_EVIDENCE") == []


def test_messages_that_cite_each_other_in_a_circle_reach_nothing_and_the_judge_stops(run):
    msgs = _with_refs(run, **{"M-6": ["M-5"], "M-5": ["M-6", "M-5"]})
    got = _only(DoctoredAll(run, messages=msgs), "EFFECT_HAS_EVIDENCE")
    assert [(w["problem"], w["evidence_refs"]) for w in got] == [("its evidence reaches no stored artifact", ["M-5"])]


def test_evidence_that_is_a_message_citing_a_later_dropped_artifact_does_not_count(run):
    t1_art = next(a for a in run.artifacts() if a["task_id"] == "T-1")
    arts = [a for a in run.artifacts() if a["ref"] != t1_art["ref"]]
    msgs = _with_refs(run, **{"M-6": ["M-4"]})
    got = _only(DoctoredRows(run, messages=msgs, artifacts=arts), "EFFECT_HAS_EVIDENCE")
    assert [w["message_id"] for w in got] == ["M-6"]


def test_a_compensating_effect_of_a_review_rests_on_the_reconciliation_not_on_citations(run):
    msgs = _with_refs(run, **{"M-6": []})
    for m in msgs:
        if m["message_id"] == "M-6":
            m["type"] = "review_decision"
    assert _only(DoctoredAll(run, messages=msgs), "EFFECT_HAS_EVIDENCE") == []


def test_an_effect_no_delivery_committed_is_named_as_citing_nothing(run):
    events = _editable(run.events())
    e = next(x for x in events if x["type"] == "effect_committed")
    e["delivery_id"] = None
    got = _only(Doctored(run, events=events), "EFFECT_HAS_EVIDENCE")
    assert got == [{"problem": "committed from a result that cites no stored evidence", "effect_key": "publish:R-1:T-2",
                    "task_id": "T-2", "message_id": "M-6", "delivery_id": None, "event_seq": e["seq"],
                    "evidence_refs": []}]


def test_every_effect_without_evidence_is_named_not_only_the_first(run):
    events = _editable(run.events())
    first = next(x for x in events if x["type"] == "effect_committed")
    m3_delivery = next(d["delivery_id"] for d in run.deliveries() if d["message_id"] == "M-3")
    second = dict(copy.deepcopy(first), seq=first["seq"] + 0.5, task_id="T-1", message_id="M-3",
                  delivery_id=m3_delivery, data={"effect_key": "publish:R-1:T-1"})
    events.insert(events.index(first) + 1, second)
    msgs = _with_refs(run, **{"M-6": [], "M-3": []})
    got = _only(DoctoredAll(run, events=events, messages=msgs), "EFFECT_HAS_EVIDENCE")
    assert [(w["message_id"], w["effect_key"]) for w in got] == [("M-6", "publish:R-1:T-2"), ("M-3", "publish:R-1:T-1")]


# ---------------------------------------------------------------------------- NO_EFFECT_FROM_UNTRUSTED on doctored logs
# To make T-1 untrusted before T-2 publishes, A-2 (T-1's ack, delivered before M-6) is rewritten to
# carry T-1's result key (M-3's) with another payload digest: one key, two payloads.

OTHER = "sha256:" + "e" * 64


def _taint(store, via="A-2", *, key="R-1:T-1:attempt-1", digest=OTHER, **changes):
    msgs = copy.deepcopy(store.messages())
    for m in msgs:
        if m["message_id"] == via:
            m.update(idempotency_key=key, payload_digest=digest, **changes)
    return msgs


def _untrusted(store) -> list[dict]:
    return _only(store, "NO_EFFECT_FROM_UNTRUSTED")


def _t1_artifact(store):
    return next(a["ref"] for a in store.artifacts() if a["task_id"] == "T-1")


def test_the_untouched_run_publishes_from_trusted_inputs(run):
    assert _untrusted(run) == []


def test_a_result_citing_an_artifact_of_a_task_with_two_payloads_under_one_key_is_named(run):
    e = _effect_event(run)
    got = _untrusted(DoctoredAll(run, messages=_taint(run)))
    assert got == [{"problem": "committed from an input that was untrusted at that moment",
                    "effect_key": "publish:R-1:T-2", "task_id": "T-2", "message_id": "M-6",
                    "input": _t1_artifact(run), "input_task": "T-1", "second_payload": "A-2", "event_seq": e["seq"]}]


def test_the_same_payload_twice_under_one_key_taints_nothing(run):
    m3 = run.message_by_id("M-3")
    assert _untrusted(DoctoredAll(run, messages=_taint(run, digest=m3["payload_digest"]))) == []


def test_a_second_payload_that_intake_rejected_taints_nothing(run):
    dels = copy.deepcopy(run.deliveries())
    next(d for d in dels if d["message_id"] == "A-2")["decision"] = "rejected"
    assert _untrusted(DoctoredAll(run, messages=_taint(run), deliveries=dels)) == []


def test_a_second_payload_that_arrives_after_the_publication_taints_nothing_before_it(run):
    # A-4 (T-2's ack of M-6) is delivered after the effect: rewritten onto T-1's key, it is too late
    msgs = _taint(run, via="A-4", task_id="T-1")
    assert _untrusted(DoctoredAll(run, messages=msgs)) == []


def test_a_review_of_the_untrusted_task_before_the_publication_releases_it(run):
    events = _editable(run.events())
    e = next(x for x in events if x["type"] == "effect_committed")
    review = {"seq": e["seq"] - 0.5, "tick": e["tick"], "type": "review_decided", "task_id": "T-1", "message_id": None,
              "delivery_id": None, "data": {}, "created_at": e.get("created_at")}
    events.insert(events.index(e), review)
    assert _untrusted(DoctoredAll(run, messages=_taint(run), events=events)) == []
    other = dict(review, task_id="T-9")
    events[events.index(review)] = other
    assert [w["input_task"] for w in _untrusted(DoctoredAll(run, messages=_taint(run), events=events))] == ["T-1"]


def test_an_input_from_the_results_own_task_is_not_an_outside_input(run):
    # T-2 is tainted by its own result (A-3 carries M-6's key with another payload); M-6 cites T-2's artifact too
    msgs = _taint(run, via="A-3", key="R-1:T-2:attempt-1")
    assert _untrusted(DoctoredAll(run, messages=msgs)) == []


def test_a_cited_message_of_the_untrusted_task_is_an_input_too(run):
    msgs = _taint(run)
    for m in msgs:
        if m["message_id"] == "M-6":
            m["evidence_refs"] = ["M-3"]
    got = _untrusted(DoctoredAll(run, messages=msgs))
    assert [(w["input"], w["input_task"]) for w in got] == [("M-3", "T-1")]


def test_one_witness_per_effect_however_many_of_its_inputs_are_untrusted(run):
    msgs = _taint(run)
    for m in msgs:
        if m["message_id"] == "M-6":
            m["evidence_refs"] = ["M-3", _t1_artifact(run), "M-1"]
    got = _untrusted(DoctoredAll(run, messages=msgs))
    assert [w["input"] for w in got] == ["M-3"]


def test_every_effect_from_an_untrusted_input_is_named_not_only_the_first(run):
    events = _editable(run.events())
    first = next(x for x in events if x["type"] == "effect_committed")
    second = dict(copy.deepcopy(first), seq=first["seq"] + 0.5, data={"effect_key": "publish:R-1:T-2:again"})
    events.insert(events.index(first) + 1, second)
    got = _untrusted(DoctoredAll(run, messages=_taint(run), events=events))
    assert [w["effect_key"] for w in got] == ["publish:R-1:T-2", "publish:R-1:T-2:again"]


def test_an_effect_of_a_message_that_is_not_a_result_is_not_judged_here(run):
    msgs = _taint(run)
    for m in msgs:
        if m["message_id"] == "M-6":
            m["type"] = "review_decision"
    assert _untrusted(DoctoredAll(run, messages=msgs)) == []


def test_two_payloads_under_a_key_of_the_conversation_itself_taint_no_task(run):
    # a message whose task is its conversation (a fence, its acks) is not a task's intent
    assert _untrusted(DoctoredAll(run, messages=_taint(run, trace_id="T-1"))) == []


# ---------------------------------------------------------------------------- RESEND_DEDUPLICATED on doctored logs


@pytest.fixture(scope="module")
def resent():
    store = run_scenario(load_scenario("publish-report"), faults=["resend"])
    yield store
    store.close()


def _resend(store) -> list[dict]:
    return _only(store, "RESEND_DEDUPLICATED")


def _fault(store):
    return next(e for e in store.events() if e["type"] == "fault_injected" and e["data"].get("fault") == "resend")


def _decide(store, message_id, decision, dels=None):
    dels = copy.deepcopy(store.deliveries()) if dels is None else dels
    next(d for d in dels if d["message_id"] == message_id)["decision"] = decision
    return dels


def test_the_untouched_resend_is_recorded_duplicate(resent):
    assert _resend(resent) == []


@pytest.mark.parametrize("decision", ["accepted", "late"])
def test_a_resend_recorded_anything_but_duplicate_is_named_with_both_keys(resent, decision):
    f = _fault(resent)
    orig, copy_id = f["message_id"], f["data"]["resend"]
    dels = _decide(resent, copy_id, decision)
    d = next(x for x in dels if x["message_id"] == copy_id)
    key = resent.message_by_id(orig)["idempotency_key"]
    assert _resend(Doctored(resent, deliveries=dels)) == [{
        "problem": f"a resend of one intent was recorded {decision}, not duplicate", "task_id": f["task_id"],
        "message_id": copy_id, "original_message_id": orig, "original_decision": "accepted", "original_key": key,
        "resend_key": key, "resend_decision": decision, "resend_code": d["code"], "delivery_id": d["delivery_id"]}]


def test_a_resend_of_a_refused_original_repeats_nothing(resent):
    f = _fault(resent)
    dels = _decide(resent, f["data"]["resend"], "accepted", _decide(resent, f["message_id"], "rejected"))
    assert _resend(Doctored(resent, deliveries=dels)) == []


def test_a_resend_that_reached_intake_before_its_original_repeats_nothing(resent):
    f = _fault(resent)
    dels = _decide(resent, f["data"]["resend"], "accepted")
    next(d for d in dels if d["message_id"] == f["message_id"])["delivery_id"] = 999
    assert _resend(Doctored(resent, deliveries=dels)) == []


def test_a_resend_that_was_never_delivered_is_not_judged(resent):
    f = _fault(resent)
    dels = [d for d in resent.deliveries() if d["message_id"] != f["data"]["resend"]]
    assert _resend(Doctored(resent, deliveries=dels)) == []
    dels = [d for d in resent.deliveries() if d["message_id"] != f["message_id"]]
    assert _resend(Doctored(resent, deliveries=_decide(resent, f["data"]["resend"], "accepted", dels))) == []


def test_the_first_delivery_of_each_message_is_the_one_judged(resent):
    f = _fault(resent)
    dels = copy.deepcopy(resent.deliveries())
    orig = next(d for d in dels if d["message_id"] == f["message_id"])
    copy_d = next(d for d in dels if d["message_id"] == f["data"]["resend"])
    # a later redelivery of the original refused, and a later redelivery of the copy duplicate: neither counts
    dels.append(dict(orig, delivery_id=900, decision="rejected"))
    copy_d["decision"] = "accepted"
    dels.append(dict(copy_d, delivery_id=901, decision="duplicate"))
    got = _resend(Doctored(resent, deliveries=dels))
    assert [(w["original_decision"], w["resend_decision"], w["delivery_id"]) for w in got] == [
        ("accepted", "accepted", copy_d["delivery_id"])]


def test_a_fault_that_is_not_a_resend_or_names_no_copy_is_not_judged(resent):
    f = _fault(resent)
    dels = _decide(resent, f["data"]["resend"], "accepted")
    for change in ({"fault": "duplicate"}, {"resend": None}):
        events = _editable(resent.events())
        e = next(x for x in events if x["seq"] == f["seq"])
        e["data"].update(change)
        assert _resend(Doctored(resent, events=events, deliveries=dels)) == []


def test_every_resend_recorded_wrong_is_named_not_only_the_first(resent):
    f = _fault(resent)
    events = _editable(resent.events())
    i = next(i for i, x in enumerate(events) if x["seq"] == f["seq"])
    events.insert(i + 1, dict(copy.deepcopy(events[i]), seq=f["seq"] + 0.5))
    dels = _decide(resent, f["data"]["resend"], "late")
    assert len(_resend(Doctored(resent, events=events, deliveries=dels))) == 2


# ---------------------------------------------------------------------------- a judge that stops early
# Each judge walks a whole log; one that stopped at the first row it skips (a rejected delivery, a
# resend already recorded duplicate, a reused id) would miss every violation after it.


def test_evidence_is_judged_after_a_delivery_that_was_not_accepted(run):
    dels = copy.deepcopy(run.deliveries())
    dels[0]["decision"] = "duplicate"  # skipped: only accepted deliveries must cite resolvable evidence
    msgs = _with_refs(run, **{"M-6": ["M-404"]})
    got = _only(DoctoredAll(run, deliveries=dels, messages=msgs), "EVIDENCE_RESOLVES")
    assert [(w["message_id"], w["ref"]) for w in got] == [("M-6", "M-404")]


def test_a_conflict_is_judged_after_a_rejected_delivery():
    store = run_scenario(load_scenario("publish-report"), policy="naive", faults=["conflicting-digest"])
    try:
        dels = copy.deepcopy(store.deliveries())
        whole = _only(store, "CONFLICT_FROZEN")
        assert whole  # naive never freezes
        first = dels[0]
        assert first["message_id"] != whole[0]["second"]["message_id"]
        first["decision"] = "rejected"
        assert _only(Doctored(store, deliveries=dels), "CONFLICT_FROZEN") == whole
    finally:
        store.close()


def test_a_wrong_resend_is_named_after_a_resend_recorded_right(resent):
    f = _fault(resent)
    events = _editable(resent.events())
    i = next(i for i, x in enumerate(events) if x["seq"] == f["seq"])
    a2 = next(d for d in resent.deliveries() if d["message_id"] == "A-2")  # accepted, after M-3
    wrong = dict(copy.deepcopy(events[i]), seq=f["seq"] + 0.5, task_id="T-1", message_id="M-3",
                 data={"fault": "resend", "resend": "A-2"})
    events.insert(i + 1, wrong)
    got = _resend(Doctored(resent, events=events))
    assert [(w["message_id"], w["original_message_id"], w["resend_decision"]) for w in got] == [
        ("A-2", "M-3", a2["decision"])]


def test_the_clock_is_judged_after_a_reused_delivery_id(run):
    dels = copy.deepcopy(run.deliveries())
    dels.insert(2, dict(dels[1], message_id="M-twin"))  # id 2 used twice
    for d in dels[6:]:
        d["delivery_id"] += 1  # and an id skipped later on
    events = _editable(run.events())
    for e in events:
        if e["delivery_id"] is not None and e["delivery_id"] >= 6:
            e["delivery_id"] += 1
    problems = [w["problem"] for w in _clock(Doctored(run, events=events, deliveries=dels))]
    assert problems == ["a delivery id is used twice", "delivery ids skip"]
