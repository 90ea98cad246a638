"""A failing run shrunk to a minimal one: delta debugging over its tasks, faults and deliveries.

:func:`shrink` takes a run that breaks an invariant (a database written by ``protolab run``) and looks
for the smallest scenario whose run still breaks it:

1. the run is played again from its scenario, seed, policy and faults (it must reach the database's
   state digest, or it is not the run the file holds);
2. tasks: whole tasks are dropped (with the tasks that wait for them), each candidate run the usual
   way (its own delivery order), while the invariant still breaks;
3. the run is pinned down: its faults named by the message each hit, its deliveries as an explicit
   schedule (:class:`sim.schedule.DeliveryPlan`, which replays it exactly);
4. tasks (again, the schedule now pinned), faults and deliveries are shrunk by ddmin (Zeller and
   Hildebrandt) until none loses one more element: removing any one task (with the tasks that wait for
   it), fault or delivery makes the failure go away (1-minimal). A candidate whose schedule names a
   message that is not on the bus then is no failure.

The result is checked, not trusted, by :mod:`sim.shrinkcheck` (which shares no code with this search)
before the CLI writes it.

The result is a plain scenario (:func:`sim.scenario.scenario_toml`): ``protolab run`` replays it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Sequence

from .errors import InputError, ProtolabError
from .invariants import check
from .policy import get_policy
from .runner import Run, fault_specs, new_run
from .scenario import Scenario, load_scenario

__all__ = ["Shrunk", "shrink", "shrink_scenario", "ddmin", "breaks", "played"]


@dataclass
class Shrunk:
    """What shrinking found: the invariant, the scenario before and after, and how many runs it took."""

    invariant: str
    before: Scenario
    after: Scenario
    deliveries_before: int
    faults_before: tuple[str, ...]
    runs: int = 0
    interrupted: bool = False
    policy: str = "safe"  # the run's policy and seed, which the result pins
    seed: int = 0

    def to_dict(self) -> dict:
        return {"invariant": self.invariant, "deliveries_before": self.deliveries_before,
                "deliveries_after": len(self.after.deliveries), "tasks_before": len(self.before.tasks),
                "tasks_after": len(self.after.tasks), "faults_before": list(self.faults_before),
                "faults_after": list(self.after.faults), "runs": self.runs, "interrupted": self.interrupted,
                "deliveries": [list(d) for d in self.after.deliveries]}


def ddmin(items: Sequence, fails: Callable[[list], bool]) -> list:
    """The smallest sublist (order kept) that still ``fails``, by delta debugging: ``items`` must fail;
    the result is 1-minimal (no single element can be removed and still fail)."""
    items = list(items)
    n = 2
    while len(items) >= 2:
        size = len(items) // n
        chunks = [items[i:i + size] for i in range(0, len(items), size)] if size else [[x] for x in items]
        reduced = False
        for chunk in chunks:  # a chunk alone
            if fails(chunk):
                items, n, reduced = chunk, 2, True
                break
        if not reduced:
            for i in range(len(chunks)):  # everything but a chunk
                rest = [x for j, c in enumerate(chunks) if j != i for x in c]
                if fails(rest):
                    items, n, reduced = rest, max(n - 1, 2), True
                    break
        if not reduced:
            if n >= len(items):
                break
            n = min(len(items), n * 2)
    if len(items) == 1 and fails([]):
        return []
    return items


class _Placing:
    """Notes which message each fault hit (see :func:`played`)."""

    def __init__(self, record):
        self.record = record
        self.placed: list[str] = []

    def __call__(self, fault: str, env, detail: dict) -> None:
        text = f"{detail.get('selector', fault).split(':', 1)[0]}:{env.message_id}"
        if text not in self.placed:
            self.placed.append(text)
        self.record(fault, env, detail)


def played(scenario: Scenario, policy, seed, faults=(), plugins=None) -> Run:
    """Run ``scenario`` through in memory (its delivery schedule, if it has one); the run is returned,
    its store open, with ``run.bus._record.placed``: the faults named by the message each hit."""
    design, rulebook, plugged = None, None, None
    if plugins is not None and plugins.any():
        design, pol, rulebook = plugins.load(policy)
        plugged = plugins.meta()
    else:
        pol = get_policy(policy)
    run = new_run(scenario, pol, seed, fault_specs(scenario, faults), None, design=design, rulebook=rulebook,
                  plugged=plugged)
    run.bus._record = _Placing(run.bus._record)
    try:
        run.run()
    except BaseException:
        run.store.close()
        raise
    return run


def breaks(scenario: Scenario, invariant: str, *, policy, seed, plugins=None) -> bool:
    """Whether the run of ``scenario`` breaks ``invariant`` (a schedule it cannot follow: no)."""
    try:
        run = played(scenario, policy, seed, plugins=plugins)
    except ProtolabError as e:
        if e.code in ("E_SCHEDULE",):
            return False
        raise
    try:
        return any(r.name == invariant and not r.ok for r in check(run.store))
    finally:
        run.store.close()


def _without_tasks(sc: Scenario, drop: set[str]) -> Scenario:
    """``sc`` without the tasks in ``drop``, every task that waits for one of them, and the gathers and
    reviews that name one of those."""
    keep = []
    gone = set(drop)
    for t in sc.tasks:
        if t.id in gone or any(d in gone for d in t.after):
            gone.add(t.id)
        else:
            keep.append(t)
    return dataclasses.replace(sc, tasks=tuple(keep), gathers=tuple(g for g in sc.gathers if not gone & set(g.over)),
                               reviews=tuple(r for r in sc.reviews if r.task not in gone))


def shrink_scenario(scenario: Scenario, invariant: str, *, policy: str, seed: int | None = None, faults=(),
                    plugins=None, progress: Callable[[int], None] | None = None) -> Shrunk:
    """Shrink the run of ``scenario`` (with ``faults`` on top of its own), which must break ``invariant``."""
    seed = scenario.seed if seed is None else seed
    runs = 0

    def fails(sc: Scenario) -> bool:
        nonlocal runs
        runs += 1
        if progress is not None:
            progress(runs)
        return breaks(sc, invariant, policy=policy, seed=seed, plugins=plugins)

    base = dataclasses.replace(scenario, faults=(*scenario.faults, *faults))
    first = played(base, policy, seed, plugins=plugins)
    try:
        broken = [r.name for r in check(first.store) if not r.ok]
        before = [(d["tick"], d["message_id"]) for d in first.store.deliveries()]
    finally:
        first.store.close()
    if invariant not in broken:
        raise InputError(f"the run of {scenario.name} does not break {invariant} (broken: {', '.join(broken) or 'none'})",
                         code="E_SHRINK_NOT_FAILING")
    result = Shrunk(invariant, base, base, len(before), base.faults, policy=policy, seed=seed)
    try:
        # 2. tasks, each candidate in its own delivery order (ids move when a task goes)
        sc = base
        if not sc.deliveries and len(sc.tasks) > 1:
            ids = ddmin([t.id for t in sc.tasks], lambda kept: bool(kept) and fails(
                _without_tasks(sc, {t.id for t in sc.tasks} - set(kept))))
            sc = _without_tasks(sc, {t.id for t in sc.tasks} - set(ids))
        # 3. pinned: faults by the message they hit, deliveries as a schedule
        if not sc.deliveries:
            run = played(sc, policy, seed, plugins=plugins)
            try:
                sc = dataclasses.replace(sc, faults=tuple(run.bus._record.placed),
                                         deliveries=tuple((d["tick"], d["message_id"]) for d in run.store.deliveries()))
            finally:
                run.store.close()
        # 4. tasks (now with the schedule pinned: a task none of its deliveries needs may go), faults and
        # deliveries, until none loses one more
        while True:
            size = (len(sc.tasks), len(sc.faults), len(sc.deliveries))
            if len(sc.tasks) > 1:
                pinned = sc
                ids = ddmin([t.id for t in pinned.tasks], lambda kept: bool(kept) and fails(
                    _without_tasks(pinned, {t.id for t in pinned.tasks} - set(kept))))  # noqa: B023 (called within this iteration)
                sc = _without_tasks(pinned, {t.id for t in pinned.tasks} - set(ids))
            fs = ddmin(sc.faults, lambda kept: fails(dataclasses.replace(sc, faults=tuple(kept))))  # noqa: B023 (called within this iteration)
            sc = dataclasses.replace(sc, faults=tuple(fs))
            ds = ddmin(sc.deliveries, lambda kept: bool(kept) and fails(dataclasses.replace(sc, deliveries=tuple(kept))))  # noqa: B023 (called within this iteration)
            sc = dataclasses.replace(sc, deliveries=tuple(ds))
            result.after = sc
            if (len(sc.tasks), len(sc.faults), len(sc.deliveries)) == size:
                break
    except KeyboardInterrupt:
        result.interrupted = True
    result.runs = runs
    result.after = dataclasses.replace(result.after, name=f"{scenario.name}-minimal", policy=policy, seed=seed,
                                       description=f"{scenario.name} shrunk: {len(result.after.deliveries)} deliveries "
                                                   f"that still break {invariant}")
    return result


def shrink(store, *, scenario: Scenario | None = None, invariant: str | None = None, plugins=None,
           progress: Callable[[int], None] | None = None) -> Shrunk:
    """Shrink the failing run ``store`` holds: its scenario (by name from its meta, or ``scenario``),
    seed, policy and faults played again, then shrunk to a minimal run breaking ``invariant`` (default:
    the first it breaks)."""
    name = store.get_meta("scenario")
    if name is None:
        raise InputError("this database holds hand-delivered messages, not a simulator run: nothing to shrink",
                         code="E_SHRINK_NOT_A_RUN")
    if scenario is None:
        try:
            scenario = load_scenario(name)
        except InputError:
            raise InputError(f"the run's scenario {name!r} is not a shipped one: pass its file with --scenario",
                             code="E_SHRINK_SCENARIO") from None
    elif scenario.name != name:
        raise InputError(f"--scenario is {scenario.name!r}, but the run is of {name!r}", code="E_SHRINK_SCENARIO")
    if scenario.stress is not None:
        raise InputError(f"{name} is a stress scenario; shrink takes a scenario with a fixed task list", code="E_USAGE")
    policy = store.get_meta("policy") or "safe"
    seed = int(store.get_meta("seed") or 0)
    faults = [f for f in (store.get_meta("faults") or "").split(",") if f]
    broken = [r.name for r in check(store) if not r.ok]
    if not broken:
        raise InputError("every invariant holds in this run: nothing to shrink", code="E_SHRINK_NOT_FAILING")
    if invariant is None:
        invariant = broken[0]
    elif invariant not in broken:
        raise InputError(f"this run does not break {invariant}; it breaks: {', '.join(broken)}",
                         code="E_SHRINK_NOT_FAILING")
    bare = dataclasses.replace(scenario, faults=())  # the meta lists the scenario's own faults too
    again = played(bare, policy, seed, faults, plugins=plugins)
    try:
        same = again.store.state_digest() == store.state_digest()
    finally:
        again.store.close()
    if not same:
        raise InputError(f"playing {name} again (seed {seed}, {policy}, faults {', '.join(faults) or 'none'}) does not "
                         "reach this database's state: it is not the run the file holds (edited, or other plugged "
                         "files?)", code="E_SHRINK_NOT_REPRODUCED")
    return shrink_scenario(bare, invariant, policy=policy, seed=seed,
                           faults=faults, plugins=plugins, progress=progress)
