"""Gradescope: results.json from a report (sim/course/gradescope.py) and the autograder zip
(sim/course/autograder.py), unpacked into a temporary root laid out like /autograder and run as
Gradescope runs it: once per submission, nothing installed, results.json written every time."""

import json
import math
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest

from sim.cli import main
from sim.course.autograder import build_autograder
from sim.course.catalog import DEFAULT_VISIBILITY, VISIBILITIES, _load, get_exercise, load_tests
from sim.course.evaluate import Report
from sim.course.evaluate import TestResult as Result
from sim.course.gradescope import results_json, schema, ungradable, validate_results
from sim.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "01-envelope-design"

# Gradescope's documented results.json (gradescope-autograders.readthedocs.io/en/latest/specs/), by hand
TOP = {"score": (int, float), "execution_time": (int, float), "output": str, "output_format": str,
       "test_output_format": str, "test_name_format": str, "visibility": str, "stdout_visibility": str,
       "extra_data": dict, "tests": list, "leaderboard": list}
TEST = {"score": (int, float), "max_score": (int, float), "status": str, "name": str, "name_format": str,
        "number": str, "output": str, "output_format": str, "tags": list, "visibility": str, "extra_data": dict}
FORMATS = {"text", "simple_format", "html", "md", "ansi"}


def check_by_hand(d: dict) -> None:
    """The documented fields and types, checked without the schema."""
    assert set(d) <= set(TOP), set(d) - set(TOP)
    for k, v in d.items():
        assert isinstance(v, TOP[k]) and not isinstance(v, bool), (k, v)
    assert d["visibility"] in VISIBILITIES and d["stdout_visibility"] in VISIBILITIES
    assert {d["output_format"], d["test_output_format"], d["test_name_format"]} <= FORMATS
    assert d["tests"], "every test is listed"
    for t in d["tests"]:
        assert set(t) <= set(TEST), set(t) - set(TEST)
        for k, v in t.items():
            assert isinstance(v, TEST[k]) and not isinstance(v, bool), (k, v)
        assert t["status"] in ("passed", "failed") and t["visibility"] in VISIBILITIES
        assert t["name_format"] in FORMATS and t["output_format"] in FORMATS
        assert all(isinstance(x, str) for x in t["tags"])
        assert 0 <= t["score"] <= t["max_score"] and t["output"].strip()
    assert math.isclose(d["score"], sum(t["score"] for t in d["tests"]), abs_tol=0.05)
    assert d.get("execution_time", 0) >= 0


def check_results(d: dict) -> None:
    jsonschema.Draft202012Validator(schema()).validate(d)
    check_by_hand(d)
    assert validate_results(d) == [] and validate_results(d, use_jsonschema=False) == []


# ------------------------------------------------------------------------------ results.json


def test_the_schema_is_valid_and_the_hand_check_agrees_with_jsonschema_on_broken_files():
    jsonschema.Draft202012Validator.check_schema(schema())
    good = {"score": 5.0, "tests": [{"name": "a", "score": 5, "max_score": 10, "status": "failed", "visibility": "visible",
                                     "tags": ["x"], "number": "1.1", "output": "o", "output_format": "text"}],
            "leaderboard": [{"name": "Time", "value": 1.5, "order": "asc"}]}
    assert validate_results(good) == [] and validate_results(good, use_jsonschema=False) == []
    broken = [
        {"tests": [{"name": "no score anywhere"}]},
        {"score": "5"},
        {"score": True},
        {"score": 1, "visibility": "after_lunch"},
        {"score": 1, "stdout_visibility": "shown"},
        {"score": 1, "output_format": "rtf"},
        {"score": 1, "scores": 1},
        {"score": 1, "execution_time": -1},
        {"score": 1, "tests": [{"score": 1, "status": "ok"}]},
        {"score": 1, "tests": [{"score": 1, "tags": ["a", 2]}]},
        {"score": 1, "tests": [{"score": 1, "number": 1.1}]},
        {"score": 1, "tests": [{"score": 1, "hidden": True}]},
        {"score": 1, "leaderboard": [{"name": "x"}]},
        [],
    ]
    for d in broken:
        by_schema, by_hand = validate_results(d), validate_results(d, use_jsonschema=False)
        assert by_schema and by_hand, d


def test_the_totals_must_add_up():
    d = {"score": 7.0, "tests": [{"score": 5, "max_score": 10}, {"score": 3, "max_score": 2}]}
    problems = validate_results(d)
    assert any("outside 0..2" in p for p in problems) and any("not the sum" in p for p in problems)


def _report(ex, results, problem=None):
    rep = Report(ex, Path("/private/sandbox/copy"), hidden_ran=any(r.hidden for r in results), problem=problem)
    rep.results = results
    return rep


def test_results_json_turns_a_report_into_gradescope_tests_a_student_can_act_on():
    ex = get_exercise(1)
    results = [
        Result(name="keys-name-intents", title=ex.tests[0].title, hidden=False, points=10, max_points=10, passed=True,
                   message="every invariant holds", visibility="visible"),
        Result(name="fault-matrix", title=ex.tests[5].title, hidden=False, points=24, max_points=30, passed=False,
                   message="RESEND_DEDUPLICATED broke in /private/sandbox/copy/design.py",
                   reproduce="protolab run --design /private/sandbox/copy/design.py --fault resend", hint="look at the key",
                   output="debug print\n", visibility="visible"),
        # exercise 1 keeps no hidden test (hidden cases of its public ones): a hidden test of another kit
        Result(name="a-hidden-rule", title="A hidden rule", hidden=True, points=0, max_points=10,
                   passed=False, message="a crash broke it", hint="each attempt its own key"),  # no visibility: the default
    ]
    d = results_json(_report(ex, results), execution_time=12.2, shown_dir="01-envelope-design")
    check_results(d)
    assert d["score"] == 34 and d["execution_time"] == 13
    a, b, c = d["tests"]
    assert [t["number"] for t in d["tests"]] == ["1.1", "1.2", "1.3"]
    assert a["name"] == ex.tests[0].title and a["status"] == "passed" and a["visibility"] == "visible"
    assert b["status"] == "failed" and b["score"] == 24 and b["max_score"] == 30
    assert "What failed: RESEND_DEDUPLICATED broke in 01-envelope-design/design.py" in b["output"]
    assert "Reproduce it: protolab run --design 01-envelope-design/design.py --fault resend" in b["output"]
    assert "Hint: look at the key" in b["output"] and "debug print" in b["output"]
    assert "/private/sandbox" not in json.dumps(d)
    assert c["visibility"] == "after_published" and c["tags"] == ["envelope-design", "hidden"]
    assert "Hint: each attempt its own key" in c["output"]
    assert "shown when grades are published" in d["output"] and d["stdout_visibility"] == "hidden"


def test_a_submission_that_cannot_be_graded_gets_every_test_zero_with_the_reason():
    ex = get_exercise(1)
    d = ungradable(ex, "no design.py in the submission; it holds notes.txt")
    check_results(d)
    assert d["score"] == 0 and len(d["tests"]) == len(ex.tests) + len(ex.hidden_tests())
    for t in d["tests"]:
        assert t["score"] == 0 and t["status"] == "failed" and "no design.py in the submission" in t["output"]
    assert "could not be graded: no design.py" in d["output"] and d["extra_data"]["problem"]


def _exercise_folder(tmp_path, top: str, test_extra: str = "") -> Path:
    d = tmp_path / "exercises" / "09-vis"
    d.mkdir(parents=True)
    (d / "exercise.toml").write_text(
        f'number = 9\nfiles = ["x.py"]\n{top}\n'
        '[[test]]\nname = "a"\npoints = 1\njudge = "design.loads"\n'
        f'[[test]]\nname = "b"\npoints = 1\njudge = "design.loads"\n{test_extra}\n')
    return d


def test_visibility_follows_exercise_toml_and_refuses_unknown_values(tmp_path):
    assert DEFAULT_VISIBILITY == {"public": "visible", "hidden": "after_published"}
    d = _exercise_folder(tmp_path / "1", 'visibility = { public = "after_due_date", hidden = "hidden" }',
                         'visibility = "visible"')
    ex = _load(d)
    assert [t.visibility for t in ex.tests] == ["after_due_date", "visible"]
    (tmp_path / "1" / "hidden.toml").write_text('[[test]]\nname = "h"\npoints = 1\njudge = "design.loads"\n'
                                                '[[test]]\nname = "i"\npoints = 1\njudge = "design.loads"\n'
                                                'visibility = "after_due_date"\n')
    hidden = load_tests(tmp_path / "1" / "hidden.toml", hidden=True, defaults_from=d / "exercise.toml")
    assert [t.visibility for t in hidden] == ["hidden", "after_due_date"]
    assert [t.visibility for t in load_tests(tmp_path / "1" / "hidden.toml", hidden=True)] == ["after_published",
                                                                                              "after_due_date"]
    for top, extra in (('visibility = { public = "sometimes" }', ""), ("", 'visibility = "public"'),
                       ('visibility = { students = "visible" }', ""), ('visibility = "visible"', "")):
        with pytest.raises(InputError) as e:
            _load(_exercise_folder(tmp_path / str(abs(hash((top, extra)))), top, extra))
        assert e.value.code == "E_EXERCISE_FILE" and "visibility" in e.value.message


# ------------------------------------------------------------------------------ the autograder zip


@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("zip") / "ex1.zip"
    info = build_autograder(1, out)
    assert info["exercise"] == 1 and info["hidden_tests"] == 0  # exercise 1: hidden cases of public tests
    return out


def test_the_zip_holds_setup_and_run_autograder_at_its_root_and_only_this_exercises_solutions(autograder_zip):
    with zipfile.ZipFile(autograder_zip) as z:
        names = z.namelist()
        infos = {i.filename: i for i in z.infolist()}
        setup = z.read("setup.sh").decode()
        run = z.read("run_autograder").decode()
        manifest = json.loads(z.read("autograder.json"))
        fallback = json.loads(z.read("fallback-results.json"))
    assert {"setup.sh", "run_autograder"} <= set(names)
    for script in ("setup.sh", "run_autograder"):
        assert (infos[script].external_attr >> 16) & stat.S_IXUSR, f"{script} is not executable"
    assert "protolab/pyproject.toml" in names and "protolab/sim/course/autograder.py" in names
    assert "protolab/solutions/01-envelope-design/hidden.toml" in names
    assert {n.split("/")[2] for n in names if n.startswith("protolab/solutions/")} == {"01-envelope-design"}
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert manifest["exercise"] == 1 and manifest["hidden_tests"] == []  # hidden cases of public tests only
    check_results(fallback)
    assert fallback["score"] == 0
    # setup.sh installs; run_autograder installs nothing
    assert "pip install" in setup and "useradd" in setup and "protolab-sandbox" in setup and "venv" in setup
    for word in ("pip", "apt-get", "useradd"):
        assert word not in run
    assert "PROTOLAB_AUTOGRADER_ROOT" in run and "PROTOLAB_PYTHON" in run
    for script in (setup, run):
        assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0


def test_autograder_cli_writes_the_zip_and_refuses_to_overwrite_other_files(tmp_path, capsys):
    out = tmp_path / "ex1.zip"
    try:
        main(["autograder", "1", "-o", str(out)])
    except SystemExit as e:
        assert not e.code
    assert zipfile.is_zipfile(out) and "wrote" in capsys.readouterr().out
    try:  # a previous autograder zip is replaced
        main(["autograder", "envelope-design", "-o", str(out)])
    except SystemExit as e:
        assert not e.code
    other = tmp_path / "notes.zip"
    other.write_text("not mine")
    with pytest.raises(SystemExit) as e:
        main(["autograder", "1", "-o", str(other)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("error: E_OUTPUT_EXISTS: ") and err.count("\n") == 1
    assert other.read_text() == "not mine"


def _grade(zip_path: Path, root: Path, submission: dict[str, bytes] | None = None, zipped: dict | None = None) -> dict:
    """Unpack the autograder into ROOT/source, put a submission in ROOT/submission and run
    ROOT/source/run_autograder as Gradescope would (here with this interpreter, which has protolab's
    dependencies; setup.sh is not run)."""
    (root / "source").mkdir(parents=True)
    (root / "submission").mkdir()
    (root / "results").mkdir()
    with zipfile.ZipFile(zip_path) as z:
        z.extractall(root / "source")
    for name in ("setup.sh", "run_autograder"):  # zipfile does not restore modes; Gradescope's unzip does
        (root / "source" / name).chmod(0o755)
    for rel, data in (submission or {}).items():
        (root / "submission" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / rel).write_bytes(data)
    if zipped:
        with zipfile.ZipFile(root / "submission" / "submission.zip", "w") as z:
            for rel, data in zipped.items():
                z.writestr(rel, data)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(PROTOLAB_AUTOGRADER_ROOT=str(root), PROTOLAB_PYTHON=sys.executable)
    proc = subprocess.run([str(root / "source" / "run_autograder")], env=env, cwd=root, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    results = root / "results" / "results.json"
    assert results.is_file(), proc.stdout + proc.stderr
    d = json.loads(results.read_text())
    check_results(d)
    d["_stdout"] = proc.stdout
    return d


def test_the_autograder_gives_the_model_answer_full_marks_with_hidden_tests(autograder_zip, tmp_path):
    d = _grade(autograder_zip, tmp_path / "autograder", {"design.py": (SOLUTIONS / "design.py").read_bytes()})
    assert d["score"] == 70 and all(t["status"] == "passed" for t in d["tests"])
    assert [t for t in d["tests"] if "hidden" in t["tags"]] == []  # six public rules, run with their hidden cases
    assert {t["visibility"] for t in d["tests"] if "public" in t["tags"]} == {"visible"}
    assert "score 70/70" in d["_stdout"]
    assert f"({tmp_path / 'autograder' / 'source' / 'protolab'})" in d["_stdout"]  # graded by the bundled source


@pytest.mark.slow
def test_the_autograder_finds_a_wrong_design_nested_in_a_zip_and_gives_it_less(autograder_zip, tmp_path):
    wrong = (SOLUTIONS / "wrong" / "clock-key" / "design.py").read_bytes()
    d = _grade(autograder_zip, tmp_path / "autograder", {"README.txt": b"my notes"},
               zipped={"lab1/design.py": wrong, "lab1/notes.md": b"x", "__MACOSX/lab1/._design.py": b"junk"})
    assert 0 < d["score"] < 100
    failed = {t["extra_data"]["test"]: t for t in d["tests"] if t["status"] == "failed"}
    assert {"keys-name-intents", "fault-matrix"} <= set(failed)
    out = failed["fault-matrix"]["output"]
    assert "What failed:" in out and "Hint:" in out
    assert "Reproduce it: protolab run --design 01-envelope-design/design.py" in out


def test_a_broken_submission_gets_zero_with_the_reason_in_a_valid_file(autograder_zip, tmp_path):
    d = _grade(autograder_zip, tmp_path / "broken", {"design.py": b"def idempotency_key(intent:\n    return 1\n"})
    assert d["score"] == 0 and len(d["tests"]) == 7
    assert all(t["score"] == 0 and "design.py does not load: SyntaxError at line 1" in t["output"] for t in d["tests"])
    assert "could not be graded" in d["output"]
    d = _grade(autograder_zip, tmp_path / "empty", {"notes.txt": b"I forgot the file"})
    assert d["score"] == 0 and all("no design.py in the submission" in t["output"] for t in d["tests"])


def test_run_autograder_still_writes_a_valid_file_when_grading_cannot_start(autograder_zip, tmp_path):
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    with zipfile.ZipFile(autograder_zip) as z:
        z.extractall(root / "source")
    (root / "source" / "run_autograder").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(PROTOLAB_AUTOGRADER_ROOT=str(root), PROTOLAB_PYTHON=str(tmp_path / "no-such-python"))
    proc = subprocess.run([str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "writing the fallback" in proc.stderr
    d = json.loads((root / "results" / "results.json").read_text())
    check_results(d)
    assert d["score"] == 0 and "could not run" in d["output"]
    shutil.rmtree(root)
