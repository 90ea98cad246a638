"""The reducer: each event's row changes (the pure folds of :mod:`sim.folds`) applied as SQL. Replay folds
through exactly this; the in-memory model (:mod:`sim.model`) applies the same changes over dicts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import StaleWrite, StoreError
from ..events import REGISTRY as EVENT_REGISTRY
from ..events import EventDraft
from ..folds import FOLDS, AtLeast, Insert, SetMeta, Update, Upsert, stale_context, stale_message

if TYPE_CHECKING:
    from .driver import _Connection


class Reducer:
    """Mixin of :class:`~sim.store.Store`: an event's row changes (:data:`sim.folds.FOLDS`) made in SQL."""

    if TYPE_CHECKING:  # for the type checker: the store's connection, and what Store's other parts give
        conn: _Connection
        _next_arrival: int

        def __getattr__(self, name: str) -> Any: ...

    def _fold(self, ev: EventDraft, tick: int, at: str | None = None) -> None:
        """The reducer: how each event changes state (its fold in :mod:`sim.folds`, handed the typed
        event; the other types change nothing). ``at`` is ``tick``'s time. Replay runs exactly this."""
        fold = FOLDS.get(ev.type)
        if fold is not None:
            self._apply(fold(ev.event(), ev.task_id, ev.message_id, tick, self.time_at(tick) if at is None else at))
        elif ev.type not in EVENT_REGISTRY:  # pragma: no cover - the runtime only appends known types
            raise StoreError(f"unknown event type {ev.type!r}", code="E_UNKNOWN_EVENT")

    def _apply(self, changes) -> None:
        """Make ``changes`` (row changes of :mod:`sim.folds`) in the tables, in order: one statement each,
        compiled once per table and columns."""
        c = self.conn
        for ch in changes:
            kind = type(ch)
            if kind is Update:
                shape = ch[:6]
                cur = c.run(_SQL.get(shape) or _compiled(shape, _update_sql), ch.values)
                if ch.expect and cur.rowcount != 1:
                    raise StaleWrite(stale_message(ch), **stale_context(ch))
            elif kind is Insert:
                shape = (ch.table, ch.columns, ch.on_conflict)
                c.run(_SQL.get(shape) or _compiled(shape, _insert_sql), ch.values)
            elif kind is Upsert:
                shape = (ch.table, ch.columns, ch.key, ch.bump, ch.replace)
                c.run(_SQL.get(shape) or _compiled(shape, _upsert_sql), ch.values)
            elif kind is AtLeast:
                name = "_" + ch.counter
                setattr(self, name, max(getattr(self, name), ch.value))
            elif kind is SetMeta:
                c.run("UPDATE meta SET value = ? WHERE key = ?", (ch.value, ch.key))
                self._meta[ch.key] = ch.value
            else:  # pragma: no cover - sim.folds makes only the kinds above
                raise TypeError(f"not a row change: {ch!r}")


#: The statement of each shape of change (table and columns) met so far.
_SQL: dict[tuple, str] = {}


def _compiled(shape: tuple, make) -> str:
    sql = _SQL[shape] = make(*shape)
    return sql


def _insert_sql(table: str, columns: tuple, on_conflict: str) -> str:
    verb = {"fail": "INSERT", "ignore": "INSERT OR IGNORE"}[on_conflict]
    return f"{verb} INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"


def _upsert_sql(table: str, columns: tuple, key: tuple, bump: tuple, replace: tuple) -> str:
    sets = [f"{c} = {c} + 1" for c in bump] + [f"{c} = excluded.{c}" for c in replace]
    return (f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
            f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {', '.join(sets)}")


def _update_sql(table: str, key: tuple, set_: tuple, keep: tuple, add: tuple, expect: tuple) -> str:
    sets = [f"{c} = ?" for c in set_] + [f"{c} = COALESCE(?, {c})" for c in keep] + [f"{c} = {c} + ?" for c in add]
    where = [f"{c} = ?" for c in key + expect]
    return f"UPDATE {table} SET {', '.join(sets)} WHERE {' AND '.join(where)}"


#: The reducer by event type: the fold of each type whose folding changes state (:data:`sim.folds.FOLDS`;
#: a type declared as changing state without one fails at import).
_FOLDS = FOLDS
