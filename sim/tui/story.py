"""The workshop's story: the moments of a naive-beside-safe run worth stopping at, found by playing it.

Nothing here is written by hand for a fault or a scenario: :func:`plan` plays the naive side one delivery
at a time, checking every invariant after each, and the first delivery after which one breaks is the
culprit; the safe side is played too and the same message's delivery there is its decision. The
captions are made from those rows (message, type, task, the move the witness names, intake's decision
and code, the task's state after it).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ProtolabError
from ..faults import FAULTS
from ..invariants import check
from ..live import LiveRun

__all__ = ["Culprit", "Story", "Moment", "plan", "moments", "story_faults"]


@dataclass(frozen=True)
class Culprit:
    """The delivery on one side that the story stops at."""

    index: int  # its position in the side's delivery list (0-based): the row the story highlights
    steps: int  # the side's deliveries before it (LiveRun.delivered): where the story stops first
    delivery_id: int
    message_id: str
    task_id: str
    type: str
    status: str | None  # a task_result's payload status (succeeded, failed, ...), else None
    decision: str
    code: str | None
    state_before: str | None  # the task's state just before the delivery
    state_after: str | None  # ... and just after it


@dataclass(frozen=True)
class Story:
    """A run's story: the fault, the naive culprit and what it broke, the safe side's decision on it."""

    faults: tuple[str, ...]
    naive: Culprit
    safe: Culprit | None  # None: the message never reached the safe side
    broken: tuple[str, ...]  # the invariants the culprit broke on the naive side (names)
    witness: dict  # the first broken invariant's first witness
    naive_total: int  # deliveries of each side's whole run
    safe_total: int
    naive_broken_at_end: tuple[str, ...]
    safe_broken_at_end: tuple[str, ...]


@dataclass(frozen=True)
class Moment:
    """One stop of the story: how many deliveries each side has had, its caption, the rows lit."""

    name: str  # "before", "after", "end"
    naive_at: int | None  # deliveries on each side at this stop (None: to the end)
    safe_at: int | None
    naive_caption: str
    safe_caption: str
    highlight: str  # "task": the culprit's task row; "message": the culprit delivery row


def _task_state(store, task_id: str) -> str | None:
    for t in store.tasks():
        if t["task_id"] == task_id:
            return t["state"]
    return None


def _culprit(live: LiveRun, out, before: str | None) -> Culprit:
    ids = list(live.store.delivery_ids())
    return Culprit(index=ids.index(out.delivery_id), steps=live.delivered - 1, delivery_id=out.delivery_id,
                   message_id=out.message_id, task_id=out.task_id,
                   type=out.type, status=_payload_status(live.store, out.delivery_id), decision=out.decision,
                   code=out.code, state_before=before, state_after=_task_state(live.store, out.task_id))


def _payload_status(store, delivery_id: int) -> str | None:
    """A delivered task_result's status, from the stored envelope that delivery carried."""
    rows = store.deliveries_at([delivery_id])
    if not rows:
        return None
    msg = store.message_at(rows[0]["msg_seq"])
    payload = msg["payload"] if msg is not None else None
    return payload.get("status") if isinstance(payload, dict) else None


def plan(make_run, faults) -> Story | None:
    """Play both sides of ``faults`` (``make_run(policy, faults) -> LiveRun``, in memory) and find the
    story; None when the naive side breaks nothing (no story to tell with these faults)."""
    faults = tuple(faults)
    naive = make_run("naive", faults)
    try:
        culprit, broken, seen = None, (), {}
        while True:
            before_states = {t["task_id"]: t["state"] for t in naive.store.tasks()}
            out = naive.step()
            if out is None:
                return None
            seen[out.message_id] = seen.get(out.message_id, 0) + 1
            bad = [r for r in check(naive.store) if not r.ok]
            if bad:
                culprit = _culprit(naive, out, before_states.get(out.task_id))
                broken = bad
                break
        naive.run_to_end()
        naive_total = naive.delivered
        naive_end = tuple(r.name for r in check(naive.store) if not r.ok)
    finally:
        naive.close()
    safe = make_run("safe", faults)
    try:
        # the same message's delivery on the safe side: its n-th delivery, n as on the naive side
        nth, seen, safe_culprit = seen[culprit.message_id], 0, None
        while True:
            before_states = {t["task_id"]: t["state"] for t in safe.store.tasks()}
            out = safe.step()
            if out is None:
                break
            if safe_culprit is None and out.message_id == culprit.message_id:
                seen += 1
                if seen == nth:
                    safe_culprit = _culprit(safe, out, before_states.get(out.task_id))
        safe_total = safe.delivered
        safe_end = tuple(r.name for r in check(safe.store) if not r.ok)
    finally:
        safe.close()
    return Story(faults=faults, naive=culprit, safe=safe_culprit, broken=tuple(r.name for r in broken),
                 witness=dict(broken[0].witnesses[0]), naive_total=naive_total, safe_total=safe_total,
                 naive_broken_at_end=naive_end, safe_broken_at_end=safe_end)


def _what(c: Culprit) -> str:
    said = f"{c.type} {c.status}" if c.status else c.type
    return f"{c.message_id} ({said} for {c.task_id})"


def _count(names) -> str:
    return f"{len(names)} invariant" + ("s" if len(names) != 1 else "")


def _now(c: Culprit) -> str:
    return f"{c.task_id} is {c.state_before}" if c.state_before else f"no task {c.task_id} yet"


def moments(story: Story | None, faults=()) -> list[Moment]:
    """The stops, in order: the start, before the culprit arrives, just after, and the end. With no
    story (the naive side breaks nothing with these faults): the start and the end."""
    said = ", ".join(faults) or "no faults"
    start = Moment("start", 0, 0, f"fault {said}: the same messages go to both sides",
                   "same seed, same faults, the course's rules", "none")
    if story is None:
        return [start, Moment("end", None, None, f"end: with {said} the naive side breaks nothing",
                              "end: every invariant holds", "none")]
    n, s = story.naive, story.safe
    w = story.witness
    move = f": {n.task_id} {w['old_state']} → {w['new_state']}" if w.get("old_state") and w.get("new_state") else ""
    if not move and w.get("times_committed"):
        move = f": {w.get('task_id') or n.task_id}'s {w.get('kind') or 'effect'} committed {w['times_committed']} times"
    elif not move and w.get("problem"):
        move = f": {w['problem']}"
    more = f" and {len(story.broken) - 1} more" if len(story.broken) > 1 else ""
    before_naive = f"next: {_what(n)} arrives; {_now(n)}"
    if s is None:
        before_safe = f"{n.message_id} never reaches this side"
        after_safe = f"{n.message_id} never arrived here: nothing to decide"
    else:
        before_safe = f"next: the same {s.message_id} arrives; {_now(s)}"
        kept = (f"{s.task_id} stays {s.state_after}" if s.state_after == s.state_before
                else f"{s.task_id} {s.state_before} → {s.state_after}")
        if s.state_after is None:
            kept = "nothing changes"
        after_safe = f"{s.message_id} decided {s.decision}" + (f" ({s.code})" if s.code else "") + f": {kept}"
    after_naive = f"{n.message_id} {n.decision}{move}: BROKEN {story.broken[0]}{more}"
    end_naive = (f"end: {_count(story.naive_broken_at_end)} broken, the first by {n.message_id}"
                 if story.naive_broken_at_end else "end: every invariant holds")
    end_safe = (f"end: {_count(story.safe_broken_at_end)} broken" if story.safe_broken_at_end
                else "end: every invariant holds")
    return [
        start,
        Moment("before", n.steps, s.steps if s else n.steps, before_naive, before_safe, "task"),
        Moment("after", n.steps + 1, (s.steps + 1) if s else n.steps + 1, after_naive, after_safe, "message"),
        Moment("end", None, None, end_naive, end_safe, "message"),
    ]


def story_faults(planned, first: tuple[str, ...]) -> tuple[str, ...] | None:
    """The fault after ``first`` (in the registry's order, wrapping round) whose run tells a story: the
    naive side breaks an invariant. ``planned(faults)`` is :func:`plan` over the app's runs (it may keep
    what it found). None: no fault does."""
    names = list(FAULTS)
    start = names.index(first[0]) if len(first) == 1 and first[0] in names else -1
    for k in range(1, len(names) + 1):
        cand = (names[(start + k) % len(names)],)
        if cand == first:
            continue
        try:
            found = planned(cand)
        except ProtolabError:  # a fault this run refuses (a scenario it cannot touch): no story
            found = None
        if found is not None:
            return cand
    return None
