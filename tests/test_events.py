"""The event vocabulary (sim/events.py) and the one-shape registries: one declaration per event type, used by the runtime,
folded by the store, rendered the same by the CLI and the TUI."""

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim import events as ev_
from sim.digest import sorted_dumps
from sim.events import REGISTRY, EventDraft, summarize
from sim.runner import run_scenario
from sim.scenario import load_scenario
from sim.store import EVENT_TYPES, Store

# Runs that between them produce every event type the simulator makes.
RUNS = [
    ("publish-report", 0, "safe", ()),
    ("publish-report", 3, "safe", ("crash",)),
    ("publish-report", 2, "safe", ("late-conflict", "resend", "duplicate")),
    ("publish-report", 2, "naive", ("late-failure", "conflicting-digest")),
    ("publish-report", 4, "safe", ("lost-evidence",)),
    ("publish-report", 0, "safe", ("tool-failure",)),
    ("publish-report", 1, "safe", ("conflicting-digest",)),
    ("fan-out", 1, "safe", ("conflicting-digest", "late-failure")),
    ("gathers", 0, "naive", ("delay:M-22",)),
]


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    out = []
    for scenario, seed, policy, faults in RUNS:
        path = tmp_path_factory.mktemp("ev") / f"{scenario}-{seed}-{policy}.db"
        run_scenario(load_scenario(scenario), seed=seed, policy=policy, faults=list(faults), db=str(path)).close()
        out.append(Store.open(path))
    yield out
    for s in out:
        s.close()


def _events(stores):
    for s in stores:
        yield from s.events()


def test_every_event_a_run_appends_is_declared_and_reads_back_to_the_same_data(stores):
    seen = set()
    for e in _events(stores):
        cls = REGISTRY.get(e["type"])
        assert cls is not None, f"{e['type']} is appended but not declared in sim/events.py"
        seen.add(e["type"])
        assert cls.from_data(e["data"]).data() == e["data"], e["type"]
    # the runs above reach most of the vocabulary: the rest comes from reviews and the transport
    assert len(seen) >= 15, sorted(set(REGISTRY) - seen)


def test_the_store_lists_every_declared_type_with_what_folding_it_changes():
    assert set(EVENT_TYPES) == set(REGISTRY)
    assert all(EVENT_TYPES[t] == cls.FOLDS and cls.FOLDS for t, cls in REGISTRY.items())


def test_every_type_that_changes_state_has_a_fold_and_every_other_type_changes_nothing():
    from sim import store as store_mod

    changing = {t for t, cls in REGISTRY.items() if cls.CHANGES_STATE}
    assert set(store_mod._FOLDS) == changing
    from sim import folds

    for t in changing:
        assert store_mod._FOLDS[t] is getattr(folds, f"fold_{t}")
    # a type that says it changes nothing leaves every state table as it was
    s = Store.memory()
    before = s.state_digest()
    samples = {
        "ack_recorded": {"of": "M-1", "from": "writer"},
        "effect_suppressed": {"effect_key": "publish:R-1:T-2"},
        "effect_withheld": {"effect_key": "publish:R-1:T-2", "reason": "the result is marked partial"},
        "reconciliation_required": {"effects": ["publish:R-1:T-2"], "status": "failed"},
        "input_untrusted": {"refs": ["T-1"], "effect_key": "publish:R-1:T-2"},
        "evidence_unresolved": {"refs": ["sha256:" + "0" * 64]},
        "fault_injected": {"fault": "drop", "selector": "M-3"},
        "message_sent_again": {"sender": "researcher", "seq": 2, "generation": 1, "waiting": ["M-4"]},
        "message_copy_dropped": {"sender": "researcher"},
        "agent_output_refused": {"agent": "researcher", "generation": 1, "code": "E_WIRE_NOT_JSON", "reason": "r",
                                 "line": "hello"},
        "agent_stopped": {"agent": "researcher", "generation": 1, "code": "E_AGENT_EXITED", "reason": "r"},
        "fence_recorded": {"to": ["writer"], "terminal": "COMPLETED"},
        "task_started": {"worker": "researcher", "lease_version": 1},
        "tool_failed": {"tool": "web-search", "status": "retry", "error": "web-search failed"},
        "digest_scheme_assumed": {"scheme": "json-sorted-v1"},
        "version_negotiated": {"sender": "writer", "offered": ["1.0", "1.1"], "reads": ["1.0", "1.1"], "chosen": "1.1"},
        "gather_reduced": {"gather": "g", "rule": "QUORUM", "status": "complete", "value": "reject",
                           "dissent": [], "contributions": [], "reducer": "declared", "reason": "r", "threshold": 2},
    }
    assert set(samples) == set(REGISTRY) - changing
    with s.transaction():
        for t, d in samples.items():
            s.append_event(EventDraft(t, None, None, d))
    assert s.state_digest() == before


def test_an_event_type_declared_twice_is_refused():
    with pytest.raises(ValueError, match="declared twice"):

        @dataclasses.dataclass(frozen=True)
        class Again(ev_.Event):
            TYPE = "lease_granted"


def test_the_cli_and_the_tui_show_the_same_line_for_every_event(stores, tmp_path):
    from typer.testing import CliRunner

    from sim.cli import app
    from sim.tui.rows import event_row

    s = stores[3]  # naive, a late failure and a conflict
    rows = {e["seq"]: e for e in s.events()}
    out = CliRunner().invoke(app, ["events", "--db", s.path, "--json"])
    assert out.exit_code == 0, out.output
    listed = json.loads(out.output)
    assert len(listed) == len(rows)
    for item in listed:
        e = rows[item["seq"]]
        line = summarize(e["type"], e["data"])
        assert line and "None" not in line, (e["type"], line)
        assert line in event_row(e).plain
    wide = CliRunner().invoke(app, ["events", "--db", s.path], env={"COLUMNS": "400"})
    for e in rows.values():
        assert summarize(e["type"], e["data"]) in wide.output


def test_each_line_says_what_happened_in_words_a_student_can_check():
    applied = ev_.TransitionApplied(from_state="ready", to="running", from_version=3, reason="start",
                                    executor="researcher-1", role="worker", machine_version="task-v1")
    assert summarize("transition_applied", applied.data()) == "ready → running (v3→v4) by researcher-1 (start)"
    conflict = ev_.ConflictRecorded(key="k1", first={"message_id": "M-3", "digest": "sha256:aaaa"},
                                    second={"message_id": "M-3-c", "digest": "sha256:bbbb"})
    line = summarize("conflict_recorded", conflict.data())
    assert "M-3" in line and "M-3-c" in line and "frozen" in line and "untrusted" in line
    assert summarize("late_recorded", {"type": "task_result", "status": "failed", "state": "succeeded",
                                       "reason": "x"}) == "task_result (failed) after the task was succeeded: state unchanged"
    # an unknown type (a newer run's) still reads as its data, not as nothing
    assert "x" in summarize("something_new", {"x": 1})


def test_the_stored_data_keeps_the_words_the_database_has_always_used():
    d = ev_.TransitionApplied(from_state="a", to="b", from_version=0, reason="r", executor="e", role="w",
                              machine_version="m").data()
    assert "from" in d and "from_state" not in d
    assert ev_.AckRecorded(of="M-1", from_sender="writer").data() == {"of": "M-1", "from": "writer"}
    # an optional field an older event never had is left out, not written as null
    assert "input" not in ev_.ReconciliationRequired(effects=["e"], status="failed").data()
    # the transport's details are stored beside the fault's name, as before
    assert ev_.FaultInjected(fault="crash", detail={"worker": "w1"}).data() == {"fault": "crash", "worker": "w1"}


def test_invariants_are_one_registry_and_a_name_cannot_be_declared_twice():
    from sim import invariants

    assert invariants.INVARIANTS == tuple(invariants.REGISTRY)
    assert all(invariants.DESCRIPTIONS[n] == inv.description and inv.description for n, inv in invariants.REGISTRY.items())
    with pytest.raises(ValueError, match="declared twice"):
        invariants.invariant("NO_LOST_UPDATE", short="again", description="again",
                             broken_by=("publish-report", "reorder"))(lambda run: [])
    # each says which naive run breaks it (the naive matrix runs it), or why none can
    with pytest.raises(ValueError, match="broken_by"):
        invariants.invariant("NEW_ONE", short="new1", description="x")
    # each declares its grid label, unique and short; the grader's grid reads them from here
    from sim.course.grade import SHORT

    shorts = [inv.short for inv in invariants.REGISTRY.values()]
    assert all(1 <= len(s) <= 5 for s in shorts) and len(set(shorts)) == len(shorts)
    assert dict(SHORT) == {n: inv.short for n, inv in invariants.REGISTRY.items()}
    with pytest.raises(ValueError, match="unique"):
        invariants.invariant("NEW_ONE", short="regr", description="x")


def test_faults_are_one_registry_that_every_list_is_read_from():
    from sim import faults, live
    from sim.tui.app import RunScreen

    assert faults.FAULTS == tuple(faults.REGISTRY)
    assert all(f.what and f.default_target and callable(f.apply) for f in faults.REGISTRY.values())
    assert live.INJECTABLE is faults.INJECTABLE
    assert set(faults.INJECTABLE) == {"duplicate", "conflicting-digest", "late-failure", "resend"}
    # every fault key of the TUI injects a fault the transport can inject by hand
    keyed = [b.action for b in RunScreen.BINDINGS if b.action.startswith("app.inject(")]
    assert keyed and all(a.split("'")[1] in faults.INJECTABLE for a in keyed)
    with pytest.raises(ValueError, match="declared twice"):
        faults.fault("drop", "again", default_target="x", default_match=lambda env: False)(lambda bus, spec, s: None)


def test_the_colours_of_states_and_decisions_live_once_and_cover_every_value():
    from sim import palette
    from sim import views as cli  # the inspect commands' bodies (state, messages, events) live in sim/views.py
    from sim.intake import Decision
    from sim.machine import TaskState
    from sim.tui import rows, screens

    assert set(palette.STATE_STYLE) == {s.value for s in TaskState}
    assert set(palette.DECISION_STYLE) == {d.value for d in Decision}
    assert cli._STATE_STYLE is rows.STATE_STYLE is palette.STATE_STYLE
    assert cli._DECISION_STYLE is rows.DECISION_STYLE is screens.DECISION_STYLE is palette.DECISION_STYLE


def test_an_event_cannot_be_built_without_its_required_fields():
    import dataclasses
    import typing

    from sim.events import REGISTRY, TransitionApplied

    with pytest.raises(TypeError, match="missing"):
        TransitionApplied(from_state="ready")
    # a field whose type does not admit None has no default: building the event without it fails
    loose = []
    for etype, cls in REGISTRY.items():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            allows_none = "None" in str(hints[f.name]) or "Optional" in str(hints[f.name]) or hints[f.name] is typing.Any
            if f.default is None and not allows_none:
                loose.append(f"{etype}.{f.name}")
    assert loose == []


def test_the_store_hands_out_each_event_typed_and_read_only(stores):
    from sim.events import StoredEvent

    s = stores[3]
    rows = s.events()
    assert rows and all(isinstance(e, StoredEvent) for e in rows)
    # every read of the log gives the same typed rows
    assert list(s.iter_events(batch=7)) == rows
    assert s.events_at([e.seq for e in rows]) == rows and s.event(rows[5].seq) == rows[5]
    for e in rows:
        typed = e.event
        assert type(typed) is REGISTRY[e.type] and typed.data() == e.data  # the class, from the registry
        assert e.draft().event() == typed  # what replay appends again is the same event
    moves = s.events_of_type(ev_.TransitionApplied.TYPE)
    assert moves and all(isinstance(e.event, ev_.TransitionApplied) and e.event.to for e in moves)
    e = rows[0]
    with pytest.raises(AttributeError, match="read-only"):
        e.tick = 99
    with pytest.raises(TypeError):
        e["tick"] = 99  # type: ignore[index]
    # a row is a mapping of the log's columns: what a table or JSON shows
    assert set(dict(e)) == {"seq", "tick", "created_at", "type", "task_id", "message_id", "delivery_id", "data"}
    assert json.loads(json.dumps(dict(e))) == dict(e)
    later = e.replace(tick=e.tick + 1)
    assert later.tick == e.tick + 1 and e.tick != later.tick and later.seq == e.seq


def test_each_fold_is_handed_the_typed_event_of_its_type():
    import typing

    from sim.store import _FOLDS

    for t, fold in _FOLDS.items():
        hints = typing.get_type_hints(fold, globalns=vars(ev_) | {"ev_": ev_})
        assert hints["e"] is REGISTRY[t], t
    # a draft built from an event carries it: the store folds that object, not a re-read of its data
    ev = ev_.LeaseGranted(holder="researcher", lease_version=1)
    assert ev.draft("T-1", None).event() is ev
    # a draft read back from a row is typed from the registry
    assert EventDraft("lease_granted", "T-1", None, {"holder": "w", "lease_version": 2}).event() == \
        ev_.LeaseGranted(holder="w", lease_version=2)


@pytest.mark.parametrize("cls", list(REGISTRY.values()), ids=list(REGISTRY))
@pytest.mark.parametrize("fill", ["values", "nones"])
def test_each_types_written_out_data_is_its_plan_read_step_by_step(cls, fill):
    """Each type's ``data`` is generated from its declaration (sim.events._data_writer); it must give the
    plan's dict exactly, keys in the same order, optional fields left out when None, REST spread in."""
    kw = {}
    for i, f in enumerate(dataclasses.fields(cls)):
        if f.name == cls.REST:
            kw[f.name] = None if fill == "nones" else {"extra": i, "more": [i]}
        else:
            kw[f.name] = None if fill == "nones" else {"n": i} if i % 3 == 0 else f"v{i}"
    e = cls(**kw)
    assert list(e.data().items()) == list(ev_.Event.data(e).items())
    assert e.data() is not e.data()  # a fresh dict each time (the caller may change it)


# ---------------------------------------------------------------- an intent's text written around its payload's

_json_scalars = st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.text(max_size=12) | st.floats(allow_nan=False)
_json_values = st.recursive(_json_scalars, lambda inner: st.lists(inner, max_size=4)
                            | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(payload=st.dictionaries(st.text(max_size=8), _json_values, max_size=5),
       key=st.text(min_size=1, max_size=20), decision=st.sampled_from(["accepted", "conflict", "late", "é\"\\\n"]),
       state=st.none() | st.sampled_from(["ready", "running", "needs_review", "ü\u2028"]),
       version=st.none() | st.integers(0, 2**40), arrival=st.integers(0, 2**40))
def test_an_intent_drafted_around_its_payload_text_is_the_draft_the_store_would_write(payload, key, decision, state,
                                                                                     version, arrival):
    """``IntentRecorded.drafted`` writes the event's stored text around the payload's: it must be exactly what
    the store writes for the plain draft (``sorted_dumps(data)``), the same draft otherwise, and hand the
    reducer the payload's and the result's stored texts."""
    e = ev_.IntentRecorded(key=key, digest="sha256:" + "0" * 64, scheme="json-sorted-v1", arrival=arrival,
                           decision=decision, payload=payload,
                           result={"decision": decision, "state": state, "state_version": version})
    plain = e.draft("T-1", "M-1")
    fast = e.drafted("T-1", "M-1", sorted_dumps(payload))
    assert fast == plain and fast.data == plain.data and fast.typed is e
    assert fast.text == sorted_dumps(plain.data)
    assert json.loads(fast.text) == json.loads(json.dumps(plain.data))
    assert e.__dict__["_payload_json"] == sorted_dumps(payload)
    assert e.__dict__["_result_json"] == sorted_dumps(e.result)


@pytest.mark.parametrize("odd", [
    {"arrival": True}, {"arrival": 1.0}, {"result": {"decision": "accepted", "state": "ready"}},
    {"result": {"decision": "accepted", "state": "ready", "state_version": True}},
    {"result": {"decision": "accepted", "state": 3, "state_version": 1}}, {"key": 7}, {"result": None},
])
def test_an_intent_of_unexpected_types_is_drafted_plainly(odd):
    """Anything the written text does not expect (a bool or float arrival, a result of other keys or types)
    gets the plain draft, whose text the store writes itself."""
    fields = {"key": "k", "digest": "sha256:" + "0" * 64, "scheme": "json-sorted-v1", "arrival": 1, "decision": "accepted",
              "payload": {"a": 1}, "result": {"decision": "accepted", "state": "ready", "state_version": 1}}
    fields.update(odd)
    e = ev_.IntentRecorded(**fields)
    d = e.drafted("T-1", "M-1", '{"a":1}')
    assert d.text is None and d == e.draft("T-1", "M-1")
    assert "_payload_json" not in e.__dict__


def test_a_delivery_writes_the_intent_text_the_plain_draft_would():
    """End to end: the intents row and the intent event of a delivery hold what the plain draft writes."""
    from sim.envelope import build_envelope
    from sim.runtime import deliver

    store = Store.memory()
    payload = {"goal": "a report on \u00e9 \"quoted\" \u2028 text", "budget": 3}
    out = deliver(store, build_envelope(message_id="M-1", trace_id="R-1", task_id="T-1", sender="manager",
                                  recipient="researcher", type="task_request", payload=payload,
                                  idempotency_key="T-1:request", created_at="2026-07-13T04:00:00Z"))
    assert out.decision == "accepted"
    row = store.conn.execute("SELECT payload, result FROM intents").fetchone()
    assert row[0] == sorted_dumps(payload)
    assert row[1] == sorted_dumps({"decision": "accepted", "state": "ready", "state_version": 1})
    raw = store.conn.execute("SELECT data FROM events WHERE type = 'intent_recorded'").fetchone()[0]
    assert raw == sorted_dumps(json.loads(raw))
