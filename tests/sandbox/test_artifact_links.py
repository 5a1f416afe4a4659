"""Artifacts are never read through a link, on every backend: a container's `tar` would
follow a link to a folder anywhere in the image, and a local run's reads follow links
inside the workspace. The rule is one, and named in the run's notes."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.envrun import copy_artifacts
from tests.support.environments import BACKENDS, Backend, started

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]
backends = pytest.mark.parametrize("backend", BACKENDS, indirect=True)


@backends
async def test_a_link_in_an_artifact_path_is_refused_by_name(
    backend: Backend, tmp_path: Path
) -> None:
    async with started(backend, tmp_path) as env:
        await env.write_file("logs/out.txt", b"kept\n")
        await env.write_file("real/inner.txt", b"inner\n")
        done = await env.exec(
            ["sh", "-c", "ln -s /etc etc-link && ln -s real alias && ln -s logs/out.txt f"],
            timeout_s=60,
        )
        assert done.exit_code == 0, done.output
        out = tmp_path / "out"
        folder, notes = await copy_artifacts(
            env, ["logs", "etc-link", "alias/inner.txt", "f"], out, "r"
        )
    assert folder == "artifacts/r"
    assert (out / folder / "logs" / "out.txt").read_text() == "kept\n"
    assert sorted(p.name for p in (out / folder).iterdir()) == ["logs"]
    rule = "is a link, and artifacts are never read through links"
    assert notes == [
        f"artifact etc-link not copied: etc-link {rule} (name the file or folder it points at)",
        f"artifact alias/inner.txt not copied: alias {rule} (name the file or folder it points at)",
        f"artifact f not copied: f {rule} (name the file or folder it points at)",
    ]
