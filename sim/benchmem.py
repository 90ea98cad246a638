"""``protolab bench memory``: every read command's whole peak memory and CPU beside ``run``'s, at each size.

Each command is what a user types, run in its own process over a ``stress`` run of N tasks; its peak
resident memory and CPU seconds (user + system) are the kernel's account of that process (``wait4``), so
start-up, reading, judging and writing are all in them. Output goes to a scratch file or nowhere (a pipe
is what a big table is written to). Between two sizes the bench prints each command's CPU factor: for 10x
the run a linear command takes about 10x the CPU (issue 50 asks under 11x), and its memory stays flat.

Runs are made once per size in a folder (``folder``) and kept there when the caller names it, so a
second bench reuses them: a reused run's own figures are those recorded when it was made (beside it,
``stress-N.json``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["COMMANDS", "LAUNCHER", "bench_memory", "command_figures"]

#: The commands measured over each run, in order: (name, arguments after 'protolab', where stdout goes).
#: ``{db}``, ``{out}`` are filled in; 'trace validate' reads what 'trace export' wrote.
COMMANDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("check", ("check", "--db", "{db}")),
    ("state", ("state", "--db", "{db}")),
    ("state --json", ("state", "--db", "{db}", "--json")),
    ("messages", ("messages", "--db", "{db}")),
    ("messages --json", ("messages", "--db", "{db}", "--json")),
    ("events", ("events", "--db", "{db}")),
    ("timeline", ("timeline", "--db", "{db}", "-o", "{out}/timeline.html")),
    ("trace export", ("trace", "export", "--db", "{db}", "-o", "{out}/trace.json")),
    ("trace validate", ("trace", "validate", "{out}/trace.json")),
)


#: runs argv[1:] and says on its last stderr line its peak resident KB, exit status and CPU seconds
LAUNCHER = ("import os, sys\npid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ)\n"
            "_, st, ru = os.wait4(pid, 0)\n"
            "print('PEAK', ru.ru_maxrss, os.waitstatus_to_exitcode(st), ru.ru_utime, ru.ru_stime, file=sys.stderr)")


def command_figures(argv: list[str], *, stdout=subprocess.DEVNULL, env: dict | None = None) -> dict:
    """Run ``argv`` to its end: its exit status, peak RSS (MB), CPU seconds (user + system) and wall seconds,
    the kernel's account of that one process (``wait4``).

    It is started by a small launcher (``python -S``, a few MB), never straight from this process: a child
    this process starts (vfork, then exec) carries this process's peak into its own (the kernel keeps the
    larger of the old memory's high-water mark and the program's), so a bench run inside pytest once
    measured every command at pytest's 170 MB. ``wall_s`` includes the launcher's start (~20 ms)."""
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-S", "-c", LAUNCHER, *argv], stdout=stdout, stderr=subprocess.PIPE,
                            env=env)
    err = proc.stderr.read()
    proc.wait()
    wall = time.perf_counter() - t
    text = err.decode(errors="replace").rstrip()
    head, _, last = text.rpartition("\n")
    parts = last.split()
    if len(parts) != 5 or parts[0] != "PEAK":
        raise RuntimeError(f"the launcher of {argv[:3]} said nothing of its child: {text[-300:]}")
    proc.returncode = int(parts[2])
    return {"exit": int(parts[2]), "peak_mb": round(int(parts[1]) / 1024, 1),
            "cpu_s": round(float(parts[3]) + float(parts[4]), 2), "wall_s": round(wall, 2),
            "stderr": head.strip()[-300:]}


def _protolab(*args: str) -> list[str]:
    return [sys.executable, "-m", "sim.cli", *args]


def _made_run(folder: Path, n: int, seed: int | None) -> tuple[Path, dict]:
    """The stress run of ``n`` tasks in ``folder``: made by 'protolab run' (its figures measured and kept
    beside it), or reused when it is there with its figures."""
    db = folder / f"stress-{n}.db"
    kept = folder / f"stress-{n}.json"
    if db.exists() and kept.exists():
        figures = json.loads(kept.read_text())
        return db, dict(figures, reused=True)
    if db.exists():
        db.unlink()
    argv = _protolab("run", "stress", "--tasks", str(n), "--db", str(db), "--json")
    if seed is not None:
        argv += ["--seed", str(seed)]
    figures = command_figures(argv)
    if figures["exit"] not in (0, 1):
        raise RuntimeError(f"protolab run stress --tasks {n} failed: {figures['stderr']}")
    figures.pop("stderr")
    kept.write_text(json.dumps(figures) + "\n")
    return db, dict(figures, reused=False)


def bench_memory(sizes: list[int], folder: Path, *, commands=COMMANDS, seed: int | None = None,
                 progress=None) -> dict:
    """Each size's run (made in ``folder``, or reused from it) and every command of ``commands`` over
    it: ``{"sizes": [{"tasks", "deliveries", "commands": {name: figures}}], "factors": [...]}``; each
    factor is a command's CPU at one size over its CPU at the size before, beside the sizes' ratio.
    ``progress``: a Rich Progress, one step per command."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    job = progress.add_task("bench memory", total=len(sizes) * (len(commands) + 1)) if progress is not None else None

    def step(what: str) -> None:
        if progress is not None:
            progress.update(job, description=what)

    for n in sizes:
        step(f"{n:,} tasks: protolab run")
        db, run = _made_run(folder, n, seed)
        if progress is not None:
            progress.advance(job)
        figures = {"run": run}
        scratch = folder / f"out-{n}"
        scratch.mkdir(exist_ok=True)
        for name, args in commands:
            step(f"{n:,} tasks: protolab {name}")
            argv = _protolab(*(a.format(db=db, out=scratch) for a in args))
            with open(scratch / "stdout", "wb") as sink:  # a file, as a big table or JSON is usually written
                f = command_figures(argv, stdout=sink)
            if f["exit"] not in (0, 1):
                f["failed"] = f["stderr"]
            f.pop("stderr")
            figures[name] = f
            if progress is not None:
                progress.advance(job)
        for p in scratch.iterdir():
            p.unlink()
        scratch.rmdir()
        deliveries = _deliveries(db)
        out.append({"tasks": n, "deliveries": deliveries, "db_mb": round(db.stat().st_size / 1e6, 1),
                    "commands": figures})
    factors = []
    for a, b in zip(out, out[1:]):
        factors.append({"from": a["tasks"], "to": b["tasks"], "size_ratio": round(b["tasks"] / a["tasks"], 2),
                        "cpu": {name: round(b["commands"][name]["cpu_s"] / max(a["commands"][name]["cpu_s"], 0.01), 2)
                                for name in b["commands"]},
                        "peak": {name: round(b["commands"][name]["peak_mb"] / max(a["commands"][name]["peak_mb"], 0.1), 2)
                                 for name in b["commands"]}})
    return {"sizes": out, "factors": factors}


def _deliveries(db: Path) -> int:
    from .store import Store

    with Store.open(db, readonly=True) as store:
        return store.count_of("deliveries")
