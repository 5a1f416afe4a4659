"""Resending: backoff, Retry-After honoured, and too-long waits failing fast."""

from __future__ import annotations

import email.utils
import time
from pathlib import Path

import httpx
import pytest

from runner.agent import Thread, ThreadSpec
from runner.items import message
from runner.providers.http import retry_after_s
from runner.providers.responses import ResponsesClient
from runner.providers.retry import RetryingClient
from runner.sandbox.local import LocalExecutor
from runner.tools import ToolContext
from tests.conftest import LoopbackFactory
from tests.loopback import reply_http_error, reply_message


def test_retry_after_forms() -> None:
    assert retry_after_s(httpx.Headers({"retry-after-ms": "1500"})) == 1.5
    assert retry_after_s(httpx.Headers({"retry-after": "7"})) == 7.0
    date = email.utils.formatdate(1000.0 + 30, usegmt=True)
    assert retry_after_s(httpx.Headers({"retry-after": date}), now=1000.0) == 30.0
    assert retry_after_s(httpx.Headers({"retry-after": "soon"})) is None
    assert retry_after_s(httpx.Headers({})) is None
    # retry-after-ms wins: it is the more precise of the two.
    assert retry_after_s(httpx.Headers({"retry-after-ms": "10", "retry-after": "9"})) == 0.01


async def run(base_url: str, tmp_path: Path, **kw: float) -> tuple[object, float]:
    client = RetryingClient(ResponsesClient(base_url), **kw)  # type: ignore[arg-type]
    spec = ThreadSpec(thread_id="t", model="m", instructions="i",
                      context=[message("user", "ctx")], prompts=("go",), max_requests=5,
                      timeout_s=30)
    ctx = ToolContext(cwd=tmp_path, executor=LocalExecutor(), env={})

    class Sink:
        def emit(self, event: dict[str, object]) -> None:
            pass

    t0 = time.monotonic()
    outcome = await Thread(spec, client, [], ctx, Sink()).run()
    await client.aclose()
    return outcome, time.monotonic() - t0


@pytest.mark.anyio
async def test_429_waits_as_asked(loopback: LoopbackFactory, tmp_path: Path) -> None:
    srv = await loopback([reply_http_error(429, {"error": {"code": "rate_limit_exceeded"}},
                                           {"retry-after": "1"}),
                          reply_http_error(429, None, {"retry-after-ms": "300"}),
                          reply_message("done")])
    outcome, took = await run(srv.base_url, tmp_path)
    assert outcome.status == "completed"  # type: ignore[attr-defined]
    assert len(srv.requests) == 3
    gaps = [b.received_at - a.received_at for a, b in zip(srv.requests, srv.requests[1:],
                                                          strict=False)]
    assert gaps[0] >= 1.0 and gaps[1] >= 0.3   # no request before the server allows it
    assert srv.requests[0].body == srv.requests[2].body


@pytest.mark.anyio
async def test_too_long_wait_fails_fast(loopback: LoopbackFactory, tmp_path: Path) -> None:
    srv = await loopback([reply_http_error(429, None, {"retry-after": "3600"})])
    outcome, took = await run(srv.base_url, tmp_path, max_wait_s=60)
    assert took < 5
    assert outcome.status == "error"  # type: ignore[attr-defined]
    assert "rate limited" in outcome.error  # type: ignore[attr-defined]
    assert len(srv.requests) == 1


@pytest.mark.anyio
async def test_gives_up_after_max_retries(loopback: LoopbackFactory, tmp_path: Path) -> None:
    srv = await loopback([reply_http_error(503, "busy")] * 3)
    outcome, _ = await run(srv.base_url, tmp_path, max_retries=2)
    assert outcome.status == "error" and "503" in outcome.error  # type: ignore[attr-defined]
    assert len(srv.requests) == 3


@pytest.mark.anyio
async def test_idle_stream_is_cut_and_resent(loopback: LoopbackFactory, tmp_path: Path) -> None:
    from tests.loopback import reply_drop_after

    srv = await loopback([reply_drop_after(2, stall_s=30), reply_message("done")])
    client = RetryingClient(ResponsesClient(srv.base_url, stream_idle_timeout_s=0.5))
    spec = ThreadSpec(thread_id="t", model="m", instructions="i",
                      context=[message("user", "ctx")], prompts=("go",), max_requests=5,
                      timeout_s=30)

    class Sink:
        def emit(self, event: dict[str, object]) -> None:
            pass

    outcome = await Thread(spec, client, [], ToolContext(cwd=tmp_path,
                                                         executor=LocalExecutor(), env={}),
                           Sink()).run()
    await client.aclose()
    assert outcome.status == "completed"
    gap = srv.requests[1].received_at - srv.requests[0].received_at
    assert 0.5 <= gap < 0.5 * 1.1 + 0.25   # detected within 10 % (plus backoff ≤ 0.22 s)
