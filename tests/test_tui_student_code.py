"""A learner's code that raises never shows a traceback: in the TUI (live, and on the workshop screen)
the error is one line naming the file, the line and the error, shown in the app, which stays up;
when the app ends because of it the command exits 2 with that line. An import error stops the
command before the TUI starts, in one line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ptyrun import Terminal
from sim.live import LiveRun
from sim.plugins import Plugins
from sim.scenario import load_scenario

PROTOLAB = [sys.executable, "-m", "sim"]

BAD_DESIGN = '''DIGEST_SCHEME = "json-sorted-v1"


def idempotency_key(intent):
    return intent["key"]


def payload(intent):
    return dict(intent.payload)


def evidence_refs(intent):
    return list(intent.evidence_refs)
'''

BAD_INTAKE = '''def decide(env, task, prior, rules, unresolved=frozenset()):
    return {}[env.type]
'''


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "bad_design.py").write_text(BAD_DESIGN)
    (tmp_path / "bad_intake.py").write_text(BAD_INTAKE)
    (tmp_path / "syntax.py").write_text("def oops(:\n")
    return tmp_path


SIZES = [(80, 24), (120, 35)]


def _status(app) -> str:
    return str(app.screen.query_one("#status").render())


@pytest.mark.quick_sample(2)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("which, code, line", [("design", "E_DESIGN_RAISED", "bad_design.py, line 5"),
                                                ("intake", "E_INTAKE_RAISED", "bad_intake.py, line 2")])
async def test_a_raising_design_or_intake_stops_the_run_in_one_line_and_the_app_stays_up(files, size, which, code, line,
                                                                                          monkeypatch):
    from sim.tui.app import ProtolabApp

    monkeypatch.chdir(files)
    plugins = Plugins(**{which: files / f"bad_{which}.py"})
    live = LiveRun(load_scenario("publish-report"), plugins=plugins)
    app = ProtolabApp(live.store, live=live)
    notes = []
    app.notify = lambda message, **kw: notes.append(str(message))  # what the learner is told, as a notice
    async with app.run_test(size=size) as pilot:
        await pilot.press("space")
        await pilot.pause()
        assert app.failure is not None and app.failure.code == code
        assert app.is_running  # the app stays up: the run just cannot step further
        status = _status(app)
        assert status.startswith(f"the run stopped: {code}") and "Traceback" not in status
        assert any(line in n and code in n for n in notes), notes
        before = live.store.last_delivery()
        await pilot.press("space", "p")
        await pilot.pause()
        assert live.store.last_delivery() == before and not app.playing
        assert "cannot go on" in _status(app)
        # the rest of the app still works: help opens and closes
        await pilot.press("question_mark")
        await pilot.pause()
        await pilot.press("escape")
        await pilot.press("q")
    live.close()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_a_raising_design_on_the_workshop_screen_stops_both_sides_in_one_line(files, size, monkeypatch):
    from sim.tui.workshop import WorkshopApp

    monkeypatch.chdir(files)
    sc = load_scenario("publish-report")
    bad = LiveRun(sc, plugins=Plugins(design=files / "bad_design.py"), faults=["resend"])
    ref = LiveRun(sc, faults=["resend"])
    app = WorkshopApp(bad, ref, labels=("design bad_design.py", "reference design"))
    async with app.run_test(size=size) as pilot:
        await pilot.press("space")
        await pilot.pause()
        assert app.failure is not None and app.failure.code == "E_DESIGN_RAISED"
        assert "bad_design.py, line 5" in str(app.failure)
        assert app.is_running
        status = str(app.query_one("#status").render())
        assert status.startswith("the run stopped: E_DESIGN_RAISED")
        await pilot.press("e")  # to the end: nothing more happens
        await pilot.pause()
        assert ref.store.last_delivery() == 0
        await pilot.press("q")
    bad.close()
    ref.close()


@pytest.mark.parametrize("which, code, line", [("design", "E_DESIGN_RAISED", "bad_design.py, line 5"),
                                                ("intake", "E_INTAKE_RAISED", "bad_intake.py, line 2")])
def test_the_tui_command_exits_2_with_one_line_when_the_learners_code_stopped_the_run(files, which, code, line):
    t = Terminal(PROTOLAB + ["tui", f"--{which}", f"bad_{which}.py"], cwd=files, size=(120, 35))
    t.wait_for("the run stopped", code)
    t.press("q")
    assert t.finish() == 2
    tail = t.text.split("the run stopped")[-1]
    assert "Traceback" not in t.text
    assert f"error: {code}: " in tail and " ".join(line.split()) in " ".join(tail.replace("\r", "").replace("\n", "").split())


def test_a_design_that_does_not_import_is_one_line_before_the_tui_starts(files):
    t = Terminal(PROTOLAB + ["tui", "--design", "syntax.py"], cwd=files, size=(120, 35))
    assert t.finish() == 2
    lines = [x for x in t.text.replace("\r", "").split("\n") if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: E_PLUGIN_IMPORT: ") and "line 1" in lines[0]
    assert not (files / "protolab.db").exists()
