"""The kit's colours, in one place: every view (the CLI's tables, the TUI's panes, the workshop)
colours a task's state and a delivery's decision from here. Plain Rich style strings: the core
may import this without importing Rich, Textual or Typer."""

from __future__ import annotations

from .intake import Decision
from .machine import TaskState

__all__ = ["DECISION_STYLE", "STATE_STYLE"]

#: intake's decision on a delivery: accepted is the quiet case; a conflict and a refusal stand out
DECISION_STYLE: dict[str, str] = {
    Decision.ACCEPTED.value: "green",
    Decision.DUPLICATE.value: "cyan",
    Decision.CONFLICT.value: "bold magenta",
    Decision.LATE.value: "yellow",
    Decision.REJECTED.value: "bold red",
}

#: a task's state: needs_review (frozen for a human) stands out most
STATE_STYLE: dict[str, str] = {
    TaskState.NEEDS_REVIEW.value: "bold white on dark_magenta",
    TaskState.SUCCEEDED.value: "green",
    TaskState.FAILED.value: "bold red",
    TaskState.DENIED.value: "red",
    TaskState.CANCELED.value: "dim",
    TaskState.RUNNING.value: "bold blue",
    TaskState.WAITING_HUMAN.value: "yellow",
    TaskState.RETRY_WAIT.value: "yellow",
    TaskState.READY.value: "cyan",
    TaskState.PENDING.value: "white",
}
