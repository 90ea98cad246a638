import pytest

from sim import samples
from sim.errors import InputError, MachineError
from sim.machine import A2A_STATE, TERMINAL, TaskState, default_rulebook, load_rulebook, parse_rulebook
from sim.resources import shipped
from sim.runtime import deliver

SEED_MOVES = [
    ("pending", "ready"), ("ready", "running"), ("running", "succeeded"), ("running", "retry_wait"),
    ("retry_wait", "ready"), ("running", "failed"), ("running", "denied"), ("running", "waiting_human"),
    ("needs_review", "ready"), ("needs_review", "canceled"),
]


def test_the_ten_states_of_the_seed_exist_and_four_are_terminal():
    assert {s.value for s in TaskState} == {
        "pending", "ready", "running", "retry_wait", "succeeded", "failed", "denied", "waiting_human",
        "needs_review", "canceled",
    }
    assert {s.value for s in TERMINAL} == {"succeeded", "failed", "denied", "canceled"}


@pytest.mark.parametrize("move", SEED_MOVES, ids=lambda m: f"{m[0]}->{m[1]}")
def test_every_move_the_seed_draws_is_in_the_default_allowlist(move):
    assert default_rulebook().find(TaskState(move[0]), TaskState(move[1])) is not None


def test_any_state_may_be_frozen_for_review_but_only_by_the_runtime():
    rb = default_rulebook()
    for s in TaskState:
        if s is TaskState.NEEDS_REVIEW:
            continue
        assert rb.allows(s, TaskState.NEEDS_REVIEW, "runtime")
        for role in ("manager", "researcher", "writer", "reviewer"):
            assert not rb.allows(s, TaskState.NEEDS_REVIEW, role)


def test_only_a_reviewer_may_release_or_cancel_a_frozen_task():
    rb = default_rulebook()
    for to in (TaskState.READY, TaskState.CANCELED):
        assert rb.find(TaskState.NEEDS_REVIEW, to).roles == ("reviewer",)


def test_every_nonterminal_state_may_be_canceled_and_no_terminal_state_may():
    rb = default_rulebook()
    for s in TaskState:
        if s in TERMINAL or s is TaskState.CANCELED:
            assert rb.find(s, TaskState.CANCELED) is None
        else:
            assert rb.find(s, TaskState.CANCELED) is not None


def test_no_rule_leaves_a_terminal_state_except_to_needs_review():
    for r in default_rulebook().rules:
        if r.from_state in TERMINAL:
            assert r.to_state is TaskState.NEEDS_REVIEW


def test_a_machine_file_that_lets_a_late_failure_overwrite_success_is_refused():
    data = {"version": "bad", "rule": [{"from": "succeeded", "to": "failed", "roles": ["researcher"], "reason": "x"}]}
    with pytest.raises(MachineError) as e:
        parse_rulebook(data)
    assert e.value.code == "E_TERMINAL_EXIT"


@pytest.mark.parametrize(
    "rule, code",
    [
        ({"from": "runing", "to": "ready", "roles": ["manager"], "reason": "x"}, "E_UNKNOWN_STATE"),
        ({"from": "running", "to": "done", "roles": ["manager"], "reason": "x"}, "E_UNKNOWN_STATE"),
        ({"from": "running", "to": "ready", "roles": ["boss"], "reason": "x"}, "E_UNKNOWN_ROLE"),
        ({"from": "running", "to": "ready", "roles": "manager", "reason": "x"}, "E_FIELD_TYPE"),
        ({"from": "running", "to": "ready", "reason": "x"}, "E_MISSING_FIELD"),
        ({"from": "running", "to": "ready", "roles": ["manager"], "reason": "x", "when": "always"}, "E_MACHINE"),
    ],
)
def test_a_malformed_rule_is_refused_with_its_code(rule, code):
    with pytest.raises(InputError) as e:
        parse_rulebook({"version": "v", "rule": [rule]})
    assert e.value.code == code


def test_malformed_toml_is_refused(tmp_path):
    p = tmp_path / "m.toml"
    p.write_text("version = \n[[rule]")
    with pytest.raises(MachineError) as e:
        load_rulebook(p)
    assert e.value.code == "E_TOML"


def test_every_state_maps_to_an_a2a_v1_task_state():
    allowed = {
        "TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED", "TASK_STATE_FAILED",
        "TASK_STATE_CANCELED", "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_REJECTED", "TASK_STATE_AUTH_REQUIRED",
    }
    assert set(A2A_STATE) == set(TaskState)
    assert set(A2A_STATE.values()) <= allowed
    assert A2A_STATE[TaskState.SUCCEEDED] == "TASK_STATE_COMPLETED"
    assert A2A_STATE[TaskState.DENIED] == "TASK_STATE_REJECTED"


def test_a_new_machine_version_applies_to_new_tasks_while_old_tasks_keep_theirs(store):
    deliver(store, samples.m1())
    v2 = load_rulebook(shipped("data", "machines", "task-v2.toml"))
    with store.transaction():
        store.advance()
        store.load_machine(v2)
    from sim.envelope import build_envelope

    env = build_envelope(
        message_id="M-9", trace_id="R-1", task_id="T-9", sender="manager", recipient="writer", type="task_request",
        payload={"goal": "g"}, idempotency_key="k9", created_at="2026-07-13T04:00:09Z",
    )
    deliver(store, env)
    versions = {t["task_id"]: t["machine_version"] for t in store.tasks()}
    assert versions == {"T-1": "task-v1", "T-9": "task-v2"}
    # and every transitions row names the version it was judged under
    assert {(r["task_id"], r["machine_version"]) for r in store.transitions()} == {("T-1", "task-v1"), ("T-9", "task-v2")}


def test_a_task_keeps_being_judged_by_its_own_machine_version(store):
    """task-v2 lets a worker resume waiting_human -> running; a task-v1 task still may not."""
    from sim.envelope import build_envelope

    def env(mid, task, sender, recipient, typ, payload, key):
        return build_envelope(message_id=mid, trace_id="R", task_id=task, sender=sender, recipient=recipient,
                              type=typ, payload=payload, idempotency_key=key, created_at="2026-07-13T04:00:00Z")

    def to_waiting(task):
        deliver(store, env(f"{task}-1", task, "manager", "researcher", "task_request", {"goal": "g"}, f"{task}:r"))
        deliver(store, env(f"{task}-2", task, "researcher", "manager", "task_started", {}, f"{task}:s"))
        deliver(store, env(f"{task}-3", task, "researcher", "manager", "task_result",
                           {"status": "waiting_human", "lease_version": 1}, f"{task}:w"))

    to_waiting("T-old")
    with store.transaction():
        store.advance()
        store.load_machine(load_rulebook(shipped("data", "machines", "task-v2.toml")))
    to_waiting("T-new")
    old = deliver(store, env("T-old-4", "T-old", "researcher", "manager", "task_started", {}, "T-old:resume"))
    new = deliver(store, env("T-new-4", "T-new", "researcher", "manager", "task_started", {}, "T-new:resume"))
    assert (old.decision, old.code) == ("rejected", "E_TRANSITION_NOT_ALLOWED")
    assert (new.decision, new.state) == ("accepted", "running")
