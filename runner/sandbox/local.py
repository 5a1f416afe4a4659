"""Unsandboxed command execution (`danger-full-access`): the command runs with the
runner's own user, files and network, under a supervisor (runner/sandbox/reaper.py) that
ends every process it started, daemons included, when it returns or times out."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from runner.sandbox.env import keep_login_path
from runner.sandbox.environment import EXECUTOR_OUTPUT_CAP, ExecResult
from runner.sandbox.process import Capture, run_process

__all__ = ["Capture", "LocalExecutor"]

REAPER = Path(__file__).with_name("reaper.py")


class LocalExecutor:
    """Runs commands directly on the host. Only for `danger-full-access`."""

    def __init__(self) -> None:
        self.limit_notes: list[str] = []

    async def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        timeout_s: float,
        env: Mapping[str, str],
        stdin: bytes | None = None,
        output_cap: int = EXECUTOR_OUTPUT_CAP,
    ) -> ExecResult:
        """`env` as given, but a login shell keeps its PATH (`keep_login_path`)."""
        supervised = [sys.executable, "-I", "-S", str(REAPER), *argv]
        return await run_process(
            supervised,
            cwd=cwd,
            timeout_s=timeout_s,
            env=keep_login_path(env),
            supervised=True,
            stdin=stdin,
            output_cap=output_cap,
        )
