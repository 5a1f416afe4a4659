"""Taking the secrets out of the runner's own environment (`hide_own`), so the commands it
starts cannot read them there. Which variables are secrets is the config pass's
(config/secrets.py)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
from collections.abc import Sequence

from runner.errors import ConfigError, Problem

COMMAND_LINE = "(command line)"
"""As config/schema.py names it, without loading the config models."""

PR_SET_DUMPABLE = 4


def hide_own(names: Sequence[str]) -> None:
    """Make the runner's own environment unreadable to the commands it starts.

    Under `danger-full-access` a command runs as the runner's user and can read
    `/proc/<runner>/environ`, which shows the process's *initial* environment block,
    whatever `os.environ` says now. So, after the caller has copied what it needs:

    - the variables are removed from `os.environ` (and libc's `environ`), so no child
      started later (git, MCP servers, commands) inherits them;
    - their `NAME=value` strings in the initial block are overwritten with zero bytes in
      place, so `/proc/<runner>/environ` no longer holds them, even for root;
    - the process is made non-dumpable, so a process of the same (non-root) user may not
      read `/proc/<runner>/environ` or `/proc/<runner>/mem` at all.

    What stays: a root command can still read the runner's memory (`/proc/<runner>/mem`),
    where the provider key lives while requests are made; see README "Reliability".
    """
    hidden = {n.encode() for n in names}
    for name in names:
        os.environ.pop(name, None)
    _zero_initial_block(hidden)
    # The process's own symbols, libc's among them: `find_library("c")` would start
    # `ldconfig -p` and parse its output on every start.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def _zero_initial_block(names: set[bytes]) -> None:
    """Overwrite `NAME=value` of each name in the block `/proc/self/environ` shows (its
    bounds are fields 50 and 51 of `/proc/self/stat`, Linux 3.5 and later)."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])
        if not 0 < start < end:
            return
        block = ctypes.string_at(start, end - start)
        offset = 0
        for entry in block.split(b"\0"):
            if entry.split(b"=", 1)[0] in names:
                ctypes.memset(start + offset, 0, len(entry))
            offset += len(entry) + 1


SECRET_FD_MAX = 64 * 1024
"""Bytes read from `--secret-fd` at most (a pipe's buffer)."""


def read_secret_fd(fd: int) -> dict[str, str]:
    """`--secret-fd`: NAME=VALUE lines from a pipe, kept in this process's memory only.

    Why not the environment: /proc/<pid>/environ shows the environment a process started
    with to every process of the same user, and an unsandboxed agent is one. So the
    GitHub Action hands the key over through a pipe, and the runner never puts it into
    os.environ (which its git children inherit). A problem names the line, never a value."""
    chunks: list[bytes] = []
    try:
        while chunk := os.read(fd, SECRET_FD_MAX):
            chunks.append(chunk)
            if sum(map(len, chunks)) > SECRET_FD_MAX:
                raise _fd_problem(f"more than {SECRET_FD_MAX} bytes")
        os.close(fd)
    except OSError as exc:
        raise _fd_problem(f"cannot read file descriptor {fd}: {exc.strerror}") from None
    try:
        text = b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError:
        raise _fd_problem("is not UTF-8 text") from None
    found: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        name, sep, value = line.partition("=")
        if not line.strip():
            continue
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise _fd_problem(f"line {n} is not NAME=VALUE (NAME: letters, digits, _)")
        found[name] = value
    return found


def _fd_problem(message: str) -> ConfigError:
    return ConfigError([Problem(COMMAND_LINE, None, "--secret-fd", message)])
