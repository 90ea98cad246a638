"""Fault injection: the simulated transport and what it can do to a message.

A fault is written ``NAME`` (its default target), ``NAME:M-3`` (one message id),
``NAME:task_result`` (every message of a type) or ``NAME:0.1`` (each eligible message with
that probability, drawn from the run's one seeded RNG). Every fault the transport applies is
recorded as a ``fault_injected`` event, so the log says what was done to the run.

``duplicate``           deliver the same envelope again one round later
``conflicting-digest``  send a second envelope under the same idempotency key with another payload
``late-failure``        after a successful result, a failed one for the same task under a new key
``reorder``             hold the message back until the next message has been sent (at most
                        ``max_hold`` rounds), then deliver it right after that one
``delay``               deliver it ``delay_ticks`` rounds late
``drop``                never deliver it (the sender retries with a new attempt and key)
``crash``               the worker dies right after sending it; its lease expires, a restarted worker
                        recovers with a higher lease_version, and the dead one's late commit arrives
``stale-schema``        send it with an unsupported schema_version
``resend``              the sender gives up waiting and sends the same intent again: a new message
                        id and time, the key and payload its envelope design gives that intent
``transient``           the worker's attempt fails transiently: it reports ``retry`` instead of its
                        result; the manager assigns a new attempt, which succeeds with another payload
``late-conflict``       like ``conflicting-digest``, but the second payload arrives ``LATE_CONFLICT_AFTER``
                        rounds later, after the manager has handed the first one's product on: what
                        rests on it must be held, or reconciled if it already took effect
``silent``              the worker goes quiet on its work: from that message on, nothing it starts or
                        answers arrives (it still acknowledges); a gather waiting on it misses its
                        deadline (``gather_ticks``), and the manager fences the conversation TIMED_OUT
``lost-evidence``       the worker paraphrases: its successful result says what it found but cites
                        nothing (no evidence_refs, no artifact); when it is not accepted the worker
                        sends the result it meant, evidence and all
"""

from __future__ import annotations

import dataclasses
import heapq
import random
import re
from dataclasses import dataclass

from . import digest as _digest
from .envelope import MESSAGE_TYPES, Envelope
from .errors import InputError, friendly_list

__all__ = ["FAULTS", "FaultSpec", "parse_fault", "Bus", "DEFAULT_TARGET"]

FAULTS = ("duplicate", "conflicting-digest", "late-failure", "reorder", "delay", "drop", "crash", "stale-schema",
          "resend", "transient", "lost-evidence", "late-conflict", "silent")

#: How many rounds after the original a resent copy arrives (the sender's wait before it gives up).
RESEND_AFTER = 2
#: How many rounds after the original a late-conflict's second payload arrives.
LATE_CONFLICT_AFTER = 3

#: With no selector, each fault picks the first message it makes sense for.
DEFAULT_TARGET = {
    "duplicate": "publishing task_result (else the first task_result)",
    "conflicting-digest": "first task_result",
    "late-failure": "first successful task_result",
    "reorder": "first task_started",
    "delay": "first task_result",
    "drop": "first task_result",
    "crash": "first task_started",
    "stale-schema": "first task_request",
    "resend": "publishing task_result (else the first task_result)",
    "transient": "first successful task_result",
    "lost-evidence": "publishing task_result (else the first successful task_result)",
    "late-conflict": "first task_result",
    "silent": "first task_started (its worker goes quiet)",
}

_ONLY = {
    "late-failure": ("task_result",),
    "crash": ("task_started",),
    "transient": ("task_result",),
    "lost-evidence": ("task_result",),
    "silent": ("task_started", "task_result"),
}
_MSG_RE = re.compile(r"^[A-Z][A-Za-z]*-\d+$")


@dataclass(frozen=True)
class FaultSpec:
    name: str
    kind: str  # "default", "message", "type", "rate"
    value: str | float | None = None

    @property
    def text(self) -> str:
        return self.name if self.kind == "default" else f"{self.name}:{self.value}"


def parse_fault(text: str) -> FaultSpec:
    """Parse ``NAME[:SELECTOR]``; refuse unknown names and malformed selectors."""
    name, _, sel = text.partition(":")
    if name not in FAULTS:
        raise InputError(f"unknown fault {name!r}; expected one of: {friendly_list(FAULTS)}", code="E_UNKNOWN_FAULT")
    if not sel:
        return FaultSpec(name, "default")
    if sel in MESSAGE_TYPES:
        if name in _ONLY and sel not in _ONLY[name]:
            raise InputError(f"{name} applies to {friendly_list(_ONLY[name])} messages, not {sel}", code="E_FAULT_SELECTOR")
        return FaultSpec(name, "type", sel)
    if _MSG_RE.match(sel):
        return FaultSpec(name, "message", sel)
    try:
        rate = float(sel)
    except ValueError:
        raise InputError(
            f"fault selector {sel!r} is neither a message id (M-3), a message type ({friendly_list(MESSAGE_TYPES)}) "
            "nor a rate between 0 and 1",
            code="E_FAULT_SELECTOR",
        ) from None
    if not 0 < rate <= 1:
        raise InputError(f"fault rate {sel} must be greater than 0 and at most 1", code="E_FAULT_SELECTOR")
    return FaultSpec(name, "rate", rate)


def _default_match(spec: FaultSpec, env: Envelope) -> bool:
    n = spec.name
    if n in ("conflicting-digest", "delay", "drop", "late-conflict"):
        return env.type == "task_result"
    if n in ("late-failure", "transient"):
        return env.type == "task_result" and env.payload.get("status") == "succeeded"
    if n in ("reorder", "crash"):
        return env.type == "task_started"
    if n == "silent":
        return env.type == "task_started"
    if n == "stale-schema":
        return env.type == "task_request"
    if n in ("duplicate", "resend", "lost-evidence"):
        return env.type == "task_result" and "effect" in env.payload
    return False


class Bus:
    """The simulated transport: a queue of (due round, send order, envelope), and the faults.

    ``send`` decides, for each fault, whether it applies to this envelope; ``due`` pops what
    arrives this round. Extra envelopes a fault creates are not eligible for faults themselves.
    """

    def __init__(self, specs: list[FaultSpec], rng: random.Random, *, delay_ticks: int, next_id, record, max_hold: int = 5,
                 on_copy=None, rebuild=None):
        self.specs = specs
        self.rng = rng
        self.delay_ticks = delay_ticks
        self._next_id = next_id  # callable(prefix) -> a fresh message id
        self._record = record  # callable(fault, env, detail)
        self._on_copy = on_copy or (lambda orig, new, same_seq: None)  # a fault made a new envelope from orig
        self._rebuild = rebuild  # callable(env, how, due) -> the envelope the sender's design makes again
        self._heap: list[tuple[int, int, Envelope]] = []
        self._seq = 0
        self._held: list[tuple[int, Envelope]] = []
        self.max_hold = max_hold
        self.matched = {s.text: 0 for s in specs}
        self._default_used: set[str] = set()
        self.crashed: list[tuple[str, Envelope]] = []  # (worker, the message it died after)
        self.pending_late: list[Envelope] = []
        self.silenced: set[str] = set()  # workers whose starts and results never arrive (fault silent)

    def __len__(self) -> int:
        return len(self._heap) + len(self._held)

    def _push(self, due: int, env: Envelope) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (due, self._seq, env))

    def _applies(self, spec: FaultSpec, env: Envelope) -> bool:
        if spec.name in _ONLY and env.type not in _ONLY[spec.name]:
            return False
        if spec.kind == "message":
            return env.message_id == spec.value
        if spec.kind == "type":
            return env.type == spec.value
        if spec.kind == "rate":
            if env.type == "ack" and spec.name in ("crash", "late-failure"):
                return False
            return self.rng.random() < spec.value
        if spec.text in self._default_used:
            return False
        if _default_match(spec, env):
            self._default_used.add(spec.text)
            return True
        return False

    def send(self, env: Envelope, now: int) -> Envelope:
        """Queue ``env`` for delivery next round, bent by whichever faults apply; return the
        envelope as it was sent (a ``transient`` fault turns a result into ``retry``)."""
        due = now + 1
        if env.sender in self.silenced and env.type in ("task_started", "task_result"):
            return env  # the worker is silent: it never arrives
        faults = [s for s in self.specs if self._applies(s, env)]
        held, released = self._held, []
        self._held = []
        out = env
        schedule = True
        extra: list[tuple[int, Envelope]] = []
        for spec in faults:
            self.matched[spec.text] += 1
            n = spec.name
            if n == "duplicate":
                extra.append((due + 1, out))
                self._record(n, out, {"selector": spec.text, "again_at": due + 1})
            elif n in ("conflicting-digest", "late-failure", "late-conflict"):
                offset, copy, same_seq, detail = self._copy(n, out)
                extra.append((due + offset, copy))
                self._on_copy(out, copy, same_seq)
                self._record(n, out, {"selector": spec.text, **detail})
            elif n == "reorder":
                self._held.append((now, out))
                schedule = False
                self._record(n, out, {"selector": spec.text, "held_until": "the next message is sent"})
            elif n == "delay":
                due += self.delay_ticks
                self._record(n, out, {"selector": spec.text, "arrives_at": due})
            elif n == "drop":
                schedule = False
                self._record(n, out, {"selector": spec.text})
            elif n == "silent":
                schedule = False
                self.silenced.add(out.sender)
                self._record(n, out, {"selector": spec.text, "worker": out.sender})
            elif n == "crash":
                self.crashed.append((out.sender, out))
                self._record(n, out, {"selector": spec.text, "worker": out.sender})
            elif n == "stale-schema":
                out = dataclasses.replace(out, schema_version="0")
                self._record(n, out, {"selector": spec.text, "schema_version": "0"})
            elif n == "transient":
                if out.payload.get("status") != "succeeded" or self._rebuild is None:
                    continue
                out = self._rebuild(out, "transient", due)
                self._record(n, out, {"selector": spec.text, "status": "retry"})
            elif n == "lost-evidence":
                if out.payload.get("status") != "succeeded" or self._rebuild is None:
                    continue
                out = self._rebuild(out, "paraphrase", due)
                self._record(n, out, {"selector": spec.text, "evidence_refs": []})
            elif n == "resend":
                if self._rebuild is None:
                    continue
                again = self._rebuild(out, "resend", due + RESEND_AFTER)
                extra.append((due + RESEND_AFTER, again))
                self._on_copy(out, again, False)
                self._record(n, out, {"selector": spec.text, "resend": again.message_id, "again_at": due + RESEND_AFTER,
                                      "key": out.idempotency_key, "resend_key": again.idempotency_key})
        if schedule:
            self._push(due, out)
        for d, e in extra:
            self._push(d, e)
        # A reordered message goes right after the next one.
        for _, h in held:
            released.append(h)
            self._push(due, h)
        return out

    def _copy(self, name: str, env: Envelope) -> tuple[int, Envelope, bool, dict]:
        """The envelope a copying fault makes from ``env``: (rounds after due, copy, same sequence?, detail)."""
        if name == "late-conflict":
            _o, twin, same_seq, detail = self._copy("conflicting-digest", env)
            return LATE_CONFLICT_AFTER, twin, same_seq, detail
        if name == "conflicting-digest":
            # The sender equivocates: one key and one sequence number, two payloads; right behind
            # the original, before anyone acts on it.
            payload = dict(env.payload)
            payload["variant"] = "conflicting copy"
            twin = dataclasses.replace(
                env, message_id=self._next_id("M"), payload=payload,
                payload_digest=_digest.digest(payload, env.digest_scheme),
            )
            return 0, twin, True, {"twin": twin.message_id, "key": env.idempotency_key}
        if name == "late-failure":
            payload = {"status": "failed", "lease_version": env.payload.get("lease_version", 1), "error": "late failure"}
            late = dataclasses.replace(
                env, message_id=self._next_id("M"), payload=payload, evidence_refs=(),
                idempotency_key=env.idempotency_key + ":late-failure",
                payload_digest=_digest.digest(payload, env.digest_scheme),
            )
            return 2, late, False, {"late": late.message_id}
        raise ValueError(name)  # pragma: no cover

    def inject(self, name: str, env: Envelope, now: int) -> Envelope:
        """Apply one fault by hand to a message already sent (the TUI's keys): the copy it makes
        arrives next round. ``duplicate`` delivers ``env`` itself again."""
        if name in _ONLY and env.type not in _ONLY[name]:
            raise InputError(
                f"{name} applies to {' or '.join(_ONLY[name])} messages; {env.message_id} is a {env.type}",
                code="E_FAULT_NOT_APPLICABLE",
            )
        if name == "duplicate":
            self._push(now + 1, env)
            self._record(name, env, {"selector": "by hand", "again_at": now + 1})
            return env
        if name == "resend":
            if self._rebuild is None:
                raise InputError("this transport cannot resend: it has no sender to ask", code="E_FAULT_NOT_APPLICABLE")
            again = self._rebuild(env, "resend", now + 1)
            self._push(now + 1, again)
            self._on_copy(env, again, False)
            self._record(name, env, {"selector": "by hand", "resend": again.message_id, "again_at": now + 1,
                                     "key": env.idempotency_key, "resend_key": again.idempotency_key})
            return again
        if name not in ("conflicting-digest", "late-failure"):
            raise InputError(f"fault {name!r} cannot be injected on a sent message", code="E_UNKNOWN_FAULT")
        _offset, copy, same_seq, detail = self._copy(name, env)
        self._push(now + 1, copy)
        self._on_copy(env, copy, same_seq)
        self._record(name, env, {"selector": "by hand", **detail})
        return copy

    def release_held(self, now: int) -> None:
        """A message held ``max_hold`` rounds with nothing sent after it goes anyway:
        a reorder never loses a message."""
        keep = []
        for since, h in self._held:
            if now - since >= self.max_hold:
                self._push(now + 1, h)
            else:
                keep.append((since, h))
        self._held = keep

    def due(self, now: int) -> list[Envelope]:
        out = []
        while self._heap and self._heap[0][0] <= now:
            out.append(heapq.heappop(self._heap)[2])
        return out
