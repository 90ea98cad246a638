"""The seeded scheduler: runs a scenario's agents over the store, round by round.

Each round (one logical tick):
1. the runtime's lease monitor expires leases whose holder stopped heartbeating (crashed);
2. the manager, then each worker (sorted), then any zombie acts: they read tasks and send;
3. the transport delivers every envelope due this round, in send order, through the runtime.

Time is the round number; every random draw (faults, Faker) comes from generators seeded
with the run's seed, so the same scenario, seed, policy and faults give a byte-identical
database and the same state digest. The run is written to a temporary file and moved into
place only when it finished, so a failed run writes nothing.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

from .agents import DONE, Manager, Worker, Zombie, _Job
from .design import REFERENCE, EnvelopeDesign, Intent, build_from
from .envelope import Envelope, build_envelope
from .errors import InputError, ProtolabError, StoreError
from .faults import Bus, FaultSpec, parse_fault
from .intake import TaskView
from .machine import TaskState
from .policy import Policy, get_policy
from .runtime import Outcome, deliver, expire_lease, put_artifact, record_fault
from .scenario import Scenario, TaskSpec
from .store import GROUP_COMMITS, SIDE_FILES, Store, remove_database

#: A run's summary lists each task, effect and fault up to this many; past it, only their counts.
SUMMARY_LIST_LIMIT = 10_000

__all__ = ["Run", "run_scenario", "summarize", "prepare_db_path", "refuse_lab_run", "lab_run_in", "scenario_of", "LAB_META", "JOURNAL_META", "fault_specs", "unmatched_faults", "new_run"]


@dataclass
class Run:
    """A run in progress (it is the agents' :class:`~sim.agents.World`)."""

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

    def __post_init__(self) -> None:
        from faker import Faker

        self.settings = self.scenario.settings
        self.trace = self.scenario.trace
        self.privacy = self.scenario.privacy
        self.rng = random.Random(self.seed)
        self.fake = Faker("en_US")
        self.fake.seed_instance(self.seed)
        self._t0 = datetime.fromisoformat(self.scenario.start_time.replace("Z", "+00:00")).astimezone(timezone.utc)
        self.bus = Bus(self.faults, self.rng, delay_ticks=self.settings.delay_ticks, next_id=self.next_id,
                       record=self._record, max_hold=self.settings.work_ticks + 2, on_copy=self._on_copy,
                       rebuild=self._rebuild)
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

    # ---------------------------------------------------------------- World

    def task(self, task_id: str) -> TaskView | None:
        # Agents poll tasks every round; a task only changes when a delivery or the lease
        # monitor touches it, and both drop it from this cache.
        try:
            return self._tasks[task_id]
        except KeyError:
            view = self._tasks[task_id] = self.store.get_task(task_id)
            return view

    def result_of(self, task_id: str) -> Intent | None:
        env = self.results.get(task_id)
        return self.intents.get(env.message_id) if env is not None else None

    def sent_intent(self, env: Envelope) -> Intent:
        """The intent ``env`` was made from (what its sender meant, whatever the design wrote)."""
        return self.intents[env.message_id]

    def put_artifact(self, content, kind: str, task_id: str) -> str:
        return put_artifact(self.store, content, kind=kind, task_id=task_id, tick=self.now)

    def next_id(self, prefix: str) -> str:
        self.ids[prefix] += 1
        return f"{prefix}-{self.ids[prefix]}"

    def time(self) -> str:
        return self.time_at(self.now)

    def time_at(self, tick: int) -> str:
        return (self._t0 + timedelta(seconds=tick)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def say(self, type, sender, recipient, task_id, body, *, attempt=1, retry=0, answers=None, refs=(), content=None,
            context=None, prefix="M", generation=None) -> Envelope:
        intent = Intent(
            type=type, sender=sender, recipient=recipient, trace_id=self.trace, task_id=task_id, attempt=attempt,
            retry=retry, answers=answers, body=body, refs=tuple(refs), content=content, context=context or {},
            message_id=self.next_id(prefix), created_at=self.time(),
        )
        env = self._build(intent)
        self._keep(env.message_id, intent)
        if generation is None:
            w = self.workers.get(sender)
            generation = w.generation if w is not None else 1
        if sender in self.bus.silenced and type in ("task_started", "task_result"):
            return env  # a silent worker (fault silent) says nothing about its work: nothing is sent
        self._stamp(env, generation)
        self.sent_this_round += 1
        env = self.bus.send(env, self.now)
        if sender in self.bus.silenced and type in ("task_started", "task_result"):
            # the message that made it silent was never sent either: its sequence number is not used
            self._seq[(sender, generation)] -= 1
            self.sent_meta.pop(env.message_id, None)
            self.sent_this_round -= 1
        for worker_id, after in self.bus.crashed:
            self._crash(worker_id, after.task_id, self.intents[after.message_id].attempt)
        self.bus.crashed.clear()
        return env

    def _rebuild(self, env: Envelope, rewrite, due: int) -> Envelope:
        """The envelope a fault makes by asking the sender's design again: ``rewrite`` (declared
        beside its fault in :mod:`sim.faults`) turns the intent behind ``env`` into the one sent
        (a new message id and ``due``'s time are there if it wants them) and the one still meant."""
        intent = self.intents[env.message_id]
        sent, meant = rewrite(intent, lambda: self.next_id(env.message_id.split("-")[0]), self.time_at(due - 1))
        out = self._build(sent, schema_version=env.schema_version)
        self._keep(out.message_id, meant)
        return out

    def _build(self, intent: Intent, schema_version: str = "1") -> Envelope:
        """The envelope the design makes of ``intent``; under a policy that minimises, without the
        sensitive fields its recipient does not need (sim.privacy), digested as sent."""
        env = build_from(self.design, intent, schema_version=schema_version)
        if self.privacy and self.policy.minimise and self.privacy.unneeded(env.payload, env.recipient):
            env = build_envelope(
                message_id=env.message_id, trace_id=env.trace_id, task_id=env.task_id, sender=env.sender,
                recipient=env.recipient, type=env.type, payload=self.privacy.minimise(env.payload, env.recipient),
                idempotency_key=env.idempotency_key, created_at=env.created_at, evidence_refs=list(env.evidence_refs),
                digest_scheme=env.digest_scheme, schema_version=env.schema_version,
            )
        return env

    def _keep(self, message_id: str, intent: Intent) -> None:
        self.intents[message_id] = intent
        self._messages_of.setdefault(intent.task_id, []).append(message_id)

    def _prune(self) -> None:
        """Drop the intents of forgotten tasks that have nothing left on the bus (flat memory at any
        run size: a stress run keeps only its window of tasks)."""
        if not self._forgotten:
            return
        busy = self.bus.carrying()
        keep = []
        for tid in self._forgotten:
            if tid in busy:
                keep.append(tid)
                continue
            for mid in self._messages_of.pop(tid, ()):
                self.intents.pop(mid, None)
        self._forgotten = keep

    def _stamp(self, env: Envelope, generation: int) -> None:
        self._seq[(env.sender, generation)] += 1
        self.sent_meta[env.message_id] = (self._seq[(env.sender, generation)], generation)

    def _on_copy(self, orig: Envelope, new: Envelope, same_seq: bool) -> None:
        if new.message_id not in self.intents and orig.message_id in self.intents:
            self._keep(new.message_id, self.intents[orig.message_id])
        seq, gen = self.sent_meta.get(orig.message_id, (0, 1))
        if same_seq:
            self.sent_meta[new.message_id] = (seq, gen)
        else:
            self._stamp(new, gen)

    def _record(self, fault: str, env: Envelope, detail: dict) -> None:
        record_fault(self.store, fault, message_id=env.message_id, task_id=env.task_id, detail=detail, tick=self.now)

    # ---------------------------------------------------------------- tasks in play

    def _tasks_in_play(self) -> list[TaskSpec]:
        st = self.scenario.stress
        if st is None:
            return list(self.specs.values())
        # Stress: keep at most `window` tasks in flight; forget the ones that are done.
        for tid in [t for t in self.specs if self._settled(t)]:
            del self.specs[tid]
            self.results.pop(tid, None)
            self.manager.sent.pop(tid, None)
            self._tasks.pop(tid, None)
            self._forgotten.append(tid)
        self._prune()
        workers = sorted(self.scenario.workers)
        while len(self.specs) < st.window and self._stress_next < st.tasks:
            self._stress_next += 1
            i = self._stress_next
            w = workers[i % len(workers)]
            tid = f"T-{i}"
            self.specs[tid] = TaskSpec(tid, f"collect evidence {i}", w, "research")
        return list(self.specs.values())

    def _settled(self, task_id: str) -> bool:
        t = self.task(task_id)
        return t is not None and t.state in DONE

    # ---------------------------------------------------------------- crash and recovery

    def _crash(self, worker_id: str, task_id: str, lease: int) -> None:
        """``worker_id`` dies holding (or asking for) lease ``lease`` on ``task_id``."""
        dead = self.workers[worker_id]
        dead.dead = True
        self.zombies.append(Zombie(dead, task_id, lease))
        # A restarted body of the same participant: it gets the dead one's other assignments back
        # (what was asked of it, not its progress), and the leases the dead one asked for are watched.
        fresh = Worker(self, worker_id, self.fake, generation=dead.generation + 1)
        for tid, job in dead.jobs.items():
            if tid == task_id:
                continue
            fresh.jobs[tid] = _Job(job.spec, job.inputs)
            if job.lease:
                self.orphans.append((tid, job.lease, dead))
        self.workers[worker_id] = fresh
        self.heartbeat[worker_id + f"#{dead.generation}"] = self.now

    def crash_now(self, worker_id: str) -> tuple[str, int]:
        """Crash ``worker_id`` by hand, mid-task: returns the task and lease it dies holding."""
        w = self.workers.get(worker_id)
        if w is None:
            raise InputError(
                f"no worker {worker_id!r} in this run; workers: {', '.join(sorted(self.workers))}", code="E_UNKNOWN_WORKER"
            )
        holding = [(tid, job) for tid, job in sorted(w.jobs.items()) if job.lease and job.result is None]
        if not holding:
            raise InputError(
                f"{worker_id} holds no lease right now; step until it starts a task, then crash it", code="E_NOTHING_TO_CRASH"
            )
        tid, job = holding[0]
        record_fault(self.store, "crash", message_id=None, task_id=tid,
                     detail={"selector": "by hand", "worker": worker_id, "lease_version": job.lease}, tick=self.now)
        self._crash(worker_id, tid, job.lease)
        self._tasks.pop(tid, None)
        return tid, job.lease

    def reviewed(self, task_id: str, released: bool) -> None:
        """A reviewer decided ``task_id`` outside the rounds (it took the store's next tick). A task
        released to ready goes back to its assignee, who starts a new attempt with a fresh lease."""
        self.now = max(self.now, self.store.tick)
        self._tasks.pop(task_id, None)
        task = self.task(task_id)
        spec = self.specs.get(task_id)
        worker = self.workers.get(task.assignee) if task is not None and task.assignee else None
        if released and spec is not None and worker is not None:
            worker.jobs[task_id] = _Job(spec, tuple(self.manager._inputs(spec) or ()))

    def reopen(self) -> None:
        """A reviewer's accepted decision after the fence reopens the conversation in its next epoch
        (see :func:`sim.conversation.epochs_of`): the manager fences it again once all has settled."""
        if self.fence is not None:
            self.fence = None
            self.epoch += 1

    def seal(self) -> None:
        """Record in meta how the run ended."""
        self.store.set_meta({"rounds": str(self.now), "unfinished": str(self.unfinished),
                             "commits": str(self.store.commits + 1)})

    def _expire_leases(self) -> None:
        # Live workers heartbeat every round; a crashed holder's lease runs out after lease_ticks.
        for z in list(self.zombies):
            t = self.task(z.task_id)
            died = self.heartbeat.get(z.worker.id + f"#{z.worker.generation}", self.now)
            if (t is not None and t.state == TaskState.READY and t.lease_version < z.lease and not z.done
                    and self.now - died >= self.settings.retry_ticks):
                # The start it died after never took effect: no lease to expire, nothing to commit.
                old = z.worker.jobs.get(z.task_id)
                if old is not None:
                    self.workers[z.worker.id].jobs.setdefault(z.task_id, _Job(old.spec, old.inputs))
                self.zombies.remove(z)
                continue
            if t is None or t.state != TaskState.RUNNING or t.lease_version != z.lease:
                continue
            if self.now - died >= self.settings.lease_ticks:
                expire_lease(self.store, z.task_id, tick=self.now)
                self._tasks.pop(z.task_id, None)
        for tid, lease, body in list(self.orphans):
            t = self.task(tid)
            if t is None or t.state in DONE or t.lease_version > lease:
                self.orphans.remove((tid, lease, body))
                continue
            if t.state != TaskState.RUNNING or t.lease_version != lease:
                continue
            died = self.heartbeat.get(body.id + f"#{body.generation}", self.now)
            if self.now - died >= self.settings.lease_ticks:
                expire_lease(self.store, tid, tick=self.now)
                self._tasks.pop(tid, None)
                self.orphans.remove((tid, lease, body))

    # ---------------------------------------------------------------- the loop

    def _deliver_due(self) -> Iterator[Outcome]:
        """Deliver what is due this round, one envelope at a time (a generator: the TUI steps it)."""
        for env in self.bus.due(self.now):
            out = deliver(self.store, env, policy=self.policy, tick=self.now, sent=self.sent_meta.pop(env.message_id, None))
            self._tasks.pop(env.task_id, None)
            self.manager.on_delivery(env, out.decision)
            w = self.workers.get(env.recipient)
            intent = self.intents.get(env.message_id)
            if w is not None:
                w.on_delivery(env, out.decision, self.specs.get(env.task_id), intent)
            if env.type == "fence" and out.decision == "accepted":
                for wid in (intent.body if intent is not None else env.payload)["to"]:
                    if wid in self.workers:
                        self.workers[wid].on_fence(env)
            if out.decision == "accepted" and env.type == "task_result" and env.payload.get("status") == "succeeded":
                self.results[env.task_id] = env
            yield out

    def _settled_all(self) -> bool:
        st = self.scenario.stress
        if st is not None and self._stress_next < st.tasks:
            return False
        return all(self._settled(s.id) or self._blocked(s) for s in self._tasks_in_play())

    def _send_fence(self) -> None:
        """Every task has settled: the manager fences the conversation; the workers must ack it."""
        states = [self.task(s.id) for s in self.specs.values()] if self.scenario.stress is None else []
        if self.manager.timed_out:
            terminal = "TIMED_OUT"  # a gather's deadline passed with inputs missing
        elif any(t is None or t.state in (TaskState.NEEDS_REVIEW, TaskState.FAILED, TaskState.DENIED) for t in states):
            terminal = "BLOCKED"
        elif any(t.state == TaskState.CANCELED for t in states):
            terminal = "CANCELLED"
        else:
            terminal = "COMPLETED"
        workers = sorted(self.workers)
        self.fence = self.say("fence", "manager", workers[0], self.trace, {"to": workers, "terminal": terminal},
                              attempt=self.epoch)

    def _quiet(self) -> bool:
        if self.fence is None or len(self.bus) or any(not z.done for z in self.zombies):
            return False
        st = self.scenario.stress
        if st is not None and self._stress_next < st.tasks:
            return False
        return all(self._settled(s.id) or self._blocked(s) for s in self._tasks_in_play())

    def _blocked(self, spec: TaskSpec) -> bool:
        """A task whose inputs can no longer all succeed waits forever: not the run's business.

        A task already handed out (created, or its request in flight) is in play whatever became
        of its inputs since: the conversation is not fenced while its work is still under way."""
        if self.task(spec.id) is not None or spec.id in self.manager.sent:
            return False
        for dep in spec.after:
            t = self.task(dep)
            if t is not None and t.state in DONE and t.state != TaskState.SUCCEEDED:
                return True
            if t is not None and t.state not in DONE:
                return False
            if t is None:
                dep_spec = self.specs.get(dep)
                return dep_spec is not None and self._blocked(dep_spec)
        return False

    def run(self) -> None:
        for _ in self.steps():
            pass

    def steps(self) -> Iterator[Outcome]:
        """The run, one delivery at a time: yields each delivery's outcome as it happens.

        Exhausting it is :meth:`run`. After it ends, calling it again carries on from the
        current round (the TUI does so when a fault injected by hand puts more on the bus).
        """
        s = self.settings
        quiet_for = 0
        bar_total = self.scenario.stress.tasks if self.scenario.stress else len(self.specs)
        job = self.progress.add_task(f"{self.scenario.name} ({self.policy.name})", total=bar_total) if self.progress else None
        while self.now < s.max_rounds:
            self.now += 1
            self.sent_this_round = 0
            self._expire_leases()
            self.manager.act(self.now)
            if self.fence is None and self._settled_all():
                self._send_fence()
            # A crashed worker's old body acts as soon as it notices the recovery: its stale
            # commit races the recovered worker's, which is the case fencing must win.
            for z in self.zombies:
                z.act(self.now)
            for wid in sorted(self.workers):
                self.workers[wid].act(self.now)
            self.bus.release_held(self.now)
            delivered = 0
            for out in self._deliver_due():
                delivered += 1
                yield out
            if self.progress is not None and self.now % 25 == 0:
                done = (self._stress_next - len(self.specs)) if self.scenario.stress else sum(self._settled(t) for t in self.specs)
                self.progress.update(job, completed=done)
            if self.sent_this_round or delivered:
                quiet_for = 0
            else:
                quiet_for += 1
            # Quiet long enough for every retry timer to have fired: nothing more will happen.
            if quiet_for > s.retry_ticks and self._quiet():
                break
        if self.progress is not None:
            self.progress.update(job, completed=bar_total)
        self.unfinished = sum(1 for sp in self._tasks_in_play() if not self._settled(sp.id) and not self._blocked(sp))


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
        meta = {
            "scenario": scenario.name, "seed": str(seed), "policy": policy.name,
            "faults": ",".join(s.text for s in specs),
        }
        if scenario.privacy:  # only a run that declares sensitive fields says so (others stay byte for byte)
            meta["privacy"] = scenario.privacy.to_meta()
        # Only a run that plugs something in says so: a reference run's file stays byte for byte as it was.
        meta.update({f"plugin_{k}": v for k, v in (plugged or {}).items()})
        store.set_meta(meta)
        return Run(scenario, policy, seed, specs, store, progress, design=design or REFERENCE)
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
) -> Store:
    """Run ``scenario`` and return its store (open). With ``db``, the file appears only on success.

    ``plugins`` (a :class:`sim.plugins.Plugins`) names files that replace the reference envelope
    design, intake, effect rule or machine; each is loaded (and refused) before anything is written.
    ``tracer`` sees every statement the run's store executes (a benchmark records the writes).
    ``group_commits``: one COMMIT every this many deliveries (1: one per delivery); the rows are the same."""
    design, rulebook, plugged = None, None, None
    if plugins is not None and plugins.any():
        design, pol, rulebook = plugins.load(policy)
        plugged = plugins.meta()
    else:
        pol = get_policy(policy) if isinstance(policy, str) else policy
    specs = fault_specs(scenario, faults)
    tmp = None
    if db is not None:
        db = Path(db)
        prepare_db_path(db, scenario.name)
        remove_stale_partials(db)
        tmp = db.with_name(f".{db.name}.partial-{os.getpid()}")
    store = None
    try:  # from the first byte written: whatever ends the run early, the partial file goes
        run = new_run(scenario, pol, seed, specs, tmp, progress, design=design, rulebook=rulebook, plugged=plugged,
                      tracer=tracer)
        store = run.store
        # A batch run commits in groups: nothing of it is --db until it is whole (the rename below),
        # so a commit per delivery would buy no durability a user can see (docs/architecture.md).
        with store.group_commits(group_commits):
            run.run()
            unmatched = unmatched_faults(run) if strict_faults else []
            if unmatched:
                raise InputError(
                    f"fault selector {unmatched[0]} matched no message in this run of {scenario.name}",
                    code="E_FAULT_NO_MATCH"
                )
            run.seal()
    except BaseException as e:
        if store is not None:
            store.close()
        if tmp is not None:
            remove_database(tmp)
            if isinstance(e, StoreError):  # name the file the user asked for, not the partial one
                raise StoreError(f"{e.message.replace(str(tmp), str(db))}; nothing was written to {db}",
                                 code=e.code) from None
        raise
    if tmp is not None:
        store.close()
        # The old file's side files go first (a stale -wal would be read into the new file); the
        # old file itself is replaced in one atomic rename, so a kill at any moment leaves either
        # the old database or the new one whole, never neither.
        remove_database(db, side_files_only=True)
        os.replace(tmp, db)
        store = Store.open(db, verify=False)  # just written and closed by this process
    return store


def remove_stale_partials(db: Path) -> list[Path]:
    """Remove the partial files (``.NAME.partial-PID`` and their -wal/-shm/-journal) that a run of ``db``
    left when its process died without cleaning up (kill -9, power loss); a live process's stay."""
    removed = []
    for p in db.parent.glob(f".{db.name}.partial-*"):
        base = p.name
        for side in SIDE_FILES:
            base = base.removesuffix(side)
        pid = base.rsplit("-", 1)[-1]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # alive (or not ours to signal): leave it
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        p.unlink(missing_ok=True)
        removed.append(p)
    return removed


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
