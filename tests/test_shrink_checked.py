"""Shrink's result and explore's counterexample are checked, not trusted (issue 48, part 4).

For several failing runs this file recomputes each property of the result itself, with the runner and
the invariants only (not :mod:`sim.shrink`'s ``breaks``, not :mod:`sim.shrinkcheck`): it loads from its
scenario file as itself, it is made at the run's seed and policy, its run breaks the same invariant,
every task a task of it depends on is kept, and it is minimal (shrink: without any one task, fault or
delivery the invariant holds; explore: without any one fault, and no shorter prefix of its path breaks
it). Then the checker (``sim/shrinkcheck.py``) is held to refuse each kind of wrong result, and the CLI
to say so in one line (exit 2) without writing anything.
"""

from __future__ import annotations

import ast
import dataclasses
import tomllib
from pathlib import Path

import pytest

from sim.cli import main
from sim.errors import ProtolabError
from sim.explore import counterexample, explore
from sim.invariants import check
from sim.runner import run_scenario
from sim.scenario import load_scenario, parse_scenario, scenario_toml
from sim.shrink import shrink
from sim.shrinkcheck import Unchecked, problems, require
from sim.store import Store

TINY = parse_scenario({
    "name": "tiny-publish", "workers": ["researcher"],
    "task": [{"id": "T-1", "goal": "collect and publish", "worker": "researcher", "publish": "R-9"}],
    "settings": {"work_ticks": 1},
}, source="tiny")


def _cli(capsys, *args) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(list(args))
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


# ---------------------------------------------------------------- the test's own judge (no sim.shrink, no checker)


def _broken(sc, *, seed=None, policy=None) -> set[str] | None:
    """The invariants the run of ``sc`` breaks, run as ``protolab run FILE`` runs it (its own seed and policy
    unless told); None when its schedule cannot be followed (it reproduces nothing)."""
    try:
        store = run_scenario(sc, policy=policy or sc.policy or "safe", seed=seed, strict_faults=False)
    except ProtolabError as e:
        assert e.code == "E_SCHEDULE", e.one_line()
        return None
    try:
        return {r.name for r in check(store) if not r.ok}
    finally:
        store.close()


def _breaks(sc, invariant) -> bool:
    return invariant in (_broken(sc) or ())


def _drop_task(sc, tid):
    gone = {tid}
    for t in sc.tasks:
        if gone & set(t.after):
            gone.add(t.id)
    return dataclasses.replace(sc, tasks=tuple(t for t in sc.tasks if t.id not in gone),
                               gathers=tuple(g for g in sc.gathers if not gone & set(g.over)),
                               reviews=tuple(r for r in sc.reviews if r.task not in gone))


def _loads_as_itself(sc, tmp_path) -> None:
    f = tmp_path / f"{sc.name}.toml"
    f.write_text(scenario_toml(sc, comment="a result"))
    assert load_scenario(str(f)) == sc


def _keeps_dependencies(sc) -> None:
    ids = {t.id for t in sc.tasks}
    assert sc.tasks
    for t in sc.tasks:
        assert set(t.after) <= ids, f"{t.id} waits for {set(t.after) - ids}, which is gone"
    for g in sc.gathers:
        assert set(g.over) <= ids
    for r in sc.reviews:
        assert r.task in ids


def _same_story(sc, original) -> None:
    for name in ("workers", "settings", "start_time", "trace", "privacy", "clocks"):
        assert getattr(sc, name) == getattr(original, name), name
    tasks = {t.id: t for t in original.tasks}
    assert all(tasks[t.id] == t for t in sc.tasks)


# ---------------------------------------------------------------- shrink: each property, recomputed

def _small_gathers():
    """Two reviewers of the gathers scenario that disagree (a QUORUM of 1 over them) and a finder alone in a
    FIRST_SUCCESS gather: shrink drops the finder, and its gather must go with it (a gather naming a task
    dropped does not load)."""
    g = load_scenario("gathers")
    review, first = g.gathers[0], g.gathers[1]
    return dataclasses.replace(g, name="gathers-small", faults=(), tasks=(g.tasks[0], g.tasks[2], g.tasks[3]),
                               gathers=(dataclasses.replace(review, over=("T-1", "T-3"), threshold=1),
                                        dataclasses.replace(first, over=("T-4",))),
                               workers=g.workers[:5], clocks=())


CUSTOM = {"gathers-small": _small_gathers}

#: failing naive runs: (scenario, faults, seed, invariant). Between them: a seed not the scenario's, tasks
#: that depend on others, gathers, a scripted review, and runs whose pinned schedule needs fewer tasks
#: than their own order did (publish-report and fan-out duplicate: SEQUENCE_KEPT).
SHRINK_CASES = [
    ("publish-report", ("late-failure",), 0, "NO_STATE_REGRESSION"),
    ("publish-report", ("duplicate",), 7, "SEQUENCE_KEPT"),
    ("fan-out", ("duplicate",), 0, "SEQUENCE_KEPT"),
    ("sensitive-source", ("duplicate",), 7, "EFFECT_AT_MOST_ONCE"),
    ("gathers-small", (), 0, "DISSENT_KEPT"),
    pytest.param("gathers", (), 0, "DISSENT_KEPT", marks=pytest.mark.slow),  # (about 170 runs to shrink)
    ("reopened", (), 3, "CONFLICT_FROZEN"),
]
_SHRUNK: dict = {}


def _shrunk(case):
    """The case's failing run and its shrunk result (made once per case)."""
    if case not in _SHRUNK:
        name, faults, seed, invariant = case
        original = CUSTOM[name]() if name in CUSTOM else load_scenario(name)
        store = run_scenario(original, policy="naive", faults=list(faults), seed=seed)
        try:
            assert invariant in {r.name for r in check(store) if not r.ok}
            _SHRUNK[case] = (original, shrink(store, invariant=invariant,
                                              scenario=original if name in CUSTOM else None))
        finally:
            store.close()
    return _SHRUNK[case]


SHRINK_CASES = [pytest.param(tuple(c.values), marks=c.marks, id=f"{c.values[0]}-{c.values[3]}") if isinstance(
    c, type(pytest.param(0))) else pytest.param(c, id=f"{c[0]}-{'+'.join(c[1]) or 'own'}-seed{c[2]}-{c[3]}")
    for c in SHRINK_CASES]


@pytest.mark.parametrize("case", SHRINK_CASES)
def test_shrink_result_loads_is_the_same_story_at_the_runs_seed_and_policy_and_keeps_its_dependencies(case, tmp_path):
    name, faults, seed, invariant = case
    original, result = _shrunk(case)
    after = result.after
    _loads_as_itself(after, tmp_path)
    _same_story(after, original)
    _keeps_dependencies(after)
    assert after.seed == seed and after.policy == "naive"
    assert {f.split(":", 1)[0] for f in after.faults} <= {f.split(":", 1)[0] for f in (*original.faults, *faults)}
    assert result.invariant == invariant and not result.interrupted
    assert len(after.tasks) <= len(original.tasks)


@pytest.mark.parametrize("case", SHRINK_CASES)
def test_shrink_result_reproduces_the_same_invariant_at_the_runs_seed(case):
    name, faults, seed, invariant = case
    _original, result = _shrunk(case)
    # run as 'protolab run FILE' runs it: its own seed and policy, its faults strict
    store = run_scenario(result.after, policy=result.after.policy, faults=[])
    try:
        assert invariant in {r.name for r in check(store) if not r.ok}
        assert store.get_meta("seed") == str(seed)
    finally:
        store.close()


@pytest.mark.parametrize("case", SHRINK_CASES)
def test_shrink_result_is_1_minimal_over_tasks_faults_and_deliveries(case):
    _name, _faults, _seed, invariant = case
    _original, result = _shrunk(case)
    sc = result.after
    still = []
    if len(sc.tasks) > 1:
        still += [f"task {t.id}" for t in sc.tasks if _breaks(_drop_task(sc, t.id), invariant)]
    still += [f"fault {f}" for i, f in enumerate(sc.faults)
              if _breaks(dataclasses.replace(sc, faults=sc.faults[:i] + sc.faults[i + 1:]), invariant)]
    if len(sc.deliveries) > 1:
        still += [f"delivery {i + 1}" for i in range(len(sc.deliveries))
                  if _breaks(dataclasses.replace(sc, deliveries=sc.deliveries[:i] + sc.deliveries[i + 1:]), invariant)]
    assert still == [], f"without {', '.join(still)} it still breaks {invariant}"


@pytest.mark.parametrize("case", SHRINK_CASES)
def test_the_checker_passes_each_shrink_result(case):
    name, faults, seed, invariant = case
    original, result = _shrunk(case)
    assert problems(original, result.after, invariant, policy="naive", seed=seed, faults=faults) == []


# ---------------------------------------------------------------- the checker refuses what is wrong


def _a_result():
    return _shrunk(("publish-report", ("duplicate",), 7, "SEQUENCE_KEPT"))


def _dependent():
    """A result with a task that depends on another (sensitive-source: T-2 waits for T-1)."""
    original, result = _shrunk(("sensitive-source", ("duplicate",), 7, "EFFECT_AT_MOST_ONCE"))
    assert any(t.after for t in result.after.tasks)
    return original, result


@pytest.mark.parametrize("wrong, word", [
    (lambda o, sc: dataclasses.replace(sc, seed=0), "seed 0"),
    (lambda o, sc: dataclasses.replace(sc, policy="safe"), "policy"),
    (lambda o, sc: dataclasses.replace(sc, deliveries=sc.deliveries[:-1]), "does not break"),
    (lambda o, sc: dataclasses.replace(sc, deliveries=((1, "M-1"), (2, "M-9"))), "does not break"),
    (lambda o, sc: dataclasses.replace(sc, faults=(*sc.faults, "crash:M-2")), "none of the run's faults"),
    (lambda o, sc: dataclasses.replace(sc, tasks=o.tasks), "not minimal"),
    (lambda o, sc: dataclasses.replace(sc, workers=(*sc.workers, "researcher-extra")), "workers"),
    (lambda o, sc: dataclasses.replace(sc, tasks=(dataclasses.replace(sc.tasks[0], budget=9),)), "as it was"),
    (lambda o, sc: dataclasses.replace(sc, tasks=()), "load"),
])
def test_the_checker_refuses_a_wrong_result_naming_what_is_wrong(wrong, word):
    original, result = _a_result()
    bad = wrong(original, result.after)
    found = problems(original, bad, "SEQUENCE_KEPT", policy="naive", seed=7, faults=["duplicate"])
    assert found and word in found[0], found
    with pytest.raises(Unchecked) as e:
        require(original, bad, "SEQUENCE_KEPT", policy="naive", seed=7, faults=["duplicate"])
    assert e.value.code == "E_SHRINK_UNCHECKED"


def test_the_checker_refuses_a_task_whose_dependency_was_dropped():
    original, result = _dependent()
    sc = result.after
    needed = {d for t in sc.tasks for d in t.after}
    dangling = dataclasses.replace(sc, tasks=tuple(t for t in sc.tasks if t.id not in needed))
    found = problems(original, dangling, "EFFECT_AT_MOST_ONCE", policy="naive", seed=7, faults=["duplicate"])
    assert found and ("depends on" in found[0] or "does not load" in found[0]), found


@pytest.mark.slow
def test_the_checker_refuses_a_gather_naming_a_task_dropped():
    original, result = _shrunk(("gathers", (), 0, "DISSENT_KEPT"))
    sc = result.after
    assert sc.gathers
    kept = dataclasses.replace(sc, tasks=sc.tasks[:1], deliveries=sc.deliveries)
    found = problems(original, kept, "DISSENT_KEPT", policy="naive", seed=0)
    assert found and ("gather" in found[0] or "load" in found[0] or "depends on" in found[0]), found


def test_the_checker_refuses_a_schedule_with_a_delivery_too_many():
    original, result = _dependent()
    sc = result.after
    # one delivery more, copied from the run's own order: still breaks, no longer 1-minimal
    store = run_scenario(dataclasses.replace(sc, deliveries=()), policy="naive", seed=7)
    try:
        own = [(d["tick"], d["message_id"]) for d in store.deliveries()]
    finally:
        store.close()
    longer = next(dataclasses.replace(sc, deliveries=tuple(own[:k])) for k in range(len(own), 0, -1)
                  if own[:k] != list(sc.deliveries) and _breaks(dataclasses.replace(sc, deliveries=tuple(own[:k])),
                                                                "EFFECT_AT_MOST_ONCE"))
    found = problems(original, longer, "EFFECT_AT_MOST_ONCE", policy="naive", seed=7, faults=["duplicate"])
    assert any("not minimal" in p for p in found), found
    assert problems(original, longer, "EFFECT_AT_MOST_ONCE", policy="naive", seed=7, faults=["duplicate"],
                    minimal=None) == []  # (an interrupted shrink is checked for everything else)


def test_the_checker_shares_no_code_with_the_searches_it_judges():
    tree = ast.parse((Path(__file__).parents[1] / "sim" / "shrinkcheck.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in imported if m and m.split(".")[-1] in ("shrink", "explore", "schedule")}, imported


# ---------------------------------------------------------------- the CLI: checked before written


def test_shrink_of_a_run_at_another_seed_writes_that_seed_and_run_reproduces_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_scenario(load_scenario("publish-report"), policy="naive", faults=["late-failure"], seed=7, db="f.db").close()
    code, out, err = _cli(capsys, "shrink", "--db", "f.db", "-o", "m.toml")
    assert code == 0, err
    sc = load_scenario(str(tmp_path / "m.toml"))
    assert sc.seed == 7 and sc.policy == "naive"
    code, _, err = _cli(capsys, "run", "m.toml", "--db", "m.db")
    assert code == 0, err
    code, out, _ = _cli(capsys, "check", "--db", "m.db")
    assert code == 1 and "NO_STATE_REGRESSION" in out


@pytest.mark.parametrize("wrong", ["seed", "dependency", "reproduce", "minimal"])
def test_shrink_refuses_to_write_a_result_that_fails_its_check(wrong, tmp_path, capsys, monkeypatch):
    import sim.shrink

    monkeypatch.chdir(tmp_path)
    run_scenario(load_scenario("sensitive-source"), policy="naive", faults=["duplicate"], seed=7, db="f.db").close()
    real = sim.shrink.shrink

    def planted(store, **kw):
        result = real(store, **kw)
        sc = result.after
        if wrong == "seed":
            result.after = dataclasses.replace(sc, seed=0)
        elif wrong == "dependency":
            needed = {d for t in sc.tasks for d in t.after}
            result.after = dataclasses.replace(sc, tasks=tuple(t for t in sc.tasks if t.id not in needed))
        elif wrong == "reproduce":
            result.after = dataclasses.replace(sc, deliveries=sc.deliveries[:1])
        else:  # its whole order pinned: it still breaks, but is no longer minimal
            run = run_scenario(dataclasses.replace(sc, deliveries=()), policy="naive", seed=7)
            try:
                result.after = dataclasses.replace(sc, deliveries=tuple((d["tick"], d["message_id"])
                                                                         for d in run.deliveries()))
            finally:
                run.close()
            assert len(result.after.deliveries) > len(sc.deliveries)
        return result

    monkeypatch.setattr(sim.shrink, "shrink", planted)
    code, out, err = _cli(capsys, "shrink", "--db", "f.db", "-o", "m.toml", "--invariant", "EFFECT_AT_MOST_ONCE")
    assert code == 2 and err.startswith("error: E_SHRINK_UNCHECKED: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and not (tmp_path / "m.toml").exists()
    said = {"seed": ("seed 0",), "dependency": ("depends on", "not an earlier task"),
            "reproduce": ("does not break", "does not run"), "minimal": ("not minimal",)}[wrong]
    assert any(w in err for w in said), err


# ---------------------------------------------------------------- explore's counterexamples

#: (scenario, faults, depth, place, seed): naive searches that find a break.
EXPLORE_CASES = [
    (TINY, ["duplicate"], 6, True, None),
    (TINY, ["duplicate"], 6, "any", None),
    (TINY, ["late-failure"], 6, False, 3),
    ("publish-report", ["late-failure"], 8, True, 5),
    ("fan-out", ["late-failure"], 6, True, None),
    ("reopened", [], 6, True, None),
]


@pytest.mark.parametrize("case", EXPLORE_CASES, ids=lambda c: c if isinstance(c, str) else None)
def test_explores_counterexample_loads_runs_at_its_seed_breaks_the_same_invariant_and_is_shortest(case, tmp_path):
    sc, faults, depth, place, seed = case
    sc = load_scenario(sc) if isinstance(sc, str) else sc
    result = explore(sc, policy="naive", faults=faults, depth=depth, place=place, seed=seed)
    found = result.found
    assert found is not None
    ce = counterexample(sc, "naive", found.path, found.faults, seed=seed)
    _loads_as_itself(ce, tmp_path)
    _same_story(ce, sc)
    _keeps_dependencies(ce)
    assert ce.tasks == sc.tasks and ce.policy == "naive"
    assert ce.seed == (sc.seed if seed is None else seed)
    assert found.invariant in _broken(ce)  # at its own seed and policy, as 'protolab run' plays it
    for i, f in enumerate(ce.faults):  # each fault it places is needed
        assert not _breaks(dataclasses.replace(ce, faults=ce.faults[:i] + ce.faults[i + 1:]), found.invariant), f
    for k in range(1, len(ce.deliveries)):  # and no shorter prefix of its path breaks it
        assert not _breaks(dataclasses.replace(ce, deliveries=ce.deliveries[:k]), found.invariant), k
    assert problems(sc, ce, found.invariant, policy="naive", seed=ce.seed, faults=faults, minimal="shortest") == []


def test_explore_with_a_seed_writes_it_in_its_counterexample(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = _cli(capsys, "explore", "publish-report", "--faults", "late-failure", "--policy", "naive",
                          "--depth", "8", "--seed", "5", "--out", "ce.toml")
    assert code == 1, err
    assert load_scenario(str(tmp_path / "ce.toml")).seed == 5
    code, _, err = _cli(capsys, "run", "ce.toml", "--db", "ce.db")
    assert code == 0, err
    assert tomllib.loads((tmp_path / "ce.toml").read_text())["seed"] == 5
    with Store.open(tmp_path / "ce.db", readonly=True) as store:
        assert store.get_meta("seed") == "5"


@pytest.mark.parametrize("wrong", ["seed", "path", "fault"])
def test_explore_refuses_to_show_a_counterexample_that_fails_its_check(wrong, tmp_path, capsys, monkeypatch):
    import sim.explore

    monkeypatch.chdir(tmp_path)
    real = sim.explore.counterexample

    def planted(scenario, policy, path, faults, **kw):
        ce = real(scenario, policy, path, faults, **kw)
        if wrong == "seed":
            return dataclasses.replace(ce, seed=ce.seed + 1)
        if wrong == "path":
            return dataclasses.replace(ce, deliveries=ce.deliveries[:-1])
        return dataclasses.replace(ce, faults=(*ce.faults, "crash:M-2"))

    monkeypatch.setattr(sim.explore, "counterexample", planted)
    monkeypatch.setattr(sim.explore, "confirm", lambda *a, **k: None)  # (the engine's replay: the checker stands alone)
    code, out, err = _cli(capsys, "explore", "publish-report", "--faults", "late-failure", "--policy", "naive",
                          "--depth", "8", "--out", "ce.toml")
    assert code == 2 and err.startswith("error: E_EXPLORE_UNCHECKED: ") and err.count("\n") == 1, err
    assert "BROKEN" not in out and not (tmp_path / "ce.toml").exists()
