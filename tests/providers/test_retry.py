"""The retry policy: which failures are resent against which budget, the waits, and the
status and message a run ends with when resending cannot help."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from runner.agent import Outcome, Thread, ThreadSpec
from runner.errors import (
    ContextWindowExceeded,
    ModelError,
    ModelNoAnswer,
    QuotaExhausted,
    RateLimited,
    StreamFailure,
)
from runner.items import message
from runner.providers import Prompt
from runner.providers.chat import ChatClient
from runner.providers.refusals import http_error, stream_error
from runner.providers.responses import ResponsesClient
from runner.providers.retry import Retry, RetryingClient, backoff_s, decide
from runner.sandbox.local import LocalExecutor
from runner.sandbox.localenv import LocalEnvironment
from runner.tools import ToolContext
from tests.support.fixtures import LoopbackFactory
from tests.support.loopback import (
    Reply,
    reply_drop_after,
    reply_failed,
    reply_http_error,
    reply_incomplete,
    reply_message,
    reply_sse_bytes,
)


def body(code: str | None, message: str = "m", kind: str = "x") -> str:
    return json.dumps({"error": {"message": message, "type": kind, "code": code}})


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (ModelNoAnswer("connect refused"), Retry("request", 0.0, False)),
        (http_error(500, "oops"), Retry("request", 0.0, False)),
        (http_error(408, ""), Retry("request", 0.0, False)),
        (
            http_error(429, body("rate_limit_exceeded"), retry_after_s=3),
            Retry("request", 3.0, True),
        ),
        (http_error(503, body("server_is_overloaded")), Retry("request", 0.0, True)),
        (StreamFailure("cut", code="stream_cut", retryable=True), Retry("stream", 0.0, False)),
        (
            stream_error({"code": "rate_limit_exceeded", "message": "Try again in 2s."}),
            Retry("stream", 2.0, True),
        ),
        (http_error(400, body(None, kind="invalid_request_error")), None),
        (http_error(404, ""), None),
        (http_error(429, body("insufficient_quota")), None),
        (http_error(401, ""), None),
        (http_error(400, body("context_length_exceeded")), None),
        (StreamFailure("bad prompt", code="invalid_prompt"), None),
    ],
)
def test_decide(exc: Any, expected: Retry | None) -> None:
    assert decide(exc) == expected


SAID: dict[str, tuple[int, dict[str, Any], type[ModelError]]] = {
    "overflow code": (
        400,
        {"code": "context_length_exceeded", "message": "no"},
        ContextWindowExceeded,
    ),
    "overflow words": (
        400,
        {"code": "invalid_request_error", "message": "This model's maximum context length is 8192"},
        ContextWindowExceeded,
    ),
    "llama.cpp overflow": (
        400,
        {
            "code": "exceed_context_size_error",
            "message": "the request exceeds the available context size",
        },
        ContextWindowExceeded,
    ),
    "quota": (429, {"code": "insufficient_quota", "message": "no credit"}, QuotaExhausted),
    "rate limit": (
        429,
        {"code": "rate_limit_exceeded", "message": "Rate limit reached. Try again in 20ms."},
        RateLimited,
    ),
}


def said_as(wire: str, status: int, error: dict[str, Any]) -> Reply:
    if wire.endswith("http"):
        return reply_http_error(status, {"error": error})
    if wire == "responses sse":
        return reply_failed(error["code"], error["message"])
    return reply_sse_bytes(b"data: " + json.dumps({"error": error}).encode() + b"\n\n")


@pytest.mark.anyio
@pytest.mark.parametrize("wire", ["responses http", "responses sse", "chat http", "chat sse"])
@pytest.mark.parametrize("said", list(SAID))
async def test_the_same_words_are_the_same_error_on_every_wire(
    loopback: LoopbackFactory, wire: str, said: str
) -> None:
    """One classification (`providers.refusals.model_error`) whether the server refuses with an HTTP
    status or with an error inside the stream, on either wire."""
    status, error, expected = SAID[said]
    srv = await loopback([said_as(wire, status, error)])
    inner = ChatClient(srv.base_url) if wire.startswith("chat") else ResponsesClient(srv.base_url)
    client = RetryingClient(inner, request_max_retries=0, stream_max_retries=0)
    with pytest.raises(ModelError) as info:
        try:
            await client.generate(
                Prompt(
                    model="m",
                    instructions="i",
                    input=[message("user", "go")],
                    tools=[],
                    prompt_cache_key="t",
                )
            )
        finally:
            await client.aclose()
    assert type(info.value) is expected and len(srv.requests) == 1


def test_backoff_doubles_with_jitter() -> None:
    for n, base in ((1, 0.2), (2, 0.4), (3, 0.8), (4, 1.6)):
        waits = [backoff_s(n) for _ in range(200)]
        assert base * 0.9 <= min(waits) and max(waits) <= base * 1.1
        assert max(waits) - min(waits) > base * 0.05  # jittered, not constant
    assert backoff_s(30) <= 10 * 1.1  # capped


class Sink:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def emit(self, event: dict[str, Any]) -> None:
        self.events.append(event)


async def run(base_url: str, tmp_path: Path, **kw: Any) -> tuple[Outcome, float]:
    client = RetryingClient(
        ResponsesClient(base_url, stream_idle_timeout_s=kw.pop("idle", 30)),
        base_delay_s=kw.pop("base_delay_s", 0.01),
        **kw,
    )
    spec = ThreadSpec(
        thread_id="t",
        model="m",
        instructions="i",
        context=[message("user", "ctx")],
        prompts=("go",),
        max_requests=5,
        timeout_s=30,
    )
    ctx = ToolContext(environment=LocalEnvironment(LocalExecutor(), tmp_path), env={})
    t0 = time.monotonic()
    outcome = await Thread(spec, client, [], ctx, Sink()).run()
    await client.aclose()
    return outcome, time.monotonic() - t0


@pytest.mark.anyio
async def test_429_waits_as_asked(loopback: LoopbackFactory, tmp_path: Path) -> None:
    srv = await loopback(
        [
            reply_http_error(429, {"error": {"code": "rate_limit_exceeded"}}, {"retry-after": "1"}),
            reply_http_error(429, None, {"retry-after-ms": "300"}),
            reply_message("done"),
        ]
    )
    outcome, took = await run(srv.base_url, tmp_path)
    assert outcome.status == "completed"
    assert len(srv.requests) == 3
    gaps = [
        b.received_at - a.received_at for a, b in zip(srv.requests, srv.requests[1:], strict=False)
    ]
    assert gaps[0] >= 1.0 and gaps[1] >= 0.3  # no request before the server allows it
    assert srv.requests[0].body == srv.requests[2].body


@pytest.mark.anyio
async def test_try_again_in_from_a_failed_stream_is_honoured(
    loopback: LoopbackFactory, tmp_path: Path
) -> None:
    srv = await loopback(
        [
            reply_failed("rate_limit_exceeded", "Rate limit reached. Please try again in 400ms."),
            reply_message("done"),
        ]
    )
    outcome, _ = await run(srv.base_url, tmp_path)
    assert outcome.status == "completed"
    assert srv.requests[1].received_at - srv.requests[0].received_at >= 0.4


@pytest.mark.anyio
async def test_too_long_wait_fails_fast(loopback: LoopbackFactory, tmp_path: Path) -> None:
    srv = await loopback([reply_http_error(429, None, {"retry-after": "3600"})])
    outcome, took = await run(srv.base_url, tmp_path, max_wait_s=60)
    assert took < 5
    assert outcome.status == "rate_limited"
    assert outcome.error is not None and "3600 s" in outcome.error and "60 s" in outcome.error
    assert len(srv.requests) == 1


@pytest.mark.anyio
async def test_endless_429_ends_rate_limited(loopback: LoopbackFactory, tmp_path: Path) -> None:
    srv = await loopback(lambda req, i: reply_http_error(429, None, {"retry-after-ms": "10"}))
    outcome, _ = await run(srv.base_url, tmp_path, request_max_retries=3)
    assert outcome.status == "rate_limited"
    assert outcome.error is not None and "after 3 retries" in outcome.error
    assert len(srv.requests) == 4


@pytest.mark.anyio
async def test_gives_up_after_request_retries(loopback: LoopbackFactory, tmp_path: Path) -> None:
    srv = await loopback([reply_http_error(503, "busy")] * 3)
    outcome, _ = await run(srv.base_url, tmp_path, request_max_retries=2)
    assert outcome.status == "error"
    assert outcome.error is not None and "503" in outcome.error
    assert len(srv.requests) == 3


@pytest.mark.anyio
async def test_budgets_are_counted_apart(loopback: LoopbackFactory, tmp_path: Path) -> None:
    """Two request failures and two stream failures fit budgets of 2 and 2: five requests."""
    srv = await loopback(
        [
            reply_http_error(500),
            reply_drop_after(1),
            reply_http_error(502),
            reply_incomplete("content_filter"),
            reply_message("done"),
        ]
    )
    outcome, _ = await run(srv.base_url, tmp_path, request_max_retries=2, stream_max_retries=2)
    assert outcome.status == "completed" and len(srv.requests) == 5
    srv = await loopback(
        [reply_http_error(500), reply_drop_after(1), reply_http_error(502), reply_http_error(503)]
    )
    outcome, _ = await run(srv.base_url, tmp_path, request_max_retries=2, stream_max_retries=2)
    assert outcome.status == "error" and len(srv.requests) == 4


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("reply", "status", "words"),
    [
        (
            reply_http_error(
                429,
                {
                    "error": {
                        "message": "You exceeded your current quota",
                        "type": "insufficient_quota",
                        "code": "insufficient_quota",
                    }
                },
            ),
            "quota_exhausted",
            "quota exhausted",
        ),
        (reply_failed("insufficient_quota", "no credit"), "quota_exhausted", "quota exhausted"),
        (
            reply_http_error(
                400,
                {
                    "error": {
                        "message": "Invalid value for 'model'",
                        "type": "invalid_request_error",
                        "code": None,
                    }
                },
            ),
            "failed",
            "Invalid value for 'model'",
        ),
        (
            reply_http_error(
                401,
                {
                    "error": {
                        "message": "Incorrect API key provided",
                        "type": "invalid_request_error",
                        "code": "invalid_api_key",
                    }
                },
            ),
            "error",
            "check the API key in $FAKE_API_KEY",
        ),
        (reply_http_error(403, "forbidden"), "error", "check the API key in $FAKE_API_KEY"),
        (reply_failed("invalid_prompt", "flagged"), "failed", "invalid_prompt: flagged"),
    ],
)
async def test_fatal_errors_end_at_once(
    loopback: LoopbackFactory, tmp_path: Path, reply: Reply, status: str, words: str
) -> None:
    srv = await loopback([reply])
    outcome, _ = await run(srv.base_url, tmp_path, key_env="FAKE_API_KEY")
    assert (outcome.status, len(srv.requests)) == (status, 1)
    assert outcome.error is not None and words in outcome.error


@pytest.mark.anyio
@pytest.mark.parametrize("code", ["server_is_overloaded", "slow_down", "server_error"])
async def test_transient_failures_are_resent(
    loopback: LoopbackFactory, tmp_path: Path, code: str
) -> None:
    srv = await loopback([reply_failed(code, "busy"), reply_message("done")])
    outcome, _ = await run(srv.base_url, tmp_path)
    assert outcome.status == "completed" and len(srv.requests) == 2


@pytest.mark.anyio
async def test_request_deadline(loopback: LoopbackFactory, tmp_path: Path) -> None:
    """A server that keeps sending events slowly never trips the idle timeout; the
    per-request deadline cuts it, and the request is resent."""
    slow = reply_message("x" * 200).but(delta_chars=1, event_delay_s=0.05)
    srv = await loopback([slow, reply_message("done")])
    client = RetryingClient(
        ResponsesClient(srv.base_url, stream_idle_timeout_s=1.0, request_timeout_s=0.5),
        base_delay_s=0.01,
    )
    spec = ThreadSpec(
        thread_id="t",
        model="m",
        instructions="i",
        context=[],
        prompts=("go",),
        max_requests=5,
        timeout_s=30,
    )
    ctx = ToolContext(environment=LocalEnvironment(LocalExecutor(), tmp_path), env={})
    outcome = await Thread(spec, client, [], ctx, Sink()).run()
    await client.aclose()
    assert outcome.status == "completed" and outcome.final_message == "done"
    gap = srv.requests[1].received_at - srv.requests[0].received_at
    assert 0.5 <= gap < 0.8


@pytest.mark.anyio
async def test_compaction_waits_behind_the_rate_gate(loopback: Any) -> None:
    """A provider holding us off after a 429 is not hit by a compaction request either."""
    from runner.errors import RateLimited as Limited
    from runner.items import message
    from runner.providers import Prompt, find_compactor
    from runner.providers.responses import ResponsesClient
    from runner.providers.retry import RetryingClient

    srv = await loopback(lambda req, i: reply_message("unused"))
    client = RetryingClient(ResponsesClient(srv.base_url), max_wait_s=5)
    try:
        assert find_compactor(client) is client
        client.gate.hold(3600)
        prompt = Prompt(
            model="m",
            instructions="",
            input=(message("user", "hi"),),
            tools=[],
            prompt_cache_key="k",
        )
        with pytest.raises(Limited):
            await client.compact(prompt)
        assert srv.requests == []
    finally:
        await client.aclose()
