"""The document runner: every shell block the kit shows, run as a reader runs it, and judged by what
its own text says (tests/test_docs_run.py; ``python tests/docrun.py [PATH...]`` prints what it ran).

What is collected
-----------------
* Fenced blocks of ``README.md``, ``docs/*.md``, ``labs/*/README.md`` and ``exercises/*/README.md``
  whose info string is a shell (``bash``, ``sh``, ``shell``, ``console``), or that have none and whose
  first line starts with ``protolab `` (a block written without its language).
* The starters' command lines (``exercises/*/`` files other than the README and the exercise's own
  tomls): a comment or docstring line that is a ``protolab ...`` command on its own, a command set off
  at the end of a line by two spaces or more (``Check it with:   protolab machine check machine.toml``),
  and a command in backquotes.

A command is one line (a trailing ``\\`` joins the next); what follows `` # `` is its comment.

Where it runs
-------------
Each document runs top to bottom in a fresh folder of its own, every block after the one before in
the same folder (a block may use the files an earlier one wrote), each command with bash, with the
virtualenv's ``bin`` on PATH and nothing activated (no VIRTUAL_ENV, no PYTHONPATH):

* ``README.md`` and ``docs/``: a fresh copy of the checkout (its tracked files), as a reader who cloned
  it and installed protolab;
* a lab's README: an empty folder where the lab has been played by its reference path (``lab.toml``'s
  ``[[reference]]``, as ``tests/test_lab_runs.py`` plays it), as a student who played it;
* an exercise's README and its starter: a copy of the exercise's folder (what ``exercise start``
  makes), twice: with the starter, and with the model answer (``solutions/NN-slug/``) in its place.

What a command must do (its comment is its claim)
-------------------------------------------------
* Exit 0, unless its comment says ``exit N`` (or ``exits N``); a command a starter names in a sentence
  (in backquotes) claims no status: it must run, giving 0 or a verdict's 1. A clause of the comment (the text
  between ``;``) that says ``on the starter`` or ``on a right answer`` holds for that variant only
  (a document that is not an exercise's is read as the starter: what ``exercise start`` copies).
* Each thing its comment names appears in what it prints: an UPPER_CASE name with an underscore (an
  invariant, a code), a lower_case one (an event, a state), an id (``T-1``, ``M-3``), a backquoted word.
  In a clause that says ``breaks``, an invariant it names must show BROKEN on a line; in one that says
  ``holds``, ``holds``.
* A file it names with ``-o``, ``--out``, ``--output``, ``--csv``, ``--gradescope`` or (``run``, ``init``)
  ``--db`` exists once it exited 0.
* Never a traceback; an exit status 2 (a refusal) is one line ``error: CODE: ...`` on stderr.

Commands that do not end by themselves get a bounded check rather than a skip: the TUI (``demo``,
``tui``, ``lab start``, a bare ``lab``) runs in a pseudo-terminal until its panes show, then ``q``; a
server (``--serve``, ``browse``) listens on a free port (``--port 0`` is added), its page is fetched,
then Ctrl-C; ``--watch`` runs until it says it is watching, then Ctrl-C. Each must exit 0.

A block that cannot run headless at all carries a marker on the line above its fence:
``<!-- not-run: REASON -->``. Every marker must give a reason; the runner counts and lists them.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reprorun import ROOT, shell_env  # noqa: E402

_ANSI = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][A-Za-z0-9]|\x1b[=>NOMDEHc78]")
SHELLS = {"bash", "sh", "shell", "console"}
NOT_RUN = re.compile(r"(?m)^[ \t]*<!--\s*not-run:(.*?)-->", re.S)  # on a line of its own
STARTER_SKIP = {"README.md", "exercise.toml", "hints.toml"}


@dataclass
class Command:
    line: str  # as the document shows it (continuations joined)
    comment: str
    where: str  # file:line
    prose: bool = False  # named in a sentence (`protolab ...` in backquotes): it claims no exit status

    @property
    def cmd(self) -> str:
        return self.line


@dataclass
class Block:
    doc: Path
    lineno: int
    commands: list[Command]
    not_run: str | None = None  # the marker's reason, when the block is marked


@dataclass
class Ran:
    command: Command
    variant: str
    code: int | None = None
    out: str = ""
    problems: list[str] = field(default_factory=list)
    how: str = "run"  # run, tui, serve, watch, skipped (quick mode)


# ------------------------------------------------------------------------------------------ reading


def split_comment(line: str) -> tuple[str, str]:
    """(command, comment): the comment is what follows an unquoted `` #``."""
    quote = None
    i = 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and i > 0 and line[i - 1] in " \t":
            return line[:i].rstrip(), line[i + 1:].strip()
        i += 1
    return line.rstrip(), ""


def _commands(lines: list[str], first: int, doc: Path) -> list[Command]:
    out, buf, start = [], "", first
    for k, raw in enumerate(lines):
        text = raw.rstrip()
        if not buf:
            start = first + k
        if text.startswith("$ "):
            text = text[2:]
        if text.endswith("\\") and not text.lstrip().startswith("#"):
            buf += text[:-1] + " "
            continue
        text = buf + text
        buf = ""
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        cmd, comment = split_comment(text)
        out.append(Command(cmd.strip(), comment, f"{doc.relative_to(ROOT)}:{start}"))
    return out


def blocks_of(doc: Path) -> list[Block]:
    """The shell blocks of a Markdown document, each with its not-run marker if it has one."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^(\s*)(`{3,}|~{3,})\s*([\w-]*)", lines[i])
        if not m:
            i += 1
            continue
        fence, info, start = m.group(2), m.group(3).lower(), i
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        body = lines[i + 1:j]
        first = next((b.strip() for b in body if b.strip()), "")
        if info in SHELLS or (not info and first.startswith(("protolab ", "$ protolab "))):
            above = "\n".join(lines[max(0, start - 3):start])
            marks = NOT_RUN.findall(above)
            out.append(Block(doc, start + 1, _commands(body, start + 2, doc),
                             " ".join(marks[-1].split()) if marks else None))
        i = j + 1
    return out


_CMD_IN_TEXT = re.compile(r"`(protolab [^`]+)`|(?:^|\s{2,})(protolab [^'\"`]+?)\s*$")


def starter_blocks(folder: Path) -> list[Block]:
    """The command lines of an exercise's starter files (one block per file)."""
    out = []
    for f in sorted(folder.iterdir()):
        if f.name in STARTER_SKIP or not f.is_file() or f.suffix not in (".py", ".toml", ".json"):
            continue
        cmds = []
        for n, raw in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            text = raw.strip().lstrip("#").strip()
            if text.startswith("protolab "):
                found = [text]
            else:
                found = [a or b for a, b in _CMD_IN_TEXT.findall(raw.strip().lstrip("#").rstrip())]
            for c in found:
                cmd, comment = split_comment(c)
                cmds.append(Command(cmd.strip(), comment, f"{f.relative_to(ROOT)}:{n}", prose=f"`{c}`" in raw))
        if cmds:
            out.append(Block(f, 1, cmds))
    return out


def documents() -> list[Path]:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    docs += sorted((ROOT / "labs").glob("*/README.md")) + sorted((ROOT / "exercises").glob("*/README.md"))
    return docs


def all_blocks() -> list[Block]:
    out = []
    for d in documents():
        out += blocks_of(d)
    for ex in sorted((ROOT / "exercises").iterdir()):
        if ex.is_dir():
            out += starter_blocks(ex)
    return out


# ------------------------------------------------------------------------------------------ claims


_UPPER = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")
_LOWER = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
_ID = re.compile(r"\b[A-Z]-\d+\b")
_TICKED = re.compile(r"`([^`]+)`")
_EXIT = re.compile(r"\bexits? (\d+)\b")
VARIANT_WORDS = {"starter": "on the starter", "solution": "on a right answer"}


@dataclass
class Claims:
    exit: int = 0
    names: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    holding: list[str] = field(default_factory=list)


def claims(comment: str, variant: str) -> Claims:
    """What a command's comment claims for ``variant`` (``starter`` or ``solution``)."""
    c = Claims()
    for clause in comment.split(";"):
        scoped = [v for v, words in VARIANT_WORDS.items() if words in clause]
        if scoped and variant not in scoped:
            continue
        for m in _EXIT.finditer(clause):
            c.exit = int(m.group(1))
        names = _UPPER.findall(clause) + _LOWER.findall(clause) + _ID.findall(clause) + _TICKED.findall(clause)
        for n in dict.fromkeys(names):
            if re.search(r"\bbreaks?\b|\bbroken?\b", clause) and _UPPER.fullmatch(n) and not n.startswith("E_"):
                c.broken.append(n)
            elif re.search(r"\bholds?\b", clause) and _UPPER.fullmatch(n) and not n.startswith("E_"):
                c.holding.append(n)
            else:
                c.names.append(n)
    return c


_WRITES = re.compile(r"(?:^|\s)(?:-o|--out|--output|--csv|--gradescope)[ =](\S+)")
_DB = re.compile(r"(?:^|\s)--db[ =](\S+)")


def files_written(cmd: str) -> list[str]:
    """The files a command says it writes (each part of an && chain)."""
    out = []
    for part in re.split(r"&&|;", cmd):
        words = part.split()
        out += _WRITES.findall(part)
        if len(words) > 1 and words[0] == "protolab" and words[1] in ("run", "init"):
            out += _DB.findall(part)
    return out


def judge(cmd: Command, variant: str, code: int, out: str, folder: Path) -> list[str]:
    """What is wrong with one command's run, by its own text (empty: it does what it says)."""
    c = claims(cmd.comment, variant)
    problems = []
    if "Traceback" in out:
        problems.append("printed a traceback")
    if cmd.prose and not cmd.comment:
        if code not in (0, 1):  # a command named in a sentence claims only that it works: a verdict, not a refusal
            problems.append(f"exit status {code}; a command a sentence names must run (0, or 1 for a verdict)")
    elif code != c.exit:
        problems.append(f"exit status {code}, the text says {c.exit}")
    if code == 2 and not re.search(r"(?m)^error: E_[A-Z_]+: ", out):
        problems.append("exit 2 without a line 'error: CODE: ...'")
    flat = " ".join(out.split())
    for n in c.names:
        if n not in out and n not in flat:
            problems.append(f"the text names {n!r}, which it does not print")
    lines = out.splitlines()
    for n in c.broken:
        if not any(n in ln and "BROKEN" in ln for ln in lines):
            problems.append(f"the text says {n} breaks; no line shows it BROKEN")
    for n in c.holding:
        if not any(n in ln and "holds" in ln for ln in lines):
            problems.append(f"the text says {n} holds; no line shows it holding")
    if code == 0:
        for f in files_written(cmd.cmd):
            if not (folder / f).exists():
                problems.append(f"it should have written {f}")
    return problems


# ------------------------------------------------------------------------------------------ running


def _plain(s: str) -> str:
    return _ANSI.sub("", s)


def kind(cmd: str) -> str:
    """run, tui, serve or watch: how a command is run (bounded, for those that do not end by themselves)."""
    words = cmd.split()
    if "&&" in words or ";" in cmd or len(words) < 2 or words[0] != "protolab":
        return "run"
    if "--watch" in words:
        return "watch"
    if "--serve" in words or words[1] == "browse":
        return "serve"
    if words[1] in ("demo", "tui") or (words[1] == "lab" and (len(words) == 2 or words[2] == "start")):
        return "tui"
    return "run"


#: Commands slow enough to leave to the slow set (the quick loop skips them; the slow set runs everything).
SLOW = re.compile(r"^protolab (exercise (check|hint)|grade|kit|autograder|bench|lab (submit|status)|compare)\b")


#: What a TUI shows once its panes are drawn: the run screen's Messages pane, the workshop's two sides.
TUI_DRAWN = ("Messages", "naive: last write wins")


def _tui(cmd: Command, folder: Path, env: dict, variant: str) -> tuple[int, str]:
    """The TUI in a pseudo-terminal: wait until its panes are drawn and what the comment names is on the
    screen (a live run plays on: an invariant that breaks shows BROKEN when it does), then q."""
    from ptyrun import Terminal

    c = claims(cmd.comment, variant)
    t = Terminal(["bash", "-c", cmd.cmd], cwd=folder, size=(160, 45), env=env)

    def shown() -> bool:
        text = t.text
        if not any(a in text for a in TUI_DRAWN):
            return False
        lines = text.splitlines()
        return all(n in text for n in c.names) and all(any(n in ln and "BROKEN" in ln for ln in lines)
                                                       for n in c.broken)

    deadline = time.monotonic() + 240  # a guard against hanging; the wait is on what the screen shows
    while not shown() and t.proc.poll() is None and time.monotonic() < deadline:
        t.read(0.3)
    if not shown():
        t.proc.kill()
        t.proc.wait()
        return -1, t.text + "\n[the screen never showed its panes and what the text names]"
    t.press("q")
    try:
        code = t.finish(timeout=60)
    except AssertionError as e:
        t.proc.kill()
        t.proc.wait()
        return -1, _plain(str(e))
    return code, t.text


def run_command(cmd: Command, folder: Path, env: dict, variant: str = "starter",
                timeout: float = 1200) -> tuple[str, int, str]:
    """(how, exit status, output) of one command run in ``folder``."""
    how = kind(cmd.cmd)
    if how == "run":
        p = subprocess.run(["bash", "-c", cmd.cmd], cwd=folder, env=env, capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        return how, p.returncode, _plain(p.stdout + p.stderr)
    if how == "tui":
        code, text = _tui(cmd, folder, env, variant)
        return how, code, text
    argv = shlex.split(cmd.cmd)
    if how == "serve" and "--port" not in argv:
        argv += ["--port", "0"]
    p = subprocess.Popen(argv, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    out, want = "", ("http://127.0.0.1:" if how == "serve" else "watching for changes")
    deadline = time.monotonic() + 300  # a guard against hanging; the wait is on what the command prints
    try:
        while want not in out and time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            out += line
        if want in out and how == "serve":
            url = out[out.index("http://"):].split()[0]
            with urllib.request.urlopen(url, timeout=60) as r:
                out += f"\n[fetched {url}: HTTP {r.status}]\n"
                if r.status != 200:
                    out += "[not 200]\n"
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGINT)
        rest, _ = p.communicate(timeout=120)
        out += rest or ""
    if want not in out:
        return how, -1, _plain(out) + f"\n[never printed {want!r}]"
    return how, p.returncode, _plain(out)


# ------------------------------------------------------------------------------------------ documents


def fresh_checkout(dest: Path) -> Path:
    """A copy of the checkout's tracked files (a clone, as the README's reader has)."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for n in (x for x in files.decode().split("\0") if x):
        src = ROOT / n
        if src.is_file() and not src.is_symlink():
            (dest / n).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / n)
    return dest


def played_lab(number: int, dest: Path) -> Path:
    """``dest`` holding lab ``number`` played by its reference path (its run and the progress file)."""
    from sim.labs.catalog import get_lab
    from sim.labs.paths import play, reference
    from sim.labs.resume import open_lab_run
    from sim.labs.session import LabSession
    from sim.store import ProgressStore

    lab = get_lab(number)
    run = open_lab_run(lab, dest / lab.default_db)
    progress = ProgressStore.open(dest / "protolab-progress.db")
    try:
        progress.start_session(lab.number, lab.default_db)
        session = LabSession(lab, run.store, progress)
        session.refresh()
        play(run.live, session, reference(lab))
    finally:
        run.close()
        progress.close()
    return dest


def exercise_copy(ex_folder: Path, variant: str, dest: Path) -> Path:
    """The exercise's folder as ``exercise start`` copies it, with the model answer's files in place
    of the starter's for the ``solution`` variant."""
    shutil.copytree(ex_folder, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    if variant == "solution":
        import tomllib

        files = tomllib.loads((ex_folder / "exercise.toml").read_text(encoding="utf-8")).get("files", [])
        for f in files:
            shutil.copy2(ROOT / "solutions" / ex_folder.name / f, dest / f)
    return dest


def setting(doc: Path) -> tuple[str, list[str]]:
    """Where a document runs (``checkout``, ``lab``, ``exercise``) and its variants."""
    rel = doc.relative_to(ROOT)
    if rel.parts[0] == "exercises":
        return "exercise", ["starter", "solution"]
    if rel.parts[0] == "labs":
        return "lab", ["starter"]
    return "checkout", ["starter"]


def prepare(doc: Path, variant: str, tmp: Path) -> Path:
    where, _ = setting(doc)
    rel = doc.relative_to(ROOT)
    if where == "exercise":
        return exercise_copy(ROOT / "exercises" / rel.parts[1], variant, tmp / rel.parts[1])
    if where == "lab":
        d = tmp / "student"
        d.mkdir()
        return played_lab(int(rel.parts[1][:2]), d)
    return fresh_checkout(tmp / "protolab")


def run_document(doc: Path, blocks: list[Block], variant: str, tmp: Path, *, quick: bool = False) -> list[Ran]:
    """Every command of ``blocks`` (one document's, in order) in one fresh folder, judged."""
    folder = prepare(doc, variant, tmp)
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    env = shell_env(home)
    out = []
    for b in blocks:
        if b.not_run is not None:
            continue
        for c in b.commands:
            r = Ran(c, variant)
            if quick and (SLOW.match(c.cmd) or kind(c.cmd) != "run"):
                r.how = "skipped"
                out.append(r)
                continue
            r.how, r.code, r.out = run_command(c, folder, env, variant)
            r.problems = judge(c, variant, r.code, r.out, folder)
            out.append(r)
    return out


def document_blocks(doc: Path) -> list[Block]:
    """A document's blocks; an exercise's README is followed by its starter's command lines."""
    bl = blocks_of(doc)
    rel = doc.relative_to(ROOT)
    if rel.parts[0] == "exercises":
        bl += starter_blocks(doc.parent)
    return bl


if __name__ == "__main__":
    import tempfile

    targets = [ROOT / a for a in sys.argv[1:]] or documents()
    quick = os.environ.get("DOCRUN_QUICK") == "1"
    for doc in targets:
        _where, variants = setting(doc)
        for v in variants:
            with tempfile.TemporaryDirectory() as tmp:
                t0 = time.monotonic()
                ran = run_document(doc, document_blocks(doc), v, Path(tmp), quick=quick)
            bad = [r for r in ran if r.problems]
            print(f"{doc.relative_to(ROOT)} [{v}]: {len(ran)} commands, {len(bad)} wrong, "
                  f"{time.monotonic() - t0:.0f} s")
            for r in ran:
                mark = "BAD" if r.problems else ("-- " if r.how == "skipped" else "ok ")
                print(f"  {mark} {r.how:<7} {r.command.where}: {r.command.cmd[:110]}  [exit {r.code}]")
                for p in r.problems:
                    print(f"        {p}")
                if r.problems:
                    print("        " + "\n        ".join(r.out.strip().splitlines()[-6:]))
            sys.stdout.flush()
