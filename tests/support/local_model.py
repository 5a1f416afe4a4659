"""The tool and instructions the embedded-model tests send on both wires."""

from __future__ import annotations

from typing import Any

SHELL: dict[str, Any] = {
    "type": "function",
    "name": "shell",
    "strict": False,
    "description": "Runs a shell command and returns its output.",
    "parameters": {
        "type": "object",
        "properties": {
            "command": {"type": "array", "items": {"type": "string"}},
            "workdir": {"type": "string"},
            "timeout_ms": {"type": "number"},
        },
        "required": ["command"],
        "additionalProperties": False,
    },
}


INSTRUCTIONS = (
    "You are a coding agent working in a git repository. "
    "Use the shell tool to run commands, then reply to the user."
)
