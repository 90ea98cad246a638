"""Judges of exercise 5, exactly-once publication: the student's effect-commit rule
(``effect_key(result, delivery_id)``, running in its own host processes) is plugged into the
runtime and judged by the effects table, the EFFECT_AT_MOST_ONCE invariant and a redelivery of the
whole message log, and probed directly on made-up results; never by comparing keys with a model
answer.

One test per rule of the seed (message-protocols-and-shared-state: "when replaying a message, how
will you prove that publication cannot run twice?"; "repeated execution: check for ... a
side-effect commit record"; "a duplicate is not a conflict ... a new key for a terminal task ...
if it would alter a validated business side effect, send it through reconciliation"), each all
or nothing:

* ``at_most_once``: an effect commits at most once however its result comes back (delivered
  again, resent under a new message id, sent by a worker that crashed and was restarted, or the
  whole log delivered again), also under the naive consumer, which re-executes every delivery;
* ``none_lost``: different effects all commit (another target, another task, another kind);
* ``key_names_the_effect``: the key is a function of the effect alone: the same in every process,
  whatever the delivery, the message, the attempt or the payload that carries it.

The student's module runs in two host processes with their own hash seeds, A and B
(:mod:`sim.course.remote`), and each key is computed where this module says, on purpose: in a run,
a result of a task's first attempt is keyed in process A and a later attempt's (the restarted
side, after a crash or a retry) in process B; a redelivery of the whole log (a replay) keys every
result in process B. The probes key every made-up result once in *each* process, so that a key made
with ``hash()``, a counter or a random salt is seen for what it is, and a too-coarse key is not
excused by one.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from . import A, B, Broke, Judged, grid_row, per_submission, rerun_line, rule, try_line

_FILE = "effects.py"

SYMPTOMS = {
    "commits-on-redelivery": "the very same result message, delivered again, committed its effect again",
    "commits-on-resend": "a resend of the result (same intent, new message id) committed the effect again",
    "commits-per-attempt": "two attempts of one task (a crashed worker's stale one and the restarted one) each "
                           "committed the one effect they both ask for",
    "commits-on-replay": "delivering the whole message log again committed an effect again",
    "key-differs-between-processes": "the very same result keyed in two processes got two keys (hash(), id(), a "
                                     "salt: a key that is not the same in every process)",
    "key-differs-between-calls": "the very same result keyed twice in one process got two keys (a counter, the "
                                 "clock or randomness in the key)",
    "key-follows-delivery": "another delivery of the same result got another key (the delivery id is in the key)",
    "key-follows-message": "a resend of the same result (new message id and time) got another key",
    "key-follows-attempt": "another attempt's result for the same effect (new idempotency key, payload, lease) got "
                           "another key",
    "key-follows-worker": "the same effect reported by another worker got another key",
    "effect-lost-target": "two publications of one task to two targets shared a key: the second was suppressed",
    "effect-lost-task": "two tasks' publications to one target shared a key: the second was suppressed",
    "effect-lost-kind": "two kinds of effect of one task and target shared a key: the second was suppressed",
    "effect-lost-in-run": "a run committed fewer different effects than it asked for",
    "no-key": "a publishing result got no key (None): its effect never commits",
    "search-run-idle": "the search's story, in the order a run delivers it, did not commit the effects the runtime's own "
                       "rule commits (nothing got committed, so no order could commit anything twice)",
    "rule-fails": "the rule raised, or returned something that is not a non-empty string or None",
}

# ------------------------------------------------------------------------------------------ the rule


def _rule(sub: Path):
    """``(call, host)``: the student's ``effect_key`` in its host processes (kept for the submission)."""
    from ..remote import remote_callable

    return remote_callable(sub / _FILE, "effect_key", "effect rule")


def _answer(call, result, delivery: int, process: int = A):
    """``("key", k)``, ``("none", None)`` or ``("bad", what)`` for one call of the student's rule in
    host ``process``."""
    from ...errors import ProtolabError

    try:
        k = call(result, delivery, process=process)
    except ProtolabError as e:  # RemoteError: the student's code raised (or its host is gone)
        return "bad", f"raised: {e.message}"
    if k is None:
        return "none", None
    if not isinstance(k, str) or not k:
        return "bad", f"returned {_show(k)}, not a non-empty string or None"
    return "key", k


def _show(v, limit: int = 60) -> str:
    text = repr(v)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _in_each_process(call, host, inputs: list[tuple]) -> list[list[tuple]]:
    """``out[p][i]``: input i's answer in process p (each input asked of every host process, one
    after another)."""
    n = max(1, len(getattr(host, "hosts", ())) or 1)
    out: list[list[tuple]] = [[] for _ in range(n)]
    for result, delivery in inputs:
        for p in range(n):
            out[p].append(_answer(call, result, delivery, p))
    return out


def _attempt_of(result) -> int:
    """The attempt (lease) a result reports: 1 when it says none."""
    lease = (getattr(result, "payload", None) or {}).get("lease_version", 1)
    return lease if isinstance(lease, int) and not isinstance(lease, bool) else 1


def _placed(call, replay: bool = False):
    """The student's rule as a run calls it: a result of a task's first attempt keyed in process A,
    a later attempt's (the restarted side) in process B; with ``replay``, every result in process B
    (the whole log delivered again, as a fresh process replays it)."""
    if call is None:
        return None

    def effect_key(result, delivery_id):
        return call(result, delivery_id, process=B if replay or _attempt_of(result) > 1 else A)

    return effect_key


# ------------------------------------------------------------------------------------------ made-up results


def _result(task_id: str = "T-2", target: str = "R-1", kind: str = "publish", mid: str = "M-6",
            key: str = "R-1:T-2:attempt-1", summary: str = "3 item(s)", sender: str = "writer", lease: int = 1,
            at: str = "2026-07-13T04:00:12Z", artifact: str = "ab", refs: tuple = ("M-3",)):
    from ...envelope import build_envelope

    return build_envelope(
        message_id=mid, trace_id="R-1", task_id=task_id, sender=sender, recipient="manager", type="task_result",
        payload={"status": "succeeded", "lease_version": lease, "artifact": "sha256:" + artifact * 32,
                 "summary": summary, "effect": {"kind": kind, "target": target}},
        idempotency_key=key, created_at=at, evidence_refs=refs,
    )


_BASE = (lambda: _result(), 7)

#: Results that ask for the SAME effect as the base (publish R-1 for T-2), each with what differs.
#: name -> (what, builder, delivery id, symptom)
SAME_EFFECT = {
    "another-delivery": ("the same result delivered again (another delivery id)", lambda: _result(), 8,
                         "key-follows-delivery"),
    "a-replayed-delivery": ("the same result delivered again when the log is replayed (delivery 1031)",
                            lambda: _result(), 1031, "key-follows-delivery"),
    "a-resend": ("a resend of the result (new message id and time, same idempotency key and payload)",
                 lambda: _result(mid="M-9", at="2026-07-13T04:00:15Z"), 11, "key-follows-message"),
    "a-later-attempt": ("the restarted attempt's result (attempt 2: new message, idempotency key, lease and draft)",
                        lambda: _result(mid="M-12", key="R-1:T-2:attempt-2", summary="4 item(s)", lease=2,
                                        artifact="cd", at="2026-07-13T04:00:20Z"), 15, "key-follows-attempt"),
    "a-stale-attempt": ("a crashed worker's stale attempt-1 result arriving after attempt 2's (another draft)",
                        lambda: _result(mid="M-8", summary="2 item(s)", artifact="ef", at="2026-07-13T04:00:21Z"),
                        16, "key-follows-attempt"),
    "a-third-attempt-citing-more": ("attempt 3's result citing other evidence",
                                    lambda: _result(mid="M-20", key="R-1:T-2:attempt-3", lease=3, artifact="0f",
                                                    refs=("M-3", "M-11"), at="2026-07-13T04:00:40Z"), 23,
                                    "key-follows-attempt"),
    "another-worker": ("the same publication reported by another worker the task was reassigned to",
                       lambda: _result(mid="M-14", sender="writer-2", key="R-1:T-2:attempt-2", lease=2,
                                       at="2026-07-13T04:00:30Z"), 19, "key-follows-worker"),
}

#: Results that ask for ANOTHER effect than the base, each as it would really arrive (its own
#: message, delivery and, for another attempt or task, its own idempotency key and draft):
#: name -> (what, builder, delivery id, symptom).
OTHER_EFFECT = {
    "another-target": ("T-2's attempt 2 publishing to another target (R-2)",
                       lambda: _result(target="R-2", mid="M-12", key="R-1:T-2:attempt-2", lease=2, artifact="cd",
                                       summary="4 item(s)"), 15, "effect-lost-target"),
    "a-longer-target": ("T-2's attempt 2 publishing to R-1-summary",
                        lambda: _result(target="R-1-summary", mid="M-12", key="R-1:T-2:attempt-2", lease=2,
                                        artifact="cd", summary="4 item(s)"), 15, "effect-lost-target"),
    "another-task": ("another task (T-3) publishing to the same target R-1",
                     lambda: _result(task_id="T-3", mid="M-10", key="R-1:T-3:attempt-1", artifact="12",
                                     summary="1 item(s)"), 12, "effect-lost-task"),
    "another-kind": ("another kind of effect (notify) that T-2's attempt 2 asks for on R-1",
                     lambda: _result(kind="notify", mid="M-12", key="R-1:T-2:attempt-2", lease=2, artifact="cd",
                                     summary="4 item(s)"), 15, "effect-lost-kind"),
    "another-task-and-target": ("T-3 publishing to R-1-summary",
                                lambda: _result(task_id="T-3", target="R-1-summary", mid="M-10",
                                                key="R-1:T-3:attempt-1", artifact="12", summary="1 item(s)"), 12,
                                "effect-lost-task"),
}


def _probe_same(call, host, names) -> tuple[int, list[Broke], list]:
    """The base result twice in every process, and each SAME_EFFECT variant beside it in every
    process: one key for all of them. Returns (cases checked, what broke, every answer)."""
    names = [n for n in names if n in SAME_EFFECT]
    base_in = (_BASE[0](), _BASE[1])
    inputs = [base_in, base_in] + [(SAME_EFFECT[n][1](), SAME_EFFECT[n][2]) for n in names]
    got = _in_each_process(call, host, inputs)
    broke: list[Broke] = []
    n_cases = 2 + len(names)
    base = [got[p][0] for p in range(len(got))]
    repro = _REPRO_CALL
    for kind, v in base + [got[p][1] for p in range(len(got))]:
        if kind != "key":
            what = ("it got no key (None), so its publication would never be committed" if kind == "none"
                    else f"the rule {v}")
            broke.append(Broke("a publishing result of T-2 to R-1", what,
                               symptoms=("no-key",) if kind == "none" else ("rule-fails",), reproduce=repro))
            return n_cases, broke, got
    # the same result twice in one process, and once in each process
    twice = [(got[p][0][1], got[p][1][1]) for p in range(len(got))]
    if any(a != b for a, b in twice):
        a, b = next(t for t in twice if t[0] != t[1])
        broke.append(Broke("the same result keyed twice in one process",
                           f"it got two keys ({_show(a, 40)} and {_show(b, 40)}): a key that changes from call to call "
                           "(a counter, the clock, randomness) names no effect, and every repeat commits again",
                           symptoms=("key-differs-between-calls",), reproduce=_repro_call("again")))
        return n_cases, broke, got  # every other comparison would say the same
    keys = [v for _k, v in base]
    if len(set(keys)) > 1:
        broke.append(Broke("the same result keyed in each process",
                           f"keying the very same result in two processes gave two keys ({_show(keys[0], 40)} and "
                           f"{_show(keys[1], 40)}): a key that is not the same in every process cannot recognise the "
                           "effect when a restarted worker, another replica or a replay computes it again",
                           symptoms=("key-differs-between-processes",), reproduce=_REPRO_TWICE))
    for i, n in enumerate(names, 2):
        what_is, _b, _d, sym = SAME_EFFECT[n]
        for p in range(len(got)):
            kind, v = got[p][i]
            if (kind, v) != base[p]:
                shown = f"the key {_show(v, 40)}" if kind == "key" else ("no key" if kind == "none" else f"an error ({v})")
                broke.append(Broke(what_is, f"it asks for the same publication (publish R-1 for T-2) and got {shown}, "
                                            f"not {_show(base[p][1], 40)}: the effect would be committed again",
                                   symptoms=(sym,), reproduce=_repro_call(n)))
                break
    return n_cases, broke, got


def _probe_other(call, host, names) -> tuple[int, list[Broke], list]:
    """Each OTHER_EFFECT variant beside the base, in every process: another key in each."""
    names = [n for n in names if n in OTHER_EFFECT]
    inputs = [(_BASE[0](), _BASE[1])] + [(OTHER_EFFECT[n][1](), OTHER_EFFECT[n][2]) for n in names]
    got = _in_each_process(call, host, inputs)
    broke: list[Broke] = []
    base = [got[p][0] for p in range(len(got))]
    if any(k != "key" for k, _v in base):
        kind, v = next(x for x in base if x[0] != "key")
        what = ("it got no key (None): its publication is never committed" if kind == "none" else f"the rule {v}")
        broke.append(Broke("a publishing result of T-2 to R-1", what,
                           symptoms=("no-key",) if kind == "none" else ("rule-fails",), reproduce=_REPRO_CALL))
        return 1 + len(names), broke, got
    for i, n in enumerate(names, 1):
        what_is, _b, _d, sym = OTHER_EFFECT[n]
        for p in range(len(got)):
            kind, v = got[p][i]
            if kind == "key" and v == base[p][1]:
                broke.append(Broke(what_is, f"it is another effect than T-2's publication to R-1, yet both got the key "
                                            f"{_show(v, 40)}: whichever commits second is suppressed as a repeat and "
                                            "never happens", symptoms=(sym,), reproduce=_repro_call(n)))
                break
            if kind != "key":
                broke.append(Broke(what_is, "it got no key (None): that effect is never committed" if kind == "none"
                                   else f"the rule {v}", symptoms=("no-key",) if kind == "none" else ("rule-fails",),
                                   reproduce=_repro_call(n)))
                break
    return 1 + len(names), broke, got


def show(effect_key, *names: str) -> None:
    """Print what ``effect_key`` gives the made-up results the probes use: the base result (T-2's
    publication to R-1, delivery 7) and each named case of :data:`SAME_EFFECT` or :data:`OTHER_EFFECT`
    beside it, then what the rule asks of each pair, exiting 1 when a pair breaks it. What the reproduce
    lines of exercise 5 run (``protolab exercise try 5 DIR -c "import effects; from
    sim.course.judges.effects import show; show(effects.effect_key, 'a-resend')"``): the two keys side by
    side, not one key twice."""
    import sys

    base = _BASE[0]()
    key = effect_key(base, _BASE[1])
    print(f"the result: T-2 publishes to R-1 ({base.message_id}, delivery {_BASE[1]}) -> {key!r}")
    broken = key is None or not isinstance(key, str) or not key
    if broken:
        print("  a publishing result must get a key (a non-empty string): without one its effect never commits")
    for n in names:
        same = n in SAME_EFFECT
        if n == "again":
            what, build, delivery = "the very same result keyed again", _BASE[0], _BASE[1]
            same = True
        else:
            what, build, delivery, _sym = SAME_EFFECT[n] if same else OTHER_EFFECT[n]
        r = build()
        other = effect_key(r, delivery)
        print(f"{n}: {what} ({r.message_id}, delivery {delivery}) -> {other!r}")
        if same:
            print(f"  the same effect: the two keys must be equal; they are {'equal' if other == key else 'NOT equal'}")
            broken = broken or other != key
        else:
            print(f"  another effect: the two keys must differ; they {'differ' if other != key else 'are EQUAL'}")
            broken = broken or other == key or other is None
    if broken:
        sys.exit(1)  # the reproduce line's exit status says it showed the failure


def _repro_call(*names: str) -> str:
    """The reproduce line of a probe: the base result's key beside each named case's."""
    args = "".join(f", {n!r}" for n in names)
    return try_line(5, f"import effects; from sim.course.judges.effects import show; show(effects.effect_key{args})")


#: Two processes keying one made-up result (``protolab run`` keys every result in one process).
_REPRO_TWICE = try_line(5, "import effects; from sim.course.judges.effects import show; show(effects.effect_key)",
                        processes=2)
_REPRO_CALL = _repro_call()

# ------------------------------------------------------------------------------------------ runs


def _two_reports(same_target: bool = False):
    """One fact table, two reports from two tasks: to two targets, or (``same_target``) both to R-1."""
    from ...scenario import parse_scenario

    second = "R-1" if same_target else "R-1-summary"
    return parse_scenario({
        "name": "same-target" if same_target else "two-reports", "workers": ["researcher", "writer"], "trace": "R-1",
        "description": "one fact table, two publications" + (" to one target" if same_target else " to two targets"),
        "task": [
            {"id": "T-1", "goal": "collect evidence", "worker": "researcher"},
            {"id": "T-2", "goal": "draft the report", "worker": "writer", "kind": "draft", "after": ["T-1"], "publish": "R-1"},
            {"id": "T-3", "goal": "draft the summary", "worker": "writer", "kind": "draft", "after": ["T-1"],
             "publish": second},
        ],
    }, source="exercise 5")


def _scenario(name: str):
    if name == "two-reports":
        return _two_reports()
    if name == "same-target":
        return _two_reports(same_target=True)
    from ...scenario import load_scenario

    return load_scenario(name)


def _policy(base: str, rule_fn, *, replay: bool = False):
    """The consumer ``base`` with the student's rule (``rule_fn``, placed by :func:`_placed`), or with
    the runtime's own rule when ``rule_fn`` is None."""
    from ...policy import NAIVE, SAFE

    pol = NAIVE if base == "naive" else SAFE
    return replace(pol, effect_rule=_placed(rule_fn, replay)) if rule_fn is not None else \
        replace(pol, idempotent_effects=True)


@dataclass(frozen=True)
class _Outcome:
    """What one run under the student's rule did to effects (all a judge or behaviour() reads)."""

    error: str | None  # the run could not finish: the rule raised or returned a wrong value
    commits: tuple  # ((kind, target, task), message_id, idempotency_key, effect_key) per committed effect
    suppressed: int  # effect_suppressed events
    again: tuple  # effect keys committed again by a redelivery of the whole log (naive consumer)
    at_most_once: bool  # no effect committed twice (what EFFECT_AT_MOST_ONCE checks of these runs)

    def effects(self) -> Counter:
        return Counter(c[0] for c in self.commits)


_RUNS: dict = per_submission({})  # (file, content hash, scenario, policy, faults, seed) -> _Outcome; bounded
_RUNS_MAX = 512
_EXPECTED: dict = {}  # (scenario, policy, faults, seed) -> the set of effects a right key commits


def _digest_of(path: Path) -> str:
    """A digest of every Python file in the submission's folder (the rule may import a helper)."""
    h = hashlib.sha256()
    try:
        for p in sorted(path.parent.glob("*.py")):
            h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    except OSError:
        return ""
    return h.hexdigest()


def _run(sub: Path, call, case: dict) -> _Outcome:
    from ...errors import ProtolabError
    from ...replay import redeliver
    from ... import events as ev_
    from ...runner import run_scenario

    path = (sub / _FILE).resolve()
    sc, pol, faults, seed = _case(case)
    key = (str(path), _digest_of(path), sc, pol, tuple(faults), seed)
    if key in _RUNS:
        return _RUNS[key]
    policy = _policy(pol, call)
    try:
        store = run_scenario(_scenario(sc), policy=policy, faults=faults, seed=seed, strict_faults=False)
    except ProtolabError as e:
        out = _Outcome(e.message, (), 0, (), True)
    else:
        try:
            msgs = {m["message_id"]: m for m in store.messages()}
            commits = tuple(((e["kind"], e["target"], e["task_id"]), e["message_id"],
                             msgs.get(e["message_id"], {}).get("idempotency_key", ""), e["effect_key"])
                            for e in store.effects())
            suppressed = store.count_events(etype=ev_.EffectSuppressed.TYPE)
            again, err = (), None
            if pol == "naive":  # the safe consumer takes a redelivered result as a duplicate: no effect rule runs
                try:
                    again = tuple(redeliver(store, policy=_policy(pol, call, replay=True))["effects_committed_again"])
                except ProtolabError as e:
                    err = f"delivering the log again: {e.message}"
            out = _Outcome(err, commits, suppressed, again, len({c[0] for c in commits}) == len(commits))
        finally:
            store.close()
    if len(_RUNS) >= _RUNS_MAX:
        _RUNS.pop(next(iter(_RUNS)))
    _RUNS[key] = out
    return out


def _expected(case: dict) -> set:
    """The effects a run of ``case`` commits with keys that name effects (the runtime's own rule)."""
    from ...runner import run_scenario

    sc, pol, faults, seed = _case(case)
    k = (sc, pol, tuple(faults), seed)
    if k not in _EXPECTED:
        store = run_scenario(_scenario(sc), policy=_policy(pol, None), faults=faults, seed=seed, strict_faults=False)
        try:
            _EXPECTED[k] = {(e["kind"], e["target"], e["task_id"]) for e in store.effects()}
        finally:
            store.close()
    return set(_EXPECTED[k])


def _case(case) -> tuple[str, str, list[str], int]:
    """(scenario, policy, faults, seed) of one case of a test's ``cases`` (malformed: an InputError)."""
    from ...errors import InputError

    if not isinstance(case, dict):
        raise InputError(f"a case must be a table (scenario, policy, faults, seed), not {case!r}", code="E_EXERCISE_FILE")
    faults = case.get("faults", [])
    if isinstance(faults, str):
        faults = [faults]
    return (str(case.get("scenario", "publish-report")), str(case.get("policy", "naive")), [str(f) for f in faults],
            int(case.get("seed", 0)))


def _label(case: dict) -> str:
    sc, pol, faults, seed = _case(case)
    return f"{sc}, {pol} consumer, " + (" + ".join(faults) if faults else "no faults") + (f", seed {seed}" if seed else "")


def show_run(effect_key, scenario: str = "publish-report", policy: str = "naive", faults=(), seed: int = 0) -> None:
    """Play one case of exercise 5's runs with ``effect_key`` (in this process) and print the effects it
    committed beside the effects keys that name them commit, and what a redelivery of the whole log
    committed again; exit 1 when an effect committed twice, was lost, or committed again. The reproduce
    line of a run case (``show_run(effects.effect_key, "two-reports", "naive", ["duplicate:task_result"])``;
    two-reports and same-target are made up for the exercise: ``protolab run`` has no file of them)."""
    import sys

    from ...errors import ProtolabError
    from ...replay import redeliver
    from ...runner import run_scenario

    case = {"scenario": scenario, "policy": policy, "faults": list(faults), "seed": seed}
    want = _expected(case)
    pol = _policy(policy, effect_key)
    try:
        store = run_scenario(_scenario(scenario), policy=pol, faults=list(faults), seed=seed, strict_faults=False)
    except ProtolabError as e:
        print(f"the run stopped: {e.message}")
        sys.exit(1)
    try:
        got = Counter((e["kind"], e["target"], e["task_id"]) for e in store.effects())
        for e in store.effects():
            print(f"committed {e['kind']} {e['target']} for {e['task_id']} under the key {e['effect_key']!r} "
                  f"(delivery of {e['message_id']})")
        again = redeliver(store, policy=pol)["effects_committed_again"] if policy == "naive" else []
    finally:
        store.close()
    twice = sorted(k for k, n in got.items() if n > 1)
    lost = sorted(set(want) - set(got))
    for k in twice:
        print(f"  COMMITTED {got[k]} TIMES: {' '.join(k)}")
    for k in lost:
        print(f"  LOST: {k[0]} {k[1]} for {k[2]} was asked for and never committed")
    if again:
        print(f"  delivering the whole log again COMMITTED AGAIN: {', '.join(again)}")
    if twice or lost or again:
        sys.exit(1)
    print(f"every one of the {len(want)} effect(s) committed once")


def _repro(case: dict, *, lost: bool = False) -> str:
    """A run case's reproduce line: ``protolab run`` with the rule, then replay and check, for a shipped
    scenario; :func:`show_run` (effects committed, lost and committed again) for a lost effect, which no
    invariant names, and for the scenarios made up for the exercise."""
    sc, pol, faults, seed = _case(case)
    if lost or sc in ("two-reports", "same-target"):
        return try_line(5, f"import effects; from sim.course.judges.effects import show_run; show_run(effects.effect_key, "
                           f"{sc!r}, {pol!r}, {faults!r}, {seed})")
    sc_arg = "" if sc == "publish-report" else f"{sc} "
    db = "ex5.db" if sc == "publish-report" else f"ex5-{sc}.db"  # a database holds one scenario's runs
    f = "".join(f" --fault {x}" for x in faults)
    return (f"protolab run {sc_arg}--policy {pol} --effects {{dir}}/effects.py{f} --seed {seed} --db {db} && "
            f"protolab replay --db {db} --effects {{dir}}/effects.py && protolab check --db {db}")


def _cases(args: dict) -> list[dict]:
    """The test's cases: ``cases`` (tables), or the older form ``policies`` x ``faults``."""
    if "cases" in args:
        cases = args["cases"]
        if not isinstance(cases, list):
            from ...errors import InputError

            raise InputError("cases must be a list of tables", code="E_EXERCISE_FILE")
        return cases
    return [{"policy": p, "faults": list(f), "scenario": args.get("scenario", "publish-report")}
            for p in args.get("policies", ["naive"]) for f in args.get("faults", [[]])]


def _repeats(out: _Outcome) -> list[tuple]:
    """For each effect committed more than once: (effect, [(message_id, idempotency_key, effect_key)])."""
    by: dict = {}
    for eff, mid, ikey, ekey in out.commits:
        by.setdefault(eff, []).append((mid, ikey, ekey))
    return [(eff, rows) for eff, rows in by.items() if len(rows) > 1]


def _why_again(rows: list[tuple], faults: list[str]) -> tuple[str, str]:
    """(symptom, words) for one effect committed by ``rows`` (message, idempotency key, effect key)."""
    mids = [m for m, _i, _k in rows]
    ikeys = [i for _m, i, _k in rows]
    if len(set(mids)) < len(mids):
        return "commits-on-redelivery", f"the very same message {mids[0]} committed it again when delivered again"
    if len(set(ikeys)) < len(ikeys):
        return "commits-on-resend", (f"a resend of one result ({', '.join(mids)}: one idempotency key, new message "
                                     "ids) committed it again")
    if any(f.startswith("crash") for f in faults):
        return "commits-per-attempt", (f"after the worker crashed and was restarted, its stale attempt and the "
                                       f"restarted one ({', '.join(mids)}) each committed it")
    return "commits-per-attempt", f"two attempts' results ({', '.join(mids)}) each committed it"


# ------------------------------------------------------------------------------------------ the judges


def at_most_once(sub: Path, args: dict) -> Judged:
    """Rule: an effect commits at most once however its result comes back (redelivered, resent,
    from a worker that crashed and restarted, or the whole log replayed), even under the naive
    consumer, which re-executes every delivery. A run that commits no effect at all, where the
    runtime's own rule commits one, proves nothing of the rule and counts as breaking it."""
    call, host = _rule(sub)
    try:
        cases = _cases(args)
        broke: list[Broke] = []
        rows: list = []
        for case in cases:
            out = _run(sub, call, case)
            sc, pol, faults, seed = _case(case)
            label = _label(case)
            ok = True
            if out.error:
                ok = False
                broke.append(Broke(label, f"the run stopped: {out.error}", symptoms=("rule-fails",),
                                   reproduce=_repro(case), signature={"policy": pol, "faults": faults, "scenario": sc}))
            if not out.error and not out.commits and _expected(case):
                # nothing committed at all: "at most once" holds of nothing, so the case shows nothing
                # (an effect that never commits is none-lost's to name; here it only voids the case)
                ok = False
                broke.append(Broke(label, f"no effect was committed at all where the runtime's own rule commits "
                                          f"{len(_expected(case))}: an effect that never commits is never committed "
                                          "twice, so this run proves nothing about at most once (a key of None "
                                          "commits nothing)", symptoms=("no-key",), reproduce=_repro(case),
                                   signature={"policy": pol, "faults": faults, "scenario": sc, "problem": "nothing-committed"}))
            for eff, committed in _repeats(out):
                ok = False
                sym, words = _why_again(committed, faults)
                keys = ", ".join(dict.fromkeys(k for _m, _i, k in committed))
                broke.append(Broke(label, f"{eff[0]} {eff[1]} for {eff[2]} was committed {len(committed)} times: "
                                          f"{words}, under the keys {keys}", symptoms=(sym,), reproduce=_repro(case),
                                   witness={"effect": list(eff), "commits": [list(c) for c in committed]},
                                   signature={"policy": pol, "faults": faults, "scenario": sc,
                                              "invariant": "EFFECT_AT_MOST_ONCE"}))
            if out.again:
                ok = False
                broke.append(Broke(label, f"delivering the whole message log again committed {', '.join(out.again)} a "
                                          "second time: replaying the run would publish again",
                                   symptoms=("commits-on-replay",), reproduce=_repro(case),
                                   witness={"committed_again": list(out.again)},
                                   signature={"policy": pol, "faults": faults, "scenario": sc,
                                              "problem": "redelivery-commits"}))
            rows.append(grid_row(sc, faults, [], ok, label=f"{pol} + {' + '.join(faults) or 'no faults'}"))
        if broke:  # what the key does that made it commit again: the mistake, not the case
            _n, why, _got = _probe_same(call, host, ["another-delivery", "a-resend", "a-later-attempt"])
            if why:
                syms = tuple(dict.fromkeys(s for b in why for s in b.symptoms))
                first = broke[0]
                broke[0] = replace(first, what=f"{first.what} ({why[0].what})", symptoms=first.symptoms + syms,
                                   reproduce=why[0].reproduce if "key-differs-between-processes" in syms else
                                   first.reproduce)
        return rule(len(cases), broke, "every effect committed once, however its result came back, and a redelivery "
                                       "of the whole log committed nothing", grid=rows)
    finally:
        host.close()


_SEARCH_SYMPTOM = {"duplicate": "commits-on-redelivery", "resend": "commits-on-resend", "crash": "commits-per-attempt"}


def search(sub: Path, args: dict) -> Judged:
    """Every delivery order of a small run (``args["searches"]``: scenario, faults, depth, policy,
    invariants) with the student's rule keying the effects: no order commits an effect twice; a break
    is shown as its shortest path with the scenario file that replays it
    (:mod:`sim.course.judges.search`)."""
    from .search import Plugged, search as explore_all

    call, host = _rule(sub)
    path = (sub / _FILE).resolve()
    try:
        checked, broke, rows = explore_all(
            (str(path), _digest_of(path)), args.get("searches", []),
            lambda policy: Plugged(None, _policy(policy, call), {"effects": f"{_FILE} (remote)"}),
            reproduce="protolab run {dir}/counterexample.toml --effects {dir}/effects.py --db counterexample.db && protolab check --db counterexample.db",
            symptom=lambda _inv, faults: next((_SEARCH_SYMPTOM[f.split(":")[0]] for f in faults
                                               if f.split(":")[0] in _SEARCH_SYMPTOM), "commits-per-attempt"),
            failed_symptom="rule-fails", reference=lambda policy: Plugged(None, _policy(policy, None), {}),
            idle_reproduce=lambda one: rerun_line(5, "effects.search", {"searches": [one]}))
        if broke:  # a key that differs between processes broke it: one process replaying the file would not
            _n, why, _got = _probe_same(call, host, [])
            if any("key-differs-between-processes" in b.symptoms for b in why):
                first = broke[0]
                broke[0] = replace(first, what=f"{first.what} (your key differs between processes, and the search "
                                               "ran your rule in two: one process replaying counterexample.toml keys "
                                               "consistently and does not show it; the reproduce line shows the two "
                                               "processes' keys)", reproduce=_REPRO_TWICE,
                                   symptoms=first.symptoms + ("key-differs-between-processes",))
    finally:
        host.close()
    return rule(checked, broke, "no order of the deliveries commits an effect twice", grid=rows)


#: The name an older test gave this judge (kept for callers that still use it).
at_least_once = at_most_once


def none_lost(sub: Path, args: dict) -> Judged:
    """Rule: different effects all commit: another target, another task or another kind of effect
    is another effect, and a publishing result gets a key."""
    call, host = _rule(sub)
    try:
        probes = args.get("different", list(OTHER_EFFECT))
        n, broke, _got = _probe_other(call, host, probes)
        cases = args.get("cases", [])
        for case in cases:
            sc, pol, faults, seed = _case(case)
            out = _run(sub, call, case)
            want = _expected(case)
            if out.error:
                broke.append(Broke(_label(case), f"the run stopped: {out.error}", symptoms=("rule-fails",),
                                   reproduce=_repro(case)))
                continue
            got = set(out.effects())
            lost = sorted(want - got)
            if lost:
                shown = "; ".join(f"{k} {t} for {task}" for k, t, task in lost)
                broke.append(Broke(_label(case), f"{len(want)} different effect(s) were asked for and {shown} was never "
                                                 f"committed ({out.suppressed} suppressed as a repeat of a key another "
                                                 "effect had used)",
                                   symptoms=("effect-lost-in-run",), reproduce=_repro(case, lost=True),
                                   witness={"expected": sorted(map(list, want)), "committed": sorted(map(list, got))},
                                   signature={"policy": pol, "faults": faults, "scenario": sc}))
        return rule(n + len(cases), broke, "every different effect got a key of its own and committed")
    finally:
        host.close()


def key_names_the_effect(sub: Path, args: dict) -> Judged:
    """Rule: the key is a function of the effect alone: the same in every process, whatever the
    delivery, the message, the attempt, the worker or the payload that carries it."""
    call, host = _rule(sub)
    try:
        n, broke, _got = _probe_same(call, host, args.get("same", list(SAME_EFFECT)))
        return rule(n, broke, "one key for one effect, in every process, whatever message, delivery or attempt "
                              "carried it")
    finally:
        host.close()


# ------------------------------------------------------------------------------------------ behaviour

_B_POLICIES = ("naive", "safe")
_B_RUNS = {
    "publish-report": [[], ["duplicate"], ["resend:task_result"], ["crash:M-5"], ["crash:M-5", "duplicate"],
                       ["crash:task_started"], ["transient"], ["drop"], ["conflicting-digest"], ["late-failure"],
                       ["late-conflict"], ["lost-evidence"], ["delay"]],
    "fan-out": [[], ["duplicate"], ["resend"], ["crash:task_started"], ["transient"]],
    "two-reports": [[], ["duplicate:task_result"], ["resend:task_result"], ["crash:task_started"]],
    "same-target": [[], ["duplicate:task_result"]],
}


def _labels(answers: list[tuple]) -> list:
    """Keys as partition labels (first-seen index): which inputs share a key, never the key itself."""
    seen: dict = {}
    return [seen.setdefault(v, len(seen)) if k == "key" else k for k, v in answers]


def behaviour(sub: Path) -> dict:
    """What the effect rule in folder ``sub`` does, by what the seed's rules care about.

    * ``runs``: every scenario of :data:`_B_RUNS` (the shipped publish-report and fan-out, and the
      made-up two-reports and same-target) under both consumers and seed 0 (seed 1 for two):
      each effect (kind, target, task) and how many times it committed, how many were suppressed,
      how many a redelivery of the whole log committed again, whether EFFECT_AT_MOST_ONCE held,
      and whether the run stopped on the rule;
    * ``probes``: the base result and every SAME_EFFECT and OTHER_EFFECT variant, keyed in each
      host process: which of them share a key in each process (partition labels), and whether
      each got the same answer in both processes.

    Abstracted away: the key strings themselves (only which results share one matters to the
    effects table), the order of commits, the other invariants (the naive consumer breaks some of
    them whatever the key) and the messages' text."""
    call, host = _rule(sub)
    try:
        runs = {}
        for sc, faults_list in _B_RUNS.items():
            for pol in _B_POLICIES:
                for faults in faults_list:
                    for seed in ((0, 1) if (sc == "publish-report" and faults in ([], ["crash:M-5"])) else (0,)):
                        out = _run(sub, call, {"scenario": sc, "policy": pol, "faults": faults, "seed": seed})
                        runs[f"{sc}|{pol}|{'+'.join(faults)}|{seed}"] = {
                            "stopped": bool(out.error),
                            "effects": sorted([list(e), c] for e, c in out.effects().items()),
                            "suppressed": out.suppressed,
                            "again": len(out.again),
                            "at_most_once": out.at_most_once,
                        }
        inputs = ([(_BASE[0](), _BASE[1])] * 2 + [(b(), d) for _w, b, d, _s in SAME_EFFECT.values()]
                  + [(b(), d) for _w, b, d, _s in OTHER_EFFECT.values()])
        got = _in_each_process(call, host, inputs)
        probes = {"partition": [_labels(g) for g in got],
                  "same_in_every_process": [len({tuple(g[i]) for g in got}) == 1 for i in range(len(inputs))],
                  "answer_kinds": [[a[0] for a in g] for g in got]}
        return {"runs": runs, "probes": probes}
    finally:
        host.close()
