"""Judges: the functions that score one test of an exercise.

A test in ``exercise.toml`` names its judge as ``MODULE.FUNCTION`` (``design.fault_matrix`` is
:func:`sim.course.judges.design.fault_matrix`). A judge is called as ``judge(submission, args)``
with the folder holding the student's files (a private copy) and the test's ``args``, and returns
a :class:`Judged`: the fraction of the test's points earned, a message a student can act on,
and where it helps, the command that reproduces a failure (``{dir}`` stands for the student's
folder) and the rows that witness it.

Judges run inside the sandbox's child process (:mod:`sim.course.sandbox`): whatever the student's
code does (raise, loop, print, return the wrong type) ends the test, not the grader.
"""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass
from typing import Callable

from ...errors import InputError

__all__ = ["Judged", "passed", "failed", "partial", "resolve"]


@dataclass(frozen=True)
class Judged:
    score: float  # 0.0 .. 1.0 of the test's points
    message: str
    reproduce: str | None = None
    witness: dict | list | None = None

    def to_dict(self) -> dict:
        return asdict(self)


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
