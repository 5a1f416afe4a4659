"""The `local` environment: the work is the host workspace itself, commands run through
the run's executor (bubblewrap, or the host for `danger-full-access`), and files are read
and written by the runner's own process.

The runner's own hands are the hazard here, since it may be root and is never sandboxed:
every file method resolves its path once (a link that stays inside the workdir is
followed, as a command would; one that leads out is refused), then opens every component
relative to the workdir with O_NOFOLLOW, so nothing swapped in meanwhile can redirect it
(runner/hostfs.py). Only regular files are read or written, opened with O_NONBLOCK so a
FIFO or device never blocks; reads are bounded. `.git` in any spelling git folds, and the
protected names the sandbox mounts read-only for commands, are off limits here too.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio
import anyio.to_thread

from runner import gitnames, hostfs
from runner.errors import PathRefused, UnsafeFileError
from runner.sandbox.environment import DEFAULT_OUTPUT_CAP, ExecResult, Executor

__all__ = ["MAX_PUT_BYTES", "LocalEnvironment"]

MAX_PUT_BYTES = 4 << 30
"""Most bytes `put_dir` copies in: a task's own folder (tests, fixtures), not a disk."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class LocalEnvironment:
    """The host workspace `workdir`, its commands run by `executor`.

    `env` is what a command gets when `exec` is given none; `read_only` refuses every
    write and removal (the sandbox's `read-only` mode); `protected` names directories
    (`.git`, `.runner`) the file methods never touch, by their own spelling or through a
    link."""

    backend = "local"

    def __init__(
        self,
        executor: Executor,
        workdir: Path,
        *,
        env: Mapping[str, str] | None = None,
        read_only: bool = False,
        protected: Sequence[str] = (),
    ) -> None:
        self.executor = executor
        self.workdir = os.path.abspath(workdir)
        self.limit_notes: list[str] = executor.limit_notes
        self.env = dict(env or {})
        self.read_only = read_only
        self.protected = tuple(protected)
        self._real = os.path.realpath(self.workdir)

    async def start(self) -> None:
        """Nothing to start: the workspace is already there."""

    async def stop(self) -> None:
        """Nothing to stop: each command's processes end with it (the executors)."""

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
        where = Path(self.workdir if cwd is None else posixpath.join(self.workdir, cwd))
        if not await anyio.Path(where).is_dir():
            said = f"cannot run in {where}: not a directory\n".encode()
            return ExecResult(1, said, 0.0, total_lines=1)
        return await self.executor.run(
            argv,
            cwd=where,
            timeout_s=timeout_s,
            env=self.env if env is None else env,
            stdin=stdin,
            output_cap=output_cap,
        )

    async def read_file(self, path: str, *, max_bytes: int) -> bytes | None:
        return await anyio.to_thread.run_sync(self._read, path, max_bytes)

    async def write_file(self, path: str, data: bytes) -> None:
        await anyio.to_thread.run_sync(self._write, path, data)

    async def remove_file(self, path: str) -> None:
        """Remove the entry at `path` (a link itself, never its target; an empty
        directory too, so an undo can take back the directories a write made). Nothing
        there is not an error."""
        await anyio.to_thread.run_sync(self._remove, path)

    async def put_dir(self, src: Path, dest: str) -> None:
        await anyio.to_thread.run_sync(self._put_dir, src, dest)

    async def get_dir(self, src: str, dest: Path, *, max_bytes: int) -> None:
        await anyio.to_thread.run_sync(self._get_dir, src, dest, max_bytes)

    # ------------------------------------------------------------------ paths

    def _locate(
        self, path: str, *, folder: bool = False, follow_last: bool = True
    ) -> tuple[str, str]:
        """(the path relative to the workdir as spelled, the same with every link
        resolved), or PathRefused. Relative paths are taken from the workdir; the
        workdir itself is a path only for a `folder` method. Without `follow_last` a link
        in the last place is left as it is (only its directory resolved): what `remove`
        takes away is the link, wherever it points."""
        if not path or "\0" in path:
            raise PathRefused(repr(path), "not a valid path")
        full = posixpath.normpath(posixpath.join(self.workdir, path))
        rel = _relative(full, self.workdir)
        if rel is None:
            rel = _relative(full, self._real)
        if rel is None:
            raise PathRefused(path, "it leads outside the workspace root")
        if rel == "." and not folder:
            raise PathRefused(path, "it names the workspace root, not a file")
        if follow_last:
            resolved = os.path.realpath(os.path.join(self._real, rel))
        else:
            head, name = posixpath.split(rel)
            resolved = os.path.join(os.path.realpath(os.path.join(self._real, head)), name)
        real = _relative(resolved, self._real)
        if real is None:
            raise PathRefused(
                path, "it resolves through a symbolic link to a location outside the workspace root"
            )
        parts = [p for p in (*rel.split("/"), *real.split("/")) if p != "."]
        for part in parts:
            if part != ".git" and gitnames.component_is_dotgit(part):
                raise PathRefused(
                    path,
                    f"'{part}' is `.git` in another case or spelling (trailing dots or "
                    "spaces, `git~1`, characters HFS+ ignores), which git refuses to commit",
                )
        names = {p.lower() for p in self.protected}
        hit = next((p for p in parts if p.lower() in names), None)
        if hit is not None:
            raise PathRefused(path, f"{hit} is read-only in the sandbox")
        return rel, real

    def _under_file(self, real: str) -> str | None:
        """The first directory on the way to `real` that is something else (a file)."""
        parts = real.split("/")
        for i in range(1, len(parts)):
            try:
                st = os.lstat(os.path.join(self._real, *parts[:i]))
            except FileNotFoundError:
                return None
            if not stat.S_ISDIR(st.st_mode):
                return parts[i - 1]
        return None

    def _writable(self, path: str, *, folder: bool = False) -> tuple[str, str]:
        if self.read_only:
            raise PathRefused(path, "the sandbox is read-only, so no file can be changed")
        return self._locate(path, folder=folder)

    # ------------------------------------------------------------------ files

    def _read(self, path: str, max_bytes: int) -> bytes | None:
        rel, real = self._locate(path)
        if self._under_file(real) is not None:
            return None
        try:
            with hostfs.open_parent(Path(self._real), real) as (dir_fd, name):
                try:
                    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                except FileNotFoundError:
                    return None
                if stat.S_ISDIR(st.st_mode):
                    raise UnsafeFileError(f"{rel} is a directory, not a file")
                fd = hostfs.open_regular(name, dir_fd, rel)
        except FileNotFoundError:
            return None
        try:
            if os.fstat(fd).st_size > max_bytes:
                raise UnsafeFileError(
                    f"{rel}: is larger than {_size(max_bytes)}, the most read here"
                )
            data = hostfs.read_bytes(fd, max_bytes + 1)
        finally:
            os.close(fd)
        if len(data) > max_bytes:
            raise UnsafeFileError(f"{rel}: is larger than {_size(max_bytes)}, the most read here")
        return data

    def _write(self, path: str, data: bytes) -> None:
        rel, real = self._writable(path)
        above = self._under_file(real)
        if above is not None:
            raise UnsafeFileError(f"cannot write {rel}: {above} is a file, not a directory")
        fd = self._open_for_write(real, rel)
        try:
            hostfs.write_all(fd, data)
        finally:
            os.close(fd)

    def _open_for_write(self, real: str, shown: str, mode: int = 0o644) -> int:
        """An fd of the regular file `real` (made, with its parents, when missing),
        truncated: a link, FIFO, device or directory is refused, never followed or
        blocked on. What is made belongs to whoever owns its directory (hostfs)."""
        with hostfs.open_parent(Path(self._real), real, create=True) as (dir_fd, name):
            with contextlib.suppress(FileNotFoundError):
                st_mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
                if stat.S_ISDIR(st_mode):
                    raise UnsafeFileError(
                        f"cannot write {shown}: a directory with that name exists"
                    )
                if not stat.S_ISREG(st_mode):
                    raise UnsafeFileError(
                        f"{shown}: is a {hostfs.kind(st_mode)}, not a regular file"
                    )
            try:
                fd = os.open(name, _WRITE_FLAGS & ~os.O_CREAT, dir_fd=dir_fd)
            except FileNotFoundError:
                fd = os.open(name, _WRITE_FLAGS | os.O_EXCL, mode, dir_fd=dir_fd)
                hostfs.own_like_parent(name, dir_fd)
            except OSError as exc:
                if exc.errno == errno.EISDIR:
                    raise UnsafeFileError(
                        f"cannot write {shown}: a directory with that name exists"
                    ) from None
                if exc.errno == errno.ELOOP:
                    raise UnsafeFileError(f"{shown}: is a symbolic link; not written") from None
                if exc.errno == errno.ENXIO:  # swapped for a FIFO nobody reads
                    raise UnsafeFileError(f"{shown}: is a FIFO, not a regular file") from None
                raise
        try:
            st_mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(st_mode):
                raise UnsafeFileError(f"{shown}: is a {hostfs.kind(st_mode)}, not a regular file")
            os.set_blocking(fd, True)
            os.ftruncate(fd, 0)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _remove(self, path: str) -> None:
        if self.read_only:
            raise PathRefused(path, "the sandbox is read-only, so no file can be changed")
        # The entry itself goes: its directory resolved, its own name not followed.
        rel, entry = self._locate(path, follow_last=False)
        if self._under_file(entry) is not None:
            return  # under a regular file: nothing can be there
        try:
            with hostfs.open_parent(Path(self._real), entry) as (dir_fd, last):
                st = os.stat(last, dir_fd=dir_fd, follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    os.rmdir(last, dir_fd=dir_fd)
                else:
                    os.unlink(last, dir_fd=dir_fd)
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                raise UnsafeFileError(
                    f"{rel}: is a directory that is not empty; not removed"
                ) from None
            raise

    # ------------------------------------------------------------------ folders

    def _put_dir(self, src: Path, dest: str) -> None:
        """Copy the host folder `src` (links and special files refused, modes kept, at
        most MAX_PUT_BYTES) to `dest`, relative to the workdir."""
        _, top = self._writable(dest, folder=True)
        total = 0
        for rel, kind, mode in _walk(src, str(src)):
            target = rel if top == "." else top if rel == "." else f"{top}/{rel}"
            if kind == "dir":
                _make_dirs(Path(self._real), target)
                continue
            with hostfs.open_parent(src, rel) as (src_dir, name):
                in_fd = hostfs.open_regular(name, src_dir, str(src / rel))
            try:
                out_fd = self._open_for_write(target, target, mode)
                try:
                    total = _copy(in_fd, out_fd, total, MAX_PUT_BYTES, str(src))
                    os.fchmod(out_fd, mode)
                finally:
                    os.close(out_fd)
            finally:
                os.close(in_fd)

    def _get_dir(self, src: str, dest: Path, max_bytes: int) -> None:
        """Copy `src` (inside the workdir) out to the host folder `dest`: links, FIFOs
        and devices refused, at most `max_bytes` in all, nothing followed on either side."""
        _, real = self._locate(src, folder=True)
        root = Path(self._real) / real
        dest.mkdir(parents=True, exist_ok=True)
        total = 0
        for rel, kind, mode in _walk(root, src):
            if kind == "dir":
                _make_dirs(dest, rel)
                continue
            with hostfs.open_parent(root, rel) as (src_dir, name):
                in_fd = hostfs.open_regular(name, src_dir, f"{src}/{rel}")
            try:
                with hostfs.open_parent(dest, rel) as (dest_dir, name):
                    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                    out_fd = os.open(name, flags, mode & 0o777, dir_fd=dest_dir)
                try:
                    total = _copy(in_fd, out_fd, total, max_bytes, src)
                finally:
                    os.close(out_fd)
            finally:
                os.close(in_fd)


def _relative(path: str, root: str) -> str | None:
    """`path` relative to `root` (POSIX, normalised), or None when it is not inside."""
    path = posixpath.normpath(path)
    if path == root:
        return "."
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else None


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n} bytes"


def _walk(top: Path, shown: str) -> list[tuple[str, str, int]]:
    """Every entry below `top` as (relative path, "dir" or "file", mode), parents first;
    iterative (any depth) and without following links: a link, FIFO, socket or device
    anywhere is refused, with its path."""
    st = os.lstat(top)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeFileError(f"{shown}: is a {hostfs.kind(st.st_mode)}, not a directory")
    out: list[tuple[str, str, int]] = [(".", "dir", stat.S_IMODE(st.st_mode))]
    stack = ["."]
    while stack:
        rel = stack.pop()
        fd = os.open(top, _DIR_FLAGS)
        try:
            for part in [p for p in rel.split("/") if p != "."]:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = nxt
            with os.scandir(fd) as it:
                entries = sorted((e.name, e.stat(follow_symlinks=False).st_mode) for e in it)
        finally:
            os.close(fd)
        for name, mode in entries:
            child = name if rel == "." else f"{rel}/{name}"
            if stat.S_ISDIR(mode):
                out.append((child, "dir", stat.S_IMODE(mode)))
                stack.append(child)
            elif stat.S_ISREG(mode):
                out.append((child, "file", stat.S_IMODE(mode)))
            else:
                raise UnsafeFileError(
                    f"{shown}/{child}: is a {hostfs.kind(mode)}; only regular files and "
                    "directories are copied"
                )
    return out


def _copy(in_fd: int, out_fd: int, total: int, cap: int, shown: str) -> int:
    """Copy `in_fd` to `out_fd` in chunks; the running `total` may not pass `cap`."""
    while chunk := os.read(in_fd, hostfs.CHUNK):
        total += len(chunk)
        if total > cap:
            raise UnsafeFileError(f"{shown}: holds more than {_size(cap)}, the most copied")
        hostfs.write_all(out_fd, chunk)
    return total


def _make_dirs(root: Path, rel: str) -> None:
    """`mkdir -p root/rel`, each directory made fd-relative and owned like its parent:
    open_parent makes every directory above the last component, so one is added."""
    if rel != ".":
        with hostfs.open_parent(root, f"{rel}/-", create=True):
            pass
