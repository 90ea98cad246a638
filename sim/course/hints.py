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
    symptom = "resend-accepted"       # optional: a symptom (or a list: all of them) the failures showed
    absent = "exact-copy-accepted"    # optional: a symptom (or a list) the failures did NOT show
    text = "what to look at"

Symptoms are how a hint names the *mistake* rather than the first case that failed: a judge tags
every case that broke its rule with what it shows (``resend-accepted``: the same intent under a new
message id was taken as new work), and the signature carries the tags of all of them. A consumer
that deduplicates by message id shows ``resend-accepted`` but not ``exact-copy-accepted``; one that
does not deduplicate at all shows both: ``symptom`` and ``absent`` tell the two apart.

The rule whose conditions all hold and name the most conditions wins (each symptom listed counts);
a tie goes to the rule met first, instructors' before the shipped ones, then in file order, so a
table lists the more fundamental mistakes first. With none, the test's own ``hint`` from
``exercise.toml`` is used. A rule that names no condition is refused, as is an unknown key (a typo
would otherwise match everything); :func:`check_symptoms` (run by ``kit verify`` and the tests)
reports a rule naming a symptom no judge of the exercise can report, or an invariant, fault, test,
scenario or policy the course does not have (a typo there would never match).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError

__all__ = ["HintRule", "load_hints", "choose_hint", "check_symptoms", "symptoms_of", "KEYS"]

KEYS = ("test", "invariant", "fault", "scenario", "problem", "policy", "case_has", "rule_has", "symptom", "absent")
_LISTS = ("symptom", "absent")  # keys that take one value or a list of them


@dataclass(frozen=True)
class HintRule:
    when: dict = field(hash=False)
    text: str
    source: str = ""

    @property
    def weight(self) -> int:
        """How many conditions the rule names (each listed symptom counts)."""
        return sum(len(v) if k in _LISTS else 1 for k, v in self.when.items())

    def matches(self, test: str, sig: dict) -> bool:
        for k, want in self.when.items():
            if k == "symptom":
                ok = set(want) <= set(map(str, sig.get("symptoms") or ()))
            elif k == "absent":
                ok = not set(want) & set(map(str, sig.get("symptoms") or ()))
            elif k == "test":
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
        when = {}
        for k in KEYS:
            if k not in h:
                continue
            v = h[k]
            if k in _LISTS:
                v = [v] if isinstance(v, str) else v
                if not isinstance(v, list) or not v or not all(isinstance(x, str) and x for x in v):
                    raise InputError(f"{path}: hint {i}: {k} must be a symptom or a list of them", code="E_EXERCISE_FILE")
                when[k] = tuple(v)
            else:
                when[k] = str(v)
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
        for r in rules:  # instructors' rules come first and win a tie, then file order
            if r.weight > best_n and r.matches(test.name, signature):
                best, best_n = r, r.weight
        if best is not None:
            return best.text
    return test.hint


def symptoms_of(ex) -> dict[str, str]:
    """Every symptom the judges of ``ex``'s tests can report, with what it means: each judge module
    declares them in a ``SYMPTOMS`` dict (tag -> meaning)."""
    import importlib

    out: dict[str, str] = {}
    for t in ex.tests + ex.hidden_tests():
        module = t.judge.rpartition(".")[0]
        mod = importlib.import_module(f"sim.course.judges.{module}")
        out.update(getattr(mod, "SYMPTOMS", {}))
    return out


def check_symptoms(ex, rules: list[HintRule] | None = None) -> list[str]:
    """Problems with ``ex``'s hint tables: a rule naming a symptom no judge of the exercise reports
    would never match (a typo, or a judge that stopped reporting it)."""
    from ..faults import REGISTRY as FAULTS
    from ..invariants import REGISTRY as INVARIANTS
    from ..scenario import scenario_names

    known = symptoms_of(ex)
    # what the other conditions can name: a typo in any of them would never match either
    names = {
        "invariant": set(INVARIANTS), "fault": set(FAULTS), "policy": {"safe", "naive"},
        "test": {t.name for t in ex.tests + ex.hidden_tests()}, "scenario": set(scenario_names()),
    }
    problems = []
    for r in load_hints(ex) if rules is None else rules:
        for k in _LISTS:
            for s in r.when.get(k, ()):
                if s not in known:
                    problems.append(f"{r.source}: {k} {s!r} is reported by no judge of exercise {ex.number} "
                                    f"(known: {', '.join(sorted(known)) or 'none'})")
        for k, allowed in names.items():
            v = r.when.get(k)
            if v is not None and v.split(":", 1)[0] not in allowed:
                problems.append(f"{r.source}: {k} {v!r} names no {k} of exercise {ex.number}'s course "
                                f"(known: {', '.join(sorted(allowed))})")
    return problems
