"""One judge, one answer: what `protolab trace validate` refuses the grader refuses too (a trace that
repeats a key is not graded as "the last one wins"), and a file nested past the parser's depth is a
one-line refusal, never a traceback."""

from __future__ import annotations

import json
import shutil

from conftest import run_cli

from sim.course.catalog import get_exercise, solutions_dir
from sim.course.evaluate import evaluate


def test_machine_check_on_a_deeply_nested_toml_is_one_line_and_exit_2(tmp_path, capsys):
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    code, out, err = run_cli(capsys, "machine", "check", deep)
    assert code == 2 and out == ""
    assert err.startswith("error: E_TOML: ") and err.count("\n") == 1 and "nested too deeply" in err


def _trace_with_a_repeated_key(tmp_path):
    """The model answer's trace with a message's sender said twice: first a made-up one, then its own
    (so "the last one wins" would read it as the model answer)."""
    ex = get_exercise(6)
    d = tmp_path / "student"
    shutil.copytree(ex.folder, d)
    text = json.dumps(json.loads((solutions_dir(ex) / "trace.json").read_text()), indent=2)
    assert '"sender": ' in text
    (d / "trace.json").write_text(text.replace('"sender": ', '"sender": "mallory",\n"sender": ', 1))
    return ex, d


def test_a_trace_that_repeats_a_key_is_refused_by_validate_and_by_the_grader_alike(tmp_path, capsys):
    ex, d = _trace_with_a_repeated_key(tmp_path)
    assert '"mallory"' in (d / "trace.json").read_text()
    code, out, err = run_cli(capsys, "trace", "validate", d / "trace.json")
    assert code == 2 and err.startswith("error: E_DUPLICATE_KEY: ")
    report = evaluate(ex, d, hidden=True, isolate=False)
    assert report.score == 0, [(r.name, r.points) for r in report.results]
    assert all("repeats the key 'sender'" in r.message and "E_DUPLICATE_KEY" in r.message for r in report.results)
    # the same file without the repeated key is the model answer: full marks
    (d / "trace.json").write_text((solutions_dir(ex) / "trace.json").read_text())
    assert evaluate(ex, d, hidden=True, isolate=False).score == report.max_score
