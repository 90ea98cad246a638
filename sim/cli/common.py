"""The ``protolab`` command line (Typer).

Bad input never produces a traceback: every :class:`~sim.errors.ProtolabError` and every
usage error becomes one line ``error: CODE: message`` on stderr and exit status 2, and
nothing is written. Heavy modules (the store, Textual) are imported inside the commands
that need them so that ``protolab --help`` stays fast.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import List, Optional

import typer

from .errors import InputError, ProtolabError

__all__ = ["app", "main"]

app = typer.Typer(
    name="protolab",
    help=(
        "protolab: a lab kit for agent message protocols and shared state.\n\n"
        "Start with 'protolab demo' (the terminal UI: a run, stepped, with faults injected live), "
        "'protolab demo regression' (naive beside safe), 'protolab run' (a simulated run, then 'check' "
        "and 'replay') or 'protolab tour' (hand-delivery, step by step). "
        "Messages, events and state are kept apart: look at each with 'messages', 'events' and 'state'."
    ),
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("protolab")
        except PackageNotFoundError:  # a checkout that was never installed
            v = "0.1.0 (not installed)"
        typer.echo(f"protolab {v}")
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                       help="Print protolab's version and exit.")) -> None:
    """protolab: a lab kit for agent message protocols and shared state."""
machine_app = typer.Typer(help="Task state machines: show, check and load versions.", no_args_is_help=True)
artifact_app = typer.Typer(help="Content-addressed artifacts (fact tables, drafts): put and show.", no_args_is_help=True)
bench_app = typer.Typer(help="Benchmarks: the project's figure beside a bare-sqlite3 floor measured in the same run.", no_args_is_help=True)
app.add_typer(machine_app, name="machine")
app.add_typer(artifact_app, name="artifact")
trace_app = typer.Typer(help="Conversation traces (conversation-trace-v2): validate, export, replay, mutate, diagram.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")
exercise_app = typer.Typer(help="Graded exercises: list, start (copy the starter), check (public tests), hint.",
                           no_args_is_help=True)
app.add_typer(exercise_app, name="exercise")
app.add_typer(trace_app, name="trace")

DB_OPT = typer.Option("protolab.db", "--db", help="The protolab database file.")
JSON_OPT = typer.Option(False, "--json", help="Print JSON instead of tables.")
COURSE_OPT = typer.Option(None, "--course", metavar="DIR", help="(Instructors) the course: your protolab checkout, "
                          "the folder holding pyproject.toml, exercises/ and solutions/ (default: the current folder "
                          "or its parents).")


def _console():
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich mutes stdout and exits 1; a closed pipe (`protolab run | head -1`) is the reader
            # having had enough: main() ends quietly with 0, as `events | head` does
            super_ = super()
            try:
                super_.on_broken_pipe()
            except SystemExit:
                raise BrokenPipeError from None

    return _Console(highlight=False, soft_wrap=False, emoji=False)


def _print_json(value) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def _print_json_rows(rows) -> None:
    """A JSON array written row by row as ``rows`` yields them: the bytes ``_print_json(list(rows))``
    would write, in flat memory (a run's log can hold millions of rows)."""
    out = sys.stdout.write
    first = True
    for r in rows:
        body = json.dumps(r, indent=2, ensure_ascii=False).replace("\n", "\n  ")
        out(("[\n  " if first else ",\n  ") + body)
        first = False
    out("[]\n" if first else "\n]\n")


#: A view with more rows than this is streamed as plain aligned text instead of drawn as one table
#: (a table measures every row before it prints the first; a big run's log has millions).
TABLE_ROWS = 2000


def _show(con, title: str, columns: list[str], rows: list[list], **kw) -> None:
    """One view's table: drawn when it is short, streamed as plain columns when it is long."""
    if len(rows) > TABLE_ROWS:
        sys.stdout.flush()
        _stream_table(f"{title} ({len(rows)})", columns, rows, sample=len(rows))  # in hand: measure them all
        if kw.get("caption"):
            sys.stdout.write(kw["caption"] + "\n")
        sys.stdout.write("\n")
    else:
        con.print(_table(title, columns, rows, **kw))


def _stream_table(title: str, columns: list[str], rows, widths: dict[str, int] | None = None, sample: int = 200) -> None:
    """Rows printed as they are read, in columns as wide as the first rows need or ``widths`` says
    (a wider value pushes its line out rather than being cut: nothing is hidden)."""
    from itertools import chain, islice

    from rich.text import Text

    def plain(v) -> str:
        if v is None:
            return ""
        try:
            return Text.from_markup(str(v)).plain.replace("\n", " ")
        except Exception:
            return str(v).replace("\n", " ")

    rows = iter(rows)
    head = [[plain(v) for v in r] for r in islice(rows, sample)]
    widths = [max([len(c), (widths or {}).get(c, 0)] + [len(r[i]) for r in head]) for i, c in enumerate(columns)]
    widths[-1] = 0  # the last column is never padded

    def line(cells) -> str:
        return " ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip() + "\n"

    out = sys.stdout.write
    out(f"{title}\n")
    out(line(columns))
    out(" ".join("-" * max(w, len(c)) for c, w in zip(columns, widths)) + "\n")
    for r in chain(head, ([plain(v) for v in r] for r in rows)):
        out(line(r))


def _resolve(path: Path) -> Path:
    """A relative path that does not exist here but names a shipped file (data/..., labs/...)
    resolves to the copy inside the installed package, so samples work from any folder."""
    if path.is_absolute() or path.exists() or not path.parts or path.parts[0] not in ("data", "labs", "exercises"):
        return path
    from .resources import shipped

    candidate = shipped(*path.parts)
    return candidate if candidate.exists() else path


def _read_file(path: Path, what: str) -> bytes:
    if str(path) == "-":
        return sys.stdin.buffer.read()
    path = _resolve(path)
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{what} {path} does not exist", code="E_FILE_MISSING") from None
    except IsADirectoryError:
        raise InputError(f"{what} {path} is a folder, not a file", code="E_FILE_MISSING") from None
    except OSError as e:
        raise InputError(f"cannot read {what} {path}: {e.strerror}", code="E_FILE_MISSING") from None


def _open(db: Path, *, readonly: bool = False):
    """Open --db: read-only (no side files; works in a read-only folder) for commands that only read.
    A writer never writes into a lab's simulator run: that run is what its journal replays, and 'lab
    verify' would judge another run (a hand-delivery lab's run is delivered into by hand: allowed)."""
    from .store import Store

    store = Store.open(db, readonly=readonly)
    if not readonly:
        from .labs.resume import JOURNAL_KEY, LAB_KEY

        lab = store.get_meta(LAB_KEY)
        if lab is not None and store.get_meta(JOURNAL_KEY) is not None:
            store.close()
            raise InputError(f"{db} holds your run of lab {lab}, which only the lab writes (what you do there is "
                             f"journaled, and 'lab verify' replays the journal): play it in 'protolab lab start {lab}',"
                             " or write into another --db", code="E_DB_LAB_RUN")
    return store


from .palette import DECISION_STYLE as _DECISION_STYLE  # noqa: E402  (the colours live once)
from .palette import STATE_STYLE as _STATE_STYLE  # noqa: E402


def _styled(text, styles) -> str:
    if text is None:
        return ""
    style = styles.get(str(text))
    return f"[{style}]{text}[/]" if style else str(text)


def _short(digest: str | None, hexchars: int = 8) -> str:
    """``sha256:6e1bdb2d…``: enough to tell digests apart on screen; --json has them whole."""
    if not digest:
        return ""
    keep = len("sha256:") + hexchars if digest.startswith("sha256:") else hexchars
    return digest[:keep] + "…" if len(digest) > keep + 1 else digest


def _digest_cell(digest: str, scheme: str) -> str:
    return _short(digest) + (" (jcs)" if scheme == "jcs-v2" else "")


def _plain(text: str):
    """``text`` as a table cell shown exactly (brackets and all, never read as markup)."""
    from rich.text import Text

    return Text(text)


def _table(title: str, columns: list[str], rows: list[list], *, caption: str | None = None,
           optional: tuple[str, ...] = ()):
    """A plain table for the views. ``optional`` names columns, least important first, that are left
    out (and said so under the table) when the table would not fit the terminal or pipe width."""
    from rich import box
    from rich.measure import Measurement
    from rich.table import Table
    from rich.text import Text

    if optional:
        con = _console()
        t = _table(title, columns, rows, caption=caption)
        hidden: list[str] = []
        for name in optional:
            if Measurement.get(con, con.options.update_width(10_000), t).maximum <= con.width or name not in columns:
                break
            i = columns.index(name)
            columns = columns[:i] + columns[i + 1:]
            rows = [r[:i] + r[i + 1:] for r in rows]
            hidden.append(name)
            t = _table(title, columns, rows, caption=caption)
        if hidden:
            note = f"(narrow terminal: {', '.join(hidden)} not shown; --json has everything)"
            caption = f"{caption}\n{note}" if caption else note

    t = Table(
        title=title, title_justify="left", title_style="bold", caption=caption, caption_justify="left",
        box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1),
    )
    def plain(v) -> str:
        if isinstance(v, Text):
            return v.plain
        try:
            return Text.from_markup(str(v)).plain
        except Exception:  # not markup after all: as written
            return str(v)

    def widest(i: int) -> int:
        return max([len(columns[i])] + [max((len(x) for x in plain(r[i]).split("\n")), default=0)
                                         for r in rows if i < len(r) and r[i] is not None])

    def longest_word(i: int) -> int:
        return max([len(w) for r in rows if i < len(r) and r[i] is not None for w in plain(r[i]).split()]
                   + [len(w) for w in columns[i].split()] + [1])

    # a wrapping column keeps its longest word whole whenever the table can afford it
    n = len(columns)
    shorts = [i for i in range(n) if widest(i) <= 18]
    con = _console()
    width = con.width
    probe = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    for _ in range(n):
        probe.add_column(width=1)
    overhead = Measurement.get(con, con.options.update_width(10_000), probe).maximum - n  # edges, gaps, padding
    floor = sum(widest(i) for i in shorts) + sum(longest_word(i) for i in range(n) if i not in shorts) + overhead
    fixed: dict[int, int] = {}
    natural = sum(widest(i) for i in range(n)) + overhead
    if floor <= width < natural:
        # too wide as it is: each wrapping column gets its longest word, then a share of what is left
        # in proportion to what it still lacks; Rich's own squeeze would cut words to fit
        wrap = [i for i in range(n) if i not in shorts]
        fixed = {i: longest_word(i) for i in wrap}
        spare = width - floor
        lack = {i: widest(i) - fixed[i] for i in wrap}
        total = sum(lack.values()) or 1
        for i in wrap:
            fixed[i] += min(lack[i], spare * lack[i] // total)
    for i, c in enumerate(columns):
        # Short columns (ids, codes, states) never wrap; a long one (free text, a list of roles, a key)
        # wraps at word boundaries, in the width worked out above when the table is too wide.
        short = widest(i) <= 18
        t.add_column(c, no_wrap=short, overflow="ellipsis" if short else "fold", width=fixed.get(i))
    for r in rows:
        # a Text cell is shown as it is (no markup: "[redacted]" stays); a str cell may carry markup
        t.add_row(*["" if v is None else v if isinstance(v, Text) else str(v) for v in r])
    return t


# ---------------------------------------------------------------------------- init


@app.command()
def init(
    db: Path = DB_OPT,
    machine: Optional[Path] = typer.Option(None, "--machine", help="Start with this machine file instead of task-v1."),
    start_time: str = typer.Option("2026-07-13T04:00:00Z", "--start-time", help="Logical time zero (UTC)."),
):
    """Create an empty protolab database with the task state machine loaded."""
    from .machine import load_rulebook
    from .runner import refuse_lab_run
    from .store import Store

    refuse_lab_run(db)
    rb = load_rulebook(_resolve(machine)) if machine else None
    store = Store.create(db, start_time=start_time, rulebook=rb)
    version = store.current_machine
    store.close()
    typer.echo(f"created {db} (schema 1, machine {version}, time zero {start_time})")


# ---------------------------------------------------------------------------- tour


def _outcome_rows(outcomes) -> list[list]:
    return [
        [
            o.delivery_id, o.message_id, o.type, o.task_id, _styled(o.decision, _DECISION_STYLE),
            f"{_styled(o.state, _STATE_STYLE)} v{o.state_version}" if o.state else "-",
            f"{o.code}: {o.reason}" if o.code else o.reason,
        ]
        for o in outcomes
    ]


_OUTCOME_COLS = ["#", "message", "type", "task", "decision", "state", "why"]


@app.command()
def tour(db: Path = typer.Option("tour.db", "--db", help="Where to write the tour (replaced if it is a protolab database)."),
         no_pause: bool = typer.Option(False, "--no-pause", help="Print every step at once (piped output never pauses).")):
    """A guided hand-delivery: the default story and each fault, delivered one step at a time."""
    from .runtime import deliver as _deliver, put_artifact, review
    from .samples import FACTS, demo_steps, draft
    from .store import Store, remove_database

    if db.exists():
        from .runner import refuse_lab_run

        refuse_lab_run(db)
        Store.open(db).close()  # refuses a file that is not a protolab database
        remove_database(db)
    con = _console()
    store = Store.create(db)
    try:
        fr = put_artifact(store, FACTS, kind="fact-table", task_id="T-1")
        dr = put_artifact(store, draft(), kind="draft", task_id="T-2")
        con.print(f"[bold]protolab tour[/] -> {db}\nartifacts stored first: fact table {_short(fr)}, draft {_short(dr)}\n")
        steps = list(demo_steps())
        pause = _interactive() and not no_pause
        for i, (title, envs) in enumerate(steps, 1):
            outcomes = [_deliver(store, e) for e in envs]
            con.print(_table(f"step {i} of {len(steps)}: {title}", _OUTCOME_COLS, _outcome_rows(outcomes)))
            if pause:  # in a terminal, one step at a time; piped, it prints through
                try:
                    input("enter: the next step (ctrl+c ends the tour; what was delivered stays in the file) ")
                except EOFError:
                    pause = False
        o = review(store, "T-1", "ready", by="reviewer", evidence=["M-3", "M-8"], note="two fact tables under one key; rerun")
        con.print(_table("reconcile: the reviewer releases T-1 from retained evidence (M-3, M-8)", _OUTCOME_COLS, _outcome_rows([o])))
        tasks = store.tasks()
        effects = store.effects()
        digest_ = store.state_digest()
        counts = store.counts()
    finally:
        store.close()
    con.print(
        _table(
            "state now",
            ["task", "state", "ver", "trusted", "late", "rejected"],
            [[t["task_id"], _styled(t["state"], _STATE_STYLE), t["state_version"], "yes" if t["trusted"] else "NO",
              t["late_results"], t["rejected"]] for t in tasks],
            caption=f"effects committed: {', '.join(e['effect_key'] for e in effects) or 'none'} (once, though M-6 arrived twice)",
        )
    )
    con.print(
        f"{counts['messages']} messages, {counts['deliveries']} deliveries, {counts['events']} events; state digest {digest_}\n"
        f"Look at each kind of data on its own:\n"
        f"  protolab messages --db {db}\n  protolab events --db {db}\n  protolab state --db {db}",
        soft_wrap=True,
    )


# ---------------------------------------------------------------------------- deliver


@app.command()
def deliver(
    file: Path = typer.Argument(..., help="A JSON file holding one envelope or an array delivered in order ('-' for stdin)."),
    db: Path = DB_OPT,
    as_json: bool = JSON_OPT,
):
    """Deliver envelopes through intake, one transaction each; print each decision."""
    from .envelope import parse_envelopes
    from .runtime import deliver as _deliver

    envelopes = parse_envelopes(_read_file(file, "envelope file"), source=str(file))
    outcomes = []
    try:
        with _open(db) as store:
            for env in envelopes:
                with _signals_deferred():  # a signal lands between deliveries, so the count below is exact
                    outcomes.append(_deliver(store, env))
    except KeyboardInterrupt as e:  # each delivery is its own transaction, and each made stays
        _interrupted(e, f"interrupted by {{sig}} after {len(outcomes)} of {len(envelopes)} deliveries into {db} "
                        f"(each made stays); deliver the file again to finish: what landed comes back as duplicates")
    if as_json:
        _print_json([o.to_dict() for o in outcomes])
        return
    _console().print(
        _table(f"{len(outcomes)} deliver{'y' if len(outcomes) == 1 else 'ies'} into {db}", _OUTCOME_COLS, _outcome_rows(outcomes))
    )


# ---------------------------------------------------------------------------- views


@app.command()
def messages(db: Path = DB_OPT, as_json: bool = JSON_OPT, task: Optional[str] = typer.Option(None, help="Only this task."),
             payloads: bool = typer.Option(False, "--payloads", help="Print each envelope's payload as the log keeps it "
                                           "(sensitive values the run declared show [redacted] under the safe policy).")):
    """The message log: every envelope, and every delivery with its decision."""
    with _open(db, readonly=True) as store:
        msgs, dels = store.messages(), store.deliveries()
    if task:
        msgs = [m for m in msgs if m["task_id"] == task]
        dels = [d for d in dels if d["task_id"] == task]
    if as_json:
        _print_json({"messages": msgs, "deliveries": dels})
        return
    con = _console()
    con.print(
        _table(
            "Messages (envelopes, one row per message_id)",
            ["message", "type", "from → to", "task", "ev", "idempotency_key / payload_digest"],
            [
                [m["message_id"], m["type"], f"{m['sender']} → {m['recipient']}", m["task_id"], len(m["evidence_refs"]),
                 f"{m['idempotency_key']}\n{_digest_cell(m['payload_digest'], m['digest_scheme'])}"]
                for m in msgs
            ],
            caption="ev: evidence_refs cited; digests are json-sorted-v1 unless marked (jcs) for jcs-v2; --json has everything",
        )
    )
    if payloads:
        con.print("[bold]Payloads (as the log keeps them)[/]")
        for m in msgs:
            con.print(f"  {m['message_id']} {m['type']} to {m['recipient']}: "
                      f"{json.dumps(m['payload'], sort_keys=True, ensure_ascii=False)}", markup=False, soft_wrap=True)
    con.print(
        _table(
            "Deliveries (one row per attempt)",
            ["#", "tick", "message", "task", "decision", "state after", "code"],
            [
                [d["delivery_id"], d["tick"], d["message_id"], d["task_id"], _styled(d["decision"], _DECISION_STYLE),
                 f"{_styled(d['state_after'], _STATE_STYLE)} v{d['state_version_after']}" if d["state_after"] else "-",
                 d["code"] or ""]
                for d in dels
            ],
        )
    )


def _event_summary(e: dict) -> str:
    from .events import summarize

    return summarize(e["type"], e["data"])


@app.command()
def events(
    db: Path = DB_OPT,
    as_json: bool = JSON_OPT,
    task: Optional[str] = typer.Option(None, help="Only this task."),
    type_: Optional[str] = typer.Option(None, "--type", help="Only this event type."),
):
    """The event log: append-only facts, numbered, written only by the runtime."""
    from .store import EVENT_TYPES

    if type_ is not None and type_ not in EVENT_TYPES:
        from .errors import friendly_list

        raise InputError(f"unknown event type {type_!r}; expected one of: {friendly_list(EVENT_TYPES)}", code="E_UNKNOWN_VALUE")
    with _open(db, readonly=True) as store:
        evs = store.iter_events(task_id=task, etype=type_)
        if as_json:
            _print_json_rows(evs)
            return
        n = store.count_events(task_id=task, etype=type_)
        columns = ["seq", "time", "event", "task", "msg", "what"]
        rows = ([e["seq"], e["created_at"][11:19], e["type"], e["task_id"], e["message_id"], _event_summary(e)] for e in evs)
        if n > TABLE_ROWS:  # a long log is streamed as it is read, in flat memory
            from .store import EVENT_TYPES

            task_w, msg_w = store.id_widths()
            _stream_table(f"Events ({n})", columns, rows, {"seq": len(str(store.last_event())), "time": 8,
                                                           "event": max(map(len, EVENT_TYPES)), "task": task_w,
                                                           "msg": msg_w})
        else:
            _console().print(_table(f"Events ({n})", columns, list(rows)))


@app.command()
def state(db: Path = DB_OPT, as_json: bool = JSON_OPT, task: Optional[str] = typer.Option(None, help="Only this task.")):
    """Authoritative state: tasks, transitions, intents, effects, artifacts, approvals, budget."""
    from .machine import A2A_STATE, TaskState

    with _open(db, readonly=True) as store:
        data = {
            "tasks": store.tasks(),
            "transitions": store.transitions(),
            "intents": store.intents(),
            "effects": store.effects(),
            "artifacts": store.artifacts(),
            "approvals": store.approvals(),
            "budget": store.budget_ledger(),
            "machine_versions": store.machine_versions(),
            "current_machine": store.current_machine,
            "state_digest": store.state_digest(),
        }
    for t in data["tasks"]:
        t["a2a_state"] = A2A_STATE[TaskState(t["state"])]
        t["trusted"] = bool(t["trusted"])
    if task:
        if not any(t["task_id"] == task for t in data["tasks"]):
            known = ", ".join(t["task_id"] for t in data["tasks"][:10]) or "none yet"
            raise InputError(f"no task {task} in {db} (its tasks: {known})", code="E_UNKNOWN_TASK")
        for k in ("tasks", "transitions", "intents", "effects", "artifacts", "approvals", "budget"):
            data[k] = [r for r in data[k] if r.get("task_id") == task]
    if as_json:
        _print_json(data)
        return
    con = _console()
    _show(
        con, "Tasks (authoritative: written only by the runtime)",
        ["task", "state", "ver", "machine", "lease", "budget", "trusted", "late/rej", "A2A"],
        [
            [t["task_id"], _styled(t["state"], _STATE_STYLE), t["state_version"], t["machine_version"],
             f"{t['lease_holder'] or '-'} v{t['lease_version']}", f"{t['budget_left']}/{t['budget_total']}",
             "yes" if t["trusted"] else "[bold magenta]NO[/]", f"{t['late_results']}/{t['rejected']}",
             t["a2a_state"].removeprefix("TASK_STATE_")]
            for t in data["tasks"]
        ],
        caption="ver: state_version; lease: holder and lease_version; budget: left/allotted; late/rej: late results and rejected moves",
        optional=("machine", "A2A"),
    )
    _show(
        con, "Transitions", ["task", "old -> new", "ver", "by", "time", "reason"],
        [[r["task_id"], f"{r['old_state']} -> {_styled(r['new_state'], _STATE_STYLE)}", r["state_version"],
          r["executor"], r["created_at"][11:19], r["reason"]] for r in data["transitions"]],
    )
    _show(
        con, "Intents (deduplication: task, key, digest, scheme)",
        ["#", "task", "msg", "decision", "seen", "trusted", "idempotency_key / payload_digest"],
        [[r["arrival"], r["task_id"], r["message_id"], _styled(r["decision"], _DECISION_STYLE), r["seen"],
          "yes" if r["trusted"] else "[bold magenta]NO[/]",
          f"{r['idempotency_key']}\n{_digest_cell(r['payload_digest'], r['digest_scheme'])}"] for r in data["intents"]],
    )
    if data["effects"]:
        _show(con, "Effects (committed once per key)", ["effect_key", "task", "message", "tick"],
              [[e["effect_key"], e["task_id"], e["message_id"], e["tick"]] for e in data["effects"]])
    if data["artifacts"]:
        _show(con, "Artifacts (content-addressed)", ["ref", "kind", "bytes", "task", "message"],
              [[a["ref"], a["kind"], a["size"], a["task_id"], a["message_id"]] for a in data["artifacts"]])
    if data["approvals"]:
        _show(con, "Approvals", ["task", "decision", "reviewer", "evidence", "message"],
              [[a["task_id"], a["decision"], a["reviewer"], ", ".join(a["evidence"]), a["message_id"]] for a in data["approvals"]])
    con.print(f"machine for new tasks: {data['current_machine']}\nstate digest (equal digests, equal state):\n  {data['state_digest']}", soft_wrap=True)


# ---------------------------------------------------------------------------- simulator

from .faults import FAULTS as _FAULT_NAMES  # noqa: E402  (the help lists the registry's names)

def _shipped_scenarios() -> str:
    """The shipped scenarios' names, read from the data folder (not a list kept by hand)."""
    from .resources import shipped

    return ", ".join(sorted(p.stem for p in shipped("data", "scenarios").glob("*.toml")))


_SCENARIOS = _shipped_scenarios()
SCENARIO_ARG = typer.Argument("publish-report", help=f"A shipped scenario ({_SCENARIOS}) or a .toml file.")
FAULT_OPT = typer.Option(
    [], "--fault", "-f",
    help="NAME, NAME:M-3, NAME:task_result or NAME:0.1. Names: " + ", ".join(_FAULT_NAMES) + ". Repeat for more.",
)


DESIGN_OPT = typer.Option(None, "--design", help="An envelope design (.py: idempotency_key, payload, evidence_refs, "
                          "DIGEST_SCHEME) every agent send goes through, instead of the reference design.")
INTAKE_OPT = typer.Option(None, "--intake", help="An intake policy (.py defining decide(env, task, prior, rules, unresolved)).")
EFFECTS_OPT = typer.Option(None, "--effects", help="An effect-commit rule (.py defining effect_key(result, delivery_id)).")
MACHINE_OPT = typer.Option(None, "--machine", help="A transition table (.toml) for the run's tasks instead of task-v1.")


def _plugins(design=None, intake=None, effects=None, machine=None):
    """The files a run plugs in, checked (they load, they define what they must) before anything is written."""
    from .plugins import Plugins

    p = Plugins(design=design, intake=intake, effects=effects, machine=machine)
    if p.any():
        p.load("safe")
    return p


def _load_scenario(scenario: str, tasks: Optional[int]):
    from dataclasses import replace

    from .scenario import load_scenario

    sc = load_scenario(scenario)
    if tasks is not None:
        if sc.stress is None:
            raise InputError(f"--tasks applies to stress scenarios; {sc.name} has a fixed task list", code="E_USAGE")
        if tasks < 1:
            raise InputError("--tasks must be at least 1", code="E_USAGE")
        sc = replace(sc, stress=replace(sc.stress, tasks=tasks))
    return sc


def _progress(enabled: bool = True):
    """A progress bar on stderr, only when stderr is a terminal (a pipe gets no stray lines)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True, disable=not (enabled and console.is_terminal))


def _judged(store, show: bool):
    """The invariants' verdicts on ``store``; a big run (judged shard by shard) shows a progress bar."""
    from .invariants import check as run_checks

    with _progress(show) as bar:
        job = None

        def step(done: int, total: int) -> None:
            nonlocal job
            if job is None:
                job = bar.add_task("judging the invariants, 500 tasks at a time", total=total)
            bar.update(job, completed=done)

        return run_checks(store, progress=step)


def _mark(ok: bool) -> str:
    return "[green]holds[/]" if ok else "[bold red]BROKEN[/]"


@app.command()
def run(
    scenario: str = SCENARIO_ARG,
    seed: Optional[int] = typer.Option(None, "--seed", min=0, help="The run's seed (default: the scenario's)."),
    fault: List[str] = FAULT_OPT,
    policy: str = typer.Option("safe", "--policy", help="safe (the course's rules) or naive (last write wins)."),
    db: Path = DB_OPT,
    tasks: Optional[int] = typer.Option(None, "--tasks", help="For stress scenarios: how many tasks."),
    as_json: bool = JSON_OPT,
    design: Optional[Path] = DESIGN_OPT,
    intake: Optional[Path] = INTAKE_OPT,
    effects: Optional[Path] = EFFECTS_OPT,
    machine: Optional[Path] = MACHINE_OPT,
):
    """Run a scenario's scripted agents over a fresh database; print what happened."""
    from .runner import run_scenario, summarize

    sc = _load_scenario(scenario, tasks)
    _check_run_args(policy, fault)
    plugins = _plugins(design, intake, effects, machine)
    _default_db_for(db, sc.name)
    try:
        with _progress(sc.stress is not None) as bar:
            store = run_scenario(sc, policy=policy, seed=seed, faults=fault, db=db, progress=bar if sc.stress else None,
                                 plugins=plugins)
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM/SIGHUP (main turns them into this): the partial file is gone
        _interrupted(e, f"the run was interrupted by {{sig}} and nothing was written ({db} is as it was)")
    try:
        results = _judged(store, sc.stress is not None)  # once: the summary reuses it
        summary = summarize(store, results)
    finally:
        store.close()
    if as_json:
        _print_json(summary)
        return
    con = _console()
    con.print(f"[bold]{summary['scenario']}[/] seed {summary['seed']}, policy {summary['policy']}, "
              f"faults: {', '.join(summary['faults']) or 'none'} -> {db} ({summary['rounds']} rounds)")
    for k, v in summary.get("plugins", {}).items():
        con.print(f"  {k}: {v}")

    injected = summary.get("faults_injected")
    if injected is not None and 0 < len(injected) <= 12:
        con.print(_table("Faults injected", ["fault", "message", "task"],
                         [[f["fault"], f["message_id"], f["task_id"]] for f in injected]))
    elif summary["faults_by_kind"]:  # a big run: how many of each ('events --type fault_injected' lists them)
        con.print(_table("Faults injected", ["fault", "times"], [[k, v] for k, v in summary["faults_by_kind"].items()]))
    n_tasks = sum(summary["tasks_by_state"].values())
    if n_tasks <= 20:
        con.print(_table("Tasks", ["task", "final state"], [[k, _styled(v, _STATE_STYLE)] for k, v in summary["tasks"].items()]))
    else:
        con.print(_table(f"Tasks ({n_tasks:,})", ["final state", "tasks"],
                         [[_styled(k, _STATE_STYLE), v] for k, v in summary["tasks_by_state"].items()]))
    c = summary["counts"]
    con.print(f"{c['messages']} messages, {c['deliveries']} deliveries "
              f"({', '.join(f'{k} {v}' for k, v in c['deliveries_by_decision'].items())}), {c['events']} events")
    con.print(f"effects committed: {', '.join(summary['effects']) or 'none'}")
    con.print(_table("Invariants", ["invariant", "result", "witness"],
                     [[r.name, _mark(r.ok), _witness_line(r)] for r in results]))
    con.print(f"state digest {summary['state_digest']}", soft_wrap=True)
    con.print(f"next: protolab check --db {db}  |  protolab replay --db {db}  |  protolab events --db {db}", soft_wrap=True)


DEFAULT_DB = Path("protolab.db")


def _default_db_for(db: Path, scenario: str) -> None:
    """The rule for the default database: ``protolab.db`` holds the latest simulator run, whatever
    its scenario; a run of another scenario there is replaced, with a notice (name a --db to keep
    runs side by side). A named --db is never replaced by another scenario's run, and hand-delivered
    messages are never replaced."""
    from .runner import refuse_lab_run, scenario_of

    refuse_lab_run(db)  # a lab's run, wherever it is, is never replaced
    if db != DEFAULT_DB or not db.exists():
        return

    previous = scenario_of(db)
    if previous is None or previous == scenario:
        return  # hand-delivered: refused as before; the same scenario: replaced as before
    from .store import remove_database

    remove_database(db)
    sys.stderr.write(f"note: {db} held a run of {previous}; it now holds this run of {scenario} "
                     "(use --db FILE to keep runs side by side)\n")


def _interactive() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty() and os.environ.get("TERM", "") != "dumb"


def _check_run_args(policy: str, faults) -> None:
    """Refuse an unknown policy or a malformed fault before anything is opened or written."""
    from .faults import parse_fault
    from .policy import get_policy

    get_policy(policy)
    for f in faults:
        parse_fault(f)


def _tui_live(sc, *, seed, fault, policy, db, paused: bool, headless: bool, plugins=None) -> None:
    """Open the TUI on a live run of ``sc`` written to ``db`` (headless: run it through, print).
    The caller has checked policy and faults."""
    if headless or not _interactive():
        if not headless:
            sys.stderr.write(
                f"protolab: not a terminal, so no TUI: running {sc.name} through instead "
                f"(open it later with 'protolab tui --db {db}')\n"
            )
        p = plugins
        run(scenario=sc.name, seed=seed, fault=fault, policy=policy, db=db, tasks=None, as_json=False,
            design=p.design if p else None, intake=p.intake if p else None, effects=p.effects if p else None,
            machine=p.machine if p else None)
        return
    from .live import LiveRun
    from .tui.app import ProtolabApp

    live = LiveRun(sc, policy=policy, seed=seed, faults=fault, db=db, plugins=plugins)
    try:
        app = ProtolabApp(live.store, live=live, play=not paused)
        app.run()
    finally:
        live.close()
    if app.failure is not None:  # the learner's code stopped the run: the app showed it; one line and exit 2 here
        sys.stderr.write(f"note: what was delivered before it stopped is in {db}\n")
        raise app.failure
    for unmatched in live.unmatched_faults():
        sys.stderr.write(f"note: fault selector {unmatched} matched no message in this run\n")
    print(f"the run is in {db}: protolab check --db {db}  |  protolab tui --db {db}")


@app.command()
def demo(
    mode: str = typer.Argument("run", help="'run' (the default scenario, live) or 'regression' (workshop: naive beside safe)."),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, help="The seed (default: the scenario's, 0)."),
    fault: List[str] = typer.Option([], "--fault", "-f", help="For regression: the faults both runs get (default: late-failure)."),
    db: Path = DB_OPT,
    paused: bool = typer.Option(False, "--paused", help="Start paused (space steps one delivery)."),
    headless: bool = typer.Option(False, "--headless", help="No TUI: run it through and print the result."),
    design: List[Path] = typer.Option([], "--design", help="An envelope design (.py). With 'run': watch it live. "
                                      "With 'regression': one design beside the reference design, or two side by side."),
):
    """Open the TUI on the default scenario (seed 0), live, on protolab.db in this folder."""
    if mode not in ("run", "regression"):
        raise InputError(f"unknown demo {mode!r}; expected one of: 'run' or 'regression'", code="E_UNKNOWN_VALUE")
    sc = _load_scenario("publish-report", None)
    _check_run_args("safe", fault)
    designs = _designs(design)
    if mode == "run":
        if len(designs) > 1:
            raise InputError("'demo run' takes one --design; 'demo regression' shows two side by side", code="E_USAGE")
        _default_db_for(db, sc.name)
        _tui_live(sc, seed=seed, fault=fault, policy="safe", db=db, paused=paused, headless=headless,
                  plugins=_plugins(design=designs[0]) if designs else None)
        return
    _workshop(sc, seed=seed, fault=list(fault) or (["resend"] if designs else ["late-failure"]), paused=paused,
              headless=headless, designs=designs)


def _designs(design: list[Path]) -> list[Path]:
    if len(design) > 2:
        raise InputError("at most two --design files: one beside the reference, or two side by side", code="E_USAGE")
    for d in design:
        _plugins(design=d)  # load and check each before anything runs
    return list(design)


def _sides(designs: list[Path], policy: str = "safe") -> list[tuple[str, str, object]]:
    """(label, policy, plugins) of the two sides a comparison shows."""
    from .plugins import Plugins

    if not designs:
        return [("safe", "safe", None), ("naive", "naive", None)]
    if len(designs) == 1:
        return [("reference design", policy, None), (designs[0].name, policy, Plugins(design=designs[0]))]
    a, b = designs
    la, lb = (a.name, b.name) if a.name != b.name else (str(a), str(b))
    return [(la, policy, Plugins(design=a)), (lb, policy, Plugins(design=b))]


def _workshop(sc, *, seed, fault, paused: bool, headless: bool, designs=()) -> None:
    if headless or not _interactive():
        if not headless:
            sys.stderr.write("protolab: not a terminal, so no TUI: comparing the two sides instead\n")
        compare(scenario=sc.name, seed=seed, fault=fault, as_json=False, design=list(designs), tasks=None)
        return
    from .live import LiveRun
    from .tui.workshop import WorkshopApp

    sides = _sides(list(designs))
    if designs:
        # The side that may break goes on the left, where the workshop names the broken invariant.
        left, right = sides if len(designs) == 2 else (sides[1], sides[0])
        naive = LiveRun(sc, policy=left[1], seed=seed, faults=fault, plugins=left[2])
        safe = LiveRun(sc, policy=right[1], seed=seed, faults=fault, plugins=right[2])
        labels = tuple(label if plugged is None else f"design {label}" for label, _p, plugged in (left, right))
    else:
        naive = LiveRun(sc, policy="naive", seed=seed, faults=fault)
        safe = LiveRun(sc, policy="safe", seed=seed, faults=fault)
        labels = ("naive: last write wins", "safe: the course's rules")
    try:
        app = WorkshopApp(naive, safe, play=not paused, labels=labels)
        app.run()
    finally:
        naive.close()
        safe.close()
    if app.failure is not None:  # a design raised: the app showed it; one line and exit 2 here
        raise app.failure


@app.command()
def tui(
    scenario: Optional[str] = typer.Argument(None, help=f"A scenario to run live ({_SCENARIOS}, or a .toml)."),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, help="The run's seed (default: the scenario's)."),
    fault: List[str] = FAULT_OPT,
    policy: str = typer.Option("safe", "--policy", help="safe (the course's rules) or naive (last write wins)."),
    db: Optional[Path] = typer.Option(None, "--db", help="With a scenario: where the live run is written "
                                      "(default protolab.db). Without: a finished run to open read-only."),
    paused: bool = typer.Option(False, "--paused", help="Start paused (space steps one delivery)."),
    design: Optional[Path] = DESIGN_OPT,
    intake: Optional[Path] = INTAKE_OPT,
    effects: Optional[Path] = EFFECTS_OPT,
    machine: Optional[Path] = MACHINE_OPT,
):
    """The TUI: run a scenario live, or open a finished run read-only (--db FILE)."""
    live_flags = bool(fault) or any(x is not None for x in (seed, design, intake, effects, machine)) or policy != "safe"
    if scenario is None and db is not None and not live_flags:
        from .store import Store

        store = Store.open(db, readonly=True)
        try:
            if not _interactive():
                raise InputError("the TUI needs a terminal; for a finished run try 'protolab state/events/messages --db "
                                 f"{db}'", code="E_NOT_A_TERMINAL")
            from .tui.app import ProtolabApp

            ProtolabApp(store).run()
        finally:
            store.close()
        return
    sc = _load_scenario(scenario or "publish-report", None)
    _check_run_args(policy, fault)
    plugins = _plugins(design, intake, effects, machine)
    from .runner import refuse_lab_run

    refuse_lab_run(db or DEFAULT_DB)  # a lab's run is never replaced, terminal or not
    if not _interactive():
        raise InputError(f"the TUI needs a terminal; 'protolab run {sc.name}' runs it without one", code="E_NOT_A_TERMINAL")
    _default_db_for(db or DEFAULT_DB, sc.name)
    _tui_live(sc, seed=seed, fault=fault, policy=policy, db=db or Path("protolab.db"), paused=paused, headless=False,
              plugins=plugins)


_WITNESS_KEYS = (
    "problem", "task_id", "message_id", "key", "old_state", "new_state", "times_committed",
    "carried_lease_version", "current_lease_version", "ref",
)


def _witness_line(r) -> str:
    """The first witness, shortened to the fields a person reads first (--json has all of it)."""
    if r.ok or not r.witnesses:
        return ""
    w = r.witnesses[0]
    parts = [f"{k}={w[k]}" for k in _WITNESS_KEYS if w.get(k) is not None and not isinstance(w[k], (dict, list))]
    if not parts:
        parts = [f"{k}={v}" for k, v in list(w.items())[:4] if not isinstance(v, (dict, list))]
    more = f" (+{len(r.witnesses) - 1} more)" if len(r.witnesses) > 1 else ""
    return ", ".join(parts) + more


@app.command()
def compare(
    scenario: str = SCENARIO_ARG,
    seed: Optional[int] = typer.Option(None, "--seed", min=0, help="The seed both runs use."),
    fault: List[str] = FAULT_OPT,
    as_json: bool = JSON_OPT,
    design: List[Path] = typer.Option([], "--design", help="An envelope design (.py) beside the reference design; "
                                      "twice: two designs side by side (both under the safe runtime)."),
    tasks: Optional[int] = typer.Option(None, "--tasks", help="For stress scenarios: how many tasks."),
):
    """The same seed and faults under the safe and the naive policy (or two envelope designs), side by side."""
    from .invariants import check
    from .runner import run_scenario, summarize

    sc = _load_scenario(scenario, tasks)
    _check_run_args("safe", fault)
    sides = _sides(_designs(list(design)))
    import tempfile

    out = {}
    with tempfile.TemporaryDirectory(prefix="protolab-compare-") as scratch:
        for k, (label, pol, plugins) in enumerate(sides):
            # each side on a scratch file, not in memory: a big run keeps memory flat
            store = run_scenario(sc, policy=pol, seed=seed, faults=fault, plugins=plugins,
                                 db=Path(scratch) / f"side-{k}.db")
            try:
                results = check(store)
                out[label] = (summarize(store, results), results)
            finally:
                store.close()
    if as_json:
        _print_json({label: summary for label, (summary, _) in out.items()})
        return
    (la, _pa, _xa), (lb, _pb, _xb) = sides
    safe, naive = out[la][0], out[lb][0]
    rows = []
    if "tasks" in safe and "tasks" in naive:
        for t in sorted(set(safe["tasks"]) | set(naive["tasks"])):
            a, b = safe["tasks"].get(t, "-"), naive["tasks"].get(t, "-")
            rows.append([f"task {t}", _styled(a, _STATE_STYLE), _styled(b, _STATE_STYLE), "" if a == b else "<- differs"])
    else:  # a big run: how many tasks ended in each state
        for st in sorted(set(safe["tasks_by_state"]) | set(naive["tasks_by_state"])):
            a, b = safe["tasks_by_state"].get(st, 0), naive["tasks_by_state"].get(st, 0)
            rows.append([f"tasks {_styled(st, _STATE_STYLE)}", a, b, "" if a == b else "<- differs"])
    rows.append(["effects committed", safe["effects_committed"], naive["effects_committed"],
                 "" if safe["effects_committed"] == naive["effects_committed"] else "<- differs"])
    for (rs, rn) in zip(out[la][1], out[lb][1]):
        rows.append([rs.name, _mark(rs.ok), _mark(rn.ok), _witness_line(rn) if not rn.ok else ""])
    faults = ", ".join(safe["faults"]) or "none"
    _console().print(_table(f"{sc.name}, seed {safe['seed']}, faults: {faults}", ["", la, lb, f"{lb}'s witness"], rows))


@app.command()
def replay(db: Path = DB_OPT, as_json: bool = JSON_OPT):
    """Rebuild state from the event log alone and compare digests; redeliver every message and count effects."""
    from .replay import replay_report

    import tempfile

    with _open(db, readonly=True) as store, tempfile.TemporaryDirectory(prefix="protolab-replay-") as scratch:
        report = replay_report(store, scratch=scratch)  # on files: flat memory at any run size
    proof = not report["redelivery"]["effects_committed_again"]
    report["effects_at_most_once_under_redelivery"] = proof
    if as_json:
        _print_json(report)
    else:
        con = _console()
        con.print(f"replayed {report['events']} events into an empty store", soft_wrap=True)
        con.print(f"  live state digest     {report['live_digest']}", soft_wrap=True)
        con.print(f"  replayed state digest {report['state_digest']}", soft_wrap=True)
        con.print("  [green]match[/]: state is the fold of the event log" if report["match"]
                  else "  [bold red]MISMATCH[/]: state holds something the events do not explain")
        r = report["redelivery"]
        con.print(f"redelivered all {r['redelivered']} messages through intake ({r['policy']} policy): "
                  f"{', '.join(f'{k} {v}' for k, v in r['decisions'].items())}", soft_wrap=True)
        con.print("  [green]no side effect committed twice[/]" if proof
                  else f"  [bold red]effects committed again[/]: {', '.join(r['effects_committed_again'])}", soft_wrap=True)
    if not report["match"] or not proof:
        if not as_json:
            why = [w for w, bad in (("the replayed state differs from the live one", not report["match"]),
                                    ("redelivering the log commits side effects again", not proof)) if bad]
            _console().print(f"replay FAILED: {'; '.join(why)} (exit status 1)", soft_wrap=True, highlight=False)
        raise typer.Exit(1)


@app.command()
def check(db: Path = DB_OPT, as_json: bool = JSON_OPT):
    """Named invariants over a run, each holding or broken, with the rows that witness a failure."""
    with _open(db, readonly=True) as store:
        results = _judged(store, True)
        pending = store.open_reconciliations()
    if as_json:
        _print_json([{"name": r.name, "ok": r.ok, "description": r.description, "witnesses": list(r.witnesses)} for r in results])
    else:
        con = _console()
        con.print(_table(f"Invariants of {db}", ["invariant", "result", "what must hold"],
                         [[r.name, _mark(r.ok), _plain(r.description)] for r in results]))
        for r in results:
            if not r.ok:
                con.print(f"[bold red]{r.name}[/] witnesses:")
                for w in r.witnesses[:10]:
                    con.print("  " + json.dumps(w, sort_keys=True), soft_wrap=True)
                if len(r.witnesses) > 10:
                    con.print(f"  ... {len(r.witnesses) - 10} more (--json has all)")
        for p in pending:  # not a broken rule: work a reviewer still owes
            con.print(f"open reconciliation: {p['task_id']}: late {p['message_id']} ({p['status']}) touches "
                      f"{', '.join(p['effects'])}; decide with: protolab reconcile {p['task_id']} --decision keep|retract "
                      f"--by reviewer --evidence {p['message_id']}", markup=False, soft_wrap=True)
    if not all(r.ok for r in results):
        raise typer.Exit(1)


# ---------------------------------------------------------------------------- traces


def _write_output(output: Path, text: str) -> None:
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot write {output}: {e.strerror}", code="E_FILE_WRITE") from None


def _load_trace(file: Path) -> dict:
    """Read a trace: refuse what is not UTF-8 JSON, or repeats a key in one object, with one line and
    exit 2 (plain json with a small hook: a trace can hold a million messages)."""
    raw = _read_file(file, "trace file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"trace file {file} is not UTF-8 ({e.reason} at byte {e.start})", code="E_NOT_UTF8") from None
    del raw  # a million-message trace: keep one copy of it, not two

    def refuse(name):
        raise InputError(f"trace file {file} holds {name}, which is not JSON", code="E_NAN")

    def one_value_per_key(pairs):
        # as for envelopes: a repeated key would let "the last one wins" decide what the trace says
        d = dict(pairs)
        if len(d) != len(pairs):
            seen = set()
            k = next(k for k, _ in pairs if k in seen or seen.add(k))
            raise InputError(f"trace file {file} repeats the key {k!r} in one object", code="E_DUPLICATE_KEY")
        return d

    try:
        return json.loads(text.removeprefix("\ufeff"), parse_constant=refuse, object_pairs_hook=one_value_per_key)
    except json.JSONDecodeError as e:
        raise InputError(f"trace file {file} is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}", code="E_JSON") from None
    except (RecursionError, ValueError) as e:
        raise InputError(f"trace file {file} cannot be read as JSON: {e}", code="E_JSON") from None


@trace_app.command("validate")
def trace_validate(
    file: Path = typer.Argument(..., help="A conversation-trace-v2 JSON file ('-' for stdin)."),
    as_json: bool = JSON_OPT,
):
    """Validate a trace: exit 0 valid (and why), 1 invalid (every error), 2 unreadable."""
    import gc

    from .protocol import validate

    gc.disable()  # parsing and validating build millions of objects and free none: no cycles to look for
    try:
        report = validate(_load_trace(file))
    finally:
        gc.enable()
    if as_json:
        _print_json(report.to_dict())
    else:
        con = _console()
        if report.valid:
            why = report.reason.removeprefix("valid: ").removeprefix(f"{report.terminal}, ").removeprefix(f"{report.terminal}")
            if report.terminal is None:  # still open: nothing fenced it (yet)
                con.print(f"[green]valid[/]: {why.lstrip(', ')}", soft_wrap=True)
            else:
                con.print(f"[green]valid[/]: terminal {report.terminal}" + (f", {why.lstrip(', ')}" if why.strip(" ,.") else ""),
                          soft_wrap=True)
            for gid, g in report.gathers.items():
                con.print(f"  gather {gid} ({g.rule}): {g.status}, value {json.dumps(g.value)}"
                          + (f", dissent from {', '.join(d['sender'] for d in g.dissent)}" if g.dissent else "")
                          + (f", missing {', '.join(g.missing)}" if g.missing else ""), soft_wrap=True)
        else:
            con.print(_table(f"[bold red]invalid[/]: {len(report.errors)} error(s) in {file}",
                             ["code", "message", "where", "what"],
                             [[f.code, f.message_id or "", f.pointer, f.message] for f in report.errors]))
    raise typer.Exit(0 if report.valid else 1)


@trace_app.command("export")
def trace_export(
    db: Path = DB_OPT,
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the trace here (default: stdout)."),
    epoch: Optional[int] = typer.Option(None, "--epoch", help="Which epoch (default: the last). A reviewer's decision "
                                        "after the fence reopens the conversation in the next epoch."),
):
    """A run's message log as a conversation-trace-v2 trace (transport faults show up as protocol errors)."""
    from .conversation import TraceExport

    # a bar on stderr while a big run is written (not over a trace scrolling past in the same terminal)
    with _open(db, readonly=True) as store, _progress(output is not None or not sys.stdout.isatty()) as bar:
        jobs: dict = {}

        def step(what: str, done: int, total: int) -> None:
            if what not in jobs:
                jobs[what] = bar.add_task(what, total=total)
            bar.update(jobs[what], completed=done)

        export = TraceExport(store, epoch, progress=step)  # a message at a time: flat memory at any run size
        if output is None:
            export.write(sys.stdout)
            return
        # beside the destination, renamed over it when whole: an interrupted export leaves no half a trace
        tmp = output.with_name(f".{output.name}.partial-{os.getpid()}")
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                export.write(fh)
            os.replace(tmp, output)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise InputError(f"cannot write {output}: {e.strerror}", code="E_FILE_WRITE") from None
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    typer.echo(f"wrote {output}: {export.count} messages of conversation {export.header['conversationId']}"
               + (f", epoch {export.epoch} of {export.epochs} (--epoch N for another)" if export.epochs > 1 else ""))


@trace_app.command("replay")
def trace_replay(
    file: Path = typer.Argument(..., help="A conversation-trace-v2 JSON file carrying reducer outputs."),
    as_json: bool = JSON_OPT,
):
    """Re-run the reducers in the supplied order; recompute gathers and state digests; prove equivalence."""
    from .protocol.replay import replay as run_replay

    trace = _load_trace(_resolve(file))
    if not isinstance(trace, dict) or not isinstance(trace.get("messages"), list):
        raise InputError(f"{file} is not a conversation trace (no messages list)", code="E_SCHEMA")
    result = run_replay(trace)
    if as_json:
        _print_json(result.to_dict())
    else:
        con = _console()
        con.print(f"replayed {result.messages} messages ({result.accepted} accepted, rejected ones never reach a reducer)")
        con.print(f"  recomputed state digest {result.state_digest}", soft_wrap=True)
        if result.recorded_state_digest is not None:
            con.print(f"  recorded state digest   {result.recorded_state_digest}", soft_wrap=True)
        d = result.first_divergence
        if d is None:
            con.print("  [green]equivalent[/]: every recorded reducer output matches the replay")
        else:
            where = f"message {d.position} ({d.message_id})" if d.position >= 0 else d.what
            con.print(f"  [bold red]diverges[/] first at {where}: {d.what}", soft_wrap=True)
            con.print(f"    expected (recorded)  {d.expected}", soft_wrap=True)
            con.print(f"    found (recomputed)   {d.found}", soft_wrap=True)
    raise typer.Exit(0 if result.equivalent else 1)


@trace_app.command("mutate")
def trace_mutate(
    file: Path = typer.Argument("data/traces/valid-trace.json", help="A valid trace to mutate."),
    as_json: bool = JSON_OPT,
):
    """The adversarial mutation suite: one mutation per rule, and the code each produced."""
    from .protocol import run_mutations, validate

    trace = _load_trace(_resolve(file))
    base = validate(trace)
    if not base.valid:
        raise InputError(f"{file} is not a valid trace ({base.errors[0].code}); mutate a valid one", code="E_TRACE_INVALID")
    from .protocol.mutate import MUTATIONS

    rows = []
    for mu in MUTATIONS:
        try:
            rows.extend(run_mutations(trace, (mu,)))
        except (KeyError, IndexError, StopIteration, TypeError, ValueError, AttributeError):
            # The mutation finds nothing of the kind it breaks in this trace (no ACK after the
            # fence, no recorded gather result, ...): it cannot be applied, which is not a catch.
            rows.append({"name": mu.name, "rule": mu.rule, "expected": mu.expected_code,
                         "expected_terminal": mu.expected_terminal, "produced": [], "terminal": None,
                         "ok": False, "exact": False, "applicable": False})
    if as_json:
        _print_json(rows)
    else:
        def what(r):
            if r.get("applicable") is False:
                return f"not applicable: the trace has nothing this mutation breaks ({r['rule']})"
            return ((", ".join(r["produced"]) or f"valid {r['terminal']}")
                    + ("" if r["exact"] else f"; the rule's own code is {r['expected'] or 'valid ' + str(r['expected_terminal'])}"))

        _console().print(_table(
            f"Mutations of {file}: {sum(r['ok'] for r in rows)}/{len(rows)} caught",
            ["caught", "mutation", "the validator said"],
            [["[green]yes[/]" if r["ok"] else ("[yellow]n/a[/]" if r.get("applicable") is False else "[bold red]NO[/]"),
              r["name"], what(r)] for r in rows],
        ))
    raise typer.Exit(0 if all(r["ok"] for r in rows) else 1)


@trace_app.command("diagram")
def trace_diagram(
    file: Path = typer.Argument(..., help="A conversation-trace-v2 JSON file."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the Mermaid source here (a .md file gets a mermaid fence)."),
    as_text: bool = typer.Option(False, "--text", help="Draw it in plain text for the terminal instead of Mermaid."),
    width: int = typer.Option(100, "--width", help="With --text: the width to draw in."),
):
    """A Mermaid sequence diagram of a trace: fences, acknowledgements and rejected messages marked."""
    from .protocol import mermaid, text_sequence, validate

    trace = _load_trace(_resolve(file))
    if as_text:
        text = "\n".join(line for line, _kind in text_sequence(trace, validate(trace), width=width)) + "\n"
    else:
        text = mermaid(trace, validate(trace))
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    _write_output(output, f"```mermaid\n{text.rstrip()}\n```\n" if output.suffix == ".md" else text)
    typer.echo(f"wrote {output}")


# ---------------------------------------------------------------------------- reconcile


@app.command()
def reconcile(
    task_id: str = typer.Argument(..., help="The needs_review task to decide, or a finished task with an open "
                                            "reconciliation."),
    decision: str = typer.Option(..., "--decision", help="needs_review: ready (run it again) or canceled. An open "
                                 "reconciliation (a late result touched a committed effect): keep or retract."),
    of: Optional[str] = typer.Option(None, "--of", help="Which late message's reconciliation (default: the oldest open)."),
    by: str = typer.Option(..., "--by", help="Who decides; must be a reviewer (reviewer or reviewer-NAME)."),
    evidence: List[str] = typer.Option(..., "--evidence", help="Retained evidence: a message id or an artifact ref. Repeat for more."),
    note: str = typer.Option("", "--note", help="Why, in a sentence."),
    db: Path = DB_OPT,
    as_json: bool = JSON_OPT,
):
    """A reviewer decides from retained evidence: a frozen (needs_review) task, or an open
    reconciliation (keep the committed effect, or retract it with a compensating effect)."""
    from .envelope import RECONCILE_DECISIONS, role_of
    from .runtime import resolve_reconciliation, review

    role_of(by)
    with _open(db) as store:
        if decision in RECONCILE_DECISIONS:
            o = resolve_reconciliation(store, task_id, decision, by=by, evidence=list(evidence), of=of, note=note)
        else:
            o = review(store, task_id, decision, by=by, evidence=list(evidence), note=note)
        effects = [e["effect_key"] for e in store.effects() if e["task_id"] == task_id]
    if o.decision != "accepted":
        raise ProtolabError(f"the review was {o.decision}: {o.reason}", code=o.code or "E_REVIEW_NOT_APPLIED")
    if as_json:
        _print_json(o.to_dict())
        return
    if decision in RECONCILE_DECISIONS:
        typer.echo(f"{o.message_id}: {o.reason}; {task_id} stays {o.state}; its effects now: {', '.join(effects)}")
        return
    typer.echo(f"{o.message_id}: {o.decision} -> {task_id} is {o.state} (state_version {o.state_version}); approval recorded")


# ---------------------------------------------------------------------------- digest


@app.command()
def digest(
    file: Path = typer.Argument(..., help="A JSON file ('-' for stdin)."),
    scheme: str = typer.Option("json-sorted-v1", "--scheme", help="json-sorted-v1 or jcs-v2."),
    show_bytes: bool = typer.Option(False, "--bytes", help="Also print the canonical bytes that are hashed."),
):
    """Print the digest of a JSON value, to fill in an envelope's payload_digest by hand."""
    from . import digest as _digest
    from .envelope import loads_strict

    value = loads_strict(_read_file(file, "file"), source=str(file))
    if show_bytes:
        typer.echo(_digest.canonical_bytes(value, scheme).decode("utf-8"))
    typer.echo(_digest.digest(value, scheme))


# ---------------------------------------------------------------------------- machine


@machine_app.command("show")
def machine_show(
    db: Optional[Path] = typer.Option(None, "--db", help="Show the versions loaded in this database."),
    version: Optional[str] = typer.Option(None, "--version", help="Only this machine version."),
    as_json: bool = JSON_OPT,
):
    """The allowlist: every allowed move and the roles that may make it."""
    from .machine import A2A_STATE, TaskState, default_rulebook

    if db is None:
        rb = default_rulebook()
        rules = [{"machine_version": r.machine_version, "from_state": r.from_state.value, "to_state": r.to_state.value,
                  "roles": ",".join(r.roles), "reason": r.reason} for r in rb.rules]
        current = rb.version
    else:
        store = _open(db, readonly=True)
        try:
            rules, current = store.transition_rules(), store.current_machine
        finally:
            store.close()
    if version:
        rules = [r for r in rules if r["machine_version"] == version]
        if not rules:
            raise InputError(f"machine version {version!r} is not loaded", code="E_UNKNOWN_MACHINE")
    a2a = {s.value: A2A_STATE[s] for s in TaskState}
    if as_json:
        _print_json({"current": current, "rules": rules, "a2a": a2a})
        return
    con = _console()
    con.print(_table(f"Transition rules (new tasks use {current})", ["machine", "from", "to", "roles", "reason"],
                     [[r["machine_version"], r["from_state"], r["to_state"], r["roles"].replace(",", ", "), r["reason"]] for r in rules],
                     optional=("machine",)))
    con.print(_table("A2A v1.0 export", ["state", "A2A task state"], [[k, v] for k, v in a2a.items()]))


@machine_app.command("check")
def machine_check(file: Path = typer.Argument(..., help="A machine file (TOML).")):
    """Validate a machine file without loading it."""
    from .machine import load_rulebook

    rb = load_rulebook(_resolve(file))
    typer.echo(f"{file}: machine {rb.version}, {len(rb.rules)} allowed moves")


@machine_app.command("load")
def machine_load(file: Path = typer.Argument(..., help="A machine file (TOML) with a new version."), db: Path = DB_OPT):
    """Load a new machine version: new tasks use it; existing tasks keep theirs."""
    from .machine import load_rulebook

    rb = load_rulebook(_resolve(file))
    with _open(db) as store:
        with store.transaction():
            store.advance()
            store.load_machine(rb, description=f"loaded from {file.name}")
    typer.echo(f"loaded {rb.version} ({len(rb.rules)} moves) into {db}; new tasks use it, existing tasks keep their version")


# ---------------------------------------------------------------------------- artifacts


@artifact_app.command("put")
def artifact_put(
    file: Path = typer.Argument(..., help="A JSON file (a fact table, a draft...)."),
    db: Path = DB_OPT,
    kind: str = typer.Option("document", "--kind", help="What it is, e.g. fact-table or draft."),
    task: Optional[str] = typer.Option(None, "--task", help="The task it belongs to."),
):
    """Store a JSON artifact content-addressed and print its ref (for evidence_refs)."""
    from .envelope import loads_strict
    from .runtime import put_artifact

    value = loads_strict(_read_file(file, "artifact file"), source=str(file))
    with _open(db) as store:
        ref = put_artifact(store, value, kind=kind, task_id=task)
    typer.echo(ref)


@artifact_app.command("show")
def artifact_show(ref: str = typer.Argument(..., help="sha256:..."), db: Path = DB_OPT):
    """Print a stored artifact's content."""
    with _open(db, readonly=True) as store:
        art = store.artifact(ref)
    if art is None:
        raise InputError(f"no artifact {ref} in {db}", code="E_UNKNOWN_ARTIFACT")
    _print_json(art)


# ---------------------------------------------------------------------------- bench


@bench_app.command("intake")
def bench_intake(
    n: int = typer.Option(5000, "-n", help="Deliveries to time."),
    as_json: bool = JSON_OPT,
):
    """Deliveries per second through parse, digest, intake and transaction, beside bare sqlite3."""
    from .bench import bench_intake as run

    if n < 10:
        raise InputError("-n must be at least 10", code="E_USAGE")
    result = run(n, progress=not as_json)
    if as_json:
        _print_json(result)
        return
    typer.echo(
        f"intake: {result['project_per_s']:,.0f} deliveries/s (protolab)  |  floor {result['floor_per_s']:,.0f}/s "
        f"(bare sqlite3, same rows)  |  ratio {result['ratio']:.2f}  (n={n}, target >= 0.4)"
    )


@bench_app.command("sim")
def bench_sim(
    sizes: str = typer.Option("1000,10000,100000", "--sizes", help="Comma-separated task counts for the stress scenario "
                                                                   "(100,000 tasks takes several minutes)."),
    as_json: bool = JSON_OPT,
):
    """The stress scenario at each size: deliveries/s beside bare sqlite3 on the same rows, and peak memory."""
    from .bench import bench_sim as run

    try:
        ns = [int(x) for x in sizes.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--sizes {sizes!r} must be comma-separated integers", code="E_USAGE") from None
    if not ns or min(ns) < 1:
        raise InputError("--sizes needs at least one positive task count", code="E_USAGE")
    result = run(ns, progress=not as_json)
    if as_json:
        _print_json(result)
        return
    _console().print(_table(
        "bench sim: stress scenario (5% duplicates, 1% conflicting digests)",
        ["tasks", "deliveries", "protolab/s", "floor/s", "ratio", "grouped: protolab/s", "floor/s", "ratio",
         "peak RSS MB (simulation)", "peak RSS MB ('protolab run')"],
        [[f"{r['tasks']:,}", f"{r['deliveries']:,}", f"{r['project_per_s']:,.0f}", f"{r['floor_per_s']:,.0f}",
          f"{r['ratio']:.2f}", f"{r['grouped']['project_per_s']:,.0f}", f"{r['grouped']['floor_per_s']:,.0f}",
          f"{r['grouped']['ratio']:.2f}", r["peak_rss_mb"], r["command_peak_rss_mb"]] for r in result["sizes"]],
        caption="floor: bare sqlite3 replaying the run's own write statements, same transactions; first one "
                "transaction per delivery (target ratio >= 0.3), then grouped commits as 'protolab run' makes them; "
                "'protolab run': the whole command (simulation, summary, invariants) in its own process",
    ))


@bench_app.command("writers")
def bench_writers_cmd(
    processes: int = typer.Option(4, "--processes", help="Concurrent 'protolab deliver' processes on one database."),
    n: int = typer.Option(10_000, "-n", help="Deliveries of its own per process (plus contended ones)."),
    as_json: bool = JSON_OPT,
):
    """Many writers on one database: deliveries/s, lost (must be 0), clock violations (must be 0), beside one process."""
    from .bench import bench_writers as run

    if processes < 1 or n < 10:
        raise InputError("--processes must be at least 1 and -n at least 10", code="E_USAGE")
    result = run(processes, n, shared=max(1, n // 100))
    if as_json:
        _print_json(result)
        return
    _console().print(_table(
        f"bench writers: {processes} processes x {n:,} deliveries (+ contended ones) on one database",
        ["", "processes", "deliveries", "seconds", "deliveries/s", "lost", "clock violations"],
        [[k, r["processes"], f"{r['deliveries']:,}", r["seconds"], f"{r['per_s']:,.0f}", r["lost"], r["clock_violations"]]
         for k, r in (("concurrent", result["concurrent"]), ("one process", result["one_process"]))],
        caption="lost and clock violations must be 0; each process pays its own start-up",
    ))


@bench_app.command("crash")
def bench_crash_cmd(
    cycles: int = typer.Option(200, "--cycles", help="How many runs to kill (200 x 20,000 tasks takes about an hour)."),
    tasks: int = typer.Option(20_000, "--tasks", help="Tasks in the stress run that is killed."),
    seed: int = typer.Option(0, "--seed", min=0, help="Seeds the moments of the kills."),
    as_json: bool = JSON_OPT,
):
    """The crash loop: kill -9 a run at random moments; the partial file must be whole, hold every invariant and replay."""
    from .bench import bench_crash

    if cycles < 1 or tasks < 100:
        raise InputError("--cycles must be at least 1 and --tasks at least 100", code="E_USAGE")
    if as_json:
        _print_json(bench_crash(cycles, tasks, seed=seed))
        return
    from rich.progress import Progress

    with Progress(console=_console(), transient=True) as bar:
        r = bench_crash(cycles, tasks, seed=seed, progress=bar)
    _console().print(_table(
        f"bench crash: {r['cycles']} x kill -9 of a {tasks:,}-task run ({r['whole_run_seconds']} s whole)",
        ["corrupt", "replay mismatches", "invariant failures", "completed db replaced", "killed before the schema",
         "deliveries in the partials"],
        [[r["corrupt"], r["replay_mismatches"], r["invariant_failures"], r["replaced"], r["empty"],
          f"{r['partial_deliveries_min']:,} to {r['partial_deliveries_max']:,}"]],
        caption="the first four must be 0" + (
            f"; {r['finished_before_kill']} run(s) ended before their moment to die (a busy machine) and are not counted"
            if r["finished_before_kill"] else ""),
    ))


@bench_app.command("lab")
def bench_lab_cmd(
    events: int = typer.Option(100_000, "--events", help="Events in the run the checkpoints are evaluated on (100,000 takes a few minutes)."),
    steps: int = typer.Option(300, "--steps", help="Deliveries timed, each followed by a checkpoint refresh."),
    as_json: bool = JSON_OPT,
):
    """A lab's checkpoints re-checked after each delivery on a large run, beside reading the same new rows; and lab start."""
    from .tui.bench import FRAME_MS, bench_lab

    if events < 100 or steps < 10:
        raise InputError("--events must be at least 100 and --steps at least 10", code="E_USAGE")
    if as_json:
        _print_json(bench_lab(events, steps))
        return
    from rich.progress import Progress

    with Progress(console=_console(), transient=True) as bar:
        task = bar.add_task("building the run", total=events)
        r = bench_lab(events, steps, progress=lambda done, total: bar.update(task, completed=done))
    typer.echo(f"lab checkpoints on a {r['events']:,}-event run: {r['tick_median_ms']} ms per refresh (median, "
               f"p99 {r['tick_p99_ms']} ms; one frame is {FRAME_MS:.1f} ms)  |  floor {r['floor_median_ms']} ms "
               f"(reading the same new rows)  |  ratio {r['ratio']}  |  first refresh {r['cold_refresh_ms']} ms")
    typer.echo(f"lab start: {r['lab_start_ms']} ms to the first frame  |  floor {r['plain_start_ms']} ms (the same run "
               f"without a lab)  |  ratio {r['start_ratio']}")


@bench_app.command("grade")
def bench_grade_cmd(
    n: int = typer.Option(200, "-n", help="Generated submissions of exercise 1 (200 takes a few minutes on 2 cores)."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, help="Tests judged at once (default: every core)."),
    as_json: bool = JSON_OPT,
    course: Optional[Path] = COURSE_OPT,
):
    """The grader on a generated class (correct, partly wrong and hostile mixed): submissions per minute
    and peak memory, beside the same class judged in one process with no isolation."""
    from .course.benchgrade import bench_grade

    _course(course)
    if n < 10:
        raise InputError("-n must be at least 10", code="E_USAGE")
    if as_json:
        _print_json(bench_grade(n, jobs))
        return
    from rich.progress import Progress

    with Progress(console=_console(), transient=True) as bar:
        tasks = {}

        def step(stage, done, total):
            if stage not in tasks:
                tasks[stage] = bar.add_task("grading (isolated)" if stage == "grader" else "the floor (one process)",
                                            total=total)
            bar.update(tasks[stage], completed=done)

        r = bench_grade(n, jobs, progress=step)
    typer.echo(f"grader: {r['submissions']} submissions x {r['tests_each']} tests in {r['seconds']} s = "
               f"{r['per_minute']} per minute on {r['jobs']} jobs in {r['sandbox']}  |  peak memory {r['grader_peak_mb']} MB "
               f"(largest child {r['largest_child_mb']} MB)")
    typer.echo(f"floor: {r['floor_submissions']} submissions in {r['floor_seconds']} s = {r['floor_per_minute']} per "
               f"minute, one process, no isolation ({r['floor_skipped']} hostile ones skipped: they would end it)  |  "
               f"isolation costs {r['ratio']}x per submission")
    for line in r["unexpected_scores"]:
        typer.echo(f"  unexpected: {line}")


@bench_app.command("trace")
def bench_trace(
    n: int = typer.Option(1_000_000, "-n", help="Messages in the generated trace."),
    as_json: bool = JSON_OPT,
):
    """Validate a generated trace beside json.load of the same file, in process and as the command a user runs."""
    from .bench import bench_trace as run

    if n < 12:
        raise InputError("-n must be at least 12", code="E_USAGE")
    r = run(n)
    if as_json:
        _print_json(r)
        return
    typer.echo(f"trace: {r['messages']:,} messages ({r['file_mb']} MB)\n"
               f"  in process: validate {r['validate_seconds']} s  |  floor json.load {r['json_load_seconds']} s  |  "
               f"ratio {r['ratio']:.2f}  |  peak RSS {r['peak_rss_mb']} MB\n"
               f"  the command: protolab trace validate {r['command_seconds']} s  |  floor python -c json.load "
               f"{r['json_load_command_seconds']} s  |  ratio {r['command_ratio']:.2f} (issue 12's target: 1.3)")


@bench_app.command("tui")
def bench_tui_cmd(
    events: int = typer.Option(100_000, "--events", help="Build a finished stress run with about this many events."),
    db: Optional[Path] = typer.Option(None, "--db", help="Measure this finished run instead of building one."),
    samples: int = typer.Option(300, "--samples", help="Random scroll positions to draw."),
    datatable: bool = typer.Option(False, "--datatable", help="Also time Textual's DataTable holding every event row."),
    as_json: bool = JSON_OPT,
):
    """Open a large finished run in the TUI (headless) and scroll it; floors: bare sqlite3 reads."""
    import tempfile

    from .tui.bench import bench_tui, make_run

    with tempfile.TemporaryDirectory() as tmp:
        path = db
        if path is None:
            path = Path(tmp) / "bench-tui.db"
            with _progress(True) as bar:
                make_run(path, events, progress=bar)
        else:
            from .store import Store

            Store.open(path, readonly=True).close()  # refuses a missing, corrupt or foreign file
        out = bench_tui(path, samples=samples, datatable=datatable)
    if as_json:
        _print_json(out)
        return
    rows = [
        ["open to first frame", f"{out['open_s']:.3f} s", f"{out['floor_open_s'] * 1000:.2f} ms",
         ("under 2 s" if out["open_s"] < 2 else "OVER 2 s") + "; floor: bare sqlite3 reads"],
        ["  an empty Textual app, for scale", "", f"{out['floor_empty_app_s']:.3f} s", "floor: Textual's own start"],
        ["one frame while scrolling (median)", f"{out['frame_ms_median']} ms", f"{out['floor_frame_ms_median']} ms",
         f"p95 {out['frame_ms_p95']} ms"],
        ["page down, through the keyboard", f"{out['pagedown_ms']} ms", f"{out['floor_key_ms']} ms", "floor: an unbound key"],
    ]
    if "datatable_open_s" in out:
        rows.append(["DataTable with every row (avoided)", f"{out['datatable_open_s']} s", "", ""])
    _console().print(_table(f"bench tui: {out['events']:,} events at {out['terminal']}", ["", "protolab", "floor", "note"], rows))


@bench_app.command("startup")
def bench_startup(as_json: bool = JSON_OPT, repeat: int = typer.Option(7, "--repeat", help="Runs; the best is kept.")):
    """Wall time of 'protolab --help' beside a bare 'python -c pass' (budget: 300 ms)."""
    from .bench import bench_startup as run

    result = run(max(1, repeat))
    if as_json:
        _print_json(result)
        return
    typer.echo(
        f"startup: protolab --help {result['help_ms']:.0f} ms  |  floor python -c pass {result['floor_ms']:.0f} ms  |  "
        f"ratio {result['ratio']:.2f}  |  budget 300 ms: {'within' if result['within_budget'] else 'OVER'}"
    )


# ---------------------------------------------------------------------------- entry point


def _click_errors(name: str) -> tuple[type, ...]:
    """Click's exception class ``name`` and Typer's vendored copy of it (Typer >= 0.29 has its own)."""
    import click

    mods = [click.exceptions]
    try:
        import typer._click.exceptions as vendored  # type: ignore[import-not-found]

        mods.append(vendored)
    except ImportError:
        pass
    return tuple(getattr(m, name) for m in mods if hasattr(m, name))


# ---------------------------------------------------------------------------- exercises


@exercise_app.command("list")
def exercise_list(as_json: bool = JSON_OPT):
    """Every exercise: number, title, minutes, points in public and hidden tests."""
    from .course.catalog import exercises

    rows = []
    for ex in exercises():
        hidden = ex.hidden_points()
        rows.append({"number": ex.number, "slug": ex.slug, "title": ex.title, "minutes": ex.minutes,
                     "files": list(ex.files), "public_points": ex.public_points, "hidden_points": hidden,
                     "folder": ex.dirname, "summary": ex.summary})
    if as_json:
        _print_json(rows)
        return
    _console().print(_table("Exercises", ["#", "exercise", "minutes", "you edit", "points (public + hidden)"],
                            [[r["number"], r["title"], r["minutes"], ", ".join(r["files"]),
                              f"{r['public_points']} + {r['hidden_points'] if r['hidden_points'] is not None else '?'}"]
                             for r in rows],
                            caption="protolab exercise start N copies the starter files to ./NN-slug; "
                                    "protolab exercise check N runs the public tests"))


def _is_exercise_folder(d: Path, ex) -> bool:
    """True when ``d`` is a copy of exercise ``ex`` made by ``exercise start``."""
    import tomllib

    try:
        return tomllib.loads((d / "exercise.toml").read_text(encoding="utf-8")).get("number") == ex.number
    except (OSError, ValueError):
        return False


def _exercise_dir(ex, folder: Optional[Path]) -> Path:
    d = folder if folder is not None else Path(ex.dirname)
    if folder is None and not d.is_dir():
        # run from inside the exercise's folder, or from a folder below the one it was started in:
        # the nearest of ., its parents, and their NN-slug folders
        here = Path.cwd()
        for up in (here, *here.parents):
            if _is_exercise_folder(up, ex) or (up / ex.dirname).is_dir():
                found = up if _is_exercise_folder(up, ex) else up / ex.dirname
                d = Path(os.path.relpath(found, here)) if found != here else Path(".")
                break
    if not d.is_dir():
        if folder is not None:
            raise InputError(f"{d} is not a folder; name the folder holding {', '.join(ex.files)}, or start the "
                             f"exercise with 'protolab exercise start {ex.number}'", code="E_DIR_MISSING")
        raise InputError(f"no {ex.dirname} folder in {Path.cwd()} or any folder above it; start the exercise with "
                         f"'protolab exercise start {ex.number}', or name your folder: "
                         f"'protolab exercise check {ex.number} PATH'", code="E_DIR_MISSING")
    missing = [f for f in ex.files if not (d / f).is_file()]
    if missing:
        raise InputError(f"{d} has no {missing[0]}; exercise {ex.number} is judged on {', '.join(ex.files)}",
                         code="E_FILE_MISSING")
    return d


@exercise_app.command("start")
def exercise_start(
    which: str = typer.Argument(..., help="The exercise: its number (1) or slug (envelope-design)."),
    folder: Optional[Path] = typer.Argument(None, help="Where to put it (default ./NN-slug); must not exist."),
):
    """Copy an exercise's README, starter files and public tests to a new folder."""
    import shutil

    from .course.catalog import get_exercise

    ex = get_exercise(which)
    dest = folder if folder is not None else Path(ex.dirname)
    if dest.exists():
        raise InputError(f"{dest} already exists; nothing was copied (pick another folder or remove it)", code="E_DIR_EXISTS")
    if not dest.parent.exists():
        raise InputError(f"folder {dest.parent} does not exist", code="E_DIR_MISSING")
    tmp = dest.with_name(f".{dest.name}.partial-{os.getpid()}")
    try:
        shutil.copytree(ex.folder, tmp, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    typer.echo(f"exercise {ex.number}: {ex.title} -> {dest}/")
    typer.echo(f"  read {dest}/README.md, edit {', '.join(ex.files)}, then:")
    typer.echo(f"  protolab exercise check {ex.number}{'' if folder is None else ' ' + str(dest)}"
               "            (--watch re-checks on every save)")


def _render_report(report, con) -> None:
    ex = report.exercise
    con.print(f"[bold]exercise {ex.number}: {ex.title}[/]  ({report.submission})")
    failed = [r for r in report.results if not r.passed and not r.grader_error]
    # One cause for every failure (the file does not import, a function is missing, the code ran out
    # of time or memory before any test could finish): said once, above the tests, with no hints.
    once = failed[0].message if len(failed) > 1 and len({r.message for r in failed}) == 1 else None
    if once is not None:
        con.print(f"  [bold red]your files could not be tested[/]: {once}", highlight=False)
        con.print("  (every test below failed for this one reason; fix it and check again)", highlight=False,
                  style="dim")
    for r in report.results:
        mark = "[green]PASS[/]" if r.passed else "[bold yellow]N/G [/]" if r.grader_error else "[bold red]FAIL[/]"
        tag = " [dim](hidden)[/]" if r.hidden else " [dim](with hidden cases)[/]" if r.hidden_cases_ran else ""
        con.print(f"  {mark} {r.points:g}/{r.max_points}  {r.name}{tag}: {r.title}", highlight=False)
        if r.grader_error:
            con.print(f"       {r.message}", highlight=False, markup=False)
        elif not r.passed and once is None:
            con.print(f"       what broke: {r.message}", highlight=False, markup=False)
            if r.reproduce:
                con.print(f"       reproduce:  {r.reproduce}", highlight=False, markup=False,
                          soft_wrap=True)  # one line, so that copy and paste keeps it whole
            if r.hint:
                con.print(f"       hint:       {r.hint}", highlight=False, markup=False)
    con.print(f"score: {report.score:g}/{report.max_score}", highlight=False)
    said = _sandbox_line(report)
    if said:
        con.print(said, highlight=False, markup=False, style="dim")
    if not report.hidden_ran:
        hp = report.hidden_points
        hidden = f"{hp} more points are in hidden tests" if hp else "hidden tests may exist"
        more = [r.name for r in report.results if r.hidden_cases]
        if more:
            hidden += f"; the grader also tries hidden cases of {', '.join(more)}"
        verdict = "all public tests pass" if report.all_passed else "some public tests fail"
        con.print(f"[bold]{verdict}[/]: these public tests cover {report.max_score} points; {hidden}, which the "
                  "instructor runs. This is not your grade.", highlight=False)


def _check_once(ex, d: Path, as_json: bool, hidden: bool = False) -> int:
    from .course.evaluate import evaluate

    con = _console()
    with _progress(not as_json) as bar:
        job = bar.add_task(f"exercise {ex.number}", total=len(ex.tests))
        report = evaluate(ex, d, hidden=hidden, progress=lambda done, total, name: bar.update(job, completed=done))
    if as_json:
        _print_json(report.to_dict())
    else:
        _render_report(report, con)
    return 0 if report.all_passed else 1


@exercise_app.command("check")
def exercise_check(
    which: str = typer.Argument(..., help="The exercise: its number or slug."),
    folder: Optional[Path] = typer.Argument(None, help="The folder holding your files (default ./NN-slug)."),
    watch: bool = typer.Option(False, "--watch", help="Check again whenever a file in the folder changes (ctrl+c stops)."),
    as_json: bool = JSON_OPT,
):
    """Run the public tests: points per test, what broke, the command that reproduces it, a hint.
    Exit 0 when every public test passes, 1 when one fails."""
    from .course.catalog import get_exercise

    ex = get_exercise(which)
    d = _exercise_dir(ex, folder)
    if not watch:
        raise typer.Exit(_check_once(ex, d, as_json))
    import time

    def stamp():
        return sorted((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in d.rglob("*")
                      if p.is_file() and "__pycache__" not in p.parts)

    seen = None
    try:
        while True:
            now = stamp()
            if now != seen:
                seen = now
                if not as_json:
                    _console().rule(f"checking {d} ({time.strftime('%H:%M:%S')})")
                _check_once(ex, d, as_json)
                if not as_json:
                    typer.echo("watching for changes (ctrl+c stops)")
            time.sleep(0.5)
    except KeyboardInterrupt:
        raise typer.Exit(0)


@exercise_app.command("hint")
def exercise_hint(
    which: str = typer.Argument(..., help="The exercise: its number or slug."),
    folder: Optional[Path] = typer.Argument(None, help="The folder holding your files (default ./NN-slug)."),
):
    """The hint for the first failing public test (the tests run first)."""
    from .course.catalog import get_exercise
    from .course.evaluate import evaluate

    ex = get_exercise(which)
    d = _exercise_dir(ex, folder)
    report = evaluate(ex, d)
    first = report.first_failure()
    if first is None:
        typer.echo(f"every public test of exercise {ex.number} passes; hidden tests remain, which the instructor runs")
        return
    typer.echo(f"{first.name}: {first.title}")
    typer.echo(f"  what broke: {first.message}")
    typer.echo(f"  hint: {first.hint or '(this test has no hint)'}")


# ------------------------------------------------------------------------ student kit and autograder

def _course(course: Optional[Path]) -> None:
    """--course DIR: the course's solutions (hidden tests, model answers) from now on in this command."""
    if course is not None:
        from .course.catalog import use_course

        use_course(course)


def _sandbox_line(report_or_text) -> str:
    """One line on which sandbox judged it; the fallback says what to do about it."""
    text = report_or_text if isinstance(report_or_text, str) else getattr(report_or_text, "sandbox", "")
    if not text:
        return ""
    if text.startswith("fallback"):
        return (f"sandbox: {text}; student code ran with the audit hooks and limits alone (install bubblewrap, "
                "'apt-get install bubblewrap', for the operating-system sandbox)")
    return f"sandbox: {text}"

kit_app = typer.Typer(help="(Instructors) the student kit: build it (no solutions, no hidden tests) and verify that "
                           "every exercise's answers are judged right.", no_args_is_help=True)
app.add_typer(kit_app, name="kit")


@kit_app.command("student")
def kit_student(dest: Path = typer.Argument(..., help="Where to write the kit: a new or empty folder, or a previous "
                                                      "kit (replaced)."),
                course: Optional[Path] = COURSE_OPT):
    """(Instructors) write the kit students get: the sim package, data, labs, exercises (starters and
    public tests), pyproject.toml and README; never solutions, hidden tests or planted wrong answers.
    It lands only after two checks: by content (no line of a solution, no hidden test's name or
    title) and by running each exercise's public tests on its starter with only the kit on the path."""
    from .course.kit import build_student_kit, project_root

    root = project_root(course)
    with _progress() as bar:
        job = bar.add_task("smoke check: public tests on each starter", total=None)
        res = build_student_kit(dest, root=root, progress=lambda done, total, name: bar.update(
            job, completed=done, total=total, description=f"smoke check: {name}"))
    typer.echo(f"wrote the student kit to {res.dest}/ ({res.files} files{', replacing the previous kit' if res.replaced else ''})")
    typer.echo("  content: no line of any solution or planted wrong answer, no hidden test's name or title")
    typer.echo(f"  smoke check: with only the kit on the path, no hidden tests and no solutions; the public tests of "
               f"{len(res.exercises)} exercises ran on their starters:")
    for row in res.exercises:
        typer.echo(f"    {row['dirname']}: starter {row['score']:g}/{row['max_score']} on {len(row['tests'])} public tests")
    typer.echo(f"  students: cd {res.dest} && pip install . && protolab exercise list")


@kit_app.command("classroom")
def kit_classroom(
    which: str = typer.Argument(..., help="The exercise: its number or slug."),
    dest: Path = typer.Argument(..., help="A new folder for the class (one folder per submission)."),
    loops: bool = typer.Option(False, "--loops", help="Add the two endless loops too (each spends whole time limits)."),
    course: Optional[Path] = COURSE_OPT,
):
    """(Instructors) a generated class to try the grader on: the model answer, the starter, every
    planted wrong answer and every hostile kind, each named for what it is."""
    from .course.catalog import get_exercise
    from .course.corpus import build_corpus

    _course(course)
    ex = get_exercise(which)
    if dest.exists():
        raise InputError(f"{dest} already exists; give a new folder", code="E_OUTPUT_EXISTS")
    entries = build_corpus(ex, dest, slow=loops)
    want = {"full": "full marks", "less": "less than full marks", "zero": "0, with the reason"}
    t = _table(f"{len(entries)} submissions of exercise {ex.number} in {dest}", ["submission", "must get", "what it is"],
               [[e.name, want[e.expect], e.what] for e in entries], caption=f"protolab grade {ex.number} {dest} grades them all")
    t.columns[0].no_wrap = False
    t.columns[0].overflow = "fold"
    _console().print(t)


@kit_app.command("verify")
def kit_verify(
    exercise: Optional[List[str]] = typer.Option(None, "--exercise", "-e", help="Only this exercise (number or slug); "
                                                                                 "repeat for more."),
    as_json: bool = JSON_OPT,
    mutants: bool = typer.Option(False, "--mutants", help="Measure the tests instead: mutate each model answer "
                                                          "and count the mutants that lose points (target 95%)."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="With --mutants: an even sample of at most "
                                                                     "this many mutants per exercise."),
    course: Optional[Path] = COURSE_OPT,
):
    """(Instructors) judge every exercise as real grading does (hidden tests, each test in the
    sandbox): the model answer must get full marks, the starter and each planted wrong answer less
    (and fail the tests its expect.toml names). Exit 0 when all hold, 1 otherwise.

    With --mutants: the grader's mutation score. Each model answer is mutated (an operator flipped,
    a part of a key dropped, a rule of a table removed, ...); a mutant that behaves as the model
    answer on every case is equivalent, every other one must lose points. Exit 1 when an exercise
    is below the target."""
    from .course.kit import project_root, verify_kit

    root = project_root(course)  # the course, or an error that names --course
    _course(root)
    if mutants:
        _kit_mutants(exercise, as_json=as_json, limit=limit)
        return
    with _progress(not as_json) as bar:
        job = bar.add_task("verifying", total=None)
        rows = verify_kit(root=root, only=exercise, progress=lambda done, total, name: bar.update(
            job, completed=done, total=total, description=f"judged {name}"))
    bad = [r for r in rows if not r.ok]
    if as_json:
        _print_json([r.to_dict() for r in rows])
    else:
        table = [[r.exercise, r.submission, "-" if r.score is None else f"{r.score:g}/{r.max_score}", r.want,
                  "[green]as expected[/]" if r.ok else f"[bold red]WRONG[/] {r.problem}"] for r in rows]
        _console().print(_table("Kit verify: every exercise's answers, judged with hidden tests in the sandbox",
                                ["#", "submission", "score", "expected", "result"], table,
                                caption=f"{len(rows) - len(bad)} of {len(rows)} as expected"))
        for r in bad:
            typer.echo(f"FAILED: exercise {r.exercise} {r.submission}: expected {r.want}; {r.problem}")
    raise typer.Exit(1 if bad else 0)


def _kit_mutants(only, *, as_json: bool, limit) -> None:
    from .course.catalog import exercises, get_exercise
    from .course.mutants import TARGET, mutation_run

    chosen = [get_exercise(x) for x in only] if only else exercises()
    reports = []
    with _progress(not as_json) as bar:
        for ex in chosen:
            job = bar.add_task(f"exercise {ex.number}: mutants", total=None)
            reports.append(mutation_run(ex, limit=limit, progress=lambda done, total, name, job=job: bar.update(
                job, completed=done, total=total, description=f"exercise {ex.number}: mutant {done}/{total}")))
    low = [r for r in reports if r.problem or r.score is not None and r.score < TARGET]
    if as_json:
        _print_json([r.to_dict() for r in reports])
        raise typer.Exit(1 if low else 0)
    rows = [[str(r.exercise), r.slug, str(r.total), str(r.equivalent), str(r.killed), str(len(r.survivors)),
             r.problem or ("-" if r.score is None else f"{r.score:.1%}")] for r in reports]
    _console().print(_table("The grader's mutation score: mutants of each model answer that lose points",
                            ["#", "exercise", "mutants", "equivalent", "lose points", "survive", "score"], rows,
                            caption=f"score = lose points / (mutants - equivalent); target {TARGET:.0%}. An equivalent "
                                    "mutant behaves as the model answer on every case of the exercise's behaviour "
                                    "matrix."))
    for r in reports:
        for m in r.survivors[:10]:
            typer.echo(f"survivor: exercise {r.exercise} {m.mutant.what} (behaves differently at {m.differs})")
    raise typer.Exit(1 if low else 0)


@app.command("autograder")
def autograder_cmd(
    which: str = typer.Argument(..., help="The exercise: its number or slug."),
    output: Path = typer.Option(..., "-o", "--output", help="The zip to write (a new file, or a previous "
                                                            "protolab autograder zip, replaced)."),
    course: Optional[Path] = COURSE_OPT,
):
    """(Instructors) a Gradescope autograder zip for one exercise: setup.sh, run_autograder and the
    bundled source with this exercise's hidden tests. Gradescope runs it once per submission."""
    from .course.autograder import build_autograder
    from .course.kit import project_root

    info = build_autograder(which, output, root=project_root(course))
    typer.echo(f"wrote {output}: the Gradescope autograder of exercise {info['exercise']} ({info['title']}), "
               f"{info['tests']} public + {info['hidden_tests']} hidden tests, {info['bytes'] // 1024} KB")
    typer.echo("  upload it under Configure Autograder (Ubuntu base image); students submit "
               "their files, loose, in a folder or zipped")
    typer.echo("  try it here: unzip it into ROOT/source, put a submission in ROOT/submission, then "
               "PROTOLAB_AUTOGRADER_ROOT=ROOT PROTOLAB_PYTHON=$(which python) ROOT/source/run_autograder")


# ------------------------------------------------------------------------------------------ labs

lab_app = typer.Typer(help="Guided labs played in the TUI, checked live from your own run: list, start, check, "
                           "status, submit, verify. 'protolab lab' alone opens the lab menu.",
                      invoke_without_command=True)
app.add_typer(lab_app, name="lab")
PROGRESS_FILE = "protolab-progress.db"
PROGRESS_OPT = typer.Option(None, "--progress",
                            help=f"Your lab progress file (checkpoints' actions, answers, time spent; default: {PROGRESS_FILE} "
                                 "in this folder or the nearest folder above it that has one).")


def _shown_path(p: Path) -> Path:
    """``p`` as a learner would type it from here: relative to this folder when it is below it."""
    try:
        full, here = Path(p).resolve(), Path.cwd().resolve()
        return Path(os.path.relpath(full, here)) if full.is_relative_to(here) else full
    except (OSError, ValueError):
        return Path(p)


def _find_progress(progress: Optional[Path]) -> tuple[Path, bool]:
    """The progress file: the one given, or ``protolab-progress.db`` in this folder or the nearest
    folder above it that has one (like git finds its repository). ``(path, exists)``; when none
    is found, the path is this folder's (where 'lab start' creates it)."""
    if progress is not None:
        return progress, progress.exists()
    here = Path.cwd()
    for d in (here, *here.parents):
        if (d / PROGRESS_FILE).is_file():
            return _shown_path(d / PROGRESS_FILE), True
    return Path(PROGRESS_FILE), False


def _not_found(progress: Optional[Path]) -> str:
    if progress is not None:
        return f"{progress} does not exist"
    return (f"no {PROGRESS_FILE} in {Path.cwd()} or any folder above it: run from the folder where you played the labs, "
            "or point to the file with --progress FILE")


def _lab_db(lab, db: Optional[Path], progress_path: Path, prog) -> Path:
    """The lab's run: the --db given, else the one the progress file recorded for the lab (a path
    relative to the progress file's folder), else labNN.db beside the progress file."""
    if db is not None:
        return db
    rec = prog.session(lab.number) if prog is not None else None
    if rec:
        p = Path(rec["db"])
        return _shown_path(p if p.is_absolute() else Path(progress_path).parent / p)
    return _shown_path(Path(progress_path).parent / lab.default_db)


def _recorded_db(db: Path, progress_path: Path) -> str:
    """How the progress file records a lab's run: relative to its own folder when below it."""
    full, base = Path(db).resolve(), Path(progress_path).resolve().parent
    return str(full.relative_to(base)) if full.is_relative_to(base) else str(full)


def _lab_judged(lab, db: Path, prog):
    """The lab's judgement of the run at ``db`` (:mod:`sim.labs.judge`: re-delivered, checkpoints
    and answers evaluated afresh), with what ``prog`` recorded (None: nothing recorded)."""
    from .labs.judge import judge_progress
    from .store import ProgressStore, Store

    store = Store.open(db, readonly=True)
    empty = ProgressStore.open(None) if prog is None else None
    try:
        return judge_progress(lab, store, prog if prog is not None else empty)
    finally:
        store.close()
        if empty is not None:
            empty.close()


def _lab_rows(progress: Optional[Path]) -> tuple[list[dict], Path, bool]:
    """Every lab with its run judged as 'lab check' judges it (rows, the progress file, found)."""
    from .labs.catalog import labs

    path, found = _find_progress(progress)
    prog = _open_progress(path, must_exist=False)
    try:
        rows = []
        for lab in labs():
            session = prog.session(lab.number) if prog else None
            db = _lab_db(lab, None, path, prog)
            row = {"number": lab.number, "slug": lab.slug, "title": lab.title, "minutes": lab.minutes,
                   "needs": list(lab.needs), "checkpoints": len(lab.checkpoints), "done": 0,
                   "questions": len(lab.questions), "answered": 0,
                   "seconds": round(session["seconds"]) if session else 0, "run": None, "genuine": None, "note": ""}
            if db.exists():
                row["run"] = str(db)
                try:
                    j = _lab_judged(lab, db, prog)
                    row.update(done=j.done, answered=j.answered, genuine=j.genuine)
                    if j.genuine is False:
                        row["note"] = "run not genuine: verification gives it 0"
                except ProtolabError as e:
                    row["note"] = f"{e.code}: {e.message}"
            rows.append(row)
        return rows, path, found
    finally:
        if prog is not None:
            prog.close()


def _open_progress(path: Path, *, must_exist: bool, readonly: bool = True):
    """The progress file; None when it does not exist and need not."""
    from .store import ProgressStore

    if not Path(path).exists() and not must_exist:
        return None
    return ProgressStore.open(path, create=not readonly, readonly=readonly)


@lab_app.callback()
def lab_menu(ctx: typer.Context, progress: Optional[Path] = PROGRESS_OPT):
    """The lab menu in the TUI (with no command): number, title, minutes, checkpoints, progress."""
    if ctx.invoked_subcommand is not None:
        return
    if not _interactive():
        raise InputError("the lab menu needs a terminal; 'protolab lab list' prints it", code="E_NOT_A_TERMINAL")
    rows, _path, _found = _lab_rows(progress)
    from .tui.guide import LabMenu

    chosen = LabMenu(rows).run()
    if chosen is not None:
        lab_start(None, str(chosen), db=None, progress=progress, fresh=False)  # reopens (resumes) the lab's run


def _progress_given(ctx, progress: Optional[Path]) -> Optional[Path]:
    """--progress after the subcommand, or before it ('protolab lab --progress F check 3')."""
    if progress is not None or ctx is None or ctx.parent is None:
        return progress
    return ctx.parent.params.get("progress")


@lab_app.command("list")
def lab_list(ctx: typer.Context, as_json: bool = JSON_OPT, progress: Optional[Path] = PROGRESS_OPT):
    """Every lab: number, title, minutes, what it needs first, checkpoints done of total (your runs, judged)."""
    progress = _progress_given(ctx, progress)
    rows, path, found = _lab_rows(progress)
    if as_json:
        keep = ("number", "slug", "title", "minutes", "needs", "checkpoints", "done")
        typer.echo(json.dumps([{k: r[k] for k in keep} for r in rows], indent=2))
        return
    from rich.table import Table

    from .tui.guide import progress_bar

    t = Table(box=None, header_style="bold")
    for col in ("#", "lab", "min", "needs", "checkpoints", ""):
        t.add_column(col, overflow="fold")
    for r in rows:
        t.add_row(str(r["number"]), r["title"], str(r["minutes"]), ", ".join(map(str, r["needs"])) or "-",
                  f"{r['done']}/{r['checkpoints']}", progress_bar(r["done"], r["checkpoints"]))
    _console().print(t)
    typer.echo("protolab lab start N opens lab N in the TUI"
               + (f" (progress: {path})" if found else f"; {_not_found(progress)}"))


@lab_app.command("status")
def lab_status(ctx: typer.Context, as_json: bool = JSON_OPT, progress: Optional[Path] = PROGRESS_OPT):
    """Your progress over all labs, each run judged as 'lab check' and 'lab verify' judge it:
    checkpoints met, questions answered right, time spent."""
    progress = _progress_given(ctx, progress)
    rows, path, found = _lab_rows(progress)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    from rich.table import Table

    from .tui.guide import progress_bar

    t = Table(box=None, header_style="bold")
    for col in ("#", "lab", "checkpoints", "", "questions", "time", "run"):
        t.add_column(col)
    for r in rows:
        t.add_row(str(r["number"]), r["title"], f"{r['done']}/{r['checkpoints']}", progress_bar(r["done"], r["checkpoints"]),
                  f"{r['answered']}/{r['questions']}", f"{r['seconds'] // 60} min" if r["seconds"] else "-",
                  r["note"] or (r["run"] or "-"))
    _console().print(t)
    done = sum(r["done"] == r["checkpoints"] and r["answered"] == r["questions"] and r["genuine"] is not False
               for r in rows)
    typer.echo(f"{done} of {len(rows)} labs complete" + (f" (progress: {path})" if found else f"; {_not_found(progress)}"))


@lab_app.command("start")
def lab_start(
    ctx: typer.Context,
    which: str = typer.Argument(..., help="The lab: its number (3) or slug (duplicate-delivery)."),
    db: Optional[Path] = typer.Option(None, "--db", help="Where your run is written (default: the one your progress "
                                                         "file recorded, else labNN.db beside it)."),
    progress: Optional[Path] = PROGRESS_OPT,
    fresh: bool = typer.Option(False, "--fresh", help="Start the lab over: a new run replaces this lab's run, and "
                                                      "the lab's progress (actions, answers) is forgotten."),
):
    """Open a lab in the TUI: the run, paused, with the Guide panel beside State, Events and Messages.
    A lab played before is resumed where you left it (its run is replayed from its journal)."""
    from .labs.catalog import get_lab

    progress = _progress_given(ctx, progress)
    lab = get_lab(which)
    if not _interactive():
        raise InputError(f"a lab is played in the TUI, which needs a terminal; 'protolab lab check {lab.number}' "
                         "checks a run from the shell", code="E_NOT_A_TERMINAL")
    import shutil

    from .labs.resume import open_lab_run
    from .labs.session import LabSession
    from .store import ProgressStore
    from .tui.app import MIN_SIZE, ProtolabApp

    cols, rows = shutil.get_terminal_size((80, 24))
    if cols < MIN_SIZE[0] or rows < MIN_SIZE[1]:
        raise InputError(f"the terminal is {cols}x{rows}; a lab needs at least {MIN_SIZE[0]}x{MIN_SIZE[1]} "
                         "(80x24 or more is comfortable)", code="E_TERMINAL_TOO_SMALL")
    path, _found = _find_progress(progress)
    prog = ProgressStore.open(path)
    try:
        db = _lab_db(lab, db, path, prog)
        run = open_lab_run(lab, db, fresh=fresh)  # refuses (and keeps every file) before anything is forgotten
        try:
            if fresh:
                prog.reset(lab.number)
            prog.start_session(lab.number, _recorded_db(db, path))
            session = LabSession(lab, run.store, prog)
            said = (f"your run of lab {lab.number}, resumed: {run.store.last_delivery()} deliveries"
                    if run.resumed else "")
            if lab.mode == "hand-delivery":
                app = ProtolabApp(run.store, lab=session, watch=True,
                                  label=f"lab {lab.number} · delivered by hand: protolab deliver FILE --db {db}")
            elif lab.mode == "workshop":
                # naive beside the learner's (safe) run: same scenario, seed and faults, in memory;
                # the checks read the learner's run, which is the file lab check and submit use
                from .tui.workshop import WorkshopApp

                app = WorkshopApp(run.naive, run.live, lab=session)
            else:
                app = ProtolabApp(run.store, live=run.live, play=False, lab=session)
            app.message_line = said
            app.run()
        finally:
            run.close()
        j = _lab_judged(lab, db, prog)
        typer.echo(f"lab {lab.number}: {j.done}/{j.total} checkpoints met, {j.answered}/{j.questions} questions answered; "
                   f"your run is in {db} (protolab lab check {lab.number}; protolab lab start {lab.number} resumes it)")
    finally:
        prog.close()


@lab_app.command("check")
def lab_check(
    ctx: typer.Context,
    which: str = typer.Argument(..., help="The lab: its number or slug."),
    db: Optional[Path] = typer.Option(None, "--db", help="Your run (default: the one your progress file recorded, "
                                                         "else labNN.db beside it)."),
    progress: Optional[Path] = PROGRESS_OPT,
    as_json: bool = JSON_OPT,
):
    """The lab judged as 'lab verify' and 'grade lab' will judge it: your run re-delivered, every
    checkpoint evaluated on it afresh. Exit 0 when the run is genuine and every checkpoint is met,
    1 otherwise (each unmet one with its hint)."""
    from .labs.catalog import get_lab

    progress = _progress_given(ctx, progress)
    lab = get_lab(which)
    path, found = _find_progress(progress)
    prog = _open_progress(path, must_exist=False)
    try:
        db = _lab_db(lab, db, path, prog)
        if not db.exists():
            where = "" if found or progress is not None else f" ({_not_found(progress)})"
            raise InputError(f"{db} does not exist; play the lab first with 'protolab lab start {lab.number}'{where}",
                             code="E_DB_MISSING")
        j = _lab_judged(lab, db, prog)
    finally:
        if prog is not None:
            prog.close()
    summary = j.to_dict()
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        typer.echo(f"lab {lab.number}: {lab.title}  ({j.done}/{j.total} checkpoints, run {db})")
        if j.genuine is False:
            typer.echo(f"  run: NOT genuine: {j.difference} (lab verify and grade lab give it 0)")
        if not j.made_by_lab:
            typer.echo(f"  note: 'protolab lab start {lab.number}' did not make this run; what you did in the TUI on "
                       "the lab's own run does not count here")
        for c in summary["checkpoints"]:
            typer.echo(f"  {'✓' if c['met'] else '✗'} {c['title']}")
            if c["met"] and c["shows"]:
                typer.echo(f"      {c['shows']}")
            if not c["met"]:
                typer.echo(f"      hint: {c['hint']}")
        typer.echo(f"questions answered right: {j.answered}/{j.questions} (press a in the TUI)"
                   + ("" if found or progress is not None else f"; {_not_found(progress)}"))
    if not j.all_met:
        raise typer.Exit(1)


@lab_app.command("submit")
def lab_submit(
    ctx: typer.Context,
    which: str = typer.Argument(..., help="The lab: its number or slug."),
    out: Path = typer.Option(..., "-o", "--output", help="The submission file to write (.protolab)."),
    db: Optional[Path] = typer.Option(None, "--db", help="Your run (default: the one your progress file recorded, "
                                                         "else labNN.db beside it)."),
    progress: Optional[Path] = PROGRESS_OPT,
):
    """One file for your instructor: the run, your actions and answers, and the judgement 'lab verify' will repeat."""
    from .labs.catalog import get_lab
    from .labs.submit import write_submission

    progress = _progress_given(ctx, progress)
    lab = get_lab(which)
    path, found = _find_progress(progress)
    prog = _open_progress(path, must_exist=False)
    try:
        db = _lab_db(lab, db, path, prog)
    finally:
        if prog is not None:
            prog.close()
    summary = write_submission(lab, db, path, out)
    typer.echo(f"wrote {out}: lab {lab.number}, {summary['done']}/{summary['total']} checkpoints, "
               f"{summary['answered']}/{len(summary['questions'])} questions (run {db})")
    if summary["genuine"] is False:
        typer.echo(f"warning: the run is NOT genuine ({summary['difference']}): verification gives it 0", err=True)
    if not found:
        typer.echo(f"note: {_not_found(progress)}; without it, no action or answer of yours is in the file", err=True)


@lab_app.command("verify")
def lab_verify(
    submission: Path = typer.Argument(..., help="A lab submission (.protolab) to verify."),
    as_json: bool = JSON_OPT,
):
    """(Instructors) re-deliver the submitted run through the reference runtime and re-check it:
    exit 0 when the run is genuine and every checkpoint is met, 1 otherwise."""
    from .labs.submit import verify_submission

    result = verify_submission(submission)
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        typer.echo(f"lab {result['lab']}: {result['title']}")
        typer.echo(f"  run: {'genuine (re-delivery gives the same state digest)' if result['genuine'] else 'NOT genuine: ' + result['difference']}")
        typer.echo(f"  checkpoints: {result['done']}/{result['total']}  questions: {result['answered']}/{result['questions']}")
    if not (result["genuine"] and result["done"] == result["total"]):
        raise typer.Exit(1)


# ---------------------------------------------------------------------------------- grading


def _grid_table(report):
    """The submission's runs (rows, grouped by scenario) by invariant (columns): what held under which faults."""
    from rich import box
    from rich.table import Table

    from .course.grade import SHORT, fault_grid

    names, rows = fault_grid(report)
    if not rows:
        return None
    t = Table(title="faults by invariant (✓ held, ✗ broke; end: the run ended as the reference's did)",
              title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 0))
    t.add_column("scenario / faults", no_wrap=True, overflow="ellipsis")
    for n in names:
        t.add_column(SHORT.get(n, n.lower()[:5]), justify="center", no_wrap=True, width=5)
    t.add_column("end", justify="center", no_wrap=True, width=4)
    scenario = None
    for r in rows:
        sc = r.get("scenario") or ""
        if sc != scenario:
            scenario = sc
            t.add_row(f"[bold]{sc}[/]" if sc else "", *[""] * (len(names) + 1))
        label = "  " + (" + ".join(r.get("faults") or ()) or "(no faults)")
        cells = ["[green]✓[/]" if r["invariants"].get(n, True) else "[bold red]✗[/]" if n in r["invariants"] else "·"
                 for n in names]
        held = all(r["invariants"].values())
        end = "[green]✓[/]" if r["ok"] else ("[bold red]✗[/]" if held else "·")
        t.add_row(label, *cells, end)
    return t


def _explain(report, con) -> None:
    _render_report(report, con)
    if report.problem:
        return
    grid = _grid_table(report)
    if grid is not None:
        con.print()
        con.print(grid)
        from .course.grade import SHORT, fault_grid

        names, _rows = fault_grid(report)
        con.print("  " + "  ".join(f"{SHORT.get(n, n)}={n}" for n in names), highlight=False, style="dim")


def _grade_exercise(ex, path: Path, *, csv_out, gradescope, explain: bool, as_json: bool, jobs) -> None:
    from .course.grade import collect, grade_all, workdir, write_gradebook

    cases = [t.name for t in ex.tests if t.hidden_cases]
    if (not ex.hidden_tests() and ex.hidden_points()) or (cases and not ex.extensions()):
        what = (f"hidden tests ({ex.hidden_points()} points)" if not ex.hidden_tests() and ex.hidden_points()
                else f"hidden cases (of {', '.join(cases[:3])}{' ...' if len(cases) > 3 else ''})")
        raise InputError(f"exercise {ex.number}'s {what} are not in this install, so a grade would cover the public "
                         "tests only: run from your protolab checkout, name it with --course DIR, or set "
                         "PROTOLAB_SOLUTIONS to its solutions/ folder", code="E_NO_SOLUTIONS")
    con = _console()
    with workdir() as tmp:
        subs = collect(ex, path, Path(tmp))
        if explain and len(subs) != 1:
            raise InputError(f"--explain grades one submission; {path} holds {len(subs)} "
                             f"(give one of them, e.g. {subs[0].source})", code="E_USAGE")
        if gradescope is not None and gradescope.exists() and not gradescope.is_dir():
            raise InputError(f"{gradescope} is a file; --gradescope names a folder", code="E_OUTPUT")
        with _progress(not as_json) as bar:
            job = bar.add_task(f"grading exercise {ex.number}", total=len(subs))
            reports = grade_all(ex, subs, jobs=jobs,
                                progress=lambda done, total, name: bar.update(job, completed=done,
                                                                              description=f"graded {name}"))
        if csv_out is not None:
            write_gradebook(csv_out, subs, reports)
        if gradescope is not None:
            from .course.gradescope import results_json

            for s, r in zip(subs, reports):
                d = gradescope / s.name
                d.mkdir(parents=True, exist_ok=True)
                # commands name the student's own folder (as 'exercise start' makes it), not the instructor's copy
                from .course.autograder import note_sandbox

                d_json = note_sandbox(results_json(r, shown_dir=ex.dirname), r.sandbox)
                (d / "results.json").write_text(json.dumps(d_json, indent=2) + "\n", encoding="utf-8")
    _show_grades(ex, subs, reports, con, as_json=as_json, explain=explain, wrote=[x for x in (csv_out, gradescope) if x])
    said = _sandbox_line(next((r.sandbox for r in reports if r.sandbox), ""))
    if said and not as_json and not explain:  # --explain's report says it already
        typer.echo(said)
    if said.startswith("sandbox: fallback"):
        typer.echo("warning: graded on the fallback sandbox, not bubblewrap (see above)", err=True)
    errors = [(s.name, x.name, x.grader_error) for s, r in zip(subs, reports) for x in r.grader_errors]
    if errors:  # the kit's fault, never the student's: the instructor must hear of it, and the exit status says so
        typer.echo(f"warning: {len(errors)} test(s) could not be graded because a judge failed (a grader error, not the "
                   "students' fault; those tests are reported as not gradable, 0 points until regraded):", err=True)
        for student, test, what in errors[:10]:
            typer.echo(f"  {student} {test}: {what}", err=True)
        if len(errors) > 10:
            typer.echo(f"  ... and {len(errors) - 10} more (--json lists every one under grader_error)", err=True)
        raise typer.Exit(1)


def _show_grades(ex, subs, reports, con, *, as_json: bool, explain: bool, wrote: list) -> None:
    if as_json:
        out = []
        for s, r in zip(subs, reports):
            out.append({"student": s.name, **r.to_dict()})
        _print_json(out)
        return
    if explain:
        _explain(reports[0], con)
        return
    rows = []
    for s, r in zip(subs, reports):
        marks = "".join("[green]✓[/]" if x.passed else ("[yellow]◐[/]" if x.points > 0 else "[red]✗[/]")
                        for x in r.results)
        first = r.problem or next((f"{x.name}: {x.message}" for x in r.results if not x.passed), "")
        rows.append([s.name, f"{r.score:g}", marks, first])
    names = " ".join(x.name for x in reports[0].results) if reports else ""
    top = reports[0].max_score if reports else 0
    t = _table(f"Exercise {ex.number}: {ex.title} ({len(subs)} submissions; scores out of {top}, public and hidden tests)",
               ["student", "score", "tests", "first problem"], rows,
               caption=f"tests in order: {names}. ✓ full marks, ◐ part, ✗ none. "
                       "--explain on one submission shows what broke, how to reproduce it and the hint.")
    t.columns[0].overflow, t.columns[0].max_width = "fold", 28
    ntests = len(reports[0].results) if reports else 0
    room = max(20, con.width - (min(28, max((len(s.name) for s in subs), default=7)) + 7 + max(5, ntests) + 12))
    for cell_row in rows:  # one line per student: the first problem, cut to the room left
        if len(cell_row[-1]) > room:
            cell_row[-1] = cell_row[-1][: room - 1] + "…"
    t = _table(t.title, ["student", "score", "tests", "first problem"], rows, caption=t.caption)
    t.columns[0].overflow, t.columns[0].max_width = "fold", 28
    con.print(t)
    if wrote:
        typer.echo(f"wrote {', '.join(map(str, wrote))}")


def _grade_labs(which: str, path: Path, *, csv_out, as_json: bool) -> None:
    from .course.labgrade import collect_labs, grade_labs, write_lab_gradebook
    from .labs.catalog import get_lab

    lab = get_lab(which)
    subs = collect_labs(path)
    con = _console()
    with _progress(not as_json) as bar:
        job = bar.add_task(f"verifying lab {lab.number} submissions", total=len(subs))
        results = grade_labs(lab, subs, progress=lambda done, total, name: bar.update(job, completed=done))
    if csv_out is not None:
        write_lab_gradebook(csv_out, results)
    if as_json:
        _print_json(results)
        return
    rows = [[r["student"], f"{r['score']:g}", str(r["max_score"]), f"{r['done']}/{r['total']}",
             f"{r['answered']}/{r['questions']}", r["note"]] for r in results]
    con.print(_table(f"Lab {lab.number}: {lab.title} ({len(results)} submissions, each re-delivered)",
                     ["student", "score", "max", "checkpoints", "answers", "note"], rows,
                     caption="score: one point per checkpoint met and per question answered right, "
                             "0 when re-delivering the run does not give the submitted state"))
    if csv_out is not None:
        typer.echo(f"wrote {csv_out}")


@app.command()
def grade(
    which: str = typer.Argument(..., help="The exercise (number or slug), or 'lab' followed by the lab's number."),
    paths: List[Path] = typer.Argument(..., help="The submissions: a folder of one folder or .zip per student, "
                                                 "or one student's folder or zip. After 'lab': the lab, then the folder."),
    csv_out: Optional[Path] = typer.Option(None, "--csv", help="Write a gradebook (CSV): student, score, max, "
                                                                "one column per test."),
    gradescope: Optional[Path] = typer.Option(None, "--gradescope",
                                              help="Write FOLDER/STUDENT/results.json in Gradescope's format."),
    explain: bool = typer.Option(False, "--explain", help="One submission: per test what broke, the command that "
                                                          "reproduces it and the hint, and the fault-by-invariant grid."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, help="Tests judged at once (default: every core)."),
    as_json: bool = JSON_OPT,
    course: Optional[Path] = COURSE_OPT,
):
    """(Instructors) grade a class: public and hidden tests, the students' code in the sandboxed host
    processes (bubblewrap, or the fallback: it says which), a table of scores; --csv, --gradescope
    and --explain for the rest. 'grade lab 3 FOLDER' grades lab submissions (protolab lab submit),
    each verified by re-delivering its run."""
    _course(course)
    if which == "lab":
        if len(paths) != 2:
            raise InputError("grade lab takes the lab and a folder: protolab grade lab 3 submissions/", code="E_USAGE")
        if explain or gradescope is not None:
            raise InputError("--explain and --gradescope are for exercises; lab grading writes a table, --csv "
                             "or --json", code="E_USAGE")
        _grade_labs(str(paths[0]), paths[1], csv_out=csv_out, as_json=as_json)
        return
    from .course.catalog import get_exercise

    ex = get_exercise(which)
    if len(paths) != 1:
        raise InputError(f"grade {which} takes one folder of submissions (or one submission), not {len(paths)}",
                         code="E_USAGE")
    _grade_exercise(ex, paths[0], csv_out=csv_out, gradescope=gradescope, explain=explain, as_json=as_json, jobs=jobs)


@contextlib.contextmanager
def _signals_deferred():
    """Hold SIGINT, SIGTERM and SIGHUP until the block ends (one delivery: its commit and its
    outcome stay together); a signal sent meanwhile is handled as soon as the block ends."""
    import signal

    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _interrupted(e: BaseException, message: str):
    """Raise :class:`~sim.errors.Interrupted` for a signal that stopped a command (exit 128 + n)."""
    import signal

    from .errors import Interrupted, signal_of

    signum = signal_of(e) or int(signal.SIGINT)
    raise Interrupted(message.replace("{sig}", signal.Signals(signum).name), signum=signum) from None


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the app, turning every error into one line and exit 2.

    SIGTERM and SIGHUP unwind like Ctrl-C (every cleanup runs) and exit with 128 + the signal."""
    from .errors import catch_termination, signal_of

    catch_termination()
    try:
        try:
            rv = app(args=argv, prog_name="protolab", standalone_mode=False)
        except SystemExit as e:
            # click answers a closed pipe with exit 1 after muting stdout: end quietly instead
            if e.code == 1 and "PacifyFlushWrapper" in type(sys.stdout).__name__:
                sys.exit(0)
            raise
        except (KeyboardInterrupt, *_click_errors("Abort")) as e:
            if signal_of(e) is None:
                raise
            _interrupted(e, "interrupted by {sig}; every transaction committed before it stays, the one under way "
                            "was rolled back")
    except ProtolabError as e:
        sys.stderr.write(f"error: {e.one_line()}\n")
        sys.exit(getattr(e, "exit_status", 2))
    except _click_errors("NoArgsIsHelpError") as e:
        # bare 'protolab' or 'protolab bench': show the help; that is not an error
        ctx = getattr(e, "ctx", None)
        if ctx is not None:
            sys.stdout.write(ctx.get_help() + "\n")
        sys.exit(0)
    except _click_errors("UsageError") as e:
        msg = " ".join(e.format_message().split())
        sys.stderr.write(f"error: E_USAGE: {msg}\n")
        sys.exit(2)
    except _click_errors("Abort"):
        sys.stderr.write("error: E_ABORTED: interrupted\n")
        sys.exit(1)
    except _click_errors("Exit") as e:
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("error: E_ABORTED: interrupted\n")
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    if rv == 130:  # Typer turns Ctrl-C inside a command into exit status 130: say so, in one line
        from . import errors

        if errors.LAST_SIGNAL is not None:  # it was SIGTERM or SIGHUP, cleaned up the same way
            import signal

            sys.stderr.write(f"error: E_ABORTED: interrupted by {signal.Signals(errors.LAST_SIGNAL).name}\n")
            sys.exit(128 + errors.LAST_SIGNAL)
        sys.stderr.write("error: E_ABORTED: interrupted (Ctrl-C)\n")
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
