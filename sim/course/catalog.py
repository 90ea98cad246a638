"""The exercises shipped with the kit: ``exercises/NN-slug/exercise.toml`` and, for instructors,
``solutions/NN-slug/`` (reference solution, hidden tests, planted wrong answers).

An ``exercise.toml``::

    number = 1
    slug = "envelope-design"
    title = "Envelope design"
    minutes = 45
    files = ["design.py"]          # what the student edits (copied by 'exercise start')
    summary = "one line"

    [[test]]
    name = "resend-is-duplicate"   # unique within the exercise
    title = "A resend of one intent is recorded as a duplicate"
    points = 10
    timeout = 30                   # seconds, wall clock, for this test's sandbox
    judge = "design.fault_matrix"  # sim.course.judges.design:fault_matrix
    args = { faults = [["resend"]] }
    hint = "what to look at when it fails"
    visibility = "visible"         # optional: when Gradescope shows it to students (see below)

Each test stands for one rule of the seeds and is judged all or nothing: breaking the rule in any of
its cases gives it 0. Every test of an exercise carries the same points (a test of the kit pins it).

Hidden tests live in ``solutions/NN-slug/hidden.toml`` in the same ``[[test]]`` form; every test
there is hidden. A rule can also keep some of its *cases* hidden: a public test that says
``hidden_cases = true`` is extended, when the grader runs it, by an ``[[extend]]`` table of
``hidden.toml``::

    [[extend]]
    test = "resend-is-duplicate"
    args = { cases = [ ... ] }     # lists are appended to the public test's, other values replace them

so the student's check runs the public cases of every rule and says which rules have more. Nothing
under ``solutions/`` is ever copied to a student.

Visibility takes Gradescope's values (``hidden``, ``after_due_date``, ``after_published``,
``visible``): public tests default to ``visible``, hidden ones to ``after_published``. A top-level
``visibility = { public = "...", hidden = "..." }`` in ``exercise.toml`` changes the defaults (a
``hidden.toml`` may carry its own); a test's own ``visibility`` wins over both.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError, friendly_list
from ..resources import shipped

__all__ = ["Test", "Exercise", "exercises", "get_exercise", "solutions_dir", "solutions_root", "load_tests", "VISIBILITIES",
           "DEFAULT_VISIBILITY", "use_course", "course_here", "is_course"]

_SLUG = re.compile(r"^(\d\d)-([a-z0-9-]+)$")

#: Gradescope's visibility values, and the default for public and for hidden tests.
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
DEFAULT_VISIBILITY = {"public": "visible", "hidden": "after_published"}


@dataclass(frozen=True)
class Test:
    name: str
    title: str
    points: int
    timeout: float
    judge: str
    args: dict = field(default_factory=dict, compare=False, hash=False)
    hint: str = ""
    hidden: bool = False
    visibility: str = ""  # Gradescope's (VISIBILITIES); load_tests always sets it, "" means the default for its kind
    hidden_cases: bool = False  # the grader adds hidden cases to this public test (solutions/NN/hidden.toml [[extend]])
    extended: bool = False  # this copy of the test carries its hidden cases
    cap: float | None = None  # the rubric's: the most the exercise scores (percent of its total) when this rule breaks
    core: bool = False  # the rubric's: a rule the exercise is named for


@dataclass(frozen=True)
class Exercise:
    number: int
    slug: str
    title: str
    minutes: int
    files: tuple[str, ...]
    summary: str
    folder: Path
    tests: tuple[Test, ...]

    @property
    def dirname(self) -> str:
        return f"{self.number:02d}-{self.slug}"

    @property
    def public_points(self) -> int:
        return sum(t.points for t in self.tests if not t.hidden)

    def solutions(self) -> Path | None:
        """``solutions/NN-slug`` of this exercise, when this install can see it (see :func:`solutions_root`)."""
        return solutions_dir(self)

    def hidden_tests(self) -> tuple[Test, ...]:
        """The hidden tests, when this install has the solutions (an instructor's checkout)."""
        sol = self.solutions()
        if sol is None or not (sol / "hidden.toml").is_file():
            return ()
        return load_tests(sol / "hidden.toml", hidden=True, defaults_from=self.folder / "exercise.toml")

    def extensions(self) -> dict[str, dict]:
        """The hidden cases of public tests (``[[extend]]`` in hidden.toml), by test name; empty when
        this install has no solutions."""
        sol = self.solutions()
        if sol is None or not (sol / "hidden.toml").is_file():
            return {}
        path = sol / "hidden.toml"
        out: dict[str, dict] = {}
        names = {t.name for t in self.tests}
        for i, e in enumerate(_read_toml(path).get("extend", []), 1):
            if not isinstance(e, dict) or not isinstance(e.get("test"), str) or not isinstance(e.get("args", {}), dict):
                raise InputError(f"{path}: extend {i} needs test = NAME and args = {{...}}", code="E_EXERCISE_FILE")
            if e["test"] not in names:
                raise InputError(f"{path}: extend {i} names {e['test']!r}, which is no public test of exercise "
                                 f"{self.number}; expected one of: {friendly_list(sorted(names))}", code="E_EXERCISE_FILE")
            out.setdefault(e["test"], {})
            out[e["test"]] = _merge_args(out[e["test"]], e.get("args", {}))
        return out

    def graded_tests(self, hidden: bool, rubric=None) -> tuple[Test, ...]:
        """The tests a check runs: the public ones; with ``hidden`` (the grader), each public test
        with its hidden cases added, then the hidden tests. Each weighs what ``rubric`` (a
        :class:`~sim.course.rubric.Rubric`), else the course's rubric, else exercise.toml says."""
        from .rubric import course_rubric

        rubric = rubric if rubric is not None else course_rubric(self)
        if not hidden:
            return rubric.apply(self.tests) if rubric is not None else self.tests
        from dataclasses import replace

        ext = self.extensions()
        public = tuple(replace(t, args=_merge_args(t.args, ext[t.name]), extended=True) if t.name in ext else t
                       for t in self.tests)
        tests = public + self.hidden_tests()
        return rubric.apply(tests) if rubric is not None else tests

    def hidden_points(self) -> int | None:
        """Points in hidden tests (``None``: unknown here, this install has no solutions)."""
        declared = _read_toml(self.folder / "exercise.toml").get("hidden_points")
        if self.solutions() is not None:  # the instructor's view: what the grader runs, weighed as it weighs
            return sum(t.points for t in self.graded_tests(True) if t.hidden)
        return declared


def _merge_args(base: dict, more: dict) -> dict:
    """``base`` with ``more`` added: lists are appended, anything else replaced."""
    out = dict(base)
    for k, v in more.items():
        out[k] = list(out[k]) + list(v) if isinstance(v, list) and isinstance(out.get(k), list) else v
    return out


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise InputError(f"{path} cannot be read: {e}", code="E_EXERCISE_FILE") from e


def _visibility(value, where: str) -> str:
    if not isinstance(value, str) or value not in VISIBILITIES:
        raise InputError(f"{where}: visibility {value!r} is not one of {friendly_list(VISIBILITIES)}",
                         code="E_EXERCISE_FILE")
    return value


def _visibility_defaults(data: dict, path: Path, base: dict | None = None) -> dict:
    """``{"public": ..., "hidden": ...}`` from a file's top-level ``visibility`` table over ``base``."""
    out = dict(base or DEFAULT_VISIBILITY)
    table = data.get("visibility", {})
    if not isinstance(table, dict):
        raise InputError(f'{path}: the top-level visibility must be a table, e.g. visibility = {{ public = "visible", '
                         f'hidden = "after_published" }}', code="E_EXERCISE_FILE")
    unknown = sorted(set(table) - set(DEFAULT_VISIBILITY))
    if unknown:
        raise InputError(f"{path}: visibility has unknown key {unknown[0]!r}; expected 'public' or 'hidden'",
                         code="E_EXERCISE_FILE")
    for kind, value in table.items():
        out[kind] = _visibility(value, f"{path}: visibility.{kind}")
    return out


def _cap(v, where: str) -> float | None:
    """A test's ``cap`` (the rubric's, written in exercise.toml so a student's check weighs as the grader
    does): the most the exercise scores, in percent of its total, when the test fails."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 100:
        raise InputError(f"{where}: cap = {v!r}; a cap is a percent of the exercise's total, 0 to 100",
                         code="E_EXERCISE_FILE")
    return float(v)


def _flag(v, where: str) -> bool:
    if not isinstance(v, bool):
        raise InputError(f"{where}: core = {v!r}; write core = true or leave it out", code="E_EXERCISE_FILE")
    return v


def load_tests(path: Path, *, hidden: bool = False, defaults_from: Path | None = None) -> tuple[Test, ...]:
    """The ``[[test]]`` tables of ``path``; ``defaults_from`` (a hidden.toml's exercise.toml) supplies
    the top-level visibility defaults that ``path`` does not set itself."""
    data = _read_toml(path)
    base = _visibility_defaults(_read_toml(defaults_from), defaults_from) if defaults_from is not None else None
    default = _visibility_defaults(data, path, base)["hidden" if hidden else "public"]
    out = []
    for i, t in enumerate(data.get("test", [])):
        try:
            out.append(Test(
                name=t["name"], title=t.get("title", t["name"]), points=int(t["points"]),
                timeout=float(t.get("timeout", 30)), judge=t["judge"], args=dict(t.get("args", {})),
                hint=t.get("hint", ""), hidden=hidden, hidden_cases=bool(t.get("hidden_cases", False)),
                visibility=_visibility(t["visibility"], f"{path}: test {t['name']!r}") if "visibility" in t else default,
                cap=_cap(t.get("cap"), f"{path}: test {t['name']!r}"), core=_flag(t.get("core", False), f"{path}: test {t['name']!r}"),
            ))
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"{path}: test {i + 1} is malformed ({e})", code="E_EXERCISE_FILE") from e
    names = [t.name for t in out]
    if len(set(names)) != len(names):
        raise InputError(f"{path}: two tests share a name", code="E_EXERCISE_FILE")
    return tuple(out)


def _load(folder: Path) -> Exercise:
    data = _read_toml(folder / "exercise.toml")
    m = _SLUG.match(folder.name)
    return Exercise(
        number=int(data.get("number", m.group(1) if m else 0)),
        slug=data.get("slug", m.group(2) if m else folder.name),
        title=data.get("title", folder.name),
        minutes=int(data.get("minutes", 30)),
        files=tuple(data.get("files", ())),
        summary=data.get("summary", ""),
        folder=folder,
        tests=load_tests(folder / "exercise.toml"),
    )


def exercises() -> list[Exercise]:
    """Every shipped exercise, in number order."""
    root = shipped("exercises")
    if not root.is_dir():
        return []
    found = [_load(p) for p in sorted(root.iterdir()) if p.is_dir() and (p / "exercise.toml").is_file()]
    return sorted(found, key=lambda e: e.number)


def get_exercise(which: str | int) -> Exercise:
    """An exercise by number (``1``, ``01``) or slug (``envelope-design``)."""
    all_ = exercises()
    text = str(which).strip()
    for ex in all_:
        if text.isdigit() and int(text) == ex.number or text in (ex.slug, ex.dirname):
            return ex
    raise InputError(
        f"no exercise {text!r}; expected one of: {friendly_list(str(e.number) for e in all_)} "
        "(protolab exercise list shows them)",
        code="E_UNKNOWN_EXERCISE",
    )


#: The course named with ``--course`` (:func:`use_course`), if any.
_COURSE: list = []


def is_course(folder: Path) -> bool:
    """True when ``folder`` is a protolab course: a checkout with ``pyproject.toml`` (the protolab
    project), ``exercises/`` and the instructors' ``solutions/``."""
    folder = Path(folder)
    try:
        ours = 'name = "protolab"' in (folder / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return False
    return ours and (folder / "exercises").is_dir() and (folder / "solutions").is_dir()


def course_here(start: Path | None = None) -> Path | None:
    """The course in the current folder (or ``start``) or the nearest of its parents, if any."""
    here = Path.cwd() if start is None else Path(start)
    here = here.resolve()
    for d in (here, *here.parents):
        if is_course(d):
            return d
    return None


def use_course(folder: Path | None) -> Path | None:
    """Grade, build and verify with the course at ``folder`` (``--course``): its ``solutions/``
    (hidden tests, model answers, hints) from now on in this process; None forgets it. Refuses a
    folder that is not a course, saying what it lacks."""
    _COURSE.clear()
    if folder is None:
        return None
    root = Path(folder).expanduser().resolve()
    if not root.is_dir():
        raise InputError(f"--course {folder}: no such folder; name your protolab checkout (the folder holding "
                         "pyproject.toml, exercises/ and solutions/)", code="E_NOT_A_CHECKOUT")
    if not is_course(root):
        lacks = [n for n in ("pyproject.toml", "exercises/", "solutions/") if not (root / n.rstrip("/")).exists()]
        what = f"it has no {' and no '.join(lacks)}" if lacks else "its pyproject.toml is not protolab's"
        raise InputError(f"--course {folder} is not a protolab course ({what}); name your protolab checkout (the "
                         "folder holding pyproject.toml, exercises/ and solutions/)", code="E_NOT_A_CHECKOUT")
    _COURSE.append(root)
    return root


def solutions_root() -> Path | None:
    """Where the instructors' ``solutions/`` folder is, if this install can see one: the folder
    ``$PROTOLAB_SOLUTIONS`` names; the course named with ``--course`` (:func:`use_course`); the
    course in the current folder or its parents (so an install from a checkout, ``pip install .``,
    whose wheel leaves ``solutions/`` out, finds it when run there); the checkout the ``sim``
    package runs from. The student kit has none."""
    import os

    env = os.environ.get("PROTOLAB_SOLUTIONS")
    if env:
        p = Path(env)
        if not p.is_dir():
            raise InputError(f"PROTOLAB_SOLUTIONS names {env}, which is not a folder", code="E_NO_SOLUTIONS")
        return p
    if _COURSE:
        return _COURSE[0] / "solutions"
    here = course_here()
    if here is not None:
        return here / "solutions"
    p = shipped("solutions")
    return p if p.is_dir() else None


def solutions_dir(ex: Exercise) -> Path | None:
    """``solutions/NN-slug`` when this install can see it (see :func:`solutions_root`)."""
    root = solutions_root()
    p = root / ex.dirname if root is not None else None
    return p if p is not None and p.is_dir() else None
