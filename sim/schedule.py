"""The rounds of a run and the clock of its deliveries.

Each round (one logical tick):
1. the lease monitor expires leases whose holder stopped heartbeating (:mod:`sim.recovery`);
2. the manager, then the fence once every task has settled, then any zombie, then each worker
   (sorted) acts: they read tasks and send;
3. the transport releases what it held and delivers every envelope due this round, in send order,
   through the runtime; each outcome goes back to the manager and the recipient.

A stress run keeps a window of tasks in play and forgets settled ones (flat memory at any size). The
run ends when it has been quiet long enough for every retry timer to have fired, or at max_rounds.
A reviewer's decision outside the rounds (:meth:`Schedule.reviewed`) and a reopening after the fence
(:meth:`Schedule.reopen`) come from a run driven by hand (:class:`sim.live.LiveRun`).

A part of :class:`sim.runner.Run`, which holds the state.
"""

from __future__ import annotations

from typing import Iterator

from .agents import DONE, _Job
from .errors import InputError
from .machine import TaskState
from .runtime import Outcome, deliver, record_copy_dropped, record_sent_again
from .scenario import TaskSpec

__all__ = ["Schedule", "DeliveryPlan", "FENCE_MARGIN"]

#: Rounds before an epoch's deadline at which a manager whose tasks have not all settled fences the
#: conversation TIMED_OUT: its fence arrives the next round and the acknowledgements the round after.
FENCE_MARGIN = 3


class Schedule:
    """The rounds, the stress window, the fence, and how the run ended."""

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
            # (a task only a task_request for it creates, and none was sent: the agents' view of it is
            # "none yet" without a read, until the delivery that creates it hands them the view after it)
            self._tasks.setdefault(tid, None)
        return list(self.specs.values())

    def _settled(self, task_id: str) -> bool:
        t = self.task(task_id)
        return t is not None and t.state in DONE

    def _prune(self) -> None:
        """Drop the intents of forgotten tasks that have nothing left on the bus (flat memory at any
        run size: a stress run keeps only its window of tasks)."""
        if not self._forgotten:
            return
        busy = self.bus.carrying() | (self.session.tasks() if self.session is not None else set())
        sent = self.bus.sent  # (what the transport keeps for faults injected by hand: forgotten alike)
        keep = []
        for tid in self._forgotten:
            if tid in busy:
                keep.append(tid)
                continue
            for mid in self._messages_of.pop(tid, ()):
                self.intents.pop(mid, None)
                if sent is not None:
                    sent.pop(mid, None)
        self._forgotten = keep

    # ---------------------------------------------------------------- outside the rounds

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
            self.manager.fenced = False
            self.epoch += 1
            self.epoch_opened = self.now  # the new epoch's deadline counts from here
            self.bus.release_stragglers(self.now + 1)  # what was held for the next epoch arrives in it

    def _scripted_reviews(self) -> None:
        """The reviewers' decisions the scenario scripts (``[[review]]``), each once, ``after`` rounds after
        the manager fenced the conversation: delivered through intake as a decision read from the task as it
        is now, citing the task's results; one the runtime accepts reopens the conversation."""
        if self.fence is None or not self.scenario.reviews:
            return
        from .runtime import review

        for spec in self.scenario.reviews:
            if spec in self.reviews_done or self.now < self.fenced_at + spec.after:
                continue
            self.reviews_done.add(spec)
            task = self.task(spec.task)
            if task is None:
                continue
            cited = [m["message_id"] for m in self.store.messages() if m["task_id"] == spec.task
                     and m["type"] == "task_result"] or [m["message_id"] for m in self.store.messages()
                                                        if m["task_id"] == spec.task][:1]
            out = review(self.store, spec.task, spec.decision, by="reviewer", evidence=sorted(set(cited)),
                         read_version=task.state_version, tick=self.now, policy=self.policy)
            self.reviewed(spec.task, released=out.decision == "accepted" and spec.decision == "ready")
            if out.decision == "accepted":
                self.reopen()

    def seal(self) -> None:
        """Record in meta how the run ended."""
        self.store.set_meta({"rounds": str(self.now), "unfinished": str(self.unfinished),
                             "commits": str(self.store.commits + 1)})

    # ---------------------------------------------------------------- the loop

    def _deliver_due(self) -> Iterator[Outcome]:
        """Deliver what is due this round, one envelope at a time (a generator: the TUI steps it).
        A run with a delivery plan (:class:`DeliveryPlan`) delivers what the plan names instead."""
        if self.plan is not None:
            for env in self.plan.take(self):
                yield self.deliver_one(env)
            return
        session = self.session
        if session is None:
            for env in self.bus.due(self.now):
                yield self.deliver_one(env)
            return
        # The session (sim.session): a lost message sent again, then each body's messages in sequence.
        meta = self.sent_meta.get
        again, released = session.overdue(self.now, meta)
        for env in again:
            seq, gen = meta(env.message_id)
            waiting = [e.message_id for *_x, e in session.parked.get((env.sender, gen), ())]
            record_sent_again(self.store, env, seq=seq, generation=gen, waiting=waiting, tick=self.now)
            self.bus.again(env, self.now + 1)
        for env in released:
            yield self.deliver_one(env)
        for env in session.order(self.bus.due(self.now), meta, self.now, self.bus.carries):
            yield self.deliver_one(env)
        for env in session.dropped:
            record_copy_dropped(self.store, env, tick=self.now)
        session.dropped.clear()

    def deliver_one(self, env) -> Outcome:
        """Deliver ``env`` through the runtime now; the manager and its recipient hear the outcome."""
        out = deliver(self.store, env, policy=self.policy, tick=self.now, sent=self.sent_meta.pop(env.message_id, None))
        if out.task_changed:  # (an ack, a duplicate or a refusal leaves the task as the agents last read it)
            if out.task_after is not None and env.task_id in self._tasks:  # a view held: the one after it, as
                self._tasks[env.task_id] = out.task_after                  # the delivery's own events made it
            else:
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
        return out

    def _settled_all(self) -> bool:
        st = self.scenario.stress
        if st is not None and self._stress_next < st.tasks:
            return False
        return all(self._settled(s.id) or self._blocked(s) for s in self._tasks_in_play())

    def _deadline_tick(self) -> int:
        """The round after which the epoch's messages are past its declared deadline (sim.scenario.bounds)."""
        return self.epoch_opened + self.conversation["deadline_ticks"]

    def _closing_time(self) -> bool:
        """Whether the manager must fence now so that its fence and their acknowledgements arrive before the
        epoch's deadline: a fence sent this round arrives next round, and its acks the round after the next."""
        return self.now >= self._deadline_tick() - FENCE_MARGIN

    def _send_fence(self, *, closing: bool = False) -> None:
        """Every task has settled, or the deadline is near (``closing``): the manager fences the conversation;
        the workers must ack it."""
        states = [self.task(s.id) for s in self.specs.values()] if self.scenario.stress is None else []
        if self.manager.timed_out or closing:
            terminal = "TIMED_OUT"  # a gather's deadline passed with inputs missing, or the conversation's is near
            self.timed_out_by_deadline = closing
        elif any(t is None or t.state in (TaskState.NEEDS_REVIEW, TaskState.FAILED, TaskState.DENIED) for t in states):
            terminal = "BLOCKED"
        elif any(t.state == TaskState.CANCELED for t in states):
            terminal = "CANCELLED"
        else:
            terminal = "COMPLETED"
        workers = sorted(self.workers)
        self.fence = self.say("fence", "manager", workers[0], self.trace, {"to": workers, "terminal": terminal},
                              attempt=self.epoch)
        self.fence_epochs[self.fence.message_id] = self.epoch  # (its acknowledgements speak in its epoch)
        self.manager.fenced = True
        self.fenced_at = self.now

    def _quiet(self) -> bool:
        if self.fence is None or len(self.bus) or any(not z.done for z in self.zombies) \
                or (self.session is not None and self.session.busy()):
            return False
        if self.timed_out_by_deadline:  # closed at its deadline: what is still open stays open
            return True
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
        Each round is :meth:`begin_round`, the deliveries, :meth:`end_round`: a search over
        delivery orders (:mod:`sim.explore`) calls the same three itself.
        """
        s = self.settings
        self._quiet_for = 0
        bar_total = self.scenario.stress.tasks if self.scenario.stress else len(self.specs)
        job = self.progress.add_task(f"{self.scenario.name} ({self.policy.name})", total=bar_total) if self.progress else None
        while self.now < s.max_rounds:
            self.begin_round()
            delivered = 0
            for out in self._deliver_due():
                delivered += 1
                yield out
            if self.progress is not None and self.now % 25 == 0:
                done = (self._stress_next - len(self.specs)) if self.scenario.stress else sum(self._settled(t) for t in self.specs)
                self.progress.update(job, completed=done)
            if self.end_round(delivered):
                break
        if self.progress is not None:
            self.progress.update(job, completed=bar_total)
        self.finish()

    def begin_round(self) -> None:
        """A new round up to its deliveries: leases expired, gathers whose members are settled reduced
        (sim.gathers), then the manager, the fence, zombies and
        workers act, and the transport releases what it held."""
        self.now += 1
        self.sent_this_round = 0
        self._expire_leases()
        self._reduce_gathers()
        self._scripted_reviews()
        self.manager.act(self.now)
        if self.fence is None and self._settled_all():
            self._send_fence()
        elif self.fence is None and self._closing_time():
            self._send_fence(closing=True)
        # A crashed worker's old body acts as soon as it notices the recovery: its stale
        # commit races the recovered worker's, which is the case fencing must win.
        for z in self.zombies:
            z.act(self.now)
        for wid in sorted(self.workers):
            self.workers[wid].act(self.now)
        self.bus.release_held(self.now)

    def end_round(self, delivered: int) -> bool:
        """The round ends after ``delivered`` deliveries: whether the run is over (its delivery plan
        is done, or it has been quiet long enough for every retry timer to have fired)."""
        if self.plan is not None and self.plan.done:
            return True
        if self.sent_this_round or delivered:
            self._quiet_for = 0
        else:
            self._quiet_for += 1
        return self._quiet_for > self.settings.retry_ticks and self._quiet()

    def finish(self) -> None:
        """The run is over: count what it left unfinished; a delivery plan not played out is refused."""
        if self.plan is not None and not self.plan.done:
            self.plan.refuse_unfinished(self)
        self.unfinished = sum(1 for sp in self._tasks_in_play() if not self._settled(sp.id) and not self._blocked(sp))


class DeliveryPlan:
    """A scenario's explicit delivery schedule (``deliveries``): in round R the transport delivers
    exactly the entries listed for R, in the order listed, and nothing else; the run ends right after
    the last one. Each entry must name a message on the bus at that point (any due time, held back
    or not): a schedule that names anything else is refused, so a plan replays one run exactly."""

    def __init__(self, entries, source: str = "the scenario"):
        self.entries = tuple(entries)
        self.source = source
        self.next = 0

    @property
    def done(self) -> bool:
        return self.next >= len(self.entries)

    def take(self, run) -> list:
        out = []
        while self.next < len(self.entries) and self.entries[self.next][0] == run.now:
            rnd, mid = self.entries[self.next]
            env = run.bus.pick(mid)
            if env is None:
                flight = ", ".join(e.message_id for e in run.bus.in_flight()) or "nothing"
                raise InputError(
                    f"{self.source}: delivery {self.next + 1} names {mid} in round {rnd}, which is not on the bus then "
                    f"(in flight: {flight})", code="E_SCHEDULE")
            out.append(env)
            self.next += 1
        return out

    def refuse_unfinished(self, run) -> None:
        rnd, mid = self.entries[self.next]
        raise InputError(
            f"{self.source}: delivery {self.next + 1} ({mid} in round {rnd}) never happened: the run ended at round "
            f"{run.now}", code="E_SCHEDULE")
