"""Benchmarks. Each prints the project's figure beside a floor measured in the same run.

``intake``: deliveries per second through the whole path (strict JSON parse, digest
check, intake decision, one transaction writing message, delivery, events and state)
against bare sqlite3 writing the very same rows, one transaction per delivery, with no
parsing and no logic. ``startup``: ``protolab --help`` against a bare ``python -c pass``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .benchmem import command_figures

__all__ = ["intake_workload", "writers_workload", "bench_writers", "bench_intake", "bench_instructions", "bench_startup", "bench_sim", "sim_one", "bench_trace", "trace_one", "bench_web", "web_one"]


def intake_workload(n: int, *, duplicate_rate: float = 0.05, seed: int = 0) -> list[str]:
    """``n`` envelope texts: tasks through request, start, result (a success citing its evidence) and ack,
    with redeliveries: each task ends succeeded."""
    import hashlib
    import random

    from .envelope import build_envelope

    rng = random.Random(seed)
    texts: list[str] = []
    t = 0

    def at(i: int) -> str:
        return f"2026-07-13T{4 + i // 3600 % 20:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z"

    while len(texts) < n:
        t += 1
        tid = f"T-{t}"
        worker = "researcher" if t % 2 else "writer"
        common = dict(trace_id=f"R-{t // 100}", task_id=tid)
        envs = [
            build_envelope(message_id=f"M-{t}-1", sender="manager", recipient=worker, type="task_request",
                           payload={"goal": f"collect evidence {t}", "budget": 3}, idempotency_key=f"{tid}:request",
                           created_at=at(len(texts)), **common),
            build_envelope(message_id=f"M-{t}-2", sender=worker, recipient="manager", type="task_started",
                           payload={"lease_version": 1}, idempotency_key=f"{tid}:attempt-1:started", created_at=at(len(texts)), **common),
            # (a success cites its evidence, as the course's rules ask: one without is refused, and the
            # bench once measured only that refusal, E_EVIDENCE_REQUIRED, for every result)
            build_envelope(message_id=f"M-{t}-3", sender=worker, recipient="manager", type="task_result",
                           payload={"status": "succeeded", "lease_version": 1, "summary": f"{rng.randint(1, 9)} facts"},
                           idempotency_key=f"{tid}:attempt-1", created_at=at(len(texts)),
                           evidence_refs=["sha256:" + hashlib.sha256(f"facts of {tid}".encode()).hexdigest()], **common),
            build_envelope(message_id=f"A-{t}-3", sender="manager", recipient=worker, type="ack",
                           payload={"of": f"M-{t}-3"}, idempotency_key=f"{tid}:ack", created_at=at(len(texts)), **common),
        ]
        for env in envs:
            text = env.to_json()
            texts.append(text)
            if rng.random() < duplicate_rate:
                texts.append(text)
    return texts[:n]


def _progress(enabled: bool):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        disable=not enabled, transient=True,
    )


#: how many deliveries ``bench_intake`` times before it times the floor's same slice, and back
INTAKE_SLICE = 250


def bench_intake(n: int, *, progress: bool = False, repeat: int = 3) -> dict:
    """Run the intake benchmark; return figures (``project_per_s``, ``floor_per_s``, ``ratio``).

    The floor's rows are taken first, from an untimed run of the same workload (the run is
    deterministic: every run writes the same rows). Then ``repeat`` rounds, each timing the project
    into a fresh file and the floor into another, alternated slice by slice (:data:`INTAKE_SLICE`
    deliveries of the project, then the floor's batches for the same ticks), so the two see the same
    load on a shared machine, whose disk's commit latency drifts by a fifth within seconds; the round
    with the median ratio is reported (``ratios`` lists them all)."""
    from .envelope import parse_envelope, loads_strict
    from .runtime import deliver
    from .store import BareWriter, Store, machine_rows, rows_by_tick

    texts = intake_workload(n)
    rounds = []
    with tempfile.TemporaryDirectory(prefix="protolab-bench-") as tmp, _progress(progress) as bar:
        job = bar.add_task("the floor's rows (untimed)", total=n)
        store = Store.create(Path(tmp) / "rows.db")
        for i, text in enumerate(texts):
            deliver(store, parse_envelope(loads_strict(text)))
            if i % 500 == 0:
                bar.update(job, completed=i)
        batches = [b for b in rows_by_tick(store) if b[0] > 0]  # tick 0 is init (schema, machine)
        counts, machines, digest = store.counts(), machine_rows(store), store.state_digest()
        store.close()
        bar.update(job, completed=n)
        clock = time.perf_counter
        for r in range(max(1, repeat)):
            job = bar.add_task(f"protolab and the floor, alternated ({r + 1}/{repeat})", total=n)
            store = Store.create(Path(tmp) / f"project-{r}.db")
            floor = BareWriter(str(Path(tmp) / f"floor-{r}.db"), machines=machines)
            project_s = floor_s = 0.0
            b = 0
            for lo in range(0, n, INTAKE_SLICE):
                t0 = clock()
                for text in texts[lo:lo + INTAKE_SLICE]:
                    deliver(store, parse_envelope(loads_strict(text)))
                project_s += clock() - t0
                upto = store.tick
                end = b
                while end < len(batches) and batches[end][0] <= upto:
                    end += 1
                t1 = clock()
                floor.write(batches[b:end])
                floor_s += clock() - t1
                b = end
                bar.update(job, completed=min(n, lo + INTAKE_SLICE))
            t1 = clock()
            floor.write(batches[b:])  # (none: every tick's batch belongs to a slice)
            floor_s += clock() - t1
            if store.state_digest() != digest:  # (the rows the floor wrote are this run's)
                raise AssertionError(f"round {r + 1} of the intake benchmark reached another state than the untimed run")
            store.close()
            floor.close()
            rounds.append((n / project_s / (len(batches) / floor_s), project_s, floor_s))
    ratio, project_s, floor_s = sorted(rounds)[len(rounds) // 2]
    project = n / project_s
    floor = len(batches) / floor_s
    return {
        "benchmark": "intake",
        "n": n,
        "project_per_s": round(project, 1),
        "floor_per_s": round(floor, 1),
        "ratio": round(project / floor, 3),
        "ratios": [round(r[0], 3) for r in rounds],
        "repeat": len(rounds),
        "slice": INTAKE_SLICE,
        "project_seconds": round(project_s, 3),
        "floor_seconds": round(floor_s, 3),
        "rows": {k: counts[k] for k in ("messages", "deliveries", "events", "tasks", "transitions", "intents", "budget")},
        "python": sys.version.split()[0],
    }


#: deliveries each side runs before the ones counted by :func:`bench_instructions` (caches warm, the quick
#: JSON writer on, the tables past their first pages)
INSTRUCTIONS_WARM = 300


def instructions_child(side: str, warm: int, n: int, k: int, folder: str) -> None:
    """What :func:`bench_instructions` runs under callgrind: ``side`` ("project" or "floor") doing ``warm``
    deliveries of the intake workload of ``warm + n`` and then ``k`` more (0 or ``n``), into a new file in
    ``folder``. Whatever ``k`` is, the same is prepared first (the project's texts; the floor's rows, which the
    parent pickled there), so the difference between two runs is the ``k`` deliveries alone."""
    import pickle

    from .store import BareWriter, Store

    if side == "project":
        from .envelope import loads_strict, parse_envelope
        from .runtime import deliver

        texts = intake_workload(warm + n)
        store = Store.create(Path(folder) / f"project-{k}.db")
        for text in texts[:warm + k]:
            deliver(store, parse_envelope(loads_strict(text)))
        store.close()
        return
    with open(Path(folder) / "rows.pickle", "rb") as fh:
        batches, machines = pickle.load(fh)
    floor = BareWriter(str(Path(folder) / f"floor-{k}.db"), machines=machines)
    todo = [b for b in batches if b[0] <= warm + k]
    floor.write(todo)
    floor.close()


def bench_instructions(n: int = 1000, *, progress: bool = False) -> dict:
    """Instructions a delivery, counted by valgrind's callgrind: the project's whole intake path and its floor
    (:func:`bench_intake`'s: bare sqlite3 writing the same rows), each in a child process run twice, with
    :data:`INSTRUCTIONS_WARM` deliveries and with ``n`` more; the difference over ``n`` is one delivery's cost.
    A count, not a time: the same each run whatever else the machine is doing (``PYTHONHASHSEED=0``), so a
    change worth 1% shows as 1%, where wall time on a shared machine swings by a fifth. It counts work done in
    user space, not time spent waiting on the disk (a commit's writes are system calls): a complement to
    ``bench intake``, not its target. Needs valgrind (Debian's package ``valgrind``)."""
    import pickle
    import re
    import shutil
    from concurrent.futures import ThreadPoolExecutor

    from .envelope import loads_strict, parse_envelope
    from .errors import ProtolabError
    from .runtime import deliver
    from .store import Store, machine_rows, rows_by_tick

    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise ProtolabError("counting instructions needs valgrind's callgrind (Debian's package valgrind), "
                            "which is not installed; bench intake times the same work", code="E_NO_VALGRIND")
    warm = INSTRUCTIONS_WARM
    with tempfile.TemporaryDirectory(prefix="protolab-bench-instructions-") as tmp, _progress(progress) as bar:
        job = bar.add_task("the floor's rows (uncounted)", total=4)
        store = Store.create(Path(tmp) / "rows.db")
        for text in intake_workload(warm + n):
            deliver(store, parse_envelope(loads_strict(text)))
        batches = [b for b in rows_by_tick(store) if b[0] > 0]  # (tick 0 is the schema and the machine)
        with open(Path(tmp) / "rows.pickle", "wb") as fh:
            pickle.dump((batches, machine_rows(store)), fh)
        store.close()
        counted = sum(1 for b in batches if warm < b[0] <= warm + n)
        bar.update(job, description="callgrind: the project and the floor, each without and with the counted "
                                    "deliveries")
        env = dict(os.environ, PYTHONHASHSEED="0")
        code = ("import sys; from sim.bench import instructions_child as c; "
                "c(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])")

        def count(side: str, k: int) -> int:
            done = subprocess.run([valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c",
                                   code, side, str(warm), str(n), str(k), tmp], capture_output=True, text=True, env=env)
            found = re.search(r"Collected : (\d+)", done.stderr)
            if done.returncode != 0 or found is None:
                tail = (done.stderr.strip().splitlines() or ["(nothing)"])[-1]
                raise ProtolabError(f"callgrind could not count the {side} ({k} deliveries): {tail}", code="E_BENCH")
            bar.advance(job)
            return int(found.group(1))

        runs = [("project", 0), ("project", n), ("floor", 0), ("floor", n)]
        with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
            p0, pn, f0, fn = pool.map(lambda r: count(*r), runs)
    project, floor = (pn - p0) / n, (fn - f0) / counted
    return {
        "benchmark": "instructions",
        "n": n,
        "warm": warm,
        "project_per_delivery": round(project),
        "floor_per_delivery": round(floor),
        "ratio": round(project / floor, 3),  # project over floor, as every bench: here instructions, so over 1
        "floor_batches": counted,
        "counts": {"project": [p0, pn], "floor": [f0, fn]},
        "python": sys.version.split()[0],
    }


#: The light commands ``bench startup`` times on a small run of its own (sim/views.py runs them without Typer),
#: each as ``protolab WORDS --db RUN``.
LIGHT_COMMANDS = (("state",), ("events",), ("messages",), ("machine", "show"), ("check",))


def bench_startup(repeat: int = 21, commands: bool = True) -> dict:
    """Best-of-``repeat`` wall time of ``protolab --help`` (and ``--version``) against ``python -c pass``;
    with ``commands``, of each light command too (``state``, ``events``, ``messages``, ``machine show``,
    ``check``) on a small run (publish-report) made first in a temporary folder.

    The commands take turns, round by round, so a burst of load on a shared machine falls on all
    of them alike; measured one after the other (seven of each), the ratio drifted from 1.0 to 2.2 on a
    quiet machine, interleaved it holds within about a tenth."""
    env = dict(os.environ, COLUMNS="100")
    with tempfile.TemporaryDirectory(prefix="protolab-bench-startup-") as tmp:
        argvs = {"help": [sys.executable, "-m", "sim", "--help"], "version": [sys.executable, "-m", "sim", "--version"],
                 "floor": [sys.executable, "-c", "pass"]}
        if commands:
            db = str(Path(tmp) / "run.db")
            _run_ok([sys.executable, "-m", "sim", "run", "publish-report", "--db", db], "the small run")
            for words in LIGHT_COMMANDS:
                argvs[" ".join(words)] = [sys.executable, "-m", "sim", *words, "--db", db]
        times: dict[str, list[float]] = {k: [] for k in argvs}
        for _ in range(repeat):
            for name, argv in argvs.items():
                t0 = time.perf_counter()
                subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
                times[name].append(time.perf_counter() - t0)
    best = {k: min(v) for k, v in times.items()}
    help_s, version_s, floor_s = best["help"], best["version"], best["floor"]
    light = {" ".join(w): {"ms": round(best[" ".join(w)] * 1000, 1), "ratio": round(best[" ".join(w)] / floor_s, 3)}
             for w in LIGHT_COMMANDS if " ".join(w) in best}
    return {
        "benchmark": "startup",
        "help_ms": round(help_s * 1000, 1),
        "version_ms": round(version_s * 1000, 1),
        "floor_ms": round(floor_s * 1000, 1),
        # project over floor, as every bench: here milliseconds, so over 1 (the target: at most 3)
        "ratio": round(help_s / floor_s, 3),
        "version_ratio": round(version_s / floor_s, 3),
        "budget_ms": 300,
        "within_budget": help_s < 0.300,
        # the target: each within 3x a bare interpreter's start
        "within_3x": max(help_s, version_s) <= 3 * floor_s,
        # the light commands on a small run (publish-report), each over the same floor; the same target
        "commands": light,
        "commands_within_3x": all(c["ratio"] <= 3 for c in light.values()),
    }


#: how many deliveries of a simulated run ``sim_one`` times before it times the floor up to the same commit
SIM_SLICE = 250


def sim_one(n: int, seed: int = 0) -> dict:
    """One stress run of ``n`` tasks on disk, then the floor (run in a child process).

    The floor is the same run's write statements (every INSERT, UPDATE, BEGIN and COMMIT with
    its values, recorded from a second, identical run: the simulator is deterministic) executed
    verbatim by bare sqlite3 into an empty file: the same rows in the same transactions, with
    no reads, no parsing, no agents and no logic. Both durabilities are measured, each beside its
    own floor: one transaction per delivery (the ratio the target is about, comparable with the
    history in docs/performance.md) and the grouped commits 'protolab run' uses.
    """
    import dataclasses
    import resource

    from .runner import run_scenario
    from .scenario import load_scenario
    from .store import StatementReplayer, write_recorder

    sc = load_scenario("stress")
    sc = dataclasses.replace(sc, stress=dataclasses.replace(sc.stress, tasks=n))
    with tempfile.TemporaryDirectory(prefix="protolab-bench-sim-") as tmp:
        # A warm-up run of one task, not timed: a run imports Faker and its providers on first use (about
        # 50 ms, once a process), which only whichever mode runs first would pay; the floor's imports are
        # not timed either.
        run_scenario(dataclasses.replace(sc, stress=dataclasses.replace(sc.stress, tasks=1)), seed=seed,
                     db=Path(tmp) / "warm-up.db", group_commits=1).close()
        modes = {}
        clock = time.perf_counter
        for mode, group in (("per_delivery", 1), ("grouped", None)):
            kw = {} if group is None else {"group_commits": group}
            # the floor's statements first, from a run of its own (the simulator is deterministic: the
            # project's run below must reach the same state, or the figures are not like for like)
            sql_path = Path(tmp) / f"writes-{mode}.sql"
            with open(sql_path, "w", encoding="utf-8") as fh:
                captured = run_scenario(sc, seed=seed, db=Path(tmp) / f"capture-{mode}.db", tracer=write_recorder(fh), **kw)
                captured_digest = captured.state_digest()
                captured.close()
            floor_path = str(Path(tmp) / f"floor-{mode}.db")
            floor = StatementReplayer(floor_path, open(sql_path, encoding="utf-8"))
            if group == 1:
                # One transaction per delivery (the ratio the target is about): the project's run and the floor
                # alternate, SIM_SLICE deliveries of the run and then the floor's statements up to the same
                # number of commits, so the two see the same load (the disk's commit latency drifts by a fifth
                # within seconds on a shared machine); the project's clock stops while the floor runs.
                paused = [0.0, 0]

                def slice_floor(_out, live, paused=paused, floor=floor) -> None:
                    paused[1] += 1
                    if paused[1] % SIM_SLICE == 0:
                        t = clock()
                        floor.play(until_commits=live.commits)
                        paused[0] += clock() - t

                t0 = clock()
                store = run_scenario(sc, seed=seed, db=Path(tmp) / f"project-{mode}.db", on_delivery=slice_floor, **kw)
                project_s = clock() - t0 - paused[0]
            else:
                t0 = clock()
                store = run_scenario(sc, seed=seed, db=Path(tmp) / f"project-{mode}.db", **kw)
                project_s = clock() - t0
            floor.play()
            # the durable end the project's run pays inside its timing (put_in_place): its checkpoint and check
            # are recorded statements the floor replayed; before 2026-12-07 it stopped there, without the
            # fsyncs of the file and its folder that the project pays
            floor.finish(floor_path)
            floor.close()  # (and the statements' file)
            sql_path.unlink()
            counts = store.counts()
            digest = store.state_digest()
            commits = int(store.get_meta("commits") or 0)  # as the run sealed it
            store.close()
            modes[mode] = (project_s, floor.spent, commits, floor.commits, captured_digest == digest, digest)
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        project_s, floor_s, commits, floor_commits, same, digest = modes["per_delivery"]
        same = same and modes["grouped"][4] and modes["grouped"][5] == digest
        # the whole command a user runs (simulation, summary, check), in its own process
        cmd = subprocess.run([sys.executable, "-m", "sim.cli", "run", "stress", "--tasks", str(n), "--seed", str(seed),
                              "--db", str(Path(tmp) / "command.db"), "--json"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if cmd.returncode not in (0, 1):
            raise RuntimeError(f"protolab run failed: {cmd.stderr.strip()[-300:]}")
        command_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    deliveries = counts["deliveries"]
    project = deliveries / project_s
    floor_rate = deliveries / floor_s
    g_project_s, g_floor_s, g_commits, g_floor_commits, _same, _digest = modes["grouped"]
    return {
        "tasks": n,
        "deliveries": deliveries,
        "project_transactions": commits,
        "floor_transactions": floor_commits,
        "deterministic": same,
        "project_per_s": round(project, 1),
        "floor_per_s": round(floor_rate, 1),
        "ratio": round(project / floor_rate, 3),
        "project_seconds": round(project_s, 2),
        "floor_seconds": round(floor_s, 2),
        "peak_rss_mb": round(peak_kb / 1024, 1),
        "command_peak_rss_mb": round(command_kb / 1024, 1),
        # what 'protolab run' does by default: a commit every GROUP_COMMITS deliveries, beside a floor
        # replaying the same grouped transactions
        "grouped": {
            "project_per_s": round(deliveries / g_project_s, 1),
            "floor_per_s": round(deliveries / g_floor_s, 1),
            "ratio": round(g_floor_s / g_project_s, 3),
            "project_transactions": g_commits,
            "floor_transactions": g_floor_commits,
            "faster_than_per_delivery": round(project_s / g_project_s, 2),
        },
    }


#: sizes up to this many tasks are run ``repeat`` times by ``bench_sim``; larger ones once (minutes each)
SIM_REPEAT_UP_TO = 10_000


def bench_sim(sizes=(1000, 10000, 100000), *, progress: bool = False, repeat: int = 3) -> dict:
    """The stress scenario at each size, each in its own process so peak memory is per size.

    A size of at most :data:`SIM_REPEAT_UP_TO` tasks is run ``repeat`` times (each a fresh process
    timing the project and then its floor); the run with the median per-delivery ratio is reported,
    with every run's ratio (``ratios``). One run swings a fifth either way with the disk's commit
    latency on a shared machine."""
    rows = []
    from rich.console import Console

    console = Console(stderr=True)
    for n in sizes:
        times = max(1, repeat) if n <= SIM_REPEAT_UP_TO else 1
        runs = []
        for k in range(times):
            if progress:
                console.print(f"stress scenario, {n:,} tasks" + (f" ({k + 1}/{times})" if times > 1 else "") + " ...")
            out = _child([sys.executable, "-m", "sim.bench", "sim-one", str(n)])
            if out.returncode != 0:
                raise RuntimeError(f"bench sim at {n} tasks failed: {out.stderr.strip().splitlines()[-1:]}")
            runs.append(json.loads(out.stdout))
        row = sorted(runs, key=lambda r: r["ratio"])[len(runs) // 2]
        row["ratios"] = [r["ratio"] for r in runs]
        rows.append(row)
    return {"benchmark": "sim", "sizes": rows, "python": sys.version.split()[0]}


def trace_one(n: int, repeat: int = 1) -> dict:
    """``protolab trace validate`` on a generated ``n``-message trace, as a command, beside two floors,
    each the fastest plain reading of the same file by the same interpreter: ``json.load``, and msgspec's
    raw decode (to dicts and lists, with the collector off, as the command runs). Each command is timed
    ``repeat`` times, interleaved; the best counts, with its own peak RSS. Then, in this process: the
    validator beside ``json.load`` of the same file, and the fast path from the bytes (collector off)."""
    import gc
    import resource

    from .protocol import validate
    from .protocol.fast import validate_bytes

    with tempfile.TemporaryDirectory(prefix="protolab-bench-trace-") as tmp:
        path = Path(tmp) / "trace.json"
        # written by a child: this process stays small, so the children it starts report their own peaks
        subprocess.run([sys.executable, "-c", "import json, sys; from sim.protocol import synthetic_trace; "
                        "json.dump(synthetic_trace(int(sys.argv[2])), open(sys.argv[1], 'w', encoding='utf-8'))",
                        str(path), str(n)], check=True)
        size = path.stat().st_size
        # what a user runs, end to end (start-up, read, strict parse, validate, report), beside the
        # plainest readings of the same file by the same interpreter
        runs = {
            "command": [sys.executable, "-m", "sim.cli", "trace", "validate", str(path), "--json"],
            "json_load": [sys.executable, "-c", "import json, sys; json.load(open(sys.argv[1], encoding='utf-8'))",
                          str(path)],
            "msgspec": [sys.executable, "-c", "import gc; gc.disable(); import msgspec, sys; "
                        "msgspec.json.decode(open(sys.argv[1], 'rb').read())", str(path)],
        }
        best: dict[str, tuple[float, float]] = {}
        for _ in range(max(1, repeat)):
            for name, argv in runs.items():
                f = command_figures(argv)
                if f["exit"] not in ((0, 1) if name == "command" else (0,)):
                    raise RuntimeError(f"{name} failed: {f['stderr']}")
                if name not in best or f["wall_s"] < best[name][0]:
                    best[name] = (f["wall_s"], f["peak_mb"])
        t0 = time.perf_counter()
        with open(path, encoding="utf-8") as fh:
            trace = json.load(fh)
        load_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        report = validate(trace)
        validate_s = time.perf_counter() - t1
        del trace
        raw = path.read_bytes()
        gc.disable()
        try:
            t1 = time.perf_counter()
            quick = validate_bytes(raw)
            fast_s = time.perf_counter() - t1
        finally:
            gc.enable()
        del raw
        if quick != report:
            raise RuntimeError("the fast path did not give the validator's report")
        del quick
    (command_s, command_rss), (floor_cmd_s, _), (msgspec_s, _) = best["command"], best["json_load"], best["msgspec"]
    return {
        "command_seconds": round(command_s, 2),
        "json_load_command_seconds": round(floor_cmd_s, 2),
        "command_ratio": round(command_s / floor_cmd_s, 3),
        "msgspec_command_seconds": round(msgspec_s, 2),
        "msgspec_ratio": round(command_s / msgspec_s, 3),
        "command_peak_rss_mb": round(command_rss, 1),
        "json_load_command_peak_rss_mb": round(best["json_load"][1], 1),
        "msgspec_command_peak_rss_mb": round(best["msgspec"][1], 1),
        "repeat": max(1, repeat),
        "messages": n,
        "file_mb": round(size / 2**20, 1),
        "valid": report.valid,
        "json_load_seconds": round(load_s, 2),
        "validate_seconds": round(validate_s, 2),
        "ratio": round(validate_s / load_s, 3),
        "fast_validate_seconds": round(fast_s, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def trace_memory(sizes=(10_000, 100_000, 1_000_000)) -> dict:
    """Peak resident memory (``wait4``) of ``trace validate --json`` and ``trace diagram`` on a generated
    valid trace of each size, beside two floors doing the same reading the plainest way: ``json.load``
    of the file and a loop over its messages (the whole parse), and the file read a megabyte at a time
    (the least a reader of it can hold). ``trace export`` needs a run of that size: see
    docs/performance.md's figures for it."""
    rows = []
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix="protolab-bench-trace-mem-") as tmp:
            path = Path(tmp) / "trace.json"
            subprocess.run([sys.executable, "-c", "import json, sys; from sim.protocol import synthetic_trace; "
                            "json.dump(synthetic_trace(int(sys.argv[2])), open(sys.argv[1], 'w', encoding='utf-8'))",
                            str(path), str(n)], check=True)
            runs = {
                "validate": [sys.executable, "-m", "sim.cli", "trace", "validate", str(path), "--json"],
                "diagram": [sys.executable, "-m", "sim.cli", "trace", "diagram", str(path)],
                "floor_json_load": [sys.executable, "-c", "import json, sys\nt = json.load(open(sys.argv[1], encoding='utf-8'))"
                                    "\nn = 0\nfor m in t['messages']:\n    n += 1", str(path)],
                "floor_read": [sys.executable, "-c", "import sys\nf = open(sys.argv[1], 'rb')\nwhile f.read(1 << 20):\n    pass",
                               str(path)],
            }
            row: dict = {"messages": n, "file_mb": round(path.stat().st_size / 2**20, 1)}
            for name, argv in runs.items():
                f = command_figures(argv)  # (through a small launcher: see command_figures)
                if f["exit"] not in (0, 1):
                    raise RuntimeError(f"{name} failed: {f['stderr']}")
                row[f"{name}_mb"] = f["peak_mb"]
                row[f"{name}_seconds"] = round(f["wall_s"], 1)
                row[f"{name}_cpu_seconds"] = round(f["cpu_s"], 1)
            for name in ("validate", "diagram"):
                row[f"{name}_vs_json_load"] = round(row[f"{name}_mb"] / row["floor_json_load_mb"], 3)
                row[f"{name}_vs_read"] = round(row[f"{name}_mb"] / row["floor_read_mb"], 2)
            rows.append(row)
    return {"benchmark": "trace-memory", "sizes": rows, "python": sys.version.split()[0]}


def bench_trace(n: int = 1_000_000, repeat: int = 1) -> dict:
    out = _child([sys.executable, "-m", "sim.bench", "trace-one", str(n), str(repeat)])
    if out.returncode != 0:
        raise RuntimeError(f"bench trace failed: {out.stderr.strip().splitlines()[-1:]}")
    return {"benchmark": "trace", **json.loads(out.stdout)}


def _child(argv: list[str]) -> subprocess.CompletedProcess:
    """Run a bench child to the end; if this process is interrupted (Ctrl-C, SIGTERM, SIGHUP), ask
    the child to stop with SIGTERM and wait for it, so it removes its temporary folder (a SIGKILL,
    what subprocess.run sends, would leave gigabytes behind)."""
    import signal

    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=60)
        except BaseException:
            proc.kill()
            proc.wait()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def writers_workload(writer: int, n: int, *, shared: int = 0, trace: str = "R-W") -> list[dict]:
    """The envelopes one of several concurrent writers delivers (JSON-ready dicts).

    All of them belong to one conversation, ``trace`` (a database is one conversation: a message of
    another trace breaks its scope). ``n`` task requests of its own (tasks ``T-<writer>-<i>``, distinct from every other writer's),
    and for each of ``shared`` tasks ``S-<k>`` that every writer contends for: the same request
    (one writer's lands accepted, the others' duplicate) and a start under a key of its own (the
    compare-and-swap lets exactly one move the task ready -> running; the others are rejected).
    """
    from .envelope import build_envelope

    def env(mid, task, sender, recipient, typ, payload, key):
        return build_envelope(message_id=mid, trace_id=trace, task_id=task, sender=sender, recipient=recipient, type=typ,
                              payload=payload, idempotency_key=key, created_at="2026-07-13T04:00:01Z").to_dict()

    out = []
    every = max(1, n // shared) if shared else 0
    k = 0
    for i in range(n):
        out.append(env(f"M-{writer}-{i}", f"T-{writer}-{i}", "manager", "researcher", "task_request",
                       {"goal": f"writer {writer} task {i}", "budget": 3}, f"{trace}:T-{writer}-{i}:request"))
        if shared and i % every == every - 1 and k < shared:
            out.append(env(f"S-{k}-request", f"S-{k}", "manager", "researcher", "task_request",
                           {"goal": f"shared task {k}", "budget": 3}, f"{trace}:S-{k}:request"))
            out.append(env(f"S-{k}-start-{writer}", f"S-{k}", "researcher", "manager", "task_started",
                           {"lease_version": 1}, f"{trace}:S-{k}:started:{writer}"))
            k += 1
    return out


def bench_writers(processes: int = 4, n: int = 10_000, *, shared: int = 100) -> dict:
    """``processes`` concurrent ``protolab deliver`` processes on one database, each ``n`` deliveries
    of its own plus contended ones (:func:`writers_workload`), beside one process delivering all of
    them. Reports deliveries per second, deliveries lost and clock violations (both must be 0)."""
    import signal

    from .invariants import check
    from .store import Store

    def deliver_all(db: Path, files: list[Path]) -> float:
        procs: list[subprocess.Popen] = []
        t0 = time.perf_counter()
        try:
            procs = [subprocess.Popen([sys.executable, "-m", "sim.cli", "deliver", str(f), "--db", str(db), "--json"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for f in files]
            errors = [p.communicate()[1] for p in procs]
        except BaseException:
            for p in procs:
                with contextlib.suppress(ProcessLookupError):
                    p.send_signal(signal.SIGTERM)
            for p in procs:
                p.wait()
            raise
        seconds = time.perf_counter() - t0
        bad = [e.decode(errors="replace").strip() for p, e in zip(procs, errors) if p.returncode != 0]
        if bad:
            raise RuntimeError(f"a writer failed: {bad[0][-300:]}")
        return seconds

    def measure(db: Path) -> tuple[int, int, bool]:
        with Store.open(db, readonly=True) as store:
            rows = store.last_delivery()
            clock = next(r for r in check(store) if r.name == "CLOCK_MONOTONIC")
            return rows, len(clock.witnesses), True

    with tempfile.TemporaryDirectory(prefix="protolab-bench-writers-") as tmp:
        root = Path(tmp)
        batches = [writers_workload(w, n, shared=shared) for w in range(processes)]
        files = []
        for w, batch in enumerate(batches):
            files.append(root / f"writer-{w}.json")
            files[-1].write_text(json.dumps(batch), encoding="utf-8")
        (root / "all.json").write_text(json.dumps([e for b in batches for e in b]), encoding="utf-8")
        total = sum(len(b) for b in batches)
        out = {}
        for label, db, inputs in (("concurrent", root / "many.db", files), ("one_process", root / "one.db", [root / "all.json"])):
            Store.create(db).close()
            seconds = deliver_all(db, inputs)
            rows, violations, _ = measure(db)
            out[label] = {"processes": len(inputs), "deliveries": total, "seconds": round(seconds, 2),
                          "per_s": round(total / seconds, 1), "lost": total - rows, "clock_violations": violations}
    return {"benchmark": "writers", "per_process": n, "shared_tasks": shared, **out,
            "ratio": round(out["concurrent"]["per_s"] / out["one_process"]["per_s"], 3), "python": sys.version.split()[0]}


def _whole_run(path: Path, tasks: int) -> bool:
    """Is ``path`` a finished stress run of ``tasks`` tasks: whole, and every task there?"""
    from .store import Store, probe_file

    ok, has_schema = probe_file(path)
    if not (ok and has_schema):
        return False
    try:
        with Store.open(path, verify=False) as store:
            return store.counts()["tasks"] == tasks
    except Exception:
        return False


def bench_crash(cycles: int = 200, tasks: int = 20_000, *, seed: int = 0, progress=None) -> dict:
    """The crash loop: ``cycles`` times, a ``protolab run stress --tasks N`` over a completed database
    is killed with SIGKILL at a random moment (seeded), and what it leaves is checked: the completed
    database is byte for byte as it was; the partial file the dead run left is whole
    (SQLite's integrity check), holds every invariant (the clock's and delivery ids' included) and
    replays to the same state (every delivery is one transaction: a kill leaves a consistent prefix);
    and the next run sweeps it. ``corrupt``, ``replay_mismatches``, ``invariant_failures`` and
    ``replaced`` must all be 0."""
    import random
    import signal

    from .invariants import check
    from .replay import replay_report
    from .store import SIDE_FILES, Store, probe_file

    rng = random.Random(seed)
    out = {"cycles": 0, "corrupt": 0, "replay_mismatches": 0, "invariant_failures": 0, "replaced": 0,
           "empty": 0, "finished_before_kill": 0, "deliveries_in_partials": []}
    with tempfile.TemporaryDirectory(prefix="protolab-bench-crash-") as tmp:
        root = Path(tmp)
        db = root / "out.db"
        def run_cmd(n: int, target: Path) -> list[str]:
            return [sys.executable, "-m", "sim.cli", "run", "stress", "--tasks", str(n), "--db", str(target), "--json"]

        cmd = run_cmd(tasks, db)
        for n, target in ((50, db), (tasks, root / "timing.db")):  # the completed run; then one whole, timed
            t0 = time.perf_counter()
            done = subprocess.run(run_cmd(n, target), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"the run to crash failed on its own: {done.stderr.strip()[-300:]}")
            whole = time.perf_counter() - t0
        kept = db.read_bytes()
        job = progress.add_task("kill -9 and check", total=cycles) if progress is not None else None
        for _ in range(cycles):
            p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                time.sleep(rng.uniform(0.3, max(0.4, whole * 0.95)))
            except BaseException:  # the bench itself stopped (Ctrl-C, SIGTERM): its run goes with it
                p.kill()
                p.wait()
                raise
            if p.poll() is not None:
                # On a busy machine the run can end before its moment to die: a whole run rightly
                # replaced the database. That cycle tested no crash; put the database back.
                out["finished_before_kill"] += 1
                db.write_bytes(kept)
                for side in (root / "out.db-wal", root / "out.db-shm"):
                    side.unlink(missing_ok=True)
                if progress is not None:
                    progress.update(job, advance=1)
                continue
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGKILL)
            p.wait()
            if db.exists() and db.read_bytes() != kept and _whole_run(db, tasks):
                # killed after its last step (the atomic rename) while exiting: a whole run rightly
                # replaced the database, so this cycle tested no crash either
                out["finished_before_kill"] += 1
                db.write_bytes(kept)
                if progress is not None:
                    progress.update(job, advance=1)
                continue
            out["cycles"] += 1
            if not db.exists() or db.read_bytes() != kept:
                out["replaced"] += 1
            partials = [q for q in root.glob(".out.db.partial-*") if not q.name.endswith(SIDE_FILES)]
            for part in partials:
                ok, has_schema = probe_file(part)
                if not ok:
                    out["corrupt"] += 1
                    continue
                if not has_schema:  # killed before the schema was written: an empty file, nothing to check
                    out["empty"] += 1
                    continue
                try:
                    with Store.open(part, verify=False) as store:
                        out["deliveries_in_partials"].append(store.last_delivery())
                        if not all(r.ok for r in check(store)):
                            out["invariant_failures"] += 1
                        if not replay_report(store, redeliver_messages=False)["match"]:
                            out["replay_mismatches"] += 1
                except Exception:  # a partial protolab cannot even open counts as damaged
                    out["corrupt"] += 1
            for q in root.glob(".out.db.partial-*"):
                q.unlink()
            if progress is not None:
                progress.update(job, advance=1)
    d = out.pop("deliveries_in_partials")
    return {"benchmark": "crash", "tasks": tasks, "seed": seed, **out, "whole_run_seconds": round(whole, 2),
            "partial_deliveries_min": min(d, default=0), "partial_deliveries_max": max(d, default=0),
            "python": sys.version.split()[0]}



# ---------------------------------------------------------------------------------------------------
# The crash loop over every command that writes a run or a submission (issue 43, part 6)

#: The commands ``bench crash --command`` kills (``all``: each of them, the cycles shared).
CRASH_COMMANDS = ("run", "deliver", "lab-submit")


def _kill_minus_9(argv: list[str], *, step: str | None = None, after: float = 0.0, env: dict | None = None) -> bool:
    """Start ``argv`` and SIGKILL it: at hook step ``step`` (it stops itself there with SIGSTOP, seen with
    ``waitpid(WUNTRACED)``: a kill at a known point, no timing), else ``after`` seconds in. False if it
    ended on its own first (then nothing was killed)."""
    import signal

    from .files import HOOK_ENV

    env = dict(os.environ if env is None else env)
    env.pop(HOOK_ENV, None)
    if step is not None:
        env[HOOK_ENV] = f"stop@{step}"
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        if step is not None:
            _, status = os.waitpid(p.pid, os.WUNTRACED)
            if not os.WIFSTOPPED(status):
                p.returncode = os.waitstatus_to_exitcode(status)
                return False
        else:
            try:
                p.wait(timeout=after)
                return False
            except subprocess.TimeoutExpired:
                pass
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        return True
    except BaseException:  # the bench itself stopped (Ctrl-C, SIGTERM): its child goes with it
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, signal.SIGKILL)
        p.wait()
        raise


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "sim.cli", *args]


def _run_ok(argv: list[str], what: str, env: dict | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed on its own: {done.stderr.strip()[-300:]}")
    return done


def _partial_files(target: Path) -> list[Path]:
    return sorted(target.parent.glob(f".{target.name}.partial-*"))


class _CrashTarget:
    """One command of the crash loop: how to start it, its hook steps, and what a kill must leave."""

    name = ""
    steps: tuple[str, ...] = ()

    def __init__(self, root: Path):
        self.root = root
        self.whole_seconds = 0.0

    def argv(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict | None:
        return None

    def judge(self, out: dict, phase: str | None) -> str:
        """Check what the kill left (counting problems into ``out``); return the phase it landed in."""
        raise NotImplementedError

    def reset(self) -> None:
        """Put the target back as it was before the cycle (a whole new file is the right outcome too)."""


def _check_run_file(path: Path, out: dict) -> tuple[bool, int]:
    """A run file a kill left (the partial one, or a database written in place): whole, every invariant
    held, replayed to the same state. Returns (has the schema, deliveries in it); problems counted."""
    from .invariants import check
    from .replay import replay_report
    from .store import Store, probe_file

    ok, has_schema = probe_file(path)
    if not ok:
        out["corrupt"] += 1
        return False, 0
    if not has_schema:
        return False, 0
    try:
        with Store.open(path, verify=False) as store:
            n = store.last_delivery()
            if not all(r.ok for r in check(store)):
                out["invariant_failures"] += 1
            if not replay_report(store, redeliver_messages=False)["match"]:
                out["replay_mismatches"] += 1
            return True, n
    except Exception:  # a file protolab cannot even open counts as damaged
        out["corrupt"] += 1
        return False, 0


class _RunCrash(_CrashTarget):
    """``protolab run stress --tasks N --db out.db`` over a completed run: after a kill, out.db is the old
    run byte for byte or the whole new one; a partial file left is whole and replays; the next run's sweep
    leaves none. Hook steps: the first group commit and every step of put_in_place (sim/runfile.py)."""

    name = "run"

    def __init__(self, root: Path, tasks: int):
        from .runfile import STEPS

        super().__init__(root)
        self.tasks = tasks
        self.steps = ("committing#1", "committed#1") + STEPS
        self.db = root / "out.db"
        for n, target in ((50, self.db), (tasks, root / "timing.db")):  # the completed run; then one whole, timed
            t0 = time.perf_counter()
            _run_ok(self._argv(n, target), "the run to crash")
            self.whole_seconds = time.perf_counter() - t0
        (root / "timing.db").unlink()
        self.kept = self.db.read_bytes()

    @staticmethod
    def _argv(n: int, target: Path) -> list[str]:
        return _cli("run", "stress", "--tasks", str(n), "--db", str(target), "--json")

    def argv(self) -> list[str]:
        return self._argv(self.tasks, self.db)

    def judge(self, out: dict, phase: str | None) -> str:
        from .runfile import remove_stale_partials

        db = self.db
        new = False
        if not db.exists():
            out["lost"] += 1
        elif db.read_bytes() != self.kept:
            if _whole_run(db, self.tasks):
                new = True
            else:
                out["lost"] += 1
        main_partials = [q for q in _partial_files(db) if not q.name.endswith(("-wal", "-shm", "-journal"))]
        seen = None
        for part in main_partials:
            has_schema, n = _check_run_file(part, out)
            seen = "writing" if n else ("schema written" if has_schema else "creating the file")
            out["deliveries_in_partials"].append(n)
        remove_stale_partials(db)  # what the next run of out.db does first
        if _partial_files(db):
            out["partials_left"] += 1
        if phase is None:
            phase = "after the rename" if new else seen or "starting (no file yet)"
        return phase

    def reset(self) -> None:
        from .store import SIDE_FILES

        if not self.db.exists() or self.db.read_bytes() != self.kept:
            self.db.write_bytes(self.kept)
        for side in SIDE_FILES:
            Path(f"{self.db}{side}").unlink(missing_ok=True)
        for q in _partial_files(self.db):
            q.unlink()


class _DeliverCrash(_CrashTarget):
    """``protolab deliver FILE --db out.db`` into a run holding the file's first envelopes: after a kill,
    out.db is whole, holds every invariant, replays, and holds exactly a prefix of the file (each
    delivery its own transaction); delivering the file again lands the rest (none lost). Hook steps:
    just before and just after a commit (the first, one in the middle, the last)."""

    name = "deliver"
    FIRST = 20

    def __init__(self, root: Path, n: int):
        from .store import Store

        super().__init__(root)
        self.n = max(n, self.FIRST + 2)
        self.file = root / "envelopes.json"
        envs = writers_workload(0, self.n)
        self.file.write_text(json.dumps(envs), encoding="utf-8")
        first = root / "first.json"
        first.write_text(json.dumps(envs[: self.FIRST]), encoding="utf-8")
        self.db = root / "delivered.db"
        Store.create(self.db).close()
        _run_ok(_cli("deliver", str(first), "--db", str(self.db), "--json"), "the first deliveries")
        self.kept = self.db.read_bytes()
        with Store.open(self.db, readonly=True) as store:
            self.base_deliveries = store.last_delivery()
        t0 = time.perf_counter()
        _run_ok(self.argv(), "the deliveries to crash")
        self.whole_seconds = time.perf_counter() - t0
        self.reset()
        mid = self.n // 2
        self.steps = tuple(f"{w}#{k}" for k in (1, mid, self.n) for w in ("committing", "committed"))

    def argv(self) -> list[str]:
        return _cli("deliver", str(self.file), "--db", str(self.db), "--json")

    def judge(self, out: dict, phase: str | None) -> str:
        from .envelope import parse_envelopes
        from .files import remove_stale_partials
        from .runtime import deliver
        from .store import Store

        has_schema, deliveries = _check_run_file(self.db, out)
        landed = deliveries - self.base_deliveries if has_schema else -1
        if landed < 0:
            out["lost"] += 1
            return phase or "unreadable"
        with Store.open(self.db, verify=False) as store:
            tasks = store.counts()["tasks"]
            if tasks != self.FIRST + max(0, landed - self.FIRST):  # the file's first `landed` envelopes, no other
                out["not_a_prefix"] += 1
            if phase is not None and "#" in phase:  # stopped just before (after) commit k: k-1 (k) landed
                step, k = phase.split("#")
                if landed != int(k) - (step == "committing"):
                    out["not_a_prefix"] += 1
            for env in parse_envelopes(self.file.read_text(encoding="utf-8"), source=str(self.file)):
                deliver(store, env)  # the file delivered again: the rest lands, what landed is a duplicate
            if store.counts()["tasks"] != self.n:
                out["lost"] += 1
        remove_stale_partials(self.db)
        if _partial_files(self.db):
            out["partials_left"] += 1
        out["deliveries_in_partials"].append(landed)
        if phase is None:
            phase = ("starting (none landed)" if landed == 0 else "every delivery landed" if landed >= self.n
                     else "delivering")
        return phase

    def reset(self) -> None:
        from .store import SIDE_FILES

        self.db.write_bytes(self.kept)
        for side in SIDE_FILES:
            Path(f"{self.db}{side}").unlink(missing_ok=True)


class _LabSubmitCrash(_CrashTarget):
    """``protolab lab submit N -o sub.protolab`` of a played lab: after a kill, sub.protolab is absent (as
    before) or a whole submission that ``lab verify`` accepts; the run and progress it read are byte for
    byte as they were; the next write of it sweeps any partial file. Hook steps: those of
    sim/files.py's written_whole."""

    name = "lab-submit"

    def __init__(self, root: Path, lab_setup):
        from .files import FILE_STEPS

        super().__init__(root)
        self.steps = FILE_STEPS
        work = root / "lab"
        work.mkdir()
        self.lab, self.run_db, self.progress = lab_setup(work)
        self.inputs = {p: p.read_bytes() for p in (self.run_db, self.progress)}
        self.out = work / "sub.protolab"
        self.tmpdir = root / "lab-tmp"  # $TMPDIR of the command: anything it leaves there is counted
        self.tmpdir.mkdir()
        t0 = time.perf_counter()
        _run_ok(self.argv(), "the lab submission to crash", env=self.env())
        self.whole_seconds = time.perf_counter() - t0
        self.reset()

    def argv(self) -> list[str]:
        return _cli("lab", "submit", str(self.lab), "-o", str(self.out), "--db", str(self.run_db),
                    "--progress", str(self.progress))

    def env(self) -> dict:
        return dict(os.environ, TMPDIR=str(self.tmpdir))  # where its copy of the run is judged: counted below

    def judge(self, out: dict, phase: str | None) -> str:
        import shutil

        from .files import remove_stale_partials

        new = self.out.exists()
        if new:
            verified = subprocess.run(_cli("lab", "verify", str(self.out), "--json"), stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
            if verified.returncode != 0:
                out["lost"] += 1
        partial = any(q.is_file() for q in _partial_files(self.out))  # (its working folder is there from the start)
        if any(p.read_bytes() != b for p, b in self.inputs.items()):
            out["inputs_changed"] += 1
        remove_stale_partials(self.out)  # what the next write of sub.protolab does first
        if _partial_files(self.out):
            out["partials_left"] += 1
        left = list(self.tmpdir.iterdir())
        out["temporary_folders_left"] += len(left)
        for d in left:
            shutil.rmtree(d, ignore_errors=True)
        if phase is None:
            phase = "after the rename" if new else "writing the file" if partial else "judging (no file yet)"
        return phase

    def reset(self) -> None:
        self.out.unlink(missing_ok=True)
        for q in _partial_files(self.out):
            q.unlink()


def bench_crash_all(cycles: int = 200, *, commands=CRASH_COMMANDS, tasks: int = 2000, envelopes: int = 2000,
                    lab_setup=None, seed: int = 0, progress=None) -> dict:
    """The crash loop over ``commands`` (of :data:`CRASH_COMMANDS`): ``cycles`` kill -9 shared between them.
    Every other cycle kills at a hook step (each step in turn: for ``run`` every step of put_in_place,
    the window between the checkpoint and the rename included), the rest at a seeded random moment of
    the command's whole run. After each kill the command's target is checked (see each target's class);
    ``corrupt``, ``lost``, ``replaced``, ``not_a_prefix``, ``invariant_failures``, ``replay_mismatches``,
    ``partials_left`` and ``inputs_changed`` must all be 0. Counts per command and per phase.
    ``lab_setup(folder) -> (lab number, run db, progress db)``: a played lab (the faces hand it in: the
    engine does not import the labs)."""
    import random

    rng = random.Random(seed)
    per = {c: cycles // len(commands) + (1 if i < cycles % len(commands) else 0) for i, c in enumerate(commands)}
    result = {}
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="protolab-bench-crash-") as tmp:
        for command in commands:
            root = Path(tmp) / command
            root.mkdir()
            job = progress.add_task(f"{command}: setting up", total=per[command]) if progress is not None else None
            t0 = time.perf_counter()
            if command == "run":
                target = _RunCrash(root, tasks)
            elif command == "deliver":
                target = _DeliverCrash(root, envelopes)
            elif command == "lab-submit":
                if lab_setup is None:
                    raise ValueError("lab-submit needs lab_setup")
                target = _LabSubmitCrash(root, lab_setup)
            else:
                raise ValueError(f"unknown command {command!r}")
            out = {"attempts": 0, "kills": 0, "finished_before_kill": 0, "corrupt": 0, "lost": 0, "not_a_prefix": 0,
                   "invariant_failures": 0, "replay_mismatches": 0, "partials_left": 0, "inputs_changed": 0,
                   "temporary_folders_left": 0, "deliveries_in_partials": [], "phases": {}}
            if progress is not None:
                progress.update(job, description=f"{command}: kill -9 and check")
            i = 0
            while out["kills"] < per[command] and out["attempts"] < 3 * per[command]:
                out["attempts"] += 1
                step = target.steps[(i // 2) % len(target.steps)] if i % 2 == 0 and target.steps else None
                i += 1
                killed = _kill_minus_9(target.argv(), step=step, env=target.env(),
                                       after=rng.uniform(0.05, max(0.1, target.whole_seconds * 0.98)))
                if not killed:  # it ended before its moment to die: that cycle tested no crash
                    out["finished_before_kill"] += 1
                    target.reset()
                    continue
                out["kills"] += 1
                phase = target.judge(out, None if step is None else step)
                key = f"{phase} (step)" if step is not None else phase
                out["phases"][key] = out["phases"].get(key, 0) + 1
                target.reset()
                if progress is not None:
                    progress.update(job, advance=1)
            d = out.pop("deliveries_in_partials")
            out["deliveries_min"], out["deliveries_max"] = min(d, default=0), max(d, default=0)
            out["whole_seconds"] = round(target.whole_seconds, 2)
            out["seconds"] = round(time.perf_counter() - t0, 1)
            result[command] = out
    bad = ("corrupt", "lost", "not_a_prefix", "invariant_failures", "replay_mismatches", "partials_left", "inputs_changed")
    return {"benchmark": "crash", "cycles": cycles, "seed": seed, "tasks": tasks, "envelopes": envelopes,
            "kills": sum(o["kills"] for o in result.values()),
            "problems": sum(o[k] for o in result.values() for k in bad), "commands": result,
            "seconds": round(time.perf_counter() - t_all, 1), "python": sys.version.split()[0]}


if __name__ == "__main__":  # pragma: no cover - the child process of bench_sim
    from .errors import catch_termination

    catch_termination()  # SIGTERM/SIGHUP unwind like Ctrl-C: the temporary folder goes
    if len(sys.argv) == 3 and sys.argv[1] == "sim-one":
        print(json.dumps(sim_one(int(sys.argv[2]))))
    elif len(sys.argv) in (3, 4) and sys.argv[1] == "trace-one":
        print(json.dumps(trace_one(int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) == 4 else 1)))
    else:
        print(json.dumps(bench_intake(int(sys.argv[1]) if len(sys.argv) > 1 else 2000), indent=2))



#: Datasette's table pages timed by ``bench web`` (the run's four big tables)
WEB_PAGES = ("tasks", "deliveries", "events", "messages")


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2]


def web_one(deliveries: int, *, pages, repeat: int = 5, progress=None, seed: int = 0) -> dict:
    """The browser figures for one stress run of about ``deliveries`` deliveries.

    Timeline: ``read_run`` and ``write`` as 'protolab timeline' does them, with the invariants
    checked (the default) and without (``--no-check``), each the best of ``repeat``; the floor is
    the same rows read through the store (each delivery with its envelope, every event) and written
    as plain JSON with ``json.dumps``: the same reading without the drawing. Datasette: each table
    page fetched ``repeat`` times through Datasette's in-process client (no server, no port) after
    one fetch of ``/``; the floor is the page's rows and the table's count through bare sqlite3.
    ``pages(db, tables, repeat)`` times Datasette's pages (:func:`sim.web.datasette.time_pages`: the
    face that serves them; the engine does not import it).
    """
    import dataclasses

    from . import timeline as tl
    from .runner import run_scenario
    from .scenario import load_scenario
    from .store import Store, bare_table_page

    sc = load_scenario("stress")
    tasks = max(2, round(deliveries / 5.33))  # the stress scenario makes about 5.3 deliveries a task
    sc = dataclasses.replace(sc, stress=dataclasses.replace(sc.stress, tasks=tasks))
    job = progress.add_task(f"timeline and Datasette, ~{deliveries:,} deliveries", total=3 * repeat + 2) if progress else None

    def step() -> None:
        if progress is not None:
            progress.update(job, advance=1)

    with tempfile.TemporaryDirectory(prefix="protolab-bench-web-") as tmp:
        db = Path(tmp) / "run.db"
        run_scenario(sc, seed=seed, db=db).close()
        step()
        timings = {"check": [], "no_check": [], "floor": []}
        size = floor_size = 0
        n_rows = 0
        for _ in range(repeat):
            for mode in ("check", "no_check"):
                t0 = time.perf_counter()
                store = Store.open(db, readonly=True)
                try:
                    picture = tl.read_run(store, db.name, check=mode == "check")
                finally:
                    store.close()
                size = tl.write([picture], Path(tmp) / "page.html", title="bench")
                timings[mode].append(time.perf_counter() - t0)
                n_rows = len(picture.rows)
                step()
            t0 = time.perf_counter()
            store = Store.open(db, readonly=True)
            try:
                rows = [[dict(d), dict(m)] for d, m in zip(store.iter_deliveries(), store.iter_deliveries_with_messages())]
                events = [dict(e) for e in store.iter_events()]
            finally:
                store.close()
            text = json.dumps({"deliveries": rows, "events": events}).encode("utf-8")
            (Path(tmp) / "floor.json").write_bytes(text)
            floor_size = len(text)
            timings["floor"].append(time.perf_counter() - t0)
            step()
        pages = pages(db, WEB_PAGES, repeat)
        floors = {t: _median(bare_table_page(str(db), t, 51, repeat)) for t in WEB_PAGES}
        step()
    project, no_check, floor = min(timings["check"]), min(timings["no_check"]), min(timings["floor"])
    return {
        "deliveries": n_rows,
        "tasks": tasks,
        "timeline": {
            "page_bytes": size,
            "bytes_per_delivery": round(size / max(1, n_rows)),
            "write_seconds": round(project, 4),
            "no_check_seconds": round(no_check, 4),
            "floor_seconds": round(floor, 4),
            "floor_bytes": floor_size,
            "ratio": round(project / floor, 2),
            "no_check_ratio": round(no_check / floor, 2),
        },
        "datasette": {
            t: {"page_ms": round(pages[t] * 1000, 2), "floor_ms": round(floors[t] * 1000, 3),
                "ratio": round(pages[t] / floors[t], 1)}
            for t in WEB_PAGES
        },
        "datasette_first_ms": round(pages["/"] * 1000, 1),
    }


def bench_web(sizes: list[int], *, pages, repeat: int = 5, progress=None) -> dict:
    """``web_one`` for each size (deliveries), smallest first."""
    return {"benchmark": "web", "repeat": repeat,
            "sizes": [web_one(n, pages=pages, repeat=repeat, progress=progress) for n in sizes],
            "python": sys.version.split()[0]}
