"""A one-off rewrite for a mutation copy of the checkout, never for the project itself.

mutmut 3 does not mutate a decorated function (its trampolines replace the function after the
decorator ran). The lab checks are registered by ``@check("name")`` and a report's score is a
``@property``, so before ``mutmut run`` in a scratch clone this script rewrites each such
definition in the files named on the command line

    @check("delivery")                def _delivery(...):
    def _delivery(...):         ->        ...
        ...                           _delivery = check("delivery")(_delivery)

(the same registry, in the same order; a property is reassigned in its class body the same way).
Only single-decorator definitions whose decorator is ``property`` or a call are rewritten; anything
else is left decorated. Usage, in the clone's root: ``python tests/mutmut_undecorate.py
sim/labs/checks.py sim/course/evaluate.py``. See docs/performance.md (mutation testing)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def undecorate(source: str) -> tuple[str, int]:
    """``source`` with each rewritable decorated function turned into a plain one plus an
    assignment after it; also how many were rewritten."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, str, int, str]] = []  # (decorator line, its end, name, function end, indent)
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or len(node.decorator_list) != 1:
            continue
        dec = node.decorator_list[0]
        is_property = isinstance(dec, ast.Name) and dec.id == "property"
        if not (is_property or isinstance(dec, ast.Call)):
            continue
        indent = lines[node.lineno - 1][: len(lines[node.lineno - 1]) - len(lines[node.lineno - 1].lstrip())]
        edits.append((dec.lineno, dec.end_lineno, node.name, node.end_lineno, indent))
    for dec_line, dec_end, name, end, indent in sorted(edits, reverse=True):
        expr = "".join(lines[dec_line - 1:dec_end]).strip()[1:]  # the decorator without its "@"
        lines.insert(end, f"{indent}{name} = {expr}({name})\n")
        del lines[dec_line - 1:dec_end]
    return "".join(lines), len(edits)


def main(paths: list[str]) -> None:
    for p in paths:
        path = Path(p)
        text, n = undecorate(path.read_text(encoding="utf-8"))
        compile(text, str(path), "exec")
        path.write_text(text, encoding="utf-8")
        print(f"{p}: {n} decorated definitions rewritten")


if __name__ == "__main__":
    main(sys.argv[1:])
