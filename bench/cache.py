"""Prompt-cache accounting of long threads, against the loopback server, which caches exact
prefixes (cached tokens = the bytes a request shares with the previous one, / 4).

For a 40-step and a 200-step thread (one tool call per step, 600-byte outputs, the bundled
instructions and the three built-in tools): total input, cached and uncached tokens, and
cached / ideal, where ideal is what a perfect prefix cache could have served (see
`runner.usage`). The 200-step thread passes an 8,000-token compaction limit several times;
for each compaction the summary request's own cache share is printed too.

Measures one thread's prompt caching directly (runner.agent, runner.compaction,
runner.prompt, runner.providers.responses, runner.sandbox.local,
runner.sandbox.localenv, runner.tools, runner.tools.shell, runner.tools.plan,
runner.tools.apply_patch, runner.usage): no public API gives it.

    .venv/bin/python bench/cache.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.loopback import (  # noqa: E402
    Reply,
    Request,
    ThreadedServer,
    reply_function_call,
    reply_message,
)
from runner import compaction as cp  # noqa: E402
from runner import prompt as prompts  # noqa: E402
from runner.agent import Outcome, Thread, ThreadSpec  # noqa: E402
from runner.providers.responses import ResponsesClient  # noqa: E402
from runner.sandbox.local import LocalExecutor  # noqa: E402
from runner.sandbox.localenv import LocalEnvironment  # noqa: E402
from runner.tools import ToolCall, ToolContext, ToolResult  # noqa: E402
from runner.tools.apply_patch import ApplyPatchTool  # noqa: E402
from runner.tools.plan import PlanTool  # noqa: E402
from runner.tools.shell import ShellTool  # noqa: E402
from runner.usage import ideal_cached_tokens  # noqa: E402

LIMIT = 8_000
OUTPUT = "x" * 600

# DESIGN.md, "Performance budgets" (the current ones).
CACHED_IDEAL_BUDGET = 1.00  # cached / ideal tokens on long threads
COMPACTED_HIT_BUDGET = 0.80  # cached / input tokens on a thread that compacts (at least)


class Steps:
    """`n` shell calls, then a final message; summary requests get a short summary."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.made = 0

    def __call__(self, req: Request, index: int, /) -> Reply:
        if req.json.get("tool_choice") == "none":
            return reply_message(f"Ran {self.made} of {self.n} steps; keep going.")
        if self.made >= self.n:
            return reply_message("done")
        self.made += 1
        return reply_function_call("shell", {"command": ["true"]}, call_id=f"c{self.made}")


class FixedShell(ShellTool):
    """The real shell tool's definition, answering in-process with a fixed output, so the
    numbers do not depend on timings printed in real output."""

    async def run(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        return ToolResult(OUTPUT)


class NullSink:
    def emit(self, event: dict[str, Any]) -> None:
        pass


async def thread(base_url: str, steps: int, cwd: Path) -> Outcome:
    context, _ = prompts.initial_context(
        cwd=cwd,
        sandbox="workspace-write",
        network=False,
        writable_roots=[],
        developer_instructions=None,
        runner_home=None,
        shell="bash",
        current_date="2026-01-01",
        timezone="UTC",
    )
    spec = ThreadSpec(
        thread_id=f"cache-{steps}",
        model="m",
        instructions=prompts.base_instructions(),
        context=context,
        prompts=("Do the steps.",),
        max_requests=steps + 10,
        timeout_s=600,
        compaction=cp.CompactionSettings(limit=LIMIT),
    )
    client = ResponsesClient(base_url)
    ctx = ToolContext(environment=LocalEnvironment(LocalExecutor(), cwd), env={})
    try:
        tools = [FixedShell(), PlanTool(), ApplyPatchTool()]
        return await Thread(spec, client, tools, ctx, NullSink()).run()
    finally:
        await client.aclose()


def report(steps: int, outcome: Outcome) -> None:
    assert outcome.status == "completed", outcome.error
    inp = cached = ideal = 0
    for r in outcome.requests:
        if r.usage is not None:
            inp += r.usage.input_tokens
            cached += r.usage.cached_tokens
            ideal += ideal_cached_tokens(r.usage.input_tokens, r.prefix)
    breaks = [r for r in outcome.requests[1:] if not r.prefix.extends_previous]
    unexplained = [r for r in breaks if r.prefix.break_reason != "compaction"]
    print(
        f"{steps:>5} {len(outcome.requests):>8} {len(outcome.compactions):>11} "
        f"{inp:>12,} {cached:>12,} {inp - cached:>12,} {cached / inp:>8.3f} "
        f"{ideal / inp:>8.3f} {cached / ideal:>12.3f} {len(unexplained):>11}"
    )
    print(
        f"      budgets: cached/ideal >= {CACHED_IDEAL_BUDGET:.2f} "
        f"(ratio {cached / ideal / CACHED_IDEAL_BUDGET:.2f})"
        + (
            f", hit >= {COMPACTED_HIT_BUDGET:.2f} with compactions "
            f"(ratio {cached / inp / COMPACTED_HIT_BUDGET:.2f})"
            if outcome.compactions
            else ""
        )
    )
    for c in outcome.compactions:
        s = outcome.requests[c.requests[0] - 1]
        nxt = outcome.requests[c.requests[0]]
        assert s.usage is not None and nxt.usage is not None
        print(
            f"      compaction at request {s.index}: {c.tokens_before:,} -> "
            f"{c.tokens_after:,} tokens; summary request cached "
            f"{s.usage.cached_tokens:,}/{s.usage.input_tokens:,}, the request after it "
            f"{nxt.usage.cached_tokens:,}/{nxt.usage.input_tokens:,}"
        )


def main() -> None:
    print(
        f"prompt cache over long threads (loopback server caching exact prefixes; "
        f"auto_compact_limit {LIMIT:,} tokens)"
    )
    print(
        f"{'steps':>5} {'requests':>8} {'compactions':>11} {'input':>12} {'cached':>12} "
        f"{'uncached':>12} {'hit':>8} {'ideal':>8} {'cached/ideal':>12} "
        f"{'bad breaks':>11}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for steps in (40, 200):
            with ThreadedServer(Steps(steps), keep_bodies=False) as srv:
                report(steps, anyio.run(thread, srv.base_url, steps, Path(tmp)))


if __name__ == "__main__":
    main()
