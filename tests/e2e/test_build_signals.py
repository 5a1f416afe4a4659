"""A build folder's image, in podman, against signals and edits: SIGTERM to a real `runner
run` (and to `runner suite check`) while the image builds makes the run `interrupted`
(exit 130), never an error with no message nor a broken task; a file written into the
build folder while the batch runs changes no run's image (review 27b #5 and #11)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from runner.sandbox.engine import Engine
from runner.vocabulary import EXIT_INTERRUPTED
from tests.e2e.test_build_killed import processes_with, wait_for
from tests.support.cli import KEY, run_cli
from tests.support.environments import engine_answers
from tests.support.fixtures import ThreadFactory
from tests.support.loopback import RecordedRequest, Reply, per_conversation, reply_message

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.skipif(not engine_answers("podman"), reason="podman does not answer here"),
]

ENGINE = Engine("podman")
FIXTURES = Path(__file__).parent.parent / "fixtures" / "suites"


def report_of(out: Path) -> dict[str, Any]:
    return dict(json.loads((out / "report.json").read_text()))


def slow_dockerfile(image: str, marker: str) -> str:
    return f"FROM {image}\nRUN echo {marker} && sleep 300\nWORKDIR /app\n"


def term_mid_build(argv: list[str], marker: str) -> tuple[int, str, str]:
    """Start `python -m runner ARGV`, SIGTERM it once its build's RUN step runs, and
    return its exit code, stdout and stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "runner", *argv],
        env={**os.environ, "FAKE_API_KEY": KEY},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for("the build's RUN step never started", lambda: processes_with(marker), 120)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    wait_for("a build outlived its batch", lambda: not processes_with(marker), 30)
    return proc.returncode, out, err


def test_sigterm_during_an_image_build_makes_the_run_interrupted(
    loopback_thread: ThreadFactory, tmp_path: Path, image: str
) -> None:
    srv = loopback_thread(per_conversation(lambda req, i: reply_message("done")))
    marker = f"marker-{uuid.uuid4().hex}"
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "Dockerfile").write_text(slow_dockerfile(image, marker))
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "version: 1\n"
        f"providers: {{fake: {{base_url: '{srv.base_url}', env_key: FAKE_API_KEY}}}}\n"
        "defaults: {model: fake/m, environment: {backend: podman, build: env}}\n"
        f"tasks:\n  - {{id: t-{uuid.uuid4().hex[:8]}, prompt: work}}\n"
    )
    out = tmp_path / "out"
    code, _, err = term_mid_build(["run", str(tasks), "--out", str(out)], marker)
    assert code == EXIT_INTERRUPTED, err
    (run,) = report_of(out)["runs"]
    assert run["status"] == "interrupted"
    assert "interrupted by a signal before its agent started" in run["error"]
    assert "--retry-errored" not in err  # nothing errored: --resume alone redoes it
    assert srv.requests == []


def test_suite_check_stopped_mid_build_exits_130_and_lists_no_broken_task(
    tmp_path: Path, image: str
) -> None:
    suite = tmp_path / "harbor"
    shutil.copytree(FIXTURES / "harbor" / "hello", suite / "hello")
    marker = f"marker-{uuid.uuid4().hex}"
    (suite / "hello" / "environment" / "Dockerfile").write_text(slow_dockerfile(image, marker))
    out = tmp_path / "out"
    code, said, err = term_mid_build(
        ["suite", "check", str(suite), "--format", "harbor", "--out", str(out)], marker
    )
    assert code == EXIT_INTERRUPTED, err
    assert "interrupted; 2 of 2 runs not scored" in said
    assert "do not score" not in said and "wants" not in said
    assert {r["status"] for r in report_of(out)["runs"]} <= {"interrupted", "skipped"}


def test_a_file_written_into_the_build_folder_mid_batch_changes_no_run_s_image(
    loopback_thread: ThreadFactory, tmp_path: Path, image: str
) -> None:
    """The folder's tag is decided once per batch: the second run uses the image the
    first one built, though a file was written into the folder between them."""
    folder = tmp_path / "env"
    folder.mkdir()
    (folder / "Dockerfile").write_text(
        f"FROM {image}\nCOPY . /ctx\nRUN echo {uuid.uuid4().hex} > /marker\nWORKDIR /app\n"
    )

    def script(req: RecordedRequest, i: int) -> Reply:
        (folder / f"written-{uuid.uuid4().hex[:6]}.txt").write_text("mid-batch\n")
        return reply_message("done")

    srv = loopback_thread(per_conversation(script))
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "version: 1\n"
        f"providers: {{fake: {{base_url: '{srv.base_url}', env_key: FAKE_API_KEY}}}}\n"
        "defaults: {model: fake/m, environment: {backend: podman, build: env}}\n"
        "matrix: {repeat: 3}\n"
        f"tasks:\n  - {{id: t-{uuid.uuid4().hex[:8]}, prompt: work}}\n"
    )
    out = tmp_path / "out"
    try:
        res = run_cli("run", tasks, "--out", out, "--concurrency", "1")
        assert res.returncode == 0, res.stderr
        runs = report_of(out)["runs"]
        assert len(list(folder.glob("written-*"))) == 3  # the folder did change, thrice
        envs = [r["environment"] for r in runs]
        assert len({e["image"] for e in envs}) == 1, [e["image"] for e in envs]
        assert len({e["image_id"] for e in envs}) == 1
        assert [e["built"] for e in envs] == [True, False, False]
    finally:
        if (out / "report.json").exists():
            for tag in {r["environment"]["image"] for r in report_of(out)["runs"]}:
                subprocess.run(
                    ENGINE.argv(["rmi", "-f", tag]), env=ENGINE.env(), check=False, timeout=60
                )
