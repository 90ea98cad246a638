"""Judges of exercise 3, a deduplicating consumer.

The student's ``consume`` (exercise 3's interface on plain data, :mod:`sim.consumer`) runs in its own
host process, adapted to the runtime's intake. Each test of the exercise is one rule of the
seed, judged all or nothing by :func:`check_rule` over two kinds of case:

* **contract cases** (``sim.contracts.intake``, named by their ``id``): one delivery each, the
  verdict the rule requires;
* **fault runs**: the student's ``consume`` plugged into the simulator as the runtime's intake under
  a scenario, faults and a seed, judged by the invariants at stake for the rule (and, for the
  runtime's own rule, by how the story ends compared with the reference intake's run).

Every case that broke the rule is tagged with what it shows (:data:`SYMPTOMS`), so the hint names
the mistake behind all the failures (a consumer that deduplicates by message id passes the very
same message delivered again and fails its resend under a new message id), not the first case
that happened to fail. Runs are played once per submission and shared by the tests that need them
(:data:`_RUNS`, keyed by the file's path and content and the run's arguments).

:func:`behaviour` is what the mutation run compares (:mod:`sim.course.mutants`).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path

from . import A, Broke, Judged, grid_row, per_submission, reference_outcome, rerun_line, rule, try_line

_FILE = "decide.py"

#: Every symptom the judges of exercise 3 report, and what it means.
SYMPTOMS = {
    # the key: duplicates
    "exact-copy-not-duplicate": "the very same message delivered again (same message id, key and payload) was not "
                                "recorded as a duplicate",
    "resend-not-duplicate": "the same key and payload under a new message id (a resend) was not recorded as a duplicate",
    "cross-scheme-not-duplicate": "the same payload digested under another scheme was not recorded as a duplicate",
    "repeat-accepted-as-new": "a repeat of a recorded intent was accepted as new work",
    "repeat-judged-before-key": "a repeat of a recorded intent was judged by another check (terminal state, lease, "
                                "allowlist) before its key was looked up",
    "duplicate-moved": "a duplicate moved the task",
    "wrong-duplicate-of": "a duplicate did not name the recorded intent it repeats",
    # the key: conflicts
    "conflict-applied": "a second payload under a recorded key was accepted as if it were new (last write wins)",
    "conflict-judged-as-new": "a second payload under a recorded key was judged as a new intent (late or refused) "
                              "instead of a conflict",
    "conflict-kept-first": "a second payload under a recorded key was recorded as a duplicate: the first silently kept",
    "conflict-not-frozen": "a conflict did not freeze the task in needs_review",
    "frozen-task-moved": "a conflict on a task already in needs_review moved it",
    "one-scheme-only": "payloads equal under one scheme but not the other were taken for one intent",
    "wrong-conflict-with": "a conflict did not name the first recorded payload it collides with",
    # late results
    "late-moved": "a new key for a finished task moved it (a late result overwrote the outcome)",
    "late-not-recorded": "a new key for a finished task was not recorded as late",
    "late-effect-not-reconciled": "a late result for a task whose side effect committed was not sent to reconciliation",
    "late-reconcile-misflagged": "a late message that touches no committed side effect was sent to reconciliation",
    # acknowledgements
    "ack-moved": "an acknowledgement moved the task",
    "ack-called-late": "an acknowledgement of a finished task was called late",
    "ack-refused": "an acknowledgement was refused or not accepted as a receipt",
    # leases
    "stale-lease-accepted": "a message naming a lease_version other than the current one (or the next, for a start) "
                            "was accepted",
    "lease-above-accepted": "a message naming a lease_version above the current one (or above the next, for a start) "
                            "was accepted: only one side of the lease comparison is checked",
    "wrong-holder-accepted": "a result from a worker that does not hold the lease was accepted",
    "non-assignee-started": "a worker that is not the assignee started the task",
    "budget-ignored": "an attempt was started with no budget left",
    "holder-refused": "a start by the assignee or a result from the current lease holder was refused",
    "wrong-lease-granted": "a start did not take exactly the next lease_version (or something else took a lease)",
    # compare-and-swap
    "stale-version-accepted": "a write naming a state_version other than the task's was accepted",
    "version-zero-ignored": "expected_state_version 0 was treated as if none was given",
    "current-version-refused": "a write naming the task's current state_version was refused",
    # review and evidence
    "non-reviewer-released": "someone other than a reviewer decided a frozen or waiting task",
    "frozen-left-without-review": "a frozen task was left by something other than a review_decision",
    "unretained-evidence-accepted": "a review decision citing evidence that is not retained was accepted",
    "review-without-evidence": "a review decision citing no evidence was accepted",
    "review-refused": "a reviewer's decision citing retained evidence was refused",
    "success-without-evidence": "a succeeded result citing no evidence was accepted",
    "evidence-over-demanded": "a result was refused over evidence no rule requires (a failure, or an artifact not "
                              "stored yet)",
    # the allowlist
    "illegal-move-made": "a move outside the machine's allowlist was made",
    "wrong-role-moved": "a move was made by a role the allowlist does not name for it",
    "unknown-task-accepted": "a message for a task that does not exist was accepted",
    "legal-move-refused": "a move in the allowlist, by a role it names, was refused",
    "fence-accepted": "a fence naming a task was accepted",
    "move-outside-allowlist": "the verdict proposed a move the allowlist does not hold for the role it names",
    "move-from-wrong-state": "the verdict's move does not start from the task's current state (or forgot create)",
    "wrong-executor": "the move names someone other than who made it",
    "wrong-code": "the right decision with the wrong code",
    # schema versions
    "unknown-schema-accepted": "a message in a schema version this runtime does not speak was not refused",
    "newer-minor-accepted": "a message in a minor newer than the runtime reads (same major) was not refused",
    "read-version-refused": "a message in a schema version the runtime reads (1.0, 1.1, a bare major, a patch) was "
                            "refused",
    # anything
    "decide-raised": "consume raised an exception",
    "not-a-verdict": "consume returned an answer the runtime cannot read (a field missing or malformed)",
    "no-reason": "a verdict gave no reason in words",
    "wrong-decision": "the verdict's decision was not the one the rule requires",
    # fault runs
    "run-resend-recorded-new": "in a run, a resend was not recorded as a duplicate (RESEND_DEDUPLICATED)",
    "run-published-twice": "in a run, a side effect committed twice (EFFECT_AT_MOST_ONCE)",
    "run-conflict-not-frozen": "in a run, a second payload under one key did not freeze the task (CONFLICT_FROZEN)",
    "run-state-regressed": "in a run, a finished task moved again (NO_STATE_REGRESSION)",
    "run-stale-result-committed": "in a run, a result from a stale lease committed (NO_LOST_UPDATE)",
    "run-ack-moved": "in a run, an acknowledgement moved a task (ACK_IS_NOT_COMPLETION)",
    "run-illegal-transition": "in a run, a transition outside the allowlist was applied (TRANSITIONS_ALLOWED)",
    "run-evidence-unresolved": "in a run, an accepted message cites evidence nothing stores (EVIDENCE_RESOLVES)",
    "run-effect-without-evidence": "in a run, an effect committed without primary evidence (EFFECT_HAS_EVIDENCE)",
    "run-effect-from-untrusted": "in a run, an effect committed on an untrusted input (NO_EFFECT_FROM_UNTRUSTED)",
    "run-invariant-broke": "in a run, another invariant broke",
    "run-wrong-ending": "a run ended otherwise than under the reference intake (task states or publications)",
    "run-failed": "a run could not finish: consume raised, or returned an answer the runtime cannot apply",
    "search-run-idle": "the search's story, in the order a run delivers it, did not end as with the reference intake "
                       "(stalled or frozen: a search proves nothing of a story that does not do its job)",
}

_RUN_SYMPTOM = {
    "RESEND_DEDUPLICATED": "run-resend-recorded-new",
    "EFFECT_AT_MOST_ONCE": "run-published-twice",
    "CONFLICT_FROZEN": "run-conflict-not-frozen",
    "NO_STATE_REGRESSION": "run-state-regressed",
    "NO_LOST_UPDATE": "run-stale-result-committed",
    "ACK_IS_NOT_COMPLETION": "run-ack-moved",
    "TRANSITIONS_ALLOWED": "run-illegal-transition",
    "EVIDENCE_RESOLVES": "run-evidence-unresolved",
    "EFFECT_HAS_EVIDENCE": "run-effect-without-evidence",
    "NO_EFFECT_FROM_UNTRUSTED": "run-effect-from-untrusted",
}


# ------------------------------------------------------------------------------------------ the student's decide


def _decide(sub: Path):
    """``(decide, host)``: the student's ``consume`` in its host process, adapted to the runtime's
    intake (:func:`sim.consumer.adapt`). A file without ``consume`` (the engine's ``decide`` copied
    in, say), or one that hands the work to the kit's own intake, is refused with one line."""
    from ...consumer import adapt
    from ...errors import InputError
    from ...plugins import CONSUME_NEEDED
    from ..remote import shared

    use = kit_intake_use(sub)
    if use:
        raise InputError(f"{use}: that is the exercise (write consume yourself)", code="E_KIT_INTAKE")
    if _engine_interface_only(sub / _FILE):  # refused before it is imported (a copy of sim/intake.py would
        raise InputError(f"intake file {_FILE} defines decide, the engine's interface, but not the function "  # not
                         f"'consume' (it must define {CONSUME_NEEDED})", code="E_PLUGIN_INCOMPLETE")  # import)
    # One process: the consumer is one process of the runtime's, and what it is handed (the
    # delivery, the task, the recorded intents) is the store's, never a value it computed before, so
    # no rule of this exercise compares its answers across processes. Every call is the same host's.
    host = shared(sub / _FILE, "intake", processes=1)
    if host.names.get("consume") != "function":
        raise InputError(f"intake file {_FILE} lacks the function 'consume' (it must define {CONSUME_NEEDED})",
                         code="E_PLUGIN_INCOMPLETE")

    def consume(*args):
        return host.call("consume", *args, process=A)

    return adapt(consume), host


def _engine_interface_only(path: Path) -> bool:
    """The file defines ``decide`` at its top level and binds no ``consume`` there (read, not run)."""
    import ast

    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError, RecursionError, OSError):
        return False
    bound: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {a.asname or a.name.split(".")[0] for a in node.names}
        else:
            bound |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return "decide" in bound and "consume" not in bound and not any(
        isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in tree.body)


def _kit_object(name: str):
    """The kit's module ``name`` (``sim`` or ``sim.…``), or None."""
    import importlib
    import sys

    if name != "sim" and not name.startswith("sim."):
        return None
    try:
        return sys.modules.get(name) or importlib.import_module(name)
    except Exception:  # noqa: BLE001 - no such module of the kit's
        return None


def kit_intake_use(sub: Path) -> str:
    """Where the submission's Python files use the kit's own intake (``sim.intake.decide`` or a
    private helper of ``sim.intake``, imported or reached through any module of the kit), read from
    their syntax trees (nothing of the student's runs): ``"decide.py line 3 uses the kit's own
    intake (sim.intake.decide)"``, or ``""``."""
    import ast

    from ... import intake as kit

    def is_kit_intake(obj) -> str:
        if obj is kit.decide:
            return "decide"
        if callable(obj) and getattr(obj, "__module__", "") == kit.__name__ and str(getattr(obj, "__name__", "")
                                                                                     ).startswith("_"):
            return obj.__name__
        return ""

    for path in sorted(Path(sub).glob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError, RecursionError, OSError):
            continue  # importing it reports the problem, with its line
        names: dict[str, object] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    mod = _kit_object(a.name)
                    if mod is not None:
                        names[a.asname or a.name.split(".")[0]] = mod if a.asname else _kit_object(a.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                mod = _kit_object(node.module)
                if mod is None:
                    continue
                for a in node.names:
                    obj = getattr(mod, a.name, None) if a.name != "*" else getattr(mod, "decide", None)
                    if obj is None:
                        obj = _kit_object(f"{node.module}.{a.name}")
                    hit = is_kit_intake(obj)
                    if hit:
                        return f"{path.name} line {node.lineno} uses the kit's own intake (sim.intake.{hit})"
                    names[a.asname or a.name] = obj

        def value(node, names=names):
            if isinstance(node, ast.Name):
                return names.get(node.id)
            if isinstance(node, ast.Attribute):
                base = value(node.value)
                return None if base is None else getattr(base, node.attr, None)
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
                fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                arg = node.args[0].value
                if fn in ("import_module", "__import__") and isinstance(arg, str):
                    mod = _kit_object(arg)
                    return _kit_object("sim") if fn == "__import__" and mod is not None else mod
                if fn == "getattr" and len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                    base = value(node.args[0])
                    return None if base is None else getattr(base, str(node.args[1].value), None)
            return None

        for node in ast.walk(tree):
            if isinstance(node, (ast.Attribute, ast.Call)):
                hit = is_kit_intake(value(node))
                if hit:
                    return f"{path.name} line {node.lineno} uses the kit's own intake (sim.intake.{hit})"
    return ""


def _content(sub: Path) -> str:
    """A digest of the submission's Python files (decide.py and anything it could import beside it)."""
    h = hashlib.sha256()
    try:
        for p in sorted(Path(sub).glob("*.py")):
            h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    except OSError:
        return ""
    return h.hexdigest()


def _unusable(v, task) -> str:
    """Why the runtime cannot apply ``v`` ("" when it can): checked before a run hands it on, so a
    wrong shape ends that run with a reason instead of failing deep in the runtime."""
    from ...intake import Decision, IntentRecord, Move, Verdict
    from ...machine import TaskState

    if not isinstance(v, Verdict):
        return f"decide returned {type(v).__name__}, not a Verdict"
    if not isinstance(v.decision, Decision):
        return f"verdict.decision is {v.decision!r}, not a Decision"
    if not isinstance(v.reason, str):
        return f"verdict.reason is a {type(v.reason).__name__}, not words"
    if v.code is not None and not isinstance(v.code, str):
        return f"verdict.code is {v.code!r}"
    m = v.move
    if m is not None and not (isinstance(m, Move) and isinstance(m.from_state, TaskState)
                              and isinstance(m.to_state, TaskState) and isinstance(m.executor, str)
                              and isinstance(m.role, str) and isinstance(m.reason, str)):
        return f"verdict.move is {m!r}, not a Move between two TaskStates"
    for name in ("create", "record_intent", "needs_reconciliation"):
        if not isinstance(getattr(v, name), bool):
            return f"verdict.{name} is {getattr(v, name)!r}, not True or False"
    g = v.grant_lease
    if g is not None and (isinstance(g, bool) or not isinstance(g, int) or not 0 < g < 2 ** 62):
        return f"verdict.grant_lease is {g!r}, not a lease_version"
    if v.decision == Decision.DUPLICATE and not isinstance(v.duplicate_of, IntentRecord):
        return "a duplicate names no recorded intent (duplicate_of)"
    if v.decision == Decision.CONFLICT and not isinstance(v.conflict_with, IntentRecord):
        return "a conflict names no recorded intent (conflict_with)"
    if not isinstance(v.held, (tuple, list)) or v.held:
        return "verdict.held is the runtime's to set"
    if v.create and task is not None:
        return "create=True for a task that exists"
    if v.decision in (Decision.ACCEPTED, Decision.CONFLICT, Decision.LATE) and task is None and not v.create \
            and m is not None:
        return "a move for a task that does not exist"
    return ""


#: Verdicts already given, per submission file: decide is a pure function of its inputs (sim.intake),
#: and the runs of one story share most of their deliveries, so each input is asked once.
_ANSWERS: OrderedDict = per_submission(OrderedDict())
_ANSWERS_KEPT = 20_000


def _guarded(fn, owner: tuple):
    """``fn`` for the runtime: an unusable verdict is refused with a reason (E_BAD_VERDICT); an input
    already answered for this submission (``owner``: its path and content) is not asked again."""
    from ...errors import ProtolabError

    def decide(env, task, prior, rules, unresolved=frozenset()):
        key = (owner, rules.version, repr((env, task, tuple(prior), sorted(unresolved))))
        if key in _ANSWERS:
            v = _ANSWERS[key]
        else:
            v = fn(env, task, prior, rules, unresolved)
            _ANSWERS[key] = v
            while len(_ANSWERS) > _ANSWERS_KEPT:
                _ANSWERS.popitem(last=False)
        why = _unusable(v, task)
        if why:
            raise ProtolabError(f"your answer to {env.message_id} ({env.type}) cannot be applied: {why}",
                                code="E_BAD_VERDICT")
        return v

    return decide


# ------------------------------------------------------------------------------------------ contract cases


def _cases(ids, families=()) -> list:
    """The contract cases named by ``ids``, then every generated boundary case of each of ``families``
    (:func:`sim.contracts.intake.boundary_cases`: a test lists the rule whose boundaries it owns, and a
    boundary added to the rule is judged without naming it)."""
    from ...contracts.intake import CASES

    by_id = {c.id: c for c in CASES}
    unknown = [i for i in ids if i not in by_id]
    if unknown:  # the exercise's own configuration is wrong: the grader's fault, never the student's
        raise LookupError(f"no intake contract case with id {unknown[0]!r}")
    known = {c.family for c in CASES if c.family}
    bad = [f for f in families if f not in known]
    if bad:
        raise LookupError(f"no family of boundary cases named {bad[0]!r} (known: {', '.join(sorted(known))})")
    out = [by_id[i] for i in ids]
    seen = set(ids)
    out += [c for c in CASES if c.family and c.family in families and c.id not in seen]
    return out


def _is_repeat(case):
    """(matching prior intent, same message id?, same scheme?) when the case repeats a recorded intent."""
    for p in case.prior:
        env = case.envelope
        if p.payload_digest == env.payload_digest and p.digest_scheme == env.digest_scheme:
            return p, p.message_id == env.message_id, True
    if case.prior and case.decision.value == "duplicate":
        p = case.prior[-1]
        return p, p.message_id == case.envelope.message_id, p.digest_scheme == case.envelope.digest_scheme
    return None, False, True


def case_symptoms(case, v, fails: list[tuple[str, str]]) -> list[str]:
    """What a failing contract case shows: the mistake's tags, from the case and what decide said."""
    from ...intake import Decision, Move
    from ...machine import TERMINAL, TaskState

    kinds = [k for k, _m in fails]
    if "raised" in kinds:
        return ["decide-raised"]
    if {"not-a-verdict", "uninspectable", "move-type"} & set(kinds) or not isinstance(getattr(v, "decision", None),
                                                                                     Decision):
        return ["not-a-verdict"]
    got, want = v.decision, case.decision
    move = v.move if isinstance(v.move, Move) else None
    terminal = case.task is not None and case.task.state in TERMINAL
    out: list[str] = []
    if got != want:
        if want == Decision.DUPLICATE:
            _p, exact, same_scheme = _is_repeat(case)
            if got == Decision.CONFLICT and not same_scheme:
                out.append("cross-scheme-not-duplicate")
            else:
                out.append("exact-copy-not-duplicate" if exact else
                           "resend-not-duplicate" if same_scheme else "cross-scheme-not-duplicate")
                out.append("repeat-accepted-as-new" if got == Decision.ACCEPTED else "repeat-judged-before-key")
        elif want == Decision.CONFLICT:
            if got == Decision.ACCEPTED:
                out.append("conflict-applied")
            elif got == Decision.DUPLICATE:
                schemes = {p.digest_scheme for p in case.prior} | {case.envelope.digest_scheme}
                out.append("one-scheme-only" if len(schemes) > 1 else "conflict-kept-first")
            else:
                out.append("conflict-judged-as-new")
        elif want == Decision.LATE:
            out.append("late-moved" if move is not None else "late-not-recorded")
        elif case.envelope.type == "ack" and want == Decision.ACCEPTED:
            out.append("ack-moved" if move is not None else "ack-called-late" if got == Decision.LATE and terminal
                       else "ack-refused")
        else:
            out.append(case.symptom or "wrong-decision")
    else:
        if "code" in kinds:
            out.append(case.symptom if case.symptom in ("unknown-schema-accepted",) else "wrong-code")
        if "no-move-expected" in kinds:
            out.append({Decision.DUPLICATE: "duplicate-moved", Decision.LATE: "late-moved",
                        Decision.CONFLICT: "frozen-task-moved"}.get(want, "ack-moved" if case.envelope.type == "ack"
                                                                     else case.symptom or "wrong-decision"))
        if "move-expected" in kinds or "move-target" in kinds:
            out.append("conflict-not-frozen" if want == Decision.CONFLICT and case.to_state == TaskState.NEEDS_REVIEW
                       else case.symptom or "wrong-decision")
        if "reconcile" in kinds:
            out.append("late-effect-not-reconciled" if case.reconcile else "late-reconcile-misflagged")
        if "duplicate-of" in kinds:
            out.append("wrong-duplicate-of")
        if "conflict-with" in kinds:
            out.append("wrong-conflict-with")
    if "reason" in kinds:
        out.append("no-reason")
    if "move-start" in kinds or "create" in kinds:
        out.append("move-from-wrong-state")
    if "allowlist" in kinds:
        out.append("move-outside-allowlist")
    if "executor" in kinds:
        out.append("wrong-executor")
    if "lease" in kinds or "lease-not-start" in kinds:
        out.append("wrong-lease-granted")
    return list(dict.fromkeys(out)) or [case.symptom or "wrong-decision"]


def _case_reproduce(case) -> str:
    return try_line(3, "from sim.contracts.intake import CASES, run, report; from sim.plugins import load_intake; "
                       f"r = run(load_intake('decide.py'), [c for c in CASES if c.id == '{case.id}']); print(report(r)); "
                       "raise SystemExit(1 if any(f for _c, f in r) else 0)")


#: The fields of an answer, as :func:`_abstract` spells them, and the symptom a wrong one shows.
_FIELD_SYMPTOMS = (("decision", "wrong-decision"), ("code", "wrong-code"), ("move", "move-from-wrong-state"),
                   ("create", "move-from-wrong-state"), ("lease", "wrong-lease-granted"),
                   ("duplicate_of", "wrong-duplicate-of"), ("conflict_with", "wrong-conflict-with"),
                   ("reconcile", "late-reconcile-misflagged"), ("reason", "no-reason"))


def _fields(v, prior) -> dict:
    """An answer field by field, as the rules read it (the parts of :func:`_abstract`)."""
    from ...intake import Decision, Verdict

    if not isinstance(v, Verdict) or not isinstance(v.decision, Decision):
        return {"decision": repr(v)}
    d = v.decision
    m = v.move
    return {
        "decision": d.value,
        "code": v.code if d == Decision.REJECTED else None,
        "move": None if m is None else (getattr(m.from_state, "value", m.from_state), getattr(m.to_state, "value", m.to_state),
                                        m.executor, m.role),
        "create": bool(v.create),
        "lease": v.grant_lease if d == Decision.ACCEPTED else None,
        "duplicate_of": next((i for i, p in enumerate(prior) if p == v.duplicate_of), None) if d == Decision.DUPLICATE else None,
        "conflict_with": next((i for i, p in enumerate(prior) if p == v.conflict_with), None) if d == Decision.CONFLICT else None,
        "reconcile": bool(v.needs_reconciliation) if d == Decision.LATE else None,
        "reason": isinstance(v.reason, str) and bool(v.reason.strip()),
    }


def _show_field(name: str, value, prior) -> str:
    if name in ("duplicate_of", "conflict_with") and isinstance(value, int):
        return prior[value].message_id
    if name == "move" and value is not None:
        return f"{value[0]} -> {value[1]}"
    text = repr(value)  # (repr escapes control and bidi characters; a student's code string is capped)
    return text if len(text) <= 60 else text[:59] + "…"


def field_differences(v, case) -> list[tuple[str, str]]:
    """Every field of ``v`` (the student's verdict on ``case``) that is not exactly the reference
    intake's answer to the same delivery: ``[(field, what the student said)]``. What the student said,
    never what the reference says: the message names what broke, not the answer."""
    from ...intake import decide as reference
    from ...machine import default_rulebook

    want = _fields(reference(case.envelope, case.task, case.prior, default_rulebook(), case.unresolved), case.prior)
    got = _fields(v, case.prior)
    return [(name, _show_field(name, got.get(name), case.prior)) for name, _sym in _FIELD_SYMPTOMS
            if got.get(name) != want.get(name)]


def _judge_cases(fn, cases) -> list[Broke]:
    from ...contracts.intake import check_tagged

    out = []
    for case in cases:
        v, fails = check_tagged(fn, case)
        if not fails:
            # Every field of the answer, not only those the case names: exactly the reference's.
            wrong = field_differences(v, case)
            if not wrong:
                continue
            syms = dict(_FIELD_SYMPTOMS)
            what = "; ".join(f"the answer's {name} ({said}) is not what the rule gives for this delivery"
                             for name, said in wrong[:2]) + (f" (+{len(wrong) - 2} more)" if len(wrong) > 2 else "")
            symptoms = [case.symptom if name == "decision" and case.symptom else syms[name] for name, _s in wrong]
            if "reconcile" in [name for name, _s in wrong] and case.task is not None and case.task.has_effects:
                symptoms = ["late-effect-not-reconciled" if x == "late-reconcile-misflagged" else x for x in symptoms]
            out.append(Broke(
                case=f"contract case «{case.name}»", what=what, symptoms=tuple(dict.fromkeys(symptoms)),
                reproduce=_case_reproduce(case),
                witness={"case": case.id, "rule": case.rule, "fields": [name for name, _s in wrong]},
                signature={"case": case.name, "rule": case.rule},
            ))
            continue
        what = "; ".join(m for _k, m in fails[:2]) + (f" (+{len(fails) - 2} more)" if len(fails) > 2 else "")
        out.append(Broke(
            case=f"contract case «{case.name}»", what=what, symptoms=tuple(case_symptoms(case, v, fails)),
            reproduce=_case_reproduce(case),
            witness={"case": case.id, "rule": case.rule, "failures": [m for _k, m in fails]},
            signature={"case": case.name, "rule": case.rule},
        ))
    return out


# ------------------------------------------------------------------------------------------ fault runs

#: Runs already played, per submission file and run: (path, content, scenario, faults, seed) -> outcome.
_RUNS: OrderedDict = per_submission(OrderedDict())
_RUNS_KEPT = 256


def _run_spec(r) -> tuple[str, tuple[str, ...], int]:
    if not isinstance(r, dict) or not isinstance(r.get("faults", []), list):
        raise LookupError(f"a run must be {{scenario, faults, seed}}, got {r!r}")
    return str(r.get("scenario", "publish-report")), tuple(str(f) for f in r.get("faults", [])), int(r.get("seed", 0))


def _play(sub: Path, fn, scenario: str, faults: tuple[str, ...], seed: int) -> dict:
    """The student's decide as the runtime's intake on one run: each invariant's verdict (with its
    first witness), the task states and publications at the end, or why the run could not finish."""
    from ...errors import ProtolabError
    from ...invariants import check
    from ...policy import SAFE
    from ...runner import run_scenario
    from ...scenario import load_scenario

    owner = (str(sub.resolve()), _content(sub))
    key = (*owner, scenario, faults, seed)
    if key in _RUNS:
        _RUNS.move_to_end(key)
        return _RUNS[key]
    policy = replace(SAFE, name="safe", decide=_guarded(fn, owner))
    out: dict = {"error": None, "invariants": {}, "states": {}, "publications": 0}
    try:
        store = run_scenario(load_scenario(scenario), policy=policy, faults=list(faults), seed=seed,
                             strict_faults=False)
    except ProtolabError as e:
        out["error"] = f"{e.code}: {e.message}" if getattr(e, "code", None) else str(e)
    except Exception as e:  # noqa: BLE001 - a verdict the runtime choked on, unless the reference does too
        reference_outcome(scenario, list(faults), seed)  # raises (a grader error) if the engine itself fails here
        out["error"] = f"the runtime could not apply your verdicts ({type(e).__name__}: {' '.join(str(e).split())[:160]})"
    else:
        try:
            for r in check(store):
                out["invariants"][r.name] = None if r.ok else dict(r.witnesses[0]) if r.witnesses else {}
            out["states"] = {t["task_id"]: t["state"] for t in store.tasks()}
            out["publications"] = sum(e["kind"] == "publish" for e in store.effects())
        except Exception as e:  # noqa: BLE001 - a state the verdicts made that nothing can read, unless the
            reference_outcome(scenario, list(faults), seed)  # reference run fails too (then: the grader's)
            out.update(invariants={}, error=f"the run your verdicts made cannot be read ({type(e).__name__}: "
                                            f"{' '.join(str(e).split())[:160]})")
        finally:
            store.close()
    _RUNS[key] = out
    while len(_RUNS) > _RUNS_KEPT:
        _RUNS.popitem(last=False)
    return out


def _label(scenario: str, faults, seed: int) -> str:
    return f"{scenario} with {' + '.join(faults) or 'no fault'}" + (f" (seed {seed})" if seed else "")


def _reproduce(scenario: str, faults, seed: int) -> str:
    scn = "" if scenario == "publish-report" else f"{scenario} "
    return (f"protolab run {scn}--intake {{dir}}/decide.py" + (f" --seed {seed}" if seed else "")
            + "".join(f" --fault {f}" for f in faults) + " --db ex3.db && protolab check --db ex3.db")


def _brief(w: dict) -> str:
    return ", ".join(f"{k}={w[k]}" for k in ("problem", "task_id", "message_id", "old_state", "new_state",
                                             "times_committed") if isinstance(w, dict) and w.get(k) is not None)


def _judge_runs(sub: Path, fn, runs, invariants, ending: bool) -> tuple[list[Broke], list[dict]]:
    out, rows = [], []
    for r in runs:
        scenario, faults, seed = _run_spec(r)
        o = _play(sub, fn, scenario, faults, seed)
        label = _label(scenario, faults, seed)
        sig = {"scenario": scenario, "faults": list(faults)}
        repro = _reproduce(scenario, faults, seed)
        broke: Broke | None = None
        if o["error"]:
            broke = Broke(case=label, what=f"the run could not finish: {o['error']}", symptoms=("run-failed",),
                          reproduce=repro, witness={"error": o["error"]}, signature={**sig, "problem": "run-failed"})
        else:
            at_stake = [n for n in o["invariants"] if invariants is None or n in invariants]
            broken = [n for n in at_stake if o["invariants"][n] is not None]
            if broken:
                w = o["invariants"][broken[0]]
                more = f" (and {', '.join(broken[1:])})" if len(broken) > 1 else ""
                broke = Broke(case=label, what=f"{broken[0]} broke: {_brief(w)}{more}",
                              symptoms=tuple(_RUN_SYMPTOM.get(n, "run-invariant-broke") for n in broken),
                              reproduce=repro, witness={"invariant": broken[0], "witness": w},
                              signature={**sig, "invariant": broken[0]})
            elif ending:
                want, pubs = reference_outcome(scenario, list(faults), seed)
                if o["states"] != want or o["publications"] != pubs:
                    diff = ", ".join(f"{t} {o['states'].get(t, 'never created')} (expected {s})"
                                     for t, s in sorted(want.items()) if o["states"].get(t) != s)
                    if o["publications"] != pubs:
                        diff = (diff + ", " if diff else "") + f"{o['publications']} publication(s) (expected {pubs})"
                    broke = Broke(case=label, what=f"the story did not end as it should: {diff}",
                                  symptoms=("run-wrong-ending",), reproduce=repro,
                                  witness={"states": o["states"], "expected": want},
                                  signature={**sig, "problem": "wrong-ending"})
        if broke is not None:
            out.append(broke)
        results = [_Held(n, o["invariants"][n] is None) for n in o["invariants"]]
        rows.append(grid_row(scenario, faults, results, broke is None, label=label))
    return out, rows


class _Held:
    """An invariant's verdict as :func:`grid_row` reads it."""

    def __init__(self, name: str, ok: bool):
        self.name, self.ok = name, ok


# ------------------------------------------------------------------------------------------ the judge


def check_rule(sub: Path, args: dict) -> Judged:
    """One rule of the seed, all or nothing: ``args["cases"]`` (contract case ids) must each get the
    verdict the rule requires, and in each of ``args["runs"]`` (``{scenario, faults, seed}``) the
    invariants ``args["invariants"]`` (all, when not given) must hold; with ``args["ending"]``, each
    run must also end as it does under the reference intake."""
    cases = _cases(args.get("cases", []), args.get("families", []))
    runs = list(args.get("runs", []))
    for r in runs:
        _run_spec(r)
    invariants = args.get("invariants")
    invariants = None if invariants is None else set(invariants)
    fn, host = _decide(sub)
    try:
        broke = _judge_cases(fn, cases)
        run_broke, rows = _judge_runs(sub, fn, runs, invariants, bool(args.get("ending", False)))
    finally:
        host.close()
    checked = len(cases) + len(runs)
    held = args.get("held") or "the rule held in every contract case and fault run"
    return rule(checked, broke + run_broke, held, grid=rows or None)


def search(sub: Path, args: dict) -> Judged:
    """Every delivery order of a small run (``args["searches"]``: scenario, faults, depth) with the
    student's consume as the runtime's intake: no invariant breaks in any of them; a break is shown as
    its shortest path with the scenario file that replays it (:mod:`sim.course.judges.search`)."""
    from ...policy import get_policy
    from .search import Plugged, search as explore_all

    fn, host = _decide(sub)
    owner = (str(sub.resolve()), _content(sub))
    try:
        checked, broke, rows = explore_all(
            owner, args.get("searches", []),
            lambda policy: Plugged(None, replace(get_policy(policy), decide=_guarded(fn, owner)),
                                   {"intake": f"{_FILE} (remote)"}),
            reproduce="protolab run {dir}/counterexample.toml --intake {dir}/decide.py --db counterexample.db && protolab check --db counterexample.db",
            symptom=lambda inv, _faults: _RUN_SYMPTOM.get(inv, "run-invariant-broke"), failed_symptom="run-failed",
            reference=lambda policy: Plugged(None, get_policy(policy), {}),
            idle_reproduce=lambda one: rerun_line(3, "intake.search", {"searches": [one]}))
    finally:
        host.close()
    return rule(checked, broke, "no order of the deliveries breaks an invariant", grid=rows)


# ------------------------------------------------------------------------------------------ behaviour


def _load_local(path: Path):
    """The submission's decide, imported in this process (for the mutation run only: its mutants are
    the kit's own model answer, changed)."""
    import importlib.util
    import sys

    name = f"_protolab_ex3_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}_{_content(path.parent)[:12]}"
    from ...consumer import adapt
    from ...plugins import no_bytecode

    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        with no_bytecode():
            spec.loader.exec_module(mod)
    finally:
        sys.modules.pop(name, None)
    return adapt(mod.consume)


def _abstract(v, prior) -> str:
    """A verdict as the rules see it: decision, the code of a refusal, the move (states, who, as what
    role), creation, the lease an acceptance grants, which recorded intent a duplicate or conflict
    names (by position), reconciliation of a late result, and whether a reason was given. Not the
    reason's words, record_intent (the runtime never reads it), nor fields the runtime ignores for
    that decision (a code or lease on anything but a refusal or an acceptance)."""
    from ...intake import Decision, Move, Verdict

    if not isinstance(v, Verdict):
        return f"returned {type(v).__name__}"
    d = v.decision
    parts = [d.value if isinstance(d, Decision) else f"decision={d!r}"]
    if d == Decision.REJECTED:
        parts.append(str(v.code))
    m = v.move
    if m is not None:
        if isinstance(m, Move):
            f, t = (getattr(s, "value", repr(s)) for s in (m.from_state, m.to_state))
            parts.append(f"{f}->{t} by {m.executor}/{m.role}")
        else:
            parts.append(f"move={type(m).__name__}")
    if v.create:
        parts.append("create")
    if d == Decision.ACCEPTED and v.grant_lease is not None:
        parts.append(f"lease {v.grant_lease}")
    if d == Decision.DUPLICATE:
        parts.append(f"of #{next((i for i, p in enumerate(prior) if p == v.duplicate_of), None)}")
    if d == Decision.CONFLICT:
        parts.append(f"with #{next((i for i, p in enumerate(prior) if p == v.conflict_with), None)}")
    if d == Decision.LATE and v.needs_reconciliation:
        parts.append("reconcile")
    if not isinstance(v.reason, str) or not v.reason.strip():
        parts.append("no reason")
    return " ".join(parts)


_PROBES: dict = {}


def _recorded_inputs() -> list:
    """Every input the reference intake is handed over a broad matrix of runs (scenarios, faults,
    seeds), deduplicated: an answer that agrees with the reference on all of them plays each of those
    runs exactly as the reference does (the runtime is deterministic and decide is its only choice)."""
    from ...intake import decide as reference
    from ...policy import SAFE
    from ...runner import run_scenario
    from ...scenario import load_scenario

    seen: dict[str, tuple] = {}

    def recording(env, task, prior, rules, unresolved=frozenset()):
        args = (env, task, tuple(prior), rules, frozenset(unresolved))
        seen.setdefault(repr((env, task, tuple(prior), sorted(unresolved))), args)
        return reference(env, task, prior, rules, unresolved)

    policy = replace(SAFE, decide=recording)
    singles = [[], ["duplicate"], ["resend"], ["conflicting-digest"], ["late-failure"], ["crash"], ["transient"],
               ["reorder"], ["drop"], ["delay"], ["stale-schema"], ["late-conflict"], ["lost-evidence"], ["silent"],
               ["resend:task_request"], ["resend:task_started"], ["duplicate:task_started"], ["crash", "resend"],
               ["transient", "resend"], ["conflicting-digest", "late-failure"]]
    for scenario in ("publish-report", "fan-out", "sensitive-source"):
        for faults in singles:
            for seed in (0, 1):
                store = run_scenario(load_scenario(scenario), policy=policy, faults=faults, seed=seed, strict_faults=False)
                store.close()
    return list(seen.values())


def _generated_inputs() -> list:
    """A matrix around the contract: every kind of message from every role, on a task in every state
    a run can hand to decide (and with one field of the task changed at a time, as a run can change it),
    then with one thing about the delivery changed at a time (an expected_state_version, an unknown
    schema, the other digest scheme, unresolved evidence, a recorded intent under its key: the very
    same message, a resend, the same payload under the other scheme, another payload, two of them)."""
    from dataclasses import replace as _r

    from ...contracts.intake import _env, _intent, _view
    from ...machine import TaskState

    envs: list[tuple[str, str, dict, dict]] = []  # (label, type, payload, fields)
    for s in ("manager", "writer", "reviewer", "researcher"):
        envs.append((f"request/{s}", "task_request", {"goal": "collect evidence"}, {"sender": s, "recipient": "researcher"}))
    for s in ("researcher", "writer"):
        for lv in (None, 1, 2, 3):
            envs.append((f"started/{s}/{lv}", "task_started", {} if lv is None else {"lease_version": lv}, {"sender": s}))
    for status in ("succeeded", "failed", "denied", "waiting_human", "retry"):
        for s in ("researcher", "writer"):
            for lv in (1, 2):
                for ev in ((), ("sha256:" + "ab" * 32,)):
                    envs.append((f"result/{status}/{s}/{lv}/{len(ev)}", "task_result",
                                 {"status": status, "lease_version": lv}, {"sender": s, "evidence": ev}))
    for s in ("manager", "reviewer", "researcher"):
        envs.append((f"cancel/{s}", "cancel", {"reason": "stop"}, {"sender": s, "recipient": "researcher"}))
    for d in ("ready", "canceled"):
        for s in ("reviewer", "manager", "writer"):
            for ev in ((), ("M-102",)):
                envs.append((f"review/{d}/{s}/{len(ev)}", "review_decision", {"decision": d},
                             {"sender": s, "evidence": ev}))
    for s in ("manager", "researcher"):
        envs.append((f"ack/{s}", "ack", {"of": "M-102"}, {"sender": s, "recipient": "researcher" if s == "manager"
                                                          else "manager"}))
    envs.append(("fence", "fence", {"to": ["researcher"], "terminal": "COMPLETED"}, {"sender": "manager",
                                                                                   "recipient": "researcher"}))

    def build(i, label, type_, payload, fields, *, mid=None, scheme="json-sorted-v1"):
        f = dict(fields)
        return _env(type_, payload, sender=f.pop("sender"), key=f"k-{i}", mid=mid or f"M-{i}", scheme=scheme,
                    recipient=f.pop("recipient", "manager"), evidence=f.pop("evidence", ()))

    versions = {"ready": 1, "running": 2, "succeeded": 3, "failed": 3, "denied": 3, "canceled": 3,
                "waiting_human": 3, "retry_wait": 3, "needs_review": 4}
    bases = {}
    for st in TaskState:
        if st.value == "pending":  # a task_request creates a task and readies it in one delivery: decide never
            continue  # sees a pending task
        started = st.value != "ready"
        bases[st.value] = _view(st.value, versions[st.value], holder="researcher" if started else None,
                                lease=1 if started else 0, budget=4, trusted=st.value != "needs_review",
                                has_effects=st.value == "succeeded")
    variants = {"holder-none": dict(lease_holder=None), "holder-writer": dict(lease_holder="writer"),
                "lease-2": dict(lease_version=2), "lease-0": dict(lease_holder=None, lease_version=0),
                "budget-0": dict(budget_left=0), "assignee-writer": dict(assignee="writer"), "effects-flip": None,
                "reassigned": dict(assignee="writer", lease_holder="researcher", lease_version=1)}
    # Which changes a run can produce in each state: a state reached from running keeps a lease (and its
    # holder, unless the lease expired: retry_wait), a ready task may carry the lease of an earlier attempt,
    # only a succeeded task has committed effects (the flip gives the others some, and takes a success's
    # away). A task always has an assignee and a version past 0 (a created task has moved once).
    reachable = {"holder-none": {"ready", "retry_wait", "canceled", "needs_review"},
                 "lease-0": {"ready", "canceled", "needs_review"},
                 "reassigned": {"ready", "canceled", "needs_review"}}
    out: list[tuple[str, tuple]] = []
    for i, (label, type_, payload, fields) in enumerate(envs):
        env = build(i, label, type_, payload, fields)
        out.append((f"{label} on no task", (env, None, (), frozenset())))
        for sname, task in bases.items():
            out.append((f"{label} on {sname}", (env, task, (), frozenset())))
            for vname, change in variants.items():
                if sname not in reachable.get(vname, {sname}):
                    continue
                t = _r(task, has_effects=not task.has_effects) if change is None else _r(task, **change)
                out.append((f"{label} on {sname}/{vname}", (env, t, (), frozenset())))
            v = task.state_version
            for esv in dict.fromkeys(x for x in (v, v - 1, 0, v + 1) if x >= 0):
                e2 = build(i, label, type_, {**payload, "expected_state_version": esv}, fields)
                out.append((f"{label} esv={esv} on {sname}", (e2, task, (), frozenset())))
            out.append((f"{label} schema 9 on {sname}", (_r(env, schema_version="9"), task, (), frozenset())))
            jcs = build(i, label, type_, payload, fields, scheme="jcs-v2")
            out.append((f"{label} jcs on {sname}", (jcs, task, (), frozenset())))
            refs = frozenset(env.evidence_refs) or frozenset({"M-404"})
            out.append((f"{label} unresolved on {sname}", (env, task, (), refs)))
            same = _intent(env, 1)
            resend = build(i, label, type_, payload, fields, mid=f"M-{i}r")
            other = _intent(build(i, label, type_, {**payload, "note": "other"}, fields, mid=f"M-{i}o"), 1)
            cross = _intent(jcs, 1)
            later = _r(_intent(env, 2), message_id=f"M-{i}b")
            for pname, e3, prior in (("exact copy", env, (same,)), ("resend", resend, (same,)),
                                     ("cross-scheme resend", resend, (cross,)), ("other payload", env, (other,)),
                                     ("other then same", resend, (other, later)), ("same then other", resend,
                                                                                   (same, _r(other, arrival=2))),
                                     ("schema 9 copy", _r(env, schema_version="9"), (same,))):
                out.append((f"{label} {pname} on {sname}", (e3, task, prior, frozenset())))
    return out


def _probes() -> dict:
    if not _PROBES:
        from ...contracts.intake import CASES
        from ...machine import default_rulebook

        rules = default_rulebook()
        _PROBES["cases"] = [(c.id, (c.envelope, c.task, c.prior, c.unresolved)) for c in CASES]
        _PROBES["runs"] = [(f"{a[0].type} {a[0].message_id} on {a[1].state.value if a[1] else 'no task'}",
                            (a[0], a[1], a[2], a[4])) for a in _recorded_inputs()]
        _PROBES["matrix"] = _generated_inputs()
        _PROBES["rules"] = rules
    return _PROBES


def behaviour(sub: Path) -> dict:
    """What the ``decide`` in ``sub`` does, as the rules see it (see :func:`_abstract`), on: every
    contract case; every input the reference intake is handed over a matrix of runs (three scenarios,
    twenty fault lists, two seeds; an answer that agrees on all of them plays those runs as the
    reference does, so no run needs playing here); and a generated matrix of about 13,000 deliveries
    around the contract. What it abstracts away, and why no rule can see it: the words of a reason
    (only that there is one), ``record_intent`` (the runtime never reads it), a code on anything but a
    refusal, a granted lease on anything but an acceptance, and reconciliation on anything but a late
    result (the runtime reads each of them only there). Deterministic: the inputs are built, and the
    runs played, the same way every time."""
    p = _probes()
    one = _asker(sub, p["rules"])
    return {
        "cases": {cid: one(a) for cid, a in p["cases"]},
        "runs": [one(a) for _label, a in p["runs"]],
        "matrix": [one(a) for _label, a in p["matrix"]],
    }


def _asker(sub: Path, rules):
    decide = _load_local(Path(sub) / _FILE)

    def one(args) -> str:
        env, task, prior, unresolved = args
        try:
            v = decide(env, task, prior, rules, unresolved)
        except Exception as e:  # noqa: BLE001 - a mutant that raises behaves differently
            return f"raised {type(e).__name__}"
        try:
            return _abstract(v, prior)
        except Exception as e:  # noqa: BLE001
            return f"unreadable {type(e).__name__}"

    return one


def behaviour_part(sub: Path) -> tuple[str, dict]:
    """One part of :func:`behaviour`, the cheapest (the contract cases, about 200 answers of some 18,000):
    a mutant that differs there behaves differently, and the mutation run need not work out the rest."""
    p = _probes()
    one = _asker(sub, p["rules"])
    return "cases", {cid: one(a) for cid, a in p["cases"]}


def certain_failures(sub: Path, tests) -> list[str]:
    """For the mutation run (:mod:`sim.course.mutants`): the tests among ``tests`` that the ``consume``
    in ``sub`` fails for certain on their contract cases alone, judged in this process as
    :func:`check_rule` judges them (the case's checks and every field against the reference). A rule is all
    or nothing, so one broken case loses the test whatever its runs show; a mutant that breaks no case is
    graded in full. Only for the kit's own model answer mutated: the student's code never runs here."""
    decide = _load_local(Path(sub) / _FILE)
    out = []
    for t in tests:
        if t.judge != "intake.check_rule":
            continue
        if _judge_cases(decide, _cases(t.args.get("cases", []), t.args.get("families", []))):
            out.append(t.name)
    return out


def probe_label(part: str, index: int) -> str:
    """Which input ``behaviour(...)[part][index]`` is (a mutation run names only the position)."""
    return _probes()[part][index][0]
