"""The runner's own hands on hostile trees: files in a workspace or repository that an
agent (or the author of a pull request) controls.

Everything here works relative to a directory handle and never follows a symbolic link
out of it (`O_NOFOLLOW` on every component), opens only regular files, opens them with
`O_NONBLOCK` so a FIFO or device can never block the caller, reads in bounded chunks, and
walks trees iteratively so no depth can exhaust the stack.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from runner import gitnames
from runner.errors import UnsafeFileError

CHUNK = 1 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _parts(rel: str | os.PathLike[str]) -> list[str]:
    parts = [p for p in os.fspath(rel).split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise UnsafeFileError(f"{os.fspath(rel)}: a path with `..` is not allowed here")
    return parts


@contextlib.contextmanager
def open_parent(
    root: Path, rel: str, *, create: bool = False, where: str = "a workspace"
) -> Iterator[tuple[int, str]]:
    """`(dir_fd, last component)` for `root/rel`, every directory on the way opened with
    O_NOFOLLOW: a symlinked directory anywhere on the path is refused, not followed.
    `create` makes missing directories on the way; `where` names the kind of tree in the
    refusal ("a report directory"), so the message fits the command that read it."""
    parts = _parts(rel)
    if not parts:
        raise UnsafeFileError(f"{root}: names the root itself, not a file in it")
    fd = os.open(root, _DIR_FLAGS)
    try:
        for i, name in enumerate(parts[:-1]):
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=fd)
                    own_like_parent(name, fd)
            try:
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    at = "/".join(parts[: i + 1])
                    raise UnsafeFileError(
                        f"{rel}: {at} is a symbolic link or not a directory; the runner "
                        f"does not follow links in {where}"
                    ) from None
                raise
            os.close(fd)
            fd = nxt
        yield fd, parts[-1]
    finally:
        os.close(fd)


def own_like_parent(name: str, dir_fd: int) -> None:
    """Give `name`, just made in `dir_fd`, the owner and group of `dir_fd`.

    A root runner hands the workspace to the sandbox user, whose commands must be able
    to change and delete what the runner's own hands (apply_patch) add to it, as if
    they had made it themselves. Not root: everything made is the runner's, as is the
    workspace, and nothing changes."""
    if os.geteuid() != 0:
        return
    parent = os.fstat(dir_fd)
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if (st.st_uid, st.st_gid) != (parent.st_uid, parent.st_gid):
        os.chown(name, parent.st_uid, parent.st_gid, dir_fd=dir_fd, follow_symlinks=False)


def open_regular(name: str, dir_fd: int, shown: str) -> int:
    """An fd for the regular file `name` in `dir_fd`; refuses links, FIFOs, devices,
    sockets and directories without ever blocking on them."""
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFileError(
                f"{shown}: is a symbolic link; the runner reads only regular files here"
            ) from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise UnsafeFileError(
            f"{shown}: is a {kind(mode)}, not a regular file; the runner "
            "reads only regular files here"
        )
    os.set_blocking(fd, True)
    return fd


def kind(mode: int) -> str:
    for test, word in (
        (stat.S_ISREG, "regular file"),
        (stat.S_ISDIR, "directory"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISLNK, "symbolic link"),
    ):
        if test(mode):
            return word
    return "special file"


def read_bytes(fd: int, max_bytes: int) -> bytes:
    """Up to `max_bytes` from `fd`, read in chunks (a file growing meanwhile stops at the cap)."""
    out = bytearray()
    while len(out) < max_bytes:
        chunk = os.read(fd, min(CHUNK, max_bytes - len(out)))
        if not chunk:
            break
        out += chunk
    return bytes(out)


def write_all(fd: int, data: bytes) -> None:
    """All of `data` to `fd`: one `os.write` may take only part of it."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def read_inside(root: Path, path: Path, max_bytes: int) -> bytes:
    """The first `max_bytes` of `path`, a regular file that must lie inside `root`.

    A symbolic link is followed only while it stays inside `root` (a committed
    `AGENTS.md -> docs/AGENTS.md` works; `-> /proc/self/environ` is refused); the file
    reached is then opened component by component with O_NOFOLLOW, so nothing swapped
    in between can lead out either.
    """
    real_root = os.path.realpath(root)
    shown = os.path.relpath(path, root)
    try:
        # strict: a link that leads nowhere (dangling, or a loop) is a missing file
        real = os.path.realpath(path, strict=True)
    except OSError as exc:
        if not os.path.islink(path):
            raise
        raise FileNotFoundError(
            errno.ENOENT,
            f"{path}: a symbolic link that leads nowhere ({exc.strerror or exc}); ignored",
        ) from None
    if os.path.commonpath([real_root, real]) != real_root:
        target = os.readlink(path) if os.path.islink(path) else real
        raise UnsafeFileError(
            f"{shown}: is a symbolic link to {target}, outside the "
            "repository; the runner reads only files inside it"
        )
    rel = os.path.relpath(real, real_root)
    hit = gitnames.path_has_dotgit(rel)
    if hit is not None:
        raise UnsafeFileError(
            f"{shown}: leads into {hit}/ ({rel}); the runner never "
            "reads a repository's git directory as a file"
        )
    with open_parent(Path(real_root), rel) as (dir_fd, name):
        fd = open_regular(name, dir_fd, str(path))
    try:
        return read_bytes(fd, max_bytes)
    finally:
        os.close(fd)


def read_regular(path: Path, max_bytes: int) -> bytes:
    """A file the user named (task file, instructions, schema, skill): links are the
    user's own and followed, but a FIFO or device is refused instead of blocking, and
    no more than `max_bytes` is read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UnsafeFileError(f"{path}: is a {kind(mode)}, not a regular file")
        os.set_blocking(fd, True)
        return read_bytes(fd, max_bytes)
    finally:
        os.close(fd)


def remove_tree(path: Path) -> None:
    """Delete `path` and everything below it, whatever its depth, links and permissions.

    Iterative, with one directory open at a time (a tree deeper than the fd limit is
    fine), fd-relative and never following a link: a link is removed, not its target.
    Directories the agent made unreadable or unwritable are opened up first.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)
        return
    top = os.open(path.parent, _DIR_FLAGS)
    try:
        _clear(top, path.name)
        os.rmdir(path.name, dir_fd=top)
    finally:
        os.close(top)


def _clear(parent_fd: int, name: str) -> None:
    names: list[str] = []
    with contextlib.suppress(OSError):
        os.chmod(name, 0o700, dir_fd=parent_fd)
    cur = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    try:
        while True:
            sub = None
            with os.scandir(cur) as it:
                for entry in it:
                    if entry.is_dir(follow_symlinks=False):
                        sub = entry.name
                        break
                    os.unlink(entry.name, dir_fd=cur)
            if sub is not None:
                with contextlib.suppress(OSError):
                    os.chmod(sub, 0o700, dir_fd=cur)
                nxt = os.open(sub, _DIR_FLAGS, dir_fd=cur)
                os.close(cur)
                cur = nxt
                names.append(sub)
                continue
            if not names:
                return
            up = os.open("..", _DIR_FLAGS, dir_fd=cur)
            os.close(cur)
            cur = up
            os.rmdir(names.pop(), dir_fd=cur)
    finally:
        os.close(cur)


def disk_usage(root: Path) -> int:
    """Bytes of disk the tree below `root` takes (allocated blocks, each hard-linked file
    once), walked iteratively without following links; entries that vanish are skipped."""
    total = 0
    seen: set[tuple[int, int]] = set()
    stack = [os.fspath(root)]
    while stack:
        top = stack.pop()
        try:
            with os.scandir(top) as it:
                for e in it:
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                    elif st.st_nlink > 1:
                        if (st.st_dev, st.st_ino) in seen:
                            continue
                        seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512
        except OSError:
            continue
    return total


def chown_tree(top: Path, uid: int, gid: int) -> None:
    """`chown -R --no-dereference`, iteratively with one directory open at a time, so a
    committed tree of any depth cannot exhaust the stack or the fd limit."""
    os.chown(top, uid, gid, follow_symlinks=False)
    if not stat.S_ISDIR(os.lstat(top).st_mode):
        return
    # Each level remembers the entries still to visit, so the walk resumes after `..`.
    cur = os.open(top, _DIR_FLAGS)
    pending: list[list[str]] = [_entries(cur, uid, gid)]
    try:
        while pending:
            if not pending[-1]:
                pending.pop()
                if pending:
                    up = os.open("..", _DIR_FLAGS, dir_fd=cur)
                    os.close(cur)
                    cur = up
                continue
            name = pending[-1].pop()
            try:
                nxt = os.open(name, _DIR_FLAGS, dir_fd=cur)
            except OSError:
                continue
            os.close(cur)
            cur = nxt
            pending.append(_entries(cur, uid, gid))
    finally:
        os.close(cur)


def _entries(dir_fd: int, uid: int, gid: int) -> list[str]:
    """Chown every entry of `dir_fd`; return its subdirectories."""
    subdirs = []
    with os.scandir(dir_fd) as it:
        for e in it:
            os.chown(e.name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)
            if e.is_dir(follow_symlinks=False):
                subdirs.append(e.name)
    return subdirs
