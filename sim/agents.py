"""Scripted agents: a manager and workers that only *propose*.

Agents read task state (several readers are fine) and send envelopes; they never write
state. The runtime decides what each delivery means. Workers store what they produce
(fact tables, drafts) as content-addressed artifacts and cite them in ``evidence_refs``;
the payload carries only a reference. Every random choice (Faker facts) comes from the run's
seeded generators, so a run is reproducible.

A sender whose message has not taken effect after ``retry_ticks`` rounds sends it again as a
new attempt: a new message id and a new idempotency key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from calendar import timegm
from datetime import date, datetime, timezone
from typing import Callable, Protocol

from .design import Intent
from .envelope import Envelope
from .intake import TaskView
from .machine import TERMINAL, TaskState
from .privacy import Privacy, fake_value
from .scenario import Settings, TaskSpec

__all__ = ["World", "Manager", "Worker", "Zombie", "facts_table", "draft_doc"]

DONE = TERMINAL | {TaskState.NEEDS_REVIEW}


class World(Protocol):
    """What agents may do: read tasks, store artifacts, send envelopes."""

    settings: Settings
    trace: str
    privacy: Privacy  # the scenario's sensitive fields (empty when it declares none)

    def task(self, task_id: str) -> TaskView | None: ...
    def result_of(self, task_id: str) -> Intent | None: ...
    def sent_intent(self, env: Envelope) -> Intent: ...
    def put_artifact(self, content, kind: str, task_id: str) -> str: ...
    def say(self, type: str, sender: str, recipient: str, task_id: str, body: dict, *, attempt: int = 1,
            retry: int = 0, answers: str | None = None, refs=(), content: dict | None = None,
            context: dict | None = None, prefix: str = "M", generation: int | None = None) -> Envelope:
        """Send an intent; the run's envelope design turns it into an envelope (returned)."""
        ...


#: the fact tables' date range, as Faker reads two dates (whole UTC days, seconds since the epoch)
_FROM, _TO = timegm(date(2025, 1, 1).timetuple()), timegm(date(2026, 6, 30).timetuple())
#: Faker's word list, by the generator's locales
_WORDS: dict[tuple[str, ...], list[str]] = {}


def facts_table(fake, task_id: str, goal: str) -> dict:
    """A fact table: claims with a source and a date each (Faker, seeded).

    Exactly what ``fake.sentence(nb_words=8)``, ``fake.word()``, ``fake.random_int(100, 999)`` and
    ``fake.date_between(date(2025, 1, 1), date(2026, 6, 30))`` give, drawn from the same generator in
    the same order (``tests/test_simulator.py`` holds it to Faker's own calls), without Faker's
    generic machinery around each draw: a fifth of the time, and a stress run makes one per result."""
    rng = fake.random
    locales = tuple(fake.locales)
    words = _WORDS.get(locales)
    if words is None:  # (the list Faker draws words from: its locale's, copied on every call; read once)
        words = _WORDS[locales] = fake.get_words_list()
    rows = []
    for _ in range(3):
        nb = max(1, int(8 * rng.randint(60, 140) / 100))  # sentence(nb_words=8): +/-40%, at least one
        claim = [rng.choice(words)] if nb == 1 else rng.choices(words, k=nb)
        claim[0] = claim[0].title()
        host = rng.choice(words)  # word()
        number = rng.randrange(100, 1000)  # random_int(100, 999)
        day = datetime.fromtimestamp(rng.uniform(_FROM, _TO), timezone.utc).date()  # date_between(...)
        rows.append([" ".join(claim) + ".", f"https://{host}.example.org/notes/{number}", day.isoformat()])
    return {
        "kind": "fact-table",
        "task_id": task_id,
        "goal": goal,
        "columns": ["claim", "source", "date"],
        "rows": rows,
    }


def draft_doc(fake, task_id: str, inputs: list[str]) -> dict:
    return {
        "kind": "draft",
        "task_id": task_id,
        "title": fake.catch_phrase(),
        "body": fake.paragraph(nb_sentences=3),
        "cites": list(inputs),
    }


@dataclass
class _Req:
    sent: int
    tries: int = 1
    version: int | None = None  # the task's state_version the request answered (recovery)


@dataclass
class Manager:
    """Assigns tasks when their inputs are ready, re-assigns after a lease expired, acks receipts."""

    world: World
    tasks: Callable[[], list[TaskSpec]]  # the tasks in play (all of them, or the stress window)
    id: str = "manager"
    sent: dict[str, _Req] = field(default_factory=dict)
    acks: list[Envelope] = field(default_factory=list)
    gather_open: dict[str, int] = field(default_factory=dict)  # gathering task -> the round its first input was asked
    timed_out: list[str] = field(default_factory=list)  # gathers whose deadline passed
    #: the manager has fenced the conversation: it acknowledges nothing more (a receipt now would be a
    #: message after the terminal), until a reviewer's decision reopens it
    fenced: bool = False

    def on_delivery(self, env: Envelope, decision: str) -> None:
        if env.recipient == self.id and env.type in ("task_started", "task_result") and decision in ("accepted", "duplicate"):
            self.acks.append(env)

    def _inputs(self, spec: TaskSpec) -> list[str] | None:
        refs = []
        for dep in spec.after:
            t = self.world.task(dep)
            if t is None or t.state != TaskState.SUCCEEDED:
                return None
            res = self.world.result_of(dep)
            if res is not None and res.body.get("artifact"):
                refs.append(res.body["artifact"])
        return refs

    def _context(self, spec: TaskSpec) -> dict:
        """What the manager knows beyond the assignment: the products its inputs rest on and the
        notes their workers sent. The assignee needs a reference to the products, not this."""
        ctx = {}
        for dep in spec.after:
            res = self.world.result_of(dep)
            if res is not None:
                ctx[dep] = {"content": res.content, "summary": res.body.get("summary"), "notes": res.context.get("notes")}
        return {"inputs": ctx} if ctx else {}

    def _forwarded(self, spec: TaskSpec) -> dict:
        """The sensitive fields the inputs' results carried (a source's contact): the manager passes
        on everything it knows about the source. Who may be sent which is the transport's rule."""
        out = {}
        for dep in spec.after:
            res = self.world.result_of(dep)
            if res is not None:
                out.update({k: res.body[k] for k in self.world.privacy.sensitive if k in res.body})
        return out

    def _gather_deadlines(self, now: int) -> None:
        """A task that waits for others gathers their results until its deadline. When it
        passes with inputs missing, the manager stops waiting: it cancels the inputs still open and
        the conversation ends TIMED_OUT, with the contributions that did arrive (nothing made up)."""
        w = self.world
        for spec in self.tasks():
            if not spec.after or spec.id in self.timed_out or w.task(spec.id) is not None:
                continue
            asked = [self.sent[d].sent for d in spec.after if d in self.sent]
            if not asked:
                continue
            opened = self.gather_open.setdefault(spec.id, min(asked))
            if now - opened < w.settings.gather_ticks:
                continue
            missing = [d for d in spec.after if (t := w.task(d)) is None or t.state != TaskState.SUCCEEDED]
            if not missing:
                continue
            self.timed_out.append(spec.id)
            for d in missing:
                t = w.task(d)
                if t is not None and t.state not in DONE:
                    worker = next((x.worker for x in self.tasks() if x.id == d), t.assignee or "")
                    w.say("cancel", self.id, worker, d, {"reason": f"gather {spec.id} deadline passed"},
                          attempt=t.lease_version)

    def act(self, now: int) -> None:
        w, s = self.world, self.world.settings
        if self.fenced:  # the conversation is closed: nothing more to ask, nothing to acknowledge
            self.acks = []
            return
        for env in self.acks:
            w.say("ack", self.id, env.sender, env.task_id, {"of": env.message_id}, answers=env.message_id, prefix="A")
        self.acks = []
        if s.gather_ticks:
            self._gather_deadlines(now)
        for spec in self.tasks():
            t = w.task(spec.id)
            req = self.sent.get(spec.id)
            if t is None:
                inputs = self._inputs(spec)
                if inputs is None or (req is not None and now - req.sent < s.retry_ticks):
                    continue
                payload = {"goal": spec.goal if not inputs else f"{spec.goal}: {', '.join(inputs)}", "budget": spec.budget}
                if spec.publish:
                    payload["publish"] = spec.publish
                if w.privacy:
                    payload.update(self._forwarded(spec))
                w.say("task_request", self.id, spec.worker, spec.id, payload, attempt=1, retry=req.tries if req else 0,
                      refs=inputs, context=self._context(spec))
                self.sent[spec.id] = _Req(now, (req.tries + 1) if req else 1)
            elif t.state in (TaskState.READY, TaskState.RETRY_WAIT) and t.budget_left <= 0:
                if req is None or req.version != t.state_version:
                    w.say("cancel", self.id, spec.worker, spec.id, {"reason": "budget exhausted"},
                          attempt=t.lease_version)
                    self.sent[spec.id] = _Req(now, 1, t.state_version)
            elif t.state == TaskState.RETRY_WAIT:
                # The runtime expired a lease: assign a new attempt (a restarted worker takes it).
                if req is not None and req.version == t.state_version and now - req.sent < s.retry_ticks:
                    continue
                attempt = t.lease_version + 1
                tries = req.tries + 1 if req is not None and req.version == t.state_version else 1
                inputs = self._inputs(spec) or []
                payload = {"goal": spec.goal, "budget": spec.budget, "attempt": attempt}
                if spec.publish:
                    payload["publish"] = spec.publish
                if w.privacy:
                    payload.update(self._forwarded(spec))
                w.say("task_request", self.id, spec.worker, spec.id, payload, attempt=attempt, retry=tries - 1,
                      refs=inputs, context=self._context(spec))
                self.sent[spec.id] = _Req(now, tries, t.state_version)


@dataclass
class _Job:
    spec: TaskSpec
    inputs: tuple[str, ...] = ()
    lease: int = 0
    started_at: int = -1
    start_tries: int = 0
    result: Envelope | None = None
    result_intent: Intent | None = None
    result_at: int = -1
    result_tries: int = 0


@dataclass
class Worker:
    """Starts assigned tasks, works ``work_ticks`` rounds, stores its output, answers."""

    world: World
    id: str
    fake: object
    generation: int = 1
    jobs: dict[str, _Job] = field(default_factory=dict)
    dead: bool = False
    fences: list[Envelope] = field(default_factory=list)

    def on_fence(self, env: Envelope) -> None:
        """The conversation is fenced: acknowledge receipt (an ack is receipt only), and drop what work is
        still open (the fence closed it; a reviewer who reopens the conversation hands it out again)."""
        self.fences.append(env)
        self.jobs.clear()

    def on_delivery(self, env: Envelope, decision: str, spec: TaskSpec | None, intent: Intent | None = None) -> None:
        if env.type == "task_request" and env.recipient == self.id and decision == "accepted" and spec is not None:
            # The inputs the manager meant (whatever the envelope design chose to write down).
            self.jobs[env.task_id] = _Job(spec, tuple(intent.refs if intent is not None else env.evidence_refs))

    def produce(self, job: _Job, now: int) -> tuple[dict, dict]:
        """Make the work product, store it as an artifact; return (the result's body, the product)."""
        spec = job.spec
        if spec.kind == "draft":
            content = draft_doc(self.fake, spec.id, list(job.inputs))
        else:
            content = facts_table(self.fake, spec.id, spec.goal)
        if spec.vote is not None:
            # A reviewer's verdict travels in the product it cites, beside its facts.
            content = {**content, "vote": spec.vote}
        ref = self.world.put_artifact(content, "draft" if spec.kind == "draft" else "fact-table", spec.id)
        payload = {"status": "succeeded", "lease_version": job.lease, "artifact": ref,
                   "summary": f"{len(content.get('rows', [])) or 1} item(s) in {ref[:15]}"}
        if spec.publish:
            payload["effect"] = {"kind": "publish", "target": spec.publish}
        if spec.kind == "research" and self.world.privacy:
            # Research that talked to a person: who they are and how to reach them (made up, seeded).
            payload.update({k: fake_value(self.fake, k) for k in self.world.privacy.sensitive})
        return payload, content

    def notes(self, task_id: str) -> str:
        """The worker's working notes: private to it and the manager, nobody else's business."""
        return f"{self.id} working notes for {task_id}: sources checked by hand; questions to {self.id}@staff.internal"

    def act(self, now: int) -> None:
        if self.dead:
            return
        w, s = self.world, self.world.settings
        for fence in self.fences:
            w.say("ack", self.id, fence.sender, fence.task_id, {"of": fence.message_id}, answers=fence.message_id,
                  prefix="A")
        self.fences = []
        for tid in list(self.jobs):
            job = self.jobs[tid]
            t = w.task(tid)
            if t is None or t.state in DONE:
                del self.jobs[tid]
                continue
            if t.state == TaskState.READY and t.assignee == self.id:
                wanted = t.lease_version + 1
                fresh = job.lease != wanted
                if fresh or now - job.started_at >= s.retry_ticks:
                    if fresh:
                        job.lease, job.start_tries = wanted, 0
                    # (re)start; a result from a start that never took effect is void
                    job.result, job.result_at, job.result_tries = None, -1, 0
                    w.say("task_started", self.id, "manager", tid, {"lease_version": wanted}, attempt=wanted,
                          retry=job.start_tries)
                    job.started_at, job.start_tries = now, job.start_tries + 1
                    if self.dead:  # the transport crashed us right after sending
                        return
                    continue
            if job.lease and job.result is None and job.started_at >= 0 and now - job.started_at >= s.work_ticks:
                # Optimistic: the worker believes it holds the lease it asked for and answers.
                payload, content = self.produce(job, now)
                refs = [payload["artifact"], *job.inputs]
                job.result = w.say("task_result", self.id, "manager", tid, payload, attempt=job.lease, refs=refs,
                                   content=content, context={"notes": self.notes(tid)})
                job.result_intent = w.sent_intent(job.result)
                job.result_at, job.result_tries = now, 1
            elif (
                job.result is not None
                and t.state == TaskState.RUNNING
                and t.lease_version == job.lease
                and now - job.result_at >= s.retry_ticks
            ):
                i = job.result_intent
                job.result = w.say("task_result", self.id, "manager", tid, dict(i.body), attempt=job.lease,
                                   retry=job.result_tries, refs=i.refs, content=i.content, context=dict(i.context))
                job.result_intent = w.sent_intent(job.result)
                job.result_at, job.result_tries = now, job.result_tries + 1


@dataclass
class Zombie:
    """A crashed worker's old body: it wakes after recovery and commits under its stale lease.

    An old body that never stopped (``still_running``, fault ``zombie``: the worker was restarted but
    nobody stopped the body it replaced) does not wait for anything: it finishes the work it had started
    and answers ``work_ticks`` rounds after it was replaced, under its old generation and the lease it
    still holds, which is current then: only its generation says it no longer speaks for the worker."""

    worker: Worker
    task_id: str
    lease: int
    woke: int | None = None
    done: bool = False
    still_running: bool = False
    replaced_at: int = 0

    def act(self, now: int) -> None:
        if self.done:
            return
        w = self.worker.world
        t = w.task(self.task_id)
        if t is None:
            return
        if self.still_running:
            if now - self.replaced_at < w.settings.work_ticks:
                return
        else:
            recovered = t.lease_version > self.lease
            if not recovered and t.state not in DONE:
                return
            if self.woke is None:
                self.woke = now
            if now - self.woke < w.settings.zombie_ticks:
                return
        job = self.worker.jobs.get(self.task_id) or _Job(TaskSpec(self.task_id, "", self.worker.id))
        job.lease = self.lease
        payload, content = self.worker.produce(job, now)
        payload["lease_version"] = self.lease
        w.say("task_result", self.worker.id, "manager", self.task_id, payload, attempt=self.lease,
              refs=[payload["artifact"], *job.inputs], content=content, context={"notes": self.worker.notes(self.task_id)},
              generation=self.worker.generation)  # the old body: its generation is stale
        self.done = True
