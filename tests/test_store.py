import hashlib
import sqlite3

import pytest

from sim import samples
from sim.errors import StaleWrite, StoreError
from sim.machine import TaskState
from sim.runtime import deliver, put_artifact
from sim.store import SCHEMA_VERSION, STATE_TABLES, EventDraft, Store


def _run_story(store):
    put_artifact(store, samples.FACTS, kind="fact-table", task_id="T-1")
    for env in samples.happy_path():
        deliver(store, env)


def test_a_new_database_records_app_schema_version_and_the_default_machine(tmp_path):
    s = Store.create(tmp_path / "a.db")
    assert s.current_machine == "task-v1"
    assert s.machine_versions() == ["task-v1"]
    s.close()
    raw = sqlite3.connect(tmp_path / "a.db")
    meta = dict(raw.execute("SELECT key, value FROM meta"))
    assert meta["app"] == "protolab" and meta["schema_version"] == str(SCHEMA_VERSION)
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_opening_a_missing_file_does_not_create_it(tmp_path):
    with pytest.raises(StoreError) as e:
        Store.open(tmp_path / "nope.db")
    assert e.value.code == "E_DB_MISSING"
    assert not (tmp_path / "nope.db").exists()


def test_a_corrupt_file_is_refused(tmp_path):
    p = tmp_path / "bad.db"
    p.write_bytes(b"this is not sqlite at all" * 10)
    with pytest.raises(StoreError) as e:
        Store.open(p)
    assert e.value.code == "E_DB_CORRUPT"


def test_an_sqlite_database_that_is_not_protolabs_is_refused(tmp_path):
    p = tmp_path / "other.db"
    c = sqlite3.connect(p)
    c.execute("CREATE TABLE recipes (name TEXT)")
    c.commit()
    c.close()
    with pytest.raises(StoreError) as e:
        Store.open(p)
    assert e.value.code == "E_DB_NOT_PROTOLAB"


def test_a_newer_schema_is_refused_with_a_clear_code(tmp_path):
    p = tmp_path / "new.db"
    Store.create(p).close()
    c = sqlite3.connect(p)
    c.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    c.commit()
    c.close()
    with pytest.raises(StoreError) as e:
        Store.open(p)
    assert e.value.code == "E_DB_SCHEMA_NEWER"
    assert "99" in e.value.message


def test_state_moves_use_compare_and_swap_on_state_version(store):
    deliver(store, samples.m1())
    # Another writer moved the task behind our back: our fold expects version 1, finds 2.
    store.conn.execute("UPDATE tasks SET state_version = 2 WHERE task_id = 'T-1'")
    with pytest.raises(StaleWrite):
        with store.transaction():
            store.advance()
            store.append_event(
                EventDraft(
                    "transition_applied", "T-1", "M-x",
                    {"from": "ready", "to": "running", "from_version": 1, "reason": "r", "executor": "researcher",
                     "role": "researcher", "machine_version": "task-v1", "assignee": None},
                )
            )
    row = store.conn.execute("SELECT state, state_version FROM tasks WHERE task_id='T-1'").fetchone()
    assert row == ("ready", 2)
    assert store.transitions("T-1")[-1]["new_state"] == "ready"  # the rejected move left no row


def test_a_failed_delivery_rolls_back_every_row_it_wrote(store):
    deliver(store, samples.m1())
    before = store.counts()
    with pytest.raises(RuntimeError):
        with store.transaction():
            store.advance()
            store.append_event(EventDraft("late_recorded", "T-1", "M-1", {}))
            raise RuntimeError("crash mid-delivery")
    assert store.counts() == before
    # and the clock went back too: the next delivery gets the next tick, not a gap
    o = deliver(store, samples.m2())
    assert o.tick == 2 and o.tick == store.tick and o.delivery_id == 2


def test_an_effect_key_commits_once_even_if_the_runtime_tries_twice(store):
    _run_story(store)
    assert [e["effect_key"] for e in store.effects()] == ["publish:R-1:T-2"]
    with pytest.raises(StoreError) as e:
        with store.transaction():
            store.advance()
            store.append_event(
                EventDraft("effect_committed", "T-2", "M-6",
                           {"effect_key": "publish:R-1:T-2", "kind": "publish", "target": "R-1", "result_digest": "x"})
            )
    assert e.value.code == "E_DB_CONSTRAINT"
    assert len(store.effects()) == 1


def test_the_same_deliveries_give_a_byte_identical_database_and_state_digest(tmp_path):
    digests, files = [], []
    for name in ("one.db", "two.db"):
        s = Store.create(tmp_path / name)
        _run_story(s)
        for env in (samples.late_failure("M-7", 9), samples.conflicting_m3("M-8", 10)):
            deliver(s, env)
        digests.append(s.state_digest())
        s.close()
        files.append(hashlib.sha256((tmp_path / name).read_bytes()).hexdigest())
    assert digests[0] == digests[1]
    assert files[0] == files[1]


def test_the_state_digest_changes_when_state_changes(store):
    deliver(store, samples.m1())
    d1 = store.state_digest()
    deliver(store, samples.m2())
    assert store.state_digest() != d1


def test_folding_the_event_log_into_an_empty_store_rebuilds_the_same_state(store):
    _run_story(store)
    for env in (samples.late_failure("M-7", 9), samples.conflicting_m3("M-8", 10)):
        deliver(store, env)
    fresh = Store.memory()
    # the fresh store already loaded task-v1 at tick 0; fold everything after it
    with fresh.transaction():
        for ev in store.events():
            if ev["type"] == "machine_loaded":
                continue
            fresh._tick = ev["tick"]
            fresh.append_event(EventDraft(ev["type"], ev["task_id"], ev["message_id"], ev["data"]))
    assert fresh.state_digest() == store.state_digest()
    assert {t: fresh.counts()[t] for t in STATE_TABLES} == {t: store.counts()[t] for t in STATE_TABLES}


def test_reopening_a_database_continues_its_clock(tmp_path):
    p = tmp_path / "c.db"
    s = Store.create(p)
    deliver(s, samples.m1())
    tick = s.tick
    s.close()
    s = Store.open(p)
    assert s.tick == tick
    o = deliver(s, samples.m2())
    assert o.tick == tick + 1 and o.delivery_id == 2
    assert s.get_task("T-1").state == TaskState.RUNNING
    s.close()


def test_created_at_is_derived_from_time_zero_plus_ticks(tmp_path):
    s = Store.create(tmp_path / "t.db", start_time="2026-01-01T00:00:00Z")
    deliver(s, samples.m1())
    ev = s.events()[-1]
    assert ev["created_at"] == "2026-01-01T00:00:01Z" and ev["tick"] == 1
    s.close()


#: what each schema version lacks that the next added (undone, newest first, to make an older file)
_ADDED_IN = {
    4: ("ALTER TABLE messages DROP COLUMN epoch", "ALTER TABLE messages DROP COLUMN expires_at"),
    3: ("DROP INDEX effects_by_task",),
    2: ("ALTER TABLE messages DROP COLUMN sender_seq", "ALTER TABLE messages DROP COLUMN sender_generation"),
}


def _older_database(p, version: int) -> str:
    """A database as schema ``version`` wrote it (one delivery); returns its state digest."""
    s = Store.create(p)
    deliver(s, samples.m1())
    digest = s.state_digest()
    s.close()
    c = sqlite3.connect(p)
    for v in sorted(_ADDED_IN, reverse=True):
        if v > version:
            for statement in _ADDED_IN[v]:
                c.execute(statement)
    c.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
    c.commit()
    c.close()
    return digest


def _schema_1_database(p) -> str:
    return _older_database(p, 1)


def test_a_schema_1_database_is_migrated_when_opened(tmp_path):
    p = tmp_path / "old.db"
    digest = _schema_1_database(p)
    s = Store.open(p)
    assert s.get_meta("schema_version") == str(SCHEMA_VERSION)
    assert s.messages()[0]["sender_seq"] is None  # the column is back; old rows simply lack a value
    assert "effects_by_task" in _indexes(s.conn)  # and every later step: schema 3's index
    assert s.state_digest() == digest
    deliver(s, samples.m2())
    s.close()


def test_read_only_open_never_writes_the_file_even_to_migrate_it(tmp_path):
    p = tmp_path / "old.db"
    digest = _schema_1_database(p)
    before = hashlib.sha256(p.read_bytes()).hexdigest()
    listing = sorted(x.name for x in tmp_path.iterdir())
    ro = Store.open(p, readonly=True)
    assert ro.readonly and ro.state_digest() == digest
    assert ro.messages()[0]["sender_seq"] is None  # migrated, in memory
    with pytest.raises(StoreError):
        deliver(ro, samples.m2())  # the migrated copy is read-only too
    ro.close()
    assert hashlib.sha256(p.read_bytes()).hexdigest() == before
    assert sorted(x.name for x in tmp_path.iterdir()) == listing
    # a current-schema file opened read-only refuses writes outright
    q = tmp_path / "new.db"
    Store.create(q).close()
    ro = Store.open(q, readonly=True)
    with pytest.raises(StoreError):
        deliver(ro, samples.m1())
    ro.close()


@pytest.mark.parametrize("errorname, code", [
    ("SQLITE_FULL", "E_DB_FULL"), ("SQLITE_IOERR_WRITE", "E_DB_FULL"), ("SQLITE_IOERR_SHMSIZE", "E_DB_FULL"),
    ("SQLITE_IOERR_READ", "E_DB_IO"), ("SQLITE_CONSTRAINT_UNIQUE", "E_DB_CONSTRAINT"),
    ("SQLITE_READONLY", "E_DB_READONLY"), ("SQLITE_READONLY_DBMOVED", "E_DB_READONLY"),
    ("SQLITE_BUSY", "E_DB_BUSY"), ("SQLITE_LOCKED", "E_DB_BUSY"), ("SQLITE_CORRUPT", "E_DB_CORRUPT"),
    ("SQLITE_NOTADB", "E_DB_CORRUPT"), ("SQLITE_CANTOPEN", "E_DB_UNREADABLE"), ("SQLITE_ERROR", "E_DB_WRITE"),
])
def test_a_driver_error_gets_its_code_from_sqlites_result_code_not_its_words(errorname, code):
    from sim.store.driver import _translate

    e = sqlite3.OperationalError("something went wrong")  # words that name no cause
    e.sqlite_errorname = errorname
    out = _translate(e, "run.db")
    assert out.code == code and "run.db" in str(out)


def test_an_error_the_python_module_raises_itself_is_still_translated():
    from sim.store.driver import _translate

    assert _translate(sqlite3.ProgrammingError("Cannot operate on a closed database.")).code == "E_DB_CLOSED"
    assert _translate(sqlite3.ProgrammingError("something else")).code == "E_DB_WRITE"
    assert _translate(sqlite3.IntegrityError("UNIQUE constraint failed: x")).code == "E_DB_CONSTRAINT"


# ------------------------------------------------------------------ group commits (the simulator's batch mode)


def _visible(path) -> int:
    """Deliveries another connection sees committed in the file."""
    with sqlite3.connect(path) as other:
        return other.execute("SELECT COUNT(*) FROM deliveries").fetchone()[0]


def test_grouped_commits_land_every_n_deliveries_and_at_the_end(tmp_path):
    path = str(tmp_path / "g.db")
    store = Store.create(path)
    envs = samples.happy_path()
    with store.group_commits(3):
        for k, env in enumerate(envs, 1):
            deliver(store, env)
            # what a crash right now would keep: the last whole group, never part of one
            assert _visible(path) == 3 * (k // 3), k
    assert _visible(path) == len(envs)
    assert store.commits >= len(envs) // 3
    store.close()


def test_a_failed_delivery_in_a_group_rolls_back_alone_and_the_group_goes_on(tmp_path):
    path = str(tmp_path / "g.db")
    store = Store.create(path)
    with store.group_commits(100):
        deliver(store, samples.m1())
        before = store.counts()
        with pytest.raises(RuntimeError):
            with store.transaction():
                store.advance()
                store.append_event(EventDraft("late_recorded", "T-1", "M-1", {}))
                raise RuntimeError("crash mid-delivery")
        assert store.counts() == before
        o = deliver(store, samples.m2())
        assert o.tick == 2 and o.delivery_id == 2
    assert _visible(path) == 2
    store.close()


def test_an_error_escaping_the_group_rolls_back_its_uncommitted_tail_and_the_counters(tmp_path):
    path = str(tmp_path / "g.db")
    store = Store.create(path)
    deliver(store, samples.m1())
    with pytest.raises(KeyboardInterrupt):
        with store.group_commits(100):
            deliver(store, samples.m2())
            raise KeyboardInterrupt
    assert _visible(path) == 1 and store.counts()["deliveries"] == 1
    o = deliver(store, samples.m2())  # one transaction again, numbered after what the file holds
    assert (o.delivery_id, o.tick) == (2, 2) and _visible(path) == 2
    store.close()


@pytest.mark.slow_cases("stress-faults3-safe")  # measured at 2 s or more on 2 cores
@pytest.mark.parametrize("scenario,faults,policy", [
    ("publish-report", ["duplicate", "crash"], "safe"),
    ("publish-report", ["late-conflict"], "naive"),
    ("fan-out", ["silent"], "safe"),
    ("stress", [], "safe"),
])
def test_a_grouped_run_writes_the_same_rows_as_one_transaction_per_delivery(tmp_path, scenario, faults, policy):
    from sim.runner import run_scenario
    from sim.scenario import load_scenario

    dumps, digests = [], []
    for every in (1, 256):
        db = tmp_path / f"{every}.db"
        run_scenario(load_scenario(scenario), faults=faults, policy=policy, db=db, group_commits=every).close()
        with sqlite3.connect(db) as conn:
            dumps.append([line for line in conn.iterdump() if not line.startswith("INSERT INTO \"meta\" VALUES('commits'")])
        with Store.open(str(db), readonly=True) as s:
            digests.append(s.state_digest())
    assert dumps[0] == dumps[1] and digests[0] == digests[1]


def test_every_public_store_method_on_a_closed_store_raises_one_store_error(tmp_path):
    """A closed store refuses every read and write with E_DB_CLOSED (the driver translates it, as it
    does every other driver error): never a raw sqlite3 error."""
    import inspect

    from sim.errors import StoreError
    from sim.events import TaskCreated
    from sim.machine import default_rulebook
    from sim.samples import m1

    s = Store.create(tmp_path / "run.db", start_time="2026-07-13T04:00:00Z")
    s.close()
    # arguments that reach the database for each method that needs some (anything else: a plain id)
    created = TaskCreated(trace_id="R-1", goal="g", budget=3, machine_version="task-v1").draft("T-1", "M-1")
    args = {"append_event": (created,), "append_events": ([created],),
            "record_message": (m1(), "sha256:x", None), "count_of": ("tasks",), "count_upto": ("tasks", 5), "count_view": ("tasks",), "iter_view": ("tasks",),
            "record_delivery": (1, 1, m1(), "accepted", None, "ok", "ready", 1), "save_copy": (tmp_path / "copy.db",),
            "scratch_map": ("seen",), "deliveries_at": ([1, 2],), "events_at": ([1, 2],), "time_at": (1,),
            "load_machine": (default_rulebook(),),
            "untrusted_inputs": ((),), "advance": (), "set_meta": ({"k": "v"},), "get_meta": ("k",),
            "transaction": (), "next_delivery_id": (), "next_arrival": (), "privacy": (), "bounds": (), "group_commits": ()}
    kwargs = {"untrusted_inputs": {"besides": "T-1"}}
    raw, silent = [], []
    for name, fn in inspect.getmembers(Store, predicate=inspect.isfunction):
        if name.startswith("_") or name in ("close", "create", "open", "memory"):
            continue
        params = [p for p in list(inspect.signature(fn).parameters.values())[1:]
                  if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.POSITIONAL_ONLY)]
        a = args.get(name, tuple("T-1" for _ in params))
        try:
            out = getattr(s, name)(*a, **kwargs.get(name, {}))
            if hasattr(out, "__enter__"):
                with out:
                    s.get_task("T-1")
            elif hasattr(out, "__next__"):
                next(out, None)
            silent.append(name)
        except StoreError as e:
            if e.code != "E_DB_CLOSED":
                raw.append(f"{name}: {e.code}")
        except Exception as e:  # noqa: BLE001 - what the test is looking for
            raw.append(f"{name}: {type(e).__module__}.{type(e).__name__}: {e}")
    assert raw == [], "\n".join(raw)
    # what answers without the database: counters and meta kept in memory since the store was opened
    assert set(silent) <= {"advance", "get_meta", "next_delivery_id", "next_arrival", "privacy", "bounds", "group_commits",
                           "number_taken_before",
                           "transaction", "time_at", "untrusted_inputs"}, silent  # (no refs: nothing to look up)


def test_the_shared_reads_hand_out_typed_rows_that_declare_every_column(tmp_path):
    import sqlite3

    from sim.runner import run_scenario
    from sim.scenario import load_scenario
    from sim.store.rows import Delivery, DeliveryView, Message, TaskRow

    db = tmp_path / "run.db"
    run_scenario(load_scenario("publish-report"), faults=["duplicate"], seed=1, db=str(db)).close()
    conn = sqlite3.connect(db)
    cols = {t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")] for t in ("messages", "deliveries", "tasks")}
    conn.close()
    # a column the schema has and the class does not declare (or the other way round) fails here
    assert list(Message.COLUMNS) == cols["messages"]
    assert list(Delivery.COLUMNS) == cols["deliveries"]
    assert list(TaskRow.COLUMNS) == cols["tasks"]
    from sim.store import rows as r
    for table, cls in (("transitions", r.Transition), ("intents", r.Intent), ("effects", r.Effect),
                       ("approvals", r.Approval), ("budget", r.BudgetEntry)):
        got = [c[1] for c in sqlite3.connect(db).execute(f"PRAGMA table_info({table})")]
        assert list(cls.COLUMNS) == got, table
    artifact_cols = [c[1] for c in sqlite3.connect(db).execute("PRAGMA table_info(artifacts)")]
    assert list(r.ArtifactRow.COLUMNS) == [c for c in artifact_cols if c != "content"]  # content read on its own
    assert set(DeliveryView.COLUMNS) > set(Delivery.COLUMNS)
    with Store.open(db, readonly=True) as s:
        msgs, dels, tasks = s.messages(), s.deliveries(), s.tasks()
        assert msgs and all(type(m) is Message and list(m) == cols["messages"] for m in msgs)
        assert all(type(d) is Delivery and list(d) == cols["deliveries"] for d in dels)
        assert list(s.iter_deliveries(batch=3)) == dels and all(type(d) is Delivery for d in s.iter_deliveries(batch=3))
        assert all(type(t) is TaskRow for t in tasks)
        assert all(type(x) is r.Transition for x in s.transitions()) and s.transitions()
        assert all(type(x) is r.Intent and isinstance(x.payload, dict) for x in s.intents()) and s.intents()
        assert all(type(x) is r.ArtifactRow for x in s.artifacts()) and s.artifacts()
        assert all(type(x) is r.BudgetEntry for x in s.budget_ledger()) and s.budget_ledger()
        views = s.deliveries_at([d.delivery_id for d in dels])
        assert all(type(v) is DeliveryView and set(v) == set(DeliveryView.COLUMNS) for v in views)
        dup = next(d for d in dels if d.decision == "duplicate")
        assert s.delivery(dup.delivery_id).sender == next(m.sender for m in msgs if m.msg_seq == dup.msg_seq)
        assert s.deliveries_of(dup.message_id)[-1] == dup
        m = s.message_at(msgs[0].msg_seq)
        assert type(m) is Message and isinstance(m.payload, dict) and isinstance(m.evidence_refs, list)
        assert s.message_by_id(m.message_id) == m
        with pytest.raises(AttributeError, match="no column 'colour'"):
            dup.colour  # noqa: B018


def _fence_env(mid="F-1", trace="R-1", key="R-1:fence"):
    from sim.envelope import build_envelope

    return build_envelope(message_id=mid, trace_id=trace, task_id=trace, sender="manager", recipient="researcher",
                          type="fence", payload={"to": ["researcher"], "terminal": "COMPLETED"}, idempotency_key=key,
                          created_at="2026-07-13T04:00:01Z")


def _request(mid, task, trace="R-1"):
    from sim.envelope import build_envelope

    return build_envelope(message_id=mid, trace_id=trace, task_id=task, sender="manager", recipient="researcher",
                          type="task_request", payload={"goal": "g", "budget": 3}, idempotency_key=f"{task}:request",
                          created_at="2026-07-13T04:00:02Z")


def test_a_remembered_fence_follows_this_handles_events_another_writers_commits_and_rollbacks(tmp_path):
    """fenced_now is remembered inside write transactions (issue 31 part 2): it must still say what the
    log says after this handle fences or reopens a conversation, after another connection does, and after
    a rolled-back fence."""
    from sim.events import FenceRecorded, ReviewDecided

    path = tmp_path / "run.db"
    s = Store.create(path)
    assert deliver(s, _request("M-1", "T-1")).decision == "accepted"  # (the conversation is read: not fenced)
    with pytest.raises(RuntimeError):  # a fence appended, then rolled back: not fenced
        with s.transaction():
            s.advance()
            s.append_event(FenceRecorded(to=["researcher"], terminal="COMPLETED").draft("R-1", None))
            assert s.fenced_now("R-1") is True
            raise RuntimeError("roll back")
    assert s.fenced_now("R-1") is False
    assert deliver(s, _request("M-2", "T-2")).decision == "accepted"
    assert deliver(s, _fence_env()).decision == "accepted"  # this handle fences R-1 ...
    refused = deliver(s, _request("M-3", "T-3"))
    assert (refused.decision, refused.code) == ("rejected", "E_POST_TERMINAL_MESSAGE")
    other = Store.open(path)  # ... and another connection reopens it (a reviewer's decision anywhere)
    with other.transaction():
        other.advance()
        other.append_event(ReviewDecided(decision="ready", reviewer="reviewer", evidence=["M-1"]).draft("T-1", "M-1"))
    assert s.fenced_now("R-1") is False  # (outside a transaction: read)
    assert deliver(s, _request("M-4", "T-4")).decision == "accepted"  # the next transaction sees the commit
    with other.transaction():  # another connection fences it again: seen by the next delivery here
        other.advance()
        other.append_event(FenceRecorded(to=["researcher"], terminal="COMPLETED").draft("R-1", None))
    assert deliver(s, _request("M-5", "T-5")).code == "E_POST_TERMINAL_MESSAGE"
    with s.transaction():  # this handle's own reviewer's decision reopens it at once
        s.advance()
        assert s.fenced_now("R-1") is True
        s.append_event(ReviewDecided(decision="ready", reviewer="reviewer", evidence=["M-1"]).draft("T-1", "M-1"))
        assert s.fenced_now("R-1") is False
    other.close(), s.close()


def test_record_message_says_whether_the_envelope_is_new_and_where_its_id_was_first_stored(tmp_path):
    """One read before the insert answers both (issue 31 part 2): an exact duplicate is not inserted again,
    an id reused for another envelope is stored too and its first row stays the first, a rolled-back
    envelope is forgotten."""
    from dataclasses import replace

    s = Store.create(tmp_path / "run.db")
    a = _request("M-1", "T-1")
    b = replace(a, payload={"goal": "other", "budget": 3})
    with s.transaction():
        s.advance()
        first, new = s.record_message(a, "sha256:a", (1, 1))
        assert new and s.first_msg_seq("M-1") == first
        assert s.record_message(a, "sha256:a") == (first, False)  # the same envelope: nothing inserted
        second, new = s.record_message(b, "sha256:b")
        assert new and second > first and s.first_msg_seq("M-1") == first
        assert s.record_message(b, "sha256:b") == (second, False)
    assert s.conn.execute("SELECT COUNT(*) FROM messages WHERE message_id = 'M-1'").fetchone()[0] == 2
    with pytest.raises(RuntimeError):
        with s.transaction():
            s.advance()
            seq, new = s.record_message(_request("M-9", "T-9"), "sha256:c")
            assert new and s.first_msg_seq("M-9") == seq
            raise RuntimeError("roll back")
    assert s.first_msg_seq("M-9") is None
    s.close()


def _schema_2_database(p) -> str:
    return _older_database(p, 2)


def _indexes(conn) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}


def test_a_schema_2_database_gains_the_effects_index_when_opened_to_write_and_is_read_as_it_is(tmp_path):
    """Version 3 adds only an index (a task's effects, which every delivery asks about, without a scan of
    the run's effects). A writer brings a version-2 file up to date; a reader reads it as it is, without
    copying it into memory (it answers the same), and writes nothing."""
    p = tmp_path / "old.db"
    digest = _schema_2_database(p)
    before = hashlib.sha256(p.read_bytes()).hexdigest()
    ro = Store.open(p, readonly=True)
    assert ro.path == str(p) and "effects_by_task" not in _indexes(ro.conn)  # the file itself, not a copy
    assert ro.state_digest() == digest and ro.get_meta("schema_version") == "2"
    assert ro.get_task("T-1") is not None
    ro.close()
    assert hashlib.sha256(p.read_bytes()).hexdigest() == before
    s = Store.open(p)
    assert s.get_meta("schema_version") == str(SCHEMA_VERSION) == "4"
    assert "effects_by_task" in _indexes(s.conn) and s.state_digest() == digest
    deliver(s, samples.m2())
    s.close()


def test_a_deliverys_reads_of_its_tasks_effects_use_the_index_not_a_scan_of_every_effect(tmp_path):
    """Every delivery reads its task (with whether it has effects); a scan of the effects table there made
    a delivery's cost grow with the whole run's effects (2.4 ms a read at 100,000 effects)."""
    from sim.store.reads import _GET_TASK, _PREFETCH

    s = Store.create(tmp_path / "s.db")
    for sql, params in ((_GET_TASK, ("T-1",)), (_PREFETCH, ("M-1", "T-1", "k")),
                        ("SELECT * FROM effects WHERE task_id = ? ORDER BY tick, effect_key", ("T-1",))):
        plan = [r[3] for r in s.conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
        on_effects = [step for step in plan if "effects" in step or " e " in f" {step} "]
        assert on_effects and all("USING" in step and "effects_by_task" in step for step in on_effects), plan
    s.close()


#: effects_resting_on as first written (the task's artifacts and messages listed, then compared)
_RESTING_ON_AS_LISTS = (
    "SELECT DISTINCT e.effect_key, e.task_id, e.message_id FROM effects e JOIN messages m ON m.message_id = "
    "e.message_id, json_each(m.evidence_refs) r WHERE e.task_id != ? AND e.kind != 'retract' AND ("
    "r.value IN (SELECT ref FROM artifacts WHERE task_id = ?) OR r.value IN (SELECT message_id FROM messages "
    "WHERE task_id = ?)) ORDER BY e.effect_key")


@pytest.mark.parametrize("scenario", ["publish-report", "fan-out", "sensitive-source"])
def test_what_rests_on_a_task_is_found_by_key_lookups_and_answers_as_the_lists_did(scenario):
    """A conflict freezes what rests on the task (effects of other tasks committed by a message citing one
    of its artifacts or messages). Each cited ref is looked up by key: the artifact store and the message
    log are not scanned (the lists did, once a conflict, whatever the run's size), and the answer for every
    task of runs under both policies is the lists' answer, some of them not empty."""
    from sim.runner import run_scenario
    from sim.scenario import load_scenario

    found = 0
    for policy in ("safe", "naive"):
        st = run_scenario(load_scenario(scenario), policy=policy)
        tasks = [r[0] for r in st.conn.execute("SELECT task_id FROM tasks")] + ["R-1", "no-such-task"]
        for t in tasks:
            listed = [{"effect_key": k, "task_id": tid, "message_id": m}
                      for k, tid, m in st.conn.execute(_RESTING_ON_AS_LISTS, (t, t, t))]
            assert st.effects_resting_on(t) == listed, (scenario, policy, t)
            found += len(listed)
        st.close()
    assert found > 0
    from sim.store.reads import _RESTING_ON

    s = Store.create(None)
    plan = [r[3] for r in s.conn.execute("EXPLAIN QUERY PLAN " + _RESTING_ON, ("T-1",))]
    scans = [step for step in plan if step.startswith("SCAN") and " r " not in f" {step} "]
    assert scans == ["SCAN e USING INDEX sqlite_autoindex_effects_1"], plan
    s.close()


def test_time_at_is_each_ticks_own_second_whatever_order_ticks_are_asked_in():
    """time_at remembers each minute it formatted: asked for a delivery's tick and its conversation's deadline,
    minutes apart, in turn (as a run under declared bounds does), each answer is still start + tick seconds."""
    import random
    from datetime import timedelta

    store = Store.create(None)
    start = store._start
    rng = random.Random(5)
    ticks = [t for k in range(400) for t in (k, k + 900, rng.randrange(0, 100_000))]
    for tick in ticks:
        assert store.time_at(tick) == (start + timedelta(seconds=tick)).strftime("%Y-%m-%dT%H:%M:%SZ"), tick
    store.close()
