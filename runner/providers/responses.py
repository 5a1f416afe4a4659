"""The Responses API wire: `POST {base_url}/responses` with `stream: true`.

The request body is assembled from each item's cached wire text rather than by
serialising the whole history, so a request that extends the previous one is a byte
extension of it and costs time proportional to what is new, not to the history.
"""

from __future__ import annotations

from collections.abc import Mapping

import anyio
import httpx
from httpx_sse import SSEError, aconnect_sse

from runner.errors import HTTPStatusError, StreamError, TransportError
from runner.items import dumps
from runner.providers import ModelResponse, OnEvent, Prompt, StreamEvent
from runner.providers.http import make_client, request_headers, retry_after_s
from runner.sse import Assembler


def build_body(prompt: Prompt, *, store: bool = False) -> str:
    """The request JSON, fields in Codex's order."""
    parts = [
        f'"model":{dumps(prompt.model)}',
    ]
    if prompt.instructions:
        parts.append(f'"instructions":{dumps(prompt.instructions)}')
    parts.append('"input":[' + ",".join(i.wire for i in prompt.input) + "]")
    parts.append(f'"tools":{dumps(list(prompt.tools))}')
    parts.append(f'"tool_choice":{dumps(prompt.tool_choice)}')
    parts.append(f'"parallel_tool_calls":{dumps(prompt.parallel_tool_calls)}')
    if prompt.reasoning is not None:
        parts.append(f'"reasoning":{dumps(prompt.reasoning)}')
    parts.append(f'"store":{dumps(store)}')
    parts.append('"stream":true')
    include = ["reasoning.encrypted_content"] if prompt.reasoning is not None else []
    parts.append(f'"include":{dumps(include)}')
    parts.append(f'"prompt_cache_key":{dumps(prompt.prompt_cache_key)}')
    if prompt.text is not None:
        parts.append(f'"text":{dumps(prompt.text)}')
    for key, value in prompt.extra.items():
        parts.append(f"{dumps(key)}:{dumps(value)}")
    return "{" + ",".join(parts) + "}"


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
        max_connections: int = 32,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        hdrs = request_headers(headers, api_key, accept="text/event-stream",
                               **{"content-type": "application/json"})
        self._url = base_url.rstrip("/") + "/responses"
        self._params = dict(query_params or {})
        self._store = store
        self._idle_s = stream_idle_timeout_s
        self._client = make_client(headers=hdrs, max_connections=max_connections,
                                   transport=transport)

    async def generate(self, prompt: Prompt, *, on_event: OnEvent | None = None) -> ModelResponse:
        body = build_body(prompt, store=self._store).encode()
        asm = Assembler()
        headers = {"session_id": prompt.prompt_cache_key}
        try:
            async with aconnect_sse(self._client, "POST", self._url, content=body,
                                    params=self._params, headers=headers) as source:
                resp = source.response
                if resp.status_code >= 400:
                    text = (await resp.aread()).decode("utf-8", "replace")
                    raise HTTPStatusError(resp.status_code, text,
                                          retry_after_s=retry_after_s(resp.headers))
                # Read to the end of the body even after response.completed: a response
                # left unread makes httpx drop the connection instead of reusing it.
                # The idle clock restarts only on a real event: httpx-sse does not yield
                # `: keepalive` comments, so a server that only pings still times out.
                events = source.aiter_sse()
                while True:
                    with anyio.move_on_after(self._idle_s) as idle:
                        try:
                            sse = await anext(events)
                        except StopAsyncIteration:
                            break
                    if idle.cancelled_caught:
                        raise StreamError(f"idle timeout: no event for {self._idle_s:g} s",
                                          code="idle_timeout", retryable=True)
                    notice = asm.feed(sse.event, sse.data)
                    if notice is not None and on_event is not None:
                        on_event(StreamEvent(notice[0], notice[1]))
        except httpx.TransportError as exc:
            if not asm.done:
                raise TransportError(f"{type(exc).__name__}: {exc}") from exc
        except SSEError as exc:
            raise StreamError(f"not an event stream: {exc}", retryable=True) from exc
        if not asm.done:
            raise StreamError("stream closed before response.completed", retryable=True)
        return ModelResponse(items=asm.items, usage=asm.usage, response_id=asm.response_id,
                             request_bytes=len(body))

    async def aclose(self) -> None:
        await self._client.aclose()
