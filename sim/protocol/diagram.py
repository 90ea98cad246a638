"""Draw a ``conversation-trace-v2`` trace as a Mermaid ``sequenceDiagram``.

One participant per ref, one arrow per message (to its first recipient; the label
names any others), solid for requests, handoffs, gather results and the fence,
dashed for responses, contributions, critiques and acknowledgements. Gathers are
``rect`` blocks from their opener to their result (or a note where blocks would
cross). With a :class:`~sim.protocol.trace.Report`, rejected messages are drawn with
a cross arrow and a note naming their code, and the terminal is the effective one.
"""

from __future__ import annotations

import re

from .trace import Report

__all__ = ["mermaid", "text_sequence"]

SOLID = frozenset({"REQUEST", "HANDOFF", "FENCE", "GATHER_RESULT"})
_UNSAFE = re.compile(r"[;#<>{}\n\r]")
_PTR = re.compile(r"^/messages/(\d+)")
_GATHER_KINDS = ("CONTRIBUTION", "GATHER_RESULT")


def _list(v) -> list:
    return v if isinstance(v, list) else []


def _str(v) -> str | None:
    return v if isinstance(v, str) else None


def _text(value) -> str:
    """Label text Mermaid will not misread (no statement breaks, entities or HTML)."""
    return _UNSAFE.sub(" ", str(value)).strip()


def mermaid(trace: dict, report: Report | None = None) -> str:
    """The Mermaid source for ``trace``; pass ``report`` to mark rejected messages."""
    if not isinstance(trace, dict):
        trace = {}
    all_msgs = _list(trace.get("messages"))
    alias: dict[str, str] = {}
    lines = ["sequenceDiagram"]

    def who(ref) -> str:
        ref = str(ref)
        if ref not in alias:
            alias[ref] = f"P{len(alias)}"
            extra = "" if declared_done is False else " (not a participant)"
            lines.append(f"  participant {alias[ref]} as {_text(ref)}{extra}")
        return alias[ref]

    declared_done = False
    for p in _list(trace.get("participants")):
        if isinstance(p, dict) and isinstance(p.get("ref"), str):
            who(p["ref"])
    declared_done = True

    # rejections by message position, from the report's pointers
    rejected: dict[int, list[str]] = {}
    if report is not None:
        for f in report.errors:
            m = _PTR.match(f.pointer)
            if m:
                codes = rejected.setdefault(int(m.group(1)), [])
                if f.code not in codes:
                    codes.append(f.code)

    # gather spans: opener position .. result position (or last contribution)
    pos = {_str(m.get("id")): i for i, m in reversed(list(enumerate(all_msgs))) if isinstance(m, dict)}
    pos.pop(None, None)
    spans = []
    for g in _list(trace.get("gathers")):
        if not isinstance(g, dict) or _str(g.get("opener")) not in pos:
            continue
        gid = g.get("id")
        start = pos[g["opener"]]
        end = start
        for i, m in enumerate(all_msgs):
            if isinstance(m, dict) and m.get("gatherId") == gid and m.get("kind") in _GATHER_KINDS:
                end = max(end, i)
        spans.append((start, end, g))
    spans.sort(key=lambda s: (s[0], -s[1]))
    rects: dict[int, list] = {}
    closes: dict[int, int] = {}
    notes_open: dict[int, list] = {}
    stack: list[int] = []
    for start, end, g in spans:
        while stack and stack[-1] < start:
            stack.pop()
        if not stack or end <= stack[-1]:
            rects.setdefault(start, []).append(g)
            closes[end] = closes.get(end, 0) + 1
            stack.append(end)
        else:
            notes_open.setdefault(start, []).append(g)

    def over(refs) -> str:
        names = [who(r) for r in refs if isinstance(r, str)]
        names = list(dict.fromkeys(names))
        if not names:
            names = [who(next(iter(alias), "trace"))]
        return names[0] if len(names) == 1 else f"{names[0]},{names[-1]}"

    def gather_note(g) -> str:
        rule = g.get("rule")
        extra = f" threshold {g.get('threshold')}" if rule == "QUORUM" else ""
        members = _list(g.get("membership"))
        return f"gather {_text(g.get('id'))}: {_text(rule)}{extra} of {_text(', '.join(map(str, members)))}"

    terminal = trace.get("terminal") if isinstance(trace.get("terminal"), dict) else None
    state = report.terminal if report is not None and report.terminal else (terminal or {}).get("state")
    if report is not None and not report.valid and (report.terminal_if_valid or state):
        state = f"{report.terminal_if_valid or state} had it been valid (the trace is INVALID)"
    fence_id = _str((terminal or {}).get("fence"))
    fence_pos = pos.get(fence_id) if fence_id else None
    if fence_pos is None:
        fence_pos = next((i for i, m in enumerate(all_msgs) if isinstance(m, dict) and m.get("kind") == "FENCE"), None)
    last_ack = None
    if fence_pos is not None:
        fid = all_msgs[fence_pos].get("id")
        for i, m in enumerate(all_msgs):
            if i > fence_pos and isinstance(m, dict) and m.get("kind") == "ACK" and fid in _list(m.get("causedBy")):
                last_ack = i
    everyone = list(alias)

    def _message(i: int, m: dict) -> None:
        mid = _text(m.get("id", f"#{i}"))
        kind = _text(m.get("kind"))
        src = who(m.get("sender", "?"))
        rcpts = [r for r in _list(m.get("recipients")) if isinstance(r, str)] or [m.get("sender", "?")]
        dst = who(rcpts[0])
        for r in rcpts[1:]:
            who(r)
        label = f"{mid} {kind}"
        if len(rcpts) > 1:
            label += f" (also {_text(', '.join(rcpts[1:]))})"
        codes = rejected.get(i)
        if codes:
            arrow = "-x" if kind in SOLID else "--x"
        else:
            arrow = "->>" if kind in SOLID else "-->>"
        lines.append(f"  {src}{arrow}{dst}: {label}")
        if codes:
            lines.append(f"  Note right of {src}: {mid} rejected {' '.join(codes)}")
        if i == fence_pos:
            shown = state if state else "open"
            lines.append(f"  Note over {over(everyone)}: terminal fence: {_text(shown)} ({mid})")
        if m.get("kind") == "GATHER_RESULT" and report is not None:
            res = report.gathers.get(_str(m.get("gatherId")))
            if res is not None:
                miss = f", missing {', '.join(res.missing)}" if res.missing and res.status != "complete" else ""
                dis = f", {len(res.dissent)} dissent kept" if res.dissent else ""
                lines.append(f"  Note over {over(res.contributors or res.missing)}: "
                             f"{_text(res.gather_id)} {res.status}{_text(miss)}{dis}")
        if i == last_ack:
            lines.append(f"  Note over {over(everyone)}: acknowledgement is receipt only")

    for i, m in enumerate(all_msgs):
        for g in rects.get(i, []):
            lines.append("  rect rgba(120, 160, 255, 0.12)")
            lines.append(f"  Note over {over(_list(g.get('membership')))}: {gather_note(g)}")
        for g in notes_open.get(i, []):
            lines.append(f"  Note over {over(_list(g.get('membership')))}: {gather_note(g)}")
        if isinstance(m, dict):
            _message(i, m)
        else:
            lines.append(f"  Note over {over(everyone)}: message {i} is not an object, rejected")
        for _ in range(closes.get(i, 0)):
            lines.append("  end")
    if fence_pos is not None and last_ack is None:
        lines.append(f"  Note over {over(everyone)}: acknowledgement is receipt only (none accepted yet)")
    return "\n".join(lines) + "\n"


def text_sequence(trace: dict, report: Report | None = None, *, width: int = 80) -> list[tuple[str, str]]:
    """The trace as a sequence diagram in plain text, for a terminal: one lane per participant,
    one arrow per message (to every recipient), each line paired with a kind for styling:
    ``head``, ``label``, ``arrow``, ``fence``, ``rejected`` or ``lane``.
    """
    if not isinstance(trace, dict):
        trace = {}
    refs: list[str] = []
    for p in _list(trace.get("participants")):
        if isinstance(p, dict) and isinstance(p.get("ref"), str) and p["ref"] not in refs:
            refs.append(p["ref"])
    msgs = [m for m in _list(trace.get("messages")) if isinstance(m, dict)]
    for m in msgs:
        for r in [m.get("sender"), *_list(m.get("recipients"))]:
            if isinstance(r, str) and r not in refs:
                refs.append(r)
    if not refs:
        return []
    lane = max(12, min(30, (width - 2) // len(refs)))
    x = {r: 1 + i * lane + lane // 2 for i, r in enumerate(refs)}
    total = 2 + lane * len(refs)
    rejected: dict[int, str] = {}
    if report is not None:
        for f in report.errors:
            m = _PTR.match(f.pointer or "")
            if m:
                rejected.setdefault(int(m.group(1)), f.code)
    accepted = set(report.accepted_positions) if report is not None else None

    def blank() -> list[str]:
        row = [" "] * total
        for r in refs:
            row[x[r]] = "│"
        return row

    head = [" "] * total
    for r in refs:
        name = r[: lane - 2]
        start = max(0, x[r] - len(name) // 2)
        head[start:start + len(name)] = list(name)
    out: list[tuple[str, str]] = [("".join(head).rstrip(), "head"), ("".join(blank()).rstrip(), "lane")]
    for i, m in enumerate(msgs):
        sender = m.get("sender") if isinstance(m.get("sender"), str) else refs[0]
        targets = [r for r in _list(m.get("recipients")) if isinstance(r, str) and r != sender] or [sender]
        kind = str(m.get("kind", ""))
        lo = min(x[sender], *(x[t] for t in targets))
        hi = max(x[sender], *(x[t] for t in targets))
        bad = i in rejected or (accepted is not None and i not in accepted)
        label = f"{m.get('id', '?')} {kind}" + (f" ✗ {rejected[i]}" if i in rejected else "")
        row = blank()
        start = lo + 1 if hi > lo else x[sender] + 1
        text = label[: max(4, total - start)]
        row[start:start + len(text)] = list(text)
        out.append(("".join(row).rstrip(), "rejected" if bad else "label"))
        row = blank()
        dashed = kind not in SOLID
        for c in range(lo + 1, hi):
            if row[c] == "│":
                row[c] = "┼"
            else:
                row[c] = "╌" if dashed else "─"
        for t in targets:
            if t == sender:
                row[x[t] + 1] = "↺"
            elif x[t] > x[sender]:
                row[x[t] - 1] = "▶"
            else:
                row[x[t] + 1] = "◀"
        style = "rejected" if bad else ("fence" if kind == "FENCE" else "arrow")
        out.append(("".join(row).rstrip(), style))
    return out
