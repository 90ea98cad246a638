"""The workshop's story mode (issue 45, part 2): 'protolab demo regression --story' stops before the message
that breaks the naive side and once both sides took it, with a caption on each side made from the runs, the
culprit's row lit on both sides, the two sides aligned row for row, r to restart, f to switch the fault; at
80x24 and 120x35. Every expectation below is read from a run of its own (a batch run and its invariants, the
safe store's delivery), never typed as an id."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("textual")

from textual.widgets import Static

from ptyrun import Terminal
from sim.faults import FAULTS
from sim.invariants import check
from sim.live import LiveRun
from sim.runner import run_scenario
from sim.scenario import load_scenario
from sim.tui.story import moments, plan, story_faults
from sim.tui.workshop import Side, WorkshopApp

SCENARIO = "publish-report"
SIZES = [(80, 24), (120, 35)]


def _factory():
    sc = load_scenario(SCENARIO)
    return lambda side, faults: LiveRun(sc, policy=side, faults=list(faults))


def _first_break(faults):
    """From a batch run of the naive side: the first broken invariant's witness, and its run's deliveries."""
    store = run_scenario(load_scenario(SCENARIO), policy="naive", faults=list(faults))
    try:
        bad = [r for r in check(store) if not r.ok]
        deliveries = store.deliveries_at(store.delivery_ids())
        return bad, [dict(d) for d in deliveries]
    finally:
        store.close()


def _safe_deliveries(faults):
    store = run_scenario(load_scenario(SCENARIO), policy="safe", faults=list(faults))
    try:
        return [dict(d) for d in store.deliveries_at(store.delivery_ids())], [r for r in check(store) if not r.ok]
    finally:
        store.close()


def _caption(app, side: str) -> str:
    return app.query_one(f"#{side}", Side).caption


def _msg(row: str) -> str:
    """A delivery row's message id (the narrow rows start with it, the compact ones with the delivery number)."""
    words = row.split()
    return words[1] if words[0].isdigit() else words[0]


def _rows(view) -> list[str]:
    return [r.plain for r in view.source.rows(0, len(view.source))]


# ------------------------------------------------------------------------------------------ the plan


def test_the_story_names_the_delivery_after_which_the_naive_run_first_breaks():
    story = plan(_factory(), ("late-failure",))
    bad, naive_rows = _first_break(("late-failure",))
    safe_rows, safe_bad = _safe_deliveries(("late-failure",))
    # the culprit is the naive run's delivery the first broken invariant's witness names
    assert story.witness["message_id"] == bad[0].witnesses[0]["message_id"] == story.naive.message_id
    assert naive_rows[story.naive.index]["message_id"] == story.naive.message_id
    assert naive_rows[story.naive.index]["decision"] == story.naive.decision
    assert set(story.broken) <= {r.name for r in bad} and story.broken[0] == bad[0].name
    # the safe side's decision is its own delivery of that message
    assert safe_rows[story.safe.index]["message_id"] == story.naive.message_id
    assert safe_rows[story.safe.index]["decision"] == story.safe.decision != story.naive.decision
    assert story.safe_broken_at_end == tuple(r.name for r in safe_bad) == ()
    assert (story.naive_total, story.safe_total) == (len(naive_rows), len(safe_rows))


@pytest.mark.parametrize("fault", FAULTS)
def test_every_fault_s_story_points_at_rows_of_its_batch_runs(fault):
    story = plan(_factory(), (fault,))
    bad, naive_rows = _first_break((fault,))
    if story is None:  # no story: the naive run breaks nothing, and f skips it
        assert bad == []
        return
    assert story.broken[0] in {r.name for r in bad}
    assert naive_rows[story.naive.index]["message_id"] == story.naive.message_id
    if story.safe is not None:
        safe_rows, _ = _safe_deliveries((fault,))
        assert safe_rows[story.safe.index]["message_id"] == story.naive.message_id
        assert safe_rows[story.safe.index]["decision"] == story.safe.decision


def test_the_captions_say_what_the_runs_did():
    story = plan(_factory(), ("late-failure",))
    start, before, after, end = moments(story, ("late-failure",))
    n, s = story.naive, story.safe
    assert "late-failure" in start.naive_caption
    assert before.naive_caption.startswith(f"next: {n.message_id} ") and n.task_id in before.naive_caption
    assert f"{n.task_id} is {n.state_before}" in before.naive_caption
    w = story.witness
    assert after.naive_caption.startswith(f"{n.message_id} {n.decision}: {n.task_id} {w['old_state']} → {w['new_state']}")
    assert f"BROKEN {story.broken[0]}" in after.naive_caption
    assert after.safe_caption.startswith(f"{s.message_id} decided {s.decision}")
    assert f"{s.task_id} stays {s.state_before}" in after.safe_caption  # the safe side did not regress
    assert (before.naive_at, after.naive_at, end.naive_at) == (n.steps, n.steps + 1, None)


def test_a_fault_that_breaks_nothing_on_the_naive_side_has_no_story_and_f_skips_it():
    planned = {}

    def planner(faults):
        if faults not in planned:
            planned[faults] = plan(_factory(), faults)
        return planned[faults]

    nxt = story_faults(planner, ("late-failure",))
    assert nxt is not None and nxt != ("late-failure",)
    # every fault f passed over (between late-failure and the one it chose) tells no story
    names = list(FAULTS)
    for name in names[names.index("late-failure") + 1:names.index(nxt[0])]:
        assert planned[(name,)] is None
        bad, _rows = _first_break((name,))
        assert bad == [], name
    assert planner(nxt) is not None and _first_break(nxt)[0]


# ------------------------------------------------------------------------------------------ the screen


def _app(faults=("late-failure",)) -> WorkshopApp:
    f = _factory()
    return WorkshopApp(f("naive", faults), f("safe", faults), story=True, factory=f, faults=faults)


def _aligned(app) -> None:
    naive, safe = app.query_one("#naive", Side), app.query_one("#safe", Side)
    assert naive.msgs.region.y == safe.msgs.region.y and naive.msgs.region.height == safe.msgs.region.height
    assert naive.tasks.region.y == safe.tasks.region.y
    assert naive.msgs.scroll_y == safe.msgs.scroll_y  # row n beside row n


def _lit(app, side_id: str):
    """The row a side lights (msgs cursor) and its style, with whether the side marks it as the culprit's."""
    side = app.query_one(f"#{side_id}", Side)
    style = side.msgs.get_component_rich_style("logview--cursor")
    return side, _rows(side.msgs)[side.msgs.cursor], style


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_story_stops_before_and_after_the_culprit_with_captions_in_order(size):
    faults = ("late-failure",)
    story = plan(_factory(), faults)
    bad, naive_rows = _first_break(faults)
    culprit = naive_rows[story.naive.index]
    app = _app(faults)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        assert "story 1/4" in str(app.query_one("#status", Static).render())
        assert app.naive.delivered == app.safe.delivered == 0
        assert "late-failure" in _caption(app, "naive")
        _aligned(app)
        plain_style = app.query_one("#naive", Side).msgs.get_component_rich_style("logview--cursor")

        await pilot.press("space")  # to the moment before the culprit arrives
        assert app.naive.delivered == story.naive.steps and app.safe.delivered == story.safe.steps
        assert not any(_msg(r) == culprit["message_id"] for r in _rows(app.query_one("#naive", Side).msgs))
        assert _caption(app, "naive").startswith(f"next: {culprit['message_id']} ")
        assert _caption(app, "safe").startswith(f"next: the same {culprit['message_id']} ")
        for side_id in ("naive", "safe"):  # the culprit's task lit on both sides
            side = app.query_one(f"#{side_id}", Side)
            assert side.has_class("-culprit-task")
            assert _rows(side.tasks)[side.tasks.cursor].startswith(culprit["task_id"] + " ")
        assert not app.query_one("#naive .banner").has_class("-broken")
        _aligned(app)

        await pilot.press("space")  # the culprit delivered on both sides
        assert app.query_one("#naive .banner").has_class("-broken")
        assert bad[0].name in str(app.query_one("#naive .banner", Static).render())
        assert app.query_one("#safe .banner").has_class("-holds")
        assert f"BROKEN {bad[0].name}" in _caption(app, "naive")
        safe_rows, _ = _safe_deliveries(faults)
        safe_decision = next(r["decision"] for r in safe_rows if r["message_id"] == culprit["message_id"])
        assert _caption(app, "safe").startswith(f"{culprit['message_id']} decided {safe_decision}")
        for side_id in ("naive", "safe"):
            side, row, style = _lit(app, side_id)
            assert side.has_class("-culprit-message")
            assert _msg(row) == culprit["message_id"]
            assert style != plain_style  # lit otherwise than an ordinary cursor
            top = side.msgs.scroll_y
            assert top <= side.msgs.cursor < top + side.msgs.region.height  # on screen
        _aligned(app)

        await pilot.press("space")  # the end
        assert app.naive.finished and app.safe.finished
        await pilot.press("space")  # nothing after the end
        assert app.moment_i == len(app.moments) - 1
        assert _caption(app, "naive").startswith("end: ") and _caption(app, "safe") == "end: every invariant holds"
        assert "story 4/4" in str(app.query_one("#status", Static).render())
        _aligned(app)
        for side_id in ("naive", "safe"):
            assert _msg(_lit(app, side_id)[1]) == culprit["message_id"]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_columns_that_carry_the_lesson_fit_the_side(size):
    app = _app()
    async with app.run_test(size=size) as pilot:
        await pilot.press("e")
        for side_id in ("naive", "safe"):
            side = app.query_one(f"#{side_id}", Side)
            width = side.msgs.content_region.width
            for view in (side.tasks, side.msgs):
                for row in _rows(view):
                    assert len(row.rstrip()) <= width, (size, row)
            decisions = {r.split()[-1] for r in _rows(side.msgs)}
            assert decisions, side_id
        if size[0] < 100:  # the narrow headers name the columns the lesson needs
            header = " ".join(str(s.render()) for s in app.query("#naive .hdr").results(Static))
            for column in ("state", "ver", "lease", "trusted", "msg", "type", "task", "decision/code"):
                assert column in header.split(), column
        # the decision the lesson is about is on screen, whole, on the safe side
        assert any(r.rstrip().endswith(" late") for r in _rows(app.query_one("#safe", Side).msgs))
        states = {r.split()[1] for r in _rows(app.query_one("#naive", Side).tasks)}
        assert "failed" in states


async def test_r_starts_both_runs_again_at_the_first_moment():
    app = _app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("space", "space")
        old = app.naive
        assert app.naive.delivered > 0
        await pilot.press("r")
        assert app.naive is not old and app.naive.delivered == app.safe.delivered == 0
        assert app.query_one("#naive", Side).live is app.naive and app.query_one("#safe", Side).live is app.safe
        assert "story 1/4" in str(app.query_one("#status", Static).render())
        assert not app.query_one("#naive .banner").has_class("-broken")
        await pilot.press("space", "space")
        assert app.query_one("#naive .banner").has_class("-broken")


async def test_f_switches_to_the_next_fault_that_breaks_the_naive_side():
    app = _app()
    async with app.run_test(size=(120, 35)) as pilot:
        await pilot.press("f")
        assert app.faults != ("late-failure",)
        (fault,) = app.faults
        assert app.naive.store.get_meta("faults") == app.safe.store.get_meta("faults") == fault
        assert f"faults: {fault}" in str(app.query_one("#status", Static).render())
        assert fault in _caption(app, "naive")
        bad, rows = _first_break(app.faults)
        assert bad  # the run it switched to breaks an invariant on the naive side
        await pilot.press("space", "space")
        assert app.query_one("#naive .banner").has_class("-broken")
        assert _caption(app, "naive").startswith(rows[app.story.naive.index]["message_id"] + " ")
        assert "every invariant holds" in str(app.query_one("#safe .banner", Static).render())
        _aligned(app)


async def test_autoplay_keeps_the_old_keys_and_has_no_story():
    f = _factory()
    app = WorkshopApp(f("naive", ("late-failure",)), f("safe", ("late-failure",)), factory=f, faults=("late-failure",))
    async with app.run_test(size=(120, 35)) as pilot:
        await pilot.press("space")
        assert app.naive.delivered == app.safe.delivered == 1
        assert _caption(app, "naive") == "" and not app.query_one("#naive .caption").display
        await pilot.press("e")
        _aligned(app)


# ------------------------------------------------------------------------------------------ the command


def test_story_is_the_default_in_a_terminal_and_space_goes_on(tmp_path):
    t = Terminal([sys.executable, "-m", "sim", "demo", "regression"], cwd=tmp_path, size=(80, 24))
    t.wait_for("story 1/4", "Next moment", "Restart")
    t.press(" ")
    t.wait_for("story 2/4", "next: ")
    t.press("q")
    assert t.finish() == 0


def test_autoplay_and_paused_keep_the_old_workshop(tmp_path):
    t = Terminal([sys.executable, "-m", "sim", "demo", "regression", "--paused"], cwd=tmp_path, size=(120, 35))
    t.wait_for("paused", "Step both")
    t.press("q")
    assert t.finish() == 0
    assert "story 1/4" not in t.text


@pytest.mark.parametrize("args", [["--story"], ["--autoplay", "--serve"]], ids=["story", "autoplay-served"])
def test_story_on_demo_run_is_refused_in_one_line(tmp_path, args):
    p = subprocess.run([sys.executable, "-m", "sim", "demo", "run", *args], cwd=tmp_path, capture_output=True,
                       text=True, stdin=subprocess.DEVNULL)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [p.stderr.strip()] and p.stderr.startswith("error: E_USAGE: ")
    assert not (tmp_path / "protolab.db").exists()


async def test_help_and_the_palette_offer_only_the_keys_of_the_mode():
    app = _app()
    async with app.run_test(size=(120, 35)) as pilot:
        await pilot.pause()
        actions = {c.help for c in app.get_system_commands(app.screen)}
        assert "Play both sides on to the story's next moment" in actions
        assert "One delivery on each side" not in actions  # a timer's step would break the story's moments
        await pilot.press("question_mark")
        from sim.tui.screens import Help

        assert isinstance(app.screen, Help)
        shown = {b.action for b in app.screen.keys}
        assert {"story_next", "restart", "next_fault"} <= shown and not shown & {"step", "toggle_play"}
