"""A batch killed with SIGKILL in the middle of a `podman build` leaves no build running
(it would finish minutes later and race the next batch's build of the same folder), and
the next batch's start removes the untagged build images dead batches left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import anyio
import pytest

from runner.sandbox.engine import BATCH_LABEL, HOST_LABEL, OWNER, OWNER_LABEL, RECIPE_LABEL, Engine
from runner.sandbox.images import Builder
from runner.sandbox.orphans import UID_LABEL
from tests.support.cli import KEY, run_cli
from tests.support.environments import base_image, engine_answers
from tests.support.fixtures import ThreadFactory
from tests.support.loopback import RecordedRequest, Reply, per_conversation, reply_message

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not engine_answers("podman"), reason="podman does not answer here"),
]

ENGINE = Engine("podman")


def podman(*args: str) -> str:
    done = subprocess.run(
        ENGINE.argv(list(args)), env=ENGINE.env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def processes_with(word: str) -> list[int]:
    """The processes whose command line holds `word`."""
    found: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if word.encode() in f.read():
                    found.append(int(name))
        except OSError:
            continue
    return found


def wait_for(what: str, ok: object, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not ok() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.2)
    assert ok(), what  # type: ignore[operator]


def task_file(path: Path, base_url: str, env: str) -> Path:
    path.write_text(
        "version: 1\n"
        f"providers: {{fake: {{base_url: '{base_url}', env_key: FAKE_API_KEY}}}}\n"
        f"defaults: {{model: fake/m, environment: {env}}}\n"
        f"tasks:\n  - {{id: t-{uuid.uuid4().hex[:8]}, prompt: work}}\n"
    )
    return path


def test_a_batch_killed_mid_build_leaves_no_build_and_the_next_cleans_up(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    def done(req: RecordedRequest, i: int) -> Reply:
        return reply_message("done")

    srv = loopback_thread(per_conversation(done))
    base = anyio.run(base_image, ENGINE)
    # A name of the test's own, so the build's working container can be told apart.
    mine = f"localhost/runner-test-kill-{uuid.uuid4().hex[:10]}"
    podman("tag", base, f"{mine}:1")
    marker = f"marker-{uuid.uuid4().hex}"
    folder = tmp_path / "env"
    folder.mkdir()
    (folder / "Dockerfile").write_text(f"FROM {mine}:1\nRUN echo {marker} && sleep 300\n")
    tag, _ = anyio.run(Builder(ENGINE).tag, folder)
    tasks = task_file(tmp_path / "build.yaml", srv.base_url, "{backend: podman, build: env}")
    dead = f"test-dead-{uuid.uuid4().hex[:8]}"
    leftover = tmp_path / "leftover"
    leftover.mkdir()
    (leftover / "Dockerfile").write_text(f"FROM {mine}:1\nRUN echo {marker} > /left\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "runner", "run", str(tasks), "--out", str(tmp_path / "out")],
        env={**os.environ, "FAKE_API_KEY": KEY},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for("the build's RUN step never started", lambda: processes_with(marker), 120)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        wait_for(
            f"a build outlived its batch: {processes_with(marker) + processes_with(str(folder))}",
            lambda: not processes_with(marker) and not processes_with(str(folder)),
            30,
        )
        assert podman("images", "-q", "--filter", f"reference={tag}") == ""
        key = tag.rpartition(":")[2]
        assert podman("images", "-q", "--filter", f"label={RECIPE_LABEL}={key}") == ""

        # What a dead batch's build left untagged (a build that finished after its batch
        # died, then lost its tag): removed when the next batch starts.
        labels = {
            OWNER_LABEL: OWNER,
            UID_LABEL: str(os.geteuid()),
            HOST_LABEL: os.uname().nodename,
            BATCH_LABEL: dead,
        }
        label_args = [a for k, v in labels.items() for a in ("--label", f"{k}={v}")]
        podman("build", "-q", "--network", "none", *label_args, "-t", f"{mine}:left", str(leftover))
        podman("untag", f"{mine}:left")
        left = podman("images", "-q", "--filter", f"label={BATCH_LABEL}={dead}").split()
        assert len(left) == 1

        plain = task_file(
            tmp_path / "plain.yaml",
            srv.base_url,
            f"{{backend: podman, image: '{base}', workdir: /work}}",
        )
        res = run_cli("run", plain, "--out", tmp_path / "next")
        assert res.returncode == 0, res.stderr
        assert "removed 1 untagged build image(s) a killed batch left behind" in res.stderr
        assert podman("images", "-q", "--filter", f"label={BATCH_LABEL}={dead}") == ""
    finally:
        if proc.poll() is None:
            proc.kill()
        for line in podman("ps", "-a", "--external", "--format", "{{.ID}} {{.Names}}").splitlines():
            cid, _, name = line.partition(" ")
            if name.startswith(mine.rpartition("/")[2]):
                podman("rm", "-f", cid)
        subprocess.run(ENGINE.argv(["rmi", "-f", tag, f"{mine}:1"]), env=ENGINE.env(), check=False)
