"""The README's fault table and list of invariants are written from the registries (``python -m sim.docs``,
between marker comments): a fault or an invariant added to its registry and not to the README fails here,
with the command that rewrites the sections."""

from __future__ import annotations

import subprocess
from pathlib import Path
import sys

import pytest

from sim import docs, faults, invariants


def test_the_readme_sections_are_what_the_registries_give():
    behind = docs.stale()
    assert not behind, f"README.md's {', '.join(behind)} section(s) differ from the registries: run `{docs.COMMAND}`"


def test_the_table_has_a_row_per_fault_and_the_list_names_every_invariant_and_their_count():
    text = docs.README.read_text(encoding="utf-8")
    table = docs._marked("faults").search(text).group(2)
    assert [line.split("|")[1].strip(" `") for line in table.splitlines()[2:]] == list(faults.FAULTS)
    listed = docs._marked("invariants").search(text).group(2)
    assert all(name in listed for name in invariants.INVARIANTS)
    assert f"all {docs.number_words(len(invariants.INVARIANTS))} in every shipped scenario" in listed


def test_the_generator_rewrites_a_stale_section_and_leaves_the_rest(tmp_path):
    text = docs.README.read_text(encoding="utf-8")
    stale = text.replace("| `duplicate` | delivers the publishing result twice |", "| `duplicate` | old words |")
    assert stale != text and docs.render(stale) == text
    with pytest.raises(ValueError, match="BEGIN faults"):
        docs.render("no markers here")


def test_the_check_command_says_how_to_regenerate(tmp_path, monkeypatch):
    stale = tmp_path / "README.md"
    stale.write_text(docs.README.read_text(encoding="utf-8").replace("twenty-", "thirty-"), encoding="utf-8")
    monkeypatch.setattr(docs, "README", stale)
    assert docs.stale(stale) == ["invariants"]
    assert docs.main(["--check"]) == 1
    assert docs.main([]) == 0 and docs.stale(stale) == []
    r = subprocess.run([sys.executable, "-m", "sim.docs", "--check"], capture_output=True, text=True,
                       cwd=Path(__file__).resolve().parent.parent)
    assert r.returncode == 0, r.stderr  # the real README is current (from the checkout, installed or editable)
    assert docs.main(["--bogus"]) == 2
    monkeypatch.setattr(docs, "README", tmp_path / "none" / "README.md")
    assert docs.main(["--check"]) == 2  # one line, error: E_NOT_FOUND (no README where it looked)


@pytest.mark.parametrize("n, words", [(0, "zero"), (7, "seven"), (20, "twenty"), (23, "twenty-three"), (99, "ninety-nine")])
def test_counts_are_written_out(n, words):
    assert docs.number_words(n) == words
