"""'protolab trace': conversation traces (conversation-trace-v2): validate, export, replay, mutate, diagram."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from ..errors import InputError
from ..files import check_output, written_whole
from .common import output_rows, DB_OPT, JSON_OPT, _console, _open, _print_json, _progress, _read_file, _resolve


trace_app = typer.Typer(help="Conversation traces (conversation-trace-v2): validate, export, replay, mutate, diagram.", no_args_is_help=True)


def _write_output(output: Path, text: str, reads) -> None:
    with written_whole(output, reads=reads) as fh:
        fh.write(text)


def _load_trace(file: Path) -> dict:
    """Read a trace: refuse what is not UTF-8 JSON, or repeats a key in one object, with one line and
    exit 2 (plain json with a small hook: a trace can hold a million messages)."""
    return _parse_trace([_read_file(file, "trace file")], file)


def _parse_trace(box: list, file: Path) -> dict:
    """The careful parse of the bytes in ``box`` (taken out of it: one copy of a big trace, not two)."""
    raw = box.pop()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"trace file {file} is not UTF-8 ({e.reason} at byte {e.start})", code="E_NOT_UTF8") from None
    del raw  # a million-message trace: keep one copy of it, not two

    from ..protocol import loads_trace

    return loads_trace(text, f"trace file {file}")


_PTR = __import__("re").compile(r"^/messages/(\d+)")

#: a trace file larger than this is read a message at a time (``sim.protocol.stream``), never whole
STREAM_AT = int(__import__("os").environ.get("PROTOLAB_TRACE_STREAM_AT", 16 << 20))
#: ``trace diagram`` draws at most this many messages at once (a window; ``--from``/``--count`` for another)
DIAGRAM_WINDOW = 2000


class _Source:
    """A trace file named on the command line, as bytes on disk: the path, or stdin spooled to a
    temporary file in chunks (so a big trace piped in is streamed too). A context manager."""

    def __init__(self, file: Path):
        import tempfile

        self.file, self._tmp = file, None
        if str(file) == "-":
            self._tmp = tempfile.NamedTemporaryFile(prefix="protolab-trace-", suffix=".json")
            src = sys.stdin.buffer
            while chunk := src.read(1 << 20):
                self._tmp.write(chunk)
            self._tmp.flush()
            self.path = Path(self._tmp.name)
        else:
            self.path = _resolve(file)
            from ..files import not_a_file

            special = not_a_file(self.path, "trace file")
            if special is not None and not self.path.is_dir():
                raise special
            if self.path.is_dir():
                raise InputError(f"trace file {self.path} is a folder, not a file", code="E_FILE_MISSING")
            if not self.path.exists():
                raise InputError(f"trace file {self.path} does not exist", code="E_FILE_MISSING")
        self.size = self.path.stat().st_size

    @property
    def big(self) -> bool:
        return self.size > STREAM_AT

    def bytes(self) -> bytes:
        if self._tmp is not None:
            return self.path.read_bytes()
        return _read_file(self.file, "trace file")

    def stream(self):
        from ..protocol.stream import TraceFile

        path = self.path

        def opener():
            try:
                return open(path, "rb")
            except OSError as e:
                raise InputError(f"cannot read trace file {path}: {e.strerror}", code="E_FILE_MISSING") from None

        return TraceFile(opener, f"trace file {self.file}", str(self.file))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._tmp is not None:
            self._tmp.close()


def _streamed_report(source: _Source, on_accepted=None, tf=None):
    """The validator's Report of a big trace, read a message at a time; the ids seen and accepted
    kept exactly in a scratch table on disk (``sim.store.scratch``)."""
    from ..protocol.stream import validate_file
    from ..store.scratch import scratch_ids

    with scratch_ids() as tables:
        return validate_file(tf or source.stream(), tables=tables, on_accepted=on_accepted)


@trace_app.command("validate")
def trace_validate(
    file: Path = typer.Argument(..., help="A conversation-trace-v2 JSON file ('-' for stdin)."),
    as_json: bool = JSON_OPT,
):
    """Validate a trace: exit 0 valid (and why), 1 invalid (every error), 2 unreadable."""
    import gc

    from ..protocol import validate
    from ..protocol.fast import validate_bytes

    gc.disable()  # parsing and validating build millions of objects and free none: no cycles to look for
    spilled = None  # a big trace's accepted ids, written to a scratch file as they come (one JSON string a line)
    try:
        with _Source(file) as source:
            if source.big:  # a message at a time: flat memory at any size, the same report
                import tempfile

                spilled = tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n")
                put = spilled.write
                dumps = json.dumps
                report = _streamed_report(source, lambda i, mid: put(dumps(mid, ensure_ascii=False) + "\n"))
                quick = False
            else:
                # the fast path (msgspec, typed) when the whole trace is the common case; else, or without
                # msgspec, the careful parse and the validator (the same report either way: sim/protocol/fast.py)
                box = [source.bytes()]
                try:
                    report = validate_bytes(box[0])
                except Exception:  # a fault of the fast path itself: the careful path still answers
                    report = None
                quick = report is not None
                if not quick:
                    report = validate(_parse_trace(box, file))
                del box
    finally:
        gc.enable()
    if as_json and spilled is not None:
        from .common import _print_json_fields

        spilled.seek(0)
        d = report.to_dict()
        d["accepted"] = (json.loads(line) for line in spilled)
        _print_json_fields(d.items())
        spilled.close()
        raise typer.Exit(0 if report.valid else 1)
    if spilled is not None:
        spilled.close()
    if as_json:
        if quick:  # no float, no integer past 64 bits, no lone surrogate: msgspec writes _print_json's bytes
            import msgspec

            text = msgspec.json.format(msgspec.json.encode(report.to_dict()), indent=2) + b"\n"
            out = getattr(sys.stdout, "buffer", None)
            if out is None:
                sys.stdout.write(text.decode())
            else:
                sys.stdout.flush()
                out.write(text)
        else:
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
            output_rows(f"[bold red]invalid[/]: {len(report.errors)} error(s) in {file}", ["code", "message", "where", "what"],
                        [[f.code, f.message_id or "", f.pointer, f.message] for f in report.errors], con=con)
    raise typer.Exit(0 if report.valid else 1)


@trace_app.command("export")
def trace_export(
    db: Path = DB_OPT,
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the trace here (default: stdout)."),
    epoch: Optional[int] = typer.Option(None, "--epoch", help="Which epoch (default: the last). A reviewer's decision "
                                        "after the fence reopens the conversation in the next epoch."),
):
    """A run's message log as a conversation-trace-v2 trace (transport faults show up as protocol errors)."""
    from ..conversation import TraceExport

    if output is not None:
        check_output(output, [db])  # before anything is read: never written over the run it reads
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
        with written_whole(output, reads=[db]) as fh:  # an interrupted export leaves no half a trace
            export.write(fh)
    typer.echo(f"wrote {output}: {export.count} messages of conversation {export.header['conversationId']}"
               + (f", epoch {export.epoch} of {export.epochs} (--epoch N for another)" if export.epochs > 1 else ""))


@trace_app.command("replay")
def trace_replay(
    file: Path = typer.Argument(..., help="A conversation-trace-v2 JSON file carrying reducer outputs."),
    as_json: bool = JSON_OPT,
):
    """Re-run the reducers in the supplied order; recompute gathers and state digests; prove equivalence.
    Exit 0 when equivalent, 1 when the replay diverges."""
    from ..protocol.replay import replay as run_replay

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
    """The adversarial mutation suite: one mutation per rule, and the code each produced.
    Exit 0 when every mutation is caught, 1 otherwise."""
    from ..protocol import run_mutations, validate

    trace = _load_trace(_resolve(file))
    base = validate(trace)
    if not base.valid:
        raise InputError(f"{file} is not a valid trace ({base.errors[0].code}); mutate a valid one", code="E_TRACE_INVALID")
    from ..protocol.mutate import MUTATIONS

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

    def what(r):
        if r.get("applicable") is False:
            return f"not applicable: the trace has nothing this mutation breaks ({r['rule']})"
        return ((", ".join(r["produced"]) or f"valid {r['terminal']}")
                + ("" if r["exact"] else f"; the rule's own code is {r['expected'] or 'valid ' + str(r['expected_terminal'])}"))

    output_rows(
        f"Mutations of {file}: {sum(r['ok'] for r in rows)}/{len(rows)} caught",
        ["caught", "mutation", "the validator said"],
        [["[green]yes[/]" if r["ok"] else ("[yellow]n/a[/]" if r.get("applicable") is False else "[bold red]NO[/]"),
          r["name"], what(r)] for r in rows],
        as_json=as_json, data=rows,
    )
    raise typer.Exit(0 if all(r["ok"] for r in rows) else 1)


@trace_app.command("diagram")
def trace_diagram(
    file: Path = typer.Argument(..., help="A conversation-trace-v2 JSON file."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the Mermaid source here (a .md file gets a mermaid fence)."),
    as_text: bool = typer.Option(False, "--text", help="Draw it in plain text for the terminal instead of Mermaid."),
    width: int = typer.Option(100, "--width", help="With --text: the width to draw in."),
    start: Optional[int] = typer.Option(None, "--from", min=1, help="Draw from this message (1 = the first; default: "
                                        "the whole trace, or for one past --count messages a window around its first "
                                        "rejected message)."),
    count: int = typer.Option(DIAGRAM_WINDOW, "--count", min=1, help="Draw at most this many messages."),
):
    """A Mermaid sequence diagram of a trace: fences, acknowledgements and rejected messages marked.
    A trace longer than --count messages is drawn a window at a time (said on the diagram)."""
    from ..protocol import mermaid, text_sequence, validate
    from ..protocol.trace import Report

    if output is not None:
        check_output(output, [file, _resolve(file)])
    with _Source(file) as source:
        whole = None
        if source.big:  # a message at a time: judged once (which were accepted: a bit each), then the window read
            tf = source.stream()
            bits = bytearray()

            def mark(i: int, _mid) -> None:
                if (i >> 3) >= len(bits):
                    bits.extend(bytes(max(len(bits), 1 << 12)))
                bits[i >> 3] |= 1 << (i & 7)

            report = _streamed_report(source, mark, tf)
            if tf.scan is None:  # not a trace object: it was parsed whole
                whole = tf.header
            else:
                header, total = tf.header, tf.scan.count
        if whole is None and not source.big:
            whole = _parse_trace([source.bytes()], file)
            report = validate(whole)
        if whole is not None:
            msgs = whole.get("messages") if isinstance(whole, dict) else None
            total = len(msgs) if isinstance(msgs, list) else 0
        windowed = start is not None or total > count
        if not windowed:
            trace = whole if whole is not None else {**header, "messages": list(tf.messages())}
            if whole is None:  # (a trace of at most --count messages that is still past STREAM_AT bytes)
                shown = Report(valid=report.valid, terminal=report.terminal, reason=report.reason, errors=report.errors,
                               terminal_if_valid=report.terminal_if_valid, gathers=report.gathers,
                               accepted_positions=tuple(i for i in range(total) if (i >> 3) < len(bits)
                                                        and bits[i >> 3] >> (i & 7) & 1))
            if whole is not None:
                shown = report
        else:
            if start is None:  # around the first rejected message, else from the first
                first = next((int(m.group(1)) for f in report.errors if (m := _PTR.match(f.pointer))), 0)
                lo = max(0, first - min(10, count // 4)) if first else 0
            else:
                lo = min(start - 1, max(total - 1, 0))
            hi = min(total, lo + count)
            if whole is not None:
                window = whole["messages"][lo:hi]
                header = {k: v for k, v in whole.items() if k != "messages"}
                accepted = [i - lo for i in report.accepted_positions if lo <= i < hi]
            else:
                window = []
                for i, m in enumerate(tf.messages()):
                    if i >= hi:
                        break
                    if i >= lo:
                        window.append(m)
                accepted = [i - lo for i in range(lo, hi) if (i >> 3) < len(bits) and bits[i >> 3] >> (i & 7) & 1]
            trace = {**header, "messages": window}
            errors = []
            for f in report.errors:
                m = _PTR.match(f.pointer)
                if m is None:
                    errors.append(f)
                elif lo <= int(m.group(1)) < hi:
                    errors.append(type(f)(f.code, f.message_id, f"/messages/{int(m.group(1)) - lo}{f.pointer[m.end():]}",
                                          f.message))
            shown = Report(valid=report.valid, terminal=report.terminal, reason=report.reason, errors=tuple(errors),
                           terminal_if_valid=report.terminal_if_valid, accepted_positions=tuple(accepted),
                           gathers=report.gathers)
    note = (f"messages {lo + 1:,}-{hi:,} of {total:,} (a window: --from N --count K draws another)"
            if windowed else None)
    if as_text:
        text = "\n".join(line for line, _kind in text_sequence(trace, shown, width=width)) + "\n"
        if note:
            text = note + "\n" + text
    else:
        text = mermaid(trace, shown)
        if note:
            head, _, rest = text.partition("\n")
            text = f"{head}\n  %% {note}\n{rest}"
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    _write_output(output, f"```mermaid\n{text.rstrip()}\n```\n" if output.suffix == ".md" else text,
                  [file, _resolve(file)])
    typer.echo(f"wrote {output}" + (f" ({note})" if note else ""))
