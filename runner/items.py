"""Conversation items, kept as the exact JSON the server sent.

The history is a list of `Item`s. Each keeps the server's JSON object untouched and the
bytes we send back for it, computed once: re-serialising 2,000 items per request would
cost more than the whole per-request budget, and computing the bytes once makes every
request an exact byte-for-byte extension of the previous one.
"""

from __future__ import annotations

import json
import sys
from dataclasses import field
from functools import cached_property
from typing import Any

from runner.frozen import frozen

JSON = dict[str, Any]


def dumps(obj: Any) -> str:
    """The one JSON encoding used on the wire: compact, UTF-8, key order preserved."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


@frozen
class Item:
    """One Responses API item.

    `data` is exactly what the server sent (or what we built). `wire` is what goes back
    in `input`, as Codex 0.169 sends it: the same object with its `id` (with `store:
    false` the server resolves a reasoning item by id plus its encrypted content) and
    without the fields the server sent as null (`content: null`, `namespace: null`),
    which the API's own request types reject. A reasoning item the server could not
    resolve with `store: false` (no id, or neither encrypted content nor raw content)
    has an empty `wire`: it is never sent, in any request, so the prefix stays stable.
    """

    data: JSON
    wire: str = field(repr=False, compare=False, default="")

    def __post_init__(self) -> None:
        if not self.wire:
            wire = "" if _unresolvable(self.data) else self.stored_wire
            object.__setattr__(self, "wire", wire)

    @cached_property
    def stored_wire(self) -> str:
        """The item for `store: true` (Azure): the server keeps reasoning items itself,
        so even one without encrypted content is referenced by its id."""
        return dumps({k: _sendable(k, v) for k, v in _without_nulls(self.data).items()})

    @cached_property
    def nbytes(self) -> int:
        """UTF-8 size of `wire`: what token estimates and cache shares are measured in."""
        return len(self.wire.encode())

    @cached_property
    def held_bytes(self) -> int:
        """The memory this item takes in the runner: its wire text and every object of
        its parsed data. The byte caps count this, not the UTF-8 size, because a server
        chooses the ratio: one character beyond U+FFFF makes Python keep a whole string at
        4 bytes a character, and `[[],[],...]` costs 56 bytes for every 3 it sent."""
        return sys.getsizeof(self.wire) + _deep_size(self.data)

    @property
    def type(self) -> str:
        return str(self.data.get("type", ""))

    @property
    def role(self) -> str | None:
        role = self.data.get("role")
        return role if isinstance(role, str) else None


def _deep_size(value: Any) -> int:
    """`sys.getsizeof` summed over a parsed JSON value (shared objects counted again)."""
    total, stack = 0, [value]
    while stack:
        v = stack.pop()
        total += sys.getsizeof(v)
        if isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return total


def _sendable(key: str, value: Any) -> Any:
    """A call's `arguments` go back as the JSON text the API takes, even when a server
    sent them as an object (which it would then refuse to take back)."""
    return dumps(value) if key == "arguments" and not isinstance(value, str) else value


def _without_nulls(value: Any) -> Any:
    """Nulls dropped at every depth (`content[].logprobs: null` too): the API's request
    types take an absent field but refuse a null one, and Codex never sends nulls back."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _unresolvable(data: JSON) -> bool:
    """A reasoning item that a `store: false` server cannot use: it needs an id (the API
    requires one) and either its encrypted content or its raw reasoning text."""
    if data.get("type") != "reasoning":
        return False
    return not data.get("id") or not (data.get("encrypted_content") or data.get("content"))


def message(role: str, *texts: str) -> Item:
    """A message with one text part per section, as Codex builds its context messages."""
    part = "output_text" if role == "assistant" else "input_text"
    return Item(
        {"type": "message", "role": role, "content": [{"type": part, "text": t} for t in texts]}
    )


def function_call_output(call_id: str, output: str) -> Item:
    return Item({"type": "function_call_output", "call_id": call_id, "output": output})


def custom_tool_call_output(call_id: str, output: str) -> Item:
    return Item({"type": "custom_tool_call_output", "call_id": call_id, "output": output})


def message_text(item: Item) -> str:
    """All text of a message item joined, for reports and compaction."""
    content = item.data.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))


TOOL_CALL_TYPES = ("function_call", "custom_tool_call", "local_shell_call")
TOOL_OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output")


@frozen
class Usage:
    """Token usage of one response, as the server reported it (missing details are 0)."""

    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    total_tokens: int = 0
    cache_write_tokens: int = 0
    """Input tokens written to the prompt cache (`input_tokens_details.cache_write_tokens`,
    sent by providers that bill cache writes); 0 when not reported."""
    unreported: int = 0
    """Answers whose server sent no usage at all: their tokens are unknown, so a cost
    computed from these counts would be too low (reports then say the cost is unknown)."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.cached_tokens + other.cached_tokens,
            self.output_tokens + other.output_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.total_tokens + other.total_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.unreported + other.unreported,
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "cached_tokens": self.cached_tokens,
            "uncached_tokens": self.input_tokens - self.cached_tokens,
            "output_tokens": self.output_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "total_tokens": self.total_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "unreported_responses": self.unreported,
        }


def as_int(v: object) -> int:
    """A token count from JSON: an integer, else 0 (booleans are not counts)."""
    return v if isinstance(v, int) and not isinstance(v, bool) else 0
