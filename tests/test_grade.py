"""The instructor's grader from the shell: a folder of real-looking submissions (the model answer,
the starter, planted wrong designs, broken and hostile ones, zips nested and malicious) graded
with hidden tests in sandboxes; the scores are what judging each design on its own gives; the
gradebook, the explanation with its fault-by-invariant grid and hint chosen by what broke; lab
submissions graded by re-delivery; bad input refused in one line."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from conftest import run_cli

from sim.cli import main
from sim.course.catalog import get_exercise, solutions_dir
from sim.course.evaluate import evaluate
from sim.course.hints import HintRule, choose_hint, load_hints

EX = get_exercise(1)
SOL = solutions_dir(EX)


_cli = run_cli  # conftest's: the one way tests call the CLI in-process


def _tree_digest(root: Path) -> str:
    """Every file under ``root`` but the grader's own output beside a submission (NAME.counterexample.toml:
    a search's counterexample, written beside the student's folder, never in it)."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if "__pycache__" in p.parts or (p.parent == root and p.name.endswith(".counterexample.toml")):
            continue
        h.update(str(p.relative_to(root)).encode())
        if p.is_file() and not p.is_symlink():
            h.update(p.read_bytes())
    return h.hexdigest()


def _zip(path: Path, files: dict[str, bytes], symlink: str | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        if symlink:
            info = zipfile.ZipInfo(symlink)
            info.external_attr = (0o120777 << 16)
            z.writestr(info, "/etc/passwd")
    return path


@pytest.fixture(scope="module")
def classroom(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("class") / "submissions"
    root.mkdir()
    (root / "alice").mkdir()
    shutil.copy(SOL / "design.py", root / "alice" / "design.py")
    (root / "bob").mkdir()
    shutil.copy(EX.folder / "design.py", root / "bob" / "design.py")
    (root / "bob" / "notes.txt").write_text("I did my best")
    # carol zipped her folder (the usual way: the file is one folder down, with macOS litter)
    _zip(root / "carol.zip", {"ex1/design.py": (SOL / "wrong" / "no-attempt" / "design.py").read_bytes(),
                              "__MACOSX/ex1/._design.py": b"\0\0"})
    (root / "dave").mkdir()
    (root / "dave" / "design.py").write_text((SOL / "design.py").read_text() + "\ndef broken(:\n")
    (root / "erin").mkdir()
    shutil.copy(SOL / "design.py", root / "erin" / "Design.py")  # the wrong name
    _zip(root / "frank.zip", {"../../escaped.py": b"x = 1\n", "design.py": b"x = 1\n"})
    _zip(root / "grace.zip", {"design.py": b"x = 1\n"}, symlink="secret.py")
    (root / "heidi.zip").write_bytes(b"PK\x03\x04 this is not a zip")
    (root / "ivan").mkdir()
    shutil.copy(SOL / "wrong" / "clock-key" / "design.py", root / "ivan" / "design.py")
    (root / ".DS_Store").write_bytes(b"\0")
    return root


@pytest.fixture(scope="module")
def graded(classroom, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    before = _tree_digest(classroom), _tree_digest(SOL), _tree_digest(EX.folder)
    import contextlib  # capsys is function-scoped: capture by hand

    buf_out, buf_err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(buf_out), contextlib.redirect_stderr(buf_err):
        try:
            main(["grade", "1", str(classroom), "--csv", str(out / "grades.csv"), "--json"])
        except SystemExit as e:
            code = e.code or 0
    after = _tree_digest(classroom), _tree_digest(SOL), _tree_digest(EX.folder)
    return {"code": code, "out": buf_out.getvalue(), "err": buf_err.getvalue(), "csv": out / "grades.csv",
            "untouched": before == after, "rows": {r["student"]: r for r in json.loads(buf_out.getvalue())}}


def _alone(folder: Path, tmp_path: Path) -> float:
    """The score of the design in ``folder`` judged on its own, in process (no batch, no sandbox)."""
    d = tmp_path / f"alone-{folder.name}"
    shutil.copytree(EX.folder, d, ignore=shutil.ignore_patterns("__pycache__", "hints.toml"))
    shutil.copy(folder / "design.py", d / "design.py")
    return evaluate(EX, d, hidden=True, isolate=False).score


def test_the_batch_completes_with_a_row_for_every_student_and_touches_nothing(graded):
    assert graded["code"] == 0, graded["err"]
    assert sorted(graded["rows"]) == ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan"]
    assert graded["untouched"], "grading changed the submissions, the solutions or the exercise"
    # the search's counterexample of a design it breaks lands beside that student's folder, named for it
    ivan = next(t for t in graded["rows"]["ivan"]["tests"] if t["name"] == "search")
    beside = Path(ivan["attachment"]["written"])
    assert beside.name == "ivan.counterexample.toml" and beside.read_text() == ivan["attachment"]["text"]
    assert str(beside) in ivan["reproduce"]
    assert "Traceback" not in graded["out"] + graded["err"]
    assert not (graded["csv"].parent.parent / "escaped.py").exists()


@pytest.mark.slow  # measured over 25 s in the quick loop at load 6-10 on 2 cores (2026-12-07)
def test_scores_are_what_each_design_earns_on_its_own(graded, classroom, tmp_path):
    rows = graded["rows"]
    full = rows["alice"]["max_score"]
    assert full == EX.public_points + EX.hidden_points() == 70
    assert rows["alice"]["score"] == full and not rows["alice"]["public_only"]
    assert rows["bob"]["score"] == pytest.approx(_alone(classroom / "bob", tmp_path)) and rows["bob"]["score"] < full
    assert rows["ivan"]["score"] == pytest.approx(_alone(classroom / "ivan", tmp_path)) and rows["ivan"]["score"] < full
    carol = tmp_path / "carol"
    carol.mkdir()
    shutil.copy(SOL / "wrong" / "no-attempt" / "design.py", carol / "design.py")
    assert rows["carol"]["score"] == pytest.approx(_alone(carol, tmp_path)) and 0 < rows["carol"]["score"] < full


@pytest.mark.parametrize("student, reason", [
    ("dave", "SyntaxError"),
    ("erin", "Design.py"),
    ("frank", "outside its folder"),
    ("grace", "symbolic link"),
    ("heidi", "cannot be read"),
])
def test_a_submission_that_cannot_be_graded_gets_0_on_every_test_with_the_reason(graded, student, reason):
    row = graded["rows"][student]
    assert row["score"] == 0 and len(row["tests"]) == 7
    assert all(t["points"] == 0 for t in row["tests"])
    assert reason in (row["problem"] or "") + row["tests"][0]["message"]


def test_the_gradebook_opens_in_the_csv_module_with_one_row_per_student(graded):
    with open(graded["csv"], newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [r["student"] for r in rows] == ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan"]
    tests = [f"{t.name} /{t.points}" for t in EX.graded_tests(True)]  # each rule's column headed with its points
    assert list(rows[0])[:3] == ["student", "score", "max"] and all(t in rows[0] for t in tests)
    for r in rows:
        assert float(r["score"]) == pytest.approx(sum(float(r[t]) for t in tests))
        assert float(r["score"]) == pytest.approx(graded["rows"][r["student"]]["score"])
    assert "outside its folder" in next(r for r in rows if r["student"] == "frank")["note"]


def test_no_output_carries_the_model_answer(graded):
    starter = set(EX.folder.joinpath("design.py").read_text().splitlines())
    secret = [line.strip() for line in (SOL / "design.py").read_text().splitlines()
              if len(line.strip()) > 30 and line not in starter]
    assert secret
    text = graded["out"] + graded["err"] + graded["csv"].read_text()
    leaked = [line for line in secret if line in text]
    assert not leaked


def test_explain_shows_what_broke_the_command_the_hint_chosen_by_what_broke_and_the_grid(classroom, capsys):
    code, out, err = _cli(capsys, "grade", "1", str(classroom / "carol.zip"), "--explain")
    assert code == 0 and not err.strip().startswith("error")
    # the transient fault froze T-1 (one key, two attempts): a hint chosen for that failure
    assert "hint:" in out and "transient" in out
    # a run that ended otherwise is judged again, alone (a run and check would show every invariant holding)
    assert ("protolab exercise try 1 . -c \"from sim.course.judges import rerun; rerun('design.fault_matrix', "
            "{'probes': [], 'cases': [{'scenario': 'publish-report', 'faults': ['transient']") in out
    from sim.course.sandbox import describe

    assert out.count(f"sandbox: {describe()}") == 1  # which sandbox judged it, once
    assert "faults by invariant" in out and "publish-report" in out and "fan-out" in out
    grid = out[out.index("faults by invariant"):]
    transient = next(line for line in grid.splitlines() if line.strip().startswith("transient "))
    assert transient.rstrip().endswith("✗")  # every invariant held; the ending was wrong
    assert "RESEND_DEDUPLICATED" in grid  # the legend


def test_explain_on_a_folder_of_many_is_refused(classroom, capsys):
    code, out, err = _cli(capsys, "grade", "1", str(classroom), "--explain")
    assert code == 2 and err.startswith("error: E_USAGE:") and "--explain grades one submission" in err


@pytest.mark.parametrize("args, code_word", [
    (["grade", "99", "."], "E_UNKNOWN_EXERCISE"),
    (["grade", "1", "/nonexistent/submissions"], "E_FILE_MISSING"),
    (["grade", "lab", "3"], "E_USAGE"),
])
def test_bad_input_is_one_line_and_exit_2(args, code_word, capsys):
    code, out, err = _cli(capsys, *args)
    assert code == 2 and err.startswith(f"error: {code_word}:") and err.count("\n") == 1


def test_an_empty_submissions_folder_is_refused_and_loose_files_are_named(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = _cli(capsys, "grade", "1", str(empty))
    assert code == 2 and err.startswith("error: E_NO_SUBMISSIONS:")
    (empty / "alice-design.py").write_text("x = 1\n")
    code, _, err = _cli(capsys, "grade", "1", str(empty))
    assert code == 2 and "alice-design.py" in err and "a folder or a zip of their own" in err


def test_hint_rules_pick_the_most_specific_and_refuse_typos(tmp_path):
    t = EX.tests[3]
    rules = [HintRule({"fault": "resend"}, "generic resend"),
             HintRule({"fault": "resend", "invariant": "RESEND_DEDUPLICATED"}, "specific"),
             HintRule({"test": "other"}, "another test")]
    sig = {"faults": ["resend:task_request"], "invariant": "RESEND_DEDUPLICATED"}
    assert choose_hint(rules, t, sig) == "specific"
    assert choose_hint(rules, t, {"faults": ["resend"]}) == "generic resend"
    assert choose_hint(rules, t, {"faults": ["crash"]}) == t.hint
    assert choose_hint(rules, t, None) == t.hint
    # every shipped table loads, and every rule names a known invariant
    from sim.course.catalog import exercises
    from sim.invariants import INVARIANTS

    for ex in exercises():
        for r in load_hints(ex):
            assert r.when.get("invariant", "NO_STATE_REGRESSION") in INVARIANTS, (ex.dirname, r.source)

    from sim.course import hints as hints_mod
    from sim.errors import InputError

    bad = tmp_path / "hints.toml"
    bad.write_text('[[hint]]\ninvariant_ = "X"\ntext = "t"\n')
    with pytest.raises(InputError, match="unknown key 'invariant_'"):
        hints_mod._read(bad)
    bad.write_text('[[hint]]\ntext = "always"\n')
    with pytest.raises(InputError, match="names no condition"):
        hints_mod._read(bad)


# ---------------------------------------------------------------------------- labs


@pytest.fixture(scope="module")
def lab_class(tmp_path_factory):
    from sim.labs.catalog import labs
    from sim.labs.paths import play, reference
    from conftest import journaled
    from sim.labs.session import LabSession
    from sim.live import LiveRun
    from sim.scenario import load_scenario
    from sim.store import ProgressStore

    tmp = tmp_path_factory.mktemp("labs")
    lab = next(x for x in labs() if x.number == 4)
    db, prog = tmp / lab.default_db, tmp / "progress.db"
    live = journaled(LiveRun(load_scenario(lab.scenario), seed=lab.seed, policy=lab.policy, faults=list(lab.faults), db=db))
    progress = ProgressStore.open(prog)
    session = LabSession(lab, live.store, progress)
    session.refresh()
    play(live, session, reference(lab))
    live.close()
    progress.close()
    subs = tmp / "submissions"
    subs.mkdir()
    import contextlib

    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(SystemExit) as done:
        main(["lab", "submit", "4", "-o", str(subs / "alice.protolab"), "--db", str(db), "--progress", str(prog)])
    assert done.value.code in (0, None)
    # bob edited his run's state by hand to make it look finished
    import sqlite3

    work = tmp / "bob"
    work.mkdir()
    with zipfile.ZipFile(subs / "alice.protolab") as z:
        z.extractall(work)
    con = sqlite3.connect(work / "run.db")
    con.execute("UPDATE deliveries SET decision = 'accepted' WHERE decision = 'conflict'")
    con.commit()
    con.close()
    with zipfile.ZipFile(subs / "bob.protolab", "w") as z:
        z.write(work / "manifest.json", "manifest.json")
        z.write(work / "run.db", "run.db")
    (subs / "carol.protolab").write_bytes(b"not a zip")
    (subs / "dave").mkdir()  # a folder with nothing in it
    return lab, subs


def test_lab_submissions_are_graded_by_re_delivery(lab_class, tmp_path, capsys):
    lab, subs = lab_class
    code, out, err = _cli(capsys, "grade", "lab", "4", str(subs), "--json", "--csv", str(tmp_path / "lab.csv"))
    assert code == 0, err
    rows = {r["student"]: r for r in json.loads(out)}
    full = len(lab.checkpoints) + len(lab.questions)
    assert rows["alice"]["score"] == rows["alice"]["max_score"] == full and rows["alice"]["genuine"]
    assert rows["bob"]["score"] == 0 and "not genuine" in rows["bob"]["note"]
    assert rows["carol"]["score"] == 0 and "E_NOT_A_SUBMISSION" in rows["carol"]["note"]
    assert rows["dave"]["score"] == 0 and "no .protolab file" in rows["dave"]["note"]
    with open(tmp_path / "lab.csv", newline="") as f:
        assert [r["student"] for r in csv.DictReader(f)] == ["alice", "bob", "carol", "dave"]


def test_a_submission_of_another_lab_scores_0(lab_class, capsys):
    lab, subs = lab_class
    code, out, err = _cli(capsys, "grade", "lab", "3", str(subs / "alice.protolab"), "--json")
    assert code == 0
    row = json.loads(out)[0]
    assert row["score"] == 0 and "lab 4, not lab 3" in row["note"]


def test_gradescope_files_are_valid_and_name_the_students_own_folder(classroom, tmp_path, capsys):
    from sim.course.gradescope import validate_results

    few = tmp_path / "few"
    few.mkdir()
    shutil.copytree(classroom / "ivan", few / "ivan")
    shutil.copy(classroom / "heidi.zip", few / "heidi.zip")
    out = tmp_path / "gs"
    code, text, err = _cli(capsys, "grade", "1", str(few), "--gradescope", str(out))
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["heidi", "ivan"]
    for who in ("heidi", "ivan"):
        d = json.loads((out / who / "results.json").read_text())
        validate_results(d)
        assert len(d["tests"]) == 7 and {t["visibility"] for t in d["tests"]} <= {"visible", "after_published"}
    ivan = json.loads((out / "ivan" / "results.json").read_text())
    failed = [t for t in ivan["tests"] if t["status"] == "failed"]
    assert failed and "protolab run --design 01-envelope-design/design.py" in failed[0]["output"]
    assert str(few) not in json.dumps(ivan)  # the instructor's folders are not the student's business
    heidi = json.loads((out / "heidi" / "results.json").read_text())
    assert heidi["score"] == 0 and "cannot be read" in heidi["tests"][0]["output"]


def test_without_the_hidden_tests_the_grader_refuses_rather_than_grade_the_public_ones(classroom, tmp_path,
                                                                                        monkeypatch, capsys):
    empty = tmp_path / "no-solutions"
    empty.mkdir()
    monkeypatch.setenv("PROTOLAB_SOLUTIONS", str(empty))
    code, out, err = _cli(capsys, "grade", "1", str(classroom / "alice"))
    assert code == 2 and err.startswith("error: E_NO_SOLUTIONS:") and "public tests only" in err


def test_an_install_from_the_checkout_finds_the_solutions_in_the_checkout_it_runs_in(tmp_path, monkeypatch):
    """`pip install .` leaves solutions/ out of the wheel: run in the checkout (or a folder inside
    it), or naming it with --course, the grader finds them there; anywhere else, none."""
    from sim.course import catalog
    from sim.errors import InputError

    root = Path(__file__).resolve().parents[1]
    monkeypatch.delenv("PROTOLAB_SOLUTIONS", raising=False)
    real = catalog.shipped
    monkeypatch.setattr(catalog, "shipped", lambda *parts: tmp_path / "site-packages" / Path(*parts)
                        if parts[0] == "solutions" else real(*parts))

    def hidden() -> bool:
        ex = catalog.get_exercise(1)
        return bool(ex.hidden_tests() or ex.extensions())

    monkeypatch.chdir(root)
    assert catalog.solutions_root() == root / "solutions" and hidden()
    monkeypatch.chdir(root / "sim" / "course")  # its parents
    assert catalog.solutions_root() == root / "solutions"
    monkeypatch.chdir(tmp_path)  # anywhere else: none (a student's install)
    assert catalog.solutions_root() is None and not hidden()
    try:
        assert catalog.use_course(root) == root  # --course DIR
        assert catalog.solutions_root() == root / "solutions" and hidden()
    finally:
        catalog.use_course(None)
    assert catalog.solutions_root() is None
    with pytest.raises(InputError) as e:
        catalog.use_course(tmp_path)
    assert e.value.code == "E_NOT_A_CHECKOUT" and "--course" in e.value.message and "solutions/" in e.value.message


def test_grade_names_course_when_it_finds_no_course(tmp_path, monkeypatch, capsys):
    from sim.course import catalog

    monkeypatch.delenv("PROTOLAB_SOLUTIONS", raising=False)
    real = catalog.shipped
    monkeypatch.setattr(catalog, "shipped", lambda *parts: tmp_path / "site-packages" / Path(*parts)
                        if parts[0] == "solutions" else real(*parts))
    monkeypatch.chdir(tmp_path)
    code, _, err = _cli(capsys, "grade", "1", str(tmp_path))
    assert code == 2 and err.startswith("error: E_NO_SOLUTIONS:") and "--course DIR" in err and err.count("\n") == 1
    code, _, err = _cli(capsys, "grade", "1", str(tmp_path), "--course", str(tmp_path))
    assert code == 2 and err.startswith("error: E_NOT_A_CHECKOUT:") and "--course" in err


@pytest.mark.parametrize("when, words", [
    ({"invariant": "EFFECT_AT_MOST_ONCEE"}, "invariant 'EFFECT_AT_MOST_ONCEE' names no invariant"),
    ({"fault": "resnd"}, "fault 'resnd' names no fault"),
    ({"fault": "resend:task_request"}, None),  # a fault with its target is the fault
    ({"test": "fault-matrx"}, "test 'fault-matrx' names no test"),
    ({"scenario": "publish-reprot"}, "scenario 'publish-reprot' names no scenario"),
    ({"policy": "safer"}, "policy 'safer' names no policy"),
    ({"symptom": ("resend-acepted",)}, "symptom 'resend-acepted' is reported by no judge"),
])
def test_a_hint_that_names_something_the_course_does_not_have_is_reported(when, words):
    from sim.course.catalog import get_exercise
    from sim.course.hints import check_symptoms

    found = check_symptoms(get_exercise(1), [HintRule(when, "x", "hints.toml hint 1")])
    if words is None:
        assert found == []
    else:
        assert len(found) == 1 and words in found[0] and found[0].startswith("hints.toml hint 1: "), found
