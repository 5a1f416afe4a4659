"""Runs one full-access command and ends every process it left behind.

A sandboxed command lives in its own PID namespace, so nothing it starts outlives it. A
`danger-full-access` command runs on the host, where `setsid -f` or a double fork leaves
a daemon that the process-group kill misses: it survived its run and read the next run's
MCP server's environment through /proc. So the runner starts each such command under this
small process, which is a child subreaper (prctl PR_SET_CHILD_SUBREAPER): whatever the
command orphans is reparented here instead of to init, and when the command returns (or
the runner asks it to stop, SIGTERM) every descendant is killed and reaped before this
process exits with the command's status.

With `--parent-death PID` first, it also stops (as on SIGTERM) when PID, the process that
started it, dies, even by SIGKILL (prctl PR_SET_PDEATHSIG): a container image build runs
under it, so a batch killed mid-build leaves no `podman build` running on for minutes.

Only this process's descendants are touched, so the runner's own children (MCP servers,
git, the local model engine, bubblewrap) never are. It is run as a file by the runner's
interpreter with `-I -S` and imports only the standard library: it starts in a few
milliseconds, and it never holds the runner's environment (it gets the command's).
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
MAX_ROUNDS = 1000
"""Kill-and-reap rounds at most: a fork bomb killed as it forks still converges, since
each round kills every descendant found."""


class _Stop(Exception):
    pass


def _stop(signum: int, frame: object) -> None:
    raise _Stop


def _descendants(root: int) -> list[int]:
    """Every process below `root`, from the parent links in /proc."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name, in parentheses, may hold spaces and parentheses itself.
        fields = stat[stat.rfind(b")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        return


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def end_all() -> None:
    """Kill every descendant and reap the children until none is left."""
    me = os.getpid()
    for _ in range(MAX_ROUNDS):
        left = _descendants(me)
        if not left:
            break
        for pid in left:
            _kill(pid)
        _reap()
    _reap()


def main(argv: list[str]) -> int:
    parent = None
    if argv[:1] == ["--parent-death"] and len(argv) > 1 and argv[1].isdigit():
        parent, argv = int(argv[1]), argv[2:]
    if not argv:
        print("usage: reaper.py [--parent-death PID] COMMAND [ARG...]", file=sys.stderr)
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    signal.signal(signal.SIGTERM, _stop)
    if parent is not None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # it died before the signal was asked for
            return 128 + signal.SIGTERM
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Held back until the wait below, so a stop between the fork and it still ends all.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        pid = os.fork()
    except OSError as exc:
        print(f"failed to start {argv[0]!r}: {exc.strerror or exc}", file=sys.stderr)
        return 127
    if pid == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        # Python ignores these for itself, and an ignored signal stays ignored across
        # exec: without this, `yes | head` would never see its SIGPIPE.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(2, f"failed to start {argv[0]!r}: {exc.strerror or exc}\n".encode())
            # As a shell says it: 127 nothing by that name, 126 found but not runnable.
            os._exit(127 if exc.errno in (errno.ENOENT, errno.ENOTDIR) else 126)
        os._exit(127)
    status = 0
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        while True:
            done, status = os.waitpid(-1, 0)
            if done == pid:
                break
    except _Stop:
        status = signal.SIGTERM
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        end_all()
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return 128 + status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
