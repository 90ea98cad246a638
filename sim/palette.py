"""The kit's colours, in one place: every view (the CLI's tables, the TUI's panes, the workshop)
colours a task's state and a delivery's decision from here. Plain Rich style strings keyed by the
values' names, importing nothing (the CLI reads them at start-up); tests/test_events.py checks that
every TaskState and every Decision has its colour."""

from __future__ import annotations

__all__ = ["DECISION_STYLE", "STATE_STYLE"]

#: intake's decision on a delivery: accepted is the quiet case; a conflict and a refusal stand out
DECISION_STYLE: dict[str, str] = {
    "accepted": "green",
    "duplicate": "cyan",
    "conflict": "bold magenta",
    "late": "yellow",
    "rejected": "bold red",
}

#: a task's state: needs_review (frozen for a human) stands out most
STATE_STYLE: dict[str, str] = {
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
