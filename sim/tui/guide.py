"""Labs in the TUI: the Guide panel beside State, Events and Messages, the question dialog,
and the lab menu (``protolab lab``).

The Guide shows the lab's steps in order with their checkpoints; it is refreshed after every
delivery, injection, reconcile and time-travel move (the app calls :meth:`Guide.show` from
``reload``), so a checkpoint ticks the moment the run meets it.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Input, OptionList, Static

from ..labs.session import LabSession

__all__ = ["Guide", "AskQuestion", "LabMenu", "LabHost", "progress_bar"]


class LabHost:
    """What an app playing a lab does (the run screen and the workshop alike): re-check after every
    action and tick the Guide, record the learner's actions, and the h (hint) and a (answer) keys.
    The app sets ``lab`` (a LabSession, or None) and ``guide`` (its Guide, or None)."""

    lab = None
    guide = None

    def lab_refresh(self, newly=()) -> None:
        """Re-check the lab; say which checkpoints this action met; redraw the Guide."""
        if self.lab is None:
            return
        newly = list(newly) + self.lab.refresh()
        self._lab_met(newly)
        self.guide.show()

    def _lab_met(self, newly) -> None:
        """Say which checkpoints an action met (a notice placed away from the Guide); what a met
        checkpoint's run showed goes into the Guide itself."""
        if not newly:
            return
        self.guide.hint_text = ""
        states = {s.id: s for s in self.lab.states}
        self.guide.news = [f"{states[c].checkpoint.title}: {self.lab.shows(states[c])}" for c in newly
                           if c in states and self.lab.shows(states[c])]
        titles = ", ".join(self.lab.lab.checkpoint(c).title for c in newly)
        self.notify(f"✓ {titles}", title="checkpoint met", timeout=4)

    def lab_action(self, kind: str, data: dict) -> None:
        if self.lab is not None:
            self._lab_met(self.lab.action(kind, data))
            self.guide.show()

    def check_action(self, action: str, parameters) -> bool | None:
        if action in ("lab_hint", "lab_answer") and self.lab is None:
            return False  # no lab: the keys are not shown
        return True

    def action_lab_hint(self) -> None:
        self.lab.refresh(force=True)
        self.guide.hint_text = self.lab.hint()
        self.guide.show()

    def action_lab_answer(self) -> None:
        def done(result) -> None:
            if result is not None:
                self.notify(result[1], title="right", timeout=6)
            self.guide.show()

        self.push_screen(AskQuestion(self.lab), done)


def progress_bar(done: int, total: int, width: int = 10) -> str:
    filled = 0 if total == 0 else round(width * done / total)
    return "▰" * filled + "▱" * (width - filled)


class Guide(VerticalScroll):
    """The lab's steps, the checkpoints of each, and the hint when asked for."""

    def __init__(self, session: LabSession):
        super().__init__(id="guide")
        self.session = session
        self.border_title = f"Guide · lab {session.lab.number}"
        self.hint_text = ""
        self.news: list[str] = []  # what the checkpoints just met showed (their lab.toml 'shows'), until the next
        self.compact = False  # a short terminal: the current step only (whole), its next checkpoint, the hint
        self.body = Static(id="guide-body")
        self.settled = True  # the current step is in view (False while a new text waits for its scroll)

    def compose(self) -> ComposeResult:
        yield self.body

    def show(self) -> None:
        if self.compact:
            self._show_compact()
            self.settled = True  # shown whole, nothing to scroll
            return
        s = self.session
        lab = s.lab
        met = {st.id for st in s.states if st.met}
        states = {st.id: st for st in s.states}
        cur = s.current_step()
        t = Text()
        t.append(f"{lab.title}\n", style="bold")
        t.append(f"{progress_bar(s.done, s.total)} {s.done}/{s.total} checkpoints\n\n")
        span = None  # where the current step starts and ends in the text: kept in view
        for i, step in enumerate(lab.steps):
            done = all(c.id in met for c in step.checkpoints)
            mark = "✓" if done else ("▶" if i == cur else "·")
            start = len(t)
            t.append(f"{mark} {i + 1}. {step.title}\n", style="bold green" if done else ("bold" if i == cur else "dim"))
            if i == cur:
                t.append(f"{step.text}\n", style="")
            if i <= cur:
                for c in step.checkpoints:
                    ok = c.id in met
                    t.append(f"   {'✓' if ok else '○'} {c.title}\n", style="green" if ok else "")
                    shown = s.shows(states[c.id]) if ok and c.id in states else ""
                    if shown:
                        t.append(f"     ↳ {shown}\n", style="green")
            if i == cur:
                if self.hint_text:  # the hint beside the step it is for
                    t.append(f"Hint: {self.hint_text}\n", style="italic yellow")
                span = (start, len(t))
        right = s.right()
        if lab.questions:
            t.append(f"\nQuestions {right}/{len(lab.questions)} (a: answer)\n", style="bold")
        if self.hint_text and span is None:
            t.append(f"\nHint: {self.hint_text}\n", style="italic yellow")
        elif s.done == s.total and right == len(lab.questions):
            t.append("\nLab complete. protolab lab submit "
                     f"{lab.number} -o lab{lab.number}.protolab packs it for your instructor.\n", style="bold green")
        elif not self.hint_text:
            t.append("\nh: a hint for the next checkpoint\n", style="dim")
        self.body.update(t)
        self._span = span
        self.settled = False  # True once the current step is in view (tests and the app can wait on it)
        self.call_after_refresh(self._keep_current_in_view, t)

    def _lines(self, text: Text) -> int:
        width = max(1, self.scrollable_content_region.width)
        return len(text.wrap(self.app.console, width))

    def current_lines(self) -> tuple[int, int] | None:
        """(first line, lines) of the current step in the Guide as drawn (None: every step is done)."""
        span = getattr(self, "_span", None)
        text = self.body.content if isinstance(self.body.content, Text) else None
        if span is None or text is None:
            return None
        first = self._lines(text[: span[0]]) if span[0] else 0
        block = text[span[0]: span[1]]
        block.rstrip()
        return first, self._lines(block)

    def _keep_current_in_view(self, text: Text, tries: int = 0) -> None:
        """A long Guide scrolls so that the current step (with its hint) is in view, whole when it fits.
        Until the layout has grown to hold the new text, the scroll would be cut short: then it is
        tried again after the next refresh (a few times), and ``settled`` says when it is done."""
        where = self.current_lines()
        if self.body.content is not text:
            return  # a newer text is on its way; its own call settles it
        if where is None:
            self.settled = True
            return
        first, n = where
        view = self.scrollable_content_region.height
        target = max(0, first if n >= view else first + n - view)
        if first < self.scroll_y or first + n > self.scroll_y + view:
            if target > self.max_scroll_y and tries < 5:
                self.call_after_refresh(self._keep_current_in_view, text, tries + 1)
                return
            self.scroll_to(y=target, animate=False, immediate=True)  # now, so that settled is true
        self.settled = True

    def _show_compact(self) -> None:
        """A short terminal: progress, what the checkpoints just met showed, the current step whole,
        its next checkpoint, and the hint when asked for (the Guide grows to hold them)."""
        s = self.session
        lab = s.lab
        cur = s.current_step()
        right = s.right()
        t = Text()
        t.append(f"{progress_bar(s.done, s.total, 6)} {s.done}/{s.total} · questions {right}/{len(lab.questions)} (a) · hint (h)\n",
                 style="bold")
        for line in self.news:
            t.append(f"✓ {line}\n", style="green")
        if cur < len(lab.steps):
            step = lab.steps[cur]
            t.append(f"▶ {cur + 1}/{len(lab.steps)} {step.title}: ", style="bold")
            t.append(f"{step.text}\n")
            nxt = s.first_unmet()
            if nxt is not None and not self.hint_text:  # the hint starts with its title
                t.append(f"○ {nxt.checkpoint.title}\n")
        else:
            t.append("Every checkpoint is met." + (" Answer the questions (a)." if right < len(lab.questions) else
                                                   f" Lab complete: protolab lab submit {lab.number}") + "\n",
                     style="bold green")
        if self.hint_text:
            t.append(f"Hint: {self.hint_text}\n", style="italic yellow")
        t.rstrip()
        self.body.update(t)
        self.scroll_home(animate=False)


class AskQuestion(ModalScreen):
    """One of the lab's questions: a choice or an exact value, with feedback on a wrong answer."""

    BINDINGS = [Binding("escape", "close", "Close")]

    def __init__(self, session: LabSession):
        super().__init__()
        self.session = session
        self.questions = [q for q in session.lab.questions if not session.answered(q)]
        self.q = self.questions[0] if self.questions else None

    def compose(self) -> ComposeResult:
        with Vertical():
            if self.q is None:
                yield Static("Every question of this lab is answered. (escape closes)")
                return
            n = len(self.session.lab.questions) - len(self.questions) + 1
            yield Static(Text(f"Question {n} of {len(self.session.lab.questions)}: {self.q.text}"))
            if self.q.kind == "choice":
                yield OptionList(*self.q.choices, id="choices")
            else:
                yield Static("Type the exact value (a message id, a table name, a code) and press enter:")
                yield Input(placeholder="answer", id="value")
            yield Static("", classes="feedback", id="feedback")

    def on_mount(self) -> None:
        if self.q is None:
            return
        if self.q.kind == "choice":
            self.query_one(OptionList).focus()
        else:
            self.query_one(Input).focus()

    def _check(self, given: str) -> None:
        ok, feedback = self.session.answer(self.q.id, given)
        fb = self.query_one("#feedback", Static)
        if ok:
            self.dismiss((True, feedback))
        else:
            fb.update(Text(f"✗ {feedback}"))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self._check(self.q.choices[event.option_index])

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self._check(event.value)

    def action_close(self) -> None:
        self.dismiss(None)


class LabMenu(App):
    """``protolab lab``: every lab with its progress; enter starts the highlighted one."""

    CSS_PATH = ["protolab.tcss", "labmenu.tcss"]
    BINDINGS = [Binding("enter", "start", "Start"), Binding("q", "quit", "Quit")]

    def __init__(self, rows: list[dict]):
        super().__init__()
        self.rows = rows
        self.chosen: int | None = None

    def compose(self) -> ComposeResult:
        yield Static("protolab labs: ↑/↓ choose, enter starts the lab in the TUI, q quits.", id="menu-title")
        yield DataTable(cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.title = "protolab labs"
        table = self.query_one(DataTable)
        table.add_columns("#", "lab", "min", "checkpoints", "progress")
        for r in self.rows:
            table.add_row(str(r["number"]), r["title"], str(r["minutes"]), f"{r['done']}/{r['checkpoints']}",
                          progress_bar(r["done"], r["checkpoints"]), key=str(r["number"]))
        table.focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.chosen = int(event.row_key.value)
        self.exit(self.chosen)

    def action_start(self) -> None:
        table = self.query_one(DataTable)
        if self.rows:
            self.chosen = self.rows[table.cursor_row]["number"]
            self.exit(self.chosen)
