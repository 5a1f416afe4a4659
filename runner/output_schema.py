"""Structured final output: the `text.format` a task's `output_schema` sends, and the check
of the thread's final answer against it.

The format goes with every request of the thread (it is part of the request, and the
server applies it to every assistant message), but only the last answer is parsed and
validated: that is the run's result. `jsonschema` is imported only when a task has a
schema, so runs without one do not pay for it.
"""

from __future__ import annotations

import json
from typing import Any

FORMAT_NAME = "codex_output_schema"
"""The name Codex gives the format (`--output-schema`)."""


def text_format(schema: dict[str, Any]) -> dict[str, Any]:
    """The `text.format` object, fields in Codex's order."""
    return {"type": "json_schema", "strict": True, "schema": schema, "name": FORMAT_NAME}


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why `schema` is not a usable JSON schema, or None."""
    from jsonschema import SchemaError, validators

    try:
        validators.validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path)
        return f"not a valid JSON schema{f' at {where}' if where else ''}: {exc.message}"
    return None


def check_answer(schema: dict[str, Any], answer: str | None) -> tuple[Any, str | None]:
    """(the parsed answer, None) when it is JSON matching `schema`, else (None, why not)."""
    from jsonschema import validators

    if answer is None or not answer.strip():
        return None, "the final answer is empty; the output schema needs a JSON value"
    try:
        value = json.loads(answer)
    except ValueError as exc:
        return None, f"the final answer is not valid JSON ({exc}): {answer[:200]!r}"
    validator = validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "(top level)"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return (
            None,
            f"the final answer does not match the output schema at {where}: {first.message}{more}",
        )
    return value, None
