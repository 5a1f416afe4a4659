"""Running the `runner` command in tests: the task file it reads and the command itself."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from runner.cli import main
from tests.support.fixtures import make_git_repo
from tests.support.loopback import (
    Reply,
    reply_function_call,
)

KEY = "sk-canary-0123456789abcdef"
"""The provider key the runs are given (FAKE_API_KEY): a canary that must never show."""


def write_tasks(tmp_path: Path, base_url: str, tasks: str, defaults: str = "") -> Path:
    if not (tmp_path / ".git").exists():
        make_git_repo(tmp_path)
    path = tmp_path / "tasks.yaml"
    path.write_text(
        "version: 1\n"
        "providers:\n"
        f"  fake: {{base_url: '{base_url}', env_key: FAKE_API_KEY}}\n"
        "defaults:\n"
        "  model: fake/test-model\n"
        f"{defaults}"
        f"tasks:\n{tasks}"
    )
    return path


def run_cli(
    *args: str | Path,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    unset: tuple[str, ...] = (),
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """`runner ARGS` in this process: `runner.cli.main` with its own stdout, stderr and
    environment. Starting Python and importing the runner again for each call was most of
    the suite's time; what only a real process shows (its exit status, signals, --json on a
    real pipe) is tested with `run_cli_process`. `timeout` is the subprocess one's, kept
    so the two are called alike; pytest-timeout bounds a call here. The temp dir and the
    local time zone are looked up again from the environment given, as a new process would
    (`tempfile` keeps the first temp dir it found, the C library the first `TZ`)."""
    del timeout
    argv = [str(a) for a in args]
    saved, saved_temp = dict(os.environ), tempfile.tempdir
    tempfile.tempdir = None
    out, err = io.StringIO(), io.StringIO()
    os.environ["FAKE_API_KEY"] = KEY
    for name in unset:
        os.environ.pop(name, None)
    os.environ.update(env or {})
    time.tzset()
    here = Path.cwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
    finally:
        os.chdir(here)
        os.environ.clear()
        os.environ.update(saved)
        tempfile.tempdir = saved_temp
        time.tzset()
    return subprocess.CompletedProcess(["runner", *argv], code, out.getvalue(), err.getvalue())


def run_cli_process(
    *args: str | Path, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`python -m runner ARGS` as a real process: for exit statuses, stdout and stderr
    as separate pipes, and anything else only a process shows."""
    full_env = {**os.environ, "FAKE_API_KEY": KEY, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "runner", *map(str, args)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def shell(cmd: str, call_id: str, *, login: bool = False) -> Reply:
    """The model's `shell` call running `cmd` (`bash -lc` as Codex sends it, with `login`)."""
    argv = ["bash", "-lc" if login else "-c", cmd]
    return reply_function_call("shell", {"command": argv}, call_id=call_id)


def tasks_file(
    dir_: Path, base_url: str, repo: Path, tasks: list[tuple[str, str]], git_settings: str = ""
) -> Path:
    lines = [
        "version: 1",
        "providers:",
        f"  fake: {{base_url: '{base_url}'}}",
        "defaults:",
        "  model: fake/m",
        "  apply_patch_tool: freeform",
    ]
    if git_settings:
        lines.append(f"  git: {git_settings}")
    lines.append("tasks:")
    for tid, prompt in tasks:
        lines.append(f"  - {{id: {tid}, prompt: '{prompt}', repo: '{repo}'}}")
    path = dir_ / "tasks.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_file(tasks: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return run_cli("run", tasks, "--out", out, timeout=90)


def write_task_file(path: Path, base_url: str, repo: Path, body: str) -> Path:
    path.write_text(
        f'version: 1\nproviders: {{fake: {{base_url: "{base_url}"}}}}\n'
        + body.replace("REPO", str(repo))
    )
    return path
