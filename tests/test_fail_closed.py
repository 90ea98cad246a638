"""Fail closed: without an operating-system sandbox, students' code is not run unless the instructor
says so, and never as root.

* ``protolab grade`` (and the Gradescope autograder's grading entry) without bubblewrap: one line
  ``error: E_NO_SANDBOX: ...`` on stderr saying how to get it, exit 2, nothing written, nothing of
  the students' run. ``PROTOLAB_SANDBOX=fallback`` stands for "no bubblewrap here".
* ``--sandbox none``: graded on the fallback, and every row says so: the JSON rows, the table, the
  CSV gradebook and each results.json.
* The fallback never runs students' code as root: it drops to the sandbox's unprivileged user, or
  refuses (the grader's trouble, never the student's).
* The hole the fallback had: ``tkinter.Tcl()`` read the model answer and wrote outside the folder.
  The guard (the fallback's only wall) refuses tkinter and the other native escape hatches, under
  any name.
"""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from sim.course import sandbox
from sim.course.catalog import get_exercise
from sim.course.evaluate import Report
from sim.course.evaluate import TestResult as Result

ROOT = Path(__file__).resolve().parents[1]
MARKER = "/tmp/protolab-fail-closed-ran"


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PROTOLAB_"))}
    return {**env, **extra}


@pytest.fixture
def klass(tmp_path):
    """A class of one whose design.py leaves a mark when it is imported (so a run would show)."""
    d = tmp_path / "class" / "alice"
    d.mkdir(parents=True)
    model = (ROOT / "solutions" / "01-envelope-design" / "design.py").read_text()
    (d / "design.py").write_text(f"open({MARKER!r}, 'w').write('ran')\n" + model)
    Path(MARKER).unlink(missing_ok=True)
    return d.parent


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_without_bubblewrap_grade_refuses_in_one_line_and_writes_nothing(klass, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    before = _files(tmp_path)
    done = subprocess.run([sys.executable, "-m", "sim", "grade", "1", str(klass), "--csv", str(out / "grades.csv"),
                           "--gradescope", str(out / "gs")], cwd=ROOT, env=_env(PROTOLAB_SANDBOX="fallback"),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: E_NO_SANDBOX: "), done.stderr
    said = lines[0]
    assert "apt-get install bubblewrap" in said and "macOS" in said and "--sandbox none" in said
    assert "Traceback" not in done.stderr
    assert _files(tmp_path) == before  # no gradebook, no results.json, no counterexample beside anyone
    assert not os.path.exists(MARKER)  # the student's code never ran


def test_without_bubblewrap_the_autograder_entry_refuses_and_writes_no_results(klass, tmp_path):
    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    (root / "submission" / "design.py").write_text((klass / "alice" / "design.py").read_text())
    done = subprocess.run([sys.executable, "-m", "sim.course.autograder", "run", "1", "--root", str(root)], cwd=ROOT,
                          env=_env(PROTOLAB_SANDBOX="fallback", PYTHONPATH=str(ROOT)), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: E_NO_SANDBOX: ") and "apt-get install bubblewrap" in lines[0]
    assert not (root / "results" / "results.json").exists() and not os.path.exists(MARKER)


def test_an_autograder_built_with_sandbox_none_says_so_and_one_built_without_does_not(tmp_path):
    import zipfile

    from sim.course.autograder import build_autograder

    for choice in ("bubblewrap", "none"):
        z = tmp_path / f"{choice}.zip"
        build_autograder(1, z, root=ROOT, sandbox=choice)
        with zipfile.ZipFile(z) as f:
            script = f.read("run_autograder").decode()
            manifest = json.loads(f.read("autograder.json"))
        assert f"--sandbox {choice}" in script and manifest["sandbox"] == choice


def test_sandbox_takes_only_bubblewrap_or_none(klass, capsys):
    from sim.cli import main

    with pytest.raises(SystemExit) as done:
        main(["grade", "1", str(klass), "--sandbox", "docker"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: E_USAGE: ") and "bubblewrap, none" in err and len(err.splitlines()) == 1


# ------------------------------------------------------------------------- --sandbox none: every row says so


def _reports(sandbox_said: str):
    ex = get_exercise(1)
    reports = []
    for name, points in (("alice", 10), ("bob", 0)):
        r = Report(ex, Path(f"/private/{name}"), hidden_ran=True, hidden_points=0, sandbox=sandbox_said)
        r.results = [Result(name=t.name, title=t.title, hidden=False, points=points if i == 0 else t.points,
                            max_points=t.points, passed=points == t.points or i > 0, message="a message",
                            visibility="visible", sandbox=sandbox_said)
                     for i, t in enumerate(ex.tests)]
        reports.append((SimpleNamespace(name=name), r))
    return ex, reports


@pytest.mark.parametrize("said", ["fallback: PROTOLAB_SANDBOX=fallback", "bubblewrap"])
def test_graded_without_an_os_sandbox_every_row_of_every_output_carries_the_warning(said, tmp_path):
    from sim.cli.common import _console
    from sim.cli.course import _show_grades
    from sim.course.autograder import note_sandbox
    from sim.course.grade import write_gradebook
    from sim.course.gradescope import results_json

    ex, pairs = _reports(said)
    subs, reports = [s for s, _ in pairs], [r for _, r in pairs]
    unboxed = said.startswith("fallback")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        _show_grades(ex, subs, reports, None, as_json=True, explain=False, wrote=[])
    rows = json.loads(buf.getvalue())
    assert len(rows) == 2
    for row in rows:
        assert ("graded WITHOUT an operating-system sandbox" in row.get("warning", "")) == unboxed, row.get("warning")
    con = _console()
    with con.capture() as cap:
        _show_grades(ex, subs, reports, con, as_json=False, explain=False, wrote=[])
    table = [line for line in cap.get().splitlines() if line.strip().startswith(("alice", "bob"))]
    assert len(table) == 2 and all(("NO OS SANDBOX" in line) == unboxed for line in table), cap.get()
    write_gradebook(tmp_path / "g.csv", subs, reports)
    with open(tmp_path / "g.csv", newline="") as f:
        book = list(csv.DictReader(f))
    assert len(book) == 2 and all(("WITHOUT an operating-system sandbox" in r["note"]) == unboxed for r in book)
    for r in reports:
        d = note_sandbox(results_json(r), r.sandbox)
        assert ("WARNING: graded without an operating-system sandbox" in d["output"]) == unboxed
        assert ("warning" in d["extra_data"]) == unboxed


# ------------------------------------------------------------------------- never as root


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root")
def test_as_root_with_no_user_to_drop_to_the_fallback_refuses_students_code(monkeypatch, tmp_path):
    from sim.errors import InputError

    monkeypatch.setattr(sandbox, "_BOX", [sandbox.Box("fallback", "PROTOLAB_SANDBOX=fallback")])
    monkeypatch.setattr(sandbox, "_USER_DONE", True)
    monkeypatch.setattr(sandbox, "RUN_AS", None)
    monkeypatch.setattr(sandbox, "RUN_AS_NOTE", "the user 'protolab-sandbox' cannot start python: judged code runs as root")
    with pytest.raises(InputError) as refused:
        sandbox.require("none")
    assert refused.value.code == "E_NO_SANDBOX" and "root" in refused.value.message
    # the hosts themselves refuse too (a judge that starts one anyway): the grader's trouble, not the student's
    d = tmp_path / "sub"
    d.mkdir()
    (d / "design.py").write_text(f"open({MARKER!r}, 'w').write('ran')\n")
    Path(MARKER).unlink(missing_ok=True)
    with pytest.raises(sandbox.SandboxError, match="refusing to run student code as root"):
        sandbox.start_host(d / "design.py", 1)
    assert not os.path.exists(MARKER)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root")
def test_as_root_with_a_user_to_drop_to_the_fallback_host_runs_as_that_user(monkeypatch, tmp_path):
    """Where the sandbox's user can run this Python, the fallback host is that user, not root."""
    if sandbox.sandbox_user() is None:
        pytest.skip(f"no unprivileged user can run this Python here ({sandbox.RUN_AS_NOTE}); tests/"
                    "test_sandbox_unprivileged.py runs this case with a venv of a system Python that user can run")
    from sim.course.remote import RemoteModule

    monkeypatch.setattr(sandbox, "_BOX", [sandbox.Box("fallback", "PROTOLAB_SANDBOX=fallback")])
    d = tmp_path / "sub"
    d.mkdir()
    os.chmod(tmp_path, 0o755)
    (d / "design.py").write_text("import os\n\n\ndef uid():\n    return os.getuid()\n")
    mod = RemoteModule(d / "design.py", processes=1)
    try:
        assert mod.call("uid") not in (0, None)
    finally:
        mod.close()


# ------------------------------------------------------------------------- the guard: native escape hatches

_GUARDED = """
import os, sys
root, sub = sys.argv[1], sys.argv[2]
sys.path.insert(0, root)
from sim.course import guard
from sim.course.host import kit_files
r, w = os.pipe()
guard.install(sub, checkout=root, package=root + '/sim', kit=kit_files('design', root + '/sim'), report_fd=w,
              report_prefix='T ')
try:
    exec(compile(open(sub + '/design.py').read(), sub + '/design.py', 'exec'), {'__name__': 'student'})
    print('RAN')
except BaseException as e:
    print('REFUSED', type(e).__name__, e)
os.close(w)
print('REPORTED', os.read(r, 100000).decode().strip())
"""
_TCL = ("import tkinter\n"
        "print(tkinter.Tcl().eval('set f [open {SOLUTION} r]; set t [read $f]; close $f; "
        "set g [open {MARKER} w]; puts $g $t; close $g'))\n")
_RENAMED = ("import importlib.machinery, importlib.util\n"
            "origin = importlib.util.find_spec('_tkinter').origin\n"
            "loader = importlib.machinery.ExtensionFileLoader('mine._tkinter', origin)\n"
            "spec = importlib.util.spec_from_loader('mine._tkinter', loader)\n"
            "tk = importlib.util.module_from_spec(spec)\n"
            "print(tk.create(None, 'x', 'Tk', False, False, False).eval('set g [open {MARKER} w]; close $g'))\n")


@pytest.mark.skipif(importlib.util.find_spec("_tkinter") is None, reason="this Python has no _tkinter")
@pytest.mark.parametrize("how", ["tkinter.Tcl", "_tkinter-under-another-name"])
def test_the_guard_alone_refuses_a_tcl_interpreter_that_would_read_the_answer_and_write_outside(how, tmp_path):
    """The guard with no operating-system wall around it (the fallback's case; here even as root):
    a Tcl interpreter, by name or its extension loaded under another, is refused; nothing is read or
    written through it."""
    sub = tmp_path / "sub"
    sub.mkdir()
    solution = ROOT / "solutions" / "01-envelope-design" / "design.py"
    code = (_TCL if how == "tkinter.Tcl" else _RENAMED).replace("{SOLUTION}", str(solution)).replace("{MARKER}", MARKER)
    (sub / "design.py").write_text(code)
    Path(MARKER).unlink(missing_ok=True)
    done = subprocess.run([sys.executable, "-I", "-c", _GUARDED, str(ROOT), str(sub)], capture_output=True, text=True,
                          timeout=120, env=_env())
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "RAN" not in out and "REFUSED" in out, out
    assert "the sandbox does not allow" in out and "tkinter" in out
    assert out.split("REPORTED ", 1)[1].startswith('T {"violation": "your code tried to import'), out
    assert not os.path.exists(MARKER)
