"""The sandbox's walls where they matter: the grader run by an unprivileged user (issue 48, part 6).

An instructor grades as themselves, not as root: bubblewrap then runs unprivileged (a user namespace,
``--unshare-user``, uid 65534 inside), and the grader's files (the checkout, its interpreter, the
class's folders) belong to the very user the box maps the student's code to. Only the box keeps the
student's code off them. These tests run the grader as an unprivileged user (``nobody``, through
``setpriv`` when the suite is root; as is when it is not) on files that user owns, and check as that
user:

* bubblewrap works unprivileged here and is the box (``describe() == "bubblewrap"``, no root branch);
  where the kernel refuses user namespaces (made real here: the grader inside a user namespace made
  with ``--disable-userns``), the grader says so and fails closed, and ``--sandbox none`` grades on
  the fallback with the audit hooks alone, hostile submissions still 0;
* the binds are read-only: code in the box (no audit hook: the operating-system wall alone) cannot
  write the checkout, the interpreter's packages, the submission's own folder (only its private
  copy) or the grader's temporary folder, although the user owns all of them;
* killing a judge (SIGKILL to that one process, not its group) ends its box: bubblewrap's
  ``--die-with-parent``, waited for on a pidfd, never timed;
* ``protolab grade`` as that user: the model answer full marks, each hostile submission 0 with its
  reason and no grader error, nothing outside the submissions changed, no process left;
* a root grader whose interpreter the sandbox's user can run: bwrap is started as that user
  (setpriv), judges run as it, and the fallback's hosts drop to it (never root).

The suite's own interpreter is often one other users cannot enter (a pyenv under ``/root``), so the
tests make one they can: a venv of a system Python of the same version (Debian's
``/usr/bin/python3.11``) in a world-readable folder, whose ``.pth`` file names this environment's
site-packages (or a hard-linked copy of them when those cannot be read by the user): offline, about
a second.
"""

from __future__ import annotations

import json
import os
import pwd
import select
import shutil
import signal
import site
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_sandbox_hostile import _tree  # (every file under a folder -> a hash of what it is)

ROOT = Path(__file__).resolve().parents[1]
EX1 = "01-envelope-design"
USER = os.environ.get("PROTOLAB_TEST_UNPRIVILEGED_USER", "nobody")
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
VERSION = f"{sys.version_info[0]}.{sys.version_info[1]}"
DEPS = "import typer, rich, sqlite_utils, msgspec, tomli_w, rfc8785, faker"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox's walls are Linux's")


def _chown(root: Path, uid: int, gid: int) -> None:
    os.chown(root, uid, gid)
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            os.chown(os.path.join(dirpath, n), uid, gid, follow_symlinks=False)


def _reachable(path: str, *, uid: int) -> bool:
    """Whether ``uid`` may reach ``path`` by its permission bits alone: every folder on the way
    searchable (and ``path`` readable) by others or by its owner ``uid``. Checked as bits, not only by
    trying: on some kernels exec walks a folder the user cannot enter (/root), the rest then fails."""
    import stat

    p = os.path.realpath(path)
    chain = [p] + [str(a) for a in Path(p).parents]
    for i, d in enumerate(chain):
        try:
            st = os.stat(d)
        except OSError:
            return False
        need = stat.S_IROTH if i == 0 else stat.S_IXOTH
        own = stat.S_IRUSR if i == 0 else stat.S_IXUSR
        if not (st.st_mode & need or (st.st_uid == uid and st.st_mode & own)):
            return False
    return True


def _link_or_copy(src, dst):
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


class World(SimpleNamespace):
    """A world-readable interpreter and folders the unprivileged user owns, and how to run as it."""

    def run(self, argv, *, cwd, env=None, timeout=600, wrap=(), **kw) -> subprocess.CompletedProcess:
        return subprocess.run([*self.prefix, *wrap, *argv], cwd=cwd, env={**self.env, **(env or {})},
                              capture_output=True, text=True, timeout=timeout, **kw)

    def popen(self, argv, *, cwd, env=None, **kw) -> subprocess.Popen:
        return subprocess.Popen([*self.prefix, *argv], cwd=cwd, env={**self.env, **(env or {})}, **kw)

    def own(self, path: Path) -> None:
        if IS_ROOT:
            _chown(path, self.uid, self.gid)

    def course(self, name: str) -> Path:
        """A copy of the checkout (exercise 1's solutions with it), owned by the user."""
        from sim.course.kit import copy_project

        course = self.top / name
        copy_project(ROOT, course, solutions=[EX1])
        self.own(course)
        return course


def _world(top: Path) -> World:
    if IS_ROOT:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("the suite is root and there is no setpriv (util-linux) to run the grader as an unprivileged user")
        try:
            pw = pwd.getpwnam(USER)
        except KeyError:
            pytest.skip(f"the suite is root and there is no user {USER!r} to run the grader as")
        uid, gid = pw.pw_uid, pw.pw_gid
        prefix = [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]
    else:
        uid, gid, prefix = os.getuid(), os.getgid(), []
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(top / "home"), "LANG": "C.UTF-8",
           "TMPDIR": str(top / "tmp")}
    (top / "home").mkdir()
    (top / "tmp").mkdir()
    w = World(top=top, uid=uid, gid=gid, prefix=prefix, env=env)
    # an interpreter of this version the user can run: this one's base, else the system's
    tried = []
    base = None
    for cand in dict.fromkeys([os.path.realpath(getattr(sys, "_base_executable", sys.executable)),
                               f"/usr/bin/python{VERSION}", f"/usr/local/bin/python{VERSION}"]):
        if not os.path.exists(cand):
            continue
        tried.append(cand)
        if not _reachable(cand, uid=uid):
            continue
        said = w.run([cand, "-I", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], cwd="/", timeout=60)
        if said.returncode == 0 and said.stdout.strip() == VERSION:
            base = cand
            break
    if base is None:
        pytest.skip(f"no Python {VERSION} that user {USER!r} can run (tried {', '.join(tried) or 'none found'}; this "
                    f"one, {os.path.realpath(sys.executable)}, lies where that user cannot enter): install Debian's "
                    f"python{VERSION} to run these tests")
    venv = top / "venv"
    made = subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], capture_output=True, text=True, timeout=120)
    if made.returncode != 0:
        pytest.skip(f"{base} -m venv failed (no venv module: Debian's python{VERSION}-venv): {made.stderr.strip()[-200:]}")
    python = str(venv / "bin" / "python")
    packages = Path(subprocess.run([python, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip())
    ours = [os.path.realpath(p) for p in site.getsitepackages() if os.path.isdir(p)]
    (packages / "protolab-deps.pth").write_text("".join(p + "\n" for p in ours))
    w.own(top)
    os.chmod(top, 0o755)
    probe = w.run([python, "-I", "-c", DEPS], cwd="/", timeout=120)
    if probe.returncode != 0 or not all(_reachable(p, uid=uid) for p in ours):  # this environment's packages are out of the user's reach: a hard-linked copy
        copies = []
        for i, p in enumerate(ours):
            dest = top / "deps" / str(i)
            shutil.copytree(p, dest, copy_function=_link_or_copy, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "_editable_impl_*", "__editable__*"))
            copies.append(str(dest))
        (packages / "protolab-deps.pth").write_text("".join(p + "\n" for p in copies))
        for d in copies:
            for dirpath, _dirnames, _filenames in os.walk(d):
                os.chmod(dirpath, 0o755)
        probe = w.run([python, "-I", "-c", DEPS], cwd="/", timeout=120)
        if probe.returncode != 0:
            pytest.skip(f"user {USER!r} cannot import the project's dependencies in {python}: "
                        f"{(probe.stderr.strip().splitlines() or ['?'])[-1]}")
    w.python = python
    return w


@pytest.fixture(scope="module")
def world():
    top = Path(tempfile.mkdtemp(prefix="protolab-unprivileged-"))
    os.chmod(top, 0o755)
    try:
        yield _world(top)
    finally:
        shutil.rmtree(top, ignore_errors=True)


_BOX = ("import json, os, sys\nfrom sim.course import sandbox\nb = sandbox.box()\n"
        "print(json.dumps({'kind': b.kind, 'describe': b.describe(), 'as_user': b.as_user, 'drop_to': b.drop_to, "
        "'run_as': sandbox.sandbox_user(), 'uid': os.getuid()}))\n")


def _userns(world: World, wrap=()) -> str | None:
    """None when bubblewrap makes a user namespace as the user here (with ``wrap`` around it); else why not."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap is not installed"
    done = world.run([bwrap, "--unshare-all", "--unshare-user", "--ro-bind", "/", "/", "true"], cwd="/", wrap=wrap,
                     timeout=60)
    return None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["?"])[-1]


def _no_userns() -> list[str]:
    """A wrapper in which the kernel refuses the grader any user namespace (what some Docker hosts do):
    the grader runs in a user namespace of its own made with ``--disable-userns``."""
    return [shutil.which("bwrap") or "bwrap", "--unshare-user", "--disable-userns", "--dev-bind", "/", "/", "--"]


def _needs_bwrap(world: World) -> None:
    why = _userns(world)
    if why is not None:
        pytest.skip(f"bubblewrap cannot make a user namespace as {USER!r} here ({why}); the fallback tests below "
                    "cover this machine")


# ------------------------------------------------------------------------------- which box


def test_as_an_unprivileged_user_bubblewrap_itself_is_the_box(world):
    """Not root: no setpriv, no drop; bwrap makes the user namespace itself. Where the kernel refuses
    that, the probe says so and the box is the fallback."""
    course = world.course("which")
    done = world.run([world.python, "-c", _BOX], cwd=course)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert said["uid"] == world.uid and said["run_as"] is None  # the grader is this user; judges run as it
    why = _userns(world)
    if why is None:
        assert said["describe"] == "bubblewrap" and said["kind"] == "bubblewrap", said
        assert said["as_user"] is None and said["drop_to"] is None
    elif shutil.which("bwrap") is None:
        assert said["describe"].startswith("fallback: bubblewrap is not installed"), said
    else:
        assert said["describe"].startswith("fallback: bubblewrap cannot make its sandbox here"), said


def test_where_user_namespaces_are_refused_the_box_is_the_fallback_and_says_why(world):
    if shutil.which("bwrap") is None or _userns(world) is not None:
        pytest.skip("needs bubblewrap working unprivileged to make the refusing namespace")
    assert _userns(world, _no_userns()) is not None  # the kernel refuses, as on such hosts
    course = world.course("which-no-userns")
    done = world.run([world.python, "-c", _BOX], cwd=course, wrap=_no_userns())
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert said["kind"] == "fallback" and said["describe"].startswith(
        "fallback: bubblewrap cannot make its sandbox here: "), said
    assert "namespace" in said["describe"], said


# ------------------------------------------------------------------------------- the OS wall alone

_IN_BOX = """
import json, subprocess, sys
from sim.course import sandbox
folder, code = sys.argv[1], sys.argv[2]
argv, env, cwd, fds = sandbox.box_command(folder, code, sys.argv[3:], main=folder + '/design.py')
done = subprocess.run(argv, env=env, cwd=cwd, pass_fds=fds, capture_output=True, text=True, timeout=120)
print(json.dumps({'kind': sandbox.box().kind, 'rc': done.returncode, 'out': done.stdout, 'err': done.stderr}))
"""
_WRITES = """
import errno, json, os, sys
targets = json.loads(sys.argv[1])
said = {}
for name, path in targets.items():
    try:
        with open(path, 'a') as f:
            f.write('planted')
        said[name] = 'wrote'
    except OSError as e:
        said[name] = errno.errorcode.get(e.errno, str(e.errno))
status = open('/proc/self/status').read()
said['uid'] = os.getuid()
said['caps'] = status.split('CapEff:')[1].split()[0]
said['copy'] = sorted(os.listdir('.'))
said['pids'] = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
said['own session'] = os.getsid(0) != 0  # 0: a session outside the box's PID namespace (the grader's)
import socket, ctypes
said['ifaces'] = sorted(n for _i, n in socket.if_nameindex())
libc = ctypes.CDLL(None, use_errno=True)
said['nested user namespace'] = libc.unshare(0x10000000) == 0  # CLONE_NEWUSER: root of a namespace of its own
print(json.dumps(said))
"""


def test_as_an_unprivileged_user_the_box_keeps_the_graders_own_files_read_only(world):
    """The user owns the checkout, the interpreter's venv, the submission's folder and the grader's
    temporary folder (it may write every one of them: checked), yet code in the box, with no audit
    hook, writes none of them: only its private copy and its private /tmp."""
    _needs_bwrap(world)
    course = world.course("walls")
    sub = world.top / "walls-class" / "alice"
    sub.mkdir(parents=True)
    (sub / "design.py").write_text("x = 1\n")
    (sub / ".secret").write_text("a dot file is not copied\n")
    (sub / "zz-big.bin").write_bytes(b"x" * (9 << 20))  # past copy_mb (8 MB), last: the files before it are copied
    (sub / "peek.py").symlink_to(course / "solutions" / EX1 / "design.py")  # a link is never followed
    world.own(sub.parent)
    venv_packages = next((world.top / "venv" / "lib").glob("python*/site-packages"))
    targets = {
        "graders code": str(course / "sim" / "course" / "sandbox.py"),
        "kit file in the box": str(course / "sim" / "course" / "host.py"),
        "model answer": str(course / "solutions" / EX1 / "design.py"),
        "new file in the checkout": str(course / "protolab-planted.py"),
        "interpreter's packages": str(venv_packages / "sitecustomize.py"),
        "another submission's folder": str(sub.parent / "bob.py"),
        "graders temporary folder": str(world.top / "tmp" / "planted"),
        "home": str(world.top / "home" / "planted"),
        "own copy": str(sub / "design.py"),
        "scratch": str(sub / "scratch.txt"),
        "private tmp": "/tmp/protolab-box-scratch",
    }
    # the premise: outside the box, the user may write every one of them
    access = world.run([world.python, "-c", "import json, os, sys; t = json.loads(sys.argv[1]); print(json.dumps("
                        "{k: os.access(p if os.path.exists(p) else os.path.dirname(p), os.W_OK) for k, p in t.items()}))",
                        json.dumps(targets)], cwd=course)
    assert access.returncode == 0, access.stderr
    assert all(json.loads(access.stdout).values()), access.stdout
    before = _tree(course), _tree(world.top / "venv"), _tree(sub.parent), _tree(world.top / "tmp")
    code = _WRITES
    done = world.run([world.python, "-c", _IN_BOX, str(sub), code, json.dumps(targets)], cwd=course)
    assert done.returncode == 0, done.stderr
    box = json.loads(done.stdout)
    assert box["kind"] == "bubblewrap" and box["rc"] == 0, box
    said = json.loads(box["out"])
    assert said["uid"] == 65534 and said["caps"] == "0000000000000000", said  # never root, no capability
    assert said["copy"] == ["design.py", "scratch.txt"], said  # no dot file, nothing past copy_mb, no link
    assert said["pids"] == [1, 2] and said["own session"] and said["ifaces"] == ["lo"], said
    assert said["nested user namespace"] is False, said
    assert said["own copy"] == said["scratch"] == said["private tmp"] == "wrote", said
    # what the box shows of the grader's files is bound read-only (the rest it does not show at all:
    # a write to such a path lands in the box's private /tmp, if anywhere); outside, nothing changed
    assert said["kit file in the box"] == said["interpreter's packages"] == "EROFS", said
    after = _tree(course), _tree(world.top / "venv"), _tree(sub.parent), _tree(world.top / "tmp")
    assert after == before
    assert not Path("/tmp/protolab-box-scratch").exists()


# ------------------------------------------------------------------------------- the box dies with its judge

_JUDGE = """
import json, os, signal, sys
from sim.course import sandbox
from sim.course.host import encode
proc, pid, boxed = sandbox.start_host(sys.argv[1], 1)
proc.stdin.write(json.dumps({'token': 't'}).encode() + b'\\n')
ready = proc.stdout.readline()
proc.stdin.write(json.dumps({'fn': 'spin', 'args': encode([])}).encode() + b'\\n')
print(json.dumps({'bwrap': proc.pid, 'box': pid, 'boxed': boxed, 'ready': ready.decode()}), flush=True)
signal.pause()
"""


def test_as_an_unprivileged_user_killing_the_judge_ends_its_box(world):
    """A judge killed alone (SIGKILL to it, not to its group) while its host spins in the student's
    function: the box goes with it. The host never sees its pipe close (it is busy), so only
    bubblewrap's --die-with-parent can end it; the test waits on pidfds, with a bound, never a sleep."""
    _needs_bwrap(world)
    course = world.course("judge")
    sub = world.top / "judge-class" / "alice"
    sub.mkdir(parents=True)
    (sub / "design.py").write_text("def spin():\n    while True:\n        pass\n")
    world.own(sub.parent)
    judge = world.popen([world.python, "-c", _JUDGE, str(sub / "design.py")], cwd=course,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    fds = []
    try:
        ready, _, _ = select.select([judge.stdout], [], [], 120)
        assert ready, "the judge never started its host"
        line = judge.stdout.readline()
        assert line, judge.stderr.read()
        said = json.loads(line)
        assert said["boxed"] and '"ready": true' in said["ready"], said
        fds = [os.pidfd_open(said["bwrap"]), os.pidfd_open(said["box"])]
        assert select.select(fds, [], [], 0)[0] == []  # both alive, the host spinning
        os.kill(judge.pid, signal.SIGKILL)
        judge.wait(timeout=60)
        gone = set()
        while len(gone) < len(fds):  # each pidfd turns readable when its process has ended
            ready, _, _ = select.select([f for f in fds if f not in gone], [], [], 60)
            if not ready:
                break
            gone.update(ready)
        assert len(gone) == len(fds), "the box outlived its judge"
    finally:
        for f in fds:
            try:
                signal.pidfd_send_signal(f, signal.SIGKILL)
            except OSError:
                pass
            os.close(f)
        if judge.poll() is None:
            judge.kill()
            judge.wait()


# ------------------------------------------------------------------------------- the production path


def _grade_batch(world: World, tag: str, *, no_userns: bool) -> None:
    import test_sandbox_hostile as hostile

    batch = world.top / tag
    batch.mkdir()
    extra = {k: hostile.EXTRA[k] for k in (
        "writes-into-checkout", "reads-hidden-tests-and-hides-it", "request-file", "sqlite-by-uri")}
    course, klass, run_db = hostile._class(batch, hostile.QUICK, extra)
    world.own(batch)
    for m in hostile.MARKERS:
        Path(m).unlink(missing_ok=True)
    before = hostile.untouched(course, klass, run_db)
    argv = [world.python, "-m", "sim", "grade", "1", str(klass), "-j", "2", "--json"]
    wrap = ()
    if no_userns:
        wrap = _no_userns()
        refused = world.run(argv, cwd=course, wrap=wrap, timeout=600)
        assert refused.returncode == 2 and refused.stdout == "", refused
        assert refused.stderr.startswith("error: E_NO_SANDBOX: no operating-system sandbox here (bubblewrap cannot make "
                                         "its sandbox here") and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        argv += ["--sandbox", "none"]
    said = hostile.judged_whole(world.run(argv, cwd=course, wrap=wrap, timeout=1800, start_new_session=True), klass,
                                extra)
    if no_userns:
        assert len(said) == 1 and said.pop().startswith("fallback: bubblewrap cannot make its sandbox here"), said
    else:
        assert said == {"bubblewrap"}, said
    assert hostile.untouched(course, klass, run_db) == before
    assert [m for m in hostile.MARKERS if os.path.exists(m)] == []
    assert hostile._survivors(str(course), str(klass)) == []


@pytest.mark.slow
def test_as_an_unprivileged_grader_hostile_submissions_score_0_and_touch_nothing(world):
    _needs_bwrap(world)
    _grade_batch(world, "batch-bwrap", no_userns=False)


@pytest.mark.slow
def test_without_user_namespaces_an_unprivileged_grader_refuses_then_grades_on_the_fallback(world):
    """What the code does where the kernel refuses user namespaces: ``grade`` fails closed in one
    line (exit 2); told ``--sandbox none`` it grades on the fallback (the user's own uid, the audit
    hooks and limits), and hostile code still gets 0 and touches nothing, although the user owns it all."""
    if shutil.which("bwrap") is None or _userns(world) is not None:
        pytest.skip("needs bubblewrap working unprivileged to make the refusing namespace")
    _grade_batch(world, "batch-no-userns", no_userns=True)


# ------------------------------------------------------------------------------- a root grader

_REPORT = """import errno, os, resource


def report():
    limits = {n: list(resource.getrlimit(getattr(resource, n))) for n in ("RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_CORE",
                                                                          "RLIMIT_NPROC")}
    return {"resuid": list(os.getresuid()), "resgid": list(os.getresgid()), "groups": os.getgroups(), "limits": limits}


def big(mb):
    try:
        with open("big.bin", "wb") as f:
            f.write(b"x" * (mb << 20))
        return "wrote"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
"""
_HOST_SAYS = """
import json, os, sys
from sim.course import sandbox
from sim.course.remote import RemoteModule
b = sandbox.box()
user = sandbox.sandbox_user()
mod = RemoteModule(sys.argv[1], processes=1)
try:
    said = mod.call('report')
    file_mb = sandbox.LIMITS['file_mb']
    said['past file_mb'] = mod.call('big', file_mb + 1)
    said['within file_mb'] = mod.call('big', file_mb - 1)
finally:
    mod.close()
print(json.dumps({'describe': b.describe(), 'as_user': b.as_user, 'drop_to': b.drop_to, 'run_as': user, 'host': said,
                  'limits': sandbox.LIMITS}))
"""


def _host_says(world: World, tag: str, *, as_user: bool, env: dict | None = None) -> dict:
    """What a host reports of itself (uids, groups, limits in force, a write past the file limit),
    started by a judge run as the unprivileged user (``as_user``) or as this process's user."""
    course = world.course(tag)
    sub = world.top / f"{tag}-class"
    sub.mkdir()
    (sub / "design.py").write_text(_REPORT)
    world.own(sub)
    os.chmod(sub, 0o777)  # on the fallback a host works in this folder itself, as the sandbox's user
    argv = [world.python, "-c", _HOST_SAYS, str(sub / "design.py")]
    if as_user:
        done = world.run(argv, cwd=course, env=env)
    else:
        done = subprocess.run(argv, cwd=course, env={**world.env, **(env or {})}, capture_output=True, text=True,
                              timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _walled(said: dict, uid: int) -> None:
    """A host's uids, groups and limits as the sandbox promises them."""
    host, lim = said["host"], said["limits"]
    assert host["resuid"] == [uid] * 3 and 0 not in host["resgid"] and 0 not in host["groups"], host
    mb = 1024 * 1024
    assert host["limits"] == {"RLIMIT_AS": [lim["memory_mb"] * mb] * 2, "RLIMIT_FSIZE": [lim["file_mb"] * mb] * 2,
                              "RLIMIT_CORE": [0, 0], "RLIMIT_NPROC": [0, 0]}, host["limits"]
    # a write past the file limit fails as an error the code can catch (not a SIGXFSZ that kills the host)
    assert host["past file_mb"] == "EFBIG" and host["within file_mb"] == "wrote", host


def test_as_an_unprivileged_user_a_hosts_uid_and_limits_are_the_sandboxs(world):
    _needs_bwrap(world)
    said = _host_says(world, "limits-user", as_user=True)
    assert said["describe"] == "bubblewrap" and said["run_as"] is None, said
    _walled(said, 65534)


@pytest.mark.skipif(not IS_ROOT, reason="needs root")
@pytest.mark.parametrize("fallback", [False, True], ids=["bubblewrap", "fallback"])
def test_a_root_grader_with_a_python_the_sandbox_user_can_run_never_runs_student_code_as_root(world, fallback):
    """Root grading with an interpreter the sandbox's user can run (the portable venv): bwrap is started
    as that user through setpriv (no bwrap as root), judges run as it, and on the fallback each host
    drops to it: the student's code is never uid 0, in no group 0, with the sandbox's limits."""
    if not fallback:
        _needs_bwrap(world)
    said = _host_says(world, f"root-{'fallback' if fallback else 'bwrap'}", as_user=False,
                      env={"PROTOLAB_SANDBOX": "fallback"} if fallback else None)
    name = os.environ.get("PROTOLAB_SANDBOX_USER", "protolab-sandbox")
    pw = pwd.getpwnam(name)
    assert said["run_as"] == [pw.pw_uid, pw.pw_gid], said  # judges run as the sandbox's user
    if fallback:
        assert said["describe"] == "fallback: PROTOLAB_SANDBOX=fallback", said
        _walled(said, pw.pw_uid)
    else:
        assert said["describe"] == f"bubblewrap (as {name})" and said["as_user"][0] == name, said
        assert said["drop_to"] is None, said
        _walled(said, 65534)


_DROPPED = """
import json, shutil, sys
from sim.course import sandbox
from sim.course.remote import RemoteModule
acct = sandbox._account()
sandbox._BOX[:] = [sandbox.Box("bubblewrap", "test", shutil.which("bwrap"), drop_to=acct)]
mod = RemoteModule(sys.argv[1], processes=1)
try:
    said = mod.call("report")
    said["past file_mb"] = mod.call("big", sandbox.LIMITS["file_mb"] + 1)
    said["within file_mb"] = mod.call("big", sandbox.LIMITS["file_mb"] - 1)
finally:
    mod.close()
print(json.dumps({"host": said, "limits": sandbox.LIMITS, "uid": acct[1]}))
"""


@pytest.mark.skipif(not IS_ROOT, reason="needs root")
def test_bwrap_as_root_drops_to_the_sandboxs_user_with_no_way_back(world):
    """The root branch kept for a Python the sandbox's user cannot run (bwrap as root, the host
    dropping to the user itself), from a grader in root's groups: every uid the user's, no group 0
    left, the same limits."""
    _needs_bwrap(world)
    sub = world.top / "drop-class"
    sub.mkdir()
    (sub / "design.py").write_text(_REPORT)
    os.chmod(sub, 0o777)
    done = subprocess.run([sys.executable, "-c", _DROPPED, str(sub / "design.py")], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, extra_groups=[0], env={**world.env, "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    _walled(said, said["uid"])


def test_a_bubblewrap_that_would_run_the_code_as_root_is_not_the_box(tmp_path):
    """The probe refuses a box whose code runs as uid 0 (here a "bwrap" that ignores its options)."""
    from sim.course import sandbox

    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\nwhile [ \"$1\" != -- ]; do shift; done\nshift\nexec \"$@\"\n")
    fake.chmod(0o755)
    if not IS_ROOT:
        pytest.skip("needs root: the fake box runs the code as the grader")
    said = sandbox._try(sandbox.Box("bubblewrap", "", str(fake), drop_to=("x", 0, 0)))
    assert said == "the code would run as root inside it"


# ------------------------------------------------------------------------------- the judge's own limits


def test_a_judge_process_runs_with_the_sandboxs_limits_but_cpu_time():
    """A warm judge process (pool): the address space and file size of LIMITS, no core file, as the
    kernel holds it (/proc/PID/limits), whoever runs the grader."""
    from sim.course import pool, sandbox

    w = pool._Worker()
    try:
        rows = {}
        for line in Path(f"/proc/{w.proc.pid}/limits").read_text().splitlines()[1:]:
            name, soft, hard = line[:26].strip(), *line[26:].split()[:2]
            rows[name] = (soft, hard)
    finally:
        w.close()
    mb = 1024 * 1024
    assert rows["Max address space"] == (str(sandbox.LIMITS["memory_mb"] * mb),) * 2, rows
    assert rows["Max file size"] == (str(sandbox.LIMITS["file_mb"] * mb),) * 2, rows
    assert rows["Max core file size"] == ("0", "0") and rows["Max cpu time"][0] == "unlimited", rows
