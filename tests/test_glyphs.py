"""Every character the TUI draws renders where it is served (issue 45: the pause glyph was a box in
Chromium). The served page draws with Roboto Mono (textual-serve's font, served with the page), then the
system's monospace font, which on Debian is DejaVu Sans Mono (fonts-dejavu-core: fontconfig, which
Chromium needs, depends on it); xterm.js draws box-drawing and block characters itself. A character none
of those has is a box on the projector: use another."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf")
#: drawn by xterm.js itself (its customGlyphs): box drawing, block elements
DRAWN_BY_XTERM = (range(0x2500, 0x2580), range(0x2580, 0x25A0))


def _strings(path: Path):
    """The text of every string literal in a module (where what is drawn is written)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value


def _drawn() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in sorted((ROOT / "sim" / "tui").glob("*.py")):
        for text in _strings(path):
            for ch in text:
                if ord(ch) > 0x7E:
                    out.setdefault(ch, set()).add(path.name)
    return out


def test_every_character_the_tui_draws_is_in_a_font_of_the_served_page():
    ttlib = pytest.importorskip("fontTools.ttLib", reason="fonttools is in the test extra: pip install -e '.[test]'")
    textual_serve = pytest.importorskip("textual_serve")
    roboto = Path(textual_serve.__file__).parent / "static" / "fonts" / "RobotoMono-VariableFont_wght.ttf"
    assert roboto.is_file(), roboto
    have = set(ttlib.TTFont(roboto).getBestCmap())
    if not DEJAVU.is_file():
        pytest.skip(f"no {DEJAVU} here (Debian's fonts-dejavu-core), the system font the page falls back to")
    have |= set(ttlib.TTFont(DEJAVU).getBestCmap())
    drawn = _drawn()
    assert "→" in drawn and "…" in drawn  # (the walk reads the TUI's strings)
    missing = {ch: sorted(files) for ch, files in drawn.items()
               if ord(ch) not in have and not any(ord(ch) in r for r in DRAWN_BY_XTERM)
               and not ch.isspace() and ord(ch) not in (0xFE0F, 0x200D)}
    assert missing == {}, {f"{ch} U+{ord(ch):04X}": files for ch, files in missing.items()}
