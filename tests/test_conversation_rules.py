"""The conversation's rules at intake (issue 29, item 4): a naive runtime takes a message after the fence,
a message whose sender's sequence went back, a message from a body that was replaced (a zombie) and a
message to a recipient outside its audience, so its exported trace fails validation with the rule's
code; the safe runtime refuses them at intake with that code, leaves them out of its conversation, and its
exported trace validates."""

import json

import pytest

from sim.cli import main
from sim.conversation import export_trace
from sim.envelope import build_envelope
from sim.intake import Decision, Verdict
from sim.planner import CONVERSATION_CODES, audience_refusal, audiences_of, conversation_rule
from sim.protocol.trace import validate
from sim.runner import run_scenario
from sim.scenario import load_scenario

# (scenario: a fault that breaks the rule only where the story gets there; the stale epoch needs a conversation a
# reviewer reopens)
RULES = [("afterthought", "E_POST_TERMINAL_MESSAGE"), ("rewind", "E_SEQUENCE_GAP"), ("zombie", "E_STALE_GENERATION"),
         ("overshare", "E_AUDIENCE_LABEL"), ("cross-talk", "E_AUDIENCE_SCOPE"), ("overtime", "E_DEADLINE"),
         ("linger", "E_EXPIRED_MESSAGE"), ("flood", "E_MESSAGE_CEILING"), ("reopened/straggler", "E_STALE_EPOCH")]


def _story(fault: str) -> tuple[str, str]:
    scenario, _, name = fault.rpartition("/")
    return scenario or "publish-report", name


def test_every_code_the_runtime_refuses_under_the_conversations_rules_has_a_fault_that_shows_it():
    # a rule no fault can break teaches nothing: a new code in CONVERSATION_CODES needs its row in RULES
    assert sorted(c for _, c in RULES) == sorted(CONVERSATION_CODES)


def codes_of(store) -> set[str]:
    from sim.conversation import TraceExport

    return {f.code for e in TraceExport(store).epoch_numbers for f in validate(export_trace(store, e)).errors}


@pytest.mark.parametrize("fault, code", RULES)
def test_naive_takes_what_breaks_the_rule_and_its_trace_fails_with_the_code(fault, code):
    scenario, name = _story(fault)
    store = run_scenario(load_scenario(scenario), policy="naive", faults=[name])
    assert code in codes_of(store)
    assert all(d.code != code for d in store.deliveries())  # naive refused nothing for it


@pytest.mark.parametrize("fault, code", RULES)
def test_safe_refuses_it_at_intake_with_the_code_and_its_trace_validates(fault, code):
    from sim.conversation import TraceExport

    scenario, name = _story(fault)
    store = run_scenario(load_scenario(scenario), policy="safe", faults=[name])
    refused = [d for d in store.deliveries() if d.code == code]
    assert refused and all(d.decision == "rejected" for d in refused)
    # (a flood is refused from where the ceiling's room begins; a straggler's network copy is refused again)
    assert len(refused) == 1 or name in ("flood", "straggler")
    for epoch in TraceExport(store).epoch_numbers:
        trace = export_trace(store, epoch)
        assert not {d.message_id for d in refused} & {m["id"] for m in trace["messages"]}
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
    scenario, name = _story(fault)
    epoch = ["--epoch", "2"] if scenario == "reopened" else []  # (the stale message is in the reopened epoch)
    for policy, want in (("naive", 1), ("safe", 0)):
        db, out = tmp_path / f"{policy}.db", tmp_path / f"{policy}.json"
        for argv in (["run", scenario, "--policy", policy, "-f", name, "--db", db, "--json"],
                     ["trace", "export", "--db", db, "-o", out, *epoch]):
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


def test_a_zombie_answers_under_a_current_lease_so_only_its_generation_refuses_it():
    store = run_scenario(load_scenario("publish-report"), policy="safe", faults=["zombie"])
    (refused,) = [d for d in store.deliveries() if d.code == "E_STALE_GENERATION"]
    (msg,) = [m for m in store.messages() if m.message_id == refused.message_id]
    assert msg.sender == "researcher" and msg.sender_generation == 1
    # the lease it answered under was the task's lease then: the lease alone would have taken it
    assert msg.payload["lease_version"] == 1 and refused.state_after == "running"
    # the new body takes the task over once the old body's lease expires, and the story ends well
    assert {t.state for t in store.tasks()} == {"succeeded"}
    trace = export_trace(store)
    (researcher,) = [p for p in trace["participants"] if p["ref"] == "researcher"]
    assert researcher["generation"] == 2 and researcher["earlierGenerations"] == [{"generation": 1, "replacedAfter": "M-2"}]


def test_a_crashed_workers_late_commit_is_still_fenced_by_its_lease_first():
    # the crash fault's zombie answers after recovery, under a stale lease: intake refuses it before any
    # conversation rule is asked, so shipped crash runs keep E_STALE_LEASE (and their exports show the zombie)
    store = run_scenario(load_scenario("publish-report"), policy="safe", faults=["crash"])
    assert "E_STALE_LEASE" in {d.code for d in store.deliveries()}
    assert "E_STALE_GENERATION" not in {d.code for d in store.deliveries()}


def test_the_rule_refuses_a_replaced_body_after_the_fence_check_and_before_the_sequence_check():
    ok = Verdict(Decision.ACCEPTED, "took the result")
    assert conversation_rule(_env(), ok, fenced=False, seq_used=True, stale_body=True).code == "E_STALE_GENERATION"
    assert conversation_rule(_env(), ok, fenced=True, seq_used=False, stale_body=True).code == "E_POST_TERMINAL_MESSAGE"
    assert conversation_rule(_env(), ok, fenced=False, seq_used=False, stale_body=False) is ok


def test_each_participant_is_exported_with_the_audience_labels_of_its_role():
    trace = export_trace(run_scenario(load_scenario("fan-out"), policy="safe"))
    labels = {p["ref"]: p["audiences"] for p in trace["participants"]}
    assert labels == {"manager": ["control", "receipts", "results"], "researcher-1": ["control", "receipts"],
                      "researcher-2": ["control", "receipts"], "writer": ["control", "receipts"]}


def test_an_overshared_result_is_refused_whatever_intake_makes_of_it_and_naive_hands_it_to_the_worker():
    safe = run_scenario(load_scenario("publish-report"), policy="safe", faults=["overshare"])
    (leak,) = [m for m in safe.messages() if m.recipient == "writer" and m.type == "task_result"]
    (d,) = [d for d in safe.deliveries() if d.message_id == leak.message_id]
    assert (d.decision, d.code) == ("rejected", "E_AUDIENCE_LABEL") and "writer" in d.reason
    naive = run_scenario(load_scenario("publish-report"), policy="naive", faults=["overshare"])
    (d,) = [d for d in naive.deliveries() if d.message_id == leak.message_id]
    assert d.decision == "accepted"


def test_the_audience_rule_refuses_only_a_label_the_recipient_does_not_accept():
    result = dict(type="task_result", sender="researcher", task_id="T-1",
                  payload={"status": "succeeded", "lease_version": 1, "artifact": "sha256:" + "0" * 64, "summary": "s"})
    assert audience_refusal(_env(**result, recipient="manager")) is None
    assert audience_refusal(_env(**result, recipient="writer")).code == "E_AUDIENCE_LABEL"
    assert audience_refusal(_env()) is None  # a request to a worker: control, which every worker hears
    assert audiences_of("reviewer") == ("control",) and "results" not in audiences_of("researcher-7")
