"""The TUI's other screens: detail of a row, the conversation view, help, and small dialogs."""

from __future__ import annotations

import json

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Footer, Input, OptionList, RadioButton, RadioSet, Static

from ..envelope import FIELDS as ENVELOPE_FIELDS
from .. import digest as _digest
from ..errors import ProtolabError
from ..privacy import REDACTED
from ..store import Store
from .rows import DECISION_STYLE, STATE_STYLE, event_row


def _json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def _section(title: str) -> Text:
    return Text("\n" + title, style="bold underline")


# ---------------------------------------------------------------------------- detail


class Detail(Screen):
    """Everything behind one row: the envelope, its digest, its intent, its evidence, its events."""

    BINDINGS = [Binding("escape,q,enter", "app.pop_screen", "Back")]

    def __init__(self, title: str, body):
        super().__init__()
        self._title = title
        self._body = body

    def compose(self) -> ComposeResult:
        yield Static(self._title, id="detail-title")
        with VerticalScroll():
            yield Static(self._body, id="detail-body")
        yield Footer()

    @classmethod
    def for_delivery(cls, store: Store, delivery_id: int) -> "Detail":
        d = store.delivery(delivery_id)
        msg = store.message_at(d["msg_seq"])
        parts: list = []
        head = Text()
        head.append(f"delivery #{delivery_id} at tick {d['tick']}: ")
        head.append(d["decision"], DECISION_STYLE.get(d["decision"], ""))
        if d["code"]:
            head.append(f" {d['code']}", "red")
        head.append(f"\n{d['reason']}")
        if d["state_after"]:
            head.append(f"\ntask {d['task_id']} is {d['state_after']} v{d['state_version_after']} after it")
        parts.append(head)

        parts.append(_section("Envelope (as stored)"))
        envelope = {k: msg[k] for k in ENVELOPE_FIELDS}
        parts.append(Text(_json(envelope)))

        parts.append(_section("Digest"))
        line = Text(f"payload_digest {msg['payload_digest']}\nscheme {msg['digest_scheme']}\nrecomputed: ")
        hidden = [k for k, v in msg["payload"].items() if v == REDACTED]
        if hidden:
            line.append(f"not from the log: {', '.join(hidden)} kept as {REDACTED}; the digest is of what was sent, "
                        "and verifies against the original", "yellow")
        else:
            try:
                again = _digest.digest(msg["payload"], msg["digest_scheme"])
                ok = again == msg["payload_digest"]
            except ProtolabError as e:  # an unknown scheme
                again, ok = str(e), False
            line.append("matches" if ok else f"DIFFERS ({again})", "green" if ok else "bold red")
        line.append(f"\nenvelope digest {msg['envelope_digest']}")
        if msg.get("sender_seq") is not None:
            line.append(f"\nsender sequence {msg['sender_seq']} (generation {msg['sender_generation']})")
        parts.append(line)

        parts.append(_section("Deduplication intent"))
        intent = store.intent_of(msg["task_id"], msg["idempotency_key"], msg["payload_digest"], msg["digest_scheme"])
        if intent is None:
            parts.append(Text("no intent recorded for (task, key, digest, scheme): intake did not accept it as new", "dim"))
        else:
            t = Text(f"key {intent['idempotency_key']} first seen as {intent['message_id']} (arrival {intent['arrival']})\n"
                     f"decision {intent['decision']}, seen {intent['seen']} time(s), ")
            t.append("trusted" if intent["trusted"] else "UNTRUSTED (frozen for review)",
                     "green" if intent["trusted"] else "bold red")
            t.append(f"\nrecorded result {json.dumps(intent['result'], sort_keys=True)}")
            parts.append(t)
        others = [i for i in store.intents_for(msg["task_id"], msg["idempotency_key"]) if i.payload_digest != msg["payload_digest"]]
        for o in others:
            parts.append(Text(f"the same key with another payload: {o.message_id} {o.payload_digest[:23]}…", "bold magenta"))

        parts.append(_section("Evidence"))
        if not msg["evidence_refs"]:
            parts.append(Text("cites no evidence", "dim"))
        for ref in msg["evidence_refs"]:
            art = store.artifact(ref)
            if art is not None:
                t = Text(f"{ref}\n  artifact: {art['kind']}, {art['size']} bytes, stored at tick {art['first_tick']}\n")
                preview = _json(art["content"])
                lines = preview.splitlines()
                t.append("  " + "\n  ".join(lines[:12]) + ("\n  …" if len(lines) > 12 else ""), "dim")
                parts.append(t)
                continue
            cited = store.message_by_id(ref)
            if cited is not None:
                parts.append(Text(f"{ref}\n  message: {cited['type']} from {cited['sender']} on {cited['task_id']}"))
                continue
            parts.append(Text(f"{ref}\n  UNRESOLVED: no artifact or message by that name is stored", "bold red"))

        parts.append(_section("Events this delivery caused"))
        evs = store.events_of_delivery(delivery_id)
        if not evs:
            parts.append(Text("none", "dim"))
        for e in evs:
            parts.append(event_row(e))
        seen = store.deliveries_of(msg["message_id"])
        if len(seen) > 1:
            parts.append(_section(f"Every delivery of {msg['message_id']}"))
            for s in seen:
                t = Text(f"#{s['delivery_id']} tick {s['tick']}: ")
                t.append(s["decision"], DECISION_STYLE.get(s["decision"], ""))
                parts.append(t)
        return cls(f"{msg['message_id']} · {msg['type']} · {msg['sender']} → {msg['recipient']} · task {msg['task_id']}",
                   Group(*parts))

    @classmethod
    def for_event(cls, store: Store, seq: int) -> "Detail":
        e = store.event(seq)
        parts: list = [event_row(e), _section("Data"), Text(_json(e.data))]
        if e.delivery_id:
            d = store.delivery(e.delivery_id)
            parts += [_section("Caused by"), Text(f"delivery #{d['delivery_id']} of {d['message_id']} ({d['type']}): {d['decision']}")]
            parts += [_section("The other events of that delivery")]
            parts += [event_row(x) for x in store.events_of_delivery(e.delivery_id) if x.seq != seq]
        else:
            parts += [_section("Caused by"), Text("the runtime itself (no delivery): a lease monitor, a fault or a by-hand action")]
        return cls(f"event {seq} · {e.type} · tick {e.tick}", Group(*parts))

    @classmethod
    def for_task(cls, state: Store, log: Store, task_id: str) -> "Detail":
        t = next((x for x in state.tasks() if x["task_id"] == task_id), None)
        parts: list = []
        if t is None:
            return cls(f"task {task_id}", Text("not created yet at this point"))
        head = Text()
        head.append(f"{task_id}: ")
        head.append(t["state"], STATE_STYLE.get(t["state"], ""))
        head.append(f"  state_version {t['state_version']}  machine {t['machine_version']}\n"
                    f"goal: {t['goal']}\nassignee {t['assignee'] or '-'}, lease {t['lease_holder'] or '-'} v{t['lease_version']}\n"
                    f"budget {t['budget_left']} of {t['budget_total']} left; late results {t['late_results']}; "
                    f"rejected moves {t['rejected']}; result ")
        head.append("trusted" if t["trusted"] else "UNTRUSTED", "green" if t["trusted"] else "bold red")
        parts.append(head)
        if t["state"] == "needs_review":
            parts.append(Text("\nOne idempotency key arrived with two different payloads: the task is frozen until a "
                              "reviewer decides (press r on the main screen: ready or canceled, citing evidence).",
                              "bold magenta"))
        parts.append(_section("Transitions (compare-and-swap on state_version)"))
        for tr in state.transitions(task_id):
            parts.append(Text(f"v{tr['state_version'] - 1}→v{tr['state_version']}  {tr['old_state']} → {tr['new_state']}  "
                              f"by {tr['executor']} ({tr['role']})  {tr['reason']}"))
        parts.append(_section("Intents (idempotency key + payload digest)"))
        for i in state.intents_of_task(task_id):
            t2 = Text(f"{i['idempotency_key']}  {i['payload_digest'][:19]}…  {i['message_id']}  {i['decision']}  seen {i['seen']}  ")
            t2.append("trusted" if i["trusted"] else "untrusted", "green" if i["trusted"] else "bold red")
            parts.append(t2)
        approvals = [a for a in state.approvals() if a["task_id"] == task_id]  # a handful per run
        if approvals:
            parts.append(_section("Reviewer decisions"))
            for a in approvals:
                parts.append(Text(f"{a['decision']} by {a['reviewer']} citing {', '.join(a['evidence'])}"))
        effects = [e for e in state.effects() if e["task_id"] == task_id]
        if effects:
            parts.append(_section("Side effects committed"))
            for e in effects:
                parts.append(Text(f"{e['effect_key']} by {e['message_id']} at tick {e['tick']}", "green"))
        return cls(f"task {task_id}", Group(*parts))


# ---------------------------------------------------------------------------- conversation


class Conversation(Screen):
    """Per sender: its messages in sequence, the fence and the acks, validator errors in place."""

    BINDINGS = [Binding("escape,q,v", "app.pop_screen", "Back")]

    def __init__(self, store: Store):
        super().__init__()
        self.store = store

    def compose(self) -> ComposeResult:
        title, body = self.render_conversation(self.store, width=self.app.size.width - 4)
        yield Static(title, id="conv-title")
        with VerticalScroll():
            yield Static(body, id="conv-body")
        yield Footer()

    @staticmethod
    def render_conversation(store: Store, width: int = 100):
        """Every epoch of the conversation, oldest first (one unless a reviewer reopened it after a fence)."""
        from ..conversation import epoch_count

        n = epoch_count(store)
        if n == 1:
            return Conversation._render_epoch(store, None, width)
        parts: list = []
        title = ""
        for e in range(1, n + 1):
            t, body = Conversation._render_epoch(store, e, width)
            parts.append(_section(f"Epoch {e} of {n}" + (": reopened by a reviewer's decision after the fence, "
                                                          "a fresh participant snapshot" if e > 1 else "")))
            parts.append(body)
            title = t
        return title.replace(" · per sender", f" (epoch {n}) · {n} epochs · per sender"), Group(*parts)

    @staticmethod
    def _render_epoch(store: Store, epoch: int | None, width: int):
        from ..conversation import export_trace
        from ..protocol.diagram import text_sequence
        from ..protocol.trace import validate

        try:
            trace = export_trace(store, epoch)
        except ProtolabError as e:
            return "conversation", Text(f"{e.code}: {e}", "yellow")
        report = validate(trace)
        by_msg: dict[str | None, list] = {}
        for f in report.errors:
            by_msg.setdefault(f.message_id, []).append(f)
        accepted = set(report.accepted)
        fence_ids = {m["id"] for m in trace["messages"] if m.get("kind") == "FENCE"}
        senders: dict[str, list[dict]] = {}
        for m in trace["messages"]:
            senders.setdefault(f"{m['sender']} (generation {m.get('generation', 1)})", []).append(m)
        parts: list = []
        verdict = Text()
        verdict.append("valid" if report.valid else "INVALID", "bold green" if report.valid else "bold red")
        verdict.append(f"  terminal {report.terminal or '-'}: {report.reason}")
        parts.append(verdict)
        parts.append(_section("Sequence diagram (solid: requests and the fence; dashed: responses and acks)"))
        styles = {"head": "bold", "label": "", "arrow": "cyan", "fence": "bold cyan", "rejected": "bold red", "lane": "dim"}
        for line, kind in text_sequence(trace, report, width=width):
            parts.append(Text(line, styles[kind], no_wrap=True, overflow="crop"))
        parts.append(_section("Per sender, in sequence"))
        for sender, msgs in sorted(senders.items()):
            parts.append(Text("\n" + sender, style="bold"))
            for m in sorted(msgs, key=lambda m: m["seq"]):
                t = Text()
                mark = "✓" if m["id"] in accepted else "✗"
                t.append(f"  {mark} seq {m['seq']:>3}  ", "green" if m["id"] in accepted else "red")
                kind = m.get("kind", "")
                style = "bold cyan" if kind == "FENCE" else ("cyan" if kind == "ACK" else "")
                t.append(f"{m['id']:<7} {kind:<9}", style)
                t.append(f" → {', '.join(m.get('recipients', []))}")
                if kind == "ACK" and m.get("causedBy"):
                    t.append(f"  acknowledges {', '.join(m['causedBy'])}", "cyan")
                    if set(m["causedBy"]) & fence_ids:
                        t.append(" (the fence)", "bold cyan")
                if kind == "FENCE":
                    t.append("  ── terminal fence: nothing may follow ──", "bold cyan")
                parts.append(t)
                for f in by_msg.get(m["id"], []):
                    parts.append(Text(f"      ⚠ {f.code}: {f.message}", "bold red"))
        rest = by_msg.get(None, [])
        if rest:
            parts.append(_section("Whole-conversation findings"))
            for f in rest:
                parts.append(Text(f"  ⚠ {f.code}: {f.message}", "bold red"))
        if report.gathers:
            parts.append(_section("Gathers"))
            for gid, g in sorted(report.gathers.items()):
                parts.append(Text(f"  {gid}: {g.rule} → {g.status}" + (f", missing {', '.join(g.missing)}" if g.missing else "")))
        term = trace.get("terminal") or {}
        if term:
            parts.append(_section("Terminal"))
            parts.append(Text(f"  {term.get('state')} fenced by {term.get('fence')}; acks required from "
                              f"{', '.join(term.get('requiredAcks', [])) or 'nobody'}"))
        title = (f"conversation {trace.get('conversationId', '')} · protocol {trace.get('protocol', '')} · "
                 f"{len(trace['messages'])} messages · per sender (escape: back)")
        return title, Group(*parts)


# ---------------------------------------------------------------------------- help


class Help(Screen):
    BINDINGS = [Binding("escape,q,question_mark", "app.pop_screen", "Back")]

    def __init__(self, bindings, *, notes: str | None = None):
        super().__init__()
        self.keys = bindings
        self.notes = notes  # what the screen shows, in place of the run screen's panes

    def compose(self) -> ComposeResult:
        t = Text()
        t.append("protolab: keys\n\n", "bold")
        if self.notes is not None:
            for b in self.keys:
                key = b.key_display or b.key.split(",")[0]
                t.append(f"  {key:<8}", "bold cyan")
                t.append(f"{b.description}" + (f" — {b.tooltip}" if b.tooltip else "") + "\n")
            t.append("  ctrl+p  ", "bold cyan")
            t.append("Command palette: every action above, by name\n\n")
            t.append(self.notes)
            with VerticalScroll():
                yield Static(t)
            yield Footer()
            return
        for b in self.keys:
            key = b.key_display or b.key.split(",")[0]
            t.append(f"  {key:<8}", "bold cyan")
            t.append(f"{b.description}")
            if b.tooltip:
                t.append(f" — {b.tooltip}", "dim")
            t.append("\n")
        t.append("  enter   ", "bold cyan")
        t.append("Open the detail of the selected row\n")
        t.append("  tab     ", "bold cyan")
        t.append("Move between the State, Events and Messages panes\n")
        t.append("  ctrl+p  ", "bold cyan")
        t.append("Command palette: every action above, by name\n\n")
        t.append("What the panes mean\n", "bold")
        t.append(
            "  State     authoritative task state: only folding events writes it, every move is a compare-and-swap\n"
            "            on state_version; needs_review (frozen: one key, two payloads) stands out.\n"
            "  Events    the append-only log; state is exactly its fold (time travel rebuilds state from it).\n"
            "  Messages  every envelope delivery and intake's decision: accepted, duplicate, conflict, late, rejected.\n"
            "            A message is something said, not something true.\n"
        )
        with VerticalScroll():
            yield Static(t)
        yield Footer()


# ---------------------------------------------------------------------------- dialogs


class _Dialog(ModalScreen):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def action_cancel(self) -> None:
        self.dismiss(None)


class AskFilter(_Dialog):
    def __init__(self, current: str = ""):
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Filter by task id (T-1) or trace id (R-1); empty shows everything.")
            yield Input(value=self.current, placeholder="T-1 or R-1", id="filter-input")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)


class ChooseWorker(_Dialog):
    def __init__(self, workers: list[str], first: str | None = None):
        super().__init__()
        self.names = workers
        self.first = first

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Crash which worker? It dies holding its lease; a restarted body takes over once the lease expires.")
            yield OptionList(*self.names, id="workers")

    def on_mount(self) -> None:
        ol = self.query_one(OptionList)
        if self.first in self.names:
            ol.highlighted = self.names.index(self.first)
        ol.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.names[event.option_index])


class Reconcile(_Dialog):
    """The reviewer's decision on a needs_review task: ready or canceled, citing evidence."""

    def __init__(self, task_id: str, evidence: list[str], read_version: int | None = None, *, late: str | None = None,
                 effects: list[str] | None = None):
        super().__init__()
        self.task_id = task_id
        self.evidence = evidence
        self.read_version = read_version
        self.late = late  # an open reconciliation of a finished task: the late message it is about
        self.effects = effects or []

    def compose(self) -> ComposeResult:
        with Vertical():
            if self.read_version is not None:
                yield Static(f"You are deciding from an earlier read of {self.task_id} (state_version "
                             f"{self.read_version}); it has moved on since.", classes="error")
            keys = "↑/↓ and enter choose; tab moves to the evidence; enter there decides; escape cancels."
            if self.late is not None:
                yield Static(Text(f"{self.task_id} is finished, and the late {self.late} touches "
                                  f"{', '.join(self.effects)}. Reconcile it as the reviewer.\n{keys}"))
                with RadioSet(id="decision"):
                    yield RadioButton("keep: the effect stands", value=True, id="keep")
                    yield RadioButton("retract: record a compensating effect", id="retract")
            else:
                yield Static(Text(f"Reconcile {self.task_id} (needs_review) as the reviewer.\n{keys}"))
                with RadioSet(id="decision"):
                    yield RadioButton("ready: run it again", value=True, id="ready")
                    yield RadioButton("canceled: stop it", id="canceled")
            yield Static("Evidence (message ids or artifact refs, comma-separated):")
            yield Input(value=", ".join(self.evidence), id="evidence")
            yield Static("", id="reconcile-error", classes="error")
            with Horizontal():
                yield Button("Decide", variant="primary", id="decide")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one(RadioSet).focus()

    def _decision(self) -> str:
        pressed = self.query_one(RadioSet).pressed_button
        return pressed.id if pressed is not None else ("keep" if self.late is not None else "ready")

    def _submit(self) -> None:
        refs = [r.strip() for r in self.query_one("#evidence", Input).value.split(",") if r.strip()]
        if not refs:
            self.query_one("#reconcile-error", Static).update("cite at least one piece of evidence")
            return
        self.dismiss((self._decision(), refs))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "decide":
            self._submit()
        else:
            self.dismiss(None)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._submit()
