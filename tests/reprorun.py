"""Grade the kit's planted wrong answers and run every reproduce line the grader prints, as printed,
where it was printed (shared by tests/test_reproduce.py; ``python tests/reprorun.py 5`` prints a
table for one exercise).

A reproduce line reproduces its test's failure when, run with bash in the folder the grader ran in
(the installed ``protolab`` on PATH, no virtualenv activated), it exits 1 (every command the lines
use exits 1 on what it shows broken: ``check``, ``trace validate``, ``machine check``, ``replay``,
and the helpers ``protolab exercise try`` runs); a line that ends in ``protolab check`` for a failure
that names an invariant must show that invariant BROKEN (under the naive consumer ``check`` exits 1
for other rules too). Exit 2 is never a reproduction: the line itself is wrong (a file it names is not
there, a database of another scenario, a usage error) unless the refusal it prints is the one the
failure names (``machine check`` refusing the student's table: E_TERMINAL_EXIT); nor is a traceback."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the virtualenv protolab is installed in: its bin, never activated


def shell_env(home: Path | None = None) -> dict:
    """A user's shell after installing per the README: the virtualenv's bin on PATH (not activated:
    no VIRTUAL_ENV, no PYTHONPATH), wide lines so that names are never wrapped."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH", "PYTEST", "COV_"))}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "200"
    env.pop("PYTHONHASHSEED", None)
    if home is not None:
        env["HOME"] = str(home)
    return env


def planted(number: int | None = None) -> list[tuple[int, str, Path]]:
    """Every planted wrong answer: (exercise number, name, folder)."""
    out = []
    for sol in sorted(p for p in (ROOT / "solutions").iterdir() if p.name[:2].isdigit()):
        n = int(sol.name[:2])
        if number is not None and n != number:
            continue
        wrong = sol / "wrong"
        if wrong.is_dir():
            out += [(n, w.name, w) for w in sorted(wrong.iterdir()) if w.is_dir()]
    return out


@dataclass
class Line:
    test: str
    line: str
    code: int = -1
    out: str = ""
    reproduced: bool = False
    why: str = ""


@dataclass
class Graded:
    number: int
    name: str
    score: float = 0.0
    max_score: float = 0.0
    failing: list = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    stderr: str = ""


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


#: Exercises whose failures are answers to questions: their lines make the run a question is about and
#: print the table to read it in (feedback never gives the right answer; the run does), so such a line
#: reproduces by running; and a choice between words has no command at all.
LOOK_LINES = {7}


def judge_line(result: dict, code: int, out: str, number: int = 0) -> tuple[bool, str]:
    """Whether a reproduce line's run reproduced the failure of ``result`` (a test's JSON), and why not."""
    if "Traceback" in out:
        return False, "a traceback"
    if number in LOOK_LINES:
        return (code == 0, "" if code == 0 else f"exit status {code}: the run the question is about was not made")
    if code == 2:  # a refusal reproduces only the refusal the failure names (the student's file refused)
        said = re.findall(r"(?m)^error: (E_[A-Z_]+): ", out)
        if said and said[-1] in (result.get("message") or ""):
            return True, ""
        return False, f"exit status 2 ({said[-1] if said else 'no error line'}), not the refusal the failure names"
    if code not in (0, 1):
        return False, f"exit status {code}"
    names = set()
    for d in (result.get("witness"), result.get("signature")):
        if isinstance(d, dict) and isinstance(d.get("invariant"), str):
            names.add(d["invariant"])
    if names and "protolab check" in (result.get("reproduce") or ""):
        # a run judged by check: the invariant the failure names must show BROKEN (under the naive consumer
        # check exits 1 for other rules too, so its status alone says nothing of this failure)
        if any(name in ln and "BROKEN" in ln for name in names for ln in out.splitlines()):
            return True, ""
        if code == 1 and re.search(r"effects committed again|COMMITTED AGAIN|DIFFERENT things|NOT equal", out):
            return True, ""  # replay (or a probe) stopped the line before check: it showed the failure itself
        return False, f"no BROKEN {' or '.join(sorted(names))} in its output"
    if code == 1:
        return True, ""
    return False, "exit 0 and nothing BROKEN"


def grade_and_reproduce(number: int, name: str, folder: Path, work: Path) -> Graded:
    """Grade the planted answer ``folder`` (copied to ``work/class/NAME``) as an instructor does, then
    run each printed reproduce line in ``work``."""
    klass = work / "class"
    dest = klass / name
    shutil.copytree(folder, dest, ignore=shutil.ignore_patterns("expect.toml", "__pycache__"))
    env = shell_env()
    r = subprocess.run(["bash", "-c", f"protolab grade {number} class/{name} --json --course {ROOT}"], cwd=work,
                       env=env, capture_output=True, text=True, timeout=1800)
    assert r.returncode in (0, 1) and r.stdout.strip(), (r.returncode, r.stderr[-3000:])
    report = json.loads(r.stdout)[0]
    g = Graded(number, name, report["score"], report["max_score"], stderr=r.stderr)
    for t in report["tests"]:
        if t["passed"] or t.get("grader_error"):
            continue
        g.failing.append(t["name"])
        a = t.get("attachment") or {}
        if a.get("written"):
            g.written.append(a["written"])
        if not t.get("reproduce"):
            if number not in LOOK_LINES:
                g.lines.append(Line(t["name"], "", why="no reproduce line"))
            continue
        p = subprocess.run(["bash", "-c", t["reproduce"]], cwd=work, env=env, capture_output=True, text=True,
                           timeout=900, stdin=subprocess.DEVNULL)
        out = _ANSI.sub("", p.stdout + p.stderr)
        ok, why = judge_line(t, p.returncode, out, number)
        g.lines.append(Line(t["name"], t["reproduce"], p.returncode, out, ok, why))
    return g


if __name__ == "__main__":  # a table of every planted answer of one exercise (or all), for a person
    import tempfile

    only = int(sys.argv[1]) if len(sys.argv) > 1 else None
    for n, name, folder in planted(only):
        with tempfile.TemporaryDirectory() as tmp:
            g = grade_and_reproduce(n, name, folder, Path(tmp))
        print(f"ex{n} {name}: {g.score:g}/{g.max_score:g}, failing {', '.join(g.failing)}; wrote {g.written}")
        for ln in g.lines:
            mark = "ok " if ln.reproduced else "BAD"
            print(f"  {mark} {ln.test}: exit {ln.code} {ln.why}\n      {ln.line[:300]}")
            if not ln.reproduced:
                print("      " + "\n      ".join(ln.out.strip().splitlines()[-8:]))
        sys.stdout.flush()
