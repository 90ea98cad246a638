"""The invariants' contract: for every invariant, runs where it must hold and planted violations
where it must break, naming the rows that witness it. Usable against any implementation of
:func:`sim.invariants.check` (a student's, a rewrite)::

    from sim.contracts.invariants import run, report
    print(report(run(my_check)))

Each :class:`Case` builds a store (a scenario under a policy and faults, or envelopes delivered by
hand, sometimes under a planted intake that does one wrong thing), names the invariant, whether it
must hold, and what the first witness must say. The reference (``sim.invariants.check``) passes
every case (``tests/test_invariant_contract.py``); each way an invariant could be wrong, too lax or
too strict, is one case.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Iterable

__all__ = ["Case", "CASES", "check_case", "run", "report"]


@dataclass(frozen=True)
class Case:
    name: str  # a sentence: the situation and what the invariant must say
    invariant: str
    holds: bool
    build: Callable[[], object]  # -> Store
    witness: dict = field(default_factory=dict)  # fields the first witness must carry (when broken)


# ------------------------------------------------------------------------------------- builders


def _scenario(name: str = "publish-report", *, policy: str = "safe", faults=(), seed: int = 0, plugins=None):
    def build():
        from ..runner import run_scenario
        from ..scenario import load_scenario

        return run_scenario(load_scenario(name), policy=policy, faults=list(faults), seed=seed, plugins=plugins,
                            strict_faults=False)

    return build


def _hand(*make_envs, policy=None, expire_after: str | None = None):
    """Envelopes delivered by hand into a fresh store (``expire_after``: the lease monitor expires
    the task's lease right after that message)."""

    def build():
        from ..policy import SAFE, get_policy
        from ..runtime import deliver, expire_lease
        from ..store import Store

        pol = get_policy(policy) if isinstance(policy, str) else (policy or SAFE)
        store = Store.memory()
        for make in make_envs:
            env = make()
            deliver(store, env, policy=pol)
            if expire_after is not None and env.message_id == expire_after:
                expire_lease(store, env.task_id)
        return store

    return build


def _env(mid, typ, payload, key, *, task="T-1", sender="researcher", recipient="manager", refs=(), version="1"):
    from ..envelope import build_envelope

    return lambda: build_envelope(message_id=mid, trace_id="R-1", task_id=task, sender=sender, recipient=recipient,
                                  type=typ, payload=payload, idempotency_key=key, created_at="2026-07-13T04:00:10Z",
                                  evidence_refs=refs, schema_version=version)


def _unheld():
    from ..policy import SAFE

    return replace(SAFE, name="unheld", hold_untrusted=False)


def _unredacted():
    from ..policy import SAFE

    return replace(SAFE, name="unredacted", redact=False)


def _unminimised():
    from ..policy import SAFE

    return replace(SAFE, name="unminimised", minimise=False)


def _open_payloads():
    from ..policy import SAFE

    return replace(SAFE, name="open-payloads", closed_payloads=False)


def _digest_believed():
    from ..policy import SAFE

    return replace(SAFE, name="digest-believed", checks_digests=False)


def _no_conversation_rules():
    from ..policy import SAFE

    return replace(SAFE, name="no-conversation-rules", conversation_rules=False)


def _planted(fn):
    from ..policy import SAFE

    return replace(SAFE, name="planted", decide=fn)


def _ack_moves(env, task, prior, rules, unresolved=frozenset()):
    """Planted: an acknowledgement completes the task it acknowledges."""
    from ..intake import Decision, Move, Verdict
    from ..intake import decide as ref
    from ..machine import TaskState

    if env.type == "ack" and task is not None and task.state == TaskState.RUNNING:
        return Verdict(Decision.ACCEPTED, "planted: an ack completes the task",
                       move=Move(task.state, TaskState.SUCCEEDED, "planted", env.sender, "manager"), record_intent=True)
    return ref(env, task, prior, rules, unresolved)


def _ack_freezes(env, task, prior, rules, unresolved=frozenset()):
    """Planted: an accepted acknowledgement (not a conflict) freezes the task."""
    from ..intake import Decision, Move, Verdict
    from ..intake import decide as ref
    from ..machine import TaskState

    if env.type == "ack" and task is not None and task.state == TaskState.RUNNING:
        return Verdict(Decision.ACCEPTED, "planted", move=Move(task.state, TaskState.NEEDS_REVIEW, "planted",
                                                                env.sender, "runtime"), record_intent=True)
    return ref(env, task, prior, rules, unresolved)


def _conflict_as_late(env, task, prior, rules, unresolved=frozenset()):
    """Planted: a second payload under a recorded key is filed as late, and nothing freezes."""
    from ..intake import Decision
    from ..intake import decide as ref

    v = ref(env, task, prior, rules, unresolved)
    return replace(v, decision=Decision.LATE, move=None) if v.decision == Decision.CONFLICT else v


def _conflict_accepted(env, task, prior, rules, unresolved=frozenset()):
    """Planted: a conflict is recorded as such but nothing freezes."""
    from ..intake import Decision
    from ..intake import decide as ref

    v = ref(env, task, prior, rules, unresolved)
    return replace(v, move=None) if v.decision == Decision.CONFLICT else v


class _ClockKeys:
    """Planted design: keys derived from the message id, so a resend looks like a new intent."""

    name = "message-id keys"
    digest_scheme = "json-sorted-v1"

    def idempotency_key(self, i):
        from ..design import REFERENCE

        return f"{REFERENCE.idempotency_key(i)}:{i.message_id}"

    def payload(self, i):
        return dict(i.body)

    def evidence_refs(self, i):
        return list(i.refs)


def _m(name):
    from .. import samples

    return getattr(samples, name)


def _conflicting():
    from .. import samples

    return samples.conflicting_m3()


def _unresolved_result():
    """T-1's result citing M-77, a message that was never stored."""
    return _env("M-3", "task_result", {"status": "succeeded", "lease_version": 1, "summary": "no table"},
                "R-1:T-1:attempt-1", refs=("M-77",))()


def _plugins_design():
    from ..plugins import Plugins

    return Plugins(design=_ClockKeys())


def _two_writers(*, stale_clock: bool = False, skip_id: bool = False):
    """Two handles on one file writing in turn, as two processes do: A delivers the story's first
    three messages, B (opened before A wrote anything) stores an artifact, then delivers an ack.
    ``stale_clock`` plants a B that read the clock when it opened and never again; ``skip_id``
    a B that skips a delivery id. Returns an in-memory copy (the file is removed)."""

    def build():
        import shutil
        import tempfile
        from pathlib import Path

        from ..runtime import deliver, put_artifact
        from ..store import Store

        class ClockFromOpen(Store):
            def _refresh(self):  # planted: the counters stay as they were read at open
                pass

        folder = tempfile.mkdtemp(prefix="protolab-contract-")
        try:
            path = Path(folder) / "run.db"
            Store.create(path).close()
            a = Store.open(path)
            b = (ClockFromOpen if stale_clock else Store).open(path)
            for make in (_m("m1"), _m("m2"), _m("m3")):
                deliver(a, make())
            put_artifact(b, {"kind": "note", "text": "written by the second writer"}, task_id="T-1")
            if skip_id:
                b._next_delivery += 1  # planted: b skips an id (nobody wrote since b's last look)
            if not stale_clock:  # (a stale b would also reuse delivery id 1: the store refuses that write)
                deliver(b, _env("A-3", "ack", {"of": "M-3"}, "R-1:T-1:ack:M-3", sender="manager",
                                recipient="researcher")())
            out = a.copy()
            a.close()
            b.close()
            return out
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    return build


# ------------------------------------------------------------------------------------- the cases

CASES: tuple[Case, ...] = (
    # NO_STATE_REGRESSION
    Case("a late failure after success, recorded as late, regresses nothing", "NO_STATE_REGRESSION", True,
         _scenario(faults=["late-failure"])),
    Case("last-write-wins moves a succeeded task to failed, by the late message", "NO_STATE_REGRESSION", False,
         _scenario(policy="naive", faults=["late-failure"]),
         {"task_id": "T-1", "old_state": "succeeded", "new_state": "failed"}),
    Case("a conflict escalating a succeeded task to needs_review is not a regression", "NO_STATE_REGRESSION", True,
         _scenario(faults=["conflicting-digest"])),
    # EFFECT_AT_MOST_ONCE
    Case("the publishing result delivered twice publishes once", "EFFECT_AT_MOST_ONCE", True,
         _scenario(faults=["duplicate"])),
    Case("resent under a new message id, the result still publishes once", "EFFECT_AT_MOST_ONCE", True,
         _scenario(faults=["resend"])),
    Case("last-write-wins publishes the report twice", "EFFECT_AT_MOST_ONCE", False,
         _scenario(policy="naive", faults=["duplicate"]), {"task_id": "T-2", "times_committed": 2}),
    # CONFLICT_FROZEN
    Case("a second payload under one key freezes the task", "CONFLICT_FROZEN", True,
         _scenario(faults=["conflicting-digest"])),
    Case("last-write-wins applies the second payload and nothing freezes", "CONFLICT_FROZEN", False,
         _scenario(policy="naive", faults=["conflicting-digest"]), {"task_id": "T-1"}),
    Case("a second payload filed as late, not frozen, is caught too", "CONFLICT_FROZEN", False,
         _hand(_m("m1"), _m("m2"), _m("m3"), _conflicting, policy=_planted(_conflict_as_late)), {"task_id": "T-1"}),
    Case("a conflict recorded but not frozen is caught", "CONFLICT_FROZEN", False,
         _hand(_m("m1"), _m("m2"), _m("m3"), _conflicting, policy=_planted(_conflict_accepted)), {"task_id": "T-1"}),
    # NO_LOST_UPDATE
    Case("a crashed worker's late commit is fenced", "NO_LOST_UPDATE", True, _scenario(faults=["crash"])),
    Case("last-write-wins accepts the crashed worker's stale commit", "NO_LOST_UPDATE", False,
         _scenario(policy="naive", faults=["crash"]), {"task_id": "T-1"}),
    Case("a commit under a lease that expired is a lost update, even before a new lease is granted",
         "NO_LOST_UPDATE", False, _hand(_m("m1"), _m("m2"), _m("m3"), policy="naive", expire_after="M-2"),
         {"task_id": "T-1", "message_id": "M-3"}),
    Case("a commit naming a lease that was never granted is a lost update", "NO_LOST_UPDATE", False,
         _hand(_m("m1"), _m("m2"), _env("M-3", "task_result", {"status": "succeeded", "lease_version": 2},
                                        "R-1:T-1:attempt-1"), policy="naive"),
         {"task_id": "T-1", "message_id": "M-3"}),
    Case("the holder's commit under the current lease is no lost update", "NO_LOST_UPDATE", True,
         _hand(_m("m1"), _m("m2"), _m("m3"))),
    # EVIDENCE_RESOLVES
    Case("every accepted message cites stored evidence in a whole run", "EVIDENCE_RESOLVES", True, _scenario()),
    Case("an accepted result citing a message that does not exist", "EVIDENCE_RESOLVES", False,
         _hand(_m("m1"), _m("m2"), _unresolved_result, policy="naive"), {"message_id": "M-3"}),
    Case("safe refuses a result citing a message nobody sent; the worker's retry lands", "EVIDENCE_RESOLVES", True,
         _scenario(faults=["phantom-citation"])),
    Case("naive accepts a result citing a made-up source", "EVIDENCE_RESOLVES", False,
         _scenario(policy="naive", faults=["phantom-citation"]),
         {"message_id": "M-3", "ref": "M-4", "ref_kind": "message", "problem": "no stored message has this ref"}),
    # ACK_IS_NOT_COMPLETION
    Case("acknowledgements in a whole run move nothing", "ACK_IS_NOT_COMPLETION", True, _scenario()),
    Case("an ack that completes its task is caught", "ACK_IS_NOT_COMPLETION", False,
         _hand(_m("m1"), _m("m2"), _env("A-1", "ack", {"of": "M-2"}, "R-1:T-1:ack:M-2", sender="manager",
                                        recipient="researcher"), policy=_planted(_ack_moves)),
         {"ack_message_id": "A-1", "task_id": "T-1"}),
    Case("an accepted ack freezing its task is caught (only a conflict may freeze)", "ACK_IS_NOT_COMPLETION", False,
         _hand(_m("m1"), _m("m2"), _env("A-1", "ack", {"of": "M-2"}, "R-1:T-1:ack:M-2", sender="manager",
                                        recipient="researcher"), policy=_planted(_ack_freezes)),
         {"ack_message_id": "A-1"}),
    # TRANSITIONS_ALLOWED
    Case("every move of a run with faults is a rule of its machine", "TRANSITIONS_ALLOWED", True,
         _scenario("fan-out", faults=["crash", "conflicting-digest"])),
    Case("last-write-wins makes a move no rule allows", "TRANSITIONS_ALLOWED", False,
         _scenario(policy="naive", faults=["late-failure"]), {"old_state": "succeeded", "new_state": "failed"}),
    # RESEND_DEDUPLICATED
    Case("a resend of one intent is a duplicate of the original", "RESEND_DEDUPLICATED", True,
         _scenario(faults=["resend"])),
    Case("keys made from the message id turn a resend into a new intent", "RESEND_DEDUPLICATED", False,
         lambda: _scenario(faults=["resend"], plugins=_plugins_design())(), {}),
    # CLOCK_MONOTONIC
    Case("a run under delays and reordering keeps its clock and its delivery ids", "CLOCK_MONOTONIC", True,
         _scenario("fan-out", faults=["delay", "reorder", "crash"])),
    Case("two writers on one file, each reading the clock inside its transaction, keep one clock", "CLOCK_MONOTONIC",
         True, _two_writers()),
    Case("a writer that read the clock when it opened puts an event before the newest", "CLOCK_MONOTONIC", False,
         _two_writers(stale_clock=True), {"problem": "an event's tick is before the previous event's",
                                          "type": "artifact_stored", "event_seq": 13, "previous_event_seq": 12, "tick": 1}),
    Case("a writer that skips a delivery id leaves a gap", "CLOCK_MONOTONIC", False,
         _two_writers(skip_id=True), {"problem": "delivery ids skip", "delivery_id": 4, "next_delivery_id": 5}),
    # EFFECT_HAS_EVIDENCE
    Case("every publication of a run with faults rests on a stored artifact", "EFFECT_HAS_EVIDENCE", True,
         _scenario("fan-out", faults=["duplicate", "resend", "crash"])),
    Case("a paraphrased publishing result is refused, and its retry publishes with the evidence",
         "EFFECT_HAS_EVIDENCE", True, _scenario(faults=["lost-evidence"])),
    Case("naive publishes a paraphrase that cites nothing", "EFFECT_HAS_EVIDENCE", False,
         _scenario(policy="naive", faults=["lost-evidence"]),
         {"problem": "committed from a result that cites no stored evidence", "message_id": "M-6", "task_id": "T-2"}),
    Case("a publication citing only a request, which cites nothing, reaches no primary evidence",
         "EFFECT_HAS_EVIDENCE", False,
         _hand(_m("m1"), _m("m2"), _env("M-3", "task_result", {"status": "succeeded", "lease_version": 1,
                                                               "effect": {"kind": "publish", "target": "R-1"}},
                                        "R-1:T-1:attempt-1", refs=("M-1",))),
         {"problem": "its evidence reaches no stored artifact", "message_id": "M-3", "evidence_refs": ["M-1"]}),
    # ACK_IS_NOT_COMPLETION, under a fault
    Case("a worker's early receipt of its request is recorded and moves nothing under safe", "ACK_IS_NOT_COMPLETION",
         True, _scenario(faults=["receipt"])),
    Case("naive takes the researcher's receipt of its request for the task's completion", "ACK_IS_NOT_COMPLETION",
         False, _scenario(policy="naive", faults=["receipt"]),
         {"ack_message_id": "M-2", "task_id": "T-1", "of": "M-1", "sender": "researcher"}),
    # VERSION_READ
    Case("a result in major 2 is refused under safe, and its retry in 1 lands", "VERSION_READ", True,
         _scenario(faults=["new-major"])),
    Case("a result in schema 1.1 is read by the safe runtime, which speaks 1.1", "VERSION_READ", True,
         _scenario(faults=["upgrade"])),
    Case("naive applies a result in major 2 as if it could read it", "VERSION_READ", False,
         _scenario(policy="naive", faults=["new-major"]),
         {"message_id": "M-3", "schema_version": "2.0", "decision": "accepted", "task_id": "T-1"}),
    Case("naive applies a request in major 0", "VERSION_READ", False,
         _scenario(policy="naive", faults=["stale-schema"]), {"schema_version": "0", "type": "task_request"}),
    # NEWER_FIELDS_READ
    Case("the safe runtime reads the 1.1 mark and withholds the partial draft's publication", "NEWER_FIELDS_READ",
         True, _scenario(faults=["upgrade"])),
    Case("a result delivered by hand in 1.1, not partial, publishes", "NEWER_FIELDS_READ", True,
         _hand(_m("m1"), _m("m2"), _env("M-3", "task_result", {"status": "succeeded", "lease_version": 1,
                                                               "partial": False, "artifact": "M-1",
                                                               "effect": {"kind": "publish", "target": "R-1"}},
                                        "R-1:T-1:attempt-1", refs=("M-1",), version="1.1"))),
    Case("naive reads the 1.1 result as 1.0, drops the mark and publishes the partial draft", "NEWER_FIELDS_READ",
         False, _scenario(policy="naive", faults=["upgrade"]),
         {"message_id": "M-6", "task_id": "T-2", "schema_version": "1.1", "effect_key": "publish:R-1:T-2#d9"}),
    # DISSENT_KEPT and TIE_BREAK_KEPT (scenario gathers: a QUORUM with one dissent, FIRST_SUCCESS under both tie-breaks)
    Case("safe keeps the reviewer who dissents beside the quorum's value", "DISSENT_KEPT", True,
         _scenario("gathers")),
    Case("naive takes the majority's verdict and drops the dissent", "DISSENT_KEPT", False,
         _scenario("gathers", policy="naive"),
         {"gather": "g-review", "dissent_dropped": ["M-21"], "problem": "dissent M-21 dropped"}),
    Case("safe picks the first accepted candidate and the lowest sender as declared", "TIE_BREAK_KEPT", True,
         _scenario("gathers")),
    Case("naive picks the candidate whose sender's clock runs ten minutes behind", "TIE_BREAK_KEPT", False,
         _scenario("gathers", policy="naive"),
         {"gather": "g-first", "picked": "M-24", "declared": "M-23", "tie_break": "supplied-order"}),
    # NO_STATE_FROM_UNDECLARED (closed payloads: a field no message type declares)
    Case("safe refuses the researcher's self-reported budget_left, and its retry without it lands",
         "NO_STATE_FROM_UNDECLARED", True, _scenario(faults=["self-report"])),
    Case("a scenario's declared sensitive fields count as declared, even under naive", "NO_STATE_FROM_UNDECLARED",
         True, _scenario("sensitive-source", policy="naive")),
    Case("an undeclared field on a message naive refuses (its task does not exist) changes nothing",
         "NO_STATE_FROM_UNDECLARED", True,
         _hand(_m("m1"), _env("M-3", "task_result", {"status": "succeeded", "lease_version": 1, "approved": True},
                              "R-9:T-9:attempt-1", task="T-9"), policy="naive")),
    Case("a run whose envelopes a plugged-in design wrote is not held to the reference design's fields",
         "NO_STATE_FROM_UNDECLARED", True, lambda: _scenario(faults=["self-report"], plugins=_plugins_design())()),
    Case("naive believes the researcher's budget_left: T-1's budget goes from 2 to the 99 it claimed",
         "NO_STATE_FROM_UNDECLARED", False, _scenario(policy="naive", faults=["self-report"]),
         {"message_id": "M-3", "task_id": "T-1", "fields": ["budget_left"], "decision": "accepted",
          "believed": {"budget_left": {"claimed": 99, "before": 2, "after": 99}}}),
    Case("a runtime that keeps every other rule but takes an undeclared field is caught, budget or not",
         "NO_STATE_FROM_UNDECLARED", False, lambda: _scenario(policy=_open_payloads(), faults=["self-report"])(),
         {"message_id": "M-3", "fields": ["budget_left"], "believed": {}}),
    Case("naive takes a result that approves itself (approved: true, declared nowhere)", "NO_STATE_FROM_UNDECLARED",
         False, _hand(_m("m1"), _m("m2"), _env("M-3", "task_result", {"status": "succeeded", "lease_version": 1,
                                                                      "approved": True}, "R-1:T-1:attempt-1"),
                      policy="naive"),
         {"message_id": "M-3", "fields": ["approved"], "claimed": {"approved": True}, "decision": "accepted"}),
    Case("partial in a message that says 1.1 is declared (1.1 added it), even for naive, which drops it",
         "NO_STATE_FROM_UNDECLARED", True,
         _hand(_m("m1"), _m("m2"), _env("M-3", "task_result", {"status": "succeeded", "lease_version": 1,
                                                               "partial": True}, "R-1:T-1:attempt-1", version="1.1"),
               policy="naive")),
    # PAYLOAD_MATCHES_DIGEST
    Case("safe refuses the researcher's result whose summary changed in transit, and its retry lands",
         "PAYLOAD_MATCHES_DIGEST", True, _scenario(faults=["garble"])),
    Case("where the log keeps [redacted] values, a duplicate and a garbled result are judged at intake, not from "
         "the log", "PAYLOAD_MATCHES_DIGEST", True, _scenario("sensitive-source", faults=["duplicate", "garble"])),
    Case("naive takes the researcher's result whose summary changed in transit, digest kept",
         "PAYLOAD_MATCHES_DIGEST", False, _scenario(policy="naive", faults=["garble"]),
         {"message_id": "M-3", "task_id": "T-1", "decision": "accepted", "digest_scheme": "json-sorted-v1"}),
    Case("a runtime that keeps every other rule but believes the digest it is handed is caught",
         "PAYLOAD_MATCHES_DIGEST", False, lambda: _scenario(policy=_digest_believed(), faults=["garble"])(),
         {"message_id": "M-3", "decision": "accepted"}),
    # NO_EFFECT_FROM_UNTRUSTED
    Case("a late conflict freezes T-1 after its table was handed on, and T-2's result is held, not published",
         "NO_EFFECT_FROM_UNTRUSTED", True, _scenario(faults=["late-conflict"])),
    Case("a conflict that freezes T-1 before anything rests on it", "NO_EFFECT_FROM_UNTRUSTED", True,
         _scenario(faults=["conflicting-digest"])),
    Case("naive publishes T-2 from the table of a task that got two payloads under one key",
         "NO_EFFECT_FROM_UNTRUSTED", False, _scenario(policy="naive", faults=["late-conflict"]),
         {"problem": "committed from an input that was untrusted at that moment", "task_id": "T-2",
          "input_task": "T-1"}),
    Case("a runtime that freezes the conflict but lets the dependent result publish is caught",
         "NO_EFFECT_FROM_UNTRUSTED", False, lambda: _scenario(policy=_unheld(), faults=["late-conflict"])(),
         {"task_id": "T-2", "input_task": "T-1", "message_id": "M-7"}),
    # PAYLOAD_MINIMIZATION
    Case("the safe runtime sends the writer only the source's name and logs every sensitive value redacted",
         "PAYLOAD_MINIMIZATION", True, _scenario("sensitive-source")),
    Case("dedup and conflict freezing keep working over redacted logs", "PAYLOAD_MINIMIZATION", True,
         _scenario("sensitive-source", faults=["duplicate", "conflicting-digest", "resend"])),
    Case("a run that declares no sensitive field holds it, even under the naive policy", "PAYLOAD_MINIMIZATION",
         True, _scenario(policy="naive")),
    Case("naive logs the source's contact in the clear", "PAYLOAD_MINIMIZATION", False,
         _scenario("sensitive-source", policy="naive"),
         {"problem": "kept in the clear in the message log", "message_id": "M-3", "recipient": "manager"}),
    Case("a runtime that minimises but keeps the logs in the clear is caught", "PAYLOAD_MINIMIZATION", False,
         lambda: _scenario("sensitive-source", policy=_unredacted())(),
         {"problem": "kept in the clear in the message log", "message_id": "M-3"}),
    Case("a runtime that redacts the logs but sends the writer the source's email and phone is caught",
         "PAYLOAD_MINIMIZATION", False, lambda: _scenario("sensitive-source", policy=_unminimised())(),
         {"problem": "sent to writer, which does not need it", "message_id": "M-4",
          "fields": ["source_email", "source_phone"]}),
    # The conversation's rules (judged by the trace validator on the run's exported conversation)
    # SEQUENCE_KEPT
    Case("the safe runtime's session keeps each sender in sequence under loss and reordering", "SEQUENCE_KEPT", True,
         _scenario("fan-out", faults=["drop", "reorder", "delay"])),
    Case("naive takes the researcher's retry after its lost result: a number the conversation never saw",
         "SEQUENCE_KEPT", False, _scenario(policy="naive", faults=["drop"]),
         {"code": "E_SEQUENCE_GAP", "message_id": "M-4", "epoch": 1}),
    Case("naive re-executes the publishing result: one message id taken twice", "SEQUENCE_KEPT", False,
         _scenario(policy="naive", faults=["duplicate"]), {"code": "E_DUPLICATE_MESSAGE", "message_id": "M-6"}),
    # FENCE_FINAL
    Case("the safe runtime refuses the manager's request after its own fence", "FENCE_FINAL", True,
         _scenario(faults=["afterthought"])),
    Case("a conflicting result arriving after the fence is refused and sent to reconciliation, changing nothing",
         "FENCE_FINAL", True, _scenario(faults=["late-conflict:M-6"])),
    Case("naive takes a request after the fence", "FENCE_FINAL", False, _scenario(policy="naive", faults=["afterthought"]),
         {"code": "E_POST_TERMINAL_MESSAGE", "message_id": "M-8"}),
    Case("a runtime that keeps every intake rule but not the conversation's creates a task after the fence",
         "FENCE_FINAL", False, lambda: _scenario(policy=_no_conversation_rules(), faults=["afterthought"])(),
         {"code": "E_POST_TERMINAL_MESSAGE", "message_id": "M-8"}),
    # CURRENT_SPEAKERS
    Case("the safe runtime refuses the old body of a restarted worker, however current its lease", "CURRENT_SPEAKERS",
         True, _scenario(faults=["zombie"])),
    Case("naive takes the old body's result after the worker was restarted", "CURRENT_SPEAKERS", False,
         _scenario(policy="naive", faults=["zombie"]), {"code": "E_STALE_GENERATION", "message_id": "M-3"}),
    # AUDIENCE_KEPT
    Case("the safe runtime refuses a result addressed to another worker", "AUDIENCE_KEPT", True,
         _scenario(faults=["overshare"])),
    Case("naive delivers the researcher's result to the writer, outside the results' audience", "AUDIENCE_KEPT", False,
         _scenario(policy="naive", faults=["overshare"]), {"code": "E_AUDIENCE_LABEL", "message_id": "M-4"}),
    # WITHIN_BOUNDS
    Case("a run inside its declared deadline and ceiling", "WITHIN_BOUNDS", True, _scenario("fan-out")),
    Case("the safe runtime refuses a receipt after the deadline and a flood past the ceiling", "WITHIN_BOUNDS", True,
         _scenario(faults=["overtime", "flood"])),
    Case("naive takes a receipt delivered after the conversation's deadline", "WITHIN_BOUNDS", False,
         _scenario(policy="naive", faults=["overtime"]), {"code": "E_DEADLINE", "message_id": "A-5"}),
    Case("naive takes every message of a flood, past the conversation's ceiling", "WITHIN_BOUNDS", False,
         _scenario(policy="naive", faults=["flood"]), {"code": "E_MESSAGE_CEILING"}),
    # CURRENT_SPEAKERS, of the declared bounds and epochs
    Case("naive takes a receipt delivered after it expired", "CURRENT_SPEAKERS", False,
         _scenario(policy="naive", faults=["linger"]), {"code": "E_EXPIRED_MESSAGE", "message_id": "A-5"}),
    Case("the safe runtime refuses a message of epoch 1 delivered after a reviewer reopened the conversation",
         "CURRENT_SPEAKERS", True, _scenario("reopened", faults=["straggler"])),
    Case("naive takes a message of epoch 1 in epoch 2", "CURRENT_SPEAKERS", False,
         _scenario("reopened", policy="naive", faults=["straggler"]), {"code": "E_STALE_EPOCH", "epoch": 2}),
    # AUDIENCE_KEPT, of scope
    Case("naive takes a copy of a result sent in another conversation", "AUDIENCE_KEPT", False,
         _scenario(policy="naive", faults=["cross-talk"]), {"code": "E_AUDIENCE_SCOPE"}),
    # TRACE_CONSISTENT
    Case("the safe runtime's gathers are the reductions of their contributions", "TRACE_CONSISTENT", True,
         _scenario("gathers")),
    Case("naive's quorum drops the dissent: its recorded result is not the reduction of what it took",
         "TRACE_CONSISTENT", False, _scenario("gathers", policy="naive"),
         {"code": "E_GATHER_RESULT_MISMATCH", "gather": "g-review", "message_id": None}),
)


def check_case(check: Callable, case: Case) -> list[str]:
    """What is wrong with ``check``'s verdict on ``case`` ([] when right). Never raises."""
    try:
        store = case.build()
    except Exception as e:  # a broken case is a suite bug; say so rather than blame the judge
        return [f"the case could not be built: {type(e).__name__}: {e}"]
    try:
        results = {r.name: r for r in check(store)}
    except Exception as e:
        return [f"check raised {type(e).__name__}: {e}"]
    finally:
        store.close()
    r = results.get(case.invariant)
    if r is None:
        return [f"{case.invariant} is not among the results"]
    if r.ok != case.holds:
        w = r.witnesses[0] if r.witnesses else {}
        return [f"{case.invariant} {'broke' if not r.ok else 'held'}; it must "
                f"{'hold' if case.holds else 'break'}" + (f" (first witness: {w})" if w else "")]
    if not case.holds:
        if not r.witnesses:
            return [f"{case.invariant} broke without a witness"]
        w = r.witnesses[0]
        wrong = {k: (w.get(k), v) for k, v in case.witness.items() if w.get(k) != v}
        if wrong:
            return [f"the first witness has {k}={got!r}, expected {want!r}" for k, (got, want) in wrong.items()]
    return []


def run(check: Callable, cases: Iterable[Case] = CASES) -> list[tuple[Case, list[str]]]:
    return [(c, check_case(check, c)) for c in cases]


def report(results) -> str:
    lines = []
    bad = [(c, f) for c, f in results if f]
    for c, f in bad:
        lines.append(f"FAIL {c.invariant}: {c.name}")
        lines.extend(f"     - {m}" for m in f)
    lines.append(f"{len(results) - len(bad)}/{len(results)} invariant contract cases pass")
    return "\n".join(lines)
