"""The architecture's rules, enforced: the core never imports UI libraries; SQL stays in the store."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SIM = Path(__file__).resolve().parent.parent / "sim"
CORE = ["sim.digest", "sim.envelope", "sim.machine", "sim.intake", "sim.store", "sim.runtime", "sim.samples", "sim.bench", "sim.benchmem",
        "sim.labs.catalog", "sim.labs.checks", "sim.labs.session", "sim.labs.verify", "sim.labs.submit", "sim.labs.paths",
        "sim.labs.facts", "sim.labs.explain", "sim.labs.readme", "sim.labs.judge",
        "sim.course.evaluate", "sim.course.sandbox", "sim.course.remote", "sim.timeline", "sim.store.browse",
        "sim.course.term", "sim.store.gradebook"]
SQL_WORDS = ("SELECT ", "INSERT ", "UPDATE ", "DELETE ", "CREATE TABLE", "PRAGMA ")


def test_the_core_never_imports_textual_or_typer():
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in CORE)
        + "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'typer'))\n"
        + "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def test_the_domain_layer_does_no_io():
    for name in ("digest", "envelope", "machine", "intake", "privacy", "events", "planner"):
        tree = ast.parse((SIM / f"{name}.py").read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and n.level == 0}
        assert not imported & {"sqlite3", "sqlite_utils", "os", "subprocess", "socket"}, name


def test_all_sql_lives_in_the_store_package():
    offenders = []
    for path in SIM.rglob("*.py"):
        if path.parent == SIM / "store":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if any(w in node.value for w in SQL_WORDS) and "sql" not in path.name:
                    offenders.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.Attribute) and node.attr in ("execute", "executemany", "executescript"):
                offenders.append(f"{path.name}:{node.lineno} .{node.attr}")
    assert offenders == []


# The floors, bottom up; a module may import its own floor or any below, never one above.
FLOORS = [
    ("base", {"sim", "sim.errors", "sim.files", "sim.frozen", "sim.resources"}),
    ("domain", {"sim.digest", "sim.versions", "sim.envelope", "sim.intent", "sim.machine", "sim.intake", "sim.privacy", "sim.events", "sim.planner", "sim.palette",
                "sim.consumer", "sim.wire", "sim.folds", "sim.store_api",
                "sim.protocol*"}),
    ("store", {"sim.store*"}),
    ("engine", {"sim.runtime", "sim.policy", "sim.design", "sim.plugins", "sim.agents", "sim.faults", "sim.scenario",
                "sim.invariants", "sim.replay", "sim.runner", "sim.live", "sim.conversation", "sim.bench", "sim.benchmem", "sim.samples", "sim.tour", "sim.docs",
                "sim.world", "sim.schedule", "sim.session", "sim.recovery", "sim.gathers", "sim.runfile", "sim.explore", "sim.model", "sim.shrink", "sim.shrinkcheck", "sim.timeline", "sim.a2a",
                "sim.procagent", "sim.contracts*"}),
    ("course", {"sim.course*", "sim.labs*"}),
    ("faces", {"sim.cli*", "sim.__main__", "sim.entry", "sim.views", "sim.output", "sim.tui*", "sim.web*"}),
]


def _floor(module: str) -> int:
    for i, (_, members) in enumerate(FLOORS):
        for m in members:
            if module == m or (m.endswith("*") and (module == m[:-1] or module.startswith(m[:-1] + "."))):
                return i
    raise AssertionError(f"{module} sits on no floor: add it to FLOORS and to docs/architecture.md")


def _imports():
    """(importer, imported, line) for every import of a sim module inside sim/."""
    for path in SIM.rglob("*.py"):
        parts = list(path.relative_to(SIM.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        module = ".".join(parts)
        package = parts if is_pkg else parts[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                elif node.module and node.module.split(".")[0] == "sim":
                    target = node.module
                else:
                    continue
                yield module, target, node.lineno
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "sim":
                        yield module, a.name, node.lineno


def test_every_engine_module_sits_on_a_floor():
    for path in SIM.rglob("*.py"):
        parts = list(path.relative_to(SIM.parent).with_suffix("").parts)
        _floor(".".join(parts[:-1] if parts[-1] == "__init__" else parts))


def test_imports_only_point_down_the_floors():
    upward = [f"{m}:{line} imports {t} ({FLOORS[_floor(m)][0]} -> {FLOORS[_floor(t)][0]})"
              for m, t, line in _imports() if _floor(t) > _floor(m)]
    assert upward == []


def test_the_domain_is_as_pure_as_the_protocol_package():
    """The domain and the protocol package: no database, processes, network, clocks, randomness or
    environment; what they decide depends only on their arguments. Two loaders read a file they
    are handed (a machine's TOML, the trace schema shipped beside the validator), and nothing else
    in these floors touches a file."""
    banned = {"sqlite3", "sqlite_utils", "os", "subprocess", "socket", "random", "time", "shutil",
              "tempfile", "threading", "multiprocessing", "urllib", "http", "io", "sys"}
    readers = {("machine.py", "load_rulebook"), ("__init__.py", "load_schema")}
    domain = [p for p in SIM.rglob("*.py")
              if _floor(".".join(p.relative_to(SIM.parent).with_suffix("").parts).removesuffix(".__init__")) == 1]
    assert len(domain) >= 8
    for path in domain:
        tree = ast.parse(path.read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and n.level == 0}
        assert not imported & banned, (path.name, imported & banned)
        calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert "open" not in calls and "input" not in calls and "print" not in calls, path.name
        for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            reads = [c for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                     and c.func.attr in ("read_text", "read_bytes", "write_text", "write_bytes", "open")]
            assert not reads or (path.name, fn.name) in readers, f"{path.name}: {fn.name} touches a file"


def test_the_store_is_split_by_job_and_its_connections_translate_errors():
    """schema, driver, core, writes, reducer, reads, floor, progress: each a module; a fold is in the
    reducer, a write in writes; the Store's connections are made with the driver's class (every
    error translated); the few plain connections catch sqlite3 errors where they are made."""
    plain = {("driver", "probe_file"), ("core", "save_copy"), ("progress", "open")}
    store = SIM / "store"
    assert {p.stem for p in store.glob("*.py")} >= {"schema", "driver", "core", "writes", "reducer", "reads", "floor",
                                                     "progress"}
    reducer = (store / "reducer.py").read_text()
    assert "def _apply" in reducer and "def _fold" not in (store / "writes.py").read_text()
    for path in store.glob("*.py"):
        if path.stem == "floor":  # the benchmark floors are bare sqlite3 on purpose
            continue
        tree = ast.parse(path.read_text())
        for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "connect":
                    kw = {k.arg for k in node.keywords}
                    assert "factory" in kw or (path.stem, fn.name) in plain, \
                        f"{path.name}:{node.lineno} ({fn.name}) connects without the driver's connection class"


@pytest.mark.slow  # measured over 25 s in the quick loop at load 6-10 on 2 cores (2026-12-07)
def test_process_limits_are_set_in_one_place():
    # the judge process and the host that runs student code share sim/course/limits.py
    setters = sorted(str(p.relative_to(SIM.parent)) for p in SIM.rglob("*.py")
                     if any(isinstance(n, ast.Attribute) and n.attr == "setrlimit" for n in ast.walk(ast.parse(p.read_text()))))
    assert setters == ["sim/course/limits.py"], setters
