"""Replay: prove that state is the fold of the event log, and that publication cannot run twice.

``rebuild`` folds the event log alone, in order, through the store's one reducer into an
empty database; its state digest must equal the live one. ``redeliver`` hands every
delivered envelope to intake again, in the original order, on a copy of the run: under the
safe policy every one of them is a duplicate (or late, or rejected again) and no side effect
commits a second time.

A run made with a plugged-in intake or effect rule (``protolab run --intake/--effects``) records which
file it used (``plugin_intake``, ``plugin_effects`` in meta: name and content hash). Its redelivery
must go through the same parts, or it judges the student's run by the kit's rule: :func:`replay_parts`
takes them again (``protolab replay --effects FILE``), refuses when a part the run used is not given,
and notes a file whose bytes changed since. A plugged design or machine needs nothing: the log holds
the envelopes the design built, and the store the machine's table.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from .envelope import envelope_from_row
from .policy import get_policy
from .runtime import deliver, digest_as_logged
from .store import Store

__all__ = ["rebuild", "redeliver", "replay_report", "replay_parts", "REPLAYED_PARTS"]


def rebuild(store: Store, path=None) -> Store:
    """A new store (in memory, or a new file ``path``) holding only what the event log of ``store``
    folds into."""
    fresh = Store.create(path, start_time=store.start_time, empty=True)
    with fresh.transaction():
        for ev in store.iter_events():
            fresh.advance(to=ev.tick)
            fresh.append_event(ev.draft(), delivery_id=ev.delivery_id)
    return fresh




#: The plug-ins a redelivery goes through again, by the option that gives them: (meta key, what it is).
REPLAYED_PARTS = {"intake": ("plugin_intake", "intake"), "effects": ("plugin_effects", "effect rule")}


def replay_parts(store: Store, *, db_name: str = "protolab.db", intake=None, effects=None):
    """The policy a redelivery of ``store``'s run goes through, and notes to print: the run's policy
    with the intake and effect rule it was made with, taken from the files given (``intake``,
    ``effects``: paths, or None). Refuses (``E_PLUGIN_NEEDED``) when the run used one of them and
    it is not given: redelivering a student's run through the kit's rule would judge another rule."""
    from .errors import InputError
    from .plugins import Plugins, file_tag

    given = {"intake": intake, "effects": effects}
    notes: list[str] = []
    missing = [(opt, store.get_meta(key)) for opt, (key, _what) in REPLAYED_PARTS.items()
               if store.get_meta(key) and given[opt] is None]
    if missing:
        opts = " ".join(f"--{opt} {(tag or '').split(' ')[0] or 'FILE'}" for opt, tag in missing)
        what = ", ".join(f"--{opt} {tag}" for opt, tag in missing)
        raise InputError(f"{db_name} was made with {what}: its messages are redelivered through the same parts; "
                         f"give them again: protolab replay --db {db_name} {opts}", code="E_PLUGIN_NEEDED")
    for opt, (key, what) in REPLAYED_PARTS.items():
        f = given[opt]
        if f is None:
            continue
        recorded, now = store.get_meta(key), file_tag(f) if Path(f).is_file() else None
        if now is None:
            continue  # Plugins.load says the file is missing, in its words
        if not recorded:
            notes.append(f"the run was made with the kit's {what}; redelivering through {Path(f).name} instead")
        elif recorded.split(" ")[-1] != now.split(" ")[-1]:
            notes.append(f"{Path(f).name} changed since the run was made (the run used {recorded}, the file is "
                         f"{now.split(' ')[-1]}); redelivering through the file as it is now")
    plugins = Plugins(intake=intake, effects=effects)
    _design, policy, _rules = plugins.load(store.get_meta("policy") or "safe")
    return policy, plugins.meta(), notes


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
                out = deliver(copy, envelope_from_row(row), policy=pol, tick=max(copy.tick, row["first_tick"]) + 1,
                              digest_ok=digest_as_logged(row))
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


def replay_report(store: Store, *, redeliver_messages: bool = True, scratch=None, policy=None) -> dict:
    """Rebuild from events, compare digests, and (optionally) redeliver every message (through
    ``policy``: by default the run's own, by name; :func:`replay_parts` gives a plugged run's).

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
        report["redelivery"] = redeliver(store, policy=policy, path=None if scratch is None else Path(scratch) / "copy.db")
    return report
