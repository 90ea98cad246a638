"""Process agents (sim/procagent.py, sim/wire.py, data/agents/researcher.py, docs/wire.md): a role played by
a process speaking JSON lines; the kit's transport, faults, runtime and store unchanged; bad output
recorded as what it is, never a crash of the kit."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import jsonschema
import pytest

from conftest import run_cli
from sim import wire
from sim.invariants import check
from sim.procagent import parse_agent_option
from sim.runner import run_scenario, summarize
from sim.scenario import load_scenario
from sim.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "data" / "agents" / "researcher.py"
AGENT = [sys.executable, str(REFERENCE)]
SCHEMA = json.loads((ROOT / "sim" / wire.SCHEMA_FILE).read_text())


def _run(policy="safe", faults=(), agents=None, **kw):
    return run_scenario(load_scenario("publish-report"), policy=policy, faults=list(faults), agents=agents, **kw)


def _verdicts(store) -> dict:
    s = summarize(store)
    return {"invariants": s["invariants"], "tasks": s["tasks_by_state"], "decisions": s["counts"]["deliveries_by_decision"],
            "effects": s["effects_committed"]}


def _agent_script(tmp_path: Path, name: str, body: str) -> list[str]:
    """A test agent: the reference agent's Agent class (loaded from its file, stdlib only) driven by ``body``."""
    path = tmp_path / f"{name}.py"
    path.write_text(
        "import json, runpy, sys\n"
        f"Agent = runpy.run_path({str(REFERENCE)!r})['Agent']\n"
        "def out(obj):\n"
        "    sys.stdout.write((obj if isinstance(obj, str) else json.dumps(obj)) + '\\n')\n"
        "DONE = {'wire': 1, 'type': 'done'}\n"
        + body)
    return [sys.executable, str(path)]


# ---------------------------------------------------------------- the happy path and the faults


def test_the_reference_agent_plays_the_researcher_and_every_invariant_holds():
    store = _run(agents={"researcher": AGENT})
    try:
        assert all(r.ok for r in check(store))
        s = summarize(store)
        assert s["tasks_by_state"] == {"succeeded": 2} and s["effects_committed"] == 1
        mine = [m for m in store.messages() if m["sender"] == "researcher"]
        # its own envelopes (its own ids), through the runtime: started, result, the fence's ack
        assert [m["type"] for m in mine] == ["task_started", "task_result", "ack"]
        assert all(m["message_id"].startswith("Researcher-1") for m in mine)
        assert store.get_meta("plugin_agent_researcher") == f"{sys.executable} {REFERENCE}"
        assert store.events_of_type("agent_output_refused") == [] and store.events_of_type("agent_stopped") == []
    finally:
        store.close()


@pytest.mark.parametrize("policy", ["safe", "naive"])
@pytest.mark.parametrize("fault", [None, "duplicate", "delay", "drop", "reorder", "conflicting-digest"])
def test_the_process_agent_gets_the_scripted_agents_verdicts_under_each_fault(policy, fault):
    faults = [fault] if fault else []
    scripted, process = _run(policy, faults), _run(policy, faults, agents={"researcher": AGENT})
    try:
        assert _verdicts(process) == _verdicts(scripted)
        if fault:  # the fault was done to the run with the process in it, too
            assert [e.data["fault"] for e in process.events_of_type("fault_injected")] == [fault]
    finally:
        scripted.close()
        process.close()


NODE = shutil.which("node")
JS_AGENT = [NODE or "node", str(ROOT / "data" / "agents" / "researcher.js")]


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize("policy", ["safe", "naive"])
@pytest.mark.parametrize("fault", [None, "duplicate", pytest.param("drop", marks=pytest.mark.slow),
                                   pytest.param("conflicting-digest", marks=pytest.mark.slow)])
def test_the_node_agent_playing_both_workers_gets_the_scripted_verdicts(policy, fault):
    faults = [fault] if fault else []
    scripted, process = _run(policy, faults), _run(policy, faults, agents={"researcher": JS_AGENT, "writer": JS_AGENT})
    try:
        assert _verdicts(process) == _verdicts(scripted)
        assert process.events_of_type("agent_output_refused") == [] and process.events_of_type("agent_stopped") == []
        senders = {m["sender"] for m in process.messages() if m["message_id"].startswith(("Researcher-", "Writer-"))}
        assert senders == {"researcher", "writer"}
    finally:
        scripted.close()
        process.close()


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_node_agent_s_run_is_byte_identical_from_its_seed(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    for db in (a, b):
        _run(agents={"researcher": JS_AGENT, "writer": JS_AGENT}, db=db).close()
    assert a.read_bytes() == b.read_bytes()


def test_both_workers_as_processes_hold_every_invariant_under_safe():
    store = _run(agents={"researcher": AGENT, "writer": AGENT})
    try:
        assert all(r.ok for r in check(store))
        assert summarize(store)["tasks_by_state"] == {"succeeded": 2}
    finally:
        store.close()


@pytest.mark.parametrize("fault", ["crash", "zombie"])
def test_a_crash_kills_the_process_and_its_next_generation_starts_with_a_new_init(fault):
    store = _run(faults=[fault], agents={"researcher": AGENT})
    try:
        mine = [m["message_id"] for m in store.messages() if m["sender"] == "researcher"]
        # generation 1 started T-1 and died; generation 2 (ids from 2001) took the new attempt to its end
        assert mine[0] == "Researcher-1001" and any(m.startswith("Researcher-2") for m in mine)
        assert not any(m.startswith("Researcher-1") for m in mine[1:])
        # the transport stamped each with the generation that sent it
        assert [m["sender_generation"] for m in store.messages() if m["sender"] == "researcher"] == [1, 2, 2, 2]
        assert summarize(store)["tasks_by_state"] == {"succeeded": 2}
        assert all(r.ok for r in check(store))
        assert [e.data["fault"] for e in store.events_of_type("fault_injected")] == [fault]
        assert any(e.type == "lease_expired" for e in store.events())
    finally:
        store.close()


def test_the_same_seed_gives_a_byte_identical_database_with_a_deterministic_agent(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    for db in (a, b):
        _run(faults=["duplicate"], agents={"researcher": AGENT}, db=db).close()
    assert a.read_bytes() == b.read_bytes()
    other = tmp_path / "c.db"
    _run(faults=["duplicate"], agents={"researcher": AGENT}, db=other, seed=7).close()
    assert other.read_bytes() != a.read_bytes()  # (the seed reaches the agent: its products differ)


# ---------------------------------------------------------------- bad output, recorded as what it is


def test_bad_lines_are_recorded_refused_and_the_run_goes_on(tmp_path):
    cmd = _agent_script(tmp_path, "noisy", """
agent = None
for text in sys.stdin:
    line = json.loads(text)
    if line['type'] == 'init':
        agent = Agent(line)
        out('this is not json')
        out([1, 2])
        out({'wire': 2, 'type': 'done'})
        out({'wire': 1, 'type': 'shout'})
        out({'wire': 1, 'type': 'send'})
        out({'wire': 1, 'type': 'send', 'envelope': {'message_id': 'X-1'}})
        out({'wire': 1, 'type': 'artifact', 'task_id': 'T-1', 'kind': 'k', 'ref': 'sha256:' + '0' * 64, 'content': {}})
    elif line['type'] == 'tick':
        agent.tick(line)
        for o in agent.out:
            o = json.loads(o)
            if o['type'] == 'send' and o['envelope']['type'] == 'task_started':
                spoof = dict(o['envelope'], sender='writer', message_id='Spoof-1')
                out({'wire': 1, 'type': 'send', 'envelope': spoof})
                bad = dict(o['envelope'], payload_digest='sha256:' + '1' * 64, message_id='Bad-1')
                out({'wire': 1, 'type': 'send', 'envelope': bad})
            out(o)
        agent.out = []
    else:
        agent.deliver(line)
    out(DONE)
    sys.stdout.flush()
""")
    store = _run(agents={"researcher": cmd})
    try:
        refused = [(e.data["code"], e.data["generation"]) for e in store.events_of_type("agent_output_refused")]
        codes = [c for c, _g in refused]
        assert codes[:7] == ["E_WIRE_NOT_JSON", "E_WIRE_NOT_JSON", "E_WIRE_VERSION", "E_WIRE_TYPE", "E_WIRE_FIELD",
                             "E_MISSING_FIELD", "E_WIRE_REF"]
        assert codes[7:] == ["E_WIRE_SENDER", "E_DIGEST_MISMATCH"]
        assert {g for _c, g in refused} == {1}
        # what was refused never reached the transport; what was right did, and the run ended as the scripted one
        ids = {m["message_id"] for m in store.messages()}
        assert not ids & {"X-1", "Spoof-1", "Bad-1"}
        assert summarize(store)["tasks_by_state"] == {"succeeded": 2}
        assert store.events_of_type("agent_stopped") == []
        line = store.events_of_type("agent_output_refused")[0].data["line"]
        assert line == "this is not json"
    finally:
        store.close()


def test_an_agent_that_exits_is_recorded_and_the_run_ends_cleanly(tmp_path):
    cmd = _agent_script(tmp_path, "quitter", """
for text in sys.stdin:
    line = json.loads(text)
    if line['type'] == 'deliver':
        sys.exit(3)
    out(DONE)
    sys.stdout.flush()
""")
    store = _run(agents={"researcher": cmd})
    try:
        stops = [e.data for e in store.events_of_type("agent_stopped")]
        assert [(s["code"], s["generation"]) for s in stops] == [("E_AGENT_EXITED", 1)]
        assert "exit status 3" in stops[0]["reason"]
        s = summarize(store)
        # T-1 was handed to the researcher, which died on it: it never started, and once T-2's gather deadline
        # passed the manager canceled it; T-2 never became due. The run ended as any run ends.
        assert s["tasks_by_state"] == {"canceled": 1}
        assert s["rounds"] > load_scenario("publish-report").settings.gather_ticks
    finally:
        store.close()


def test_a_silent_agent_is_stopped_at_the_deadline(tmp_path):
    cmd = _agent_script(tmp_path, "mute", """
for text in sys.stdin:
    line = json.loads(text)
    if line['type'] == 'tick' and line['round'] == 3:
        sys.stdin.read()  # reads on, says nothing more
    out(DONE)
    sys.stdout.flush()
""")
    store = _run(agents={"researcher": cmd}, agent_deadline=0.5)
    try:
        stops = [e.data for e in store.events_of_type("agent_stopped")]
        assert [(s["code"], s["generation"]) for s in stops] == [("E_AGENT_SILENT", 1)]
        assert "round 3" in stops[0]["reason"]
        assert [e.tick for e in store.events_of_type("agent_stopped")] == [3]
    finally:
        store.close()


def test_an_agent_that_writes_on_without_its_done_is_stopped(tmp_path):
    from sim.procagent import MAX_LINES

    cmd = _agent_script(tmp_path, "chatty", """
for text in sys.stdin:
    line = json.loads(text)
    if line['type'] == 'tick':
        while True:
            out('{"wire": 1, "type": "artifact"}')
    out(DONE)
    sys.stdout.flush()
""")
    store = _run(agents={"researcher": cmd})
    try:
        stops = [e.data for e in store.events_of_type("agent_stopped")]
        assert [(s["code"], s["generation"]) for s in stops] == [("E_AGENT_FLOOD", 1)]
        assert f"more than {MAX_LINES} lines" in stops[0]["reason"]
        refused = store.events_of_type("agent_output_refused")
        assert len(refused) == MAX_LINES + 1 and {e.data["code"] for e in refused} == {"E_WIRE_FIELD"}
    finally:
        store.close()


def test_the_cli_runs_a_process_agent_and_says_when_it_stopped(tmp_path, capsys):
    db = tmp_path / "r.db"
    code, out, err = run_cli(capsys, "run", "publish-report", "--policy", "safe", "--db", db,
                             "--agent", f"researcher={sys.executable} {REFERENCE}")
    assert code == 0, err
    assert f"agent researcher: {sys.executable} {REFERENCE}" in out
    code, out, err = run_cli(capsys, "check", "--db", db, "--json")
    assert code == 0 and all(r["ok"] for r in json.loads(out))
    quitter = _agent_script(tmp_path, "q", "sys.exit(4)\n")
    code, out, err = run_cli(capsys, "run", "publish-report", "--db", tmp_path / "q.db", "--json",
                             "--agent", "researcher=" + " ".join(quitter))
    assert code == 0, err
    rep = json.loads(out)["agents"]["researcher"]
    assert [s["code"] for s in rep["stopped"]] == ["E_AGENT_EXITED"] and "exit status 4" in rep["stopped"][0]["reason"]


@pytest.mark.parametrize("args,code", [
    (["--agent", "researcher"], "E_AGENT_OPTION"),
    (["--agent", "researcher="], "E_AGENT_OPTION"),
    (["--agent", "researcher=python3 'unclosed"], "E_AGENT_OPTION"),
    (["--agent", "manager=python3 x.py"], "E_AGENT_ROLE"),
    (["--agent", "researcher=/no/such/agent"], "E_AGENT_START"),
])
def test_a_bad_agent_option_is_one_line_and_nothing_is_written(tmp_path, capsys, args, code):
    db = tmp_path / "r.db"
    status, out, err = run_cli(capsys, "run", "publish-report", "--db", db, *args)
    assert status == 2 and err.startswith(f"error: {code}: ") and err.count("\n") == 1
    assert not db.exists() and list(tmp_path.iterdir()) == []


def test_a_shipped_agent_named_by_its_checkout_path_runs_from_any_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "run", "publish-report", "--db", "r.db", "--json",
                             "--agent", f"researcher={sys.executable} data/agents/researcher.py")
    assert code == 0, err
    s = json.loads(out)
    assert s["agents"]["researcher"]["stopped"] == [] and all(s["invariants"].values())
    assert s["agents"]["researcher"]["command"].endswith("data/agents/researcher.py")


def test_the_cli_s_default_deadline_is_the_engine_s():
    import inspect

    from sim.cli.run import run
    from sim.procagent import DEFAULT_DEADLINE

    assert inspect.signature(run).parameters["agent_deadline"].default.default == DEFAULT_DEADLINE


def test_parse_agent_option_splits_the_command_as_a_shell_would():
    assert parse_agent_option('researcher=python3 "my agent.py" --fast') == ("researcher", ["python3", "my agent.py", "--fast"])
    with pytest.raises(InputError):
        parse_agent_option("=python3 a.py")


# ---------------------------------------------------------------- the wire and its schema, both ways


def _recording_agent(tmp_path: Path) -> tuple[list[str], Path, Path]:
    """The reference agent, with every line it reads and writes kept in two files."""
    got, said = tmp_path / "got.jsonl", tmp_path / "said.jsonl"
    cmd = _agent_script(tmp_path, "recorder", f"""
import subprocess
child = subprocess.Popen([sys.executable, {str(REFERENCE)!r}], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
with open({str(got)!r}, 'w') as g, open({str(said)!r}, 'w') as s:
    for text in sys.stdin:
        g.write(text); g.flush()
        child.stdin.write(text); child.stdin.flush()
        while True:
            answer = child.stdout.readline()
            s.write(answer); s.flush()
            out(answer.rstrip('\\n'))
            if json.loads(answer)['type'] == 'done':
                break
        sys.stdout.flush()
""")
    return cmd, got, said


def test_every_line_of_a_run_is_valid_under_the_wire_schema_both_ways(tmp_path):
    cmd, got, said = _recording_agent(tmp_path)
    _run(faults=["duplicate"], agents={"researcher": cmd}).close()
    kit_lines = [json.loads(t) for t in got.read_text().splitlines()]
    agent_lines = [json.loads(t) for t in said.read_text().splitlines()]
    kit_schema = {**SCHEMA, "$ref": "#/$defs/kit_line"}
    agent_schema = {**SCHEMA, "$ref": "#/$defs/agent_line"}
    kit_schema.pop("oneOf"), agent_schema.pop("oneOf")
    for line in kit_lines:
        jsonschema.validate(line, kit_schema)
        with pytest.raises(jsonschema.ValidationError):  # what the kit writes is never an agent's line
            jsonschema.validate(line, agent_schema)
    for line in agent_lines:
        jsonschema.validate(line, agent_schema)
        assert wire.parse_agent_line(json.dumps(line)).type == line["type"]
    assert {ln["type"] for ln in kit_lines} == set(wire.KIT_TYPES)
    assert {ln["type"] for ln in agent_lines} == set(wire.AGENT_TYPES)
    init = kit_lines[0]
    assert (init["type"], init["role"], init["generation"], init["seed"], init["scenario"]) == \
        ("init", "researcher", 1, 0, "publish-report")
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


AGENT_SAMPLES = [
    {"wire": 1, "type": "done"},
    {"wire": 1, "type": "send", "envelope": {}},
    {"wire": 1, "type": "artifact", "task_id": "T-1", "kind": "draft", "ref": "sha256:x", "content": {"a": 1}},
    {"wire": 1, "type": "done", "extra": 1},
    {"wire": 2, "type": "done"},
    {"wire": True, "type": "done"},
    {"wire": "1", "type": "done"},
    {"type": "done"},
    {"wire": 1, "type": "init"},
    {"wire": 1, "type": "log", "text": "hi"},
    {"wire": 1, "type": "send"},
    {"wire": 1, "type": "send", "envelope": []},
    {"wire": 1, "type": "artifact", "task_id": "T-1", "kind": "draft", "ref": 5, "content": {}},
    {"wire": 1, "type": "artifact", "task_id": "T-1", "kind": "draft", "ref": "r"},
    [1],
    "done",
]


@pytest.mark.parametrize("sample", AGENT_SAMPLES, ids=[json.dumps(s)[:40] for s in AGENT_SAMPLES])
def test_the_parser_takes_exactly_the_agent_lines_the_schema_takes(sample):
    agent_schema = {k: v for k, v in SCHEMA.items() if k != "oneOf"} | {"$ref": "#/$defs/agent_line"}
    schema_ok = jsonschema.Draft202012Validator(agent_schema).is_valid(sample)
    try:
        wire.parse_agent_line(json.dumps(sample))
        parsed = True
    except wire.WireError:
        parsed = False
    assert parsed == schema_ok


def test_the_wire_doc_names_the_module_s_literals():
    doc = (ROOT / "docs" / "wire.md").read_text()
    for word in (*wire.KIT_TYPES, *wire.AGENT_TYPES, f"sim/{wire.SCHEMA_FILE}", "agent_output_refused", "agent_stopped",
                 "E_WIRE_NOT_JSON", "E_WIRE_VERSION", "E_WIRE_TYPE", "E_WIRE_FIELD", "E_WIRE_REF", "E_WIRE_SENDER",
                 "E_AGENT_EXITED", "E_AGENT_SILENT", "E_AGENT_FLOOD", "E_AGENT_START", "--agent-deadline", "data/agents/researcher.py"):
        assert f"`{word}`" in doc, word
    assert f'"wire": {wire.WIRE_VERSION}' in doc
    from sim.procagent import DEFAULT_DEADLINE, STARTUP

    assert f"(default {DEFAULT_DEADLINE:g})" in doc
    from sim.procagent import MAX_LINES

    assert f"more than {MAX_LINES} lines in answer to one line" in doc
    assert f"at least {STARTUP:g} seconds to answer its `init`" in " ".join(doc.split())
    assert f"cut at {wire.EXCERPT} characters" in " ".join(doc.split())
