"""The benchmark floors: the same rows or statements a run wrote, written again by bare sqlite3
(the fastest plain way at the same durability), and the tracer that records a store's writes."""

from __future__ import annotations

import json
import os
import sqlite3
import time
import urllib.parse

from .schema import _SCHEMA
from .driver import _READS
from .core import Store


def write_recorder(fh):
    """A tracer (``Store.create(..., tracer=...)``) that writes every statement but reads, with its
    parameters, to ``fh`` as one JSON line each: the benchmark floor replays them."""

    def record(sql, params, many: bool):
        if many:
            fh.write(json.dumps(["*", sql, params], ensure_ascii=False) + "\n")
        elif not sql.lstrip().upper().startswith(_READS):
            fh.write(json.dumps([sql, list(params)], ensure_ascii=False) + "\n")

    return record


class StatementReplayer:
    """The floor: bare sqlite3 executing recorded write statements with their parameters (so prepared
    statements are reused), no reads, no logic, into a new file at ``path``. :meth:`play` runs them up to
    a number of commits, so a benchmark can time it in slices alternated with the project's; ``spent`` is
    the seconds spent executing, ``commits`` the COMMITs run.

    A grouped run wraps each delivery in a savepoint (so a failed one rolls back alone). The floor has
    nothing to fail: it runs each released savepoint's statements plainly, and drops the statements of one
    rolled back, so it writes the same rows in the same transactions."""

    def __init__(self, path: str, lines) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self._lines = lines
        self.items = (json.loads(line) for line in lines)  # (each read outside the timing, a line at a time)
        self.spent, self.commits = 0.0, 0
        self._pending: list | None = None

    def play(self, until_commits: int | None = None) -> None:
        conn, clock = self.conn, time.perf_counter
        for item in self.items:
            if item[0] != "*":
                head = item[0][:12].upper()
                if head.startswith("SAVEPOINT") or head.startswith("ROLLBACK TO"):
                    self._pending = []
                    continue
                if head.startswith("RELEASE"):
                    todo, self._pending = self._pending or [], None
                    t0 = clock()
                    for it in todo:
                        if it[0] == "*":
                            conn.executemany(it[1], it[2])
                        else:
                            conn.execute(it[0], it[1])
                    self.spent += clock() - t0
                    continue
            if self._pending is not None:
                self._pending.append(item)
                continue
            t0 = clock()
            if item[0] == "*":
                conn.executemany(item[1], item[2])
            else:
                conn.execute(item[0], item[1])
                if item[0].startswith("COMMIT"):
                    self.commits += 1
            self.spent += clock() - t0
            if until_commits is not None and self.commits >= until_commits:
                return

    def finish(self, path: str) -> None:
        """The rest of the durable end a run's file gets before it is put in place
        (:func:`sim.runfile.put_in_place`), the plainest way, timed into ``spent``. The run's checkpoint and
        integrity check are statements it recorded, so the floor has replayed them already; what they leave
        is done here: the WAL checkpointed (again: a no-op after the replayed one, so this stands alone), the
        connection closed, the file and its folder fsynced."""
        t0 = time.perf_counter()
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        self.conn.close()
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self.spent += time.perf_counter() - t0

    def close(self) -> None:
        """Close the file it writes (and ``lines``, when it is a file)."""
        self.conn.close()
        close = getattr(self._lines, "close", None)
        if close is not None:
            close()


def replay_writes(path: str, lines) -> tuple[float, int]:
    """The floor (:class:`StatementReplayer`) run whole. Returns (seconds executing, commits)."""
    floor = StatementReplayer(path, lines)
    try:
        floor.play()
    finally:
        floor.close()
    return floor.spent, floor.commits


#: the columns of a task row a delivery may change (the rest are set once, when the task is created)
_TASK_CHANGES = ("state", "state_version", "assignee", "lease_holder", "lease_version", "budget_left", "trusted",
                 "late_results", "rejected", "updated_tick")


def rows_by_tick(store: Store, lo: int = 0, hi: int | None = None) -> list[tuple[int, dict[str, list[tuple]], list[tuple]]]:
    """Every row the store holds, grouped by the tick (delivery) that wrote it.

    Returns ``[(tick, {table: [row, ...]}, [task update, ...])]``: the inserts of that tick and the task
    rows it changed. A task is inserted as it stood at the end of the tick that created it, and each later
    tick that changed its row updates it to the row as it stood at that tick's end (``_TASK_CHANGES``, then
    the task id and the state_version it had before, for a compare-and-swap): the project writes a task's
    row at every delivery that moves its state, lease, budget or counters, and so must the floor. (The
    rows in between are the event log folded again through the store's own reducer, read after each tick.)
    The benchmark floor writes exactly these rows with bare sqlite3, so the floor and the project write
    the same data at the same points.
    """
    c = store.conn
    tick_col = {
        "messages": "first_tick", "deliveries": "tick", "events": "tick", "transitions": "tick",
        "budget": "tick", "effects": "tick", "artifacts": "first_tick",
    }
    hi = 2**62 if hi is None else hi
    out: dict[int, dict[str, list[tuple]]] = {}
    for table, col in tick_col.items():
        for row in c.execute(f"SELECT *, {col} FROM {table} WHERE {col} >= ? AND {col} < ? ORDER BY rowid", (lo, hi)):
            out.setdefault(row[-1], {}).setdefault(table, []).append(tuple(row[:-1]))
    # intents carry no tick of their own: the intent_recorded event that made each one does.
    for row in c.execute(
        "SELECT i.*, e.tick FROM intents i JOIN events e ON e.type = 'intent_recorded' AND e.task_id = i.task_id "
        "AND e.message_id = i.message_id AND json_extract(e.data, '$.arrival') = i.arrival "
        "WHERE e.tick >= ? AND e.tick < ? ORDER BY i.arrival",
        (lo, hi),
    ):
        out.setdefault(row[-1], {}).setdefault("intents", []).append(tuple(row[:-1]))
    names = [r[1] for r in c.execute("PRAGMA table_info(tasks)")]  # (the row's columns, in order)
    changes, version_at = [names.index(col) for col in _TASK_CHANGES], names.index("state_version")
    updates: dict[int, list[tuple]] = {}
    for tick, task_id, row, before in _task_rows_by_tick(store):
        if not lo <= tick < hi:
            continue
        if before is None:  # created this tick
            out.setdefault(tick, {}).setdefault("tasks", []).append(row)
        else:
            updates.setdefault(tick, []).append(tuple(row[i] for i in changes) + (task_id, before[version_at]))
    return [(t, out.get(t, {}), updates.get(t, [])) for t in sorted(set(out) | set(updates))]


def _task_rows_by_tick(store: Store):
    """(tick, task id, its row at the end of the tick, its row before the tick or None when the tick created
    it) for every tick that changed a task's row: the event log folded through the store's reducer into a
    fresh store in memory, the rows of the tasks each tick's events name read after it."""
    fresh = Store.create(None, start_time=store.start_time, empty=True)
    last: dict[str, tuple] = {}
    try:
        with fresh.transaction():
            tick, named = None, set[str]()

            def changed():
                for task_id in sorted(named):
                    row = fresh.conn.one("SELECT * FROM tasks WHERE task_id = ?", (task_id,))
                    if row is not None and tuple(row) != last.get(task_id):
                        yield tick, task_id, tuple(row), last.get(task_id)
                        last[task_id] = tuple(row)

            for ev in store.iter_events():
                if ev.tick != tick:
                    yield from changed()
                    tick, named = ev.tick, set()
                fresh.advance(to=ev.tick)
                fresh.append_event(ev.draft(), delivery_id=ev.delivery_id)
                if ev.task_id is not None:
                    named.add(ev.task_id)
            yield from changed()
    finally:
        fresh.close()


class BareWriter:
    """The floor: write ``rows_by_tick`` batches with bare sqlite3, one transaction per batch, and the reads a
    delivery cannot do without, the plainest way: the intent under the message's key (deduplication), the
    task row, and each task's change as one compare-and-swap on ``state_version`` (one statement a task a
    tick, where the project writes one a change), each of which must match. Same schema, same foreign keys
    (``machines``: the machine rows they point at), same durability; no parsing, no validation, no
    decisions. :meth:`write` takes any run of batches in order, so a benchmark can time it in slices
    alternated with the project's."""

    _ORDER = ("messages", "tasks", "deliveries", "events", "intents", "transitions", "budget", "effects", "artifacts")
    _DEDUP = ("SELECT * FROM intents WHERE task_id = ? AND idempotency_key = "
              "(SELECT idempotency_key FROM messages WHERE msg_seq = ?)")
    _UPDATE = (f"UPDATE tasks SET {', '.join(f'{col} = ?' for col in _TASK_CHANGES)} "
               "WHERE task_id = ? AND state_version = ?")

    def __init__(self, path: str, *, machines: list[tuple] | tuple = ()) -> None:
        conn = self.conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        if machines:
            conn.executemany("INSERT INTO machines VALUES (?, ?, ?)", machines)
        self._sql: dict[str, str] = {}

    def write(self, batches) -> None:
        conn, order, sql = self.conn, self._ORDER, self._sql
        for tick, tables, updates in batches:
            conn.execute("BEGIN IMMEDIATE")
            for table in sorted(tables, key=lambda t: order.index(t) if t in order else len(order)):
                rows = tables[table]
                if table == "deliveries":  # what intake reads before it decides
                    for d in rows:
                        conn.execute(self._DEDUP, (d[4], d[2])).fetchall()
                        conn.execute("SELECT * FROM tasks WHERE task_id = ?", (d[4],)).fetchone()
                q = sql.get(table)
                if q is None:
                    q = sql[table] = f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})"
                conn.executemany(q, rows)
            if updates:
                cur = conn.executemany(self._UPDATE, updates)
                if cur.rowcount != len(updates):
                    raise AssertionError(f"tick {tick}: {len(updates) - cur.rowcount} task compare-and-swaps matched no row")
            conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


def write_rows_bare(path: str, batches, *, machines: list[tuple] | tuple = ()) -> None:
    """The floor (:class:`BareWriter`) writing every batch into a new file at ``path``."""
    w = BareWriter(path, machines=machines)
    try:
        w.write(batches)
    finally:
        w.close()


def machine_rows(store: "Store") -> list[tuple]:
    """Every row of the machines table as it is stored (the floor's foreign keys point at them)."""
    return [tuple(r) for r in store.conn.execute("SELECT * FROM machines")]


def bare_read_first(path: str, rows: int) -> float:
    """The TUI bench's floor: bare sqlite3 opens the file read-only and reads the first screenful
    of events and of deliveries. Returns seconds."""
    t0 = time.perf_counter()
    conn = sqlite3.connect(f"file:{urllib.parse.quote(path)}?mode=ro&immutable=1", uri=True)
    conn.execute("SELECT COUNT(*) FROM events").fetchone()
    conn.execute("SELECT * FROM events ORDER BY seq LIMIT ?", (rows,)).fetchall()
    conn.execute("SELECT * FROM deliveries ORDER BY delivery_id LIMIT ?", (rows,)).fetchall()
    conn.close()
    return time.perf_counter() - t0


def bare_read_at(path: str, starts: list[int], rows: int) -> list[float]:
    """The TUI bench's floor: one screenful of events read at each of ``starts``; seconds each."""
    conn = sqlite3.connect(f"file:{urllib.parse.quote(path)}?mode=ro&immutable=1", uri=True)
    out = []
    for at in starts:
        t0 = time.perf_counter()
        conn.execute("SELECT * FROM events WHERE seq BETWEEN ? AND ?", (at, at + rows - 1)).fetchall()
        out.append(time.perf_counter() - t0)
    conn.close()
    return out


#: the tables ``bare_table_page`` reads, each with the key Datasette orders its table page by
_PAGE_ORDER = {"tasks": "task_id", "deliveries": "delivery_id", "events": "seq", "messages": "msg_seq"}


def bare_table_page(path: str, table: str, rows: int, repeat: int) -> list[float]:
    """The browse bench's floor: what Datasette's table page asks of the file, through bare sqlite3 on
    an immutable read-only connection kept open (as Datasette keeps its own): the page's first
    ``rows`` rows in key order and the table's count, without facets, templates or HTTP. Seconds
    for each of ``repeat`` reads."""
    order = _PAGE_ORDER[table]  # a table not listed is a KeyError: the name goes into the SQL
    conn = sqlite3.connect(f"file:{urllib.parse.quote(path)}?mode=ro&immutable=1", uri=True)
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        conn.execute(f"SELECT * FROM {table} ORDER BY {order} LIMIT ?", (rows,)).fetchall()
        conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
        out.append(time.perf_counter() - t0)
    conn.close()
    return out
