"""Environments of every backend for the contract suite
(tests/sandbox/test_environment.py) and for what is built on the protocol
(tests/sandbox/test_changes.py).

Each backend is a `Backend`: how to make an environment over a test's temp dir, and how to
put a file outside its workdir. `local` is bubblewrap over `tmp_path/work`, the rest of
`tmp_path` hidden; `local-full-access` the same folder with no sandbox. Container backends
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

from runner.sandbox import make_environment, make_policy
from runner.sandbox.container import ContainerEnvironment
from runner.sandbox.engine import Engine
from runner.sandbox.env import child_env
from runner.sandbox.environment import Environment
from runner.sandbox.images import BASE_IMAGE, ensure_base_image
from runner.sandbox.orphans import live_batch, remove_args
from runner.vocabulary import SandboxMode

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
    make: Callable[[Path, str, str], Awaitable[Environment]]
    """`await make(tmp_path, batch_id, sub)`: an environment, not started, its workdir the
    backend's usual one or the folder `sub` below it."""
    put_outside: Callable[[Environment, bytes], Awaitable[str]]
    """Put a file outside the workdir, where the environment's own commands need not
    reach; its path as the environment sees it."""
    read_outside: Callable[[Environment, str], Awaitable[bytes]]
    """That file's bytes now."""
    engine: Engine | None = None
    """The container engine (None: `local`)."""


def container_backend(engine: Engine) -> Backend:
    async def make(tmp_path: Path, batch_id: str, sub: str) -> Environment:
        image = await base_image(engine)
        return ContainerEnvironment(
            engine=engine,
            image=image,
            workdir=f"{WORKDIR}/{sub}" if sub else WORKDIR,
            batch_id=batch_id,
            run_name="contract",
            memory_mb=512,
        )

    async def put_outside(env: Environment, data: bytes) -> str:
        await env.write_file("/outside.txt", data)
        return "/outside.txt"

    async def read_outside(env: Environment, path: str) -> bytes:
        return (await env.exec(["cat", path], timeout_s=30)).output

    return Backend(engine.kind, make, put_outside, read_outside, engine)


async def kill_container(engine: Engine, env: Environment) -> None:
    """End a container from outside, as a crash or an operator would."""
    assert isinstance(env, ContainerEnvironment)
    await engine.check(remove_args(engine, [env.name]))


def local_backend(mode: SandboxMode) -> Backend:
    """The host workspace `tmp_path/work` (or a folder below it), the rest of `tmp_path`
    hidden from commands."""

    async def make(tmp_path: Path, batch_id: str, sub: str) -> Environment:
        work = tmp_path / "work" / sub
        work.mkdir(parents=True, exist_ok=True)
        policy = make_policy(mode, workspace=work, hidden=[tmp_path])
        return make_environment(policy, env=child_env(os.environ))

    async def put_outside(env: Environment, data: bytes) -> str:
        outside = Path(env.workdir).parent / "outside.txt"
        await anyio.Path(outside).write_bytes(data)
        return str(outside)

    async def read_outside(env: Environment, path: str) -> bytes:
        return await anyio.Path(path).read_bytes()

    return Backend(
        "local" if mode != "danger-full-access" else "local-full-access",
        make,
        put_outside,
        read_outside,
    )


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
    pytest.param("podman", id="podman", marks=[_needs("podman"), pytest.mark.slow]),
    pytest.param("docker", id="docker", marks=pytest.mark.slow),
]
"""Names, made `Backend`s by the `backend` fixture (tests/sandbox/conftest.py): the
docker one needs the session's `docker` fixture. Both are `slow`: a container costs
0.3 to 6 s a test, so the default `pytest` leaves them to `make test`."""
LOCAL_BACKENDS = [
    pytest.param("local", id="local"),
    pytest.param("local-full-access", id="local-full-access"),
]
"""bubblewrap over the host (`workspace-write`), and the host itself."""
BACKENDS = [*LOCAL_BACKENDS, *CONTAINER_BACKENDS]


def make_backend(name: str, docker: Callable[[], Engine]) -> Backend:
    """The `Backend` of a parameter's name; `docker()` gives the session's docker engine."""
    if name == "local":
        return local_backend("workspace-write")
    if name == "local-full-access":
        return local_backend("danger-full-access")
    return container_backend(docker() if name == "docker" else Engine(name))


@asynccontextmanager
async def started(backend: Backend, tmp_path: Path, sub: str = "") -> AsyncIterator[Environment]:
    """A started environment of a live batch, stopped at the end whatever happens."""
    batch_id = f"test-{uuid.uuid4().hex[:12]}"
    with live_batch(batch_id):
        env = await backend.make(tmp_path, batch_id, sub)
        try:
            await env.start()
            yield env
        finally:
            with anyio.CancelScope(shield=True):
                await env.stop()


async def sh(box: Environment, script: str, env: dict[str, str] | None = None) -> str:
    """`script`'s output in `box`, which it must run to exit 0."""
    done = await box.exec(["sh", "-c", script], env=env, timeout_s=30)
    assert done.exit_code == 0, done.output
    return done.output.decode()
