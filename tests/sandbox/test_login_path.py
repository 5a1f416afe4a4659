"""The agent's login shell keeps the PATH the runner started with (minus what the sandbox
hides): a tool the check finds, `bash -lc` finds too, although /etc/profile resets PATH."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.fixtures import ThreadFactory, make_git_repo
from tests.support.loopback import Reply, per_conversation, reply_function_call, reply_message

TOOL = "ruff"
"""A tool of this project's venv only: found through the PATH the runner is given."""


@pytest.mark.parametrize("sandbox", ["workspace-write", "read-only", "danger-full-access"])
def test_login_shell_and_check_find_the_same_tool(
    loopback_thread: ThreadFactory, tmp_path: Path, sandbox: str
) -> None:
    venv_bin = Path(sys.executable).parent
    assert (venv_bin / TOOL).is_file()

    def script(req: Any, i: int) -> Reply:
        if i == 0:
            cmd = ["bash", "-lc", f"command -v {TOOL} || echo 'not found'"]
            return reply_function_call("shell", {"command": cmd}, call_id="c0")
        return reply_message(f"saw: {req.call_outputs()['c0']}")

    srv = loopback_thread(per_conversation(script))
    make_git_repo(tmp_path)
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "version: 1\n"
        "providers:\n"
        f"  fake: {{base_url: '{srv.base_url}', env_key: FAKE_API_KEY}}\n"
        f"defaults: {{model: fake/test-model, sandbox: {sandbox}}}\n"
        f"tasks:\n  - {{id: a, prompt: go, repo: ., check: 'command -v {TOOL}'}}\n"
    )
    path = f"{venv_bin}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    home = tmp_path / "home"  # a login shell reads its .profile; nothing may be written there
    home.mkdir()
    (home / ".profile").write_text("PATH=/usr/bin:/bin\n")
    res = run_cli(
        "run",
        tasks,
        "--out",
        tmp_path / "out",
        env={"PATH": path, "HOME": str(home), "FAKE_API_KEY": "sk-canary-path-0123456789"},
    )
    (run,) = json.loads((tmp_path / "out" / "report.json").read_text())["runs"]
    assert run["check"]["exit_code"] == 0, run
    assert f"{venv_bin}/{TOOL}" in run["final_message"], run["final_message"]
    assert res.returncode == 0, res.stderr
    assert [p.name for p in home.iterdir()] == [".profile"]
    assert (home / ".profile").read_text() == "PATH=/usr/bin:/bin\n"
