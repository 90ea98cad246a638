"""sim.frozen.quick_init: the same instances as the dataclass's own __init__, still frozen."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from sim.design import Intent
from sim.envelope import Envelope
from sim.events import REGISTRY, EventDraft
from sim.frozen import quick_init
from sim.intake import IntentRecord, Move, TaskView, Verdict
from sim.planner import Context
from sim.runtime import Outcome


def _pair():
    def make():
        @dataclasses.dataclass(frozen=True)
        class Thing:
            a: int
            b: str = "b"
            c: list = dataclasses.field(default_factory=list)
            d: dict = dataclasses.field(default=None, compare=False)
            e: int = dataclasses.field(default=5, kw_only=True)
        return Thing
    return make(), quick_init(make())


def test_built_like_the_dataclass_own_init():
    plain, quick = _pair()
    for args, kw in [((1,), {}), ((1, "x", [2], {"k": 1}), {"e": 9}), ((), {"a": 3, "c": [1], "e": 0})]:
        p, q = plain(*args, **kw), quick(*args, **kw)
        assert dataclasses.asdict(p) == dataclasses.asdict(q)
        assert repr(p).split("(", 1)[1] == repr(q).split("(", 1)[1]
    assert quick(1).c is not quick(1).c  # a default factory called for each instance
    assert [(p.name, p.kind) for p in inspect.signature(plain.__init__).parameters.values()] == \
        [(p.name, p.kind) for p in inspect.signature(quick.__init__).parameters.values()]
    with pytest.raises(TypeError):
        quick(1, "b", [], None, 5)  # e stays keyword-only
    with pytest.raises(TypeError):
        quick()  # a stays required
    with pytest.raises(dataclasses.FrozenInstanceError):
        quick(1).a = 2
    assert quick(1) == quick(1) and quick(1) != quick(2)


def test_refuses_what_it_cannot_speak_for():
    @dataclasses.dataclass
    class NotFrozen:
        a: int

    @dataclasses.dataclass(frozen=True)
    class Posted:
        a: int

        def __post_init__(self):
            pass

    @dataclasses.dataclass(frozen=True, slots=True)
    class Slotted:
        a: int

    @dataclasses.dataclass(frozen=True)
    class Hidden:
        a: int
        b: int = dataclasses.field(default=0, init=False)

    for cls in (NotFrozen, Posted, Slotted, Hidden):
        with pytest.raises(TypeError):
            quick_init(cls)


@pytest.mark.parametrize("cls", [Envelope, Context, Outcome, TaskView, IntentRecord, Move, Verdict, EventDraft, Intent,
                                 *REGISTRY.values()], ids=lambda c: c.__name__)
def test_the_delivery_path_classes_take_their_fields_in_order(cls):
    """Every class a delivery builds takes its fields as its dataclass declares them (names, order,
    defaults, keyword-only), and stays frozen."""
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    fields = dataclasses.fields(cls)
    assert [p.name for p in params] == [f.name for f in fields]
    for p, f in zip(params, fields):
        assert (p.kind is p.KEYWORD_ONLY) == f.kw_only
        if f.default is not dataclasses.MISSING:
            assert p.default is f.default
        elif f.default_factory is dataclasses.MISSING:
            assert p.default is p.empty
    assert cls.__init__.__qualname__ == f"{cls.__qualname__}.__init__"
    assert cls.__init__.__code__.co_filename == "<string>" and "_s" in cls.__init__.__code__.co_varnames  # quick_init's


def test_an_intent_gets_its_own_body_and_context():
    """A sender's intent (built per message) takes fresh default dicts each time, as the dataclass's own
    ``__init__`` gives them, and stays frozen and hashable."""
    a, b = Intent("ack", "manager", "writer", "R-1", "T-1"), Intent("ack", "manager", "writer", "R-1", "T-1")
    assert a == b and hash(a) == hash(b)
    assert a.body == {} and a.body is not b.body and a.context is not b.context
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.type = "task_result"
