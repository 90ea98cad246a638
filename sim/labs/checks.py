"""Named checks: what a lab's checkpoints ask of the learner's run.

A check is called as ``check(ctx, **args)`` and returns a :class:`Seen`: whether the checkpoint is
met, a short code saying what it saw (``met``, or a case such as ``wrong-message``) and the facts
it saw (message ids, types, states) so that the lab's hint for that case can name them:
"the duplicate you injected was of {message_id}, a {type}". Checks read the run through
:class:`Facts`, an index that is brought up to date incrementally (only events and deliveries
newer than the last look are read), so a check after each step does not rescan a long log.

Register a new check with ``@check("name", codes=(...))`` (the codes it reports when unmet); a lab
names it in ``lab.toml``. A check met only by what the learner's screen recorded (a view opened, a
time-travel visit: actions the progress file or a submission's manifest carries, which nothing can
replay) says so with ``screen=True`` (or a function of the checkpoint's arguments): such a
checkpoint, once met, is *self-reported* (:func:`self_reported`), and verification lists it apart.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

from ..events import REGISTRY as EVENT_TYPES
from .. import events as ev_
from ..events import StoredEvent
from ..privacy import is_redacted
from ..store import ProgressStore, Store

__all__ = ["Seen", "Facts", "Ctx", "CHECKS", "check", "self_reported"]

_TERMINAL = frozenset({"succeeded", "failed", "denied", "canceled"})


@dataclass(frozen=True)
class Seen:
    ok: bool
    code: str  # "met" when ok; otherwise the case the hint is keyed by
    saw: dict = field(default_factory=dict)

    def summary(self) -> str:
        parts = [f"{k}={v}" for k, v in self.saw.items() if isinstance(v, (str, int)) and v != ""]
        return ", ".join(parts)


def _met(**saw) -> Seen:
    return Seen(True, "met", saw)


def _unmet(case: str, /, **saw) -> Seen:
    return Seen(False, case, saw)


class _Kept:
    """The event types the labs index: every type registered when asked, but the bulk ones."""

    def __init__(self, unindexed: frozenset):
        self.unindexed = unindexed

    def __contains__(self, etype) -> bool:
        return etype in EVENT_TYPES and etype not in self.unindexed

    def __iter__(self):
        return (t for t in EVENT_TYPES if t not in self.unindexed)


class Facts:
    """What the learner's run holds, indexed, read incrementally from the store."""

    def __init__(self, store: Store):
        self.store = store
        self.last_event = 0
        self.last_delivery = 0
        self.events_by_type: dict[str, list[dict]] = defaultdict(list)
        self.deliveries: list[dict] = []
        self.by_type_decision: dict[tuple[str, str], list[dict]] = defaultdict(list)
        self.deliveries_of: dict[str, list[dict]] = defaultdict(list)
        self.by_type: dict[str, list[dict]] = defaultdict(list)
        self.by_type_task: dict[tuple[str, str], list[dict]] = defaultdict(list)
        self.first_by_code: dict[str, dict] = {}
        self.task_states: dict[str, str] = {}  # every task's state, from its transition_applied events
        self.open_tasks: set[str] = set()
        self.version = 0  # bumped whenever something new was read

    # Every event type the engine registers is kept for the checks, but the three a run writes in bulk
    # and no check asks about (a lab's 'event' check naming one is refused when the lab loads).
    _UNINDEXED = frozenset({"intent_recorded", "artifact_stored", "budget_charged"})
    _KEEP = _Kept(_UNINDEXED)

    def update(self) -> bool:
        """Read what is new; True if anything was."""
        new = False
        last = self.store.last_event()
        while self.last_event < last:
            batch = self.store.events(after=self.last_event, limit=5000)
            if not batch:
                break
            for e in batch:
                if e.type in self._KEEP:
                    self.events_by_type[e.type].append(e)
                if e.type == ev_.TaskCreated.TYPE:
                    self.task_states[e.task_id] = "pending"
                    self.open_tasks.add(e.task_id)
                elif e.type == ev_.TransitionApplied.TYPE and e.task_id in self.task_states:
                    to = e.event.to
                    self.task_states[e.task_id] = to
                    (self.open_tasks.discard if to in _TERMINAL else self.open_tasks.add)(e.task_id)
            self.last_event = batch[-1].seq
            new = True
        top = self.store.last_delivery()
        while self.last_delivery < top:
            ids = list(range(self.last_delivery + 1, min(top, self.last_delivery + 5000) + 1))
            for d in self.store.deliveries_at(ids):
                self.deliveries.append(d)
                self.by_type_decision[(d["type"], d["decision"])].append(d)
                self.deliveries_of[d["message_id"]].append(d)
                self.by_type[d["type"]].append(d)
                self.by_type_task[(d["type"], d["task_id"])].append(d)
                if d["code"] and d["code"] not in self.first_by_code:
                    self.first_by_code[d["code"]] = d
            self.last_delivery = ids[-1]
            new = True
        if new:
            self.version += 1
        return new

    def events(self, etype: str) -> list[StoredEvent]:
        return self.events_by_type.get(etype, [])

    def message(self, message_id: str) -> dict | None:
        return self.store.message_by_id(message_id)


@dataclass
class Ctx:
    """What a check may look at: the run, the learner's recorded actions, the lab."""

    store: Store
    facts: Facts
    progress: ProgressStore
    lab_number: int
    expected_tasks: int | None = None  # how many tasks the lab's story creates (None: unknown)
    run_id: str | None = None  # the run's own id (meta lab_run): only actions recorded on this run count (a run
    # without one, not made by 'protolab lab start', counts only actions recorded without one)
    _cache: dict = field(default_factory=dict)
    _once: dict = field(default_factory=dict)

    def actions(self, kind: str) -> list[dict]:
        """The learner's recorded actions of ``kind`` on this run (an action recorded on another
        run of the lab, one started over or replaced, shows nothing of this one)."""
        return [a for a in self.progress.actions(self.lab_number, kind) if a["data"].get("run") == self.run_id]

    def once(self, key: str, make: Callable):
        """A value that does not depend on the learner's progress (the naive run of the same scenario)."""
        k = (key, None)
        if k not in self._once:
            self._once[k] = make()
        return self._once[k]

    def cached(self, key: str, make: Callable):
        """A value computed once per state of the run (invariants, the naive replay)."""
        k = (key, self.facts.version)
        if k not in self._cache:
            self._cache = {kk: v for kk, v in self._cache.items() if kk[1] == self.facts.version}
            self._cache[k] = make()
        return self._cache[k]

    def invariants(self):
        from ..invariants import check as check_invariants

        return self.cached("invariants", lambda: check_invariants(self.store))

    def naive_invariants(self):
        """The learner's own deliveries, in their order, handed to the naive policy instead: what
        the same run would have done to state without the safe rules."""
        def make():
            from ..invariants import check as check_invariants

            naive = redeliver_under(self.store, "naive")
            try:
                return check_invariants(naive)
            finally:
                naive.close()

        return self.cached("naive", make)


def redeliver_under(store: Store, policy: str) -> Store:
    """A fresh in-memory store holding ``store``'s deliveries (and its runtime's own events:
    lease expiries, stored artifacts, injected faults), replayed under ``policy``."""
    from .verify import rebuild_by_redelivery

    fresh, _ = rebuild_by_redelivery(store, policy=policy, stop_at_first_difference=False)
    return fresh


CHECKS: dict[str, Callable[..., Seen]] = {}


def case_codes(name: str) -> frozenset[str]:
    """The codes check ``name`` declares it can report when unmet (the keys a lab's hints for it may
    use; a lab naming another is refused when it loads)."""
    return CODES.get(name, frozenset())


def codes_in_source(name: str) -> frozenset[str]:
    """The codes check ``name`` really reports: every ``_unmet("code", ...)`` in its body and in the
    helpers of this module it calls, read from the source (a test holds each check's declared
    ``codes`` to this, so a declaration cannot drift from the code)."""
    import ast
    import inspect
    import sys

    module = sys.modules[__name__]
    tree = ast.parse(inspect.getsource(module))
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}

    def literals(node) -> set[str]:
        """The codes an ``_unmet(...)`` call can give (a constant, or each branch of a conditional)."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_unmet" and node.args:
            return {c.value for c in ast.walk(node.args[0]) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
        return set()

    def codes(fn: str, seen: set) -> set:
        if fn in seen or fn not in funcs:
            return set()
        seen.add(fn)
        out = set()
        for n in ast.walk(funcs[fn]):
            out |= literals(n)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                out |= codes(n.func.id, seen)
        return out

    return frozenset(codes(CHECKS[name].__name__, set()))


#: Each check's declared case codes, by check name.
CODES: dict[str, frozenset[str]] = {}


#: Each check's answer to "is a checkpoint of mine met only through the learner's recorded screen
#: actions?": a bool, or a function of the checkpoint's arguments.
SCREEN: dict[str, bool | Callable[[dict], bool]] = {}


def check(name: str, *, codes: tuple[str, ...], screen: bool | Callable[[dict], bool] = False):
    """Register a check under ``name`` with the ``codes`` it reports when unmet; ``screen``: it is met
    only through the learner's recorded screen actions (``ctx.actions``), never by the run alone."""
    def register(fn):
        if name in CHECKS:
            raise ValueError(f"check {name!r} is declared twice")
        CHECKS[name] = fn
        CODES[name] = frozenset(codes)
        SCREEN[name] = screen
        return fn

    return register


def self_reported(check_name: str, args: dict) -> bool:
    """Whether a checkpoint of ``check_name`` with ``args`` rests only on a screen action (a view
    opened, a visit in time): what the learner's file says they did, which no replay of the run can
    confirm. Verification reports such a checkpoint, met, as self-reported; ``grade lab`` counts it
    only when the instructor says so."""
    screen = SCREEN.get(check_name, False)
    return bool(screen(dict(args)) if callable(screen) else screen)


# ------------------------------------------------------------------------------------- the checks


@check("delivery", codes=("none", "other-decision"))
def _delivery(ctx: Ctx, *, type: str, decision: str, task: str | None = None, code: str | None = None,
              count: int = 1) -> Seen:
    """At least ``count`` deliveries of ``type`` decided ``decision`` (on ``task``, with ``code``)."""
    f = ctx.facts
    rows = [d for d in f.by_type_decision.get((type, decision), [])
            if (task is None or d["task_id"] == task) and (code is None or d["code"] == code)]
    if len(rows) >= count:
        d = rows[0]
        return _met(message_id=d["message_id"], task_id=d["task_id"], decision=d["decision"], code=d["code"] or "",
                    reason=d["reason"], count=len(rows))
    others = f.by_type.get(type, []) if task is None else f.by_type_task.get((type, task), [])
    if others:
        d = others[-1]
        return _unmet("other-decision", message_id=d["message_id"], task_id=d["task_id"], decision=d["decision"],
                      code=d["code"] or "", reason=d["reason"], count=len(rows))
    return _unmet("none", count=len(rows))


@check("task_state", codes=("missing", "other"))
def _task_state(ctx: Ctx, *, task: str, state: str, ever: bool = False) -> Seen:
    """Task ``task`` is in ``state`` now (or, with ``ever``, reached it at some point)."""
    t = ctx.store.get_task(task)
    if t is None:
        return _unmet("missing", task_id=task)
    if t.state.value == state:
        return _met(task_id=task, state=state)
    if ever:
        for e in ctx.facts.events(ev_.TransitionApplied.TYPE):
            if e.task_id == task and e.event.to == state:
                return _met(task_id=task, state=state, now=t.state.value)
    return _unmet("other", task_id=task, state=t.state.value, wanted=state)


@check("all_terminal", codes=("empty", "open"))
def _all_terminal(ctx: Ctx) -> Seen:
    """Every task of the run is in a terminal state (the story ran to its end)."""
    f = ctx.facts
    if not f.task_states:
        return _unmet("empty")
    if ctx.expected_tasks is not None and len(f.task_states) < ctx.expected_tasks:
        # the story has tasks still to create: a run that stopped early is not finished
        return _unmet("open", task_id=f"{ctx.expected_tasks - len(f.task_states)} task(s) not created yet",
                      state="to come", open=ctx.expected_tasks - len(f.task_states) + len(f.open_tasks))
    if not f.open_tasks:
        return _met(tasks=len(f.task_states))
    tid = min(f.open_tasks)
    return _unmet("open", task_id=tid, state=f.task_states[tid], open=len(f.open_tasks))


def _publishing_results(ctx: Ctx) -> list[StoredEvent]:
    return list(ctx.facts.events(ev_.EffectCommitted.TYPE))


@check("injected", codes=("none", "wrong-message"))
def _injected(ctx: Ctx, *, fault: str, on_type: str | None = None, on: str | None = None) -> Seen:
    """A ``fault`` was injected by hand on a message of ``on_type`` (``on = "publishing"``: on the
    result that committed the publication; ``on = "redacted"``: on a message whose log keeps
    [redacted] values)."""
    faults = [e for e in ctx.facts.events(ev_.FaultInjected.TYPE) if e.event.fault == fault]
    if not faults:
        return _unmet("none", fault=fault)
    target = ""
    if on == "publishing":
        pubs = _publishing_results(ctx)
        target = pubs[0].message_id if pubs else ""
    elif on == "redacted":  # a message whose logged payload keeps [redacted] values (sim.privacy)
        hits = [d["message_id"] for d in ctx.facts.deliveries
                if is_redacted((ctx.facts.message(d["message_id"]) or {}).get("payload"))]
        target = hits[0] if hits else ""
    for e in faults:
        mid = e.message_id or ""
        msg = ctx.facts.message(mid) if mid else None
        mtype = msg["type"] if msg else ""
        if on_type is not None and mtype != on_type:
            continue
        if on == "publishing" and mid != target:
            continue
        if on == "redacted" and not (msg and is_redacted(msg["payload"])):
            continue
        return _met(message_id=mid, type=mtype, task_id=e.task_id or "", target=target, fault=fault)
    e = faults[-1]
    msg = ctx.facts.message(e.message_id) if e.message_id else None
    return _unmet("wrong-message", message_id=e.message_id or "", type=msg["type"] if msg else "",
                  task_id=e.task_id or "", target=target or "(not yet sent: step until the report is published)",
                  fault=fault)


@check("crashed", codes=("none",))
def _crashed(ctx: Ctx, *, by_hand: bool = True) -> Seen:
    """A worker was crashed (by hand, with k) while holding a lease."""
    for e in ctx.facts.events(ev_.FaultInjected.TYPE):
        crash = e.event
        if crash.fault == "crash" and (not by_hand or crash.detail.get("selector") == "by hand"):
            return _met(worker=crash.detail.get("worker", ""), task_id=e.task_id or "",
                        lease_version=crash.detail.get("lease_version", ""))
    return _unmet("none")


@check("effect_once", codes=("none", "not-repeated", "twice"))
def _effect_once(ctx: Ctx, *, kind: str = "publish") -> Seen:
    """The publishing result was delivered more than once, and its effect committed exactly once."""
    pubs = [e for e in _publishing_results(ctx) if e.event.kind == kind]
    if not pubs:
        return _unmet("none", kind=kind)
    keys = defaultdict(int)
    for e in pubs:
        keys[e.event.effect_key] += 1
    mid = pubs[0].message_id
    deliveries = ctx.facts.deliveries_of.get(mid, [])
    resent = [d for d in ctx.facts.by_type_task.get(("task_result", pubs[0].task_id), [])
              if d["message_id"] != mid and d["decision"] == "duplicate"]
    times = len(deliveries) + len(resent)
    if max(keys.values()) > 1 or len(keys) > 1:
        return _unmet("twice", message_id=mid, effects=len(pubs))
    if times < 2:
        return _unmet("not-repeated", message_id=mid, deliveries=times)
    return _met(message_id=mid, deliveries=times, effect_key=pubs[0].event.effect_key,
                suppressed=len(ctx.facts.events(ev_.EffectSuppressed.TYPE)))


@check("invariants_hold", codes=("broken", "empty", "not-yet"))
def _invariants_hold(ctx: Ctx, *, after: str | None = None, after_decision: str | None = None) -> Seen:
    """Every invariant holds on the run, once it holds something to judge (a run with no delivery
    holds every invariant vacuously and shows nothing); ``after``: only once an event or a delivery
    of that type exists; ``after_decision``: only once a delivery was decided so (``late``)."""
    if not ctx.facts.deliveries:
        return _unmet("empty", after=after or after_decision or "")
    if after is not None and not ctx.facts.events(after) and not ctx.facts.by_type.get(after):
        return _unmet("not-yet", after=after)
    if after_decision is not None and not any(d["decision"] == after_decision for d in ctx.facts.deliveries):
        return _unmet("not-yet", after=after_decision)
    broken = [r for r in ctx.invariants() if not r.ok]
    if broken:
        w = broken[0].witnesses[0] if broken[0].witnesses else {}
        return _unmet("broken", name=broken[0].name, task_id=w.get("task_id", ""), message_id=w.get("message_id", ""))
    return _met(checked=len(ctx.invariants()))


@check("naive_breaks", codes=("empty", "holds", "not-yours", "safe-broken", "unknown"))
def _naive_breaks(ctx: Ctx, *, invariant: str, witness_code: str | None = None) -> Seen:
    """The learner's own deliveries, handed to the naive policy, break ``invariant``, while the
    safe run keeps it. ``witness_code``: only a witness naming a message that this run refused
    with that code counts (the learner's stale decision, not some earlier difference between the
    two policies)."""
    if not ctx.facts.deliveries:
        return _unmet("empty", name=invariant)
    safe = {r.name: r for r in ctx.invariants()}
    if invariant in safe and not safe[invariant].ok:
        return _unmet("safe-broken", name=invariant)
    naive = {r.name: r for r in ctx.naive_invariants()}
    r = naive.get(invariant)
    if r is None:
        return _unmet("unknown", name=invariant)
    others = ", ".join(x.name for x in naive.values() if not x.ok) or "none"
    if r.ok:
        return _unmet("holds", name=invariant, others=others)
    witnesses = list(r.witnesses)
    if witness_code is not None:
        refused = {d["message_id"] for d in ctx.facts.deliveries if d["code"] == witness_code}
        witnesses = [w for w in witnesses if w.get("message_id") in refused]
        if not witnesses:
            return _unmet("not-yours", name=invariant, code=witness_code, others=others)
    w = witnesses[0] if witnesses else {}
    t = w.get("transition") or {}
    return _met(name=invariant, task_id=w.get("task_id", ""), message_id=w.get("message_id", ""),
                old_state=w.get("old_state", "") or t.get("from", ""), new_state=w.get("new_state", "") or t.get("to", ""),
                expected_version=w.get("expected_state_version", ""), actual_version=w.get("actual_state_version", ""))


@check("reviewed", codes=("none", "other-decision", "refused", "waiting"))
def _reviewed(ctx: Ctx, *, decision: str | None = None, task: str | None = None) -> Seen:
    """A reviewer's decision on a frozen task was accepted, citing retained evidence."""
    f = ctx.facts
    rows = f.by_type.get("review_decision", []) if task is None else f.by_type_task.get(("review_decision", task), [])
    for d in rows:
        if d["decision"] == "accepted" and (decision is None or d["state_after"] == decision):
            msg = ctx.facts.message(d["message_id"])
            return _met(message_id=d["message_id"], task_id=d["task_id"], state=d["state_after"] or "",
                        evidence=", ".join(msg["evidence_refs"]) if msg else "")
    refused = [a["data"] for a in ctx.actions("reconcile-refused")]
    if refused:
        a = refused[-1]
        return _unmet("refused", code=a.get("code", ""), reason=a.get("reason", ""), task_id=a.get("task_id", ""))
    if rows:
        d = rows[-1]
        return _unmet("other-decision", decision=d["decision"], state=d["state_after"] or "", task_id=d["task_id"])
    frozen = [t["task_id"] for t in ctx.store.tasks() if t["state"] == "needs_review"]
    if frozen:
        return _unmet("waiting", task_id=frozen[0])
    return _unmet("none")


@check("visited", codes=("no-event", "none", "too-late"), screen=True)
def _visited(ctx: Ctx, *, before: str, field: str | None = None, value: str | None = None) -> Seen:
    """The learner travelled in time (``[``, ``]``, ``g``) to an event before the first event of
    type ``before`` (whose data ``field`` is ``value``, if given)."""
    firsts = [e for e in ctx.facts.events(before) if field is None or str(e.data.get(field)) == value]
    if not firsts:
        return _unmet("no-event", before=before)
    first = firsts[0].seq
    visits = [a["data"].get("seq", 0) for a in ctx.actions("visit")]
    if not visits:
        return _unmet("none", seq=first)
    early = [v for v in visits if v < first]
    if early:
        return _met(seq=early[-1], before_seq=first)
    return _unmet("too-late", seq=min(visits), before_seq=first)


def _opened_deliveries(ctx: Ctx, a: dict) -> list[dict]:
    """The deliveries of this run an open-detail action looked at: the one it names
    (``delivery_id``), or, for an action recorded without one, every delivery of its message."""
    rows = ctx.facts.deliveries_of.get(a.get("message_id") or "", [])
    if a.get("delivery_id") is not None:
        return [d for d in rows if d["delivery_id"] == a["delivery_id"]]
    return list(rows)


@check("opened", codes=("none", "other"), screen=True)
def _opened(ctx: Ctx, *, what: str, type: str | None = None, recipient: str | None = None,
            decision: str | None = None, state_after: str | None = None, task: str | None = None) -> Seen:
    """The learner opened a view (``what``: detail, conversation) on a delivery of this run of a
    message of ``type`` (sent to ``recipient``; about ``task``; decided ``decision``; leaving its
    task ``state_after``: an ack opened while its task was running)."""
    rows = [a["data"] for a in ctx.actions(f"open-{what}")]

    def to(a) -> str:
        msg = ctx.facts.message(a["message_id"]) if a.get("message_id") else None
        return msg["recipient"] if msg else ""

    detail = what == "detail"
    for a in rows:
        if not ((type is None or a.get("type") == type) and (recipient is None or to(a) == recipient)):
            continue
        if not detail:
            return _met(message_id=a.get("message_id", ""), type=a.get("type", ""), recipient=to(a))
        for d in _opened_deliveries(ctx, a):
            if (decision is None or d["decision"] == decision) and (state_after is None or d["state_after"] == state_after) \
                    and (task is None or d["task_id"] == task):
                return _met(message_id=d["message_id"], type=d["type"], recipient=to(a), delivery_id=d["delivery_id"],
                            decision=d["decision"], state=d["state_after"] or "", task_id=d["task_id"])
    wanted = " ".join(x for x in (type, f"to {recipient}" if recipient else None, f"of {task}" if task else None,
                                  f"decided {decision}" if decision else None,
                                  f"while its task was {state_after}" if state_after else None) if x)
    if rows:
        last = rows[-1]
        seen = (_opened_deliveries(ctx, last) or [{}])[-1] if detail else {}
        return _unmet("other", message_id=last.get("message_id", ""), type=last.get("type", ""), recipient=to(last),
                      wanted=wanted, decision=seen.get("decision") or "", state=seen.get("state_after") or "",
                      task_id=seen.get("task_id") or "")
    return _unmet("none", wanted=wanted)


@check("naive_run_breaks", codes=("empty", "holds", "not-opened", "not-yet", "safe-broken", "unknown"),
       screen=lambda args: bool(args.get("opened")))
def _naive_run_breaks(ctx: Ctx, *, invariant: str, problem: str | None = None, opened: bool = False) -> Seen:
    """The same scenario, seed and starting faults run by the naive runtime (its own transport and
    agents, not only its intake) breaks ``invariant`` (a witness whose problem contains
    ``problem``) on a message this run has delivered too, while this run keeps it. For the rules
    that live in the transport (what each recipient is sent), where re-delivering the learner's
    own log under naive cannot show the difference. ``opened``: only once the learner opened that
    message's delivery in this run (where the Guide then shows what naive did with it)."""
    if not ctx.facts.deliveries:
        return _unmet("empty", name=invariant)
    safe = {r.name: r for r in ctx.invariants()}
    if invariant not in safe:
        return _unmet("unknown", name=invariant)
    if not safe[invariant].ok:
        return _unmet("safe-broken", name=invariant)
    naive = ctx.once("naive-run", lambda: _naive_run(ctx.store)).get(invariant)
    witnesses = [w for w in (naive.witnesses if naive is not None else ())
                 if problem is None or problem in w.get("problem", "")]
    if not witnesses:
        return _unmet("holds", name=invariant)
    looked = {a["data"].get("message_id") for a in ctx.actions("open-detail")} if opened else None
    delivered = None
    for w in witnesses:
        for mid in _witness_ids(w):
            if ctx.facts.deliveries_of.get(mid):
                saw = dict(name=invariant, message_id=mid, problem=w.get("problem", ""), task_id=w.get("task_id", ""),
                           recipient=w.get("recipient", ""), fields=", ".join(w.get("fields", [])))
                if looked is None or mid in looked:
                    return _met(**saw)
                delivered = delivered or saw
    if delivered is not None:
        return _unmet("not-opened", **delivered)
    w = witnesses[0]
    return _unmet("not-yet", name=invariant, message_id=(_witness_ids(w) or [""])[0], problem=w.get("problem", ""),
                  recipient=w.get("recipient", ""), fields=", ".join(w.get("fields", [])))


def _naive_run(store: Store) -> dict:
    """The invariants of the learner's scenario (seed, starting faults) run under naive, by name."""
    from ..invariants import check as check_invariants
    from ..runner import run_scenario
    from ..scenario import load_scenario

    faults = [f for f in (store.get_meta("faults") or "").split(",") if f]
    naive = run_scenario(load_scenario(store.get_meta("scenario")), policy="naive",
                         seed=int(store.get_meta("seed") or 0), faults=faults, strict_faults=False)
    try:
        return {r.name: r for r in check_invariants(naive)}
    finally:
        naive.close()


@check("trace", codes=("absent", "empty", "invalid", "other-terminal", "valid"))
def _trace(ctx: Ctx, *, valid: bool | None = None, code: str | None = None, terminal: str | None = None) -> Seen:
    """The run, exported as a conversation trace and validated: it is (in)valid, shows error
    ``code``, or ends in ``terminal`` (COMPLETED, BLOCKED, ...)."""
    def make():
        from ..conversation import export_trace
        from ..errors import ProtolabError
        from ..protocol.trace import validate

        try:
            return validate(export_trace(ctx.store))
        except ProtolabError:
            return None

    report = ctx.cached("trace", make)
    if report is None:
        return _unmet("empty")
    saw = {"terminal": report.terminal or "", "codes": ", ".join(report.codes) or "none", "reason": report.reason}
    if code is not None:
        found = [x for x in report.errors if x.code == code]
        if not found:
            return _unmet("absent", code=code, **saw)
        mid = found[0].message_id or ""
        msg = ctx.facts.message(mid) if mid else None
        saw.update(code=code, message_id=mid, sender=msg["sender"] if msg else "")
    if terminal is not None and report.terminal != terminal:
        return _unmet("other-terminal", wanted=terminal, **saw)
    if valid is not None and report.valid != valid:
        return _unmet("invalid" if valid else "valid", **saw)
    return _met(**saw)


@check("event", codes=("none",))
def _event(ctx: Ctx, *, type: str, task: str | None = None) -> Seen:
    """An event of ``type`` (about ``task``) is in the log."""
    if type not in Facts._KEEP:  # catalog.load refuses such a lab; this is for a check built by hand
        raise TypeError(f"event type {type!r} is not indexed for labs")
    for e in ctx.facts.events(type):
        if task is None or e.task_id == task:
            return _met(seq=e.seq, task_id=e.task_id or "", message_id=e.message_id or "")
    return _unmet("none", type=type)


def _witness_ids(w: dict) -> list[str]:
    """The message ids a witness names, the one that did it first (the second payload of a
    conflict, the message that committed an effect again, the delivery that regressed state)."""
    ids = [w.get("message_id"), (w.get("second") or {}).get("message_id"), *(w.get("message_ids") or []),
           (w.get("first") or {}).get("message_id")]
    return list(dict.fromkeys(i for i in ids if isinstance(i, str) and i))


def _culprits(w: dict) -> list[tuple[str, int | None]]:
    """``(message_id, delivery_id or None)`` of the deliveries that did what a witness shows: the
    second payload of a conflict (never the first), each commit of an effect after the first
    (never the first publication), or else the message it names (any of its deliveries)."""
    if w.get("effects"):
        return [(e["message_id"], e.get("delivery_id")) for e in w["effects"][1:] if e.get("message_id")]
    if isinstance(w.get("second"), dict) and w["second"].get("message_id"):
        return [(w["second"]["message_id"], w["second"].get("delivery_id"))]
    return [(mid, None) for mid in ([w.get("message_id")] if w.get("message_id") else (w.get("message_ids") or []))]


@check("opened_witness", codes=("holds", "not-opened"), screen=True)
def _opened_witness(ctx: Ctx, *, invariant: str, problem: str | None = None) -> Seen:
    """The learner opened a delivery that witnesses ``invariant`` broken in this run (a witness
    whose problem contains ``problem``, if given)."""
    results = {r.name: r for r in ctx.invariants()}
    r = results.get(invariant)
    witnesses = [w for w in (r.witnesses if r is not None else ()) if problem is None or problem in w.get("problem", "")]
    if r is None or r.ok or not witnesses:
        return _unmet("holds", name=invariant)
    w0 = witnesses[0]
    culprits = [c for w in witnesses for c in _culprits(w)]
    opened = [a["data"] for a in ctx.actions("open-detail")]
    for a in opened:
        for mid, did in culprits:
            if a.get("message_id") == mid and (did is None or a.get("delivery_id") == did):
                return _met(name=invariant, message_id=mid, witness=mid, task_id=w0.get("task_id", ""),
                            delivery_id=a.get("delivery_id") or "")

    def named(a) -> str:
        return a.get("message_id", "") + (f" (delivery #{a['delivery_id']})" if a.get("delivery_id") else "")

    return _unmet("not-opened", name=invariant, opened=", ".join(named(a) for a in opened if a.get("message_id"))
                  or "nothing", task_id=w0.get("task_id", ""))
