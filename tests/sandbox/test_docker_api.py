"""The Docker API the docker cases use where no daemon runs: `podman system service` on a
socket of its own, answering the real docker CLI, and gone (process and folder) when the
session ends, by an error too."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from runner.sandbox.engine import Engine
from tests.support.environments import engine_answers, podman_docker_api

pytestmark = pytest.mark.skipif(
    shutil.which("docker") is None or not engine_answers("podman"),
    reason="needs the docker CLI and podman",
)


def _serving(sock: str) -> list[int]:
    """Pids whose command line names `sock`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if sock.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_the_service_answers_docker_and_is_gone_after_an_error() -> None:
    with pytest.raises(RuntimeError, match="the body failed"), podman_docker_api() as host:
        sock = host.removeprefix("unix://")
        assert _serving(sock)
        docker = Engine("docker", extra_env={"DOCKER_HOST": host})
        done = subprocess.run(
            docker.argv(["version", "--format", "{{.Server.Version}}"]),
            env=docker.env(),
            capture_output=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        raise RuntimeError("the body failed")
    assert not os.path.exists(os.path.dirname(sock))
    assert _serving(sock) == []
