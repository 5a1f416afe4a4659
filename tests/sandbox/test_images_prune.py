"""`runner images prune` removes the images runner built (by its owner label) and nothing
else; `--dry-run` only lists them. Run against podman storage of the test's own, so no
image of this machine is touched."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from runner.sandbox.engine import OWNER, OWNER_LABEL, Engine
from runner.sandbox.images import BASE_IMAGE
from tests.support.cli import run_cli
from tests.support.environments import engine_answers

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not engine_answers("podman"), reason="podman does not answer here"),
]


def tiny_tar() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("hello.txt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"hi\n"))
    return buf.getvalue()


@pytest.fixture
def storage(tmp_path: Path) -> dict[str, str]:
    conf = tmp_path / "storage.conf"
    conf.write_text(
        f'[storage]\ndriver = "vfs"\nrunroot = "{tmp_path}/run"\ngraphroot = "{tmp_path}/root"\n'
    )
    return {"CONTAINERS_STORAGE_CONF": str(conf)}


def podman(env: dict[str, str], *args: str, stdin: bytes | None = None) -> str:
    engine = Engine("podman", extra_env=env)
    done = subprocess.run(
        engine.argv(list(args)), env=engine.env(), input=stdin, capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.decode()


def test_prune_removes_only_what_runner_built(storage: dict[str, str]) -> None:
    owned = f"LABEL {OWNER_LABEL}={OWNER}"
    data = tiny_tar()
    podman(storage, "import", "--change", owned, "-", "localhost/runner-build:aaaa", stdin=data)
    podman(storage, "import", "--change", owned, "-", BASE_IMAGE, stdin=data + b"\0" * 512)
    podman(storage, "import", "-", "localhost/someone-else:1", stdin=data + b"\0" * 1024)

    def names() -> set[str]:
        return set(podman(storage, "images", "--format", "{{.Repository}}:{{.Tag}}").split())

    env = {**os.environ, **storage}
    dry = run_cli("images", "prune", "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert "would remove localhost/runner-build:aaaa" in dry.stdout
    assert "someone-else" not in dry.stdout and BASE_IMAGE not in dry.stdout
    assert "localhost/runner-build:aaaa" in names()

    done = run_cli("images", "prune", env=env)
    assert done.returncode == 0, done.stderr
    assert "removed 1 image(s)" in done.stdout
    assert names() == {BASE_IMAGE, "localhost/someone-else:1"}
