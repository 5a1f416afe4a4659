"""Conversation items, kept as the exact JSON the server sent.

The history is a list of `Item`s. Each keeps the server's JSON object untouched and the
bytes we send back for it, computed once: re-serialising 2,000 items per request would
cost more than the whole per-request budget, and computing the bytes once makes every
request an exact byte-for-byte extension of the previous one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

JSON = dict[str, Any]


def dumps(obj: Any) -> str:
    """The one JSON encoding used on the wire: compact, UTF-8, key order preserved."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class Item:
    """One Responses API item.

    `data` is exactly what the server sent (or what we built). `wire` is what goes back
    in `input`: the same object minus `id`, because with `store: false` the server keeps
    nothing and rejects references to item ids (Codex drops them for the same reason).
    """

    data: JSON
    wire: str = field(repr=False, compare=False, default="")

    def __post_init__(self) -> None:
        if not self.wire:
            body = {k: v for k, v in self.data.items() if k != "id"}
            object.__setattr__(self, "wire", dumps(body))

    @cached_property
    def stored_wire(self) -> str:
        """The item with its `id`, for `store: true` (Azure): there the server keeps the
        items and expects them referenced by id, as Codex re-attaches them."""
        return dumps(self.data) if "id" in self.data else self.wire

    @cached_property
    def nbytes(self) -> int:
        """UTF-8 size of `wire`: what token estimates and cache shares are measured in."""
        return len(self.wire.encode())

    @property
    def type(self) -> str:
        return str(self.data.get("type", ""))

    @property
    def role(self) -> str | None:
        role = self.data.get("role")
        return role if isinstance(role, str) else None


def message(role: str, *texts: str) -> Item:
    """A message with one text part per section, as Codex builds its context messages."""
    part = "output_text" if role == "assistant" else "input_text"
    return Item({"type": "message", "role": role,
                 "content": [{"type": part, "text": t} for t in texts]})


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


@dataclass(frozen=True)
class Usage:
    """Token usage of one response, as the server reported it (missing details are 0)."""

    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    total_tokens: int = 0

    @classmethod
    def from_responses(cls, u: JSON | None) -> Usage | None:
        return cls._read(u, "input_tokens", "output_tokens", "input_tokens_details",
                         "output_tokens_details")

    @classmethod
    def from_chat(cls, u: JSON | None) -> Usage | None:
        return cls._read(u, "prompt_tokens", "completion_tokens", "prompt_tokens_details",
                         "completion_tokens_details")

    @classmethod
    def _read(cls, u: JSON | None, inp_key: str, out_key: str, inp_details: str,
              out_details: str) -> Usage | None:
        """The two wires name the same numbers differently; missing details count as 0."""
        if not isinstance(u, dict):
            return None
        details = u.get(inp_details) or {}
        odetails = u.get(out_details) or {}
        inp, out = token_count(u, inp_key), token_count(u, out_key)
        return cls(
            input_tokens=inp,
            cached_tokens=(token_count(details, "cached_tokens", inp_details)
                           if isinstance(details, dict) else 0),
            output_tokens=out,
            reasoning_tokens=(token_count(odetails, "reasoning_tokens", out_details)
                              if isinstance(odetails, dict) else 0),
            total_tokens=token_count(u, "total_tokens") or inp + out,
        )

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.cached_tokens + other.cached_tokens,
            self.output_tokens + other.output_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.total_tokens + other.total_tokens,
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "cached_tokens": self.cached_tokens,
            "uncached_tokens": self.input_tokens - self.cached_tokens,
            "output_tokens": self.output_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "total_tokens": self.total_tokens,
        }


MAX_TOKENS = 10**10
"""No request uses more tokens than this: a bigger count is a broken server, not usage."""


def token_count(u: JSON, key: str, within: str | None = None) -> int:
    """A token count from the server: absent is 0; anything but an integer from 0 to
    `MAX_TOKENS` fails the request (a protocol error, resent like a broken stream), so
    `10**400` cannot crash a report and `-5` cannot make a negative cache-hit ratio."""
    from runner.errors import StreamError

    v = u.get(key)
    if v is None:
        return 0
    if isinstance(v, float) and v.is_integer() and 0 <= v <= MAX_TOKENS:
        return int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_TOKENS:
        text = repr(v)
        shown = text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"
        name = f"usage.{within}.{key}" if within else f"usage.{key}"
        raise StreamError(f"the server sent {name} = {shown}: a token count must be an "
                          f"integer from 0 to {MAX_TOKENS}", code="bad_usage", retryable=True)
    return v


def as_int(v: object) -> int:
    """A token count from JSON: an integer, else 0 (booleans are not counts)."""
    return v if isinstance(v, int) and not isinstance(v, bool) else 0
