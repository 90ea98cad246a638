"""Hostile submissions through the production path: ``protolab grade`` on a folder of submissions
(``grade_all``: warm judge processes, the student's code in host processes started by
``sandbox.start_host``, in bubblewrap where it works, on the fallback where it does not).

The batch is a class of exercise 1: the model answer and every hostile kind of the corpus
(``corpus.HOSTILE_CODE``: SQLite ATTACH, VACUUM INTO and load_extension, a run database elsewhere
by its path, ctypes, the grader's /proc, signals to the parent and the group, a listening socket,
links planted for the grader, processes, floods, memory, exits, ...) plus a few more written here.
Each is the model answer with the hostile part added, so only that part can cost points. Graded
from a copy of the checkout (the tree the grader runs from, hashed before and after, solutions/
included) with a run database placed elsewhere (hashed too): the batch completes, the model answer
gets full marks, each hostile submission 0 with its reason, nothing outside the submissions'
folders changes and no process of the batch survives it. Run under bubblewrap (when it works here)
and forced onto the fallback (``PROTOLAB_SANDBOX=fallback``): both must hold.

The operating-system wall is also tested alone (no audit hooks): what the hooks cannot see
(SQLite opening a file in C) still meets a read-only system and a private /tmp.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from sim.course import sandbox
from sim.course.catalog import get_exercise, use_course
from sim.course.corpus import build_corpus
from sim.course.kit import copy_project

ROOT = Path(__file__).resolve().parents[1]
EX1 = "01-envelope-design"
KEY_DEF = "def idempotency_key(intent"
# the checkout, as student code can work it out from the sim package it imports
FIND_ROOT = "import os, sim\nROOT = os.path.dirname(os.path.dirname(os.path.realpath(sim.__file__)))"
# files hostile code tries to make outside its folder (none may exist afterwards)
MARKERS = ["/tmp/protolab-hostile-was-here", "/tmp/protolab-hostile-attach.db", "/tmp/protolab-hostile-vacuum.db",
           "/tmp/protolab-hostile-outside"]

# what each corpus kind's messages must say (every test of the submission: 0 with this reason; a
# tuple: any one of its words)
CORPUS_WORDS = {
    "syntax-error": ["SyntaxError"],
    "raises-on-import": ["does not import", "RuntimeError"],
    "exit-on-import": ["sys.exit(3)"],
    "flood-on-import": ["printed more than"],
    "os-exit-in-call": ["exit status 0"],
    "sys-exit-in-call": ["sys.exit(0)"],
    "flood-in-call": ["printed more than"],
    "memory-bomb": ["ran out of memory"],
    "memory-creep": [("memory", "did not answer within")],  # out of memory, or out of time on a busy machine
    "forks": ["tried to start a process (os.fork)"],
    "spawns": ["tried to start a process"],
    "writes-outside": ["tried to write", "outside its folder"],
    "reads-solutions": ["tried to read", "outside its folder"],
    "wrong-type": ["returned an object"],
    "sqlite-attach": ["tried to open a SQLite database", ":memory:"],
    "sqlite-vacuum-into": ["tried to open a SQLite database", ":memory:"],
    "sqlite-load-extension": ["tried to open a SQLite database"],
    "sqlite-run-database": ["tried to open a SQLite database", "run.db"],
    "ctypes": ["ctypes"],
    "reads-grader-environ": ["tried to read", "environ", "outside its folder"],
    "reads-grader-cmdline": ["tried to read", "cmdline", "outside its folder"],
    "lists-grader-fds": ["tried to list", "/fd", "outside its folder"],
    "kills-parent": ["tried to send a signal (os.kill)"],
    "kills-group": ["tried to send a signal (os.killpg)"],
    "listens": ["tried to use the network"],
    "link-replaces-file": ["tried to make a link (os.symlink)"],
    "plants-link": ["tried to make a link (os.symlink)"],
    "missing-function": ["E_PLUGIN_INCOMPLETE"],
    "link-to-solution": ["symbolic link"],
    "no-file": ["no design.py"],
    "tkinter-tcl": ["import tkinter, which the sandbox does not allow"],
    "forges-on-the-pipe": ["wrote on the grader's private answer pipe", "while importing it"],
}
# more kinds, written here: (code at the top of design.py, code at the start of idempotency_key, words)
EXTRA = {
    "os-exit-import": ("import os\nos._exit(7)", "", ["exit status 7", "while importing it"]),
    "writes-into-checkout": (FIND_ROOT, "open(os.path.join(ROOT, 'protolab-hostile-was-here'), 'w').write('x')",
                             ["tried to write", "outside its folder"]),
    "reads-hidden-tests-and-hides-it": (FIND_ROOT, "try:\n    open(os.path.join(ROOT, 'solutions/01-envelope-design/"
                                                   "hidden.toml')).read()\nexcept Exception:\n    pass",
                                        ["tried to read", "hidden.toml", "outside its folder"]),
    "globs-solutions": (FIND_ROOT + "\nimport glob\nprint(glob.glob(os.path.join(ROOT, 'solutions', '*', '*.py')))", "",
                        ["outside its folder"]),
    "request-file": ("STOLEN = open('../request.json').read()", "", ["tried to read", "outside its folder"]),
    "leaves-its-group": ("import os\nos.setsid()", "", ["leave its process group"]),
    "walks-the-heap": ("", "import gc\ngc.get_referrers(gc)", ["gc.get_referrers"]),
    "connects-out": ("", "import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=1)", ["tried to use the network"]),
    "sqlite-by-uri": ("", "import sqlite3\nsqlite3.connect('file:/tmp/protolab-hostile-outside?mode=rwc', uri=True)",
                      ["tried to open a SQLite database"]),
}
# a quick batch (not marked slow): the kinds the operating-system wall exists for
QUICK = ["sqlite-attach", "sqlite-vacuum-into", "sqlite-run-database", "kills-parent", "plants-link",
         "link-replaces-file", "reads-grader-environ", "ctypes", "tkinter-tcl", "forges-on-the-pipe"]


def fallback_runs_here() -> bool:
    """Whether the fallback can run students' code on this machine: not as root, or as root with an
    unprivileged user that can run this Python (else it refuses: never as root)."""
    return not hasattr(os, "geteuid") or os.geteuid() != 0 or sandbox.sandbox_user() is not None


NO_FALLBACK_HERE = ("the grader is root and no unprivileged user can run this Python: the fallback refuses to run "
                    "students' code here (test_fail_closed.py holds it to that)")


# ------------------------------------------------------------------------------------- the batch


def _tree(root: Path) -> dict:
    """Every file under ``root`` (links included, as links) -> a hash of what it is."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [n for n in dirnames if n != "__pycache__"]
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "link " + os.readlink(p)
            elif p.is_file():
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
            elif p.is_dir():
                out[rel] = "dir"
    return out


def _survivors(*needles: str) -> list[str]:
    """Processes whose command line names any of ``needles``."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if any(n in cmd for n in needles):
            found.append(f"{pid}: {cmd[:300]}")
    return found


def _with_extra(model: str, top: str, inside: str) -> str:
    src = model
    if inside:
        i = src.index(KEY_DEF)
        j = src.index(":\n", src.index(")", i)) + 2
        src = src[:j] + "".join("    " + line + "\n" for line in inside.splitlines()) + src[j:]
    if top:  # after a ``from __future__`` line, if any (it must stay first)
        k = src.index("\n", src.index("from __future__")) + 1 if "from __future__" in src else 0
        src = src[:k] + top + "\n" + src[k:]
    return src


def _class(tmp: Path, kinds: list[str] | None, extra: dict) -> tuple[Path, Path, Path]:
    """``(course, class, run database)``: a copy of the checkout with exercise 1's solutions, a class
    of the model answer and the hostile ``kinds`` (None: every corpus kind), and a run database
    elsewhere that hostile code goes for."""
    course = tmp / "course"
    copy_project(ROOT, course, solutions=[EX1])
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    run_db = elsewhere / "run.db"
    done = subprocess.run([sys.executable, "-m", "sim", "run", "--db", str(run_db)], cwd=course, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    klass = tmp / "class"
    ex = get_exercise(1)
    use_course(course)
    try:
        entries = build_corpus(ex, klass, slow=False, run_db=run_db)
    finally:
        use_course(None)
    keep = {"solution"} | {f"hostile-{k}" for k in (kinds if kinds is not None else CORPUS_WORDS)}
    for e in entries:
        if e.name not in keep:
            shutil.rmtree(klass / e.name) if (klass / e.name).is_dir() else (klass / e.name).unlink()
    model = (course / "solutions" / EX1 / "design.py").read_text(encoding="utf-8")
    for name, (top, inside, _words) in extra.items():
        d = klass / f"extra-{name}"
        d.mkdir()
        (d / "design.py").write_text(_with_extra(model, top, inside), encoding="utf-8")
    return course, klass, run_db


def _grade(course: Path, klass: Path, *, fallback: bool, json_out: bool = True) -> subprocess.CompletedProcess:
    """``protolab grade 1 CLASS`` as an instructor runs it, from the course's own copy of sim."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PROTOLAB_"))}
    if fallback:
        env["PROTOLAB_SANDBOX"] = "fallback"
    args = [sys.executable, "-m", "sim", "grade", "1", str(klass), "-j", "2"] + (["--json"] if json_out else [])
    if fallback:  # without an OS sandbox grade refuses unless the instructor says --sandbox none
        args += ["--sandbox", "none"]
    return subprocess.run(args, cwd=course, env=env, capture_output=True, text=True, timeout=1800,
                          start_new_session=True)


def untouched(course: Path, klass: Path, run_db: Path) -> tuple:
    """What a batch must leave as it was: the course, the class and the run database hostile code goes for."""
    return _tree(course), _tree(klass), hashlib.sha256(run_db.read_bytes()).hexdigest()


def judged_whole(done: subprocess.CompletedProcess, klass: Path, extra: dict) -> set[str]:
    """A graded batch (``grade --json``) completed: a row for everyone, the model answer full marks, each
    hostile one 0 on every test with its reason; the sandboxes its rows name."""
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    rows = {r["student"]: r for r in json.loads(done.stdout)}
    assert sorted(rows) == sorted(p.name for p in klass.iterdir())
    sol = rows["solution"]
    assert sol["score"] == sol["max_score"] > 0, [t["message"] for t in sol["tests"] if not t["passed"]]
    words = {**{f"hostile-{k}": w for k, w in CORPUS_WORDS.items()}, **{f"extra-{k}": w for k, (_t, _i, w) in extra.items()}}
    wrong = []
    for name, row in rows.items():
        if name == "solution":
            continue
        messages = [t["message"] for t in row["tests"]]
        if row["score"] != 0 or any(t["points"] for t in row["tests"]):
            wrong.append((name, row["score"], [m[:120] for m, t in zip(messages, row["tests"]) if t["points"]][:2]))
            continue
        for m, t in zip(messages, row["tests"]):
            if not m.strip() or "Traceback" in m or "grader error" in m or t.get("grader_error") or not all(
                    any(x in m for x in ((w,) if isinstance(w, str) else w)) for w in words[name]):
                wrong.append((name, m[:300]))
                break
    assert not wrong, wrong
    return {r["sandbox"] for r in rows.values()}


def _check_batch(tmp: Path, kinds: list[str] | None, extra: dict, *, fallback: bool) -> None:
    if not fallback and sandbox.box().kind != "bubblewrap":
        pytest.skip(f"no bubblewrap here ({sandbox.describe()}); the fallback case covers this machine")
    if fallback and not fallback_runs_here():
        pytest.skip(NO_FALLBACK_HERE)
    course, klass, run_db = _class(tmp, kinds, extra)
    for m in MARKERS:
        Path(m).unlink(missing_ok=True)
    before = untouched(course, klass, run_db)
    said = judged_whole(_grade(course, klass, fallback=fallback), klass, extra)
    # which sandbox judged it, on every report
    assert len(said) == 1, said
    assert said.pop().startswith("fallback: PROTOLAB_SANDBOX=fallback" if fallback else "bubblewrap")
    # nothing outside the submissions' folders changed; no process of the batch is left
    assert untouched(course, klass, run_db) == before
    assert [m for m in MARKERS if os.path.exists(m)] == []
    assert _survivors(str(course), str(klass)) == []


@pytest.mark.slow  # fallback: 2 s or more on 2 cores (2026-12-05); bubblewrap: over 25 s at load 6-10 (2026-12-07)
@pytest.mark.parametrize("fallback", [False, True], ids=["bubblewrap", "fallback"])
def test_hostile_code_the_os_wall_is_for_scores_0_and_touches_nothing(fallback, tmp_path):
    _check_batch(tmp_path, QUICK, {}, fallback=fallback)


@pytest.mark.slow
@pytest.mark.parametrize("fallback", [False, True], ids=["bubblewrap", "fallback"])
def test_every_hostile_kind_in_one_batch_scores_0_with_its_reason_and_nothing_escapes(fallback, tmp_path):
    _check_batch(tmp_path, None, EXTRA, fallback=fallback)


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
def test_grade_says_which_sandbox_judged_the_class(tmp_path):
    course, klass, _run_db = _class(tmp_path, [], {})
    done = _grade(course, klass, fallback=False, json_out=False)
    assert done.returncode == 0, done.stderr
    assert f"sandbox: {sandbox.describe()}" in " ".join(done.stdout.split())
    done = _grade(course, klass, fallback=True, json_out=False)
    if not fallback_runs_here():  # root, no user to drop to: refused, never run as root
        assert done.returncode == 2 and done.stderr.startswith("error: E_NO_SANDBOX: ") and "root" in done.stderr
        return
    assert done.returncode == 0, done.stderr
    out = " ".join(done.stdout.split())
    assert "sandbox: fallback: PROTOLAB_SANDBOX=fallback" in out and "install bubblewrap" in out
    assert "warning: graded on the fallback sandbox" in done.stderr


# ------------------------------------------------------------------------------ loops


@pytest.mark.slow_cases("import", "call")  # measured at 2 s or more on 2 cores
@pytest.mark.parametrize("where", ["import", "call"])
def test_a_looping_submission_is_reported_once_for_the_whole_submission_not_per_test(where, tmp_path, monkeypatch):
    """``protolab grade`` on a folder holding one looping submission: every test 0 with the reason,
    the student's code started once for all its tests (its hosts: one module, two hash seeds) and
    no judge process restarted: the loop costs the submission's time once (a call is held to 5 s,
    an import to 10 s, all of a submission's code to 20 s), not once per test."""
    import contextlib
    import io

    from sim.cli import main
    from sim.course import pool as pool_mod

    pools, hosts = [], []
    real_init, real_watch = pool_mod.JudgePool.__init__, pool_mod._Worker.watch

    def init(self, *a, **k):
        real_init(self, *a, **k)
        pools.append(self)

    def watch(self, pid):
        hosts.append(pid)
        return real_watch(self, pid)

    monkeypatch.setattr(pool_mod.JudgePool, "__init__", init)
    monkeypatch.setattr(pool_mod._Worker, "watch", watch)
    model = (ROOT / "solutions" / EX1 / "design.py").read_text()
    looper = tmp_path / "class" / "looper"
    looper.mkdir(parents=True)
    loop = "while True:\n    pass"
    (looper / "design.py").write_text(_with_extra(model, loop, "") if where == "import" else _with_extra(model, "", loop))
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        main(["grade", "1", str(tmp_path / "class"), "--json", "-j", "1"])
    assert done.value.code in (0, None)
    row = json.loads(out.getvalue())[0]
    tests = row["tests"]
    assert row["score"] == 0 and len(tests) > 1
    limit = "did not answer within 10 s while importing it" if where == "import" else "did not answer within 5 s"
    assert all(limit in t["message"] and "an endless loop, or far too slow" in t["message"] for t in tests), \
        [t["message"] for t in tests]
    assert len(hosts) == 2, hosts  # started once for the whole submission (two hosts: hash seeds 1 and 2)
    assert sum(p.started for p in pools) == 1  # one judge process, never restarted: fewer restarts than tests


# ------------------------------------------------------------------------------ the OS wall alone

needs_bwrap = pytest.mark.skipif(sandbox.box().kind != "bubblewrap", reason=f"no bubblewrap here ({sandbox.describe()})")


def _in_box(folder: Path, code: str) -> subprocess.CompletedProcess:
    """``code`` in a host's box, with no audit hook: the operating-system wall alone."""
    argv, env, cwd, fds = sandbox.box_command(folder, code, main=str(folder / "design.py"))
    try:
        return subprocess.run(argv, env=env, cwd=cwd, pass_fds=fds, capture_output=True, text=True, timeout=120)
    finally:
        for fd in fds:
            os.close(fd)


@pytest.fixture
def bait(tmp_path):
    """A folder for the box (a design.py in it), and a run database elsewhere."""
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "design.py").write_text("x = 1\n")
    db = tmp_path / "elsewhere" / "run.db"
    db.parent.mkdir()
    import sqlite3

    con = sqlite3.connect(db)
    con.execute("CREATE TABLE effects (k TEXT)")
    con.execute("INSERT INTO effects VALUES ('publish:R-1')")
    con.commit()
    con.close()
    return folder, db


@needs_bwrap
def test_sqlite_reaching_out_from_memory_meets_a_private_tmp_and_a_read_only_system(bait):
    folder, db = bait
    code = (
        "import sqlite3, os\n"
        "c = sqlite3.connect(':memory:')\n"
        "c.execute(\"ATTACH DATABASE '/tmp/protolab-wall-attach.db' AS a\"); c.execute('CREATE TABLE a.t (x)')\n"
        "c.execute('CREATE TABLE t (x)'); c.execute(\"VACUUM INTO '/tmp/protolab-wall-vacuum.db'\")\n"
        "print('private tmp', sorted(os.listdir('/tmp')))\n"
        f"print('run db seen', os.path.exists({str(db)!r}))\n"
        f"print('solutions seen', os.path.exists({str(ROOT / 'solutions')!r}))\n"
        f"print('checkout', sorted(os.listdir({str(ROOT)!r})))\n"
        "for target in ('/usr/protolab-wall', '/etc/protolab-wall'):\n"
        "    try:\n"
        "        c.execute(f\"ATTACH DATABASE '{target}' AS b\"); c.execute('CREATE TABLE b.t (x)')\n"
        "        print('wrote', target)\n"
        "    except sqlite3.Error as e:\n"
        "        print('refused', target)\n"
        "        c = sqlite3.connect(':memory:')\n"
    )
    done = _in_box(folder, code)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    seen = set(eval(out.split("private tmp ")[1].splitlines()[0]))  # noqa: S307 - our own output
    # the box's /tmp: what SQLite made there, and the folders leading to what the box binds (the
    # interpreter, the submission's copy); nothing of the real /tmp
    bound = {Path(p).resolve().relative_to("/tmp").parts[0] for p in (sys.prefix, folder)
             if Path(p).resolve().is_relative_to("/tmp")}
    assert {"protolab-wall-attach.db", "protolab-wall-vacuum.db"} <= seen <= bound | {
        "protolab-wall-attach.db", "protolab-wall-vacuum.db"}, seen
    # of the checkout, the box shows the sim package, and the interpreter's environment when it lives
    # there (CI's .venv, bound read-only as the installation's packages); never solutions/ or the tests
    in_checkout = {"sim"} | {Path(sys.prefix).resolve().relative_to(ROOT).parts[0]
                             for _ in [0] if Path(sys.prefix).resolve().is_relative_to(ROOT)}
    assert "run db seen False" in out and "solutions seen False" in out, out
    assert f"checkout {sorted(in_checkout)}" in out, out
    assert "refused /usr/protolab-wall" in out and "refused /etc/protolab-wall" in out
    for p in ("/tmp/protolab-wall-attach.db", "/tmp/protolab-wall-vacuum.db", "/usr/protolab-wall"):
        assert not os.path.exists(p)


@needs_bwrap
def test_the_box_has_no_network_its_own_processes_an_unprivileged_uid_and_a_private_copy(bait):
    folder, _db = bait
    code = (
        "import os, socket\n"
        "print('uid', os.getuid(), 'caps', open('/proc/self/status').read().split('CapEff:')[1].split()[0])\n"
        "print('pids', sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
        "print('ifaces', sorted(n for _i, n in socket.if_nameindex()))\n"
        "try:\n"
        "    socket.create_connection(('1.1.1.1', 53), timeout=2); print('net yes')\n"
        "except OSError:\n"
        "    print('net no')\n"
        "open('design.py', 'w').write('changed'); os.symlink('/etc/passwd', 'link'); print('wrote its copy')\n"
        "print('env', sorted(os.environ))\n"
    )
    done = _in_box(folder, code)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    uid = int(out.split("uid ")[1].split()[0])
    assert uid != 0 and "caps 0000000000000000" in out
    assert "pids [1, 2]" in out  # bwrap's init and this process, nothing of the grader's
    assert "ifaces ['lo']" in out and "net no" in out
    assert "wrote its copy" in out
    assert (folder / "design.py").read_text() == "x = 1\n" and not (folder / "link").exists()  # the copy was its own
    env = eval(out.split("env ")[1].splitlines()[0])  # noqa: S307 - our own output
    assert "PROTOLAB_DROP_TO" not in env and not any(k.startswith(("SSH", "XDG", "VIRTUAL_ENV")) for k in env)


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
@needs_bwrap
def test_a_host_killed_for_a_loop_takes_its_whole_sandbox_with_it(bait):
    """A host stopped at its time limit is gone, with every process in its box, before the judge
    goes on (no process of it is left for a moment: the judge waits on the sandbox's own end)."""
    from sim.course.remote import RemoteModule

    folder, _db = bait
    (folder / "design.py").write_text("while True:\n    pass\n")
    mark = f"protolab-loop-{os.getpid()}"
    (folder / f"{mark}.txt").write_text("x")  # copied into the box: its bwrap's command line names it
    from sim.errors import InputError

    with pytest.raises(InputError, match="did not answer within"):
        RemoteModule(folder / "design.py", processes=1)
    assert _survivors(mark) == []


def test_a_submission_the_sandbox_cannot_start_is_a_grader_error_not_the_students(monkeypatch, tmp_path):
    """bwrap or the interpreter failing before the student's file is imported is the grader's
    trouble: not gradable, never 'your code ...'."""
    from sim.course.evaluate import evaluate

    sandbox.box()  # probed with the real interpreter (once per process), then the hosts' is broken
    d = tmp_path / "sub"
    d.mkdir()
    shutil.copy(ROOT / "solutions" / EX1 / "design.py", d / "design.py")
    monkeypatch.setattr(sandbox, "PYTHON", str(tmp_path / "no-such-python"))
    r = evaluate(get_exercise(1), d, isolate=False, only=[get_exercise(1).tests[0].name])
    t = r.results[0]
    assert t.points == 0 and t.grader_error and "your code" not in t.message, (t.message, t.grader_error)


# ------------------------------------------------------------------------------ root and the probe


def test_the_probe_says_why_when_bubblewrap_is_missing(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("PROTOLAB_SANDBOX", raising=False)
    b = sandbox._probe()
    assert b.kind == "fallback" and "not installed" in b.describe() and b.describe().startswith("fallback: ")
    monkeypatch.setenv("PROTOLAB_SANDBOX", "fallback")
    assert sandbox._probe().describe() == "fallback: PROTOLAB_SANDBOX=fallback"


def test_the_probe_falls_back_when_namespaces_are_refused_as_in_some_containers(tmp_path, monkeypatch):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: Creating new namespace failed: Operation not permitted' >&2\n"
                                "exit 1\n")
    (fake / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:/usr/bin:/bin")
    monkeypatch.delenv("PROTOLAB_SANDBOX", raising=False)
    said = sandbox._probe().describe()
    assert said.startswith("fallback: bubblewrap cannot make its sandbox here") and "Operation not permitted" in said


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="the grader runs as root here")
def test_when_not_root_judge_processes_run_as_the_grader():
    assert sandbox.sandbox_user() is None


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root")
def test_root_with_no_usable_user_runs_judges_as_is_with_a_note(monkeypatch):
    monkeypatch.setenv("PROTOLAB_SANDBOX_USER", "root")
    monkeypatch.setattr(sandbox, "_USER_DONE", False)
    monkeypatch.setattr(sandbox, "RUN_AS", None)
    monkeypatch.setattr(sandbox, "RUN_AS_NOTE", "")
    assert sandbox.sandbox_user() is None and "runs as root" in sandbox.RUN_AS_NOTE


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root")
def test_as_root_the_students_code_runs_as_an_unprivileged_user_on_either_sandbox(tmp_path, monkeypatch):
    """Under bubblewrap and on the fallback alike, root's grader never runs student code as root:
    the host's uid, its threads (RLIMIT_NPROC 0: the kernel refuses even a thread) and its reads."""
    from sim.course.evaluate import evaluate

    if sandbox.box().kind != "bubblewrap" and sandbox.sandbox_user() is None:
        pytest.skip(f"on the fallback, and {sandbox.RUN_AS_NOTE}")
    ex = get_exercise(1)
    first = ex.tests[0].name
    cases = {
        "who": ("import os\nraise ValueError(f'uid={os.getuid()}')", "uid="),
        "thread": ("import threading\nthreading.Thread(target=print).start()", "thread"),
    }
    reachable = Path(tempfile.mkdtemp(prefix="protolab-test-root-"))
    os.chmod(reachable, 0o755)
    try:
        for name, (inside, word) in cases.items():
            d = reachable / name
            d.mkdir()
            model = (ROOT / "solutions" / EX1 / "design.py").read_text()
            (d / "design.py").write_text(_with_extra(model, "", inside))
            r = evaluate(ex, d, isolate=True, only=[first])
            msg = r.results[0].message
            assert r.score == 0 and word in msg, (name, msg)
            if name == "who":
                assert "uid=0" not in msg, msg
    finally:
        shutil.rmtree(reachable, ignore_errors=True)
