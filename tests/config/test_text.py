"""runner/config/text.py: the wording helpers of task-file messages: a value's kind in
YAML words, escaped and shortened text, dotted paths, and the line of a path or of the
nearest field that encloses it."""

from __future__ import annotations

import datetime

import pytest

from runner.config.text import describe, dotted, esc, line_for, short


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (None, "null"),
        (True, "a boolean (true; YAML reads yes/no/on/off as booleans)"),
        (3, "an integer"),
        (2.5, "a number with a fraction"),
        ("x", "a string"),
        (datetime.date(2026, 1, 31), "a date"),
        (datetime.datetime(2026, 1, 31, 8, 0, tzinfo=datetime.UTC), "a date"),
        (b"\x00", "binary data"),
        ([1], "a list"),
        ({"a": 1}, "a mapping"),
        ({1}, "a set"),
        (object(), "an unsupported value"),
    ],
)
def test_describe_speaks_yaml_never_python(value: object, said: str) -> None:
    assert describe(value) == said


def test_esc_keeps_a_message_on_one_line_and_leaves_printable_text_alone() -> None:
    assert esc("caf\u00e9 ok") == "caf\u00e9 ok"
    assert esc("a\nb\x1b[31m\u2028") == "a\\nb\\x1b[31m\\u2028"


def test_short_cuts_long_text_at_the_limit() -> None:
    assert short("x" * 60) == "x" * 60
    assert short("x" * 61) == "x" * 60 + "..."
    assert short("abcdef", 3) == "abc..."


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ((), "(top level)"),
        (("tasks", 0, "limits", "max_requests"), "tasks[0].limits.max_requests"),
        (("matrix", "model", 2), "matrix.model[2]"),
        (("providers", ""), "providers.''"),
        (("secrets\n", "x\x00"), "secrets\\n.x\\x00"),
    ],
)
def test_dotted_names_a_path_as_a_user_writes_it(path: tuple[str | int, ...], said: str) -> None:
    assert dotted(path) == said


def test_line_for_falls_back_to_the_nearest_enclosing_field() -> None:
    lines: dict[tuple[str | int, ...], int] = {(): 1, ("tasks",): 2, ("tasks", 0): 3}
    assert line_for(("tasks", 0, "limits", "timeout_s"), lines) == 3
    assert line_for(("defaults", "model"), lines) == 1
    assert line_for(("tasks",), {}) is None
