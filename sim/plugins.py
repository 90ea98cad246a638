"""Pluggable parts loaded from files: an envelope design, an intake (exercise 3's ``consume``, adapted
by :mod:`sim.consumer`, or a ``decide`` with the engine's signature), an effect-commit
rule, a machine table. ``protolab run/tui/compare/demo`` load them in-process (a student watching
their own code); the course's judge loads them the same way, but inside a sandboxed child process
(``sim.course.sandbox``), so student code never runs in the grader's process.

Every failure to load is a :class:`~sim.errors.InputError` with a one-line message: a file that
does not exist, does not import (with the exception it raised), or lacks what it must define.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from . import digest as _digest
from .errors import InputError, ProtolabError, raised_at
from .files import not_a_file
from .policy import Policy, get_policy

__all__ = ["load_module", "load_design", "load_intake", "load_effect_rule", "load_machine", "ModuleDesign",
           "Plugins", "file_tag"]

_counter = 0


def file_tag(path: str | Path) -> str:
    """``name sha256:12hex``: which file, and which bytes of it, a run used (kept in meta)."""
    p = Path(path)
    return f"{p.name} sha256:{hashlib.sha256(p.read_bytes()).hexdigest()[:12]}"


@contextlib.contextmanager
def no_bytecode():
    """Import without writing ``__pycache__`` beside the file: a learner's design or a student's
    submission is theirs, and loading it writes nothing into their folder."""
    before, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        yield
    finally:
        sys.dont_write_bytecode = before


def load_module(path: str | Path, what: str):
    """Import the Python file at ``path`` as a fresh module (never cached under its own name)."""
    global _counter
    p = Path(path)
    if (special := not_a_file(p, f"{what} file")) is not None:  # a folder, a FIFO or a device: said so
        raise special
    if not p.is_file():
        raise InputError(f"{what} file {p} does not exist", code="E_PLUGIN_MISSING")
    if p.suffix != ".py":
        raise InputError(f"{what} file {p} is not a .py file", code="E_PLUGIN_IMPORT")
    _counter += 1
    name = f"_protolab_plugin_{_counter}_{p.stem}"
    spec = importlib.util.spec_from_file_location(name, p)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py file always has a loader
        raise InputError(f"{what} file {p} cannot be imported", code="E_PLUGIN_IMPORT")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses in the file need their module registered
    try:
        with no_bytecode():
            spec.loader.exec_module(module)
    except SyntaxError as e:
        sys.modules.pop(name, None)
        raise InputError(f"{what} file {p} does not import: SyntaxError at line {e.lineno}: {e.msg}",
                         code="E_PLUGIN_IMPORT") from None
    except BaseException as e:  # anything the file does at import time (SystemExit included)
        sys.modules.pop(name, None)
        if isinstance(e, KeyboardInterrupt):
            raise
        if isinstance(e, SystemExit):
            raise InputError(f"{what} file {p} calls sys.exit({e.code!r}) when imported", code="E_PLUGIN_IMPORT") from None
        if isinstance(e, MemoryError):
            raise InputError(f"{what} file {p} ran out of memory while being imported", code="E_PLUGIN_IMPORT") from None
        msg = " ".join(str(e).split())[:200]
        raise InputError(f"{what} file {p} does not import: {type(e).__name__}: {msg}", code="E_PLUGIN_IMPORT") from None
    return module


def _need(module, path, what: str, names: tuple[str, ...], callable_=True):
    missing = [n for n in names if not hasattr(module, n) or (callable_ and not callable(getattr(module, n)))]
    if missing:
        kind = "function" if callable_ else "name"
        raise InputError(f"{what} file {path} lacks the {kind} {missing[0]!r} (it must define: {', '.join(names)})",
                         code="E_PLUGIN_INCOMPLETE")


@dataclass(frozen=True)
class ModuleDesign:
    """An envelope design read from a file's three functions and DIGEST_SCHEME."""

    name: str
    digest_scheme: str
    key_fn: Callable
    payload_fn: Callable
    refs_fn: Callable

    def idempotency_key(self, intent):
        return self.key_fn(intent)

    def payload(self, intent):
        return self.payload_fn(intent)

    def evidence_refs(self, intent):
        return self.refs_fn(intent)


def load_design(path: str | Path) -> ModuleDesign:
    m = load_module(path, "design")
    _need(m, path, "design", ("idempotency_key", "payload", "evidence_refs"))
    _need(m, path, "design", ("DIGEST_SCHEME",), callable_=False)
    scheme = m.DIGEST_SCHEME
    if scheme not in _digest.SCHEMES:
        raise InputError(f"design file {path}: DIGEST_SCHEME is {scheme!r}; expected one of: "
                         f"{', '.join(_digest.SCHEMES)}", code="E_PLUGIN_INCOMPLETE")
    return ModuleDesign(Path(path).name, scheme, m.idempotency_key, m.payload, m.evidence_refs)


#: What a file lacking ``consume`` is told (exercise 3 asks for it; see sim.consumer).
CONSUME_NEEDED = ("consume(delivery, task, recorded, allowed, missing_refs) -> dict, the consumer exercise 3 "
                  "asks for")


def load_intake(path: str | Path, *, consume_only: bool = False) -> Callable:
    """The runtime's intake from a file: its ``consume`` (exercise 3's interface on plain data,
    adapted by :func:`sim.consumer.adapt`), or, unless ``consume_only``, a ``decide`` with the
    engine's own signature (:func:`sim.intake.decide`; advanced use)."""
    from .consumer import adapt

    m = load_module(path, "intake")
    if callable(getattr(m, "consume", None)):
        return adapt(m.consume)
    if consume_only or not callable(getattr(m, "decide", None)):
        raise InputError(f"intake file {path} lacks the function 'consume' (it must define {CONSUME_NEEDED})",
                         code="E_PLUGIN_INCOMPLETE")
    return m.decide


def load_effect_rule(path: str | Path) -> Callable:
    m = load_module(path, "effect rule")
    _need(m, path, "effect rule", ("effect_key",))
    return m.effect_key


def load_machine(path: str | Path):
    from .machine import load_rulebook

    p = Path(path)
    if not p.is_file():
        raise InputError(f"machine file {p} does not exist", code="E_PLUGIN_MISSING")
    return load_rulebook(p)


@dataclass
class Plugins:
    """What a run plugs in instead of the reference parts (each ``None``: the reference)."""

    design: str | Path | None = None
    intake: str | Path | None = None
    effects: str | Path | None = None
    machine: str | Path | None = None

    def any(self) -> bool:
        return any(v is not None for v in (self.design, self.intake, self.effects, self.machine))

    def load(self, policy: str | Policy = "safe"):
        """(design or None, policy, rulebook or None), every file loaded and checked."""
        pol = get_policy(policy) if isinstance(policy, str) else policy
        if self.design is None or hasattr(self.design, "idempotency_key"):
            design = self.design  # None, or a design object already made (a judge's RemoteDesign)
        else:
            design = load_design(self.design)
        if self.intake is not None:
            pol = replace(pol, name=pol.name, decide=_guarded(load_intake(self.intake)))
        if self.effects is not None:
            pol = replace(pol, effect_rule=load_effect_rule(self.effects))
        rulebook = load_machine(self.machine) if self.machine is not None else None
        return design, pol, rulebook

    def meta(self) -> dict:
        """What meta records about the plugged-in files (nothing for the reference parts)."""
        out = {}
        for k in ("design", "intake", "effects", "machine"):
            v = getattr(self, k)
            if v is not None:
                out[k] = f"{v.name} (remote)" if hasattr(v, "idempotency_key") else file_tag(v)
        return out


def _guarded(decide: Callable) -> Callable:
    """A student's ``decide`` that raises is an error with a line, not a traceback."""

    def run(env, task, prior, rules, unresolved=frozenset()):
        try:
            return decide(env, task, prior, rules, unresolved)
        except ProtolabError:
            raise
        except (Exception, SystemExit) as e:
            msg = " ".join(str(e).split())[:200]
            what = f"called sys.exit({e.code!r})" if isinstance(e, SystemExit) else f"raised {type(e).__name__}"
            raise ProtolabError(f"the intake {run.__name__} {what} on {env.message_id}: {msg}{raised_at(e)}",
                                code="E_INTAKE_RAISED") from e

    run.__name__ = getattr(decide, "__name__", "decide")
    return run
