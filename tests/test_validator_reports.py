"""Every validator report in full: for a corpus of traces (the samples, every invalid sample, traces
exported from runs with faults, and every mutation of every valid one), the whole report (valid,
terminal, terminal_if_valid, reason, each finding's code, message id, pointer and text, the accepted
messages and their positions, each gather's reduction) is what a reviewer read and accepted, kept in
``tests/data/validator-reports.json``.

The rule tests pin each code; this pins the rest of what ``protolab trace validate --json`` prints, so a
validator that names the wrong message, points at the wrong field, or reduces a gather differently is
caught. After a deliberate change, rewrite the file with
``PROTOLAB_UPDATE_GOLDEN=1 pytest tests/test_validator_reports.py`` and read the diff.
"""

import dataclasses
import json
import os
from functools import lru_cache
from pathlib import Path

import pytest

from sim.protocol import validate
from sim.protocol.mutate import MUTATIONS

TRACES = Path(__file__).resolve().parent.parent / "data" / "traces"
GOLDEN = Path(__file__).parent / "data" / "validator-reports.json"
RUNS = [("publish-report", "safe", ()), ("publish-report", "naive", ("duplicate", "late-failure")),
        ("fan-out", "safe", ("crash",)), ("fan-out", "safe", ("silent",)), ("fan-out", "naive", ("resend",))]


@lru_cache(maxsize=None)
def corpus() -> dict[str, object]:
    from sim.conversation import export_trace
    from sim.runner import run_scenario
    from sim.scenario import load_scenario

    out = {}
    for p in sorted(TRACES.glob("*.json")) + sorted((TRACES / "invalid").glob("*.json")):
        out[str(p.relative_to(TRACES))] = json.loads(p.read_text())
    for name, policy, faults in RUNS:
        store = run_scenario(load_scenario(name), policy=policy, faults=list(faults), seed=3, strict_faults=False)
        try:
            out[f"run {name} {policy} {'+'.join(faults) or 'no faults'}"] = export_trace(store)
        finally:
            store.close()
    for base in sorted(k for k in out if "/" not in k):
        if not validate(out[base]).valid:
            continue
        for mu in MUTATIONS:
            try:
                out[f"{base} mutated: {mu.name}"] = mu.apply(out[base])
            except Exception:  # nothing of the kind this mutation breaks in this trace
                continue
    out.update(planted(out["valid-trace.json"]))
    out.update(damaged(out["valid-trace.json"], "valid"))
    out.update(damaged(out["quorum-trace.json"], "quorum"))
    replaced = out["planted: researcher-1 with two earlier bodies, messages from the first only"]
    out.update({k: t for k, t in damaged(replaced, "replaced").items() if "earlierGenerations" in k})
    # a FIRST_SUCCESS gather (tieBreak, a selected contributor) and a trace carrying its reducer
    # outputs (stateDigest, stateDigestAfter): their own fields damaged too
    out.update({k: t for k, t in damaged(out["first-success-trace.json"], "first-success").items()
                if k.startswith("damaged first-success: gathers/")})
    out.update({k: t for k, t in damaged(out["crash-generations-trace.json"], "annotated").items()
                if "stateDigest" in k or "earlierGenerations" in k})
    return out


ODD = [None, True, 1.5, -1, 0, "", "x", [], {}, ["x"], [1]]


def planted(valid: dict) -> dict[str, object]:
    """Traces with faults the samples and mutations do not plant: not an object at all, two faults in
    one loop (so a check that stops at the first is caught), bodies replaced at several points, a
    ceiling that cuts several messages, a message whose id is not a string."""
    import copy

    out: dict[str, object] = {f"planted: the document is {json.dumps(v)}": v for v in ([], "trace", None, 3)}

    def variant(name, change):
        t = copy.deepcopy(valid)
        change(t)
        out[f"planted: {name}"] = t

    def dup_participants(t):
        t["participants"][1:1] = [copy.deepcopy(t["participants"][0]), copy.deepcopy(t["participants"][0])]
    variant("the first participant declared three times", dup_participants)

    def dup_gathers(t):
        t["gathers"] += [copy.deepcopy(t["gathers"][0]), copy.deepcopy(t["gathers"][0])]
    variant("a gather declared three times", dup_gathers)

    r1 = [m for m in valid["messages"] if m["sender"] == "researcher-1"]
    ids = [m["id"] for m in valid["messages"]]

    def bodies(earlier, current=3):
        def change(t):
            (p,) = [p for p in t["participants"] if p["ref"] == "researcher-1"]
            p["generation"], p["earlierGenerations"] = current, earlier
        return change
    variant("researcher-1 replaced before the first message", bodies([{"generation": 1, "replacedAfter": None}], 2))
    variant("researcher-1 replaced twice at one point", bodies([{"generation": 1, "replacedAfter": ids[1]},
                                                                 {"generation": 2, "replacedAfter": ids[1]}]))
    variant("researcher-1 replaced at points out of order", bodies([{"generation": 1, "replacedAfter": ids[4]},
                                                                     {"generation": 2, "replacedAfter": ids[1]}]))
    variant("researcher-1 with two earlier bodies, messages from the first only",
            bodies([{"generation": 1, "replacedAfter": r1[-1]["id"]}, {"generation": 2, "replacedAfter": ids[-1]}]))

    def ceiling(t):
        t["messageCeiling"] = 5
    variant("a ceiling of 5 under more messages", ceiling)

    def bad_id(t):
        t["messages"][2]["id"] = 3
        t["messages"][2]["scope"] = "trace:elsewhere"
    variant("a message whose id is a number, in the wrong scope", bad_id)

    # Branches the mutations above do not reach (each found by a mutant that survived them).
    def at(t, mid):
        return next(m for m in t["messages"] if m["id"] == mid)

    def after_ceiling_clean(t):
        t["messageCeiling"] = 3
        at(t, "m5")["causedBy"] = ["m1"]  # past the ceiling, and nothing else wrong with it
    variant("a clean message past the ceiling", after_ceiling_clean)

    def early_fence(t):
        fence = copy.deepcopy(at(t, "m7"))
        fence["id"] = "m6f"
        at(t, "m7")["seq"] = 5
        t["messages"].insert(t["messages"].index(at(t, "m7")), fence)
    variant("a FENCE before the terminal fence", early_fence)

    def ack_twice(t):
        again = dict(copy.deepcopy(at(t, "m8")), id="m11", seq=3, at="2026-07-13T04:22:00Z")
        t["messages"].append(again)
    variant("researcher-1 acknowledges the fence twice", ack_twice)

    def ack_by_manager(t):
        t["messages"].append(dict(copy.deepcopy(at(t, "m8")), id="m11", sender="manager", seq=5,
                                  recipients=["writer"], at="2026-07-13T04:22:00Z"))
    variant("the manager, who owes no acknowledgement, acknowledges the fence", ack_by_manager)

    def expiry(seconds_before):
        def change(t):
            m1 = at(t, "m1")
            m1["expiresAt"] = m1["at"] if not seconds_before else "2026-07-13T04:00:00Z"
        return change
    variant("m1 dated exactly at its expiry", expiry(0))
    variant("m1 dated one second after its expiry", expiry(1))

    def self_cause(t):
        at(t, "m6")["causedBy"] = ["m6"]
    variant("m6 cites itself", self_cause)

    def replayed_seq(t):
        at(t, "m8")["seq"] = 1
    variant("researcher-1's acknowledgement replays seq 1", replayed_seq)

    def two_labels_lacking(t):
        at(t, "m1")["audienceLabels"] = ["research", "drafting", "results"]
    variant("m1 carries two labels its recipients do not accept", two_labels_lacking)

    def undigestable(t):
        at(t, "m5")["payload"] = {"n": 2 ** 60}  # jcs-v2 cannot represent it exactly
    variant("m5 carries a payload jcs-v2 cannot digest", undigestable)

    def no_terminal_no_fence(t):
        del t["terminal"]
        t["messages"] = [m for m in t["messages"] if m["id"] in ("m1", "m2", "m3", "m4", "m5", "m6")]
    variant("no terminal and no fence yet", no_terminal_no_fence)

    def two_acks_missing(t):
        t["messages"] = [m for m in t["messages"] if m["id"] not in ("m9", "m10")]
    variant("two required acknowledgements missing", two_acks_missing)

    def none_required(t):
        t["terminal"]["requiredAcks"] = []
    variant("a terminal that requires no acknowledgement", none_required)

    def contribution_missing(t):
        t["messages"] = [m for m in t["messages"] if m["id"] != "m3"]
        at(t, "m4")["causedBy"] = ["m2"]
        at(t, "m9")["seq"] = 1
        del t["gathers"][0]["result"]
    variant("a gather missing one contribution under a COMPLETED terminal", contribution_missing)

    def bad_first_hex(t):
        at(t, "m5")["payloadDigest"] = "sha256:G" + "0" * 63  # the first character after the prefix is wrong
    variant("a payloadDigest whose first hex character is not hex", bad_first_hex)

    def nameless_and_senderless(t):
        m = at(t, "m5")
        m["id"], m["sender"] = "", 7  # no usable id: the sender's finding names no message
    variant("a message with an empty id and a numeric sender", nameless_and_senderless)

    def result_without_gather(t):  # found by the fast path's property test (issue 48): once read as valid there
        m = at(t, "m4")
        for k in ("gatherId", "payload", "verificationRef", "expiresAt", "stateDigestAfter"):
            m.pop(k, None)
        del t["gathers"][0]["result"]
    variant("a GATHER_RESULT without its gatherId or any optional field, other messages carrying theirs",
            result_without_gather)

    # uniqueItems with JSON Schema's equality (false != 0, 1 == 1.0, nested arrays and objects by
    # value): the shape checker and jsonschema must agree on each (the damaged-trace test compares them)
    for odd in ([False, 0], [True, 1], [1, 1.0], [[1], [2]], [[1], [1.0]], [{"a": 1}, {"a": 2}], [{"a": [1]}, {"a": [1.0]}],
                ["x", None, None]):
        t = copy.deepcopy(valid)
        t["messages"][0]["recipients"] = odd
        out[f"damaged valid: messages/0/recipients = {json.dumps(odd)}"] = t
    return out


def _paths(trace: dict) -> list[tuple]:
    """A path to every field worth damaging: the header, one participant, the first, a middle and the
    last message, each gather and its recorded result, the terminal."""
    paths = [(k,) for k in trace]
    paths += [("participants", 0, k) for k in trace["participants"][0]]
    for i in sorted({0, len(trace["messages"]) // 2, len(trace["messages"]) - 1}):
        paths += [("messages", i, k) for k in trace["messages"][i]]
    for j, g in enumerate(trace["gathers"]):
        paths += [("gathers", j, k) for k in g]
        paths += [("gathers", j, "result", k) for k in g.get("result", {})]
    paths += [("terminal", k) for k in trace.get("terminal", {})]
    # the first element of every array among them (an empty string, a number, a list where a name goes)
    at_depth = []
    for path in paths:
        v = trace
        for step in path:
            v = v[step] if isinstance(v, dict) and step in v or isinstance(v, list) else None
        if isinstance(v, list) and v:
            at_depth.append((*path, 0))
    for i, p in enumerate(trace["participants"]):  # each earlier body of a replaced participant
        for k, e in enumerate(p.get("earlierGenerations", ())):
            at_depth += [("participants", i, "earlierGenerations", k)] + [
                ("participants", i, "earlierGenerations", k, f) for f in e]
    return paths + at_depth


def damaged(trace: dict, name: str) -> dict[str, dict]:
    """Each field of ``trace`` removed, and replaced by each odd value: the shape checker's every
    refusal, with the words and pointer it chose."""
    import copy

    out = {}
    for path in _paths(trace):
        for _k, value in enumerate(["(removed)"] + ODD):
            t = copy.deepcopy(trace)
            at = t
            for step in path[:-1]:
                at = at[step]
            if value == "(removed)":
                if isinstance(at, list):
                    del at[path[-1]]
                else:
                    at.pop(path[-1], None)
            else:
                at[path[-1]] = copy.deepcopy(value)
            out[f"damaged {name}: {'/'.join(map(str, path))} = {json.dumps(value)}"] = t
    return out


def _entry(key: str, trace: dict) -> dict:
    """The whole report; for a damaged trace, what its damage made the validator say (the rest is
    the undamaged report's, pinned once)."""
    d = _report(trace)
    if key.startswith("damaged "):
        d = {k: d[k] for k in ("valid", "terminal", "terminal_if_valid", "reason", "errors")}
    return d


def _report(trace: dict) -> dict:
    r = validate(trace)
    d = r.to_dict()
    d["accepted_positions"] = list(r.accepted_positions)
    d["gathers"] = {k: json.loads(json.dumps(dataclasses.asdict(g), default=str)) for k, g in r.gathers.items()}
    return json.loads(json.dumps(d, default=str))


@pytest.mark.skipif(not os.environ.get("PROTOLAB_UPDATE_GOLDEN"), reason="rewrites the golden file")
def test_rewrite_the_golden_reports():
    GOLDEN.write_text(json.dumps({k: _entry(k, t) for k, t in corpus().items()}, indent=1, sort_keys=True) + "\n")


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
def test_the_corpus_is_the_one_reviewed():
    assert set(corpus()) == set(json.loads(GOLDEN.read_text()))


def test_the_validator_says_on_every_trace_exactly_what_was_reviewed():
    golden = json.loads(GOLDEN.read_text())
    wrong = [k for k, t in corpus().items() if _entry(k, t) != golden.get(k)]
    assert not wrong, f"{len(wrong)} reports differ, first: {wrong[0]}"


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
def test_on_every_damaged_trace_the_shape_checker_and_the_json_schema_point_at_the_same_places():
    from jsonschema import Draft202012Validator

    from sim.protocol import load_schema
    from sim.protocol.trace import check_shape

    schema = Draft202012Validator(load_schema())

    def pointer(err) -> str:
        return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in err.absolute_path)

    disagree = []
    for key, t in corpus().items():
        if key.startswith("damaged "):
            mine = {f.pointer for f in check_shape(t)}
            theirs = {pointer(e) for e in schema.iter_errors(t)}
            if mine != theirs:
                disagree.append((key, sorted(mine ^ theirs)))
    assert not disagree, f"{len(disagree)} traces, first: {disagree[0]}"
