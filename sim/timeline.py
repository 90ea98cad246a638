"""A run as one self-contained HTML page: ``protolab timeline``.

Time runs down the page, one row per delivery; each agent is a lane (a vertical line) and each
delivery an arrow from its sender's lane to its recipient's, coloured by the intake's decision
(accepted, duplicate, conflict, late, rejected: the colours of :mod:`sim.palette`). Beside the
arrows: a fault on the delivery it hit (the message it made, or the copy of its own: told from the run by
:func:`fault_delivery`), a mark where an invariant broke (its witness names the delivery, its message or
one of its events), and on the right the state the delivery left its task in whenever that state moved.
Hover an arrow for its one-line summary; click a row for the envelope, the delivery's decision and every
event it caused. The page opens at the first delivery where an invariant broke (highlighted, its detail
shown), or at the top; it fits a 1280 px projector (each drawing shrinks to its column; runs too wide to
read side by side stack).

Two runs (``--db a.db --db b.db``, the naive/safe regression) sit side by side, row ``n`` of one
beside row ``n`` of the other. The page needs no network: inline SVG, CSS and a little JavaScript,
the details of every row as JSON in the page. Everything is read through the store, in delivery
order, a page at a time; the output is a function of the runs alone (no clock), so the same run
gives the same bytes.

A run of more than :data:`WHOLE_UP_TO` deliveries is never drawn whole (its page would be too big to open):
:func:`read_runs` draws a window of :data:`WINDOW_ROWS` deliveries around the first delivery where an
invariant broke (or from the start), says so on the page, and names the command that shows another window
(``--from N --count K``, ``--around DELIVERY``). A window is read a page of rows at a time, in flat memory,
beside the whole run's invariant check (a shard of tasks at a time for a big run).
"""

from __future__ import annotations

import html
import json
import math
import os
from dataclasses import dataclass, field

from .events import REGISTRY as EVENT_REGISTRY
from .files import written_whole
from .events import summarize
from .palette import DECISION_STYLE, STATE_STYLE, web_colour

__all__ = ["RunPicture", "Window", "read_run", "read_runs", "read_window", "render", "write", "fault_delivery", "opening", "stack_width",
           "DECISIONS", "LANE_ORDER",
           "WHOLE_UP_TO", "WINDOW_ROWS"]

#: the intake's decisions, in the legend's order
DECISIONS = ("accepted", "duplicate", "conflict", "late", "rejected")

#: agents' lanes, left to right: the manager first, then the roles in the story's order (an agent
#: whose role is not here comes after, by name)
LANE_ORDER = ("manager", "researcher", "writer", "reviewer")

#: a payload longer than this (as JSON) is cut in the page: 'protolab messages --payloads' shows it whole
PAYLOAD_CAP = 4000
#: witnesses of one invariant placed on the page (the rest are counted)
WITNESS_CAP = 200

#: a run with more deliveries than this is shown a window at a time (a 10,000-delivery page is about 11 MB
#: and opens in about 1.5 s: docs/performance.md); no page ever holds more rows than this
WHOLE_UP_TO = 10_000
#: the deliveries a window shows unless --count says otherwise
WINDOW_ROWS = 2_000

ROW = 18          # px per delivery
LANE_W = 150      # px between lanes
GUTTER = 70       # the left column: delivery number, faults, broken invariants
STATE_W = 140     # the right column: the state a delivery left its task in
TOP = 8
# (these are the drawing's own units: a page narrower than the runs side by side shrinks each drawing to its
# column, so a projector's 1280 px shows two runs without scrolling sideways; the page's script scales by them)


@dataclass
class RunPicture:
    """What one run shows on the page: read once from the store, then drawn."""

    label: str
    meta: dict
    lanes: list[str]
    rows: list[dict] = field(default_factory=list)      # one per delivery, in order
    faults: list[dict] = field(default_factory=list)    # {"row", "fault", "summary", "message_id"}
    breaks: list[dict] = field(default_factory=list)    # {"name", "description", "witnesses": [(row|None, witness)], "more"}
    decisions: dict = field(default_factory=dict)       # decision -> count
    window: "Window | None" = None                      # the deliveries shown, when not the whole run
    total: int | None = None                            # the run's deliveries (a window shows some of them)
    checked: bool = True                                # the invariants were judged (--no-check: not)


@dataclass(frozen=True)
class Window:
    """The deliveries a page shows of a big run: ``first``..``last`` (delivery ids), why these
    (``why``: a sentence), and the command that shows another window (``again``: the command without
    its window options)."""

    first: int
    last: int
    why: str
    again: str = "protolab timeline"


def _row(d, m, moved) -> dict:
    """One delivery's row of the picture: delivery ``d``, its message ``m``, the state it moved to."""
    env = {k: m[k] for k in _ENVELOPE}
    env["payload"] = _payload(env["payload"])
    return {
        "d": d["delivery_id"], "t": d["tick"], "dec": d["decision"], "code": d["code"], "reason": d["reason"],
        "state": d["state_after"], "sv": d["state_version_after"], "moved": moved,
        "from": m["sender"], "to": m["recipient"], "type": m["type"], "mid": m["message_id"], "task": d["task_id"],
        "env": env, "ev": [],
    }


def _lane_key(agent: str) -> tuple:
    base = agent.split("-")[0]
    return (LANE_ORDER.index(base) if base in LANE_ORDER else len(LANE_ORDER), agent)


def _payload(p) -> object:
    text = json.dumps(p, sort_keys=True, ensure_ascii=False)
    if len(text) <= PAYLOAD_CAP:
        return p
    return {"(cut)": f"{len(text)} characters; 'protolab messages --payloads' shows it whole",
            "start": text[:PAYLOAD_CAP]}


_ENVELOPE = ("message_id", "trace_id", "task_id", "sender", "recipient", "type", "schema_version", "created_at",
             "idempotency_key", "payload_digest", "digest_scheme", "payload", "evidence_refs")


def read_run(store, label: str, *, check: bool = True, results=None) -> RunPicture:
    """Read a run for the page: each delivery with its envelope and events, the faults injected,
    and (``check``) every broken invariant with the rows its witnesses name (``results``: the
    invariants' verdicts already in hand)."""
    meta = {k: store.get_meta(k) for k in ("scenario", "seed", "policy", "faults", "schema_version")}
    rows: list[dict] = []
    row_of_delivery: dict[int, int] = {}
    first_row_of_message: dict[str, int] = {}
    agents: set[str] = set()
    last_version: dict[str, int] = {}
    decisions = {d: 0 for d in DECISIONS}
    # iter_deliveries (the delivery's columns) and iter_deliveries_with_messages (its envelope) walk
    # the same delivery ids in the same order
    for d, m in zip(store.iter_deliveries(), store.iter_deliveries_with_messages()):
        if d["delivery_id"] != m["delivery_id"]:  # pragma: no cover - the store's order is one order
            raise AssertionError("deliveries read out of step")
        i = len(rows)
        row_of_delivery[d["delivery_id"]] = i
        first_row_of_message.setdefault(d["message_id"], i)
        agents.update((m["sender"], m["recipient"]))
        decisions[d["decision"]] = decisions.get(d["decision"], 0) + 1
        moved = None
        if d["state_after"] is not None and d["state_version_after"] != last_version.get(d["task_id"]):
            moved = d["state_after"]
            last_version[d["task_id"]] = d["state_version_after"]
        rows.append(_row(d, m, moved))
    injected: list = []  # (fault event, the row its event sits on, the first delivery after it or None)
    row_of_event: dict[int, int] = {}
    loose: list = []  # events that name no delivery, placed with the next delivery's (a fault, a stored artifact)

    def place(e, i: int, after: int | None) -> None:
        row_of_event[e["seq"]] = i
        rows[i]["ev"].append([e["seq"], e["type"], summarize(e["type"], e["data"])])
        if e["type"] == "fault_injected":
            injected.append((e, i, after))

    for e in store.iter_events():
        i = row_of_delivery.get(e["delivery_id"]) if e["delivery_id"] is not None else None
        if i is None:
            loose.append(e)
            continue
        for held in loose:
            place(held, i, rows[i]["d"])
        loose.clear()
        place(e, i, rows[i]["d"])
    if rows:
        for held in loose:  # after the last delivery: no delivery for a fault to hit
            place(held, len(rows) - 1, None)
    deliveries_of: dict[str, list[tuple[int, int]]] = {}
    for r in rows:
        deliveries_of.setdefault(r["mid"], []).append((r["d"], r["t"]))
    faults = []
    for e, i, after in injected:  # each fault on the row of the delivery it hit (else where its event sits)
        hit = fault_delivery(e, deliveries_of, after)
        faults.append(_fault(e, i if hit is None else row_of_delivery[hit], hit))
    faults.sort(key=lambda f: (f["row"], f["seq"]))
    picture = RunPicture(label=label, meta=meta, lanes=sorted(agents, key=_lane_key), rows=rows, faults=faults,
                         decisions=decisions, checked=check)
    if check:
        if results is None:
            from .invariants import check as check_invariants

            results = check_invariants(store)
        for r in results:
            if r.ok:
                continue
            placed = [(_witness_row(w, row_of_delivery, first_row_of_message, row_of_event), w)
                      for w in r.witnesses[:WITNESS_CAP]]
            picture.breaks.append({"name": r.name, "description": r.description, "witnesses": placed,
                                   "more": max(0, len(r.witnesses) - WITNESS_CAP)})
    return picture


def _fault(e, row: int, hit: int | None) -> dict:
    return {"row": row, "seq": e["seq"], "fault": e["data"].get("fault"), "message_id": e["message_id"],
            "delivery": hit, "summary": summarize(e["type"], e["data"])}


def _fault_messages(e) -> list[str]:
    """The message a fault event was injected on, then every other string its detail holds (the messages it
    made among them: a late failure, a twin, a copy, a resend, an ack, a request; any other string names no
    delivery and is passed over)."""
    own = e["message_id"]
    found: list[str] = [own] if own else []

    def walk(v) -> None:
        if isinstance(v, str):
            if v != own and v not in found:
                found.append(v)
        elif isinstance(v, dict):
            for k, x in v.items():
                if k not in ("fault", "selector"):
                    walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)

    walk(e["data"])
    return found


def fault_delivery(e, deliveries_of: dict, after: int | None) -> int | None:
    """The delivery a ``fault_injected`` event ``e`` hit, told from the run: of the deliveries from ``after``
    on (the first delivery after the event in the log; None: none came after it), the first of a message the
    fault made (its detail names it and the run delivered it); else one of the message it was injected on
    (of several, a copy's: the one at a tick its detail names, such as a duplicate's ``again_at``); else None
    (a dropped message, a crash after the last delivery: nothing to point at). ``deliveries_of``: message id
    -> [(delivery_id, tick)] in delivery order."""
    if after is None:
        return None
    names = _fault_messages(e)
    own = e["message_id"]
    made = [ds[0][0] for m in names if m != own
            for ds in [[x for x in deliveries_of.get(m, ()) if x[0] >= after]] if ds]
    if made:
        return min(made)
    mine = [x for x in deliveries_of.get(own, ()) if x[0] >= after] if own else []
    if not mine:
        return None
    ticks = {v for v in (e["data"] or {}).values() if isinstance(v, int) and not isinstance(v, bool)}
    return next((d for d, t in mine if t in ticks), mine[0][0]) if len(mine) > 1 else mine[0][0]


def _named(w) -> dict[str, list]:
    """The deliveries, messages and events a witness names (searched through nested values), in the
    order :func:`_witness_row` tries them."""
    found: dict[str, list] = {"delivery": [], "message": [], "event": []}

    def walk(v) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                if k in ("delivery_id", "delivery") and isinstance(x, int) and not isinstance(x, bool):
                    found["delivery"].append(x)
                elif k in ("message_id", "message", "first", "second", "late") and isinstance(x, str):
                    found["message"].append(x)
                elif k in ("event_seq", "seq") and isinstance(x, int) and not isinstance(x, bool):
                    found["event"].append(x)
                else:
                    walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)

    walk(w)
    return found


def _witness_deliveries(store, results) -> dict[str, list[int | None]]:
    """For each broken invariant, the delivery each of its first :data:`WITNESS_CAP` witnesses points at
    (as :func:`_witness_row` places it on a whole page), looked up in the store in a few reads."""
    named = {r.name: [_named(w) for w in r.witnesses[:WITNESS_CAP]] for r in results if not r.ok}
    last = store.last_delivery()
    by_message = store.first_deliveries_of_messages(m for ws in named.values() for f in ws for m in f["message"])
    by_event = store.deliveries_of_events(s for ws in named.values() for f in ws for s in f["event"])
    out: dict[str, list[int | None]] = {}
    for name, ws in named.items():
        out[name] = []
        for f in ws:
            at = next((d for d in f["delivery"] if 1 <= d <= last), None)
            if at is None:
                at = next((by_message[m] for m in f["message"] if m in by_message), None)
            if at is None:
                at = next((by_event[s] for s in f["event"] if s in by_event), None)
            out[name].append(at)
    return out


def read_window(store, label: str, first: int, last: int, *, results=None) -> RunPicture:
    """Read deliveries ``first``..``last`` of a run for the page, as :func:`read_run` reads a whole one
    (the same rows, envelopes, events, faults, states moved), in flat memory: the deliveries a page at a
    time from ``first``, the events of just those deliveries. ``results``: the invariants' verdicts on the
    whole run (None: not checked); each broken one is listed, its witnesses placed on the rows they name
    in the window, and the delivery named for those outside it."""
    meta = {k: store.get_meta(k) for k in ("scenario", "seed", "policy", "faults", "schema_version")}
    rows: list[dict] = []
    row_of_delivery: dict[int, int] = {}
    agents: set[str] = set()
    deliveries = store.iter_deliveries(min(5000, max(1, last - first + 1)), after=first - 1)
    joined = store.iter_deliveries_with_messages(min(5000, max(1, last - first + 1)), after=first - 1)
    for d, m in zip(deliveries, joined):
        if d["delivery_id"] > last:
            break
        if d["delivery_id"] != m["delivery_id"]:  # pragma: no cover - the store's order is one order
            raise AssertionError("deliveries read out of step")
        row_of_delivery[d["delivery_id"]] = len(rows)
        agents.update((m["sender"], m["recipient"]))
        rows.append(_row(d, m, None))
    # a state 'moved' when its version differs from the task's last delivery's, before the window too
    last_version = store.state_versions_before(first, (r["task"] for r in rows if r["state"] is not None)) if rows else {}
    for r in rows:
        if r["state"] is not None and r["sv"] != last_version.get(r["task"]):
            r["moved"] = r["state"]
            last_version[r["task"]] = r["sv"]
    faults: list[dict] = []
    if rows:
        after = store.last_event_of_deliveries_upto(first - 1) if first > 1 else 0
        upto = None if rows[-1]["d"] >= store.last_delivery() else store.last_event_of_deliveries_upto(rows[-1]["d"])
        loose: list = []

        placed_here: dict[int, int] = {}  # a fault event in this window's stretch of the log -> its row

        def place(e, i: int) -> None:
            rows[i]["ev"].append([e["seq"], e["type"], summarize(e["type"], e["data"])])
            if e["type"] == "fault_injected":
                placed_here[e["seq"]] = i

        for e in store.iter_events_between(after, upto):
            if e["delivery_id"] is not None and e["delivery_id"] not in row_of_delivery and \
                    first <= e["delivery_id"] <= rows[-1]["d"]:
                i = None  # names a delivery in the window that is not recorded: placed as a loose event
            elif e["delivery_id"] is not None:
                i = row_of_delivery.get(e["delivery_id"])
                if i is None:
                    continue  # another window's
            else:
                i = None
            if i is None:
                loose.append(e)
                continue
            for held in loose:
                place(held, i)
            loose.clear()
            place(e, i)
        for held in loose:
            place(held, len(rows) - 1)
        # a fault hits a delivery at or after its event: those of the log up to this window's end, whichever
        # window their event is in, each on the row of the delivery it hit (else where its event sits)
        injected = []
        for e in store.iter_events(etype="fault_injected"):
            if upto is not None and e["seq"] > upto:
                break
            injected.append(e)
        deliveries_of = store.deliveries_of_messages(m for e in injected for m in _fault_messages(e))
        next_delivery = store.deliveries_of_events(e["seq"] for e in injected)
        for e in injected:
            hit = fault_delivery(e, deliveries_of, next_delivery.get(e["seq"]))
            if hit is not None and hit in row_of_delivery:
                faults.append(_fault(e, row_of_delivery[hit], hit))
            elif hit is None and e["seq"] in placed_here:
                faults.append(_fault(e, placed_here[e["seq"]], None))
        faults.sort(key=lambda f: (f["row"], f["seq"]))
    picture = RunPicture(label=label, meta=meta, lanes=sorted(agents, key=_lane_key), rows=rows, faults=faults,
                         decisions={d: 0 for d in DECISIONS} | store.deliveries_by_decision(),
                         total=store.last_delivery(), checked=results is not None)
    if results is not None:
        at = _witness_deliveries(store, results)
        for r in results:
            if r.ok:
                continue
            ws = r.witnesses[:WITNESS_CAP]
            placed = [(row_of_delivery.get(d) if d is not None else None, w) for d, w in zip(at[r.name], ws)]
            picture.breaks.append({"name": r.name, "description": r.description, "witnesses": placed,
                                   "more": max(0, len(r.witnesses) - WITNESS_CAP), "deliveries": at[r.name]})
    return picture


def first_break(store, results) -> tuple[int, str] | None:
    """The earliest delivery a broken invariant's witness points at, and that invariant's name (of the
    first :data:`WITNESS_CAP` witnesses of each); None when every invariant holds (or none points at a delivery)."""
    best = None
    for name, ds in _witness_deliveries(store, results).items():
        for d in ds:
            if d is not None and (best is None or d < best[0]):
                best = (d, name)
    return best


def read_runs(stores, labels, *, check: bool = True, first: int | None = None, around: int | None = None,
              count: int | None = None, again: str = "protolab timeline", progress=None) -> list[RunPicture]:
    """Read runs for one page: whole, as :func:`read_run` does, when each has at most :data:`WHOLE_UP_TO`
    deliveries and no window is asked for; else one window of the same deliveries of each (``first``:
    the first delivery shown; ``around``: a delivery in the middle of it; neither: around the first delivery
    where an invariant broke, or from the start), ``count`` deliveries (default :data:`WINDOW_ROWS`, at
    most :data:`WHOLE_UP_TO`). ``again``: the command, without its window options, the page names for
    another window. ``progress(done, total)``: the invariants' check, shard by shard."""
    from .errors import InputError

    if count is not None and not 1 <= count <= WHOLE_UP_TO:
        raise InputError(f"--count {count}: a page shows 1 to {WHOLE_UP_TO:,} deliveries", code="E_USAGE")
    if first is not None and around is not None:
        raise InputError("--from and --around both given; give one", code="E_USAGE")
    for name, v in (("--from", first), ("--around", around)):
        if v is not None and v < 1:
            raise InputError(f"{name} {v}: deliveries are numbered from 1", code="E_USAGE")
    results = []
    for s in stores:
        if check:
            from .invariants import check as check_invariants

            results.append(check_invariants(s, progress=progress))
        else:
            results.append(None)
    total = max(s.last_delivery() for s in stores)
    if first is None and around is None and count is None and total <= WHOLE_UP_TO:
        return [read_run(s, label, check=check, results=r) for s, label, r in zip(stores, labels, results)]
    n = count or WINDOW_ROWS
    if first is not None:
        why = f"from delivery {first:,}, as asked"
    elif around is not None:
        first = max(1, around - n // 2)
        why = f"around delivery {around:,}, as asked"
    else:
        broke = [b for s, r in zip(stores, results) if r is not None for b in [first_break(s, r)] if b is not None]
        if broke:
            at, name = min(broke)
            first = max(1, at - n // 2)
            why = f"around delivery {at:,}, where {name} first broke"
        else:
            first = 1
            why = ("from the start: every invariant holds" if check else "from the start (--no-check: the "
                   "invariants were not checked)")
    if first > total:
        raise InputError(f"delivery {first:,} is past the last delivery ({total:,}); choose --from 1 to {total:,}",
                         code="E_USAGE")
    last = min(total, first + n - 1)
    window = Window(first, last, why, again)
    pictures = [read_window(s, label, first, last, results=r) for s, label, r in zip(stores, labels, results)]
    for p in pictures:
        p.window = window
    return pictures


def _witness_row(w, by_delivery: dict, by_message: dict, by_event: dict) -> int | None:
    """The row a witness points at: a delivery it names, else the first delivery of a message it
    names, else the delivery of an event it names (searched through nested values)."""
    found = _named(w)
    for d in found["delivery"]:
        if d in by_delivery:
            return by_delivery[d]
    for m in found["message"]:
        if m in by_message:
            return by_message[m]
    for s in found["event"]:
        if s in by_event:
            return by_event[s]
    return None


# ------------------------------------------------------------------------------ drawing

def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _colours() -> dict:
    return {
        "decision": {d: web_colour(DECISION_STYLE[d]) for d in DECISIONS},
        "state": {s: web_colour(st) for s, st in STATE_STYLE.items()},
        "fault": web_colour(EVENT_REGISTRY["fault_injected"].STYLE),
        "break": web_colour(DECISION_STYLE["rejected"]),
    }


def _svg(p: RunPicture, k: int, colours: dict) -> str:
    lanes = {a: GUTTER + LANE_W // 2 + j * LANE_W for j, a in enumerate(p.lanes)}
    width = GUTTER + LANE_W * max(1, len(p.lanes)) + STATE_W
    height = TOP + ROW * max(1, len(p.rows)) + 8
    out = [f'<svg class="run" id="run{k}" data-run="{k}" xmlns="http://www.w3.org/2000/svg" '
           f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" style="max-width:{width}px">']
    out.append(f'<rect class="hl" x="0" y="-{ROW}" width="{width}" height="{ROW}"/>')
    for _a, x in lanes.items():
        out.append(f'<line class="lane" x1="{x}" y1="0" x2="{x}" y2="{height}"/>')
    fault_rows: dict[int, list[str]] = {}
    for f in p.faults:
        fault_rows.setdefault(f["row"], []).append(f["summary"])
    break_rows: dict[int, list[str]] = {}
    for b in p.breaks:
        for row, _w in b["witnesses"]:
            if row is not None and b["name"] not in break_rows.setdefault(row, []):
                break_rows[row].append(b["name"])
    dcol, scol = colours["decision"], colours["state"]
    for i, r in enumerate(p.rows):
        y = TOP + i * ROW + ROW // 2
        out.append(f'<text class="n" x="4" y="{y + 4}">{r["d"]}</text>')
        if i in fault_rows:
            out.append(f'<path class="fault" data-row="{i}" fill="{colours["fault"]}" '
                       f'd="M{GUTTER - 26} {y - 6}l-5 7h4l-2 6 6-8h-4z"><title>fault: {_e("; ".join(fault_rows[i]))}'
                       f'</title></path>')
        if i in break_rows:
            out.append(f'<g class="break" data-row="{i}"><circle cx="{GUTTER - 12}" cy="{y}" r="6" '
                       f'fill="{colours["break"]}"/><text class="bang" x="{GUTTER - 12}" y="{y + 4}">!</text>'
                       f'<title>broken: {_e(", ".join(break_rows[i]))}</title></g>')
        x1, x2 = lanes[r["from"]], lanes[r["to"]]
        dec = r["dec"]
        if x1 == x2:  # to itself: a small loop
            d = f"M{x1} {y - 5}h24v10h-20"
        else:
            d = f"M{x1} {y - 5}L{x2 + (-6 if x2 > x1 else 6)} {y + 5}"
        tip = f'#{r["d"]} {r["mid"]} {r["type"]} {r["from"]} → {r["to"]} ({r["task"]}): {dec}'
        if r["code"]:
            tip += f' {r["code"]}'
        out.append(f'<path class="arrow {dec}" data-row="{i}" data-delivery="{r["d"]}" data-decision="{dec}" '
                   f'stroke="{dcol.get(dec, "#000")}" marker-end="url(#h-{dec})" d="{d}"><title>{_e(tip)}</title></path>')
        lx = (x1 + x2) // 2 if x1 != x2 else x1 + 28
        word = "" if dec == "accepted" else f" · {dec}"
        out.append(f'<text class="l" x="{lx}" y="{y - 3}">{_e(r["mid"])} {_e(r["type"])}{_e(word)}</text>')
        if r["moved"]:
            out.append(f'<text class="s" x="{width - STATE_W + 8}" y="{y + 4}" fill="{scol.get(r["moved"], "#000")}">'
                       f'{_e(r["task"])} {_e(r["moved"])}</text>')
    out.append("</svg>")
    return "".join(out)


def _header(p: RunPicture, k: int, colours: dict) -> str:
    m = p.meta
    bits = [f'<h2>{_e(p.label)}</h2><p class="meta">']
    bits.append(" · ".join(_e(f"{k2} {v}") for k2, v in (("scenario", m.get("scenario")), ("policy", m.get("policy")),
                                                          ("seed", m.get("seed")), ("faults", m.get("faults") or "none"))
                           if v is not None))
    if p.window is None:
        bits.append(f'</p><p class="meta">{len(p.rows)} deliveries: ')
    else:
        shown = f"{p.rows[0]['d']:,}-{p.rows[-1]['d']:,}" if p.rows else "none"
        bits.append(f'</p><p class="meta">deliveries {shown} of {p.total:,} shown; the whole run\'s: ')
    bits.append(", ".join(f'<span style="color:{colours["decision"][d]}">{n} {d}</span>'
                          for d, n in p.decisions.items() if n))
    bits.append("</p>")
    if p.breaks:
        bits.append('<details class="breaks" open><summary>broken invariants: '
                    f'{_e(", ".join(b["name"] for b in p.breaks))}</summary><ul>')
        for b in p.breaks:
            bits.append(f'<li><b>{_e(b["name"])}</b>: {_e(b["description"])}<ul>')
            at = b.get("deliveries") or ()
            for j, (row, w) in enumerate(b["witnesses"][:20]):
                where = (f'<a href="#" data-goto="{row}" data-run="{k}">delivery {p.rows[row]["d"]}</a>: '
                         if row is not None else
                         f'delivery {at[j]} (not in this window: --around {at[j]}): '
                         if j < len(at) and at[j] is not None else "")
                bits.append(f'<li>{where}<code>{_e(json.dumps(w, sort_keys=True, ensure_ascii=False))}</code></li>')
            rest = len(b["witnesses"]) - 20 + b["more"]
            if rest > 0:
                bits.append(f"<li>… {rest} more witnesses ('protolab check --db' lists them)</li>")
            bits.append("</ul></li>")
        bits.append("</ul></details>")
    elif p.checked and p.breaks == [] and p.rows:  # (unchecked, --no-check: nothing said either way)
        bits.append('<p class="meta ok">every invariant holds</p>')
    return "".join(bits)


def _lanes(p: RunPicture) -> str:
    """The lanes' names over a run's drawing: at the top of its column, kept in sight while it scrolls."""
    width = _width(p)

    def pc(x: int) -> str:  # the lane names sit over the drawing, which may be shrunk: in shares of its width
        return f"{100 * x / width:.3f}%"

    lanes = "".join(f'<span class="lane-name" style="left:{pc(GUTTER + j * LANE_W)};width:{pc(LANE_W)}">{_e(a)}</span>'
                    for j, a in enumerate(p.lanes))
    return (f'<div class="lanes" style="max-width:{width}px">'
            f'<span class="lane-name" style="left:0;width:{pc(GUTTER)}">#</span>{lanes}'
            f'<span class="lane-name" style="right:0;width:{pc(STATE_W)}">task state</span></div>')


def _data(p: RunPicture) -> str:
    rows = [{k: r[k] for k in ("d", "t", "dec", "code", "reason", "state", "sv", "env", "ev")} for r in p.rows]
    faults = {}
    for f in p.faults:
        faults.setdefault(f["row"], []).append(f["summary"])
    breaks = {}
    for b in p.breaks:
        for row, w in b["witnesses"]:
            if row is not None:
                breaks.setdefault(row, []).append([b["name"], w])
    text = json.dumps({"rows": rows, "faults": faults, "breaks": breaks}, sort_keys=True, ensure_ascii=False,
                      separators=(",", ":"))
    # inside <script>: no '</script>' or '<!--' can close it
    return text.replace("<", "\\u003c")


_CSS = """
body{font:13px/1.35 system-ui,sans-serif;margin:0;color:#1f2328;background:#fff;overflow-wrap:anywhere}
header.top{padding:8px 12px;border-bottom:1px solid #d0d7de}
header.top h1{font-size:16px;margin:0 0 4px}
.legend span{margin-right:12px;white-space:nowrap}
.legend i{display:inline-block;width:18px;height:3px;vertical-align:middle;margin-right:4px}
.runs{display:grid;gap:0 24px;padding:0 12px;align-items:end;min-width:0}
.runs>div{min-width:0}
.runs>.head{align-self:end;padding-top:8px}
.runs>.head h2{font-size:14px;margin:0}
.meta{margin:2px 0;color:#57606a}.ok{color:#1a7f37}
.breaks{margin:4px 0;max-width:700px}.breaks code{font-size:11px;word-break:break-all}
.lanes{position:sticky;top:0;height:20px;width:100%;background:#f6f8fa;border-bottom:1px solid #d0d7de;z-index:1}
.lane-name{position:absolute;top:2px;text-align:center;font-weight:600;overflow:hidden;white-space:nowrap;
text-overflow:ellipsis}
.runs>.body{align-self:start}
svg.run{display:block;cursor:pointer;width:100%;height:auto}
svg .lane{stroke:#d0d7de;stroke-width:1}
svg .arrow{fill:none;stroke-width:1.6}
svg .arrow:hover{stroke-width:3}
svg text{font-size:10px}
svg text.n,svg text.l{fill:#57606a}
svg text.l{text-anchor:middle}
svg text.s{font-weight:600}
svg text.bang{fill:#fff;font-weight:700;text-anchor:middle}
svg .hl{fill:#ffe58f;stroke:#bf8700;stroke-width:1}
#detail{position:fixed;right:0;top:0;bottom:0;width:420px;overflow:auto;background:#fff;border-left:1px solid #d0d7de;
padding:8px 12px;box-shadow:-2px 0 6px rgba(0,0,0,.08);display:none;z-index:2;box-sizing:border-box}
#detail.open{display:block}#detail pre{font-size:11px;white-space:pre-wrap;word-break:break-all;background:#f6f8fa;padding:6px}
#detail button{float:right}
body.detail-open{padding-right:420px}
@media (max-width:1599px){
 #detail{top:auto;left:0;width:auto;height:38vh;border-left:0;border-top:1px solid #d0d7de;box-shadow:0 -2px 6px rgba(0,0,0,.08)}
 body.detail-open{padding-right:0;padding-bottom:38vh}
}
"""

_JS = """
(function(){
var ROW=%d,TOP=%d,data=[];
document.querySelectorAll('script.run-data').forEach(function(s){data[+s.dataset.run]=JSON.parse(s.textContent);});
var panel=document.getElementById('detail');
function esc(s){return String(s).replace(/[&<>"]/g,function(c){return{'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c];});}
function scale(svg){return svg.getBoundingClientRect().height/svg.viewBox.baseVal.height;}
function close(){panel.classList.remove('open');document.body.classList.remove('detail-open');}
function show(k,i){
 var d=data[k],r=d.rows[i];if(!r)return;
 var svg=document.getElementById('run'+k),hl=svg.querySelector('.hl');hl.setAttribute('y',TOP+i*ROW);
 var h='<button>close</button>';
 h+='<h3>delivery '+r.d+' (tick '+r.t+'): '+esc(r.dec)+(r.code?' '+esc(r.code):'')+'</h3>';
 h+='<p>'+esc(r.reason)+'</p><p>task '+esc(r.env.task_id)+' after it: '+esc(r.state||'-')+(r.sv!=null?' v'+r.sv:'')+'</p>';
 (d.faults[i]||[]).forEach(function(f){h+='<p><b>fault</b> '+esc(f)+'</p>';});
 (d.breaks[i]||[]).forEach(function(b){h+='<p><b>broken: '+esc(b[0])+'</b></p><pre>'+esc(JSON.stringify(b[1],null,1))+'</pre>';});
 h+='<h4>envelope (what was said)</h4><pre>'+esc(JSON.stringify(r.env,null,2))+'</pre>';
 h+='<h4>events (what happened)</h4><ul>';
 r.ev.forEach(function(e){h+='<li>'+e[0]+' <b>'+esc(e[1])+'</b> '+esc(e[2])+'</li>';});
 panel.innerHTML=h+'</ul>';panel.querySelector('button').onclick=close;
 panel.classList.add('open');document.body.classList.add('detail-open');panel.dataset.run=k;panel.dataset.row=i;
}
// row i of run k scrolled to a third of the page left above the detail panel (below it on a narrow screen)
function reveal(k,i){
 var svg=document.getElementById('run'+k),box=svg.getBoundingClientRect();
 var y=box.top+window.scrollY+(TOP+i*ROW)*scale(svg);
 var open=panel.classList.contains('open'),p=panel.getBoundingClientRect();
 var room=open&&p.top>0&&p.left<=0?p.top:window.innerHeight;
 window.scrollTo(window.scrollX,Math.max(0,y-room/3));
}
document.querySelectorAll('svg.run').forEach(function(svg){
 svg.addEventListener('click',function(ev){
  var box=svg.getBoundingClientRect(),i=Math.floor(((ev.clientY-box.top)/scale(svg)-TOP)/ROW);show(+svg.dataset.run,i);});
});
document.querySelectorAll('a[data-goto]').forEach(function(a){a.addEventListener('click',function(ev){
 ev.preventDefault();var k=+a.dataset.run,i=+a.dataset.goto;show(k,i);reveal(k,i);});});
// the page opens at the first delivery where an invariant broke: that row highlighted, its detail shown
var runs=document.querySelector('main.runs'),at=null;
if(runs.dataset.openRun!==undefined){at=[+runs.dataset.openRun,+runs.dataset.openRow];show(at[0],at[1]);reveal(at[0],at[1]);}
window.protolabTimeline={show:show,reveal:reveal,data:data,opened:at};
document.documentElement.dataset.opened=at?at.join(':'):'top';
})();
"""


#: side by side, each drawing shrinks to its column; once that would draw it smaller than this share of its
#: size, the runs stack instead, one above the other, each as wide as the page
STACK_BELOW = 0.6


def _width(p: RunPicture) -> int:
    return GUTTER + LANE_W * max(1, len(p.lanes)) + STATE_W


def stack_width(pictures: list[RunPicture]) -> int | None:
    """The page width (CSS px) under which the runs stack rather than shrink below :data:`STACK_BELOW` of
    their size side by side (the page's padding and gaps counted); None for one run."""
    if len(pictures) < 2:
        return None
    return math.ceil(STACK_BELOW * sum(_width(p) for p in pictures)) + 24 * len(pictures)


def _stacking(pictures: list[RunPicture]) -> str:
    at = stack_width(pictures)
    if at is None:
        return ""
    return (f"@media (max-width:{at - 1}px){{.runs{{grid-template-columns:minmax(0,1fr)!important}}"
            ".runs>div{order:var(--o)}.runs>.body{margin-bottom:12px}}")


def opening(pictures: list[RunPicture]) -> tuple[int, int] | None:
    """Where the page opens: (run, row) of the earliest delivery a broken invariant's witness names on the
    page (of two runs at the same delivery, the first run's); None when nothing broke there (the top)."""
    best = None
    for k, p in enumerate(pictures):
        for b in p.breaks:
            for row, _w in b["witnesses"]:
                if row is not None and (best is None or (p.rows[row]["d"], k) < best[0]):
                    best = ((p.rows[row]["d"], k), (k, row))
    return None if best is None else best[1]


def render(pictures: list[RunPicture], *, title: str = "protolab timeline") -> str:
    """The page: a legend, then each run's header and timeline, side by side."""
    colours = _colours()
    markers = "".join(
        f'<marker id="h-{d}" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" orient="auto">'
        f'<path d="M0 0L8 4L0 8z" fill="{c}"/></marker>' for d, c in colours["decision"].items())
    legend = "".join(f'<span><i style="background:{c}"></i>{d}</span>' for d, c in colours["decision"].items())
    legend += f'<span style="color:{colours["fault"]}">⚡ fault injected</span>'
    legend += f'<span style="color:{colours["break"]}">● invariant broken (its witness)</span>'
    legend += "<span>right: the state a delivery left its task in, when it moved</span>"
    n = max(1, len(pictures))
    start = opening(pictures)
    at = "" if start is None else f' data-open-run="{start[0]}" data-open-row="{start[1]}"'
    parts = [
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<title>{_e(title)}</title><meta name=\"generator\" content=\"protolab timeline\">",
        f"<style>{_CSS}{_stacking(pictures)}</style></head><body>",
        f'<svg width="0" height="0" style="position:absolute" aria-hidden="true"><defs>{markers}</defs></svg>',
        f'<header class="top"><h1>{_e(title)}</h1><div class="legend">{legend}</div>'
        "<p class=\"meta\">one row per delivery, time running down; click a row for its envelope and events</p></header>",
        f'<main class="runs" style="grid-template-columns:repeat({n},minmax(0,1fr))"{at}>',
    ]
    w = next((p.window for p in pictures if p.window is not None), None)
    if w is not None:
        total = max(p.total or 0 for p in pictures)
        step = w.last - w.first + 1
        cmds = []
        if w.first > 1:
            cmds.append(("earlier", f"{w.again} --from {max(1, w.first - step)} --count {step}"))
        if w.last < total:
            cmds.append(("later", f"{w.again} --from {w.last + 1} --count {step}"))
        cmds.append(("around a delivery", f"{w.again} --around DELIVERY --count {step}"))
        parts.insert(5, f'<p class="window" style="margin:0;padding:6px 12px;background:#fff8c5;'
                        f'border-bottom:1px solid #d0d7de"><b>A window of the run</b>: deliveries {w.first:,} to {w.last:,} of '
                        f'{total:,}, {_e(w.why)}. A run this big is never drawn whole on one page; another window: '
                        + "; ".join(f"{_e(what)}: <code>{_e(c)}</code>" for what, c in cmds) + "</p>")
    parts += [f'<div class="head" style="--o:{2 * k}">{_header(p, k, colours)}</div>' for k, p in enumerate(pictures)]
    parts += [f'<div class="body" style="--o:{2 * k + 1}">{_lanes(p)}{_svg(p, k, colours)}</div>' for k, p in enumerate(pictures)]
    parts.append("</main><aside id=\"detail\"></aside>")
    parts += [f'<script type="application/json" class="run-data" data-run="{k}">{_data(p)}</script>'
              for k, p in enumerate(pictures)]
    parts.append(f"<script>{_JS % (ROW, TOP)}</script></body></html>\n")
    return "".join(parts)


def write(pictures: list[RunPicture], out: str | os.PathLike, *, title: str = "protolab timeline", reads=()) -> int:
    """Write the page to ``out`` whole (a temporary file renamed into place); its size in bytes. ``reads``:
    the runs it was read from, which ``out`` may not be (E_OUTPUT_IS_INPUT)."""
    text = render(pictures, title=title).encode("utf-8")
    with written_whole(out, "wb", code="E_OUTPUT", reads=reads) as fh:
        fh.write(text)
    return len(text)
