"""A Gradescope autograder for one exercise: a zip built here, and the grading entry it runs.

Gradescope unpacks the zip into ``/autograder/source``, runs ``setup.sh`` once when it builds
its image (Ubuntu, as root, with network), and then, once per submission on its own machines,
``/autograder/run_autograder`` with the student's files in ``/autograder/submission``; it reads
``/autograder/results/results.json``. The zip holds::

    setup.sh                a Python >= 3.11 venv at /opt/protolab-venv, protolab and its dependencies
                            installed from protolab/ (pip), bubblewrap (apt-get), the unprivileged
                            user protolab-sandbox
    run_autograder          installs nothing; runs 'python -m sim.course.autograder run N' with the
                            bundled source first on the path, and falls back to fallback-results.json
                            if that wrote nothing
    protolab/               the project's source (sim, data, labs, exercises, pyproject.toml) and
                            solutions/NN-slug of this exercise only: its hidden tests (instructor-side)
    fallback-results.json   every test 0: "the autograder could not run"
    autograder.json         what the zip is (exercise, version)

``PROTOLAB_AUTOGRADER_ROOT`` (default ``/autograder``) and ``PROTOLAB_PYTHON`` (default the venv's
python) let it run anywhere: unpack the zip into ``ROOT/source``, put a submission in
``ROOT/submission`` and run ``ROOT/source/run_autograder``.

The grading entry (:func:`run`) finds the exercise's files in the submission even when nested in
a folder or a zip with other files, grades them with public and hidden tests, the student's code in
the sandbox, and always writes a valid results.json: a submission that cannot be graded (no such
file, a file that does not load) gets every test 0 with the reason. results.json's output and
extra_data say which sandbox judged it (bubblewrap, or the fallback and why: Gradescope's
containers may refuse the namespaces bubblewrap needs).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path

from .. import __version__
from ..errors import InputError
from .catalog import Exercise
from .gradescope import results_json, ungradable, validate_results

__all__ = ["build_autograder", "run", "grade_submission", "main", "DEFAULT_VENV", "note_sandbox"]

DEFAULT_VENV = "/opt/protolab-venv"
MANIFEST = "autograder.json"
_EPOCH = (2020, 1, 1, 0, 0, 0)  # fixed times in the zip: the same checkout gives the same bytes

SETUP_SH = r"""#!/usr/bin/env bash
# protolab autograder, exercise @N@ (@SLUG@): Gradescope runs this once, as root, when it builds
# the image (Ubuntu, network available). Everything grading needs is installed here;
# run_autograder installs nothing.
set -euo pipefail
SOURCE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${PROTOLAB_VENV:-@VENV@}"
export DEBIAN_FRONTEND=noninteractive

find_python() {
  for p in python3.13 python3.12 python3.11 python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      command -v "$p"
      return 0
    fi
  done
  return 1
}

PY="$(find_python || true)"
if [ -z "$PY" ]; then  # Ubuntu 22.04's python3 is 3.10: protolab needs 3.11
  apt-get update
  apt-get install -y python3.11 python3.11-venv
  PY="$(find_python)"
fi
if ! "$PY" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  apt-get update
  apt-get install -y "$(basename "$PY")-venv" python3-pip || apt-get install -y python3-venv python3-pip
fi

"$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install --upgrade pip
"$VENV/bin/python" -m pip install "$SOURCE/protolab"
PYTHONPATH="$SOURCE/protolab" "$VENV/bin/python" -c "import sim.course.autograder, sim.course.sandbox"

# bubblewrap, the operating-system sandbox students' code runs in where this machine allows user
# namespaces (without it, or without namespaces, the grader runs on its fallback and says so).
if ! command -v bwrap >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq bubblewrap || echo "protolab: bubblewrap not installed: the grader will use its fallback"
fi

# The unprivileged user the sandbox may run students' code as.
if ! id -u protolab-sandbox >/dev/null 2>&1; then
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin protolab-sandbox
fi
chmod -R a+rX "$VENV" "$SOURCE"
echo "protolab autograder for exercise @N@ is set up in $VENV"
"""

RUN_AUTOGRADER = r"""#!/usr/bin/env bash
# protolab autograder, exercise @N@ (@SLUG@): Gradescope runs this once per submission. It
# installs nothing (setup.sh did): it grades $ROOT/submission with the public and hidden tests,
# each in the sandbox, and writes $ROOT/results/results.json, also when the submission cannot be
# graded. PROTOLAB_AUTOGRADER_ROOT and PROTOLAB_PYTHON let it run outside Gradescope.
set -u
ROOT="${PROTOLAB_AUTOGRADER_ROOT:-/autograder}"
PY="${PROTOLAB_PYTHON:-@VENV@/bin/python}"
SOURCE="$ROOT/source"
mkdir -p "$ROOT/results"
cd "$ROOT"
PYTHONPATH="$SOURCE/protolab" "$PY" -m sim.course.autograder run @N@ --root "$ROOT" --sandbox @SANDBOX@
status=$?
if [ ! -s "$ROOT/results/results.json" ]; then
  echo "protolab: grading ended with status $status and wrote no results.json; writing the fallback" >&2
  cp "$SOURCE/fallback-results.json" "$ROOT/results/results.json"
fi
exit 0
"""


def _script(text: str, ex: Exercise, sandbox: str = "bubblewrap") -> str:
    return (text.replace("@N@", str(ex.number)).replace("@SLUG@", ex.slug).replace("@VENV@", DEFAULT_VENV)
            .replace("@SANDBOX@", sandbox))


def _is_ours(path: Path) -> bool:
    try:
        with zipfile.ZipFile(path) as z:
            return json.loads(z.read(MANIFEST)).get("kind") == "protolab-autograder"
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return False


def build_autograder(which, out_zip: Path, *, root: Path | None = None, sandbox: str = "bubblewrap") -> dict:
    """Write the Gradescope autograder zip of exercise ``which`` to ``out_zip`` (new, or a previous
    protolab autograder zip, which is replaced); what it holds. ``sandbox`` is what its grading entry
    is allowed (:func:`sim.course.sandbox.require`): ``"none"`` lets it grade where bubblewrap cannot
    make its sandbox (as on Gradescope's own machines, often), with a warning in every results.json."""
    from .kit import _pick, copy_project, exercises_at, project_root
    from .sandbox import SANDBOX_CHOICES

    if sandbox not in SANDBOX_CHOICES:
        raise InputError(f"--sandbox is {sandbox!r}: expected one of {', '.join(SANDBOX_CHOICES)}", code="E_USAGE")

    root = Path(root).resolve() if root is not None else project_root()
    out_zip = Path(out_zip)
    ex = _pick(exercises_at(root), [which])[0]
    sol = ex.solutions()
    if not (sol / "hidden.toml").is_file():
        raise InputError(f"solutions/{ex.dirname} has no hidden.toml: the autograder grades with hidden tests",
                         code="E_NO_SOLUTIONS")
    from ..files import check_output, files_under, written_whole

    check_output(out_zip, files_under([ex.folder, sol]))  # first: never over a file the zip is made of
    if out_zip.exists() and (out_zip.is_dir() or not _is_ours(out_zip)):
        raise InputError(f"{out_zip} exists and is not a protolab autograder zip; nothing was written "
                         "(name a new file)", code="E_OUTPUT_EXISTS")
    if not out_zip.resolve().parent.is_dir():
        raise InputError(f"folder {out_zip.parent} does not exist", code="E_DIR_MISSING")
    manifest = {"kind": "protolab-autograder", "version": __version__, "exercise": ex.number, "slug": ex.slug,
                "title": ex.title, "files": list(ex.files), "tests": [t.name for t in ex.tests],
                "hidden_tests": [t.name for t in ex.hidden_tests()], "python": DEFAULT_VENV + "/bin/python",
                "sandbox": sandbox}
    fallback = ungradable(ex, "the autograder could not run (this is not a problem with your files): "
                              "tell your instructor")
    with tempfile.TemporaryDirectory(prefix="protolab-autograder-") as staging:
        src = Path(staging) / "protolab"
        copy_project(root, src, solutions=[ex.dirname])
        entries: list[tuple[str, bytes, int]] = [
            ("setup.sh", _script(SETUP_SH, ex).encode(), 0o755),
            ("run_autograder", _script(RUN_AUTOGRADER, ex, sandbox).encode(), 0o755),
            (MANIFEST, (json.dumps(manifest, indent=2) + "\n").encode(), 0o644),
            ("fallback-results.json", (json.dumps(fallback, indent=2) + "\n").encode(), 0o644),
        ]
        copied = []
        for p in sorted(src.rglob("*")):
            if p.is_file():
                copied.append(root / p.relative_to(src))  # what was read: the zip may not be written over it
                entries.append((f"protolab/{p.relative_to(src).as_posix()}", p.read_bytes(), 0o644))
        with written_whole(out_zip, "wb", code="E_OUTPUT", reads=copied) as fh, \
                zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for name, data, mode in entries:
                info = zipfile.ZipInfo(name, date_time=_EPOCH)
                info.external_attr = (0o100000 | mode) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, data)
    return {"zip": str(out_zip), "exercise": ex.number, "title": ex.title, "entries": len(entries),
            "bytes": out_zip.stat().st_size, "tests": len(ex.tests), "hidden_tests": len(ex.hidden_tests())}


# ---------------------------------------------------------------------------------- grading


def note_sandbox(result: dict, sandbox: str) -> dict:
    """``result`` (results.json) saying which sandbox judged it, in its output and its extra_data."""
    if not sandbox:
        return result
    if sandbox.startswith("fallback"):
        line = (f"WARNING: graded without an operating-system sandbox (sandbox: {sandbox}). Your code ran with the "
                "grader's audit hooks and limits, without the operating-system sandbox (bubblewrap) it normally runs in.")
        result.setdefault("extra_data", {})["warning"] = line
    else:
        line = f"Sandbox: {sandbox} (your code ran in an operating-system sandbox: no network, no file outside its folder)."
    result["output"] = (result.get("output", "").rstrip() + "\n\n" + line).lstrip()
    result.setdefault("extra_data", {})["sandbox"] = sandbox
    return result


def _does_not_load(path: Path) -> str | None:
    """Why the student's file cannot even be read as what it should be (Python, TOML, JSON), or None."""
    name = path.name
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        return f"{name} is not UTF-8 text (byte {e.start})"
    except OSError as e:
        return f"{name} cannot be read: {e.strerror or e}"
    try:
        if path.suffix == ".py":
            compile(text, name, "exec", dont_inherit=True)
        elif path.suffix == ".toml":
            tomllib.loads(text)
        elif path.suffix == ".json":
            json.loads(text)
    except SyntaxError as e:
        return f"{name} does not load: {type(e).__name__} at line {e.lineno}: {e.msg}"
    except ValueError as e:  # null bytes; TOMLDecodeError and JSONDecodeError are ValueErrors
        kind = {".toml": "TOML", ".json": "JSON"}.get(path.suffix)
        return f"{name} is not valid {kind}: {e}" if kind else f"{name} does not load: {e}"
    return None


def _locate(ex: Exercise, submission: Path, work: Path) -> tuple[Path | None, str | None]:
    """The folder holding the exercise's files: the submission's top, a nested folder, or inside a
    zip it holds (unpacked under ``work``)."""
    from .grade import _find_files, _unzip

    if not submission.is_dir():
        return None, f"there is no submission folder ({submission.name}); submit {', '.join(ex.files)}"
    folder, problem = _find_files(ex, submission)
    if folder is not None:
        return folder, None
    zips = sorted(p for p in submission.rglob("*.zip") if p.is_file() and not p.is_symlink()
                  and "__MACOSX" not in p.parts)[:5]
    for i, z in enumerate(zips):
        dest = work / f"zip-{i}"
        why = _unzip(z, dest)
        if why is not None:
            problem = f"{z.name}: {why}"
            continue
        found, why = _find_files(ex, dest)
        if found is not None:
            return found, None
        problem = f"inside {z.name}: {why}"
    return None, problem


def grade_submission(ex: Exercise, submission: Path, *, started: float | None = None) -> dict:
    """results.json (a dict) for the submission folder ``submission``: public and hidden tests, each
    in the sandbox. Never raises for anything in the submission."""
    from .evaluate import evaluate
    from .sandbox import describe

    started = time.monotonic() if started is None else started
    with tempfile.TemporaryDirectory(prefix="protolab-autograder-") as work:
        folder, problem = _locate(ex, Path(submission), Path(work))
        if folder is not None:
            problem = next((why for f in ex.files if (why := _does_not_load(folder / f))), None)
        if problem is not None:
            return note_sandbox(ungradable(ex, problem, submission=submission, execution_time=time.monotonic() - started),
                                describe())
        report = evaluate(ex, folder, hidden=True, isolate=True, shown=ex.dirname)
        return note_sandbox(results_json(report, execution_time=time.monotonic() - started), report.sandbox)


def _exercise(which, root: Path) -> Exercise:
    """The exercise as the bundled source (``ROOT/source/protolab``) defines it, hidden tests
    included; the installed package's when there is no bundle."""
    from .catalog import get_exercise
    from .kit import _pick, exercises_at

    bundle = root / "source" / "protolab"
    if (bundle / "exercises").is_dir():
        return _pick(exercises_at(bundle), [which])[0]
    return get_exercise(which)


def run(which, root: Path, sandbox: str = "bubblewrap") -> int:
    """Grade ``ROOT/submission`` and write ``ROOT/results/results.json``; 0 when written. Without an
    operating-system sandbox here it refuses (``E_NO_SANDBOX``, nothing written) unless ``sandbox`` is
    ``"none"`` (:func:`sim.course.sandbox.require`)."""
    from .sandbox import require

    started = time.monotonic()
    root = Path(root)
    out = root / "results" / "results.json"
    ex = _exercise(which, root)
    require(sandbox)
    if not ex.hidden_tests() and not ex.extensions():
        print(f"protolab: WARNING: no hidden tests or cases for exercise {ex.number} under {root / 'source'}: "
              "grading the public tests only (rebuild the zip with 'protolab autograder')")
    try:
        result = grade_submission(ex, root / "submission", started=started)
    except Exception as e:  # a grader bug must still give the student a file that says so
        result = ungradable(ex, f"the grader failed ({type(e).__name__}: {e}); this is not a problem with your "
                                "files: tell your instructor", execution_time=time.monotonic() - started)
    problems = validate_results(result)
    if problems:
        print(f"protolab: results.json did not validate: {'; '.join(problems[:5])}")
        result = ungradable(ex, "the grader produced an invalid result; tell your instructor",
                            execution_time=time.monotonic() - started)
    out.parent.mkdir(parents=True, exist_ok=True)
    from ..files import files_under, written_whole

    with written_whole(out, reads=files_under([root / "submission"]), option="results.json") as fh:
        fh.write(json.dumps(result, indent=2) + "\n")
    # run_autograder's stdout is for the instructor (Gradescope keeps it in results/stdout)
    print(f"protolab {__version__} ({Path(__file__).resolve().parents[2]}): exercise {ex.number} ({ex.dirname}), "
          f"score {result['score']:g}/"
          f"{sum(t['max_score'] for t in result['tests']):g} in {time.monotonic() - started:.1f} s")
    if result["extra_data"].get("sandbox"):
        print(f"  sandbox: {result['extra_data']['sandbox']}")
    if result["extra_data"].get("problem"):
        print(f"  not graded: {result['extra_data']['problem']}")
    for t in result["tests"]:
        print(f"  {t['status']:6} {t['score']:g}/{t['max_score']:g}  {t['extra_data']['test']} ({t['visibility']})")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m sim.course.autograder run N [--root ROOT]`` (ROOT defaults to
    $PROTOLAB_AUTOGRADER_ROOT, then /autograder)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m sim.course.autograder")
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="grade ROOT/submission, write ROOT/results/results.json")
    r.add_argument("exercise")
    r.add_argument("--root", default=os.environ.get("PROTOLAB_AUTOGRADER_ROOT", "/autograder"))
    r.add_argument("--sandbox", default="bubblewrap", help="'none': grade even without bubblewrap (with a warning)")
    args = parser.parse_args(argv)
    try:
        return run(args.exercise, Path(args.root), args.sandbox)
    except InputError as e:
        print(f"error: {e.one_line()}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover - run by run_autograder
    sys.exit(main())
