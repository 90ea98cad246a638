"""The architecture's rules, enforced: the core never imports UI libraries; SQL stays in the store."""

import ast
import subprocess
import sys
from pathlib import Path

SIM = Path(__file__).resolve().parent.parent / "sim"
CORE = ["sim.digest", "sim.envelope", "sim.machine", "sim.intake", "sim.store", "sim.runtime", "sim.samples", "sim.bench",
        "sim.labs.catalog", "sim.labs.checks", "sim.labs.session", "sim.labs.verify", "sim.labs.submit", "sim.labs.paths",
        "sim.course.evaluate", "sim.course.sandbox", "sim.course.remote"]
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
    for name in ("digest", "envelope", "machine", "intake", "privacy"):
        tree = ast.parse((SIM / f"{name}.py").read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and n.level == 0}
        assert not imported & {"sqlite3", "sqlite_utils", "os", "subprocess", "socket"}, name


def test_all_sql_lives_in_the_store_module():
    offenders = []
    for path in SIM.rglob("*.py"):
        if path.name == "store.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if any(w in node.value for w in SQL_WORDS) and "sql" not in path.name:
                    offenders.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.Attribute) and node.attr in ("execute", "executemany", "executescript"):
                offenders.append(f"{path.name}:{node.lineno} .{node.attr}")
    assert offenders == []
