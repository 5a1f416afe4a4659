"""The shapes of the events the agent loop emits: `codex exec --json`'s items and usage,
and the runner's own `request.completed`. Pure functions, no I/O: the loop decides when
an event happens, this module what it looks like.

Each event a thread's events file or the `--json` stream carries several times over is
built by one function here, whoever emits it (the loop, a run's steps, the event log for
a thread that failed before it began), so the shapes cannot drift apart.
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Any

from runner.items import Item, Usage
from runner.usage import RequestRecord


def thread_started(thread_id: str) -> dict[str, Any]:
    return {"type": "thread.started", "thread_id": thread_id}


def turn_started() -> dict[str, Any]:
    return {"type": "turn.started"}


def turn_failed(message: str | None) -> dict[str, Any]:
    return {"type": "turn.failed", "error": {"message": message}}


def error(message: str) -> dict[str, Any]:
    """A failure outside any one item: the run goes on or ends, as its emitter says."""
    return {"type": "error", "message": message}


def absolute_paths(item: dict[str, Any], root: Path) -> dict[str, Any]:
    """File changes name absolute paths, as `codex exec --json` does (tools report them
    relative to the workspace, `root`)."""
    changes = item.get("changes")
    if item.get("type") != "file_change" or not isinstance(changes, list):
        return item
    return {
        **item,
        "changes": [
            {**c, "path": posixpath.normpath(posixpath.join(str(root), str(c.get("path", ""))))}
            if isinstance(c, dict)
            else c
            for c in changes
        ],
    }


def failed_item(started: dict[str, Any], message: str) -> dict[str, Any]:
    """The `item.completed` for a started item whose tool gave no event of its own (bad
    arguments, cancelled): a `codex exec --json` consumer pairs every start with an end."""
    item = {**started, "status": "failed"}
    if item.get("type") == "command_execution":
        item["aggregated_output"] = message
    elif item.get("type") == "mcp_tool_call":
        item["error"] = {"message": message}
    return item


def reasoning_text(item: Item) -> str:
    """The readable summary of a reasoning item (empty when the model gave none)."""
    return "".join(
        str(p.get("text", "")) for p in item.data.get("summary") or [] if isinstance(p, dict)
    )


def exec_usage(usage: Usage) -> dict[str, int]:
    """A thread's cumulative usage in `codex exec --json` field names."""
    return {
        "input_tokens": usage.input_tokens,
        "cached_input_tokens": usage.cached_tokens,
        "cache_write_input_tokens": usage.cache_write_tokens,
        "output_tokens": usage.output_tokens,
        "reasoning_output_tokens": usage.reasoning_tokens,
    }


def request_completed(rec: RequestRecord) -> dict[str, Any]:
    """The runner's own event for one request: its size, time, usage and prefix reuse."""
    prefix = rec.prefix
    return {
        "type": "request.completed",
        "request": rec.index,
        "turn": rec.turn,
        "kind": rec.kind,
        "error": rec.error,
        "input_items": rec.input_items,
        "request_bytes": rec.request_bytes,
        "duration_ms": round(rec.duration_s * 1000, 1),
        "response_id": rec.response_id,
        "usage": rec.usage.as_dict() if rec.usage else None,
        "prefix": {
            "extends_previous": prefix.extends_previous,
            "reused_items": prefix.reused_items,
            "ideal_cache_ratio": prefix.ideal_cache_ratio,
            "break_index": prefix.break_index,
            "break_reason": prefix.break_reason,
        },
    }


def verifier_completed(
    *,
    error: str | None = None,
    reward: float | None = None,
    rewards: tuple[tuple[str, float], ...] = (),
    resolution: str | None = None,
    exit_code: int | None = None,
    duration_s: float = 0.0,
) -> dict[str, Any]:
    """A suite run's grade, or why there is none (`error`), after the agent's phase."""
    said: dict[str, Any] = (
        {"error": error}
        if error is not None
        else {
            "reward": reward,
            "rewards": dict(rewards),
            "resolution": resolution,
            "exit_code": exit_code,
            "duration_s": duration_s,
        }
    )
    return {"type": "verifier.completed", **said}
