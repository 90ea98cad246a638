"""Runs driven by hand, and the past of a run: what the TUI works with (no Textual here).

:class:`LiveRun` is the simulator stepped one delivery at a time, with faults injected on
messages already sent, a worker crashed on demand and a needs_review task reconciled by the
reviewer. Everything it does goes through the same runtime as ``protolab run``: a live run
that is only stepped reaches the same state digest as the batch run of that scenario and seed.

:class:`Timeline` answers "what did state look like after event N": it folds the event log
into an in-memory store (the same reducer ``protolab replay`` uses), forward one event at a
time, and backward from the nearest checkpoint.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from .envelope import envelope_from_row
from .faults import INJECTABLE
from .errors import InputError, ProtolabError
from .policy import get_policy
from .privacy import is_redacted
from .runner import fault_specs, new_run, prepare_db_path, unmatched_faults
from .runtime import Outcome, review
from .scenario import Scenario
from .store import Store

__all__ = ["LiveRun", "Timeline", "INJECTABLE"]





class LiveRun:
    """A simulator run advanced by the caller, one delivery per :meth:`step`.

    With ``db`` the run is written to that file as it goes (an earlier run of the same
    scenario there is replaced); without, it lives in memory.
    """

    def __init__(self, scenario: Scenario, *, policy: str = "safe", seed: int | None = None,
                 faults=(), db: str | os.PathLike | None = None, plugins=None):
        design, rulebook, plugged = None, None, None
        if plugins is not None and plugins.any():
            design, pol, rulebook = plugins.load(policy)  # a student's files, refused before anything is written
            plugged = plugins.meta()
        else:
            pol = get_policy(policy)
        specs = fault_specs(scenario, faults)
        path = None
        if db is not None:
            path = Path(db)
            prepare_db_path(path, scenario.name)
        self.run = new_run(scenario, pol, seed, specs, path, design=design, rulebook=rulebook, plugged=plugged)
        # A fault injected by hand sends a message again as the transport sent it: the transport keeps each
        # envelope it carried (under a policy that redacts, the message log keeps [redacted] values instead).
        self.run.bus.sent = {}
        self.store = self.run.store
        self.scenario = scenario
        self.policy = pol
        self.seed = self.run.seed
        self._steps = self.run.steps()
        self.finished = False
        self._resume = False
        self.last: Outcome | None = None
        self.delivered = 0
        # Every call that drives the run, in order (steps counted): replayed into a fresh run of the
        # same scenario, seed and faults, it gives the same database (a lab resumes its run so).
        self.journal: list[list] = []
        self.on_journal = None  # called with the journal after each entry (a lab keeps it in the run's meta)

    # ---------------------------------------------------------------- the journal

    def _log(self, entry: list) -> None:
        if entry[0] == "step" and self.journal and self.journal[-1][0] == "step":
            self.journal[-1][1] += 1
        else:
            self.journal.append(entry)
        if self.on_journal is not None:
            self.on_journal(self.journal)

    def replay(self, journal: list) -> None:
        """Drive this (fresh) run through ``journal``'s calls, in order; a call refused when it was
        made is refused again (the refusal is part of what happened)."""
        for entry in journal:
            kind, args = entry[0], list(entry[1:])
            if kind == "step":
                for _ in range(int(args[0])):
                    self.step()
                continue
            try:
                if kind == "inject":
                    self.inject(*args)
                elif kind == "crash":
                    self.crash(*args)
                elif kind == "reconcile":
                    task, decision, evidence, read_version, by = args
                    self.reconcile(task, decision, list(evidence), by=by, read_version=read_version)
                elif kind == "resolve":
                    task, decision, evidence, of, by = args
                    self.resolve(task, decision, list(evidence), by=by, of=of)
                else:
                    raise InputError(f"the run's journal holds an unknown call {kind!r}", code="E_JOURNAL")
            except InputError as e:
                if e.code == "E_JOURNAL":
                    raise
            except ProtolabError:
                pass

    # ---------------------------------------------------------------- stepping

    def step(self) -> Outcome | None:
        """Deliver the next envelope; None (and ``finished``) once nothing more will happen."""
        try:
            return self._step()
        finally:
            self._log(["step", 1])

    def _step(self) -> Outcome | None:
        if self.finished:
            if not self._resume and not len(self.run.bus) and all(z.done for z in self.run.zombies):
                return None
            # Something was injected, or a reviewer released a task, after the run went quiet:
            # carry on from this round (the agents act on what changed).
            self.finished = self._resume = False
            self._steps = self.run.steps()
        try:
            out = next(self._steps)
        except StopIteration:
            self.finished = True
            self.run.seal()
            return None
        self.last = out
        self.delivered += 1
        return out

    def run_to_end(self) -> int:
        n = 0
        while self.step() is not None:
            n += 1
        return n

    def unmatched_faults(self) -> list[str]:
        return unmatched_faults(self.run)

    # ---------------------------------------------------------------- by hand

    def inject(self, fault: str, message_id: str) -> str:
        """Inject ``fault`` on a message already delivered; returns what was done, in words."""
        try:
            return self._inject(fault, message_id)
        finally:
            self._log(["inject", fault, message_id])

    def _inject(self, fault: str, message_id: str) -> str:
        if fault not in INJECTABLE:
            raise InputError(f"cannot inject {fault!r}; expected one of: {', '.join(INJECTABLE)}", code="E_UNKNOWN_FAULT")
        row = self.store.message_by_id(message_id)
        if row is None:
            raise InputError(f"no message {message_id} has been delivered yet", code="E_UNKNOWN_MESSAGE")
        # The envelope as it was sent, kept by the transport: never the log's copy, which a policy that redacts
        # keeps with [redacted] values (a copy of that would be another payload under the same digest).
        env = self.run.bus.sent_as(message_id)
        if env is None:  # not sent through the transport (a reviewer's decision, delivered by hand)
            env = envelope_from_row(row)
            if is_redacted(env.payload):
                raise InputError(f"{message_id} was not sent through this run's transport, and the message log keeps "
                                 f"only a redacted copy of it: nothing here can send it again as it was sent",
                                 code="E_FAULT_NOT_APPLICABLE")
        if env.task_id == env.trace_id:
            raise InputError(f"{message_id} is a {env.type} about the conversation, not a task message", code="E_FAULT_NOT_APPLICABLE")
        if fault != "duplicate" and env.message_id not in self.run.intents:
            raise InputError(f"{message_id} is a {env.type} made by hand (a reviewer's decision), not by a sender's "
                             f"design: nobody would send it again as {fault}; only a duplicate of it can be injected",
                             code="E_FAULT_NOT_APPLICABLE")
        # The transport knows the send's sequence (forgotten at its first delivery): a second
        # delivery carries the same one, and a copy is numbered from it as the scheduled faults do.
        self.run.sent_meta[env.message_id] = (row.get("sender_seq") or 0, row.get("sender_generation") or 1)
        copy = self.run.bus.inject(fault, env, self.run.now)
        if fault != "duplicate":
            self.run.sent_meta.pop(env.message_id, None)
        if fault == "duplicate":
            return f"{message_id} will be delivered again next round"
        return f"{copy.message_id} ({fault} of {message_id}) will arrive next round"

    def crash(self, worker_id: str) -> str:
        """Crash ``worker_id`` now, mid-task: its lease will expire and a restarted body takes over."""
        try:
            tid, lease = self.run.crash_now(worker_id)
        finally:
            self._log(["crash", worker_id])
        return f"{worker_id} crashed holding lease v{lease} of {tid}; it will expire after {self.run.settings.lease_ticks} rounds"

    def reconcile(self, task_id: str, decision: str, evidence: list[str], *, by: str = "reviewer",
                  read_version: int | None = None) -> Outcome:
        """The reviewer's decision on a needs_review task, delivered now through intake
        (``read_version``: decided from an earlier read of the task, see :func:`sim.runtime.review`)."""
        try:
            out = review(self.store, task_id, decision, by=by, evidence=evidence, read_version=read_version)
            self.run.reviewed(task_id, released=out.decision == "accepted" and decision == "ready")
            if out.decision == "accepted":
                self.run.reopen()
            self._resume = True
            return out
        finally:
            self._log(["reconcile", task_id, decision, list(evidence), read_version, by])

    def resolve(self, task_id: str, decision: str, evidence: list[str], *, by: str = "reviewer",
                of: str | None = None) -> Outcome:
        """The reviewer resolves an open reconciliation of a finished task: keep or retract its effect."""
        from .runtime import resolve_reconciliation

        try:
            out = resolve_reconciliation(self.store, task_id, decision, by=by, evidence=evidence, of=of)
            if out.decision == "accepted":
                self.run.reopen()
            self._resume = True
            return out
        finally:
            self._log(["resolve", task_id, decision, list(evidence), of, by])

    def close(self) -> None:
        if not self.finished:
            with contextlib.suppress(ProtolabError, sqlite3.Error):
                self.run.seal()
        self.store.close()


class _Cancelled(Exception):
    pass


class Timeline:
    """State as of any event of ``store``'s log, rebuilt by folding the log.

    ``at(seq)`` returns an in-memory :class:`Store` holding exactly what events 1..seq fold
    into. Moving forward folds only the new events; moving back restarts from the newest
    checkpoint at or before ``seq`` (one every ``every`` events), so stepping back and forth
    through a 100,000-event run stays quick.
    """

    def __init__(self, store: Store, *, every: int = 2000):
        self.source = store
        self.every = every
        self._checkpoints: list[tuple[int, Store]] = []
        self._cur: Store | None = None
        self.seq = 0
        self.cancelled = False  # set from another thread to stop a long fold at the next batch

    def cost(self, seq: int) -> int:
        """How many events :meth:`at` would fold to reach ``seq`` (the TUI folds big gaps in the background)."""
        if self._cur is not None and seq >= self.seq:
            return seq - self.seq
        base = max((at for at, _ in self._checkpoints if at <= seq), default=0)
        return seq - base

    def _fold(self, upto: int, progress=None) -> None:
        cur = self._cur
        assert cur is not None
        start = self.seq
        while self.seq < upto:
            if progress is not None:
                progress(self.seq - start, upto - start)
            # One transaction per stretch between checkpoints; a checkpoint is a copy after commit.
            stop = min(upto, (self.seq // self.every + 1) * self.every)
            with cur.transaction():
                for ev in self._events(self.seq, stop):
                    cur.advance(to=max(cur.tick, ev.tick))
                    cur.append_event(ev.draft(), delivery_id=ev.delivery_id)
            self.seq = stop
            if stop % self.every == 0 and (not self._checkpoints or self._checkpoints[-1][0] < stop):
                self._checkpoints.append((stop, cur.copy()))

    def _events(self, after: int, upto: int):
        batch = 5000
        lo = after
        while lo < upto:
            if self.cancelled:
                raise _Cancelled()
            ids = list(range(lo + 1, min(upto, lo + batch) + 1))
            yield from self.source.events_at(ids)
            lo = ids[-1]

    def at(self, seq: int, progress=None) -> Store:
        """State after event ``seq`` (0: before the first event); ``progress(done, total)`` is
        called between stretches of a long fold."""
        seq = max(0, min(seq, self.source.last_event()))
        if self._cur is None or seq < self.seq:
            if self._cur is not None:
                self._cur.close()
            base = None
            for at, snap in self._checkpoints:
                if at <= seq:
                    base = (at, snap)
            if base is None:
                self._cur = Store.create(None, start_time=self.source.start_time, empty=True)
                self.seq = 0
            else:
                self._cur = base[1].copy()
                self.seq = base[0]
        if seq > self.seq:
            try:
                self._fold(seq, progress)
            except _Cancelled:
                # The half-folded stretch rolled back; what is rebuilt stays consistent.
                self._cur.close()
                self._cur = None
                self.seq = 0
        return self._cur

    def close(self) -> None:
        self.cancelled = True
        if self._cur is not None:
            self._cur.close()
        for _, snap in self._checkpoints:
            snap.close()
