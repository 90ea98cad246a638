"""One error root for the whole project.

Every error a user can cause carries a stable ``code`` (``E_...``) and a one-line
message that says what was expected. The CLI prints ``error: CODE: message`` on
stderr and exits with status 2; nothing else in the project formats errors.
"""

from __future__ import annotations

__all__ = [
    "ProtolabError",
    "InputError",
    "EnvelopeError",
    "DigestError",
    "MachineError",
    "StoreError",
    "StaleWrite",
    "friendly_list",
]


def friendly_list(items) -> str:
    """Render ``items`` as ``'a', 'b' or 'c'`` for messages that name what is allowed."""
    quoted = [repr(str(i)) for i in items]
    if not quoted:
        return "(nothing)"
    if len(quoted) == 1:
        return quoted[0]
    return ", ".join(quoted[:-1]) + " or " + quoted[-1]


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


class StaleWrite(StoreError):
    """A compare-and-swap on ``state_version`` found another version than it read."""

    code = "E_STALE_WRITE"
