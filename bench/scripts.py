"""Server scripts for the benchmarks, loaded by the loopback server in its own process."""

from __future__ import annotations

import os
from typing import Any

from bench.loopback import Reply, Request, per_conversation, reply_function_call, reply_message


def _calls(req: Request, i: int) -> Reply:
    steps = int(os.environ.get("BENCH_STEPS", "50"))
    if i < steps:
        return reply_function_call("noop", {"n": i}, call_id=f"call_{i}")
    return reply_message("done")


def calls() -> Any:
    """Answer every thread with BENCH_STEPS no-op tool calls, then a final message."""
    return per_conversation(_calls)


async def _batch(req: Request, i: int) -> Reply:
    delay = float(os.environ.get("BENCH_DELAY_S", "0"))
    if delay:
        import asyncio

        await asyncio.sleep(delay)
    if i == 0:
        patch = "*** Begin Patch\n*** Add File: result.txt\n+made by the benchmark\n*** End Patch"
        return reply_function_call("apply_patch", {"input": patch}, call_id="p0")
    if i < 4:
        plan = [
            {"step": f"step {n}", "status": "completed" if n < i else "pending"} for n in range(3)
        ]
        return reply_function_call("update_plan", {"plan": plan}, call_id=f"u{i}")
    return reply_message("done")


def batch() -> Any:
    """Five requests per thread: a file added with apply_patch (so every run commits),
    three plan updates, a final message. Tools that run in-process, so the CPU measured is
    the runner's own (plus the git it runs for workspaces and commits)."""
    return per_conversation(_batch)
