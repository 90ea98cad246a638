"""Judges of exercise 4, the transition table: the student's ``machine.toml`` is parsed by the
engine's own parser, judged by the properties the seed asks of a task state machine (a conflict
can freeze any task and only the runtime freezes; only a reviewer leaves needs_review; every
unfinished task can be canceled, by a manager or a reviewer; the retry path leads back to ready),
and then loaded into the simulator and run under the fault matrix, where intake must accept the
moves the story needs and refuse the ones it must not.
"""

from __future__ import annotations

from pathlib import Path

from . import Judged, failed, partial, passed

_FILE = "machine.toml"
_WORKERS = frozenset({"researcher", "writer"})
_REPRO = "protolab run {sc}--machine {{dir}}/machine.toml{faults} --db ex4.db && protolab check --db ex4.db"


def _load(sub: Path):
    """``(RuleBook, None)`` or ``(None, what is wrong)``."""
    from ...errors import ProtolabError
    from ...machine import load_rulebook

    try:
        return load_rulebook(sub / _FILE), None
    except ProtolabError as e:
        return None, f"{e.code}: {e.message}"


def _roles(rb, a: str, b: str) -> frozenset[str]:
    from ...machine import TaskState

    r = rb.find(TaskState(a), TaskState(b))
    return frozenset(r.roles) if r is not None else frozenset()


def _score(checks: list[tuple[str, bool, str]], what: str) -> Judged:
    """``checks`` are (property, ok, what is wrong); a property holds only if all its checks do,
    and the score is the share of properties that hold (one forbidden role costs its property)."""
    props = list(dict.fromkeys(p for p, _ok, _m in checks))
    bad = [m for _p, ok, m in checks if not ok]
    broken = [p for p in props if any(not ok for q, ok, _m in checks if q == p)]
    if not broken:
        return passed(f"all {len(props)} properties of {what} hold ({len(checks)} checks)")
    more = f" (+{len(bad) - 2} more)" if len(bad) > 2 else ""
    return partial((len(props) - len(broken)) / len(props),
                   f"{len(broken)} of {len(props)} properties fail ({', '.join(broken)}): " + "; ".join(bad[:2]) + more,
                   witness={"failing": bad}, reproduce="protolab machine check {dir}/machine.toml")


def _gate(sub: Path):
    rb, err = _load(sub)
    if rb is None:
        return None, failed(f"machine.toml does not load: {err}", reproduce="protolab machine check {dir}/machine.toml")
    return rb, None


def loads(sub: Path, args: dict) -> Judged:
    """The file parses under the engine's rules and names a version of its own."""
    rb, bad = _gate(sub)
    if bad:
        return bad
    if rb.version == "task-v1":
        return failed("the version is task-v1, the shipped machine's name: a different table needs a different "
                      "version, or a store would take two different tables for one")
    return passed(f"{rb.version}: {len(rb.rules)} moves")


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
        checks.append(("only the runtime freezes", roles <= {"runtime"}, f"{s.value} -> needs_review is allowed to {', '.join(sorted(roles - {'runtime'}))}: "
                                             "only the runtime detects a conflict; an agent that may freeze tasks can stall any of them"))
    for to in ("ready", "canceled"):
        roles = _roles(rb, "needs_review", to)
        checks.append(("a reviewer decides", "reviewer" in roles, f"needs_review -> {to} is not allowed to a reviewer"))
    leaving = [r for r in rb.rules if r.from_state == TaskState.NEEDS_REVIEW]
    for r in leaving:
        checks.append(("only a reviewer releases", set(r.roles) <= {"reviewer"}, f"needs_review -> {r.to_state.value} is allowed to "
                       f"{', '.join(sorted(set(r.roles) - {'reviewer'}))}: a frozen task is released only by a reviewer"))
        checks.append(("released only to ready or canceled", r.to_state.value in ("ready", "canceled"),
                       f"needs_review -> {r.to_state.value}: a reviewer sends a frozen task to ready (run it again) or canceled"))
    return _score(checks, "freezing and review")


def cancel_and_retry(sub: Path, args: dict) -> Judged:
    """Every unfinished task can be canceled by a manager or a reviewer (a frozen one by a reviewer
    only), workers cannot cancel; the retry path runs running -> retry_wait -> ready; the happy path
    is made by the roles that own it."""
    rb, bad = _gate(sub)
    if bad:
        return bad
    checks = []
    for s in _nonterminal():
        roles = _roles(rb, s, "canceled")
        if s == "needs_review":
            continue  # judged with the review rules
        checks.append(("every unfinished task can be canceled", bool(roles & {"manager", "reviewer"}), f"{s} -> canceled is missing: a {s} task cannot be stopped"))
        checks.append(("workers do not cancel", not roles & _WORKERS, f"{s} -> canceled is allowed to {', '.join(sorted(roles & _WORKERS))}: "
                                             "a worker does not decide that work is no longer wanted"))
    retry = _roles(rb, "running", "retry_wait")
    checks.append(("the retry path", "runtime" in retry, "running -> retry_wait is not allowed to the runtime, so a crashed worker's "
                                       "expired lease leaves its task running forever"))
    checks.append(("the retry path", bool(retry & _WORKERS), "running -> retry_wait is not allowed to the workers, so a transient failure "
                                           "cannot ask for another attempt"))
    checks.append(("the retry path", "manager" in _roles(rb, "retry_wait", "ready"), "retry_wait -> ready is not allowed to the manager: "
                                                                    "the retry path dead-ends in retry_wait"))
    for a, b, who, why in [
        ("pending", "ready", {"manager"}, "only the manager assigns work"),
        ("ready", "running", _WORKERS, "the workers start tasks"),
        ("running", "succeeded", _WORKERS, "results come from the worker holding the lease"),
        ("running", "failed", _WORKERS, "results come from the worker holding the lease"),
        ("waiting_human", "ready", {"reviewer"}, "a person answers a waiting task"),
    ]:
        roles = _roles(rb, a, b)
        checks.append(("each move by its owner", roles == who, f"{a} -> {b} is allowed to {', '.join(sorted(roles)) or 'nobody'}; "
                                     f"expected {', '.join(sorted(who))} ({why})"))
    return _score(checks, "cancel, retry and the happy path")


# ------------------------------------------------------------------------------------- runs


def _run(sub: Path, scenario: str, faults: list[str]):
    from ...plugins import Plugins
    from ...runner import run_scenario
    from ...scenario import load_scenario

    return run_scenario(load_scenario(scenario), faults=list(faults), plugins=Plugins(machine=sub / _FILE),
                        strict_faults=False)


def _states(store) -> dict[str, str]:
    return {t["task_id"]: t["state"] for t in store.tasks()}


def _review_all(store) -> list[str]:
    """Release every frozen task as a reviewer, citing the payloads kept under its key."""
    from ...errors import ProtolabError
    from ...runtime import review

    problems = []
    for t in store.tasks():
        if t["state"] != "needs_review":
            continue
        evidence = [i["message_id"] for i in store.intents_of_task(t["task_id"]) if not i["trusted"]][:2]
        try:
            out = review(store, t["task_id"], "canceled", by="reviewer", evidence=evidence or ["M-1"])
        except ProtolabError as e:
            problems.append(f"the reviewer could not decide {t['task_id']}: {e.code}: {e.message}")
            continue
        if out.decision != "accepted":
            problems.append(f"the reviewer's decision on {t['task_id']} was {out.decision}: {out.reason}")
    return problems


def _one(sub: Path, scenario: str, faults: list[str]) -> str | None:
    """None when the run with the student's machine holds every invariant and ends as under task-v1."""
    from ...invariants import check
    from ...runner import run_scenario
    from ...scenario import load_scenario

    label = f"{scenario} with {' + '.join(faults) or 'no faults'}"
    store = _run(sub, scenario, faults)
    ref = run_scenario(load_scenario(scenario), faults=list(faults))
    try:
        broken = [r for r in check(store) if not r.ok]
        if broken:
            w = broken[0].witnesses[0] if broken[0].witnesses else {}
            return f"{label}: {broken[0].name} broke ({', '.join(f'{k}={w[k]}' for k in ('task_id', 'message_id', 'problem') if w.get(k))})"
        got, want = _states(store), _states(ref)
        if got != want:
            refused = [d for d in store.deliveries() if d["code"] == "E_TRANSITION_NOT_ALLOWED"]
            why = f"; intake refused {refused[0]['message_id']} ({refused[0]['type']}): {refused[0]['reason']}" if refused else ""
            diff = ", ".join(f"{t} {got.get(t, 'never created')} (expected {s})" for t, s in sorted(want.items()) if got.get(t) != s)
            return f"{label}: the story did not end as it should: {diff}{why}"
        if "conflicting-digest" in faults:
            problems = _review_all(store)
            if problems:
                return f"{label}: {problems[0]}"
        return None
    finally:
        store.close()
        ref.close()


def fault_runs(sub: Path, args: dict) -> Judged:
    """The machine loaded into the simulator under each fault (on each scenario): every invariant
    holds, the story ends as under the shipped machine, and a frozen task can be decided by a reviewer."""
    rb, bad = _gate(sub)
    if bad:
        return bad
    runs = [(sc, list(f)) for sc in args.get("scenarios", ["publish-report"]) for f in args["faults"]]
    failures = [(sc, f, msg) for sc, f in runs if (msg := _one(sub, sc, f)) is not None]
    if not failures:
        return passed(f"all {len(runs)} runs with your machine hold every invariant and end as they should")
    sc, f, msg = failures[0]
    more = f" ({len(failures) - 1} more run(s) failed)" if len(failures) > 1 else ""
    return partial((len(runs) - len(failures)) / len(runs), msg + more,
                   reproduce=_REPRO.format(sc="" if sc == "publish-report" else f"{sc} ",
                                           faults="".join(f" --fault {x}" for x in f)))


def cancel_in_run(sub: Path, args: dict) -> Judged:
    """Cancels delivered to a live run with the student's machine: a manager's cancel of a running
    task is accepted; a worker's is refused; a manager's cancel of a frozen task is refused and a
    reviewer's decision is what releases it."""
    from ...envelope import build_envelope
    from ...runtime import deliver, review
    from ...errors import ProtolabError

    rb, bad = _gate(sub)
    if bad:
        return bad
    checks = []

    def cancel(store, task_id: str, sender: str, n: int):
        t = store.get_task(task_id)
        env = build_envelope(message_id=f"X-{n}", trace_id=store.task_trace(task_id), task_id=task_id, sender=sender,
                             recipient="manager", type="cancel", payload={"reason": "judge", "expected_state_version": t.state_version},
                             idempotency_key=f"judge:cancel:{task_id}:{n}", created_at=store.time_at(store.tick + 1))
        return deliver(store, env)

    from ...live import LiveRun
    from ...plugins import Plugins
    from ...scenario import load_scenario

    live = LiveRun(load_scenario("publish-report"), plugins=Plugins(machine=sub / _FILE))
    try:
        while not live.store.deliveries_of("M-2"):
            if live.step() is None:
                break
        t = live.store.get_task("T-1")
        if t is None or t.state.value != "running":
            return failed("with your machine T-1 never reached running in publish-report (is ready -> running allowed "
                          "to the workers?)", reproduce=_REPRO.format(sc="", faults=""))
        out = cancel(live.store, "T-1", "researcher", 1)
        checks.append(("workers do not cancel", out.decision != "accepted", "a researcher's cancel of its own running task was accepted: workers "
                                                   "do not cancel work"))
        out = cancel(live.store, "T-1", "manager", 2)
        checks.append(("the manager cancels running work", out.decision == "accepted" and out.state == "canceled",
                       f"the manager's cancel of running T-1 was {out.decision}: {out.reason}"))
    finally:
        live.close()
    live = LiveRun(load_scenario("publish-report"), faults=["conflicting-digest"], plugins=Plugins(machine=sub / _FILE))
    try:
        live.run_to_end()
        frozen = [t["task_id"] for t in live.store.tasks() if t["state"] == "needs_review"]
        if not frozen:
            checks.append(("a conflict freezes", False, "a conflicting digest did not freeze any task with your machine"))
        else:
            tid = frozen[0]
            out = cancel(live.store, tid, "manager", 3)
            checks.append(("a frozen task is the reviewer's", out.decision != "accepted", f"the manager's cancel of frozen {tid} was accepted: a frozen task "
                                                       "is decided by a reviewer citing evidence, not by the manager"))
            evidence = [i["message_id"] for i in live.store.intents_of_task(tid) if not i["trusted"]][:2]
            t = live.store.get_task(tid)
            env = build_envelope(message_id="X-4", trace_id=live.store.task_trace(tid), task_id=tid, sender="manager",
                                 recipient="manager", type="review_decision",
                                 payload={"decision": "ready", "expected_state_version": t.state_version},
                                 idempotency_key=f"judge:review:{tid}", created_at=live.store.time_at(live.store.tick + 1),
                                 evidence_refs=evidence)
            out = deliver(live.store, env)
            checks.append(("a frozen task is the reviewer's", out.decision != "accepted",
                           f"the manager's own review_decision released frozen {tid}: only a reviewer may"))
            try:
                if live.store.get_task(tid).state.value != "needs_review":
                    raise ProtolabError(f"{tid} had already left needs_review", code="E_NOT_IN_REVIEW")
                out = review(live.store, tid, "ready", by="reviewer", evidence=evidence)
                checks.append(("a reviewer releases", out.decision == "accepted", f"the reviewer's release of {tid} was {out.decision}: {out.reason}"))
            except ProtolabError as e:
                checks.append(("a reviewer releases", False, f"the reviewer could not release {tid}: {e.code}: {e.message}"))
    finally:
        live.close()
    return _score(checks, "cancels and reviews delivered to a run")
