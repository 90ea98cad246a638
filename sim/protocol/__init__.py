"""Closed, ordered, replay-checked conversation protocols between admitted participants.

``sim.protocol.trace`` validates a ``conversation-trace-v2`` trace (a parsed JSON
value) and reduces its gathers; ``sim.protocol.mutate`` holds the adversarial
mutation suite; ``sim.protocol.diagram`` draws a trace as a Mermaid sequence
diagram. The JSON Schema ships beside this file (``SCHEMA_FILE``); ``load_schema``
reads it. Nothing here grants identity or authority or decides truth.
"""

from __future__ import annotations

import json
from pathlib import Path

from .diagram import mermaid, text_sequence
from .mutate import MUTATIONS, Mutation, run_mutations, synthetic_trace
from .trace import (
    CODES,
    KINDS,
    SCHEMA_NAME,
    TERMINALS,
    Finding,
    GatherResult,
    Report,
    check_shape,
    evaluate_gather,
    validate,
)

__all__ = [
    "CODES",
    "KINDS",
    "MUTATIONS",
    "SCHEMA_FILE",
    "SCHEMA_NAME",
    "TERMINALS",
    "Finding",
    "GatherResult",
    "Mutation",
    "Report",
    "check_shape",
    "evaluate_gather",
    "load_schema",
    "mermaid",
    "text_sequence",
    "run_mutations",
    "synthetic_trace",
    "validate",
]

SCHEMA_FILE = Path(__file__).resolve().parent / "conversation-trace-v2.schema.json"


def load_schema() -> dict:
    """The conversation-trace-v2 JSON Schema (draft 2020-12) as a dict."""
    return json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
