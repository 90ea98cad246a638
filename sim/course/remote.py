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
from dataclasses import asdict
from pathlib import Path

from .. import digest as _digest
from ..design import DesignError, Intent
from ..errors import InputError

__all__ = ["RemoteModule", "RemoteDesign", "host_main"]

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
        self.proc.stdin.write(json.dumps({"fn": fn, "args": args}, default=_jsonable) + "\n")
        self.proc.stdin.flush()
        reply = self._read()
        if "error" in reply:
            raise DesignError(reply["error"], code=reply.get("code", "E_DESIGN_RAISED"))
        return reply["value"]

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


def _jsonable(v):
    if isinstance(v, (tuple, frozenset, set)):
        return list(v)
    raise TypeError(type(v).__name__)


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
        return self.module.call(fn, asdict(intent))

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
        module = load_module(path, "design")
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
        args = req["args"]
        if req["fn"] in ("idempotency_key", "payload", "evidence_refs") and args and isinstance(args[0], dict):
            a = dict(args[0])
            a["refs"] = tuple(a.get("refs") or ())
            args = [Intent(**a)]
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
            send({"error": f"{req['fn']} raised {type(e).__name__}: {msg}{where(e)}", "code": "E_DESIGN_RAISED"})
            continue
        try:
            send({"value": value})
        except (TypeError, ValueError):
            send({"error": f"{req['fn']} returned a {type(value).__name__}, which is not JSON", "code": "E_DESIGN_OUTPUT"})
