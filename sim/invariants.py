"""Named invariants over a finished run, in the spirit of Jepsen's checkers.

The runtime does not second-guess the intake verdict (see ``docs/architecture.md``): a policy
that breaks the rules leaves its mark in the message log, the event log and the state. This
module reads a finished store through its public views only (no SQL lives here) and says, for
each named property, whether it held and, if not, which rows show the failure.

Each :class:`InvariantResult` carries *witnesses*: plain, JSON-ready dicts naming the task, the
message ids, the delivery ids, the event seqs and the states involved, so a student can go
straight to ``protolab events`` / ``protolab deliveries`` and find the problem.

How rows are joined (all through public views):

* a ``transition_applied`` event carries ``delivery_id``; the delivery carries ``msg_seq``; the
  message row with that ``msg_seq`` is exactly the envelope that was delivered (a message id
  may have two rows when it was reused with different content, so ids alone are not enough);
* a ``transitions`` row is the fold of one ``transition_applied`` event; within one task
  ``state_version`` rises by one per move, so ``(task_id, state_version)`` pairs the two;
* moves made outside a delivery (the lease monitor's ``expire_lease``) have no delivery.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

from . import digest as _digest
from . import events as ev_
from . import versions as _versions
from .errors import DigestError, EnvelopeError
from .conversation import RowSource, findings
from .gathers import declaration_of_event
from .machine import TERMINAL
from .privacy import Privacy, is_redacted
from .protocol import evaluate_gather

__all__ = ["InvariantResult", "Invariant", "INVARIANTS", "DESCRIPTIONS", "REGISTRY", "CONVERSATION_CODES", "STATE_INVARIANTS",
           "check",
           "invariant"]


@dataclass(frozen=True)
class InvariantResult:
    """The verdict on one named invariant; ``witnesses`` is empty exactly when ``ok``."""

    name: str
    ok: bool
    description: str
    witnesses: tuple[dict, ...]

    def to_dict(self) -> dict:
        return {"name": self.name, "ok": self.ok, "description": self.description, "witnesses": list(self.witnesses)}


@dataclass(frozen=True)
class Invariant:
    """One invariant: a name, the rule in words (what a student reads), and the check that returns
    its witnesses over a run (none: it holds)."""

    name: str
    description: str
    check: Callable[["_Run"], list[dict]]
    short: str = ""  # at most five letters: the invariant's column in the grader's grid
    #: reads across tasks in log order: its check over streams when a run is judged shard by shard
    across_tasks: Callable | None = None
    #: one of the conversation's rules, judged by the trace validator on the run's exported conversation
    #: (a search over delivery orders, which bypasses the safe runtime's session, judges state only)
    conversation: bool = False
    #: a naive run that breaks it, ``(scenario, fault)`` (a fault as ``--fault`` takes it, selector and all):
    #: the naive-policy matrix (tests/test_naive_matrix.py) runs it, and the safe run of it must keep it
    broken_by: tuple[str, str] | None = None
    #: instead of ``broken_by``, why no naive run can break it: a known gap the matrix holds open
    never_under_naive: str | None = None
    #: the rule in a few words, in parentheses after its name in the README's list (``python -m sim.docs``)
    gist: str = ""


#: The one registry: adding an invariant is one decorated function
#: (``@invariant(NAME, short=..., description=..., broken_by=(SCENARIO, FAULT))``).
REGISTRY: dict[str, Invariant] = {}


def invariant(name: str, *, short: str, description: str, broken_by: tuple[str, str] | None = None,
              never_under_naive: str | None = None, gist: str = "", across_tasks=None, conversation: bool = False):
    """Register an invariant: its NAME, a short label of at most five letters (a column of the
    grader's fault-by-invariant grid) and the rule in words. ``broken_by``: the ``(scenario, fault)`` of a
    naive run that breaks it (or ``never_under_naive``: why none can). ``gist``: the rule in a few words for
    the README's list. ``across_tasks``: for an invariant that
    reads across tasks in log order, how a sharded check judges it over streams of the whole run,
    ``across_tasks(store, lookups, intervals) -> witnesses`` (see :func:`check`)."""
    if not (1 <= len(short) <= 5) or any(i.short == short for i in REGISTRY.values()):
        raise ValueError(f"invariant {name}: short label {short!r} must be 1-5 characters and unique")
    if (broken_by is None) == (never_under_naive is None):
        raise ValueError(f"invariant {name}: give one of broken_by=(scenario, fault), a naive run that breaks it, "
                         "or never_under_naive=..., why no naive run can")
    if broken_by is not None and not (isinstance(broken_by, tuple) and len(broken_by) == 2
                                      and all(isinstance(x, str) and x for x in broken_by)):
        raise ValueError(f"invariant {name}: broken_by must be (scenario, fault), got {broken_by!r}")

    def register(fn):
        if name in REGISTRY:
            raise ValueError(f"invariant {name} is declared twice")
        REGISTRY[name] = Invariant(name, description, fn, short, across_tasks, conversation, broken_by,
                                   never_under_naive, gist)
        return fn
    return register

_TERMINAL = frozenset(s.value for s in TERMINAL)



# ---------------------------------------------------------------------------- the run, loaded once


class _Run:
    """Every view the checks need, read once and indexed: the whole run, or (``rows``, from
    ``store.shard_rows``) every row of some of its tasks, with what crosses tasks looked up in
    ``store`` one row at a time (see :func:`check`)."""

    def __init__(self, store, rows: dict | None = None):
        self._store = store
        self.whole = rows is None
        src = rows if rows is not None else {
            "events": store.events(), "deliveries": store.deliveries(), "messages": store.messages(),
            "transitions": store.transitions(), "effects": store.effects(), "artifacts": store.artifacts(),
        }
        self.events = src["events"]
        self.deliveries = src["deliveries"]
        self.messages = src["messages"]
        self.transitions = src["transitions"]
        self.effects = src["effects"]
        self.artifacts = src["artifacts"]
        self.rules = store.transition_rules()
        privacy = getattr(store, "privacy", None)
        self.privacy = privacy() if callable(privacy) else Privacy()

        self.delivery_by_id = {d["delivery_id"]: d for d in self.deliveries}
        self.message_by_seq = {m["msg_seq"]: m for m in self.messages}
        self.message_ids = {m["message_id"] for m in self.messages}
        self.artifact_refs = {a["ref"] for a in self.artifacts}
        self.transition_by_version = {(t["task_id"], t["state_version"]): t for t in self.transitions}
        # delivery_id -> task ids that a review_decided event of that delivery names
        self.reviewed_in: dict[int, set] = {}
        for e in self.events:
            if e["type"] == ev_.ReviewDecided.TYPE and e["delivery_id"] is not None:
                self.reviewed_in.setdefault(e["delivery_id"], set()).add(e["task_id"])
        # the applied moves, in event order, each joined to its transitions row, delivery and message
        self.moves = [self._move(e) for e in self.events if e["type"] == ev_.TransitionApplied.TYPE]
        self._conversation: dict | None = None  # the validator's findings, by invariant (read once, when asked)

    def message_of(self, delivery: dict | None) -> dict | None:
        return self.message_by_seq.get(delivery["msg_seq"]) if delivery else None

    # What crosses tasks: from the rows in hand for the whole run, from the store for a shard.

    def has_message(self, message_id: str) -> bool:
        return message_id in self.message_ids if self.whole else self._store.has_message_id(message_id)

    def has_artifact(self, ref: str) -> bool:
        return ref in self.artifact_refs if self.whole else self._store.artifact_task(ref)[0]

    @functools.cached_property
    def _refs_by_message(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for m in self.messages:
            out.setdefault(m["message_id"], []).extend(m["evidence_refs"])
        return out

    @functools.cached_property
    def _task_by_message(self) -> dict[str, str]:
        return {m["message_id"]: m["task_id"] for m in self.messages}

    @functools.cached_property
    def _task_by_artifact(self) -> dict[str, str]:
        return {a["ref"]: a["task_id"] for a in self.artifacts}

    def refs_of(self, message_id: str) -> list[str] | None:
        """The evidence_refs of every envelope stored under ``message_id`` (None: no such message)."""
        return self._refs_by_message.get(message_id) if self.whole else self._store.evidence_refs_of(message_id)

    def task_of_message(self, message_id: str) -> str | None:
        return self._task_by_message.get(message_id) if self.whole else self._store.task_of_message(message_id)

    def task_of_artifact(self, ref: str) -> str | None:
        return self._task_by_artifact.get(ref) if self.whole else self._store.artifact_task(ref)[1]

    def message_of_delivery(self, delivery_id: int) -> dict | None:
        if self.whole or delivery_id in self.delivery_by_id:
            return self.message_of(self.delivery_by_id.get(delivery_id))
        d = self._store.delivery(delivery_id)
        return self._store.message_at(d["msg_seq"]) if d is not None else None

    def point_before(self, delivery_id: int) -> int:
        """The newest event of any delivery numbered below ``delivery_id`` (0: none)."""
        if not self.whole:
            return self._store.last_event_before_delivery(delivery_id)
        return max((e["seq"] for e in self.events if e["delivery_id"] is not None and e["delivery_id"] < delivery_id),
                   default=0)

    def _move(self, e: dict) -> dict:
        d = e["data"]
        delivery = self.delivery_by_id.get(e["delivery_id"]) if e["delivery_id"] is not None else None
        row = self.transition_by_version.get((e["task_id"], d["from_version"] + 1))
        return {
            "event_seq": e["seq"],
            "task_id": e["task_id"],
            "from": d["from"],
            "to": d["to"],
            "from_version": d["from_version"],
            "role": d["role"],
            "executor": d["executor"],
            "delivery": delivery,
            "message": self.message_of(delivery),
            "transition_seq": row["seq"] if row else None,
        }


def _transition_witness(t: dict) -> dict:
    """The columns of a transitions row a student needs to find it."""
    return {
        "transition_seq": t["seq"],
        "task_id": t["task_id"],
        "old_state": t["old_state"],
        "new_state": t["new_state"],
        "role": t["role"],
        "executor": t["executor"],
        "state_version": t["state_version"],
        "machine_version": t["machine_version"],
        "message_id": t["message_id"],
        "tick": t["tick"],
    }


def _move_witness(m: dict) -> dict:
    dv, msg = m["delivery"], m["message"]
    return {
        "event_seq": m["event_seq"],
        "transition_seq": m["transition_seq"],
        "task_id": m["task_id"],
        "from": m["from"],
        "to": m["to"],
        "state_version": m["from_version"] + 1,
        "role": m["role"],
        "executor": m["executor"],
        "delivery_id": dv["delivery_id"] if dv else None,
        "decision": dv["decision"] if dv else None,
        "message_id": msg["message_id"] if msg else None,
        "message_type": msg["type"] if msg else None,
    }


def _message_brief(msg: dict, delivery: dict) -> dict:
    return {
        "message_id": msg["message_id"],
        "msg_seq": msg["msg_seq"],
        "delivery_id": delivery["delivery_id"],
        "decision": delivery["decision"],
        "payload_digest": msg["payload_digest"],
        "digest_scheme": msg["digest_scheme"],
    }


# ---------------------------------------------------------------------------- the checks


@invariant(
    "NO_STATE_REGRESSION",
    broken_by=("publish-report", "late-failure"),
    short="regr",
    description=(
        "Every transitions row whose old_state is terminal (" + ", ".join(sorted(_TERMINAL)) + ") has new_state "
        "needs_review: a finished task is never moved anywhere else, only frozen for review."
    ),
)
def _no_state_regression(run: _Run) -> list[dict]:
    out = []
    for t in run.transitions:
        if t["old_state"] in _TERMINAL and t["new_state"] != "needs_review":
            out.append(_transition_witness(t))
    return out


@invariant(
    "EFFECT_AT_MOST_ONCE",
    broken_by=("publish-report", "duplicate"),
    short="eff1",
    description=(
        "No (kind, target, task_id) appears in more than one effects row, whatever the effect_key says "
        "(a runtime that keys effects by delivery hides a second publication behind a new key)."
    ),
)
def _effect_at_most_once(run: _Run) -> list[dict]:
    committed_by = {
        e["data"]["effect_key"]: e for e in run.events if e["type"] == ev_.EffectCommitted.TYPE
    }
    groups: dict[tuple, list[dict]] = {}
    for eff in run.effects:
        groups.setdefault((eff["kind"], eff["target"], eff["task_id"]), []).append(eff)
    out = []
    for (kind, target, task_id), rows in groups.items():
        if len(rows) < 2:
            continue
        effects = []
        for r in rows:
            ev = committed_by.get(r["effect_key"])
            effects.append(
                {
                    "effect_key": r["effect_key"],
                    "message_id": r["message_id"],
                    "tick": r["tick"],
                    "result_digest": r["result_digest"],
                    "event_seq": ev["seq"] if ev else None,
                    "delivery_id": ev["delivery_id"] if ev else None,
                }
            )
        out.append(
            {
                "task_id": task_id,
                "kind": kind,
                "target": target,
                "times_committed": len(rows),
                "message_ids": sorted({r["message_id"] for r in rows}),
                "effects": effects,
            }
        )
    return out


def _same_payload(a: dict, b: dict) -> bool:
    """The intake's rule: compare digests under one scheme (re-digest both ways if the schemes differ)."""
    if a["digest_scheme"] == b["digest_scheme"]:
        return a["payload_digest"] == b["payload_digest"]
    try:
        ra, rb = is_redacted(a["payload"]), is_redacted(b["payload"])
        if ra and rb:
            # Both logged with [redacted] values (sim.privacy): what the log kept is all there is to compare.
            return _digest.digest(a["payload"], "json-sorted-v1") == _digest.digest(b["payload"], "json-sorted-v1")
        return (
            (rb or _digest.digest(a["payload"], b["digest_scheme"]) == b["payload_digest"])
            and (ra or _digest.digest(b["payload"], a["digest_scheme"]) == a["payload_digest"])
        )
    except DigestError:
        return False


@invariant(
    "CONFLICT_FROZEN",
    broken_by=("publish-report", "conflicting-digest"),
    short="froz",
    description=(
        "When a (task_id, idempotency_key) is delivered (any decision but rejected) with a payload that differs "
        "from every payload already delivered under it, the task is in needs_review right after that delivery "
        "and makes no move until a delivery that records review_decided for it."
    ),
)
def _conflict_frozen(run: _Run) -> list[dict]:
    # The last event seq of each delivery: "right after the delivery" is that point in the log.
    last_seq: dict[int, int] = {}
    for e in run.events:
        if e["delivery_id"] is not None:
            last_seq[e["delivery_id"]] = e["seq"]
    moves_by_task: dict[str, list[dict]] = {}
    for m in run.moves:
        moves_by_task.setdefault(m["task_id"], []).append(m)

    def point_of(delivery_id: int) -> int:
        # deliveries and their events are numbered in the same order
        if delivery_id in last_seq:
            return last_seq[delivery_id]
        return run.point_before(delivery_id)

    def state_at(task_id: str, seq: int) -> str | None:
        state = None
        for m in moves_by_task.get(task_id, ()):
            if m["event_seq"] > seq:
                break
            state = m["to"]
        return state

    seen: dict[tuple, list[tuple[dict, dict]]] = {}
    out = []
    for dv in run.deliveries:
        if dv["decision"] == "rejected":
            continue
        msg = run.message_of(dv)
        if msg is None:
            continue
        key = (msg["task_id"], msg["idempotency_key"])
        earlier = seen.setdefault(key, [])
        if any(_same_payload(prev, msg) for prev, _ in earlier):
            continue
        if not earlier:
            earlier.append((msg, dv))
            continue
        first_msg, first_dv = earlier[0]
        earlier.append((msg, dv))
        task_id = msg["task_id"]
        point = point_of(dv["delivery_id"])
        base = {
            "task_id": task_id,
            "idempotency_key": msg["idempotency_key"],
            "first": _message_brief(first_msg, first_dv),
            "second": _message_brief(msg, dv),
            "expected_state": "needs_review",
            "event_seq": point,
        }
        state = state_at(task_id, point)
        if state != "needs_review":
            out.append({**base, "problem": "not frozen when the second payload was delivered", "state_instead": state})
            continue
        for m in moves_by_task.get(task_id, ()):
            if m["event_seq"] <= point:
                continue
            dvm = m["delivery"]
            if dvm is not None and task_id in run.reviewed_in.get(dvm["delivery_id"], ()):
                break  # the reviewer's decision releases it
            out.append(
                {
                    **base,
                    "problem": "left needs_review before any review_decided",
                    "state_instead": m["to"],
                    "move": _move_witness(m),
                }
            )
            break
    return out


@invariant(
    "NO_LOST_UPDATE",
    broken_by=("publish-report", "reorder"),
    short="lost",
    description=(
        "Every move applied by a task_result delivery (the runtime's conflict freeze aside) was sent by the lease "
        "holder of that moment and carries the lease_version of that moment (replaying lease_granted and "
        "lease_expired in event order; an expired lease is no lease), and every move applied by a message whose "
        "payload carries expected_state_version left exactly that state_version."
    ),
)
def _no_lost_update(run: _Run) -> list[dict]:
    moves_by_seq = {m["event_seq"]: m for m in run.moves}
    lease: dict[str, dict] = {}  # task_id -> {"holder", "lease_version", "expired", "event_seq"}
    out = []
    for e in run.events:
        tid = e["task_id"]
        if e["type"] == ev_.LeaseGranted.TYPE:
            lease[tid] = {
                "holder": e["data"]["holder"], "lease_version": e["data"]["lease_version"],
                "expired": False, "event_seq": e["seq"],
            }
        elif e["type"] == ev_.LeaseExpired.TYPE:
            cur = lease.get(tid, {"holder": e["data"].get("holder"), "lease_version": e["data"].get("lease_version")})
            lease[tid] = {**cur, "expired": True, "event_seq": e["seq"]}
        elif e["type"] == ev_.TransitionApplied.TYPE:
            m = moves_by_seq[e["seq"]]
            dv, msg = m["delivery"], m["message"]
            if dv is None or msg is None or dv["decision"] == "conflict":
                continue  # the lease monitor's own moves, and the runtime's conflict freeze
            current = lease.get(tid)
            if msg["type"] == "task_result":
                carried = msg["payload"].get("lease_version")
                problem = None
                if current is None:
                    problem = "no lease was ever granted"
                elif current["expired"]:
                    problem = "the lease had expired"
                elif msg["sender"] != current["holder"]:
                    problem = "sender is not the lease holder"
                elif carried != current["lease_version"]:
                    problem = "stale lease_version"
                if problem:
                    out.append(
                        {
                            "problem": problem,
                            "task_id": tid,
                            "message_id": msg["message_id"],
                            "sender": msg["sender"],
                            "carried_lease_version": carried,
                            "current_lease": dict(current) if current else None,
                            "transition": _move_witness(m),
                        }
                    )
                    continue
            expected = msg["payload"].get("expected_state_version")
            if expected is not None and expected != m["from_version"]:
                out.append(
                    {
                        "problem": "stale expected_state_version",
                        "task_id": tid,
                        "message_id": msg["message_id"],
                        "sender": msg["sender"],
                        "expected_state_version": expected,
                        "actual_state_version": m["from_version"],
                        "transition": _move_witness(m),
                    }
                )
    return out


@invariant(
    "EVIDENCE_RESOLVES",
    broken_by=("publish-report", "phantom-citation"),
    short="evid",
    description=(
        "Every evidence_ref of every message delivered with decision accepted names, at the end of the run, "
        "a stored artifact (sha256:...) or a stored message id other than the message itself."
    ),
)
def _evidence_resolves(run: _Run) -> list[dict]:
    out = []
    for dv in run.deliveries:
        if dv["decision"] != "accepted":
            continue
        msg = run.message_of(dv)
        if msg is None:
            continue
        for ref in msg["evidence_refs"]:
            if ref.startswith("sha256:"):
                ok, kind = run.has_artifact(ref), "artifact"
            else:
                ok, kind = run.has_message(ref) and ref != msg["message_id"], "message"
            if not ok:
                out.append(
                    {
                        "message_id": msg["message_id"],
                        "delivery_id": dv["delivery_id"],
                        "task_id": msg["task_id"],
                        "type": msg["type"],
                        "ref": ref,
                        "ref_kind": kind,
                        "problem": "cites itself" if ref == msg["message_id"] else f"no stored {kind} has this ref",
                    }
                )
    return out


@invariant(
    "ACK_IS_NOT_COMPLETION",
    broken_by=("publish-report", "receipt"),
    short="ack",
    description=(
        "No ack delivery applies a move, except a conflict decision freezing its task in needs_review "
        "(a receipt that contradicts an earlier receipt under the same key)."
    ),
)
def _ack_is_not_completion(run: _Run) -> list[dict]:
    out = []
    for m in run.moves:
        dv, msg = m["delivery"], m["message"]
        if dv is None or dv["type"] != "ack":
            continue
        if dv["decision"] == "conflict" and m["to"] == "needs_review":
            continue
        out.append(
            {
                "ack_message_id": dv["message_id"],
                "delivery_id": dv["delivery_id"],
                "task_id": m["task_id"],
                "of": (msg or {}).get("payload", {}).get("of"),
                "sender": (msg or {}).get("sender"),
                "decision": dv["decision"],
                "move": _move_witness(m),
            }
        )
    return out


@invariant(
    "TRANSITIONS_ALLOWED",
    broken_by=("publish-report", "late-failure"),
    short="move",
    description=(
        "Every transitions row (old_state -> new_state by role) is a transition_rules row of that row's "
        "machine_version whose comma-separated roles include the role."
    ),
)
def _transitions_allowed(run: _Run) -> list[dict]:
    rules = {
        (r["machine_version"], r["from_state"], r["to_state"]): tuple(r["roles"].split(",")) for r in run.rules
    }
    out = []
    for t in run.transitions:
        roles = rules.get((t["machine_version"], t["old_state"], t["new_state"]))
        if roles is None:
            out.append({**_transition_witness(t), "problem": "no such rule in this machine version", "allowed_roles": []})
        elif t["role"] not in roles:
            out.append({**_transition_witness(t), "problem": "role not listed for this move", "allowed_roles": list(roles)})
    return out


@invariant(
    "RESEND_DEDUPLICATED",
    broken_by=("publish-report", "resend"),
    short="rsnd",
    description=(
        "Every envelope the transport resent (a fault_injected resend: the same intent under a new message id) "
        "is recorded duplicate when the intent it repeats was already recorded, that is when its original was "
        "delivered before it with any decision but rejected (a resend arriving after the conversation's fence is "
        "refused there whatever its key says: E_POST_TERMINAL_MESSAGE, nothing to judge). A key derived from the "
        "message id or the clock makes a resend a new intent (late, rejected or accepted again) and breaks this."
    ),
)
def _resend_deduplicated(run: _Run) -> list[dict]:
    first: dict[str, dict] = {}  # message_id -> its first delivery
    for dv in run.deliveries:
        first.setdefault(dv["message_id"], dv)
    keys = {m["message_id"]: m["idempotency_key"] for m in run.messages}
    out = []
    for e in run.events:
        if e["type"] != ev_.FaultInjected.TYPE or e["data"].get("fault") != "resend":
            continue
        orig_id, copy_id = e["message_id"], e["data"].get("resend")
        orig, copy = first.get(orig_id), first.get(copy_id)
        if orig is None or copy is None or orig["delivery_id"] > copy["delivery_id"] or orig["decision"] == "rejected":
            continue  # the original never reached intake first, or was refused: nothing to repeat
        if copy["decision"] == "duplicate" or copy.get("code") == "E_POST_TERMINAL_MESSAGE":
            continue
        out.append(
            {
                "problem": f"a resend of one intent was recorded {copy['decision']}, not duplicate",
                "task_id": e["task_id"],
                "message_id": copy_id,
                "original_message_id": orig_id,
                "original_decision": orig["decision"],
                "original_key": keys.get(orig_id),
                "resend_key": keys.get(copy_id),
                "resend_decision": copy["decision"],
                "resend_code": copy.get("code"),
                "delivery_id": copy["delivery_id"],
            }
        )
    return out


@invariant(
    "CLOCK_MONOTONIC",
    never_under_naive=("a property of the run file's writers (event ticks non-decreasing in log order, "
                       "delivery ids gapless however many processes deliver), not of what a policy decides: "
                       "every policy's verdict is written through the same store, which assigns ticks and "
                       "ids inside the write transaction, so no intake, naive or not, can break it. Its "
                       "breaks are planted in the contract cases by a second writer that reads the clock at "
                       "open or skips an id (sim/contracts/invariants.py)."),
    gist=("the logical clock never goes backwards and delivery ids are gapless, however many processes write "
          "the run"),
    short="clock",
    across_tasks=lambda store, lookups, intervals: _clock_over(store.iter_event_clocks(), store.iter_delivery_clocks(),
                                                               _event_clocks(store.events_naming_no_delivery())),
    description=(
        "The logical clock never goes backwards and no delivery is lost or doubled, whoever wrote the run (one "
        "process or many at once): event ticks are non-decreasing in seq order, delivery ticks in delivery_id "
        "order; delivery ids are unique and gapless from 1; every event that names a delivery names a recorded one. "
        "No policy breaks it, naive included: the store assigns ticks and delivery ids inside the write "
        "transaction, whatever intake decides; a writer that read the clock when it opened, or skips an id, does."
    ),
)
def _clock_monotonic(run: _Run) -> list[dict]:
    return _clock_over(_event_clocks(run.events),
                       ((d["delivery_id"], d["tick"], d["message_id"], d["task_id"])
                        for d in sorted(run.deliveries, key=lambda d: d["delivery_id"])),
                       _event_clocks(e for e in run.events
                                     if e["delivery_id"] is not None and e["delivery_id"] not in run.delivery_by_id))


def _event_clocks(events):
    """Events as ``Reads.iter_event_clocks`` gives them: (seq, tick, type, task_id, message_id, delivery_id)."""
    for e in events:
        yield e["seq"], e["tick"], e["type"], e["task_id"], e["message_id"], e["delivery_id"]


def _clock_over(events, deliveries_by_id, events_naming_no_delivery) -> list[dict]:
    """CLOCK_MONOTONIC over streams of tuples (events in seq order as (seq, tick, type, task_id,
    message_id, delivery_id), deliveries in delivery_id order as (delivery_id, tick, message_id,
    task_id)): one row of memory, whatever the run's size."""
    out = []
    prev = None
    for e in events:
        if prev is not None and e[1] < prev[1]:
            seq, tick, type_, task_id, message_id, delivery_id = e
            out.append({"problem": "an event's tick is before the previous event's", "event_seq": seq,
                        "tick": tick, "previous_event_seq": prev[0], "previous_tick": prev[1],
                        "type": type_, "task_id": task_id, "message_id": message_id,
                        "delivery_id": delivery_id})
        prev = e
    prev = None
    for d in deliveries_by_id:
        i, tick, message_id, task_id = d
        if prev is not None and i == prev[0]:  # in id order a reused id follows its first use
            out.append({"problem": "a delivery id is used twice", "delivery_id": i, "message_id": message_id,
                        "other_message_id": prev[2], "task_id": task_id})
            continue
        expected = 1 if prev is None else prev[0] + 1
        if i != expected:
            out.append({"problem": "delivery ids skip", "delivery_id": expected, "missing": list(range(expected, i))[:10],
                        "next_delivery_id": i, "previous_delivery_id": prev[0] if prev else None})
        if prev is not None and tick < prev[1]:
            out.append({"problem": "a delivery's tick is before the previous delivery's", "delivery_id": i,
                        "tick": tick, "previous_delivery_id": prev[0], "previous_tick": prev[1],
                        "message_id": message_id, "task_id": task_id})
        prev = d
    for seq, _tick, type_, task_id, message_id, delivery_id in events_naming_no_delivery:
        out.append({"problem": "an event names a delivery that is not recorded", "event_seq": seq,
                    "delivery_id": delivery_id, "type": type_, "task_id": task_id,
                    "message_id": message_id})
    return out


@invariant(
    "PAYLOAD_MINIMIZATION",
    broken_by=("sensitive-source", "duplicate"),
    gist=("where a scenario declares sensitive fields, each recipient is sent only the ones it needs and the "
          "logs keep `[redacted]`; see `protolab run sensitive-source --policy naive` then `protolab check` "
          "and `protolab messages --payloads`"),
    short="mini",
    description=(
        "Where the run declares sensitive payload fields (a scenario's [privacy] table), no message carries one to "
        "a recipient the declaration does not say needs it, and neither the message log nor the event log keeps "
        "a sensitive value in the clear (only [redacted], beside the digest of what was sent). A run that declares "
        "none holds it trivially."
    ),
)
def _payload_minimization(run: _Run) -> list[dict]:
    p = run.privacy
    if not p:
        return []
    out = []
    for m in run.messages:
        brief = {"message_id": m["message_id"], "type": m["type"], "task_id": m["task_id"], "sender": m["sender"],
                 "recipient": m["recipient"]}
        extra = p.unneeded(m["payload"], m["recipient"])
        if extra:
            out.append({"problem": f"sent to {m['recipient']}, which does not need it", **brief, "fields": extra,
                        "needed": sorted(p.needed_by(m["recipient"]))})
        clear = p.in_clear(m["payload"])
        if clear:
            out.append({"problem": "kept in the clear in the message log", **brief, "fields": clear})
    for e in run.events:
        if e["type"] == ev_.IntentRecorded.TYPE:
            clear = p.in_clear(e["data"].get("payload"))
            if clear:
                out.append({"problem": "kept in the clear in the event log", "event_seq": e["seq"],
                            "message_id": e["message_id"], "task_id": e["task_id"], "fields": clear})
    return out


@invariant(
    "EFFECT_HAS_EVIDENCE",
    broken_by=("publish-report", "lost-evidence"),
    gist=("every publication traces back to a stored artifact: a result that paraphrases and cites nothing "
          "is refused with `E_EVIDENCE_REQUIRED`"),
    short="efev",
    description=(
        "Every effect a result committed traces back to primary evidence: the result whose delivery committed it cites, in "
        "its evidence_refs (directly, or through the evidence_refs of the messages it cites), at least one stored "
        "artifact. A result that paraphrases its conclusion and cites nothing publishes a claim nobody can check."
    ),
)
def _effect_has_evidence(run: _Run) -> list[dict]:
    def primary(refs) -> list[str]:
        """The stored artifacts ``refs`` reach, following message ids to what those messages cite."""
        found, seen, todo = [], set(), list(refs)
        while todo:
            r = todo.pop(0)
            if r in seen:
                continue
            seen.add(r)
            if run.has_artifact(r):
                found.append(r)
            else:
                cited = run.refs_of(r)
                if cited is not None:
                    todo.extend(cited)
        return found

    out = []
    for e in run.events:
        if e["type"] != ev_.EffectCommitted.TYPE:
            continue
        msg = run.message_of(run.delivery_by_id.get(e["delivery_id"])) if e["delivery_id"] is not None else None
        if msg is not None and msg["type"] != "task_result":
            continue  # a reviewer's compensating effect (a retraction) rests on the reconciliation's evidence
        refs = list(msg["evidence_refs"]) if msg else []
        if not primary(refs):
            out.append({"problem": "committed from a result that cites no stored evidence" if not refs
                        else "its evidence reaches no stored artifact", "effect_key": e["data"].get("effect_key"),
                        "task_id": e["task_id"], "message_id": msg["message_id"] if msg else e["message_id"],
                        "delivery_id": e["delivery_id"], "event_seq": e["seq"], "evidence_refs": refs})
    return out


@invariant(
    "NO_EFFECT_FROM_UNTRUSTED",
    broken_by=("publish-report", "late-conflict"),
    gist=("nothing publishes from an input whose task got two payloads under one key and was not released by "
          "a reviewer"),
    short="untr",
    across_tasks=lambda store, lookups, intervals: _untrusted_effects(lookups, intervals,
                                                                      store.iter_events(etype=ev_.EffectCommitted.TYPE)),
    description=(
        "No result commits an effect while an input it cites (an artifact or a message of another task) belongs to "
        "a task that was untrusted at that moment: one (task_id, idempotency_key) had been delivered with two "
        "different payloads (any decision but rejected), and no review_decided had released that task since. Read "
        "from the message log in delivery order, whatever the runtime marked."
    ),
)
def _no_effect_from_untrusted(run: _Run) -> list[dict]:
    return _untrusted_effects(run, _taint_intervals(run), (e for e in run.events if e["type"] == ev_.EffectCommitted.TYPE))


def _taint_intervals(run: _Run) -> dict[str, list[list]]:
    """When each task was untrusted, read from the log in event order: task -> [[from event seq,
    until event seq (None: still), the message that brought its second payload], ...]. A task is
    untrusted from the first event of the delivery that brought, under one (task_id,
    idempotency_key), a payload unlike every one delivered before it (any decision but rejected),
    until the next review_decided for it."""
    payloads: dict[tuple, list[dict]] = {}
    open_: dict[str, list] = {}
    out: dict[str, list[list]] = {}
    done: set[int] = set()
    for e in run.events:
        did = e["delivery_id"]
        if did is not None and did not in done:
            done.add(did)
            d = run.delivery_by_id.get(did)
            m = run.message_of(d)
            if d is not None and m is not None and d["decision"] != "rejected" and m["task_id"] != m["trace_id"]:
                k = (m["task_id"], m["idempotency_key"])
                earlier = payloads.setdefault(k, [])
                if earlier and not any(_same_payload(p, m) for p in earlier) and m["task_id"] not in open_:
                    iv = [e["seq"], None, m["message_id"]]
                    open_[m["task_id"]] = iv
                    out.setdefault(m["task_id"], []).append(iv)
                earlier.append(m)
        if e["type"] == ev_.ReviewDecided.TYPE:
            iv = open_.pop(e["task_id"], None)  # type: ignore[arg-type]  # None: no interval open for the task
            if iv is not None:
                iv[1] = e["seq"]
    return out


def _untrusted_at(intervals: dict[str, list[list]], task_id: str, seq: int) -> str | None:
    """The message that made ``task_id`` untrusted at event ``seq`` (None: trusted then)."""
    for start, until, second in intervals.get(task_id, ()):
        if start <= seq and (until is None or seq < until):
            return second
    return None


def _untrusted_effects(run: _Run, intervals: dict[str, list[list]], effect_events) -> list[dict]:
    out: list[dict] = []
    if not intervals:
        return out
    for e in effect_events:
        did = e["delivery_id"]
        msg = run.message_of_delivery(did) if did is not None else None
        if msg is None or msg["type"] != "task_result":
            continue
        for ref in msg["evidence_refs"]:
            src = run.task_of_artifact(ref) if ref.startswith("sha256:") else run.task_of_message(ref)
            second = _untrusted_at(intervals, src, e["seq"]) if src is not None and src != msg["task_id"] else None
            if second is not None:
                out.append({"problem": "committed from an input that was untrusted at that moment",
                            "effect_key": e["data"].get("effect_key"), "task_id": msg["task_id"],
                            "message_id": msg["message_id"], "input": ref, "input_task": src,
                            "second_payload": second, "event_seq": e["seq"]})
                break
    return out


@invariant(
    "VERSION_READ",
    broken_by=("publish-report", "new-major"),
    gist=("nothing is applied from a message in a schema version the runtime does not read: MAJOR.MINOR, 1.0 "
          "or 1.1 here; a bare `1` means 1.0 and a patch such as `1.0.3` is ignored"),
    short="ver",
    description=(
        "Every delivery decided accepted, duplicate, conflict or late was of a message in a schema_version the course's "
        "runtime reads (1.0 or 1.1; a bare major means MAJOR.0, a patch is ignored). A message in a major it cannot "
        "read, or a minor newer than it reads, is refused before anything in it is believed."
    ),
)
def _version_read(run: _Run) -> list[dict]:
    out = []
    for dv in run.deliveries:
        if dv["decision"] == "rejected":
            continue
        msg = run.message_of(dv)
        if msg is None:
            continue
        why = _versions.refusal(msg["schema_version"])
        if why is not None:
            out.append({"message_id": msg["message_id"], "delivery_id": dv["delivery_id"], "task_id": msg["task_id"],
                        "type": msg["type"], "schema_version": msg["schema_version"], "decision": dv["decision"],
                        "problem": why})
    return out


@invariant(
    "NEWER_FIELDS_READ",
    broken_by=("publish-report", "upgrade"),
    gist="no publication from a result its sender marked `partial`, a field schema 1.1 added",
    short="minor",
    description=(
        "No side effect is committed from a result whose message, as sent, marks its product partial (payload.partial, "
        "a field schema 1.1 added). A consumer that reads the message as 1.0 drops the mark and publishes an "
        "unfinished product."
    ),
)
def _newer_fields_read(run: _Run) -> list[dict]:
    out = []
    for e in run.events:
        if e["type"] != ev_.EffectCommitted.TYPE or e["delivery_id"] is None:
            continue
        msg = run.message_of_delivery(e["delivery_id"])
        if msg is None or msg["type"] != "task_result" or msg["payload"].get("partial") is not True:
            continue
        out.append({"effect_key": e["data"].get("effect_key"), "task_id": e["task_id"], "message_id": msg["message_id"],
                    "delivery_id": e["delivery_id"], "event_seq": e["seq"], "schema_version": msg["schema_version"],
                    "problem": "committed from a result its sender marked partial"})
    return out


def _gathers_again(run: _Run, rule: str):
    """Each gather_reduced event of ``rule`` beside the reduction its recorded contributions give
    under the declared rule (sim.protocol.evaluate_gather)."""
    for e in run.events:
        if e["type"] != ev_.GatherReduced.TYPE or e["data"].get("rule") != rule:
            continue
        d = e["data"]
        yield e, d, evaluate_gather(declaration_of_event(d), d.get("contributions") or [])


@invariant(
    "DISSENT_KEPT",
    broken_by=("gathers", "delay:M-22"),
    gist=("a gather declared in the scenario is reduced under its own rule: a quorum keeps the dissent it "
          "outvoted"),
    short="diss",
    description=(
        "A QUORUM gather's recorded result keeps every contribution that disagrees with the value it reduced to, "
        "and is complete only when the threshold was met. A majority is a reduction of inputs, not the truth: the "
        "dissent stays for whoever decides."
    ),
)
def _dissent_kept(run: _Run) -> list[dict]:
    out = []
    for e, d, want in _gathers_again(run, "QUORUM"):
        kept = {x.get("message") for x in d.get("dissent") or []}
        lost = [x["message"] for x in want.dissent if x["message"] not in kept]
        if lost or d.get("status") != want.status:
            out.append({"gather": d.get("gather"), "event_seq": e["seq"], "message_id": e["message_id"],
                        "task_id": e["task_id"], "recorded": d.get("status"), "declared": want.status,
                        "dissent_dropped": lost,
                        "problem": f"dissent {', '.join(lost)} dropped" if lost else
                                   f"recorded {d.get('status')}, the declared rule gives {want.status}"})
    return out


@invariant(
    "TIE_BREAK_KEPT",
    broken_by=("gathers", "delay:M-22"),
    gist=("a first success is chosen by the gather's declared tie-break, never by the senders' clocks; see "
          "`protolab run gathers --policy naive` then `protolab check`"),
    short="tie",
    description=(
        "A FIRST_SUCCESS gather picks the candidate its declared tie-break names (the first accepted, or the "
        "lowest sender id), never the one whose sender's clock reads earliest: clocks of different senders do "
        "not order anything."
    ),
)
def _tie_break_kept(run: _Run) -> list[dict]:
    out = []
    for e, d, want in _gathers_again(run, "FIRST_SUCCESS"):
        if d.get("selected") != want.selected:
            out.append({"gather": d.get("gather"), "event_seq": e["seq"], "message_id": e["message_id"],
                        "task_id": e["task_id"], "tie_break": d.get("tie_break"), "picked": d.get("selected"),
                        "declared": want.selected,
                        "problem": f"picked {d.get('selected')}; {d.get('tie_break')} names {want.selected}"})
    return out


@invariant(
    "NO_STATE_FROM_UNDECLARED",
    broken_by=("publish-report", "self-report"),
    gist=("nothing the runtime holds changes by a message whose payload carries a field its type does not "
          "declare: naive believes a worker's own `budget_left`, safe refuses it with `E_UNKNOWN_FIELD`"),
    short="undcl",
    description=(
        "No delivery that changed the runtime's state (any decision but rejected, with an event that changes state) "
        "was of a message whose payload carries a field its type does not declare in its schema_version (the "
        "declared fields are in sim/versions.py; a scenario's declared sensitive fields count as declared). A field "
        "nobody declared is a claim nobody checks: a runtime that takes the message acts on it, as when a worker "
        "reports its own budget_left and the task's budget becomes whatever it said. A run whose envelopes came "
        "from a plugged-in design is not held to the reference design's fields."
    ),
)
def _no_state_from_undeclared(run: _Run) -> list[dict]:
    meta = getattr(run._store, "get_meta", None)
    if callable(meta) and meta("plugin_design"):
        return []
    allowed = frozenset(run.privacy.sensitive)
    by_delivery: dict[int, list] = {}
    budget: dict[str, int] = {}  # each task's budget_left, as the event log folds it
    before: dict[int, dict[str, int]] = {}  # delivery -> the budget_left of its task before its first event
    for e in run.events:
        did, tid = e["delivery_id"], e["task_id"]
        if did is not None:
            if did not in by_delivery and tid in budget:
                before[did] = {tid: budget[tid]}
            by_delivery.setdefault(did, []).append(e)
        if e["type"] == ev_.TaskCreated.TYPE:
            budget[tid] = e["data"].get("budget", 0)
        elif e["type"] == ev_.BudgetCharged.TYPE and tid in budget:
            budget[tid] -= e["data"].get("amount", 0)
    out = []
    for dv in run.deliveries:
        if dv["decision"] == "rejected":
            continue
        msg = run.message_of(dv)
        if msg is None or not isinstance(msg["payload"], dict):
            continue
        try:
            version = _versions.parse_version(msg["schema_version"])
        except EnvelopeError:
            continue  # a version nobody reads is VERSION_READ's to judge
        fields = _versions.shape(msg["type"], version)
        extra = [k for k in msg["payload"] if k not in fields and k not in allowed]
        changed = [e for e in by_delivery.get(dv["delivery_id"], ())
                   if getattr(ev_.REGISTRY.get(e["type"]), "CHANGES_STATE", False)]
        if not extra or not changed:
            continue
        tid = msg["task_id"]
        believed = {}
        if "budget_left" in extra and any(e["type"] == ev_.BudgetCharged.TYPE for e in changed):
            was = before.get(dv["delivery_id"], {}).get(tid)
            after = was - sum(e["data"].get("amount", 0) for e in changed if e["type"] == ev_.BudgetCharged.TYPE) \
                if was is not None else None
            believed["budget_left"] = {"claimed": msg["payload"]["budget_left"], "before": was, "after": after}
        names = ", ".join(f"payload.{k}" for k in extra)
        took = (f"the task's budget_left went from {believed['budget_left']['before']} to "
                f"{believed['budget_left']['after']}, the value it claimed"
                if "budget_left" in believed and believed["budget_left"]["after"] == msg["payload"]["budget_left"]
                else "state changed by it")
        out.append({
            "problem": f"{names} {'is' if len(extra) == 1 else 'are'} not declared for {msg['type']} in schema "
                       f"{version}, yet the message was taken ({dv['decision']}): {took}",
            "message_id": msg["message_id"], "delivery_id": dv["delivery_id"], "task_id": tid,
            "type": msg["type"], "sender": msg["sender"], "schema_version": msg["schema_version"],
            "decision": dv["decision"], "fields": extra, "claimed": {k: msg["payload"][k] for k in extra},
            "believed": believed,
            "changed": [{"event_seq": e["seq"], "type": e["type"]} for e in changed],
        })
    return out


@invariant(
    "PAYLOAD_MATCHES_DIGEST",
    broken_by=("publish-report", "garble"),
    gist=("every message a delivery took carries the payload its `payload_digest` was made of: see `protolab run "
          "--policy naive --fault garble --db garbled.db` then `protolab check --db garbled.db`; safe refuses the "
          "changed payload with `E_DIGEST_MISMATCH`"),
    short="pdig",
    description=(
        "Every message a delivery took (any decision but rejected) carries the payload its payload_digest was made "
        "of: the payload the message log keeps, digested again under its digest_scheme, is its payload_digest. A "
        "payload changed after it was digested (in transit, or by whoever handled it since) is not what its sender "
        "sent, and a runtime that takes it acts on what nobody said. A payload the log keeps with [redacted] "
        "values (sim.privacy) cannot be digested from the log: intake checked it when it arrived."
    ),
)
def _payload_matches_digest(run: _Run) -> list[dict]:
    out = []
    for dv in run.deliveries:
        if dv["decision"] == "rejected":
            continue
        msg = run.message_of(dv)
        if msg is None or is_redacted(msg["payload"]):
            continue
        try:
            actual = _digest.digest(msg["payload"], msg["digest_scheme"])
        except DigestError as e:  # (a value its scheme cannot write: no digest of it matches)
            actual = f"(not computable: {e})"
        if actual == msg["payload_digest"]:
            continue
        out.append({
            "problem": f"{msg['message_id']} was taken ({dv['decision']}) though its payload is not the one its "
                       "payload_digest was made of",
            "message_id": msg["message_id"], "delivery_id": dv["delivery_id"], "task_id": msg["task_id"],
            "type": msg["type"], "sender": msg["sender"], "decision": dv["decision"],
            "payload_digest": msg["payload_digest"], "digest_scheme": msg["digest_scheme"], "computed": actual,
        })
    return out


# ---------------------------------------------------------------------------- the conversation's rules
#
# The conversation rules are invariants too, judged by the one validator: the run's conversation is exported
# epoch by epoch as 'protolab trace export' writes it, and each finding of the validator ('protolab trace
# validate') is a witness of the invariant that carries its code. So whenever 'trace validate' rejects a run's
# conversation, 'check' breaks an invariant naming the same message; one judge, two faces.

#: Each conversation invariant and the validator codes it carries: every code of sim.protocol.trace.CODES
#: belongs to exactly one (a test holds the partition, so a new code cannot go unjudged).
CONVERSATION_CODES: dict[str, tuple[str, ...]] = {
    "SEQUENCE_KEPT": ("E_DUPLICATE_MESSAGE", "E_SEQUENCE_GAP", "E_CAUSATION_GAP"),
    "FENCE_FINAL": ("E_POST_TERMINAL_MESSAGE", "E_SECOND_FENCE", "E_TERMINAL_FENCE", "E_ACK_NOT_FENCE"),
    "CURRENT_SPEAKERS": ("E_STALE_EPOCH", "E_STALE_GENERATION", "E_EXPIRED_MESSAGE"),
    "AUDIENCE_KEPT": ("E_AUDIENCE_SCOPE", "E_AUDIENCE_LABEL", "E_DUPLICATE_PARTICIPANT"),
    "WITHIN_BOUNDS": ("E_DEADLINE", "E_MESSAGE_CEILING", "E_LATE_GATHER_CONTRIBUTION"),
    "TRACE_CONSISTENT": ("E_SCHEMA", "E_UNKNOWN_KIND", "E_BAD_VERIFICATION_REF", "E_PAYLOAD_DIGEST",
                         "E_UNKNOWN_GATHER", "E_DUPLICATE_GATHER", "E_GATHER_MEMBERSHIP", "E_GATHER_OPENER",
                         "E_GATHER_NOT_OPEN", "E_GATHER_CLOSED", "E_DUPLICATE_CONTRIBUTION", "E_QUORUM_THRESHOLD",
                         "E_FIRST_SUCCESS_TIE_BREAK", "E_GATHER_RESULT_MISMATCH"),
}
_FAMILY_OF = {code: name for name, codes in CONVERSATION_CODES.items() for code in codes}

#: The event types that change what a task shows or its effects (a fold the conversation's fence forbids
#: after it): every type that changes state, but those that only record what happened to a message (an
#: intent, a duplicate, a refusal, a late arrival) or store an artifact.
_CHANGES_TASK = frozenset(t for t, cls in ev_.REGISTRY.items() if cls.CHANGES_STATE) - {
    "intent_recorded", "duplicate_recorded", "transition_rejected", "late_recorded", "artifact_stored"}


def _conversation_findings(store, run: "_Run | None") -> dict[str, list[dict]]:
    """The validator's findings on every epoch of the run's conversation, as witnesses of the invariant
    carrying each code (computed once per check). ``run``: the rows in hand for a store with no SQL."""
    if run is not None and not hasattr(store, "iter_deliveries_with_messages"):
        store = RowSource(store, run.deliveries, run.messages, run.events)
    out: dict[str, list[dict]] = {name: [] for name in CONVERSATION_CODES}
    for epoch, f, gather in findings(store):
        w = {"problem": f.message, "code": f.code, "message_id": f.message_id, "epoch": epoch, "pointer": f.pointer}
        if gather is not None:
            w["gather"] = gather
        out[_FAMILY_OF.get(f.code, "TRACE_CONSISTENT")].append(w)
    return out


def _conversation(name: str):
    def judged(run: _Run) -> list[dict]:
        if run._conversation is None:
            run._conversation = _conversation_findings(run._store, run)
        found = list(run._conversation[name])
        if name == "FENCE_FINAL":
            found += _changed_after_fence(_kinds(run.deliveries, run.message_of), run.events)
        return found
    return judged


def _across(name: str):
    def judged(store, lookups, intervals) -> list[dict]:
        if lookups._conversation is None:  # (once per check: ``lookups`` is the one every across-task check shares)
            lookups._conversation = _conversation_findings(store, None)
        found = list(lookups._conversation[name])
        if name == "FENCE_FINAL":
            found += _changed_after_fence(store.iter_delivered_kinds(), store.iter_events())
        return found
    return judged


def _kinds(deliveries, message_of):
    """Each delivery with a message as ``Reads.iter_delivered_kinds`` gives it: (delivery_id, decision,
    message_id, type, task_id, trace_id)."""
    for d in deliveries:
        msg = message_of(d)
        if msg is not None:
            yield d["delivery_id"], d["decision"], msg["message_id"], msg["type"], msg["task_id"], msg["trace_id"]


def _changed_after_fence(kinds, events) -> list[dict]:
    """Deliveries after an accepted fence (before a reviewer's decision reopened the conversation) whose
    events changed a task or its effects: the fence closed semantic mutation, and these mutated. ``kinds``:
    each delivery as (delivery_id, decision, message_id, type, task_id, trace_id), in order."""
    after: dict[int, dict] = {}
    fenced = False
    for did, decision, mid, t, task_id, trace_id in kinds:
        if t == "fence" and decision == "accepted":
            fenced = True
        elif fenced and t == "review_decision" and decision == "accepted":
            fenced = False  # reopened: the next epoch
        elif fenced and task_id != trace_id:
            after[did] = {"message_id": mid, "delivery_id": did, "task_id": task_id, "type": t, "decision": decision,
                          "changed": []}
    if not after:
        return []
    for e in events:
        w = after.get(e["delivery_id"])
        if w is not None and e["type"] in _CHANGES_TASK:
            w["changed"].append({"event_seq": e["seq"], "type": e["type"]})
    return [dict(w, problem=f"{w['message_id']} ({w['type']}) was delivered after the fence and recorded "
                            f"{w['decision']}: {', '.join(c['type'] for c in w['changed'])} after the conversation closed",
                 code="E_POST_TERMINAL_MESSAGE")
            for w in after.values() if w["changed"]]


for _name, _short, _broken_by, _gist, _text in (
    ("SEQUENCE_KEPT", "seq",
     ("publish-report", "drop"), "each sender's messages once each, numbered without gaps, every cause before its effect",
     "The run's conversation, exported epoch by epoch, takes each message once (E_DUPLICATE_MESSAGE: the same id "
     "reached a reducer twice), each body of a sender numbered 1, 2, 3, ... with no gap and nothing out of order "
     "(E_SEQUENCE_GAP), and every message after the one that caused it (E_CAUSATION_GAP)."),
    ("FENCE_FINAL", "fence",
     ("publish-report", "afterthought"),
     "after the terminal fence only its acknowledgements, and nothing changes a task or its effects",
     "After the conversation's one terminal fence nothing is taken but one acknowledgement of it from each "
     "required participant (E_POST_TERMINAL_MESSAGE, E_SECOND_FENCE, E_TERMINAL_FENCE, E_ACK_NOT_FENCE), and no "
     "delivery after it changes a task or its effects (until a reviewer's decision reopens the conversation in its "
     "next epoch)."),
    ("CURRENT_SPEAKERS", "speak",
     ("reopened", "straggler"), "only the current epoch, the body that speaks for its sender, unexpired messages",
     "Every message the conversation takes is of its current epoch (E_STALE_EPOCH), from the body that speaks for "
     "its sender at that point, not one replaced by a restart (E_STALE_GENERATION), and not past its own expiry "
     "(E_EXPIRED_MESSAGE)."),
    ("AUDIENCE_KEPT", "aud",
     ("publish-report", "cross-talk"), "inside the conversation's scope and each message's audience",
     "Every message the conversation takes stays inside it: sent in its scope between its participants "
     "(E_AUDIENCE_SCOPE), to recipients who accept every audience label it declares (E_AUDIENCE_LABEL)."),
    ("WITHIN_BOUNDS", "bound",
     ("publish-report", "overtime"), "the declared deadline and message ceiling, gather deadlines",
     "The conversation keeps its declared bounds: no message after its deadline (E_DEADLINE), none beyond its "
     "message ceiling (E_MESSAGE_CEILING), no contribution to a gather after the gather's deadline "
     "(E_LATE_GATHER_CONTRIBUTION)."),
    ("TRACE_CONSISTENT", "trace",
     ("gathers", "delay:M-22"), "a well-formed trace, each gather's recorded result the reduction of its contributions",
     "The exported conversation is what the conversation-trace-v2 contract allows: well formed, every gather "
     "declared, opened and fed by its members only, and each gather's recorded result the reduction of its "
     "accepted contributions under its declared rule (E_GATHER_RESULT_MISMATCH), with every other code of the "
     "validator not carried by another invariant."),
):
    invariant(_name, short=_short, description=_text, broken_by=_broken_by, gist=_gist, across_tasks=_across(_name),
              conversation=True)(_conversation(_name))


#: Every invariant: its name, what it says, and its check, in the order they were declared above.
INVARIANTS: tuple[str, ...] = tuple(REGISTRY)
DESCRIPTIONS: dict[str, str] = {name: inv.description for name, inv in REGISTRY.items()}
#: The invariants about state (every one but the conversation's rules): what a search over delivery orders
#: judges (sim.explore), since it hands the runtime orders no session would (the conversation's order is
#: the session's job, and the conversation invariants judge runs).
STATE_INVARIANTS: tuple[str, ...] = tuple(name for name, inv in REGISTRY.items() if not inv.conversation)


#: A run with more tasks than this is judged a shard of tasks at a time (flat memory); below it, whole.
SHARD_AT = 5_000
#: Tasks per shard.
SHARD_SIZE = 500


def check(store, *, shard_size: int | None = None, progress=None, only=None) -> list[InvariantResult]:
    """Check every invariant over ``store`` (a finished run); results in :data:`INVARIANTS` order.

    A big run (more than :data:`SHARD_AT` tasks, or any run given ``shard_size``) is read a shard of
    tasks at a time, so memory does not grow with the run: each invariant about one task's rows
    judges each shard, what crosses tasks (a cited message or artifact, the delivery before) is looked
    up one row at a time, and the two that read the whole log in order (the clock, and effects resting
    on an input untrusted at that moment) run over streams. The witnesses are the same; a sharded run
    lists them shard by shard. ``progress(done, total)`` is told after each shard. ``only`` (names): judge
    just those (in registry order)."""
    sharded = shard_size is not None or (hasattr(store, "shard_plan") and store.counts()["tasks"] > SHARD_AT)
    names = tuple(n for n in REGISTRY if only is None or n in only)  # read when called: every one registered by now
    witnesses: dict[str, list[dict]] = {name: [] for name in names}
    if not sharded:
        run = _Run(store)
        for name in names:
            witnesses[name] = REGISTRY[name].check(run)
    else:
        plan = store.shard_plan(shard_size or SHARD_SIZE)
        intervals: dict[str, list[list]] = {}
        for k, (lo, hi) in enumerate(plan, 1):
            run = _Run(store, rows=store.shard_rows(lo, hi))
            for name in names:
                if REGISTRY[name].across_tasks is None:
                    witnesses[name] += REGISTRY[name].check(run)
            intervals.update(_taint_intervals(run))
            del run
            if progress is not None:
                progress(k, len(plan))
        empty: dict[str, list] = {t: [] for t in ("events", "deliveries", "messages", "transitions", "effects", "artifacts")}
        lookups = _Run(store, rows=empty)
        for name in names:
            if REGISTRY[name].across_tasks is not None:
                witnesses[name] = REGISTRY[name].across_tasks(store, lookups, intervals)  # type: ignore[misc]  # across_tasks checked not None just above
    return [InvariantResult(name, not witnesses[name], REGISTRY[name].description, tuple(witnesses[name]))
            for name in names]
