"""Semantic replay of a conversation trace: re-run the reducers, prove equivalence.

The seed's offline validator cannot prove replay: it has no payloads and no reducer. Traces
that carry them (an exported simulator run does) can be replayed:

* the **state reducer** folds each *accepted* message (rejected ones never reach it) into a
  hash chain over ``{id, sender, generation, seq, kind, payloadDigest, gatherId}``, so the
  state after a message depends on every accepted message before it and on their order;
  ``stateDigestAfter`` records it per message;
* every **gather** is reduced again from its accepted contributions;
* the **state digest** is the jcs-v2 digest of the chain head, the gather results and the
  effective terminal.

``replay`` compares what the trace recorded with what it recomputes and reports the first
position where they differ, expected (recorded) beside found (recomputed), as a workflow
replayer reports non-determinism. ``annotate`` writes the reducer outputs into a trace.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field

from .. import digest as _digest
from .trace import Report, validate

__all__ = ["Divergence", "ReplayResult", "reduce_states", "annotate", "replay", "step", "final_state_digest", "GENESIS"]

#: the state before any message
GENESIS = "sha256:" + "0" * 64


@dataclass(frozen=True)
class Divergence:
    position: int  # index in the supplied message list (-1: the final state digest, -2: a gather)
    message_id: str | None
    what: str  # "stateDigestAfter", "stateDigest" or "gather g1"
    expected: object
    found: object


@dataclass(frozen=True)
class ReplayResult:
    equivalent: bool
    state_digest: str
    recorded_state_digest: str | None
    messages: int
    accepted: int
    first_divergence: Divergence | None
    report: Report = field(repr=False, compare=False, default=None)

    def to_dict(self) -> dict:
        d = self.first_divergence
        return {
            "equivalent": self.equivalent,
            "stateDigest": self.state_digest,
            "recordedStateDigest": self.recorded_state_digest,
            "messages": self.messages,
            "accepted": self.accepted,
            "valid": self.report.valid if self.report is not None else None,
            "terminal": self.report.terminal if self.report is not None else None,
            "firstDivergence": None if d is None else {
                "position": d.position, "messageId": d.message_id, "what": d.what, "expected": d.expected, "found": d.found,
            },
        }


def step(head: str, msg: dict) -> str:
    """The state after accepting ``msg`` in state ``head``."""
    record = {k: msg.get(k) for k in ("id", "sender", "generation", "seq", "kind", "payloadDigest", "gatherId")}
    h = hashlib.sha256((head + "\n").encode() + _digest.canonical_bytes(record, "jcs-v2"))
    return "sha256:" + h.hexdigest()


def reduce_states(trace: dict, report: Report | None = None) -> tuple[list[str | None], str, Report]:
    """Per message: the state digest after it (None for a rejected message); then the final digest."""
    report = report or validate(trace)
    accepted = set(report.accepted_positions)  # positions, not ids: a duplicated id is accepted once
    head = GENESIS
    after: list[str | None] = []
    for i, msg in enumerate(trace.get("messages", [])):
        if i in accepted:
            head = step(head, msg)
            after.append(head)
        else:
            after.append(None)
    return after, final_state_digest(head, report), report


def final_state_digest(head: str, report: Report) -> str:
    """The state digest: the chain head after the last accepted message, the gather results and the
    effective terminal."""
    return _digest.digest(
        {
            "chain": head,
            "gathers": {gid: g.to_json() for gid, g in sorted(report.gathers.items())},
            "terminal": report.terminal,
        },
        "jcs-v2",
    )


def annotate(trace: dict) -> dict:
    """A copy of ``trace`` carrying its reducer outputs (stateDigestAfter, gather results, stateDigest)."""
    out = copy.deepcopy(trace)
    after, final, report = reduce_states(out)
    for msg, d in zip(out.get("messages", []), after):
        if d is not None:
            msg["stateDigestAfter"] = d
        else:
            msg.pop("stateDigestAfter", None)
    for g in out.get("gathers", []):
        res = report.gathers.get(g.get("id"))
        if res is not None:
            g["result"] = res.to_json()
    out["stateDigest"] = final
    return out


def replay(trace: dict) -> ReplayResult:
    """Re-run the reducers over ``trace`` in its supplied order and compare with what it recorded."""
    after, final, report = reduce_states(trace)
    msgs = trace.get("messages", [])
    first = None
    for i, (msg, found) in enumerate(zip(msgs, after)):
        if not isinstance(msg, dict):
            continue
        expected = msg.get("stateDigestAfter")
        if expected is not None and expected != found:
            first = Divergence(i, msg.get("id"), "stateDigestAfter", expected, found)
            break
    if first is None:
        for g in trace.get("gathers", []):
            res = report.gathers.get(g.get("id")) if isinstance(g, dict) else None
            if res is not None and "result" in g and g["result"] != res.to_json():
                first = Divergence(-2, g.get("opener"), f"gather {g.get('id')}", g["result"], res.to_json())
                break
    recorded = trace.get("stateDigest")
    if first is None and recorded is not None and recorded != final:
        first = Divergence(-1, None, "stateDigest", recorded, final)
    return ReplayResult(first is None, final, recorded, len(msgs), len(report.accepted), first, report)
