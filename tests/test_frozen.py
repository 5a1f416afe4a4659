"""runner/frozen.py: a `frozen` class behaves as `@dataclass(frozen=True)` would, in
equality, hashing, repr, immutability and the dataclasses functions, for every way the
runner's classes use fields; built twin by twin and compared over many values."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from runner.frozen import frozen


def twins(body: dict[str, Any], annotations: dict[str, Any]) -> tuple[type, type]:
    """The same class made twice, with `frozen` and with `dataclass(frozen=True)`, both
    named `Twin` so their reprs can be compared."""
    made = []
    for decorate in (frozen, dataclass(frozen=True)):
        ns = {**body, "__annotations__": dict(annotations), "__qualname__": "Twin"}
        made.append(decorate(type("Twin", (), ns)))
    return made[0], made[1]


FIELDS = {
    "plain": ({}, {"a": "int", "b": "str"}),
    "defaults": (
        {"b": "x", "c": field(default_factory=tuple)},
        {"a": "int", "b": "str", "c": "tuple[int, ...]"},
    ),
    "not_compared": ({"b": field(default="x", compare=False)}, {"a": "int", "b": "str"}),
    "not_hashed": ({"b": field(default="x", hash=False)}, {"a": "int", "b": "str"}),
    "hashed_only": ({"b": field(default="x", compare=False, hash=True)}, {"a": "int", "b": "str"}),
    "hidden": ({"b": field(default="x", repr=False)}, {"a": "int", "b": "str"}),
    "no_fields": ({}, {}),
}

VALUES: list[Any] = [0, 1, -7, "", "x", "it's", (), (1, 2), None, 2.5]


@pytest.mark.parametrize("kind", sorted(FIELDS))
def test_equality_hash_and_repr_match_the_dataclass_ones(kind: str) -> None:
    body, annotations = FIELDS[kind]
    ours, theirs = twins(body, annotations)
    names = list(annotations)
    rng = random.Random(kind)
    made: list[tuple[Any, Any]] = []
    for _ in range(60):
        values = {n: rng.choice(VALUES) for n in names}
        made.append((ours(**values), theirs(**values)))
    for (a, a2), (b, b2) in itertools.product(made, repeat=2):
        assert (a == b) == (a2 == b2)
        assert (a != b) == (a2 != b2)
        assert hash(a) == hash(a2)
        assert repr(a) == repr(a2)
    one, one2 = made[0]
    assert (one == object()) is (one2 == object()) is False
    assert one.__eq__(object()) is NotImplemented
    assert dataclasses.asdict(one) == dataclasses.asdict(one2)
    assert [f.name for f in dataclasses.fields(one)] == [f.name for f in dataclasses.fields(one2)]
    if names:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(one, names[0], 5)
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(one, names[0])
        changed = dataclasses.replace(one, **{names[0]: 99})
        assert changed != one and getattr(changed, names[0]) == 99
    assert copy.deepcopy(one) == one and copy.copy(one) == one


def test_a_class_s_own_methods_win_as_with_a_dataclass() -> None:
    @frozen
    class Own:
        a: int

        def __eq__(self, other: object) -> bool:
            return True

        def __repr__(self) -> str:
            return "mine"

    @dataclass(frozen=True)
    class Theirs:
        a: int

        def __eq__(self, other: object) -> bool:
            return True

    assert Own(1) == Own(2) and repr(Own(1)) == "mine"
    # Writing __eq__ without __hash__: the fields' hash, as the dataclass rule gives.
    assert hash(Own(1)) == hash((1,)) == hash(Theirs(1))

    @frozen
    class Hashed:
        a: int

        def __hash__(self) -> int:
            return 7

    assert hash(Hashed(1)) == 7


def test_subclasses_and_unhashable_fields_behave_as_dataclasses_do() -> None:
    @frozen
    class Base:
        a: int

    @frozen
    class Child(Base):
        b: int = 0

    class Plain(Child):  # not decorated: compares as its parent's methods would
        pass

    assert Child(1, 2) == Child(1, 2) != Child(1, 3)
    assert Base(1) != Child(1, 0) and Plain(1, 2) == Plain(1, 2) != Child(1, 2)
    assert (
        repr(Child(1, 2))
        == "test_subclasses_and_unhashable_fields_behave_as_dataclasses_do.<locals>.Child(a=1, b=2)"
    )

    @frozen
    class Holds:
        items: list[int]

    with pytest.raises(TypeError, match="unhashable"):
        hash(Holds([1]))


def test_a_value_that_holds_itself_is_shown_without_recursing() -> None:
    @frozen
    class Box:
        inside: list[Any]

    box = Box([])
    box.inside.append(box)
    assert repr(box).endswith("Box(inside=[...])")
