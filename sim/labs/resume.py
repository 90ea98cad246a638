"""A lab's run is the learner's work: made by ``protolab lab start``, marked as that lab's,
journaled, resumed, and replaced only on purpose.

``open_lab_run`` makes the run of a lab (a :class:`~sim.live.LiveRun` written to ``labNN.db``, and
in workshop mode the naive side beside it, in memory) or reopens the one there:

* a new run's meta carries ``lab`` (the lab's number: ``run``, ``demo``, ``tui``, ``tour`` and
  ``init`` refuse to replace such a file), ``lab_run`` (the run's own id: actions recorded in the
  progress file count on this run only) and ``lab_journal``, every call that drove the run
  (steps, injections, crashes, reviewers' decisions; :attr:`LiveRun.journal`), written after
  each one; the workshop's naive side keeps its own in ``lab_journal_naive``;
* reopening replays the journal into a fresh run of the lab's scenario, seed and faults, written
  where the old file was while the old file waits beside it (``labNN.db.resuming``); the fresh
  run must reach the old one's state digest, event and delivery counts, or the old file is put
  back untouched and the learner is told why (E_LAB_RESUME);
* ``fresh`` starts the lab over on purpose: the old run of this lab is removed.

A run of another lab is never touched (E_DB_OTHER_LAB), nor a database this lab did not make
(a ``protolab run``, hand-delivered messages): it is refused, never replaced without ``fresh``.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError, ProtolabError
from ..store import Store
from ..store import SIDE_FILES, remove_database
from .judge import LAB_KEY, RUN_KEY

__all__ = ["LabRun", "open_lab_run", "JOURNAL_KEY", "NAIVE_JOURNAL_KEY", "lab_of"]

JOURNAL_KEY = "lab_journal"
NAIVE_JOURNAL_KEY = "lab_journal_naive"
ASIDE = ".resuming"


@dataclass
class LabRun:
    """The learner's run of a lab, open: ``live`` (None in hand-delivery mode), ``naive`` (the
    workshop's other side), ``store`` (the learner's file), ``resumed`` (reopened from its journal)."""

    store: Store
    live: object = None
    naive: object = None
    resumed: bool = False

    def close(self) -> None:
        if self.live is not None:
            self.live.close()
        else:
            self.store.close()
        if self.naive is not None:
            self.naive.close()


def lab_of(db: Path) -> dict:
    """The meta of the database at ``db`` (``{}`` when there is none, or it is not protolab's)."""
    if not Path(db).exists():
        return {}
    store = Store.open(db, readonly=True, verify=False)
    try:
        keys = ("scenario", "seed", "policy", "faults", LAB_KEY, RUN_KEY, JOURNAL_KEY, NAIVE_JOURNAL_KEY)
        return {k: store.get_meta(k) for k in keys if store.get_meta(k) is not None}
    finally:
        store.close()


def _move(src: Path, dst: Path) -> None:
    """Move a database and its side files (a -wal of a run that was not closed cleanly goes with it)."""
    for suffix in ("",) + SIDE_FILES:
        a, b = Path(f"{src}{suffix}"), Path(f"{dst}{suffix}")
        if a.exists():
            a.replace(b)
        else:
            b.unlink(missing_ok=True)


def _mark(live_or_store, lab, run_id: str) -> None:
    store = getattr(live_or_store, "store", live_or_store)
    store.set_meta({LAB_KEY: str(lab.number), RUN_KEY: run_id})


def _journal_to(live, store: Store, key: str) -> None:
    live.on_journal = lambda journal: store.set_meta({key: json.dumps(journal, separators=(",", ":"))})


def _new_live(lab, sc, db: Path | None, policy: str | None = None):
    from ..live import LiveRun

    return LiveRun(sc, policy=policy or lab.policy, seed=lab.seed, faults=list(lab.faults), db=db)


def open_lab_run(lab, db: Path, *, fresh: bool = False) -> LabRun:
    """The lab's run at ``db``: made new, resumed from its journal, or (``fresh``) made anew over
    this lab's old run. Refusals leave every file as it was."""
    db = Path(db)
    aside = Path(f"{db}{ASIDE}")
    if aside.exists():
        # a resume was interrupted after the old file was moved aside: what is at db is a partial
        # replay; the old file is the learner's run
        remove_database(db)
        _move(aside, db)
    meta = lab_of(db)
    held = meta.get(LAB_KEY)
    if held is not None and held != str(lab.number):
        raise InputError(f"{db} holds your run of lab {held}, not of lab {lab.number}: it is kept. Lab {lab.number} is "
                         f"played in its own file ('protolab lab start {lab.number}' without --db uses {lab.default_db})",
                         code="E_DB_OTHER_LAB")
    if db.exists() and meta.get("scenario") not in (None, lab.scenario):
        raise InputError(f"{db} holds a run of {meta['scenario']}, not of lab {lab.number}'s {lab.scenario}; it is kept: "
                         "pass another --db", code="E_DB_OTHER_SCENARIO")
    if lab.mode == "hand-delivery":
        return _by_hand(lab, db, meta, fresh=fresh)
    from ..scenario import load_scenario

    sc = load_scenario(lab.scenario)
    if db.exists() and not fresh:
        if held is None:
            raise InputError(f"{db} holds a run that 'protolab lab start {lab.number}' did not make (a 'protolab run', "
                             "or a run from an older protolab), so there is no journal to resume it from; it is kept. "
                             f"'protolab lab start {lab.number} --fresh' replaces it with a new run of the lab, or pass "
                             "another --db", code="E_LAB_RESUME")
        return _resume(lab, sc, db, meta)
    if db.exists():
        if meta.get("scenario") is None:
            raise InputError(f"{db} holds hand-delivered messages, not a run of lab {lab.number}; it is kept: pass "
                             "another --db", code="E_DB_OTHER_SCENARIO")
        remove_database(db)
    live = _new_live(lab, sc, db)
    naive = None
    try:
        _mark(live, lab, uuid.uuid4().hex)
        _journal_to(live, live.store, JOURNAL_KEY)
        live.store.set_meta({JOURNAL_KEY: "[]"})
        if lab.mode == "workshop":
            naive = _new_live(lab, sc, None, policy="naive")
            _journal_to(naive, live.store, NAIVE_JOURNAL_KEY)
            live.store.set_meta({NAIVE_JOURNAL_KEY: "[]"})
    except BaseException:
        live.close()
        raise
    return LabRun(live.store, live, naive)


def _resume(lab, sc, db: Path, meta: dict) -> LabRun:
    """Replay the old run's journal into a fresh run at ``db``; it must come out the same."""
    try:
        journal = json.loads(meta.get(JOURNAL_KEY) or "null")
        naive_journal = json.loads(meta.get(NAIVE_JOURNAL_KEY) or "[]")
    except json.JSONDecodeError:
        journal = None
    if not isinstance(journal, list):
        raise InputError(f"{db} is your run of lab {lab.number}, but its journal cannot be read, so it cannot be resumed; "
                         f"it is kept ('protolab lab check {lab.number}' still judges it). 'protolab lab start "
                         f"{lab.number} --fresh' starts the lab over", code="E_LAB_RESUME")
    old = Store.open(db, readonly=True)
    try:
        want = (old.state_digest(), old.last_event(), old.last_delivery())
    finally:
        old.close()
    aside = Path(f"{db}{ASIDE}")
    _move(db, aside)
    live = naive = None
    try:
        live = _new_live(lab, sc, db)
        live.replay(journal)
        got = (live.store.state_digest(), live.store.last_event(), live.store.last_delivery())
        if got != want:
            raise InputError(
                f"{db} could not be resumed: replaying its journal gives {got[1]} events and {got[2]} deliveries, the "
                f"file holds {want[1]} and {want[2]}" + ("" if got[1:] != want[1:] else " with another state") +
                " (it was changed by something other than the lab, or by another protolab). The file is kept as it "
                f"was: 'protolab lab check {lab.number}' still judges it; 'protolab lab start {lab.number} --fresh' "
                "starts the lab over", code="E_LAB_RESUME")
        _mark(live, lab, meta.get(RUN_KEY) or uuid.uuid4().hex)
        live.store.set_meta({JOURNAL_KEY: json.dumps(live.journal, separators=(",", ":"))})
        _journal_to(live, live.store, JOURNAL_KEY)
        if lab.mode == "workshop":
            naive = _new_live(lab, sc, None, policy="naive")
            naive.replay(naive_journal)
            live.store.set_meta({NAIVE_JOURNAL_KEY: json.dumps(naive.journal, separators=(",", ":"))})
            _journal_to(naive, live.store, NAIVE_JOURNAL_KEY)
    except BaseException:
        if live is not None:
            live.close()
        if naive is not None:
            naive.close()
        remove_database(db)
        _move(aside, db)
        raise
    remove_database(aside)
    return LabRun(live.store, live, naive, resumed=True)


def _by_hand(lab, db: Path, meta: dict, *, fresh: bool) -> LabRun:
    """A hand-delivery lab: no simulator. The run is a database of the lab's scenario that the
    learner delivers into ('protolab deliver FILE --db DB'); reopening it keeps it as it is."""
    if db.exists() and fresh:
        if meta.get(LAB_KEY) != str(lab.number):
            raise InputError(f"{db} is not a run of lab {lab.number}; it is kept: pass another --db",
                             code="E_DB_OTHER_SCENARIO")
        remove_database(db)
    if db.exists():
        store = Store.open(db)
        if store.get_meta(LAB_KEY) is None:
            try:
                _mark(store, lab, uuid.uuid4().hex)
            except ProtolabError:
                store.close()
                raise
        return LabRun(store, resumed=True)
    store = Store.create(db, start_time="2026-07-13T04:00:00Z")
    store.set_meta({"scenario": lab.scenario, "seed": str(lab.seed), "policy": lab.policy, "faults": "",
                    LAB_KEY: str(lab.number), RUN_KEY: uuid.uuid4().hex})
    return LabRun(store)
