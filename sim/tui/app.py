"""The protolab TUI: a run's State, Events and Messages, side by side and never mixed.

Three ways in (see ``protolab demo`` and ``protolab tui``): a live run stepped by hand (a
:class:`~sim.live.LiveRun`), a finished run opened read-only, and the workshop screen that
runs the naive and the safe policy side by side (:mod:`sim.tui.workshop`).
"""

from __future__ import annotations

from typing import Iterable

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.containers import Container, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Static

from ..errors import ProtolabError
from ..faults import REGISTRY as FAULT_REGISTRY
from ..live import LiveRun, Timeline
from ..store import Store
from .guide import LabHost
from .logview import LogView
from .player import SPEEDS, Player
from .rows import DELIVERY_HEADER, EVENT_HEADER, TASK_HEADER, TaskSource, delivery_source, event_source

MIN_SIZE = (60, 16)
#: Time travel further than this many events from a rebuilt state folds in a background thread.
FOLD_IN_BACKGROUND = 5000

SOURCE_OF_TRUTH = (
    "[b]State[/b]: authoritative tables, written only by folding [b]Events[/b] (the append-only log). "
    "[b]Messages[/b]: what was said and what intake decided; never state."
)


class Pane(Vertical):
    """A titled pane holding one LogView and a column header."""

    def __init__(self, title: str, header: str, view: LogView, *, id: str):
        super().__init__(id=id)
        self.border_title = title
        self._header = header
        self.view = view

    def compose(self) -> ComposeResult:
        yield Static(Text(self._header, no_wrap=True, overflow="ellipsis"), classes="pane--header")
        yield self.view



#: keys the footer shows under one label each (? lists every key with its own description)
SPEED = Binding.Group("Speed", compact=True)
FAULTS = Binding.Group("Faults", compact=True)
TRAVEL = Binding.Group("Time", compact=True)
LAB = Binding.Group("Lab", compact=True)
VIEW = Binding.Group("View", compact=True)


#: Every key of the run screen, once: (key, action, footer label, palette title, what it does, group,
#: more Binding arguments). The footer, ? Help and the command palette are all read from here.
KEYS = [
    ("space", "step", "Step", "Step one delivery", "Deliver the next envelope (one delivery)", None, {}),
    ("p", "toggle_play", "Play", "Play / pause", "Deliver continuously at the current speed", None, {}),
    ("plus,equals_sign", "faster", "Faster", "Faster", "Raise the play speed", SPEED,
     {"key_display": "+", "show": False}),  # ? lists them
    ("minus", "slower", "Slower", "Slower", "Lower the play speed", SPEED, {"key_display": "-", "show": False}),
    # a key per fault that can be injected by hand, as the fault declares it (sim/faults.py, tui_key=)
    *[(f.tui_key[0], f"inject('{f.name}')", f.tui_key[1], f.tui_key[2], f.tui_key[3], FAULTS, {})
      for f in FAULT_REGISTRY.values() if f.tui_key is not None],
    ("k", "crash", "Crash", "Crash a worker", "Crash a worker mid-task", FAULTS, {}),
    ("r", "reconcile", "Review", "Reconcile a needs_review task", "Decide a needs_review task as the reviewer", None, {}),
    ("f", "filter", "Filter", "Filter by task or trace", "Show one task or trace only", VIEW, {}),
    ("v", "conversation", "Conversation", "Conversation view", "Per-sender sequence, fence, acks and validator errors",
     VIEW, {}),
    ("left_square_bracket", "back", "Back", "Time travel: one event back", "Time travel: one event back", TRAVEL,
     {"key_display": "["}),
    ("right_square_bracket", "forward", "Fwd", "Time travel: one event forward", "Time travel: one event forward", TRAVEL,
     {"key_display": "]"}),
    ("g", "goto", "Go to", "Time travel to the selected event", "Time travel to the event selected in the Events pane",
     TRAVEL, {}),
    ("t", "present", "Now", "Back to the present", "Leave time travel: back to the present", TRAVEL, {}),
    ("h", "lab_hint", "Hint", "Lab: hint", "Lab: the hint for the next unmet checkpoint", LAB, {}),
    ("a", "lab_answer", "Answer", "Lab: answer a question", "Lab: answer the next question", LAB, {}),
    ("question_mark", "help", "Help", "Help", "Every key and what the panes mean", None, {"key_display": "?"}),
    ("q", "quit", "Quit", "Quit", "", None, {}),
]


def bindings(*picks, prefix: str = "") -> list[Binding]:
    """Bindings made from ``KEYS``, in the order given: each pick is an action of KEYS (its row as it
    is), ``(action, overrides)`` (the row with Binding arguments replaced, e.g. another label), or a
    ready Binding for a key only this screen has. Another screen's keys are the run screen's keys."""
    rows = {action: (key, label, what, group, extra) for key, action, label, _t, what, group, extra in KEYS}
    out = []
    for pick in picks:
        if isinstance(pick, Binding):
            out.append(pick)
            continue
        action, over = (pick, {}) if isinstance(pick, str) else pick
        key, label, what, group, extra = rows[action]
        kw = {"tooltip": what, "group": group, **extra, **over}
        out.append(Binding(key, prefix + action, kw.pop("label", label), **kw))
    return out


class RunScreen(Screen):
    """The main screen: the source-of-truth strip, the three panes, a status line, the footer."""

    BINDINGS = [
        Binding(key, f"app.{action}", label, tooltip=what, group=group, **extra)
        for key, action, label, _title, what, group, extra in KEYS
    ]

    def compose(self) -> ComposeResult:
        app: ProtolabApp = self.app  # type: ignore[assignment]
        yield Static(id="status")
        yield Static(SOURCE_OF_TRUTH, id="truth")
        with Container(id="main"):
            with Vertical(id="panes"):
                yield Pane("State", TASK_HEADER, app.state_view, id="state-pane")
                with Container(id="logs"):
                    yield Pane("Events", EVENT_HEADER, app.events_view, id="events-pane")
                    yield Pane("Messages", DELIVERY_HEADER, app.messages_view, id="messages-pane")
            if app.guide is not None:
                yield app.guide
        yield Static(id="too-small")
        # every key fits at 80 columns: related keys share a label, the palette (ctrl+p) is named from 100
        yield Footer(compact=self.app.size.width < 160, show_command_palette=self.app.size.width >= 100)

    def on_mount(self) -> None:
        self._fit(self.app.size.width, self.app.size.height)
        self.app.screen_ready()

    def on_resize(self, event) -> None:
        self._fit(event.size.width, event.size.height)

    def _fit(self, w: int, h: int) -> None:
        small = w < MIN_SIZE[0] or h < MIN_SIZE[1]
        self.set_class(small, "-small")
        self.set_class(w < 160, "-narrow")
        self.set_class(getattr(self.app, "guide", None) is not None, "-with-guide")
        self.set_class(w < 120 and getattr(self.app, "guide", None) is not None, "-guide-below")
        guide = getattr(self.app, "guide", None)
        compact = guide is not None and w < 120 and h < 36
        self.set_class(compact, "-guide-compact")
        if guide is not None and guide.compact != compact:
            guide.compact = compact
            if guide.is_mounted:
                guide.show()
        if small:
            self.query_one("#too-small", Static).update(
                f"The terminal is {w}x{h}; protolab needs at least {MIN_SIZE[0]}x{MIN_SIZE[1]}.\n"
                "Make the window bigger (or press q to quit)."
            )


class ProtolabApp(LabHost, Player, App):
    """Browse (and, when live, drive) one run."""

    TITLE = "protolab"
    CSS_PATH = ["protolab.tcss", "run.tcss"]

    BINDINGS = [Binding("q", "quit", "Quit")]

    #: (action, title, help) for the command palette: the same actions as the keys.
    #: The command palette: every key's action but quit (Textual's own commands offer that), read from KEYS.
    COMMANDS_LIST = tuple((action, title, what) for _k, action, _l, title, what, _g, _x in KEYS if action != "quit")

    #: Time travel: the event the panes show state after (None: the present). Setting it redraws the panes.
    as_of: reactive[int | None] = reactive(None, init=False)
    #: ("task" | "trace", id) the panes are narrowed to (None: everything). Setting it redraws the panes.
    filter: reactive[tuple[str, str] | None] = reactive(None, init=False)

    def __init__(self, store: Store, *, live: LiveRun | None = None, play: bool = False, speed: int = 4,
                 label: str | None = None, lab=None, watch: bool = False):
        super().__init__()
        # watch: no simulator; another process delivers into the file ('protolab deliver'), and the
        # panes and the Guide follow it (a lab in hand-delivery mode)
        self.watch = watch
        self.lab = lab  # a LabSession: the Guide panel, checkpoints checked after every action
        self.guide = None
        self._visited: int | None = None
        if lab is not None:
            from .guide import Guide

            self.guide = Guide(lab)
        self.store = store
        self.live = live
        self.label = label or self._label()
        self.speed_i = SPEEDS.index(speed) if speed in SPEEDS else 2
        self._autoplay = play and live is not None
        self.timeline = Timeline(store)
        self.state_view = LogView(id="state")
        self.events_view = LogView(id="events", follow=True)
        self.messages_view = LogView(id="messages", follow=True)
        self._tasks: list[dict] = []
        self.message_line = ""
        self._folding = False
        # The error that stopped the live run (a learner's design, intake or effect rule raised):
        # shown in the app, which stays up; the CLI exits 2 with it as one line when the app ends.
        self.failure: ProtolabError | None = None

    # ------------------------------------------------------------------ set-up

    def _label(self) -> str:
        g = self.store.get_meta
        scen = g("scenario") or "hand-delivered messages"
        plugged = [f"{k} {(g('plugin_' + k) or '').split(' ')[0]}" for k in ("design", "intake", "effects", "machine")
                   if g("plugin_" + k)]
        return f"{scen} · seed {g('seed') or '-'} · {g('policy') or 'safe'}" + "".join(f" · {p}" for p in plugged)

    def get_default_screen(self) -> Screen:
        return RunScreen()

    def on_mount(self) -> None:
        self.title = "protolab"
        self.sub_title = self.label
        if self.watch:
            self.set_interval(0.4, self._follow_file)

    def _follow_file(self) -> None:
        """Hand delivery: when another process committed into the file, show it (and re-check the lab)."""
        try:
            changed = self.store.poll()
        except ProtolabError as e:
            self.say(f"{e.code}: {e}", error=True)
            return
        if changed:
            self.message_line = f"new deliveries in the file: {self.store.last_delivery()} in all"
            self.reload()

    def screen_ready(self) -> None:
        """The main screen is composed: fill the panes, focus Messages, start playing if asked."""
        self.reload()
        self.events_view.move_cursor(len(self.events_view.source) - 1)
        self.messages_view.move_cursor(len(self.messages_view.source) - 1)
        self.messages_view.focus()
        if self._autoplay:
            self.action_toggle_play()
        self._status()

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for action, title, help in self.COMMANDS_LIST:
            if action.startswith("lab_") and self.lab is None:
                continue
            yield SystemCommand(title, help, lambda a=action: self.run_action(a))

    # ------------------------------------------------------------------ what the panes show

    def watch_as_of(self) -> None:
        self.reload()

    def watch_filter(self) -> None:
        self.reload()

    def _scope(self) -> dict:
        if self.filter is None:
            return {}
        kind, value = self.filter
        return {"task_id": value} if kind == "task" else {"trace_id": value}

    def reload(self) -> None:
        """Point the three panes at the run as of now (or as of the time-travel event)."""
        scope = self._scope()
        store = self.store
        if self.as_of is None:
            view_store = store
            if scope:
                ev_ids = store.event_ids(**scope)
                dl_ids = store.delivery_ids(**scope)
            else:
                # Unfiltered, ids run 1..N: a range costs nothing, however long the run.
                ev_ids = range(1, store.last_event() + 1)
                dl_ids = range(1, store.last_delivery() + 1)
        else:
            if self._folding:
                self._status()
                return
            if self.timeline.cost(self.as_of) > FOLD_IN_BACKGROUND:
                self._fold_in_background(self.as_of)
                return
            view_store = self.timeline.at(self.as_of)
            ev_ids = store.event_ids(upto=self.as_of, **scope)
            dl_ids = store.delivery_ids(upto_event=self.as_of, **scope)
        tasks = view_store.tasks()
        if self.filter is not None:
            kind, value = self.filter
            tasks = [t for t in tasks if (t["task_id"] if kind == "task" else t["trace_id"]) == value]
        self._tasks = tasks
        self.state_view.set_source(TaskSource(tasks), keep_cursor=True)
        self._size_state_pane()
        self._swap(self.events_view, event_source(store, ev_ids))
        self._swap(self.messages_view, delivery_source(store, dl_ids))
        if self.as_of is not None:
            self.events_view.move_cursor(len(ev_ids) - 1)
        self._status()
        self._lab_after()

    # ------------------------------------------------------------------ labs

    def _lab_after(self) -> None:
        """After every action: record a time-travel visit, re-check the lab, tick the Guide."""
        if self.lab is None:
            return
        newly = []
        if self.as_of is not None and self.as_of != self._visited:
            self._visited = self.as_of
            newly += self.lab.action("visit", {"seq": self.as_of})
        self.lab_refresh(newly)

    def _fold_in_background(self, seq: int) -> None:
        """A long way back in a big run: rebuild state by replay in a thread, showing progress."""
        self._folding = True
        self.message_line = f"rebuilding state by replay up to event {seq:,}…"
        self._status()

        def progress(done: int, total: int) -> None:
            self.call_from_thread(self._fold_progress, seq, done, total)

        def work() -> None:
            try:
                self.timeline.at(seq, progress)
            finally:
                self.call_from_thread(self._fold_done)

        self.run_worker(work, thread=True, exclusive=True, group="time-travel")

    def _fold_progress(self, seq: int, done: int, total: int) -> None:
        self.message_line = f"rebuilding state by replay up to event {seq:,}: {100 * done // max(total, 1)}%"
        self._status()

    def _fold_done(self) -> None:
        self._folding = False
        if self.timeline.cancelled:
            return
        self.message_line = ""
        self.reload()

    def _size_state_pane(self) -> None:
        """As tall as its tasks need (at least one row), at most a third of the screen."""
        try:
            pane = self.screen.query_one("#state-pane")
        except NoMatches:  # another screen is on top
            return
        cap = max(5, (self.size.height - 4) // 3)
        frame = 2 if self.screen.has_class("-guide-compact") else 3  # a top border only beside a compact Guide
        pane.styles.height = max(frame + 1, min(len(self._tasks) + frame, cap))

    def _swap(self, view: LogView, source) -> None:
        old = view.source
        at_end = len(old) == 0 or view.cursor >= len(old) - 1
        view.set_source(source, keep_cursor=True)
        if at_end and (self.as_of is None or view is self.messages_view):
            view.move_cursor(len(source) - 1)

    def _status(self) -> None:
        parts = [self.label]
        if self.live is not None:
            r = self.live.run
            mode = "finished" if self.live.finished else ("▶ playing" if self.playing else "‖ paused")
            # every delivery in the store (a reviewer's decision too), as Messages shows them
            n = self.store.next_delivery_id() - 1
            parts.append(f"round {r.now} · {n} deliveries · {mode} ×{SPEEDS[self.speed_i]}/s")
            waiting = r.session.waiting_text() if r.session is not None else ""
            if waiting:  # the safe runtime's session holds a message back until its sender's gap fills
                parts.append(waiting)
        else:
            parts.append("read-only")
        if self.as_of is not None:
            parts.append(f"[reverse] TIME TRAVEL: after event {self.as_of} of {self.store.last_event()} [/reverse]")
        if self.filter is not None:
            parts.append(f"filter {self.filter[0]}={self.filter[1]}")
        if self.message_line:
            if self.failure is not None:  # what stopped the run comes first: it must not be cut off
                parts.insert(0, self.message_line)
            else:
                parts.append(self.message_line)
        try:
            self.screen.query_one("#status", Static).update(" │ ".join(parts))
        except NoMatches:  # a modal is on top: the status waits
            pass

    def say(self, text: str, *, error: bool = False) -> None:
        text = text.replace("[", "\\[")  # "[ and ]" is text here, not markup (Textual would swallow it)
        self.message_line = f"[red]{text}[/red]" if error else text
        if error:
            self.notify(text, severity="error", timeout=10 if self.failure is not None else 5)
        self._status()

    # ------------------------------------------------------------------ selection

    def selected_delivery(self) -> dict | None:
        src = self.messages_view.source
        i = self.messages_view.cursor
        if self.focused is self.events_view:
            seq = self.events_view.source.id_at(self.events_view.cursor)
            ev = self.store.event(seq) if seq is not None else None
            if ev and ev.delivery_id:
                return self.store.delivery(ev.delivery_id)
            return None
        if not hasattr(src, "id_at"):
            return None
        did = src.id_at(i)
        return self.store.delivery(did) if did is not None else None

    def selected_task(self) -> dict | None:
        if self.focused is self.state_view and 0 <= self.state_view.cursor < len(self._tasks):
            return self._tasks[self.state_view.cursor]
        d = self.selected_delivery()
        if d is not None:
            for t in self._tasks:
                if t["task_id"] == d["task_id"]:
                    return t
        review = [t for t in self._tasks if t["state"] == "needs_review"]
        return review[0] if review else None

    # ------------------------------------------------------------------ stepping

    def _need_live(self, what: str) -> bool:
        if self.live is None and self.watch:
            self.say(f"this run is delivered by hand, so it cannot {what} here: write the envelope and run "
                     "'protolab deliver FILE --db ...' in another terminal")
            return False
        if self.live is None:
            self.say(f"read-only: this run is finished, so it cannot {what}; use [ and ] to walk through it")
            return False
        self.as_of = None
        return True

    def action_step(self) -> None:
        if self.live is None and self.watch:
            self.say("this run is delivered by hand: 'protolab deliver FILE --db ...' in another terminal; the panes "
                     "follow the file")
            return
        if self.live is None:
            # A finished run: step through it one delivery at a time, by time travel.
            self._travel_delivery()
            return
        if self._stopped():
            return
        self.as_of = None
        out = self._engine_step()
        if self.failure is not None:
            return
        if out is None:
            self._stop_play()
            self.say("the run is over: nothing more is due ([ and ] walk it back an event at a time; a fault key "
                     "carries it on; q quits)")
        else:
            self.message_line = f"#{out.delivery_id} {out.message_id} {out.type}: {out.decision}"
        self.reload()

    def _travel_delivery(self) -> None:
        """A finished run, walked from its start: each press shows state after the next delivery."""
        cur = self.as_of if self.as_of is not None else 0
        span = self.store.next_delivery_span(cur)
        if span is None:
            self.say("at the end of the run (t: back to the present, [ and ]: one event at a time)")
            return
        delivery_id, end = span
        d = self.store.delivery(delivery_id)
        self.message_line = (f"walking the run: after delivery #{delivery_id} {d['message_id']} {d['type']}: {d['decision']}"
                             if d else "")
        self.as_of = end

    def action_toggle_play(self) -> None:
        if self.live is None:
            self.say("read-only: a finished run does not play; press space to walk it one delivery at a time")
            return
        if self._stopped():
            return
        super().action_toggle_play()

    def _engine_step(self):
        """One delivery; a learner's code that raises stops the run here (no traceback: one line in
        the app, and the CLI's exit status 2 when the app ends)."""
        try:
            return self.live.step()
        except ProtolabError as e:
            self.failure = e
            self._stop_play()
            self.message_line = ""
            self.say(f"the run stopped: {e.code}: {e}", error=True)
            self.reload()
            return None

    def _stopped(self) -> bool:
        if self.failure is None:
            return False
        self.say(f"the run cannot go on: {self.failure.code}: {self.failure} (fix the file and start the run again; "
                 "q quits)", error=True)
        return True

    def play_one(self) -> bool:
        if self.live is None or self.failure is not None:
            return False
        self.as_of = None
        out = self._engine_step()
        if self.failure is not None:
            return False
        if out is None:
            self.message_line = "the run is over"
            return False
        self.message_line = f"#{out.delivery_id} {out.message_id} {out.type}: {out.decision}"
        return True

    def show_play(self) -> None:
        if self.as_of is None and self.live is not None:
            self.reload()
        else:
            self._status()

    # ------------------------------------------------------------------ by hand

    def action_inject(self, fault: str) -> None:
        if not self._need_live(f"take a {fault}"):
            return
        d = self.selected_delivery()
        if d is None:
            self.say("select a message first (Messages pane)", error=True)
            return
        try:
            self.say(self.live.inject(fault, d["message_id"]))
        except ProtolabError as e:
            self.say(f"{e.code}: {e}", error=True)
        self.reload()

    def action_crash(self) -> None:
        if not self._need_live("crash a worker"):
            return
        from .screens import ChooseWorker

        workers = sorted(self.live.run.workers)
        d = self.selected_delivery()
        first = d["sender"] if d and d["sender"] in workers else None
        if first is None:  # the worker that holds a lease now, if any: that is the one a crash hurts
            first = next((w for w in workers if any(j.lease and j.result is None
                                                    for j in self.live.run.workers[w].jobs.values())), None)

        def done(worker: str | None) -> None:
            if worker is None:
                return
            try:
                self.say(self.live.crash(worker))
            except ProtolabError as e:
                self.say(f"{e.code}: {e}", error=True)
            self.reload()

        self.push_screen(ChooseWorker(workers, first), done)

    def action_reconcile(self) -> None:
        if self.live is None:
            self.say("read-only: this run is finished, so it cannot take a reviewer's decision; use [ and ] to walk through it")
            return
        from .screens import Reconcile

        # In time travel the reviewer decides from what the screen shows: the task as of that
        # event. If it has moved on since, the decision carries that old state_version (a stale
        # read) and compare-and-swap refuses it.
        travelled = self.as_of
        t = self.selected_task()
        if t is None or t["state"] != "needs_review":
            pool = self._tasks if travelled is not None else self.store.tasks()
            t = next((x for x in pool if x["state"] == "needs_review"), None)
            if t is None:
                pending = self.store.open_reconciliations()
                if pending:
                    self._resolve(pending[0])
                    return
                self.say("no task is in needs_review and no reconciliation is open; inject a conflicting digest (c) "
                         "to freeze one, or a late failure (l) on the publishing result to open a reconciliation",
                         error=True)
                return
        now = self.store.get_task(t["task_id"])
        read_version = t["state_version"] if travelled is not None and now is not None \
            and now.state_version != t["state_version"] else None
        self.as_of = None
        candidates = [i["message_id"] for i in self.store.intents_of_task(t["task_id"]) if not i["trusted"]]

        def done(choice) -> None:
            if choice is None:
                return
            decision, evidence = choice
            try:
                out = self.live.reconcile(t["task_id"], decision, evidence, read_version=read_version)
                stale = f" from your read of v{read_version}" if read_version is not None else ""
                self.say(f"reviewer: {t['task_id']} → {decision}{stale} ({out.decision}{': ' + out.code if out.code else ''})")
            except ProtolabError as e:
                self.say(f"{e.code}: {e}", error=True)
                self.lab_action("reconcile-refused", {"task_id": t["task_id"], "code": e.code, "reason": str(e)})
            self.reload()

        self.push_screen(Reconcile(t["task_id"], candidates, read_version), done)

    def _resolve(self, p: dict) -> None:
        """The reviewer's decision on an open reconciliation: keep the effect or retract it."""
        from .screens import Reconcile

        self.as_of = None

        def done(choice) -> None:
            if choice is None:
                return
            decision, evidence = choice
            try:
                out = self.live.resolve(p["task_id"], decision, evidence, of=p["message_id"])
                self.say(f"reviewer: reconciliation of {p['message_id']} → {decision} ({out.decision}"
                         f"{': ' + out.code if out.code else ''})")
            except ProtolabError as e:
                self.say(f"{e.code}: {e}", error=True)
                self.lab_action("reconcile-refused", {"task_id": p["task_id"], "code": e.code, "reason": str(e)})
            self.reload()

        self.push_screen(Reconcile(p["task_id"], [p["message_id"]], late=p["message_id"], effects=p["effects"]), done)

    def action_filter(self) -> None:
        from .screens import AskFilter

        def done(value: str | None) -> None:
            if value is None:
                return
            value = value.strip()
            if not value:
                self.filter = None
                self.say("filter cleared")
            elif any(t["task_id"] == value for t in self.store.tasks()):
                self.filter = ("task", value)
                self.say(f"showing task {value} only")
            elif any(t["trace_id"] == value for t in self.store.tasks()):
                self.filter = ("trace", value)
                self.say(f"showing trace {value} only")
            else:
                self.say(f"no task or trace {value!r} in this run", error=True)

        current = self.filter[1] if self.filter else ""
        self.push_screen(AskFilter(current), done)

    # ------------------------------------------------------------------ time travel

    def action_back(self) -> None:
        last = self.store.last_event()
        cur = self.as_of if self.as_of is not None else last
        if cur <= 0:
            self.say("at the start of the log")
            return
        self._stop_play()
        self.as_of = cur - 1

    def action_forward(self) -> None:
        if self.as_of is None:
            self.say("already at the present; [ goes back")
            return
        nxt = self.as_of + 1
        self.as_of = None if nxt >= self.store.last_event() else nxt

    def action_goto(self) -> None:
        seq = self.events_view.source.id_at(self.events_view.cursor) if len(self.events_view.source) else None
        if seq is None:
            self.say("select an event in the Events pane first", error=True)
            return
        self._stop_play()
        self.as_of = None if seq >= self.store.last_event() else seq
        self.events_view.focus()

    def action_present(self) -> None:
        self.message_line = "back to the present"
        self.as_of = None
        self._status()

    # ------------------------------------------------------------------ other screens

    @on(LogView.Selected)
    def _open_detail(self, event: LogView.Selected) -> None:
        from .screens import Detail

        view = event.view
        src = view.source
        if view is self.state_view:
            if 0 <= event.index < len(self._tasks):
                self.push_screen(Detail.for_task(self._state_store(), self.store, self._tasks[event.index]["task_id"]))
            return
        ident = src.id_at(event.index) if hasattr(src, "id_at") else None
        if ident is None:
            return
        if view is self.events_view:
            self.push_screen(Detail.for_event(self.store, ident))
        else:
            d = self.store.delivery(ident)
            if d is not None:
                self.lab_action("open-detail", {"message_id": d["message_id"], "type": d["type"],
                                                "delivery_id": d["delivery_id"]})
            self.push_screen(Detail.for_delivery(self.store, ident))

    def _state_store(self) -> Store:
        return self.timeline.at(self.as_of) if self.as_of is not None else self.store

    def action_conversation(self) -> None:
        from .screens import Conversation

        self.lab_action("open-conversation", {})
        self.push_screen(Conversation(self.store))

    def action_help(self) -> None:
        from .screens import Help

        self.push_screen(Help(RunScreen.BINDINGS))

    def on_unmount(self) -> None:
        if self.lab is not None:
            self.lab.close()
        self.timeline.cancelled = True
        for worker in self.workers:
            if worker.group == "time-travel":
                worker.cancel()
        self.timeline.close()
