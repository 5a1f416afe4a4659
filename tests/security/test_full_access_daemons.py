"""Attacker review of issue 25, finding 2: a full-access command ran `setsid -f` and its
daemon outlived the run, reading the next run's MCP server's environment. Every process a
full-access command starts (its group, a new session, a double fork) ends when the
command returns or times out; the runner's own children are not touched."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import anyio
import pytest

from runner.sandbox.local import LocalExecutor
from tests.support.fixtures import ThreadFactory, make_git_repo
from tests.support.loopback import (
    RecordedRequest,
    Reply,
    last_user_text,
    per_conversation,
    reply_message,
)
from tests.support.security import cli, sh

DAEMONS = (
    "setsid -f sh -c 'echo $$ > {d}/setsid.pid; exec sleep 300'; "
    "(sh -c 'echo $$ > {d}/double.pid; exec sleep 300' &); "
    "nohup sh -c 'echo $$ > {d}/nohup.pid; trap \"\" TERM HUP; exec sleep 300' "
    ">/dev/null 2>&1 & "
    "for f in setsid double nohup; do while [ ! -s {d}/$f.pid ]; do sleep 0.01; done; done; "
    "echo started"
)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


def _pids(d: Path) -> list[int]:
    return [int((d / f"{n}.pid").read_text()) for n in ("setsid", "double", "nohup")]


@pytest.mark.parametrize("ends", ["returns", "times-out"])
def test_daemons_of_a_full_access_command_die_with_it(tmp_path: Path, ends: str) -> None:
    """Measured: every daemon is gone by the time `run` returns (no wait after it)."""
    own = subprocess.Popen(["sleep", "300"])  # stands for the runner's MCP server
    try:
        cmd = DAEMONS.format(d=tmp_path) + ("; sleep 300" if ends == "times-out" else "")
        t0 = time.monotonic()
        res = anyio.run(
            lambda: LocalExecutor().run(
                ["sh", "-c", cmd], cwd=tmp_path, timeout_s=3, env=dict(os.environ)
            )
        )
        took = time.monotonic() - t0
        assert b"started" in res.output, res.output
        assert res.timed_out == (ends == "times-out")
        assert res.exit_code == (124 if ends == "times-out" else 0)
        left = [p for p in _pids(tmp_path) if _alive(p)]
        assert not left, f"alive after the command returned: {left}"
        assert took < (6 if ends == "times-out" else 3), took
        assert own.poll() is None, "the runner's own child was killed"
    finally:
        own.kill()
        own.wait()


def test_the_exit_status_and_a_missing_command_are_kept(tmp_path: Path) -> None:
    async def go() -> tuple[int, int, bytes]:
        ex = LocalExecutor()
        env = dict(os.environ)
        a = await ex.run(["sh", "-c", "exit 7"], cwd=tmp_path, timeout_s=5, env=env)
        b = await ex.run(["sh", "-c", "kill -9 $$"], cwd=tmp_path, timeout_s=5, env=env)
        c = await ex.run(["no-such-cmd-x"], cwd=tmp_path, timeout_s=5, env=env)
        assert c.exit_code == 127
        return a.exit_code, b.exit_code, c.output

    a, b, missing = anyio.run(go)
    assert (a, b) == (7, 137)
    assert b"failed to start 'no-such-cmd-x'" in missing


def test_the_next_run_finds_no_daemon_of_the_previous_one(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """The reviewer's layout: run a1 leaves daemons, run a2 (concurrency 1) looks for them
    by pid; none is left, so none could read a2's processes."""
    repo = make_git_repo(tmp_path / "repo", {"README.md": "x\n"})
    d = tmp_path / "pids"
    d.mkdir()
    look = (
        f"for p in $(cat {d}/*.pid); do kill -0 $p 2>/dev/null && echo alive-$p; done; echo looked"
    )

    def go(req: RecordedRequest, i: int) -> Reply:
        first = last_user_text(req).strip() == "a1"
        return [sh(DAEMONS.format(d=d) if first else look, "c"), reply_message("done")][min(i, 1)]

    srv = loopback_thread(per_conversation(go))  # type: ignore[arg-type]
    task_file = tmp_path / "tasks.yaml"
    task_file.write_text(
        "version: 1\n"
        "providers:\n"
        f"  fake: {{base_url: '{srv.base_url}', env_key: FAKE_API_KEY}}\n"
        "defaults: {model: fake/m, sandbox: danger-full-access}\n"
        f"tasks:\n  - {{id: a1, prompt: a1, repo: '{repo}'}}\n"
        f"  - {{id: a2, prompt: a2, repo: '{repo}'}}\n"
    )
    res = cli("run", task_file, "--out", tmp_path / "out", "--concurrency", "1")
    assert res.returncode == 0, res.stderr
    left = [p for p in _pids(d) if _alive(p)]
    assert not left, left
    a2 = (tmp_path / "out" / "threads" / "a2.jsonl").read_text()
    assert '"aggregated_output":"looked\\n"' in a2, a2
