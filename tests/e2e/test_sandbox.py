"""`runner run` end to end with the default sandbox: a scripted model's shell call tries to
write outside the workspace and to read secrets; only the workspace write lands."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.fixtures import ThreadFactory, make_git_repo
from tests.support.loopback import Reply, per_conversation, reply_function_call, reply_message
from tests.support.sandbox import FIXES, broken_bwrap

CANARY = "sk-canary-0123456789abcdef"  # run_cli puts it in FAKE_API_KEY


@pytest.fixture
def outside() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="runner-e2e-", dir="/var/tmp"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def write_tasks(dir_: Path, base_url: str, check: str) -> Path:
    repo = make_git_repo(dir_ / "repo")
    path = dir_ / "tasks.yaml"
    path.write_text(
        "version: 1\n"
        f"providers: {{fake: {{base_url: '{base_url}', env_key: FAKE_API_KEY}}}}\n"
        "defaults: {model: fake/m, tools: [shell]}\n"  # no sandbox named: the default
        "tasks:\n"
        f"  - {{id: escape, prompt: try, repo: '{repo}', check: '{check}'}}\n"
    )
    return path


def test_shell_call_cannot_write_outside(
    loopback_thread: ThreadFactory, tmp_path: Path, outside: Path
) -> None:
    def script(req: Any, i: int) -> Reply:
        if i == 0:
            return reply_function_call(
                "shell",
                {
                    "command": [
                        "bash",
                        "-c",
                        (
                            f"echo pwned > {outside}/pwned; echo inside > inside.txt; "
                            "env; cat /proc/*/environ /proc/*/cmdline | tr '\\0' '\\n'"
                        ),
                    ]
                },
                call_id="c1",
            )
        return reply_message("done")

    srv = loopback_thread(per_conversation(script))
    tasks = write_tasks(
        tmp_path, srv.base_url, check=f"touch {outside}/from-check; test -f inside.txt"
    )
    out = tmp_path / "out"
    res = run_cli("run", tasks, "--out", out)
    assert res.returncode == 0, res.stderr

    assert list(outside.iterdir()) == []  # neither the agent nor the check wrote there
    [task] = json.loads((out / "report.json").read_text())["runs"]
    assert task["status"] == "completed" and task["check"]["passed"]
    assert task["result"]["files"] == ["inside.txt"]
    events = [json.loads(x) for x in (out / task["events_file"]).read_text().splitlines()]
    [cmd] = [
        e["item"]
        for e in events
        if e["type"] == "item.completed" and e["item"]["type"] == "command_execution"
    ]
    assert "Read-only file system" in cmd["aggregated_output"]
    assert CANARY not in json.dumps(srv.requests[1].body)  # what the model was sent back
    developer = srv.requests[0].body["input"][0]["content"][0]["text"]
    assert "`sandbox_mode` is `workspace-write`" in developer
    assert "Network access is restricted" in developer
    assert "`/tmp` is writable but private" in developer


def test_run_fails_where_bubblewrap_cannot(
    loopback_thread: ThreadFactory, tmp_path: Path, outside: Path
) -> None:
    srv = loopback_thread(
        per_conversation(
            lambda req, i: reply_function_call(
                "shell", {"command": ["touch", f"{outside}/ran"]}, call_id="c1"
            )
        )
    )
    tasks = write_tasks(tmp_path, srv.base_url, check="true")
    fake = broken_bwrap(tmp_path / "fake")
    res = run_cli(
        "run", tasks, "--out", tmp_path / "out", env={"PATH": f"{fake}:{os.environ['PATH']}"}
    )
    assert res.returncode == 3, res.stderr
    assert "Traceback" not in res.stderr
    [task] = json.loads((tmp_path / "out" / "report.json").read_text())["runs"]
    assert task["status"] == "error"
    for fix in FIXES:
        assert fix in task["error"]
    assert list(outside.iterdir()) == [] and srv.requests == []


@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
def test_apply_patch_obeys_the_sandbox_too(
    loopback_thread: ThreadFactory, tmp_path: Path, mode: str
) -> None:
    """apply_patch runs in the runner's process, outside bubblewrap: it must refuse what
    the sandbox would refuse a command (any write when read-only, `.git` always)."""
    patches = [
        "*** Begin Patch\n*** Add File: new.txt\n+hello\n*** End Patch",
        "*** Begin Patch\n*** Add File: .git/hooks/post-checkout\n+#!/bin/sh\n*** End Patch",
    ]

    def script(req: Any, i: int) -> Reply:
        if i < len(patches):
            return reply_function_call("apply_patch", {"input": patches[i]}, call_id=f"p{i}")
        return reply_message("done")

    srv = loopback_thread(per_conversation(script))
    tasks = write_tasks(tmp_path, srv.base_url, check="true")
    tasks.write_text(
        tasks.read_text().replace("tools: [shell]", f"tools: [apply_patch], sandbox: {mode}")
    )
    out = tmp_path / "out"
    assert run_cli("run", tasks, "--out", out).returncode == 0
    outputs = [str(r.call_outputs()[f"p{i}"]) for i, r in enumerate(srv.requests[1:])]
    if mode == "read-only":
        assert all("the sandbox is read-only" in o for o in outputs)
    else:
        assert "read-only" not in outputs[0]
        assert ".git is read-only in the sandbox" in outputs[1]
    report = json.loads((out / "report.json").read_text())
    files = (report["runs"][0]["result"] or {}).get("files", [])
    assert files == ([] if mode == "read-only" else ["new.txt"])
