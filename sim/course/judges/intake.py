"""Judges of exercise 3, a deduplicating consumer: the student's ``decide`` (running in its own
host process) is run through the intake contract cases and then plugged into the simulator as
the runtime's intake under the fault matrix, judged by the invariants.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from . import Judged, failed, grid_row, partial, passed, reference_outcome, signature_of

_FILE = "decide.py"


def _decide(sub: Path):
    from ..remote import remote_callable

    return remote_callable(sub / _FILE, "decide", "intake")


def _select(args: dict):
    from ...contracts.intake import CASES

    words = args.get("rules_with")
    if not words:
        return list(CASES)
    return [c for c in CASES if any(w in c.rule for w in words)]


def contract(sub: Path, args: dict) -> Judged:
    """The intake contract cases whose rule mentions one of ``args["rules_with"]`` (all without it)."""
    from ...contracts.intake import check

    cases = _select(args)
    fn, host = _decide(sub)
    try:
        failures = [(c, check(fn, c)) for c in cases]
    finally:
        host.close()
    bad = [(c, f) for c, f in failures if f]
    if not bad:
        return passed(f"all {len(cases)} contract cases pass")
    shown = "; ".join(f"«{c.name}»: {f[0]}" for c, f in bad[:3])
    more = f" (+{len(bad) - 3} more failing cases)" if len(bad) > 3 else ""
    return partial((len(cases) - len(bad)) / len(cases), f"{len(bad)} of {len(cases)} cases fail: {shown}{more}",
                   witness=[{"case": c.name, "rule": c.rule, "failures": f} for c, f in bad[:10]],
                   signature={"case": bad[0][0].name, "rule": bad[0][0].rule, "cases": [c.name for c, _f in bad]})


def fault_matrix(sub: Path, args: dict) -> Judged:
    """The student's decide as the runtime's intake, under each fault: every invariant holds and the
    story ends as it does under the reference intake."""
    from ...invariants import check
    from ...policy import SAFE
    from ...runner import run_scenario
    from ...scenario import load_scenario

    fn, host = _decide(sub)
    try:
        policy = replace(SAFE, name="safe", decide=fn)
        runs = [(sc, list(f)) for sc in args.get("scenarios", ["publish-report"]) for f in args["faults"]]
        bad, rows = [], []
        for sc, faults in runs:
            label = f"{sc} with {' + '.join(faults)}"
            store = run_scenario(load_scenario(sc), policy=policy, faults=faults, strict_faults=False)
            try:
                results = check(store)
                broken = [r for r in results if not r.ok]
                states = {t["task_id"]: t["state"] for t in store.tasks()}
                want = reference_outcome(sc, faults)[0]
                if broken:
                    r = broken[0]
                    w = r.witnesses[0]
                    brief = ", ".join(f"{k}={w[k]}" for k in ("problem", "task_id", "message_id", "old_state", "new_state",
                                                              "times_committed") if w.get(k) is not None)
                    bad.append((sc, faults, f"{label}: {r.name} broke: {brief}", {"invariant": r.name, "witness": w}))
                elif states != want:
                    diff = ", ".join(f"{t} {states.get(t, 'never created')} (expected {s})" for t, s in sorted(want.items())
                                     if states.get(t) != s)
                    bad.append((sc, faults, f"{label}: the story did not end as it should: {diff}", {"states": states}))
                rows.append(grid_row(sc, faults, results, not (bad and bad[-1][0] == sc and bad[-1][1] == faults)))
            finally:
                store.close()
        if not bad:
            return passed(f"all {len(runs)} runs hold every invariant and end as they should", grid=rows)
        sc, faults, msg, w = bad[0]
        more = f" ({len(bad) - 1} more run(s) failed)" if len(bad) > 1 else ""
        scn = "" if sc == "publish-report" else f"{sc} "
        return partial((len(runs) - len(bad)) / len(runs), msg + more, witness=w, grid=rows,
                       signature=signature_of(sc, faults, w),
                       reproduce=f"protolab run {scn}--intake {{dir}}/decide.py{''.join(' --fault ' + f for f in faults)} "
                                 "--db ex3.db && protolab check --db ex3.db")
    finally:
        host.close()
