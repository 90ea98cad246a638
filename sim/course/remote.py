"""Student functions called across a process boundary.

A judge must not share a process with the code it judges: a design that patched
``sim.invariants.check`` at import time would otherwise grade itself. :class:`RemoteModule`
starts a host process (``python -I``) that imports the student's file and answers calls over a
pipe, one JSON line each way; the judge, the simulator and the invariants stay in the judge's
own process, which never imports the student's file. The host inherits the sandbox's limits,
user and process group, so the test's timeout ends it too.

This module is the judge's side. The host's side is :mod:`sim.course.host`, the one module of the
kit's that runs where student code runs: before it imports the student's file it walls itself in
(:mod:`sim.course.guard`): the checkout that holds ``sim`` leaves its ``sys.path`` and ``argv``, an
audit hook refuses files outside the submission's folder (and the kit's engine), processes,
signals, sockets and ``ctypes``, and the protocol moves to private file descriptors above 255 (what
the code prints is counted, never mixed with answers). Every line a host writes starts with a random
token :class:`_Host` handed it before the student's file was imported: a line the code writes on a
descriptor it found is reported as such (the test is lost with that reason), never read as an
answer. Nothing a module holds at import crosses the pipe unless a judge asks for its name
(:attr:`RemoteModule.names`), and then only a small plain value.

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
from pathlib import Path

from .. import digest as _digest
from ..design import DesignError, Intent
from ..errors import InputError

__all__ = ["RemoteModule", "RemoteDesign", "RemoteError", "encode", "decode", "fatal", "printed",
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
    return {"classes": classes, "enums": enums, "allowlist": Allowlist}


_REG: dict | None = None


def _reg() -> dict:
    global _REG
    if _REG is None:
        _REG = _registry()
    return _REG


def encode(v):
    """A JSON-ready form of ``v`` keeping the engine's record types (a consumer's allowlist goes as
    its rows: the host has no state machine to rebuild it from, :class:`sim.course.host.Allowlist`)."""
    import dataclasses
    import enum

    if isinstance(v, _reg()["allowlist"]):
        return {"__allowlist__": v.rules.version,
                "moves": [[r.from_state.value, r.to_state.value, list(r.roles)] for r in v.rules.rules]}
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

#: The fields a host's line may carry, and their types (see :mod:`sim.course.host`).
_REPLY_FIELDS = {"printed": int, "violation": str, "error": str, "code": str, "fatal": bool, "kind": str,
                 "kinds": list, "large": str, "ready": bool}

#: The codes a host sends (sim.course.host): each names something the student's own code did. A line
#: carrying any other code is not the host's. The token keeps a line the code writes blindly out, but
#: code that walks the host's frames can read it (a process cannot hide a value from code it runs);
#: what such a line can then say is bounded to what the code could have caused anyway: an answer, a
#: raise, a refused import, a sandbox violation, never the grader's own trouble.
HOST_CODES = frozenset({"E_PLUGIN_IMPORT", "E_PLUGIN_MISSING", "E_PLUGIN_INCOMPLETE", "E_DESIGN_RAISED",
                        "E_DESIGN_OUTPUT", "E_SANDBOX"})


def _reply(line: bytes, token: bytes) -> dict | None:
    """The host's message on ``line`` (token first, then a JSON object of known fields), or None
    when the line is not the host's (no token) or not one of its messages."""
    if not line.startswith(token + b" "):
        return None
    try:
        reply = json.loads(line[len(token) + 1:])
    except ValueError:
        return None
    if not isinstance(reply, dict) or not reply:
        return None
    for k, v in reply.items():
        want = _REPLY_FIELDS.get(k)
        if k == "value":
            continue
        if want is None or not isinstance(v, want) or (want is int and isinstance(v, bool)):
            return None
    if "code" in reply and reply["code"] not in HOST_CODES:
        return None
    return reply

_SIGNALS = {"SIGKILL": "was killed (out of memory?)", "SIGXCPU": "used up its CPU time",
            "SIGSEGV": "crashed the interpreter (SIGSEGV; a recursion too deep?)",
            "SIGXFSZ": "wrote a file larger than the limit"}


class _Host:
    """One host process running the student's file; JSON lines over its stdin and stdout, read with
    a deadline (an unbuffered pipe and a line buffer of our own, so ``select`` sees every byte).
    Started by :func:`sim.course.sandbox.start_host`, the one way student code starts."""

    def __init__(self, path: Path, seed: int, kind: str = "design"):
        import os
        import secrets

        from .sandbox import start_host

        self.proc, self.pid, self.boxed = start_host(path, seed, kind)
        self.seed = seed
        self._buf = bytearray()
        self._scanned = 0  # bytes of _buf already searched for a newline
        # every line the host writes starts with this (handed over before the student's file is imported):
        # a line the student's code writes on a descriptor it found is not the host's
        self.token = secrets.token_hex(16).encode()
        try:
            self.send({"token": self.token.decode()})
        except OSError:  # gone already: reading says why
            pass
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
        first; a line without a newline when it is longer than the limit. Each byte is looked at once
        for a newline, so a long answer costs its length, not its length squared."""
        import os
        import select
        import time

        deadline = time.monotonic() + max(0.0, timeout)
        fd = self.proc.stdout.fileno()
        while True:
            at = self._buf.find(b"\n", self._scanned)
            if at >= 0:
                out = bytes(self._buf[: at + 1])
                del self._buf[: at + 1]
                self._scanned = 0
                return out
            self._scanned = len(self._buf)
            if len(self._buf) > REPLY_LIMIT:
                out = bytes(self._buf)
                self._buf.clear()
                self._scanned = 0
                return out
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 1 << 20)
            except OSError:
                chunk = b""
            if not chunk:
                out = bytes(self._buf)
                self._buf.clear()
                self._scanned = 0
                return out
            self._buf += chunk

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
                self.hosts.append(_Host(self.path, seed, what))
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
        #: The module's names, asked of the host one at a time when a judge looks one up (nothing the
        #: module holds at import is sent unless asked for by name): ``names.get("consume") ==
        #: "function"``; a plain value (str, int, float, bool) no larger than
        #: :data:`sim.course.host.VALUE_LIMIT` is itself; a larger one, a :class:`TooLarge`.
        self.names = _Names(self)

    def lookup(self, name: str):
        """What the module's ``name`` is in host :data:`A`: ``"function"``, a plain value (a
        :class:`TooLarge` past the limit), or None (missing, or neither)."""
        if self.fatal is not None:
            self._fatal(self.fatal)
            raise RemoteError(self.fatal, code="E_SANDBOX")
        host = self.hosts[0]
        try:
            host.send({"name": str(name)})
        except (BrokenPipeError, OSError):
            raise self._ended(host, f"before its name {name!r} was looked up") from None
        reply = self._read(host, f"while its name {name!r} was looked up", CALL_SECONDS)
        kind = reply.get("kind")
        if kind == "function":
            return "function"
        if kind == "value":
            if isinstance(reply.get("large"), str):
                return TooLarge(reply["large"])
            v = reply.get("value")
            return v if isinstance(v, (str, int, float, bool)) else None
        return None

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
            reply = _reply(line, host.token)
            if reply is None:  # not the host's: the student's code wrote on a descriptor it found
                self._fatal(f"your code wrote on the grader's private answer pipe {during} (a function returns its "
                            "answer; it never writes it to a file descriptor)")
                host.kill()
                raise RemoteError(self.fatal, code="E_DESIGN_OUTPUT")
            if "violation" in reply:  # the guard refused something: the test is lost, the answer follows
                self._fatal(reply["violation"])
                continue
            self.printed = max(self.printed, reply.get("printed", 0))
            if self.printed > _PRINTED[0]:
                _PRINTED[0] = self.printed
            if reply.get("fatal"):
                self._fatal(reply.get("error") or "the student's code failed")
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
                              kinds=tuple(k for k in reply.get("kinds", ()) if isinstance(k, str)))
        try:
            return decode(reply["value"])
        except (KeyError, TypeError, ValueError, AttributeError, RecursionError):
            self._fatal(f"{fn} returned something the grader cannot read (plain data only: str, int, float, bool, None, "
                        "list, dict)")
            raise RemoteError(self.fatal, code="E_DESIGN_OUTPUT") from None

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


class TooLarge(str):
    """A module's value too large to send (its text says what it is: ``a str of 24,000,000 characters``)."""

    def __repr__(self) -> str:
        return f"<{str(self)}>"


class _Names:
    """A module's names, looked up in its host as a judge asks (``get``, ``in``, ``[]``), each once."""

    _MISSING = object()

    def __init__(self, module: "RemoteModule"):
        self._module, self._seen = module, {}

    def get(self, name: str, default=None):
        if name not in self._seen:
            self._seen[name] = self._module.lookup(name)
        v = self._seen[name]
        return default if v is None else v

    def __contains__(self, name) -> bool:
        return self.get(name) is not None

    def __getitem__(self, name: str):
        v = self.get(name)
        if v is None:
            raise KeyError(name)
        return v


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
