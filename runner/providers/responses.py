"""The Responses API wire: `POST {base_url}/responses` with `stream: true`.

The request body is assembled from each item's cached wire text rather than by
serialising the whole history, so a request that extends the previous one is a byte
extension of it and costs time proportional to what is new, not to the history.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import aclosing

import anyio

from runner import http
from runner.errors import (
    ModelNoAnswer,
    SizeLimitReached,
    StreamFailure,
)
from runner.http import (
    ERROR_BODY_BYTES,
    make_client,
    read_capped,
    request_headers,
    retry_after_s,
    sse_events,
)
from runner.items import Item, dumps
from runner.providers import ModelResponse, Prompt
from runner.providers.refusals import http_error, stream_error
from runner.sizes import ENVELOPE_BYTES, SizeCaps, size
from runner.sse import MAX_EVENT_BYTES, Assembler, parse_cost, usage_from_responses


def build_body(prompt: Prompt, *, store: bool = False) -> str:
    """The request JSON, fields in Codex's order."""
    return encode_body(prompt, store=store).decode()


def encode_body(prompt: Prompt, *, store: bool = False) -> bytes:
    """`build_body` as bytes, each item encoded on its own: one item with a character
    beyond U+FFFF would make a joined string of the whole history 4 bytes a character."""
    head = [f'"model":{dumps(prompt.model)}']
    if prompt.instructions:
        head.append(f'"instructions":{dumps(prompt.instructions)}')
    wires = (i.stored_wire for i in prompt.input) if store else (i.wire for i in prompt.input)
    items = b",".join(w.encode() for w in wires if w)
    return b"".join(
        (b"{", ",".join(head).encode(), b',"input":[', items, b"],", _tail(prompt, store))
    )


def _tail(prompt: Prompt, store: bool) -> bytes:
    """The fields after `input`."""
    parts: list[str] = []
    parts.append(f'"tools":{dumps(list(prompt.tools))}')
    parts.append(f'"tool_choice":{dumps(prompt.tool_choice)}')
    parts.append(f'"parallel_tool_calls":{dumps(prompt.parallel_tool_calls)}')
    if prompt.reasoning is not None:
        parts.append(f'"reasoning":{dumps(prompt.reasoning)}')
    parts.append(f'"store":{dumps(store)}')
    parts.append('"stream":true')
    parts.append(f'"include":{dumps(include(prompt))}')
    parts.append(f'"prompt_cache_key":{dumps(prompt.prompt_cache_key)}')
    if prompt.text is not None:
        parts.append(f'"text":{dumps(prompt.text)}')
    for key, value in prompt.extra.items():
        parts.append(f"{dumps(key)}:{dumps(value)}")
    return (",".join(parts) + "}").encode()


def include(prompt: Prompt) -> list[str]:
    """Encrypted reasoning whenever reasoning items can come back: with `store: false`
    it is the only way the server can take a reasoning item back."""
    wanted = prompt.reasoning is not None or prompt.reasoning_seen
    return ["reasoning.encrypted_content"] if wanted else []


def _input(prompt: Prompt, store: bool) -> str:
    """Items the server can use, each as its cached wire text (see `Item.wire`)."""
    wires = (i.stored_wire for i in prompt.input) if store else (i.wire for i in prompt.input)
    return ",".join(w for w in wires if w)


class ResponsesClient:
    """One provider endpoint; one kept-alive connection pool for all its threads."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        query_params: Mapping[str, str] | None = None,
        store: bool = False,
        stream_idle_timeout_s: float = 300.0,
        request_timeout_s: float = 600.0,
        max_event_bytes: int = MAX_EVENT_BYTES,
        max_connections: int = 32,
        transport: http.AsyncTransport | None = None,
    ) -> None:
        hdrs = request_headers(
            headers, api_key, accept="text/event-stream", **{"content-type": "application/json"}
        )
        self._url = base_url.rstrip("/") + "/responses"
        self._params = dict(query_params or {})
        self._store = store
        self._idle_s = stream_idle_timeout_s
        self._deadline_s = request_timeout_s
        self._max_event = max_event_bytes
        self._client = make_client(
            headers=hdrs, max_connections=max_connections, transport=transport, base_url=base_url
        )

    async def generate(self, prompt: Prompt) -> ModelResponse:
        """One attempt. Failures before the server answers are `ModelNoAnswer`s; once it
        has answered 200, a cut, a stall or a bad stream is a `StreamFailure`: the retry
        policy counts the two against different budgets, as Codex does."""
        caps = prompt.caps
        body = encode_body(prompt, store=self._store)
        caps.check_request(len(body))
        asm = Assembler(stream_error, caps=caps, history_bytes=prompt.history_bytes())
        started = False
        with anyio.move_on_after(self._deadline_s) as deadline:
            try:
                async with http.stream(
                    self._client,
                    "POST",
                    self._url,
                    content=body,
                    params=self._params,
                    headers={"session_id": prompt.prompt_cache_key},
                ) as resp:
                    if resp.status_code >= 400:
                        raise http_error(
                            resp.status_code,
                            await read_capped(resp),
                            retry_after_s=retry_after_s(resp.headers),
                        )
                    started = True
                    kind = resp.headers.get("content-type", "")
                    if "text/event-stream" not in kind:
                        raise StreamFailure(
                            f"not an event stream: content-type {kind[:100]!r}",
                            code="not_event_stream",
                            retryable=True,
                        )
                    await self._read(resp, asm, caps)
            except ModelNoAnswer as exc:
                if not asm.done:
                    if started:
                        raise StreamFailure(
                            f"stream cut: {exc}", code="stream_cut", retryable=True
                        ) from exc
                    raise
        if deadline.cancelled_caught and not asm.done:
            what = f"request timeout: no complete response within {self._deadline_s:g} s"
            if started:
                raise StreamFailure(what, code="request_timeout", retryable=True)
            raise ModelNoAnswer(what, code="request_timeout")
        if not asm.done:
            raise StreamFailure(
                "stream closed before response.completed", code="stream_cut", retryable=True
            )
        return ModelResponse(
            items=asm.items, usage=asm.usage, response_id=asm.response_id, request_bytes=len(body)
        )

    async def _read(self, resp: http.Response, asm: Assembler, caps: SizeCaps) -> None:
        """Frame and assemble the stream. The idle clock restarts only on a real event,
        so a server that sends nothing but `: keepalive` comments still times out. The
        body is read to its end even after response.completed: a response left unread
        makes httpx drop the connection instead of reusing it."""
        events = sse_events(
            resp,
            max_event_bytes=min(self._max_event, caps.event_bytes),
            from_item_cap=caps.event_bytes <= self._max_event,
            idle_s=self._idle_s,
            finished=lambda: asm.done,
            max_stream_bytes=caps.response_bytes,
        )
        async with aclosing(events):
            async for name, data in events:
                asm.feed(name, data)

    async def compact(self, prompt: Prompt) -> ModelResponse:
        """`POST {base_url}/responses/compact`: the server's own compaction of the history.

        Unary JSON both ways: Codex's `CompactionInput` fields in, `{"output": [items]}`
        (typically the kept user messages and one opaque `compaction` item) out.
        """
        caps = prompt.caps
        body = build_compact_body(prompt).encode()
        caps.check_request(len(body))
        async with http.stream(
            self._client,
            "POST",
            self._url + "/compact",
            content=body,
            params=self._params,
            headers={"session_id": prompt.prompt_cache_key, "accept": "application/json"},
        ) as resp:
            # The answer replaces the history, so it can never need more than its cap.
            limit = min(caps.response_bytes, caps.history_bytes + ENVELOPE_BYTES)
            raw = await http.read_limited(resp, limit)
        if raw is None:
            raise SizeLimitReached(
                f"the compaction answer is larger than {size(limit)} (max_response_bytes, "
                "or max_history_bytes plus an envelope); refusing to read more"
            )
        text = raw.decode("utf-8", "replace")
        if resp.status_code >= 400:
            raise http_error(
                resp.status_code, text[:ERROR_BODY_BYTES], retry_after_s=retry_after_s(resp.headers)
            )
        budget = 2 * caps.history_bytes + ENVELOPE_BYTES
        if (cost := parse_cost(text, budget)) > budget:
            raise SizeLimitReached(
                f"the compaction answer would take about {size(cost)} to parse, over "
                f"{size(budget)} (twice max_history_bytes); refusing to parse it"
            )
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise StreamFailure(f"compaction answer is not JSON: {text[:200]!r}") from exc
        output = data.get("output") if isinstance(data, dict) else None
        if not isinstance(output, list) or not all(isinstance(i, dict) for i in output):
            raise StreamFailure(f"compaction answer has no output list: {text[:200]!r}")
        items = [Item(i) for i in output]
        for item in items:
            caps.check_item(item.held_bytes)
        caps.check_output(sum(i.held_bytes for i in items), 0)  # it replaces the history
        return ModelResponse(
            items=items,
            usage=usage_from_responses(data.get("usage")),
            response_id=data.get("id") if isinstance(data.get("id"), str) else None,
            request_bytes=len(body),
        )

    async def aclose(self) -> None:
        await self._client.aclose()


def build_compact_body(prompt: Prompt) -> str:
    """The compaction request: the thread's own prefix, so the server can cache it too."""
    parts = [f'"model":{dumps(prompt.model)}', '"input":[' + _input(prompt, False) + "]"]
    if prompt.instructions:
        parts.append(f'"instructions":{dumps(prompt.instructions)}')
    parts.append(f'"tools":{dumps(list(prompt.tools))}')
    parts.append(f'"parallel_tool_calls":{dumps(prompt.parallel_tool_calls)}')
    if prompt.reasoning is not None:
        parts.append(f'"reasoning":{dumps(prompt.reasoning)}')
    if prompt.text is not None:
        parts.append(f'"text":{dumps(prompt.text)}')
    return "{" + ",".join(parts) + "}"
