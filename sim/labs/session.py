"""A lab in progress: its checkpoints evaluated against the learner's run, sticky once met,
hints keyed by what each check saw, questions answered, all kept in the progress file.

Used by the TUI's Guide panel (after every delivery, injection, reconcile or time travel) and by
``protolab lab check`` from the shell alike.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..errors import InputError
from ..store import ProgressStore, Store
from .catalog import Checkpoint, Lab, Question
from .checks import CHECKS, Ctx, Facts, Seen

__all__ = ["LabSession", "CheckpointState", "check_run_fits"]


@dataclass(frozen=True)
class CheckpointState:
    checkpoint: Checkpoint
    met: bool
    seen: Seen | None  # None when met earlier and not looked at again

    @property
    def id(self) -> str:
        return self.checkpoint.id


def _fill(template: str, saw: dict) -> str:
    class Missing(dict):
        def __missing__(self, key):
            return "?"

    try:
        return template.format_map(Missing({k: v for k, v in saw.items()}))
    except (ValueError, IndexError):
        return template


def _story_size(scenario: str) -> int | None:
    """How many tasks the scenario's story creates (None when it cannot be known)."""
    from ..errors import ProtolabError
    from ..scenario import load_scenario

    try:
        sc = load_scenario(scenario)
    except ProtolabError:
        return None
    if sc.stress is not None:
        return None
    return len(sc.tasks) or None


def check_run_fits(lab: Lab, store: Store) -> None:
    """Refuse a run that is not this lab's (another scenario)."""
    scenario = store.get_meta("scenario")
    if scenario and scenario != lab.scenario:
        raise InputError(f"{store.path} is a run of {scenario}; lab {lab.number} plays {lab.scenario} "
                         f"(start it with 'protolab lab start {lab.number}')", code="E_DB_OTHER_LAB")


class LabSession:
    """One lab, one run, one progress file."""

    def __init__(self, lab: Lab, store: Store, progress: ProgressStore, *, record: bool = True):
        check_run_fits(lab, store)
        self.lab = lab
        self.store = store
        self.progress = progress
        self.facts = Facts(store)
        self.ctx = Ctx(store, self.facts, progress, lab.number, expected_tasks=_story_size(lab.scenario))
        # Met checkpoints are written to the progress file (record) and, once there, not re-checked:
        # a checkpoint stays met even after the learner restarts the lab's run.
        self.record = record
        self.states: list[CheckpointState] = []
        self._opened = time.monotonic()
        self._checked_version = -1

    # ---------------------------------------------------------------- checkpoints

    def refresh(self, *, force: bool = False) -> list[str]:
        """Re-evaluate the unmet checkpoints if the run changed; returns the ids newly met."""
        changed = self.facts.update()
        if not changed and not force and self._checked_version == self.facts.version and self.states:
            return []
        self._checked_version = self.facts.version
        already = self.progress.met(self.lab.number)
        states, newly = [], []
        for cp in self.lab.checkpoints:
            if cp.id in already:
                states.append(CheckpointState(cp, True, None))
                continue
            seen = self.evaluate(cp)
            if seen.ok:
                newly.append(cp.id)
                if self.record:
                    self.progress.mark_met(self.lab.number, cp.id, seen.summary())
            states.append(CheckpointState(cp, seen.ok, seen))
        self.states = states
        return newly

    def action(self, kind: str, data: dict) -> list[str]:
        """Record something the learner did that the run's database cannot show (a time-travel
        visit, a view opened, a refused reconcile), then re-check."""
        self.progress.record_action(self.lab.number, kind, data)
        return self.refresh(force=True)

    def evaluate(self, cp: Checkpoint) -> Seen:
        fn = CHECKS[cp.check]
        try:
            return fn(self.ctx, **cp.args)
        except TypeError as e:
            raise InputError(f"lab {self.lab.number} checkpoint {cp.id}: bad arguments for {cp.check}: {e}",
                             code="E_LAB_FILE") from e

    @property
    def done(self) -> int:
        return sum(s.met for s in self.states)

    @property
    def total(self) -> int:
        return len(self.lab.checkpoints)

    def first_unmet(self) -> CheckpointState | None:
        return next((s for s in self.states if not s.met), None)

    def hint_for(self, state: CheckpointState) -> str:
        cp = state.checkpoint
        seen = state.seen or self.evaluate(cp)
        template = cp.hints.get(seen.code, cp.hint)
        return _fill(template, seen.saw)

    def hint(self) -> str:
        """The hint for the first unmet checkpoint, keyed to what the run shows."""
        s = self.first_unmet()
        if s is None:
            unanswered = [q for q in self.lab.questions if not self.answered(q)]
            if unanswered:
                return f"Every checkpoint is met. Answer the question: {unanswered[0].text}"
            return "Every checkpoint is met and every question answered: this lab is done."
        return f"{s.checkpoint.title}: {self.hint_for(s)}"

    def current_step(self) -> int:
        """Index of the first step with an unmet checkpoint (len(steps) when all are met)."""
        met = {s.id for s in self.states if s.met}
        for i, step in enumerate(self.lab.steps):
            if any(c.id not in met for c in step.checkpoints):
                return i
        return len(self.lab.steps)

    # ---------------------------------------------------------------- questions

    def expected(self, q: Question) -> str | None:
        """The right answer: fixed, or what a checkpoint saw in this run (None: not seen yet)."""
        if q.answer is not None:
            return q.answer
        cid, _, fieldname = q.answer_from.partition(".")
        seen = self.evaluate(self.lab.checkpoint(cid))
        value = seen.saw.get(fieldname) if seen.ok else None
        return None if value in (None, "") else str(value)

    def answered(self, q: Question) -> bool:
        a = self.progress.answers(self.lab.number).get(q.id)
        return bool(a and a["correct"])

    def answer(self, qid: str, given: str) -> tuple[bool, str]:
        """Check an answer; ``(correct, feedback)``. Recorded in the progress file."""
        q = next((x for x in self.lab.questions if x.id == qid), None)
        if q is None:
            raise InputError(f"lab {self.lab.number} has no question {qid!r}", code="E_UNKNOWN_QUESTION")
        given = given.strip()
        if q.kind == "choice" and given not in q.choices:
            raise InputError(f"{given!r} is not one of: {', '.join(q.choices)}", code="E_UNKNOWN_VALUE")
        want = self.expected(q)
        if want is None:
            return False, "Your run does not show this yet: meet the checkpoints first, then answer from what you see."
        ok = given.casefold() == want.casefold()
        self.progress.record_answer(self.lab.number, qid, given, ok)
        if ok:
            return True, q.explain or "Right."
        return False, q.feedback.get(given, "Not that. Look at the run again: the answer is in what it shows.")

    # ---------------------------------------------------------------- time

    def close(self) -> None:
        if self.record:
            self.progress.add_time(self.lab.number, time.monotonic() - self._opened)

    def summary(self) -> dict:
        """What ``lab check --json`` prints."""
        self.refresh(force=True)
        answers = self.progress.answers(self.lab.number)
        return {
            "lab": self.lab.number,
            "title": self.lab.title,
            "done": self.done,
            "total": self.total,
            "all_met": self.done == self.total,
            "checkpoints": [
                {"id": s.id, "title": s.checkpoint.title, "met": s.met,
                 "saw": (s.seen.code if s.seen else "met"), "hint": None if s.met else self.hint_for(s)}
                for s in self.states
            ],
            "questions": [
                {"id": q.id, "text": q.text, "answered": bool(answers.get(q.id, {}).get("correct"))}
                for q in self.lab.questions
            ],
        }
