"""Judges of exercise 5, exactly-once publication: the student's effect-commit rule is plugged
into the runtime (running in its own host process) and judged by the effects table, the
EFFECT_AT_MOST_ONCE invariant and a redelivery of the whole message log, never by comparing keys
with a model answer.

The rule is judged under an at-least-once consumer: the naive intake, which re-executes every
delivery. The seed's question is how to prove publication cannot run twice *when a message is
replayed*; the commit record must hold on its own, not lean on intake's deduplication.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from . import Judged, failed, partial, passed, signature_of

_FILE = "effects.py"


def _rule(sub: Path):
    from ..remote import remote_callable

    return remote_callable(sub / _FILE, "effect_key", "effect rule")


def _policy(base: str, rule):
    from ...policy import NAIVE, SAFE

    return replace(NAIVE if base == "naive" else SAFE, effect_rule=rule)


def _two_reports():
    """Two reports from one fact table, to two targets: both must be published."""
    from ...scenario import parse_scenario

    return parse_scenario({
        "name": "two-reports", "workers": ["researcher", "writer"], "trace": "R-1",
        "description": "one fact table, two publications to two targets",
        "task": [
            {"id": "T-1", "goal": "collect evidence", "worker": "researcher"},
            {"id": "T-2", "goal": "draft the report", "worker": "writer", "kind": "draft", "after": ["T-1"], "publish": "R-1"},
            {"id": "T-3", "goal": "draft the summary", "worker": "writer", "kind": "draft", "after": ["T-1"],
             "publish": "R-1-summary"},
        ],
    }, source="exercise 5")


def _repro(policy: str, faults: list[str]) -> str:
    f = "".join(f" --fault {x}" for x in faults)
    return (f"protolab run --policy {policy} --effects {{dir}}/effects.py{f} --db ex5.db && protolab check --db ex5.db "
            "&& protolab replay --db ex5.db")


def _one_run(rule, policy: str, faults: list[str], rows: list | None = None) -> tuple[bool, str, dict | None]:
    from . import grid_row

    results: list = []
    ok, msg, w = _one_run_checked(rule, policy, faults, results)
    if rows is not None:
        rows.append(grid_row("publish-report", faults, results, ok, label=f"{policy} + " + " + ".join(faults)))
    return ok, msg, w


def _one_run_checked(rule, policy: str, faults: list[str], results: list) -> tuple[bool, str, dict | None]:
    from ...invariants import check
    from ...replay import redeliver
    from ...runner import run_scenario
    from ...scenario import load_scenario

    pol = _policy(policy, rule)
    store = run_scenario(load_scenario("publish-report"), policy=pol, faults=faults, strict_faults=False)
    try:
        label = f"{policy} intake with {' + '.join(faults)}"
        pubs = [e for e in store.effects() if e["kind"] == "publish"]
        results.extend(check(store))
        eff = next(r for r in results if r.name == "EFFECT_AT_MOST_ONCE")
        if not eff.ok:
            w = eff.witnesses[0]
            return False, (f"{label}: the report was published {w['times_committed']} times, under the keys "
                           f"{', '.join(e['effect_key'] for e in w['effects'])} (from {', '.join(w['message_ids'])}): "
                           "one publication, two commit records"), {"witness": w}
        if len(pubs) != 1:
            return False, f"{label}: the report was published {len(pubs)} times, expected once", None
        again = redeliver(store, policy=pol)["effects_committed_again"]
        if again:
            return False, (f"{label}: delivering the whole message log again committed {', '.join(again)} a second "
                           "time, so replaying the run would publish again"), {"committed_again": again}
        return True, f"{label}: published once under {pubs[0]['effect_key']}, and again nothing on redelivery", None
    finally:
        store.close()


def _matrix(sub: Path, args: dict) -> Judged:
    rule, host = _rule(sub)
    try:
        runs = [(p, list(f)) for p in args.get("policies", ["naive"]) for f in args["faults"]]
        bad, rows = [], []
        for policy, faults in runs:
            ok, msg, w = _one_run(rule, policy, faults, rows)
            if not ok:
                bad.append((policy, faults, msg, w))
        if not bad:
            return passed(f"all {len(runs)} runs published once and redelivery committed nothing", grid=rows)
        policy, faults, msg, w = bad[0]
        more = f" ({len(bad) - 1} more run(s) failed)" if len(bad) > 1 else ""
        sig = {**signature_of("publish-report", faults, w), "policy": policy}
        return partial((len(runs) - len(bad)) / len(runs), msg + more, reproduce=_repro(policy, faults), witness=w,
                       grid=rows, signature=sig)
    finally:
        host.close()


def at_least_once(sub: Path, args: dict) -> Judged:
    """Under a consumer that re-executes deliveries, each fault still publishes once."""
    return _matrix(sub, args)


def crash_recovery(sub: Path, args: dict) -> Judged:
    """The writer crashes after starting; its zombie commits a stale result the naive intake accepts."""
    return _matrix(sub, args)


def _result(task_id: str = "T-2", target: str = "R-1", kind: str = "publish", mid: str = "M-6",
            key: str = "R-1:T-2:attempt-1", summary: str = "3 item(s)"):
    from ...envelope import build_envelope

    return build_envelope(
        message_id=mid, trace_id="R-1", task_id=task_id, sender="writer", recipient="manager", type="task_result",
        payload={"status": "succeeded", "lease_version": 1, "artifact": "sha256:" + "ab" * 32, "summary": summary,
                 "effect": {"kind": kind, "target": target}},
        idempotency_key=key, created_at="2026-07-13T04:00:12Z",
    )


def returns_a_key(sub: Path, args: dict) -> Judged:
    """The rule names a key for a publishing result: a non-empty string, the same every time."""
    rule, host = _rule(sub)
    try:
        r = _result()
        k1, k2 = rule(r, 9), rule(r, 9)
        if k1 is None:
            return failed("effect_key returned None for a successful publishing result: the report would never be "
                          "published (None means: commit nothing)")
        if not isinstance(k1, str) or not k1:
            return failed(f"effect_key returned {k1!r}; it must return a non-empty string (or None to commit nothing)")
        if k1 != k2:
            return failed(f"effect_key gave two keys for one call twice ({k1!r}, {k2!r}): a key must be a function of "
                          "its input")
        return passed(f"a publishing result of T-2 commits under {k1!r}")
    finally:
        host.close()


def none_lost(sub: Path, args: dict) -> Judged:
    """Two reports to two targets are two publications; each commits."""
    from ...invariants import check
    from ...runner import run_scenario

    rule, host = _rule(sub)
    try:
        store = run_scenario(_two_reports(), policy=_policy("safe", rule))
        try:
            pubs = sorted((e["target"], e["task_id"]) for e in store.effects())
            suppressed = [e for e in store.events() if e["type"] == "effect_suppressed"]
            if pubs != [("R-1", "T-2"), ("R-1-summary", "T-3")]:
                why = ""
                if suppressed:
                    e = suppressed[0]
                    why = (f"; {e['message_id']} ({e['task_id']}) was suppressed as a repeat of {e['data']['effect_key']!r}, "
                           "a key another publication already used")
                return failed(f"two different publications (T-2 to R-1, T-3 to R-1-summary) committed as {pubs or 'nothing'}"
                              f"{why}", witness={"effects": pubs})
            broken = [r.name for r in check(store) if not r.ok]
            if broken:
                return failed(f"the two-report run broke {', '.join(broken)}")
            return passed("both publications committed, each once")
        finally:
            store.close()
    finally:
        host.close()


def same_effect_same_key(sub: Path, args: dict) -> Judged:
    """The key names the effect (what is done, to what, for which task), not the message carrying it."""
    rule, host = _rule(sub)
    try:
        base = _result()
        k0 = rule(base, 7)
        same = [
            ("another delivery of it", rule(base, 8)),
            ("a resend under a new message id", rule(_result(mid="M-9"), 11)),
            ("a later attempt's result (new key, new payload)", rule(_result(mid="M-12", key="R-1:T-2:attempt-2",
                                                                              summary="4 item(s)"), 15)),
        ]
        different = [
            ("another target", rule(_result(target="R-2"), 7)),
            ("another task", rule(_result(task_id="T-3"), 7)),
            ("another kind of effect", rule(_result(kind="notify"), 7)),
        ]
        problems = [f"{what} got another key ({k!r} vs {k0!r})" for what, k in same if k != k0]
        problems += [f"{what} got the same key {k0!r}" for what, k in different if k == k0]
        n = len(same) + len(different)
        if problems:
            return partial((n - len(problems)) / n, "; ".join(problems))
        return passed(f"all {n} properties hold")
    finally:
        host.close()


def behaviour(sub: Path) -> dict:
    """PROTOTYPE (to be replaced by the exercise's own): what the rule does."""
    rule, host = _rule(sub)
    try:
        keys = []
        for r, d in [(_result(), 7), (_result(), 8), (_result(mid="M-9"), 11), (_result(target="R-2"), 7),
                     (_result(task_id="T-3"), 7), (_result(kind="notify"), 7),
                     (_result(mid="M-12", key="R-1:T-2:attempt-2", summary="4 item(s)"), 15)]:
            try:
                keys.append(rule(r, d))
            except Exception as e:  # noqa: BLE001
                keys.append(f"raised {type(e).__name__}")
        seen = {}
        part = [seen.setdefault(k, len(seen)) if isinstance(k, str) else repr(k) for k in keys]
        return {"partition": part}
    finally:
        host.close()
