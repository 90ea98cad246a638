"""Bugs planted by hand in sim/explore.py and sim/a2a.py (issue 48, part 1), one at a time, each run against
the tests of its module: a bug is caught when one of them fails. Not a test: a measure of the tests (the loop
is tests/planting.py's: the file restored after each bug, checked byte for byte at the end). Results:
docs/performance.md ("Explore and the A2A export: bugs planted by hand").

    .venv/bin/python tests/explore_a2a_planted.py            # every planted bug
    .venv/bin/python tests/explore_a2a_planted.py X3 A7      # only these
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import planting  # noqa: E402
from planting import Bug  # noqa: E402

X, A = "sim/explore.py", "sim/a2a.py"

#: the quick tests of each module, in one process (the boundary tests first: they are the quickest to fail)
TESTS = {
    X: ["tests/test_explore_boundaries.py", "tests/test_explore.py", "tests/test_explore_model.py"],
    A: ["tests/test_a2a_boundaries.py", "tests/test_a2a.py"],
}

BUGS = [
    # explore: what the search decides (a break found or not, its path, its counts, what it refuses)
    Bug("X1", X, "--depth 0 accepted (the refusal's < 1 made < 0)",
        "    if depth < 1:\n", "    if depth < 0:\n"),
    Bug("X2", X, "exhausted said one level early (the last level's single state not explored)",
        "            if not level:\n                result.exhausted = True",
        "            if len(level) <= 1:\n                result.exhausted = True"),
    Bug("X3", X, "every invariant judged, not the ones asked for (only= dropped)",
        "check(child.run.store, only=judged)", "check(child.run.store)"),
    Bug("X4", X, "the invariants asked for ignored: always those of state",
        "judged = frozenset(STATE_INVARIANTS if invariants is None else invariants)",
        "judged = frozenset(STATE_INVARIANTS)"),
    Bug("X5", X, "two orders reaching one state counted twice (the fingerprint's dedup dropped)",
        "        if fp in seen:\n", "        if False:\n"),
    Bug("X6", X, "a fault placed on a message of a type it cannot touch (the type filter dropped)",
        "return (not fault.only or env.type in fault.only) and (anywhere or fault.default_match(env))",
        "return (anywhere or fault.default_match(env))"),
    Bug("X7", X, "a step's placements past the first question never tried (off by one)",
        "todo.extend(answers[:j] + (True,) for j in range(len(given), len(answers)))",
        "todo.extend(answers[:j] + (True,) for j in range(len(given) + 1, len(answers)))"),
    Bug("X8", X, "the counterexample without the faults that fired",
        "faults=tuple(faults), policy=policy,", "faults=(), policy=policy,"),
    Bug("X9", X, "a rate selector accepted and a type refused (the refusal's kind swapped)",
        '        if parse_fault(f).kind == "rate":', '        if parse_fault(f).kind == "type":'),
    Bug("X10", X, "a run explored one round past its max_rounds (< to <=)",
        "    while run.now < run.settings.max_rounds:", "    while run.now <= run.settings.max_rounds:"),
    Bug("X11", X, "a type selector the run never sends not refused (only message ids checked)",
        'parse_fault(f).kind in ("message", "type") for f in faults)', 'parse_fault(f).kind in ("message",) for f in faults)'),
    Bug("X12", X, "a fault placed more than once (its 'not placed yet' dropped)",
        "                if (self.placed_on[i] is None and spec not in self.specs",
        "                if (spec not in self.specs"),
    Bug("X13", X, "place='any' ignored: faults placed only where their default selector would",
        '        run.bus.anywhere = place == "any"', "        run.bus.anywhere = False"),
    Bug("X14", X, "the last invariant broken reported, not the first",
        "                        first = broken[0]", "                        first = broken[-1]"),
    Bug("X15", X, "a fault that fired twice on one message named twice in the counterexample",
        "        if text not in out:\n            out.append(text)", "        out.append(text)"),
    Bug("X16", X, "a break confirmed without the engine reaching the search's state (agreement dropped)",
        "    if differ or found.invariant not in broken:", "    if found.invariant not in broken:"),
    # a2a: what the export says of the run
    Bug("A1", A, "a task_result sent as ROLE_USER (the agent's types lose task_result)",
        'AGENT_TYPES = frozenset({"task_started", "task_result"})', 'AGENT_TYPES = frozenset({"task_started"})'),
    Bug("A2", A, "an Agent Card's role read from the name's last part, not its first",
        '    return participant.split("-", 1)[0]', '    return participant.split("-", 1)[-1]'),
    Bug("A3", A, "the course extension state on every task but needs_review (in to not in)",
        "    if state in A2A_EXTENSION_STATES:", "    if state not in A2A_EXTENSION_STATES:"),
    Bug("A4", A, "budgetLeft exported as the total (wrong key)",
        '"budgetLeft": t["budget_left"]', '"budgetLeft": t["budget_total"]'),
    Bug("A5", A, "a task's status timestamp is its first change, not its last",
        '            last_change[tr["task_id"]] = tr["created_at"]',
        '            last_change.setdefault(tr["task_id"], tr["created_at"])'),
    Bug("A6", A, "a task's artifacts also listed as unattached (pop made get)",
        'artifacts_of(by_task.pop(t["task_id"], ()))', 'artifacts_of(by_task.get(t["task_id"], ()))'),
    Bug("A7", A, "the artifacts counted are the last batch only (+= made =)",
        '            self.counts["artifacts"] += len(out)', '            self.counts["artifacts"] = len(out)'),
    Bug("A8", A, "senderSeq exported as the sender's generation (wrong key)",
        '"senderSeq": m["sender_seq"]', '"senderSeq": m["sender_generation"]'),
    Bug("A9", A, "a message's contextId is its task, not its conversation",
        '        "contextId": m["trace_id"],\n        "taskId": m["task_id"],',
        '        "contextId": m["task_id"],\n        "taskId": m["task_id"],'),
    Bug("A10", A, "a task never changed gets timestamp null (the None guard dropped)",
        "    if timestamp is not None:\n        status", "    if True:\n        status"),
    Bug("A11", A, "unattached artifacts: those of no task last, not first",
        "key=lambda k: (k is not None, k or \"\")", "key=lambda k: (k is None, k or \"\")"),
    Bug("A12", A, "the state mapping marks every A2A-defined state an extension (in to not in)",
        '"extension": s in A2A_EXTENSION_STATES,', '"extension": s not in A2A_EXTENSION_STATES,'),
    Bug("A13", A, "a message's text part names the recipient as sender (swapped)",
        "f\"{m['type']} from {m['sender']} to {m['recipient']}\"", "f\"{m['type']} from {m['recipient']} to {m['sender']}\""),
    Bug("A14", A, "an artifact's firstTick exported as its size (wrong key)",
        '"firstTick": row["first_tick"]}}', '"firstTick": row["size"]}}'),
]


def main(argv: list[str]) -> int:
    return planting.main(argv, BUGS, TESTS)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
