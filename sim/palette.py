"""The kit's colours, in one place: every view (the CLI's tables, the TUI's panes, the workshop)
colours a task's state and a delivery's decision from here. Plain Rich style strings keyed by the
values' names, importing nothing (the CLI reads them at start-up); tests/test_events.py checks that
every TaskState and every Decision has its colour."""

from __future__ import annotations

__all__ = ["DECISION_STYLE", "STATE_STYLE", "WEB_COLOURS", "web_colour"]

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


#: the CSS colour of each Rich colour name the styles above use, for pages read on a light background
#: (the timeline page): a terminal's white and bright hues would vanish there, so each is a darker shade
WEB_COLOURS: dict[str, str] = {
    "green": "#1a7f37",
    "cyan": "#0b7a96",
    "magenta": "#b3179e",
    "dark_magenta": "#7e1a8c",
    "yellow": "#a86400",
    "red": "#cf222e",
    "blue": "#1f4fd1",
    "white": "#57606a",
    "dim": "#8c959f",
}


def web_colour(style: str) -> str:
    """The CSS colour a Rich style string stands for on a page: its background if it has one
    (``bold white on dark_magenta``: the colour that stands out), else its foreground; ``dim`` alone is grey."""
    words = style.split()
    if "on" in words:
        return WEB_COLOURS[words[words.index("on") + 1]]
    for w in reversed(words):
        if w in WEB_COLOURS and w != "dim":
            return WEB_COLOURS[w]
    return WEB_COLOURS["dim"]
