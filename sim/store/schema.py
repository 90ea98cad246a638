"""The store's schema: its tables, its version, the state tables and how a value is stored."""

from __future__ import annotations

from datetime import datetime, timezone

from ..digest import sorted_dumps
from ..errors import StoreError
from ..events import REGISTRY as EVENT_REGISTRY


SCHEMA_VERSION = 4


APP_ID = "protolab"


DEFAULT_START = "2026-07-13T04:00:00Z"


#: The tables that make up authoritative state, in digest order.
STATE_TABLES = (
    "machines",
    "transition_rules",
    "tasks",
    "transitions",
    "intents",
    "artifacts",
    "effects",
    "approvals",
    "budget",
)


_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

CREATE TABLE messages (
    msg_seq INTEGER PRIMARY KEY,
    message_id TEXT NOT NULL,
    envelope_digest TEXT NOT NULL,
    trace_id TEXT NOT NULL, task_id TEXT NOT NULL,
    sender TEXT NOT NULL, recipient TEXT NOT NULL, type TEXT NOT NULL,
    schema_version TEXT NOT NULL, created_at TEXT NOT NULL,
    idempotency_key TEXT NOT NULL, payload_digest TEXT NOT NULL, digest_scheme TEXT NOT NULL,
    payload TEXT NOT NULL, evidence_refs TEXT NOT NULL,
    first_tick INTEGER NOT NULL,
    sender_seq INTEGER, sender_generation INTEGER,
    epoch INTEGER, expires_at TEXT,
    UNIQUE (message_id, envelope_digest)
);
CREATE INDEX messages_by_id ON messages (message_id);

CREATE TABLE deliveries (
    delivery_id INTEGER PRIMARY KEY,
    tick INTEGER NOT NULL,
    msg_seq INTEGER NOT NULL REFERENCES messages (msg_seq),
    message_id TEXT NOT NULL, task_id TEXT NOT NULL, type TEXT NOT NULL,
    decision TEXT NOT NULL CHECK (decision IN ('accepted','duplicate','conflict','late','rejected')),
    code TEXT, reason TEXT NOT NULL,
    state_after TEXT, state_version_after INTEGER
);

CREATE TABLE events (
    seq INTEGER PRIMARY KEY,
    tick INTEGER NOT NULL, created_at TEXT NOT NULL,
    type TEXT NOT NULL, task_id TEXT, message_id TEXT, delivery_id INTEGER,
    data TEXT NOT NULL
);
CREATE INDEX events_by_task ON events (task_id);
CREATE INDEX events_of_epochs ON events (seq) WHERE type IN ('fence_recorded', 'review_decided', 'reconciliation_resolved');

CREATE TABLE machines (
    version TEXT PRIMARY KEY, description TEXT NOT NULL, loaded_tick INTEGER NOT NULL
);
CREATE TABLE transition_rules (
    machine_version TEXT NOT NULL REFERENCES machines (version),
    from_state TEXT NOT NULL, to_state TEXT NOT NULL,
    roles TEXT NOT NULL, reason TEXT NOT NULL,
    PRIMARY KEY (machine_version, from_state, to_state)
);

CREATE TABLE tasks (
    task_id TEXT PRIMARY KEY,
    trace_id TEXT NOT NULL, goal TEXT NOT NULL,
    state TEXT NOT NULL, state_version INTEGER NOT NULL,
    machine_version TEXT NOT NULL REFERENCES machines (version),
    assignee TEXT, lease_holder TEXT, lease_version INTEGER NOT NULL,
    budget_total INTEGER NOT NULL, budget_left INTEGER NOT NULL,
    trusted INTEGER NOT NULL,
    late_results INTEGER NOT NULL, rejected INTEGER NOT NULL,
    created_tick INTEGER NOT NULL, updated_tick INTEGER NOT NULL
);

CREATE TABLE transitions (
    seq INTEGER PRIMARY KEY,
    task_id TEXT NOT NULL, old_state TEXT NOT NULL, new_state TEXT NOT NULL,
    reason TEXT NOT NULL, executor TEXT NOT NULL, role TEXT NOT NULL,
    tick INTEGER NOT NULL, created_at TEXT NOT NULL,
    state_version INTEGER NOT NULL, machine_version TEXT NOT NULL,
    message_id TEXT
);
CREATE INDEX transitions_by_task ON transitions (task_id);

CREATE TABLE intents (
    task_id TEXT NOT NULL, idempotency_key TEXT NOT NULL,
    payload_digest TEXT NOT NULL, digest_scheme TEXT NOT NULL,
    message_id TEXT NOT NULL, arrival INTEGER NOT NULL,
    decision TEXT NOT NULL, trusted INTEGER NOT NULL, seen INTEGER NOT NULL,
    payload TEXT NOT NULL, result TEXT NOT NULL,
    PRIMARY KEY (task_id, idempotency_key, payload_digest, digest_scheme)
);

CREATE TABLE artifacts (
    ref TEXT PRIMARY KEY, scheme TEXT NOT NULL, kind TEXT NOT NULL,
    size INTEGER NOT NULL, content TEXT NOT NULL,
    task_id TEXT, message_id TEXT, first_tick INTEGER NOT NULL
);

CREATE TABLE effects (
    effect_key TEXT PRIMARY KEY,
    task_id TEXT NOT NULL, kind TEXT NOT NULL, target TEXT NOT NULL,
    message_id TEXT NOT NULL, result_digest TEXT NOT NULL, tick INTEGER NOT NULL
);
CREATE INDEX effects_by_task ON effects (task_id);

CREATE TABLE approvals (
    approval_id INTEGER PRIMARY KEY,
    task_id TEXT NOT NULL, decision TEXT NOT NULL, reviewer TEXT NOT NULL,
    evidence TEXT NOT NULL, message_id TEXT NOT NULL, tick INTEGER NOT NULL
);

CREATE TABLE budget (
    entry INTEGER PRIMARY KEY,
    task_id TEXT NOT NULL, delta INTEGER NOT NULL, reason TEXT NOT NULL,
    message_id TEXT, tick INTEGER NOT NULL
);
"""


#: Every event type the runtime may append, and what folding it changes (from sim.events).
EVENT_TYPES = {t: cls.FOLDS for t, cls in EVENT_REGISTRY.items()}


_TASK_COLS = (
    "task_id, state, state_version, machine_version, assignee, lease_holder, lease_version, budget_left, trusted"
)


#: How the store keeps a JSON value: sorted keys, no whitespace, UTF-8 as itself (``json.dumps`` with
#: those options, the same bytes, through one reused encoder: see :func:`sim.digest.sorted_dumps`).
_dumps = sorted_dumps


def _parse_time(text: str) -> datetime:
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        raise StoreError(f"start time {text!r} is not an RFC 3339 UTC time like {DEFAULT_START}", code="E_FIELD_VALUE") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)
