"""The types of conftest's server fixtures and the git repository they start from: tests
import these, never conftest itself."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Protocol, Unpack

from tests.support.loopback import (
    LoopbackServer,
    ProcessServer,
    Script,
    ServerOptions,
    ThreadedServer,
)


class LoopbackFactory(Protocol):
    async def __call__(self, script: Script, **opts: Unpack[ServerOptions]) -> LoopbackServer: ...


class ThreadFactory(Protocol):
    def __call__(self, script: Script, **opts: Unpack[ServerOptions]) -> ThreadedServer: ...


class ProcessFactory(Protocol):
    def __call__(self, script: str = ..., **opts: Unpack[ServerOptions]) -> ProcessServer: ...


def make_git_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    """A real git repository with one commit, for runs that need a base to start from."""
    path.mkdir(parents=True, exist_ok=True)
    for name, text in (files or {"README.md": "# sample\n"}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(path)}
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base"],
    ):
        subprocess.run(["git", *args], cwd=path, check=True, env=env)
    return path


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout
