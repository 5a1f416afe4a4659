"""The README's quickstart-in-a-container recipe as written (slow): its `make` line names
real targets, and its `runner run` and `git` lines, run in a copy of the checkout, give a
completed run whose shell call and check happened in the container, a patch and a branch.
The real embedded model, with the date pinned (`--date`) so the test does not depend on
today's."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from runner.sandbox.engine import Engine
from tests.support import paths
from tests.support.environments import base_image, engine_answers
from tests.support.fixtures import make_git_repo

ROOT = paths.ROOT
MARK = "the model still on the host, in three commands:"
DAY = "2026-11-23"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not engine_answers("podman"), reason="podman does not answer here"),
]


def readme_commands() -> list[str]:
    """The code block right after `MARK`, comments dropped."""
    text = (ROOT / "README.md").read_text()
    assert MARK in text
    block = text.split(MARK, 1)[1].split("```", 2)[1]
    lines = [line.split("#", 1)[0].strip() for line in block.splitlines()[1:]]
    return [line for line in lines if line]


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z0-9_./-]+):", text, flags=re.M))


@pytest.mark.timeout(1200)
def test_the_readme_container_quickstart_runs_as_written(tmp_path: Path) -> None:
    make, run, branches = readme_commands()
    words = shlex.split(make)
    assert words[0] == "make" and set(words[1:]) <= make_targets(), words
    assert {"base-image", "containers", "demo-container"} <= make_targets()
    # What the make line does, here: the base image, the sample repository.
    anyio.run(base_image, Engine("podman"))
    sample = ROOT / "examples" / "sample-repo"
    repo = make_git_repo(
        tmp_path / "build" / "sample-repo",
        {p.name: p.read_text() for p in sample.iterdir() if p.is_file()},
    )
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    shutil.copytree(ROOT / "examples" / "container", tmp_path / "examples" / "container")

    argv = shlex.split(run)
    assert argv[:2] == [".venv/bin/runner", "run"], run
    done = subprocess.run(
        [sys.executable, "-m", "runner", *argv[1:], "--date", DAY],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    out = tmp_path / argv[argv.index("--out") + 1]
    [task] = json.loads((out / "report.json").read_text())["runs"]
    assert task["status"] == "completed", (task["error"], task.get("truncated_output"))
    assert task["check"]["passed"] is True  # `test -f hello.txt` in the container
    env = task["environment"]
    assert env["backend"] == "podman" and env["workdir"] == "/work"
    assert env["image"].startswith("localhost/runner-build:") and env["start_s"] > 0
    events = [json.loads(line) for line in (out / task["events_file"]).read_text().splitlines()]
    shell = [
        e["item"]
        for e in events
        if e["type"] == "item.completed" and e["item"]["type"] == "command_execution"
    ]
    assert shell and shell[0]["exit_code"] == 0
    result = task["result"]
    assert result["files"] == ["hello.txt"] and (out / result["patch"]).is_file()

    listed = subprocess.run(shlex.split(branches), cwd=tmp_path, capture_output=True, text=True)
    assert listed.returncode == 0 and result["branch"] in listed.stdout
    assert not (repo / "hello.txt").exists()  # the user's tree untouched
