"""Workshop mode: one seed and one set of faults, the naive and the safe policy side by side.

A host steps both runs together and the screen names, on the naive side, the invariant the
naive policy breaks (with its witness), while the safe side keeps every one.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Static

from ..errors import ProtolabError
from ..invariants import check
from ..live import LiveRun
from .app import bindings
from .guide import LabHost
from .player import SPEEDS, Player
from .logview import LogView
from .rows import (COMPACT_DELIVERY_HEADER, COMPACT_TASK_HEADER, DELIVERY_HEADER, TASK_HEADER, TaskSource,
                   delivery_source)


def _witness(w: dict) -> str:
    """The first witness in a few words: which task, what happened, which message did it."""
    parts = []
    if w.get("task_id"):
        parts.append(str(w["task_id"]))
    if w.get("old_state") and w.get("new_state"):
        parts.append(f"{w['old_state']} → {w['new_state']}")
    if w.get("times_committed"):
        parts.append(f"committed {w['times_committed']} times")
    if w.get("carried_lease_version") is not None:
        parts.append(f"stale lease v{w['carried_lease_version']}")
    if w.get("problem") and not (w.get("old_state") and w.get("new_state")):
        parts.append(str(w["problem"]))
    if w.get("message_id"):
        parts.append(f"by {w['message_id']}")
    return " ".join(parts) or ", ".join(f"{k}={v}" for k, v in list(w.items())[:3])


class Side(Vertical):
    """One policy's run: verdict banner, State, invariants, Messages."""

    def __init__(self, live: LiveRun, title: str, *, id: str):
        super().__init__(id=id)
        self.live = live
        self.border_title = title
        self.tasks = LogView(classes="tasks")
        self.msgs = LogView(classes="msgs", follow=True)
        self.results = []

    def compose(self) -> ComposeResult:
        yield Static("", classes="banner")
        yield Static(Text(TASK_HEADER, no_wrap=True, overflow="ellipsis"), classes="hdr hdr-tasks")
        yield self.tasks
        yield Static("", classes="invariants")
        yield Static(Text(DELIVERY_HEADER, no_wrap=True, overflow="ellipsis"), classes="hdr hdr-msgs")
        yield self.msgs

    def refresh_side(self) -> None:
        store = self.live.store
        tasks = store.tasks()
        compact = self.app.size.width < 160
        self.tasks.set_source(TaskSource(tasks, compact=compact), keep_cursor=True)
        self.query_one(".hdr-tasks", Static).update(
            Text(COMPACT_TASK_HEADER if compact else TASK_HEADER, no_wrap=True, overflow="ellipsis"))
        self.tasks.styles.height = max(2, min(len(tasks), 8))
        self.msgs.set_source(delivery_source(store, store.delivery_ids(), compact=compact))
        self.query_one(".hdr-msgs", Static).update(
            Text(COMPACT_DELIVERY_HEADER if compact else DELIVERY_HEADER, no_wrap=True, overflow="ellipsis"))
        self.msgs.move_cursor(len(self.msgs.source) - 1)
        self.results = check(store)
        broken = [r for r in self.results if not r.ok]
        banner = self.query_one(".banner", Static)
        banner.set_class(bool(broken), "-broken")
        banner.set_class(not broken, "-holds")
        if broken:
            lines = [f"BROKEN {r.name}: {_witness(r.witnesses[0])}" for r in broken]
            banner.update("\n".join(lines))
        else:
            status = "finished" if self.live.finished else f"{self.live.delivered} deliveries"
            banner.update(f"every invariant holds ({status})")
        inv = Text()
        if self.app.size.height < 40:  # short terminal: the invariants in one line
            bad = [r.name for r in self.results if not r.ok]
            if bad:  # the banner names the broken ones
                inv.append(f"the other {len(self.results) - len(bad)} invariants hold", "green")
            # all hold: the banner above says so already
        else:
            for r in self.results:
                inv.append("  ok   " if r.ok else "  FAIL ", "green" if r.ok else "bold red")
                inv.append(r.name + "\n", "" if r.ok else "bold red")
        box = self.query_one(".invariants", Static)
        box.update(inv)
        box.display = bool(inv.plain)


class WorkshopApp(LabHost, Player, App):
    """Step the naive and the safe run of one scenario together (a lab in workshop mode adds its
    Guide below, checked against the safe side after every step)."""

    TITLE = "protolab workshop"
    CSS_PATH = ["protolab.tcss", "workshop.tcss"]
    # the run screen's keys (sim/tui/app.py KEYS), worded for two sides, and one of its own (e)
    BINDINGS = bindings(
        ("step", {"label": "Step both", "tooltip": "One delivery on each side"}),
        ("toggle_play", {"label": "Play/pause", "tooltip": ""}),
        ("faster", {"show": True}), ("slower", {"show": True}),  # the workshop's footer shows the speed
        Binding("e", "end", "To the end", tooltip="Run both to the end"),
        "lab_hint", "lab_answer",
        ("help", {"tooltip": "Every key, and what the two sides show"}),
        ("quit", {"tooltip": "Leave the workshop"}),
    )
    NOTES = (
        "What the two sides show\n"
        "  Both sides run the same scenario, seed and faults: the left under the naive policy (last write\n"
        "  wins, no deduplication), the right under the safe one (the course's rules).\n"
        "  The banner names every invariant a side breaks, with its first witness (the task, the move, the\n"
        "  message that did it); a side that keeps every invariant says so.\n"
        "  State: each task's state, version, lease, budget and whether its results are trusted.\n"
        "  Messages: every delivery and what intake decided; the decisions differ where the policies do.\n"
    )

    def action_help(self) -> None:
        from .screens import Help

        keys = [b for b in self.BINDINGS if self.lab is not None or not b.action.startswith("lab_")]
        self.push_screen(Help(keys, notes=self.NOTES))

    def get_system_commands(self, screen):
        from textual.app import SystemCommand

        yield from super().get_system_commands(screen)
        for b in self.BINDINGS:
            if b.action in ("quit",) or (b.action.startswith("lab_") and self.lab is None):
                continue
            yield SystemCommand(b.description, b.tooltip or b.description, lambda a=b.action: self.run_action(a))

    def __init__(self, naive: LiveRun, safe: LiveRun, *, play: bool = False,
                 labels: tuple[str, str] = ("naive: last write wins", "safe: the course's rules"), lab=None):
        super().__init__()
        self.naive, self.safe = naive, safe
        self.live = safe  # in a lab, the learner's run
        self.lab = lab  # a LabSession on the safe side's store
        if lab is not None:
            from .guide import Guide

            self.guide = Guide(lab)
        self.labels = labels
        self._autoplay = play
        self.failure = None  # the error that stopped a side (a learner's design raised): the CLI exits 2 with it
        self.message_line = ""  # a word for the status line ('protolab lab start' says a run was resumed)

    def compose(self) -> ComposeResult:
        yield Static(id="status")
        with Horizontal(id="sides"):
            yield Side(self.naive, self.labels[0], id="naive")
            yield Side(self.safe, self.labels[1], id="safe")
        if self.guide is not None:
            yield self.guide
        yield Footer(compact=self.size.width < 160, show_command_palette=self.size.width >= 100)

    def on_resize(self) -> None:
        short = self.size.height < 36
        self.set_class(short, "-short")
        self.set_class(self.guide is not None, "-with-guide")
        if self.guide is not None and self.guide.compact != short:
            self.guide.compact = short  # a short terminal: the Guide shows the current step only
            if self.guide.is_mounted:
                self.guide.show()

    def on_mount(self) -> None:
        self.sub_title = f"{self.safe.scenario.name} · seed {self.safe.seed}"
        self._refresh()
        if self._autoplay:
            self.action_toggle_play()

    def _refresh(self) -> None:
        faults = self.safe.store.get_meta("faults") or "none"
        mode = "▶ playing" if self.playing else "⏸ paused"
        status = Text(f"{self.safe.scenario.name} · seed {self.safe.seed} · faults: {faults} · same seed and faults on "
                      f"both sides · {mode} ×{SPEEDS[self.speed_i]}/s" + (f" │ {self.message_line}" if self.message_line else ""))
        if self.failure is not None:
            status = Text(f"the run stopped: {self.failure.code}: {self.failure} (q quits)", style="bold red")
        self.query_one("#status", Static).update(status)
        for side in self.query(Side):
            side.refresh_side()
        self.lab_refresh()

    def _step(self) -> bool:
        """One delivery on each side; a learner's code that raises stops both here (one line in the
        status and a notice; no traceback)."""
        if self.failure is not None:
            return False
        try:
            a = self.naive.step()
            b = self.safe.step()
        except ProtolabError as e:
            self.failure = e
            self._stop_play()
            self.notify(Text(f"{e.code}: {e}").markup, title="the run stopped", severity="error", timeout=10)
            return False
        return a is not None or b is not None

    def action_step(self) -> None:
        self._step()
        self._refresh()

    def action_end(self) -> None:
        while self._step():
            pass
        self._stop_play()
        self._refresh()

    def play_one(self) -> bool:
        return self._step()

    def show_play(self) -> None:
        self._refresh()
