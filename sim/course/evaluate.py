"""Judge a submission: every test of an exercise, in warm judge processes whose student code runs in
the sandbox (:mod:`sim.course.sandbox`), in parallel.

``protolab exercise check`` runs the public tests; the grader (and the kit's own tests of the
reference solutions) adds the hidden ones. A :class:`Report` always says how many points the
tests that ran cover and whether hidden tests exist, so nobody reads "all public tests passed"
as a grade.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import ProtolabError
from .catalog import Exercise, Test
from .safetext import clean_name, clean_result, clean_text

__all__ = ["TestResult", "Report", "evaluate", "run_one", "judge_tests", "to_result", "sandbox_of", "keep_attachments"]


@dataclass(frozen=True)
class TestResult:
    name: str
    title: str
    hidden: bool
    points: float
    max_points: int
    passed: bool
    message: str
    hint: str = ""
    reproduce: str | None = None
    witness: object = None
    output: str = ""
    seconds: float = 0.0
    grid: list | None = None  # the fault-by-invariant rows of the runs this test played
    visibility: str = ""  # Gradescope's: visible, hidden, after_due_date, after_published
    signature: dict | None = None  # what broke (the key of the hint table)
    grader_error: str = ""  # the judge failed (the kit's bug): not graded; what and where, for the instructor
    hidden_cases: bool = False  # the grader runs hidden cases of this (public) test
    hidden_cases_ran: bool = False  # ... and they ran here
    sandbox: str = ""  # which sandbox judged it: "bubblewrap" or "fallback: <why>" (sim.course.sandbox.describe)
    attachment: dict | None = None  # a file the feedback carries whole: {"name", "text"} (a search's counterexample)
    cap: float | None = None  # the rubric's cap: the most the exercise scores (percent of its total) when this rule breaks
    core: bool = False  # the rubric's: a rule the exercise is named for

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Report:
    exercise: Exercise
    submission: Path
    results: list[TestResult] = field(default_factory=list)
    hidden_ran: bool = False
    hidden_points: int | None = None  # points in hidden tests (None: unknown in this install)
    problem: str | None = None  # why the submission could not be graded at all (every test 0)
    sandbox: str = ""  # which sandbox judged it: "bubblewrap" or "fallback: <why>" (sim.course.sandbox.describe)
    flags: list[str] = field(default_factory=list)  # what the grading run noticed beyond the tests (similarity)

    @property
    def score(self) -> float:
        """The points earned, at most a capped rule's share of the total when it broke (the rubric)."""
        from .rubric import capped_score

        return capped_score(self.results)[0]

    @property
    def capped(self) -> tuple[float, list[str]] | None:
        """``(cap percent, broken rules)`` when a broken rule's cap lowered the score, else None."""
        from .rubric import capped_score

        score, cap, rules = capped_score(self.results)
        return (cap, rules) if cap is not None and score < round(sum(r.points for r in self.results), 2) else None

    @property
    def max_score(self) -> int:
        return sum(r.max_points for r in self.results)

    @property
    def grader_errors(self) -> list[TestResult]:
        """Tests the grader could not judge (its own fault): they need the instructor, then a regrade."""
        return [r for r in self.results if r.grader_error]

    @property
    def all_passed(self) -> bool:
        return all(r.passed for r in self.results)

    def first_failure(self) -> TestResult | None:
        return next((r for r in self.results if not r.passed), None)

    def to_dict(self) -> dict:
        return {
            "exercise": self.exercise.number,
            "slug": self.exercise.slug,
            "submission": clean_name(self.submission),
            "score": self.score,
            "max_score": self.max_score,
            "capped": None if self.capped is None else {"cap_percent": self.capped[0], "rules": self.capped[1]},
            "public_only": not self.hidden_ran,
            "hidden_points": self.hidden_points,
            "all_passed": self.all_passed,
            "problem": clean_text(self.problem),
            "sandbox": self.sandbox,
            "zero_reason": _zero_reason(self),
            "flags": [clean_text(f) for f in self.flags],
            "tests": [r.to_dict() for r in self.results],
        }


def _zero_reason(report: Report) -> str:
    from .gradebook import zero_reason

    return report.problem and f"0: {report.problem}" or zero_reason(report)


def to_result(test: Test, v: dict, shown_dir: str, hints=()) -> TestResult:
    """A judge's verdict (a dict, as it crossed the pipe) as the :class:`TestResult` of ``test``."""
    from .hints import choose_hint

    score = float(v.get("score", 0.0))
    repro = v.get("reproduce")
    if repro:
        repro = repro.replace("{dir}", shown_dir)
    ok = score >= 0.999
    return clean_result(TestResult(
        name=test.name, title=test.title, hidden=test.hidden, points=round(score * test.points, 2),
        max_points=test.points, passed=ok, message=v.get("message", "").replace("{dir}", shown_dir),
        hint="" if ok or v.get("grader_error") else choose_hint(list(hints), test, v.get("signature")),
        reproduce=None if ok else repro, witness=None if ok else v.get("witness"),
        output=v.get("output", "") or "", seconds=float(v.get("seconds", 0.0)),
        grid=v.get("grid"), signature=None if ok else v.get("signature"),
        visibility=getattr(test, "visibility", "") or "", grader_error=v.get("grader_error") or "",
        hidden_cases=test.hidden_cases, hidden_cases_ran=test.extended, sandbox=v.get("sandbox") or "",
        cap=getattr(test, "cap", None), core=getattr(test, "core", False),
        attachment=None if ok else _attachment(v.get("attachment"), shown_dir),
    ))  # every piece of it that may quote the student cleaned and capped (sim.course.safetext)


def _attachment(a, shown_dir: str) -> dict | None:
    """A judge's attachment as it crossed the pipe, if it is one: a name and a text (``{dir}`` in it
    names the student's folder, as in the message)."""
    if isinstance(a, dict) and isinstance(a.get("name"), str) and isinstance(a.get("text"), str):
        return {"name": a["name"], "text": a["text"].replace("{dir}", shown_dir)}
    return None


def sandbox_of(results, default: bool = True) -> str:
    """Which sandbox judged ``results`` (TestResults): the one their judge processes reported; else
    (nothing was judged, or in this process) this process's own (:func:`sim.course.sandbox.describe`)."""
    said = next((r.sandbox for r in results if getattr(r, "sandbox", "")), "")
    if said or not default:
        return said
    from .sandbox import describe

    return describe()


def judge_tests(tests: list[Test], folder: Path, shown_dir: str, hints=(), pool=None, progress=None) -> dict[str, TestResult]:
    """Judge ``tests`` on the submission at ``folder``, one after another sharing the student's
    host processes and one time budget (:data:`sim.course.remote.SUBMISSION_SECONDS`): in a warm
    judge process of ``pool`` (``folder`` is then the private copy it judges) or, for the kit's own
    reference answers only, in this process. ``progress(name)`` is called as each test ends."""
    from . import remote

    out: dict[str, TestResult] = {}
    by_name = {t.name: t for t in tests}

    def ended(name: str, v: dict) -> None:
        out[name] = to_result(by_name[name], v, shown_dir, hints)
        if progress is not None:
            progress(name)

    if pool is not None:
        pool.run_submission(folder, tests, budget=remote.SUBMISSION_SECONDS, on_result=ended)
        return out
    import time

    from .judges import forget_submission
    from .sandbox import describe, judge_here

    forget_submission()
    with remote.submission():
        for t in tests:
            t0 = time.perf_counter()
            v = judge_here(t.judge, folder, t.args, keep_hosts=True).to_dict()
            v.update(output=getattr(judge_here, "last_output", ""), flooded=getattr(judge_here, "flooded", False),
                     seconds=round(time.perf_counter() - t0, 3), sandbox=describe())
            from .sandbox import _flood_note

            ended(t.name, _flood_note(v))
    return out


def run_one(test: Test, submission: Path, isolate: bool, shown_dir: str, hints=(), pool=None) -> TestResult:
    """One test of one submission (see :func:`judge_tests`)."""
    if pool is None and isolate:
        from .pool import JudgePool

        with JudgePool(1) as judges:
            return judge_tests([test], submission, shown_dir, hints, judges)[test.name]
    return judge_tests([test], submission, shown_dir, hints, pool)[test.name]


def evaluate(ex: Exercise, submission: str | Path, *, hidden: bool = False, isolate: bool = True, pool=None,
             progress=None, only: list[str] | None = None, shown: str | None = None, rubric=None) -> Report:
    """Run ``ex``'s tests on the folder ``submission`` (public ones; with ``hidden``, the hidden ones
    too, and the hidden cases of public ones). Isolated (always, but for the kit's own tests of its
    reference answers), in a warm judge process of ``pool`` (a :class:`~sim.course.pool.JudgePool`
    shared by many submissions judged at once), or of a pool of its own.

    Every way to grade judges a submission the same way: its tests in the exercise's order, one
    after another, in one judge process, sharing the student's host processes and one budget of the
    student's time (``protolab grade`` does the same per submission, at any ``-j``), so the same
    files get the same verdicts from ``exercise check``, ``grade``, ``kit verify`` and the
    Gradescope autograder (tests/test_one_score.py holds them to it).

    ``progress``, if given, is called as ``progress(done, total, test_name)`` after each test. Each test
    weighs what ``rubric`` says, else the course's rubric (:mod:`sim.course.rubric`)."""
    sub = Path(submission)
    tests = list(ex.graded_tests(hidden, rubric))
    hidden_tests = ex.hidden_tests()
    if only:
        tests = [t for t in tests if t.name in only]
    report = Report(ex, sub, hidden_ran=hidden and bool(hidden_tests or ex.extensions()), hidden_points=ex.hidden_points())
    shown = str(submission) if shown is None else shown
    from .hints import load_hints

    hints = load_hints(ex)
    done = [0]

    def step(name: str) -> None:
        done[0] += 1
        if progress is not None:
            progress(done[0], len(tests), name)

    if not isolate:
        results = judge_tests(tests, sub, shown, hints, None, step)
    else:
        from .pool import JudgePool, private_copy

        with ExitStack() as stack:
            judges = pool if pool is not None else stack.enter_context(JudgePool(1))
            target, problem = private_copy(sub, stack)
            if problem is not None:
                report.results = [_not_judged(t, problem) for t in tests]
                report.problem = problem
                report.sandbox = sandbox_of(report.results)
                return report
            results = judge_tests(tests, target, shown, hints, judges, step)
    report.results = [results[t.name] for t in tests]
    report.sandbox = sandbox_of(report.results)
    return report


def keep_attachments(report: Report, shown_dir: str, place) -> Report:
    """Write each failing test's attachment (a search's ``counterexample.toml``) whole, where
    ``place(name)`` says: ``(path, shown)``, the file to write and how commands name it (the reproduce
    line and the file's own comments name ``{shown_dir}/NAME`` as the judge wrote them; they are made
    to name ``shown``). The report comes back with each attachment saying ``written`` (how it is named)
    or ``not_written`` (why not).

    Never over a file the grader did not write: a file of that name whose first line is not the
    grader's mark (a student's own file, a symbolic link, a folder) stays as it is, and the attachment
    says so. A file already holding the same text is left alone (``exercise check --watch`` watches the
    folder: writing the same bytes again would check again, forever)."""
    from dataclasses import replace

    from ..files import written_whole
    from .judges.search import MARK

    out, taken = [], set()
    for r in report.results:
        a = r.attachment
        if not a or r.passed:
            out.append(r)
            continue
        name = a["name"]
        if Path(name).name != name or name in ("", ".", ".."):  # a name is a name, never a path
            out.append(replace(r, attachment={**a, "not_written": f"{name!r} is not a file name"}))
            continue
        path, shown = place(name)
        was = f"{shown_dir}/{name}"
        text = a["text"].replace(was, shown)
        repro = r.reproduce.replace(was, shown) if r.reproduce else r.reproduce
        why = None
        if shown in taken:
            why = f"another test's {name} was written there"
        elif path.is_symlink() or (path.exists() and not path.is_file()):
            why = f"{shown} is there and is not a file the grader wrote"
        elif path.is_file():
            try:
                old = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                old = ""
            if not old.startswith(MARK):
                why = f"{shown} is there and is not a file the grader wrote; it was left as it is"
            elif old == text:
                path = None  # already there, whole
        if why is None and path is not None:
            try:
                with written_whole(path) as fh:
                    fh.write(text)
            except ProtolabError as e:
                why = e.message
        taken.add(shown)
        done = {"not_written": why} if why else {"written": shown}
        out.append(replace(r, reproduce=repro if why is None else r.reproduce,
                           attachment={**a, "text": text if why is None else a["text"], **done}))
    report.results = out
    return report


def _not_judged(t: Test, problem: str) -> TestResult:
    return TestResult(name=t.name, title=t.title, hidden=t.hidden, points=0.0, max_points=t.points, passed=False,
                      message=clean_text(f"not graded: {problem}"), visibility=getattr(t, "visibility", "") or "",
                      cap=getattr(t, "cap", None), core=getattr(t, "core", False))
