"""Taking the secrets out of the runner's own environment (`hide_own`), so the commands it
starts cannot read them there. Which variables are secrets is the config pass's
(config/secrets.py)."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
from collections.abc import Sequence

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
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
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
