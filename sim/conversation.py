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

__all__ = ["export_trace", "KIND_OF", "AUDIENCE_OF"]

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


def _gathers(store: Store, messages: list[dict], rows: list[dict]) -> list[dict]:
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
        opener = None
        for m, r in zip(messages, rows):
            if r["task_id"] in spec.after and r["type"] == "task_request" and opener is None:
                opener = m["id"]
            if r["task_id"] in spec.after and r["type"] == "task_result":
                m["kind"] = "CONTRIBUTION"
                m["gatherId"] = gid
        if opener is None:
            continue
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


def export_trace(store: Store) -> dict:
    """The run in ``store`` as a conversation-trace-v2 trace (a JSON-ready dict)."""
    rows = list(store.iter_deliveries_with_messages())
    if not rows:
        raise InputError("the database holds no deliveries; there is no conversation to export", code="E_EMPTY")
    traces = sorted({r["trace_id"] for r in rows})
    trace_id = traces[0]
    scenario = store.get_meta("scenario") or "hand-delivery"
    generation: dict[str, int] = {}
    for r in rows:
        for p in (r["sender"], r["recipient"]):
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
        caused = []
        if r["type"] == "ack" and isinstance(r["payload"].get("of"), str):
            caused = [r["payload"]["of"]]
        elif r["type"] in ("task_started", "task_result") and r["task_id"] in last_request:
            caused = [last_request[r["task_id"]]]
        if r["type"] == "task_request":
            last_request[r["task_id"]] = r["message_id"]
        msg = {
            "id": r["message_id"],
            "sender": r["sender"],
            "generation": r["sender_generation"] or 1,
            "seq": seq,
            "epoch": 1,
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
        "epoch": 1,
        "scope": f"trace:{trace_id}",
        "deadline": _later(last, 3600),
        "messageCeiling": len(messages),
        "participants": [
            {"ref": p, "principal": f"course:{p}", "generation": generation[p], "audiences": list(LABELS),
             **({"earlierGenerations": earlier[p]} if earlier.get(p) else {})}
            for p in sorted(generation)
        ],
        "messages": messages,
        "gathers": _gathers(store, messages, rows),
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
