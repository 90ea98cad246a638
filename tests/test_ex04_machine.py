"""Exercise 4's judges beyond the planted answers: the table they judge against is the shipped
task-v1's allowlist, every possible move belongs to exactly one rule, a malformed file is a failed
rule naming the parser's error (never a traceback), extra moves are named by the rule they break,
and the reproduce commands work as printed (one database per story, the reviewer's step spelled
out)."""

from pathlib import Path

import pytest

from sim.course.judges import machine as judges
from sim.machine import DEFAULT_MACHINE_PATH, default_rulebook

SOLUTION = Path(__file__).resolve().parent.parent / "solutions" / "04-transition-table" / "machine.toml"
STATIC = (judges.loads, judges.happy_path, judges.results_from_running, judges.retry_path, judges.human_answer,
          judges.freeze, judges.review, judges.cancel, judges.nothing_more)
BY_RULE = {"happy-path": judges.happy_path, "results-from-running": judges.results_from_running,
           "retry-path": judges.retry_path, "human-answer": judges.human_answer, "freeze": judges.freeze,
           "review": judges.review, "cancel": judges.cancel, "nothing-more": judges.nothing_more}


def _table(tmp_path: Path, text: str) -> Path:
    d = tmp_path / "sub"
    d.mkdir(exist_ok=True)
    (d / "machine.toml").write_text(text, encoding="utf-8")
    return d


def _plus(row: str) -> str:
    return SOLUTION.read_text(encoding="utf-8") + "\n" + row


def test_the_judged_table_is_task_v1s_allowlist_and_task_v1_renamed_passes_every_static_judge(tmp_path):
    shipped = {(r.from_state.value, r.to_state.value): frozenset(r.roles) for r in default_rulebook().rules}
    assert shipped == {move: owners for move, (_rule, owners, _why) in judges.TABLE.items()}
    sub = _table(tmp_path, DEFAULT_MACHINE_PATH.read_text(encoding="utf-8").replace('"task-v1"', '"copy-v1"'))
    for judge in STATIC:
        assert judge(sub, {}).score == 1.0, judge.__name__


def test_every_possible_move_belongs_to_exactly_one_rule():
    seen = {}
    for name in judges.RULES:
        for move in judges._domain(name):
            assert move not in seen, (move, seen.get(move), name)
            seen[move] = name
    states = judges.STATES
    possible = {(a, b) for a in states for b in states
                if a != b and (a not in ("succeeded", "failed", "denied", "canceled") or b == "needs_review")}
    assert set(seen) == possible
    assert set(judges.TABLE) <= possible


@pytest.mark.parametrize("text, code", [
    ("", "E_MISSING_FIELD"),
    ("version = \n", "E_TOML"),
    ('version = "a"\nrule = [1]\n', "E_MACHINE"),
    ('version = "a"\n[[rule]]\nfrom = 3\nto = "ready"\nroles = ["manager"]\nreason = ""\n', "E_MACHINE"),
    ('version = "a"\n[[rule]]\nfrom = "pending"\nto = "ready"\nroles = "manager"\nreason = ""\n', "E_FIELD_TYPE"),
    ('version = "a"\n[[rule]]\nfrom = "pending"\nto = "ready"\nroles = ["boss"]\nreason = ""\n', "E_UNKNOWN_ROLE"),
    ('version = "a"\n[[rule]]\nfrom = "succeeded"\nto = "ready"\nroles = ["manager"]\nreason = ""\n', "E_TERMINAL_EXIT"),
])
def test_a_malformed_table_fails_every_rule_with_the_parsers_message(tmp_path, text, code):
    sub = _table(tmp_path, text)
    for judge in (*STATIC, judges.fault_runs):
        j = judge(sub, {"cases": [{"scenario": "publish-report", "faults": []}]})
        assert j.score == 0.0 and code in j.message, (judge.__name__, j.message)
        assert str(tmp_path) not in j.message
        assert j.reproduce == "protolab machine check {dir}/machine.toml"
        assert j.signature["symptoms"] == ["terminal-exit" if code == "E_TERMINAL_EXIT" else "load-error"]


def test_a_missing_or_unreadable_file_is_a_failed_rule(tmp_path):
    (tmp_path / "gone").mkdir()
    assert "E_FILE_MISSING" in judges.loads(tmp_path / "gone", {}).message
    (tmp_path / "dir" / "machine.toml").mkdir(parents=True)
    j = judges.loads(tmp_path / "dir", {})
    assert j.score == 0.0 and "cannot be read" in j.message


def test_a_version_too_long_to_be_a_name_is_refused_before_any_run(tmp_path):
    sub = _table(tmp_path, SOLUTION.read_text().replace('"student-v1"', '"' + "v" * 101 + '"'))
    for judge in (*STATIC, judges.fault_runs):
        j = judge(sub, {"cases": [{"scenario": "publish-report", "faults": []}]})
        assert j.score == 0.0 and "E_VERSION_TOO_LONG" in j.message and "v" * 101 not in j.message
    assert judges.loads(_table(tmp_path, SOLUTION.read_text().replace('"student-v1"', '"' + "v" * 100 + '"')), {}).score == 1.0


def test_the_shipped_name_is_refused_and_a_self_move_is_noted(tmp_path):
    j = judges.loads(_table(tmp_path, SOLUTION.read_text().replace('"student-v1"', '"task-v1"')), {})
    assert j.score == 0.0 and j.signature["symptoms"] == ["shipped-version"]
    j = judges.loads(_table(tmp_path, _plus('[[rule]]\nfrom = ["ready"]\nto = "ready"\nroles = ["manager"]\nreason = "x"\n')), {})
    assert j.score == 1.0 and "ready -> ready" in j.message


@pytest.mark.parametrize("row, rule, symptom", [
    ('from = "ready"\nto = "succeeded"\nroles = ["writer"]', "results-from-running", "result-without-lease"),
    ('from = "pending"\nto = "waiting_human"\nroles = ["writer"]', "results-from-running", "result-without-lease"),
    ('from = "retry_wait"\nto = "failed"\nroles = ["manager"]', "results-from-running", "result-without-lease"),
    ('from = "retry_wait"\nto = "running"\nroles = ["researcher"]', "nothing-more", "restart-without-reassign"),
    ('from = "waiting_human"\nto = "running"\nroles = ["writer"]', "nothing-more", "answer-restarts"),
    ('from = "running"\nto = "ready"\nroles = ["runtime"]', "nothing-more", "retry-skips-wait"),
    ('from = "running"\nto = "pending"\nroles = ["manager"]', "nothing-more", "back-to-pending"),
    ('from = "pending"\nto = "running"\nroles = ["researcher"]', "nothing-more", "start-without-assign"),
    ('from = "running"\nto = "succeeded"\nroles = ["manager"]', "happy-path", "happy-other-role"),
    ('from = "retry_wait"\nto = "ready"\nroles = ["researcher"]', "retry-path", "retry-other-role"),
    ('from = "waiting_human"\nto = "ready"\nroles = ["writer"]', "human-answer", "answer-other-role"),
    ('from = "needs_review"\nto = "running"\nroles = ["reviewer"]', "review", "review-elsewhere"),
    ('from = "*nonterminal"\nto = "canceled"\nroles = ["manager"]', "review", "manager-cancels-frozen"),
    ('from = "ready"\nto = "canceled"\nroles = ["runtime"]', "cancel", "runtime-cancels"),
    ('from = "*"\nto = "needs_review"\nroles = ["reviewer"]', "freeze", "agent-freezes"),
])
def test_an_extra_move_or_role_fails_exactly_the_rule_it_breaks_with_its_symptom(tmp_path, row, rule, symptom):
    sub = _table(tmp_path, _plus(f"[[rule]]\n{row}\nreason = \"x\"\n"))
    for name, judge in BY_RULE.items():
        j = judge(sub, {})
        if name == rule:
            assert j.score == 0.0 and symptom in j.signature["symptoms"], (name, j.message)
            # the reproduce line judges that rule again, alone (a move the table adds shows nowhere else)
            assert f"rerun('machine.{rule.replace('-', '_')}'" in j.reproduce and j.reproduce.startswith(
                "protolab exercise try 4 {dir} -c ")
        else:
            assert j.score == 1.0, (name, j.message)


def test_a_review_the_table_refuses_fails_the_run_with_a_reconcile_command_on_the_storys_own_database(tmp_path):
    text = SOLUTION.read_text().replace('to = "canceled"\nroles = ["reviewer"]', 'to = "canceled"\nroles = ["runtime"]')
    sub = _table(tmp_path, text)
    j = judges.fault_runs(sub, {"cases": [{"scenario": "fan-out", "faults": ["conflicting-digest"]}]})
    assert j.score == 0.0 and "reviewer" in j.message
    assert "--db ex4-fan-out.db" in j.reproduce and "protolab reconcile T-1 --decision canceled --by reviewer" in j.reproduce
    assert {"review-refused", "run-needs-review"} <= set(j.signature["symptoms"])
    assert "needs_review -> canceled by the reviewer" in j.message
    assert judges.fault_runs(_table(tmp_path, SOLUTION.read_text()),
                             {"cases": [{"scenario": "fan-out", "faults": ["conflicting-digest"]}]}).score == 1.0


def test_a_run_names_the_move_the_story_needed_and_a_second_seed_is_in_the_reproduce_command(tmp_path):
    text = SOLUTION.read_text().replace('roles = ["researcher", "writer", "runtime"]', 'roles = ["researcher", "writer"]')
    j = judges.fault_runs(_table(tmp_path, text), {"cases": [{"scenario": "publish-report", "faults": ["crash"], "seed": 1}]})
    assert j.score == 0.0 and "running -> retry_wait by the runtime" in j.message
    assert "run-needs-retry-path" in j.signature["symptoms"]
    assert "rerun('machine.fault_runs', {'cases': [{'scenario': 'publish-report', 'faults': ['crash'], 'seed': 1" \
        in j.reproduce  # that run judged again, alone, seed and all
    assert j.grid and j.grid[0]["ok"] is False
