"""The runner's hands on hostile trees (runner/hostfs.py): links never followed out of a
root, only regular files read and never past their limit, any depth removed or walked
without recursion."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner import hostfs
from runner.errors import UnsafeFileError
from runner.hostfs import remove_tree
from tests.support.trees import DEPTH, make_deep


def test_only_regular_files_within_their_limit_are_read(tmp_path: Path) -> None:
    """FIFOs and devices are refused at once (a FIFO nobody writes would block forever),
    and no more than the limit is read, whatever the file's size."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(UnsafeFileError, match="is a FIFO, not a regular file"):
        hostfs.read_inside(tmp_path, fifo, 100)
    with pytest.raises(UnsafeFileError, match="is a FIFO"):
        hostfs.read_regular(fifo, 100)
    with pytest.raises(UnsafeFileError, match="is a character device"):
        hostfs.read_regular(Path("/dev/zero"), 100)
    os.symlink("/dev/zero", tmp_path / "zero")
    with pytest.raises(UnsafeFileError, match="outside"):
        hostfs.read_inside(tmp_path, tmp_path / "zero", 100)
    big = tmp_path / "big"
    with big.open("wb") as f:
        f.truncate(64 << 20)
    assert len(hostfs.read_inside(tmp_path, big, 1000)) == 1000
    # A link in a parent directory that leads out is refused too.
    os.symlink("/etc", tmp_path / "etc")
    with pytest.raises(UnsafeFileError, match="outside"):
        hostfs.read_inside(tmp_path, tmp_path / "etc" / "passwd", 100)


def test_remove_tree_handles_any_depth_links_and_modes(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("k")
    top = tmp_path / "top"
    make_deep(top, DEPTH)
    os.symlink(outside, top / "link")  # removed as a link, its target untouched
    os.mkfifo(top / "d" / "fifo")
    (top / "d" / "d").chmod(0)
    remove_tree(top)
    assert not top.exists() and (outside / "keep").read_text() == "k"


def test_a_link_into_the_git_directory_is_refused_and_a_dangling_one_is_missing(
    tmp_path: Path,
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("[remote] url = https://x:token@h/r")
    os.symlink(".git/config", tmp_path / "AGENTS.md")
    with pytest.raises(UnsafeFileError, match=r"AGENTS.md: leads into \.git/"):
        hostfs.read_inside(tmp_path, tmp_path / "AGENTS.md", 100)
    os.symlink("nowhere", tmp_path / "dangling")
    with pytest.raises(FileNotFoundError, match="a symbolic link that leads nowhere"):
        hostfs.read_inside(tmp_path, tmp_path / "dangling", 100)
    os.symlink("docs/rules.md", tmp_path / "inside")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "rules.md").write_text("rules")
    assert hostfs.read_inside(tmp_path, tmp_path / "inside", 100) == b"rules"


def test_open_parent_refuses_dotdot_the_root_and_a_linked_directory(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    os.symlink("real", tmp_path / "linked")
    dotdot = r"a path with `\.\.` is not allowed"
    with pytest.raises(UnsafeFileError, match=dotdot), hostfs.open_parent(tmp_path, "a/../b"):
        pass
    with pytest.raises(UnsafeFileError, match="names the root"), hostfs.open_parent(tmp_path, "./"):
        pass
    refused = r"linked/x: linked is a symbolic link or not a directory; .* in a report directory"
    with (
        pytest.raises(UnsafeFileError, match=refused),
        hostfs.open_parent(tmp_path, "linked/x", where="a report directory"),
    ):
        pass
    with hostfs.open_parent(tmp_path, "new/dir/f.txt", create=True) as (fd, name):
        assert name == "f.txt"
        assert os.path.samestat(os.fstat(fd), os.stat(tmp_path / "new" / "dir"))


def test_open_regular_refuses_a_link_and_a_directory_by_name(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    os.symlink("d", tmp_path / "l")
    dir_fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(UnsafeFileError, match="shown-l: is a symbolic link"):
            hostfs.open_regular("l", dir_fd, "shown-l")
        with pytest.raises(UnsafeFileError, match="shown-d: is a directory, not a regular file"):
            hostfs.open_regular("d", dir_fd, "shown-d")
    finally:
        os.close(dir_fd)


def test_write_all_and_read_bytes_move_everything_up_to_the_cap(tmp_path: Path) -> None:
    data = os.urandom(3 * hostfs.CHUNK + 17)
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        hostfs.write_all(fd, data)
    finally:
        os.close(fd)
    fd = os.open(tmp_path / "f", os.O_RDONLY)
    try:
        assert hostfs.read_bytes(fd, len(data) + 100) == data
        os.lseek(fd, 0, os.SEEK_SET)
        assert hostfs.read_bytes(fd, hostfs.CHUNK + 1) == data[: hostfs.CHUNK + 1]
    finally:
        os.close(fd)


def test_disk_usage_counts_a_hard_linked_file_once_and_never_follows_links(
    tmp_path: Path,
) -> None:
    big = tmp_path / "outside"
    big.mkdir()
    (big / "data").write_bytes(os.urandom(1 << 20))
    top = tmp_path / "top"
    (top / "sub").mkdir(parents=True)
    (top / "sub" / "f").write_bytes(os.urandom(256 << 10))
    os.link(top / "sub" / "f", top / "hard")
    os.symlink(big, top / "link")
    used = hostfs.disk_usage(top)
    assert 256 << 10 <= used < 512 << 10
    assert hostfs.disk_usage(tmp_path / "missing") == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give files away")
def test_chown_tree_changes_every_entry_but_never_a_links_target(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_text("o")
    top = tmp_path / "top"
    (top / "a" / "b").mkdir(parents=True)
    (top / "a" / "b" / "f").write_text("f")
    os.symlink(outside, top / "a" / "link")
    hostfs.chown_tree(top, 4321, 4322)
    for path in (top, top / "a", top / "a" / "b", top / "a" / "b" / "f", top / "a" / "link"):
        st = os.lstat(path)
        assert (st.st_uid, st.st_gid) == (4321, 4322), path
    assert os.stat(outside).st_uid == os.geteuid()


def test_kind_names_each_file_type(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    os.mkfifo(tmp_path / "p")
    (tmp_path / "l").symlink_to("f")
    assert hostfs.kind(os.lstat(tmp_path / "f").st_mode) == "regular file"
    assert hostfs.kind(os.lstat(tmp_path).st_mode) == "directory"
    assert hostfs.kind(os.lstat(tmp_path / "p").st_mode) == "FIFO"
    assert hostfs.kind(os.lstat(tmp_path / "l").st_mode) == "symbolic link"
    assert hostfs.kind(os.lstat("/dev/null").st_mode) == "character device"
