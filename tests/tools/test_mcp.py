"""MCP tools against a real MCP server (`mcp_server.py`, the SDK's server side) over stdio
and streamable HTTP, and a whole `runner run` whose scripted model calls one."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.types import CallToolResult, ImageContent, TextContent

from runner.config import McpServerConfig
from runner.tools import ToolCall, ToolContext
from runner.tools.mcp import (
    MAX_NAME,
    McpError,
    McpSessions,
    qualified_name,
    result_text,
    tool_spec,
)
from tests.support import paths
from tests.support.cli import run_cli
from tests.support.loopback import RecordedRequest, Reply, reply_function_call, reply_message

SERVER = paths.TESTS / "support" / "mcp_server.py"
ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.anyio


def stdio(**kw: Any) -> McpServerConfig:
    return McpServerConfig(command=(sys.executable, str(SERVER)), **kw)


def call(name: str, args: Any) -> ToolCall:
    return ToolCall("call_1", name, args if isinstance(args, str) else json.dumps(args))


CTX = ToolContext(environment=None, env={})  # type: ignore[arg-type]


# ---------------------------------------------------------------- names and results


def test_names_are_sanitised_and_bounded() -> None:
    assert qualified_name("calc", "add") == "mcp__calc__add"
    assert qualified_name("my server", "do.it/now") == "mcp__my_server__do_it_now"
    long_a = qualified_name("s", "x" * 80 + "a")
    long_b = qualified_name("s", "x" * 80 + "b")
    assert len(long_a) == len(long_b) == MAX_NAME
    assert long_a != long_b and long_a[:-9] == long_b[:-9]
    assert long_a == qualified_name("s", "x" * 80 + "a")  # stable


def test_spec_keeps_the_server_schema() -> None:
    spec = tool_spec("mcp__calc__add", None, {"properties": {"a": {"type": "integer"}}})
    assert spec == {
        "type": "function",
        "name": "mcp__calc__add",
        "description": "",
        "strict": False,
        "parameters": {"properties": {"a": {"type": "integer"}}, "type": "object"},
    }


def test_results_become_text() -> None:
    structured = CallToolResult(
        content=[TextContent(type="text", text="3")], structured_content={"result": 3}
    )
    assert result_text(structured) == '{"result":3}'
    mixed = CallToolResult(
        content=[
            TextContent(type="text", text="a chart:"),
            ImageContent(type="image", data="AAAA", mime_type="image/png"),
        ]
    )
    assert result_text(mixed) == "a chart:\n[image: image/png, 3 bytes]"


# ---------------------------------------------------------------- a real server


async def test_stdio_server_tools_calls_and_errors(tmp_path: Path) -> None:
    events: list[dict[str, Any]] = []
    changed = anyio.Event()

    def emit(event: dict[str, Any]) -> None:
        events.append(event)
        if event["type"] == "mcp.tools_list_changed":
            changed.set()

    servers = {"calc": stdio(tool_timeout_s=1.0)}
    async with McpSessions(servers, cwd=tmp_path, env={}, emit=emit) as mcp:
        tools = {t.name: t for t in mcp.tools}
        names = [t.name for t in mcp.tools]
        assert (
            names
            == sorted(names)
            == [
                "mcp__calc__add",
                "mcp__calc__broken",
                "mcp__calc__grow",
                "mcp__calc__shout",
                "mcp__calc__slow",
            ]
        )
        add = tools["mcp__calc__add"]
        assert add.spec()["parameters"]["required"] == ["a", "b"]
        ok = await add.run(call("mcp__calc__add", {"a": 2, "b": 40}), CTX)
        assert (ok.output, ok.success) == ('{"result":42}', True)
        assert ok.event is not None and ok.event["status"] == "completed"
        bad = await tools["mcp__calc__broken"].run(call("mcp__calc__broken", {}), CTX)
        assert not bad.success and "broken" in bad.output
        garbled = await add.run(call("mcp__calc__add", "{not json"), CTX)
        assert not garbled.success and "not valid JSON" in garbled.output
        t0 = time.monotonic()
        late = await tools["mcp__calc__slow"].run(call("mcp__calc__slow", {"seconds": 30}), CTX)
        assert not late.success and "timed out after 1 s" in late.output
        assert time.monotonic() - t0 < 5
        # The session survives a timed-out call.
        again = await tools["mcp__calc__shout"].run(call("mcp__calc__shout", {"text": "hi"}), CTX)
        assert again.output == '{"result":"HI"}'
        grew = await tools["mcp__calc__grow"].run(call("mcp__calc__grow", {}), CTX)
        assert grew.success
        with anyio.fail_after(5):
            await changed.wait()
        assert [t.name for t in mcp.tools] == names  # logged, not applied
    assert events[0] == {"type": "mcp.server_started", "server": "calc", "tools": names}


async def test_a_server_that_cannot_start_fails_fast(tmp_path: Path) -> None:
    missing = McpServerConfig(command=(str(tmp_path / "no-such-server"),))
    with pytest.raises(McpError, match="'gone' could not start"):
        async with McpSessions({"gone": missing}, cwd=tmp_path, env={}):
            pass
    mute = McpServerConfig(command=("sleep", "30"), startup_timeout_s=0.5)
    t0 = time.monotonic()
    with pytest.raises(McpError, match=r"no answer within 0\.5 s"):
        async with McpSessions({"mute": mute, "calc": stdio()}, cwd=tmp_path, env={}):
            pass
    assert time.monotonic() - t0 < 8


async def test_stdio_server_gets_only_the_environment_it_is_given(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import json, os, sys\n"
        f"sys.path.insert(0, {str(SERVER.parent)!r})\n"
        "from mcp_server import app\n"
        "@app.tool()\n"
        "def env() -> str:\n"
        "    '''The environment.'''\n"
        "    return json.dumps({k: os.environ.get(k) for k in "
        "('PASSED', 'LITERAL', 'SECRET_KEY')} | {'cwd': os.getcwd()})\n"
        "app.run('stdio')\n"
    )
    cfg = McpServerConfig(
        command=(sys.executable, str(probe)), env={"LITERAL": "x"}, env_vars=("PASSED",)
    )
    parent = {"PASSED": "yes", "SECRET_KEY": "hunter2"}
    async with McpSessions({"p": cfg}, cwd=tmp_path, env=parent) as mcp:
        tool = next(t for t in mcp.tools if t.tool == "env")
        seen = json.loads(json.loads((await tool.run(call(tool.name, {}), CTX)).output)["result"])
    assert seen == {"PASSED": "yes", "LITERAL": "x", "SECRET_KEY": None, "cwd": str(tmp_path)}


@pytest.fixture
def http_server() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


async def test_streamable_http_server(http_server: str, tmp_path: Path) -> None:
    cfg = McpServerConfig(url=http_server, http_headers={"x-test": "1"})
    async with McpSessions({"web": cfg}, cwd=tmp_path, env={}) as mcp:
        add = next(t for t in mcp.tools if t.name == "mcp__web__add")
        out = await add.run(call(add.name, {"a": 1, "b": 2}), CTX)
    assert out.output == '{"result":3}'


# ---------------------------------------------------------------- through `runner run`


def test_runner_run_calls_an_mcp_tool(loopback_thread: Any, git_repo: Path, tmp_path: Path) -> None:
    def script(req: RecordedRequest, index: int) -> Reply:
        if index == 0:
            return reply_function_call("mcp__calc__add", {"a": 19, "b": 23})
        return reply_message(
            "The sum is "
            + json.loads(req.call_outputs()[next(iter(req.call_outputs()))])["result"].__str__()
            + "."
        )

    srv = loopback_thread(script)
    task_file = tmp_path / "tasks.yaml"
    task_file.write_text(f"""version: 1
providers:
  fake: {{base_url: "{srv.base_url}"}}
defaults:
  model: fake/m
  mcp_servers:
    calc: {{command: [{json.dumps(sys.executable)}, {json.dumps(str(SERVER))}]}}
tasks:
  - id: sum
    repo: {json.dumps(str(git_repo))}
    prompt: Add 19 and 23 with the calc tool.
""")
    out = tmp_path / "out"
    proc = run_cli("run", task_file, "--out", out, env={"PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "report.json").read_text())
    task = report["runs"][0]
    assert task["status"] == "completed" and task["final_message"] == "The sum is 42."
    first, second = srv.requests
    names = [t["name"] for t in first.tools]
    assert names[-5:] == [
        "mcp__calc__add",
        "mcp__calc__broken",
        "mcp__calc__grow",
        "mcp__calc__shout",
        "mcp__calc__slow",
    ]
    assert second.tools == first.tools  # same tools, same order: the prefix holds
    developer = json.dumps(first.input[0])
    assert "outside the sandbox" in developer
    events = [json.loads(line) for line in (out / task["events_file"]).read_text().splitlines()]
    done = [
        e["item"]
        for e in events
        if e["type"] == "item.completed" and e["item"].get("type") == "mcp_tool_call"
    ]
    # `codex exec --json`'s shape: arguments as a JSON value, the result as the server's
    # content blocks and structured content, no error.
    assert done == [
        {
            "id": done[0]["id"],
            "type": "mcp_tool_call",
            "server": "calc",
            "tool": "add",
            "arguments": {"a": 19, "b": 23},
            "result": {
                "content": [{"type": "text", "text": "42"}],
                "structured_content": {"result": 42},
            },
            "error": None,
            "status": "completed",
        }
    ]
