"""Replay: prove that state is the fold of the event log, and that publication cannot run twice.

``rebuild`` folds the event log alone, in order, through the store's one reducer into an
empty database; its state digest must equal the live one. ``redeliver`` hands every
delivered envelope to intake again, in the original order, on a copy of the run: under the
safe policy every one of them is a duplicate (or late, or rejected again) and no side effect
commits a second time.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from .envelope import envelope_from_row
from .policy import get_policy
from .runtime import deliver
from .store import Store

__all__ = ["rebuild", "redeliver", "replay_report"]


def rebuild(store: Store, path=None) -> Store:
    """A new store (in memory, or a new file ``path``) holding only what the event log of ``store``
    folds into."""
    fresh = Store.create(path, start_time=store.start_time, empty=True)
    with fresh.transaction():
        for ev in store.iter_events():
            fresh.advance(to=ev.tick)
            fresh.append_event(ev.draft(), delivery_id=ev.delivery_id)
    return fresh




def redeliver(store: Store, *, policy=None, path=None) -> dict:
    """Deliver the whole message log again, on a copy (in memory, or a new file ``path``); report
    what it did to effects.

    ``policy`` is a name or a :class:`~sim.policy.Policy` (one with a student's intake or effect
    rule, say); by default the run's own policy, by name."""
    if policy is not None and not isinstance(policy, str):
        pol = policy
    else:
        pol = get_policy(policy or store.get_meta("policy") or "safe")
    copy = store.copy(path)
    try:
        before = {e["effect_key"] for e in copy.effects()}
        decisions: Counter = Counter()
        n = 0
        with copy.group_commits():  # a copy thrown away afterwards: no need to commit each one
            for row in store.iter_deliveries_with_messages():
                out = deliver(copy, envelope_from_row(row), policy=pol, tick=max(copy.tick, row["first_tick"]) + 1)
                decisions[out.decision] += 1
                n += 1
        after = copy.effects()
        again = [e["effect_key"] for e in after if e["effect_key"] not in before]
        return {
            "policy": pol.name,
            "redelivered": n,
            "decisions": dict(sorted(decisions.items())),
            "effects_before": len(before),
            "effects_committed_again": again,
        }
    finally:
        copy.close()


def replay_report(store: Store, *, redeliver_messages: bool = True, scratch=None) -> dict:
    """Rebuild from events, compare digests, and (optionally) redeliver every message.

    ``scratch``: a folder for the rebuilt store and the redelivery's copy (files, so memory stays
    flat however big the run); without it both are in memory."""
    live = store.state_digest()
    fresh = rebuild(store, None if scratch is None else Path(scratch) / "rebuilt.db")
    try:
        replayed = fresh.state_digest()
        events = fresh.counts()["events"]
    finally:
        fresh.close()
    report = {"events": events, "live_digest": live, "state_digest": replayed, "match": live == replayed}
    if redeliver_messages:
        report["redelivery"] = redeliver(store, path=None if scratch is None else Path(scratch) / "copy.db")
    return report
