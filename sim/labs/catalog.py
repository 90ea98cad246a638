"""The lab catalog: ``labs/NN-slug/lab.toml`` read into :class:`Lab`.

A lab is data: the run it starts (scenario, seed, policy, starting faults, mode), its steps in
order, the checkpoints each step holds (a named check from :mod:`sim.labs.checks` with its
arguments and hints keyed by what the check saw) and its questions (a choice or an exact value,
with feedback per wrong choice), and the facts its texts name (:mod:`sim.labs.facts`: small queries
over its runs, so that no text types an id, a code or a count its runs do not show). A question's
choices are kept in an order of their own (:func:`sim.labs.facts.shown_order`), never the order
they were written in; rendering puts the right one in a place drawn for the question
(:func:`sim.labs.facts.answer_placed`). Adding a lab means adding a folder; nothing here names a lab.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from ..resources import shipped
from .facts import parse_facts, parse_runs, placeholders, saw_fields, shown_order
from .readme import BLOCKS as README_BLOCKS

__all__ = ["Lab", "Step", "Checkpoint", "Question", "labs", "get_lab", "load_lab", "texts", "MODES"]

# live: the simulator's run, stepped by hand in the TUI; workshop: naive beside the learner's safe
# run; hand-delivery: no simulator, the learner delivers envelopes with 'protolab deliver' and the
# TUI watches the file
MODES = ("live", "workshop", "hand-delivery")


@dataclass(frozen=True)
class Checkpoint:
    id: str
    title: str
    check: str
    args: dict
    hint: str  # the hint when nothing more specific applies
    hints: dict  # what the check saw (its code) -> a hint written for that case; {fields} come from what it saw
    shows: str = ""  # once met: what the run showed, in words ({fields} from what the check saw); the Guide prints it


@dataclass(frozen=True)
class Step:
    title: str
    text: str
    checkpoints: tuple[Checkpoint, ...]


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    kind: str  # "choice" or "value"
    choices: tuple[str, ...] = ()
    answer: str | None = None  # the right choice or value; may name facts ("{lowest_pick}"), read from the learner's run
    answer_from: str | None = None  # "CHECKPOINT.FIELD": the value a checkpoint saw in the learner's run
    feedback: dict = field(default_factory=dict)  # wrong answer -> what to think about
    explain: str = ""  # shown once answered right


@dataclass(frozen=True)
class Lab:
    number: int
    slug: str
    title: str
    minutes: int
    summary: str
    folder: Path
    scenario: str
    seed: int
    policy: str
    faults: tuple[str, ...]
    mode: str
    needs: tuple[int, ...]
    steps: tuple[Step, ...]
    questions: tuple[Question, ...]
    facts: dict = field(default_factory=dict)  # name -> sim.labs.facts.Fact: what the texts may name, read from runs
    runs: dict = field(default_factory=dict)  # name -> sim.labs.facts.RunSpec: other runs a text speaks of
    literals: dict = field(default_factory=dict)  # a literal the texts keep -> why it is no claim about a run
    rendered: bool = False  # its texts filled from its reference run's facts (sim.labs.facts.render)

    @property
    def dirname(self) -> str:
        return f"{self.number:02d}-{self.slug}"

    @property
    def checkpoints(self) -> tuple[Checkpoint, ...]:
        return tuple(c for s in self.steps for c in s.checkpoints)

    def checkpoint(self, cid: str) -> Checkpoint:
        for c in self.checkpoints:
            if c.id == cid:
                return c
        raise KeyError(cid)

    @property
    def default_db(self) -> str:
        return f"lab{self.number:02d}.db"


def _req(d: dict, key: str, kind, where: str):
    if key not in d:
        raise InputError(f"{where}: missing {key!r}", code="E_LAB_FILE")
    v = d[key]
    if not isinstance(v, kind):
        raise InputError(f"{where}: {key!r} must be {getattr(kind, '__name__', kind)}", code="E_LAB_FILE")
    return v


def load_lab(folder: Path) -> Lab:
    """Read and check one lab folder."""
    path = folder / "lab.toml"
    where = str(path)
    try:
        d = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror}", code="E_LAB_FILE") from e
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{path} is not valid TOML: {e}", code="E_LAB_FILE") from e
    from .checks import CHECKS

    cps: dict[str, Checkpoint] = {}
    for i, c in enumerate(d.get("checkpoint", [])):
        w = f"{where} checkpoint {i + 1}"
        cid = _req(c, "id", str, w)
        check = _req(c, "check", str, w)
        if check not in CHECKS:
            raise InputError(f"{w}: unknown check {check!r}", code="E_LAB_FILE")
        if cid in cps:
            raise InputError(f"{w}: checkpoint id {cid!r} used twice", code="E_LAB_FILE")
        _check_args(check, dict(c.get("args", {})), w)
        _check_hints(check, dict(c.get("hints", {})), w)
        cps[cid] = Checkpoint(cid, _req(c, "title", str, w), check, dict(c.get("args", {})), _req(c, "hint", str, w),
                              dict(c.get("hints", {})), str(c.get("shows", "")))
    steps = []
    used = set()
    for i, s in enumerate(d.get("step", [])):
        w = f"{where} step {i + 1}"
        ids = _req(s, "checkpoints", list, w)
        unknown = [x for x in ids if x not in cps]
        if unknown:
            raise InputError(f"{w}: no checkpoint {unknown[0]!r}", code="E_LAB_FILE")
        used.update(ids)
        steps.append(Step(_req(s, "title", str, w), _req(s, "text", str, w).strip(), tuple(cps[x] for x in ids)))
    if set(cps) - used:
        raise InputError(f"{where}: checkpoint {sorted(set(cps) - used)[0]!r} belongs to no step", code="E_LAB_FILE")
    slug = _req(d, "slug", str, where)
    questions = []
    for i, q in enumerate(d.get("question", [])):
        w = f"{where} question {i + 1}"
        kind = _req(q, "kind", str, w)
        qid = _req(q, "id", str, w)
        if kind not in ("choice", "value"):
            raise InputError(f"{w}: kind must be 'choice' or 'value'", code="E_LAB_FILE")
        choices = tuple(q.get("choices", ()))
        answer, answer_from = q.get("answer"), q.get("answer_from")
        if (answer is None) == (answer_from is None):
            raise InputError(f"{w}: give exactly one of 'answer' and 'answer_from'", code="E_LAB_FILE")
        if answer is not None:
            answer = str(answer)
        if kind == "choice" and answer not in choices and not placeholders(answer or ""):
            raise InputError(f"{w}: the answer {answer!r} is not one of its choices", code="E_LAB_FILE")
        if kind == "choice" and len(set(choices)) != len(choices):
            raise InputError(f"{w}: a choice is listed twice", code="E_LAB_FILE")
        if answer_from is not None and answer_from.split(".")[0] not in cps:
            raise InputError(f"{w}: answer_from names no checkpoint of this lab", code="E_LAB_FILE")
        questions.append(Question(qid, _req(q, "text", str, w).strip(), kind, shown_order(slug, qid, choices), answer,
                                  answer_from, dict(q.get("feedback", {})), q.get("explain", "")))
    mode = d.get("mode", "live")
    if mode not in MODES:
        raise InputError(f"{where}: mode must be one of {', '.join(MODES)}", code="E_LAB_FILE")
    runs = parse_runs(d.get("runs", {}), where)
    facts = parse_facts(d.get("facts", {}), runs, where, reserved=saw_fields() | set(README_BLOCKS))
    if facts and mode == "hand-delivery":
        raise InputError(f"{where}: a hand-delivery lab has no simulated run to read facts from", code="E_LAB_FILE")
    kept = d.get("literals", {})
    if not (isinstance(kept, dict) and all(isinstance(v, str) and v.strip() for v in kept.values())):
        raise InputError(f"{where}: [literals] is a table of literal = \"why it is no claim about a run\"",
                         code="E_LAB_FILE")
    lab = Lab(
        number=_req(d, "number", int, where), slug=slug, title=_req(d, "title", str, where),
        minutes=_req(d, "minutes", int, where), summary=d.get("summary", ""), folder=folder,
        scenario=d.get("scenario", "publish-report"), seed=int(d.get("seed", 0)), policy=d.get("policy", "safe"),
        faults=tuple(d.get("faults", ())), mode=mode, needs=tuple(d.get("needs", ())),
        steps=tuple(steps), questions=tuple(questions), facts=facts, runs=runs, literals=dict(kept),
    )
    _check_placeholders(lab, where)
    return lab


def texts(lab: Lab) -> list[tuple[str, str, bool]]:
    """Every text of a lab a face shows: ``(where, text, may use a check's fields)``. Hints and
    ``shows`` lines may name what their check saw; everything else names facts and builtins only."""
    out = [("summary", lab.summary, False), ("title", lab.title, False)]
    for i, s in enumerate(lab.steps):
        out += [(f"step {i + 1} title", s.title, False), (f"step {i + 1} text", s.text, False)]
    for c in lab.checkpoints:
        out += [(f"checkpoint {c.id} title", c.title, False), (f"checkpoint {c.id} hint", c.hint, True),
                (f"checkpoint {c.id} shows", c.shows, True)]
        out += [(f"checkpoint {c.id} hint {k}", h, True) for k, h in c.hints.items()]
    for q in lab.questions:
        out += [(f"question {q.id} text", q.text, False), (f"question {q.id} explain", q.explain, False),
                (f"question {q.id} answer", q.answer or "", False)]
        out += [(f"question {q.id} choice", c, False) for c in q.choices]
        for k, v in q.feedback.items():
            out += [(f"question {q.id} feedback key", k, False), (f"question {q.id} feedback", v, False)]
    return out


def _check_placeholders(lab: Lab, where: str) -> None:
    """Every ``{name}`` a text uses is a fact of the lab or a builtin (or, in a hint or a ``shows``
    line, a field a check reports): a typo fails the load, not the learner's screen."""
    from .facts import BUILTINS

    known = set(lab.facts) | set(BUILTINS)
    seen = saw_fields()
    if set(placeholders(lab.title)) - set(BUILTINS):
        raise InputError(f"{where}: the lab's title names a fact; it is shown where no run is read (the lab menu, "
                         "'lab list'): say it in words", code="E_LAB_FILE")
    for what, text, checked in texts(lab):
        for name in placeholders(text):
            if name not in known and not (checked and name in seen):
                raise InputError(f"{where}: {what} names {{{name}}}, which is no fact of this lab "
                                 f"(its facts: {', '.join(lab.facts) or 'none'})", code="E_LAB_FILE")


def labs() -> list[Lab]:
    """Every shipped lab, by number."""
    root = shipped("labs")
    if not root.is_dir():
        return []
    found = [load_lab(p) for p in sorted(root.iterdir()) if (p / "lab.toml").is_file()]
    return sorted(found, key=lambda lab: lab.number)


def get_lab(which: str | int) -> Lab:
    """A lab by number (``3``, ``03``) or slug (``duplicate-delivery``)."""
    all_labs = labs()
    text = str(which).strip()
    for lab in all_labs:
        if (text.isdigit() and int(text) == lab.number) or text in (lab.slug, lab.dirname):
            return lab
    known = ", ".join(str(lab.number) for lab in all_labs) or "none"
    raise InputError(f"no lab {text!r}; the labs are {known} (protolab lab list)", code="E_UNKNOWN_LAB")


def _check_args(check: str, args: dict, where: str) -> None:
    """A checkpoint's arguments are ones its check takes (none missing), and an 'event' check names an
    event type the labs index: a typo fails the lab's load, not the learner's step."""
    import inspect

    from .checks import CHECKS, Facts

    params = inspect.signature(CHECKS[check]).parameters
    known = [n for n, p in params.items() if p.kind == p.KEYWORD_ONLY]
    unknown = sorted(set(args) - set(known))
    if unknown and not any(p.kind == p.VAR_KEYWORD for p in params.values()):
        raise InputError(f"{where}: check {check!r} takes no argument {unknown[0]!r} (it takes {', '.join(known)})",
                         code="E_LAB_FILE")
    missing = [n for n in known if params[n].default is inspect.Parameter.empty and n not in args]
    if missing:
        raise InputError(f"{where}: check {check!r} needs the argument {missing[0]!r}", code="E_LAB_FILE")
    if check == "event" and args.get("type") not in Facts._KEEP:
        raise InputError(f"{where}: event type {args.get('type')!r} is not one the labs can check (one of "
                         f"{', '.join(sorted(Facts._KEEP))})", code="E_LAB_FILE")


def _check_hints(check: str, hints: dict, where: str) -> None:
    """A checkpoint's hints are keyed by codes its check can report (a typo would never be shown)."""
    from .checks import case_codes

    known = case_codes(check)
    unknown = sorted(set(hints) - known)
    if unknown:
        raise InputError(f"{where}: check {check!r} never reports {unknown[0]!r}, so its hint would never be shown "
                         f"(it reports: {', '.join(sorted(known)) or 'nothing but met'})", code="E_LAB_FILE")

