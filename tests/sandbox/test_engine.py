"""The engine CLI's environment: what names its daemon passes, for the engine that reads
it, and no secret does, from the runner's environment or from an explicit addition. The
last test runs a real program as the "engine" and reads back what it was given."""

from __future__ import annotations

import shutil

import pytest

from runner.sandbox.engine import CONTAINERS_CONF, Engine

HOST = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/u",
    "DOCKER_HOST": "ssh://builder@example.invalid",
    "DOCKER_CONTEXT": "rootless",
    "DOCKER_CONFIG": "/home/u/.docker-other",
    "DOCKER_CERT_PATH": "/home/u/certs",
    "DOCKER_TLS_VERIFY": "1",
    "CONTAINER_HOST": "unix:///run/user/1000/podman/podman.sock",
    "DOCKER_AUTH_CONFIG": '{"auths": {}}',
    "DOCKER_PASSWORD": "hunter2",
    "REGISTRY_TOKEN": "t0k",
    "OPENAI_API_KEY": "sk-x",
    "DATABASE_URL": "postgres://u:p@h/db",
}


def test_docker_gets_its_daemons_address_and_no_secret() -> None:
    env = Engine("docker", base_env=HOST).env()
    assert env == {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/u",
        "DOCKER_HOST": "ssh://builder@example.invalid",
        "DOCKER_CONTEXT": "rootless",
        "DOCKER_CONFIG": "/home/u/.docker-other",
        "DOCKER_CERT_PATH": "/home/u/certs",
        "DOCKER_TLS_VERIFY": "1",
    }


def test_podman_gets_its_own_and_not_dockers() -> None:
    env = Engine("/usr/bin/podman", base_env=HOST).env()
    assert env == {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/u",
        "CONTAINER_HOST": "unix:///run/user/1000/podman/podman.sock",
        "CONTAINERS_CONF": str(CONTAINERS_CONF),
    }


def test_an_explicit_addition_wins_but_never_adds_a_secret() -> None:
    extra = {"DOCKER_HOST": "unix:///run/api.sock", "DOCKER_TOKEN": "t", "X_PASSWORD": "p"}
    env = Engine("docker", base_env=HOST, extra_env=extra).env()
    assert env["DOCKER_HOST"] == "unix:///run/api.sock"
    assert not {"DOCKER_TOKEN", "X_PASSWORD"} & env.keys()


@pytest.mark.anyio
async def test_the_cli_is_started_with_that_environment() -> None:
    program = shutil.which("env")
    assert program is not None
    engine = Engine(program, base_env=HOST, extra_env={"DOCKER_HOST": "unix:///run/api.sock"})
    got = dict(
        line.split("=", 1) for line in (await engine.check([])).text.splitlines() if "=" in line
    )
    assert got == {**engine.env(), "DOCKER_HOST": "unix:///run/api.sock"}
    assert "OPENAI_API_KEY" not in got and "DATABASE_URL" not in got
