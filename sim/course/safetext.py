"""Student text made safe to show: what a submission wrote reaches feedback only cleaned and capped.

A judge's message quotes what the student's code answered, the output carries what it printed, a
witness holds its values, and a folder or zip name is whatever the student called it. In every
output (``--explain``, the table, ``--json``, the CSV gradebook, Gradescope's results.json) each such
piece of text is:

* **cleaned**: control characters (C0 and C1, but a newline where a text has lines) and the Unicode
  bidirectional and invisible formatting characters (U+202E RIGHT-TO-LEFT OVERRIDE, the isolates,
  zero-width marks) are replaced by ``?``, so nothing a student wrote reorders, hides or rewrites a
  line in a terminal or a spreadsheet;
* **capped**: at :data:`CAP` characters per line (about 2 KB) and a few lines' worth in all, the cut
  said with how much there was, so a 6 MB answer never appears whole anywhere.

A CSV cell that a spreadsheet would read as a formula (one starting with ``=``, ``+``, ``-``, ``@``, a
tab or a carriage return) gets a leading apostrophe (OWASP, "CSV Injection"); numeric columns are
written as numbers and never touched.
"""

from __future__ import annotations

import re

__all__ = ["CAP", "TOTAL_CAP", "clean_text", "clean_name", "clean_value", "csv_cell", "clean_result"]

#: The most characters of one line of student text shown (about 2 KB).
CAP = 2048
#: The most characters of one whole text (a message with a table under it).
TOTAL_CAP = 4 * CAP

# C0 controls but tab and newline, DEL, C1 controls; bidi embeddings, overrides and isolates; the
# zero-width and invisible formatting characters; the line and paragraph separators; the BOM.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]")
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _cut(text: str, limit: int, of: int | None = None) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"… (cut: {of if of is not None else len(text):,} characters in all)"


def clean_text(text, *, lines: bool = True, limit: int = CAP, total: int = TOTAL_CAP):
    """``text`` with unsafe characters replaced by ``?`` and each line cut at ``limit`` characters, the
    whole at ``total``; with ``lines=False`` newlines and tabs are unsafe too (a name, a table cell).
    Anything but a string comes back as it is."""
    if not isinstance(text, str):
        return text
    n = len(text)
    huge = n > total + limit
    if huge:  # cut before cleaning, so that cleaning stays cheap; the notes say how long it was
        text = text[: total + limit]
    of = n if huge else None
    if lines:
        text = text.replace("\r\n", "\n")  # a line break written the Windows way is a line break
    text = _UNSAFE.sub("?", text)
    if not lines:
        return _cut(text.replace("\n", "?").replace("\t", " "), limit, of)
    parts = text.split("\n")
    if any(len(line) > limit for line in parts):
        text = "\n".join(_cut(line, limit, of if huge and len(parts) == 1 else None) for line in parts)
    return _cut(text, total, of)


def clean_name(name) -> str:
    """A student's folder or zip name as shown: one line, cleaned, capped."""
    return clean_text(str(name), lines=False, limit=200)


def clean_value(value, depth: int = 0):
    """A JSON-like value (a witness, a signature) with every string cleaned and capped, lists and
    objects cut at 50 items and 8 levels."""
    if isinstance(value, str):
        return clean_text(value)
    if depth >= 8:
        return "… (nested deeper: cut)"
    if isinstance(value, dict):
        items = list(value.items())
        out = {clean_text(str(k), lines=False, limit=200): clean_value(v, depth + 1) for k, v in items[:50]}
        if len(items) > 50:
            out["…"] = f"cut: {len(items)} entries in all"
        return out
    if isinstance(value, (list, tuple)):
        out = [clean_value(v, depth + 1) for v in value[:50]]
        if len(value) > 50:
            out.append(f"… (cut: {len(value)} items in all)")
        return out
    return value


def csv_cell(value):
    """A text cell of a CSV that no spreadsheet reads as a formula: cleaned to one line, and a leading
    apostrophe when it starts with = + - @, a tab or a carriage return. Numbers pass as they are."""
    if not isinstance(value, str):
        return value
    text = clean_text(value, lines=False, limit=CAP)
    return "'" + text if text.startswith(_FORMULA) else text


def clean_result(r):
    """A TestResult with every piece of text that may hold student text cleaned and capped."""
    from dataclasses import replace

    att = r.attachment
    if att:
        att = {k: (clean_text(v, limit=TOTAL_CAP, total=TOTAL_CAP * 2) if isinstance(v, str) else v)
               for k, v in att.items()}
    return replace(r, message=clean_text(r.message), hint=clean_text(r.hint), reproduce=clean_text(r.reproduce),
                   output=clean_text(r.output), witness=clean_value(r.witness), signature=clean_value(r.signature),
                   grader_error=clean_text(r.grader_error), attachment=att)
