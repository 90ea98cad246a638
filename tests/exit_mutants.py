"""Bugs planted by hand in the CLI's exit-status paths (issue 48, part 5), one at a time, each run
against tests/test_exit_statuses.py: a bug is caught when the module fails. Not a test (a benchmark
of the tests, like the mutation runs in docs/performance.md).

    python tests/exit_mutants.py            # every planted bug; about 10 minutes on 2 cores
    python tests/exit_mutants.py 3 7        # only these (1-based, or ids E3 E7)

Each bug is one small change to a file of the checkout; the loop is tests/planting.py's: the file is
restored after its run, whatever happens, and checked byte for byte. Bugs whose case is in the slow set run with --run-slow and only the cases of their command
(-k), so a grade or kit verify case is not hidden behind the whole slow set.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import planting  # noqa: E402

#: (file, the text, the bug, slow: a -k expression for the slow set's cases of that command, or None)
BUGS = [
    ("sim/cli/course.py", "raise typer.Exit(1 if bad else 0)", "raise typer.Exit(0)", "kit-verify"),
    ("sim/cli/course.py", "            typer.echo(f\"  ... and {len(errors) - 10} more (--json lists every one under grader_error)\", err=True)\n        raise typer.Exit(1)",
     "            typer.echo(f\"  ... and {len(errors) - 10} more (--json lists every one under grader_error)\", err=True)\n        pass", "grade"),
    ("sim/course/evaluate.py", "return [r for r in self.results if r.grader_error]", "return []", "grade"),
    ("sim/course/kit.py", "row.ok, row.problem = False, f\"passes {', '.join(passing)}, which expect.toml says it fails\"",
     "row.problem = f\"passes {', '.join(passing)}, which expect.toml says it fails\"", "kit-verify"),
    ("sim/views.py", "    if not all(r.ok for r in results):\n        return 1",
     "    if not any(r.ok for r in results):\n        return 1", None),
    ("sim/cli/inspect.py", "if not report[\"match\"] or not proof:", "if not report[\"match\"] and not proof:", None),
    ("sim/cli/trace.py", "raise typer.Exit(0 if report.valid else 1)", "raise typer.Exit(0)", None),
    ("sim/cli/trace.py", "raise typer.Exit(0 if result.equivalent else 1)", "raise typer.Exit(0)", None),
    ("sim/cli/trace.py", "raise typer.Exit(0 if all(r[\"ok\"] for r in rows) else 1)",
     "raise typer.Exit(0 if any(r[\"ok\"] for r in rows) else 1)", None),
    ("sim/cli/__init__.py", "sys.exit(getattr(e, \"exit_status\", 2))", "sys.exit(getattr(e, \"exit_status\", 1))", None),
    ("sim/cli/__init__.py", "        sys.stderr.write(f\"error: E_USAGE: {msg}\\n\")\n        sys.exit(2)",
     "        sys.stderr.write(f\"error: E_USAGE: {msg}\\n\")\n        sys.exit(1)", None),
    ("sim/cli/course.py", "    return 0 if report.all_passed else 1", "    return 0", None),
    ("sim/cli/course.py", "        typer.echo(f\"raised {type(e).__name__}: {' '.join(str(e).split())[:300]}{raised_at(e)}\", err=True)\n        raise typer.Exit(1)",
     "        typer.echo(f\"raised {type(e).__name__}: {' '.join(str(e).split())[:300]}{raised_at(e)}\", err=True)\n        raise typer.Exit(0)", None),
    ("sim/cli/explore.py", "    if found is not None:\n        raise typer.Exit(1)", "    if found is not None:\n        raise typer.Exit(0)", None),
    ("sim/cli/explore.py", "    if result.interrupted:  # (main says 'error: E_ABORTED: interrupted (Ctrl-C)' on stderr, once)\n        raise typer.Exit(130)",
     "    if result.interrupted:  # (main says 'error: E_ABORTED: interrupted (Ctrl-C)' on stderr, once)\n        raise typer.Exit(0)", None),
    ("sim/cli/explore.py", "            _console().print(\"interrupted: the smallest run found so far was written (maybe not minimal)\")\n        raise typer.Exit(130)",
     "            _console().print(\"interrupted: the smallest run found so far was written (maybe not minimal)\")\n        raise typer.Exit(0)", "shrink"),
    ("sim/cli/lab.py", "    if not j.all_met:\n        raise typer.Exit(1)", "    if not j.all_met:\n        pass", None),
    ("sim/cli/lab.py", "    if not (result[\"genuine\"] and result[\"done\"] == result[\"total\"]):\n        raise typer.Exit(1)",
     "    if not (result[\"genuine\"] or result[\"done\"] == result[\"total\"]):\n        raise typer.Exit(1)", None),
    ("sim/cli/__init__.py", "sys.exit(rv if isinstance(rv, int) else 0)", "sys.exit(0)", None),
    ("sim/cli/__init__.py", "    if rv == 130:", "    if rv == 131:", None),
]


#: what each bug does, as docs/performance.md lists them ("Exit statuses")
WHAT = ["kit verify's 1 if bad else 0 made 0", "grade's exit after grader errors dropped",
        "Report.grader_errors made empty", "a wrong expect.toml verdict kept ok", "check's not all made not any",
        "replay's or made and", "trace validate's exit made 0", "trace replay's exit made 0",
        "trace mutate's all made any", "main's error exit 2 made 1", "main's usage-error exit 2 made 1",
        "exercise check's 1 made 0", "exercise try's exit after code that raised made 0",
        "explore's exit on a break made 0", "explore's exit on Ctrl-C made 0", "shrink's 130 made 0",
        "lab check's exit dropped", "lab verify's and made or", "main's sys.exit(rv) made sys.exit(0)",
        "the Ctrl-C line's rv == 130 made 131"]
TESTS = ["tests/test_exit_statuses.py"]


def _args(slow: str | None) -> tuple[str, ...]:
    return () if not slow else ("--run-slow", "-k", slow.replace("-", " and ") if " " in slow else slow)


def main(argv: list[str]) -> int:
    bugs = [planting.Bug(f"E{i}", path, what, old, new, args=_args(slow))
            for i, ((path, old, new, slow), what) in enumerate(zip(BUGS, WHAT, strict=True), 1)]
    return planting.main(argv, bugs, TESTS)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
