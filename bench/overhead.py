"""Harness overhead per model request, against a zero-latency loopback server.

The server runs in its own process and the tool is an in-process no-op, so the CPU time
this process spends per request is the runner's own cost: building the request, streaming
and decoding the response, running the loop, emitting events. Also measured: wall time per
request, connections opened, and the time from `runner run` starting to its first request.

Measures one thread's per-request cost directly (runner.agent, runner.items,
runner.providers.responses, runner.sandbox.local, runner.sandbox.localenv,
runner.tools): no public API gives it; the first-request time runs the CLI.

    .venv/bin/python bench/overhead.py
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.loopback import ProcessServer  # noqa: E402
from bench.startup import first_request_s, one_task  # noqa: E402
from runner import items as it  # noqa: E402
from runner.agent import Thread, ThreadSpec  # noqa: E402
from runner.providers.responses import ResponsesClient  # noqa: E402
from runner.sandbox.local import LocalExecutor  # noqa: E402
from runner.sandbox.localenv import LocalEnvironment  # noqa: E402
from runner.tools import ToolCall, ToolContext, ToolResult  # noqa: E402

STEPS = 50
OUTPUT = "x" * 300  # a typical short tool output

# DESIGN.md, "Performance budgets" (the current ones).
CPU_PER_REQUEST_BUDGET_MS = {100: 2.0, 2000: 5.0}  # by history items
CONNECTIONS_PER_THREAD_BUDGET = 1
FIRST_REQUEST_BUDGET_S = 0.25
PEAK_RSS_BUDGET_MB = 80.0  # one 2,000-item thread


class Noop:
    name = "noop"

    def spec(self) -> dict[str, Any]:
        return {
            "type": "function",
            "name": "noop",
            "description": "does nothing",
            "strict": False,
            "parameters": {"type": "object", "properties": {}},
        }

    def started(self, call: ToolCall) -> dict[str, Any] | None:
        return None

    async def run(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        return ToolResult(OUTPUT)


class NullSink:
    def emit(self, event: dict[str, Any]) -> None:
        pass


def history(n: int) -> list[it.Item]:
    items = [
        it.message("developer", "permissions " * 40),
        it.message("user", "context " * 40),
        it.message("user", "the task"),
    ]
    i = 0
    while len(items) < n:
        items.append(
            it.Item(
                {"type": "function_call", "name": "noop", "arguments": "{}", "call_id": f"old_{i}"}
            )
        )
        items.append(it.function_call_output(f"old_{i}", OUTPUT))
        i += 1
    return items[:n] if n % 2 == 1 else items


async def one_thread(base_url: str, n_items: int) -> tuple[float, float, list[float]]:
    client = ResponsesClient(base_url)
    spec = ThreadSpec(
        thread_id=f"bench-{n_items}-{time.time_ns()}",
        model="m",
        instructions="instructions " * 500,
        context=history(n_items),
        prompts=("go",),
        max_requests=STEPS + 5,
        timeout_s=600,
    )
    ctx = ToolContext(environment=LocalEnvironment(LocalExecutor(), Path(".")), env={})
    thread = Thread(spec, client, [Noop()], ctx, NullSink())
    cpu0, wall0 = time.process_time(), time.perf_counter()
    outcome = await thread.run()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    await client.aclose()
    assert outcome.status == "completed", outcome.error
    n = len(outcome.requests)
    return cpu / n, wall / n, [r.duration_s for r in outcome.requests]


def bench_overhead() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BENCH_STEPS": str(STEPS)}
    print(
        f"harness overhead per request ({STEPS + 1} requests per thread, zero-latency "
        "server in another process, no-op tool)"
    )
    print(
        f"{'history items':>14} {'cpu/req ms':>11} {'median cpu ms':>14} {'wall/req ms':>12} "
        f"{'budget ms':>10} {'conns/thread':>12}"
    )
    for n_items, budget in CPU_PER_REQUEST_BUDGET_MS.items():
        cpus, walls = [], []
        srv = ProcessServer("bench.scripts:calls", env=env)
        srv.start()
        try:
            for _ in range(5):
                cpu, wall, _ = anyio.run(one_thread, srv.base_url, n_items)
                cpus.append(cpu * 1000)
                walls.append(wall * 1000)
        finally:
            srv.stop()
        med = statistics.median(cpus)
        conns = srv.connections_opened / 5
        print(
            f"{n_items:>14} {statistics.mean(cpus):>11.2f} {med:>14.2f} "
            f"{statistics.median(walls):>12.2f} {budget:>10.1f} "
            f"{conns:>12.0f}   ratio {med / budget:.2f} of budget; connections "
            f"budget {CONNECTIONS_PER_THREAD_BUDGET}, ratio "
            f"{conns / CONNECTIONS_PER_THREAD_BUDGET:.2f}"
        )


def bench_startup() -> None:
    with one_task() as (srv, tmp, tasks):
        # a used out dir needs --force: a new one each time
        times = [first_request_s(srv, sys.executable, tasks, tmp / f"o{i}") for i in range(5)]
        med = statistics.median(times)
        print(
            f"time from `runner run` start to first request: median {med * 1000:.0f} ms "
            f"(budget {FIRST_REQUEST_BUDGET_S * 1000:.0f} ms, "
            f"ratio {med / FIRST_REQUEST_BUDGET_S:.2f})"
        )


if __name__ == "__main__":
    bench_overhead()
    import resource

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"peak RSS of this process after the 100- and 2,000-item threads: {rss:.0f} MB "
        f"(budget {PEAK_RSS_BUDGET_MB:.0f} MB for one 2,000-item thread, "
        f"ratio {rss / PEAK_RSS_BUDGET_MB:.2f})"
    )
    bench_startup()
