"""A run of a scenario: its public entry points, and :class:`Run`, the run in progress.

:func:`run_scenario` runs a scenario's agents over a new store, round by round, and returns the
store; :func:`new_run` makes a run not yet started (:class:`sim.live.LiveRun` steps one by hand).
Before a file is written, :func:`prepare_db_path` refuses to replace anything but an earlier run of
the same scenario and :func:`refuse_lab_run` a lab's run (:func:`lab_run_in`, :func:`scenario_of`
read what a file holds); :func:`summarize` says what a run did.

:class:`Run` holds a run's state; its jobs live beside it: :mod:`sim.world` (the agents' view: tasks,
artifacts, intents made envelopes and sent), :mod:`sim.schedule` (the rounds, the clock of
deliveries, the stress window, the fence), :mod:`sim.recovery` (crashes, zombies, leases expired)
and :mod:`sim.runfile` (the file's life: written aside, renamed into place whole, partial files
swept).

Time is the round number; every random draw (faults, Faker) comes from generators seeded
with the run's seed, so the same scenario, seed, policy and faults give a byte-identical
database and the same state digest. The run is written to a temporary file and moved into
place only when it finished, so a failed run writes nothing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from .agents import Manager, Worker, Zombie
from .design import REFERENCE, EnvelopeDesign, Intent
from .envelope import Envelope
from .errors import InputError, ProtolabError, StoreError
from .faults import Bus, FaultSpec, parse_fault
from .gathers import Gathering
from .intake import TaskView
from .policy import Policy, get_policy
from .recovery import Recovery
from .runfile import discard_partial, partial_of, put_in_place, remove_stale_partials
from .scenario import Scenario, TaskSpec, bounds
from .session import Session
from .schedule import DeliveryPlan, Schedule
from .store import GROUP_COMMITS, Store, remove_database
from .world import RunWorld

#: A run's summary lists each task, effect and fault up to this many; past it, only their counts.
SUMMARY_LIST_LIMIT = 10_000

__all__ = ["Run", "run_scenario", "summarize", "prepare_db_path", "refuse_lab_run", "lab_run_in", "scenario_of", "LAB_META", "JOURNAL_META", "fault_specs", "unmatched_faults", "new_run", "remove_stale_partials"]


#: Rounds a safe runtime's session waits, once a later number from the same body is parked, before it has
#: the missing message sent again (sim.session).
RETRANSMIT_AFTER = 1


@dataclass
class Run(RunWorld, Recovery, Schedule, Gathering):
    """A run in progress: its state, made here; the agents' view of it (:class:`~sim.world.RunWorld`,
    the agents' :class:`~sim.agents.World`), its crashes (:class:`~sim.recovery.Recovery`) and its
    rounds (:class:`~sim.schedule.Schedule`) are the methods it inherits."""

    scenario: Scenario
    policy: Policy
    seed: int
    faults: list[FaultSpec]
    store: Store
    progress: object = None
    design: EnvelopeDesign = REFERENCE
    now: int = 0
    ids: Counter = field(default_factory=Counter)
    results: dict[str, Envelope] = field(default_factory=dict)
    sent_this_round: int = 0
    heartbeat: dict[str, int] = field(default_factory=dict)
    #: an explicit delivery schedule (:class:`~sim.schedule.DeliveryPlan`; None: what is due, in send order)
    plan: DeliveryPlan | None = None

    def __post_init__(self) -> None:
        from faker import Faker

        self.settings = self.scenario.settings
        self.trace = self.scenario.trace
        self.privacy = self.scenario.privacy
        self.rng = random.Random(self.seed)
        self.fake = Faker("en_US")
        self.fake.seed_instance(self.seed)
        self._t0 = datetime.fromisoformat(self.scenario.start_time.replace("Z", "+00:00")).astimezone(timezone.utc)
        self._times: dict[int, str] = {}  # tick -> its time text (RunWorld.time_at)
        self.bus = Bus(self.faults, self.rng, delay_ticks=self.settings.delay_ticks, next_id=self.next_id,
                       record=self._record, max_hold=self.settings.work_ticks + 2, on_copy=self._on_copy,
                       rebuild=self._rebuild, restamp=self._restamp)
        self.bus.peers = self._peers  # (a method, so a forked run's bus asks the fork: sim.explore._fork)
        # A runtime that keeps the conversation's rules takes each body's messages in sequence (sim.session):
        # a number still missing a round after a later one was parked is sent again (a fast retransmit).
        self.session: Session | None = None
        if self.policy.conversation_rules:
            self.session = Session(RETRANSMIT_AFTER)
            self.bus.on_push = self.session.track
        self.intents: dict[str, Intent] = {}  # message id -> the intent it was made from
        # a stress run forgets settled tasks; their intents go once nothing of theirs is on the bus
        self._messages_of: dict[str, list[str]] = {}
        self._forgotten: list[str] = []
        # What the transport knows of each send: (per-sender sequence, sender generation),
        # kept until the message is first delivered and stored with it.
        self._seq: Counter = Counter()
        self.sent_meta: dict[str, tuple[int, int]] = {}
        self.specs: dict[str, TaskSpec] = {}
        self._stress_next = 0
        if self.scenario.stress is None:
            self.specs = {t.id: t for t in self.scenario.tasks}
        self.manager = Manager(self, self._tasks_in_play)
        self.workers = {w: Worker(self, w, self.fake) for w in sorted(self.scenario.workers)}
        self.zombies: list[Zombie] = []
        self.orphans: list[tuple[str, int, Worker]] = []  # leases a crashed body asked for on other tasks
        self.unfinished = 0
        self._tasks: dict[str, TaskView | None] = {}
        self.fence: Envelope | None = None
        self.epoch = 1  # the conversation's protocol epoch: a reopening after the fence starts the next
        self.epoch_opened = 0  # the round the epoch opened (its deadline counts from it)
        self.conversation = bounds(self.scenario)  # the declared bounds (sim.scenario.bounds)
        self.timed_out_by_deadline = False  # the manager fenced at the deadline with work still open
        self.fenced_at = 0  # the round the manager last fenced the conversation
        self.reviews_done: set = set()  # the scenario's scripted reviews already made
        self.fence_epochs: dict[str, int] = {}  # each fence sent -> the epoch it closed
        self.bus.deadline = self._deadline_tick  # (methods, so a forked run's bus asks the fork)
        self.bus.ceiling = self._ceiling
        self.bus.expires_ticks = self.settings.expires_ticks
        self.bus.negotiate = self._negotiate_texts
        self._quiet_for = 0  # rounds in a row in which nothing was sent or delivered
        if self.plan is None and self.scenario.deliveries:
            self.plan = DeliveryPlan(self.scenario.deliveries, f"scenario {self.scenario.name}")


def scenario_of(db: Path) -> str | None:
    """The scenario whose run ``db`` holds (None: hand-delivered messages, not a simulator run)."""
    store = Store.open(db, readonly=True, verify=False)  # refuses corrupt, foreign and newer databases
    try:
        return store.get_meta("scenario")
    finally:
        store.close()


#: The meta keys of a lab's run: the lab's number (``sim.labs.judge.LAB_KEY``) and its journal
#: (``sim.labs.resume.JOURNAL_KEY``; a test holds them equal).
LAB_META = "lab"
JOURNAL_META = "lab_journal"


def lab_run_in(db: Path) -> str | None:
    """The lab whose run ``db`` holds (its ``lab`` meta, written by 'protolab lab start'), or None
    (no file, not a protolab database, or not a lab's run)."""
    if not Path(db).exists():
        return None
    try:
        store = Store.open(db, readonly=True, verify=False)
    except ProtolabError:
        return None
    try:
        return store.get_meta(LAB_META)
    finally:
        store.close()


def refuse_lab_run(db: Path, store: Store | None = None) -> None:
    """A lab's run is the learner's work: every command but the lab's own is refused here, in one place
    (E_DB_LAB_RUN).

    Without ``store``, ``db`` is about to be replaced (init, tour, run, demo, tui): no command but
    'protolab lab start N --fresh' replaces a lab's run. With ``store`` (``db`` opened to be written into
    by hand: deliver, reconcile, artifact put, machine load), a lab's simulator run is refused and
    ``store`` closed: only the lab writes it (what the learner does there is journaled, and 'lab verify'
    replays the journal, so a write from outside would make lab check judge another run than lab verify).
    A hand-delivery lab's run (no journal) is delivered into by hand: allowed."""
    if store is None:
        lab = lab_run_in(db)
        if lab is not None:
            raise StoreError(f"{db} holds your run of lab {lab}: it is your work, so it is not replaced. 'protolab lab "
                             f"start {lab}' reopens it, 'protolab lab start {lab} --fresh' starts the lab over; or choose "
                             "another --db", code="E_DB_LAB_RUN")
        return
    lab = store.get_meta(LAB_META)
    if lab is not None and store.get_meta(JOURNAL_META) is not None:
        store.close()
        raise InputError(f"{db} holds your run of lab {lab}, which only the lab writes (what you do there is "
                         f"journaled, and 'lab verify' replays the journal): play it in 'protolab lab start {lab}',"
                         " or write into another --db", code="E_DB_LAB_RUN")


def prepare_db_path(db: Path, scenario: str) -> None:
    """Refuse to overwrite anything but an earlier run of the same scenario (and never a lab's run)."""
    if not db.exists():
        if not db.parent.exists():
            raise StoreError(f"folder {db.parent} does not exist", code="E_DB_MISSING")
        return
    store = Store.open(db, readonly=True, verify=False)  # refuses corrupt, foreign and newer databases
    try:
        previous = store.get_meta("scenario")
        lab = store.get_meta("lab")
    finally:
        store.close()
    if lab is not None:
        refuse_lab_run(db)
    if previous is None:
        raise StoreError(
            f"{db} holds hand-delivered messages, not a simulator run; choose another --db", code="E_DB_OTHER_SCENARIO"
        )
    if previous != scenario:
        raise StoreError(
            f"{db} holds a run of scenario {previous!r}, not {scenario!r}; choose another --db or delete it",
            code="E_DB_OTHER_SCENARIO",
        )


def fault_specs(scenario: Scenario, faults=()) -> list[FaultSpec]:
    """The scenario's own faults, then the ones asked for, then the stress mix."""
    specs = [parse_fault(f) for f in (*scenario.faults, *faults)]
    if scenario.stress is not None:
        # The stress mix: a share of envelopes delivered twice, a share sent again with another payload.
        for name, rate in (("duplicate", scenario.stress.duplicate_rate), ("conflicting-digest", scenario.stress.conflict_rate)):
            if rate > 0:
                specs.append(parse_fault(f"{name}:{rate}"))
    return specs


def unmatched_faults(run: Run) -> list[str]:
    """Fault selectors that named a message or type this run never sent."""
    return [s.text for s in run.faults if s.kind in ("message", "type", "default") and run.bus.matched[s.text] == 0]


def start_run(scenario: Scenario, policy: Policy, seed: int, specs: list[FaultSpec], store, progress=None, *,
              design: EnvelopeDesign | None = None, plugged: dict | None = None) -> Run:
    """A run not yet started on ``store`` (a new :class:`Store`, or explore's model): its meta recorded,
    the policy as the design allows it."""
    meta = {
        "scenario": scenario.name, "seed": str(seed), "policy": policy.name,
        "faults": ",".join(s.text for s in specs),
        # the conversation's declared bounds, fixed before anything is sent (sim.scenario.bounds)
        "conversation": json.dumps(bounds(scenario), sort_keys=True),
    }
    if scenario.privacy:  # only a run that declares sensitive fields says so (others stay byte for byte)
        meta["privacy"] = scenario.privacy.to_meta()
    # Only a run that plugs something in says so: a reference run's file stays byte for byte as it was.
    meta.update({f"plugin_{k}": v for k, v in (plugged or {}).items()})
    store.set_meta(meta)
    if design is not None and design is not REFERENCE:
        # A plugged envelope design decides what its payloads carry (exercise 1 grades exactly that);
        # the declared shapes (sim.versions.SHAPES) are those of the reference design's messages.
        policy = dataclasses.replace(policy, closed_payloads=False)
    return Run(scenario, policy, seed, specs, store, progress, design=design or REFERENCE)


def new_run(scenario: Scenario, policy: Policy, seed: int | None, specs: list[FaultSpec], path: Path | None,
            progress=None, *, design: EnvelopeDesign | None = None, rulebook=None, plugged: dict | None = None,
            tracer=None) -> Run:
    """A run not yet started, on a new store at ``path`` (``None``: in memory), its meta recorded.

    ``design`` replaces the reference envelope design, ``rulebook`` the default machine;
    ``plugged`` (from :meth:`sim.plugins.Plugins.meta`) records which files were plugged in."""
    seed = scenario.seed if seed is None else seed
    if path is not None:
        remove_database(path)
    store = Store.create(path, start_time=scenario.start_time, rulebook=rulebook, tracer=tracer)
    try:
        return start_run(scenario, policy, seed, specs, store, progress, design=design, plugged=plugged)
    except BaseException:
        store.close()
        raise


def run_scenario(
    scenario: Scenario,
    *,
    policy: str | Policy = "safe",
    seed: int | None = None,
    faults: list[str] | tuple[str, ...] = (),
    db: str | os.PathLike | None = None,
    progress=None,
    plugins=None,
    strict_faults: bool = True,
    tracer=None,
    group_commits: int = GROUP_COMMITS,
    on_delivery=None,
    agents: dict[str, list[str]] | None = None,
    agent_deadline: float | None = None,
) -> Store:
    """Run ``scenario`` and return its store (open). With ``db``, the file appears only on success.

    ``plugins`` (a :class:`sim.plugins.Plugins`) names files that replace the reference envelope
    design, intake, effect rule or machine; each is loaded (and refused) before anything is written.
    ``tracer`` sees every statement the run's store executes (a benchmark records the writes).
    ``group_commits``: one COMMIT every this many deliveries (1: one per delivery); the rows are the same.
    ``on_delivery`` is called with each delivery's :class:`~sim.runtime.Outcome` and the run's store as it
    happens (a benchmark pauses its clock there).
    ``agents`` maps a worker's role to the command of a process that plays it (:mod:`sim.procagent`),
    ``agent_deadline`` the seconds the kit waits for its answer before it calls it silent."""
    design, rulebook, plugged = None, None, None
    if plugins is not None and plugins.any():
        design, pol, rulebook = plugins.load(policy)
        plugged = plugins.meta()
    else:
        pol = get_policy(policy) if isinstance(policy, str) else policy
    specs = fault_specs(scenario, faults)
    if agents:
        import shlex

        plugged = {**(plugged or {}), **{f"agent_{role}": shlex.join(argv) for role, argv in sorted(agents.items())}}
    tmp = None
    if db is not None:
        db = Path(db)
        prepare_db_path(db, scenario.name)
        remove_stale_partials(db)
        tmp = partial_of(db)
    store = run = None
    try:  # from the first byte written: whatever ends the run early, the partial file goes
        run = new_run(scenario, pol, seed, specs, tmp, progress, design=design, rulebook=rulebook, plugged=plugged,
                      tracer=tracer)
        store = run.store
        if agents:
            from .procagent import DEFAULT_DEADLINE, close_agents, install_agents

            install_agents(run, agents, deadline=DEFAULT_DEADLINE if agent_deadline is None else agent_deadline)
        # A batch run commits in groups: nothing of it is --db until it is whole (the rename below),
        # so a commit per delivery would buy no durability a user can see (docs/architecture.md).
        with store.group_commits(group_commits):
            if on_delivery is None:
                run.run()
            else:
                for out in run.steps():
                    on_delivery(out, store)
            unmatched = unmatched_faults(run) if strict_faults else []
            if unmatched:
                raise InputError(
                    f"fault selector {unmatched[0]} matched no message in this run of {scenario.name}",
                    code="E_FAULT_NO_MATCH"
                )
            if agents:
                close_agents(run)
            run.seal()
    except BaseException as e:
        if agents and run is not None:
            from .procagent import close_agents

            close_agents(run)
        if store is not None:
            store.close()
        if tmp is not None:
            discard_partial(tmp, db, e)  # a StoreError is raised again naming db
        raise
    if tmp is not None:
        put_in_place(store, tmp, db)  # checked whole, then one atomic rename: the old database or the new one
        store = Store.open(db, verify=False)  # just written and closed by this process
    return store

def summarize(store: Store, results=None) -> dict:
    """What a run did: the figures ``run --json`` prints (``results``: the invariants' verdicts, when
    the caller has them already; the figures themselves are aggregated in SQL)."""
    from .invariants import check

    agg = store.run_summary(SUMMARY_LIST_LIMIT)
    if results is None:
        results = check(store)
    return {
        "scenario": store.get_meta("scenario"),
        "seed": int(store.get_meta("seed") or 0),
        "policy": store.get_meta("policy"),
        "faults": [f for f in (store.get_meta("faults") or "").split(",") if f],
        "rounds": int(store.get_meta("rounds") or 0),
        "state_digest": store.state_digest(),
        # each task, effect and fault is listed up to 10,000 of them; the counts are always there
        **({"tasks": agg["tasks"]} if "tasks" in agg else {}),
        "tasks_by_state": agg["tasks_by_state"],
        "counts": {k: agg[k] for k in ("messages", "deliveries", "events", "deliveries_by_decision", "events_by_type")},
        **({"effects": agg["effects"]} if "effects" in agg else {}),
        "effects_committed": agg["effects_committed"],
        **({"faults_injected": agg["faults_injected"]} if "faults_injected" in agg else {}),
        "faults_by_kind": agg["faults_by_kind"],
        "invariants": {r.name: r.ok for r in results},
        "plugins": {k[len("plugin_"):]: store.get_meta(k) for k in ("plugin_design", "plugin_intake", "plugin_effects",
                                                                  "plugin_machine") if store.get_meta(k)},
        "unfinished": int(store.get_meta("unfinished") or 0),
    }
