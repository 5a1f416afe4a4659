"""`frozen`: the runner's frozen dataclasses, made for a third of what `dataclass` costs.

Python 3.11 compiles every method a dataclass generates from source text, one `exec` per
method and class. For the runner's ~80 frozen classes that was about 35 ms of every start
(a sixth of its imports, before the first request). `frozen` still has `dataclass` write
what must be each class's own code (`__init__` and the frozen guards); equality, hashing
and `repr` are three shared functions that read the class's fields by the same rules the
generated ones follow (`field(compare=..., hash=..., repr=...)`, a method the class
defines itself wins), so a `frozen` class behaves as `@dataclass(frozen=True)` would.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform

_T = TypeVar("_T")


_Fields = Callable[[object], tuple[Any, ...]]


def _getter(names: tuple[str, ...]) -> _Fields:
    """The named fields' values as a tuple, read by one C call (`attrgetter`)."""
    if not names:
        return lambda obj: ()
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return attrgetter(*names)


class _Plan:
    """The fields compared, hashed and shown, in field order, read once by `frozen` (a
    plain class: a dataclass here would pay the cost this module saves)."""

    __slots__ = ("compared", "hashed", "shown")

    def __init__(self, compared: _Fields, hashed: _Fields, shown: tuple[str, ...]) -> None:
        self.compared, self.hashed, self.shown = compared, hashed, shown


_PLANS: dict[type[Any], _Plan] = {}


def _plan_of(cls: type[Any]) -> _Plan:
    fields = dataclasses.fields(cls)
    return _Plan(
        compared=_getter(tuple(f.name for f in fields if f.compare)),
        hashed=_getter(tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))),
        shown=tuple(f.name for f in fields if f.repr),
    )


def _plan(obj: object) -> _Plan:
    cls = type(obj)
    plan = _PLANS.get(cls)
    if plan is not None:
        return plan
    for c in cls.__mro__:  # a plain subclass compares as its parent's methods would
        if c in _PLANS:
            return _PLANS[c]
    raise TypeError(f"{cls.__qualname__} is not a frozen class")


def _eq(self: object, other: object) -> object:  # bool, or NotImplemented
    if other.__class__ is not self.__class__:
        return NotImplemented
    fields = _plan(self).compared
    return bool(fields(self) == fields(other))


def _hash(self: object) -> int:
    return hash(_plan(self).hashed(self))


@reprlib.recursive_repr()
def _repr(self: object) -> str:
    shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in _plan(self).shown)
    return f"{self.__class__.__qualname__}({shown})"


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def frozen(cls: type[_T]) -> type[_T]:
    """`@dataclass(frozen=True)`, cheaper to make (see the module's docstring)."""
    own = cls.__dict__
    # A class that writes __eq__ without __hash__ gets __hash__ = None from Python; the
    # dataclass rule then still gives it the fields' hash, and so does this one.
    implicit = own.get("__hash__", 0) is None and "__eq__" in own
    for name, method in (("__eq__", _eq), ("__hash__", _hash), ("__repr__", _repr)):
        if name not in own or (name == "__hash__" and implicit):
            setattr(cls, name, method)
    made = dataclasses.dataclass(frozen=True, eq=False, repr=False)(cls)
    _PLANS[made] = _plan_of(made)
    return made
