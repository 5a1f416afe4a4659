"""The seam between a run and the place its commands and file edits happen.

A run's tools (shell, apply_patch) and its `check` reach the work only through an
`Environment`: bubblewrap over the host (`local`, the default), a container driven through
the podman or docker CLI, or a Kubernetes Pod. The agent loop, the model client and MCP stay
on the host; only tool calls cross this seam, which is what lets a container's agent phase
run with no network at all.

Paths handed to an environment are POSIX paths as the environment sees them (for `local`
they are the host's own paths). Every call is bounded: `exec` by `timeout_s` and
`output_cap`, file reads by `max_bytes`; a backend gives each of its own calls a timeout and
a bounded retry, and reports a dead environment as `EnvironmentLost`, which makes the run
`error`, never a score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from runner.frozen import frozen

__all__ = ["DEFAULT_OUTPUT_CAP", "EXECUTOR_OUTPUT_CAP", "Environment", "ExecResult", "Executor"]

DEFAULT_OUTPUT_CAP = 10 << 20
"""Bytes of interleaved output one `exec` keeps (Inspect caps each stream at 10 MiB)."""

EXECUTOR_OUTPUT_CAP = 1 << 20
"""What an executor keeps of one command's output unless told otherwise: the shell tool
shows the model 10 kB of it, so 1 MiB of head and tail is plenty."""


@frozen
class ExecResult:
    exit_code: int
    output: bytes
    """stdout and stderr interleaved, already capped."""
    duration_s: float
    timed_out: bool = False
    truncated_bytes: int = 0
    total_lines: int | None = None
    """Lines of the whole output, counted while streaming (the capture may drop some)."""


class Executor(Protocol):
    """Runs one command to completion: bubblewrap (sandbox/bwrap.py) or directly
    (`danger-full-access`, sandbox/local.py)."""

    limit_notes: list[str]
    """What the executor stopped on its own (a workspace past its disk cap), for the
    run's report: the model sees it in the command's output, the user in `error`."""

    async def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        timeout_s: float,
        env: Mapping[str, str],
        stdin: bytes | None = None,
        output_cap: int = EXECUTOR_OUTPUT_CAP,
    ) -> ExecResult: ...


class Environment(Protocol):
    """One run's environment, from `start` to `stop`.

    `stop` is safe to call more than once and after a failed `start`; the caller calls it
    on every exit path (completion, error, timeout, cancellation). Only a container (or
    Pod) can die under the run, which raises `EnvironmentLost`; `local` has nothing to
    lose. tests/sandbox/test_environment.py holds every backend to this."""

    backend: str
    """`local`, `podman`, `docker` or `kubernetes`: recorded in the report."""
    workdir: str
    """Where the work is, as the environment sees it (`/testbed`, or the host workspace)."""
    limit_notes: list[str]

    async def start(self) -> None: ...

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
        """Run `argv` (no shell unless argv asks for one) in `cwd`: the workdir by default,
        a relative one taken from the workdir; one that is not a directory is a non-zero
        exit naming it. `env` is what the command's environment is made from: `local`
        takes it whole (bubblewrap keeps only its allowlist, sandbox/env.py), a container
        adds it to the image's own. Without `stdin` the command reads EOF; one that stops
        reading early just does not get the rest. Exit codes are a shell's: 127 nothing
        by that name, 126 there but not runnable, 128+N killed by signal N. A command
        that outlives `timeout_s` is killed with everything it started and comes back
        with `timed_out=True` and exit 124; so is whatever it left running when it ended.
        Output past `output_cap` is dropped and counted."""
        ...

    async def read_file(self, path: str, *, max_bytes: int) -> bytes | None:
        """The bytes of a regular file, or None when nothing is there (also under a
        regular file). Raises `UnsafeFileError` for a link that leads out of the workdir,
        a FIFO, device or directory, or past `max_bytes`.

        Relative paths, here and in every file method, are taken from the workdir. Where
        the backends differ: `local` works on the host, so its paths must resolve inside
        the workdir (`PathRefused` otherwise) and a link that stays inside is followed,
        as a command would follow it; a container is the agent's own, so any absolute
        path in it is reached and a link in the last place is never read."""
        ...

    async def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a regular file (parents made), never writing through a link
        out of the workdir: `local` refuses one, a container replaces the link itself.
        `UnsafeFileError` for a directory, a FIFO or device, or a path under a file."""
        ...

    async def remove_file(self, path: str) -> None:
        """Remove the entry at `path`: a file, a link (never what it points at), or an
        empty directory, so an undo can take back the directories a write made.
        Nothing there is not an error; a directory with something in it is
        `UnsafeFileError`."""
        ...

    async def put_dir(self, src: Path, dest: str) -> None:
        """Copy a host folder into the environment at `dest`, refusing links."""
        ...

    async def get_dir(self, src: str, dest: Path, *, max_bytes: int) -> None:
        """Copy a folder out to the host, refusing links and anything past `max_bytes`."""
        ...

    async def stop(self) -> None: ...
