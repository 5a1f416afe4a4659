"""Whether a process lives, for tests that check a kill reached everything it should."""

from __future__ import annotations

import time
from pathlib import Path


def alive(pid: int) -> bool:
    """Running or sleeping: not gone, not a zombie waiting for its reaper."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


def ends_soon(pid: int, within_s: float = 5.0) -> bool:
    """A SIGKILL takes effect when the process next runs, a moment after kill() returns
    on a busy machine: this waits for that moment, never for the kill itself."""
    deadline = time.monotonic() + within_s
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True
