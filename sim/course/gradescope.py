"""Gradescope's ``results.json`` from a :class:`~sim.course.evaluate.Report`.

Gradescope runs an autograder once per submission on its own machines and reads
``/autograder/results/results.json`` (the format: its "Autograder Specifications" page; the
JSON Schema beside this module, ``gradescope-results.schema.json``, writes it down). Each test
becomes one entry: its title as the name, ``N.i`` as the number, points and status, an output a
student can act on (what failed, the command that reproduces it, the hint) and the visibility its
``exercise.toml`` gives (public tests ``visible``, hidden ones ``after_published`` unless set).

A submission that cannot be graded at all (no such file, a file that does not load) still gets a
valid file: every test 0 with the reason (:func:`ungradable`). :func:`validate_results` checks a
file against the schema: with ``jsonschema`` when it is installed (a test dependency only), else
with a small interpreter of the same schema, plus the totals' consistency.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

from .catalog import DEFAULT_VISIBILITY, Exercise, Test
from .evaluate import Report, TestResult

__all__ = ["results_json", "ungradable", "validate_results", "schema", "SCHEMA_PATH", "feedback"]

SCHEMA_PATH = Path(__file__).with_name("gradescope-results.schema.json")

#: What the student's code printed, kept in a test's output (the rest is cut).
OUTPUT_CHARS = 1500


def _visibility(r: TestResult, by_name: dict[str, Test]) -> str:
    if getattr(r, "visibility", ""):
        return r.visibility
    t = by_name.get(r.name)
    if t is not None and t.visibility:
        return t.visibility
    return DEFAULT_VISIBILITY["hidden" if r.hidden else "public"]


def _shown(text: str | None, report: Report, shown_dir: str | None) -> str | None:
    if text is None or shown_dir is None:
        return text
    return text.replace(str(report.submission), shown_dir)


def feedback(r: TestResult, report: Report | None = None, shown_dir: str | None = None) -> str:
    """A test's output for the student: the verdict, and on failure what failed, how to reproduce it
    and the hint; what their code printed last."""
    msg = _shown(r.message, report, shown_dir) if report is not None else r.message
    repro = _shown(r.reproduce, report, shown_dir) if report is not None else r.reproduce
    lines = []
    weight = _weight_note(r)
    if r.passed:
        lines.append(f"Passed ({r.points:g}/{r.max_points:g} points). {msg}".rstrip())
    else:
        lines.append(f"Failed ({r.points:g}/{r.max_points:g} points).{weight}")
        lines.append(f"What failed: {msg or '(the judge gave no reason)'}")
        if repro:
            lines.append(f"Reproduce it: {repro}")
        if r.hint:
            lines.append(f"Hint: {r.hint}")
        att = getattr(r, "attachment", None)
        if att:
            text = _shown(att["text"], report, shown_dir) if report is not None else att["text"]
            lines.append("")
            lines.append(f"{att['name']} (save it beside your files; the command above replays it):")
            lines.append(text.rstrip("\n"))
    printed = (r.output or "").strip()
    if printed:
        cut = printed[-OUTPUT_CHARS:]
        lines.append("")
        lines.append("Your code printed" + (" (the end of it)" if len(cut) < len(printed) else "") + ":")
        lines.append(cut)
    return "\n".join(lines)


#: Gradescope's visibilities, least to most withheld.
_WITHHELD = ("visible", "after_due_date", "after_published", "hidden")


def _withheld(tests: list[dict]) -> str:
    """The top level's visibility: ``visible`` when every hidden test is shown now; else held back as
    long as the hidden tests are (after the due date, or once grades are published), so that the total
    score, which counts them, tells nothing about them before then. Each test carries its own."""
    later = [t["visibility"] for t in tests if t["extra_data"]["hidden"] and t["visibility"] != "visible"]
    if not later:
        return "visible"
    return min(_WITHHELD[max(_WITHHELD.index(v) for v in later)], "after_published", key=_WITHHELD.index)


def _weight_note(r: TestResult) -> str:
    """What the rubric says of a failed rule beyond its points: core, and the cap its breaking sets."""
    core, cap = getattr(r, "core", False), getattr(r, "cap", None)
    if core and cap is not None:
        return f" This is a core rule of the exercise: breaking it caps the exercise at {cap:g}% of its total."
    if core:
        return " This is a core rule of the exercise."
    if cap is not None:
        return f" Breaking it caps the exercise at {cap:g}% of its total."
    return ""


def _summary(report: Report, tests: list[dict]) -> str:
    ex = report.exercise
    if report.problem:
        return (f"Exercise {ex.number}: {ex.title}. Your submission could not be graded: {report.problem}. "
                "Every test scores 0; fix this and submit again.")
    public = [r for r in report.results if not r.hidden]
    hidden = [r for r in report.results if r.hidden]
    later = sorted({t["visibility"] for t in tests if t["extra_data"]["hidden"]} - {"visible"})
    cap = report.capped
    if not later:  # nothing withheld: the score, and a cap with the rules that set it
        text = (f"Exercise {ex.number}: {ex.title}. Score {report.score:g}/{report.max_score}. "
                f"Public tests: {sum(r.passed for r in public)} of {len(public)} pass.")
        if hidden:
            text += f" Hidden tests: {len(hidden)} ({sum(r.max_points for r in hidden):g} points)."
        if cap is not None:
            text += f" Capped at {cap[0]:g}% of the total: {', '.join(cap[1])} broke."
        return text
    # Hidden tests not shown yet: no total and no subtotal (either would tell which hidden test failed);
    # the public tests' own points only, which their own results show anyway.
    when = {"after_published": "when grades are published", "after_due_date": "after the due date",
            "hidden": "to your instructor only"}
    text = (f"Exercise {ex.number}: {ex.title}. Public tests: {sum(r.passed for r in public)} of {len(public)} pass "
            f"({sum(r.points for r in public):g} of {sum(r.max_points for r in public):g} points). "
            f"Hidden tests: {len(hidden)} ({sum(r.max_points for r in hidden):g} points), shown "
            f"{' or '.join(when[v] for v in later)}; your score counts them and is shown with them.")
    if cap is not None and not any(r.hidden for r in report.results if r.name in cap[1]):
        text += f" Your score is capped at {cap[0]:g}% of the total: {', '.join(cap[1])} broke."
    return text


def results_json(report: Report, *, execution_time: float | None = None, shown_dir: str | None = None) -> dict:
    """``report`` as Gradescope's results.json (a dict). ``shown_dir`` replaces the submission's
    path in messages and commands (e.g. ``01-envelope-design``, the folder ``exercise start`` makes)."""
    ex = report.exercise
    by_name = {t.name: t for t in ex.tests}
    if any(r.hidden for r in report.results):
        by_name.update({t.name: t for t in ex.hidden_tests()})
    tests = []
    for i, r in enumerate(report.results, 1):
        tests.append({
            "name": r.title,
            "name_format": "text",
            "number": f"{ex.number}.{i}",
            "score": float(r.points),
            "max_score": float(r.max_points),
            "status": "passed" if r.passed else "failed",
            "output": feedback(r, report, shown_dir),
            "output_format": "text",
            "tags": [ex.slug, "hidden" if r.hidden else "public"],
            "visibility": _visibility(r, by_name),
            "extra_data": {"test": r.name, "hidden": bool(r.hidden), "seconds": float(r.seconds),
                           **({"core": True} if getattr(r, "core", False) else {}),
                           **({"cap_percent": r.cap} if getattr(r, "cap", None) is not None else {})},
        })
    out: dict = {"score": float(report.score)}
    if execution_time is not None:
        out["execution_time"] = max(0, int(math.ceil(execution_time)))
    out.update({
        "output": _summary(report, tests),
        "output_format": "text",
        "test_output_format": "text",
        "test_name_format": "text",
        "visibility": _withheld(tests),  # the total and this output; each test carries its own
        "stdout_visibility": "hidden",  # the grader's log is for instructors
        "extra_data": {"exercise": ex.number, "slug": ex.slug, "max_score": report.max_score,
                       "hidden_ran": bool(report.hidden_ran), "problem": report.problem,
                       **({} if report.capped is None else  # the rubric's cap lowered the total below the tests' sum
                          {"capped": {"cap_percent": report.capped[0], "rules": report.capped[1]}})},
        "tests": tests,
    })
    return out


def ungradable(ex: Exercise, reason: str, *, submission: str | Path = "submission", hidden: bool = True,
               execution_time: float | None = None) -> dict:
    """results.json for a submission that cannot be graded at all: every test 0 with ``reason``."""
    from .safetext import clean_text

    reason = clean_text(" ".join(str(reason).split())) or "the submission cannot be graded"
    tests = list(ex.graded_tests(hidden))
    report = Report(ex, Path(submission), hidden_ran=hidden and any(t.hidden for t in tests),
                    hidden_points=ex.hidden_points(), problem=reason)
    report.results = [TestResult(name=t.name, title=t.title, hidden=t.hidden, points=0.0, max_points=t.points,
                                 passed=False, message=f"not graded: {reason}", hint="", visibility=t.visibility)
                      for t in tests]
    return results_json(report, execution_time=execution_time)


# ------------------------------------------------------------------------------------ validation


@lru_cache(maxsize=1)
def schema() -> dict:
    """The JSON Schema of results.json (shipped beside this module)."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}
_ANNOTATIONS = {"$schema", "$id", "$defs", "title", "description"}


def _check(value, node: dict, root: dict, where: str) -> list[str]:
    """The subset of JSON Schema the shipped schema uses, by hand (used without ``jsonschema``)."""
    if "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/$defs/"), ref
        return _check(value, root["$defs"][ref.split("/")[-1]], root, where)
    problems: list[str] = []
    for key in node:
        if key not in _ANNOTATIONS | {"type", "enum", "minimum", "properties", "additionalProperties", "required",
                                      "items", "anyOf"}:
            raise ValueError(f"the hand check does not know the schema keyword {key!r}")
    if "type" in node:
        types = node["type"] if isinstance(node["type"], list) else [node["type"]]
        if not any(_TYPES[t](value) for t in types):
            return [f"{where}: expected {' or '.join(types)}, got {type(value).__name__}"]
    if "enum" in node and value not in node["enum"]:
        problems.append(f"{where}: {value!r} is not one of {', '.join(map(repr, node['enum']))}")
    if "minimum" in node and _TYPES["number"](value) and value < node["minimum"]:
        problems.append(f"{where}: {value} is less than {node['minimum']}")
    if isinstance(value, dict):
        props = node.get("properties", {})
        for k in node.get("required", ()):
            if k not in value:
                problems.append(f"{where}: missing {k!r}")
        for k, v in value.items():
            if k in props:
                problems += _check(v, props[k], root, f"{where}.{k}" if where != "$" else k)
            elif node.get("additionalProperties") is False:
                problems.append(f"{where}: unknown field {k!r}")
    if isinstance(value, list) and "items" in node:
        for i, v in enumerate(value):
            problems += _check(v, node["items"], root, f"{where}[{i}]")
    if "anyOf" in node and not any(not _check(value, alt, root, where) for alt in node["anyOf"]):
        problems.append(f"{where}: a score is required at the top level or on every test")
    return problems


def _consistency(d: dict) -> list[str]:
    """What protolab promises beyond the format: finite numbers, 0 <= score <= max_score, totals add up."""
    problems = []
    tests = d.get("tests") if isinstance(d.get("tests"), list) else []
    total = 0.0
    for i, t in enumerate(tests):
        if not isinstance(t, dict):
            continue
        s, m = t.get("score"), t.get("max_score")
        for k, v in (("score", s), ("max_score", m)):
            if _TYPES["number"](v) and not math.isfinite(v):
                problems.append(f"tests[{i}].{k}: {v} is not a finite number")
        if _TYPES["number"](s) and _TYPES["number"](m) and math.isfinite(s) and math.isfinite(m):
            if not 0 <= s <= m + 1e-9:
                problems.append(f"tests[{i}].score: {s} is outside 0..{m}")
            total += s
    top = d.get("score")
    if _TYPES["number"](top):
        if not math.isfinite(top):
            problems.append(f"score: {top} is not a finite number")
        elif tests and abs(top - total) > 0.011 * max(1, len(tests)):
            capped = (d.get("extra_data") or {}).get("capped") if isinstance(d.get("extra_data"), dict) else None
            if not (capped and top < total):  # a rubric's cap may lower the total, never raise it
                problems.append(f"score: {top} is not the sum of the tests' scores ({total:g})")
    return problems


def validate_results(d, *, use_jsonschema: bool | None = None) -> list[str]:
    """Problems with results.json ``d`` (an empty list: valid). The format is checked with
    ``jsonschema`` when installed (``use_jsonschema=None``), or by hand; the totals always."""
    if use_jsonschema is None or use_jsonschema:
        try:
            import jsonschema
        except ImportError:
            if use_jsonschema:
                raise
            jsonschema = None
    else:
        jsonschema = None
    if jsonschema is not None:
        validator = jsonschema.Draft202012Validator(schema())
        problems = [f"{'.'.join(map(str, e.absolute_path)) or '$'}: {e.message}"
                    for e in sorted(validator.iter_errors(d), key=lambda e: list(map(str, e.absolute_path)))]
    else:
        problems = _check(d, schema(), schema(), "$")
    if isinstance(d, dict):
        problems += _consistency(d)
    return problems
