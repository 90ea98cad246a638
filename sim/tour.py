"""The hand-delivery tour ('protolab tour'): the sample story of :mod:`sim.samples` and each fault
bending it, delivered one step at a time into a new store, then a reviewer's release of the task the
conflicting digest froze. What the tour cites (the messages in conflict, the message delivered twice)
is read from the steps it delivers, not written out beside them."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .envelope import Envelope
from .runner import refuse_lab_run
from .runtime import Outcome, deliver, put_artifact, review
from .samples import FACTS, demo_steps, draft
from .store import Store, remove_database

__all__ = ["Release", "open_tour", "store_artifacts", "tour_steps", "deliver_step", "conflict_evidence",
           "delivered_twice", "release", "NOTE"]

#: The reviewer's note on the release.
NOTE = "two fact tables under one key; rerun"


@dataclass(frozen=True)
class Release:
    """The reviewer's release of the frozen task: which task, the evidence cited, the outcome."""

    task_id: str
    evidence: list[str]
    outcome: Outcome


def open_tour(db: str | Path) -> Store:
    """A new store at ``db`` for the tour. An earlier protolab database there is replaced; a lab's
    run is refused (E_DB_LAB_RUN) and a file that is not a protolab database is refused, both kept."""
    if Path(db).exists():
        refuse_lab_run(db)
        Store.open(db).close()  # refuses a file that is not a protolab database
        remove_database(db)
    return Store.create(db)


def store_artifacts(store: Store) -> tuple[str, str]:
    """The fact table and the draft the story's envelopes cite, stored first: their refs."""
    draft_ = draft()
    return (put_artifact(store, FACTS, kind="fact-table", task_id=FACTS["task_id"]),
            put_artifact(store, draft_, kind="draft", task_id=draft_["task_id"]))


def tour_steps() -> list[tuple[str, list[Envelope]]]:
    """(title, envelopes) of each step, in order: :func:`sim.samples.demo_steps`."""
    return list(demo_steps())


def deliver_step(store: Store, envelopes: list[Envelope]) -> list[Outcome]:
    """One step: its envelopes delivered in order, each in its own transaction."""
    return [deliver(store, e) for e in envelopes]


def conflict_evidence(steps) -> tuple[str, list[str]]:
    """The task a conflicting digest freezes and the messages that carry its key: the first envelope
    whose idempotency key an earlier one on the same task carried with another payload digest; the
    evidence is every message under that key, in the order delivered."""
    seen: dict[tuple[str, str], dict[str, str]] = {}  # (task, key) -> {message_id: digest}
    for _title, envelopes in steps:
        for e in envelopes:
            prior = seen.setdefault((e.task_id, e.idempotency_key), {})
            if any(d != e.payload_digest for d in prior.values()):
                return e.task_id, [*prior, e.message_id]
            prior.setdefault(e.message_id, e.payload_digest)
    raise ValueError("no step delivers a conflicting digest")


def delivered_twice(steps) -> list[str]:
    """The message ids the steps deliver more than once, in the order first delivered."""
    counts = Counter(e.message_id for _title, envelopes in steps for e in envelopes)
    return [m for m, n in counts.items() if n > 1]


def release(store: Store, steps, *, by: str = "reviewer") -> Release:
    """The reviewer releases the task the conflict froze (back to ready), citing the retained evidence."""
    task, evidence = conflict_evidence(steps)
    return Release(task, evidence, review(store, task, "ready", by=by, evidence=evidence, note=NOTE))
