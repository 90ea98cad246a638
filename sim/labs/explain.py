"""What a wrong answer names, told from the runs.

A learner who types ``M-17`` where the question wanted g-lowest's pick has not typed nonsense: M-17
is g-first's pick. Telling them "Not that" wastes what they saw. :func:`describe` reads the value
the way the lab's runs know it:

* a fact of the lab with that value and an ``about`` (``"g-first's pick (first accepted)"``);
* a message id: who sent what, for which task, and what became of each delivery (accepted,
  recorded late, refused with a code, a gather's pick, a publication), on the learner's side and,
  when it differs, on the other;
* a code: which delivery it refused, or which message the conversation's validation names;
* an invariant: whether it holds on each side, and the first witness;
* a task id: whose it is and its state; a trace id: the run's conversation and the report its
  effects target; an effect key: which message committed it; a task state: which tasks are in it.

Nothing here is typed by a lab: the words come from the runs, so they stay true when the runs change.
"""

from __future__ import annotations

import re

from .facts import POLICIES, Side, learner_values, reference_sides

__all__ = ["describe"]

_DECIDED = {"accepted": "accepted", "duplicate": "recorded as a duplicate", "conflict": "recorded as a conflict",
            "late": "recorded late"}


def _decision(d: dict) -> str:
    if d.get("decision") == "rejected":
        return f"refused with {d['code']}" if d.get("code") else "refused"
    return _DECIDED.get(d.get("decision"), d.get("decision") or "?")


def _message(side: Side, mid: str) -> str | None:
    m = side.messages().get(mid)
    if m is None:
        return None
    what = f"{m['sender']}'s {m['type']}" + (f" for {m['task_id']}" if m.get("task_id") else "")
    ds = [d for d in side.rows("delivery", "*") if d["message_id"] == mid]
    if not ds:
        said = "never delivered"
    elif len(ds) == 1:
        said = _decision(ds[0])
    else:
        said = f"delivered {len(ds)} times: " + ", then ".join(_decision(d) for d in ds)
    notes = []
    for g in side.rows("event", "gather_reduced"):
        if g.get("selected") == mid:
            notes.append(f"{g['gather']} picked it")
        if mid in [x.get("message") for x in g.get("dissent") or []]:
            notes.append(f"{g['gather']} kept it as dissent")
    for e in side.rows("event", "effect_committed"):
        if e.get("message_id") == mid:
            notes.append(f"it committed {e.get('effect_key') or 'an effect'}")
    return f"{what}, {said}" + (f" ({'; '.join(dict.fromkeys(notes))})" if notes else "")


def _code(side: Side, code: str) -> str | None:
    hits = [d for d in side.rows("delivery", "*") if d.get("code") == code]
    if hits:
        d = hits[0]
        return f"{code} refused {d['message_id']} ({d['sender']}'s {d['type']})" + \
            (f" and {len(hits) - 1} more" if len(hits) > 1 else "")
    found = [f for f in side.rows("trace", "errors") if f.get("code") == code]
    if found:
        return f"the conversation's validation gives {code} for {found[0]['message_id'] or 'the trace'}"
    return None


def _invariant(side: Side, name: str) -> str | None:
    rows = side.rows("invariant", name)
    if not rows:
        return None
    if rows[0]["status"] == "holds":
        return f"{name} holds"
    w = rows[0]
    at = " ".join(x for x in (w.get("task_id"), w.get("message_id")) if x)
    return f"{name} breaks" + (f" (first at {at})" if at else "")


def _task(side: Side, tid: str) -> str | None:
    t = next((r for r in side.rows("task", "*") if r["task_id"] == tid), None)
    if t is None:
        return None
    whose = f"{t['assignee']}'s task" if t.get("assignee") else "a task"
    return f"{tid} is {whose}, {t['state']} now"


def _trace(side: Side, rid: str) -> str | None:
    """A trace id: the run's conversation, and the report its effects publish."""
    if not any(r.get("trace_id") == rid for r in side.rows("task", "*")):
        return None
    targets = [e for e in side.rows("effect", "*") if e.get("target") == rid]
    return f"{rid} is the run's trace (its conversation)" + \
        (f" and the report its {targets[0]['kind']} effect targets, not a message" if targets else ", not a message")


def _state(side: Side, state: str) -> str | None:
    tasks = [r["task_id"] for r in side.rows("task", "*") if r["state"] == state]
    ever = sorted({r["task_id"] for r in side.rows("transition", "*") if r.get("new_state") == state})
    if tasks:
        return f"{', '.join(tasks)} {'is' if len(tasks) == 1 else 'are'} {state} now"
    if ever:
        return f"{', '.join(ever)} went through {state}"
    return None


def _effect(side: Side, key: str) -> str | None:
    e = next((r for r in side.rows("effect", "*") if r.get("effect_key") == key), None)
    if e is None:
        return None
    return f"{key} is the key of the {e['kind']} effect {e['message_id']} committed for {e['task_id']}, not a message"


def _kind(value: str):
    from ..invariants import REGISTRY as INVARIANTS
    from ..machine import TaskState

    if re.fullmatch(r"E_[A-Z0-9_]+", value):
        return _code
    if value in INVARIANTS:
        return _invariant
    if value in {s.value for s in TaskState}:
        return _state
    return None


def describe(lab, ctx, value: str) -> str | None:
    """What ``value`` names in the lab's runs, in a sentence or two (None: nothing they show)."""
    v = value.strip()
    if not v or len(v) > 200:
        return None
    said: list[str] = []
    told: set[str] = set()  # the sides a lab's own words already described the value on
    about = {n: f for n, f in lab.facts.items() if f.about}
    if about:
        values = ctx.cached(("about", lab.number), lambda: learner_values(lab, ctx.store, about))
        for n, f in about.items():
            side = f.side or lab.policy
            if side not in told and (values.get(n) or "").casefold() == v.casefold():
                told.add(side)
                where = "" if side == lab.policy or side in f.about else \
                    f" (on the {side} side)" if side in POLICIES else f" (in the {side} run)"
                said.append(f"{v} is {f.about}{where}.")
    own = ctx.cached(("side", lab.number), lambda: Side(ctx.store))
    ref = reference_sides(lab)
    others = [(p, ref(p)) for p in POLICIES if p != lab.policy] + [(n, ref(n)) for n in lab.runs]
    kind = _kind(v)
    if kind is None:
        tasks = own.rows("task", "*")
        kind = _task if any(r["task_id"] == v for r in tasks) else \
            _trace if any(r.get("trace_id") == v for r in tasks) else \
            _effect if any(r.get("effect_key") == v for r in own.rows("effect", "*")) else _message
    mine = kind(own, v)
    if mine and lab.policy not in told:
        said.append(f"In your run, {v} is {mine}." if kind is _message else f"In your run, {mine}.")
    for name, side in others:
        if side is None:
            continue
        theirs = kind(side, v)
        if theirs and theirs != mine and name not in told:
            where = f"the {name} side" if name in POLICIES else f"the {name} run"
            said.append(f"On {where}, {v} is {theirs}." if kind is _message else f"On {where}, {theirs}.")
        if theirs and name not in POLICIES:
            break
    return " ".join(said) or None
