"""Verifying a run by doing it again: every recorded envelope re-delivered, in its order, through
the reference runtime into a fresh store, with the runtime's own actions (lease expiries, stored
artifacts, injected faults) re-applied where they happened. A run made by protolab comes out
with the same decisions, the same events and the same state digest; a database edited by hand
(a transition row changed, an event deleted, a decision rewritten) does not, and the first point
where they part is named.
"""

from __future__ import annotations

import tempfile
from collections import deque
from pathlib import Path

from ..envelope import envelope_from_row
from ..policy import get_policy
from ..runtime import deliver
from ..store import Store

__all__ = ["rebuild_by_redelivery", "verify_run"]

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
    from ..errors import ProtolabError

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
        out = deliver(fresh, envelope_from_row(row), policy=pol, tick=row["delivery_tick"], sent=sent)
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
        if ev.delivery_id is None:
            # The runtime's own action at this point of the run (a lease expiry, a stored
            # artifact, an injected fault): apply it as it was.
            catch_up(before_tick=ev.tick)
            try:
                with fresh.transaction():
                    fresh.advance(to=ev.tick)
                    fresh.append_event(ev.draft())
            except ProtolabError:
                if check:
                    raise
            continue
        catch_up(upto_id=ev.delivery_id)
        got = regenerated.popleft() if regenerated else None
        if check and difference is None and (got is None or any(got[k] != ev[k] for k in _COMPARED)):
            difference = (f"event {ev.seq} ({ev.type} of {ev.task_id or ev.message_id}): recorded "
                          f"{_brief(ev)}, re-delivery gives {_brief(got) if got else 'nothing'}")
    while pending is not None:
        deliver_next()
    if progress is not None:
        progress(total, total)
    if check and difference is None and regenerated:
        ev = regenerated[0]
        difference = f"re-delivery gives an event the log does not hold: {_brief(ev)} of {ev.task_id or ev.message_id}"
    return fresh, difference


def _brief(ev: dict) -> str:
    data = ev.get("data") or {}
    keys = ("from", "to", "fault", "effect_key", "decision")
    shown = ", ".join(f"{k}={data[k]}" for k in keys if k in data)
    return f"{ev['type']}" + (f" ({shown})" if shown else "")


def verify_run(store: Store, progress=None) -> dict:
    """Re-deliver the run and compare: ``{"ok", "difference", "recorded_digest", "redelivered_digest"}``."""
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
    if difference is None and ours != theirs:
        difference = "the state tables differ from what the event log and the messages give (state edited by hand)"
    return {"ok": difference is None, "difference": difference, "recorded_digest": ours, "redelivered_digest": theirs}
