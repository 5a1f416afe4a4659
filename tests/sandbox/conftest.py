"""Fixtures for the sandbox suite: a real run workspace (as `runner.workspace` makes it,
with alternates into a user repository), a place outside it that the host may write, a
TCP service on the host's loopback, and `run` to execute a bash script under a policy."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator, Mapping
from functools import partial
from pathlib import Path

import anyio
import pytest

from runner import workspace
from runner.sandbox import Policy, make_executor
from runner.sandbox.bwrap import Limits
from runner.sandbox.env import child_env
from runner.tools import ExecResult
from tests.support.fixtures import make_git_repo
from tests.support.sandbox import Box, HostService, Runner


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Box]:
    repo = make_git_repo(tmp_path / "repo", {"README.md": "# sample\n", "src/a.txt": "a\n"})
    ws = workspace.prepare_sync(repo, root=tmp_path / "work", name="run")
    outside = Path(tempfile.mkdtemp(prefix="runner-sandbox-test-", dir="/var/tmp"))
    outside.chmod(0o777)
    try:
        yield Box(ws, outside)
    finally:
        anyio.run(workspace.cleanup, ws)
        shutil.rmtree(outside, ignore_errors=True)


@pytest.fixture
def run(box: Box) -> Runner:
    """`run(policy, "bash script")`: the script through the executor the batch would use
    for `policy`, in the workspace, with the agent's environment (`child_env`)."""

    def go(
        policy: Policy,
        script: str,
        *,
        timeout_s: float = 20,
        env: Mapping[str, str] | None = None,
        limits: Limits | None = None,
    ) -> ExecResult:
        executor = make_executor(policy, limits=limits)
        return anyio.run(
            partial(
                executor.run,
                ["bash", "-c", script],
                cwd=box.path,
                timeout_s=timeout_s,
                env=child_env(env if env is not None else os.environ),
            )
        )

    return go


@pytest.fixture
def host_service() -> Iterator[HostService]:
    """A TCP server on the host's 127.0.0.1 that greets and counts its connections."""
    srv = socket.create_server(("127.0.0.1", 0))
    svc = HostService(srv.getsockname()[1])
    stop = threading.Event()

    def serve() -> None:
        srv.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            svc.accepted += 1
            with conn:
                conn.sendall(b"HTTP/1.0 200 OK\r\ncontent-length: 6\r\n\r\nhello\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield svc
    stop.set()
    thread.join()
    srv.close()
