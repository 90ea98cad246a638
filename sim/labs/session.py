"""A lab in progress: the Guide's view of the learner's live run, judged after every action by the
same evaluation as ``lab check`` and ``lab verify`` (:mod:`sim.labs.judge`), nothing remembered
between evaluations; actions and answers recorded in the progress file.

Used by the TUI's Guide panel (after every delivery, injection, reconcile or time travel).
"""

from __future__ import annotations

import time

from ..errors import InputError
from ..store import ProgressStore, Store
from .catalog import Checkpoint, Lab, Question
from .checks import Seen
from .judge import (RUN_KEY, CheckpointState, answers_of, check_run_fits, context, evaluate, evaluate_one,
                    expected_answer, fill, hint_of, judge_progress)

__all__ = ["LabSession", "CheckpointState", "check_run_fits"]


class LabSession:
    """One lab, one run, one progress file."""

    def __init__(self, lab: Lab, store: Store, progress: ProgressStore, *, record: bool = True):
        from .facts import render

        self.lab = lab if lab.rendered else render(lab)  # every text filled from the lab's reference run
        self.store = store
        self.progress = progress
        self.ctx = context(lab, store, progress)
        self.facts = self.ctx.facts
        self.record = record  # time spent is added to the progress file on close
        self.states: list[CheckpointState] = []
        self._opened = time.monotonic()
        self._checked_version = -1

    # ---------------------------------------------------------------- checkpoints

    def refresh(self, *, force: bool = False) -> list[str]:
        """Evaluate every checkpoint again if the run changed (or ``force``); returns the ids met
        now that were not at the last evaluation (none at the first)."""
        changed = self.facts.update()
        if not changed and not force and self._checked_version == self.facts.version and self.states:
            return []
        self._checked_version = self.facts.version
        before = {s.id for s in self.states if s.met} if self.states else None
        self.states = evaluate(self.lab, self.ctx)
        if before is None:
            return []
        return [s.id for s in self.states if s.met and s.id not in before]

    def action(self, kind: str, data: dict) -> list[str]:
        """Record something the learner did on this run that its database cannot show (a
        time-travel visit, a view opened, a refused reconcile), then re-check."""
        run = self.store.get_meta(RUN_KEY)
        self.progress.record_action(self.lab.number, kind, {**data, "run": run} if run else dict(data))
        return self.refresh(force=True)

    def evaluate(self, cp: Checkpoint) -> Seen:
        return evaluate_one(self.lab, self.ctx, cp)

    @property
    def done(self) -> int:
        return sum(s.met for s in self.states)

    @property
    def total(self) -> int:
        return len(self.lab.checkpoints)

    def first_unmet(self) -> CheckpointState | None:
        return next((s for s in self.states if not s.met), None)

    def hint_for(self, state: CheckpointState) -> str:
        return hint_of(state)

    def shows(self, state: CheckpointState) -> str:
        """What a met checkpoint's run showed, in words ('' when the lab says nothing more)."""
        cp = state.checkpoint
        return fill(cp.shows, state.seen.saw) if state.met and cp.shows else ""

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
        return expected_answer(self.lab, q, self.ctx, self.states or None)

    def given(self) -> dict:
        return {q: a["answer"] for q, a in self.progress.answers(self.lab.number).items()}

    def answered(self, q: Question) -> bool:
        """The answer given is right for this run as it is now."""
        g = self.given().get(q.id)
        return g is not None and answers_of(self.lab, self.ctx, {q.id: g}, self.states or None)[q.id]["correct"]

    def right(self) -> int:
        given = self.given()
        return sum(a["correct"] for a in answers_of(self.lab, self.ctx, given, self.states or None).values())

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
        return False, self.feedback(q, given)

    def feedback(self, q: Question, given: str) -> str:
        """What a wrong answer is told: the lab's words for it, else what the runs show of the thing
        it names (a message of the other side, a code from nearby output, ...), else to look again."""
        from .explain import describe

        written = {k.casefold(): v for k, v in q.feedback.items()}.get(given.casefold())
        if written:
            return written
        said = describe(self.lab, self.ctx, given)
        if said:
            return f"{said} That is not what the question asks: read it again."
        return "Not that. Look at the run again: the answer is in what it shows."

    # ---------------------------------------------------------------- time

    def close(self) -> None:
        if self.record:
            self.progress.add_time(self.lab.number, time.monotonic() - self._opened)

    def summary(self) -> dict:
        """The whole judgement, re-delivery included: what ``lab check --json`` prints."""
        self.refresh(force=True)
        return judge_progress(self.lab, self.store, self.progress).to_dict()
