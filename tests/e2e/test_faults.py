"""The fault matrix: exact expectations for the failures a network and a model server
produce, injected on the loopback server and met by the real loop (and, for the batch,
by `runner run` as a subprocess). Timeouts and backoff are small so the file stays fast."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from runner.agent import Outcome, Thread, ThreadSpec
from runner.items import message
from runner.providers.responses import ResponsesClient
from runner.providers.retry import RetryingClient
from runner.sandbox.local import LocalExecutor
from runner.sandbox.localenv import LocalEnvironment
from runner.tools import ToolContext
from tests.support.cli import run_cli, write_tasks
from tests.support.fixtures import LoopbackFactory, ThreadFactory
from tests.support.loopback import (
    RecordedRequest,
    Reply,
    by_conversation,
    last_user_text,
    reply_drop_after,
    reply_failed,
    reply_http_error,
    reply_incomplete,
    reply_message,
)


class Sink:
    def emit(self, event: dict[str, Any]) -> None:
        pass


def spec(thread_id: str = "t", prompt: str = "go") -> ThreadSpec:
    return ThreadSpec(
        thread_id=thread_id,
        model="m",
        instructions="i",
        context=[message("user", "ctx")],
        prompts=(prompt,),
        max_requests=5,
        timeout_s=60,
    )


async def run_thread(client: RetryingClient, tmp_path: Path, thread_id: str = "t") -> Outcome:
    ctx = ToolContext(environment=LocalEnvironment(LocalExecutor(), tmp_path), env={})
    return await Thread(spec(thread_id), client, [], ctx, Sink()).run()


def fast_client(base_url: str, **kw: Any) -> RetryingClient:
    idle = kw.pop("idle", 30.0)
    return RetryingClient(
        ResponsesClient(base_url, stream_idle_timeout_s=idle),
        base_delay_s=kw.pop("base_delay_s", 0.001),
        **kw,
    )


# Every way a stream can fail after the server answered 200; each counts against
# stream_max_retries (5).
FAILURES: dict[str, Reply] = {
    "cut": reply_drop_after(3),  # connection closed mid-body
    "ended": reply_drop_after(3, graceful=True),  # body ends, no response.completed
    "empty": reply_drop_after(0),  # 200, then nothing
    "incomplete": reply_incomplete("content_filter"),
    "failed": reply_failed("server_error", "try later"),
}


@pytest.mark.anyio
@pytest.mark.parametrize("kind", FAILURES)
@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
async def test_k_failed_streams_cost_k_plus_1_requests(
    loopback: LoopbackFactory, tmp_path: Path, k: int, kind: str
) -> None:
    srv = await loopback([FAILURES[kind]] * k + [reply_message("done")])
    client = fast_client(srv.base_url)
    outcome = await run_thread(client, tmp_path)
    await client.aclose()
    assert (outcome.status, outcome.final_message) == ("completed", "done")
    assert len(srv.requests) == k + 1
    assert len({r.raw for r in srv.requests}) == 1  # the same request every time


@pytest.mark.anyio
@pytest.mark.parametrize("kind", FAILURES)
async def test_six_failed_streams_fail_the_run(
    loopback: LoopbackFactory, tmp_path: Path, kind: str
) -> None:
    srv = await loopback([FAILURES[kind]] * 6)
    client = fast_client(srv.base_url)
    outcome = await run_thread(client, tmp_path)
    await client.aclose()
    assert outcome.status == "error"
    assert len(srv.requests) == 6


def test_six_cut_streams_fail_that_run_only(loopback_thread: ThreadFactory, tmp_path: Path) -> None:
    """In a batch (`runner run`, default retry settings), the run whose streams keep
    breaking fails after 1 + 5 requests; the others complete."""

    def script(req: RecordedRequest, i: int) -> Reply:
        if "doomed" in last_user_text(req):
            return reply_drop_after(2)
        return reply_message("fine")

    srv = loopback_thread(script)
    tasks = write_tasks(
        tmp_path,
        srv.base_url,
        "  - {id: a, prompt: first}\n  - {id: doomed, prompt: doomed}\n"
        "  - {id: c, prompt: third}\n",
    )
    res = run_cli("run", tasks, "--out", tmp_path / "o")
    assert res.returncode == 3, res.stderr  # a run could not reach a working model
    assert "Traceback" not in res.stderr
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    status = {t["id"]: t["status"] for t in report["runs"]}
    assert status == {"a": "completed", "doomed": "error", "c": "completed"}
    doomed = next(t for t in report["runs"] if t["id"] == "doomed")
    assert "stream" in doomed["error"]
    sent = [r for r in srv.requests if "doomed" in last_user_text(r)]
    assert len(sent) == 6


@pytest.mark.anyio
@pytest.mark.parametrize("events_before", [0, 3])
async def test_idle_detected_within_10_percent_despite_keepalives(
    loopback: LoopbackFactory, tmp_path: Path, events_before: int
) -> None:
    idle = 1.0
    stall = reply_drop_after(events_before, stall_s=10, graceful=True).but(keepalive_s=0.1)
    srv = await loopback([stall, reply_message("done")])
    client = fast_client(srv.base_url, idle=idle)
    outcome = await run_thread(client, tmp_path)
    await client.aclose()
    assert outcome.status == "completed"
    gap = srv.requests[1].received_at - srv.requests[0].received_at
    assert idle <= gap <= idle * 1.1, gap


RETRY_AFTER_S = 1.0
SLACK_S = 0.25
"""Requests already in flight when a 429 went out may still arrive this late."""


@pytest.mark.anyio
async def test_429_storm_over_20_runs(loopback: LoopbackFactory, tmp_path: Path) -> None:
    """Each run's first request gets a 429 with Retry-After (seconds or ms forms); runs
    11-20 start later, while the first wave is held. All finish; no request arrives while
    a Retry-After already sent is still running (bar the in-flight slack)."""
    told: dict[Any, float] = {}

    def script(req: RecordedRequest, i: int) -> Reply:
        key = req.prompt_cache_key
        if key in told:
            return reply_message("done")
        told[key] = req.received_at
        header = {"retry-after": "1"} if len(told) % 2 else {"retry-after-ms": "1000"}
        return reply_http_error(
            429, {"error": {"code": "rate_limit_exceeded", "message": "Rate limit reached"}}, header
        )

    srv = await loopback(script)
    client = fast_client(srv.base_url)
    outcomes: list[Outcome] = []

    async def one(n: int) -> None:
        if n >= 10:
            await anyio.sleep(0.5)
        outcomes.append(await run_thread(client, tmp_path, thread_id=f"run-{n}"))

    t0 = time.monotonic()
    async with anyio.create_task_group() as tg:
        for n in range(20):
            tg.start_soon(one, n)
    took = time.monotonic() - t0
    await client.aclose()
    assert [o.status for o in outcomes] == ["completed"] * 20
    assert len(srv.requests) == 40
    for reqs in by_conversation(srv.requests).values():
        assert len(reqs) == 2
        assert reqs[1].received_at - reqs[0].received_at >= RETRY_AFTER_S
    early = [
        (r.index, round(r.received_at - t, 3))
        for r in srv.requests
        for t in told.values()
        if t + SLACK_S < r.received_at < t + RETRY_AFTER_S
    ]
    assert early == []
    assert took < 6


@pytest.mark.anyio
@pytest.mark.parametrize(
    "reply",
    [
        reply_http_error(429, None, {"retry-after": "3600"}),
        reply_failed("rate_limit_exceeded", "Rate limit reached. Please try again in 3600s."),
    ],
)
async def test_3600s_retry_after_fails_fast(
    loopback: LoopbackFactory, tmp_path: Path, reply: Reply
) -> None:
    srv = await loopback([reply])
    client = fast_client(srv.base_url)
    t0 = time.monotonic()
    first = await run_thread(client, tmp_path, "one")
    second = await run_thread(client, tmp_path, "two")  # held by the provider's gate
    took = time.monotonic() - t0
    await client.aclose()
    assert (first.status, second.status) == ("rate_limited", "rate_limited")
    assert first.error is not None and "3600 s" in first.error
    assert len(srv.requests) == 1  # the second run never sent anything
    assert took < 1.0
