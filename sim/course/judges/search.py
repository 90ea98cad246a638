"""The grader's search test, shared by the exercises whose answer is plugged into the runtime (a
design, an intake, an effect rule): every delivery order of a small scenario with the exercise's
faults, up to a fixed depth, through the student's part (:func:`sim.explore.explore`).

The judges in ``design.py``, ``intake.py`` and ``effects.py`` plug the student's part in (it runs in
its host processes, as in every other test: the search forks the run, never the student's code) and
hand :func:`search` the test's ``searches``; each broken one becomes a :class:`~sim.course.judges.Broke`
whose message says, in one line, what broke after how many deliveries, and whose attachment is that
shortest path as a scenario file (``counterexample.toml``: its deliveries as a short table in the
comments at its top, then a schedule, the faults placed on the messages they hit, the policy pinned;
check, grade --explain and Gradescope show it whole), so the feedback says "these deliveries, in this order"
instead of a seed. Breadth-first, so no order of fewer deliveries breaks an invariant judged.

A search is ``{scenario, faults, depth, policy, invariants}``: ``scenario`` a shipped one or one of
:data:`SMALL` (stories small enough to search within a submission's budget), ``invariants`` the ones
at stake (all when not given: under the naive consumer an exercise judges only what it is about).
What a search found is kept per submission file and search (:data:`_FOUND`), as the judges keep runs.

A search looks for a broken invariant, and a part that does nothing breaks nothing: a design whose
messages are all refused, a consumer that accepts nothing, an effect rule that commits nothing
pass every order. So a search that finds no broken invariant plays its story once in the order a run
delivers it, with the student's part and with the course's own (``reference``), and passes only if
the student's run does the story's job: every task ends where the course's part ends it and every
effect it commits is committed. A run that does not is a broken rule (the search proved nothing of
it), said so with what ended otherwise. A search that found a break reports the break: an order that
breaks an invariant is proof whatever else the story did.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from typing import Callable

from . import Broke, per_submission

__all__ = ["SMALL", "small_scenario", "search", "path_table", "Plugged", "MARK"]

#: The first words of every counterexample file the grader writes: a file of that name that does not
#: start with them is not the grader's, and nothing writes over it (sim.course.evaluate.keep_attachments).
MARK = "# the grader's search:"


def _one_task():
    from ...scenario import parse_scenario

    return parse_scenario({
        "name": "one-task", "workers": ["researcher"], "trace": "R-1",
        "description": "one task: the researcher collects the evidence and its result is published once",
        "task": [{"id": "T-1", "goal": "collect and publish", "worker": "researcher", "publish": "R-1"}],
        "settings": {"work_ticks": 1},
    }, source="the grader's search")


#: Scenarios made for the search (a shipped scenario's name works too).
SMALL: dict[str, Callable] = {"one-task": _one_task}
_SCENARIOS: dict = {}


def small_scenario(name: str):
    """A scenario of :data:`SMALL` or a shipped one, by name (made once per process)."""
    if name not in _SCENARIOS:
        from ...scenario import load_scenario

        _SCENARIOS[name] = SMALL[name]() if name in SMALL else load_scenario(name)
    return _SCENARIOS[name]


@dataclasses.dataclass
class Plugged:
    """What :func:`sim.explore.start` plugs in (the shape of :class:`sim.plugins.Plugins`): the
    student's part already made, in its host processes."""

    design: object
    policy: object  # the sim.policy.Policy the search runs under (the student's intake or effect rule in it)
    what: dict

    def any(self) -> bool:
        return True

    def load(self, _policy=None):
        return self.design, self.policy, None

    def meta(self) -> dict:
        return dict(self.what)


def _spec(s) -> tuple[str, tuple[str, ...], int, str, tuple[str, ...] | None]:
    from ...errors import InputError

    if not isinstance(s, dict) or not isinstance(s.get("faults", []), list) or not isinstance(s.get("depth", 0), int):
        raise InputError(f"a search must be {{scenario, faults, depth, policy, invariants}}, got {s!r}",
                         code="E_EXERCISE_FILE")
    inv = s.get("invariants")
    return (str(s.get("scenario", "one-task")), tuple(str(f) for f in s.get("faults", [])), int(s.get("depth", 6)),
            str(s.get("policy", "safe")), None if inv is None else tuple(str(i) for i in inv))


def label(spec) -> str:
    scenario, faults, depth, policy, _inv = spec
    return (f"every order of {scenario} + {' + '.join(faults) or 'no faults'} up to {depth} deliveries"
            + (f", {policy} consumer" if policy != "safe" else ""))


def path_table(path) -> str:
    """A path's deliveries as a short table, one line each."""
    rows = [("#", "round", "message", "type", "from -> to", "task", "decision")]
    rows += [(str(i), str(s.round), s.message_id, s.type, f"{s.sender} -> {s.recipient}", s.task_id, s.decision)
             for i, s in enumerate(path, 1)]
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return "\n".join("  " + "  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows)


#: What each search found, per submission file (path and content) and search: None or a Broke.
_FOUND: OrderedDict = per_submission(OrderedDict())
_FOUND_KEPT = 256
_REFERENCE_OK: set = set()


def search(owner: tuple, searches, plug: Callable[[str], Plugged], *, reproduce: str, symptom: Callable[[str, tuple], str],
           failed_symptom: str, reference: Callable[[str], Plugged], idle_symptom: str = "search-run-idle",
           idle_reproduce: Callable[[dict], str] | None = None) -> tuple[int, list[Broke], list[dict]]:
    """Run ``searches`` in order with the student's part (``plug(policy)``) until one breaks an
    invariant judged; ``(searches run, [that break] or [], grid rows)``. One counterexample is what
    the student reads (its hint chosen by what it shows), and a wrong answer costs less time.

    ``owner`` identifies the submission's file (path, content hash); ``reproduce`` is the command
    that replays the scenario file (``counterexample.toml``); ``symptom(invariant, faults)`` names what
    a break shows; ``failed_symptom`` is reported when the student's part stops the search (raised,
    returned an answer the runtime cannot apply).

    ``reference(policy)`` plugs the course's own part in: a search counts only when the student's
    part does the story's job in the order a run delivers it, as the course's does (see the module's
    docstring); otherwise the search is a broken rule with ``idle_symptom`` and the reproduce line
    ``idle_reproduce(search)`` gives for that one search (a line that exits 1 while the story does not
    do its job: the search judged again, alone)."""
    from . import grid_row

    broke, rows = [], []
    specs = [_spec(s) for s in searches]
    for raw, spec in zip(searches, specs):
        key = (owner, spec)
        if key in _FOUND:
            _FOUND.move_to_end(key)
            b = _FOUND[key]
        else:
            # a broken invariant in some order is proof whatever the story did (a late result that overwrote
            # the outcome ends the story wrong and breaks a rule: the break is what the student reads, with
            # the order that shows it); only a search that found nothing must show its story did its job
            b = _one(spec, plug, reproduce, symptom, failed_symptom) or \
                _idle(spec, plug, reference, idle_symptom, idle_reproduce(raw) if idle_reproduce else None,
                      failed_symptom)
            _FOUND[key] = b
            while len(_FOUND) > _FOUND_KEPT:
                _FOUND.popitem(last=False)
        scenario, faults, _d, policy, _inv = spec
        rows.append(grid_row(scenario, faults, [], b is None, label=f"search: {label(spec)}"))
        if b is not None:  # one counterexample is the feedback: the searches after it are not run
            broke.append(b)
            break
    return len(rows), broke, rows


_REFERENCE_ENDINGS: dict = {}


def _ending(sc, spec, plugged: Plugged) -> tuple[dict, frozenset]:
    """How ``sc`` ends in the order a run delivers it under the search's faults with ``plugged``: the
    task states and the effects committed (kind, target, task)."""
    from ...runner import run_scenario

    _scenario, faults, _depth, policy, _inv = spec
    store = run_scenario(sc, policy=policy, faults=list(faults), plugins=plugged, strict_faults=False)
    try:
        return ({t["task_id"]: t["state"] for t in store.tasks()},
                frozenset((e["kind"], e["target"], e["task_id"]) for e in store.effects()))
    finally:
        store.close()


def _idle(spec, plug, reference, idle_symptom: str, idle_reproduce: str | None, failed_symptom: str) -> Broke | None:
    """None when the student's part, in the order a run delivers the search's story, ends it as the
    course's part does (the search then means something); else why not, as a broken rule."""
    from ...errors import ProtolabError

    scenario, faults, _depth, policy, _inv = spec
    sc = small_scenario(scenario)
    ref_key = (spec, getattr(reference, "__module__", ""), getattr(reference, "__qualname__", repr(reference)))
    if ref_key not in _REFERENCE_ENDINGS:
        _REFERENCE_ENDINGS[ref_key] = _ending(sc, spec, reference(policy))
    want_states, want_effects = _REFERENCE_ENDINGS[ref_key]
    sig = {"scenario": scenario, "faults": list(faults), "policy": policy, "search": True}
    try:
        states, effects = _ending(sc, spec, plug(policy))
    except ProtolabError as e:
        what = f"{e.code}: {e.message}" if getattr(e, "code", None) else str(e)
        return Broke(label(spec), f"the search's story could not be played: {' '.join(what.split())[:300]}",
                     (failed_symptom,), signature={**sig, "problem": "run-failed"})
    wrong = [f"{t} ended {states.get(t, 'never created')} (the course's own part ends it {s})"
             for t, s in sorted(want_states.items()) if states.get(t) != s]
    lost = [f"{k} {target} for {task} was never committed" for k, target, task in sorted(want_effects - effects)]
    if not wrong and not lost:
        return None
    return Broke(label(spec), "the search's story, played once in the order a run delivers it, did not do its job: "
                              + "; ".join((wrong + lost)[:3]) + ". A search looks for a broken invariant in every order, "
                              "and proves something only of a story that gets its work done in the usual one (a run "
                              "that does nothing breaks nothing), so no order was searched: make the story end as it "
                              "should first",
                 (idle_symptom,), reproduce=idle_reproduce, witness={"states": states, "expected": want_states,
                                                                      "effects": sorted(map(list, effects)),
                                                                      "expected_effects": sorted(map(list, want_effects))},
                 signature={**sig, "problem": "search-run-idle"})


def _one(spec, plug, reproduce: str, symptom, failed_symptom: str) -> Broke | None:
    from ...errors import ProtolabError
    from ...explore import counterexample, explore
    from ...scenario import scenario_toml

    scenario, faults, depth, policy, invariants = spec
    sc = small_scenario(scenario)
    sig = {"scenario": scenario, "faults": list(faults), "policy": policy, "search": True}
    try:
        # place=False: the faults fire where a run fires them (the depths above are budgeted for that)
        result = explore(sc, policy=policy, faults=list(faults), depth=depth, plugins=plug(policy),
                         invariants=invariants, place=False)
    except ProtolabError as e:
        what = f"{e.code}: {e.message}" if getattr(e, "code", None) else str(e)
        return Broke(label(spec), f"the search could not go on: {' '.join(what.split())[:300]}", (failed_symptom,),
                     signature={**sig, "problem": "run-failed"})
    except Exception as e:  # noqa: BLE001 - the runtime choked on the student's answers, unless it chokes without them
        if spec not in _REFERENCE_OK:
            explore(sc, policy=policy, faults=list(faults), depth=depth, invariants=invariants, place=False)  # raises: the grader's
            _REFERENCE_OK.add(spec)
        return Broke(label(spec), f"the search could not go on: the runtime could not apply your answers "
                                  f"({type(e).__name__}: {' '.join(str(e).split())[:160]})", (failed_symptom,),
                     signature={**sig, "problem": "run-failed"})
    f = result.found
    if f is None:
        return None
    cx = counterexample(sc, policy, f.path, f.faults)
    text = scenario_toml(cx, f"{MARK[2:]} {f.invariant} breaks after these {len(f.path)} deliveries\n"
                             f"{path_table(f.path)}\nreplay it: {reproduce}")
    more = f" (and {', '.join(b for b in f.broken if b != f.invariant)})" if len(f.broken) > 1 else ""
    placed = f"; faults placed: {', '.join(f.faults)}" if f.faults else ""
    what = (f"{f.invariant} broke{more} after {len(f.path)} deliveries in this order (breadth-first: no shorter "
            f"order breaks it){placed}; counterexample.toml lists them and replays it")
    return Broke(label(spec), what, (symptom(f.invariant, faults),), reproduce=reproduce,
                 witness={"invariant": f.invariant, "witness": f.witness, "deliveries": [s.to_dict() for s in f.path],
                          "faults": list(f.faults)},
                 signature={**sig, "invariant": f.invariant},
                 attachment={"name": "counterexample.toml", "text": text})
