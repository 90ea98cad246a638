"""Every delivery order of a small run, breadth-first, with state hashing.

A seeded run shows one interleaving. :func:`explore` tries them all, up to a depth: the state is a
run paused where its transport is about to deliver (the agents have acted this round), and its
successors are one per message on the bus (:meth:`sim.faults.Bus.in_flight`, any due time: the
network may reorder anything). Delivering one takes one round, like every round of a run with a
delivery schedule (:class:`sim.schedule.DeliveryPlan`); a round with nothing on the bus passes by
itself (timers fire: leases expire, senders retry) and is no choice. The depth counts deliveries.

Breadth-first, so the first state that breaks an invariant is reached by a shortest path. Two
orders that reach the same state are one: a state's fingerprint covers the store's state digest,
what is on the bus (ids, keys, digests, due rounds), every agent's memory (requests sent, jobs,
leases, timers, zombies), the transport's fault bookkeeping, the id counters and both random
generators, so two states with one fingerprint have the same future. Invariants are judged on
every new state (they read the run's history, not only its state) before it is merged.

Successors are made by copying the paused run (:meth:`sim.store.Store.copy` for the database, a
deep copy for the rest; the Faker generator is shared and its state restored before each use), so
a state costs one delivery and one round, not a replay from the start.

A path found is a plain scenario: the faults that fired, named by the message they hit, and the
path as its ``deliveries`` (:func:`counterexample`); ``protolab run`` of it replays that run.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import random
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

from .errors import InputError
from .faults import REGISTRY, Bus, FaultSpec
from .invariants import STATE_INVARIANTS, check
from .policy import get_policy
from .runner import Run, fault_specs, new_run
from .scenario import Scenario

__all__ = ["Step", "Found", "Exploration", "explore", "fingerprint", "counterexample", "start", "starts", "successors",
           "placed_faults", "explore_args", "bench", "settle", "eligible", "confirm", "ModelDisagrees", "NotConfirmed"]


@dataclass(frozen=True)
class Step:
    """One delivery of a path: the round, the message, what it was and what intake decided."""

    round: int
    message_id: str
    type: str
    sender: str
    recipient: str
    task_id: str
    decision: str

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Found:
    """A broken invariant and the shortest path to it."""

    invariant: str
    description: str
    witness: dict
    path: tuple[Step, ...]
    faults: tuple[str, ...]  # the faults that fired on the path, each named by the message it hit
    broken: tuple[str, ...]  # every invariant broken in that state

    def to_dict(self) -> dict:
        return {"invariant": self.invariant, "description": self.description, "witness": self.witness,
                "broken": list(self.broken), "faults": list(self.faults), "deliveries": len(self.path),
                "path": [s.to_dict() for s in self.path]}


@dataclass
class Exploration:
    """What a search reached: states (distinct), transitions tried, the depth fully explored, whether
    every order ended within it (exhausted), how long it took, and the first break found."""

    scenario: str
    policy: str
    faults: tuple[str, ...]
    depth: int
    states: int = 0
    transitions: int = 0
    depth_reached: int = 0
    exhausted: bool = False
    interrupted: bool = False
    seconds: float = 0.0
    found: Found | None = None
    ended: int = 0  # states in which the run was over (nothing more would happen)
    engine: str = "sqlite"  # where each state's run kept its state: "sqlite" or "model" (sim.model)
    confirmed: bool = False  # the break found was replayed by the engine from the start (confirm)
    model_checked: int = 0  # states on which the pure model and the engine were found to agree
    model_seconds: float = 0.0  # of ``seconds``, the model's own work (copying it, its inputs, its projection)

    @property
    def states_per_second(self) -> float:
        return self.transitions / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict:
        return {"scenario": self.scenario, "policy": self.policy, "faults": list(self.faults), "depth": self.depth,
                "states": self.states, "transitions": self.transitions, "depth_reached": self.depth_reached,
                "exhausted": self.exhausted, "interrupted": self.interrupted, "seconds": round(self.seconds, 3),
                "states_per_second": round(self.states_per_second, 1), "ended": self.ended,
                "engine": self.engine, "confirmed": self.confirmed, "model_checked": self.model_checked,
                "model_seconds": round(self.model_seconds, 3),
                "found": self.found.to_dict() if self.found else None}


class _Placing:
    """Stands in for the transport's recorder: notes which message each fault hit, then records it
    as before (a deep copy of the run copies it, bound to the copy)."""

    def __init__(self, record):
        self.record = record
        self.placed: list[tuple[str, str]] = []  # (selector as given, message id)

    def __call__(self, fault: str, env, detail: dict) -> None:
        self.placed.append((detail.get("selector", fault), env.message_id))
        self.record(fault, env, detail)


def eligible(name: str, env, anywhere: bool = False) -> bool:
    """Whether the search may place fault ``name`` on ``env`` as it is sent: a message of a type the
    fault can touch that its default selector would pick (``duplicate``: a publishing task_result;
    ``late-failure``: a successful one; see :data:`sim.faults.REGISTRY`), or with ``anywhere`` any
    message of a type it can touch (``duplicate``: any message)."""
    fault = REGISTRY[name]
    return (not fault.only or env.type in fault.only) and (anywhere or fault.default_match(env))


class _Decide:
    """The search's answers in one transition, in the order the questions come: whether to place a
    fault on the message being sent. ``given`` answers the first questions; every later one is no.
    ``asked`` counts them, so the transition's other answers can be enumerated (:func:`_leaves`)."""

    def __init__(self, given: tuple[bool, ...] = ()):
        self.given = given
        self.asked = 0

    def __call__(self) -> bool:
        i = self.asked
        self.asked += 1
        return self.given[i] if i < len(self.given) else False

    def answers(self) -> tuple[bool, ...]:
        return self.given + (False,) * (self.asked - len(self.given))


class _PlacingBus(Bus):
    """The transport of a search that places its faults itself. Each fault given without a selector
    (``duplicate``, not ``duplicate:M-6``) is one placement the search makes: as each message is sent,
    for each such fault not placed yet that may hit it (:func:`eligible`), the search asks ``decide``
    whether it fires there; yes adds the selector ``NAME:MESSAGE`` to the transport's faults, which
    then bends the send exactly as that selector given to a run does (so a counterexample naming it
    replays byte for byte). A fault never placed never fires: no placement is one of the choices."""

    placeable: tuple[str, ...]
    placed_on: list
    anywhere: bool = False
    decide: Callable[[], bool] | None

    def send(self, env, now: int):
        if self.decide is not None and not (env.sender in self.silenced and env.type in ("task_started", "task_result")):
            for i, name in enumerate(self.placeable):
                spec = FaultSpec(name, "message", env.message_id)
                if (self.placed_on[i] is None and spec not in self.specs and eligible(name, env, self.anywhere)
                        and self.decide()):
                    self.placed_on[i] = env.message_id
                    self.specs = [*self.specs, spec]
                    self.matched[spec.text] = 0
        return super().send(env, now)


@dataclass
class _Node:
    run: Run
    path: tuple[Step, ...]
    fake_state: object
    ended: bool = False
    decide: _Decide | None = None
    model: object = None  # with check_model: the pure model of this state (sim.model.Model)
    model_seq: int = 0  # the last event of the run's log the model has followed


def explore_args(faults) -> None:
    """Refuse what a search cannot place: a rate selector draws from the run's generator per send,
    so it is no placement; name a fault (its first target), a message id or a type."""
    from .faults import parse_fault

    for f in faults:
        if parse_fault(f).kind == "rate":
            raise InputError(f"explore places faults itself: {f} is a rate; give the fault's name, a message id or "
                             "a type", code="E_USAGE")


def refuse_unmatched(scenario: Scenario, policy: str, seed: int | None, faults, plugins=None) -> None:
    """Refuse, as ``run`` does (E_FAULT_NO_MATCH), a fault selector naming a message id or a type that the
    scenario's run never sends: the search would place it nowhere and call the run safe. The scenario is
    run once, in memory, with those faults (only when such a selector is given)."""
    from .faults import parse_fault
    from .runner import run_scenario

    if scenario.stress is not None or not any(parse_fault(f).kind in ("message", "type") for f in faults):
        return
    run_scenario(scenario, policy=policy, seed=seed, faults=list(faults), plugins=plugins).close()


def _advance(run: Run) -> bool:
    """From the end of a round to the next point where something is on the bus (agents acted): True;
    False when the run is over first."""
    while run.now < run.settings.max_rounds:
        run.begin_round()
        if run.bus.in_flight():
            return True
        if run.end_round(0):
            return False
    return False


def _first(scenario: Scenario, policy: str, seed: int | None, faults, plugins, place: bool, engine: str = "sqlite"):
    """A new run (in memory) of ``scenario`` with no schedule, not yet started; with ``place`` its
    transport places the faults given without a selector itself (:class:`_PlacingBus`)."""
    if scenario.stress is not None:
        raise InputError(f"{scenario.name} is a stress scenario; explore takes a scenario with a fixed task list",
                         code="E_USAGE")
    explore_args(faults)
    design, rulebook, plugged = None, None, None
    if plugins is not None and plugins.any():
        design, pol, rulebook = plugins.load(policy)
        plugged = plugins.meta()
    else:
        pol = get_policy(policy)
    sc = dataclasses.replace(scenario, deliveries=())
    specs = fault_specs(sc, faults)
    placeable = tuple(s.name for s in specs if s.kind == "default") if place else ()
    if place:
        specs = [s for s in specs if s.kind != "default"]
    if engine == "model":
        from .model import NotModelled, model_run

        if rulebook is not None:
            raise NotModelled("a plugged-in machine: explore it on engine 'sqlite'")
        run = model_run(sc, pol, seed, specs, design=design, plugged=plugged)
    else:
        run = new_run(sc, pol, seed, specs, None, design=design, rulebook=rulebook, plugged=plugged)
    # The search chooses the delivery order itself (any order the network could produce): no session
    # stands between it and intake (sim.session), and none keeps envelopes for it.
    run.session, run.bus.on_push = None, None
    run.bus._record = _Placing(run.bus._record)
    if place:
        run.bus.__class__ = _PlacingBus
        run.bus.placeable, run.bus.placed_on, run.bus.decide = placeable, [None] * len(placeable), None
        run.bus.anywhere = place == "any"
    return run


def _leaves(make):
    """Every transition a step can take, one per way of answering its placement questions: ``make(decide)``
    plays the step with ``decide`` answering and returns the node; the node is yielded, and once the
    caller has settled it (so every question of the step has been asked) the answers not tried yet are
    (the first yes at each question past the given ones). Each way is played once."""
    todo = [()]
    while todo:
        given = todo.pop(0)
        decide = _Decide(given)
        node = make(decide)
        node.decide = decide
        yield node
        answers = decide.answers()
        todo.extend(answers[:j] + (True,) for j in range(len(given), len(answers)))


def starts(scenario: Scenario, *, policy: str = "safe", seed: int | None = None, faults=(), plugins=None,
           place: bool = True, engine: str = "sqlite"):
    """The first states of a search: a run paused before its first delivery, one per placement of the
    faults on what was sent before it (usually one: nothing a fault picks is sent that early)."""

    def make(decide):
        run = _first(scenario, policy, seed, faults, plugins, place, engine)
        if place:
            run.bus.decide = decide
        ended = not _advance(run)
        if place:
            run.bus.decide = None
        return _Node(run, (), run.fake.random.getstate(), ended)

    yield from _leaves(make)


def start(scenario: Scenario, *, policy: str = "safe", seed: int | None = None, faults=(), plugins=None,
          place: bool = True, engine: str = "sqlite") -> _Node:
    """The first state of a search with no fault placed before the first delivery."""
    return next(starts(scenario, policy=policy, seed=seed, faults=faults, plugins=plugins, place=place,
                       engine=engine))


def _fork(run: Run) -> Run:
    """A copy of a paused run: its database copied, the rest deep-copied (what never changes shared)."""
    db = run.store.copy()
    # Store.copy reads its counters back from the rows, and the next arrival number from the newest intent
    # row; a policy that records an intent again (naive: the last write wins) has numbered one past it.
    # The run goes on with the number it had (the pure model, sim/model.py, found the difference).
    db._next_arrival = run.store._next_arrival
    rng = random.Random()
    rng.setstate(run.rng.getstate())  # (a deep copy would copy its 625 numbers one by one)
    memo = {id(run.store): db, id(run.rng): rng, id(run.fake): run.fake, id(run.scenario): run.scenario,
            id(run.policy): run.policy, id(run.design): run.design, id(run.progress): run.progress,
            id(run.settings): run.settings}
    for intent in run.intents.values():  # frozen: shared, never copied
        memo[id(intent)] = intent
    for env in (*run.results.values(), *(e for _d, _s, e in run.bus._heap), *(e for _t, e in run.bus._held),
                *run.bus.stragglers):
        memo[id(env)] = env
    for frozen in (run._t0, run.privacy, run.trace, *run.specs.values(), *run.bus.specs):  # immutable: shared
        memo[id(frozen)] = frozen
    memo[id(run._tasks)] = {}  # the task cache: read again from the copy
    return copy.deepcopy(run, memo)


def successors(node: _Node):
    """The state after delivering each message on the bus, in the bus's order, at the end of that
    delivery's round (:func:`settle` carries it on to its next choice). When the search places faults,
    one successor per way of placing them on what the step sends (no placement first): settle each
    child before asking for the next, so that the step's later questions are known."""
    placing = isinstance(node.run.bus, _PlacingBus)
    for env in node.run.bus.in_flight():

        def make(decide, env=env):
            child = _fork(node.run)
            child.fake.random.setstate(node.fake_state)
            if placing:
                child.bus.decide = decide
            picked = child.bus.pick(env.message_id)
            out = child.deliver_one(picked)
            step = Step(child.now, picked.message_id, picked.type, picked.sender, picked.recipient, picked.task_id,
                        out.decision)
            return _Node(child, node.path + (step,), None, child.end_round(1))

        yield from _leaves(make)


def settle(node: _Node) -> _Node:
    """Carry a state just delivered on to its next choice (the rounds up to it: the agents act, timers
    fire); ``ended`` when the run is over first. The invariants are judged before: a run of the path
    as a delivery schedule ends right after its last delivery, in the state judged."""
    node.ended = node.ended or not _advance(node.run)
    node.fake_state = node.run.fake.random.getstate()
    if isinstance(node.run.bus, _PlacingBus):
        node.run.bus.decide = None  # its step is over: the next one asks its own
    return node


def _env(e) -> tuple:
    return (e.message_id, e.type, e.task_id, e.idempotency_key, e.payload_digest, e.schema_version)


def _timeless(rows) -> list:
    """Rows without the columns that say when (a tick, a time): what they say, not when it happened."""
    return [sorted((k, v) for k, v in r.items() if not (k.endswith("tick") or k.endswith("_at") or k == "at"))
            for r in rows]


def fingerprint(run: Run) -> str:
    """What decides a paused run's future, hashed: equal fingerprints, the same future.

    The store's state rows (tasks, transitions, intents, artifacts, effects, approvals, budget) without
    the columns that say *when*; what is on the bus; every agent's memory; the transport's fault
    bookkeeping (with the faults the search has still to place); the id counters and both random
    generators. Time is kept only as it decides what
    happens next: each timer as its age now, capped just past the longest wait any rule compares it
    with (an age past the cap behaves like the cap). So two orders that reach the same rows at
    different rounds, with the same timers pending, are one state."""
    st, now, bus, m = run.settings, run.now, run.bus, run.manager
    cap = max(st.lease_ticks, st.work_ticks, st.retry_ticks, st.delay_ticks, st.zombie_ticks, st.gather_ticks,
              bus.max_hold) + 1

    def age(t):
        return t if t is None or t < 0 else min(now - t, cap)

    def jobs(w):
        return sorted((tid, j.lease, age(j.started_at), j.start_tries, j.result.message_id if j.result else None,
                       age(j.result_at), j.result_tries, j.inputs) for tid, j in w.jobs.items())

    store = run.store
    parts = (
        _timeless(store.tasks()), _timeless(store.transitions()), _timeless(store.intents()),
        _timeless(store.artifacts()), _timeless(store.effects()), _timeless(store.approvals()),
        _timeless(store.budget_ledger()),
        run.epoch, run.fence.message_id if run.fence else None, min(run._quiet_for, cap),
        sorted(run.ids.items()), sorted((k, v.message_id) for k, v in run.results.items()),
        sorted((k, age(v)) for k, v in run.heartbeat.items()), sorted(run.sent_meta.items()), sorted(run._seq.items()),
        sorted(_env(e) for _d, _s, e in bus._heap), sorted((age(t), *_env(e)) for t, e in bus._held),
        sorted(bus._default_used), sorted(bus.matched.items()), sorted(bus.silenced), [_env(e) for e in bus.pending_late],
        sorted((t, age(r.sent), r.tries, r.version) for t, r in m.sent.items()), [e.message_id for e in m.acks],
        sorted((k, age(v)) for k, v in m.gather_open.items()), list(m.timed_out),
        [(wid, w.generation, w.dead, [f.message_id for f in w.fences], jobs(w)) for wid, w in sorted(run.workers.items())],
        [(z.worker.id, z.worker.generation, z.task_id, z.lease, age(z.woke), z.done) for z in run.zombies],
        [(t, lease, w.id, w.generation) for t, lease, w in run.orphans],
        hash(run.rng.getstate()), hash(run.fake.random.getstate()),
        tuple(getattr(bus, "placed_on", ())),  # the faults the search has still to place (None) and where it did
        [_env(e) for e in bus.stragglers], age(run.epoch_opened), run.timed_out_by_deadline, age(run.fenced_at),
        sorted((r.task, r.decision, r.after) for r in run.reviews_done),
    )
    return hashlib.sha256(repr(parts).encode()).hexdigest()


class ModelDisagrees(AssertionError):
    """The pure model and the engine computed different states from the same inputs."""


class NotConfirmed(AssertionError):
    """The engine, running a counterexample from the start, did not reach the state the search did."""


def confirm(scenario: Scenario, policy: str, found: Found, reached, *, seed: int | None = None) -> None:
    """The engine confirms a break: the counterexample, run from the start on SQLite (a new store, no
    fork), reaches the state the search reached (``reached``: the search's store or model; every row of
    every table and of the event log, a fault's selector aside) and breaks the same invariant."""
    from .model import agreement
    from .runner import run_scenario

    store = run_scenario(counterexample(scenario, policy, found.path, found.faults, seed=seed), policy=policy, seed=seed)
    try:
        differ = agreement(reached, store, selectors=False)  # (a fault fired by its default names it so)
        broken = {r.name for r in check(store) if not r.ok}
    finally:
        store.close()
    if differ or found.invariant not in broken:
        raise NotConfirmed(f"the counterexample of {found.invariant} ({len(found.path)} deliveries, faults "
                           f"{', '.join(found.faults) or 'none'}) run from the start breaks {sorted(broken)}"
                           + (f"; it differs from the state the search reached: {differ[0]}" if differ else ""))


def placed_faults(run: Run) -> tuple[str, ...]:
    """The faults that fired in ``run``, each named by the message it hit (``duplicate:M-6``), in the
    order they fired: the same placement as the selectors given, written out."""
    out = []
    for selector, mid in run.bus._record.placed:
        name = selector.split(":", 1)[0]
        text = f"{name}:{mid}"
        if text not in out:
            out.append(text)
    return tuple(out)


def counterexample(scenario: Scenario, policy: str, path, faults, *, suffix: str = "counterexample",
                   seed: int | None = None) -> Scenario:
    """The scenario that replays ``path``: the faults placed on the messages they hit, the path as
    its delivery schedule, the policy pinned, and the seed (``seed``: the search's, when not the scenario's)."""
    return dataclasses.replace(scenario, name=f"{scenario.name}-{suffix}", faults=tuple(faults), policy=policy,
                               seed=scenario.seed if seed is None else seed,
                               deliveries=tuple((s.round, s.message_id) for s in path),
                               description=f"{len(path)} deliveries of {scenario.name} in one order")


def explore(scenario: Scenario, *, policy: str = "safe", seed: int | None = None, faults=(), depth: int = 14,
            plugins=None, progress: Callable[[Exploration], None] | None = None, every: int = 200,
            interrupt: Callable[[], bool] | None = None, invariants=None, place: bool = True,
            check_model: bool = False, engine: str = "sqlite") -> Exploration:
    """Explore every delivery order of ``scenario`` up to ``depth`` deliveries, and with ``place`` every
    placement of each fault given without a selector (at most once, or nowhere: on any message its default
    selector would pick, or with ``place="any"`` on any message of a type it can touch), breadth-first; stop at the first state that breaks an invariant (its path is a
    shortest one). Without ``place`` the faults fire where a run puts them (the first message each
    picks). ``invariants`` (names), when given, are the only ones judged (by default those of state,
    :data:`sim.invariants.STATE_INVARIANTS`): a state that breaks another goes on being explored (the grader's search under the naive consumer judges what the exercise is
    about, not what naive always breaks).

    ``engine`` is where each state's run keeps its state: ``"sqlite"`` (the engine's store, in memory) or
    ``"model"`` (the pure in-memory model, :mod:`sim.model`: the same runtime, agents and invariants on
    dicts instead of SQLite). With ``check_model`` (on SQLite) each state also carries a model driven by
    the run's inputs, and the model and the engine's store must agree on every row of every state visited
    (:class:`ModelDisagrees` otherwise; ``model_checked`` counts them). A break found
    is confirmed by the engine before it is returned: the counterexample, run from the start by
    :func:`sim.runner.run_scenario`, must reach the same state and break the same invariant
    (:class:`NotConfirmed` otherwise; a search through plugged-in code is confirmed by its own forks).

    ``progress(result)`` is told every ``every`` transitions. Ctrl-C (a KeyboardInterrupt, from anywhere in
    the search, ``progress`` included), or ``interrupt()`` answering true after a transition, ends the
    search with what was reached (``interrupted``; ``depth_reached`` is the depth fully explored)."""
    # (the invariants of state by default: a search hands the runtime orders no session would, and the
    # conversation's order is the session's job; the conversation's invariants judge runs)
    judged = frozenset(STATE_INVARIANTS if invariants is None else invariants)
    if depth < 1:
        raise InputError("--depth must be at least 1", code="E_USAGE")
    explore_args(faults)
    if engine not in ("sqlite", "model"):
        raise InputError(f"unknown engine {engine!r}; expected one of: 'sqlite' or 'model'", code="E_USAGE")
    if engine == "model" and scenario.gathers:
        raise InputError(f"{scenario.name} has gathers, which the model does not reduce: explore it on engine "
                         "'sqlite'", code="E_USAGE")
    if check_model and engine == "model":
        raise InputError("check_model compares the model with SQLite: explore on engine 'sqlite'", code="E_USAGE")
    result = Exploration(scenario.name, policy, tuple(faults), depth, engine=engine)
    t0 = time.perf_counter()
    level: deque[_Node] = deque()
    nxt: deque[_Node] = deque()
    seen: set[str] = set()

    def modelled(node: _Node, parent: _Node | None) -> None:
        from .model import Model, agreement, apply, ops_of

        ops, node.model_seq = ops_of(node.run.store, after=0 if parent is None else parent.model_seq)
        t = time.perf_counter()  # the model's own work (copy, inputs): its share of a state
        model = Model(start_time=scenario.start_time) if parent is None else parent.model.copy()
        for op in ops:
            apply(model, op, node.run.policy)
        result.model_seconds += time.perf_counter() - t
        node.model = model
        result.model_checked += 1
        differ = agreement(model, node.run.store)
        if differ:
            raise ModelDisagrees(f"after {[s.message_id for s in node.path]}: " + "; ".join(differ))

    def keep(node: _Node, into: deque) -> None:
        fp = fingerprint(node.run)
        if fp in seen:
            node.run.store.close()
            return
        seen.add(fp)
        result.states += 1
        if node.ended:
            result.ended += 1
            node.run.store.close()
        else:
            into.append(node)

    try:
        for root in starts(scenario, policy=policy, seed=seed, faults=faults, plugins=plugins, place=place,
                           engine=engine):
            if check_model:
                modelled(root, None)
            keep(root, level)  # (a first state: nothing delivered, nothing to judge)
        for d in range(1, depth + 1):
            nxt = deque()
            while level:
                node = level.popleft()
                for child in successors(node):
                    result.transitions += 1
                    if check_model:
                        modelled(child, node)
                    broken = [r for r in check(child.run.store, only=judged) if not r.ok]
                    if broken:
                        first = broken[0]
                        found = Found(first.name, first.description, first.witnesses[0], child.path,
                                      placed_faults(child.run), tuple(r.name for r in broken))
                        if plugins is None or not plugins.any():
                            confirm(scenario, policy, found, child.run.store, seed=seed)
                            result.confirmed = True
                        result.found = found
                        result.depth_reached = d
                        child.run.store.close()
                        node.run.store.close()
                        return result
                    keep(settle(child), nxt)
                    if progress is not None and result.transitions % every == 0:
                        result.seconds = time.perf_counter() - t0
                        progress(result)
                    if interrupt is not None and interrupt():
                        raise KeyboardInterrupt
                node.run.store.close()
            result.depth_reached = d
            level = nxt
            nxt = deque()
            if not level:
                result.exhausted = True
                break
    except KeyboardInterrupt:
        result.interrupted = True
    finally:
        result.seconds = time.perf_counter() - t0
        for node in (*level, *nxt):
            node.run.store.close()
    return result


# ---------------------------------------------------------------------------- the benchmark's floor


def _floor_search(scenario: Scenario, faults, depth: int) -> tuple[int, int]:
    """The same breadth-first search with state hashing over a minimal in-memory dict model of the
    story (no engine, no database): tasks move ready -> running -> succeeded on request, start and
    result; a publishing result commits its effect once; each worker answers when started; a manager
    assigns a task when its inputs succeeded and acks starts and results; ``duplicate`` delivers the
    first publishing result twice, ``late-failure`` sends a failure after the first success. Returns
    (states, transitions)."""
    names = {f.split(":", 1)[0] for f in faults}
    specs = {t.id: t for t in scenario.tasks}

    def sends(state: dict, msg: tuple) -> list[tuple]:
        kind, tid, n = msg
        out = []
        if kind == "request":
            out.append(("started", tid, n))
        elif kind == "started":
            out += [("ack", tid, n), ("result", tid, n)]
            if "duplicate" in names and specs[tid].publish and not state["dup"]:
                state["dup"] = True
                out.append(("result", tid, n + 1))
            if "late-failure" in names and not state["late"]:
                state["late"] = True
                out.append(("failed", tid, n))
        elif kind == "result":
            out.append(("ack", tid, n))
            for t in specs.values():
                if tid in t.after and t.id not in state["tasks"]:
                    out.append(("request", t.id, 0))
        return out

    def deliver(state: dict, msg: tuple) -> dict:
        s = {"tasks": dict(state["tasks"]), "effects": set(state["effects"]), "flight": list(state["flight"]),
             "dup": state["dup"], "late": state["late"]}
        s["flight"].remove(msg)
        kind, tid, _n = msg
        cur = s["tasks"].get(tid)
        if kind == "request" and cur is None:
            s["tasks"][tid] = "ready"
        elif kind == "started" and cur == "ready":
            s["tasks"][tid] = "running"
        elif kind == "result" and cur == "running":
            s["tasks"][tid] = "succeeded"
            if specs[tid].publish:
                s["effects"].add(("publish", tid))
        s["flight"] += sends(s, msg)
        return s

    def key(s: dict):
        return (tuple(sorted(s["tasks"].items())), tuple(sorted(s["effects"])), tuple(sorted(s["flight"])),
                s["dup"], s["late"])

    roots = [t.id for t in scenario.tasks if not t.after]
    root = {"tasks": {}, "effects": set(), "flight": [("request", t, 0) for t in roots], "dup": False, "late": False}
    seen, level, transitions = {key(root)}, [root], 0
    for _ in range(depth):
        nxt = []
        for s in level:
            for msg in sorted(set(s["flight"])):
                child = deliver(s, msg)
                transitions += 1
                k = key(child)
                if k not in seen:
                    seen.add(k)
                    nxt.append(child)
        level = nxt
        if not level:
            break
    return len(seen), transitions


def bench(scenario: Scenario, *, policy: str = "safe", faults=("duplicate", "late-failure"), depth: int = 10,
          progress: Callable[[str], None] | None = None) -> dict:
    """'protolab bench explore': states per second of :func:`explore` beside the floor (the same search
    over a dict model), measured in the same run: the search on SQLite (``project_per_s``), the same
    search on the pure model of the state (``model_per_s``, :mod:`sim.model`: the same runtime, agents
    and invariants, no SQLite), and on SQLite with a model checked against every state it visits
    (``checked_per_s``, ``model_checked`` states agreed)."""
    told = progress or (lambda what: None)
    told("the search on SQLite")
    result = explore(scenario, policy=policy, faults=faults, depth=depth)
    told("the search on the model")
    on_model = explore(scenario, policy=policy, faults=faults, depth=depth, engine="model")
    told("the search on SQLite, the model checked on each state")
    checked = explore(scenario, policy=policy, faults=faults, depth=depth, check_model=True)
    told("the floor")
    t0 = time.perf_counter()
    floor_states, floor_transitions = _floor_search(scenario, faults, depth)
    floor_s = max(time.perf_counter() - t0, 1e-9)
    project = result.states_per_second
    floor = floor_transitions / floor_s
    return {"scenario": scenario.name, "policy": policy, "faults": list(faults), "depth": depth,
            "states": result.states, "transitions": result.transitions, "seconds": round(result.seconds, 3),
            "exhausted": result.exhausted, "found": result.found.invariant if result.found else None,
            "project_per_s": round(project, 1),
            "model_per_s": round(on_model.states_per_second, 1), "model_states": on_model.states,
            "model_seconds": round(on_model.seconds, 3),
            "model_checked": checked.model_checked, "checked_per_s": round(checked.states_per_second, 1),
            "floor_states": floor_states, "floor_transitions": floor_transitions,
            "floor_seconds": round(floor_s, 4), "floor_per_s": round(floor, 1), "ratio": round(project / floor, 4)}
