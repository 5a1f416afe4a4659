"""The Environment contract, the same tests against every backend (real engines, real
images, the real bubblewrap sandbox): commands, files, folders, timeouts, output caps,
and hostile links. What only containers do (a dead one, labels, a command as another
user) is in test_container.py; the orphans of a batch killed with SIGKILL in
test_orphans.py.

Where the backends differ by design, the shared test says what all of them must do and
the difference is tested apart: `local` works on the host, so its file methods stay inside
the workdir (following a link that stays inside, refusing one that leads out), while a
container's are the agent's own and refuse every link in the last place."""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

import anyio
import pytest

from runner.errors import PathRefused, UnsafeFileError
from tests.support.environments import (
    BACKENDS,
    CONTAINER_BACKENDS,
    LOCAL_BACKENDS,
    Backend,
    sh,
    started,
)

# The first test of a fresh machine builds the base image (about 2 min).
pytestmark = [pytest.mark.anyio, pytest.mark.timeout(900)]
backends = pytest.mark.parametrize("backend", BACKENDS, indirect=True)


@backends
async def test_exec_argv_cwd_env_and_exit_codes(backend: Backend, tmp_path: Path) -> None:
    async with started(backend, tmp_path) as env:
        work = env.workdir
        done = await env.exec(["printf", "%s|", "two words", "$HOME"], timeout_s=30)
        assert (done.exit_code, done.output) == (0, b"two words|$HOME|")
        assert (await env.exec(["pwd"], timeout_s=30)).output == f"{work}\n".encode()
        await sh(env, "mkdir -p sub && echo 'echo hi' > plain.sh")
        for cwd in ("sub", f"{work}/sub"):  # relative to the workdir, or absolute
            done = await env.exec(["pwd"], cwd=cwd, timeout_s=30)
            assert done.output == f"{work}/sub\n".encode(), cwd
        assert (await env.exec(["pwd"], cwd="/", timeout_s=30)).output == b"/\n"
        for cwd in ("nowhere", "plain.sh"):
            done = await env.exec(["true"], cwd=cwd, timeout_s=30)
            assert done.exit_code != 0 and f"{work}/{cwd}".encode() in done.output, done
        # TZ: a variable every backend passes on (bubblewrap keeps an allowlist).
        assert await sh(env, 'echo "$TZ"', env={"TZ": "Europe/Paris"}) == "Europe/Paris\n"
        done = await env.exec(["sh", "-c", "echo out; echo err >&2; exit 7"], timeout_s=30)
        assert done.exit_code == 7 and not done.timed_out
        assert sorted(done.output.split()) == [b"err", b"out"]
        assert done.total_lines == 2
        # As a shell says it: 127 nothing by that name, 126 there but not runnable.
        assert (await env.exec(["no-such-command-here"], timeout_s=30)).exit_code == 127
        assert (await env.exec(["./plain.sh"], timeout_s=30)).exit_code == 126
        assert (await env.exec(["sh", "-c", "kill -9 $$"], timeout_s=30)).exit_code == 137
    await env.stop()  # again: nothing to do


@backends
async def test_exec_feeds_stdin(backend: Backend, tmp_path: Path) -> None:
    async with started(backend, tmp_path) as env:
        data = bytes(range(256)) * 1024
        done = await env.exec(["sha256sum"], stdin=data, timeout_s=30)
        assert done.output.split()[0].decode() == hashlib.sha256(data).hexdigest()
        assert (await env.exec(["cat"], timeout_s=30)).output == b""  # no stdin: EOF
        assert (await env.exec(["cat"], stdin=b"", timeout_s=30)).output == b""
        done = await env.exec(["true"], stdin=data * 8, timeout_s=30)  # never read
        assert done.exit_code == 0 and not done.timed_out
        # ... and the command's own children get SIGPIPE as usual (no "Broken pipe").
        assert (await env.exec(["sh", "-c", "yes | head -n 1"], timeout_s=30)).output == b"y\n"


@backends
async def test_files_are_written_read_and_removed(backend: Backend, tmp_path: Path) -> None:
    async with started(backend, tmp_path) as env:
        await env.write_file("deep/er/a.txt", b"one\n")
        assert await env.read_file("deep/er/a.txt", max_bytes=100) == b"one\n"
        await env.write_file(f"{env.workdir}/deep/er/a.txt", b"\x00two")
        assert await env.read_file("deep/er/a.txt", max_bytes=100) == b"\x00two"
        assert await sh(env, "cat deep/er/a.txt") == "\x00two"
        with pytest.raises(UnsafeFileError, match="3 bytes"):
            await env.read_file("deep/er/a.txt", max_bytes=3)
        with pytest.raises(UnsafeFileError, match="deep/er"):
            await env.read_file("deep/er", max_bytes=100)
        with pytest.raises(UnsafeFileError, match="deep/er"):
            await env.write_file("deep/er", b"x")
        # Nothing can be under a regular file: nothing there to read or remove, and no
        # write (its parent cannot be made).
        assert await env.read_file("deep/er/a.txt/x", max_bytes=100) is None
        await env.remove_file("deep/er/a.txt/x")
        with pytest.raises(UnsafeFileError, match="a.txt"):
            await env.write_file("deep/er/a.txt/x", b"x")
        await env.remove_file("deep/er/a.txt")
        assert await env.read_file("deep/er/a.txt", max_bytes=100) is None
        await env.remove_file("deep/er/a.txt")  # already gone: nothing to do
        # An empty directory goes too (an undo takes back the directories a write made);
        # one with something in it stays.
        with pytest.raises(UnsafeFileError, match="deep"):
            await env.remove_file("deep")
        await env.remove_file("deep/er")
        await env.remove_file("deep")
        assert await sh(env, "ls -A") == ""


@backends
async def test_links_out_of_the_workdir_are_never_followed(
    backend: Backend, tmp_path: Path
) -> None:
    async with started(backend, tmp_path) as env:
        outside = await backend.put_outside(env, b"secret\n")
        await sh(env, f"ln -s '{outside}' link && mkfifo fifo")
        await sh(env, f"mkdir -p tree/sub && echo a > tree/a && ln -s '{outside}' tree/sub/out")
        with pytest.raises(UnsafeFileError, match="link"):
            await env.read_file("link", max_bytes=1000)
        with pytest.raises(UnsafeFileError, match="FIFO"):
            await env.read_file("fifo", max_bytes=1000)
        with pytest.raises(UnsafeFileError, match="FIFO"):
            await env.write_file("fifo", b"never blocks")
        try:  # refused (local), or the link itself replaced (containers)
            await env.write_file("link", b"replaced")
        except UnsafeFileError:
            pass
        else:
            assert await env.read_file("link", max_bytes=100) == b"replaced"
        assert await backend.read_outside(env, outside) == b"secret\n"
        dest = tmp_path / "out"
        with pytest.raises(UnsafeFileError, match="link"):
            await env.get_dir("tree", dest, max_bytes=1 << 20)
        assert not (dest / "sub" / "out").exists()
        # Removing a link removes the link, never what it points at.
        await env.remove_file("tree/sub/out")
        await env.remove_file("link")
        assert await sh(env, "ls -A tree/sub; test ! -e link && test ! -L link && echo gone") == (
            "gone\n"
        )
        assert await backend.read_outside(env, outside) == b"secret\n"


@pytest.mark.parametrize("backend", LOCAL_BACKENDS[:1], indirect=True)
async def test_local_follows_links_only_while_they_stay_inside(
    backend: Backend, tmp_path: Path
) -> None:
    """The host's own files are never the agent's: every path, however spelled, resolves
    inside the workdir or is refused; a link that stays inside is followed, as a command
    would follow it."""
    async with started(backend, tmp_path) as env:
        outside = await backend.put_outside(env, b"secret\n")
        out_dir = os.path.dirname(outside)
        await sh(env, f"echo in > real.txt && ln -s real.txt inlink && ln -s '{out_dir}' outdir")
        assert await env.read_file("inlink", max_bytes=100) == b"in\n"
        await env.write_file("inlink", b"through\n")
        assert await sh(env, "cat real.txt; test -L inlink && echo still-a-link") == (
            "through\nstill-a-link\n"
        )
        for path in (outside, "../outside.txt", "outdir/outside.txt"):
            with pytest.raises(PathRefused):
                await env.read_file(path, max_bytes=100)
            with pytest.raises(PathRefused):
                await env.write_file(path, b"x")
        assert await backend.read_outside(env, outside) == b"secret\n"


@pytest.mark.parametrize("backend", CONTAINER_BACKENDS, indirect=True)
async def test_a_containers_files_are_its_own_and_no_link_is_read(
    backend: Backend, tmp_path: Path
) -> None:
    """The whole container is the agent's: an absolute path anywhere in it is reached, and
    a link in the last place is never read, wherever it points; a write replaces it."""
    async with started(backend, tmp_path) as env:
        await sh(env, "echo in > real.txt && ln -s real.txt inlink")
        with pytest.raises(UnsafeFileError, match="link"):
            await env.read_file("inlink", max_bytes=100)
        await env.write_file("inlink", b"replaced\n")
        assert await sh(env, "cat real.txt; test ! -L inlink && cat inlink") == ("in\nreplaced\n")
        await env.write_file("/etc/runner-test.txt", b"anywhere\n")
        assert await env.read_file("/etc/runner-test.txt", max_bytes=100) == b"anywhere\n"
        assert await env.read_file("../etc/runner-test.txt", max_bytes=100) == b"anywhere\n"


@backends
async def test_folders_are_copied_in_and_out(backend: Backend, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "a" / "b").mkdir(parents=True)
    (src / "top.txt").write_text("top\n")
    (src / "a" / "b" / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (src / "a" / "b" / "run.sh").chmod(0o755)
    (src / "empty").mkdir()
    async with started(backend, tmp_path) as env:
        await env.put_dir(src, "copied")
        assert await sh(env, "./copied/a/b/run.sh && cat copied/top.txt") == "ran\ntop\n"
        await sh(env, "echo new > copied/a/new.txt")
        out = tmp_path / "out"
        await env.get_dir("copied", out, max_bytes=1 << 20)
        assert (out / "a" / "new.txt").read_text() == "new\n"
        assert os.access(out / "a" / "b" / "run.sh", os.X_OK)
        assert (out / "empty").is_dir()
        with pytest.raises(UnsafeFileError, match="5 bytes"):
            await env.get_dir("copied", tmp_path / "small", max_bytes=5)
    link_src = tmp_path / "linked"
    link_src.mkdir()
    (link_src / "passwd").symlink_to("/etc/passwd")
    async with started(backend, tmp_path) as env:
        with pytest.raises(UnsafeFileError, match="symbolic link"):
            await env.put_dir(link_src, "linked")


def _host_processes_with(token: str) -> list[str]:
    """Every process of this machine whose command line holds `token`: every backend here
    runs on this kernel, so a process an environment failed to end shows up."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                line = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if token in line:
                found.append(f"{proc.name}: {line}")
    return found


async def _none_left(token: str) -> list[str]:
    """The processes holding `token` after a short grace (a PID namespace ends at once,
    but its last processes are reaped by the kernel a moment later)."""
    for _ in range(50):
        left = _host_processes_with(token)
        if not left:
            return []
        await anyio.sleep(0.1)
    return left


@backends
async def test_timeout_kills_the_whole_tree(backend: Backend, tmp_path: Path) -> None:
    token = f"{secrets.randbelow(10**6) + 10**6}"  # in sleep's seconds: found only here
    script = f"sleep 3{token} & setsid sleep 4{token} & echo started; sleep 5{token}"
    async with started(backend, tmp_path) as env:
        done = await env.exec(["sh", "-c", script], timeout_s=1.0)
        assert done.timed_out and done.exit_code == 124
        assert done.output == b"started\n"
        assert done.duration_s < 10
        assert await _none_left(token) == []
        left = await sh(env, "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '")
        assert token not in left
        # And a command that left a child behind on a clean exit: the child is ended too.
        await sh(env, f"setsid sleep 6{token} >/dev/null 2>&1 &")
        assert await _none_left(token) == []


@backends
async def test_output_is_capped_while_streaming(backend: Backend, tmp_path: Path) -> None:
    async with started(backend, tmp_path) as env:
        done = await env.exec(
            ["sh", "-c", "head -c 5000000 /dev/zero | tr '\\0' a; echo; echo end"],
            timeout_s=60,
            output_cap=1000,
        )
        assert done.exit_code == 0
        assert done.truncated_bytes >= 5_000_000 - 1000
        assert len(done.output) < 1100 and done.output.endswith(b"end\n")
        assert done.total_lines == 2
