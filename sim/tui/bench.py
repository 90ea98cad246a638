"""``protolab bench tui``: how fast a large finished run opens and scrolls in the TUI.

Project figures: wall time from opening the database read-only to the first full frame of
the main screen (three panes drawn), and the cost of one frame while scrolling the Events
pane to random places (cursor moved, every visible line rendered, rows paged from SQLite).
Floors, measured in the same run: bare sqlite3 opening the file and reading the first
screenful of events and deliveries (what any viewer must do at least), and reading one
screenful at a random offset. For contrast, ``--datatable`` also times Textual's DataTable
loading every event row (the approach the panes avoid).
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import time
from pathlib import Path

from ..store import bare_read_at, bare_read_first

__all__ = ["bench_tui", "make_run", "bench_lab"]


def make_run(path: Path, events: int, progress=None) -> int:
    """A finished stress run with at least ``events`` events at ``path``; returns its event count."""
    from ..runner import run_scenario
    from ..scenario import load_scenario
    from dataclasses import replace

    sc = load_scenario("stress")
    tasks = max(10, int(events / 14.5) + 1)
    sc = replace(sc, stress=replace(sc.stress, tasks=tasks))
    store = run_scenario(sc, db=path, progress=progress)
    try:
        return store.last_event()
    finally:
        store.close()


async def _measure_app(path: Path, size: tuple[int, int], samples: int, rng: random.Random) -> dict:
    from ..store import Store
    from .app import ProtolabApp

    t0 = time.perf_counter()
    store = Store.open(path, readonly=True)
    app = ProtolabApp(store)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        app.screen._compositor.render_update(full=True)  # the first whole frame, drawn
        opened = time.perf_counter() - t0
        view = app.events_view
        height = view.scrollable_content_region.height
        n = len(view.source)
        frames = []
        for _ in range(samples):
            at = rng.randrange(0, n)
            t1 = time.perf_counter()
            view.move_cursor(at)
            for y in range(height):
                view.render_line(y)
            frames.append(time.perf_counter() - t1)
        # and through the keyboard, as a person scrolls: page down 50 times from the top
        await pilot.press("home")
        t2 = time.perf_counter()
        for _ in range(50):
            await pilot.press("pagedown")
        await pilot.pause()
        keys = (time.perf_counter() - t2) / 50
        # the floor for a key press: the same test driver pressing a key nothing is bound to
        t3 = time.perf_counter()
        for _ in range(50):
            await pilot.press("f12")
        await pilot.pause()
        key_floor = (time.perf_counter() - t3) / 50
    store.close()
    return {"open_s": opened, "frames": frames, "height": height, "events": n, "pagedown_s": keys, "key_floor_s": key_floor}


async def _empty_app(size: tuple[int, int]) -> float:
    """The floor for opening: a Textual app with one line of text, to its first whole frame."""
    from textual.app import App
    from textual.widgets import Static

    class Empty(App):
        def compose(self):
            yield Static("protolab")

    t0 = time.perf_counter()
    app = Empty()
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        app.screen._compositor.render_update(full=True)
        return time.perf_counter() - t0


async def _datatable(path: Path, size: tuple[int, int]) -> float:
    from textual.app import App
    from textual.widgets import DataTable

    from ..store import Store

    store = Store.open(path, readonly=True)
    rows = [(e.seq, e.tick, e.type, e.task_id, e.message_id, json.dumps(e.data)) for e in store.events_at(store.event_ids())]
    store.close()

    class T(App):
        def compose(self):
            yield DataTable()

    t0 = time.perf_counter()
    app = T()
    async with app.run_test(size=size) as pilot:
        table = app.query_one(DataTable)
        table.add_columns("seq", "tick", "type", "task", "message", "data")
        table.add_rows([tuple(str(c) for c in r[:5]) + (r[5][:40],) for r in rows])
        await pilot.pause()
        app.screen._compositor.render_update(full=True)
    return time.perf_counter() - t0


def bench_tui(path: Path, *, samples: int = 300, size=(200, 50), datatable: bool = False, seed: int = 0) -> dict:
    rng = random.Random(seed)
    app = asyncio.run(_measure_app(path, size, samples, rng))
    screen_rows = app["height"]
    floor_open = min(bare_read_first(str(path), screen_rows) for _ in range(3))
    starts = [rng.randrange(1, max(2, app["events"] - screen_rows)) for _ in range(samples)]
    floor_frames = bare_read_at(str(path), starts, screen_rows)
    frames = sorted(app["frames"])
    empty = min(asyncio.run(_empty_app(size)) for _ in range(3))
    out = {
        "events": app["events"],
        "floor_empty_app_s": round(empty, 3),
        "terminal": f"{size[0]}x{size[1]}",
        "open_s": round(app["open_s"], 3),
        "floor_open_s": round(floor_open, 4),
        "frame_ms_median": round(statistics.median(frames) * 1000, 2),
        "frame_ms_p95": round(frames[int(len(frames) * 0.95) - 1] * 1000, 2),
        "floor_frame_ms_median": round(statistics.median(floor_frames) * 1000, 3),
        "pagedown_ms": round(app["pagedown_s"] * 1000, 1),
        "floor_key_ms": round(app["key_floor_s"] * 1000, 1),
    }
    # project over floor, as every bench (times: over 1)
    out["frame_ratio"] = (round(out["frame_ms_median"] / out["floor_frame_ms_median"], 1)
                          if out["floor_frame_ms_median"] else None)
    out["open_ratio"] = round(out["open_s"] / out["floor_open_s"], 1) if out["floor_open_s"] else None
    if datatable:
        out["datatable_open_s"] = round(asyncio.run(_datatable(path, size)), 2)
    return out


# ---------------------------------------------------------------------------------------- labs

FRAME_MS = 1000 / 60


def _lab_for_bench(scenario: str):
    """A lab over the stress scenario whose checkpoints stay unmet, so every refresh evaluates
    every one of them (the worst case): the checks the labs use most."""
    from ..labs.catalog import Checkpoint, Lab, Step

    cps = (
        Checkpoint("late", "a late result", "delivery", {"type": "task_result", "decision": "late"}, "", {}),
        Checkpoint("review", "a review", "event", {"type": "review_decided"}, "", {}),
        Checkpoint("crash", "a crash by hand", "crashed", {}, "", {}),
        Checkpoint("visit", "a visit", "visited", {"before": "effect_committed"}, "", {}),
        Checkpoint("done", "all finished", "all_terminal", {}, "", {}),
    )
    return Lab(0, "bench", "bench", 20, "", Path("."), scenario, 0, "safe", (), "live", (),
               (Step("all", "", cps),), ())


def bench_lab(events: int = 100_000, steps: int = 300, progress=None) -> dict:
    """How long a checkpoint takes to tick after the action that meets it, on a run of ``events``
    events: one :meth:`LabSession.refresh` after each delivery (every checkpoint unmet, so each is
    evaluated), beside the floor of reading the same new rows (the new events and deliveries) with
    no logic. Also ``lab start``: a lab opened in the TUI to its first frame, beside the plain TUI."""
    from dataclasses import replace

    from ..labs.session import LabSession
    from ..live import LiveRun
    from ..scenario import load_scenario
    from ..store import ProgressStore

    sc = load_scenario("stress")
    sc = replace(sc, stress=replace(sc.stress, tasks=max(10, int((events + 5000) / 14.5))))
    live = LiveRun(sc)
    store = live.store
    while store.last_event() < events:
        if live.step() is None:
            break
        if progress is not None and live.delivered % 500 == 0:
            progress(min(store.last_event(), events), events)
    session = LabSession(_lab_for_bench("stress"), store, ProgressStore.open(None), record=False)
    t0 = time.perf_counter()
    session.refresh()
    cold_s = time.perf_counter() - t0
    project, floor = [], []
    for _ in range(steps):
        last_ev, last_dl = store.last_event(), store.last_delivery()
        if live.step() is None:
            break
        t0 = time.perf_counter()
        store.events(after=last_ev)
        store.deliveries_at(list(range(last_dl + 1, store.last_delivery() + 1)))
        floor.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        session.refresh()
        project.append(time.perf_counter() - t0)
    n_events = store.last_event()
    live.close()
    med_p, med_f = statistics.median(project), statistics.median(floor)
    start = _bench_lab_start()
    return {
        "events": n_events,
        "steps": len(project),
        "cold_refresh_ms": round(cold_s * 1000, 1),
        "tick_median_ms": round(med_p * 1000, 3),
        "tick_p99_ms": round(sorted(project)[int(0.99 * (len(project) - 1))] * 1000, 3),
        "floor_median_ms": round(med_f * 1000, 3),
        "ratio": round(med_p / med_f, 2) if med_f else None,  # project over floor, as every bench
        "within_one_frame": sorted(project)[int(0.99 * (len(project) - 1))] * 1000 < FRAME_MS,
        **start,
    }


def _bench_lab_start(repeat: int = 3) -> dict:
    """Best of ``repeat``: lab 3 opened in the TUI to its first frame, beside the same run without a lab."""
    from ..labs.catalog import get_lab
    from ..labs.session import LabSession
    from ..live import LiveRun
    from ..scenario import load_scenario
    from ..store import ProgressStore
    from .app import ProtolabApp

    async def first_frame(with_lab: bool) -> float:
        t0 = time.perf_counter()
        lab = get_lab(3)
        live = LiveRun(load_scenario(lab.scenario), seed=lab.seed)
        session = LabSession(lab, live.store, ProgressStore.open(None)) if with_lab else None
        app = ProtolabApp(live.store, live=live, lab=session)
        async with app.run_test(size=(120, 35)) as pilot:
            await pilot.pause()
            took = time.perf_counter() - t0
        live.close()
        return took

    lab_s = min(asyncio.run(first_frame(True)) for _ in range(repeat))
    plain_s = min(asyncio.run(first_frame(False)) for _ in range(repeat))
    return {"lab_start_ms": round(lab_s * 1000, 1), "plain_start_ms": round(plain_s * 1000, 1),
            "start_ratio": round(lab_s / plain_s, 3)}  # project over floor, as every bench
