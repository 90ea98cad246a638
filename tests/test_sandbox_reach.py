"""What of the kit a student's code can reach, and what of the student's module reaches the grader.

* **The kit's answer is out of reach.** Exercise 3 promises 0 for a consume() that hands its work to
  the kit's own intake. A name-based guard cannot win that, so a host's box holds only the files the
  host itself needs and the plain-data interface its kind of file is handed
  (``sim.course.host.INTERFACES``), and the host imports nothing of the engine: a submission that
  takes ``sim.intake`` from ``sys.modules`` under a name built at run time, imports it by a computed
  name, or reads its source by a computed path (``open`` + ``exec``,
  ``importlib.util.spec_from_file_location``, walking ``sim.__path__``) finds nothing to run. Each of
  these scored 110/110 before (each delegates every delivery to ``sim.intake.decide`` and converts
  the verdict back); through ``protolab grade 3 FOLDER --json`` each now scores 0 with its reason,
  the model answer full marks in the same batch.
* **Correct code is graded on its behaviour only.** Nothing a module holds at import is sent to the
  grader unless a judge asks for that name, and then a small plain value: a correct answer with a
  module-level ``2 ** 20000`` or a 24 MB string gets full marks.
* **The private pipe is the host's.** A submission writing forged protocol lines on descriptors 0 to
  255 and ``sys.__stdout__`` never reaches the grader (full marks, its prints dropped); one that finds
  the pipe and writes on it is told so (0, "wrote on the grader's private answer pipe"), never
  "None".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sim.course import sandbox
from sim.course.host import INTERFACES, kit_files, kit_modules
from sim.course.kit import copy_project

ROOT = Path(__file__).resolve().parents[1]
EX1, EX3 = "01-envelope-design", "03-deduplicating-consumer"

# ------------------------------------------------------------------------- exercise 3: the kit's intake

# every delivery handed to the kit's intake, its verdict turned back into consume's answer (plain data)
_DELEGATE = '''

def consume(delivery, task, recorded, allowed, missing_refs):
    intake = _kit("in" + "take")
    envelope = sys.modules["sim.envelope"]
    env = envelope.Envelope(**{**delivery, "evidence_refs": tuple(delivery.get("evidence_refs", ()))})
    state = intake.TaskState
    view = None if task is None else intake.TaskView(**{**task, "state": state(task["state"])})
    prior = [intake.IntentRecord(**r) for r in recorded]
    v = getattr(intake, "de" + "cide")(env, view, prior, allowed.rules, missing_refs)
    move = None if v.move is None else {"from": v.move.from_state.value, "to": v.move.to_state.value}
    return {"decision": v.decision.value, "reason": v.reason, "code": v.code, "move": move, "create": v.create,
            "lease": v.grant_lease, "reconcile": v.needs_reconciliation,
            "duplicate_of": v.duplicate_of.message_id if v.duplicate_of else None,
            "conflict_with": v.conflict_with.message_id if v.conflict_with else None}
'''
_EXEC = '''
_DONE = {}


def _exec(path):
    if path not in _DONE:
        import types
        mod = types.ModuleType("sim._" + "copy")
        mod.__package__ = "sim"
        sys.modules[mod.__name__] = mod
        exec(compile(open(path).read(), path, "exec"), mod.__dict__)
        _DONE[path] = mod
    return _DONE[path]
'''
#: name -> (decide.py, words every test's message must hold)
BYPASSES = {
    "sys-modules-by-computed-name": (
        "import sys\nimport sim.envelope\n\n\ndef _kit(name):\n    return sys.modules['sim.' + name]\n" + _DELEGATE,
        ["KeyError", "sim.intake"]),
    "import-by-computed-name": (
        "import sys, importlib\nimport sim.envelope\n\n\ndef _kit(name):\n"
        "    return importlib.import_module('.'.join(['sim', name]))\n" + _DELEGATE,
        ["No module named 'sim.intake'", "the kit's engine is not available"]),
    "exec-source-by-computed-path": (
        "import os, sys\nimport sim.envelope\n" + _EXEC + "\n\ndef _kit(name):\n"
        "    return _exec(os.path.join(os.path.dirname(sim.__file__), name + '.py'))\n" + _DELEGATE,
        ["tried to read", "sim/intake.py", "the kit's own code"]),
    "spec-from-file-location": (
        "import os, sys, importlib.util\nimport sim.envelope\n_DONE = {}\n\n\ndef _kit(name):\n"
        "    if name not in _DONE:\n"
        "        path = os.path.join(os.path.dirname(sys.modules['sim'].__file__), name + '.py')\n"
        "        spec = importlib.util.spec_from_file_location('sim._' + name + '_copy', path)\n"
        "        mod = importlib.util.module_from_spec(spec)\n        sys.modules[spec.name] = mod\n"
        "        spec.loader.exec_module(mod)\n        _DONE[name] = mod\n    return _DONE[name]\n" + _DELEGATE,
        ["tried to read", "sim/intake.py", "the kit's own code"]),
    "walks-sim-path": (
        "import os, sys\nimport sim.envelope\n" + _EXEC + "\n\ndef _kit(name):\n    for folder in sim.__path__:\n"
        "        for f in sorted(os.listdir(folder)):\n            if f.startswith(name[:4]) and f.endswith('.py'):\n"
        "                return _exec(os.path.join(folder, f))\n" + _DELEGATE,
        ["tried to list", "/sim", "the kit's own code"]),
}


def fallback_runs_here() -> bool:
    return not hasattr(os, "geteuid") or os.geteuid() != 0 or sandbox.sandbox_user() is not None


def _skip_unless(fallback: bool) -> None:
    if not fallback and sandbox.box().kind != "bubblewrap":
        pytest.skip(f"no bubblewrap here ({sandbox.describe()}); the fallback case covers this machine")
    if fallback and not fallback_runs_here():
        pytest.skip("the grader is root and no unprivileged user can run this Python: the fallback refuses to run "
                    "students' code here (tests/test_fail_closed.py)")


def _grade(course: Path, which: str, klass: Path, *, fallback: bool) -> list[dict]:
    """``protolab grade N CLASS --json`` as an instructor runs it, from the course's own copy of sim."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PROTOLAB_"))}
    args = [sys.executable, "-m", "sim", "grade", which, str(klass), "-j", "2", "--json"]
    if fallback:
        env["PROTOLAB_SANDBOX"] = "fallback"
        args += ["--sandbox", "none"]
    done = subprocess.run(args, cwd=course, env=env, capture_output=True, text=True, timeout=1800, start_new_session=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout)


def _tree(root: Path) -> dict:
    import hashlib

    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


@pytest.mark.parametrize("fallback", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["bubblewrap", "fallback"])
def test_exercise_3s_code_cannot_reach_the_kits_intake_by_a_computed_name_or_path(fallback, tmp_path):
    _skip_unless(fallback)
    course = tmp_path / "course"
    copy_project(ROOT, course, solutions=[EX3])
    klass = tmp_path / "class"
    (klass / "solution").mkdir(parents=True)
    shutil.copy(course / "solutions" / EX3 / "decide.py", klass / "solution" / "decide.py")
    for name, (source, _words) in BYPASSES.items():
        (klass / name).mkdir()
        (klass / name / "decide.py").write_text(source, encoding="utf-8")
    before = _tree(course)
    rows = {r["student"]: r for r in _grade(course, "3", klass, fallback=fallback)}
    assert sorted(rows) == sorted(["solution", *BYPASSES])
    sol = rows["solution"]
    assert sol["score"] == sol["max_score"] == 110, [t["message"] for t in sol["tests"] if not t["passed"]]
    wrong = []
    for name, (_source, words) in BYPASSES.items():
        row = rows[name]
        if row["score"] != 0 or any(t["points"] for t in row["tests"]):
            wrong.append((name, row["score"]))
            continue
        for t in row["tests"]:
            if t["grader_error"] or not all(w in t["message"] for w in words):
                wrong.append((name, t["name"], t["message"][:300]))
                break
    assert not wrong, wrong
    assert _tree(course) == before  # the kit's files were read by nobody's hand but the grader's, and changed by none


# ------------------------------------------------------------------------- the host and its box, directly


@pytest.mark.parametrize("kind", sorted(INTERFACES))
def test_a_host_imports_no_engine_module_only_its_own_and_its_interface(kind, tmp_path):
    """After the host started and imported the student's file, the kit's modules in its
    ``sys.modules`` are the host's own and the interface of its kind: never the engine (the intake,
    the runtime, the planner, the design, the machine, the consumer, the invariants)."""
    from sim.course.remote import RemoteModule

    (tmp_path / "mine.py").write_text("import sys\n\n\ndef kit():\n"
                                      "    return sorted(m for m in sys.modules if m == 'sim' or m.startswith('sim.'))\n")
    mod = RemoteModule(tmp_path / "mine.py", kind, processes=1)
    try:
        loaded = mod.call("kit")
    finally:
        mod.close()
    assert loaded == sorted(kit_modules(kind))
    for engine in ("sim.intake", "sim.runtime", "sim.planner", "sim.design", "sim.machine", "sim.consumer",
                   "sim.invariants", "sim.policy", "sim.plugins", "sim.course.judges", "sim.course.remote"):
        assert engine not in loaded
    if kind == "keys":  # exercise 2 writes its own digests: the kit's are its answer
        assert "sim.digest" not in loaded


@pytest.mark.skipif(sandbox.box().kind != "bubblewrap", reason=f"no bubblewrap here ({sandbox.describe()})")
@pytest.mark.parametrize("kind", ["intake", "keys"])
def test_the_box_holds_of_the_sim_package_only_the_hosts_files_and_its_interface(kind, tmp_path):
    """The operating-system wall alone (no audit hook): walking the sim folder inside the box finds
    the files :func:`sim.course.host.kit_files` names for the kind, nothing else."""
    (tmp_path / "decide.py").write_text("x = 1\n")
    sim_dir = str(ROOT / "sim")
    code = ("import os, sys\nd = sys.argv[1]\n"
            "print(sorted(os.path.relpath(os.path.join(p, f), d) for p, _, fs in os.walk(d) for f in fs))\n")
    argv, env, cwd, fds = sandbox.box_command(tmp_path, code, [sim_dir], main=str(tmp_path / "decide.py"), kind=kind)
    try:
        done = subprocess.run(argv, env=env, cwd=cwd, pass_fds=fds, capture_output=True, text=True, timeout=120)
    finally:
        for fd in fds:
            os.close(fd)
    assert done.returncode == 0, done.stderr
    seen = eval(done.stdout)  # noqa: S307 - our own output
    assert seen == sorted(kit_files(kind, sim_dir))
    assert "intake.py" not in seen and "consumer.py" not in seen and "design.py" not in seen
    assert ("digest.py" in seen) == (kind == "intake")


def test_a_judge_gets_a_modules_value_only_by_name_and_only_a_small_one(tmp_path):
    from sim.course.remote import RemoteModule, TooLarge

    (tmp_path / "mine.py").write_text("HUGE = 2 ** 20000\nLONG = 'x' * 24_000_000\nSCHEME = 'jcs-v2'\n\n\n"
                                      "def f():\n    return 1\n")
    mod = RemoteModule(tmp_path / "mine.py", "design", processes=1)
    try:
        assert mod.names.get("f") == "function" and mod.names["SCHEME"] == "jcs-v2"
        assert mod.names.get("nothing") is None and "nothing" not in mod.names
        huge, long = mod.names["HUGE"], mod.names["LONG"]
        assert isinstance(huge, TooLarge) and str(huge) == "an int of 20,001 bits"
        assert isinstance(long, TooLarge) and str(long) == "a str of 24,000,000 characters"
        assert mod.call("f") == 1 and mod.fatal is None
    finally:
        mod.close()


# ------------------------------------------------------------------------- behaviour only; the pipe

_FORGED = ('{"violation": null}\\n{"ready": true}\\n{"names": {}}\\n{"value": null}\\n{"fatal": true, "error": null}\\n'
           '{"error": null, "code": "E_SANDBOX"}\\n')
_LOW_FDS = ("import os as _os, sys as _sys\n\n\ndef _forge():\n    for _fd in range(256):\n        try:\n"
            f"            _os.write(_fd, b'{_FORGED}')\n        except OSError:\n            pass\n"
            f"    _sys.__stdout__.write('{_FORGED}')\n    _sys.__stdout__.flush()\n\n\n_forge()\n")


def _with_every_call_forging(model: str, first_def: str) -> str:
    """``model`` whose every public function forges first (the corpus's wrap, by hand)."""
    return _LOW_FDS + model + ("\n\nfor _n, _f in list(globals().items()):\n"
                               "    if callable(_f) and not _n.startswith('_') and getattr(_f, '__module__', None) == __name__:\n"
                               "        globals()[_n] = (lambda f: lambda *a, **k: (_forge(), f(*a, **k))[1])(_f)\n")


@pytest.mark.parametrize("fallback", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["bubblewrap", "fallback"])
def test_correct_code_is_graded_on_its_behaviour_whatever_it_holds_or_writes(fallback, tmp_path):
    """Exercise 1's model answer with a module-level ``2 ** 20000``, with a 24 MB string, and one that
    writes forged protocol lines on descriptors 0-255 and sys.__stdout__ as it imports and in every
    call: full marks each (they scored 0 as "exit status 1 while importing it", "an endless loop"
    and "None"); one that finds the private pipe and writes on it: 0, told so."""
    _skip_unless(fallback)
    course = tmp_path / "course"
    copy_project(ROOT, course, solutions=[EX1])
    model = (course / "solutions" / EX1 / "design.py").read_text(encoding="utf-8")
    assert "from __future__" not in model  # code put before it stays valid
    klass = tmp_path / "class"
    cases = {
        "solution": model,
        "big-int": model + "\nX = 2 ** 20000\n",
        "big-str": model + "\nBIG = 'x' * 24_000_000\n",
        "forges-on-low-fds": _with_every_call_forging(model, "def idempotency_key"),
    }
    for name, text in cases.items():
        (klass / name).mkdir(parents=True)
        (klass / name / "design.py").write_text(text, encoding="utf-8")
    from sim.course.corpus import HOSTILE_CODE

    (klass / "forges-on-the-pipe").mkdir()
    (klass / "forges-on-the-pipe" / "design.py").write_text(HOSTILE_CODE["forges-on-the-pipe"][1] + model)
    rows = {r["student"]: r for r in _grade(course, "1", klass, fallback=fallback)}
    for name in cases:
        row = rows[name]
        assert row["score"] == row["max_score"] == 70, (name, [t["message"] for t in row["tests"] if not t["passed"]])
    forged = rows["forges-on-the-pipe"]
    assert forged["score"] == 0
    for t in forged["tests"]:
        assert "wrote on the grader's private answer pipe" in t["message"] and not t["grader_error"], t["message"]
    for row in rows.values():
        for t in row["tests"]:
            assert t["message"].strip() not in ("None", "null") and not t["message"].endswith(": None")


def test_a_line_with_the_token_may_only_claim_what_the_students_code_could_cause():
    """Code that walks the host's frames can read the token; a line it forges with it is still refused
    when it claims a code the host never sends (the grader's own trouble: a broken exercise file, no
    sandbox), so a submission cannot pass its failure off as the grader's."""
    from sim.course.remote import HOST_CODES, _reply

    token = b"t0k"
    assert _reply(b't0k {"error": "x raised", "code": "E_DESIGN_RAISED"}', token) == \
        {"error": "x raised", "code": "E_DESIGN_RAISED"}
    for code in ("E_EXERCISE_FILE", "E_NO_SANDBOX", "E_TIMEOUT", "internal", ""):
        assert code not in HOST_CODES
        assert _reply(b't0k {"error": "your files could not be tested", "code": "%s", "fatal": true}' % code.encode(),
                      token) is None
    assert _reply(b'{"value": 1}', token) is None and _reply(b'zzz {"value": 1}', token) is None
