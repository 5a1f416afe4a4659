"""`runner suite check`'s reading of a batch, and its bad inputs (exit 2, no traceback)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from runner.suite_cli import broken_tasks, guess_format, unreadable_tasks
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
    assert done.returncode == 2 and "not a folder of Harbor tasks" in done.stderr
    assert "Traceback" not in done.stderr
    done = run_cli("suite", "check", FIXTURES / "harbor", "--format", "nope")
    assert done.returncode == 2


def test_a_task_runner_cannot_read_is_listed_and_the_others_kept(tmp_path: Path) -> None:
    """Each task is read on its own: one that cannot be read is a located line, the rest
    are still checked; a solution runner cannot run keeps only oracle from the task."""
    shutil.copytree(FIXTURES / "terminal-bench", tmp_path / "tb")
    (tmp_path / "tb" / "hello" / "task.yaml").write_text("instruction: hi\nbogus: 1\n")
    broken = tmp_path / "tb" / "broken-verifier"
    (broken / "solution.sh").rename(broken / "solution.yaml")
    (tmp_path / "tb" / "notes").mkdir()
    ids, lines = unreadable_tasks(tmp_path / "tb", "terminal-bench")
    assert ids == {"oracle": [], "nop": ["broken-verifier"]}
    assert lines == [
        f"{tmp_path}/tb/notes: (folder): not a Terminal-Bench task: it has no task.yaml",
        "broken-verifier: oracle cannot run: "
        f"{broken}/solution.yaml: (file): not supported: it scripts keystrokes into "
        "Terminal-Bench's tmux session; give the solution as solution.sh",
        f"hello: cannot be read: {tmp_path}/tb/hello/task.yaml:2: bogus: unknown field; "
        "allowed: " + lines[-1].partition("allowed: ")[2],
    ]


def test_a_suite_with_no_task_to_run_is_exit_1_not_2(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "harbor", tmp_path / "harbor")
    at = {}
    for name in ("hello", "broken-verifier"):
        toml = tmp_path / "harbor" / name / "task.toml"
        text = toml.read_text().rstrip("\n") + "\n\n[[steps]]\nname = 'two'\n"
        toml.write_text(text)
        at[name] = text.splitlines().index("[[steps]]") + 1
    done = run_cli("suite", "check", tmp_path / "harbor")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "suite check: 2 problem(s) keep tasks from being checked:",
        *(
            f"  {name}: cannot be read: {tmp_path}/harbor/{name}/task.toml:{line}: steps: "
            "multi-step tasks are not supported: runner gives one instruction per run"
            for name, line in sorted(at.items())
        ),
    ]
    assert "Traceback" not in done.stderr
