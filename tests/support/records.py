"""A run and an agent outcome built without running anything, for the record and report tests."""

from __future__ import annotations

from pathlib import Path

from runner.agent import Outcome
from runner.config import Run, expand, load_task_file
from runner.items import Usage
from runner.vocabulary import RunStatus


def a_task(tmp_path: Path, extra: str = "") -> Run:
    path = tmp_path / "tasks.yaml"
    path.write_text(
        "version: 1\nproviders:\n  p: {base_url: 'http://127.0.0.1:9/v1'}\n"
        f"defaults: {{model: p/m}}\ntasks:\n  - {{id: t, prompt: go, repo: .{extra}}}\n"
    )
    (task,) = expand(load_task_file(path), tmp_path, file=str(path))
    return task


def outcome(status: RunStatus, error: str | None = None, final: str | None = "done") -> Outcome:
    return Outcome(status, final, error, (), (), Usage(), 0, 1, 0.1)
