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

import json
import sys
from pathlib import Path

from .. import digest as _digest
from ..design import DesignError, Intent
from ..errors import InputError

__all__ = ["RemoteModule", "RemoteDesign", "RemoteError", "host_main", "encode", "decode", "fatal", "printed",
           "reset"]

#: The longest answer line a host may send (characters).
REPLY_LIMIT = 32 * 1024 * 1024

# ---------------------------------------------------------------------------- what ended the test (judge side)

_FATAL: list = []  # the first fatal thing a host did since reset()
_PRINTED = [0]  # the most characters any host printed since reset()
#: Called with each host's pid as it starts (the sandbox's child reports them to the grader, which
#: kills any that outlive the test).
on_host_started = None


def reset() -> None:
    """Forget what earlier hosts did (the sandbox calls this before each judge)."""
    _FATAL.clear()
    _PRINTED[0] = 0


def fatal() -> str | None:
    """The first thing a student's host did since :func:`reset` that ends its test, if any."""
    return _FATAL[0] if _FATAL else None


def printed() -> int:
    """The most characters a host printed since :func:`reset`."""
    return _PRINTED[0]


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
    from ..design import Intent as _Intent
    from ..envelope import Envelope
    from ..intake import Decision, IntentRecord, Move, TaskView, Verdict
    from ..machine import Rule, RuleBook, TaskState

    classes = {c.__name__: c for c in (Envelope, TaskView, IntentRecord, Move, Verdict, Rule, RuleBook, _Intent)}
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
_BOOT = "import sys; sys.path.insert(0, sys.argv[1]); from sim.course.remote import host_main; host_main(sys.argv[2])"

_SIGNALS = {"SIGKILL": "was killed (out of memory?)", "SIGXCPU": "used up its CPU time",
            "SIGSEGV": "crashed the interpreter (SIGSEGV; a recursion too deep?)",
            "SIGXFSZ": "wrote a file larger than the limit"}


class RemoteModule:
    """A student's module living in a host process; ``call(name, *args)`` returns JSON values."""

    def __init__(self, path: str | Path, what: str = "design"):
        import subprocess

        self.path = Path(path)
        self.what = what
        self.printed = 0  # characters the student's code printed (discarded)
        self.fatal: str | None = None
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _BOOT, _ROOT, str(self.path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=str(self.path.parent),
            text=True, encoding="utf-8", bufsize=1,
        )
        if on_host_started is not None:
            on_host_started(self.proc.pid)
        hello = self._read("while importing it")
        if "error" in hello:
            self._fatal(hello["error"])
            self.close()
            raise InputError(hello["error"], code=hello.get("code", "E_PLUGIN_IMPORT"))
        self.names: dict = hello["names"]

    def _fatal(self, message: str) -> None:
        message = " ".join(str(message).split())[:600]
        if self.fatal is None:
            self.fatal = message
        if not _FATAL:
            _FATAL.append(message)

    def _ended(self, during: str) -> RemoteError:
        """The host is gone (or no longer answers): why, as an error that is also fatal."""
        import signal
        import subprocess

        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:  # it closed its end of the pipe but runs on
            self.proc.kill()
            self.proc.wait()
            code = None
        name = self.path.name
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

    def _read(self, during: str) -> dict:
        while True:
            try:
                line = self.proc.stdout.readline(REPLY_LIMIT)
            except (ValueError, OSError):  # not UTF-8, or the pipe went away
                line = None
            if not line:
                raise self._ended(during)
            if not line.endswith("\n"):
                self._fatal(f"{self.path.name} sent an answer longer than {REPLY_LIMIT // (1024 * 1024)} MB {during}")
                self.proc.kill()
                raise RemoteError(self.fatal, code="E_DESIGN_OUTPUT")
            try:
                reply = json.loads(line)
            except ValueError:
                reply = None
            if not isinstance(reply, dict):
                self._fatal(f"the process running {self.path.name} wrote on the grader's answer pipe {during}")
                self.proc.kill()
                raise RemoteError(self.fatal, code="E_DESIGN_OUTPUT")
            if "violation" in reply:  # the guard refused something: the test is lost, the answer follows
                self._fatal(reply["violation"])
                continue
            self.printed = reply.get("printed", 0) or 0
            if self.printed > _PRINTED[0]:
                _PRINTED[0] = self.printed
            if reply.get("fatal"):
                self._fatal(reply.get("error", "the student's code failed"))
            return reply

    def call(self, fn: str, *args):
        """Call the student's ``fn``; engine records go both ways (see :func:`encode`)."""
        if self.fatal is not None:
            raise RemoteError(self.fatal, code="E_SANDBOX")
        try:
            self.proc.stdin.write(json.dumps({"fn": fn, "args": encode(list(args))}) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._ended(f"before {fn} was called") from None
        reply = self._read(f"during {fn}")
        if "error" in reply:
            raise RemoteError(reply["error"], code=reply.get("code", "E_DESIGN_RAISED"), kind=reply.get("kind", ""),
                              kinds=reply.get("kinds", ()))
        return decode(reply["value"])

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
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except (OSError, ValueError):
                pass


class RemoteDesign:
    """An envelope design whose functions run in a :class:`RemoteModule` host."""

    def __init__(self, path: str | Path):
        self.module = RemoteModule(path, "design")
        names = self.module.names
        missing = [n for n in ("idempotency_key", "payload", "evidence_refs") if names.get(n) != "function"]
        if missing or "DIGEST_SCHEME" not in names:
            self.module.close()
            need = missing[0] if missing else "DIGEST_SCHEME"
            raise InputError(f"design file {path} lacks {need!r} (it must define: idempotency_key, payload, "
                             "evidence_refs, DIGEST_SCHEME)", code="E_PLUGIN_INCOMPLETE")
        self.digest_scheme = names["DIGEST_SCHEME"]
        if self.digest_scheme not in _digest.SCHEMES:
            self.module.close()
            raise InputError(f"design file {path}: DIGEST_SCHEME is {self.digest_scheme!r}; expected one of: "
                             f"{', '.join(_digest.SCHEMES)}", code="E_PLUGIN_INCOMPLETE")
        self.name = Path(path).name

    def _call(self, fn: str, intent: Intent):
        return self.module.call(fn, intent)

    def idempotency_key(self, intent: Intent):
        return self._call("idempotency_key", intent)

    def payload(self, intent: Intent):
        return self._call("payload", intent)

    def evidence_refs(self, intent: Intent):
        return self._call("evidence_refs", intent)

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


def host_main(path: str) -> None:
    """Wall this process in, import the student's file, then answer ``{"fn", "args"}`` lines
    until the judge closes the pipe."""
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
        import resource

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        if limit > 0:
            memory = f" (the limit is {limit // (1024 * 1024)} MB)"
        if os.geteuid() != 0:  # no process of its own, at the kernel's level too (root ignores the limit)
            resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
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


def remote_callable(path: str | Path, fn: str, what: str):
    """``(function, host)``: the student's ``fn`` from the file at ``path``, running in its own
    host process; calling the function calls it there. Close the host when done."""
    host = RemoteModule(path, what)
    if host.names.get(fn) != "function":
        host.close()
        raise InputError(f"{what} file {path} lacks the function {fn!r}", code="E_PLUGIN_INCOMPLETE")

    def call(*args):
        return host.call(fn, *args)

    call.__name__ = fn
    return call, host
