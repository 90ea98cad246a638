"""The operating-system limits of a process that judges or runs student code, set in one place.

The judge process (``pool``: set between fork and exec) and the host process that runs the
student's module (``host.host_main``, inside bubblewrap where it works) both call
:func:`apply_limits`. Limits are only ever lowered: a host inherits its judge's, and asks for its
own below them. CPU time is not limited here: the parent holds each call to its wall-clock budget.
"""

from __future__ import annotations

import os
import resource
import signal

__all__ = ["apply_limits"]

_MB = 1024 * 1024


def apply_limits(*, memory_mb: int | None, file_mb: int | None, no_processes: bool = False) -> int:
    """Lower the address space to ``memory_mb`` and the largest file to ``file_mb`` (None: leave it),
    allow no core file, and make a write past the file limit fail instead of killing the process;
    ``no_processes``: the process may start none (an unprivileged user only: the kernel does not
    hold root to it). Returns the address-space limit now in force, in bytes (0: none)."""
    for res, value in ((resource.RLIMIT_AS, memory_mb), (resource.RLIMIT_FSIZE, file_mb), (resource.RLIMIT_CORE, 0)):
        if value is None:
            continue
        want = value * _MB
        _soft, hard = resource.getrlimit(res)
        if hard != resource.RLIM_INFINITY:
            want = min(want, hard)
        try:
            resource.setrlimit(res, (want, want))
        except (ValueError, OSError):  # pragma: no cover - a platform without that limit
            pass
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    if no_processes and os.geteuid() != 0:
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    return 0 if limit == resource.RLIM_INFINITY else max(limit, 0)
