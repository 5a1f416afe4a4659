"""sandbox/changes.py: a workdir's diff against its start, through the real environments
of the contract suite (bubblewrap, the host, podman, docker).

The workdir is seeded from a host folder, the agent's edits are made through the
environment (its file methods and commands), and the proof of every patch is the real
`git apply` turning a host copy of the start state into the end state read back out."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from runner.sandbox import changes
from runner.sandbox.changes import Changes, diff, snapshot
from runner.sandbox.environment import Environment
from tests.support.environments import BACKENDS, Backend, started
from tests.support.fixtures import make_git_repo

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(900)]
backends = pytest.mark.parametrize("backend", BACKENDS, indirect=True)

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
Tree = dict[str, tuple[str, bytes]]
"""path -> (git mode, bytes or a link's target), `.git` left out."""


async def sh(env: Environment, script: str) -> str:
    done = await env.exec(["sh", "-c", script], timeout_s=60)
    assert done.exit_code == 0, done.output
    return done.output.decode()


@asynccontextmanager
async def seeded(
    backend: Backend, tmp_path: Path, src: Path, sub: str = ""
) -> AsyncIterator[Environment]:
    """An environment whose work folder (the workdir, or its parent `sub` levels up)
    starts as a copy of `src`: copied on the host before a local one starts, so the
    sandbox's user is handed it, or put into a container."""
    if backend.engine is None:
        shutil.copytree(src, tmp_path / "work", symlinks=True)
    async with started(backend, tmp_path, sub) as env:
        if backend.engine is not None:
            top = env.workdir if not sub else os.path.dirname(env.workdir)
            await env.put_dir(src, top)
        yield env


def _parse(data: bytes) -> Tree:
    out: Tree = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for m in tar:
            name = os.path.normpath(m.name)
            if m.issym():
                out[name] = ("120000", m.linkname.encode())
            elif m.isfile():
                got = tar.extractfile(m)
                assert got is not None
                out[name] = ("100755" if m.mode & 0o111 else "100644", got.read())
    return out


async def env_tree(env: Environment) -> Tree:
    done = await env.exec(
        ["tar", "-C", env.workdir, "--exclude=.git", "-cf", "-", "."], timeout_s=60
    )
    assert done.exit_code == 0 and not done.truncated_bytes
    return _parse(done.output)


def host_tree(root: Path) -> Tree:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(root, ".", filter=lambda m: None if m.name.endswith("/.git") else m)
    return _parse(buf.getvalue())


def apply_to_copy(start: Tree, patch: bytes, dest: Path) -> Tree:
    """Lay `start` out on the host, `git apply` the patch there, and read it back."""
    dest.mkdir()
    for rel, (mode, data) in start.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        if mode == "120000":
            (dest / rel).symlink_to(data.decode())
        else:
            (dest / rel).write_bytes(data)
            (dest / rel).chmod(0o755 if mode == "100755" else 0o644)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    if patch:
        subprocess.run(
            ["git", "apply", "--binary", "-"],
            input=patch,
            cwd=dest,
            check=True,
            capture_output=True,
        )
    return host_tree(dest)


def start_files(root: Path) -> None:
    (root / "README.md").write_text("# sample\n")
    (root / "gone.txt").write_text("bye\n")
    (root / "mode.sh").write_text("echo mode\n")
    (root / "keep.bin").write_bytes(b"\0\1\2" * 100)


def committed_start(src: Path) -> Path:
    """A repository with the start files committed, then an uncommitted change and an
    ignored file (both part of the start state)."""
    make_git_repo(src)
    start_files(src)
    subprocess.run([*GIT, "add", "-A"], cwd=src, check=True)
    subprocess.run([*GIT, "commit", "-qm", "more"], cwd=src, check=True)
    (src / "dirty.txt").write_text("uncommitted at start\n")
    (src / ".gitignore").write_text("*.log\n")
    (src / "build.log").write_text("ignored\n")
    return src


async def edit(env: Environment) -> None:
    """What an agent might do: edit, add (text, binary, executable, a link, odd names),
    delete, drop the final newline, change a mode."""
    await env.write_file("README.md", b"# sample\nmore\n")
    await env.write_file("src/new file.py", b"print('hi')\n")
    await env.write_file("blob.bin", bytes(range(256)) * 40)
    await env.write_file("run.sh", b"#!/bin/sh\necho run")
    await env.write_file("café.txt", b"accent\n")
    await sh(env, "chmod 755 run.sh mode.sh && ln -s README.md link && rm gone.txt")


async def _private_state(env: Environment) -> str:
    return await sh(env, "ls -d /tmp/runner-changes.* 2>/dev/null | sort; true")


async def _repository(env: Environment) -> str:
    """The repository's refs, index and object names, which a diff must not change."""
    return await sh(
        env,
        "git -c safe.directory='*' show-ref; cksum < .git/index; find .git/objects -type f | sort",
    )


@backends
async def test_a_git_workdir_diffs_against_its_start_and_the_repository_is_untouched(
    backend: Backend, tmp_path: Path
) -> None:
    src = committed_start(tmp_path / "src")
    async with seeded(backend, tmp_path, src) as env:
        before, leftovers = await _repository(env), await _private_state(env)
        start_state = await env_tree(env)
        start = await snapshot(env)
        # bubblewrap gives each command its own /tmp, where git's private state would
        # not last until the diff: the tar snapshot stands in.
        assert (start.tree is None) == (backend.name == "local")
        await edit(env)
        got = await diff(env, start)
        end = await env_tree(env)
        assert await _repository(env) == before
        assert await _private_state(env) == leftovers  # its own state removed
    assert got.left_out == ()
    assert b"diff --git a/dirty.txt" not in got.patch and b"build.log" not in got.patch
    assert b"GIT binary patch" in got.patch
    assert apply_to_copy(start_state, got.patch, tmp_path / "copy") == end


@backends
async def test_a_workdir_below_the_top_of_its_repository_diffs_only_itself(
    backend: Backend, tmp_path: Path
) -> None:
    src = make_git_repo(tmp_path / "src", {"app/a.txt": "a\n", "other.txt": "o\n"})
    async with seeded(backend, tmp_path, src, sub="app") as env:
        start = await snapshot(env)
        await env.write_file("a.txt", b"a2\n")
        other = f"{os.path.dirname(env.workdir)}/other.txt"
        if backend.engine is None:  # outside the workspace: the host's to write
            await anyio.Path(other).write_text("outside\n")
        else:
            await env.write_file(other, b"outside\n")
        got = await diff(env, start)
    assert b"diff --git a/a.txt b/a.txt" in got.patch and b"other.txt" not in got.patch


@backends
async def test_a_plain_folder_diffs_through_its_snapshot(backend: Backend, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    start_files(src)
    async with seeded(backend, tmp_path, src) as env:
        start_state = await env_tree(env)
        start = await snapshot(env)
        # No repository: a private one where the image has git, else the tar snapshot.
        assert (start.tree is None) == (backend.name == "local")
        await edit(env)
        got = await diff(env, start)
        end = await env_tree(env)
    assert got.left_out == ()
    assert b"new mode 100755" in got.patch and b"\\ No newline at end of file" in got.patch
    assert b'"b/caf\\303\\251.txt"' in got.patch  # quoted as git quotes it
    assert apply_to_copy(start_state, got.patch, tmp_path / "copy") == end
    assert end["run.sh"][0] == end["mode.sh"][0] == "100755"


@backends
async def test_nothing_changed_is_an_empty_patch(backend: Backend, tmp_path: Path) -> None:
    for kind in ("git", "plain"):
        src = tmp_path / kind / "src"
        src.mkdir(parents=True)
        if kind == "git":
            make_git_repo(src)
        async with seeded(backend, tmp_path / kind, src) as env:
            assert await diff(env, await snapshot(env)) == Changes(b"", ()), kind


@backends
async def test_big_files_are_left_out_and_named(
    backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The caps are module constants; smaller ones here keep the files small.
    monkeypatch.setattr(changes, "PATCH_FILE_MAX_BYTES", 1000)
    monkeypatch.setattr(changes, "SNAPSHOT_MAX_BYTES", 50_000)
    for kind in ("git", "plain"):
        src = tmp_path / kind / "src"
        src.mkdir(parents=True)
        if kind == "git":
            make_git_repo(src)
        async with seeded(backend, tmp_path / kind, src) as env:
            start = await snapshot(env)
            await env.write_file("big.txt", b"x" * 2000)
            await env.write_file("small.txt", b"y\n")
            got = await diff(env, start)
        assert b"small.txt" in got.patch and b"big.txt" not in got.patch, kind
        assert got.left_out == ("big.txt: over 1000 bytes, left out of the patch",), kind
    src = tmp_path / "huge" / "src"
    src.mkdir(parents=True)
    (src / "data").write_bytes(os.urandom(60_000))
    async with seeded(backend, tmp_path / "huge", src) as env:
        start = await snapshot(env)
        got = await diff(env, start)
    if start.tree is None:  # bubblewrap: only the tar snapshot, which has a cap
        (said,) = got.left_out
        assert said.startswith(f"{env.workdir}: over 48.8 KiB and not in a git repository")
    else:
        assert got == Changes(b"", ())


@pytest.mark.parametrize(
    "backend",
    [p for p in BACKENDS if p.values != ("local",)],  # bubblewrap keeps no /tmp between
    indirect=True,  # commands, and a local run diffs on the host, never through changes.py
)
async def test_a_large_plain_workdir_keeps_its_small_change_and_names_its_big_file(
    backend: Backend, tmp_path: Path
) -> None:
    """A host checkout is copied in without `.git`: one 40 MB file there (over the tar
    snapshot's 32 MiB) must not cost the run its one-line change; nor must a 40 MB file
    the agent writes."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "model.bin").write_bytes(os.urandom(40 << 20))
    (src / "main.py").write_text("print('a')\n")
    async with seeded(backend, tmp_path, src) as env:
        start = await snapshot(env)
        assert start.tree is not None
        await env.write_file("main.py", b"print('b')\n")
        await sh(env, "head -c 41943040 /dev/zero > written.bin")
        got = await diff(env, start)
    assert b"-print('a')\n+print('b')" in got.patch, got.patch[:500]
    assert b"model.bin" not in got.patch and b"written.bin" not in got.patch
    assert got.left_out == ("written.bin: over 16.0 MiB, left out of the patch",)
