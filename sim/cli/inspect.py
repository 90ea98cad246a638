"""What a run holds, each kind of data on its own, and judged: messages, events, state, check, replay,
compare."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from ..errors import InputError
from ..palette import DECISION_STYLE as _DECISION_STYLE  # the colours live once
from ..palette import STATE_STYLE as _STATE_STYLE
from . import common
from .common import DB_OPT, FAULT_OPT, JSON_OPT, SCENARIO_ARG, _check_run_args, _console, _designs, _digest_cell, _judged, _load_scenario, _mark, _open, _plain, _print_json, _print_json_fields, _print_json_rows, output_rows, show_view, _sides, _stream_table, _styled, _witness_line

commands = typer.Typer()  # this group's top-level commands (sim/cli/__init__.py adds them to the app)


@commands.command()
def messages(db: Path = DB_OPT, as_json: bool = JSON_OPT, task: Optional[str] = typer.Option(None, help="Only this task."),
             payloads: bool = typer.Option(False, "--payloads", help="Print each envelope's payload as the log keeps it "
                                           "(sensitive values the run declared show [redacted] under the safe policy).")):
    """The message log: every envelope, and every delivery with its decision."""
    # both logs are streamed from the file as they are printed: flat memory whatever the run's size
    with _open(db, readonly=True) as store:
        if as_json:
            total = store.count_view("messages", task_id=task) + store.count_view("deliveries", task_id=task)
            with common._rows_progress(total, "writing the message log") as counted:
                _print_json_fields([("messages", counted(store.iter_view("messages", task_id=task))),
                                    ("deliveries", counted(store.iter_view("deliveries", task_id=task)))])
            return
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


def _event_summary(e: dict) -> str:
    from ..events import summarize

    return summarize(e["type"], e["data"])


@commands.command()
def events(
    db: Path = DB_OPT,
    as_json: bool = JSON_OPT,
    task: Optional[str] = typer.Option(None, help="Only this task."),
    type_: Optional[str] = typer.Option(None, "--type", help="Only this event type."),
):
    """The event log: append-only facts, numbered, written only by the runtime."""
    from ..store import EVENT_TYPES

    if type_ is not None and type_ not in EVENT_TYPES:
        from ..errors import friendly_list

        raise InputError(f"unknown event type {type_!r}; expected one of: {friendly_list(EVENT_TYPES)}", code="E_UNKNOWN_VALUE")
    with _open(db, readonly=True) as store:
        evs = store.iter_events(task_id=task, etype=type_)
        n = store.count_events(task_id=task, etype=type_)
        if as_json:
            with common._rows_progress(n, "writing the event log") as counted:
                _print_json_rows(counted(evs))
            return
        columns = ["seq", "time", "event", "task", "msg", "what"]
        rows = ([e["seq"], e["created_at"][11:19], e["type"], e["task_id"], e["message_id"], _event_summary(e)] for e in evs)
        if n > common.TABLE_ROWS:  # a long log is streamed as it is read, in flat memory
            from ..store import EVENT_TYPES

            task_w, msg_w = store.id_widths()
            _stream_table(f"Events ({n})", columns, rows, {"seq": len(str(store.last_event())), "time": 8,
                                                           "event": max(map(len, EVENT_TYPES)), "task": task_w,
                                                           "msg": msg_w})
        else:
            output_rows(f"Events ({n})", columns, list(rows))


@commands.command()
def state(db: Path = DB_OPT, as_json: bool = JSON_OPT, task: Optional[str] = typer.Option(None, help="Only this task.")):
    """Authoritative state: tasks, transitions, intents, effects, artifacts, approvals, budget."""
    from itertools import islice

    from ..machine import A2A_STATE, TaskState

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
            with common._rows_progress(total, "writing the state") as counted:
                _print_json_fields([
                    ("tasks", counted(tasks(store))),
                    *((name, counted(store.iter_view(view, task_id=task))) for name, view in views),
                    ("machine_versions", store.machine_versions()),
                    ("current_machine", store.current_machine),
                    ("state_digest", store.state_digest()),
                ])
            return
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


#: A run with more deliveries than this is compared without exporting its conversation (a stress run).
COMPARE_TRACE_UP_TO = 20_000


def _conversation_of(store) -> dict | None:
    """The run exported as a trace and validated: {valid, codes, first} (None for a run too big to export
    here: 'protolab trace export' then 'trace validate' do it on a file)."""
    if store.next_delivery_id() - 1 > COMPARE_TRACE_UP_TO:
        return None
    from ..conversation import export_trace
    from ..protocol.trace import validate

    report = validate(export_trace(store))
    first = report.errors[0] if report.errors else None
    return {"valid": report.valid, "codes": list(report.codes),
            "first": f"{first.code} on {first.message_id}" if first is not None else ""}


def _conversation_mark(c: dict) -> str:
    return "[green]valid[/]" if c["valid"] else "[bold red]" + ", ".join(c["codes"]) + "[/]"


@commands.command()
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
    from ..invariants import check
    from ..runner import run_scenario, summarize

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
                summary = summarize(store, results)
                summary["conversation"] = _conversation_of(store)
                out[label] = (summary, results)
            finally:
                store.close()
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
    ca, cb = safe["conversation"], naive["conversation"]
    if ca is not None and cb is not None:  # the run exported as a trace and validated, as 'trace validate' does
        rows.append(["conversation (trace)", _conversation_mark(ca), _conversation_mark(cb),
                     cb["first"] if cb["codes"] else ""])
    faults = ", ".join(safe["faults"]) or "none"
    output_rows(f"{sc.name}, seed {safe['seed']}, faults: {faults}", ["", la, lb, f"{lb}'s witness"], rows,
                as_json=as_json, data={label: summary for label, (summary, _) in out.items()})


@commands.command()
def replay(db: Path = DB_OPT, as_json: bool = JSON_OPT,
           effects: Optional[Path] = typer.Option(None, "--effects", help="The effect-commit rule the run was made with "
                                                  "(run --effects): the redelivery commits through it again."),
           intake: Optional[Path] = typer.Option(None, "--intake", help="The intake the run was made with (run "
                                                 "--intake): the redelivery decides through it again.")):
    """Rebuild state from the event log alone and compare digests; redeliver every message and count effects.
    A run made with --intake or --effects is redelivered through the same files, given again (a plugged
    design or machine needs nothing: the log holds its envelopes, the store its table). Exit 0 when the
    states match and no effect is committed again, 1 otherwise."""
    from ..replay import replay_parts, replay_report

    import tempfile

    with _open(db, readonly=True) as store, tempfile.TemporaryDirectory(prefix="protolab-replay-") as scratch:
        policy, plugged, notes = replay_parts(store, db_name=str(db), intake=intake, effects=effects)
        for note in notes:
            typer.echo(f"note: {note}", err=True)
        report = replay_report(store, scratch=scratch, policy=policy)  # on files: flat memory at any run size
    report["plugged"] = plugged
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
        through = "".join(f", {k} {v.split(' ')[0]}" for k, v in plugged.items())
        con.print(f"redelivered all {r['redelivered']} messages through intake ({r['policy']} policy{through}): "
                  f"{', '.join(f'{k} {v}' for k, v in r['decisions'].items())}", soft_wrap=True, highlight=False)
        con.print("  [green]no side effect committed twice[/]" if proof
                  else f"  [bold red]effects committed again[/]: {', '.join(r['effects_committed_again'])}", soft_wrap=True)
    if not report["match"] or not proof:
        if not as_json:
            why = [w for w, bad in (("the replayed state differs from the live one", not report["match"]),
                                    ("redelivering the log commits side effects again", not proof)) if bad]
            _console().print(f"replay FAILED: {'; '.join(why)} (exit status 1)", soft_wrap=True, highlight=False)
        raise typer.Exit(1)


def _what_reconciles(p: dict) -> str:
    """What an open reconciliation is about, in a few words: a late result, or a contradiction."""
    from ..envelope import RESULT_STATUSES

    status = p.get("status")
    if status is None or status in RESULT_STATUSES:
        return f"late {status + ' ' if status else ''}result {p['message_id']}"
    return f"{p['message_id']} ({status})"


@commands.command()
def check(db: Path = DB_OPT, as_json: bool = JSON_OPT):
    """Named invariants over a run, each holding or broken, with the rows that witness a failure.
    Exit 0 when every invariant holds, 1 when one is broken."""
    with _open(db, readonly=True) as store:
        results = _judged(store, True)
        pending = store.open_reconciliations()
    con = _console()
    output_rows(f"Invariants of {db}", ["invariant", "result", "what must hold"],
                [[r.name, _mark(r.ok), _plain(r.description)] for r in results], as_json=as_json, con=con,
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
        raise typer.Exit(1)

