"""What Datasette shows over a run (``protolab browse``): every table and column described in the
kit's words, facets, canned queries a learner needs, and which columns name a row of another table.

Plain data (and the canned queries' SQL, which lives here with the rest of the SQL); the web face
(:mod:`sim.web.datasette`) hands it to Datasette and turns :data:`LINKS` into links.
"""

from __future__ import annotations

__all__ = ["TABLES", "FACETS", "QUERIES", "LINKS", "LABELS", "BIG_RUN", "metadata"]

#: past this many tasks a facet on task_id (one value per task) and Datasette's suggested facets cost
#: a second or more per page (a full scan each); they are left out there (docs/performance.md)
BIG_RUN = 1000

_MESSAGE = "The message log (what was said). "
_EVENT = "The event log (what happened). "
_STATE = "State (what is true now), derived only from the event log. "

#: table -> (description, {column: description})
TABLES: dict[str, tuple[str, dict[str, str]]] = {
    "messages": (_MESSAGE + "One row per envelope an agent sent: a message_id appears twice only if the same id came "
                 "back with different content. A message is a proposal; it changes nothing by itself.", {
        "msg_seq": "Position in the message log.",
        "message_id": "The sender's id for this message (M-..., A-... for acks).",
        "envelope_digest": "Digest of the whole envelope: tells two envelopes under one message_id apart.",
        "trace_id": "The conversation (run of the report) this message belongs to.",
        "task_id": "The task it is about (the trace id for conversation-level messages: fence, its acks).",
        "sender": "Who sent it.", "recipient": "Who it was addressed to.",
        "type": "task_request, task_started, task_result, ack, cancel, review_decision or fence.",
        "schema_version": "The envelope schema the sender used.",
        "created_at": "When the sender made it (logical time).",
        "idempotency_key": "The sender's name for the intent: a resend reuses it, a new attempt gets a new one.",
        "payload_digest": "Digest of the payload under digest_scheme: same key and same digest is a duplicate, "
                          "same key and another digest a conflict.",
        "digest_scheme": "json-sorted-v1 (the course's) or jcs-v2 (RFC 8785).",
        "payload": "The payload as the log keeps it (sensitive values [redacted] under the safe policy).",
        "evidence_refs": "Artifacts or messages the sender cites (sha256:... refs).",
        "first_tick": "Tick at which it was first seen.",
        "sender_seq": "The sender's own sequence number for it.",
        "sender_generation": "Which body of the sender sent it (a restarted worker is a new generation).",
        "epoch": "The conversation's epoch the sender spoke in (empty: the first); one from an earlier epoch is stale.",
        "expires_at": "When the message stops being valid (empty: never); delivered later, it has expired.",
    }),
    "deliveries": (_MESSAGE + "One row per attempt to hand an envelope to its recipient, with the intake's decision: "
                   "a duplicate or a late result is recorded here and changes no state.", {
        "delivery_id": "Position in the delivery order (1, 2, ... with no gaps).",
        "tick": "Logical time of the delivery.",
        "msg_seq": "The envelope delivered (a row of messages).",
        "message_id": "Its message_id.", "task_id": "The task it is about.", "type": "The message type.",
        "decision": "The intake's decision: accepted, duplicate, conflict, late or rejected.",
        "code": "Why, as a stable code (E_...), when it was not simply accepted.",
        "reason": "Why, in words.",
        "state_after": "The task's state after this delivery (unchanged unless accepted).",
        "state_version_after": "The task's state_version after it: moves by one per applied transition.",
    }),
    "events": (_EVENT + "Numbered, append-only facts the runtime recorded (task_created, transition_applied, "
               "duplicate_recorded, effect_committed, fault_injected, ...). State is their fold: replay proves it.", {
        "seq": "Position in the event log.", "tick": "Logical time.", "created_at": "Logical time as a timestamp.",
        "type": "What kind of fact.", "task_id": "The task it concerns.",
        "message_id": "The message that caused it.", "delivery_id": "The delivery that caused it (none: the "
                                                                     "transport or a worker's own step).",
        "data": "The fact's fields, as JSON.",
    }),
    "tasks": (_STATE + "One row per task: its current state, its version (compare-and-swap), lease and budget.", {
        "task_id": "The task.", "trace_id": "Its conversation.", "goal": "What it is for.",
        "state": "pending, ready, running, retry_wait, succeeded, failed, denied, waiting_human, needs_review or "
                 "canceled.",
        "state_version": "Bumped by every applied transition; a write naming an older one is refused.",
        "machine_version": "The transition table its moves are checked against.",
        "assignee": "The worker it was given to.", "lease_holder": "Who holds its lease now.",
        "lease_version": "Bumped by each lease granted: a zombie's older lease is fenced.",
        "budget_total": "Attempts allowed.", "budget_left": "Attempts left.",
        "trusted": "0 once a conflicting or untrusted result touched it.",
        "late_results": "Late results recorded for it (state unchanged).",
        "rejected": "Deliveries refused for it.",
        "created_tick": "When it was created.", "updated_tick": "When its row last changed.",
    }),
    "transitions": (_STATE + "Every applied move of a task: old state, new state, who and why.", {
        "seq": "Order of application.", "task_id": "The task moved.", "old_state": "From.", "new_state": "To.",
        "reason": "The rule's reason.", "executor": "Who made the move.", "role": "Their role.",
        "tick": "Logical time.", "created_at": "As a timestamp.",
        "state_version": "The task's version after the move.", "machine_version": "The table that allowed it.",
        "message_id": "The message that carried it.",
    }),
    "transition_rules": (_STATE + "The allowlist: each move a task may make under a machine version, and the roles "
                         "that may make it. A move not here is rejected.", {
        "machine_version": "The machine.", "from_state": "From.", "to_state": "To.",
        "roles": "Comma-separated roles allowed.", "reason": "The rule in words.",
    }),
    "machines": (_STATE + "The transition tables loaded in this run.", {
        "version": "The machine's version.", "description": "What it is.", "loaded_tick": "When it was loaded.",
    }),
    "intents": (_STATE + "What intake remembers of each intent: keyed by task, idempotency key, payload digest and "
                "scheme. A duplicate reuses the stored result; a second digest under one key is a conflict, both "
                "payloads kept in arrival order.", {
        "task_id": "The task.", "idempotency_key": "The sender's key.", "payload_digest": "The payload's digest.",
        "digest_scheme": "Its scheme.", "message_id": "The message that first brought it.",
        "arrival": "Arrival order (for conflicts: which payload came first).",
        "decision": "The decision on its first arrival.", "trusted": "0: an untrusted external result.",
        "seen": "How many times it arrived.", "payload": "Its payload.",
        "result": "The stored result a duplicate gets back.",
    }),
    "artifacts": (_STATE + "Content stored by reference (sha256:...): evidence travels as refs, not in payloads.", {
        "ref": "The content's digest.", "scheme": "How it was digested.", "kind": "What it is.",
        "size": "Bytes.", "content": "The content.", "task_id": "The task that stored it.",
        "message_id": "The message that stored it.", "first_tick": "When.",
    }),
    "effects": (_STATE + "Side effects (a publication), one row per effect key: committed at most once.", {
        "effect_key": "Unique: a second commit under one key is refused.", "task_id": "The task.",
        "kind": "publish, retract, ...", "target": "What was published.",
        "message_id": "The result that caused it.", "result_digest": "The digest of that result.",
        "tick": "When.",
    }),
    "approvals": (_STATE + "Reviewers' decisions on frozen tasks, each citing retained evidence.", {
        "approval_id": "Order.", "task_id": "The task decided.", "decision": "ready, canceled, keep or retract.",
        "reviewer": "Who decided.", "evidence": "What they cited.", "message_id": "Their decision's message.",
        "tick": "When.",
    }),
    "budget": (_STATE + "The budget ledger: each charge or refund of a task's attempts.", {
        "entry": "Order.", "task_id": "The task.", "delta": "Attempts charged (negative) or given back.",
        "reason": "Why.", "message_id": "The message that charged it.", "tick": "When.",
    }),
    "meta": ("The run's settings: scenario, seed, policy, faults, schema version.", {
        "key": "The setting.", "value": "Its value.",
    }),
}

#: table -> columns faceted by default
FACETS: dict[str, list[str]] = {
    "deliveries": ["decision", "type", "task_id"],
    "messages": ["type", "sender", "task_id"],
    "events": ["type", "task_id"],
    "tasks": ["state"],
    "transitions": ["new_state", "task_id"],
    "intents": ["decision", "task_id"],
}

#: name -> (title, description, sql): the canned queries
QUERIES: dict[str, tuple[str, str, str]] = {
    "deliveries_of_intent": (
        "Every delivery of one intent",
        "Each attempt to deliver the envelopes of one (task, idempotency key), in order, with the digest each carried "
        "and the intake's decision: a resend is a duplicate, another digest under the key a conflict.",
        "SELECT d.delivery_id, d.tick, d.message_id, d.type, d.decision, d.code, d.state_after, "
        "m.payload_digest, m.digest_scheme, m.sender "
        "FROM deliveries d JOIN messages m ON m.msg_seq = d.msg_seq "
        "WHERE m.task_id = :task_id AND m.idempotency_key = :idempotency_key ORDER BY d.delivery_id",
    ),
    "needs_review_payloads": (
        "Tasks in needs_review, with both payloads",
        "Each frozen task and every payload stored under a key that has more than one: the conflict a reviewer "
        "decides, in arrival order.",
        "SELECT t.task_id, i.idempotency_key, i.arrival, i.message_id, i.payload_digest, i.digest_scheme, "
        "i.trusted, i.payload FROM tasks t JOIN intents i ON i.task_id = t.task_id "
        "WHERE t.state = 'needs_review' AND (SELECT COUNT(*) FROM intents j WHERE j.task_id = i.task_id "
        "AND j.idempotency_key = i.idempotency_key) > 1 ORDER BY t.task_id, i.idempotency_key, i.arrival",
    ),
    "effects_per_key": (
        "Effects per key",
        "Every effect key with its target and what caused it, and how many keys publish the same target for the "
        "same task: more than one means something was published twice under different keys.",
        "SELECT e.effect_key, e.kind, e.target, e.task_id, e.message_id, e.tick, "
        "(SELECT COUNT(*) FROM effects f WHERE f.kind = e.kind AND f.target = e.target AND f.task_id = e.task_id) "
        "AS keys_for_target FROM effects e ORDER BY e.task_id, e.tick, e.effect_key",
    ),
    "transitions_of_task": (
        "The transitions of one task",
        "Every move of one task in order: old state, new state, who, why and the message that carried it.",
        "SELECT seq, tick, old_state, new_state, state_version, role, executor, reason, message_id "
        "FROM transitions WHERE task_id = :task_id ORDER BY seq",
    ),
}

#: (table, column) -> (table it names, how): "row" links to that table's row by primary key,
#: "filter" to that table filtered on the same column (message_id is not the messages' key)
LINKS: dict[tuple[str, str], tuple[str, str]] = {
    **{(t, "task_id"): ("tasks", "row") for t in ("messages", "deliveries", "events", "transitions", "intents",
                                                  "artifacts", "effects", "approvals", "budget")},
    **{(t, "message_id"): ("messages", "filter") for t in ("deliveries", "events", "transitions", "intents",
                                                           "artifacts", "effects", "approvals", "budget")},
    ("events", "delivery_id"): ("deliveries", "row"),
    ("deliveries", "message_id"): ("messages", "filter"),
}

#: table -> the column Datasette shows for a row another table points at (deliveries.msg_seq reads as M-3)
LABELS: dict[str, str] = {"messages": "message_id", "tasks": "task_id", "machines": "version"}


def metadata(database: str, *, title: str, tasks: int = 0) -> dict:
    """Datasette's metadata for a run of ``tasks`` tasks opened under the name ``database``."""
    tables = {}
    for name, (description, columns) in TABLES.items():
        t: dict = {"description": description, "columns": dict(columns)}
        if name in FACETS:
            t["facets"] = [c for c in FACETS[name] if tasks <= BIG_RUN or c != "task_id"]
        if name in LABELS:
            t["label_column"] = LABELS[name]
        tables[name] = t
    queries = {name: {"title": title_, "description": desc, "sql": sql} for name, (title_, desc, sql) in QUERIES.items()}
    return {
        "title": title,
        "description": "A protolab run, read-only. Messages (what was said: messages, deliveries), events (what "
                       "happened: events) and state (what is true now: tasks and the tables beside it) are kept "
                       "apart; state is only ever the fold of the events.",
        "databases": {database: {"tables": tables, "queries": queries}},
    }
