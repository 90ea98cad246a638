"""The lint and the type check run in the quick loop, as .ci/run runs them: ``ruff check`` with the rule set
in pyproject.toml's [tool.ruff] over the whole checkout, and ``mypy`` over the engine and the store
([tool.mypy]'s files). Both come with the test extra (pip install -e '.[test]'); mypy keeps its cache in
.mypy_cache, so a run after the first takes a few seconds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing_under_the_chosen_rules():
    r = _run("ruff", "check", "--no-fix", "--output-format", "concise", ".")
    assert "No module named ruff" not in r.stderr, "ruff is missing: pip install -e '.[test]'"
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]


def test_mypy_finds_nothing_in_the_engine_and_the_store():
    r = _run("mypy")
    assert "No module named mypy" not in r.stderr, "mypy is missing: pip install -e '.[test]'"
    assert r.returncode == 0 and "Success: no issues found" in r.stdout, (r.stdout + r.stderr)[-4000:]
    # the scope docs/architecture.md names: the store and the engine's modules, every one of them checked
    checked = int(r.stdout.split("no issues found in ")[1].split()[0])
    assert checked >= len(list((ROOT / "sim" / "store").glob("*.py"))) + 10, r.stdout


def test_the_doc_says_the_limit_the_rules_and_the_scope_the_config_has():
    import tomllib

    import conftest

    conf = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    part = doc[doc.index("## The test loop"):]
    assert f"`QUICK_LIMIT` = {conftest.QUICK_LIMIT:g} s" in part
    lint = conf["tool"]["ruff"]["lint"]
    for rule in lint["select"] + lint["ignore"]:
        assert rule in part, rule
    for path in conf["tool"]["mypy"]["files"]:
        assert f"`{path}" in part, path
    assert conf["tool"]["mypy"]["check_untyped_defs"] is True and "check_untyped_defs" in part
