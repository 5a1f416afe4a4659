"""bubblewrap's mount table for one command: pure, from a `Layout` the executor looked up.

Kept apart from launching because the table is the sandbox's filesystem boundary: it is
read, and tested, as one value, without starting anything. Mounts are made in order of
depth so the most specific rule wins:

    /                       an empty tmpfs, read-only once the mounts below are made
    the host's entries      bound read-only, one per top-level entry (links copied as
                            links), except the hidden places (runner/sandbox/hostview.py)
    /dev, /proc, /dev/shm   private (a new /proc shows only the sandbox's processes)
    /tmp, /run              private tmpfs; /run holds host daemons' sockets (Docker's
                            among them), which a network namespace does not cut off
    workspace, roots        bound read-write (`workspace-write`) or read-only
    <root>/.git, .runner    read-only again
    toolchains              read-only inside hidden homes (PATH folders); credential
                            files in them masked
    the skills              read-only at fixed paths under /tmp, copied by the runner
                            (runner/skills.py), so no mount names where they came from
    the object store        read-only at a fixed path under /tmp, with the workspace's
                            `.git/objects/info/alternates` shown pointing there; it is the
                            runner's pack of what the base commit reaches, so no mount
                            names the user's repository and nothing newer or unrelated
                            is in it (see runner/workspace/prepare.py)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from runner.frozen import frozen
from runner.sandbox.policy import Policy

MAX_TMP_BYTES = 1 << 30
"""Size of the private /tmp, which lives in memory."""
MAX_SHM_BYTES = 256 << 20
"""Size of the private /dev/shm (also memory): uncapped it would be half the machine's RAM.
A write past it fails with ENOSPC in that command only."""
HOME = "/tmp/home"
"""HOME inside the sandbox: writable and private, so tools that keep caches work."""
OBJECTS_AT = "/tmp/.runner/objects"


@frozen
class Layout:
    """What the disk holds that the mounts depend on, looked up before each command."""

    objects: tuple[Path, ...] = ()
    """Object stores the workspace's `.git` borrows through alternates."""
    protected: tuple[Path, ...] = ()
    """Existing `.git` / `.runner` in writable roots."""
    masked: tuple[tuple[Path, bool], ...] = ()
    """(path, is a directory) to hide."""
    resolv: Path | None = None
    """/etc/resolv.conf's target when it lies under /run (Ubuntu), kept for the network."""
    shown: tuple[Path, ...] = ()
    """Read-only again inside a hidden place: the PATH directories in a home."""
    mounted: tuple[tuple[Path, Path], ...] = ()
    """(source, where it shows) read-only: the skills' copies (`Policy.mounted`)."""
    host: tuple[Path, ...] = ()
    """The host's entries shown read-only (see `host_view`)."""
    links: tuple[tuple[Path, str], ...] = ()
    """The host's links shown as links: (path, what it says)."""
    folders: tuple[Path, ...] = ()
    """The host's folders rebuilt around a hidden place (see `host_view`)."""


@frozen
class _Mount:
    dest: Path
    rank: int
    """Order among mounts of the same depth: directories, binds, re-protections, masks."""
    args: tuple[str, ...]


PROVIDED = ("dev", "proc", "run", "tmp")
"""Top-level names the sandbox makes itself, never taken from the host."""


def mount_args(
    policy: Policy,
    layout: Layout,
    *,
    alternates_fd: int | None,
    tmp_bytes: int = MAX_TMP_BYTES,
    shm_bytes: int = MAX_SHM_BYTES,
) -> list[str]:
    """bubblewrap's filesystem arguments. Pure: the caller looked at the disk (`layout`);
    `alternates_fd` is a pipe holding the alternates text the workspace's git sees."""
    base = [
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--perms",
        "1777",
        "--size",
        str(shm_bytes),
        "--tmpfs",
        "/dev/shm",
        "--perms",
        "1777",
        "--size",
        str(tmp_bytes),
        "--tmpfs",
        "/tmp",
        "--perms",
        "0777",
        "--dir",
        HOME,
        "--tmpfs",
        "/run",
    ]
    sealed = ["/run"]
    """Empty tmpfs mounts made read-only last, once every mount point inside exists."""
    mounts = _host_mounts(layout)
    writable = policy.writable()
    for root in (policy.workspace, *writable):
        verb = "--bind" if root in writable else "--ro-bind"
        mounts.append(_Mount(root, 1, (verb, str(root), str(root))))
    for path in layout.shown:
        mounts.append(_Mount(path, 1, ("--ro-bind", str(path), str(path))))
    for src, at in layout.mounted:
        mounts.append(_Mount(at, 1, ("--ro-bind", str(src), str(at))))
    for path in layout.protected:
        mounts.append(_Mount(path, 2, ("--ro-bind", str(path), str(path))))
    for path, is_dir in layout.masked:
        if is_dir:
            sealed.append(str(path))
        args = ("--tmpfs", str(path)) if is_dir else ("--ro-bind", "/dev/null", str(path))
        mounts.append(_Mount(path, 3, args))
    for i, store in enumerate(layout.objects):
        mounts.append(
            _Mount(Path(OBJECTS_AT, str(i)), 1, ("--ro-bind", str(store), f"{OBJECTS_AT}/{i}"))
        )
    if alternates_fd is not None:
        target = policy.workspace / ".git" / "objects" / "info" / "alternates"
        mounts.append(
            _Mount(
                target, 4, ("--perms", "0444", "--ro-bind-data", str(alternates_fd), str(target))
            )
        )
    if layout.resolv is not None and policy.network:
        mounts.append(
            _Mount(layout.resolv, 1, ("--ro-bind", str(layout.resolv), str(layout.resolv)))
        )
    mounts += _mount_points(mounts)
    out = base
    seen: set[tuple[str, ...]] = set()
    for m in sorted(mounts, key=lambda m: (len(m.dest.parts), m.rank)):
        if m.args not in seen:
            seen.add(m.args)
            out += m.args
    for dest in (*sealed, "/"):
        out += ["--remount-ro", dest]
    return out


def _mount_points(mounts: Sequence[_Mount]) -> list[_Mount]:
    """Mount points bubblewrap would make on the fly get mode 0700 and root's owner when
    root runs it: made here instead, traversable by the command's user. Every folder
    that is not inside something bound lies on one of the sandbox's own tmpfs mounts."""
    bound = {m.dest for m in mounts if "--tmpfs" not in m.args and "--dir" not in m.args}
    made: set[Path] = set()
    out = []
    for m in mounts:
        for parent in m.dest.parents:
            if len(parent.parts) < 2 or parent in made:
                continue
            made.add(parent)
            if not any(p in bound for p in (parent, *parent.parents)):
                out.append(_Mount(parent, 0, ("--perms", "0755", "--dir", str(parent))))
    return out


def _host_mounts(layout: Layout) -> list[_Mount]:
    """The host's entries, read-only; `-try`, since one may vanish between the look at
    the host and the command."""
    mounts = [_Mount(p, 1, ("--ro-bind-try", str(p), str(p))) for p in layout.host]
    mounts += [_Mount(p, 1, ("--symlink", text, str(p))) for p, text in layout.links]
    mounts += [_Mount(p, 0, ("--perms", "0755", "--dir", str(p))) for p in layout.folders]
    return mounts
