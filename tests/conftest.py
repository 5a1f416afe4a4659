"""Shared fixtures: the loopback Responses API server in its three modes, and the
environment of each backend (`backend`, over `docker` where the test names it)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Unpack

import anyio
import pytest

from runner.sandbox.engine import Engine
from tests.support.environments import Backend, base_image, docker_engine, make_backend
from tests.support.fixtures import LoopbackFactory, ProcessFactory, ThreadFactory, make_git_repo
from tests.support.loopback import (
    LoopbackServer,
    ProcessServer,
    Script,
    ServerOptions,
    ThreadedServer,
)

collect_ignore_glob = ["fixtures/suites/*"]
"""The suites written for the tests hold the suites' own tests (test_*.py), which run inside
their environments, never in this session."""


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """The server runs on asyncio streams, so async tests run on asyncio only."""
    return "asyncio"


def _raise_first(steps: list[Callable[[], None]]) -> None:
    """Run every teardown step, then re-raise the first failure (so all servers stop)."""
    failures: list[BaseException] = []
    for step in steps:
        try:
            step()
        except Exception as exc:
            failures.append(exc)
    if failures:
        raise failures[0]


@pytest.fixture
async def loopback() -> AsyncIterator[LoopbackFactory]:
    """`srv = await loopback(script)`: a started server in the test's own event loop.

    For async (anyio) tests. Servers are closed at teardown, and a strict server's
    problems (script failures, unpaired calls) fail the test there.
    """
    servers: list[LoopbackServer] = []

    async def start(script: Script, **opts: Unpack[ServerOptions]) -> LoopbackServer:
        srv = await LoopbackServer(script, **opts).start()
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        await srv.aclose()
    _raise_first([srv.check for srv in servers if srv.strict])


@pytest.fixture
def loopback_thread() -> Iterator[ThreadFactory]:
    """`srv = loopback_thread(script)`: a server in a background thread.

    For sync tests and for running the `runner` CLI as a subprocess against `srv.base_url`.
    """
    servers: list[ThreadedServer] = []

    def start(script: Script, **opts: Unpack[ServerOptions]) -> ThreadedServer:
        srv = ThreadedServer(script, **opts).start()
        servers.append(srv)
        return srv

    yield start
    _raise_first([srv.stop for srv in servers])


@pytest.fixture
def loopback_process() -> Iterator[ProcessFactory]:
    """`srv = loopback_process("module:script")`: a server in a child process.

    Its requests are in `srv.requests` only after `srv.stop()` (teardown stops it too).
    """
    servers: list[ProcessServer] = []

    def start(
        script: str = "tests.support.loopback:echo", **opts: Unpack[ServerOptions]
    ) -> ProcessServer:
        srv = ProcessServer(script, **opts).start()
        servers.append(srv)
        return srv

    yield start
    _raise_first([srv.stop for srv in servers])


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    return make_git_repo(tmp_path / "repo")


@pytest.fixture
def no_git_above(tmp_path: Path) -> Path:
    """tmp_path, checked not to sit inside some git checkout (discovery would stop there)."""
    if any((d / ".git").exists() for d in tmp_path.parents):
        pytest.skip("tmp_path is inside a git checkout")
    return tmp_path


SLOW_LIST = Path(__file__).with_name("slow_tests.txt")


def measured_slow() -> frozenset[str]:
    """The tests measured to take 0.5 s or more under load (tests/slow_tests.txt): marked
    `slow` here, so the default `pytest` leaves them out by their cost, not by their kind."""
    lines = SLOW_LIST.read_text().splitlines() if SLOW_LIST.exists() else []
    return frozenset(s for line in lines if (s := line.strip()) and not s.startswith("#"))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks the measured-slow tests `slow` before `-m` deselects anything. Slow tests (the
    embedded model, kill -9 cycles) get 600 s instead of the default 120 s: on a busy
    2-core machine the model alone can take minutes. When every test is collected (no
    paths given), an id in the list that names no test stops the session: a test moved
    or renamed would otherwise lose its mark and slow the inner loop unseen."""
    slow = measured_slow()
    whole = not config.args or config.args == config.getini("testpaths")
    if whole and (stale := sorted(slow - {item.nodeid for item in items})):
        raise pytest.UsageError(f"{SLOW_LIST.name} names no such test: {stale[:5]}")
    for item in items:
        if item.nodeid in slow:
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(600))


@pytest.fixture(scope="session")
def image() -> str:
    """The base image on podman (`localhost/runner-base`), built once if missing: what
    the container tests' runs start from. A module may give its own (a tiny image)."""
    return anyio.run(base_image, Engine("podman"))


@pytest.fixture(scope="session")
def docker() -> Iterator[Engine]:
    """The docker CLI and a daemon that answers it, for the whole session (a podman
    service started for it, where no daemon runs, is ended at the session's end)."""
    with docker_engine() as engine:
        yield engine


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> Backend:
    """The backend named by the test's parameter (`BACKENDS`, `CONTAINER_BACKENDS`)."""
    return make_backend(str(request.param), lambda: request.getfixturevalue("docker"))
