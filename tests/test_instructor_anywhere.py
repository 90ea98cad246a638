"""Every instructor command works after the README's install (``pip install .``: a wheel without
``solutions/``), from any folder, finding the course with ``--course DIR`` (default: the current
folder or its parents), and says so, as ``error: CODE: message`` naming ``--course``, when it cannot.

The quick tests play "installed elsewhere" in this process (no solutions shipped, the package in a
site-packages, the current folder outside any checkout); the slow one does it for real: a fresh
virtual environment, ``pip install`` of a copy of the checkout, every command run from another folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import run_cli

from sim.course import catalog, kit
from sim.course.catalog import exercises
from sim.course.kit import copy_project

ROOT = Path(__file__).resolve().parents[1]

# each instructor command without a course, and the error it must give (naming --course)
INSTRUCTOR = [
    (["kit", "student", "{tmp}/kit"], "E_NOT_A_CHECKOUT"),
    (["kit", "verify", "-e", "7"], "E_NOT_A_CHECKOUT"),
    (["kit", "verify", "-e", "7", "--mutants"], "E_NOT_A_CHECKOUT"),
    (["kit", "classroom", "1", "{tmp}/class"], "E_NO_SOLUTIONS"),
    (["autograder", "1", "-o", "{tmp}/ag.zip"], "E_NOT_A_CHECKOUT"),
    (["grade", "1", "{tmp}"], "E_NO_SOLUTIONS"),
    (["bench", "grade", "-n", "10"], "E_NO_SOLUTIONS"),
]


_cli = run_cli  # conftest's: the one way tests call the CLI in-process


@pytest.fixture
def installed_elsewhere(tmp_path, monkeypatch):
    """As after ``pip install .``, run from another folder: no solutions shipped with the package,
    the package not inside a checkout, the current folder outside any course."""
    monkeypatch.delenv("PROTOLAB_SOLUTIONS", raising=False)
    real = catalog.shipped
    site = tmp_path / "site-packages"
    monkeypatch.setattr(catalog, "shipped", lambda *parts: site / Path(*parts) if parts[0] == "solutions" else real(*parts))
    monkeypatch.setattr(kit, "__file__", str(site / "sim" / "course" / "kit.py"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    yield elsewhere
    catalog.use_course(None)


@pytest.mark.parametrize("args, code", INSTRUCTOR, ids=lambda x: " ".join(x) if isinstance(x, list) else x)
def test_without_a_course_each_instructor_command_says_to_name_it(args, code, installed_elsewhere, capsys):
    rc, out, err = _cli(capsys, *[a.replace("{tmp}", str(installed_elsewhere)) for a in args])
    assert rc == 2 and err.startswith(f"error: {code}: ") and err.count("\n") == 1, (rc, err)
    assert "--course" in err and "Traceback" not in err


def test_a_folder_that_is_not_a_course_is_refused_naming_what_it_lacks(installed_elsewhere, capsys):
    rc, _, err = _cli(capsys, "kit", "classroom", "1", str(installed_elsewhere / "c"), "--course", str(installed_elsewhere))
    assert rc == 2 and err.startswith("error: E_NOT_A_CHECKOUT: --course ") and "no pyproject.toml" in err
    rc, _, err = _cli(capsys, "autograder", "1", "-o", "x.zip", "--course", str(installed_elsewhere / "nope"))
    assert rc == 2 and err.startswith("error: E_NOT_A_CHECKOUT: --course ") and "no such folder" in err


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
def test_with_course_or_from_inside_it_the_commands_find_the_checkout(installed_elsewhere, capsys):
    here = installed_elsewhere
    rc, out, err = _cli(capsys, "kit", "classroom", "1", str(here / "c1"), "--course", str(ROOT))
    assert rc == 0, err
    assert (here / "c1" / "solution" / "design.py").read_text() == (ROOT / "solutions" / "01-envelope-design" /
                                                                    "design.py").read_text()
    catalog.use_course(None)
    rc, out, err = _cli(capsys, "grade", "1", str(here / "c1" / "solution"), "--course", str(ROOT), "--json")
    assert rc == 0, err
    row = json.loads(out)[0]
    assert row["score"] == row["max_score"] and row["sandbox"]
    catalog.use_course(None)
    os.chdir(ROOT / "exercises")  # the default: the current folder or its parents
    rc, out, err = _cli(capsys, "autograder", "1", "-o", str(here / "ag.zip"))
    assert rc == 0, err
    with zipfile.ZipFile(here / "ag.zip") as z:
        assert "protolab/solutions/01-envelope-design/hidden.toml" in z.namelist()
    assert kit.project_root() == ROOT and kit.project_root(ROOT) == ROOT


def test_results_json_says_which_sandbox_judged_it(tmp_path):
    from sim.course.autograder import grade_submission
    from sim.course.catalog import get_exercise
    from sim.course.sandbox import describe

    sub = tmp_path / "submission"
    sub.mkdir()
    shutil.copy(ROOT / "solutions" / "01-envelope-design" / "design.py", sub / "design.py")
    d = grade_submission(get_exercise(1), sub)
    assert d["extra_data"]["sandbox"] == describe() and f"Sandbox: {describe()}" in d["output"]
    assert d["score"] == sum(t["max_score"] for t in d["tests"])
    empty = tmp_path / "empty"
    empty.mkdir()
    d = grade_submission(get_exercise(1), empty)
    assert d["score"] == 0 and d["extra_data"]["sandbox"] == describe()


# --------------------------------------------------------------------------------- for real


def _run(args, cwd, env, timeout=1800) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


@pytest.mark.slow
def test_after_pip_install_every_instructor_command_works_from_another_folder(tmp_path):
    course = tmp_path / "protolab"  # the instructor's checkout
    copy_project(ROOT, course, solutions=[e.dirname for e in exercises()])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON", "PROTOLAB_"))}
    venv = tmp_path / "venv"
    done = _run([sys.executable, "-m", "venv", str(venv)], tmp_path, env)
    assert done.returncode == 0, done.stderr
    done = _run([str(venv / "bin" / "pip"), "install", "-q", str(course)], tmp_path, env)  # the README's install
    assert done.returncode == 0, done.stderr[-3000:]
    pl = str(venv / "bin" / "protolab")
    site = _run([str(venv / "bin" / "python"), "-c", "import sim, os; print(os.path.dirname(sim.__file__))"], tmp_path, env)
    assert "site-packages" in site.stdout and not (Path(site.stdout.strip()).parent / "solutions").exists()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # without a course: each command says so, naming --course
    for args, code in INSTRUCTOR:
        done = _run([pl, *[a.replace("{tmp}", str(elsewhere)) for a in args]], elsewhere, env)
        assert done.returncode == 2 and done.stderr.startswith(f"error: {code}: ") and "--course" in done.stderr, \
            (args, done.returncode, done.stderr[-2000:])
    # with --course DIR, from another folder
    done = _run([pl, "kit", "classroom", "1", "c1", "--course", str(course)], elsewhere, env)
    assert done.returncode == 0, done.stderr[-3000:]
    keep = {"solution", "starter", "hostile-sqlite-attach", "hostile-kills-parent", "hostile-plants-link"}
    for p in (elsewhere / "c1").iterdir():
        if p.name not in keep:
            shutil.rmtree(p)
    done = _run([pl, "grade", "1", "c1", "--course", str(course), "--json"], elsewhere, env)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {r["student"]: r for r in json.loads(done.stdout)}
    assert sorted(rows) == sorted(keep)
    assert rows["solution"]["score"] == rows["solution"]["max_score"]
    assert rows["starter"]["score"] < rows["starter"]["max_score"]
    assert all(rows[k]["score"] == 0 for k in keep if k.startswith("hostile-"))
    done = _run([pl, "grade", "1", "c1/solution", "--course", str(course)], elsewhere, env)
    assert done.returncode == 0 and "sandbox: " in done.stdout, done.stderr[-3000:]
    done = _run([pl, "autograder", "1", "-o", "ag.zip", "--course", str(course)], elsewhere, env)
    assert done.returncode == 0 and (elsewhere / "ag.zip").is_file(), done.stderr[-3000:]
    done = _run([pl, "kit", "verify", "-e", "7", "--course", str(course)], elsewhere, env)
    assert done.returncode in (0, 1) and "Kit verify" in done.stdout, done.stderr[-3000:]
    done = _run([pl, "kit", "student", "kit", "--course", str(course)], elsewhere, env, timeout=3600)
    if done.returncode == 0:
        assert (elsewhere / "kit" / "sim").is_dir() and not (elsewhere / "kit" / "solutions").exists()
    else:  # it found the course and checked it: a leak or a failing starter is the course's content, said so
        assert done.returncode == 2 and done.stderr.startswith(("error: E_KIT_LEAK: ", "error: E_KIT_SMOKE: ")), \
            done.stderr[-3000:]
        assert not (elsewhere / "kit").exists()
    # the default: the current folder or one of its parents
    done = _run([pl, "kit", "classroom", "1", str(elsewhere / "c2")], course / "exercises", env)
    assert done.returncode == 0, done.stderr[-3000:]
