"""'protolab a2a export' field by field (issue 48, part 1; bugs planted by hand in sim/a2a.py): every value the
export gives a task, a message, an artifact or an Agent Card is the run's own, read back from the store here;
the counts 'wrote' prints are the export's; an artifact of no task comes first among the unattached."""

from __future__ import annotations

import io
import json
import shutil

import pytest

from conftest import run_cli
from sim.a2a import A2AExport, EXTENSION_URI, ROLE_SKILLS
from sim.runner import run_scenario
from sim.runtime import put_artifact
from sim.scenario import load_scenario
from sim.store import Store


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A conflict run (a task in review), with an artifact of no task and one of a task the run does not have."""
    db = tmp_path_factory.mktemp("a2a") / "conflict.db"
    run_scenario(load_scenario("fan-out"), policy="safe", faults=["conflicting-digest"], db=db).close()
    with Store.open(db) as store:
        put_artifact(store, {"note": "of nobody"}, kind="note")
        put_artifact(store, {"note": "of a task not in the run"}, kind="note", task_id="T-99")
    return db


def _doc(db):
    with Store.open(db, readonly=True) as store:
        fh = io.StringIO()
        export = A2AExport(store)
        export.write(fh)
        return json.loads(fh.getvalue()), export.counts


def test_every_task_field_is_the_runs_and_its_timestamp_its_last_change(run):
    doc, _counts = _doc(run)
    with Store.open(run, readonly=True) as store:
        rows = {t["task_id"]: t for t in store.iter_view("tasks")}
        last = {}
        for tr in store.iter_view("transitions"):
            last[tr["task_id"]] = tr["created_at"]
        changed_more_than_once = sum(1 for t in rows if sum(tr["task_id"] == t for tr in store.iter_view("transitions")) > 1)
    assert changed_more_than_once
    for t in doc["tasks"]:
        row, kit = rows[t["id"]], t["metadata"][EXTENSION_URI]
        assert t["contextId"] == row["trace_id"]
        assert (kit["stateVersion"], kit["machineVersion"], kit["goal"], kit["assignee"], kit["leaseHolder"],
                kit["budgetTotal"], kit["budgetLeft"], kit["trusted"]) == \
               (row["state_version"], row["machine_version"], row["goal"], row["assignee"], row["lease_holder"],
                row["budget_total"], row["budget_left"], bool(row["trusted"]))
        if t["id"] in last:
            assert t["status"]["timestamp"] == last[t["id"]]
        else:
            assert "timestamp" not in t["status"]
    assert any(r["budget_left"] != r["budget_total"] for r in rows.values())


def test_a_task_never_changed_has_no_timestamp(run, tmp_path):
    db = tmp_path / "fresh.db"
    shutil.copy(run, db)
    with Store.open(db) as store:
        store.conn.execute("DELETE FROM transitions WHERE task_id = 'T-1'")
        store.conn.commit()
    doc, _counts = _doc(db)
    t1 = next(t for t in doc["tasks"] if t["id"] == "T-1")
    assert "timestamp" not in t1["status"] and t1["status"]["state"]


def test_every_message_field_is_its_log_rows(run):
    doc, _counts = _doc(run)
    with Store.open(run, readonly=True) as store:
        rows = list(store.iter_view("messages"))
    assert len(rows) == len(doc["messages"])
    for m, row in zip(doc["messages"], rows):
        ext = m["metadata"][EXTENSION_URI]
        assert (m["messageId"], m["contextId"], m["taskId"]) == (row["message_id"], row["trace_id"], row["task_id"])
        assert m["parts"][0]["text"] == f"{row['type']} from {row['sender']} to {row['recipient']}"
        assert ext == {"msgSeq": row["msg_seq"], "type": row["type"], "sender": row["sender"],
                       "recipient": row["recipient"], "schemaVersion": row["schema_version"],
                       "createdAt": row["created_at"], "idempotencyKey": row["idempotency_key"],
                       "payloadDigest": row["payload_digest"], "digestScheme": row["digest_scheme"],
                       "envelopeDigest": row["envelope_digest"], "evidenceRefs": list(row["evidence_refs"]),
                       "senderSeq": row["sender_seq"], "senderGeneration": row["sender_generation"],
                       "firstTick": row["first_tick"]}
    assert any(r["sender_seq"] not in (None, r["sender_generation"]) for r in rows)
    assert any(r["task_id"] != r["trace_id"] for r in rows)


def test_every_artifact_field_is_its_row_and_one_of_no_task_comes_first(run):
    doc, counts = _doc(run)
    with Store.open(run, readonly=True) as store:
        rows = {a["ref"]: a for a in store.iter_view("artifacts")}
    listed = [a for t in doc["tasks"] for a in t["artifacts"]] + doc["unattachedArtifacts"]
    assert sorted(a["artifactId"] for a in listed) == sorted(rows)
    for a in listed:
        row, ext = rows[a["artifactId"]], a["metadata"][EXTENSION_URI]
        assert (a["name"], ext["digestScheme"], ext["size"], ext["taskId"], ext["messageId"], ext["firstTick"]) == \
               (row["kind"], row["scheme"], row["size"], row["task_id"], row["message_id"], row["first_tick"])
    assert [a["metadata"][EXTENSION_URI]["taskId"] for a in doc["unattachedArtifacts"]] == [None, "T-99"]
    assert counts == {"agentCards": len(doc["agentCards"]), "tasks": len(doc["tasks"]),
                      "messages": len(doc["messages"]), "artifacts": len(listed)}
    assert sum(bool(t["artifacts"]) for t in doc["tasks"]) >= 2  # (so a count of the last batch only differs)


def test_wrote_counts_what_the_file_holds(run, tmp_path, capsys):
    out = tmp_path / "out.json"
    code, stdout, err = run_cli(capsys, "a2a", "export", "--db", run, "-o", out)
    assert code == 0, err
    doc = json.loads(out.read_text())
    arts = sum(len(t["artifacts"]) for t in doc["tasks"]) + len(doc["unattachedArtifacts"])
    assert (f"{len(doc['agentCards'])} agent cards, {len(doc['tasks'])} tasks, {len(doc['messages'])} messages, "
            f"{arts} artifacts") in stdout


def test_each_agent_card_names_its_roles_skill(run):
    doc, _counts = _doc(run)
    roles = set()
    for card in doc["agentCards"]:
        role = card["name"].split("-", 1)[0]
        roles.add(role)
        assert card["skills"][0]["tags"] == [role] and card["description"] == f"protolab's simulated {role} ({card['name']})."
        if role in ROLE_SKILLS:
            assert card["skills"][0]["id"] == ROLE_SKILLS[role][0]
    assert {"manager", "researcher"} <= roles and any("-" in c["name"] for c in doc["agentCards"])
