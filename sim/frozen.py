"""``quick_init``: a frozen dataclass whose ``__init__`` costs what a plain one's does.

A frozen dataclass's generated ``__init__`` sets each field through ``object.__setattr__`` (its own
``__setattr__`` refuses), a call per field. A delivery builds about fifteen of them (the envelope, the
context, the verdict, its events, the outcome), some ninety fields, on the hottest path of the kit.
:func:`quick_init` gives such a class an ``__init__`` that writes the fields into the instance's
``__dict__`` directly instead: the same signature (positional or keyword, the same defaults and
default factories, keyword-only fields kept keyword-only), the same instance, still frozen after
(assigning a field still raises ``FrozenInstanceError``). A class it cannot speak for (slots, a
``__post_init__``, an ``InitVar``, a field left out of ``__init__``) is refused at import, so nothing
is silently built differently.
"""

from __future__ import annotations

import dataclasses

__all__ = ["quick_init"]


def quick_init(cls):
    """Class decorator, applied above ``@dataclass(frozen=True)``: see the module."""
    if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:
        raise TypeError(f"quick_init wants a frozen dataclass, not {cls.__name__}")
    if "__slots__" in cls.__dict__ or hasattr(cls, "__post_init__"):
        raise TypeError(f"quick_init cannot speak for {cls.__name__}: slots or __post_init__")
    fields = dataclasses.fields(cls)  # (ClassVars are not fields)
    initvar = getattr(dataclasses, "_FIELD_INITVAR", None)
    if any(not f.init for f in fields) or any(f._field_type is initvar for f in cls.__dataclass_fields__.values()):
        raise TypeError(f"quick_init cannot speak for {cls.__name__}: a field outside __init__ or an InitVar")
    env: dict = {}
    params, kw_params, body = [], [], []
    for f in fields:
        name = f.name
        if f.default is not dataclasses.MISSING:
            env[f"_d_{name}"] = f.default
            text = f"{name}=_d_{name}"
        elif f.default_factory is not dataclasses.MISSING:
            env[f"_f_{name}"] = f.default_factory
            text = f"{name}=_NONE"
            body.append(f"    if {name} is _NONE: {name} = _f_{name}()")
        else:
            text = name
        (kw_params if f.kw_only else params).append(text)
    env["_NONE"] = object()
    signature = ", ".join(["self"] + params + (["*"] + kw_params if kw_params else []))
    sets = "".join(f"    _s[{f.name!r}] = {f.name}\n" for f in fields)
    source = f"def __init__({signature}):\n" + "".join(b + "\n" for b in body) + "    _s = self.__dict__\n" + sets
    exec(source, env)  # noqa: S102 - the source is built above from the class's own field names
    init = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init
    return cls
