"""PodEnvironment, end to end through a kubectl executable.

Here (no cluster) that executable is tests/support/fake_kubectl.py, which does each verb
the backend uses with podman: real Pods of a real image, real `exec`, real deletion.
With RUNNER_KUBE_TESTS=1 (the `kubernetes` job of .github/workflows/ci.yml, on a kind
cluster) the same tests drive the real `kubectl` in RUNNER_KUBE_NAMESPACE with
RUNNER_KUBE_IMAGE, which must have sh, coreutils and tar.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest

from runner.errors import EnvironmentFault, EnvironmentLost, SandboxError, UnsafeFileError
from runner.sandbox.kubectl import Kubectl
from runner.sandbox.kubernetes import PodEnvironment, reap_orphans
from tests.support import tiny_image

REAL = os.environ.get("RUNNER_KUBE_TESTS") == "1"
FAKE = Path(__file__).resolve().parents[1] / "support" / "fake_kubectl.py"
NAMESPACE = os.environ.get("RUNNER_KUBE_NAMESPACE", "runner-test") if REAL else "runner-test"

pytestmark = [
    pytest.mark.skipif(
        not REAL and shutil.which("podman") is None,
        reason="neither a cluster (RUNNER_KUBE_TESTS=1) nor podman for the stand-in kubectl",
    ),
    pytest.mark.slow,  # each Pod takes about a second to start and one to delete
]


def kubectl(**kw: Any) -> Kubectl:
    return Kubectl(executable="kubectl" if REAL else str(FAKE), **kw)


@pytest.fixture(scope="module")
def image() -> str:
    return os.environ["RUNNER_KUBE_IMAGE"] if REAL else tiny_image.ensure()


def make(image: str, batch: str | None = None, run: str = "run", **kw: Any) -> PodEnvironment:
    return PodEnvironment(
        batch_id=batch or f"test-{uuid.uuid4().hex[:10]}",
        run_name=run,
        image=image,
        workdir="/work" if not REAL else "/tmp",
        namespace=NAMESPACE,
        pull_policy="Never" if not REAL else "IfNotPresent",
        kubectl=kubectl(),
        **{"start_timeout_s": 120, **kw},
    )


@pytest.fixture(scope="module")
def pod(image: str) -> Iterator[PodEnvironment]:
    env = make(image)
    try:
        anyio.run(env.start)
        yield env
    finally:
        anyio.run(env.stop)


def go(fn: Any, *args: Any, **kw: Any) -> Any:
    return anyio.run(partial(fn, *args, **kw))


def test_exec_passes_argv_cwd_env_and_stdin_without_a_shell(pod: PodEnvironment) -> None:
    hostile = "$(touch /tmp/pwned); `id`; 'quote\" \\ *"
    got = go(pod.exec, ["printf", "%s|", hostile, "two words"], timeout_s=30)
    assert (got.exit_code, got.output) == (0, f"{hostile}|two words|".encode())
    got = go(
        pod.exec,
        ["sh", "-c", 'pwd; printf "%s\\n" "$A" "$B"; cat; echo err >&2; exit 3'],
        cwd="/tmp",
        env={"A": hostile, "B": "x\ny"},
        stdin=b"from stdin\n",
        timeout_s=30,
    )
    assert got.exit_code == 3 and not got.timed_out
    assert got.output == f"/tmp\n{hostile}\nx\ny\nfrom stdin\nerr\n".encode()
    assert go(pod.exec, ["test", "-e", "/tmp/pwned"], timeout_s=30).exit_code == 1
    missing = go(pod.exec, ["true"], cwd="/no/such/dir", timeout_s=30)
    assert missing.exit_code == 126
    with pytest.raises(SandboxError, match="not a valid environment variable"):
        go(pod.exec, ["true"], env={"A=B": "x"}, timeout_s=30)


def test_a_timeout_ends_the_whole_tree_and_output_is_capped(pod: PodEnvironment) -> None:
    got = go(pod.exec, ["sh", "-c", "sleep 300 & sleep 300; echo never"], timeout_s=1)
    assert got.timed_out and got.exit_code == 124 and b"never" not in got.output
    assert got.duration_s < 10
    left = go(pod.exec, ["sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"], timeout_s=30)
    assert b"sleep infinity" in left.output and b"sleep 300" not in left.output
    big = go(pod.exec, ["seq", "1", "200000"], timeout_s=30, output_cap=1000)
    assert big.exit_code == 0 and big.truncated_bytes > 0 and len(big.output) < 1100
    assert big.output.startswith(b"1\n2\n") and big.output.endswith(b"200000\n")
    assert big.total_lines == 200000


def test_files_are_read_written_and_removed_never_through_links(pod: PodEnvironment) -> None:
    go(pod.write_file, "/work/deep/new.txt", b"\x00bytes\n")
    assert go(pod.read_file, "/work/deep/new.txt", max_bytes=100) == b"\x00bytes\n"
    assert go(pod.read_file, "/work/deep/none.txt", max_bytes=100) is None
    with pytest.raises(UnsafeFileError, match="larger than 3 bytes"):
        go(pod.read_file, "/work/deep/new.txt", max_bytes=3)
    with pytest.raises(UnsafeFileError, match="directory"):
        go(pod.read_file, "/work/deep", max_bytes=100)
    go(pod.exec, ["ln", "-sf", "/etc/passwd", "/work/deep/link"], timeout_s=30)
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        go(pod.read_file, "/work/deep/link", max_bytes=10_000)
    go(pod.write_file, "/work/deep/link", b"replaced\n")
    assert go(pod.read_file, "/work/deep/link", max_bytes=100) == b"replaced\n"
    assert b"root:" in go(pod.exec, ["cat", "/etc/passwd"], timeout_s=30).output
    go(pod.remove_file, "/work/deep/new.txt")
    go(pod.remove_file, "/work/deep/new.txt")
    assert go(pod.read_file, "/work/deep/new.txt", max_bytes=100) is None
    with pytest.raises(UnsafeFileError, match="directory"):
        go(pod.remove_file, "/work/deep")
    # As the contract suite asks of the other backends (test_environment.py).
    assert go(pod.exec, ["mkfifo", "/work/deep/fifo"], timeout_s=30).exit_code == 0
    with pytest.raises(UnsafeFileError, match="FIFO"):
        go(pod.write_file, "/work/deep/fifo", b"never blocks")
    with pytest.raises(UnsafeFileError, match="a file, not a directory"):
        go(pod.write_file, "/work/deep/link/under", b"x")
    for name in ("fifo", "link"):
        go(pod.remove_file, f"/work/deep/{name}")
    go(pod.remove_file, "/work/deep/under/a/file")  # nothing there: nothing to do
    go(pod.remove_file, "/work/deep")  # empty now: an undo takes it back
    assert go(pod.exec, ["ls", "-A", "/work"], timeout_s=30).output == b""


def test_folders_go_in_and_out_as_checked_tar_streams(pod: PodEnvironment, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("a\n")
    (src / "sub" / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (src / "sub" / "run.sh").chmod(0o755)
    go(pod.put_dir, src, "/work/tree")
    assert go(pod.exec, ["sub/run.sh"], cwd="/work/tree", timeout_s=30).output == b"ran\n"
    out = tmp_path / "out"
    go(pod.get_dir, "/work/tree", out, max_bytes=10_000)
    assert (out / "a.txt").read_text() == "a\n"
    assert os.access(out / "sub" / "run.sh", os.X_OK)
    with pytest.raises(UnsafeFileError, match="more than 5 bytes"):
        go(pod.get_dir, "/work/tree", tmp_path / "small", max_bytes=5)
    go(pod.exec, ["ln", "-s", "/etc/passwd", "/work/tree/escape"], timeout_s=30)
    with pytest.raises(UnsafeFileError, match="escape.*is a link"):
        go(pod.get_dir, "/work/tree", tmp_path / "linked", max_bytes=10_000)


def test_a_pod_deleted_from_outside_is_lost_and_stop_is_idempotent(image: str) -> None:
    env = make(image)
    go(env.stop)  # before start: nothing to do
    go(env.start)
    try:
        assert go(env.exec, ["true"], timeout_s=30).exit_code == 0
        outside = kubectl()
        done = go(outside.call, ["--namespace", NAMESPACE, "delete", "pod", env.name, "--wait"])
        assert done.code == 0, done.said
        with pytest.raises(EnvironmentLost, match=env.name):
            go(env.exec, ["true"], timeout_s=30)
        with pytest.raises(EnvironmentLost):
            go(env.read_file, "/work/x", max_bytes=10)
    finally:
        go(env.stop)
        go(env.stop)


def test_orphans_are_reaped_by_label_never_a_live_batch_or_another_hosts(image: str) -> None:
    dead = make(image, batch="dead-" + uuid.uuid4().hex[:8], host="this-host")
    live = make(image, batch="live-" + uuid.uuid4().hex[:8], host="this-host")
    other = make(image, batch="dead-" + uuid.uuid4().hex[:8], host="other-host")
    envs = (dead, live, other)
    try:
        for env in envs:
            go(env.start)
        reaped = go(
            reap_orphans,
            kubectl(),
            namespace=NAMESPACE,
            host="this-host",
            alive=lambda batch: batch.startswith("live-"),
        )
        assert reaped == [dead.name]
        assert go(live.exec, ["true"], timeout_s=30).exit_code == 0
        assert go(other.exec, ["true"], timeout_s=30).exit_code == 0
    finally:
        for env in envs:
            go(env.stop)


def test_a_pod_that_never_gets_ready_is_an_environment_fault(image: str) -> None:
    env = make("localhost/runner-no-such-image:0", start_timeout_s=5)
    try:
        with pytest.raises(EnvironmentFault, match=env.name):
            go(env.start)
    finally:
        go(env.stop)
