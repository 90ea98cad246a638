"""Exercise 6's judges (sim/course/judges/trace.py): the student's trace.json is data, so whatever it
holds (broken JSON, wrong types, another story, a valid trace without acknowledgements) every judge
answers with a score and a sentence, never a traceback; and each judge says which part of its rule
is wrong."""

import copy
import json
import random
from pathlib import Path

import pytest

from sim.course.judges import trace as J
from sim.protocol.mutate import MUTATIONS
from sim.protocol.trace import validate

ROOT = Path(__file__).resolve().parent.parent
SOLUTION = ROOT / "solutions" / "06-conversation-trace" / "trace.json"
EXAMPLE = ROOT / "data" / "traces" / "valid-trace.json"
JUDGES = (J.snapshot, J.closed_envelopes, J.epochs, J.sequence, J.audiences, J.gather_membership, J.gather_result,
          J.terminal_fence, J.acknowledgements, J.causal_chain)
#: every mutation of the suite, under the rule it breaks (as the grader runs them)
ALL = {r: {"mutations": [m for m, rr in J.MUTATION_RULE.items() if rr == r]} for r in J.RULES}


def _args(judge) -> dict:
    return ALL[{v.__name__: k for k, v in zip(J.RULES, JUDGES)}[judge.__name__]]


def _solution() -> dict:
    return json.loads(SOLUTION.read_text())


def _folder(tmp_path: Path, content, name: str = "sub") -> Path:
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    f = d / "trace.json"
    if isinstance(content, bytes):
        f.write_bytes(content)
    elif isinstance(content, str):
        f.write_text(content, encoding="utf-8")
    else:
        f.write_text(json.dumps(content), encoding="utf-8")
    return d


def _verdicts(d: Path) -> dict:
    return {r: j(d, ALL[r]) for r, j in zip(J.RULES, JUDGES)}


def test_the_rules_name_every_mutation_of_the_suite_once_and_every_code():
    assert set(J.MUTATION_RULE) == {m.name for m in MUTATIONS}
    assert set(J.MUTATION_RULE.values()) == set(J.RULES)
    from sim.protocol.trace import CODES

    assert set(J.CODE_RULE) == set(CODES)
    assert set(J._NEEDS) <= {m.name for m in MUTATIONS}


def test_the_model_answer_passes_every_judge(tmp_path):
    d = _folder(tmp_path, _solution())
    for r, v in _verdicts(d).items():
        assert v.score == 1.0, (r, v.message)


@pytest.mark.parametrize("content, says", [
    ('{"schema": "conversation-trace-v2",', "not valid JSON"),
    (b"\xff\xfe{}", "not UTF-8"),
    ('{"epoch": NaN}', "NaN, which is not JSON"),
    ('{"schema": "conversation-trace-v2", "schema": "x"}', "repeats the key 'schema'"),  # as trace validate: E_DUPLICATE_KEY
    ("[" * 100000 + "]" * 100000, "cannot be read as JSON"),
    ("[1, 2]", "an array"),
    ('"trace"', "a string"),
    ("null", "null"),
    ("{}", ""),
    ('{"participants": "author", "messages": {"id": "m1"}, "gathers": 3, "terminal": []}', ""),
    ('{"messages": [{"id": ["m1"], "causedBy": "m0", "recipients": null, "sender": {}}], "gathers": [{"membership": 5}]}', ""),
])
def test_a_malformed_file_gets_a_failing_judgement_with_a_reason(tmp_path, content, says):
    d = _folder(tmp_path, content)
    for judge in JUDGES:
        r = judge(d, _args(judge))
        assert r.score < 1.0 and r.message, judge.__name__
        assert says in r.message, (judge.__name__, r.message)


def test_a_missing_file_or_a_folder_in_its_place_is_named(tmp_path):
    d = tmp_path / "sub"
    d.mkdir()
    assert "missing" in J.snapshot(d, {}).message
    (d / "trace.json").mkdir()
    r = J.gather_result(d, {})
    assert r.score == 0 and "cannot be read" in r.message


def test_a_byte_order_mark_is_tolerated(tmp_path):
    d = _folder(tmp_path, b"\xef\xbb\xbf" + SOLUTION.read_bytes())
    assert all(v.score == 1.0 for v in _verdicts(d).values())


def test_a_finding_fails_the_rule_it_belongs_to_and_names_its_code_and_message(tmp_path):
    t = _solution()
    t["messages"][5]["seq"] = 3
    v = _verdicts(_folder(tmp_path, t))
    assert v["sequence"].score == 0 and "E_SEQUENCE_GAP at m6" in v["sequence"].message
    assert v["sequence"].reproduce.startswith("protolab trace validate")
    assert [r for r, x in v.items() if x.score < 1] == ["sequence"]  # the rejected ACK costs no other rule


def test_the_shipped_example_is_another_story(tmp_path):
    d = _folder(tmp_path, json.loads(EXAMPLE.read_text()))
    assert validate(json.loads(EXAMPLE.read_text())).valid
    r = J.snapshot(d, ALL["snapshot"])
    assert r.score == 0 and "manager" in r.message and "author" in r.message


def test_each_rule_names_the_part_that_is_wrong(tmp_path):
    t = _solution()
    t["messages"][6]["causedBy"] = ["m4"]  # reviewer-b's ACK cites the decision
    r = J.acknowledgements(_folder(tmp_path, t, "a"), ALL["acknowledgements"])
    assert r.score == 0 and "E_ACK_NOT_FENCE at m7" in r.message and "reviewer-b's acknowledgement" in r.message
    t = _solution()
    t["gathers"][0]["rule"] = "QUORUM"
    t["gathers"][0]["threshold"] = 2
    r = J.gather_membership(_folder(tmp_path, t, "b"), ALL["gather-membership"])
    assert "rule is 'QUORUM'" in r.message
    t = _solution()
    t["messages"][0]["payload"] = {"ask": "please review"}
    t["messages"][0]["payloadDigest"] = __import__("sim.digest", fromlist=["x"]).digest(t["messages"][0]["payload"],
                                                                                        scheme="jcs-v2")
    r = J.gather_membership(_folder(tmp_path, t, "c"), ALL["gather-membership"])
    assert "D-1" in r.message and r.score == 0
    t = _solution()
    for m in t["messages"][5:]:
        m["recipients"] = ["reviewer-a", "reviewer-b"]
    r = J.acknowledgements(_folder(tmp_path, t, "d"), ALL["acknowledgements"])
    assert r.score == 0 and "a receipt goes back to whoever sent the fence, author" in r.message


def test_a_valid_trace_without_acknowledgements_is_told_what_the_mutations_need(tmp_path):
    t = _solution()
    t["messages"] = [m for m in t["messages"] if m["kind"] != "ACK"]
    t["terminal"]["requiredAcks"] = []
    assert validate(t).valid and validate(t).terminal == "COMPLETED"
    r = J.sequence(_folder(tmp_path, t), ALL["sequence"])
    assert r.score == 0 and "it needs an ACK after the fence, which your trace lacks" in r.message
    # protolab trace mutate needs the ACK too, and a diagram shows no ACK missing: the case is judged again alone
    assert r.reproduce.startswith("protolab exercise try 6 {dir} -c ") and "'mutations': ['duplicate-message']" in r.reproduce
    assert r.signature["symptoms"] == ["mutation-lacks-structure"]


def test_a_valid_open_conversation_is_judged_without_a_traceback(tmp_path):
    t = _solution()
    del t["terminal"]
    t["messages"] = t["messages"][:4]
    d = _folder(tmp_path, t)
    r = J.terminal_fence(d, ALL["terminal-fence"])
    assert r.score == 0 and "still open" in r.message
    assert J.gather_membership(d, ALL["gather-membership"]).score == 1.0


def test_a_blocked_trace_does_not_earn_the_mutation_that_must_block_it(tmp_path):
    t = _solution()
    t["terminal"]["state"] = "BLOCKED"  # declared BLOCKED: dropping an ack cannot turn COMPLETED into BLOCKED
    r = J.acknowledgements(_folder(tmp_path, t), ALL["acknowledgements"])
    assert r.score == 0 and "drop-required-ack" in r.message and "declares COMPLETED" in r.message


def test_the_causal_chain_follows_causedBy_not_times(tmp_path):
    t = _solution()
    t["messages"][2]["at"] = "2026-09-01T08:00:00Z"  # a reviewer's clock behind the author's: not judged
    assert J.causal_chain(_folder(tmp_path, t, "a"), ALL[J.CAUSAL]).score == 1.0
    t = _solution()
    t["messages"][3]["causedBy"] = ["m2"]  # the decision forgets reviewer-b's verdict
    r = J.causal_chain(_folder(tmp_path, t, "b"), ALL[J.CAUSAL])
    assert r.score == 0 and "reviewer-b's contribution m3" in r.message


def test_random_damage_never_raises(tmp_path):
    rng = random.Random(6)
    values = [None, True, 0, -1, 1.5, "", "m1", "author", [], ["m1", "m1"], {}, {"a": 1}, [None], [[]]]
    d = tmp_path / "sub"
    d.mkdir()

    def paths(v, p=()):
        yield p
        if isinstance(v, dict):
            for k, x in v.items():
                yield from paths(x, p + (k,))
        elif isinstance(v, list):
            for i, x in enumerate(v):
                yield from paths(x, p + (i,))

    for _ in range(60):
        t = _solution()
        for _ in range(rng.randint(1, 3)):
            p = rng.choice([q for q in paths(t) if q])
            cur = t
            for k in p[:-1]:
                cur = cur[k]
            if rng.random() < 0.3:
                del cur[p[-1]]
            else:
                cur[p[-1]] = copy.deepcopy(rng.choice(values))
        (d / "trace.json").write_text(json.dumps(t))
        for judge in JUDGES:
            r = judge(d, _args(judge))
            assert 0.0 <= r.score <= 1.0 and r.message
        assert isinstance(J.behaviour(d), dict)


def test_a_huge_value_is_cut_short_in_the_message(tmp_path):
    t = _solution()
    t["gathers"][0]["opener"] = "x" * 100000
    t["terminal"]["fence"] = "y" * 100000
    t["terminal"]["requiredAcks"] = ["z" * 100000]
    d = _folder(tmp_path, t)
    for judge in JUDGES:
        r = judge(d, _args(judge))
        assert len(r.message) < 2000, (judge.__name__, len(r.message))
    assert J.gather_membership(d, ALL["gather-membership"]).score == 0
    assert J.terminal_fence(d, ALL["terminal-fence"]).score == 0
