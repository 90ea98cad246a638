"""Hostile submissions in the sandbox: each hostile thing scores 0 for its test with a one-line
reason, the grader's process and the kit's files are untouched, nothing of a hidden test is ever
on disk, and nothing of the model answers reaches a message or an output.

Submissions are the model answer with one hostile line added (at import time, or inside the
function the judge calls), so that only the hostile line can cost points. Most are judged with
:func:`sim.course.sandbox.run_test` and a short time limit; a few go through
:func:`sim.course.evaluate.evaluate` as an instructor's grading does.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from pathlib import Path

import pytest

from sim.course import sandbox
from sim.course.catalog import get_exercise
from sim.course.evaluate import evaluate
from sim.course.sandbox import run_test

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
EX1, EX3, EX5 = "01-envelope-design", "03-deduplicating-consumer", "05-exactly-once"
KEY_DEF = "def idempotency_key(intent) -> str:\n"
# written by hostile code if it ever escapes its folder
OUTSIDE = Path(tempfile.gettempdir()) / f"protolab-hostile-outside-{os.getpid()}"
IN_CHECKOUT = ROOT / f"protolab-hostile-was-here-{os.getpid()}"
# the checkout, as student code can work it out from the sim package it imports
FIND_ROOT = "import os, sim\nROOT = os.path.dirname(os.path.dirname(os.path.realpath(sim.__file__)))"


def _secret_lines() -> list[str]:
    """Lines of the model answers and hidden tests that appear nowhere a student can read."""
    known = "\n".join(p.read_text(encoding="utf-8", errors="replace")
                      for p in [*(ROOT / "exercises").rglob("*"), *(ROOT / "sim").rglob("*.py")] if p.is_file())
    out = []
    for ex, main in ((EX1, "design.py"), (EX3, "decide.py"), (EX5, "effects.py")):
        for f in (SOLUTIONS / ex / main, SOLUTIONS / ex / "hidden.toml"):
            for line in f.read_text(encoding="utf-8").splitlines():
                text = line.strip().lstrip("#").strip()
                if len(text) > 30 and text not in known:
                    out.append(text)
    return out


SECRET = _secret_lines()


def _kit_state() -> dict:
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for base in (SOLUTIONS, ROOT / "exercises")
            for p in sorted(base.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture(autouse=True)
def _untouched():
    """Every test: the kit's solutions and exercises stay as they were, nothing lands outside."""
    before = _kit_state()
    yield
    assert _kit_state() == before, "solutions/ or exercises/ changed"
    for p in (OUTSIDE, IN_CHECKOUT):
        assert not p.exists(), f"hostile code wrote {p}"


def _submission(tmp_path: Path, ex: str, main: str, *, top: str = "", inside: str = "", fn: str = "") -> Path:
    """The exercise's folder with the model answer, ``top`` put before it and ``inside`` put at
    the start of the function whose ``def`` line starts with ``fn``."""
    d = tmp_path / "sub"
    shutil.copytree(ROOT / "exercises" / ex, d)
    src = (SOLUTIONS / ex / main).read_text(encoding="utf-8")
    if inside:
        i = src.index(fn)
        j = src.index(":\n", src.index(")", i)) + 2
        src = src[:j] + "".join("    " + line + "\n" for line in inside.splitlines()) + src[j:]
    if top:
        # after a ``from __future__`` line, if any (it must stay first)
        k = src.index("\n", src.index("from __future__")) + 1 if "from __future__" in src else 0
        src = src[:k] + top + "\n" + src[k:]
    (d / main).write_text(src, encoding="utf-8")
    return d


def _design(tmp_path, top="", inside=""):
    return _submission(tmp_path, EX1, "design.py", top=top, inside=inside, fn=KEY_DEF)


def _clean(v: dict) -> None:
    """A verdict as a student sees it: one line, no traceback, nothing of the model answers."""
    text = v["message"] + "\n" + (v.get("output") or "")
    assert "Traceback" not in text and "\n" not in v["message"].strip()
    leaked = [line for line in SECRET if line in text]
    assert not leaked, leaked[:2]


def _zero(v: dict, *words: str) -> None:
    assert v["score"] == 0, v["message"]
    for w in words:
        assert w in v["message"], (w, v["message"])
    _clean(v)


# ------------------------------------------------------------------------------ exercise 1, one kind each

HOSTILE_1 = {
    # name: (top, inside idempotency_key, words the message must hold)
    "sys-exit-import": ("import sys\nsys.exit(3)", "", ["sys.exit(3)", "design.py"]),
    "sys-exit-call": ("", "import sys\nsys.exit(3)", ["idempotency_key called sys.exit(3)", "design.py line"]),
    "os-exit-import": ("import os\nos._exit(7)", "", ["exit status 7", "os._exit", "while importing it"]),
    "os-exit-call": ("", "import os\nos._exit(0)", ["exit status 0", "os._exit", "during idempotency_key"]),
    "raises-on-import": ("x = 1 / 0", "", ["does not import: ZeroDivisionError", "design.py line 1"]),
    "syntax-error": ("def broken(:\n    pass", "", ["design.py", "SyntaxError at line 1"]),
    "memory-bomb-import": ("hoard = bytearray(10 ** 10)", "", ["ran out of memory", "design.py line 1"]),
    "memory-bomb-call": ("", "hoard = bytearray(10 ** 10)", ["idempotency_key ran out of memory", "design.py line"]),
    "flood-import": ("print('x' * 1_000_000)", "", ["printed more than 256 KB"]),
    "flood-call": ("", "print('y' * 100_000)", ["printed more than 256 KB"]),
    "forks": ("", "import os\nif os.fork() == 0:\n    os._exit(0)", ["tried to start a process (os.fork)", "design.py line"]),
    "spawns": ("import subprocess\nsubprocess.run(['true'])", "", ["tried to start a process", "subprocess"]),
    "os-system": ("", f"import os\nos.system('touch {OUTSIDE}')", ["tried to start a process (os.system)"]),
    "writes-outside": ("", f"open({str(OUTSIDE)!r}, 'w').write('x')", ["tried to write", "outside its folder"]),
    "writes-into-checkout": (FIND_ROOT, f"open(os.path.join(ROOT, {IN_CHECKOUT.name!r}), 'w').write('x')",
                             ["tried to write", "outside its folder"]),
    "reads-solutions": (FIND_ROOT + "\nSTOLEN = open(os.path.join(ROOT, 'solutions', '01-envelope-design', 'design.py')).read()",
                        "", ["tried to read", "solutions/01-envelope-design/design.py", "outside its folder"]),
    "reads-hidden-tests-and-hides-it": (FIND_ROOT, "try:\n    open(os.path.join(ROOT, 'solutions/01-envelope-design/hidden.toml')).read()\n"
                                        "except Exception:\n    pass", ["tried to read", "hidden.toml", "outside its folder"]),
    "globs-solutions": (FIND_ROOT + "\nimport glob\nprint(glob.glob(os.path.join(ROOT, 'solutions', '*', '*.py')))", "",
                        ["outside its folder"]),
    "request-file": ("STOLEN = open('../request.json').read()", "", ["tried to read", "outside its folder"]),
    "ctypes": ("import ctypes", "", ["ctypes", "design.py line 1"]),
    "socket": ("", "import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=1)", ["tried to use the network"]),
    "kills-the-grader": ("", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)", ["tried to send a signal (os.kill)"]),
    "leaves-its-group": ("import os\nos.setsid()", "", ["leave its process group"]),
    "walks-the-heap": ("", "import gc\ngc.get_referrers(gc)", ["gc.get_referrers"]),
    "wrong-type-object": ("", "return object()", ["idempotency_key returned an object"]),
    "wrong-type-set": ("", "return {'a', 'b'}", ["idempotency_key returned frozenset, not a string"]),
}


@pytest.mark.parametrize("name", list(HOSTILE_1))
def test_each_hostile_kind_scores_0_with_its_reason(name, tmp_path):
    top, inside, words = HOSTILE_1[name]
    v = run_test("design.loads", _design(tmp_path, top, inside), {}, timeout=10)
    _zero(v, *words)


@pytest.mark.parametrize("where", ["import", "call"])
def test_an_endless_loop_is_stopped_at_the_time_limit(where, tmp_path):
    d = _design(tmp_path, top="while True:\n    pass") if where == "import" else _design(tmp_path, inside="while True:\n    pass")
    t0 = time.monotonic()
    v = run_test("design.loads", d, {}, timeout=2)
    assert time.monotonic() - t0 < 8
    _zero(v, "did not finish within 2 s")


def test_memory_that_grows_until_the_limit_scores_0(tmp_path, monkeypatch):
    monkeypatch.setitem(sandbox.LIMITS, "memory_mb", 512)  # the child gets the grader's limits
    v = run_test("design.loads", _design(tmp_path, inside="hoard = []\nwhile True:\n    hoard.append(bytearray(2 ** 20))"),
                 {}, timeout=20)
    _zero(v, "ran out of memory", "512 MB")


def test_a_missing_file_and_a_missing_function_score_0(tmp_path):
    d = _design(tmp_path)
    (d / "design.py").unlink()
    _zero(run_test("design.loads", d, {}, timeout=10), "design.py does not exist")
    (tmp_path / "sub2").mkdir()
    d2 = _design(tmp_path / "sub2")
    (d2 / "design.py").write_text((d2 / "design.py").read_text().replace("def payload(", "def payload_(", 1))
    _zero(run_test("design.loads", d2, {}, timeout=10), "lacks 'payload'")


def test_legitimate_imports_and_writes_in_its_own_folder_still_work(tmp_path):
    top = ("import hashlib, json, math, random, datetime, collections, itertools, re, dataclasses, typing, enum\n"
           "import functools, string, decimal, fractions, statistics, uuid, base64, zlib, tempfile, warnings\n"
           "from sim.design import Intent\nimport sim.digest\nfrom sim.intake import Verdict\nimport sim.runner\n"
           "open('notes.txt', 'w').write('mine')\ntempfile.NamedTemporaryFile().close()")
    inside = "import os\nos.write(1, b'not the protocol\\n')\nlen(open('notes.txt').read())"
    v = run_test("design.loads", _design(tmp_path, top, inside), {}, timeout=20)
    assert v["score"] == 1, v["message"]


def test_the_checkout_is_off_the_path_and_argv_of_student_code(tmp_path):
    inside = (FIND_ROOT + "\nimport sys\n"
              "raise ValueError(f'onpath={any(os.path.realpath(p) == ROOT for p in sys.path)} argv={sys.argv!r}')")
    v = run_test("design.loads", _design(tmp_path, inside=inside), {}, timeout=10)
    assert "onpath=False argv=['-c']" in v["message"], v["message"]


@pytest.mark.parametrize("path", ["a child per test", "warm judge processes"])
def test_hidden_arguments_are_never_on_disk(path, tmp_path):
    """While a test runs, no file of any judging folder (nor the submission's private copy) holds
    its arguments, whether the test runs in a child of its own or in the grader's warm pool."""
    from contextlib import ExitStack

    from sim.course.pool import JudgePool, private_copy

    secret = f"HIDDEN-CASE-{os.getpid()}-{time.time_ns()}"
    d = _design(tmp_path, inside="import time\ntime.sleep(0.02)")
    found, seen, done = [], set(), threading.Event()

    def watch():
        while not done.is_set():
            try:
                files = [*Path(tempfile.gettempdir()).glob("protolab-judge-*/**/*"),
                         *Path(tempfile.gettempdir()).glob("protolab-sub-*/**/*")]
            except OSError:  # a folder went away while it was listed
                continue
            for p in files:
                try:
                    if p.is_file():
                        seen.add(p.name)
                        if secret.encode() in p.read_bytes():
                            found.append(p)
                except OSError:
                    pass
            time.sleep(0.05)

    t = threading.Thread(target=watch)
    t.start()
    try:
        if path == "a child per test":
            v = run_test("design.loads", d, {"secret": secret}, timeout=20)
        else:
            with ExitStack() as stack, JudgePool(1) as pool:
                copy, problem = private_copy(d, stack)
                assert problem is None
                v = pool.run("design.loads", copy, {"secret": secret}, timeout=20)
    finally:
        done.set()
        t.join()
    assert v["score"] == 1, v["message"]
    assert "design.py" in seen  # the watch saw the judging folder while it judged
    assert not found


def test_a_host_left_alive_is_killed_by_pid_and_start_time():
    proc = subprocess.Popen(["sleep", "30"])
    try:
        start = sandbox._start_time(proc.pid)
        assert start != "-"
        sandbox._kill_leftovers([(proc.pid, "1")])  # another process that once had this pid: spared
        assert proc.poll() is None
        sandbox._kill_leftovers([(proc.pid, start)])
        assert proc.wait(timeout=5) == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait()


# ------------------------------------------------------------------------------ through evaluate, as graded


def test_the_model_answer_gets_full_marks_with_isolation():
    r = evaluate(get_exercise(1), SOLUTIONS / EX1, hidden=True, isolate=True, only=["clean-run", "keys-name-intents"])
    assert [x.passed for x in r.results] == [True, True] and r.score == r.max_score


def test_reading_the_solutions_scores_0_on_every_test_and_shows_none_of_them(tmp_path):
    d = _design(tmp_path, top=FIND_ROOT, inside="try:\n    print(open(os.path.join(ROOT, 'solutions/01-envelope-design/design.py')).read())\n"
                                                  "except PermissionError:\n    pass")
    r = evaluate(get_exercise(1), d, hidden=True, isolate=True, only=["clean-run", "keys-name-intents"])
    assert len(r.results) == 2 and r.score == 0
    for x in r.results:
        assert "tried to read" in x.message and "outside its folder" in x.message, x.message
        _clean({"message": x.message, "output": x.output})


def test_a_fork_in_a_hidden_test_scores_0(tmp_path):
    d = _design(tmp_path, inside="import os\ntry:\n    os.fork()\nexcept OSError:\n    pass")
    r = evaluate(get_exercise(1), d, hidden=True, isolate=True, only=["keys-name-intents"])
    assert r.score == 0 and "tried to start a process (os.fork)" in r.results[0].message


def _decide(tmp_path, inside):
    return _submission(tmp_path, EX3, "decide.py", inside=inside, fn="def decide(")


def _effects(tmp_path, inside):
    return _submission(tmp_path, EX5, "effects.py", inside=inside, fn="def effect_key(")


@pytest.mark.parametrize("inside,words", [
    (FIND_ROOT + "\ntry:\n    open(os.path.join(ROOT, 'solutions/03-deduplicating-consumer/hidden.toml')).read()\n"
                 "except OSError:\n    pass", ["tried to read", "hidden.toml", "outside its folder", "decide.py line"]),
    ("import os\nos._exit(0)", ["exit status 0", "during decide"]),
    ("return object()", ["decide returned an object"]),
], ids=["reads-hidden-tests", "os-exit", "wrong-type"])
def test_exercise_3_hostile_decide_scores_0(inside, words, tmp_path):
    r = evaluate(get_exercise(3), _decide(tmp_path, inside), isolate=True, only=["contract-keys"])
    assert r.score == 0
    for w in words:
        assert w in r.results[0].message, r.results[0].message
    _clean({"message": r.results[0].message, "output": r.results[0].output})


@pytest.mark.parametrize("inside,words", [
    ("hoard = bytearray(10 ** 10)", ["effect_key ran out of memory", "effects.py line"]),
    (f"open({str(OUTSIDE)!r}, 'w').write('x')", ["tried to write", "outside its folder"]),
], ids=["memory-bomb", "writes-outside"])
def test_exercise_5_hostile_effect_rule_scores_0(inside, words, tmp_path):
    v = run_test("effects.at_least_once", _effects(tmp_path, inside), {"policies": ["naive"], "faults": [["duplicate"]]},
                 timeout=10)
    _zero(v, *words)


# ------------------------------------------------------------------------------ root: an unprivileged user


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="the grader runs as root here")
def test_when_not_root_judged_code_runs_as_the_grader():
    assert sandbox.sandbox_user() is None


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root")
def test_root_with_no_usable_user_runs_as_is_with_a_note(monkeypatch):
    monkeypatch.setenv("PROTOLAB_SANDBOX_USER", "root")
    monkeypatch.setattr(sandbox, "_USER_DONE", False)
    monkeypatch.setattr(sandbox, "RUN_AS", None)
    monkeypatch.setattr(sandbox, "RUN_AS_NOTE", "")
    assert sandbox.sandbox_user() is None and "runs as root" in sandbox.RUN_AS_NOTE


def _python_for_sandbox_user(folder: Path) -> str | None:
    """This Python if the sandbox's user can run it; else a venv (in ``folder``, which that user
    can reach) of the system's Python of the same version that sees this one's site-packages (a
    pyenv under /root, say, is out of its reach)."""
    if sandbox.sandbox_user() is not None:
        return sandbox.PYTHON
    base = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if not base.is_file():
        return None
    venv = folder / "venv"
    if subprocess.run([str(base), "-m", "venv", "--without-pip", str(venv)], capture_output=True).returncode != 0:
        return None
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "protolab-test.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return str(venv / "bin" / "python")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root")
def test_root_runs_judged_code_as_an_unprivileged_user_with_no_processes(tmp_path, monkeypatch):
    reachable = Path(tempfile.mkdtemp(prefix="protolab-test-venv-"))  # pytest's tmp_path is root's alone
    os.chmod(reachable, 0o755)
    try:
        _as_the_sandbox_user(reachable, tmp_path, monkeypatch)
    finally:
        shutil.rmtree(reachable, ignore_errors=True)


def _as_the_sandbox_user(reachable: Path, tmp_path: Path, monkeypatch) -> None:
    python = _python_for_sandbox_user(reachable)
    if python is None:
        pytest.skip("no Python the sandbox's user can run")
    monkeypatch.setattr(sandbox, "PYTHON", python)
    monkeypatch.setattr(sandbox, "_USER_DONE", False)
    monkeypatch.setattr(sandbox, "RUN_AS", None)
    monkeypatch.setattr(sandbox, "RUN_AS_NOTE", "")
    user = sandbox.sandbox_user()
    if user is None and "cannot run" in sandbox.RUN_AS_NOTE:  # this install sits where that user cannot read
        pytest.skip(sandbox.RUN_AS_NOTE)
    assert user is not None and user[0] != 0, sandbox.RUN_AS_NOTE
    cases = {
        "who": ("import os\nraise ValueError(f'uid={os.getuid()}')", f"uid={user[0]}"),
        # RLIMIT_NPROC is 0 for the host: the kernel refuses even a thread, which no audit event sees
        "thread": ("import threading\nthreading.Thread(target=print).start()", "can't start new thread"),
        "reads": (FIND_ROOT + "\nopen(os.path.join(ROOT, 'solutions/01-envelope-design/design.py')).read()",
                  "outside its folder"),
    }
    for name, (inside, word) in cases.items():
        (tmp_path / name).mkdir()
        v = run_test("design.loads", _design(tmp_path / name, inside=inside), {}, timeout=20)
        assert v["score"] == 0 and word in v["message"], (name, v["message"])
    (tmp_path / "good").mkdir()
    v = run_test("design.loads", _design(tmp_path / "good"), {}, timeout=20)
    assert v["score"] == 1, v["message"]
