"""Judges of exercise 6, a conversation trace. The student's ``trace.json`` is data: it is read as
JSON and never run. The project's validator (``sim.protocol.trace.validate``) judges whether it is
a valid ``conversation-trace-v2`` trace that closes COMPLETED; the story judge checks that it tells
the exercise's story (an author, two reviewers gathered under ALL, one decision, a fence both
reviewers acknowledge); the mutation judges apply the adversarial suite (``sim.protocol.mutate``)
to it and expect each mutation to be rejected with its code; the causal-chain judge follows
``causedBy`` from the opening request to the fence.

Whatever the file holds (broken JSON, missing fields, wrong types), a judge answers with a
:class:`~sim.course.judges.Judged` that says what is wrong, never with a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import Judged, failed, partial, passed

_FILE = "trace.json"
AUTHOR, RA, RB = "author", "reviewer-a", "reviewer-b"
REVIEWERS = [RA, RB]
PARTICIPANTS = sorted([AUTHOR, RA, RB])
DRAFT = "D-1"

#: The mutations of the public test: sequence, duplicates, epoch, scope, audience, causation, the fence,
#: the acknowledgements, gather membership and the payload digest.
CORE_MUTATIONS = ("duplicate-message", "skip-sequence-number", "swap-messages-of-one-sender", "stale-epoch",
                  "wrong-scope", "missing-audience-label", "unknown-causation-parent", "message-after-fence",
                  "ack-from-outside-required-set", "ack-not-citing-fence", "drop-required-ack",
                  "contribution-from-non-member", "payload-digest-mismatch")

_VALIDATE = "protolab trace validate {dir}/trace.json"
_MUTATE = "protolab trace mutate {dir}/trace.json"
_DIAGRAM = "protolab trace diagram {dir}/trace.json --text"

# What a mutation finds in the trace to break (see sim/protocol/mutate.py): the structures it needs.
_ACK, _ACK2, _FENCE, _TERM = "ack", "ack-sender-twice", "fence", "terminal"
_GATHER, _CONTRIB, _RESULT_MSG, _RECORDED, _OUTSIDER = "gather", "contribution", "result-message", "recorded", "outsider"
STRUCTURES = {
    _ACK: "an ACK after the fence",
    _ACK2: "an earlier message from the last ACK's sender (its ACK must not be its first message)",
    _FENCE: "a FENCE message named by terminal.fence",
    _TERM: "a terminal",
    _GATHER: "a gather",
    _CONTRIB: "a CONTRIBUTION to the first gather",
    _RESULT_MSG: "a GATHER_RESULT message for the first gather",
    _RECORDED: "a recorded result on the first gather (gathers[0].result)",
    _OUTSIDER: "a participant outside the gather's membership",
}
# a structure that only matters once the one it hangs from is there
_INSIDE = {_ACK2: _ACK, _FENCE: _TERM, _CONTRIB: _GATHER, _RESULT_MSG: _GATHER, _RECORDED: _GATHER, _OUTSIDER: _GATHER}
_NEEDS: dict[str, tuple[str, ...]] = {
    "swap-messages-of-one-sender": (_ACK, _ACK2),
    "message-after-fence": (_ACK, _TERM, _FENCE),
    "ack-not-citing-fence": (_ACK, _TERM, _FENCE),
    "drop-required-ack": (_ACK, _TERM, _FENCE),
    "ack-from-outside-required-set": (_ACK, _TERM, _FENCE),
    "second-fence": (_ACK, _TERM, _FENCE),
    "terminal-fence-not-a-fence": (_TERM,),
    "truth-effect-not-none": (_TERM,),
    "authority-effect-not-none": (_TERM,),
    "late-gather-contribution": (_GATHER, _CONTRIB),
    "contribution-from-non-member": (_GATHER, _CONTRIB),
    "unknown-gather": (_GATHER, _CONTRIB),
    "duplicate-contribution": (_GATHER, _CONTRIB),
    "unresolved-gather-at-completed": (_GATHER, _CONTRIB),
    "contribution-after-result": (_GATHER, _CONTRIB, _RESULT_MSG),
    "contribution-before-opener": (_GATHER, _RESULT_MSG),
    "second-gather-result": (_GATHER, _RESULT_MSG),
    "recorded-result-mismatch": (_GATHER, _RECORDED),
    "membership-changed": (_GATHER, _OUTSIDER),
    "membership-not-sorted": (_GATHER,),
    "quorum-without-threshold": (_GATHER,),
    "quorum-threshold-too-high": (_GATHER,),
    "first-success-without-tie-break": (_GATHER,),
    "unknown-gather-opener": (_GATHER,),
    "gather-declared-twice": (_GATHER,),
    "message-ceiling-exceeded": (),
    "duplicate-participant": (),
}


# --------------------------------------------------------------------------- reading


def _read(sub: Path):
    """``(trace, None)``, or ``(None, Judged)`` when the file is not a JSON object."""
    path = sub / _FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, failed("trace.json is missing: copy the starter back with protolab exercise start 6")
    except OSError as e:
        return None, failed(f"trace.json cannot be read: {e.strerror or e}")
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        return None, failed(f"trace.json is not UTF-8 text ({e.reason} at byte {e.start})")

    def refuse(name):
        raise ValueError(f"{name} is not a JSON value")

    try:
        trace = json.loads(text, parse_constant=refuse)
    except json.JSONDecodeError as e:
        return None, failed(f"trace.json is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}",
                            reproduce=_VALIDATE)
    except (RecursionError, ValueError) as e:
        return None, failed(f"trace.json cannot be read as JSON: {e}", reproduce=_VALIDATE)
    if not isinstance(trace, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(trace), "a number")
        return None, failed(f"trace.json holds {kind}, not the trace object {{\"schema\": ..., \"messages\": [...]}}",
                            reproduce=_VALIDATE)
    return trace, None


def _validate(trace: dict):
    """``(report, None)`` or ``(None, Judged)`` should the validator itself fail on this input."""
    from ...protocol.trace import validate

    try:
        return validate(trace), None
    except Exception as e:  # a validator bug must not become a student's traceback
        return None, failed(f"the validator could not read this trace ({type(e).__name__}: {e}); "
                            "check it against sim/protocol/conversation-trace-v2.schema.json", reproduce=_VALIDATE)


def _errors_text(report, n: int = 3) -> str:
    shown = "; ".join(f"{f.code} at {_short(f.message_id or f.pointer or '/')}: {_short(f.message, 240)}" for f in report.errors[:n])
    more = f" (+{len(report.errors) - n} more)" if len(report.errors) > n else ""
    return shown + more


def _s(v) -> str | None:
    return v if isinstance(v, str) else None


def _list(v) -> list:
    return v if isinstance(v, list) else []


def _strs(v) -> list[str]:
    """The strings of a JSON array (other items ignored); [] for anything else."""
    return [x for x in _list(v) if isinstance(x, str)]


def _messages(trace: dict) -> list[dict]:
    return [m for m in _list(trace.get("messages")) if isinstance(m, dict)]


def _gathers(trace: dict) -> list[dict]:
    return [g for g in _list(trace.get("gathers")) if isinstance(g, dict)]


def _terminal(trace: dict) -> dict:
    t = trace.get("terminal")
    return t if isinstance(t, dict) else {}


def _short(v, limit: int = 60) -> str:
    """A student's value as it reads in a message, cut short: a file may hold anything."""
    text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _r(v) -> str:
    """A student's value quoted (strings) or written as JSON, cut short."""
    return _short(repr(v) if isinstance(v, str) else v)


def _name(m: dict) -> str:
    return _short(m["id"]) if _s(m.get("id")) else "a message without an id"


def _names(items, most: int = 6) -> str:
    items = [_short(str(x)) for x in items]
    if not items:
        return "nobody"
    return ", ".join(items[:most]) + (f" and {len(items) - most} more" if len(items) > most else "")


def _mentions(value, word: str, depth: int = 0) -> bool:
    """Whether ``word`` appears in a string anywhere inside a JSON value."""
    if depth > 20:
        return False
    if isinstance(value, str):
        return word in value
    if isinstance(value, dict):
        return any(_mentions(v, word, depth + 1) for v in value.values())
    if isinstance(value, list):
        return any(_mentions(v, word, depth + 1) for v in value)
    return False


def _invalid_note(trace: dict) -> str:
    """A short note naming the validator's first errors, or '' for a valid trace."""
    report, bad = _validate(trace)
    if bad is not None or report.valid:
        return ""
    shown = ", ".join(f"{f.code} at {_short(f.message_id or f.pointer or '/')}" for f in report.errors[:2])
    return f" (the validator also rejects the trace: {shown}; see protolab trace validate trace.json)"


# --------------------------------------------------------------------------- valid


def valid(sub: Path, args: dict) -> Judged:
    """The trace is valid conversation-trace-v2 and closes COMPLETED."""
    trace, bad = _read(sub)
    if bad:
        return bad
    report, bad = _validate(trace)
    if bad:
        return bad
    if not report.valid:
        n = len(report.errors)
        return failed(f"the validator rejects the trace with {n} error{'s' if n != 1 else ''}: {_errors_text(report)}",
                      reproduce=_VALIDATE, witness=[f.to_dict() for f in report.errors[:10]])
    if report.terminal is None:
        return partial(0.5, "the trace is valid but the conversation is still open: add the author's FENCE, the "
                            "reviewers' ACKs and a terminal naming the fence", reproduce=_VALIDATE)
    if report.terminal != "COMPLETED":
        return partial(0.5, f"the trace is valid but closes {report.terminal}, not COMPLETED: {report.reason}",
                       reproduce=_VALIDATE)
    return passed(f"valid: {report.reason}")


# --------------------------------------------------------------------------- story


def _story_parts(trace: dict) -> list[tuple[str, str | None]]:
    """Each part of the story: (what it is, the problem with it or None)."""
    msgs = _messages(trace)
    pos: dict[str, int] = {}
    for i, m in enumerate(msgs):
        if _s(m.get("id")) is not None:
            pos.setdefault(m["id"], i)
    of_kind = lambda k: [m for m in msgs if m.get("kind") == k]  # noqa: E731
    parts: list[tuple[str, str | None]] = []

    # the author's request
    req = msgs[0] if msgs else {}
    rid = _s(req.get("id"))
    problem = None
    if not msgs:
        problem = "the trace has no messages"
    elif req.get("kind") != "REQUEST" or req.get("sender") != AUTHOR:
        problem = (f"the conversation must open with the author's REQUEST; its first message {_name(req)} is a "
                   f"{_short(req.get('kind'))} from {_short(req.get('sender'))}")
    elif sorted(set(_strs(req.get("recipients")))) != REVIEWERS:
        problem = f"the request {_short(rid)} must go to both reviewers; it goes to {_names(_strs(req.get('recipients')))}"
    elif not isinstance(req.get("payload"), dict) or not _mentions(req.get("payload"), DRAFT):
        problem = f"the request {_short(rid)} must carry a payload that names the draft {DRAFT} (for example {{\"draft\": \"{DRAFT}\"}})"
    parts.append(("the author's request", problem))

    # the gather
    gathers = _gathers(trace)
    g = gathers[0] if gathers else {}
    gid = _s(g.get("id"))
    problem = None
    if len(gathers) != 1:
        problem = f"the story has exactly one gather; the trace declares {len(gathers)}"
    elif _strs(g.get("membership")) != REVIEWERS or len(_list(g.get("membership"))) != 2:
        problem = (f"gather {_short(gid)}'s membership is {_r(g.get('membership'))}; it must be exactly "
                   f"[\"{RA}\", \"{RB}\"] (sorted)")
    elif g.get("rule") != "ALL":
        problem = f"gather {_short(gid)}'s rule is {_r(g.get('rule'))}; the decision needs both verdicts, so the rule is ALL"
    elif rid is None or g.get("opener") != rid:
        problem = f"gather {_short(gid)} must be opened by the author's request {_short(rid)}; its opener is {_r(g.get('opener'))}"
    parts.append(("one gather over both reviewers, rule ALL", problem))

    # one contribution from each reviewer
    contribs = of_kind("CONTRIBUTION")
    problem = None
    stray = [m for m in contribs if gid is None or m.get("gatherId") != gid]
    if stray:
        problem = f"{_name(stray[0])} is a CONTRIBUTION that names gather {_r(stray[0].get('gatherId'))}, not {_short(gid)}"
    else:
        for r in REVIEWERS:
            n = sum(1 for m in contribs if m.get("sender") == r)
            if n != 1:
                problem = (f"{r} sends {'no CONTRIBUTION' if n == 0 else f'{n} CONTRIBUTIONs'} to {_short(gid)}; "
                           "each reviewer sends exactly one")
                break
        others = sorted({str(m.get("sender")) for m in contribs if m.get("sender") not in REVIEWERS})
        if problem is None and others:
            problem = f"only the reviewers contribute; {_names(others)} sends a CONTRIBUTION"
    parts.append(("one CONTRIBUTION from each reviewer", problem))

    # the decision and the gather's recorded result
    results = of_kind("GATHER_RESULT")
    problem = None
    if len(results) != 1:
        problem = f"the author records the decision once, as one GATHER_RESULT; the trace has {len(results)}"
    elif results[0].get("sender") != AUTHOR:
        problem = f"the decision {_name(results[0])} is sent by {_short(results[0].get('sender'))}; the author decides"
    elif gid is None or results[0].get("gatherId") != gid:
        problem = f"the decision {_name(results[0])} must name the gather {_short(gid)} in gatherId"
    parts.append(("the author's decision (GATHER_RESULT)", problem))

    rec = g.get("result")
    problem = None
    if not isinstance(rec, dict):
        problem = (f"gather {_short(gid)} does not record its result: copy what protolab trace validate trace.json --json "
                   f"prints under gathers.{_short(gid)} into the gather's \"result\"")
    elif rec.get("status") != "complete" or _strs(rec.get("contributors")) != REVIEWERS:
        problem = (f"gather {_short(gid)}'s recorded result is {_r(rec.get('status'))} with contributors "
                   f"{_names(_strs(rec.get('contributors')))}; with both verdicts in it is complete")
    parts.append(("the gather's recorded result", problem))

    # the fence and the terminal
    fences = of_kind("FENCE")
    fence = fences[0] if len(fences) == 1 else {}
    fid = _s(fence.get("id"))
    term = _terminal(trace)
    problem = None
    if len(fences) != 1:
        problem = f"the author closes the conversation with one FENCE; the trace has {len(fences)}"
    elif fence.get("sender") != AUTHOR:
        problem = f"the fence {_short(fid)} is sent by {_short(fence.get('sender'))}; the author closes the conversation"
    elif sorted(set(_strs(fence.get("recipients")))) != REVIEWERS:
        problem = f"the fence {_short(fid)} must go to both reviewers; it goes to {_names(_strs(fence.get('recipients')))}"
    elif fid is None or term.get("fence") != fid:
        problem = f"terminal.fence must name the fence {_short(fid)}; it is {_r(term.get('fence'))}"
    parts.append(("the author's FENCE", problem))

    problem = None
    if not term:
        problem = "the trace has no terminal: add one naming the fence, state COMPLETED"
    elif term.get("state") != "COMPLETED":
        problem = f"terminal.state is {_r(term.get('state'))}; the review ended normally: COMPLETED"
    elif sorted(set(_strs(term.get("requiredAcks")))) != REVIEWERS or len(_list(term.get("requiredAcks"))) != 2:
        problem = (f"terminal.requiredAcks is {_r(term.get('requiredAcks'))}; both reviewers must acknowledge: "
                   f"[\"{RA}\", \"{RB}\"]")
    parts.append(("a COMPLETED terminal that requires both reviewers' acknowledgements", problem))

    # the acknowledgements
    acks = of_kind("ACK")
    fence_at = pos.get(fid) if fid is not None else None
    problem = None
    for r in REVIEWERS:
        mine = [m for m in acks if m.get("sender") == r]
        if not mine:
            problem = f"{r} never acknowledges the fence: send an ACK from {r} caused by the fence {_short(fid)}"
        elif len(mine) > 1:
            problem = f"{r} acknowledges {len(mine)} times ({_names(_name(m) for m in mine)}); once is a receipt"
        elif fid is None or fid not in _strs(mine[0].get("causedBy")):
            problem = (f"{_name(mine[0])}, {r}'s ACK, cites {_names(_strs(mine[0].get('causedBy')))} in causedBy; "
                       f"an acknowledgement of the fence cites the fence {_short(fid)}")
        elif fence_at is None or pos.get(_s(mine[0].get("id")) or "", -1) < fence_at:
            problem = f"{_name(mine[0])}, {r}'s ACK, comes before the fence {_short(fid)}; it acknowledges the fence, so it follows it"
        if problem:
            break
    others = sorted({str(m.get("sender")) for m in acks if m.get("sender") not in REVIEWERS})
    if problem is None and others:
        problem = f"only the reviewers acknowledge; {_names(others)} sends an ACK"
    parts.append(("an ACK of the fence from each reviewer", problem))

    # every payload carried, so that every payloadDigest is checked
    bare = [_name(m) for m in msgs if not isinstance(m.get("payload"), dict)]
    problem = None
    if bare:
        problem = (f"{_names(bare, 4)} carr{'ies' if len(bare) == 1 else 'y'} "
                   "no payload, so nothing pins their payloadDigest: write each payload and its jcs-v2 digest")
    parts.append(("every message carries its payload", problem))
    return parts


def story(sub: Path, args: dict) -> Judged:
    """The trace tells the exercise's story, part by part (a copy of another story fails)."""
    trace, bad = _read(sub)
    if bad:
        return bad
    refs = sorted(str(p.get("ref")) for p in _list(trace.get("participants")) if isinstance(p, dict))
    if refs != PARTICIPANTS:
        return failed(f"the participants are {_names(refs)}; this story has exactly {AUTHOR}, {RA} and {RB} "
                      "(the example in data/traces tells another story)" + _invalid_note(trace),
                      reproduce=_DIAGRAM)
    parts = _story_parts(trace)
    wrong = [(what, problem) for what, problem in parts if problem]
    if not wrong:
        return passed(f"the trace tells the story: all {len(parts)} parts are there")
    n = len(parts) + 1  # the participants count as one part
    return partial((n - len(wrong)) / n,
                   f"{len(wrong)} of {n} parts of the story are missing or wrong: "
                   + "; ".join(problem for _, problem in wrong[:3])
                   + (f" (+{len(wrong) - 3} more)" if len(wrong) > 3 else "") + _invalid_note(trace),
                   witness=[{"part": what, "problem": problem} for what, problem in wrong],
                   reproduce=_DIAGRAM)


# --------------------------------------------------------------------------- mutations


def _structures(trace: dict) -> set[str]:
    """The structures of a (valid) trace that the mutations find and break."""
    msgs = _messages(trace)
    have: set[str] = set()
    acks = [m for m in msgs if m.get("kind") == "ACK"]
    if acks:
        have.add(_ACK)
        if sum(1 for m in msgs if m.get("sender") == acks[-1].get("sender")) >= 2:
            have.add(_ACK2)
    term = trace.get("terminal")
    if isinstance(term, dict):
        have.add(_TERM)
        if any(m.get("id") == term.get("fence") and m.get("kind") == "FENCE" for m in msgs):
            have.add(_FENCE)
    gathers = _gathers(trace)
    if gathers:
        g = gathers[0]
        have.add(_GATHER)
        if any(m.get("kind") == "CONTRIBUTION" and m.get("gatherId") == g.get("id") for m in msgs):
            have.add(_CONTRIB)
        if any(m.get("kind") == "GATHER_RESULT" and m.get("gatherId") == g.get("id") for m in msgs):
            have.add(_RESULT_MSG)
        if isinstance(g.get("result"), dict):
            have.add(_RECORDED)
        members = set(_strs(g.get("membership")))
        if any(isinstance(p, dict) and _s(p.get("ref")) not in members for p in _list(trace.get("participants"))):
            have.add(_OUTSIDER)
    return have


def _mutations(sub: Path, names) -> Judged:
    from ...protocol.mutate import MUTATIONS, run_mutations

    trace, bad = _read(sub)
    if bad:
        return bad
    report, bad = _validate(trace)
    if bad:
        return bad
    if not report.valid:
        return failed("the mutations break one rule of a valid trace at a time, and this trace is not valid yet: "
                      f"{_errors_text(report, 2)}", reproduce=_VALIDATE)
    chosen = [m for m in MUTATIONS if names is None or m.name in names]
    have = _structures(trace)
    rows: list[dict] = []
    for mu in chosen:
        needs = _NEEDS.get(mu.name, (_ACK,))
        lacking = tuple(x for x in needs if x not in have and _INSIDE.get(x) not in set(needs) - have)
        try:
            row = run_mutations(trace, (mu,))[0]
        except Exception as e:  # a mutation that finds nothing to break in this trace
            row = {"name": mu.name, "rule": mu.rule, "expected": mu.expected_code,
                   "expected_terminal": mu.expected_terminal, "produced": [], "terminal": None, "ok": False,
                   "error": f"{type(e).__name__}: {e}"}
        if row["ok"] and mu.expected_code is None and report.terminal != "COMPLETED":
            # dropping an acknowledgement of a trace that is BLOCKED already proves nothing
            row = dict(row, ok=False, why=f"your trace is {report.terminal} before the mutation, so a mutation "
                                          "that must turn COMPLETED into BLOCKED proves nothing")
        if not row["ok"]:
            if lacking:
                row["lacking"] = lacking
                row["why"] = f"it needs {' and '.join(STRUCTURES[x] for x in lacking)}, which your trace lacks"
            elif "why" not in row:
                want = row["expected"] or f"a valid {row['expected_terminal']} trace"
                got = (", ".join(row["produced"]) or f"a valid {row['terminal']} trace") if "error" not in row \
                    else f"no result ({row['error']})"
                row["why"] = f"expected {want}, got {got}"
        rows.append(row)
    wrong = [r for r in rows if not r["ok"]]
    if not wrong:
        return passed(f"all {len(rows)} mutations of your trace are rejected as they should be")
    # what the trace lacks first (one sentence per missing structure), then the mutations that misfired
    said: list[str] = []
    missing: dict[str, list[str]] = {}
    for r in wrong:
        for x in r.get("lacking", ()):
            missing.setdefault(x, []).append(r["name"])
    for x, names_ in missing.items():
        shown = ", ".join(names_[:3]) + (f" and {len(names_) - 3} more" if len(names_) > 3 else "")
        said.append(f"your trace lacks {STRUCTURES[x]}, which {len(names_)} mutation{'s' if len(names_) != 1 else ''} "
                    f"need{'s' if len(names_) == 1 else ''} ({shown})")
    misfired = [r for r in wrong if not r.get("lacking")]
    said += [f"{r['name']} ({r['rule']}): {r['why']}" for r in misfired[:3]]
    if len(misfired) > 3:
        said.append(f"{len(misfired) - 3} more")
    return partial((len(rows) - len(wrong)) / len(rows),
                   f"{len(wrong)} of {len(rows)} mutations of your trace are not rejected as expected: " + "; ".join(said),
                   witness=[{k: r.get(k) for k in ("name", "expected", "expected_terminal", "produced", "terminal", "why")}
                            for r in wrong[:10]],
                   reproduce=_MUTATE if _mutate_command_runs(trace, MUTATIONS) else _DIAGRAM)


def _mutate_command_runs(trace: dict, mutations) -> bool:
    """Whether ``protolab trace mutate`` gets through the whole suite on this trace: it stops at the
    first mutation that finds nothing to break, so a failure then is shown by the diagram instead."""
    for mu in mutations:
        try:
            mu.apply(trace)
        except Exception:
            return False
    return True


def mutations_core(sub: Path, args: dict) -> Judged:
    """The core mutations (``args["names"]``, default :data:`CORE_MUTATIONS`) are each rejected with
    their code; the one that drops an acknowledgement leaves a valid BLOCKED trace."""
    names = args.get("names")
    return _mutations(sub, set(names) if isinstance(names, list) and names else set(CORE_MUTATIONS))


def mutations_all(sub: Path, args: dict) -> Judged:
    """Each mutation in the args is applied to the trace on its own and must be rejected with its code."""
    return _mutations(sub, None)


# --------------------------------------------------------------------------- causal chain


def causal_chain(sub: Path, args: dict) -> Judged:
    """The conversation hangs together by ``causedBy`` in the supplied order (the validator's
    ordering; times order nothing across senders): every message after the opening request names
    what it answers, causes come earlier, everything leads back to the request, each contribution
    answers the gather's opener, the decision cites each reviewer's contribution, and the fence
    cites the decision."""
    trace, bad = _read(sub)
    if bad:
        return bad
    msgs = _messages(trace)
    if not msgs:
        return failed("the trace has no messages" + _invalid_note(trace), reproduce=_VALIDATE)
    ids = [_s(m.get("id")) for m in msgs]
    pos: dict[str, int] = {}
    for i, mid in enumerate(ids):
        if mid is not None:
            pos.setdefault(mid, i)
    causes = [_strs(m.get("causedBy")) for m in msgs]
    parts: list[tuple[str, str | None]] = []

    uncaused = [_name(m) for i, m in enumerate(msgs) if i > 0 and not causes[i]]
    parts.append(("every message after the opening request names its cause",
                  f"{_names(uncaused)} name{'s' if len(uncaused) == 1 else ''} no cause in causedBy" if uncaused else None))

    late = [f"{_name(msgs[i])} cites {_short(c)}" for i in range(len(msgs)) for c in causes[i] if pos.get(c, len(msgs)) >= i]
    parts.append(("every cause is an earlier message",
                  f"{'; '.join(late[:3])}, which is not an earlier message of the trace" if late else None))

    root = ids[0]
    reach = {_short(root)} if root is not None else set()
    for i in range(1, len(msgs)):
        if ids[i] is not None and any(c in reach and pos.get(c, i) < i for c in causes[i]):
            reach.add(ids[i])
    loose = [_name(m) for i, m in enumerate(msgs) if ids[i] not in reach]
    parts.append(("every message leads back to the opening request",
                  f"{_names(loose)} do{'es' if len(loose) == 1 else ''} not lead back to the opening request "
                  f"{_short(root)} through causedBy" if loose else None))

    gathers = _gathers(trace)
    g = gathers[0] if gathers else {}
    gid, opener = _s(g.get("id")), _s(g.get("opener"))
    contribs = [(i, m) for i, m in enumerate(msgs) if m.get("kind") == "CONTRIBUTION"]
    problem = None
    if not gathers or not contribs:
        problem = "there is no gather with contributions to follow"
    else:
        off = [_name(m) for i, m in contribs if opener is None or opener not in causes[i]]
        if off:
            problem = f"{_names(off)} must cite the gather's opener {_short(opener)} in causedBy: a verdict answers the request"
    parts.append(("each contribution answers the gather's opener", problem))

    results = [(i, m) for i, m in enumerate(msgs) if m.get("kind") == "GATHER_RESULT"]
    problem = None
    if not results:
        problem = "there is no decision (GATHER_RESULT) to follow"
    else:
        i, d = results[0]
        for r in REVIEWERS:
            theirs = [_s(m.get("id")) for _, m in contribs if m.get("sender") == r and m.get("gatherId") == gid]
            if not theirs:
                problem = f"the decision {_name(d)} should cite {r}'s contribution, and {r} never contributes"
            elif not any(c in causes[i] for c in theirs):
                problem = f"the decision {_name(d)} does not cite {r}'s contribution {_short(theirs[0])} in causedBy"
            if problem:
                break
    parts.append(("the decision cites each reviewer's contribution", problem))

    term = _terminal(trace)
    fences = [(i, m) for i, m in enumerate(msgs) if m.get("kind") == "FENCE"]
    fence = next(((i, m) for i, m in fences if m.get("id") == term.get("fence")), fences[0] if fences else None)
    problem = None
    if fence is None:
        problem = "there is no FENCE to follow"
    elif not results:
        problem = f"the fence {_name(fence[1])} should cite the decision, and there is none"
    elif _s(results[0][1].get("id")) not in causes[fence[0]]:
        problem = f"the fence {_name(fence[1])} does not cite the decision {_name(results[0][1])} in causedBy"
    parts.append(("the fence cites the decision", problem))

    wrong = [(what, problem) for what, problem in parts if problem]
    if not wrong:
        return passed(f"all {len(msgs)} messages hang from the opening request {_short(root)}, each after its causes")
    return partial((len(parts) - len(wrong)) / len(parts),
                   f"{len(wrong)} of {len(parts)} causal links are missing or wrong: "
                   + "; ".join(problem for _, problem in wrong[:3]) + _invalid_note(trace),
                   witness=[{"link": what, "problem": problem} for what, problem in wrong],
                   reproduce=_DIAGRAM)
