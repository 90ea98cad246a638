"""What each pane's rows say, and the row sources that page them out of the store.

A source holds only the ids of its rows (a ``range`` when unfiltered, so even a
100,000-event run costs nothing to open) and fetches a page of rows when the view asks.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from ..events import REGISTRY as EVENT_REGISTRY
from ..events import StoredEvent, summarize
from ..palette import DECISION_STYLE, STATE_STYLE  # noqa: F401  (the colours live once; screens import them here)
from ..store import Store

def event_style(etype: str) -> str:
    """An event type's colour, as its class in sim.events declares it (read when drawn)."""
    cls = EVENT_REGISTRY.get(etype)
    return cls.STYLE if cls is not None else ""

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
    """The one line the CLI's ``events`` prints too (sim.events)."""
    return summarize(etype, d)


def event_row(e: StoredEvent) -> Text:
    out = Text()
    out.append(f"{e.seq:>6} {e.tick:>4} ")
    out.append(_cell(e.type, 20) + " ", event_style(e.type))
    out.append(_cell(e.task_id or "-", 5) + " " + _cell(e.message_id or "", 10) + " ")
    out.append(event_summary(e.type, e.data), "dim")
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


NARROW_TASK_HEADER = "task   state         ver lease trusted"


def narrow_task_row(t: dict) -> Text:
    """A task in a side 40 columns wide or less (the workshop at 80 columns): the state the lesson is
    about, its version, its lease's version (a crash's lesson) and whether its results are trusted."""
    out = Text()
    out.append(_cell(t["task_id"], 6) + " ")
    out.append(_cell(t["state"], 13), STATE_STYLE.get(t["state"], ""))
    out.append(" " + _cell(f"v{t['state_version']}", 3) + " " + _cell(f"v{t['lease_version']}", 5) + " ")
    out.append(_cell("yes" if t["trusted"] else "NO", 7), "green" if t["trusted"] else "bold red")
    return out


NARROW_DELIVERY_HEADER = "msg   type         task decision/code"


def narrow_delivery_row(r: dict) -> Text:
    """A delivery in 38 columns: what arrived, for which task, and what intake decided; a refusal
    shows its code in the decision's place (the code names the rule, and a code means refused)."""
    out = Text()
    out.append(_cell(r["message_id"], 5) + " " + _cell(r["type"], 12) + " " + _cell(r["task_id"], 4) + " ")
    if r["code"]:
        out.append(_cell(r["code"], 14), "red")
    else:
        out.append(_cell(r["decision"], 14), DECISION_STYLE.get(r["decision"], ""))
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


def delivery_source(store: Store, ids: Sequence[int], *, compact: bool = False, narrow: bool = False) -> StoreSource:
    render = narrow_delivery_row if narrow else compact_delivery_row if compact else delivery_row
    return StoreSource(store, ids, store.deliveries_at, render)


class TaskSource:
    """The State pane: every task (a few, or a stress run's thousands) as of some moment."""

    def __init__(self, tasks: list[dict], *, compact: bool = False, narrow: bool = False):
        self.tasks = tasks
        self.render = narrow_task_row if narrow else compact_task_row if compact else task_row

    def __len__(self) -> int:
        return len(self.tasks)

    def rows(self, start: int, stop: int) -> list[Text]:
        return [self.render(t) for t in self.tasks[start:stop]]
