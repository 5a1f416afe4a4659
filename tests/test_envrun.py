"""A run's container or Pod around its thread: the cap on live environments held and given
back once, a fault recorded once and naming the backend, the tools waiting for the start
and stopped by a fault, and the wind-up's patch (redacted, or applied to the host
workspace). Pods here are never started, so no cluster is needed; a real environment
stands in for the container where one must run commands."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from runner.config import Run
from runner.envrun import Environments, RunEnvironment, _pack, uses_environment
from runner.errors import EnvironmentFault, EnvironmentLost
from runner.redact import Redactor
from runner.sandbox import changes
from runner.sandbox.local import LocalExecutor
from runner.sandbox.localenv import LocalEnvironment
from tests.support.fixtures import make_git_repo
from tests.support.records import a_task

pytestmark = pytest.mark.anyio

POD = ", environment: {backend: kubernetes, image: 'registry.example/x:1', workdir: /work}"


def _pod_run(tmp_path: Path, workdir: bool = True) -> Run:
    return a_task(tmp_path, POD if workdir else POD.replace(", workdir: /work", ""))


def test_only_a_non_local_backend_uses_an_environment(tmp_path: Path) -> None:
    assert not uses_environment(a_task(tmp_path))
    assert uses_environment(_pod_run(tmp_path))


async def test_the_cap_on_live_environments_is_held_and_given_back_once(tmp_path: Path) -> None:
    envs = Environments("b1", max_environments=1, env={})
    t = _pod_run(tmp_path)
    first, second = RunEnvironment(envs, t, tmp_path), RunEnvironment(envs, t, tmp_path)
    await first.prepare(None)
    assert first.fault is None and first.inner is not None and envs.live == 1
    assert (first.info.image, first.info.workdir) == ("registry.example/x:1", "/work")
    async with anyio.create_task_group() as tg:
        tg.start_soon(second.prepare, None)
        await anyio.wait_all_tasks_blocked()
        assert second.inner is None and envs.live == 1  # waiting for the slot
        await first.stop()
    assert second.inner is not None and envs.live == 1
    await first.stop()  # twice: the slot is not given back again
    assert envs.live == 1
    await second.stop()
    assert envs.live == 0 and envs.slots.value == 1


async def test_an_image_without_workdir_and_no_host_work_is_a_fault(tmp_path: Path) -> None:
    envs = Environments("b1", max_environments=1, env={})
    renv = RunEnvironment(envs, _pod_run(tmp_path, workdir=False), tmp_path)
    await renv.prepare(None)
    assert renv.fault == (
        "kubernetes environment failed: registry.example/x:1 names no WORKDIR: set "
        "environment.workdir to where the work is"
    )
    assert renv.inner is None and envs.live == 0


async def test_an_engine_that_is_not_there_is_a_fault_naming_the_backend(tmp_path: Path) -> None:
    (tmp_path / "empty-bin").mkdir()
    envs = Environments("b1", max_environments=1, env={"PATH": str(tmp_path / "empty-bin")})
    renv = RunEnvironment(
        envs, a_task(tmp_path, ", environment: {backend: podman, image: x}"), tmp_path
    )
    await renv.prepare(None)
    assert renv.fault == (
        "podman environment failed: cannot run the container engine 'podman': "
        "No such file or directory"
    )
    assert renv.inner is None and envs.live == 0
    assert await renv.check("true", 5) is None
    assert await renv.finish(None, Redactor()) == [] and await renv.artifacts(Redactor()) == []


async def test_a_workspace_over_the_copy_cap_is_a_fault_not_a_read(tmp_path: Path) -> None:
    """A sparse file: the cap is checked before a byte of it is read."""
    work = make_git_repo(tmp_path / "work")
    with (work / "huge.bin").open("wb") as f:
        f.truncate((1 << 30) + 1)
    renv = RunEnvironment(Environments("b1", 1, env={}), _pod_run(tmp_path), tmp_path)
    await renv.prepare(work)
    assert renv.fault == "kubernetes environment failed: the workspace is over 1024 MiB to copy in"
    assert renv.envs.live == 0


def test_the_copy_in_leaves_out_git_and_fifos_and_keeps_links(tmp_path: Path) -> None:
    work = make_git_repo(tmp_path / "work", {"a.txt": "a\n", "sub/b.txt": "b\n"})
    os.mkfifo(work / "pipe")  # read, it would hang the copy
    (work / "link").symlink_to("/etc/passwd")
    with tarfile.open(fileobj=io.BytesIO(_pack(work))) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert sorted(members) == [".", "./a.txt", "./link", "./sub", "./sub/b.txt"]
    assert members["./link"].issym() and members["./link"].linkname == "/etc/passwd"
    assert {(m.uid, m.gid, m.uname) for m in members.values()} == {(0, 0, "")}


async def test_the_first_fault_is_kept_and_ends_the_thread(tmp_path: Path) -> None:
    renv = RunEnvironment(Environments("b1", 1, env={}), _pod_run(tmp_path), tmp_path)
    with anyio.CancelScope() as scope:
        renv.thread_scope = scope
        renv.failed(EnvironmentLost("the Pod was evicted"))
        renv.failed(EnvironmentFault("a later, lesser fault"))
        await anyio.lowlevel.checkpoint()  # a checkpoint: the cancelled thread stops here
        pytest.fail("the thread was not cancelled")
    assert scope.cancelled_caught
    assert renv.fault == "kubernetes environment lost: the Pod was evicted"


def _in_local(tmp_path: Path, renv: RunEnvironment, work: Path) -> LocalEnvironment:
    """A real environment over a host folder in place of the run's Pod."""
    env = LocalEnvironment(LocalExecutor(), work)
    renv.inner = env
    return env


async def test_tools_wait_for_the_start_and_a_fault_stops_them(tmp_path: Path) -> None:
    work = tmp_path / "inside"
    work.mkdir()
    renv = RunEnvironment(Environments("b1", 1, env={}), _pod_run(tmp_path), tmp_path)
    _in_local(tmp_path, renv, work)
    tool = renv.guarded()
    got: list[bytes] = []

    async def call() -> None:
        got.append((await tool.exec(["sh", "-c", "echo hi"], timeout_s=10)).output)

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await anyio.wait_all_tasks_blocked()
        assert got == []  # not started yet
        renv.ready.set()
    assert got == [b"hi\n"]
    renv.failed(EnvironmentLost("container gone"))
    with pytest.raises(EnvironmentFault, match="^kubernetes environment lost: container gone$"):
        await tool.read_file("a.txt", max_bytes=10)


async def test_the_wind_up_keeps_a_redacted_patch(tmp_path: Path) -> None:
    secret = "sk-live-0123456789abcdef"
    work = make_git_repo(tmp_path / "inside", {"a.txt": "a\n"})
    out = tmp_path / "out"
    t = _pod_run(tmp_path)
    renv = RunEnvironment(Environments("b1", 1, env={}), t, out)
    env = _in_local(tmp_path, renv, work)
    renv.snapshot = await changes.snapshot(env)
    await anyio.Path(work / "a.txt").write_text(f"a\nkey={secret}\n")
    assert await renv.finish(None, Redactor([secret])) == []
    assert renv.info.patch == f"patches/{t.name}.patch"
    patch = await anyio.Path(out / renv.info.patch).read_text()
    assert "+key=[REDACTED]" in patch and secret not in patch


async def test_a_patch_the_host_workspace_cannot_take_is_a_note(tmp_path: Path) -> None:
    work = make_git_repo(tmp_path / "inside", {"a.txt": "a\n"})
    host = make_git_repo(tmp_path / "host", {"a.txt": "something else\n"})
    renv = RunEnvironment(Environments("b1", 1, env={}), _pod_run(tmp_path), tmp_path / "out")
    env = _in_local(tmp_path, renv, work)
    renv.snapshot = await changes.snapshot(env)
    await anyio.Path(work / "a.txt").write_text("a\nb\n")
    (note,) = await renv.finish(host, Redactor())
    assert note.startswith(
        "could not keep the environment's changes: the environment's patch does not apply "
        "to the workspace: "
    )
    assert renv.fault is None and renv.info.patch is None
    assert await anyio.Path(host / "a.txt").read_text() == "something else\n"
