"""Bugs planted by hand in sim/gathers.py and sim/versions.py (issue 48, part 1), one at a time, each run
against the tests that concern its module: a bug is caught when one of them fails. Not a test: a measure
of the tests, like tests/exit_mutants.py. Results: docs/performance.md.

    .venv/bin/python tests/gathers_versions_planted.py            # every planted bug
    .venv/bin/python tests/gathers_versions_planted.py G3 V7      # only these

Each bug is one small change to the file (the text replaced occurs once); the loop is tests/planting.py's:
the file is restored after its run in a ``finally``, whatever happens, and checked byte for byte at the end.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import planting  # noqa: E402
from planting import Bug  # noqa: E402

#: the tests run against each module's bugs (quick set, one process)
TESTS = {
    "sim/gathers.py": ["tests/test_trace_gathers.py", "tests/test_timed_out.py", "tests/test_gather_reductions.py",
                       "tests/test_gather_boundaries.py"],
    "sim/versions.py": ["tests/test_versions.py", "tests/test_envelope.py", "tests/test_undeclared_fields.py",
                        "tests/test_closed_payloads.py", "tests/test_version_boundaries.py"],
}

G, V = "sim/gathers.py", "sim/versions.py"

#: (id, file, what the bug does, the text, the bug)
BUGS = [
    ("G1", G, "membership: the first member task's worker left out of the declared membership",
     'sorted({workers[t] for t in spec.over})', 'sorted({workers[t] for t in spec.over[1:]})'),
    ("G2", G, "threshold: the declared quorum one below the scenario's",
     'out["threshold"] = spec.threshold', 'out["threshold"] = spec.threshold - 1'),
    ("G3", G, "tie-break: the declared tie-break dropped",
     '        out["tieBreak"] = spec.tie_break', '        pass'),
    ("G4", G, "membership of a recorded gather: the first contributor left out",
     'for c in data.get("contributions") or []})', 'for c in (data.get("contributions") or [])[1:]})'),
    ("G5", G, "naive FIRST_SUCCESS: the latest by its sender's clock, not the earliest",
     'first = min(ok, key=lambda c: c["at"])', 'first = max(ok, key=lambda c: c["at"])'),
    ("G6", G, "naive majority: the least common verdict wins",
     'top = max(counts.values())', 'top = min(counts.values())'),
    ("G7", G, "wrong reduction rule: the naive policy reduces by the declared rule",
     'return majority_reduce(gather, contributions) if how == "majority"',
     'return evaluate_gather(gather, contributions) if how == "majority"'),
    ("G8", G, "a result that did not fail (retry, denied) counted as a success",
     'payload.get("status") == "succeeded"', 'payload.get("status") != "failed"'),
    ("G9", G, "the vote the artifact holds dropped from the contribution",
     '        body["vote"] = content["vote"]', '        pass'),
    ("G10", G, "reduced once ANY member settled, not ALL",
     'if all(self._settled_for_gather(t) for t in g.over):', 'if any(self._settled_for_gather(t) for t in g.over):'),
    ("G11", G, "deadline off by one: reduced at the deadline round, not past it (> to >=)",
     'if opened is not None and self.now > opened + g.deadline:',
     'if opened is not None and self.now >= opened + g.deadline:'),
    ("G12", G, "deadline off by one the other way: reduced a round late (> to > +1)",
     'if opened is not None and self.now > opened + g.deadline:',
     'if opened is not None and self.now > opened + g.deadline + 1:'),
    ("G13", G, "deadline condition inverted: the safe runtime never times a gather out",
     'elif self.policy.gathers == "declared":', 'elif self.policy.gathers != "declared":'),
    ("G14", G, "the gather opens at the last request, not the first (min to max)",
     'opened = self._gathers_opened[g.id] = min(asked)', 'opened = self._gathers_opened[g.id] = max(asked)'),
    ("G15", G, "a refused request opens the gather (accepted dropped)",
     'r["task_id"] in g.over\n                             and r["delivery_decision"] == "accepted"]',
     'r["task_id"] in g.over]'),
    ("G16", G, "a reply exactly at the deadline dropped (<= to <)",
     'r["delivery_tick"] <= until)', 'r["delivery_tick"] < until)'),
    ("G17", G, "late replies counted: a result after the deadline contributes",
     '(until is None or r["delivery_tick"] <= until)', '(True or r["delivery_tick"] <= until)'),
    ("G18", G, "a member's last accepted result contributes, not its first",
     'first.setdefault(r["task_id"], r)', 'first[r["task_id"]] = r'),
    ("G19", G, "a refused result contributes (accepted dropped)",
     'if r["type"] == "task_result" and r["delivery_decision"] == "accepted"]', 'if r["type"] == "task_result"]'),
    ("G20", G, "contributions in task order, not delivery order",
     'key=lambda r: r["delivery_id"])', 'key=lambda r: r["task_id"])'),
    ("G21", G, "the reduction event caused by the first contribution, not the last",
     'contributions[-1]["id"] if contributions else None', 'contributions[0]["id"] if contributions else None'),
    ("G22", G, "a gather not marked reduced: reduced again at every round",
     '            done.add(g.id)\n', ''),
    ("G23", G, "naive FIRST_SUCCESS: a contribution without success counted as one",
     'c.get("payload", {}).get("success", True)]', 'c.get("payload", {}).get("success", True) or True]'),
    ("V1", V, "the next major (2.0) read",
     'READS: tuple[Version, ...] = (Version(1, 0), Version(1, 1))',
     'READS: tuple[Version, ...] = (Version(1, 0), Version(1, 1), Version(2, 0))'),
    ("V2", V, "1.0 no longer read",
     'READS: tuple[Version, ...] = (Version(1, 0), Version(1, 1))', 'READS: tuple[Version, ...] = (Version(1, 1),)'),
    ("V3", V, "the patch taken for the minor (1.0.3 read as 1.3)",
     'v = Version(int(m.group(1)), int(m.group(2) or 0))', 'v = Version(int(m.group(1)), int(m.group(3) or m.group(2) or 0))'),
    ("V4", V, "a leading zero accepted (01.1)",
     '_RE = re.compile(r"^(0|[1-9][0-9]{0,5})', '_RE = re.compile(r"^([0-9]{1,6})'),
    ("V5", V, "trailing text accepted (1.1x: the $ dropped)",
     '(?:\\.(0|[1-9][0-9]{0,5}))?)?$")', '(?:\\.(0|[1-9][0-9]{0,5}))?)?")'),
    ("V6", V, "negotiate picks the oldest common version (max to min)",
     '    return max(common)', '    return min(common)'),
    ("V7", V, "negotiate offers a version only one side knows (& to |)",
     'common = set(sender) & set(consumer)', 'common = set(sender) | set(consumer)'),
    ("V8", V, "a minor's fields only after that minor (<= to <: 1.1 without partial)",
     'if v.major == version.major and v <= version:', 'if v.major == version.major and v < version:'),
    ("V9", V, "a minor's fields in every major (the major check dropped)",
     'if v.major == version.major and v <= version:', 'if v <= version:'),
    ("V10", V, "a lenient 1.1 reader drops what 1.1 added (> to >=)",
     'if v > version and f in env.payload]', 'if v >= version and f in env.payload]'),
    ("V11", V, "a JSON true read as an int count",
     '        return type(value) is int  # a JSON true is no count', '        return isinstance(value, int)'),
    ("V12", V, "a field the run declares (allowed) refused",
     'if k not in fields and k not in allowed)', 'if k not in fields)'),
    ("V13", V, "a newer minor inside a read major accepted (1.2: the newer check off by one)",
     '    if v > newest:', '    if v > Version(newest.major, newest.minor + 1):'),
    ("V14", V, "a major below every one read given the newer-minor wording (not in to >)",
     '    if v.major not in majors:', '    if v.major > max(majors):'),
    ("V15", V, "the newest read minor named as the oldest (max to min)",
     'newest = max(r for r in reads if r.major == v.major)', 'newest = min(r for r in reads if r.major == v.major)'),
    ("V16", V, "a minor's fields added to a major's .0 (v <= version to v.minor <= version.minor + 1)",
     'if v.major == version.major and v <= version:', 'if v.major == version.major and v.minor <= version.minor + 1:'),
]


#: the two found equivalent (docs/performance.md, "Gathers and versions")
EQUIVALENT = {
    "G14": "the opening round is fixed the first round any member's request is accepted, so every accepted request "
           "then is of that one round: min and max agree",
    "G17": "a gather is reduced at the first round past its deadline, before that round's deliveries: no result "
           "after the deadline is in the store yet, the filter removes nothing",
}


def main(argv: list[str]) -> int:
    bugs = [Bug(*b, equivalent=EQUIVALENT.get(b[0], "")) for b in BUGS]
    return planting.main(argv, bugs, TESTS)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
