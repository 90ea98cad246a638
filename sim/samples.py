"""The sample envelopes of the default story, and the fault variants of it.

``data/envelopes/*.json`` and ``data/artifacts/*.json`` are written from here
(``python -m sim.samples data``) and a test checks that the shipped files still
match, so the digests in them are always right.

Story (trace R-1): the manager asks the researcher to collect evidence (T-1); the
researcher stores a fact table as an artifact and answers with a result citing it;
the manager asks the writer for a draft from that fact table (T-2), by reference;
the writer answers with a draft artifact and a publish effect; acks flow back.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from . import digest as _digest
from .envelope import Envelope, build_envelope

__all__ = ["FACTS", "DRAFT", "facts_ref", "draft_ref", "happy_path", "fault_files", "write_samples", "demo_steps"]

START = datetime(2026, 7, 13, 4, 0, 0, tzinfo=timezone.utc)

FACTS = {
    "kind": "fact-table",
    "task_id": "T-1",
    "columns": ["claim", "source", "date"],
    "rows": [
        ["Duplicate deliveries are normal in at-least-once transports", "transport-notes.md#delivery", "2026-06-30"],
        ["An idempotency key names one logical intent", "message-protocols.md#envelope", "2026-07-01"],
        ["A late failure must not overwrite a success", "message-protocols.md#state-machine", "2026-07-02"],
    ],
}

DRAFT = {
    "kind": "draft",
    "task_id": "T-2",
    "title": "Why a chat transcript is not a state database",
    "body": "Three facts, each with its source, from the fact table this draft cites.",
    "cites": None,  # filled with the fact table ref below
}


def facts_ref() -> str:
    return _digest.digest(FACTS)


def draft() -> dict:
    d = dict(DRAFT)
    d["cites"] = facts_ref()
    return d


def draft_ref() -> str:
    return _digest.digest(draft())


def _at(second: int) -> str:
    return (START + timedelta(seconds=second)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _env(mid, task, sender, recipient, typ, payload, key, second, refs=(), scheme="json-sorted-v1") -> Envelope:
    return build_envelope(
        message_id=mid, trace_id="R-1", task_id=task, sender=sender, recipient=recipient, type=typ,
        payload=payload, idempotency_key=key, created_at=_at(second), evidence_refs=refs, digest_scheme=scheme,
    )


def m1():
    return _env("M-1", "T-1", "manager", "researcher", "task_request", {"goal": "collect evidence", "budget": 3}, "R-1:T-1:request", 1)


def m2():
    return _env("M-2", "T-1", "researcher", "manager", "task_started", {"lease_version": 1}, "R-1:T-1:attempt-1:started", 2)


def m3():
    return _env(
        "M-3", "T-1", "researcher", "manager", "task_result",
        {"status": "succeeded", "lease_version": 1, "summary": "3 claims, each with a source", "fact_table": facts_ref()},
        "R-1:T-1:attempt-1", 3, refs=[facts_ref()],
    )


def happy_path() -> list[Envelope]:
    fr, dr = facts_ref(), draft_ref()
    return [
        m1(),
        m2(),
        m3(),
        _env("A-3", "T-1", "manager", "researcher", "ack", {"of": "M-3"}, "R-1:T-1:ack:M-3", 4),
        _env("M-4", "T-2", "manager", "writer", "task_request", {"goal": f"draft from {fr}", "budget": 3}, "R-1:T-2:request", 5, refs=[fr]),
        _env("M-5", "T-2", "writer", "manager", "task_started", {"lease_version": 1}, "R-1:T-2:attempt-1:started", 6),
        _env(
            "M-6", "T-2", "writer", "manager", "task_result",
            {"status": "succeeded", "lease_version": 1, "draft": dr, "effect": {"kind": "publish", "target": "R-1"}},
            "R-1:T-2:attempt-1", 7, refs=[dr, fr],
        ),
        _env("A-6", "T-2", "manager", "writer", "ack", {"of": "M-6"}, "R-1:T-2:ack:M-6", 8),
    ]


def conflicting_m3(mid: str = "M-4", second: int = 4) -> Envelope:
    """Same idempotency key as M-3, a different fact table: a conflict, not a duplicate."""
    other = dict(FACTS, rows=FACTS["rows"][:2])
    return _env(
        mid, "T-1", "researcher", "manager", "task_result",
        {"status": "succeeded", "lease_version": 1, "summary": "2 claims, each with a source", "fact_table": _digest.digest(other)},
        "R-1:T-1:attempt-1", second, refs=[facts_ref()],
    )


def late_failure(mid: str = "M-4", second: int = 4) -> Envelope:
    """A failed result for T-1 under a new key, arriving after success."""
    return _env(
        mid, "T-1", "researcher", "manager", "task_result",
        {"status": "failed", "lease_version": 1, "error": "source timed out"}, "R-1:T-1:attempt-1:failure", second,
    )


def fault_files() -> dict[str, object]:
    """File name -> JSON value for every shipped sample."""
    bad = m1().to_dict()
    bad["payload"] = {"goal": "collect evidence", "budget": 30}  # the digest still covers budget 3
    return {
        "happy-path.json": [e.to_dict() for e in happy_path()],
        "duplicate.json": [e.to_dict() for e in (m1(), m2(), m3(), m3())],
        "conflicting-digest.json": [e.to_dict() for e in (m1(), m2(), m3(), conflicting_m3())],
        "late-failure.json": [e.to_dict() for e in (m1(), m2(), m3(), late_failure())],
        "ack.json": [
            e.to_dict()
            for e in (m1(), m2(), _env("A-2", "T-1", "manager", "researcher", "ack", {"of": "M-2"}, "R-1:T-1:ack:M-2", 3))
        ],
        "rejected.json": [
            e.to_dict()
            for e in (
                m1(),
                _env("M-2", "T-1", "writer", "manager", "task_started", {"lease_version": 1}, "R-1:T-1:attempt-1:started", 2),
                _env("M-3", "T-1", "researcher", "manager", "task_result", {"status": "succeeded", "lease_version": 1}, "R-1:T-1:attempt-1", 3),
            )
        ],
        "jcs-v2.json": _env(
            "M-1", "T-1", "manager", "researcher", "task_request", {"goal": "collect evidence", "budget": 3},
            "R-1:T-1:request", 1, scheme="jcs-v2",
        ).to_dict(),
        "bad-digest.json": bad,
    }


def write_samples(root: Path) -> list[Path]:
    """Write data/envelopes/*.json and data/artifacts/*.json under ``root``."""
    written = []
    (root / "envelopes").mkdir(parents=True, exist_ok=True)
    (root / "artifacts").mkdir(parents=True, exist_ok=True)
    for name, value in fault_files().items():
        p = root / "envelopes" / name
        p.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(p)
    for name, value in (("facts-T-1.json", FACTS), ("draft-T-2.json", draft())):
        p = root / "artifacts" / name
        p.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(p)
    return written


def demo_steps() -> list[tuple[str, list[Envelope]]]:
    """The hand-delivery demo: the story, then each fault bending it."""
    happy = happy_path()
    return [
        ("the default story: T-1 collects evidence, T-2 drafts and publishes", happy),
        ("duplicate delivery: M-6 arrives again (publication must not run twice)", [happy[6]]),
        ("late failure: a failed result for T-1 under a new key, after success", [late_failure("M-7", 9)]),
        ("ack: a receipt changes no task state", [_env("A-7", "T-1", "manager", "researcher", "ack", {"of": "M-7"}, "R-1:T-1:ack:M-7", 10)]),
        ("conflicting digest: M-3's key again with a different fact table", [conflicting_m3("M-8", 11)]),
    ]


if __name__ == "__main__":  # pragma: no cover - maintenance entry point
    for p in write_samples(Path(sys.argv[1] if len(sys.argv) > 1 else "data")):
        print(p)
