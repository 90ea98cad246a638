"""Exercise 4's judges beyond the planted answers: the seed's table they judge against is the
shipped task-v1, a malformed file is a failed test naming the parser's error (never a traceback),
extra moves are named by the property they break, and the reproduce commands work as printed
(one database per story, the reviewer's step spelled out)."""

from pathlib import Path

import pytest

from sim.course.judges import machine as judges
from sim.machine import DEFAULT_MACHINE_PATH, default_rulebook

SOLUTION = Path(__file__).resolve().parent.parent / "solutions" / "04-transition-table" / "machine.toml"
STATIC = (judges.loads, judges.freeze_and_review, judges.cancel_and_retry, judges.seed_moves)


def _table(tmp_path: Path, text: str) -> Path:
    d = tmp_path / "sub"
    d.mkdir(exist_ok=True)
    (d / "machine.toml").write_text(text, encoding="utf-8")
    return d


def _plus(row: str) -> str:
    return SOLUTION.read_text(encoding="utf-8") + "\n" + row


def test_the_owned_moves_are_task_v1s_and_task_v1_renamed_passes_every_static_judge(tmp_path):
    for r in default_rulebook().rules:
        a, b = r.from_state.value, r.to_state.value
        if b in ("needs_review", "canceled") or a == "needs_review":
            continue
        assert judges._OWNED[(a, b)][0] == frozenset(r.roles), (a, b)
    assert len(judges._OWNED) == sum(1 for r in default_rulebook().rules
                                     if r.to_state.value not in ("needs_review", "canceled")
                                     and r.from_state.value != "needs_review")
    sub = _table(tmp_path, DEFAULT_MACHINE_PATH.read_text(encoding="utf-8").replace('"task-v1"', '"copy-v1"'))
    for judge in STATIC:
        assert judge(sub, {}).score == 1.0, judge.__name__


@pytest.mark.parametrize("text, code", [
    ("", "E_MISSING_FIELD"),
    ("version = \n", "E_TOML"),
    ('version = "a"\nrule = [1]\n', "E_MACHINE"),
    ('version = "a"\n[[rule]]\nfrom = 3\nto = "ready"\nroles = ["manager"]\nreason = ""\n', "E_MACHINE"),
    ('version = "a"\n[[rule]]\nfrom = "pending"\nto = "ready"\nroles = "manager"\nreason = ""\n', "E_FIELD_TYPE"),
    ('version = "a"\n[[rule]]\nfrom = "pending"\nto = "ready"\nroles = ["boss"]\nreason = ""\n', "E_UNKNOWN_ROLE"),
    ('version = "a"\n[[rule]]\nfrom = "succeeded"\nto = "ready"\nroles = ["manager"]\nreason = ""\n', "E_TERMINAL_EXIT"),
])
def test_a_malformed_table_fails_every_test_with_the_parsers_message(tmp_path, text, code):
    sub = _table(tmp_path, text)
    for judge in (*STATIC, judges.fault_runs, judges.cancel_in_run):
        j = judge(sub, {"faults": [[]]})
        assert j.score == 0.0 and code in j.message, (judge.__name__, j.message)
        assert str(tmp_path) not in j.message
        assert j.reproduce == "protolab machine check {dir}/machine.toml"


def test_a_missing_or_unreadable_file_is_a_failed_test(tmp_path):
    (tmp_path / "gone").mkdir()
    assert "E_FILE_MISSING" in judges.loads(tmp_path / "gone", {}).message
    (tmp_path / "dir" / "machine.toml").mkdir(parents=True)
    j = judges.loads(tmp_path / "dir", {})
    assert j.score == 0.0 and "cannot be read" in j.message


def test_the_shipped_name_is_refused_and_a_self_move_is_noted(tmp_path):
    assert judges.loads(_table(tmp_path, SOLUTION.read_text().replace('"student-v1"', '"task-v1"')), {}).score == 0.0
    j = judges.loads(_table(tmp_path, _plus('[[rule]]\nfrom = ["ready"]\nto = "ready"\nroles = ["manager"]\nreason = "x"\n')), {})
    assert j.score == 1.0 and "ready -> ready" in j.message


@pytest.mark.parametrize("row, prop", [
    ('from = "ready"\nto = "succeeded"\nroles = ["writer"]', "results only from a running attempt"),
    ('from = "pending"\nto = "waiting_human"\nroles = ["writer"]', "results only from a running attempt"),
    ('from = "retry_wait"\nto = "running"\nroles = ["researcher"]', "work starts only from ready"),
    ('from = "running"\nto = "ready"\nroles = ["researcher"]', "ready only by assignment"),
    ('from = "running"\nto = "pending"\nroles = ["manager"]', "nothing goes back to pending"),
    ('from = "running"\nto = "succeeded"\nroles = ["manager"]', "each move by its owner"),
])
def test_an_extra_move_or_role_is_named_by_the_property_it_breaks(tmp_path, row, prop):
    j = judges.seed_moves(_table(tmp_path, _plus(f"[[rule]]\n{row}\nreason = \"x\"\n")), {})
    assert j.score < 1.0 and prop in j.message
    assert any(w["property"].startswith(prop) for w in j.witness)
    assert "protolab machine show --db ex4.db --version student-v1" in j.reproduce


def test_a_review_the_table_refuses_fails_the_run_with_a_reconcile_command_on_the_storys_own_database(tmp_path):
    text = SOLUTION.read_text().replace('to = "canceled"\nroles = ["reviewer"]', 'to = "canceled"\nroles = ["runtime"]')
    sub = _table(tmp_path, text)
    j = judges.fault_runs(sub, {"scenarios": ["fan-out"], "faults": [["conflicting-digest"]]})
    assert j.score == 0.0 and "reviewer" in j.message
    assert "--db ex4-fan-out.db" in j.reproduce and "protolab reconcile T-1 --decision canceled --by reviewer" in j.reproduce
    assert judges.fault_runs(_table(tmp_path, SOLUTION.read_text()),
                             {"scenarios": ["fan-out"], "faults": [["conflicting-digest"]]}).score == 1.0
