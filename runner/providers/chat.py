"""A `ModelClient` over Chat Completions (`POST {base_url}/chat/completions`, SSE).

For servers that speak chat but not Responses, and for the embedded SmolLM2, which cannot
call tools: its chat template has no tool section and it was trained without tool calls.
What is sent and how answers are read is `chat_wire.py` (pure); this module only adds
HTTP, with the Responses client's guards: the bounded SSE framing of `runner.sse`, an idle
timeout that keepalive comments do not reset, a deadline per attempt, and error bodies
read only up to 64 KiB.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import aclosing

import anyio

from runner import http
from runner.errors import (
    AnswerTruncated,
    ContextWindowExceeded,
    ModelError,
    ModelNoAnswer,
    StreamFailure,
)
from runner.http import (
    make_client,
    read_capped,
    request_headers,
    retry_after_s,
    sse_events,
)
from runner.items import JSON, dumps
from runner.providers import ModelResponse, Prompt
from runner.providers.chat_wire import (
    PARTIAL_OUTPUT_CHARS,
    ChatStreamState,
    build_body,
)
from runner.providers.constrained import Constrained
from runner.providers.refusals import http_error
from runner.sizes import SizeCaps
from runner.sse import MAX_EVENT_BYTES, usage_from_chat


class ChatClient:
    """`ModelClient` for `POST {base_url}/chat/completions` with SSE streaming.

    One HTTP client (from `http.make_client`) per client, so requests share a pool.
    llama.cpp's server closes the connection after every streamed answer while announcing
    keep-alive, so a request sent on the just-closed connection fails before any response;
    that case, and only that case, is resent once, immediately (the server never read it).

    Failures are typed for the retry policy as in `ResponsesClient`: before the 200 a
    `ModelNoAnswer`, after it a retryable `StreamFailure` (cut, idle, deadline, garbled).
    An answer whose `finish_reason` has arrived is kept even if the tail (usage, `[DONE]`)
    is lost: resending it would pay for the whole generation again.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        query_params: Mapping[str, str] | None = None,
        constrained_tools: bool = False,
        constrained: Constrained | None = None,
        stream_idle_timeout_s: float = 300.0,
        request_timeout_s: float = 600.0,
        max_event_bytes: int = MAX_EVENT_BYTES,
        client: http.AsyncClient | None = None,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.params = dict(query_params or {})
        hdrs = request_headers(headers, api_key)
        self.constrained = (constrained or Constrained()) if constrained_tools else None
        self._idle_s = stream_idle_timeout_s
        self._deadline_s = request_timeout_s
        self._max_event = max_event_bytes
        self._own_client = client is None
        self._client = (
            client if client is not None else make_client(headers=hdrs, base_url=base_url)
        )
        self._headers = {} if self._own_client else hdrs

    def build_body(self, prompt: Prompt) -> JSON:
        return build_body(prompt, constrained=self.constrained)

    async def generate(self, prompt: Prompt) -> ModelResponse:
        body = self.build_body(prompt)
        data = dumps(body).encode()
        caps = prompt.caps
        caps.check_request(len(data))
        state = await self._attempt(data, prompt)
        usage = usage_from_chat(state.usage)
        if state.finish_reason == "length" and not self._complete(state):
            cap = body.get("max_completion_tokens", body.get("max_tokens"))
            err: ModelError
            if isinstance(cap, int) and usage is not None and usage.output_tokens >= cap:
                err = AnswerTruncated(
                    f"the answer hit max_output_tokens={cap} before it was complete"
                )
                err.partial_output = state.text[:PARTIAL_OUTPUT_CHARS]
            else:
                err = ContextWindowExceeded("the model ran out of context (finish_reason: length)")
            err.usage = usage
            raise err
        if state.finish_reason is None:
            raise StreamFailure(
                "stream ended before a finish_reason", code="stream_cut", retryable=True
            )
        items = state.items(prompt, constrained=self.constrained is not None)
        for item in items:
            caps.check_item(item.held_bytes)
        caps.check_output(sum(i.held_bytes for i in items), prompt.history_bytes())
        return ModelResponse(
            items=items, usage=usage, response_id=state.response_id, request_bytes=len(data)
        )

    def _complete(self, state: ChatStreamState) -> bool:
        """A constrained answer whose JSON closed just as the cap was reached is whole
        (the server counts the end-of-text token it then could not send)."""
        if self.constrained is None or state.calls:
            return False
        try:
            json.loads(state.text)
        except ValueError:
            return False
        return True

    async def _attempt(self, data: bytes, prompt: Prompt) -> ChatStreamState:
        """One attempt under the deadline (the immediate resend of a request the server
        closed unread is part of it)."""
        headers = {**self._headers, "Content-Type": "application/json"}
        caps = prompt.caps
        # Text grows delta by delta: bounded while it streams, not only once it is whole.
        state = ChatStreamState(
            max_chars=min(caps.item_bytes, caps.history_bytes), max_parse=caps.parse_bytes
        )
        started = False
        with anyio.move_on_after(self._deadline_s) as deadline:
            for resend in (False, True):
                try:
                    async with http.stream(
                        self._client,
                        "POST",
                        self.url,
                        content=data,
                        headers=headers,
                        params=self.params,
                    ) as resp:
                        if resp.status_code >= 400:
                            text = await read_capped(resp)
                            raise http_error(
                                resp.status_code, text, retry_after_s=retry_after_s(resp.headers)
                            )
                        started = True
                        kind = resp.headers.get("content-type", "")
                        if "text/event-stream" not in kind:
                            raise StreamFailure(
                                f"not an event stream: content-type {kind[:100]!r}",
                                code="not_event_stream",
                                retryable=True,
                            )
                        await self._read(resp, state, caps)
                    break
                except ModelNoAnswer as exc:
                    if state.finish_reason is not None:
                        break
                    if started:
                        raise StreamFailure(
                            f"stream cut: {exc}", code="stream_cut", retryable=True
                        ) from exc
                    if not resend and exc.code == http.CLOSED_UNREAD:
                        continue
                    raise
        if deadline.cancelled_caught and state.finish_reason is None:
            what = f"request timeout: no complete answer within {self._deadline_s:g} s"
            if started:
                raise StreamFailure(what, code="request_timeout", retryable=True)
            raise ModelNoAnswer(what, code="request_timeout")
        return state

    async def _read(self, resp: http.Response, state: ChatStreamState, caps: SizeCaps) -> None:
        """Frame and accumulate the stream. The idle clock restarts only on a real event,
        so `: keepalive` comments alone still time out. The body is read to its end after
        `[DONE]` so that the connection can be reused."""
        events = sse_events(
            resp,
            max_event_bytes=min(self._max_event, caps.event_bytes),
            from_item_cap=caps.event_bytes <= self._max_event,
            idle_s=self._idle_s,
            finished=lambda: state.done or state.finish_reason is not None,
            max_stream_bytes=caps.response_bytes,
        )
        async with aclosing(events):
            async for name, text in events:
                state.feed_event(name, text)

    async def aclose(self) -> None:
        if self._own_client:
            await self._client.aclose()
