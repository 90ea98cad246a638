"""Judges of exercise 2, keys and digests: the student's ``digest`` and ``idempotency_key`` run in
two host processes with their own hash seeds, A and B (:mod:`sim.course.remote`). Digests
are compared with the engine's own (:mod:`sim.digest`, pinned by RFC 8785's vectors and the
course's); keys are judged by what a key must do and then by the simulator running on them. Never
by comparing a key with a model answer's key.

One test per rule of the seed (message-protocols-and-shared-state: "idempotency_key identifies
the same logical intent. payload_digest binds a payload or artifact under a declared
serialization algorithm, version, and numeric rules. A duplicate delivery is ignorable only when
both values match"; "a cross-process implementation must pin and test its own digest scheme and
version"), each all or nothing:

* ``digest_under_its_scheme``: the digest binds exactly the bytes its declared scheme names
  (json-sorted-v1's bytes; jcs-v2 is RFC 8785);
* ``refusals``: a value with no canonical bytes under a scheme, or an unknown scheme, is refused
  with a ValueError (NaN, infinities, lone surrogates; under jcs-v2 integers of 2**53 or more);
* ``same_intent_same_key``: the key names the logical intent: the same intent gives the same key
  every time, in any process;
* ``key_injective``: different intents never share a key, whatever separators the ids hold and
  however long they are;
* ``key_is_an_id``: every key is a valid id (1-200 characters of the id alphabet), long ids too;
* ``keys_in_the_run``: on real runs under the delivery and recovery faults, intake decides on the
  student's keys as it does on the course's: a repeat is a repeat, new work is new, a conflict is
  a conflict, and each run ends as it should.

Each probe of a key is made in *every* host process, each call naming the process that answers it
(the k-th round of calls in process k mod 2): a key made with ``hash()`` or a counter is named for
what it is, and is not excused, nor blamed, for what another rule checks. A digest is asked of
process A. In a run, each envelope's key is computed in process A the first time the run sends its
intent and in process B when the same intent is sent again under another message id (a resend, as a
restarted sender computes it: :class:`~sim.course.judges.Resends`).
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, replace
from pathlib import Path

from . import A, Broke, Judged, Resends, grid_row, per_submission, rule, try_line

_FILE = "keys.py"
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:#/-]{0,199}$")
_ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:#/-"
_FIELDS = ("trace_id", "task_id", "sender", "step", "attempt", "answers")

SYMPTOMS = {
    # digests
    "keys-not-sorted": "object keys were not written in the order the scheme sorts them",
    "whitespace-in-bytes": "the bytes held whitespace the scheme leaves out",
    "non-ascii-escaped": "non-ASCII text was hashed as \\u escapes, not as itself in UTF-8",
    "escapes-wrong": "a string was escaped otherwise than JSON requires",
    "numbers-rewritten": "json-sorted-v1 numbers were written otherwise than Python writes them (1 and 1.0 differ)",
    "literals-wrong": "true, false, null or nesting were written wrong",
    "random-values-differ": "random values digested otherwise than the scheme does",
    "run-payloads-differ": "the payloads of a real run digested otherwise than the scheme does",
    "utf16-order-ignored": "jcs-v2 object keys were not sorted by UTF-16 code units",
    "ecmascript-numbers-ignored": "jcs-v2 numbers were not written the ECMAScript way (1.0 is 1, -0 is 0)",
    "jcs-as-v1": "a jcs-v2 digest equals json-sorted-v1's where the two schemes write different bytes",
    "digest-form-wrong": "a digest is not 'sha256:' and 64 lowercase hex digits",
    "valid-value-refused": "a value that has canonical bytes was refused (the digest raised)",
    # refusals
    "non-finite-digested": "NaN or an infinity got a digest",
    "surrogate-digested": "a lone surrogate got a digest",
    "unknown-scheme-accepted": "an unknown scheme got a digest (defaulted) instead of being refused",
    "big-integer-digested": "under jcs-v2, an integer of magnitude 2**53 or more got a digest",
    "refused-without-valueerror": "a refusal raised something that is not a ValueError",
    # keys
    "key-differs-between-calls": "the same intent keyed twice in one process got two keys (a counter, the clock, "
                                 "randomness)",
    "key-differs-between-processes": "the same intent got one key in one process and another in the next (hash(), "
                                     "id(), a salt: a key that is not the same in every process)",
    "key-ignores-trace": "two intents differing only in the trace id shared a key",
    "key-ignores-task": "two intents differing only in the task id shared a key",
    "key-ignores-sender": "two intents differing only in the sender shared a key",
    "key-ignores-step": "two intents differing only in the step shared a key",
    "key-ignores-attempt": "two intents differing only in the attempt shared a key",
    "key-ignores-answers": "two intents differing only in the message answered shared a key",
    "separator-collision": "two intents whose ids hold separators (or spell a missing value) shared a key",
    "long-ids-collide": "two intents with long ids sharing a head shared a key (a key cut short)",
    "key-too-long": "a key was longer than 200 characters",
    "key-bad-characters": "a key held characters outside the id alphabet, or did not start with a letter or digit",
    "key-not-a-string": "a key was not a non-empty string",
    "key-raises": "idempotency_key raised",
    "key-names-nothing": "every intent got one and the same key: a constant names no intent",
    # runs
    "repeat-taken-as-new": "in a run, a repeat of an intent (a resend, a duplicate) was taken as new work",
    "new-taken-as-repeat": "in a run, new work was taken as a repeat of another intent (a false duplicate)",
    "false-conflict": "in a run, a new intent was taken for a conflicting repeat of another and its task frozen",
    "missed-conflict": "in a run, one intent with two payloads was not seen as a conflict",
    "wrong-ending": "a run ended otherwise than with keys that name intents",
    "run-stopped": "a run stopped: a key was refused or idempotency_key raised",
}

# ------------------------------------------------------------------------------------------ the student's module


def _module(sub: Path):
    """The student's keys.py in its host processes (kept for the submission when grading)."""
    from ...errors import InputError
    from ..remote import shared

    mod = shared(sub / _FILE, "keys")
    for fn in ("digest", "idempotency_key"):
        if mod.names.get(fn) != "function":
            mod.close()
            raise InputError(f"keys.py has no function {fn!r}", code="E_PLUGIN_INCOMPLETE")
    return mod


def _call(mod, fn: str, *args, process: int = A):
    """``(value, None)`` or ``(None, error)`` (a RemoteError: the student's code raised), asked of
    host ``process``."""
    from ..remote import RemoteError

    try:
        return mod.call(fn, *args, process=process), None
    except RemoteError as e:
        return None, e


def _processes(mod) -> int:
    return max(1, len(getattr(mod, "hosts", ())) or 1)


def _show(value, limit: int = 90) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _student(fn):
    """A judge of this module: the student's module is opened for it (and closed after, unless kept)."""
    import functools

    @functools.wraps(fn)
    def judge(sub: Path, args: dict) -> Judged:
        mod = _module(sub)
        try:
            return fn(sub, mod, dict(args or {}))
        finally:
            mod.close()

    return judge


def _list(args: dict, name: str) -> list:
    from ...errors import InputError

    v = args.get(name, [])
    if not isinstance(v, list):
        raise InputError(f"{name} must be a list", code="E_EXERCISE_FILE")
    return v


# ------------------------------------------------------------------------------------------ digests
#
# Each group is one lesson: a digest that gets one group wrong disagrees with every other program
# about every payload that touches it.


_RUN_PAYLOADS: dict = {}


def _run_payloads(scenario: str = "publish-report") -> list:
    """The payloads of a real run of the simulator (every message of ``scenario``)."""
    if scenario not in _RUN_PAYLOADS:
        from ...runner import run_scenario
        from ...scenario import load_scenario

        store = run_scenario(load_scenario(scenario))
        try:
            _RUN_PAYLOADS[scenario] = [m["payload"] for m in store.messages()]
        finally:
            store.close()
    return list(_RUN_PAYLOADS[scenario])


def _random_values(seed: int, n: int, *, jcs: bool = False) -> list:
    rng = random.Random(seed)
    words = ["a", "B", "é", "ß", "日本", "\U0001f600", "x y", 'q"uote', "back\\slash", "tab\t", "\u2028", "", "\ue000",
             "ÿ", "Z", "_"]

    def value(depth: int):
        kind = rng.randrange(8 if depth < 3 else 5)
        if kind == 0:
            return rng.choice(words) + rng.choice(words)
        if kind == 1:
            return rng.randrange(-10**6, 10**6)
        if kind == 2:
            return rng.choice([0.5, -1.25, 3.0, 1e-7, 123456.789, 2.5e20, 1e21, -0.0, 0.1, 100.0])
        if kind == 3:
            return rng.choice([True, False, None])
        if kind == 4:
            return rng.randrange(2**53 if jcs else 10**20)
        if kind in (5, 6):
            return {rng.choice(words) + str(i): value(depth + 1) for i in range(rng.randrange(4))}
        return [value(depth + 1) for _ in range(rng.randrange(4))]

    return [{"v": value(0), "k": value(1)} for _ in range(n)]


#: (scheme, group) -> (what the group teaches, the symptom of getting it wrong, its values)
_GROUPS = {
    ("json-sorted-v1", "key-order"): (
        "object keys in sorted order, whatever order they were written in", "keys-not-sorted",
        lambda c: [{"b": 1, "a": 2}, {"zeta": {"y": 1, "x": 2}, "alpha": []}, {"B": 1, "a": 2, "_": 3}]),
    ("json-sorted-v1", "whitespace"): (
        "no whitespace between items or after keys", "whitespace-in-bytes",
        lambda c: [[1, 2, {"a": [3, 4]}], {"a": "b c"}]),
    ("json-sorted-v1", "non-ascii"): (
        "non-ASCII text written as itself in UTF-8, not as \\u escapes", "non-ascii-escaped",
        lambda c: [{"name": "café"}, ["日本語", "\U0001f600"], {"é": "ß"}]),
    ("json-sorted-v1", "escapes"): (
        "escapes only where JSON requires them", "escapes-wrong",
        lambda c: [{"q": 'say "hi"', "b": "a\\b", "t": "tab\there", "n": "line\n", "u": "\u2028/\u001f"}]),
    ("json-sorted-v1", "numbers"): (
        "numbers as Python writes them: integers in full, 1 and 1.0 are different payloads", "numbers-rewritten",
        lambda c: [{"n": 1}, {"n": 1.0}, {"n": 2**64 + 1}, {"n": -0.0}, {"n": 1e21}, {"n": 0.1}, {"n": 2**53}]),
    ("json-sorted-v1", "literals"): (
        "true, false and null; nested values", "literals-wrong",
        lambda c: [{"t": True, "f": False, "z": None, "l": [[], {}, [None]]}]),
    ("json-sorted-v1", "random"): (
        "random values", "random-values-differ",
        lambda c: _random_values(int(c.get("seed", 7)), int(c.get("n", 60)))),
    ("json-sorted-v1", "run-payloads"): (
        "the payloads of a real simulator run", "run-payloads-differ",
        lambda c: _run_payloads(str(c.get("scenario", "publish-report")))),
    ("jcs-v2", "utf16-order"): (
        "object keys in UTF-16 code-unit order (RFC 8785), not code-point order", "utf16-order-ignored",
        lambda c: [{"\ue000": 1, "\U0001f600": 2}, {"a": 1, "\U0001f600": 2, "ÿ": 3}]),
    ("jcs-v2", "ecmascript-numbers"): (
        "numbers in ECMAScript form: 1.0 is 1, -0 is 0, 1e21 is 1e+21, 1e-7 stays 1e-7", "ecmascript-numbers-ignored",
        lambda c: [{"n": 1.0}, {"n": -0.0}, {"n": 1e21}, {"n": 1e-7}, {"n": 0.1}, {"n": 123456789.0}, {"n": 2**53 - 1}]),
    ("jcs-v2", "non-ascii"): (
        "non-ASCII text written as itself in UTF-8", "non-ascii-escaped",
        lambda c: [{"name": "café"}, ["日本語"]]),
    ("jcs-v2", "key-order"): (
        "object keys sorted, no whitespace", "keys-not-sorted",
        lambda c: [{"b": 1, "a": [1, 2]}, {"zeta": {"y": True, "x": None}, "alpha": "z"}]),
    ("jcs-v2", "random"): (
        "random values", "random-values-differ",
        lambda c: _random_values(int(c.get("seed", 11)), int(c.get("n", 40)), jcs=True)),
    ("jcs-v2", "run-payloads"): (
        "the payloads of a real simulator run", "run-payloads-differ",
        lambda c: _run_payloads(str(c.get("scenario", "publish-report")))),
}

_DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")


def _group(case) -> tuple[str, str, str, str, list]:
    """(scheme, group, what it teaches, symptom, values) of one digest case."""
    from ...errors import InputError

    if not isinstance(case, dict) or (case.get("scheme"), case.get("group")) not in _GROUPS:
        raise InputError(f"a digest case names a scheme and a group of {sorted(_GROUPS)}; got {case!r}",
                         code="E_EXERCISE_FILE")
    scheme, group = case["scheme"], case["group"]
    what, symptom, values = _GROUPS[(scheme, group)]
    return scheme, group, what, symptom, values(case)


def _digest_answer(mod, value, scheme: str) -> str:
    """What the student's digest does with ``value``: "ok", "wrong", "form", "as-v1" or "raised:KIND"."""
    from ... import digest as ref

    got, err = _call(mod, "digest", value, scheme)
    if err is not None:
        return "raised:" + ("ValueError" if "ValueError" in err.kinds else (err.kind or "error"))
    want = ref.digest(value, scheme)
    if got == want:
        return "ok"
    if not isinstance(got, str) or not _DIGEST_RE.match(got):
        return "form"
    if scheme != "json-sorted-v1":
        try:
            if got == ref.digest(value, "json-sorted-v1"):
                return "as-v1"
        except ValueError:
            pass
    return "wrong"


def _py(v) -> str:
    """``v`` as a Python literal in ASCII (a reproduce line is pasted into a shell): floats that JSON
    cannot write (NaN, infinities) as ``float('nan')``, every other character escaped by ``ascii``."""
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return f"float({str(v)!r})"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_py(k)}: {_py(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_py(x) for x in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
    return ascii(v)


def show_digest(mod, value, scheme: str) -> None:
    """Print what the student's ``keys`` module gives ``value`` under ``scheme`` beside what the scheme
    says (its bytes and their digest, or that it has none), exiting 1 when they differ: what exercise 2's
    digest reproduce lines run
    (``protolab exercise try 2 DIR -c "import keys; from sim.course.judges.keys import show_digest;
    show_digest(keys, VALUE, SCHEME)"``)."""
    import sys

    from ... import digest as ref

    got = {}
    for name in ("digest", "canonical_bytes"):
        try:
            got[name] = getattr(mod, name)(value, scheme)
            print(f"your {name}: {got[name]!r}")
        except Exception as e:  # noqa: BLE001 - what the student's function does is what is shown
            got[name] = e
            print(f"your {name}: raised {type(e).__name__}: {' '.join(str(e).split())[:200]}")
    try:
        want = ref.canonical_bytes(value, scheme), ref.digest(value, scheme)
    except ValueError as e:
        print(f"{scheme} has no bytes for it ({' '.join(str(e).split())[:200]}): it must be refused with a ValueError")
        ok = all(isinstance(v, ValueError) for v in got.values())
    else:
        print(f"the bytes {scheme} names: {want[0]!r}")
        print(f"their digest: {want[1]}")
        ok = got["digest"] == want[1] and got["canonical_bytes"] == want[0]
    print("  they agree" if ok else "  they DIFFER")
    if not ok:
        sys.exit(1)  # the reproduce line's exit status says it showed the failure


def _digest_repro(v, scheme: str) -> str:
    return try_line(2, f"import keys; from sim.course.judges.keys import show_digest; show_digest(keys, {_py(v)}, "
                       f"{scheme!r})")


@_student
def digest_under_its_scheme(sub: Path, mod, args: dict) -> Judged:
    """Rule: ``digest(value, scheme)`` is the SHA-256 of exactly the bytes ``scheme`` names, for
    every group of values of each case (json-sorted-v1; jcs-v2 is RFC 8785)."""
    from ... import digest as ref

    cases = _list(args, "cases")
    broke: list[Broke] = []
    n = 0
    for case in cases:
        scheme, group, what, symptom, values = _group(case)
        for v in values:
            n += 1
            got = _digest_answer(mod, v, scheme)
            if got == "ok":
                continue
            shown = ref.canonical_bytes(v, scheme).decode("utf-8")
            syms = [symptom]
            if got == "form":
                syms.append("digest-form-wrong")
                yours = "is not 'sha256:' followed by 64 lowercase hex digits"
            elif got == "as-v1":
                syms.append("jcs-as-v1")
                yours = "is json-sorted-v1's digest of it"
            elif got.startswith("raised"):
                syms.append("valid-value-refused")
                yours = f"raised {got.split(':', 1)[1]}, though the value has canonical bytes"
            else:
                yours = "hashes other bytes"
            broke.append(Broke(f"{scheme}: {what}", f"for {_show(v)} the bytes hashed are {_show(shown, 120)}; yours "
                                                    f"{yours}", symptoms=tuple(syms), reproduce=_digest_repro(v, scheme),
                               signature={"case": f"{scheme}/{group}"}))
            break  # one value per group is enough to say what the group teaches
    return rule(n, broke, "every value digests exactly as its scheme does")


#: name -> (what it is, the value, the symptom of digesting it)
_REFUSALS = {
    "nan": ("NaN", {"score": float("nan")}, "non-finite-digested"),
    "infinity": ("Infinity", [float("inf")], "non-finite-digested"),
    "minus-infinity-nested": ("-Infinity deep inside", {"a": {"b": [1, float("-inf")]}}, "non-finite-digested"),
    "nan-in-list": ("NaN in a list", [1, 2, float("nan")], "non-finite-digested"),
    "surrogate-in-string": ("a string holding a lone surrogate", {"text": "broken \ud800 half"}, "surrogate-digested"),
    "surrogate-in-key": ("a key holding a lone surrogate", {"\udc00": 1}, "surrogate-digested"),
    "big-integer": ("an integer of 2**53 (a double cannot carry it exactly)", {"n": 2**53}, "big-integer-digested"),
    "big-negative-integer": ("an integer of -(2**53)", [-(2**53)], "big-integer-digested"),
    "huge-integer-nested": ("an integer of 2**64 inside a list", [{"n": 2**64}], "big-integer-digested"),
    "plain": ("a plain value", {"a": 1}, "unknown-scheme-accepted"),
}


@_student
def refusals(sub: Path, mod, args: dict) -> Judged:
    """Rule: a value with no canonical bytes under its scheme, and any value under an unknown
    scheme, is refused with a ValueError."""
    from ... import digest as ref
    from ...errors import InputError

    cases = _list(args, "cases")
    broke: list[Broke] = []
    for case in cases:
        if not isinstance(case, dict) or case.get("value") not in _REFUSALS or not isinstance(case.get("scheme"), str):
            raise InputError(f"a refusal case names a value of {sorted(_REFUSALS)} and a scheme; got {case!r}",
                             code="E_EXERCISE_FILE")
        what, value, symptom = _REFUSALS[case["value"]]
        scheme = case["scheme"]
        if scheme not in ref.SCHEMES:
            what, symptom = f"{what} under the unknown scheme {scheme!r}", "unknown-scheme-accepted"
        else:
            what = f"{what} under {scheme}"
        got, err = _call(mod, "digest", value, scheme)
        repro = _digest_repro(value, scheme)
        if err is None:
            broke.append(Broke(what, f"it was digested ({_show(got, 30)}); it has no canonical bytes, so it must be "
                                     "refused with a ValueError", symptoms=(symptom,), reproduce=repro))
        elif "ValueError" not in err.kinds:
            broke.append(Broke(what, f"it raised {err.kind or 'an error'}, which is not a ValueError",
                               symptoms=("refused-without-valueerror",), reproduce=repro))
    return rule(len(cases), broke, "every value without canonical bytes is refused with a ValueError")


# ------------------------------------------------------------------------------------------ intents

_BASE = ("R-7", "T-2", "researcher", "result", 1, None)

#: name -> (what the pair holds, intent a, intent b): two different intents a careless encoding
#: of the fields would give one key.
PAIRS = {
    "separator-in-trace": ("a ':' inside the trace id", ("R:1", "T-2", "manager", "request", 1, None),
                           ("R", "1:T-2", "manager", "request", 1, None)),
    "separator-in-task": ("a ':' inside the task id", ("R-7", "T:researcher", "x", "result", 1, None),
                          ("R-7", "T", "researcher:x", "result", 1, None)),
    "digits-into-attempt": ("digits running into the attempt", ("R-7", "T-1", "writer", "start", 11, None),
                            ("R-7", "T-11", "writer", "start", 1, None)),
    "none-spelled-none": ("no answer, and an answer spelled None", ("R-7", "T-2", "manager", "ack", 1, None),
                          ("R-7", "T-2", "manager", "ack", 1, "None")),
    "slash-in-id": ("a '/' inside an id", ("R/7", "T-2", "manager", "request", 1, None),
                    ("R", "7/T-2", "manager", "request", 1, None)),
    "hash-in-id": ("a '#' inside an id", ("R-7", "T#2", "manager", "cancel", 1, None),
                   ("R-7", "T", "2#manager", "cancel", 1, None)),
    "answer-like-step": ("an answer that looks like a step", ("R-7", "T-2", "manager", "ack", 1, "result"),
                         ("R-7", "T-2", "manager", "ack:result", 1, None)),
    "dash-in-id": ("a '-' inside an id", ("R-7", "T-2", "writer", "start", 1, None),
                   ("R", "7-T-2", "writer", "start", 1, None)),
    "dot-in-id": ("a '.' inside an id", ("R.7", "T.2", "writer", "result", 2, None),
                  ("R", "7.T.2", "writer", "result", 2, None)),
    "underscore-in-id": ("a '_' inside an id", ("R_7", "T_2", "manager", "request", 1, None),
                         ("R", "7_T_2", "manager", "request", 1, None)),
    "empty-answer": ("an empty answer and no answer", ("R-7", "T-2", "writer", "ack", 1, ""),
                     ("R-7", "T-2", "writer", "ack", 1, None)),
    "step-into-attempt": ("a step ending in digits beside the attempt", ("R-7", "T-2", "writer", "start1", 2, None),
                          ("R-7", "T-2", "writer", "start", 12, None)),
}

#: The intents every field of the key's signature is varied around (issue 42): a request's first attempt
#: answering nothing, and a later attempt's ack answering a message.
_BASES = (_BASE, ("R-7", "T-2", "writer", "ack", 2, "M-9"))
_STEPS = ("request", "start", "result", "ack", "cancel", "fence")


def _variants(name: str, value) -> list:
    """Every other value a field of the signature is tried at, generated by its kind: a step, every other
    step; an attempt, one below (from 1 up), one above and ten times it; an answer, none or another message
    (and one that extends it); a sender, a replica of it and another role; an id, the next one and one that
    extends it (a key that cuts or pads an id meets its neighbour)."""
    if name == "step":
        return [x for x in _STEPS if x != value]
    if name == "attempt":
        return [x for x in (value - 1, value + 1, value * 10) if x >= 1]
    if name == "answers":
        return ["M-4"] if value is None else [None, value + "0", "M-4"]
    if name == "sender":
        return [f"{value}-2", "manager" if value != "manager" else "writer"]
    head, _, num = value.rpartition("-")
    return [f"{head}-{int(num) + 1}" if num.isdigit() else value + "-2", value + "0"]


def _changes() -> list[tuple]:
    """Each base intent, then each field of the signature (``_FIELDS``) changed alone to each of its
    variants: every pair of them is two intents, and each keeps its key when asked again."""
    out: dict[tuple, None] = {}
    for base in _BASES:
        out[base] = None
        for at, name in enumerate(_FIELDS):
            for value in _variants(name, base[at]):
                changed = list(base)
                changed[at] = value
                out[tuple(changed)] = None
    return list(out)


def _random_intents(seed: int, n: int) -> list[tuple]:
    rng = random.Random(seed)
    alphabet = "AB1:/#.-_"

    def ident():
        return rng.choice("ABR") + "".join(rng.choice(alphabet) for _ in range(rng.randrange(3)))

    out = set()
    while len(out) < n:
        out.add((ident(), ident(), rng.choice(["manager", "researcher", "writer", "writer-2"]),
                 rng.choice(["request", "start", "result", "ack", "cancel"]), rng.randrange(1, 12),
                 rng.choice([None, ident()])))
    return sorted(out, key=repr)


def _long_intents(seed: int) -> list[tuple]:
    """Intents whose ids are up to 200 characters, with every character an id may hold; pairs that
    share a long head and differ only at the end."""
    rng = random.Random(seed)

    def ident(n: int) -> str:
        return rng.choice("RTM") + "".join(rng.choice(_ID_CHARS) for _ in range(n - 1))

    a, b, c = ident(200), ident(200), ident(200)
    return [
        (a, ident(200), "manager", "request", 1, None),
        (a, b, "researcher", "result", 3, ident(200)),
        (a, b, "researcher", "result", 3, ident(200)),
        (a[:120] + "-x", b, "writer", "start", 1, None),
        (a[:120] + "-y", b, "writer", "start", 1, None),
        (a, b[:199] + "1", "writer", "ack", 2, c),
        (a, b[:199] + "2", "writer", "ack", 2, c),
        (a, b, "writer", "ack", 2, c[:199] + "3"),
        (c, a, "manager", "cancel", 7, None),
    ]


def _intents(spec) -> list[tuple]:
    """The intents one entry of a test's ``sets`` names."""
    from ...errors import InputError

    kind = spec.get("kind") if isinstance(spec, dict) else None
    if kind == "changes":
        return _changes()
    if kind == "pairs":
        names = spec.get("names", list(PAIRS))
        bad = [n for n in names if n not in PAIRS] if isinstance(names, list) else [names]
        if bad:
            raise InputError(f"unknown pair(s) {bad}; known: {sorted(PAIRS)}", code="E_EXERCISE_FILE")
        return [x for n in names for x in PAIRS[n][1:]]
    if kind == "random":
        return _random_intents(int(spec.get("seed", 3)), int(spec.get("n", 100)))
    if kind == "long":
        return _long_intents(int(spec.get("seed", 5)))
    raise InputError(f"an intent set is a table with kind = changes, pairs, random or long; got {spec!r}",
                     code="E_EXERCISE_FILE")


def _all_intents(args: dict) -> list[tuple]:
    seen, out = set(), []
    for spec in _list(args, "sets"):
        for i in _intents(spec):
            if i not in seen:
                seen.add(i)
                out.append(i)
    return out


def _key_answer(mod, intent: tuple, process: int = A) -> tuple[str, object]:
    """("key", k), ("invalid", (symptom, why, k)) or ("error", (symptom, why)) for one call in ``process``."""
    got, err = _call(mod, "idempotency_key", *intent, process=process)
    if err is not None:
        return "error", ("key-raises", f"idempotency_key raised {err.kind or 'an error'}: {err.message}")
    if not isinstance(got, str) or not got:
        return "error", ("key-not-a-string", f"idempotency_key returned {_show(got, 40)}, not a non-empty string")
    if not _ID_RE.match(got):
        if len(got) > 200:
            return "invalid", ("key-too-long", f"it is {len(got)} characters, more than 200", got)
        return "invalid", ("key-bad-characters", "an id starts with a letter or digit and holds only letters, digits "
                                                 "and _ . : # / -", got)
    return "key", got


def _in_each_process(mod, intents: list[tuple], rounds: int = 1) -> list[list[tuple]]:
    """``out[k][i]``: intent i's answer at the k-th of ``rounds`` x processes consecutive calls, call
    k of every intent asked of process k mod (number of processes)."""
    procs = _processes(mod)
    n = procs * rounds
    out: list[list[tuple]] = [[] for _ in range(n)]
    for intent in intents:
        for k in range(n):
            out[k].append(_key_answer(mod, intent, k % procs))
    return out


def _keyed(mod, intents: list[tuple]) -> list[list[tuple]]:
    """Like :func:`_in_each_process` (``out[k][i]``: intent i's answer in process k), at half the
    calls when the key is the same in every process and call: a sample of the intents (a spread of
    them) is keyed twice in each process first; only if that shows a key that changes are all of
    them keyed in each process. (A key that changes between processes could otherwise hide, or
    fake, a collision depending on which process answered.)"""
    n = _processes(mod)
    step = max(1, len(intents) // 16)
    sample = list(dict.fromkeys(intents[:4] + intents[::step]))
    check = _in_each_process(mod, sample, rounds=2)
    if any(len({tuple(map(repr, check[k][j])) for k in range(len(check))}) > 1 for j in range(len(sample))):
        return _in_each_process(mod, intents)
    once = [_key_answer(mod, i, A) for i in intents]
    return [once] * n


def show_keys(mod, *intents, twice: bool = False) -> None:
    """Print the key the student's ``idempotency_key`` gives each intent (``twice``: each one twice in
    this process), then, for two intents, whether their keys are equal; it exits 1 when what it shows
    breaks a rule (a key that is no id, two keys for one intent, one key for two). What exercise 2's key
    reproduce lines run (``show_keys(keys, INTENT)``; one intent in two processes: the line runs twice,
    each process with its own hash seed)."""
    import sys

    got, broken = [], False
    for intent in intents:
        for _ in range(2 if twice else 1):
            try:
                k = mod.idempotency_key(*intent)
            except Exception as e:  # noqa: BLE001 - what the student's function does is what is shown
                print(f"{intent!r} -> raised {type(e).__name__}: {' '.join(str(e).split())[:200]}")
                broken = True
                continue
            got.append(k)
            print(f"{intent!r} -> {k!r}")
            if not isinstance(k, str) or not _ID_RE.match(k):
                print("  NOT a valid id: 1 to 200 characters of letters, digits and _ . : # / -, starting with a "
                      "letter or digit")
                broken = True
    if twice and len(got) == 2:
        print(f"  the same intent twice: the keys must be equal; they are {'equal' if got[0] == got[1] else 'NOT equal'}")
        broken = broken or got[0] != got[1]
    if len(intents) == 2 and len(got) == 2 and not twice:
        print(f"  two different intents: the keys must differ; they {'differ' if got[0] != got[1] else 'are EQUAL'}")
        broken = broken or got[0] == got[1]
    if broken:
        sys.exit(1)  # the reproduce line's exit status says it showed the failure


def _key_repro(*intents, twice: bool = False) -> str:
    args = ", ".join(_py(i) for i in intents) + (", twice=True" if twice else "")
    return try_line(2, f"import keys; from sim.course.judges.keys import show_keys; show_keys(keys, {args})")


def _key_repro_twice(intent: tuple) -> str:
    """One intent keyed in two processes (the line runs twice, each with its own hash seed)."""
    return try_line(2, f"import keys; from sim.course.judges.keys import show_keys; show_keys(keys, {_py(intent)})",
                    processes=2)


def _stability(mod, intents: list[tuple]) -> tuple[list[Broke], list[str]]:
    """Each intent once (intent j in process j mod 2, so each process sees them in its own order),
    then twice in each process: the same key every time? Returns what broke and, per intent, "same",
    "calls" (one process, two keys), "processes" or "error"."""
    n = _processes(mod)
    first = [_key_answer(mod, i, j % n) for j, i in enumerate(intents)]
    later = _in_each_process(mod, intents, rounds=2)
    broke: list[Broke] = []
    verdicts = []
    for j, intent in enumerate(intents):
        answers = [first[j]] + [later[k][j] for k in range(2 * n)]
        bad = next((a for a in answers if a[0] == "error"), None)
        if bad is not None:
            verdicts.append("error")
            broke.append(Broke(f"the intent {_show(intent)}", bad[1][1], symptoms=(bad[1][0],),
                               reproduce=_key_repro(intent)))
            continue
        keys = [a[1] if a[0] == "key" else a[1][2] for a in answers]
        if len(set(keys)) == 1:
            verdicts.append("same")
            continue
        within = any(later[k][j] != later[k + n][j] for k in range(n)) or keys[0] not in keys[1:]
        sym = "key-differs-between-calls" if within else "key-differs-between-processes"
        verdicts.append("calls" if within else "processes")
        shown = " and ".join(_show(k, 50) for k in list(dict.fromkeys(keys))[:2])
        if within:
            what = (f"keyed twice in one process it got two keys ({shown}): a key that changes from call to call (a "
                    "counter, the clock, randomness) names no intent, so a resend is never recognised")
            repro = _key_repro(intent, twice=True)
        else:
            what = (f"it got {shown} in two processes: a key that is not the same in every process (a restarted "
                    "agent, a replay or another replica computes it again) names no intent")
            repro = _key_repro_twice(intent)
        broke.append(Broke(f"the intent {_show(intent)}", what, symptoms=(sym,), reproduce=repro))
    return broke, verdicts


def _collision_symptom(a: tuple, b: tuple) -> str:
    diff = [f for f, x, y in zip(_FIELDS, a, b) if x != y]
    if len(diff) == 1 and str(a[_FIELDS.index(diff[0])]) != str(b[_FIELDS.index(diff[0])]) \
            and "" not in (a[_FIELDS.index(diff[0])], b[_FIELDS.index(diff[0])]):
        return "key-ignores-" + diff[0].split("_")[0]
    if any(isinstance(x, str) and len(x) > 60 for x in a + b):
        return "long-ids-collide"
    return "separator-collision"


# ------------------------------------------------------------------------------------------ key judges


@_student
def same_intent_same_key(sub: Path, mod, args: dict) -> Judged:
    """Rule: the key names the logical intent: the same intent gives the same key every time it
    is encoded, in any process. A key that is one and the same for every intent names none: the
    rule is not kept by it (:func:`_names_nothing`)."""
    intents = _all_intents(args)
    broke, _v = _stability(mod, intents)
    if not broke:
        broke = _names_nothing(mod, intents)
    return rule(len(intents), broke, "every intent got one key, every time, in every process")


def _names_nothing(mod, intents: list[tuple]) -> list[Broke]:
    """``[what broke]`` when every one of ``intents`` (two or more, all different) gets one and the
    same valid key in process A: a constant names no intent, so a rule about what a key of an intent
    is (the same every time, a valid id) cannot hold of it; ``[]`` otherwise."""
    if len(set(intents)) < 2:
        return []
    answers = [_key_answer(mod, i, A) for i in intents]
    keys = {v for kind, v in answers if kind == "key"}
    if len(keys) != 1 or any(kind != "key" for kind, _v in answers):
        return []
    key = next(iter(keys))
    return [Broke(f"all {len(intents)} intents", f"every one of them got the key {_show(key, 40)}: a key that is the "
                                                  "same for every intent names none, so this rule, about the key of an "
                                                  "intent, has nothing to hold of (key-injective says what it breaks)",
                  symptoms=("key-names-nothing",), reproduce=_key_repro(intents[0]))]


@_student
def key_injective(sub: Path, mod, args: dict) -> Judged:
    """Rule: different intents never share a key, whatever separators the ids hold and however long
    they are (judged within each process, so that a key that differs between processes neither
    hides a collision nor is blamed here for it)."""
    intents = _all_intents(args)
    got = _keyed(mod, intents)
    broke: list[Broke] = []
    reported: set = set()
    for k in range(len(got)):
        seen: dict = {}
        for intent, (kind, v) in zip(intents, got[k]):
            if kind == "error":
                if ("error", intent) not in reported:
                    reported.add(("error", intent))
                    broke.append(Broke(f"the intent {_show(intent)}", v[1], symptoms=(v[0],), reproduce=_key_repro(intent)))
                continue
            key = v if kind == "key" else v[2]
            other = seen.setdefault(key, intent)
            if other != intent and (other, intent) not in reported:
                reported.add((other, intent))
                sym = _collision_symptom(other, intent)
                only = f" (they differ only in {sym[len('key-ignores-'):]})" if sym.startswith("key-ignores-") else ""
                broke.append(Broke(f"{_show(other, 70)} and {_show(intent, 70)}",
                                   f"two different intents got the one key {_show(key, 60)}{only}: the second would be "
                                   "taken for a repeat of the first (a duplicate, or with another payload a conflict "
                                   "that freezes the task)", symptoms=(sym,), reproduce=_key_repro(other, intent)))
    return rule(len(intents), broke, "every intent got a key of its own")


@_student
def key_is_an_id(sub: Path, mod, args: dict) -> Judged:
    """Rule: every key is a valid id (1 to 200 characters of letters, digits and _ . : # / -,
    starting with a letter or digit), even when the ids it combines are 200 characters long. A
    constant key is not judged a key of its intents (:func:`_names_nothing`)."""
    intents = _all_intents(args)
    got = _keyed(mod, intents)
    broke: list[Broke] = []
    for j, intent in enumerate(intents):
        for k in range(len(got)):
            kind, v = got[k][j]
            if kind == "invalid":
                sym, why, key = v
                broke.append(Broke(f"the intent {_show(intent, 70)}", f"its key {_show(key, 60)} is not a valid id: {why}",
                                   symptoms=(sym,), reproduce=_key_repro(intent)))
                break
            if kind == "error":
                broke.append(Broke(f"the intent {_show(intent, 70)}", v[1], symptoms=(v[0],), reproduce=_key_repro(intent)))
                break
    if not broke:
        broke = _names_nothing(mod, intents)
    return rule(len(intents), broke, "every key is a valid id")


# ------------------------------------------------------------------------------------------ runs


class _KeysDesign:
    """The course's reference design with the student's keys: every intent of a run is named by
    ``idempotency_key(trace_id, task_id, sender, step, attempt, answers)``, computed in process A the
    first time the run sends the intent and in process B when it sends it again (a resend;
    :class:`~sim.course.judges.Resends`). One per run."""

    name = "your keys"

    def __init__(self, mod):
        from ...design import REFERENCE

        self.mod = mod
        self.ref = REFERENCE
        self.digest_scheme = REFERENCE.digest_scheme
        self.where = Resends()

    def idempotency_key(self, i) -> str:
        return self.mod.call("idempotency_key", i.trace_id, i.task_id, i.sender, i.step, i.attempt, i.answers,
                             process=self.where.process_of(i))

    def payload(self, i) -> dict:
        return self.ref.payload(i)

    def evidence_refs(self, i) -> list[str]:
        return self.ref.evidence_refs(i)


@dataclass(frozen=True)
class _RunOutcome:
    """What a run did, as far as keys can change it: each delivery's message, type and how intake
    took it (new, repeat, conflict, refused), the tasks' final states, the publications and the
    invariants that broke; or why it stopped."""

    stopped: str | None
    deliveries: tuple  # (message_id, type, class)
    states: tuple  # (task, state)
    publications: int
    broken: tuple  # invariant names


_CLASS = {"accepted": "new", "duplicate": "repeat", "late": "repeat", "conflict": "conflict"}
_RUNS: dict = per_submission({})
_RUNS_MAX = 256
_REF_RUNS: dict = {}


def _outcome(store) -> _RunOutcome:
    from ...invariants import check

    dels = tuple((d["message_id"], d["type"], _CLASS.get(d["decision"], "refused")) for d in store.deliveries())
    states = tuple(sorted((t["task_id"], t["state"]) for t in store.tasks()))
    pubs = sum(e["kind"] == "publish" for e in store.effects())
    broken = tuple(r.name for r in check(store) if not r.ok)
    return _RunOutcome(None, dels, states, pubs, broken)


def _run_case(case) -> tuple[str, list[str], int]:
    from ...errors import InputError

    if not isinstance(case, dict):
        raise InputError(f"a run case is a table (scenario, faults, seed); got {case!r}", code="E_EXERCISE_FILE")
    faults = case.get("faults", [])
    faults = [faults] if isinstance(faults, str) else [str(f) for f in faults]
    return str(case.get("scenario", "publish-report")), faults, int(case.get("seed", 0))


class _IntentKeys(_KeysDesign):
    """The course's design with a key that is exactly the six arguments the student's function
    gets, written out unambiguously: what any key that names intents (one key per intent, the same
    every time) makes of a run. (The course's own keys also tell a sender's re-sends apart, which
    the exercise's function is not given, so they are not the yardstick.)"""

    name = "intent keys"

    def __init__(self):
        super().__init__(None)

    def idempotency_key(self, i) -> str:
        import json

        whole = json.dumps([i.trace_id, i.task_id, i.sender, i.step, i.attempt, i.answers], separators=(",", ":"))
        return "k" + hashlib.sha256(whole.encode("utf-8")).hexdigest()[:40]


def _reference_run(scenario: str, faults: list[str], seed: int) -> _RunOutcome:
    k = (scenario, tuple(faults), seed)
    if k not in _REF_RUNS:
        from ...plugins import Plugins
        from ...runner import run_scenario
        from ...scenario import load_scenario

        store = run_scenario(load_scenario(scenario), seed=seed, faults=list(faults), strict_faults=False,
                             plugins=Plugins(design=_IntentKeys()))
        try:
            _REF_RUNS[k] = _outcome(store)
        finally:
            store.close()
    return _REF_RUNS[k]


def _student_run(sub: Path, mod, scenario: str, faults: list[str], seed: int) -> _RunOutcome:
    from ...errors import ProtolabError
    from ...plugins import Plugins
    from ...runner import run_scenario
    from ...scenario import load_scenario

    path = (sub / _FILE).resolve()
    h = hashlib.sha256()  # every Python file of the submission: keys.py may import a helper
    try:
        for p in sorted(path.parent.glob("*.py")):
            h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
        content = h.hexdigest()
    except OSError:
        content = ""
    k = (str(path), content, scenario, tuple(faults), seed)
    if k in _RUNS:
        return _RUNS[k]
    try:
        store = run_scenario(load_scenario(scenario), seed=seed, faults=list(faults), strict_faults=False,
                             plugins=Plugins(design=_KeysDesign(mod)))
    except ProtolabError as e:
        out = _RunOutcome(e.message, (), (), 0, ())
    else:
        try:
            out = _outcome(store)
        finally:
            store.close()
    if len(_RUNS) >= _RUNS_MAX:
        _RUNS.pop(next(iter(_RUNS)))
    _RUNS[k] = out
    return out


class _Here:
    """The student's module in this process, called as the judges call a remote one (``.call``)."""

    def __init__(self, mod):
        self.mod = mod

    def call(self, name, *args):
        return getattr(self.mod, name)(*args)


def show_run(mod, scenario: str, faults=(), seed: int = 0) -> None:
    """Play ``scenario`` with the student's keys (the course's design otherwise) and with keys that name
    intents, and print where the two runs part (exit 1 when they do): what exercise 2's run reproduce lines run
    (``show_run(keys, "publish-report", ["duplicate"], 0)``)."""
    from ...errors import ProtolabError
    from ...plugins import Plugins
    from ...runner import run_scenario
    from ...scenario import load_scenario

    want = _reference_run(scenario, list(faults), seed)
    try:
        store = run_scenario(load_scenario(scenario), seed=seed, faults=list(faults), strict_faults=False,
                             plugins=Plugins(design=_KeysDesign(_Here(mod))))
    except ProtolabError as e:
        print(f"{scenario} with your keys stopped: {e.message}")
        raise SystemExit(1) from None
    try:
        got = _outcome(store)
        for d in store.deliveries():
            print(f"  {d['message_id']:<6} {d['type']:<13} key {d['idempotency_key']!r}: {d['decision']}")
    finally:
        store.close()
    found = _compare(got, want)
    print(f"{scenario} with {' + '.join(faults) or 'no faults'} (seed {seed}): "
          + (f"DIFFERS from keys that name intents: {found[1]}" if found
             else "your keys decide it as keys that name intents do"))
    if found:
        raise SystemExit(1)  # the reproduce line's exit status says it showed the failure


def _run_repro(scenario: str, faults, seed: int) -> str:
    return try_line(2, f"import keys; from sim.course.judges.keys import show_run; show_run(keys, {scenario!r}, "
                       f"{list(faults)!r}, {seed})")


def _compare(got: _RunOutcome, want: _RunOutcome) -> tuple[str, str] | None:
    """(symptom, what) for the first way ``got`` differs from the course's run; None: it does not."""
    for i, (g, w) in enumerate(zip(got.deliveries, want.deliveries)):
        if g == w:
            continue
        if g[:2] != w[:2]:
            return "wrong-ending", (f"the run took another course at delivery {i + 1}: {g[0]} ({g[1]}) where keys "
                                    f"that name intents give {w[0]} ({w[1]})")
        took, should = g[2], w[2]
        sym = {("new", "repeat"): "repeat-taken-as-new", ("repeat", "new"): "new-taken-as-repeat",
               ("conflict", "new"): "false-conflict", ("conflict", "repeat"): "false-conflict"}.get((took, should))
        if sym is None:
            sym = "missed-conflict" if should == "conflict" else "wrong-ending"
        words = {"new": "new work", "repeat": "a repeat of an intent already recorded",
                 "conflict": "a conflict (one key, two payloads)", "refused": "refused"}
        return sym, (f"{g[0]} ({g[1]}) was taken as {words[took]}; with keys that name intents it is "
                     f"{words[should]}")
    if len(got.deliveries) != len(want.deliveries):
        return "wrong-ending", (f"the run had {len(got.deliveries)} deliveries where keys that name intents give "
                                f"{len(want.deliveries)}")
    if got.states != want.states:
        diff = ", ".join(f"{t} {s}" for t, s in got.states if (t, s) not in want.states)
        return "wrong-ending", f"the run ended with {diff} (not as with keys that name intents)"
    if got.publications != want.publications:
        return "wrong-ending", f"the report was published {got.publications} times, expected {want.publications}"
    extra = [b for b in got.broken if b not in want.broken]
    if extra:
        return "wrong-ending", f"{', '.join(extra)} broke"
    return None


@_student
def keys_in_the_run(sub: Path, mod, args: dict) -> Judged:
    """Rule: on real runs under the delivery and recovery faults, intake decides on the student's
    keys as on keys that name intents: each delivery taken as new work, a repeat or a conflict as
    with keys that name intents, every invariant holding, each run ending as it should."""
    cases = _list(args, "cases")
    broke: list[Broke] = []
    rows = []
    for case in cases:
        sc, faults, seed = _run_case(case)
        label = f"{sc} with {' + '.join(faults) if faults else 'no faults'}" + (f" (seed {seed})" if seed else "")
        got = _student_run(sub, mod, sc, faults, seed)
        want = _reference_run(sc, faults, seed)
        if got.stopped:
            found = ("run-stopped", f"the run stopped: {got.stopped}")
        else:
            found = _compare(got, want)
        rows.append(grid_row(sc, faults, [], found is None, label=label))
        if found is not None:
            broke.append(Broke(label, found[1], symptoms=(found[0],), reproduce=_run_repro(sc, faults, seed),
                               signature={"scenario": sc, "faults": faults}))
    if broke:  # a key that changes between calls or processes makes every run look wrong: say so
        why, _v = _stability(mod, [("R-1", "T-2", "writer", "result", 1, None)])
        if why and why[0].symptoms[0].startswith("key-differs"):
            first = broke[0]
            broke[0] = replace(first, what=f"{first.what} ({why[0].what})", symptoms=first.symptoms + why[0].symptoms,
                               reproduce=why[0].reproduce)
    return rule(len(cases), broke, "every run decided on your keys as on keys that name intents", grid=rows)


# ------------------------------------------------------------------------------------------ behaviour

_B_DIGEST_CASES = [{"scheme": s, "group": g} for s, g in _GROUPS if g not in ("random", "run-payloads")] + [
    {"scheme": "json-sorted-v1", "group": "random", "seed": 7, "n": 60},
    {"scheme": "json-sorted-v1", "group": "random", "seed": 23, "n": 40},
    {"scheme": "json-sorted-v1", "group": "run-payloads", "scenario": "publish-report"},
    {"scheme": "json-sorted-v1", "group": "run-payloads", "scenario": "fan-out"},
    {"scheme": "jcs-v2", "group": "random", "seed": 11, "n": 40},
    {"scheme": "jcs-v2", "group": "random", "seed": 29, "n": 30},
    {"scheme": "jcs-v2", "group": "run-payloads", "scenario": "publish-report"},
    {"scheme": "jcs-v2", "group": "run-payloads", "scenario": "fan-out"},
]
_B_SCHEMES = ("json-sorted-v1", "jcs-v2", "md5-v0", "", "JSON-SORTED-V1", "jcs-v1")
_B_INTENT_SETS = [{"kind": "changes"}, {"kind": "pairs"}, {"kind": "long", "seed": 5}, {"kind": "long", "seed": 9},
                  {"kind": "random", "seed": 3, "n": 150}, {"kind": "random", "seed": 17, "n": 300},
                  {"kind": "random", "seed": 13, "n": 40}]
_B_RUNS = [("publish-report", f, 0) for f in ([], ["resend"], ["duplicate"], ["crash"], ["transient"], ["late-failure"],
                                              ["conflicting-digest"], ["drop"], ["late-conflict"], ["delay"],
                                              ["resend:ack"], ["crash", "resend"])] + \
          [("fan-out", f, 0) for f in ([], ["resend"], ["crash"], ["transient"], ["conflicting-digest"])] + \
          [("publish-report", ["transient"], 1), ("fan-out", ["duplicate:ack"], 1)]


def behaviour(sub: Path) -> dict:
    """What the keys.py in folder ``sub`` does, by what the seed's rules care about.

    * ``digests``: for every value of every digest group of both schemes (more random values and
      run payloads than the tests), whether the digest is the scheme's, another one, a malformed
      one, json-sorted-v1's where jcs-v2 was asked for, or refused (and with what);
    * ``refusals``: what happens to each value without canonical bytes under each known scheme,
      and to a plain value under unknown schemes;
    * ``keys``: over the intents of every set (single-field changes, crafted pairs, long ids,
      random intents), in each host process: which intents share a key (partition labels), which
      keys are valid ids (or why not); and for the first 40 intents whether the key is the same
      every time and in every process;
    * ``runs``: each run of :data:`_B_RUNS` on the student's keys: how each delivery was taken
      (new, repeat, conflict, refused), the final states, publications and broken invariants.

    Abstracted away: the key strings and digest strings themselves (only which inputs share a key,
    and whether a digest is the scheme's, matter), error messages, and timing."""
    mod = _module(sub)
    try:
        digests = {}
        for case in _B_DIGEST_CASES:
            scheme, group, _w, _s, values = _group(case)
            digests[f"{scheme}/{group}/{case.get('seed', case.get('scenario', ''))}"] = \
                [_digest_answer(mod, v, scheme) for v in values]
        refused = {}
        for name, (_w, value, _s) in _REFUSALS.items():
            schemes = _B_SCHEMES if name == "plain" else ("json-sorted-v1", "jcs-v2")
            for scheme in schemes:
                got, err = _call(mod, "digest", value, scheme)
                refused[f"{name}/{scheme}"] = "digested" if err is None else \
                    ("ValueError" if "ValueError" in err.kinds else f"raised:{err.kind}")
        intents = []
        for spec in _B_INTENT_SETS:
            for i in _intents(spec):
                if i not in intents:
                    intents.append(i)
        got = _keyed(mod, intents)
        partitions, validity = [], []
        for answers in got:
            seen: dict = {}
            labels, valid = [], []
            for kind, v in answers:
                key = v if kind == "key" else (v[2] if kind == "invalid" else None)
                labels.append(seen.setdefault(key, len(seen)) if key is not None else "error")
                valid.append("ok" if kind == "key" else v[0])
            partitions.append(labels)
            validity.append(valid)
        _b, stable = _stability(mod, intents[:40])
        runs = {}
        for sc, faults, seed in _B_RUNS:
            out = _student_run(sub, mod, sc, faults, seed)
            runs[f"{sc}|{'+'.join(faults)}|{seed}"] = {
                "stopped": bool(out.stopped), "deliveries": [d[2] for d in out.deliveries],
                "messages": [d[:2] for d in out.deliveries], "states": [list(s) for s in out.states],
                "publications": out.publications, "broken": list(out.broken)}
        return {"digests": digests, "refusals": refused,
                "keys": {"partition": partitions, "validity": validity, "stable": stable}, "runs": runs}
    finally:
        mod.close()
