"""The README's lists that the registries hold: its fault table (``@fault`` in ``sim/faults.py``: ``story``,
``safe``, ``naive_breaks``, ``naive_note``) and its list of invariants (``@invariant`` in ``sim/invariants.py``:
``gist``, ``conversation``, and how many there are), written between marker comments in ``README.md``::

    <!-- BEGIN faults: ... -->
    ...
    <!-- END faults -->

``python -m sim.docs`` rewrites those sections in place; ``python -m sim.docs --check`` exits 1 if they
differ from what the registries give (``tests/test_readme_generated.py`` runs the check).
"""

from __future__ import annotations

import re
import os
import sys
import textwrap
from pathlib import Path

from . import faults as _faults
from . import invariants as _invariants

def _readme() -> Path:
    """The checkout's README.md: beside the package in a checkout (an editable install), else the one in
    the folder the command runs in (an installed wheel carries no README: run it from the checkout)."""
    beside = Path(__file__).resolve().parent.parent / "README.md"
    return beside if beside.exists() else Path.cwd() / "README.md"


README = _readme()
COMMAND = "python -m sim.docs"
#: Where a generated paragraph wraps (the README's own width).
WIDTH = 110

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
         "sixteen seventeen eighteen nineteen").split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def number_words(n: int) -> str:
    """``23`` -> ``twenty-three`` (0-99), as the README writes a count."""
    if not 0 <= n < 100:
        raise ValueError(f"{n}: only 0-99 are written out")
    if n < 20:
        return _ONES[n]
    tens, ones = divmod(n, 10)
    return _TENS[tens] + (f"-{_ONES[ones]}" if ones else "")


def _series(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c`` (the README's lists end with 'and', no comma before it)."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _wrap(paragraph: str) -> str:
    """``paragraph`` wrapped at :data:`WIDTH`, never inside a `code span` (a command stays on one line)."""
    kept = re.sub(r"`[^`]*`", lambda m: m.group(0).replace(" ", "\0"), paragraph)
    lines = textwrap.wrap(kept, WIDTH, break_long_words=False, break_on_hyphens=False)
    return "\n".join(line.replace("\0", " ") for line in lines)


def fault_table(registry=None) -> str:
    """The README's fault table: one row per fault, in the registry's order."""
    rows = ["| fault | what the transport does | safe | naive breaks |", "|---|---|---|---|"]
    for f in (registry if registry is not None else _faults.REGISTRY).values():
        naive = ", ".join(f.naive_breaks) or "-"
        if f.naive_note:
            naive += f" ({f.naive_note})"
        rows.append(f"| `{f.name}` | {f.story} | {f.safe} | {naive} |")
    return "\n".join(rows)


def invariant_list(registry=None) -> str:
    """The README's list of invariants: those about state, then the conversation's rules, then the count
    the safe policy holds."""
    registry = registry if registry is not None else _invariants.REGISTRY

    def named(inv) -> str:
        return f"{inv.name} ({inv.gist})" if inv.gist else inv.name

    state = [named(i) for i in registry.values() if not i.conversation]
    conversation = [named(i) for i in registry.values() if i.conversation]
    paragraphs = [f"The invariants: {_series(state)}."]
    if conversation:
        paragraphs.append(
            "The conversation's rules are invariants too, judged by the same validator as `protolab trace validate` "
            "on every epoch of the run's exported conversation, so `check` breaks one exactly when `trace validate` "
            f"rejects the run's conversation, naming the same message: {_series(conversation)}. "
            f"Under `safe` every fault holds all {number_words(len(registry))} in every shipped scenario, and its "
            "exported conversation validates. The same scenario, seed, policy and faults give a byte-identical "
            "database and state digest.")
    return "\n\n".join(_wrap(p) for p in paragraphs)


def sections() -> dict[str, str]:
    """Each generated section of the README by its marker name."""
    return {"faults": fault_table(), "invariants": invariant_list()}


def _marked(name: str) -> re.Pattern:
    return re.compile(rf"(<!-- BEGIN {name}: [^\n]*-->\n)(.*?)(\n<!-- END {name} -->)", re.S)


def render(text: str, generated: dict[str, str] | None = None) -> str:
    """``text`` (the README) with each marked section replaced by what the registries give."""
    for name, body in (generated if generated is not None else sections()).items():
        pattern = _marked(name)
        if not pattern.search(text):
            raise ValueError(f"README.md has no section marked '<!-- BEGIN {name}: ... -->' ... '<!-- END {name} -->'")
        text = pattern.sub(lambda m, body=body: m.group(1) + body + m.group(3), text, count=1)
    return text


def stale(path: Path | None = None) -> list[str]:
    """The names of the marked sections of ``path`` (the README) that differ from what the registries give."""
    text = (path or README).read_text(encoding="utf-8")
    return [name for name, body in sections().items()
            if (m := _marked(name).search(text)) is None or m.group(2) != body]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv not in ([], ["--check"]):
        print(f"error: E_USAGE: usage: {COMMAND} [--check]", file=sys.stderr)
        return 2
    if not README.is_file():
        print(f"error: E_NOT_FOUND: no README.md at {README}: run {COMMAND} from the checkout", file=sys.stderr)
        return 2
    if argv == ["--check"]:
        behind = stale()
        if behind:
            print(f"README.md: the {', '.join(behind)} section(s) differ from the registries; run: {COMMAND}",
                  file=sys.stderr)
            return 1
        return 0
    behind = stale()
    if behind:
        text = render(README.read_text(encoding="utf-8"))
        tmp = README.with_name(f".{README.name}.partial-{os.getpid()}")
        tmp.write_text(text, encoding="utf-8")  # whole, then renamed into place
        os.replace(tmp, README)
        print(f"README.md: rewrote the {', '.join(behind)} section(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
