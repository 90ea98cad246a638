"""The run as its agents see it: the :class:`~sim.agents.World` they act on.

Agents read tasks (cached until a delivery or the lease monitor touches one), store artifacts and
say intents; the run's envelope design turns each intent into the envelope sent, minimised for its
recipient under a policy that minimises, stamped with its sender's sequence and body generation and
handed to the transport (:class:`sim.faults.Bus`), whose faults may copy or rewrite it. Time is the
round number, written as the scenario's start time plus that many seconds.

A part of :class:`sim.runner.Run`, which holds the state (the intents, the task cache, the
sequences); :mod:`sim.schedule` runs the rounds, :mod:`sim.recovery` handles crashes.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from .design import Intent, build_from
from .envelope import Envelope, build_envelope
from .intake import TaskView
from . import versions as _versions
from .errors import EnvelopeError
from .runtime import put_artifact, record_fault, record_negotiation

__all__ = ["RunWorld"]


def _later(time_text: str, seconds: int) -> str:
    """``time_text`` (UTC RFC 3339, whole seconds) plus ``seconds``."""
    t = datetime.strptime(time_text, "%Y-%m-%dT%H:%M:%SZ") + timedelta(seconds=seconds)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


class RunWorld:
    """What the agents may do in a run (:class:`sim.agents.World`), and what the transport calls
    back when a fault copies, rewrites or records a send."""

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
        memo = self._times  # (a round stamps many messages with one time)
        text = memo.get(tick)
        if text is None:
            if len(memo) >= 256:
                memo.clear()
            text = memo[tick] = (self._t0 + timedelta(seconds=tick)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return text

    def _clock_of(self, sender: str) -> str:
        """What ``sender``'s own clock reads now: the run's time, off by the scenario's ``[clocks]``
        for that sender (a clock never decides order here; a naive reducer may believe it)."""
        clocks = self.scenario.clocks
        off = dict(clocks).get(sender, 0) if clocks else 0
        return self.time_at(self.now + off)

    def say(self, type, sender, recipient, task_id, body, *, attempt=1, retry=0, answers=None, refs=(), content=None,
            context=None, prefix="M", generation=None) -> Envelope:
        intent = Intent(
            type=type, sender=sender, recipient=recipient, trace_id=self.trace, task_id=task_id, attempt=attempt,
            retry=retry, answers=answers, body=body, refs=tuple(refs), content=content, context=context or {},
            message_id=self.next_id(prefix), created_at=self._clock_of(sender),
        )
        env = self._build(intent)
        self._keep(env.message_id, intent)
        if generation is None:
            w = self.workers.get(sender)
            generation = w.generation if w is not None else 1
        return self._put_on_bus(env, generation)

    def send_envelope(self, env: Envelope, intent: Intent, generation: int) -> Envelope:
        """Send an envelope an agent made itself (a process agent, :mod:`sim.procagent`): the transport takes
        it as it takes the kit's own, stamped with its sender's sequence and ``generation``. ``intent`` is what
        the kit reads of it (the faults that ask the sender again, the manager reading a result); an id the
        run already knows keeps what it was (a reused id is the runtime's to judge)."""
        if env.message_id not in self.intents:
            self._keep(env.message_id, intent)
        return self._put_on_bus(env, generation)

    def _put_on_bus(self, env: Envelope, generation: int) -> Envelope:
        sender, type = env.sender, env.type
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
            self._crash(worker_id, after.task_id, self.intents[after.message_id].attempt,
                        still_running=after.message_id in self.bus.still_running)
        self.bus.crashed.clear()
        return env

    def _rebuild(self, env: Envelope, rewrite, due: int, schema_version: str | None = None) -> Envelope:
        """The envelope a fault makes by asking the sender's design again: ``rewrite`` (declared
        beside its fault in :mod:`sim.faults`) turns the intent behind ``env`` into the one sent
        (a new message id and ``due``'s time are there if it wants them) and the one still meant."""
        intent = self.intents[env.message_id]
        sent, meant = rewrite(intent, lambda: self.next_id(env.message_id.split("-")[0]), self.time_at(due - 1))
        out = self._build(sent, schema_version=schema_version or env.schema_version)
        self._keep(out.message_id, meant)
        return out

    def _build(self, intent: Intent, schema_version: str = "1") -> Envelope:
        """The envelope the design makes of ``intent``, stamped by its sender with the conversation's epoch
        (after the first) and when it expires (a scenario that declares ``expires_ticks``); under a policy
        that minimises, without the sensitive fields its recipient does not need (sim.privacy), digested
        as sent."""
        ttl = self.settings.expires_ticks
        expires = _later(intent.created_at, ttl) if ttl and intent.created_at else None
        epoch = self.epoch
        if intent.type == "ack" and intent.task_id == intent.trace_id:  # an ack of a fence: in the fence's epoch
            epoch = self.fence_epochs.get(intent.answers, epoch)
        epoch = epoch if epoch > 1 else None
        env = build_from(self.design, intent, schema_version=schema_version, epoch=epoch, expires_at=expires)
        if self.privacy and self.policy.minimise and self.privacy.unneeded(env.payload, env.recipient):
            env = build_envelope(
                message_id=env.message_id, trace_id=env.trace_id, task_id=env.task_id, sender=env.sender,
                recipient=env.recipient, type=env.type, payload=self.privacy.minimise(env.payload, env.recipient),
                idempotency_key=env.idempotency_key, created_at=env.created_at, evidence_refs=list(env.evidence_refs),
                digest_scheme=env.digest_scheme, schema_version=env.schema_version, epoch=env.epoch,
                expires_at=env.expires_at,
            )
        return env

    def _keep(self, message_id: str, intent: Intent) -> None:
        self.intents[message_id] = intent
        self._messages_of.setdefault(intent.task_id, []).append(message_id)

    def _stamp(self, env: Envelope, generation: int) -> None:
        self._seq[(env.sender, generation)] += 1
        self.sent_meta[env.message_id] = (self._seq[(env.sender, generation)], generation)

    def _peers(self) -> list[str]:
        """The run's workers, in order (fault overshare picks the one a result is also sent to)."""
        return sorted(self.workers)

    def _restamp(self, env: Envelope, back: int) -> int:
        """Set ``env``'s sequence number, and its sender's counter, back ``back`` (fault rewind): the next
        message of that body numbers on from there. Returns the number ``env`` now carries."""
        seq, gen = self.sent_meta[env.message_id]
        seq = max(1, seq - back)
        self.sent_meta[env.message_id] = (seq, gen)
        self._seq[(env.sender, gen)] = seq
        return seq

    def _on_copy(self, orig: Envelope, new: Envelope, same_seq: bool) -> None:
        if new.message_id not in self.intents and orig.message_id in self.intents:
            self._keep(new.message_id, self.intents[orig.message_id])
        seq, gen = self.sent_meta.get(orig.message_id, (0, 1))
        if same_seq:
            self.sent_meta[new.message_id] = (seq, gen)
        else:
            self._stamp(new, gen)

    def _negotiate(self, env: Envelope, offered) -> str:
        """``env``'s sender negotiates with the runtime the version it speaks from now on: the newest of
        ``offered`` the runtime reads (a runtime that reads everything as 1.0, naive, turns nothing down:
        it says it reads them all). Recorded as ``version_negotiated``; returns the version chosen."""
        reads = _versions.READS if self.policy.reads_as is None else _versions.KNOWN
        try:
            chosen = _versions.negotiate(tuple(offered), reads)
        except EnvelopeError:  # (no version in common: the sender keeps speaking what it spoke)
            chosen = None
        record_negotiation(self.store, env.sender, offered, reads, chosen, task_id=env.task_id,
                           message_id=env.message_id, tick=self.now)
        return str(chosen) if chosen is not None else env.schema_version

    def _negotiate_texts(self, env: Envelope, offered: tuple[str, ...]) -> str:
        """:meth:`_negotiate` of versions written as text (a fault's declaration)."""
        return self._negotiate(env, [_versions.parse_version(v) for v in offered])

    def _ceiling(self) -> int:
        """The messages an epoch of the conversation may take (the run's declared bounds)."""
        return self.conversation["message_ceiling"]

    def _record(self, fault: str, env: Envelope, detail: dict) -> None:
        record_fault(self.store, fault, message_id=env.message_id, task_id=env.task_id, detail=detail, tick=self.now)
