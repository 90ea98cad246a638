"""The wire between the kit and an agent that runs as its own process (pure): JSON lines, version 1.

A process agent (``protolab run SCENARIO --agent ROLE=CMD``, :mod:`sim.procagent`) reads one JSON
object a line on stdin and writes one a line on stdout. Every line carries ``"wire": 1``. The kit
writes three kinds of line, and after each it reads the agent's lines until the agent's ``done``:

* ``init``: once per process: the role it plays (``role`` and ``agent_id``, the participant name its
  envelopes are sent by), its ``generation`` (1, then one more each time a crash restarts it), the
  run's ``seed``, the ``scenario``'s name, its ``trace`` and ``settings``;
* ``tick``: a new round: its number, the agent's clock (``time``), the conversation's ``epoch``, and
  the tasks the agent works on as the runtime holds them (what the kit's own agents read);
* ``deliver``: an envelope the transport delivered to the agent, and what the kit's runtime (the
  agent's intake) ``decision`` made of it.

The agent answers with ``send`` (one envelope) and ``artifact`` (a work product to store,
content-addressed: its ``ref`` is ``sha256:`` of its json-sorted-v1 bytes) lines, then one ``done``; what
it prints on stderr is its own log. :func:`parse_agent_line` reads one of its lines or
raises :class:`WireError` naming what is wrong with it (its code says which); the kit records a bad
line as what it is and goes on. docs/wire.md describes the wire; ``wire-v1.schema.json`` beside this
module is its JSON Schema (tests hold both to this module).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .errors import InputError

__all__ = ["WIRE_VERSION", "KIT_TYPES", "AGENT_TYPES", "WireError", "AgentLine", "init_line", "tick_line",
           "deliver_line", "parse_agent_line", "dumps", "SCHEMA_FILE", "EXCERPT"]

WIRE_VERSION = 1
#: what the kit writes, and what an agent writes back
KIT_TYPES = ("init", "tick", "deliver")
AGENT_TYPES = ("send", "artifact", "done")
#: the JSON Schema of both directions, beside this module
SCHEMA_FILE = "wire-v1.schema.json"
#: how much of a refused line the record keeps
EXCERPT = 200

#: each agent line's required fields and their JSON types (beyond ``wire`` and ``type``)
_REQUIRED: dict[str, dict[str, type]] = {
    "send": {"envelope": dict},
    "artifact": {"task_id": str, "kind": str, "ref": str, "content": dict},
    "done": {},
}


class WireError(InputError):
    """A line an agent wrote that the wire does not allow (its code says what is wrong)."""

    code = "E_WIRE"


@dataclass(frozen=True)
class AgentLine:
    """One line an agent wrote, read: its type and its fields (``envelope`` still raw JSON data: the
    kit parses it as it parses any envelope)."""

    type: str
    fields: dict = field(default_factory=dict)


def dumps(obj: dict) -> str:
    """One wire line (no newline): compact JSON, keys in the order given, non-ASCII as itself."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def init_line(*, role: str, agent_id: str, generation: int, seed: int, scenario: str, trace: str,
              settings: dict) -> dict:
    return {"wire": WIRE_VERSION, "type": "init", "role": role, "agent_id": agent_id, "generation": generation,
            "seed": seed, "scenario": scenario, "trace": trace, "settings": dict(settings)}


def tick_line(*, round: int, time: str, epoch: int, tasks: list[dict]) -> dict:
    return {"wire": WIRE_VERSION, "type": "tick", "round": round, "time": time, "epoch": epoch, "tasks": list(tasks)}


def deliver_line(*, round: int, envelope: dict, decision: str) -> dict:
    return {"wire": WIRE_VERSION, "type": "deliver", "round": round, "decision": decision, "envelope": envelope}


def _excerpt(text: str) -> str:
    return text if len(text) <= EXCERPT else text[:EXCERPT] + "..."


def _refuse_constant(name):
    raise ValueError(f"{name} is not JSON")


def parse_agent_line(text: str) -> AgentLine:
    """One line an agent wrote (without its newline), read; :class:`WireError` when it is not JSON
    (E_WIRE_NOT_JSON), not an object of this wire's version (E_WIRE_VERSION), of a type an agent does
    not write (E_WIRE_TYPE), or lacks a field or has one of the wrong type (E_WIRE_FIELD)."""
    try:
        obj = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as e:
        raise WireError(f"not a JSON line ({e}): {_excerpt(text)!r}", code="E_WIRE_NOT_JSON") from None
    if not isinstance(obj, dict):
        raise WireError(f"a wire line is a JSON object, not {type(obj).__name__}: {_excerpt(text)!r}",
                        code="E_WIRE_NOT_JSON")
    version = obj.get("wire")
    if version != WIRE_VERSION or isinstance(version, bool):
        raise WireError(f"\"wire\" must be {WIRE_VERSION}, not {json.dumps(version)}: {_excerpt(text)!r}",
                        code="E_WIRE_VERSION")
    kind = obj.get("type")
    if kind not in _REQUIRED:
        raise WireError(f"an agent writes {', '.join(AGENT_TYPES)} lines, not type {json.dumps(kind)}: "
                        f"{_excerpt(text)!r}", code="E_WIRE_TYPE")
    wanted = _REQUIRED[kind]
    extra = sorted(set(obj) - set(wanted) - {"wire", "type"})
    if extra:
        raise WireError(f"a {kind} line has no field {extra[0]!r}: {_excerpt(text)!r}", code="E_WIRE_FIELD")
    for name, typ in wanted.items():
        if name not in obj:
            raise WireError(f"a {kind} line needs {name!r}: {_excerpt(text)!r}", code="E_WIRE_FIELD")
        if not isinstance(obj[name], typ):
            raise WireError(f"{kind}.{name} must be a JSON {'object' if typ is dict else 'string'}: "
                            f"{_excerpt(text)!r}", code="E_WIRE_FIELD")
    return AgentLine(kind, {k: v for k, v in obj.items() if k not in ("wire", "type")})
