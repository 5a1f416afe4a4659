"""Which containers are the runner's and which batch lives (runner/sandbox/orphans.py):
the lock a live batch holds and the images it lists there, read back by other
processes, and the orphans of a batch killed with SIGKILL removed by the next (real
engines: `slow`), never a container without the runner's labels."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from runner.errors import EnvironmentFault
from runner.sandbox.container import ContainerEnvironment
from runner.sandbox.engine import Engine
from runner.sandbox.orphans import (
    batch_alive,
    images_in_use,
    labels,
    live_batch,
    reap_orphans,
    remove_args,
    runner_containers,
)
from tests.support.environments import CONTAINER_BACKENDS, Backend, base_image, started

containers = pytest.mark.parametrize("backend", CONTAINER_BACKENDS, indirect=True)


@pytest.fixture
def batches(tmp_path: Path) -> Path:
    folder = tmp_path / "batches"
    folder.mkdir(mode=0o700)
    return folder


def test_a_batch_lives_while_its_context_does(batches: Path) -> None:
    assert not batch_alive("b1", batches)
    with live_batch("b1", batches):
        assert batch_alive("b1", batches)
        assert not batch_alive("b2", batches)
    assert not batch_alive("b1", batches)


def test_a_lock_held_by_a_process_killed_with_sigkill_is_free(batches: Path) -> None:
    """The kernel drops a killed holder's lock: nothing needs to clean up after it."""
    holder = subprocess.Popen(
        [
            "sh",
            "-c",
            'exec 9>>"$1"; flock -x 9; echo held; exec sleep 300',
            "sh",
            batches / "b1.lock",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        assert batch_alive("b1", batches)
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    assert not batch_alive("b1", batches)


def test_the_images_a_live_batch_uses_are_read_back_only_while_it_lives(batches: Path) -> None:
    with live_batch("b1", batches) as live:
        live.uses(["localhost/a:1", "", "two\nlines", "localhost/a:1"])
        live.uses(["sha256:beef"])
        assert images_in_use(batches) == {"localhost/a:1", "sha256:beef"}
        assert (batches / "b1.lock").read_text() == "localhost/a:1\nsha256:beef\n"
    assert images_in_use(batches) == set()
    with live_batch("b1", batches):  # the same id again: what it used before is gone
        assert images_in_use(batches) == set()


def test_a_hostile_batch_id_names_a_lock_inside_the_folder(batches: Path) -> None:
    for batch_id in ("../escape", ".hidden", "x" * 65, "a/b", ""):
        with live_batch(batch_id, batches):
            assert batch_alive(batch_id, batches)
            (lock,) = batches.iterdir()
            assert lock.name.endswith(".lock") and len(lock.name) == 37, batch_id
        lock.unlink()
    assert sorted(p.name for p in batches.parent.iterdir()) == ["batches"]


def test_a_folder_that_is_not_the_runners_own_is_refused_or_read_as_alive(
    batches: Path, tmp_path: Path
) -> None:
    batches.chmod(0o755)
    with (
        pytest.raises(EnvironmentFault, match=r"batches: not a private folder"),
        live_batch("b1", batches),
    ):
        pass
    assert batch_alive("b1", batches)  # cannot tell: its containers are kept
    assert images_in_use(batches) == set()
    link = tmp_path / "link"
    link.symlink_to(batches)
    batches.chmod(0o700)
    with pytest.raises(EnvironmentFault, match=r"link: cannot open"), live_batch("b1", link):
        pass


def test_a_fifo_or_a_link_among_the_locks_is_no_batch(batches: Path, tmp_path: Path) -> None:
    os.mkfifo(batches / "fifo.lock")
    (tmp_path / "elsewhere").write_text("localhost/planted\n")
    (batches / "link.lock").symlink_to(tmp_path / "elsewhere")
    with live_batch("b1", batches) as live:
        live.uses(["localhost/real"])
        assert images_in_use(batches) == {"localhost/real"}


def test_labels_name_the_owner_uid_host_batch_and_run_and_rm_fits_the_engine() -> None:
    got = labels("b1", "r1")
    assert got["io.runner.owner"] == "runner"
    assert got["io.runner.uid"] == str(os.geteuid())
    assert got["io.runner.host"] == os.uname().nodename
    assert (got["io.runner.batch"], got["io.runner.run"]) == ("b1", "r1")
    assert remove_args(Engine("podman"), ["c1"]) == ["rm", "-f", "-t", "0", "c1"]
    assert remove_args(Engine("/usr/local/bin/docker"), ["c1", "c2"]) == ["rm", "-f", "c1", "c2"]


_CHILD = textwrap.dedent(
    """
    import sys, anyio
    from runner.sandbox.container import ContainerEnvironment
    from runner.sandbox.engine import Engine
    from runner.sandbox.orphans import live_batch

    async def main():
        env = ContainerEnvironment(engine=Engine(sys.argv[1]), image=sys.argv[2],
                                   workdir="/work", batch_id=sys.argv[3], run_name="doomed")
        await env.start()
        print(env.name, flush=True)
        await anyio.sleep(600)

    with live_batch(sys.argv[3]):
        anyio.run(main)
    """
)


@containers
@pytest.mark.anyio
@pytest.mark.timeout(900)  # the first container test of a machine builds its image
async def test_orphans_of_a_killed_batch_are_reaped(backend: Backend, tmp_path: Path) -> None:
    """Containers only: `local` leaves nothing behind a SIGKILL of the runner (each
    command's processes end with their sandbox or supervisor)."""
    engine = backend.engine
    assert engine is not None
    image = await base_image(engine)
    doomed = f"test-doomed-{uuid.uuid4().hex[:8]}"
    child = await anyio.open_process(
        [sys.executable, "-c", _CHILD, engine.executable, image, doomed],
        stderr=None,
        env={**os.environ, **engine.extra_env},
    )
    try:
        assert child.stdout is not None
        with anyio.fail_after(120):
            line = await BufferedByteReceiveStream(child.stdout).receive_until(b"\n", 1000)
        name = line.decode().strip()
    finally:
        child.send_signal(signal.SIGKILL)
        await child.wait()
        await child.aclose()
    stranger = f"not-runner-{uuid.uuid4().hex[:8]}"
    await engine.check(
        ["run", "-d", "--name", stranger, "--network", "none", image, "sleep", "600"]
    )
    try:
        async with started(backend, tmp_path) as live:
            names = await _names(engine)
            assert name in names  # SIGKILL removed nothing
            reaped = await reap_orphans(engine)
            names = await _names(engine)
            assert name not in names and reaped
            assert isinstance(live, ContainerEnvironment) and live.name in names
            assert (await live.exec(["true"], timeout_s=30)).exit_code == 0
            shown = await engine.check(["ps", "-a", "-q", "--filter", f"name={stranger}"])
            assert shown.text, "a container without the runner's labels was removed"
    finally:
        await engine.call(remove_args(engine, [stranger]))


async def _names(engine: Engine) -> set[str]:
    found = set()
    for cid, _ in await runner_containers(engine):
        shown = await engine.check(["inspect", "--type", "container", cid])
        found.add(json.loads(shown.stdout)[0]["Name"].lstrip("/"))
    return found
