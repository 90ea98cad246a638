"""What a sender means to say, before any encoding choice: :class:`Intent` (plain data, pure).

An envelope design (:mod:`sim.design`, exercise 1) is handed intents and turns each into an
envelope's key, payload and evidence. The record lives here, alone, so that a design judged in a
host process (:mod:`sim.course.host`) is handed a real ``Intent`` without the engine's own design
(:data:`sim.design.REFERENCE`, the exercise's answer) being importable or readable there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .frozen import quick_init

__all__ = ["Intent"]


@quick_init
@dataclass(frozen=True)
class Intent:
    """What a sender means to say, before any encoding choice.

    ``attempt`` is the attempt (lease) the intent belongs to: 1 for a task's first assignment
    and its first start and result, 2 after a lease expired or a worker reported ``retry``.
    ``retry`` counts the sender's own re-sends of this step after it gave up waiting (0 the
    first time). ``answers`` is the message id an acknowledgement is about. ``body`` holds the
    fields the runtime reads (goal, budget, status, lease_version, artifact, effect, ...).
    ``refs`` is the evidence the intent rests on (artifact refs, message ids). ``content`` is
    the work product itself (a fact table, a draft), already stored as the artifact
    ``body["artifact"]``. ``context`` is what else the sender knows: other tasks' products, its
    working notes. A recipient needs little of it, and some of it is private.

    ``message_id`` and ``created_at`` are the transport's: a resend of the same intent gets new
    ones, so a key derived from them names a new intent each time.
    """

    type: str
    sender: str
    recipient: str
    trace_id: str
    task_id: str
    attempt: int = 1
    retry: int = 0
    answers: str | None = None
    body: dict = field(default_factory=dict, compare=False, hash=False)
    refs: tuple[str, ...] = ()
    content: dict | None = field(default=None, compare=False, hash=False)
    context: dict = field(default_factory=dict, compare=False, hash=False)
    message_id: str = ""
    created_at: str = ""

    @property
    def step(self) -> str:
        """The step of the task's story this intent is: request, start, result, ack, cancel, fence."""
        return {"task_request": "request", "task_started": "start", "task_result": "result"}.get(self.type, self.type)
