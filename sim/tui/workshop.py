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
from .rows import (COMPACT_DELIVERY_HEADER, COMPACT_TASK_HEADER, DELIVERY_HEADER, NARROW_DELIVERY_HEADER,
                   NARROW_TASK_HEADER, TASK_HEADER, TaskSource, delivery_source)
from .story import Story, moments, plan, story_faults


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
    """One policy's run: verdict banner, the story's caption, State, invariants, Messages. The app sets
    the banner's, caption's, State's and invariants' heights alike on both sides (:meth:`WorkshopApp.align`),
    so that row n of one side's Messages sits beside row n of the other's."""

    def __init__(self, live: LiveRun, title: str, *, id: str):
        super().__init__(id=id)
        self.live = live
        self.border_title = title
        self.tasks = LogView(classes="tasks")
        self.msgs = LogView(classes="msgs", follow=True)
        self.results = []
        self.caption = ""  # the story's line for this side at its current moment ("" outside a story)
        self.culprit: int | None = None  # the delivery row the story lights (an index of msgs)
        self.culprit_task: str | None = None  # the task row it lights before the culprit arrives

    def compose(self) -> ComposeResult:
        yield Static("", classes="banner")
        yield Static("", classes="caption")
        yield Static(Text(TASK_HEADER, no_wrap=True, overflow="ellipsis"), classes="hdr hdr-tasks")
        yield self.tasks
        yield Static("", classes="invariants")
        yield Static(Text(DELIVERY_HEADER, no_wrap=True, overflow="ellipsis"), classes="hdr hdr-msgs")
        yield self.msgs

    def texts(self) -> tuple[Text, Text, Text]:
        """The banner, the caption and the invariants' lines, as this side would show them now."""
        broken = [r for r in self.results if not r.ok]
        if broken and self.app.size.width < 100 and self.caption:  # narrow: the story's caption gives the witness
            banner = Text("\n".join(f"BROKEN {r.name}" for r in broken))
        elif broken:
            banner = Text("\n".join(f"BROKEN {r.name}: {_witness(r.witnesses[0])}" for r in broken))
        else:
            status = "finished" if self.live.finished else f"{self.live.delivered} deliveries"
            banner = Text(f"every invariant holds ({status})")
        inv = Text()
        if self.app.size.height < 40:  # short terminal: the invariants in one line
            if broken:  # the banner names the broken ones
                inv.append(f"the other {len(self.results) - len(broken)} invariants hold", "green")
            # all hold: the banner above says so already
        else:
            for r in self.results:
                inv.append("  ok   " if r.ok else "  FAIL ", "green" if r.ok else "bold red")
                inv.append(r.name + "\n", "" if r.ok else "bold red")
        inv.rstrip()
        return banner, Text(self.caption), inv

    def refresh_side(self) -> None:
        store = self.live.store
        tasks = store.tasks()
        narrow = self.app.size.width < 100
        compact = self.app.size.width < 160
        self.tasks.set_source(TaskSource(tasks, compact=compact, narrow=narrow), keep_cursor=True)
        self.query_one(".hdr-tasks", Static).update(Text(
            NARROW_TASK_HEADER if narrow else COMPACT_TASK_HEADER if compact else TASK_HEADER,
            no_wrap=True, overflow="ellipsis"))
        self.msgs.set_source(delivery_source(store, store.delivery_ids(), compact=compact, narrow=narrow))
        self.query_one(".hdr-msgs", Static).update(Text(
            NARROW_DELIVERY_HEADER if narrow else COMPACT_DELIVERY_HEADER if compact else DELIVERY_HEADER,
            no_wrap=True, overflow="ellipsis"))
        self.results = check(store)
        broken = [r for r in self.results if not r.ok]
        banner_text, caption_text, inv = self.texts()
        banner = self.query_one(".banner", Static)
        banner.set_class(bool(broken), "-broken")
        banner.set_class(not broken, "-holds")
        banner.update(banner_text)
        caption = self.query_one(".caption", Static)
        caption.update(caption_text)
        self.query_one(".invariants", Static).update(inv)
        # the story's culprit: its delivery row once delivered, else its task's row; otherwise the newest row
        rows = [t["task_id"] for t in tasks]
        self.tasks.move_cursor(rows.index(self.culprit_task) if self.culprit_task in rows else 0)
        lit = self.culprit is not None and self.culprit < len(self.msgs.source)
        self.msgs.move_cursor(self.culprit if lit else len(self.msgs.source) - 1)
        self.set_class(lit, "-culprit-message")
        self.set_class(self.culprit_task is not None and not lit, "-culprit-task")

    def lines_needed(self, text: Text) -> int:
        """How many lines ``text`` takes in this side's width (wrapped as a Static wraps it)."""
        if not text.plain:
            return 0
        width = max(10, self.app.size.width // 2 - 4)  # half the screen, less the border and padding
        return len(text.wrap(self.app.console, width))


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
        Binding("space", "story_next", "Next moment", tooltip="Play both sides on to the story's next moment"),
        Binding("e", "end", "To the end", tooltip="Run both to the end"),
        Binding("r", "restart", "Restart", tooltip="Start both runs again from the first delivery"),
        Binding("f", "next_fault", "Next fault", tooltip="Start again with the next fault that breaks the naive side"),
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
        "  Story mode (--story, the default in a terminal) stops where it matters: before the message that\n"
        "  breaks the naive side arrives, and once both sides have taken it; the line under each banner\n"
        "  says what happens there, and the row it speaks of is lit on both sides.\n"
    )

    def check_action(self, action: str, parameters) -> bool | None:
        if action in ("step", "toggle_play", "faster", "slower"):
            return not self.story_mode
        if action == "story_next":  # shown greyed at the story's last moment
            return self.story_mode and (None if self.moment_i >= len(self.moments) - 1 else True)
        if action in ("restart", "next_fault"):
            return self.factory is not None
        return super().check_action(action, parameters)

    def action_help(self) -> None:
        from .screens import Help

        keys = [b for b in self.BINDINGS if self.check_action(b.action, ()) is not False]  # this mode's keys
        self.push_screen(Help(keys, notes=self.NOTES))

    def get_system_commands(self, screen):
        from textual.app import SystemCommand

        yield from super().get_system_commands(screen)
        for b in self.BINDINGS:
            if b.action in ("quit",) or self.check_action(b.action, ()) is False:  # what this mode has no key for
                continue
            yield SystemCommand(b.description, b.tooltip or b.description, lambda a=b.action: self.run_action(a))

    def __init__(self, naive: LiveRun, safe: LiveRun, *, play: bool = False,
                 labels: tuple[str, str] = ("naive: last write wins", "safe: the course's rules"), lab=None,
                 story: bool = False, factory=None, faults=()):
        """``factory(side, faults) -> LiveRun`` ("naive" or "safe") makes a side's run again: r restarts
        with it, f switches the fault, and story mode (``story``) plays runs of it in memory to find its
        moments. Without a factory (a lab), r and f are off and there is no story."""
        super().__init__()
        self.naive, self.safe = naive, safe
        self.factory = factory
        self.faults = tuple(faults)
        self.story_mode = bool(story and factory is not None)
        self.story: Story | None = None
        self.moments = []
        self.moment_i = -1
        self._plans: dict = {}  # faults -> Story or None: each fault played once
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
        if self.is_mounted and self.query(Side):
            self.call_after_refresh(self._refresh)
        short = self.size.height < 36
        self.set_class(short, "-short")
        self.set_class(self.guide is not None, "-with-guide")
        if self.guide is not None and self.guide.compact != short:
            self.guide.compact = short  # a short terminal: the Guide shows the current step only
            if self.guide.is_mounted:
                self.guide.show()

    def on_mount(self) -> None:
        self.sub_title = f"{self.safe.scenario.name} · seed {self.safe.seed}"
        if self.story_mode:
            self._start_story()
        self._refresh()
        if self._autoplay and not self.story_mode:
            self.action_toggle_play()

    def _refresh(self) -> None:
        faults = self.safe.store.get_meta("faults") or "none"
        if self.story_mode:
            mode = (f"story {self.moment_i + 1}/{len(self.moments)} · "
                    + ("space next · " if self.moment_i < len(self.moments) - 1 else "") + "r restart · f next fault")
            status = Text(f"faults: {faults} · {mode}" + (f" │ {self.message_line}" if self.message_line else ""))
        else:
            mode = "▶ playing" if self.playing else "‖ paused"
            status = Text(f"{self.safe.scenario.name} · seed {self.safe.seed} · faults: {faults} · same seed and faults "
                          f"on both sides · {mode} ×{SPEEDS[self.speed_i]}/s"
                          + (f" │ {self.message_line}" if self.message_line else ""))
        if self.failure is not None:
            status = Text(f"the run stopped: {self.failure.code}: {self.failure} (q quits)", style="bold red")
        self.query_one("#status", Static).update(status)
        for side in self.query(Side):
            side.refresh_side()
        self.align()
        self.lab_refresh()

    def align(self) -> None:
        """Give each block above the Messages the same height on both sides (the taller side's), so
        that the two message lists start on the same line and row n sits beside row n."""
        sides = list(self.query(Side))
        if len(sides) < 2:
            return
        texts = [side.texts() for side in sides]
        for k, cls in enumerate((".banner", ".caption", ".invariants")):
            need = max(side.lines_needed(t[k]) for side, t in zip(sides, texts))
            for side in sides:
                box = side.query_one(cls, Static)
                box.display = need > 0
                box.styles.height = max(need, 1)
        rows = max(len(side.tasks.source) for side in sides)
        for side in sides:
            side.tasks.styles.height = max(2, min(rows, 8))

    # ------------------------------------------------------------------ the story

    def _plan(self, faults: tuple[str, ...]):
        if faults not in self._plans:
            self._plans[faults] = plan(self.factory, faults)
        return self._plans[faults]

    def _start_story(self) -> None:
        self.story = self._plan(self.faults)
        self.moments = moments(self.story, self.faults)
        self.moment_i = 0
        self._show_moment()

    def _advance(self, live: LiveRun, at: int | None) -> None:
        while (at is None or live.delivered < at) and self.failure is None:
            try:
                if live.step() is None:
                    return
            except ProtolabError as e:
                self.failure = e
                self.notify(Text(f"{e.code}: {e}").markup, title="the run stopped", severity="error", timeout=10)
                return

    def _show_moment(self) -> None:
        m = self.moments[self.moment_i]
        story = self.story
        for side_id, live, at, caption, culprit in (
                ("#naive", self.naive, m.naive_at, m.naive_caption, story.naive if story else None),
                ("#safe", self.safe, m.safe_at, m.safe_caption, story.safe if story else None)):
            self._advance(live, at)
            side = self.query_one(side_id, Side)
            side.caption = caption
            side.culprit = culprit.index if culprit is not None and m.highlight == "message" else None
            side.culprit_task = culprit.task_id if culprit is not None and m.highlight == "task" else None

    def action_story_next(self) -> None:
        if not self.story_mode or self.moment_i >= len(self.moments) - 1:
            return
        self.moment_i += 1
        self._show_moment()
        self._refresh()
        self.refresh_bindings()

    def _restart(self, faults: tuple[str, ...]) -> None:
        self._stop_play()
        for live in (self.naive, self.safe):
            live.close()
        self.faults = faults
        self.failure = None
        self.naive, self.safe = self.factory("naive", faults), self.factory("safe", faults)
        self.live = self.safe
        self.query_one("#naive", Side).live = self.naive
        self.query_one("#safe", Side).live = self.safe
        for side in self.query(Side):
            side.caption, side.culprit, side.culprit_task = "", None, None
        if self.story_mode:
            self._start_story()
        self._refresh()
        self.refresh_bindings()

    def action_restart(self) -> None:
        if self.factory is not None:
            self._restart(self.faults)
            self.notify(f"started again: {', '.join(self.faults) or 'no faults'}", timeout=3)

    def action_next_fault(self) -> None:
        if self.factory is None:
            return
        nxt = story_faults(self._plan, self.faults)
        if nxt is None:
            self.notify("no other fault breaks the naive side here", timeout=4)
            return
        self._restart(nxt)
        self.notify(f"fault: {nxt[0]}", timeout=3)

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
        if self.story_mode:
            self.moment_i = len(self.moments) - 1
            self._show_moment()
            self._refresh()
            self.refresh_bindings()
            return
        while self._step():
            pass
        self._stop_play()
        self._refresh()

    def play_one(self) -> bool:
        return self._step()

    def show_play(self) -> None:
        self._refresh()
