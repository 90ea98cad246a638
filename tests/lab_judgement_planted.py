"""Bugs planted by hand in the lab judgement (issue 48, part 1): sim/labs/judge.py, verify.py and
submit.py, one at a time, each run against the quick lab-judgement tests: a bug is caught when they
fail. Not a test (a benchmark of the tests, like tests/exit_mutants.py; figures in
docs/performance.md).

    python tests/lab_judgement_planted.py            # every planted bug; about 10 minutes on 2 shared cores
    python tests/lab_judgement_planted.py J3 V7      # only these (ids, or 1-based numbers)

Each bug is one small change to a file of the checkout; the loop is tests/planting.py's: the file is
restored after its run, whatever happens (``finally``), and checked byte for byte as it was. To keep working in
the checkout meanwhile, run it in a copy: ``cp -r . /tmp/lj && PYTHONPATH=/tmp/lj python
/tmp/lj/tests/lab_judgement_planted.py`` (the planted file is the copy's, never the checkout's).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import planting  # noqa: E402
from planting import Bug  # noqa: E402

TESTS = ["tests/test_lab_judgement_planted.py", "tests/test_lab_forgery.py", "tests/test_lab_judgement.py"]

J, V, S = "sim/labs/judge.py", "sim/labs/verify.py", "sim/labs/submit.py"

#: (id, file, the text, the bug)
BUGS = [
    # judge.py: answers only from checkpoints met; the scoring of checkpoints and answers
    ("J1", J, "value = seen.saw.get(fieldname) if seen.ok else None", "value = seen.saw.get(fieldname)"),
    ("J2", J, "str(g).strip().casefold() == want.casefold()", "str(g).strip().casefold() in want.casefold()"),
    ("J3", J, "return self.genuine is not False and self.done == self.total", "return self.done == self.total"),
    ("J4", J, "return self.done - self.self_reported", "return self.done"),
    ("J5", J, "return self.met and self_reported(self.checkpoint.check, self.checkpoint.args)",
     "return self_reported(self.checkpoint.check, self.checkpoint.args)"),
    ("J6", J, "genuine, difference = verdict[\"ok\"], verdict[\"difference\"]",
     "genuine, difference = True, verdict[\"difference\"]"),
    ("J7", J, "return sum(a[\"correct\"] for a in self.answers.values())",
     "return sum(a[\"given\"] is not None for a in self.answers.values())"),
    ("J8", J, "store.get_meta(LAB_KEY) == str(lab.number))", "True)"),
    ("J9", J, "if other and other != str(lab.number):", "if other and other == str(lab.number):"),
    ("J10", J, "return [a for a in self.rows if lab == self.lab and (kind is None or a[\"kind\"] == kind)]",
     "return [a for a in self.rows if (kind is None or a[\"kind\"] == kind)]"),
    # verify.py: the journal's re-derivation; events, deliveries and state compared
    ("V1", V, "            if dict(a) != dict(b):", "            if a[\"type\"] != b[\"type\"]:"),
    ("V2", V, "            if a != b:\n", "            if (a is None) != (b is None):\n"),
    ("V3", V, "        if store.state_digest() != made.state_digest():", "        if False:"),
    ("V4", V, "_STORY = (\"scenario\", \"seed\", \"policy\", \"faults\")", "_STORY = (\"scenario\", \"policy\", \"faults\")"),
    ("V5", V, "_BY_HAND = frozenset({\"machine_loaded\", \"artifact_stored\"})",
     "_BY_HAND = frozenset({\"machine_loaded\", \"artifact_stored\", \"fault_injected\"})"),
    ("V6", V, "_COMPARED = (\"type\", \"task_id\", \"message_id\", \"data\")", "_COMPARED = (\"type\", \"task_id\", \"message_id\")"),
    ("V7", V, "if (was[\"decision\"], was[\"state_after\"]) != (out.decision, out.state):",
     "if was[\"decision\"] != out.decision:"),
    ("V8", V, "    if difference is None and lab is not None:", "    if difference is None and lab is None:"),
    ("V9", V, "    if difference is None and ours != theirs:", "    if False:"),
    ("V10", V, "    if check and difference is None and regenerated:", "    if False:"),
    ("V11", V, "            if a is None:\n                return", "            if a is None:\n                continue\n                return"),
    ("V12", V, "    if plugged:", "    if False:"),
    # submit.py: what a submission holds and how it is checked
    ("S1", S, "j = judge(lab, store, actions, given, progress=progress)", "j = judge(lab, store, actions, given, progress=progress, verify=False)"),
    ("S2", S, "\"done\": j.done,", "\"done\": manifest[\"summary\"][\"done\"],"),
    ("S3", S, "\"answered\": j.answered,", "\"answered\": manifest[\"summary\"][\"answered\"],"),
    ("S4", S, "\"verified\": j.verified,", "\"verified\": j.done,"),
    ("S5", S, "actions = [a for a in prog.get(\"actions\") or [] if isinstance(a, dict)]", "actions = []"),
    ("S6", S, "if not isinstance(manifest, dict) or manifest.get(\"format\") != FORMAT:", "if not isinstance(manifest, dict):"),
    ("S7", S, "{q: a[\"answer\"] for q, a in dump[\"answers\"].items()}).to_dict()", "{}).to_dict()"),
    ("S8", S, "\"genuine\": j.genuine, \"difference\": j.difference,", "\"genuine\": j.genuine is not False, \"difference\": j.difference,"),
]


#: the five found equivalent (docs/performance.md, "The lab judgement")
EQUIVALENT = {
    "J10": "judge makes its Recorded with the lab judged and Ctx.actions passes that same number",
    "V3": "for a simulated lab the journal's re-derivation and verify_run's own digest comparison are twins",
    "V6": "the journal's re-derivation compares every event whole right after, naming the same event",
    "V10": "the journal's replay makes the same deliveries, so the re-derivation finds the log short at that event",
    "S8": "verify_submission always re-delivers: genuine is verify_run's bool, and x is not False is x",
}
WHAT = {"J": "judge", "V": "verify", "S": "submit"}


def main(argv: list[str]) -> int:
    bugs = [Bug(bid, path, f"{WHAT[bid[0]]}: {new.strip()[:60]}", old, new, equivalent=EQUIVALENT.get(bid, ""))
            for bid, path, old, new in BUGS]
    return planting.main(argv, bugs, TESTS)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
