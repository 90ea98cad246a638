"""``protolab bench grade``: how fast the grader gets through a class, and what isolation costs.

A classroom of ``n`` generated submissions of exercise 1 (:mod:`sim.course.corpus`): 40% model
answers, 35% partly wrong (the starter and the planted wrong answers), 25% hostile (every kind
that fails within its time limits; the two endless loops, which by design spend whole time limits,
are left out of the mix and covered by the tests). The grader grades them as it always does:
hidden tests included, every test in its own sandboxed process, on every core.

The floor is the same classroom through the same judges in this one process with no isolation at
all: the student's module imported here, its functions called directly, no child processes. The
hostile kinds that would take the process down with them (ending it, forking it, eating its
memory) cannot run there; the floor skips them, so it does less work than the grader, never more.
"""

from __future__ import annotations

import os
import resource
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from . import sandbox
from .catalog import get_exercise
from .corpus import build_corpus

__all__ = ["bench_grade", "classroom"]

#: hostile kinds the floor cannot run in its own process
UNSAFE_IN_PROCESS = ("os-exit-in-call", "memory-bomb", "memory-creep", "forks", "spawns", "writes-outside",
                     "sqlite-attach", "sqlite-vacuum-into", "sqlite-load-extension", "sqlite-run-database", "ctypes",
                     "kills-parent", "kills-group", "listens", "link-replaces-file", "plants-link")


def classroom(dest: Path, n: int = 200, exercise: int = 1) -> list[tuple[str, object]]:
    """``n`` submissions under ``dest`` (one folder each); ``(name, corpus entry)`` in order."""
    ex = get_exercise(exercise)
    pool_dir = Path(dest) / ".pool"
    entries = build_corpus(ex, pool_dir, slow=False, run_db=Path(dest) / ".no-run" / "protolab.db")
    correct = [e for e in entries if e.kind == "solution"]
    wrong = [e for e in entries if e.kind in ("starter", "wrong")]
    hostile = [e for e in entries if e.kind == "hostile"]
    plan = []
    for i in range(n):  # a fixed, interleaved mix: 8 correct, 7 wrong, 5 hostile in every 20
        slot, block = i % 20, i // 20
        if slot < 8:
            plan.append(correct[0])
        elif slot < 15:
            plan.append(wrong[(block * 7 + slot - 8) % len(wrong)])
        else:
            plan.append(hostile[(block * 5 + slot - 15) % len(hostile)])
    out = []
    for i, e in enumerate(plan):
        name = f"student-{i + 1:03d}"
        shutil.copytree(pool_dir / e.name, Path(dest) / name, symlinks=True)
        out.append((name, e))
    shutil.rmtree(pool_dir)
    return out


class _LocalModule:
    """The student's module imported into this process (the floor's stand-in for a host process)."""

    def __init__(self, path, what: str = "design", *, processes: int = 1):
        from ..errors import InputError
        from ..plugins import load_module

        self.path = Path(path)
        self.printed = 0
        self.shared = False
        try:
            self.module = load_module(str(self.path), self.path.stem)
        except InputError:
            raise
        except BaseException as e:  # SystemExit on import, as the host reports it
            raise InputError(f"{self.path.name} does not import: {type(e).__name__}", code="E_PLUGIN_IMPORT") from None
        self.names = {n: ("function" if callable(v) else v) for n, v in vars(self.module).items()
                      if callable(v) or isinstance(v, (str, int, float, bool))}

    def call(self, fn: str, *args, process: int = 0):
        from .remote import RemoteError

        f = getattr(self.module, fn, None)
        if not callable(f):
            raise RemoteError(f"{self.path.name} has no function {fn!r}", code="E_PLUGIN_INCOMPLETE")
        try:
            return f(*args)
        except BaseException as e:  # noqa: BLE001 - whatever the student's code raises, as the host reports it
            raise RemoteError(f"{fn} raised {type(e).__name__}", kind=type(e).__name__,
                              kinds=tuple(c.__name__ for c in type(e).__mro__)) from None

    def close(self, force: bool = False) -> None:
        pass


@contextmanager
def _unisolated():
    from . import remote

    saved = remote.RemoteModule
    remote.RemoteModule = _LocalModule
    try:
        yield
    finally:
        remote.RemoteModule = saved


def _floor(ex, folders: list[Path], progress=None) -> tuple[float, int]:
    from .sandbox import judge_here

    tests = list(ex.graded_tests(True))
    t0 = time.perf_counter()
    with _unisolated():
        for i, d in enumerate(folders):
            if all((d / f).is_file() for f in ex.files):
                for t in tests:
                    judge_here(t.judge, d, t.args)
            if progress is not None:
                progress(i + 1, len(folders))
    return time.perf_counter() - t0, len(folders)


def _peak_mb() -> tuple[float, float]:
    """(this process, the largest child) peak resident memory in MB (Linux reports KB)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return round(own, 1), round(child, 1)


def bench_grade(n: int = 200, jobs: int | None = None, progress=None) -> dict:
    """Grade ``n`` generated submissions of exercise 1 and the floor; figures as a dict.
    ``progress(stage, done, total)`` is called as work completes."""
    from .grade import collect, grade_all

    ex = get_exercise(1)
    jobs = jobs or os.cpu_count() or 2
    with tempfile.TemporaryDirectory(prefix="protolab-bench-grade-") as tmp:
        root = Path(tmp) / "submissions"
        root.mkdir()
        plan = classroom(root, n)
        kinds = {name: e for name, e in plan}
        subs = collect(ex, root, Path(tmp) / "work")
        (Path(tmp) / "work").mkdir(exist_ok=True)
        t0 = time.perf_counter()
        reports = grade_all(ex, subs, jobs=jobs,
                            progress=None if progress is None else (lambda d, t, _n: progress("grader", d, t)))
        seconds = time.perf_counter() - t0
        own_mb, child_mb = _peak_mb()
        wrong_scores = []
        for s, r in zip(subs, reports):
            e = kinds[s.name]
            ok = {"full": r.score == r.max_score, "less": r.score < r.max_score, "zero": r.score == 0}[e.expect]
            if not ok:
                wrong_scores.append(f"{s.name} ({e.what}): {r.score:g}/{r.max_score}, expected {e.expect}")
        safe = [root / name for name, e in plan
                if not (e.kind == "hostile" and e.name.removeprefix("hostile-") in UNSAFE_IN_PROCESS)]
        floor_s, floor_n = _floor(ex, safe, None if progress is None else (lambda d, t: progress("floor", d, t)))
    per_min = n / seconds * 60
    floor_per_min = floor_n / floor_s * 60
    return {
        "submissions": n, "tests_each": len(ex.tests) + len(ex.hidden_tests()), "jobs": jobs, "cores": os.cpu_count(),
        "seconds": round(seconds, 2), "per_minute": round(per_min, 1),
        "grader_peak_mb": own_mb, "largest_child_mb": child_mb,
        "floor_submissions": floor_n, "floor_skipped": n - floor_n, "floor_seconds": round(floor_s, 2),
        "floor_per_minute": round(floor_per_min, 1), "ratio": round(seconds / floor_s * floor_n / n, 2),
        "unexpected_scores": wrong_scores,
        "sandbox": sandbox.describe(),
    }
