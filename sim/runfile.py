"""The life of a run's file: written aside, put in place whole, or gone.

A batch run (:func:`sim.runner.run_scenario` with a ``db``) writes to a partial file beside it,
``.NAME.partial-PID`` (:func:`partial_of`); if anything ends the run early the partial file is
removed (:func:`discard_partial`) and nothing was written to ``db``. A finished run replaces ``db``
in one atomic rename (:func:`put_in_place`), so a kill at any moment leaves either the old database
or the new one whole, never neither. Partial files left by a process that no longer exists (kill -9,
power loss) are swept by the next run of the same file (:func:`remove_stale_partials`).
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import StoreError
from .store import SIDE_FILES, remove_database

__all__ = ["discard_partial", "partial_of", "put_in_place", "remove_stale_partials"]


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


def put_in_place(tmp: Path, db: Path) -> None:
    """Replace ``db`` with the finished (and closed) run in ``tmp``."""
    # The old file's side files go first (a stale -wal would be read into the new file); the
    # old file itself is replaced in one atomic rename, so a kill at any moment leaves either
    # the old database or the new one whole, never neither.
    remove_database(db, side_files_only=True)
    os.replace(tmp, db)


def remove_stale_partials(db: Path) -> list[Path]:
    """Remove the partial files (``.NAME.partial-PID`` and their -wal/-shm/-journal) that a run of ``db``
    left when its process died without cleaning up (kill -9, power loss); a live process's stay."""
    removed = []
    for p in db.parent.glob(f".{db.name}.partial-*"):
        base = p.name
        for side in SIDE_FILES:
            base = base.removesuffix(side)
        pid = base.rsplit("-", 1)[-1]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # alive (or not ours to signal): leave it
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        p.unlink(missing_ok=True)
        removed.append(p)
    return removed
