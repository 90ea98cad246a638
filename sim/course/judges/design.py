"""Judges of exercise 1, the envelope design: the student's design is plugged into the running
simulator and judged by what intake recorded and what the invariants say, and its three functions
are asked directly about real intents of those runs; never by comparing strings with a model answer.

One test per rule of the seeds (message-protocols-and-shared-state: the envelope, "a duplicate is
not a conflict", "source of truth", "failures and debugging"), each all or nothing:

* ``keys_name_intents``: the key names the logical intent. The same intent keyed in process A and
  again in process B (two host processes with their own hash seeds), resent under a new message id
  or at a later time, keeps its key, and a resend delivered through the runtime (made in process B,
  as a restarted sender would make it) is recorded duplicate
  ("idempotency_key identifies the same logical intent"; "a duplicate delivery is ignorable only
  when both values match"); the runs with resend faults hold RESEND_DEDUPLICATED.
* ``distinct_intents``: distinct intents never share a key. A clean run records no duplicate and
  no conflict and no two of its messages share a key; a run with a second attempt records no
  more duplicates or conflicts than the course's design; the next attempt, another task, another
  trace, an ack of another message and the same message acknowledged by another sender each get
  another key ("task_id joins multiple attempts of one subtask"; a false duplicate is lost work,
  a false conflict freezes a healthy task).
* ``payload_conflict``: the same intent with another payload is a conflict. The key does not
  change when only what the intent says changes (its body, its product, its evidence, its
  context), and that second payload, made in process B (a restarted worker's or another replica's
  answer) and delivered through the runtime after the first, is recorded conflict ("same key and
  different digest: do not use last-write-wins. Freeze the task").
* ``evidence_by_reference``: evidence lives in the artifact store and is cited by digest: every
  message cites the evidence its intent rests on, its citations resolve, and no payload carries a
  copy of a stored artifact ("evidence_refs point to primary evidence so repeated summarization
  does not destroy verifiability"; "assign one authoritative location to each fact").
* ``minimal_payloads``: each recipient gets what it needs and no more: the body the runtime and the
  recipient act on, no other task's product and no worker's private notes ("minimize payload per
  recipient").
* ``fault_matrix``: the whole fault matrix holds every invariant on both stories, and each run ends
  as the course's design ends it, the report published once.

Every field of an Intent is also varied alone, on every kind of message a run sends, and the key held to
what the rule owes it (:data:`KEY_OWES`, generated from the dataclass's fields, so a field added to
Intent is judged or stops the grader): a field that names the intent must change the key
(``distinct_intents``), the transport's and the address's must not (``keys_name_intents``), nor what
the intent says (``payload_conflict``).

Where the student's code computes each answer is chosen here, on purpose, never by how many calls
came before (:mod:`sim.course.remote`): a run makes every envelope in process A the first time it
sends an intent and in process B when it sends the same intent again under another message id (a
resend, as a restarted sender would make it; :class:`~sim.course.judges.Resends`); the probes key
an intent in A and again in B and compare; what is delivered after a probed run (every kind resent,
every request and result said otherwise) is made in B; everything else is asked of A.

Runs are shared between the tests of one submission (:data:`_RUNS`, keyed by the file's path,
its content's hash and the run's arguments): each (story, faults, seed) is played once however many
tests name it, a clean run is probed once, and the design's answers are kept per submission and
process (the same intent is asked once in each; the probes ask past that). The course's
design's run of each case (its ending, its counts, its intents) is worked out once per process.
A model answer's grade plays 19 runs and asks the design about 600 times (docs/performance.md).
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import A, B, Broke, Judged, Resends, failed, grid_row, passed, per_submission, rerun_line, rule, signature_of, try_line

__all__ = [
    "SYMPTOMS",
    "behaviour",
    "distinct_intents",
    "evidence_by_reference",
    "fault_matrix",
    "keys_name_intents",
    "loads",
    "minimal_payloads",
    "payload_conflict",
    "search",
]

_FILE = "design.py"
_REPRO = "protolab run {scenario}--design {{dir}}/design.py{faults} --seed {seed} --db ex1.db && protolab check --db ex1.db"

#: Every symptom the judges of this module report (hint tables match on them; sim.course.hints).
SYMPTOMS = {
    # the key names the logical intent
    "key-differs-between-processes": "the very same intent asked twice, once in each of two processes, got two keys "
                                     "(hash(), id(), a counter, the clock or a random salt in the key)",
    "key-from-message-id": "the same intent under another message id got another key (the key follows the message id)",
    "key-from-time": "the same intent sent at another time got another key (the key follows created_at)",
    "key-from-recipient": "the same intent addressed to another participant got another key (the key follows the "
                          "recipient, which is where the message goes, not what it means)",
    "payload-from-message": "the same intent resent got the same key but another payload digest (the payload follows "
                            "the message id or the time), so intake saw a conflict",
    "resend-not-duplicate": "a resend of an intent, delivered after it, was not recorded duplicate",
    "resend-not-deduplicated": "RESEND_DEDUPLICATED broke in a run with a resend fault",
    # distinct intents, distinct keys
    "false-duplicate": "a run recorded a duplicate where the course's design records none: a new intent was "
                       "taken for a repeat and dropped",
    "false-conflict": "a run recorded a conflict where the course's design records none: a healthy task was frozen",
    "attempts-share-key": "two attempts of one step share a key",
    "steps-share-key": "two steps of one task (request, start, result, ...) share a key",
    "tasks-share-key": "the same step of two tasks shares a key",
    "traces-share-key": "the same step in two traces (two runs, two conversations) shares a key",
    "acks-share-key": "acks of two different messages share a key",
    "senders-share-key": "two senders' acks of one message share a key",
    "intents-share-key": "two different intents of a clean run share a key",
    # the same intent with another payload is a conflict
    "key-from-payload": "the key changed when only what the intent says changed (its body, product, evidence or "
                        "context): two payloads of one intent get two keys",
    "conflict-unseen": "the same intent delivered again with another payload was not recorded conflict",
    "payload-hides-difference": "two different payloads of one intent got one digest: payload() leaves out what "
                                "differs, so the second was taken for a duplicate",
    # evidence by reference
    "evidence-not-cited": "a message does not cite, in evidence_refs, evidence its intent rests on",
    "evidence-unresolved": "evidence_refs name something the store does not hold (EVIDENCE_RESOLVES)",
    "evidence-inline": "a payload carries a copy of a stored artifact (the fact table's rows, the draft)",
    # each recipient gets what it needs
    "body-field-missing": "a payload lacks or changes a field of the intent's body, which the runtime and the "
                          "recipient act on",
    "private-notes-sent": "a worker's private notes were sent to someone other than the manager",
    "other-task-product-sent": "a payload carries another task's product instead of a reference to it",
    # the fault matrix
    "invariant-broke": "an invariant broke in a run",
    "published-twice": "the report was published more than once (EFFECT_AT_MOST_ONCE)",
    "not-published": "the report was never published though the course's design publishes it",
    "wrong-ending": "a run ended in other task states than the course's design reaches",
    "evidence-refused": "a result reporting success cited no evidence and intake refused it (E_EVIDENCE_REQUIRED)",
    # the search
    "search-run-idle": "the search's story, in the order a run delivers it, did not end as the course's design ends it "
                       "(stalled or frozen: a search proves nothing of a story that does not do its job)",
    # any rule
    "design-error": "the design raised, or returned something that is not a valid envelope part",
}

_INVARIANT_SYMPTOM = {"RESEND_DEDUPLICATED": "resend-not-deduplicated", "EFFECT_AT_MOST_ONCE": "published-twice",
                      "EVIDENCE_RESOLVES": "evidence-unresolved", "EFFECT_HAS_EVIDENCE": "evidence-not-cited",
                      "CONFLICT_FROZEN": "conflict-unseen"}


def _rerun(judge: str, *, probes=(), cases=()) -> str:
    """The reproduce line of one probe or case of ``judge`` (a function of this module) that no plainer
    command shows: that case alone, judged again (:func:`sim.course.judges.rerun`)."""
    return rerun_line(1, f"design.{judge}", {"probes": [dict(p) for p in probes], "cases": [dict(c) for c in cases]})


def _repro(scenario: str, faults, seed: int = 0) -> str:
    sc = "" if scenario == "publish-report" else f"{scenario} "
    return _REPRO.format(scenario=sc, faults="".join(f" --fault {f}" for f in faults), seed=seed)


def _label(scenario: str, faults, seed: int) -> str:
    return f"{scenario}" + (f" + {' + '.join(faults)}" if faults else " (no faults)") + f", seed {seed}"


# ------------------------------------------------------------------------------------------ the design

_HOSTS: dict[Path, object] = {}
_PRINT_LIMIT = 256 * 1024


def _load(sub: Path):
    """The student's design, running in its own host processes (see :mod:`sim.course.remote`): this
    judge and the simulator never import the student's file, so it cannot rewrite them."""
    from ..remote import RemoteDesign

    path = (sub / _FILE).resolve()
    if path not in _HOSTS:
        _HOSTS[path] = RemoteDesign(path)
    return _HOSTS[path]


def _flooded(sub: Path) -> Judged | None:
    host = _HOSTS.get((sub / _FILE).resolve())
    printed = getattr(getattr(host, "module", None), "printed", 0) or 0
    if printed > _PRINT_LIMIT:
        return failed(f"your code printed more than {_PRINT_LIMIT // 1024} KB while judged ({printed:,} characters); "
                      "a design computes, it does not print")
    return None


def _fingerprint(sub: Path) -> tuple[str, str]:
    """(the design file's resolved path, a hash of its content): what a cached run is keyed by."""
    path = (sub / _FILE).resolve()
    h = hashlib.sha256()
    try:
        if path.is_file():
            with open(path, "rb") as f:
                h.update(f.read(4 * 1024 * 1024))
            h.update(str(path.stat().st_size).encode())
    except OSError:
        h.update(b"unreadable")
    return str(path), h.hexdigest()


def _canon(intent) -> str:
    """What an intent is, as text: two intents with the same text reach the student's code as the same
    JSON (the answers kept by :class:`_Kept` are looked up by it)."""
    return repr(tuple(getattr(intent, f) for f in _INTENT_FIELDS))


def _intent_fields() -> tuple[str, ...]:
    import dataclasses

    from ...design import Intent

    return tuple(f.name for f in dataclasses.fields(Intent))


_INTENT_FIELDS = _intent_fields()


class _Kept:
    """The student's design with each answer kept for the submission: the same intent is asked once
    in each process (a design must answer the same intent the same way; the probes ask past this to
    check that). Every answer is asked of the process a judge names (:data:`A` unless it says B)."""

    def __init__(self):
        self.remote = None
        self.answers: dict = {}

    @property
    def name(self) -> str:
        return getattr(self.remote, "name", _FILE)

    @property
    def digest_scheme(self) -> str:
        return self.remote.digest_scheme

    def ask(self, fn: str, intent, process: int = A):
        k = (fn, _canon(intent), process)
        if k not in self.answers:
            value = getattr(self.remote, fn)(intent, process)
            try:
                self.answers[k] = copy.deepcopy(value)
            except Exception:  # noqa: BLE001 - a value that cannot be copied is not kept
                return value
        return copy.deepcopy(self.answers[k])

    def idempotency_key(self, intent):
        return self.ask("idempotency_key", intent)

    def payload(self, intent):
        return self.ask("payload", intent)

    def evidence_refs(self, intent):
        return self.ask("evidence_refs", intent)

    def at(self, process: int) -> "_At":
        """This design with every envelope made in ``process``."""
        return _At(self, lambda _intent: process)

    def in_run(self) -> "_At":
        """This design as one run (or one search) uses it: each envelope made where
        :class:`~sim.course.judges.Resends` places it (a resend in process B)."""
        return _At(self, Resends().process_of)


class _At:
    """The design-shaped view of a :class:`_Kept` that the simulator calls: ``where(intent)`` says
    which process makes each envelope."""

    def __init__(self, kept: _Kept, where):
        self.kept, self.where = kept, where

    @property
    def name(self) -> str:
        return self.kept.name

    @property
    def digest_scheme(self) -> str:
        return self.kept.digest_scheme

    def idempotency_key(self, intent):
        return self.kept.ask("idempotency_key", intent, self.where(intent))

    def payload(self, intent):
        return self.kept.ask("payload", intent, self.where(intent))

    def evidence_refs(self, intent):
        return self.kept.ask("evidence_refs", intent, self.where(intent))


_KEPT: dict = per_submission({})  # fingerprint -> _Kept; bounded
_RUNS: dict = per_submission({})  # (fingerprint, scenario, faults, seed, probe) -> _Played; bounded
_RUNS_MAX = 128
_SCENARIOS: dict = {}


def _kept(sub: Path) -> _Kept:
    fp = _fingerprint(sub)
    k = _KEPT.get(fp)
    if k is None:
        if len(_KEPT) >= 16:
            _KEPT.pop(next(iter(_KEPT)))
        k = _KEPT[fp] = _Kept()
    k.remote = _load(sub)
    return k


def _scenario(name: str):
    if name not in _SCENARIOS:
        from ...scenario import load_scenario

        _SCENARIOS[name] = load_scenario(name)
    return _SCENARIOS[name]


def _ask_key(remote, intent, process: int = A):
    """The student's key for ``intent``, asked of host ``process`` (never kept: a probe asks past the
    kept answers): (key as text, error or None)."""
    from ..remote import RemoteError

    try:
        k = remote.idempotency_key(intent, process)
    except RemoteError as e:
        return None, e.message
    if not isinstance(k, str):
        return json.dumps(k, sort_keys=True, default=str), f"idempotency_key returned {type(k).__name__}, not a string"
    return k, None


def _what(i) -> str:
    """An intent in words: "the task_result of T-1 (attempt 1)", "writer's ack of the fence M-7"."""
    if i.type == "ack" and i.task_id == i.trace_id:
        return f"{i.sender}'s ack of the fence {i.answers}"
    if i.type == "ack":
        return f"the ack of {i.answers} ({i.task_id})"
    if i.type == "fence":
        return f"the fence of {i.trace_id}"
    return f"the {i.type} of {i.task_id} (attempt {i.attempt})"


def _kind(i) -> str:
    if i.type == "ack":
        return "fence-ack" if i.task_id == i.trace_id else "ack"
    return i.type


def _show(v, limit: int = 80) -> str:
    text = v if isinstance(v, str) else json.dumps(v, default=str)
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


# ------------------------------------------------------------------------------------------ runs


@dataclass
class _Played:
    """What one run of the student's design showed (a run is played once per submission)."""

    scenario: str
    faults: tuple
    seed: int
    error: str = ""  # the design raised or returned a bad part: the run did not finish
    states: dict = field(default_factory=dict)
    want: dict = field(default_factory=dict)  # the course's design's ending
    published: int = 0
    want_published: int = 0
    invariants: list = field(default_factory=list)  # [(name, ok, first witness)]
    deliveries: list = field(default_factory=list)  # [{message_id, type, task_id, decision, code}]
    messages: list = field(default_factory=list)  # [{message_id, type, sender, recipient, task_id, key, digest, payload, evidence_refs}]
    intents: dict = field(default_factory=dict)  # message_id -> the Intent it was made from
    artifacts: dict = field(default_factory=dict)  # ref -> {kind, task_id, markers}
    probes: dict | None = None  # the probes asked after a clean run (see _probe)

    @property
    def label(self) -> str:
        return _label(self.scenario, self.faults, self.seed)

    @property
    def repro(self) -> str:
        return _repro(self.scenario, self.faults, self.seed)

    def grid(self, ok: bool) -> dict:
        class _R:
            def __init__(self, name, held):
                self.name, self.ok = name, held

        return grid_row(self.scenario, self.faults, [_R(n, o) for n, o, _w in self.invariants], ok)

    def broken(self) -> list:
        return [(n, w) for n, o, w in self.invariants if not o]

    def decisions(self, *which: str) -> list:
        return [d for d in self.deliveries if d["decision"] in which]


def _markers(content) -> list[str]:
    """Text that shows an artifact's content was copied: a fact table's claims, a draft's title and body."""
    if not isinstance(content, dict):
        return []
    out = [str(r[0]) for r in content.get("rows", []) if isinstance(r, list) and r and len(str(r[0])) >= 12]
    out += [str(content[k]) for k in ("title", "body") if isinstance(content.get(k), str) and len(content[k]) >= 12]
    return out


_REFERENCE_RUNS: dict = {}


def _reference_run(scenario: str, faults, seed: int) -> dict:
    """The course's design's run of this case, once per process: every intent (what each sender
    meant to say, message by message: what the payload and evidence rules ask the student's design
    about, whatever the student's own run reached), the artifacts it stored, its message ids, how it
    ended (task states, publications) and how many duplicates and conflicts it recorded."""
    key = (scenario, tuple(str(f) for f in faults), int(seed))
    if key not in _REFERENCE_RUNS:
        from ...policy import get_policy
        from ...runner import fault_specs, new_run

        sc = _scenario(scenario)
        run = new_run(sc, get_policy("safe"), int(seed), fault_specs(sc, list(faults)), None)
        try:
            with run.store.group_commits():
                run.run()
            store = run.store
            ids = [m["message_id"] for m in store.messages()]
            arts = {}
            for a in store.artifacts():
                row = store.artifact(a["ref"]) or {}
                arts[a["ref"]] = {"kind": a["kind"], "task_id": a["task_id"], "markers": _markers(row.get("content"))}
            decisions = [d["decision"] for d in store.deliveries()]
            _REFERENCE_RUNS[key] = {
                "intents": [(mid, run.intents[mid]) for mid in ids if mid in run.intents], "artifacts": arts,
                "message_ids": set(ids), "states": {t["task_id"]: t["state"] for t in store.tasks()},
                "published": sum(e["kind"] == "publish" for e in store.effects()),
                "duplicates": decisions.count("duplicate"), "conflicts": decisions.count("conflict")}
        finally:
            run.store.close()
    return _REFERENCE_RUNS[key]


def _play(sub: Path, scenario: str, faults=(), seed: int = 0, probe: bool = False) -> _Played:
    """The student's design through one run (and, with ``probe``, the probes after it): played once
    per submission, kept by the file's path and content hash and the run's arguments."""
    faults = tuple(str(f) for f in faults)
    probe = probe and not faults
    fp = _fingerprint(sub)
    key = (fp, scenario, faults, int(seed), probe)
    hit = _RUNS.get(key) or (None if probe else _RUNS.get((fp, scenario, faults, int(seed), True)))
    if hit is not None:
        return hit
    from ...design import DesignError
    from ...policy import get_policy
    from ...runner import fault_specs, new_run

    design = _kept(sub)
    out = _Played(scenario, faults, int(seed))
    sc = _scenario(scenario)
    run = None
    try:
        run = new_run(sc, get_policy("safe"), int(seed), fault_specs(sc, list(faults)), None, design=design.in_run(),
                      plugged={"design": f"{_FILE} (remote)"})
        with run.store.group_commits():
            run.run()
        _facts(run, out)
        if probe:
            out.probes = _probe(run, design, out)
    except DesignError as e:
        out.error = " ".join(str(e.message).split())[:400]
    finally:
        if run is not None:
            run.store.close()
    if len(_RUNS) >= _RUNS_MAX:
        _RUNS.pop(next(iter(_RUNS)))
    _RUNS[key] = out
    return out


def _facts(run, out: _Played) -> None:
    from ...invariants import check
    store = run.store
    out.invariants = [(r.name, bool(r.ok), dict(r.witnesses[0]) if r.witnesses and isinstance(r.witnesses[0], dict)
                       else {}) for r in check(store)]
    out.states = {t["task_id"]: t["state"] for t in store.tasks()}
    out.published = sum(e["kind"] == "publish" for e in store.effects())
    ref = _reference_run(out.scenario, out.faults, out.seed)
    out.want, out.want_published = dict(ref["states"]), ref["published"]
    out.deliveries = [{k: d[k] for k in ("message_id", "type", "task_id", "decision", "code")}
                      for d in store.deliveries()]
    out.messages = [{"message_id": m["message_id"], "type": m["type"], "sender": m["sender"],
                     "recipient": m["recipient"], "task_id": m["task_id"], "key": m["idempotency_key"],
                     "digest": m["payload_digest"], "payload": m["payload"], "evidence_refs": list(m["evidence_refs"])}
                    for m in store.messages()]
    out.intents = {m["message_id"]: run.intents.get(m["message_id"]) for m in out.messages}
    for a in store.artifacts():
        row = store.artifact(a["ref"]) or {}
        out.artifacts[a["ref"]] = {"kind": a["kind"], "task_id": a["task_id"], "markers": _markers(row.get("content"))}


def _representatives(out: _Played) -> list:
    """The first message of each kind of a run (request, start, result, ack, fence, fence-ack)."""
    seen, reps = set(), []
    for m in out.messages:
        i = out.intents.get(m["message_id"])
        if i is None or _kind(i) in seen:
            continue
        seen.add(_kind(i))
        reps.append((m, i))
    return reps


def _revised(i, store=None):
    """The same intent saying something else: its body's words changed, another product (stored,
    when ``store`` is given), another evidence ref. Keeps what the runtime checks valid."""
    from ... import runtime

    body = {k: (v + " (revised)" if isinstance(v, str) and k not in ("status", "artifact") else v)
            for k, v in i.body.items()}
    refs, content = tuple(i.refs), i.content
    if isinstance(i.content, dict):
        content = copy.deepcopy(i.content)
        if isinstance(content.get("rows"), list) and len(content["rows"]) > 1:
            content["rows"] = content["rows"][1:]
        else:
            content["title"] = str(content.get("title", "")) + " (revised)"
        ref = (runtime.put_artifact(store, content, kind=str(content.get("kind", "document")), task_id=i.task_id)
               if store is not None else "sha256:" + hashlib.sha256(_canon(content).encode()).hexdigest())
        old = i.body.get("artifact")
        if "artifact" in body:
            body["artifact"] = ref
        refs = (ref,) + tuple(r for r in i.refs if r != old)
    return replace(i, body=body, refs=refs, content=content)


def _payload_parts(i) -> list:
    """(part, the intent with only that part changed) for each part of what an intent says."""
    out = []
    if i.body:
        out.append(("its body", replace(i, body={k: (v + " (revised)" if isinstance(v, str) and k != "status" else v)
                                                 for k, v in i.body.items()})))
    if i.content is not None:
        c = dict(i.content) if isinstance(i.content, dict) else {"content": i.content}
        c["revised"] = True
        out.append(("its product (content)", replace(i, content=c)))
    if i.refs:
        other = "sha256:" + hashlib.sha256(b"another product " + i.refs[0].encode()).hexdigest()
        out.append(("its evidence (refs)", replace(i, refs=(other,) + tuple(i.refs[1:]))))
    if i.context:
        out.append(("its context", replace(i, context={**i.context, "revised": "yes"})))
    return out


#: Every field of an :class:`~sim.design.Intent` and what the key owes it (issue 42): each is varied
#: alone on every kind of message a run sends, and the key is held to it. ``names``: what names the
#: intent (exercise 2's key signature: trace, task, sender, step, attempt, what it answers): another value
#: is another intent, so the key must change. ``sent``: the transport's and the address's (a resend gets
#: a new message id and time; the same intent may be addressed to another participant): the key must not
#: change. ``says``: what the intent says: another value is the same intent saying something else, so the
#: key must not change (the contradiction must show as a conflict). ``free``: ``retry``, a sender's new
#: try of a step after waiting: the course's design names it and exercise 2's keys do not, every run
#: holds either way, so no rule holds the key to it. A field added to Intent and missing here stops the
#: probe (a grader error), so none goes unjudged.
KEY_OWES = {"type": "names", "sender": "names", "trace_id": "names", "task_id": "names", "attempt": "names",
            "answers": "names", "recipient": "sent", "message_id": "sent", "created_at": "sent", "body": "says",
            "refs": "says", "content": "says", "context": "says", "retry": "free"}
_TYPES = ("task_request", "task_started", "task_result", "ack", "cancel", "fence")
#: The kinds of message whose intents a ``names`` field tells apart where it is not every kind's: an
#: attempt tells apart a task's tries (an ack answers one message, whatever attempt it was part of; a fence
#: closes the trace), what is answered tells apart acknowledgements.
_NAMED_IN = {"attempt": ("task_request", "task_started", "task_result", "cancel"), "answers": ("ack", "fence-ack")}
#: The symptom of a key that does not follow a field it owes (``names``) or follows one it must not.
_FIELD_SYMPTOM = {"type": "steps-share-key", "sender": "senders-share-key", "trace_id": "traces-share-key",
                  "task_id": "tasks-share-key", "attempt": "attempts-share-key", "answers": "acks-share-key",
                  "recipient": "key-from-recipient", "message_id": "key-from-message-id", "created_at": "key-from-time",
                  "body": "key-from-payload", "refs": "key-from-payload", "content": "key-from-payload",
                  "context": "key-from-payload"}


def _field_variants(i, later: str) -> list[tuple[str, str, str, object]]:
    """``(field, what the key owes it, the change in words, the intent with that field alone changed)``
    for every field of ``i``'s dataclass: strings to another participant or id, numbers one below (where
    the field has a value below) and one above, an answer to none and to another message, the type to
    every other type, what it says revised. Where the agents say a field twice (an attempt's lease in the
    body, an ack's subject as ``of``), the body follows, as an agent would write it."""
    import dataclasses

    out = []
    for f in dataclasses.fields(i):
        name, value = f.name, getattr(i, f.name)
        owes = KEY_OWES.get(name)
        if owes is None:
            raise LookupError(f"Intent has a field {name!r} that KEY_OWES does not classify")
        if owes == "free" or (owes == "names" and _kind(i) not in _NAMED_IN.get(name, (_kind(i),))):
            continue
        changes: list[tuple[str, object]] = []
        if name == "type":
            changes = [(f"its type {t}", t) for t in _TYPES if t != value]
        elif name == "created_at":
            changes = [("a later created_at", later)]
        elif name == "message_id":
            changes = [("another message_id", _other_id(value or "M-1", 77))]
        elif name == "answers":
            changes = [("no answers", None)] if value else []
            changes.append(("an answer to another message", "M-998" if value != "M-998" else "M-997"))
        elif isinstance(value, bool):
            changes = [(f"{name} {not value}", not value)]
        elif isinstance(value, int):
            least = 1 if name == "attempt" else 0
            changes = [(f"{name} {value + d}", value + d) for d in (-1, 1) if value + d >= least]
        elif isinstance(value, str):
            changes = [(f"{name} {value}-2", f"{value}-2")]
        elif name == "refs":
            other = "sha256:" + hashlib.sha256(b"another product " + repr(value).encode()).hexdigest()
            changes = [("another evidence ref", (other,) + tuple(value[1:]))]
        elif name in ("body", "context"):
            changes = [(f"its {name} revised", {**(value or {}), "revised": "yes"})]
        elif name == "content":
            c = dict(value) if isinstance(value, dict) else {}
            c["revised"] = True
            changes = [("its product revised", c)]
        for what, new in changes:
            kw = {name: new}
            if owes == "names" and name in ("attempt", "answers"):
                body = dict(i.body)
                if name == "attempt" and "lease_version" in body:
                    body["lease_version"] = new
                if name == "attempt" and i.type == "task_request":  # a retry's request names its attempt
                    if new > 1:
                        body["attempt"] = new
                    else:
                        body.pop("attempt", None)
                if name == "answers" and "of" in body:
                    body["of"] = new
                kw["body"] = body
            out.append((name, owes, what, replace(i, **kw)))
    return out


def _other_id(mid: str, n: int) -> str:
    prefix = mid.split("-")[0] if "-" in mid else "M"
    return f"{prefix}-{900 + n}"


def _probe(run, design: _Kept, out: _Played) -> dict:
    """Ask the design about the run's own intents, and deliver what a resend and a second payload
    would be through the runtime after the run (see the rules in the module's docstring)."""
    from ... import runtime
    from ...design import DesignError

    remote = design.remote
    later = run.time_at(run.now + 7)
    keys, pairs, resends, conflicts = [], [], [], []
    by_id = {m["message_id"]: m for m in out.messages}
    reps = _representatives(out)
    n = 0
    for m, i in reps:
        rec = {"kind": _kind(i), "message_id": m["message_id"], "what": _what(i), "type": i.type, "task_id": i.task_id,
               "error": None, "process": None, "message_id_kept": None, "time_kept": None, "payload_parts": []}
        keys.append(rec)
        k1, e1 = _ask_key(remote, i, A)
        k2, e2 = _ask_key(remote, i, B)  # the very same intent keyed again in the other process
        if e1 or e2:
            rec["error"] = e1 or e2
            continue
        rec["process"] = (k1, k2)
        if k1 != k2:
            continue
        n += 1
        ka, ea = _ask_key(remote, replace(i, message_id=_other_id(i.message_id, n)))
        kb, eb = _ask_key(remote, replace(i, created_at=later))
        rec["message_id_kept"], rec["time_kept"] = (ka == k1 and not ea), (kb == k1 and not eb)
        rec["resend_keys"] = (k1, ka, kb)
        rec["fields"] = []
        for name, owes, change, j in _field_variants(i, later):
            kj, ej = _ask_key(remote, j)
            held = ej is None and (kj != k1 if owes == "names" else kj == k1)
            rec["fields"].append({"field": name, "owes": owes, "change": change, "key": kj, "error": ej, "held": held})
        if i.type in ("task_request", "task_result"):
            for part, j in _payload_parts(i):
                kp, ep = _ask_key(remote, j)
                if ep or kp != k1:
                    rec["payload_parts"].append((part, kp))
        # distinct intents made from this one
        made = []
        if i.type in ("task_request", "task_started", "task_result"):
            body = dict(i.body)  # as the agents say a next attempt: a new lease, or a request that names it
            if "lease_version" in body:
                body["lease_version"] = i.attempt + 1
            if i.type == "task_request":
                body["attempt"] = i.attempt + 1
            made.append(("attempts-share-key", f"{_what(i)} and its next attempt", replace(i, attempt=i.attempt + 1, body=body)))
        if i.type == "task_result":
            made.append(("tasks-share-key", f"{_what(i)} and the same step of another task", replace(i, task_id="T-9")))
            made.append(("traces-share-key", f"{_what(i)} and the same step in another trace", replace(i, trace_id="R-9")))
        if _kind(i) == "ack":
            other = next((x["message_id"] for x in out.messages if x["type"] != "ack" and x["message_id"] != i.answers
                          and x["task_id"] == i.task_id), "M-99")
            made.append(("acks-share-key", f"{_what(i)} and an ack of {other}",
                         replace(i, answers=other, body={**i.body, "of": other} if "of" in i.body else i.body)))
        if _kind(i) == "fence-ack":
            others = sorted({x["sender"] for x in out.messages if x["type"] != "ack" and x["sender"] not in
                             (i.sender, "manager")} | {"writer", "researcher"} - {i.sender})
            made.append(("senders-share-key", f"{_what(i)} and {others[0]}'s ack of the same fence",
                         replace(i, sender=others[0])))
        for symptom, what, j in made:
            kj, ej = _ask_key(remote, j)
            pairs.append({"symptom": symptom, "what": what, "keys": (k1, kj), "error": ej,
                          "shared": ej is None and kj == k1})
    # through the runtime, after the run: every kind resent, every request and result said otherwise,
    # each made in process B, as a restarted sender or another replica would make it (the run's own
    # envelopes were made in process A). The conversation is fenced by then, and its fence refuses whatever
    # comes after it; what is probed is how intake reads the design's keys and digests, so the probes go to
    # intake past the conversation's rules.
    in_b = design.at(B)
    probe_policy = replace(run.policy, conversation_rules=False)
    for m, i in reps:
        again = replace(i, message_id=run.next_id(i.message_id.split("-")[0] or "M"), created_at=later)
        try:
            env = _build_with(run, in_b, again)
            o = runtime.deliver(run.store, env, policy=probe_policy)
        except DesignError as e:
            resends.append({"what": _what(i), "message_id": m["message_id"], "error": " ".join(e.message.split())[:300]})
            continue
        resends.append({"what": _what(i), "message_id": m["message_id"], "resend": env.message_id, "kind": _kind(i),
                        "decision": o.decision, "code": o.code, "same_key": env.idempotency_key == m["key"],
                        "same_digest": env.payload_digest == m["digest"], "error": None})
    for m in out.messages:
        i = out.intents.get(m["message_id"])
        if i is None or i.type not in ("task_request", "task_result") or m["message_id"] not in by_id:
            continue
        if any(c["task_id"] == i.task_id and c["type"] == i.type for c in conflicts):
            continue  # one of each per task
        try:
            other = replace(_revised(i, run.store), message_id=run.next_id("M"), created_at=later)
            env = _build_with(run, in_b, other)
            o = runtime.deliver(run.store, env, policy=probe_policy)
        except DesignError as e:
            conflicts.append({"what": _what(i), "message_id": m["message_id"], "task_id": i.task_id, "type": i.type,
                              "error": " ".join(e.message.split())[:300]})
            continue
        conflicts.append({"what": _what(i), "message_id": m["message_id"], "task_id": i.task_id, "type": i.type,
                          "second": env.message_id, "decision": o.decision, "code": o.code,
                          "same_key": env.idempotency_key == m["key"], "same_digest": env.payload_digest == m["digest"],
                          "error": None})
    return {"keys": keys, "pairs": pairs, "resends": resends, "conflicts": conflicts}


def _build_with(run, design, intent):
    """The envelope ``run`` makes of ``intent`` (privacy as the run applies it) with ``design``."""
    saved = run.design
    run.design = design
    try:
        return run._build(intent)
    finally:
        run.design = saved


def _played(sub: Path, case: dict) -> _Played:
    """The run a case names ({scenario, faults, seed})."""
    sc, faults, seed = str(case.get("scenario", "publish-report")), tuple(case.get("faults", ()) or ()), int(case.get("seed", 0))
    return _play(sub, sc, faults, seed)


def _reference_counts(scenario: str, faults, seed: int) -> tuple[int, int]:
    """How many duplicates and conflicts the course's design records in this run."""
    ref = _reference_run(scenario, faults, seed)
    return ref["duplicates"], ref["conflicts"]


def _design_broke(out: _Played) -> Broke:
    return Broke(case=out.label, what=f"the run stopped: your design failed: {out.error}", symptoms=("design-error",),
                 reproduce=out.repro, signature={"scenario": out.scenario, "faults": list(out.faults), "problem": "design-error"})


def _witness_text(w: dict) -> str:
    keys = ("problem", "task_id", "message_id", "original_message_id", "original_key", "resend_key",
            "resend_decision", "idempotency_key", "old_state", "new_state", "times_committed", "ref")
    parts = [f"{k}={w[k]}" for k in keys if w.get(k) is not None and not isinstance(w[k], (dict, list))]
    return ", ".join(parts)


def _share_symptom(a, b) -> str:
    """How two different intents that share a key differ, as a symptom."""
    if a is None or b is None:
        return "intents-share-key"
    if a.type == b.type == "ack" and a.answers == b.answers and a.sender != b.sender:
        return "senders-share-key"
    if a.type == b.type == "ack":
        return "acks-share-key"
    if a.type != b.type:
        return "steps-share-key"
    if a.task_id != b.task_id:
        return "tasks-share-key"
    if a.attempt != b.attempt:
        return "attempts-share-key"
    return "intents-share-key"


def _causes(out: _Played, type_: str) -> list[str]:
    """What the probes of this run found wrong with the key of intents of ``type_`` (why a resend or a
    second payload went unrecognised)."""
    for rec in (out.probes or {}).get("keys", []):
        if rec["type"] != type_ or rec["error"]:
            continue
        if rec["process"] and rec["process"][0] != rec["process"][1]:
            return ["key-differs-between-processes"]
        causes = []
        if rec["message_id_kept"] is False:
            causes.append("key-from-message-id")
        if rec["time_kept"] is False:
            causes.append("key-from-time")
        return causes
    return []


def _judged(fn):
    """A judge of this module: it makes the student's design first (a file that does not load fails
    here), counts what an earlier test of the submission did to its hosts, ends them when it is not
    shared, and fails a flood of output."""
    import functools

    @functools.wraps(fn)
    def run(sub: Path, args: dict) -> Judged:
        try:
            design = _load(sub)
            mod = getattr(design, "module", None)
            why = getattr(mod, "fatal", None)
            if why and hasattr(mod, "_fatal"):
                mod._fatal(why)  # an earlier test of this submission ended its hosts: this one is lost too
            verdict = fn(sub, dict(args or {}))
            return _flooded(sub) or _across_processes(sub, verdict)
        finally:
            host = _HOSTS.pop((sub / _FILE).resolve(), None)
            if host is not None:
                host.close()

    return run


def _across_processes(sub: Path, verdict: Judged) -> Judged:
    """A failing verdict whose reproduce line is a ``protolab run`` (one process) for a design whose keys
    differ between processes: that run keys every intent in one process and would not show what the
    grader's two host processes saw. Its reproduce line becomes the two processes' keys of one intent,
    and its message says why."""
    if verdict.score >= 0.999 or not (verdict.reproduce or "").startswith("protolab run"):
        return verdict
    out = _play(sub, "publish-report", (), 0, probe=True)
    rec = next((r for r in (out.probes or {}).get("keys", []) if r.get("process") and r["process"][0] != r["process"][1]),
               None)
    if rec is None or not _process_repro(out, rec):
        return verdict
    first, nl, rest = verdict.message.partition("\n")
    note = (f" (your design keys {rec['what']} differently in two processes, {_show(rec['process'][0])} and "
            f"{_show(rec['process'][1])}, and the grader runs it in two: one 'protolab run' keys everything in one "
            "process and would not show this; the reproduce line shows the two processes' keys)")
    return replace(verdict, message=first + note + nl + rest, reproduce=_process_repro(out, rec))


def _cases(args: dict, default: list | None = None) -> list[dict]:
    cases = args.get("cases")
    if cases is None:
        cases = default or []
    return [c for c in cases if isinstance(c, dict)]


def _probes(args: dict) -> list[dict]:
    probes = args.get("probes")
    if probes is None:
        probes = [{"scenario": "publish-report", "seed": 0}]
    return [p for p in probes if isinstance(p, dict)]


# ------------------------------------------------------------------------------------------ the rules


@_judged
def keys_name_intents(sub: Path, args: dict) -> Judged:
    """The key names the logical intent: the same intent gets the same key in either process, under
    another message id and at another time, and a resend delivered through the runtime is recorded
    duplicate; the runs with resend faults hold RESEND_DEDUPLICATED."""
    broke, checked, rows = [], 0, []
    for p in _probes(args):
        out = _play(sub, str(p.get("scenario", "publish-report")), (), int(p.get("seed", 0)), probe=True)
        if out.error:
            checked += 1
            broke.append(_design_broke(out))
            continue
        for rec in out.probes["keys"]:
            checked += 1
            case = f"{out.label}: {rec['what']}"
            if rec["error"]:
                broke.append(Broke(case, f"asking your design for its key failed: {rec['error']}", ("design-error",)))
                continue
            k1, k2 = rec["process"]
            if k1 != k2:
                broke.append(Broke(case, f"asked twice for the very same intent, the two processes that run your design "
                                         f"(each with its own hash seed) gave two keys, {_show(k1)} and {_show(k2)}: "
                                         "a restarted worker or another replica would not recognise its own intent",
                                   ("key-differs-between-processes",), reproduce=_process_repro(out, rec)))
                continue
            bad, sym = [], []
            if not rec["message_id_kept"]:
                bad.append("only its message_id changed")
                sym.append("key-from-message-id")
            if not rec["time_kept"]:
                bad.append("only its created_at (the time it is sent) changed")
                sym.append("key-from-time")
            if bad:
                k0, ka, kb = rec["resend_keys"]
                got = ka if not rec["message_id_kept"] else kb
                broke.append(Broke(case, f"the same intent with {' / '.join(bad)} got another key ({_show(k0)}, then "
                                         f"{_show(got)}): a resend would be a new intent", tuple(sym),
                                   reproduce=_repro(out.scenario, [f"resend:{rec['type']}"], out.seed)))
            # every other field the transport or the address gives, varied alone (message_id and
            # created_at are judged just above, in the words of a resend)
            broke += _fields_broke(out, rec, "sent", _rerun("keys_name_intents", probes=[p]),
                                   skip=("message_id", "created_at"))
        for r in out.probes["resends"]:
            checked += 1
            case = f"{out.label}: {r['what']} resent after the run"
            if r["error"]:
                broke.append(Broke(case, f"your design failed on the resend: {r['error']}", ("design-error",)))
                continue
            if r["decision"] == "duplicate":
                continue
            i_type = next((x["type"] for x in out.probes["keys"] if x["message_id"] == r["message_id"]), "")
            if r["same_key"]:
                why, sym = ("its key held but its payload digest changed, so intake saw one key with two payloads",
                            ["resend-not-duplicate", "payload-from-message"])
            else:
                why, sym = "its key changed, so intake took it for a new intent", \
                    ["resend-not-duplicate", *_causes(out, i_type)]
            broke.append(Broke(case, f"the resend {r['resend']} (made in the other process, as a restarted sender "
                                     f"would make it) was recorded {r['decision']}"
                                     f"{' (' + r['code'] + ')' if r['code'] else ''}, not duplicate: {why}", tuple(sym),
                               reproduce=_repro(out.scenario, ["resend:" + (i_type or "task_result")], out.seed)))
    for c in _cases(args):
        out = _played(sub, c)
        checked += 1
        if out.error:
            rows.append(out.grid(False))
            broke.append(_design_broke(out))
            continue
        bad = [w for n, w in out.broken() if n == "RESEND_DEDUPLICATED"]
        rows.append(out.grid(not bad))
        if bad:
            broke.append(Broke(out.label, f"RESEND_DEDUPLICATED broke: {_witness_text(bad[0])}",
                               ("resend-not-deduplicated",), reproduce=out.repro, witness={"invariant": "RESEND_DEDUPLICATED",
                                                                                         "witness": bad[0]},
                               signature={"scenario": out.scenario, "faults": list(out.faults),
                                          "invariant": "RESEND_DEDUPLICATED"}))
    return rule(checked, broke, "the same intent keeps its key in either process, under a new message id and at a "
                                "later time, and its resend is recorded duplicate", grid=rows or None)


def _process_repro(out: _Played, rec: dict) -> str:
    i = out.intents.get(rec["message_id"])
    if i is None:
        return ""
    fields = {k: getattr(i, k) for k in ("type", "sender", "recipient", "trace_id", "task_id", "attempt", "retry", "answers")}
    call = (f"from sim.design import Intent; import design; print(design.idempotency_key(Intent(**{fields!r}, "
            f"body={i.body!r}, refs={tuple(i.refs)!r})))")
    return try_line(1, call, processes=2)


def _fields_broke(out: "_Played", rec: dict, owes: str, one: str, skip=()) -> list[Broke]:
    """What ``rec``'s field-by-field probe shows for the fields whose rule is ``owes`` (see KEY_OWES):
    one Broke per field the key was not held to (every variant of it named), ``skip``: fields another
    check of the same test already judges in its own words."""
    bad: dict[str, list[dict]] = {}
    for f in rec.get("fields", ()):
        if f["owes"] == owes and f["field"] not in skip and not f["held"]:
            bad.setdefault(f["field"], []).append(f)
    found = []
    k1 = rec["process"][0]
    for name, fs in bad.items():
        changes = " / ".join(f["change"] for f in fs[:3])
        err = next((f["error"] for f in fs if f["error"]), None)
        case = f"{out.label}: {rec['what']}"
        if err:
            what = f"with only {changes}, asking your design for its key failed: {err}"
            sym = ("design-error",)
        elif owes == "names":
            what = (f"with only {changes} (a different intent), your key stayed {_show(k1)}: two different intents "
                    f"would share a key, so the second is taken for a repeat of the first (or a conflict with it)")
            sym = (_FIELD_SYMPTOM[name],)
        else:
            what = (f"with only {changes} (the same intent), your key changed ({_show(k1)}, then {_show(fs[0]['key'])}): "
                    + ("a copy of one intent would be taken for new work" if owes == "sent" else
                       "two payloads of one intent get two keys, so intake can never see that they conflict"))
            sym = (_FIELD_SYMPTOM[name],)
        found.append(Broke(case, what, sym, reproduce=one))
    return found


@_judged
def distinct_intents(sub: Path, args: dict) -> Judged:
    """Distinct intents never share a key: a clean run records no duplicate and no conflict and no two
    of its messages share a key; runs with second attempts record no more duplicates or conflicts
    than the course's design; made-up neighbours of the run's intents (the next attempt, another
    task, another trace, an ack of another message, another sender's ack) each get another key."""
    broke, checked, rows = [], 0, []

    def decisions(out: _Played, clean: bool, one: str) -> None:
        dup, con = _reference_counts(out.scenario, out.faults, out.seed)
        got_dup, got_con = out.decisions("duplicate"), out.decisions("conflict")
        first = {}
        for m in out.messages:
            first.setdefault(json.dumps(m["key"]), m["message_id"])
        for got, want, sym, word in ((got_dup, dup, "false-duplicate", "duplicate"), (got_con, con, "false-conflict", "conflict")):
            if len(got) <= want:
                continue
            d = got[want] if want < len(got) else got[0]
            m = next((x for x in out.messages if x["message_id"] == d["message_id"]), None)
            prior = first.get(json.dumps(m["key"])) if m else None
            kind = _share_symptom(out.intents.get(prior), out.intents.get(d["message_id"])) if prior and prior != d["message_id"] else None
            i = out.intents.get(d["message_id"])
            names = f"{d['message_id']} ({_what(i) if i else d['type']})"
            if prior and prior != d["message_id"]:
                j = out.intents.get(prior)
                names += f" shares its key with {prior} ({_what(j) if j else '?'})"
            broke.append(Broke(out.label, f"{len(got)} {word}(s) recorded where the course's design records {want}: {names}"
                                          + ("; in a run with no faults every message is a new intent" if clean else ""),
                               tuple(s for s in (sym, kind) if s), reproduce=one,
                               signature={"scenario": out.scenario, "faults": list(out.faults), "problem": sym}))

    def shared_keys(out: _Played, one: str) -> None:
        """In a run with no faults every message is a new intent: no two may share a key."""
        groups: dict = {}
        for m in out.messages:
            groups.setdefault(json.dumps(m["key"]), []).append(m["message_id"])
        for key, ids in groups.items():
            if len(ids) < 2:
                continue
            a, b = out.intents.get(ids[0]), out.intents.get(ids[1])
            broke.append(Broke(f"{out.label}: the key {_show(json.loads(key))}",
                               f"{len(ids)} different intents of a run with no faults share it: "
                               + ", ".join(f"{x} ({_what(out.intents[x]) if out.intents.get(x) else '?'})" for x in ids[:3]),
                               (_share_symptom(a, b),), reproduce=one))

    for p in _probes(args):
        out = _play(sub, str(p.get("scenario", "publish-report")), (), int(p.get("seed", 0)), probe=True)
        checked += 1
        if out.error:
            broke.append(_design_broke(out))
            continue
        one = _rerun("distinct_intents", probes=[p])
        decisions(out, True, one)
        shared_keys(out, one)
        for rec in out.probes["keys"]:  # every field that names the intent, varied alone, on every kind
            if rec["error"] or rec["process"][0] != rec["process"][1]:
                continue
            checked += 1
            broke += _fields_broke(out, rec, "names", one)
        for pair in out.probes["pairs"]:
            checked += 1
            if pair["error"]:
                broke.append(Broke(f"{out.label}: {pair['what']}", f"asking your design for the key failed: {pair['error']}",
                                   ("design-error",), reproduce=one))
            elif pair["shared"]:
                broke.append(Broke(f"{out.label}: {pair['what']}", f"two different intents got one key, "
                                   f"{_show(pair['keys'][0])}", (pair["symptom"],), reproduce=one))
    for c in _cases(args):
        out = _played(sub, c)
        checked += 1
        rows.append(out.grid(not out.error))
        if out.error:
            broke.append(_design_broke(out))
            continue
        one = _rerun("distinct_intents", cases=[c])
        decisions(out, not out.faults, one)
        if not out.faults:
            shared_keys(out, one)
    return rule(checked, broke, "different intents got different keys: no false duplicate, no false conflict",
                grid=rows or None)


@_judged
def payload_conflict(sub: Path, args: dict) -> Judged:
    """The same intent with another payload is a conflict: the key does not change when only what
    the intent says changes, and that second payload, delivered through the runtime after the
    first, is recorded conflict."""
    broke, checked = [], 0
    for p in _probes(args):
        out = _play(sub, str(p.get("scenario", "publish-report")), (), int(p.get("seed", 0)), probe=True)
        one = _rerun("payload_conflict", probes=[p])
        if out.error:
            checked += 1
            broke.append(_design_broke(out))
            continue
        for rec in out.probes["keys"]:  # what an intent says, varied alone, on the kinds judged by no delivery below
            if rec["type"] in ("task_request", "task_result") or rec["error"] or rec["process"][0] != rec["process"][1]:
                continue
            checked += 1
            broke += _fields_broke(out, rec, "says", one)
        for rec in out.probes["keys"]:
            if rec["type"] not in ("task_request", "task_result") or rec["error"] or rec["process"][0] != rec["process"][1]:
                continue
            checked += 1
            if rec["payload_parts"]:
                parts = [part for part, _k in rec["payload_parts"]]
                broke.append(Broke(f"{out.label}: {rec['what']}",
                                   f"with only {' / '.join(parts)} changed, your key changed ({_show(rec['process'][0])}, "
                                   f"then {_show(rec['payload_parts'][0][1])}): two payloads of one intent get two keys, "
                                   "so intake can never see that they conflict", ("key-from-payload",), reproduce=one))
        for c in out.probes["conflicts"]:
            checked += 1
            case = f"{out.label}: {c['what']} sent again with another payload"
            if c["error"]:
                broke.append(Broke(case, f"your design failed on it: {c['error']}", ("design-error",), reproduce=one))
                continue
            if c["decision"] == "conflict":
                continue
            rec = next((r for r in out.probes["keys"] if r["type"] == c["type"]), None)
            if c["same_key"] and c["same_digest"]:
                why, sym = ("its payload digest did not change: payload() leaves out what differs (another product, "
                            "other words), so the contradiction was taken for a repeat"), ["payload-hides-difference"]
            else:
                sym = ["key-from-payload"] if rec and rec["payload_parts"] else _causes(out, c["type"])
                why = "its key changed, so intake took it for another intent"
            broke.append(Broke(case, f"{c['second']} (the same intent, another product and other words, made in the "
                                     f"other process as a restarted worker's answer would be) was recorded "
                                     f"{c['decision']}{' (' + c['code'] + ')' if c['code'] else ''}, not conflict: {why}",
                               ("conflict-unseen", *sym), reproduce=one))
    for c in _cases(args):
        out = _played(sub, c)
        checked += 1
        if out.error:
            broke.append(_design_broke(out))
            continue
        bad = [(n, w) for n, w in out.broken() if n in ("CONFLICT_FROZEN", "NO_EFFECT_FROM_UNTRUSTED")]
        if bad or out.states != out.want:
            n, w = bad[0] if bad else ("", {})
            broke.append(Broke(out.label, (f"{n} broke: {_witness_text(w)}" if bad else
                                           f"the run ended {out.states}, the course's design ends it {out.want}"),
                               ("conflict-unseen",), reproduce=_rerun("payload_conflict", cases=[c])))
    return rule(checked, broke, "the same intent with another payload kept its key and was recorded conflict")


def _designed(sub: Path, case: dict) -> tuple[dict, list]:
    """(the reference run of ``case``, [(message id, intent, payload or None, evidence_refs or None,
    error or None)]): the student's payload and evidence_refs for every intent of that run."""
    from ..remote import RemoteError

    ref = _reference_run(str(case.get("scenario", "publish-report")), tuple(case.get("faults", ()) or ()),
                         int(case.get("seed", 0)))
    design = _kept(sub)
    out = []
    for mid, i in ref["intents"]:
        try:
            payload, refs = design.payload(i), design.evidence_refs(i)
        except RemoteError as e:
            out.append((mid, i, None, None, " ".join(e.message.split())[:300]))
            continue
        err = None
        if not isinstance(payload, dict):
            err = f"payload returned {type(payload).__name__}, not a dict"
        elif not isinstance(refs, (list, tuple)):
            err = f"evidence_refs returned {type(refs).__name__}, not a list"
        out.append((mid, i, payload if err is None else None, list(refs) if err is None else None, err))
    return ref, out


def _text(payload) -> str:
    return json.dumps(payload, ensure_ascii=False, default=str)


def _case_label(case: dict) -> str:
    return _label(str(case.get("scenario", "publish-report")), tuple(case.get("faults", ()) or ()), int(case.get("seed", 0)))


@_judged
def evidence_by_reference(sub: Path, args: dict) -> Judged:
    """Evidence lives in the artifact store: asked about every intent of the story, the design cites
    the evidence each rests on, cites only what the store holds, and carries no copy of a stored
    artifact; in its own run, intake never refuses a success for citing nothing."""
    broke, checked = [], 0
    for c in _cases(args, [{"scenario": "publish-report", "faults": [], "seed": 0}]):
        label, repro = _case_label(c), _rerun("evidence_by_reference", cases=[c])
        out = _played(sub, c)
        checked += 1
        if out.error:
            broke.append(_design_broke(out))
        for d in out.deliveries:
            if d["code"] == "E_EVIDENCE_REQUIRED":
                broke.append(Broke(label, f"{d['message_id']} ({d['type']} of {d['task_id']}) reports success and cites "
                                          "nothing, so intake refused it (E_EVIDENCE_REQUIRED)",
                                   ("evidence-not-cited", "evidence-refused"), reproduce=repro,
                                   signature={"scenario": out.scenario, "faults": list(out.faults), "problem": "no-evidence"}))
                break
        ref, designed = _designed(sub, c)
        known = set(ref["artifacts"]) | ref["message_ids"]
        for mid, i, payload, refs, err in designed:
            checked += 1
            case = f"{label}: {mid} ({_what(i)})"
            if err:
                broke.append(Broke(case, f"your design failed on it: {err}", ("design-error",)))
                continue
            problems, sym = [], []
            missing = [r for r in i.refs if r not in refs]
            if missing:
                kinds = [ref["artifacts"].get(r, {}).get("kind", "message") for r in missing]
                problems.append(f"its evidence_refs {_show(refs, 60)} leave out {len(missing)} ref(s) its intent rests "
                                f"on ({', '.join(dict.fromkeys(kinds))} {missing[0][:19]}…)")
                sym.append("evidence-not-cited")
            unknown = [r for r in refs if not isinstance(r, str) or r not in known or r == mid]
            if unknown:
                problems.append(f"its evidence_refs name {_show(unknown[0], 40)}, which the store does not hold (no "
                                "artifact has that digest, no message that id)")
                sym.append("evidence-unresolved")
            text = _text(payload)
            copied = [a for a in ref["artifacts"].values() if any(mark in text for mark in a["markers"])]
            if copied:
                problems.append("its payload carries a copy of "
                                + ", ".join(dict.fromkeys(f"the {a['kind']} of {a['task_id']}" for a in copied))
                                + " instead of citing it by digest")
                sym.append("evidence-inline")
            if problems:
                broke.append(Broke(case, "; ".join(problems), tuple(sym), reproduce=repro))
    return rule(checked, broke, "every message cites its evidence by digest and carries no copy of it")


@_judged
def minimal_payloads(sub: Path, args: dict) -> Judged:
    """Each recipient gets what it needs and no more: asked about every intent of the story, the
    design sends the intent's body (what the runtime and the recipient act on), no other task's
    product, and no worker's private notes to anyone but the manager."""
    broke, checked = [], 0
    for c in _cases(args, [{"scenario": "publish-report", "faults": [], "seed": 0}]):
        label, repro = _case_label(c), _rerun("minimal_payloads", cases=[c])
        ref, designed = _designed(sub, c)
        notes = {str(i.context["notes"]) for _m, i in ref["intents"]
                 if isinstance(i.context, dict) and isinstance(i.context.get("notes"), str)}
        for mid, i, payload, _refs, err in designed:
            checked += 1
            case = f"{label}: {mid} ({_what(i)} to {i.recipient})"
            if err:
                broke.append(Broke(case, f"your design failed on it: {err}", ("design-error",)))
                continue
            problems, sym = [], []
            lacking = [k for k, v in i.body.items() if k not in payload or payload[k] != v]
            if lacking:
                problems.append(f"it lacks or changes {', '.join(repr(k) for k in lacking)} of the intent's body, which "
                                f"{i.recipient} and the runtime act on")
                sym.append("body-field-missing")
            text = _text(payload)
            if i.recipient != "manager" and (any(n in text for n in notes) or "@staff.internal" in text):
                problems.append(f"it carries a worker's private notes to {i.recipient}")
                sym.append("private-notes-sent")
            others = [a for a in ref["artifacts"].values() if a["task_id"] != i.task_id
                      and any(mark in text for mark in a["markers"])]
            if others:
                problems.append("it carries another task's product ("
                                + ", ".join(dict.fromkeys(f"the {a['kind']} of {a['task_id']}" for a in others))
                                + ") instead of a reference to it")
                sym.append("other-task-product-sent")
            if problems:
                broke.append(Broke(case, "; ".join(problems), tuple(sym), reproduce=repro))
    return rule(checked, broke, "every recipient got what it needs: the body, references rather than copies, nobody's "
                                "private notes")


def _matrix_cases(args: dict) -> list[dict]:
    cases = _cases(args)
    if args.get("faults") is not None:  # the older form: every fault list on every scenario
        seed = int(args.get("seed", 0))
        cases += [{"scenario": sc, "faults": list(f), "seed": seed} for sc in args.get("scenarios", ["publish-report"])
                  for f in args["faults"]]
    return cases or [{"scenario": "publish-report", "faults": [], "seed": 0}]


def _run_broke(out: _Played) -> Broke | None:
    """What went wrong in one run of the fault matrix (None: every invariant held, it ended as the
    course's design ends it, the report published as often)."""
    if out.error:
        return _design_broke(out)
    sig = {"scenario": out.scenario, "faults": list(out.faults)}
    broken = out.broken()
    if broken:
        n, w = broken[0]
        more = f" (and {', '.join(b for b, _w in broken[1:])})" if len(broken) > 1 else ""
        sym = tuple(dict.fromkeys(_INVARIANT_SYMPTOM.get(b, "invariant-broke") for b, _w in broken))
        return Broke(out.label, f"{n} broke{more}: {_witness_text(w)}", sym, reproduce=out.repro,
                     witness={"invariant": n, "witness": w}, signature={**sig, "invariant": n})
    if out.states != out.want:
        diff = ", ".join(f"{t} {out.states.get(t, 'never created')} (expected {s})" for t, s in sorted(out.want.items())
                         if out.states.get(t) != s)
        bare = [d for d in out.deliveries if d["code"] == "E_EVIDENCE_REQUIRED"]
        frozen = out.decisions("conflict")
        why, sym, problem = "", ["wrong-ending"], "wrong-ending"
        if bare:
            d = bare[0]
            why = (f"; {d['message_id']} ({d['type']} of {d['task_id']}) was rejected with E_EVIDENCE_REQUIRED: it reports "
                   "success and its evidence_refs are empty, so it was never accepted")
            sym.append("evidence-refused")
            problem = "no-evidence"
        elif frozen and len(frozen) > _reference_counts(out.scenario, out.faults, out.seed)[1]:
            d = frozen[-1]
            why = (f"; {d['message_id']} ({d['type']}) was a conflict: its key was already recorded with another "
                   "payload, so two different intents share one key")
            sym.append("false-conflict")
        return Broke(out.label, f"the run did not finish as it should: {diff}{why}", tuple(sym),
                     reproduce=_rerun("fault_matrix", cases=[{"scenario": out.scenario, "faults": list(out.faults),
                                                              "seed": out.seed}]),
                     witness={"states": out.states, "expected": out.want}, signature={**sig, "problem": problem})
    if out.published != out.want_published:
        sym = "published-twice" if out.published > out.want_published else "not-published"
        again = _rerun("fault_matrix", cases=[{"scenario": out.scenario, "faults": list(out.faults), "seed": out.seed}])
        return Broke(out.label, f"the report was published {out.published} time(s), expected {out.want_published}",
                     (sym,), reproduce=out.repro if sym == "published-twice" else again,
                     witness={"problem": "published", "times": out.published},
                     signature={**sig, "problem": "published"})
    return None


@_judged
def fault_matrix(sub: Path, args: dict) -> Judged:
    """Each case ({scenario, faults, seed}; or the older ``faults`` x ``scenarios``): every invariant
    holds, the run ends as the course's design ends it, the report is published as often."""
    broke, rows = [], []
    cases = _matrix_cases(args)
    for c in cases:
        out = _played(sub, c)
        b = _run_broke(out)
        rows.append(out.grid(b is None))
        if b is not None:
            broke.append(b)
    return rule(len(cases), broke, "every run holds every invariant and ends as it should", grid=rows)


@_judged
def search(sub: Path, args: dict) -> Judged:
    """Every delivery order of a small run (``args["searches"]``: scenario, faults, depth) with the
    student's design: no invariant breaks in any of them; a break is shown as its shortest path, a
    table of deliveries, with the scenario file that replays it (:mod:`sim.course.judges.search`)."""
    from ...policy import get_policy
    from .search import Plugged, search as explore_all

    design = _kept(sub)
    checked, broke, rows = explore_all(
        _fingerprint(sub), args.get("searches", []),
        lambda policy: Plugged(design.in_run(), get_policy(policy), {"design": f"{_FILE} (remote)"}),
        reproduce="protolab run {dir}/counterexample.toml --design {dir}/design.py --db counterexample.db && protolab check --db counterexample.db",
        symptom=lambda inv, _faults: _INVARIANT_SYMPTOM.get(inv, "invariant-broke"), failed_symptom="design-error",
        reference=lambda policy: Plugged(None, get_policy(policy), {}),
        idle_reproduce=lambda one: rerun_line(1, "design.search", {"searches": [one]}))
    return rule(checked, broke, "no order of the deliveries breaks an invariant", grid=rows)


@_judged
def loads(sub: Path, args: dict) -> Judged:
    """The design file loads and carries a whole clean run (the fault matrix's first case)."""
    out = _played(sub, {"scenario": "publish-report", "faults": [], "seed": 0})
    b = _run_broke(out)
    if b is not None:
        return failed(f"{b.case}: {b.what}", reproduce=b.reproduce, witness=b.witness, grid=[out.grid(False)],
                      signature=signature_of(out.scenario, out.faults, b.witness))
    return passed(f"{out.label}: every invariant holds, published {out.published} time(s)", grid=[out.grid(True)])


# ------------------------------------------------------------------------------------------ a run for another exercise
#
# Exercise 2's judge (keys.py) plays whole runs with a design of its own making through these.


def _run(sub: Path, scenario: str = "publish-report", faults=(), seed: int = 0, design=None):
    from ...plugins import Plugins
    from ...runner import run_scenario
    from ...scenario import load_scenario

    # strict_faults=False: a design that stalls the story leaves a fault nothing to act on; the
    # judge reports how the run ended rather than refusing the fault.
    return run_scenario(load_scenario(scenario), seed=seed, faults=list(faults),
                        plugins=Plugins(design=design if design is not None else _load(sub)), strict_faults=False)


def _expected(scenario: str, faults: list[str], seed: int) -> tuple[dict[str, str], int]:
    """How the reference design's run of the same scenario, seed and faults ends: the task states
    and the number of publications a correct design reaches too."""
    from . import reference_outcome

    return reference_outcome(scenario, faults, seed)


def _judge_run(sub: Path, scenario: str, faults: list[str], seed: int = 0, design=None,
               rows: list | None = None) -> tuple[bool, str, dict | None]:
    """(ok, what happened, witness) for one run of the student's design (or of ``design``, built
    from the student's parts by another exercise's judge); the run's grid row goes to ``rows``."""
    ok, msg, witness, results = _judge_run_checked(sub, scenario, faults, seed, design)
    if rows is not None:
        rows.append(grid_row(scenario, faults, results, ok))
    return ok, msg, witness


def _judge_run_checked(sub: Path, scenario: str, faults: list[str], seed: int = 0, design=None):
    from ...invariants import check

    store = _run(sub, scenario, faults, seed, design)
    try:
        label = f"{scenario}" + (f" with {' + '.join(faults)}" if faults else " (no faults)")
        results = check(store)
        broken = [r for r in results if not r.ok]
        if broken:
            r = broken[0]
            w = r.witnesses[0] if r.witnesses else {}
            more = f" (and {', '.join(b.name for b in broken[1:])})" if len(broken) > 1 else ""
            return False, f"{label}: {r.name} broke{more}: {_witness_text(w)}", {"invariant": r.name, "witness": w}, results
        states = {t["task_id"]: t["state"] for t in store.tasks()}
        want, want_pub = _expected(scenario, faults, seed)
        if states != want:
            diff = ", ".join(f"{t} {states.get(t, 'never created')} (expected {s})" for t, s in sorted(want.items())
                             if states.get(t) != s)
            dels = store.deliveries()
            frozen = [d for d in dels if d["decision"] == "conflict"]
            bare = [d for d in dels if d["code"] == "E_EVIDENCE_REQUIRED"]
            why, witness = "", {"states": states, "expected": want}
            if bare:
                d = bare[0]
                why = (f"; {d['message_id']} ({d['type']} of {d['task_id']}) was rejected with E_EVIDENCE_REQUIRED: "
                       "it reports success and its evidence_refs are empty, so it was never accepted")
                witness["problem"] = "no-evidence"
            elif frozen:
                d = frozen[0]
                why = (f"; {d['message_id']} ({d['type']}) was a conflict: its key was already recorded with "
                       "another payload, so two different intents share one key")
            return False, f"{label}: the run did not finish as it should: {diff}{why}", witness, results
        publications = [e for e in store.effects() if e["kind"] == "publish"]
        if len(publications) != want_pub:
            return False, f"{label}: the report was published {len(publications)} times, expected {want_pub}", {"problem": "published", "times": len(publications)}, results
        return True, f"{label}: every invariant holds, published {len(publications)} time(s)", None, results
    finally:
        store.close()


# ------------------------------------------------------------------------------------------ behaviour

_B_FAULTS = ([], ["duplicate"], ["resend"], ["conflicting-digest"], ["late-failure"], ["transient"], ["drop"], ["delay"],
             ["crash"], ["resend:task_request"], ["resend:task_started"], ["resend:ack"], ["transient", "resend"],
             ["reorder"], ["late-conflict"], ["lost-evidence"], ["crash", "resend:task_result"])
_B_SCENARIOS = ("publish-report", "fan-out")
_B_SEEDS = (0, 1)


def _b_run(out: _Played) -> dict:
    if out.error:
        return {"error": True}
    outcome = {"states": dict(sorted(out.states.items())), "published": out.published,
               "invariants": {n: ok for n, ok, _w in out.invariants}}
    if any(i is not None and i.retry for i in out.intents.values()):
        # A step tried again after a timeout (see behaviour's docstring): only how the run ended counts.
        return {"retried": True, **outcome}
    groups: dict = {}
    for m in out.messages:
        groups.setdefault(json.dumps(m["key"], sort_keys=True), []).append(m["message_id"])
    payloads, evidence = {}, {}
    for m in out.messages:
        i = out.intents.get(m["message_id"])
        body = i.body if i is not None else None
        payloads[m["message_id"]] = "the body" if m["payload"] == body else m["payload"]
        refs = list(i.refs) if i is not None else None
        evidence[m["message_id"]] = "the intent's refs" if m["evidence_refs"] == refs else m["evidence_refs"]
    return {
        "decisions": [[d["message_id"], d["type"], d["task_id"], d["decision"], d["code"]] for d in out.deliveries],
        **outcome,
        "shared_keys": sorted(sorted(ids) for ids in groups.values() if len(ids) > 1),
        "payloads": payloads,
        "evidence": evidence,
    }


def _b_probes(out: _Played) -> dict:
    if out.error or out.probes is None:
        return {"error": True}
    p = out.probes
    return {
        "keys": [{"kind": r["kind"], "error": bool(r["error"]),
                  "same_in_both_processes": bool(r["process"]) and r["process"][0] == r["process"][1],
                  "message_id_kept": r["message_id_kept"], "time_kept": r["time_kept"],
                  "key_follows": [part for part, _k in r["payload_parts"]],
                  "fields": [[f["field"], f["change"], f["held"], bool(f["error"])] for f in r.get("fields", ())]}
                 for r in p["keys"]],
        "pairs": [[r["symptom"], r["what"], r["shared"], bool(r["error"])] for r in p["pairs"]],
        "resends": [[r["what"], r.get("decision"), r.get("code"), bool(r["error"])] for r in p["resends"]],
        "conflicts": [[r["what"], r.get("decision"), r.get("code"), bool(r["error"])] for r in p["conflicts"]],
    }


def behaviour(sub: Path) -> dict:
    """What the design in folder ``sub`` does, described by what the seed's rules care about (for the
    grader's mutation run, :mod:`sim.course.mutants`; broader than the tests):

    * ``runs``: both shipped stories under no fault and every fault of :data:`_B_FAULTS` (seed 0;
      seed 1 too with no fault): each delivery's decision and code, the final task states, the
      publications, every invariant's verdict, which messages share a key (as groups of message
      ids), each payload (``"the body"`` when it is exactly the intent's body) and each message's
      evidence_refs (``"the intent's refs"`` when exactly those);
    * ``probes``: after a clean run of each story (seeds 0 and 1), for the first intent of each
      kind: whether its key is the same in both processes, under another message id, at another
      time, and which parts of what it says the key follows; whether each made-up neighbour
      (next attempt, other task, other trace, ack of another message, another sender's ack)
      shares its key; how intake records each kind resent and each request and result said
      otherwise.

    It abstracts away the key strings and the digests (only which intents share a key and what
    intake decides count: a key is a name, and any name that partitions intents the same way is as
    good), the digest scheme (both schemes are pinned and intake compares under one), and, in a
    run where a sender tried a step again after a timeout (``intent.retry`` > 0: drop, delay,
    reorder, lost-evidence), everything but how the run ended (task states, publications, every
    invariant). Whether such a retry shares its first try's key is left open by the seeds (a key
    names the logical intent; the course's agents call the retry a new try): under its own key the
    slower try is recorded late, under the first try's duplicate (and acknowledged), which shifts
    the run's later message ids; neither runs it again, and the ending is the same."""
    try:
        runs, probes = {}, {}
        for sc in _B_SCENARIOS:
            for seed in _B_SEEDS:
                out = _play(sub, sc, (), seed, probe=True)
                runs[f"{sc}|none|{seed}"] = _b_run(out)
                probes[f"{sc}|{seed}"] = _b_probes(out)
            for faults in _B_FAULTS[1:]:
                runs[f"{sc}|{'+'.join(faults)}|0"] = _b_run(_play(sub, sc, tuple(faults), 0))
        return {"runs": runs, "probes": probes}
    finally:
        host = _HOSTS.pop((sub / _FILE).resolve(), None)
        if host is not None:
            host.close()
