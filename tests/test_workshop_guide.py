"""The presenter's guide (docs/workshop.md, issue 45 part 1) says only what the runs do: each row of its
table of faults, each caption it quotes, each count, id and move it names, each key it tells the presenter
to press, is read here and held to a real run of the workshop (sim.tui.story.plan over both policies) and
to the workshop's own bindings. Its shell blocks are run by tests/test_docs_run.py like every document's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("textual")

from sim.invariants import INVARIANTS
from sim.live import LiveRun
from sim.scenario import load_scenario
from sim.tui.story import moments, plan, story_faults
from sim.tui.workshop import WorkshopApp

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "workshop.md"
TEXT = GUIDE.read_text(encoding="utf-8")
_PLANS: dict = {}


def _story(fault: str):
    if (fault,) not in _PLANS:
        sc = load_scenario("publish-report")
        _PLANS[(fault,)] = plan(lambda side, f: LiveRun(sc, policy=side, faults=list(f)), (fault,))
    return _PLANS[(fault,)]


def _section(title: str) -> str:
    start = TEXT.index(f"## {title}")
    nxt = TEXT.find("\n## ", start + 3)
    return TEXT[start:nxt if nxt >= 0 else len(TEXT)]


def _fault_rows() -> list[list[str]]:
    table = _section("The faults worth showing")
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in table.splitlines()
            if line.startswith("| `")]
    assert rows, "the guide's table of faults is gone"
    return rows


def _move(text: str):
    m = re.search(r"(T-\d+) (\w+) → (\w+)", text)
    return m.groups() if m else None


@pytest.mark.parametrize("row", _fault_rows(), ids=lambda r: r[0].strip("`"))
def test_each_fault_row_is_what_its_runs_do(row):
    fault, question, culprit, naive_broke, safe_did = row
    story = _story(fault.strip("`"))
    assert story is not None, f"{fault}: the naive side breaks nothing, no story to show"
    assert question.endswith("?")
    m = re.fullmatch(r"(\S+), a (\w+)(?: (\w+))? for (T-\d+), while (T-\d+) is (\w+)", culprit)
    assert m, culprit
    n = story.naive
    assert m.groups() == (n.message_id, n.type, n.status, n.task_id, n.task_id, n.state_before)
    assert naive_broke.split(":")[0] == story.broken[0]
    w = story.witness
    if _move(naive_broke):
        assert _move(naive_broke) == (w["task_id"], w["old_state"], w["new_state"])
    s = story.safe
    head, _, rest = safe_did.partition(": ")
    assert head.split() == [s.decision] + ([s.code] if s.code else [])
    if "stays" in rest:
        assert rest == f"{s.task_id} stays {s.state_before}" and s.state_after == s.state_before
    else:
        assert _move(rest) == (s.task_id, s.state_before, s.state_after)


def test_the_ten_minute_script_names_what_the_late_failure_run_does():
    part = _section("The 10-minute script")
    story = _story("late-failure")
    ms = moments(story, ("late-failure",))
    captions = {c for m in ms for c in (m.naive_caption, m.safe_caption)}
    quoted = [q for q in re.findall(r"`([^`]+)`", part) if ": " in q]
    assert len(quoted) >= 4
    for q in quoted:  # every caption it quotes is one the run shows
        assert q in captions, q
    # ids and invariants: only the story's
    assert set(re.findall(r"\b[MAT]-\d+\b", part)) <= {story.naive.message_id, story.naive.task_id}
    named = set(re.findall(r"\b[A-Z]+(?:_[A-Z]+)+\b", part))
    assert named and named <= set(story.broken)
    # counts
    (before,) = re.findall(r"(\d+) deliveries on each side", part)
    assert int(before) == story.naive.steps == story.safe.steps
    assert re.search(r"(\w+) messages in, T-\d+ has (\w+)", part).group(2) == story.naive.state_before
    (naive_total, safe_total) = re.search(r"(\d+) deliveries on the naive side and (\d+) on the safe side", part).groups()
    assert (int(naive_total), int(safe_total)) == (story.naive_total, story.safe_total)
    # the decisions it names on each side
    assert f"`{story.naive.decision}` on the left, `{story.safe.decision}` on the right" in part
    assert f"went from {story.witness['old_state']} back to {story.witness['new_state']}" in part


def test_the_words_for_numbers_match():
    words = {"Four": 4}
    story = _story("late-failure")
    n = re.search(r"(\w+) messages in", TEXT).group(1)
    assert words[n] == story.naive.steps


def test_every_story_step_it_names_exists():
    count = len(moments(_story("late-failure"), ("late-failure",)))
    for k, total in re.findall(r"story (\d+)/(\d+)", TEXT):
        assert int(total) == count and 1 <= int(k) <= count


def test_every_invariant_it_names_is_the_kits():
    names = set(INVARIANTS)
    for name in re.findall(r"\b[A-Z]+(?:_[A-Z]+)+\b", TEXT):
        if not name.startswith("E_"):
            assert name in names, name


def test_every_key_it_names_is_a_workshop_key():
    keys = {b.key for b in WorkshopApp.BINDINGS} | {k for b in WorkshopApp.BINDINGS for k in b.key.split(",")}
    display = {"?": "question_mark"}
    for k in re.findall(r"<kbd>([^<]+)</kbd>", TEXT):
        assert display.get(k, k) in keys, k


def test_f_goes_where_the_guide_says():
    frm, to = re.search(r"From `([a-z-]+)`, <kbd>f</kbd> goes to `([a-z-]+)`", TEXT).groups()
    assert story_faults(lambda f: _story(f[0]), (frm,)) == (to,)


def test_the_thirty_minute_script_shows_the_faults_of_the_table():
    part = _section("The 30-minute script")
    table = {r[0].strip("`") for r in _fault_rows()}
    for fault in re.findall(r"--fault ([a-z-]+)", part):
        assert fault in table
    assert "needs_review" in part and _story("conflicting-digest").safe.state_after == "needs_review"
    assert "published twice" in part and _story("duplicate").witness["times_committed"] == 2
    assert "as a duplicate" in part and _story("duplicate").safe.decision == "duplicate"
    assert _story("crash").safe.code == "E_STALE_LEASE" and "stale lease" in part


def test_the_readme_links_the_guide():
    assert "docs/workshop.md" in (ROOT / "README.md").read_text(encoding="utf-8")
