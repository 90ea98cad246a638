"""A lab's facts: named, small queries over its runs, so that no text of a lab names a message id,
a task, a code, a state or a count that its runs do not show.

A lab declares them in ``lab.toml``::

    [facts]
    lowest_pick = { gather = "g-lowest", field = "selected", about = "g-lowest's pick (the lowest sender)" }
    late_retry  = { delivery = "task_result", where = { decision = "late" }, field = "message_id" }
    naive_pick  = { gather = "g-first", side = "naive", field = "selected" }
    dissents    = { gather = "g-review", field = "dissent.#" }
    refused     = { delivery = "*", where = { decision = "rejected" }, count = true }

Each fact has exactly one *kind* key, from a closed registry (:data:`KINDS`), whose value selects
the rows it reads (a message type, an event type, a gather, an invariant, ...), and options:

``field``   the column (or event data key) whose value the fact is; ``a.b`` reads inside a value,
            ``a.0`` a list's first item, ``a.#`` counts a list;
``count``   ``true``: the number of rows that match, instead of a field;
``where``   ``{column = value}``: only rows whose column is that value (a list: any of them; a key
            ending in ``~``: contains it; in ``!``: is not it); a value may name another fact,
            ``"{other}"``;
``nth``     which matching row (1: the first, the default; -1: the last);
``all``     ``true``: the field of every matching row, each value once, in order ("succeeded, failed");
``side``    the run it is read from: the lab's own policy by default (the learner's run), the other
            policy (``"safe"`` or ``"naive"``: the same scenario, seed, faults and reference path),
            or a run the lab declares under ``[runs]`` (``protolab run`` with other options);
``map``     ``{value = "words"}``: the fact is the words for the value it found (a value not in the
            map gives nothing, which a test reports);
``about``   what the value *is*, in words: a wrong answer that types it is told so.

Text of a lab (a step, a hint, a ``shows`` line, a question, its choices, its feedback, the README)
names facts as ``{name}``; a question's ``answer`` may be such a template too. Facts are evaluated:

* on the lab's **reference run** (:func:`reference_values`): its reference path (``[[reference]]``)
  played on both sides, once per process. Every text a face prints is filled from it
  (:func:`render`), and the tests hold every fact used in a text to that run;
* on the **learner's own run** (:func:`learner_values`) for answers: the learner's side is their
  run as it is now; other sides are the reference's.

Unknown kinds, options, sides, event types, invariants, columns or fact names fail the lab's load
(E_LAB_FILE), as an unknown check does.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass, field as _field
from typing import Callable, Iterable

from ..errors import InputError, ProtolabError

__all__ = ["Fact", "RunSpec", "KINDS", "BUILTINS", "PLACEHOLDER", "parse_facts", "parse_runs", "placeholders",
           "fill_known", "Side", "evaluate", "reference_sides", "reference_values", "learner_values",
           "render", "literals", "lab_literals", "shown_order", "answer_placed", "saw_fields", "format_value"]

#: ``{name}`` in a lab's text: a fact, a builtin, or (in hints and ``shows`` lines) a field a check saw.
PLACEHOLDER = re.compile(r"\{([a-z][a-z0-9_]*)\}")

#: Names every lab may use without declaring them: the lab's own settings.
BUILTINS = ("lab", "db", "scenario", "seed", "policy", "faults", "minutes")

OPTIONS = ("field", "count", "all", "where", "nth", "side", "map", "about")
POLICIES = ("safe", "naive")


def _columns(cls) -> tuple[str, ...]:
    return tuple(cls.COLUMNS)


def _kind_columns() -> dict[str, tuple[str, ...] | None]:
    """The columns each kind's rows have (None: any key, as an invariant's witnesses vary)."""
    from ..store.rows import DeliveryView, Effect, Message, TaskRow, Transition

    event_cols = ("seq", "tick", "created_at", "type", "task_id", "message_id", "delivery_id")
    return {
        "delivery": tuple(dict.fromkeys(_columns(DeliveryView) + _columns(Message) + ("n",))),
        "message": _columns(Message),
        "event": event_cols,  # and the event type's data keys (checked per type)
        "task": _columns(TaskRow) + ("a2a_state",),
        "transition": _columns(Transition),
        "effect": _columns(Effect),
        "gather": event_cols,  # and gather_reduced's data keys
        "invariant": None,
        "trace": ("code", "message_id", "sender", "recipient", "pointer", "message", "terminal", "valid", "reason", "codes"),
        "replay": ("match", "events", "redelivered", "decisions", "effects_before", "effects_committed_again"),
    }


#: Keys an event's rows have beyond its data: fence_recorded's ``unacknowledged``, those it was sent
#: to whose acknowledgement of it no accepted delivery carries.
EVENT_EXTRAS = {"fence_recorded": ("unacknowledged",)}

#: The kinds of fact, each with what its selector names.
KINDS: dict[str, str] = {
    "delivery": "a message type (or '*'): each delivery of such a message, with its envelope's fields",
    "message": "a message type (or '*'): each stored envelope of that type",
    "event": "an event type: each event of it, with its data's keys (fence_recorded: unacknowledged too)",
    "task": "a task id (or '*'): the task as the tasks table holds it now (a2a_state: its A2A state)",
    "transition": "a task id (or '*'): each applied move of it",
    "effect": "an effect kind (or '*'): each committed side effect",
    "gather": "a gather id: its gather_reduced events (dissent and contributions as message ids; "
              "dissent_senders and contributors: who sent them)",
    "invariant": "an invariant's name (or '*'): one row per witness when broken (status 'broken'), else one "
                 "row with status 'holds'",
    "trace": "'errors' (each finding of the exported conversation's validation: code, message_id, sender) or "
             "'report' (terminal, valid, reason, codes)",
    "replay": "'report': what 'protolab replay' says of the run (match: the rebuilt state digest is the live one; "
              "redelivered, decisions, effects_committed_again: the whole message log delivered again on a copy)",
}


@dataclass(frozen=True)
class RunSpec:
    """A run a lab's text speaks of besides its own (what a step asks the learner to run in a shell)."""

    name: str
    policy: str
    faults: tuple[str, ...] = ()
    scenario: str | None = None
    seed: int | None = None


@dataclass(frozen=True)
class Fact:
    name: str
    kind: str
    selector: str
    field: str | None = None
    count: bool = False
    where: dict = _field(default_factory=dict)
    nth: int = 1
    side: str | None = None  # None: the lab's own side (its policy)
    map: dict | None = None
    about: str = ""
    all: bool = False

    def refs(self) -> set[str]:
        """The facts this one reads (named in its selector or its where values)."""
        out = set(PLACEHOLDER.findall(self.selector))
        for v in self.where.values():
            for x in (v if isinstance(v, list) else [v]):
                out |= set(PLACEHOLDER.findall(str(x)))
        return out - set(BUILTINS)


def placeholders(text: str) -> list[str]:
    return PLACEHOLDER.findall(text or "")


def _bad(where: str, what: str) -> InputError:
    return InputError(f"{where}: {what}", code="E_LAB_FILE")


def parse_runs(raw: dict, where: str) -> dict[str, RunSpec]:
    if not isinstance(raw, dict):
        raise _bad(where, "[runs] must be a table of runs")
    out = {}
    for name, spec in raw.items():
        w = f"{where} run {name!r}"
        if name in POLICIES or not re.fullmatch(r"[a-z][a-z0-9-]*", name):
            raise _bad(w, "a run's name is lower-case words joined by '-', and not 'safe' or 'naive'")
        if not isinstance(spec, dict):
            raise _bad(w, "must be a table")
        unknown = sorted(set(spec) - {"policy", "faults", "scenario", "seed"})
        if unknown:
            raise _bad(w, f"unknown key {unknown[0]!r} (expected one of: policy, faults, scenario, seed)")
        policy = spec.get("policy", "safe")
        if policy not in POLICIES:
            raise _bad(w, f"policy must be one of {', '.join(POLICIES)}")
        out[name] = RunSpec(name, policy, tuple(spec.get("faults", ())), spec.get("scenario"),
                            None if spec.get("seed") is None else int(spec["seed"]))
    return out


def _event_keys(etype: str) -> tuple[str, ...] | None:
    """The data keys of an event type (None: any, for a type that keeps every other key it is given)."""
    from ..events import REGISTRY, _data_plan

    cls = REGISTRY[etype]
    if cls.REST:
        return None
    return tuple(key for _name, key, _omit, _rest in _data_plan(cls))


def _check_key(kind: str, selector: str, key: str, w: str, what: str) -> None:
    """A ``field`` or ``where`` key is a column the kind's rows have (its first part, for ``a.b``)."""
    head = key.split(".")[0]
    cols = _kind_columns()[kind]
    if cols is None:
        return
    known = set(cols)
    if kind == "delivery" and head == "payload":
        return
    if kind in ("event", "gather"):
        keys = _event_keys("gather_reduced" if kind == "gather" else selector)
        if keys is None:
            return
        known |= set(keys) | {"data"} | ({"dissent_senders", "contributors"} if kind == "gather" else
                                         set(EVENT_EXTRAS.get(selector, ())))
    if kind == "trace":
        known = {"code", "message_id", "sender", "recipient", "pointer", "message"} if selector == "errors" else \
            {"terminal", "valid", "reason", "codes"}
    if kind == "message" and head == "payload":
        return
    if head not in known:
        raise _bad(w, f"{what} {key!r} is no column of a {kind} fact's rows (expected one of: {', '.join(sorted(known))})")


def parse_facts(raw: dict, runs: dict[str, RunSpec], where: str, *, reserved: Iterable[str] = ()) -> dict[str, Fact]:
    """The ``[facts]`` table of a lab file, checked: every kind, option, side, type, column and
    reference known; no cycle."""
    from ..envelope import MESSAGE_TYPES
    from ..events import REGISTRY as EVENTS
    from ..invariants import REGISTRY as INVARIANTS

    if not isinstance(raw, dict):
        raise _bad(where, "[facts] must be a table of facts")
    reserved = set(reserved) | set(BUILTINS)
    out: dict[str, Fact] = {}
    for name, spec in raw.items():
        w = f"{where} fact {name!r}"
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            raise _bad(w, "a fact's name is lower-case letters, digits and '_'")
        if name in reserved:
            raise _bad(w, f"{name!r} is a name the lab's texts already use for something else (a builtin or a field "
                          "a check reports): choose another")
        if not isinstance(spec, dict):
            raise _bad(w, "must be a table, such as { gather = \"g-first\", field = \"selected\" }")
        kinds = [k for k in spec if k in KINDS]
        if len(kinds) != 1:
            raise _bad(w, f"give exactly one kind of fact (one of: {', '.join(KINDS)})")
        kind = kinds[0]
        unknown = sorted(set(spec) - {kind} - set(OPTIONS))
        if unknown:
            raise _bad(w, f"unknown key {unknown[0]!r} (expected the kind and any of: {', '.join(OPTIONS)})")
        selector = spec[kind]
        if not isinstance(selector, str):
            raise _bad(w, f"{kind} must name what it reads ({KINDS[kind]})")
        bare = PLACEHOLDER.sub("", selector)
        if kind in ("delivery", "message") and selector not in (*MESSAGE_TYPES, "*"):
            raise _bad(w, f"{kind} must be a message type or '*' (one of: {', '.join(MESSAGE_TYPES)})")
        if kind == "event" and selector not in EVENTS:
            raise _bad(w, f"unknown event type {selector!r}")
        if kind == "invariant" and selector != "*" and selector not in INVARIANTS:
            raise _bad(w, f"unknown invariant {selector!r} (one of: {', '.join(INVARIANTS)})")
        if kind == "trace" and selector not in ("errors", "report"):
            raise _bad(w, "trace must be 'errors' or 'report'")
        if kind == "replay" and selector != "report":
            raise _bad(w, "replay must be 'report'")
        if kind in ("task", "transition") and bare and bare != "*" and not re.fullmatch(r"[A-Za-z0-9:_-]+", bare):
            raise _bad(w, f"{kind} must be a task id, a fact naming one, or '*'")
        count = spec.get("count", False)
        every = spec.get("all", False)
        if not isinstance(count, bool) or not isinstance(every, bool):
            raise _bad(w, "count and all are true or false")
        if every and (count or "nth" in spec):
            raise _bad(w, "all reads every matching row: not with count or nth")
        fld = spec.get("field")
        if (fld is None) == (not count):
            raise _bad(w, "give a field, or count = true (not both)")
        if fld is not None:
            if not isinstance(fld, str):
                raise _bad(w, "field must be a string")
            _check_key(kind, selector, fld, w, "field")
        where_ = spec.get("where", {})
        if not isinstance(where_, dict):
            raise _bad(w, "where must be a table")
        for key, val in where_.items():
            _check_key(kind, selector, key.rstrip("~!"), w, "where key")
            if not isinstance(val, (str, int, bool, list)):
                raise _bad(w, f"where {key!r}: a value, or a list of values")
        nth = spec.get("nth", 1)
        if not isinstance(nth, int) or nth == 0:
            raise _bad(w, "nth is 1 (the first), 2, ... or -1 (the last), -2, ...")
        side = spec.get("side")
        if side is not None and side not in POLICIES and side not in runs:
            raise _bad(w, f"side must be {' or '.join(POLICIES)} or a run declared under [runs] "
                          f"({', '.join(runs) or 'none declared'})")
        mapping = spec.get("map")
        if mapping is not None and not (isinstance(mapping, dict) and all(isinstance(v, str) for v in mapping.values())):
            raise _bad(w, "map must be a table of value = \"words\"")
        about = spec.get("about", "")
        if not isinstance(about, str):
            raise _bad(w, "about must be a string")
        out[name] = Fact(name, kind, selector, fld, count, dict(where_), nth, side,
                         None if mapping is None else {str(k): v for k, v in mapping.items()}, about, every)
    for f in out.values():
        missing = sorted(f.refs() - set(out))
        if missing:
            raise _bad(f"{where} fact {f.name!r}", f"names no fact {missing[0]!r}")
    _order(out, where)
    return out


def _order(facts: dict[str, Fact], where: str = "") -> list[str]:
    """The facts in an order where each comes after those it reads (a cycle fails the load)."""
    done: list[str] = []
    state: dict[str, int] = {}

    def visit(n: str, path: tuple) -> None:
        if state.get(n) == 2:
            return
        if state.get(n) == 1:
            raise _bad(where, f"facts read each other in a circle: {' -> '.join(path + (n,))}")
        state[n] = 1
        for r in sorted(facts[n].refs()):
            visit(r, path + (n,))
        state[n] = 2
        done.append(n)

    for n in facts:
        visit(n, ())
    return done


# ------------------------------------------------------------------------------ one run, read


def format_value(v) -> str | None:
    """A value as text names it (None: nothing to name)."""
    if v is None or v == "" or v == [] or v == ():
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return ", ".join(str(x) for x in v)
    return str(v)


def _get(row, key: str):
    """``row[a][b]`` for ``a.b`` (a number: that item of a list, from 0); ``#``: the length of the list
    (or table) reached so far."""
    cur = row
    for part in key.split("."):
        if part == "#":
            return len(cur) if isinstance(cur, (list, tuple, dict)) else None
        if isinstance(cur, (list, tuple)) and part.isdigit():
            cur = cur[int(part)] if int(part) < len(cur) else None
            continue
        if isinstance(cur, dict) or hasattr(cur, "keys"):
            if part not in cur:
                return None
            cur = cur[part]
        else:
            return None
    return cur


class Side:
    """One run, read by facts: its rows by kind, built once (the run must not change meanwhile: a
    learner's run is read afresh after every change)."""

    def __init__(self, store):
        self.store = store
        self._rows: dict = {}
        self._invariants = None
        self._trace = None

    def invariants(self):
        if self._invariants is None:
            from ..invariants import check as check_invariants

            self._invariants = check_invariants(self.store)
        return self._invariants

    def trace(self):
        if self._trace is None:
            from ..conversation import export_trace
            from ..protocol.trace import validate

            try:
                self._trace = validate(export_trace(self.store))
            except ProtolabError:
                self._trace = False
        return self._trace or None

    def messages(self) -> dict[str, dict]:
        if "messages" not in self._rows:
            self._rows["messages"] = {m["message_id"]: m for m in self.store.messages()}
        return self._rows["messages"]

    def rows(self, kind: str, selector: str) -> list[dict]:
        key = (kind, selector)
        if key not in self._rows:
            self._rows[key] = self._make(kind, selector)
        return self._rows[key]

    def _make(self, kind: str, selector: str) -> list[dict]:
        s = self.store
        if kind == "delivery":
            msgs = self.messages()
            out, seen = [], {}
            top = s.last_delivery()
            for d in (s.deliveries_at(list(range(1, top + 1))) if top else []):
                if selector != "*" and d["type"] != selector:
                    continue
                seen[d["message_id"]] = seen.get(d["message_id"], 0) + 1
                row = {**msgs.get(d["message_id"], {}), **dict(d), "n": seen[d["message_id"]]}
                out.append(row)
            return out
        if kind == "message":
            return [dict(m) for m in self.messages().values() if selector == "*" or m["type"] == selector]
        if kind in ("event", "gather"):
            etype = "gather_reduced" if kind == "gather" else selector
            out = []
            for e in s.iter_events(etype=etype):
                data = dict(e.data)
                if kind == "gather":
                    if data.get("gather") != selector:
                        continue
                    data["dissent_senders"] = [d.get("sender") for d in data.get("dissent") or []]
                    data["dissent"] = [d.get("message") for d in data.get("dissent") or []]
                    data["contributors"] = [c.get("sender") for c in data.get("contributions") or []]
                    data["contributions"] = [c.get("id") for c in data.get("contributions") or []]
                if etype == "fence_recorded":
                    acked = {d["sender"] for d in self.rows("delivery", "ack")
                             if d["decision"] == "accepted" and (d.get("payload") or {}).get("of") == e.message_id}
                    data["unacknowledged"] = [p for p in data.get("to") or [] if p not in acked]
                row = {**data, "data": e.data}
                row.update({k: e[k] for k in ("seq", "tick", "created_at", "type", "task_id", "message_id",
                                              "delivery_id")})
                out.append(row)
            return out
        if kind == "task":
            from ..machine import A2A_STATE, TaskState

            out = []
            for t in s.tasks():
                row = dict(t)
                row["a2a_state"] = A2A_STATE[TaskState(t["state"])]
                out.append(row)
            return out
        if kind == "transition":
            return [dict(t) for t in s.transitions()]
        if kind == "effect":
            return [dict(e) for e in s.effects() if selector == "*" or e["kind"] == selector]
        if kind == "invariant":
            out = []
            for r in self.invariants():
                if selector not in ("*", r.name):
                    continue
                if r.ok:
                    out.append({"name": r.name, "status": "holds"})
                else:
                    out.extend({**w, "name": r.name, "status": "broken"} for w in r.witnesses)
            return out
        if kind == "trace":
            report = self.trace()
            if report is None:
                return []
            if selector == "report":
                return [{"terminal": report.terminal, "valid": report.valid, "reason": report.reason,
                         "codes": list(report.codes)}]
            msgs = self.messages()
            return [{"code": f.code, "message_id": f.message_id, "pointer": f.pointer, "message": f.message,
                     "sender": (msgs.get(f.message_id or "") or {}).get("sender"),
                     "recipient": (msgs.get(f.message_id or "") or {}).get("recipient")} for f in report.errors]
        if kind == "replay":
            from ..replay import replay_report

            r = replay_report(self.store)
            return [{"match": r["match"], "events": r["events"], **r["redelivery"]}]
        raise ValueError(kind)


def _matches(row, key: str, want, values: dict) -> bool:
    op = key[-1] if key[-1] in "~!" else ""
    got = format_value(_get(row, key.rstrip("~!")))
    wants = [fill_known(str(w), values) if not isinstance(w, bool) else format_value(w)
             for w in (want if isinstance(want, list) else [want])]
    if op == "~":
        return got is not None and any(w in got for w in wants)
    hit = got in wants
    return not hit if op == "!" else hit


def evaluate_fact(f: Fact, side: Side | None, values: dict) -> str | None:
    """One fact on one run (None: the run does not show it)."""
    if side is None:
        return None
    if any(values.get(r) is None for r in f.refs()):
        return None
    selector = fill_known(f.selector, values)
    rows = side.rows(f.kind, selector if f.kind not in ("task", "transition") else "*")
    if f.kind in ("task", "transition") and selector != "*":
        rows = [r for r in rows if r.get("task_id") == selector]
    rows = [r for r in rows if all(_matches(r, k, v, values) for k, v in f.where.items())]
    if f.count:
        value = str(len(rows))
    elif f.all:
        value = format_value(list(dict.fromkeys(v for v in (format_value(_get(r, f.field)) for r in rows) if v)))
    else:
        idx = f.nth - 1 if f.nth > 0 else f.nth
        if not -len(rows) <= idx < len(rows):
            return None
        value = format_value(_get(rows[idx], f.field))
    if value is not None and f.map is not None:
        value = f.map.get(value)
    return value


def evaluate(facts: dict[str, Fact], sides: Callable[[str], Side | None], own: str,
             names: Iterable[str] | None = None, builtins: dict | None = None) -> dict[str, str | None]:
    """The facts ``names`` (default: all) and those they read, on ``sides(side name)``; ``own``: the
    side a fact without one reads."""
    values: dict[str, str | None] = dict(builtins or {})
    wanted = set(facts) if names is None else set(names) & set(facts)
    need: set[str] = set()
    stack = list(wanted)
    while stack:
        n = stack.pop()
        if n in need:
            continue
        need.add(n)
        stack.extend(facts[n].refs())
    for n in _order(facts):
        if n in need:
            f = facts[n]
            values[n] = evaluate_fact(f, sides(f.side or own), values)
    return values


# ------------------------------------------------------------------------- the runs facts read


class _Quiet:
    """Plays a reference path without a learner: nothing recorded, nothing judged."""

    def action(self, kind, data):
        return []

    def refresh(self, **kw):
        return []

    def answer(self, qid, value):
        return False, ""


def _lab_key(lab) -> str:
    text = (lab.folder / "lab.toml").read_bytes() if (lab.folder / "lab.toml").is_file() else b""
    return f"{lab.folder}:{hashlib.sha256(text).hexdigest()}"


_REFERENCE: dict[str, dict] = {}
_RUNS: dict[tuple, object] = {}


def _played(lab, policy: str):
    """The lab's reference path (its answers left out) played on a live run under ``policy``; an
    action that side refuses is refused, as the TUI would show it."""
    from ..live import LiveRun
    from ..scenario import load_scenario
    from .paths import play, reference

    live = LiveRun(load_scenario(lab.scenario), seed=lab.seed, policy=policy, faults=list(lab.faults))
    quiet = _Quiet()
    for a in reference(lab):
        if a.get("do") == "answer":
            continue
        try:
            play(live, quiet, [a])
        except ProtolabError:
            pass
    return live


def _named_run(lab, spec: RunSpec):
    from ..runner import run_scenario
    from ..scenario import load_scenario

    key = (spec.scenario or lab.scenario, spec.seed if spec.seed is not None else lab.seed, spec.policy, spec.faults)
    if key not in _RUNS:
        _RUNS[key] = run_scenario(load_scenario(key[0]), policy=spec.policy, seed=key[1], faults=list(spec.faults),
                                  strict_faults=False)
    return _RUNS[key]


def reference_sides(lab) -> Callable[[str], Side | None]:
    """The lab's reference run, by side: ``safe`` and ``naive`` (its reference path played under
    each policy), and each run under ``[runs]``; made once per process, when first read."""
    if lab.mode == "hand-delivery":
        return lambda name: None
    key = _lab_key(lab)
    cache = _REFERENCE.setdefault(key, {})

    def side(name: str) -> Side | None:
        if name not in cache:
            if name in POLICIES:
                cache[name] = Side(_played(lab, name).store)
            elif name in lab.runs:
                cache[name] = Side(_named_run(lab, lab.runs[name]))
            else:
                return None
        return cache[name]

    return side


def builtin_values(lab) -> dict[str, str]:
    return {"lab": str(lab.number), "db": lab.default_db, "scenario": lab.scenario, "seed": str(lab.seed),
            "policy": lab.policy, "faults": ", ".join(lab.faults) or "none", "minutes": str(lab.minutes)}


_VALUES: dict[str, dict] = {}


def reference_values(lab) -> dict[str, str | None]:
    """Every fact of the lab on its reference run, and the builtins (once per process)."""
    key = _lab_key(lab)
    if key not in _VALUES:
        _VALUES[key] = evaluate(lab.facts, reference_sides(lab), lab.policy, builtins=builtin_values(lab))
    return _VALUES[key]


def learner_values(lab, store, names: Iterable[str] | None = None) -> dict[str, str | None]:
    """Facts on the learner's run: the lab's own side is ``store`` as it is now; the other sides
    are the reference's."""
    own = Side(store)
    ref = reference_sides(lab)

    def sides(name: str) -> Side | None:
        return own if name == lab.policy else ref(name)

    return evaluate(lab.facts, sides, lab.policy, names, builtins=builtin_values(lab))


# ------------------------------------------------------------------------------------- texts


def fill_known(text: str, values: dict) -> str:
    """``text`` with each ``{name}`` that ``values`` holds replaced (a name it holds as None reads
    ``?``); other braces are left for a later fill (a check's fields)."""
    def one(m):
        name = m.group(1)
        if name not in values:
            return m.group(0)
        v = values[name]
        return "?" if v is None else str(v)

    return PLACEHOLDER.sub(one, text or "")


def render(lab, values: dict | None = None):
    """The lab with every text filled from ``values`` (default: its reference run's facts): the
    summary, steps, checkpoints' titles, hints and ``shows`` lines (a check's own fields left for
    when it has seen them), questions' texts, choices, feedback and explanations. Answers stay
    templates: they are filled from the learner's run."""
    import dataclasses

    v = reference_values(lab) if values is None else values
    f = lambda t: fill_known(t, v)  # noqa: E731
    checkpoints = {}
    for c in lab.checkpoints:
        checkpoints[c.id] = dataclasses.replace(c, title=f(c.title), hint=f(c.hint),
                                                hints={k: f(x) for k, x in c.hints.items()}, shows=f(c.shows))
    steps = tuple(dataclasses.replace(s, title=f(s.title), text=f(s.text),
                                      checkpoints=tuple(checkpoints[c.id] for c in s.checkpoints)) for s in lab.steps)
    questions = tuple(dataclasses.replace(q, text=f(q.text),
                                          choices=answer_placed(lab.slug, q.id, tuple(f(c) for c in q.choices),
                                                                f(q.answer) if q.answer is not None else None),
                                          feedback={f(k): f(x) for k, x in q.feedback.items()}, explain=f(q.explain))
                      for q in lab.questions)
    return dataclasses.replace(lab, summary=f(lab.summary), title=f(lab.title), steps=steps, questions=questions,
                               rendered=True)


def _digest(*parts: str) -> int:
    return int(hashlib.sha256("\0".join(parts).encode()).hexdigest(), 16)


def shown_order(lab_slug: str, qid: str, choices: Iterable[str]) -> tuple[str, ...]:
    """A question's choices sorted by a digest of the lab, the question and the choice: an order
    that owes nothing to the order they were written in (where the right one tends to come first)
    and is the same on every machine."""
    return tuple(sorted(choices, key=lambda c: _digest(lab_slug, qid, c)))


def answer_placed(lab_slug: str, qid: str, choices: tuple[str, ...], answer: str | None) -> tuple[str, ...]:
    """The choices as every face shows them: in :func:`shown_order`, the right one moved to a place
    drawn from a digest of the lab and the question alone, so where it stands says nothing (over the
    course, the first place holds it about as often as chance gives)."""
    if answer not in choices:
        return choices
    rest = [c for c in choices if c != answer]
    rest.insert(_digest(lab_slug, qid, "answer") % len(choices), answer)
    return tuple(rest)


@functools.lru_cache(maxsize=1)
def saw_fields() -> frozenset[str]:
    """Every field a check can report (``_met(...)``, ``_unmet(...)``, ``dict(...)`` keywords in
    :mod:`sim.labs.checks`, and the keys of a ``saw = {...}`` it builds): the names a hint or a ``shows`` line fills from what the check saw.
    A fact may not take one of these names."""
    import ast
    import inspect

    from . import checks

    names = set()
    for n in ast.walk(ast.parse(inspect.getsource(checks))):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Dict) and \
                any(isinstance(t, ast.Name) and t.id == "saw" for t in n.targets):
            names |= {k.value for k in n.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute)):
            fn = n.func.id if isinstance(n.func, ast.Name) else n.func.attr
            if fn in ("_met", "_unmet", "dict", "update"):
                names |= {k.arg for k in n.keywords if k.arg}
    return frozenset(names)


# ------------------------------------------------------------------ literals a text may not hold

_ID = re.compile(r"(?<![\w{-])[A-Z]-\d+\b")
_CODE = re.compile(r"\bE_[A-Z0-9_]+\b")
_LAB = re.compile(r"(?<![\w-])labs? (\d+)\b")
_VERSION_NO = re.compile(r"(?<![\w-])v\d+\b")  # lease v1, v2: a number too
_NUMBER = re.compile(r"(?<![\w.{-])\d+(?:\.\d+)*(?![\w{-]|\.\d)")


def literals(text: str) -> list[tuple[str, str]]:
    """What a lab text names as a literal that only a run can vouch for: ``(kind, literal)`` for
    each message, task or report id, code, invariant name and number (a version the kit defines,
    ``sim.versions.KNOWN``, is a name of the protocol's, not a claim about a run; ``lab N`` names
    another lab, ``("lab", N)``, which must exist). Placeholders are not literals."""
    from ..invariants import REGISTRY as INVARIANTS
    from ..versions import KNOWN

    bare = PLACEHOLDER.sub(" ", text or "")
    out = [("lab", m) for m in _LAB.findall(bare)]  # another lab, by number: held to the catalog
    bare = _LAB.sub(" ", bare)
    out += [("id", m) for m in _ID.findall(bare)]
    out += [("code", m) for m in _CODE.findall(bare)]
    out += [("invariant", name) for name in INVARIANTS if re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", bare)]
    versions = {str(v) for v in KNOWN}
    out += [("number", m) for m in _VERSION_NO.findall(bare)]
    for m in _NUMBER.findall(bare):
        if m in versions:
            continue
        out.append(("number", m))
    return out


def lab_literals(lab) -> list[tuple[str, str, str]]:
    """Every literal a lab's texts (and its README's source) hold that only a run could vouch for:
    ``(where, kind, literal)``, less those the lab keeps under ``[literals]`` with a reason. A
    choice question's choices are options, not claims: a number among them (``"0"``, ``"2"``) is
    offered, not asserted (what is right is its answer, a fact)."""
    from .catalog import texts
    from .readme import template_of

    from .catalog import labs

    numbers = {x.number for x in labs()} | {lab.number}
    choice_q = {q.id for q in lab.questions if q.kind == "choice"}
    items = [(w, t) for w, t, _ in texts(lab)]
    src = template_of(lab)
    items.append(("README.in.md" if src.is_file() else "README.md",
                  (src if src.is_file() else lab.folder / "README.md").read_text(encoding="utf-8")
                  if (src.is_file() or (lab.folder / "README.md").is_file()) else ""))
    out = []
    for where, text in items:
        option = where.endswith((" choice", " feedback key")) and where.split()[1] in choice_q
        for kind, lit in literals(text):
            if lit in lab.literals or (option and kind == "number"):
                continue
            if kind == "lab" and int(lit) in numbers:
                continue
            out.append((where, kind, lit))
    return out
