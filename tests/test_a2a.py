"""'protolab a2a export': a run as A2A-shaped JSON (issue 29, item 2).

The export must validate against the schema of the A2A shapes it uses (tests/data/a2a), hold every
task, message and artifact of the run exactly once, map the states by machine.A2A_STATE, mark the
kit's extensions, give the same bytes twice, and refuse what is not a run with one line and exit 2."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import jsonschema
import pytest

from conftest import run_cli
from sim.a2a import EXTENSION_URI
from sim.machine import A2A_STATE, TaskState
from sim.store import Store

SCHEMA = json.loads((Path(__file__).parent / "data" / "a2a" / "export.schema.json").read_text())

#: (name, extra run arguments): a clean run, one with a frozen conflict (needs_review), and the
#: gathers scenario (several workers of one role, a dissent, a delayed result)
RUNS = {
    "happy": [],
    "conflict": ["-f", "conflicting-digest"],
    "gathers": ["gathers"],
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from sim.cli import main

    out = {}
    base = tmp_path_factory.mktemp("a2a")
    for name, extra in RUNS.items():
        db = base / f"{name}.db"
        try:
            main(["run", *extra, "--db", str(db)])
        except SystemExit as e:
            assert e.code in (0, 1, None), (name, e.code)  # 1: an invariant broke, the run is still whole
        out[name] = db
    return out


def _export(capsys, db, tmp_path, name="out.json"):
    out = tmp_path / name
    code, stdout, err = run_cli(capsys, "a2a", "export", "--db", db, "-o", out)
    assert code == 0, err
    assert stdout.startswith(f"wrote {out}: ")
    return out


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_export_validates_and_holds_every_row_once(runs, name, capsys, tmp_path):
    doc = json.loads(_export(capsys, runs[name], tmp_path).read_text())
    jsonschema.validate(doc, SCHEMA)
    with Store.open(runs[name], readonly=True) as store:
        tasks = list(store.iter_view("tasks"))
        messages = list(store.iter_view("messages"))
        artifacts = list(store.iter_view("artifacts"))
        participants = store.participants()
    assert [t["id"] for t in doc["tasks"]] == [t["task_id"] for t in tasks]
    # a message id may repeat (a conflicting resend): the log row is what appears once
    assert [m["metadata"][EXTENSION_URI]["msgSeq"] for m in doc["messages"]] == [m["msg_seq"] for m in messages]
    assert [m["messageId"] for m in doc["messages"]] == [m["message_id"] for m in messages]
    exported = [a["artifactId"] for t in doc["tasks"] for a in t["artifacts"]] + \
               [a["artifactId"] for a in doc["unattachedArtifacts"]]
    assert sorted(exported) == sorted(a["ref"] for a in artifacts) and len(set(exported)) == len(exported)
    assert [c["name"] for c in doc["agentCards"]] == participants
    senders = {m["sender"] for m in messages} | {m["recipient"] for m in messages}
    assert senders <= set(participants)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_states_are_mapped_and_the_kit_fields_sit_under_the_extension(runs, name, capsys, tmp_path):
    doc = json.loads(_export(capsys, runs[name], tmp_path).read_text())
    with Store.open(runs[name], readonly=True) as store:
        kit = {t["task_id"]: t["state"] for t in store.iter_view("tasks")}
        msgs = {m["msg_seq"]: m for m in store.iter_view("messages")}
    for t in doc["tasks"]:
        state = TaskState(kit[t["id"]])
        assert t["status"]["state"] == A2A_STATE[state]
        ext = t["metadata"][EXTENSION_URI]
        assert ext["state"] == state.value and EXTENSION_URI in t["extensions"]
        if state is TaskState.NEEDS_REVIEW:
            assert t["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            assert "course extension" in ext["courseExtensionState"]["note"]
        else:
            assert "courseExtensionState" not in ext
    for m in doc["messages"]:
        ext = m["metadata"][EXTENSION_URI]
        row = msgs[ext["msgSeq"]]
        assert (ext["idempotencyKey"], ext["payloadDigest"], ext["evidenceRefs"]) == \
               (row["idempotency_key"], row["payload_digest"], row["evidence_refs"])
        # the kit's fields are nowhere but under the extension
        assert not {"idempotency_key", "idempotencyKey", "payload_digest", "evidence_refs"} & set(m)
        assert m["parts"][1]["data"] == row["payload"]
        assert m["role"] == ("ROLE_AGENT" if row["type"] in ("task_started", "task_result") else "ROLE_USER")
    table = {r["kitState"]: r for r in doc["stateMapping"]}
    assert {k: r["a2aState"] for k, r in table.items()} == {s.value: v for s, v in A2A_STATE.items()}
    assert [k for k, r in table.items() if r["extension"]] == ["needs_review"]
    assert doc["extension"]["uri"] == EXTENSION_URI and doc["extension"]["required"] is False


def test_the_conflict_run_has_a_task_in_needs_review(runs, capsys, tmp_path):
    doc = json.loads(_export(capsys, runs["conflict"], tmp_path).read_text())
    assert any(t["metadata"][EXTENSION_URI]["state"] == "needs_review" for t in doc["tasks"])


@pytest.mark.parametrize("name", sorted(RUNS))
def test_two_exports_are_the_same_bytes_on_stdout_and_in_a_file(runs, name, capsys, tmp_path):
    first = _export(capsys, runs[name], tmp_path, "a.json").read_bytes()
    second = _export(capsys, runs[name], tmp_path, "b.json").read_bytes()
    code, stdout, err = run_cli(capsys, "a2a", "export", "--db", runs[name])
    assert code == 0, err
    assert first == second == stdout.encode("utf-8")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no partial file left


def test_refusals_are_one_line_and_exit_2(runs, capsys, tmp_path):
    foreign = tmp_path / "foreign.db"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    newer = tmp_path / "newer.db"
    shutil.copyfile(runs["happy"], newer)
    con = sqlite3.connect(newer)
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n")
    for db, want in ((tmp_path / "none.db", "E_DB_MISSING"), (foreign, "E_DB_NOT_PROTOLAB"),
                     (newer, "E_DB_SCHEMA_NEWER"), (text, "E_DB_CORRUPT")):
        code, out, err = run_cli(capsys, "a2a", "export", "--db", db)
        assert code == 2 and err.startswith(f"error: {want}: ") and err.count("\n") == 1, (db, err)
        assert out == ""
    target = tmp_path / "no-such-folder" / "out.json"
    code, out, err = run_cli(capsys, "a2a", "export", "--db", runs["happy"], "-o", target)
    assert code == 2 and err.startswith("error: E_FILE_WRITE: ") and err.count("\n") == 1, err
    assert not target.parent.exists()
    # an existing file is replaced only whole: a failed export leaves it as it was
    kept = tmp_path / "kept.json"
    kept.write_text("old\n")
    code, _out, err = run_cli(capsys, "a2a", "export", "--db", newer, "-o", kept)
    assert code == 2 and kept.read_text() == "old\n"


def test_machine_show_lists_the_mapping_with_the_extension_note(capsys):
    code, out, err = run_cli(capsys, "machine", "show")
    assert code == 0, err
    assert "needs_review *" in out and "course extension" in out and "A2A defines no such state" in out
    code, out, err = run_cli(capsys, "machine", "show", "--json")
    doc = json.loads(out)
    assert doc["a2a"] == {s.value: v for s, v in A2A_STATE.items()}
    assert doc["a2a_extensions"] == ["needs_review"] and "course extension" in doc["a2a_notes"]["needs_review"]


def test_the_readme_a2a_commands_work_as_written(capsys, tmp_path, monkeypatch):
    import re
    import shlex

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = next(b for b in re.findall(r"```bash\n(.*?)```", readme, re.S) if "a2a export" in b)
    monkeypatch.chdir(tmp_path)
    for line in block.strip().splitlines():
        argv = shlex.split(line.split("#", 1)[0])
        assert argv[0] == "protolab"
        code, _out, err = run_cli(capsys, *argv[1:])
        assert code == 0, (line, err)
    doc = json.loads((tmp_path / "a2a.json").read_text())
    jsonschema.validate(doc, SCHEMA)
    assert [t["status"]["state"] for t in doc["tasks"]] == ["TASK_STATE_INPUT_REQUIRED"]


def test_the_a2a_version_fact_is_dated_where_the_kit_states_it():
    """The source dates the fact that A2A's latest release is 1.0.0 (it will change): every document that
    states the version says as of when, and the export speaks its MAJOR.MINOR."""
    from pathlib import Path

    from sim.a2a import A2A_VERSION, A2A_VERSION_AS_OF

    release, day = A2A_VERSION_AS_OF
    root = Path(__file__).resolve().parent.parent
    for doc in (root / "docs" / "a2a.md", root / "labs" / "15-a2a" / "README.md"):
        text = doc.read_text(encoding="utf-8")
        assert f"As of {day}" in text and release in text, doc
    assert release.startswith(A2A_VERSION + ".")
