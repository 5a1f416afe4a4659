"""Step gap: from the end of one model response to the next request, for a quick command.

`runner run` (a real subprocess) drives 41 steps of `["bash", "-lc", "true"]`, as models
send them, against the loopback server; the server notes when each reply was written
and when the next request arrived. Two modes:

- danger-full-access, with a HOME whose `.bash_profile` takes ~0.1 s to source (as one
  that starts a version manager does): the login environment is captured once per
  thread, so the profile's cost is paid once, not per command;
- workspace-write (bubblewrap), where the sandbox's own profile is read.

Beside each gap: the same command run by the same executor outside the runner, so the
runner's own share of the gap shows (gap minus command).

Measures the CLI process; the command-alone times use the executor directly
(runner.sandbox, runner.sandbox.env): no public API gives it.

    .venv/bin/python bench/step_gap.py [--steps 41]
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

from bench.gitrepo import make_git_repo  # noqa: E402
from bench.loopback import (  # noqa: E402
    Request,
    ThreadedServer,
    per_conversation,
    reply_function_call,
    reply_message,
)
from runner.sandbox import make_executor, make_policy  # noqa: E402
from runner.sandbox.env import child_env  # noqa: E402

# DESIGN.md, "Performance budgets": every sandbox mode, whatever the profile costs.
STEP_GAP_BUDGET_S = 0.030
SLOW_PROFILE = "sleep 0.1\nexport SLOW_PROFILE=1\n"


def script(steps: int) -> object:
    def answer(req: Request, i: int) -> object:
        if i < steps:
            return reply_function_call("shell", {"command": ["bash", "-lc", "true"]}, f"c{i}")
        return reply_message("done")

    return per_conversation(answer)  # type: ignore[arg-type]


def gaps(requests: list[Request]) -> list[float]:
    return [
        cur.received_at - prev.replied_at
        for prev, cur in zip(requests, requests[1:], strict=False)
        if prev.replied_at
    ]


def command_time(mode: str, repo: Path, env: dict[str, str], runs: int = 15) -> float:
    """The median wall time of the login shell's command alone, via the same executor:
    `true` under the captured environment (what the runner runs after the first step)."""
    executor = make_executor(make_policy(mode, workspace=repo))  # type: ignore[arg-type]
    times = []
    for _ in range(runs):
        t0 = time.monotonic()
        anyio.run(
            lambda: executor.run(
                ["env", "-i", "PATH=/usr/bin:/bin", "bash", "-c", "true"],
                cwd=repo,
                timeout_s=10,
                env=child_env(env),
            )
        )
        times.append(time.monotonic() - t0)
    return statistics.median(times)


def profile_time(env: dict[str, str], runs: int = 5) -> float:
    """What one `bash -lc true` costs with this HOME's profile: the tax avoided per step."""
    times = []
    for _ in range(runs):
        t0 = time.monotonic()
        subprocess.run(["bash", "-lc", "true"], env=env, check=True)
        times.append(time.monotonic() - t0)
    return statistics.median(times)


def one(mode: str, steps: int, tmp: Path) -> None:
    home = tmp / f"home-{mode}"
    home.mkdir()
    (home / ".bash_profile").write_text(SLOW_PROFILE)
    repo = tmp / f"repo-{mode}"
    make_git_repo(repo)
    env = {**os.environ, "HOME": str(home)}
    with ThreadedServer(script(steps)) as srv:  # type: ignore[arg-type]
        tasks = tmp / f"{mode}.yaml"
        tasks.write_text(
            f"version: 1\nproviders:\n  fake: {{base_url: '{srv.base_url}'}}\n"
            f"defaults: {{sandbox: {mode}, limits: {{max_requests: {steps + 5}}}}}\n"
            f"tasks:\n  - {{id: a, prompt: go, model: fake/m, repo: {repo}}}\n"
        )
        t0 = time.monotonic()
        subprocess.run(
            [sys.executable, "-m", "runner", "run", str(tasks), "--out", str(tmp / f"out-{mode}")],
            check=True,
            capture_output=True,
            env=env,
        )
        wall = time.monotonic() - t0
        g = sorted(gaps(srv.requests))
    cmd = command_time(mode, repo, env)
    med, p90 = statistics.median(g), g[int(len(g) * 0.9)]
    print(
        f"{mode:>18}: step gap median {med * 1000:6.1f} ms, p90 {p90 * 1000:6.1f} ms "
        f"over {len(g)} steps (budget {STEP_GAP_BUDGET_S * 1000:.0f} ms, "
        f"ratio {med / STEP_GAP_BUDGET_S:.2f}); "
        f"command alone {cmd * 1000:5.1f} ms, runner's own {(med - cmd) * 1000:5.1f} ms; "
        f"whole run {wall:.2f} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=41)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp, "probe")
        home.mkdir()
        (home / ".bash_profile").write_text(SLOW_PROFILE)
        tax = profile_time({**os.environ, "HOME": str(home)})
        print(
            f"`bash -lc true` with the slow profile, run directly: {tax * 1000:.0f} ms "
            "(paid once per thread by the runner)"
        )
        for mode in ("danger-full-access", "workspace-write"):
            one(mode, args.steps, Path(tmp))


if __name__ == "__main__":
    main()
