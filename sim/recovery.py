"""A run's crashes and what recovers from them.

A worker that crashes (the ``crash`` fault, or by hand) leaves a zombie: its old body, which acts
again as soon as it notices the recovery, so its stale commit races the restarted body's (the case
fencing must win). The restarted body (next generation) gets the dead one's other assignments back,
and the leases the dead one asked for are watched as orphans. Live workers heartbeat every round; a
crashed holder's lease is expired by the monitor after lease_ticks.

A part of :class:`sim.runner.Run`, which holds the state (zombies, orphans, heartbeats).
"""

from __future__ import annotations

from .agents import DONE, Worker, Zombie, _Job
from .errors import InputError
from .machine import TaskState
from .runtime import expire_lease, record_fault

__all__ = ["Recovery"]


class Recovery:
    """Crash a worker (by a fault or by hand) and expire the leases its dead body held."""

    def _crash(self, worker_id: str, task_id: str, lease: int, still_running: bool = False) -> None:
        """``worker_id`` dies holding (or asking for) lease ``lease`` on ``task_id``; ``still_running``
        (fault zombie): it is replaced the same way, but its old body was never stopped and answers
        on its own (:class:`sim.agents.Zombie`)."""
        dead = self.workers[worker_id]
        dead.dead = True
        restart = getattr(dead, "restart", None)
        if restart is not None:
            # A process agent (sim.procagent): its process is killed, no old body is left to wake, and
            # its next generation starts afresh (a new init); the lease it asked for is watched.
            self.workers[worker_id] = restart()
            self.orphans.append((task_id, lease, dead))
            self.heartbeat[worker_id + f"#{dead.generation}"] = self.now
            return
        self.zombies.append(Zombie(dead, task_id, lease, still_running=still_running, replaced_at=self.now))
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
