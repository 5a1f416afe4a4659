"""The container environment (runner/sandbox/container.py) where it differs from the
other backends (the shared contract is test_environment.py): a container that is killed
from outside, the labels and network every container gets, one `exec` per command where
the image has no python3 for the helper, and a command run as another user. Real engines,
real images; each test is `slow`, as every container test."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from runner.errors import EnvironmentFault, EnvironmentLost
from runner.sandbox.container import ContainerEnvironment
from runner.sandbox.orphans import live_batch
from tests.support.environments import (
    CONTAINER_BACKENDS,
    WORKDIR,
    Backend,
    base_image,
    kill_container,
    sh,
    started,
)

# The first test of a fresh machine builds the base image (about 2 min).
pytestmark = [pytest.mark.anyio, pytest.mark.timeout(900)]
containers = pytest.mark.parametrize("backend", CONTAINER_BACKENDS, indirect=True)


@containers
async def test_a_killed_environment_raises_lost(backend: Backend, tmp_path: Path) -> None:
    """Containers only: a `local` environment is the host's own folder and processes,
    which nothing outside the runner ends as a unit, so it has no `EnvironmentLost`."""
    assert backend.engine is not None
    async with started(backend, tmp_path) as env:
        assert (await env.exec(["true"], timeout_s=30)).exit_code == 0
        await kill_container(backend.engine, env)
        with pytest.raises(EnvironmentLost, match="gone"):
            await env.exec(["true"], timeout_s=30)
        with pytest.raises(EnvironmentLost):
            await env.read_file("x", max_bytes=10)
    await env.stop()  # again: nothing to do
    with pytest.raises(EnvironmentFault, match="not running"):
        await env.exec(["true"], timeout_s=30)


@containers
async def test_every_container_carries_the_runners_labels(backend: Backend, tmp_path: Path) -> None:
    async with started(backend, tmp_path) as env:
        assert isinstance(env, ContainerEnvironment)
        shown = await env.engine.check(["inspect", "--type", "container", env.name])
        labels = json.loads(shown.stdout)[0]["Config"]["Labels"]
        assert labels["io.runner.owner"] == "runner"
        assert labels["io.runner.batch"].startswith("test-")
        assert labels["io.runner.run"] == "contract"
        network = json.loads(shown.stdout)[0]["HostConfig"]["NetworkMode"]
        assert network == "none"
    gone = await env.engine.call(["inspect", "--type", "container", env.name])
    assert gone.code != 0


@containers
async def test_without_the_helper_each_command_is_an_exec(backend: Backend, tmp_path: Path) -> None:
    engine = backend.engine
    assert engine is not None
    env = ContainerEnvironment(
        engine=engine,
        image=await base_image(engine),
        workdir=WORKDIR,
        batch_id=f"test-{uuid.uuid4().hex[:8]}",
        run_name="plain",
        helper=False,
    )
    with live_batch(env.labels["io.runner.batch"]):
        try:
            await env.start()
            done = await env.exec(["sh", "-c", "cat; pwd; exit 3"], stdin=b"in\n", timeout_s=30)
            assert (done.exit_code, done.output) == (3, f"in\n{WORKDIR}\n".encode())
            done = await env.exec(["sleep", "30"], timeout_s=1)
            assert done.timed_out and done.exit_code == 124
            await env.write_file("f", b"data")
            assert await env.read_file("f", max_bytes=10) == b"data"
        finally:
            await env.stop()


@containers
async def test_one_command_runs_as_another_user(backend: Backend, tmp_path: Path) -> None:
    """`exec(user=...)` (a suite's verifier user; containers only) changes that command's
    user alone: the next one runs as the container's again, through the helper."""
    async with started(backend, tmp_path) as env:
        assert isinstance(env, ContainerEnvironment)
        done = await env.exec(["sh", "-c", "id -u; pwd"], timeout_s=30, user="nobody")
        assert (done.exit_code, done.output) == (0, f"65534\n{WORKDIR}\n".encode())
        done = await env.exec(["id", "-u"], timeout_s=30, user="65534:65534")
        assert done.output == b"65534\n"
        assert await sh(env, "id -u") == "0\n"
        done = await env.exec(["sleep", "30"], timeout_s=1, user="nobody")
        assert done.timed_out and done.exit_code == 124
