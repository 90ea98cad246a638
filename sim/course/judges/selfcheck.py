"""Judges of exercise 7, the self-check: structured answers (choices, message ids, table names,
refs), never free text. Each test is one rule of the seeds, judged all or nothing:

* ``ack_is_receipt``: a delivery acknowledgement is a receipt, not completion, and an ack of a
  real run shows it (the ack named was delivered, its task's state right after it is the one
  given, and that task had not finished, so the example tells a receipt from a completion);
* ``fact_table_by_ref``: the fact table lives in one authoritative store and a result cites it by
  its ref, which is the ref of the fact table the run stored;
* ``publication_once``: publication once is proven by the side effect's unique commit record and a
  replay, and the run with ``--fault duplicate`` shows the message delivered twice and how its
  second delivery was recorded;
* ``checklist``: each symptom of the seed's debugging checklist mapped to the check that finds it.

Answers about a run are checked against a run the judge makes itself (the ``publish-report``
scenario, seed 0, as ``protolab run`` makes it; worked out once per process). Answers that are
choices are checked against the key the grader adds to the tests (``choices`` cases in
``solutions/07-self-check/hidden.toml``: each the field, the accepted answers and, for a wrong
answer, why it is wrong and the symptom it shows); the kit never holds the key, so a student's own
check judges the form of those answers and says the rule has hidden cases. A message names the
answer that is wrong and why, never the right value (not even the ids a run holds).

Whatever ``answers.toml`` holds (no file, not TOML, a section that is a list, a number where a
string belongs, a huge string), a judge answers with a verdict, never a traceback.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from . import Broke, Judged, failed, rule

_FILE = "answers.toml"
SCENARIO, SEED = "publish-report", 0
_RUN = "protolab run --db sc.db && protolab messages --db sc.db"
_RUN_STATE = "protolab run --db sc.db && protolab state --db sc.db"
_RUN_DUP = "protolab run --fault duplicate --db dup.db && protolab messages --db dup.db"

#: Each question: "section.field" -> the allowed answers (None: a value checked by its form).
CHOICES: dict[str, tuple[str, ...] | None] = {
    "ack.means": ("completion", "receipt only", "the task started"),
    "ack.example_ack": None,
    "ack.task_state_after": ("pending", "ready", "running", "succeeded", "failed", "retry_wait", "needs_review",
                             "canceled", "denied", "waiting_human"),
    "fact_table.lives_in": ("messages", "events", "tasks", "artifacts", "intents", "effects"),
    "fact_table.cited_as": ("a sha256 ref in evidence_refs", "its rows in the payload", "a summary in the payload"),
    "fact_table.ref": None,
    "publication.table": ("messages", "deliveries", "events", "tasks", "effects", "intents"),
    "publication.unique_column": ("message_id", "idempotency_key", "effect_key", "payload_digest", "delivery_id"),
    "publication.command": ("protolab replay", "protolab check", "protolab state", "protolab events"),
    "publication.duplicate_message": None,
    "publication.second_decision": ("accepted", "duplicate", "conflict", "late", "rejected"),
}
CHECKS = ("EFFECT_AT_MOST_ONCE", "CONFLICT_FROZEN", "NO_STATE_REGRESSION", "EVIDENCE_RESOLVES", "NO_LOST_UPDATE",
          "ACK_IS_NOT_COMPLETION", "TRANSITIONS_ALLOWED", "RESEND_DEDUPLICATED", "PAYLOAD_MINIMIZATION",
          "EFFECT_HAS_EVIDENCE")
#: The debugging checklist's symptoms (the fields of [checklist]).
CHECKLIST = ("repeated_execution", "swallowed_conflict", "state_regression", "lost_evidence", "sensitive_spread")
for _s in CHECKLIST:
    CHOICES[f"checklist.{_s}"] = CHECKS

#: The fields each rule judges, in the order its messages name them.
FIELDS = {
    "ack": ("ack.means", "ack.example_ack", "ack.task_state_after"),
    "fact_table": ("fact_table.lives_in", "fact_table.cited_as", "fact_table.ref"),
    "publication": ("publication.table", "publication.unique_column", "publication.command",
                    "publication.duplicate_message", "publication.second_decision"),
    "checklist": tuple(f"checklist.{s}" for s in CHECKLIST),
}

#: Every symptom these judges report (hint tables match on them).
SYMPTOMS = {
    "unanswered": "a field is missing or still holds the starter's '?'",
    "not-a-choice": "an answer is not one of the answers its comment allows (or not a message id or ref of the "
                    "right form)",
    "unreadable": "answers.toml is missing or is not a TOML file of tables",
    "wrong-choice": "a choice that the key does not accept, with no more specific symptom",
    "ack-read-as-completion": "an acknowledgement taken to mean that the task completed",
    "ack-read-as-start": "an acknowledgement taken to mean that the task started",
    "ack-not-in-run": "the example ack is not an ack of a task delivered in the run",
    "ack-state-wrong": "the state given is not the one the ack's task was in right after the ack",
    "ack-example-finished": "the example ack's task had finished already, so it cannot tell a receipt from a "
                            "completion",
    "evidence-copied": "the fact table placed in, or summarised in, the message that carries it",
    "evidence-elsewhere": "the fact table placed in a table that does not hold products",
    "ref-not-fact-table": "the ref given is not the ref of the fact table the run stored",
    "dedup-by-message": "publication guarded by the identity of a message or a delivery, which changes on a "
                        "resend or a redelivery",
    "no-effect-record": "publication guarded by a table other than the record of side effects",
    "key-names-message": "publication guarded by a column that names a message's intent or content, not the "
                         "side effect",
    "no-replay": "a command that does not deliver the message log again named as the proof",
    "duplicate-not-found": "the message named was not delivered twice in the run with --fault duplicate",
    "second-delivery-misread": "the decision given is not the one the second delivery was recorded with",
    "checklist-mismatch": "a symptom of the debugging checklist mapped to a check that does not find it",
}

_ID = re.compile(r"^[A-Z]+-\d+$")
_REF = re.compile(r"^sha256:[0-9a-f]{64}$")
_FINISHED = frozenset({"succeeded", "failed", "canceled", "denied"})  # sim.machine.TERMINAL, as text


# --------------------------------------------------------------------------- reading


def _short(v, limit: int = 60) -> str:
    """A student's value as it reads in a message, quoted and cut short (a file may hold anything)."""
    text = repr(v) if isinstance(v, str) else type(v).__name__
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def _answers(sub: Path) -> tuple[dict | None, Judged | None]:
    """``(answers, None)``, or ``(None, Judged)`` saying why answers.toml cannot be read."""
    path = Path(sub) / _FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, failed(f"{_FILE} is missing: copy the starter back with protolab exercise start 7")
    except OSError as e:
        return None, failed(f"{_FILE} cannot be read: {e.strerror or e}")
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        return None, failed(f"{_FILE} is not UTF-8 text ({e.reason} at byte {e.start})")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        return None, failed(f"{_FILE} is not valid TOML: {str(e)[:200]}")
    except (RecursionError, ValueError, MemoryError) as e:
        return None, failed(f"{_FILE} cannot be read as TOML ({type(e).__name__})")
    return data, None


def _norm(v: str) -> str:
    return " ".join(v.split()).casefold()


def _form(a: dict, name: str) -> tuple[str | None, Broke | None]:
    """The answer to ``name`` normalised (a choice as the allowed spelling, an id upper case, a ref
    lower case), or the Broke saying why it is not an answer."""
    section, field = name.split(".")
    sec = a.get(section)
    v = sec.get(field) if isinstance(sec, dict) else None
    case = f"[{section}] {field}"
    if v is None or (isinstance(v, str) and v.strip() in ("", "?")):
        where = "" if isinstance(sec, dict) or sec is None else f" ([{section}] is a {type(sec).__name__}, not a table)"
        return None, Broke(case, f"is not answered{where}", symptoms=("unanswered",))
    if not isinstance(v, str):
        return None, Broke(case, f"must be a string, not {type(v).__name__}", symptoms=("not-a-choice",))
    allowed = CHOICES[name]
    if allowed is not None:
        hit = next((c for c in allowed if _norm(c) == _norm(v)), None)
        if hit is None:
            return None, Broke(case, f"{_short(v)} is not one of the answers its comment lists", symptoms=("not-a-choice",))
        return hit, None
    if field == "ref":
        v = v.strip().lower()
        if not _REF.match(v):
            return None, Broke(case, f"{_short(v)} is not a ref of the form sha256:<64 hex digits>",
                               symptoms=("not-a-choice",))
        return v, None
    v = v.strip().upper()
    if not _ID.match(v):
        return None, Broke(case, f"{_short(v)} is not a message id like A-12 or M-40", symptoms=("not-a-choice",))
    return v, None


def _choices(args: dict, fields) -> list[dict]:
    """The key's cases (``args["choices"]``) for ``fields``, each well formed."""
    out = []
    for c in args.get("choices") or ():
        if isinstance(c, dict) and c.get("field") in fields and isinstance(c.get("accept"), list):
            out.append(c)
    return out


def _against_key(values: dict, cases: list[dict]) -> list[Broke]:
    """A Broke for each answered field whose answer the key does not accept: what is wrong and why
    (the key's ``why`` for that answer), never the accepted answer."""
    broke = []
    for c in cases:
        name = c["field"]
        got = values.get(name)
        if got is None:  # not answered: said already
            continue
        if _norm(got) in {_norm(str(x)) for x in c["accept"]}:
            continue
        why = c.get("why")
        why = why.get(got) if isinstance(why, dict) else why
        sym = c.get("symptom")
        sym = sym.get(got) if isinstance(sym, dict) else sym
        section, field = name.split(".")
        broke.append(Broke(f"[{section}] {field}", f"{got!r} is not right: {why if isinstance(why, str) and why else 'the seeds say otherwise'}",
                           symptoms=(sym if isinstance(sym, str) and sym else "wrong-choice",),
                           signature={"case": name}))
    return broke


def _judge(sub: Path, args: dict, group: str, run_part, held: str) -> Judged:
    a, bad = _answers(sub)
    if bad is not None:
        return Judged(bad.score, bad.message, signature={"symptoms": ["unreadable"]})
    if not isinstance(a, dict):  # pragma: no cover - tomllib always gives a dict
        return failed(f"{_FILE} holds no tables")
    fields = FIELDS[group]
    values: dict[str, str] = {}
    broke: list[Broke] = []
    for name in fields:
        v, b = _form(a, name)
        if b is not None:
            broke.append(b)
        else:
            values[name] = v
    cases = _choices(args, fields)
    broke += _against_key(values, cases)
    checked = len(fields) + len(cases)
    if run_part is not None:
        more, n = run_part(values)
        broke += more
        checked += n
    return rule(checked, broke, "" if broke else held(values) if callable(held) else held)


# --------------------------------------------------------------------------- the runs


_RUNS: dict[tuple, dict] = {}


def _facts(faults: tuple[str, ...] = ()) -> dict:
    """What the seed-0 run of the scenario (under ``faults``) recorded, as plain data: each
    delivery's message, task, type, decision and state after; the artifacts by kind. The run is
    deterministic, so it is made once per process."""
    key = tuple(faults)
    if key not in _RUNS:
        from ...runner import run_scenario
        from ...scenario import load_scenario

        store = run_scenario(load_scenario(SCENARIO), seed=SEED, faults=list(faults))
        try:
            tasks = {t["task_id"] for t in store.tasks()}
            deliveries = [{k: d[k] for k in ("message_id", "task_id", "type", "decision", "state_after")}
                          for d in store.deliveries()]
            artifacts = {x["ref"]: x["kind"] for x in store.artifacts()}
            cited = {}
            for m in store.messages():
                for ref in m["evidence_refs"] or ():
                    cited.setdefault(ref, []).append(m["message_id"])
        finally:
            store.close()
        if len(_RUNS) > 8:
            _RUNS.clear()
        _RUNS[key] = {"tasks": tasks, "deliveries": deliveries, "artifacts": artifacts, "cited": cited}
    return _RUNS[key]


def _ack_example(values: dict) -> tuple[list[Broke], int]:
    mid, state = values.get("ack.example_ack"), values.get("ack.task_state_after")
    if mid is None:
        return [], 1
    facts = _facts()
    mine = [d for d in facts["deliveries"] if d["message_id"] == mid]
    case = "[ack] example_ack"
    if not mine:
        return [Broke(case, f"{mid} was not delivered in the seed-0 run of {SCENARIO} ('protolab run')",
                      symptoms=("ack-not-in-run",), reproduce=_RUN)], 1
    dv = mine[0]
    if dv["type"] != "ack":
        return [Broke(case, f"{mid} is a {dv['type']} message, not an ack", symptoms=("ack-not-in-run",),
                      reproduce=_RUN)], 1
    if dv["task_id"] not in facts["tasks"]:
        return [Broke(case, f"{mid} acknowledges a message of the conversation ({dv['task_id']}), not of a task: "
                            "it has no task whose state could answer the question", symptoms=("ack-not-in-run",),
                      reproduce=_RUN)], 1
    if state is None:
        return [], 1
    if dv["state_after"] != state:
        return [Broke("[ack] task_state_after", f"right after {mid} was delivered, its task {dv['task_id']} was not "
                                                f"{state!r}: read the state after that delivery",
                      symptoms=("ack-state-wrong",), reproduce=_RUN)], 2
    if state in _FINISHED:
        return [Broke(case, f"{dv['task_id']} had finished already when {mid} was delivered, so this ack fits either "
                            "answer and shows neither: name an ack for which the answers would disagree",
                      symptoms=("ack-example-finished",), reproduce=_RUN)], 2
    return [], 2


def ack_is_receipt(sub: Path, args: dict) -> Judged:
    """Does a delivery acknowledgement mean the task completed? The choice (against the key), and an
    ack of the seed-0 run whose task's state right after it is the one given and had not finished."""
    return _judge(sub, args, "ack", _ack_example,
                  lambda v: f"{v['ack.example_ack']} was a receipt: its task was {v['ack.task_state_after']} right after it")


def _fact_ref(values: dict) -> tuple[list[Broke], int]:
    ref = values.get("fact_table.ref")
    if ref is None:
        return [], 1
    facts = _facts()
    kind = facts["artifacts"].get(ref)
    if kind == "fact-table":
        return [], 1
    what = (f"names the {kind} stored in the run, not the fact table" if kind else
            "is the ref of nothing the run stored")
    return [Broke("[fact_table] ref", f"{ref[:19]}... {what}", symptoms=("ref-not-fact-table",),
                  reproduce=_RUN_STATE)], 1


def fact_table_by_ref(sub: Path, args: dict) -> Judged:
    """Where the fact table lives and how a result points at it (against the key), and its ref in
    the seed-0 run."""
    def held(v):
        cited = _facts()["cited"].get(v["fact_table.ref"], [])
        return f"{v['fact_table.ref'][:19]}... is the run's fact table" + (f", cited by {', '.join(cited)}" if cited else "")

    return _judge(sub, args, "fact_table", _fact_ref, held)


def _duplicate(values: dict) -> tuple[list[Broke], int]:
    mid, decision = values.get("publication.duplicate_message"), values.get("publication.second_decision")
    if mid is None:
        return [], 1
    mine = [d for d in _facts(("duplicate",))["deliveries"] if d["message_id"] == mid]
    if len(mine) < 2:
        n = len(mine)
        return [Broke("[publication] duplicate_message",
                      f"{mid} was delivered {'never' if n == 0 else 'once'} in the seed-0 run with --fault duplicate, "
                      "not twice", symptoms=("duplicate-not-found",), reproduce=_RUN_DUP)], 1
    if decision is None:
        return [], 1
    if mine[1]["decision"] != decision:
        return [Broke("[publication] second_decision", f"{mid}'s second delivery was not recorded {decision}: read "
                                                       "that delivery's decision", symptoms=("second-delivery-misread",),
                      reproduce=_RUN_DUP)], 2
    return [], 2


def publication_once(sub: Path, args: dict) -> Judged:
    """How to prove publication cannot run twice (the record, its unique column and the command that
    redelivers the log, against the key), and the message the duplicate run delivered twice with
    the decision its second delivery was recorded with."""
    return _judge(sub, args, "publication", _duplicate,
                  lambda v: f"{v['publication.duplicate_message']} was delivered twice and its second delivery was "
                            f"recorded {v['publication.second_decision']}")


def checklist(sub: Path, args: dict) -> Judged:
    """Each symptom of the seed's debugging checklist mapped to the check that finds it (against the key)."""
    return _judge(sub, args, "checklist", None, "each symptom is mapped to a check that finds it")


# --------------------------------------------------------------------------- behaviour


def _key() -> dict[str, list[str]]:
    """The accepted answers of every choice, from the exercise's tests with their hidden cases (an
    instructor's checkout); empty without the solutions."""
    from ..catalog import get_exercise

    key: dict[str, list[str]] = {}
    for t in get_exercise(7).graded_tests(True):
        if t.judge.startswith("selfcheck."):
            for c in _choices(t.args, CHOICES):
                key.setdefault(c["field"], []).extend(str(x) for x in c["accept"])
    return key


def behaviour(sub: Path) -> dict:
    """The answers normalised, for the mutation run (:mod:`sim.course.mutants`): each field as the
    allowed spelling of its answer, where an answer the key accepts is written as the key's first
    accepted answer (so an accepted alternative behaves as the model's); the ack example as
    "an ack of an unfinished task, with its state" when it is one of the run (any such ack shows the
    rule as well as another), the duplicate pair likewise, the ref as "the fact table's" when it is;
    a field that is not an answer as why not. Comments and the file's layout are abstracted away:
    no rule reads them."""
    a, bad = _answers(sub)
    if bad is not None:
        return {"unreadable": bad.message}
    key = _key()
    out: dict = {}
    values: dict[str, str] = {}
    for name in CHOICES:
        v, b = _form(a, name)
        if b is not None:
            out[name] = ["not an answer", list(b.symptoms)]
            continue
        values[name] = v
        accepted = key.get(name)
        out[name] = accepted[0] if accepted and _norm(v) in {_norm(x) for x in accepted} else v
    ack, _ = _ack_example(values)
    if "ack.example_ack" in values and "ack.task_state_after" in values and not ack:
        out["ack.example_ack"] = out["ack.task_state_after"] = "an ack of an unfinished task, with its state"
    ref, _ = _fact_ref(values)
    if "fact_table.ref" in values and not ref:
        out["fact_table.ref"] = "the fact table's ref"
    dup, _ = _duplicate(values)
    if "publication.duplicate_message" in values and "publication.second_decision" in values and not dup:
        out["publication.duplicate_message"] = out["publication.second_decision"] = "the duplicate and its decision"
    return out
