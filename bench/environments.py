"""What an environment costs per call: start, exec, read/write a file, put/get a folder and
stop, for a podman container (through its long-lived helper, and with one `podman exec`
per command), beside a bubblewrap command on the host (bench/sandbox.py's path).

    .venv/bin/python bench/environments.py [--runs 20]

Needs podman (`make containers`) and the base image (built on first use, about 2 min).
Prints the median and 90th percentile of each call.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
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

from runner import workspace  # noqa: E402
from runner.sandbox import make_executor, make_policy  # noqa: E402
from runner.sandbox.container import ContainerEnvironment  # noqa: E402
from runner.sandbox.engine import Engine  # noqa: E402
from runner.sandbox.env import child_env  # noqa: E402
from runner.sandbox.images import BASE_IMAGE, ensure_base_image  # noqa: E402
from runner.sandbox.orphans import live_batch  # noqa: E402


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


async def main(runs: int) -> None:
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


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    anyio.run(main, parser.parse_args().runs)
