"""One judgement of a lab: what ``lab check``, ``lab status``, ``lab submit``, ``lab verify`` and
``grade lab`` all say, and what the Guide ticks.

A lab is judged from two things only, its run and what the learner recorded beside it (the
actions the run's database cannot show: time-travel visits, views opened, refused reconciles; and
the answers given):

1. the run is re-delivered through the reference runtime (:func:`sim.labs.verify.verify_run`) and
   made again from the lab's start and its journal (:func:`sim.labs.verify.rederive_from_journal`):
   a run that does not come out with the same decisions, events and state digest, or holds an event
   nothing explains, is not genuine, and a grade gives it nothing;
2. every checkpoint is evaluated afresh on the run, with the actions recorded on that run (its
   ``lab_run`` id): nothing is remembered from an earlier evaluation, so a checkpoint met on a run
   since started over, replaced or edited is not met;
3. every answer given is compared with what is right for this run now.

A checkpoint met only through a screen action (a view opened, a visit in time: what the learner's
file says they did, which no replay confirms) is met for the learner, and *self-reported* for the
instructor (``CheckpointState.self_reported``): ``lab verify`` lists it apart, ``grade lab`` counts it
only with ``--count-self-reported``.

The TUI's Guide runs steps 2 and 3 after every action on the live run it is writing itself
(re-delivering its own writes after every step would prove nothing new); everything else runs all
three, so a score shown anywhere is the score verification gives.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError, ProtolabError
from ..store import Store
from .catalog import Checkpoint, Lab, Question
from .checks import CHECKS, Ctx, Facts, Seen

__all__ = ["CheckpointState", "Judgement", "Recorded", "context", "evaluate", "expected_answer", "answers_of",
           "judge", "judge_progress", "check_run_fits", "fill", "learner_facts", "LAB_KEY", "RUN_KEY"]

#: meta keys of a run made by 'protolab lab start': the lab's number and the run's own id
LAB_KEY = "lab"
RUN_KEY = "lab_run"


@dataclass(frozen=True)
class CheckpointState:
    checkpoint: Checkpoint
    met: bool
    seen: Seen

    @property
    def id(self) -> str:
        return self.checkpoint.id

    @property
    def self_reported(self) -> bool:
        """Met only through what the learner's screen recorded (a view opened, a visit in time): no
        replay of the run confirms it (:func:`sim.labs.checks.self_reported`)."""
        from .checks import self_reported

        return self.met and self_reported(self.checkpoint.check, self.checkpoint.args)


def fill(template: str, saw: dict) -> str:
    """A hint (or a ``shows`` line) with the fields the check saw (its facts were filled when the
    lab was rendered); a field it did not see reads ``?``."""
    from .facts import PLACEHOLDER

    def one(m):
        v = saw.get(m.group(1))
        return "?" if v is None or v == "" else str(v)

    return PLACEHOLDER.sub(one, template or "")


#: The most deliveries a lab's run may hold: its story is tens of deliveries, and every fault a learner
#: injects adds a few; this is a hundred times more than any lab's played run, and keeps judging a
#: submission (which reads the run's log into memory, and re-delivers it) small and quick.
LAB_RUN_MAX_DELIVERIES = 10_000

#: The largest file a lab's run may be (with its write-ahead log): such a run is a few megabytes. A
#: larger one is refused before it is opened (opening checks every page of the file).
LAB_RUN_MAX_BYTES = 64 << 20


def check_file_fits(lab: Lab, db) -> None:
    """Refuse a database file far larger than any run of a lab, before it is opened."""
    from pathlib import Path

    size = sum(p.stat().st_size for p in (Path(db), Path(f"{db}-wal")) if p.is_file())
    if size > LAB_RUN_MAX_BYTES:
        raise InputError(f"{db} is {size >> 20:,} MB; a run of lab {lab.number} is a few megabytes at most (its story and "
                         f"the faults played on it): it is not a run of this lab", code="E_LAB_RUN_TOO_LARGE")


def _story_size(scenario: str) -> int | None:
    """How many tasks the scenario's story creates (None when it cannot be known)."""
    from ..scenario import load_scenario

    try:
        sc = load_scenario(scenario)
    except ProtolabError:
        return None
    if sc.stress is not None:
        return None
    return len(sc.tasks) or None


def check_run_fits(lab: Lab, store: Store, name: str | None = None) -> None:
    """Refuse a run that is not this lab's (another scenario, or another lab's run, or one far larger
    than the lab's story). ``name``: what the messages call the run (default: its path)."""
    name = name or str(store.path)
    other = store.get_meta(LAB_KEY)
    if other and other != str(lab.number):
        raise InputError(f"{name} is your run of lab {other}, not of lab {lab.number} (lab {lab.number}'s run is "
                         f"made by 'protolab lab start {lab.number}')", code="E_DB_OTHER_LAB")
    scenario = store.get_meta("scenario")
    if scenario and scenario != lab.scenario:
        raise InputError(f"{name} is a run of {scenario}; lab {lab.number} plays {lab.scenario} "
                         f"(start it with 'protolab lab start {lab.number}')", code="E_DB_OTHER_LAB")
    # A lab's run is its story: the tasks the story creates, and the deliveries a learner's steps and
    # injected faults add to them. A run far beyond that is not one the lab made (a stress run renamed,
    # a padded submission), and is refused before anything reads it whole.
    story = _story_size(lab.scenario)
    if story is not None and store.count_upto("tasks", story) > story:
        raise InputError(f"{name} holds more tasks than lab {lab.number}'s story creates ({story}): it is not a run "
                         f"of this lab (start it with 'protolab lab start {lab.number}')", code="E_LAB_RUN_TOO_LARGE")
    if store.count_upto("deliveries", LAB_RUN_MAX_DELIVERIES) > LAB_RUN_MAX_DELIVERIES:
        raise InputError(f"{name} holds more than {LAB_RUN_MAX_DELIVERIES:,} deliveries; a lab's run is its story and "
                         f"the faults played on it (a few hundred at most): it is not a run of lab {lab.number}",
                         code="E_LAB_RUN_TOO_LARGE")


class Recorded:
    """Actions as a list (from a progress file, or from a submission's manifest), read the way a
    check reads them (:meth:`sim.store.ProgressStore.actions`)."""

    def __init__(self, lab: int, actions: list[dict]):
        self.lab = lab
        self.rows = [{"kind": str(a.get("kind", "")), "data": dict(a.get("data") or {}), "at": a.get("at", "")}
                     for a in actions]

    def actions(self, lab: int, kind: str | None = None) -> list[dict]:
        return [a for a in self.rows if lab == self.lab and (kind is None or a["kind"] == kind)]


def context(lab: Lab, store: Store, progress) -> Ctx:
    """What the checks read: the run (indexed) and the actions recorded on it. ``progress`` is a
    ProgressStore or a :class:`Recorded`."""
    check_run_fits(lab, store)
    return Ctx(store, Facts(store), progress, lab.number, expected_tasks=_story_size(lab.scenario),
               run_id=store.get_meta(RUN_KEY))


def evaluate_one(lab: Lab, ctx: Ctx, cp: Checkpoint) -> Seen:
    try:
        return CHECKS[cp.check](ctx, **cp.args)
    except TypeError as e:
        raise InputError(f"lab {lab.number} checkpoint {cp.id}: bad arguments for {cp.check}: {e}",
                         code="E_LAB_FILE") from e


def evaluate(lab: Lab, ctx: Ctx) -> list[CheckpointState]:
    """Every checkpoint, evaluated now on the run as it is (the index brought up to date first)."""
    ctx.facts.update()
    out = []
    for cp in lab.checkpoints:
        seen = evaluate_one(lab, ctx, cp)
        out.append(CheckpointState(cp, seen.ok, seen))
    return out


def learner_facts(lab: Lab, ctx: Ctx) -> dict:
    """The facts the lab's answers name, read from the learner's run as it is now (its other sides
    from the lab's reference run); computed once per state of the run."""
    from .facts import learner_values, placeholders

    names = {n for q in lab.questions for n in placeholders(q.answer or "")}
    return ctx.cached(("facts", lab.number), lambda: learner_values(lab, ctx.store, names))


def expected_answer(lab: Lab, q: Question, ctx: Ctx, states: list[CheckpointState] | None = None) -> str | None:
    """The right answer: what the learner's run shows, read by the facts the answer names (or by a
    checkpoint, ``answer_from``), or a fixed word (a table's or a field's name); None: the run does
    not show it (yet)."""
    from .facts import fill_known, placeholders

    if q.answer is not None:
        names = placeholders(q.answer)
        if not names:
            return q.answer
        values = learner_facts(lab, ctx)
        if any(values.get(n) is None for n in names):
            return None
        return fill_known(q.answer, values)
    cid, _, fieldname = q.answer_from.partition(".")
    seen = next((s.seen for s in states or () if s.id == cid), None)
    if seen is None:
        seen = evaluate_one(lab, ctx, lab.checkpoint(cid))
    value = seen.saw.get(fieldname) if seen.ok else None
    return None if value in (None, "") else str(value)


def answers_of(lab: Lab, ctx: Ctx, given: dict, states: list[CheckpointState] | None = None) -> dict[str, dict]:
    """Each question: the answer given (None: none) and whether it is right for this run."""
    out = {}
    for q in lab.questions:
        g = given.get(q.id)
        want = expected_answer(lab, q, ctx, states) if g is not None else None
        out[q.id] = {"given": g, "correct": g is not None and want is not None and str(g).strip().casefold() == want.casefold()}
    return out


@dataclass(frozen=True)
class Judgement:
    lab: Lab
    states: tuple[CheckpointState, ...]
    answers: dict  # question id -> {"given", "correct"}
    genuine: bool | None  # None: not re-delivered (the Guide's own live run)
    difference: str | None
    made_by_lab: bool  # the run carries this lab's mark (made by 'protolab lab start')

    @property
    def shown(self) -> Lab:
        """The lab as the learner reads it: its texts filled from its reference run's facts."""
        from .facts import render

        if "_shown" not in self.__dict__:
            object.__setattr__(self, "_shown", self.lab if self.lab.rendered else render(self.lab))
        return self.__dict__["_shown"]

    @property
    def hints(self) -> dict:
        """Checkpoint id -> its hint (filled), for the unmet ones."""
        cps = {c.id: c for c in self.shown.checkpoints}
        return {s.id: hint_of(CheckpointState(cps[s.id], s.met, s.seen)) for s in self.states if not s.met}

    @property
    def done(self) -> int:
        return sum(s.met for s in self.states)

    @property
    def total(self) -> int:
        return len(self.states)

    @property
    def self_reported(self) -> int:
        """Checkpoints met only through the learner's recorded screen actions (counted in ``done``)."""
        return sum(s.self_reported for s in self.states)

    @property
    def verified(self) -> int:
        """Checkpoints met that the run itself shows (``done`` without the self-reported ones)."""
        return self.done - self.self_reported

    @property
    def answered(self) -> int:
        return sum(a["correct"] for a in self.answers.values())

    @property
    def questions(self) -> int:
        return len(self.lab.questions)

    @property
    def all_met(self) -> bool:
        return self.genuine is not False and self.done == self.total

    def to_dict(self) -> dict:
        """What ``lab check --json`` prints and a submission's manifest carries (every text filled)."""
        shown = self.shown
        cps = {c.id: c for c in shown.checkpoints}
        hints = self.hints
        return {
            "lab": self.lab.number,
            "title": shown.title,
            "genuine": self.genuine,
            "difference": self.difference,
            "made_by_lab": self.made_by_lab,
            "done": self.done,
            "verified": self.verified,
            "self_reported": self.self_reported,
            "total": self.total,
            "all_met": self.all_met,
            "answered": self.answered,
            "checkpoints": [
                {"id": s.id, "title": cps[s.id].title, "met": s.met, "self_reported": s.self_reported, "saw": s.seen.code,
                 "hint": None if s.met else hints.get(s.id),
                 "shows": fill(cps[s.id].shows, s.seen.saw) if s.met and cps[s.id].shows else None}
                for s in self.states
            ],
            "questions": [
                {"id": q.id, "text": q.text, "answered": self.answers[q.id]["correct"]} for q in shown.questions
            ],
        }


def hint_of(state: CheckpointState) -> str:
    cp = state.checkpoint
    return fill(cp.hints.get(state.seen.code, cp.hint), state.seen.saw)


def judge(lab: Lab, store: Store, actions, answers: dict, *, verify: bool = True, progress=None) -> Judgement:
    """The lab judged on ``store``: ``actions`` (a list of ``{"kind", "data"}``, a Recorded or a
    ProgressStore) and ``answers`` (question id -> the answer given). ``progress(done, total)``:
    the re-delivery's deliveries, as it goes."""
    from .verify import verify_run

    recorded = actions if hasattr(actions, "actions") else Recorded(lab.number, list(actions))
    ctx = context(lab, store, recorded)
    genuine, difference = None, None
    if verify:
        verdict = verify_run(store, progress=progress, lab=lab)
        genuine, difference = verdict["ok"], verdict["difference"]
    states = evaluate(lab, ctx)
    given = {k: v for k, v in answers.items() if v is not None}
    return Judgement(lab, tuple(states), answers_of(lab, ctx, given, states), genuine, difference,
                     store.get_meta(LAB_KEY) == str(lab.number))


def judge_progress(lab: Lab, store: Store, progress, *, verify: bool = True) -> Judgement:
    """The lab judged on ``store`` with what the learner's progress file recorded for it."""
    given = {q: a["answer"] for q, a in progress.answers(lab.number).items()}
    return judge(lab, store, progress.actions(lab.number), given, verify=verify)
