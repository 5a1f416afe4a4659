"""The standard Chat wire (real `tools`, assistant `tool_calls`, `role: tool`) against the
embedded llama.cpp engine.

The other engine tests use constrained mode, which renders tool history as plain text, so
only this file sends llama.cpp a history in the OpenAI chat shape. What it shows: the
server accepts it (200, a streamed answer we parse), the tool's output reaches the
model's prompt, usage carries `prompt_tokens_details.cached_tokens`, and the next request,
which extends the history, is served from the cached prefix.

SmolLM2's chat template has no tool section (`chat_template_caps.supports_tool_calls` is
false): llama.cpp renders the assistant turn holding `tool_calls` as an empty turn. That
is the model's template, not the wire; it is why the `local` provider defaults to
constrained mode.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from runner.http import make_client
from runner.items import Item, function_call_output, message
from runner.providers import Prompt
from runner.providers.chat import ChatClient
from runner.providers.local import LocalEngine
from tests.support.local_model import INSTRUCTIONS, SHELL

pytestmark = [pytest.mark.slow]

GREEDY = {"temperature": 0, "seed": 1, "max_tokens": 128}
TASK = "What is the current directory?"
"""A question SmolLM2 answers briefly after the tool output (others loop to max_tokens)."""


class Recording(httpx.AsyncBaseTransport):
    """A real HTTP transport that keeps each request body and response status."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.sent: list[tuple[dict[str, object], int]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(await request.aread())
        response = await self.inner.handle_async_request(request)
        self.sent.append((body, response.status_code))
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture(scope="module")
def engine() -> Iterator[LocalEngine]:
    with LocalEngine() as eng:
        yield eng


def history() -> list[Item]:
    call = Item(
        {
            "type": "function_call",
            "call_id": "call_pwd",
            "name": "shell",
            "arguments": '{"command":["pwd"]}',
        }
    )
    return [message("user", TASK), call, function_call_output("call_pwd", "/repo\n")]


def chat_prompt(items: list[Item]) -> Prompt:
    return Prompt(
        model="smollm2",
        instructions=INSTRUCTIONS,
        input=items,
        tools=[SHELL],
        prompt_cache_key="chat-wire",
        extra=GREEDY,
    )


@pytest.mark.anyio
async def test_tool_history_on_the_standard_chat_wire(engine: LocalEngine) -> None:
    transport = Recording()
    client = ChatClient(engine.base_url, client=make_client(transport=transport))
    try:
        first = await client.generate(chat_prompt(history()))
        follow = [*history(), *first.items, message("user", "Thanks. Say bye.")]
        second = await client.generate(chat_prompt(follow))
    finally:
        await client.aclose()

    [(body1, status1), (body2, status2)] = transport.sent
    assert (status1, status2) == (200, 200)
    msgs = body1["messages"]
    assert isinstance(msgs, list)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool"]
    assert msgs[2]["tool_calls"][0]["id"] == "call_pwd" and msgs[2]["content"] is None
    assert msgs[3] == {"role": "tool", "tool_call_id": "call_pwd", "content": "/repo\n"}
    assert body1["tools"] and body1["tool_choice"] == "auto"
    assert body2["messages"][:4] == msgs  # the history only grows

    assert first.items and first.items[-1].type in ("message", "function_call")
    assert first.usage is not None and second.usage is not None
    assert first.usage.input_tokens > 0 and first.usage.output_tokens > 0
    assert second.usage.input_tokens > first.usage.input_tokens
    # Read from `prompt_tokens_details.cached_tokens`: the second request reuses the first
    # one's prompt from the slot's KV cache.
    assert second.usage.cached_tokens >= first.usage.input_tokens - 1 > 0

    # The tool's output is in the prompt the model saw (llama.cpp's own rendering).
    root = engine.base_url.removesuffix("/v1")
    async with httpx.AsyncClient(trust_env=False) as h:
        rendered = (await h.post(f"{root}/apply-template", json=body1, timeout=60)).json()
    assert "<|im_start|>tool\n/repo" in rendered["prompt"]
