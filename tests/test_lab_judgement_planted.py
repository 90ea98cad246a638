"""What a student's mark rests on, pinned where bugs planted by hand in the lab judgement survived
(issue 48, part 1; tests/lab_judgement_planted.py, docs/performance.md): an answer counts only when it
is the right one, from a checkpoint met; the mark comes from the run, never from the manifest's own
summary; verify names an event of the run edited or missing; a submission of another format or a run
with a student's plugged-in file is refused."""

from __future__ import annotations

import json
import zipfile

from conftest import run_cli
from sim.labs.catalog import get_lab
from sim.labs.paths import reference
from test_lab_forgery import _last, _repacked, _submitted, _verify

#: lab 3: the duplicate injected on a start (M-2), not on the publishing result (M-6): 'dup-on-result' unmet
ON_A_START = [{"do": "step", "until": "end"}, {"do": "inject", "fault": "duplicate", "message": "M-2"},
              {"do": "step", "until": "end"}]


def _answers(given: dict):
    def edit(m: dict) -> None:
        m["progress"]["answers"] = {q: {"answer": a, "correct": True, "at": "2026-12-07T12:00:00Z"}
                                    for q, a in given.items()}
    return edit


def _manifest(sub) -> dict:
    with zipfile.ZipFile(sub) as z:
        return json.loads(z.read("manifest.json"))


def test_an_answer_read_from_a_checkpoint_not_met_scores_nothing(tmp_path, capsys):
    """'reused' is answered from dup-on-result's message: with the duplicate on M-2 that checkpoint is
    not met, so neither the message it saw (M-2) nor the right one (M-6) is a right answer."""
    for given in ("M-2", "M-6"):
        sub = _submitted(tmp_path, capsys, 3, ON_A_START, name=f"start-{given}.protolab")
        sub = _repacked(sub, manifest=_answers({"reused": given}))
        code, v, err = _verify(capsys, sub)
        assert v["genuine"] is True, err
        assert not next(c for c in v["checkpoints"] if c["id"] == "dup-on-result")["met"]
        assert v["answered"] == 0, given


def test_only_the_right_answer_counts_not_a_part_of_it_nor_a_wrong_one(tmp_path, capsys):
    lab = get_lab(3)
    honest = _submitted(tmp_path, capsys, 3, [a for a in reference(lab) if a["do"] != "answer"])
    for given, right in (({"reused": "M-"}, 0), ({"reused": "M-2", "effects-rows": "7"}, 0),
                         ({"reused": " m-6 "}, 1), ({"reused": "M-6", "effects-rows": "1"}, 2)):
        copy = tmp_path / f"copy-{right}-{len(given)}.protolab"
        copy.write_bytes(honest.read_bytes())
        code, v, err = _verify(capsys, _repacked(copy, manifest=_answers(given)))
        assert v["genuine"] is True and v["answered"] == right, (given, v["answered"], err)


def test_the_mark_comes_from_the_run_not_the_manifests_summary(tmp_path, capsys):
    lab = get_lab(3)
    sub = _submitted(tmp_path, capsys, 3, [a for a in reference(lab) if a["do"] not in ("open", "answer")])

    def inflate(m: dict) -> None:
        m["summary"].update(done=5, verified=5, answered=2, all_met=True)
    code, v, _ = _verify(capsys, _repacked(sub, manifest=inflate))
    assert (v["genuine"], v["done"], v["verified"], v["answered"]) == (True, 4, 4, 0) and code == 1


def test_the_submitted_summary_counts_the_answers_given(tmp_path, capsys):
    """What 'lab submit' packs (and prints) is the judgement verify gives, answers included."""
    sub = _submitted(tmp_path, capsys, 3, reference(get_lab(3)))
    summary = _manifest(sub)["summary"]
    code, v, _ = _verify(capsys, sub)
    assert summary["answered"] == v["answered"] == 2 and summary["done"] == v["done"] == 5 and code == 0


def test_a_submission_of_another_format_is_refused(tmp_path, capsys):
    sub = _submitted(tmp_path, capsys, 3, reference(get_lab(3)))

    def older(m: dict) -> None:
        m["format"] = "protolab-lab-submission/0"
    code, _, err = run_cli(capsys, "lab", "verify", _repacked(sub, manifest=older), "--json")
    assert code == 2 and "E_NOT_A_SUBMISSION" in err


def test_a_run_with_a_plugged_in_file_is_not_genuine(tmp_path, capsys):
    sub = _submitted(tmp_path, capsys, 3, reference(get_lab(3)))
    sub = _repacked(sub, sql=[("INSERT INTO meta (key, value) VALUES ('plugin_design', 'design.py')",)])
    code, v, _ = _verify(capsys, sub)
    assert code == 1 and v["genuine"] is False and "plugged-in" in v["difference"]


def test_a_journaled_fault_with_its_data_edited_is_named(tmp_path, capsys):
    """The fault the learner injected, its data changed by hand (re-delivery applies it as recorded):
    the journal's replay gives another event there, and verify names it."""
    sub = _submitted(tmp_path, capsys, 3, reference(get_lab(3)))
    seq = _fault_seq(sub)
    sub = _repacked(sub, sql=[("UPDATE events SET data = json_set(data, '$.selector', 'edited') WHERE seq = ?", (seq,))])
    code, v, _ = _verify(capsys, sub)
    assert code == 1 and v["genuine"] is False and v["difference"].startswith(f"event {seq} (fault_injected")


def test_the_last_event_deleted_is_named(tmp_path, capsys):
    """A run whose last event (the fault just injected, its copy not yet delivered) was deleted: the
    journal's replay gives it, the run does not hold it."""
    path = [{"do": "step", "until": "M-6"}, {"do": "inject", "fault": "duplicate", "message": "M-6"}]
    sub = _submitted(tmp_path, capsys, 3, path)
    last = _last(sub)
    assert _fault_seq(sub) == last["seq"]
    sub = _repacked(sub, sql=[("DELETE FROM events WHERE seq = ?", (last["seq"],))])
    code, v, _ = _verify(capsys, sub)
    assert code == 1 and v["genuine"] is False and f"event {last['seq']} (fault_injected" in v["difference"]


def _fault_seq(sub) -> int:
    import sqlite3

    with zipfile.ZipFile(sub) as z:
        data = z.read("run.db")
    tmp = sub.parent / (sub.stem + "-seq.db")
    tmp.write_bytes(data)
    con = sqlite3.connect(tmp)
    [(seq,)] = con.execute("SELECT seq FROM events WHERE type = 'fault_injected'").fetchall()
    con.close()
    tmp.unlink()
    return seq


def _played(tmp_path, number: int, actions: list[dict]):
    """Lab ``number`` played through ``actions``: (its run, its progress file)."""
    from sim.labs.paths import play
    from sim.labs.resume import open_lab_run
    from sim.labs.session import LabSession
    from sim.store import ProgressStore

    lab = get_lab(number)
    db, prog_path = tmp_path / lab.default_db, tmp_path / "protolab-progress.db"
    run = open_lab_run(lab, db)
    progress = ProgressStore.open(prog_path)
    progress.start_session(lab.number, lab.default_db)
    session = LabSession(lab, run.store, progress)
    session.refresh()
    play(run.live, session, actions)
    run.close()
    progress.close()
    return db, prog_path


def test_lab_check_of_an_edited_run_meeting_every_checkpoint_is_not_all_met(tmp_path, capsys):
    """Every checkpoint met, but the run edited by hand: 'lab check' says so and exits 1."""
    import sqlite3

    db, prog = _played(tmp_path, 3, reference(get_lab(3)))
    code, out, _ = run_cli(capsys, "lab", "check", 3, "--db", db, "--progress", prog, "--json")
    assert code == 0 and json.loads(out)["all_met"] is True
    con = sqlite3.connect(db)
    con.execute("UPDATE events SET data = json_set(data, '$.selector', 'edited') WHERE type = 'fault_injected'")
    con.commit()
    con.close()
    code, out, _ = run_cli(capsys, "lab", "check", 3, "--db", db, "--progress", prog, "--json")
    j = json.loads(out)
    assert j["done"] == j["total"] and j["genuine"] is False
    assert j["all_met"] is False and code == 1


def test_a_run_lab_start_did_not_make_is_said_so(tmp_path, capsys):
    sub = _submitted(tmp_path, capsys, 3, reference(get_lab(3)))
    code, v, _ = _verify(capsys, sub)
    assert v["made_by_lab"] is True
    code, v, _ = _verify(capsys, _repacked(sub, sql=[("DELETE FROM meta WHERE key = 'lab'",)]))
    assert v["made_by_lab"] is False


def test_a_delivery_row_edited_by_hand_is_named(tmp_path, capsys):
    """A delivery's recorded code changed (re-delivery re-derives its decision and state, not the row
    itself): the journal's replay delivers otherwise, and verify names the delivery."""
    sub = _submitted(tmp_path, capsys, 3, reference(get_lab(3)))
    sub = _repacked(sub, sql=[("UPDATE deliveries SET code = 'E_EDITED' WHERE delivery_id = 2",)])
    code, v, _ = _verify(capsys, sub)
    assert code == 1 and v["genuine"] is False and v["difference"].startswith("delivery 2 (")


def test_a_delivery_recorded_as_leaving_another_state_is_named(tmp_path, capsys):
    sub = _submitted(tmp_path, capsys, 3, reference(get_lab(3)))
    sub = _repacked(sub, sql=[("UPDATE deliveries SET state_after = 'failed' WHERE delivery_id = 2",)])
    code, v, _ = _verify(capsys, sub)
    assert code == 1 and v["genuine"] is False and v["difference"].startswith("delivery 2 (")
    assert "recorded accepted -> failed" in v["difference"]


def test_a_hand_delivery_run_with_its_state_edited_is_not_genuine(tmp_path):
    """A hand-delivery lab has no journal to replay: its state is held to what its deliveries give."""
    import sqlite3

    from sim import samples
    from sim.labs.catalog import load_lab
    from sim.labs.judge import judge
    from sim.labs.resume import open_lab_run
    from sim.runtime import deliver
    from sim.store import Store
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
    with Store.open(db, readonly=True) as s:
        assert judge(lab, s, [], {}).genuine is True
    con = sqlite3.connect(db)
    con.execute("UPDATE tasks SET goal = 'edited by hand'")
    con.commit()
    con.close()
    with Store.open(db, readonly=True) as s:
        j = judge(lab, s, [], {})
    assert j.genuine is False and "state edited by hand" in j.difference
