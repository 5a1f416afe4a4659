"""Shared pieces of the adversarial suite: a task file for one repository, the scripted
agent's tool calls, and report readers. Every test drives the real CLI in a subprocess,
with the real sandbox, real git and the scripted loopback model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.cli import run_cli
from tests.support.loopback import (
    Reply,
    reply_custom_tool_call,
    reply_function_call,
)

KEY = "sk-canary-0123456789abcdef"
"""The provider key the runner is given: a secret the redaction step must catch."""


def tasks(
    dir_: Path,
    base_url: str,
    repo: Path,
    ids: list[str],
    *,
    extra: str = "",
    git: str = "",
    provider: str = "",
) -> Path:
    """`provider`: more fields of the provider's entry (`key: value, ...`)."""
    more = f", {provider}" if provider else ""
    lines = [
        "version: 1",
        "providers:",
        f"  fake: {{base_url: '{base_url}', env_key: FAKE_API_KEY{more}}}",
        "defaults:",
        "  model: fake/m",
        "  apply_patch_tool: freeform",
        "  sandbox: workspace-write",
    ]
    if git:
        lines.append(f"  git: {git}")
    if extra:
        lines.append(extra)
    lines.append("tasks:")
    lines += [f"  - {{id: {t}, prompt: '{t}', repo: '{repo}'}}" for t in ids]
    path = dir_ / "tasks.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def cli(
    *args: str | Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=env, timeout=timeout)


def hold(gate: str = "go") -> str:
    """A command that keeps its run alive until the file `gate` appears (relative: in the
    run's workspace, see `let_go`), two minutes at most: a run that must still be going
    while another one looks lasts as long as the look, not a fixed sleep."""
    wait = f"for i in $(seq 2400); do [ -e {gate} ] && break; sleep 0.05; done"
    return wait if gate.startswith("/") else f"{wait}; rm -f {gate}"  # not left in the result


def let_go(work: Path) -> list[Path]:
    """End `hold()` in every workspace matching `work` (a glob); the ones it found."""
    held = sorted(Path(work.anchor).glob(str(work.relative_to(work.anchor))))
    for ws in held:
        (ws / "go").touch()
    return held


def sh(cmd: str, call_id: str) -> Reply:
    return reply_function_call("shell", {"command": ["bash", "-c", cmd]}, call_id=call_id)


def patch(body: str, call_id: str) -> Reply:
    return reply_custom_tool_call(
        "apply_patch", f"*** Begin Patch\n{body}\n*** End Patch", call_id=call_id
    )


def runs(out: Path) -> dict[str, dict[str, Any]]:
    report = json.loads((out / "report.json").read_text())
    return {t["id"]: t for t in report["runs"]}


def tool_outputs(out: Path, run: str) -> list[str]:
    """What each tool call returned to the model, from the run's events file."""
    found = []
    for line in (out / "threads" / f"{run}.jsonl").read_text().splitlines():
        ev = json.loads(line)
        item = ev.get("item") or {}
        if ev.get("type") == "item.completed" and item.get("type") in (
            "command_execution",
            "file_change",
        ):
            found.append(json.dumps(item))
    return found


def start_batch(
    task_file: Path, out: Path, *extra: str, tmp: Path | None = None
) -> subprocess.Popen[str]:
    """`tmp`: the batch's TMPDIR, for a test that looks into its runs' workspaces."""
    env = {**os.environ, "FAKE_API_KEY": KEY}
    if tmp is not None:
        env["TMPDIR"] = str(tmp)
    return subprocess.Popen(
        [sys.executable, "-m", "runner", "run", str(task_file), "--out", str(out), *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_until(cond: Any, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not cond():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
