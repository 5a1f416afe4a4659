"""MCP tools: the tools of the task's MCP servers, offered to the model as functions.

One session per thread: `McpSessions` starts every server (stdio command or streamable
HTTP URL) before the thread, lists their tools once, and closes them after it, all inside
one task group. The tool list is fixed for the whole thread because it is part of the
cached prompt prefix: a server's `tools/list_changed` is logged as an event, never
applied, so no request after it loses the cache (Codex sorts MCP tools for the same
reason). Names are `mcp__<server>__<tool>` cut to the characters and length the APIs
accept, sorted. A call that fails, times out or names a gone tool gets an error output;
it never stops the loop.

MCP tools run in their servers' processes, outside the shell sandbox: the permissions
message says so (`SANDBOX_NOTE`).

The `mcp` SDK is imported only when a task has servers: it costs start-up time that runs
without MCP must not pay.

Why one module: the MCP sessions' start, listing, calls and shutdown share one lifetime
(an anyio exit stack) and one error story.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.abc

from runner.errors import McpError
from runner.items import dumps
from runner.tools import ToolCall, ToolContext, ToolResult

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client.session import IncomingMessage, MessageHandlerFnT
    from mcp.types import CallToolResult

MAX_NAME = 64
"""The Responses and Chat APIs reject longer function names."""

logging.getLogger("mcp").addHandler(logging.NullHandler())
# The SDK logs what it drops, with a traceback, and with no handler of the runner's Python
# prints those to stderr; the runner says why a server failed itself, in one line.
SANDBOX_NOTE = (
    "MCP tools (named mcp__<server>__<tool>) run in their own server processes, "
    "outside the sandbox described above: the sandbox limits only the shell."
)
STDERR_TAIL = 2000

Emit = Callable[[dict[str, Any]], None]


def qualified_name(server: str, tool: str) -> str:
    """`mcp__<server>__<tool>` with anything outside [A-Za-z0-9_-] replaced by `_`; a
    name over 64 characters is cut and ends in `_` + 8 hex digits of the full name's
    SHA-1, so two long names that share a start stay distinct."""
    full = f"mcp__{server}__{tool}"
    name = re.sub(r"[^A-Za-z0-9_-]", "_", full)
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha1(full.encode()).hexdigest()[:8]
    return name[: MAX_NAME - 9] + "_" + digest


def tool_spec(
    name: str, description: str | None, input_schema: Mapping[str, Any]
) -> dict[str, Any]:
    """A function tool in Codex's shape for MCP tools (`strict: false`, the server's schema)."""
    params = dict(input_schema) if input_schema else {}
    params.setdefault("type", "object")
    if params.get("type") == "object":
        params.setdefault("properties", {})
    return {
        "type": "function",
        "name": name,
        "description": description or "",
        "strict": False,
        "parameters": params,
    }


def result_text(result: CallToolResult) -> str:
    """What the model gets back: the structured content as JSON when the server sent
    some, else the content blocks as text (non-text blocks as a short placeholder)."""
    if result.structured_content is not None:
        return dumps(result.structured_content)
    parts: list[str] = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(str(getattr(block, "text", "")))
        elif kind in ("image", "audio"):
            data = str(getattr(block, "data", ""))
            parts.append(
                f"[{kind}: {getattr(block, 'mime_type', '?')}, {len(data) * 3 // 4} bytes]"
            )
        elif kind == "resource_link":
            parts.append(f"[resource: {getattr(block, 'uri', '')}]")
        elif kind == "resource":
            res = getattr(block, "resource", None)
            text = getattr(res, "text", None)
            parts.append(
                str(text) if text is not None else f"[resource: {getattr(res, 'uri', '')}]"
            )
        else:
            parts.append(f"[{kind or 'unknown'} content]")
    return "\n".join(parts)


class McpTool:
    """One server tool as a `Tool` of the loop."""

    def __init__(
        self,
        name: str,
        server: str,
        tool: str,
        spec: dict[str, Any],
        client: Client,
        timeout_s: float,
    ) -> None:
        self.name = name
        self.server = server
        self.tool = tool
        self._spec = spec
        self._client = client
        self._timeout_s = timeout_s

    def spec(self) -> dict[str, Any]:
        return self._spec

    def started(self, call: ToolCall) -> dict[str, Any] | None:
        return self._item(call, "in_progress")

    def _item(
        self,
        call: ToolCall,
        status: str,
        result: CallToolResult | None = None,
        error: str | None = None,
    ) -> dict[str, Any]:
        """`codex exec --json`'s mcp_tool_call: the arguments as a JSON value, the result
        as `{content, structured_content}` and the error as `{message}`, null when absent."""
        try:
            arguments: Any = json.loads(call.arguments) if call.arguments.strip() else {}
        except (ValueError, RecursionError):
            arguments = call.arguments
        out = (
            None
            if result is None
            else {
                "content": [
                    b.model_dump(mode="json", by_alias=True, exclude_none=True)
                    for b in result.content
                ],
                "structured_content": result.structured_content,
            }
        )
        return {
            "type": "mcp_tool_call",
            "server": self.server,
            "tool": self.tool,
            "arguments": arguments,
            "result": out,
            "error": None if error is None else {"message": error},
            "status": status,
        }

    async def run(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        try:
            args = json.loads(call.arguments) if call.arguments.strip() else {}
        except (ValueError, RecursionError) as exc:  # also too long an integer, or too deep
            return self._failed(call, f"arguments are not valid JSON: {exc}")
        if not isinstance(args, dict):
            return self._failed(call, "arguments must be a JSON object")
        with anyio.move_on_after(self._timeout_s) as scope:
            try:
                result = await self._client.call_tool(self.tool, args)
            except Exception as exc:  # the server's trouble is the call's error, not the loop's
                return self._failed(call, f"{type(exc).__name__}: {exc}")
        if scope.cancelled_caught:
            return self._failed(call, f"timed out after {self._timeout_s:g} s (tool_timeout_s)")
        text = result_text(result)
        status = "failed" if result.is_error else "completed"
        return ToolResult(text, success=not result.is_error, event=self._item(call, status, result))

    def _failed(self, call: ToolCall, why: str) -> ToolResult:
        message = f"MCP tool {self.server}/{self.tool} failed: {why}"
        return ToolResult(message, success=False, event=self._item(call, "failed", error=message))


class McpServer(Protocol):
    """What starting one server reads from its settings. The task file's
    `McpServerConfig` has this shape; tools sit below config, so they name the shape,
    not the config model."""

    @property
    def command(self) -> Sequence[str] | None: ...
    @property
    def env(self) -> Mapping[str, str]: ...
    @property
    def env_vars(self) -> Sequence[str]: ...
    @property
    def cwd(self) -> str | None: ...
    @property
    def url(self) -> str | None: ...
    @property
    def http_headers(self) -> Mapping[str, str]: ...
    @property
    def bearer_token_env_var(self) -> str | None: ...
    @property
    def startup_timeout_s(self) -> float: ...
    @property
    def tool_timeout_s(self) -> float: ...


class McpSessions:
    """Every MCP server of one thread, open for its life: `async with McpSessions(...) as
    mcp:` then `mcp.tools`. Servers start concurrently; one that fails to start within
    its `startup_timeout_s` fails the whole block with `McpError` (a run without the
    tools its task names would measure something else)."""

    def __init__(
        self,
        servers: Mapping[str, McpServer],
        *,
        cwd: Path,
        env: Mapping[str, str],
        emit: Emit | None = None,
    ) -> None:
        self._servers = dict(servers)
        self._cwd = cwd
        self._env = env
        self._emit = emit or (lambda event: None)
        self._tools: dict[str, list[McpTool]] = {}
        self._errors: dict[str, str] = {}
        self._closing = anyio.Event()
        self._tg: anyio.abc.TaskGroup | None = None

    @property
    def tools(self) -> list[McpTool]:
        """Every server's tools, sorted by name: a stable part of the prompt prefix."""
        return sorted((t for ts in self._tools.values() for t in ts), key=lambda t: t.name)

    async def __aenter__(self) -> McpSessions:
        if not self._servers:
            return self
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        ready = {name: anyio.Event() for name in self._servers}
        for name in sorted(self._servers):
            tg.start_soon(self._serve, name, ready[name])
        for event in ready.values():
            await event.wait()
        if self._errors:
            await self.__aexit__(None, None, None)
            raise McpError(
                "; ".join(
                    f"MCP server {n!r} could not start: {e}"
                    for n, e in sorted(self._errors.items())
                )
            )
        names: dict[str, str] = {}
        for tool in self.tools:
            if tool.name in names:
                self._errors[tool.name] = "duplicate"
                await self.__aexit__(None, None, None)
                raise McpError(
                    f"two MCP tools get the name {tool.name!r} "
                    f"({names[tool.name]} and {tool.server}/{tool.tool})"
                )
            names[tool.name] = f"{tool.server}/{tool.tool}"
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        tg, self._tg = self._tg, None
        if tg is None:
            return
        self._closing.set()
        await tg.__aexit__(exc_type, exc, tb)

    async def _serve(self, name: str, ready: anyio.Event) -> None:
        """Hold one server's session open until the thread is done. Never raises: an
        exception here would cancel the thread, so failures become errors and events."""
        from mcp import Client

        cfg = self._servers[name]
        started = False
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
            # The deadline covers start, handshake and listing, then is lifted.
            with anyio.CancelScope(
                deadline=anyio.current_time() + cfg.startup_timeout_s
            ) as startup:
                try:
                    transport = self._transport(cfg, errlog)
                    async with Client(transport, message_handler=self._notices(name)) as client:
                        self._tools[name] = await self._list(name, cfg, client)
                        startup.deadline = math.inf
                        started = True
                        ready.set()
                        self._emit(
                            {
                                "type": "mcp.server_started",
                                "server": name,
                                "tools": [t.name for t in self._tools[name]],
                            }
                        )
                        async with anyio.create_task_group() as tg:
                            tg.start_soon(self._listen, name, client)
                            await self._closing.wait()
                            tg.cancel_scope.cancel()
                except Exception as exc:
                    why = self._why(_leaf(exc), cfg, errlog)
                    if started:
                        self._emit({"type": "mcp.server_failed", "server": name, "message": why})
                    else:
                        self._errors[name] = why
            if startup.cancelled_caught and not started:
                self._errors[name] = self._why(TimeoutError(), cfg, errlog)
        ready.set()

    def _transport(self, cfg: McpServer, errlog: Any) -> Any:
        if cfg.url is not None:
            headers = dict(cfg.http_headers)
            if cfg.bearer_token_env_var:
                token = self._env.get(cfg.bearer_token_env_var)
                if not token:
                    raise McpError(
                        f"the environment variable {cfg.bearer_token_env_var} "
                        "(bearer_token_env_var) is not set"
                    )
                headers["Authorization"] = f"Bearer {token}"
            return _http_transport(cfg.url, headers)
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        assert cfg.command is not None
        env = dict(cfg.env)
        for var in cfg.env_vars:
            if var in self._env:
                env[var] = self._env[var]
        params = StdioServerParameters(
            command=cfg.command[0],
            args=list(cfg.command[1:]),
            env=env,
            cwd=cfg.cwd or str(self._cwd),
        )
        return stdio_client(params, errlog=errlog)

    async def _list(self, name: str, cfg: McpServer, client: Client) -> list[McpTool]:
        found: list[McpTool] = []
        cursor: str | None = None
        for _ in range(1000):  # pages; a server that pages forever is cut off
            page = await client.list_tools(cursor=cursor)
            for t in page.tools:
                qname = qualified_name(name, t.name)
                spec = tool_spec(qname, t.description, t.input_schema)
                found.append(McpTool(qname, name, t.name, spec, client, cfg.tool_timeout_s))
            cursor = page.next_cursor
            if cursor is None:
                break
        return sorted(found, key=lambda t: t.name)

    async def _listen(self, name: str, client: Client) -> None:
        """Ask a 2026-era server for its change notices (older servers send them
        unasked); the notices themselves are logged by `_notices`."""
        from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost

        try:
            async with client.listen(tools_list_changed=True) as sub:
                async for _ in sub:
                    pass
        except (ListenNotSupportedError, SubscriptionLost):
            return
        except Exception as exc:  # a server without subscriptions still serves its tools
            self._emit(
                {
                    "type": "mcp.listen_failed",
                    "server": name,
                    "message": f"{type(exc).__name__}: {exc}",
                }
            )

    def _notices(self, name: str) -> MessageHandlerFnT:
        async def handle(message: IncomingMessage) -> None:
            method = getattr(message, "method", None)
            if method == "notifications/tools/list_changed":
                self._emit(
                    {
                        "type": "mcp.tools_list_changed",
                        "server": name,
                        "applied": False,
                        "note": "the tool list is fixed for the thread (cached prefix)",
                    }
                )

        return handle

    @staticmethod
    def _why(exc: Exception, cfg: McpServer, errlog: Any) -> str:
        why = (
            f"no answer within {cfg.startup_timeout_s:g} s (startup_timeout_s)"
            if isinstance(exc, TimeoutError)
            else f"{type(exc).__name__}: {exc}"
        )
        try:
            errlog.seek(0)
            tail = errlog.read()[-STDERR_TAIL:].strip()
        except (OSError, ValueError):
            tail = ""
        return f"{why}; its stderr ends: {tail}" if tail else why


@asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """The SDK's streamable HTTP transport with our headers, over the seam's client."""
    from mcp.client.streamable_http import streamable_http_client

    from runner.http import mcp_client

    async with (
        mcp_client(headers) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def _leaf(exc: Exception) -> Exception:
    """The first real error inside task-group exception groups (the SDK's transports
    run in task groups, so a refused connection arrives wrapped)."""
    while isinstance(exc, ExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
