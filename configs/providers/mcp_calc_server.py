"""A one-tool MCP server (stdio) for configs/providers/mcp.yaml."""

from mcp.server.mcpserver import MCPServer

app = MCPServer("calc")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


if __name__ == "__main__":
    app.run("stdio")
