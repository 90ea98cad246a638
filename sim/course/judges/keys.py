"""Judges of exercise 2, keys and digests: the student's ``digest`` and ``idempotency_key`` run in
their own host process (:mod:`sim.course.remote`); digests are compared with the engine's own
(:mod:`sim.digest`, pinned by RFC 8785's vectors and the course's), keys are judged by what a key
must do (same intent, same key, in any process; different intents, different keys, whatever the
ids hold; always a valid id) and then by the simulator: the student's keys name every intent of a
run under the delivery faults, and the invariants judge the result.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from . import Judged, failed, partial, passed

_FILE = "keys.py"
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:#/-]{0,199}$")
_ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:#/-"


class _Student:
    """The student's module in its own process; ``call`` returns ``(value, None)`` or ``(None, error)``."""

    def __init__(self, sub: Path):
        from ..remote import RemoteModule

        self.host = RemoteModule(sub / _FILE, "keys")
        for fn in ("digest", "idempotency_key"):
            if self.host.names.get(fn) != "function":
                self.host.close()
                from ...errors import InputError

                raise InputError(f"keys.py has no function {fn!r}", code="E_PLUGIN_INCOMPLETE")

    def call(self, fn: str, *args):
        from ..remote import RemoteError

        try:
            return self.host.call(fn, *args), None
        except RemoteError as e:
            return None, e

    def close(self) -> None:
        self.host.close()


def _with_student(fn):
    import functools

    @functools.wraps(fn)
    def judge(sub: Path, args: dict) -> Judged:
        st = _Student(sub)
        try:
            return fn(st, args)
        finally:
            st.close()

    return judge


def _show(value, limit: int = 90) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ------------------------------------------------------------------------------------- digests
#
# Each group is one lesson: a digest that gets one group wrong disagrees with every other program
# about every payload that touches it.


def _run_payloads() -> list:
    """The payloads of a real run of the simulator (every message of publish-report)."""
    from ...runner import run_scenario
    from ...scenario import load_scenario

    store = run_scenario(load_scenario("publish-report"))
    try:
        return [m["payload"] for m in store.messages()]
    finally:
        store.close()


def _random_values(seed: int, n: int) -> list:
    rng = random.Random(seed)
    words = ["a", "B", "é", "ß", "日本", "\U0001f600", "x y", 'q"uote', "back\\slash", "tab\t", "\u2028", ""]

    def value(depth: int):
        kind = rng.randrange(8 if depth < 3 else 5)
        if kind == 0:
            return rng.choice(words) + rng.choice(words)
        if kind == 1:
            return rng.randrange(-10**6, 10**6)
        if kind == 2:
            return rng.choice([0.5, -1.25, 3.0, 1e-7, 123456.789, 2.5e20])
        if kind == 3:
            return rng.choice([True, False, None])
        if kind == 4:
            return rng.randrange(10**12)
        if kind in (5, 6):
            return {rng.choice(words) + str(i): value(depth + 1) for i in range(rng.randrange(4))}
        return [value(depth + 1) for _ in range(rng.randrange(4))]

    return [{"v": value(0), "k": value(1)} for _ in range(n)]


def _groups(scheme: str) -> list[tuple[str, list]]:
    if scheme == "json-sorted-v1":
        return [
            ("object keys in sorted order, whatever order they were written in",
             [{"b": 1, "a": 2}, {"zeta": {"y": 1, "x": 2}, "alpha": []}, {"B": 1, "a": 2, "_": 3}]),
            ("no whitespace between items or after keys", [[1, 2, {"a": [3, 4]}], {"a": "b c"}]),
            ("non-ASCII text written as itself in UTF-8, not as \\u escapes",
             [{"name": "café"}, ["日本語", "\U0001f600"], {"é": "ß"}]),
            ("escapes only where JSON requires them", [{"q": 'say "hi"', "b": "a\\b", "t": "tab\there", "n": "line\n"}]),
            ("integers in full; 1 and 1.0 are different payloads",
             [{"n": 1}, {"n": 1.0}, {"n": 2**64 + 1}, {"n": -0.0}, {"n": 1e21}, {"n": 0.1}]),
            ("true, false and null; nested values", [{"t": True, "f": False, "z": None, "l": [[], {}, [None]]}]),
            ("random values", _random_values(7, 60)),
            ("the payloads of a real simulator run", _run_payloads()),
        ]
    return [
        ("object keys in UTF-16 code-unit order (RFC 8785), not code-point order",
         [{"\ue000": 1, "\U0001f600": 2}, {"a": 1, "\U0001f600": 2, "ÿ": 3}]),
        ("numbers in ECMAScript form: 1.0 is 1, -0 is 0, 1e21 is 1e+21, 1e-7 stays 1e-7",
         [{"n": 1.0}, {"n": -0.0}, {"n": 1e21}, {"n": 1e-7}, {"n": 0.1}, {"n": 123456789.0}, {"n": 2**53 - 1}]),
        ("non-ASCII text written as itself in UTF-8", [{"name": "café"}, ["日本語"]]),
        ("random values", _random_values(11, 40)),
        ("the payloads of a real simulator run", _run_payloads()),
    ]


def _digest_groups(st: _Student, scheme: str) -> Judged:
    from ... import digest as ref

    groups = _groups(scheme)
    bad = []
    for title, values in groups:
        for v in values:
            want = ref.digest(v, scheme)
            got, err = st.call("digest", v, scheme)
            if got != want:
                wrote = f"raised {err.kind}: {err.message}" if err else f"returned {_show(got, 40)}"
                shown = ref.canonical_bytes(v, scheme).decode("utf-8")
                bad.append((title, f"for {_show(v)} under {scheme} the bytes hashed are {_show(shown, 120)} "
                                   f"(digest {want[:19]}…); yours {wrote}", v))
                break
    if not bad:
        n = sum(len(v) for _t, v in groups)
        return passed(f"{n} values in {len(groups)} groups digest exactly as {scheme} does")
    title, msg, v = bad[0]
    more = f" (and {len(bad) - 1} more group(s): {'; '.join(t for t, *_ in bad[1:])})" if len(bad) > 1 else ""
    return partial((len(groups) - len(bad)) / len(groups), f"«{title}»: {msg}{more}",
                   witness={"failing_groups": [t for t, *_ in bad]},
                   reproduce=_digest_repro(v, scheme))


def _digest_repro(v, scheme: str) -> str:
    shown = repr(v) if len(repr(v)) <= 160 and repr(v).isascii() else "VALUE"
    return (f"python -c \"import sys; sys.path.insert(0, '{{dir}}'); import keys; "
            f"print(keys.canonical_bytes({shown}, '{scheme}'))\"")


@_with_student
def digest_v1(st: _Student, args: dict) -> Judged:
    """``digest(value, "json-sorted-v1")`` equals the engine's for every group of values."""
    return _digest_groups(st, "json-sorted-v1")


@_with_student
def digest_jcs(st: _Student, args: dict) -> Judged:
    """``digest(value, "jcs-v2")`` equals RFC 8785's for every group, and integers a double cannot
    carry are refused."""
    judged = _digest_groups(st, "jcs-v2")
    refused = _refusals(st, [("an integer of 2**53 (a double cannot carry it exactly)", {"n": 2**53}, "jcs-v2"),
                             ("an integer of -(2**53)", [-(2**53)], "jcs-v2")])
    if refused is None:
        return judged
    msg = refused if judged.score == 1 else f"{judged.message}; {refused}"
    return partial(judged.score * 0.75, msg, witness=judged.witness, reproduce=judged.reproduce)


def _refusals(st: _Student, cases) -> str | None:
    """None when every case raised a ValueError; otherwise what went wrong."""
    wrong = []
    for what, value, scheme in cases:
        got, err = st.call("digest", value, scheme)
        if err is None:
            wrong.append(f"{what} under {scheme} was digested ({_show(got, 30)}); it must be refused with a ValueError")
        elif "ValueError" not in err.kinds:
            wrong.append(f"{what} under {scheme} raised {err.kind}, which is not a ValueError")
    if not wrong:
        return None
    return f"{len(wrong)} of {len(cases)} refusals missing: " + "; ".join(wrong[:2])


@_with_student
def refusals(st: _Student, args: dict) -> Judged:
    """What has no canonical bytes is refused with a ValueError, under both schemes."""
    cases = []
    for scheme in ("json-sorted-v1", "jcs-v2"):
        cases += [
            ("NaN", {"score": float("nan")}, scheme),
            ("Infinity", [float("inf")], scheme),
            ("-Infinity", {"a": {"b": float("-inf")}}, scheme),
            ("a string holding a lone surrogate", {"text": "broken \ud800 half"}, scheme),
            ("a key holding a lone surrogate", {"\udc00": 1}, scheme),
        ]
    cases.append(("an unknown scheme", {"a": 1}, "md5-v0"))
    n = len(cases)
    msg = _refusals(st, cases)
    if msg is None:
        return passed(f"all {n} values without canonical bytes are refused with a ValueError")
    missing = int(msg.split(" ", 1)[0])
    return partial((n - missing) / n, msg)


# ------------------------------------------------------------------------------------------ keys

_BASE = ("R-7", "T-2", "researcher", "result", 1, None)


def _key(st: _Student, args: tuple) -> tuple[str | None, str | None]:
    """(key, problem)."""
    got, err = st.call("idempotency_key", *args)
    if err is not None:
        return None, f"idempotency_key{_show(args)} raised {err.kind}: {err.message}"
    if not isinstance(got, str):
        return None, f"idempotency_key{_show(args)} returned {type(got).__name__}, not a string"
    if not _ID_RE.match(got):
        why = (f"it is {len(got)} characters, more than 200" if len(got) > 200 else
               "it must start with a letter or digit and hold only letters, digits and _ . : # / -")
        return None, f"idempotency_key{_show(args)} = {_show(got, 60)} is not a valid id: {why}"
    return got, None


@_with_student
def key_shape(st: _Student, args: dict) -> Judged:
    """A key is a valid id, the same for the same intent (in another process too), and changes
    with each part of the intent."""
    problems, checks = [], 0
    base, p = _key(st, _BASE)
    checks += 1
    if p:
        return failed(p)
    again, _ = _key(st, _BASE)
    checks += 1
    if again != base:
        problems.append(f"the same intent gave two keys in one process: {base} and {again}")
    other = _Student(st.host.path.parent)
    try:
        elsewhere, _ = _key(other, _BASE)
    finally:
        other.close()
    checks += 1
    if elsewhere != base:
        problems.append(f"the same intent gave {base} in one process and {elsewhere} in another: a key must not "
                        "depend on hash(), the clock, a counter or randomness")
    for i, (name, value) in enumerate([("trace_id", "R-8"), ("task_id", "T-3"), ("sender", "writer"),
                                       ("step", "start"), ("attempt", 2), ("answers", "M-4")]):
        changed = list(_BASE)
        changed[i] = value
        k, p = _key(st, tuple(changed))
        checks += 1
        if p:
            problems.append(p)
        elif k == base:
            problems.append(f"changing {name} to {value!r} kept the key {base}: two intents would share it, and the "
                            "second would be taken for a duplicate of the first")
    if not problems:
        return passed(f"keys are valid ids, stable across processes, and change with every part of the intent ({checks} checks)")
    return partial((checks - len(problems)) / checks, f"{len(problems)} of {checks} checks fail: " + "; ".join(problems[:2]))


_INJECTION_PAIRS = [
    ("a separator inside the trace id", ("R:1", "T-2", "manager", "request", 1, None), ("R", "1:T-2", "manager", "request", 1, None)),
    ("a separator inside the task id", ("R-7", "T:researcher", "x", "result", 1, None), ("R-7", "T", "researcher:x", "result", 1, None)),
    ("digits running into the attempt", ("R-7", "T-1", "writer", "start", 11, None), ("R-7", "T-11", "writer", "start", 1, None)),
    ("no answer and an answer spelled None", ("R-7", "T-2", "manager", "ack", 1, None), ("R-7", "T-2", "manager", "ack", 1, "None")),
    ("a slash inside an id", ("R/7", "T-2", "manager", "request", 1, None), ("R", "7/T-2", "manager", "request", 1, None)),
    ("a hash sign inside an id", ("R-7", "T#2", "manager", "cancel", 1, None), ("R-7", "T", "2#manager", "cancel", 1, None)),
    ("an answer that looks like a step", ("R-7", "T-2", "manager", "ack", 1, "result"), ("R-7", "T-2", "manager", "ack:result", 1, None)),
]


def _random_intents(seed: int, n: int) -> list[tuple]:
    rng = random.Random(seed)
    alphabet = "AB1:/#.-_"

    def ident():
        return rng.choice("ABR") + "".join(rng.choice(alphabet) for _ in range(rng.randrange(3)))

    out = set()
    while len(out) < n:
        out.add((ident(), ident(), ident(), rng.choice(["request", "start", "result", "ack", "cancel"]),
                 rng.randrange(1, 12), rng.choice([None, ident()])))
    return sorted(out, key=repr)


def _distinct(st: _Student, intents: list[tuple]) -> tuple[int, list[str]]:
    """How many intents got a key of their own, and what went wrong first."""
    seen: dict[str, tuple] = {}
    problems, ok = [], 0
    for args in intents:
        k, p = _key(st, args)
        if p:
            problems.append(p)
            continue
        if k in seen and seen[k] != args:
            problems.append(f"two intents share the key {_show(k, 60)}: {_show(seen[k])} and {_show(args)}")
            continue
        seen[k] = args
        ok += 1
    return ok, problems


@_with_student
def key_injective(st: _Student, args: dict) -> Judged:
    """Different intents never share a key, whatever separators the ids hold."""
    bad = []
    for what, a, b in _INJECTION_PAIRS:
        ka, pa = _key(st, a)
        kb, pb = _key(st, b)
        if pa or pb:
            bad.append(pa or pb)
        elif ka == kb:
            bad.append(f"{what}: {_show(a)} and {_show(b)} both get {_show(ka, 60)}")
    intents = _random_intents(int(args.get("seed", 3)), int(args.get("n", 600)))
    ok, problems = _distinct(st, intents)
    score = 0.5 * (len(_INJECTION_PAIRS) - len(bad)) / len(_INJECTION_PAIRS) + 0.5 * (1.0 if not problems else 0.0)
    if not bad and not problems:
        return passed(f"{len(_INJECTION_PAIRS)} crafted pairs and {len(intents)} random intents all get keys of their own")
    msgs = bad[:2] + problems[:1]
    return partial(score, f"{len(bad)} of {len(_INJECTION_PAIRS)} crafted pairs collide"
                          + (f", and {len(problems)} of {len(intents)} random intents" if problems else "")
                          + ": " + "; ".join(msgs),
                   witness={"pairs": bad[:5], "random": problems[:5]})


@_with_student
def key_long_ids(st: _Student, args: dict) -> Judged:
    """Ids of up to 200 characters (the envelope's limit) still give valid, distinct keys."""
    rng = random.Random(5)

    def ident(n: int) -> str:
        return rng.choice("RT") + "".join(rng.choice(_ID_CHARS) for _ in range(n - 1))

    long_a, long_b = ident(200), ident(200)
    intents = [
        (long_a, ident(200), "manager", "request", 1, None),
        (long_a, ident(200), "manager", "request", 1, None),
        (long_a, long_b, "researcher", "result", 3, ident(200)),
        (long_a, long_b, "researcher", "result", 3, ident(200)),
        # the same 120-character head, different tails: a key cut short would make these one
        (long_a[:120] + "-x", long_b, "writer", "start", 1, None),
        (long_a[:120] + "-y", long_b, "writer", "start", 1, None),
    ]
    ok, problems = _distinct(st, intents)
    if not problems:
        return passed(f"{len(intents)} intents with ids of up to 200 characters get valid keys of their own")
    return partial(ok / len(intents), f"{len(problems)} of {len(intents)} long-id intents fail: " + "; ".join(problems[:2]))


class _KeysDesign:
    """The course's reference design with the student's keys: every intent of a run is named by
    ``idempotency_key(trace_id, task_id, sender, step, attempt, answers)``."""

    name = "your keys"

    def __init__(self, st: _Student):
        from ...design import REFERENCE

        self.st = st
        self.ref = REFERENCE
        self.digest_scheme = REFERENCE.digest_scheme

    def idempotency_key(self, i) -> str:
        return self.st.host.call("idempotency_key", i.trace_id, i.task_id, i.sender, i.step, i.attempt, i.answers)

    def payload(self, i) -> dict:
        return self.ref.payload(i)

    def evidence_refs(self, i) -> list[str]:
        return self.ref.evidence_refs(i)


@_with_student
def keys_in_the_run(st: _Student, args: dict) -> Judged:
    """The student's keys name every intent of real runs under the delivery and recovery faults:
    every invariant holds and each run ends as under the course's keys."""
    from ...design import DesignError
    from .design import _judge_run

    design = _KeysDesign(st)
    runs = [(sc, list(f)) for sc in args.get("scenarios", ["publish-report"]) for f in args["faults"]]
    from . import grid_row, signature_of

    bad, rows = [], []
    for sc, faults in runs:
        try:
            ok, msg, witness = _judge_run(st.host.path.parent, sc, faults, 0, design=design, rows=rows)
        except DesignError as e:
            ok, msg, witness = False, f"{sc} with {' + '.join(faults)}: {e.message}", None
            rows.append(grid_row(sc, faults, [], False))
        if not ok:
            bad.append((sc, faults, msg, witness))
    if not bad:
        return passed(f"all {len(runs)} runs with your keys hold every invariant and end as they should", grid=rows)
    sc, faults, msg, witness = bad[0]
    more = f" ({len(bad) - 1} more run(s) failed)" if len(bad) > 1 else ""
    return partial((len(runs) - len(bad)) / len(runs), msg + more, witness=witness, grid=rows,
                   signature=signature_of(sc, faults, witness),
                   reproduce="python -c \"import sys; sys.path.insert(0, '{dir}'); import keys; "
                             "print(keys.idempotency_key('R-1', 'T-1', 'researcher', 'start', 2, None))\"")
