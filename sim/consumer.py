"""A consumer on plain data, adapted to the runtime's intake (exercise 3's interface).

The runtime's intake is a function with the signature of :func:`sim.intake.decide` (an
:data:`~sim.planner.IntakeFn`): engine records in, a :class:`~sim.intake.Verdict` out. Exercise 3
asks for the same judgement through another door, on plain data::

    consume(delivery, task, recorded, allowed, missing_refs) -> dict

* ``delivery``: the envelope as its wire JSON object (the keys of ``data/envelopes/*.json``);
* ``task``: the task as stored now (:data:`TASK_KEYS`; ``state`` as a string), or ``None``;
* ``recorded``: the intents already recorded under the delivery's ``(task_id, idempotency_key)``,
  each a dict (:data:`RECORD_KEYS`), in arrival order;
* ``allowed(from_state, to_state, role=None) -> bool``: the task's allowlist (:class:`Allowlist`);
  without a role, whether the machine has that move at all;
* ``missing_refs``: the delivery's ``evidence_refs`` that name nothing stored (a frozenset).

It answers a dict (:data:`ANSWER_KEYS`). :func:`adapt` turns such a function into an intake the
runtime, the contract suite and the simulator call exactly as they call the reference, and
:func:`verdict_of` reads an answer: a missing or malformed field is an :class:`AnswerError`, one line
naming the field. Who made a move is not the consumer's to say: the sender, in its role, or the
runtime when it freezes a conflict. No I/O here, and nothing of the terminal UI or the CLI.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .errors import ProtolabError
from .intake import Decision, IntentRecord, Move, TaskView, Verdict
from .machine import RuleBook, TaskState

__all__ = ["ANSWER_KEYS", "DECISIONS", "RECORD_KEYS", "TASK_KEYS", "Allowlist", "AnswerError", "adapt",
           "consume_args", "recorded_of", "task_of", "verdict_of"]

TASK_KEYS = ("task_id", "state", "state_version", "machine_version", "assignee", "lease_holder", "lease_version",
             "budget_left", "trusted", "has_effects")
RECORD_KEYS = ("message_id", "task_id", "idempotency_key", "payload", "payload_digest", "digest_scheme", "arrival")
ANSWER_KEYS = ("decision", "reason", "code", "move", "create", "lease", "duplicate_of", "conflict_with", "reconcile")
DECISIONS = tuple(d.value for d in Decision)
_STATES = {s.value: s for s in TaskState}


class AnswerError(ProtolabError):
    """The consumer's answer cannot be read: one line naming the field (code ``E_BAD_ANSWER``)."""

    def __init__(self, message: str):
        super().__init__(message, code="E_BAD_ANSWER")


@dataclass(frozen=True)
class Allowlist:
    """``allowed(from_state, to_state, role=None)``: whether the task's machine has the move
    ``from_state -> to_state`` for ``role`` (for any role, without one). States are their names
    (``"ready"``); a name the machine does not know is simply not allowed."""

    rules: RuleBook

    @property
    def version(self) -> str:
        return self.rules.version

    def __call__(self, from_state, to_state, role: str | None = None) -> bool:
        a, b = _STATES.get(getattr(from_state, "value", from_state)), _STATES.get(getattr(to_state, "value", to_state))
        if a is None or b is None:
            return False
        rule = self.rules.find(a, b)
        return rule is not None and (role is None or role in rule.roles)

    def __repr__(self) -> str:
        return f"<allowlist of {self.rules.version}>"


def task_of(view: TaskView | None) -> dict | None:
    if view is None:
        return None
    return {k: (view.state.value if k == "state" else getattr(view, k)) for k in TASK_KEYS}


def recorded_of(prior) -> list[dict]:
    return [{k: (dict(p.payload) if k == "payload" else getattr(p, k)) for k in RECORD_KEYS} for p in prior]


def consume_args(env, task, prior, rules: RuleBook, unresolved=frozenset()) -> tuple:
    """The plain arguments of ``consume`` for one delivery (the intake's own inputs, as data)."""
    return env.to_dict(), task_of(task), recorded_of(prior), Allowlist(rules), frozenset(unresolved)


def _state(value, what: str) -> TaskState:
    if isinstance(value, str) and value in _STATES:
        return _STATES[value]
    raise AnswerError(f"{what} is {value!r}: expected a state name ({', '.join(_STATES)})")


def _intent(answer: dict, name: str, prior) -> IntentRecord:
    mid = answer.get(name)
    if not isinstance(mid, str):
        raise AnswerError(f"a {answer['decision']} answer names the recorded intent's message_id in {name!r}; "
                          f"got {mid!r}")
    for p in prior:
        if p.message_id == mid:
            return p
    ids = ", ".join(p.message_id for p in prior) or "none"
    raise AnswerError(f"{name!r} is {mid!r}, which names no recorded intent (recorded: {ids})")


def verdict_of(answer, env, task: TaskView | None, prior) -> Verdict:
    """The :class:`Verdict` a consumer's answer stands for (see the module's docstring)."""
    if not isinstance(answer, dict):
        raise AnswerError(f"consume returned {type(answer).__name__}, not a dict with a 'decision'")
    unknown = [k for k in answer if k not in ANSWER_KEYS]
    if unknown:
        raise AnswerError(f"the answer has a field {unknown[0]!r} the runtime does not read "
                          f"(the fields are: {', '.join(ANSWER_KEYS)})")
    if "decision" not in answer:
        raise AnswerError("the answer has no 'decision' (one of: " + ", ".join(DECISIONS) + ")")
    d = answer["decision"]
    if d not in DECISIONS:
        raise AnswerError(f"'decision' is {d!r}: expected one of {', '.join(DECISIONS)}")
    decision = Decision(d)
    reason = answer.get("reason")
    if not isinstance(reason, str):
        raise AnswerError(f"'reason' is {reason!r}: every answer says why, in words (a str)")
    code = answer.get("code")
    if code is not None and not isinstance(code, str):
        raise AnswerError(f"'code' is {code!r}: expected a str such as 'E_STALE_VERSION', or None")
    if decision == Decision.REJECTED and code is None:
        raise AnswerError("a rejected answer says which rule refused it in 'code' (E_...)")
    move = answer.get("move")
    if move is not None:
        if not isinstance(move, dict) or set(move) != {"from", "to"}:
            raise AnswerError(f"'move' is {move!r}: expected None or a dict {{'from': state, 'to': state}}")
        a, b = _state(move["from"], "move['from']"), _state(move["to"], "move['to']")
        from .envelope import role_of

        try:
            who = ("runtime", "runtime") if decision == Decision.CONFLICT else (env.sender, role_of(env.sender))
        except ProtolabError:
            who = (env.sender, "")
        move = Move(a, b, reason, *who)
    flags = {}
    for name in ("create", "reconcile"):
        value = answer.get(name, False)
        if not isinstance(value, bool):
            raise AnswerError(f"{name!r} is {value!r}: expected True or False")
        flags[name] = value
    lease = answer.get("lease")
    if lease is not None and (isinstance(lease, bool) or not isinstance(lease, int) or not 0 < lease < 2 ** 62):
        raise AnswerError(f"'lease' is {lease!r}: expected None or the lease_version a start takes (an int > 0)")
    return Verdict(
        decision, reason, code=code, move=move, create=flags["create"], grant_lease=lease,
        record_intent=decision not in (Decision.DUPLICATE, Decision.REJECTED),
        duplicate_of=_intent(answer, "duplicate_of", prior) if decision == Decision.DUPLICATE else None,
        conflict_with=_intent(answer, "conflict_with", prior) if decision == Decision.CONFLICT else None,
        needs_reconciliation=flags["reconcile"],
    )


def adapt(consume: Callable) -> Callable:
    """An intake (``decide(env, task, prior, rules, unresolved)``) that asks ``consume``."""

    def decide(env, task, prior, rules, unresolved=frozenset()):
        answer = consume(*consume_args(env, task, prior, rules, unresolved))
        try:
            return verdict_of(answer, env, task, prior)
        except AnswerError as e:
            raise AnswerError(f"consume's answer to {env.message_id} ({env.type}) cannot be used: {e.message}") from None

    decide.__name__ = getattr(consume, "__name__", "consume")
    decide.consume = consume
    return decide
