"""Unpacking a tar stream from an environment: only files and folders, under the
destination, within the byte budget; anything else refused by name before it is written."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from runner.errors import UnsafeFileError
from runner.sandbox import tarstream


def archive(*members: tuple[str, bytes | str | None, bytes]) -> bytes:
    """(name, type, content): type None is a regular file, else a tarfile type byte."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            if kind is None:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                assert isinstance(kind, bytes)
                info.type = kind
                info.linkname = data.decode()
                tar.addfile(info)
    return buf.getvalue()


def test_files_and_folders_round_trip(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "a" / "b").mkdir(parents=True)
    (src / "a" / "b" / "f.txt").write_bytes(b"x" * 10)
    (src / "top.sh").write_text("#!/bin/sh\n")
    (src / "top.sh").chmod(0o755)
    data = tarstream.pack(src, max_bytes=1000)
    out = tmp_path / "out"
    assert tarstream.unpack(data, out, max_bytes=1000, shown="t") == 20
    assert (out / "a" / "b" / "f.txt").read_bytes() == b"x" * 10
    assert os.access(out / "top.sh", os.X_OK)
    with pytest.raises(UnsafeFileError, match="more than 5 bytes"):
        tarstream.pack(src, max_bytes=5)


@pytest.mark.parametrize(
    ("member", "message"),
    [
        (("/etc/evil", None, b"x"), "absolute"),
        (("../evil", None, b"x"), "climbs out"),
        (("a/../../evil", None, b"x"), "climbs out"),
        (("link", tarfile.SYMTYPE, b"/etc/passwd"), "'link' is a link"),
        (("hard", tarfile.LNKTYPE, b"a.txt"), "'hard' is a link"),
        (("dev", tarfile.CHRTYPE, b""), "special file"),
        (("fifo", tarfile.FIFOTYPE, b""), "special file"),
    ],
)
def test_hostile_members_are_refused_and_nothing_lands_outside(
    tmp_path: Path, member: tuple[str, bytes | None, bytes], message: str
) -> None:
    data = archive(("a.txt", None, b"fine"), member)
    with pytest.raises(UnsafeFileError, match=message):
        tarstream.unpack(data, tmp_path / "out", max_bytes=100, shown="pod x")
    assert not (tmp_path / "evil").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_link_already_in_the_destination_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "sub").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        tarstream.unpack(archive(("sub/f", None, b"x")), out, max_bytes=100, shown="t")
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_the_byte_budget_counts_every_file(tmp_path: Path) -> None:
    data = archive(("a", None, b"x" * 60), ("b", None, b"y" * 60))
    with pytest.raises(UnsafeFileError, match="more than 100 bytes"):
        tarstream.unpack(data, tmp_path / "out", max_bytes=100, shown="t")
    with pytest.raises(UnsafeFileError, match="not a readable tar"):
        tarstream.unpack(b"garbage" * 100, tmp_path / "out2", max_bytes=100, shown="t")
