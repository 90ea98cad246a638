"""One error root for the whole project.

Every error a user can cause carries a stable ``code`` (``E_...``) and a one-line
message that says what was expected. The CLI prints ``error: CODE: message`` on
stderr and exits with status 2; nothing else in the project formats errors.
"""

from __future__ import annotations

import json

__all__ = [
    "ProtolabError",
    "InputError",
    "EnvelopeError",
    "DigestError",
    "MachineError",
    "StoreError",
    "StaleWrite",
    "Interrupted",
    "Signalled",
    "friendly_list",
    "raised_at",
    "damaged_row",
    "stored_json",
]


def friendly_list(items) -> str:
    """Render ``items`` as ``'a', 'b' or 'c'`` for messages that name what is allowed."""
    quoted = [repr(str(i)) for i in items]
    if not quoted:
        return "(nothing)"
    if len(quoted) == 1:
        return quoted[0]
    return ", ".join(quoted[:-1]) + " or " + quoted[-1]


def raised_at(exc: BaseException, filename: str | None = None) -> str:
    """Where a learner's code raised ``exc``: `` (bad.py, line 4)``, from the deepest frame of its
    traceback in ``filename`` (or, without one, outside protolab and Python's own library); ``""``
    when no such frame is known. A message naming the file and line needs no traceback."""
    import os
    import sysconfig

    own = os.path.dirname(os.path.abspath(__file__))
    libs = {os.path.abspath(p) for k, p in sysconfig.get_paths().items() if k in ("stdlib", "platstdlib", "purelib",
                                                                                    "platlib")}
    found = None
    tb = exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        full = os.path.abspath(name)
        if filename is not None:
            if full == os.path.abspath(filename):
                found = (full, tb.tb_lineno)
        elif not full.startswith(own + os.sep) and not any(full.startswith(p + os.sep) for p in libs) \
                and not name.startswith("<"):
            found = (full, tb.tb_lineno)
        tb = tb.tb_next
    if found is None:
        return ""
    try:
        shown = os.path.relpath(found[0])
    except ValueError:
        shown = found[0]
    if shown.startswith(".." + os.sep + ".."):
        shown = found[0]
    return f" ({shown}, line {found[1]})"


class ProtolabError(Exception):
    """Root of every error protolab raises on purpose. ``code`` is stable."""

    code = "E_PROTOLAB"

    def __init__(self, message: str, *, code: str | None = None, **context):
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.context = context

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.message

    def one_line(self) -> str:
        """The CLI's single line: ``CODE: message`` with newlines folded."""
        return f"{self.code}: {' '.join(self.message.split())}"


class InputError(ProtolabError):
    """A file or argument the user gave cannot be used (malformed JSON, NaN, ...)."""

    code = "E_INPUT"


class EnvelopeError(InputError):
    """An envelope is missing a field, has a mistyped one or an unknown vocabulary word."""

    code = "E_ENVELOPE"


class DigestError(InputError):
    """A digest cannot be computed or does not match its payload."""

    code = "E_DIGEST"


class MachineError(InputError):
    """A state machine definition is malformed or names unknown states or roles."""

    code = "E_MACHINE"


class StoreError(ProtolabError):
    """The database cannot be used (missing, corrupt, not protolab's, newer schema)."""

    code = "E_STORE"


def damaged_row(table: str, row_id, what: str) -> StoreError:
    """A row of a run file that no reader can take (JSON that does not parse, a state no machine has):
    ``E_DB_CORRUPT: <table> row <id>: what``. The store's readers raise it; nothing is written."""
    return StoreError(f"{table} row {row_id}: {what}; the file is damaged (restore it from a copy or run the "
                      "scenario again)", code="E_DB_CORRUPT")


def stored_json(table: str, row_id, column: str, text):
    """``text``, a column holding JSON, parsed; damage is :func:`damaged_row` naming the table and row."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, TypeError, RecursionError) as e:  # (JSONDecodeError is a ValueError)
        why = f"{e.msg} at character {e.pos}" if isinstance(e, json.JSONDecodeError) else type(e).__name__
        raise damaged_row(table, row_id, f"{column} is not JSON ({why})") from None


class StaleWrite(StoreError):
    """A compare-and-swap on ``state_version`` found another version than it read."""

    code = "E_STALE_WRITE"


class Interrupted(ProtolabError):
    """A command stopped by a signal after cleaning up; the CLI exits with 128 + the signal."""

    code = "E_ABORTED"

    def __init__(self, message: str, *, signum: int, **context):
        super().__init__(message, **context)
        self.signum = signum
        self.exit_status = 128 + signum


class Signalled(KeyboardInterrupt):
    """Raised by the CLI's SIGTERM/SIGHUP handler so that, like Ctrl-C, every ``finally`` and
    ``except BaseException`` on the way out runs (partial files and temporary folders removed)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


#: The last SIGTERM/SIGHUP caught (a framework that swallows the exception still leaves this).
LAST_SIGNAL: int | None = None


def catch_termination() -> None:
    """Turn SIGTERM and SIGHUP into :class:`Signalled` in this process (a second one while
    cleaning up is ignored, so the cleanup finishes)."""
    import signal

    def handler(signum, frame):
        global LAST_SIGNAL
        LAST_SIGNAL = signum
        for s in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
        raise Signalled(signum)

    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, handler)


def signal_of(exc: BaseException | None) -> int | None:
    """The signal number behind an interruption (Ctrl-C is SIGINT), following exception causes."""
    import signal

    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, Signalled):
            return exc.signum
        if isinstance(exc, KeyboardInterrupt):
            return int(signal.SIGINT)
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None
