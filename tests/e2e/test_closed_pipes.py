"""Closed pipes are normal: `runner run ... --json | head -1` and `... 2>&1 | head -1`
still write every report and branch and keep the exit code. Real pipes, closed by the
reader after its first line, as `head -1` does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import pytest

from tests.support.fixtures import ThreadFactory, make_git_repo
from tests.support.loopback import Reply, per_conversation, reply_function_call, reply_message

RUNS = 3


def script(req: Any, i: int) -> Reply:
    if i == 0:
        cmd = ["bash", "-c", "echo work > work.txt; seq 1 200"]
        return reply_function_call("shell", {"command": cmd}, call_id="c0")
    return reply_message("done " + "x" * 2000)


def setup(loopback_thread: ThreadFactory, tmp_path: Path) -> tuple[Path, Path]:
    srv = loopback_thread(per_conversation(script))
    repo = tmp_path / "repo"
    repo.mkdir()
    make_git_repo(repo)
    tasks = repo / "tasks.yaml"
    body = "".join(f"  - {{id: t{i}, prompt: go {i}, repo: .}}\n" for i in range(RUNS))
    tasks.write_text(
        "version: 1\n"
        "providers:\n"
        f"  fake: {{base_url: '{srv.base_url}', env_key: FAKE_API_KEY}}\n"
        "defaults: {model: fake/test-model, git: {branch: 'agent/{task}'}}\n"
        f"tasks:\n{body}"
    )
    return repo, tasks


def head_1(args: list[str], *, stderr: int | IO[bytes]) -> tuple[int, bytes]:
    """The command's exit code after its reader took one line and went away."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "runner", *args],
        env={**os.environ, "FAKE_API_KEY": "sk-canary-pipes-0123456789"},
        stdout=subprocess.PIPE,
        stderr=stderr,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    return proc.wait(timeout=120), first


def assert_everything_written(repo: Path, out: Path) -> None:
    report = json.loads((out / "report.json").read_text())
    assert [r["status"] for r in report["runs"]] == ["completed"] * RUNS
    for name in ("summary.md", "report.html", "junit.xml"):
        assert (out / name).is_file(), name
    branches = subprocess.run(
        ["git", "-C", str(repo), "branch", "--list", "agent/*", "--format=%(refname:short)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert sorted(branches) == [f"agent/t{i}" for i in range(RUNS)]
    for r in report["runs"]:
        assert (out / r["events_file"]).is_file()


def test_json_into_a_closed_pipe(loopback_thread: ThreadFactory, tmp_path: Path) -> None:
    repo, tasks = setup(loopback_thread, tmp_path)
    out = tmp_path / "out"
    errors = tmp_path / "stderr.txt"
    with errors.open("wb") as err:
        code, first = head_1(
            ["run", str(tasks), "--out", str(out), "--json", "--concurrency", "1"], stderr=err
        )
    assert json.loads(first)["type"] == "thread.started"
    text = errors.read_text()
    assert "Traceback" not in text and "BrokenPipe" not in text, text
    assert code == 0, text
    assert_everything_written(repo, out)


@pytest.mark.parametrize("flags", [[], ["--json"]], ids=["plain", "json"])
def test_stdout_and_stderr_into_a_closed_pipe(
    loopback_thread: ThreadFactory, tmp_path: Path, flags: list[str]
) -> None:
    repo, tasks = setup(loopback_thread, tmp_path)
    out = tmp_path / "out"
    code, first = head_1(
        ["run", str(tasks), "--out", str(out), "--concurrency", "1", *flags],
        stderr=subprocess.STDOUT,
    )
    assert first
    assert code == 0
    assert_everything_written(repo, out)


def test_json_extra_into_a_closed_pipe_keeps_a_failing_exit_code(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """Exit 1 stays 1 (a failed check), not a crash's 1 that hides the report."""
    repo, tasks = setup(loopback_thread, tmp_path)
    tasks.write_text(tasks.read_text().replace("prompt: go 2,", "prompt: go 2, check: 'false',"))
    out = tmp_path / "out"
    errors = tmp_path / "stderr.txt"
    with errors.open("wb") as err:
        code, _ = head_1(
            ["run", str(tasks), "--out", str(out), "--json-extra", "--concurrency", "1"],
            stderr=err,
        )
    assert "Traceback" not in errors.read_text()
    assert code == 1
    report = json.loads((out / "report.json").read_text())
    assert [r["status"] for r in report["runs"]] == ["completed", "completed", "check_failed"]
    assert (out / "report.html").is_file() and (out / "summary.md").is_file()
