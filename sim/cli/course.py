"""The course: 'protolab exercise' (list, start, check, hint), 'protolab kit' (student, classroom,
rubric, verify), 'protolab autograder' and 'protolab grade'."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import List, Optional

import typer

from ..errors import InputError
from ..files import check_output
from .common import output_rows, COURSE_OPT, JSON_OPT, _console, _course, _print_json, _progress, _table

commands = typer.Typer()  # this group's top-level commands (sim/cli/__init__.py adds them to the app)

#: --sandbox of the commands that run students' code: without bubblewrap they refuse (E_NO_SANDBOX) unless 'none'
SANDBOX_OPT = typer.Option("bubblewrap", "--sandbox", metavar="bubblewrap|none",
                           help="'none': grade even without an operating-system sandbox (bubblewrap), knowingly; every "
                                "row then carries a warning. Without bubblewrap and without this, students' code is "
                                "not run (E_NO_SANDBOX). Where bubblewrap works it is always used.")


exercise_app = typer.Typer(help="Graded exercises: list, start (copy the starter), check (public tests), hint, try "
                                 "(run a line of Python beside your files, as reproduce lines do).",
                           no_args_is_help=True)


@exercise_app.command("list")
def exercise_list(as_json: bool = JSON_OPT):
    """Every exercise: number, title, minutes, points in public and hidden tests."""
    from ..course.catalog import exercises

    rows = []
    for ex in exercises():
        hidden = ex.hidden_points()
        rows.append({"number": ex.number, "slug": ex.slug, "title": ex.title, "minutes": ex.minutes,
                     "files": list(ex.files), "public_points": ex.public_points, "hidden_points": hidden,
                     "folder": ex.dirname, "summary": ex.summary})
    output_rows("Exercises", ["#", "exercise", "minutes", "you edit", "points (public + hidden)"],
                [[r["number"], r["title"], r["minutes"], ", ".join(r["files"]),
                  f"{r['public_points']} + {r['hidden_points'] if r['hidden_points'] is not None else '?'}"] for r in rows],
                caption="protolab exercise start N copies the starter files to ./NN-slug; "
                        "protolab exercise check N runs the public tests", as_json=as_json, data=rows)


def _is_exercise_folder(d: Path, ex) -> bool:
    """True when ``d`` is a copy of exercise ``ex`` made by ``exercise start``."""
    import tomllib

    try:
        return tomllib.loads((d / "exercise.toml").read_text(encoding="utf-8")).get("number") == ex.number
    except (OSError, ValueError):
        return False


def _exercise_dir(ex, folder: Optional[Path]) -> Path:
    d = folder if folder is not None else Path(ex.dirname)
    if folder is None and not d.is_dir():
        # run from inside the exercise's folder, or from a folder below the one it was started in:
        # the nearest of ., its parents, and their NN-slug folders
        here = Path.cwd()
        for up in (here, *here.parents):
            if _is_exercise_folder(up, ex) or (up / ex.dirname).is_dir():
                found = up if _is_exercise_folder(up, ex) else up / ex.dirname
                d = Path(os.path.relpath(found, here)) if found != here else Path(".")
                break
    if not d.is_dir():
        if folder is not None:
            raise InputError(f"{d} is not a folder; name the folder holding {', '.join(ex.files)}, or start the "
                             f"exercise with 'protolab exercise start {ex.number}'", code="E_DIR_MISSING")
        raise InputError(f"no {ex.dirname} folder in {Path.cwd()} or any folder above it; start the exercise with "
                         f"'protolab exercise start {ex.number}', or name your folder: "
                         f"'protolab exercise check {ex.number} PATH'", code="E_DIR_MISSING")
    missing = [f for f in ex.files if not (d / f).is_file()]
    if missing:
        raise InputError(f"{d} has no {missing[0]}; exercise {ex.number} is judged on {', '.join(ex.files)}",
                         code="E_FILE_MISSING")
    return d


@exercise_app.command("start")
def exercise_start(
    which: str = typer.Argument(..., help="The exercise: its number (1) or slug (envelope-design)."),
    folder: Optional[Path] = typer.Argument(None, help="Where to put it (default ./NN-slug); must not exist."),
):
    """Copy an exercise's README, starter files and public tests to a new folder."""
    import shutil

    from ..course.catalog import get_exercise

    ex = get_exercise(which)
    dest = folder if folder is not None else Path(ex.dirname)
    if dest.exists():
        raise InputError(f"{dest} already exists; nothing was copied (pick another folder or remove it)", code="E_DIR_EXISTS")
    if not dest.parent.exists():
        raise InputError(f"folder {dest.parent} does not exist", code="E_DIR_MISSING")
    tmp = dest.with_name(f".{dest.name}.partial-{os.getpid()}")
    try:
        shutil.copytree(ex.folder, tmp, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    typer.echo(f"exercise {ex.number}: {ex.title} -> {dest}/")
    typer.echo(f"  read {dest}/README.md, edit {', '.join(ex.files)}, then:")
    typer.echo(f"  protolab exercise check {ex.number}{'' if folder is None else ' ' + str(dest)}"
               "            (--watch re-checks on every save)")


def _render_report(report, con) -> None:
    ex = report.exercise
    from ..course.safetext import clean_name

    from rich.markup import escape

    con.print(f"[bold]exercise {ex.number}: {ex.title}[/]  ({escape(clean_name(report.submission))})", highlight=False)
    failed = [r for r in report.results if not r.passed and not r.grader_error]
    # One cause for every failure (the file does not import, a function is missing, the code ran out
    # of time or memory before any test could finish): said once, above the tests, with no hints.
    once = failed[0].message if len(failed) > 1 and len({r.message for r in failed}) == 1 else None
    if once is not None:
        con.print(f"  [bold red]your files could not be tested[/]: {once}", highlight=False)
        con.print("  (every test below failed for this one reason; fix it and check again)", highlight=False,
                  style="dim")
    for r in report.results:
        mark = "[green]PASS[/]" if r.passed else "[bold yellow]N/G [/]" if r.grader_error else "[bold red]FAIL[/]"
        tag = " [dim](hidden)[/]" if r.hidden else " [dim](with hidden cases)[/]" if r.hidden_cases_ran else ""
        weight = ", ".join(x for x in ("core" if getattr(r, "core", False) else "",
                                       f"caps at {r.cap:g}%" if getattr(r, "cap", None) is not None else "") if x)
        tag += f" [bold]\\[{weight}][/]" if weight else ""
        con.print(f"  {mark} {r.points:g}/{r.max_points:g}  {r.name}{tag}: {r.title}", highlight=False)
        if r.grader_error:
            con.print(f"       {r.message}", highlight=False, markup=False)
        elif not r.passed and once is None:
            first, *table = r.message.splitlines() or [""]
            con.print(f"       what broke: {first}", highlight=False, markup=False)
            for line in table:  # a table under the message (a search's path), kept as lines
                con.print(f"       {line}", highlight=False, markup=False, soft_wrap=True)
            if r.reproduce:
                con.print(f"       reproduce:  {r.reproduce}", highlight=False, markup=False,
                          soft_wrap=True)  # one line, so that copy and paste keeps it whole
            if r.hint:
                con.print(f"       hint:       {r.hint}", highlight=False, markup=False)
            if r.attachment:
                a = r.attachment
                said = (f"written to {a['written']}; the reproduce line replays it" if a.get("written")
                        else f"not written: {a['not_written']}; save this text beside your files to replay it"
                        if a.get("not_written") else "save it beside your files to replay it")
                con.print(f"       {a['name']} ({said}):", highlight=False, markup=False, soft_wrap=True)
                for line in r.attachment["text"].splitlines():
                    con.print(f"         {line}", highlight=False, markup=False, soft_wrap=True)
    capped = report.capped
    con.print(f"score: {report.score:g}/{report.max_score:g}" + (
        f" (capped at {capped[0]:g}% of the total: {', '.join(capped[1])} broke; the rules that hold add up to "
        f"{sum(r.points for r in report.results):g})" if capped else ""), highlight=False)
    for flag in getattr(report, "flags", None) or ():  # what --similarity noticed
        con.print(flag, highlight=False, markup=False)
    said = _sandbox_line(report)
    if said:
        con.print(said, highlight=False, markup=False, style="dim")
    if not report.hidden_ran:
        hp = report.hidden_points
        hidden = f"{hp} more points are in hidden tests" if hp else "hidden tests may exist"
        more = [r.name for r in report.results if r.hidden_cases]
        if more:
            hidden += f"; the grader also tries hidden cases of {', '.join(more)}"
        verdict = "all public tests pass" if report.all_passed else "some public tests fail"
        con.print(f"[bold]{verdict}[/]: these public tests cover {report.max_score} points; {hidden}, which the "
                  "instructor runs. This is not your grade.", highlight=False)


def _check_once(ex, d: Path, as_json: bool, hidden: bool = False) -> int:
    from ..course.evaluate import evaluate, keep_attachments

    con = _console()
    with _progress(not as_json) as bar:
        job = bar.add_task(f"exercise {ex.number}", total=len(ex.tests))
        report = evaluate(ex, d, hidden=hidden, progress=lambda done, total, name: bar.update(job, completed=done))
    # a search's counterexample.toml goes beside the student's files, where its reproduce line looks for it
    keep_attachments(report, str(d), lambda name: (d / name, f"{d}/{name}"))
    if as_json:
        _print_json(report.to_dict())
    else:
        _render_report(report, con)
    return 0 if report.all_passed else 1


@exercise_app.command("check")
def exercise_check(
    which: str = typer.Argument(..., help="The exercise: its number or slug."),
    folder: Optional[Path] = typer.Argument(None, help="The folder holding your files (default ./NN-slug)."),
    watch: bool = typer.Option(False, "--watch", help="Check again whenever a file in the folder changes (ctrl+c stops)."),
    as_json: bool = JSON_OPT,
):
    """Run the public tests: points per test, what broke, the command that reproduces it, a hint.
    Exit 0 when every public test passes, 1 when one fails."""
    from ..course.catalog import get_exercise

    ex = get_exercise(which)
    d = _exercise_dir(ex, folder)
    if not watch:
        raise typer.Exit(_check_once(ex, d, as_json))
    import time

    from ..course.judges.search import MARK

    def ours(p: Path) -> bool:  # a counterexample the check wrote is not a change of the student's
        try:
            with open(p, encoding="utf-8") as fh:
                return fh.read(len(MARK)) == MARK
        except (OSError, UnicodeDecodeError):
            return False

    def stamp():
        return sorted((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in d.rglob("*")
                      if p.is_file() and "__pycache__" not in p.parts and not (p.suffix == ".toml" and ours(p)))

    seen = None
    try:
        while True:
            now = stamp()
            if now != seen:
                seen = now
                if not as_json:
                    _console().rule(f"checking {d} ({time.strftime('%H:%M:%S')})")
                _check_once(ex, d, as_json)
                if not as_json:
                    typer.echo("watching for changes (ctrl+c stops)")
            time.sleep(0.5)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None


@exercise_app.command("try")
def exercise_try(
    which: str = typer.Argument(..., help="The exercise: its number or slug."),
    folder: Optional[Path] = typer.Argument(None, help="The folder holding your files (default ./NN-slug)."),
    code: str = typer.Option(..., "-c", "--code", help="Python to run, as 'python -c' would: your files import by "
                                                       "their names (import keys), the kit's modules too."),
    processes: int = typer.Option(0, "--processes", min=0, max=8, help="Run it in this many processes, each with "
                                  "its own hash seed (1, 2, ...), and exit 1 when they print different things."),
):
    """Run a line of Python in your exercise's folder, with the kit importable: what the reproduce lines
    of a failing test use to call your functions as the test did ('cd FOLDER && python -c CODE', on the
    Python protolab is installed in: no virtualenv needs to be active). Your code runs here, in this
    process, as with 'run --design'. Its exit status is the code's (sys.exit(1): 1); code that raises
    prints one line, where it raised, and exits 1."""
    import subprocess
    import sys

    from ..course.catalog import get_exercise
    from ..errors import raised_at
    from ..plugins import no_bytecode

    ex = get_exercise(which)
    d = _exercise_dir(ex, folder)
    try:
        compiled = compile(code, "<protolab exercise try>", "exec")
    except SyntaxError as e:
        raise InputError(f"the code given with -c is not Python: {e.msg} (column {e.offset})", code="E_USAGE") from None
    if processes:  # the same code in fresh processes, each with its own hash seed: do they agree?
        outs = []
        for seed in range(1, processes + 1):
            env = {**os.environ, "PYTHONHASHSEED": str(seed)}
            r = subprocess.run([sys.executable, "-m", "sim", "exercise", "try", str(ex.number), str(d), "-c", code],
                               env=env, capture_output=True, text=True)
            outs.append(r.stdout)
            typer.echo(f"process {seed} (hash seed {seed}), exit status {r.returncode}:")
            for line in (r.stdout + r.stderr).splitlines():
                typer.echo(f"  {line}")
            if r.returncode not in (0, 1):
                raise typer.Exit(r.returncode)
        differ = len(set(outs)) > 1
        typer.echo(f"the {processes} processes printed {'DIFFERENT things' if differ else 'the same'}")
        raise typer.Exit(1 if differ else 0)
    os.chdir(d)  # as 'cd FOLDER && python -c CODE': the code names the files by their names
    sys.path.insert(0, os.getcwd())
    sys.argv = ["-c"]
    try:
        with no_bytecode():  # nothing written into the student's folder
            exec(compiled, {"__name__": "__main__", "__builtins__": __builtins__})
    except KeyboardInterrupt:
        raise
    except SystemExit as e:  # the code's own exit status, as python -c gives it
        if e.code in (None, 0):
            return
        if isinstance(e.code, int):
            raise typer.Exit(e.code) from None
        typer.echo(str(e.code), err=True)
        raise typer.Exit(1) from None
    except Exception as e:  # noqa: BLE001 - the learner's code raised: one line, where it raised
        typer.echo(f"raised {type(e).__name__}: {' '.join(str(e).split())[:300]}{raised_at(e)}", err=True)
        raise typer.Exit(1) from None


@exercise_app.command("hint")
def exercise_hint(
    which: str = typer.Argument(..., help="The exercise: its number or slug."),
    folder: Optional[Path] = typer.Argument(None, help="The folder holding your files (default ./NN-slug)."),
):
    """The hint for the first failing public test (the tests run first)."""
    from ..course.catalog import get_exercise
    from ..course.evaluate import evaluate

    ex = get_exercise(which)
    d = _exercise_dir(ex, folder)
    report = evaluate(ex, d)
    first = report.first_failure()
    if first is None:
        typer.echo(f"every public test of exercise {ex.number} passes; hidden tests remain, which the instructor runs")
        return
    typer.echo(f"{first.name}: {first.title}")
    typer.echo(f"  what broke: {first.message}")
    typer.echo(f"  hint: {first.hint or '(this test has no hint)'}")


def _sandbox_line(report_or_text) -> str:
    """One line on which sandbox judged it; the fallback says what to do about it."""
    text = report_or_text if isinstance(report_or_text, str) else getattr(report_or_text, "sandbox", "")
    if not text:
        return ""
    if text.startswith("fallback"):
        return (f"sandbox: {text}; WARNING: student code ran WITHOUT an operating-system sandbox, with the audit hooks "
                "and limits alone (install bubblewrap, 'apt-get install bubblewrap', for the operating-system sandbox)")
    return f"sandbox: {text}"


kit_app = typer.Typer(help="(Instructors) the student kit: build it (no solutions, no hidden tests) and verify that "
                           "every exercise's answers are judged right; each exercise's rubric (what each rule is "
                           "worth in the grade).", no_args_is_help=True)


@kit_app.command("student")
def kit_student(dest: Path = typer.Argument(..., help="Where to write the kit: a new or empty folder, or a previous "
                                                      "kit (replaced)."),
                course: Optional[Path] = COURSE_OPT):
    """(Instructors) write the kit students get: the sim package, data, labs, exercises (starters and
    public tests), pyproject.toml and README; never solutions, hidden tests or planted wrong answers.
    It lands only after two checks: by content (no line of a solution, no hidden test's name or
    title) and by running each exercise's public tests on its starter with only the kit on the path."""
    from ..course.kit import build_student_kit, project_root

    root = project_root(course)
    with _progress() as bar:
        job = bar.add_task("smoke check: public tests on each starter", total=None)
        res = build_student_kit(dest, root=root, progress=lambda done, total, name: bar.update(
            job, completed=done, total=total, description=f"smoke check: {name}"))
    typer.echo(f"wrote the student kit to {res.dest}/ ({res.files} files{', replacing the previous kit' if res.replaced else ''})")
    typer.echo("  content: no line of any solution or planted wrong answer, no hidden test's name or title")
    typer.echo(f"  smoke check: with only the kit on the path, no hidden tests and no solutions; the public tests of "
               f"{len(res.exercises)} exercises ran on their starters:")
    for row in res.exercises:
        typer.echo(f"    {row['dirname']}: starter {row['score']:g}/{row['max_score']} on {len(row['tests'])} public tests")
    typer.echo(f"  students: cd {res.dest} && pip install . && protolab exercise list")


@kit_app.command("classroom")
def kit_classroom(
    which: str = typer.Argument(..., help="The exercise: its number or slug."),
    dest: Path = typer.Argument(..., help="A new folder for the class (one folder per submission)."),
    loops: bool = typer.Option(False, "--loops", help="Add the two endless loops too (each spends whole time limits)."),
    course: Optional[Path] = COURSE_OPT,
):
    """(Instructors) a generated class to try the grader on: the model answer, the starter, every
    planted wrong answer and every hostile kind, each named for what it is."""
    from ..course.catalog import get_exercise
    from ..course.corpus import build_corpus

    _course(course)
    ex = get_exercise(which)
    if dest.exists():
        raise InputError(f"{dest} already exists; give a new folder", code="E_OUTPUT_EXISTS")
    entries = build_corpus(ex, dest, slow=loops)
    want = {"full": "full marks", "less": "less than full marks", "zero": "0, with the reason"}
    t = _table(f"{len(entries)} submissions of exercise {ex.number} in {dest}", ["submission", "must get", "what it is"],
               [[e.name, want[e.expect], e.what] for e in entries], caption=f"protolab grade {ex.number} {dest} grades them all")
    t.columns[0].no_wrap = False
    t.columns[0].overflow = "fold"
    _console().print(t)


@kit_app.command("rubric")
def kit_rubric(
    which: str = typer.Argument(..., help="The exercise: its number or slug."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write an editable copy of the rubric to "
                                                                        "this new file."),
    check: Optional[Path] = typer.Option(None, "--check", help="Validate this rubric file (exit 2 with E_RUBRIC "
                                                                "when it is not one) and show it."),
    as_json: bool = JSON_OPT,
    course: Optional[Path] = COURSE_OPT,
):
    """(Instructors) the rubric of an exercise: each rule's points and cap, which rules are its core and
    what breaking one alone keeps. The course's is solutions/NN-slug/rubric.toml; -o writes a copy to
    edit, --check validates one, and 'grade N DIR --rubric FILE' grades with it."""
    from ..course.catalog import get_exercise
    from ..course.rubric import RUBRIC_FILE, effective_rubric, rubric_rows, rubric_toml

    _course(course)
    ex = get_exercise(which)
    rubric = effective_rubric(ex, check)
    if output is not None:
        from ..files import written_whole

        rubric_reads = [check, ex.solutions() / RUBRIC_FILE if ex.solutions() else None]
        check_output(output, rubric_reads)  # not over the rubric it shows
        if output.exists():
            raise InputError(f"{output} already exists; nothing was written (name a new file)", code="E_OUTPUT_EXISTS")
        with written_whole(output, code="E_OUTPUT", reads=rubric_reads) as fh:
            fh.write(rubric_toml(ex, rubric))
    rows = rubric_rows(ex, rubric)
    where = rubric.source or f"exercise.toml's points (no solutions/{ex.dirname}/{RUBRIC_FILE} in this course)"
    if as_json:
        _print_json({"exercise": ex.number, "source": where, "total": rubric.total, "core": list(rubric.core),
                     "why": rubric.why, "rules": rows, "written": str(output) if output is not None else None})
        return
    output_rows(f"Exercise {ex.number}: {ex.title}, the rubric ({where})",
                ["rule", "points", "share", "cap", "core", "breaking it alone keeps"],
                [[r["rule"] + (" (hidden)" if r["hidden"] else ""), f"{r['points']:g}", f"{r['share']:.0%}",
                  "" if r["cap_percent"] is None else f"{r['cap_percent']:g}%", "core" if r["core"] else "",
                  f"{r['kept_if_only_this_breaks']:.0%}"] for r in rows],
                caption=f"out of {rubric.total:g} points; a cap is the most the exercise scores, in percent of its "
                        "total, when that rule breaks")
    if rubric.why:
        typer.echo(f"core: {', '.join(rubric.core)}. {rubric.why}")
    for r in rows:  # the instructor's to decide, but said: a core rule that costs less than a quarter
        if r["core"] and r["kept_if_only_this_breaks"] > 0.75:
            typer.echo(f"note: breaking the core rule {r['rule']} alone keeps {r['kept_if_only_this_breaks']:.0%} "
                       "(the default keeps at most 75%: raise its points or give it a cap)")
    if check is not None:
        typer.echo(f"{check}: a valid rubric of exercise {ex.number}")
    if output is not None:
        typer.echo(f"wrote {output}: edit it, check it with 'protolab kit rubric {ex.number} --check {output}', grade "
                   f"with it ('protolab grade {ex.number} DIR --rubric {output}'), or save it as "
                   f"solutions/{ex.dirname}/{RUBRIC_FILE}")


@kit_app.command("verify")
def kit_verify(
    exercise: Optional[List[str]] = typer.Option(None, "--exercise", "-e", help="Only this exercise (number or slug); "
                                                                                 "repeat for more."),
    as_json: bool = JSON_OPT,
    mutants: bool = typer.Option(False, "--mutants", help="Measure the tests instead: mutate each model answer "
                                                          "and count the mutants that lose points (target 95%)."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="With --mutants: an even sample of at most "
                                                                     "this many mutants per exercise."),
    course: Optional[Path] = COURSE_OPT,
):
    """(Instructors) judge every exercise as real grading does (hidden tests, each test in the
    sandbox): the model answer must get full marks, the starter and each planted wrong answer less
    (and fail the tests its expect.toml names). Exit 0 when all hold, 1 otherwise.

    With --mutants: the grader's mutation score. Each model answer is mutated (an operator flipped,
    a part of a key dropped, a rule of a table removed, ...); a mutant that behaves as the model
    answer on every case is equivalent, every other one must lose points. Exit 1 when an exercise
    is below the target."""
    from ..course.kit import project_root, verify_kit

    root = project_root(course)  # the course, or an error that names --course
    _course(root)
    if mutants:
        _kit_mutants(exercise, as_json=as_json, limit=limit)
        return
    with _progress(not as_json) as bar:
        job = bar.add_task("verifying", total=None)
        rows = verify_kit(root=root, only=exercise, progress=lambda done, total, name: bar.update(
            job, completed=done, total=total, description=f"judged {name}"))
    bad = [r for r in rows if not r.ok]
    output_rows("Kit verify: every exercise's answers, judged with hidden tests in the sandbox",
                ["#", "submission", "score", "expected", "result"],
                [[r.exercise, r.submission, "-" if r.score is None else f"{r.score:g}/{r.max_score}", r.want,
                  "[green]as expected[/]" if r.ok else f"[bold red]WRONG[/] {r.problem}"] for r in rows],
                caption=f"{len(rows) - len(bad)} of {len(rows)} as expected", as_json=as_json,
                data=[r.to_dict() for r in rows])
    if not as_json:
        for r in bad:
            typer.echo(f"FAILED: exercise {r.exercise} {r.submission}: expected {r.want}; {r.problem}")
    raise typer.Exit(1 if bad else 0)


def _kit_mutants(only, *, as_json: bool, limit) -> None:
    from ..course.catalog import exercises, get_exercise
    from ..course.mutants import TARGET, mutation_run

    chosen = [get_exercise(x) for x in only] if only else exercises()
    reports = []
    with _progress(not as_json) as bar:
        for ex in chosen:
            job = bar.add_task(f"exercise {ex.number}: mutants", total=None)
            reports.append(mutation_run(ex, limit=limit, progress=lambda done, total, name, job=job: bar.update(
                job, completed=done, total=total, description=f"exercise {ex.number}: mutant {done}/{total}")))  # noqa: B023 (called within this iteration)
    low = [r for r in reports if r.problem or r.score is not None and r.score < TARGET]
    rows = [[str(r.exercise), r.slug, str(r.total), str(r.equivalent), str(r.killed), str(len(r.survivors)),
             r.problem or ("-" if r.score is None else f"{r.score:.1%}")] for r in reports]
    output_rows("The grader's mutation score: mutants of each model answer that lose points",
                ["#", "exercise", "mutants", "equivalent", "lose points", "survive", "score"], rows,
                caption=f"score = lose points / (mutants - equivalent); target {TARGET:.0%}. An equivalent "
                        "mutant behaves as the model answer on every case of the exercise's behaviour matrix.",
                as_json=as_json, data=[r.to_dict() for r in reports])
    for r in reports if not as_json else ():
        for m in r.survivors[:10]:
            typer.echo(f"survivor: exercise {r.exercise} {m.mutant.what} (behaves differently at {m.differs})")
    raise typer.Exit(1 if low else 0)


@commands.command("autograder")
def autograder_cmd(
    which: str = typer.Argument(..., help="The exercise: its number or slug."),
    output: Path = typer.Option(..., "-o", "--output", help="The zip to write (a new file, or a previous "
                                                            "protolab autograder zip, replaced)."),
    sandbox: str = typer.Option("bubblewrap", "--sandbox", metavar="bubblewrap|none",
                                help="'none': the autograder grades even where bubblewrap cannot make its sandbox "
                                     "(often so on Gradescope), with a warning in every results.json; without it, it "
                                     "refuses there (E_NO_SANDBOX) and Gradescope shows the fallback result."),
    course: Optional[Path] = COURSE_OPT,
):
    """(Instructors) a Gradescope autograder zip for one exercise: setup.sh, run_autograder and the
    bundled source with this exercise's hidden tests. Gradescope runs it once per submission."""
    from ..course.autograder import build_autograder
    from ..course.kit import project_root

    info = build_autograder(which, output, root=project_root(course), sandbox=sandbox)
    typer.echo(f"wrote {output}: the Gradescope autograder of exercise {info['exercise']} ({info['title']}), "
               f"{info['tests']} public + {info['hidden_tests']} hidden tests, {info['bytes'] // 1024} KB")
    typer.echo("  upload it under Configure Autograder (Ubuntu base image); students submit "
               "their files, loose, in a folder or zipped")
    typer.echo("  try it here: unzip it into ROOT/source, put a submission in ROOT/submission, then "
               "PROTOLAB_AUTOGRADER_ROOT=ROOT PROTOLAB_PYTHON=$(which python) ROOT/source/run_autograder")
    if sandbox == "none":
        typer.echo("  --sandbox none: where bubblewrap cannot run it grades on the fallback, and every results.json "
                   "says so with a warning")
    else:
        typer.echo("  it grades only in bubblewrap: where Gradescope's machine refuses its namespaces it grades nothing "
                   "(E_NO_SANDBOX in its log; students see 'could not run'); rebuild with --sandbox none to grade there "
                   "anyway, knowingly")


def _grid_tables(report, width: int) -> list:
    """The submission's runs (rows, grouped by scenario) by invariant (columns): what held under which
    faults. Each column as wide as its label (the legend's), so no header is cut; when the invariants do
    not fit ``width`` side by side they are split over as many tables as it takes."""
    from rich import box
    from rich.table import Table

    from ..course.grade import SHORT, fault_grid

    names, rows = fault_grid(report)
    if not rows:
        return []
    label = {n: SHORT.get(n, n.lower()[:5]) for n in names}
    cell = {n: max(3, len(label[n])) for n in names}
    faults_w = min(40, max(len("scenario / faults"), *(2 + len(" + ".join(r.get("faults") or ()) or "(no faults)")
                                                       for r in rows), *(len(r.get("scenario") or "") for r in rows)))
    room = max(20, width - faults_w - 1 - 4)  # the faults column, its gap, and 'end' with its gap
    chunks, chunk, used = [], [], 0
    for n in names:
        if chunk and used + cell[n] + 1 > room:
            chunks.append(chunk)
            chunk, used = [], 0
        chunk.append(n)
        used += cell[n] + 1
    chunks.append(chunk)
    tables = []
    for k, part in enumerate(chunks):
        title = "faults by invariant (✓ held, ✗ broke; end: the run ended as the reference's did)"
        if len(chunks) > 1:
            title += f", part {k + 1} of {len(chunks)}"
        t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                  padding=(0, 0))
        t.add_column("scenario / faults", no_wrap=True, overflow="ellipsis", max_width=faults_w)
        for n in part:
            t.add_column(label[n], justify="center", no_wrap=True, min_width=cell[n])
        t.add_column("end", justify="center", no_wrap=True, min_width=3)
        scenario = None
        for r in rows:
            sc = r.get("scenario") or ""
            if sc != scenario:
                scenario = sc
                t.add_row(f"[bold]{sc}[/]" if sc else "", *[""] * (len(part) + 1))
            fl = "  " + (" + ".join(r.get("faults") or ()) or "(no faults)")
            cells = ["[green]✓[/]" if r["invariants"].get(n, True) else "[bold red]✗[/]" if n in r["invariants"]
                     else "·" for n in part]
            held = all(r["invariants"].values())
            end = "[green]✓[/]" if r["ok"] else ("[bold red]✗[/]" if held else "·")
            t.add_row(fl, *cells, end)
        tables.append(t)
    return tables


def _explain(report, con) -> None:
    _render_report(report, con)
    if report.problem:
        return
    grids = _grid_tables(report, con.width)
    if grids:
        for grid in grids:
            con.print()
            con.print(grid)
        from ..course.grade import SHORT, fault_grid

        names, _rows = fault_grid(report)
        con.print("  " + "  ".join(f"{SHORT.get(n, n)}={n}" for n in names), highlight=False, style="dim")


def _similarity_report(ex, csv_out) -> Path:
    """Where copydetect's report goes: beside the gradebook (grades.similarity.html), else in the current
    folder; never in the feedback or results folders, which go to students (it quotes the model answer)."""
    if csv_out is not None:
        return csv_out.with_name(f"{csv_out.stem}.similarity.html")
    return Path(f"similarity-{ex.dirname}.html")


def _grade_exercise(ex, path: Path, *, csv_out, gradescope, explain: bool, as_json: bool, jobs, rubric=None,
                    reads=(), term=None, feedback=None, similarity=None) -> None:
    from ..course.grade import collect, grade_all, keep_beside, workdir, write_gradebook
    from ..files import written_whole

    cases = [t.name for t in ex.tests if t.hidden_cases]
    if (not ex.hidden_tests() and ex.hidden_points()) or (cases and not ex.extensions()):
        what = (f"hidden tests ({ex.hidden_points()} points)" if not ex.hidden_tests() and ex.hidden_points()
                else f"hidden cases (of {', '.join(cases[:3])}{' ...' if len(cases) > 3 else ''})")
        raise InputError(f"exercise {ex.number}'s {what} are not in this install, so a grade would cover the public "
                         "tests only: run from your protolab checkout, name it with --course DIR, or set "
                         "PROTOLAB_SOLUTIONS to its solutions/ folder", code="E_NO_SOLUTIONS")
    con = _console(wide=True)  # off a terminal: lines as long as they are, never wrapped at 80 columns
    with workdir() as tmp:
        subs = collect(ex, path, Path(tmp))
        if explain and len(subs) != 1:
            raise InputError(f"--explain grades one submission; {path} holds {len(subs)} "
                             f"(give one of them, e.g. {subs[0].source})", code="E_USAGE")
        if gradescope is not None and gradescope.exists() and not gradescope.is_dir():
            raise InputError(f"{gradescope} is a file; --gradescope names a folder", code="E_OUTPUT")
        if gradescope is not None:  # before grading: no results.json over a file a submission holds
            for s in subs:
                check_output(gradescope / s.name / "results.json", reads, option="--gradescope")
        if feedback is not None and feedback.exists() and not feedback.is_dir():
            raise InputError(f"{feedback} is a file; --feedback names a folder", code="E_OUTPUT")
        sim_report = _similarity_report(ex, csv_out) if similarity is not None else None
        if sim_report is not None:
            check_output(sim_report, reads, option="--similarity")
        if csv_out is not None:  # a gradebook to merge into: refused now, before grading, if it cannot be
            from ..course.gradebook import check_gradebook, read_gradebook

            check_gradebook(read_gradebook(csv_out), ex.graded_tests(True, rubric), [s.name for s in subs])
        with _progress(not as_json) as bar:
            job = bar.add_task(f"grading exercise {ex.number}", total=len(subs))
            reports = grade_all(ex, subs, jobs=jobs, rubric=rubric,
                                progress=lambda done, total, name: bar.update(job, completed=done,
                                                                              description=f"graded {name}"))
        found = None
        if similarity is not None:  # the files read as text, never run; flags go in each report's note
            from ..course.similarity import check_similarity

            if sim_report.parent != Path("."):
                sim_report.parent.mkdir(parents=True, exist_ok=True)
            found = check_similarity(ex, subs, threshold=similarity, report=sim_report, reads=reads)
            for s, r in zip(subs, reports):
                r.flags = found.notes(s.name)
        # each search's counterexample beside its submission (class/alice.counterexample.toml), where the
        # reproduce line --explain and --json print looks for it
        beside = [w for s, r in zip(subs, reports) for w in keep_beside(s, r)]
        merged = write_gradebook(csv_out, subs, reports, reads=reads) if csv_out is not None else None
        if term is not None:  # the course gradebook: an attempt per submission, one transaction
            from ..course.term import exercise_row

            term_rows = [exercise_row(term.course, term.assignment, s, r, given=term.given)
                         for s, r in zip(subs, reports)]
        if gradescope is not None:
            from ..course.gradescope import results_json

            for s, r in zip(subs, reports):
                d = gradescope / s.name
                d.mkdir(parents=True, exist_ok=True)
                # commands name the student's own folder (as 'exercise start' makes it), not the instructor's copy
                from ..course.autograder import note_sandbox

                d_json = note_sandbox(results_json(r, shown_dir=ex.dirname), r.sandbox)
                with written_whole(d / "results.json", code="E_OUTPUT", reads=reads, option="--gradescope") as fh:
                    fh.write(json.dumps(d_json, indent=2) + "\n")
        if feedback is not None:
            from ..course.feedback import write_feedback

            write_feedback(feedback, [{"student": s.name, **r.to_dict()} for s, r in zip(subs, reports)],
                           assignment=ex, reads=reads)
    _show_grades(ex, subs, reports, con, as_json=as_json, explain=explain,
                 wrote=[x for x in (csv_out, gradescope, feedback) if x])
    if term is not None:
        term.record(term_rows, as_json=as_json)
    if found is not None and as_json:  # stdout is the JSON (each student's flags in it): the report's path on stderr
        typer.echo(f"similarity: the matching lines: {found.report}" if found.report else
                   "similarity: no report (nothing was compared)", err=True)
    if found is not None and not as_json:
        pairs = {tuple(sorted((f.student, f.other))) for f in found.flags if f.kind == "pair"}
        model = [f.student for f in found.flags if f.kind == "model"]
        starter = [f.student for f in found.flags if f.kind == "starter"]
        typer.echo(f"similarity (copydetect, threshold {similarity:.0%}): {found.compared} submissions compared; "
                   f"{len(pairs)} pair(s) flagged, {len(model)} copy(ies) of the model answer, {len(starter)} of the "
                   f"starter; skipped or cut: {len(found.skipped)}")
        for f in found.flags[:20]:
            typer.echo(f"  {f.student}: {f.text}")
        for student, why in found.skipped[:10]:
            typer.echo(f"  {student}: {why}")
        typer.echo(f"  the matching lines: {found.report}" if found.report else "  no report (nothing was compared)")
    if merged and (merged["replaced"] or merged["kept"]) and not as_json:  # a regrade into an existing gradebook
        typer.echo(f"{csv_out}: {len(merged['replaced'])} row(s) replaced (each previous score kept in its history "
                   f"column), {len(merged['added'])} added, {merged['kept']} other row(s) kept as they were")
    if beside and not as_json and not explain:  # --explain names its file; --json has 'written'
        typer.echo(f"wrote {len(beside)} counterexample file(s) beside their submissions: {', '.join(beside[:3])}"
                   + (" ..." if len(beside) > 3 else ""))
    said = _sandbox_line(next((r.sandbox for r in reports if r.sandbox), ""))
    if said and not as_json and not explain:  # --explain's report says it already
        typer.echo(said)
    if said.startswith("sandbox: fallback"):
        from ..course.sandbox import warning

        typer.echo(f"warning: graded on the fallback sandbox, not bubblewrap (see above): "
                   f"{warning(next(r.sandbox for r in reports if r.sandbox))}", err=True)
    errors = [(s.name, x.name, x.grader_error) for s, r in zip(subs, reports) for x in r.grader_errors]
    if errors:  # the kit's fault, never the student's: the instructor must hear of it, and the exit status says so
        typer.echo(f"warning: {len(errors)} test(s) could not be graded because a judge failed (a grader error, not the "
                   "students' fault; those tests are reported as not gradable, 0 points until regraded):", err=True)
        for student, test, what in errors[:10]:
            typer.echo(f"  {student} {test}: {what}", err=True)
        if len(errors) > 10:
            typer.echo(f"  ... and {len(errors) - 10} more (--json lists every one under grader_error)", err=True)
        raise typer.Exit(1)


def _show_grades(ex, subs, reports, con, *, as_json: bool, explain: bool, wrote: list) -> None:
    from ..course.sandbox import warning

    if as_json:
        out = []
        for s, r in zip(subs, reports):
            loud = warning(r.sandbox)  # graded without an OS sandbox: every row says so
            out.append({"student": s.name, **r.to_dict(), **({"warning": loud} if loud else {})})
        _print_json(out)
        return
    if explain:
        _explain(reports[0], con)
        return
    rows = []
    for s, r in zip(subs, reports):
        marks = "".join("[green]✓[/]" if x.passed else ("[yellow]◐[/]" if x.points > 0 else "[red]✗[/]")
                        for x in r.results)
        first = r.problem or next((f"{x.name}: {x.message.splitlines()[0] if x.message else ''}" for x in r.results
                                   if not x.passed), "")
        if r.flags:  # similarity flagged it: said first, the test's problem after
            first = "; ".join([*r.flags, first] if first else r.flags)
        rows.append([s.name, f"{r.score:g}", marks, first])  # names and messages come cleaned (sim.course.safetext)
    unboxed = [bool(warning(r.sandbox)) for r in reports]
    if any(unboxed):  # graded without an OS sandbox: every row says so, first
        rows = [[c0, c1, c2, ("NO OS SANDBOX; " if u else "") + c3] for (c0, c1, c2, c3), u in zip(rows, unboxed)]
    names = " ".join(x.name for x in reports[0].results) if reports else ""
    top = reports[0].max_score if reports else 0
    t = _table(f"Exercise {ex.number}: {ex.title} ({len(subs)} submissions; scores out of {top}, public and hidden tests)",
               ["student", "score", "tests", "first problem"], rows,
               caption=f"tests in order: {names}. ✓ full marks, ◐ part, ✗ none. "
                       "--explain on one submission shows what broke, how to reproduce it and the hint.")
    t.columns[0].overflow, t.columns[0].max_width = "fold", 28
    ntests = len(reports[0].results) if reports else 0
    room = max(20, con.width - (min(28, max((len(s.name) for s in subs), default=7)) + 7 + max(5, ntests) + 12))
    for cell_row in rows:  # one line per student: the first problem, cut to the room left
        if len(cell_row[-1]) > room:
            cell_row[-1] = cell_row[-1][: room - 1] + "…"
    from rich.markup import escape

    rows = [[escape(c) if i in (0, 3) else c for i, c in enumerate(row)] for row in rows]  # text, never markup
    t = _table(t.title, ["student", "score", "tests", "first problem"], rows, caption=t.caption, width=con.width)
    t.columns[0].overflow, t.columns[0].max_width = "fold", 28
    from rich.measure import Measurement

    # as wide as the table is (off a terminal the console is very wide: no line padded out to it)
    con.print(t, width=min(con.width, Measurement.get(con, con.options, t).maximum))
    if wrote:
        typer.echo(f"wrote {', '.join(map(str, wrote))}")


def _grade_labs(which: str, path: Path, *, csv_out, as_json: bool, count_self_reported: bool = False,
                reads=(), course_file=None, submitted_at=None) -> None:
    from ..course.labgrade import collect_labs, grade_labs, write_lab_gradebook
    from ..labs.catalog import get_lab

    lab = get_lab(which)
    from .term import course_grading

    term = course_grading(course_file, "lab", lab.number, submitted_at)  # checked before anything is graded
    if term is not None:  # the CSV never over the course file, its roster or its gradebook
        reads = [*reads, term.course.path, term.course.roster_path, term.course.gradebook_path]
        if csv_out is not None:
            check_output(csv_out, reads, option="--csv")
    subs = collect_labs(path)
    con = _console(wide=True)
    with _progress(not as_json) as bar:
        job = bar.add_task(f"verifying lab {lab.number} submissions", total=len(subs))
        results = grade_labs(lab, subs, progress=lambda done, total, name: bar.update(job, completed=done),
                             count_self_reported=count_self_reported)
    if csv_out is not None:
        write_lab_gradebook(csv_out, results, reads=reads)
    output_rows(f"Lab {lab.number}: {lab.title} ({len(results)} submissions, each re-delivered)",
                ["student", "score", "max", "checkpoints", "answers", "note"],
                [[r["student"], f"{r['score']:g}", str(r["max_score"]), f"{r['done']}/{r['total']}",
                  f"{r['answered']}/{r['questions']}", r["note"]] for r in results],
                caption="score: one point per checkpoint met and per question answered right, "
                        "0 when re-delivering the run does not give the submitted state; "
                        + ("self-reported checkpoints (met only by a screen action the file lists) counted"
                           if count_self_reported else
                           "self-reported checkpoints (met only by a screen action the file lists) left out, of the "
                           "score and the max: --count-self-reported counts them"),
                as_json=as_json, data=results, con=con)
    if csv_out is not None and not as_json:
        typer.echo(f"wrote {csv_out}")
    if term is not None:
        from ..course.term import lab_row

        rows = [lab_row(term.course, term.assignment, student, file, r,
                        folder=path / student if Path(path).is_dir() and (path / student).is_dir() else None,
                        given=term.given) for (student, file, _p), r in zip(subs, results)]
        term.record(rows, as_json=as_json)


@commands.command()
def grade(
    which: str = typer.Argument(..., help="The exercise (number or slug), or 'lab' followed by the lab's number."),
    paths: List[Path] = typer.Argument(..., help="The submissions: a folder of one folder or .zip per student, "
                                                 "or one student's folder or zip. After 'lab': the lab, then the folder."),
    csv_out: Optional[Path] = typer.Option(None, "--csv", help="Write a gradebook (CSV): student, score, max, "
                                                                "one column per rule headed with its points, note, "
                                                                "history. Onto an existing gradebook it replaces the "
                                                                "rows of the students graded and keeps the rest."),
    gradescope: Optional[Path] = typer.Option(None, "--gradescope",
                                              help="Write FOLDER/STUDENT/results.json in Gradescope's format."),
    explain: bool = typer.Option(False, "--explain", help="One submission: per test what broke, the command that "
                                                          "reproduces it and the hint, and the fault-by-invariant grid."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, help="Submissions judged at once (default: every core); each one's tests run in order in one judge process, so -j never changes a score."),
    sandbox: str = SANDBOX_OPT,
    rubric: Optional[Path] = typer.Option(None, "--rubric", help="Weigh the rules by this rubric file (protolab kit "
                                                                 "rubric N -o FILE writes one) instead of the course's."),
    count_self_reported: bool = typer.Option(False, "--count-self-reported",
                                             help="'grade lab': count checkpoints met only by a screen action the "
                                                  "submission lists (a view opened, a visit in time; nothing can "
                                                  "replay them). Default: left out of the score and the max."),
    course_file: Optional[Path] = typer.Option(None, "--course-file", metavar="FILE",
                                               help="Record every submission in the course's gradebook (an attempt "
                                                    "each, late days applied; protolab course init writes the file). "
                                                    "Default: course.toml in the current folder, when there is one."),
    submitted_at: Optional[str] = typer.Option(None, "--submitted-at", metavar="TIME",
                                               help="With a course file: when these were submitted (ISO 8601 with "
                                                    "offset), for those without Gradescope's submission_metadata.json; "
                                                    "default: their files' modification time, said as such."),
    feedback: Optional[Path] = typer.Option(None, "--feedback", metavar="DIR",
                                            help="Write DIR/STUDENT/NN-slug.html, the feedback to hand back to each "
                                                 "student (score, each rule, what broke, the command, the hint; "
                                                 "never the answer). 'protolab feedback export' writes it later."),
    similarity: bool = typer.Option(False, "--similarity", help="Compare the submissions' files with each other "
                                                                "and with the model answer and the starter "
                                                                "(copydetect; the starter's own code is left out); "
                                                                "flags go in the table, the note and --json, with an "
                                                                "HTML report of the matching lines."),
    similarity_threshold: float = typer.Option(0.6, "--similarity-threshold", min=0.01, max=1.0,
                                               help="With --similarity: the share of a file's own code that must "
                                                    "match to flag it (0.01 to 1)."),
    as_json: bool = JSON_OPT,
    course: Optional[Path] = COURSE_OPT,
):
    """(Instructors) grade a class: public and hidden tests, the students' code in the sandboxed host
    processes (bubblewrap; without it grade refuses, E_NO_SANDBOX, unless --sandbox none, and then
    warns on every row), a table of scores; --csv, --gradescope and --explain for the rest. 'grade
    lab 3 FOLDER' grades lab submissions (protolab lab submit), each verified by re-delivering its run.
    Exit 0 when every test was graded, 1 when a judge failed (a grader error, the kit's fault)."""
    from ..files import files_under

    reads = files_under(paths)  # every submission's file: a gradebook or a results.json never over one of them
    if csv_out is not None:
        check_output(csv_out, reads, option="--csv")
    _course(course)
    if which == "lab":
        if len(paths) != 2:
            raise InputError("grade lab takes the lab and a folder: protolab grade lab 3 submissions/", code="E_USAGE")
        if explain or gradescope is not None or rubric is not None or feedback is not None or similarity:
            raise InputError("--explain, --gradescope, --rubric, --feedback and --similarity are for exercises; lab "
                             "grading writes a table, --csv or --json", code="E_USAGE")
        _grade_labs(str(paths[0]), paths[1], csv_out=csv_out, as_json=as_json, count_self_reported=count_self_reported,
                    reads=reads, course_file=course_file, submitted_at=submitted_at)
        return
    if count_self_reported:
        raise InputError("--count-self-reported is for 'grade lab'; an exercise has no self-reported checkpoints",
                         code="E_USAGE")
    from ..course.catalog import get_exercise

    ex = get_exercise(which)
    if len(paths) != 1:
        raise InputError(f"grade {which} takes one folder of submissions (or one submission), not {len(paths)}",
                         code="E_USAGE")
    from ..course.rubric import load_rubric
    from ..course.sandbox import require

    from .term import course_grading

    if explain and course_file is not None:
        raise InputError("--explain shows one submission and records nothing; grade without --explain to record it in "
                         "the course's gradebook", code="E_USAGE")
    term = None if explain else course_grading(course_file, "exercise", ex.number, submitted_at)
    if term is not None and rubric is None and term.rubric is not None:
        rubric = term.rubric  # the course file's rubric override for this exercise
    if similarity:
        from ..course.similarity import _require

        _require()  # no copydetect: E_NO_SIMILARITY before anything is graded
    weights = load_rubric(ex, rubric) if rubric is not None else None  # a bad rubric: E_RUBRIC before anything is graded
    require(sandbox)  # fail closed: no OS sandbox, no student code run (unless --sandbox none), never as root
    if term is not None:
        reads = [*reads, term.course.path, term.course.roster_path, term.course.gradebook_path]
        for r in (csv_out, gradescope):
            if r is not None:
                check_output(r, reads, option="--csv" if r is csv_out else "--gradescope")
    _grade_exercise(ex, paths[0], csv_out=csv_out, gradescope=gradescope, explain=explain, as_json=as_json, jobs=jobs,
                    rubric=weights, reads=reads, term=term, feedback=feedback,
                    similarity=similarity_threshold if similarity else None)



feedback_app = typer.Typer(help="(Instructors) feedback to hand back: one self-contained file per student and "
                                "assignment, made from the course gradebook or from a grading run's results.",
                           no_args_is_help=True)


@feedback_app.command("export")
def feedback_export(
    results: Optional[Path] = typer.Option(None, "--results", help="What 'protolab grade N DIR --json' printed (saved "
                                                                  "to a file: protolab grade 1 class1 --json > "
                                                                  "results.json)."),
    gradebook: Optional[Path] = typer.Option(None, "--gradebook", metavar="FILE",
                                             help="The course gradebook (term/gradebook.db): a page per student and "
                                                  "assignment, from the latest attempt, or the override (said so)."),
    only: Optional[str] = typer.Option(None, "--assignment", metavar="ID",
                                       help="With --gradebook: this assignment only (its id in the course file: ex1)."),
    out: Path = typer.Option(..., "--out", "-o", help="The folder to write the pages in: OUT/STUDENT/NN-slug.html "
                                                      "from --results, OUT/STUDENT/ASSIGNMENT.html from --gradebook "
                                                      "(or .md)."),
    fmt: str = typer.Option("html", "--format", metavar="html|md", help="html: one self-contained page (no script, "
                                                                        "no link out); md: Markdown."),
    course: Optional[Path] = COURSE_OPT,
):
    """(Instructors) write each student's feedback file: the score, every rule's result and points, and
    for each broken rule what broke, the command that shows it and the hint, the text the student sees
    in results.json; never the model answer. Student text is cleaned, capped and escaped. From
    --gradebook (the course's grades), the latest attempt of each student and assignment, or the newest
    override, which the page names as the grade, with why; from --results, one grading run."""
    from ..course.feedback import FORMATS, file_name, from_gradebook, read_results, write_feedback, write_pages

    if fmt not in FORMATS:
        raise InputError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}", code="E_USAGE")
    if (results is None) == (gradebook is None):
        raise InputError("give --gradebook FILE (the course gradebook) or --results FILE (grade --json's output), "
                         "one of them", code="E_USAGE")
    if only is not None and gradebook is None:
        raise InputError("--assignment picks an assignment of --gradebook; a results file is one exercise already",
                         code="E_USAGE")
    if gradebook is not None:
        from ..store.gradebook import open_gradebook

        check_output(out, [gradebook], option="--out")
        book = open_gradebook(gradebook, readonly=True)
        try:
            pages = from_gradebook(book, fmt=fmt, assignment=only)
        finally:
            book.close()
        if not pages:
            raise InputError(f"{gradebook} holds no graded attempt{' of ' + only if only else ''}; nothing was written",
                             code="E_EMPTY")
        taken: set[str] = set()
        folders: dict[str, str] = {}
        for key, _, _, facts in pages:
            if key not in folders:
                folders[key] = file_name(facts["student"], taken)
        written = write_pages(out, [(folders[key], name, text) for key, name, text, _ in pages], reads=[gradebook])
        overridden = sum(1 for *_, f in pages if f["override"])
        unmatched = sorted({f["student"] for *_, f in pages if not f["on_roster"]})
        typer.echo(f"wrote {len(written)} feedback file(s) in {out}/ ({written[0]}{' ...' if len(written) > 1 else ''}), "
                   f"{len(folders)} student(s); from the latest attempts" + (f", {overridden} from an override (the "
                                                                            "page says so)" if overridden else ""))
        if unmatched:
            typer.echo(f"unmatched: {len(unmatched)} submission(s) not on the roster, each in a folder of the name it "
                       f"was recorded under: {', '.join(unmatched)}")
        return
    check_output(out, [results], option="--out")
    reports = read_results(results)
    assignment = None
    try:  # the exercise's title from the course, when it is at hand (else what the results name)
        from ..course.catalog import get_exercise

        _course(course)
        assignment = get_exercise(str(reports[0]["exercise"]))
    except InputError:
        assignment = None
    if len({r.get("exercise") for r in reports}) > 1:
        assignment = None
    written = write_feedback(out, reports, fmt=fmt, assignment=assignment, reads=[results])
    typer.echo(f"wrote {len(written)} feedback file(s) in {out}/ ({written[0]}{' ...' if len(written) > 1 else ''})")
