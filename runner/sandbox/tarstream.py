"""Folders in and out of an environment as tar streams, checked on the host side.

Copying a folder out of a container is reading an archive someone else wrote (the agent
had a shell in there), so unpacking takes only directories and regular files, under the
destination, within a byte budget: a link, a device, an absolute name or one with `..` is
refused with its name, before anything outside the destination could be touched. Every
directory on the way is opened without following links (runner/hostfs.py).
"""

from __future__ import annotations

import io
import os
import posixpath
import stat
import tarfile
from pathlib import Path

from runner import hostfs
from runner.errors import UnsafeFileError

TAR_OVERHEAD = 1 << 20
"""Bytes a tar stream may hold beyond its files' contents (headers, padding, the end)."""


def pack(src: Path, *, max_bytes: int) -> bytes:
    """`src`'s tree as a tar stream (links kept as links: inside the environment they
    point where they pointed on the host, and cannot reach the host)."""
    if not src.is_dir():
        raise UnsafeFileError(f"{src}: is not a directory")
    buf = io.BytesIO()
    total = 0
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for root, dirs, files in os.walk(src):
            dirs.sort()
            for name in sorted(dirs) + sorted(files):
                path = Path(root, name)
                info = tar.gettarinfo(str(path), arcname=path.relative_to(src).as_posix())
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                if info.isreg():
                    total += info.size
                    if total > max_bytes:
                        raise UnsafeFileError(f"{src}: holds more than {max_bytes} bytes")
                    with path.open("rb") as fh:
                        tar.addfile(info, fh)
                elif info.isdir() or info.issym():
                    tar.addfile(info)
                else:
                    raise UnsafeFileError(f"{path}: is not a regular file, folder or link")
    return buf.getvalue()


def _member_path(member: tarfile.TarInfo, shown: str) -> str | None:
    name = member.name
    if name.startswith("/") or "\\" in name:
        raise UnsafeFileError(f"{shown}: {name!r} is an absolute or odd path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeFileError(f"{shown}: {name!r} climbs out with `..`")
    return posixpath.join(*parts) if parts else None


def unpack(data: bytes, dest: Path, *, max_bytes: int, shown: str) -> int:
    """Extract `data` into `dest` (made if missing); returns the bytes written. `shown`
    names the source in refusals."""
    dest.mkdir(parents=True, exist_ok=True)
    if dest.is_symlink() or not dest.is_dir():
        raise UnsafeFileError(f"{dest}: is not a directory")
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for member in tar:
                rel = _member_path(member, shown)
                if member.isdir():
                    if rel is not None:
                        _mkdir(dest, rel)
                    continue
                if not member.isreg():
                    what = "link" if member.issym() or member.islnk() else "special file"
                    raise UnsafeFileError(
                        f"{shown}: {member.name!r} is a {what}; only files and folders are "
                        "copied out"
                    )
                if rel is None:
                    raise UnsafeFileError(f"{shown}: a file with no name")
                total += member.size
                if total > max_bytes:
                    raise UnsafeFileError(f"{shown}: holds more than {max_bytes} bytes")
                fh = tar.extractfile(member)
                assert fh is not None
                _write(dest, rel, fh.read(), member.mode)
    except tarfile.TarError as exc:
        raise UnsafeFileError(f"{shown}: not a readable tar stream ({exc})") from None
    return total


def _mkdir(dest: Path, rel: str) -> None:
    with hostfs.open_parent(dest, rel, create=True, where="a folder copied out") as (fd, name):
        try:
            os.mkdir(name, 0o755, dir_fd=fd)
        except FileExistsError:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                raise UnsafeFileError(f"{dest / rel}: is not a directory") from None


def _write(dest: Path, rel: str, data: bytes, mode: int) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    with hostfs.open_parent(dest, rel, create=True, where="a folder copied out") as (fd, name):
        try:
            out = os.open(name, flags, 0o755 if mode & 0o111 else 0o644, dir_fd=fd)
        except OSError as exc:
            raise UnsafeFileError(f"{dest / rel}: cannot write ({exc.strerror})") from None
        try:
            hostfs.write_all(out, data)
        finally:
            os.close(out)
