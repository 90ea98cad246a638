"""A simulator run seen as a conversation: export it as a ``conversation-trace-v2`` trace.

Every delivery in the message log becomes one trace message, in delivery order, so what the
transport did shows up as protocol errors when the trace is validated: a redelivery is a
duplicate message id (E_DUPLICATE_MESSAGE), a reorder, delay or drop under a runtime without a session
(naive; safe keeps each sender in sequence: sim.session) is a gap in the sender's sequence
(E_SEQUENCE_GAP), and a crashed worker's late commit comes from a body generation
that has been replaced (E_STALE_GENERATION). The per-sender sequence and the body generation
are what the transport recorded when each message was sent (``messages.sender_seq`` and
``sender_generation``); nothing is invented. A run without them (hand-delivered messages)
gets sequence numbers in delivery order and generation 1.

The trace carries its reducer outputs (``stateDigestAfter`` per accepted message and the final
``stateDigest``, see :mod:`sim.protocol.replay`). A task that waits for several others (the
fan-out's draft) becomes an ALL gather over their results. The manager's fence (sent when every
task has settled) becomes the terminal, with the workers as its required acknowledgements; a
message the transport delivers after it is E_POST_TERMINAL_MESSAGE. A delivery the runtime itself
refused under one of those rules (a safe runtime keeps them at intake: ``sim.planner.conversation_rule``)
never entered the conversation and is left out.

A run of millions of deliveries is exported in flat memory (:class:`TraceExport`): two passes over the
log, the validator judging each message as it is written, and what must be remembered of every message
kept in temp tables on disk past :data:`SPILL_AT` deliveries.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Iterator

from . import events as ev_
from . import digest as _digest
from .errors import InputError
from .planner import AUDIENCE_OF, CONVERSATION_CODES, RESTART_FAULTS, audiences_of
from .store import Store

if TYPE_CHECKING:
    from .protocol.trace import Finding

__all__ = ["export_trace", "TraceExport", "RowSource", "findings", "taken_in_epoch", "epochs_of", "epoch_count", "KIND_OF", "AUDIENCE_OF"]

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


def _refused_by_rule(r: dict) -> bool:
    """A delivery the runtime refused under one of the conversation's own rules (sim.planner
    ``CONVERSATION_CODES``) never entered the conversation: the export leaves it out."""
    return r.get("delivery_decision") == "rejected" and r.get("delivery_code") in CONVERSATION_CODES


class _Admission:
    """Which deliveries entered the conversation, a row at a time in delivery order. Left out, because
    the runtime kept them from reaching a reducer (nothing the run did is hidden: the message log keeps
    every delivery):

    * a refusal under one of the conversation's own rules (:func:`_refused_by_rule`);
    * a message id the conversation already took, delivered again and changing nothing (recorded
      duplicate or refused): the network's copy of an envelope, or the same message encoded again (under
      another digest scheme, say), deduplicated by the runtime's intake where the seed puts it in an outer
      transport. One the runtime took again (a naive runtime re-executes it) stays in, and is
      E_DUPLICATE_MESSAGE there;
    * a refusal of a message from a body of its sender that the run had replaced by then (a crash or a
      restart after the message the fault names, or a newer generation already heard from): the lease
      refused a crashed body's late commit before the generation rule needed to, and both say it never
      spoke for the worker. A replaced body's message the runtime took stays in (E_STALE_GENERATION).

    Each body's messages are presented numbered as the conversation took them (:meth:`seq`): a message
    left out that had used a fresh number of its body (a result refused after the fence) is a number the
    conversation never took, so the numbers after it are presented one lower. A message left out under a
    number already used (a rewound or overshared copy, a network duplicate) moves nothing."""

    __slots__ = ("crash_at", "replaced", "newest", "ids", "taken", "skipped")

    def __init__(self, crash_points, ids):
        self.crash_at: dict[str, str] = dict(crash_points)  # message id -> the worker replaced after it
        self.replaced: set[tuple[str, int]] = set()
        self.newest: dict[str, int] = {}
        self.ids = ids  # the message ids the conversation took (a set, or a table on disk for a big run)
        self.taken: dict[tuple[str, int], int] = {}  # body -> the highest number it used so far
        self.skipped: dict[tuple[str, int], list[int]] = {}  # body -> fresh numbers left out, ascending

    def admits(self, r: dict) -> bool:
        decision = r.get("delivery_decision", "accepted")
        sender, gen = r["sender"], r["sender_generation"] or 1
        refused = decision == "rejected"
        ok = not (_refused_by_rule(r)
                  or (decision in ("duplicate", "rejected") and r["message_id"] in self.ids)
                  or (refused and ((sender, gen) in self.replaced or self.newest.get(sender, gen) > gen)))
        if ok:
            self.ids.add(r["message_id"])
        if gen > self.newest.get(sender, 0):
            self.newest[sender] = gen
        worker = self.crash_at.get(r["message_id"])
        if worker == sender:
            self.replaced.add((sender, gen))
        seq = r["sender_seq"]
        if seq is not None:
            body = (sender, gen)
            top = self.taken.get(body, 0)
            if not ok and seq > top:
                self.skipped.setdefault(body, []).append(seq)
            elif ok and seq in self.skipped.get(body, ()):
                self.skipped[body].remove(seq)  # a number left out first, then taken by another copy
            if seq > top:
                self.taken[body] = seq
        return ok

    def seq(self, r: dict, seq: int) -> int:
        """The number ``r`` (admitted) is presented under: its own, less the fresh numbers of its body
        left out below it."""
        skipped = self.skipped.get((r["sender"], r["sender_generation"] or 1))
        return seq - sum(1 for s in skipped if s < r["sender_seq"]) if skipped else seq


def _contributes(r: dict) -> bool:
    """Whether a result of a gathered task is that member's contribution: the runtime took it (a retry the
    runtime recorded as late or duplicate added nothing) and it is an answer, succeeded or failed (a
    ``retry`` status asks for another attempt, whose answer is the contribution)."""
    return r.get("delivery_decision", "accepted") == "accepted" \
        and (r["payload"] or {}).get("status") in ("succeeded", "failed")


def _later(t: str, seconds: int) -> str:
    dt = datetime.strptime(t, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc) + timedelta(seconds=seconds)
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


#: A run with more deliveries than this is exported with what it must remember of every message
#: (ids seen and accepted, each task's last request, where ids first appear) in temp tables on disk.
SPILL_AT = 20_000


def _specs(store: Store) -> list[tuple[str, frozenset, dict, int, dict | None]]:
    """The gathers a run's scenario declares: each task that waits for several others (the fan-out's
    draft) gathers their results (an ALL gather); and each ``[[gather]]`` the runtime reduced (a
    ``gather_reduced`` event: its rule, and the contributions it took). (gather id, the tasks it waits
    for, task -> worker, gather_ticks, the event's data or None)."""
    name = store.get_meta("scenario")
    if not name:
        return []
    try:
        from .scenario import load_scenario

        sc = load_scenario(name)
    except InputError:
        return []
    worker_of = {t.id: t.worker for t in sc.tasks}
    out = [(f"g-{t.id}", frozenset(t.after), worker_of, sc.settings.gather_ticks, None)
           for t in sc.tasks if len(t.after) >= 2]
    if sc.gathers:
        declared = {g.id: g for g in sc.gathers}
        for e in store.iter_events(etype=ev_.GatherReduced.TYPE):
            data = e.data
            g = declared.get(data.get("gather"))
            if g is not None:  # (its deadline: rounds after it opened, as the scenario declares it)
                out.append((data["gather"], frozenset(g.over), worker_of, g.deadline, data))
    return out


def _recorded_result(decl: dict, data: dict) -> dict:
    """What the runtime's reduction (a ``gather_reduced`` event) says, in a trace gather's ``result``
    form: its status, value, dissent and pick as recorded; who contributed and who is missing read
    against the declared membership. A trace validator reduces the contributions again and says where
    the two differ (E_GATHER_RESULT_MISMATCH: dissent dropped, a pick made by the senders' clocks)."""
    senders = {c.get("sender") for c in data.get("contributions") or []}
    out = {"status": data.get("status"), "value": data.get("value"),
           "contributors": [m for m in decl["membership"] if m in senders],
           "missing": [m for m in decl["membership"] if m not in senders],
           "dissent": [dict(d) for d in data.get("dissent") or []],
           "inputs": [c.get("id") for c in data.get("contributions") or []]}
    if data.get("selected") is not None:
        out["selected"] = data["selected"]
    return out


class _Epochs:
    """The protocol epoch of each delivery, a row at a time. A fence closes the conversation; a
    reviewer's accepted decision after it (a release that re-runs a task, or a reconciliation) reopens
    it in the next epoch, with a fresh participant snapshot. An acknowledgement of an earlier fence
    stays in that fence's epoch, whenever it arrives; anything else after a fence that nobody reopened
    stays in the closed epoch (and is E_POST_TERMINAL_MESSAGE there)."""

    __slots__ = ("epoch", "fenced", "fence_epoch")

    def __init__(self):
        self.epoch, self.fenced = 1, False
        self.fence_epoch: dict[str, int] = {}

    def of(self, r: dict) -> int:
        e = self.epoch
        if r["type"] == "fence" and r.get("delivery_decision", "accepted") == "accepted":
            self.fence_epoch.setdefault(r["message_id"], self.epoch)
            self.fenced = True
        elif r["type"] == "ack" and r["payload"].get("of") in self.fence_epoch:
            e = self.fence_epoch[r["payload"]["of"]]
        elif self.fenced and r["type"] == "review_decision" and r.get("delivery_decision") == "accepted":
            self.epoch, self.fenced = self.epoch + 1, False
            e = self.epoch
        return e


def epochs_of(rows) -> list[int]:
    """The protocol epoch of each delivery (see :class:`_Epochs`)."""
    walk = _Epochs()
    return [walk.of(r) for r in rows]


def epoch_count(store: Store) -> int:
    """How many epochs the run's conversation has had (1 unless it was reopened after a fence)."""
    walk = _Epochs()
    return max((walk.of(r) for r in store.iter_deliveries_with_messages()), default=1)


class _Epoch:
    """What the first pass learns of one epoch's messages, in memory that does not grow with them
    (``first_at`` aside, which spills to disk for a big run)."""

    def __init__(self, n_specs: int, first_at):
        self.n = 0
        self.trace_id: str | None = None
        self.first: tuple[str, str] | None = None  # (id, at) of its first message
        self.opened_tick = 0  # the tick its first message was delivered (a reopened epoch's opening)
        self.last_at = ""
        self.generation: dict[str, int] = {}
        self.seq_max: Counter = Counter()
        self.gens: dict[str, list[int]] = {}  # each sender's body generations, in order of first appearance
        self.replaced: dict[tuple, str | None] = {}  # (sender, generation) -> id of the message before its first
        self.prev: str | None = None
        self.fences: list[tuple[int, str]] = []
        self.fence: tuple[str, dict] | None = None  # the first fence: (id, payload)
        self.crashed: set[str] = set()  # crash points among its messages
        self.openers: list = [None] * n_specs  # (id, at) of each gather's first request
        self.results = [False] * n_specs  # whether any result of its inputs was delivered
        self.workers: list[set] = [set() for _ in range(n_specs)]  # who worked on its inputs
        self.first_at = first_at  # id -> index of its first message

    def take(self, r: dict, crash_ids: set, by_task: dict, specs: list) -> None:
        i = self.n
        self.n += 1
        mid, sender, at = r["message_id"], r["sender"], r["at"]
        if self.trace_id is None or r["trace_id"] < self.trace_id:
            self.trace_id = r["trace_id"]
        if self.first is None:
            self.first = (mid, at)
            self.opened_tick = r["delivery_tick"]
        if at > self.last_at:
            self.last_at = at
        fence = r["type"] == "fence"
        gen = self.generation
        for p in (sender, r["recipient"], *(r["payload"]["to"] if fence else ())):
            gen.setdefault(p, 1)
        g = r["sender_generation"] or 1
        if g > gen[sender]:
            gen[sender] = g
        if r["sender_seq"] is not None and r["sender_seq"] > self.seq_max[sender]:
            self.seq_max[sender] = r["sender_seq"]
        if (sender, g) not in self.replaced:
            self.gens.setdefault(sender, []).append(g)
            self.replaced[(sender, g)] = self.prev
        self.first_at.setdefault(mid, i)
        if fence:
            self.fences.append((i, mid))
            if self.fence is None:
                self.fence = (mid, r["payload"])
        if mid in crash_ids:
            self.crashed.add(mid)
        for k in by_task.get(r["task_id"], ()):
            if r["type"] == "task_request" and self.openers[k] is None:
                self.openers[k] = (mid, at)
            elif r["type"] == "task_result":
                self.results[k] = True
            self.workers[k].add(specs[k][2][r["task_id"]])
        self.prev = mid


class TraceExport:
    """A run's conversation as a conversation-trace-v2 trace, streamed: one pass over the message log
    learns what the header needs, a second writes each message, judged by the validator as it goes
    (its reducer outputs, ``stateDigestAfter``, are written beside it). Memory stays flat in the run's
    size: what must be remembered of every message spills to temp tables past :data:`SPILL_AT`.

    Every delivery becomes one trace message, in delivery order, so what the transport did shows up as
    protocol errors: a redelivery is a duplicate id, a reorder or a drop a gap in the sender's sequence,
    a crashed worker's late commit a message from a replaced body generation."""

    def __init__(self, store: Store, epoch: int | None = None, progress=None):
        """``progress(what, done, total)``, if given, hears how far each pass over the deliveries is."""
        self.store = store
        self._total = store.count_of("deliveries")
        self._progress = progress
        spill = self._total > SPILL_AT
        self._table = store.scratch_map if spill else (lambda name: {})
        self._set = store.scratch_map if spill else (lambda name: set())
        crash_list: list[tuple[str, str]] = []
        for e in store.iter_events(etype=ev_.FaultInjected.TYPE):
            fault = e.event
            if fault.fault in RESTART_FAULTS:
                crash_list.append((fault.detail.get("worker"), e.message_id))
        crash_ids = {mid for _, mid in crash_list}
        specs = _specs(store)
        by_task: dict[str, list[int]] = {}
        for k, (_, after, _, _, _) in enumerate(specs):
            for t in after:
                by_task.setdefault(t, []).append(k)
        self._crash_points = [(mid, worker) for worker, mid in crash_list]
        walk = _Epochs()
        seen: dict[int, _Epoch] = {}
        admission = _Admission(self._crash_points, self._set("export_admitted_1"))
        for r in self._counted(store.iter_deliveries_with_messages(), "reading the message log"):
            if not admission.admits(r):
                continue
            if r["sender_seq"] is not None:
                r["sender_seq"] = admission.seq(r, r["sender_seq"])  # (each epoch's numbers, as presented)
            r["at"] = store.time_at(r["delivery_tick"])  # when the conversation took it (the receiver's clock)
            e = walk.of(r)
            st = seen.get(e)
            if st is None:
                st = seen[e] = _Epoch(len(specs), self._table(f"export_first_{e}"))
            st.take(r, crash_ids, by_task, specs)
        if not seen:
            raise InputError("the database holds no deliveries; there is no conversation to export", code="E_EMPTY")
        last_epoch = max(seen)
        if epoch is None:
            epoch = last_epoch
        if not 1 <= epoch <= last_epoch or epoch not in seen:
            raise InputError(f"the conversation has epoch{'s 1 to' if last_epoch > 1 else ''} {last_epoch}; "
                             f"there is no epoch {epoch}", code="E_NO_SUCH_EPOCH")
        self.epoch, self.epochs = epoch, last_epoch
        self.epoch_numbers = tuple(sorted(seen))  # (an epoch whose every message was left out has none)
        st = self._st = seen[epoch]
        # per sender: the sequence numbers it used in earlier epochs (a new epoch counts from 1 again)
        self._base: Counter = Counter()
        for e, other in seen.items():
            if e < epoch:
                for sender, n in other.seq_max.items():
                    self._base[sender] = max(self._base[sender], n)
        bounds = store.bounds() if hasattr(store, "bounds") else None
        self._bounds = bounds
        trace_id = bounds["trace"] if bounds and bounds.get("trace") else st.trace_id
        scenario = store.get_meta("scenario") or "hand-delivery"
        earlier = self._earlier(st, crash_list)
        self.header = {
            "schema": "conversation-trace-v2",
            "protocol": f"{scenario}/v1",
            "conversationId": trace_id,
            "epoch": epoch,
            "scope": f"trace:{trace_id}",
            # a run's declared bounds (sim.scenario.bounds: the deadline counted from the epoch's opening);
            # a run that declared none (hand-delivered messages) gets what it used, with an hour to spare
            "deadline": (store.time_at((st.opened_tick if epoch > 1 else 0) + bounds["deadline_ticks"]) if bounds
                         else _later(st.last_at, 3600)),
            "messageCeiling": bounds["message_ceiling"] if bounds else st.n,
            "participants": [
                {"ref": p, "principal": f"course:{p}", "generation": st.generation[p], "audiences": list(audiences_of(p)),
                 **({"earlierGenerations": earlier[p]} if earlier.get(p) else {})}
                for p in sorted(st.generation)
            ],
        }
        self.gathers, self._gather_of = self._declare(st, specs)
        self.terminal = None
        if st.fence is not None:
            fid, payload = st.fence
            self.terminal = {"state": payload["terminal"], "fence": fid, "requiredAcks": list(payload["to"]),
                             "truthEffect": "NONE", "authorityEffect": "NONE"}
        from .protocol.trace import Scan, StreamJudge

        want = {e["replacedAfter"] for es in earlier.values() for e in es} | {g["opener"] for g in self.gathers}
        if self.terminal is not None:
            want.add(self.terminal["fence"])
        first_at = {x: st.first_at.get(x) for x in want if x is not None}
        scan = Scan(st.n, list(st.fences), {x: i for x, i in first_at.items() if i is not None},
                    {x: "FENCE" for _, x in st.fences})
        # (a gather the runtime reduced is judged with its recorded result, as the written trace carries it)
        judged = dict(self.header, messages=[],
                      gathers=[dict(g, result=self._recorded[g["id"]]) if g["id"] in self._recorded else g
                               for g in self.gathers],
                      **({"terminal": self.terminal} if self.terminal else {}))
        # each payloadDigest is computed from the payload beside it (below): checking it again would
        # only repeat that work
        self._judge = StreamJudge(judged, scan, seen=self._set("export_seen"), accepted=self._set("export_accepted"),
                                  check_payload_digests=False)
        self.count = st.n
        self._tail: dict | None = None

    def _counted(self, rows, what: str):
        """``rows``, telling ``progress`` every 5,000."""
        if self._progress is None:
            yield from rows
            return
        done = 0
        for r in rows:
            yield r
            done += 1
            if done % 5000 == 0:
                self._progress(what, done, self._total)
        self._progress(what, done, self._total)

    @staticmethod
    def _earlier(st: _Epoch, crash_list: list) -> dict[str, list[dict]]:
        """Each replaced body of each sender, oldest first, with the point of the trace where it was
        replaced: right after the message it crashed after (the crash fault's event names it), or, with
        no such event, right before the first message of the body that followed it. Messages the old body
        sent before that point stay valid; any it sends after (a zombie's late result) are stale."""
        out: dict[str, list[dict]] = {}
        for sender, gens in st.gens.items():
            order = sorted(gens)
            points = [mid for w, mid in crash_list if w == sender and mid in st.crashed]
            for k, g in enumerate(order[:-1]):
                after = points[k] if k < len(points) else st.replaced[(sender, order[k + 1])]
                out.setdefault(sender, []).append({"generation": g, "replacedAfter": after})
        return out

    def _declare(self, st: _Epoch, specs: list) -> tuple[list[dict], dict[str, str]]:
        """ALL gathers of the workers who answered each gather's inputs, opened by the first of their
        requests; the contributions are the results the transport delivered, marked as such (task ->
        gather id). In a reopened epoch that re-runs some inputs, a fresh gather over the work re-done
        in it, opened by the decision that reopened the conversation.

        A gather the scenario declares (``[[gather]]``, reduced by the runtime) is declared with its rule,
        threshold or tie-break, opened by the first request of its member tasks; its contributions are the
        results the runtime took (``self._contribution``: message id -> (gather id, the contribution's
        payload: the value, success and vote it was reduced on)), and its ``result`` the runtime's own
        reduction (``self._recorded``). A trace message contributes to one gather only: a gather over
        contributions an earlier one already took (the same finders under another tie-break) is left out."""
        out, gather_of = [], {}
        self._contribution: dict[str, tuple[str, dict]] = {}
        self._recorded: dict[str, dict] = {}
        for k, (gid, after, worker_of, ticks, data) in enumerate(specs):
            members = sorted({worker_of[d] for d in after})
            opener = st.openers[k]
            if data is not None:
                contributions = data.get("contributions") or []
                if opener is None or any(c.get("id") in self._contribution for c in contributions):
                    continue
                decl = {"id": gid, "membership": members, "rule": data["rule"],
                        "deadline": _later(opener[1], ticks) if ticks else _later(st.last_at, 3600),
                        "opener": opener[0]}
                if data.get("threshold") is not None:
                    decl["threshold"] = data["threshold"]
                if data.get("tie_break") is not None:
                    decl["tieBreak"] = data["tie_break"]
                for c in contributions:
                    self._contribution[c["id"]] = (gid, dict(c.get("payload") or {}))
                self._recorded[gid] = _recorded_result(decl, data)
                out.append(decl)
                continue
            if opener is None and st.results[k] and self.epoch > 1:
                opener = st.first
                members = sorted(st.workers[k])
            if opener is None:
                continue
            for t in after:
                gather_of[t] = gid
            # the manager's own deadline: gather_ticks rounds (a second each) after the opener was sent
            deadline = _later(opener[1], ticks) if ticks else _later(st.last_at, 3600)
            out.append({"id": gid, "membership": members, "rule": "ALL", "deadline": deadline, "opener": opener[0]})
        return out, gather_of

    def _rows(self):
        """The chosen epoch's messages, in delivery order, as trace messages."""
        epoch, base, gather_of = self.epoch, self._base, self._gather_of
        fallback: Counter = Counter()
        last_request = self._table("export_requests")
        contribution, contributed = self._contribution, set()
        walk = _Epochs()
        admission = _Admission(self._crash_points, self._set("export_admitted_2"))
        for r in self._counted(self.store.iter_deliveries_with_messages(), "writing the trace"):
            if not admission.admits(r) or walk.of(r) != epoch:
                continue
            seq = r["sender_seq"]
            if seq is None:
                fallback[r["sender"]] += 1
                seq = fallback[r["sender"]]
            else:
                seq = admission.seq(r, seq)
                if epoch > 1:  # a new epoch: each sender counts from 1 again
                    seq = max(1, seq - base[r["sender"]])
            caused = []
            typ = r["type"]
            if typ == "ack" and isinstance(r["payload"].get("of"), str):
                caused = [r["payload"]["of"]]
            elif typ in ("task_started", "task_result"):
                req = last_request.get(r["task_id"])
                if req is not None:
                    caused = [req]
            if typ == "task_request" or (typ == "review_decision" and epoch > 1):
                last_request[r["task_id"]] = r["message_id"]  # in a reopened epoch, the release asks for the work again
            msg = {
                "id": r["message_id"],
                "sender": r["sender"],
                "generation": r["sender_generation"] or 1,
                "seq": seq,
                # the epoch the sender spoke in (a run that declares its bounds: what its envelope says, the
                # first when it says none; otherwise the epoch it was delivered in)
                "epoch": r.get("epoch") or (1 if self._bounds else epoch),
                "scope": f"trace:{r['trace_id']}",
                "audienceLabels": [AUDIENCE_OF[typ]],
                "recipients": list(r["payload"]["to"]) if typ == "fence" else [r["recipient"]],
                "kind": "HANDOFF" if typ == "task_request" and r["evidence_refs"] else KIND_OF[typ],
                "causedBy": caused,
                "at": self.store.time_at(r["delivery_tick"]),  # when the conversation took it
            }
            if r.get("expires_at"):
                msg["expiresAt"] = r["expires_at"]
            payload = r["payload"]
            took = contribution.get(r["message_id"]) if typ == "task_result" else None
            if took is not None and r.get("delivery_decision", "accepted") == "accepted" \
                    and r["message_id"] not in contributed:
                # the contribution a declared gather took: beside the result, what it was reduced on
                contributed.add(r["message_id"])
                payload = {**payload, **took[1]}
                msg["kind"] = "CONTRIBUTION"
                msg["gatherId"] = took[0]
            try:
                msg["payloadDigest"] = _digest.digest(payload, "jcs-v2")
                msg["payload"] = payload
            except _digest.DigestError:  # a payload jcs-v2 cannot carry: keep the run's own digest only
                msg["payloadDigest"] = r["payload_digest"]
            if typ == "task_result" and r["task_id"] in gather_of and _contributes(r):
                msg["kind"] = "CONTRIBUTION"
                msg["gatherId"] = gather_of[r["task_id"]]
            yield msg

    def messages(self) -> Iterator[dict]:
        """Each message, judged, with the state digest after it when it was accepted (the reducer
        outputs travel with the trace, so 'trace replay' can prove equivalence); then :meth:`tail`."""
        from .protocol.replay import GENESIS, final_state_digest, step

        current: list = [None]

        def tap():
            for m in self._rows():
                current[0] = m
                yield m

        head = GENESIS
        for ok in self._judge.judge(tap()):
            m = current[0]
            if ok:
                head = step(head, m)
                m["stateDigestAfter"] = head
            yield m
        report = self._judge.report
        # a gather the runtime reduced carries the runtime's result (the validator reduces it again); an
        # ALL gather of the export's own, the validator's reduction
        gathers = [dict(g, result=self._recorded.get(g["id"]) or report.gathers[g["id"]].to_json())
                   for g in self.gathers]
        self._tail = {"gathers": gathers, **({"terminal": self.terminal} if self.terminal else {}),
                      "stateDigest": final_state_digest(head, report)}

    def judge_all(self) -> None:
        """Judge every message, as :meth:`messages` does, without the state digests the written trace
        carries beside them (what the validator finds does not depend on them): the report is then known,
        the tail is not. What :func:`findings` needs, at about three quarters of the cost."""
        for _ok in self._judge.judge(self._rows()):
            pass

    @property
    def report(self):
        """The validator's :class:`~sim.protocol.trace.Report` of this epoch (known once :meth:`messages`
        has run to its end)."""
        if self._judge.report is None:
            raise RuntimeError("the report of an export is known once its messages have been read")
        return self._judge.report

    def tail(self) -> dict:
        """What follows the messages: the gathers with their results, the terminal, the final state
        digest (known once :meth:`messages` has run to its end)."""
        if self._tail is None:
            raise RuntimeError("the tail of an export is known once its messages have been read")
        return self._tail

    def as_dict(self) -> dict:
        trace = dict(self.header)
        trace["messages"] = list(self.messages())
        trace.update(self.tail())
        return trace

    def write(self, fh) -> None:
        """Write the trace to ``fh`` a message at a time: the same text as
        ``json.dumps(self.as_dict(), indent=2, ensure_ascii=False)`` and a newline."""
        from .protocol.fast import dumps_indented  # msgspec where it writes the stdlib's bytes

        def put(key: str, value, last: bool = False) -> None:
            fh.write(f"  {json.dumps(key)}: " + dumps_indented(value).replace("\n", "\n  ")
                     + ("\n" if last else ",\n"))

        fh.write("{\n")
        for k, v in self.header.items():
            put(k, v)
        fh.write('  "messages": [')
        sep = "\n    "
        for m in self.messages():
            fh.write(sep + dumps_indented(m).replace("\n", "\n    "))
            sep = ",\n    "
        fh.write("\n  ],\n")
        tail = list(self.tail().items())
        for j, (k, v) in enumerate(tail):
            put(k, v, last=j == len(tail) - 1)
        fh.write("}\n")


class RowSource:
    """What an export reads, from rows in hand rather than SQL: a run's views as :mod:`sim.invariants`
    loads them (deliveries, messages and events), for a store that has no SQL behind it (the in-memory
    model a search runs on). Only what :class:`TraceExport` asks for."""

    def __init__(self, store, deliveries: list, messages: list, events: list):
        self._store = store
        self._deliveries = sorted(deliveries, key=lambda d: d["delivery_id"])
        self._message = {m["msg_seq"]: m for m in messages}
        self._events = events

    def get_meta(self, key: str):
        return self._store.get_meta(key)

    def bounds(self):
        return self._store.bounds() if hasattr(self._store, "bounds") else None

    def time_at(self, tick: int) -> str:
        return self._store.time_at(tick)

    def count_of(self, table: str) -> int:
        return len(self._deliveries)

    def iter_events(self, *, etype: str | None = None):
        return (e for e in self._events if etype is None or e["type"] == etype)

    def iter_deliveries_with_messages(self, *, after: int = 0):
        for d in self._deliveries:
            if d["delivery_id"] <= after:
                continue
            m = self._message.get(d["msg_seq"])
            if m is not None:
                yield {"delivery_id": d["delivery_id"], "delivery_tick": d["tick"], "delivery_decision": d["decision"],
                       "delivery_code": d["code"], **m}


class _Taken:
    """A walk of the log that counts what the conversation took, epoch by epoch, carried on from the last
    delivery it read (the rows after it only: a delivery near the ceiling asks every time)."""

    def __init__(self):
        self.admission = _Admission([], set())
        self.epochs = _Epochs()
        self.counts: Counter = Counter()
        self.after = 0  # the last delivery read
        self.crashes = 0  # fault events of a restart read so far

    def advance(self, store) -> None:
        restarts = [(e.message_id, e.event.detail.get("worker")) for e in store.iter_events(etype=ev_.FaultInjected.TYPE)
                    if e.event.fault in RESTART_FAULTS]
        if len(restarts) != self.crashes:  # (a restart recorded since: where its body was replaced)
            self.admission.crash_at.update(restarts)
            self.crashes = len(restarts)
        for r in store.iter_deliveries_with_messages(after=self.after):
            self.after = r["delivery_id"]
            if self.admission.admits(r):
                self.counts[self.epochs.of(r)] += 1


def taken_in_epoch(store, epoch: int) -> int:
    """How many messages the conversation took in ``epoch`` so far (those its export would hold: every
    delivery but those :class:`_Admission` leaves out): what the runtime holds to the message ceiling. The
    walk is kept on the store's handle (``conversation_walk``) and carried on from where it stopped."""
    walk = getattr(store, "conversation_walk", None)
    if walk is None:
        walk = _Taken()
        try:
            store.conversation_walk = walk
        except AttributeError:
            pass
    source = store if hasattr(store, "iter_deliveries_with_messages") else \
        RowSource(store, store.deliveries(), store.messages(), store.events())  # (the model a search runs on)
    walk.advance(source)
    return walk.counts[epoch]


def findings(store) -> list[tuple[int, "Finding", str | None]]:
    """What the validator finds in each epoch of ``store``'s conversation, epoch by epoch: exactly the
    findings 'protolab trace validate' reports of what 'protolab trace export --epoch N' writes (each
    message judged as it is exported, in flat memory), each with its epoch and the gather it is about (a
    finding at ``/gathers/N``; None otherwise). ``store``: a Store, or a :class:`RowSource`. A run with no
    delivery has no conversation, and nothing to find."""
    if store.count_of("deliveries") == 0:
        return []
    out = []
    last = TraceExport(store)
    for epoch in last.epoch_numbers:
        export = last if epoch == last.epoch else TraceExport(store, epoch)
        export.judge_all()
        for f in export.report.errors:
            gather = None
            if f.pointer.startswith("/gathers/"):
                j = f.pointer.split("/")[2]
                gather = export.gathers[int(j)]["id"] if j.isdigit() and int(j) < len(export.gathers) else None
            out.append((epoch, f, gather))
    return out


def export_trace(store: Store, epoch: int | None = None) -> dict:
    """The run in ``store`` as a conversation-trace-v2 trace (a JSON-ready dict): one epoch of it
    (``epoch``; default the last one). For a big run, :class:`TraceExport` writes it a message at a time."""
    return TraceExport(store, epoch).as_dict()
