"""Unsandboxed command execution (`danger-full-access`): the command runs with the
runner's own user, files and network, only in its own process group so a timeout
still kills everything it started."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from runner.sandbox.process import Capture, run_process
from runner.tools import ExecResult

__all__ = ["Capture", "LocalExecutor"]


class LocalExecutor:
    """Runs commands directly on the host. Only for `danger-full-access`."""

    def __init__(self) -> None:
        self.limit_notes: list[str] = []

    async def run(
        self, argv: Sequence[str], *, cwd: Path, timeout_s: float, env: Mapping[str, str]
    ) -> ExecResult:
        return await run_process(argv, cwd=cwd, timeout_s=timeout_s, env=env)
