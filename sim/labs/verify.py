"""Verifying a run by doing it again: every recorded envelope re-delivered, in its order, through
the reference runtime into a fresh store, with the runtime's own actions (lease expiries, stored
artifacts, injected faults) re-applied where they happened. A run made by protolab comes out
with the same decisions, the same events and the same state digest; a database edited by hand
(a transition row changed, an event deleted, a decision rewritten) does not, and the first point
where they part is named.

The runtime's own actions are re-applied as recorded only so that the deliveries after them meet the
state they left; they are not taken on trust. For a lab's run, :func:`rederive_from_journal` makes
the run again from the lab's declared start and the journal of what the lab session did, and an
event that replay does not give (a ``fault_injected`` row added by hand, wherever it is placed) is
explained by nothing: the run is not genuine, and the event is named by number, type and tick. An
event that cannot stand where it is (its round before the clock) is a difference too, never an error.
"""

from __future__ import annotations

import tempfile
from collections import deque
from itertools import zip_longest
from pathlib import Path

from ..envelope import envelope_from_row
from ..errors import ProtolabError
from ..policy import get_policy
from ..runtime import deliver, digest_as_logged
from ..store import Store

__all__ = ["rebuild_by_redelivery", "rederive_from_journal", "verify_run"]

_COMPARED = ("type", "task_id", "message_id", "data")

#: Rows read at a time from the recorded run (three logs at once: small pages keep memory flat).
_PAGE = 500




def rebuild_by_redelivery(store: Store, *, policy: str | None = None,
                          stop_at_first_difference: bool = True, path=None, progress=None) -> tuple[Store, str | None]:
    """``(fresh store, first difference or None)``. ``policy`` defaults to the run's own.

    With ``stop_at_first_difference`` off (a replay under another policy, whose events are meant
    to differ), a runtime action that no longer applies to the replayed state is skipped.
    ``path``: where the fresh store is written (a scratch file keeps memory flat for a large run;
    the default is in memory, for a lab's small run). The recorded deliveries are read beside the
    re-delivery, a page at a time, never held whole. ``progress(done, total)`` is called every
    hundred deliveries re-delivered, and at the end."""

    pol = get_policy(policy or store.get_meta("policy") or "safe")
    fresh = Store.create(path, start_time=store.start_time, empty=True)
    if store.get_meta("privacy"):
        # the run's declared sensitive fields: minimising, redacting and the payload shapes read them
        fresh.set_meta({"privacy": store.get_meta("privacy")})
    # each delivery's recorded columns (decision, state after) beside its envelope, both in order
    rows = zip(store.iter_deliveries(_PAGE), store.iter_deliveries_with_messages(_PAGE))
    pending = next(rows, None)
    check = stop_at_first_difference
    difference: str | None = None
    regenerated: deque = deque()  # events the re-delivery produced, not yet matched against the log
    total = store.count_of("deliveries") if progress is not None else 0
    done = 0

    def deliver_next() -> None:
        nonlocal pending, difference, done
        was, row = pending
        pending = next(rows, None)
        done += 1
        if progress is not None and done % 100 == 0:
            progress(done, total)
        if was["delivery_id"] != row["delivery_id"]:
            # a delivery whose message is gone (the join skipped it): a database edited by hand;
            # nothing after it can be paired, so the re-delivery stops here
            pending = None
            if difference is None:
                difference = f"delivery {was['delivery_id']} names no recorded message"
            return
        sent = (row["sender_seq"], row["sender_generation"]) if row.get("sender_seq") is not None else None
        before = fresh.last_event()
        try:
            out = deliver(fresh, envelope_from_row(row), policy=pol, tick=row["delivery_tick"], sent=sent,
                          digest_ok=digest_as_logged(row, was.get("reason")))
        except ProtolabError as e:
            if not check:
                raise
            # a delivery the runtime cannot make where the log puts it (its round before the clock an
            # edited event moved on): the run is not what the runtime made; nothing after it pairs
            pending = None
            if difference is None:
                difference = (f"delivery {row['delivery_id']} ({row['message_id']}, {row['type']}, tick "
                              f"{row['delivery_tick']}) cannot be re-delivered where it stands: {e.message}")
            return
        # the events this delivery appended: read by their numbers after the last one (the events
        # table has no index by delivery, so asking by delivery scanned it whole, once per delivery)
        regenerated.extend(e for e in fresh.events(after=before) if e.delivery_id == out.delivery_id)
        if check and difference is None:
            if (was["decision"], was["state_after"]) != (out.decision, out.state):
                difference = (f"delivery {row['delivery_id']} ({row['message_id']}, {row['type']}): recorded "
                              f"{was['decision']} -> {was['state_after']}, re-delivered {out.decision} -> {out.state}")

    def catch_up(*, upto_id: int | None = None, before_tick: int | None = None) -> None:
        while pending is not None and ((upto_id is not None and pending[0]["delivery_id"] <= upto_id)
                                       or (before_tick is not None and pending[0]["tick"] < before_tick)):
            deliver_next()

    for ev in store.iter_events(_PAGE):
        if check and difference is not None:
            break  # the run has parted from what the runtime makes: nothing after this point pairs
        if ev.delivery_id is None:
            # The runtime's own action at this point of the run (a lease expiry, a stored
            # artifact, an injected fault): applied as it was here, so that the deliveries after it
            # meet the state it left. Whether the run's story explains it at all is for
            # :func:`rederive_from_journal` (a lab's run) to say; here, one that cannot happen where
            # it stands (its round before the clock, a transition the machine refuses) is a difference.
            catch_up(before_tick=ev.tick)
            if check and difference is not None:
                break
            try:
                with fresh.transaction():
                    fresh.advance(to=ev.tick)
                    fresh.append_event(ev.draft())
            except ProtolabError as e:
                if check:
                    difference = f"{_named(ev)} cannot stand where it is: {e.message}"
            continue
        catch_up(upto_id=ev.delivery_id)
        got = regenerated.popleft() if regenerated else None
        if check and difference is None and (got is None or any(got[k] != ev[k] for k in _COMPARED)):
            difference = (f"event {ev.seq} ({ev.type} of {ev.task_id or ev.message_id}): recorded "
                          f"{_brief(ev)}, re-delivery gives {_brief(got) if got else 'nothing'}")
    while pending is not None and not (check and difference is not None):
        deliver_next()
    if progress is not None:
        progress(total, total)
    if check and difference is None and regenerated:
        ev = regenerated[0]
        difference = f"re-delivery gives an event the log does not hold: {_brief(ev)} of {ev.task_id or ev.message_id}"
    return fresh, difference


#: The events a run delivered by hand (a hand-delivery lab: no simulator, no journal) holds beside its
#: deliveries: the machine the store was made with, and artifacts the learner stored
#: ('protolab artifact put', content-addressed: the reducer recomputes the ref from the content).
_BY_HAND = frozenset({"machine_loaded", "artifact_stored"})

#: Meta keys that say which story a run plays: the journal's replay must carry the same.
_STORY = ("scenario", "seed", "policy", "faults")


def _journal_of(store: Store) -> tuple[list | None, str | None]:
    """``(journal, None)``, or ``(None, why it cannot be read)``; a run with no journal (made by
    ``protolab run``, or by a protolab before labs journaled) is its story played to the end."""
    import json

    from .resume import JOURNAL_KEY

    raw = store.get_meta(JOURNAL_KEY)
    if raw is None:
        return [["step", None]], None
    try:
        journal = json.loads(raw)
    except (json.JSONDecodeError, TypeError):
        return None, "its journal (what the lab session did) cannot be read"
    if not isinstance(journal, list) or not all(isinstance(e, list) and e and isinstance(e[0], str) for e in journal):
        return None, "its journal (what the lab session did) is not a list of calls"
    return journal, None


def _replay(live, journal: list, *, max_events: int) -> str | None:
    """Drive ``live`` (a fresh run of the lab) through ``journal``; a reason when it cannot be. A step
    count beyond the run's end stops at the end (a journal that asks for a billion steps costs none),
    and a replay that makes more events than the run holds stops there (it cannot match)."""
    for i, entry in enumerate(journal, 1):
        kind, args = entry[0], entry[1:]
        try:
            if kind == "step":
                n = args[0] if args else 1
                if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 0):
                    return f"its journal's call {i} asks for {n!r} steps"
                quiet = 0
                done = 0
                while (n is None or done < n) and quiet < 2:
                    # past its end a run stays where it is: two quiet steps in a row and the rest are quiet too
                    quiet = quiet + 1 if live.step() is None else 0
                    done += 1
                    if live.store.last_event() > max_events:
                        return None
            else:
                live.replay([entry])  # a call refused when it was made is refused again: part of the story
        except ProtolabError as e:
            return f"its journal's call {i} ({kind}) cannot be replayed: {e.code}: {e.message}"
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:
            return f"its journal's call {i} ({kind}) cannot be replayed: {type(e).__name__}: {e}"
        if live.store.last_event() > max_events:
            return None
    return None


def rederive_from_journal(store: Store, lab) -> str | None:
    """The first event (or delivery) of a lab's run that the lab's own story does not explain; None
    when every one is explained.

    Re-delivery (:func:`rebuild_by_redelivery`) re-derives what each delivery did from its envelope,
    but the runtime's own actions between deliveries (an injected fault, a lease expiry, a stored
    artifact, a resend) are re-applied as recorded: a ``fault_injected`` row added by hand would be
    applied too, and counted. Their cause is recorded apart from the log: the run's journal (meta
    ``lab_journal``, :attr:`sim.live.LiveRun.journal`) lists every call that drove the run, in order
    (steps counted, each fault injected with its name and message, each crash, each reviewer's
    decision), and the lab declares where the run starts (``lab.toml``: scenario, seed, policy,
    starting faults; never the run's own meta, which the file carries). So the run is made again:
    a fresh run of the lab's declared start, driven through the journal, must give every event
    (type, subject, data, round, delivery), every delivery and every message of the file, in order,
    and its state. An event the replay does not give (a hand-made ``fault_injected``, wherever it
    is placed) is explained by nothing, and is named. The journal travels in the same file, but
    it is no way around this: a journal edited to explain a forged event makes the replay perform
    that call, with every consequence the runtime gives it (the duplicate delivered, the lease
    expired), and the file must hold all of those too; a file that does is the run that journal
    makes, which the learner could have played. A run with no journal (``protolab run`` of the
    lab's story) is its story played to the end. A hand-delivery lab has no simulator: beside its
    deliveries, its run may hold only what a learner's own commands write (:data:`_BY_HAND`)."""
    from ..live import LiveRun
    from ..scenario import load_scenario
    from .judge import LAB_RUN_MAX_DELIVERIES

    if lab.mode == "hand-delivery":
        for ev in store.iter_events(_PAGE):
            if ev.delivery_id is None and ev.type not in _BY_HAND:
                return (f"{_named(ev)} is explained by nothing: lab {lab.number} is delivered by hand (no simulator, "
                        "no fault injected), and no delivery made it")
        return None
    journal, why = _journal_of(store)
    if journal is None:
        return why
    if len(journal) > 4 * LAB_RUN_MAX_DELIVERIES:
        return f"its journal holds {len(journal):,} calls, more than any run of lab {lab.number} takes"
    from .resume import JOURNAL_KEY

    what = (f"the lab's journal, replayed from lab {lab.number}'s start," if store.get_meta(JOURNAL_KEY) is not None else
            f"the run has no journal (it was not made by 'protolab lab start {lab.number}'), and lab {lab.number}'s "
            "story played to the end")
    last = store.last_event()
    live = LiveRun(load_scenario(lab.scenario), policy=lab.policy, seed=lab.seed, faults=list(lab.faults))
    try:
        why = _replay(live, journal, max_events=last)
        if why is not None:
            return why
        made = live.store
        for key in _STORY:
            if (store.get_meta(key) or "") != (made.get_meta(key) or ""):
                return (f"the run says {key} {store.get_meta(key)!r}; lab {lab.number} starts from "
                        f"{made.get_meta(key)!r}")
        ours, theirs = store.iter_events(_PAGE), made.iter_events(_PAGE)
        for a, b in zip_longest(ours, theirs):
            if a is None:
                return f"{what} gives {_named(b)}, which the run does not hold (it ends at event {last})"
            if b is None:
                return f"{_named(a)} is explained by nothing: {what} ends at event {a['seq'] - 1}"
            if dict(a) != dict(b):
                return f"{_named(a)} is explained by nothing: {what} gives {_named(b)} there"
        ours, theirs = store.iter_deliveries_with_messages(_PAGE), made.iter_deliveries_with_messages(_PAGE)
        for a, b in zip_longest(ours, theirs):
            if a != b:
                d = a or b
                return (f"delivery {d['delivery_id']} ({d['message_id']}, {d['type']}) "
                        + (f"is not what {what} delivers" if a is not None and b is not None
                           else f"is explained by nothing: {what} makes no such delivery"
                           if a is not None else f"is made by {what}, but the run does not hold it"))
        if store.state_digest() != made.state_digest():
            return f"the state tables differ from what {what} gives (state edited by hand)"
    finally:
        live.close()
    return None


def _named(ev) -> str:
    """An event as a difference names it: its number, type, what it is about and its round."""
    about = ev["task_id"] or ev["message_id"]
    return f"event {ev['seq']} ({_brief(ev)}{' of ' + about if about else ''}, tick {ev['tick']})"


def _brief(ev: dict) -> str:
    data = ev.get("data") or {}
    keys = ("from", "to", "fault", "effect_key", "decision")
    shown = ", ".join(f"{k}={data[k]}" for k in keys if k in data)
    return f"{ev['type']}" + (f" ({shown})" if shown else "")


def verify_run(store: Store, progress=None, *, lab=None) -> dict:
    """Re-deliver the run and compare: ``{"ok", "difference", "recorded_digest", "redelivered_digest"}``.
    With ``lab`` (the lab the run is judged as), every event must also be explained by the lab's story
    (:func:`rederive_from_journal`)."""
    plugged = [k for k in ("plugin_design", "plugin_intake", "plugin_effects", "plugin_machine") if store.get_meta(k)]
    if plugged:
        return {"ok": False, "difference": "the run used a student's plugged-in file; only reference runs are verified",
                "recorded_digest": store.state_digest(), "redelivered_digest": None}
    with tempfile.TemporaryDirectory(prefix="protolab-verify-") as tmp:
        # the re-delivered run on a scratch file: memory stays flat however large the run
        fresh, difference = rebuild_by_redelivery(store, path=Path(tmp) / "redelivered.db", progress=progress)
        try:
            ours, theirs = store.state_digest(), fresh.state_digest()
        finally:
            fresh.close()
    if difference is None and lab is not None:
        # before the digests: an event added by hand that also moved state is named, not only the state
        difference = rederive_from_journal(store, lab)
    if difference is None and ours != theirs:
        difference = "the state tables differ from what the event log and the messages give (state edited by hand)"
    return {"ok": difference is None, "difference": difference, "recorded_digest": ours, "redelivered_digest": theirs}
