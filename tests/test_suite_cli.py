"""`runner suite check`'s reading of a batch, and its bad inputs (exit 2, no traceback)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.suite_cli import broken_tasks, guess_format
from tests.support import paths
from tests.support.cli import run_cli

FIXTURES = paths.FIXTURES / "suites"


def run(agent: str, task: str, reward: float | None, status: str, error: str | None = None) -> Any:
    return {
        "id": f"{agent}-{task}",  # the check's own prefix is not what names the task
        "suite": f"harbor:{task}",
        "agent": agent,
        "model": f"agent/{agent}",
        "reward": reward,
        "status": status,
        "error": error,
    }


@pytest.mark.parametrize(
    ("runs", "listed"),
    [
        ([run("oracle", "a", 1.0, "completed"), run("nop", "a", 0.0, "check_failed")], []),
        (
            [run("oracle", "a", 0.0, "check_failed")],
            ["a: oracle got reward 0, wants 1 (check_failed)"],
        ),
        ([run("nop", "a", 1.0, "completed")], ["a: nop got reward 1, wants 0 (completed)"]),
        (
            [run("oracle", "a", 0.5, "check_failed")],
            ["a: oracle got reward 0.5, wants 1 (check_failed)"],
        ),
        (
            [run("nop", "a", None, "error", "verifier failed: x")],
            ["a: nop got no reward, wants 0 (error): verifier failed: x"],
        ),
        ([run("oracle", "a.b", 1.0, "completed")], []),
        # Stopped by the user (mid-build too): not scored, so not broken.
        ([run("oracle", "a", None, "interrupted", "interrupted by a signal")], []),
        ([run("nop", "a", None, "skipped", "interrupted before it started")], []),
    ],
)
def test_broken_tasks(runs: list[Any], listed: list[str]) -> None:
    assert broken_tasks({"runs": runs}) == listed


def test_guess_format() -> None:
    assert guess_format(FIXTURES / "harbor") == "harbor"
    assert guess_format(FIXTURES / "harbor" / "hello") == "harbor"
    assert guess_format(FIXTURES / "terminal-bench") == "terminal-bench"
    assert guess_format(FIXTURES / "swe-bench" / "instances.jsonl") == "swe-bench"
    assert guess_format(FIXTURES) is None


def test_bad_input_is_exit_2(tmp_path: Path) -> None:
    done = run_cli("suite", "check", tmp_path)
    assert done.returncode == 2 and "give --format" in done.stderr
    done = run_cli("suite", "check", tmp_path / "nowhere", "--format", "harbor")
    assert done.returncode == 2 and "is not a directory" in done.stderr
    assert "Traceback" not in done.stderr
    done = run_cli("suite", "check", FIXTURES / "harbor", "--format", "nope")
    assert done.returncode == 2
