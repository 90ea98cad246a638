"""Student functions called across a process boundary.

A judge must not share a process with the code it judges: a design that patched
``sim.invariants.check`` at import time would otherwise grade itself. :class:`RemoteModule`
starts a host process (``python -I``) that imports the student's file and answers calls over a
pipe, one JSON line each way; the judge, the simulator and the invariants stay in the judge's
own process, which never imports the student's file. The host inherits the sandbox's limits and
process group, so the test's timeout ends it too.

:class:`RemoteDesign` is an envelope design whose three functions run in such a host: the
simulator calls it exactly as it calls :data:`sim.design.REFERENCE`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .. import digest as _digest
from ..design import DesignError, Intent
from ..errors import InputError

__all__ = ["RemoteModule", "RemoteDesign", "RemoteError", "host_main", "encode", "decode"]


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


class RemoteModule:
    """A student's module living in a host process; ``call(name, *args)`` returns JSON values."""

    def __init__(self, path: str | Path, what: str = "design"):
        self.path = Path(path)
        self.what = what
        self.printed = 0  # characters the student's code printed (discarded)
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _BOOT, _ROOT, str(self.path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=str(self.path.parent),
            text=True, bufsize=1,
        )
        hello = self._read()
        if "error" in hello:
            self.close()
            raise InputError(hello["error"], code=hello.get("code", "E_PLUGIN_IMPORT"))
        self.names: dict = hello["names"]

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            raise DesignError(f"the process running {self.path.name} ended (exit status {code}) before answering",
                              code="E_DESIGN_RAISED")
        reply = json.loads(line)
        self.printed = reply.get("printed", 0)
        return reply

    def call(self, fn: str, *args):
        """Call the student's ``fn``; engine records go both ways (see :func:`encode`)."""
        try:
            self.proc.stdin.write(json.dumps({"fn": fn, "args": encode(list(args))}) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            code = self.proc.wait()
            raise RemoteError(f"the process running {self.path.name} ended (exit status {code})") from None
        reply = self._read()
        if "error" in reply:
            raise RemoteError(reply["error"], code=reply.get("code", "E_DESIGN_RAISED"), kind=reply.get("kind", ""),
                              kinds=reply.get("kinds", ()))
        return decode(reply["value"])

    def close(self) -> None:
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


def host_main(path: str) -> None:
    """Import the student's file, then answer ``{"fn", "args"}`` lines until stdin closes."""
    import io
    import traceback

    rpc_out = sys.stdout

    class Counter(io.TextIOBase):
        """The student's stdout and stderr: counted, never kept, never mixed with the protocol."""

        total = 0

        def writable(self) -> bool:
            return True

        def write(self, s) -> int:
            Counter.total += len(str(s))
            return len(str(s))

    sys.stdout = sys.stderr = Counter()

    def send(obj) -> None:
        obj["printed"] = Counter.total
        rpc_out.write(json.dumps(obj) + "\n")
        rpc_out.flush()

    def where(e: BaseException) -> str:
        line = ""
        for fs in traceback.extract_tb(e.__traceback__):
            if Path(fs.filename).resolve() == Path(path).resolve():
                line = f" at {Path(path).name} line {fs.lineno}"
        return line

    from ..plugins import load_module

    try:
        module = load_module(path, Path(path).stem)
    except Exception as e:  # InputError: one line already
        send({"error": getattr(e, "message", str(e)), "code": getattr(e, "code", "E_PLUGIN_IMPORT")})
        return
    names = {}
    for n in dir(module):
        v = getattr(module, n)
        if callable(v):
            names[n] = "function"
        elif isinstance(v, (str, int, float, bool)):
            names[n] = v
    send({"names": names})
    for line in sys.stdin:
        req = json.loads(line)
        fn = getattr(module, req["fn"], None)
        if not callable(fn):
            send({"error": f"{Path(path).name} has no function {req['fn']!r}", "code": "E_PLUGIN_INCOMPLETE"})
            continue
        args = decode(req["args"])
        try:
            value = fn(*args)
        except SystemExit as e:
            send({"error": f"{req['fn']} called sys.exit({e.code!r}){where(e)}", "code": "E_DESIGN_RAISED"})
            continue
        except RecursionError as e:
            send({"error": f"{req['fn']} recursed without end{where(e)}", "code": "E_DESIGN_RAISED"})
            continue
        except Exception as e:
            msg = " ".join(str(e).split())[:200]
            send({"error": f"{req['fn']} raised {type(e).__name__}: {msg}{where(e)}", "code": "E_DESIGN_RAISED",
                  "kind": type(e).__name__, "kinds": [c.__name__ for c in type(e).__mro__]})
            continue
        try:
            send({"value": encode(value)})
        except (TypeError, ValueError, RecursionError):
            send({"error": f"{req['fn']} returned a {type(value).__name__}, which is not JSON", "code": "E_DESIGN_OUTPUT"})


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
