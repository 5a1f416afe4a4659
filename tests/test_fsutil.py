"""Atomic, private writes (runner/fsutil.py): a reader sees the old file or the new one,
never half; what the runner writes is its user's only; folders that exist keep their mode."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.fsutil import atomic_write_chunks, atomic_write_text, open_private, private_dirs


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_private_dirs_makes_missing_folders_0700_and_leaves_existing_ones(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    private_dirs(tmp_path / "a" / "b")
    assert mode(tmp_path / "a") == mode(tmp_path / "a" / "b") == 0o700
    assert mode(tmp_path) == 0o755
    private_dirs(tmp_path / "a" / "b")  # again: nothing to do, no error


def test_a_written_file_is_0600_even_when_it_was_open_to_all(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text("old")
    path.chmod(0o644)
    atomic_write_text(path, "névé")
    assert path.read_bytes() == "névé".encode() and mode(path) == 0o600
    other = tmp_path / "log.txt"
    other.write_text("a much longer old text")
    other.chmod(0o666)
    with open_private(other) as f:
        f.write("new")
    assert other.read_text() == "new" and mode(other) == 0o600


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "out" / "big.bin"
    atomic_write_chunks(path, [b"old"])

    def chunks() -> Iterator[bytes]:
        yield b"new part"
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        atomic_write_chunks(path, chunks())
    assert path.read_bytes() == b"old"
    assert os.listdir(path.parent) == ["big.bin"]


def test_a_link_at_the_path_is_replaced_never_written_through(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text("keep")
    os.symlink(target, tmp_path / "atomic")
    atomic_write_text(tmp_path / "atomic", "mine")
    assert not os.path.islink(tmp_path / "atomic") and target.read_text() == "keep"
    os.symlink(target, tmp_path / "opened")
    with pytest.raises(OSError, match="Too many levels of symbolic links"):
        open_private(tmp_path / "opened")
    assert target.read_text() == "keep"
