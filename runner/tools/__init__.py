"""The tool seam: what the agent loop knows about tools.

The loop sees only `Tool` and `ToolCall`/`ToolResult`; tools that run commands or edit
files go through the `Environment` protocol, so the same tool code runs over the host
workspace (bubblewrap, or unsandboxed) or in a container.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from runner.frozen import frozen
from runner.sandbox.environment import Environment, ExecResult, Executor

__all__ = [
    "CallKind",
    "Environment",
    "ExecResult",
    "Executor",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolResult",
]

CallKind = Literal["function", "custom"]


@frozen
class ToolCall:
    call_id: str
    name: str
    arguments: str
    """Raw JSON text for function tools; the free-form input for custom tools."""
    kind: CallKind = "function"


@frozen
class ToolResult:
    output: str
    """Exactly the text the model gets back."""
    success: bool = True
    event: dict[str, Any] | None = None
    """An item for the event stream (`command_execution`, `file_change`, `todo_list`)."""


@dataclass
class ToolContext:
    """What a tool may touch: the run's environment, and the variables its commands get."""

    environment: Environment
    env: Mapping[str, str]
    state: dict[str, Any] = field(default_factory=dict)
    read_only: bool = False
    """The sandbox lets nothing be changed: tools that edit files (apply_patch) refuse
    with that reason up front, as the sandbox refuses commands."""

    @property
    def cwd(self) -> Path:
        """The environment's workdir: where commands start and patch paths are taken from."""
        return Path(self.environment.workdir)


class Tool(Protocol):
    name: str

    def spec(self) -> dict[str, Any]:
        """The JSON tool definition sent in `tools` (stable bytes: part of the cached prefix)."""
        ...

    def started(self, call: ToolCall) -> dict[str, Any] | None:
        """An `in_progress` item for the event stream before a slow tool runs, or None."""
        ...

    async def run(self, call: ToolCall, ctx: ToolContext) -> ToolResult: ...
