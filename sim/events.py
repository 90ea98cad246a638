"""The event vocabulary: every event type the runtime may append, one frozen dataclass each.

A class says what an event carries (its fields, named as the stored JSON names them), what
folding it changes (``FOLDS``; the store's reducer does it), how it reads in one line
(``summary``) and how it is coloured (``STYLE``). The CLI's ``events`` and the TUI's Events
pane both render through :func:`summarize`, so the two faces cannot disagree.

Adding an event type is one class here (registered by defining it) plus, if folding it changes
state, one fold in the store, handed the typed event (``tests/test_events.py`` checks both
sides agree). The types run end to end: the planner builds events, :class:`EventDraft` carries
the object to the store's fold, and the store hands logged events back as :class:`StoredEvent`
rows whose ``.event`` is the typed event again.

This module is part of the domain: no I/O, no SQL, no imports from above.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar

from .errors import damaged_row, stored_json
from .frozen import quick_init

__all__ = ["Event", "EventDraft", "REGISTRY", "StoredEvent", "summarize"]


@quick_init
@dataclass(frozen=True)
class EventDraft:
    """An event the runtime wants appended (and folded) in the current transaction: its stored
    ``data`` and, when the runtime built it from a typed event, that event (``typed``)."""

    type: str
    task_id: str | None
    message_id: str | None
    data: dict
    typed: "Event | None" = field(default=None, compare=False, repr=False)
    #: ``data`` as the store writes it (exactly ``sorted_dumps(data)``), when whoever drafted the event
    #: wrote it already (:meth:`IntentRecorded.drafted`); None: the store writes it
    text: str | None = field(default=None, compare=False, repr=False)

    def event(self) -> "Event":
        """The typed event this draft appends (read back from ``data`` when it came from a row)."""
        if self.typed is not None:
            return self.typed
        cls = REGISTRY.get(self.type)
        if cls is None:
            raise KeyError(self.type)
        return cls.from_data(self.data)


_COLUMNS = ("seq", "tick", "created_at", "type", "task_id", "message_id", "delivery_id", "data")
_KEYS = frozenset(_COLUMNS)  # (a judge reads millions of row["type"]: one hash, not a scan of the tuple)


class StoredEvent(Mapping):
    """One row of the event log as the store hands it out: the columns as attributes (``seq``,
    ``tick``, ``created_at``, ``type``, ``task_id``, ``message_id``, ``delivery_id``, ``data``),
    the typed event (``event``) and the draft that appends it again (``draft``: replay).

    It is also a read-only mapping of the same columns, so a row renders as a table or JSON
    (``dict(row)``). ``data`` is parsed from its stored JSON on first use."""

    __slots__ = ("seq", "tick", "created_at", "type", "task_id", "message_id", "delivery_id", "_data", "_event")
    if TYPE_CHECKING:  # the slots' types, for the type checker (a class-level annotation makes no attribute)
        seq: int
        tick: int
        created_at: str
        type: str
        task_id: str | None
        message_id: str | None
        delivery_id: int | None
        _data: dict | str
        _event: Event | None

    def __init__(self, seq, tick, created_at, type, task_id, message_id, delivery_id, data):
        set_ = object.__setattr__
        for name, value in zip(_COLUMNS[:-1], (seq, tick, created_at, type, task_id, message_id, delivery_id)):
            set_(self, name, value)
        set_(self, "_data", data)
        set_(self, "_event", None)

    def __setattr__(self, name, value):
        raise AttributeError(f"a stored event is read-only (use replace(): {name})")

    @property
    def data(self) -> dict:
        d = self._data
        if isinstance(d, str):
            d = stored_json("events", self.seq, "data", d)  # damage: E_DB_CORRUPT naming the row
            if not isinstance(d, dict):  # (JSON, but not an event's object)
                raise damaged_row("events", self.seq, f"data is {type(d).__name__}, not an object")
            object.__setattr__(self, "_data", d)
        return d

    @property
    def event(self) -> "Event":
        """The typed event (its class from the registry; a key an older run lacks reads as None)."""
        e = self._event
        if e is None:
            cls = REGISTRY.get(self.type)
            if cls is None:
                raise KeyError(f"unknown event type {self.type!r}")
            e = cls.from_data(self.data)
            object.__setattr__(self, "_event", e)
        return e

    def draft(self) -> EventDraft:
        """This event as a draft to append again (replay, verification, time travel)."""
        return EventDraft(self.type, self.task_id, self.message_id, self.data)

    def replace(self, **changes) -> "StoredEvent":
        """A copy with some columns changed (tests plant broken logs with it)."""
        values = {k: self[k] for k in _COLUMNS}
        values.update(changes)
        return StoredEvent(**values)

    def __getitem__(self, key):
        if key in _KEYS:  # (``data`` is the property that parses it)
            return getattr(self, key)
        raise KeyError(key)

    def __iter__(self):
        return iter(_COLUMNS)

    def __len__(self) -> int:
        return len(_COLUMNS)

    def __eq__(self, other):
        if isinstance(other, StoredEvent):
            return all(self[k] == other[k] for k in _COLUMNS)
        return Mapping.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StoredEvent(seq={self.seq}, type={self.type!r}, task_id={self.task_id!r}, delivery_id={self.delivery_id})"

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return StoredEvent(**{k: copy.deepcopy(self[k], memo) for k in _COLUMNS})

    def __reduce__(self):
        return (_stored_event, tuple(self[k] for k in _COLUMNS))


def _stored_event(*values) -> StoredEvent:
    return StoredEvent(*values)


#: The digest scheme most envelopes use; a summary names a scheme only when it is another.
DEFAULT_SCHEME = "json-sorted-v1"

#: Every event type, by its stored name.
REGISTRY: dict[str, type["Event"]] = {}


def _as(name: str, **kw):
    """A field stored under another name (``from`` and ``type`` are Python words)."""
    return field(metadata={"key": name}, **kw)


def _optional(**kw):
    """A field left out of the stored data when it is None (older events never had it)."""
    return field(default=None, metadata={"omit_none": True}, **kw)


def _short(digest) -> str:
    s = str(digest or "")
    return s[:19] + "…" if len(s) > 20 else s


def _list(values) -> str:
    return ", ".join(str(v) for v in (values or []))


_PLANS: dict[type, tuple[tuple[str, str, bool, bool], ...]] = {}


def _data_plan(cls: type) -> tuple[tuple[str, str, bool, bool], ...]:
    """How ``cls.data()`` writes each field, read from its declaration once: (field, stored key,
    left out when None, takes the rest)."""
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = tuple((f.name, f.metadata.get("key", f.name), bool(f.metadata.get("omit_none")),
                                    f.name == cls.REST) for f in fields(cls))  # type: ignore[attr-defined]  # every Event class declares REST
    return plan


@dataclass(frozen=True)
class Event:
    """The base of every event type: ``data()`` is what the store keeps, ``draft`` is what the
    runtime hands it, ``summary()`` is the one line both faces show."""

    TYPE: ClassVar[str] = ""
    FOLDS: ClassVar[str] = ""
    #: True when folding the event changes a state table (the store must have a fold for it).
    CHANGES_STATE: ClassVar[bool] = False
    STYLE: ClassVar[str] = ""
    #: The field that takes every stored key no other field names (fault_injected's details).
    REST: ClassVar[str | None] = None

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if cls.TYPE:
            if cls.TYPE in REGISTRY:
                raise ValueError(f"event type {cls.TYPE!r} is declared twice")
            REGISTRY[cls.TYPE] = cls

    def data(self) -> dict:
        """What the store keeps: each field under its stored key, in declaration order (one left out
        when it is None and marked so; the REST field's keys spread in). Each type's own ``data`` is
        written from this plan once (:func:`_data_writer`); this is the plan read step by step."""
        out: dict[str, Any] = {}
        for name, key, omit_none, rest in _data_plan(type(self)):
            value = getattr(self, name)
            if rest:
                out.update(value or {})
            elif not (omit_none and value is None):
                out[key] = value
        return out

    def draft(self, task_id: str | None, message_id: str | None) -> EventDraft:
        return EventDraft(self.TYPE, task_id, message_id, self.data(), self)

    @classmethod
    def from_data(cls, d: dict) -> "Event":
        """The event a stored ``data`` holds. Forgiving: a key an older run did not write reads
        as None, so any stored event can still be rendered."""
        kw: dict[str, Any] = {}
        named = set()
        for f in fields(cls):
            if f.name == cls.REST:
                continue
            key = f.metadata.get("key", f.name)
            named.add(key)
            if key in d:
                kw[f.name] = d[key]
            elif f.default is not MISSING:
                kw[f.name] = f.default
            else:
                kw[f.name] = None
        if cls.REST:
            kw[cls.REST] = {k: v for k, v in d.items() if k not in named}
        return cls(**kw)

    def summary(self) -> str:  # pragma: no cover - every registered type overrides it
        return json.dumps(self.data(), sort_keys=True)[:80]


# ---------------------------------------------------------------- the machine and tasks


@dataclass(frozen=True)
class MachineLoaded(Event):
    TYPE = "machine_loaded"
    FOLDS = "machines and transition_rules gain a version"
    CHANGES_STATE = True
    version: str
    description: str
    rules: list

    def summary(self) -> str:
        return f"machine {self.version} ({len(self.rules or [])} rules)"


@dataclass(frozen=True)
class TaskCreated(Event):
    TYPE = "task_created"
    FOLDS = "tasks gains a row in pending; budget is credited"
    CHANGES_STATE = True
    trace_id: str
    goal: str
    budget: int
    machine_version: str

    def summary(self) -> str:
        return f"{self.goal!r} budget {self.budget} machine {self.machine_version}"


@dataclass(frozen=True)
class TransitionApplied(Event):
    TYPE = "transition_applied"
    FOLDS = "tasks.state moves (compare-and-swap on state_version); transitions gains a row"
    CHANGES_STATE = True
    STYLE = "bold"
    from_state: str = _as("from")
    to: str  # type: ignore[misc]  # a field made by _as() has no default; mypy takes the call for one
    from_version: int | None  # type: ignore[misc]  # a field made by _as() has no default; mypy takes the call for one; None: the task did not exist yet (its creation's first move)
    reason: str  # type: ignore[misc]  # a field made by _as() has no default; mypy takes the call for one
    executor: str  # type: ignore[misc]  # a field made by _as() has no default; mypy takes the call for one
    role: str  # type: ignore[misc]  # a field made by _as() has no default; mypy takes the call for one
    machine_version: str  # type: ignore[misc]  # a field made by _as() has no default; mypy takes the call for one
    assignee: str | None = None

    def summary(self) -> str:
        v = self.from_version or 0
        return f"{self.from_state} → {self.to} (v{v}→v{v + 1}) by {self.executor} ({self.reason})"


@dataclass(frozen=True)
class TaskStarted(Event):
    TYPE = "task_started"
    FOLDS = "nothing: a start was accepted (the transition beside it moves the task)"
    worker: str
    lease_version: int | None = None

    def summary(self) -> str:
        lease = f" under lease v{self.lease_version}" if self.lease_version is not None else ""
        return f"{self.worker} started work{lease}"


@dataclass(frozen=True)
class TransitionRejected(Event):
    TYPE = "transition_rejected"
    FOLDS = "tasks.rejected rises; state unchanged"
    CHANGES_STATE = True
    STYLE = "bold red"
    code: str
    reason: str
    type_: str = _as("type")
    sender: str  # type: ignore[misc]  # a field made by _as() has no default; mypy takes the call for one
    from_state: str | None = _as("from", default=None)
    proposed: str | None = None
    task_id: str | None = None

    def summary(self) -> str:
        return f"{self.code or 'refused'}: {self.reason or ''}"


@dataclass(frozen=True)
class LeaseGranted(Event):
    TYPE = "lease_granted"
    FOLDS = "tasks.lease_holder and lease_version change"
    CHANGES_STATE = True
    holder: str
    lease_version: int

    def summary(self) -> str:
        return f"lease v{self.lease_version} to {self.holder}"


@dataclass(frozen=True)
class LeaseExpired(Event):
    TYPE = "lease_expired"
    FOLDS = "tasks.lease_holder is cleared; its lease_version is now stale"
    CHANGES_STATE = True
    STYLE = "yellow"
    holder: str
    lease_version: int

    def summary(self) -> str:
        return f"{self.holder} lost lease v{self.lease_version}"


@dataclass(frozen=True)
class BudgetCharged(Event):
    TYPE = "budget_charged"
    FOLDS = "budget gains a debit; tasks.budget_left drops"
    CHANGES_STATE = True
    amount: int
    reason: str

    def summary(self) -> str:
        # a negative charge is a credit (a believed self-report): +97, not --97
        return f"{-self.amount:+d} ({self.reason})"


# ---------------------------------------------------------------- intents: dedup and conflict


@dataclass(frozen=True)
class IntentRecorded(Event):
    TYPE = "intent_recorded"
    FOLDS = "intents gains (task_id, key, digest, scheme)"
    CHANGES_STATE = True
    key: str
    digest: str
    scheme: str
    arrival: int
    decision: str
    payload: Any
    result: dict

    def summary(self) -> str:
        scheme = "" if self.scheme == DEFAULT_SCHEME else f" {self.scheme}"  # only the unusual one is news
        return f"{self.key} {_short(self.digest)}{scheme} ({self.decision})"

    def drafted(self, task_id: str | None, message_id: str | None, payload_text: str) -> EventDraft:
        """:meth:`draft`, for a caller that holds the payload's stored text (``payload_text``: exactly
        ``sorted_dumps(self.payload)``, as an envelope keeps it): the event's stored text is written around
        it, the same as ``sorted_dumps(self.data())``, and the reducer writes the intents row's payload from
        it, so a delivery walks and writes its payload once, not three times. Fields of a type the text
        does not expect: the plain draft."""
        q, r, arrival = _quote, self.result, self.arrival
        try:
            if type(arrival) is not int or r.keys() != _RESULT_KEYS:
                raise TypeError
            state, version = r["state"], r["state_version"]
            if not (version is None or type(version) is int):
                raise TypeError
            result = (f'{{"decision":{q(r["decision"])},"state":{"null" if state is None else q(state)},'
                      f'"state_version":{"null" if version is None else version}}}')
            text = (
                f'{{"arrival":{arrival},"decision":{q(self.decision)},"digest":{q(self.digest)},"key":{q(self.key)},'
                f'"payload":{payload_text},"result":{result},"scheme":{q(self.scheme)}}}'
            )
        except (TypeError, AttributeError):  # (q refuses what is not a string)
            return self.draft(task_id, message_id)
        # (not fields: the intents row's payload and result as stored, for the reducer)
        self.__dict__["_payload_json"], self.__dict__["_result_json"] = payload_text, result
        return EventDraft(self.TYPE, task_id, message_id, self.data(), self, text)


#: the keys of an intent's stored result, as :meth:`IntentRecorded.drafted` writes them (in sorted order)
_RESULT_KEYS = {"decision": 0, "state": 0, "state_version": 0}.keys()
#: JSON's string quoting, as the store's writer (``json.dumps(..., ensure_ascii=False)``) quotes
_quote = json.encoder.encode_basestring


@dataclass(frozen=True)
class DuplicateRecorded(Event):
    TYPE = "duplicate_recorded"
    FOLDS = "intents.seen rises; nothing is executed"
    CHANGES_STATE = True
    STYLE = "cyan"
    key: str
    digest: str
    scheme: str
    first_message_id: str
    reused: Any  # the stored result handed back (None when the first had none)

    def summary(self) -> str:
        return f"{self.key}: same key and digest as {self.first_message_id}; nothing re-executed"


@dataclass(frozen=True)
class ConflictRecorded(Event):
    TYPE = "conflict_recorded"
    FOLDS = "the key's intents and the task become untrusted"
    CHANGES_STATE = True
    STYLE = "bold magenta"
    key: str
    first: dict
    second: dict
    state_version: int | None = None
    trusted: bool = False

    def summary(self) -> str:
        a, b = self.first or {}, self.second or {}
        return (f"key {self.key}: {a.get('message_id')} {_short(a.get('digest'))} and "
                f"{b.get('message_id')} {_short(b.get('digest'))} differ; frozen, untrusted")


@dataclass(frozen=True)
class LateRecorded(Event):
    TYPE = "late_recorded"
    FOLDS = "tasks.late_results rises; state unchanged"
    CHANGES_STATE = True
    STYLE = "yellow"
    type_: str = _as("type")
    state: str  # type: ignore[misc]  # a field made by _as() has no default; mypy takes the call for one
    reason: str  # type: ignore[misc]  # a field made by _as() has no default; mypy takes the call for one
    status: str | None = None

    def summary(self) -> str:
        return f"{self.type_} ({self.status or '-'}) after the task was {self.state}: state unchanged"


# ---------------------------------------------------------------- receipts, artifacts, effects


@dataclass(frozen=True)
class AckRecorded(Event):
    TYPE = "ack_recorded"
    FOLDS = "nothing: a receipt is not a state change"
    of: str | None
    from_sender: str = _as("from")

    def summary(self) -> str:
        return f"receipt of {self.of or '?'} from {self.from_sender}"


@dataclass(frozen=True)
class ArtifactStored(Event):
    TYPE = "artifact_stored"
    FOLDS = "artifacts gains a content-addressed row"
    CHANGES_STATE = True
    ref: str
    scheme: str
    kind: str
    size: int
    content: Any

    def summary(self) -> str:
        return f"{self.kind} {_short(self.ref)} ({self.size} bytes)"


@dataclass(frozen=True)
class EffectCommitted(Event):
    TYPE = "effect_committed"
    FOLDS = "effects gains a row under its unique effect key"
    CHANGES_STATE = True
    STYLE = "bold green"
    effect_key: str
    kind: str
    target: str
    result_digest: str

    def summary(self) -> str:
        return f"{self.effect_key} ({self.kind} {self.target})"


@dataclass(frozen=True)
class EffectSuppressed(Event):
    TYPE = "effect_suppressed"
    FOLDS = "nothing: the effect key was already committed"
    STYLE = "green"
    effect_key: str

    def summary(self) -> str:
        return f"{self.effect_key}: already committed, not again"


@dataclass(frozen=True)
class EffectWithheld(Event):
    TYPE = "effect_withheld"
    FOLDS = "nothing: the result said its product is partial (schema 1.1), so its side effect waits"
    STYLE = "yellow"
    effect_key: str
    reason: str

    def summary(self) -> str:
        return f"{self.effect_key}: withheld ({self.reason})"


@dataclass(frozen=True)
class VersionNegotiated(Event):
    TYPE = "version_negotiated"
    FOLDS = "nothing: a sender and the runtime agreed the schema version its messages use from now on"
    STYLE = "cyan"
    sender: str
    offered: list
    reads: list
    chosen: str | None = None

    def summary(self) -> str:
        said = f"{self.sender} offers {', '.join(self.offered or [])}; the runtime reads {', '.join(self.reads or [])}"
        return f"{said}: {self.chosen} chosen (MAJOR.MINOR, patch ignored)" if self.chosen else f"{said}: none in common"


@dataclass(frozen=True)
class DigestSchemeAssumed(Event):
    TYPE = "digest_scheme_assumed"
    FOLDS = "nothing: the envelope came without a digest_scheme (the seed's twelve fields); it was read under the course's default"
    STYLE = "yellow"
    scheme: str

    def summary(self) -> str:
        return f"no digest_scheme sent: payload_digest read as {self.scheme}, the course's default"


@dataclass(frozen=True)
class EvidenceUnresolved(Event):
    TYPE = "evidence_unresolved"
    FOLDS = "nothing: a message cited evidence that is not stored (yet)"
    STYLE = "red"
    refs: list

    def summary(self) -> str:
        return f"cites {', '.join(_short(r) for r in self.refs or [])}, not stored here"


@dataclass(frozen=True)
class InputUntrusted(Event):
    TYPE = "input_untrusted"
    FOLDS = "nothing: a success rested on an untrusted input, so it was frozen and committed no effect"
    STYLE = "bold red"
    refs: list
    effect_key: str | None = None

    def summary(self) -> str:
        return f"rests on untrusted {_list(self.refs)}: held, {self.effect_key or 'no effect'} not committed"


@dataclass(frozen=True)
class ToolFailed(Event):
    TYPE = "tool_failed"
    FOLDS = "nothing: a worker reported that a tool failed its attempt (the result's own move records the rest)"
    STYLE = "red"
    tool: str
    status: str
    error: str | None = None

    def summary(self) -> str:
        return f"{self.tool} failed ({self.status})" + (f": {self.error}" if self.error else "")


# ---------------------------------------------------------------- review and reconciliation


@dataclass(frozen=True)
class ReviewDecided(Event):
    TYPE = "review_decided"
    FOLDS = "approvals gains a row"
    CHANGES_STATE = True
    STYLE = "bold magenta"
    decision: str
    reviewer: str
    evidence: list

    def summary(self) -> str:
        return f"{self.decision} by {self.reviewer} citing {_list(self.evidence)}"


@dataclass(frozen=True)
class ReconciliationRequired(Event):
    TYPE = "reconciliation_required"
    FOLDS = "nothing: a late result touched a committed side effect (open until resolved)"
    STYLE = "bold red"
    effects: list
    status: str | None = None
    input: str | None = _optional()

    def summary(self) -> str:
        what = f"late {self.status or 'result'}" if self.status in (None, "succeeded", "failed", "denied",
                                                                    "waiting_human", "retry") else self.status
        return f"{what} touches {_list(self.effects) or 'no committed effect'}: open until a reviewer decides (reconcile)"


@dataclass(frozen=True)
class ReconciliationResolved(Event):
    TYPE = "reconciliation_resolved"
    FOLDS = "approvals gains the reviewer's reconciliation (keep or retract), citing evidence"
    CHANGES_STATE = True
    STYLE = "bold magenta"
    of: str
    decision: str
    reviewer: str
    evidence: list
    effects: list

    def summary(self) -> str:
        return f"{self.decision} {_list(self.effects)} (late {self.of}) by {self.reviewer} citing {_list(self.evidence)}"


# ---------------------------------------------------------------- the transport and the conversation


@dataclass(frozen=True)
class FaultInjected(Event):
    TYPE = "fault_injected"
    FOLDS = "nothing: the transport records what it did to the run"
    STYLE = "bold yellow"
    REST = "detail"
    fault: str
    detail: dict = field(default_factory=dict)

    def summary(self) -> str:
        d = self.detail or {}
        made = d.get("twin") or d.get("late")
        said = [str(x) for x in (d.get("selector"), d.get("worker")) if x and x != self.fault]
        return self.fault + (f" ({', '.join(said)})" if said else "") + (f" → {made}" if made else "")


@dataclass(frozen=True)
class MessageSentAgain(Event):
    TYPE = "message_sent_again"
    FOLDS = "nothing: a session found a sender's number missing behind a later one and sent that message again, unchanged"
    STYLE = "yellow"
    sender: str
    seq: int
    generation: int
    waiting: list  # the sender's later messages parked behind the missing number

    def summary(self) -> str:
        return (f"missing (lost or late): sent again as it was ({self.sender} #{self.seq}, generation "
                f"{self.generation}); {_list(self.waiting)} waited behind it")


@dataclass(frozen=True)
class MessageCopyDropped(Event):
    TYPE = "message_copy_dropped"
    FOLDS = "nothing: the second copy of a message the session sent again arrived; the first was taken"
    STYLE = "dim yellow"
    sender: str

    def summary(self) -> str:
        return "the other copy arrived (late, not lost): the same envelope, already taken; dropped"


@dataclass(frozen=True)
class AgentOutputRefused(Event):
    TYPE = "agent_output_refused"
    FOLDS = "nothing: a process agent wrote a line the wire or the envelope rules refuse (sim.procagent); it was dropped"
    STYLE = "bold red"
    agent: str
    generation: int
    code: str
    reason: str
    line: str  # the line as written, cut at sim.wire.EXCERPT characters

    def summary(self) -> str:
        return f"{self.agent} (generation {self.generation}) wrote a line refused {self.code}: {self.reason}"


@dataclass(frozen=True)
class AgentStopped(Event):
    TYPE = "agent_stopped"
    FOLDS = "nothing: a process agent exited or went silent past its deadline (sim.procagent); the run goes on without it"
    STYLE = "bold red"
    agent: str
    generation: int
    code: str
    reason: str

    def summary(self) -> str:
        return f"{self.agent} (generation {self.generation}) stopped {self.code}: {self.reason}"


@dataclass(frozen=True)
class GatherReduced(Event):
    TYPE = "gather_reduced"
    FOLDS = "nothing: a gather's inputs reduced under its rule (a candidate, never a verdict on truth)"
    STYLE = "cyan"
    gather: str
    rule: str
    status: str
    value: Any
    dissent: list
    contributions: list
    reducer: str
    reason: str
    threshold: int | None = _optional()
    tie_break: str | None = _optional()
    selected: str | None = _optional()

    def summary(self) -> str:
        picked = f", picked {self.selected}" if self.selected else ""
        kept = f", {len(self.dissent or [])} dissent kept" if self.rule == "QUORUM" else ""
        return f"{self.gather} {self.rule} {self.status}{picked}{kept} ({self.reducer})"


@dataclass(frozen=True)
class FenceRecorded(Event):
    TYPE = "fence_recorded"
    FOLDS = "nothing: the conversation's terminal fence (a protocol fact, not task state)"
    STYLE = "bold cyan"
    to: Any
    terminal: str

    def summary(self) -> str:
        return f"terminal {self.terminal}"


def _data_writer(cls: type):
    """``cls.data`` written out from its plan (:func:`_data_plan`): the same dict, in the same order,
    without walking the plan for every event a delivery appends."""
    lines, opened = [], False
    for name, key, omit_none, rest in _data_plan(cls):
        if not rest and not omit_none and not opened:
            lines.append(f"    out = {{{key!r}: self.{name}}}")
            opened = True
            continue
        if not opened:
            lines.append("    out = {}")
            opened = True
        if rest:
            lines.append(f"    out.update(self.{name} or {{}})")
        elif omit_none:
            lines.append(f"    v = self.{name}")
            lines.append(f"    if v is not None: out[{key!r}] = v")
        else:
            lines.append(f"    out[{key!r}] = self.{name}")
    if not opened:
        lines.append("    out = {}")
    source = "def data(self):\n" + "".join(line + "\n" for line in lines) + "    return out\n"
    env: dict = {}
    exec(source, env)  # noqa: S102 - built above from the class's own field names and stored keys
    fn = env["data"]
    fn.__qualname__, fn.__module__, fn.__doc__ = f"{cls.__qualname__}.data", cls.__module__, Event.data.__doc__
    return fn


for _cls in REGISTRY.values():  # (each event type is built on a delivery's path: see sim.frozen)
    quick_init(_cls)
    if "data" not in _cls.__dict__:  # (a type that writes its own data keeps it)
        _cls.data = _data_writer(_cls)  # type: ignore[method-assign]  # each class's data writer, made once at import


def summarize(etype: str, data) -> str:
    """The one line an event reads as, in the CLI and in the TUI alike."""
    if isinstance(data, str):
        data = json.loads(data)
    cls = REGISTRY.get(etype)
    if cls is None:
        return json.dumps(data, sort_keys=True)[:80]
    return cls.from_data(data or {}).summary()

