"""Judges of exercise 4, the transition table: the student's ``machine.toml`` is parsed by the
engine's own parser, judged by the properties the seed asks of a task state machine (a conflict
can freeze any task and only the runtime freezes; only a reviewer leaves needs_review; every
unfinished task can be canceled, by a manager or a reviewer; the retry path leads back to ready;
each of the seed's moves is made by its owner and the table allows nothing more), and then loaded
into the simulator and run under the fault matrix, where intake must accept the moves the story
needs and refuse the ones it must not.

The static judges report each failing check with the move it is about; the witness lists them
all (``protolab exercise check 4 --json``).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from . import Judged, failed, grid_row, partial, passed, reference_outcome, signature_of

_FILE = "machine.toml"
_WORKERS = frozenset({"researcher", "writer"})
_RESULTS = ("succeeded", "failed", "denied", "waiting_human", "retry_wait")
_CHECK = "protolab machine check {dir}/machine.toml"

#: The seed's moves outside freezing, review and cancel, each with the roles that own it.
#: Same rows as the shipped task-v1 (tests/test_ex04_machine.py holds them to it).
_OWNED = {
    ("pending", "ready"): (frozenset({"manager"}), "only the manager assigns work"),
    ("ready", "running"): (_WORKERS, "a worker starts the task it was given and takes the lease"),
    ("running", "succeeded"): (_WORKERS, "results come from the worker holding the lease"),
    ("running", "failed"): (_WORKERS, "results come from the worker holding the lease"),
    ("running", "denied"): (_WORKERS, "results come from the worker holding the lease"),
    ("running", "waiting_human"): (_WORKERS, "the worker holding the lease asks a person"),
    ("running", "retry_wait"): (_WORKERS | {"runtime"}, "the worker (a transient failure) or the runtime (an expired lease)"),
    ("retry_wait", "ready"): (frozenset({"manager"}), "the manager hands the task out again"),
    ("waiting_human", "ready"): (frozenset({"reviewer"}), "a person answers a waiting task"),
}
#: Of those, the two whose missing roles ``cancel-and-retry`` judges (here only extra roles count).
_RETRY = {("running", "retry_wait"), ("retry_wait", "ready")}


def _load(sub: Path):
    """``(RuleBook, None)`` or ``(None, what is wrong)``: the engine's own parser and its message."""
    from ...errors import ProtolabError
    from ...machine import load_rulebook

    try:
        return load_rulebook(sub / _FILE), None
    except ProtolabError as e:  # the path is the grader's private copy: name the file only
        return None, f"{e.code}: {e.message}".replace(str(sub / _FILE), _FILE)
    except OSError as e:  # a folder named machine.toml, an unreadable file
        return None, f"{_FILE} cannot be read ({type(e).__name__}: {e.strerror or e})"


def _roles(rb, a: str, b: str) -> frozenset[str]:
    from ...machine import TaskState

    r = rb.find(TaskState(a), TaskState(b))
    return frozenset(r.roles) if r is not None else frozenset()


def _names(roles) -> str:
    return ", ".join(sorted(roles)) or "nobody"


def _show(rb, faults: str = "") -> str:
    """Run once with the table (so it is loaded into a store) and list it move by move."""
    import shlex

    return (f"protolab run --machine {{dir}}/machine.toml{faults} --db ex4.db && "
            f"protolab machine show --db ex4.db --version {shlex.quote(rb.version)}")


def _score(checks: list[tuple[str, bool, str]], what: str, reproduce: str) -> Judged:
    """``checks`` are (property, ok, what is wrong); a property holds only if all its checks do,
    and the score is the share of properties that hold (one forbidden role costs its property)."""
    props = list(dict.fromkeys(p for p, _ok, _m in checks))
    bad = [(p, m) for p, ok, m in checks if not ok]
    broken = [p for p in props if any(q == p for q, _m in bad)]
    if not broken:
        return passed(f"every property of {what} holds ({len(props)} properties, {len(checks)} checks)")
    more = f" (+{len(bad) - 2} more)" if len(bad) > 2 else ""
    return partial((len(props) - len(broken)) / len(props),
                   (f"{len(broken)} of {len(props)} properties fail ({', '.join(broken)}): " if len(props) > 1
                    else f"{broken[0]}: ")
                   + "; ".join(m for _p, m in bad[:2]) + more,
                   witness=[{"property": p, "problem": m} for p, m in bad], reproduce=reproduce)


def _gate(sub: Path):
    rb, err = _load(sub)
    if rb is None:
        return None, failed(f"machine.toml does not load: {err}", reproduce=_CHECK)
    return rb, None


def _self_moves(sub: Path) -> list[str]:
    """Rows that name a state as both ends (the parser drops them: staying put is not a move)."""
    try:
        rows = tomllib.loads((sub / _FILE).read_text(encoding="utf-8")).get("rule", [])
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError):
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


def loads(sub: Path, args: dict) -> Judged:
    """The file parses under the engine's rules and names a version of its own."""
    rb, bad = _gate(sub)
    if bad:
        return bad
    if rb.version == "task-v1":
        return failed("the version is task-v1, the shipped machine's name: a different table needs a different "
                      "version, or a store would take two different tables for one", reproduce=_CHECK)
    note = ""
    if same := _self_moves(sub):
        note = (f"; note: {', '.join(same)} names the same state on both ends, which is not a move "
                "(the parser drops it)")
    return passed(f"{rb.version}: {len(rb.rules)} moves{note}")


def _nonterminal() -> list[str]:
    from ...machine import TERMINAL, TaskState

    return [s.value for s in TaskState if s not in TERMINAL]


def freeze_and_review(sub: Path, args: dict) -> Judged:
    """needs_review is entered only by the runtime, from every state; only a reviewer leaves it,
    to ready or to canceled."""
    from ...machine import TaskState

    rb, bad = _gate(sub)
    if bad:
        return bad
    checks = []
    for s in TaskState:
        if s == TaskState.NEEDS_REVIEW:
            continue
        roles = _roles(rb, s.value, "needs_review")
        checks.append(("any state can freeze", "runtime" in roles, f"{s.value} -> needs_review is not allowed to the runtime, so a conflict "
                                           f"arriving while a task is {s.value} cannot freeze it"))
        checks.append(("only the runtime freezes", roles <= {"runtime"}, f"{s.value} -> needs_review is allowed to {_names(roles - {'runtime'})}: "
                                             "only the runtime detects a conflict; an agent that may freeze tasks can stall any of them"))
    for to in ("ready", "canceled"):
        roles = _roles(rb, "needs_review", to)
        checks.append(("a reviewer decides", "reviewer" in roles, f"needs_review -> {to} is not allowed to a reviewer"))
    leaving = [r for r in rb.rules if r.from_state == TaskState.NEEDS_REVIEW]
    for r in leaving:
        checks.append(("only a reviewer releases", set(r.roles) <= {"reviewer"}, f"needs_review -> {r.to_state.value} is allowed to "
                       f"{_names(set(r.roles) - {'reviewer'})}: a frozen task is released only by a reviewer"))
        checks.append(("released only to ready or canceled", r.to_state.value in ("ready", "canceled"),
                       f"needs_review -> {r.to_state.value}: a reviewer sends a frozen task to ready (run it again) or canceled"))
    return _score(checks, "freezing and review", _show(rb))


def cancel_and_retry(sub: Path, args: dict) -> Judged:
    """Every unfinished task can be canceled by a manager or a reviewer (a frozen one by a reviewer
    only, judged with the review rules), workers cannot cancel; the retry path runs
    running -> retry_wait -> ready."""
    rb, bad = _gate(sub)
    if bad:
        return bad
    checks = []
    for s in _nonterminal():
        if s == "needs_review":
            continue  # judged with the review rules
        roles = _roles(rb, s, "canceled")
        checks.append(("every unfinished task can be canceled", bool(roles & {"manager", "reviewer"}), f"{s} -> canceled is missing: a {s} task cannot be stopped"))
        checks.append(("workers do not cancel", not roles & _WORKERS, f"{s} -> canceled is allowed to {_names(roles & _WORKERS)}: "
                                             "a worker does not decide that work is no longer wanted"))
    retry = _roles(rb, "running", "retry_wait")
    checks.append(("the retry path", "runtime" in retry, "running -> retry_wait is not allowed to the runtime, so a crashed worker's "
                                       "expired lease leaves its task running forever"))
    checks.append(("the retry path", bool(retry & _WORKERS), "running -> retry_wait is not allowed to the workers, so a transient failure "
                                           "cannot ask for another attempt"))
    checks.append(("the retry path", "manager" in _roles(rb, "retry_wait", "ready"), "retry_wait -> ready is not allowed to the manager: "
                                                                    "the retry path dead-ends in retry_wait"))
    return _score(checks, "cancel and retry", _show(rb))


def _extra_move(a: str, b: str) -> tuple[str, str]:
    """The property a move outside the seed's table breaks, and why it is not wanted."""
    if b in _RESULTS:
        return ("results only from a running attempt",
                f"{b} is reached only from running: only a running attempt holds a lease, the fencing token that lets "
                "intake refuse a stale worker's result")
    if b == "running":
        return ("work starts only from ready",
                "running is entered only from ready, where the manager put the task (pending -> ready, "
                "retry_wait -> ready) or a person's answer did (waiting_human -> ready); a worker starts only "
                "what is ready for it, never on its own")
    if b == "ready":
        return ("ready only by assignment, reassignment, an answer or a release",
                "ready is reached from pending or retry_wait (the manager), waiting_human or needs_review (a reviewer)")
    return ("nothing goes back to pending", "pending is only where a task is created")


def seed_moves(sub: Path, args: dict) -> Judged:
    """The seed's moves (outside freezing, review and cancel) are made by exactly the roles that
    own them, and the table allows no move the seed does not describe."""
    rb, bad = _gate(sub)
    if bad:
        return bad
    checks = []
    for (a, b), (who, why) in _OWNED.items():
        roles = _roles(rb, a, b)
        ok = roles <= who if (a, b) in _RETRY else roles == who
        checks.append(("each move by its owner", ok, f"{a} -> {b} is allowed to {_names(roles)}; expected {_names(who)} ({why})"))
    for r in rb.rules:
        a, b = r.from_state.value, r.to_state.value
        if (a, b) in _OWNED or b in ("needs_review", "canceled") or a == "needs_review":
            continue  # owned moves above; freezing, review and cancel have their own tests
        prop, why = _extra_move(a, b)
        checks.append((prop, False, f"{a} -> {b} (allowed to {_names(r.roles)}) is not a move of the seed's table: {why}"))
    return _score(checks, "the seed's moves", _show(rb))


# ------------------------------------------------------------------------------------- runs


def _db(scenario: str) -> str:
    # `protolab run` refuses a database that holds another scenario's run: one file per story.
    return "ex4.db" if scenario == "publish-report" else f"ex4-{scenario}.db"


def _repro(scenario: str, faults: list[str], then: str = "") -> str:
    sc = "" if scenario == "publish-report" else f"{scenario} "
    db = _db(scenario)
    return (f"protolab run {sc}--machine {{dir}}/machine.toml{''.join(' --fault ' + f for f in faults)} --db {db} && "
            + (then.format(db=db) if then else f"protolab check --db {db}"))


def _run(sub: Path, scenario: str, faults: list[str]):
    from ...plugins import Plugins
    from ...runner import run_scenario
    from ...scenario import load_scenario

    return run_scenario(load_scenario(scenario), faults=list(faults), plugins=Plugins(machine=sub / _FILE),
                        strict_faults=False)


def _states(store) -> dict[str, str]:
    return {t["task_id"]: t["state"] for t in store.tasks()}


def _evidence(store, task_id: str) -> list[str]:
    """The payloads kept under the frozen task's conflicting key: what a reviewer cites."""
    return [i["message_id"] for i in store.intents_of_task(task_id) if not i["trusted"]][:2]


def _review_all(store, decision: str) -> tuple[str, str] | None:
    """A reviewer decides every frozen task; ``(what went wrong, reconcile command)`` or None."""
    from ...errors import ProtolabError
    from ...runtime import review

    for t in store.tasks():
        if t["state"] != "needs_review":
            continue
        tid = t["task_id"]
        evidence = _evidence(store, tid) or ["M-1"]
        cmd = (f"protolab reconcile {tid} --decision {decision} --by reviewer "
               + " ".join(f"--evidence {e}" for e in evidence) + " --db {db}")
        try:
            out = review(store, tid, decision, by="reviewer", evidence=evidence)
        except ProtolabError as e:
            return f"the reviewer could not decide {tid} ({decision}): {e.code}: {e.message}", cmd
        if out.decision != "accepted":
            return f"the reviewer's decision on frozen {tid} ({decision}) was {out.decision}: {out.reason}", cmd
    return None


def _one(sub: Path, scenario: str, faults: list[str], decision: str, rows: list | None = None) -> tuple[str, str, dict] | None:
    results: list = []
    got = _one_checked(sub, scenario, faults, decision, results)
    if rows is not None:
        rows.append(grid_row(scenario, faults, results, got is None))
    return got


def _one_checked(sub: Path, scenario: str, faults: list[str], decision: str, results: list) -> tuple[str, str, dict] | None:
    """None when the run with the student's machine holds every invariant, ends as under task-v1
    and (after a conflict) lets a reviewer decide the frozen task; else (message, reproduce, witness)."""
    from ...invariants import check

    label = f"{scenario} with {' + '.join(faults) or 'no faults'}"
    store = _run(sub, scenario, faults)
    try:
        results.extend(check(store))
        broken = [r for r in results if not r.ok]
        if broken:
            w = broken[0].witnesses[0] if broken[0].witnesses else {}
            brief = ", ".join(f"{k}={w[k]}" for k in ("task_id", "message_id", "problem") if w.get(k))
            return (f"{label}: {broken[0].name} broke ({brief})", _repro(scenario, faults),
                    {"run": label, "invariant": broken[0].name, "witness": w})
        got, want = _states(store), reference_outcome(scenario, faults)[0]
        if got != want:
            refused = [d for d in store.deliveries() if d["code"] in ("E_TRANSITION_NOT_ALLOWED", "E_ROLE_NOT_ALLOWED")]
            why = f"; intake refused {refused[0]['message_id']} ({refused[0]['type']}): {refused[0]['reason']}" if refused else ""
            diff = ", ".join(f"{t} {got.get(t, 'never created')} (expected {s})" for t, s in sorted(want.items()) if got.get(t) != s)
            return (f"{label}: the story did not end as it should: {diff}{why}",
                    _repro(scenario, faults, "protolab messages --db {db}"), {"run": label, "states": got, "expected": want})
        if "conflicting-digest" in faults:
            problem = _review_all(store, decision)
            if problem:
                return f"{label}: {problem[0]}", _repro(scenario, faults, problem[1]), {"run": label, "review": problem[0]}
        return None
    finally:
        store.close()


def fault_runs(sub: Path, args: dict) -> Judged:
    """The machine loaded into the simulator under each fault (on each scenario): every invariant
    holds, the story ends as under the shipped machine, and after a conflict a reviewer decides the
    frozen task (releasing it on publish-report, canceling it on fan-out)."""
    rb, bad = _gate(sub)
    if bad:
        return bad
    runs = [(sc, list(f)) for sc in args.get("scenarios", ["publish-report"]) for f in args["faults"]]
    failures, rows, first = [], [], None
    for sc, f in runs:
        got = _one(sub, sc, f, "ready" if sc == "publish-report" else "canceled", rows)
        if got is not None:
            failures.append(got)
            first = first or (sc, f)
    if not failures:
        return passed(f"all {len(runs)} runs with your machine hold every invariant and end as they should", grid=rows)
    msg, repro, w0 = failures[0]
    more = f" ({len(failures) - 1} more run(s) failed)" if len(failures) > 1 else ""
    sig = signature_of(first[0], first[1], w0)
    if "review" in w0:
        sig["problem"] = "review"
    return partial((len(runs) - len(failures)) / len(runs), msg + more, reproduce=repro,
                   witness=[w for _m, _r, w in failures], grid=rows, signature=sig)


def _send(store, n: int, task_id: str, sender: str, type_: str, payload: dict, evidence=()):
    """Deliver one envelope from ``sender`` about ``task_id`` through the runtime (and the student's table)."""
    from ...envelope import build_envelope
    from ...runtime import deliver

    t = store.get_task(task_id)
    env = build_envelope(message_id=f"X-{n}", trace_id=store.task_trace(task_id), task_id=task_id, sender=sender,
                         recipient="manager", type=type_, payload={**payload, "expected_state_version": t.state_version},
                         idempotency_key=f"judge:{type_}:{task_id}:{n}", created_at=store.time_at(store.tick + 1),
                         evidence_refs=tuple(evidence))
    return deliver(store, env)


def cancel_in_run(sub: Path, args: dict) -> Judged:
    """Cancels and reviews delivered to a live run with the student's machine: a worker's cancel of
    its running task is refused and a manager's accepted; on a frozen task the manager's own
    review_decision (to ready, to canceled) is refused and a reviewer's is accepted."""
    from ...errors import ProtolabError
    from ...live import LiveRun
    from ...plugins import Plugins
    from ...runtime import review
    from ...scenario import load_scenario

    rb, bad = _gate(sub)
    if bad:
        return bad
    checks = []
    # Each cancel on a run of its own, stopped once T-1 is running (so one accepted cancel cannot
    # hide the other).
    for n, sender, prop in ((1, "researcher", "workers do not cancel"), (2, "manager", "the manager cancels running work")):
        live = LiveRun(load_scenario("publish-report"), plugins=Plugins(machine=sub / _FILE))
        try:
            while not live.store.deliveries_of("M-2"):
                if live.step() is None:
                    break
            t = live.store.get_task("T-1")
            if t is None or t.state.value != "running":
                return failed("with your machine T-1 never reached running in publish-report (is ready -> running allowed "
                              "to the workers?)", reproduce=_repro("publish-report", [], "protolab messages --db {db}"))
            out = _send(live.store, n, "T-1", sender, "cancel", {"reason": "judge"})
            if sender == "researcher":
                checks.append((prop, out.decision != "accepted", "a researcher's cancel of its own running task was accepted: "
                                                                 "workers do not cancel work"))
            else:
                checks.append((prop, out.decision == "accepted" and out.state == "canceled",
                               f"the manager's cancel of running T-1 was {out.decision}: {out.reason}"))
        finally:
            live.close()
    for n, decision in ((3, "ready"), (4, "canceled")):
        live = LiveRun(load_scenario("publish-report"), faults=["conflicting-digest"], plugins=Plugins(machine=sub / _FILE))
        try:
            live.run_to_end()
            frozen = [t["task_id"] for t in live.store.tasks() if t["state"] == "needs_review"]
            if not frozen:
                checks.append(("a conflict freezes", False, "a conflicting digest did not freeze any task with your machine"))
                break
            tid = frozen[0]
            evidence = _evidence(live.store, tid)
            out = _send(live.store, n, tid, "manager", "review_decision", {"decision": decision}, evidence)
            checks.append(("a frozen task is the reviewer's", out.decision != "accepted",
                           f"the manager's own review_decision moved frozen {tid} to {decision}: only a reviewer decides a frozen task"))
            if live.store.get_task(tid).state.value != "needs_review":
                continue  # the manager's decision went through: that is the failure to report
            try:
                out = review(live.store, tid, decision, by="reviewer", evidence=evidence)
                checks.append(("a reviewer decides", out.decision == "accepted",
                               f"the reviewer's decision ({decision}) on {tid} was {out.decision}: {out.reason}"))
            except ProtolabError as e:
                checks.append(("a reviewer decides", False, f"the reviewer could not decide {tid} ({decision}): {e.code}: {e.message}"))
        finally:
            live.close()
    return _score(checks, "cancels and reviews delivered to a run", _show(rb, " --fault conflicting-digest"))
