"""Hints chosen by what broke: a table per exercise that instructors edit.

A failing test's judge reports the failure's *signature*: which invariant broke under which faults
on which scenario, which contract case failed (and the rule it tests), or what went wrong instead
(``wrong-ending``, ``published``, ``redelivery-commits``, ``review``). ``exercises/NN-slug/hints.toml``
(shipped to students too) and ``solutions/NN-slug/hints.toml`` (instructors only; its rules win a
tie) hold rules::

    [[hint]]
    test = "faults-delivery"          # optional: only for this test
    invariant = "EFFECT_AT_MOST_ONCE" # optional: the invariant that broke
    fault = "resend"                  # optional: the failing run had this fault ("resend" matches "resend:task_request")
    scenario = "fan-out"              # optional
    problem = "wrong-ending"          # optional
    policy = "naive"                  # optional (exercise 5)
    case_has = "stale"                # optional: words in the failing contract case's name
    rule_has = "compare-and-swap"     # optional: words in the failing contract case's rule
    text = "what to look at"

The rule whose conditions all hold and name the most conditions wins; with none, the test's own
``hint`` from ``exercise.toml`` is used. A rule that names no condition is refused, as is an
unknown key (a typo would otherwise match everything).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError

__all__ = ["HintRule", "load_hints", "choose_hint", "KEYS"]

KEYS = ("test", "invariant", "fault", "scenario", "problem", "policy", "case_has", "rule_has")


@dataclass(frozen=True)
class HintRule:
    when: dict = field(hash=False)
    text: str
    source: str = ""

    def matches(self, test: str, sig: dict) -> bool:
        for k, want in self.when.items():
            if k == "test":
                ok = want == test
            elif k == "fault":
                faults = [str(f) for f in sig.get("faults") or ()]
                ok = any(f == want or f.split(":", 1)[0] == want for f in faults)
            elif k == "case_has":
                ok = want.casefold() in " ".join([str(sig.get("case", ""))] + list(map(str, sig.get("cases") or ()))).casefold()
            elif k == "rule_has":
                ok = want.casefold() in str(sig.get("rule", "")).casefold()
            else:
                ok = str(sig.get(k, "")) == want
            if not ok:
                return False
        return True


def _read(path: Path) -> list[HintRule]:
    if not path.is_file():
        return []
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise InputError(f"{path} cannot be read: {e}", code="E_EXERCISE_FILE") from e
    out = []
    for i, h in enumerate(data.get("hint", []), 1):
        if not isinstance(h, dict) or not isinstance(h.get("text"), str) or not h["text"].strip():
            raise InputError(f"{path}: hint {i} has no text", code="E_EXERCISE_FILE")
        unknown = sorted(set(h) - set(KEYS) - {"text"})
        if unknown:
            raise InputError(f"{path}: hint {i} has unknown key {unknown[0]!r}; expected one of: {', '.join(KEYS)}",
                             code="E_EXERCISE_FILE")
        when = {k: str(h[k]) for k in KEYS if k in h}
        if not when:
            raise InputError(f"{path}: hint {i} names no condition (a rule for every failure is the test's own hint)",
                             code="E_EXERCISE_FILE")
        out.append(HintRule(when, " ".join(h["text"].split()), f"{path.name} hint {i}"))
    return out


def load_hints(ex) -> list[HintRule]:
    """The exercise's rules: instructors' (``solutions/``) first, then the shipped ones."""
    from .catalog import solutions_dir

    sol = solutions_dir(ex)
    return (_read(sol / "hints.toml") if sol is not None else []) + _read(ex.folder / "hints.toml")


def choose_hint(rules: list[HintRule], test, signature: dict | None) -> str:
    """The hint for a failed ``test`` (a catalog Test) whose judge reported ``signature``."""
    if signature:
        best, best_n = None, 0
        for r in rules:  # instructors' rules come first and win a tie
            if len(r.when) > best_n and r.matches(test.name, signature):
                best, best_n = r, len(r.when)
        if best is not None:
            return best.text
    return test.hint
