"""The one plant/run/restore loop of the scripts that measure the tests by bugs planted by hand (issue 48):
tests/gathers_versions_planted.py, lab_judgement_planted.py, fast_path_planted.py, exit_mutants.py,
explore_a2a_planted.py, timeline_model_planted.py. Not a test module (no ``test_`` name); its own check is
tests/test_planting.py.

A bug is :class:`Bug`: an id, the file (relative to the checkout), what it does (as a user would see it),
the text it replaces, which must occur exactly once in the file, and the replacement; ``equivalent``, when
set, says why no user-visible behaviour changes (the bug is still run, and counted apart in the score).

For each bug chosen (by id on the command line, or a 1-based number; all when none is given) :func:`main`
writes the bug into the file, runs the given pytest files in one process (``-p no:cacheprovider -x -q -n 0``,
no ``.pyc`` written, so no stale bytecode of a bug survives it) or the script's own ``run``, restores the
file in a ``finally`` whatever happens, and at the end checks every file it touched is byte for byte the
original (also when stopped by SIGTERM or SIGINT). It prints one table row per bug as it goes, then a JSON summary (per file: planted, equivalent,
caught, non-equivalent caught, score) on the last line.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent
PYTEST_ARGS = ("-p", "no:cacheprovider", "-x", "-q", "-n", "0")


class PlantError(ValueError):
    """A bug's text does not occur exactly once in its file: the bug would be ambiguous or no bug at all."""


@dataclass(frozen=True)
class Bug:
    id: str
    file: str
    what: str
    text: str
    replacement: str
    equivalent: str = ""  # why no user-visible behaviour changes ("" = not equivalent)
    args: tuple[str, ...] = field(default=())  # extra pytest arguments for this bug (e.g. --run-slow -k grade)


def replaced(source: str, text: str, replacement: str, where: str = "the file") -> str:
    """``source`` with ``text`` replaced by ``replacement``; :class:`PlantError` unless it occurs exactly once."""
    n = source.count(text)
    if n != 1:
        raise PlantError(f"the text occurs {n} times in {where}, not once: {text[:80]!r}")
    if text == replacement:
        raise PlantError(f"the replacement is the text itself in {where}: {text[:80]!r}")
    return source.replace(text, replacement)


@contextlib.contextmanager
def planted(bug: Bug, root: Path = ROOT) -> Iterator[Path]:
    """The bug written into its file for the ``with`` block; the original bytes written back after it,
    whatever happens, and checked."""
    path = root / bug.file
    original = path.read_bytes()
    buggy = replaced(original.decode("utf-8"), bug.text, bug.replacement, f"{bug.file} (bug {bug.id})")
    try:
        path.write_bytes(buggy.encode("utf-8"))
        yield path
    finally:
        path.write_bytes(original)
        if path.read_bytes() != original:
            raise RuntimeError(f"{bug.file} not restored after bug {bug.id}")


def run_pytest(tests: list[str], args: tuple[str, ...] = (), root: Path = ROOT) -> tuple[bool, str]:
    """Run ``tests`` in one pytest process; (caught: some test failed or errored, the first failure)."""
    here = [t for t in tests if (root / t.split("::")[0]).exists()]
    cmd = [sys.executable, "-m", "pytest", *PYTEST_ARGS, *args, *here]
    p = subprocess.run(cmd, cwd=root, capture_output=True, text=True,
                       env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    lines = p.stdout.splitlines()
    failed = [ln for ln in lines if ln.startswith(("FAILED", "ERROR"))]
    if p.returncode == 5:  # no tests collected: nothing measured, not a catch
        return False, "no tests ran"
    return p.returncode != 0, (failed[0] if failed else (lines[-1] if lines else p.stderr.strip()[-200:]))


def choose(bugs: list[Bug], argv: list[str]) -> list[Bug]:
    """The bugs named on the command line (id, or 1-based number), in the list's order; every one when none."""
    if not argv:
        return list(bugs)
    ids = {b.id: i for i, b in enumerate(bugs)}
    picked = set()
    for a in argv:
        if a in ids:
            picked.add(ids[a])
        elif a.isdigit() and 1 <= int(a) <= len(bugs):
            picked.add(int(a) - 1)
        else:
            raise SystemExit(f"no bug {a!r}; the bugs are {', '.join(ids)}")
    return [bugs[i] for i in sorted(picked)]


def summary(results: list[dict]) -> dict:
    """Per file and in all: planted, equivalent, caught, non-equivalent caught, score (of the non-equivalent)."""
    out: dict = {}
    for key in [*dict.fromkeys(r["file"] for r in results), "all"]:
        rs = [r for r in results if key == "all" or r["file"] == key]
        neq = [r for r in rs if not r["equivalent"]]
        caught_neq = sum(r["caught"] for r in neq)
        out[key] = {"planted": len(rs), "equivalent": len(rs) - len(neq), "caught": sum(r["caught"] for r in rs),
                    "non_equivalent_caught": caught_neq, "non_equivalent": len(neq),
                    "score": round(100 * caught_neq / len(neq), 1) if neq else None,
                    "survived": [r["bug"] for r in neq if not r["caught"]]}
    return out


def main(argv: list[str], bugs: list[Bug], tests: list[str] | dict[str, list[str]] | None = None, *,
         run: Callable[[Bug], tuple[bool, str]] | None = None, root: Path = ROOT) -> int:
    """Plant each chosen bug, run (``tests``: one list, or a list per file; or ``run(bug)``), restore.
    Exit 0 when every non-equivalent bug run was caught, else 1."""
    ids = [b.id for b in bugs]
    assert len(set(ids)) == len(ids), "two bugs with one id"
    chosen = choose(bugs, argv)
    originals = {b.file: (root / b.file).read_bytes() for b in chosen}
    for b in chosen:  # every text checked before anything runs
        replaced(originals[b.file].decode("utf-8"), b.text, b.replacement, f"{b.file} (bug {b.id})")
    results = []

    def stopped(signum, frame):  # kill (TERM) or Ctrl-C of a background run: the finally below still restores
        raise KeyboardInterrupt(f"signal {signum}")

    before = {sig: signal.signal(sig, stopped) for sig in (signal.SIGTERM, signal.SIGINT)}
    # (SIGINT too: a background job of a shell script starts with SIGINT ignored)
    try:
        for b in chosen:
            t0 = time.monotonic()
            with planted(b, root):
                if run is not None:
                    caught, by = run(b)
                else:
                    files = tests[b.file] if isinstance(tests, dict) else tests
                    caught, by = run_pytest(list(files or []), b.args, root)
            took = time.monotonic() - t0
            results.append({"bug": b.id, "file": b.file, "what": b.what, "caught": caught,
                            "equivalent": bool(b.equivalent), "by": by[:200], "seconds": round(took, 1)})
            mark = "caught  " if caught else ("equiv.  " if b.equivalent else "SURVIVED")
            print(f"{b.id:6} {mark} {took:5.0f} s  {b.file}: {b.what[:70]}  | {by[:110]}", flush=True)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        for f, data in originals.items():
            if (root / f).read_bytes() != data:
                (root / f).write_bytes(data)
                print(f"RESTORED {f} (it was left changed)", file=sys.stderr)
    for f, data in originals.items():
        assert (root / f).read_bytes() == data, f"{f} is not byte for byte the original"
    s = summary(results)
    print(f"caught {s['all']['caught']} of {s['all']['planted']}; non-equivalent "
          f"{s['all']['non_equivalent_caught']} of {s['all']['non_equivalent']}")
    print(json.dumps({"summary": s, "bugs": results}))
    return 0 if not s["all"]["survived"] else 1
