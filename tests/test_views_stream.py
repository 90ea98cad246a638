"""'state' and 'messages' stream every view from the file as they print it (issue 31: every command
flat): the same bytes as the whole lists gave, and no more memory for three times the run."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tracemalloc

import pytest

from conftest import run_cli
from sim.runner import run_scenario
from sim.scenario import load_scenario
from sim.store import Store


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """A naive run with a conflict, a late failure and a duplicate: effects, artifacts, intents."""
    path = tmp_path_factory.mktemp("views") / "run.db"
    run_scenario(load_scenario("publish-report"), seed=2, policy="naive",
                 faults=["late-failure", "conflicting-digest", "duplicate"], db=str(path)).close()
    return path


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory):
    """A safe run whose conflict froze T-1, then a reviewer's decision: an approval."""
    path = tmp_path_factory.mktemp("views") / "reviewed.db"
    run_scenario(load_scenario("publish-report"), policy="safe", faults=["conflicting-digest"], db=str(path)).close()
    return path


def _state_as_lists(store: Store, task: str | None = None) -> dict:
    from sim.machine import A2A_STATE, TaskState

    tasks = [dict(t) for t in store.tasks()]
    for t in tasks:
        t["trusted"] = bool(t["trusted"])
        t["a2a_state"] = A2A_STATE[TaskState(t["state"])]
    data = {"tasks": tasks, "transitions": store.transitions(), "intents": store.intents(),
            "effects": store.effects(), "artifacts": store.artifacts(), "approvals": store.approvals(),
            "budget": store.budget_ledger()}
    if task:
        data = {k: [r for r in v if r.get("task_id") == task] for k, v in data.items()}
    return {**data, "machine_versions": store.machine_versions(), "current_machine": store.current_machine,
            "state_digest": store.state_digest()}


@pytest.mark.parametrize("which, task", [("db", None), ("db", "T-2"), ("reviewed", None), ("reviewed", "T-1")])
def test_streamed_state_and_messages_are_the_bytes_the_whole_lists_give(request, capsys, which, task):
    db = request.getfixturevalue(which)
    with Store.open(db, readonly=True) as s:
        approved = bool(s.approvals())
    if which == "reviewed" and not approved:
        code, _, err = run_cli(capsys, "reconcile", "T-1", "--decision", "canceled", "--by", "reviewer",
                               "--evidence", "M-3", "--evidence", "M-4", "--db", db)
        assert code == 0, err
    extra = ["--task", task] if task else []
    with Store.open(db, readonly=True) as s:
        state = _state_as_lists(s, task)
        msgs = [m for m in s.messages() if task is None or m["task_id"] == task]
        dels = [d for d in s.deliveries() if task is None or d["task_id"] == task]
    # between the two runs every section has rows
    assert state["approvals"] if which == "reviewed" else (state["effects"] and state["artifacts"])
    code, out, _ = run_cli(capsys, "state", "--db", db, "--json", *extra)
    assert code == 0 and out == json.dumps(state, indent=2, ensure_ascii=False) + "\n"
    code, out, _ = run_cli(capsys, "messages", "--db", db, "--json", *extra)
    assert code == 0 and out == json.dumps({"messages": msgs, "deliveries": dels}, indent=2, ensure_ascii=False) + "\n"


def test_an_empty_view_and_an_unknown_task_read_as_before(tmp_path, capsys):
    empty = tmp_path / "empty.db"
    assert run_cli(capsys, "init", "--db", empty)[0] == 0
    code, out, _ = run_cli(capsys, "messages", "--db", empty, "--json")
    assert code == 0 and out == '{\n  "messages": [],\n  "deliveries": []\n}\n'
    code, out, err = run_cli(capsys, "state", "--db", empty, "--task", "T-9")
    assert code == 2 and err.startswith("error: E_UNKNOWN_TASK: no task T-9") and "none yet" in err


def test_a_long_view_is_streamed_with_its_count_and_every_row(db, capsys, monkeypatch):
    import sim.output as common  # where the views read it

    monkeypatch.setattr(common, "TABLE_ROWS", 3)
    with Store.open(db, readonly=True) as s:
        n_msgs, n_dels = len(s.messages()), len(s.deliveries())
        ids = [d["delivery_id"] for d in s.deliveries()]
    code, out, _ = run_cli(capsys, "messages", "--db", db)
    assert code == 0
    assert f"Messages (envelopes, one row per message_id) ({n_msgs})" in out and f"Deliveries (one row per attempt) ({n_dels})" in out
    body = out[out.index("Deliveries (one row per attempt)"):].splitlines()[3:]
    assert [int(line.split()[0]) for line in body if line.strip()] == ids


def _stress(tasks: int):
    sc = load_scenario("stress")
    return dataclasses.replace(sc, stress=dataclasses.replace(sc.stress, tasks=tasks))


def _peak(args: list[str]) -> int:
    """Peak Python memory of one command, in this process, its output thrown away."""
    from sim.cli import main

    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        tracemalloc.start()
        try:
            main(args)
        except SystemExit as e:
            assert not e.code
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


@pytest.fixture(scope="module")
def sized(tmp_path_factory):
    out = {}
    for tasks in (500, 1500):
        path = tmp_path_factory.mktemp("sized") / f"s{tasks}.db"
        run_scenario(_stress(tasks), policy="safe", faults=["crash", "duplicate"], seed=1, db=str(path),
                     strict_faults=False).close()
        out[tasks] = path
    return out


@pytest.mark.slow
@pytest.mark.parametrize("command", [["state", "--json"], ["state"], ["messages", "--json"], ["messages"]],
                         ids=lambda c: " ".join(c))
def test_a_view_holds_no_more_for_three_times_the_run(sized, command):
    small = _peak([*command, "--db", str(sized[500])])
    big = _peak([*command, "--db", str(sized[1500])])
    # three times the rows, about the same memory (whole lists grew with the run: about 3x)
    assert big < small * 1.3, (small, big)


def test_a_view_the_store_does_not_have_is_refused_by_name(db):
    from sim.errors import StoreError

    with Store.open(db, readonly=True) as s:
        for call in (lambda: list(s.iter_view("secrets")), lambda: s.count_view("secrets")):
            with pytest.raises(StoreError) as e:
                call()
            assert e.value.code == "E_UNKNOWN_VIEW" and "tasks" in str(e.value)


@pytest.mark.parametrize("command, label", [(["state", "--json"], "writing the state"),
                                            (["messages", "--json"], "writing the message log"),
                                            (["events", "--json"], "writing the event log")],
                         ids=lambda c: c if isinstance(c, str) else " ".join(c))
def test_a_long_output_to_a_file_shows_a_progress_bar_on_the_terminal_and_the_same_bytes(db, capsys, monkeypatch,
                                                                                          command, label):
    """Issue 31: a command that takes over a second shows progress. Its rows go to a file (stdout not a
    terminal) while the bar is drawn on stderr (a terminal): the file gets exactly the bytes it got
    without the bar, and the bar is not printed into it."""
    import io
    import sys

    import sim.output as common  # where the views read it

    code, plain, _ = run_cli(capsys, *command, "--db", db)
    assert code == 0

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    term = Terminal()
    monkeypatch.setattr(common, "PROGRESS_ROWS", 0)  # the run is small: every output counts as long
    monkeypatch.setattr(sys, "stderr", term)
    monkeypatch.setenv("TERM", "xterm")
    code, out, _ = run_cli(capsys, *command, "--db", db)
    assert code == 0 and out == plain
    assert label in term.getvalue() and label not in out


def test_a_streamed_table_prints_each_cell_as_the_drawn_table_shows_it(capsys):
    """Only a cell holding a bracket is read as markup (a styled state prints its word); any other cell is
    printed exactly, an emoji code included (the drawn table's console replaces none)."""
    from sim.cli import common

    rows = [["[green]succeeded[/]", "T-1:smile:x", "a\nb"], ["[bold red]NO[/]", ":smile:", 7], [None, "plain", "[/]oops"]]
    common._stream_table("t", ["state", "key", "note"], iter(rows))
    lines = capsys.readouterr().out.splitlines()
    assert lines[3].split() == ["succeeded", "T-1:smile:x", "a", "b"]
    assert lines[4].split() == ["NO", ":smile:", "7"]
    assert lines[5].split() == ["plain", "[/]oops"]  # not markup after all: as written
