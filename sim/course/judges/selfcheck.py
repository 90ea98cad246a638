"""Judges of exercise 7, the self-check: structured answers (choices, message ids, table names,
refs), never free text. Answers about a run are checked against a real run the judge makes with
the engine; answers that are choices are checked against the key the hidden tests carry.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from . import Judged, failed, partial, passed

_FILE = "answers.toml"

#: Each question: (section, field) -> the allowed answers (None: a value checked by form).
CHOICES: dict[tuple[str, str], tuple[str, ...] | None] = {
    ("ack", "means"): ("completion", "receipt only", "the task started"),
    ("ack", "example_ack"): None,
    ("ack", "task_state_after"): ("pending", "ready", "running", "succeeded", "failed", "retry_wait", "needs_review",
                                  "canceled", "denied", "waiting_human"),
    ("fact_table", "lives_in"): ("messages", "events", "tasks", "artifacts", "intents", "effects"),
    ("fact_table", "cited_as"): ("a sha256 ref in evidence_refs", "its rows in the payload", "a summary in the payload"),
    ("fact_table", "ref"): None,
    ("publication", "table"): ("messages", "deliveries", "events", "tasks", "effects", "intents"),
    ("publication", "unique_column"): ("message_id", "idempotency_key", "effect_key", "payload_digest", "delivery_id"),
    ("publication", "command"): ("protolab replay", "protolab check", "protolab state", "protolab events"),
    ("publication", "duplicate_message"): None,
    ("publication", "second_decision"): ("accepted", "duplicate", "conflict", "late", "rejected"),
}
CHECKS = ("EFFECT_AT_MOST_ONCE", "CONFLICT_FROZEN", "NO_STATE_REGRESSION", "EVIDENCE_RESOLVES", "NO_LOST_UPDATE",
          "ACK_IS_NOT_COMPLETION", "TRANSITIONS_ALLOWED", "RESEND_DEDUPLICATED", "PAYLOAD_MINIMIZATION",
          "EFFECT_HAS_EVIDENCE")
SYMPTOMS = ("repeated_execution", "swallowed_conflict", "state_regression", "lost_evidence", "sensitive_spread")
for _s in SYMPTOMS:
    CHOICES[("checklist", _s)] = CHECKS

_ID = re.compile(r"^[A-Z]+-\d+$")
_REF = re.compile(r"^sha256:[0-9a-f]{64}$")


def _answers(sub: Path) -> dict:
    try:
        return tomllib.loads((sub / _FILE).read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{_FILE} is not valid TOML: {e}") from None


def _get(a: dict, section: str, field: str):
    v = a.get(section, {})
    return v.get(field) if isinstance(v, dict) else None


def well_formed(sub: Path, args: dict) -> Judged:
    """Every question answered, each with an allowed choice or a well-formed id or ref."""
    try:
        a = _answers(sub)
    except ValueError as e:
        return failed(str(e))
    problems = []
    for (section, field), allowed in CHOICES.items():
        v = _get(a, section, field)
        name = f"[{section}] {field}"
        if v is None or v == "?":
            problems.append(f"{name} is not answered")
        elif not isinstance(v, str):
            problems.append(f"{name} must be a string, not {type(v).__name__}")
        elif allowed is not None and v not in allowed:
            problems.append(f"{name} = {v!r} is not one of: {', '.join(allowed)}")
        elif field == "ref" and not _REF.match(v):
            problems.append(f"{name} = {v!r} is not a sha256:<64 hex> ref")
        elif allowed is None and field != "ref" and not _ID.match(v):
            problems.append(f"{name} = {v!r} is not a message id like M-3 or A-1")
    n = len(CHOICES)
    if problems:
        return partial((n - len(problems)) / n, "; ".join(problems[:4]) + (f" (+{len(problems) - 4} more)" if len(problems) > 4 else ""))
    return passed(f"all {n} answers are well formed")


def _run(faults=()):
    from ...runner import run_scenario
    from ...scenario import load_scenario

    return run_scenario(load_scenario("publish-report"), seed=0, faults=list(faults))


def ack_in_run(sub: Path, args: dict) -> Judged:
    """The ack named was delivered in the seed-0 run, its task's state right after it is the one
    given, and it moved nothing."""
    a = _answers(sub)
    mid, state = _get(a, "ack", "example_ack"), _get(a, "ack", "task_state_after")
    store = _run()
    try:
        acks = [d for d in store.deliveries() if d["type"] == "ack" and d["task_id"] != "R-1"]
        dv = next((d for d in acks if d["message_id"] == mid), None)
        if dv is None:
            return failed(f"{mid!r} is not an ack of a task in 'protolab run' (seed 0); acks there: "
                          f"{', '.join(d['message_id'] for d in acks)}",
                          reproduce="protolab run --db sc.db && protolab messages --db sc.db")
        moved = [e for e in store.events() if e["type"] == "transition_applied" and e["delivery_id"] == dv["delivery_id"]]
        if dv["state_after"] != state:
            return failed(f"right after {mid} was delivered, {dv['task_id']} was {dv['state']}, not {state}",
                          reproduce="protolab run --db sc.db && protolab messages --db sc.db")
        if moved:  # pragma: no cover - the reference runtime never moves on an ack
            return failed(f"{mid} moved its task")
        return passed(f"{mid} acknowledged a message of {dv['task_id']}, which stayed {state}: a receipt, not a move")
    finally:
        store.close()


def fact_table_in_run(sub: Path, args: dict) -> Judged:
    """The ref given is T-1's fact table in the seed-0 run, and the table named holds it."""
    a = _answers(sub)
    ref, table = _get(a, "fact_table", "ref"), _get(a, "fact_table", "lives_in")
    store = _run()
    try:
        facts = [x for x in store.artifacts() if x["kind"] == "fact-table"]
        if not any(x["ref"] == ref for x in facts):
            return failed(f"{str(ref)[:20]}… is not the ref of the fact table stored in 'protolab run' (seed 0)",
                          reproduce="protolab run --db sc.db && protolab state --db sc.db")
        cited = [m["message_id"] for m in store.messages() if ref in m["evidence_refs"]]
        if table != "artifacts":
            return partial(0.5, f"the ref is right (cited by {', '.join(cited)}), but it is not a row of {table!r}")
        return passed(f"{ref[:19]}… is T-1's fact table, a row of artifacts, cited by {', '.join(cited)}")
    finally:
        store.close()


def duplicate_in_run(sub: Path, args: dict) -> Judged:
    """In the seed-0 run with --fault duplicate: which message was delivered twice, and what its
    second delivery was recorded as."""
    a = _answers(sub)
    mid, decision = _get(a, "publication", "duplicate_message"), _get(a, "publication", "second_decision")
    store = _run(["duplicate"])
    try:
        twice = {}
        for d in store.deliveries():
            twice.setdefault(d["message_id"], []).append(d)
        twice = {k: v for k, v in twice.items() if len(v) > 1}
        if mid not in twice:
            return failed(f"{mid!r} was delivered once in 'protolab run --fault duplicate'; the one delivered twice is "
                          f"{', '.join(twice) or 'none'}", reproduce="protolab run --fault duplicate --db sc.db && "
                          "protolab messages --db sc.db")
        second = twice[mid][1]["decision"]
        if second != decision:
            return failed(f"{mid}'s second delivery was recorded {second}, not {decision}")
        return passed(f"{mid} was delivered twice; the second delivery was recorded {second}: nothing ran again")
    finally:
        store.close()


def against_key(sub: Path, args: dict) -> Judged:
    """Choice answers compared with the key in the (hidden) test's args: {"section.field": answer}
    (or a list of answers, any of which is right)."""
    a = _answers(sub)
    key: dict = args["key"]
    wrong = []
    for name, want in key.items():
        section, field = name.split(".")
        got = _get(a, section, field)
        if got not in (want if isinstance(want, list) else [want]):  # a list: any of them is right
            wrong.append((name, got))
    feedback = args.get("feedback", {})
    if wrong:
        msgs = [f"[{n.split('.')[0]}] {n.split('.')[1]} = {g!r}: {feedback.get(n, 'not the answer the rules give')}"
                for n, g in wrong]
        return partial((len(key) - len(wrong)) / len(key), "; ".join(msgs))
    return passed(f"all {len(key)} answers match")
