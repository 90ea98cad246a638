"""The conversation's rules at intake (issue 29, item 4): a naive runtime takes a message after the fence
and a message whose sender's sequence went back, so its exported trace fails validation with the rule's
code; the safe runtime refuses them at intake with that code, leaves them out of its conversation, and its
exported trace validates."""

import json

import pytest

from sim.cli import main
from sim.conversation import export_trace
from sim.envelope import build_envelope
from sim.intake import Decision, Verdict
from sim.planner import conversation_rule
from sim.protocol.trace import validate
from sim.runner import run_scenario
from sim.scenario import load_scenario

RULES = [("afterthought", "E_POST_TERMINAL_MESSAGE"), ("rewind", "E_SEQUENCE_GAP")]


def codes_of(store) -> set[str]:
    return {f.code for f in validate(export_trace(store)).errors}


@pytest.mark.parametrize("fault, code", RULES)
def test_naive_takes_what_breaks_the_rule_and_its_trace_fails_with_the_code(fault, code):
    store = run_scenario(load_scenario("publish-report"), policy="naive", faults=[fault])
    assert code in codes_of(store)
    assert all(d.code != code for d in store.deliveries())  # naive refused nothing for it


@pytest.mark.parametrize("fault, code", RULES)
def test_safe_refuses_it_at_intake_with_the_code_and_its_trace_validates(fault, code):
    store = run_scenario(load_scenario("publish-report"), policy="safe", faults=[fault])
    refused = [d for d in store.deliveries() if d.code == code]
    assert len(refused) == 1 and refused[0].decision == "rejected"
    trace = export_trace(store)
    assert refused[0].message_id not in {m["id"] for m in trace["messages"]}
    assert validate(trace).valid


def test_after_the_fence_safe_creates_no_task_and_naive_does():
    safe = run_scenario(load_scenario("publish-report"), policy="safe", faults=["afterthought"])
    naive = run_scenario(load_scenario("publish-report"), policy="naive", faults=["afterthought"])
    assert safe.get_task("T-90") is None and naive.get_task("T-90") is not None


def test_a_rewound_result_is_sent_again_under_the_next_number_and_lands_under_safe():
    store = run_scenario(load_scenario("publish-report"), policy="safe", faults=["rewind"])
    assert {t.state for t in store.tasks()} == {"succeeded"}
    t1 = [m for m in export_trace(store)["messages"] if m["sender"] == "researcher"]
    assert [m["seq"] for m in t1] == list(range(1, len(t1) + 1))


@pytest.mark.parametrize("fault, code", RULES)
def test_the_cli_round_trip_exits_1_under_naive_and_0_under_safe(tmp_path, capsys, fault, code):
    for policy, want in (("naive", 1), ("safe", 0)):
        db, out = tmp_path / f"{policy}.db", tmp_path / f"{policy}.json"
        for argv in (["run", "--policy", policy, "-f", fault, "--db", db, "--json"],
                     ["trace", "export", "--db", db, "-o", out]):
            with pytest.raises(SystemExit) as e:
                main([str(a) for a in argv])
            assert e.value.code == 0
        capsys.readouterr()
        with pytest.raises(SystemExit) as e:
            main(["trace", "validate", str(out), "--json"])
        report = json.loads(capsys.readouterr().out)
        assert e.value.code == want
        assert (code in {x["code"] for x in report["errors"]}) == (policy == "naive")


def _env(**kw):
    base = dict(message_id="M-9", trace_id="R-1", task_id="T-9", sender="manager", recipient="researcher",
                type="task_request", payload={"goal": "g", "budget": 1}, idempotency_key="k",
                created_at="2025-01-01T00:00:00Z")
    return build_envelope(**{**base, **kw})


def test_the_rule_refuses_after_the_fence_then_a_reused_number_else_keeps_the_verdict():
    ok = Verdict(Decision.ACCEPTED, "created")
    assert conversation_rule(_env(), ok, fenced=False, seq_used=False) is ok
    assert conversation_rule(_env(), ok, fenced=True, seq_used=True).code == "E_POST_TERMINAL_MESSAGE"
    assert conversation_rule(_env(), ok, fenced=False, seq_used=True).code == "E_SEQUENCE_GAP"
    # the conversation's own messages (the fence, its acks) are not held to it
    assert conversation_rule(_env(task_id="R-1", type="fence", payload={"to": ["researcher"], "terminal": "COMPLETED"}),
                             ok, fenced=True, seq_used=False) is ok
