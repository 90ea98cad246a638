"""The README's opening commands, run as written on a fresh copy of the repository.

Slow (it builds virtual environments), so it runs once per CI run. The inner test run
that the README's second command starts skips this file (PROTOLAB_README_INNER=1), or it
would recurse.
"""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from ptyrun import Terminal

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)]


def test_the_readme_opens_with_a_demo_command_and_a_test_command():
    demo, tests = readme_commands()[:2]
    assert "pip install" in demo and "protolab demo" in demo
    assert "pip install" in tests and "pytest" in tests
    ci = (ROOT / ".ci" / "run").read_text()
    assert "README.md" in ci and "blocks[1]" in ci  # CI runs the README's test command itself
    assert "--run-slow" not in tests  # the README's loop is the quick one ...
    assert "pytest --run-slow -m slow" in ci  # ... and CI runs the slow set after it
    assert "pytest --run-slow -m slow" in (ROOT / "README.md").read_text()  # the README says how


def _fresh_copy(tmp_path: Path) -> Path:
    dest = tmp_path / "protolab"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    names = [n for n in files.decode().split("\0") if n]
    if not names:  # not a git checkout: copy the tree
        shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(".venv", "*.db", "__pycache__", ".git"))
        return dest
    for n in names:
        src = ROOT / n
        if src.is_file():
            (dest / n).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / n)
    return dest


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("PROTOLAB_README_INNER") == "1", reason="inside the README's own test run")
def test_the_readme_commands_work_as_written_on_a_fresh_copy(tmp_path):
    demo, tests = readme_commands()[:2]
    repo = _fresh_copy(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    env["PROTOLAB_README_INNER"] = "1"
    # As a person types it, at a terminal: it installs, then the TUI plays the run; q quits.
    t = Terminal(["bash", "-c", demo], cwd=repo, size=(120, 36), env=env)
    t.wait_for("State", "Events", "Messages", timeout=900)
    t.wait_for("finished", timeout=120)
    t.press("q")
    assert t.finish() == 0, t.text[-3000:]
    assert "Traceback" not in t.text and "the run is in protolab.db" in t.text
    assert (repo / "protolab.db").exists()
    (repo / "protolab.db").unlink()
    # Without a terminal (a CI log, a pipe) the same command runs the demo through and prints it.
    r = subprocess.run(["bash", "-c", demo], cwd=repo, env=env, capture_output=True, text=True, timeout=900,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "publish:R-1:T-2" in r.stdout and "Traceback" not in r.stderr
    assert "state digest sha256:" in r.stdout and "BROKEN" not in r.stdout
    assert (repo / "protolab.db").exists()
    # the installed package (not the checkout) carries its data: run from another folder
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r2 = subprocess.run([str(repo / ".venv/bin/protolab"), "run", "fan-out"], cwd=elsewhere, env=env, capture_output=True, text=True)
    assert r2.returncode == 0, r2.stderr
    # and the shipped samples resolve there too, as the README's hand-delivery shows
    cmds = [
        ["init", "--db", "run.db"],
        ["deliver", "--db", "run.db", "data/envelopes/late-failure.json", "--json"],
        ["machine", "check", "data/machines/task-v2.toml"],
    ]
    outs = []
    for c in cmds:
        r3 = subprocess.run([str(repo / ".venv/bin/protolab"), *c], cwd=elsewhere, env=env, capture_output=True, text=True)
        assert r3.returncode == 0, (c, r3.stderr)
        outs.append(r3.stdout)
    assert [d["decision"] for d in json.loads(outs[1])] == ["accepted", "accepted", "accepted", "late"]
    # an installed kit has its exercises (not their solutions): start one and check it, as a student does
    pl = str(repo / ".venv/bin/protolab")
    r4 = subprocess.run([pl, "exercise", "start", "1"], cwd=elsewhere, env=env, capture_output=True, text=True)
    assert r4.returncode == 0, r4.stderr
    r5 = subprocess.run([pl, "exercise", "check", "1"], cwd=elsewhere, env=env, capture_output=True, text=True)
    assert r5.returncode == 1 and "Traceback" not in r5.stderr, r5.stderr
    assert "not your grade" in " ".join(r5.stdout.split()) and "FAIL" in r5.stdout
    assert "task-v2" in outs[2]
    # and its labs: listed, and checked from the shell against a run
    r6 = subprocess.run([pl, "lab", "list", "--json"], cwd=elsewhere, env=env, capture_output=True, text=True)
    assert r6.returncode == 0 and len(json.loads(r6.stdout)) >= 10, r6.stderr
    subprocess.run([pl, "run", "--db", "lab03.db"], cwd=elsewhere, env=env, capture_output=True, check=True)
    r7 = subprocess.run([pl, "lab", "check", "3"], cwd=elsewhere, env=env, capture_output=True, text=True)
    assert r7.returncode == 1 and "hint:" in r7.stdout and "Traceback" not in r7.stderr, r7.stderr
    r = subprocess.run(["bash", "-c", tests], cwd=repo, env=env, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert re.search(r"\d+ passed", r.stdout)
