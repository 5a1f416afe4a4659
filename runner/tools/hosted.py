"""Hosted tools: run by the model provider, not by the runner.

They sit in `tools` like any other (so they are part of the cached prefix) but the
server executes them and returns its own items (`web_search_call`), which the loop keeps
in the history as it keeps every server item. The loop never has to run one; if a
server ever sent a function call with this name, the model gets an error output.
"""

from __future__ import annotations

from typing import Any

from runner.tools import ToolCall, ToolContext, ToolResult


class WebSearchTool:
    """OpenAI's hosted web search (`{"type": "web_search"}`), Responses API only."""

    name = "web_search"

    def spec(self) -> dict[str, Any]:
        return {"type": "web_search"}

    def started(self, call: ToolCall) -> dict[str, Any] | None:
        return None

    async def run(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        return ToolResult("web_search is run by the model provider, not as a function call",
                          success=False)
