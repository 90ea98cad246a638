"""The intake contract suite (sim.contracts.intake) against the reference decide, and proof it can fail."""

from __future__ import annotations

import dataclasses

import pytest

from sim.contracts.intake import CASES, Case, check, report, run
from sim.envelope import build_envelope
from sim.intake import Decision, IntentRecord, Move, TaskView, Verdict, decide, target_state
from sim.machine import TaskState, default_rulebook

RULES = default_rulebook()


# ---------------------------------------------------------------------------
# the suite passes against the reference


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_meets_the_contract(case: Case):
    assert check(decide, case) == []


def test_run_against_reference_is_clean():
    results = run(decide)
    assert len(results) == len(CASES)
    assert all(not fails for _, fails in results), report(results)
    assert report(results).endswith(f"{len(CASES)}/{len(CASES)} intake contract cases pass")


def test_suite_shape():
    names = [c.name for c in CASES]
    assert len(CASES) >= 30
    assert len(set(names)) == len(names), "case names are test ids and must be unique"
    assert all(c.rule.strip() for c in CASES)
    assert {c.decision for c in CASES} == set(Decision)
    codes = {c.code for c in CASES if c.code}
    assert codes >= {
        "E_UNKNOWN_TASK", "E_NOT_ASSIGNEE", "E_STALE_LEASE", "E_BUDGET_EXHAUSTED", "E_NOT_LEASE_HOLDER",
        "E_TRANSITION_NOT_ALLOWED", "E_ROLE_NOT_ALLOWED", "E_EVIDENCE_REQUIRED", "E_EVIDENCE_UNRESOLVED",
        "E_STALE_VERSION",
    }
    # every result status is pinned as an accepted move from running
    statuses = {
        c.envelope.payload["status"]
        for c in CASES
        if c.envelope.type == "task_result" and c.decision == Decision.ACCEPTED
    }
    assert statuses == {"succeeded", "failed", "denied", "waiting_human", "retry"}
    # rejected cases always say which code
    assert all(c.code for c in CASES if c.decision == Decision.REJECTED)


# ---------------------------------------------------------------------------
# the suite can fail


def naive_decide(env, task, prior, rules, unresolved=frozenset()):
    """Last-write-wins: every delivery accepted, moved straight to the envelope's target, no dedup."""
    target = target_state(env)
    start = task.state if task is not None else TaskState.PENDING
    move = Move(start, target, "last write wins", env.sender, env.sender_role) if target is not None else None
    lease = (task.lease_version + 1 if task else 1) if env.type == "task_started" else None
    return Verdict(Decision.ACCEPTED, "accepted", move=move, create=task is None, grant_lease=lease)


def test_naive_last_write_wins_fails_dedup_conflict_and_late_cases():
    results = run(naive_decide)
    failed = {c.name for c, fails in results if fails}
    for wanted in (Decision.DUPLICATE, Decision.CONFLICT, Decision.LATE):
        cases = [c for c in CASES if c.decision == wanted]
        assert cases
        missed = [c.name for c in cases if c.name not in failed]
        assert not missed, f"the naive decide passes {wanted.value} cases: {missed}"
    # and it is caught on the specific complaint, not by accident
    by_name = dict((c.name, f) for c, f in results)
    dup = by_name["same key and same digest is a duplicate that reuses the stored result"]
    assert any("expected duplicate, got accepted" in f for f in dup)
    late = by_name["a late failed result after success does not overwrite succeeded"]
    assert any("expected no move" in f for f in late)
    assert "intake contract cases pass" in report(results)
    assert report(results).startswith("FAIL ")


def _mutant(transform):
    def mutated(env, task, prior, rules, unresolved=frozenset()):
        return transform(decide(env, task, prior, rules, unresolved), env, task)

    return mutated


@pytest.mark.parametrize(
    "transform, must_fail",
    [
        # keeps the first result silently instead of freezing the task
        (lambda v, env, task: dataclasses.replace(v, decision=Decision.DUPLICATE, move=None, duplicate_of=v.conflict_with)
         if v.decision == Decision.CONFLICT else v,
         "same key with a different digest on a succeeded task escalates it to needs_review"),
        # forgets lease fencing
        (lambda v, env, task: Verdict(Decision.ACCEPTED, "ok", move=Move(task.state, target_state(env), "x", env.sender,
                                                                           env.sender_role))
         if v.code == "E_STALE_LEASE" and env.type == "task_result" else v,
         "a zombie result carrying the old lease_version after recovery is refused as a stale lease"),
        # grants the same lease again
        (lambda v, env, task: dataclasses.replace(v, grant_lease=task.lease_version) if v.grant_lease else v,
         "task_started after a retry grants lease_version + 1, not 1"),
        # lets the wrong role make a legal move
        (lambda v, env, task: dataclasses.replace(v, move=dataclasses.replace(v.move, role="writer"))
         if v.move is not None and v.move.to_state == TaskState.NEEDS_REVIEW else v,
         "same key with a different digest while running is a conflict that freezes the task in needs_review"),
    ],
    ids=["conflict-keeps-first", "no-lease-fencing", "lease-not-incremented", "conflict-move-by-wrong-role"],
)
def test_targeted_mutants_are_caught(transform, must_fail):
    by_name = {c.name: f for c, f in run(_mutant(transform))}
    assert by_name[must_fail], f"mutant passed {must_fail!r}"


def test_check_reports_an_exception_instead_of_raising():
    def crashing(env, task, prior, rules, unresolved=frozenset()):
        raise KeyError("status")

    case = CASES[0]
    fails = check(crashing, case)
    assert fails and "raised KeyError" in fails[0]
    results = run(crashing)
    assert all(len(f) == 1 and "raised" in f[0] for _, f in results)


def test_check_reports_a_non_verdict():
    fails = check(lambda *a, **k: {"decision": "accepted"}, CASES[0])
    assert fails == ["decide returned dict, not a sim.intake.Verdict"]
    assert check(lambda *a, **k: None, CASES[0]) == ["decide returned NoneType, not a sim.intake.Verdict"]


def test_check_reports_a_plain_string_decision_and_a_malformed_move():
    case = next(c for c in CASES if c.decision == Decision.ACCEPTED and c.to_state is None)
    fails = check(lambda *a, **k: Verdict("accepted", "ok"), case)
    assert any("not a sim.intake.Decision" in f for f in fails)
    create = CASES[0]
    fails = check(lambda *a, **k: Verdict(Decision.ACCEPTED, "ok", move="ready", create=True), create)
    assert fails and all(isinstance(f, str) for f in fails)


def test_check_wants_create_and_the_right_starting_state():
    create = CASES[0]
    assert create.task is None
    no_create = lambda *a, **k: Verdict(  # noqa: E731
        Decision.ACCEPTED, "ok", move=Move(TaskState.PENDING, TaskState.READY, "r", "manager", "manager")
    )
    assert any("create=True" in f for f in check(no_create, create))
    wrong_start = lambda *a, **k: Verdict(  # noqa: E731
        Decision.ACCEPTED, "ok", move=Move(TaskState.READY, TaskState.READY, "r", "manager", "manager"), create=True
    )
    assert any("starts from ready" in f for f in check(wrong_start, create))


# ---------------------------------------------------------------------------
# regressions for bugs found while writing the suite (all fixed)

T = "2026-07-13T04:00:00Z"


def _env(type, payload, *, sender, key, mid, recipient="manager", evidence=(), scheme="json-sorted-v1"):
    return build_envelope(
        message_id=mid, trace_id="R-7", task_id="T-20", sender=sender, recipient=recipient, type=type,
        payload=payload, idempotency_key=key, created_at=T, evidence_refs=evidence, digest_scheme=scheme,
    )


def _intent(env, arrival=1):
    return IntentRecord(env.task_id, env.idempotency_key, env.payload_digest, env.digest_scheme, env.message_id,
                        dict(env.payload), arrival, {"decision": "accepted"})


REVIEW = TaskView("T-20", TaskState.NEEDS_REVIEW, 4, RULES.version, "researcher", "researcher", 1, 4, False)


@pytest.mark.parametrize(
    "env",
    [
        _env("cancel", {}, sender="reviewer", key="c-1", mid="M-1"),
        _env("task_request", {"goal": "again"}, sender="reviewer", recipient="researcher", key="r-1", mid="M-2"),
    ],
    ids=["cancel", "task_request"],
)
def test_leaving_needs_review_requires_retained_evidence(env):
    v = decide(env, REVIEW, (), RULES, frozenset())
    assert v.decision == Decision.REJECTED and v.move is None


def test_a_conflicting_receipt_freezes_the_task_as_the_seed_requires():
    """The seed: "any state -> needs_review: one logical intent has conflicting result or receipt".
    A single ack never moves a task; two different receipts under one key are a contradiction."""
    first = _env("ack", {"of": "M-102"}, sender="manager", recipient="researcher", key="ack-1", mid="M-3")
    second = _env("ack", {"of": "M-103"}, sender="manager", recipient="researcher", key="ack-1", mid="M-4")
    done = TaskView("T-20", TaskState.SUCCEEDED, 3, RULES.version, "researcher", "researcher", 1, 4)
    v = decide(second, done, (_intent(first),), RULES, frozenset())
    assert v.decision == Decision.CONFLICT
    assert v.move is not None and v.move.to_state == TaskState.NEEDS_REVIEW and v.move.role == "runtime"


def test_duplicate_or_conflict_does_not_depend_on_arrival_order():
    a = _env("ack", {"n": 1.0}, sender="writer", key="k", mid="M-5", scheme="jcs-v2")
    b = _env("ack", {"n": 1}, sender="writer", key="k", mid="M-6", scheme="json-sorted-v1")
    task = TaskView("T-20", TaskState.RUNNING, 2, RULES.version, "researcher", "researcher", 1, 4)
    ab = decide(b, task, (_intent(a),), RULES, frozenset()).decision
    ba = decide(a, task, (_intent(b),), RULES, frozenset()).decision
    assert ab == ba
