"""Writing a file whole: what every command that writes an output file does.

A reader (a browser, Gradescope, a spreadsheet) never sees half a file: the text goes to a temporary
file beside the destination (``.NAME.partial-PID``) that is renamed over it only once it is complete;
an error or an interrupt removes it and leaves any earlier file as it was. An ``OSError`` while
writing becomes one line, ``CODE: cannot write PATH: why``.

No command writes over what it reads: ``written_whole(path, reads=[...])`` (and :func:`check_output`,
which a command calls first, before any work) refuses an output that is one of its inputs by the same
path, a hard link (the same device and inode) or a symlink to it (or to a database input's -wal, -shm or
-journal) with ``E_OUTPUT_IS_INPUT``, before anything is written.

A partial file that a killed process (kill -9, power loss) could not remove is swept by the next
write of the same destination (:func:`remove_stale_partials`: only those of processes that no longer
exist). The test hook ``PROTOLAB_RUNFILE_HOOK=ACTION@STEP`` (:func:`hook_step`, see
:mod:`sim.runfile`) also acts at the steps of :func:`written_whole` (:data:`FILE_STEPS`).
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager, suppress
from glob import escape as glob_escape
from pathlib import Path
from typing import IO, Iterator

from .errors import InputError

__all__ = ["FILE_STEPS", "HOOK_ENV", "check_output", "files_under", "hook_step", "not_a_file", "remove_stale_partials",
           "write_json_fields", "written_whole"]

HOOK_ENV = "PROTOLAB_RUNFILE_HOOK"
#: The steps of :func:`written_whole`: the partial file opened; written whole and closed (the last moment
#: before the rename); renamed into place.
FILE_STEPS = ("file-opened", "file-written", "file-renamed")


_HOOK_COUNTS: dict[str, int] = {}
#: Is the hook set in this process (read once: the store asks at every commit)?
HOOKED = HOOK_ENV in os.environ


def hook_step(name: str) -> None:
    """The test hook at step ``name`` (never set outside tests and benches): ``PROTOLAB_RUNFILE_HOOK=stop@NAME``
    (``STEP#N``: the Nth time it is reached) sends this process SIGSTOP there (the parent waits for the stop with ``waitpid(WUNTRACED)`` and then
    kills it: a kill at a known step, no timing); ``fail@NAME`` raises ``OSError(ENOSPC)`` there, as a
    full disk would."""
    hook = os.environ.get(HOOK_ENV)
    if not hook:
        return
    action, _, at = hook.partition("@")
    at, _, nth = at.partition("#")  # STEP#N: the Nth time the step is reached (a commit: the Nth commit)
    if at != name:
        return
    if nth:
        _HOOK_COUNTS[name] = _HOOK_COUNTS.get(name, 0) + 1
        if str(_HOOK_COUNTS[name]) != nth:
            return
    if action == "stop":
        import signal

        os.kill(os.getpid(), signal.SIGSTOP)
    elif action == "fail":
        import errno

        raise OSError(errno.ENOSPC, f"injected at step {name} ({HOOK_ENV})")


def remove_stale_partials(path: str | os.PathLike) -> list[Path]:
    """Remove the partial files (``.NAME.partial-PID``, their -wal/-shm/-journal, and a working folder
    ``.NAME.partial-PID-*``) that a write of ``path`` left when its process died without cleaning up (kill -9, power loss); a live process's stay."""
    import re
    import shutil

    path = Path(path)
    prefix = f".{path.name}.partial-"
    removed = []
    for p in path.parent.glob(f"{glob_escape(prefix)}*"):
        m = re.match(r"(\d+)(?:-|$)", p.name[len(prefix):])  # .NAME.partial-PID, -PID-wal, -PID-tmpXXXX (a folder)
        if m is None or int(m.group(1)) == os.getpid():
            continue
        pid = m.group(1)
        try:
            os.kill(int(pid), 0)
            continue  # alive (or not ours to signal): leave it
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        removed.append(p)
    return removed


def not_a_file(path: str | os.PathLike, what: str = "") -> InputError | None:
    """The refusal for ``path`` when something is there that is not a regular file (a folder, a FIFO, a
    device, a socket): ``E_NOT_A_FILE`` at once, where opening it would read a folder's error, or wait
    for a FIFO's writer forever. None when it is a regular file or nothing is there (the caller says
    "does not exist" in its own words)."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode):
        return None
    kind = ("a folder" if stat.S_ISDIR(mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "not a regular file")
    return InputError(f"{what + ' ' if what else ''}{path} is {kind}, not a file; name a file", code="E_NOT_A_FILE")

_SIDE_FILES = ("-wal", "-shm", "-journal")  # (the store's SIDE_FILES: base may not import the store)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)  # follows a symlink: a link to an input is the input
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def files_under(paths) -> list[Path]:
    """The files a command reads when it is handed ``paths``: a file itself, a folder's every file (its
    subfolders' too); None entries skipped. What ``reads=`` wants of a command that reads folders."""
    out: list[Path] = []
    for p in paths:
        if p is None:
            continue
        p = Path(p)
        if p.is_dir():
            out.append(p)
            out.extend(q for q in p.rglob("*") if q.is_file())
        else:
            out.append(p)
    return out


def check_output(path: str | os.PathLike, reads=(), *, option: str = "-o") -> None:
    """Refuse (``E_OUTPUT_IS_INPUT``) an output ``path`` that is one of the files the command reads
    (``reads``; None entries skipped, a database's side files counted with it): the same path, a hard
    link to it or a symlink to it. Nothing is written either way."""
    out = Path(path)
    mine = _identity(out)
    if mine is None:  # nothing there yet (or a dangling link): not an input
        return
    for read in reads:
        if read is None or str(read) == "-":
            continue
        read = Path(read)
        for side in ("",) + _SIDE_FILES:
            if mine == _identity(Path(f"{read}{side}")):
                raise InputError(f"{option} {out} is {'the' if not side else 'a side file of the'} input {read}"
                                 f"{'' if not side and str(out) == str(read) else ' (the same file by another name)'}: "
                                 "writing it would destroy what is read; choose another output file",
                                 code="E_OUTPUT_IS_INPUT")


@contextmanager
def written_whole(path: str | os.PathLike, mode: str = "w", *, code: str = "E_FILE_WRITE",
                  newline: str | None = None, reads=(), option: str = "-o") -> Iterator[IO]:
    """A file to write ``path`` through (text in UTF-8, or bytes with ``mode="wb"``), renamed into
    place when the block ends without an error; ``reads``: the files the command reads, which ``path``
    may not be (:func:`check_output`)."""
    path = Path(path)
    check_output(path, reads, option=option)
    tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
    with suppress(OSError):
        remove_stale_partials(path)  # what a killed writer of the same file left
    try:
        with open(tmp, mode, newline=newline, encoding=None if "b" in mode else "utf-8") as fh:
            hook_step("file-opened")
            yield fh
        hook_step("file-written")
        os.replace(tmp, path)
        hook_step("file-renamed")
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise InputError(f"cannot write {path}: {e.strerror or e}", code=code) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json_fields(write, fields, *, default=None) -> None:
    """One JSON object written through ``write`` field by field: ``fields`` yields ``(key, value)``
    pairs, a value that is neither JSON nor None (an iterator of rows) written row by row as it
    yields them. The bytes ``json.dumps(dict(fields), indent=2, ensure_ascii=False)`` and a newline
    would give, in flat memory (a million rows)."""

    def dumps(v, pad: str) -> str:
        return json.dumps(v, indent=2, ensure_ascii=False, default=default).replace("\n", "\n" + pad)

    write("{")
    written = False
    for key, value in fields:
        write(("," if written else "") + "\n  " + json.dumps(key, ensure_ascii=False) + ": ")
        written = True
        if isinstance(value, (list, dict, str, int, float, bool)) or value is None:
            write(dumps(value, "  "))
            continue
        first = True
        for row in value:
            write(("[\n    " if first else ",\n    ") + dumps(row, "    "))
            first = False
        write("[]" if first else "\n  ]")
    write("\n}\n" if written else "}\n")
