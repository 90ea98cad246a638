"""Judges: the functions that score one test of an exercise.

A test in ``exercise.toml`` names its judge as ``MODULE.FUNCTION`` (``design.fault_matrix`` is
:func:`sim.course.judges.design.fault_matrix`). A judge is called as ``judge(submission, args)``
with the folder holding the student's files (a private copy) and the test's ``args``, and returns
a :class:`Judged`: the fraction of the test's points earned, a message a student can act on,
and where it helps, the command that reproduces a failure (``{dir}`` stands for the student's
folder) and the rows that witness it. A judge that plays runs under faults also returns its
``grid`` (one row per run: which invariants held) and the failure's ``signature`` (which invariant
broke under which faults, or which contract case failed), from which the grader picks a hint
(:mod:`sim.course.hints`).

Judges run inside the sandbox's child process (:mod:`sim.course.sandbox`): whatever the student's
code does (raise, loop, print, return the wrong type) ends the test, not the grader.
"""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass
from typing import Callable

from ...errors import InputError

__all__ = ["Judged", "Broke", "rule", "passed", "failed", "partial", "resolve", "grid_row", "signature_of",
           "reference_outcome", "try_line", "rerun", "rerun_line", "Resends", "A", "B", "per_submission",
           "forget_submission"]

#: The two processes that run a student's module (:mod:`sim.course.remote`): a judge names the one
#: that computes each answer. Process A computes everything a judge does not place on purpose.
A, B = 0, 1


def try_line(exercise: int, code: str, *, processes: int = 0) -> str:
    """A reproduce line that runs ``code`` (Python) beside the student's files: ``protolab exercise try
    N {dir} -c "..."``, which runs on the Python protolab is installed in (a README's user never
    activates a virtualenv, and ``python`` may not be there at all). With ``processes``, it runs in that
    many processes, each with its own hash seed, as the grader's two host processes do, and exits 1 when
    they print different things. The code is written in double quotes, with what bash would read inside
    them escaped. The helpers such lines call (``show_keys``, ``show``, ...) exit 1 when what they show
    breaks the rule, so a reproduce line's exit status says whether it reproduced the failure."""
    q = '"' + code.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`") + '"'
    return f"protolab exercise try {exercise} {{dir}}{f' --processes {processes}' if processes else ''} -c {q}"


def rerun(judge: str, args: dict, folder: str = ".") -> None:
    """Judge the student's files in ``folder`` by ``judge`` on ``args`` (one case of a test) in this
    process, the student's code in its sandboxed host processes as the grader runs it; print the
    verdict and exit 1 when the case fails. The reproduce line of a case no plainer command shows (a
    probe of the design's keys, a payload compared with what its recipient needs): the case itself,
    alone, as often as the student likes, public or hidden."""
    import sys
    from pathlib import Path

    from ..sandbox import judge_here

    v = judge_here(judge, Path(folder), args)
    print(("passes: " if v.score >= 0.999 else "FAILS: ") + v.message.replace(str(Path(folder).resolve()), "."))
    if v.score < 0.999:
        sys.exit(1)


def rerun_line(exercise: int, judge: str, args: dict) -> str:
    """``protolab exercise try N {dir} -c "...rerun(JUDGE, ARGS)"``: one case of a test, judged again."""
    return try_line(exercise, f"from sim.course.judges import rerun; rerun({judge!r}, {_literal(args)})")


def _literal(v) -> str:
    """``v`` (data read from an exercise's toml) as an ASCII Python literal."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_literal(x) for x in v) + "]"
    return ascii(v)


@dataclass(frozen=True)
class Judged:
    score: float  # 0.0 .. 1.0 of the test's points
    message: str
    reproduce: str | None = None
    witness: dict | list | None = None
    grid: list | None = None  # [{"run", "scenario", "faults", "invariants": {NAME: bool}, "ok"}]
    signature: dict | None = None  # {"invariant", "faults", "scenario", "case", "problem"}: what broke
    grader_error: str | None = None  # the judge itself failed (a bug of the kit's, never the student's): what and where
    attachment: dict | None = None  # a file the feedback carries whole: {"name", "text"} (a search's counterexample.toml)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Broke:
    """One case in which a submission broke the rule its test stands for."""

    case: str  # which case, in words: "publish-report + resend (seed 0)", "the intent resent in a new process"
    what: str  # what broke, in words a student can act on (never the right answer)
    symptoms: tuple[str, ...] = ()  # the mistake's signature: hint tables match these (see sim.course.hints)
    reproduce: str | None = None  # the command that shows it ({dir}: the student's folder)
    witness: dict | list | None = None
    signature: dict | None = None  # more of what broke: invariant, faults, scenario, case, rule, problem, policy
    attachment: dict | None = None  # a file that shows it: {"name", "text"} (the search's counterexample.toml)


def rule(checked: int, broke: list[Broke], held: str, *, grid: list | None = None) -> Judged:
    """A rule's verdict: all of the test's points when no case broke it, none when any did.

    ``checked`` is the number of cases tried, ``held`` what holds when none broke. A failing verdict
    names the first case that broke the rule, counts the others, and carries every case's symptoms
    (in the order first seen) in its signature, so that a hint is chosen by what all the failures
    show, not by which one came first."""
    if not broke:
        return passed(f"{held} ({checked} case{'s' if checked != 1 else ''})", grid=grid)
    first = broke[0]
    others = [b.case for b in broke[1:]]
    more = ""
    if others:
        shown = "; ".join(dict.fromkeys(others[:3]))
        more = f" (the rule broke in {len(others)} more case{'s' if len(others) != 1 else ''}: {shown}" + \
            (", ..." if len(others) > 3 else "") + ")"
    symptoms = list(dict.fromkeys(s for b in broke for s in b.symptoms))
    sig = {**(first.signature or {}), "symptoms": symptoms}
    sig.setdefault("cases", [b.case for b in broke])
    what, _, table = first.what.partition("\n")  # a table under the first line stays under it
    return failed(f"{first.case}: {what}{more}" + (f"\n{table}" if table else ""), reproduce=first.reproduce,
                  witness=first.witness, grid=grid, signature=sig, attachment=first.attachment)


def passed(message: str, **kw) -> Judged:
    return Judged(1.0, message, **kw)


def failed(message: str, **kw) -> Judged:
    return Judged(0.0, message, **kw)


def partial(fraction: float, message: str, **kw) -> Judged:
    return Judged(max(0.0, min(1.0, fraction)), message, **kw)


def resolve(name: str) -> Callable:
    """The judge function a test names (``module.function`` under this package)."""
    module, _, func = name.rpartition(".")
    if not module or not module.replace("_", "").isalnum():
        raise InputError(f"judge {name!r} must be MODULE.FUNCTION", code="E_EXERCISE_FILE")
    try:
        mod = importlib.import_module(f"{__name__}.{module}")
        fn = getattr(mod, func)
    except (ImportError, AttributeError) as e:
        raise InputError(f"no judge {name!r} ({e})", code="E_EXERCISE_FILE") from e
    return fn


def grid_row(scenario: str, faults, results, ok: bool, *, label: str | None = None) -> dict:
    """One run of a fault matrix as a row of the submission's fault-by-invariant grid: ``results``
    are :func:`sim.invariants.check`'s (an empty list when the run never got that far)."""
    faults = [str(f) for f in faults]
    return {"run": label or (scenario + (" + " + " + ".join(faults) if faults else "")), "scenario": scenario,
            "faults": faults, "invariants": {r.name: bool(r.ok) for r in results}, "ok": bool(ok)}


def signature_of(scenario: str, faults, witness) -> dict:
    """The failure's signature from a failing run's witness (``{"invariant": NAME, ...}`` or a
    wrong ending)."""
    sig = {"scenario": scenario, "faults": [str(f) for f in faults]}
    if isinstance(witness, dict):
        if witness.get("invariant"):
            sig["invariant"] = witness["invariant"]
        elif "states" in witness or "expected" in witness:
            sig["problem"] = witness.get("problem") or "wrong-ending"
        elif "committed_again" in witness:
            sig["problem"] = "redelivery-commits"
            sig["invariant"] = "EFFECT_AT_MOST_ONCE"
        elif "witness" in witness and isinstance(witness["witness"], dict) and witness["witness"].get("times_committed"):
            sig["invariant"] = "EFFECT_AT_MOST_ONCE"
    return sig


_REFERENCE: dict = {}


def reference_outcome(scenario: str, faults, seed: int = 0) -> tuple[dict[str, str], int]:
    """How the reference design's run of ``scenario`` under ``faults`` ends: the task states and
    the number of publications. Deterministic, so worked out once per process."""
    key = (scenario, tuple(str(f) for f in faults), int(seed))
    if key not in _REFERENCE:
        from ...runner import run_scenario
        from ...scenario import load_scenario

        store = run_scenario(load_scenario(scenario), seed=seed, faults=list(faults))
        try:
            _REFERENCE[key] = ({t["task_id"]: t["state"] for t in store.tasks()},
                               sum(e["kind"] == "publish" for e in store.effects()))
        finally:
            store.close()
    states, pubs = _REFERENCE[key]
    return dict(states), pubs


class Resends:
    """Where one run's envelopes are made, on purpose: the first time the run sends an intent, the
    student's code computes its envelope in process A; the same intent said again under another
    message id (a resend: the same intent, a new message id and time) is computed in process B, as
    a restarted sender or another replica of it would compute it. Whether a key names the intent in
    *every* process is then tested where the story tests it (a resend must be recorded duplicate),
    and by the run's own events, never by how many calls came before.

    One instance per run (or per search: a search's branches share it, and its breadth-first order
    is fixed, so the placement is too)."""

    _SKIP = ("message_id", "created_at")

    def __init__(self):
        self._first: dict[str, str] = {}

    @classmethod
    def identity(cls, intent) -> str:
        """What makes an intent the same intent: every field but the transport's message id and time."""
        import dataclasses

        return repr(tuple((f.name, getattr(intent, f.name)) for f in dataclasses.fields(intent)
                          if f.name not in cls._SKIP))

    def process_of(self, intent) -> int:
        """A for an intent the run sends for the first time (or again under the same message id), B
        for the same intent under another message id."""
        first = self._first.setdefault(self.identity(intent), intent.message_id)
        return A if first == intent.message_id else B


_PER_SUBMISSION: list = []


def per_submission(cache):
    """``cache`` (a dict) holds what a judge learned about one submission's code (its runs, its
    answers): emptied by :func:`forget_submission` before each submission is judged, so that a warm
    judge process judges every submission as a fresh one would (nothing an earlier submission made
    it compute, keep or evict changes what the student's code is asked, or in which order)."""
    _PER_SUBMISSION.append(cache)
    return cache


def forget_submission() -> None:
    """Empty every :func:`per_submission` cache (a new submission is about to be judged)."""
    for cache in _PER_SUBMISSION:
        cache.clear()
