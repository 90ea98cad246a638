"""A lab's README.md, made from its ``README.in.md`` and ``lab.toml``, so that what it says of a run
is what the run shows.

``README.in.md`` is the prose (background, what to take away, shell commands), naming the lab's
facts as ``{name}`` like every other text of the lab (:mod:`sim.labs.facts`), and these blocks:

``{title}``      the lab's title;              ``{goal}``       its summary;
``{about}``      how long it takes and which lab comes first;
``{steps}``      its steps and their checkpoints, as the Guide shows them (a checkpoint only a screen
                 action meets marked self-reported, :func:`sim.labs.checks.self_reported`);
``{questions}``  its questions, with their choices in the order the TUI shows them.

Every fact is filled from the lab's reference run. ``python -m sim.labs.readme`` writes every lab's
README.md (``--check``: exit 1 and name each one that is not what its sources make); a test holds
each shipped README to its sources, so a README cannot drift from the runs it describes.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .facts import PLACEHOLDER, fill_known, reference_values, render

__all__ = ["BLOCKS", "TEMPLATE", "HEADER", "readme", "template_of", "write_all"]

TEMPLATE = "README.in.md"
BLOCKS = ("title", "goal", "about", "steps", "questions")
HEADER = ("<!-- Made from README.in.md and lab.toml by 'python -m sim.labs.readme': edit those, then run it. "
          "Every id, code and count below is read from the lab's own runs. -->\n")


def template_of(lab) -> Path:
    return lab.folder / TEMPLATE


#: What the README says under the steps of a lab with self-reported checkpoints.
SELF_REPORTED = ("Checkpoints marked *(self-reported)* are met by what you do on screen (a view opened, a visit in "
                 "time): your file records it, and nothing can replay it, so `protolab lab verify` lists them apart "
                 "from the ones your run shows, and your instructor decides whether they count.")


def _steps(shown) -> str:
    from .checks import self_reported

    out = []
    screen = False
    for i, s in enumerate(shown.steps, 1):
        out.append(f"{i}. **{s.title}.** {s.text}")
        for c in s.checkpoints:
            mark = self_reported(c.check, c.args)
            screen = screen or mark
            out.append(f"   - [ ] {c.title}" + (" *(self-reported)*" if mark else ""))
    if screen:
        out += ["", SELF_REPORTED]
    return "\n".join(out)


def _questions(shown) -> str:
    out = []
    for i, q in enumerate(shown.questions, 1):
        how = f"one of: {'; '.join(q.choices)}" if q.kind == "choice" else "an exact value"
        out.append(f"{i}. {q.text} ({how})")
    return "\n".join(out)


def _about(lab) -> str:
    first = ""
    if lab.needs:
        names = [str(n) for n in lab.needs]
        first = f" Do lab {names[0]} first." if len(names) == 1 else \
            f" Do labs {', '.join(names[:-1])} and {names[-1]} first."
    return f"About {lab.minutes} minutes.{first}"


def readme(lab) -> str:
    """The README.md that ``lab``'s sources make."""
    text = template_of(lab).read_text(encoding="utf-8")
    shown = render(lab)
    blocks = {"title": shown.title, "goal": shown.summary, "about": _about(lab), "steps": _steps(shown),
              "questions": _questions(shown)}
    body = fill_known(text, {**reference_values(lab), **blocks})
    left = sorted(set(PLACEHOLDER.findall(body)))
    if left:
        from ..errors import InputError

        raise InputError(f"{template_of(lab)} names {{{left[0]}}}, which is no fact of lab {lab.number} and no block "
                         f"({', '.join(BLOCKS)})", code="E_LAB_FILE")
    return HEADER + body.rstrip() + "\n"


def write_all(*, check: bool = False, out=sys.stdout) -> int:
    """Write (or, with ``check``, compare) every lab's README.md; returns how many were stale."""
    from .catalog import labs

    stale = 0
    for lab in labs():
        if not template_of(lab).is_file():
            continue
        want = readme(lab)
        path = lab.folder / "README.md"
        have = path.read_text(encoding="utf-8") if path.is_file() else None
        if have == want:
            continue
        stale += 1
        if check:
            print(f"{path}: not what {TEMPLATE} and lab.toml make (python -m sim.labs.readme writes it)", file=out)
        else:
            tmp = path.with_suffix(".md.tmp")
            tmp.write_text(want, encoding="utf-8")
            tmp.replace(path)
            print(f"wrote {path}", file=out)
    return stale


if __name__ == "__main__":  # pragma: no cover - the test calls write_all
    sys.exit(1 if write_all(check="--check" in sys.argv[1:]) and "--check" in sys.argv[1:] else 0)
