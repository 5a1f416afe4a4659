"""`--model local/foo` (or a task file's) names no model of the embedded engine: refused,
located, listing the known local models, before anything runs; it used to run SmolLM2
and label the results `local/foo`."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.cli import run_cli
from tests.support.fixtures import make_git_repo


def cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd)


def write(tmp_path: Path, model: str) -> Path:
    make_git_repo(tmp_path)
    path = tmp_path / "tasks.yaml"
    path.write_text(f"version: 1\ndefaults:\n  model: {model}\ntasks:\n  - {{id: a, prompt: hi}}\n")
    return path


def test_unknown_local_model_on_the_command_line_is_refused(tmp_path: Path) -> None:
    tasks = write(tmp_path, "local/smollm2")
    out = tmp_path / "out"
    res = cli("run", tasks, "--out", out, "--model", "local/foo", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert "local/foo" in res.stderr and "known models: local/smollm2" in res.stderr
    assert "--model" in res.stderr and "Traceback" not in res.stderr
    assert not (out / "report.json").exists()


def test_unknown_local_model_in_the_task_file_is_located(tmp_path: Path) -> None:
    tasks = write(tmp_path, "local/foo")
    res = cli("validate", tasks, "--offline", cwd=tmp_path)
    assert res.returncode == 2, res.stdout
    assert f"{tasks}:3" in res.stderr and "defaults.model" in res.stderr
    assert "known models: local/smollm2" in res.stderr


def test_the_known_local_model_validates(tmp_path: Path) -> None:
    tasks = write(tmp_path, "local/foo")
    res = cli("validate", tasks, "--offline", "--model", "local/smollm2", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "a: local/smollm2" in res.stdout
