"""The `local` environment (runner/sandbox/localenv.py): commands through the real
bubblewrap sandbox (or the host, for danger-full-access) with stdin, cwd, env, timeout and
output cap honoured, and the runner's own file methods refusing what a hostile workspace
plants (links out, FIFOs, `.git`, sizes)."""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import anyio
import pytest

from runner.errors import PathRefused, UnsafeFileError
from runner.sandbox import make_environment, make_policy
from runner.sandbox.env import child_env
from runner.sandbox.localenv import LocalEnvironment
from runner.vocabulary import SandboxMode

T = TypeVar("T")


def run(fn: Callable[[], Awaitable[T]]) -> T:
    return anyio.run(fn)


def local(tmp_path: Path, mode: SandboxMode = "workspace-write") -> LocalEnvironment:
    """A LocalEnvironment over `tmp_path/work`, as a run makes it (its parent hidden)."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    policy = make_policy(mode, workspace=work, hidden=[tmp_path])
    env = make_environment(policy, env=child_env(os.environ))
    assert isinstance(env, LocalEnvironment)
    return env


MODES = pytest.mark.parametrize("mode", ["workspace-write", "danger-full-access"])


@MODES
def test_exec_feeds_stdin_and_closes_it(tmp_path: Path, mode: SandboxMode) -> None:
    env = local(tmp_path, mode)
    res = run(lambda: env.exec(["cat"], stdin=b"one\ntwo\n", timeout_s=20))
    assert (res.exit_code, res.output) == (0, b"one\ntwo\n")
    big = b"x" * (3 << 20)  # far past a pipe's buffer: fed while the output is read
    res = run(lambda: env.exec(["wc", "-c"], stdin=big, timeout_s=20))
    assert res.output.strip() == str(len(big)).encode()
    # A command that never reads its stdin neither blocks nor fails.
    res = run(lambda: env.exec(["true"], stdin=big, timeout_s=20))
    assert res.exit_code == 0 and res.duration_s < 10
    # No stdin given: the command reads an empty one at once.
    res = run(lambda: env.exec(["cat"], timeout_s=20))
    assert (res.exit_code, res.output) == (0, b"")


@MODES
def test_exec_cwd_and_env(tmp_path: Path, mode: SandboxMode) -> None:
    env = local(tmp_path, mode)
    (tmp_path / "work" / "sub").mkdir()
    res = run(lambda: env.exec(["pwd"], timeout_s=20))
    assert res.output.decode().strip() == env.workdir
    res = run(lambda: env.exec(["pwd"], cwd="sub", timeout_s=20))
    assert res.output.decode().strip() == f"{env.workdir}/sub"
    res = run(lambda: env.exec(["pwd"], cwd=f"{env.workdir}/sub", timeout_s=20))
    assert res.output.decode().strip() == f"{env.workdir}/sub"
    res = run(lambda: env.exec(["pwd"], cwd="missing", timeout_s=20))
    assert res.exit_code != 0 and b"not a directory" in res.output
    # TZ: one of the few variables bubblewrap passes on (runner/sandbox/env.py).
    script = ["sh", "-c", 'echo "[$TZ]"']
    given = {"TZ": "Test/Zone", "PATH": "/usr/bin:/bin"}
    assert run(lambda: env.exec(script, env=given, timeout_s=20)).output == b"[Test/Zone]\n"
    env.env = {**env.env, "TZ": "Default/Zone"}
    res = run(lambda: env.exec(script, timeout_s=20))  # the environment's own
    assert res.output == b"[Default/Zone]\n"


@MODES
def test_exec_timeout_kills_the_command(tmp_path: Path, mode: SandboxMode) -> None:
    env = local(tmp_path, mode)
    t0 = time.monotonic()
    res = run(lambda: env.exec(["sh", "-c", "echo started; sleep 30"], timeout_s=1))
    assert res.timed_out and res.exit_code == 124 and b"started" in res.output
    assert time.monotonic() - t0 < 15


@MODES
def test_exec_output_cap(tmp_path: Path, mode: SandboxMode) -> None:
    env = local(tmp_path, mode)
    script = ["sh", "-c", "head -c 200000 /dev/zero | tr '\\0' x; echo END"]
    res = run(lambda: env.exec(script, timeout_s=20, output_cap=1000))
    assert res.exit_code == 0
    assert res.output.startswith(b"x" * 500) and res.output.endswith(b"END\n")
    assert res.truncated_bytes == 200004 - 1000
    assert len(res.output) < 1100


def test_read_only_environment_refuses_every_change(tmp_path: Path) -> None:
    env = local(tmp_path, "read-only")
    (tmp_path / "work" / "a.txt").write_text("a\n")
    assert run(lambda: env.read_file("a.txt", max_bytes=10)) == b"a\n"
    with pytest.raises(PathRefused, match="read-only"):
        run(lambda: env.write_file("a.txt", b"b\n"))
    with pytest.raises(PathRefused, match="read-only"):
        run(lambda: env.remove_file("a.txt"))
    res = run(lambda: env.exec(["sh", "-c", "echo x > b.txt"], timeout_s=20))
    assert res.exit_code != 0
    assert (tmp_path / "work" / "a.txt").read_text() == "a\n"
    assert not (tmp_path / "work" / "b.txt").exists()


def test_files_round_trip_relative_and_absolute(tmp_path: Path) -> None:
    env = local(tmp_path)
    run(lambda: env.write_file("d/e/f.txt", b"one\n"))
    assert (tmp_path / "work" / "d" / "e" / "f.txt").read_bytes() == b"one\n"
    assert run(lambda: env.read_file(f"{env.workdir}/d/e/f.txt", max_bytes=100)) == b"one\n"
    run(lambda: env.write_file("d/e/f.txt", b"2\n"))  # replaced in place
    assert run(lambda: env.read_file("d/e/f.txt", max_bytes=100)) == b"2\n"
    assert run(lambda: env.read_file("nothing.txt", max_bytes=100)) is None
    assert run(lambda: env.read_file("d/e/f.txt/under", max_bytes=100)) is None
    run(lambda: env.remove_file("d/e/f.txt"))
    run(lambda: env.remove_file("d/e/f.txt"))  # nothing there: not an error
    run(lambda: env.remove_file("d/e"))  # an empty directory
    assert sorted(os.listdir(tmp_path / "work" / "d")) == []
    # What the runner writes, a command may change (the sandbox's user owns it).
    run(lambda: env.write_file("g/h.txt", b"h\n"))
    res = run(lambda: env.exec(["sh", "-c", "echo more >> g/h.txt && rm -r g"], timeout_s=20))
    assert res.exit_code == 0, res.output


def test_links_inside_are_followed_and_links_out_refused(tmp_path: Path) -> None:
    env = local(tmp_path)
    work = tmp_path / "work"
    secret = tmp_path / "secret.txt"
    secret.write_text("secret\n")
    (work / "real").mkdir()
    (work / "real" / "f.txt").write_text("f\n")
    (work / "alias").symlink_to("real")
    (work / "out.txt").symlink_to(secret)
    (work / "outdir").symlink_to(tmp_path)
    (work / "dangling").symlink_to(tmp_path / "not-yet")
    assert run(lambda: env.read_file("alias/f.txt", max_bytes=10)) == b"f\n"
    for path in ("out.txt", "outdir/secret.txt", "dangling", "../secret.txt", "/etc/hostname"):
        with pytest.raises(PathRefused, match="outside the workspace root"):
            run(lambda p=path: env.read_file(p, max_bytes=100))  # type: ignore[misc]
        with pytest.raises(PathRefused):
            run(lambda p=path: env.write_file(p, b"pwned\n"))  # type: ignore[misc]
    assert secret.read_text() == "secret\n" and not (tmp_path / "not-yet").exists()
    run(lambda: env.remove_file("alias"))  # the link goes, not what it names
    assert not (work / "alias").exists() and (work / "real" / "f.txt").exists()


def test_fifos_directories_and_sizes_are_refused_without_blocking(tmp_path: Path) -> None:
    env = local(tmp_path)
    work = tmp_path / "work"
    os.mkfifo(work / "fifo")
    (work / "dir").mkdir()
    (work / "big").write_bytes(b"x" * 5000)
    t0 = time.monotonic()
    with pytest.raises(UnsafeFileError, match="FIFO"):
        run(lambda: env.read_file("fifo", max_bytes=100))
    with pytest.raises(UnsafeFileError, match="FIFO"):
        run(lambda: env.write_file("fifo", b"x"))
    assert time.monotonic() - t0 < 5
    with pytest.raises(UnsafeFileError, match="directory"):
        run(lambda: env.read_file("dir", max_bytes=100))
    with pytest.raises(UnsafeFileError, match="directory"):
        run(lambda: env.write_file("dir", b"x"))
    with pytest.raises(UnsafeFileError, match="larger than 4999 bytes"):
        run(lambda: env.read_file("big", max_bytes=4999))
    assert run(lambda: env.read_file("big", max_bytes=5000)) == b"x" * 5000


def test_git_and_protected_names_are_off_limits(tmp_path: Path) -> None:
    env = local(tmp_path)
    work = tmp_path / "work"
    (work / ".git").mkdir()
    (work / ".git" / "config").write_text("[core]\n")
    (work / "g").symlink_to(".git")
    for path, why in [
        (".git/config", ".git is read-only"),
        ("g/config", ".git is read-only"),
        (".runner/x", ".runner is read-only"),
        (".GIT/hooks/pre-commit", "in another case or spelling"),
        ("sub/git~1/x", "in another case or spelling"),
    ]:
        with pytest.raises(PathRefused, match=why):
            run(lambda p=path: env.write_file(p, b"x"))  # type: ignore[misc]
    assert (work / ".git" / "config").read_text() == "[core]\n"
    assert sorted(os.listdir(work / ".git")) == ["config"]
    # Unsandboxed, `.git` is the agent's as everything else is (but never its aliases).
    free = local(tmp_path, "danger-full-access")
    run(lambda: free.write_file(".git/info", b"x\n"))
    with pytest.raises(PathRefused, match="another case"):
        run(lambda: free.write_file(".Git/info", b"x\n"))


def test_put_dir_and_get_dir(tmp_path: Path) -> None:
    env = local(tmp_path)
    src = tmp_path / "src"
    (src / "tests" / "deep").mkdir(parents=True)
    (src / "tests" / "test.sh").write_text("#!/bin/sh\necho ok\n")
    (src / "tests" / "test.sh").chmod(0o755)
    (src / "tests" / "deep" / "data.bin").write_bytes(bytes(range(256)))
    run(lambda: env.put_dir(src, "in"))
    res = run(lambda: env.exec(["sh", "-c", "in/tests/test.sh"], timeout_s=20))
    assert (res.exit_code, res.output) == (0, b"ok\n")
    out = tmp_path / "out"
    run(lambda: env.get_dir("in", out, max_bytes=10_000))
    assert (out / "tests" / "test.sh").read_text() == "#!/bin/sh\necho ok\n"
    assert (out / "tests" / "test.sh").stat().st_mode & 0o777 == 0o755
    assert (out / "tests" / "deep" / "data.bin").read_bytes() == bytes(range(256))
    with pytest.raises(UnsafeFileError, match="more than 100 bytes"):
        run(lambda: env.get_dir("in", tmp_path / "small", max_bytes=100))


def test_folders_with_links_or_fifos_are_refused(tmp_path: Path) -> None:
    env = local(tmp_path)
    work = tmp_path / "work"
    (tmp_path / "secret.txt").write_text("secret\n")
    (work / "art").mkdir()
    (work / "art" / "leak").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(UnsafeFileError, match="leak: is a symbolic link"):
        run(lambda: env.get_dir("art", tmp_path / "out", max_bytes=10_000))
    assert not (tmp_path / "out" / "leak").exists()
    (work / "art" / "leak").unlink()
    os.mkfifo(work / "art" / "pipe")
    with pytest.raises(UnsafeFileError, match="pipe: is a FIFO"):
        run(lambda: env.get_dir("art", tmp_path / "out2", max_bytes=10_000))
    (work / "plantlink").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(PathRefused):
        run(lambda: env.get_dir("plantlink", tmp_path / "out3", max_bytes=10_000))
    src = tmp_path / "src"
    src.mkdir()
    (src / "link").symlink_to("/etc/hostname")
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        run(lambda: env.put_dir(src, "in"))


def test_start_and_stop_are_idempotent(tmp_path: Path) -> None:
    env = local(tmp_path)

    async def go() -> None:
        await env.stop()  # before start: as after a failed start
        await env.start()
        await env.start()
        res = await env.exec(["true"], timeout_s=20)
        assert res.exit_code == 0
        await env.stop()
        await env.stop()

    run(go)
    assert env.backend == "local" and env.limit_notes == []
