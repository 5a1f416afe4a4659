"""Environments of every backend for the contract suite
(tests/sandbox/test_environment_contract.py).

Each backend is a `Backend`: how to make an environment over a test's temp dir, and how to
kill it from outside (the container removed behind the runner's back). Container backends
need their engine to answer and the base image, which is built the first time a test needs
it (about 2 min with mmdebstrap) and found by its recipe label after that.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from runner.sandbox.container import ContainerEnvironment
from runner.sandbox.engine import Engine
from runner.sandbox.environment import Environment
from runner.sandbox.images import BASE_IMAGE, ensure_base_image
from runner.sandbox.orphans import live_batch, remove_args

WORKDIR = "/work"


@functools.cache
def engine_answers(executable: str) -> bool:
    """The engine is installed and its daemon (docker) or storage (podman) answers."""
    if shutil.which(executable) is None:
        return False
    engine = Engine(executable)
    try:
        done = subprocess.run(
            engine.argv(["info"]), env=engine.env(), capture_output=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


_built: set[str] = set()


async def base_image(engine: Engine) -> str:
    """The base image, built once if missing (cached across runs by its recipe label)."""
    if engine.executable not in _built:
        # RUNNER_DEBIAN_MIRROR: for a machine whose apt serves no Debian (GitHub's Ubuntu).
        await ensure_base_image(engine, mirror=os.environ.get("RUNNER_DEBIAN_MIRROR"))
        _built.add(engine.executable)
    return BASE_IMAGE


@dataclass(frozen=True)
class Backend:
    name: str
    make: Callable[[Path, str], Awaitable[Environment]]
    """`await make(tmp_path, batch_id)`: an environment, not started."""
    kill: Callable[[Environment], Awaitable[None]]
    """End the environment from outside, as a crash or an operator would."""


def _container_backend(executable: str) -> Backend:
    engine = Engine(executable)

    async def make(tmp_path: Path, batch_id: str) -> Environment:
        image = await base_image(engine)
        return ContainerEnvironment(
            engine=engine,
            image=image,
            workdir=WORKDIR,
            batch_id=batch_id,
            run_name="contract",
            memory_mb=512,
        )

    async def kill(env: Environment) -> None:
        assert isinstance(env, ContainerEnvironment)
        await engine.check(remove_args(engine, [env.name]))

    return Backend(executable, make, kill)


def _needs(executable: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        not engine_answers(executable), reason=f"{executable} is not installed or not answering"
    )


CONTAINER_BACKENDS = [
    pytest.param(_container_backend("podman"), id="podman", marks=_needs("podman")),
    # Runs where a docker daemon answers (the GitHub CI workflow); skipped here.
    pytest.param(_container_backend("docker"), id="docker", marks=_needs("docker")),
]
BACKENDS = [
    *CONTAINER_BACKENDS,
    # local: pytest.param(_local_backend(), id="local") once runner/sandbox/localenv.py lands.
]


@asynccontextmanager
async def started(backend: Backend, tmp_path: Path) -> AsyncIterator[Environment]:
    """A started environment of a live batch, stopped at the end whatever happens."""
    batch_id = f"test-{uuid.uuid4().hex[:12]}"
    with live_batch(batch_id):
        env = await backend.make(tmp_path, batch_id)
        try:
            await env.start()
            yield env
        finally:
            with anyio.CancelScope(shield=True):
                await env.stop()
