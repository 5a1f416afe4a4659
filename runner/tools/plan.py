"""The `update_plan` tool: the model keeps a visible checklist; we echo it as events."""

from __future__ import annotations

import json
from typing import Any

from runner.errors import ToolArgumentsError
from runner.tools import ToolCall, ToolContext, ToolResult

STATUSES = ("pending", "in_progress", "completed")

SPEC: dict[str, Any] = {
    "type": "function",
    "name": "update_plan",
    "description": (
        "Record your plan as a short list of steps with a status each. Call it again to mark "
        "progress. Only one step may be in_progress at a time."
    ),
    "strict": False,
    "parameters": {
        "type": "object",
        "properties": {
            "explanation": {"type": "string"},
            "plan": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "step": {"type": "string"},
                        "status": {
                            "type": "string",
                            "description": "One of: pending, in_progress, completed",
                        },
                    },
                    "required": ["step", "status"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["plan"],
        "additionalProperties": False,
    },
}


def parse_plan(raw: str) -> list[dict[str, Any]]:
    try:
        args = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # also an integer too long, or too deep
        raise ToolArgumentsError(f"arguments are not valid JSON: {exc}") from None
    plan = args.get("plan") if isinstance(args, dict) else None
    if not isinstance(plan, list):
        raise ToolArgumentsError("`plan` must be an array of {step, status}")
    items = []
    for entry in plan:
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("step"), str)
            and entry.get("status") in STATUSES
        ):
            raise ToolArgumentsError(
                "each plan entry needs a `step` string and a `status` of "
                "pending, in_progress or completed"
            )
        items.append({"text": entry["step"], "completed": entry["status"] == "completed"})
    if sum(1 for e in plan if e["status"] == "in_progress") > 1:
        raise ToolArgumentsError("at most one step may be in_progress")
    return items


class PlanTool:
    name = "update_plan"

    def spec(self) -> dict[str, Any]:
        return SPEC

    def started(self, call: ToolCall) -> dict[str, Any] | None:
        return None

    async def run(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        try:
            items = parse_plan(call.arguments)
        except ToolArgumentsError as exc:
            return ToolResult(f"invalid plan: {exc}", success=False)
        ctx.state["plan"] = items
        return ToolResult("Plan updated", event={"type": "todo_list", "items": items})
