"""What an environment costs per call: start, exec, read/write a file, put/get a folder and
stop, for a podman container (through its long-lived helper, and with one `podman exec`
per command), beside a bubblewrap command on the host (bench/sandbox.py's path). Then
the two budgets of issue 26, end to end:

- the time from `runner run` starting to its first model request, for a host run and a
  podman run of a local image (budget 0.5 s for the podman one: the container starts
  beside that request, so only what comes before it counts);
- what a shell tool call adds to its command (`true`, and `bash -lc true` as models
  write them), through the podman helper and through bubblewrap (budget 0.1 s).

Measures the environments directly (runner.sandbox, runner.sandbox.container,
runner.sandbox.engine, runner.sandbox.env, runner.sandbox.images,
runner.sandbox.orphans, runner.tools, runner.tools.shell, runner.workspace): no public
API gives it; the first-request times run the CLI.

    .venv/bin/python bench/environments.py [--runs 20]

Needs podman (`make containers`) and the base image (built on first use, about 2 min).
Prints the median and 90th percentile of each call, and each budget's ratio.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from sandbox import make_repo  # noqa: E402

from bench.loopback import ThreadedServer, reply_message  # noqa: E402
from runner import workspace  # noqa: E402
from runner.sandbox import make_environment, make_executor, make_policy  # noqa: E402
from runner.sandbox.container import ContainerEnvironment  # noqa: E402
from runner.sandbox.engine import Engine  # noqa: E402
from runner.sandbox.env import child_env  # noqa: E402
from runner.sandbox.images import BASE_IMAGE, ensure_base_image  # noqa: E402
from runner.sandbox.orphans import live_batch  # noqa: E402
from runner.tools import ToolCall, ToolContext  # noqa: E402
from runner.tools.shell import ShellTool  # noqa: E402

START_BUDGET_S = 0.5
COMMAND_BUDGET_S = 0.1


def show(name: str, xs: list[float]) -> None:
    xs = sorted(xs)
    p90 = xs[int(0.9 * (len(xs) - 1))]
    print(
        f"{name:34} median {statistics.median(xs) * 1000:7.1f} ms, "
        f"p90 {p90 * 1000:7.1f} ms ({len(xs)} runs)"
    )


async def clock(call: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await call()
    return time.perf_counter() - start


async def calls(env: ContainerEnvironment, folder: Path, add: Callable[[str, float], None]) -> None:
    out = Path(tempfile.mkdtemp())
    add("exec `true`", await clock(lambda: env.exec(["true"], timeout_s=30)))
    add("write_file", await clock(lambda: env.write_file("f.txt", b"x" * 4096)))
    add("read_file", await clock(lambda: env.read_file("f.txt", max_bytes=8192)))
    add("put_dir (3 files)", await clock(lambda: env.put_dir(folder, "in")))
    add("get_dir (3 files)", await clock(lambda: env.get_dir("in", out, max_bytes=1 << 20)))
    shutil.rmtree(out)


async def podman(runs: int, folder: Path, helper: bool) -> None:
    engine = Engine("podman")
    label = "helper" if helper else "exec per call"
    times: dict[str, list[float]] = {}

    def add(name: str, took: float) -> None:
        times.setdefault(f"podman ({label}) {name}", []).append(took)

    with live_batch("bench-environments"):
        for i in range(max(3, runs // 4)):
            env = ContainerEnvironment(
                engine=engine,
                image=BASE_IMAGE,
                workdir="/work",
                batch_id="bench-environments",
                run_name=f"r{i}",
                helper=helper,
            )
            try:
                add("start", await clock(env.start))
                for _ in range(runs // max(3, runs // 4) + 1):
                    await calls(env, folder, add)
            finally:
                add("stop", await clock(env.stop))
    for name, xs in times.items():
        show(name, xs)


async def bwrap(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp, "repo")
        make_repo(repo)
        ws = await workspace.prepare(repo, root=Path(tmp, "work"), name="bench")
        env = child_env(os.environ)
        boxed = make_executor(
            make_policy("workspace-write", workspace=ws.path, hidden=[ws.path.parent])
        )
        xs = [
            await clock(lambda: boxed.run(["true"], cwd=ws.path, timeout_s=30, env=env))
            for _ in range(runs)
        ]
        await workspace.cleanup(ws)
    show("bubblewrap exec `true`", xs)


def first_request(runs: int) -> None:
    """`python -m runner run` of one task, as a user starts it, until the loopback server
    sees its first request: on the host, and in a podman container of the base image."""
    with (
        ThreadedServer(lambda req, i: reply_message("hi")) as srv,
        tempfile.TemporaryDirectory() as tmp,
    ):
        make_repo(Path(tmp, "repo"))
        podman = f"{{backend: podman, image: '{BASE_IMAGE}', workdir: /work}}"
        medians: list[float] = []
        for label, env in (("local (bubblewrap)", None), ("podman, image present", podman)):
            tasks = Path(tmp, "t.yaml")
            tasks.write_text(
                f"version: 1\nproviders:\n  fake: {{base_url: '{srv.base_url}'}}\n"
                + (f"defaults:\n  environment: {env}\n" if env else "")
                + "tasks:\n  - {id: a, prompt: hi, model: fake/m, repo: repo}\n"
            )
            firsts: list[float] = []
            starts: list[float] = []
            for i in range(runs):
                before = len(srv.requests)
                out = Path(tmp, f"o-{bool(env)}-{i}")
                t0 = time.monotonic()
                subprocess.run(
                    [sys.executable, "-m", "runner", "run", str(tasks), "--out", str(out)],
                    check=True,
                    capture_output=True,
                )
                firsts.append(srv.requests[before].received_at - t0)
                run = json.loads((out / "report.json").read_text())["runs"][0]
                if run["environment"]:
                    starts.append(run["environment"]["start_s"])
            med = statistics.median(firsts)
            medians.append(med)
            print(
                f"`runner run` to first request, {label:22} median {med * 1000:6.0f} ms "
                f"(budget {START_BUDGET_S * 1000:.0f} ms, ratio {med / START_BUDGET_S:.2f})"
            )
            if starts:
                print(
                    f"  the container adds {(med - medians[0]) * 1000:.0f} ms before that "
                    "request (image inspect, workspace tar, slot); it started beside it in "
                    f"median {statistics.median(starts) * 1000:.0f} ms (environment.start_s)"
                )


async def shell_calls(runs: int) -> None:
    """The shell tool's own call, as the loop makes it, through each environment."""
    tool = ShellTool()
    commands = {"`true`": ["true"], "`bash -lc true`": ["bash", "-lc", "true"]}
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp, "repo")
        make_repo(repo)
        ws = await workspace.prepare(repo, root=Path(tmp, "work"), name="bench")
        host_env = child_env(os.environ)
        local = make_environment(
            make_policy("workspace-write", workspace=ws.path, hidden=[ws.path.parent]),
            env=host_env,
        )
        with live_batch("bench-environments"):
            box = ContainerEnvironment(
                engine=Engine("podman"),
                image=BASE_IMAGE,
                workdir="/work",
                batch_id="bench-environments",
                run_name="shell",
            )
            await box.start()
            try:
                for label, env in (("bubblewrap", local), ("podman (helper)", box)):
                    ctx = ToolContext(environment=env, env={} if env is box else host_env)
                    for name, argv in commands.items():
                        call = ToolCall("c", "shell", json.dumps({"command": argv}))
                        await tool.run(call, ctx)  # the login snapshot, taken once per run
                        xs = [
                            await clock(functools.partial(tool.run, call, ctx)) for _ in range(runs)
                        ]
                        med = statistics.median(xs)
                        show(f"shell tool {name}, {label}", xs)
                        print(
                            f"{'':34} budget {COMMAND_BUDGET_S * 1000:.0f} ms, "
                            f"ratio {med / COMMAND_BUDGET_S:.2f}"
                        )
            finally:
                await box.stop()
        await workspace.cleanup(ws)


async def main(runs: int) -> None:
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    engine = Engine("podman")
    start = time.perf_counter()
    if await ensure_base_image(engine):
        print(f"built {BASE_IMAGE} in {time.perf_counter() - start:.0f} s")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp, "dir")
        (folder / "sub").mkdir(parents=True)
        for name in ("a.txt", "b.txt", "sub/c.txt"):
            (folder / name).write_text(name * 100)
        await podman(runs, folder, helper=True)
        await podman(max(3, runs // 4), folder, helper=False)
    await bwrap(runs)
    await shell_calls(runs)
    await anyio.to_thread.run_sync(first_request, max(5, runs // 4))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    anyio.run(main, parser.parse_args().runs)
