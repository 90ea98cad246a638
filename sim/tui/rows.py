"""What each pane's rows say, and the row sources that page them out of the store.

A source holds only the ids of its rows (a ``range`` when unfiltered, so even a
100,000-event run costs nothing to open) and fetches a page of rows when the view asks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from rich.text import Text

from ..store import Store

DECISION_STYLE = {
    "accepted": "green",
    "duplicate": "cyan",
    "conflict": "bold magenta",
    "late": "yellow",
    "rejected": "bold red",
}

STATE_STYLE = {
    "needs_review": "bold white on dark_magenta",
    "succeeded": "green",
    "failed": "bold red",
    "denied": "red",
    "canceled": "dim",
    "running": "bold blue",
    "waiting_human": "yellow",
    "retry_wait": "yellow",
    "ready": "cyan",
    "pending": "white",
}

EVENT_STYLE = {
    "transition_applied": "bold",
    "transition_rejected": "bold red",
    "conflict_recorded": "bold magenta",
    "late_recorded": "yellow",
    "duplicate_recorded": "cyan",
    "effect_committed": "bold green",
    "effect_suppressed": "green",
    "fault_injected": "bold yellow",
    "lease_expired": "yellow",
    "review_decided": "bold magenta",
    "reconciliation_required": "bold red",
    "reconciliation_resolved": "bold magenta",
    "evidence_unresolved": "red",
    "fence_recorded": "bold cyan",
}

TASK_HEADER = "task    state          ver  machine  lease           budget  trusted  late rej"
# msg is 10 wide: a reviewer's decision (REV-T-1-v4) or a long run's ids (M-1000000) stay whole
EVENT_HEADER = "   seq tick type                 task  msg        what"
DELIVERY_HEADER = "  dlv tick msg        type          sender → recipient   task  decision  code"


def _cell(text, width: int) -> str:
    s = "" if text is None else str(text)
    return s[: width - 1] + "…" if len(s) > width else s.ljust(width)


COMPACT_TASK_HEADER = "task    state         ver lease           budget trusted"


def compact_task_row(t: dict) -> Text:
    """A task in a narrow side (the workshop, 56 columns): state, version, lease, budget and trust."""
    out = Text()
    out.append(_cell(t["task_id"], 7) + " ")
    out.append(_cell(t["state"], 13), STATE_STYLE.get(t["state"], ""))
    out.append(" " + _cell(f"v{t['state_version']}", 3) + " ")
    out.append(_cell(f"{t['lease_holder'] or '-'} v{t['lease_version']}", 15) + " ")
    out.append(_cell(f"{t['budget_left']}/{t['budget_total']}", 6) + " ", "red" if t["budget_left"] <= 0 else "")
    out.append(_cell("yes" if t["trusted"] else "NO", 7), "green" if t["trusted"] else "bold red")
    return out


def task_row(t: dict) -> Text:
    """One task of the State pane: needs_review and rejected moves stand out."""
    out = Text()
    out.append(_cell(t["task_id"], 7) + " ")
    out.append(_cell(t["state"], 14), STATE_STYLE.get(t["state"], ""))
    out.append(" " + _cell(f"v{t['state_version']}", 4) + " " + _cell(t["machine_version"], 8) + " ")
    lease = f"{t['lease_holder'] or '-'} v{t['lease_version']}"
    out.append(_cell(lease, 15) + " ")
    out.append(_cell(f"{t['budget_left']}/{t['budget_total']}", 7) + " ", "red" if t["budget_left"] <= 0 else "")
    out.append(_cell("yes" if t["trusted"] else "NO", 8), "green" if t["trusted"] else "bold red")
    out.append(" " + _cell(t["late_results"], 4), "yellow" if t["late_results"] else "dim")
    out.append(" " + _cell(t["rejected"], 3), "bold red" if t["rejected"] else "dim")
    return out


def event_summary(etype: str, d: dict) -> str:
    if etype == "transition_applied":
        return f"{d.get('from')} → {d.get('to')} (v{d.get('from_version')}→v{d.get('from_version', 0) + 1}) by {d.get('executor')}"
    if etype == "transition_rejected":
        return f"{d.get('code') or 'refused'}: {d.get('reason', '')}"
    if etype == "late_recorded":
        return f"{d.get('type')} ({d.get('status') or '-'}) after the task was {d.get('state')}: state unchanged"
    if etype == "duplicate_recorded":
        return f"same key and digest as {d.get('first_message_id')}: nothing re-executed"
    if etype == "conflict_recorded":
        first, second = d.get("first") or {}, d.get("second") or {}
        return f"key {d.get('key')}: {first.get('message_id')} and {second.get('message_id')} differ; frozen"
    if etype == "lease_granted":
        return f"lease v{d.get('lease_version')} to {d.get('holder')}"
    if etype == "fault_injected":
        made = d.get("twin") or d.get("late")
        return f"{d.get('fault')} ({d.get('selector', '')})" + (f" → {made}" if made else "")
    if etype in ("effect_committed", "effect_suppressed"):
        return str(d.get("effect_key", ""))
    if etype == "artifact_stored":
        return f"{d.get('kind')} {str(d.get('ref', ''))[:19]}…"
    if etype == "budget_charged":
        return f"-{d.get('amount', d.get('delta', 1))} ({d.get('reason', '')})"
    if etype == "task_created":
        return f"{d.get('goal', '')} (budget {d.get('budget')})"
    if etype == "intent_recorded":
        return f"{d.get('key', '')} {str(d.get('digest', ''))[:15]}"
    if etype == "ack_recorded":
        return f"receipt of {d.get('of')} from {d.get('from')}"
    if etype == "review_decided":
        return f"{d.get('decision')} by {d.get('reviewer')}"
    if etype == "reconciliation_required":
        return f"late {d.get('status') or 'result'} touches {', '.join(d.get('effects') or [])}: a reviewer must decide (r)"
    if etype == "reconciliation_resolved":
        return f"{d.get('decision')} {', '.join(d.get('effects') or [])} (late {d.get('of')}) by {d.get('reviewer')}"
    if etype == "evidence_unresolved":
        return f"cites {', '.join(d.get('refs') or [])}, not stored here"
    if etype == "lease_expired":
        return f"{d.get('holder')} lost lease v{d.get('lease_version')}"
    if etype == "fence_recorded":
        return f"terminal {d.get('terminal', '')}"
    if etype == "machine_loaded":
        return f"machine {d.get('version', '')}"
    keys = ("decision", "key", "idempotency_key", "reason")
    for k in keys:
        if k in d:
            return f"{k}={d[k]}"
    return ""


def event_row(e: dict) -> Text:
    d = e["data"] if isinstance(e["data"], dict) else json.loads(e["data"])
    out = Text()
    out.append(f"{e['seq']:>6} {e['tick']:>4} ")
    out.append(_cell(e["type"], 20) + " ", EVENT_STYLE.get(e["type"], ""))
    out.append(_cell(e["task_id"] or "-", 5) + " " + _cell(e["message_id"] or "", 10) + " ")
    out.append(event_summary(e["type"], d), "dim")
    return out


def delivery_row(r: dict) -> Text:
    out = Text()
    out.append(f"{r['delivery_id']:>5} {r['tick']:>4} " + _cell(r["message_id"], 10) + " " + _cell(r["type"], 13) + " ")
    route = f"{r['sender']} → {r['recipient']}"
    if len(route) > 20:
        route = f"{r['sender']}→{r['recipient']}"  # researcher-1→manager: whole, in the same width
    out.append(_cell(route, 20) + " " + _cell(r["task_id"], 5) + " ")
    out.append(_cell(r["decision"], 9), DECISION_STYLE.get(r["decision"], ""))
    if r["code"]:
        out.append(" " + r["code"], "red")
    return out


COMPACT_DELIVERY_HEADER = "dlv msg   type         task decision  code"


def compact_delivery_row(r: dict) -> Text:
    """A delivery in 40 columns (the workshop's narrow sides): what arrived and what intake decided."""
    out = Text()
    out.append(f"{r['delivery_id']:>3} " + _cell(r["message_id"], 5) + " " + _cell(r["type"], 12) + " " + _cell(r["task_id"], 4) + " ")
    out.append(_cell(r["decision"], 9), DECISION_STYLE.get(r["decision"], ""))
    if r["code"]:
        out.append(" " + r["code"], "red")
    return out


class StoreSource:
    """Rows of one kind, by id, paged out of the store on demand."""

    def __init__(self, store: Store, ids: Sequence[int], fetch, render):
        self.store = store
        self.ids = ids
        self._fetch = fetch
        self._render = render

    def __len__(self) -> int:
        return len(self.ids)

    def rows(self, start: int, stop: int) -> list[Text]:
        return [self._render(r) for r in self._fetch(list(self.ids[start:stop]))]

    def id_at(self, index: int) -> int | None:
        return self.ids[index] if 0 <= index < len(self.ids) else None


def event_source(store: Store, ids: Sequence[int]) -> StoreSource:
    return StoreSource(store, ids, store.events_at, event_row)


def delivery_source(store: Store, ids: Sequence[int], *, compact: bool = False) -> StoreSource:
    return StoreSource(store, ids, store.deliveries_at, compact_delivery_row if compact else delivery_row)


class TaskSource:
    """The State pane: every task (a few, or a stress run's thousands) as of some moment."""

    def __init__(self, tasks: list[dict], *, compact: bool = False):
        self.tasks = tasks
        self.render = compact_task_row if compact else task_row

    def __len__(self) -> int:
        return len(self.tasks)

    def rows(self, start: int, stop: int) -> list[Text]:
        return [self.render(t) for t in self.tasks[start:stop]]
