"""A 100,000-event run in the TUI: it opens, pages rows instead of loading them, scrolls, travels."""

from __future__ import annotations

import hashlib

import pytest

from sim.store import Store
from sim.tui.app import ProtolabApp

from sim.tui.bench import make_run

from test_tui import settled

pytestmark = pytest.mark.slow  # a 100k-event run


@pytest.fixture(scope="module")
def big_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("big") / "big.db"
    n = make_run(path, 100_000)
    assert n >= 100_000
    return path


class CountingStore(Store):
    """Counts the rows the panes ask for."""

    fetched = 0

    def events_at(self, seqs):
        CountingStore.fetched += len(seqs)
        return super().events_at(seqs)

    def deliveries_at(self, ids):
        CountingStore.fetched += len(ids)
        return super().deliveries_at(ids)


async def test_a_100k_event_run_opens_read_only_pages_rows_and_scrolls(big_run):
    before = hashlib.sha256(big_run.read_bytes()).hexdigest()
    store = Store.open(big_run, readonly=True)
    store.__class__ = CountingStore
    CountingStore.fetched = 0
    last = store.last_event()
    app = ProtolabApp(store)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        events = app.events_view
        assert len(events.source) == last >= 100_000
        # the panes drew their first screens without reading the whole log
        assert CountingStore.fetched < 2_000
        # the Events pane starts at the newest event; home and end go to either end
        events.focus()
        assert await settled(pilot, lambda: app.focused is events)  # focus comes by a message of its own
        await pilot.press("home")
        assert events.cursor == 0
        assert events.get_row(0).plain.split()[0] == "1"
        for _ in range(20):
            await pilot.press("pagedown")
        assert events.cursor >= 20 * 10  # a page is the visible height (about 29 rows here)
        await pilot.press("end")
        await pilot.pause()
        assert events.cursor == last - 1
        assert events.get_row(last - 1).plain.split()[0] == str(last)
        assert CountingStore.fetched < 10_000
        # one event back in time: state is rebuilt by replay (a long fold runs in the background)
        await pilot.press("left_square_bracket")
        for _ in range(300):
            if not app._folding:
                break
            await pilot.pause(0.1)
        assert app.as_of == last - 1
        assert len(app.events_view.source) == last - 1
        assert len(app._tasks) == len(store.tasks())
    store.close()
    assert hashlib.sha256(big_run.read_bytes()).hexdigest() == before
