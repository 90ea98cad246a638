"""Feedback to hand back: one self-contained file per student and assignment (HTML, or Markdown).

:func:`render` is a pure function over one student's report as a grading run writes it (an element of
``protolab grade N DIR --json``: :meth:`sim.course.evaluate.Report.to_dict` with the student's name),
so that anything holding such a report (the CLI here, a gradebook later) can render it. The file says
the score, each rule's result and points, and for a broken rule what broke, the command that shows it
and the hint: the same student-safe text ``--explain`` and Gradescope's results.json give
(:func:`sim.course.gradescope.feedback`), never the model answer. A test whose visibility is
``hidden`` (the instructor's alone, in Gradescope's terms) shows its points only.

Every piece of text is cleaned and capped again (:mod:`sim.course.safetext`: a results file is input,
whoever wrote it) and escaped for the format: HTML-escaped in HTML (no script, no link, no external
resource: the page has inline CSS only), and in a fenced code block in Markdown, so nothing a student
wrote becomes markup. The instructor's paths in messages (``/home/me/class/alice/design.py``) are
written as the student's own folder (``01-envelope-design/design.py``), as results.json does.

:func:`write_feedback` writes ``OUT/STUDENT/NN-slug.html`` (or ``.md``) for each report.

**From the gradebook** (:func:`from_gradebook`, ``protolab feedback export --gradebook FILE``): the
course gradebook is the one place grades live, so the page for each student and assignment is made
from it: the latest attempt (the one that counts), or the newest override, which the page says is
the grade and why, beside what the attempt scored; the late penalty; a submission not on the
roster, by the name it was recorded under. The hints and the commands that show what broke are
*stored* with each exercise attempt (the ``feedback`` column; :func:`handback` says what is kept),
not derived later from the exercise's hint table by rule id: a hint is chosen by the signature of
what broke (:func:`sim.course.hints.choose_hint`: which symptom, which fault, which invariant), and
the command names that run's seed and case, neither of which a rule id alone gives back, and the
hint tables may change after grading (a page must say what was judged then). What is stored is the
text the student already gets (results.json, ``--explain``), cleaned and capped again, without the
instructor's fields (witnesses, grids, the grader's own errors). A lab attempt, or an attempt
recorded before the gradebook kept this (schema 1), has no stored details: its page gives each
part's points and reason from the breakdown, and says so.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from ..errors import InputError
from .safetext import clean_name, clean_text

__all__ = ["render", "write_feedback", "read_results", "FORMATS", "file_name", "handback", "from_gradebook",
           "write_pages"]

FORMATS = ("html", "md")
#: What the student's code printed, kept (its end).
OUTPUT_CHARS = 1500
#: The most a results file may weigh (a class of hundreds is a few MB).
RESULTS_CAP = 64 * 1024 * 1024
#: What a stored attempt's feedback may weigh (its tests' texts are capped first; past this the
#: printed output and attachments are dropped).
HANDBACK_CAP = 256 * 1024
_HANDBACK_TEST_KEYS = ("name", "title", "hidden", "points", "max_points", "passed", "message", "hint", "reproduce",
                       "visibility", "cap", "core")


def _get(obj, key: str, default=None):
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _num(x) -> str:
    try:
        return f"{float(x):g}"
    except (TypeError, ValueError):
        return "?"


def _text(value, *, lines: bool = True) -> str:
    return clean_text(value if isinstance(value, str) else "" if value is None else str(value), lines=lines)


def _assignment(report: dict, assignment) -> dict:
    number = _get(assignment, "number", report.get("exercise"))
    title = _get(assignment, "title", "") or report.get("slug", "")
    dirname = _get(assignment, "dirname", "") or (f"{int(number):02d}-{report.get('slug')}" if isinstance(number, int)
                                                  and report.get("slug") else "")
    kind = _get(assignment, "kind", "") if isinstance(assignment, dict) else ""
    return {"number": number, "title": _text(title, lines=False), "dirname": _text(dirname, lines=False),
            "kind": "Lab" if kind == "lab" else "Exercise"}


def _shown(text: str, submission: str, dirname: str) -> str:
    """The instructor's path of the submission written as the student's own folder."""
    if submission and dirname and submission not in (".", "/"):
        text = text.replace(submission.rstrip("/") + "/", dirname + "/").replace(submission, dirname)
    return text


def _tests(report: dict, a: dict) -> list[dict]:
    sub = str(report.get("submission") or "")
    out = []
    for t in report.get("tests") or ():
        if not isinstance(t, dict):
            continue
        withheld = t.get("visibility") == "hidden"
        passed = bool(t.get("passed"))

        def field(key: str) -> str:
            return "" if withheld or passed else _shown(_text(t.get(key)), sub, a["dirname"])  # noqa: B023 (called within this iteration)

        att = t.get("attachment") if isinstance(t.get("attachment"), dict) else None
        printed = _text(t.get("output")).strip() if not withheld else ""
        out.append({
            "name": _text(t.get("name"), lines=False), "title": _text(t.get("title"), lines=False),
            "points": _num(t.get("points")), "max": _num(t.get("max_points")), "passed": passed,
            "hidden": bool(t.get("hidden")), "withheld": withheld, "core": bool(t.get("core")),
            "cap": t.get("cap") if isinstance(t.get("cap"), (int, float)) else None,
            "grader_error": bool(t.get("grader_error")),
            "message": "" if withheld else _shown(_text(t.get("message")), sub, a["dirname"]),
            "reproduce": field("reproduce"), "hint": field("hint"),
            "attachment": None if withheld or passed or not att else {
                "name": _text(att.get("name"), lines=False), "text": _shown(_text(att.get("text")), sub, a["dirname"])},
            "printed": printed[-OUTPUT_CHARS:], "printed_cut": len(printed) > OUTPUT_CHARS,
        })
    return out


def _facts(report: dict, assignment) -> dict:
    a = _assignment(report, assignment)
    tests = _tests(report, a)
    capped = report.get("capped") if isinstance(report.get("capped"), dict) else None
    return {
        "student": clean_name(report.get("student") or report.get("submission") or "student"),
        "assignment": a, "tests": tests, "score": _num(report.get("score")), "max": _num(report.get("max_score")),
        "problem": _shown(_text(report.get("problem")), str(report.get("submission") or ""), a["dirname"]),
        "capped": None if not capped else {"percent": _num(capped.get("cap_percent")),
                                           "rules": [_text(x, lines=False) for x in capped.get("rules") or ()]},
        "public_only": bool(report.get("public_only")),
        "passed": sum(t["passed"] for t in tests),
        "term": _term_facts(report.get("term")),
    }


def _term_facts(term) -> dict | None:
    """What the gradebook adds to a page (:func:`from_gradebook`): the attempt, the late penalty, the
    override, whether the submission is on the roster, whether the details were kept."""
    if not isinstance(term, dict):
        return None
    o = term.get("override") if isinstance(term.get("override"), dict) else None
    late = term.get("late_days") if isinstance(term.get("late_days"), int) else 0
    return {"attempt": _num(term.get("attempt")).replace("?", ""), "graded_at": _text(term.get("graded_at"), lines=False),
            "late_days": late, "penalty": _num(term.get("penalty_percent")), "raw": _num(term.get("raw_score")),
            "attempt_score": _num(term.get("attempt_score")), "details": bool(term.get("details")),
            "zero_reason": _text(term.get("zero_reason"), lines=False),
            "on_roster": term.get("on_roster", True) is not False,
            "submitted_as": clean_name(term.get("submitted_as") or ""),
            "override": None if o is None else {"score": _num(o.get("score")), "comment": _text(o.get("comment"),
                                                                                                  lines=False),
                                                "by": clean_name(o.get("by") or ""),
                                                "at": _text(o.get("at"), lines=False)}}


def _term_lines(f: dict) -> list[str]:
    """The gradebook's sentences of a page, as plain text (each format escapes them its way)."""
    t = f["term"]
    if t is None:
        return []
    out = []
    if t["override"]:
        o = t["override"]
        out.append(f"This grade was set by your instructor ({o['by'] or 'unknown'}, {o['at']}): {o['comment']}. "
                   f"Attempt {t['attempt']}, below, scored {t['attempt_score']} / {f['max']}.")
    else:
        out.append(f"From attempt {t['attempt']} (graded {t['graded_at']}), the one that counts.")
    if t["late_days"]:
        out.append(f"Submitted late by {t['late_days']} day(s): -{t['penalty']}% of {t['raw']}.")
    if not t["on_roster"]:
        out.append(f"This submission ({t['submitted_as']}) is not matched to anyone on the course roster yet; tell "
                   "your instructor who you are.")
    if not t["details"]:
        out.append("What broke, the commands and the hints were not kept for this attempt; each part's points "
                   "and reason are below.")
    if f["score"] in ("0", "0.0") and t["zero_reason"] and not f["problem"]:
        out.append(f"Why 0: {t['zero_reason']}")
    return out


def render(report: dict, assignment=None, fmt: str = "html") -> str:
    """One student's feedback file as text: ``report`` is one element of ``grade --json`` (or
    :meth:`Report.to_dict` with a ``student`` key); ``assignment`` an Exercise or a mapping with
    ``number``, ``title`` and ``dirname`` (default: what the report names)."""
    if fmt not in FORMATS:
        raise InputError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}", code="E_USAGE")
    f = _facts(report, assignment)
    return _html(f) if fmt == "html" else _markdown(f)


# ------------------------------------------------------------------------------------------ HTML

_CSS = """
body{font:15px/1.45 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1d1d1f}
h1{font-size:1.4rem;margin-bottom:.2rem} .sub{color:#555;margin-top:0}
.score{font-size:1.3rem;font-weight:600;margin:1rem 0} table{border-collapse:collapse;width:100%;margin:1rem 0}
th,td{text-align:left;padding:.3rem .5rem;border-bottom:1px solid #ddd;vertical-align:top}
.pass{color:#0a7d28;font-weight:600} .fail{color:#b3261e;font-weight:600} .ng{color:#8a6100;font-weight:600}
section.rule{border:1px solid #ddd;border-radius:6px;padding:.6rem 1rem;margin:1rem 0}
pre{background:#f5f5f7;padding:.5rem;overflow-x:auto;white-space:pre-wrap;word-break:break-word}
.tag{font-size:.8rem;color:#555;border:1px solid #ccc;border-radius:4px;padding:0 .3rem;margin-left:.3rem}
""".strip()


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _mark(t: dict) -> str:
    if t["grader_error"]:
        return '<span class="ng">not graded</span>'
    return '<span class="pass">passed</span>' if t["passed"] else '<span class="fail">failed</span>'


def _tags(t: dict) -> str:
    tags = [x for x in ("hidden test" if t["hidden"] else "", "core rule" if t["core"] else "",
                        f"breaking it caps the total at {t['cap']:g}%" if t["cap"] is not None else "") if x]
    return "".join(f'<span class="tag">{_e(x)}</span>' for x in tags)


def _html(f: dict) -> str:
    a = f["assignment"]
    title = f"{a['kind']} {a['number']}: {a['title']}" if a["title"] else f"{a['kind']} {a['number']}"
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
           f"<title>{_e(title)}: feedback for {_e(f['student'])}</title>", f"<style>{_CSS}</style></head><body>",
           f"<h1>{_e(title)}</h1>", f'<p class="sub">Feedback for <strong>{_e(f["student"])}</strong></p>',
           f'<p class="score" id="score">Score: {_e(f["score"])} / {_e(f["max"])}</p>']
    out += [f'<p class="term">{_e(line)}</p>' for line in _term_lines(f)]
    if f["problem"]:
        out.append(f"<p><strong>Your submission could not be graded:</strong></p><pre>{_e(f['problem'])}</pre>"
                   "<p>Every rule scores 0; fix this and submit again.</p>")
    if f["capped"]:
        out.append(f"<p>The score is capped at {_e(f['capped']['percent'])}% of the total because "
                   f"{_e(', '.join(f['capped']['rules']))} broke.</p>")
    if f["public_only"]:
        out.append("<p>These are the public tests only; hidden tests may change the grade.</p>")
    out.append(f"<p>{f['passed']} of {len(f['tests'])} rules pass.</p>")
    out.append('<table id="rules"><thead><tr><th>rule</th><th>result</th><th>points</th><th>what it checks</th>'
               "</tr></thead><tbody>")
    for t in f["tests"]:
        out.append(f"<tr><td><code>{_e(t['name'])}</code>{_tags(t)}</td><td>{_mark(t)}</td>"
                   f"<td>{_e(t['points'])} / {_e(t['max'])}</td><td>{_e(t['title'])}</td></tr>")
    out.append("</tbody></table>")
    broken = [t for t in f["tests"] if not t["passed"]]
    if broken:
        out.append("<h2>What broke</h2>")
    for t in broken:
        out.append(f'<section class="rule"><h3><code>{_e(t["name"])}</code> ({_e(t["points"])} / {_e(t["max"])})</h3>')
        if t["withheld"]:
            out.append("<p>The details of this test are kept by your instructor.</p></section>")
            continue
        if t["grader_error"]:
            out.append("<p>This test could not be graded (a fault of the grader, not yours); your instructor will "
                       "grade it again.</p></section>")
            continue
        out.append(f"<p>What broke:</p><pre>{_e(t['message'] or '(no reason given)')}</pre>")
        if t["reproduce"]:
            out.append(f"<p>To see it yourself, run in your exercise's folder:</p><pre>{_e(t['reproduce'])}</pre>")
        if t["hint"]:
            out.append(f"<p>Hint: {_e(t['hint'])}</p>")
        if t["attachment"]:
            out.append(f"<p>{_e(t['attachment']['name'])} (save it beside your files; the command above replays "
                       f"it):</p><pre>{_e(t['attachment']['text'])}</pre>")
        if t["printed"]:
            out.append(f"<p>Your code printed{' (the end of it)' if t['printed_cut'] else ''}:</p>"
                       f"<pre>{_e(t['printed'])}</pre>")
        out.append("</section>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


# -------------------------------------------------------------------------------------- Markdown

def _fence(text: str) -> str:
    """``text`` in a fenced code block whose fence no run of backticks in it can close."""
    run = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, run + 1)
    return f"{fence}text\n{text}\n{fence}"


def _md_inline(text: str) -> str:
    """A one-line text as Markdown that renders as the text: markup characters escaped."""
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|<>&~])", r"\\\1", text)


def _markdown(f: dict) -> str:
    a = f["assignment"]
    title = f"{a['kind']} {a['number']}: {a['title']}" if a["title"] else f"{a['kind']} {a['number']}"
    out = [f"# {_md_inline(title)}", "", f"Feedback for **{_md_inline(f['student'])}**", "",
           f"**Score: {f['score']} / {f['max']}**", ""]
    for line in _term_lines(f):
        out += [_md_inline(line), ""]
    if f["problem"]:
        out += ["Your submission could not be graded:", "", _fence(f["problem"]), "",
                "Every rule scores 0; fix this and submit again.", ""]
    if f["capped"]:
        out += [f"The score is capped at {f['capped']['percent']}% of the total because "
                f"{_md_inline(', '.join(f['capped']['rules']))} broke.", ""]
    if f["public_only"]:
        out += ["These are the public tests only; hidden tests may change the grade.", ""]
    out += [f"{f['passed']} of {len(f['tests'])} rules pass.", "", "| rule | result | points | what it checks |",
            "|---|---|---|---|"]
    for t in f["tests"]:
        res = "not graded" if t["grader_error"] else "passed" if t["passed"] else "FAILED"
        tags = ", ".join(x for x in ("hidden" if t["hidden"] else "", "core" if t["core"] else "") if x)
        out.append(f"| `{t['name'].replace('`', '')}`{' (' + tags + ')' if tags else ''} | {res} | "
                   f"{t['points']} / {t['max']} | {_md_inline(t['title'])} |")
    out.append("")
    broken = [t for t in f["tests"] if not t["passed"]]
    if broken:
        out += ["## What broke", ""]
    for t in broken:
        out += [f"### `{t['name'].replace('`', '')}` ({t['points']} / {t['max']})", ""]
        if t["withheld"]:
            out += ["The details of this test are kept by your instructor.", ""]
            continue
        if t["grader_error"]:
            out += ["This test could not be graded (a fault of the grader, not yours); your instructor will grade it "
                    "again.", ""]
            continue
        out += ["What broke:", "", _fence(t["message"] or "(no reason given)"), ""]
        if t["reproduce"]:
            out += ["To see it yourself, run in your exercise's folder:", "", _fence(t["reproduce"]), ""]
        if t["hint"]:
            out += ["Hint:", "", _fence(t["hint"]), ""]
        if t["attachment"]:
            out += [f"{_md_inline(t['attachment']['name'])} (save it beside your files; the command above replays it):",
                    "", _fence(t["attachment"]["text"]), ""]
        if t["printed"]:
            out += [f"Your code printed{' (the end of it)' if t['printed_cut'] else ''}:", "", _fence(t["printed"]), ""]
    return "\n".join(out).rstrip("\n") + "\n"


# ----------------------------------------------------------------------------------- files

def file_name(name: str, taken: set[str]) -> str:
    """A student's name as a folder name: letters, digits, ``.-_`` only, never ``.``/``..``, unique."""
    base = re.sub(r"[^A-Za-z0-9._-]", "_", clean_name(name))[:80].strip(".") or "student"
    slug, n = base, 1
    while slug.lower() in taken:
        n += 1
        slug = f"{base}~{n}"
    taken.add(slug.lower())
    return slug


def read_results(path: Path) -> list[dict]:
    """The reports of a results file: ``grade --json``'s list (or one report). E_RESULTS when it is not one."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path} is not a file; give the JSON 'protolab grade N DIR --json' printed",
                         code="E_FILE_MISSING" if not path.exists() else "E_RESULTS")
    if path.stat().st_size > RESULTS_CAP:
        raise InputError(f"{path} is over {RESULTS_CAP // (1024 * 1024)} MB, not a results file", code="E_RESULTS")
    try:
        data = json.loads(path.read_bytes().decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as e:
        raise InputError(f"{path} is not JSON ({e}); give what 'protolab grade N DIR --json' printed",
                         code="E_RESULTS") from None
    reports = data if isinstance(data, list) else [data]
    for i, r in enumerate(reports):
        if not isinstance(r, dict) or not isinstance(r.get("tests"), list) or "score" not in r or "exercise" not in r:
            raise InputError(f"{path}: entry {i + 1} is not a graded submission (no exercise, score and tests); give "
                             "what 'protolab grade N DIR --json' printed", code="E_RESULTS")
    if not reports:
        raise InputError(f"{path} holds no graded submissions", code="E_RESULTS")
    return reports


def write_pages(out: Path, pages: list[tuple[str, str, str]], *, reads=()) -> list[Path]:
    """Write each ``(folder, file name, text)`` as ``OUT/folder/file``, every file whole (beside its
    place, then renamed), none over one of ``reads`` (all are checked before the first is written)."""
    from ..files import check_output, written_whole

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out} is a file; the feedback goes in a folder", code="E_OUTPUT")
    plan = []
    for folder, name, text in pages:
        path = out / folder / name
        check_output(path, reads, option="--out")
        plan.append((path, text))
    written = []
    for path, text in plan:
        path.parent.mkdir(parents=True, exist_ok=True)
        with written_whole(path, code="E_OUTPUT", reads=reads, option="--out") as fh:
            fh.write(text)
        written.append(path)
    return written


def write_feedback(out: Path, reports: list[dict], *, fmt: str = "html", assignment=None, reads=()) -> list[Path]:
    """Write ``OUT/STUDENT/NN-slug.EXT`` for each report; returns the files written. Each file is
    written whole (beside its place, then renamed), never over one of ``reads``."""
    if fmt not in FORMATS:
        raise InputError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}", code="E_USAGE")
    taken: set[str] = set()
    pages = []
    for r in reports:
        a = _assignment(r, assignment)
        name = a["dirname"] or f"exercise-{a['number']}"
        name = re.sub(r"[^A-Za-z0-9._-]", "_", name).strip(".") or "exercise"
        pages.append((file_name(str(r.get("student") or r.get("submission") or "student"), taken), f"{name}.{fmt}",
                      render(r, assignment, fmt)))
    return write_pages(out, pages, reads=reads)


def handback(report: dict) -> dict:
    """What the gradebook keeps of one graded exercise submission (``Report.to_dict()``) for its
    feedback page: the score, the cap, whether hidden tests ran, why it could not be graded, and per
    test its name, title, points, result, visibility, and for a broken one the message, the command
    that shows it, the hint, the attachment and the end of what the code printed; each text cleaned and
    capped (:mod:`sim.course.safetext`). Never the witnesses, the grids or the grader's own errors
    (only that there was one). Over :data:`HANDBACK_CAP` as JSON: outputs and attachments dropped."""
    tests = []
    for t in report.get("tests") or ():
        if not isinstance(t, dict):
            continue
        kept = {k: t.get(k) for k in _HANDBACK_TEST_KEYS}
        for k in ("message", "hint", "reproduce", "name", "title", "visibility"):
            kept[k] = _text(kept[k], lines=k not in ("name", "title", "visibility"))
        kept["grader_error"] = bool(t.get("grader_error"))
        printed = _text(t.get("output")).strip()
        kept["output"] = printed[-OUTPUT_CHARS:]
        att = t.get("attachment")
        if isinstance(att, dict) and not t.get("passed"):
            kept["attachment"] = {"name": _text(att.get("name"), lines=False), "text": _text(att.get("text"))}
        tests.append(kept)
    capped = report.get("capped") if isinstance(report.get("capped"), dict) else None
    out = {"exercise": report.get("exercise"), "slug": _text(report.get("slug"), lines=False),
           "submission": clean_name(report.get("submission") or ""), "score": report.get("score"),
           "max_score": report.get("max_score"), "public_only": bool(report.get("public_only")),
           "problem": _text(report.get("problem")),
           "capped": None if not capped else {"cap_percent": capped.get("cap_percent"),
                                              "rules": [_text(x, lines=False) for x in capped.get("rules") or ()]},
           "tests": tests}
    if len(json.dumps(out, ensure_ascii=False)) > HANDBACK_CAP:
        for t in tests:
            t["output"] = ""
            t.pop("attachment", None)
    return out


def _from_breakdown(breakdown: dict) -> list[dict]:
    """A page's rules from a gradebook breakdown alone (a lab, or an attempt without stored details)."""
    tests = []
    for name, v in (breakdown or {}).items():
        if not isinstance(v, dict) or "points" not in v:
            continue
        points, mx = v.get("points") or 0, v.get("max") or 0
        passed = v.get("passed") if isinstance(v.get("passed"), bool) else points >= mx
        tests.append({"name": name, "title": "", "points": points, "max_points": mx, "passed": passed,
                      "message": v.get("why", "")})
    return tests


def from_gradebook(book, *, fmt: str = "html", assignment: str | None = None) -> list[tuple[str, str, str, dict]]:
    """The feedback pages of a course gradebook (:class:`sim.store.gradebook.Gradebook`): one per
    student (and unmatched submission) and assignment that has an attempt, from the latest attempt
    and the newest override (see the module's text). Returns ``(folder key, file name, text, facts)``:
    the folder key is the roster id (``unmatched:NAME`` for an unmatched submission), the file
    ``ASSIGNMENT.EXT``; facts say ``student``, ``assignment``, ``override`` and ``on_roster``.
    ``assignment``: that one only (E_USAGE when the gradebook has no such assignment)."""
    from .catalog import get_exercise

    if fmt not in FORMATS:
        raise InputError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}", code="E_USAGE")
    assignments = {a["id"]: a for a in book.assignments()}
    if assignment is not None and assignment not in assignments:
        raise InputError(f"--assignment {clean_name(assignment)!r} is not an assignment of {book.path} (its "
                         f"assignments: {', '.join(assignments) or 'none'})", code="E_USAGE")
    names = {s["id"]: s["name"] for s in book.students()}
    pages = []
    for entry in book.counted():
        a, o = entry["attempt"], entry["override"]
        if assignment is not None and a["assignment"] != assignment:
            continue
        info = assignments.get(a["assignment"], {"id": a["assignment"], "kind": "", "number": None, "title": ""})
        dirname = ""
        if info.get("kind") == "exercise":
            try:
                dirname = get_exercise(info["number"]).dirname
            except (InputError, TypeError, ValueError):
                dirname = ""
        try:
            stored = json.loads(a.get("feedback") or "null")
        except ValueError:
            stored = None
        details = isinstance(stored, dict) and isinstance(stored.get("tests"), list)
        report = dict(stored) if details else {"tests": _from_breakdown(a["breakdown"]), "problem": ""}
        sid = a["student"]
        report["student"] = f"{names.get(sid, sid)} ({sid})" if sid else a["submitted_as"]
        report["score"] = o["score"] if o else a["score"]
        report["max_score"] = a["max_score"]
        report["term"] = {"attempt": a["attempt"], "graded_at": a["graded_at"], "late_days": a["late_days"],
                          "penalty_percent": a["penalty_percent"], "raw_score": a["raw_score"],
                          "attempt_score": a["score"], "details": details, "zero_reason": a["zero_reason"],
                          "on_roster": bool(sid), "submitted_as": a["submitted_as"],
                          "override": None if not o else {k: o[k] for k in ("score", "comment", "by", "at")}}
        facts = {"kind": info.get("kind"), "number": info.get("number"), "title": info.get("title") or "",
                 "dirname": dirname}
        key = sid or f"unmatched:{a['submitted_as']}"
        name = re.sub(r"[^A-Za-z0-9._@+-]", "_", a["assignment"]).strip(".") or "assignment"
        pages.append((key, f"{name}.{fmt}", render(report, facts, fmt),
                      {"student": sid or a["submitted_as"], "assignment": a["assignment"], "override": bool(o),
                       "on_roster": bool(sid)}))
    return pages
