"""Answer formats sized to the output budget, for constrained decoding.

Why: with a bare `response_format` schema a weak model can spend its whole
`max_output_tokens` inside one long string, one long array or the whitespace between
tokens, and then the answer is cut off as invalid JSON (SmolLM2 did so on some dates).
So every string and array bound is derived from the budget (`narrow`), and for llama.cpp
servers the answer is sent as a GBNF `grammar` (`to_gbnf`) that allows compact JSON only
(no optional whitespace) with printable-ASCII string characters: every character then
costs at most two bytes (an escape), the longest answer the grammar allows is a known
number of bytes, and a byte-level BPE token holds at least one byte, so the answer always
closes within the cap. (llama.cpp's own schema conversion allows up to 22 bytes of
whitespace between any two tokens, which no bound can pay for.)

Both functions only narrow: every answer they allow is valid for the schema they were
given (optional properties left out, numbers as integers). Shapes outside the small
subset they know raise `UnsupportedSchema`; the caller then falls back to `response_format`.
"""

from __future__ import annotations

import json
from typing import Any

from runner.errors import UnsupportedSchema

JSON = dict[str, Any]

MAX_ITEMS = 16
"""Array bound when the budget allows it (a 135M model otherwise repeats items forever)."""
MAX_LENGTH = 2000
"""String bound when the budget allows it."""
MIN_USEFUL_LENGTH = 24
"""Fewer array items are preferred over strings shorter than this."""
INT_DIGITS = 12
"""Integers are at most this many digits: large enough for any timeout or count."""
CHAR_BYTES = 2
"""Worst case bytes per string character in the grammar: an escape (`\\n`, `\\"`)."""
RESERVED_TOKENS = 1
"""The end-of-text token the server counts as output after the closing brace."""

_ITEM_LADDER = (MAX_ITEMS, 8, 4, 3, 2, 1)


def _types(schema: JSON) -> list[str]:
    kind = schema.get("type")
    if isinstance(kind, list):
        return [str(k) for k in kind]
    return [str(kind)] if isinstance(kind, str) else []


def _choices(schema: JSON) -> list[Any] | None:
    if "const" in schema:
        return [schema["const"]]
    if isinstance(schema.get("enum"), list):
        return list(schema["enum"])
    return None


def _dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True)


def _required(schema: JSON) -> list[str]:
    props = schema.get("properties")
    props = props if isinstance(props, dict) else {}
    required = [str(r) for r in schema.get("required") or []]
    if any(r not in props for r in required) or schema.get("minProperties"):
        raise UnsupportedSchema("required properties must be listed under properties")
    return [name for name in props if name in required]


_UNSUPPORTED_KEYS = (
    "$ref",
    "allOf",
    "not",
    "if",
    "pattern",
    "format",
    "patternProperties",
    "prefixItems",
    "uniqueItems",
    "contains",
    "multipleOf",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "maximum",
)


def _check(schema: Any) -> JSON:
    if not isinstance(schema, dict):
        raise UnsupportedSchema("boolean schemas are not supported")
    bad = [k for k in _UNSUPPORTED_KEYS if k in schema]
    if bad:
        raise UnsupportedSchema(f"`{bad[0]}` is not supported")
    if "minimum" in schema and schema["minimum"] != 0:
        raise UnsupportedSchema("`minimum` other than 0 is not supported")
    return schema


def _bounds(schema: JSON, key_min: str, key_max: str, want: int) -> tuple[int, int]:
    low = int(schema.get(key_min) or 0)
    high = schema.get(key_max)
    n = min(want, int(high)) if isinstance(high, int) else want
    return low, max(n, low)


def cost(schema: Any, items: int, length: int) -> int:
    """Bytes of the longest compact answer `schema` allows with these bounds."""
    s = _check(schema)
    alts = s.get("anyOf", s.get("oneOf"))
    if isinstance(alts, list):
        return max(cost(a, items, length) for a in alts) if alts else 0
    choices = _choices(s)
    if choices is not None:
        return max(len(_dump(c).encode()) for c in choices)
    kinds = _types(s)
    if not kinds:
        raise UnsupportedSchema("a schema without a type")
    return max(_cost_of_type(s, k, items, length) for k in kinds)


def _cost_of_type(s: JSON, kind: str, items: int, length: int) -> int:
    if kind == "string":
        return 2 + CHAR_BYTES * _bounds(s, "minLength", "maxLength", length)[1]
    if kind in ("integer", "number"):
        return INT_DIGITS + (0 if s.get("minimum") == 0 else 1)
    if kind == "boolean":
        return 5
    if kind == "null":
        return 4
    if kind == "array":
        _, n = _bounds(s, "minItems", "maxItems", items)
        if n == 0:
            return 2
        return 2 + n * cost(s.get("items", {}), items, length) + (n - 1)
    if kind == "object":
        names = _required(s)
        props = s.get("properties") or {}
        return (
            2
            + sum(len(_dump(n)) + 1 + cost(props[n], items, length) for n in names)
            + max(len(names) - 1, 0)
        )
    raise UnsupportedSchema(f"type {kind!r} is not supported")


def allocate(schema: JSON, budget: int | None) -> tuple[int, int] | None:
    """(max items, max length) for one answer shape: the most items that still leave
    strings of MIN_USEFUL_LENGTH, and then the longest strings that fit; None when not
    even the shortest answer fits."""
    if budget is None:
        return MAX_ITEMS, MAX_LENGTH
    room = budget - RESERVED_TOKENS
    best: tuple[int, int] | None = None
    for items in _ITEM_LADDER:
        if cost(schema, items, 0) > room:
            continue
        lo, hi = 0, MAX_LENGTH  # the longest length that fits, by bisection
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if cost(schema, items, mid) <= room:
                lo = mid
            else:
                hi = mid - 1
        if lo >= MIN_USEFUL_LENGTH:
            return items, lo
        if best is None or lo > best[1]:
            best = (items, lo)
    return best


def bound(schema: Any, items: int, length: int) -> Any:
    """A copy of `schema` with every string and array bounded (never loosened) and
    objects closed to unknown properties."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            out[key] = [bound(s, items, length) for s in schema[key]]
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {k: bound(v, items, length) for k, v in schema["properties"].items()}
    if isinstance(schema.get("items"), dict):
        out["items"] = bound(schema["items"], items, length)
    kinds = _types(schema)
    if "array" in kinds:
        out["maxItems"] = min(items, int(schema.get("maxItems", items)))
    if (
        "string" in kinds
        and _choices(schema) is None
        and "pattern" not in schema
        and "format" not in schema
    ):
        out["maxLength"] = min(length, int(schema.get("maxLength", length)))
    if "object" in kinds and "additionalProperties" not in schema:
        out["additionalProperties"] = False
    return out


def narrow(branches: list[JSON], budget: int | None) -> list[JSON]:
    """Each answer shape bounded to fit `budget` output tokens on its own (only one of
    them is written); shapes that cannot fit at all are left out. A shape whose cost
    cannot be computed keeps the fixed bounds (it goes out as `response_format`)."""
    out: list[JSON] = []
    for branch in branches:
        try:
            sizes = allocate(branch, budget)
        except UnsupportedSchema:
            sizes = (MAX_ITEMS, MAX_LENGTH)
        if sizes is not None:
            out.append(bound(branch, *sizes))
    return out


# ------------------------------------------------------------------------ GBNF


def _lit(text: str) -> str:
    """A GBNF string literal for `text` (ASCII JSON: only `"` and `\\` need escapes)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class _Rules:
    def __init__(self) -> None:
        self.rules: dict[str, str] = {}

    def add(self, body: str) -> str:
        for name, existing in self.rules.items():
            if existing == body:
                return name
        name = f"r{len(self.rules)}"
        self.rules[name] = body
        return name


CHAR_RULE = 'ch ::= [ !#-\\[\\]-~] | "\\\\" ["\\\\nt/]'
"""One string character: printable ASCII but `"` and `\\`, or a two-byte escape."""


def _expr(schema: Any, rules: _Rules) -> str:
    s = _check(schema)
    alts = s.get("anyOf", s.get("oneOf"))
    if isinstance(alts, list):
        if not alts:
            raise UnsupportedSchema("an empty anyOf/oneOf")
        return "(" + " | ".join(_expr(a, rules) for a in alts) + ")"
    choices = _choices(s)
    if choices is not None:
        return "(" + " | ".join(_lit(_dump(c)) for c in choices) + ")"
    kinds = _types(s)
    if not kinds:
        raise UnsupportedSchema("a schema without a type")
    parts = [_expr_of_type(s, k, rules) for k in kinds]
    return parts[0] if len(parts) == 1 else "(" + " | ".join(parts) + ")"


def _expr_of_type(s: JSON, kind: str, rules: _Rules) -> str:
    if kind == "string":
        low, high = _bounds(s, "minLength", "maxLength", MAX_LENGTH)
        return rules.add(f'"\\"" ch{{{low},{high}}} "\\""')
    if kind in ("integer", "number"):
        sign = "" if s.get("minimum") == 0 else '"-"? '
        return rules.add(f'{sign}("0" | [1-9] [0-9]{{0,{INT_DIGITS - 1}}})')
    if kind == "boolean":
        return '("true" | "false")'
    if kind == "null":
        return '"null"'
    if kind == "array":
        low, high = _bounds(s, "minItems", "maxItems", MAX_ITEMS)
        if high == 0:
            return '"[]"'
        item = rules.add(_expr(s.get("items", {}), rules))
        more = f'("," {item}){{{max(low - 1, 0)},{high - 1}}}'
        inner = f"{item} {more}" if low > 0 else f"({item} {more})?"
        return rules.add(f'"[" {inner} "]"')
    if kind == "object":
        names = _required(s)
        props = s.get("properties") or {}
        if not names:
            return '"{}"'
        pieces = []
        for i, name in enumerate(names):
            key = ("{" if i == 0 else ",") + _dump(name) + ":"
            pieces += [_lit(key), _expr(props[name], rules)]
        return rules.add(" ".join(pieces) + ' "}"')
    raise UnsupportedSchema(f"type {kind!r} is not supported")


def to_gbnf(branches: list[JSON]) -> str:
    """A llama.cpp grammar for compact JSON matching one of `branches` (already bounded
    by `narrow`). Raises UnsupportedSchema for shapes it cannot express exactly."""
    if not branches:
        raise UnsupportedSchema("no answer shape fits")
    rules = _Rules()
    root = " | ".join(_expr(b, rules) for b in branches)
    lines = [f"root ::= {root}"] + [f"{n} ::= {b}" for n, b in rules.rules.items()]
    return "\n".join([*lines, CHAR_RULE]) + "\n"
