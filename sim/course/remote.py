"""Student functions called across a process boundary.

A judge must not share a process with the code it judges: a design that patched
``sim.invariants.check`` at import time would otherwise grade itself. :class:`RemoteModule`
starts a host process (``python -I``) that imports the student's file and answers calls over a
pipe, one JSON line each way; the judge, the simulator and the invariants stay in the judge's
own process, which never imports the student's file. The host inherits the sandbox's limits,
user and process group, so the test's timeout ends it too.

Before it imports the student's file the host walls itself in (:mod:`sim.course.guard`): the
checkout that holds ``sim`` leaves its ``sys.path`` and ``argv``, an audit hook refuses files
outside the submission's folder, processes, signals, sockets and ``ctypes``, and the protocol
moves to private file descriptors (what the code prints is counted, never mixed with answers).

Some things a student's code does end the test, whatever the judge makes of the failing call:
a refusal of the guard, ``sys.exit`` or ``os._exit``, running out of memory, an import that
fails, a value that cannot cross the pipe. The first of them in this process is kept
(:func:`fatal`) and the sandbox turns the test into a 0 with that reason.

:class:`RemoteDesign` is an envelope design whose three functions run in such a host: the
simulator calls it exactly as it calls :data:`sim.design.REFERENCE`.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

from .. import digest as _digest
from ..design import DesignError, Intent
from ..errors import InputError

__all__ = ["RemoteModule", "RemoteDesign", "RemoteError", "host_main", "encode", "decode", "fatal", "printed",
           "reset", "budget", "submission", "shared", "close_shared", "CALL_SECONDS", "IMPORT_SECONDS",
           "SUBMISSION_SECONDS", "A", "B"]

#: The two host processes of a module, by name. Every call says which one answers it (A unless the
#: judge asks for B on purpose): a judge that compares two answers across processes names both, so a
#: verdict never depends on how many calls came before it.
A, B = 0, 1

#: The longest answer line a host may send (characters).
REPLY_LIMIT = 32 * 1024 * 1024

# ---------------------------------------------------------------------------- what ended the test (judge side)

_FATAL: list = []  # the first fatal thing a host did since reset()
_PRINTED = [0]  # the most characters any host printed since reset()
#: The longest one call of the student's may take (seconds of wall clock), and an import.
CALL_SECONDS = 5.0
IMPORT_SECONDS = 10.0
#: The time a submission's code may take in all, over every test (seconds; see :func:`submission`).
SUBMISSION_SECONDS = 20.0
#: What is left of the submission's time (seconds; None: no budget) and what it started at.
_BUDGET: list = [None, 0.0]
_KEEP = [False]  # inside submission(): shared() keeps hosts for the submission's later tests
#: Called with each host's pid as it starts (a judge process reports them to the grader, which waits
#: for them to end when it had to kill that judge process).
on_host_started = None


def reset() -> None:
    """Forget what earlier hosts did (the sandbox calls this before each judge)."""
    _FATAL.clear()
    _PRINTED[0] = 0


def budget(seconds: float | None) -> None:
    """Give the submission being judged ``seconds`` of its code's time in all (every call and
    import of every host, over all its tests); None: no budget. A loop is then reported once for
    the whole submission, within that time, not once per test."""
    _BUDGET[0] = seconds
    _BUDGET[1] = seconds or 0.0


@contextlib.contextmanager
def submission(seconds: float | None = SUBMISSION_SECONDS):
    """Judge one submission's tests in this block: they share host processes (started once, ended
    when the block ends) and ``seconds`` of the student's code's time in all."""
    _KEEP[0] = True
    budget(seconds)
    try:
        yield
    finally:
        close_shared()
        _KEEP[0] = False
        budget(None)


def fatal() -> str | None:
    """The first thing a student's host did since :func:`reset` that ends its test, if any; inside
    :func:`submission`, also what ended the submission's shared hosts in an earlier test (a test that
    calls nothing, its judge reusing what earlier tests worked out, still ran on those hosts)."""
    if _FATAL:
        return _FATAL[0]
    return next((m.fatal for m in _SHARED.values() if m.fatal), None)


def printed() -> int:
    """The most characters a host printed since :func:`reset` (inside :func:`submission`: the most
    any of the submission's shared hosts printed so far)."""
    return max([_PRINTED[0], *(m.printed for m in _SHARED.values())])


class RemoteError(DesignError):
    """The student's function raised; ``kind`` is the exception's class name (``ValueError``) and
    ``kinds`` the names of all its classes, most specific first (so ``"ValueError" in kinds`` holds
    for a ``UnicodeEncodeError`` too)."""

    def __init__(self, message: str, *, code: str = "E_DESIGN_RAISED", kind: str = "", kinds: tuple = ()):
        super().__init__(message, code=code)
        self.kind = kind
        self.kinds = tuple(kinds) or ((kind,) if kind else ())


# ---------------------------------------------------------------------------- a codec for the engine's records
#
# Arguments and results cross the pipe as JSON. The engine's frozen dataclasses (Envelope,
# TaskView, IntentRecord, RuleBook, Verdict, Move, Intent) and enums (TaskState, Decision) are
# tagged so that each side rebuilds real objects: a student's decide gets a RuleBook it can call
# .allows() on, and the runtime gets back a Verdict with a Decision in it.


def _registry() -> dict:
    from ..consumer import Allowlist
    from ..design import Intent as _Intent
    from ..envelope import Envelope
    from ..intake import Decision, IntentRecord, Move, TaskView, Verdict
    from ..machine import Rule, RuleBook, TaskState

    classes = {c.__name__: c for c in (Envelope, TaskView, IntentRecord, Move, Verdict, Rule, RuleBook, _Intent,
                                              Allowlist)}
    enums = {e.__name__: e for e in (TaskState, Decision)}
    return {"classes": classes, "enums": enums}


_REG: dict | None = None


def _reg() -> dict:
    global _REG
    if _REG is None:
        _REG = _registry()
    return _REG


def encode(v):
    """A JSON-ready form of ``v`` keeping the engine's record types."""
    import dataclasses
    import enum

    if isinstance(v, enum.Enum):
        return {"__enum__": type(v).__name__, "value": v.value}
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        name = type(v).__name__
        if name in _reg()["classes"]:
            return {"__type__": name, **{f.name: encode(getattr(v, f.name)) for f in dataclasses.fields(v)}}
    if isinstance(v, dict):
        return {str(k): encode(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [encode(x) for x in v]
    if isinstance(v, (frozenset, set)):
        return {"__set__": sorted(encode(x) for x in v)}
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    raise TypeError(f"a {type(v).__name__} cannot cross the pipe")


def decode(v):
    """The objects :func:`encode` describes."""
    import dataclasses

    if isinstance(v, list):
        return [decode(x) for x in v]
    if not isinstance(v, dict):
        return v
    if "__enum__" in v:
        return _reg()["enums"][v["__enum__"]](v["value"])
    if "__set__" in v:
        return frozenset(decode(x) for x in v["__set__"])
    if "__type__" in v:
        cls = _reg()["classes"][v["__type__"]]
        kw = {}
        for f in dataclasses.fields(cls):
            if f.name in v:
                x = decode(v[f.name])
                if isinstance(x, list) and f.name in ("evidence_refs", "refs", "roles", "rules"):
                    x = tuple(x)
                kw[f.name] = x
        return cls(**kw)
    return {k: decode(x) for k, x in v.items()}

_ROOT = str(Path(__file__).resolve().parents[2])

_SIGNALS = {"SIGKILL": "was killed (out of memory?)", "SIGXCPU": "used up its CPU time",
            "SIGSEGV": "crashed the interpreter (SIGSEGV; a recursion too deep?)",
            "SIGXFSZ": "wrote a file larger than the limit"}


class _Host:
    """One host process running the student's file; JSON lines over its stdin and stdout, read with
    a deadline (an unbuffered pipe and a line buffer of our own, so ``select`` sees every byte).
    Started by :func:`sim.course.sandbox.start_host`, the one way student code starts."""

    def __init__(self, path: Path, seed: int):
        import os

        from .sandbox import start_host

        self.proc, self.pid, self.boxed = start_host(path, seed)
        self.seed = seed
        self._buf = b""
        self._pidfd = None  # the host's whole life: readable once every process of it has ended
        if self.pid != self.proc.pid:
            try:
                self._pidfd = os.pidfd_open(self.pid)
            except (AttributeError, OSError):  # an old kernel: killed by pid while its parent holds it
                self._pidfd = None
        if on_host_started is not None:
            on_host_started(self.pid)

    def send(self, obj: dict) -> None:
        self.proc.stdin.write((json.dumps(obj) + "\n").encode("utf-8"))
        self.proc.stdin.flush()

    def line(self, timeout: float) -> bytes | None:
        """The next line (with its newline); b"" when the host is gone; None when ``timeout`` passed
        first; a line without a newline when it is longer than the limit."""
        import os
        import select
        import time

        deadline = time.monotonic() + max(0.0, timeout)
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            if len(self._buf) > REPLY_LIMIT:
                out, self._buf = self._buf, b""
                return out
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                if self._buf:
                    out, self._buf = self._buf, b""
                    return out
                return b""
            self._buf += chunk
        out, _, self._buf = self._buf.partition(b"\n")
        return out + b"\n"

    def status(self, timeout: float = 2.0) -> int | None:
        """How the host ended, as ``Popen.returncode`` says it (a signal as its negative number),
        None if it has not within ``timeout``. bwrap passes a signal on as 128 + N."""
        import subprocess

        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        if self.boxed and code > 128:
            return -(code - 128)
        return code

    def complaint(self) -> str:
        """What bwrap or the interpreter wrote before the host started (never the student's: the
        host sends its own stderr to /dev/null before it imports the student's file)."""
        import os

        try:
            fd = self.proc.stderr.fileno()
            os.set_blocking(fd, False)
            data = os.read(fd, 1 << 16)
        except (OSError, ValueError):
            return ""
        return (data or b"").decode("utf-8", "replace").strip()

    def kill(self) -> None:
        """End the host and every process in it, and wait until they are gone."""
        import signal
        import subprocess

        if self._pidfd is not None:  # the sandbox's first process: its PID namespace ends with it
            try:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            except OSError:
                pass
            try:
                self.proc.wait(timeout=5)  # bwrap ends as soon as the sandbox has
            except subprocess.TimeoutExpired:
                pass
        try:
            self.proc.kill()
        except OSError:  # pragma: no cover - already reaped
            pass
        try:
            self.proc.wait(timeout=5)
        except Exception:  # noqa: BLE001 - nothing more can be done
            pass
        self._gone()

    def _gone(self) -> None:
        """Wait for the sandbox's first process to end (the PID namespace is empty then), and let go of it."""
        import select

        if self._pidfd is not None:
            try:
                select.select([self._pidfd], [], [], 10)
            except (OSError, ValueError):  # pragma: no cover
                pass
            try:
                import os

                os.close(self._pidfd)
            except OSError:  # pragma: no cover
                pass
            self._pidfd = None

    def close(self) -> None:
        import subprocess

        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.kill()
        self._gone()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except (OSError, ValueError):
                pass


class RemoteModule:
    """A student's module living in host processes; ``call(name, *args)`` returns JSON values.

    With ``processes=2`` (the default) two hosts import the file, each with its own fixed hash seed
    (1 for process :data:`A`, 2 for :data:`B`, on every machine). A call goes to the process it
    names (``process=A`` when it names none): a judge that wants to know whether the student's
    function gives the same answer in any process, as a key must when a restarted worker, another
    replica or tomorrow's run computes it again, asks A and B on purpose and compares; hosts never
    take turns, so no verdict depends on how many calls came before it. A key made with ``hash()``,
    ``id()`` or a random salt gives itself away there; one made with a counter, on a second call in
    the same process. Each call is held to :data:`CALL_SECONDS` (an import to
    :data:`IMPORT_SECONDS`) and to what is left of the submission's :func:`budget`; past either, the
    host is killed and the test lost with the reason."""

    def __init__(self, path: str | Path, what: str = "design", *, processes: int = 2):
        self.path = Path(path)
        self.what = what
        self.printed = 0  # characters the student's code printed (discarded)
        self.fatal: str | None = None
        self.shared = False
        self._started = False  # every host has said hello (imported the file): a host that ends now is the code's doing
        self.hosts: list[_Host] = []
        try:
            for seed in range(1, max(1, processes) + 1):
                self.hosts.append(_Host(self.path, seed))
            hellos = [self._read(h, "while importing it", IMPORT_SECONDS) for h in self.hosts]
        except RemoteError as e:
            self._kill_all()
            raise InputError(e.message, code="E_PLUGIN_IMPORT") from None
        except BaseException:  # the sandbox failed (SandboxError: the grader's trouble), or worse
            self._kill_all()
            raise
        bad = next((h for h in hellos if "error" in h), None)
        if bad is not None:
            self._fatal(bad["error"])
            self._kill_all()
            raise InputError(bad["error"], code=bad.get("code", "E_PLUGIN_IMPORT"))
        self._started = True
        self.names: dict = hellos[0]["names"]

    @property
    def proc(self):
        """The first host's process (what a caller that wants one pid sees)."""
        return self.hosts[0].proc

    def _fatal(self, message: str) -> None:
        message = " ".join(str(message).split())[:600]
        if self.fatal is None:
            self.fatal = message
        if not _FATAL:
            _FATAL.append(message)

    def _ended(self, host: _Host, during: str) -> RemoteError:
        """The host is gone (or no longer answers): why, as an error that is also fatal. A host that
        never started (bwrap or the interpreter complained before the student's file was imported)
        is the grader's trouble: :class:`~sim.course.sandbox.SandboxError`, never the student's."""
        import signal

        code = host.status(timeout=2)
        if code is None:  # it closed its end of the pipe but runs on
            host.kill()
        name = self.path.name
        if not self._started:
            said = host.complaint()
            if said and any(w in said for w in ("bwrap:", "Traceback", "Fatal Python error", "Error")):
                from .sandbox import SandboxError

                raise SandboxError(f"the host process for {name} did not start: {' '.join(said.split()[-40:])[:400]}")
        if code is None:
            how = "stopped answering"
        elif code < 0:
            sig = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
            how = _SIGNALS.get(sig, f"was stopped by {sig}")
        else:
            how = f"ended with exit status {code}" + (" (did it call os._exit?)" if code != 1 else "")
        msg = f"the process running {name} {how} {during}"
        self._fatal(msg)
        return RemoteError(msg, code="E_DESIGN_RAISED")

    def _timed_out(self, host: _Host, during: str, limit: float, by_budget: bool) -> RemoteError:
        host.kill()
        if by_budget:
            msg = (f"{self.path.name} used up the time the whole submission may take ({_BUDGET[1]:g} s of its code's time "
                   f"in all) {during}: an endless loop, or far too slow")
        else:
            msg = (f"{self.path.name} did not answer within {limit:g} s {during}: an endless loop, or far too slow "
                   f"(one call may take {CALL_SECONDS:g} s, an import {IMPORT_SECONDS:g} s)")
        self._fatal(msg)
        return RemoteError(msg, code="E_TIMEOUT")

    def _read(self, host: _Host, during: str, limit: float) -> dict:
        import time

        while True:
            left = _BUDGET[0]
            wait = min(limit, left) if left is not None else limit
            t0 = time.monotonic()
            line = host.line(wait)
            if _BUDGET[0] is not None:
                _BUDGET[0] = max(0.0, _BUDGET[0] - (time.monotonic() - t0))
            if line is None:
                raise self._timed_out(host, during, limit, by_budget=left is not None and left < limit)
            if not line:
                raise self._ended(host, during)
            if not line.endswith(b"\n"):
                self._fatal(f"{self.path.name} sent an answer longer than {REPLY_LIMIT // (1024 * 1024)} MB {during}")
                host.kill()
                raise RemoteError(self.fatal, code="E_DESIGN_OUTPUT")
            try:
                reply = json.loads(line)
            except ValueError:
                reply = None
            if not isinstance(reply, dict):
                self._fatal(f"the process running {self.path.name} wrote on the grader's answer pipe {during}")
                host.kill()
                raise RemoteError(self.fatal, code="E_DESIGN_OUTPUT")
            if "violation" in reply:  # the guard refused something: the test is lost, the answer follows
                self._fatal(reply["violation"])
                continue
            self.printed = max(self.printed, reply.get("printed", 0) or 0)
            if self.printed > _PRINTED[0]:
                _PRINTED[0] = self.printed
            if reply.get("fatal"):
                self._fatal(reply.get("error", "the student's code failed"))
            return reply

    def call(self, fn: str, *args, process: int = A):
        """Call the student's ``fn`` in host ``process`` (:data:`A` or :data:`B`; a module started with
        one process answers everything in it); engine records go both ways (see :func:`encode`)."""
        if self.fatal is not None:
            self._fatal(self.fatal)  # the test this call belongs to is lost for the same reason
            raise RemoteError(self.fatal, code="E_SANDBOX")
        host = self.hosts[process if 0 <= process < len(self.hosts) else 0]
        try:
            host.send({"fn": fn, "args": encode(list(args))})
        except (BrokenPipeError, OSError):
            raise self._ended(host, f"before {fn} was called") from None
        reply = self._read(host, f"during {fn}", CALL_SECONDS)
        if "error" in reply:
            raise RemoteError(reply["error"], code=reply.get("code", "E_DESIGN_RAISED"), kind=reply.get("kind", ""),
                              kinds=reply.get("kinds", ()))
        return decode(reply["value"])

    def close(self, force: bool = False) -> None:
        """End the hosts (a shared module stays open until :func:`close_shared`, unless ``force``)."""
        if self.shared and not force:
            return
        for h in self.hosts:
            h.close()

    def _kill_all(self) -> None:
        """End every host now (a failed start: one may still be importing, or looping there)."""
        for h in self.hosts:
            if h.proc.poll() is None:
                h.kill()
            h.close()


_SHARED: dict[tuple, RemoteModule] = {}
_FAILED: dict[tuple, tuple] = {}  # modules that did not import in this submission: (message, code, fatal)


def shared(path: str | Path, what: str = "design", *, processes: int = 2) -> RemoteModule:
    """The student's module at ``path`` in hosts kept for the whole submission: every test of one
    submission (judged in one process, one after another) calls the same hosts, so they start once.
    ``close()`` on it does nothing; :func:`close_shared` ends them all when the submission is done.
    A module that failed to import (or looped there) is not tried again: each later test of the
    submission gets the same failure at once."""
    if not _KEEP[0]:  # outside a submission: a module of its own, closed by its caller
        return RemoteModule(path, what, processes=processes)
    key = (str(Path(path).resolve()), what, processes)
    failed_before = _FAILED.get(key)
    if failed_before is not None:  # it did not import for an earlier test: the same answer, at once
        if failed_before[2] and not _FATAL:
            _FATAL.append(failed_before[2])
        raise InputError(failed_before[0], code=failed_before[1])
    mod = _SHARED.get(key)
    if mod is None:
        try:
            mod = RemoteModule(path, what, processes=processes)
        except InputError as e:  # an import that fails (or loops) costs the submission's time once, not per test
            _FAILED[key] = (e.message, e.code, _FATAL[0] if _FATAL else None)
            raise
        mod.shared = True
        _SHARED[key] = mod
    return mod


def close_shared() -> None:
    """End every shared host (the submission is done)."""
    _FAILED.clear()
    while _SHARED:
        _key, mod = _SHARED.popitem()
        mod.close(force=True)


class RemoteDesign:
    """An envelope design whose functions run in a :class:`RemoteModule` host."""

    def __init__(self, path: str | Path, module: RemoteModule | None = None):
        self.module = module if module is not None else shared(path, "design")
        names = self.module.names
        missing = [n for n in ("idempotency_key", "payload", "evidence_refs") if names.get(n) != "function"]
        if missing or "DIGEST_SCHEME" not in names:
            need = missing[0] if missing else "DIGEST_SCHEME"
            raise InputError(f"design file {path} lacks {need!r} (it must define: idempotency_key, payload, "
                             "evidence_refs, DIGEST_SCHEME)", code="E_PLUGIN_INCOMPLETE")
        self.digest_scheme = names["DIGEST_SCHEME"]
        if self.digest_scheme not in _digest.SCHEMES:
            raise InputError(f"design file {path}: DIGEST_SCHEME is {self.digest_scheme!r}; expected one of: "
                             f"{', '.join(_digest.SCHEMES)}", code="E_PLUGIN_INCOMPLETE")
        self.name = Path(path).name

    def _call(self, fn: str, intent: Intent, process: int = A):
        return self.module.call(fn, intent, process=process)

    def idempotency_key(self, intent: Intent, process: int = A):
        return self._call("idempotency_key", intent, process)

    def payload(self, intent: Intent, process: int = A):
        return self._call("payload", intent, process)

    def evidence_refs(self, intent: Intent, process: int = A):
        return self._call("evidence_refs", intent, process)

    def close(self) -> None:
        self.module.close()


# ---------------------------------------------------------------------------- the host side


def _where(e: BaseException | None, sub: str) -> str:
    """`` at design.py line 7``: the innermost frame of ``e`` in the submission's folder (no file is read)."""
    import traceback

    line, seen = "", 0
    while e is not None and not line and seen < 5:
        for frame, lineno in traceback.walk_tb(e.__traceback__):
            name = frame.f_code.co_filename
            if name.startswith(sub + "/"):
                line = f" at {name[len(sub) + 1:]} line {lineno}"
        e, seen = e.__cause__ or e.__context__, seen + 1
    return line


def host_main(path: str, limits: str = "") -> None:
    """Wall this process in (the limits given as JSON, ``{"memory_mb", "file_mb"}``, then the
    guard), import the student's file, then answer ``{"fn", "args"}`` lines until the judge closes
    the pipe."""
    import dataclasses  # noqa: F401 - encode/decode need them; imported before the guard
    import enum  # noqa: F401
    import io
    import os

    from .. import __file__ as sim_init
    from ..plugins import load_module
    from . import guard

    # the protocol moves to private descriptors; 0, 1 and 2 become /dev/null
    rpc_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
    out_fd = os.dup(1)
    rpc_out = os.fdopen(out_fd, "w", encoding="utf-8")
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)

    class Counter(io.TextIOBase):
        """The student's stdout and stderr: counted, never kept, never mixed with the protocol."""

        total = 0

        def writable(self) -> bool:
            return True

        def write(self, s) -> int:
            Counter.total += len(str(s))
            return len(str(s))

    sys.stdout = sys.stderr = Counter()
    sys.stdin = io.StringIO("")

    def send(obj) -> None:
        obj["printed"] = Counter.total
        rpc_out.write(json.dumps(obj) + "\n")
        rpc_out.flush()

    file = os.path.realpath(path)
    sub = os.path.dirname(file)
    name = os.path.basename(file)
    _reg()
    memory = ""
    try:
        from .limits import apply_limits

        wanted = json.loads(limits) if limits else {}
        limit = apply_limits(memory_mb=wanted.get("memory_mb"), file_mb=wanted.get("file_mb"), no_processes=True)
        if limit > 0:
            memory = f" (the limit is {limit // (1024 * 1024)} MB)"
    except (ImportError, ValueError, OSError):  # pragma: no cover - a platform without these limits
        pass
    # the checkout leaves the path and argv; bytecode is not written; temporary files go to the folder
    # (an installed sim lives in site-packages, with no checkout around it to hide)
    root = os.path.realpath(_ROOT)
    checkout = None if root in guard.installed_roots() else root
    if checkout is not None:
        sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) != checkout]
        for key in [k for k in sys.path_importer_cache if isinstance(k, str) and os.path.realpath(k) == checkout]:
            del sys.path_importer_cache[key]
    sys.argv[:] = sys.argv[:1]
    sys.dont_write_bytecode = True
    os.environ["TMPDIR"] = sub
    guard.install(sub, checkout=checkout, package=os.path.dirname(sim_init), report_fd=out_fd,
                  extra_read=[p for p in sys.path if p])  # the installation's paths (.pth files included)

    try:
        module = load_module(file, os.path.splitext(name)[0])
    except BaseException as e:  # InputError: one line already (SystemExit and MemoryError included)
        msg = getattr(e, "message", None) or f"{name} does not import: {type(e).__name__}: {e}"
        where = _where(e.__context__ or e, sub)
        send({"error": msg + (where if where and where not in msg else ""), "code": getattr(e, "code", "E_PLUGIN_IMPORT"),
              "fatal": True})
        return
    names = {}
    for n in dir(module):
        try:
            v = getattr(module, n)
        except Exception:  # a module __getattr__ of the student's
            continue
        if callable(v):
            names[n] = "function"
        elif isinstance(v, (str, int, float, bool)):
            names[n] = v
    send({"names": names})
    for line in rpc_in:
        req = json.loads(line)
        fn = getattr(module, req["fn"], None)
        if not callable(fn):
            send({"error": f"{name} has no function {req['fn']!r}", "code": "E_PLUGIN_INCOMPLETE"})
            continue
        args = decode(req["args"])
        reply = None
        try:
            value = fn(*args)
        except SystemExit as e:
            reply = {"error": f"{req['fn']} called sys.exit({e.code!r}){_where(e, sub)}; it must return, not end the "
                              "process", "code": "E_DESIGN_RAISED", "fatal": True}
        except MemoryError as e:
            reply = {"error": f"{req['fn']} ran out of memory{memory}{_where(e, sub)}", "code": "E_DESIGN_RAISED",
                     "fatal": True}
        except RecursionError as e:
            reply = {"error": f"{req['fn']} recursed without end{_where(e, sub)}", "code": "E_DESIGN_RAISED"}
        except Exception as e:
            msg = " ".join(str(e).split())[:200]
            reply = {"error": f"{req['fn']} raised {type(e).__name__}: {msg}{_where(e, sub)}", "code": "E_DESIGN_RAISED",
                     "kind": type(e).__name__, "kinds": [c.__name__ for c in type(e).__mro__]}
        except BaseException as e:  # KeyboardInterrupt and the like, raised by the student's code
            reply = {"error": f"{req['fn']} raised {type(e).__name__}{_where(e, sub)}", "code": "E_DESIGN_RAISED",
                     "fatal": True}
        violation = guard.violation()
        if violation is not None:  # refused, even if the code caught the PermissionError
            reply = {"error": violation, "code": "E_SANDBOX", "fatal": True}
        if reply is None:
            try:
                reply = {"value": encode(value)}
                send(reply)
                continue
            except (TypeError, ValueError, RecursionError, MemoryError):
                kind = type(value).__name__
                reply = {"error": f"{req['fn']} returned {'an' if kind[:1] in 'aeiouAEIOU' else 'a'} {kind}, which cannot "
                                  "be sent to the grader (return plain data: str, int, float, bool, None, list, dict)",
                         "code": "E_DESIGN_OUTPUT", "fatal": True}
        send(reply)


def remote_callable(path: str | Path, fn: str, what: str, *, processes: int = 2):
    """``(function, host)``: the student's ``fn`` from the file at ``path``, running in its own
    host processes; ``function(*args, process=A)`` calls it in the process named (A unless the
    caller says B). Close the host when done."""
    host = shared(path, what, processes=processes)
    if host.names.get(fn) != "function":
        raise InputError(f"{what} file {path} lacks the function {fn!r}", code="E_PLUGIN_INCOMPLETE")

    def call(*args, process: int = A):
        return host.call(fn, *args, process=process)

    call.__name__ = fn
    return call, host
