"""Judges of exercise 6, a conversation trace. The student's ``trace.json`` is data: it is read as
JSON and never run.

Each test is one rule of the conversation-protocols seed, judged all or nothing (one judge per
rule, :data:`RULES`):

* ``snapshot``: the bound snapshot: the story's three participants, once each; the conversation's
  deadline, its message ceiling and each message's expiry hold;
* ``closed-envelopes``: the closed language: known kinds, closed envelopes with every required field,
  each payload carried under its jcs-v2 digest, verification refs of the form kind:value;
* ``epochs``: every message carries the conversation's epoch and its sender's current body
  generation;
* ``sequence``: each sender numbers its own messages 1, 2, 3 in file order; no id repeats;
* ``audiences``: senders and recipients are participants, every message carries the conversation's
  scope, each recipient advertises every label a message declares;
* ``gather-membership``: one gather, frozen when the author's request about the draft opens it,
  over exactly both reviewers (sorted), rule ALL; only members contribute, once each;
* ``gather-result``: the gather waits for both verdicts, the author records one decision after
  them, and the gather's recorded result is the reduction of the accepted verdicts;
* ``terminal-fence``: one fence from the author to both reviewers closes the conversation; the
  terminal names it, is COMPLETED and claims no truth and no authority; nothing but
  acknowledgements follows it;
* ``acknowledgements``: both reviewers are required to acknowledge; each does once, after the fence,
  citing it, to its sender; an acknowledgement is a receipt, and a missing one leaves the
  conversation BLOCKED;
* ``causal-chain`` (hidden): every message hangs from the opening request through ``causedBy``,
  after its causes.

A rule breaks in three ways, each a case of its test: the validator (``sim.protocol.trace``)
reports, on the student's trace, a finding that belongs to the rule (:func:`rule_of`: by its code
and, for a shape finding, by the field it points at; a causedBy parent that exists but was
rejected for another rule's reason is that rule's, not causation's); a part of the story the rule
governs is missing or wrong; or a mutation of the adversarial suite (``sim.protocol.mutate``) that
breaks the rule is not rejected: it needs a structure the trace lacks (an ACK after the fence, a
gather with its contributions...) or the validator finds nothing new in the mutated trace (the
mutation suite's verdicts, grouped by rule: a test's ``mutations`` argument, extended by hidden
cases). A mutation is judged against the trace's own findings, so that one mistake costs the rules
it breaks and not every rule whose mutations need a valid trace.

Whatever the file holds (broken JSON, missing fields, wrong types), a judge answers with a
:class:`~sim.course.judges.Judged` that says what is wrong, never with a traceback. A submission's
tests share one reading of the file, one validation and one run of each mutation (a bounded cache
keyed by the file's path and the hash of its content).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

from . import Broke, Judged, failed, rerun_line, rule

_FILE = "trace.json"
AUTHOR, RA, RB = "author", "reviewer-a", "reviewer-b"
REVIEWERS = [RA, RB]
PARTICIPANTS = sorted([AUTHOR, RA, RB])
DRAFT = "D-1"

_VALIDATE = "protolab trace validate {dir}/trace.json"
_MUTATE = "protolab trace mutate {dir}/trace.json"
_DIAGRAM = "protolab trace diagram {dir}/trace.json --text"

# the rules (test names)
SNAP, CLOSED, EPOCHS, SEQ, AUD = "snapshot", "closed-envelopes", "epochs", "sequence", "audiences"
GM, GR, FENCE, ACKS, CAUSAL = "gather-membership", "gather-result", "terminal-fence", "acknowledgements", "causation"
RULES = (SNAP, CLOSED, EPOCHS, SEQ, AUD, GM, GR, FENCE, ACKS, CAUSAL)  # causation is the grader's hidden test

#: Each mutation of the suite and the rule it breaks (a test's ``mutations`` name some of its rule's).
MUTATION_RULE = {
    "duplicate-participant": SNAP, "message-ceiling-exceeded": SNAP, "after-deadline": SNAP, "expired-message": SNAP,
    "unknown-kind": CLOSED, "unknown-field": CLOSED, "payload-digest-mismatch": CLOSED,
    "malformed-payload-digest": CLOSED, "empty-verification-ref": CLOSED, "malformed-verification-ref": CLOSED,
    "stale-epoch": EPOCHS, "stale-generation": EPOCHS,
    "duplicate-message": SEQ, "skip-sequence-number": SEQ, "swap-messages-of-one-sender": SEQ,
    "unknown-recipient": AUD, "unknown-sender": AUD, "wrong-scope": AUD, "missing-audience-label": AUD,
    "contribution-from-non-member": GM, "membership-changed": GM, "membership-not-sorted": GM,
    "duplicate-contribution": GM, "gather-declared-twice": GM, "unknown-gather": GM, "unknown-gather-opener": GM,
    "quorum-without-threshold": GM, "quorum-threshold-too-high": GM, "first-success-without-tie-break": GM,
    "late-gather-contribution": GR, "contribution-before-opener": GR, "contribution-after-result": GR,
    "second-gather-result": GR, "recorded-result-mismatch": GR, "unresolved-gather-at-completed": GR,
    "message-after-fence": FENCE, "second-fence": FENCE, "terminal-fence-not-a-fence": FENCE,
    "truth-effect-not-none": FENCE, "authority-effect-not-none": FENCE,
    "ack-from-outside-required-set": ACKS, "ack-not-citing-fence": ACKS, "drop-required-ack": ACKS,
    "unknown-causation-parent": CAUSAL,
}

#: The validator's codes and the rule each belongs to (E_SCHEMA and a few others go by the field they
#: point at: :func:`rule_of`).
CODE_RULE = {
    "E_DUPLICATE_PARTICIPANT": SNAP, "E_MESSAGE_CEILING": SNAP, "E_DEADLINE": SNAP, "E_EXPIRED_MESSAGE": SNAP,
    "E_UNKNOWN_KIND": CLOSED, "E_BAD_VERIFICATION_REF": CLOSED, "E_PAYLOAD_DIGEST": CLOSED, "E_SCHEMA": CLOSED,
    "E_STALE_EPOCH": EPOCHS, "E_STALE_GENERATION": EPOCHS,
    "E_DUPLICATE_MESSAGE": SEQ, "E_SEQUENCE_GAP": SEQ,
    "E_AUDIENCE_SCOPE": AUD, "E_AUDIENCE_LABEL": AUD,
    "E_GATHER_MEMBERSHIP": GM, "E_DUPLICATE_CONTRIBUTION": GM, "E_DUPLICATE_GATHER": GM, "E_UNKNOWN_GATHER": GM,
    "E_GATHER_OPENER": GM, "E_QUORUM_THRESHOLD": GM, "E_FIRST_SUCCESS_TIE_BREAK": GM,
    "E_LATE_GATHER_CONTRIBUTION": GR, "E_GATHER_NOT_OPEN": GR, "E_GATHER_CLOSED": GR, "E_GATHER_RESULT_MISMATCH": GR,
    "E_TERMINAL_FENCE": FENCE, "E_SECOND_FENCE": FENCE, "E_POST_TERMINAL_MESSAGE": FENCE,
    "E_ACK_NOT_FENCE": ACKS,
    "E_CAUSATION_GAP": CAUSAL,
}

# a shape finding (E_SCHEMA) at a message's field: the rule of that field
_FIELD_RULE = {"seq": SEQ, "epoch": EPOCHS, "generation": EPOCHS, "scope": AUD, "sender": AUD, "recipients": AUD,
               "audienceLabels": AUD, "causedBy": CAUSAL, "gatherId": GM, "at": SNAP, "expiresAt": SNAP}

#: Every symptom these judges report (hint tables match on them).
SYMPTOMS = {
    "unreadable": "trace.json is missing, not UTF-8, not JSON or not an object",
    # validator findings on the student's own trace
    "snapshot-bounds": "a message after the conversation's deadline or its own expiry, or past the message ceiling",
    "duplicate-participant": "two participants share one ref",
    "not-closed": "an envelope with an unknown field, a missing required one, a value of the wrong type or an unknown "
                  "kind",
    "payload-digest": "a payloadDigest that is not the jcs-v2 digest of the payload the message carries",
    "bad-verification-ref": "a verificationRef that is empty or not of the form kind:value",
    "stale-epoch": "a message from another epoch than the conversation's",
    "stale-generation": "a message from another body generation than its sender's",
    "sequence-gap": "a sender's seq that is not the exact next of its own messages (a gap, a repeat or a later one "
                    "first)",
    "duplicate-id": "one message id used twice",
    "audience-scope": "a sender or recipient that is no participant, or a scope other than the conversation's",
    "audience-label": "a recipient that does not advertise every label the message declares",
    "gather-declaration": "a gather declared wrong: membership not sorted or not known, an unknown gather or opener, "
                          "a gather declared twice, a rule without what it needs",
    "contribution-refused": "a contribution from a non-member, a second one from a member, one before the opener, "
                            "after the result or after the deadline",
    "result-mismatch": "a recorded gather result that is not the reduction of the accepted contributions",
    "terminal-fence": "a terminal naming no FENCE, a second FENCE, or a message other than an acknowledgement after "
                      "the fence",
    "truth-or-authority-claimed": "a terminal claiming a truth or an authority effect (they stay NONE)",
    "post-terminal-ack": "an acknowledgement after the fence from outside the required set, or a second one",
    "ack-not-citing-fence": "an acknowledgement that does not cite the fence",
    "causation-gap": "a causedBy parent that is no earlier message of the trace",
    # the story
    "wrong-participants": "participants other than the story's author and two reviewers",
    "payload-missing": "a message without its payload, so nothing pins its payloadDigest",
    "opener-wrong": "the gather not opened by the author's first message, a REQUEST about the draft to both reviewers",
    "gather-shape": "not exactly one gather over both reviewers with rule ALL",
    "contribution-missing": "a reviewer without exactly one contribution to the gather",
    "decision-missing": "not exactly one GATHER_RESULT, from the author, for the gather",
    "result-unrecorded": "the gather's result not recorded, or recorded as something other than complete with both "
                         "reviewers",
    "gather-unresolved": "the gather is not complete, so the COMPLETED conversation is BLOCKED",
    "fence-missing": "not exactly one FENCE from the author to both reviewers, named by the terminal",
    "not-completed": "no terminal, or a terminal whose state is not COMPLETED",
    "required-acks-wrong": "requiredAcks not exactly both reviewers",
    "ack-missing": "a reviewer that never acknowledges the fence (the conversation is BLOCKED)",
    "ack-extra": "a reviewer acknowledging more than once, or someone else acknowledging",
    "ack-misplaced": "an acknowledgement before the fence, or not addressed to the fence's sender",
    "uncaused": "a message after the opening request that names no cause",
    "cause-not-earlier": "a cause that is not an earlier message",
    "chain-broken": "a message that does not lead back to the opening request, or a link of the story missing",
    # the mutations
    "mutation-lacks-structure": "a mutation of this rule needs a part the trace lacks (an ACK after the fence, a "
                                "gather with contributions, a decision, a recorded result, a terminal)",
    "mutation-not-rejected": "a mutation of this rule applied to the trace and the validator found nothing new",
}

_CODE_SYMPTOM = {
    "E_DUPLICATE_PARTICIPANT": "duplicate-participant", "E_MESSAGE_CEILING": "snapshot-bounds",
    "E_DEADLINE": "snapshot-bounds", "E_EXPIRED_MESSAGE": "snapshot-bounds", "E_UNKNOWN_KIND": "not-closed",
    "E_SCHEMA": "not-closed", "E_BAD_VERIFICATION_REF": "bad-verification-ref", "E_PAYLOAD_DIGEST": "payload-digest",
    "E_STALE_EPOCH": "stale-epoch", "E_STALE_GENERATION": "stale-generation", "E_DUPLICATE_MESSAGE": "duplicate-id",
    "E_SEQUENCE_GAP": "sequence-gap", "E_AUDIENCE_SCOPE": "audience-scope", "E_AUDIENCE_LABEL": "audience-label",
    "E_GATHER_MEMBERSHIP": "gather-declaration", "E_DUPLICATE_GATHER": "gather-declaration",
    "E_UNKNOWN_GATHER": "gather-declaration", "E_GATHER_OPENER": "gather-declaration",
    "E_QUORUM_THRESHOLD": "gather-declaration", "E_FIRST_SUCCESS_TIE_BREAK": "gather-declaration",
    "E_DUPLICATE_CONTRIBUTION": "contribution-refused", "E_LATE_GATHER_CONTRIBUTION": "contribution-refused",
    "E_GATHER_NOT_OPEN": "contribution-refused", "E_GATHER_CLOSED": "contribution-refused",
    "E_GATHER_RESULT_MISMATCH": "result-mismatch", "E_TERMINAL_FENCE": "terminal-fence",
    "E_SECOND_FENCE": "terminal-fence", "E_POST_TERMINAL_MESSAGE": "terminal-fence",
    "E_ACK_NOT_FENCE": "ack-not-citing-fence", "E_CAUSATION_GAP": "causation-gap",
}

# What a mutation finds in the trace to break (see sim/protocol/mutate.py): the structures it needs.
_ACK, _ACK2, _FENCE, _TERM = "ack", "ack-sender-twice", "fence", "terminal"
_GATHER, _CONTRIB, _RESULT_MSG, _RECORDED, _OUTSIDER = "gather", "contribution", "result-message", "recorded", "outsider"
_COMPLETED = "completed"
STRUCTURES = {
    _ACK: "an ACK after the fence",
    _ACK2: "an earlier message from the last ACK's sender (its ACK must not be its first message)",
    _FENCE: "a FENCE message named by terminal.fence",
    _TERM: "a terminal",
    _GATHER: "a gather",
    _CONTRIB: "a CONTRIBUTION to the first gather",
    _RESULT_MSG: "a GATHER_RESULT message for the first gather",
    _RECORDED: "a recorded result on the first gather (gathers[0].result)",
    _OUTSIDER: "a participant outside the gather's membership",
    _COMPLETED: "a terminal that declares COMPLETED (a mutation that must turn COMPLETED into BLOCKED proves "
                "nothing otherwise)",
}
# a structure that only matters once the one it hangs from is there
_INSIDE = {_ACK2: _ACK, _FENCE: _TERM, _CONTRIB: _GATHER, _RESULT_MSG: _GATHER, _RECORDED: _GATHER, _OUTSIDER: _GATHER}
_NEEDS: dict[str, tuple[str, ...]] = {
    "swap-messages-of-one-sender": (_ACK, _ACK2),
    "message-after-fence": (_ACK, _TERM, _FENCE),
    "ack-not-citing-fence": (_ACK, _TERM, _FENCE),
    "drop-required-ack": (_ACK, _TERM, _FENCE, _COMPLETED),
    "ack-from-outside-required-set": (_ACK, _TERM, _FENCE),
    "second-fence": (_ACK, _TERM, _FENCE),
    "terminal-fence-not-a-fence": (_TERM,),
    "truth-effect-not-none": (_TERM,),
    "authority-effect-not-none": (_TERM,),
    "late-gather-contribution": (_GATHER, _CONTRIB),
    "contribution-from-non-member": (_GATHER, _CONTRIB),
    "unknown-gather": (_GATHER, _CONTRIB),
    "duplicate-contribution": (_GATHER, _CONTRIB),
    "unresolved-gather-at-completed": (_GATHER, _CONTRIB, _COMPLETED),
    "contribution-after-result": (_GATHER, _CONTRIB, _RESULT_MSG),
    "contribution-before-opener": (_GATHER, _RESULT_MSG),
    "second-gather-result": (_GATHER, _RESULT_MSG),
    "recorded-result-mismatch": (_GATHER, _RECORDED),
    "membership-changed": (_GATHER, _OUTSIDER),
    "membership-not-sorted": (_GATHER,),
    "quorum-without-threshold": (_GATHER,),
    "quorum-threshold-too-high": (_GATHER,),
    "first-success-without-tie-break": (_GATHER,),
    "unknown-gather-opener": (_GATHER,),
    "gather-declared-twice": (_GATHER,),
    "message-ceiling-exceeded": (),
    "duplicate-participant": (),
}


# --------------------------------------------------------------------------- reading


def _read(sub: Path):
    """``(trace, None)``, or ``(None, Judged)`` when the file is not a JSON object."""
    path = sub / _FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, failed("trace.json is missing: copy the starter back with protolab exercise start 6")
    except OSError as e:
        return None, failed(f"trace.json cannot be read: {e.strerror or e}")
    return _parse(raw)


def _parse(raw: bytes):
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        return None, failed(f"trace.json is not UTF-8 text ({e.reason} at byte {e.start})")

    from ...errors import InputError
    from ...protocol import loads_trace

    try:  # read as 'protolab trace validate' reads it: a repeated key or a NaN is refused, never "the last wins"
        trace = loads_trace(text, "trace.json")
    except InputError as e:
        return None, failed(f"{e.message} ({e.code}, as protolab trace validate says)", reproduce=_VALIDATE)
    if not isinstance(trace, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(trace), "a number")
        return None, failed(f"trace.json holds {kind}, not the trace object {{\"schema\": ..., \"messages\": [...]}}",
                            reproduce=_VALIDATE)
    return trace, None


def _s(v) -> str | None:
    return v if isinstance(v, str) else None


def _list(v) -> list:
    return v if isinstance(v, list) else []


def _strs(v) -> list[str]:
    """The strings of a JSON array (other items ignored); [] for anything else."""
    return [x for x in _list(v) if isinstance(x, str)]


def _messages(trace: dict) -> list[dict]:
    return [m for m in _list(trace.get("messages")) if isinstance(m, dict)]


def _gathers(trace: dict) -> list[dict]:
    return [g for g in _list(trace.get("gathers")) if isinstance(g, dict)]


def _terminal(trace: dict) -> dict:
    t = trace.get("terminal")
    return t if isinstance(t, dict) else {}


def _short(v, limit: int = 60) -> str:
    """A student's value as it reads in a message, cut short: a file may hold anything."""
    text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _r(v) -> str:
    """A student's value quoted (strings) or written as JSON, cut short."""
    return _short(repr(v) if isinstance(v, str) else v)


def _name(m: dict) -> str:
    return _short(m["id"]) if _s(m.get("id")) else "a message without an id"


def _names(items, most: int = 6) -> str:
    items = [_short(str(x)) for x in items]
    if not items:
        return "nobody"
    return ", ".join(items[:most]) + (f" and {len(items) - most} more" if len(items) > most else "")


def _mentions(value, word: str, depth: int = 0) -> bool:
    """Whether ``word`` appears in a string anywhere inside a JSON value."""
    if depth > 20:
        return False
    if isinstance(value, str):
        return word in value
    if isinstance(value, dict):
        return any(_mentions(v, word, depth + 1) for v in value.values())
    if isinstance(value, list):
        return any(_mentions(v, word, depth + 1) for v in value)
    return False


# --------------------------------------------------------------------------- one reading per submission


class _Loaded:
    """One reading of a submission's trace: the trace, the validator's report, the findings by rule,
    the structures the mutations need, and each mutation's verdict (worked out when first asked)."""

    def __init__(self, trace: dict, report):
        self.trace = trace
        self.report = report
        self.msgs = _messages(trace)
        self.base = Counter(_finding_key(f) for f in report.errors)
        self.by_rule: dict[str, list] = {}
        self.routed: set[str | None] = set()  # the rules the trace's findings belong to (None: a consequence)
        for f in report.errors:
            r = rule_of(f, trace, report)
            self.routed.add(r)
            if r is not None:
                self.by_rule.setdefault(r, []).append(f)
        self.have = _structures(trace, report)
        self.verdicts: dict[str, dict] = {}

    def verdict(self, name: str) -> dict:
        if name not in self.verdicts:
            self.verdicts[name] = _mutation_verdict(self, name)
        return self.verdicts[name]


_CACHE: dict[tuple, "_Loaded | Judged"] = {}
_CACHE_SIZE = 16


def _load(sub: Path) -> "_Loaded | Judged":
    """The submission's trace read, validated and kept for its other tests (a Judged when it cannot be
    read or the validator itself fails on it)."""
    path = Path(sub) / _FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return failed("trace.json is missing: copy the starter back with protolab exercise start 6")
    except OSError as e:
        return failed(f"trace.json cannot be read: {e.strerror or e}")
    key = (str(path.resolve()), hashlib.sha256(raw).hexdigest())
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    trace, bad = _parse(raw)
    if bad is not None:
        out: _Loaded | Judged = bad
    else:
        from ...protocol.trace import validate

        try:
            out = _Loaded(trace, validate(trace))
        except RecursionError:
            out = failed("trace.json nests too deep for the validator", reproduce=_VALIDATE)
        except Exception as e:  # a validator bug must not become a student's traceback  # noqa: BLE001
            out = failed(f"the validator could not read this trace ({type(e).__name__}: {e}); "
                         "check it against sim/protocol/conversation-trace-v2.schema.json", reproduce=_VALIDATE)
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.clear()
    _CACHE[key] = out
    return out


# --------------------------------------------------------------------------- findings by rule


def _finding_key(f) -> tuple:
    """A finding, wherever its message sits (a mutation that inserts a message shifts the indices)."""
    return f.code, f.message_id, re.sub(r"^/messages/\d+", "/messages/*", f.pointer or "")


def _at(trace: dict, parts: list[str]):
    """The value at a JSON pointer's parts, or None."""
    v = trace
    for p in parts:
        if isinstance(v, dict):
            v = v.get(p)
        elif isinstance(v, list) and p.isdigit() and int(p) < len(v):
            v = v[int(p)]
        else:
            return None
    return v


def rule_of(f, trace: dict, report=None) -> str | None:
    """The rule a validator finding on the student's trace belongs to; None for a consequence of
    another rule's finding: a causedBy parent that exists earlier in the file but was rejected, or
    (given the ``report``) a recorded gather result that differs from the reduction only because the
    gather's declaration was refused or a contribution to it was rejected for another reason."""
    code = f.code
    parts = (f.pointer or "").split("/")[1:]
    head = parts[0] if parts else ""
    if code == "E_GATHER_RESULT_MISMATCH" and report is not None and head == "gathers" and len(parts) > 1:
        return None if _result_cascade(trace, report, parts[1]) else GR
    if code == "E_CAUSATION_GAP" and head == "messages" and len(parts) >= 4 and parts[1].isdigit():
        i = int(parts[1])
        parent = _at(trace, parts[:4])
        msgs = _list(trace.get("messages"))
        if isinstance(parent, str) and any(isinstance(m, dict) and m.get("id") == parent for m in msgs[:i]):
            return None  # an earlier message of the trace, rejected for its own reason: that rule's
        return CAUSAL
    if code == "E_SEQUENCE_GAP" and head == "messages" and len(parts) > 1 and parts[1].isdigit():
        return None if _seq_cascade(trace, int(parts[1])) else SEQ
    if code == "E_POST_TERMINAL_MESSAGE":
        m = _at(trace, parts[:2]) if head == "messages" else None
        return ACKS if isinstance(m, dict) and m.get("kind") == "ACK" else FENCE
    if code == "E_AUDIENCE_SCOPE" and parts[:2] == ["terminal", "requiredAcks"]:
        return ACKS
    if code != "E_SCHEMA":
        return CODE_RULE.get(code, CLOSED)
    if head == "terminal":
        return ACKS if len(parts) > 1 and parts[1] == "requiredAcks" else FENCE
    if head == "gathers":
        return GR if len(parts) > 2 and parts[2] == "result" else GM
    if head == "participants":
        if len(parts) > 2 and parts[2] in ("generation", "earlierGenerations"):
            return EPOCHS
        if len(parts) > 2 and parts[2] == "audiences":
            return AUD
        return SNAP
    if head in ("epoch",):
        return EPOCHS
    if head == "scope":
        return AUD
    if head in ("deadline", "messageCeiling"):
        return SNAP
    if head == "messages" and len(parts) > 2:
        return _FIELD_RULE.get(parts[2], CLOSED)
    return CLOSED


def _seq_cascade(trace: dict, i: int) -> bool:
    """Whether message ``i``'s seq is the exact next of its sender's messages written before it (the
    gap then comes from an earlier message of the sender rejected for another rule's reason)."""
    msgs = _list(trace.get("messages"))
    m = msgs[i] if i < len(msgs) else None
    if not isinstance(m, dict) or not isinstance(m.get("seq"), int) or isinstance(m.get("seq"), bool):
        return False
    mine = [x for x in msgs[:i] if isinstance(x, dict) and x.get("sender") == m.get("sender")
            and x.get("generation") == m.get("generation")]
    return [x.get("seq") for x in mine] == list(range(1, len(mine) + 1)) and m["seq"] == len(mine) + 1 and \
        len({x.get("id") for x in mine + [m]}) == len(mine) + 1


def _result_cascade(trace: dict, report, index: str) -> bool:
    """Whether gather ``index``'s recorded result mismatches only because of another rule's finding."""
    gathers = _list(trace.get("gathers"))
    if not index.isdigit() or int(index) >= len(gathers) or not isinstance(gathers[int(index)], dict):
        return False
    g = gathers[int(index)]
    mine = f"/gathers/{index}"
    if any(e.code != "E_GATHER_RESULT_MISMATCH" and (e.pointer == mine or (e.pointer or "").startswith(mine + "/"))
           for e in report.errors):
        return True  # the declaration itself was refused: no reduction to compare with
    at = set(report.accepted_positions)
    contribs = [(i, m) for i, m in enumerate(_list(trace.get("messages")))
                if isinstance(m, dict) and m.get("kind") == "CONTRIBUTION" and m.get("gatherId") == g.get("id")]
    if all(i in at for i, _ in contribs):
        return False
    from ...protocol.trace import evaluate_gather

    try:  # the reduction had every contribution been accepted: the student's record is right if it matches
        return evaluate_gather(g, [m for _, m in contribs]).to_json() == g.get("result")
    except Exception:  # noqa: BLE001 - a malformed gather: the recorded result is its own rule's problem
        return False


def _symptom(f) -> str:
    if f.code == "E_SCHEMA" and (f.pointer or "") in ("/terminal/truthEffect", "/terminal/authorityEffect"):
        return "truth-or-authority-claimed"
    return _CODE_SYMPTOM.get(f.code, "not-closed")


def _finding_broke(f, trace: dict) -> Broke:
    where = _short(f.message_id) if f.message_id else (f.pointer or "/")
    sym = _symptom(f)
    if f.code == "E_POST_TERMINAL_MESSAGE" and rule_of(f, trace) == ACKS:
        sym = "post-terminal-ack"
    return Broke(f"{f.code} at {where}", f"the validator rejects it: {_short(f.message, 240)}", symptoms=(sym,),
                 reproduce=_VALIDATE, signature={"case": f.code, "problem": sym})


# --------------------------------------------------------------------------- structures and mutations


def _structures(trace: dict, report) -> set[str]:
    """The structures of the trace that the mutations find and break."""
    msgs = _messages(trace)
    have: set[str] = set()
    acks = [m for m in msgs if m.get("kind") == "ACK"]
    if acks:
        have.add(_ACK)
        if sum(1 for m in msgs if m.get("sender") == acks[-1].get("sender")) >= 2:
            have.add(_ACK2)
    term = trace.get("terminal")
    if isinstance(term, dict):
        have.add(_TERM)
        if any(m.get("id") == term.get("fence") and m.get("kind") == "FENCE" for m in msgs):
            have.add(_FENCE)
    gathers = _gathers(trace)
    if gathers:
        g = gathers[0]
        have.add(_GATHER)
        if any(m.get("kind") == "CONTRIBUTION" and m.get("gatherId") == g.get("id") for m in msgs):
            have.add(_CONTRIB)
        if any(m.get("kind") == "GATHER_RESULT" and m.get("gatherId") == g.get("id") for m in msgs):
            have.add(_RESULT_MSG)
        if isinstance(g.get("result"), dict):
            have.add(_RECORDED)
        members = set(_strs(g.get("membership")))
        if any(isinstance(p, dict) and _s(p.get("ref")) not in members for p in _list(trace.get("participants"))):
            have.add(_OUTSIDER)
    if isinstance(term, dict) and term.get("state") == "COMPLETED":
        have.add(_COMPLETED)
    return have


def _blockers(trace: dict, report) -> tuple[set, set]:
    """What keeps a COMPLETED terminal from completing: the required participants whose
    acknowledgement of the fence was not accepted, and the gathers that are not complete."""
    term = _terminal(trace)
    fence = term.get("fence")
    at = set(report.accepted_positions)
    acked = {m.get("sender") for i, m in enumerate(_list(trace.get("messages")))
             if i in at and isinstance(m, dict) and m.get("kind") == "ACK" and fence in _list(m.get("causedBy"))}
    missing = {r for r in _strs(term.get("requiredAcks")) if r not in acked}
    return missing, {g for g, r in report.gathers.items() if r.status != "complete"}


def _mutation_verdict(ld: _Loaded, name: str) -> dict:
    """Whether the mutation ``name``, applied to the trace, is rejected: its expected code among the
    findings the mutated trace has beyond the trace's own (for a mutation that must stay valid: no
    new finding, and a trace that closed COMPLETED now BLOCKED)."""
    from ...protocol.mutate import MUTATIONS
    from ...protocol.trace import validate

    mu = next((m for m in MUTATIONS if m.name == name), None)
    if mu is None:
        return {"ok": False, "why": "is no mutation of the suite"}
    needs = _NEEDS.get(name, (_ACK,))
    lacking = tuple(x for x in needs if x not in ld.have and _INSIDE.get(x) not in set(needs) - ld.have)
    try:
        mutated = mu.apply(ld.trace)
        # payload digests are recomputed only where the mutation changes a payload (the others copy them)
        rep = validate(mutated, check_payload_digests=mu.expected_code == "E_PAYLOAD_DIGEST")
    except RecursionError:
        return {"ok": False, "lacking": lacking, "why": "the trace nests too deep to mutate"}
    except Exception as e:  # noqa: BLE001 - the mutation finds nothing to break in this trace
        return {"ok": False, "lacking": lacking, "unapplied": True,
                "why": f"it cannot be applied to your trace ({type(e).__name__}): the trace lacks or misshapes the parts "
                       "it breaks"}
    new = Counter(_finding_key(f) for f in rep.errors) - ld.base
    if mu.expected_code is not None:
        ok = any(k[0] == mu.expected_code for k in new)
        want = mu.expected_code
    else:  # a new blocker (an acknowledgement missing, a gather unresolved), BLOCKED and nothing else new
        before, after = _blockers(ld.trace, ld.report), _blockers(mutated, rep)
        grew = after[0] > before[0] or after[1] > before[1]
        ok = not new and rep.terminal_if_valid == mu.expected_terminal and _COMPLETED in ld.have and grew
        want = f"a {mu.expected_terminal} conversation and no new finding"
    got = ", ".join(dict.fromkeys(k[0] for k in new)) or (
        f"nothing new (the conversation {rep.terminal_if_valid or 'open'})" if mu.expected_code else
        f"a {rep.terminal_if_valid or 'open'} conversation")
    return {"ok": ok, "lacking": () if ok else lacking, "why": "" if ok else f"expected {want}, got {got}",
            "produced": list(dict.fromkeys(k[0] for k in new)), "terminal": rep.terminal_if_valid}


def _mutation_brokes(ld: _Loaded, names: list[str], rule_name: str) -> list[Broke]:
    from ...protocol.mutate import MUTATIONS

    rules = {m.name: m.rule for m in MUTATIONS}
    out = []
    for name in names:
        v = ld.verdict(name)
        if v["ok"]:
            continue
        if not v.get("lacking") and not v.get("unapplied") and ld.routed - {rule_name} and \
                not any(CODE_RULE.get(c) == rule_name for c in v.get("produced", ())):
            # masked: what the mutation breaks is rejected already, for another rule's reason (which fails
            # that rule); it shows nothing about this one
            continue
        if v.get("lacking"):
            need = " and ".join(STRUCTURES[x] for x in v["lacking"])
            out.append(Broke(f"mutation {name}", f"it needs {need}, which your trace lacks, so nothing shows that "
                                                 f"\"{rules.get(name, name)}\" is enforced",
                             symptoms=("mutation-lacks-structure",), reproduce=_DIAGRAM,
                             signature={"case": name, "rule": rules.get(name, ""), "problem": "lacks"}))
        else:
            out.append(Broke(f"mutation {name}", f"\"{rules.get(name, name)}\" broken in your trace is not rejected: "
                                                 f"{v['why']}", symptoms=("mutation-not-rejected",), reproduce=_MUTATE,
                             signature={"case": name, "rule": rules.get(name, ""), "problem": "not-rejected"}))
    return out


# --------------------------------------------------------------------------- the story, rule by rule


def _first_ids(msgs: list[dict]) -> dict[str, int]:
    pos: dict[str, int] = {}
    for i, m in enumerate(msgs):
        if _s(m.get("id")) is not None:
            pos.setdefault(m["id"], i)
    return pos


def _story_snapshot(ld: _Loaded) -> list[Broke]:
    refs = sorted(str(p.get("ref")) for p in _list(ld.trace.get("participants")) if isinstance(p, dict))
    if sorted(set(refs)) != PARTICIPANTS:
        return [Broke("the participants", f"they are {_names(refs)}; this story has exactly {AUTHOR}, {RA} and {RB} "
                                          "(the example in data/traces tells another story)",
                      symptoms=("wrong-participants",), reproduce=_DIAGRAM)]
    return []


def _story_closed(ld: _Loaded) -> list[Broke]:
    bare = [_name(m) for m in ld.msgs if not isinstance(m.get("payload"), dict)]
    if bare:
        return [Broke("every message carries its payload",
                      f"{_names(bare, 4)} carr{'ies' if len(bare) == 1 else 'y'} no payload, so nothing pins "
                      f"{'its' if len(bare) == 1 else 'their'} payloadDigest: write each payload and its jcs-v2 digest",
                      symptoms=("payload-missing",), reproduce=_VALIDATE)]
    return []


def _story_gather_membership(ld: _Loaded) -> list[Broke]:
    out = []
    gathers = _gathers(ld.trace)
    g = gathers[0] if gathers else {}
    gid = _s(g.get("id"))
    problem = None
    if len(gathers) != 1:
        problem = f"the story has exactly one gather; the trace declares {len(gathers)}"
    elif _strs(g.get("membership")) != REVIEWERS or len(_list(g.get("membership"))) != 2:
        problem = (f"gather {_short(gid)}'s membership is {_r(g.get('membership'))}; the verdicts come from exactly "
                   "the two reviewers, listed in sorted order")
    elif g.get("rule") != "ALL":
        problem = (f"gather {_short(gid)}'s rule is {_r(g.get('rule'))}; the draft is decided only when both "
                   "verdicts are in")
    if problem:
        out.append(Broke("one gather over both reviewers", problem, symptoms=("gather-shape",), reproduce=_DIAGRAM))
    msgs = ld.msgs
    req = msgs[0] if msgs else {}
    rid = _s(req.get("id"))
    problem = None
    if not msgs:
        problem = "the trace has no messages"
    elif req.get("kind") != "REQUEST" or req.get("sender") != AUTHOR:
        problem = (f"the conversation must open with the author's REQUEST; its first message {_name(req)} is a "
                   f"{_short(req.get('kind'))} from {_short(req.get('sender'))}")
    elif sorted(set(_strs(req.get("recipients")))) != REVIEWERS:
        problem = (f"the request {_short(rid)} opens a gather over both reviewers, so it goes to both; it goes to "
                   f"{_names(_strs(req.get('recipients')))}")
    elif not isinstance(req.get("payload"), dict) or not _mentions(req.get("payload"), DRAFT):
        problem = f"the request {_short(rid)} must carry a payload that names the draft {DRAFT}"
    elif gathers and g.get("opener") != rid:
        problem = f"gather {_short(gid)} must be opened by the author's request {_short(rid)}; its opener is {_r(g.get('opener'))}"
    if problem:
        out.append(Broke("the request that opens the gather", problem, symptoms=("opener-wrong",), reproduce=_DIAGRAM))
    return out


def _story_gather_result(ld: _Loaded) -> list[Broke]:
    out = []
    msgs = ld.msgs
    gathers = _gathers(ld.trace)
    g = gathers[0] if gathers else {}
    gid = _s(g.get("id"))
    contribs = [m for m in msgs if m.get("kind") == "CONTRIBUTION"]
    problem = None
    stray = [m for m in contribs if gid is None or m.get("gatherId") != gid]
    if not gathers:
        problem = "there is no gather to contribute to"
    elif stray:
        problem = f"{_name(stray[0])} is a CONTRIBUTION that names gather {_r(stray[0].get('gatherId'))}, not {_short(gid)}"
    else:
        for r in REVIEWERS:
            n = sum(1 for m in contribs if m.get("sender") == r)
            if n != 1:
                problem = (f"{r} sends {'no CONTRIBUTION' if n == 0 else f'{n} CONTRIBUTIONs'} to {_short(gid)}; "
                           "each reviewer sends exactly one verdict")
                break
        others = sorted({str(m.get("sender")) for m in contribs if m.get("sender") not in REVIEWERS})
        if problem is None and others:
            problem = f"only the reviewers contribute; {_names(others)} sends a CONTRIBUTION"
    if problem:
        out.append(Broke("one verdict from each reviewer", problem, symptoms=("contribution-missing",),
                         reproduce=_DIAGRAM))
    results = [m for m in msgs if m.get("kind") == "GATHER_RESULT"]
    problem = None
    if len(results) != 1:
        problem = f"the author records the decision once, as one GATHER_RESULT; the trace has {len(results)}"
    elif results[0].get("sender") != AUTHOR:
        problem = f"the decision {_name(results[0])} is sent by {_short(results[0].get('sender'))}; the author decides"
    elif gid is None or results[0].get("gatherId") != gid:
        problem = f"the decision {_name(results[0])} must name the gather {_short(gid)} in gatherId"
    if problem:
        out.append(Broke("the author's decision", problem, symptoms=("decision-missing",), reproduce=_DIAGRAM))
    rec = g.get("result")
    problem = None
    if gathers and not isinstance(rec, dict):
        problem = (f"gather {_short(gid)} does not record its result: copy what protolab trace validate trace.json "
                   f"--json prints under gathers.{_short(gid)} into the gather's \"result\"")
    elif gathers and (rec.get("status") != "complete" or _strs(rec.get("contributors")) != REVIEWERS):
        problem = (f"gather {_short(gid)}'s recorded result is {_r(rec.get('status'))} with contributors "
                   f"{_names(_strs(rec.get('contributors')))}; with both verdicts in, it is complete")
    if problem:
        out.append(Broke("the gather's recorded result", problem, symptoms=("result-unrecorded",), reproduce=_VALIDATE))
    got = ld.report.gathers.get(gid) if gid is not None else None
    at = set(ld.report.accepted_positions)
    rejected = [m for i, m in enumerate(_list(ld.trace.get("messages"))) if i not in at and isinstance(m, dict)
                and m.get("kind") == "CONTRIBUTION"]  # rejected for another rule's reason: that rule's
    if gathers and got is not None and got.status != "complete" and not out and not rejected:
        out.append(Broke("the gather resolves", f"gather {_short(gid)} is {got.status}"
                                                + (f", missing {_names(got.missing)}" if got.missing else "")
                                                + ": the conversation cannot complete on it (it is BLOCKED)",
                         symptoms=("gather-unresolved",), reproduce=_VALIDATE))
    return out


def _fence_of(ld: _Loaded):
    fences = [(i, m) for i, m in enumerate(ld.msgs) if m.get("kind") == "FENCE"]
    term = _terminal(ld.trace)
    named = [(i, m) for i, m in fences if m.get("id") == term.get("fence")]
    return (named or fences or [(None, {})])[0], fences


def _story_fence(ld: _Loaded) -> list[Broke]:
    (_, fence), fences = _fence_of(ld)
    fid = _s(fence.get("id"))
    term = _terminal(ld.trace)
    problem = None
    if len(fences) != 1:
        problem = f"the author closes the conversation with one FENCE; the trace has {len(fences)}"
    elif fence.get("sender") != AUTHOR:
        problem = f"the fence {_short(fid)} is sent by {_short(fence.get('sender'))}; the author closes the conversation"
    elif sorted(set(_strs(fence.get("recipients")))) != REVIEWERS:
        problem = (f"the fence {_short(fid)} must reach both reviewers, who acknowledge it; it goes to "
                   f"{_names(_strs(fence.get('recipients')))}")
    elif term and (fid is None or term.get("fence") != fid):
        problem = f"terminal.fence must name the fence {_short(fid)}; it is {_r(term.get('fence'))}"
    out = []
    if not isinstance(ld.trace.get("terminal"), dict):
        out.append(Broke("the terminal", "the trace has no terminal: the conversation is still open; add one naming "
                                         "the fence, state COMPLETED", symptoms=("not-completed",), reproduce=_VALIDATE))
    elif term.get("state") != "COMPLETED":
        out.append(Broke("the terminal", f"terminal.state is {_r(term.get('state'))}; the review ended normally",
                         symptoms=("not-completed",), reproduce=_VALIDATE))
    if problem:
        out.append(Broke("the author's fence", problem, symptoms=("fence-missing",), reproduce=_DIAGRAM))
    return out


def _story_acks(ld: _Loaded) -> list[Broke]:
    out = []
    term = _terminal(ld.trace)
    if term and (sorted(set(_strs(term.get("requiredAcks")))) != REVIEWERS or len(_list(term.get("requiredAcks"))) != 2):
        out.append(Broke("who must acknowledge", f"terminal.requiredAcks is {_r(term.get('requiredAcks'))}; both "
                                                 "reviewers receive the fence and each must confirm it",
                         symptoms=("required-acks-wrong",), reproduce=_VALIDATE))
    (fence_at, fence), _ = _fence_of(ld)
    fid = _s(fence.get("id"))
    pos = _first_ids(ld.msgs)
    acks = [m for m in ld.msgs if m.get("kind") == "ACK"]
    for r in REVIEWERS:
        mine = [m for m in acks if m.get("sender") == r]
        problem, sym = None, "ack-misplaced"
        if not mine:
            problem, sym = f"{r} never acknowledges the fence: the conversation is BLOCKED, not COMPLETED", "ack-missing"
        elif len(mine) > 1:
            problem, sym = f"{r} acknowledges {len(mine)} times ({_names(_name(m) for m in mine)}); once is a receipt", \
                "ack-extra"
        elif fid is None or fid not in _strs(mine[0].get("causedBy")):
            problem = (f"{_name(mine[0])}, {r}'s ACK, cites {_names(_strs(mine[0].get('causedBy')))} in causedBy; an "
                       f"acknowledgement of the fence cites the fence {_short(fid)}")
            sym = "ack-not-citing-fence"
        elif fence_at is None or pos.get(_s(mine[0].get("id")) or "", -1) < fence_at:
            problem = f"{_name(mine[0])}, {r}'s ACK, comes before the fence {_short(fid)}; it acknowledges the fence, so it follows it"
        elif fence.get("sender") not in _strs(mine[0].get("recipients")):
            problem = (f"{_name(mine[0])}, {r}'s ACK, goes to {_names(_strs(mine[0].get('recipients')))}; a receipt "
                       f"goes back to whoever sent the fence, {_short(fence.get('sender'))}")
        if problem:
            out.append(Broke(f"{r}'s acknowledgement", problem, symptoms=(sym,), reproduce=_DIAGRAM))
    others = sorted({str(m.get("sender")) for m in acks if m.get("sender") not in REVIEWERS})
    if others:
        out.append(Broke("who acknowledges", f"only the reviewers acknowledge the fence; {_names(others)} sends an ACK",
                         symptoms=("ack-extra",), reproduce=_DIAGRAM))
    return out


def _story_causal(ld: _Loaded) -> list[Broke]:
    msgs = ld.msgs
    if not msgs:
        return [Broke("the conversation", "the trace has no messages", symptoms=("chain-broken",))]
    ids = [_s(m.get("id")) for m in msgs]
    pos = _first_ids(msgs)
    causes = [_strs(m.get("causedBy")) for m in msgs]
    out = []
    uncaused = [_name(m) for i, m in enumerate(msgs) if i > 0 and not causes[i]]
    if uncaused:
        out.append(Broke("every message after the opening request names its cause",
                         f"{_names(uncaused)} name{'s' if len(uncaused) == 1 else ''} no cause in causedBy",
                         symptoms=("uncaused",), reproduce=_DIAGRAM))
    late = [f"{_name(msgs[i])} cites {_short(c)}" for i in range(len(msgs)) for c in causes[i] if pos.get(c, len(msgs)) >= i]
    if late:
        out.append(Broke("every cause is an earlier message", f"{'; '.join(late[:3])}, which is not an earlier message "
                                                              "of the trace", symptoms=("cause-not-earlier",),
                         reproduce=_DIAGRAM))
    root = ids[0]
    reach = {root} if root is not None else set()
    for i in range(1, len(msgs)):
        if ids[i] is not None and any(c in reach and pos.get(c, i) < i for c in causes[i]):
            reach.add(ids[i])
    loose = [_name(m) for i, m in enumerate(msgs) if ids[i] not in reach]
    if loose:
        out.append(Broke("every message leads back to the opening request",
                         f"{_names(loose)} do{'es' if len(loose) == 1 else ''} not lead back to the opening request "
                         f"{_short(root)} through causedBy", symptoms=("chain-broken",), reproduce=_DIAGRAM))
    gathers = _gathers(ld.trace)
    g = gathers[0] if gathers else {}
    gid, opener = _s(g.get("id")), _s(g.get("opener"))
    contribs = [(i, m) for i, m in enumerate(msgs) if m.get("kind") == "CONTRIBUTION"]
    if gathers and contribs:
        off = [_name(m) for i, m in contribs if opener is None or opener not in causes[i]]
        if off:
            out.append(Broke("each verdict answers the request", f"{_names(off)} must cite the gather's opener "
                                                                  f"{_short(opener)} in causedBy", symptoms=("chain-broken",),
                             reproduce=_DIAGRAM))
    results = [(i, m) for i, m in enumerate(msgs) if m.get("kind") == "GATHER_RESULT"]
    if results:
        i, d = results[0]
        for r in REVIEWERS:
            theirs = [_s(m.get("id")) for _, m in contribs if m.get("sender") == r and m.get("gatherId") == gid]
            if theirs and not any(c in causes[i] for c in theirs):
                out.append(Broke("the decision cites each verdict", f"the decision {_name(d)} does not cite {r}'s "
                                                                      f"contribution {_short(theirs[0])} in causedBy",
                                 symptoms=("chain-broken",), reproduce=_DIAGRAM))
                break
    (fence_at, fence), _ = _fence_of(ld)
    if fence_at is not None and results and _s(results[0][1].get("id")) not in causes[fence_at]:
        out.append(Broke("the fence cites the decision", f"the fence {_name(fence)} does not cite the decision "
                                                          f"{_name(results[0][1])} in causedBy", symptoms=("chain-broken",),
                         reproduce=_DIAGRAM))
    return out


_STORY = {SNAP: _story_snapshot, CLOSED: _story_closed, GM: _story_gather_membership, GR: _story_gather_result,
          FENCE: _story_fence, ACKS: _story_acks, CAUSAL: _story_causal}

_HELD = {
    SNAP: "the snapshot binds the story's three participants once each, and every message is within the "
          "conversation's bounds",
    CLOSED: "every envelope is closed and carries its payload under its jcs-v2 digest",
    EPOCHS: "every message carries the conversation's epoch and its sender's body generation",
    SEQ: "each sender numbers its own messages without a gap or a repeat",
    AUD: "every message stays within the conversation's scope and its recipients' audiences",
    GM: "one gather, opened by the request and frozen over both reviewers",
    GR: "the gather waits for both verdicts and records their reduction once",
    FENCE: "one fence closes the conversation, claiming no truth and no authority",
    ACKS: "both reviewers acknowledge the fence once, after it, citing it",
    CAUSAL: "every message follows, through causedBy, from the opening request, each after what it answers",
}


#: The judge of each rule (its reproduce lines judge that rule again, alone).
_JUDGE = {SNAP: "snapshot", CLOSED: "closed_envelopes", EPOCHS: "epochs", SEQ: "sequence", AUD: "audiences",
          GM: "gather_membership", GR: "gather_result", FENCE: "terminal_fence", ACKS: "acknowledgements",
          CAUSAL: "causal_chain"}


def _again(rule_name: str, mutations=()) -> str:
    """The reproduce line of a part of the story the trace misses, or of a mutation it lacks the
    structure for: validate and the diagram show the trace, not what it misses, so the rule is judged
    again."""
    return rerun_line(6, f"trace.{_JUDGE[rule_name]}", {"mutations": list(mutations)})


def _judge_rule(sub: Path, args: dict, rule_name: str) -> Judged:
    ld = _load(sub)
    if isinstance(ld, Judged):
        return Judged(0.0, ld.message, reproduce=ld.reproduce, signature={"symptoms": ["unreadable"]})
    broke: list[Broke] = [_finding_broke(f, ld.trace) for f in ld.by_rule.get(rule_name, [])]
    story = _STORY.get(rule_name)
    parts = story(ld) if story is not None else []
    # the story's parts are not the validator's findings: a valid trace can miss them, so validate or a diagram
    # would show nothing wrong; the rule is judged again
    broke += [replace(b, reproduce=_again(rule_name)) for b in parts]
    names = [n for n in (args.get("mutations") or ()) if isinstance(n, str)]
    broke += [replace(b, reproduce=_again(rule_name, [b.signature["case"]])) if b.reproduce == _DIAGRAM else b
              for b in _mutation_brokes(ld, names, rule_name)]
    checked = 1 + (1 if story is not None else 0) + len(names)
    return rule(checked, broke, _HELD[rule_name])


def snapshot(sub: Path, args: dict) -> Judged:
    """The bound snapshot: the story's participants once each; deadline, ceiling and expiry hold."""
    return _judge_rule(sub, args, SNAP)


def closed_envelopes(sub: Path, args: dict) -> Judged:
    """The closed language: known kinds and fields, payloads under their jcs-v2 digests, verification refs."""
    return _judge_rule(sub, args, CLOSED)


def epochs(sub: Path, args: dict) -> Judged:
    """Every message carries the conversation's epoch and its sender's current body generation."""
    return _judge_rule(sub, args, EPOCHS)


def sequence(sub: Path, args: dict) -> Judged:
    """Each sender numbers its own messages 1, 2, 3 in file order; no message id repeats."""
    return _judge_rule(sub, args, SEQ)


def audiences(sub: Path, args: dict) -> Judged:
    """Senders and recipients are participants, the scope is the conversation's, labels are advertised."""
    return _judge_rule(sub, args, AUD)


def gather_membership(sub: Path, args: dict) -> Judged:
    """One gather over exactly both reviewers, rule ALL, frozen when the author's request opens it."""
    return _judge_rule(sub, args, GM)


def gather_result(sub: Path, args: dict) -> Judged:
    """Both verdicts in, one decision after them, the recorded result the reduction of the verdicts."""
    return _judge_rule(sub, args, GR)


def terminal_fence(sub: Path, args: dict) -> Judged:
    """One fence from the author closes the conversation COMPLETED, claiming no truth or authority."""
    return _judge_rule(sub, args, FENCE)


def acknowledgements(sub: Path, args: dict) -> Judged:
    """Both reviewers required; each acknowledges the fence once, after it, citing it, to its sender."""
    return _judge_rule(sub, args, ACKS)


def causal_chain(sub: Path, args: dict) -> Judged:
    """The conversation hangs together by ``causedBy`` in the supplied order (the validator's
    ordering; times order nothing across senders): every message after the opening request names
    what it answers, causes come earlier, everything leads back to the request, each contribution
    answers the gather's opener, the decision cites each reviewer's contribution, and the fence
    cites the decision."""
    return _judge_rule(sub, args, CAUSAL)


# --------------------------------------------------------------------------- behaviour


def behaviour(sub: Path) -> dict:
    """What the trace in ``sub`` says, as the seed's rules read it, for the mutation run
    (:mod:`sim.course.mutants`): the validator's verdict (valid, the terminal it reaches or would
    reach, each finding as its code, rule and message id); the participants (ref, generation,
    audiences); each message by its sender, generation and seq (kind, epoch, scope, causes, the gather
    of a contribution or a decision, the recipients of every kind but the decision, whether it
    carries its payload, whether a request names the draft); the gathers (id, membership, rule,
    threshold, tie-break, opener, whether a result is recorded); the terminal; and the verdict of
    every mutation of the suite against the trace.

    Abstracted away, because no rule reads them: times (they order nothing; whether a message is
    past a deadline or its expiry is the validator's finding), principals, the protocol name, the
    message ceiling's value, the spelling of message ids (a message is named by its sender's sequence,
    and what cites it by that name), verification refs' values (their form is a finding), audience labels
    (whether each recipient advertises them is a finding), payload contents beyond naming the draft
    (their digests are findings), who the decision is announced to, the order of causes in a list,
    and the order of messages where it changes no finding."""
    ld = _load(sub)
    if isinstance(ld, Judged):
        return {"unreadable": ld.message}
    from ...protocol.mutate import MUTATIONS

    t, rep = ld.trace, ld.report
    # a message by who sent it and its place in its sender's sequence, not by the spelling of its id
    label: dict[str, str] = {}
    seen: Counter = Counter()
    for m in ld.msgs:
        base = f"{_short(m.get('sender'))}#{m.get('generation')}#{m.get('seq')}"
        seen[base] += 1
        mid = _s(m.get("id"))
        if mid is not None and mid not in label:
            label[mid] = base if seen[base] == 1 else f"{base}/{seen[base]}"

    def ref(v):
        return label.get(v, f"unknown {v!r}") if isinstance(v, str) else v

    msgs: dict[str, dict] = {}
    for m in ld.msgs:
        mid = _s(m.get("id"))
        if mid is None or label[mid] in msgs:
            continue
        kind = m.get("kind")
        d = {k: m.get(k) for k in ("kind", "sender", "seq", "epoch", "generation", "scope")}
        d["causedBy"] = sorted(map(str, map(ref, _list(m.get("causedBy")))))
        if kind in ("CONTRIBUTION", "GATHER_RESULT"):
            d["gatherId"] = m.get("gatherId")
        if kind != "GATHER_RESULT":
            d["recipients"] = sorted(map(str, _list(m.get("recipients"))))
        d["payload"] = isinstance(m.get("payload"), dict)
        if kind == "REQUEST":
            d["names_draft"] = _mentions(m.get("payload"), DRAFT)
        msgs[label[mid]] = d
    term = t.get("terminal")
    return {
        "verdict": {"valid": rep.valid, "terminal": rep.terminal_if_valid,
                    "findings": sorted({(f.code, rule_of(f, t, rep) or "", ref(f.message_id) if f.message_id else "")
                                        for f in rep.errors})},
        "epoch": t.get("epoch"), "scope": t.get("scope"),
        "participants": sorted((str(p.get("ref")), p.get("generation"), sorted(map(str, _list(p.get("audiences")))))
                               for p in _list(t.get("participants")) if isinstance(p, dict)),
        "messages": msgs,
        "gathers": [{k: g.get(k) for k in ("id", "membership", "rule", "threshold", "tieBreak")}
                    | {"opener": ref(g.get("opener")), "result": isinstance(g.get("result"), dict)} for g in _gathers(t)],
        "terminal": None if not isinstance(term, dict) else
        {k: (sorted(map(str, _list(term.get(k)))) if k == "requiredAcks" else ref(term.get(k)) if k == "fence"
             else term.get(k)) for k in ("state", "fence", "requiredAcks", "truthEffect", "authorityEffect")},
        "mutations": {mu.name: ld.verdict(mu.name)["ok"] for mu in MUTATIONS},
    }
