"""The adversarial mutation suite for ``conversation-trace-v2``.

Each :class:`Mutation` takes a valid trace (such as ``data/traces/valid-trace.json``),
deep-copies it and breaks exactly one rule; ``expected_code`` is the code the
validator must produce for it. A mutation that must stay valid (dropping a required
acknowledgement) has ``expected_code`` None and names the ``expected_terminal``.
The mutations find what they change by structure (the terminal's fence, the last
acknowledgement, the first gather), not by fixed ids, so they apply to any trace
with a fence, acknowledgements and a gather with two contributions.

``synthetic_trace(n)`` builds a valid trace of ``n`` messages for benchmarks.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Callable

from .trace import validate

__all__ = ["Mutation", "MUTATIONS", "run_mutations", "synthetic_trace"]


@dataclass(frozen=True)
class Mutation:
    """One broken rule: ``apply(trace)`` returns a changed deep copy; the input is untouched."""

    name: str
    rule: str
    expected_code: str | None
    apply: Callable[[dict], dict]
    expected_terminal: str | None = None


# ---------------------------------------------------------------- structural helpers


def _time(text: str, seconds: int) -> str:
    t = datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc) + timedelta(seconds=seconds)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _index(t: dict, mid: str) -> int:
    return next(i for i, m in enumerate(t["messages"]) if m["id"] == mid)


def _fence(t: dict) -> dict:
    return t["messages"][_index(t, t["terminal"]["fence"])]


def _last_ack(t: dict) -> dict:
    return [m for m in t["messages"] if m["kind"] == "ACK"][-1]


def _gather(t: dict) -> dict:
    return t["gathers"][0]


def _contributions(t: dict) -> list[dict]:
    gid = _gather(t)["id"]
    return [m for m in t["messages"] if m["kind"] == "CONTRIBUTION" and m.get("gatherId") == gid]


def _next_seq(t: dict, sender: str) -> int:
    return max((m["seq"] for m in t["messages"] if m["sender"] == sender), default=0) + 1


def _forget(t: dict, mid: str) -> None:
    """Remove ``mid`` from every causedBy and drop recorded gather results (they would differ)."""
    for m in t["messages"]:
        if mid in m["causedBy"]:
            m["causedBy"] = [p for p in m["causedBy"] if p != mid]
    for g in t["gathers"]:
        g.pop("result", None)


def _insert_after(t: dict, after_id: str, new: dict) -> None:
    """Insert ``new`` after ``after_id`` and renumber the sender's later messages to keep them contiguous."""
    i = _index(t, after_id) + 1
    for m in t["messages"][i:]:
        if m["sender"] == new["sender"] and m["seq"] >= new["seq"]:
            m["seq"] += 1
    t["messages"].insert(i, new)


def _mut(fn: Callable[[dict], None]) -> Callable[[dict], dict]:
    def apply(trace: dict) -> dict:
        t = copy.deepcopy(trace)
        fn(t)
        return t

    apply.__name__ = fn.__name__
    apply.__doc__ = fn.__doc__
    return apply


# ---------------------------------------------------------------- the mutations


def _duplicate_message(t):
    ack = _last_ack(t)
    t["messages"].insert(_index(t, ack["id"]) + 1, copy.deepcopy(ack))


def _skip_sequence_number(t):
    _last_ack(t)["seq"] += 1


def _swap_messages_of_one_sender(t):
    ack = _last_ack(t)
    mine = [i for i, m in enumerate(t["messages"]) if m["sender"] == ack["sender"]]
    a, b = mine[-2], mine[-1]
    t["messages"][a], t["messages"][b] = t["messages"][b], t["messages"][a]


def _stale_epoch(t):
    t["epoch"] += 1
    ack = _last_ack(t)
    for m in t["messages"]:
        if m is not ack:
            m["epoch"] += 1


def _stale_generation(t):
    ack = _last_ack(t)
    for p in t["participants"]:
        if p["ref"] == ack["sender"]:
            p["generation"] += 1  # the body was re-admitted ...
    for m in t["messages"]:
        if m["sender"] == ack["sender"] and m is not ack:
            m["generation"] += 1  # ... and its new body sent these, while the old one sends the ack


def _unknown_recipient(t):
    _last_ack(t)["recipients"].append("auditor")


def _unknown_sender(t):
    _last_ack(t)["sender"] = "auditor"


def _wrong_scope(t):
    _last_ack(t)["scope"] = t["scope"] + "-other"


def _missing_audience_label(t):
    _last_ack(t)["audienceLabels"].append("restricted")


def _unknown_causation_parent(t):
    _last_ack(t)["causedBy"].append("m-missing")


def _message_after_fence(t):
    ack = _last_ack(t)
    late = copy.deepcopy(ack)
    late.update(id=ack["id"] + "-late", seq=ack["seq"] + 1, kind="CRITIQUE", at=_time(ack["at"], 5))
    t["messages"].append(late)


def _ack_from_outside_required_set(t):
    fence = _fence(t)
    ack = copy.deepcopy(_last_ack(t))
    ack.update(id=fence["id"] + "-self-ack", sender=fence["sender"], seq=_next_seq(t, fence["sender"]),
               recipients=[fence["recipients"][0]], at=_time(ack["at"], 5))
    t["messages"].append(ack)


def _ack_not_citing_fence(t):
    _last_ack(t)["causedBy"] = [t["messages"][0]["id"]]


def _unknown_kind(t):
    _last_ack(t)["kind"] = "VOTE"


def _expired_message(t):
    ack = _last_ack(t)
    ack["expiresAt"] = _time(ack["at"], -60)


def _after_deadline(t):
    t["deadline"] = _time(_last_ack(t)["at"], -1)


def _late_gather_contribution(t):
    last = _contributions(t)[-1]
    _gather(t)["deadline"] = _time(last["at"], -1)
    _forget(t, last["id"])


def _contribution_from_non_member(t):
    last = _contributions(t)[-1]
    g = _gather(t)
    g["membership"] = [r for r in g["membership"] if r != last["sender"]]
    _forget(t, last["id"])


def _membership_changed(t):
    g = copy.deepcopy(_gather(t))
    g.pop("result", None)
    extra = [p["ref"] for p in t["participants"] if p["ref"] not in g["membership"]][0]
    g["membership"] = sorted(g["membership"] + [extra])
    t["gathers"].append(g)


def _membership_not_sorted(t):
    g = _gather(t)
    g["membership"] = sorted(g["membership"], reverse=True)
    g.pop("result", None)


def _quorum_without_threshold(t):
    g = _gather(t)
    g["rule"] = "QUORUM"
    g.pop("threshold", None)
    g.pop("result", None)


def _quorum_threshold_too_high(t):
    g = _gather(t)
    g.update(rule="QUORUM", threshold=len(g["membership"]) + 1)
    g.pop("result", None)


def _first_success_without_tie_break(t):
    g = _gather(t)
    g["rule"] = "FIRST_SUCCESS"
    g.pop("tieBreak", None)
    g.pop("result", None)


def _unknown_gather(t):
    last = _contributions(t)[-1]
    last["gatherId"] = "g-missing"
    _forget(t, last["id"])


def _unknown_gather_opener(t):
    _gather(t)["opener"] = "m-missing"


def _contribution_before_opener(t):
    g = _gather(t)
    results = [m for m in t["messages"] if m["kind"] == "GATHER_RESULT" and m.get("gatherId") == g["id"]]
    g["opener"] = results[0]["id"]
    for c in _contributions(t):
        _forget(t, c["id"])


def _duplicate_contribution(t):
    first = _contributions(t)[0]
    again = copy.deepcopy(first)
    again.update(id=first["id"] + "-again", seq=first["seq"] + 1, at=_time(first["at"], 1))
    _insert_after(t, first["id"], again)


def _contribution_after_result(t):
    g = _gather(t)
    result = [m for m in t["messages"] if m["kind"] == "GATHER_RESULT" and m.get("gatherId") == g["id"]][0]
    first = _contributions(t)[0]
    late = copy.deepcopy(first)
    # the sender's next seq at that point; its later messages are renumbered to stay contiguous
    seq = max(m["seq"] for m in t["messages"][: _index(t, result["id"]) + 1] if m["sender"] == first["sender"]) + 1
    late.update(id=first["id"] + "-after", seq=seq, at=_time(result["at"], 1))
    _insert_after(t, result["id"], late)


def _second_gather_result(t):
    g = _gather(t)
    result = [m for m in t["messages"] if m["kind"] == "GATHER_RESULT" and m.get("gatherId") == g["id"]][0]
    again = copy.deepcopy(result)
    again.update(id=result["id"] + "-again", seq=result["seq"] + 1, at=_time(result["at"], 1))
    _insert_after(t, result["id"], again)


def _gather_declared_twice(t):
    t["gathers"].append(copy.deepcopy(_gather(t)))


def _recorded_result_mismatch(t):
    _gather(t)["result"]["status"] = "partial"


def _unresolved_gather_at_completed(t):
    last = _contributions(t)[-1]
    t["messages"].remove(last)
    for m in t["messages"]:
        if m["sender"] == last["sender"] and m["seq"] > last["seq"]:
            m["seq"] -= 1
    _forget(t, last["id"])


def _duplicate_participant(t):
    t["participants"].append(copy.deepcopy(t["participants"][0]))


def _second_fence(t):
    fence = _fence(t)
    again = copy.deepcopy(fence)
    again.update(id=fence["id"] + "-again", seq=_next_seq(t, fence["sender"]), causedBy=[_last_ack(t)["id"]],
                 at=_time(_last_ack(t)["at"], 5))
    t["messages"].append(again)


def _terminal_fence_not_a_fence(t):
    t["terminal"]["fence"] = t["messages"][0]["id"]


def _message_ceiling(t):
    t["messageCeiling"] = len(t["messages"]) - 1


def _empty_verification_ref(t):
    _last_ack(t)["verificationRef"] = ""


def _malformed_verification_ref(t):
    _last_ack(t)["verificationRef"] = "no reference here"


def _payload_digest_mismatch(t):
    ack = _last_ack(t)
    ack["payload"] = dict(ack.get("payload", {}), tampered=True)


def _malformed_payload_digest(t):
    _last_ack(t)["payloadDigest"] = "sha256:not-hex"


def _drop_required_ack(t):
    t["messages"].remove(_last_ack(t))


def _truth_effect(t):
    t["terminal"]["truthEffect"] = "CONFIRMED"


def _authority_effect(t):
    t["terminal"]["authorityEffect"] = "GRANTED"


def _unknown_field(t):
    _last_ack(t)["priority"] = "high"


def _M(name, rule, code, fn, terminal=None):
    return Mutation(name, rule, code, _mut(fn), terminal)


MUTATIONS: tuple[Mutation, ...] = (
    _M("duplicate-message", "a repeated message id is rejected", "E_DUPLICATE_MESSAGE", _duplicate_message),
    _M("skip-sequence-number", "seq is the exact next per sender", "E_SEQUENCE_GAP", _skip_sequence_number),
    _M("swap-messages-of-one-sender", "a later message first is a gap", "E_SEQUENCE_GAP",
       _swap_messages_of_one_sender),
    _M("stale-epoch", "every message carries the conversation epoch", "E_STALE_EPOCH", _stale_epoch),
    _M("stale-generation", "every message comes from the sender's current body generation", "E_STALE_GENERATION",
       _stale_generation),
    _M("unknown-recipient", "recipients are participants", "E_AUDIENCE_SCOPE", _unknown_recipient),
    _M("unknown-sender", "senders are participants", "E_AUDIENCE_SCOPE", _unknown_sender),
    _M("wrong-scope", "every message carries the conversation scope", "E_AUDIENCE_SCOPE", _wrong_scope),
    _M("missing-audience-label", "each recipient advertises every declared label", "E_AUDIENCE_LABEL",
       _missing_audience_label),
    _M("unknown-causation-parent", "causedBy names earlier accepted messages", "E_CAUSATION_GAP",
       _unknown_causation_parent),
    _M("message-after-fence", "nothing but acknowledgements follows the fence", "E_POST_TERMINAL_MESSAGE",
       _message_after_fence),
    _M("ack-from-outside-required-set", "only required participants acknowledge after the fence",
       "E_POST_TERMINAL_MESSAGE", _ack_from_outside_required_set),
    _M("ack-not-citing-fence", "a required acknowledgement cites the fence", "E_ACK_NOT_FENCE",
       _ack_not_citing_fence),
    _M("unknown-kind", "message kinds are closed; unknown kinds fail closed", "E_UNKNOWN_KIND", _unknown_kind),
    _M("expired-message", "a message dated after its expiresAt is void", "E_EXPIRED_MESSAGE", _expired_message),
    _M("after-deadline", "no message after the conversation deadline", "E_DEADLINE", _after_deadline),
    _M("late-gather-contribution", "no contribution after the gather deadline", "E_LATE_GATHER_CONTRIBUTION",
       _late_gather_contribution),
    _M("contribution-from-non-member", "only members contribute to a gather", "E_GATHER_MEMBERSHIP",
       _contribution_from_non_member),
    _M("membership-changed", "gather membership is frozen", "E_GATHER_MEMBERSHIP", _membership_changed),
    _M("membership-not-sorted", "gather membership is sorted", "E_GATHER_MEMBERSHIP", _membership_not_sorted),
    _M("quorum-without-threshold", "QUORUM needs an explicit integer threshold", "E_QUORUM_THRESHOLD",
       _quorum_without_threshold),
    _M("quorum-threshold-too-high", "a QUORUM threshold is at most the membership size", "E_QUORUM_THRESHOLD",
       _quorum_threshold_too_high),
    _M("first-success-without-tie-break", "FIRST_SUCCESS needs a deterministic tie-break",
       "E_FIRST_SUCCESS_TIE_BREAK", _first_success_without_tie_break),
    _M("unknown-gather", "a gatherId names a declared gather", "E_UNKNOWN_GATHER", _unknown_gather),
    _M("unknown-gather-opener", "a gather opener is a message of the trace", "E_GATHER_OPENER",
       _unknown_gather_opener),
    _M("contribution-before-opener", "contributions follow the gather's opener", "E_GATHER_NOT_OPEN",
       _contribution_before_opener),
    _M("duplicate-contribution", "one contribution per member", "E_DUPLICATE_CONTRIBUTION",
       _duplicate_contribution),
    _M("contribution-after-result", "a gather takes nothing after its result", "E_GATHER_CLOSED",
       _contribution_after_result),
    _M("second-gather-result", "a gather has one result", "E_GATHER_CLOSED", _second_gather_result),
    _M("gather-declared-twice", "a gather id is declared once", "E_DUPLICATE_GATHER", _gather_declared_twice),
    _M("recorded-result-mismatch", "a recorded gather result is the reduction of accepted inputs",
       "E_GATHER_RESULT_MISMATCH", _recorded_result_mismatch),
    _M("duplicate-participant", "participant refs are unique", "E_DUPLICATE_PARTICIPANT", _duplicate_participant),
    _M("second-fence", "exactly one fence", "E_SECOND_FENCE", _second_fence),
    _M("terminal-fence-not-a-fence", "the terminal names a FENCE message", "E_TERMINAL_FENCE",
       _terminal_fence_not_a_fence),
    _M("message-ceiling-exceeded", "no more messages than the ceiling", "E_MESSAGE_CEILING", _message_ceiling),
    _M("empty-verification-ref", "a verificationRef is never empty", "E_BAD_VERIFICATION_REF",
       _empty_verification_ref),
    _M("malformed-verification-ref", "a verificationRef is kind:value", "E_BAD_VERIFICATION_REF",
       _malformed_verification_ref),
    _M("payload-digest-mismatch", "payloadDigest is the jcs-v2 digest of the payload", "E_PAYLOAD_DIGEST",
       _payload_digest_mismatch),
    _M("malformed-payload-digest", "digests are sha256:<64 hex>", "E_SCHEMA", _malformed_payload_digest),
    _M("unknown-field", "envelopes are closed", "E_SCHEMA", _unknown_field),
    _M("truth-effect-not-none", "a terminal has truthEffect NONE", "E_SCHEMA", _truth_effect),
    _M("authority-effect-not-none", "a terminal has authorityEffect NONE", "E_SCHEMA", _authority_effect),
    _M("drop-required-ack", "a terminal missing a required acknowledgement is a valid BLOCKED, never complete",
       None, _drop_required_ack, "BLOCKED"),
    _M("unresolved-gather-at-completed", "COMPLETED leaves no gather member unresolved; otherwise BLOCKED",
       None, _unresolved_gather_at_completed, "BLOCKED"),
)


def run_mutations(trace: dict, mutations: tuple[Mutation, ...] = MUTATIONS) -> list[dict]:
    """Apply each mutation to ``trace`` and validate the result.

    Each row: ``name``, ``rule``, ``expected`` (code or None), ``expected_terminal``,
    ``produced`` (distinct codes in order), ``terminal`` (effective), ``ok`` (the
    expected code is among the produced ones, or for None: valid with the expected
    terminal) and ``exact`` (the expected code is the only one produced).
    """
    rows = []
    for mu in mutations:
        report = validate(mu.apply(trace))
        produced = list(report.codes)
        if mu.expected_code is None:
            ok = report.valid and report.terminal == mu.expected_terminal
            exact = ok
        else:
            ok = mu.expected_code in produced and (
                mu.expected_terminal is None or report.terminal_if_valid == mu.expected_terminal)
            exact = produced == [mu.expected_code]
        rows.append({"name": mu.name, "rule": mu.rule, "expected": mu.expected_code,
                     "expected_terminal": mu.expected_terminal, "produced": produced,
                     "terminal": report.terminal if report.valid else report.terminal_if_valid, "ok": ok,
                     "exact": exact})
    return rows


def synthetic_trace(messages: int, *, workers: int = 8) -> dict:
    """A valid COMPLETED trace of exactly ``messages`` messages (at least ``workers + 2``).

    The manager sends REQUESTs round-robin to ``workers`` researchers, each answers
    with a RESPONSE caused by it, then the manager fences and every researcher
    acknowledges. No payloads are carried (only digests), one message per second.
    """
    if messages < workers + 2:
        raise ValueError(f"a synthetic trace needs at least {workers + 2} messages")
    refs = [f"researcher-{k + 1}" for k in range(workers)]
    start = datetime(2026, 7, 13, tzinfo=timezone.utc)
    seq = {"manager": 0, **{r: 0 for r in refs}}
    out: list[dict] = []

    def add(sender, kind, recipients, labels, caused):
        n = len(out) + 1
        seq[sender] += 1
        out.append({
            "id": f"m{n}", "sender": sender, "generation": 1, "seq": seq[sender], "epoch": 1, "scope": "trace:S-1",
            "audienceLabels": labels, "recipients": recipients, "kind": kind, "causedBy": caused,
            "at": (start + timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "payloadDigest": "sha256:" + hashlib.sha256(f"m{n}".encode()).hexdigest(),
        })
        return f"m{n}"

    body = messages - 1 - workers
    k = 0
    last = None
    while len(out) < body:
        w = refs[k % workers]
        k += 1
        req = add("manager", "REQUEST", [w], ["research"], [])
        last = req
        if len(out) < body:
            last = add(w, "RESPONSE", ["manager"], ["results"], [req])
    fence = add("manager", "FENCE", list(refs), ["control"], [last] if last else [])
    for r in refs:
        add(r, "ACK", ["manager"], ["control"], [fence])
    end = (start + timedelta(seconds=len(out) + 1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "schema": "conversation-trace-v2", "protocol": "synthetic/v1", "conversationId": "S-1", "epoch": 1,
        "scope": "trace:S-1", "deadline": end, "messageCeiling": messages,
        "participants": [{"ref": "manager", "principal": "course:manager", "generation": 1,
                          "audiences": ["control", "results"]}]
        + [{"ref": r, "principal": "course:researcher", "generation": 1, "audiences": ["control", "research"]}
           for r in refs],
        "messages": out, "gathers": [],
        "terminal": {"state": "COMPLETED", "fence": fence, "requiredAcks": refs, "truthEffect": "NONE",
                     "authorityEffect": "NONE"},
    }
