"""The labs: every lab's reference path meets every checkpoint (through the engine and through the
TUI's keys), each wrong path leaves its checkpoint unmet with the hint written for it, lab check /
submit / verify from the shell, a tampered submission caught, bad input refused in one line."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import zipfile
from pathlib import Path

import pytest

from conftest import journaled, run_cli

from sim.labs.catalog import labs
from sim.labs.paths import before_delivery_of, delivered, first_event_seq, play, reference, wrong_paths
from sim.labs.session import LabSession
from sim.live import LiveRun
from sim.scenario import load_scenario
from sim.store import ProgressStore

LABS = labs()


_cli = run_cli  # conftest's: the one way tests call the CLI in-process


def _live(lab, db=None) -> LiveRun:
    """The lab's run (written to ``db``: journaled there as 'protolab lab start' does, so that 'lab
    verify' can make it again and every event it holds is explained)."""
    live = LiveRun(load_scenario(lab.scenario), seed=lab.seed, policy=lab.policy, faults=list(lab.faults), db=db)
    if db is not None:
        journaled(live)
    return live


def _played(lab, tmp_path: Path, actions=None):
    """The lab's run written to tmp_path/labNN.db, the progress file beside it, the actions played."""
    db, prog_path = tmp_path / lab.default_db, tmp_path / "progress.db"
    live = _live(lab, db)
    progress = ProgressStore.open(prog_path)
    session = LabSession(lab, live.store, progress)
    session.refresh()
    play(live, session, reference(lab) if actions is None else actions)
    return live, session, progress, db, prog_path


def test_every_lab_is_a_whole_lab():
    assert len(LABS) >= 10
    for lab in LABS:
        assert 20 <= lab.minutes <= 40, lab.dirname
        assert len(lab.checkpoints) >= 3, lab.dirname
        assert len(lab.questions) >= 2, lab.dirname
        assert (lab.folder / "README.md").is_file(), lab.dirname
        assert reference(lab) and wrong_paths(lab), lab.dirname
        # checkpoints are met by actions in the run, never only by answers
        assert all(c.check for c in lab.checkpoints)


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.dirname)
def test_the_reference_path_meets_every_checkpoint_and_lab_check_agrees(lab, tmp_path, capsys):
    live, session, progress, db, prog_path = _played(lab, tmp_path)
    unmet = [(s.id, session.hint_for(s)) for s in session.states if not s.met]
    assert not unmet
    assert all(session.answered(q) for q in lab.questions)
    live.close()
    progress.close()
    code, out, err = _cli(capsys, "lab", "check", str(lab.number), "--db", str(db), "--progress", str(prog_path))
    assert code == 0 and not err and f"{len(lab.checkpoints)}/{len(lab.checkpoints)} checkpoints" in out
    # and from the run alone (no progress file), every checkpoint that the run shows is met again
    code, out, _ = _cli(capsys, "lab", "check", str(lab.number), "--db", str(db), "--progress", str(tmp_path / "none.db"),
                        "--json")
    summary = json.loads(out)
    run_checks = {"delivery", "task_state", "all_terminal", "injected", "crashed", "effect_once", "invariants_hold",
                  "naive_breaks", "reviewed", "trace", "event"}
    for c in summary["checkpoints"]:
        if lab.checkpoint(c["id"]).check in run_checks:
            assert c["met"], (c["id"], c["hint"])


def _wrong():
    for lab in LABS:
        for w in wrong_paths(lab):
            yield pytest.param(lab, w, id=f"{lab.dirname}: {w['name']}")


@pytest.mark.parametrize("lab, wrong", list(_wrong()))
def test_a_wrong_path_leaves_its_checkpoint_unmet_with_the_hint_written_for_it(lab, wrong, tmp_path):
    live, session, progress, *_ = _played(lab, tmp_path, wrong["path"])
    state = next(s for s in session.states if s.id == wrong["unmet"])
    assert not state.met
    hint = session.hint_for(state)
    for words in wrong.get("hint_contains", []):
        assert words in hint, hint
    assert state.seen.code in lab.checkpoint(wrong["unmet"]).hints, "the hint must be the one written for this case"
    live.close()
    progress.close()


def test_a_question_gives_feedback_for_a_wrong_choice_and_an_answer_taken_from_the_run(tmp_path):
    lab = next(lab for lab in LABS if lab.number == 3)
    live, session, progress, *_ = _played(lab, tmp_path, reference(lab)[:4])
    ok, feedback = session.answer("effects-rows", "2")
    assert not ok and "naive" in feedback
    ok, _ = session.answer("reused", "M-2")
    assert not ok
    ok, _ = session.answer("reused", "M-6")  # the message the learner injected the duplicate on
    assert ok and session.answered(lab.questions[0])
    live.close()
    progress.close()


def test_a_checkpoint_is_met_only_by_the_run_it_is_judged_on(tmp_path, capsys):
    """Nothing is remembered between evaluations: a new run of the lab starts at 0/N whatever an
    earlier run met, and what the learner did on one run (opened a delivery) counts on that run only."""
    from sim.labs.judge import RUN_KEY

    lab = next(lab for lab in LABS if lab.number == 3)
    live = _live(lab, tmp_path / lab.default_db)
    live.store.set_meta({RUN_KEY: "first"})
    progress = ProgressStore.open(tmp_path / "progress.db")
    session = LabSession(lab, live.store, progress)
    session.refresh()
    play(live, session, reference(lab))
    assert session.done == session.total
    live.close()
    # a second run of the lab, played only to the publication: the first run's actions do not count
    again = _live(lab, tmp_path / "again.db")
    again.store.set_meta({RUN_KEY: "second"})
    session = LabSession(lab, again.store, progress)
    session.refresh()
    assert session.done == 0
    play(again, session, [{"do": "step", "until": "M-6"}])
    assert [s.id for s in session.states if s.met] == ["published"]
    again.close()
    progress.close()
    code, out, _ = _cli(capsys, "lab", "check", "3", "--db", str(tmp_path / "again.db"), "--progress",
                        str(tmp_path / "progress.db"), "--json")
    assert code == 1 and json.loads(out)["done"] == 1
    code, out, _ = _cli(capsys, "lab", "list", "--json")
    rows = json.loads(out)
    assert code == 0 and {"number", "slug", "title", "minutes", "needs", "checkpoints", "done"} <= set(rows[0])


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.dirname)
def test_no_checkpoint_is_met_at_the_labs_start(lab, tmp_path):
    live, session, progress, *_ = _played(lab, tmp_path, [])
    assert [s.id for s in session.states if s.met] == []
    assert session.right() == 0
    live.close()
    progress.close()


def test_every_checkpoint_has_a_wrong_path_next_to_the_right_one():
    """Each checkpoint is shown unmet by a plausible mistake beside the right action (lab.toml's
    [[wrong]]), with the hint written for what that mistake leaves in the run."""
    missing = [f"{lab.dirname}: {c.id}" for lab in LABS for c in lab.checkpoints
               if c.id not in {w["unmet"] for w in wrong_paths(lab)}]
    assert missing == []
    for lab in LABS:
        for w in wrong_paths(lab):
            assert w.get("hint_contains"), (lab.dirname, w["name"])


def test_a_submission_verifies_and_a_tampered_one_names_the_first_difference(tmp_path, capsys):
    lab = next(lab for lab in LABS if lab.number == 4)
    live, session, progress, db, prog_path = _played(lab, tmp_path)
    live.close()
    progress.close()
    out = tmp_path / "lab4.protolab"
    code, text, err = _cli(capsys, "lab", "submit", "4", "-o", str(out), "--db", str(db), "--progress", str(prog_path))
    assert code == 0 and not err and out.is_file()
    code, text, err = _cli(capsys, "lab", "verify", str(out), "--json")
    result = json.loads(text)
    assert code == 0 and result["genuine"] and result["done"] == result["total"]
    assert result["answered"] == len(lab.questions)

    def tampered(name: str, sql: str) -> dict:
        work = tmp_path / name
        work.mkdir()
        with zipfile.ZipFile(out) as z:
            z.extractall(work)
        con = sqlite3.connect(work / "run.db")
        con.execute(sql)
        con.commit()
        con.close()
        bad = tmp_path / f"{name}.protolab"
        with zipfile.ZipFile(bad, "w") as z:
            z.write(work / "manifest.json", "manifest.json")
            z.write(work / "run.db", "run.db")
        code, text, _ = _cli(capsys, "lab", "verify", str(bad), "--json")
        assert code == 1
        return json.loads(text)

    r = tampered("edited-transition", "UPDATE transitions SET new_state = 'failed' WHERE seq = (SELECT MAX(seq) FROM transitions)")
    assert not r["genuine"] and "state" in r["difference"]
    r = tampered("deleted-event", "DELETE FROM events WHERE type = 'intent_conflict' OR seq = 20")
    assert not r["genuine"] and r["difference"].startswith(("event", "delivery", "re-delivery"))
    r = tampered("rewritten-decision", "UPDATE deliveries SET decision = 'accepted' WHERE decision = 'conflict'")
    assert not r["genuine"] and "recorded accepted" in r["difference"]


@pytest.mark.parametrize("args, code_word", [
    (["lab", "check", "99"], "E_UNKNOWN_LAB"),
    (["lab", "start", "nope"], "E_UNKNOWN_LAB"),
    (["lab", "check", "3", "--db", "missing.db"], "E_DB_MISSING"),
])
def test_bad_lab_input_is_one_error_line(args, code_word, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = _cli(capsys, *args)
    assert code == 2 and err.startswith(f"error: {code_word}: ") and err.count("\n") == 1


def test_a_run_of_another_scenario_a_broken_progress_file_and_a_non_submission_are_refused(tmp_path, capsys):
    other = LiveRun(load_scenario("fan-out"), db=tmp_path / "fan.db")
    other.run_to_end()
    other.close()
    code, _, err = _cli(capsys, "lab", "check", "3", "--db", str(tmp_path / "fan.db"))
    assert code == 2 and err.startswith("error: E_DB_OTHER_LAB: ")
    lab3 = LiveRun(load_scenario("publish-report"), db=tmp_path / "lab03.db")
    lab3.run_to_end()
    lab3.close()
    (tmp_path / "junk.db").write_text("not a database at all")
    code, _, err = _cli(capsys, "lab", "check", "3", "--db", str(tmp_path / "lab03.db"), "--progress",
                        str(tmp_path / "junk.db"))
    assert code == 2 and err.startswith("error: E_PROGRESS_CORRUPT: ")
    (tmp_path / "x.protolab").write_text("{}")
    code, _, err = _cli(capsys, "lab", "verify", str(tmp_path / "x.protolab"))
    assert code == 2 and err.startswith("error: E_NOT_A_SUBMISSION: ")
    before = sorted(p.name for p in tmp_path.iterdir())
    code, _, err = _cli(capsys, "lab", "submit", "3", "-o", str(tmp_path / "x.protolab"), "--db", str(tmp_path / "lab03.db"))
    assert code == 2 and err.startswith("error: E_FILE_EXISTS: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_every_key_and_command_a_lab_readme_names_exists():
    from sim.tui.app import ProtolabApp, RunScreen

    keys = {b.key_display or b.key for b in [*RunScreen.BINDINGS, *ProtolabApp.BINDINGS]}
    keys |= {"space", "enter", "escape", "tab"}
    named = {"space": "space", "enter": "enter"}
    for lab in LABS:
        text = (lab.folder / "README.md").read_text() + "\n".join(s.text for s in lab.steps)
        for key in re.findall(r"press(?:es)? (\[|\]|[a-z?]|space|enter|escape)\b", text):
            assert named.get(key, key) in keys or key in keys, (lab.dirname, key)
        for cmd in re.findall(r"`(protolab [^`]+)`", text):
            words = cmd.split()
            assert words[1] in {"lab", "replay", "state", "compare", "check", "demo", "run", "messages", "events", "trace", "a2a", "machine"}, cmd


# ------------------------------------------------------------------------------------ the TUI


def _row_of(app, message_id: str) -> int:
    src = app.messages_view.source
    rows = app.store.deliveries_at(list(src.ids))
    idx = [i for i, r in enumerate(rows) if r["message_id"] == message_id]
    assert idx, f"{message_id} is not in Messages"
    return idx[-1]


async def _press_path(app, pilot, actions) -> None:
    """The reference path with the keys the README names."""
    live = app.live
    for a in actions:
        do = a["do"]
        if do == "step":
            n = 0
            while a.get("count") is None or n < a["count"]:
                if a.get("until", "end") != "end" and a.get("count") is None and delivered(live.store, a["until"]):
                    break
                if live.finished and not len(live.run.bus):
                    before = live.delivered
                    await pilot.press("space")
                    if live.delivered == before:
                        break
                    n += 1
                    continue
                await pilot.press("space")
                n += 1
            await pilot.pause()
        elif do in ("inject", "open"):
            app.messages_view.focus()
            app.messages_view.move_cursor(_row_of(app, a["message"]))
            await pilot.pause()
            key = {"duplicate": "d", "conflicting-digest": "c", "late-failure": "l", "resend": "s"}.get(a.get("fault"), "enter")
            await pilot.press(key)
            if do == "open":
                await pilot.pause()
                await pilot.press("escape")
        elif do == "crash":
            await pilot.press("k")
            await pilot.pause()
            from textual.widgets import OptionList

            ol = app.screen.query_one(OptionList)
            ol.highlighted = ol.screen.names.index(a["worker"])
            await pilot.press("enter")
        elif do == "reconcile":
            if a.get("before"):
                target = before_delivery_of(app.store, a["before"])
                while app.as_of is None or app.as_of > target:
                    await pilot.press("left_square_bracket")
            await pilot.press("r")
            await pilot.pause()
            from textual.widgets import Input

            if a.get("decision", "ready") == "canceled":
                await pilot.press("down")
            inp = app.screen.query_one("#evidence", Input)
            inp.value = ", ".join(a["evidence"])
            inp.focus()
            await pilot.press("enter")
        elif do == "conversation":
            await pilot.press("v")
            await pilot.pause()
            await pilot.press("escape")
        elif do == "travel":
            target = max(0, (first_event_seq(app.store, a["before"]) or 1) - 1)
            while app.as_of is None or app.as_of > target:
                await pilot.press("left_square_bracket")
            await pilot.press("t")
        elif do == "answer":
            await pilot.press("a")
            await pilot.pause()
            from textual.widgets import Input, OptionList

            q = app.screen.q
            assert q.id == a["question"], "questions are asked in order"
            if q.kind == "choice":
                app.screen.query_one(OptionList).highlighted = q.choices.index(a["value"])
                await pilot.press("enter")
            else:
                inp = app.screen.query_one(Input)
                inp.value = str(a["value"])
                await pilot.press("enter")
        await pilot.pause()


@pytest.mark.slow
@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.dirname)
async def test_the_reference_path_played_with_keys_in_the_tui_ticks_every_checkpoint(lab):
    from sim.tui.app import ProtolabApp

    live = _live(lab)
    progress = ProgressStore.open(None)
    session = LabSession(lab, live.store, progress)
    naive = None
    if lab.mode == "workshop":  # naive beside the learner's safe run, as 'protolab lab start' opens it
        from sim.tui.workshop import WorkshopApp

        naive = LiveRun(load_scenario(lab.scenario), seed=lab.seed, policy="naive", faults=list(lab.faults))
        app = WorkshopApp(naive, live, lab=session)
    else:
        app = ProtolabApp(live.store, live=live, lab=session)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await _press_path(app, pilot, reference(lab))
        await pilot.press("h")
        await pilot.pause()
        guide = str(app.guide.body.content)
        unmet = [s.id for s in session.states if not s.met]
        assert not unmet, (unmet, guide)
        assert f"{session.total}/{session.total} checkpoints" in guide
        assert all(session.answered(q) for q in lab.questions)
        assert "Lab complete" in guide or "done" in guide
    live.close()
    if naive is not None:
        naive.close()


async def test_h_shows_the_hint_keyed_to_what_the_run_shows():
    from sim.tui.app import ProtolabApp

    lab = next(lab for lab in LABS if lab.number == 3)
    live = _live(lab)
    session = LabSession(lab, live.store, ProgressStore.open(None))
    app = ProtolabApp(live.store, live=live, lab=session)
    async with app.run_test(size=(120, 40)) as pilot:
        await _press_path(app, pilot, [{"do": "step", "until": "end"}, {"do": "inject", "fault": "duplicate", "message": "M-2"}])
        await pilot.press("h")
        await pilot.pause()
        assert "M-2 (task_started)" in str(app.guide.body.content) and "M-6" in str(app.guide.body.content)
    live.close()


def test_no_lab_keys_without_a_lab():
    from sim.tui.app import ProtolabApp

    live = LiveRun(load_scenario("publish-report"))
    app = ProtolabApp(live.store, live=live)
    assert app.check_action("lab_hint", ()) is False and app.check_action("lab_answer", ()) is False
    live.close()


def test_labs_ship_with_the_package_data():
    import tomllib

    cfg = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    assert "labs" in cfg["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert shutil.which  # the installed-kit check lives in the README test


def test_every_task_finished_is_not_met_while_the_story_still_has_tasks_to_create(tmp_path):
    lab = next(lab for lab in LABS if lab.number == 4)
    live, session, progress, *_ = _played(lab, tmp_path, [{"do": "step", "until": "M-3"}])
    state = next(s for s in session.states if s.id == "all-done")
    assert live.store.get_task("T-1").state.value == "succeeded" and live.store.get_task("T-2") is None
    assert not state.met and "not created yet" in session.hint_for(state)
    live.close()
    progress.close()


# ------------------------------------------------------------------ a lab file's checks, checked at load


@pytest.mark.parametrize("args, words", [
    ('{ type = "intent_conflict" }', "event type 'intent_conflict' is not one the labs can check"),
    ('{ type = "conflict_recorded", taks = "T-2" }', "takes no argument 'taks'"),
    ("{ task = \"T-2\" }", "needs the argument 'type'"),
    ('{ type = "conflict_recorded" }\nhints = { nnone = "x" }', "check 'event' never reports 'nnone'"),
])
def test_a_checkpoint_whose_arguments_its_check_cannot_take_fails_the_labs_load(tmp_path, args, words):
    from sim.errors import InputError
    from sim.labs.catalog import load_lab

    src = Path(__file__).resolve().parents[1] / "labs" / "04-conflicting-digest"
    lab = tmp_path / "04-conflicting-digest"
    shutil.copytree(src, lab)
    toml = (lab / "lab.toml").read_text()
    # one more checkpoint, an 'event' check with these arguments, in the first step
    toml = toml.replace("[[checkpoint]]", f'[[checkpoint]]\nid = "extra"\ntitle = "x"\ncheck = "event"\nargs = {args}\n'
                        'hint = "x"\n\n[[checkpoint]]', 1)
    toml = re.sub(r'(\[\[step\]\][^\[]*?checkpoints = \[)', r'\1"extra", ', toml, count=1)
    (lab / "lab.toml").write_text(toml)
    with pytest.raises(InputError) as e:
        load_lab(lab)
    assert e.value.code == "E_LAB_FILE" and words in str(e.value)


def test_every_event_type_the_engine_writes_but_three_bulk_ones_can_be_checked_by_a_lab(store):
    from sim.events import REGISTRY
    from sim.labs.checks import CHECKS, Ctx, Facts
    from sim.runtime import deliver
    from sim.samples import conflicting_m3, m1, m2, m3
    from sim.store import ProgressStore

    assert set(Facts._KEEP) <= set(REGISTRY) and set(REGISTRY) - set(Facts._KEEP) == Facts._UNINDEXED
    facts = Facts(store)
    ctx = Ctx(store, facts, ProgressStore.open(None), 4)
    for env in (m1(), m2(), m3()):
        deliver(store, env)
    facts.update()
    assert not CHECKS["event"](ctx, type="conflict_recorded", task="T-1").ok
    deliver(store, conflicting_m3())
    facts.update()
    seen = CHECKS["event"](ctx, type="conflict_recorded", task="T-1")
    assert seen.ok and seen.saw["message_id"] == "M-4", seen


def test_a_lab_readme_that_says_how_long_it_takes_says_what_its_lab_file_says():
    import re
    import tomllib

    root = Path(__file__).resolve().parent.parent / "labs"
    for d in sorted(p for p in root.iterdir() if (p / "lab.toml").exists()):
        minutes = tomllib.loads((d / "lab.toml").read_text())["minutes"]
        said = re.search(r"About (\d+) minutes", (d / "README.md").read_text())
        if said:
            assert int(said.group(1)) == minutes, d.name
