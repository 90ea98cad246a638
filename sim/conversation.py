"""A simulator run seen as a conversation: export it as a ``conversation-trace-v2`` trace.

Every delivery in the message log becomes one trace message, in delivery order, so what the
transport did shows up as protocol errors when the trace is validated: a redelivery is a
duplicate message id (E_DUPLICATE_MESSAGE), a reorder or a drop is a gap in the sender's
sequence (E_SEQUENCE_GAP), and a crashed worker's late commit comes from a body generation
that has been replaced (E_STALE_GENERATION). The per-sender sequence and the body generation
are what the transport recorded when each message was sent (``messages.sender_seq`` and
``sender_generation``); nothing is invented. A run without them (hand-delivered messages)
gets sequence numbers in delivery order and generation 1.

The trace carries its reducer outputs (``stateDigestAfter`` per accepted message and the final
``stateDigest``, see :mod:`sim.protocol.replay`). A task that waits for several others (the
fan-out's draft) becomes an ALL gather over their results. The manager's fence (sent when every
task has settled) becomes the terminal, with the workers as its required acknowledgements; a
message the transport delivers after it is E_POST_TERMINAL_MESSAGE.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta, timezone

from . import digest as _digest
from .errors import InputError
from .store import Store

__all__ = ["export_trace", "epochs_of", "epoch_count", "KIND_OF", "AUDIENCE_OF"]

#: Message type -> conversation kind.
KIND_OF = {
    "task_request": "REQUEST",
    "task_started": "RESPONSE",
    "task_result": "RESPONSE",
    "ack": "ACK",
    "cancel": "REQUEST",
    "review_decision": "CRITIQUE",
    "fence": "FENCE",
}
#: Message type -> the audience label it is addressed under.
AUDIENCE_OF = {
    "task_request": "control",
    "cancel": "control",
    "review_decision": "control",
    "task_started": "results",
    "task_result": "results",
    "ack": "receipts",
    "fence": "control",
}
LABELS = ["control", "receipts", "results"]


def _later(t: str, seconds: int) -> str:
    dt = datetime.strptime(t, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc) + timedelta(seconds=seconds)
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def _gathers(store: Store, messages: list[dict], rows: list[dict], reopened: bool = False) -> list[dict]:
    """A task that waits for several others (the fan-out's draft) gathers their results: ALL of
    the workers who answered them, opened by the first of their requests. The contributions are
    the results the transport delivered, marked as such; nothing is added."""
    name = store.get_meta("scenario")
    if not name:
        return []
    try:
        from .scenario import load_scenario

        sc = load_scenario(name)
    except InputError:
        return []
    out = []
    worker_of = {t.id: t.worker for t in sc.tasks}
    for spec in sc.tasks:
        if len(spec.after) < 2:
            continue
        gid = f"g-{spec.id}"
        members = sorted({worker_of[d] for d in spec.after})
        opener = next((m["id"] for m, r in zip(messages, rows)
                       if r["task_id"] in spec.after and r["type"] == "task_request"), None)
        results = [m for m, r in zip(messages, rows) if r["task_id"] in spec.after and r["type"] == "task_result"]
        if opener is None and results and reopened:
            # a reopened epoch re-runs some inputs: a fresh gather over the work re-done in it,
            # opened by the decision that reopened the conversation
            opener = messages[0]["id"]
            members = sorted({worker_of[r["task_id"]] for r in rows if r["task_id"] in spec.after})
        if opener is None:
            continue
        for m in results:
            m["kind"] = "CONTRIBUTION"
            m["gatherId"] = gid
        if sc.settings.gather_ticks:
            # the manager's own deadline: gather_ticks rounds (a second each) after the opener was sent
            at = next(m["at"] for m in messages if m["id"] == opener)
            deadline = _later(at, sc.settings.gather_ticks)
        else:
            deadline = _later(max(m["at"] for m in messages), 3600)
        out.append({"id": gid, "membership": members, "rule": "ALL", "deadline": deadline, "opener": opener})
    return out


def _earlier_generations(store: Store, messages: list[dict]) -> dict[str, list[dict]]:
    """Each replaced body of each sender, oldest first, with the point of the trace where it was
    replaced: right after the message it crashed after (the crash fault's event names it), or, with
    no such event, right before the first message of the body that followed it. Messages the old body
    sent before that point stay valid; any it sends after (a zombie's late result) are stale."""
    ids = {m["id"] for m in messages}
    gens: dict[str, list[int]] = {}
    first_of: dict[tuple, int] = {}
    for i, m in enumerate(messages):
        gens.setdefault(m["sender"], [])
        if m["generation"] not in gens[m["sender"]]:
            gens[m["sender"]].append(m["generation"])
        first_of.setdefault((m["sender"], m["generation"]), i)
    crashes: dict[str, list[str]] = {}
    for e in store.events_of_type("fault_injected"):
        if e["data"].get("fault") == "crash" and e["message_id"] in ids:
            crashes.setdefault(e["data"].get("worker"), []).append(e["message_id"])
    out: dict[str, list[dict]] = {}
    for sender, seen in gens.items():
        order = sorted(seen)
        for k, g in enumerate(order[:-1]):
            points = crashes.get(sender, [])
            if k < len(points):
                after = points[k]
            else:
                at = first_of[(sender, order[k + 1])]
                after = messages[at - 1]["id"] if at > 0 else None
            out.setdefault(sender, []).append({"generation": g, "replacedAfter": after})
    return out


def epochs_of(rows: list[dict]) -> list[int]:
    """The protocol epoch of each delivery. A fence closes the conversation; a reviewer's accepted
    decision after it (a release that re-runs a task, or a reconciliation) reopens it in the next
    epoch, with a fresh participant snapshot. An acknowledgement of an earlier fence stays in that
    fence's epoch, whenever it arrives; anything else after a fence that nobody reopened stays in
    the closed epoch (and is E_POST_TERMINAL_MESSAGE there)."""
    epoch, fenced = 1, False
    fence_epoch: dict[str, int] = {}
    out = []
    for r in rows:
        e = epoch
        if r["type"] == "fence" and r.get("delivery_decision", "accepted") == "accepted":
            fence_epoch.setdefault(r["message_id"], epoch)
            fenced = True
        elif r["type"] == "ack" and r["payload"].get("of") in fence_epoch:
            e = fence_epoch[r["payload"]["of"]]
        elif fenced and r["type"] == "review_decision" and r.get("delivery_decision") == "accepted":
            epoch, fenced = epoch + 1, False
            e = epoch
        out.append(e)
    return out


def epoch_count(store: Store) -> int:
    """How many epochs the run's conversation has had (1 unless it was reopened after a fence)."""
    rows = list(store.iter_deliveries_with_messages())
    return max(epochs_of(rows)) if rows else 1


def export_trace(store: Store, epoch: int | None = None) -> dict:
    """The run in ``store`` as a conversation-trace-v2 trace (a JSON-ready dict): one epoch of it
    (``epoch``; default the last one, see :func:`epochs_of`)."""
    rows = list(store.iter_deliveries_with_messages())
    if not rows:
        raise InputError("the database holds no deliveries; there is no conversation to export", code="E_EMPTY")
    of = epochs_of(rows)
    last_epoch = max(of)
    if epoch is None:
        epoch = last_epoch
    if not 1 <= epoch <= last_epoch:
        raise InputError(f"the conversation has epoch{'s 1 to' if last_epoch > 1 else ''} {last_epoch}; "
                         f"there is no epoch {epoch}", code="E_NO_SUCH_EPOCH")
    base: Counter = Counter()  # per sender: the sequence numbers it used in earlier epochs
    for r, e in zip(rows, of):
        if e < epoch and r["sender_seq"] is not None:
            base[r["sender"]] = max(base[r["sender"]], r["sender_seq"])
    rows = [r for r, e in zip(rows, of) if e == epoch]
    traces = sorted({r["trace_id"] for r in rows})
    trace_id = traces[0]
    scenario = store.get_meta("scenario") or "hand-delivery"
    generation: dict[str, int] = {}
    for r in rows:
        for p in (r["sender"], r["recipient"], *(r["payload"]["to"] if r["type"] == "fence" else ())):
            generation.setdefault(p, 1)
        generation[r["sender"]] = max(generation[r["sender"]], r["sender_generation"] or 1)
    fallback: Counter = Counter()
    messages = []
    seen_at = {}
    last_request: dict[str, str] = {}
    for r in rows:
        seq = r["sender_seq"]
        if seq is None:
            fallback[r["sender"]] += 1
            seq = fallback[r["sender"]]
        elif epoch > 1:  # a new epoch: each sender counts from 1 again
            seq = max(1, seq - base[r["sender"]])
        caused = []
        if r["type"] == "ack" and isinstance(r["payload"].get("of"), str):
            caused = [r["payload"]["of"]]
        elif r["type"] in ("task_started", "task_result") and r["task_id"] in last_request:
            caused = [last_request[r["task_id"]]]
        if r["type"] == "task_request" or (r["type"] == "review_decision" and epoch > 1):
            last_request[r["task_id"]] = r["message_id"]  # in a reopened epoch, the release asks for the work again
        msg = {
            "id": r["message_id"],
            "sender": r["sender"],
            "generation": r["sender_generation"] or 1,
            "seq": seq,
            "epoch": epoch,
            "scope": f"trace:{trace_id}",
            "audienceLabels": [AUDIENCE_OF[r["type"]]],
            "recipients": list(r["payload"]["to"]) if r["type"] == "fence" else [r["recipient"]],
            "kind": "HANDOFF" if r["type"] == "task_request" and r["evidence_refs"] else KIND_OF[r["type"]],
            "causedBy": caused,
            "at": r["created_at"],
        }
        try:
            msg["payloadDigest"] = _digest.digest(r["payload"], "jcs-v2")
            msg["payload"] = r["payload"]
        except _digest.DigestError:  # a payload jcs-v2 cannot carry: keep the run's own digest only
            msg["payloadDigest"] = r["payload_digest"]
        messages.append(msg)
        seen_at[r["message_id"]] = r["created_at"]
    earlier = _earlier_generations(store, messages)
    last = max(m["at"] for m in messages)
    trace = {
        "schema": "conversation-trace-v2",
        "protocol": f"{scenario}/v1",
        "conversationId": trace_id,
        "epoch": epoch,
        "scope": f"trace:{trace_id}",
        "deadline": _later(last, 3600),
        "messageCeiling": len(messages),
        "participants": [
            {"ref": p, "principal": f"course:{p}", "generation": generation[p], "audiences": list(LABELS),
             **({"earlierGenerations": earlier[p]} if earlier.get(p) else {})}
            for p in sorted(generation)
        ],
        "messages": messages,
        "gathers": _gathers(store, messages, rows, reopened=epoch > 1),
    }
    fences = [(m, r) for m, r in zip(messages, rows) if r["type"] == "fence"]
    if fences:
        m, r = fences[0]
        trace["terminal"] = {
            "state": r["payload"]["terminal"], "fence": m["id"], "requiredAcks": list(r["payload"]["to"]),
            "truthEffect": "NONE", "authorityEffect": "NONE",
        }
    # The reducer outputs travel with the trace, so 'trace replay' can prove equivalence.
    from .protocol.replay import annotate

    return annotate(trace)
