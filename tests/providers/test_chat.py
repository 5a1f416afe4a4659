"""Fault injection on the Chat Completions wire, as `tests/e2e/test_faults.py` and
`tests/security/test_hostile.py` do for the Responses wire: scripted chat streams (raw SSE bytes)
from the loopback server on a real socket, met by `ChatClient` under `RetryingClient`.

Exact expectations: k failed streams cost k + 1 requests (the same bytes each time) and
six fail the call; idle detection within 10 % of its setting despite keepalive comments;
the per-attempt deadline; a huge event fails its request with bounded memory; garbled,
unknown and hostile chunks end in an answer or a clear, typed error.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from runner.errors import (
    ContextWindowExceeded,
    ModelError,
    ModelNoAnswer,
    QuotaExhausted,
    SizeLimitReached,
    StatusRefusal,
    StreamFailure,
)
from runner.items import message
from runner.providers import ModelResponse, Prompt
from runner.providers.chat import ChatClient
from runner.providers.retry import RetryingClient
from runner.sizes import SizeCaps
from runner.sse import MAX_EVENT_BYTES
from tests.support.cli import run_cli
from tests.support.fixtures import LoopbackFactory, ProcessFactory, ThreadFactory, make_git_repo
from tests.support.loopback import (
    RecordedRequest,
    Reply,
    reply_http_error,
    reply_raw,
    reply_sse_bytes,
)

# ------------------------------------------------------------------ chat stream replies


def chunk(content: str | None = None, *, finish: str | None = None, **delta: Any) -> dict[str, Any]:
    """One `chat.completion.chunk` with a single choice."""
    if content is not None:
        delta["content"] = content
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


USAGE = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "choices": [],
    "usage": {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14},
}


def chat_sse(*parts: dict[str, Any] | bytes, done: bool = True) -> bytes:
    """A chat event stream; bytes are sent as they are (malformed parts)."""
    out = b"".join(
        p if isinstance(p, bytes) else b"data: " + json.dumps(p).encode() + b"\n\n" for p in parts
    )
    return out + (b"data: [DONE]\n\n" if done else b"")


def answer(text: str = "done") -> bytes:
    return chat_sse(chunk(text), chunk(finish="stop"), USAGE)


def reply_chat(body: bytes) -> Reply:
    return reply_sse_bytes(body)


def reply_cut_mid_body(body: bytes) -> Reply:
    """200, one chunk of a chunked body, then the connection closes (no terminator)."""
    return reply_raw(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"transfer-encoding: chunked\r\n\r\n" + b"%x\r\n%s\r\n" % (len(body), body)
    )


GOOD = reply_chat(answer())


def prompt(text: str = "go") -> Prompt:
    return Prompt(
        model="m",
        instructions="i",
        input=[message("user", text)],
        tools=[],
        prompt_cache_key="thread-1",
    )


def retrying(
    base_url: str, *, idle: float = 30.0, deadline: float = 60.0, **kw: Any
) -> RetryingClient:
    return RetryingClient(
        ChatClient(base_url, stream_idle_timeout_s=idle, request_timeout_s=deadline, **kw),
        base_delay_s=0.001,
    )


async def generate(client: RetryingClient, text: str = "go") -> ModelResponse:
    try:
        return await client.generate(prompt(text))
    finally:
        await client.aclose()


def answer_text(res: ModelResponse) -> str:
    [item] = [i for i in res.items if i.type == "message"]
    return str(item.data["content"][0]["text"])


# ------------------------------------------------------------------ the retry matrix

# Every way a chat stream fails after the 200; each counts against stream_max_retries (5).
FAILURES: dict[str, Reply] = {
    "cut": reply_cut_mid_body(chat_sse(chunk("par"), chunk("tial"), done=False)),
    "ended": reply_chat(chat_sse(chunk("partial"), done=False)),  # clean end, no finish
    "done, no finish": reply_chat(chat_sse(chunk("partial"))),  # [DONE] too early
    "empty": reply_sse_bytes(b"").but(drop_after=0),  # 200, then closed
    "error chunk": reply_chat(
        chat_sse({"error": {"type": "server_error", "message": "try later"}})
    ),
    "invalid JSON": reply_chat(b'data: {"choices": [{"delta": {"content": "x\n\n'),
    "not SSE": reply_http_error(200, {"choices": []}),
}


@pytest.mark.anyio
@pytest.mark.parametrize("kind", FAILURES)
@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
async def test_k_failed_streams_cost_k_plus_1_requests(
    loopback: LoopbackFactory, k: int, kind: str
) -> None:
    srv = await loopback([FAILURES[kind]] * k + [GOOD])
    client = retrying(srv.base_url)
    res = await generate(client)
    assert answer_text(res) == "done"
    assert len(srv.requests) == k + 1 and res.retries == k
    assert {r.path for r in srv.requests} == {"/v1/chat/completions"}
    assert len({r.raw for r in srv.requests}) == 1  # the same request every time


@pytest.mark.anyio
@pytest.mark.parametrize("kind", FAILURES)
async def test_six_failed_streams_fail_the_call(loopback: LoopbackFactory, kind: str) -> None:
    srv = await loopback([FAILURES[kind]] * 6)
    with pytest.raises(StreamFailure) as info:
        await generate(retrying(srv.base_url))
    assert info.value.retryable  # transient, but the budget (5) is spent
    assert len(srv.requests) == 6 and info.value.retries == 5


@pytest.mark.anyio
async def test_server_closing_before_answering_is_resent_once_at_once(
    loopback: LoopbackFactory,
) -> None:
    """llama.cpp closes the connection after each stream: a request sent on it is resent
    at once within the same attempt; a second such close is an ordinary request retry."""
    srv = await loopback([reply_raw(b""), GOOD])
    res = await generate(retrying(srv.base_url))
    assert answer_text(res) == "done"
    assert (len(srv.requests), res.retries) == (2, 0)
    srv = await loopback([reply_raw(b""), reply_raw(b""), GOOD])
    res = await generate(retrying(srv.base_url))
    assert answer_text(res) == "done"
    assert (len(srv.requests), res.retries) == (3, 1)


# ------------------------------------------------------------------ idle and deadline


@pytest.mark.anyio
@pytest.mark.parametrize("events_before", [0, 2])
async def test_idle_detected_within_10_percent_despite_keepalives(
    loopback: LoopbackFactory, events_before: int
) -> None:
    idle = 1.0
    head = chat_sse(*[chunk("x")] * events_before, done=False) or b": hello\n\n"
    stall = reply_chat(head).but(stall_s=10, keepalive_s=0.1)
    srv = await loopback([stall, GOOD])
    client = retrying(srv.base_url, idle=idle)
    assert answer_text(await generate(client)) == "done"
    gap = srv.requests[1].received_at - srv.requests[0].received_at
    assert idle <= gap <= idle * 1.1, gap


@pytest.mark.anyio
async def test_events_reset_the_idle_clock(loopback: LoopbackFactory) -> None:
    """A slow but live stream (an event every 0.25 s, 2 s in all) outlasts a 1 s idle
    setting: only silence counts."""
    one = chat_sse(chunk("x"), done=False)
    body = one * 8 + chat_sse(chunk(finish="stop"))
    srv = await loopback([reply_chat(body).but(chunk_size=len(one), event_delay_s=0.25)])
    res = await generate(retrying(srv.base_url, idle=1.0))
    assert answer_text(res) == "x" * 8 and len(srv.requests) == 1


@pytest.mark.anyio
async def test_deadline_cuts_a_live_stream_and_resends(loopback: LoopbackFactory) -> None:
    """Events every 0.1 s keep the idle clock (0.5 s) from firing; the 1 s deadline of
    the attempt still ends it, and the resend completes."""
    one = chat_sse(chunk("x"), done=False)
    endless = reply_chat(one * 100).but(chunk_size=len(one), event_delay_s=0.1)
    srv = await loopback([endless, GOOD])
    client = retrying(srv.base_url, idle=0.5, deadline=1.0)
    assert answer_text(await generate(client)) == "done"
    # The deadline starts before the server sees the request, so the gap it measures can
    # be a hair under 1 s; the idle clock (0.5 s) or the whole stream (10 s) would be far off.
    gap = srv.requests[1].received_at - srv.requests[0].received_at
    assert 0.9 <= gap < 2.0, gap


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (
            reply_chat(chat_sse(chunk("x"), done=False) * 100).but(
                chunk_size=64, event_delay_s=0.05
            ),
            StreamFailure,
        ),
        (GOOD.but(delay_s=5), ModelNoAnswer),  # no status line before the deadline
    ],
)
async def test_deadline_error_is_typed_by_whether_the_server_answered(
    loopback: LoopbackFactory, reply: Reply, error: type[ModelError]
) -> None:
    srv = await loopback([reply])
    client = ChatClient(srv.base_url, stream_idle_timeout_s=5, request_timeout_s=0.5)
    t0 = time.monotonic()
    with pytest.raises(error) as info:
        await client.generate(prompt())
    took = time.monotonic() - t0
    await client.aclose()
    assert type(info.value) is error and info.value.code == "request_timeout"
    assert info.value.retryable and "0.5 s" in str(info.value)
    assert 0.5 <= took <= 0.6, took


# ------------------------------------------------------------------ huge and hostile input

HUGE_DELTA_BYTES = 48 * 1024 * 1024


def huge_replies() -> list[Reply]:
    """For the process server: one 48 MiB content delta in a single event."""
    return [reply_chat(chat_sse(chunk("x" * HUGE_DELTA_BYTES), chunk(finish="stop")))]


@pytest.mark.anyio
async def test_huge_event_fails_the_request_with_bounded_memory(
    loopback_process: ProcessFactory,
) -> None:
    """The server runs in its own process, so tracemalloc here sees only the client: it
    holds at most one event's cap (max_item_bytes plus 1 MiB), not the 48 MiB the server
    sends, and gives up at once with `size_limit` (resending would bring the same event)."""
    srv = loopback_process("tests.providers.test_chat:huge_replies")
    client = retrying(srv.base_url)
    tracemalloc.start()
    try:
        with pytest.raises(SizeLimitReached) as info:
            await generate(client)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    srv.stop()
    cap = SizeCaps().event_bytes
    assert cap < MAX_EVENT_BYTES
    assert "larger than 9 MiB (max_item_bytes plus 1 MiB)" in str(info.value)
    assert len(srv.requests) == 1
    assert cap < peak < cap + 8 * 1024 * 1024, peak


@pytest.mark.anyio
async def test_a_small_event_cap_is_honoured(loopback: LoopbackFactory) -> None:
    srv = await loopback([reply_chat(chat_sse(chunk("y" * 5000), chunk(finish="stop")))])
    client = RetryingClient(ChatClient(srv.base_url, max_event_bytes=4096))
    with pytest.raises(StreamFailure, match="larger than 4096 bytes"):
        await generate(client)


@pytest.mark.anyio
async def test_malformed_and_unknown_parts_are_skipped(loopback: LoopbackFactory) -> None:
    body = (
        b": a comment\n\nline without a colon\nid: 7\nretry: soon\n\n\n"
        b"event: something_new\r\ndata: "
        + json.dumps(chunk("a")).encode()
        + b"\r\n\r\n"
        + chat_sse(
            {"object": "chat.completion.chunk"},  # no choices
            {"choices": "not a list"},
            {"choices": [1, None, {"delta": 5}]},
            {"choices": [{"delta": {"content": 7, "tool_calls": 3}}]},
            {"choices": [{"delta": {"tool_calls": ["x", {"index": "?"}]}}]},
            {"unknown": {"shape": []}},
            done=False,
        )
        + b"event: only-a-name\n\n"
        + b'data: {"choices": [{"delta":\rdata: {"content": "b"}}]}\r\r'  # two data lines
        + b"data:"
        + json.dumps(chunk("c", finish="stop")).encode()
        + b"\n\n"
        + chat_sse(USAGE)
    )
    srv = await loopback([reply_chat(body)])
    res = await generate(retrying(srv.base_url))
    assert answer_text(res) == "abc"
    assert res.usage is not None and res.usage.input_tokens == 12
    assert len(srv.requests) == 1


BROKEN: dict[str, bytes] = {
    "invalid JSON": chat_sse(chunk("a"), done=False) + b'data: {"choices": [\n\n',
    "not an object": b"data: [1, 2, 3]\n\n",
    # Deeper than the parser recurses, yet cheap enough for the parse check to try it.
    "deeply nested": b"data: " + b"[" * 20_000 + b"\n\n",
    "binary garbage": bytes(range(256)).replace(b"data", b"dat") * 256,
    "NUL and invalid UTF-8": b'data: {"choices": [{"delta": {"content": "\xff\xfe\x00\xc3\x28"'
    b"}}]}\n\n\x00\xff\n\n",
}


@pytest.mark.anyio
@pytest.mark.parametrize("kind", BROKEN)
async def test_broken_streams_are_resent_then_fail_clearly(
    loopback: LoopbackFactory, kind: str
) -> None:
    srv = await loopback([reply_chat(BROKEN[kind]), GOOD])
    assert answer_text(await generate(retrying(srv.base_url))) == "done"
    assert len(srv.requests) == 2
    srv = await loopback([reply_chat(BROKEN[kind])] * 6)
    with pytest.raises(StreamFailure) as info:
        await generate(retrying(srv.base_url))
    assert len(srv.requests) == 6 and str(info.value)


@pytest.mark.anyio
async def test_split_anywhere_gives_the_same_answer(loopback: LoopbackFactory) -> None:
    """HTTP chunks of 7 bytes split events, lines and CRLFs: the framing does not care."""
    body = chat_sse(
        chunk("Let me look."),
        chunk(
            tool_calls=[
                {
                    "index": 0,
                    "id": "x",
                    "type": "function",
                    "function": {"name": "shell", "arguments": '{"comm'},
                }
            ]
        ),
        chunk(tool_calls=[{"index": 0, "function": {"arguments": 'and":["ls"]}'}}]),
        chunk(finish="tool_calls"),
        USAGE,
    ).replace(b"\n", b"\r\n")
    srv = await loopback([reply_chat(body).but(chunk_size=7)])
    res = await generate(retrying(srv.base_url))
    assert [i.type for i in res.items] == ["message", "function_call"]
    assert res.items[1].data["arguments"] == '{"command":["ls"]}'
    assert res.items[0].data["content"][0]["text"] == "Let me look."


@pytest.mark.anyio
async def test_lone_surrogates_are_made_writable(loopback: LoopbackFactory) -> None:
    body = b'data: {"choices": [{"delta": {"content": "a\\ud800b"}}]}\n\n' + chat_sse(
        chunk(finish="stop")
    )
    srv = await loopback([reply_chat(body)])
    res = await generate(retrying(srv.base_url))
    assert answer_text(res) == "a?b"  # sse._text's repair
    for item in res.items:
        item.wire.encode()  # it can be written and sent back


@pytest.mark.anyio
async def test_error_bodies_are_read_only_up_to_64_kib(loopback: LoopbackFactory) -> None:
    huge = b'{"error": {"message": "' + b"z" * (8 * 1024 * 1024) + b'"}}'
    srv = await loopback([reply_http_error(400, huge)])
    with pytest.raises(StatusRefusal) as info:
        await generate(retrying(srv.base_url))
    assert info.value.status == 400 and len(info.value.body) == 64 * 1024
    assert len(str(info.value)) < 1000 and len(srv.requests) == 1


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("reply", "error", "requests"),
    [
        (
            reply_http_error(
                400,
                {
                    "error": {
                        "code": 400,
                        "type": "exceed_context_size_error",
                        "message": "the request exceeds the available context size",
                    }
                },
            ),
            ContextWindowExceeded,
            1,
        ),
        (
            reply_chat(chat_sse({"error": {"code": "insufficient_quota", "message": "no credit"}})),
            QuotaExhausted,
            1,
        ),
        (
            reply_chat(
                chat_sse({"error": {"message": "input exceeds the maximum context length"}})
            ),
            ContextWindowExceeded,
            1,
        ),
        (
            reply_chat(chat_sse({"error": {"code": "invalid_request_error", "message": "bad"}})),
            StreamFailure,
            1,
        ),
        (reply_chat(chat_sse({"error": "a bare string"})), StreamFailure, 6),
    ],
)
async def test_error_answers_are_classified(
    loopback: LoopbackFactory, reply: Reply, error: type[ModelError], requests: int
) -> None:
    srv = await loopback([reply] * requests)
    with pytest.raises(error) as info:
        await generate(retrying(srv.base_url))
    assert type(info.value) is error and len(srv.requests) == requests
    assert "a bare string" in str(info.value) or requests == 1


@pytest.mark.anyio
async def test_rate_limit_chunk_waits_as_asked(loopback: LoopbackFactory) -> None:
    limited = reply_chat(
        chat_sse(
            {
                "error": {
                    "code": "rate_limit_exceeded",
                    "message": "Rate limit reached. Try again in 300ms.",
                }
            }
        )
    )
    srv = await loopback([limited, GOOD])
    assert answer_text(await generate(retrying(srv.base_url))) == "done"
    assert srv.requests[1].received_at - srv.requests[0].received_at >= 0.3


# ------------------------------------------------------------------ wired through the batch


def test_batch_passes_the_provider_timeouts_to_the_chat_client(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """`runner run` with a chat provider: `stream_idle_timeout_s` and `request_timeout_s`
    from the task file reach the client (the defaults, 300 s and 600 s, would hang)."""
    one = chat_sse(chunk("x"), done=False)
    first: dict[str, float] = {}

    def script(req: RecordedRequest, i: int) -> Reply:
        task = "stall" if b"stall-me" in req.raw else "slow"
        if task in first:
            return GOOD
        first[task] = req.received_at
        if task == "stall":
            return reply_chat(one).but(stall_s=20, keepalive_s=0.1)
        return reply_chat(one * 200).but(chunk_size=len(one), event_delay_s=0.1)

    srv = loopback_thread(script)
    make_git_repo(tmp_path)
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "version: 1\nproviders:\n"
        f"  fake: {{base_url: '{srv.base_url}', env_key: FAKE_API_KEY, wire_api: chat,\n"
        "         stream_idle_timeout_s: 1.0, request_timeout_s: 2.0}\n"
        "defaults:\n  model: fake/test-model\n"
        "tasks:\n  - {id: stall, prompt: stall-me}\n  - {id: slow, prompt: slow-me}\n"
    )
    res = run_cli("run", tasks, "--out", tmp_path / "o")
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert {t["id"]: t["status"] for t in report["runs"]} == {
        "stall": "completed",
        "slow": "completed",
    }
    assert {r.path for r in srv.requests} == {"/v1/chat/completions"}
    again = {("stall" if b"stall-me" in r.raw else "slow"): r.received_at for r in srv.requests[2:]}
    assert len(srv.requests) == 4
    assert 1.0 <= again["stall"] - first["stall"] < 1.5  # idle, despite keepalives
    assert 2.0 <= again["slow"] - first["slow"] < 2.5  # the deadline, despite events


def test_a_cut_off_answer_is_its_own_status_with_its_text_kept(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """An answer `max_output_tokens` cut off ends the run as `max_output_tokens` (not a
    refusal): what the model wrote is in the events, the report and JUnit's message."""
    cut = chat_sse(
        chunk("I will now explain at great length why"),
        chunk(finish="length"),
        dict(USAGE, usage={"prompt_tokens": 12, "completion_tokens": 8, "total_tokens": 20}),
    )
    srv = loopback_thread(lambda req, i: reply_chat(cut))
    make_git_repo(tmp_path)
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "version: 1\nproviders:\n"
        f"  fake: {{base_url: '{srv.base_url}', env_key: FAKE_API_KEY, wire_api: chat}}\n"
        "defaults:\n  model: fake/test-model\n  model_options: {max_output_tokens: 8}\n"
        "tasks:\n  - {id: talk, prompt: explain}\n"
    )
    res = run_cli("run", tasks, "--out", tmp_path / "o")
    assert res.returncode == 1, res.stderr
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    [task] = report["runs"]
    assert task["status"] == "max_output_tokens"
    assert task["truncated_output"] == "I will now explain at great length why"
    assert "max_output_tokens=8" in task["error"]
    assert task["usage"]["output_tokens"] == 8  # billed, so counted
    events = [
        json.loads(line) for line in (tmp_path / "o" / task["events_file"]).read_text().splitlines()
    ]
    [cut_event] = [e for e in events if e["type"] == "response.truncated"]
    assert cut_event["text"] == task["truncated_output"]
    junit = (tmp_path / "o" / "junit.xml").read_text()
    assert 'message="max_output_tokens: the answer was cut off at max_output_tokens' in junit
    assert "refused" not in junit
