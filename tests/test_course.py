"""The student's loop through the CLI (exercise list, start, check, hint, --watch) and the
sandbox that student code is judged in: hostile code ends its test with a reason, never the
grader."""

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_cli

from sim.course.catalog import exercises, get_exercise

ROOT = Path(__file__).resolve().parent.parent
SOLUTION = ROOT / "solutions" / "01-envelope-design"


def _cli(capsys, *args) -> tuple[int, str, str]:
    """conftest's run_cli, with a table's lines joined (words wrap where the terminal is narrow)."""
    code, out, err = run_cli(capsys, *args)
    return code, out if "--json" in args else " ".join(out.split()), err


def test_exercise_list_json_names_every_exercise_with_its_points(capsys):
    code, out, _ = _cli(capsys, "exercise", "list", "--json")
    rows = json.loads(out)
    assert code == 0 and [r["number"] for r in rows] == sorted(r["number"] for r in rows)
    first = rows[0]
    assert first["slug"] == "envelope-design" and first["files"] == ["design.py"]
    assert first["public_points"] == 70 and first["hidden_points"] == 0  # seven rules; hidden cases, no hidden test


def test_exercise_start_copies_the_starter_and_refuses_to_overwrite(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = _cli(capsys, "exercise", "start", "1")
    assert code == 0 and "01-envelope-design" in out
    d = tmp_path / "01-envelope-design"
    assert {"README.md", "design.py", "exercise.toml"} <= {p.name for p in d.iterdir()}
    (d / "design.py").write_text("# my work\n")
    code, _, err = _cli(capsys, "exercise", "start", "1")
    assert code == 2 and err.startswith("error: E_DIR_EXISTS: ") and err.count("\n") == 1
    assert (d / "design.py").read_text() == "# my work\n"


def test_check_from_inside_the_exercise_folder_needs_no_folder_argument(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _cli(capsys, "exercise", "start", "3")[0] == 0
    monkeypatch.chdir(tmp_path / "03-deduplicating-consumer")
    code, out, err = _cli(capsys, "exercise", "check", "3")
    assert code == 1 and not err and get_exercise(3).tests[0].name in out and "This is not your grade" in out
    # inside exercise 3's folder, exercise 1 is still looked for where it was started
    code, _, err = _cli(capsys, "exercise", "check", "1")
    assert code == 2 and err.startswith("error: E_DIR_MISSING: ")


def test_no_solution_or_hidden_test_reaches_the_students_copy(tmp_path, capsys):
    for ex in exercises():
        code, _, _ = _cli(capsys, "exercise", "start", str(ex.number), str(tmp_path / ex.dirname))
        assert code == 0
        copied = {p.name for p in (tmp_path / ex.dirname).rglob("*")}
        assert "hidden.toml" not in copied and "wrong" not in copied and "expect.toml" not in copied


@pytest.mark.parametrize("args, code", [
    (["exercise", "start", "99"], "E_UNKNOWN_EXERCISE"),
    (["exercise", "check", "nope"], "E_UNKNOWN_EXERCISE"),
    (["exercise", "check", "1", "/nonexistent/folder"], "E_DIR_MISSING"),
    (["exercise", "start", "1", "/nonexistent/folder/x"], "E_DIR_MISSING"),
])
def test_bad_exercise_input_is_one_error_line_exit_2(capsys, args, code):
    rc, _, err = _cli(capsys, *args)
    assert rc == 2 and err.startswith(f"error: {code}: ") and err.count("\n") == 1


def test_check_on_the_starter_fails_says_what_broke_and_never_calls_public_tests_a_grade(tmp_path, capsys):
    _cli(capsys, "exercise", "start", "1", str(tmp_path / "ex"))
    code, out, _ = _cli(capsys, "exercise", "check", "1", str(tmp_path / "ex"))
    assert code == 1
    assert "FAIL" in out and "E_EVIDENCE_REQUIRED" in out and "reproduce:" in out and "hint:" in out
    assert "lost evidence" in out  # the hint written for a result that cites nothing
    assert ("more points are in hidden tests" in out or "hidden cases of" in out) and "not your grade" in out
    assert "all tests passed" not in out.lower()
    from sim.course.sandbox import describe

    assert f"sandbox: {describe()}" in out  # which sandbox judged it, said to the student too


def test_check_on_the_model_answer_passes_and_still_names_the_hidden_tests(tmp_path, capsys):
    d = tmp_path / "ex"
    d.mkdir()
    shutil.copy(SOLUTION / "design.py", d / "design.py")
    code, out, _ = _cli(capsys, "exercise", "check", "1", str(d), "--json")
    report = json.loads(out)
    assert code == 0 and report["all_passed"] and report["score"] == report["max_score"] == 70
    assert report["public_only"] is True and report["hidden_points"] == 0


def test_hint_gives_the_hint_of_the_first_failing_test(tmp_path, capsys):
    _cli(capsys, "exercise", "start", "1", str(tmp_path / "ex"))
    code, out, _ = _cli(capsys, "exercise", "hint", "1", str(tmp_path / "ex"))
    # The starter keys by message id: the first rule's hint is the one written for that mistake (the
    # key follows the message id), not the test's generic one.
    assert code == 0 and out.startswith("keys-name-intents")
    assert "follows the message id" in out and "message_id" in out


# ---------------------------------------------------------------------------- hostile student code


def run_test(judge: str, folder: Path, args: dict, *, timeout: float) -> dict:
    """One test as the grader judges it: a private copy, a warm judge process of the pool, the
    student's code in its sandboxed hosts."""
    from contextlib import ExitStack

    from sim.course.pool import JudgePool, private_copy

    with ExitStack() as stack, JudgePool(1) as pool:
        copy, problem = private_copy(folder, stack)
        assert problem is None, problem
        return pool.run(judge, copy, args, timeout=timeout)


def _sub(tmp_path: Path, source: str) -> Path:
    d = tmp_path / "sub"
    d.mkdir()
    (d / "design.py").write_text(source)
    return d


GOOD_TAIL = ("DIGEST_SCHEME = 'json-sorted-v1'\n"
             "def payload(i): return dict(i.body)\n"
             "def evidence_refs(i): return list(i.refs)\n")


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
@pytest.mark.parametrize("source, says", [
    ("while True:\n    pass\n", "did not finish within"),
    ("import sys\nsys.exit(3)\n", "sys.exit"),
    ("raise RuntimeError('no')\n", "does not import: RuntimeError: no"),
    (GOOD_TAIL + "def idempotency_key(i):\n    return {}['missing']\n", "design.py line"),
    (GOOD_TAIL + "def idempotency_key(i):\n    return 42\n", "not a string"),
    (GOOD_TAIL + "def idempotency_key(i):\n    print('x' * 10_000_000)\n    return i.task_id + ':' + i.message_id\n", "printed more than"),
    ("import os\nos._exit(9)\n", "exit status 9"),
    ("x = bytearray(4 * 1024 ** 3)\n", "memory"),
])
def test_hostile_student_code_scores_zero_with_a_reason_and_no_traceback(tmp_path, source, says):
    v = run_test("design.loads", _sub(tmp_path, source), {}, timeout=4)
    assert v["score"] == 0.0, v
    assert says in v["message"], v["message"]
    assert "Traceback" not in v["message"] and "\n" not in v["message"]


def test_the_sandbox_judges_a_private_copy_and_leaves_the_students_folder_alone(tmp_path):
    d = _sub(tmp_path, "open('written-by-student.txt', 'w').write('x')\n" + GOOD_TAIL +
             "def idempotency_key(i):\n    return f'{i.trace_id}:{i.task_id}:{i.step}:{i.attempt}:{i.retry}:{i.answers}:{i.sender}'\n")
    v = run_test("design.loads", d, {}, timeout=20)
    assert v["score"] == 1.0, v
    assert sorted(p.name for p in d.iterdir()) == ["design.py"]


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
@pytest.mark.skipif(not hasattr(signal, "SIGINT"), reason="needs signals")
def test_check_watch_checks_again_when_a_file_changes(tmp_path):
    d = tmp_path / "ex"
    subprocess.run([sys.executable, "-m", "sim", "exercise", "start", "1", str(d)], check=True, capture_output=True,
                   cwd=ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "sim", "exercise", "check", "1", str(d), "--watch"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.time() + 300  # a guard against hanging; the loop waits on the output
        out = ""
        while "watching for changes" not in out and time.time() < deadline:
            out += proc.stdout.readline()
        shutil.copy(SOLUTION / "design.py", d / "design.py")
        while out.count("watching for changes") < 2 and time.time() < deadline:
            out += proc.stdout.readline()
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=10)
    assert out.count("watching for changes") == 2
    assert "some public tests fail" in out and "all public tests pass" in out


def test_a_design_that_rewrites_the_judges_at_import_cannot_grade_itself(tmp_path):
    # The judge and the simulator run in a process that never imports the student's file; the student's
    # process cannot even import them (its box holds the host's files and the design's interface only).
    cheat = (
        "import sim.invariants, sim.course.judges.design as d\n"
        "sim.invariants.check = lambda store: []\n"
        "d._judge_run = lambda *a, **k: (True, 'all good', None)\n"
        "DIGEST_SCHEME = 'json-sorted-v1'\n"
        "def idempotency_key(i): return f'{i.sender}:{i.message_id}'\n"
        "def payload(i): return dict(i.body)\n"
        "def evidence_refs(i): return list(i.refs)\n"
    )
    v = run_test("design.fault_matrix", _sub(tmp_path, cheat), {"faults": [["resend"]]}, timeout=30)
    assert v["score"] == 0.0 and "No module named 'sim.invariants'" in v["message"], v["message"]
    assert "the kit's engine is not available to judged code" in v["message"]
    # patched from inside its own process all the same (were the judges there), it grades nothing: the verdict
    # comes from the judge's process
    patched = cheat.replace("import sim.invariants, sim.course.judges.design as d\n", "import types\n"
                            "sim = types.SimpleNamespace(invariants=types.SimpleNamespace())\n"
                            "d = types.SimpleNamespace()\n")
    (tmp_path / "again").mkdir()
    v = run_test("design.fault_matrix", _sub(tmp_path / "again", patched), {"faults": [["resend"]]}, timeout=30)
    assert v["score"] == 0.0 and "RESEND_DEDUPLICATED" in v["message"], v["message"]


def test_a_consume_hosted_in_its_own_process_drives_the_runtime_exactly_as_in_process(tmp_path):
    """Exercise 3's model consume in its host (plain data and the allowlist's rows across the pipe,
    no engine module on the host's side) and the same file loaded in this process give the same runs."""
    from dataclasses import replace as _replace

    from sim.course.judges.intake import _decide
    from sim.course.remote import close_shared
    from sim.plugins import load_intake
    from sim.policy import SAFE
    from sim.runner import run_scenario
    from sim.scenario import load_scenario

    shutil.copy(ROOT / "solutions" / "03-deduplicating-consumer" / "decide.py", tmp_path / "decide.py")
    fn, host = _decide(tmp_path)
    here = load_intake(str(tmp_path / "decide.py"))
    try:
        for faults in (["conflicting-digest"], ["crash", "resend"]):
            remote = run_scenario(load_scenario("publish-report"), faults=faults, policy=_replace(SAFE, decide=fn))
            local = run_scenario(load_scenario("publish-report"), faults=faults, policy=_replace(SAFE, decide=here))
            assert remote.state_digest() == local.state_digest()
    finally:
        host.close(force=True)
        close_shared()


def _check_in(folder: Path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim", "exercise", "check", "1", *args], cwd=folder,
                          capture_output=True, text=True, timeout=300)


def test_a_syntax_error_is_said_once_with_its_line_and_no_hint(tmp_path):
    subprocess.run([sys.executable, "-m", "sim", "exercise", "start", "1"], cwd=tmp_path, check=True, capture_output=True)
    design = tmp_path / "01-envelope-design" / "design.py"
    lines = design.read_text().count("\n")
    design.write_text(design.read_text() + "def broken(:\n")
    r = _check_in(tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stdout + r.stderr
    flat = " ".join(r.stdout.split())
    assert flat.count("SyntaxError") == 1 and f"line {lines + 1}" in flat, r.stdout
    assert "could not be tested" in flat and "hint:" not in r.stdout
    assert r.stdout.count("FAIL 0/") == 7  # every test still listed, with its points


def test_reproduce_commands_are_one_line_each_with_the_seed_and_a_relative_path(tmp_path):
    subprocess.run([sys.executable, "-m", "sim", "exercise", "start", "1"], cwd=tmp_path, check=True, capture_output=True)
    r = _check_in(tmp_path)  # the starter: some tests fail, each with a command that reproduces it
    repro = [ln.split("reproduce:", 1)[1].strip() for ln in r.stdout.splitlines() if "reproduce:" in ln]
    assert repro, r.stdout
    for cmd in repro:  # a whole command on its line (output to a pipe is 80 columns: no wrapping)
        if cmd.startswith("protolab exercise try 1 01-envelope-design "):  # one case judged again, seed and all
            # (a run's case names its seed; a search is every order of its story, and names its story)
            assert ("'seed': 0" in cmd or "'searches': [{'scenario': " in cmd) and str(tmp_path) not in cmd, cmd
            continue
        steps = [step.strip() for step in cmd.split("&&")]
        assert all(step.startswith("protolab ") for step in steps) and "--seed " in cmd, cmd
        assert all("--db " not in step or shlex.split(step)[shlex.split(step).index("--db") + 1].endswith(".db")
                   for step in steps), cmd  # no argument cut in two
        assert "01-envelope-design/design.py" in cmd and str(tmp_path) not in cmd


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
def test_exercise_check_finds_the_folder_from_below_and_says_where_it_looked_when_it_cannot(tmp_path):
    subprocess.run([sys.executable, "-m", "sim", "exercise", "start", "1"], cwd=tmp_path, check=True, capture_output=True)
    below = tmp_path / "notes" / "day1"
    below.mkdir(parents=True)
    r = _check_in(below)
    assert r.returncode == 1 and "exercise 1: Envelope design" in r.stdout, r.stderr
    assert "../../01-envelope-design/design.py" in r.stdout  # reproduce paths are relative to where you are
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    elsewhere.mkdir()
    r2 = _check_in(elsewhere)
    assert r2.returncode == 2 and r2.stdout == "" and r2.stderr.count("\n") == 1
    assert r2.stderr.startswith("error: E_DIR_MISSING: ") and str(elsewhere) in r2.stderr
    assert "protolab exercise start 1" in r2.stderr and "protolab exercise check 1 PATH" in r2.stderr
