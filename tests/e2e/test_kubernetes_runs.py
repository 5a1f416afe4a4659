"""A batch with kubernetes runs, end to end through the stand-in kubectl on PATH
(tests/support/fake_kubectl.py, Pods made with podman): the batch first deletes the Pods
a killed batch of this host left in its namespace, never a live batch's or another
host's, then runs its own in a Pod and leaves none behind."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import anyio
import pytest

from runner.sandbox.kubectl import Kubectl
from runner.sandbox.kubernetes import PodEnvironment
from runner.sandbox.orphans import live_batch
from tests.support import tiny_image
from tests.support.cli import run_cli, shell
from tests.support.fixtures import ThreadFactory
from tests.support.loopback import RecordedRequest, Reply, per_conversation, reply_message

FAKE = Path(__file__).resolve().parents[1] / "support" / "fake_kubectl.py"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("podman") is None, reason="no podman for the stand-in kubectl"),
]


def pod(image: str, namespace: str, batch: str, **kw: str) -> PodEnvironment:
    return PodEnvironment(
        batch_id=batch,
        run_name="left",
        image=image,
        workdir="/work",
        namespace=namespace,
        pull_policy="Never",
        kubectl=Kubectl(executable=str(FAKE)),
        start_timeout_s=120,
        **kw,  # type: ignore[arg-type]
    )


def pods_in(namespace: str) -> list[str]:
    done = anyio.run(
        Kubectl(executable=str(FAKE)).call,
        ["--namespace", namespace, "get", "pods", "-l", "io.runner.owner=runner", "-o", "json"],
    )
    return sorted(p["metadata"]["name"] for p in json.loads(done.stdout)["items"])


def test_a_batch_reaps_dead_batches_pods_then_runs_in_its_own(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    image = tiny_image.ensure()
    ns = f"reap-{uuid.uuid4().hex[:8]}"
    dead = pod(image, ns, f"dead-{uuid.uuid4().hex[:8]}")
    live = pod(image, ns, f"live-{uuid.uuid4().hex[:8]}")
    other = pod(image, ns, f"dead-{uuid.uuid4().hex[:8]}", host="another-host")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl").symlink_to(FAKE)

    def script(req: RecordedRequest, i: int) -> Reply:
        if i == 0:
            return shell("echo made > made.txt; pwd", "c0")
        return reply_message("done")

    srv = loopback_thread(per_conversation(script))
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "version: 1\n"
        f"providers: {{fake: {{base_url: '{srv.base_url}', env_key: FAKE_API_KEY}}}}\n"
        "defaults:\n"
        "  model: fake/m\n"
        f"  environment: {{backend: kubernetes, image: '{image}', workdir: /work, "
        f"namespace: {ns}}}\n"
        "tasks:\n"
        "  - {id: k, prompt: work, check: 'test -f made.txt'}\n"
    )
    out = tmp_path / "out"
    try:
        for env in (dead, live, other):
            anyio.run(env.start)
        with live_batch(live.batch_id):
            res = run_cli(
                "run", tasks, "--out", out, env={"PATH": f"{bin_dir}:{os.environ['PATH']}"}
            )
        assert res.returncode == 0, res.stderr
        assert "removed 1 container(s) or Pod(s)" in res.stderr
        assert pods_in(ns) == sorted([live.name, other.name])  # the run's own is gone too
        [run] = json.loads((out / "report.json").read_text())["runs"]
        assert run["status"] == "completed", run["error"]
        assert run["check"]["passed"] is True
        assert run["environment"]["backend"] == "kubernetes"
        assert "+made" in (out / run["environment"]["patch"]).read_text()
    finally:
        for env in (dead, live, other):
            anyio.run(env.stop)
