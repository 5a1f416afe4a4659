"""A whole batch through `run_batch`: runner CPU per request and peak memory.

Phase 1: 200 runs x 5 requests at concurrency 16 against a zero-latency loopback server
(its own process). CPU is this process's user+sys plus its children's (the git commands
for workspaces, commits and patches are the runner's work too), divided by requests.
Phase 2: 64 runs at concurrency 64 with 0.3 s per response, so all 64 threads are alive at
once; peak RSS of this process. Budgets: DESIGN.md's, the constants below.

    .venv/bin/python bench/batch.py [--runs 200] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import runner  # noqa: E402
from bench.gitrepo import make_git_repo  # noqa: E402
from bench.loopback import ProcessServer  # noqa: E402

# DESIGN.md, "Performance budgets" (the current ones).
CPU_PER_REQUEST_BUDGET_MS = 20.0  # git included
PEAK_RSS_64_THREADS_BUDGET_MB = 200.0


def task_file(dir_: Path, base_url: str, repo: Path, runs: int) -> Path:
    path = dir_ / "tasks.yaml"
    body = "".join(f"  - {{id: t{i:03d}, prompt: go {i}, repo: '{repo}'}}\n" for i in range(runs))
    path.write_text(
        "version: 1\n"
        f"providers:\n  fake: {{base_url: '{base_url}'}}\n"
        "defaults:\n  model: fake/m\n  tools: [apply_patch, update_plan]\n"
        "  limits: {max_requests: 10}\n"
        f"tasks:\n{body}"
    )
    return path


def cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def phase(runs: int, concurrency: int, delay_s: float, tmp: Path) -> tuple[float, float, int]:
    env = {**os.environ, "BENCH_DELAY_S": str(delay_s)}
    repo = make_git_repo(
        tmp / f"repo-{runs}-{concurrency}", {f"src/file{i}.py": f"x = {i}\n" for i in range(200)}
    )
    with ProcessServer("bench.scripts:batch", env=env) as srv:
        path = task_file(tmp, srv.base_url, repo, runs)
        runs_ = runner.load_runs(path)
        c0, t0 = cpu(), time.perf_counter()
        result = anyio.run(
            lambda: runner.run_batch(runs_, tmp / f"out-{concurrency}", concurrency=concurrency)
        )
        wall, used = time.perf_counter() - t0, cpu() - c0
    requests = sum(len(r.report.requests) for r in result.runs if r.report)
    bad = [r.status for r in result.runs if r.status != "completed"]
    if bad:
        raise SystemExit(f"{len(bad)} runs did not complete: {sorted(set(bad))}")
    return used, wall, requests


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        used, wall, requests = phase(args.runs, args.concurrency, 0.0, tmp)
        per = used / requests * 1000
        print(
            f"batch: {args.runs} runs x 5 requests at concurrency {args.concurrency}: "
            f"{requests} requests in {wall:.1f} s wall"
        )
        print(
            f"  runner CPU per request (incl. git): {per:.1f} ms  "
            f"budget {CPU_PER_REQUEST_BUDGET_MS:.0f} ms  "
            f"ratio {per / CPU_PER_REQUEST_BUDGET_MS:.2f}"
        )
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        used, wall, requests = phase(64, 64, 0.3, tmp)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"64 concurrent threads: {requests} requests in {wall:.1f} s wall; peak RSS "
            f"{rss:.0f} MB (after phase 1: {rss0:.0f} MB)  "
            f"budget {PEAK_RSS_64_THREADS_BUDGET_MB:.0f} MB  "
            f"ratio {rss / PEAK_RSS_64_THREADS_BUDGET_MB:.2f}"
        )


if __name__ == "__main__":
    main()
