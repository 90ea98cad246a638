"""The host process: a student's module imported behind the guard, answering calls over a private pipe.

This is the one module of the kit's that runs where student code runs. A judge starts a host
(:func:`sim.course.sandbox.start_host`, in bubblewrap where it works) through
:class:`sim.course.remote.RemoteModule`, and the host runs :func:`host_main`: it applies its
limits, walls itself in (:mod:`sim.course.guard`), imports the student's file and answers
``{"fn", "args"}`` requests until the judge closes the pipe.

**What of the kit the student's code can reach.** The host imports nothing of the engine: only
this module, the guard, the limits and the plain-data interface its kind of file is handed
(:data:`INTERFACES`, by the ``what`` of the module: an envelope design gets :class:`sim.intent.Intent`;
exercise 3's consumer ``sim.envelope``'s ``role_of`` and ``sim.digest``, which its text hands it).
Inside bubblewrap the ``sim`` folder holds those files alone (:func:`kit_files`): the engine
modules that answer an exercise (``sim.intake``, ``sim.runtime``, ``sim.planner``,
``sim.design``, ``sim.machine``, ``sim.consumer``, ``sim.invariants``, and ``sim.digest`` for
exercise 2, whose answer it is) are neither importable nor readable there, whatever name or path
the code builds. On the fallback the guard refuses to read them (:func:`sim.course.guard.install`).

**What crosses the pipe.** Arguments and answers, as JSON (:func:`encode`, :func:`decode`; the
judge's side keeps its own codec for the engine's records). Nothing a module holds at import is
sent: the judge asks for a name (``{"name": N}``) and gets its kind (a function, a value, other,
missing) and, for a plain value no larger than :data:`VALUE_LIMIT`, the value.

**The pipe is the host's alone.** The protocol moves to two descriptors above 255 (0, 1 and 2
become /dev/null; the code's prints are counted, never sent), and every line the host writes starts
with a random token the judge handed it on the pipe before the student's file was imported: a line
the code writes to a descriptor it finds is not the host's, and the judge says so (never takes it
for an answer). Code that walks this process's frames can still read the token (a process cannot hide
a value from code it runs); the judge therefore takes from any line only what the code could have
caused anyway (an answer, a raise, a refused import, a sandbox violation:
:data:`sim.course.remote.HOST_CODES`), never a claim of the grader's own trouble.
"""

from __future__ import annotations

import json
import sys

__all__ = ["host_main", "BASE", "INTERFACES", "kit_modules", "kit_files", "Allowlist", "encode", "decode",
           "VALUE_LIMIT", "describe_value"]

#: The kit's modules every host needs (none of them judges or answers an exercise).
BASE = ("sim", "sim.course", "sim.course.host", "sim.course.guard", "sim.course.limits")

#: The plain-data interface each kind of student file is handed, and may import, besides :data:`BASE`
#: (a kind is the ``what`` of :class:`sim.course.remote.RemoteModule`; any other kind gets none).
#: Decided from what each exercise asks: its starter, its model answer and its text.
INTERFACES: dict[str, tuple[str, ...]] = {
    "design": ("sim.frozen", "sim.intent"),  # exercise 1: a design is handed Intents (sim.design is its answer)
    "keys": (),  # exercise 2: digests and keys are the exercise (sim.digest is its answer)
    "intake": ("sim.errors", "sim.frozen", "sim.digest", "sim.versions", "sim.envelope"),  # exercise 3: role_of,
    # digest and DigestError, which its README hands the student (sim.intake, sim.consumer are its answer)
    "effect rule": ("sim.errors", "sim.frozen", "sim.digest", "sim.versions", "sim.envelope"),  # exercise 5: the
    # result is handed over as an Envelope (the runtime's effect commits, sim.runtime, are its answer)
}

#: The largest plain value a judge gets when it asks for a module's name (characters of its JSON).
VALUE_LIMIT = 4096


def kit_modules(kind: str) -> tuple[str, ...]:
    """The kit's modules a host of ``kind`` may import: :data:`BASE` and its interface."""
    return BASE + tuple(m for m in INTERFACES.get(kind, ()) if m not in BASE)


def kit_files(kind: str, package: str) -> list[str]:
    """The files of the ``sim`` folder ``package`` a host of ``kind`` may read, relative to it
    (``course/host.py``): its modules' sources, and nothing else."""
    import os

    out = []
    for m in kit_modules(kind):
        rel = m.split(".")[1:]
        if os.path.isdir(os.path.join(package, *rel)):
            out.append("/".join(rel + ["__init__.py"]))
        else:
            out.append("/".join(rel) + ".py")
    return out


class Allowlist:
    """``allowed(from_state, to_state, role=None)``: whether the task's machine has the move
    ``from_state -> to_state`` for ``role`` (for any role, without one), as the judge sent it
    (plain rows: the host holds no state machine). States are their names (``"ready"``)."""

    __slots__ = ("version", "_moves")

    def __init__(self, version: str, moves):
        self.version = version
        self._moves = {(a, b): frozenset(roles) for a, b, roles in moves}

    def __call__(self, from_state, to_state, role: str | None = None) -> bool:
        roles = self._moves.get((getattr(from_state, "value", from_state), getattr(to_state, "value", to_state)))
        return roles is not None and (role is None or role in roles)

    def __repr__(self) -> str:
        return f"<allowlist of {self.version}>"


_CLASSES: dict = {}  # the interface's records by name (an Intent for a design)


def encode(v):
    """A JSON-ready form of an answer (plain data; an interface record keeps its tag)."""
    import dataclasses

    if dataclasses.is_dataclass(v) and not isinstance(v, type) and _CLASSES.get(type(v).__name__) is type(v):
        return {"__type__": type(v).__name__, **{f.name: encode(getattr(v, f.name)) for f in dataclasses.fields(v)}}
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
    """The arguments a judge sent (see :func:`sim.course.remote.encode`): plain data, sets, the
    allowlist, and the interface's records; another record arrives as a plain dict."""
    import dataclasses

    if isinstance(v, list):
        return [decode(x) for x in v]
    if not isinstance(v, dict):
        return v
    if "__set__" in v:
        return frozenset(decode(x) for x in v["__set__"])
    if "__allowlist__" in v:
        return Allowlist(v["__allowlist__"], v.get("moves", ()))
    if "__enum__" in v:
        return v.get("value")
    if "__type__" in v:
        cls = _CLASSES.get(v["__type__"])
        if cls is None:
            return {k: decode(x) for k, x in v.items() if k != "__type__"}
        kw = {}
        for f in dataclasses.fields(cls):
            if f.name in v:
                x = decode(v[f.name])
                if isinstance(x, list) and f.name in ("evidence_refs", "refs", "roles", "rules"):
                    x = tuple(x)
                kw[f.name] = x
        return cls(**kw)
    return {k: decode(x) for k, x in v.items()}


def describe_value(v) -> str:
    """``a str of 24,000,000 characters``: what a value too large to send is."""
    if isinstance(v, str):
        return f"a str of {len(v):,} characters"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"an int of {v.bit_length():,} bits"
    return f"a {type(v).__name__}"


def _plain_value(v) -> dict:
    """``{"kind": "value", "value": v}`` for a plain value small enough to send, else what it is."""
    if isinstance(v, str) and len(v) > VALUE_LIMIT or isinstance(v, int) and v.bit_length() > 4 * VALUE_LIMIT:
        return {"kind": "value", "large": describe_value(v)}
    try:
        text = json.dumps(v)
    except (TypeError, ValueError, OverflowError):
        return {"kind": "value", "large": describe_value(v)}
    if len(text) > VALUE_LIMIT:
        return {"kind": "value", "large": describe_value(v)}
    return {"kind": "value", "value": v}


class _KitFinder:
    """Last on ``sys.meta_path``: a module of the kit's that this host does not have (its box holds only
    :func:`kit_modules`) is named as such, not just missing."""

    def __init__(self, allowed):
        self.allowed = frozenset(allowed)

    def find_spec(self, name, path=None, target=None):
        if (name == "sim" or name.startswith("sim.")) and name not in self.allowed:
            raise ModuleNotFoundError(f"No module named {name!r}: the kit's engine is not available to judged code "
                                      "(only its plain-data interface is)", name=name)
        return None

    def invalidate_caches(self) -> None:
        pass


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


class _ImportFailed(Exception):
    def __init__(self, message: str, code: str = "E_PLUGIN_IMPORT"):
        super().__init__(message)
        self.message, self.code = message, code


def _load(path: str, what: str):
    """Import the file at ``path`` as a fresh module (as :func:`sim.plugins.load_module` does, with
    its words), writing no bytecode."""
    import importlib.util
    import os

    if not os.path.isfile(path):
        raise _ImportFailed(f"{what} file {path} does not exist", "E_PLUGIN_MISSING")
    if not path.endswith(".py"):
        raise _ImportFailed(f"{what} file {path} is not a .py file")
    name = f"_protolab_plugin_1_{os.path.splitext(os.path.basename(path))[0]}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses in the file need their module registered
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        sys.modules.pop(name, None)
        raise _ImportFailed(f"{what} file {path} does not import: SyntaxError at line {e.lineno}: {e.msg}") from None
    except BaseException as e:  # anything the file does at import time (SystemExit included)
        sys.modules.pop(name, None)
        if isinstance(e, SystemExit):
            raise _ImportFailed(f"{what} file {path} calls sys.exit({e.code!r}) when imported") from None
        if isinstance(e, MemoryError):
            raise _ImportFailed(f"{what} file {path} ran out of memory while being imported") from None
        msg = " ".join(str(e).split())[:200]
        raise _ImportFailed(f"{what} file {path} does not import: {type(e).__name__}: {msg}") from None
    return module


def _high_fd(fd: int) -> int:
    """``fd`` moved to a random descriptor above 255 (close-on-exec), the original closed."""
    import fcntl
    import os
    import resource
    import secrets

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    top = 4096 if soft == resource.RLIM_INFINITY or soft <= 0 else min(soft, 4096)
    low = 256 + secrets.randbelow(max(1, top - 256 - 64)) if top > 320 else 3
    new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, low)
    os.close(fd)
    return new


def host_main(path: str, limits: str = "", kind: str = "design") -> None:
    """Wall this process in (the limits given as JSON, ``{"memory_mb", "file_mb"}``, then the
    guard), import the student's file, then answer requests until the judge closes the pipe. The
    first line on the pipe is the judge's ``{"token": ...}``."""
    import dataclasses  # noqa: F401 - encode/decode need them; imported before the guard
    import enum  # noqa: F401
    import importlib
    import io
    import os

    from .. import __file__ as sim_init
    from . import guard

    # the protocol moves to private descriptors above 255; 0, 1 and 2 become /dev/null
    in_fd, out_fd = _high_fd(os.dup(0)), _high_fd(os.dup(1))
    rpc_in = os.fdopen(in_fd, "r", encoding="utf-8")
    first = rpc_in.readline()
    try:
        token = json.loads(first)["token"]
    except (ValueError, KeyError, TypeError):
        return
    if not isinstance(token, str) or not token:
        return
    prefix = token + " "
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
        rpc_out.write(prefix + json.dumps(obj) + "\n")
        rpc_out.flush()

    file = os.path.realpath(path)
    sub = os.path.dirname(file)
    name = os.path.basename(file)
    # the interface this kind of file is handed, imported now (never the engine)
    for m in INTERFACES.get(kind, ()):
        mod = importlib.import_module(m)
        for n in getattr(mod, "__all__", ()):
            c = getattr(mod, n, None)
            if isinstance(c, type) and dataclasses.is_dataclass(c):
                _CLASSES[n] = c
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
    package = os.path.dirname(os.path.realpath(sim_init))
    root = os.path.dirname(package)
    checkout = None if root in guard.installed_roots() else root
    if checkout is not None:
        sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) != checkout]
        for key in [k for k in sys.path_importer_cache if isinstance(k, str) and os.path.realpath(k) == checkout]:
            del sys.path_importer_cache[key]
    sys.argv[:] = sys.argv[:1]
    sys.dont_write_bytecode = True
    os.environ["TMPDIR"] = sub
    sys.meta_path.append(_KitFinder(kit_modules(kind)))
    guard.install(sub, checkout=checkout, package=package, kit=kit_files(kind, package), report_fd=out_fd,
                  report_prefix=prefix, extra_read=[p for p in sys.path if p])  # the installation's paths (.pth files)
    del first, token

    try:
        module = _load(file, os.path.splitext(name)[0])
    except _ImportFailed as e:  # one line already (SystemExit and MemoryError included)
        where = _where(e.__context__ or e, sub)
        send({"error": e.message + (where if where and where not in e.message else ""), "code": e.code, "fatal": True})
        return
    send({"ready": True})
    for line in rpc_in:
        req = json.loads(line)
        if "name" in req:  # a judge asks for one name of the module: its kind, and a small plain value
            try:
                v = getattr(module, str(req["name"]))
            except Exception:  # noqa: BLE001 - missing, or a module __getattr__ of the student's that raised
                send({"kind": "missing"})
                continue
            if callable(v):
                send({"kind": "function"})
            elif isinstance(v, (str, int, float, bool)):
                send(_plain_value(v))
            else:
                send({"kind": "other"})
            continue
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
            except (TypeError, ValueError, RecursionError, MemoryError, OverflowError):
                kind_ = type(value).__name__
                reply = {"error": f"{req['fn']} returned {'an' if kind_[:1] in 'aeiouAEIOU' else 'a'} {kind_}, which "
                                  "cannot be sent to the grader (return plain data: str, int, float, bool, None, list, "
                                  "dict)", "code": "E_DESIGN_OUTPUT", "fatal": True}
        send(reply)
