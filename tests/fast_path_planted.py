"""Bugs planted by hand in sim/protocol/fast.py, one at a time, against the fast path's property test
(tests/test_trace_fast_property.py; issue 48, part 2). Not a test: a measure, as tests/mutmut_undecorate.py
is a tool. Each bug is one small change (an off-by-one, < for <=, a dropped condition), planted by
tests/planting.py's loop (written to the file, restored and checked byte for byte after), compiled into the
loaded module, the property run against it in this process, the original compiled back.

    .venv/bin/python tests/fast_path_planted.py               # the quick loop's examples
    .venv/bin/python tests/fast_path_planted.py --many        # the slow set's
    .venv/bin/python tests/fast_path_planted.py --lenient-only   # only "the fast report is the careful one",
                                                             # without "the fast path takes every valid trace"
    .venv/bin/python tests/fast_path_planted.py 1 5 --many    # some of them (numbers, or ids F1 F5)

One table row per bug (caught or not, and the first failure), then a JSON summary. Results: docs/performance.md.
"""

import json
import os
import sys
from pathlib import Path

os.environ["PROTOLAB_PROPERTY_NO_SHRINK"] = "1"  # whether it fails, not the smallest trace that makes it
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# (name, old, new): each old text occurs once in sim/protocol/fast.py
BUGS = [
 ('gen-last: a body in force until before the message it was replaced after (i < last)',
  '                if i <= last:',
  '                if i < last:'),
 ('gen-below: a generation below the one in force accepted (!= to >)',
  '            if gen != in_force:',
  '            if gen > in_force:'),
 ('gen-plain: a sender with no earlier body, its generation unchecked',
  '            if m.generation != st[0] or m.seq != st[1]:',
  '            if m.seq != st[1]:'),
 ("seq-skip: a plain sender's seq may run ahead (!= to <)",
  '            if m.generation != st[0] or m.seq != st[1]:',
  '            if m.generation != st[0] or m.seq < st[1]:'),
 ("seq-start: a replaced sender's body numbered from 0 (off by one)",
  '            want = next_seq.get(body, 1)',
  '            want = next_seq.get(body, 0)'),
 ("seq-repeat: a replaced sender's seq may repeat (!= to >)",
  '            if m.seq != want:',
  '            if m.seq > want:'),
 ("epoch-above: only an epoch below the conversation's refused",
  '    if n and set(map(attrgetter("epoch"), msgs)) != {j.conv_epoch}:',
  '    if n and min(map(attrgetter("epoch"), msgs)) < j.conv_epoch:'),
 ("epoch-first: the first message's epoch unchecked (off by one)",
  '    if n and set(map(attrgetter("epoch"), msgs)) != {j.conv_epoch}:',
  '    if n > 1 and set(map(attrgetter("epoch"), msgs[1:])) != {j.conv_epoch}:'),
 ('ceiling: one message over the ceiling accepted (off by one)',
  '    if n > j.last_ok or len(scan.fences) > 1 or (',
  '    if n > j.last_ok + 1 or len(scan.fences) > 1 or ('),
 ('fence-next: the message right after the fence unchecked (off by one)',
  '            fence_at is not None and kinds[fence_at + 1:].count("ACK") != n - fence_at - 1):',
  '            fence_at is not None and kinds[fence_at + 2:].count("ACK") != n - fence_at - 2):'),
 ('fence-second: a second FENCE accepted (> 1 to > 2)',
  '    if n > j.last_ok or len(scan.fences) > 1 or (',
  '    if n > j.last_ok or len(scan.fences) > 2 or ('),
 ('ack-cite: an ACK after the fence need not cite it (dropped)',
  '            if (required_set is not None and sender not in required_set) or fence_id not in caused or sender in acked:',
  '            if (required_set is not None and sender not in required_set) or sender in acked:'),
 ('ack-twice: a second ACK from one participant (dropped)',
  '            if (required_set is not None and sender not in required_set) or fence_id not in caused or sender in acked:',
  '            if (required_set is not None and sender not in required_set) or fence_id not in caused:'),
 ('ack-outsider: an ACK from outside the required set (dropped)',
  '            if (required_set is not None and sender not in required_set) or fence_id not in caused or sender in acked:',
  '            if fence_id not in caused or sender in acked:'),
 ('deadline-dropped: a message after the deadline (dropped)',
  '        if not _times(ats) or max(ats) > deadline or not _digests(',
  '        if not _times(ats) or not _digests('),
 ('deadline-at: a message at the deadline refused (> to >=, stricter)',
  '        if not _times(ats) or max(ats) > deadline or not _digests(',
  '        if not _times(ats) or max(ats) >= deadline or not _digests('),
 ('expiry-dropped: a message after its expiry (dropped)',
  '            if not _t._is_time(exp) or m.at > exp:',
  '            if not _t._is_time(exp):'),
 ('expiry-at: a message at its expiry refused (> to >=, stricter)',
  '            if not _t._is_time(exp) or m.at > exp:',
  '            if not _t._is_time(exp) or m.at >= exp:'),
 ('gather-deadline: a contribution after the gather deadline (dropped)',
  '                        or (gth.deadline is not None and m.at > gth.deadline)):',
  '                        ):'),
 ("gather-deadline-at: a contribution at the gather's deadline refused (> to >=, stricter)",
  '                        or (gth.deadline is not None and m.at > gth.deadline)):',
  '                        or (gth.deadline is not None and m.at >= gth.deadline)):'),
 ('gather-member: a contribution from a non-member (dropped)',
  '                        or (gth.members is not None and m.sender not in gth.members) or m.sender in gth.contributed',
  '                        or m.sender in gth.contributed'),
 ('gather-twice: a second contribution from one member (dropped)',
  '                        or (gth.members is not None and m.sender not in gth.members) or m.sender in gth.contributed',
  '                        or (gth.members is not None and m.sender not in gth.members)'),
 ('gather-late-reply: a contribution after the result (dropped)',
  '                if ((gth.opener_known and first_at[gth.opener] >= i) or gth.closed_by is not None',
  '                if ((gth.opener_known and first_at[gth.opener] >= i)'),
 ('gather-opener: a contribution that is its own opener (>= to >)',
  '                if ((gth.opener_known and first_at[gth.opener] >= i) or gth.closed_by is not None',
  '                if ((gth.opener_known and first_at[gth.opener] > i) or gth.closed_by is not None'),
 ('gather-second-result: a second GATHER_RESULT (dropped)',
  '                if gth.closed_by is not None:\n                    raise _Unusual\n                gth.closed_by = m.id',
  '                gth.closed_by = m.id'),
 ("audience-first: only the first recipient's audiences checked (off by one)",
  '        for r in recips:\n            if not audiences[r].issuperset(labels):',
  '        for r in recips[:1]:\n            if not audiences[r].issuperset(labels):'),
 ('audience-label-twice: a label named twice (> 1 to > 2)',
  '        if len(labels) > 1 and len(set(labels)) != len(labels):',
  '        if len(labels) > 2 and len(set(labels)) != len(labels):'),
 ('audience-recipient-twice: a recipient named twice (> 1 to > 2)',
  '        if len(recips) > 1 and len(set(recips)) != len(recips):',
  '        if len(recips) > 2 and len(set(recips)) != len(recips):'),
 ('scope: another scope (dropped)',
  '        if m.scope != scope:\n            raise _Unusual',
  '        if not m.scope:\n            raise _Unusual'),
 ('cause-first: the first cause unchecked (off by one)',
  '            for parent in caused:',
  '            for parent in caused[1:]:'),
 ('cause-twice: a cause named twice (> 1 to > 2)',
  '            if len(caused) > 1 and len(set(caused)) != len(caused):',
  '            if len(caused) > 2 and len(set(caused)) != len(caused):'),
 ('id-twice: one repeated id allowed (off by one)',
  '    if len(earlier) != len(msgs):',
  '    if len(earlier) < len(msgs) - 1:'),
 ('payload-digest: payloads never hashed (condition inverted)',
  '            if check_digests:\n                try:',
  '            if not check_digests:\n                try:'),
 ('result-without-gather: the fix of this issue undone (the check dropped)',
  '        if msgs[i].gatherId is UNSET:',
  '        if msgs[i].gatherId is UNSET and not n:'),
]


def main(argv: list[str]) -> int:
    import warnings

    warnings.simplefilter("ignore")
    import conftest  # noqa: F401  (the suite's Hypothesis profile)
    import planting
    import sim.protocol.fast as fast
    import test_trace_fast_property as prop
    from sim.protocol import validate

    path = Path(fast.__file__)
    src = path.read_text()
    if "--many" in argv:
        prop.QUICK = prop.MANY
    if "--lenient-only" in argv:
        def lenient_only(trace):
            for raw in (json.dumps(trace, indent=2, ensure_ascii=False).encode(),
                        json.dumps(trace, separators=(",", ":")).encode()):
                quick = fast.validate_bytes(raw)
                if quick is not None:
                    careful = validate(json.loads(raw))
                    assert quick.to_dict() == careful.to_dict(), (quick.reason, careful.reason)
                    assert quick == careful
        prop.fast_agrees_with_careful = lenient_only

    def run(bug) -> tuple[bool, str]:
        # the planted file compiled into the loaded module, the property run in this process, the original back
        exec(compile(path.read_text(), fast.__file__, "exec"), fast.__dict__)
        try:
            prop.test_the_fast_path_gives_the_careful_report_at_every_boundary()
        except Exception as e:  # the property failed (or the fast path raised): caught
            return True, f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
        finally:
            exec(compile(src, fast.__file__, "exec"), fast.__dict__)
        return False, "the property held"

    bugs = [planting.Bug(f"F{k}", str(path.relative_to(planting.ROOT)), name, old, new)
            for k, (name, old, new) in enumerate(BUGS, 1)]
    return planting.main([a for a in argv if not a.startswith("--")], bugs, run=run)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
