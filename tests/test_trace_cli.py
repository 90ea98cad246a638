"""The 'protolab trace' commands as a student uses them: exit 0 valid, 1 invalid, 2 unreadable."""

import json
from pathlib import Path

import pytest

from sim.cli import main

DATA = Path(__file__).resolve().parent.parent / "data" / "traces"


def run(capsys, *argv):
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in argv])
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_a_valid_trace_exits_0_and_says_its_terminal_and_why(capsys):
    code, out, err = run(capsys, "trace", "validate", DATA / "valid-trace.json")
    assert code == 0 and err == ""
    assert "valid" in out and "COMPLETED" in out and "m7" in out


def test_an_invalid_trace_exits_1_with_every_error_its_code_and_message_id(capsys):
    trace = json.loads((DATA / "valid-trace.json").read_text())
    code, out, _ = run(capsys, "trace", "validate", DATA / "invalid" / "sequence-gap.json", "--json")
    report = json.loads(out)
    assert code == 1 and report["valid"] is False
    assert any(e["code"] == "E_SEQUENCE_GAP" and e["messageId"] for e in report["errors"])
    assert trace  # the fixture set stays beside the valid trace


@pytest.mark.parametrize("content, errcode", [(b"{", "E_JSON"), (b"\xff\xfe", "E_NOT_UTF8"), (b'{"a": NaN}', "E_NAN")])
def test_an_unreadable_trace_exits_2_with_one_line(tmp_path, capsys, content, errcode):
    p = tmp_path / "t.json"
    p.write_bytes(content)
    code, out, err = run(capsys, "trace", "validate", p)
    assert code == 2 and out == ""
    assert err.startswith(f"error: {errcode}:") and err.count("\n") == 1


def test_the_mutation_suite_catches_every_mutation(capsys):
    code, out, _ = run(capsys, "trace", "mutate", DATA / "valid-trace.json", "--json")
    rows = json.loads(out)
    assert code == 0 and len(rows) >= 16 and all(r["ok"] for r in rows)
    assert {"E_DUPLICATE_MESSAGE", "E_SEQUENCE_GAP", "E_STALE_EPOCH", "E_STALE_GENERATION", "E_AUDIENCE_SCOPE",
            "E_AUDIENCE_LABEL", "E_CAUSATION_GAP", "E_POST_TERMINAL_MESSAGE"} <= {r["expected"] for r in rows}


def test_the_diagram_is_written_as_a_mermaid_block(tmp_path, capsys):
    out_file = tmp_path / "d.md"
    code, out, _ = run(capsys, "trace", "diagram", DATA / "valid-trace.json", "-o", out_file)
    text = out_file.read_text()
    assert code == 0 and text.startswith("```mermaid\nsequenceDiagram")
    assert "terminal fence" in text and "m10 ACK" in text


@pytest.mark.parametrize(
    "fault, code, policy",
    [("duplicate", "E_DUPLICATE_MESSAGE", "naive"), ("reorder", "E_SEQUENCE_GAP", "naive"),
     ("drop", "E_SEQUENCE_GAP", "naive"), ("delay", "E_SEQUENCE_GAP", "naive"), ("crash", "E_STALE_GENERATION", "naive"),
     ("afterthought", "E_POST_TERMINAL_MESSAGE", "naive"), ("delay:A-4", "E_POST_TERMINAL_MESSAGE", "naive")],
)
def test_an_exported_run_shows_transport_faults_as_protocol_errors(tmp_path, monkeypatch, capsys, fault, code, policy):
    monkeypatch.chdir(tmp_path)
    assert run(capsys, "run", "--fault", fault, "--policy", policy, "--json")[0] == 0
    assert run(capsys, "trace", "export", "--db", "protolab.db", "-o", "run.json")[0] == 0
    c, out, _ = run(capsys, "trace", "validate", "run.json", "--json")
    report = json.loads(out)
    assert c == 1 and code in {e["code"] for e in report["errors"]}


@pytest.mark.parametrize("fault", ["reorder", "drop", "delay", "delay:A-4", "drop:M-2", "drop:A-1", "reorder,drop",
                                   "duplicate", "crash", "resend", "conflicting-digest", "late-conflict",
                                   "late-conflict:M-6", "conflicting-digest:M-6"])
def test_under_safe_the_session_keeps_every_sender_in_sequence_and_the_export_validates(tmp_path, monkeypatch, capsys,
                                                                                       fault):
    # the same faults that leave a gap under naive: the safe runtime's session parks what is early and sends
    # again what was lost, so the conversation it took is whole and in order
    monkeypatch.chdir(tmp_path)
    argv = ["run", "--json"] + [a for f in fault.split(",") for a in ("--fault", f)]
    assert run(capsys, *argv)[0] == 0
    assert run(capsys, "trace", "export", "--db", "protolab.db", "-o", "run.json")[0] == 0
    c, out, _ = run(capsys, "trace", "validate", "run.json", "--json")
    report = json.loads(out)
    assert report["errors"] == [] and c == 0, report["errors"]
    trace = json.loads(Path("run.json").read_text())
    for body in {(m["sender"], m["generation"]) for m in trace["messages"]}:  # a new body counts from 1 again
        seqs = [m["seq"] for m in trace["messages"] if (m["sender"], m["generation"]) == body]
        assert seqs == list(range(1, len(seqs) + 1)), (body, seqs)


def test_a_clean_run_exports_as_a_valid_fenced_conversation(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    run(capsys, "run", "fan-out", "--json")
    code, out, _ = run(capsys, "trace", "export", "--db", "protolab.db")
    trace = json.loads(out)
    assert code == 0 and trace["conversationId"] == "R-2"
    assert [m["seq"] for m in trace["messages"] if m["sender"] == "writer"] == [1, 2, 3]  # started, result, fence ack
    assert trace["terminal"]["state"] == "COMPLETED" and trace["terminal"]["truthEffect"] == "NONE"
    (tmp_path / "t.json").write_text(json.dumps(trace))
    code, out, _ = run(capsys, "trace", "validate", tmp_path / "t.json")
    assert code == 0 and "COMPLETED" in out and "acknowledged by" in out


def test_mutate_on_a_valid_trace_without_what_a_mutation_breaks_says_not_applicable_without_a_traceback(capsys):
    from pathlib import Path

    from sim.cli import main

    path = Path(__file__).resolve().parent.parent / "solutions/06-conversation-trace/wrong/no-acks-required/trace.json"
    try:
        main(["trace", "mutate", str(path), "--json"])
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr()
    rows = __import__("json").loads(out.out)
    assert code == 1 and "Traceback" not in out.err
    assert any(r.get("applicable") is False for r in rows) and any(r["ok"] for r in rows)
