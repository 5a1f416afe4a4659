"""What the sandbox costs per command: `true` through the bubblewrap executor against
`true` through the unsandboxed one, both via the same `run_process` path (new session,
output capture), on a real workspace made by `runner.workspace.prepare`.

Measures the executors directly (runner.sandbox, runner.sandbox.env, runner.tools,
runner.workspace): no public API gives it.

    .venv/bin/python bench/sandbox.py [--runs 50]

Prints the median and 90th percentile wall time of each and the ratio of the medians.
Runs alternate between the two executors, so drift on a shared machine hits both alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runner import workspace  # noqa: E402
from runner.sandbox import make_executor, make_policy  # noqa: E402
from runner.sandbox.env import child_env  # noqa: E402
from runner.tools import Executor  # noqa: E402


def make_repo(path: Path) -> None:
    path.mkdir()
    (path / "README.md").write_text("# bench\n")
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(path)}
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", "b"],
    ):
        subprocess.run(["git", *args], cwd=path, check=True, env=env)


async def timed(executor: Executor, cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    res = await executor.run(["true"], cwd=cwd, timeout_s=30, env=env)
    took = time.perf_counter() - start
    if res.exit_code != 0:
        raise SystemExit(f"`true` failed: {res.output.decode(errors='replace')}")
    return took


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp, "repo")
        make_repo(repo)
        ws = await workspace.prepare(repo, root=Path(tmp, "work"), name="bench")
        env = child_env(os.environ)
        plain = make_executor(make_policy("danger-full-access", workspace=ws.path))
        boxed = make_executor(
            make_policy("workspace-write", workspace=ws.path, hidden=[ws.path.parent])
        )
        times: dict[str, list[float]] = {"unsandboxed": [], "bubblewrap": []}
        for _ in range(3):  # warm the page cache for both
            await timed(plain, ws.path, env)
            await timed(boxed, ws.path, env)
        for _ in range(runs):
            times["unsandboxed"].append(await timed(plain, ws.path, env))
            times["bubblewrap"].append(await timed(boxed, ws.path, env))
        await workspace.cleanup(ws)
    medians = {}
    for name, xs in times.items():
        xs.sort()
        medians[name] = statistics.median(xs)
        p90 = xs[int(0.9 * (len(xs) - 1))]
        print(
            f"{name:12} `true`: median {medians[name] * 1000:6.1f} ms, "
            f"p90 {p90 * 1000:6.1f} ms ({len(xs)} runs)"
        )
    ratio = medians["bubblewrap"] / medians["unsandboxed"]
    extra = (medians["bubblewrap"] - medians["unsandboxed"]) * 1000
    print(f"sandboxed / unsandboxed: {ratio:.1f}x (+{extra:.1f} ms per command)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    anyio.run(main, parser.parse_args().runs)
