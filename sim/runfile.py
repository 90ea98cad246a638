"""The life of a run's file: written aside, put in place whole, or gone.

A batch run (:func:`sim.runner.run_scenario` with a ``db``) writes to a partial file beside it,
``.NAME.partial-PID`` (:func:`partial_of`); if anything ends the run early the partial file is
removed (:func:`discard_partial`) and nothing was written to ``db``. A finished run replaces ``db``
in one atomic rename (:func:`put_in_place`), so a kill at any moment leaves either the old database
or the new one whole, never neither. Partial files left by a process that no longer exists (kill -9,
power loss) are swept by the next run of the same file (:func:`remove_stale_partials`).

Before the rename the partial file must be whole on its own (:meth:`Store.seal_file`: a TRUNCATE
checkpoint whose result is checked, ``integrity_check`` ok, closed with no -wal, -shm or -journal left),
then it is fsynced; after the rename its folder is fsynced. Any failure before the rename removes every
partial file and leaves ``db`` byte for byte as it was.

A test hook (never set outside tests), ``PROTOLAB_RUNFILE_HOOK=ACTION@STEP``, acts at one named step of
that sequence (:data:`STEPS`): ``stop`` sends the process SIGSTOP there (a test waits for the stop with
``waitpid(WUNTRACED)``, then kills it: no timing), ``fail`` raises ``OSError(ENOSPC)`` there, as a full
disk would. ``PROTOLAB_MAX_PAGES`` (sim/store/core.py) makes SQLite's own writes fail the same way.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from .errors import StoreError
from .files import HOOK_ENV, hook_step
from .files import remove_stale_partials as _remove_stale
from .store import remove_database

__all__ = ["HOOK_ENV", "STEPS", "discard_partial", "partial_of", "put_in_place", "remove_stale_partials"]

#: The steps of putting a run in place, in order: the run written and committed; its WAL checkpointed into
#: the file; the file's integrity checked; the store closed with no side file left; the file fsynced; the old
#: file's side files removed (the last moment before the rename); the rename done; the folder fsynced.
STEPS = ("written", "checkpointed", "checked", "closed", "synced", "replacing", "renamed", "dir-synced")


def _step(name: str) -> None:
    """The test hook at step ``name`` (see the module's docstring); nothing when it is not set."""
    hook_step(name)


def _fsync(path: Path, *, folder: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if folder else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def partial_of(db: Path) -> Path:
    """Where this process writes the run of ``db`` until it is whole."""
    return db.with_name(f".{db.name}.partial-{os.getpid()}")


def discard_partial(tmp: Path, db: Path, error: BaseException) -> None:
    """Remove the partial file ``tmp`` of a run of ``db`` that ``error`` ended; a :class:`StoreError`
    is raised again naming the file the user asked for, not the partial one (other errors are left
    to the caller to raise)."""
    remove_database(tmp)
    if isinstance(error, StoreError):  # name the file the user asked for, not the partial one
        raise StoreError(f"{error.message.replace(str(tmp), str(db))}; nothing was written to {db}",
                         code=error.code) from None


def put_in_place(store, tmp: Path, db: Path) -> None:
    """Replace ``db`` with the finished run in ``tmp`` (its ``store``, still open), only once the partial
    file is whole and checked; any failure before the rename removes every partial file, leaves ``db``
    byte for byte and raises (a :class:`StoreError` naming ``db``; an ``OSError`` as E_DB_IO)."""
    try:
        _step("written")
        store.seal_file(step=_step)  # checkpointed, checked, closed with no side file left
        _step("closed")
        _fsync(tmp)
        _step("synced")
        # The old file's side files go first (a stale -wal would be read into the new file); the old
        # file itself is replaced in one atomic rename, so a kill at any moment leaves either the old
        # database or the new one whole, never neither.
        remove_database(db, side_files_only=True)
        _step("replacing")
        os.replace(tmp, db)
    except BaseException as e:
        store.close()
        if isinstance(e, OSError):
            e = StoreError(f"cannot finish {tmp}: {e.strerror or e}", code="E_DB_FULL" if e.errno in (
                errno.ENOSPC, errno.EDQUOT, errno.EFBIG) else "E_DB_IO")
        discard_partial(tmp, db, e)
        raise
    try:
        _step("renamed")
        _fsync(db.parent, folder=True)  # the rename itself survives a power loss
        _step("dir-synced")
    except OSError as e:
        raise StoreError(f"{db} is in place but its folder could not be synced: {e.strerror or e}",
                         code="E_DB_IO") from None


def remove_stale_partials(db: Path) -> list[Path]:
    """Remove the partial files (``.NAME.partial-PID`` and their -wal/-shm/-journal) that a run of ``db``
    left when its process died without cleaning up (kill -9, power loss); a live process's stay."""
    return _remove_stale(db)
