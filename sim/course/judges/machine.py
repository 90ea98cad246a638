"""Judges of exercise 4, the transition table: one judge per rule, each all or nothing.

The student's ``machine.toml`` is parsed by the engine's own parser and expanded into its
*allowlist*: every ``(from, to, role)`` it allows, wildcards and merged rows spelled out. Every
possible move belongs to exactly one rule (so one mistake costs one rule, not three), and each rule
is judged on every move it owns:

``loads``                 the file parses, names a version of its own, and leaves no terminal state
                          except to needs_review (the parser refuses any other row out of one)
``happy-path``            pending -> ready by the manager only; ready -> running by a worker only;
                          running -> succeeded | failed | denied by a worker only
``results-from-running``  no other way into a result state (a result without a lease)
``retry-path``            running -> retry_wait by a worker or the runtime (an expired lease);
                          retry_wait -> ready by the manager only
``human-answer``          running -> waiting_human by a worker only (the seed's); and the kit's
                          optional row waiting_human -> ready, when a table has it, by a reviewer only
``freeze``                every state -> needs_review, by the runtime only
``review``                needs_review -> ready | canceled by a reviewer only, and nowhere else
``cancel``                every unfinished state -> canceled by the manager and a reviewer, nobody else
``nothing-more``          no other move (work starts only from ready, ready only by assignment,
                          reassignment, an answer or a release, nothing goes back to pending)
``fault-runs``            the table loaded into the simulator: under each fault every invariant
                          holds, the story ends as under task-v1, and a reviewer decides a frozen task

``cancel`` and ``review`` also deliver cancels and review decisions to a live run with the table
(``live`` cases); ``fault-runs`` plays ``cases`` of (scenario, faults, seed). Hidden cases of both
come from ``solutions/04-transition-table/hidden.toml``.

:func:`behaviour` (for the grader's mutation run) is the expanded allowlist plus how the runs of a
fault matrix end: two tables with the same allowlist are the same table to the engine.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from . import Broke, grid_row, reference_outcome, rerun_line, rule, signature_of

__all__ = ["TABLE", "STATES", "SYMPTOMS", "RULES", "owner_rule", "behaviour", "loads", "happy_path", "results_from_running", "retry_path",
           "human_answer", "freeze", "review", "cancel", "nothing_more", "fault_runs"]

_FILE = "machine.toml"
_CHECK = "protolab machine check {dir}/machine.toml"
_VERSION_MAX = 100

STATES = ("pending", "ready", "running", "retry_wait", "succeeded", "failed", "denied", "waiting_human",
          "needs_review", "canceled")
_TERMINAL = frozenset({"succeeded", "failed", "denied", "canceled"})
_UNFINISHED = ("pending", "ready", "running", "retry_wait", "waiting_human")  # nonterminal, needs_review aside
_RESULTS = frozenset({"succeeded", "failed", "denied", "waiting_human", "retry_wait"})
_WORKERS = frozenset({"researcher", "writer"})

#: The table the exercise asks for, move by move: (from, to) -> (the rule that owns it, its owners, why).
#: The seed's moves (sim.machine.SEED_MOVES), each with the course's owners: the same allowlist as the
#: shipped task-v1 (tests/test_ex04_machine.py holds them to it). Every move here is required.
TABLE: dict[tuple[str, str], tuple[str, frozenset, str]] = {
    ("pending", "ready"): ("happy-path", frozenset({"manager"}), "only the manager assigns work"),
    ("ready", "running"): ("happy-path", _WORKERS, "a worker starts the task it was given and takes its lease"),
    **{("running", r): ("happy-path", _WORKERS, "a result comes from the worker holding the lease")
       for r in ("succeeded", "failed", "denied")},
    ("running", "waiting_human"): ("human-answer", _WORKERS, "the worker holding the lease is the one that asks a "
                                                            "person, as it reports any other result"),
    ("running", "retry_wait"): ("retry-path", _WORKERS | {"runtime"},
                                "an attempt that ends without a result waits to retry: asked by its worker (a "
                                "transient failure) or by the runtime (a crashed worker's lease expired)"),
    ("retry_wait", "ready"): ("retry-path", frozenset({"manager"}), "only the manager hands a task out again"),
    **{(s, "needs_review"): ("freeze", frozenset({"runtime"}), "only the runtime detects a conflict")
       for s in STATES if s != "needs_review"},
    ("needs_review", "ready"): ("review", frozenset({"reviewer"}), "a reviewer releases a frozen task from retained evidence"),
    ("needs_review", "canceled"): ("review", frozenset({"reviewer"}), "a reviewer cancels a frozen task from retained evidence"),
    **{(s, "canceled"): ("cancel", frozenset({"manager", "reviewer"}), "the manager or a reviewer stops unfinished work")
       for s in _UNFINISHED},
}

#: Rows of the kit's own, beyond the seed: a table may have them and never needs them (the seed's
#: table gets full marks); when it has one, only its owners may make the move. (from, to) -> (the
#: rule that owns it, its owners, why). They are marked as the kit's in machine show ("source": kit),
#: in the exercise's README and in the feedback.
OPTIONAL: dict[tuple[str, str], tuple[str, frozenset, str]] = {
    ("waiting_human", "ready"): ("human-answer", frozenset({"reviewer"}),
                                 "a person (a reviewer) answers a waiting task: the kit's optional row, not the seed's"),
}

#: The rules judged on the table, in the order of exercise.toml, each with what it holds.
RULES = {
    "happy-path": "each move of the happy path is allowed to its owners and nobody else",
    "results-from-running": "a result state is entered only from running",
    "retry-path": "the retry path runs running -> retry_wait -> ready, each step by its owners only",
    "human-answer": "a running attempt may wait for a person, asked by its worker; if the table lets a person "
                    "answer (the kit's optional row), only a reviewer answers",
    "freeze": "the runtime, and nobody else, may freeze a task whatever state it is in",
    "review": "only a reviewer leaves needs_review, and only to ready or canceled",
    "cancel": "every unfinished task can be canceled by the manager or a reviewer, never by anyone else",
    "nothing-more": "the table allows no move the seed does not describe",
}

SYMPTOMS = {
    "load-error": "machine.toml does not parse under the engine's rules",
    "terminal-exit": "a row leaves a terminal state for somewhere other than needs_review (refused by the parser)",
    "shipped-version": "the table is named task-v1, the shipped machine's version",
    "happy-move-missing": "a move of the happy path is allowed to nobody",
    "happy-owner-missing": "a move of the happy path is not allowed to one of its owners",
    "happy-other-role": "a move of the happy path is allowed to a role that does not own it",
    "result-without-lease": "a result state is reachable from a state other than running",
    "no-lease-expiry": "the runtime may not move running -> retry_wait (a crashed worker's lease never expires)",
    "no-worker-retry": "a worker may not move running -> retry_wait (a transient failure cannot ask to retry)",
    "no-reassign": "the manager may not move retry_wait -> ready (the retry path dead-ends)",
    "retry-other-role": "a step of the retry path is allowed to a role that does not own it",
    "no-human-wait": "a worker may not move running -> waiting_human (an attempt cannot wait for a person)",
    "human-wait-other-role": "running -> waiting_human is allowed to a role other than the workers",
    "answer-other-role": "waiting_human -> ready (the kit's optional row) is allowed to a role other than a reviewer",
    "state-not-frozen": "the runtime may not freeze a task in some unfinished state",
    "terminal-not-frozen": "the runtime may not freeze a finished task (a late conflict would be hidden)",
    "worker-freezes": "a worker may move a task to needs_review",
    "agent-freezes": "the manager or a reviewer may move a task to needs_review",
    "reviewer-cannot-decide": "a reviewer may not release (ready) or cancel a frozen task",
    "manager-releases-frozen": "the manager may release a frozen task (needs_review -> ready)",
    "manager-cancels-frozen": "the manager may cancel a frozen task (needs_review -> canceled)",
    "worker-decides-review": "a worker may leave needs_review",
    "runtime-decides-review": "the runtime may leave needs_review",
    "review-elsewhere": "needs_review may be left for a state other than ready or canceled",
    "not-cancelable": "some unfinished state cannot be canceled at all",
    "canceler-missing": "the manager or a reviewer may not cancel some unfinished state",
    "worker-cancels": "a worker may cancel a task",
    "runtime-cancels": "the runtime may cancel a task",
    "retry-skips-wait": "running -> ready: an ended attempt skips retry_wait and the manager's reassignment",
    "restart-without-reassign": "retry_wait -> running: a worker restarts without the manager's reassignment",
    "answer-restarts": "waiting_human -> running: an answered task restarts without going through ready",
    "start-without-assign": "pending -> running: work starts before it was assigned",
    "back-to-pending": "a move back to pending",
    "invariant-broken": "a run with the table broke an invariant",
    "wrong-ending": "a run with the table did not end as it does under task-v1",
    "move-refused": "intake refused a move the story needs (E_TRANSITION_NOT_ALLOWED)",
    "role-refused": "intake refused a move because the table does not name the role making it (E_ROLE_NOT_ALLOWED)",
    "stuck-running": "a run ended with a task still running",
    "stuck-retry-wait": "a run ended with a task in retry_wait",
    "not-frozen": "a conflict did not leave its task in needs_review",
    "review-refused": "a reviewer could not decide a frozen task",
    **{f"run-needs-{r}": f"a run needed a move of rule {r} that the table does not allow"
       for r in ("happy-path", "retry-path", "freeze", "review", "cancel")},
}


# ---------------------------------------------------------------------------------- the table


def _load(sub: Path):
    """``(RuleBook, None, None)`` or ``(None, what is wrong, its code)``: the engine's own parser."""
    from ...errors import ProtolabError
    from ...machine import load_rulebook

    try:
        rb = load_rulebook(sub / _FILE)
        if len(rb.version) > _VERSION_MAX:  # it is written into every transition of every run
            return None, (f"E_VERSION_TOO_LONG: the version is {len(rb.version):,} characters long; a version is a "
                          f"short name (at most {_VERSION_MAX} characters)"), "E_VERSION_TOO_LONG"
        return rb, None, None
    except ProtolabError as e:  # the path is the grader's private copy: name the file only
        return None, f"{e.code}: {e.message}".replace(str(sub / _FILE), _FILE), e.code
    except OSError as e:  # a folder named machine.toml, an unreadable file
        return None, f"{_FILE} cannot be read ({type(e).__name__}: {e.strerror or e})", "E_UNREADABLE"
    except (RecursionError, MemoryError, ValueError) as e:  # a TOML nested past the parser's depth
        return None, f"{_FILE} cannot be parsed ({type(e).__name__})", "E_TOML"


def _allow(rb) -> dict[tuple[str, str], frozenset]:
    """The expanded allowlist: (from, to) -> the roles that may make the move."""
    return {(r.from_state.value, r.to_state.value): frozenset(r.roles) for r in rb.rules}


def _triples(allow: dict) -> tuple[str, ...]:
    return tuple(sorted(f"{a} -> {b}: {role}" for (a, b), roles in allow.items() for role in roles))


def _key(rb) -> tuple:
    """What a run with this table depends on: its version (named in intake's messages) and its
    allowlist (the reasons and the file's layout are never consulted)."""
    return (rb.version, _triples(_allow(rb)))


def owner_rule(a: str, b: str) -> str:
    """The rule a move belongs to: the seed's moves and the kit's optional rows to theirs, any other
    to the rule it breaks."""
    if (a, b) in TABLE:
        return TABLE[(a, b)][0]
    if (a, b) in OPTIONAL:
        return OPTIONAL[(a, b)][0]
    if b == "needs_review":
        return "freeze"
    if a == "needs_review":
        return "review"
    if b == "canceled":
        return "cancel"
    if b in _RESULTS:
        return "results-from-running"
    return "nothing-more"


def _domain(name: str) -> list[tuple[str, str]]:
    """Every move a table could hold (the parser allows it) that rule ``name`` judges."""
    return [(a, b) for a in STATES for b in STATES
            if a != b and (a not in _TERMINAL or b == "needs_review") and owner_rule(a, b) == name]


def _names(roles) -> str:
    roles = sorted(roles)
    if not roles:
        return "nobody"
    return ", ".join(roles[:-1]) + (" and " if len(roles) > 1 else "") + roles[-1]


def _rerun(judge: str, args: dict) -> str:
    """The reproduce line of a case no plainer command shows (a move the table lacks or adds, a live
    decision taken or refused, a story that ends otherwise): that case judged again, alone."""
    return rerun_line(4, f"machine.{judge}", args)


def _self_moves(sub: Path) -> list[str]:
    """Rows that name a state as both ends (the parser drops them: staying put is not a move)."""
    import tomllib

    try:
        rows = tomllib.loads((sub / _FILE).read_text(encoding="utf-8")).get("rule", [])
    except Exception:  # noqa: BLE001 - only a note; the parser has judged the file already
        return []
    out = []
    for i, row in enumerate(rows if isinstance(rows, list) else []):
        if not isinstance(row, dict) or not isinstance(row.get("to"), str):
            continue
        frm = row.get("from")
        named = [frm] if isinstance(frm, str) else frm if isinstance(frm, list) else []
        if row["to"] in named:
            out.append(f"rule {i + 1} ({row['to']} -> {row['to']})")
    return out


def _not_loaded(err: str, code: str) -> Broke:
    if code == "E_TERMINAL_EXIT":
        what = (f"does not load: {err} (a finished task never moves again: a late result must not overwrite it; "
                "only a conflict may escalate it to needs_review)")
        tags = ("terminal-exit",)
    else:
        what, tags = f"does not load: {err}", ("load-error",)
    return Broke("machine.toml", what, symptoms=tags, reproduce=_CHECK, signature={"problem": "load"})


# ---------------------------------------------------------------------- what a move gets wrong


def _problems(a: str, b: str, roles: frozenset) -> list[tuple[str, str]]:
    """``(tag, what is wrong)`` for the move ``a -> b`` allowed to ``roles`` (empty: it is right)."""
    if (a, b) in OPTIONAL:  # the kit's row: never required; when present, its owners' only
        _name, owners, why = OPTIONAL[(a, b)]
        extra = roles - owners
        return [("answer-other-role", f"also allowed to the {_names(extra)}: {why}; only a person (a reviewer) "
                                      "answers a task waiting for one")] if extra else []
    if (a, b) not in TABLE:
        return [_extra(a, b, roles)] if roles else []
    name, owners, why = TABLE[(a, b)]
    missing, extra = owners - roles, roles - owners
    out: list[tuple[str, str]] = []
    if name == "happy-path":
        if not roles & owners:
            out.append(("happy-move-missing", f"allowed to nobody who owns it ({why}): the happy path "
                                              "breaks there"))
        elif missing:
            out.append(("happy-owner-missing", f"not allowed to the {_names(missing)} ({why})"))
        if extra:
            out.append(("happy-other-role", f"also allowed to the {_names(extra)}: {why}, nobody else"))
    elif name == "retry-path":
        if (a, b) == ("running", "retry_wait"):
            if "runtime" in missing:
                out.append(("no-lease-expiry", "not allowed to the runtime: a crashed worker's lease can "
                                               "never expire, so its task stays running forever"))
            if missing & _WORKERS:
                out.append(("no-worker-retry", f"not allowed to the {_names(missing & _WORKERS)}: a "
                                               "transient failure cannot ask for another attempt"))
        elif missing:
            out.append(("no-reassign", "not allowed to the manager: nobody hands the task out again, so "
                                       "the retry path dead-ends in retry_wait"))
        if extra:
            out.append(("retry-other-role", f"also allowed to the {_names(extra)}: {why}"))
    elif name == "human-answer":
        if missing:
            out.append(("no-human-wait", f"not allowed to the {_names(missing)}: a running attempt that needs a "
                                         "person cannot say so, and the seed's state machine has this move"))
        if extra:
            out.append(("human-wait-other-role", f"also allowed to the {_names(extra)}: {why}"))
    elif name == "freeze":
        if missing:
            if a in _TERMINAL:
                out.append(("terminal-not-frozen", f"not allowed to the runtime: a conflict that arrives "
                                                   f"after the task finished ({a}) would be hidden instead of frozen"))
            else:
                out.append(("state-not-frozen", f"not allowed to the runtime: a conflict arriving while "
                                                f"the task is {a} cannot freeze it"))
        if extra & _WORKERS:
            out.append(("worker-freezes", f"allowed to the {_names(extra & _WORKERS)}: only the runtime, "
                                          "which sees every delivery, detects a conflict; a worker allowed to freeze "
                                          "could stall any task or hide its own contradictory result"))
        if extra - _WORKERS:
            out.append(("agent-freezes", f"allowed to the {_names(extra - _WORKERS)}: only the runtime "
                                         "detects a conflict; an agent allowed to freeze could stall any task it likes"))
    elif name == "review":
        decided = "released" if b == "ready" else "canceled"
        if missing:
            out.append(("reviewer-cannot-decide", f"not allowed to a reviewer: a frozen task can never be "
                                                  f"{decided} by the person who decides it"))
        manager_tag = "manager-releases-frozen" if b == "ready" else "manager-cancels-frozen"
        for tag, who in ((manager_tag, extra & {"manager"}), ("worker-decides-review", extra & _WORKERS),
                         ("runtime-decides-review", extra & {"runtime"})):
            if who:
                out.append((tag, f"also allowed to the {_names(who)}: a frozen task is decided only by a "
                                 "reviewer citing retained evidence (the agents' own account is what the conflict "
                                 "contradicted)"))
    elif name == "cancel":
        if not roles & owners:
            out.append(("not-cancelable", f"allowed to neither the manager nor a reviewer: a {a} task can "
                                          "never be stopped"))
        elif missing:
            out.append(("canceler-missing", f"not allowed to the {_names(missing)}: both the manager and a "
                                            "reviewer may stop unfinished work"))
        if extra & _WORKERS:
            out.append(("worker-cancels", f"allowed to the {_names(extra & _WORKERS)}: a worker does not "
                                          "decide that work is no longer wanted"))
        if "runtime" in extra:
            out.append(("runtime-cancels", "allowed to the runtime: the runtime freezes and expires "
                                           "leases; it does not decide that work is no longer wanted"))
    return out


def _extra(a: str, b: str, roles: frozenset) -> tuple[str, str]:
    """A move the seed does not describe, by the rule it breaks."""
    move = f"allowed to the {_names(roles)}"
    if a == "needs_review":
        return ("review-elsewhere", f"{move}: a frozen task leaves needs_review only to ready (run it again) or "
                                    "canceled, by a reviewer's decision")
    if b in _RESULTS:
        return ("result-without-lease", f"{move}: {b} is reached only from running; only a running attempt holds a "
                                        "lease, the fencing token that lets intake refuse a stale worker's result, so "
                                        f"a result written from {a} cannot be told from a stale one")
    if (a, b) == ("running", "ready"):
        return ("retry-skips-wait", f"{move}, skips retry_wait: an attempt that ended waits to retry, and only the "
                                    "manager's reassignment makes it ready again")
    if (a, b) == ("retry_wait", "running"):
        return ("restart-without-reassign", f"{move}: a worker restarts on its own, skipping the manager's "
                                            "reassignment (retry_wait -> ready)")
    if (a, b) == ("waiting_human", "running"):
        return ("answer-restarts", f"{move}: a task waiting for a person never goes straight back to running, "
                                   "past the lease a start from ready takes (the shipped task-v2's row, the kit's own: "
                                   "a shortcut the seed does not have)")
    if b == "running":
        return ("start-without-assign", f"{move}: work starts only from ready, once the manager assigned it")
    return ("back-to-pending", f"{move}: nothing goes back to pending, where a task is only created")


def _table_rule(sub: Path, name: str, live=None) -> object:
    rb, err, code = _load(sub)
    if rb is None:
        return rule(1, [_not_loaded(err, code)], "")
    allow = _allow(rb)
    domain = _domain(name)
    broke = []
    for a, b in domain:
        probs = _problems(a, b, allow.get((a, b), frozenset()))
        if probs:
            broke.append(Broke(f"{a} -> {b}", "; ".join(m for _t, m in probs), symptoms=tuple(t for t, _m in probs),
                               reproduce=_rerun(name.replace("-", "_"), {"live": []}),
                               witness={"move": f"{a} -> {b}",
                                                             "allowed_to": sorted(allow.get((a, b), ()))},
                               signature={"problem": name}))
    checked = len(domain)
    if live is not None:
        n, more = live(rb)
        checked += n
        broke += more
    held = RULES[name]
    kit_rows = [f"{a} -> {b}" for (a, b), (owner, _o, _w) in OPTIONAL.items() if owner == name and allow.get((a, b))]
    if kit_rows:  # the kit's own row, beyond the seed: allowed, never required, and said so
        held += f"; your table has the kit's optional row {', '.join(kit_rows)} (not the seed's), by its owners only"
    return rule(checked, broke, held)


# ----------------------------------------------------------------------------- the judges


def loads(sub: Path, args: dict):
    """The file parses under the engine's rules (which refuse any row out of a terminal state but
    to needs_review) and names a version of its own."""
    rb, err, code = _load(sub)
    if rb is None:
        return rule(1, [_not_loaded(err, code)], "")
    if rb.version == "task-v1":
        return rule(2, [Broke("the version", "is task-v1, the shipped machine's name: a different table needs a "
                                             "different version, or a store would take two tables for one",
                              symptoms=("shipped-version",), reproduce=_CHECK, signature={"problem": "load"})], "")
    note = ""
    if same := _self_moves(sub):
        note = (f"; note: {', '.join(same)} names the same state on both ends, which is not a move "
                "(the parser drops it)")
    return rule(2, [], f"{rb.version}: {len(rb.rules)} moves, no terminal state left except to needs_review{note}")


def happy_path(sub: Path, args: dict):
    """pending -> ready by the manager; ready -> running and running -> succeeded | failed | denied |
    waiting_human by a worker; each by its owners and nobody else."""
    return _table_rule(sub, "happy-path")


def results_from_running(sub: Path, args: dict):
    """No move into succeeded, failed, denied, waiting_human or retry_wait but from running."""
    return _table_rule(sub, "results-from-running")


def retry_path(sub: Path, args: dict):
    """running -> retry_wait by a worker or the runtime; retry_wait -> ready by the manager."""
    return _table_rule(sub, "retry-path")


def human_answer(sub: Path, args: dict):
    """running -> waiting_human by a worker (the seed's move); the kit's optional row waiting_human ->
    ready, when the table has it, by a reviewer only."""
    return _table_rule(sub, "human-answer")


def freeze(sub: Path, args: dict):
    """Every state -> needs_review, by the runtime only."""
    return _table_rule(sub, "freeze")


def nothing_more(sub: Path, args: dict):
    """No move the seed does not describe (besides results from elsewhere than running, judged apart)."""
    return _table_rule(sub, "nothing-more")


def cancel(sub: Path, args: dict):
    """Every unfinished state -> canceled by the manager and a reviewer, nobody else; and, delivered
    to a live run with the table (``live`` cases: the state T-1 is brought to, the sender), a cancel
    is accepted exactly when the rule says so."""
    cases = [c for c in args.get("live", []) if isinstance(c, dict)]
    return _table_rule(sub, "cancel", live=lambda rb: _live_cases(sub, rb, cases, "cancel"))


def review(sub: Path, args: dict):
    """needs_review -> ready | canceled by a reviewer only, nowhere else; and, delivered to a frozen
    task of a live run (``live`` cases: sender and decision), a review decision is accepted exactly
    when the rule says so."""
    cases = [c for c in args.get("live", []) if isinstance(c, dict)]
    return _table_rule(sub, "review", live=lambda rb: _live_cases(sub, rb, cases, "review"))


# ------------------------------------------------------------------------------ live deliveries

_CACHE: dict = {}
_CACHE_MAX = 2048


def _cached(key, compute):
    if key not in _CACHE:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = compute()
    return _CACHE[key]


def _send(store, n: int, task_id: str, sender: str, type_: str, payload: dict, evidence=()):
    """Deliver one envelope from ``sender`` about ``task_id`` through the runtime (and the table)."""
    from ...envelope import build_envelope
    from ...runtime import deliver

    t = store.get_task(task_id)
    env = build_envelope(message_id=f"X-{n}", trace_id=store.task_trace(task_id), task_id=task_id, sender=sender,
                         recipient="manager", type=type_, payload={**payload, "expected_state_version": t.state_version},
                         idempotency_key=f"judge:{type_}:{task_id}:{n}", created_at=store.time_at(store.tick + 1),
                         evidence_refs=tuple(evidence))
    return deliver(store, env)


def _evidence(store, task_id: str) -> list[str]:
    """What a reviewer cites: the payloads kept under the frozen task's conflicting key, or (a task
    frozen because it rests on another's untrusted result) the task's own retained messages."""
    intents = store.intents_of_task(task_id)
    return ([i["message_id"] for i in intents if not i["trusted"]][:2] or [i["message_id"] for i in intents][:2]
            or ["M-1"])


def _live_one(sub: Path, kind: str, case: dict) -> dict:
    """One delivery to a live run of publish-report with the table: ``{"skipped": why}`` when the
    run never reaches the case's starting point, else ``{"accepted": bool, "state", "reason"}``."""
    from ...live import LiveRun
    from ...plugins import Plugins
    from ...scenario import load_scenario

    sender = str(case.get("sender", "manager"))
    if kind == "cancel":
        at = str(case.get("state", "running"))
        live = LiveRun(load_scenario("publish-report"), faults=list(case.get("faults", [])),
                       plugins=Plugins(machine=sub / _FILE))
        try:
            while True:
                t = live.store.get_task("T-1")
                if t is not None and t.state.value == at:
                    break
                if live.step() is None:
                    return {"skipped": f"T-1 never reached {at}"}
            out = _send(live.store, 1, "T-1", sender, "cancel", {"reason": "judge"})
            return {"accepted": out.decision == "accepted", "state": live.store.get_task("T-1").state.value,
                    "reason": f"{out.code or out.decision}: {out.reason}"}
        finally:
            live.close()
    decision = str(case.get("decision", "ready"))
    live = LiveRun(load_scenario("publish-report"), faults=["conflicting-digest"], plugins=Plugins(machine=sub / _FILE))
    try:
        live.run_to_end()
        frozen = [t["task_id"] for t in live.store.tasks() if t["state"] == "needs_review"]
        if not frozen:
            return {"skipped": "no task was frozen"}
        tid = frozen[0]
        out = _send(live.store, 2, tid, sender, "review_decision", {"decision": decision}, _evidence(live.store, tid))
        return {"accepted": out.decision == "accepted", "state": live.store.get_task(tid).state.value, "task": tid,
                "reason": f"{out.code or out.decision}: {out.reason}"}
    finally:
        live.close()


def _live_cases(sub: Path, rb, cases: list[dict], kind: str) -> tuple[int, list[Broke]]:
    """The live cases of ``cancel`` or ``review``: the decision intake takes must be the one the
    rule gives. A case the run cannot set up (T-1 never started, nothing froze: another rule's
    failure) is not counted."""
    from ...envelope import role_of
    from ...errors import ProtolabError

    n, broke = 0, []
    for case in cases:
        sender = str(case.get("sender", "manager"))
        try:
            role = role_of(sender)
        except ProtolabError:
            continue
        if kind == "cancel":
            at = str(case.get("state", "running"))
            move, label = (at, "canceled"), f"a {role}'s cancel of a {at} task (live run)"
        else:
            decision = str(case.get("decision", "ready"))
            move, label = ("needs_review", decision), f"a {role}'s review decision {decision} on a frozen task (live run)"
        want = role in TABLE.get(move, ("", frozenset(), ""))[1]
        key = ("live", _key(rb), kind, tuple(sorted((k, str(v)) for k, v in case.items())))
        got = _cached(key, lambda case=case: _live_one(sub, kind, case))
        if "skipped" in got:
            continue
        n += 1
        if got["accepted"] == want:
            continue
        if want:
            tag = "canceler-missing" if kind == "cancel" else "reviewer-cannot-decide"
            what = f"was refused ({got['reason']}): {TABLE[move][2]}"
        else:
            tag = ("worker-cancels" if kind == "cancel" else "worker-decides-review" if role != "manager" else
                   "manager-releases-frozen" if move[1] == "ready" else "manager-cancels-frozen")
            what = (f"was accepted (the task went {got['state']}): "
                    + ("a worker does not decide that work is no longer wanted" if kind == "cancel"
                       else "only a reviewer decides a frozen task"))
        broke.append(Broke(label, what, symptoms=(tag,), reproduce=_rerun(kind, {"live": [dict(case)]}),
                           witness={"case": dict(case), "accepted": got["accepted"], "reason": got["reason"]},
                           signature={"problem": kind}))
    return n, broke


# ------------------------------------------------------------------------------------- runs


def _db(scenario: str) -> str:
    # `protolab run` refuses a database that holds another scenario's run: one file per story.
    return "ex4.db" if scenario == "publish-report" else f"ex4-{scenario}.db"


def _repro(scenario: str, faults: list[str], seed: int, then: str = "") -> str:
    sc = "" if scenario == "publish-report" else f"{scenario} "
    db = _db(scenario)
    return (f"protolab run {sc}--machine {{dir}}/machine.toml{''.join(' --fault ' + f for f in faults)}"
            f"{f' --seed {seed}' if seed else ''} --db {db} && "
            + (then.format(db=db) if then else f"protolab check --db {db}"))


def _review_all(store, decision: str) -> tuple[str, str] | None:
    """A reviewer decides every frozen task; ``(what went wrong, reconcile command)`` or None."""
    from ...errors import ProtolabError
    from ...runtime import review as _review

    for t in store.tasks():
        if t["state"] != "needs_review":
            continue
        tid = t["task_id"]
        evidence = _evidence(store, tid)
        cmd = (f"protolab reconcile {tid} --decision {decision} --by reviewer "
               + " ".join(f"--evidence {e}" for e in evidence) + " --db {db}")
        try:
            out = _review(store, tid, decision, by="reviewer", evidence=evidence)
        except ProtolabError as e:
            return f"the reviewer could not decide {tid} ({decision}): {e.code}: {e.message}", cmd
        if out.decision != "accepted":
            return f"the reviewer's decision on frozen {tid} ({decision}) was {out.decision}: {out.reason}", cmd
    return None


def _play(machine: Path, scenario: str, faults: list[str], seed: int, decision: str) -> dict:
    """One run with the table in ``machine``, summarised: final states, invariants, what intake
    refused, and (after the run) a reviewer deciding every frozen task; then every move made."""
    from ...invariants import check
    from ...plugins import Plugins
    from ...runner import run_scenario
    from ...scenario import load_scenario

    store = run_scenario(load_scenario(scenario), seed=seed, faults=list(faults), plugins=Plugins(machine=machine),
                         strict_faults=False)
    try:
        results = check(store)
        states = {t["task_id"]: t["state"] for t in store.tasks()}
        refused = [(d["message_id"], d["type"], d["code"], d["reason"]) for d in store.deliveries()
                   if d["code"] in ("E_TRANSITION_NOT_ALLOWED", "E_ROLE_NOT_ALLOWED")]
        problem = _review_all(store, decision) if "needs_review" in states.values() else None
        moves = sorted({(t["old_state"], t["new_state"], t["role"]) for t in store.transitions()})
        return {"results": results, "states": states, "refused": refused, "review": problem, "moves": moves}
    finally:
        store.close()


def _reference_moves(scenario: str, faults: list[str], seed: int, decision: str) -> list[tuple[str, str, str]]:
    """The moves the story makes under the shipped machine (task-v1), the reviewer's included."""
    from ...machine import DEFAULT_MACHINE_PATH

    return _cached(("reference", scenario, tuple(faults), seed, decision),
                   lambda: _play(DEFAULT_MACHINE_PATH, scenario, faults, seed, decision))["moves"]


def _case(c) -> tuple[str, list[str], int, str] | None:
    if not isinstance(c, dict) or not isinstance(c.get("scenario", "publish-report"), str):
        return None
    sc = c.get("scenario", "publish-report")
    faults = [str(f) for f in c.get("faults", [])] if isinstance(c.get("faults", []), list) else []
    decision = c.get("review") or ("ready" if sc == "publish-report" else "canceled")
    return sc, faults, int(c.get("seed", 0)), str(decision)


def _judge_run(sub: Path, rb, sc: str, faults: list[str], seed: int, decision: str, rows: list) -> Broke | None:
    got = _cached(("run", _key(rb), sc, tuple(faults), seed, decision), lambda: _play(sub / _FILE, sc, faults, seed, decision))
    label = f"{sc} with {' + '.join(faults) or 'no faults'}" + (f" (seed {seed})" if seed else "")
    results = got["results"]
    broken = [r for r in results if not r.ok]
    want = reference_outcome(sc, faults, seed)[0]
    states = got["states"]
    ok = not broken and states == want and not got["review"]
    rows.append(grid_row(sc, faults, results, ok))
    if ok:
        return None
    tags: list[str] = []
    allow = _allow(rb)
    needed = [m for m in _reference_moves(sc, faults, seed, decision)
              if m not in got["moves"] and m[2] not in allow.get((m[0], m[1]), ())]
    tags += [f"run-needs-{TABLE[(a, b)][0]}" for a, b, _r in needed if (a, b) in TABLE]
    lacking = (f"; the story needed {', '.join(f'{a} -> {b} by the {r}' for a, b, r in needed[:3])}, which your "
               "table does not allow") if needed else ""
    refused = got["refused"]
    for _m, _t, code, _r in refused:
        tags.append("move-refused" if code == "E_TRANSITION_NOT_ALLOWED" else "role-refused")
    if broken:
        w = broken[0].witnesses[0] if broken[0].witnesses else {}
        brief = ", ".join(f"{k}={w[k]}" for k in ("task_id", "message_id", "problem") if w.get(k))
        witness = {"run": label, "invariant": broken[0].name, "witness": w}
        return Broke(label, f"{broken[0].name} broke ({brief}){lacking}", symptoms=tuple(dict.fromkeys(["invariant-broken", *tags])),
                     reproduce=_repro(sc, faults, seed), witness=witness, signature=signature_of(sc, faults, witness))
    if states != want:
        for t, s in want.items():
            g = states.get(t)
            if g == "running":
                tags.append("stuck-running")
            elif g == "retry_wait":
                tags.append("stuck-retry-wait")
            elif s == "needs_review" and g != s:
                tags.append("not-frozen")
        why = lacking or (f"; intake refused {refused[0][0]} ({refused[0][1]}): {refused[0][3]}" if refused else "")
        diff = ", ".join(f"{t} {states.get(t, 'never created')} (expected {s})" for t, s in sorted(want.items())
                         if states.get(t) != s)
        witness = {"run": label, "states": states, "expected": want}
        return Broke(label, f"the story did not end as it should: {diff}{why}",
                     symptoms=tuple(dict.fromkeys(["wrong-ending", *tags])),
                     reproduce=_rerun("fault_runs", {"cases": [{"scenario": sc, "faults": list(faults), "seed": seed,
                                                                "review": decision}]}), witness=witness,
                     signature=signature_of(sc, faults, witness))
    msg, cmd = got["review"]
    return Broke(label, msg + lacking, symptoms=tuple(dict.fromkeys(["review-refused", *tags])), reproduce=_repro(sc, faults, seed, cmd),
                 witness={"run": label, "review": msg}, signature={**signature_of(sc, faults, {}), "problem": "review"})


def fault_runs(sub: Path, args: dict):
    """The table loaded into the simulator, one run per case (scenario, faults, seed): every
    invariant holds, the story ends as under the shipped machine, and a reviewer decides every
    frozen task (releasing it on publish-report, canceling it elsewhere, or the case's ``review``)."""
    rb, err, code = _load(sub)
    if rb is None:
        return rule(1, [_not_loaded(err, code)], "")
    cases = [c for c in (_case(c) for c in args.get("cases", [])) if c is not None]
    # A story's run with no faults first: when it already fails, the story's other runs are not
    # played (the rule is broken; a stalled table would otherwise spend seconds on each of them).
    cases.sort(key=lambda c: bool(c[1]) or c[2] != 0)
    rows: list = []
    broke: list[Broke] = []
    stalled: set[str] = set()
    skipped = 0
    for c in cases:
        if c[0] in stalled:
            skipped += 1
            continue
        b = _judge_run(sub, rb, *c, rows)
        if b is not None:
            broke.append(b)
            if not c[1] and not c[2]:
                stalled.add(c[0])
    if broke and skipped:
        broke[0] = replace(broke[0], what=broke[0].what + f" ({skipped} more run{'s' if skipped != 1 else ''} not "
                                                          f"played: the run of {' and '.join(sorted(stalled))} with no "
                                                          "faults already fails)")
    return rule(len(cases) - skipped, broke, "every run with your table holds every invariant and ends as it should",
                grid=rows)


# ------------------------------------------------------------------------------------- behaviour

#: The runs behaviour() describes: every case the fault-runs rule plays, public and hidden (so the
#: grader's runs of a mutant are the cached ones), and the third story under a conflict and a crash.
_BEHAVIOUR_FAULTS = ([], ["duplicate"], ["conflicting-digest"], ["late-failure"], ["crash"], ["transient"], ["resend"],
                     ["late-conflict"])
_BEHAVIOUR_RUNS = (tuple((sc, f, 0) for sc in ("publish-report", "fan-out") for f in _BEHAVIOUR_FAULTS)
                   + (("publish-report", ["crash"], 1), ("sensitive-source", ["conflicting-digest"], 0),
                      ("sensitive-source", ["crash"], 0)))


def behaviour(sub: Path) -> dict:
    """What the table in ``sub`` does, for the grader's mutation run.

    The core is the expanded allowlist: every (from, to, role) the table allows, wildcards and lists
    expanded and rows for one move merged. Intake and the runtime consult nothing else (a rule's
    ``reason`` is only copied into the log, the description never read, the order and grouping of
    the rows vanish in parsing), so two tables with the same allowlist are the same table to every
    rule. The version is reduced to whether it reuses the shipped name (any other name is a label).
    Beside it, how the runs of a fault matrix end (every case the fault-runs rule plays, hidden ones
    included, and a third story): final states, invariants broken, which moves intake refused,
    whether a reviewer could decide every frozen task. Those are a function of the allowlist (the
    run consults nothing else), kept to show it; the matrix stays the tests' own so that grading a
    mutant reuses its runs. A file that does not load is described by the
    parser's error code alone."""
    rb, _err, code = _load(sub)
    if rb is None:
        return {"loads": code}
    out: dict = {"loads": True, "shipped_version": rb.version == "task-v1", "allow": list(_triples(_allow(rb)))}
    runs = {}
    for sc, faults, seed in _BEHAVIOUR_RUNS:
        decision = "ready" if sc == "publish-report" else "canceled"
        got = _cached(("run", _key(rb), sc, tuple(faults), seed, decision),
                      lambda sc=sc, faults=faults, seed=seed, decision=decision: _play(sub / _FILE, sc, faults, seed,
                                                                                      decision))
        runs[f"{sc} {'+'.join(faults) or '-'} {seed}"] = {
            "states": got["states"], "broken": sorted(r.name for r in got["results"] if not r.ok),
            "refused": sorted({(t, code) for _m, t, code, _r in got["refused"]}), "review_refused": bool(got["review"])}
    out["runs"] = runs
    return out

