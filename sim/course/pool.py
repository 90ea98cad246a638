"""Warm judge processes: many tests, many submissions, no process start per test.

A judge is the kit's own code (the simulator, the invariants, the hidden cases); the student's
code never runs in it. It runs the student's code in *host* processes (:mod:`sim.course.remote`),
started by :func:`sim.course.sandbox.start_host` in the sandbox (bubblewrap, or the fallback).
Starting a fresh judge process for every test cost more than the judging itself (importing the
simulator, working out the reference runs again), so the grader keeps ``jobs`` judge processes
alive and hands them a submission at a time over a pipe, one JSON line each way:

- the request (the submission's private copy, its tests, their arguments, hidden ones included)
  goes over the judge's stdin and is never written to disk;
- each judge process runs with the sandbox's limits (memory, file size, no core files) in a new
  session in an empty private folder, with a clean environment, as the sandbox's user when the
  grader is root and that user can run this Python;
- the tests of one submission run one after another in one judge process, sharing the student's
  hosts and one budget of the student's time (:func:`sim.course.remote.submission`): a loop is
  reported within that budget, not once per test;
- the judge process says which hosts it started (``{"host": pid}``); the parent holds each test to
  its wall-clock limit: past it, the judge process and its hosts are killed (and waited for: no
  process of the submission outlives its grading), the test scores 0 with the reason, and a fresh
  judge process takes the next test;
- a judge process that dies (killed by the kernel, a bug) costs that test, never the batch.
"""

from __future__ import annotations

import json
import os
import queue
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .judges import failed

__all__ = ["JudgePool", "private_copy"]

_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding the ``sim`` package
_BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); del sys.argv[1]; "
         "from sim.course.pool import worker_main; worker_main()")


def worker_main() -> None:
    """A judge process: answer one request line at a time until stdin closes. A request is one
    submission: ``{"submission", "tests": [{"name", "judge", "args"}], "budget"}``; the answer is a
    ``{"start": NAME}`` line as each test begins and a ``{"test": NAME, ...verdict}`` line as it ends,
    then ``{"done": true}``. The tests share the student's host processes and one time budget."""
    from . import remote, sandbox
    from .sandbox import judge_here

    proto_in, proto_out = sys.stdin, sys.stdout
    # judge_here swaps sys.stdout/err for the judged call; outside it nothing should print, but if
    # it does, it must not corrupt the protocol
    sys.stdout = sys.stderr = open(os.devnull, "w")

    def say(obj: dict) -> None:
        try:
            text = json.dumps(obj, default=str)
        except (TypeError, ValueError):
            obj["witness"] = obj["grid"] = None
            text = json.dumps(obj, default=str)
        proto_out.write(text + "\n")
        proto_out.flush()

    # each host's pid, as it starts: if this process has to be killed, the grader waits for them to end too
    remote.on_host_started = lambda pid: say({"host": pid})
    from .judges import forget_submission

    for line in proto_in:
        req = json.loads(line)
        forget_submission()  # judged as a fresh process would judge it, whatever this one judged before
        with remote.submission(req.get("budget")):
            for t in req["tests"]:
                say({"start": t["name"]})
                try:
                    verdict = judge_here(t["judge"], Path(req["submission"]), t["args"], keep_hosts=True)
                    data = verdict.to_dict()
                except BaseException as e:  # noqa: BLE001 - a judge bug must not end the worker silently
                    from .sandbox import grader_error

                    data = grader_error(str(t.get("judge", "?")), e).to_dict()
                data["output"] = (getattr(judge_here, "last_output", "") or "")[-2000:]
                data["flooded"] = bool(getattr(judge_here, "flooded", False))
                data["sandbox"] = sandbox.describe()
                say({"test": t["name"], **data})
        say({"done": True})


def _limits() -> None:
    """Runs in the judge process between fork and exec: the sandbox's limits but CPU time (a judge
    process lives for many tests; the parent holds each test to its wall-clock limit)."""
    from .limits import apply_limits
    from .sandbox import LIMITS

    apply_limits(memory_mb=LIMITS["memory_mb"], file_mb=LIMITS["file_mb"])


class _Worker:
    def __init__(self):
        from . import sandbox

        self.home = tempfile.mkdtemp(prefix="protolab-judge-")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.home, "LANG": "C.UTF-8",
               "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
        for k in ("PROTOLAB_SANDBOX", "PROTOLAB_SANDBOX_USER"):  # which sandbox, as whom (sandbox.box)
            if os.environ.get(k):
                env[k] = os.environ[k]
        self.hosts: list[int] = []  # pidfds of the hosts it started (see watch)
        kw = {}
        drop = getattr(sandbox, "sandbox_user", None)  # (uid, gid) to run as when the grader is root
        user = drop(self.home) if callable(drop) else None
        if user is not None:
            kw.update(user=user[0], group=user[1], extra_groups=[])
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _BOOT, _ROOT], cwd=self.home, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, start_new_session=True,
            preexec_fn=_limits, bufsize=0, **kw,
        )
        self._buf = b""

    def send(self, request: dict) -> bool:
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def line(self, deadline: float) -> dict | None:
        """The next answer line, or None when ``deadline`` (monotonic) passed or the process died."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        try:
            out = json.loads(line)
        except ValueError:
            return None
        return out if isinstance(out, dict) else None

    def watch(self, pid) -> None:
        """A host this judge process started: a pidfd to it, so that the host's end can be waited for."""
        try:
            self.hosts.append(os.pidfd_open(int(pid)))
        except (AttributeError, OSError, ValueError, TypeError):  # gone already, or an old kernel
            pass

    def reap(self) -> None:
        """Every host this judge process started has ended (any left is killed, and waited for)."""
        for fd in self.hosts:
            try:
                if not select.select([fd], [], [], 0)[0]:
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
                    select.select([fd], [], [], 10)  # readable once it (and, in bwrap, its PID namespace) is gone
            except OSError:
                pass
            finally:
                os.close(fd)
        self.hosts.clear()

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        self.reap()
        import shutil

        shutil.rmtree(self.home, ignore_errors=True)

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class JudgePool:
    """``jobs`` warm judge processes; :meth:`run` is safe to call from many threads at once."""

    def __init__(self, jobs: int = 2):
        self.jobs = max(1, jobs)
        self.started = 0  # judge processes started (a restart follows a test that ran past its limit, or a death)
        self._idle: queue.SimpleQueue = queue.SimpleQueue()
        self._all: set[_Worker] = set()
        self._lock = threading.Lock()
        self._closed = False

    def _take(self) -> _Worker:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            w = _Worker()
            with self._lock:
                self._all.add(w)
                self.started += 1
            return w

    def _drop(self, w: _Worker) -> None:
        w.kill()
        with self._lock:
            self._all.discard(w)

    def run_submission(self, folder: Path, tests: list, *, budget: float | None = None, on_result=None) -> dict:
        """Judge the submission copy at ``folder`` with ``tests`` (catalog Tests) in one judge process,
        one after another, sharing the student's hosts and ``budget``: ``{name: verdict dict}`` (each
        with score, message, reproduce, witness, output, seconds, sandbox). Each test is held to its own wall-clock limit
        from the moment it starts; past it (or if the process dies), that test scores 0 with the
        reason and the rest go on in a fresh judge process. ``on_result(name, verdict)`` is called as
        each test ends."""
        from .sandbox import _flood_note

        out: dict[str, dict] = {}
        todo = list(tests)
        while todo:
            w = self._take()
            by_name = {t.name: t for t in todo}
            ok = w.send({"submission": str(folder), "budget": budget,
                         "tests": [{"name": t.name, "judge": t.judge, "args": t.args} for t in todo]})
            current, t0 = None, time.perf_counter()
            deadline = time.monotonic() + 30.0  # until the first test starts
            finished = False
            while ok:
                msg = w.line(deadline)
                if msg is None:
                    break
                if "host" in msg:
                    w.watch(msg["host"])
                elif "start" in msg:
                    current = by_name.get(msg["start"])
                    t0 = time.perf_counter()
                    deadline = time.monotonic() + (current.timeout if current is not None else 30.0)
                elif "test" in msg:
                    name = msg.pop("test")
                    msg["seconds"] = round(time.perf_counter() - t0, 3)
                    out[name] = _flood_note(msg)
                    todo = [t for t in todo if t.name != name]
                    current = None
                    if on_result is not None:
                        on_result(name, out[name])
                elif msg.get("done"):
                    finished = True
                    break
            if finished:
                w.reap()  # the submission's hosts ended with it
                if self._closed:
                    w.close()
                else:
                    self._idle.put(w)
                continue
            # the process died or a test ran past its limit: that test is lost, the rest go on elsewhere
            code = w.proc.poll()
            self._drop(w)
            lost = current if current is not None else (todo[0] if todo else None)
            if lost is None:
                break
            seconds = round(time.perf_counter() - t0, 3)
            if code is None or code == -signal.SIGKILL and seconds >= lost.timeout:
                why = (f"did not finish within {lost.timeout:g} s: an endless loop, or far too slow "
                       "(each test has its own time limit)")
            else:
                why = (f"the judging process ended (exit status {code}) before giving a verdict: your code took "
                       "it down (out of memory?)")
            out[lost.name] = {**failed(why).to_dict(), "seconds": seconds, "output": ""}
            if on_result is not None:
                on_result(lost.name, out[lost.name])
            todo = [t for t in todo if t.name != lost.name]
        return out

    def run(self, judge: str, folder: Path, args: dict, *, timeout: float) -> dict:
        """One test (see :meth:`run_submission`)."""
        from types import SimpleNamespace

        t = SimpleNamespace(name="test", judge=judge, args=args, timeout=timeout)
        return self.run_submission(folder, [t])["test"]

    def close(self) -> None:
        self._closed = True
        with self._lock:
            workers = list(self._all)
            self._all.clear()
        for w in workers:
            w.close()

    def __enter__(self) -> "JudgePool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def private_copy(src: Path, stack) -> tuple[Path, str | None]:
    """A private copy of the submission folder ``src`` (regular files only, no links out, size
    capped), removed when ``stack`` (an ExitStack) closes: ``(folder, None)`` or ``(None, why)``."""
    from .sandbox import _copy_submission

    tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="protolab-sub-")))
    dest = tmp / "submission"
    try:
        _copy_submission(Path(src), dest)
    except OSError as e:
        return None, f"the submission cannot be read: {e}"
    os.chmod(tmp, 0o755)
    from .sandbox import sandbox_user

    sandbox_user(tmp)  # when the grader is root: the sandbox's user owns the copy (it may write there)
    return dest, None
