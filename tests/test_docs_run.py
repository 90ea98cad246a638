"""Every command the kit shows works (issue 41): each shell block of README.md, docs/, the labs' and
the exercises' READMEs, and the starters' command lines, run as a reader runs it (a fresh folder, the
installed protolab on PATH, no virtualenv activated) and judged by what its own text claims. The rules
(what is collected, where it runs, how a comment's claim is read, the not-run marker) are in
tests/docrun.py's docstring; ``python tests/docrun.py [DOC...]`` shows what it ran.

The quick loop reads every document (every block collected, every marker with a reason, the claims
read as the runner reads them) and runs the cheap commands of a few documents; the slow set runs
every command of every document, the TUI, servers and --watch with bounded checks, each exercise's
commands with the starter and with the model answer.
"""

from __future__ import annotations

import re

import pytest

from docrun import (NOT_RUN, ROOT, Command, all_blocks, blocks_of, claims, document_blocks, documents, files_written,
                    judge, kind, run_document, setting, split_comment, starter_blocks)


def _ids(doc, variant):
    return f"{doc.relative_to(ROOT)}[{variant}]"


def _report(ran) -> str:
    lines = []
    for r in ran:
        if r.problems:
            lines.append(f"{r.command.where} [{r.variant}] {r.command.cmd}")
            lines += [f"    {p}" for p in r.problems]
            lines += ["    | " + x for x in r.out.strip().splitlines()[-12:]]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ reading


def test_a_comment_is_split_off_outside_quotes_only():
    assert split_comment("protolab check --db a.db   # exit 1: why") == ("protolab check --db a.db", "exit 1: why")
    assert split_comment('protolab exercise try 2 -c "print(1)  # not a comment"') == \
        ('protolab exercise try 2 -c "print(1)  # not a comment"', "")
    assert split_comment("protolab run --fault a#b") == ("protolab run --fault a#b", "")


def test_claims_are_read_per_variant_with_names_breaks_and_holds():
    text = ("exit 1: the naive consumer breaks rules; EFFECT_AT_MOST_ONCE breaks on the starter, with M-3; "
            "EFFECT_AT_MOST_ONCE holds on a right answer; message_sent_again appears")
    starter, right = claims(text, "starter"), claims(text, "solution")
    assert starter.exit == 1 and right.exit == 1
    assert starter.broken == ["EFFECT_AT_MOST_ONCE"] and starter.holding == [] and "M-3" in starter.names
    assert right.holding == ["EFFECT_AT_MOST_ONCE"] and right.broken == [] and "M-3" not in right.names
    assert "message_sent_again" in starter.names and "message_sent_again" in right.names
    both = claims("the public tests: exit 1 on the starter; exit 0 on a right answer", "starter")
    assert both.exit == 1 and claims("the public tests: exit 1 on the starter; exit 0 on a right answer",
                                     "solution").exit == 0
    assert claims("a clean run, with your design", "starter").exit == 0  # no claim: exit 0


def test_files_a_command_writes_are_read_from_its_options():
    assert files_written("protolab trace export --db a.db -o run.json") == ["run.json"]
    assert files_written("protolab run --db x.db && protolab check --db x.db") == ["x.db"]
    assert files_written("protolab grade 1 class1 --csv grades.csv") == ["grades.csv"]
    assert files_written("protolab messages --db x.db") == []


def test_commands_that_do_not_end_by_themselves_get_a_bounded_run():
    assert kind("protolab demo") == "tui" and kind("protolab tui fan-out --seed 3 --fault crash") == "tui"
    assert kind("protolab demo regression --serve") == "serve" and kind("protolab browse --db p.db") == "serve"
    assert kind("protolab exercise check 1 --watch") == "watch" and kind("protolab lab start 3") == "tui"
    assert kind("protolab lab check 3") == "run" and kind("protolab run && protolab check") == "run"


def test_a_command_is_judged_by_its_text(tmp_path):
    cmd = Command("protolab check --db a.db", "exit 1; NO_LOST_UPDATE breaks", "x:1")
    assert judge(cmd, "starter", 1, " NO_LOST_UPDATE   BROKEN  witness", tmp_path) == []
    assert judge(cmd, "starter", 0, " NO_LOST_UPDATE   holds", tmp_path) == [
        "exit status 0, the text says 1", "the text says NO_LOST_UPDATE breaks; no line shows it BROKEN"]
    wrote = Command("protolab trace export --db a.db -o run.json", "", "x:2")
    assert judge(wrote, "starter", 0, "", tmp_path) == ["it should have written run.json"]
    refused = Command("protolab run --fault resend", "", "x:3")
    assert "exit 2 without a line 'error: CODE: ...'" in judge(refused, "starter", 2, "Traceback (most recent", tmp_path)


def test_every_shell_block_is_collected_and_every_not_run_marker_gives_its_reason(capsys):
    blocks = all_blocks()
    docs = {b.doc for b in blocks}
    # every document that shows a shell block is read, and each exercise's starter names its commands
    for d in documents():
        text = d.read_text(encoding="utf-8")
        shells = re.findall(r"(?m)^\s*```(?:bash|sh|shell|console)\s*$", text)
        assert len(shells) <= len([b for b in blocks_of(d)]), d
        if shells:
            assert d in docs, d
    for ex in sorted((ROOT / "exercises").iterdir()):
        if ex.is_dir() and any(ex.glob("*.py")):
            assert starter_blocks(ex), f"{ex.name}'s starter names no command to try"
    # a marker sits right above a shell block and says why that block cannot run headless
    markers = 0
    for d in documents():
        text = d.read_text(encoding="utf-8")
        for m in NOT_RUN.finditer(text):
            markers += 1
            assert len(" ".join(m.group(1).split())) >= 20, f"{d}: a not-run marker without its reason: {m.group(0)}"
            after = text[m.end():].lstrip("\n")
            assert after.startswith("```"), f"{d}: a not-run marker that is not right above a block: {m.group(0)}"
    marked = [b for b in blocks if b.not_run is not None]
    assert len(marked) == markers
    commands = sum(len(b.commands) for b in blocks)
    with capsys.disabled():
        print(f"\ndocuments: {len(blocks)} shell blocks, {commands} commands; {len(marked)} blocks not run:")
        for b in marked:
            print(f"  {b.doc.relative_to(ROOT)}:{b.lineno}: {b.not_run}")
    # the blocks not run are the two that build a virtualenv (tests/test_readme.py runs them, slow set)
    assert all("virtualenv" in b.not_run for b in marked), [b.not_run for b in marked]


# ------------------------------------------------------------------------------------------ running

#: Documents whose cheap commands the quick loop runs (about two seconds: a trace validated, drawn and
#: mutated, as a student does). The slow set runs every command of every document.
QUICK = [("exercises/06-conversation-trace/README.md", "solution")]


@pytest.mark.parametrize("doc,variant", [(ROOT / d, v) for d, v in QUICK], ids=[f"{d}[{v}]" for d, v in QUICK])
def test_the_cheap_commands_of_a_document_do_what_their_text_says(doc, variant, tmp_path):
    ran = run_document(doc, document_blocks(doc), variant, tmp_path, quick=True)
    assert [r for r in ran if r.how != "skipped"], "nothing ran"
    assert not any(r.problems for r in ran), _report(ran)


def _every_document():
    for doc in documents():
        bl = document_blocks(doc)
        if not bl:
            continue
        _where, variants = setting(doc)
        for v in variants:
            yield pytest.param(doc, v, id=_ids(doc, v))


@pytest.mark.slow
@pytest.mark.parametrize("doc,variant", list(_every_document()))
def test_every_command_of_every_document_does_what_its_text_says(doc, variant, tmp_path):
    ran = run_document(doc, document_blocks(doc), variant, tmp_path)
    assert not any(r.problems for r in ran), _report(ran)
