"""Which built-in tools a run offers, in Codex's fixed order. Below the config pass, so
that pass can size a constrained answer for exactly the tools the run will get."""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

from runner.tools import Tool
from runner.tools.apply_patch import ApplyPatchTool
from runner.tools.hosted import WebSearchTool
from runner.tools.plan import PlanTool
from runner.tools.shell import ShellTool


def offered_tools(
    names: Collection[str],
    *,
    apply_patch_tool: Literal["function", "freeform"],
    shell_timeout_ms: int,
    web_search: bool,
) -> list[Tool]:
    """shell, update_plan, apply_patch, then web_search (where Codex puts it: before MCP
    tools). The order is part of the prompt's prefix."""
    chosen: list[Tool] = []
    freeform = apply_patch_tool == "freeform"
    if "shell" in names:
        chosen.append(
            ShellTool(
                default_timeout_ms=shell_timeout_ms,
                plain_output=freeform and "apply_patch" in names,
            )
        )
    if "update_plan" in names:
        chosen.append(PlanTool())
    if "apply_patch" in names:
        chosen.append(ApplyPatchTool(freeform=freeform))
    if web_search:
        chosen.append(WebSearchTool())
    return chosen
