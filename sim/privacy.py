"""Sensitive fields: who is sent them, and what the logs keep of them (pure, no I/O).

A scenario may declare, in a ``[privacy]`` table, which payload fields name a person (a
source's name, email, phone) and which participant needs which of them::

    [privacy]
    sensitive = ["source_name", "source_email", "source_phone"]
    [privacy.needs]
    manager = ["source_name", "source_email", "source_phone"]
    writer = ["source_name"]          # to credit the source, not to call them

Two rules follow from the declaration, and the safe policy keeps both:

* **minimise per recipient**: a message carries a sensitive field only to a participant that
  needs it (:meth:`Privacy.minimise`, applied by the transport before the digest is made, so
  the digest binds what was really sent);
* **redact the logs**: the message log and the event log keep ``[redacted]`` in place of each
  sensitive value (:meth:`Privacy.redact`). The payload digest stored beside it is the digest of
  what was sent, so it still verifies against the original (whoever holds it can check), and
  deduplication and conflict detection, which compare digests, work as before.

The naive policy does neither: every recipient is sent everything the sender knows, and the logs
keep it in the clear. The ``PAYLOAD_MINIMIZATION`` invariant reads the logs and says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .envelope import role_of

__all__ = ["Privacy", "REDACTED", "is_redacted", "fake_value"]

REDACTED = "[redacted]"


def is_redacted(payload) -> bool:
    """Whether any top-level value of ``payload`` was replaced by :data:`REDACTED`."""
    return isinstance(payload, dict) and any(v == REDACTED for v in payload.values())


@dataclass(frozen=True)
class Privacy:
    """A scenario's declaration: the sensitive fields, and who needs which."""

    sensitive: tuple[str, ...] = ()
    needs: dict = field(default_factory=dict)  # participant id (or role) -> tuple of fields it needs

    def __bool__(self) -> bool:
        return bool(self.sensitive)

    def needed_by(self, participant: str) -> frozenset[str]:
        """The sensitive fields ``participant`` needs (looked up by id, then by role)."""
        got = self.needs.get(participant)
        if got is None:
            got = self.needs.get(role_of(participant), ())
        return frozenset(got)

    def unneeded(self, payload: dict, recipient: str) -> list[str]:
        """The sensitive fields in ``payload`` that ``recipient`` does not need, in field order."""
        need = self.needed_by(recipient)
        return [k for k in self.sensitive if k in payload and k not in need]

    def minimise(self, payload: dict, recipient: str) -> dict:
        """``payload`` without the sensitive fields ``recipient`` does not need (the same dict if none)."""
        drop = self.unneeded(payload, recipient)
        if not drop:
            return payload
        return {k: v for k, v in payload.items() if k not in drop}

    def in_clear(self, payload: dict) -> list[str]:
        """The sensitive fields ``payload`` holds with their real value (not :data:`REDACTED`)."""
        if not isinstance(payload, dict):
            return []
        return [k for k in self.sensitive if k in payload and payload[k] != REDACTED]

    def redact(self, payload: dict) -> dict:
        """``payload`` with every sensitive value replaced by :data:`REDACTED` (the same dict if none)."""
        if not self.in_clear(payload):
            return payload
        return {k: (REDACTED if k in self.sensitive else v) for k, v in payload.items()}

    # -------------------------------------------------------------- as stored in a run's meta

    def to_meta(self) -> str:
        return json.dumps({"sensitive": list(self.sensitive),
                           "needs": {k: list(v) for k, v in sorted(self.needs.items())}}, sort_keys=True)

    @classmethod
    def from_meta(cls, text: str | None) -> "Privacy":
        if not text:
            return NONE
        d = json.loads(text)
        return cls(tuple(d.get("sensitive", ())), {k: tuple(v) for k, v in d.get("needs", {}).items()})


NONE = Privacy()


def fake_value(fake, name: str) -> str:
    """A made-up value for the sensitive field ``name`` (Faker, seeded by the run): a person's name,
    an email address or a phone number, chosen by how the field's name ends."""
    if name.endswith("email"):
        return fake.email()
    if name.endswith("phone"):
        return fake.phone_number()
    if name.endswith("name"):
        return fake.name()
    if name.endswith("address"):
        return fake.address().replace("\n", ", ")
    return fake.bothify("??-####")
