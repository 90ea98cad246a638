"""Property tests of the real runtime: random deliveries into a store, invariants read back from it.

A Hypothesis state machine sends envelopes for tasks T-1..T-3 through
``sim.runtime.deliver`` into ``Store.memory()``: requests, starts and results
(every status; current, stale or future lease; right or wrong worker; with or
without a publish effect), redeliveries, conflicting variants, late results,
acks, cancels, review decisions, stale or current expected_state_version, and
both digest schemes. Keys and message ids come from small pools so they collide.
After every step the store is read back and the protocol invariants checked.
Every envelope is also delivered to a twin store, whose state digest must match.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from sim import digest as _digest
from sim.envelope import RESULT_STATUSES, build_envelope, role_of
from sim.intake import Decision, Move, Verdict, target_state
from sim.intake import decide as reference_decide
from sim.machine import TERMINAL, TaskState
from sim.runtime import deliver
from sim.store import Store

TASKS = ("T-1", "T-2", "T-3")
FRESH = "<fresh>"
KEY_POOL = (FRESH, FRESH, FRESH, FRESH, "K-1", "K-2")
MID_POOL = (FRESH, FRESH, FRESH, "M-1", "M-2")
CREATED = "2026-07-13T04:00:00Z"
EFFECT = {"kind": "publish", "target": "R-1"}
TERMINAL_STATES = {s.value for s in TERMINAL}
DECISIONS = {"accepted", "duplicate", "conflict", "late", "rejected"}
EXECUTING_EVENTS = {"transition_applied", "lease_granted", "budget_charged", "effect_committed"}

keys = st.sampled_from(KEY_POOL)
mids = st.sampled_from(MID_POOL)
schemes = st.sampled_from(_digest.SCHEMES)
esv_choice = st.sampled_from([None, None, "current", "stale"])
lease_choice = st.sampled_from(["current", "current", "stale", "future"])
worker_choice = st.sampled_from(["right", "right", "wrong"])

SETTINGS = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def _other_worker(who: str | None) -> str:
    return "writer" if who and role_of(who) == "researcher" else "researcher"


def _lease(choice: str, correct: int) -> int:
    """A lease_version the envelope layer accepts (>= 1): the correct one, one below, or one above."""
    if choice == "current":
        return max(correct, 1)
    if choice == "stale":
        return correct - 1 if correct > 1 else correct + 1
    return correct + 1


class ProtocolMachine(RuleBasedStateMachine):
    sent = Bundle("sent")
    #: the intake function under test (subclasses plug in broken ones to show the invariants bite)
    decide = staticmethod(reference_decide)

    def __init__(self):
        super().__init__()
        self.store = Store.memory()
        self.twin = Store.memory()
        self.n = 0
        self.last_state: dict[str, str] = {}

    def teardown(self):
        self.store.close()
        self.twin.close()

    # ------------------------------------------------------------- helpers

    def _fresh(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}-f{self.n}"

    def _esv(self, choice, task_id: str, payload: dict) -> dict:
        if choice is not None:
            t = self.store.get_task(task_id)
            v = t.state_version if t else 0
            payload["expected_state_version"] = v if choice == "current" else (v - 1 if v > 0 else v + 1)
        return payload

    def _build(self, type, task_id, sender, recipient, payload, key, mid, scheme, evidence=()):
        return build_envelope(
            message_id=self._fresh("M") if mid == FRESH else mid,
            trace_id="R-1",
            task_id=task_id,
            sender=sender,
            recipient=recipient,
            type=type,
            payload=payload,
            idempotency_key=self._fresh("K") if key == FRESH else key,
            created_at=CREATED,
            evidence_refs=evidence,
            digest_scheme=scheme,
        )

    def _send(self, env):
        out = deliver(self.store, env, decide=self.decide)
        twin = deliver(self.twin, env, decide=self.decide)
        assert (out.decision, out.code, out.state, out.state_version, out.effects) == (
            twin.decision, twin.code, twin.state, twin.state_version, twin.effects,
        )
        assert out.decision in DECISIONS
        return env

    def _retained_ref(self) -> str:
        refs = [r["ref"] for r in self.store.artifacts()][:1] or [m["message_id"] for m in self.store.messages()][:1]
        return refs[0] if refs else "M-nothing-yet"

    # ------------------------------------------------------------- rules

    @initialize(
        target=sent,
        workers=st.tuples(*[st.sampled_from(["researcher", "writer"]) for _ in TASKS[:2]]),
        scheme=schemes,
    )
    def assign_tasks(self, workers, scheme):
        """Most deliveries should meet an existing task: start with T-1 and T-2 assigned."""
        envs = []
        for task_id, worker in zip(TASKS[:2], workers):
            envs.append(self._send(self._build("task_request", task_id, "manager", worker, {"goal": f"goal of {task_id}"},
                                               FRESH, FRESH, scheme)))
        return envs[0]

    @rule(target=sent, task_id=st.sampled_from(TASKS), status=st.sampled_from(RESULT_STATUSES),
          effect=st.booleans(), decision=st.sampled_from(["ready", "canceled"]), scheme=schemes)
    def advance(self, task_id, status, effect, decision, scheme):
        """The well-behaved next message for the task's state, so runs reach deep states."""
        return self._advance(task_id, status, effect, decision, scheme)

    @rule(target=sent, task_id=st.sampled_from(TASKS), effect=st.booleans(), scheme=schemes)
    def advance_to_success(self, task_id, effect, scheme):
        """The same, but a running task succeeds (often with a publish effect)."""
        return self._advance(task_id, "succeeded", effect, "ready", scheme)

    def _advance(self, task_id, status, effect, decision, scheme):
        t = self.store.get_task(task_id)
        if t is None:
            env = self._build("task_request", task_id, "manager", "writer", {"goal": f"goal of {task_id}"},
                              FRESH, FRESH, scheme)
        elif t.state.value == "ready":
            env = self._build("task_started", task_id, t.assignee or "researcher", "manager",
                              {"lease_version": t.lease_version + 1}, FRESH, FRESH, scheme)
        elif t.state.value == "running":
            payload = {"status": status, "lease_version": t.lease_version}
            if effect:
                payload["effect"] = dict(EFFECT)
            env = self._build("task_result", task_id, t.lease_holder, "manager", payload, FRESH, FRESH, scheme)
        elif t.state.value == "retry_wait":
            env = self._build("task_request", task_id, "manager", t.assignee or "researcher",
                              {"goal": f"goal of {task_id}"}, FRESH, FRESH, scheme)
        elif t.state.value in ("needs_review", "waiting_human"):
            env = self._build("review_decision", task_id, "reviewer", "manager",
                              {"decision": decision, "expected_state_version": t.state_version}, FRESH, FRESH,
                              scheme, (self._retained_ref(),))
        else:  # terminal: a well-behaved worker repeats its result (a late one, under a fresh key)
            env = self._result(task_id, status, "right", "current", effect, FRESH, FRESH, scheme, None)
        return self._send(env)

    @rule(
        target=sent,
        task_id=st.sampled_from(TASKS),
        sender=st.sampled_from(["manager", "manager", "manager", "writer"]),
        recipient=st.sampled_from(["researcher", "writer"]),
        budget=st.sampled_from([None, None, 0, 1, 5]),
        key=keys, mid=mids, scheme=schemes, esv=esv_choice,
    )
    def task_request(self, task_id, sender, recipient, budget, key, mid, scheme, esv):
        payload = {"goal": f"goal of {task_id}"}
        if budget is not None:
            payload["budget"] = budget
        self._esv(esv, task_id, payload)
        return self._send(self._build("task_request", task_id, sender, recipient, payload, key, mid, scheme))

    @rule(
        target=sent, task_id=st.sampled_from(TASKS), who=worker_choice,
        lease=st.sampled_from([None, "current", "stale", "future"]), key=keys, mid=mids, scheme=schemes,
    )
    def task_started(self, task_id, who, lease, key, mid, scheme):
        t = self.store.get_task(task_id)
        right = (t.assignee if t and t.assignee else "researcher")
        sender = right if who == "right" else _other_worker(right)
        payload = {}
        if lease is not None:
            payload["lease_version"] = _lease(lease, (t.lease_version if t else 0) + 1)
        return self._send(self._build("task_started", task_id, sender, "manager", payload, key, mid, scheme))

    @rule(
        target=sent, task_id=st.sampled_from(TASKS), status=st.sampled_from(RESULT_STATUSES), who=worker_choice,
        lease=lease_choice, effect=st.booleans(), key=keys, mid=mids, scheme=schemes, esv=esv_choice,
    )
    def task_result(self, task_id, status, who, lease, effect, key, mid, scheme, esv):
        return self._send(self._result(task_id, status, who, lease, effect, key, mid, scheme, esv))

    def _result(self, task_id, status, who, lease, effect, key, mid, scheme, esv):
        t = self.store.get_task(task_id)
        right = (t.lease_holder or t.assignee or "researcher") if t else "researcher"
        sender = right if who == "right" else _other_worker(right)
        payload = {"status": status, "lease_version": _lease(lease, t.lease_version if t else 0)}
        if effect:
            payload["effect"] = dict(EFFECT)
        self._esv(esv, task_id, payload)
        return self._build("task_result", task_id, sender, "manager", payload, key, mid, scheme)

    @rule(
        target=sent, task_id=st.sampled_from(TASKS), status=st.sampled_from(RESULT_STATUSES), effect=st.booleans(),
        scheme=schemes,
    )
    def late_result(self, task_id, status, effect, scheme):
        """A result from the lease holder under its current lease, with a key never used before."""
        return self._send(self._result(task_id, status, "right", "current", effect, FRESH, FRESH, scheme, None))

    @rule(env=sent)
    def redeliver(self, env):
        self._send(env)

    @rule(target=sent, env=sent)
    def redeliver_under_other_scheme(self, env):
        """The same message and payload, digested under the other scheme: still the same intent."""
        other = next(s for s in _digest.SCHEMES if s != env.digest_scheme)
        return self._send(
            self._build(env.type, env.task_id, env.sender, env.recipient, dict(env.payload), env.idempotency_key,
                        env.message_id, other, env.evidence_refs)
        )

    @rule(target=sent, env=sent, same_mid=st.booleans(), scheme=schemes)
    def conflicting_variant(self, env, same_mid, scheme):
        """Same idempotency key, a different payload (and maybe the same message_id)."""
        self.n += 1
        payload = dict(env.payload, variant=self.n)
        return self._send(
            self._build(env.type, env.task_id, env.sender, env.recipient, payload, env.idempotency_key,
                        env.message_id if same_mid else FRESH, scheme, env.evidence_refs)
        )

    @rule(
        target=sent, task_id=st.sampled_from(TASKS),
        sender=st.sampled_from(["manager", "researcher", "writer", "reviewer"]),
        key=keys, mid=mids, scheme=schemes, esv=esv_choice,
    )
    def ack(self, task_id, sender, key, mid, scheme, esv):
        payload = self._esv(esv, task_id, {"of": "M-1"})
        return self._send(self._build("ack", task_id, sender, "manager", payload, key, mid, scheme))

    @rule(
        target=sent, task_id=st.sampled_from(TASKS), sender=st.sampled_from(["manager", "reviewer", "writer"]),
        key=keys, mid=mids, scheme=schemes, esv=esv_choice,
    )
    def cancel(self, task_id, sender, key, mid, scheme, esv):
        payload = self._esv(esv, task_id, {"reason": "no longer needed"})
        return self._send(self._build("cancel", task_id, sender, "researcher", payload, key, mid, scheme))

    @rule(
        target=sent, task_id=st.sampled_from(TASKS),
        sender=st.sampled_from(["reviewer", "reviewer", "writer", "manager"]),
        decision=st.sampled_from(["ready", "canceled"]),
        evidence=st.sampled_from(["retained", "retained", "none", "missing"]),
        key=keys, mid=mids, scheme=schemes, esv=esv_choice,
    )
    def review_decision(self, task_id, sender, decision, evidence, key, mid, scheme, esv):
        if evidence == "retained":
            refs = [self._retained_ref()]
        elif evidence == "missing":
            refs = ["sha256:" + "0" * 64]
        else:
            refs = []
        payload = self._esv(esv, task_id, {"decision": decision})
        return self._send(
            self._build("review_decision", task_id, sender, "manager", payload, key, mid, scheme, tuple(refs))
        )

    # ------------------------------------------------------------- invariants

    def _transition_deliveries(self) -> dict[tuple[str, int], dict]:
        """(task_id, state_version) of each applied move -> the delivery that applied it."""
        deliveries = {d["delivery_id"]: d for d in self.store.deliveries()}
        out = {}
        for e in self.store.events():
            if e["type"] == "transition_applied":
                out[(e["task_id"], e["data"]["from_version"] + 1)] = deliveries[e["delivery_id"]]
        return out

    @invariant()
    def every_delivery_has_one_of_the_five_decisions(self):
        for d in self.store.deliveries():
            assert d["decision"] in DECISIONS, d

    @invariant()
    def terminal_states_never_regress(self):
        tasks = {t["task_id"]: t["state"] for t in self.store.tasks()}
        for tid, before in self.last_state.items():
            if before in TERMINAL_STATES:
                assert tasks[tid] in (before, "needs_review"), f"{tid}: {before} -> {tasks[tid]}"
        self.last_state = tasks
        by_move = self._transition_deliveries()
        for tr in self.store.transitions():
            if tr["old_state"] in TERMINAL_STATES:
                how = by_move[(tr["task_id"], tr["state_version"])]["decision"]
                assert tr["new_state"] == "needs_review" and how == "conflict" and tr["role"] == "runtime", (
                    f"terminal regression: {tr['task_id']} {tr['old_state']} -> {tr['new_state']} "
                    f"by {tr['role']} in a delivery decided {how}"
                )

    @invariant()
    def every_transition_is_allowed_for_its_role(self):
        allowed = {
            (r["machine_version"], r["from_state"], r["to_state"]): set(r["roles"].split(","))
            for r in self.store.transition_rules()
        }
        for tr in self.store.transitions():
            roles = allowed.get((tr["machine_version"], tr["old_state"], tr["new_state"]))
            assert roles is not None, f"{tr['old_state']} -> {tr['new_state']} is not a rule: {tr}"
            assert tr["role"] in roles, tr
            expected_role = "runtime" if tr["executor"] == "runtime" else role_of(tr["executor"])
            assert tr["role"] == expected_role, tr

    @invariant()
    def state_version_rises_by_one_per_move(self):
        per_task = defaultdict(list)
        for tr in self.store.transitions():
            per_task[tr["task_id"]].append(tr)
        for t in self.store.tasks():
            trs = per_task[t["task_id"]]
            assert [tr["state_version"] for tr in trs] == list(range(1, len(trs) + 1)), trs
            assert t["state_version"] == len(trs)
            chain = ["pending"] + [tr["new_state"] for tr in trs]
            assert [tr["old_state"] for tr in trs] == chain[:-1], "transitions do not chain"
            assert t["state"] == chain[-1]
        assert set(per_task) <= {t["task_id"] for t in self.store.tasks()}

    @invariant()
    def duplicates_never_execute_and_effects_are_unique(self):
        decision = {d["delivery_id"]: d["decision"] for d in self.store.deliveries()}
        events = self.store.events()
        for e in events:
            if e["delivery_id"] is not None and decision[e["delivery_id"]] == "duplicate":
                assert e["type"] not in EXECUTING_EVENTS, e
        committed = Counter(e["data"]["effect_key"] for e in events if e["type"] == "effect_committed")
        assert all(n == 1 for n in committed.values()), committed
        effects = self.store.effects()
        assert len({e["effect_key"] for e in effects}) == len(effects)
        assert set(committed) == {e["effect_key"] for e in effects}
        state = {t["task_id"]: t["state"] for t in self.store.tasks()}
        for eff in effects:
            if state[eff["task_id"]] != "succeeded":
                assert any(
                    tr["old_state"] == "succeeded" and tr["new_state"] == "needs_review" and tr["tick"] > eff["tick"]
                    for tr in self.store.transitions(eff["task_id"])
                ), f"effect {eff['effect_key']} stands for a task that is {state[eff['task_id']]}"

    @invariant()
    def acks_never_change_state(self):
        deliveries = {d["delivery_id"]: d for d in self.store.deliveries()}
        for e in self.store.events():
            if e["type"] != "transition_applied" or e["delivery_id"] is None:
                continue
            d = deliveries[e["delivery_id"]]
            if d["type"] == "ack":
                # The reference freezes a task when an ack's key arrives with a second payload
                # (the seed: a conflicting receipt freezes the task); nothing else may move it.
                assert d["decision"] == "conflict" and e["data"]["to"] == "needs_review", (
                    f"an ack moved {d['task_id']} {e['data']['from']} -> {e['data']['to']} ({d['decision']})"
                )

    @invariant()
    def budget_and_leases_follow_the_ledger(self):
        ledger = defaultdict(int)
        for row in self.store.budget_ledger():
            ledger[row["task_id"]] += row["delta"]
        grants = Counter(e["task_id"] for e in self.store.events() if e["type"] == "lease_granted")
        for t in self.store.tasks():
            assert t["budget_left"] == ledger[t["task_id"]] >= 0, t
            assert t["lease_version"] == grants[t["task_id"]], t
            if t["state"] == "needs_review":
                assert t["trusted"] == 0, t

    @invariant()
    def twin_store_has_the_same_state(self):
        assert self.store.state_digest() == self.twin.state_digest()


ProtocolMachine.TestCase.settings = SETTINGS
TestProtocolMachine = pytest.mark.slow(ProtocolMachine.TestCase)  # measured at 2 s or more on 2 cores


def _late_overwrites(env, task, prior, rules, unresolved=frozenset()):
    """Broken: a late result overwrites the terminal state (last write wins)."""
    v = reference_decide(env, task, prior, rules, unresolved)
    target = target_state(env)
    if v.decision == Decision.LATE and target is not None and target != task.state:
        return Verdict(Decision.ACCEPTED, "lww", move=Move(task.state, target, "lww", env.sender, env.sender_role))
    return v


def _late_freezes(env, task, prior, rules, unresolved=frozenset()):
    """Broken: a late result freezes the task through a legal rule, but without any conflict."""
    v = reference_decide(env, task, prior, rules, unresolved)
    if v.decision == Decision.LATE:
        return Verdict(Decision.ACCEPTED, "x", move=Move(task.state, TaskState.NEEDS_REVIEW, "x", "runtime", "runtime"))
    return v


def _ack_cancels(env, task, prior, rules, unresolved=frozenset()):
    """Broken: a manager's ack on a live task is taken as a cancel (a legal move for a manager)."""
    v = reference_decide(env, task, prior, rules, unresolved)
    if (v.decision == Decision.ACCEPTED and env.type == "ack" and task is not None
            and rules.allows(task.state, TaskState.CANCELED, env.sender_role)):
        return Verdict(Decision.ACCEPTED, "x", move=Move(task.state, TaskState.CANCELED, "x", env.sender,
                                                          env.sender_role))
    return v


@pytest.mark.parametrize(
    "broken, complaint",
    [
        (_late_overwrites, "is not a rule"),
        (_late_freezes, "terminal regression"),
        (_ack_cancels, "an ack moved"),
    ],
    ids=["late-overwrites", "late-freezes-without-conflict", "ack-cancels"],
)
def test_the_invariants_catch_a_broken_intake(broken, complaint):
    """The state machine is not vacuous: plugged into a broken intake, an invariant fails."""

    class Broken(ProtocolMachine):
        decide = staticmethod(broken)

    with pytest.raises(AssertionError, match=complaint):
        run_state_machine_as_test(
            Broken, settings=settings(SETTINGS, derandomize=True, max_examples=100, phases=[Phase.generate])
        )


# ---------------------------------------------------------------------------
# determinism: the same sequence into two stores gives the same state

spec = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["task_request", "task_started", "task_result", "ack", "cancel", "review_decision"]),
        "task": st.sampled_from(TASKS[:2]),
        "worker": st.sampled_from(["researcher", "writer"]),
        "key": st.sampled_from(["K-1", "K-2", "K-3", "K-4", "K-5"]),
        "mid": st.sampled_from([f"M-{i}" for i in range(1, 9)]),
        "scheme": schemes,
        "status": st.sampled_from(RESULT_STATUSES),
        "lease": st.integers(1, 3),
        "esv": st.sampled_from([None, 0, 1, 2, 3]),
        "effect": st.booleans(),
        "reviewer": st.sampled_from(["reviewer", "manager"]),
        "decision": st.sampled_from(["ready", "canceled"]),
    }
)


def _from_spec(s: dict):
    t = s["type"]
    sender, recipient, payload, evidence = s["worker"], "manager", {}, ()
    if t == "task_request":
        sender, recipient, payload = "manager", s["worker"], {"goal": "g"}
    elif t == "task_started":
        payload = {"lease_version": s["lease"]}
    elif t == "task_result":
        payload = {"status": s["status"], "lease_version": s["lease"]}
        if s["effect"]:
            payload["effect"] = dict(EFFECT)
    elif t == "ack":
        sender, payload = "manager", {"of": s["mid"]}
    elif t == "cancel":
        sender, recipient, payload = "manager", s["worker"], {"reason": "stop"}
    else:
        sender, payload, evidence = s["reviewer"], {"decision": s["decision"]}, ("M-1",)
    if s["esv"] is not None:
        payload["expected_state_version"] = s["esv"]
    return build_envelope(
        message_id=s["mid"], trace_id="R-1", task_id=s["task"], sender=sender, recipient=recipient, type=t,
        payload=payload, idempotency_key=s["key"], created_at=CREATED, evidence_refs=evidence,
        digest_scheme=s["scheme"],
    )


@settings(max_examples=60, deadline=None, database=None)
@given(st.lists(spec, min_size=1, max_size=30))
def test_same_sequence_same_state_digest(specs):
    envs = [_from_spec(s) for s in specs]
    # a realistic prefix so that later envelopes meet an existing task
    start = [
        build_envelope(message_id=f"P-{tid}", trace_id="R-1", task_id=tid, sender="manager", recipient="researcher",
                       type="task_request", payload={"goal": "g"}, idempotency_key=f"P-{tid}", created_at=CREATED)
        for tid in TASKS[:2]
    ]
    a, b = Store.memory(), Store.memory()
    try:
        outs_a = [deliver(a, e).to_dict() for e in start + envs]
        outs_b = [deliver(b, e).to_dict() for e in start + envs]
        assert outs_a == outs_b
        assert a.state_digest() == b.state_digest()
        assert [e["data"] for e in a.events()] == [e["data"] for e in b.events()]
    finally:
        a.close()
        b.close()


def test_state_digest_tells_different_sequences_apart():
    """The determinism check is not vacuous: a different delivery gives a different digest."""
    a, b = Store.memory(), Store.memory()
    try:
        env = build_envelope(message_id="M-1", trace_id="R-1", task_id="T-1", sender="manager",
                             recipient="researcher", type="task_request", payload={"goal": "g"},
                             idempotency_key="K-1", created_at=CREATED)
        deliver(a, env)
        assert a.state_digest() != b.state_digest()
        deliver(b, env)
        assert a.state_digest() == b.state_digest()
    finally:
        a.close()
        b.close()


# ---------------------------------------------------------------------------
# regressions for runtime bugs found while writing these properties (fixed)


def _env(mid, type, sender, recipient, payload, key, evidence=(), task_id="T-1"):
    return build_envelope(message_id=mid, trace_id="R-1", task_id=task_id, sender=sender, recipient=recipient,
                          type=type, payload=payload, idempotency_key=key, created_at=CREATED,
                          evidence_refs=evidence)


def test_a_reused_message_id_stays_refused_on_redelivery(store):
    deliver(store, _env("M-1", "task_request", "manager", "researcher", {"goal": "g"}, "K-1"))
    deliver(store, _env("M-2", "task_started", "researcher", "manager", {}, "K-2"))
    reused = _env("M-2", "cancel", "manager", "researcher", {"reason": "stop"}, "K-3")
    first = deliver(store, reused)
    assert (first.decision, first.code) == ("rejected", "E_MESSAGE_ID_REUSED")
    again = deliver(store, reused)
    assert (again.decision, again.code, again.state) == ("rejected", "E_MESSAGE_ID_REUSED", "running")


def test_a_review_decision_cannot_cite_itself(store):
    deliver(store, _env("M-1", "task_request", "manager", "researcher", {"goal": "g"}, "K-1"))
    deliver(store, _env("M-2", "task_started", "researcher", "manager", {}, "K-2"))
    deliver(store, _env("M-3", "task_result", "researcher", "manager", {"status": "succeeded", "lease_version": 1},
                        "K-3", evidence=("M-1",)))
    frozen = deliver(store, _env("M-4", "task_result", "researcher", "manager",
                                 {"status": "failed", "lease_version": 1}, "K-3"))
    assert frozen.state == "needs_review"
    out = deliver(store, _env("M-5", "review_decision", "reviewer", "manager", {"decision": "ready"}, "K-5",
                              evidence=("M-5",)))
    assert (out.decision, out.code, out.state) == ("rejected", "E_EVIDENCE_UNRESOLVED", "needs_review")
