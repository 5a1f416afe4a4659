"""Environments of every backend for the contract suite
(tests/sandbox/test_environment_contract.py).

Each backend is a `Backend`: how to make an environment over a test's temp dir, and how to
kill it from outside (the container removed behind the runner's back). Container backends
need their engine to answer and the base image, which is built the first time a test needs
it (about 2 min with mmdebstrap) and found by its recipe label after that.

`docker` needs a Docker API. Where a daemon answers (GitHub CI) that one is used; where
none does but podman is installed (this machine), `podman system service` serves the API
on a socket in a temp dir for the session, over podman's own storage, so the base image
is the same one. The docker cases are skipped only without the docker CLI.
"""

from __future__ import annotations

import functools
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
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
    engine: Engine
    make: Callable[[Path, str], Awaitable[Environment]]
    """`await make(tmp_path, batch_id)`: an environment, not started."""
    kill: Callable[[Environment], Awaitable[None]]
    """End the environment from outside, as a crash or an operator would."""


def container_backend(engine: Engine) -> Backend:
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

    return Backend(engine.kind, engine, make, kill)


SERVICE_START_S = 30.0


@contextmanager
def podman_docker_api() -> Iterator[str]:
    """`podman system service` on a socket in a fresh temp dir, as a `DOCKER_HOST`
    value; the service is ended and the folder removed on the way out, whatever happens."""
    podman = Engine("podman")
    folder = tempfile.mkdtemp(prefix="runner-docker-api-")  # short: a socket path <= 107
    sock = os.path.join(folder, "api.sock")
    try:
        with open(os.path.join(folder, "service.log"), "wb") as log:
            proc = subprocess.Popen(
                podman.argv(["system", "service", "--time=0", f"unix://{sock}"]),
                env=podman.env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    try:
        _wait_for_socket(sock, proc)
        yield f"unix://{sock}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(folder, ignore_errors=True)


def _wait_for_socket(sock: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + SERVICE_START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            said = Path(sock).with_name("service.log").read_text(errors="replace")
            raise RuntimeError(
                f"podman system service ended (exit {proc.returncode}): {said[-2000:]}"
            )
        with socket.socket(socket.AF_UNIX) as probe:
            try:
                probe.connect(sock)
                return
            except OSError:
                pass
        time.sleep(0.05)
    raise RuntimeError(f"podman system service made no socket within {SERVICE_START_S:g} s")


@contextmanager
def docker_engine() -> Iterator[Engine]:
    """The docker CLI, pointed at a daemon that answers (see the module's docstring).
    Skips when there is no docker CLI, or neither a daemon nor podman to serve one."""
    if shutil.which("docker") is None:
        pytest.skip("the docker CLI is not installed")
    if engine_answers("docker"):
        yield Engine("docker")
        return
    if shutil.which("podman") is None:
        pytest.skip("no docker daemon answers, and no podman is installed to serve its API")
    with podman_docker_api() as host:
        yield Engine("docker", extra_env={"DOCKER_HOST": host})


def _needs(executable: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        not engine_answers(executable), reason=f"{executable} is not installed or not answering"
    )


CONTAINER_BACKENDS = [
    pytest.param("podman", id="podman", marks=_needs("podman")),
    pytest.param("docker", id="docker"),
]
"""Names, made `Backend`s by the `backend` fixture (tests/sandbox/conftest.py): the
docker one needs the session's `docker` fixture."""
BACKENDS = [
    *CONTAINER_BACKENDS,
    # local: pytest.param("local", id="local") once runner/sandbox/localenv.py lands.
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
