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
    "loads_trace",
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


def strict_hooks(what: str):
    """The two hooks of a strict JSON reading (``parse_constant``, ``object_pairs_hook``): no NaN or
    Infinity (E_NAN), no key twice in one object (E_DUPLICATE_KEY), each refusal naming ``what``."""
    from ..errors import InputError

    def refuse(name):
        raise InputError(f"{what} holds {name}, which is not JSON", code="E_NAN")

    def one_value_per_key(pairs):
        d = dict(pairs)
        if len(d) != len(pairs):
            seen: set = set()
            k = next(k for k, _ in pairs if k in seen or seen.add(k))
            raise InputError(f"{what} repeats the key {k!r} in one object", code="E_DUPLICATE_KEY")
        return d

    return refuse, one_value_per_key


def loads_trace(text: str, what: str = "trace file") -> object:
    """A trace's JSON text parsed as `trace validate` reads it, and as the grader must (one reader,
    one answer): no NaN or Infinity, and no key twice in one object (where "the last one wins" would
    decide what the trace says). Refusals are :class:`~sim.errors.InputError` naming ``what``:
    E_NAN, E_DUPLICATE_KEY, E_JSON."""
    from ..errors import InputError

    refuse, one_value_per_key = strict_hooks(what)

    try:
        return json.loads(text.removeprefix("\ufeff"), parse_constant=refuse, object_pairs_hook=one_value_per_key)
    except json.JSONDecodeError as e:
        raise InputError(f"{what} is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}", code="E_JSON") from None
    except (RecursionError, MemoryError) as e:
        raise InputError(f"{what} cannot be read as JSON: {type(e).__name__}: nested too deeply", code="E_JSON") from None
    except ValueError as e:
        if isinstance(e, InputError):
            raise
        raise InputError(f"{what} cannot be read as JSON: {e}", code="E_JSON") from None
