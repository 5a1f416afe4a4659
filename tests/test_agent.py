"""The agent loop against a real loopback Responses server, real subprocesses and files."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest

from runner import prompt as prompts
from runner.agent import Outcome, Thread, ThreadSpec
from runner.providers.responses import ResponsesClient
from runner.sandbox.env import child_env
from runner.sandbox.local import LocalExecutor
from runner.sandbox.localenv import LocalEnvironment
from runner.tools import ToolContext
from runner.tools.apply_patch import ApplyPatchTool
from runner.tools.plan import PlanTool
from runner.tools.shell import ShellTool
from runner.usage import ideal_cached_tokens
from tests.support.cache_stable import assert_cache_stable
from tests.support.events import ListSink
from tests.support.fixtures import LoopbackFactory
from tests.support.loopback import (
    Reply,
    assert_call_outputs_paired,
    assert_exact_extension,
    function_call_item,
    message_item,
    reply_custom_tool_call,
    reply_failed,
    reply_function_call,
    reply_incomplete,
    reply_items,
    reply_message,
)

pytestmark = pytest.mark.anyio


def shell(cmd: str, call_id: str | None = None, **extra: Any) -> Reply:
    return reply_function_call("shell", {"command": ["bash", "-c", cmd], **extra}, call_id=call_id)


async def run_thread(
    base_url: str,
    tmp_path: Path,
    *,
    prompts_: tuple[str, ...] = ("go",),
    max_requests: int = 10,
    timeout_s: float = 30,
    sink: ListSink | None = None,
) -> tuple[Outcome, ListSink]:
    sink = sink or ListSink()
    context = prompts.initial_context(
        cwd=tmp_path,
        sandbox="danger-full-access",
        network=True,
        writable_roots=[],
        developer_instructions=None,
        runner_home=None,
        shell="bash",
        current_date="2026-01-01",
        timezone="UTC",
    )[0]
    spec = ThreadSpec(
        thread_id="thread-1",
        model="m",
        instructions=prompts.base_instructions(),
        context=context,
        prompts=prompts_,
        max_requests=max_requests,
        timeout_s=timeout_s,
    )
    client = ResponsesClient(base_url)
    ctx = ToolContext(
        environment=LocalEnvironment(LocalExecutor(), tmp_path), env=child_env(os.environ)
    )
    try:
        outcome = await Thread(
            spec, client, [ShellTool(), PlanTool(), ApplyPatchTool()], ctx, sink
        ).run()
    finally:
        await client.aclose()
    return outcome, sink


def output_of(request: Any, call_id: str) -> str:
    for item in request.input:
        if (
            item.get("type") in ("function_call_output", "custom_tool_call_output")
            and item.get("call_id") == call_id
        ):
            return str(item["output"])
    raise AssertionError(f"no output for {call_id}")


async def test_call_then_final_message(loopback: LoopbackFactory, tmp_path: Path) -> None:
    (tmp_path / "hello.txt").write_text("hi there\n")
    srv = await loopback([shell("cat hello.txt", "c1"), reply_message("The file says hi.")])
    outcome, sink = await run_thread(srv.base_url, tmp_path)
    assert outcome.status == "completed"
    assert outcome.final_message == "The file says hi."
    with pytest.raises(dataclasses.FrozenInstanceError):  # what the loop returned stays
        outcome.status = "failed"  # type: ignore[misc]
    assert all(type(kept) is tuple for kept in (outcome.history, outcome.requests))
    assert len(srv.requests) == 2
    assert_exact_extension(srv.requests)
    assert_call_outputs_paired(srv.requests[1])
    out = json.loads(output_of(srv.requests[1], "c1"))
    assert out["output"] == "hi there\n"
    assert out["metadata"]["exit_code"] == 0
    # One kept-alive connection for the whole thread.
    assert srv.connections_opened == 1
    # Usage is the server's, request by request.
    assert [r.usage.input_tokens for r in outcome.requests if r.usage] == [
        r.input_tokens for r in srv.requests
    ]
    assert (
        outcome.requests[1].usage
        and outcome.requests[1].usage.cached_tokens == srv.requests[1].cached_tokens > 0
    )
    assert sink.types()[0] == "thread.started"
    assert "turn.completed" in sink.types()
    cmd = [
        e
        for e in sink.events
        if e["type"] == "item.completed" and e["item"]["type"] == "command_execution"
    ]
    assert cmd and cmd[0]["item"]["exit_code"] == 0


async def test_request_fields(loopback: LoopbackFactory, tmp_path: Path) -> None:
    srv = await loopback([reply_message("done")])
    await run_thread(srv.base_url, tmp_path)
    body = srv.requests[0].body
    assert list(body)[:4] == ["model", "instructions", "input", "tools"]
    assert body["store"] is False and body["stream"] is True
    assert body["tool_choice"] == "auto"
    assert body["prompt_cache_key"] == "thread-1"
    assert body["include"] == []
    assert [t["name"] for t in body["tools"]] == ["shell", "update_plan", "apply_patch"]
    roles = [(i["type"], i.get("role")) for i in body["input"]]
    assert roles == [("message", "developer"), ("message", "user"), ("message", "user")]
    assert "previous_response_id" not in body


async def test_parallel_calls_each_get_one_output(
    loopback: LoopbackFactory, tmp_path: Path
) -> None:
    srv = await loopback(
        [
            reply_items(
                [
                    function_call_item("shell", {"command": ["true"]}, call_id="a"),
                    function_call_item("nope", {}, call_id="b"),
                    function_call_item("shell", "{not json", call_id="c"),
                    function_call_item(
                        "update_plan",
                        {"plan": [{"step": "x", "status": "in_progress"}]},
                        call_id="d",
                    ),
                ]
            ),
            reply_message("ok"),
        ]
    )
    outcome, _ = await run_thread(srv.base_url, tmp_path)
    assert outcome.status == "completed"
    last = srv.requests[1]
    assert_call_outputs_paired(last)
    assert "unknown tool 'nope'" in output_of(last, "b")
    assert "not valid JSON" in output_of(last, "c")
    assert output_of(last, "d") == "Plan updated"
    assert outcome.tool_calls == 4


async def test_follow_up_turns_extend_the_thread(loopback: LoopbackFactory, tmp_path: Path) -> None:
    srv = await loopback(
        [shell("echo one", "c1"), reply_message("first done"), reply_message("second done")]
    )
    outcome, sink = await run_thread(srv.base_url, tmp_path, prompts_=("go", "again"))
    assert outcome.status == "completed" and outcome.turns_completed == 2
    assert outcome.final_message == "second done"
    assert_exact_extension(srv.requests)
    assert srv.requests[2].input[-1]["content"][0]["text"] == "again"
    assert sink.types().count("turn.completed") == 2


async def test_max_requests_stops_with_work_kept(loopback: LoopbackFactory, tmp_path: Path) -> None:
    srv = await loopback(lambda req, i: shell(f"echo {i} >> log.txt", f"c{i}"))
    outcome, sink = await run_thread(srv.base_url, tmp_path, max_requests=3)
    assert outcome.status == "max_requests"
    assert len(srv.requests) == 3
    assert (tmp_path / "log.txt").read_text().split() == ["0", "1", "2"]
    assert "turn.failed" in sink.types()
    assert_exact_extension(srv.requests)


async def test_timeout_mid_tool_answers_the_call(loopback: LoopbackFactory, tmp_path: Path) -> None:
    srv = await loopback([shell("sleep 30", "slow", timeout_ms=60_000)])
    outcome, _ = await run_thread(srv.base_url, tmp_path, timeout_s=1.0)
    assert outcome.status == "timeout"
    assert outcome.duration_s < 5
    outputs = [i.data for i in outcome.history if i.type == "function_call_output"]
    assert outputs == [{"type": "function_call_output", "call_id": "slow", "output": "aborted"}]


async def test_shell_timeout_kills_group(loopback: LoopbackFactory, tmp_path: Path) -> None:
    srv = await loopback(
        [shell("sleep 30 & sleep 30; echo never", "c", timeout_ms=300), reply_message("ok")]
    )
    outcome, _ = await run_thread(srv.base_url, tmp_path)
    out = json.loads(output_of(srv.requests[1], "c"))
    assert out["metadata"]["exit_code"] == 124
    assert out["output"].startswith("command timed out after 300 milliseconds")


async def test_model_failure_is_a_failed_status(loopback: LoopbackFactory, tmp_path: Path) -> None:
    srv = await loopback([reply_failed("invalid_prompt", "no thanks")])
    outcome, sink = await run_thread(srv.base_url, tmp_path)
    assert outcome.status == "failed"
    assert outcome.error is not None and "invalid_prompt" in outcome.error
    assert sink.events[-1]["type"] == "turn.failed"


async def test_a_cut_off_answer_ends_the_run_as_max_output_tokens(
    loopback: LoopbackFactory, tmp_path: Path
) -> None:
    """The loop knows the answer was cut by the error's kind (`AnswerTruncated`), and keeps
    what the model wrote."""
    srv = await loopback(
        [reply_incomplete("max_output_tokens", output=[message_item("Half an answer")])]
    )
    outcome, sink = await run_thread(srv.base_url, tmp_path)
    assert outcome.status == "max_output_tokens"
    assert outcome.error == "model error: the answer hit max_output_tokens before it was complete"
    assert outcome.truncated_output == "Half an answer"
    assert [e["text"] for e in sink.events if e["type"] == "response.truncated"] == [
        "Half an answer"
    ]
    assert sink.events[-1]["type"] == "turn.failed"


async def test_custom_apply_patch_call(loopback: LoopbackFactory, tmp_path: Path) -> None:
    patch = "*** Begin Patch\n*** Add File: new.txt\n+hello\n*** End Patch"
    srv = await loopback(
        [reply_custom_tool_call("apply_patch", patch, call_id="p"), reply_message("added")]
    )
    outcome, sink = await run_thread(srv.base_url, tmp_path)
    assert (tmp_path / "new.txt").read_text() == "hello\n"
    assert output_of(srv.requests[1], "p") == "Success. Updated the following files:\nA new.txt"
    changes = [
        e
        for e in sink.events
        if e["type"] == "item.completed" and e["item"]["type"] == "file_change"
    ]
    # Absolute, as `codex exec --json` prints them.
    assert changes[0]["item"]["changes"] == [{"path": str(tmp_path / "new.txt"), "kind": "add"}]


async def test_apply_patch_through_shell_heredoc(loopback: LoopbackFactory, tmp_path: Path) -> None:
    script = "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch\nEOF"
    srv = await loopback(
        [
            reply_function_call("shell", {"command": ["bash", "-lc", script]}, call_id="s"),
            reply_message("ok"),
        ]
    )
    await run_thread(srv.base_url, tmp_path)
    assert (tmp_path / "a.txt").read_text() == "x\n"
    out = json.loads(output_of(srv.requests[1], "s"))
    assert out["output"].startswith("Success.")


async def test_secrets_not_in_shell_env(
    loopback: LoopbackFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_API_KEY", "canary-secret-value-123")
    monkeypatch.setenv("GH_TOKEN", "canary-token-value-456")
    srv = await loopback([shell("env", "c"), reply_message("ok")])
    await run_thread(srv.base_url, tmp_path)
    out = output_of(srv.requests[1], "c")
    assert "canary-secret" not in out and "canary-token" not in out
    assert "NO_COLOR=1" in out


async def test_reasoning_items_are_sent_back(loopback: LoopbackFactory, tmp_path: Path) -> None:
    from tests.support.loopback import reasoning_item

    srv = await loopback(
        [
            reply_items(
                [
                    reasoning_item("thinking", encrypted_content="enc"),
                    function_call_item("shell", {"command": ["true"]}, call_id="c"),
                ]
            ),
            reply_items([message_item("fin")]),
        ]
    )
    outcome, _ = await run_thread(srv.base_url, tmp_path)
    assert outcome.final_message == "fin"
    types = [i["type"] for i in srv.requests[1].input]
    assert types[-3:] == ["reasoning", "function_call", "function_call_output"]
    # Codex 0.169 sends every item back with its id: with `store: false` the server
    # resolves a reasoning item by id plus its encrypted content.
    sent = srv.requests[1].input[-3:-1]
    assert [i["id"] for i in sent] == [o["id"] for o in srv.requests[0].output]
    assert sent[0]["encrypted_content"] == "enc"
    assert_exact_extension(srv.requests)


async def test_big_output_is_cut_head_and_tail(loopback: LoopbackFactory, tmp_path: Path) -> None:
    srv = await loopback([shell("echo START; seq 1 200000; echo END", "c"), reply_message("ok")])
    await run_thread(srv.base_url, tmp_path)
    out = json.loads(output_of(srv.requests[1], "c"))
    text = out["output"]
    assert len(text.encode()) < 10_200
    assert text.startswith("Total output lines: 200002\n\nSTART\n1\n")
    assert text.endswith("199999\n200000\nEND\n")
    assert "chars truncated…" in text


async def test_plan_updates_are_events(loopback: LoopbackFactory, tmp_path: Path) -> None:
    srv = await loopback(
        [
            reply_function_call(
                "update_plan",
                {
                    "plan": [
                        {"step": "read", "status": "completed"},
                        {"step": "fix", "status": "in_progress"},
                    ]
                },
                call_id="p",
            ),
            reply_message("ok"),
        ]
    )
    _, sink = await run_thread(srv.base_url, tmp_path)
    todo = [
        e["item"]
        for e in sink.events
        if e["type"] == "item.completed" and e["item"]["type"] == "todo_list"
    ]
    assert todo[0]["items"] == [
        {"text": "read", "completed": True},
        {"text": "fix", "completed": False},
    ]


async def test_bad_tool_arguments_are_told_to_the_model(
    loopback: LoopbackFactory, tmp_path: Path
) -> None:
    """Malformed arguments are a `ToolArgumentsError` inside the tool; the model gets its
    message as the call's output and the thread goes on."""
    two_in_progress = [{"step": s, "status": "in_progress"} for s in ("a", "b")]
    srv = await loopback(
        [
            reply_function_call("update_plan", {"plan": two_in_progress}, call_id="p"),
            reply_function_call("shell", {"command": []}, call_id="s"),
            reply_message("ok"),
        ]
    )
    outcome, sink = await run_thread(srv.base_url, tmp_path)
    assert outcome.status == "completed"
    assert output_of(srv.requests[1], "p") == "invalid plan: at most one step may be in_progress"
    assert output_of(srv.requests[2], "s") == (
        "invalid shell call: `command` must be a non-empty array of strings"
    )
    [shell_item] = [
        e["item"]
        for e in sink.events
        if e["type"] == "item.completed" and e["item"]["type"] == "command_execution"
    ]
    assert shell_item["status"] == "failed"


@pytest.mark.parametrize(
    ("tool", "said"),
    [
        ("shell", "invalid shell call: arguments are not valid JSON"),
        ("update_plan", "invalid plan"),
    ],
)
@pytest.mark.parametrize(
    "arguments",
    [
        '{"command": ["ls"], "timeout_ms": ' + "1" * 5000 + "}",  # a ValueError
        '{"command": ["ls"], "timeout_ms": ' + "[" * 100_000 + "]" * 100_000 + "}",
    ],
    ids=["huge_int", "deep_nesting"],
)
async def test_arguments_json_cannot_read_are_told_to_the_model(
    loopback: LoopbackFactory, tmp_path: Path, tool: str, said: str, arguments: str
) -> None:
    """Arguments `json.loads` refuses with something other than a `JSONDecodeError` are
    still the model's mistake: it is told, and the run goes on."""
    srv = await loopback([reply_function_call(tool, arguments, call_id="c"), reply_message("ok")])
    outcome, _ = await run_thread(srv.base_url, tmp_path)
    assert (outcome.status, outcome.error) == ("completed", None)
    assert output_of(srv.requests[1], "c").startswith(said)


class ShiftingTool:
    """A tool whose definition changes every time it is asked for it."""

    name = "shifty"

    def __init__(self) -> None:
        self.asked = 0

    def spec(self) -> dict[str, Any]:
        self.asked += 1
        return {
            "type": "function",
            "name": "shifty",
            "description": f"version {self.asked}",
            "strict": False,
            "parameters": {"type": "object", "properties": {}},
        }

    def started(self, call: Any) -> None:
        return None

    async def run(self, call: Any, ctx: ToolContext) -> Any:
        from runner.tools import ToolResult

        return ToolResult("ok")


async def _run_with(base_url: str, tool: Any, cwd: Path) -> Any:
    """One thread of a single tool against the loopback server, to its end."""
    spec = ThreadSpec(
        thread_id="t",
        model="m",
        instructions="i",
        context=(),
        prompts=("go",),
        max_requests=10,
        timeout_s=30,
    )
    client = ResponsesClient(base_url)
    ctx = ToolContext(environment=LocalEnvironment(LocalExecutor(), cwd), env={})
    try:
        return await Thread(spec, client, [tool], ctx, ListSink()).run()
    finally:
        await client.aclose()


async def test_tools_are_fixed_for_the_thread(loopback: LoopbackFactory, tmp_path: Path) -> None:
    srv = await loopback(
        [reply_function_call("shifty", {}, call_id=f"s{n}") for n in range(3)]
        + [reply_message("done")]
    )
    outcome = await _run_with(srv.base_url, ShiftingTool(), tmp_path)
    assert outcome.status == "completed" and len(srv.requests) == 4
    assert_exact_extension(srv.requests)
    assert_cache_stable(outcome.requests)


class BrokenStartTool(ShiftingTool):
    """A tool with a bug in `started`, the hook that runs before the call."""

    name = "shifty"

    def started(self, call: Any) -> None:
        raise KeyError("oops")


async def test_a_tool_failing_to_start_still_answers_the_call(
    loopback: LoopbackFactory, tmp_path: Path
) -> None:
    srv = await loopback([reply_function_call("shifty", {}, call_id="s"), reply_message("done")])
    outcome = await _run_with(srv.base_url, BrokenStartTool(), tmp_path)
    assert outcome.status == "completed"
    assert output_of(srv.requests[1], "s") == "tool shifty failed: KeyError: 'oops'"


async def test_every_request_is_served_from_cache(
    loopback: LoopbackFactory, tmp_path: Path
) -> None:
    """With a server that caches exact prefixes, cached = ideal on every request."""
    srv = await loopback([shell(f"echo {n}", f"c{n}") for n in range(8)] + [reply_message("ok")])
    outcome, sink = await run_thread(srv.base_url, tmp_path, max_requests=20)
    assert outcome.status == "completed"
    assert_cache_stable(outcome.requests)
    for rec, req in zip(outcome.requests[1:], srv.requests[1:], strict=True):
        assert rec.usage is not None and rec.usage.cached_tokens == req.cached_tokens > 0
        assert (
            abs(ideal_cached_tokens(rec.usage.input_tokens, rec.prefix) - req.ideal_cached_tokens)
            <= 1
        )
    events = [e for e in sink.events if e["type"] == "request.completed"]
    assert all(e["kind"] == "turn" and e["prefix"]["break_reason"] is None for e in events)
