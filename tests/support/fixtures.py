"""The types of conftest's server fixtures and the git repository they start from: tests
import these, never conftest itself."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Protocol, Unpack

from bench.gitrepo import make_git_repo as make_git_repo  # the one way, shared with bench/
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


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout
