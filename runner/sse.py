"""Pure decoding of a model's event stream (no I/O).

Two small state machines, fed as bytes arrive, so the same code serves live streaming and
tests that replay recorded streams:

- `Framer` cuts raw bytes into SSE events (`event:` / `data:` lines, comments skipped).
  It is ours rather than httpx-sse's because a server can send one endless line: the
  framer holds at most `max_event_bytes` of a pending event and fails the request
  instead of growing without bound. Both wires (Responses, Chat Completions) use it.
- `Assembler` turns each Responses event into meaning and assembles the finished response.
  `json_event` is the part both wires share: an event's data as a JSON object.
- `usage_from_responses` and `usage_from_chat` read an answer's token counts, failing the
  request on counts no server can mean. They live with the decoding, not with `Usage`:
  a bad count is a stream error, and the value sits below the error tree that carries it.

Every problem in the stream raises a `ModelError` subclass, never anything else.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runner.errors import AnswerTruncated, ModelError, SizeLimitReached, StreamFailure
from runner.items import JSON, Item, Usage
from runner.sizes import SizeCaps, size

MAX_EVENT_BYTES = 16 * 1024 * 1024
"""One event, all its lines. The largest real one is `response.completed`, which repeats
the whole output: a few MB for a long answer with encrypted reasoning."""
MAX_STREAM_BYTES = SizeCaps().response_bytes
PARSE_BYTES = SizeCaps().parse_bytes
"""One response (`limits.max_response_bytes`). Text deltas dominate a long stream (~100
bytes of framing per few characters); 128k output tokens stream as about 40 MB."""

_EOL = re.compile(rb"\r\n|\r|\n")


def usage_from_responses(u: JSON | None) -> Usage | None:
    """A Responses answer's `usage`."""
    return _read_usage(
        u, "input_tokens", "output_tokens", "input_tokens_details", "output_tokens_details"
    )


def usage_from_chat(u: JSON | None) -> Usage | None:
    """A Chat Completions answer's `usage`."""
    return _read_usage(
        u,
        "prompt_tokens",
        "completion_tokens",
        "prompt_tokens_details",
        "completion_tokens_details",
    )


def _read_usage(
    u: JSON | None, inp_key: str, out_key: str, inp_details: str, out_details: str
) -> Usage | None:
    """The two wires name the same numbers differently; missing details count as 0."""
    if not isinstance(u, dict):
        return None
    details = u.get(inp_details) or {}
    odetails = u.get(out_details) or {}
    inp, out = token_count(u, inp_key), token_count(u, out_key)
    usage = Usage(
        input_tokens=inp,
        cached_tokens=(
            token_count(details, "cached_tokens", inp_details) if isinstance(details, dict) else 0
        ),
        output_tokens=out,
        reasoning_tokens=(
            token_count(odetails, "reasoning_tokens", out_details)
            if isinstance(odetails, dict)
            else 0
        ),
        total_tokens=token_count(u, "total_tokens") or inp + out,
        cache_write_tokens=(
            token_count(details, "cache_write_tokens", inp_details)
            if isinstance(details, dict)
            else 0
        ),
    )
    _consistent(usage.cached_tokens, f"usage.{inp_details}.cached_tokens", inp, inp_key)
    _consistent(usage.cache_write_tokens, f"usage.{inp_details}.cache_write_tokens", inp, inp_key)
    _consistent(usage.reasoning_tokens, f"usage.{out_details}.reasoning_tokens", out, out_key)
    return usage


MAX_TOKENS = 10**10
"""No request uses more tokens than this: a bigger count is a broken server, not usage."""


def token_count(u: JSON, key: str, within: str | None = None) -> int:
    """A token count from the server: absent is 0; anything but an integer from 0 to
    `MAX_TOKENS` fails the request (a protocol error, resent like a broken stream), so
    `10**400` cannot crash a report and `-5` cannot make a negative cache-hit ratio."""
    v = u.get(key)
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_TOKENS:
        text = repr(v)
        shown = text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"
        name = f"usage.{within}.{key}" if within else f"usage.{key}"
        raise StreamFailure(
            f"the server sent {name} = {shown}: a token count must be an "
            f"integer from 0 to {MAX_TOKENS}",
            code="bad_usage",
            retryable=True,
        )
    return v


def _consistent(part: int, part_name: str, whole: int, whole_key: str) -> None:
    """A part of a count larger than the count (cached > input) would make a negative
    uncached count and a cache-hit ratio over 100%: a broken server, failed like one."""
    if part > whole:
        raise StreamFailure(
            f"the server sent {part_name} = {part}, more than usage.{whole_key} = {whole}",
            code="bad_usage",
            retryable=True,
        )


class Framer:
    """SSE framing (WHATWG rules: CRLF, LF or CR end a line; `:` starts a comment; an
    empty line dispatches) over raw bytes, with a cap on what one event may hold."""

    def __init__(
        self,
        *,
        max_event_bytes: int = MAX_EVENT_BYTES,
        max_stream_bytes: int = MAX_STREAM_BYTES,
        from_item_cap: bool = False,
    ) -> None:
        self.max_event_bytes = max_event_bytes
        self.from_item_cap = from_item_cap
        """The event cap is `SizeCaps.event_bytes`: passing it is the run's `size_limit`."""
        self.max_stream_bytes = max_stream_bytes
        self.total = 0
        self._partial = bytearray()
        self._skip_lf = False
        self._event = b""
        self._data: list[bytes] = []
        self._held = 0

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        """The events completed by `chunk`, as `(event name, data)`."""
        self.total += len(chunk)
        if self.total > self.max_stream_bytes:
            raise SizeLimitReached(
                f"the response is larger than max_response_bytes "
                f"({_size(self.max_stream_bytes)}); refusing to read more"
            )
        out: list[tuple[str, str]] = []
        pos = 1 if self._skip_lf and chunk.startswith(b"\n") else 0
        self._skip_lf = False
        for m in _EOL.finditer(chunk, pos):
            line = chunk[pos : m.start()]
            if self._partial:
                line = bytes(self._partial) + line
                self._partial.clear()
            pos = m.end()
            if m.group() == b"\r" and pos == len(chunk):
                self._skip_lf = True  # the LF of a CRLF may come with the next chunk
            event = self._line(line)
            if event is not None:
                out.append(event)
        self._partial += chunk[pos:]
        self._hold(0)
        return out

    def _hold(self, extra: int) -> None:
        self._held += extra
        if self._held + len(self._partial) > self.max_event_bytes:
            if self.from_item_cap:
                raise SizeLimitReached(
                    f"an SSE event is larger than {_size(self.max_event_bytes)} "
                    "(max_item_bytes plus 1 MiB), more than any item the caps let in; "
                    "refusing to read more"
                )
            raise StreamFailure(
                f"an SSE event is larger than {_size(self.max_event_bytes)}", code="event_too_large"
            )

    def _line(self, line: bytes) -> tuple[str, str] | None:
        if not line:
            data, event = self._data, self._event
            self._data, self._event, self._held = [], b"", 0
            if not data:
                return None
            return (event.decode("utf-8", "replace"), b"\n".join(data).decode("utf-8", "replace"))
        if line.startswith(b":"):
            return None  # a comment: keepalives are not events
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._data.append(value)
            self._hold(len(value) + 1)
        elif name == b"event":
            self._event = value
        return None


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 else f"{n} bytes"


def _text(value: object) -> str:
    """A string safe to write anywhere: lone surrogates from `\\ud800` escapes replaced."""
    s = value if isinstance(value, str) else str(value)
    try:
        s.encode()
    except UnicodeEncodeError:
        return s.encode("utf-8", "replace").decode()
    return s


def _clean(value: Any) -> Any:
    """`value` with every string made encodable (see `_text`)."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {_text(k): _clean(v) for k, v in value.items()}
    return value


TEXT_KEPT = 16_000
VALUE_BYTES = 200
"""What one JSON value may cost once parsed, counted per `,` `:` `[` `{` outside strings:
a short string is a 50-80 byte object (more beyond U+FFFF), a key also takes a slot in
the object and in the parser's key memo, an empty list is 56 bytes for its 3 sent. Measured
worst: about 170 bytes per count (distinct keys and values with a 4-byte character)."""
_STRING = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)


def parse_cost(data: str, limit: int) -> int:
    """An upper bound on the memory `json.loads(data)` takes, `data` included: the text
    twice (the strings parsed from it hold at most its characters, at its width), plus
    `VALUE_BYTES` a value. Counting `,` `:` `[` `{` anywhere is quick and can only count
    too many; only when that passes `limit` are strings left out of the count, so a big
    string of code is never taken for many values. An event short enough that it could
    not pass `limit` even were every character a value (nearly every event: deltas are a
    few hundred bytes) is not counted at all: this runs on every event."""
    bound = (VALUE_BYTES + 8) * len(data) + 2 * sys.getsizeof("")  # 4 bytes a char, twice
    if bound <= limit:
        return bound
    held = sys.getsizeof(data)
    cost = 2 * held + VALUE_BYTES * _separators(data)
    if cost > limit:
        cost = 2 * held + VALUE_BYTES * _separators(_STRING.sub('""', data))
    return cost


def _separators(text: str) -> int:
    return text.count(",") + text.count(":") + text.count("[") + text.count("{")


@dataclass
class Assembler:
    """Collects a response from its events. `refused` reads an error the server sent
    inside the stream into the exception tree: that reading belongs to the providers
    (`runner.providers.refusals.stream_error`), which hand it in."""

    refused: Callable[[object], ModelError]
    items: list[Item] = field(default_factory=list)
    usage: Usage | None = None
    response_id: str | None = None
    done: bool = False
    text: list[str] = field(default_factory=list)
    """Output text as it streamed (up to TEXT_KEPT characters): what an answer cut off at
    `max_output_tokens` had said, for the report."""
    _kept: int = 0
    caps: SizeCaps = field(default_factory=SizeCaps)
    history_bytes: int = 0
    """What the history already weighs: this response's items may add up to the cap."""
    _out_bytes: int = 0

    def feed(self, event: str, data: str) -> None:
        """Consume one SSE event. Raises a `ModelError` for failed/incomplete/malformed."""
        if self.done:
            return
        payload = json_event(event, data, self.caps.parse_bytes)
        kind = payload.get("type")
        if not isinstance(kind, str):
            kind = event
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, payload)
        elif kind == "error":
            # A bare `error` event: some servers send it instead of response.failed.
            raise self.refused(payload.get("error", payload))

    def _item_done(self, payload: dict[str, Any]) -> None:
        item = payload.get("item")
        if not isinstance(item, dict):
            raise StreamFailure("output_item.done without an item", retryable=True)
        kept = Item(item)
        self._out_bytes += kept.held_bytes
        self.caps.check_item(kept.held_bytes)
        self.caps.check_output(self._out_bytes, self.history_bytes)
        self.items.append(kept)

    def _text_delta(self, payload: dict[str, Any]) -> None:
        delta = _text(payload.get("delta", ""))
        if self._kept < TEXT_KEPT:
            self.text.append(delta[: TEXT_KEPT - self._kept])
            self._kept += len(self.text[-1])

    def _created(self, payload: dict[str, Any]) -> None:
        resp = payload.get("response")
        if isinstance(resp, dict) and isinstance(resp.get("id"), str):
            self.response_id = resp["id"]

    def _completed(self, payload: dict[str, Any]) -> None:
        resp = payload.get("response")
        if isinstance(resp, dict):
            if isinstance(resp.get("id"), str):
                self.response_id = resp["id"]
            self.usage = usage_from_responses(resp.get("usage"))
        self.done = True

    def _failed(self, payload: dict[str, Any]) -> None:
        resp = payload.get("response")
        failed = self.refused(resp.get("error") if isinstance(resp, dict) else None)
        failed.usage = usage_from_responses(resp.get("usage")) if isinstance(resp, dict) else None
        raise failed

    def _incomplete(self, payload: dict[str, Any]) -> None:
        resp = payload.get("response")
        reason = None
        if isinstance(resp, dict) and isinstance(resp.get("incomplete_details"), dict):
            reason = resp["incomplete_details"].get("reason")
        if reason == "max_output_tokens":
            # Resending the same request would be cut at the same cap, and billed again.
            err: ModelError = AnswerTruncated(
                "the answer hit max_output_tokens before it was complete"
            )
            err.partial_output = "".join(self.text)
        else:
            err = StreamFailure(
                f"incomplete response returned, reason: {_text(reason)[:200]}",
                code="incomplete",
                retryable=True,
            )
        err.usage = usage_from_responses(resp.get("usage")) if isinstance(resp, dict) else None
        raise err


_HANDLERS: dict[str, Callable[[Assembler, dict[str, Any]], None]] = {
    "response.output_item.done": Assembler._item_done,
    "response.output_text.delta": Assembler._text_delta,
    "response.created": Assembler._created,
    "response.completed": Assembler._completed,
    "response.failed": Assembler._failed,
    "response.incomplete": Assembler._incomplete,
}


def json_event(event: str, data: str, max_parse: int = PARSE_BYTES) -> dict[str, Any]:
    """An event's data as a JSON object, its strings made writable. A garbled event is a
    retryable `StreamFailure`: the same request usually streams cleanly the next time.
    An event whose parsing would cost more than `max_parse` is refused unparsed: a
    server picks how many objects its bytes become (up to ~30 per byte), so a byte cap
    alone does not bound what parsing takes."""
    cost = parse_cost(data, max_parse)
    if cost > max_parse:
        raise SizeLimitReached(
            f"SSE event {_text(event[:80])!r} would take about {size(cost)} to parse, over "
            f"{size(max_parse)} (twice max_item_bytes); refusing to parse it"
        )
    try:
        payload = json.loads(data) if data else {}
    except (ValueError, RecursionError) as exc:
        raise StreamFailure(
            f"invalid JSON in SSE event {event[:80]!r}: {str(exc)[:200]}", retryable=True
        ) from None
    if not isinstance(payload, dict):
        raise StreamFailure(f"SSE event {event[:80]!r} is not a JSON object", retryable=True)
    if "\\ud" in data or "\\uD" in data:
        payload = _clean(payload)  # a lone surrogate cannot be written or sent back
    return payload
