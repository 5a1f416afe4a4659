"""The Responses API wire (runner/providers/responses.py): the request body in Codex's
field order, built so that a longer history is a byte extension of the shorter one; one
streamed attempt and the server-side compaction against a real loopback server, and
what each kind of bad answer becomes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runner.errors import SizeLimitReached, StatusRefusal, StreamFailure
from runner.items import Item, message
from runner.providers import Prompt
from runner.providers.responses import (
    ResponsesClient,
    build_body,
    build_compact_body,
    encode_body,
    include,
)
from runner.sizes import SizeCaps
from tests.support.compacting import CompactingServer
from tests.support.fixtures import LoopbackFactory
from tests.support.loopback import message_item, reply_http_error, reply_message

pytestmark = pytest.mark.anyio

UNUSABLE = Item({"id": "rs_1", "type": "reasoning", "summary": []})
"""A reasoning item with neither encrypted nor raw content: useless with `store: false`."""


def prompt(*items: Item, **kw: Any) -> Prompt:
    return Prompt(
        model="m",
        instructions="be brief",
        input=list(items) or [message("user", "hi")],
        tools=[],
        prompt_cache_key="thread-1",
        **kw,
    )


def test_the_body_has_codexs_fields_in_order_and_extra_last() -> None:
    p = prompt(reasoning={"effort": "low"}, text={"verbosity": "low"}, extra={"seed": 7})
    body = json.loads(build_body(p))
    assert list(body) == [
        "model",
        "instructions",
        "input",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning",
        "store",
        "stream",
        "include",
        "prompt_cache_key",
        "text",
        "seed",
    ]
    assert body["store"] is False and body["stream"] is True
    assert body["include"] == ["reasoning.encrypted_content"]
    assert encode_body(p) == build_body(p).encode()


def test_encrypted_reasoning_is_asked_for_once_a_model_reasons() -> None:
    assert include(prompt()) == []
    assert include(prompt(reasoning_seen=True)) == ["reasoning.encrypted_content"]


def test_an_unusable_reasoning_item_is_sent_only_with_store() -> None:
    p = prompt(message("user", "q"), UNUSABLE, message("assistant", "a"))
    sent = json.loads(build_body(p))["input"]
    assert [i.get("type") for i in sent] == ["message", "message"]
    stored = json.loads(build_body(p, store=True))
    assert [i["type"] for i in stored["input"]][1] == "reasoning" and stored["store"] is True
    compact = json.loads(build_compact_body(p))
    assert len(compact["input"]) == 2 and "stream" not in compact and "store" not in compact


def test_a_longer_history_is_a_byte_extension_of_the_shorter() -> None:
    short = prompt(message("user", "q \U0001f600"))
    longer = prompt(*short.input, UNUSABLE, message("assistant", "a"))
    a, b = encode_body(short), encode_body(longer)
    cut = a.index(b'],"tools"')
    assert b[:cut] == a[:cut] and b[cut : cut + 1] == b","


async def test_one_attempt_sends_the_key_and_session_and_returns_the_items(
    loopback: LoopbackFactory,
) -> None:
    srv = await loopback([reply_message("done")])
    client = ResponsesClient(srv.base_url, api_key="sk-test-1", query_params={"api-version": "1"})
    try:
        got = await client.generate(prompt())
    finally:
        await client.aclose()
    (req,) = srv.requests
    assert req.header("authorization") == "Bearer sk-test-1"
    assert req.header("session_id") == "thread-1" and req.query == {"api-version": ["1"]}
    assert [i.type for i in got.items] == ["message"] and got.request_bytes == len(req.raw)


async def test_a_body_over_the_request_cap_is_never_sent(loopback: LoopbackFactory) -> None:
    srv = await loopback([reply_message("never")])
    client = ResponsesClient(srv.base_url)
    try:
        with pytest.raises(SizeLimitReached, match="over max_request_bytes"):
            await client.generate(prompt(caps=SizeCaps(request_bytes=100)))
    finally:
        await client.aclose()
    assert srv.requests == []


async def test_a_refusal_keeps_its_wait_and_a_non_stream_is_resent(
    loopback: LoopbackFactory,
) -> None:
    srv = await loopback(
        [
            reply_http_error(429, None, {"retry-after": "3"}),
            reply_http_error(200, {"output": []}),
        ]
    )
    client = ResponsesClient(srv.base_url)
    try:
        with pytest.raises(StatusRefusal) as refused:
            await client.generate(prompt())
        with pytest.raises(StreamFailure, match="not an event stream") as odd:
            await client.generate(prompt())
    finally:
        await client.aclose()
    assert refused.value.status == 429 and refused.value.retry_after_s == 3.0
    assert odd.value.code == "not_event_stream" and odd.value.retryable


def answers(*replies: tuple[int, Any]) -> Any:
    left = list(replies)
    return lambda body: left.pop(0)


async def test_compaction_returns_the_servers_items_and_refuses_odd_answers() -> None:
    kept = message_item("kept")
    script = answers(
        (200, {"id": "cmp_1", "output": [kept], "usage": {"input_tokens": 5}}),
        (200, "not an object"),
        (200, {"output": [1, 2]}),
        (200, {"output": [message_item("x" * 5000)]}),
    )
    async with CompactingServer([reply_message("unused")], script) as srv:
        client = ResponsesClient(srv.base_url)
        try:
            got = await client.compact(prompt())
            with pytest.raises(StreamFailure, match="compaction answer has no output list"):
                await client.compact(prompt())
            with pytest.raises(StreamFailure, match="compaction answer has no output list"):
                await client.compact(prompt())
            with pytest.raises(SizeLimitReached, match="max_history_bytes"):
                await client.compact(prompt(caps=SizeCaps(history_bytes=2000)))
        finally:
            await client.aclose()
    assert [i.data for i in got.items] == [kept] and got.response_id == "cmp_1"
    assert got.usage is not None and got.usage.input_tokens == 5
    assert json.loads(srv.compact_requests[0].raw)["model"] == "m"
