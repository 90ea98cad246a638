"""Where the shipped data lives, in a checkout and in an installed wheel alike.

The wheel carries ``data/``, ``labs/`` and ``exercises/`` under ``sim/_data/`` (hatchling
force-include); a checkout has them at the repository's top level.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["shipped"]

_PKG = Path(__file__).resolve().parent


def shipped(*parts: str) -> Path:
    """Path of a shipped file or folder, e.g. ``shipped('data', 'envelopes')``."""
    installed = _PKG / "_data" / Path(*parts)
    if installed.exists():
        return installed
    return _PKG.parent / Path(*parts)
