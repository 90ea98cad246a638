"""SVG snapshot tests of the protolab TUI (pytest-textual-snapshot's ``snap_compare``).

Every app here drives an in-memory :class:`~sim.live.LiveRun` of a bundled scenario with its
fixed seed, paused (no play timer), so each screenshot is a pure function of the key presses.
The snapshots live in ``tests/__snapshots__/test_tui_snapshots/``; after a deliberate change
to the TUI, regenerate them with ``pytest tests/test_tui_snapshots.py --snapshot-update`` and
look at the SVGs before accepting them.

The snapshot tests are plain (sync) functions: ``snap_compare`` runs the app itself with
``App.run()``, which needs to own the event loop.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("textual")
pytest.importorskip("pytest_textual_snapshot")

from sim.live import LiveRun
from sim.scenario import load_scenario
from sim.tui.app import ProtolabApp
from sim.tui.workshop import WorkshopApp

from test_tui import settled

SCENARIO = "publish-report"
SIZE = (120, 36)
NARROW = (80, 24)

SPACE = "space"
BACK = "left_square_bracket"


def main_app(policy: str = "safe", faults=()) -> ProtolabApp:
    """A fresh, paused ProtolabApp over an in-memory live run (seed from the scenario: 0)."""
    live = LiveRun(load_scenario(SCENARIO), policy=policy, faults=faults)
    return ProtolabApp(live.store, live=live)


def workshop_app(faults=("late-failure",)) -> WorkshopApp:
    sc = load_scenario(SCENARIO)
    return WorkshopApp(LiveRun(sc, policy="naive", faults=list(faults)), LiveRun(sc, policy="safe", faults=list(faults)))


def task_states(app: ProtolabApp) -> dict[str, str]:
    """What the State pane shows: task id -> state."""
    return {t["task_id"]: t["state"] for t in app._tasks}


def delivery_index(app: ProtolabApp, message_id: str) -> int:
    """Row index, in the Messages pane, of the (first) delivery of ``message_id``."""
    src = app.messages_view.source
    rows = app.store.deliveries_at(list(src.ids))
    for i, row in enumerate(rows):
        if row["message_id"] == message_id:
            return i
    raise AssertionError(f"{message_id} is not in the Messages pane")


# ---------------------------------------------------------------------------- snapshots


def test_main_screen_after_ten_steps(snap_compare):
    """The main screen (State, Events, Messages side by side) after ten deliveries, safe policy."""
    assert snap_compare(main_app(), press=[SPACE] * 10, terminal_size=SIZE)


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
def test_delivery_detail_of_task_result(snap_compare):
    """The detail of M-3's delivery (the researcher's task_result): envelope, digest 'matches', intent, evidence."""

    async def run_before(pilot) -> None:
        app: ProtolabApp = pilot.app
        await pilot.press(*[SPACE] * 10)
        app.messages_view.focus()
        assert await settled(pilot, lambda: app.focused is app.messages_view)  # focus comes by a message of its own
        index = delivery_index(app, "M-3")
        app.messages_view.move_cursor(index)
        await pilot.pause()
        d = app.selected_delivery()
        assert d is not None and d["message_id"] == "M-3" and d["type"] == "task_result"

    assert snap_compare(main_app(), press=["enter"], terminal_size=SIZE, run_before=run_before)


def test_needs_review_after_conflicting_digest(snap_compare):
    """A conflicting digest on M-3 (T-1's task_result) freezes T-1 in needs_review."""

    async def run_before(pilot) -> None:
        app: ProtolabApp = pilot.app
        await pilot.press(*[SPACE] * 4)
        d = app.selected_delivery()
        assert d is not None and d["message_id"] == "M-3"
        await pilot.press("c")
        await pilot.press(*[SPACE] * 4)
        await pilot.pause()
        assert task_states(app)["T-1"] == "needs_review"

    assert snap_compare(main_app(), terminal_size=SIZE, run_before=run_before)


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
def test_time_travel_five_events_back(snap_compare):
    """After twelve deliveries, '[' five times: every pane as of five events ago (TIME TRAVEL on the status line)."""

    async def run_before(pilot) -> None:
        app: ProtolabApp = pilot.app
        await pilot.press(*[SPACE] * 12)
        await pilot.press(*[BACK] * 5)
        await pilot.pause()
        assert app.as_of == app.store.last_event() - 5

    assert snap_compare(main_app(), terminal_size=SIZE, run_before=run_before)


def test_workshop_late_failure_to_the_end(snap_compare):
    """Workshop mode with a late failure, run to the end: the naive side breaks NO_STATE_REGRESSION."""

    async def run_before(pilot) -> None:
        app: WorkshopApp = pilot.app
        await pilot.press("e")
        await pilot.pause()
        naive = {r.name: r.ok for r in app.query_one("#naive").results}
        safe = {r.name: r.ok for r in app.query_one("#safe").results}
        assert naive["NO_STATE_REGRESSION"] is False
        assert all(safe.values())

    assert snap_compare(workshop_app(), terminal_size=SIZE, run_before=run_before)


def test_main_screen_narrow(snap_compare):
    """The main screen at 80x24: the narrow layout stacks Events above Messages."""
    assert snap_compare(main_app(), press=[SPACE] * 10, terminal_size=NARROW)


# ---------------------------------------------------------------------------- reproducibility


async def _screenshot_after_ten_steps() -> str:
    app = main_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press(*[SPACE] * 10)
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        return app.export_screenshot()


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
def test_main_screen_screenshot_is_reproducible():
    """Two fresh apps, the same presses: byte-identical SVGs (what the first snapshot relies on)."""
    first = asyncio.run(_screenshot_after_ten_steps())
    second = asyncio.run(_screenshot_after_ten_steps())
    assert "deliveries" in first
    assert first == second


# ---------------------------------------------------------------------------- labs

LAB_BIG = (120, 40)


def lab_app(number: int = 3) -> ProtolabApp:
    """Lab ``number`` in the TUI over an in-memory run, with an in-memory progress file."""
    from sim.labs.catalog import get_lab
    from sim.labs.session import LabSession
    from sim.store import ProgressStore

    lab = get_lab(number)
    live = LiveRun(load_scenario(lab.scenario), seed=lab.seed, policy=lab.policy, faults=list(lab.faults))
    return ProtolabApp(live.store, live=live, lab=LabSession(lab, live.store, ProgressStore.open(None)))


def lab_menu():
    from sim.labs.catalog import labs
    from sim.tui.guide import LabMenu

    rows = [{"number": lab.number, "title": lab.title, "minutes": lab.minutes, "checkpoints": len(lab.checkpoints),
             "done": 0} for lab in labs()]
    rows[0]["done"] = rows[0]["checkpoints"]  # lab 1 finished, the rest untouched
    return LabMenu(rows)


async def _lab_in_progress(pilot) -> None:
    app: ProtolabApp = pilot.app
    await pilot.press(*[SPACE] * 9)  # the report is published: the first checkpoint ticks
    await pilot.press("h")
    await pilot.pause()
    app.clear_notifications()
    await pilot.pause()
    assert app.lab.done == 1


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
@pytest.mark.parametrize("size", [NARROW, LAB_BIG], ids=["80x24", "120x40"])
def test_lab_in_progress_with_its_guide_and_hint(snap_compare, size):
    """Lab 3 after nine deliveries and h: one checkpoint met, the next step's text and its hint."""
    assert snap_compare(lab_app(3), terminal_size=size, run_before=_lab_in_progress)


@pytest.mark.parametrize("size", [NARROW, LAB_BIG], ids=["80x24", "120x40"])
def test_lab_menu(snap_compare, size):
    """protolab lab: every lab, its minutes, checkpoints done and a progress bar."""
    assert snap_compare(lab_menu(), terminal_size=size)
