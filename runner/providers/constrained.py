"""Constrained mode's contract with a small model: what it is told (the answer format and
each tool, in the system message) and what it is allowed to answer (one JSON object, a
`oneOf` of one shape per tool and the answer shape). Pure; `chat_wire` renders the history
and reads the answers back.

Apart from the wire so that the pre-flight check can size answers without the wire.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runner.errors import AnswerTruncated
from runner.frozen import frozen
from runner.items import JSON, dumps
from runner.providers.grammar import narrow

TOOL_RESULT_HEADER = "[tool output: {name}]"
"""First line of the turn that carries a tool's output back in constrained mode."""

DEFAULT_TOOL_RESULT_NOTE = 'Now reply to the user with {"answer":"..."}.'
"""Appended after each tool output in constrained mode. Left alone, SmolLM2 repeats the
same call: with no note it answered in 0 of 40 probe histories, with "Now reply to the
user." in 25 of 40, with this line in 76 of 80 (the misses: tasks that quote a whole JSON
call, which it copies again). It also means one tool call per user turn: set
`tool_result_note=""` for models that can chain calls."""

ANSWER_FORMAT = """# Answer format
Answer with exactly one JSON object.
To use a tool: {"tool":"<tool>","arguments":{...}}
To answer the user: {"answer":"<text>"}"""
"""The answer shapes, as the model is told them. The first key is the decision (`tool` or
`answer`): measured on SmolLM2, a bare `answer` key after "reply to the user" wins far more
often than a `{"type":"message"}` discriminator does."""


@frozen
class Constrained:
    """Settings of constrained mode (see the module docstring).

    `required_args_only`: ask only for a tool's required arguments. Small models fill
    every optional field with invented values (SmolLM2 sent `"workdir":"my_bash_workdir"`),
    which the tool then obeys; left out, the tool uses its defaults.
    `tool_result_role`: the role of the tool-output turn. `user` works with any template.
    """

    tool_result_note: str = DEFAULT_TOOL_RESULT_NOTE
    tool_result_role: str = "user"
    required_args_only: bool = True
    grammar: bool = False
    """Send the answer format as a llama.cpp GBNF `grammar` (compact JSON sized to
    `max_output_tokens`, see `runner.providers.grammar`) instead of `response_format`."""


def function_tools(tools: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [t for t in tools if t.get("type") == "function" and t.get("name")]


def custom_tools(tools: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [t for t in tools if t.get("type") == "custom" and t.get("name")]


def _arguments_schema(tool: Mapping[str, Any], settings: Constrained) -> JSON:
    params = dict(tool.get("parameters") or {"type": "object", "properties": {}})
    props = params.get("properties")
    if settings.required_args_only and isinstance(props, dict):
        required = [r for r in params.get("required") or [] if r in props]
        params["properties"] = {k: v for k, v in props.items() if k in required}
        params["required"] = required
    return params


def answer_branches(
    tools: Sequence[Mapping[str, Any]],
    *,
    tool_choice: str = "auto",
    settings: Constrained = Constrained(),
    answer: JSON | None = None,
) -> list[JSON]:
    """The answer shapes, unbounded: one per tool, plus the answer shape.

    `{"tool":NAME,"arguments":{..}}` per function tool (`{"tool":NAME,"input":".."}` per
    custom tool) and `{"answer":".."}`, or `{"answer":<value>}` matching `answer` when the
    task asks for structured output (`text.format`). `tool_choice` `none` leaves only the
    answer shape, `required` only the tools.
    """
    branches: list[JSON] = []
    if tool_choice != "none":
        for t in function_tools(tools):
            branches.append(
                {
                    "type": "object",
                    "properties": {
                        "tool": {"const": t["name"]},
                        "arguments": _arguments_schema(t, settings),
                    },
                    "required": ["tool", "arguments"],
                    "additionalProperties": False,
                }
            )
        for t in custom_tools(tools):
            branches.append(
                {
                    "type": "object",
                    "properties": {"tool": {"const": t["name"]}, "input": {"type": "string"}},
                    "required": ["tool", "input"],
                    "additionalProperties": False,
                }
            )
    if tool_choice != "required" or not branches:
        branches.append(
            {
                "type": "object",
                "properties": {"answer": answer if answer is not None else {"type": "string"}},
                "required": ["answer"],
                "additionalProperties": False,
            }
        )
    return branches


def constrained_schema(
    tools: Sequence[Mapping[str, Any]],
    *,
    tool_choice: str = "auto",
    settings: Constrained = Constrained(),
    answer: JSON | None = None,
    budget: int | None = None,
) -> JSON:
    """The `oneOf` the answer must match, each shape bounded to fit `budget` output tokens
    (`runner.providers.grammar.narrow`); a shape that cannot fit is left out."""
    branches = narrow(
        answer_branches(tools, tool_choice=tool_choice, settings=settings, answer=answer), budget
    )
    if not branches:
        raise AnswerTruncated(
            f"max_output_tokens={budget} is too small for even the shortest "
            "answer of the constrained format; raise it"
        )
    return branches[0] if len(branches) == 1 else {"oneOf": branches}


def _params_summary(params: Mapping[str, Any]) -> str:
    props = params.get("properties")
    if not isinstance(props, dict):
        return "{}"
    required = set(params.get("required") or [])
    parts = []
    for name, spec in props.items():
        kind = spec.get("type", "any") if isinstance(spec, dict) else "any"
        if kind == "array" and isinstance(spec.get("items"), dict):
            kind = f"{spec['items'].get('type', 'any')}[]"
        parts.append(f'"{name}": {kind}' + (" (required)" if name in required else ""))
    return "{" + ", ".join(parts) + "}"


def constrained_tools_text(
    tools: Sequence[Mapping[str, Any]],
    settings: Constrained = Constrained(),
    answer: JSON | None = None,
) -> str:
    """The section appended to the system message: the answer format and each tool.

    The model never sees the `tools` field in constrained mode, so this is how it learns
    the tools' names and arguments. Compact on purpose: a 135M model loses a long prompt.
    """
    shape = f"\nThe answer must match this JSON schema: {dumps(answer)}" if answer else ""
    if not function_tools(tools) and not custom_tools(tools):
        return 'Answer with exactly one JSON object: {"answer":"<text>"}' + shape
    lines = [ANSWER_FORMAT + shape, "", "# Tools"]
    for t in function_tools(tools):
        lines.append(f"## {t['name']}")
        if t.get("description"):
            lines.append(str(t["description"]).strip())
        lines.append("Arguments: " + _params_summary(_arguments_schema(t, settings)))
    for t in custom_tools(tools):
        lines.append(f"## {t['name']}")
        if t.get("description"):
            lines.append(str(t["description"]).strip())
        lines.append(f'Use: {{"tool":"{t["name"]}","input":"..."}}')
    return "\n".join(lines)
