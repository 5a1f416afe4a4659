"""Answer grammars sized to the output budget: every answer they allow fits the budget
and is valid for the schema it came from.

The GBNF the runner sends is turned into a Python regex here (its rules never recurse),
so hypothesis can draw answers the grammar allows and check each one; the longest answer
is built by hand and must cost exactly what `cost` says.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.errors import AnswerTruncated
from runner.items import message
from runner.providers import Prompt
from runner.providers.chat_wire import build_body
from runner.providers.constrained import Constrained, answer_branches, constrained_schema
from runner.providers.grammar import (
    CHAR_BYTES,
    INT_DIGITS,
    RESERVED_TOKENS,
    UnsupportedSchema,
    allocate,
    bound,
    cost,
    narrow,
    to_gbnf,
)
from runner.tools.apply_patch import ApplyPatchTool
from runner.tools.plan import PlanTool
from runner.tools.shell import ShellTool

TOOLS = [ShellTool().spec(), PlanTool().spec(), ApplyPatchTool().spec()]
ANSWER = {
    "type": "object",
    "properties": {
        "verdict": {"enum": ["pass", "fail"]},
        "files": {"type": "array", "items": {"type": "string"}},
        "score": {"type": "integer", "minimum": 0},
        "notes": {"type": ["string", "null"]},
        "ok": {"type": "boolean"},
    },
    "required": ["verdict", "files", "score", "notes", "ok"],
    "additionalProperties": False,
}


# ---------------------------------------------------------------- GBNF -> regex (test only)

_TOKEN = re.compile(
    r'\s*(?:(?P<lit>"(?:\\.|[^"\\])*")|(?P<cls>\[(?:\\.|[^\]\\])*\])'
    r"|(?P<rep>\{\d+,\d+\})|(?P<op>[()|?])|(?P<name>[A-Za-z0-9_]+))"
)


def gbnf_regex(grammar: str) -> str:
    rules = dict(line.split(" ::= ", 1) for line in grammar.strip().splitlines())

    def expand(body: str, depth: int = 0) -> str:
        assert depth < 50, "rules must not recurse"
        out, pos = [], 0
        while pos < len(body.rstrip()):
            m = _TOKEN.match(body, pos)
            assert m, body[pos:]
            pos = m.end()
            if m["lit"]:
                out.append("(?:" + re.escape(json.loads(m["lit"])) + ")")
            elif m["cls"]:
                out.append(m["cls"])
            elif m["rep"]:
                out.append(m["rep"])
            elif m["op"]:
                out.append({"(": "(?:"}.get(m["op"], m["op"]))
            else:
                out.append("(?:" + expand(rules[m["name"]], depth + 1) + ")")
        return "".join(out)

    return expand(rules["root"])


# ---------------------------------------------------------------- the longest answer


def longest(schema: dict[str, Any]) -> Any:
    """The answer with every bound used to the full and the costliest characters."""
    alts = schema.get("anyOf", schema.get("oneOf"))
    if alts:
        return max(
            (longest(a) for a in alts), key=lambda v: len(json.dumps(v, separators=(",", ":")))
        )
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return max(schema["enum"], key=lambda v: len(json.dumps(v)))
    kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    if len(kinds) > 1:
        return max((longest({**schema, "type": k}) for k in kinds), key=lambda v: len(compact(v)))
    kind = kinds[0]
    if kind == "string":
        return '"' * schema["maxLength"]
    if kind in ("integer", "number"):
        return 10 ** (INT_DIGITS - 1) if schema.get("minimum") == 0 else -(10 ** (INT_DIGITS - 1))
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    if kind == "array":
        return [longest(schema["items"]) for _ in range(schema["maxItems"])]
    return {
        k: longest(schema["properties"][k])
        for k in schema["properties"]
        if k in schema.get("required", [])
    }


def compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


BRANCHES = answer_branches(TOOLS, answer=None) + answer_branches([], answer=ANSWER)


@pytest.mark.parametrize("budget", [*range(24, 300, 11), 512, 1024, 4096])
@pytest.mark.parametrize("index", range(len(BRANCHES)))
def test_the_longest_answer_fits_and_is_valid(budget: int, index: int) -> None:
    original = BRANCHES[index]
    sizes = allocate(original, budget)
    if sizes is None:  # not even the shortest answer fits: the shape is left out
        assert cost(original, 1, 0) > budget - RESERVED_TOKENS
        return
    narrowed = bound(original, *sizes)
    answer = longest(narrowed)
    assert len(compact(answer)) == cost(narrowed, *sizes) <= budget - RESERVED_TOKENS
    jsonschema.validate(answer, original)  # narrowing only
    assert re.fullmatch(gbnf_regex(to_gbnf([narrowed])), compact(answer).decode())


@given(st.data(), st.integers(24, 600))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_answer_the_grammar_allows_fits_the_budget(data: st.DataObject, budget: int) -> None:
    """Answers drawn from the grammar itself (no whitespace, ASCII escapes) are each at
    most the budget in bytes, so at most the budget in byte-level tokens."""
    branches = narrow(BRANCHES, budget)
    grammar = to_gbnf(branches)
    text = data.draw(st.from_regex(gbnf_regex(grammar), fullmatch=True))
    assert len(text.encode()) <= budget - RESERVED_TOKENS
    value = json.loads(text)
    assert any(_valid(value, b) for b in BRANCHES)


def _valid(value: Any, schema: dict[str, Any]) -> bool:
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError:
        return False
    return True


def test_more_budget_never_means_smaller_bounds() -> None:
    shell = answer_branches(TOOLS[:1])[0]
    previous = (0, 0)
    assert allocate(shell, 40) is None  # {"tool":"shell",...} alone is 47 bytes
    for budget in range(60, 3000, 13):
        sizes = allocate(shell, budget)
        assert sizes is not None
        longest_text = cost(bound(shell, *sizes), *sizes)
        assert longest_text >= cost(bound(shell, *previous), *previous) if previous[0] else True
        previous = sizes
    assert allocate(shell, None) == (16, 2000)


def test_strings_cost_two_bytes_per_character() -> None:
    assert cost({"type": "string", "maxLength": 10}, 1, 99) == 2 + CHAR_BYTES * 10
    assert cost({"type": "string"}, 1, 7) == 2 + CHAR_BYTES * 7
    assert (
        cost({"type": "array", "items": {"type": "boolean"}, "maxItems": 3}, 9, 0) == 2 + 3 * 5 + 2
    )


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": "^a+$"},
        {"$ref": "#/$defs/x"},
        {"type": "integer", "maximum": 5},
        {"allOf": [{"type": "string"}]},
        {},
        {"type": "object", "required": ["x"]},
    ],
)
def test_shapes_outside_the_subset_are_refused(schema: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedSchema):
        to_gbnf([schema])


def _prompt(
    cap: int | None, tools: list[dict[str, Any]] | None = None, answer: dict[str, Any] | None = None
) -> Prompt:
    text = {"format": {"type": "json_schema", "name": "a", "schema": answer}} if answer else None
    return Prompt(
        model="m",
        instructions="",
        input=[message("user", "hi")],
        tools=TOOLS[:1] if tools is None else tools,
        prompt_cache_key="t",
        extra={} if cap is None else {"max_output_tokens": cap},
        text=text,
    )


def test_grammar_body_replaces_response_format() -> None:
    body = build_body(_prompt(256), constrained=Constrained(grammar=True))
    assert "response_format" not in body and body["max_tokens"] == 256
    assert body["grammar"].startswith("root ::= ")
    plain = build_body(_prompt(256), constrained=Constrained())
    assert "grammar" not in plain
    call = plain["response_format"]["json_schema"]["schema"]["oneOf"][0]
    assert call["properties"]["arguments"]["properties"]["command"]["maxItems"] <= 16


def test_unsupported_answer_schema_falls_back_to_response_format() -> None:
    answer = {
        "type": "object",
        "properties": {"x": {"type": "string", "pattern": "^a$"}},
        "required": ["x"],
    }
    body = build_body(_prompt(256, tools=[], answer=answer), constrained=Constrained(grammar=True))
    assert "grammar" not in body and "response_format" in body


def test_a_budget_too_small_for_any_answer_is_a_clear_error() -> None:
    with pytest.raises(AnswerTruncated, match="max_output_tokens=5 is too small") as info:
        constrained_schema(TOOLS[:1], budget=5)
    assert info.value.code == "max_output_tokens"
