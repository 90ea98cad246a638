"""Judges of exercise 1, the envelope design: the student's design is plugged into the running
simulator and judged by what intake recorded and what the invariants say, never by comparing
strings with a model answer.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from . import Judged, failed, grid_row, partial, passed, signature_of

_FILE = "design.py"
_REPRO = "protolab run {scenario}--design {{dir}}/design.py{faults} --seed {seed} --db ex1.db && protolab check --db ex1.db"


def _repro(scenario: str, faults: list[str], seed: int = 0) -> str:
    sc = "" if scenario == "publish-report" else f"{scenario} "
    return _REPRO.format(scenario=sc, faults="".join(f" --fault {f}" for f in faults), seed=seed)


_HOSTS: dict[Path, object] = {}
_PRINT_LIMIT = 256 * 1024


def _load(sub: Path):
    """The student's design, running in its own host process (see :mod:`sim.course.remote`): this
    judge and the simulator never import the student's file, so it cannot rewrite them."""
    from ..remote import RemoteDesign

    path = (sub / _FILE).resolve()
    if path not in _HOSTS:
        _HOSTS[path] = RemoteDesign(path)
    return _HOSTS[path]


def _flooded(sub: Path) -> Judged | None:
    host = _HOSTS.get((sub / _FILE).resolve())
    if host is not None and host.module.printed > _PRINT_LIMIT:
        return failed(f"your code printed more than {_PRINT_LIMIT // 1024} KB while judged "
                      f"({host.module.printed:,} characters); a design computes, it does not print")
    return None


def _run(sub: Path, scenario: str = "publish-report", faults=(), seed: int = 0, design=None):
    from ...plugins import Plugins
    from ...runner import run_scenario
    from ...scenario import load_scenario

    # strict_faults=False: a design that stalls the story leaves a fault nothing to act on; the
    # judge reports how the run ended rather than refusing the fault.
    return run_scenario(load_scenario(scenario), seed=seed, faults=list(faults),
                        plugins=Plugins(design=design if design is not None else _load(sub)), strict_faults=False)


def _witness_text(w: dict) -> str:
    keys = ("problem", "task_id", "message_id", "original_message_id", "original_key", "resend_key",
            "resend_decision", "idempotency_key", "old_state", "new_state", "times_committed", "ref")
    parts = [f"{k}={w[k]}" for k in keys if w.get(k) is not None and not isinstance(w[k], (dict, list))]
    return ", ".join(parts)


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


def _judged(fn):
    """A judge of this module: it ends the student's host process and fails a flood of output."""
    import functools

    @functools.wraps(fn)
    def run(sub: Path, args: dict) -> Judged:
        try:
            verdict = fn(sub, args)
            return _flooded(sub) or verdict
        finally:
            host = _HOSTS.pop((sub / _FILE).resolve(), None)
            if host is not None:
                host.close()

    return run


@_judged
def loads(sub: Path, args: dict) -> Judged:
    """The design file loads and makes valid envelopes for a whole clean run."""
    _load(sub)
    rows: list = []
    ok, msg, witness = _judge_run(sub, "publish-report", [], rows=rows)
    if not ok:
        return failed(msg, reproduce=_repro("publish-report", []), witness=witness, grid=rows,
                      signature=signature_of("publish-report", [], witness))
    return passed(msg, grid=rows)


@_judged
def fault_matrix(sub: Path, args: dict) -> Judged:
    """Each entry of ``args["faults"]`` (a list of fault lists) on each scenario in ``args["scenarios"]``:
    every invariant holds, the run finishes as the reference does, the report is published once."""
    _load(sub)
    scenarios = args.get("scenarios", ["publish-report"])
    matrix = [(sc, list(f)) for sc in scenarios for f in args.get("faults", [[]])]
    good, bad, rows = [], [], []
    for sc, faults in matrix:
        ok, msg, witness = _judge_run(sub, sc, faults, int(args.get("seed", 0)), rows=rows)
        (good if ok else bad).append((sc, faults, msg, witness))
    if not bad:
        return passed(f"{len(good)} of {len(matrix)} runs hold every invariant: " + "; ".join(m for *_, m, _w in good),
                      grid=rows)
    sc, faults, msg, witness = bad[0]
    others = f" ({len(bad) - 1} more run(s) failed: {', '.join('+'.join(f) or 'none' for _s, f, *_ in bad[1:])})" if len(bad) > 1 else ""
    return partial(len(good) / len(matrix), msg + others, reproduce=_repro(sc, faults), witness=witness, grid=rows,
                   signature=signature_of(sc, faults, witness))


def _first_result(store, task_id: str) -> dict | None:
    for d in store.deliveries():
        if d["task_id"] == task_id and d["type"] == "task_result" and d["decision"] == "accepted":
            return next(m for m in store.messages() if m["message_id"] == d["message_id"])
    return None


def _fact_table(store, task_id: str = "T-1") -> dict | None:
    for a in store.artifacts():
        if a["kind"] == "fact-table" and a["task_id"] == task_id:
            return store.artifact(a["ref"])
    return None


def _rows_text(artifact: dict) -> list[str]:
    content = artifact.get("content")
    if isinstance(content, str):
        content = json.loads(content)
    return [row[0] for row in content.get("rows", [])]


@_judged
def evidence_by_reference(sub: Path, args: dict) -> Judged:
    """The fact table lives in the artifact store; the researcher's result cites it by digest and
    does not carry it."""
    store = _run(sub)
    try:
        facts = _fact_table(store)
        result = _first_result(store, "T-1")
        if facts is None or result is None:
            return failed("the researcher's result for T-1 was never accepted, so nothing cites the fact table",
                          reproduce=_repro("publish-report", []))
        body = json.dumps(result["payload"], ensure_ascii=False)
        inline = [c for c in _rows_text(facts) if c in body]
        problems = []
        if facts["ref"] not in result["evidence_refs"]:
            problems.append(f"{result['message_id']}'s evidence_refs {result['evidence_refs']} do not cite the fact "
                            f"table's artifact {facts['ref'][:19]}…")
        if inline:
            problems.append(f"{result['message_id']}'s payload carries the fact table's rows inline "
                            f"({len(inline)} of {len(_rows_text(facts))} claims), so every copy of the message is a "
                            "copy of the evidence")
        if problems:
            return failed("; ".join(problems), reproduce="protolab run --design {dir}/design.py --db ex1.db && "
                          f"protolab messages --db ex1.db --task T-1", witness={"message_id": result["message_id"],
                                                                            "fact_table": facts["ref"]})
        return passed(f"{result['message_id']} cites the fact table {facts['ref'][:19]}… by digest and carries no row of it")
    finally:
        store.close()


@_judged
def minimal_payloads(sub: Path, args: dict) -> Judged:
    """Each recipient gets what it needs: the writer's request cites the fact table by reference and
    carries neither its rows nor any worker's private notes; no worker is sent another's notes."""
    store = _run(sub)
    try:
        facts = _fact_table(store)
        rows = _rows_text(facts) if facts else []
        problems = []
        for m in store.messages():
            if m["recipient"] == "manager":
                continue
            body = json.dumps(m["payload"], ensure_ascii=False)
            if "@staff.internal" in body or "working notes" in body:
                problems.append(f"{m['message_id']} ({m['type']} to {m['recipient']}) carries a worker's private notes")
            if m["recipient"] == "writer" and m["type"] == "task_request":
                leaked = [c for c in rows if c in body]
                if leaked:
                    problems.append(f"{m['message_id']} (the writer's task_request) carries the fact table's rows "
                                    f"inline ({len(leaked)} claims) instead of a reference")
                if facts is not None and facts["ref"] not in m["evidence_refs"]:
                    problems.append(f"{m['message_id']} (the writer's task_request) does not cite the fact table "
                                    f"{facts['ref'][:19]}… in evidence_refs")
        if not any(m["recipient"] == "writer" and m["type"] == "task_request" for m in store.messages()):
            problems.append("the run never sent the writer its task_request, so there is nothing to judge "
                            "(make the clean run finish first)")
        if problems:
            return failed("; ".join(dict.fromkeys(problems)),
                          reproduce="protolab run --design {dir}/design.py --db ex1.db && protolab messages --db ex1.db")
        return passed("every recipient got only what it needs: references, not copies; nobody's private notes")
    finally:
        store.close()


@_judged
def keys_name_intents(sub: Path, args: dict) -> Judged:
    """The key names the logical intent: the same intent resent (new message id, later time) keeps
    its key; another attempt, step, task, sender or answered message gets another key."""
    from ...design import Intent

    design = _load(sub)
    base = Intent(type="task_result", sender="researcher", recipient="manager", trace_id="R-1", task_id="T-1",
                  attempt=1, body={"status": "succeeded", "lease_version": 1}, message_id="M-3",
                  created_at="2026-07-13T04:00:05Z")
    same = [("a resend (new message_id and created_at)", replace(base, message_id="M-9", created_at="2026-07-13T04:00:09Z"))]
    different = [
        ("the next attempt", replace(base, attempt=2, body={"status": "succeeded", "lease_version": 2})),
        ("another task", replace(base, task_id="T-2")),
        ("another step (task_started)", replace(base, type="task_started", body={"lease_version": 1})),
        ("another trace", replace(base, trace_id="R-2")),
    ]
    ack = Intent(type="ack", sender="manager", recipient="researcher", trace_id="R-1", task_id="T-1", answers="M-2",
                 body={"of": "M-2"}, message_id="A-1", created_at="2026-07-13T04:00:03Z")
    different_ack = [("an ack of another message", replace(ack, answers="M-3", body={"of": "M-3"}, message_id="A-2"))]
    problems = []
    k0 = design.idempotency_key(base)
    if not isinstance(k0, str):
        return failed(f"idempotency_key returned {type(k0).__name__}; it must return a string")
    for what, i in same:
        if design.idempotency_key(i) != k0:
            problems.append(f"{what} got another key ({design.idempotency_key(i)!r} vs {k0!r})")
    for what, i in different:
        if design.idempotency_key(i) == k0:
            problems.append(f"{what} got the same key {k0!r}")
    ka = design.idempotency_key(ack)
    for what, i in different_ack:
        if design.idempotency_key(i) == ka:
            problems.append(f"{what} got the same key {ka!r}")
    checks = len(same) + len(different) + len(different_ack)
    if problems:
        return partial((checks - len(problems)) / checks, "; ".join(problems))
    return passed(f"all {checks} key properties hold")
