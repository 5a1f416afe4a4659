"""Who is on the other end of a loopback connection: the forwarder (`authproxy`) serves
only the git it started, not any process that learned its address.

The address is in git's argv, and under `danger-full-access` another run's command, a
process of the same user, can read that from `/proc/<pid>/cmdline`. The random path alone
does not stop it, so the forwarder also asks the kernel which socket the peer holds
(`/proc/net/tcp`: the client end's inode) and whether a process of git's own tree holds
that socket among its fds. A process of the same user that attaches to git itself (ptrace,
where the system allows it) is beyond this check; README "Secrets" says so.
"""

from __future__ import annotations

import contextlib
import os

_LOOPBACK = ("0100007F", "7F000001")
"""127.0.0.1 as /proc/net/tcp writes it: the address in host byte order, in hex (little-
and big-endian machines)."""


def client_inode(client_port: int, server_port: int, tcp_table: str) -> int | None:
    """The inode of the client end of 127.0.0.1:`client_port` -> 127.0.0.1:`server_port`,
    from the text of /proc/net/tcp; None if there is no such socket."""
    local = {f"{a}:{client_port:04X}" for a in _LOOPBACK}
    remote = {f"{a}:{server_port:04X}" for a in _LOOPBACK}
    for line in tcp_table.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 9 and fields[1] in local and fields[2] in remote:
            return int(fields[9]) or None
    return None


def _parents() -> dict[int, int]:
    """Every visible process and its parent (fields of /proc/<pid>/stat after the name)."""
    found: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with (
                contextlib.suppress(OSError, IndexError, ValueError),
                open(f"/proc/{entry}/stat", "rb") as f,
            ):
                found[int(entry)] = int(f.read().rsplit(b")", 1)[1].split()[1])
    return found


def _tree(root: int) -> list[int]:
    """`root` and its descendants (git re-executes itself: git push starts git-remote-http,
    which makes the connection)."""
    parents = _parents()
    tree = [root]
    grew = True
    while grew:
        more = [pid for pid, ppid in parents.items() if ppid in tree and pid not in tree]
        tree += more
        grew = bool(more)
    return tree


def _holds(pid: int, link: str) -> bool:
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == link:
                    return True
    return False


def served_by_tree(client_port: int, server_port: int, root_pid: int) -> bool:
    """Whether the client end of this loopback connection is held by `root_pid` or one of
    its descendants. Anything the kernel does not confirm (no /proc, no such socket) is no."""
    try:
        with open("/proc/net/tcp") as f:
            inode = client_inode(client_port, server_port, f.read())
    except OSError:
        return False
    if inode is None:
        return False
    link = f"socket:[{inode}]"
    return any(_holds(pid, link) for pid in _tree(root_pid))
