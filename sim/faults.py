"""Fault injection: the simulated transport and what it can do to a message.

A fault is written ``NAME`` (its default target), ``NAME:M-3`` (one message id),
``NAME:task_result`` (every message of a type) or ``NAME:0.1`` (each eligible message with
that probability, drawn from the run's one seeded RNG). Every fault the transport applies is
recorded as a ``fault_injected`` event, so the log says what was done to the run. Each fault is
declared once, by ``@fault(...)`` on what it does to a send (``REGISTRY``); the lists the CLI and
the TUI show are read from there, and the README's fault table is written from it (``python -m sim.docs``).

``duplicate``           deliver the same envelope again one round later
``conflicting-digest``  send a second envelope under the same idempotency key with another payload
``late-failure``        after a successful result, a failed one for the same task under a new key
``reorder``             hold the message back until the next message has been sent (at most
                        ``max_hold`` rounds), then deliver it right after that one
``delay``               deliver it ``delay_ticks`` rounds late
``drop``                never deliver it (the sender retries with a new attempt and key)
``crash``               the worker dies right after sending it; its lease expires, a restarted worker
                        recovers with a higher lease_version, and the dead one's late commit arrives
``stale-schema``        send it with an unsupported schema_version
``resend``              the sender gives up waiting and sends the same intent again: a new message
                        id and time, the key and payload its envelope design gives that intent
``transient``           the worker's attempt fails transiently: it reports ``retry`` instead of its
                        result; the manager assigns a new attempt, which succeeds with another payload
``tool-failure``        the worker's tool fails on its attempt: its result reports ``retry``, naming the
                        tool (``tool``) and what went wrong; the runtime records ``tool_failed``, and
                        the manager assigns a new attempt, which succeeds with another payload
``late-conflict``       like ``conflicting-digest``, but the second payload arrives ``LATE_CONFLICT_AFTER``
                        rounds later, after the manager has handed the first one's product on: what
                        rests on it must be held, or reconciled if it already took effect
``silent``              the worker goes quiet on its work: from that message on, nothing it starts or
                        answers arrives (it still acknowledges); a gather waiting on it misses its
                        deadline (``gather_ticks``), and the manager fences the conversation TIMED_OUT
``upgrade``             the sender is upgraded mid-run: this result goes out in schema 1.1, its product
                        marked ``partial`` (a field 1.1 added); a 1.0 reader drops the mark
``new-major``           send it as schema_version 2.0, a major the kit's runtime does not read
``receipt``             the worker acknowledges the request the round it arrives (a receipt, before any work)
``phantom-citation``    the worker's successful result also cites a message id it made up (one never sent):
                        a source that does not exist; when it is not accepted the worker sends the result it meant
``self-report``         the worker's result also reports ``budget_left: 99``, a field no message type
                        declares; when it is not accepted the worker sends the result it meant
``afterthought``        once the manager has fenced the conversation, it asks a worker for one more
                        task (``AFTERTHOUGHT_TASK``) a round later: a request after the fence
``rewind``              the sender's sequence counter slips back one: this message goes out under the
                        number its previous one used; when it is not accepted the sender sends it again
``zombie``              the worker is restarted right after this start (a new body, the next generation,
                        speaks for it from now on), but nobody stopped the old body: it finishes its work
                        and answers under its old generation while its lease is still current
``overshare``           the worker also sends its result to another worker: the same message (its sequence
                        number too) addressed to someone outside the result's audience (only the manager
                        hears results)
``lost-evidence``       the worker paraphrases: its successful result says what it found but cites
                        nothing (no evidence_refs, no artifact); when it is not accepted the worker
                        sends the result it meant, evidence and all
``overtime``            deliver it the round after the conversation's declared deadline (a delayed message
                        with a later one of its sender behind it is sent again by a safe runtime's session,
                        so the default is a message nothing follows: an acknowledgement of the fence)
``linger``              deliver it after it expired (``expires_ticks`` rounds after it was sent, and one more)
``flood``               the sender sends it again under new message ids, as many times as the conversation's
                        message ceiling: more than the conversation can take
``cross-talk``          a copy of it, sent in another conversation (trace ``OTHER_TRACE``), arrives in this one
``straggler``           the sender sends it again under a new id, held until a reviewer reopens the conversation:
                        it arrives in the next epoch, stamped with the one it was sent in
``garble``              the payload is changed in transit (a character of the result's summary), the digest the
                        sender computed kept: what arrives is not what was digested. Not injected by hand: a
                        by-hand fault acts on a message already delivered, and a changed copy under its id would
                        be a reused message id, refused by both policies for that reason alone
"""

from __future__ import annotations

import dataclasses
import heapq
import random
import re
from dataclasses import dataclass
from typing import Callable

from . import digest as _digest
from .design import Intent
from .envelope import MESSAGE_TYPES, Envelope
from .errors import InputError, friendly_list

__all__ = ["FAULTS", "REGISTRY", "Fault", "FaultSpec", "parse_fault", "Bus", "DEFAULT_TARGET", "INJECTABLE", "fault"]


#: How many rounds after the original a resent copy arrives (the sender's wait before it gives up).
RESEND_AFTER = 2
#: How many rounds after the original a late-conflict's second payload arrives.
LATE_CONFLICT_AFTER = 3

_MSG_RE = re.compile(r"^[A-Z][A-Za-z]*-\d+$")


@dataclass
class _Send:
    """One send as the faults bend it: the envelope as it goes out, when it is due, whether it is
    scheduled at all, and the extra envelopes the faults made (due, envelope)."""

    out: Envelope
    due: int
    now: int
    schedule: bool = True
    extra: list = dataclasses.field(default_factory=list)


@dataclass(frozen=True)
class Fault:
    """One fault the transport can do: its name, what it does (one line), the message it picks
    with no selector (in words, and as a test), the message types it can touch, whether the TUI
    can inject it on a message already sent (and what that means there), and what it does to a
    send (``apply(bus, spec, step)``)."""

    name: str
    what: str
    default_target: str
    default_match: Callable[[Envelope], bool]
    apply: Callable[["Bus", "FaultSpec", _Send], None]
    only: tuple[str, ...] = ()
    #: with a rate selector, acknowledgements are never picked
    rate_skips_acks: bool = False
    #: what injecting it by hand on a sent message does (None: it cannot be injected)
    by_hand: str | None = None
    #: a fault injected by hand has a key in the TUI: (key, footer label, palette title, help line);
    #: the TUI's KEYS rows for faults are made from these
    tui_key: tuple[str, str, str, str] | None = None
    #: it changes the number the message goes out under: applied before the faults that copy the message
    #: (a copy is numbered after the number its original finally carries)
    renumbers: bool = False
    #: its row of the README's fault table (``python -m sim.docs`` writes it): what it does in the shipped story
    #: (naming the scenario when not publish-report), what the safe policy makes of it, the invariants the naive
    #: run of it breaks (tests/test_readme_faults.py runs both) and a note on how naive breaks them
    story: str = ""
    safe: str = ""
    naive_breaks: tuple[str, ...] = ()
    naive_note: str = ""

    @property
    def injectable(self) -> bool:
        return self.by_hand is not None


#: Every fault, in the order they are listed; adding one is one ``@fault(...)`` handler below.
REGISTRY: dict[str, Fault] = {}


def fault(name: str, what: str, *, default_target: str, default_match: Callable[[Envelope], bool],
          only: tuple[str, ...] = (), rate_skips_acks: bool = False, by_hand: str | None = None,
          tui_key: tuple[str, str, str, str] | None = None, renumbers: bool = False, story: str = "",
          safe: str = "", naive_breaks: tuple[str, ...] = (), naive_note: str = ""):
    """Register a fault: its name, what it does (one line), the message it picks with no selector, and
    its row of the README's fault table (``story``, ``safe``, ``naive_breaks``, ``naive_note``)."""
    if (tui_key is None) != (by_hand is None):
        raise ValueError(f"fault {name!r}: a fault injected by hand needs its TUI key, and only such a fault has one")
    if tui_key is not None and any(f.tui_key and f.tui_key[0] == tui_key[0] for f in REGISTRY.values()):
        raise ValueError(f"fault {name!r}: key {tui_key[0]!r} is another fault's")

    def register(apply):
        if name in REGISTRY:
            raise ValueError(f"fault {name!r} is declared twice")
        if not (story and safe):
            raise ValueError(f"fault {name!r}: its row of the README's fault table needs story= and safe=")
        REGISTRY[name] = Fault(name, what, default_target, default_match, apply, only, rate_skips_acks, by_hand,
                               tui_key, renumbers, story, safe, tuple(naive_breaks), naive_note)
        return apply
    return register


def _result(env: Envelope) -> bool:
    return env.type == "task_result"


def _success(env: Envelope) -> bool:
    return env.type == "task_result" and env.payload.get("status") == "succeeded"


def _publishing(env: Envelope) -> bool:
    return env.type == "task_result" and "effect" in env.payload


def _started(env: Envelope) -> bool:
    return env.type == "task_started"


@fault("duplicate", "deliver the same envelope again one round later",
       default_target="publishing task_result (else the first task_result)", default_match=_publishing,
       by_hand="deliver the same envelope once more",
       tui_key=("d", "Duplicate", "Inject a duplicate delivery", "Deliver the selected message again"),
       story="delivers the publishing result twice",
       safe="`duplicate`, published once (the network's copy never enters the conversation)",
       naive_breaks=("EFFECT_AT_MOST_ONCE", "SEQUENCE_KEPT"),
       naive_note="naive re-executes it: one message id taken twice")
def _duplicate(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    s.extra.append((s.due + 1, s.out))
    bus._record(spec.name, s.out, {"selector": spec.text, "again_at": s.due + 1})


def _copying(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    offset, copy, same_seq, detail = bus._copy(spec.name, s.out)
    s.extra.append((s.due + offset, copy))
    bus._on_copy(s.out, copy, same_seq)
    bus._record(spec.name, s.out, {"selector": spec.text, **detail})


fault("conflicting-digest", "send a second envelope under the same idempotency key with another payload",
      default_target="first task_result", default_match=_result,
      by_hand="send the same idempotency key again with another payload",
      tui_key=("c", "Conflict", "Inject a conflicting digest", "Send the selected message's key with another payload"),
      story="the researcher sends its result's key again with another payload, a message of its own",
      safe="`conflict`, T-1 frozen in needs_review; a publication already made from it goes to reconciliation",
      naive_breaks=("CONFLICT_FROZEN", "NO_EFFECT_FROM_UNTRUSTED"),
      )(_copying)
fault("late-failure", "after a successful result, a failed one for the same task under a new key",
      default_target="first successful task_result", default_match=_success, only=("task_result",),
      rate_skips_acks=True, by_hand="a failure for the same attempt arrives after its result",
      tui_key=("l", "Late", "Inject a late failure", "A late failure after the selected result"),
      story="a `failed` result after the success, new key",
      safe="`late`, T-1 stays succeeded",
      naive_breaks=("NO_STATE_REGRESSION", "TRANSITIONS_ALLOWED"))(_copying)


@fault("reorder", "hold the message back until the next message has been sent, then deliver it right after",
       default_target="first task_started", default_match=_started,
       story="holds M-2 back until after the next message",
       safe=("the session parks the early result (a number ahead of the researcher's next) until M-2 arrives; "
             "both land in order and the exported trace validates"),
       naive_breaks=("NO_STATE_REGRESSION", "NO_LOST_UPDATE", "TRANSITIONS_ALLOWED", "SEQUENCE_KEPT"),
       naive_note="naive takes the result before the start; its export fails with `E_SEQUENCE_GAP`")
def _reorder(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    bus._held.append((s.now, s.out))
    s.schedule = False
    bus._record(spec.name, s.out, {"selector": spec.text, "held_until": "the next message is sent"})


@fault("delay", "deliver it delay_ticks rounds late", default_target="first task_result", default_match=_result,
       story="delivers a result 9 rounds late",
       safe=("the researcher's retry waits behind it (the session keeps each sender in sequence, and cannot tell "
             "late from lost): the result is sent again and lands, the retry is `late`, and the late copy, when "
             "it comes, is dropped before intake (`message_copy_dropped`)"),
       naive_breaks=("SEQUENCE_KEPT",),
       naive_note="naive: the retry overtakes it, the original is `late`, the export fails with `E_SEQUENCE_GAP`")
def _delay(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    s.due += bus.delay_ticks
    bus._record(spec.name, s.out, {"selector": spec.text, "arrives_at": s.due})


@fault("drop", "never deliver it (the sender retries with a new attempt and key)",
       default_target="first task_result", default_match=_result,
       story="loses a result; the sender retries with a new key",
       safe=("the retry waits behind the missing number; a round later the session has the lost result sent "
             "again, unchanged (`message_sent_again`); it lands, the retry is `late`"),
       naive_breaks=("SEQUENCE_KEPT",),
       naive_note="naive: the retry lands, the export fails with `E_SEQUENCE_GAP`")
def _drop(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    s.schedule = False
    bus._record(spec.name, s.out, {"selector": spec.text})


@fault("crash", "the worker dies right after sending it; its lease expires and a restarted worker recovers",
       default_target="first task_started", default_match=_started, only=("task_started",), rate_skips_acks=True,
       story=("the researcher dies after starting; its lease expires, a restarted researcher takes lease 2, the "
              "dead one's commit arrives"),
       safe="fenced: `E_STALE_LEASE`; the replaced body's refused commit never enters the conversation",
       naive_breaks=("NO_LOST_UPDATE", "CURRENT_SPEAKERS", "SEQUENCE_KEPT"))
def _crash(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    bus.crashed.append((s.out.sender, s.out))
    bus._record(spec.name, s.out, {"selector": spec.text, "worker": s.out.sender})


@fault("stale-schema", "send it with an unsupported schema_version",
       default_target="first task_request", default_match=lambda env: env.type == "task_request",
       story="sends the first request with schema_version \"0\"",
       safe="rejected, the retry lands",
       naive_breaks=("VERSION_READ",))
def _stale_schema(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    s.out = dataclasses.replace(s.out, schema_version="0")
    bus._record(spec.name, s.out, {"selector": spec.text, "schema_version": "0"})


# The sender's side of a fault: what the sender says instead of (or beside) the envelope it sent,
# as an Intent its own design encodes again (``Bus.rebuild``). Each takes the intent the sender
# meant, a function giving a fresh message id (call it only to use one: ids are counted) and the
# time it is sent; it returns (the intent sent, the intent the sender still means: what a retry sends).


def _said_again(intent: Intent, new_id: Callable[[], str], sent_at: str) -> tuple[Intent, Intent]:
    """resend: the same intent, under a new message id and the time it is sent again."""
    again = dataclasses.replace(intent, message_id=new_id(), created_at=sent_at)
    return again, again


def _transient_retry(intent: Intent, new_id: Callable[[], str], sent_at: str) -> tuple[Intent, Intent]:
    """transient: the attempt reports ``retry`` instead of its result."""
    body = {"status": "retry", "lease_version": intent.body.get("lease_version", intent.attempt),
            "error": "transient: the source did not answer; try again"}
    retry = dataclasses.replace(intent, body=body, refs=(), content=None, context={})
    return retry, retry


#: The tool a worker's attempt relies on, by the role its id starts with (the ``tool-failure`` fault names it).
WORKER_TOOLS = {"researcher": "web-search", "writer": "publisher"}


def _tool_of(sender: str) -> str:
    return next((t for role, t in WORKER_TOOLS.items() if sender.startswith(role)), "tool")


def _tool_broke(intent: Intent, new_id: Callable[[], str], sent_at: str) -> tuple[Intent, Intent]:
    """tool-failure: the attempt reports ``retry``, naming the tool that failed it."""
    tool = _tool_of(intent.sender)
    body = {"status": "retry", "lease_version": intent.body.get("lease_version", intent.attempt), "tool": tool,
            "error": f"{tool} failed: it returned an error instead of a result"}
    broke = dataclasses.replace(intent, body=body, refs=(), content=None, context={})
    return broke, broke


def _paraphrased(intent: Intent, new_id: Callable[[], str], sent_at: str) -> tuple[Intent, Intent]:
    """lost-evidence: the conclusion without what it rests on (no artifact, no evidence_refs); the
    sender still means its whole result, so a retry sends that."""
    body = {k: v for k, v in intent.body.items() if k != "artifact"}
    body["summary"] = "paraphrased from memory: " + str(intent.body.get("summary", "the findings"))
    return dataclasses.replace(intent, body=body, refs=(), content=None), intent


@fault("resend", "the sender sends the same intent again: a new message id and time, the key its design gives",
       default_target="publishing task_result (else the first task_result)", default_match=_publishing,
       by_hand="the sender sends the same intent again under a new message id",
       tui_key=("s", "Resend", "Inject a resend", "The sender resends the selected message's intent under a new id"),
       story="the sender gives up waiting and sends the publishing result again: same intent, new message id",
       safe="`duplicate`, published once",
       naive_breaks=("RESEND_DEDUPLICATED", "EFFECT_AT_MOST_ONCE"))
def _resend(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    if bus._rebuild is None:
        return
    out = s.out
    again = bus._rebuild(out, _said_again, s.due + RESEND_AFTER)
    s.extra.append((s.due + RESEND_AFTER, again))
    bus._on_copy(out, again, False)
    bus._record(spec.name, out, {"selector": spec.text, "resend": again.message_id, "again_at": s.due + RESEND_AFTER,
                                 "key": out.idempotency_key, "resend_key": again.idempotency_key})


@fault("transient", "the worker's attempt fails transiently (retry); a new attempt succeeds with another payload",
       default_target="first successful task_result", default_match=_success, only=("task_result",),
       story=("the researcher's first attempt reports `retry`; the manager assigns attempt 2, which succeeds with "
              "another fact table"),
       safe="attempt 2 lands under its own key")
def _transient(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    if s.out.payload.get("status") != "succeeded" or bus._rebuild is None:
        return
    s.out = bus._rebuild(s.out, _transient_retry, s.due)
    bus._record(spec.name, s.out, {"selector": spec.text, "status": "retry"})


@fault("tool-failure", "the worker's tool fails on its attempt: its result says so (retry, naming the tool)",
       default_target="first successful task_result", default_match=_success, only=("task_result",),
       story=("the researcher's web-search tool fails on its first attempt: the result reports `retry` and names "
              "the tool (`tool`, a declared field)"),
       safe="`tool_failed` recorded beside the move to retry_wait; attempt 2 lands under its own key")
def _tool_failure(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    if s.out.payload.get("status") != "succeeded" or bus._rebuild is None:
        return
    s.out = bus._rebuild(s.out, _tool_broke, s.due)
    bus._record(spec.name, s.out, {"selector": spec.text, "status": "retry", "tool": s.out.payload["tool"]})


@fault("lost-evidence", "the worker paraphrases: its success cites nothing; refused, it sends the result it meant",
       default_target="publishing task_result (else the first successful task_result)", default_match=_publishing,
       only=("task_result",),
       story="the writer paraphrases its publishing result: it cites nothing",
       safe="refused (`E_EVIDENCE_REQUIRED`); the writer's retry, evidence and all, publishes",
       naive_breaks=("EFFECT_HAS_EVIDENCE",))
def _lost_evidence(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    if s.out.payload.get("status") != "succeeded" or bus._rebuild is None:
        return
    s.out = bus._rebuild(s.out, _paraphrased, s.due)
    bus._record(spec.name, s.out, {"selector": spec.text, "evidence_refs": []})


fault("late-conflict", "like conflicting-digest, but the second payload arrives after the first was handed on",
      default_target="first task_result", default_match=_result,
      story=("T-1's key arrives again with another payload, 3 rounds late: after the manager handed T-1's fact "
             "table to the writer"),
      safe=("T-1 frozen, and T-2's result, which rests on it, frozen too: nothing published. Aimed at the "
            "publishing result (`late-conflict:M-6`) the twin arrives after the fence: refused "
            "(`E_POST_TERMINAL_MESSAGE`, nothing changes after the fence) and its publication sent to "
            "reconciliation"),
      naive_breaks=("CONFLICT_FROZEN", "NO_EFFECT_FROM_UNTRUSTED"))(_copying)


@fault("silent", "the worker goes quiet on its work: nothing it starts or answers arrives (it still acknowledges)",
       default_target="first task_started (its worker goes quiet)", default_match=_started,
       only=("task_started", "task_result"),
       story=("in `fan-out`, the first researcher to start goes quiet on its work (it still acknowledges); the "
              "gather for T-3 misses its deadline (`gather_ticks`)"),
       safe=("the manager cancels its task and fences `TIMED_OUT`; the trace's gather is partial, researcher-1 "
             "missing (`data/traces/timed-out-trace.json`)"))
def _silent(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    s.schedule = False
    bus.silenced.add(s.out.sender)
    bus._record(spec.name, s.out, {"selector": spec.text, "worker": s.out.sender})


@fault("new-major", "send it as schema_version 2.0, a major the kit's runtime does not read",
       default_target="first task_result", default_match=_result,
       story="sends the first result as schema_version \"2.0\", a major this kit's runtime does not read",
       safe="rejected (`E_SCHEMA_VERSION`), the retry in \"1\" lands",
       naive_breaks=("VERSION_READ",))
def _major_bump(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    s.out = dataclasses.replace(s.out, schema_version="2.0")
    bus._record(spec.name, s.out, {"selector": spec.text, "schema_version": "2.0"})


def _upgraded(intent: Intent, new_id: Callable[[], str], sent_at: str) -> tuple[Intent, Intent]:
    """upgrade: the upgraded sender marks its product partial (schema 1.1); a retry of it, made by the
    sender's old code path, says what it meant before the upgrade."""
    return dataclasses.replace(intent, body={**intent.body, "partial": True}), intent


@fault("upgrade", "the sender is upgraded mid-run: this result goes out in schema 1.1, its product marked partial",
       default_target="publishing task_result (else the first successful task_result)", default_match=_publishing,
       only=("task_result",),
       story=("the writer is upgraded mid-run: its publishing result goes out in schema 1.1 with `partial: true`, "
              "a field 1.1 added"),
       safe="read: T-2 succeeds, its publication withheld (`effect_withheld`)",
       naive_breaks=("NEWER_FIELDS_READ",),
       naive_note="naive reads it as 1.0, drops the mark and publishes")
def _upgrade(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    if s.out.payload.get("status") != "succeeded" or bus._rebuild is None:
        return
    # the upgraded sender negotiates again (it speaks 1.0 and 1.1 now) and sends in the version agreed
    version = bus.negotiate(s.out, UPGRADED_SPEAKS) if bus.negotiate is not None else "1.1"
    s.out = bus._rebuild(s.out, _upgraded, s.due, schema_version=version)
    bus._record(spec.name, s.out, {"selector": spec.text, "schema_version": version, "partial": True})


#: What an upgraded sender speaks (fault upgrade): the version it knew, and the minor that added ``partial``.
UPGRADED_SPEAKS = ("1.0", "1.1")


def _acknowledged(intent: Intent, new_id: Callable[[], str], sent_at: str) -> tuple[Intent, Intent]:
    """receipt: the recipient's receipt of ``intent``: an ack, nothing more."""
    ack = dataclasses.replace(intent, type="ack", sender=intent.recipient, recipient=intent.sender, body={"of": intent.message_id},
                              answers=intent.message_id, refs=(), content=None, context={}, message_id=new_id(),
                              created_at=sent_at, attempt=1, retry=0)
    return ack, ack


@fault("receipt", "the worker acknowledges the request the round it arrives: a receipt, before any work",
       default_target="first task_request", default_match=lambda env: env.type == "task_request", only=("task_request",),
       story="the researcher acknowledges its request the round it arrives, before any work",
       safe="a receipt, recorded; nothing moves",
       naive_breaks=("ACK_IS_NOT_COMPLETION", "NO_STATE_REGRESSION", "TRANSITIONS_ALLOWED"),
       naive_note="naive takes the worker's ack for completion, then its start regresses the task")
def _early_ack(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    if bus._rebuild is None:
        return
    ack = bus._rebuild(s.out, _acknowledged, s.due + 1)
    s.extra.append((s.due + 1, ack))
    bus._on_copy(s.out, ack, False)
    bus._record(spec.name, s.out, {"selector": spec.text, "ack": ack.message_id, "at": s.due + 1})


def _made_up_source(intent: Intent, new_id: Callable[[], str], sent_at: str) -> tuple[Intent, Intent]:
    """phantom-citation: the result also cites a message id the sender made up (a fresh id, never sent);
    the sender still means its whole result as it was, so a retry sends that."""
    return dataclasses.replace(intent, refs=(*intent.refs, new_id())), intent


@fault("phantom-citation", "the worker's success also cites a message nobody sent: a made-up source",
       default_target="first successful task_result", default_match=_success, only=("task_result",),
       story="the researcher's result also cites a message id it made up (a source nobody sent)",
       safe=("refused (`E_EVIDENCE_UNRESOLVED`: a cited message must already be in the log; an artifact may be "
             "stored later); its retry, citing the fact table alone, lands"),
       naive_breaks=("EVIDENCE_RESOLVES",))
def _phantom_citation(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    if s.out.payload.get("status") != "succeeded" or bus._rebuild is None:
        return
    s.out = bus._rebuild(s.out, _made_up_source, s.due)
    bus._record(spec.name, s.out, {"selector": spec.text, "cites": s.out.evidence_refs[-1]})


def _self_reported(intent: Intent, new_id: Callable[[], str], sent_at: str) -> tuple[Intent, Intent]:
    """self-report: the result also says how much budget the task has left, as the worker sees it; the
    sender still means its result without it, so a retry sends that."""
    return dataclasses.replace(intent, body={**intent.body, "budget_left": SELF_REPORTED_BUDGET}), intent


#: The budget_left a self-reporting worker claims.
SELF_REPORTED_BUDGET = 99


@fault("self-report", "the worker's result also reports budget_left: 99, a field no message type declares",
       default_target="first task_result", default_match=_result, only=("task_result",),
       story="the researcher's result also says `budget_left: 99`, a field no message type declares",
       safe="refused (`E_UNKNOWN_FIELD`, the reason lists the declared fields); its retry without it lands",
       naive_breaks=("NO_STATE_FROM_UNDECLARED",),
       naive_note=("naive takes it and believes it: T-1's budget ledger gets a credit of 97 nobody allotted, "
                   "`protolab state`"))
def _self_report(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    if bus._rebuild is None:
        return
    s.out = bus._rebuild(s.out, _self_reported, s.due)
    bus._record(spec.name, s.out, {"selector": spec.text, "budget_left": SELF_REPORTED_BUDGET})


#: The task a manager's afterthought asks for, after the fence.
AFTERTHOUGHT_TASK = "T-90"


def _one_more_thing(intent: Intent, new_id: Callable[[], str], sent_at: str) -> tuple[Intent, Intent]:
    """afterthought: the fencing manager's request for one more task, to the first worker it fenced."""
    ask = Intent(type="task_request", sender=intent.sender, recipient=intent.body["to"][0], trace_id=intent.trace_id,
                 task_id=AFTERTHOUGHT_TASK, body={"goal": "one more check, thought of after closing", "budget": 1},
                 message_id=new_id(), created_at=sent_at)
    return ask, ask


@fault("afterthought", "once the conversation is fenced, the manager asks a worker for one more task",
       default_target="the fence", default_match=lambda env: env.type == "fence", only=("fence",),
       story="once the manager has fenced the conversation, it asks the researcher for one more task (T-90)",
       safe=("refused (`E_POST_TERMINAL_MESSAGE`: after the fence only its acks are taken), so T-90 never exists "
             "and the exported trace validates"),
       naive_breaks=("FENCE_FINAL",),
       naive_note=("naive creates T-90 after the fence: `protolab trace export` then `trace validate` finds "
                   "`E_POST_TERMINAL_MESSAGE`"))
def _afterthought(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    if bus._rebuild is None:
        return
    ask = bus._rebuild(s.out, _one_more_thing, s.due + 1)
    s.extra.append((s.due + 1, ask))
    bus._on_copy(s.out, ask, False)
    bus._record(spec.name, s.out, {"selector": spec.text, "request": ask.message_id, "task": AFTERTHOUGHT_TASK,
                                   "at": s.due + 1})


@fault("rewind", "the sender's sequence counter slips back one: this message reuses its previous number",
       default_target="first task_result", default_match=_result, rate_skips_acks=True, renumbers=True,
       story="the researcher's sequence counter slips back one: its result reuses the number of its start",
       safe=("refused (`E_SEQUENCE_GAP`: one body numbered two messages of T-1 alike); its retry, numbered on, "
             "lands, and the exported trace validates"),
       naive_breaks=("SEQUENCE_KEPT",),
       naive_note="naive takes it: the exported trace fails with `E_SEQUENCE_GAP`")
def _rewind(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    if bus._restamp is None:
        return
    seq = bus._restamp(s.out, 1)
    bus._record(spec.name, s.out, {"selector": spec.text, "seq": seq})


@fault("zombie", "the worker is restarted after this start, but its old body keeps working and answers under "
                 "its old generation", default_target="first task_started", default_match=_started,
       only=("task_started",), rate_skips_acks=True,
       story=("the researcher is restarted right after its start (a new body, generation 2, speaks for it), but "
              "nobody stopped the old body: it answers under generation 1 while its lease is still current"),
       safe=("refused (`E_STALE_GENERATION`: only the newest body speaks for a worker; the lease alone would have "
             "taken it); the old lease expires, the new body redoes T-1, and the exported trace validates"),
       naive_breaks=("CURRENT_SPEAKERS", "SEQUENCE_KEPT"),
       naive_note="naive takes the old body's result: the exported trace fails with `E_STALE_GENERATION`")
def _zombie(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    # the same restart as a crash (the run gives the worker a new body); the old body is left running
    bus.crashed.append((s.out.sender, s.out))
    bus.still_running.add(s.out.message_id)
    bus._record(spec.name, s.out, {"selector": spec.text, "worker": s.out.sender})


def _copied_to(to: str):
    """overshare: the same intent, also addressed to ``to`` (a new message id, sent beside the original)."""
    def rewrite(intent: Intent, new_id: Callable[[], str], sent_at: str) -> tuple[Intent, Intent]:
        cc = dataclasses.replace(intent, recipient=to, message_id=new_id(), created_at=sent_at)
        return cc, cc
    return rewrite


@fault("overshare", "the worker also sends its result to another worker, outside the result's audience",
       default_target="first task_result", default_match=_result, only=("task_result",), rate_skips_acks=True,
       story=("the researcher also sends its result (the same message, its number too) to the writer, who is not "
              "in a result's audience (only the manager hears results)"),
       safe=("refused (`E_AUDIENCE_LABEL`: a recipient outside the message's audience, whatever intake would make "
             "of it); the exported trace, whose participants carry their roles' audience labels, validates"),
       naive_breaks=("AUDIENCE_KEPT", "SEQUENCE_KEPT"),
       naive_note="naive hands it to the writer: the exported trace fails with `E_AUDIENCE_LABEL`")
def _overshare(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    others = [p for p in bus.peers() if p not in (s.out.sender, s.out.recipient)]
    if bus._rebuild is None or not others:
        return
    cc = bus._rebuild(s.out, _copied_to(others[0]), s.due)
    s.extra.append((s.due, cc))
    bus._on_copy(s.out, cc, True)  # one message, one number, a recipient too many
    bus._record(spec.name, s.out, {"selector": spec.text, "copy": cc.message_id, "to": others[0]})


def _fence_ack(env: Envelope) -> bool:
    return env.type == "ack" and env.task_id == env.trace_id


@fault("overtime", "deliver it after the conversation's deadline",
       default_target="the first acknowledgement of the fence (the last its sender says: nothing behind it is "
                     "parked, so no session sends it again)", default_match=_fence_ack,
       story=("delivers the researcher's acknowledgement of the fence after the conversation's declared deadline "
              "(`deadline_ticks`: 120 rounds in `publish-report`)"),
       safe="refused (`E_DEADLINE`); the fence closes without that receipt",
       naive_breaks=("WITHIN_BOUNDS", "CURRENT_SPEAKERS"),
       naive_note="naive takes it: the export fails with `E_DEADLINE`, and the receipt had expired too")
def _overtime(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    late = bus.deadline() + 1
    s.due = max(s.due, late)
    bus._record(spec.name, s.out, {"selector": spec.text, "arrives_at": s.due, "deadline_round": late - 1})


@fault("linger", "deliver it after it expired (its expires_at)",
       default_target="the first acknowledgement of the fence (the last its sender says: nothing behind it is "
                     "parked, so no session sends it again)", default_match=_fence_ack,
       story=("delivers the same acknowledgement after it expired (`expires_ticks`: every envelope of "
              "`publish-report` carries `expires_at`, 30 rounds after it was sent)"),
       safe="refused (`E_EXPIRED_MESSAGE`)",
       naive_breaks=("CURRENT_SPEAKERS",),
       naive_note="naive takes it: `E_EXPIRED_MESSAGE`")
def _linger(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    ttl = bus.expires_ticks
    s.due = max(s.due, s.now + (ttl if ttl else bus.delay_ticks) + 1)
    bus._record(spec.name, s.out, {"selector": spec.text, "arrives_at": s.due,
                                   "expires_at": s.out.expires_at or "never (the scenario declares no expiry)"})


@fault("flood", "the sender sends it again and again under new message ids, more times than the conversation's "
                "message ceiling allows", default_target="publishing task_result (else the first task_result)",
       default_match=_publishing, only=("task_result",), rate_skips_acks=True,
       story=("the writer sends its publishing result again under new message ids, as many times as the "
              "conversation's ceiling (`message_ceiling`: 48)"),
       safe=("the copies are duplicates until the conversation nears its ceiling, then refused "
             "(`E_MESSAGE_CEILING`), the last places kept for the fence and its acknowledgements"),
       naive_breaks=("WITHIN_BOUNDS", "EFFECT_AT_MOST_ONCE", "SEQUENCE_KEPT"),
       naive_note="naive publishes every copy and takes them all: `E_MESSAGE_CEILING`")
def _flood(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    if bus._rebuild is None:
        return
    out, copies = s.out, []
    for _ in range(bus.ceiling()):
        again = bus._rebuild(out, _said_again, s.due + 1)
        s.extra.append((s.due + 1, again))
        bus._on_copy(out, again, False)
        copies.append(again.message_id)
    bus._record(spec.name, out, {"selector": spec.text, "copies": len(copies), "first": copies[0], "last": copies[-1],
                                 "at": s.due + 1})


@fault("straggler", "the sender sends it again under a new message id, and that copy is held until a reviewer has "
                    "reopened the conversation: it arrives in the next epoch, stamped with the one it was sent in",
       default_target="first task_result", default_match=_result,
       story=("in `reopened` (a conflict freezes T-1, the fence closes epoch 1, a scripted reviewer releases T-1 "
              "and epoch 2 finishes the report): the researcher's result, sent again under a new id in epoch 1, "
              "arrives in epoch 2"),
       safe="refused (`E_STALE_EPOCH`); epoch 2's trace validates",
       naive_breaks=("CURRENT_SPEAKERS",),
       naive_note=("naive takes it: epoch 2's export, `protolab trace export --epoch 2`, fails with "
                   "`E_STALE_EPOCH`"))
def _straggler(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    if bus._rebuild is None:
        return
    again = bus._rebuild(s.out, _said_again, s.due)
    bus.stragglers.append(again)
    bus._on_copy(s.out, again, True)  # (under the number it was sent with: one the conversation may never see)
    bus._record(spec.name, s.out, {"selector": spec.text, "copy": again.message_id, "held_until": "the next epoch"})


#: The conversation a cross-talk copy comes from.
OTHER_TRACE = "R-99"


@fault("cross-talk", "a copy of it sent in another conversation (trace R-99) arrives in this one",
       default_target="first task_result", default_match=_result,
       story="a copy of the researcher's result, sent in another conversation (trace R-99), arrives in this one",
       safe="refused (`E_AUDIENCE_SCOPE`: outside this conversation's scope)",
       naive_breaks=("AUDIENCE_KEPT", "SEQUENCE_KEPT"),
       naive_note="naive takes it: `E_AUDIENCE_SCOPE`")
def _cross_talk(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    copy = dataclasses.replace(s.out, message_id=bus._next_id(s.out.message_id.split("-")[0]), trace_id=OTHER_TRACE)
    s.extra.append((s.due, copy))
    bus._on_copy(s.out, copy, True)  # the other conversation's copy: numbered as the one it copies
    bus._record(spec.name, s.out, {"selector": spec.text, "copy": copy.message_id, "trace": OTHER_TRACE})


#: The payload fields a ``garble`` fault changes, the first the payload holds as text: free text, which no
#: rule reads (a status or a lease changed would be another story than a payload that no longer matches its
#: digest).
GARBLED_FIELDS = ("summary", "error")


def _garbled(text: str) -> str:
    """``text`` with one character changed, as a noisy channel changes it: its first digit one more (a count
    that no longer says what the artifact holds), else its first letter's case, else a ``?`` for nothing."""
    for i, ch in enumerate(text):
        if ch.isdigit():
            return f"{text[:i]}{(int(ch) + 1) % 10}{text[i + 1:]}"
    for i, ch in enumerate(text):
        if ch.isalpha():
            return f"{text[:i]}{ch.swapcase()}{text[i + 1:]}"
    return text + "?"


@fault("garble", "the payload is changed in transit (its summary), the digest the sender computed kept",
       default_target="first successful task_result", default_match=_success, only=("task_result",),
       story="changes one character of the researcher's result in transit (its summary's count: `3 item(s)` "
             "arrives as `4 item(s)`), keeping the digest the researcher computed",
       safe="refused (`E_DIGEST_MISMATCH`: intake digests every payload again under its `digest_scheme`, wherever "
            "the envelope was built); the researcher's retry, the payload it digested, lands",
       naive_breaks=("PAYLOAD_MATCHES_DIGEST",),
       naive_note="naive believes the digest and takes the changed payload: `protolab check` names M-3 and the "
                  "digest it computes")
def _garble(bus: "Bus", spec: "FaultSpec", s: _Send) -> None:
    field = next((f for f in GARBLED_FIELDS if isinstance(s.out.payload.get(f), str)), None)
    if field is None:
        return
    was = s.out.payload[field]
    # (the same envelope, its payload_digest and digest_scheme as the sender wrote them; only the payload differs)
    s.out = dataclasses.replace(s.out, payload={**s.out.payload, field: _garbled(was)})
    bus._record(spec.name, s.out, {"selector": spec.text, "field": field, "was": was, "now": s.out.payload[field],
                                   "payload_digest": s.out.payload_digest})


#: The fault names, in the registry's order.
FAULTS: tuple[str, ...] = tuple(REGISTRY)
#: With no selector, each fault picks the first message it makes sense for.
DEFAULT_TARGET: dict[str, str] = {name: f.default_target for name, f in REGISTRY.items()}
#: What the TUI can do to a message already sent: the fault's name and what it means there.
INJECTABLE: dict[str, str] = {name: f.by_hand for name, f in REGISTRY.items() if f.by_hand is not None}


@dataclass(frozen=True)
class FaultSpec:
    name: str
    kind: str  # "default", "message", "type", "rate"
    value: str | float | None = None

    @property
    def text(self) -> str:
        return self.name if self.kind == "default" else f"{self.name}:{self.value}"


def parse_fault(text: str) -> FaultSpec:
    """Parse ``NAME[:SELECTOR]``; refuse unknown names and malformed selectors."""
    name, _, sel = text.partition(":")
    if name not in REGISTRY:
        raise InputError(f"unknown fault {name!r}; expected one of: {friendly_list(FAULTS)}", code="E_UNKNOWN_FAULT")
    if not sel:
        return FaultSpec(name, "default")
    if sel in MESSAGE_TYPES:
        only = REGISTRY[name].only
        if only and sel not in only:
            raise InputError(f"{name} applies to {friendly_list(only)} messages, not {sel}", code="E_FAULT_SELECTOR")
        return FaultSpec(name, "type", sel)
    if _MSG_RE.match(sel):
        return FaultSpec(name, "message", sel)
    try:
        rate = float(sel)
    except ValueError:
        raise InputError(
            f"fault selector {sel!r} is neither a message id (M-3), a message type ({friendly_list(MESSAGE_TYPES)}) "
            "nor a rate between 0 and 1",
            code="E_FAULT_SELECTOR",
        ) from None
    if not 0 < rate <= 1:
        raise InputError(f"fault rate {sel} must be greater than 0 and at most 1", code="E_FAULT_SELECTOR")
    return FaultSpec(name, "rate", rate)


class Bus:
    """The simulated transport: a queue of (due round, send order, envelope), and the faults.

    ``send`` decides, for each fault, whether it applies to this envelope; ``due`` pops what
    arrives this round. Extra envelopes a fault creates are not eligible for faults themselves.
    """

    def __init__(self, specs: list[FaultSpec], rng: random.Random, *, delay_ticks: int, next_id, record, max_hold: int = 5,
                 on_copy=None, rebuild=None, restamp=None):
        self.specs = specs
        self.rng = rng
        self.delay_ticks = delay_ticks
        self._next_id = next_id  # callable(prefix) -> a fresh message id
        self._record = record  # callable(fault, env, detail)
        self._on_copy = on_copy or (lambda orig, new, same_seq: None)  # a fault made a new envelope from orig
        # callable(env, rewrite, due) -> the envelope the sender's design makes of rewrite(its intent)
        self._rebuild = rebuild
        # callable(env, back) -> the sequence number ``env`` now carries, its sender's counter set back ``back``
        self._restamp = restamp
        self._heap: list[tuple[int, int, Envelope]] = []
        self._seq = 0
        self._held: list[tuple[int, Envelope]] = []
        self.max_hold = max_hold
        self.matched = {s.text: 0 for s in specs}
        self._default_used: set[str] = set()
        self.crashed: list[tuple[str, Envelope]] = []  # (worker, the message it died after)
        self.peers: Callable[[], list[str]] = lambda: []  # the run's workers, in order (fault overshare)
        self.still_running: set[str] = set()  # of those messages, the ones whose old body was left running (zombie)
        self.pending_late: list[Envelope] = []
        self.silenced: set[str] = set()  # workers whose starts and results never arrive (fault silent)
        self.on_push: Callable[[Envelope], None] | None = None  # told of every envelope queued (sim.session)
        # the conversation's declared bounds, as the run knows them (faults overtime, flood, linger)
        self.deadline: Callable[[], int] = lambda: 0  # the round after which the epoch's deadline has passed
        self.ceiling: Callable[[], int] = lambda: 0  # the messages an epoch may take
        self.expires_ticks = 0  # rounds a message stays valid (0: never expires)
        #: callable(env, offered versions) -> the version agreed with the runtime (fault upgrade), recorded
        self.negotiate: Callable | None = None
        #: copies held until the conversation's next epoch (fault straggler); lost if it never reopens
        self.stragglers: list[Envelope] = []
        #: message id -> the envelope the transport first carried under it, exactly as it went out: what a fault
        #: injected by hand sends again (:meth:`sent_as`), never the message log's copy, which a policy that
        #: redacts keeps with [redacted] values. None: not kept (a run nobody drives by hand; sim.live keeps it)
        self.sent: dict[str, Envelope] | None = None

    def __len__(self) -> int:
        return len(self._heap) + len(self._held)

    def carrying(self) -> set[str]:
        """The tasks of every envelope still on the bus (due later, or held back)."""
        return {env.task_id for _d, _s, env in self._heap} | {env.task_id for _t, env in self._held} \
            | {env.task_id for env in self.pending_late}

    def _push(self, due: int, env: Envelope) -> None:
        if self.on_push is not None:
            self.on_push(env)
        if self.sent is not None and env.message_id not in self.sent:
            self.sent[env.message_id] = env
        self._seq += 1
        heapq.heappush(self._heap, (due, self._seq, env))

    def _applies(self, spec: FaultSpec, env: Envelope) -> bool:
        fault = REGISTRY[spec.name]
        if fault.only and env.type not in fault.only:
            return False
        if spec.kind == "message":
            return env.message_id == spec.value
        if spec.kind == "type":
            return env.type == spec.value
        if spec.kind == "rate":
            if env.type == "ack" and fault.rate_skips_acks:
                return False
            return self.rng.random() < spec.value
        if spec.text in self._default_used:
            return False
        if fault.default_match(env):
            self._default_used.add(spec.text)
            return True
        return False

    def send(self, env: Envelope, now: int) -> Envelope:
        """Queue ``env`` for delivery next round, bent by whichever faults apply; return the
        envelope as it was sent (a ``transient`` fault turns a result into ``retry``)."""
        due = now + 1
        if env.sender in self.silenced and env.type in ("task_started", "task_result"):
            return env  # the worker is silent: it never arrives
        faults = [s for s in self.specs if self._applies(s, env)]
        if len(faults) > 1:  # (one that renumbers the message first: a copy of it follows its final number)
            faults.sort(key=lambda s: not REGISTRY[s.name].renumbers)
        held = self._held
        self._held = []
        step = _Send(env, due, now)
        for spec in faults:
            self.matched[spec.text] += 1
            REGISTRY[spec.name].apply(self, spec, step)
        if self.on_push is not None:
            self.on_push(step.out)  # sent, whether or not the network will deliver it
        if step.schedule:
            self._push(step.due, step.out)
        for d, e in step.extra:
            self._push(d, e)
        # A reordered message goes right after the next one.
        for _, h in held:
            self._push(step.due, h)
        return step.out

    def _copy(self, name: str, env: Envelope) -> tuple[int, Envelope, bool, dict]:
        """The envelope a copying fault makes from ``env``: (rounds after due, copy, same sequence?, detail)."""
        if name == "late-conflict":
            _o, twin, same_seq, detail = self._copy("conflicting-digest", env)
            return LATE_CONFLICT_AFTER, twin, same_seq, detail
        if name == "conflicting-digest":
            # The sender sends a second result under the same key with another payload (it ran the
            # work again and got another answer), right behind the original, before anyone acts on
            # it: a message of its own, under the sender's next sequence number (the conversation is
            # in order; the contradiction is the key's, for intake to find).
            payload = dict(env.payload)
            payload["variant"] = "conflicting copy"
            twin = dataclasses.replace(
                env, message_id=self._next_id("M"), payload=payload,
                payload_digest=_digest.digest(payload, env.digest_scheme),
            )
            return 0, twin, False, {"twin": twin.message_id, "key": env.idempotency_key}
        if name == "late-failure":
            payload = {"status": "failed", "lease_version": env.payload.get("lease_version", 1), "error": "late failure"}
            late = dataclasses.replace(
                env, message_id=self._next_id("M"), payload=payload, evidence_refs=(),
                idempotency_key=env.idempotency_key + ":late-failure",
                payload_digest=_digest.digest(payload, env.digest_scheme),
            )
            return 2, late, False, {"late": late.message_id}
        raise ValueError(name)  # pragma: no cover

    def inject(self, name: str, env: Envelope, now: int) -> Envelope:
        """Apply one fault by hand to a message already sent (the TUI's keys): the copy it makes
        arrives next round. ``duplicate`` delivers ``env`` itself again: pass the envelope as it was
        sent (:meth:`sent_as`), not one read back from a log that may keep it redacted."""
        only = REGISTRY[name].only if name in REGISTRY else ()
        if only and env.type not in only:
            raise InputError(
                f"{name} applies to {' or '.join(only)} messages; {env.message_id} is a {env.type}",
                code="E_FAULT_NOT_APPLICABLE",
            )
        if name == "duplicate":
            self._push(now + 1, env)
            self._record(name, env, {"selector": "by hand", "again_at": now + 1})
            return env
        if name == "resend":
            if self._rebuild is None:
                raise InputError("this transport cannot resend: it has no sender to ask", code="E_FAULT_NOT_APPLICABLE")
            again = self._rebuild(env, _said_again, now + 1)
            self._push(now + 1, again)
            self._on_copy(env, again, False)
            self._record(name, env, {"selector": "by hand", "resend": again.message_id, "again_at": now + 1,
                                     "key": env.idempotency_key, "resend_key": again.idempotency_key})
            return again
        if name not in REGISTRY or not REGISTRY[name].injectable:
            raise InputError(f"fault {name!r} cannot be injected on a sent message", code="E_UNKNOWN_FAULT")
        _offset, copy, same_seq, detail = self._copy(name, env)
        self._push(now + 1, copy)
        self._on_copy(env, copy, same_seq)
        self._record(name, env, {"selector": "by hand", **detail})
        return copy

    def sent_as(self, message_id: str) -> Envelope | None:
        """The envelope this transport carried as ``message_id``, as it went out (its payload what was digested,
        or what a fault made of it); None when the transport does not keep what it sent (``sent``), or never
        carried that id (a reviewer's decision is delivered by hand, not sent)."""
        return self.sent.get(message_id) if self.sent is not None else None

    def carries(self, message_id: str) -> bool:
        """Whether an envelope ``message_id`` is still on the bus (queued or held back)."""
        return any(env.message_id == message_id for _d, _s, env in self._heap) \
            or any(env.message_id == message_id for _t, env in self._held)

    def again(self, env: Envelope, due: int) -> None:
        """Queue ``env`` once more, as it was, due in round ``due``: a session sending a lost message
        again (sim.session). No fault applies to it."""
        self._push(due, env)

    def release_stragglers(self, due: int) -> None:
        """The conversation was reopened: what was held for its next epoch arrives in round ``due``."""
        for env in self.stragglers:
            self._push(due, env)
        self.stragglers = []

    def release_held(self, now: int) -> None:
        """A message held ``max_hold`` rounds with nothing sent after it goes anyway:
        a reorder never loses a message."""
        keep = []
        for since, h in self._held:
            if now - since >= self.max_hold:
                self._push(now + 1, h)
            else:
                keep.append((since, h))
        self._held = keep

    def in_flight(self) -> list[Envelope]:
        """Every envelope on the bus, once per message id (a duplicate's two copies are one): those
        queued, by due round then send order, then those held back, in the order they were held."""
        seen: dict[str, Envelope] = {}
        for _d, _s, env in sorted(self._heap, key=lambda x: (x[0], x[1])):
            seen.setdefault(env.message_id, env)
        for _t, env in self._held:
            seen.setdefault(env.message_id, env)
        return list(seen.values())

    def pick(self, message_id: str) -> Envelope | None:
        """Take the envelope ``message_id`` off the bus now, whatever its due round (the earliest
        copy of a duplicate; a held-back one too): a delivery schedule chooses the order. None: it is
        not on the bus."""
        best = None
        for i, (d, s, env) in enumerate(self._heap):
            if env.message_id == message_id and (best is None or (d, s) < self._heap[best][:2]):
                best = i
        if best is not None:
            env = self._heap[best][2]
            self._heap[best] = self._heap[-1]
            self._heap.pop()
            heapq.heapify(self._heap)
            return env
        for i, (_t, env) in enumerate(self._held):
            if env.message_id == message_id:
                del self._held[i]
                return env
        return None

    def due(self, now: int) -> list[Envelope]:
        out = []
        while self._heap and self._heap[0][0] <= now:
            out.append(heapq.heappop(self._heap)[2])
        return out
