"""The git repository a run starts from, for the benchmarks and the tests (tests/support
re-exports it: one way to make it)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def make_git_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    """A real repository with one commit on `main`, made without the user's git config."""
    path.mkdir(parents=True, exist_ok=True)
    for name, text in (files or {"README.md": "# sample\n"}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(path)}
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base"],
    ):
        subprocess.run(["git", *args], cwd=path, check=True, env=env)
    return path
