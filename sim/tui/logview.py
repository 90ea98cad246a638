"""A virtualised, cursor-driven list widget for very large row counts.

`LogView` is built on Textual's Line API (`ScrollView` + `render_line`): it
never materialises widgets or strips for rows that are not on screen.  Rows
come from a `RowSource`, which is asked for *pages* of rows
(`PAGE_SIZE` rows at a time); a small LRU of pages is kept, so scrolling
through 100,000+ rows only ever touches the handful of pages that are visible.

The module is deliberately generic: it depends only on Textual and Rich.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import ClassVar, Iterable, Protocol, Sequence, runtime_checkable

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

__all__ = ["RowSource", "ListSource", "LogView", "PAGE_SIZE", "MAX_PAGES"]

PAGE_SIZE = 128
"""Number of rows fetched from a source in one call."""

MAX_PAGES = 16
"""Number of pages kept in the LRU page cache."""

_MAX_STRIPS = 512
"""Number of rendered strips kept in the strip cache."""


@runtime_checkable
class RowSource(Protocol):
    """Anything that can hand out rendered rows by index range."""

    def __len__(self) -> int: ...

    def rows(self, start: int, stop: int) -> list[Text]:
        """Return one rendered line per row, for `start <= i < stop`."""
        ...


def _as_text(row: Text | str) -> Text:
    return row if isinstance(row, Text) else Text(str(row))


class ListSource:
    """A `RowSource` over an in-memory sequence of `Text` or `str`.

    The sequence is referenced, not copied, so appending to the original list
    and calling `LogView.refresh_source()` shows the new rows.  `str` rows are
    converted to `Text` lazily, when they are requested.
    """

    def __init__(self, rows: Sequence[Text | str] | Iterable[Text | str] = ()) -> None:
        self._rows: Sequence[Text | str] = rows if isinstance(rows, list) else list(rows)

    def __len__(self) -> int:
        return len(self._rows)

    def rows(self, start: int, stop: int) -> list[Text]:
        return [_as_text(row) for row in self._rows[start:stop]]


class LogView(ScrollView, can_focus=True):
    """A scrollable, virtualised list with a row cursor.

    Messages:
        `LogView.Highlighted` whenever the cursor changes (index is -1 when
        the source becomes empty).
        `LogView.Selected` on enter, or on a mouse click on a row.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor_up", "Up", show=False),
        Binding("down", "cursor_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
        Binding("enter", "select", "Select", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {"logview--cursor"}

    DEFAULT_CSS = """
    LogView {
        overflow-x: hidden;
        overflow-y: auto;
        background: $surface;
        color: $foreground;
        & > .logview--cursor {
            background: $accent 40%;
        }
        &:focus > .logview--cursor {
            color: $block-cursor-foreground;
            background: $block-cursor-background;
            text-style: $block-cursor-text-style;
        }
    }
    """

    cursor: reactive[int] = reactive(-1, repaint=False, init=False)
    """Index of the cursor row, or -1 when the source is empty."""

    class _RowMessage(Message):
        """A message about one row of a view."""

        def __init__(self, view: LogView, index: int) -> None:
            super().__init__()
            self.view = view
            self.index = index

        @property
        def control(self) -> LogView:
            return self.view

    class Highlighted(_RowMessage):
        """Posted whenever the cursor changes."""

    class Selected(_RowMessage):
        """Posted when a row is chosen (enter, or a mouse click)."""

    def __init__(
        self,
        source: RowSource | None = None,
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
        follow: bool = False,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.follow = follow
        self._source: RowSource = source if source is not None else ListSource([])
        self._count = len(self._source)
        self._pages: OrderedDict[int, list[Text]] = OrderedDict()
        self._strips: OrderedDict[tuple, Strip] = OrderedDict()
        self.set_reactive(LogView.cursor, 0 if self._count else -1)

    # ------------------------------------------------------------------ API

    @property
    def source(self) -> RowSource:
        return self._source

    @property
    def row_count(self) -> int:
        """Number of rows as of the last `set_source` / `refresh_source`."""
        return self._count

    def set_source(self, source: RowSource, *, keep_cursor: bool = False) -> None:
        """Replace the rows shown; the cursor goes to 0 (or stays, clamped)."""
        old_cursor = self.cursor
        self._source = source
        self._count = len(source)
        self._drop_caches()
        self._update_virtual_size()
        target = old_cursor if keep_cursor else 0
        self._set_cursor(self._clamp(target), always_post=True)
        if self.is_mounted:
            if not keep_cursor:
                self.scroll_to(y=0, animate=False, force=True)
            self._scroll_cursor_into_view()
        self.refresh()

    def refresh_source(self) -> None:
        """The current source grew or changed: re-read its length and rows.

        With `follow=True`, a cursor sitting on the last row (or an empty
        source) is moved to the new last row, and the view scrolls to it.
        """
        old_count = self._count
        at_end = old_count == 0 or self.cursor >= old_count - 1
        self._count = len(self._source)
        self._drop_caches()
        self._update_virtual_size()
        if self.follow and at_end and self._count:
            self._set_cursor(self._count - 1)
        else:
            self._set_cursor(self._clamp(self.cursor))
        if self.is_mounted:
            self._scroll_cursor_into_view()
        self.refresh()

    def move_cursor(self, index: int) -> None:
        """Move the cursor (clamped) and scroll so that it is visible."""
        self._set_cursor(self._clamp(index))
        self._scroll_cursor_into_view()

    # ------------------------------------------------------------- actions

    def action_cursor_up(self) -> None:
        if self._count:
            self.move_cursor(self.cursor - 1)

    def action_cursor_down(self) -> None:
        if self._count:
            self.move_cursor(self.cursor + 1)

    def _page_height(self) -> int:
        return max(1, self.scrollable_content_region.height)

    def action_page_up(self) -> None:
        if not self._count:
            return
        page = self._page_height()
        self.scroll_to(y=self.scroll_offset.y - page, animate=False, force=True)
        self.move_cursor(self.cursor - page)

    def action_page_down(self) -> None:
        if not self._count:
            return
        page = self._page_height()
        self.scroll_to(y=self.scroll_offset.y + page, animate=False, force=True)
        self.move_cursor(self.cursor + page)

    def action_first(self) -> None:
        if self._count:
            self.move_cursor(0)

    def action_last(self) -> None:
        if self._count:
            self.move_cursor(self._count - 1)

    def action_select(self) -> None:
        if self.cursor >= 0:
            self.post_message(self.Selected(self, self.cursor))

    # -------------------------------------------------------------- events

    def on_mount(self) -> None:
        # Textual dispatches on_mount to every class in the MRO, so
        # ScrollView.on_mount runs too; no super() call needed.
        self._update_virtual_size()
        # A cursor set before mount (e.g. move_cursor in compose) is only
        # scrolled into view once we have a size.
        self._scroll_cursor_into_view()

    def on_resize(self, event: events.Resize) -> None:
        self._strips.clear()
        self._update_virtual_size()
        self._scroll_cursor_into_view()

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        index = self.scroll_offset.y + offset.y
        if 0 <= index < self._count:
            event.stop()
            self.focus()
            self.move_cursor(index)
            self.post_message(self.Selected(self, index))

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()

    # ------------------------------------------------------------ internals

    def _clamp(self, index: int) -> int:
        if self._count <= 0:
            return -1
        return max(0, min(index, self._count - 1))

    def validate_cursor(self, value: int) -> int:
        return self._clamp(value)

    def watch_cursor(self, old: int, new: int) -> None:
        if old >= 0:
            self.refresh_line(old)
        if new >= 0:
            self.refresh_line(new)
        self.post_message(self.Highlighted(self, new))

    def _set_cursor(self, value: int, *, always_post: bool = False) -> None:
        if not self.is_mounted:
            # Watchers / messages are meaningless before mount.
            self.set_reactive(LogView.cursor, value)
            return
        if value == self.cursor:
            if always_post:
                self.post_message(self.Highlighted(self, value))
            return
        self.cursor = value

    def _update_virtual_size(self) -> None:
        width = self.scrollable_content_region.width if self.is_mounted else 0
        self.virtual_size = Size(width, self._count)

    def _drop_caches(self) -> None:
        self._pages.clear()
        self._strips.clear()

    def _scroll_cursor_into_view(self) -> None:
        if not self.is_mounted or self.cursor < 0:
            return
        height = self.scrollable_content_region.height
        if height <= 0:
            # Not laid out yet: try again once we have a size.
            self.call_after_refresh(self._scroll_cursor_into_view)
            return
        top = self.scroll_offset.y
        cursor = self.cursor
        if cursor < top:
            y = cursor
        elif cursor >= top + height:
            y = cursor - height + 1
        else:
            return
        self.scroll_to(y=y, animate=False, force=True)

    def _page(self, page_index: int) -> list[Text]:
        pages = self._pages
        page = pages.get(page_index)
        if page is not None:
            pages.move_to_end(page_index)
            return page
        start = page_index * PAGE_SIZE
        stop = min(start + PAGE_SIZE, self._count)
        page = [_as_text(row) for row in self._source.rows(start, stop)] if stop > start else []
        pages[page_index] = page
        while len(pages) > MAX_PAGES:
            pages.popitem(last=False)
        return page

    def get_row(self, index: int) -> Text | None:
        """The `Text` for row `index` (through the page cache), or None."""
        if not 0 <= index < self._count:
            return None
        page = self._page(index // PAGE_SIZE)
        offset = index % PAGE_SIZE
        return page[offset] if offset < len(page) else None

    def render_line(self, y: int) -> Strip:
        index = self.scroll_offset.y + y
        # `self.size` is the content region *including* the scrollbar gutter
        # for a ScrollView; render to the width that is actually visible.
        width = self.scrollable_content_region.width
        base_style = self.rich_style
        row = self.get_row(index)
        if row is None:
            return Strip.blank(width, base_style)
        is_cursor = index == self.cursor
        cursor_style = self.get_component_rich_style("logview--cursor") if is_cursor else None
        key = (index, width, base_style, cursor_style)
        strip = self._strips.get(key)
        if strip is not None:
            self._strips.move_to_end(key)
            return strip
        strip = self._render_row(row, width, base_style, cursor_style)
        self._strips[key] = strip
        while len(self._strips) > _MAX_STRIPS:
            self._strips.popitem(last=False)
        return strip

    def _render_row(
        self, row: Text, width: int, base_style: Style, cursor_style: Style | None
    ) -> Strip:
        plain = row.plain
        if "\n" in plain or "\r" in plain or "\t" in plain:
            row = row.copy()
            if "\r" in plain:
                row = Text("").join(row.split("\r", include_separator=False))
            if "\n" in row.plain:
                row = row.split("\n")[0]
            row.expand_tabs()
        segments = list(row.render(self.app.console))
        if cursor_style is None:
            segments = list(Segment.apply_style(segments, base_style))
            pad_style = base_style
        else:
            # Cursor defaults under the row's own colours, but the cursor
            # background always wins so the cursor stays visible.
            pad_style = base_style + cursor_style
            segments = list(
                Segment.apply_style(
                    segments, pad_style, Style(bgcolor=cursor_style.bgcolor)
                )
            )
        return Strip(segments).crop_extend(0, width, pad_style)
