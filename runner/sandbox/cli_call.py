"""One bounded run of a command-line client (the container engine's, kubectl's).

Both clients hang now and then, so each attempt has a time limit; on it the process is
killed and the caller decides whether to try again. Output is kept only up to a cap, as
a chatty or hostile command must not fill the runner's memory.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from typing import Protocol

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream

from runner.errors import EnvironmentFault


class Sink(Protocol):
    def add(self, chunk: bytes) -> None: ...


class Bounded:
    """Keeps the first `cap` bytes whole and counts the rest: for output that is parsed
    (JSON, a tar stream), where a head and tail with a gap would be worse than a refusal."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.over = 0

    def add(self, chunk: bytes) -> None:
        room = max(self.cap - len(self.data), 0)
        self.data += chunk[:room]
        self.over += len(chunk) - min(room, len(chunk))


async def run_once(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    stdin: bytes | None,
    stdout: Sink,
    stderr: Sink,
    limit: float,
    kill_group: bool,
    what: str,
    grace_s: float | None = None,
) -> int | None:
    """The exit code, or None when the command outlived `limit` and was killed (its whole
    process group with `kill_group`: a client may run helpers of its own). With `grace_s`
    it is first asked to stop (SIGTERM) and given that long: a supervisor that ends what
    the command started (runner/sandbox/reaper.py). stdin None: /dev/null. Raises
    EnvironmentFault naming `what` when it cannot be started."""
    try:
        proc = await anyio.open_process(
            argv,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            start_new_session=True,
        )
    except OSError as exc:
        raise EnvironmentFault(f"cannot run {what}: {exc.strerror or exc}") from None
    try:
        with anyio.move_on_after(limit):
            async with anyio.create_task_group() as tg:
                if stdin is not None:
                    tg.start_soon(_feed, proc.stdin, stdin)
                tg.start_soon(_drain, proc.stdout, stdout)
                tg.start_soon(_drain, proc.stderr, stderr)
                await proc.wait()
            return proc.returncode
        return None
    finally:
        if proc.returncode is None and grace_s is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(grace_s):
                with contextlib.suppress(ProcessLookupError):
                    proc.terminate()
                await proc.wait()
        if proc.returncode is None:
            if kill_group:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
        with anyio.CancelScope(shield=True):
            await proc.wait()
            await proc.aclose()


async def _feed(stream: ByteSendStream | None, data: bytes) -> None:
    assert stream is not None
    try:
        for at in range(0, len(data), 1 << 16):
            await stream.send(data[at : at + (1 << 16)])
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    finally:
        await stream.aclose()


async def _drain(stream: ByteReceiveStream | None, into: Sink) -> None:
    assert stream is not None
    try:
        async for chunk in stream:
            into.add(chunk)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
        pass
