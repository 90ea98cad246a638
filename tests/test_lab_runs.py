"""A played lab's run is the learner's work: 'protolab lab start' marks and journals it; reopening
resumes it by replaying the journal to the same state (or refuses, keeping the file); no other
command replaces it ('run', 'demo', 'tui', 'tour', 'init' refuse in one line naming the lab and
'lab start N --fresh'); '--fresh' starts over on purpose. The lab commands find the learner's
progress file from another folder, and the run it recorded."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from conftest import run_cli

from ptyrun import Terminal
from sim.labs.catalog import get_lab
from sim.labs.judge import judge_progress
from sim.labs.paths import play, reference
from sim.labs.resume import JOURNAL_KEY, NAIVE_JOURNAL_KEY, open_lab_run
from sim.labs.session import LabSession
from sim.store import ProgressStore, Store

PROTOLAB = [sys.executable, "-m", "sim"]
ROOT = Path(__file__).resolve().parents[1]


_cli = run_cli  # conftest's: the one way tests call the CLI in-process


def _sha(p: Path) -> str:
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def _played(lab, folder: Path, actions, *, stop=None):
    """Lab ``lab`` made by open_lab_run in ``folder`` and played (its progress file beside it)."""
    db, prog_path = folder / lab.default_db, folder / "protolab-progress.db"
    run = open_lab_run(lab, db)
    progress = ProgressStore.open(prog_path)
    progress.start_session(lab.number, lab.default_db)
    session = LabSession(lab, run.store, progress)
    session.refresh()
    play(run.live, session, actions if stop is None else actions[:stop])
    return run, session, progress, db, prog_path


def _state(store: Store) -> tuple:
    return store.state_digest(), store.last_event(), store.last_delivery()


@pytest.mark.parametrize("number", [3, 6, 7, 12])
def test_reopening_a_lab_resumes_its_run_where_it_was_and_the_judgement_does_not_move(number, tmp_path):
    lab = get_lab(number)
    run, session, progress, db, _ = _played(lab, tmp_path, [a for a in reference(lab) if a["do"] != "answer"])
    before = _state(run.store)
    journal = run.live.journal
    assert json.loads(run.store.get_meta(JOURNAL_KEY)) == journal and run.store.get_meta("lab") == str(number)
    judged = judge_progress(lab, run.store, progress)
    run.close()
    again = open_lab_run(lab, db)
    try:
        assert again.resumed and _state(again.store) == before and again.live.journal == journal
        after = judge_progress(lab, again.store, progress)
        assert (after.done, after.answered, after.genuine) == (judged.done, judged.answered, True)
        # and the resumed run goes on: the journal grows from where it was
        again.live.step()
        assert json.loads(again.store.get_meta(JOURNAL_KEY))[:-1] == journal[:-1]
    finally:
        again.close()
        progress.close()


def test_the_workshop_resumes_both_sides(tmp_path):
    lab = get_lab(5)
    db = tmp_path / lab.default_db
    run = open_lab_run(lab, db)
    for _ in range(6):  # space in the workshop: one delivery on each side
        run.naive.step()
        run.live.step()
    naive_before, safe_before = _state(run.naive.store), _state(run.store)
    run.close()
    again = open_lab_run(lab, db)
    try:
        assert _state(again.naive.store) == naive_before and _state(again.store) == safe_before
        assert json.loads(again.store.get_meta(NAIVE_JOURNAL_KEY)) == [["step", 6]]
    finally:
        again.close()


def test_reopening_and_quitting_a_finished_lab_keeps_its_score(tmp_path, capsys):
    """The issue's case: a finished lab 5 reopened from the menu and quit emptied its run."""
    lab = get_lab(5)
    run, session, progress, db, prog_path = _played(lab, tmp_path, reference(lab))
    run.close()
    progress.close()
    code, out, _ = _cli(capsys, "lab", "check", "5", "--db", db, "--progress", prog_path, "--json")
    first = json.loads(out)
    assert code == 0 and first["done"] == first["total"] and first["answered"] == len(lab.questions)
    for _ in range(2):  # reopened and quit, twice
        open_lab_run(lab, db).close()
    code, out, _ = _cli(capsys, "lab", "check", "5", "--db", db, "--progress", prog_path, "--json")
    assert json.loads(out)["done"] == first["done"] and json.loads(out)["answered"] == first["answered"]


def test_a_run_changed_outside_the_lab_is_not_resumed_and_is_kept_as_it_was(tmp_path, capsys):
    lab = get_lab(3)
    run, session, progress, db, _ = _played(lab, tmp_path, [{"do": "step", "until": "M-6"}])
    run.close()
    progress.close()
    # a delivery made by hand into the lab's file (as 'protolab deliver' would): the journal cannot give it back
    from sim import samples
    from sim.runtime import deliver

    other = Store.open(db)
    deliver(other, samples.m1())
    other.close()
    before = _sha(db)
    with pytest.raises(Exception) as e:
        open_lab_run(lab, db)
    assert getattr(e.value, "code", "") == "E_LAB_RESUME" and "kept" in str(e.value) and "--fresh" in str(e.value)
    assert _sha(db) == before and not Path(f"{db}.resuming").exists()


def test_an_interrupted_resume_puts_the_learners_file_back(tmp_path):
    lab = get_lab(3)
    run, session, progress, db, _ = _played(lab, tmp_path, [{"do": "step", "until": "M-6"}])
    want = _state(run.store)
    run.close()
    progress.close()
    aside = Path(f"{db}.resuming")
    db.replace(aside)
    db.write_bytes(b"half a replay")  # what a kill in the middle of a replay leaves
    again = open_lab_run(lab, db)
    try:
        assert _state(again.store) == want and not aside.exists()
    finally:
        again.close()


def test_a_run_of_another_lab_or_one_the_lab_did_not_make_is_refused_and_kept(tmp_path, capsys):
    lab3, lab4 = get_lab(3), get_lab(4)
    run, *_ = _played(lab3, tmp_path, [{"do": "step", "count": 2}])
    run.close()
    db3 = tmp_path / lab3.default_db
    before = _sha(db3)
    with pytest.raises(Exception) as e:
        open_lab_run(lab4, db3, fresh=True)
    assert e.value.code == "E_DB_OTHER_LAB" and "lab 3" in str(e.value)
    plain = tmp_path / "plain.db"
    assert _cli(capsys, "run", "--db", plain)[0] == 0
    with pytest.raises(Exception) as e:
        open_lab_run(lab3, plain)
    assert e.value.code == "E_LAB_RESUME" and "--fresh" in str(e.value)
    assert _sha(db3) == before
    # --fresh replaces what the lab may replace: a plain run of its scenario, or its own run
    fresh = open_lab_run(lab3, plain, fresh=True)
    assert fresh.store.last_delivery() == 0 and fresh.store.get_meta("lab") == "3"
    fresh.close()
    fresh = open_lab_run(lab3, db3, fresh=True)
    assert fresh.store.last_delivery() == 0 and not fresh.resumed
    fresh.close()


def _refused_on_lab3(argv, tmp_path, capsys, monkeypatch) -> str:
    """Lab 3 played a little into lab03.db, then ``argv``: refused in one line, the file unchanged."""
    monkeypatch.chdir(tmp_path)
    run, *_ = _played(get_lab(3), tmp_path, [{"do": "step", "count": 3}])
    run.close()
    before = _sha(tmp_path / "lab03.db")
    code, out, err = _cli(capsys, *argv)
    assert code == 2 and err.startswith("error: E_DB_LAB_RUN: ") and err.count("\n") == 1, err
    assert _sha(tmp_path / "lab03.db") == before
    return err


@pytest.mark.parametrize("argv", [
    ["run", "--db", "lab03.db"],
    ["run", "fan-out", "--db", "lab03.db"],
    ["demo", "--headless", "--db", "lab03.db"],
    ["tui", "--db", "lab03.db", "--seed", "1"],
    ["tour", "--db", "lab03.db", "--no-pause"],
    ["init", "--db", "lab03.db"],
])
def test_no_command_replaces_a_labs_run(argv, tmp_path, capsys, monkeypatch):
    err = _refused_on_lab3(argv, tmp_path, capsys, monkeypatch)
    assert "lab 3" in err and "protolab lab start 3 --fresh" in err


def test_the_default_database_holding_a_labs_run_is_not_replaced_either(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = open_lab_run(get_lab(8), tmp_path / "protolab.db")  # a lab played on protolab.db by --db
    run.live.step()
    run.close()
    before = _sha(tmp_path / "protolab.db")
    for argv in (["run"], ["run", "fan-out"], ["demo", "--headless"]):
        code, _, err = _cli(capsys, *argv)
        assert code == 2 and "E_DB_LAB_RUN" in err and "lab 8" in err
    assert _sha(tmp_path / "protolab.db") == before


# ------------------------------------------------------------------------ from another folder


def test_lab_commands_from_a_subfolder_find_the_progress_file_and_the_run_it_recorded(tmp_path, capsys, monkeypatch):
    lab = get_lab(3)
    run, session, progress, db, prog_path = _played(lab, tmp_path, reference(lab))
    run.close()
    progress.close()
    sub = tmp_path / "notes" / "deeper"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    code, out, _ = _cli(capsys, "lab", "status", "--json")
    row = next(r for r in json.loads(out) if r["number"] == 3)
    assert code == 0 and row["done"] == row["checkpoints"] and row["answered"] == row["questions"]
    assert row["genuine"] is True and Path(row["run"]).resolve() == db.resolve()
    code, out, _ = _cli(capsys, "lab", "check", "3")
    assert code == 0 and "5/5 checkpoints" in out
    code, out, _ = _cli(capsys, "lab", "list")
    assert code == 0 and str(prog_path.resolve()) in out.replace("\n", "")
    sub_out = sub / "lab3.protolab"
    code, out, _ = _cli(capsys, "lab", "submit", "3", "-o", sub_out)
    assert code == 0 and "5/5 checkpoints" in out and "2/2 questions" in out


def test_lab_commands_with_no_progress_file_say_where_they_looked_and_how_to_point_them(tmp_path, capsys,
                                                                                         monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, out, _ = _cli(capsys, "lab", "status")
    assert code == 0 and f"no protolab-progress.db in {elsewhere}" in out.replace("\n", "") and "--progress" in out
    code, _, err = _cli(capsys, "lab", "check", "3")
    assert code == 2 and err.startswith("error: E_DB_MISSING: ") and str(elsewhere) in err and "--progress" in err


# ------------------------------------------------------------------------------- in a terminal


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
def test_lab_start_resumes_and_fresh_starts_over_in_a_terminal(tmp_path):
    t = Terminal(PROTOLAB + ["lab", "start", "3"], cwd=tmp_path, size=(80, 24))
    t.wait_for("Guide", "0 deliveries")
    t.press("   ")
    t.wait_for("3 deliveries")
    t.press("q")
    assert t.finish() == 0
    assert "your run is in lab03.db" in t.text.replace("\r\n", "").replace("\n", "")
    t = Terminal(PROTOLAB + ["lab", "start", "3"], cwd=tmp_path, size=(120, 35))
    t.wait_for("resumed: 3 deliveries")
    t.press("q")
    assert t.finish() == 0
    r = Terminal(PROTOLAB + ["run", "--db", "lab03.db"], cwd=tmp_path, size=(120, 35))
    assert r.finish() == 2 and "E_DB_LAB_RUN" in r.text
    t = Terminal(PROTOLAB + ["lab", "start", "3", "--fresh"], cwd=tmp_path, size=(120, 35))
    t.wait_for("Guide", "0 deliveries")
    t.press("q")
    assert t.finish() == 0
    store = Store.open(tmp_path / "lab03.db", readonly=True)
    assert store.last_delivery() == 0
    store.close()


def test_a_hand_delivery_lab_is_marked_and_reopened_as_it_is(tmp_path):
    """No simulator: the learner's deliveries are the run; reopening keeps them, no journal needed."""
    from sim import samples
    from sim.labs.catalog import load_lab
    from sim.runtime import deliver
    from test_lab_by_hand import LAB

    folder = tmp_path / "90-by-hand"
    folder.mkdir()
    (folder / "lab.toml").write_text(LAB)
    lab = load_lab(folder)
    db = tmp_path / "lab90.db"
    run = open_lab_run(lab, db)
    assert run.live is None and run.store.get_meta("lab") == "90"
    run.close()
    other = Store.open(db)  # 'protolab deliver' in another terminal
    deliver(other, samples.m1())
    other.close()
    again = open_lab_run(lab, db)
    assert again.resumed and again.store.last_delivery() == 1
    again.close()
    fresh = open_lab_run(lab, db, fresh=True)
    assert fresh.store.last_delivery() == 0
    fresh.close()


@pytest.mark.parametrize("argv", [
    ["deliver", str(ROOT / "data/envelopes/late-failure.json"), "--db", "lab03.db"],
    ["reconcile", "T-1", "--decision", "ready", "--by", "reviewer", "--evidence", "M-1", "--db", "lab03.db"],
    ["artifact", "put", str(ROOT / "data/envelopes/ack.json"), "--db", "lab03.db"],
    ["machine", "load", str(ROOT / "data/machines/task-v2.toml"), "--db", "lab03.db"],
])
def test_no_command_writes_into_a_labs_run_from_outside_the_lab(argv, tmp_path, capsys, monkeypatch):
    # the lab's run is what its journal replays: a delivery from outside would make 'lab check' judge
    # a run that 'lab verify' never sees
    err = _refused_on_lab3(argv, tmp_path, capsys, monkeypatch)
    assert "lab 3" in err and "protolab lab start 3" in err
