"""The grader's reproduce lines work as printed and reproduce what failed (issue 41): each planted wrong
answer of the kit (solutions/NN-slug/wrong/) is graded as an instructor grades it, and every reproduce
line printed for it is run as printed, where it was printed, with the installed protolab and no
virtualenv activated (tests/reprorun.py says how a run is judged a reproduction). A search's
counterexample.toml is written beside the submission: in the student's folder for 'exercise check',
beside each folder of a class for 'grade', never over a file the grader did not write, whole.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli
from reprorun import ROOT, grade_and_reproduce, judge_line, planted, shell_env

from sim.course.evaluate import Report, keep_attachments
from sim.course.evaluate import TestResult as _Result
from sim.course.grade import Submission, keep_beside
from sim.course.judges.search import MARK

_cli = run_cli


def _sh(line: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=shell_env(), capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL)


# ------------------------------------------------------------------------------------------ counterexample.toml


def _report_with(attachment_text: str, reproduce: str, shown: str) -> Report:
    from sim.course.catalog import get_exercise

    r = _Result(name="search", title="t", hidden=False, points=0.0, max_points=10, passed=False, message="m",
                   reproduce=reproduce, attachment={"name": "counterexample.toml", "text": attachment_text})
    rep = Report(get_exercise(5), Path(shown))
    rep.results = [r]
    return rep


@pytest.mark.slow  # two checks and a replay (several seconds); the unit tests below keep the rules quick
def test_check_writes_the_counterexample_in_the_students_folder_and_its_reproduce_line_replays_it(tmp_path):
    """The issue's case: 'counterexample.toml lists them and replays it' was printed, and no such file
    was written (the reproduce line then failed with E_UNKNOWN_SCENARIO)."""
    assert _sh("protolab exercise start 5", tmp_path).returncode == 0
    r = _sh("protolab exercise check 5 --json", tmp_path)
    assert r.returncode == 1, r.stderr
    search = next(t for t in json.loads(r.stdout)["tests"] if t["name"] == "search")
    written = tmp_path / "05-exactly-once" / "counterexample.toml"
    assert search["attachment"]["written"] == "05-exactly-once/counterexample.toml" and written.is_file()
    assert written.read_text().startswith(MARK) and written.read_text() == search["attachment"]["text"]
    assert search["reproduce"].startswith("protolab run 05-exactly-once/counterexample.toml --effects "
                                          "05-exactly-once/effects.py")
    again = _sh(search["reproduce"], tmp_path)
    assert judge_line(search, again.returncode, again.stdout + again.stderr) == (True, "")
    assert "EFFECT_AT_MOST_ONCE" in again.stdout
    # checking again leaves the same file alone (exercise check --watch would see a change and check forever),
    # and what check prints says where the file is
    before = written.stat().st_mtime_ns
    out = _sh("protolab exercise check 5", tmp_path).stdout
    assert written.stat().st_mtime_ns == before
    assert "counterexample.toml (written to 05-exactly-once/counterexample.toml; the reproduce line replays it)" in \
        " ".join(out.split())


def test_a_file_of_that_name_the_grader_did_not_write_is_never_written_over(tmp_path):
    folder = tmp_path / "alice"
    folder.mkdir()
    mine = folder / "counterexample.toml"
    mine.write_text("# my own notes\n")
    rep = keep_attachments(_report_with(f"{MARK} X\n", "protolab run alice/counterexample.toml", "alice"), "alice",
                           lambda n: (folder / n, f"alice/{n}"))
    a = rep.results[0].attachment
    assert mine.read_text() == "# my own notes\n" and "not a file the grader wrote" in a["not_written"]
    assert "written" not in a
    # a symbolic link is not followed, whatever it points at
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    mine.unlink()
    mine.symlink_to(target)
    rep = keep_attachments(_report_with(f"{MARK} X\n", "r", "alice"), "alice", lambda n: (folder / n, f"alice/{n}"))
    assert target.read_text() == "keep me" and mine.is_symlink() and rep.results[0].attachment["not_written"]
    # a file the grader wrote before is replaced whole, and no partial file is left beside it
    mine.unlink()
    mine.write_text(f"{MARK} an older one\n")
    rep = keep_attachments(_report_with(f"{MARK} the new one\n", "r", "alice"), "alice", lambda n: (folder / n, f"alice/{n}"))
    assert mine.read_text() == f"{MARK} the new one\n" and rep.results[0].attachment["written"] == "alice/counterexample.toml"
    assert sorted(p.name for p in folder.iterdir()) == ["counterexample.toml"]
    # a name is a file name, never a path
    bad = _report_with(f"{MARK} X\n", "r", "alice")
    bad.results[0].attachment["name"] = "../escape.toml"
    keep_attachments(bad, "alice", lambda n: (folder / n, f"alice/{n}"))
    assert not (tmp_path / "escape.toml").exists() and bad.results[0].attachment["not_written"]


def test_grade_writes_each_counterexample_beside_the_submission_and_names_it_in_the_reproduce_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    klass = tmp_path / "class"
    (klass / "bob").mkdir(parents=True)
    (klass / "bob" / "effects.py").write_text("x = 1\n")
    sub = Submission("bob", Path("class/bob"), Path("class/bob"), shown="class/bob")
    text = f"{MARK} X\n# replay it: protolab run class/bob/counterexample.toml --effects class/bob/effects.py\n"
    rep = _report_with(text, "protolab run class/bob/counterexample.toml --effects class/bob/effects.py", "class/bob")
    assert keep_beside(sub, rep) == ["class/bob.counterexample.toml"]
    r = rep.results[0]
    assert r.reproduce == "protolab run class/bob.counterexample.toml --effects class/bob/effects.py"
    assert (klass / "bob.counterexample.toml").read_text() == r.attachment["text"]
    assert "replay it: protolab run class/bob.counterexample.toml" in r.attachment["text"]
    assert sorted(p.name for p in (klass / "bob").iterdir()) == ["effects.py"]  # the submission as handed in
    # a zip's files are only in the grader's temporary copy: nothing is written for it
    z = Submission("carol", Path("class/carol.zip"), tmp_path / "tmpcopy", shown=".")
    (klass / "carol.zip").write_bytes(b"PK")
    assert keep_beside(z, _report_with(text, "r", ".")) == [] and not (klass / "carol.counterexample.toml").exists()


# ------------------------------------------------------------------------------------------ exercise try


@pytest.mark.slow  # seven commands, each a process
def test_exercise_try_runs_python_beside_the_students_files_without_an_activated_venv(tmp_path):
    assert _sh("protolab exercise start 2", tmp_path).returncode == 0
    env = shell_env()
    assert "VIRTUAL_ENV" not in env
    r = _sh("protolab exercise try 2 -c \"import keys; print(keys.idempotency_key('R-1', 'T-2', 'writer', 'result', 1))\"",
            tmp_path / "02-keys-and-digests")
    assert r.returncode == 0 and r.stdout.strip() == "R-1:T-2:result", r.stderr
    # from the folder above, naming it; its exit status is the code's; code that raises is one line, where
    r = _sh("protolab exercise try 2 02-keys-and-digests -c 'raise SystemExit(3)'", tmp_path)
    assert r.returncode == 3 and r.stdout == "" and r.stderr == ""
    r = _sh("protolab exercise try 2 02-keys-and-digests -c 'import keys; keys.digest(1, \"no-such-scheme\"); keys.nope()'",
            tmp_path)
    assert r.returncode == 1 and r.stderr.startswith("raised AttributeError") and "Traceback" not in r.stderr
    r = _sh("protolab exercise try 2 02-keys-and-digests -c 'print(1 +'", tmp_path)
    assert r.returncode == 2 and r.stderr.startswith("error: E_USAGE:")
    # --processes: the same code in fresh processes, each with its own hash seed; 1 when they disagree
    r = _sh("protolab exercise try 2 02-keys-and-digests --processes 2 -c 'print(hash(\"x\"))'", tmp_path)
    assert r.returncode == 1 and "DIFFERENT" in r.stdout and "hash seed 2" in r.stdout
    r = _sh("protolab exercise try 2 02-keys-and-digests --processes 2 -c 'print(1)'", tmp_path)
    assert r.returncode == 0 and "printed the same" in r.stdout
    assert not (tmp_path / "02-keys-and-digests" / "__pycache__").exists()  # nothing written beside the student's file


def test_exercise_5s_probe_line_shows_the_two_keys_and_fails_on_a_key_per_message(tmp_path):
    """The issue's case: the line printed one key twice and showed nothing."""
    assert _sh("protolab exercise start 5", tmp_path).returncode == 0
    line = ("protolab exercise try 5 05-exactly-once -c \"import effects; from sim.course.judges.effects import show; "
            "show(effects.effect_key, 'a-resend')\"")
    r = _sh(line, tmp_path)
    assert r.returncode == 1 and "'effect:M-6'" in r.stdout and "'effect:M-9'" in r.stdout and "NOT equal" in r.stdout
    shutil.copy(ROOT / "solutions/05-exactly-once/effects.py", tmp_path / "05-exactly-once" / "effects.py")
    r = _sh(line, tmp_path)
    assert r.returncode == 0 and "they are equal" in r.stdout


# ------------------------------------------------------------------------------------------ every planted answer


@pytest.mark.slow
@pytest.mark.parametrize("number,name,folder", planted(), ids=[f"ex{n}-{name}" for n, name, _f in planted()])
def test_every_reproduce_line_of_a_planted_wrong_answer_reproduces_its_failure(number, name, folder, tmp_path):
    g = grade_and_reproduce(number, name, folder, tmp_path)
    assert g.failing, f"the planted answer {name} passes every test ({g.score}/{g.max_score})"
    bad = [ln for ln in g.lines if not ln.reproduced]
    assert not bad, "\n".join(f"{ln.test}: {ln.why}\n  {ln.line}\n  " + "\n  ".join(ln.out.strip().splitlines()[-10:])
                              for ln in bad)
    for ln in g.lines:  # a search's line replays the file written beside the submission
        if "counterexample.toml" in ln.line:
            assert f"class/{name}.counterexample.toml" in ln.line or "--processes" in ln.line, ln.line
            assert (tmp_path / "class" / f"{name}.counterexample.toml").is_file()
    assert sorted(os.listdir(tmp_path / "class" / name)) == sorted(
        p.name for p in folder.iterdir() if p.name not in ("expect.toml", "__pycache__"))  # the submission untouched
