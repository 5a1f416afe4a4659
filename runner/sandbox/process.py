"""Running one child process to completion, shared by every executor.

Each command gets its own session (process group) so a timeout kills everything it
started, and its output is captured head+tail under a byte cap while it streams, so a
command printing gigabytes never holds more than the cap in memory.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

import anyio
from anyio.abc import Process

from runner.sandbox.environment import EXECUTOR_OUTPUT_CAP, ExecResult

CAPTURE_CAP_BYTES = EXECUTOR_OUTPUT_CAP
EOF_GRACE_S = 0.2
"""After the command exits, how long to wait for its pipe to close before killing what it
left behind (a backgrounded child holding stdout would otherwise block us until timeout)."""


class Capture:
    """Keeps the first and last `cap/2` bytes of a stream and counts what fell between."""

    def __init__(self, cap: int = CAPTURE_CAP_BYTES) -> None:
        self.half = cap // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0
        self.newlines = 0
        self.last = b"\n"

    def add(self, chunk: bytes) -> None:
        if chunk:
            self.newlines += chunk.count(b"\n")
            self.last = chunk[-1:]
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail += chunk
        excess = len(self.tail) - self.half
        if excess > 0:
            del self.tail[:excess]
            self.dropped += excess

    def value(self) -> bytes:
        if self.dropped:
            marker = f"\n[... {self.dropped} bytes dropped ...]\n".encode()
            return bytes(self.head) + marker + bytes(self.tail)
        return bytes(self.head + self.tail)


def _kill_group(proc: Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


STOP_GRACE_S = 5.0
"""How long a command's supervisor (runner/sandbox/reaper.py) has, once asked to stop, to
kill and reap what the command started, before its process group is killed."""

STOPPED_EXIT = 125
"""Exit code of a command `watch` stopped (a resource cap reached)."""


async def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout_s: float,
    env: Mapping[str, str],
    pass_fds: Sequence[int] = (),
    watch: Callable[[], Awaitable[str]] | None = None,
    supervised: bool = False,
    stdin: bytes | None = None,
    output_cap: int = CAPTURE_CAP_BYTES,
) -> ExecResult:
    """Run `argv` in a new session; on timeout or cancellation kill its process group.

    (A root runner's commands change user inside the sandbox, through `setpriv`.) `watch`
    runs alongside: when it returns (a reason), the command is killed like on a timeout
    and ends with exit `STOPPED_EXIT` and the reason in its output. `stdin` is fed to the
    command and then closed (without it the command reads an empty stdin); `output_cap`
    bounds the captured output.
    """
    start = time.monotonic()
    capture = Capture(output_cap)
    try:
        proc = await anyio.open_process(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=pass_fds,
        )
    except OSError as exc:
        msg = f"failed to start {argv[0]!r}: {exc.strerror or exc}\n".encode()
        return ExecResult(127, msg, time.monotonic() - start)
    timed_out = False
    stopped: list[str] = []
    try:
        with anyio.move_on_after(timeout_s) as scope:
            eof = anyio.Event()
            async with anyio.create_task_group() as tg:
                tg.start_soon(_pump, proc, capture, eof)
                if stdin is not None:
                    tg.start_soon(_feed, proc, stdin)
                if watch is not None:
                    tg.start_soon(_watch, watch, stopped, scope)
                await proc.wait()
                with anyio.move_on_after(EOF_GRACE_S):
                    await eof.wait()
                tg.cancel_scope.cancel()
        timed_out = scope.cancelled_caught and not stopped
    finally:
        if supervised and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_GRACE_S):
                await proc.wait()
        _kill_group(proc)
        with anyio.CancelScope(shield=True):
            await proc.wait()
            await proc.aclose()
    duration = time.monotonic() - start
    code = proc.returncode if proc.returncode is not None else -1
    if stopped:
        code = STOPPED_EXIT
        capture.add(f"\n[stopped: {stopped[0]}]\n".encode())
    elif timed_out:
        code = 124
    elif code < 0:
        code = 128 - code
    lines = capture.newlines + (0 if capture.last == b"\n" else 1)
    return ExecResult(
        code,
        capture.value(),
        duration,
        timed_out=timed_out,
        truncated_bytes=capture.dropped,
        total_lines=lines,
    )


async def _feed(proc: Process, data: bytes) -> None:
    """Write `data` to the command's stdin and close it; a command that exits or closes
    its stdin early just does not get the rest."""
    assert proc.stdin is not None
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        for at in range(0, len(data), 1 << 16):
            await proc.stdin.send(data[at : at + (1 << 16)])
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        await proc.stdin.aclose()


async def _pump(proc: Process, capture: Capture, eof: anyio.Event) -> None:
    assert proc.stdout is not None
    try:
        async for chunk in proc.stdout:
            capture.add(chunk)
    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass
    eof.set()


async def _watch(
    watch: Callable[[], Awaitable[str]], stopped: list[str], scope: anyio.CancelScope
) -> None:
    stopped.append(await watch())
    scope.cancel()
