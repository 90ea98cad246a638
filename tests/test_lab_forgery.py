"""Verify trusts nothing it can recompute, and says what it cannot (issue 43, part 3).

* Every event of a lab's run is re-derived: by re-delivery, or by making the run again from the lab's
  declared start (scenario, seed, policy, faults in lab.toml) and its journal (what the lab session
  did). A hand-made ``fault_injected`` row, at the end or anywhere else, makes the run "not genuine"
  (exit 1, the event named by number, type and tick), never E_CLOCK (exit 2), and is never scored.
* A checkpoint met only by a screen action (a view opened, a visit in time) is self-reported:
  ``lab verify`` lists it apart, ``grade lab`` leaves it out unless ``--count-self-reported``.
* ``lab verify`` on a folder is one coded line (E_NOT_A_FILE), exit 2.
"""

from __future__ import annotations

import csv
import json
import sqlite3
import zipfile
from pathlib import Path

import pytest

from conftest import run_cli
from sim.labs.catalog import get_lab, labs
from sim.labs.checks import self_reported
from sim.labs.judge import Recorded, context, evaluate
from sim.labs.paths import play, reference
from sim.labs.resume import JOURNAL_KEY, open_lab_run
from sim.labs.session import LabSession
from sim.store import ProgressStore, Store

#: lab 3 played to the end without injecting anything: its 'injected' checkpoints are unmet
NO_INJECTION = [{"do": "step", "until": "end"}]


def _submitted(tmp_path: Path, capsys, number: int, actions: list[dict], name: str = "sub.protolab") -> Path:
    """Lab ``number`` played through ``actions`` by the engine, then 'lab submit'ted."""
    lab = get_lab(number)
    folder = tmp_path / f"play-{name}"
    folder.mkdir()
    db, prog_path = folder / lab.default_db, folder / "protolab-progress.db"
    run = open_lab_run(lab, db)
    progress = ProgressStore.open(prog_path)
    progress.start_session(lab.number, lab.default_db)
    session = LabSession(lab, run.store, progress)
    session.refresh()
    play(run.live, session, actions)
    run.close()
    progress.close()
    sub = tmp_path / name
    code, _, err = run_cli(capsys, "lab", "submit", number, "-o", sub, "--db", db, "--progress", prog_path)
    assert code == 0, err
    return sub


def _repacked(sub: Path, *, sql: list[tuple] = (), manifest=None) -> Path:
    """The submission with its run edited by ``sql`` and/or its manifest passed through ``manifest``."""
    work = sub.parent / (sub.stem + "-work")
    work.mkdir()
    with zipfile.ZipFile(sub) as z:
        z.extractall(work)
    if sql:
        con = sqlite3.connect(work / "run.db")
        for stmt in sql:
            con.execute(*stmt)
        con.commit()
        con.close()
    if manifest is not None:
        m = json.loads((work / "manifest.json").read_text())
        manifest(m)
        (work / "manifest.json").write_text(json.dumps(m))
    sub.unlink()
    with zipfile.ZipFile(sub, "w") as z:
        z.write(work / "manifest.json", "manifest.json")
        z.write(work / "run.db", "run.db")
    return sub


def _last(sub: Path) -> dict:
    """The run's last event (seq, tick, created_at) and the message the forged fault names."""
    with zipfile.ZipFile(sub) as z:
        data = z.read("run.db")
    tmp = sub.parent / (sub.stem + "-peek.db")
    tmp.write_bytes(data)
    con = sqlite3.connect(tmp)
    seq, tick, at = con.execute("SELECT seq, tick, created_at FROM events ORDER BY seq DESC LIMIT 1").fetchone()
    m6 = con.execute("SELECT seq, tick, created_at FROM events WHERE message_id = 'M-6' ORDER BY seq LIMIT 1").fetchone()
    con.close()
    tmp.unlink()
    return {"seq": seq, "tick": tick, "at": at, "m6": m6}


def _fault_row(seq: int, tick: int, at: str) -> tuple:
    """A fault_injected row as the runtime writes one for a duplicate injected by hand on M-6."""
    data = json.dumps({"again_at": tick + 1, "fault": "duplicate", "selector": "by hand"})
    return ("INSERT INTO events (seq, tick, created_at, type, task_id, message_id, delivery_id, data) "
            "VALUES (?, ?, ?, 'fault_injected', 'T-2', 'M-6', NULL, ?)", (seq, tick, at, data))


def _shift_after(seq: int) -> list[tuple]:
    """Renumber every event after ``seq`` one up (room for a row placed there)."""
    return [("UPDATE events SET seq = -(seq + 1) WHERE seq > ?", (seq,)), ("UPDATE events SET seq = -seq WHERE seq < 0",)]


def _verify(capsys, sub: Path) -> tuple[int, dict, str]:
    code, out, err = run_cli(capsys, "lab", "verify", sub, "--json")
    return code, (json.loads(out) if out.strip() else {}), err


# ------------------------------------------------------------------------- a forged fault_injected


@pytest.fixture
def honest(tmp_path, capsys) -> Path:
    sub = _submitted(tmp_path, capsys, 3, NO_INJECTION)
    code, v, _ = _verify(capsys, sub)
    assert v["genuine"] is True and code == 1  # genuine, and the injection checkpoints unmet
    assert not next(c for c in v["checkpoints"] if c["id"] == "dup-on-result")["met"]
    return sub


def _forged_at(sub: Path, where: str) -> tuple[Path, int, int]:
    """``sub`` with one hand-made fault_injected event: ``end`` (after the last event, at its tick),
    ``end-early`` (after the last event, at the round M-6 was delivered: before the clock), or
    ``middle`` (right after M-6's first event, the later events renumbered)."""
    last = _last(sub)
    if where == "end":
        seq, tick, at = last["seq"] + 1, last["tick"], last["at"]
        sql = [_fault_row(seq, tick, at)]
    elif where == "end-early":
        seq, (_, tick, at) = last["seq"] + 1, last["m6"]
        sql = [_fault_row(seq, tick, at)]
    else:
        m6_seq, tick, at = last["m6"]
        seq = m6_seq + 1
        sql = _shift_after(m6_seq) + [_fault_row(seq, tick, at)]
    return _repacked(sub, sql=sql), seq, tick


@pytest.mark.parametrize("where", ["end", "end-early", "middle"])
def test_a_hand_made_fault_injected_event_is_not_genuine_and_named(honest, capsys, where):
    sub, seq, tick = _forged_at(honest, where)
    code, v, err = _verify(capsys, sub)
    assert code == 1, err  # never E_CLOCK, exit 2: a forged event is a verdict, not unreadable input
    assert v["genuine"] is False
    assert f"event {seq} (fault_injected" in v["difference"] and f"tick {tick})" in v["difference"], v["difference"]
    code, out, err = run_cli(capsys, "lab", "verify", sub)
    assert code == 1 and "NOT genuine" in out and f"event {seq} (fault_injected" in out and not err


def test_a_forged_event_at_the_end_scores_nothing(honest, tmp_path, capsys):
    """Before: the forged fault met the 'injected' checkpoint and grade lab scored it."""
    sub, seq, _ = _forged_at(honest, "end")
    klass = tmp_path / "class"
    klass.mkdir()
    sub.rename(klass / "mallory.protolab")
    code, out, err = run_cli(capsys, "grade", "lab", "3", klass, "--json")
    assert code == 0, err
    row = json.loads(out)[0]
    assert row["score"] == 0 and row["genuine"] is False and f"event {seq} (fault_injected" in row["note"]


def test_a_forged_event_explained_by_a_forged_journal_entry_is_still_not_genuine(honest, capsys):
    """The journal travels in the file, but a call added to it is replayed with its consequences
    (the duplicate delivered): the file must hold those too."""
    last = _last(honest)
    with zipfile.ZipFile(honest) as z:
        tmp = honest.parent / "peek.db"
        tmp.write_bytes(z.read("run.db"))
    with Store.open(tmp, readonly=True) as s:
        journal = json.loads(s.get_meta(JOURNAL_KEY))
    tmp.unlink()
    journal += [["inject", "duplicate", "M-6"], ["step", 5]]
    sub = _repacked(honest, sql=[_fault_row(last["seq"] + 1, last["tick"], last["at"]),
                                 ("UPDATE meta SET value = ? WHERE key = ?", (json.dumps(journal), JOURNAL_KEY))])
    code, v, err = _verify(capsys, sub)
    assert code == 1 and v["genuine"] is False, err
    assert "journal" in v["difference"]


@pytest.mark.parametrize("journal", ['[["warp", 1]]', '{"not": "a list"}', "[[\"step\", \"many\"]]", "not json"])
def test_a_journal_that_cannot_be_replayed_is_not_genuine_not_an_error(honest, capsys, journal):
    sub = _repacked(honest, sql=[("UPDATE meta SET value = ? WHERE key = ?", (journal, JOURNAL_KEY))])
    code, v, err = _verify(capsys, sub)
    assert code == 1 and v["genuine"] is False and "journal" in v["difference"], err


def test_a_journal_asking_for_endless_steps_costs_no_more_than_the_run(honest, capsys):
    """Past its end a run stays where it is: a billion steps are not taken one by one."""
    with zipfile.ZipFile(honest) as z:
        tmp = honest.parent / "peek.db"
        tmp.write_bytes(z.read("run.db"))
    with Store.open(tmp, readonly=True) as s:
        journal = json.loads(s.get_meta(JOURNAL_KEY))
    tmp.unlink()
    journal.append(["step", 10**9])
    sub = _repacked(honest, sql=[("UPDATE meta SET value = ? WHERE key = ?", (json.dumps(journal), JOURNAL_KEY))])
    code, v, _ = _verify(capsys, sub)
    assert v["genuine"] is True  # the same run: stepping a finished run changes nothing


def test_the_run_must_start_where_the_lab_says(honest, capsys):
    """The lab's start is read from lab.toml, never from the run's own meta."""
    sub = _repacked(honest, sql=[("UPDATE meta SET value = '7' WHERE key = 'seed'",)])
    code, v, _ = _verify(capsys, sub)
    assert code == 1 and v["genuine"] is False and "seed" in v["difference"]


# ------------------------------------------------------------------------- self-reported checkpoints


def _open_duplicate(run_id: str):
    """What adds to a manifest the open-detail action lab 3's 'opened-duplicate' checkpoint rests on
    (recorded on the run ``run_id``, as the Guide records it)."""
    def edit(m: dict) -> None:
        m["progress"]["actions"].append({"kind": "open-detail", "at": "2026-12-07T12:00:00Z",
                                         "data": {"message_id": "M-6", "type": "task_result", "delivery_id": None,
                                                  "run": run_id}})
    return edit


def _run_id(sub: Path) -> str:
    with zipfile.ZipFile(sub) as z:
        tmp = sub.parent / "peek-id.db"
        tmp.write_bytes(z.read("run.db"))
    with Store.open(tmp, readonly=True) as s:
        rid = s.get_meta("lab_run")
    tmp.unlink()
    return rid


@pytest.fixture
def four_of_five(tmp_path, capsys) -> Path:
    """Lab 3's reference path, but the duplicate's delivery never opened: 4 of 5 checkpoints."""
    lab = get_lab(3)
    sub = _submitted(tmp_path, capsys, 3, [a for a in reference(lab) if a["do"] != "open"])
    code, v, _ = _verify(capsys, sub)
    assert (v["genuine"], v["done"], v["total"], v["self_reported"]) == (True, 4, 5, 0) and code == 1
    return sub


def test_an_open_detail_added_to_the_manifest_is_self_reported_not_verified(four_of_five, capsys):
    sub = _repacked(four_of_five, manifest=_open_duplicate(_run_id(four_of_five)))
    code, v, err = _verify(capsys, sub)
    assert v["genuine"] is True and v["done"] == 5, err
    assert (v["verified"], v["self_reported"]) == (4, 1)
    [c] = [c for c in v["checkpoints"] if c["self_reported"]]
    assert c["id"] == "opened-duplicate" and c["met"]
    assert not any(c["self_reported"] for c in v["checkpoints"] if c["id"] != "opened-duplicate")
    code, out, _ = run_cli(capsys, "lab", "verify", sub)
    assert "checkpoints: 4/5 verified from the run, 1 self-reported" in out
    listed = out.split("self-reported (", 1)[1]
    assert "opened-duplicate:" in listed and "dup-on-result" not in listed


def _graded(capsys, tmp_path, sub: Path, *extra) -> dict:
    klass = tmp_path / "class"
    klass.mkdir(exist_ok=True)
    target = klass / "mallory.protolab"
    if not target.exists():
        sub.rename(target)
    out_csv = tmp_path / ("with.csv" if extra else "without.csv")
    code, out, err = run_cli(capsys, "grade", "lab", "3", klass, "--json", "--csv", out_csv, *extra)
    assert code == 0, err
    [row] = json.loads(out)
    with open(out_csv, newline="") as f:
        row["csv"] = next(csv.DictReader(f))
    return row


def test_grade_lab_leaves_self_reported_checkpoints_out_unless_told(four_of_five, tmp_path, capsys):
    lab = get_lab(3)
    sub = _repacked(four_of_five, manifest=_open_duplicate(_run_id(four_of_five)))
    by_default = _graded(capsys, tmp_path, sub)
    screen = sum(self_reported(c.check, c.args) for c in lab.checkpoints)
    assert screen == 1
    assert by_default["done"] == 4 and by_default["self_reported_left_out"] == 1
    assert by_default["max_score"] == len(lab.checkpoints) - screen + len(lab.questions)
    assert by_default["score"] == 4 + by_default["answered"]
    assert "1 self-reported checkpoint left out" in by_default["note"]
    assert by_default["csv"]["self-reported left out"] == "1" and by_default["csv"]["checkpoints"] == "4"
    counted = _graded(capsys, tmp_path, sub, "--count-self-reported")
    assert counted["done"] == 5 and counted["self_reported_left_out"] == 0
    assert counted["score"] == 5 + counted["answered"] == counted["max_score"]
    assert counted["csv"]["self-reported left out"] == "0"


def test_count_self_reported_is_for_labs_only(tmp_path, capsys):
    code, _, err = run_cli(capsys, "grade", "1", tmp_path, "--count-self-reported")
    assert code == 2 and err.startswith("error: E_USAGE") and err.count("\n") == 1


def test_every_lab_reference_path_is_genuine_and_its_screen_checkpoints_are_the_self_reported_ones(tmp_path):
    """Each checkpoint declared a screen one is met on the reference path only through the recorded
    actions, and every other met checkpoint stays met with no actions at all: the declaration
    (``@check(screen=...)``) is what the checks really read."""
    for lab in labs():
        if lab.mode == "hand-delivery":
            continue
        folder = tmp_path / lab.slug
        folder.mkdir()
        run = open_lab_run(lab, folder / lab.default_db)
        progress = ProgressStore.open(None)
        session = LabSession(lab, run.store, progress)
        session.refresh()
        play(run.live, session, reference(lab))
        try:
            with_actions = {s.id: s for s in session.states}
            bare = {s.id: s.met for s in evaluate(lab, context(lab, run.store, Recorded(lab.number, [])))}
            from sim.labs.judge import judge_progress

            j = judge_progress(lab, run.store, progress)
        finally:
            run.close()
            progress.close()
        assert j.genuine is True, (lab.number, j.difference)
        assert j.done == j.total, lab.number
        for cid, s in with_actions.items():
            assert s.met, (lab.number, cid)
            screen = self_reported(s.checkpoint.check, s.checkpoint.args)
            assert bare[cid] is (not screen), (lab.number, cid, screen)
        assert j.verified == j.total - sum(self_reported(c.check, c.args) for c in lab.checkpoints)


# ------------------------------------------------------------------------- not a file


def test_lab_verify_of_a_folder_is_one_coded_line(tmp_path, capsys):
    code, out, err = run_cli(capsys, "lab", "verify", tmp_path)
    assert code == 2 and not out
    assert err.startswith("error: E_NOT_A_FILE: ") and err.count("\n") == 1 and "is a folder" in err


def test_a_hand_delivery_run_holds_only_what_deliveries_and_the_learners_commands_write(tmp_path):
    """No simulator, no journal: beside its deliveries (and an artifact the learner stored), a fault
    the transport injected is explained by nothing."""
    from sim import samples
    from sim.labs.catalog import load_lab
    from sim.labs.judge import judge
    from sim.runtime import deliver, put_artifact
    from test_lab_by_hand import LAB

    folder = tmp_path / "90-by-hand"
    folder.mkdir()
    (folder / "lab.toml").write_text(LAB)
    lab = load_lab(folder)
    db = tmp_path / "lab90.db"
    open_lab_run(lab, db).close()
    with Store.open(db) as s:
        for env in (samples.m1(), samples.m2(), samples.m3()):
            deliver(s, env)
        put_artifact(s, {"notes": "mine"}, task_id="T-1")
    with Store.open(db, readonly=True) as s:
        j = judge(lab, s, [], {})
        assert j.genuine is True, j.difference
        last = s.last_event()
        tick = max(e.tick for e in s.iter_events())
    con = sqlite3.connect(db)
    con.execute(*_fault_row(last + 1, tick, "2026-07-13T04:00:09Z"))
    con.commit()
    con.close()
    with Store.open(db, readonly=True) as s:
        j = judge(lab, s, [], {})
    assert j.genuine is False and f"event {last + 1} (fault_injected" in j.difference and "by hand" in j.difference
