"""Tests for sim.tui.logview.LogView (a virtualised Line-API list).

pytest-asyncio is not assumed: each test drives Textual's `App.run_test()`
through `asyncio.run(...)` inside a plain sync test function.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("textual")

from rich.text import Text
from textual.app import App, ComposeResult

from sim.tui.logview import PAGE_SIZE, ListSource, LogView

N = 100_000


class CountingSource:
    """A synthetic source of `n` rows that records what it was asked for."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.requested = 0
        self.calls: list[tuple[int, int]] = []

    def __len__(self) -> int:
        return self.n

    def rows(self, start: int, stop: int) -> list[Text]:
        stop = min(stop, self.n)
        self.calls.append((start, stop))
        self.requested += max(0, stop - start)
        return [Text(f"row {i}") for i in range(start, stop)]


class LogApp(App):
    def __init__(self, source, *, follow: bool = False) -> None:
        super().__init__()
        self.source = source
        self.follow = follow
        self.selected: list[int] = []
        self.highlighted: list[int] = []

    def compose(self) -> ComposeResult:
        yield LogView(self.source, id="log", follow=self.follow)

    def on_mount(self) -> None:
        self.query_one(LogView).focus()

    def on_log_view_selected(self, message: LogView.Selected) -> None:
        self.selected.append(message.index)

    def on_log_view_highlighted(self, message: LogView.Highlighted) -> None:
        self.highlighted.append(message.index)


def visible_text(view: LogView) -> list[str]:
    return [view.render_line(y).text.rstrip() for y in range(view.size.height)]


def run(app: App, scenario, size=(80, 24)) -> None:
    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await scenario(pilot, app.query_one(LogView))

    asyncio.run(main())


def test_mount_fetches_only_visible_pages():
    source = CountingSource(N)
    app = LogApp(source)

    async def scenario(pilot, view: LogView) -> None:
        assert view.row_count == N
        assert view.virtual_size.height == N
        assert view.cursor == 0
        assert source.requested < 2_000
        assert all(stop - start <= PAGE_SIZE for start, stop in source.calls)
        lines = visible_text(view)
        assert lines[0] == "row 0"
        assert lines[view.size.height - 1] == f"row {view.size.height - 1}"

    run(app, scenario)


def test_keyboard_navigation():
    source = CountingSource(N)
    app = LogApp(source)

    async def scenario(pilot, view: LogView) -> None:
        await pilot.press("end")
        await pilot.pause()
        assert view.cursor == N - 1
        lines = visible_text(view)
        assert "row 99999" in lines
        assert lines[-1] == "row 99999"
        assert view.scroll_offset.y == N - view.size.height
        # jumping to the end must not have walked the whole source
        assert source.requested < 2_000

        await pilot.press("home")
        await pilot.pause()
        assert view.cursor == 0
        assert view.scroll_offset.y == 0
        assert visible_text(view)[0] == "row 0"

        await pilot.press("down", "down", "down")
        await pilot.pause()
        assert view.cursor == 3

        await pilot.press("up")
        await pilot.pause()
        assert view.cursor == 2

        page = view.scrollable_content_region.height
        await pilot.press("pagedown")
        await pilot.pause()
        assert abs(view.cursor - (2 + page)) <= 1
        assert view.scroll_offset.y <= view.cursor < view.scroll_offset.y + page

        await pilot.press("pageup")
        await pilot.pause()
        assert view.cursor == 2

        assert source.requested < 2_000
        assert app.highlighted and app.highlighted[-1] == 2

    run(app, scenario)


def test_enter_posts_selected():
    app = LogApp(CountingSource(N))

    async def scenario(pilot, view: LogView) -> None:
        await pilot.press("down", "down", "enter")
        await pilot.pause()
        assert app.selected == [2]

    run(app, scenario)


def test_click_moves_cursor_and_selects():
    app = LogApp(CountingSource(N))

    async def scenario(pilot, view: LogView) -> None:
        await pilot.click(LogView, offset=(2, 5))
        await pilot.pause()
        assert view.cursor == 5
        assert app.selected == [5]

    run(app, scenario)


def test_cursor_row_is_highlighted():
    app = LogApp(CountingSource(N))

    async def scenario(pilot, view: LogView) -> None:
        cursor_strip = view.render_line(0)
        other_strip = view.render_line(1)
        width = view.scrollable_content_region.width
        assert view.show_vertical_scrollbar
        assert cursor_strip.cell_length == width
        assert other_strip.cell_length == width
        cursor_bg = {seg.style.bgcolor for seg in cursor_strip if seg.style}
        other_bg = {seg.style.bgcolor for seg in other_strip if seg.style}
        assert cursor_bg != other_bg

    run(app, scenario)


def test_set_source_empty_then_back():
    app = LogApp(CountingSource(N))

    async def scenario(pilot, view: LogView) -> None:
        await pilot.press("down", "down")
        await pilot.pause()
        view.set_source(ListSource([]))
        await pilot.pause()
        assert view.cursor == -1
        assert view.row_count == 0
        assert view.virtual_size.height == 0
        assert all(line == "" for line in visible_text(view))
        # keys on an empty view are harmless
        await pilot.press("down", "end", "pagedown", "enter")
        await pilot.pause()
        assert view.cursor == -1
        assert app.selected == []

        view.set_source(ListSource(["alpha", Text("beta"), "gamma"]))
        await pilot.pause()
        assert view.cursor == 0
        assert visible_text(view)[:4] == ["alpha", "beta", "gamma", ""]

        view.move_cursor(2)
        view.set_source(ListSource(["a", "b"]), keep_cursor=True)
        await pilot.pause()
        assert view.cursor == 1

    run(app, scenario)


def test_rows_are_truncated_and_sanitised():
    long = "x" * 500
    app = LogApp(ListSource([long, "two\nlines", "tab\there"]))

    async def scenario(pilot, view: LogView) -> None:
        width = view.scrollable_content_region.width
        for y in range(view.size.height):
            assert view.render_line(y).cell_length == width
        lines = visible_text(view)
        assert lines[0] == "x" * width
        assert lines[1] == "two"
        assert "\t" not in lines[2] and lines[2].startswith("tab")

    run(app, scenario)


def test_refresh_source_follow_tails():
    rows = [f"line {i}" for i in range(50)]
    app = LogApp(ListSource(rows), follow=True)

    async def scenario(pilot, view: LogView) -> None:
        await pilot.press("end")
        await pilot.pause()
        assert view.cursor == 49
        rows.extend(f"line {i}" for i in range(50, 200))
        view.refresh_source()
        await pilot.pause()
        assert view.row_count == 200
        assert view.cursor == 199
        assert visible_text(view)[-1] == "line 199"

        # not on the last row -> the cursor stays put
        await pilot.press("up")
        await pilot.pause()
        rows.extend(f"line {i}" for i in range(200, 210))
        view.refresh_source()
        await pilot.pause()
        assert view.cursor == 198

    run(app, scenario)


def test_refresh_source_follow_from_empty():
    rows: list[str] = []
    app = LogApp(ListSource(rows), follow=True)

    async def scenario(pilot, view: LogView) -> None:
        assert view.cursor == -1
        rows.extend(f"line {i}" for i in range(100))
        view.refresh_source()
        await pilot.pause()
        assert view.cursor == 99
        assert "line 99" in visible_text(view)

    run(app, scenario)


def test_refresh_source_without_follow_keeps_cursor():
    rows = [f"line {i}" for i in range(10)]
    app = LogApp(ListSource(rows))

    async def scenario(pilot, view: LogView) -> None:
        await pilot.press("end")
        await pilot.pause()
        rows.extend(f"line {i}" for i in range(10, 20))
        view.refresh_source()
        await pilot.pause()
        assert view.cursor == 9
        del rows[5:]
        view.refresh_source()
        await pilot.pause()
        assert view.cursor == 4

    run(app, scenario)


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
def test_page_cache_is_bounded():
    source = CountingSource(N)
    app = LogApp(source)

    async def scenario(pilot, view: LogView) -> None:
        for _ in range(40):
            await pilot.press("pagedown")
        await pilot.pause()
        assert len(view._pages) <= 16
        before = source.requested
        # re-rendering the same screen hits the cache
        visible_text(view)
        visible_text(view)
        assert source.requested == before

    run(app, scenario)


def test_move_cursor_before_mount_scrolls_on_mount():
    class PreApp(LogApp):
        def compose(self) -> ComposeResult:
            view = LogView(self.source, id="log")
            view.move_cursor(5_000)
            yield view

    app = PreApp(CountingSource(N))

    async def scenario(pilot, view: LogView) -> None:
        await pilot.pause()
        assert view.cursor == 5_000
        assert "row 5000" in visible_text(view)

    run(app, scenario)


def test_a_reviewers_message_id_and_a_long_runs_id_are_shown_whole():
    from sim.events import StoredEvent
    from sim.tui.rows import DELIVERY_HEADER, EVENT_HEADER, delivery_row, event_row

    for mid in ("REV-T-1-v4", "M-1000000"):
        d = {"delivery_id": 12, "tick": 40, "message_id": mid, "type": "review_decision", "sender": "reviewer",
             "recipient": "manager", "task_id": "T-1", "decision": "rejected", "code": "E_NOT_IN_REVIEW"}
        row = delivery_row(d).plain
        assert f" {mid} " in row and row.endswith(" E_NOT_IN_REVIEW")
        assert row.index(mid) == DELIVERY_HEADER.index("msg")
        e = StoredEvent(seq=7, tick=40, created_at="", type="review_decided", task_id="T-1", message_id=mid,
                        delivery_id=None, data={"decision": "ready", "reviewer": "reviewer"})
        row = event_row(e).plain
        assert f" {mid} " in row and row.index(mid) == EVENT_HEADER.index("msg")


def test_a_route_too_long_for_its_column_closes_up_instead_of_losing_letters():
    from sim.tui.rows import DELIVERY_HEADER, delivery_row

    d = {"delivery_id": 3, "tick": 4, "message_id": "M-3", "type": "task_result", "sender": "researcher-1",
         "recipient": "manager", "task_id": "T-1", "decision": "rejected", "code": "E_STALE_LEASE"}
    row = delivery_row(d).plain
    assert "researcher-1→manager" in row and "…" not in row
    assert row.index("T-1") == DELIVERY_HEADER.index("task") and row.index("E_STALE_LEASE") == DELIVERY_HEADER.index("code")
