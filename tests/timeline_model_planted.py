"""Bugs planted by hand in sim/timeline.py (what the page decides: which delivery a broken invariant's
witness marks, the rows, the moves, the counts, "every invariant holds") and sim/model.py (the pure model
explore searches on and checks SQLite against), issue 48, part 1; one at a time, each run against the tests
of its module: a bug is caught when one of them fails. Not a test: a measure of the tests (the loop is
tests/planting.py's: the file restored after each bug, checked byte for byte at the end). Results:
docs/performance.md ("The timeline and the model: bugs planted by hand").

    .venv/bin/python tests/timeline_model_planted.py           # every planted bug
    .venv/bin/python tests/timeline_model_planted.py T2 M5     # only these
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import planting  # noqa: E402
from planting import Bug  # noqa: E402

T, M, F = "sim/timeline.py", "sim/model.py", "sim/folds.py"

TESTS = {
    T: ["tests/test_timeline_boundaries.py", "tests/test_timeline.py"],
    M: ["tests/test_model_boundaries.py", "tests/test_explore_model.py"],
    # (the model's folds are sim/folds.py's, shared with the store since issue 46: judged by the model's tests
    # and the contract both stores are held to)
    F: ["tests/test_model_boundaries.py", "tests/test_explore_model.py", "tests/test_store_contract.py",
        "tests/test_judges_reducer.py"],
}

BUGS = [
    # timeline: what the page says about the run
    Bug("T1", T, "a witness naming a message marks its last delivery, not its first",
        '        first_row_of_message.setdefault(d["message_id"], i)', '        first_row_of_message[d["message_id"]] = i'),
    Bug("T2", T, "the state column shows every delivery's state, moved or not (the version test dropped)",
        'if d["state_after"] is not None and d["state_version_after"] != last_version.get(d["task_id"]):',
        'if d["state_after"] is not None:'),
    Bug("T3", T, "a witness naming a delivery and a message marks the message's first delivery (order swapped)",
        "    for d in found[\"delivery\"]:\n        if d in by_delivery:\n            return by_delivery[d]\n"
        "    for m in found[\"message\"]:\n        if m in by_message:\n            return by_message[m]\n",
        "    for m in found[\"message\"]:\n        if m in by_message:\n            return by_message[m]\n"
        "    for d in found[\"delivery\"]:\n        if d in by_delivery:\n            return by_delivery[d]\n"),
    Bug("T4", T, "a witness's 'late' message not placed (the key dropped)",
        '("message_id", "message", "first", "second", "late")', '("message_id", "message", "first", "second")'),
    Bug("T5", T, "witnesses past the cap: one fewer counted as 'more'",
        '"more": max(0, len(r.witnesses) - WITNESS_CAP)})', '"more": max(0, len(r.witnesses) - WITNESS_CAP - 1)})'),
    Bug("T6", T, "an event outside a delivery placed with the delivery before it, not after",
        '            place(held, i, rows[i]["d"])', '            place(held, max(i - 1, 0), rows[i]["d"])'),
    Bug("T7", T, "events after the last delivery dropped",
        "    if rows:\n        for held in loose:", "    if False:\n        for held in loose:"),
    Bug("T8", T, "each decision counted once at most (+1 dropped)",
        'decisions[d["decision"]] = decisions.get(d["decision"], 0) + 1', 'decisions[d["decision"]] = 1'),
    Bug("T9", T, "an agent of a role not in the lane order comes first, not last",
        "LANE_ORDER.index(base) if base in LANE_ORDER else len(LANE_ORDER)", "LANE_ORDER.index(base) if base in LANE_ORDER else -1"),
    Bug("T10", T, "a payload exactly at the cap cut (<= to <)",
        "    if len(text) <= PAYLOAD_CAP:", "    if len(text) < PAYLOAD_CAP:"),
    Bug("T11", T, "only the first 19 witnesses listed in the header, the 'more' count unchanged",
        '            for j, (row, w) in enumerate(b["witnesses"][:20]):',
        '            for j, (row, w) in enumerate(b["witnesses"][:19]):'),
    Bug("T12", T, "--no-check says every invariant holds (the check's flag ignored)",
        "    elif p.checked and p.breaks == [] and p.rows:", "    elif p.breaks == [] and p.rows:"),
    Bug("T13", T, "an invariant that holds listed as broken (the ok test inverted)",
        "            if r.ok:\n                continue\n            placed = [(_witness_row",
        "            if not r.ok and False:\n                continue\n            placed = [(_witness_row"),
    Bug("T14", T, "a fault marked where its event sits, not on the delivery it hit",
        '        faults.append(_fault(e, i if hit is None else row_of_delivery[hit], hit))',
        '        faults.append(_fault(e, i, hit))'),
    Bug("T15", T, "a duplicate's mark on the first delivery of its message, not the copy at the tick it names",
        "    return next((d for d, t in mine if t in ticks), mine[0][0]) if len(mine) > 1 else mine[0][0]",
        "    return mine[0][0]"),
    Bug("T16", T, "a fault's mark on the message it was injected on, though it made another",
        "    if made:\n        return min(made)", "    if made and False:\n        return min(made)"),
    # model: the same decisions as the engine, from the same inputs
    Bug("M1", M, "a task's 'has effects' always false",
        'any(e["task_id"] == task_id for e in self._effects.values()))', "False)"),
    Bug("M2", M, "intents_for ignores the task (the key's other tasks' intents returned)",
        "if k[0] == task_id and k[1] == key),", "if k[1] == key),"),
    Bug("M3", M, "a sequence number counted used by the message itself (its id test dropped)",
        '                   and m["message_id"] != message_id and m["idempotency_key"] != key',
        '                   and m["idempotency_key"] != key'),
    Bug("M4", M, "a body replaced at its own number (< to <=)",
        '                            and m["sender_seq"] is not None and m["sender_seq"] < seq):',
        '                            and m["sender_seq"] is not None and m["sender_seq"] <= seq):'),
    Bug("M5", M, "a message id's second envelope logged as its first (the digest test dropped)",
        '        same = [r["msg_seq"] for r in rows if r["envelope_digest"] == envelope_digest]',
        '        same = [r["msg_seq"] for r in rows]'),
    Bug("M6", F, "a task out of review stays untrusted",
        '(1 if e.from_state == "needs_review" else None)', 'None'),
    Bug("M7", F, "a conflicting intent recorded trusted",
        'e.decision, 0 if e.decision == "conflict" else 1,', 'e.decision, 1,',
        equivalent="an intent recorded with decision conflict is always followed, in the same delivery, by "
                   "conflict_recorded for the same task and key, which sets trusted = 0 on every intent of that key"),
    Bug("M8", F, "an intent recorded again keeps its first message (naive's last write does not win)",
        '_INTENT_KEY, ("seen",), ("message_id", "result")),', '_INTENT_KEY, ("seen",), ("result",)),'),
    Bug("M9", F, "the next arrival number not past the last recorded (+1 dropped)",
        'AtLeast("next_arrival", e.arrival + 1)', 'AtLeast("next_arrival", e.arrival)'),
    Bug("M10", F, "a conflict distrusts every intent of the task, not only the key's",
        'Update("intents", ("task_id", "idempotency_key"), ("trusted",), (), (), (), (0, task_id, e.key)),',
        'Update("intents", ("task_id",), ("trusted",), (), (), (), (0, task_id)),'),
    Bug("M11", M, "a fence lifted by a review before the last fence (fences[-1] to fences[0])",
        "e.seq > fences[-1] and", "e.seq > fences[0] and"),
    Bug("M12", M, "another conversation's fence fences this one",
        "                fenced = fenced or e.task_id == trace_id", "                fenced = True"),
    Bug("M13", M, "the sender's numbers read back for every delivery of a message, not its first",
        '            if m["sender_seq"] is not None and first == d["delivery_id"] else None)',
        '            if m["sender_seq"] is not None else None)'),
    Bug("M14", M, "agreement compares the number of rows only",
        "        if ours != theirs:\n", "        if len(ours) != len(theirs):\n"),
    Bug("M15", F, "a late result not counted on its task",
        '("late_results",), (), (1, task_id)', '("late_results",), (), (0, task_id)'),
    Bug("M16", M, "a retraction counted as an effect resting on the task (its kind test dropped)",
        '            if e["task_id"] == task_id or e["kind"] == "retract":', '            if e["task_id"] == task_id:'),
    Bug("M17", M, "the first outcome of a message may be its digest_scheme_assumed event",
        '                    and e.type != "digest_scheme_assumed":', "                    :"),
]


def main(argv: list[str]) -> int:
    return planting.main(argv, BUGS, TESTS)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
