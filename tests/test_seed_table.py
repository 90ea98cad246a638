"""The seeds win (issue 41, item 5): the seed's state machine, written out here from the seed's own
text with the course's choice of roles, is what the shipped task-v1 allows move for move and gets
full marks in exercise 4; a row beyond the seed is the kit's, marked so in the machine files and in
``protolab machine show``, allowed in exercise 4 only as the kit's optional row and never required;
a real extra door still loses its rule."""

import json
import tomllib
from pathlib import Path

import pytest

from sim.course.catalog import get_exercise
from sim.course.evaluate import evaluate
from sim.errors import MachineError
from sim.machine import SEED_MOVES, TaskState, default_rulebook, load_rulebook, move_source, parse_rulebook

from conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent
EX = get_exercise(4)

#: The seed (message-protocols-and-shared-state, "A state machine is safer than free text"), line by
#: line, as a machine file: who makes each move is the course's choice (exercises/04's README).
SEED_TABLE = '''
version = "seed-v1"
description = "the seed's state machine, written out from its text"

# pending -> ready -> running -> succeeded
[[rule]]
from = "pending"
to = "ready"
roles = ["manager"]
reason = "assigned"

[[rule]]
from = "ready"
to = "running"
roles = ["researcher", "writer"]
reason = "started"

[[rule]]
from = "running"
to = "succeeded"
roles = ["researcher", "writer"]
reason = "succeeded"

# |-> retry_wait -> ready
[[rule]]
from = "running"
to = "retry_wait"
roles = ["researcher", "writer", "runtime"]
reason = "waits to retry"

[[rule]]
from = "retry_wait"
to = "ready"
roles = ["manager"]
reason = "reassigned"

# |-> failed, |-> denied, |-> waiting_human
[[rule]]
from = "running"
to = "failed"
roles = ["researcher", "writer"]
reason = "failed"

[[rule]]
from = "running"
to = "denied"
roles = ["researcher", "writer"]
reason = "denied"

[[rule]]
from = "running"
to = "waiting_human"
roles = ["researcher", "writer"]
reason = "waits for a person"

# any state -> needs_review: one logical intent has conflicting result or receipt
[[rule]]
from = "*"
to = "needs_review"
roles = ["runtime"]
reason = "frozen"

# needs_review -> ready or canceled: an authorized person decides from retained evidence
[[rule]]
from = "needs_review"
to = "ready"
roles = ["reviewer"]
reason = "released"

[[rule]]
from = "needs_review"
to = "canceled"
roles = ["reviewer"]
reason = "canceled by the reviewer"

# any nonterminal state -> canceled (a frozen task is the person's to cancel: the row above)
[[rule]]
from = ["pending", "ready", "running", "retry_wait", "waiting_human"]
to = "canceled"
roles = ["manager", "reviewer"]
reason = "canceled"
'''

KIT_ANSWER = '\n[[rule]]\nfrom = "waiting_human"\nto = "ready"\nroles = ["{role}"]\nreason = "a person answered"\nkit = true\n'


def _allow(rb) -> dict:
    return {(r.from_state.value, r.to_state.value): frozenset(r.roles) for r in rb.rules}


def _folder(tmp_path: Path, text: str, name: str = "sub") -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "machine.toml").write_text(text, encoding="utf-8")
    return d


def test_the_seeds_table_written_from_its_text_is_the_kits_seed_moves_and_task_v1_move_for_move():
    seed = parse_rulebook(tomllib.loads(SEED_TABLE))
    moves = {(r.from_state, r.to_state) for r in seed.rules}
    assert moves == set(SEED_MOVES)
    # task-v1 is the seed's table with the course's roles: the same moves, the same owners
    assert _allow(default_rulebook()) == _allow(seed)
    assert all(move_source(r.from_state, r.to_state) == "seed" for r in default_rulebook().rules)


def test_exercise_4_gives_the_seeds_table_full_marks_hidden_cases_included(tmp_path):
    rep = evaluate(EX, _folder(tmp_path, SEED_TABLE), hidden=True, isolate=False)
    assert not rep.grader_errors
    assert rep.score == rep.max_score == 100, [(r.name, r.message) for r in rep.results if not r.passed]


def test_the_kits_optional_answer_row_is_allowed_never_required_and_a_reviewers_only(tmp_path):
    with_it = evaluate(EX, _folder(tmp_path, SEED_TABLE + KIT_ANSWER.format(role="reviewer"), "kit"), hidden=True,
                       isolate=False)
    assert with_it.score == 100, [(r.name, r.message) for r in with_it.results if not r.passed]
    said = next(r.message for r in with_it.results if r.name == "human-answer")
    assert "the kit's optional row waiting_human -> ready (not the seed's)" in said, said
    plain = evaluate(EX, _folder(tmp_path, SEED_TABLE, "plain"), hidden=False, isolate=False)
    assert "your table has the kit's" not in next(r.message for r in plain.results if r.name == "human-answer")
    by_manager = evaluate(EX, _folder(tmp_path, SEED_TABLE + KIT_ANSWER.format(role="manager"), "manager"),
                          hidden=True, isolate=False)
    failed = {r.name: r for r in by_manager.results if not r.passed}
    assert set(failed) == {"human-answer"}
    assert "the kit's optional row" in failed["human-answer"].message
    assert "answer-other-role" in failed["human-answer"].signature["symptoms"]


@pytest.mark.parametrize("row, rule", [
    # the shipped task-v2's row beyond the seed: a waiting task straight back to running
    ('from = "waiting_human"\nto = "running"\nroles = ["researcher", "writer"]', "nothing-more"),
    ('from = "retry_wait"\nto = "running"\nroles = ["researcher"]', "nothing-more"),
    ('from = "running"\nto = "ready"\nroles = ["runtime"]', "nothing-more"),
    ('from = "ready"\nto = "succeeded"\nroles = ["writer"]', "results-from-running"),
])
def test_a_real_extra_door_still_loses_its_rule_even_marked_as_the_kits(tmp_path, row, rule):
    text = SEED_TABLE + KIT_ANSWER.format(role="reviewer") + f"\n[[rule]]\n{row}\nreason = \"x\"\nkit = true\n"
    rep = evaluate(EX, _folder(tmp_path, text), hidden=False, isolate=False)
    failed = [r.name for r in rep.results if not r.passed]
    assert failed == [rule], failed


def test_kit_true_is_refused_on_a_move_of_the_seed():
    text = SEED_TABLE.replace('reason = "assigned"', 'reason = "assigned"\nkit = true')
    with pytest.raises(MachineError, match="move of the seed's state machine"):
        parse_rulebook(tomllib.loads(text))
    with pytest.raises(MachineError, match="'kit' must be true or false"):
        parse_rulebook(tomllib.loads(SEED_TABLE.replace('reason = "assigned"', 'reason = "assigned"\nkit = "yes"')))


@pytest.mark.parametrize("path", [ROOT / "sim" / "machines" / "task-v1.toml", *sorted((ROOT / "data" / "machines").glob("*.toml"))],
                         ids=lambda p: p.name)
def test_every_shipped_machine_marks_exactly_its_rows_beyond_the_seed_as_the_kits(path):
    rb = load_rulebook(path)  # refuses kit = true on a seed move
    rows = tomllib.loads(path.read_text(encoding="utf-8"))["rule"]
    for row in rows:
        froms = [row["from"]] if isinstance(row["from"], str) and not row["from"].startswith("*") else row["from"]
        if isinstance(froms, str):
            continue  # a wildcard: its moves are the seed's (freeze, cancel), checked through the parsed table
        beyond = [f for f in froms if (TaskState(f), TaskState(row["to"])) not in SEED_MOVES]
        assert bool(beyond) == row.get("kit", False), (path.name, row)
    assert {(r.from_state, r.to_state) for r in rb.rules if move_source(r.from_state, r.to_state) == "kit"} == {
        (TaskState(row["from"]), TaskState(row["to"])) for row in rows if row.get("kit")}


def test_machine_show_marks_each_move_as_the_seeds_or_the_kits(tmp_path, capsys):
    code, out, _ = run_cli(capsys, "machine", "show", "--json")
    assert code == 0
    shown = json.loads(out)
    assert {r["source"] for r in shown["rules"]} == {"seed"}
    db = tmp_path / "v2.db"
    assert run_cli(capsys, "init", "--db", db)[0] == 0
    assert run_cli(capsys, "machine", "load", ROOT / "data" / "machines" / "task-v2.toml", "--db", db)[0] == 0
    code, out, _ = run_cli(capsys, "machine", "show", "--db", db, "--version", "task-v2", "--json")
    kit = {(r["from_state"], r["to_state"]) for r in json.loads(out)["rules"] if r["source"] == "kit"}
    assert kit == {("waiting_human", "ready"), ("waiting_human", "running")}
    code, out, _ = run_cli(capsys, "machine", "show", "--db", db, "--version", "task-v2")
    assert code == 0
    lines = [" ".join(line.split()) for line in out.splitlines()]
    assert any(line.startswith("task-v2 waiting_human running researcher,") and " kit " in line for line in lines), out
    assert any(line.startswith("task-v2 running succeeded") and " seed " in line for line in lines), out
    assert "kit, a move beyond it" in " ".join(out.split()) and "2 here" in out
