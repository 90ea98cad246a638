"""Issue 43, part 2: no command writes over what it reads.

Every command that writes a file goes through one helper (sim/files.py: ``written_whole(reads=...)``,
``check_output``): an output that is one of the command's inputs (the same path, a hard link, a symlink)
is refused with one line ``error: E_OUTPUT_IS_INPUT: ...``, exit 2, and nothing is written.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sim.errors import InputError
from sim.files import written_whole

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"


def cli(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd)


def refused(p) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: E_OUTPUT_IS_INPUT: "), p.stderr
    return lines[0]


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() or p.is_symlink()}


@pytest.fixture(scope="module")
def good_run(tmp_path_factory) -> bytes:
    db = tmp_path_factory.mktemp("run") / "good.db"
    p = cli("run", "--db", db, cwd=db.parent)
    assert p.returncode == 0, p.stderr
    return db.read_bytes()


@pytest.fixture
def folder(tmp_path, good_run) -> Path:
    (tmp_path / "good.db").write_bytes(good_run)
    (tmp_path / "trace.json").write_bytes((DATA / "traces" / "valid-trace.json").read_bytes())
    (tmp_path / "tiny.toml").write_bytes((DATA / "scenarios" / "publish-report.toml").read_bytes())
    (tmp_path / "env.json").write_bytes((DATA / "envelopes" / "duplicate.json").read_bytes())
    return tmp_path


# each command that writes a file, given its own input (or one of them) as the file to write
SAME_PATH = {
    "timeline": ["timeline", "--db", "good.db", "-o", "good.db"],
    "timeline, the second of two runs": ["timeline", "--db", "good.db", "--db", "g2.db", "-o", "g2.db"],
    "a2a export": ["a2a", "export", "--db", "good.db", "-o", "good.db"],
    "trace export": ["trace", "export", "--db", "good.db", "-o", "good.db"],
    "trace export, over the run's -wal": ["trace", "export", "--db", "good.db", "-o", "good.db-wal"],
    "trace diagram": ["trace", "diagram", "trace.json", "-o", "trace.json"],
    "shrink": ["shrink", "--db", "good.db", "--scenario", "tiny.toml", "-o", "tiny.toml"],
    "explore": ["explore", "tiny.toml", "--faults", "duplicate", "-o", "tiny.toml"],
    "lab submit, over its run": ["lab", "submit", "4", "-o", "good.db", "--db", "good.db"],
    "lab submit, over its progress": ["lab", "submit", "4", "-o", "good.db", "--db", "g2.db", "--progress", "good.db"],
    "grade --csv": ["grade", "1", "good.db", "--csv", "good.db"],
    "run --db": ["run", "tiny.toml", "--db", "tiny.toml"],
    "deliver --db": ["deliver", "env.json", "--db", "env.json"],
    "artifact put --db": ["artifact", "put", "env.json", "--db", "env.json"],
    "machine load --db": ["machine", "load", "tiny.toml", "--db", "tiny.toml"],
}


@pytest.mark.parametrize("argv", SAME_PATH.values(), ids=SAME_PATH.keys())
def test_every_command_refuses_to_write_over_its_input(folder, argv):
    if "g2.db" in argv:
        (folder / "g2.db").write_bytes((folder / "good.db").read_bytes())
    if "good.db-wal" in argv:
        (folder / "good.db-wal").write_bytes(b"")  # an empty -wal beside the run, as a reader may leave it
    before = files(folder)
    refused(cli(*argv, cwd=folder))
    assert files(folder) == before, "something was written"


@pytest.mark.parametrize("how", ["hard link", "symlink", "symlink to the absolute path"])
@pytest.mark.parametrize("command", [["timeline"], ["a2a", "export"], ["trace", "export"]])
def test_another_name_for_the_input_is_refused_too(folder, command, how):
    if how == "hard link":
        os.link(folder / "good.db", folder / "other.html")
    elif how == "symlink":
        os.symlink("good.db", folder / "other.html")
    else:
        os.symlink(folder / "good.db", folder / "other.html")
    before = files(folder)
    line = refused(cli(*command, "--db", "good.db", "-o", "other.html", cwd=folder))
    assert "other.html" in line and "good.db" in line and "another name" in line
    assert files(folder) == before and (folder / "other.html").read_bytes() == before["good.db"]


@pytest.mark.parametrize("command", [["timeline"], ["a2a", "export"], ["trace", "export"]])
def test_an_output_beside_the_input_is_written_whole(folder, command):
    p = cli(*command, "--db", "good.db", "-o", "out.txt", cwd=folder)
    assert p.returncode == 0, p.stderr
    assert (folder / "out.txt").stat().st_size > 0
    assert not [n for n in os.listdir(folder) if ".partial-" in n]


def test_the_helper_refuses_before_opening_anything(tmp_path):
    src = tmp_path / "in.json"
    src.write_text("input")
    os.link(src, tmp_path / "out.json")
    with pytest.raises(InputError) as e:
        with written_whole(tmp_path / "out.json", reads=[src]) as fh:
            fh.write("over it")
    assert e.value.code == "E_OUTPUT_IS_INPUT"
    assert src.read_text() == "input" and sorted(os.listdir(tmp_path)) == ["in.json", "out.json"]
    with written_whole(tmp_path / "new.json", reads=[src, None]) as fh:  # another file: written
        fh.write("new")
    assert (tmp_path / "new.json").read_text() == "new"


# ---------------------------------------------------------------------------- the course's writers (issue 43, part 2)

EX1 = ROOT / "exercises" / "01-envelope-design"


def _link(how: str, target: Path, name: Path) -> None:
    if how == "hard link":
        try:
            os.link(target, name)
        except OSError as e:  # another file system: no hard link can be made there
            pytest.skip(f"no hard link from {name.parent} to {target}: {e}")
    else:
        os.symlink(target, name)


@pytest.fixture
def klass(tmp_path) -> Path:
    """A class of one: class/alice/ holding exercise 1's design.py."""
    (tmp_path / "class" / "alice").mkdir(parents=True)
    (tmp_path / "class" / "alice" / "design.py").write_bytes((EX1 / "design.py").read_bytes())
    return tmp_path


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): (os.readlink(p).encode() if p.is_symlink() else p.read_bytes())
            for p in sorted(folder.rglob("*")) if p.is_file() or p.is_symlink()}


@pytest.mark.parametrize("how", ["same path", "hard link", "symlink"])
def test_grade_csv_over_a_submitted_file_is_refused(klass, how):
    sub = klass / "class" / "alice" / "design.py"
    out = sub if how == "same path" else klass / "grades.csv"
    if how != "same path":
        _link(how, sub, out)
    before = _tree(klass)
    line = refused(cli("grade", "1", "class", "--csv", out, "--sandbox", "none", cwd=klass))
    assert "--csv" in line and "design.py" in line
    assert _tree(klass) == before


@pytest.mark.parametrize("how", ["same path", "hard link", "symlink"])
def test_grade_gradescope_over_a_submitted_file_is_refused(klass, how):
    """--gradescope FOLDER writes FOLDER/STUDENT/results.json: never over a file a submission holds."""
    alice = klass / "class" / "alice"
    if how == "same path":  # the submissions' own folder, where alice submitted a results.json
        (alice / "results.json").write_text('{"score": 100}\n')
        gs = klass / "class"
    else:
        gs = klass / "gs"
        (gs / "alice").mkdir(parents=True)
        _link(how, alice / "design.py", gs / "alice" / "results.json")
    before = _tree(klass)
    line = refused(cli("grade", "1", "class", "--gradescope", gs, "--sandbox", "none", "--course", ROOT, cwd=klass))
    assert "--gradescope" in line and "results.json" in line
    assert _tree(klass) == before


@pytest.mark.parametrize("how", ["same path", "hard link", "symlink"])
def test_autograder_zip_over_a_file_it_packs_is_refused(tmp_path, how):
    packed = EX1 / "exercise.toml"
    kept = packed.read_bytes()
    out = packed if how == "same path" else tmp_path / "autograder.zip"
    if how != "same path":
        _link(how, packed, out)
    before = _tree(tmp_path)
    line = refused(cli("autograder", "1", "-o", out, "--course", ROOT, cwd=tmp_path))
    assert "exercise.toml" in line
    assert _tree(tmp_path) == before and packed.read_bytes() == kept


@pytest.mark.parametrize("how", ["hard link", "symlink"])
def test_kit_rubric_over_the_rubric_it_shows_is_refused(tmp_path, how):
    rubric = ROOT / "solutions" / "01-envelope-design" / "rubric.toml"
    kept = rubric.read_bytes()
    _link(how, rubric, tmp_path / "mine.toml")
    before = _tree(tmp_path)
    refused(cli("kit", "rubric", "1", "-o", tmp_path / "mine.toml", "--course", ROOT, cwd=tmp_path))
    assert _tree(tmp_path) == before and rubric.read_bytes() == kept


def test_a_partial_file_a_killed_writer_left_is_swept_by_the_next_write(tmp_path):
    """kill -9 leaves .NAME.partial-PID behind (nothing can remove it then): the next write of NAME
    removes those of processes that no longer exist, and leaves a live one's."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".out.json.partial-{dead.pid}"
    stale.write_text("half")
    (tmp_path / f".out.json.partial-{dead.pid}-wal").write_text("its side file")
    work = tmp_path / f".out.json.partial-{dead.pid}-tmpab12"  # a working folder (lab submit's copy of the run)
    work.mkdir()
    (work / "run.db").write_text("a copy")
    live = tmp_path / f".out.json.partial-{os.getppid()}"
    live.write_text("another writer, still at work")
    (tmp_path / ".out.json.partial-notapid").write_text("not ours to judge")
    with written_whole(tmp_path / "out.json") as fh:
        fh.write("whole")
    assert sorted(os.listdir(tmp_path)) == sorted([live.name, ".out.json.partial-notapid", "out.json"])
