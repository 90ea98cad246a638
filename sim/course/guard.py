"""The walls around a student's code inside its host process (:mod:`sim.course.remote`).

:func:`install` is called by the host after it has imported what it needs from ``sim`` and
before it imports the student's file. It adds an audit hook (``sys.addaudithook``; a hook cannot
be removed from Python) that refuses, with a :class:`PermissionError`:

* reading anything outside the submission's folder, the Python installation (prefixes, the
  standard library, site-packages) and the files of the ``sim`` package the host is allowed
  (``kit``: the host's own and its plain-data interface, :data:`sim.course.host.INTERFACES`); the
  rest of ``sim`` (the engine, whose modules answer the exercises) and the checkout that holds it
  (``solutions/``, hidden tests) are refused even when they lie inside an allowed folder;
* writing, creating, renaming or removing anything outside the submission's folder; making links;
  changing the working folder; opening a folder outside the submission as a file descriptor;
* starting a process (``subprocess``, ``os.system``, ``os.fork``, ``os.exec*``, ``os.posix_spawn``,
  ``os.spawn*``, ``pty``), sending a signal, leaving the process group, opening a socket,
  changing resource limits, starting a sub-interpreter;
* importing ``ctypes`` (or ``_posixsubprocess``, ``readline``, the ``_test*`` modules) and the other
  native escape hatches that open files or start programs in C, out of the hooks' sight
  (``tkinter``/``_tkinter``: a Tcl interpreter; ``dbm``, ``_posixshmem``, ``ssl``, ``cffi``), under
  any name (a compiled extension is refused by its file's module name too), loading a compiled
  extension from outside the Python installation, and walking the interpreter's objects with ``gc``
  (which could reach this hook's state);
* opening any SQLite database, in memory too: SQLite opens files in C, where no audit event sees
  them (``ATTACH`` of a file anywhere, ``VACUUM INTO`` one, ``load_extension``).

Outside this process, bubblewrap (:mod:`sim.course.sandbox`) is the first wall: what the hook
cannot see (a file SQLite or a C extension opens) still finds a read-only system, a private /tmp
and a private copy of the folder. On the fallback (no bubblewrap), this hook is the only wall.

The first refusal is written at once, as a ``{"violation": ...}`` line (after the host's token), to
the pipe the judge reads, so a student's code that catches the ``PermissionError`` (or tampers with the host
afterwards) still scores 0 for that test with the reason.

Checks are cheap: events the hook does not watch return after one set lookup; paths are resolved
with the host's own copy of ``lstat``/``readlink`` (so a patched ``os.path`` cannot fool it),
compared by prefix and cached.
"""

from __future__ import annotations

__all__ = ["install", "violation", "BLOCKED_IMPORTS"]

_FIRST: list = []  # the first refusal (already reported on the pipe; kept for the host's later answers)


def violation() -> str | None:
    """The first thing the guard refused in this process, if any."""
    return _FIRST[0] if _FIRST else None

#: Modules student code may not import (top-level names).
BLOCKED_IMPORTS = frozenset({
    "ctypes", "_ctypes", "_posixsubprocess", "subprocess", "readline", "_xxsubinterpreters",
    "_xxinterpchannels", "_interpreters", "_interpchannels", "posix", "nt", "os", "_imp", "_winapi",
    # native code that opens files or starts processes in C, where no audit event sees it: a Tcl
    # interpreter (tkinter.Tcl() reads and writes any file, and runs programs), dbm files, POSIX shared
    # memory, certificate files, a foreign-function interface
    "tkinter", "_tkinter", "turtle", "idlelib", "dbm", "_dbm", "_gdbm", "_posixshmem", "ssl", "_ssl",
    "cffi", "_cffi_backend",
})

_PROCESS = {"os.fork": "os.fork", "os.forkpty": "os.forkpty", "os.exec": "os.exec*", "os.posix_spawn": "os.posix_spawn",
            "os.posix_spawnp": "os.posix_spawnp", "os.spawn": "os.spawn*", "os.system": "os.system",
            "subprocess.Popen": "subprocess.Popen", "os.startfile": "os.startfile", "pty.spawn": "pty.spawn"}
_WRITE_1 = {"os.mkdir", "os.remove", "os.rmdir", "os.truncate", "os.chmod", "os.chown", "os.utime", "os.chflags",
            "os.lchflags", "os.setxattr", "os.removexattr", "shutil.rmtree"}
_READ_1 = {"os.listdir", "os.scandir", "os.fwalk", "os.walk", "os.getxattr", "os.listxattr"}
_NEVER = {
    "os.kill": "send a signal (os.kill)", "os.killpg": "send a signal (os.killpg)",
    "signal.pthread_kill": "send a signal (signal.pthread_kill)",
    "gc.get_objects": "walk the interpreter's objects (gc.get_objects)",
    "gc.get_referrers": "walk the interpreter's objects (gc.get_referrers)",
    "gc.get_referents": "walk the interpreter's objects (gc.get_referents)",
    "sys._current_frames": "walk other threads' frames (sys._current_frames)",
    "resource.setrlimit": "change its resource limits (resource.setrlimit)",
    "resource.prlimit": "change its resource limits (resource.prlimit)",
    "cpython.PyInterpreterState_New": "start another interpreter",
    "os.symlink": "make a link (os.symlink)", "os.link": "make a link (os.link)",
    "sqlite3.enable_load_extension": "load native code (sqlite3.enable_load_extension)",
    "sqlite3.load_extension": "load native code (sqlite3.load_extension)",
}
# os and signal functions that raise no audit event but could let the code escape: replaced in the host by
# functions that always refuse (the originals are not kept anywhere the code could reach).
_UNAUDITED = {"setsid": "leave its process group (os.setsid)", "setpgid": "leave its process group (os.setpgid)",
              "setpgrp": "leave its process group (os.setpgrp)", "mkfifo": "make a pipe file (os.mkfifo)",
              "mknod": "make a device file (os.mknod)", "chroot": "change its root folder (os.chroot)",
              "pidfd_open": "reach another process (os.pidfd_open)",
              "pidfd_send_signal": "send a signal (signal.pidfd_send_signal)"}
_REFUSE_EVENT = "protolab.refuse"


def _python_roots() -> list[str]:
    import site
    import sys
    import sysconfig

    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    try:
        roots.update(site.getsitepackages())
    except Exception:  # pragma: no cover - a site without it (some embedded builds)
        pass
    paths = sysconfig.get_paths()
    roots.update(paths.get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib"))
    return [r for r in roots if r]


def installed_roots() -> set[str]:
    """The Python installation's folders (prefixes, standard library, site-packages), resolved."""
    import os

    return {os.path.realpath(r) for r in _python_roots()}


def install(submission: str, *, checkout: str | None, package: str, report_fd: int, kit=None, report_prefix: str = "",
            extra_read=()) -> None:
    """Guard this process: ``submission`` (the student's folder) may be read and written, the
    Python installation and ``extra_read`` read, and of ``package`` (the ``sim`` folder) the files
    ``kit`` names (relative to it; None: all of it); the rest of ``package`` and ``checkout`` (the
    folder holding ``sim``, None for an installed sim) never, even inside those. The first refusal
    is written to ``report_fd`` as a JSON line, after ``report_prefix`` (the host's token)."""
    import _json
    import posix
    import sys

    lstat, readlink, getcwd, fspath, write = posix.lstat, posix.readlink, posix.getcwd, posix.fspath, posix.write
    quote = _json.encode_basestring_ascii
    prefix = str(report_prefix)
    getframe = sys._getframe
    here = getframe(0).f_code.co_filename
    str_, bytes_, int_, isinstance_, len_ = str, bytes, int, isinstance, len
    OSError_, ValueError_, PermissionError_ = OSError, ValueError, PermissionError
    ModuleNotFoundError_ = ModuleNotFoundError
    # the tables as this hook's own copies: the module's names can be rebound by the code it guards
    process, never, write1, read1 = dict(_PROCESS), dict(_NEVER), frozenset(_WRITE_1), frozenset(_READ_1)
    blocked, refuse_event, first = frozenset(BLOCKED_IMPORTS), _REFUSE_EVENT, _FIRST
    O_WRITE = posix.O_WRONLY | posix.O_RDWR | posix.O_APPEND | posix.O_CREAT | posix.O_TRUNC
    S_IFMT, S_IFLNK, S_IFDIR = 0o170000, 0o120000, 0o040000

    def real(path: str) -> str:
        """``os.path.realpath`` from the host's own functions."""
        if not path.startswith("/"):
            path = getcwd() + "/" + path
        todo = path.split("/")
        todo.reverse()
        done, links = "", 0
        while todo:
            name = todo.pop()
            if name == "" or name == ".":
                continue
            if name == "..":
                done = done[: done.rfind("/")] if done else ""
                continue
            new = done + "/" + name
            try:
                st = lstat(new)
            except (OSError_, ValueError_):
                done = new
                continue
            if st.st_mode & S_IFMT == S_IFLNK:
                links += 1
                if links > 40:  # a loop: refuse by giving back a path nothing allows
                    return "/\0loop"
                target = readlink(new)
                if target.startswith("/"):
                    done = ""
                parts = target.split("/")
                parts.reverse()
                todo.extend(parts)
            else:
                done = new
        return done or "/"

    sub = real(submission)
    pkg = real(package)
    rules = [(sub, 2)] + ([(pkg, 1)] if kit is None else [(pkg, 0)] + [(pkg + "/" + f, 1) for f in kit])
    rules += [(real(checkout), 0)] if checkout else []
    rules += [(real(r), 1) for r in _python_roots()]
    rules += [(real(r), 1) for r in extra_read]
    rules += [(p, 1) for p in ("/dev/null", "/dev/urandom", "/dev/zero", "/etc/localtime", "/usr/share/zoneinfo")]
    # the longest prefix decides: the checkout is refused, sim/ inside it (or a venv inside it) is not
    # on a tie the stricter rule comes first (the submission may lie inside what is only readable)
    rules = tuple(sorted({(p.rstrip("/") or "/", lv) for p, lv in rules}, key=lambda r: (-len(r[0]), r[1])))
    rules = tuple((p, p + "/" if p != "/" else "/", lv) for p, lv in rules)
    cache: dict = {}
    reported: list = []  # private to the hook; _FIRST is what the host reads

    def level(path: str) -> int:
        for exact, prefix, lv in rules:
            if path == exact or path.startswith(prefix):
                return lv
        return 0

    def shown(path: str) -> str:
        return "your folder" + path[len(sub):] if path == sub or path.startswith(sub + "/") else path

    def outside(path: str) -> str:
        """Where ``path`` is, as a refusal says it: the kit's own code, or outside the student's folder."""
        if kit is not None and (path == pkg or path.startswith(pkg + "/")):
            return f"{shown(path)}, the kit's own code (judged code sees only its folder and the kit's interface)"
        return f"{shown(path)}, outside its folder"

    def where() -> str:
        f = getframe(2)
        while f is not None:
            name = f.f_code.co_filename
            if name.startswith(sub + "/"):
                return f" at {name[len(sub) + 1:]} line {f.f_lineno}"
            f = f.f_back
        return ""

    def importer_is_student() -> bool:
        f = getframe(1)  # past this hook's frames and importlib's, who asked for the import?
        while f is not None and (f.f_code.co_filename == here or f.f_code.co_filename.startswith("<frozen importlib")):
            f = f.f_back
        return f is not None and f.f_code.co_filename.startswith(sub + "/")

    def refuse(what: str, error=None):
        msg = f"your code tried to {what}{where()}"
        if not reported:
            reported.append(msg)
            first.append(msg)
            try:
                write(report_fd, (prefix + '{"violation": ' + quote(msg[:1000]) + "}\n").encode())
            except OSError_:
                pass
        if error is not None:
            raise error(msg)
        raise PermissionError_(msg)

    def text(path):
        if isinstance_(path, int_):
            return None
        path = fspath(path)
        if isinstance_(path, bytes_):
            path = path.decode("utf-8", "surrogateescape")
        return path

    def check(path, need: int, verb: str) -> None:
        p = text(path)
        if p is None:  # a file descriptor: already open
            return
        key = (p, need)
        if p.startswith("/") and key in cache:
            return
        r = real(p)
        if level(r) < need:
            refuse(f"{verb} {outside(r)}")
        if p.startswith("/"):
            if len_(cache) > 4096:
                cache.clear()
            cache[key] = True

    def hook(event: str, args) -> None:
        if event == "open":
            path, mode, flags = args
            if mode is None:  # os.open: its flags say whether it writes; a folder outside is refused
                if flags & O_WRITE:
                    check(path, 2, "write")
                    return
                check(path, 1, "read")
                p = text(path)
                if p is not None:
                    r = real(p)
                    if level(r) < 2:
                        try:
                            if lstat(r).st_mode & S_IFMT == S_IFDIR:
                                refuse(f"open the folder {outside(r)}")
                        except OSError_:
                            pass
                return
            if isinstance_(mode, str_) and ("w" in mode or "a" in mode or "x" in mode or "+" in mode):
                check(path, 2, "write")
            elif flags & O_WRITE:
                check(path, 2, "write")
            else:
                check(path, 1, "read")
        elif event == "import":
            name = args[0]
            top = name.partition(".")[0] if isinstance_(name, str_) else ""
            last = name.rpartition(".")[2] if isinstance_(name, str_) and args[1] is not None else ""
            if top in blocked or top.startswith("_test") or last in blocked or last.startswith("_test"):
                # as if it were not installed (a library that tries it, dateutil say, carries on);
                # the student's own import of it is also a refusal
                if importer_is_student():
                    refuse(f"start a process (it imported {name})" if top in ("subprocess", "_posixsubprocess")
                           else f"import {name}, which the sandbox does not allow", ModuleNotFoundError_)
                raise ModuleNotFoundError_(f"No module named {name!r} (the sandbox does not allow it)", name=name)
            filename = args[1]
            if filename is not None:  # a compiled extension is about to be loaded: only the installation's
                p = text(filename)
                if p is not None and level(real(p)) != 1:
                    refuse(f"load compiled code from {shown(real(p))}")
        elif event in process:
            refuse(f"start a process ({process[event]})")
        elif event in write1:
            if isinstance_(args[0], int_) and event != "os.truncate":
                refuse(f"change an open file ({event})")
            check(args[0], 2, "change")
        elif event in read1:
            if args and args[0] is not None:
                check(args[0], 1, "list")
        elif event == "os.rename":
            check(args[0], 2, "move")
            check(args[1], 2, "move a file to")
        elif event == "os.chdir":
            p = text(args[0])
            if p is None or real(p) != sub:
                refuse("change its working folder" + (f" to {shown(real(p))}" if p is not None else ""))
        elif event in never:
            refuse(never[event])
        elif event.startswith("socket."):
            refuse(f"use the network ({event})")
        elif event.startswith("ctypes."):
            refuse(f"load native code ({event})")
        elif event == "sqlite3.connect":
            # SQLite opens files in C, out of this hook's sight: an in-memory database can ATTACH a file
            # anywhere, or VACUUM INTO one; so no database at all (a judged function computes, it stores nothing)
            db = text(args[0])
            shown_db = "" if db is None else (db[:80] if db in (":memory:", "") or db.startswith("file:") else shown(real(db)))
            refuse(f"open a SQLite database (sqlite3.connect {shown_db!r}; SQLite reaches files the sandbox cannot "
                   "watch: ATTACH, VACUUM INTO)")
        elif event == refuse_event:
            refuse(args[0])

    watched = frozenset({"open", "import", "os.rename", "os.chdir", "sqlite3.connect", refuse_event,
                         *process, *write1, *read1, *never})

    def audit(event: str, args) -> None:
        if event in watched or event.startswith("socket.") or event.startswith("ctypes."):
            hook(event, args)

    _unaudited(sys)
    sys.addaudithook(audit)


def _unaudited(sys) -> None:
    """Replace os functions that raise no audit event, and block re-creating builtin modules
    (``_imp.create_builtin`` would hand back a fresh ``posix`` with them)."""
    import _imp
    import os
    import posix

    audit, event = sys.audit, _REFUSE_EVENT

    def refusing(what: str):
        def refused(*args, **kw):
            audit(event, what)
            raise PermissionError(f"your code tried to {what}")

        return refused

    import _signal
    import signal

    for name, what in _UNAUDITED.items():
        for mod in (os, posix, signal, _signal):
            if hasattr(mod, name):
                setattr(mod, name, refusing(what))
    # every builtin module but the blocked ones is imported now (cheap), then no more can be made
    for name in sys.builtin_module_names:
        top = name.partition(".")[0]
        if name not in sys.modules and top not in BLOCKED_IMPORTS and not top.startswith("_test"):
            try:
                __import__(name)
            except Exception:  # pragma: no cover - a builtin that does not import here
                pass
    _imp.create_builtin = refusing("import a builtin module again (_imp.create_builtin)")
