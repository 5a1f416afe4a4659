"""A small MCP server for the tests, on the official SDK's server side.

`python mcp_server.py` serves over stdio; `python mcp_server.py http PORT` serves
streamable HTTP on 127.0.0.1:PORT/mcp. Its tools cover the cases the client must handle:
structured results, plain text, a tool error, a slow call, a list change.
"""

from __future__ import annotations

import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("calc")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@app.tool()
def shout(text: str) -> str:
    """Return the text in capitals."""
    return text.upper()


@app.tool()
def broken() -> str:
    """Always fails."""
    raise ValueError("the gauge is broken")


@app.tool()
async def slow(seconds: float) -> str:
    """Wait, then answer."""
    await anyio.sleep(seconds)
    return "finally"


@app.tool()
async def grow(ctx: Context) -> str:
    """Announce that the tool list changed."""
    await ctx.notify_tools_changed()
    return "announced"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run("stdio")
