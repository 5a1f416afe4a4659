"""sandbox/changes.py: a workdir's diff against its start, through an Environment.

The environment here is tests/support/direnv.py (real subprocesses over a temp folder);
the proof of every patch is the real `git apply` putting the start state into the end
state. Switch to LocalEnvironment and the container backends once they exist."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from runner.sandbox import changes
from runner.sandbox.changes import Changes, diff, snapshot
from tests.support.direnv import DirEnvironment
from tests.support.fixtures import make_git_repo

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]


def _tree(root: Path) -> dict[str, bytes | str]:
    """Every file's bytes and every link's target under root, .git left out."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files + [d for d in dirs if Path(dirpath, d).is_symlink()]:
            p = Path(dirpath, name)
            rel = str(p.relative_to(root))
            out[rel] = os.readlink(p) if p.is_symlink() else p.read_bytes()
    return out


def _edit(work: Path) -> None:
    """What an agent might do: edit, add (text, binary, executable, a link, odd names),
    delete, drop the final newline, change a mode."""
    (work / "README.md").write_text("# sample\nmore\n")
    (work / "src").mkdir(exist_ok=True)
    (work / "src" / "new file.py").write_text("print('hi')\n")
    (work / "blob.bin").write_bytes(bytes(range(256)) * 40)
    (work / "run.sh").write_text("#!/bin/sh\necho run")
    (work / "run.sh").chmod(0o755)
    (work / "link").symlink_to("README.md")
    (work / "café.txt").write_text("accent\n")
    (work / "gone.txt").unlink()
    (work / "mode.sh").chmod(0o755)


def _start(work: Path) -> None:
    (work / "gone.txt").write_text("bye\n")
    (work / "mode.sh").write_text("echo mode\n")
    (work / "keep.bin").write_bytes(b"\0\1\2" * 100)


def _round_trip(
    tmp_path: Path, work: Path, make_copy: Callable[[Path], None]
) -> tuple[Changes, Path]:
    env = DirEnvironment(work)

    async def go() -> Changes:
        start = await snapshot(env)
        _edit(work)
        return await diff(env, start)

    got = anyio.run(go)
    copy = tmp_path / "copy"
    make_copy(copy)
    if got.patch:
        subprocess.run(
            ["git", "apply", "--binary", "-"],
            input=got.patch,
            cwd=copy,
            check=True,
            capture_output=True,
        )
    return got, copy


def test_a_git_workdir_diffs_against_its_start_and_the_repository_is_untouched(
    tmp_path: Path,
) -> None:
    work = make_git_repo(tmp_path / "work")
    _start(work)
    subprocess.run([*GIT, "add", "-A"], cwd=work, check=True)
    subprocess.run([*GIT, "commit", "-qm", "more"], cwd=work, check=True)
    (work / "dirty.txt").write_text("uncommitted at start\n")  # part of the start state
    (work / ".gitignore").write_text("*.log\n")
    before = {
        "refs": subprocess.run(["git", "show-ref"], cwd=work, capture_output=True).stdout,
        "index": (work / ".git" / "index").read_bytes(),
        "objects": sorted(p.name for p in (work / ".git" / "objects").rglob("*")),
    }
    start_state = _tree(work)
    leftovers = set(Path("/tmp").glob("runner-changes.*"))

    def copy(dest: Path) -> None:
        subprocess.run(["git", "clone", "-q", str(work), str(dest)], check=True)
        for name in ("dirty.txt", ".gitignore"):
            (dest / name).write_bytes(start_state[name])  # type: ignore[arg-type]

    (work / "build.log").write_text("ignored\n")
    got, applied = _round_trip(tmp_path, work, copy)
    assert got.left_out == ()
    assert b"diff --git a/dirty.txt" not in got.patch and b"build.log" not in got.patch
    assert b"GIT binary patch" in got.patch
    end = {k: v for k, v in _tree(work).items() if k != "build.log"}
    assert _tree(applied) == end
    assert (
        subprocess.run(["git", "show-ref"], cwd=work, capture_output=True).stdout
        == (before["refs"])
    )
    assert (work / ".git" / "index").read_bytes() == before["index"]
    assert sorted(p.name for p in (work / ".git" / "objects").rglob("*")) == before["objects"]
    assert set(Path("/tmp").glob("runner-changes.*")) == leftovers  # its own state removed


def test_a_workdir_below_the_top_of_its_repository_diffs_only_itself(tmp_path: Path) -> None:
    top = make_git_repo(tmp_path / "top", {"app/a.txt": "a\n", "other.txt": "o\n"})
    env = DirEnvironment(top / "app")

    async def go() -> Changes:
        start = await snapshot(env)
        (top / "app" / "a.txt").write_text("a2\n")
        (top / "other.txt").write_text("outside\n")
        return await diff(env, start)

    got = anyio.run(go)
    assert b"diff --git a/a.txt b/a.txt" in got.patch and b"other.txt" not in got.patch


def test_a_plain_folder_diffs_through_its_snapshot(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "README.md").write_text("# sample\n")
    _start(work)
    start_state = _tree(work)

    def copy(dest: Path) -> None:
        dest.mkdir()
        for rel, data in start_state.items():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes(data)  # type: ignore[arg-type]
        (dest / "mode.sh").chmod((work / "mode.sh").stat().st_mode & ~0o111 | 0o644)
        subprocess.run(["git", "init", "-q"], cwd=dest, check=True)  # git apply wants none

    got, applied = _round_trip(tmp_path, work, copy)
    assert got.left_out == ()
    assert b"new mode 100755" in got.patch and b"\\ No newline at end of file" in got.patch
    assert b'"b/caf\\303\\251.txt"' in got.patch  # quoted as git quotes it
    assert _tree(applied) == _tree(work)
    assert os.access(applied / "run.sh", os.X_OK) and os.access(applied / "mode.sh", os.X_OK)


def test_nothing_changed_is_an_empty_patch(tmp_path: Path) -> None:
    for work in (make_git_repo(tmp_path / "git"), tmp_path / "plain"):
        work.mkdir(exist_ok=True)
        env = DirEnvironment(work)

        async def go(env: DirEnvironment = env) -> Changes:
            return await diff(env, await snapshot(env))

        assert anyio.run(go) == Changes(b"", ())


def test_big_files_are_left_out_and_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The caps are module constants; smaller ones here keep the files small.
    monkeypatch.setattr(changes, "PATCH_FILE_MAX_BYTES", 1000)
    monkeypatch.setattr(changes, "SNAPSHOT_MAX_BYTES", 50_000)
    for work in (make_git_repo(tmp_path / "git"), tmp_path / "plain"):
        work.mkdir(exist_ok=True)
        env = DirEnvironment(work)

        async def go(env: DirEnvironment = env, work: Path = work) -> Changes:
            start = await snapshot(env)
            (work / "big.txt").write_text("x" * 2000)
            (work / "small.txt").write_text("y\n")
            return await diff(env, start)

        got = anyio.run(go)
        assert b"small.txt" in got.patch and b"big.txt" not in got.patch, work
        assert got.left_out == ("big.txt: over 1000 bytes, left out of the patch",), work
    huge = tmp_path / "huge"
    huge.mkdir()
    (huge / "data").write_bytes(os.urandom(60_000))
    env = DirEnvironment(huge)

    async def go_huge() -> Changes:
        return await diff(env, await snapshot(env))

    (said,) = anyio.run(go_huge).left_out
    assert said.startswith(f"{huge}: over 48.8 KiB and not in a git repository")
