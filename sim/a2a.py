"""A run seen through A2A's objects: an export, not a wire implementation.

A2A (the Agent2Agent protocol, v1.0) names the things independent agents exchange: an
**Agent Card** says who an agent is and what it can do; a **Task** has a status whose state
is one of A2A's task states; a **Message** has a role (``ROLE_USER``: the side that asked,
``ROLE_AGENT``: the agent doing the work) and **Parts** (text, or JSON data); an **Artifact** is
what a task produced, also made of parts. :class:`A2AExport` writes a stored run in those shapes:

* one Agent Card per participant the run names;
* one Task per task, its state mapped by :data:`sim.machine.A2A_STATE`, its artifacts inside it;
* one Message per stored envelope (message log row), a TextPart saying what it is and a DataPart
  holding its payload, in log order;
* an artifact that belongs to no task is listed on its own.

What A2A has no place for is kept, and marked, under the kit's extension (:data:`EXTENSION_URI`):
every object that carries kit fields lists the URI in ``extensions`` and keeps them in
``metadata[EXTENSION_URI]`` (the idempotency key, the payload digest and its scheme, the evidence
refs, the kit's own task state...). A task in ``needs_review`` is exported as
``TASK_STATE_INPUT_REQUIRED`` with ``courseExtensionState`` saying A2A defines no such state.

The output is a function of the database alone (no clock, no paths, no randomness): two exports
of one run are the same bytes. It is written a row at a time (flat memory but for the artifacts'
index, which holds no content).
"""

from __future__ import annotations

from typing import IO

from . import __version__
from .files import write_json_fields
from .machine import A2A_EXTENSION_STATES, A2A_NOTES, A2A_STATE, TaskState

__all__ = ["A2A_VERSION", "A2A_VERSION_AS_OF", "EXTENSION_URI", "EXPORT_KIND", "ROLE_SKILLS", "state_mapping", "A2AExport"]

A2A_VERSION = "1.0"
#: The fact the version rests on, dated as the course's source dates it: on this day A2A's specification
#: page listed 1.0.0 as its latest release. It will change; the export negotiates MAJOR.MINOR only (1.0).
A2A_VERSION_AS_OF = ("1.0.0", "2026-07-22")
EXPORT_KIND = "protolab-a2a-export"
#: The kit's extension: where everything A2A has no field for lives, under this key of ``metadata``.
EXTENSION_URI = "urn:protolab:a2a-extension:course-runtime:v1"
EXTENSION = {
    "uri": EXTENSION_URI,
    "description": ("protolab's course runtime: idempotency keys, payload digests, evidence refs, the kit's "
                    "own task states (needs_review is a course safety extension A2A does not define)"),
    "required": False,
}

#: What each role's Agent Card says it can do (one skill each).
ROLE_SKILLS = {
    "manager": ("plan-and-delegate", "Plan and delegate", "Splits a goal into tasks, asks workers, acks and cancels."),
    "researcher": ("collect-evidence", "Collect evidence", "Builds a fact table with a source and a date per claim."),
    "writer": ("draft-report", "Draft a report", "Writes a draft citing the fact tables it was given."),
    "reviewer": ("review", "Review", "Approves or cancels work that waits on a person, and reconciles conflicts."),
}

#: Message types sent by the agent doing the task (A2A's ROLE_AGENT); every other type comes from
#: the side that asked, or reviews, the work (ROLE_USER).
AGENT_TYPES = frozenset({"task_started", "task_result"})


def state_mapping() -> list[dict]:
    """The kit state -> A2A state table, one row per kit state, with whether it is an extension and why."""
    return [{"kitState": s.value, "a2aState": A2A_STATE[s], "extension": s in A2A_EXTENSION_STATES,
             "note": A2A_NOTES.get(s, "")} for s in TaskState]


def _role(participant: str) -> str:
    return participant.split("-", 1)[0]


def _agent_card(name: str) -> dict:
    role = _role(name)
    skill_id, skill_name, skill_text = ROLE_SKILLS.get(role, (role, role, f"A {role}."))
    return {
        "name": name,
        "description": f"protolab's simulated {role} ({name}).",
        "version": __version__,
        # a simulated agent has no endpoint: the URN names it, the binding says it is not on a wire
        "supportedInterfaces": [{"url": f"urn:protolab:agent:{name}", "protocolBinding": "protolab-simulated",
                                 "protocolVersion": A2A_VERSION}],
        "capabilities": {"streaming": False, "pushNotifications": False, "extensions": [EXTENSION]},
        "defaultInputModes": ["application/json"],
        "defaultOutputModes": ["application/json"],
        "skills": [{"id": skill_id, "name": skill_name, "description": skill_text, "tags": [role]}],
    }


def _parts(content) -> list[dict]:
    if isinstance(content, str):
        return [{"text": content, "mediaType": "text/plain"}]
    return [{"data": content, "mediaType": "application/json"}]


def _artifact(row: dict) -> dict:
    return {
        "artifactId": row["ref"],
        "name": row["kind"],
        "parts": _parts(row["content"]),
        "extensions": [EXTENSION_URI],
        "metadata": {EXTENSION_URI: {"ref": row["ref"], "digestScheme": row["scheme"], "size": row["size"],
                                     "taskId": row["task_id"], "messageId": row["message_id"],
                                     "firstTick": row["first_tick"]}},
    }


def _message(m: dict) -> dict:
    return {
        "messageId": m["message_id"],
        "contextId": m["trace_id"],
        "taskId": m["task_id"],
        "role": "ROLE_AGENT" if m["type"] in AGENT_TYPES else "ROLE_USER",
        "parts": [{"text": f"{m['type']} from {m['sender']} to {m['recipient']}", "mediaType": "text/plain"},
                  {"data": m["payload"], "mediaType": "application/json"}],
        "extensions": [EXTENSION_URI],
        "metadata": {EXTENSION_URI: {
            "msgSeq": m["msg_seq"], "type": m["type"], "sender": m["sender"], "recipient": m["recipient"],
            "schemaVersion": m["schema_version"], "createdAt": m["created_at"],
            "idempotencyKey": m["idempotency_key"], "payloadDigest": m["payload_digest"],
            "digestScheme": m["digest_scheme"], "envelopeDigest": m["envelope_digest"],
            "evidenceRefs": list(m["evidence_refs"]), "senderSeq": m["sender_seq"],
            "senderGeneration": m["sender_generation"], "firstTick": m["first_tick"],
        }},
    }


def _task(t: dict, artifacts: list[dict], timestamp: str | None) -> dict:
    state = TaskState(t["state"])
    status: dict = {"state": A2A_STATE[state]}
    if timestamp is not None:
        status["timestamp"] = timestamp
    kit = {"state": t["state"], "stateVersion": t["state_version"], "machineVersion": t["machine_version"],
           "goal": t["goal"], "assignee": t["assignee"], "leaseHolder": t["lease_holder"],
           "budgetTotal": t["budget_total"], "budgetLeft": t["budget_left"], "trusted": bool(t["trusted"])}
    if state in A2A_EXTENSION_STATES:
        kit["courseExtensionState"] = {"state": t["state"], "note": A2A_NOTES[state]}
    return {"id": t["task_id"], "contextId": t["trace_id"], "status": status, "artifacts": artifacts,
            "extensions": [EXTENSION_URI], "metadata": {EXTENSION_URI: kit}}


class A2AExport:
    """One run's export; :meth:`write` writes it, after which ``counts`` says how much it held."""

    def __init__(self, store):
        self.store = store
        self.counts = {"agentCards": 0, "tasks": 0, "messages": 0, "artifacts": 0}

    def _fields(self):
        store = self.store
        yield "kind", EXPORT_KIND
        yield "formatVersion", 1
        yield "a2aVersion", A2A_VERSION
        yield "note", ("A2A-shaped JSON of a protolab run, for reading and comparison: not a claim of wire "
                       "conformance. Messages are in log order; the kit's fields are under the extension URI.")
        yield "extension", EXTENSION
        yield "stateMapping", state_mapping()
        cards = [_agent_card(p) for p in store.participants()]
        self.counts["agentCards"] = len(cards)
        yield "agentCards", iter(cards)
        # the artifacts' index (no content) by task; the content is read as each is written
        by_task: dict = {}
        for a in store.iter_view("artifacts"):
            by_task.setdefault(a["task_id"], []).append(a["ref"])
        last_change: dict[str, str] = {}
        for tr in store.iter_view("transitions"):
            last_change[tr["task_id"]] = tr["created_at"]

        def artifacts_of(refs):
            out = [_artifact(store.artifact(ref)) for ref in refs]
            self.counts["artifacts"] += len(out)
            return out

        def tasks():
            for t in store.iter_view("tasks"):
                self.counts["tasks"] += 1
                yield _task(t, artifacts_of(by_task.pop(t["task_id"], ())), last_change.get(t["task_id"]))

        yield "tasks", tasks()

        def messages():
            for m in store.iter_view("messages"):
                self.counts["messages"] += 1
                yield _message(m)

        yield "messages", messages()
        # what is left belongs to no task of the run (None first, then by task id)
        orphans = [ref for key in sorted(by_task, key=lambda k: (k is not None, k or "")) for ref in by_task[key]]
        yield "unattachedArtifacts", (a for a in artifacts_of(orphans))

    def write(self, fh: IO[str]) -> None:
        """The export as one JSON object, written field by field and row by row."""
        write_json_fields(fh.write, self._fields())
