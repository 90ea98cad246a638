"""One contract, two stores: the SQLite store (:class:`sim.store.Store`) and the in-memory model
(:class:`sim.model.Model`) fold every event through the same pure folds (:mod:`sim.folds`) and must
leave the same rows, raise the same error when a compare-and-swap loses, and answer the same reads.
An event type declared as changing state without its fold fails at import, for both."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from sim import events as ev_
from sim.errors import StaleWrite
from sim.folds import FOLDS, folds_for
from sim.model import Model, agreement, rows_of
from sim.store import Store

START = "2026-07-13T04:00:00Z"
TRANSITION = dict(reason="r", executor="manager", role="manager", machine_version="task-v1")


def _store() -> Store:
    return Store.memory(start_time=START)


def _model() -> Model:
    return Model(start_time=START)


IMPLEMENTATIONS = {"sqlite": _store, "model": _model}


@pytest.fixture(params=sorted(IMPLEMENTATIONS))
def store(request):
    s = IMPLEMENTATIONS[request.param]()
    yield s
    s.close()


def _append(store, event, task="T-1", message="M-1", *, tick=None):
    with store.transaction():
        store.advance(to=tick)
        store.append_event(event.draft(task, message))


#: One run's worth of events that touches every event type that changes state (some twice, the
#: second time on the path a first one leaves: an intent recorded again, an artifact stored again).
def _history():
    return [
        (ev_.TaskCreated(trace_id="R-1", goal="publish", budget=5, machine_version="task-v1"), "T-1", "M-1"),
        (ev_.TaskCreated(trace_id="R-1", goal="review", budget=2, machine_version="task-v1"), "T-2", "M-2"),
        (ev_.TransitionApplied(from_state="pending", to="ready", from_version=0, assignee="worker-1",
                               **TRANSITION), "T-1", "M-3"),
        (ev_.LeaseGranted(holder="worker-1", lease_version=1), "T-1", "M-3"),
        (ev_.BudgetCharged(amount=2, reason="tool call"), "T-1", "M-3"),
        (ev_.IntentRecorded(key="k-1", digest="sha256:aa", scheme="json-sorted-v1", arrival=1, decision="accepted",
                            payload={"b": [1, 2], "a": "x"}, result={"ok": True}), "T-1", "M-4"),
        (ev_.IntentRecorded(key="k-1", digest="sha256:aa", scheme="json-sorted-v1", arrival=1, decision="accepted",
                            payload={"b": [1, 2], "a": "x"}, result={"ok": False}), "T-1", "M-5"),
        (ev_.IntentRecorded(key="k-2", digest="sha256:ee", scheme="json-sorted-v1", arrival=2, decision="accepted",
                            payload={"c": 1}, result=None), "T-1", "M-5b"),
        (ev_.DuplicateRecorded(key="k-1", digest="sha256:aa", scheme="json-sorted-v1", first_message_id="M-4",
                               reused=True), "T-1", "M-6"),
        (ev_.IntentRecorded(key="k-1", digest="sha256:bb", scheme="json-sorted-v1", arrival=3, decision="conflict",
                            payload={"a": "y"}, result=None), "T-1", "M-7"),
        (ev_.ConflictRecorded(key="k-1", first="sha256:aa", second="sha256:bb", state_version=1), "T-1", "M-7"),
        (ev_.LateRecorded(type_="result", state="ready", reason="after its lease"), "T-1", "M-8"),
        (ev_.TransitionRejected(code="E_TRANSITION", reason="no rule", type_="claim", sender="w", from_state="ready",
                                proposed="done", task_id="T-1"), "T-1", "M-9"),
        (ev_.TransitionRejected(code="E_TRANSITION", reason="no task", type_="claim", sender="w", from_state=None,
                                proposed="done", task_id=None), None, "M-10"),
        (ev_.LeaseExpired(holder="worker-1", lease_version=1), "T-1", None),
        (ev_.ArtifactStored(ref="sha256:cc", scheme="sha256", kind="draft", size=3, content={"text": "abc"}), "T-1", "M-11"),
        (ev_.ArtifactStored(ref="sha256:cc", scheme="sha256", kind="draft", size=3, content={"text": "abc"}), "T-2", "M-12"),
        (ev_.TransitionApplied(from_state="ready", to="needs_review", from_version=1, assignee=None,
                               **TRANSITION), "T-1", "M-13"),
        (ev_.ReviewDecided(decision="ready", reviewer="reviewer", evidence=["M-4", "M-7"]), "T-1", "RV-1"),
        (ev_.TransitionApplied(from_state="needs_review", to="ready", from_version=2, assignee=None,
                               **TRANSITION), "T-1", "RV-1"),
        (ev_.EffectCommitted(effect_key="publish:R-1:T-1", kind="publish", target="report",
                             result_digest="sha256:dd"), "T-1", "M-14"),
        (ev_.ReconciliationResolved(of="M-14", decision="retract", reviewer="reviewer", evidence=["L-1"],
                                    effects=["publish:R-1:T-1"]), "T-1", "REC-1"),
    ]


def _fold_history(store):
    for tick, (event, task, message) in enumerate(_history(), start=1):
        _append(store, event, task, message, tick=tick)


def test_the_history_covers_every_event_type_that_changes_state(store):
    # (both start with the default machine loaded by its event: the history adds every other type)
    assert [e.type for e in store.events()] == ["machine_loaded"]
    assert {event.TYPE for event, _, _ in _history()} | {"machine_loaded"} == set(FOLDS)


def test_the_same_events_fold_to_the_same_rows_in_both():
    store, model = _store(), _model()
    _fold_history(store)
    _fold_history(model)
    assert agreement(model, store) == []
    # and the rows are the ones the folds say (not merely the same mistake twice)
    t1 = next(t for t in store.tasks() if t["task_id"] == "T-1")
    assert (t1["state"], t1["state_version"], t1["assignee"], t1["trusted"], t1["lease_holder"], t1["budget_left"],
            t1["late_results"], t1["rejected"]) == ("ready", 3, "worker-1", 1, None, 3, 1, 1)
    intents = rows_of(model, "intents")
    assert [(i["payload_digest"], i["seen"], i["trusted"], i["message_id"], i["result"]) for i in intents] == [
        ("sha256:aa", 3, 0, "M-5", {"ok": False}), ("sha256:ee", 1, 1, "M-5b", None), ("sha256:bb", 1, 0, "M-7", None)]
    # (the conflict distrusts its key's intents, not the task's others)
    assert [a["task_id"] for a in rows_of(model, "artifacts")] == ["T-1"]  # stored once, the first owner kept
    assert [a["decision"] for a in rows_of(store, "approvals")] == ["ready", "reconcile:retract"]
    assert [b["delta"] for b in rows_of(store, "budget")] == [5, 2, -2]
    store.close()


def test_a_lost_compare_and_swap_raises_stale_write_and_changes_nothing(store):
    _append(store, ev_.TaskCreated(trace_id="R-1", goal="g", budget=1, machine_version="task-v1"), tick=1)
    before = rows_of(store, "tasks"), rows_of(store, "transitions")
    with pytest.raises(StaleWrite) as e:
        _append(store, ev_.TransitionApplied(from_state="pending", to="ready", from_version=1, assignee="w",
                                             **TRANSITION), tick=2)
    assert e.value.code == "E_STALE_WRITE"
    assert e.value.message == "task T-1 is no longer pending at state_version 1; reread and retry"
    assert e.value.context == {"task_id": "T-1"}
    assert (rows_of(store, "tasks"), rows_of(store, "transitions")) == before


def test_a_transition_of_a_task_that_does_not_exist_is_a_stale_write(store):
    with pytest.raises(StaleWrite):
        _append(store, ev_.TransitionApplied(from_state="pending", to="ready", from_version=0, assignee="w",
                                             **TRANSITION), task="T-9", tick=1)


def test_the_model_refuses_to_go_on_after_a_lost_compare_and_swap():
    # the model cannot roll back half a delivery: the runtime's retry is refused, not run on it
    model = _model()
    _append(model, ev_.TaskCreated(trace_id="R-1", goal="g", budget=1, machine_version="task-v1"), tick=1)
    with pytest.raises(StaleWrite):
        _append(model, ev_.TransitionApplied(from_state="ready", to="running", from_version=0, assignee=None,
                                             **TRANSITION), tick=2)
    with pytest.raises(AssertionError, match="compare-and-swap lost earlier"):
        with model.transaction():
            pass


def test_an_effect_committed_twice_is_refused_by_both(store):
    effect = ev_.EffectCommitted(effect_key="publish:R-1:T-1", kind="publish", target="report", result_digest="d")
    _append(store, effect, tick=1)
    with pytest.raises(Exception) as e:
        _append(store, effect, message="M-2", tick=2)
    assert getattr(e.value, "code", None) == "E_DB_CONSTRAINT"
    assert len(rows_of(store, "effects")) == 1


def test_the_reads_agree():
    store, model = _store(), _model()
    _fold_history(store)
    _fold_history(model)
    for s in (store, model):
        assert s.current_machine == "task-v1" and s.machine_versions() == ["task-v1"]
    assert store.next_arrival() == model.next_arrival() == 4
    for task in ("T-1", "T-2", "T-9"):
        assert store.get_task(task) == model.get_task(task)
        assert store.intents_for(task, "k-1") == model.intents_for(task, "k-1")
        assert store.task_trace(task) == model.task_trace(task)
        assert rows_of_effects(store, task) == rows_of_effects(model, task)
    assert store.artifact("sha256:cc") == model.artifact("sha256:cc")
    assert store.committed_among(["publish:R-1:T-1", "publish:R-1:T-2"]) == \
        model.committed_among(["publish:R-1:T-1", "publish:R-1:T-2"]) == frozenset({"publish:R-1:T-1"})
    assert store.untrusted_inputs(["sha256:cc"], besides="T-2") == model.untrusted_inputs(["sha256:cc"], besides="T-2")
    assert store.get_task("T-1").trusted is True and store.get_task("T-1").has_effects is True
    store.close()


def rows_of_effects(store, task):
    return [dict(e) for e in store.effects_of(task)]


# ------------------------------------------------------------------ a type without its fold


class _Fake:
    def __init__(self, changes_state: bool):
        self.CHANGES_STATE = changes_state


def test_a_type_that_changes_state_without_a_fold_is_refused_by_name():
    registry = {"task_created": _Fake(True), "shiny_new_thing": _Fake(True), "ack_recorded": _Fake(False)}
    with pytest.raises(TypeError, match="without a fold in sim/folds.py: shiny_new_thing"):
        folds_for(registry, {"fold_task_created": lambda *a: ()})
    with pytest.raises(TypeError, match="folds of no event type that changes state: fold_ack_recorded"):
        folds_for({"ack_recorded": _Fake(False)}, {"fold_ack_recorded": lambda *a: ()})
    assert set(folds_for({"task_created": _Fake(True), "ack_recorded": _Fake(False)},
                         {"fold_task_created": lambda *a: ()})) == {"task_created"}


@pytest.mark.parametrize("module", ["sim.store", "sim.model"])
def test_an_event_type_declared_without_its_fold_fails_at_import(module):
    # a new event type that says it changes state, declared before either store is imported
    code = textwrap.dedent(f"""
        from dataclasses import dataclass
        from sim import events

        @dataclass(frozen=True)
        class Shiny(events.Event):
            TYPE = "shiny_recorded"
            FOLDS = "tasks.shine rises"
            CHANGES_STATE = True
            STYLE = "yellow"

        import {module}
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode != 0
    assert "TypeError: event types that change state without a fold in sim/folds.py: shiny_recorded" in out.stderr


# ------------------------------------------------------------------ one interface


def test_both_implement_the_one_store_interface_with_the_same_parameters():
    import inspect

    from sim import store_api

    for make in IMPLEMENTATIONS.values():
        s = make()
        assert isinstance(s, store_api.Store)
        cls = type(s)
        for name in store_api.MEMBERS:
            spec, ours = getattr(store_api.Store, name), getattr(cls, name)
            if isinstance(spec, property):
                assert isinstance(ours, property), (cls.__name__, name)
                continue
            want = [(p.name, p.kind) for p in inspect.signature(spec).parameters.values()]
            got = [(p.name, p.kind) for p in inspect.signature(ours).parameters.values()]
            assert got == want, (cls.__name__, name)
        s.close()
    assert len(store_api.MEMBERS) >= 50


def test_a_member_the_model_lacks_fails_the_interface():
    from sim import store_api

    class Partial(Model):
        append_events = None  # (a member set to None: not implemented)

    assert isinstance(Model(), store_api.Store)
    assert not isinstance(Partial(), store_api.Store)
