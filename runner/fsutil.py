"""Atomic file writes: a reader (or a resumed run) sees the old file or the new one, never
half of one, even after kill -9 or a full disk.

Everything written here is the runner's own: files are mode 0600 and the folders it
makes 0700, so transcripts, reports and patches are for the runner's user only (a root
runner's sandboxed commands run as another user)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO


def private_dirs(path: Path) -> None:
    """`path` and its missing parents, each made mode 0700; folders that exist are left
    as they are (`--out .` must not change the user's folder)."""
    missing = []
    while not os.path.lexists(path) and path != path.parent:
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o700)


def open_private(path: Path) -> IO[str]:
    """`path` opened for writing text from its start, mode 0600 even if it existed."""
    private_dirs(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
        return os.fdopen(fd, "w", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True) -> None:
    atomic_write_chunks(path, [data], durable=durable)


def atomic_write_chunks(path: Path, chunks: Iterable[bytes], *, durable: bool = True) -> None:
    """`path` written atomically from `chunks` as they come, so a copy of any size holds
    one chunk in memory at a time. `durable`: on the disk before this returns (a file
    and its folder synced: a few ms each); without it a crash of the machine may leave
    the file empty, which suits only files their writer checks and writes again."""
    private_dirs(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if not durable:
        return
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def atomic_write_text(path: Path, text: str, *, durable: bool = True) -> None:
    atomic_write_bytes(path, text.encode(), durable=durable)


def sync_written(*paths: Path) -> None:
    """Put on the disk files (and folders) that were written without `durable`, once
    something that depends on them is about to be written durably."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
