"""Pure decoding of a Responses API event stream (no I/O).

SSE framing (lines, `event:`/`data:` fields) is done by httpx-sse; this module turns each
framed event into meaning and assembles the finished response. The assembler is a small
state machine fed one event at a time, so the same code serves live streaming and
tests that replay recorded streams.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from runner.errors import ContextWindowExceeded, StreamError
from runner.items import Item, Usage

# Errors the server reports in response.failed that resending cannot fix.
FATAL_CODES = frozenset({
    "insufficient_quota", "usage_not_included", "invalid_prompt", "cyber_policy",
    "server_is_overloaded", "slow_down", "invalid_request_error",
})


@dataclass
class Assembler:
    """Collects a response from its events; `feed` returns a live notice or None."""

    items: list[Item] = field(default_factory=list)
    usage: Usage | None = None
    response_id: str | None = None
    done: bool = False
    unknown_events: int = 0

    def feed(self, event: str, data: str) -> tuple[str, dict[str, Any]] | None:
        """Consume one SSE event. Raises `StreamError` for failed/incomplete/malformed."""
        if self.done:
            return None
        try:
            payload = json.loads(data) if data else {}
        except json.JSONDecodeError as exc:
            raise StreamError(f"invalid JSON in SSE event {event!r}: {exc}",
                              retryable=True) from exc
        if not isinstance(payload, dict):
            raise StreamError(f"SSE event {event!r} is not a JSON object", retryable=True)
        kind = payload.get("type") or event
        if kind == "response.output_item.done":
            item = payload.get("item")
            if not isinstance(item, dict):
                raise StreamError("output_item.done without an item", retryable=True)
            self.items.append(Item(item))
            return ("item_done", item)
        if kind == "response.output_item.added":
            item = payload.get("item")
            return ("item_added", item) if isinstance(item, dict) else None
        if kind == "response.output_text.delta":
            return ("text_delta", {"delta": str(payload.get("delta", ""))})
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            return ("reasoning_delta", {"delta": str(payload.get("delta", ""))})
        if kind == "response.created":
            resp = payload.get("response")
            if isinstance(resp, dict) and isinstance(resp.get("id"), str):
                self.response_id = resp["id"]
            return None
        if kind == "response.completed":
            resp = payload.get("response")
            if isinstance(resp, dict):
                if isinstance(resp.get("id"), str):
                    self.response_id = resp["id"]
                self.usage = Usage.from_responses(resp.get("usage"))
            self.done = True
            return None
        if kind == "response.failed":
            raise failed_error(payload.get("response"))
        if kind == "response.incomplete":
            resp = payload.get("response")
            reason = None
            if isinstance(resp, dict) and isinstance(resp.get("incomplete_details"), dict):
                reason = resp["incomplete_details"].get("reason")
            raise StreamError(f"incomplete response returned, reason: {reason}",
                              code="incomplete", retryable=True)
        if kind == "error":
            # A bare `error` event: some servers send it instead of response.failed.
            raise failed_error({"error": payload.get("error", payload)})
        if not kind.startswith("response."):
            self.unknown_events += 1
        return None


def failed_error(resp: object) -> StreamError | ContextWindowExceeded:
    err = resp.get("error") if isinstance(resp, dict) else None
    code = message = None
    if isinstance(err, dict):
        code = err.get("code") or err.get("type")
        message = err.get("message")
    code = str(code) if code else None
    text = f"{code or 'error'}: {message or 'response failed'}"
    if code == "context_length_exceeded":
        return ContextWindowExceeded(text)
    return StreamError(text, code=code, retryable=code not in FATAL_CODES)
