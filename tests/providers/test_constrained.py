"""Constrained mode's contract with a small model (runner/providers/constrained.py): the
answer shapes it may write, bounded to its output budget, and the system-message text
that tells it the format and each tool."""

from __future__ import annotations

from typing import Any

import pytest

from runner.errors import AnswerTruncated
from runner.providers.constrained import (
    ANSWER_FORMAT,
    Constrained,
    answer_branches,
    constrained_schema,
    constrained_tools_text,
)
from tests.support.local_model import SHELL

PATCH: dict[str, Any] = {"type": "custom", "name": "apply_patch", "description": " Edits. "}


@pytest.mark.parametrize(
    ("choice", "keys"),
    [
        ("none", [["answer"]]),
        ("required", [["tool", "arguments"]]),
        ("auto", [["tool", "arguments"], ["answer"]]),
    ],
)
def test_tool_choice_picks_branches(choice: str, keys: list[list[str]]) -> None:
    schema = constrained_schema([SHELL], tool_choice=choice)
    branches = schema.get("oneOf", [schema])
    assert [list(b["properties"]) for b in branches] == keys


def test_all_arguments_when_asked() -> None:
    schema = constrained_schema([SHELL], settings=Constrained(required_args_only=False))
    assert list(schema["oneOf"][0]["properties"]["arguments"]["properties"]) == [
        "command",
        "workdir",
        "timeout_ms",
    ]


def test_a_custom_tool_takes_its_input_as_one_string_and_nameless_tools_are_left_out() -> None:
    tools = [SHELL, PATCH, {"type": "function"}, {"type": "web_search", "name": "w"}]
    branches = answer_branches(tools)
    assert [b["properties"].get("tool") for b in branches] == [
        {"const": "shell"},
        {"const": "apply_patch"},
        None,
    ]
    assert branches[1]["properties"]["input"] == {"type": "string"}
    assert all(b["additionalProperties"] is False for b in branches)


def test_required_with_no_tools_still_allows_an_answer() -> None:
    assert [list(b["properties"]) for b in answer_branches([], tool_choice="required")] == [
        ["answer"]
    ]


def test_a_structured_answer_replaces_the_string_answer() -> None:
    verdict = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    schema = constrained_schema([], answer=verdict)
    assert "oneOf" not in schema and schema["properties"]["answer"]["properties"] == {
        "ok": {"type": "boolean"}
    }


def test_a_budget_too_small_for_any_answer_is_refused_with_the_fix() -> None:
    with pytest.raises(AnswerTruncated, match=r"max_output_tokens=1 is too small .* raise it"):
        constrained_schema([SHELL], budget=1)


def test_the_tools_text_tells_the_format_and_each_tools_arguments() -> None:
    text = constrained_tools_text([SHELL, PATCH])
    assert text.startswith(ANSWER_FORMAT + "\n\n# Tools\n## shell\n")
    assert 'Arguments: {"command": string[] (required)}' in text
    assert "workdir" not in text  # optional arguments are not asked for
    assert '## apply_patch\nEdits.\nUse: {"tool":"apply_patch","input":"..."}' in text
    everything = constrained_tools_text([SHELL], Constrained(required_args_only=False))
    assert '"workdir": string, "timeout_ms": number}' in everything


def test_without_tools_the_text_asks_only_for_an_answer_of_the_schema() -> None:
    shape = {"type": "integer"}
    assert constrained_tools_text([], answer=shape) == (
        'Answer with exactly one JSON object: {"answer":"<text>"}'
        '\nThe answer must match this JSON schema: {"type":"integer"}'
    )
