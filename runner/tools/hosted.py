"""Hosted tools: run by the model provider, not by the runner.

They sit in `tools` like any other (so they are part of the cached prefix) but the
server executes them and returns its own items (`web_search_call`), which the loop keeps
in the history as it keeps every server item. The loop never has to run one; if a
server ever sent a function call with this name, the model gets an error output.
"""

from __future__ import annotations

from typing import Any

from runner.tools import ToolCall, ToolContext, ToolResult

NO_WEB_SEARCH = frozenset({"ollama", "lmstudio", "vllm", "local"})
"""Built-in providers whose servers speak Responses (or chat) but run no hosted tools: a
`web_search` tool there is refused at load time rather than ignored or failed mid-run.
The same name redefined under `providers:` is the user's endpoint and may have it."""


def web_search_problem(provider: str, wire_api: str, *, builtin: bool) -> str | None:
    """Why `web_search: true` cannot work with this provider, or None when it can."""
    if wire_api == "chat":
        return (
            "web_search is a hosted tool of the Responses API; this task's provider "
            "speaks Chat Completions (wire_api: chat), which has none"
        )
    if builtin and provider in NO_WEB_SEARCH:
        return (
            f"web_search is a hosted tool that OpenAI and Azure run; the built-in "
            f"{provider!r} provider is a local server without it (use openai, azure or a "
            "provider of your own under `providers:` that has it)"
        )
    return None


class WebSearchTool:
    """OpenAI's hosted web search (`{"type": "web_search"}`), Responses API only."""

    name = "web_search"

    def spec(self) -> dict[str, Any]:
        return {"type": "web_search"}

    def started(self, call: ToolCall) -> dict[str, Any] | None:
        return None

    async def run(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        return ToolResult(
            "web_search is run by the model provider, not as a function call", success=False
        )
