"""The Guide at 80x24 and 120x35: the current step is shown whole (its text and its next checkpoint,
with the hint when asked for) at every step of every lab, and the notices an action raises never
cover it."""

from __future__ import annotations

import pytest

from sim.labs.catalog import labs
from sim.labs.facts import PLACEHOLDER
from sim.labs.paths import delivered, play, reference
from sim.labs.session import LabSession
from sim.live import LiveRun
from sim.scenario import load_scenario
from sim.store import ProgressStore

LABS = labs()
SIZES = [(80, 24), (120, 35)]


def _app(lab):
    live = LiveRun(load_scenario(lab.scenario), seed=lab.seed, policy=lab.policy, faults=list(lab.faults))
    session = LabSession(lab, live.store, ProgressStore.open(None))
    naive = None
    if lab.mode == "workshop":
        from sim.tui.workshop import WorkshopApp

        naive = LiveRun(load_scenario(lab.scenario), seed=lab.seed, policy="naive", faults=list(lab.faults))
        return WorkshopApp(naive, live, lab=session), live, naive, session
    from sim.tui.app import ProtolabApp

    return ProtolabApp(live.store, live=live, lab=session), live, naive, session


def _words(text: str) -> list[str]:
    return text.split()


async def _settled(pilot) -> None:
    """Wait on the Guide's own signal that the current step is in view (a busy machine takes more
    refreshes; a bounded number of them, never a sleep)."""
    for _ in range(50):
        if pilot.app.guide.settled:
            return
        await pilot.pause()
    raise AssertionError("the Guide never settled on its current step")


def _shown_whole(app, session) -> None:
    """The current step's text is in the Guide and the Guide needs no scrolling to show it."""
    guide = app.guide
    body = " ".join(str(guide.body.content).split())
    assert not PLACEHOLDER.search(body), body  # every fact and every field a check saw is filled in
    cur = session.current_step()
    if cur < len(session.lab.steps):
        step = session.lab.steps[cur]
        assert " ".join(_words(step.text)) in body, (step.title, body)
        if not guide.hint_text:
            assert session.first_unmet().checkpoint.title in body
    if guide.compact:
        assert guide.virtual_size.height <= guide.scrollable_content_region.height, \
            (session.lab.dirname, cur, guide.virtual_size, guide.scrollable_content_region)
    else:  # the full Guide lists every step: the current one (with its hint) is in view, whole
        where = guide.current_lines()
        if where is not None:
            first, n = where
            view = guide.scrollable_content_region.height
            assert n <= view and guide.scroll_y <= first and first + n <= guide.scroll_y + view, \
                (session.lab.dirname, cur, where, guide.scroll_y, view)


def _no_notice_covers_the_guide(app) -> None:
    from textual.widgets._toast import Toast

    toasts = list(app.screen.query(Toast))
    for t in toasts:
        assert not t.region.overlaps(app.guide.region), (t.region, app.guide.region)


@pytest.mark.quick_sample(4)
@pytest.mark.parametrize("size", [pytest.param(SIZES[0]), pytest.param(SIZES[1], marks=pytest.mark.slow)],
                         ids=lambda s: f"{s[0]}x{s[1]}")  # the roomier size in the slow set: 80x24 is the harder fit
@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.dirname)
async def test_every_step_is_shown_whole_and_no_notice_covers_the_guide(lab, size):
    app, live, naive, session = _app(lab)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        # a short terminal: the current step only (the workshop's Guide, below both sides, is short below 36 rows)
        assert app.guide.compact == (size == (80, 24) or naive is not None)
        await _settled(pilot)
        _shown_whole(app, session)
        seen_notice = False
        for action in reference(lab):
            if action["do"] == "answer":
                continue
            before = {s.id for s in session.states if s.met}
            if naive is not None and action["do"] == "step":  # the workshop steps both sides together
                until = action.get("until", "end")
                while (until == "end" or not delivered(live.store, until)) and app._step():
                    pass
            else:
                play(live, session, [action])
            session.refresh()
            app.lab_refresh([s.id for s in session.states if s.met and s.id not in before])
            (app._refresh if naive is not None else app.reload)()
            await pilot.pause()
            await _settled(pilot)
            _shown_whole(app, session)
            _no_notice_covers_the_guide(app)
            seen_notice = seen_notice or bool(app._notifications)
            await pilot.press("h")
            await pilot.pause()
            assert app.guide.hint_text
            await _settled(pilot)
            _shown_whole(app, session)
        assert seen_notice  # a checkpoint met said so, away from the Guide
    live.close()
    if naive is not None:
        naive.close()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_an_error_notice_does_not_cover_the_guide_either(size):
    lab = next(lab for lab in LABS if lab.number == 3)
    app, live, _naive, _session = _app(lab)
    async with app.run_test(size=size) as pilot:
        await pilot.press("d")  # nothing selected: an error notice
        await pilot.pause()
        assert app._notifications
        _no_notice_covers_the_guide(app)
    live.close()


async def test_what_a_naive_comparison_showed_is_in_the_guide():
    """Lab 11: the naive runtime's log is compared once the learner opens the message, and the Guide
    says what it showed."""
    lab = next(lab for lab in LABS if lab.number == 11)
    app, live, _naive, session = _app(lab)
    async with app.run_test(size=(80, 24)) as pilot:
        play(live, session, [{"do": "step", "until": "M-3"}])
        app.reload()
        await pilot.pause()
        assert "naive" not in " ".join(app.guide.news)
        play(live, session, [{"do": "open", "message": "M-3"}])
        app.lab_refresh(["opened-result", "naive-log"])
        await pilot.pause()
        body = " ".join(str(app.guide.body.content).split())
        assert "the naive runtime's log of M-3 keeps source_name, source_email, source_phone in the clear" in body
    live.close()
