"""Where student code runs when it is judged: a child process with limits.

The parent (:func:`run_test`) copies the student's folder to a private temporary folder, starts
``python -I`` on :func:`child_main` there with a clean environment, hands it the request (judge,
folder, the test's arguments, hidden or not) on its stdin and reads the verdict back from its
stdout: nothing of a test is ever written to disk, and the verdict is not a file the student's
code could overwrite. The child applies resource limits to itself before anything else (address
space, CPU seconds, size of any file written, no core files); the parent waits for the test's
wall-clock timeout and kills the whole process group if it is exceeded, then any host process the
child reported that is still alive. The child calls the judge; a judge that calls student
functions starts a host process (:mod:`sim.course.remote`) that imports the student's file behind
an audit hook (:mod:`sim.course.guard`). Whatever happens there (an exception, an endless loop, a
flood of output, ``sys.exit`` or ``os._exit``, a wrong return type, running out of memory, a
refused file, process or socket) comes back as a score of 0 with a one-line reason, never as a
traceback in the grader.

When the grader runs as root (Gradescope), the child runs as an unprivileged user
(``$PROTOLAB_SANDBOX_USER``, default ``protolab-sandbox``, made with ``useradd`` if missing) when
that user exists or can be made and can run this Python; :data:`RUN_AS` says who, and
:data:`RUN_AS_NOTE` why not.

``isolate=False`` calls the judge in this process: only for the kit's own tests of its own
reference solutions, which are not hostile (student functions still run in their own host).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path

from .judges import Judged, failed, resolve

__all__ = ["run_test", "judge_here", "host_command", "grader_error", "GRADER_ERROR", "LIMITS", "sandbox_user", "RUN_AS", "RUN_AS_NOTE"]

#: Resource limits of a judged child process.
LIMITS = {"memory_mb": 2048, "file_mb": 32, "output_kb": 256, "copy_mb": 8}

_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding the ``sim`` package
_BOOT = "import sys; sys.path.insert(0, sys.argv[1]); from sim.course.sandbox import child_main; child_main()"
#: The interpreter judged code runs in.
PYTHON = sys.executable
#: ``(name, uid, gid)`` of the user judged code runs as when the grader is root; None: as is.
RUN_AS: tuple | None = None
#: Why judged code runs as root although the grader is root ("" when it does not, or not known yet).
RUN_AS_NOTE = ""


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


_HOST_BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); from sim.course.remote import host_main; "
              "host_main(sys.argv[2])")


def host_command(path: Path, seed: int) -> tuple[list[str], dict, str]:
    """``(argv, env, cwd)`` of a host process for the student's file at ``path`` with hash seed
    ``seed``: the one way student code is started. Python runs with ``-s -P`` and an environment
    made here alone (so ``PYTHONHASHSEED`` applies: each host of a module gets its own seed)."""
    folder = str(Path(path).parent)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": folder, "LANG": "C.UTF-8", "TMPDIR": folder,
           "PYTHONHASHSEED": str(seed), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1"}
    return [sys.executable, "-s", "-P", "-c", _HOST_BOOT, _ROOT, str(path)], env, folder


def _private_paths(v: Judged, sub: Path) -> Judged:
    """Name the student's folder as ``{dir}``, never the sandbox's private copy."""
    from dataclasses import replace

    return replace(v, message=v.message.replace(str(sub), "{dir}"))


def child_main() -> None:
    """The child's entry: the request is a JSON document on stdin; the answer goes to stdout as
    ``pid N START`` lines (host processes it started) and one ``result {...}`` line."""
    req = json.loads(sys.stdin.buffer.read())
    LIMITS.update(req.get("limits", {}))  # the grader's limits, whatever this module's defaults
    _apply_limits(float(req["timeout"]))
    # stdout is kept for the verdict alone; fd 0 reads nothing, fd 1 writes to the log (stderr)
    res = os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    from . import remote

    def started(pid: int) -> None:
        os.write(res, f"pid {pid} {_start_time(pid)}\n".encode())

    remote.on_host_started = started
    try:
        verdict = judge_here(req["judge"], Path(req["submission"]), req["args"])
    except BaseException as e:  # pragma: no cover - only a KeyboardInterrupt-like escape
        verdict = failed(_one_line(f"the judge stopped: {type(e).__name__}: {e}"))
    data = verdict.to_dict()
    data["output"] = getattr(judge_here, "last_output", "")[-2000:]
    data["flooded"] = getattr(judge_here, "flooded", False)
    try:
        text = json.dumps(data, default=str)
    except (TypeError, ValueError):
        data["witness"] = None
        text = json.dumps(data, default=str)
    blob = ("result " + text + "\n").encode()
    while blob:
        blob = blob[os.write(res, blob):]
    sys.stdout.flush()
    os._exit(0)  # no atexit handlers


def _apply_limits(timeout: float) -> None:
    """The child's own limits; its host processes inherit them."""
    import resource

    mb = 1024 * 1024
    for res, value in (
        (resource.RLIMIT_AS, LIMITS["memory_mb"] * mb),
        (resource.RLIMIT_FSIZE, LIMITS["file_mb"] * mb),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_CPU, int(timeout) + 2),
    ):
        try:
            resource.setrlimit(res, (value, value))
        except (ValueError, OSError):  # pragma: no cover - a platform without that limit
            pass
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing


def _start_time(pid: int) -> str:
    """When ``pid`` started (field 22 of /proc/PID/stat), to tell it from a later process with its pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return "-"


def _kill_leftovers(pids: list) -> None:
    """Kill the host processes a child reported that outlived it (same pid and start time only)."""
    for pid, start in pids:
        if start == "-" or _start_time(pid) != start:
            continue
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


# ---------------------------------------------------------------------------- running as another user

_USER_LOCK = threading.Lock()
_USER_DONE = False


def sandbox_user(folder: str | Path | None = None) -> tuple[int, int] | None:
    """``(uid, gid)`` to run judged code as when this process is root, having given it ``folder``
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
    import pwd

    name = os.environ.get("PROTOLAB_SANDBOX_USER", "protolab-sandbox")
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        try:
            subprocess.run(["useradd", "--system", "--no-create-home", name], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30, check=False)
        except (OSError, subprocess.SubprocessError):
            pass
        try:
            pw = pwd.getpwnam(name)
        except KeyError:
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


def run_test(judge: str, submission: Path, args: dict, *, timeout: float, isolate: bool = True) -> dict:
    """Judge ``submission`` with ``judge``; a dict with score (0..1), message, reproduce, witness,
    output (what the student's code printed, cut short) and seconds."""
    import time

    t0 = time.perf_counter()
    if not isolate:
        v = judge_here(judge, submission, args).to_dict()
        v.update(output=getattr(judge_here, "last_output", ""), flooded=getattr(judge_here, "flooded", False))
        v["seconds"] = round(time.perf_counter() - t0, 3)
        return _flood_note(v)
    with tempfile.TemporaryDirectory(prefix="protolab-judge-", ignore_cleanup_errors=True) as tmp:
        tmpd = Path(tmp)
        sub = tmpd / "submission"
        try:
            _copy_submission(Path(submission), sub)
            user = sandbox_user(tmpd)
        except OSError as e:
            return {**failed(f"the submission cannot be read: {e}").to_dict(), "seconds": 0.0, "output": ""}
        request = json.dumps({"judge": judge, "submission": str(sub), "args": args, "timeout": timeout,
                              "limits": LIMITS}).encode()
        who = {"user": user[0], "group": user[1], "extra_groups": []} if user is not None else {}
        with tempfile.TemporaryFile() as log:  # never named on disk
            proc = subprocess.Popen([PYTHON, "-I", "-c", _BOOT, _ROOT], cwd=sub, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=log, env=_env(str(tmpd)), start_new_session=True,
                                    **who)
            out, timed_out = b"", False
            try:
                out, _ = proc.communicate(request, timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill(proc)
                try:
                    out, _ = proc.communicate(timeout=5)
                except (subprocess.TimeoutExpired, ValueError, OSError):  # pragma: no cover
                    out = b""
            finally:
                _kill(proc)
            pids, result = _parse(out or b"")
            _kill_leftovers(pids)
            seconds = round(time.perf_counter() - t0, 3)
            if timed_out:
                return {**failed(f"did not finish within {timeout:g} s: an endless loop, or far too slow "
                                 "(each test has its own time limit)").to_dict(), "seconds": seconds,
                        "output": _tail(log)}
            if result is not None:
                result["seconds"] = seconds
                return _flood_note(result)
            rc = proc.returncode
            if rc is not None and rc < 0:
                sig = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
                why = {"SIGXCPU": f"used more than {int(timeout) + 2} s of CPU",
                       "SIGKILL": "was killed (out of memory?)",
                       "SIGSEGV": "crashed the interpreter (SIGSEGV)"}.get(sig, f"was stopped by {sig}")
            else:
                why = f"ended with exit status {rc} before giving a verdict"
            tail = _tail(log)
            last = tail.strip().splitlines()[-1] if tail.strip() else ""
            return {**failed(_one_line(f"the judged process {why}" + (f": {last}" if last else ""))).to_dict(),
                    "seconds": seconds, "output": tail}


def _parse(out: bytes) -> tuple:
    """The child's stdout: the host pids it reported, and its verdict (None if it gave none)."""
    pids, result = [], None
    for line in out.splitlines():
        if line.startswith(b"pid "):
            try:
                _, pid, start = line.split()
                pids.append((int(pid), start.decode()))
            except ValueError:
                pass
        elif line.startswith(b"result "):
            try:
                result = json.loads(line[7:])
            except ValueError:
                result = None
    return pids, result if isinstance(result, dict) else None


def _flood_note(v: dict) -> dict:
    if v.get("flooded") and "printed more than" not in v.get("message", ""):
        v["message"] = v.get("message", "") + f" (your code printed more than {LIMITS['output_kb']} KB; the rest was dropped)"
    return v


def _tail(log, n: int = 2000) -> str:
    """The last ``n`` bytes of the child's log (an open file)."""
    try:
        log.seek(0, os.SEEK_END)
        size = log.tell()
        log.seek(max(0, size - n))
        return log.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return ""


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover
        pass
