"""Grading a class: every submission in a folder, public and hidden tests, judged in warm judge
processes whose student code runs in the sandbox (:mod:`sim.course.sandbox`), many at once.

A submissions folder holds one folder or ``.zip`` per student (``alice/design.py``,
``bob.zip``); the student's name is the folder's name or the zip's stem. Files nested in an
extra folder (a zip of ``lab1/design.py``, a macOS ``__MACOSX`` beside it) are found by name. A
submission that cannot be graded at all (no such file, a file under another name, a corrupt zip,
a zip whose paths leave its folder or hold a symlink) still gets a report: every test 0 with the
reason, so the batch goes on and the gradebook has a row for everyone.

Nothing here runs a student's code: host processes in the sandbox do. Every report says which
sandbox judged it (``Report.sandbox``: ``"bubblewrap"`` or ``"fallback: <why>"``).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import zipfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..invariants import REGISTRY as _INVARIANTS
from .catalog import Exercise
from .evaluate import Report, TestResult, judge_tests, sandbox_of
from .pool import JudgePool, private_copy
from .safetext import clean_name, clean_text

__all__ = ["Submission", "collect", "grade_all", "write_gradebook", "fault_grid", "keep_beside", "ZIP_LIMITS"]

#: What a submitted zip may hold before it is refused (a zip bomb is not a submission).
ZIP_LIMITS = {"files": 500, "bytes": 8 * 1024 * 1024}

_SKIP = {"__MACOSX", "__pycache__"}


@dataclass
class Submission:
    name: str  # the student
    source: Path  # the folder or zip as the instructor gave it
    folder: Path | None = None  # where the exercise's files are (an extracted copy for a zip)
    problem: str | None = None  # why it cannot be graded
    shown: str = "."  # how feedback names the student's folder in commands ({dir})


def _visible(p: Path) -> bool:
    return not p.name.startswith(".") and p.name not in _SKIP


def _find_files(ex: Exercise, root: Path) -> tuple[Path | None, str | None]:
    """The folder under ``root`` holding all of ``ex.files`` (the shallowest), or a reason."""
    want = list(ex.files)
    candidates = []
    for dirpath, dirnames, filenames in os.walk(root):
        d = Path(dirpath)
        dirnames[:] = sorted(n for n in dirnames if _visible(Path(n)))
        depth = len(d.relative_to(root).parts)
        if depth > 4:
            dirnames[:] = []
            continue
        if all(f in filenames for f in want):
            candidates.append((depth, str(d), d))
    if candidates:
        folder = min(candidates)[2]
        for f in want:
            if (folder / f).is_symlink():
                return None, f"{f} is a symbolic link; submit the file itself"
            if not (folder / f).is_file():
                return None, f"{f} is not a regular file"
        return folder, None
    found = sorted(str(p.relative_to(root)) for p in root.rglob("*")
                   if p.is_file() and all(_visible(Path(part)) for part in p.relative_to(root).parts))
    near = [f for f in found if Path(f).name.lower() in {w.lower() for w in want} or Path(f).suffix in
            {Path(w).suffix for w in want}]
    what = (f"; it holds {', '.join(found[:6])}" + (" …" if len(found) > 6 else "")) if found else "; it is empty"
    also = f" (is {near[0]} meant to be {want[0]}? the name must be exact)" if near else ""
    return None, f"no {' and '.join(want)} in the submission{what}{also}; exercise {ex.number} is judged on {', '.join(want)}"


def _unzip(path: Path, dest: Path) -> str | None:
    """Extract ``path`` into ``dest`` safely; a reason when it cannot be."""
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
            if len(infos) > ZIP_LIMITS["files"]:
                return f"the zip holds {len(infos)} entries (the limit is {ZIP_LIMITS['files']})"
            total = 0
            for zi in infos:
                name = zi.filename.replace("\\", "/")
                parts = [p for p in name.split("/") if p not in ("", ".")]
                if name.startswith("/") or ".." in parts or (parts and ":" in parts[0]):
                    return f"the zip holds a path outside its folder ({zi.filename}); nothing was extracted"
                if stat.S_ISLNK(zi.external_attr >> 16):
                    return f"the zip holds a symbolic link ({zi.filename}); submit the files themselves"
                total += zi.file_size
                if total > ZIP_LIMITS["bytes"]:
                    return f"the zip unpacks to more than {ZIP_LIMITS['bytes'] // (1024 * 1024)} MB"
            dest.mkdir(parents=True)
            for zi in infos:
                parts = [p for p in zi.filename.replace("\\", "/").split("/") if p not in ("", ".")]
                if not parts:
                    continue
                target = dest.joinpath(*parts)
                if zi.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with z.open(zi) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out, 64 * 1024)
    except zipfile.BadZipFile as e:
        return f"the zip cannot be read ({e})"
    except (OSError, RuntimeError, ValueError, EOFError, zipfile.LargeZipFile, NotImplementedError) as e:
        return f"the zip cannot be read ({type(e).__name__}: {e})"
    return None


def _one_submission(ex: Exercise, src: Path, workdir: Path, shown: str) -> Submission:
    name = clean_name(src.stem if src.suffix.lower() == ".zip" else src.name)  # one line, nothing that reorders it
    sub = Submission(name=name, source=src, shown=shown)
    if src.is_symlink():
        sub.problem = f"{src.name} is a symbolic link; submit a folder or a zip"
        return sub
    if src.is_file() and src.suffix.lower() == ".zip":
        dest = workdir / f"{len(list(workdir.iterdir())):04d}-{name}"
        sub.problem = _unzip(src, dest)
        if sub.problem is None:
            sub.folder, sub.problem = _find_files(ex, dest)
        return sub
    if src.is_dir():
        sub.folder, sub.problem = _find_files(ex, src)
        if sub.folder is not None and shown != ".":  # the files one folder down (alice/ex1/design.py): commands name it
            sub.shown = str(sub.folder)
        return sub
    sub.problem = f"{src.name} is neither a folder nor a .zip"
    return sub


def collect(ex: Exercise, path: Path, workdir: Path) -> list[Submission]:
    """The submissions at ``path``: the one submission it is (a zip, or a folder holding the
    exercise's files), or one per folder or zip inside it. Zips are extracted under ``workdir``."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path} does not exist", code="E_FILE_MISSING")
    if path.is_file():
        if path.suffix.lower() != ".zip":
            raise InputError(f"{path} is a file; give a folder of submissions, one submission folder or a .zip",
                             code="E_NOT_A_SUBMISSION")
        return [_one_submission(ex, path, workdir, ".")]
    top = {p.name for p in path.iterdir()}
    if all(f in top for f in ex.files):  # one student's folder
        return [_one_submission(ex, path, workdir, str(path))]
    entries = sorted((p for p in path.iterdir() if _visible(p)), key=lambda p: p.name)
    subs = [_one_submission(ex, p, workdir, str(p) if p.is_dir() else ".") for p in entries
            if p.is_dir() or p.suffix.lower() == ".zip" or p.is_symlink()]
    if not subs:
        loose = [p.name for p in entries if p.is_file()]
        hint = (f" (it holds {', '.join(loose[:4])}: put each student's files in a folder or a zip of their own)"
                if loose else "")
        raise InputError(f"{path} holds no submissions{hint}", code="E_NO_SUBMISSIONS")
    seen: dict[str, int] = {}
    for s in subs:  # alice/ and alice.zip: both graded, under two names
        seen[s.name] = seen.get(s.name, 0) + 1
        if seen[s.name] > 1:
            s.name = f"{s.name}~{seen[s.name]}"
    return subs


def _ungradable(ex: Exercise, sub: Submission, tests) -> Report:
    rep = Report(ex, sub.source, hidden_ran=any(t.hidden for t in tests), hidden_points=ex.hidden_points())
    problem = clean_text(sub.problem)  # it may name the student's own files: cleaned and capped
    rep.results = [TestResult(name=t.name, title=t.title, hidden=t.hidden, points=0.0, max_points=t.points,
                              passed=False, message=f"not graded: {problem}", hint="", visibility=getattr(t, "visibility", "") or "",
                              cap=t.cap, core=t.core)
                   for t in tests]
    rep.problem = problem
    return rep


def grade_all(ex: Exercise, subs: list[Submission], *, jobs: int | None = None, hidden: bool = True,
              progress=None, rubric=None) -> list[Report]:
    """A :class:`Report` per submission (same order). Each submission is one job in a pool of
    ``jobs`` judge processes (default: every core): its tests in order, one after another, sharing
    its host processes, as every way to grade judges it (:func:`sim.course.evaluate.evaluate`), so
    ``jobs`` changes how long a class takes, never a score. ``progress(done, total, name)`` is called
    as each submission completes."""
    from .hints import load_hints

    jobs = jobs or os.cpu_count() or 2
    tests = list(ex.graded_tests(hidden, rubric))  # weighed by ``rubric``, else the course's (sim.course.rubric)
    hints = load_hints(ex)
    reports: list[Report | None] = [None] * len(subs)
    done = 0
    for i, s in enumerate(subs):
        if s.problem is not None:
            reports[i] = _ungradable(ex, s, tests)
    stack = ExitStack()
    judges = stack.enter_context(JudgePool(jobs))
    copies: dict[int, Path] = {}
    for i, s in enumerate(subs):  # each student's files, copied once to a private folder
        if reports[i] is None:
            copies[i], problem = private_copy(s.folder, stack)
            if problem is not None:
                s.problem = problem
                reports[i] = _ungradable(ex, s, tests)
    graded = [i for i, s in enumerate(subs) if reports[i] is None]
    if progress is not None:
        for i in range(len(subs)):
            if reports[i] is not None:
                done += 1
                progress(done, len(subs), subs[i].name)
    def one(i: int) -> Report:
        try:
            got = judge_tests(tests, copies[i], subs[i].shown, hints, judges)
        except Exception as e:  # noqa: BLE001 - the grader's own trouble (no processes left?) costs that submission
            got = {}
            why = f"not graded: the grader could not run this test ({type(e).__name__}: {e}); grade again"
        else:
            why = "not graded: the judging process gave no verdict for this test; grade again"
        rep = Report(ex, subs[i].source, hidden_ran=hidden and any(x.hidden or x.extended for x in tests),
                     hidden_points=ex.hidden_points())
        rep.results = [got.get(t.name) or TestResult(
            name=t.name, title=t.title, hidden=t.hidden, points=0.0, max_points=t.points, passed=False, message=why,
            visibility=getattr(t, "visibility", "") or "", cap=t.cap, core=t.core) for t in tests]
        return rep

    with stack, ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futs = {pool.submit(one, i): i for i in graded}  # submission-major order: the first students finish first
        for fut in as_completed(futs):
            i = futs[fut]
            reports[i] = fut.result()
            done += 1
            if progress is not None:
                progress(done, len(subs), subs[i].name)
    out = [r for r in reports if r is not None]
    judged = next((s for s in (sandbox_of(r.results, default=False) for r in out) if s), "")
    for r in out:  # every report says which sandbox judged it (one not judged at all: the one that would have)
        r.sandbox = sandbox_of(r.results, default=False) or judged or sandbox_of([])
    return out


def keep_beside(sub: Submission, report: Report) -> list[str]:
    """Write the report's attachments (a search's ``counterexample.toml``) beside the submission, never
    in it: ``class/alice.counterexample.toml`` beside ``class/alice/``, so the student's files stay as
    they were handed in; the reproduce line is made to name that file. A zip's files are only in the
    grader's temporary copy, so nothing is written for a zip (the feedback carries the text whole).
    Returns how the files written are named."""
    from .evaluate import keep_attachments

    if sub.folder is None or not sub.source.is_dir() or sub.source.is_symlink():
        return []
    src = sub.source.resolve()

    def place(name: str):
        path = src.parent / f"{src.name}.{name}"
        return path, str(path) if sub.source.is_absolute() else os.path.relpath(path)

    keep_attachments(report, sub.shown, place)
    return [r.attachment["written"] for r in report.results if r.attachment and r.attachment.get("written")]


def write_gradebook(path: Path, subs: list[Submission], reports: list[Report], *, reads=()) -> dict:
    """A CSV gradebook: student, score, max, one column per rule (its points, headed with its weight), a
    note and the history of earlier scores; merged into the gradebook already at ``path`` (a regrade of
    one student replaces that row only; never over one of ``reads``). See :mod:`sim.course.gradebook`."""
    from .gradebook import write_gradebook as write

    return write(path, subs, reports, reads=reads)


def _num(x: float) -> str:
    return f"{x:g}"


#: Short column names of the invariants in the fault-by-invariant grid.
class _Short(Mapping):
    """Each invariant's grid label, as it declares it (``@invariant(short=...)``), read from the
    registry when asked (an invariant registered later has its label too)."""

    def __getitem__(self, name: str) -> str:
        return _INVARIANTS[name].short

    def __iter__(self):
        return iter(_INVARIANTS)

    def __len__(self) -> int:
        return len(_INVARIANTS)


#: The grid's column label of each invariant.
SHORT: Mapping[str, str] = _Short()


def fault_grid(report: Report) -> tuple[list[str], list[dict]]:
    """(invariant names, rows): every run the submission's tests played, once, in test order; each
    row ``{"run", "tests", "invariants": {NAME: True/False}, "ok"}``."""
    names: list[str] = []
    rows: dict[str, dict] = {}
    for r in report.results:
        for g in r.grid or ():
            for n in g.get("invariants", {}):
                if n not in names:
                    names.append(n)
            row = rows.setdefault(g["run"], {"run": g["run"], "scenario": g.get("scenario", ""),
                                             "faults": g.get("faults", []), "tests": [], "invariants": {}, "ok": True})
            row["tests"].append(r.name)
            for n, ok in g.get("invariants", {}).items():
                row["invariants"][n] = row["invariants"].get(n, True) and bool(ok)
            row["ok"] = row["ok"] and bool(g.get("ok", True))
    return names, list(rows.values())


def workdir() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="protolab-grade-")
