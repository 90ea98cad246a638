"""A scenario's gathers, reduced by the runtime.

A ``[[gather]]`` of a scenario (:class:`sim.scenario.GatherSpec`) names its member tasks and its rule
before anything is sent: membership and rule are frozen. Once every member task is settled the
runtime reduces the accepted results of those tasks and appends one ``gather_reduced`` event. Each
result is one contribution, written as the conversation trace writes it (id, sender, the sender's
``at``, and a payload: the ``vote`` the cited artifact holds, the artifact as ``value``, and
``success``), handed over in delivery order.

Under the safe policy the reduction is :func:`sim.protocol.evaluate_gather`: QUORUM keeps every
dissenting contribution, FIRST_SUCCESS picks by its declared tie-break, never by a clock. The naive
policy (``Policy.gathers == "majority"``) does what a hurried runtime does: the most common verdict
becomes the answer and the others are dropped, and the first success is the one whose sender's clock
says it came first. The invariants DISSENT_KEPT and TIE_BREAK_KEPT reduce the recorded contributions
again under the declared rule and say where the recorded result differs.
"""

from __future__ import annotations

from collections import Counter

from . import events as ev_
from .machine import TERMINAL
from .protocol import GatherResult, evaluate_gather
from .scenario import GatherSpec

__all__ = ["Gathering", "declaration", "declaration_of_event", "majority_reduce", "reduce"]


def declaration(spec: GatherSpec, workers: dict[str, str]) -> dict:
    """``spec`` as a trace's gather object (membership: the member tasks' workers, sorted; its deadline is a
    time only once the gather opens, so it is left empty here)."""
    out = {"id": spec.id, "rule": spec.rule, "membership": sorted({workers[t] for t in spec.over}),
           "deadline": None, "opener": None}
    if spec.threshold is not None:
        out["threshold"] = spec.threshold
    if spec.tie_break is not None:
        out["tieBreak"] = spec.tie_break
    return out


def declaration_of_event(data: dict) -> dict:
    """The gather object a ``gather_reduced`` event's data declares (membership: its contributors'
    senders; the rule, threshold and tie-break as recorded)."""
    out = {"id": data.get("gather"), "rule": data.get("rule"), "deadline": None, "opener": None,
           "membership": sorted({c.get("sender") for c in data.get("contributions") or []})}
    if data.get("threshold") is not None:
        out["threshold"] = data["threshold"]
    if data.get("tie_break") is not None:
        out["tieBreak"] = data["tie_break"]
    return out


def majority_reduce(gather: dict, contributions: list[dict]) -> GatherResult:
    """The naive reduction: the most common verdict is the answer (the others dropped, whatever the
    threshold), and the first success is the one whose sender's clock reads earliest."""
    gid, rule = gather.get("id"), gather.get("rule")
    ids = tuple(c["id"] for c in contributions)
    who = tuple(sorted({c["sender"] for c in contributions}))
    common = dict(gather_id=gid, rule=rule, contributors=who, missing=(), inputs=ids)
    if rule == "FIRST_SUCCESS":
        ok = [c for c in contributions if c.get("payload", {}).get("success", True)]
        if not ok:
            return GatherResult(status="blocked", value=None, dissent=(), reason=f"gather {gid}: no success", **common)
        first = min(ok, key=lambda c: c["at"])  # the senders' clocks decide
        return GatherResult(status="complete", value=first["payload"].get("value"), dissent=(), selected=first["id"],
                            reason=f"gather {gid}: {first['id']} from {first['sender']}, earliest by its clock "
                                   f"({first['at']})", **common)
    verdicts = [c.get("payload", {}).get("vote", c.get("payload", {}).get("value")) for c in contributions]
    if not verdicts:
        return GatherResult(status="blocked", value=None, dissent=(), reason=f"gather {gid}: nothing", **common)
    counts = Counter(str(v) for v in verdicts)
    top = max(counts.values())
    value = next(v for v in verdicts if counts[str(v)] == top)
    return GatherResult(status="complete", value=value, dissent=(),
                        reason=f"gather {gid}: majority {top} of {len(verdicts)} says {value}; the rest dropped", **common)


def reduce(gather: dict, contributions: list[dict], how: str) -> GatherResult:
    """The gather reduced as a policy's ``gathers`` says: "declared" or "majority"."""
    return majority_reduce(gather, contributions) if how == "majority" else evaluate_gather(gather, contributions)


def _contribution(row: dict, gid: str, artifact) -> dict:
    payload = row["payload"] or {}
    body: dict = {"value": payload.get("artifact"), "success": payload.get("status") == "succeeded"}
    content = (artifact or {}).get("content")
    if isinstance(content, dict) and "vote" in content:
        body["vote"] = content["vote"]
    return {"id": row["message_id"], "sender": row["sender"], "kind": "CONTRIBUTION", "gatherId": gid,
            "at": row["created_at"], "payload": body}


class Gathering:
    """The run's part that reduces its scenario's gathers (mixed into :class:`sim.runner.Run`)."""

    def _reduce_gathers(self) -> None:
        specs = self.scenario.gathers
        if not specs:
            return
        done = self.__dict__.setdefault("_gathers_reduced", set())
        pending = [g for g in specs if g.id not in done]
        if not pending:
            return
        rows = None
        due: list[tuple] = []  # (gather, the last round a contribution counts in: None, every one so far)
        for g in pending:
            if all(self._settled_for_gather(t) for t in g.over):
                due.append((g, None))
            elif self.policy.gathers == "declared":
                # the declared deadline: past it, what arrived is reduced (partial; nothing made up). A hurried
                # runtime (naive) waits for every member, late ones included.
                opened = self.__dict__.setdefault("_gathers_opened", {}).get(g.id)
                if opened is None:
                    rows = rows if rows is not None else list(self.store.iter_deliveries_with_messages())
                    asked = [r["delivery_tick"] for r in rows if r["type"] == "task_request" and r["task_id"] in g.over
                             and r["delivery_decision"] == "accepted"]
                    if asked:
                        opened = self._gathers_opened[g.id] = min(asked)
                if opened is not None and self.now > opened + g.deadline:
                    due.append((g, opened + g.deadline))
        if not due:
            return
        rows = rows if rows is not None else list(self.store.iter_deliveries_with_messages())
        rows = [r for r in rows if r["type"] == "task_result" and r["delivery_decision"] == "accepted"]
        workers = {t.id: t.worker for t in self.scenario.tasks}
        for g, until in due:
            done.add(g.id)
            first: dict[str, dict] = {}
            for r in rows:  # one contribution per member task: its first accepted result (by the deadline)
                if r["task_id"] in g.over and (until is None or r["delivery_tick"] <= until):
                    first.setdefault(r["task_id"], r)
            ordered = sorted(first.values(), key=lambda r: r["delivery_id"])
            contributions = [_contribution(r, g.id, self.store.artifact((r["payload"] or {}).get("artifact") or ""))
                             for r in ordered]
            decl = declaration(g, workers)
            res = reduce(decl, contributions, self.policy.gathers)
            event = ev_.GatherReduced(
                gather=g.id, rule=g.rule, status=res.status, value=res.value, dissent=[dict(d) for d in res.dissent],
                contributions=contributions, reducer=self.policy.gathers, reason=res.reason,
                threshold=g.threshold, tie_break=g.tie_break, selected=res.selected,
            )
            with self.store.transaction():
                self.store.advance(to=self.now)
                self.store.append_event(event.draft(self.trace, contributions[-1]["id"] if contributions else None))

    def _settled_for_gather(self, task_id: str) -> bool:
        t = self.task(task_id)
        return t is not None and t.state in TERMINAL
