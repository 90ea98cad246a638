"""The rubric: what each rule of an exercise is worth in the grade, owned by the instructor.

An exercise's tests are its rules (``exercise.toml``'s and ``hidden.toml``'s ``[[test]]``); each is
all or nothing. The rubric, ``solutions/NN-slug/rubric.toml`` in the course (instructor-side, never
in the student kit, bundled in the autograder), gives each rule its points and may cap the whole
exercise when a rule breaks::

    exercise = 3
    core = ["duplicates"]          # the rule(s) the exercise is named for
    why = "the exercise is a deduplicating consumer: ..."

    [weight]                       # points per rule; every rule of the exercise, nothing else
    duplicates = 30
    conflicts = 12
    ...

    [cap]                          # the most the exercise scores, in percent of its total, when this rule breaks
    duplicates = 60

A grade's score is the points of the rules that hold, and at most ``cap`` percent of the total when a
capped rule broke (the lowest such cap). Without a rubric file the rules weigh what exercise.toml
says. ``protolab kit rubric N`` shows it, ``-o FILE`` writes an editable copy, ``--check FILE``
validates one (``E_RUBRIC``), and ``protolab grade N DIR --rubric FILE`` grades with it.
"""

from __future__ import annotations

import difflib
import math
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import InputError

__all__ = ["Rubric", "RUBRIC_FILE", "course_rubric", "load_rubric", "parse_rubric", "equal_rubric", "rubric_toml",
           "capped_score", "CORE_SHARE"]

RUBRIC_FILE = "rubric.toml"

#: What the default rubric makes breaking a core rule cost at least: a quarter of the marks.
CORE_SHARE = 0.25

_KEYS = {"exercise", "core", "why", "weight", "cap"}


@dataclass(frozen=True)
class Rubric:
    exercise: int
    weights: dict = field(default_factory=dict)  # rule -> points
    caps: dict = field(default_factory=dict)  # rule -> percent of the total: the most the exercise scores when it breaks
    core: tuple = ()  # the rules the exercise is named for
    why: str = ""  # why those are its core
    source: str = ""  # where it was read ("" for the weights of exercise.toml)

    @property
    def total(self) -> float:
        return _num(sum(self.weights.values()))

    def kept_if_only(self, rule: str) -> float:
        """The share of the total (0..1) a submission keeps when ``rule`` is the only rule it breaks."""
        total = self.total
        if not total:
            return 0.0
        kept = (total - self.weights.get(rule, 0)) / total
        if rule in self.caps:
            kept = min(kept, self.caps[rule] / 100)
        return kept

    def apply(self, tests) -> tuple:
        """``tests`` (catalog Tests) weighed by this rubric: points, cap and core from it."""
        return tuple(replace(t, points=self.weights.get(t.name, t.points), cap=self.caps.get(t.name),
                             core=t.name in self.core) for t in tests)


def _num(x):
    """A number as the rubric writes it: an integer when it is one."""
    x = float(x)
    return int(x) if x.is_integer() else round(x, 4)


def capped_score(results) -> tuple[float, float | None, list[str]]:
    """``(score, cap, rules)`` of ``results`` (TestResults): the points earned, at most ``cap`` percent of
    their total when a capped rule broke (the lowest cap among the broken ``rules``)."""
    raw = sum(r.points for r in results)
    broken = [(r.cap, r.name) for r in results if getattr(r, "cap", None) is not None and not r.passed]
    if not broken:
        return round(raw, 2), None, []
    cap = min(c for c, _ in broken)
    total = sum(r.max_points for r in results)
    return round(min(raw, total * cap / 100), 2), cap, [n for c, n in broken if c == cap]


def _rules(ex) -> list:
    """Every rule of ``ex`` as the grader runs them: public tests, then hidden ones (names and points)."""
    return [*ex.tests, *ex.hidden_tests()]


def equal_rubric(ex) -> Rubric:
    """The rubric exercise.toml implies: each rule its points, cap and core there (the student kit's
    weights, which ``protolab kit student`` writes from the course's rubric)."""
    rules = _rules(ex)
    return Rubric(ex.number, {t.name: _num(t.points) for t in rules},
                  {t.name: _num(t.cap) for t in rules if t.cap is not None}, tuple(t.name for t in rules if t.core))


def _bad(source: str, what: str) -> InputError:
    return InputError(f"{source}: {what}", code="E_RUBRIC")


def _names_hint(name: str, known) -> str:
    near = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {near[0]!r}?)" if near else ""


def parse_rubric(ex, data, source: str) -> Rubric:
    """The rubric of ``ex`` in ``data`` (parsed TOML), checked: E_RUBRIC with what is wrong."""
    if not isinstance(data, dict):
        raise _bad(source, "a rubric is a TOML table")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise _bad(source, f"unknown key {unknown[0]!r}{_names_hint(unknown[0], _KEYS)}; a rubric has "
                           "exercise, core, why, [weight] and [cap]")
    if data.get("exercise") != ex.number or isinstance(data.get("exercise"), bool):
        raise _bad(source, f"exercise = {data.get('exercise')!r}, but this is the rubric of exercise {ex.number} "
                           f"(write exercise = {ex.number})")
    rules = [t.name for t in _rules(ex)]
    weights, caps = data.get("weight"), data.get("cap", {})
    if not isinstance(weights, dict):
        raise _bad(source, "no [weight] table: give every rule its points, e.g. [weight] then "
                           f"{rules[0]} = 10")
    if not isinstance(caps, dict):
        raise _bad(source, "cap must be a table: [cap] then RULE = PERCENT")
    for table, name in (("weight", n) for n in weights):
        if name not in rules:
            raise _bad(source, f"[{table}] names {name!r}, which is no rule of exercise {ex.number}"
                               f"{_names_hint(name, rules)}; its rules: {', '.join(rules)}")
    for name in caps:
        if name not in rules:
            raise _bad(source, f"[cap] names {name!r}, which is no rule of exercise {ex.number}"
                               f"{_names_hint(name, rules)}")
    missing = [n for n in rules if n not in weights]
    if missing:
        raise _bad(source, f"[weight] gives no points to {', '.join(missing)}: every rule of exercise "
                           f"{ex.number} needs its weight (0 if it should not count)")
    out_w, out_c = {}, {}
    for name in rules:
        w = weights[name]
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
            raise _bad(source, f"weight of {name} is {w!r}: a weight is a number of points, 0 or more")
        out_w[name] = _num(w)
    for name, c in caps.items():
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not math.isfinite(c) or not 0 <= c <= 100:
            raise _bad(source, f"cap of {name} is {c!r}: a cap is a percent of the exercise's total, 0 to 100")
        out_c[name] = _num(c)
    if sum(out_w.values()) <= 0:
        raise _bad(source, "every weight is 0: the exercise would be worth nothing")
    core = data.get("core", [])
    if isinstance(core, str):
        core = [core]
    if not isinstance(core, list) or not all(isinstance(c, str) for c in core):
        raise _bad(source, "core must be a list of rule names, e.g. core = [\"duplicates\"]")
    for c in core:
        if c not in rules:
            raise _bad(source, f"core names {c!r}, which is no rule of exercise {ex.number}{_names_hint(c, rules)}")
    why = data.get("why", "")
    if not isinstance(why, str):
        raise _bad(source, "why must be a string: why the core rules are the exercise's core")
    return Rubric(ex.number, out_w, out_c, tuple(core), why, source)


def load_rubric(ex, path: Path) -> Rubric:
    """The rubric of ``ex`` in the file ``path``, checked (E_RUBRIC; E_FILE_MISSING when there is none)."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise InputError(f"rubric {path} does not exist (protolab kit rubric {ex.number} -o FILE writes one to "
                         "edit)", code="E_FILE_MISSING") from None
    except IsADirectoryError:
        raise _bad(str(path), "is a folder, not a rubric file") from None
    except UnicodeDecodeError as e:
        raise _bad(str(path), f"is not UTF-8 (byte {e.start})") from None
    except OSError as e:
        raise _bad(str(path), f"cannot be read: {e.strerror or e}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise _bad(str(path), f"is not valid TOML: {e}") from None
    except RecursionError:
        raise _bad(str(path), "is nested too deeply to be read") from None
    return parse_rubric(ex, data, str(path))


_CACHE: dict = {}


def course_rubric(ex) -> Rubric | None:
    """The course's rubric of ``ex`` (``solutions/NN-slug/rubric.toml``) when this install has one;
    None when it has none (the rules weigh what exercise.toml says)."""
    sol = ex.solutions()
    path = sol / RUBRIC_FILE if sol is not None else None
    if path is None or not path.is_file():
        return None
    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_size, ex.number)
    if key not in _CACHE:
        _CACHE.clear()
        _CACHE[key] = load_rubric(ex, path)
    return _CACHE[key]


def _toml_str(s: str) -> str:
    import json

    return json.dumps(s, ensure_ascii=False)


def rubric_toml(ex, rubric: Rubric) -> str:
    """``rubric`` as an editable file: the rules in the grader's order, each with its title."""
    titles = {t.name: (t.title, t.hidden) for t in _rules(ex)}
    width = max((len(n) for n in rubric.weights), default=0)
    lines = [
        f"# The rubric of exercise {ex.number} ({ex.title}): what each rule is worth in the grade.",
        "# Each rule is one test of the exercise, all or nothing. Edit the points and caps, then check it:",
        f"#   protolab kit rubric {ex.number} --check THIS_FILE",
        f"# grade with it (protolab grade {ex.number} DIR --rubric THIS_FILE), or make it the course's own by",
        f"# saving it as solutions/{ex.dirname}/{RUBRIC_FILE} (grade and the autograder read that one).",
        "",
        f"exercise = {ex.number}",
        "",
        "# The core rule(s): what the exercise is named for. Breaking one alone should cost at least a",
        f"# quarter of the marks ({CORE_SHARE:.0%}); a cap below can lower the total further when it breaks.",
        f"core = [{', '.join(_toml_str(c) for c in rubric.core)}]",
        f"why = {_toml_str(rubric.why)}",
        "",
        f"[weight]  # points per rule; the exercise is out of their sum ({rubric.total:g})",
    ]
    for name, w in rubric.weights.items():
        title, hidden = titles.get(name, (name, False))
        note = f"{'(hidden) ' if hidden else ''}{title}" + ("  [core]" if name in rubric.core else "")
        lines.append(f"{name.ljust(width)} = {w:<4g} # {note}")
    lines += ["", "[cap]  # the most the exercise scores, in percent of its total, when this rule breaks"]
    for name, c in rubric.caps.items():
        lines.append(f"{name.ljust(width)} = {c:g}")
    return "\n".join(lines) + "\n"


def rubric_rows(ex, rubric: Rubric) -> list[dict]:
    """One row per rule of ``rubric``: its points, share of the total, cap, whether it is core, and
    what a submission keeps when it breaks that rule alone."""
    titles = {t.name: (t.title, t.hidden) for t in _rules(ex)}
    total = rubric.total
    return [{"rule": name, "title": titles.get(name, (name, False))[0], "hidden": titles.get(name, (name, False))[1],
             "points": w, "share": round(w / total, 4) if total else 0.0, "cap_percent": rubric.caps.get(name),
             "core": name in rubric.core, "kept_if_only_this_breaks": round(rubric.kept_if_only(name), 4)}
            for name, w in rubric.weights.items()]


def effective_rubric(ex, path: Path | None = None) -> Rubric:
    """The rubric ``path`` holds, else the course's, else the weights of exercise.toml."""
    if path is not None:
        return load_rubric(ex, path)
    return course_rubric(ex) or equal_rubric(ex)


# ---------------------------------------------------------------------------------- the student's copy
#
# The student kit has no rubric.toml (solutions/ never ships), so a student's ``protolab exercise check``
# weighs the public rules by exercise.toml. To give one submission one score, the rubric's public part
# is written into exercise.toml (each public test's points, cap and core) and into the exercise's
# README (the block between the markers below); ``protolab kit student`` writes the course's rubric
# into the kit's copies, and tests/test_rubric.py holds the checkout's copies to the course's rubric.

README_BEGIN = "<!-- weights: written from the course's rubric (python -m sim.course.rubric --write); do not edit -->"
README_END = "<!-- /weights -->"


def toml_with_rubric(text: str, rubric: Rubric, public: list[str]) -> str:
    """exercise.toml's ``text`` with each public test's ``points``, ``cap`` and ``core`` lines set to
    ``rubric``'s, and ``hidden_points`` to what its hidden rules weigh (the other lines kept as they are)."""
    out: list[str] = []
    current: str | None = None
    hidden = _num(max(0, rubric.total - sum(rubric.weights.get(n, 0) for n in public)))
    top = [i for i, line in enumerate(text.splitlines()) if line.startswith("[")]
    head = text.splitlines()[:top[0]] if top else text.splitlines()
    if not any(line.startswith("hidden_points = ") for line in head):  # the hidden rules' points, unnamed
        at = next((i + 1 for i, line in enumerate(head) if line.startswith("files = ")), 0)
        lines = text.splitlines()
        text = "\n".join(lines[:at] + [f"hidden_points = {hidden}"] + lines[at:]) + ("\n" if text.endswith("\n") else "")

    def close() -> None:
        if current is None or current not in public:
            return
        at = next(i for i in range(len(out) - 1, -1, -1) if out[i].startswith("points = "))
        extra = []
        if current in rubric.caps:
            extra.append(f"cap = {_num(rubric.caps[current])}")
        if current in rubric.core:
            extra.append("core = true")
        out[at + 1:at + 1] = extra

    for line in text.splitlines():
        if line.strip() == "[[test]]" or (line.startswith("[") and not line.startswith("[[test]]")):
            close()
            current = None
        elif line.startswith("name = ") and current is None:
            try:
                current = tomllib.loads(line)["name"]
            except tomllib.TOMLDecodeError:
                current = None
        elif current is None and line.startswith("hidden_points = "):
            line = f"hidden_points = {hidden}"
        elif current in public and current is not None:
            if line.startswith("points = "):
                line = f"points = {_num(rubric.weights[current])}"
            elif line.startswith(("cap = ", "core = ")):
                continue
        out.append(line)
    close()
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def weights_text(ex, rubric: Rubric) -> str:
    """The README's paragraph of what each public rule is worth (hidden rules as one figure, unnamed)."""
    public = [t.name for t in ex.tests]
    total = rubric.total
    hidden = _num(total - sum(rubric.weights.get(n, 0) for n in public))
    if hidden < 0:
        hidden = 0
    parts = []
    for n in public:
        w = _num(rubric.weights.get(n, 0))
        parts.append(f"`{n}` {w}" + (" (core)" if n in rubric.core else ""))
    lines = [README_BEGIN, "",
             f"**What each rule is worth** (out of {_num(total)}): " + ", ".join(parts)
             + (f"; hidden rules, which only the grader runs, {hidden} in all." if hidden else ".")]
    for n in public:
        if n in rubric.core or n in rubric.caps:
            kept = _num(round(total * rubric.kept_if_only(n), 2))
            what = "a rule this exercise is named for" if n in rubric.core else "a capped rule"
            cap = (f" (when it breaks, the exercise scores at most {_num(rubric.caps[n])}% of its total, whatever "
                   "else holds)") if n in rubric.caps else ""
            lines.append(f"`{n}` is {what}: breaking it alone leaves at most {kept} of {_num(total)}{cap}.")
    lines += ["", README_END]
    return "\n".join(lines)


def readme_with_rubric(text: str, ex, rubric: Rubric) -> str:
    """README ``text`` with its weights block replaced by ``rubric``'s (E_EXERCISE_FILE when it has no block)."""
    a, b = text.find(README_BEGIN), text.find(README_END)
    if a < 0 or b < a:
        raise InputError(f"exercise {ex.number}'s README has no weights block ({README_BEGIN} ... {README_END})",
                         code="E_EXERCISE_FILE")
    return text[:a] + weights_text(ex, rubric) + text[b + len(README_END):]


def write_student_copies(ex, folder: Path, rubric: Rubric) -> list[str]:
    """Write ``rubric``'s public part into ``folder``'s exercise.toml and README.md (an exercise's folder,
    the checkout's or a kit's copy); the names of the files it changed."""
    changed = []
    public = [t.name for t in ex.tests]
    for name, fn in (("exercise.toml", lambda s: toml_with_rubric(s, rubric, public)),
                     ("README.md", lambda s: readme_with_rubric(s, ex, rubric))):
        p = Path(folder) / name
        old = p.read_text(encoding="utf-8")
        new = fn(old)
        if new != old:
            from ..files import written_whole

            with written_whole(p) as fh:
                fh.write(new)
            changed.append(str(p))
    return changed


def _main(argv: list[str]) -> int:
    """``python -m sim.course.rubric --check|--write``: the checkout's exercise.toml and README weights
    against the course's rubric (exit 1 naming a stale file; --write rewrites them)."""
    import sys

    from .catalog import exercises

    write = "--write" in argv
    stale = []
    for ex in exercises():
        rubric = course_rubric(ex)
        if rubric is None:
            continue
        public = [t.name for t in ex.tests]
        toml = (ex.folder / "exercise.toml").read_text(encoding="utf-8")
        readme = (ex.folder / "README.md").read_text(encoding="utf-8")
        if toml_with_rubric(toml, rubric, public) != toml or readme_with_rubric(readme, ex, rubric) != readme:
            if write:
                write_student_copies(ex, ex.folder, rubric)
            else:
                stale.append(ex.dirname)
    for d in stale:
        print(f"exercises/{d}: exercise.toml or README.md weighs otherwise than the course's rubric "
              "(python -m sim.course.rubric --write)", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    import sys

    raise SystemExit(_main(sys.argv[1:]))
