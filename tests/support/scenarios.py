"""The scripted model of the `--json` golden scenario, shared with its recorder."""

from __future__ import annotations

from typing import Any

from tests.support.loopback import (
    RecordedRequest,
    Reply,
    message_item,
    reasoning_item,
    reply_custom_tool_call,
    reply_function_call,
    reply_items,
)

PATCH = "*** Begin Patch\n*** Add File: new.txt\n+hello\n*** End Patch\n"


def scenario(shell_tool: str = "shell") -> Any:
    """The model answers: by Codex's tool names (`exec_command`) or the runner's."""

    def command(text: str, call_id: str) -> Reply:
        if shell_tool == "exec_command":
            return reply_function_call("exec_command", {"cmd": text}, call_id)
        return reply_function_call("shell", {"command": ["bash", "-lc", text]}, call_id)

    def script(req: RecordedRequest, i: int) -> Reply:
        if i == 0:
            return command("echo hi; exit 3", "c0")
        if i == 1:
            if any(t.get("type") == "custom" for t in req.json["tools"]):
                return reply_custom_tool_call("apply_patch", PATCH, "c1")
            return reply_function_call("apply_patch", {"input": PATCH}, "c1")
        if i == 2:
            return command("echo ok", "c2")
        return reply_items([reasoning_item("thought about it"), message_item("all done")])

    return script
