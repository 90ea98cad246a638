"""Envelope designs: how an agent's intent becomes an envelope.

An agent decides *what* it means to say: an :class:`Intent` (assign T-2 to the writer, this
is attempt 2's result, this acknowledges M-4). A design decides *how* that is encoded: the
idempotency key that names the logical intent, the payload the recipient is sent, the evidence
it cites, and the digest scheme that binds the payload. Every envelope the simulator's agents
send goes through one design (:meth:`sim.world.RunWorld.say`), so a student's design can be
plugged into the running simulator and judged by what intake recorded and what the invariants
say.

:data:`REFERENCE` is the design the simulator has always used: with it every run's database is
byte for byte what it was before designs were pluggable (``tests/test_design.py`` proves it).

A design file is a Python module with three functions and one constant::

    DIGEST_SCHEME = "json-sorted-v1"          # or "jcs-v2"
    def idempotency_key(intent) -> str: ...   # the same logical intent must give the same key
    def payload(intent) -> dict: ...          # what intent.recipient is sent
    def evidence_refs(intent) -> list[str]: ...

It is loaded with :func:`sim.plugins.load_design`.
"""

from __future__ import annotations

from typing import Protocol

from . import digest as _digest
from .envelope import Envelope, build_envelope
from .errors import EnvelopeError, ProtolabError, raised_at
from .intent import Intent

__all__ = ["Intent", "EnvelopeDesign", "ReferenceDesign", "REFERENCE", "DesignError", "build_from"]


class DesignError(ProtolabError):
    """A design returned something that is not a valid envelope part."""


class EnvelopeDesign(Protocol):
    """How intents become envelopes (see the module docstring)."""

    name: str
    digest_scheme: str

    def idempotency_key(self, intent: Intent) -> str: ...
    def payload(self, intent: Intent) -> dict: ...
    def evidence_refs(self, intent: Intent) -> list[str]: ...


class ReferenceDesign:
    """The course's design: keys name (trace, task, attempt, step, retry, what is answered);
    the payload is the intent's body (the fields the runtime reads, artifacts by reference);
    evidence is cited by ref; payloads are digested with json-sorted-v1."""

    name = "reference"
    digest_scheme = "json-sorted-v1"

    def idempotency_key(self, i: Intent) -> str:
        t, k = i.trace_id, i.task_id
        r = f":retry-{i.retry}" if i.retry else ""
        if i.type == "task_request":
            return f"{t}:{k}:request{r}" if i.attempt <= 1 else f"{t}:{k}:attempt-{i.attempt}:request{r}"
        if i.type == "task_started":
            return f"{t}:{k}:attempt-{i.attempt}:started{r}"
        if i.type == "task_result":
            return f"{t}:{k}:attempt-{i.attempt}{r}"
        if i.type == "ack":
            # an ack of the fence speaks for the conversation: one per acknowledging worker
            return f"{t}:ack:{i.answers}:{i.sender}" if k == t else f"{t}:{k}:ack:{i.answers}"
        if i.type == "fence":  # one per epoch: a conversation reopened after its fence is fenced again
            return f"{t}:fence" if i.attempt <= 1 else f"{t}:fence:epoch-{i.attempt}"
        return f"{t}:{k}:{i.type}{r}"  # cancel, review_decision

    def payload(self, i: Intent) -> dict:
        return dict(i.body)

    def evidence_refs(self, i: Intent) -> list[str]:
        return list(i.refs)


REFERENCE = ReferenceDesign()


def _where(design, intent: Intent) -> str:
    return f"design {getattr(design, 'name', '?')}: {intent.type} of {intent.task_id} (attempt {intent.attempt}, {intent.message_id})"


def build_from(design: EnvelopeDesign, intent: Intent, *, schema_version: str = "1", epoch: int | None = None,
               expires_at: str | None = None) -> Envelope:
    """The envelope ``design`` makes of ``intent``; a design that returns something that is not
    a valid envelope part raises :class:`DesignError` naming the intent. ``epoch`` and ``expires_at`` are
    the sender's stamps (the conversation's epoch it speaks in after the first, when the message stops
    being valid), not the design's."""
    try:
        key = design.idempotency_key(intent)
        payload = design.payload(intent)
        refs = design.evidence_refs(intent)
        scheme = design.digest_scheme
    except ProtolabError:
        raise
    except (Exception, SystemExit) as e:  # the design's own code failed: say where, in one line
        what = f"called sys.exit({e.code!r})" if isinstance(e, SystemExit) else f"raised {type(e).__name__}: {e}"
        raise DesignError(f"{_where(design, intent)} {what}{raised_at(e)}", code="E_DESIGN_RAISED") from e
    if not isinstance(key, str):
        raise DesignError(f"{_where(design, intent)}: idempotency_key returned {type(key).__name__}, not a string",
                          code="E_DESIGN_OUTPUT")
    if not isinstance(payload, dict):
        raise DesignError(f"{_where(design, intent)}: payload returned {type(payload).__name__}, not a dict",
                          code="E_DESIGN_OUTPUT")
    if not isinstance(refs, (list, tuple)):
        raise DesignError(f"{_where(design, intent)}: evidence_refs returned {type(refs).__name__}, not a list",
                          code="E_DESIGN_OUTPUT")
    if scheme not in _digest.SCHEMES:
        raise DesignError(f"design {getattr(design, 'name', '?')}: DIGEST_SCHEME {scheme!r} is not one of "
                          f"{', '.join(_digest.SCHEMES)}", code="E_DESIGN_OUTPUT")
    try:
        return build_envelope(
            message_id=intent.message_id, trace_id=intent.trace_id, task_id=intent.task_id, sender=intent.sender,
            recipient=intent.recipient, type=intent.type, payload=payload, idempotency_key=key,
            created_at=intent.created_at, evidence_refs=list(refs), digest_scheme=scheme, schema_version=schema_version,
            epoch=epoch, expires_at=expires_at,
        )
    except (EnvelopeError, _digest.DigestError) as e:
        raise DesignError(f"{_where(design, intent)} made an invalid envelope: {e.code}: {e.message}",
                          code="E_DESIGN_OUTPUT") from e
    except ProtolabError as e:
        raise DesignError(f"{_where(design, intent)} made an invalid envelope: {e.code}: {e.message}",
                          code="E_DESIGN_OUTPUT") from e
