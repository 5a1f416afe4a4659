"""The loopback server itself, driven by a plain httpx client.

The whole suite trusts this server's framing, token counts and invariant checks, so
they are pinned here against hand-computed expectations.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse, connect_sse

from tests.support import paths
from tests.support.fixtures import LoopbackFactory, ProcessFactory, ThreadFactory
from tests.support.loopback import (
    LoopbackServer,
    RecordedRequest,
    Reply,
    assert_call_outputs_paired,
    assert_exact_extension,
    by_conversation,
    custom_tool_call_item,
    find_extension_break,
    function_call_item,
    message_item,
    per_conversation,
    reasoning_item,
    reply_custom_tool_call,
    reply_drop_after,
    reply_events,
    reply_failed,
    reply_function_call,
    reply_http_error,
    reply_incomplete,
    reply_items,
    reply_message,
    reply_raw,
    reply_sse_bytes,
)

Event = tuple[str, dict[str, Any]]


def compact(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


TOOLS = [
    {"type": "function", "name": "shell", "strict": False, "parameters": {"type": "object"}},
    {"type": "function", "name": "update_plan", "strict": False, "parameters": {"type": "object"}},
]


def body(
    input: list[dict[str, Any]],
    *,
    key: str = "thread-1",
    tools: Any = None,
    instructions: str = "You are a careful agent.",
) -> dict[str, Any]:
    return {
        "model": "loop-1",
        "instructions": instructions,
        "input": input,
        "tools": TOOLS if tools is None else tools,
        "tool_choice": "auto",
        "store": False,
        "stream": True,
        "prompt_cache_key": key,
    }


def post(client: httpx.Client, url: str, payload: dict[str, Any] | str) -> list[Event]:
    """POST one request and return its SSE events as (event name, data)."""
    content = payload if isinstance(payload, str) else compact(payload)
    with connect_sse(client, "POST", url, content=content.encode()) as source:
        return [(e.event, json.loads(e.data)) for e in source.iter_sse()]


def sent_back(item: dict[str, Any]) -> dict[str, Any]:
    """An output item as a client sends it back (Codex 0.169): id kept, nulls dropped."""
    return {k: v for k, v in item.items() if v is not None}


def next_input(req: RecordedRequest, *extra: dict[str, Any]) -> list[dict[str, Any]]:
    """What a correct client sends next: old input, the reply's items, new items."""
    return [*req.input, *(sent_back(i) for i in req.output), *extra]


# -- keep-alive and framing ----------------------------------------------------------------


def test_keep_alive_reuses_one_connection_for_ten_requests(loopback_thread: ThreadFactory) -> None:
    srv = loopback_thread([reply_message(f"answer {n}") for n in range(10)])
    with httpx.Client() as client:
        for n in range(10):
            events = post(client, srv.base_url + "/responses", body([user(f"q{n}")]))
            assert events[-1][0] == "response.completed"
    assert srv.connections_opened == 1
    assert [r.conn_id for r in srv.requests] == [1] * 10
    assert [r.conn_seq for r in srv.requests] == list(range(10))
    assert [r.index for r in srv.requests] == list(range(10))


@pytest.mark.anyio
async def test_in_process_server_keeps_alive_in_the_test_loop(loopback: LoopbackFactory) -> None:
    srv = await loopback(lambda req, i: reply_message(f"turn {i}"))
    async with httpx.AsyncClient() as client:
        for n in range(10):
            async with aconnect_sse(
                client, "POST", srv.responses_url, json=body([user(f"q{n}")])
            ) as source:
                names = [e.event async for e in source.aiter_sse()]
            assert names[-1] == "response.completed"
    assert srv.connections_opened == 1
    assert srv.requests[9].output[0]["content"][0]["text"] == "turn 9"


SSE_EVENT = re.compile(rb"event: ([a-z_.]+)\ndata: (\{[^\n]*\})\n\n")


def test_sse_framing_is_exact(loopback_thread: ThreadFactory) -> None:
    srv = loopback_thread([reply_message("0123456789abcdefghij")])
    with (
        httpx.Client() as client,
        client.stream("POST", srv.base_url + "/responses", json=body([user("hi")])) as resp,
    ):
        assert resp.status_code == 200
        assert resp.headers["content-type"] == "text/event-stream"
        assert resp.headers["transfer-encoding"] == "chunked"
        raw = resp.read()
    frames = SSE_EVENT.findall(raw)
    assert b"".join(b"event: %s\ndata: %s\n\n" % f for f in frames) == raw
    for n, (name, data) in enumerate(frames):
        event = json.loads(data)
        assert event["type"] == name.decode()
        assert event["sequence_number"] == n


def test_sse_events_cover_every_item_kind(loopback_thread: ThreadFactory) -> None:
    items = [
        reasoning_item(["plan it", "then do it"]),
        message_item("Looking around first."),
        function_call_item("shell", {"command": ["ls", "-la"]}, call_id="call_a"),
        custom_tool_call_item("apply_patch", "*** Begin Patch\n*** End Patch\n"),
    ]
    srv = loopback_thread([reply_items(items).but(delta_chars=5)])
    with httpx.Client() as client:
        events = post(client, srv.base_url + "/responses", body([user("go")]))
    names = [n for n, _ in events]
    assert all(n == d["type"] for n, d in events)
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    assert names[:2] == ["response.created", "response.in_progress"]
    assert names[-1] == "response.completed"

    done = [d["item"] for n, d in events if n == "response.output_item.done"]
    added = [d["item"] for n, d in events if n == "response.output_item.added"]
    final = events[-1][1]["response"]
    assert final["id"] == events[0][1]["response"]["id"] == srv.requests[0].response_id
    assert final["output"] == done == srv.requests[0].output
    assert [i["type"] for i in done] == [
        "reasoning",
        "message",
        "function_call",
        "custom_tool_call",
    ]
    assert len({i["id"] for i in done}) == 4
    assert [i["id"] for i in added] == [i["id"] for i in done]
    assert added[2]["arguments"] == "" and added[3]["input"] == ""
    assert done[2]["call_id"] == "call_a" and done[3]["call_id"].startswith("call_")

    def joined(kind: str) -> str:
        return "".join(d["delta"] for n, d in events if n == kind)

    assert joined("response.output_text.delta") == "Looking around first."
    assert joined("response.function_call_arguments.delta") == '{"command":["ls","-la"]}'
    assert joined("response.custom_tool_call_input.delta") == done[3]["input"]
    assert joined("response.reasoning_summary_text.delta") == "plan itthen do it"
    assert names.count("response.output_text.delta") == 5  # 21 chars in 5-char deltas

    usage = final["usage"]
    assert set(usage) == {
        "input_tokens",
        "input_tokens_details",
        "output_tokens",
        "output_tokens_details",
        "total_tokens",
    }
    assert usage["output_tokens_details"]["reasoning_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


def test_chunk_size_splits_events_across_chunks(loopback_thread: ThreadFactory) -> None:
    srv = loopback_thread(
        [reply_message("split me please").but(chunk_size=7), reply_message("split me please")]
    )
    with httpx.Client() as client:
        split = post(client, srv.base_url + "/responses", body([user("a")]))
        whole = post(client, srv.base_url + "/responses", body([user("a")]))
    assert [n for n, _ in split] == [n for n, _ in whole]
    assert split[-1][1]["response"]["output"][0]["content"][0]["text"] == "split me please"


# -- token accounting --------------------------------------------------------------------


def test_cached_tokens_follow_the_exact_prefix_rule(loopback_thread: ThreadFactory) -> None:
    srv = loopback_thread(lambda req, i: reply_message(f"reply {i}"))
    url = srv.base_url + "/responses"
    instr = compact("You are a careful agent.")
    t1, t2 = compact(TOOLS[0]), compact(TOOLS[1])
    with httpx.Client() as client:
        first = body([user("first question")])
        post(client, url, first)
        r0 = srv.requests[0]
        u1 = compact(user("first question"))
        assert r0.input_tokens == len(instr + t1 + t2 + u1) // 4
        assert r0.cached_tokens == 0

        post(client, url, body(next_input(r0, user("second, with ünïcode"))))
        r1 = srv.requests[1]
        assert r1.prompt_bytes == len((instr + t1 + t2 + "".join(r1.input_raw)).encode())
        assert r1.input_tokens == r1.prompt_bytes // 4
        assert r1.cached_tokens == len(instr + t1 + t2 + u1) // 4 == r1.ideal_cached_tokens
        assert r1.usage is not None
        assert r1.usage["input_tokens"] == r1.input_tokens
        assert r1.usage["input_tokens_details"]["cached_tokens"] == r1.cached_tokens

        other = body([user("first question")], key="thread-2")
        post(client, url, other)
        assert srv.requests[2].cached_tokens == 0  # another conversation, cold cache

        edited = next_input(r1, user("third"))
        edited[1] = {**edited[1], "role": "assistant", "phase": "final_answer"}
        post(client, url, body(edited))
        assert srv.requests[3].cached_tokens == len(instr + t1 + t2 + u1) // 4

        post(client, url, body(edited, tools=[TOOLS[1], TOOLS[0]]))
        assert srv.requests[4].cached_tokens == len(instr) // 4

        post(client, url, body(edited, tools=[TOOLS[1], TOOLS[0]], instructions="New."))
        assert srv.requests[5].cached_tokens == 0

        same = body(edited, tools=[TOOLS[1], TOOLS[0]], instructions="New.")
        post(client, url, {**same, "model": "loop-2"})
        assert srv.requests[6].cached_tokens == 0  # another model, another cache


def test_cache_block_and_minimum_round_down(loopback_thread: ThreadFactory) -> None:
    srv = loopback_thread(lambda req, i: reply_message("ok"), cache_block=16, cache_min=100)
    url = srv.base_url + "/responses"
    with httpx.Client() as client:
        post(client, url, body([user("x" * 400)]))
        post(client, url, body(next_input(srv.requests[0], user("y"))))
        post(client, url, body([user("tiny")], key="small"))
        post(client, url, body([user("tiny"), user("more")], key="small"))
    big, small = srv.requests[1], srv.requests[3]
    assert big.cached_tokens == (big.prefix_bytes // 4) // 16 * 16 > 0
    assert 0 < small.prefix_bytes // 4 < 100 and small.cached_tokens == 0


# -- invariant checks ------------------------------------------------------------------


def run_thread(srv_url: str, inputs: list[list[dict[str, Any]]]) -> None:
    with httpx.Client() as client:
        for inp in inputs:
            post(client, srv_url + "/responses", body(inp))


def test_extension_checker_accepts_an_exact_extension(loopback_thread: ThreadFactory) -> None:
    srv = loopback_thread(
        [
            reply_function_call("shell", {"command": ["ls"]}, "c1"),
            reply_message("done"),
            reply_message("you are welcome"),
        ]
    )
    url = srv.base_url + "/responses"
    with httpx.Client() as client:
        post(client, url, body([user("list files")]))
        out = {"type": "function_call_output", "call_id": "c1", "output": "a.txt"}
        post(client, url, body(next_input(srv.requests[0], out)))
        post(client, url, body(next_input(srv.requests[1], user("thanks"))))
    assert_exact_extension(srv.requests)
    assert srv.requests[2].cached_tokens == srv.requests[2].ideal_cached_tokens > 0


def test_extension_checker_catches_a_modified_item(loopback_thread: ThreadFactory) -> None:
    srv = loopback_thread(lambda req, i: reply_message(f"r{i}"))
    with httpx.Client() as client:
        url = srv.base_url + "/responses"
        post(client, url, body([user("one"), user("two")]))
        nxt = next_input(srv.requests[0], user("three"))
        nxt[1] = user("TWO")
        post(client, url, body(nxt))
    problem = find_extension_break(srv.requests)
    assert problem is not None
    assert "request 1" in problem and "input[1] (message) differs" in problem
    assert '"text":"two"' in problem and '"text":"TWO"' in problem
    with pytest.raises(AssertionError, match=r"input\[1\]"):
        assert_exact_extension(srv.requests)


def test_extension_checker_catches_reserialized_bytes(loopback_thread: ThreadFactory) -> None:
    srv = loopback_thread(lambda req, i: reply_message(f"r{i}"))
    first = compact(body([user("one")]))
    reordered = dict(reversed(list(user("one").items())))
    second = compact(body([reordered, user("two")]))
    with httpx.Client() as client:
        post(client, srv.base_url + "/responses", first)
        post(client, srv.base_url + "/responses", second)
    problem = find_extension_break(srv.requests) or ""
    assert "input[0]" in problem and "same JSON value, different bytes" in problem
    assert (
        srv.requests[1].cached_tokens
        == srv.requests[1].prefix_bytes // 4
        < srv.requests[1].ideal_cached_tokens
    )


def test_extension_checker_catches_a_reordered_tool(loopback_thread: ThreadFactory) -> None:
    srv = loopback_thread(lambda req, i: reply_message(f"r{i}"))
    with httpx.Client() as client:
        url = srv.base_url + "/responses"
        post(client, url, body([user("one")]))
        post(client, url, body(next_input(srv.requests[0]), tools=[TOOLS[1], TOOLS[0]]))
    with pytest.raises(
        AssertionError,
        match=re.escape("tools reordered: ['shell', 'update_plan'] -> ['update_plan', 'shell']"),
    ):
        assert_exact_extension(srv.requests)


def test_extension_checker_wants_the_previous_output(loopback_thread: ThreadFactory) -> None:
    srv = loopback_thread(
        [reply_items([reasoning_item("hm"), message_item("hello")]), reply_message("again")]
    )
    with httpx.Client() as client:
        url = srv.base_url + "/responses"
        post(client, url, body([user("one")]))
        dropped_reasoning = [user("one"), sent_back(srv.requests[0].output[1]), user("two")]
        post(client, url, body(dropped_reasoning))
    with pytest.raises(AssertionError, match=r"output\[0\] \(reasoning\) without null fields"):
        assert_exact_extension(srv.requests)


def test_extension_after_a_failed_reply_is_a_plain_retry(loopback_thread: ThreadFactory) -> None:
    srv = loopback_thread([reply_drop_after(4), reply_message("ok")])
    with httpx.Client() as client:
        with pytest.raises(httpx.RemoteProtocolError):
            post(client, srv.base_url + "/responses", body([user("one")]))
        post(client, srv.base_url + "/responses", body([user("one")]))
    assert srv.requests[0].outcome == "dropped" and srv.requests[0].output == []
    assert_exact_extension(srv.requests)
    assert srv.requests[1].cached_tokens == srv.requests[1].input_tokens


def test_pairing_checker() -> None:
    call = function_call_item("shell", {}, "c1") | {"status": "completed"}
    out = {"type": "function_call_output", "call_id": "c1", "output": "ok"}
    custom = custom_tool_call_item("apply_patch", "x", "c2")
    custom_out = {"type": "custom_tool_call_output", "call_id": "c2", "output": "done"}
    assert_call_outputs_paired([user("u"), call, out, custom, custom_out])

    orphan = {"type": "function_call_output", "call_id": "zz", "output": "?"}
    with pytest.raises(AssertionError, match="orphan function_call_output call_id=zz"):
        assert_call_outputs_paired([user("u"), call, out, orphan])
    with pytest.raises(AssertionError, match=r"input\[1\]: function_call call_id=c1 has no"):
        assert_call_outputs_paired([user("u"), call])
    with pytest.raises(AssertionError, match="has 2 outputs"):
        assert_call_outputs_paired([call, out, out])
    with pytest.raises(AssertionError, match="orphan"):
        assert_call_outputs_paired([out, call])  # output before its call
    with pytest.raises(AssertionError, match="answers a custom_tool_call"):
        assert_call_outputs_paired([custom, {**out, "call_id": "c2"}])


@pytest.mark.anyio
async def test_strict_server_fails_on_an_orphan_output() -> None:
    orphan = {"type": "function_call_output", "call_id": "nope", "output": "?"}
    with pytest.raises(AssertionError, match="orphan function_call_output call_id=nope"):
        async with LoopbackServer([reply_message("ok")]) as srv, httpx.AsyncClient() as c:
            resp = await c.post(srv.responses_url, json=body([user("u"), orphan]))
            assert resp.status_code == 200  # answered normally; reported at exit
    assert srv.requests[0].index == 0


# -- cut streams, errors, odd replies ----------------------------------------------------


def test_dropped_stream_really_cuts(loopback_thread: ThreadFactory) -> None:
    srv = loopback_thread([reply_drop_after(3), reply_message("after")])
    seen: list[str] = []
    with httpx.Client() as client:
        with (
            pytest.raises(httpx.RemoteProtocolError),
            connect_sse(client, "POST", srv.base_url + "/responses", json=body([user("a")])) as src,
        ):
            seen.extend(e.event for e in src.iter_sse())
        assert seen == ["response.created", "response.in_progress", "response.output_item.added"]
        events = post(client, srv.base_url + "/responses", body([user("a")]))
    assert events[-1][0] == "response.completed"
    assert srv.connections_opened == 2  # the cut connection is gone
    assert [r.outcome for r in srv.requests] == ["dropped", "completed"]


def test_graceful_drop_ends_the_body_without_completed(loopback_thread: ThreadFactory) -> None:
    srv = loopback_thread([reply_drop_after(2, graceful=True), reply_message("next")])
    with httpx.Client() as client:
        events = post(client, srv.base_url + "/responses", body([user("a")]))
        assert [n for n, _ in events] == ["response.created", "response.in_progress"]
        post(client, srv.base_url + "/responses", body([user("a")]))
    assert srv.connections_opened == 1
    assert srv.requests[0].outcome == "dropped"


def test_stalled_stream_times_out_and_server_still_stops(loopback_thread: ThreadFactory) -> None:
    srv = loopback_thread([reply_drop_after(1, stall_s=30)])
    with (
        httpx.Client(timeout=httpx.Timeout(5, read=0.3)) as client,
        pytest.raises(httpx.ReadTimeout),
    ):
        post(client, srv.base_url + "/responses", body([user("a")]))
    started = time.monotonic()
    srv.stop()
    assert time.monotonic() - started < 5


def test_http_error_replies(loopback_thread: ThreadFactory) -> None:
    limited = {"error": {"type": "usage_limit_reached", "message": "slow down"}}
    srv = loopback_thread(
        [
            reply_http_error(429, limited, {"retry-after": "2"}),
            reply_http_error(500),
            reply_http_error(400, "plain text"),
            reply_message("fine"),
        ]
    )
    url = srv.base_url + "/responses"
    with httpx.Client() as client:
        r429 = client.post(url, json=body([user("a")]))
        r500 = client.post(url, json=body([user("a")]))
        r400 = client.post(url, json=body([user("a")]))
        ok = client.post(url, json=body([user("a")]))
    assert (r429.status_code, r429.json(), r429.headers["retry-after"]) == (429, limited, "2")
    assert r500.status_code == 500 and r500.json()["error"]["type"] == "server_error"
    assert r400.status_code == 400 and r400.text == "plain text"
    assert ok.status_code == 200
    assert srv.connections_opened == 1
    assert [r.status for r in srv.requests] == [429, 500, 400, 200]


def test_failed_and_incomplete_streams(loopback_thread: ThreadFactory) -> None:
    srv = loopback_thread(
        [
            reply_failed("rate_limit_exceeded", "Try again in 1.5s"),
            reply_incomplete("max_output_tokens", output=[message_item("partial")]),
        ]
    )
    with httpx.Client() as client:
        failed = post(client, srv.base_url + "/responses", body([user("a")]))
        incomplete = post(client, srv.base_url + "/responses", body([user("a")]))
    assert failed[-1][0] == "response.failed"
    assert failed[-1][1]["response"]["error"] == {
        "code": "rate_limit_exceeded",
        "message": "Try again in 1.5s",
    }
    assert incomplete[-1][0] == "response.incomplete"
    resp = incomplete[-1][1]["response"]
    assert resp["incomplete_details"] == {"reason": "max_output_tokens"}
    assert [r.outcome for r in srv.requests] == ["failed", "incomplete"]
    assert all(r.output == [] for r in srv.requests)


def test_custom_events_raw_sse_and_close_delimited(loopback_thread: ThreadFactory) -> None:
    done = message_item("only done") | {"id": "msg_x"}
    codex_style = reply_events(
        [
            {"type": "response.created", "response": {"id": "resp_x"}},
            {"type": "response.output_item.done", "item": done},
            {"type": "response.completed", "response": {"id": "resp_x", "output": [done]}},
        ]
    )
    srv = loopback_thread(
        [
            codex_style,
            reply_sse_bytes(b"event: response.created\ndata: {not json\n\n"),
            reply_custom_tool_call("apply_patch", "patch").but(close_delimited=True),
        ]
    )
    url = srv.base_url + "/responses"
    with httpx.Client() as client:
        custom = post(client, url, body([user("a")]))
        with client.stream("POST", url, json=body([user("a")])) as resp:
            assert resp.read() == b"event: response.created\ndata: {not json\n\n"
        with client.stream("POST", url, json=body([user("a")])) as resp:
            assert "transfer-encoding" not in resp.headers
            closed = resp.read()
    assert [d["sequence_number"] for _, d in custom] == [0, 1, 2]
    assert srv.requests[0].output == [done] and srv.requests[0].response_id == "resp_x"
    assert closed.endswith(b"\n\n") and b"response.completed" in closed
    assert srv.connections_opened == 1  # only the close-delimited reply closes


def test_raw_reply_and_unknown_paths(loopback_thread: ThreadFactory) -> None:
    srv = loopback_thread(
        [
            reply_raw(
                b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 3\r\nconnection: close\r\n\r\nbad"
            )
        ]
    )
    with httpx.Client() as client:
        missing = client.get(srv.base_url + "/models")
        wrong_method = client.get(srv.base_url + "/responses")
        not_json = client.post(srv.base_url + "/responses", content=b"{nope")
        raw = client.post(srv.base_url + "/responses?api-version=x", json=body([user("a")]))
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "Unknown path: GET /v1/models"
    assert wrong_method.status_code == 405
    assert not_json.status_code == 400 and not_json.json()["error"]["code"] == "invalid_json"
    assert (raw.status_code, raw.text) == (502, "bad")
    assert [r.path for r in srv.other_requests] == ["/v1/models", "/v1/responses", "/v1/responses"]
    assert len(srv.requests) == 1 and srv.requests[0].query == {"api-version": ["x"]}


def test_exhausted_script_answers_500_and_fails_strict_exit() -> None:
    from tests.support.loopback import start_in_thread

    srv = start_in_thread([reply_message("only one")])
    with httpx.Client() as client:
        client.post(srv.base_url + "/responses", json=body([user("a")]))
        extra = client.post(srv.base_url + "/responses", json=body([user("a")]))
    assert extra.status_code == 500
    assert extra.json()["error"]["code"] == "loopback_script_error"
    with pytest.raises(AssertionError, match="script exhausted after 1 replies"):
        srv.stop()


def test_recorded_request_fields(loopback_thread: ThreadFactory) -> None:
    srv = loopback_thread([reply_message("hi", headers={"x-codex-turn-state": "s1"})])
    payload = body([user("a")])
    with httpx.Client() as client:
        resp = client.post(
            srv.base_url + "/responses?x=1",
            json=payload,
            headers={"session_id": "abc", "Authorization": "Bearer k"},
        )
    assert resp.headers["x-codex-turn-state"] == "s1"
    req = srv.requests[0]
    assert (req.method, req.path, req.query) == ("POST", "/v1/responses", {"x": ["1"]})
    assert req.header("Session_Id") == "abc" and req.headers["authorization"] == "Bearer k"
    assert req.body == payload and json.loads(req.raw) == payload
    assert (req.model, req.instructions, req.prompt_cache_key) == (
        "loop-1",
        "You are a careful agent.",
        "thread-1",
    )
    assert req.tools == TOOLS and req.input == [user("a")]
    assert req.input_raw == [compact(user("a"))] and req.tools_raw == [compact(t) for t in TOOLS]
    assert req.instructions_raw == compact("You are a careful agent.")


def test_per_conversation_counts_turns_per_cache_key(loopback_thread: ThreadFactory) -> None:
    srv = loopback_thread(per_conversation(lambda req, turn: reply_message(f"turn {turn}")))
    with httpx.Client() as client:
        for key in ["a", "b", "a", "a", "b"]:
            post(client, srv.base_url + "/responses", body([user("x")], key=key))
    texts = {
        k: [r.output[0]["content"][0]["text"] for r in reqs]
        for k, reqs in by_conversation(srv.requests).items()
    }
    assert texts == {"a": ["turn 0", "turn 1", "turn 2"], "b": ["turn 0", "turn 1"]}


def test_event_delay_spreads_the_stream(loopback_thread: ThreadFactory) -> None:
    srv = loopback_thread([reply_message("slow").but(event_delay_s=0.02, delay_s=0.05)])
    started = time.monotonic()
    with httpx.Client() as client:
        events = post(client, srv.base_url + "/responses", body([user("a")]))
    assert time.monotonic() - started >= 0.05 + 0.02 * (len(events) - 1)


# -- process mode ------------------------------------------------------------------------


def process_script() -> list[Reply]:
    """A zero-argument factory, as `--script tests.support.test_loopback:process_script` takes."""
    return [reply_function_call("shell", {"command": ["pwd"]}, "p1"), reply_message("bye")]


def test_process_mode_serves_and_records(loopback_process: ProcessFactory) -> None:
    srv = loopback_process("tests.support.test_loopback:process_script")
    with httpx.Client() as client:
        first = post(client, srv.base_url + "/responses", body([user("where?")]))
        assert first[-1][1]["response"]["output"][0]["call_id"] == "p1"
        call = sent_back(first[-1][1]["response"]["output"][0])
        out = {"type": "function_call_output", "call_id": "p1", "output": "/tmp"}
        second = post(client, srv.base_url + "/responses", body([user("where?"), call, out]))
        assert second[-1][1]["response"]["output"][0]["content"][0]["text"] == "bye"
    srv.stop()
    assert srv.connections_opened == 1
    assert [r.outcome for r in srv.requests] == ["completed", "completed"]
    assert_exact_extension(srv.requests)
    assert srv.requests[1].cached_tokens > 0


def test_process_mode_default_echo_without_bodies(loopback_process: ProcessFactory) -> None:
    srv = loopback_process(keep_bodies=False)
    with httpx.Client() as client:
        events = post(client, srv.base_url + "/responses", body([user("ping")]))
    assert events[-1][1]["response"]["output"][0]["content"][0]["text"] == "echo: ping"
    srv.stop()
    assert srv.requests[0].raw == b"" and srv.requests[0].input_tokens > 0


def test_python_dash_m_entry_point(tmp_path: Path) -> None:
    port_file, record = tmp_path / "port", tmp_path / "record.json"
    root = paths.ROOT
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.loopback",
            "--port-file",
            str(port_file),
            "--record",
            str(record),
        ],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while not port_file.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        url = f"http://127.0.0.1:{port_file.read_text()}/v1/responses"
        resp = httpx.post(url, json=body([user("hello")]))
        assert b"echo: hello" in resp.content
    finally:
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=10)
    assert proc.returncode == 0, stderr
    assert stdout.decode().startswith("http://127.0.0.1:")
    data = json.loads(record.read_text())
    assert data["connections_opened"] == 1 and len(data["requests"]) == 1


# -- body scanner ------------------------------------------------------------------------


def test_body_scanner_matches_json_loads_and_reuses_prefixes() -> None:
    from tests.support.loopback import _BodyScanner

    tricky = [
        user('has "],[" and {braces}'),
        {"type": "x", "n": [1, [2, 3]], "s": "é\u2028"},
        user('\\"escaped\\"'),
    ]
    bodies: list[dict[str, Any]] = [
        {"input": tricky[:1], "tools": [], "instructions": "i"},
        {"input": tricky[:2], "tools": [{"name": "a"}], "instructions": "i"},
        {"input": tricky, "tools": [{"name": "a"}], "instructions": "i"},
        {"input": tricky[:2], "instructions": None},  # shorter: a fresh parse
        {"input": [], "model": "m"},
        {"input": "plain string input"},
    ]
    scanner = _BodyScanner()
    for obj in bodies:
        for text in (compact(obj), json.dumps(obj, indent=2), json.dumps(obj)):
            parsed, spans = scanner.scan(text)
            assert parsed == json.loads(text)
            if isinstance(obj["input"], list):
                assert [json.loads(r) for r in spans["input"]] == obj["input"]
                assert all(r in text for r in spans["input"])
    reused, _ = scanner.scan(compact(bodies[2]))
    assert reused == bodies[2]
    for bad in ("{", '{"input":[1,}', '{"a":1} x', "", '{"input":[{"a":1}'):
        with pytest.raises(ValueError):
            scanner.scan(bad)
