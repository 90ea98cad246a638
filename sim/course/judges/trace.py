"""Judges of exercise 6, a conversation trace: the student's ``trace.json`` is data, read and never
run. It is judged by the project's validator (``sim.protocol.trace.validate``): it must be valid and
close COMPLETED, tell the story the exercise asks for (an author, two reviewers, a gather over both,
a decision, a fence acknowledged by both), and every adversarial mutation of it
(``sim.protocol.mutate``) must be rejected with the code that mutation is about.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import Judged, failed, partial, passed

_FILE = "trace.json"
AUTHOR, RA, RB = "author", "reviewer-a", "reviewer-b"
CORE_MUTATIONS = ("duplicate-message", "skip-sequence-number", "swap-messages-of-one-sender", "stale-epoch",
                  "wrong-scope", "missing-audience-label", "unknown-causation-parent", "message-after-fence",
                  "ack-from-outside-required-set", "ack-not-citing-fence", "drop-required-ack",
                  "contribution-from-non-member", "payload-digest-mismatch")
_VALIDATE = "protolab trace validate {dir}/trace.json"


def _read(sub: Path):
    """``(trace, None)`` or ``(None, Judged)`` for a file that is not a JSON object."""
    path = sub / _FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, failed("trace.json is missing")
    except UnicodeDecodeError:
        return None, failed("trace.json is not UTF-8 text")
    try:
        trace = json.loads(text)
    except json.JSONDecodeError as e:
        return None, failed(f"trace.json is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}",
                            reproduce=_VALIDATE)
    if not isinstance(trace, dict):
        return None, failed(f"trace.json holds a JSON {type(trace).__name__}, not an object", reproduce=_VALIDATE)
    return trace, None


def _report(trace: dict):
    from ...protocol.trace import validate

    return validate(trace)


def _errors_text(report, n: int = 3) -> str:
    shown = "; ".join(f"{f.code} at {f.message_id or f.pointer}: {f.message}" for f in report.errors[:n])
    more = f" (+{len(report.errors) - n} more)" if len(report.errors) > n else ""
    return shown + more


def valid(sub: Path, args: dict) -> Judged:
    """The trace is valid conversation-trace-v2 and closes COMPLETED."""
    trace, bad = _read(sub)
    if bad:
        return bad
    report = _report(trace)
    if not report.valid:
        return failed(f"the validator rejects the trace: {_errors_text(report)}", reproduce=_VALIDATE,
                      witness=[f.to_dict() for f in report.errors[:10]])
    if report.terminal != "COMPLETED":
        return partial(0.5, f"the trace is valid but closes {report.terminal}, not COMPLETED: {report.reason}",
                       reproduce=_VALIDATE)
    return passed(f"valid: {report.reason}")


def _messages(trace: dict) -> list[dict]:
    msgs = trace.get("messages")
    return [m for m in msgs if isinstance(m, dict)] if isinstance(msgs, list) else []


def story(sub: Path, args: dict) -> Judged:
    """The trace tells the exercise's story, property by property."""
    trace, bad = _read(sub)
    if bad:
        return bad
    msgs = _messages(trace)
    by_id = {m.get("id"): m for m in msgs}
    kinds = lambda k: [m for m in msgs if m.get("kind") == k]  # noqa: E731
    checks: list[tuple[bool, str]] = []
    refs = sorted(p.get("ref") for p in trace.get("participants", []) if isinstance(p, dict))
    checks.append((refs == sorted([AUTHOR, RA, RB]), f"the participants are {refs}; the story has exactly "
                                                      f"{AUTHOR}, {RA} and {RB}"))
    gathers = [g for g in trace.get("gathers", []) if isinstance(g, dict)] if isinstance(trace.get("gathers"), list) else []
    g = gathers[0] if gathers else {}
    checks.append((len(gathers) == 1 and sorted(g.get("membership", [])) == [RA, RB] and g.get("rule") == "ALL",
                   "there must be one gather whose membership is exactly both reviewers, with rule ALL (each verdict counts)"))
    opener = by_id.get(g.get("opener"), {})
    checks.append((opener.get("kind") == "REQUEST" and opener.get("sender") == AUTHOR
                   and sorted(opener.get("recipients", [])) == [RA, RB],
                   "the gather must be opened by the author's REQUEST to both reviewers"))
    contribs = [m for m in kinds("CONTRIBUTION") if m.get("gatherId") == g.get("id")]
    checks.append((sorted(m.get("sender") for m in contribs) == [RA, RB]
                   and all(g.get("opener") in m.get("causedBy", []) for m in contribs),
                   "each reviewer sends one CONTRIBUTION to the gather, caused by the author's request"))
    results = [m for m in kinds("GATHER_RESULT") if m.get("sender") == AUTHOR]
    checks.append((len(results) == 1 and sorted(results[0].get("causedBy", [])) == sorted(m.get("id") for m in contribs),
                   "the author records the decision once (a GATHER_RESULT) caused by both contributions"))
    fences = kinds("FENCE")
    fence = fences[0] if len(fences) == 1 else {}
    checks.append((fence.get("sender") == AUTHOR and bool(results) and results[0].get("id") in fence.get("causedBy", []),
                   "the author closes the conversation with one FENCE, caused by the decision"))
    term = trace.get("terminal") if isinstance(trace.get("terminal"), dict) else {}
    checks.append((term.get("fence") == fence.get("id") and sorted(term.get("requiredAcks", [])) == [RA, RB],
                   "the terminal names that fence and requires acknowledgements from both reviewers"))
    acks = kinds("ACK")
    checks.append((sorted(m.get("sender") for m in acks) == [RA, RB]
                   and all(fence.get("id") in m.get("causedBy", []) for m in acks),
                   "each reviewer acknowledges the fence once, citing it in causedBy"))
    bad_checks = [m for ok, m in checks if not ok]
    if not bad_checks:
        return passed(f"the trace tells the story: all {len(checks)} parts are there")
    return partial((len(checks) - len(bad_checks)) / len(checks),
                   f"{len(bad_checks)} of {len(checks)} parts of the story are missing or wrong: " + "; ".join(bad_checks[:2]),
                   witness={"missing": bad_checks}, reproduce="protolab trace diagram {dir}/trace.json --text")


def _mutations(sub: Path, names) -> Judged:
    from ...protocol.mutate import MUTATIONS, run_mutations

    trace, bad = _read(sub)
    if bad:
        return bad
    report = _report(trace)
    if not report.valid:
        return failed("the mutations are judged against a valid trace, and this one is not: "
                      f"{_errors_text(report, 1)}", reproduce=_VALIDATE)
    chosen = tuple(m for m in MUTATIONS if names is None or m.name in names)
    try:
        rows = run_mutations(trace, chosen)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
        return failed(f"a mutation could not be applied ({type(e).__name__}: {e}): the trace lacks a structure the "
                      "mutations need (a fence, acknowledgements, a gather with two contributions)")
    wrong = [r for r in rows if not r["ok"]]
    if not wrong:
        return passed(f"all {len(rows)} mutations of your trace are rejected as they should be")
    r = wrong[0]
    want = r["expected"] or f"valid {r['expected_terminal']}"
    got = ", ".join(r["produced"]) or f"valid {r['terminal']}"
    return partial((len(rows) - len(wrong)) / len(rows),
                   f"{len(wrong)} of {len(rows)} mutations are not caught as expected; first: {r['name']} ({r['rule']}) "
                   f"should give {want}, gave {got}", witness=wrong[:5],
                   reproduce="protolab trace mutate {dir}/trace.json")


def mutations_core(sub: Path, args: dict) -> Judged:
    """The core mutations (sequence, duplicates, epoch, scope, audience, causation, fence, acks, gather
    membership, payload digest) are each rejected with the right code."""
    return _mutations(sub, set(args.get("names", CORE_MUTATIONS)))


def mutations_all(sub: Path, args: dict) -> Judged:
    """Every mutation in the suite is rejected as expected."""
    return _mutations(sub, None)


def causal_chain(sub: Path, args: dict) -> Judged:
    """A closed conversation hangs together: every message but the opening request names what
    caused it, causes come earlier in the trace, every message leads back to the request, and
    times never run backwards along a cause."""
    trace, bad = _read(sub)
    if bad:
        return bad
    msgs = _messages(trace)
    if not msgs:
        return failed("the trace has no messages")
    pos = {m.get("id"): i for i, m in enumerate(msgs)}
    problems = []
    root = msgs[0].get("id")
    for i, m in enumerate(msgs):
        causes = m.get("causedBy") if isinstance(m.get("causedBy"), list) else []
        if i > 0 and not causes:
            problems.append(f"{m.get('id')} names no cause")
        for c in causes:
            if c not in pos or pos[c] >= i:
                problems.append(f"{m.get('id')} is caused by {c}, which does not come before it")
            elif str(msgs[pos[c]].get("at", "")) > str(m.get("at", "")):
                problems.append(f"{m.get('id')} ({m.get('at')}) is earlier than its cause {c} ({msgs[pos[c]].get('at')})")
    reach = {root}
    for m in msgs[1:]:
        if any(c in reach for c in (m.get("causedBy") or [])):
            reach.add(m.get("id"))
    loose = [m.get("id") for m in msgs if m.get("id") not in reach]
    if loose:
        problems.append(f"{', '.join(map(str, loose[:3]))} do(es) not lead back to the opening request {root}")
    if not problems:
        return passed(f"all {len(msgs)} messages hang from the opening request, each after its causes")
    return partial(max(0.0, 1 - len(problems) / len(msgs)), f"{len(problems)} problem(s): " + "; ".join(problems[:2]),
                   reproduce="protolab trace diagram {dir}/trace.json --text")
