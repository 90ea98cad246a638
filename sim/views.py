"""The light commands' work: ``messages``, ``events``, ``state``, ``check`` and ``machine show``, each a
function of its options that prints and returns the exit status. The Typer commands (sim/cli/inspect.py,
sim/cli/machine.py) call them; so does :func:`light`, which parses those commands' options without the
command line (Typer, click and pydantic cost some 100 ms, and importing sim.cli loads every group) so a
look at a run starts as fast as Python and the store allow. Anything it does not read exactly as Typer
would (an unknown option, ``--help``, an option given without its value...) is left to Typer, whose
words the errors are.
"""

from __future__ import annotations

import json
import os
import sys
from itertools import islice
from pathlib import Path

from . import errors, output
from .errors import InputError, ProtolabError, friendly_list
from .machine import A2A_EXTENSION_STATES, A2A_NOTES, A2A_STATE, TaskState, default_rulebook, move_source
from .output import (_console, _digest_cell, _judged, _mark, _open, _plain, _print_json, _print_json_fields,
                     _print_json_rows, _rows_progress, _stream_table, _styled, output_rows, show_view)
from .palette import DECISION_STYLE as _DECISION_STYLE  # the colours live once
from .palette import STATE_STYLE as _STATE_STYLE


def messages(db: Path, as_json: bool = False, task: str | None = None, payloads: bool = False) -> int:
    """The message log: every envelope, and every delivery with its decision."""
    # both logs are streamed from the file as they are printed: flat memory whatever the run's size
    with _open(db, readonly=True) as store:
        if as_json:
            total = store.count_view("messages", task_id=task) + store.count_view("deliveries", task_id=task)
            with _rows_progress(total, "writing the message log") as counted:
                _print_json_fields([("messages", counted(store.iter_view("messages", task_id=task))),
                                    ("deliveries", counted(store.iter_view("deliveries", task_id=task)))])
            return 0
        con = _console()
        show_view(
            con, "Messages (envelopes, one row per message_id)",
            ["message", "type", "from → to", "task", "ev", "idempotency_key / payload_digest"],
            ([m["message_id"], m["type"], f"{m['sender']} → {m['recipient']}", m["task_id"], len(m["evidence_refs"]),
              f"{m['idempotency_key']}\n{_digest_cell(m['payload_digest'], m['digest_scheme'])}"]
             for m in store.iter_view("messages", task_id=task)),
            store.count_view("messages", task_id=task),
            caption="ev: evidence_refs cited; digests are json-sorted-v1 unless marked (jcs) for jcs-v2; --json has everything",
        )
        if payloads:
            con.print("[bold]Payloads (as the log keeps them)[/]")
            for m in store.iter_view("messages", task_id=task):
                con.print(f"  {m['message_id']} {m['type']} to {m['recipient']}: "
                          f"{json.dumps(m['payload'], sort_keys=True, ensure_ascii=False)}", markup=False, soft_wrap=True)
        show_view(
            con, "Deliveries (one row per attempt)",
            ["#", "tick", "message", "task", "decision", "state after", "code"],
            ([d["delivery_id"], d["tick"], d["message_id"], d["task_id"], _styled(d["decision"], _DECISION_STYLE),
              f"{_styled(d['state_after'], _STATE_STYLE)} v{d['state_version_after']}" if d["state_after"] else "-",
              d["code"] or ""]
             for d in store.iter_view("deliveries", task_id=task)),
            store.count_view("deliveries", task_id=task),
        )
    return 0


def _event_summary(e: dict) -> str:
    from .events import summarize  # (with the store: machine show without --db needs neither; see _open)

    return summarize(e["type"], e["data"])


def events(db: Path, as_json: bool = False, task: str | None = None, type_: str | None = None) -> int:
    """The event log: append-only facts, numbered, written only by the runtime."""
    from .store import EVENT_TYPES  # (the store: imported by _open, below, anyway)

    if type_ is not None and type_ not in EVENT_TYPES:
        raise InputError(f"unknown event type {type_!r}; expected one of: {friendly_list(EVENT_TYPES)}", code="E_UNKNOWN_VALUE")
    with _open(db, readonly=True) as store:
        evs = store.iter_events(task_id=task, etype=type_)
        n = store.count_events(task_id=task, etype=type_)
        if as_json:
            with _rows_progress(n, "writing the event log") as counted:
                _print_json_rows(counted(evs))
            return 0
        columns = ["seq", "time", "event", "task", "msg", "what"]
        rows = ([e["seq"], e["created_at"][11:19], e["type"], e["task_id"], e["message_id"], _event_summary(e)] for e in evs)
        if n > output.TABLE_ROWS:  # a long log is streamed as it is read, in flat memory
            task_w, msg_w = store.id_widths()
            _stream_table(f"Events ({n})", columns, rows, {"seq": len(str(store.last_event())), "time": 8,
                                                           "event": max(map(len, EVENT_TYPES)), "task": task_w,
                                                           "msg": msg_w})
        else:
            output_rows(f"Events ({n})", columns, list(rows))
    return 0


def state(db: Path, as_json: bool = False, task: str | None = None) -> int:
    """Authoritative state: tasks, transitions, intents, effects, artifacts, approvals, budget."""
    def tasks(store):
        for t in store.iter_view("tasks", task_id=task):
            t["trusted"] = bool(t["trusted"])
            t["a2a_state"] = A2A_STATE[TaskState(t["state"])]
            yield t

    # every view is streamed from the file as it is printed: flat memory whatever the run's size
    with _open(db, readonly=True) as store:
        if task and store.get_task(task) is None:
            known = ", ".join(t["task_id"] for t in islice(store.iter_view("tasks"), 10)) or "none yet"
            raise InputError(f"no task {task} in {db} (its tasks: {known})", code="E_UNKNOWN_TASK")
        if as_json:
            views = (("transitions", "transitions"), ("intents", "intents"), ("effects", "effects"),
                     ("artifacts", "artifacts"), ("approvals", "approvals"), ("budget", "budget"))
            total = store.count_view("tasks", task_id=task) + sum(store.count_view(v, task_id=task) for _, v in views)
            with _rows_progress(total, "writing the state") as counted:
                _print_json_fields([
                    ("tasks", counted(tasks(store))),
                    *((name, counted(store.iter_view(view, task_id=task))) for name, view in views),
                    ("machine_versions", store.machine_versions()),
                    ("current_machine", store.current_machine),
                    ("state_digest", store.state_digest()),
                ])
            return 0
        con = _console()
        count = {v: store.count_view(v, task_id=task) for v in ("tasks", "transitions", "intents", "effects",
                                                                 "artifacts", "approvals")}
        show_view(
            con, "Tasks (authoritative: written only by the runtime)",
            ["task", "state", "ver", "machine", "lease", "budget", "trusted", "late/rej", "A2A"],
            ([t["task_id"], _styled(t["state"], _STATE_STYLE), t["state_version"], t["machine_version"],
              f"{t['lease_holder'] or '-'} v{t['lease_version']}", f"{t['budget_left']}/{t['budget_total']}",
              "yes" if t["trusted"] else "[bold magenta]NO[/]", f"{t['late_results']}/{t['rejected']}",
              t["a2a_state"].removeprefix("TASK_STATE_")] for t in tasks(store)),
            count["tasks"],
            caption="ver: state_version; lease: holder and lease_version; budget: left/allotted; late/rej: late results and rejected moves",
            optional=("machine", "A2A"),
        )
        show_view(
            con, "Transitions", ["task", "old -> new", "ver", "by", "time", "reason"],
            ([r["task_id"], f"{r['old_state']} -> {_styled(r['new_state'], _STATE_STYLE)}", r["state_version"],
              r["executor"], r["created_at"][11:19], r["reason"]] for r in store.iter_view("transitions", task_id=task)),
            count["transitions"],
        )
        show_view(
            con, "Intents (deduplication: task, key, digest, scheme)",
            ["#", "task", "msg", "decision", "seen", "trusted", "idempotency_key / payload_digest"],
            ([r["arrival"], r["task_id"], r["message_id"], _styled(r["decision"], _DECISION_STYLE), r["seen"],
              "yes" if r["trusted"] else "[bold magenta]NO[/]",
              f"{r['idempotency_key']}\n{_digest_cell(r['payload_digest'], r['digest_scheme'])}"]
             for r in store.iter_view("intents", task_id=task)),
            count["intents"],
        )
        if count["effects"]:
            show_view(con, "Effects (committed once per key)", ["effect_key", "task", "message", "tick"],
                      ([e["effect_key"], e["task_id"], e["message_id"], e["tick"]]
                       for e in store.iter_view("effects", task_id=task)), count["effects"])
        if count["artifacts"]:
            show_view(con, "Artifacts (content-addressed)", ["ref", "kind", "bytes", "task", "message"],
                      ([a["ref"], a["kind"], a["size"], a["task_id"], a["message_id"]]
                       for a in store.iter_view("artifacts", task_id=task)), count["artifacts"])
        if count["approvals"]:
            show_view(con, "Approvals", ["task", "decision", "reviewer", "evidence", "message"],
                      ([a["task_id"], a["decision"], a["reviewer"], ", ".join(a["evidence"]), a["message_id"]]
                       for a in store.iter_view("approvals", task_id=task)), count["approvals"])
        con.print(f"machine for new tasks: {store.current_machine}\nstate digest (equal digests, equal state):\n  "
                  f"{store.state_digest()}", soft_wrap=True)
    return 0


def _what_reconciles(p: dict) -> str:
    """What an open reconciliation is about, in a few words: a late result, or a contradiction."""
    from .envelope import RESULT_STATUSES  # (with the store: see _open)

    status = p.get("status")
    if status is None or status in RESULT_STATUSES:
        return f"late {status + ' ' if status else ''}result {p['message_id']}"
    return f"{p['message_id']} ({status})"


def check(db: Path, as_json: bool = False) -> int:
    """Named invariants over a run; 0 when every one holds, 1 when one is broken."""
    with _open(db, readonly=True) as store:
        results = _judged(store, True)
        pending = store.open_reconciliations()
    con = None if as_json else _console()  # (JSON draws nothing: Rich is not loaded for it)
    output_rows(f"Invariants of {db}", ["invariant", "result", "what must hold"],
                [] if as_json else [[r.name, _mark(r.ok), _plain(r.description)] for r in results], as_json=as_json, con=con,
                data=[{"name": r.name, "ok": r.ok, "description": r.description, "witnesses": list(r.witnesses)}
                      for r in results])
    if not as_json:
        for r in results:
            if not r.ok:
                con.print(f"[bold red]{r.name}[/] witnesses:")
                for w in r.witnesses[:10]:
                    con.print("  " + json.dumps(w, sort_keys=True), soft_wrap=True)
                if len(r.witnesses) > 10:
                    con.print(f"  ... {len(r.witnesses) - 10} more (--json has all)")
        for p in pending:  # not a broken rule: work a reviewer still owes
            con.print(f"open reconciliation: {p['task_id']}: {_what_reconciles(p)} touches "
                      f"{', '.join(p['effects'])}; decide with: protolab reconcile {p['task_id']} --decision keep|retract "
                      f"--by reviewer --evidence {p['message_id']}", markup=False, soft_wrap=True)
    if not all(r.ok for r in results):
        return 1
    return 0


def machine_show(db: Path | None = None, version: str | None = None, as_json: bool = False) -> int:
    """The allowlist: every allowed move, the roles that may make it, and its source (seed or kit)."""
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
    rules = [{**r, "source": move_source(r["from_state"], r["to_state"])} for r in rules]
    a2a = {s.value: A2A_STATE[s] for s in TaskState}
    if as_json:
        _print_json({"current": current, "rules": rules, "a2a": a2a,
                     "a2a_notes": {s.value: A2A_NOTES[s] for s in TaskState if s in A2A_NOTES},
                     "a2a_extensions": [s.value for s in TaskState if s in A2A_EXTENSION_STATES]})
        return 0
    con = _console()
    kit = sum(r["source"] == "kit" for r in rules)
    output_rows(f"Transition rules (new tasks use {current})", ["machine", "from", "to", "roles", "source", "reason"],
                [[r["machine_version"], r["from_state"], r["to_state"], r["roles"].replace(",", ", "), r["source"],
                  r["reason"]] for r in rules], optional=("machine",), con=con,
                caption=("source: seed, a move of the seed's state machine; kit, a move beyond it that this kit (or "
                         f"the table's author) added: {kit} here" if kit else
                         "source: every move here is one of the seed's state machine (none is the kit's own)"))
    output_rows("A2A v1.0 export ('protolab a2a export')", ["state", "A2A task state", "note"],
                [[s.value + (" *" if s in A2A_EXTENSION_STATES else ""), A2A_STATE[s], A2A_NOTES.get(s, "")]
                 for s in TaskState],
                caption="* a course extension: A2A defines no such state. The export keeps the kit's own state in "
                        "each task's metadata under the kit's extension.", con=con)
    return 0


#: The light commands: (words, {option: takes a value}, the function, its keyword for each option). Each option
#: is one Typer declares for the command (sim/cli/inspect.py, sim/cli/machine.py); a test holds the two to the
#: same bytes and exit status.
LIGHT = {
    ("messages",): ({"--db": True, "--json": False, "--task": True, "--payloads": False}, messages,
                    {"--db": "db", "--json": "as_json", "--task": "task", "--payloads": "payloads"}),
    ("events",): ({"--db": True, "--json": False, "--task": True, "--type": True}, events,
                  {"--db": "db", "--json": "as_json", "--task": "task", "--type": "type_"}),
    ("state",): ({"--db": True, "--json": False, "--task": True}, state,
                 {"--db": "db", "--json": "as_json", "--task": "task"}),
    ("check",): ({"--db": True, "--json": False}, check, {"--db": "db", "--json": "as_json"}),
    ("machine", "show"): ({"--db": True, "--version": True, "--json": False}, machine_show,
                          {"--db": "db", "--version": "version", "--json": "as_json"}),
}

#: --db's default where Typer declares one (sim/cli/common.py DB_OPT); machine show's is none (the kit's own table).
_DB_DEFAULT = {("machine", "show"): None}


def parse_light(args: list[str]):
    """``(function, keywords)`` for a light command read exactly as Typer would read it, or None: anything
    else (a command not light, ``--help``, an unknown or repeated option, a value missing, empty or looking
    like an option, an argument) is Typer's to read, and to refuse in its words."""
    for words in LIGHT:
        if tuple(args[:len(words)]) == words:
            break
    else:
        return None
    options, fn, names = LIGHT[words]
    kw: dict = {"db": _DB_DEFAULT.get(words, Path("protolab.db"))}
    seen: set[str] = set()
    rest = args[len(words):]
    i = 0
    while i < len(rest):
        arg = rest[i]
        name, eq, value = arg.partition("=")
        if name not in options or name in seen or (eq and not options[name]):
            return None
        seen.add(name)
        if options[name]:
            if not eq:
                i += 1
                if i == len(rest):
                    return None
                value = rest[i]
            if not value or value.startswith("-"):
                return None
            try:
                value.encode("utf-8")  # an undecodable byte in a name: as Typer reads it, not guessed at here
            except UnicodeEncodeError:
                return None
            kw[names[name]] = Path(value) if name == "--db" else value
        else:
            kw[names[name]] = True
        i += 1
    return fn, kw


def light(args: list[str]) -> bool:
    """Run ``args`` here when it is a light command (:func:`parse_light`), ending the process as
    ``sim.cli.main`` would: the same output, ``error: CODE: message`` lines and exit statuses. False:
    not one of them, nothing done (the caller hands ``args`` to Typer)."""
    parsed = parse_light(args)
    if parsed is None:
        return False
    fn, kw = parsed
    errors.catch_termination()
    try:
        rc = fn(**kw)
    except ProtolabError as e:
        sys.stderr.write(f"error: {e.one_line()}\n")
        sys.exit(getattr(e, "exit_status", 2))
    except KeyboardInterrupt:  # as Typer does: exit status 130, said in one line (SIGTERM, SIGHUP: 128 + n)
        if errors.LAST_SIGNAL is not None:
            import signal

            sys.stderr.write(f"error: E_ABORTED: interrupted by {signal.Signals(errors.LAST_SIGNAL).name}\n")
            sys.exit(128 + errors.LAST_SIGNAL)
        sys.stderr.write("error: E_ABORTED: interrupted (Ctrl-C)\n")
        sys.exit(130)
    except BrokenPipeError:  # 'protolab events | head -1': the reader had enough; nothing more to say
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (no complaint when Python flushes)
        except (OSError, ValueError):
            pass
        sys.exit(0)
    sys.exit(rc)
