"""A minimal scenario checked, not trusted: what ``shrink`` returns and what ``explore`` reports.

:func:`problems` judges a scenario that claims to reproduce a run's broken invariant (``shrink``'s
result, ``explore``'s counterexample) from the outside: it shares no code with the search that made it
(no :mod:`sim.shrink`, no :mod:`sim.explore`), only the scenario file format, the runner and the
invariants, so a bug in the search cannot vouch for itself. The scenario must:

1. load: written as a scenario file (:func:`sim.scenario.scenario_toml`) it parses back, through the
   file's schema (:func:`sim.scenario.parse_scenario`), to the same scenario;
2. be the same story: the workers, settings, start time, trace, privacy and clocks of the original; each
   task one of the original's, unchanged; each fault one of the original run's faults (by name);
3. keep every task a task depends on (``after``), and every task a gather or a review names;
4. run at the original seed and policy (the file says so: ``protolab run FILE`` replays it) and
   reproduce: its run, as ``protolab run`` makes it (the runner, its faults strict), breaks the same
   invariant;
5. be minimal. ``minimal="one"`` (shrink's promise): 1-minimal, removing any one more element, a task
   (with the tasks that wait for it), a fault or a delivery of its schedule, makes the invariant hold. A
   candidate that cannot be played (its schedule names a message that is not on the bus then:
   E_SCHEDULE) reproduces nothing. One delivery is not removed from a schedule of one (a schedule of
   none is the run's own order, not a smaller one). ``minimal="shortest"`` (explore's promise, a
   shortest path among orders that deliver one message a round: a delivery of it may still be one a
   scheduled run can leave out, an ack, which ``protolab shrink`` of its run removes): removing any one
   fault makes the invariant hold, and no proper prefix of its schedule breaks it. ``None`` (an
   interrupted shrink, which says it may not be minimal): no minimality.

:func:`require` raises :class:`Unchecked` (a :class:`~sim.errors.ProtolabError`: the CLI says
``error: CODE: message`` and exits 2) naming the first property that fails.
"""

from __future__ import annotations

import dataclasses
import tomllib

from .errors import ProtolabError
from .faults import parse_fault
from .invariants import check
from .runner import run_scenario
from .scenario import Scenario, parse_scenario, scenario_toml

__all__ = ["problems", "require", "Unchecked", "reproduces"]

#: What must be the original's in a scenario made from it (what shrink and explore may change is not here).
SAME_STORY = ("workers", "settings", "start_time", "trace", "privacy", "clocks", "stress")


class Unchecked(ProtolabError):
    """A minimal scenario (or counterexample) failed its check: it is not printed or written."""

    code = "E_SHRINK_UNCHECKED"


def reproduces(sc: Scenario, invariant: str, *, policy: str, seed: int, plugins=None, strict: bool = False) -> bool:
    """Whether the run of ``sc`` (by the runner, as ``protolab run`` makes it) breaks ``invariant``. A schedule
    that cannot be followed (E_SCHEDULE) reproduces nothing; with ``strict`` a fault that hits no message is
    refused as ``protolab run`` refuses it (E_FAULT_NO_MATCH), otherwise it just does not fire."""
    try:
        store = run_scenario(sc, policy=policy, seed=seed, plugins=plugins, strict_faults=strict)
    except ProtolabError as e:
        if e.code == "E_SCHEDULE":
            return False
        raise
    try:
        return any(r.name == invariant and not r.ok for r in check(store))
    finally:
        store.close()


def _without_task(sc: Scenario, tid: str) -> Scenario:
    """``sc`` without task ``tid``, every task that waits for it (transitively), and the gathers and reviews
    that name one of them: one element less, and still a scenario that loads."""
    gone = {tid}
    tasks = []
    for t in sc.tasks:  # (a task's dependencies come before it)
        if t.id in gone or gone & set(t.after):
            gone.add(t.id)
        else:
            tasks.append(t)
    return dataclasses.replace(sc, tasks=tuple(tasks), gathers=tuple(g for g in sc.gathers if not gone & set(g.over)),
                               reviews=tuple(r for r in sc.reviews if r.task not in gone))


def problems(original: Scenario, scenario: Scenario, invariant: str, *, policy: str, seed: int, faults=(),
             plugins=None, minimal: str | None = "one") -> list[str]:
    """What is wrong with ``scenario``, a scenario made from the run of ``original`` (at ``seed``, under
    ``policy``, with ``faults`` on top of its own) that claims to reproduce ``invariant``: empty when it
    has every property of this module's docstring (minimality as ``minimal`` says: "one", "shortest" or
    None). The first of properties 1-4 that fails ends the check (the later ones need it)."""
    # 1. it loads: the file's text parses back, through the schema, to the same scenario
    text = scenario_toml(scenario, comment="checked")
    try:
        loaded = parse_scenario(tomllib.loads(text), source=f"{scenario.name}.toml")
    except (ProtolabError, tomllib.TOMLDecodeError) as e:
        return [f"it does not load: {e}"]
    if loaded != scenario:
        return ["it does not read back as itself from its scenario file"]
    # 2. the same story: its parts are the original's
    for name in SAME_STORY:
        if getattr(loaded, name) != getattr(original, name):
            return [f"its {name} is not the original's"]
    tasks = {t.id: t for t in original.tasks}
    for t in loaded.tasks:
        if tasks.get(t.id) != t:
            return [f"task {t.id} is not one of the original's tasks as it was"]
    names = {parse_fault(f).name for f in (*original.faults, *faults)}
    for f in loaded.faults:
        if parse_fault(f).name not in names:
            return [f"fault {f} is none of the run's faults ({', '.join(sorted(names)) or 'none'})"]
    # 3. every task a task depends on is kept
    ids = {t.id for t in loaded.tasks}
    for t in loaded.tasks:
        for d in t.after:
            if d not in ids:
                return [f"task {t.id} depends on {d}, which it dropped"]
    for g in loaded.gathers:
        if not set(g.over) <= ids:
            return [f"gather {g.id} names a task it dropped"]
    for r in loaded.reviews:
        if r.task not in ids:
            return [f"a review names {r.task}, which it dropped"]
    if not loaded.tasks:
        return ["it has no task"]
    # 4. the original seed and policy, written down, and the failure reproduced
    if loaded.seed != seed:
        return [f"it is made at seed {loaded.seed}; the run's seed is {seed}"]
    if loaded.policy != policy:
        return [f"its policy is {loaded.policy}; the run's is {policy}"]
    try:
        if not reproduces(loaded, invariant, policy=policy, seed=seed, plugins=plugins, strict=True):
            return [f"its run does not break {invariant}"]
    except ProtolabError as e:
        return [f"it does not run: {e.one_line()}"]
    if minimal is None:
        return []
    if minimal not in ("one", "shortest"):
        raise ValueError(f"minimal={minimal!r}")
    # 5. minimal: one element less (or, for "shortest", a schedule cut short), and the invariant holds
    out = []

    def still(sc: Scenario, what: str) -> None:
        try:
            if reproduces(sc, invariant, policy=policy, seed=seed, plugins=plugins):
                out.append(f"it is not minimal: without {what} its run still breaks {invariant}")
        except ProtolabError as e:
            out.append(f"without {what} it does not run: {e.one_line()}")

    if minimal == "one" and len(loaded.tasks) > 1:
        for t in loaded.tasks:
            still(_without_task(loaded, t.id), f"task {t.id}")
    for i, f in enumerate(loaded.faults):
        still(dataclasses.replace(loaded, faults=loaded.faults[:i] + loaded.faults[i + 1:]), f"fault {f}")
    if minimal == "shortest":
        for k in range(1, len(loaded.deliveries)):
            still(dataclasses.replace(loaded, deliveries=loaded.deliveries[:k]), f"its last {len(loaded.deliveries) - k} "
                  f"deliveries (the first {k} only)")
    elif len(loaded.deliveries) > 1:
        for i, (r, m) in enumerate(loaded.deliveries):
            still(dataclasses.replace(loaded, deliveries=loaded.deliveries[:i] + loaded.deliveries[i + 1:]),
                  f"delivery {i + 1} ({m} in round {r})")
    return out


def require(original: Scenario, scenario: Scenario, invariant: str, *, policy: str, seed: int, faults=(),
            plugins=None, minimal: str | None = "one", what: str = "shrink's result",
            code: str = "E_SHRINK_UNCHECKED") -> None:
    """:func:`problems`, or :class:`Unchecked` (``code``) naming the first."""
    found = problems(original, scenario, invariant, policy=policy, seed=seed, faults=faults, plugins=plugins,
                     minimal=minimal)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise Unchecked(f"{what} failed its check, so it is neither shown nor written: {found[0]}{more}", code=code)
