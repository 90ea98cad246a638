"""The receiving side of each sender's sequence: a session that presents a body's messages in order.

A conversation's rule is that each body (a sender in one generation) numbers its messages 1, 2, 3, ...
with no gap, and that a receiver takes exactly the next number (``E_SEQUENCE_GAP`` otherwise). The
simulated network loses, delays and reorders messages, so a runtime that keeps the conversation's
rules needs a session between the network and its intake, the job a reliable ordered transport does:

* a message whose number is ahead of the next one its body owes is **parked**, not delivered;
* when the missing number arrives, it is delivered and the parked ones after it follow, in order;
* a number still missing ``window`` rounds after a later one was parked may be lost (or only late:
  the receiver cannot tell): the sender's side **retransmits** every number missing below the parked
  ones, each the same envelope under the same number (never a new one), once, and they arrive next
  round (a selective repeat);
* whichever copy of a retransmitted message arrives first is delivered; the other, the same envelope
  again, is dropped by the session (the seed's transport deduplication, of its own copies only: a
  redelivery the network makes of anything else still reaches intake, whose deduplication it tests).

A number that nobody can send again (the sender never sent one under it) is given up after a further
window, and the parked messages go on (a gap the exported trace then shows).

A number below the next one (a sender whose sequence went back, a redelivery, a copy made under the
same number) is not the session's business: it is delivered, and the runtime's conversation rules
refuse what they must (:func:`sim.planner.conversation_rule`).

A naive runtime has no session: whatever the network presents is delivered as it comes, and a run
with a lost, late or reordered message exports a trace with the gap in it.

Used by :class:`sim.schedule.Schedule` on what the transport has due each round; a delivery plan (a
scenario's ``deliveries``, a searched counterexample) and a search over delivery orders
(:mod:`sim.explore`) choose the order themselves and bypass it.
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Iterable, Iterator

from .envelope import Envelope

__all__ = ["Session"]

Body = tuple[str, int]  # (sender, generation)


class Session:
    """Per body: the next number owed, the messages parked ahead of it, and what was sent and not yet
    delivered (so a lost one can be sent again)."""

    def __init__(self, window: int):
        self.window = window
        self.next: dict[Body, int] = {}
        #: body -> [(round parked, arrival order, seq, envelope)]
        self.parked: dict[Body, list[tuple[int, int, int, Envelope]]] = {}
        #: body -> the round its oldest parked message has waited since (reset by each retransmission)
        self.waiting: dict[Body, int] = {}
        #: message id -> the envelope as the network was handed it, until its first delivery
        self.unsent: dict[str, Envelope] = {}
        #: the latest message ids sent again, in order (the last thousand: a long run with losses keeps no
        #: list of them all); ``resent`` counts every one
        self.retransmitted: deque[str] = deque(maxlen=1000)
        self.resent = 0
        self._copies: dict[str, bool] = {}  # a message sent again -> whether one copy has been taken
        self.dropped: list[Envelope] = []  # the other copies dropped, until the run records them
        self._order = 0

    # ------------------------------------------------------------------ sending side

    def track(self, env: Envelope) -> None:
        """The transport was handed ``env`` (the bus calls this for every envelope it queues)."""
        self.unsent.setdefault(env.message_id, env)

    def busy(self) -> bool:
        """Whether any message is parked (the run is not over while one is)."""
        return bool(self.parked)  # a body's list goes when its last message is delivered

    def waiting_text(self) -> str:
        """What is parked, in a few words for a status line ('' when nothing is): 'M-4 waits for researcher
        #2', or 'N messages wait in sequence'."""
        items = [(b, x) for b, xs in sorted(self.parked.items()) for x in xs]
        if not items:
            return ""
        if len(items) == 1:
            (sender, _gen), x = items[0]
            return f"{x[3].message_id} waits for {sender} #{self.next.get(items[0][0], 1)}"
        return f"{len(items)} messages wait in sequence"

    def tasks(self) -> set[str]:
        """The tasks of the parked messages."""
        return {env.task_id for items in self.parked.values() for *_x, env in items}

    # ------------------------------------------------------------------ receiving side

    def order(self, arrivals: Iterable[Envelope], meta: Callable[[str], "tuple[int, int] | None"],
              now: int, on_the_way: Callable[[str], bool] = lambda mid: True) -> Iterator[Envelope]:
        """``arrivals`` (what the network has due this round, in its order) as the session delivers them:
        each message its body owes next, then the parked ones it unblocks; one ahead of its body's
        next number is parked. ``meta(message_id)`` is the (seq, generation) the send was numbered with
        (None: not numbered, or delivered before: delivered as it comes); ``on_the_way(message_id)``,
        whether another copy of it is still on the network (so a copy sent again whose original was
        really lost is forgotten once taken: a run keeps nothing of it)."""
        batch = list(arrivals)  # taken off the network at once: a copy later in it is still to come
        later: dict[str, int] = {}
        for env in batch:
            later[env.message_id] = later.get(env.message_id, 0) + 1
        for env in batch:
            later[env.message_id] -= 1
            copies = self._copies.get(env.message_id)
            if copies is not None:
                if copies:  # the other copy of a message sent again: the same envelope, already taken
                    del self._copies[env.message_id]
                    self.dropped.append(env)
                    continue
                if later[env.message_id] > 0 or on_the_way(env.message_id):
                    self._copies[env.message_id] = True  # this copy is taken (delivered now, or parked)
                else:
                    del self._copies[env.message_id]  # the other copy was lost: none will come
            m = meta(env.message_id)
            if m is None or not m[0]:
                self.unsent.pop(env.message_id, None)
                yield env
                continue
            seq, gen = m
            body = (env.sender, gen or 1)
            want = self.next.get(body, 1)
            if seq > want:
                self._order += 1
                self.parked.setdefault(body, []).append((now, self._order, seq, env))
                self.waiting.setdefault(body, now)
                continue
            self.unsent.pop(env.message_id, None)
            yield env
            if seq == want:
                self.next[body] = want + 1
                if body in self.parked:
                    yield from self._flush(body)

    def _flush(self, body: Body) -> Iterator[Envelope]:
        """Deliver the parked messages of ``body`` its next number has reached, in number order."""
        items = self.parked.get(body)
        while items:
            want = self.next.get(body, 1)
            ready = [x for x in items if x[2] <= want]
            if not ready:
                break
            first = min(ready, key=lambda x: (x[2], x[1]))
            items.remove(first)
            self.unsent.pop(first[3].message_id, None)
            if first[2] == want:
                self.next[body] = want + 1
            if items:  # what is still parked waits for its next gap from when it was parked
                self.waiting[body] = min(x[0] for x in items)
            yield first[3]
        if not items:
            self.parked.pop(body, None)
            self.waiting.pop(body, None)

    def overdue(self, now: int, meta: Callable[[str], "tuple[int, int] | None"]) -> tuple[list[Envelope], list[Envelope]]:
        """At the start of round ``now``: (the lost messages to send again now, the parked messages to
        deliver now because the number they wait for can never come). A body whose next number has been
        awaited ``window`` rounds gets every number it is missing below its parked ones sent again (a
        selective repeat: each once); one awaited a further window with nothing to send again under its
        next number is given up."""
        again: list[Envelope] = []
        released: list[Envelope] = []
        late = [b for b in sorted(self.parked) if now - self.waiting.get(b, now) >= self.window]
        if not late:
            return again, released
        numbered = self._numbered(set(late), meta)
        for body in late:
            since = self.waiting.get(body, now)
            want = self.next.get(body, 1)
            items = self.parked[body]
            have = {x[2] for x in items}
            top = max(have)
            sent_again = False
            for seq in range(want, top):
                lost = numbered.get((body, seq))
                if seq in have or lost is None:
                    continue
                sent_again = sent_again or seq == want
                if lost.message_id not in self._copies:  # once: the copy sent again is never lost
                    again.append(lost)
                    self.retransmitted.append(lost.message_id)
                    self.resent += 1
                    self._copies[lost.message_id] = False
            if sent_again:
                self.waiting[body] = now
            elif now - since >= 2 * self.window:
                # nobody can send this number again: skip it, and every number after it nobody can send,
                # up to the lowest parked one or the lowest one still on its way (sent again: it comes)
                skip_to = want
                while skip_to not in have and (body, skip_to) not in numbered:
                    skip_to += 1
                self.next[body] = skip_to
                if skip_to in have:
                    released.extend(self._flush(body))
                else:
                    self.waiting[body] = now
        return again, released

    def _numbered(self, bodies: set, meta) -> dict:
        """(body, seq) -> the envelope sent under it and not yet delivered, for ``bodies``."""
        out = {}
        for mid, env in self.unsent.items():
            m = meta(mid)
            if m is not None and (env.sender, m[1] or 1) in bodies:
                out.setdefault(((env.sender, m[1] or 1), m[0]), env)
        return out
