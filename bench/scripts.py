"""Server scripts for the benchmarks, loaded by the loopback server in its own process."""

from __future__ import annotations

import os
from typing import Any

from tests.loopback import Reply, per_conversation, reply_function_call, reply_message


def _calls(req: Any, i: int) -> Reply:
    steps = int(os.environ.get("BENCH_STEPS", "50"))
    if i < steps:
        return reply_function_call("noop", {"n": i}, call_id=f"call_{i}")
    return reply_message("done")


def calls() -> Any:
    """Answer every thread with BENCH_STEPS no-op tool calls, then a final message."""
    return per_conversation(_calls)
