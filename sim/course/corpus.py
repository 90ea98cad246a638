"""Generated classrooms: a folder of submissions for one exercise, each with the score it must get.

What a grader has to survive, built from the exercise itself: the model answer (full marks), the
starter and every planted wrong answer (less than full marks), and every hostile kind a class
produces, made from the model answer so that only the hostile part can cost points (every test
0 with a reason): code that does not parse, raises or exits on import, loops, exits the process
from inside a call, floods its output, eats memory, starts processes, writes outside its folder,
reads the solutions, returns the wrong type, lacks a function, reaches files through SQLite
(ATTACH, VACUUM INTO, load_extension, a run database by its path), calls C through ctypes, reads
the grader's /proc, signals its parent or its group, listens on a socket, opens files through a
Tcl interpreter (tkinter), writes forged answers on the grader's private pipe, plants links (its own
file replaced by a link to the model answer, a link to the checkout) or is a link; for the data
exercises, files that are not the format, are huge, nest without end, or are links out of the
folder.

Used by the grader's tests, ``protolab kit verify`` and ``protolab bench grade``. Only an
instructor's install has ``solutions/``; without it, there is no corpus.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from .catalog import Exercise, solutions_dir

__all__ = ["Entry", "build_corpus", "HOSTILE_CODE", "HOSTILE_DATA"]


@dataclass(frozen=True)
class Entry:
    name: str  # the submission's folder name
    kind: str  # solution, starter, wrong, hostile
    expect: str  # full, less, zero
    what: str  # what it is, in words
    slow: bool = False  # it spends a whole time limit (a loop)


# Each hostile kind: code appended to (or put before) the model answer. ``{wrap}`` kinds replace
# every public function of the module by one that first does the hostile thing.
_WRAP = '''

def _protolab_hostile(fn):
    def hostile(*args, **kwargs):
{body}
        return fn(*args, **kwargs)
    return hostile


for _n, _f in list(globals().items()):
    if callable(_f) and not _n.startswith("_") and getattr(_f, "__module__", None) == __name__:
        globals()[_n] = _protolab_hostile(_f)
'''

#: name -> (where, code, what, slow); where is "before", "after" or "wrap" (code is the wrapper's body).
HOSTILE_CODE = {
    "syntax-error": ("after", "\ndef broken(:\n    pass\n", "does not parse", False),
    "raises-on-import": ("before", "raise RuntimeError('configuration missing')\n", "raises on import", False),
    "exit-on-import": ("before", "import sys\nsys.exit(3)\n", "calls sys.exit on import", False),
    "loop-on-import": ("before", "while True:\n    pass\n", "loops for ever on import", True),
    "flood-on-import": ("before", "print('x' * 50_000_000)\n", "prints 50 MB on import", False),
    "os-exit-in-call": ("wrap", "        import os\n        os._exit(0)", "ends its process from inside a call", False),
    "sys-exit-in-call": ("wrap", "        raise SystemExit(0)", "calls sys.exit inside a call", False),
    "loop-in-call": ("wrap", "        while True:\n            pass", "loops for ever inside a call", True),
    "flood-in-call": ("wrap", "        print('y' * 5_000_000)", "prints 5 MB in every call", False),
    "memory-bomb": ("wrap", "        hoard = bytearray(8 * 1024 ** 3)", "asks for 8 GB in every call", False),
    "memory-creep": ("wrap", "        hoard = [bytearray(64 * 1024 ** 2) for _ in range(200)]",
                     "keeps allocating until memory runs out", False),
    "forks": ("wrap", "        import os\n        if os.fork() == 0:\n            os._exit(0)", "forks a child process", False),
    "spawns": ("wrap", "        import subprocess\n        subprocess.run(['true'])", "starts a subprocess", False),
    "writes-outside": ("wrap", "        open('/tmp/protolab-hostile-was-here', 'w').write('x')",
                       "writes a file outside its folder", False),
    "reads-solutions": ("wrap", "        print(open(SOLUTION_PATH).read()[:200])",
                        "reads the model answer (its path guessed right)", False),
    "wrong-type": ("wrap", "        return object()", "returns an object where a value is expected", False),
    # SQLite opens files in C, where an audit hook sees nothing: an in-memory database reaching out (the SQL
    # is split in two so that no SQL lives outside the store, as tests/test_layers.py checks)
    "sqlite-attach": ("wrap", "        import sqlite3\n        db = sqlite3.connect(':memory:')\n"
                              "        db.execute(\"ATTACH DATABASE '/tmp/protolab-hostile-attach.db' AS evil\")\n"
                              "        db.execute('CREATE' ' TABLE IF NOT EXISTS evil.t (x)')",
                      "attaches a new SQLite file outside its folder (ATTACH DATABASE)", False),
    "sqlite-vacuum-into": ("wrap", "        import sqlite3\n        db = sqlite3.connect(':memory:')\n"
                                   "        db.execute('CREATE' ' TABLE t (x)')\n"
                                   "        db.execute(\"VACUUM INTO '/tmp/protolab-hostile-vacuum.db'\")",
                           "writes a SQLite file outside its folder (VACUUM INTO)", False),
    "sqlite-load-extension": ("wrap", "        import sqlite3\n        db = sqlite3.connect(':memory:')\n"
                                      "        db.enable_load_extension(True)\n        db.load_extension('/tmp/evil')",
                              "loads a SQLite extension (native code)", False),
    "sqlite-run-database": ("wrap", "        import sqlite3\n        db = sqlite3.connect(RUN_DB)\n"
                                    "        db.execute('DELETE' ' FROM effects')\n        db.commit()",
                            "opens a run database elsewhere by its path and deletes its effects rows", False),
    "ctypes": ("wrap", "        import ctypes\n        ctypes.CDLL(None).system(b'touch /tmp/protolab-hostile-was-here')",
               "calls C through ctypes", False),
    "reads-grader-environ": ("wrap", "        import os\n        print(open(f'/proc/{os.getppid()}/environ').read())",
                             "reads its parent's environment (/proc/PPID/environ)", False),
    "reads-grader-cmdline": ("wrap", "        import os\n        print(open(f'/proc/{os.getppid()}/cmdline').read())",
                             "reads its parent's command line (/proc/PPID/cmdline)", False),
    "lists-grader-fds": ("wrap", "        import os\n        print(os.listdir(f'/proc/{os.getppid()}/fd'))",
                         "lists its parent's open files (/proc/PPID/fd)", False),
    "kills-parent": ("wrap", "        import os, signal\n        os.kill(os.getppid(), signal.SIGKILL)",
                     "kills its parent process (os.kill(os.getppid(), SIGKILL))", False),
    "kills-group": ("wrap", "        import os, signal\n        os.killpg(os.getpgid(0), signal.SIGKILL)",
                    "kills its process group (os.killpg)", False),
    "listens": ("wrap", "        import socket\n        s = socket.socket()\n        s.bind(('127.0.0.1', 0))\n        s.listen()",
                "opens a listening socket", False),
    "link-replaces-file": ("wrap", "        import os\n        os.remove(__file__)\n        os.symlink(SOLUTION_PATH, __file__)",
                           "replaces its own file by a link to the model answer", False),
    "plants-link": ("wrap", "        import os\n        os.symlink(CHECKOUT, 'checkout-link')",
                    "plants a link to the grader's checkout in its folder", False),
    # a Tcl interpreter opens files in C, where no audit event sees it (on the fallback: the model answer read,
    # a file written outside the folder)
    "tkinter-tcl": ("wrap", "        import tkinter\n        print(tkinter.Tcl().eval('set f [open ' + SOLUTION_PATH + "
                            "' r]; set t [read $f]; close $f; set g [open /tmp/protolab-hostile-was-here w]; puts $g $t; "
                            "close $g'))",
                    "reads the model answer and writes outside its folder through a Tcl interpreter (tkinter.Tcl)",
                    False),
    # forged answers on every pipe it can find (the host's private one too), as it imports
    "forges-on-the-pipe": ("before", "import os as _o, stat as _s\nfor _fd in range(3, 4096):\n    try:\n"
                                     "        if _s.S_ISFIFO(_o.fstat(_fd).st_mode):\n"
                                     "            _o.write(_fd, b'{\"violation\": null}\\n{\"ready\": true}\\n"
                                     "{\"fatal\": true, \"error\": null}\\n')\n"
                                     "    except OSError:\n        pass\n",
                           "writes forged answers on every pipe it finds (the grader's private one included)", False),
}

#: name -> (content or None, what); None: special (see build_corpus).
HOSTILE_DATA = {
    "not-the-format": (b"\x00\x01\x02 binary garbage \xff\xfe", "is binary garbage, not the format"),
    "huge": (None, "is 20 MB"),
    "deep-nesting": (None, "nests 100,000 levels deep"),
    "link-out": (None, "is a symbolic link to a file outside the folder"),
}


def _hostile_code(model: str, where: str, code: str) -> str:
    if where == "before":
        return code + model
    if where == "after":
        return model + code
    return model + _WRAP.format(body=code)


def _copy(ex: Exercise, dest: Path, files_from: Path) -> None:
    dest.mkdir(parents=True)
    for name in ex.files:
        src = files_from / name
        if src.is_file():
            shutil.copy(src, dest / name)


def build_corpus(ex: Exercise, dest: Path, *, hostile: bool = True, slow: bool = True,
                 run_db: Path | None = None) -> list[Entry]:
    """Write one folder per submission under ``dest`` (which must not exist); the entries, each
    with the score it must get. ``slow=False`` leaves out the kinds that spend a whole time limit.
    ``run_db`` is the run database the hostile ``sqlite-run-database`` goes for (default:
    ``protolab.db`` in the current folder, where ``protolab run`` writes it)."""
    sol = solutions_dir(ex)
    if sol is None:
        raise InputError(f"this install has no solutions/ for exercise {ex.number}; the corpus needs the model "
                         "answer: run from your protolab checkout or name it with --course DIR", code="E_NO_SOLUTIONS")
    run_db = Path(run_db) if run_db is not None else Path.cwd() / "protolab.db"
    dest = Path(dest)
    dest.mkdir(parents=True)
    out = [Entry("solution", "solution", "full", "the model answer")]
    _copy(ex, dest / "solution", sol)
    out.append(Entry("starter", "starter", "less", "the starter, untouched"))
    _copy(ex, dest / "starter", ex.folder)
    wrong = sol / "wrong"
    for w in sorted(p for p in wrong.iterdir() if p.is_dir()) if wrong.is_dir() else ():
        name = f"wrong-{w.name}"
        _copy(ex, dest / name, w)
        out.append(Entry(name, "wrong", "less", f"planted wrong answer: {w.name}"))
    if not hostile:
        return out
    main = ex.files[0]
    if main.endswith(".py"):
        model = (sol / main).read_text(encoding="utf-8")
        for kind, (where, code, what, is_slow) in HOSTILE_CODE.items():
            if is_slow and not slow:
                continue
            d = dest / f"hostile-{kind}"
            _copy(ex, d, sol)
            code = (code.replace("SOLUTION_PATH", repr(str((sol / main).resolve())))
                    .replace("CHECKOUT", repr(str(sol.resolve().parent.parent)))
                    .replace("RUN_DB", repr(str(run_db.resolve()))))
            (d / main).write_text(_hostile_code(model, where, code), encoding="utf-8")
            out.append(Entry(d.name, "hostile", "zero", f"{main} {what}", slow=is_slow))
        # the functions the judges call are missing (renamed)
        d = dest / "hostile-missing-function"
        _copy(ex, d, sol)
        import re

        names = re.findall(r"^def ([A-Za-z][A-Za-z0-9_]*)\(", model, re.M)
        renamed = re.sub(r"^def ([A-Za-z][A-Za-z0-9_]*)\(", r"def \1_renamed(", model, flags=re.M)
        (d / main).write_text(renamed, encoding="utf-8")
        out.append(Entry(d.name, "hostile", "zero", f"{main} has none of the functions it must define ({', '.join(names)}: "
                                                    "each was renamed)"))
        # the file is a link to the model answer (a link in a submission is never followed)
        d = dest / "hostile-link-to-solution"
        d.mkdir()
        (d / main).symlink_to((sol / main).resolve())
        out.append(Entry(d.name, "hostile", "zero", f"{main} is a symbolic link to the model answer"))
    else:
        for kind, (content, what) in HOSTILE_DATA.items():
            d = dest / f"hostile-{kind}"
            d.mkdir()
            target = d / main
            if kind == "huge":
                target.write_bytes(b"#" * (20 * 1024 * 1024))
            elif kind == "deep-nesting":
                if main.endswith(".json"):
                    target.write_text("[" * 100_000 + "]" * 100_000)
                else:
                    target.write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
            elif kind == "link-out":
                target.symlink_to((sol / main).resolve())
            else:
                target.write_bytes(content)
            out.append(Entry(d.name, "hostile", "zero", f"{main} {what}"))
    d = dest / "hostile-no-file"
    d.mkdir()
    (d / "README.txt").write_text("I could not finish, sorry\n")
    out.append(Entry(d.name, "hostile", "zero", f"holds no {main}"))
    return out
