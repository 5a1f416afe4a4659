"""A test fixture, not a backend: an `Environment` over a plain folder of this machine,
its commands real subprocesses and its files plain file I/O, with no sandbox at all.

It lets code written against the Environment protocol (sandbox/changes.py) be tested
through real programs before the real local backend is wired in; switch such tests to
`LocalEnvironment` (and the contract suite's backends) once that exists.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path

import anyio

from runner.errors import UnsafeFileError
from runner.sandbox.environment import DEFAULT_OUTPUT_CAP, ExecResult


class DirEnvironment:
    """workdir is a host folder; paths are host paths."""

    backend = "dir"

    def __init__(self, workdir: Path) -> None:
        self.workdir = str(workdir)
        self.limit_notes: list[str] = []

    async def start(self) -> None:
        await anyio.to_thread.run_sync(partial(os.makedirs, self.workdir, exist_ok=True))

    async def stop(self) -> None:
        return None

    async def exec(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        timeout_s: float,
        output_cap: int = DEFAULT_OUTPUT_CAP,
    ) -> ExecResult:
        base = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
        t0 = time.monotonic()
        proc = await anyio.open_process(
            list(argv),
            cwd=cwd or self.workdir,
            env={**base, **(env or {})},
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        kept, dropped, timed_out = bytearray(), 0, False
        assert proc.stdout is not None
        with anyio.move_on_after(timeout_s) as scope:
            if stdin is not None and proc.stdin is not None:
                await proc.stdin.send(stdin)
                await proc.stdin.aclose()
            async for chunk in proc.stdout:
                room = output_cap - len(kept)
                kept += chunk[: max(room, 0)]
                dropped += max(len(chunk) - max(room, 0), 0)
            await proc.wait()
        if scope.cancelled_caught:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
        code = 124 if timed_out else (proc.returncode or 0)
        return ExecResult(
            exit_code=code,
            output=bytes(kept),
            duration_s=time.monotonic() - t0,
            timed_out=timed_out,
            truncated_bytes=dropped,
        )

    async def read_file(self, path: str, *, max_bytes: int) -> bytes | None:
        return await anyio.to_thread.run_sync(_read, Path(path), max_bytes)

    async def write_file(self, path: str, data: bytes) -> None:
        await anyio.to_thread.run_sync(_write, Path(path), data)

    async def remove_file(self, path: str) -> None:
        await anyio.to_thread.run_sync(partial(Path(path).unlink, missing_ok=True))

    async def put_dir(self, src: Path, dest: str) -> None:
        copy = partial(shutil.copytree, src, dest, symlinks=True, dirs_exist_ok=True)
        await anyio.to_thread.run_sync(copy)

    async def get_dir(self, src: str, dest: Path, *, max_bytes: int) -> None:
        await anyio.to_thread.run_sync(_get_dir, Path(src), dest, max_bytes)


def _read(p: Path, max_bytes: int) -> bytes | None:
    if not os.path.lexists(p):
        return None
    if p.is_symlink() or not p.is_file():
        raise UnsafeFileError(f"{p} is not a regular file")
    data = p.read_bytes()
    if len(data) > max_bytes:
        raise UnsafeFileError(f"{p} is over {max_bytes} bytes")
    return data


def _write(p: Path, data: bytes) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.is_symlink():
        raise UnsafeFileError(f"{p} is a link")
    p.write_bytes(data)


def _get_dir(src: Path, dest: Path, max_bytes: int) -> None:
    total = 0
    for root, _, files in os.walk(src):
        for name in files:
            f = Path(root, name)
            if f.is_symlink():
                raise UnsafeFileError(f"{f} is a link")
            total += f.stat().st_size
    if total > max_bytes:
        raise UnsafeFileError(f"{src} is over {max_bytes} bytes")
    shutil.copytree(src, dest, dirs_exist_ok=True)
