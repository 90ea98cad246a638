"""Scenarios: TOML files in ``data/scenarios/`` that say who runs what, under which faults.

A scenario names its agents (workers; the manager is always ``manager``), its tasks (who
does each, what it produces, what it waits for, what it publishes), budgets, a fault plan,
a seed and a start time. ``stress`` scenarios generate N independent tasks instead.

A scenario may also pin how its run goes: ``policy`` (the policy a run uses when none is asked for)
and ``deliveries``, an explicit delivery schedule, ``[[ROUND, "MESSAGE_ID"], ...]``: in each round the
transport delivers exactly the messages listed for it, in that order, and the run ends after the last
(:class:`sim.schedule.DeliveryPlan`). ``protolab explore`` and ``protolab shrink`` write such files
(:func:`scenario_toml`); ``protolab run`` of one replays that run exactly.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .envelope import role_of
from .errors import InputError, friendly_list
from .files import not_a_file
from .privacy import NONE as NO_PRIVACY, Privacy
from .resources import shipped

__all__ = ["TaskSpec", "GatherSpec", "ReviewSpec", "Settings", "StressSpec", "Scenario", "load_scenario", "scenario_names", "parse_scenario",
           "scenario_toml", "POLICY_NAMES", "bounds", "CEILING_PER_TASK"]

#: The policies a scenario may name (those of :mod:`sim.policy`; a test holds them equal).
POLICY_NAMES = ("safe", "naive")

_TIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


@dataclass(frozen=True)
class TaskSpec:
    id: str
    goal: str
    worker: str
    kind: str = "research"  # research: gathers facts; draft: writes from its inputs' artifacts
    after: tuple[str, ...] = ()
    publish: str | None = None
    budget: int = 3
    #: a reviewer's verdict, written into the artifact its result cites (a QUORUM gather's vote)
    vote: str | None = None


#: The rules a scenario's [[gather]] may declare, and FIRST_SUCCESS's deterministic tie-breaks
#: (those of :mod:`sim.protocol.trace`; a test holds them equal).
GATHER_RULES = ("ALL", "QUORUM", "FIRST_SUCCESS")
TIE_BREAKS = ("supplied-order", "lowest-sender")


@dataclass(frozen=True)
class GatherSpec:
    """A gather the runtime reduces once every member task is settled (:mod:`sim.gathers`): its
    membership (tasks, hence their workers) and its rule are frozen here, before anything is sent."""

    id: str
    over: tuple[str, ...]
    rule: str
    threshold: int | None = None
    tie_break: str | None = None
    #: rounds after the gather opens (its first member's request is delivered) that it waits for
    #: contributions: the deadline the trace declares; past it the safe runtime reduces what arrived
    deadline: int = 0


@dataclass(frozen=True)
class ReviewSpec:
    """A reviewer's decision the scenario scripts: ``after`` rounds after the manager fences the
    conversation, the reviewer decides ``task`` (``ready``: run it again; ``canceled``), citing the task's
    results as retained evidence. Delivered through intake like any decision: a runtime that accepts it
    reopens the conversation in its next epoch."""

    task: str
    decision: str
    after: int = 1


@dataclass(frozen=True)
class Settings:
    lease_ticks: int = 4  # a running task whose lease is older than this expires
    work_ticks: int = 2  # rounds a worker needs between starting and answering
    retry_ticks: int = 6  # rounds a sender waits for its message to take effect before retrying
    delay_ticks: int = 9  # how late a delayed message arrives
    zombie_ticks: int = 0  # rounds after it notices the recovery before a crashed worker's stale commit is sent
    gather_ticks: int = 0  # rounds a gather (a task after several) waits for its inputs; 0: no deadline
    max_rounds: int = 400
    # The conversation's declared bounds (the trace's deadline and messageCeiling), fixed before anything
    # is sent and kept during the run by a runtime that keeps the conversation's rules:
    deadline_ticks: int = 0  # rounds after an epoch opens by which its messages must arrive; 0: max_rounds
    message_ceiling: int = 0  # messages an epoch of the conversation may take; 0: CEILING_PER_TASK per task
    expires_ticks: int = 0  # rounds a message stays valid after it is sent (its expires_at); 0: it never expires


@dataclass(frozen=True)
class StressSpec:
    tasks: int = 1000
    duplicate_rate: float = 0.05
    conflict_rate: float = 0.01
    window: int = 64  # tasks in flight at once (memory stays flat as tasks grow)


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    seed: int
    start_time: str
    trace: str
    workers: tuple[str, ...]
    tasks: tuple[TaskSpec, ...]
    faults: tuple[str, ...] = ()
    settings: Settings = field(default_factory=Settings)
    stress: StressSpec | None = None
    privacy: Privacy = NO_PRIVACY  # sensitive payload fields and who needs which (sim.privacy)
    #: the policy a run uses when none is asked for (None: the command's default, safe)
    policy: str | None = None
    #: an explicit delivery schedule: (round, message id) in delivery order (empty: what is due, in send order)
    deliveries: tuple[tuple[int, str], ...] = ()
    #: gathers the runtime reduces (empty: none; a task after several is still an ALL gather in the trace)
    gathers: tuple[GatherSpec, ...] = ()
    #: seconds each sender's clock is off (its envelopes' created_at); logical time is unaffected
    clocks: tuple[tuple[str, int], ...] = ()
    #: reviewers' decisions the scenario scripts after the fence (empty: a reviewer only decides by hand)
    reviews: tuple[ReviewSpec, ...] = ()


#: The message ceiling a scenario that declares none gets, per task of its story (and once more for the
#: conversation's own messages): far more than any run of its story sends.
CEILING_PER_TASK = 64


def bounds(sc: "Scenario") -> dict:
    """The conversation's declared bounds for a run of ``sc``, its defaults filled in: what the run records
    (meta ``conversation``), the runtime keeps and the exported trace declares."""
    s = sc.settings
    tasks = sc.stress.tasks if sc.stress is not None else len(sc.tasks)
    return {"trace": sc.trace, "deadline_ticks": s.deadline_ticks or s.max_rounds,
            "message_ceiling": s.message_ceiling or CEILING_PER_TASK * (tasks + 1),
            "expires_ticks": s.expires_ticks, "acknowledgers": len(sc.workers)}


def _err(source: str, msg: str, code: str = "E_SCENARIO") -> InputError:
    return InputError(f"{source}: {msg}", code=code)


def _take(table: dict, allowed: dict[str, type], source: str, required=()) -> dict:
    extra = sorted(set(table) - set(allowed))
    if extra:
        raise _err(source, f"unknown key {extra[0]!r}; expected: {friendly_list(allowed)}")
    for k in required:
        if k not in table:
            raise _err(source, f"{k!r} is missing", "E_MISSING_FIELD")
    for k, v in table.items():
        want = allowed[k]
        ok = isinstance(v, want) and not (want in (int, float) and isinstance(v, bool))
        if want is float and isinstance(v, int) and not isinstance(v, bool):
            ok = True
        if not ok:
            raise _err(source, f"{k!r} must be {want.__name__}, got {type(v).__name__}", "E_FIELD_TYPE")
    return table


def parse_scenario(data: dict, *, source: str) -> Scenario:
    """Validate decoded TOML into a :class:`Scenario`."""
    _take(
        data,
        {"name": str, "description": str, "seed": int, "start_time": str, "trace": str, "workers": list,
         "task": list, "faults": list, "settings": dict, "stress": dict, "privacy": dict, "policy": str,
         "deliveries": list, "gather": list, "clocks": dict, "review": list},
        source,
        required=("name", "workers"),
    )
    start = data.get("start_time", "2026-07-13T04:00:00Z")
    if not _TIME_RE.match(start):
        raise _err(source, f"start_time {start!r} must look like 2026-07-13T04:00:00Z", "E_FIELD_VALUE")
    workers = data["workers"]
    if not workers or not all(isinstance(w, str) for w in workers):
        raise _err(source, "'workers' must be a non-empty list of participant ids", "E_FIELD_TYPE")
    for w in workers:
        if role_of(w) not in ("researcher", "writer"):
            raise _err(source, f"worker {w!r} must be a researcher or a writer", "E_UNKNOWN_ROLE")
    if len(set(workers)) != len(workers):
        raise _err(source, "'workers' lists a participant twice")
    settings = Settings(**_take(data.get("settings", {}), {k: int for k in Settings.__dataclass_fields__}, source + " [settings]"))
    for k, v in vars(settings).items():
        if v < 0 or (k in ("lease_ticks", "work_ticks", "retry_ticks", "max_rounds") and v < 1):
            raise _err(source, f"settings.{k} must be positive, got {v}", "E_FIELD_VALUE")
    stress = None
    if "stress" in data:
        st = _take(data["stress"], {"tasks": int, "duplicate_rate": float, "conflict_rate": float, "window": int}, source + " [stress]")
        stress = StressSpec(**st)
        if stress.tasks < 1 or stress.window < 1 or not (0 <= stress.duplicate_rate <= 1) or not (0 <= stress.conflict_rate <= 1):
            raise _err(source, "stress needs tasks >= 1, window >= 1 and rates between 0 and 1", "E_FIELD_VALUE")
    tasks = []
    ids = set()
    for i, t in enumerate(data.get("task", [])):
        where = f"{source} task {i + 1}"
        if not isinstance(t, dict):
            raise _err(where, "expected a table")
        _take(t, {"id": str, "goal": str, "worker": str, "kind": str, "after": list, "publish": str, "budget": int,
                  "vote": str},
              where, required=("id", "goal", "worker"))
        if t["worker"] not in workers:
            raise _err(where, f"worker {t['worker']!r} is not in workers ({friendly_list(workers)})", "E_UNKNOWN_ROLE")
        if t.get("kind", "research") not in ("research", "draft"):
            raise _err(where, f"kind {t['kind']!r}; expected one of: 'research' or 'draft'", "E_UNKNOWN_VALUE")
        for dep in t.get("after", []):
            if dep not in ids:
                raise _err(where, f"'after' names {dep!r}, which is not an earlier task", "E_FIELD_VALUE")
        if t["id"] in ids:
            raise _err(where, f"task id {t['id']!r} is used twice")
        ids.add(t["id"])
        tasks.append(TaskSpec(t["id"], t["goal"], t["worker"], t.get("kind", "research"), tuple(t.get("after", [])),
                              t.get("publish"), t.get("budget", 3), t.get("vote")))
    if not tasks and stress is None:
        raise _err(source, "a scenario needs [[task]] entries or a [stress] table", "E_MISSING_FIELD")
    faults = data.get("faults", [])
    if not all(isinstance(f, str) for f in faults):
        raise _err(source, "'faults' must be a list of strings like 'duplicate:M-3'", "E_FIELD_TYPE")
    privacy = _privacy(data.get("privacy"), workers, source) if "privacy" in data else NO_PRIVACY
    policy = data.get("policy")
    if policy is not None and policy not in POLICY_NAMES:
        raise _err(source, f"policy {policy!r}; expected one of: {friendly_list(POLICY_NAMES)}", "E_UNKNOWN_POLICY")
    deliveries = _deliveries(data.get("deliveries", []), source, settings, stress)
    gathers = _gathers(data.get("gather", []), ids, source, settings)
    reviews = _reviews(data.get("review", []), ids, source)
    clocks = data.get("clocks", {})
    for who, off in clocks.items():
        if who not in workers or not isinstance(off, int) or isinstance(off, bool):
            raise _err(source + " [clocks]", f"{who!r} must be a worker and its offset whole seconds", "E_FIELD_VALUE")
    return Scenario(
        name=data["name"], description=data.get("description", ""), seed=data.get("seed", 0), start_time=start,
        trace=data.get("trace", "R-1"), workers=tuple(workers), tasks=tuple(tasks), faults=tuple(faults),
        settings=settings, stress=stress, privacy=privacy, policy=policy, deliveries=deliveries,
        gathers=gathers, clocks=tuple(sorted(clocks.items())), reviews=reviews,
    )


def _reviews(entries: list, task_ids: set, source: str) -> tuple[ReviewSpec, ...]:
    out: list[ReviewSpec] = []
    for i, r in enumerate(entries):
        where = f"{source} review {i + 1}"
        if not isinstance(r, dict):
            raise _err(where, "expected a table")
        _take(r, {"task": str, "decision": str, "after": int}, where, required=("task", "decision"))
        if r["task"] not in task_ids:
            raise _err(where, f"task {r['task']!r} is not a task of this scenario", "E_FIELD_VALUE")
        if r["decision"] not in ("ready", "canceled"):
            raise _err(where, f"decision {r['decision']!r}; expected one of: 'ready' or 'canceled'", "E_UNKNOWN_VALUE")
        if r.get("after", 1) < 1:
            raise _err(where, "'after' must be at least 1 round", "E_FIELD_VALUE")
        out.append(ReviewSpec(r["task"], r["decision"], r.get("after", 1)))
    return tuple(out)


#: The deadline of a gather that declares none, and the scenario none either (settings.gather_ticks).
GATHER_DEADLINE = 40


def _gathers(entries: list, task_ids: set, source: str, settings: Settings) -> tuple[GatherSpec, ...]:
    out: list[GatherSpec] = []
    for i, g in enumerate(entries):
        where = f"{source} gather {i + 1}"
        if not isinstance(g, dict):
            raise _err(where, "expected a table")
        _take(g, {"id": str, "over": list, "rule": str, "threshold": int, "tie_break": str, "deadline": int}, where,
              required=("id", "over", "rule"))
        deadline = g.get("deadline", settings.gather_ticks or GATHER_DEADLINE)
        if deadline < 1:
            raise _err(where, f"deadline must be at least 1 round, got {deadline}", "E_FIELD_VALUE")
        if g["rule"] not in GATHER_RULES:
            raise _err(where, f"rule {g['rule']!r}; expected one of: {friendly_list(GATHER_RULES)}", "E_UNKNOWN_VALUE")
        over = g["over"]
        if not over or any(t not in task_ids for t in over) or len(set(over)) != len(over):
            raise _err(where, "'over' must list distinct tasks of this scenario", "E_FIELD_VALUE")
        th, tb = g.get("threshold"), g.get("tie_break")
        if (g["rule"] == "QUORUM") != (th is not None) or (th is not None and not 1 <= th <= len(over)):
            raise _err(where, f"a QUORUM gather, and only one, needs a threshold between 1 and {len(over)}", "E_FIELD_VALUE")
        if (g["rule"] == "FIRST_SUCCESS") != (tb is not None) or (tb is not None and tb not in TIE_BREAKS):
            raise _err(where, f"a FIRST_SUCCESS gather, and only one, needs a tie_break: {friendly_list(TIE_BREAKS)}",
                       "E_FIELD_VALUE")
        if any(o.id == g["id"] for o in out):
            raise _err(where, f"gather id {g['id']!r} is used twice")
        out.append(GatherSpec(g["id"], tuple(over), g["rule"], th, tb, deadline))
    return tuple(out)


_MESSAGE_ID_RE = re.compile(r"^[A-Z][A-Za-z]*-\d+$")


def _deliveries(entries: list, source: str, settings: Settings, stress) -> tuple[tuple[int, str], ...]:
    """``deliveries = [[ROUND, "M-1"], ...]``: rounds from 1 up (never going back), each a message id."""
    out = []
    last = 1
    for i, e in enumerate(entries, 1):
        if not (isinstance(e, list) and len(e) == 2 and isinstance(e[0], int) and not isinstance(e[0], bool)
                and isinstance(e[1], str)):
            raise _err(source, f'deliveries entry {i} must be [ROUND, "MESSAGE_ID"], got {e!r}', "E_FIELD_TYPE")
        rnd, mid = e
        if not _MESSAGE_ID_RE.match(mid):
            raise _err(source, f"deliveries entry {i}: {mid!r} is not a message id like 'M-3'", "E_FIELD_VALUE")
        if rnd < last or rnd > settings.max_rounds:
            raise _err(source, f"deliveries entry {i}: round {rnd} must be between {last} (the round before it) and "
                               f"settings.max_rounds ({settings.max_rounds})", "E_FIELD_VALUE")
        last = rnd
        out.append((rnd, mid))
    if out and stress is not None:
        raise _err(source, "a stress scenario cannot carry a delivery schedule", "E_FIELD_VALUE")
    return tuple(out)


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a TOML basic string: JSON's escapes are TOML's
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(type(v).__name__)  # pragma: no cover


def scenario_toml(sc: Scenario, comment: str = "") -> str:
    """``sc`` as a scenario file that :func:`load_scenario` reads back equal (``comment``: lines put
    first, each after ``# ``). Every setting is written, so the file does not depend on defaults."""
    lines = [f"# {c}".rstrip() for c in comment.splitlines()]
    top = {"name": sc.name, "description": sc.description, "seed": sc.seed, "start_time": sc.start_time,
           "trace": sc.trace, "workers": list(sc.workers), "faults": list(sc.faults)}
    if sc.policy is not None:
        top["policy"] = sc.policy
    lines += [f"{k} = {_toml_value(v)}" for k, v in top.items()]
    if sc.deliveries:
        lines.append("# the delivery schedule: [round, message id], delivered in this order; the run ends after the last")
        lines.append("deliveries = [")
        lines += [f"  [{r}, {_toml_value(m)}]," for r, m in sc.deliveries]
        lines.append("]")
    for t in sc.tasks:
        lines += ["", "[[task]]", f"id = {_toml_value(t.id)}", f"goal = {_toml_value(t.goal)}",
                  f"worker = {_toml_value(t.worker)}", f"kind = {_toml_value(t.kind)}"]
        if t.after:
            lines.append(f"after = {_toml_value(list(t.after))}")
        if t.publish is not None:
            lines.append(f"publish = {_toml_value(t.publish)}")
        lines.append(f"budget = {t.budget}")
        if t.vote is not None:
            lines.append(f"vote = {_toml_value(t.vote)}")
    for g in sc.gathers:
        lines += ["", "[[gather]]", f"id = {_toml_value(g.id)}", f"over = {_toml_value(list(g.over))}",
                  f"rule = {_toml_value(g.rule)}"]
        if g.threshold is not None:
            lines.append(f"threshold = {g.threshold}")
        if g.tie_break is not None:
            lines.append(f"tie_break = {_toml_value(g.tie_break)}")
        lines.append(f"deadline = {g.deadline}")
    for r in sc.reviews:
        lines += ["", "[[review]]", f"task = {_toml_value(r.task)}", f"decision = {_toml_value(r.decision)}",
                  f"after = {r.after}"]
    if sc.clocks:
        lines += ["", "[clocks]"] + [f"{json.dumps(k)} = {v}" for k, v in sc.clocks]
    lines += ["", "[settings]"] + [f"{k} = {v}" for k, v in vars(sc.settings).items()]
    if sc.stress is not None:
        lines += ["", "[stress]"] + [f"{k} = {_toml_value(v)}" for k, v in vars(sc.stress).items()]
    if sc.privacy:
        lines += ["", "[privacy]", f"sensitive = {_toml_value(list(sc.privacy.sensitive))}"]
        if sc.privacy.needs:
            lines += ["", "[privacy.needs]"] + [f"{json.dumps(k)} = {_toml_value(list(v))}"
                                                for k, v in sc.privacy.needs.items()]
    return "\n".join(lines) + "\n"


def _privacy(table: dict, workers, source: str) -> Privacy:
    where = source + " [privacy]"
    _take(table, {"sensitive": list, "needs": dict}, where, required=("sensitive",))
    sensitive = table["sensitive"]
    if not sensitive or not all(isinstance(f, str) and f for f in sensitive):
        raise _err(where, "'sensitive' must be a non-empty list of payload field names", "E_FIELD_TYPE")
    if len(set(sensitive)) != len(sensitive):
        raise _err(where, "'sensitive' lists a field twice", "E_FIELD_VALUE")
    needs = {}
    for who, fields in table.get("needs", {}).items():
        if who != "manager" and who not in workers:
            raise _err(where, f"needs names {who!r}, who is neither the manager nor a worker "
                              f"({friendly_list(['manager', *workers])})", "E_UNKNOWN_ROLE")
        if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
            raise _err(where, f"needs.{who} must be a list of field names", "E_FIELD_TYPE")
        unknown = [f for f in fields if f not in sensitive]
        if unknown:
            raise _err(where, f"needs.{who} names {unknown[0]!r}, which is not in 'sensitive'", "E_FIELD_VALUE")
        needs[who] = tuple(fields)
    return Privacy(tuple(sensitive), needs)


def scenario_names() -> list[str]:
    return sorted(p.stem for p in shipped("data", "scenarios").glob("*.toml"))


def load_scenario(name_or_path: str) -> Scenario:
    """A shipped scenario by name (``publish-report``) or a TOML file by path."""
    p = Path(name_or_path)
    if not (p.suffix == ".toml" and p.exists()):
        p = shipped("data", "scenarios", f"{name_or_path}.toml")
        if not p.exists():
            raise InputError(
                f"unknown scenario {name_or_path!r}; expected one of: {friendly_list(scenario_names())} or a .toml file",
                code="E_UNKNOWN_SCENARIO",
            )
    if (special := not_a_file(p, "scenario")) is not None:  # a FIFO or a device: never waited on
        raise special
    try:
        data = tomllib.loads(p.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError(f"scenario {p.name} is not UTF-8", code="E_NOT_UTF8") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"scenario {p.name} is not valid TOML: {e}", code="E_TOML") from e
    return parse_scenario(data, source=p.name)
