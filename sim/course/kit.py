"""The student kit, and the instructor's check that every exercise's answers are judged right.

:func:`build_student_kit` writes the folder an instructor hands to students: the ``sim`` package,
``data/``, ``labs/``, ``exercises/`` (starters, public tests, READMEs), ``pyproject.toml``,
``README.md`` and a licence file, and never ``solutions/`` (the wheel leaves it out the same way:
pyproject's force-include names only data, labs and exercises). The kit is then checked twice
before it replaces ``dest``:

* by content (:func:`check_kit_content`), not by folder name: no file of the kit holds a
  distinctive line of any file under ``solutions/`` (model answers, planted wrong answers,
  ``hidden.toml``; a line of more than 30 characters that the exercise's starter folder and the
  engine, which the kit ships anyway, do not hold), nor a hidden test's title, nor its name as a
  quoted string (a test list, a hint table keyed by test);
* by running it (:func:`smoke_check`): a child process with only the kit on its path finds no
  hidden tests and no solutions, and every exercise's public tests run on its starter, in the
  sandbox, and give a report.

:func:`verify_kit` judges every exercise's model answer (full marks, hidden tests included), its
starter and every planted wrong answer (less than full marks; each failing the tests its
``expect.toml`` names), each isolated as real grading is.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

from .. import __version__
from ..errors import InputError, ProtolabError
from .catalog import Exercise
from .hints import KEYS as HINT_KEYS

__all__ = ["KIT_MARKER", "project_root", "exercises_at", "build_student_kit", "check_kit_content", "smoke_check",
           "verify_kit", "KitResult", "VerifyRow", "copy_project"]

#: The file that marks a folder as a student kit (so a later build may replace it).
KIT_MARKER = ".protolab-kit.json"
#: What a kit (and the autograder's bundled source) holds: folders, then files when present.
KIT_FOLDERS = ("sim", "data", "labs", "exercises")
KIT_FILES = ("pyproject.toml", "README.md", "LICENSE", "LICENSE.txt", "LICENSE.md", "COPYING", "NOTICE")
#: Lines shorter than this are too common to count as a solution's.
MIN_LINE = 31

_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".*", "_data", "*.db", "*.db-wal", "*.db-shm")


class KitError(ProtolabError):
    """A kit that must not be handed out (a leak) or does not work (its smoke check failed)."""

    code = "E_KIT"


def project_root(course: Path | str | None = None) -> Path:
    """The course (an instructor's protolab checkout: ``pyproject.toml``, ``exercises/`` and
    ``solutions/``) that the student kit, kit verify, a classroom and the autograder are built
    from: ``course`` (``--course DIR``), else the one named with ``--course`` in this process, else
    the current folder or its parents, else the checkout this ``sim`` package runs from. Refuses,
    naming ``--course``, when there is none (an install by ``pip install .``, run elsewhere)."""
    from .catalog import _COURSE, course_here, is_course, use_course

    if course is not None:
        return use_course(Path(course))
    if _COURSE:
        return _COURSE[0]
    here = course_here()
    if here is not None:
        return here
    pkg = Path(__file__).resolve().parents[2]
    if is_course(pkg):
        return pkg
    raise InputError(f"no protolab course in {Path.cwd()} or its parents, and this protolab (installed in {pkg}) is "
                     "not a checkout: run from your protolab checkout (the folder holding pyproject.toml, exercises/ "
                     "and solutions/), or name it with --course DIR", code="E_NOT_A_CHECKOUT")


class _RootedExercise(Exercise):
    """An exercise whose hidden tests and hidden cases are read from ``ROOT/solutions/NN-slug``
    beside its folder (``ROOT/exercises/NN-slug``), not from the installed package's."""

    def solutions(self) -> Path:
        return self.folder.parent.parent / "solutions" / self.dirname


def exercises_at(root: Path) -> list[Exercise]:
    """The exercises of the project at ``root`` (its ``exercises/`` and ``solutions/``), in number order."""
    from .catalog import _load

    out = []
    base = Path(root) / "exercises"
    for p in sorted(base.iterdir()) if base.is_dir() else ():
        if p.is_dir() and (p / "exercise.toml").is_file():
            ex = _load(p)
            out.append(_RootedExercise(**{f.name: getattr(ex, f.name) for f in fields(ex)}))
    return sorted(out, key=lambda e: e.number)


def _pick(all_: list[Exercise], only) -> list[Exercise]:
    if not only:
        return all_
    chosen = []
    for w in only:
        text = str(w).strip()
        hit = [e for e in all_ if (text.isdigit() and int(text) == e.number) or text in (e.slug, e.dirname)]
        if not hit:
            raise InputError(f"no exercise {text!r}; expected one of: {', '.join(str(e.number) for e in all_)}",
                             code="E_UNKNOWN_EXERCISE")
        chosen += [e for e in hit if e not in chosen]
    return sorted(chosen, key=lambda e: e.number)


# ---------------------------------------------------------------------------------- copying


def copy_project(root: Path, dest: Path, *, solutions: list[str] = ()) -> int:
    """Copy the installable project (``KIT_FOLDERS`` and ``KIT_FILES``) from ``root`` to ``dest``,
    plus ``solutions/NAME`` for each name in ``solutions``; the number of files copied."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in KIT_FOLDERS:
        if (root / name).is_dir():
            shutil.copytree(root / name, dest / name, ignore=_IGNORE, symlinks=False)
    for name in KIT_FILES:
        if (root / name).is_file():
            shutil.copyfile(root / name, dest / name)
    for name in solutions:
        shutil.copytree(root / "solutions" / name, dest / "solutions" / name, ignore=_IGNORE, symlinks=False)
    return sum(1 for p in dest.rglob("*") if p.is_file())


def _is_kit(d: Path) -> bool:
    try:
        return json.loads((d / KIT_MARKER).read_text(encoding="utf-8")).get("kind") == "protolab-student-kit"
    except (OSError, ValueError, AttributeError):
        return False


# ---------------------------------------------------------------------------------- content check


def _text(p: Path) -> str | None:
    try:
        data = p.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:4096]:
        return None  # binary
    return data.decode("utf-8", "replace")


def _long_lines(text: str) -> set[str]:
    return {s for s in (line.strip() for line in text.splitlines()) if len(s) >= MIN_LINE}


def _files(folder: Path):
    for p in sorted(folder.rglob("*")):
        if p.is_file() and not p.is_symlink() and "__pycache__" not in p.parts:
            yield p


def _norm(s: str) -> str:
    return " ".join(s.split()).casefold()


@dataclass
class _Secrets:
    lines: dict[str, str] = field(default_factory=dict)  # distinctive line -> the solution file holding it
    titles: dict[str, str] = field(default_factory=dict)  # normalised hidden title -> "exercise N test NAME"
    names: dict[str, str] = field(default_factory=dict)  # hidden test name -> "exercise N"
    empty: list[str] = field(default_factory=list)  # solution files with no distinctive line (not checkable)


_CONDITION = re.compile(r"^(%s)\s*=" % "|".join(HINT_KEYS))


def _starter_lines(ex_dir: Path) -> tuple[list[str], set[str]]:
    """The files a student starts from (``files`` in exercise.toml, not the whole folder) and their lines."""
    try:
        names = tomllib.loads((ex_dir / "exercise.toml").read_text(encoding="utf-8")).get("files", [])
    except (OSError, tomllib.TOMLDecodeError):
        names = []
    lines: set[str] = set()
    for name in names:
        lines |= _long_lines(_text(ex_dir / name) or "")
    return names, lines


def _secrets(root: Path) -> _Secrets:
    """What must never reach a student, read from ``root/solutions``."""
    sec = _Secrets()
    sols = sorted(p for p in (root / "solutions").iterdir() if p.is_dir()) if (root / "solutions").is_dir() else []
    starters = {sol.name: _starter_lines(root / "exercises" / sol.name) for sol in sols}
    # The engine and its data ship in the kit anyway, and some answers share its lines (exercise 3's is
    # derived from sim/intake.py): those lines are not the answer's own. A file that holds nearly all of
    # a model answer's own lines is a copy of it, though, and whitelists nothing.
    engine = {p: _long_lines(_text(p) or "") for name in ("sim", "data", "labs") for p in _files(root / name)
              if not (name == "sim" and p.relative_to(root / "sim").parts[0] == "course")}
    for sol in sols:
        names, starter = starters[sol.name]
        for name in names:
            own = _long_lines(_text(sol / name) or "") - starter
            if len(own) >= 3:
                for p in [p for p, lines in engine.items() if len(own & lines) >= 0.9 * len(own)]:
                    del engine[p]
    public = set().union(*engine.values()) if engine else set()
    public_tests = set()
    for ex_dir in sorted((root / "exercises").iterdir()):
        if (ex_dir / "exercise.toml").is_file():
            for t in tomllib.loads((ex_dir / "exercise.toml").read_text(encoding="utf-8")).get("test", []):
                public_tests |= {str(t.get("name", "")), _norm(str(t.get("title", "")))}
    for sol in sols:
        starter = starters[sol.name][1]
        for p in _files(sol):
            text = _text(p)
            if text is None:
                continue
            mine = _long_lines(text) - starter - public
            if p.name == "hints.toml":  # a hint rule's conditions are public vocabulary; its text is not
                mine = {line for line in mine if not _CONDITION.match(line)}
            if not mine and p.name != "expect.toml":
                sec.empty.append(str(p.relative_to(root)))
            for line in mine:
                sec.lines.setdefault(line, str(p.relative_to(root)))
        hidden = sol / "hidden.toml"
        if hidden.is_file():
            for t in tomllib.loads(hidden.read_text(encoding="utf-8")).get("test", []):
                name, title = str(t.get("name", "")), str(t.get("title", ""))
                if name and name not in public_tests:
                    sec.names[name] = f"{sol.name} hidden test {name}"
                if title and _norm(title) not in public_tests and len(title) > 12:
                    sec.titles[_norm(title)] = f"{sol.name} hidden test {name}"
    return sec


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                ids.add(id(first.value))
    return ids


def _quoted(name: str, text: str) -> bool:
    return any(f"{q}{name}{q}" in text for q in ('"', "'", "`"))


def _hidden_hits(p: Path, text: str, sec: _Secrets) -> list[str]:
    """Hidden tests named in ``text``: titles anywhere (in Python, in string literals other than
    docstrings: a judge's docstring may say what it checks, the judges ship with the kit); names
    as quoted strings."""
    hits = []
    chunks: list[str] | None = None
    if p.suffix == ".py":
        try:
            tree = ast.parse(text)
            skip = _docstrings(tree)
            chunks = [n.value for n in ast.walk(tree)
                      if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip]
        except (SyntaxError, ValueError):
            chunks = None
    if chunks is None:
        chunks = [text]
    for chunk in chunks:
        flat = _norm(chunk)
        for title, who in sec.titles.items():
            if title in flat:
                hits.append(f"the title of {who}")
        for name, who in sec.names.items():
            if chunk == name or _quoted(name, chunk):
                hits.append(f"the name of {who} ({name!r})")
    return sorted(set(hits))


def check_kit_content(kit: Path, *, root: Path | None = None) -> list[str]:
    """Leaks in ``kit``, one line each (none: it can be handed out). See the module's docstring."""
    root = Path(root) if root is not None else project_root()
    kit = Path(kit)
    sec = _secrets(root)
    found = []
    for p in _files(kit):
        text = _text(p)
        if text is None:
            continue
        rel = p.relative_to(kit)
        leaked = {}
        for n, line in enumerate(text.splitlines(), 1):
            s = line.strip()
            if len(s) >= MIN_LINE and s in sec.lines:
                leaked.setdefault(sec.lines[s], (n, s))
        for src, (n, s) in sorted(leaked.items()):
            found.append(f"{rel} line {n} holds a line of {src}: {s[:60]!r}")
        for hit in _hidden_hits(p, text, sec):
            found.append(f"{rel} holds {hit}")
    return found


# ---------------------------------------------------------------------------------- smoke check

_SMOKE = r'''
import json, os, shutil, sys, tempfile
kit, checkout, out = os.path.realpath(sys.argv[1]), os.path.realpath(sys.argv[2]), sys.argv[3]
sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != checkout]
import sim
where = os.path.dirname(os.path.dirname(os.path.realpath(sim.__file__)))
from sim.course.catalog import exercises, solutions_dir
from sim.course.evaluate import evaluate
result = {"sim": where, "exercises": []}
todo = exercises()
with tempfile.TemporaryDirectory(prefix="protolab-kit-smoke-") as tmp:
    for i, ex in enumerate(todo, 1):
        row = {"number": ex.number, "dirname": ex.dirname, "public": [t.name for t in ex.tests],
               "hidden": [t.name for t in ex.hidden_tests()], "solutions": str(solutions_dir(ex) or "")}
        d = os.path.join(tmp, ex.dirname)
        shutil.copytree(ex.folder, d)
        try:
            rep = evaluate(ex, d, hidden=True, isolate=True)
            row.update(score=rep.score, max_score=rep.max_score, hidden_ran=rep.hidden_ran,
                       tests=[{"name": r.name, "hidden": r.hidden, "message": r.message} for r in rep.results])
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {e}"
        result["exercises"].append(row)
        print(f"smoke {i}/{len(todo)} {ex.dirname}", file=sys.stderr, flush=True)
with open(out, "w") as f:
    json.dump(result, f)
'''

_BROKEN = ("internal:", "E_EXERCISE_FILE", "the judged process", "the judge stopped", "no judge")


def smoke_check(kit: Path, *, checkout: Path | None = None, progress=None, timeout: float = 900) -> tuple[list[str], list[dict]]:
    """Run the kit in a child process with only the kit on its path: (problems, one row per exercise).
    ``progress(done, total, name)`` is called as each exercise's public tests finish."""
    kit = Path(kit).resolve()
    checkout = Path(checkout).resolve() if checkout is not None else project_root()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PROTOLAB_SOLUTIONS"))}
    env.update(PYTHONPATH=str(kit), PYTHONDONTWRITEBYTECODE="1", PYTHONHASHSEED="0")
    total = sum(1 for p in (kit / "exercises").iterdir() if (p / "exercise.toml").is_file())
    with tempfile.TemporaryDirectory(prefix="protolab-kit-") as tmp:
        out = Path(tmp) / "smoke.json"
        # run from a folder of its own: neither the kit's nor any course around it (no solutions to find)
        proc = subprocess.Popen([sys.executable, "-c", _SMOKE, str(kit), str(checkout), str(out)], cwd=tmp, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        tail: list[str] = []
        fired = threading.Event()

        def kill() -> None:  # a child that hangs is killed, and said so
            fired.set()
            proc.kill()

        watchdog = threading.Timer(timeout, kill)
        watchdog.start()
        try:
            for line in proc.stderr:
                if line.startswith("smoke "):
                    if progress is not None:
                        progress(int(line.split()[1].split("/")[0]), total, line.split()[2])
                else:
                    tail = (tail + [line.rstrip()])[-5:]
            proc.wait()
        finally:
            watchdog.cancel()
        if fired.is_set():
            return [f"the kit's smoke check did not finish within {timeout:g} s"], []
        if proc.returncode != 0 or not out.is_file():
            last = next((t for t in reversed(tail) if t.strip()), "")
            return [f"the kit's smoke check failed (exit status {proc.returncode}): {last}"], []
        result = json.loads(out.read_text())
    problems = []
    if Path(result["sim"]).resolve() != kit:
        problems.append(f"the smoke check imported sim from {result['sim']}, not from the kit")
    if len(result["exercises"]) != total:
        problems.append(f"the kit lists {len(result['exercises'])} exercises; its exercises/ holds {total}")
    for row in result["exercises"]:
        name = f"exercise {row['number']}"
        if row["hidden"]:
            problems.append(f"{name}: the kit knows of hidden tests ({', '.join(row['hidden'])})")
        if row["solutions"]:
            problems.append(f"{name}: the kit finds solutions at {row['solutions']}")
        if "error" in row:
            problems.append(f"{name}: its public tests did not run on the starter: {row['error']}")
            continue
        ran = [t["name"] for t in row["tests"]]
        if ran != row["public"] or any(t["hidden"] for t in row["tests"]):
            problems.append(f"{name}: ran {ran}, expected the public tests {row['public']}")
        for t in row["tests"]:
            if not t["message"] or t["message"].startswith(_BROKEN) or any(b in t["message"] for b in _BROKEN[:2]):
                problems.append(f"{name}: test {t['name']} did not judge the starter: {t['message'] or '(no message)'}")
    return problems, result["exercises"]


# ---------------------------------------------------------------------------------- the kit


@dataclass
class KitResult:
    dest: Path
    files: int
    exercises: list[dict]  # the smoke check's rows
    replaced: bool  # a previous kit was replaced


def build_student_kit(dest: Path, *, root: Path | None = None, progress=None, smoke: bool = True) -> KitResult:
    """Write the student kit to ``dest`` (new, empty, or a previous kit, which is replaced), checked
    by content and by a smoke run before it lands; raises :class:`KitError` naming any problem."""
    root = Path(root).resolve() if root is not None else project_root()
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise InputError(f"{dest} exists and is a file; nothing was written (name a new folder)", code="E_OUTPUT_EXISTS")
    replaced = False
    if dest.is_dir() and any(dest.iterdir()):
        if not _is_kit(dest):
            raise InputError(f"{dest} exists, is not empty and is not a protolab student kit (no {KIT_MARKER}); "
                             "nothing was written (name a new or empty folder)", code="E_OUTPUT_EXISTS")
        replaced = True
    if not dest.parent.resolve().is_dir():
        raise InputError(f"folder {dest.parent} does not exist", code="E_DIR_MISSING")
    full = dest.resolve()
    for part in (*KIT_FOLDERS, "solutions"):
        if full == root / part or (root / part) in full.parents:
            raise InputError(f"{dest} is inside the project's {part}/; put the kit somewhere else", code="E_OUTPUT_INSIDE")
    if full == root or full in root.parents:
        raise InputError(f"{dest} holds the project itself; put the kit somewhere else", code="E_OUTPUT_INSIDE")
    tmp = dest.parent / f".{dest.name}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        files = copy_project(root, tmp)
        # the course's rubric, public part, into the kit's exercise.toml and README: a student's check
        # weighs each rule as the grader will (solutions/, which holds the rubric, never ships)
        from .rubric import course_rubric, write_student_copies

        for ex in exercises_at(root):
            rubric = course_rubric(ex)
            if rubric is not None and (tmp / "exercises" / ex.dirname).is_dir():
                write_student_copies(ex, tmp / "exercises" / ex.dirname, rubric)
        marker = {"kind": "protolab-student-kit", "version": __version__,
                  "exercises": [e.dirname for e in exercises_at(tmp)],
                  "note": "Built by 'protolab kit student': no solutions, no hidden tests. Install with "
                          "'pip install .' here, then 'protolab exercise list'."}
        (tmp / KIT_MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        leaks = check_kit_content(tmp, root=root)
        if leaks:
            more = f" (and {len(leaks) - 3} more)" if len(leaks) > 3 else ""
            raise KitError("the kit would leak: " + "; ".join(leaks[:3]) + more + "; nothing was written",
                           code="E_KIT_LEAK", leaks=leaks)
        rows: list[dict] = []
        if smoke:
            problems, rows = smoke_check(tmp, checkout=root, progress=progress)
            if problems:
                more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
                raise KitError("the kit's smoke check failed: " + "; ".join(problems[:3]) + more + "; nothing was written",
                               code="E_KIT_SMOKE", problems=problems)
        if replaced:
            shutil.rmtree(dest)
        elif dest.is_dir():
            dest.rmdir()
        os.replace(tmp, dest)
        return KitResult(dest=dest, files=files + 1, exercises=rows, replaced=replaced)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------------------- verify


@dataclass
class VerifyRow:
    exercise: int
    title: str
    submission: str  # "solution", "starter" or "wrong/NAME"
    want: str  # "full marks" or "less"
    score: float | None
    max_score: int | None
    ok: bool
    problem: str = ""

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _stage(ex: Exercise, src: Path, dest: Path) -> Path:
    """The exercise's folder with ``src``'s copies of the files a student edits."""
    shutil.copytree(ex.folder, dest, ignore=_IGNORE)
    for name in ex.files:
        if (src / name).is_file():
            shutil.copyfile(src / name, dest / name)
    return dest


def _plan(ex: Exercise) -> list[tuple[str, Path | None]]:
    sol = ex.solutions() if isinstance(ex, _RootedExercise) else None
    subs: list[tuple[str, Path | None]] = [("solution", sol if sol is not None and sol.is_dir() else None),
                                           ("starter", ex.folder)]
    if sol is not None and (sol / "wrong").is_dir():
        subs += [(f"wrong/{w.name}", w) for w in sorted(p for p in (sol / "wrong").iterdir() if p.is_dir())]
    return subs


def verify_kit(*, root: Path | None = None, only=None, progress=None, jobs: int = 2) -> list[VerifyRow]:
    """Judge every exercise's solution, starter and planted wrong answers with hidden tests, each in
    the sandbox, as real grading judges a submission (:func:`sim.course.evaluate.evaluate`: its tests
    in order in one judge process); ``jobs`` submissions at once. One :class:`VerifyRow` per
    submission (``ok``: as it should be). ``progress(done, total, label)`` is called after each
    submission."""
    from concurrent.futures import ThreadPoolExecutor

    from .evaluate import evaluate
    from .pool import JudgePool

    root = Path(root).resolve() if root is not None else project_root()
    chosen = _pick(exercises_at(root), only)
    if not chosen:
        raise InputError(f"{root}/exercises holds no exercises", code="E_NO_EXERCISES")
    plans = [(ex, _plan(ex)) for ex in chosen]
    total = sum(len(p) for _, p in plans)
    rows: list[VerifyRow] = []
    staged: list[tuple[Exercise, VerifyRow, Path | None, Path | None]] = []
    lock = threading.Lock()
    done = [0]
    with tempfile.TemporaryDirectory(prefix="protolab-verify-") as tmp:
        for ex, plan in plans:
            hidden = ex.hidden_tests()
            for label, src in plan:
                want = "full marks" if label == "solution" else "less"
                row = VerifyRow(ex.number, ex.title, label, want, None, None, False)
                missing = [f for f in ex.files if src is None or not (src / f).is_file()]
                d = None
                if src is None:
                    row.problem = f"no solutions/{ex.dirname} folder"
                elif label == "solution" and not (hidden or ex.extensions()):
                    row.problem = f"solutions/{ex.dirname} has neither hidden tests nor hidden cases (hidden.toml)"
                elif missing:
                    row.problem = f"{label} has no {missing[0]}"
                else:
                    d = _stage(ex, src, Path(tmp) / f"{ex.dirname}-{len(staged)}")
                rows.append(row)
                staged.append((ex, row, src, d))

        def judge(item) -> None:
            ex, row, src, d = item
            if d is not None:
                rep = evaluate(ex, d, hidden=True, isolate=True, pool=judges, shown=ex.dirname)
                _verdict(ex, row, src, rep)
            with lock:
                done[0] += 1
                if progress is not None:
                    progress(done[0], total, f"{ex.dirname} {row.submission}")

        with JudgePool(max(1, jobs)) as judges, ThreadPoolExecutor(max_workers=max(1, jobs)) as threads:
            list(threads.map(judge, staged))
    return rows


def _verdict(ex: Exercise, row: VerifyRow, src: Path, rep) -> None:
    """Fill ``row`` from ``rep``, the report of the submission at ``src``: as it should be or not."""
    row.score, row.max_score = rep.score, rep.max_score
    failing = [r for r in rep.results if not r.passed]
    if rep.grader_errors:
        row.problem = "grader error: " + "; ".join(f"{r.name}: {r.grader_error}" for r in rep.grader_errors[:2])
    elif row.submission == "solution":
        row.ok = not failing and rep.score == rep.max_score and rep.hidden_ran
        if failing:
            row.problem = "fails " + "; ".join(f"{r.name}: {r.message}" for r in failing[:2])
        elif row.ok:  # the hint tables: a condition the course cannot produce never matches
            from .hints import check_symptoms

            bad = check_symptoms(ex)
            if bad:
                row.ok, row.problem = False, "hint table: " + bad[0]
    else:
        share = min((r.max_points for r in rep.results), default=0)
        row.ok = rep.score <= rep.max_score - share
        if not row.ok:
            row.problem = (f"gets full marks ({rep.score:g}/{rep.max_score})" if rep.score >= rep.max_score
                           else f"loses less than one rule's share ({rep.score:g}/{rep.max_score})")
        expect = src / "expect.toml"
        if row.ok and expect.is_file():
            names = {r.name: r for r in rep.results}
            try:
                data = tomllib.loads(expect.read_text(encoding="utf-8"))
            except (OSError, tomllib.TOMLDecodeError) as e:
                data, row.ok, row.problem = {}, False, f"{expect.name} cannot be read: {e}"
            fails = data.get("fails", [])
            unknown = [n for n in fails if n not in names]
            passing = [n for n in fails if n in names and names[n].passed]
            feedback = " ".join(f"{r.message} {r.hint}" for r in failing).casefold()
            unnamed = [w for w in data.get("names", []) if w.casefold() not in feedback]
            if unknown:
                row.ok, row.problem = False, f"expect.toml names unknown test {unknown[0]}"
            elif passing:
                row.ok, row.problem = False, f"passes {', '.join(passing)}, which expect.toml says it fails"
            elif unnamed:
                row.ok, row.problem = False, f"its feedback never names its mistake ({unnamed[0]!r})"
