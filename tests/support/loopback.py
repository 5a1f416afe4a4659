"""A scripted OpenAI Responses API on a real 127.0.0.1 socket, for tests and benchmarks.

Why a real server: the runner's wire code (httpx pool, keep-alive, SSE parsing, retries on
cut streams) is only exercised by real bytes on a real socket. Nothing is monkeypatched.

Three ways to run the same server:

- in the test's event loop: ``async with LoopbackServer(script) as srv:`` (asyncio only);
- in a background thread, for sync tests and for running the ``runner`` CLI as a
  subprocess: ``with start_in_thread(script) as srv:``;
- in its own process, so a benchmark does not count server CPU as client time:
  ``with start_process("pkg.module:script") as srv:`` or, by hand,
  ``python -m tests.support.loopback --script pkg.module:script --port-file F``.

A *script* decides each reply. It is a callable ``(request, index) -> Reply`` (it may be
``async``), or a sequence of ``Reply`` consumed in order. ``index`` counts
``POST /v1/responses`` requests from 0 in arrival order. Build replies with the
``reply_*`` helpers and adjust them with ``Reply.but(...)``.

``POST /v1/chat/completions`` is answered by the same script and counted the same way,
for Chat Completions fault tests: reply with ``reply_sse_bytes`` (chat chunks),
``reply_http_error`` or ``reply_raw``; generated replies are Responses events.

Token accounting (deterministic, so cache tests mean something):

- A request's *segments* are, in order: the ``instructions`` value, each element of
  ``tools``, each element of ``input``. A segment is the exact JSON text the client sent
  for that value (string quotes and escapes included), so a client that re-serialises an
  item differently (key order, spaces, ``\\u`` escapes) loses the cache, as it would with
  a real server. Everything else in the body (model, reasoning, tool_choice...) is free.
- ``input_tokens = total UTF-8 bytes of all segments // 4``.
- ``cached_tokens``: take the previous request with the same ``prompt_cache_key`` (a
  missing key is its own bucket, and a different ``model`` means no cache). Walk both
  segment lists from the start; the instructions must be equal, then each tool, then each
  input item, all in the same position. Stop at the first difference.
  ``cached_tokens = bytes of the equal segments // 4``, then rounded down to a multiple of
  ``cache_block`` and set to 0 below ``cache_min`` (defaults 1 and 0: exact).
  Every parsed request updates its bucket, whatever the reply.
- Each output item costs ``max(1, bytes of its JSON without "id" // 4)`` output tokens;
  reasoning items also count as ``reasoning_tokens``.
  ``total_tokens = input_tokens + output_tokens``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import importlib
import inspect
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Protocol, TypeAlias, TypedDict, Unpack
from urllib.parse import parse_qs, urlsplit

from tests.support.sdk_types import request_problems

JSON: TypeAlias = dict[str, Any]

RESPONSES_PATH = "/v1/responses"
CHAT_PATH = "/v1/chat/completions"
DEFAULT_PROCESS_SCRIPT = "tests.support.loopback:echo"

__all__ = [
    "LoopbackServer",
    "ThreadedServer",
    "ProcessServer",
    "Reply",
    "RecordedRequest",
    "ServerOptions",
    "Script",
    "start_in_thread",
    "start_process",
    "reply_message",
    "reply_function_call",
    "reply_custom_tool_call",
    "reply_items",
    "reply_failed",
    "reply_incomplete",
    "reply_http_error",
    "reply_drop_after",
    "reply_raw",
    "reply_events",
    "reply_sse_bytes",
    "message_item",
    "function_call_item",
    "custom_tool_call_item",
    "reasoning_item",
    "assert_exact_extension",
    "find_extension_break",
    "assert_call_outputs_paired",
    "find_pairing_problems",
    "by_conversation",
    "per_conversation",
    "last_user_text",
    "echo",
]


def _dumps(obj: Any) -> str:
    """Compact JSON with key order kept: the encoding real servers and the runner use."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


# ---------------------------------------------------------------------------------------
# Replies


@dataclass(frozen=True)
class Reply:
    """What the server does with one request; immutable so one reply can serve many times."""

    kind: Literal["stream", "http", "raw"] = "stream"
    output: tuple[JSON, ...] = ()
    """Output items; ids (and missing call_ids) are assigned when sent."""
    end: Literal["completed", "failed", "incomplete"] = "completed"
    error: JSON | None = None
    """`response.error` of a failed response."""
    incomplete_reason: str | None = None
    events: tuple[JSON, ...] | None = None
    """Send exactly these events instead of generated ones (sequence numbers added)."""
    sse_body: bytes | None = None
    """Send this event-stream body verbatim (framing is still chunked)."""
    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    """Extra response headers, for any kind (e.g. x-codex-turn-state, retry-after)."""
    raw: bytes = b""
    """For kind "raw": bytes written to the socket as the whole response, then close."""
    drop_after: int | None = None
    """Send only this many events, then cut the stream."""
    graceful_drop: bool = False
    """Cut by ending the chunked body cleanly (no response.completed) instead of closing."""
    stall_s: float = 0.0
    """Seconds to hang after the last event sent before a drop (idle-timeout tests)."""
    keepalive_s: float = 0.0
    """While stalling, send an SSE comment (`: keepalive`) this often: not an event, so it
    must not count as one."""
    close_delimited: bool = False
    """Frame the stream by closing the connection instead of chunked encoding."""
    close_connection: bool = False
    """Send `connection: close` and close after this reply."""
    delay_s: float = 0.0
    """Seconds to wait before the status line (time to first byte)."""
    event_delay_s: float = 0.0
    """Seconds between events; 0 sends the whole stream in one write."""
    chunk_size: int | None = None
    """Re-split the event stream into HTTP chunks of this many bytes (splits events)."""
    delta_chars: int = 16
    """Characters per text/argument delta event."""
    usage: JSON | None = None
    """Overrides for the computed usage (top-level keys replaced)."""
    send_usage: bool = True
    response_id: str | None = None
    model: str | None = None
    """Model name in the response object; defaults to the request's."""

    def but(self, **changes: Any) -> Reply:
        """A copy with some fields changed, e.g. ``reply_message("x").but(delay_s=0.1)``."""
        return replace(self, **changes)


def reasoning(rid: str | None, enc: str | None, **more: Any) -> JSON:
    """A reasoning item, with its id and encrypted content when given."""
    item: JSON = {"type": "reasoning", "summary": []}
    if rid is not None:
        item = {"id": rid, **item}
    if enc is not None:
        item["encrypted_content"] = enc
    return {**item, **more}


def message_item(text: str, *, phase: str | None = None) -> JSON:
    """An assistant message output item, in the key order the real API uses."""
    item: JSON = {
        "type": "message",
        "status": "completed",
        "content": [{"type": "output_text", "annotations": [], "text": text}],
        "role": "assistant",
    }
    if phase is not None:
        item["phase"] = phase
    return item


def function_call_item(
    name: str, arguments: Mapping[str, Any] | str, call_id: str | None = None
) -> JSON:
    """A function_call item; dict arguments are JSON-encoded compactly."""
    args = arguments if isinstance(arguments, str) else _dumps(dict(arguments))
    return {
        "type": "function_call",
        "status": "completed",
        "arguments": args,
        "call_id": call_id,
        "name": name,
    }


def custom_tool_call_item(name: str, input: str, call_id: str | None = None) -> JSON:
    """A freeform (custom) tool call, as used by Codex's apply_patch (no `status`: the
    API's `ResponseCustomToolCall` has none, and its request type rejects one)."""
    return {"type": "custom_tool_call", "call_id": call_id, "input": input, "name": name}


TINY_USAGE: JSON = {
    "input_tokens": 10,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 1,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 11,
}
"""Usage a hostile server reports whatever it sends: nothing token-based ever triggers."""


def reasoning_item(summary: str | Sequence[str] = "", encrypted_content: str | None = None) -> JSON:
    """A reasoning item with summary parts and an opaque encrypted_content to send back."""
    parts = [summary] if isinstance(summary, str) else list(summary)
    enc = encrypted_content
    if enc is None:
        enc = "gAAAA" + base64.b64encode("|".join(parts).encode()).decode()
    return {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": p} for p in parts if p],
        "encrypted_content": enc,
    }


def _hdrs(headers: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    return tuple((headers or {}).items())


def reply_items(items: Sequence[JSON], *, headers: Mapping[str, str] | None = None) -> Reply:
    """A completed response with several output items (reasoning, messages, calls)."""
    return Reply(output=tuple(items), headers=_hdrs(headers))


def reply_message(
    text: str, *, phase: str | None = None, headers: Mapping[str, str] | None = None
) -> Reply:
    """A completed response holding one assistant message: the end of a turn."""
    return reply_items([message_item(text, phase=phase)], headers=headers)


def reply_function_call(
    name: str,
    arguments: Mapping[str, Any] | str,
    call_id: str | None = None,
    *,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """A completed response holding one function call."""
    return reply_items([function_call_item(name, arguments, call_id)], headers=headers)


def reply_custom_tool_call(
    name: str, input: str, call_id: str | None = None, *, headers: Mapping[str, str] | None = None
) -> Reply:
    """A completed response holding one freeform tool call."""
    return reply_items([custom_tool_call_item(name, input, call_id)], headers=headers)


def reply_failed(code: str, message: str, *, output: Sequence[JSON] = ()) -> Reply:
    """A stream ending in `response.failed` with `error: {code, message}`."""
    return Reply(output=tuple(output), end="failed", error={"code": code, "message": message})


def reply_incomplete(reason: str = "max_output_tokens", *, output: Sequence[JSON] = ()) -> Reply:
    """A stream ending in `response.incomplete` with `incomplete_details.reason`."""
    return Reply(output=tuple(output), end="incomplete", incomplete_reason=reason)


def reply_http_error(
    status: int, body: Any = None, headers: Mapping[str, str] | None = None
) -> Reply:
    """A plain HTTP error. `body`: bytes/str verbatim, anything else JSON-encoded.

    The default body is an OpenAI-style ``{"error": {...}}`` object.
    """
    if body is None:
        body = {
            "error": {"message": f"loopback HTTP {status}", "type": "server_error", "code": None}
        }
    if isinstance(body, bytes):
        data = body
    elif isinstance(body, str):
        data = body.encode()
    else:
        data = _dumps(body).encode()
    hdrs = dict(headers or {})
    if not any(k.lower() == "content-type" for k in hdrs):
        hdrs["content-type"] = "application/json"
    return Reply(kind="http", status=status, body=data, headers=_hdrs(hdrs))


def reply_drop_after(
    n_events: int, reply: Reply | None = None, *, graceful: bool = False, stall_s: float = 0.0
) -> Reply:
    """Send the first `n_events` of `reply` (default: a message) and cut the stream.

    By default the connection is closed mid-body (the client sees an incomplete chunked
    read); `graceful=True` ends the body cleanly without `response.completed`.
    """
    base = reply or reply_message("this stream is cut before it completes")
    return base.but(drop_after=n_events, graceful_drop=graceful, stall_s=stall_s)


def reply_raw(data: bytes) -> Reply:
    """Write these bytes as the entire HTTP response (status line included), then close."""
    return Reply(kind="raw", raw=data)


def reply_events(events: Sequence[JSON], *, headers: Mapping[str, str] | None = None) -> Reply:
    """Stream exactly these events (each a dict with "type"), e.g. a Codex-fixture shape."""
    return Reply(events=tuple(events), headers=_hdrs(headers))


def reply_sse_bytes(body: bytes) -> Reply:
    """Stream this event-stream body verbatim, for malformed-SSE tests."""
    return Reply(sse_body=body)


# ---------------------------------------------------------------------------------------
# Requests


@dataclass(eq=False)
class RecordedRequest:
    """One request as received, plus what the server answered."""

    index: int
    """Position among POST /v1/responses requests (the script's index); -1 for others."""
    conn_id: int
    """Which TCP connection carried it (connections are numbered from 1)."""
    conn_seq: int
    """0 for the first request on its connection, 1 for the next..."""
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    """Lower-cased names; repeated headers joined with ", "."""
    raw: bytes
    body: Any
    """Parsed JSON body, or None if the body was not JSON."""
    received_at: float
    instructions_raw: str | None = None
    """Exact JSON text of `instructions` as sent (with quotes), if present."""
    tools_raw: list[str] = field(default_factory=list)
    input_raw: list[str] = field(default_factory=list)
    """Exact JSON text of each `input` element, as sent."""
    body_bytes: int = 0
    prompt_bytes: int = 0
    """UTF-8 bytes of all segments (instructions, tools, input items)."""
    prefix_bytes: int = 0
    """Bytes of the segments equal to the previous request of the same conversation."""
    input_tokens: int = 0
    cached_tokens: int = 0
    ideal_cached_tokens: int = 0
    """What cached_tokens would be if this request exactly extended the previous one."""
    status: int = 0
    outcome: str = "pending"
    """completed, failed, incomplete, dropped, stream_ended, http_error, raw or error."""
    response_id: str | None = None
    output: list[JSON] = field(default_factory=list)
    """Items of the `response.completed` sent (with ids); empty unless completed."""
    usage: JSON | None = None
    reply: Reply | None = None
    replied_at: float = 0.0
    """time.monotonic() when the whole reply was written (0 if it never was): the next
    request's `received_at` minus this is the client's step gap."""

    @property
    def json(self) -> JSON:
        return self.body if isinstance(self.body, dict) else {}

    @property
    def model(self) -> str | None:
        return self.json.get("model")

    @property
    def instructions(self) -> str | None:
        return self.json.get("instructions")

    @property
    def tools(self) -> list[JSON]:
        tools = self.json.get("tools")
        return tools if isinstance(tools, list) else []

    @property
    def input(self) -> list[JSON]:
        items = self.json.get("input")
        return items if isinstance(items, list) else []

    @property
    def prompt_cache_key(self) -> str | None:
        return self.json.get("prompt_cache_key")

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def call_outputs(self) -> dict[str, Any]:
        """`output` of each tool-call output in `input`, by call_id (scripts branch on it)."""
        return {
            str(i.get("call_id")): i.get("output")
            for i in self.input
            if isinstance(i, dict) and i.get("type") in TOOL_OUTPUT_TYPES
        }

    def to_record(self, *, with_body: bool = True) -> JSON:
        """A JSON-able dict, for the process mode's recording file."""
        rec: JSON = {
            k: getattr(self, k)
            for k in (
                "index",
                "conn_id",
                "conn_seq",
                "method",
                "path",
                "query",
                "headers",
                "received_at",
                "body_bytes",
                "prompt_bytes",
                "prefix_bytes",
                "input_tokens",
                "cached_tokens",
                "ideal_cached_tokens",
                "status",
                "outcome",
                "response_id",
                "output",
                "usage",
            )
        }
        if with_body and self.raw:
            rec["raw_b64"] = base64.b64encode(self.raw).decode()
        return rec

    @classmethod
    def from_record(cls, rec: JSON) -> RecordedRequest:
        raw = base64.b64decode(rec.get("raw_b64", ""))
        req = cls(
            index=rec["index"],
            conn_id=rec["conn_id"],
            conn_seq=rec["conn_seq"],
            method=rec["method"],
            path=rec["path"],
            query=rec["query"],
            headers=rec["headers"],
            raw=raw,
            body=None,
            received_at=rec["received_at"],
        )
        if raw:
            with contextlib.suppress(ValueError, UnicodeDecodeError):
                _attach_body(req)
        for key in (
            "body_bytes",
            "prompt_bytes",
            "prefix_bytes",
            "input_tokens",
            "cached_tokens",
            "ideal_cached_tokens",
            "status",
            "outcome",
            "response_id",
            "output",
            "usage",
        ):
            setattr(req, key, rec[key])
        return req


class ScriptFn(Protocol):
    def __call__(self, request: RecordedRequest, index: int, /) -> Reply | Awaitable[Reply]: ...


Script: TypeAlias = ScriptFn | Sequence[Reply]

TOOL_CALL_TYPES = ("function_call", "custom_tool_call", "local_shell_call")
TOOL_OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output")


# ---------------------------------------------------------------------------------------
# Body scanning: parse once and keep the exact text of every segment.

_WS = re.compile(r"[ \t\n\r]*")
_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
_SPAN_KEYS = ("tools", "input")


def _skip(text: str, i: int) -> int:
    if i < len(text) and text[i] in " \t\n\r":
        m = _WS.match(text, i)
        assert m is not None
        return m.end()
    return i


@dataclass(frozen=True)
class _InputMemo:
    """The parsed `input` array of a recent body: its exact text, values and item texts."""

    text: str
    values: tuple[Any, ...]
    raws: tuple[str, ...]


class _BodyScanner:
    """`json.loads` that also returns the exact text of instructions, tools[i], input[i].

    It uses the C scanner element by element, so a cold parse costs about one
    `json.loads`. A thread resends its whole history every turn, so when a body's `input`
    starts with the entire `input` of one of the last few bodies, byte for byte, those
    items are reused instead of parsed again: a 2,000-item request then costs well under
    a millisecond instead of ~4. Reused items are shared between recorded requests, so
    treat recorded bodies as read-only.
    """

    def __init__(self, memo_size: int = 16) -> None:
        self._memos: deque[_InputMemo] = deque(maxlen=memo_size)

    def scan(self, text: str) -> tuple[Any, dict[str, list[str]]]:
        try:
            return self._scan(text)
        except (IndexError, StopIteration) as exc:
            raise ValueError("truncated or invalid JSON") from exc

    def _scan(self, text: str) -> tuple[Any, dict[str, list[str]]]:
        spans: dict[str, list[str]] = {}
        i = _skip(text, 0)
        if text[i] != "{":
            obj, end = _scan_once(text, i)
            if _skip(text, end) != len(text):
                raise ValueError("trailing data after JSON")
            return obj, spans
        body: JSON = {}
        i = _skip(text, i + 1)
        if text[i] == "}":
            i += 1
        else:
            while True:
                if text[i] != '"':
                    raise ValueError(f"expected a key at offset {i}")
                key, i = _scanstring(text, i + 1)
                i = _skip(text, i)
                if text[i] != ":":
                    raise ValueError(f"expected ':' at offset {i}")
                i = _skip(text, i + 1)
                if key in _SPAN_KEYS and text[i] == "[" and key not in spans:
                    values, raws, i = self._array(text, _skip(text, i + 1), key == "input")
                    body[key] = values
                    spans[key] = raws
                else:
                    value, end = _scan_once(text, i)
                    body[key] = value
                    if key == "instructions" or key in _SPAN_KEYS:
                        spans[key] = [text[i:end]]
                    i = end
                i = _skip(text, i)
                sep = text[i]
                i += 1
                if sep == "}":
                    break
                if sep != ",":
                    raise ValueError(f"expected ',' or '}}' at offset {i - 1}")
                i = _skip(text, i)
        if _skip(text, i) != len(text):
            raise ValueError("trailing data after JSON")
        return body, spans

    def _array(self, text: str, i: int, memoize: bool) -> tuple[list[Any], list[str], int]:
        """Elements of the array starting at `i` (just past "["); returns the index after "]"."""
        if text[i] == "]":
            return [], [], i + 1
        start = i
        memo = self._reusable(text, i) if memoize else None
        if memo is not None:
            values, raws = list(memo.values), list(memo.raws)
            last_end = start + len(memo.text)
        else:
            value, last_end = _scan_once(text, i)
            values, raws = [value], [text[i:last_end]]
        i = _skip(text, last_end)
        while True:
            sep = text[i]
            i += 1
            if sep == "]":
                break
            if sep != ",":
                raise ValueError(f"expected ',' or ']' at offset {i - 1}")
            i = _skip(text, i)
            value, last_end = _scan_once(text, i)
            values.append(value)
            raws.append(text[i:last_end])
            i = _skip(text, last_end)
        if memoize:
            self._memos.append(_InputMemo(text[start:last_end], tuple(values), tuple(raws)))
        return values, raws, i

    def _reusable(self, text: str, i: int) -> _InputMemo | None:
        """The longest recent input array that this one starts with, item for item."""
        best: _InputMemo | None = None
        for memo in self._memos:
            if best is not None and len(memo.text) <= len(best.text):
                continue
            if text.startswith(memo.text, i):
                after = _skip(text, i + len(memo.text))
                if after < len(text) and text[after] in ",]":
                    best = memo
        return best


def _attach_body(req: RecordedRequest, scanner: _BodyScanner | None = None) -> None:
    """Parse `req.raw` into body and segment texts; raises ValueError if it is not JSON."""
    text = req.raw.decode("utf-8")
    body, spans = (scanner or _BodyScanner(0)).scan(text)
    req.body = body
    instr = spans.get("instructions")
    req.instructions_raw = instr[0] if instr else None
    req.tools_raw = spans.get("tools", [])
    req.input_raw = spans.get("input", [])


def _byte_lens(strs: Sequence[str], ascii_only: bool) -> list[int]:
    if ascii_only:
        return [len(s) for s in strs]
    return [len(s.encode()) for s in strs]


@dataclass
class _Prompt:
    """The cache-relevant part of one request, kept per conversation."""

    model: Any
    instructions: str | None
    tools: list[str]
    input: list[str]
    tool_bytes: list[int]
    input_bytes: list[int]
    instructions_bytes: int

    @property
    def total(self) -> int:
        return self.instructions_bytes + sum(self.tool_bytes) + sum(self.input_bytes)

    def prefix_bytes(self, prev: _Prompt) -> int:
        """Bytes of the leading segments equal to `prev`'s (the cache rule in the docstring)."""
        if prev.model != self.model or prev.instructions != self.instructions:
            return 0
        total = self.instructions_bytes
        for a, b, n in zip(prev.tools, self.tools, self.tool_bytes, strict=False):
            if a != b:
                return total
            total += n
        if len(prev.tools) != len(self.tools):
            return total
        for a, b, n in zip(prev.input, self.input, self.input_bytes, strict=False):
            if a != b:
                return total
            total += n
        return total


# ---------------------------------------------------------------------------------------
# The server


class ServerOptions(TypedDict, total=False):
    """Options shared by the in-process, thread and process modes."""

    host: str
    port: int
    strict: bool
    """Raise on exit if the script failed or a request broke call/output pairing."""
    validate: bool
    """Check call/output pairing of every request (problems go to `errors`)."""
    keep_bodies: bool
    """False drops bodies after replying: constant memory for long benchmarks."""
    cache_block: int
    cache_min: int


_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}

_ID_PREFIX = {
    "message": "msg",
    "function_call": "fc",
    "custom_tool_call": "ctc",
    "reasoning": "rs",
    "local_shell_call": "lsc",
}


class LoopbackServer:
    """The server in the current asyncio loop. Use ``async with`` or start()/aclose()."""

    def __init__(
        self,
        script: Script,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        strict: bool = True,
        validate: bool = True,
        keep_bodies: bool = True,
        cache_block: int = 1,
        cache_min: int = 0,
    ) -> None:
        self.script = script
        self.host = host
        self.port = port
        self.strict = strict
        self.validate = validate
        self.keep_bodies = keep_bodies
        self.cache_block = max(1, cache_block)
        self.cache_min = cache_min
        self.requests: list[RecordedRequest] = []
        """Every POST /v1/responses with a JSON body, in arrival order."""
        self.other_requests: list[RecordedRequest] = []
        """Requests answered 400/404/405 without consulting the script."""
        self.errors: list[str] = []
        """Script failures and invariant violations; `check()` raises on them."""
        self.connections_opened = 0
        self._conn_ids = itertools.count(1)
        self._ids = itertools.count(1)
        self._script_pos = 0
        self._index = 0
        self._cache: dict[Any, _Prompt] = {}
        self._scanner = _BodyScanner()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT/v1`, what a client's base_url should be."""
        if self._server is None:
            raise RuntimeError("server not started")
        return f"http://{self.host}:{self.port}/v1"

    @property
    def responses_url(self) -> str:
        return self.base_url + "/responses"

    async def start(self) -> LoopbackServer:
        self._server = await asyncio.start_server(self._on_connection, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def aclose(self) -> None:
        """Stop listening and close every open connection (also ones mid-stream)."""
        if self._server is None:
            return
        self._server.close()
        await asyncio.sleep(0)  # a just-accepted connection registers its task
        while self._tasks:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        await self._server.wait_closed()
        for _ in range(2):  # let closed transports release their sockets
            await asyncio.sleep(0)

    async def __aenter__(self) -> LoopbackServer:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
        if exc_type is None and self.strict:
            self.check()

    def check(self) -> None:
        """Raise AssertionError listing script failures and invariant violations."""
        if self.errors:
            raise AssertionError("loopback server problems:\n- " + "\n- ".join(self.errors))

    # -- connections ----------------------------------------------------------------

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        conn_id = next(self._conn_ids)
        self.connections_opened += 1
        try:
            seq = 0
            while await self._one_request(reader, writer, conn_id, seq):
                seq += 1
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # aclose() cancels us; ending normally keeps Python 3.11's stream callback
            # from logging "Exception in callback" for a cancelled handler task.
            pass
        except Exception as exc:  # a server bug must fail the test, not vanish in a log
            self.errors.append(f"server error on connection {conn_id}: {exc!r}")
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _one_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn_id: int, seq: int
    ) -> bool:
        """Read and answer one request; False when the connection should close."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False  # the client closed an idle kept-alive connection
        except asyncio.LimitOverrunError:
            self._write_json(writer, 431, {"error": {"message": "headers too large"}}, True)
            return False
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, version = lines[0].split(" ", 2)
        except ValueError:
            self._write_json(writer, 400, {"error": {"message": "bad request line"}}, True)
            return False
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if not line:
                continue
            name, _, value = line.partition(":")
            key = name.strip().lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        raw = await self._read_body(reader, headers)
        conn_hdr = headers.get("connection", "").lower()
        keep_alive = (conn_hdr != "close") if version == "HTTP/1.1" else conn_hdr == "keep-alive"
        url = urlsplit(target)
        req = RecordedRequest(
            index=-1,
            conn_id=conn_id,
            conn_seq=seq,
            method=method,
            path=url.path,
            query=parse_qs(url.query, keep_blank_values=True),
            headers=headers,
            raw=raw,
            body=None,
            received_at=time.monotonic(),
            body_bytes=len(raw),
        )
        if url.path not in (RESPONSES_PATH, CHAT_PATH):
            return self._reject(
                req, writer, 404, "unknown_url", f"Unknown path: {method} {url.path}", keep_alive
            )
        if method != "POST":
            return self._reject(
                req,
                writer,
                405,
                "method_not_allowed",
                f"{method} is not allowed on {url.path}",
                keep_alive,
            )
        try:
            _attach_body(req, self._scanner)
        except (ValueError, UnicodeDecodeError) as exc:
            return self._reject(
                req, writer, 400, "invalid_json", f"request body is not JSON: {exc}", keep_alive
            )
        req.index = self._index
        self._index += 1
        self._account(req)
        self.requests.append(req)
        if self.validate:
            self.errors.extend(f"request {req.index}: {p}" for p in find_pairing_problems(req))
            wire = "chat" if url.path == CHAT_PATH else "responses"
            self.errors.extend(
                f"request {req.index}: not a valid {wire} request by the openai SDK's types: {p}"
                for p in request_problems(wire, req.json)
            )
        reply = await self._reply_for(req)
        req.reply = reply
        close = await self._send(req, reply, writer) or not keep_alive
        if not self.keep_bodies:
            req.raw, req.body, req.instructions_raw = b"", None, None
            req.tools_raw, req.input_raw = [], []
        return not close

    async def _read_body(self, reader: asyncio.StreamReader, headers: Mapping[str, str]) -> bytes:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = bytearray()
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    while await reader.readuntil(b"\r\n") != b"\r\n":
                        pass  # trailers
                    return bytes(body)
                body += await reader.readexactly(size)
                await reader.readexactly(2)
        length = int(headers.get("content-length", "0") or 0)
        return await reader.readexactly(length) if length else b""

    def _reject(
        self,
        req: RecordedRequest,
        writer: asyncio.StreamWriter,
        status: int,
        code: str,
        message: str,
        keep_alive: bool,
    ) -> bool:
        req.status, req.outcome = status, "http_error"
        self.other_requests.append(req)
        err = {"error": {"message": message, "type": "invalid_request_error", "code": code}}
        self._write_json(writer, status, err, not keep_alive)
        return keep_alive

    def _write_json(self, writer: asyncio.StreamWriter, status: int, obj: Any, close: bool) -> None:
        body = _dumps(obj).encode()
        writer.write(
            _head(
                status,
                [("content-type", "application/json"), ("content-length", str(len(body)))],
                close,
            )
            + body
        )

    # -- token accounting -------------------------------------------------------------

    def _account(self, req: RecordedRequest) -> None:
        """Fill the token counts of `req` and make it its conversation's latest prompt."""
        ascii_only = req.raw.isascii()
        instr = req.instructions_raw
        prompt = _Prompt(
            model=req.json.get("model"),
            instructions=instr,
            tools=req.tools_raw,
            input=req.input_raw,
            tool_bytes=_byte_lens(req.tools_raw, ascii_only),
            input_bytes=_byte_lens(req.input_raw, ascii_only),
            instructions_bytes=0 if instr is None else _byte_lens([instr], ascii_only)[0],
        )
        key = req.json.get("prompt_cache_key")
        key = key if isinstance(key, str | int | None) else _dumps(key)
        prev = self._cache.get(key)
        req.prompt_bytes = prompt.total
        req.input_tokens = prompt.total // 4
        if prev is not None:
            req.prefix_bytes = prompt.prefix_bytes(prev)
            req.cached_tokens = self._round_cached(req.prefix_bytes // 4)
            req.ideal_cached_tokens = self._round_cached(min(prev.total, prompt.total) // 4)
        self._cache[key] = prompt

    def _round_cached(self, tokens: int) -> int:
        tokens -= tokens % self.cache_block
        return tokens if tokens >= self.cache_min else 0

    # -- replies ------------------------------------------------------------------------

    async def _reply_for(self, req: RecordedRequest) -> Reply:
        """Ask the script; a script failure becomes a 500 and an entry in `errors`."""
        try:
            script = self.script
            if callable(script):
                result = script(req, req.index)
                if inspect.isawaitable(result):
                    result = await result
            else:
                if self._script_pos >= len(script):
                    raise LookupError(f"script exhausted after {len(script)} replies")
                result = script[self._script_pos]
                self._script_pos += 1
            if not hasattr(result, "kind") or not hasattr(result, "output"):
                raise TypeError(f"script returned {result!r}, not a Reply")
            return result
        except Exception as exc:
            self.errors.append(f"request {req.index}: script failed: {exc!r}")
            return reply_http_error(
                500,
                {
                    "error": {
                        "message": f"loopback script failed: {exc!r}",
                        "type": "server_error",
                        "code": "loopback_script_error",
                    }
                },
            )

    async def _send(self, req: RecordedRequest, reply: Reply, writer: asyncio.StreamWriter) -> bool:
        """Write the reply; True if the connection must close afterwards."""
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        # Record before writing: a client may look at the recording as soon as it has read.
        if reply.kind == "raw":
            req.status, req.outcome = 0, "raw"
            writer.write(reply.raw)
            await writer.drain()
            return True
        extra = [("x-request-id", f"req_{req.index}"), *reply.headers]
        if reply.kind == "http":
            req.status, req.outcome = reply.status, "http_error"
            hdrs = [*extra, ("content-length", str(len(reply.body)))]
            writer.write(_head(reply.status, hdrs, reply.close_connection) + reply.body)
            await writer.drain()
            return reply.close_connection
        return await self._send_stream(req, reply, writer, extra)

    async def _send_stream(
        self,
        req: RecordedRequest,
        reply: Reply,
        writer: asyncio.StreamWriter,
        extra: list[tuple[str, str]],
    ) -> bool:
        if reply.sse_body is not None:
            events: list[JSON] = []
            payloads = [reply.sse_body]
        else:
            events = self._events(req, reply)
            payloads = [_encode_event(ev, n) for n, ev in enumerate(events)]
        cut = reply.drop_after is not None and reply.drop_after < len(payloads)
        sent = payloads[: reply.drop_after] if cut else payloads
        sent_events = events[: reply.drop_after] if cut else events
        chunked = not reply.close_delimited
        close = reply.close_connection or reply.close_delimited or (cut and not reply.graceful_drop)
        hdrs = [("content-type", "text/event-stream"), ("cache-control", "no-cache"), *extra]
        if chunked:
            hdrs.append(("transfer-encoding", "chunked"))
        head = _head(reply.status, hdrs, close)
        req.status = reply.status
        self._settle(req, sent_events, cut, reply)
        if reply.chunk_size:
            blob = b"".join(sent)
            sent = [blob[i : i + reply.chunk_size] for i in range(0, len(blob), reply.chunk_size)]
        frames = [_chunk(p) for p in sent] if chunked else sent
        tail = b"0\r\n\r\n" if chunked and (not cut or reply.graceful_drop) else b""
        if not reply.event_delay_s:
            writer.write(head + b"".join(frames) + (b"" if reply.stall_s else tail))
            await writer.drain()
        else:
            writer.write(head)
            for n, frame in enumerate(frames):
                if n:
                    await asyncio.sleep(reply.event_delay_s)
                writer.write(frame)
                await writer.drain()
        if reply.stall_s:
            await _stall(writer, reply, chunked)
        if reply.event_delay_s or reply.stall_s:
            writer.write(tail)
            await writer.drain()
        req.replied_at = time.monotonic()
        return close

    def _settle(self, req: RecordedRequest, sent: list[JSON], cut: bool, reply: Reply) -> None:
        """Record the outcome from the events actually sent."""
        req.outcome = "stream_ended"
        for ev in sent:
            t = ev.get("type")
            resp = ev.get("response")
            if isinstance(resp, dict) and resp.get("id"):
                req.response_id = resp["id"]
            if t == "response.completed" and isinstance(resp, dict):
                req.outcome = "completed"
                req.output = list(resp.get("output") or [])
                req.usage = resp.get("usage")
            elif t in ("response.failed", "response.incomplete"):
                req.outcome = t.split(".")[1]
                if isinstance(resp, dict):
                    req.usage = resp.get("usage")
        if cut and req.outcome != "completed":
            req.outcome = "dropped"
        if reply.sse_body is not None:
            req.outcome = "raw"

    def _events(self, req: RecordedRequest, reply: Reply) -> list[JSON]:
        if reply.events is not None:
            return [dict(ev) for ev in reply.events]
        rid = reply.response_id or f"resp_{next(self._ids):06d}"
        items = [self._finish_item(item) for item in reply.output]
        base: JSON = {
            "id": rid,
            "object": "response",
            "created_at": int(time.time()),
            "model": reply.model or req.json.get("model") or "loopback",
        }
        pending = {**base, "status": "in_progress", "output": [], "usage": None}
        events: list[JSON] = [
            {"type": "response.created", "response": pending},
            {"type": "response.in_progress", "response": pending},
        ]
        for n, item in enumerate(items):
            events.extend(_item_events(item, n, reply.delta_chars))
        usage = self._usage(req, items, reply) if reply.send_usage else None
        if reply.end == "completed":
            final = {**base, "status": "completed", "output": items, "usage": usage}
        elif reply.end == "failed":
            final = {
                **base,
                "status": "failed",
                "error": reply.error,
                "output": items,
                "usage": None,
            }
        else:
            final = {
                **base,
                "status": "incomplete",
                "incomplete_details": {"reason": reply.incomplete_reason},
                "output": items,
                "usage": usage,
            }
        events.append({"type": f"response.{reply.end}", "response": final})
        return events

    def _finish_item(self, item: JSON) -> JSON:
        """A sendable copy of a scripted item: an `id` first, and a call_id if it had None."""
        kind = item.get("type", "item")
        out: JSON = (
            {} if "id" in item else {"id": f"{_ID_PREFIX.get(kind, 'item')}_{next(self._ids):06d}"}
        )
        for k, v in item.items():
            out[k] = f"call_{next(self._ids):06d}" if k == "call_id" and v is None else v
        return out

    def _usage(self, req: RecordedRequest, items: list[JSON], reply: Reply) -> JSON:
        out_tokens = reasoning = 0
        for item in items:
            n = max(1, len(_dumps({k: v for k, v in item.items() if k != "id"}).encode()) // 4)
            out_tokens += n
            if item.get("type") == "reasoning":
                reasoning += n
        usage: JSON = {
            "input_tokens": req.input_tokens,
            "input_tokens_details": {"cached_tokens": req.cached_tokens},
            "output_tokens": out_tokens,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": req.input_tokens + out_tokens,
        }
        if reply.usage:
            usage.update(reply.usage)
            if "total_tokens" not in reply.usage:
                usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
        return usage


async def _stall(writer: asyncio.StreamWriter, reply: Reply, chunked: bool) -> None:
    """Hang for `reply.stall_s`, sending keepalive comments if asked."""
    if not reply.keepalive_s:
        await asyncio.sleep(reply.stall_s)
        return
    comment = b": keepalive\n\n"
    end = time.monotonic() + reply.stall_s
    while (left := end - time.monotonic()) > 0:
        await asyncio.sleep(min(reply.keepalive_s, left))
        if time.monotonic() < end:
            writer.write(_chunk(comment) if chunked else comment)
            await writer.drain()


def _head(status: int, headers: Sequence[tuple[str, str]], close: bool) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
    lines.extend(f"{k}: {v}" for k, v in headers)
    lines.append("connection: close" if close else "connection: keep-alive")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _encode_event(ev: JSON, seq: int) -> bytes:
    """`event: <type>\\ndata: <json>\\n\\n`, with type first and a sequence_number added."""
    kind = str(ev.get("type", "message"))
    if "sequence_number" not in ev:
        ev = {"type": kind, "sequence_number": seq, **{k: v for k, v in ev.items() if k != "type"}}
    return f"event: {kind}\ndata: {_dumps(ev)}\n\n".encode()


def _pieces(text: str, n: int) -> list[str]:
    if n <= 0 or len(text) <= n:
        return [text] if text else []
    return [text[i : i + n] for i in range(0, len(text), n)]


def _item_events(item: JSON, idx: int, step: int) -> Iterator[JSON]:
    """The lifecycle events of one output item, as the real API streams them."""
    iid = item.get("id")
    kind = item.get("type")
    at = {"item_id": iid, "output_index": idx}
    if kind == "message":
        parts = item.get("content") or []
        yield {
            "type": "response.output_item.added",
            "output_index": idx,
            "item": {**item, "status": "in_progress", "content": []},
        }
        for k, part in enumerate(parts):
            text = str(part.get("text", ""))
            yield {
                "type": "response.content_part.added",
                **at,
                "content_index": k,
                "part": {**part, "text": ""},
            }
            if part.get("type") == "output_text":
                for d in _pieces(text, step):
                    yield {
                        "type": "response.output_text.delta",
                        **at,
                        "content_index": k,
                        "delta": d,
                    }
                yield {"type": "response.output_text.done", **at, "content_index": k, "text": text}
            yield {"type": "response.content_part.done", **at, "content_index": k, "part": part}
    elif kind in ("function_call", "custom_tool_call"):
        field_name, prefix = (
            ("arguments", "response.function_call_arguments")
            if kind == "function_call"
            else ("input", "response.custom_tool_call_input")
        )
        text = str(item.get(field_name, ""))
        yield {
            "type": "response.output_item.added",
            "output_index": idx,
            "item": {**item, "status": "in_progress", field_name: ""},
        }
        for d in _pieces(text, step):
            yield {"type": f"{prefix}.delta", **at, "delta": d}
        yield {"type": f"{prefix}.done", **at, field_name: text}
    elif kind == "reasoning":
        summary = item.get("summary") or []
        yield {
            "type": "response.output_item.added",
            "output_index": idx,
            "item": {**item, "summary": []},
        }
        for k, part in enumerate(summary):
            text = str(part.get("text", ""))
            yield {
                "type": "response.reasoning_summary_part.added",
                **at,
                "summary_index": k,
                "part": {**part, "text": ""},
            }
            for d in _pieces(text, step):
                yield {
                    "type": "response.reasoning_summary_text.delta",
                    **at,
                    "summary_index": k,
                    "delta": d,
                }
            yield {
                "type": "response.reasoning_summary_text.done",
                **at,
                "summary_index": k,
                "text": text,
            }
            yield {
                "type": "response.reasoning_summary_part.done",
                **at,
                "summary_index": k,
                "part": part,
            }
    else:
        yield {"type": "response.output_item.added", "output_index": idx, "item": item}
    yield {"type": "response.output_item.done", "output_index": idx, "item": item}


# ---------------------------------------------------------------------------------------
# Invariant checks


def find_pairing_problems(request: RecordedRequest | Sequence[JSON]) -> list[str]:
    """Why `input` breaks "every call has exactly one output, after it, and no orphans"."""
    items = request.input if isinstance(request, RecordedRequest) else list(request)
    calls: dict[str, tuple[int, str]] = {}
    outputs: dict[str, list[int]] = {}
    problems: list[str] = []
    for n, item in enumerate(items):
        kind = item.get("type") if isinstance(item, dict) else None
        if kind in TOOL_CALL_TYPES:
            cid = str(item.get("call_id"))
            if cid in calls:
                problems.append(f"input[{n}]: {kind} call_id={cid} repeats input[{calls[cid][0]}]")
            else:
                calls[cid] = (n, str(kind))
        elif kind in TOOL_OUTPUT_TYPES:
            cid = str(item.get("call_id"))
            outputs.setdefault(cid, []).append(n)
            if cid not in calls:
                problems.append(f"input[{n}]: orphan {kind} call_id={cid} (no call before it)")
            elif (calls[cid][1] == "custom_tool_call") != (kind == "custom_tool_call_output"):
                problems.append(f"input[{n}]: {kind} answers a {calls[cid][1]} (call_id={cid})")
    for cid, (n, kind) in calls.items():
        got = outputs.get(cid, [])
        if not got:
            problems.append(f"input[{n}]: {kind} call_id={cid} has no output")
        elif len(got) > 1:
            where = ", ".join(f"input[{i}]" for i in got)
            problems.append(f"input[{n}]: {kind} call_id={cid} has {len(got)} outputs ({where})")
    return problems


def assert_call_outputs_paired(request: RecordedRequest | Sequence[JSON]) -> None:
    """Every call in `input` has exactly one output by call_id, and no output is orphaned."""
    problems = find_pairing_problems(request)
    if problems:
        label = f"request {request.index}" if isinstance(request, RecordedRequest) else "input"
        raise AssertionError(f"{label}: call/output pairing broken:\n- " + "\n- ".join(problems))


def _snippet(a: str, b: str) -> str:
    """Where two texts first differ, with a little context on each side."""
    k = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    lo = max(0, k - 30)
    return f"first difference at char {k}: was {a[lo : k + 30]!r}, now {b[lo : k + 30]!r}"


def _same_value_note(a: str, b: str) -> str:
    try:
        if json.loads(a) == json.loads(b):
            return " (same JSON value, different bytes: key order, spacing or escapes)"
    except ValueError:
        pass
    return ""


def _tool_name(raw: str) -> str:
    try:
        tool = json.loads(raw)
    except ValueError:
        return "?"
    return str(tool.get("name", tool.get("type", "?"))) if isinstance(tool, dict) else "?"


def _extension_problem(prev: RecordedRequest, cur: RecordedRequest) -> str | None:
    if not cur.raw and cur.body is None:
        return "body not recorded (keep_bodies=False?)"
    if not isinstance(cur.json.get("input"), list):
        return "input is not a list of items"
    if prev.prompt_cache_key != cur.prompt_cache_key:
        return f"prompt_cache_key changed: {prev.prompt_cache_key!r} -> {cur.prompt_cache_key!r}"
    if prev.model != cur.model:
        return f"model changed: {prev.model!r} -> {cur.model!r}"
    if prev.instructions_raw != cur.instructions_raw:
        a, b = prev.instructions_raw or "", cur.instructions_raw or ""
        return f"instructions changed; {_snippet(a, b)}"
    if prev.tools_raw != cur.tools_raw:
        old = [_tool_name(t) for t in prev.tools_raw]
        new = [_tool_name(t) for t in cur.tools_raw]
        if old != new and sorted(old) == sorted(new):
            return f"tools reordered: {old} -> {new}"
        if old != new:
            added = [n for n in new if n not in old]
            removed = [n for n in old if n not in new]
            return f"tools changed: {old} -> {new} (added {added}, removed {removed})"
        k = next(
            i for i, (a, b) in enumerate(zip(prev.tools_raw, cur.tools_raw, strict=True)) if a != b
        )
        a, b = prev.tools_raw[k], cur.tools_raw[k]
        return f"tools[{k}] ({old[k]}) changed{_same_value_note(a, b)}; {_snippet(a, b)}"
    need = len(prev.input_raw)
    if len(cur.input_raw) < need:
        return f"input has {len(cur.input_raw)} items, fewer than the previous {need}"
    for k, (a, b) in enumerate(zip(prev.input_raw, cur.input_raw, strict=False)):
        if a != b:
            kind = cur.input[k].get("type") if isinstance(cur.input[k], dict) else "?"
            return (
                f"input[{k}] ({kind}) differs from the previous request's "
                f"input[{k}]{_same_value_note(a, b)}; {_snippet(a, b)}"
            )
    sent_back = [item for item in prev.output if not _unresolvable(item, cur)]
    for j, item in enumerate(sent_back):
        k = need + j
        want = _dumps({key: v for key, v in item.items() if v is not None})
        if k >= len(cur.input_raw):
            return (
                f"input ends at {len(cur.input_raw)} items; expected the previous "
                f"response's output[{j}] ({item.get('type')}) at input[{k}]"
            )
        got = _dumps(cur.input[k])
        if got != want:
            return (
                f"input[{k}] should be the previous response's output[{j}] "
                f"({item.get('type')}) without null fields{_same_value_note(want, got)}; "
                f"{_snippet(want, got)}"
            )
    return None


def _unresolvable(item: JSON, req: RecordedRequest) -> bool:
    """A reasoning item a `store: false` server could not take back (no id, or neither
    encrypted nor raw content): a client must leave it out."""
    if item.get("type") != "reasoning" or req.json.get("store") is True:
        return False
    return not item.get("id") or not (item.get("encrypted_content") or item.get("content"))


def find_extension_break(requests: Sequence[RecordedRequest]) -> str | None:
    """The first request that is not an exact extension of the one before, and why.

    Exact extension: same prompt_cache_key, model, instructions and tools (byte for
    byte, same order); `input` starts with the previous request's input items byte for
    byte, followed by the previous response's output items as Codex 0.169 sends them
    back: with their `id`, without null-valued fields, and without reasoning items the
    server could not resolve (compared as JSON with key order significant; empty when
    that reply did not complete).
    """
    for n in range(1, len(requests)):
        prev, cur = requests[n - 1], requests[n]
        problem = _extension_problem(prev, cur)
        if problem:
            return (
                f"request {cur.index} (#{n} in the list) does not extend request "
                f"{prev.index}: {problem}"
            )
    return None


def assert_exact_extension(requests: Sequence[RecordedRequest]) -> None:
    """Raise AssertionError at the first request that breaks the prompt prefix."""
    problem = find_extension_break(requests)
    if problem:
        raise AssertionError(problem)


def by_conversation(requests: Sequence[RecordedRequest]) -> dict[Any, list[RecordedRequest]]:
    """Requests grouped by prompt_cache_key, in order (to check interleaved threads)."""
    groups: dict[Any, list[RecordedRequest]] = {}
    for req in requests:
        groups.setdefault(req.prompt_cache_key, []).append(req)
    return groups


# ---------------------------------------------------------------------------------------
# Script helpers


def per_conversation(
    script: Callable[[RecordedRequest, int], Reply | Awaitable[Reply]],
) -> ScriptFn:
    """Wrap a script so `index` counts requests within the request's prompt_cache_key.

    Lets one script drive many concurrent threads (the batch runner) the same way.
    """
    counts: dict[Any, int] = {}

    def run(request: RecordedRequest, index: int, /) -> Reply | Awaitable[Reply]:
        key = request.prompt_cache_key
        turn = counts.get(key, 0)
        counts[key] = turn + 1
        return script(request, turn)

    return run


def last_user_text(request: RecordedRequest) -> str:
    """Text of the last user message in `input` ("" if none)."""
    for item in reversed(request.input):
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def echo(request: RecordedRequest, index: int, /) -> Reply:
    """Answer with the last user text: the default script of the process mode."""
    return reply_message(f"echo: {last_user_text(request)}")


# ---------------------------------------------------------------------------------------
# Thread mode


class ThreadedServer:
    """A LoopbackServer on its own event loop in a daemon thread, for synchronous callers."""

    def __init__(self, script: Script, **opts: Unpack[ServerOptions]) -> None:
        self.server = LoopbackServer(script, **opts)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    def start(self) -> ThreadedServer:
        ready = threading.Event()

        async def main() -> None:
            self._stop = asyncio.Event()
            try:
                await self.server.start()
            except BaseException as exc:
                self._failure = exc
                raise
            finally:
                ready.set()
            await self._stop.wait()
            await self.server.aclose()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(main())
            except BaseException as exc:
                self._failure = self._failure or exc
                ready.set()
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="loopback-server", daemon=True)
        self._thread.start()
        ready.wait()
        if self._failure is not None:
            raise RuntimeError("loopback server failed to start") from self._failure
        return self

    def stop(self) -> None:
        """Stop and join the thread; raises if strict and there were problems."""
        if self._thread is None:
            return
        loop, stop, thread = self._loop, self._stop, self._thread
        self._thread = None
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)
        if self.server.strict:
            self.server.check()

    @property
    def base_url(self) -> str:
        return self.server.base_url

    @property
    def requests(self) -> list[RecordedRequest]:
        return self.server.requests

    @property
    def other_requests(self) -> list[RecordedRequest]:
        return self.server.other_requests

    @property
    def errors(self) -> list[str]:
        return self.server.errors

    @property
    def connections_opened(self) -> int:
        return self.server.connections_opened

    def __enter__(self) -> ThreadedServer:
        return self if self._thread is not None else self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.stop()
        else:
            with contextlib.suppress(AssertionError):
                self.stop()


def start_in_thread(script: Script, **opts: Unpack[ServerOptions]) -> ThreadedServer:
    """Start a server in a background thread; `stop()` it (or use it as a context manager)."""
    return ThreadedServer(script, **opts).start()


# ---------------------------------------------------------------------------------------
# Process mode


class ProcessServer:
    """The server in a child Python process, so its CPU is not the client's.

    The child stops when its stdin closes (also if this process dies); its requests come
    back after `stop()`, read from the JSON recording it writes on exit.
    """

    def __init__(
        self,
        script: str = DEFAULT_PROCESS_SCRIPT,
        *,
        env: Mapping[str, str] | None = None,
        startup_timeout_s: float = 20.0,
        **opts: Unpack[ServerOptions],
    ) -> None:
        self.script = script
        self.env = env
        self.startup_timeout_s = startup_timeout_s
        self.opts = opts
        self.strict = opts.get("strict", True)
        self.port = 0
        self.requests: list[RecordedRequest] = []
        self.errors: list[str] = []
        self.connections_opened = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._dir: Path | None = None

    @property
    def base_url(self) -> str:
        if not self.port:
            raise RuntimeError("server not started")
        return f"http://{self.opts.get('host', '127.0.0.1')}:{self.port}/v1"

    def command(self, port_file: Path, record: Path) -> list[str]:
        o = self.opts
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--script",
            self.script,
            "--port-file",
            str(port_file),
            "--record",
            str(record),
            "--exit-on-stdin-eof",
            "--host",
            o.get("host", "127.0.0.1"),
            "--port",
            str(o.get("port", 0)),
            "--cache-block",
            str(o.get("cache_block", 1)),
            "--cache-min",
            str(o.get("cache_min", 0)),
        ]
        if not o.get("validate", True):
            cmd.append("--no-validate")
        if not o.get("keep_bodies", True):
            cmd.append("--no-bodies")
        return cmd

    def start(self) -> ProcessServer:
        self._dir = Path(tempfile.mkdtemp(prefix="loopback-"))
        port_file, record, log = (self._dir / n for n in ("port", "record.json", "log"))
        with open(log, "wb") as log_out:
            self.proc = subprocess.Popen(
                self.command(port_file, record),
                stdin=subprocess.PIPE,
                stdout=log_out,
                stderr=subprocess.STDOUT,
                env=None if self.env is None else dict(self.env),
            )
        deadline = time.monotonic() + self.startup_timeout_s
        while not port_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self._kill()
                text = log.read_text(errors="replace")
                self._cleanup()
                raise RuntimeError(f"loopback process did not start:\n{text}")
            time.sleep(0.01)
        self.port = int(port_file.read_text())
        return self

    def stop(self) -> None:
        """Stop the child, load its recording; raises if strict and there were problems."""
        if self.proc is None or self._dir is None:
            return
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._kill()
        record = self._dir / "record.json"
        log = (self._dir / "log").read_text(errors="replace")
        try:
            data = json.loads(record.read_text()) if record.exists() else None
        finally:
            self._cleanup()
        if data is None:
            raise RuntimeError(f"loopback process left no recording:\n{log}")
        self.connections_opened = data["connections_opened"]
        self.errors = data["errors"]
        self.requests = [RecordedRequest.from_record(r) for r in data["requests"]]
        if self.strict and self.errors:
            raise AssertionError("loopback server problems:\n- " + "\n- ".join(self.errors))

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.close()

    def _cleanup(self) -> None:
        self.proc = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> ProcessServer:
        return self if self.proc is not None else self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.stop()
        else:
            with contextlib.suppress(AssertionError, RuntimeError):
                self.stop()


def start_process(
    script: str = DEFAULT_PROCESS_SCRIPT,
    *,
    env: Mapping[str, str] | None = None,
    **opts: Unpack[ServerOptions],
) -> ProcessServer:
    """Start a server in a child process; `script` is "module:attr" (see `load_script`)."""
    return ProcessServer(script, env=env, **opts).start()


def load_script(spec: str) -> Script:
    """Import "module:attr". attr is a script, a list of replies, or a 0-argument factory."""
    module_name, _, attr = spec.partition(":")
    obj: Any = getattr(importlib.import_module(module_name), attr or "script")
    if callable(obj):
        params = inspect.signature(obj).parameters.values()
        required = [
            p
            for p in params
            if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        if not required:
            obj = obj()
    return obj  # type: ignore[no-any-return]


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


async def _serve_main(args: argparse.Namespace, script: Script) -> int:
    srv = LoopbackServer(
        script,
        host=args.host,
        port=args.port,
        strict=False,
        validate=args.validate,
        keep_bodies=args.bodies,
        cache_block=args.cache_block,
        cache_min=args.cache_min,
    )
    await srv.start()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if args.exit_on_stdin_eof:

        def wait_eof() -> None:
            with contextlib.suppress(OSError, ValueError):
                while sys.stdin.buffer.read(65536):
                    pass
            loop.call_soon_threadsafe(stop.set)

        threading.Thread(target=wait_eof, daemon=True).start()
    if args.port_file:
        _write_atomic(Path(args.port_file), str(srv.port))
    print(srv.base_url, flush=True)
    await stop.wait()
    await srv.aclose()
    if args.record:
        data = {
            "base_url": srv.base_url,
            "connections_opened": srv.connections_opened,
            "errors": srv.errors,
            "requests": [r.to_record(with_body=args.bodies) for r in srv.requests],
        }
        _write_atomic(Path(args.record), json.dumps(data))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m tests.support.loopback --script module:attr --port-file F`: serve until
    stopped."""
    root = Path(__file__).resolve().parents[2]
    for p in (str(Path.cwd()), str(root)):
        if p not in sys.path:
            sys.path.insert(0, p)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--script", default=DEFAULT_PROCESS_SCRIPT, help="module:attr")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", help="write the bound port here once listening")
    ap.add_argument("--record", help="write requests and stats here as JSON on exit")
    ap.add_argument("--exit-on-stdin-eof", action="store_true")
    ap.add_argument("--no-validate", dest="validate", action="store_false")
    ap.add_argument("--no-bodies", dest="bodies", action="store_false")
    ap.add_argument("--cache-block", type=int, default=1)
    ap.add_argument("--cache-min", type=int, default=0)
    args = ap.parse_args(argv)
    return asyncio.run(_serve_main(args, load_script(args.script)))


if __name__ == "__main__":
    raise SystemExit(main())
