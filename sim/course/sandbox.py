"""Where student code runs when it is judged: a host process in an operating-system sandbox.

There is one way student code runs: :func:`start_host` starts a *host* process
(:mod:`sim.course.remote`) that imports the student's file and answers calls over a pipe. A judge
(the kit's own code, in a warm judge process of :class:`sim.course.pool.JudgePool`, or in this
process for the kit's own tests of its reference answers) starts hosts through
:class:`sim.course.remote.RemoteModule`; nothing else imports a student's file.

Every host runs inside bubblewrap (``bwrap``, Debian package ``bubblewrap``) when it works here:

- a read-only view of the system: ``/usr`` (and the ``/bin``, ``/lib*`` links), the few ``/etc``
  files the dynamic loader and Python read, the Python installation (``sys.prefix``,
  ``sys.base_prefix``) and, of the ``sim`` package, only the files the host needs and the plain-data
  interface its kind of file is handed (:func:`sim.course.host.kit_files`: never the engine modules
  that answer an exercise), nothing else of the checkout (never ``solutions/`` or ``tests/``), no
  other submission, no grader folder, no run database;
- the submission's folder as a private, writable copy on a tmpfs of its own (each host gets a fresh
  one, gone when the host ends: one host cannot plant a file for another or for the grader), a
  private ``/tmp``, a private ``/proc`` and ``/dev``;
- no network, its own PID, IPC and UTS namespaces, a session of its own, killed with its parent;
- an unprivileged uid: bwrap runs as the grader's user, or, when the grader is root, as the
  sandbox's user (``$PROTOLAB_SANDBOX_USER``, default ``protolab-sandbox``; the student's code is
  uid 65534 inside). When that user cannot reach this Python (a pyenv under ``/root``), bwrap runs
  as root and the host drops to that user before anything of the student's runs;
- a cleared environment (only what :func:`host_command` sets), and the limits of :data:`LIMITS`,
  which the host applies to itself (memory, size of a file written, no core files, no processes).

Whether bubblewrap works is probed once per process (:func:`box`). Where it does not (not
installed, or namespaces refused, as on some Docker hosts such as Gradescope's), hosts run as the
fallback: the unprivileged user when the grader is root (or none at all: :func:`start_host` refuses
rather than run student code as root), a private copy of the submission, the same limits.
:func:`describe` says which (``"bubblewrap"`` or ``"fallback: <why>"``); every report carries it and
the grader prints it. The instructor commands fail closed (:func:`require`): without bubblewrap they
run no student code unless told ``--sandbox none``, and then every row carries :func:`warning`. In both, the audit hooks of :mod:`sim.course.guard` wall the student's
code in from inside its own process: a second wall inside the box, the only one on the fallback.
``PROTOLAB_SANDBOX=fallback`` forces the fallback.

:func:`judge_here` calls a judge in this process, turning anything the student's code did into a
verdict: a refusal of the guard, ``sys.exit``, running out of memory, a loop past its time, a flood
of output, a wrong type: a score of 0 with one line saying why, never a traceback in the grader. A
judge's own exception is the grader's fault (:func:`grader_error`), never the student's.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path

from .judges import Judged, failed, resolve

__all__ = ["judge_here", "start_host", "host_command", "box_command", "box", "describe", "SandboxError", "grader_error",
           "GRADER_ERROR", "LIMITS", "sandbox_user", "RUN_AS", "RUN_AS_NOTE", "require", "warning", "HOW_TO_GET",
           "SANDBOX_CHOICES"]

#: Resource limits of judge and host processes; ``copy_mb`` caps a submission's copy.
LIMITS = {"memory_mb": 2048, "file_mb": 32, "output_kb": 256, "copy_mb": 8}

_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding the ``sim`` package
#: The interpreter judged code runs in.
PYTHON = sys.executable
#: ``(name, uid, gid)`` of the user judge processes run as when the grader is root; None: as is.
RUN_AS: tuple | None = None
#: Why judge processes run as root although the grader is root ("" when they do not, or not known yet).
RUN_AS_NOTE = ""


class SandboxError(RuntimeError):
    """The sandbox itself failed to start a host (the grader's trouble, never the student's)."""


class _Capped(io.TextIOBase):
    """stdout/stderr for student code: keeps the first ``limit`` characters, counts the rest."""

    def __init__(self, limit: int):
        self.limit, self.kept, self.total = limit, [], 0

    def writable(self) -> bool:
        return True

    def write(self, s) -> int:
        s = str(s)
        room = self.limit - self.total
        if room > 0:
            self.kept.append(s[:room])
        self.total += len(s)
        return len(s)

    def text(self) -> str:
        return "".join(self.kept)


def _where_in(sub: Path, tb) -> str:
    """``design.py line 12`` for the innermost frame in the student's files, if any."""
    where = ""
    frames = []
    exc = tb  # an exception, or a traceback
    if isinstance(exc, BaseException):
        seen = 0
        while exc is not None and seen < 5:  # the design's own frames hide behind a DesignError's cause
            frames = traceback.extract_tb(exc.__traceback__) + frames
            exc, seen = exc.__cause__ or exc.__context__, seen + 1
    else:
        frames = traceback.extract_tb(tb)
    for fs in frames:
        try:
            p = Path(fs.filename).resolve()
        except (OSError, ValueError):
            continue
        if sub in p.parents:
            where = f"{p.relative_to(sub)} line {fs.lineno}"
    return where


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def judge_here(judge: str, submission: Path, args: dict, *, keep_hosts: bool = False) -> Judged:
    """Call ``judge`` on ``submission`` in this process, turning anything the student's code does
    into a verdict. Something that ends a test (a refused file or process, ``sys.exit``, running
    out of memory, ...; see :func:`sim.course.remote.fatal`) makes it a 0 whatever the judge said.
    Inside :func:`sim.course.remote.submission` with ``keep_hosts``, the student's host processes
    stay up for the submission's next test; otherwise they end with this one."""
    from . import remote

    remote.reset()
    sub = Path(submission).resolve()
    try:
        verdict = _judge_here(judge, sub, args)
    finally:
        if not keep_hosts:
            remote.close_shared()
    if verdict.grader_error:  # the grader's own trouble (a judge's bug, a sandbox that failed): never the student's
        return verdict
    why = remote.fatal()
    if why:
        return _private_paths(failed(_one_line(why)), sub)
    if remote.printed() > LIMITS["output_kb"] * 1024 and "printed more than" not in verdict.message:
        return failed(f"your code printed more than {LIMITS['output_kb']} KB while judged ({remote.printed():,} "
                      "characters); it should compute, not print")
    return verdict


def _judge_here(judge: str, sub: Path, args: dict) -> Judged:
    from ..errors import ProtolabError

    fn = resolve(judge)
    out = _Capped(LIMITS["output_kb"] * 1024)
    saved = sys.stdout, sys.stderr, sys.stdin
    sys.stdout = sys.stderr = out
    sys.stdin = io.StringIO("")
    limit = sys.getrecursionlimit()
    try:
        result = fn(sub, dict(args))
        if not isinstance(result, Judged):  # pragma: no cover - a judge bug, not the student's
            return failed(f"internal: judge {judge} returned {type(result).__name__}")
        if out.total > out.limit:
            return failed(f"your code printed more than {LIMITS['output_kb']} KB while judged ({out.total:,} "
                          "characters); a design computes, it does not print")
        return _private_paths(result, sub)
    except ProtolabError as e:
        where = _where_in(sub, e)
        return _private_paths(failed(_one_line(f"{e.code}: {e.message}" + (f" ({where})" if where else ""))), sub)
    except SystemExit as e:
        where = _where_in(sub, e)
        return failed(f"your code called sys.exit({e.code!r})" + (f" at {where}" if where else "") +
                      "; a design is a module of functions, it must not end the process")
    except MemoryError:
        return failed(f"your code ran out of memory (the limit is {LIMITS['memory_mb']} MB)")
    except RecursionError as e:
        where = _where_in(sub, e)
        if not where:  # no frame of the student's: the judge was reading a file of theirs
            return failed("your file nests too deeply to be read (deeper than Python's recursion limit); "
                          "a real one nests a few levels")
        return failed(f"your code recursed without end ({where})")
    except Exception as e:
        where = _where_in(sub, e)
        if where:  # a frame of the student's file in this process (student code runs in hosts: not on the grader's path)
            return failed(_one_line(f"your code raised {type(e).__name__}: {e} at {where}"))
        return grader_error(judge, e)
    finally:
        sys.stdout, sys.stderr, sys.stdin = saved
        sys.setrecursionlimit(limit)
        if out.total > out.limit:
            pass  # the flood is reported below by the caller through judge_output()
        judge_here.last_output = out.text()
        judge_here.flooded = out.total > out.limit


#: What a student reads when a judge failed: the test is not graded, and it is not their fault.
GRADER_ERROR = ("not gradable: grader error (a fault in the grader, not in your submission; your instructor "
                "has been told and will regrade it)")


def grader_error(judge: str, e: BaseException) -> Judged:
    """A judge that raised something other than a refusal of the student's input: the kit's own
    bug. The test is reported as not gradable, with where the judge failed for the instructor."""
    frames = traceback.extract_tb(e.__traceback__)
    here = next((f for f in reversed(frames) if "/sim/" in f.filename.replace("\\", "/")), frames[-1] if frames else None)
    at = ""
    if here is not None:
        name = here.filename.replace("\\", "/")
        at = f" at {name[name.rfind('/sim/') + 1:] if '/sim/' in name else name} line {here.lineno}, in {here.name}"
    detail = _one_line(f"judge {judge} raised {type(e).__name__}: {e}{at}")
    return Judged(0.0, GRADER_ERROR, grader_error=detail)


def _private_paths(v: Judged, sub: Path) -> Judged:
    """Name the student's folder as ``{dir}``, never the sandbox's private copy."""
    from dataclasses import replace

    return replace(v, message=v.message.replace(str(sub), "{dir}"))


def _flood_note(v: dict) -> dict:
    if v.get("flooded") and "printed more than" not in v.get("message", ""):
        v["message"] = v.get("message", "") + f" (your code printed more than {LIMITS['output_kb']} KB; the rest was dropped)"
    return v


# ---------------------------------------------------------------------------- the box


@dataclass(frozen=True)
class Box:
    """How host processes are walled in here (see :func:`box`)."""

    kind: str  # "bubblewrap" or "fallback"
    why: str = ""  # fallback: why there is no bubblewrap; bubblewrap: how it runs, when worth saying
    bwrap: str = ""  # the bwrap binary
    as_user: tuple | None = None  # (name, uid, gid): the grader is root; bwrap is started as this user (setpriv)
    drop_to: tuple | None = None  # (name, uid, gid): bwrap runs as root; the host drops to this user itself
    setpriv: str = ""

    def describe(self) -> str:
        if self.kind == "bubblewrap":
            return "bubblewrap" + (f" ({self.why})" if self.why else "")
        return f"fallback: {self.why}"


_BOX: list = []
_BOX_LOCK = threading.Lock()

# Before anything else in a boxed interpreter: when bwrap ran as root, drop to the sandbox's user.
_DROP = ("import os as _os\n"
         "_d = _os.environ.pop('PROTOLAB_DROP_TO', '')\n"
         "if _d:\n"
         "    _u, _g = (int(_x) for _x in _d.split(':'))\n"
         "    _os.setgroups([]); _os.setresgid(_g, _g, _g); _os.setresuid(_u, _u, _u)\n"
         "del _os, _d\n")
# A host's boot: answer the probe, or run the host (sim.course.host.host_main).
_HOST_BOOT = ("import sys\n"
              "sys.path.insert(0, sys.argv[1])\n"
              "if sys.argv[2] == '-':\n"
              "    import os, sim.course.host, sim.course.guard; print('protolab-sandbox-ok', os.getuid())\n"
              "else:\n"
              "    from sim.course.host import host_main; host_main(sys.argv[2], sys.argv[3], sys.argv[4])\n")
#: The few files of /etc that the dynamic loader and Python read.
_ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/alternatives")
_MB = 1024 * 1024


def box() -> Box:
    """How hosts are walled in, probed once per process: bubblewrap when ``bwrap`` is installed and
    can make its namespaces here (and run this Python inside them), else the fallback."""
    if not _BOX:
        with _BOX_LOCK:
            if not _BOX:
                _BOX.append(_probe())
    return _BOX[0]


def describe() -> str:
    """Which sandbox judges here: ``"bubblewrap"`` (with a note on how, if any) or ``"fallback: <why>"``."""
    return box().describe()


#: How to get an operating-system sandbox, in one sentence (the refusal and the README say it).
HOW_TO_GET = ("install bubblewrap (Debian, Ubuntu: 'sudo apt-get install bubblewrap'; Fedora: 'sudo dnf install "
              "bubblewrap'; on macOS, grade in a Linux container or VM), or pass '--sandbox none' to grade without "
              "one, knowingly")
#: The values of the instructor commands' ``--sandbox``: the operating-system sandbox, or none (allowed).
SANDBOX_CHOICES = ("bubblewrap", "none")


def require(sandbox: str = "bubblewrap") -> None:
    """Fail closed before an instructor command runs student code: without bubblewrap here,
    refuse (:class:`~sim.errors.InputError` ``E_NO_SANDBOX``, one line saying how to get it) unless
    ``sandbox`` is ``"none"`` (the instructor's choice: hosts run on the fallback, every report and
    row says so, :func:`warning`). Even then, never as root: a grader running as root must have an
    unprivileged user that can run this Python (:func:`sandbox_user`), else it refuses too. Where
    bubblewrap works, it is used whatever ``sandbox`` says."""
    from ..errors import InputError

    if sandbox not in SANDBOX_CHOICES:
        raise InputError(f"--sandbox is {sandbox!r}: expected one of {', '.join(SANDBOX_CHOICES)}", code="E_USAGE")
    b = box()
    if b.kind == "bubblewrap":
        return
    if sandbox != "none":
        raise InputError(f"no operating-system sandbox here ({b.why}): students' code would run with the audit hooks "
                         f"and limits alone, so nothing was graded; {HOW_TO_GET}", code="E_NO_SANDBOX")
    if hasattr(os, "geteuid") and os.geteuid() == 0 and sandbox_user() is None:
        raise InputError("--sandbox none: the grader is root and "
                         + (RUN_AS_NOTE.replace(": judged code runs as root", "") or "there is no unprivileged user")
                         + "; students' code never runs as root: grade as an ordinary user, set "
                         "PROTOLAB_SANDBOX_USER to a user that can run this Python, or install bubblewrap",
                         code="E_NO_SANDBOX")


def warning(sandbox: str) -> str:
    """The loud warning every report and row carries when ``sandbox`` (a report's) is not bubblewrap;
    "" when it is (or is not known)."""
    if not sandbox or sandbox.startswith("bubblewrap"):
        return ""
    return ("WARNING: graded WITHOUT an operating-system sandbox (--sandbox none; " + sandbox + "): students' code "
            "ran with the audit hooks and limits alone")


def _probe() -> Box:
    forced = os.environ.get("PROTOLAB_SANDBOX", "").strip().lower()
    if forced == "fallback":
        return Box("fallback", "PROTOLAB_SANDBOX=fallback")
    if not sys.platform.startswith("linux"):
        return Box("fallback", f"bubblewrap needs Linux (this is {sys.platform})")
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return Box("fallback", "bubblewrap is not installed (apt-get install bubblewrap)")
    tries = []
    if os.geteuid() == 0:
        acct = _account()
        if acct is None:
            return Box("fallback", "the grader is root and there is no unprivileged user to run bubblewrap as")
        setpriv = shutil.which("setpriv")
        if setpriv:
            tries.append(Box("bubblewrap", f"as {acct[0]}", bwrap, as_user=acct, setpriv=setpriv))
        tries.append(Box("bubblewrap", f"bwrap as root, the code as {acct[0]}", bwrap, drop_to=acct))
    else:
        tries.append(Box("bubblewrap", "", bwrap))
    errors = []
    for b in tries:
        err = _try(b)
        if err is None:
            return b
        errors.append(err)
    return Box("fallback", "bubblewrap cannot make its sandbox here: " + "; ".join(dict.fromkeys(errors)))


def _try(b: Box) -> str | None:
    """None when a host's interpreter starts and imports sim inside ``b``; else why not."""
    import tempfile

    folder = tempfile.mkdtemp(prefix="protolab-probe-")
    try:
        os.chmod(folder, 0o755)
        argv, env, cwd, fds = host_command(Path(folder) / "-", 0, _box=b, _probe=True)
        try:
            done = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
                                  pass_fds=fds)
        finally:
            for fd in fds:
                os.close(fd)
    except (OSError, subprocess.SubprocessError) as e:
        return _one_line(f"{type(e).__name__}: {e}", 200)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    said = done.stdout.split()
    if b"protolab-sandbox-ok" in said:
        uid = said[said.index(b"protolab-sandbox-ok") + 1:][:1]
        return None if uid and uid != [b"0"] else "the code would run as root inside it"
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return _one_line(lines[-1] if lines else f"exit status {done.returncode}", 200)


def _account() -> tuple | None:
    """``(name, uid, gid)`` of the unprivileged user bwrap runs as when the grader is root: the
    sandbox's user (made with useradd if missing), else ``nobody``."""
    name = os.environ.get("PROTOLAB_SANDBOX_USER", "protolab-sandbox")
    for n in (name, "nobody"):
        pw = _user(n, make=n == name)
        if pw is not None and pw.pw_uid != 0:
            return n, pw.pw_uid, pw.pw_gid
    return None


def _user(name: str, *, make: bool):
    import pwd

    try:
        return pwd.getpwnam(name)
    except KeyError:
        if not make:
            return None
    try:
        subprocess.run(["useradd", "--system", "--no-create-home", name], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


def host_command(path: Path, seed: int, *, kind: str = "design", info_fd: int | None = None, _box: Box | None = None,
                 _probe: bool = False) -> tuple[list[str], dict, str, list[int]]:
    """``(argv, env, cwd, fds)`` of a host process for the student's file at ``path`` (a file of
    ``kind``, the ``what`` of :class:`sim.course.remote.RemoteModule`: which of the kit's interface
    it is handed) with hash seed ``seed``: the recipe of the one way student code is started
    (:func:`start_host` starts it). Python runs with ``-s -P`` and an environment made here alone (so
    ``PYTHONHASHSEED`` applies: each host of a module gets its own seed). In bubblewrap, ``fds`` are
    the submission's files, copied into the host's private folder (the caller passes them to the
    process, then closes them); ``info_fd`` is bwrap's ``--info-fd``."""
    path = os.path.abspath(path)
    limits = json.dumps({"memory_mb": LIMITS["memory_mb"], "file_mb": LIMITS["file_mb"]})
    return box_command(os.path.dirname(path), _HOST_BOOT, [_ROOT, "-" if _probe else path, limits, kind], seed=seed,
                       main=path, info_fd=info_fd, kind=kind, _box=_box, _probe=_probe)


def box_command(folder: str | Path, code: str, args=(), *, seed: int = 0, main: str | None = None,
                info_fd: int | None = None, kind: str = "", _box: Box | None = None,
                _probe: bool = False) -> tuple[list[str], dict, str, list[int]]:
    """``(argv, env, cwd, fds)`` running ``python -s -P -c CODE ARGS...`` in ``folder`` as hosts run:
    in the box (a private copy of ``folder``, ``main`` copied first; of the ``sim`` package only the
    files a host of ``kind`` may read, :func:`sim.course.host.kit_files`) or, on the fallback, as is."""
    b = _box if _box is not None else box()
    folder = os.path.abspath(folder)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin" if b.kind == "bubblewrap" else os.environ.get("PATH", "/usr/bin:/bin"),
           "HOME": folder, "LANG": "C.UTF-8", "TMPDIR": folder, "PYTHONHASHSEED": str(seed),
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1"}
    inner = [PYTHON, "-s", "-P", "-c", code, *map(str, args)]
    if b.kind != "bubblewrap":
        return inner, env, folder, []
    if b.drop_to is not None:
        env["PROTOLAB_DROP_TO"] = f"{b.drop_to[1]}:{b.drop_to[2]}"
        inner[4] = _DROP + code
    fds: list[int] = []
    try:
        argv = _bwrap(b, folder, main or os.path.join(folder, "-"), inner, env, fds, info_fd, kind=kind, probe=_probe)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    if b.as_user is not None:
        _name, uid, gid = b.as_user
        argv = [b.setpriv, "--reuid", str(uid), "--regid", str(gid), "--clear-groups", "--"] + argv
    return argv, {"PATH": "/usr/bin:/bin"}, "/", fds


def _read_roots() -> list[str]:
    """What a host must read: the Python installation, resolved (of the ``sim`` package, only the files
    :func:`_bwrap` binds one by one)."""
    import site
    import sysconfig

    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.dirname(os.path.abspath(PYTHON))), os.path.dirname(os.path.realpath(PYTHON)),
             sysconfig.get_paths().get("stdlib", "")}
    try:
        roots.update(site.getsitepackages())
    except Exception:  # pragma: no cover - a site module without it
        pass
    # packages the installation adds through .pth files (another venv's site-packages, a distribution's
    # dist-packages): never a checkout or the current folder, which are on the path for other reasons
    roots.update(p for p in sys.path if p and os.path.isabs(p)
                 and {"site-packages", "dist-packages"} & set(Path(p).parts))
    return sorted({os.path.realpath(r) for r in roots if r and os.path.isdir(r)})


def _checkout() -> str | None:
    """The checkout that holds ``sim`` (None for an installed sim, in site-packages)."""
    import site

    root = os.path.realpath(_ROOT)
    try:
        installed = {os.path.realpath(p) for p in site.getsitepackages()}
    except Exception:  # pragma: no cover
        installed = set()
    return None if root in installed else root


def _bwrap(b: Box, folder: str, main: str, inner: list[str], env: dict, fds: list[int], info_fd: int | None,
           *, kind: str = "", probe: bool) -> list[str]:
    a = [b.bwrap]
    if info_fd is not None:
        a += ["--info-fd", str(info_fd)]
    if b.drop_to is not None:  # bwrap as root: no user namespace; the host drops to the user before anything else
        a += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
              "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        a += ["--unshare-all", "--unshare-user", "--disable-userns", "--uid", "65534", "--gid", "65534"]
    a += ["--die-with-parent", "--new-session", "--clearenv"]
    for k, v in env.items():
        a += ["--setenv", k, v]
    bound: list[str] = []  # read-only trees (each holds what lies under it)
    made: set[str] = {"/"}  # folders that exist in the new root

    def covered(p: str) -> bool:
        return any(p == r or p.startswith(r.rstrip("/") + "/") for r in bound)

    def parents(p: str) -> None:
        parts = p.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            d = "/" + "/".join(parts[:i])
            if d not in made and not covered(d):
                a.extend(["--perms", "0755", "--dir", d])
                made.add(d)

    def ro(src: str, dest: str | None = None) -> None:
        dest = dest or src
        if covered(dest):
            return
        parents(dest)
        a.extend(["--ro-bind", src, dest])
        if os.path.isdir(src):
            bound.append(dest)

    ro("/usr")
    for d in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(d):
            a.extend(["--symlink", os.readlink(d), d])
            made.add(d)
        elif os.path.isdir(d):
            ro(d)
    for f in _ETC:
        if os.path.exists(f):
            ro(f)
    a += ["--dev", "/dev", "--proc", "/proc", "--perms", "1777", "--size", str(16 * _MB), "--tmpfs", "/tmp"]
    made.update({"/dev", "/proc", "/tmp"})
    for r in _read_roots():
        ro(r)
    checkout, sim_dir = _checkout(), str(Path(__file__).resolve().parents[1])
    if checkout is not None and covered(checkout):  # a checkout inside the installation: only its sim/ shows
        a.extend(["--tmpfs", checkout])
    # of the sim package, the files a host of this kind needs and nothing else: an empty folder of its
    # own (over an installed sim's, or a checkout's), then each allowed file bound read-only into it
    from .host import kit_files

    if not covered(sim_dir):
        parents(sim_dir)
    a.extend(["--perms", "0755", "--size", str(_MB), "--tmpfs", sim_dir])
    subdirs = set()
    for rel in kit_files(kind, sim_dir):
        parts = rel.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if d not in subdirs:
                subdirs.add(d)
                a.extend(["--perms", "0755", "--dir", os.path.join(sim_dir, d)])
        src = os.path.join(sim_dir, rel)
        if os.path.isfile(src):
            a.extend(["--ro-bind", src, src])
    # the submission's folder: a private tmpfs holding a copy of its files, writable, gone with the host
    parents(folder)
    a.extend(["--perms", "0777", "--size", str((LIMITS["copy_mb"] + 56) * _MB), "--tmpfs", folder])
    made.add(folder)
    if not probe:
        _copy_in(a, folder, main, fds)
    a += ["--chdir", folder, "--"]
    return a + inner


def _copy_in(a: list[str], folder: str, main: str, fds: list[int]) -> None:
    """``--file`` each regular file of ``folder`` (the student's ``main`` first; no links, no dot
    files, at most ``copy_mb`` in all) into the host's private copy."""
    files: list[str] = [main]
    dirs: list[str] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(n for n in dirnames if not n.startswith(".") and n != "__pycache__"
                             and not os.path.islink(os.path.join(dirpath, n)))
        dirs += [os.path.join(dirpath, n) for n in dirnames]
        files += [os.path.join(dirpath, n) for n in sorted(filenames) if not n.startswith(".")]
        if len(files) > 500:
            break
    for d in dirs:
        a.extend(["--perms", "0777", "--dir", d])
    total, seen = 0, set()
    for f in files:
        if f in seen:
            continue
        seen.add(f)
        try:
            fd = os.open(f, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:  # a link, gone, unreadable: not copied (the judge reports a missing file)
            continue
        try:
            st = os.fstat(fd)
        except OSError:
            os.close(fd)
            continue
        total += st.st_size
        if not (st.st_mode & 0o170000 == 0o100000) or (total > LIMITS["copy_mb"] * _MB and f != main):
            os.close(fd)
            continue
        fds.append(fd)
        a.extend(["--perms", "0666", "--file", str(fd), f])


def start_host(path: Path, seed: int, kind: str = "design") -> tuple[subprocess.Popen, int, bool]:
    """Start a host process for the student's file at ``path``, a file of ``kind`` (see
    :func:`host_command`): ``(process, pid, boxed)``. ``pid`` is the process whose end means every
    process of the host has ended: in bubblewrap the sandbox's own first process (its PID namespace
    ends with it), else the host itself. stdin and stdout are the host's protocol pipes; stderr says
    why a host never started (bwrap's or the interpreter's own complaint: nothing of the student's
    code reaches it). On the fallback, a grader running as root starts the host as the sandbox's
    user, or refuses (:class:`SandboxError`): student code never runs as root."""
    import select

    b = box()
    boxed = b.kind == "bubblewrap"
    kw: dict = {}
    if not boxed and hasattr(os, "geteuid") and os.geteuid() == 0:
        user = sandbox_user()
        if user is None:
            raise SandboxError("refusing to run student code as root without bubblewrap: " + (
                RUN_AS_NOTE or "no unprivileged user to run it as") + " (set PROTOLAB_SANDBOX_USER to one, or install "
                "bubblewrap)")
        kw = {"user": user[0], "group": user[1], "extra_groups": []}
    r = w = None
    if boxed:
        r, w = os.pipe()
    argv, env, cwd, fds = host_command(path, seed, kind=kind, info_fd=w)
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=cwd, env=env, bufsize=0, pass_fds=fds + ([w] if w is not None else []), **kw)
    except BaseException:
        if r is not None:
            os.close(r)
        raise
    finally:
        for fd in fds:
            os.close(fd)
        if w is not None:
            os.close(w)
    if not boxed:
        return proc, proc.pid, False
    info = b""
    try:
        while True:  # bwrap writes {"child-pid": N, ...} once its namespaces exist, then closes the pipe
            ready, _, _ = select.select([r], [], [], 30)
            if not ready:
                break
            chunk = os.read(r, 4096)
            if not chunk:
                break
            info += chunk
    finally:
        os.close(r)
    try:
        pid = int(json.loads(info)["child-pid"])
    except (ValueError, KeyError, TypeError):
        try:
            proc.kill()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):  # pragma: no cover
            pass
        err = b""
        try:
            err = proc.stderr.read() or b""
        except (OSError, ValueError):  # pragma: no cover
            pass
        for f in (proc.stdin, proc.stdout, proc.stderr):
            try:
                f.close()
            except (OSError, ValueError):
                pass
        lines = err.decode("utf-8", "replace").strip().splitlines()
        raise SandboxError(f"bubblewrap could not start a host: {_one_line(lines[-1] if lines else 'no reason given', 200)}") from None
    return proc, pid, True


# ---------------------------------------------------------------------------- running as another user

_USER_LOCK = threading.Lock()
_USER_DONE = False


def sandbox_user(folder: str | Path | None = None) -> tuple[int, int] | None:
    """``(uid, gid)`` to run judge processes as when this process is root (and, on the fallback,
    the hosts they start), having given it ``folder``
    (and everything in it); None to run as is (not root, or no usable user: :data:`RUN_AS_NOTE`
    says why). The user is worked out once per process (:data:`RUN_AS`)."""
    global RUN_AS, RUN_AS_NOTE, _USER_DONE
    if not _USER_DONE:
        with _USER_LOCK:
            if not _USER_DONE:
                RUN_AS, RUN_AS_NOTE = _find_user()
                _USER_DONE = True
    if RUN_AS is None:
        return None
    if folder is not None:
        _give(Path(folder), RUN_AS[1], RUN_AS[2])
    return RUN_AS[1], RUN_AS[2]


def _find_user() -> tuple:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None, ""
    name = os.environ.get("PROTOLAB_SANDBOX_USER", "protolab-sandbox")
    pw = _user(name, make=True)
    if pw is None:
        return None, f"there is no user {name!r} and useradd could not make one: judged code runs as root"
    if pw.pw_uid == 0:
        return None, f"the user {name!r} is root: judged code runs as root"
    # can that user run this Python and import sim? (not a pyenv under /root, say)
    probe = "import sys; sys.path.insert(0, sys.argv[1]); import sim.course.remote, sim.course.judges"
    try:
        done = subprocess.run([PYTHON, "-I", "-c", probe, _ROOT], cwd="/", env=_env("/"), stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60,
                              user=pw.pw_uid, group=pw.pw_gid, extra_groups=[])
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"the user {name!r} cannot start {PYTHON} ({e}): judged code runs as root"
    if done.returncode != 0:
        last = (done.stderr.decode("utf-8", "replace").strip().splitlines() or ["?"])[-1]
        return None, f"the user {name!r} cannot run {PYTHON} with sim ({_one_line(last, 160)}): judged code runs as root"
    return (name, pw.pw_uid, pw.pw_gid), ""


def _give(tmpd: Path, uid: int, gid: int) -> None:
    """Hand the private folder to the sandbox's user."""
    os.chown(tmpd, uid, gid)
    for dirpath, dirnames, filenames in os.walk(tmpd):
        for n in dirnames + filenames:
            os.chown(os.path.join(dirpath, n), uid, gid, follow_symlinks=False)


def _env(home: str) -> dict:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "LANG": "C.UTF-8",
            "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": home}


def _copy_submission(src: Path, dst: Path) -> None:
    """Regular files only (no symlinks out of the folder), at most ``copy_mb`` in all."""
    total = 0
    dst.mkdir(parents=True)
    for p in sorted(src.rglob("*")):
        rel = p.relative_to(src)
        if any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
            continue
        if p.is_symlink():
            continue
        if p.is_dir():
            (dst / rel).mkdir(parents=True, exist_ok=True)
        elif p.is_file():
            total += p.stat().st_size
            if total > LIMITS["copy_mb"] * 1024 * 1024:
                raise OSError(f"the submission holds more than {LIMITS['copy_mb']} MB")
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, dst / rel)
