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
    "fault, code",
    [("duplicate", "E_DUPLICATE_MESSAGE"), ("reorder", "E_SEQUENCE_GAP"), ("drop", "E_SEQUENCE_GAP"),
     ("crash", "E_STALE_GENERATION"), ("duplicate", "E_POST_TERMINAL_MESSAGE"), ("delay:A-4", "E_POST_TERMINAL_MESSAGE")],
)
def test_an_exported_run_shows_transport_faults_as_protocol_errors(tmp_path, monkeypatch, capsys, fault, code):
    monkeypatch.chdir(tmp_path)
    assert run(capsys, "run", "--fault", fault, "--json")[0] == 0
    assert run(capsys, "trace", "export", "--db", "protolab.db", "-o", "run.json")[0] == 0
    c, out, _ = run(capsys, "trace", "validate", "run.json", "--json")
    report = json.loads(out)
    assert c == 1 and code in {e["code"] for e in report["errors"]}


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
