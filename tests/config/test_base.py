"""runner/config/base.py: the strict scalars YAML 1.1 would otherwise let through (a
boolean as a number, an infinity), a path that is written empty, and the model base
every task-file section shares (frozen, unknown fields refused)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from runner.config.base import Frozen, PathText, StrictBool, StrictFloat, StrictInt


class Sample(Frozen):
    count: StrictInt = 0
    ratio: StrictFloat = 0.0
    flag: StrictBool = False
    path: PathText | None = None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("count", True),
        ("count", "5"),
        ("count", 5.0),
        ("ratio", float("inf")),
        ("ratio", float("nan")),
        ("ratio", "1.5"),
        ("flag", 1),
        ("flag", "yes"),
    ],
)
def test_strict_scalars_refuse_what_yaml_would_pass_off_as_them(field: str, value: object) -> None:
    with pytest.raises(ValidationError):
        Sample.model_validate({field: value})


def test_a_float_field_takes_a_whole_number() -> None:
    assert Sample.model_validate({"ratio": 60}).ratio == 60.0


def test_an_empty_path_says_to_leave_the_field_out() -> None:
    with pytest.raises(ValidationError) as caught:
        Sample.model_validate({"path": ""})
    assert "must not be empty; leave the field out to use the default" in str(caught.value)
    assert Sample.model_validate({"path": "a/b"}).path == "a/b"


def test_sections_are_frozen_and_refuse_unknown_fields() -> None:
    s = Sample()
    with pytest.raises(ValidationError, match="frozen"):
        s.count = 3
    with pytest.raises(ValidationError) as caught:
        Sample.model_validate({"cuont": 1})
    assert caught.value.errors()[0]["type"] == "extra_forbidden"
