"""sqlite-utils, imported without numpy or pandas.

``sqlite_utils.db`` imports numpy and pandas when they are installed, to map their scalar types to column
types; the store never writes either. Where they are installed (an instructor's scientific environment, or
beside copydetect, which brings numpy) that import cost every command a fifth of a second or more, and
numpy's BLAS started a thread in every process: a thread that does not block the signals the main thread
holds, so a Ctrl-C could land in the middle of a delivery's bookkeeping. Here they are made unimportable
for the length of that one import (``sys.modules[name] = None``), and importable again after it; code
that wants numpy later (copydetect) imports it as usual."""

from __future__ import annotations

import sys


def _load():
    blocked = [m for m in ("numpy", "pandas") if m not in sys.modules]
    for m in blocked:
        sys.modules[m] = None  # type: ignore[assignment]  # 'import m' raises ImportError
    try:
        import sqlite_utils
    finally:
        for m in blocked:
            if sys.modules.get(m, 0) is None:
                del sys.modules[m]
    return sqlite_utils


sqlite_utils = _load()

__all__ = ["sqlite_utils"]
