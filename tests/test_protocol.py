"""conversation-trace-v2: the validator, its gathers, the mutation suite and the diagram."""

from __future__ import annotations

import ast
import copy
import json
import random
import re
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from sim.digest import digest
from sim.errors import InputError
from sim.protocol import (
    CODES,
    KINDS,
    MUTATIONS,
    TERMINALS,
    check_shape,
    evaluate_gather,
    load_schema,
    mermaid,
    run_mutations,
    synthetic_trace,
    validate,
)
from sim.protocol import trace as trace_mod
from sim.resources import shipped

TRACES = shipped("data", "traces")
INVALID = TRACES / "invalid"
PROTOCOL_SRC = Path(trace_mod.__file__).resolve().parent

# fixture name -> (its one code, the message id concerned, the JSON pointer of the first finding)
FIXTURES = {
    "schema": ("E_SCHEMA", None, "/terminal/truthEffect"),
    "unknown-kind": ("E_UNKNOWN_KIND", "m10", "/messages/9/kind"),
    "bad-verification-ref": ("E_BAD_VERIFICATION_REF", "m10", "/messages/9/verificationRef"),
    "duplicate-message": ("E_DUPLICATE_MESSAGE", "m10", "/messages/10/id"),
    "sequence-gap": ("E_SEQUENCE_GAP", "m10", "/messages/9/seq"),
    "stale-epoch": ("E_STALE_EPOCH", "m10", "/messages/9/epoch"),
    "stale-generation": ("E_STALE_GENERATION", "m10", "/messages/9/generation"),
    "causation-gap": ("E_CAUSATION_GAP", "m10", "/messages/9/causedBy/1"),
    "message-ceiling": ("E_MESSAGE_CEILING", "m10", "/messages/9"),
    "deadline": ("E_DEADLINE", "m10", "/messages/9/at"),
    "expired-message": ("E_EXPIRED_MESSAGE", "m10", "/messages/9/expiresAt"),
    "payload-digest": ("E_PAYLOAD_DIGEST", "m10", "/messages/9/payloadDigest"),
    "audience-scope": ("E_AUDIENCE_SCOPE", "m10", "/messages/9/recipients/1"),
    "audience-label": ("E_AUDIENCE_LABEL", "m10", "/messages/9/recipients/0"),
    "duplicate-participant": ("E_DUPLICATE_PARTICIPANT", None, "/participants/4/ref"),
    "unknown-gather": ("E_UNKNOWN_GATHER", "m3", "/messages/2/gatherId"),
    "duplicate-gather": ("E_DUPLICATE_GATHER", None, "/gathers/1/id"),
    "gather-membership": ("E_GATHER_MEMBERSHIP", "m3", "/messages/2/sender"),
    "gather-opener": ("E_GATHER_OPENER", None, "/gathers/0/opener"),
    "gather-not-open": ("E_GATHER_NOT_OPEN", "m2", "/messages/1/gatherId"),
    "gather-closed": ("E_GATHER_CLOSED", "m4-again", "/messages/4/gatherId"),
    "duplicate-contribution": ("E_DUPLICATE_CONTRIBUTION", "m2-again", "/messages/2/sender"),
    "late-gather-contribution": ("E_LATE_GATHER_CONTRIBUTION", "m3", "/messages/2/at"),
    "quorum-threshold": ("E_QUORUM_THRESHOLD", None, "/gathers/0"),
    "first-success-tie-break": ("E_FIRST_SUCCESS_TIE_BREAK", None, "/gathers/0"),
    "gather-result-mismatch": ("E_GATHER_RESULT_MISMATCH", None, "/gathers/0/result"),
    "terminal-fence": ("E_TERMINAL_FENCE", None, "/terminal/fence"),
    "second-fence": ("E_SECOND_FENCE", "m7-again", "/messages/10/kind"),
    "post-terminal-message": ("E_POST_TERMINAL_MESSAGE", "m10-late", "/messages/10"),
    "ack-not-fence": ("E_ACK_NOT_FENCE", "m10", "/messages/9/causedBy"),
}


def load(name: str) -> dict:
    return json.loads((TRACES / name).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def valid() -> dict:
    return load("valid-trace.json")


@pytest.fixture(scope="module")
def schema_validator() -> Draft202012Validator:
    return Draft202012Validator(load_schema())


def pointer(err) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in err.absolute_path)


def assert_shape_agrees(v: Draft202012Validator, doc) -> None:
    theirs = {pointer(e) for e in v.iter_errors(doc)}
    mine = check_shape(doc)
    assert all(f.code in trace_mod.SHAPE_CODES for f in mine)
    assert {f.pointer for f in mine} == theirs
    assert (not mine) == (not theirs)


def msg(trace: dict, mid: str) -> dict:
    return next(m for m in trace["messages"] if m["id"] == mid)


# ---------------------------------------------------------------- the shipped traces


def test_the_valid_trace_validates_completed_with_every_acknowledgement(valid):
    report = validate(valid)
    assert report.valid and report.errors == ()
    assert report.terminal == "COMPLETED"
    assert report.reason == "valid: COMPLETED, fence m7 acknowledged by researcher-1, researcher-2, writer"
    assert report.accepted == tuple(f"m{i}" for i in range(1, 11))
    g1 = report.gathers["g1"]
    assert g1.status == "complete" and g1.missing == () and g1.contributors == ("researcher-1", "researcher-2")


def test_the_valid_trace_is_the_fan_out_the_course_describes(valid):
    kinds = [m["kind"] for m in valid["messages"]]
    assert kinds == ["REQUEST", "CONTRIBUTION", "CONTRIBUTION", "GATHER_RESULT", "HANDOFF", "RESPONSE", "FENCE",
                     "ACK", "ACK", "ACK"]
    assert [p["ref"] for p in valid["participants"]] == ["manager", "researcher-1", "researcher-2", "writer"]
    assert all(p["generation"] == 1 for p in valid["participants"])
    assert valid["gathers"][0]["rule"] == "ALL"
    assert valid["terminal"]["requiredAcks"] == ["researcher-1", "researcher-2", "writer"]


def test_payload_digests_in_the_shipped_traces_are_real_jcs_v2_digests(valid):
    for t in (valid, load("quorum-trace.json")):
        for m in t["messages"]:
            assert m["payloadDigest"] == digest(m["payload"], "jcs-v2")


def test_the_quorum_trace_keeps_the_dissenting_vote_in_its_result():
    report = validate(load("quorum-trace.json"))
    assert report.valid, report.errors
    assert report.terminal == "DISSENT_RECORDED"
    q1 = report.gathers["q1"]
    assert (q1.status, q1.value) == ("complete", "accept")
    assert q1.dissent == ({"message": "m3", "sender": "reviewer-2", "value": "reject"},)
    assert load("quorum-trace.json")["gathers"][0]["result"]["dissent"] == [dict(d) for d in q1.dissent]


# ---------------------------------------------------------------- invalid fixtures


def test_there_is_one_invalid_fixture_per_code_and_no_other():
    on_disk = {p.stem for p in INVALID.glob("*.json")}
    assert on_disk == set(FIXTURES)
    assert {code for code, _, _ in FIXTURES.values()} == set(CODES)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_each_invalid_fixture_gives_exactly_its_code_with_the_message_id_and_pointer(name):
    code, message_id, ptr = FIXTURES[name]
    report = validate(json.loads((INVALID / f"{name}.json").read_text(encoding="utf-8")))
    assert not report.valid
    assert report.codes == (code,), [(f.code, f.pointer, f.message) for f in report.errors]
    first = report.errors[0]
    assert (first.message_id, first.pointer) == (message_id, ptr)
    assert report.reason.startswith("invalid: ") and code in report.reason
    with pytest.raises(InputError) as caught:
        report.raise_if_invalid()
    assert caught.value.code == code


# ---------------------------------------------------------------- mutations


def test_the_mutation_suite_covers_every_named_rule():
    names = {m.name for m in MUTATIONS}
    assert len(MUTATIONS) >= 16
    assert {
        "duplicate-message", "skip-sequence-number", "swap-messages-of-one-sender", "stale-epoch", "stale-generation",
        "unknown-recipient", "wrong-scope", "missing-audience-label", "unknown-causation-parent",
        "message-after-fence", "unknown-kind", "expired-message", "late-gather-contribution",
        "contribution-from-non-member", "membership-changed", "quorum-without-threshold", "second-fence",
        "message-ceiling-exceeded", "empty-verification-ref", "drop-required-ack", "truth-effect-not-none",
    } <= names
    assert {m.expected_code for m in MUTATIONS} - {None} == set(CODES)  # every code has a mutation
    drop = next(m for m in MUTATIONS if m.name == "drop-required-ack")
    assert (drop.expected_code, drop.expected_terminal) == (None, "BLOCKED")


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_every_mutation_produces_its_code(valid, mutation):
    before = copy.deepcopy(valid)
    changed = mutation.apply(valid)
    assert valid == before, "a mutation must not touch its input"
    assert changed != valid
    report = validate(changed)
    if mutation.expected_code is None:
        assert report.valid, report.errors
        assert report.terminal == mutation.expected_terminal
    else:
        assert mutation.expected_code in report.codes, report.codes


def test_run_mutations_reports_every_mutation_ok(valid):
    rows = run_mutations(valid)
    assert [r["name"] for r in rows] == [m.name for m in MUTATIONS]
    assert all(r["ok"] for r in rows), [r for r in rows if not r["ok"]]
    assert sum(r["exact"] for r in rows) >= len(rows) - 4  # a few faults honestly cascade (a swap, say)


# ---------------------------------------------------------------- all errors, not only the first


def test_all_errors_are_reported_a_trace_with_three_faults_gives_three_codes(valid):
    t = copy.deepcopy(valid)
    msg(t, "m10")["seq"] = 3  # writer skips a sequence number
    msg(t, "m9")["scope"] = "trace:elsewhere"  # researcher-2 acknowledges from another scope
    t["terminal"]["authorityEffect"] = "GRANTED"  # the terminal claims authority
    report = validate(t)
    assert sorted(report.codes) == ["E_AUDIENCE_SCOPE", "E_SCHEMA", "E_SEQUENCE_GAP"]
    assert {f.pointer for f in report.errors} == {"/messages/9/seq", "/messages/8/scope", "/terminal/authorityEffect"}
    assert "m9" not in report.accepted and "m10" not in report.accepted


def test_every_shape_violation_is_reported_with_its_own_pointer(valid):
    t = copy.deepcopy(valid)
    m = msg(t, "m5")
    m["seq"] = "3"
    m["at"] = "yesterday"
    del m["recipients"]
    m["priority"] = 1
    pointers = [f.pointer for f in validate(t).errors if f.code == "E_SCHEMA"]
    assert pointers.count("/messages/4") == 2  # the missing field and the unknown one
    assert {"/messages/4/seq", "/messages/4/at"} <= set(pointers)


# ---------------------------------------------------------------- shape vs JSON Schema


def test_the_schema_is_a_closed_draft_2020_12_schema_with_every_field_described():
    schema = load_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"

    def walk(node, where):
        if isinstance(node, dict):
            if "properties" in node and node.get("type") == "object":
                assert node.get("additionalProperties") is False, where
                for name, sub in node["properties"].items():
                    assert sub.get("description"), f"{where}/{name} has no description"
            for k, v in node.items():
                walk(v, f"{where}/{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}/{i}")

    walk(schema, "#")
    defs = schema["$defs"]
    assert defs["message"]["properties"]["kind"]["enum"] == list(KINDS)
    assert defs["terminal"]["properties"]["state"]["enum"] == list(TERMINALS)
    assert defs["gather"]["properties"]["rule"]["enum"] == list(trace_mod.RULES)
    assert defs["time"]["pattern"] == trace_mod.TIME_PATTERN and defs["time"]["maxLength"] == trace_mod.TIME_LENGTH
    assert defs["digest"]["pattern"] == trace_mod.DIGEST_PATTERN
    assert defs["message"]["properties"]["verificationRef"]["pattern"] == trace_mod.VERIFICATION_REF_PATTERN
    assert schema["properties"]["protocol"]["pattern"] == trace_mod.PROTOCOL_PATTERN


def _shape_cases():
    valid = load("valid-trace.json")
    yield "valid-trace", valid
    yield "quorum-trace", load("quorum-trace.json")
    for p in sorted(INVALID.glob("*.json")):
        yield f"fixture:{p.stem}", json.loads(p.read_text(encoding="utf-8"))
    for m in MUTATIONS:
        yield f"mutation:{m.name}", m.apply(valid)


@pytest.mark.parametrize("name,doc", list(_shape_cases()), ids=[n for n, _ in _shape_cases()])
def test_the_hand_written_shape_check_agrees_with_jsonschema(schema_validator, name, doc):
    assert_shape_agrees(schema_validator, doc)


_ODD_VALUES = [None, True, False, 0, 1, -1, 1.0, 2.5, "", "x", "VOTE", "QUORUM", "FIRST_SUCCESS", "NONE",
               "2026-07-13T04:00:00Z", "2026-13-01T04:00:00Z", "2026-07-13T04:00:00Z\n", "sha256:" + "a" * 64,
               "sha256:" + "A" * 64, "receipt:x", "receipt: x", [], ["a"], ["a", "a"], [1, 1.0], [True, 1], {},
               {"a": 1}, "lowest-sender"]
_EXTRA_KEYS = ["threshold", "tieBreak", "gatherId", "expiresAt", "verificationRef", "payload", "result", "terminal",
               "stateDigest", "surprise"]


def _corrupt(doc, rng):
    def places(v, p=()):
        yield p
        if isinstance(v, dict):
            for k, x in v.items():
                yield from places(x, p + (k,))
        elif isinstance(v, list):
            for i, x in enumerate(v):
                yield from places(x, p + (i,))

    for _ in range(rng.randint(1, 3)):
        p = rng.choice(list(places(doc))[1:])
        parent = doc
        for k in p[:-1]:
            parent = parent[k]
        roll = rng.random()
        if roll < 0.55:
            parent[p[-1]] = copy.deepcopy(rng.choice(_ODD_VALUES))
        elif roll < 0.75:
            del parent[p[-1]]
        elif isinstance(parent[p[-1]], dict):
            parent[p[-1]][rng.choice(_EXTRA_KEYS)] = copy.deepcopy(rng.choice(_ODD_VALUES))
        elif isinstance(parent[p[-1]], list):
            parent[p[-1]].append(copy.deepcopy(rng.choice(_ODD_VALUES)))
    return doc


def test_the_shape_check_agrees_with_jsonschema_on_random_corruptions(valid, schema_validator):
    rng = random.Random(20260713)
    for _ in range(150):
        doc = _corrupt(copy.deepcopy(valid), rng)
        assert_shape_agrees(schema_validator, doc)
        report = validate(doc)  # and the validator neither raises nor disagrees with itself
        assert report.valid == (not report.errors)
        mermaid(doc, report)


def test_the_validator_never_raises_on_values_that_are_not_traces():
    for doc in (None, [], "trace", 3, {}, {"messages": 5}, {"messages": [None, 1, []], "participants": {}},
                {"gathers": [{"id": ["x"]}], "terminal": []}):
        report = validate(doc)
        assert not report.valid and all(f.code in CODES for f in report.errors)
        assert isinstance(mermaid(doc, report), str)


# ---------------------------------------------------------------- filter before reduce


def test_filter_before_reduce_a_rejected_contribution_is_not_counted_by_the_gather():
    report = validate(json.loads((INVALID / "late-gather-contribution.json").read_text(encoding="utf-8")))
    assert "m3" not in report.accepted
    g1 = report.gathers["g1"]
    assert g1.inputs == ("m2",) and g1.contributors == ("researcher-1",)
    assert (g1.status, g1.missing) == ("partial", ("researcher-2",))
    assert "researcher-2" not in g1.value  # nothing invented for the missing member
    assert report.valid is False and report.terminal is None and report.terminal_if_valid == "BLOCKED"


def test_a_duplicate_contribution_never_reaches_the_reducer():
    report = validate(json.loads((INVALID / "duplicate-contribution.json").read_text(encoding="utf-8")))
    assert "m2-again" not in report.accepted
    assert report.gathers["g1"].inputs == ("m2", "m3")


def test_a_rejected_acknowledgement_does_not_count_toward_the_required_set():
    report = validate(json.loads((INVALID / "stale-generation.json").read_text(encoding="utf-8")))
    assert "m10" not in report.accepted and report.terminal is None and report.terminal_if_valid == "BLOCKED"


# ---------------------------------------------------------------- gathers


def _c(mid, sender, at="2026-07-13T04:05:00Z", **payload):
    return {"id": mid, "sender": sender, "kind": "CONTRIBUTION", "gatherId": "g", "at": at,
            "payloadDigest": digest(payload, "jcs-v2"), "payload": payload}


def _g(rule, members=("a", "b", "c"), **extra):
    return {"id": "g", "membership": list(members), "rule": rule, "deadline": "2026-07-13T04:30:00Z",
            "opener": "m0", **extra}


def test_all_waits_for_one_contribution_from_every_member():
    g = _g("ALL", ("a", "b"))
    done = evaluate_gather(g, [_c("m1", "b", value=2), _c("m2", "a", value=1)])
    assert done.status == "complete" and done.value == {"a": 1, "b": 2} and done.missing == ()
    waiting = evaluate_gather(g, [_c("m1", "a", value=1)])
    assert waiting.status == "partial" and waiting.missing == ("b",) and waiting.value == {"a": 1}


def test_quorum_reaches_its_threshold_and_keeps_every_dissenting_contribution():
    g = _g("QUORUM", ("a", "b", "c", "d", "e"), threshold=3)
    votes = [_c("m1", "a", vote="accept"), _c("m2", "b", vote="reject", why="weak source"),
             _c("m3", "c", vote="accept"), _c("m4", "d", vote="reject"), _c("m5", "e", vote="accept")]
    r = evaluate_gather(g, votes)
    assert (r.status, r.value) == ("complete", "accept")
    assert [d["message"] for d in r.dissent] == ["m2", "m4"]
    assert r.to_json()["dissent"] == [{"message": "m2", "sender": "b", "value": "reject"},
                                      {"message": "m4", "sender": "d", "value": "reject"}]


def test_quorum_short_of_its_threshold_is_an_explicit_partial_and_two_tied_verdicts_block():
    g = _g("QUORUM", ("a", "b", "c"), threshold=2)
    short = evaluate_gather(g, [_c("m1", "a", vote="accept"), _c("m2", "b", vote="reject")])
    assert (short.status, short.value, short.missing) == ("partial", None, ("c",))
    tied = evaluate_gather(_g("QUORUM", ("a", "b"), threshold=1),
                           [_c("m1", "a", vote="accept"), _c("m2", "b", vote="reject")])
    assert tied.status == "blocked" and tied.value is None


def test_first_success_takes_the_first_success_in_the_supplied_order_and_a_backdated_clock_buys_nothing():
    g = _g("FIRST_SUCCESS", tieBreak="supplied-order")
    early_failure = _c("m1", "a", at="2026-07-13T04:01:00Z", success=False, value="broken")
    c_first = _c("m2", "c", at="2026-07-13T04:02:00Z", value="from c")
    b_backdated = _c("m3", "b", at="2026-07-13T03:00:00Z", value="from b")  # claims to be earliest; supplied last
    r = evaluate_gather(g, [early_failure, c_first, b_backdated])
    assert (r.status, r.selected, r.value) == ("complete", "m2", "from c")
    assert "supplied order" in r.reason and "not a verdict" in r.reason
    r = evaluate_gather(g, [b_backdated, c_first])  # supplied first, it is first, whatever its clock says
    assert r.selected == "m3"


def test_first_success_by_lowest_sender_ignores_both_order_and_clocks():
    g = _g("FIRST_SUCCESS", tieBreak="lowest-sender")
    c_first = _c("m2", "c", at="2026-07-13T04:02:00Z", value="from c")
    b_later = _c("m3", "b", at="2026-07-13T04:09:00Z", value="from b")
    for order in ([c_first, b_later], [b_later, c_first]):
        r = evaluate_gather(g, order)
        assert (r.status, r.selected, r.value) == ("complete", "m3", "from b")
        assert "lowest sender" in r.reason


def test_the_shipped_first_success_trace_picks_by_supplied_order_not_by_the_earlier_clock():
    t = load("first-success-trace.json")
    r = validate(t)
    assert r.valid and r.terminal == "COMPLETED"
    res = r.gathers["f1"]
    m3, m4 = msg(t, "m3"), msg(t, "m4")
    assert m4["at"] < m3["at"] and res.selected == "m3"  # m4's clock is earlier; m3 was supplied first
    assert t["gathers"][0]["result"] == res.to_json()


def test_the_seeds_author_and_reviewer_fence_example_is_valid_and_completed():
    t = load("fence-example-trace.json")
    r = validate(t)
    assert (r.valid, r.terminal) == (True, "COMPLETED")
    assert [(m["id"], m["sender"], m["kind"], m["causedBy"]) for m in t["messages"]] == [
        ("m1", "author", "REQUEST", []), ("m2", "reviewer", "CONTRIBUTION", ["m1"]),
        ("m3", "author", "FENCE", ["m2"]), ("m4", "reviewer", "ACK", ["m3"])]
    assert t["terminal"]["fence"] == "m3" and t["terminal"]["requiredAcks"] == ["reviewer"]
    # without the acknowledgement it is a valid BLOCKED, never complete
    t["messages"] = t["messages"][:3]
    assert validate(t).terminal == "BLOCKED"


def test_first_success_without_a_successful_candidate_is_blocked():
    g = _g("FIRST_SUCCESS", tieBreak="lowest-sender")
    r = evaluate_gather(g, [_c("m1", "a", success=False)])
    assert (r.status, r.value, r.selected) == ("blocked", None, None)
    assert r.missing == ("b", "c")


def test_a_gather_deadline_without_enough_input_never_invents_the_missing_input():
    g = _g("ALL", ("a", "b"))
    late = _c("m2", "b", at="2026-07-13T04:31:00Z", value=2)
    outsider = _c("m3", "z", value=9)
    r = evaluate_gather(g, [_c("m1", "a", value=1), late, outsider])
    assert (r.status, r.value, r.missing) == ("partial", {"a": 1}, ("b",))
    assert r.ignored == ("m2", "m3") and r.inputs == ("m1",)


# ---------------------------------------------------------------- terminals


def test_a_missing_required_acknowledgement_is_a_valid_blocked_never_complete(valid):
    t = copy.deepcopy(valid)
    t["messages"] = [m for m in t["messages"] if m["id"] != "m10"]
    report = validate(t)
    assert report.valid and report.terminal == "BLOCKED"
    assert report.reason.startswith("valid: BLOCKED — fence m7 lacks acknowledgements from writer")


def test_a_completed_with_an_unresolved_gather_member_is_blocked(valid):
    t = next(m for m in MUTATIONS if m.name == "unresolved-gather-at-completed").apply(valid)
    report = validate(t)
    assert report.valid and report.terminal == "BLOCKED"
    assert "gather g1 is partial, missing researcher-2" in report.reason


def test_an_open_conversation_has_no_terminal(valid):
    t = copy.deepcopy(valid)
    del t["terminal"]
    t["messages"] = t["messages"][:6]
    report = validate(t)
    assert report.valid and report.terminal is None
    assert report.reason.startswith("valid: open conversation")


def test_a_terminal_never_has_a_truth_or_authority_effect(valid):
    for key in ("truthEffect", "authorityEffect"):
        t = copy.deepcopy(valid)
        t["terminal"][key] = "YES"
        report = validate(t)
        assert report.codes == ("E_SCHEMA",) and report.errors[0].pointer == f"/terminal/{key}"


# ---------------------------------------------------------------- the diagram


def test_the_diagram_has_every_participant_every_message_the_fence_and_the_receipt_note(valid):
    text = mermaid(valid, validate(valid))
    assert text.startswith("sequenceDiagram\n")
    for ref in ("manager", "researcher-1", "researcher-2", "writer"):
        assert re.search(rf"participant P\d+ as {re.escape(ref)}\n", text)
    for m in valid["messages"]:
        assert re.search(rf": {re.escape(m['id'])} {m['kind']}\b", text), m["id"]
    assert "->>" in text and "-->>" in text
    assert "terminal fence: COMPLETED" in text
    assert "acknowledgement is receipt only" in text
    assert text.count("rect ") == text.count("\n  end") == 1


def test_the_diagram_marks_a_rejected_message_with_its_code():
    t = json.loads((INVALID / "sequence-gap.json").read_text(encoding="utf-8"))
    text = mermaid(t, validate(t))
    assert "m10 rejected E_SEQUENCE_GAP" in text
    assert "--xP0: m10 ACK" in text
    assert "terminal fence: BLOCKED had it been valid (the trace is INVALID)" in text


# ---------------------------------------------------------------- the contract around it


def test_every_code_the_validator_can_produce_is_documented():
    used = set()
    for name in ("trace.py",):
        used |= set(re.findall(r'"(E_[A-Z_]+)"', (PROTOCOL_SRC / name).read_text(encoding="utf-8")))
    assert used == set(CODES)
    assert all(meaning and "\n" not in meaning for meaning in CODES.values())


def test_the_validator_module_does_no_io_and_imports_no_ui():
    tree = ast.parse((PROTOCOL_SRC / "trace.py").read_text(encoding="utf-8"))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
                 and n.level == 0}
    assert not imported & {"os", "io", "pathlib", "sqlite3", "sqlite_utils", "subprocess", "socket", "textual",
                           "typer", "jsonschema"}
    calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert "open" not in calls


def test_a_synthetic_trace_of_any_length_is_valid_and_completed():
    for n in (10, 57):
        t = synthetic_trace(n)
        assert len(t["messages"]) == n
        report = validate(t)
        assert report.valid and report.terminal == "COMPLETED", report.errors


def test_an_invalid_trace_reports_no_terminal_at_face_value_only_what_it_would_have_been():
    t = json.loads((INVALID / "sequence-gap.json").read_text(encoding="utf-8"))
    report = validate(t)
    d = report.to_dict()
    assert d["valid"] is False and d["terminal"] is None and d["terminal_if_valid"] == "BLOCKED"
    assert "had it been valid, its terminal would be BLOCKED" in report.reason


def test_a_trace_that_repeats_a_key_is_refused_like_an_envelope(tmp_path):
    import subprocess
    import sys

    f = tmp_path / "dup.json"
    f.write_text((INVALID / "sequence-gap.json").read_text(encoding="utf-8").replace(
        '"schema": "conversation-trace-v2"', '"schema": "conversation-trace-v2", "schema": "conversation-trace-v2"', 1))
    out = subprocess.run([sys.executable, "-m", "sim", "trace", "validate", str(f)], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.startswith("error: E_DUPLICATE_KEY:") and out.stderr.count("\n") == 1
