"""The `run` step's refusals and skips, which all come before the runner starts: each
is checked here in process (nothing is run), with the outputs and summary it leaves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.github import main
from tests.support.gha import REPO, parse_output_file

TASKS = (
    "version: 1\n"
    "providers:\n  p: {base_url: 'http://127.0.0.1:9/v1', env_key: P_KEY}\n"
    "defaults: {model: p/m}\n"
    "tasks:\n  - {id: a, prompt: x, sandbox: SANDBOX}\n"
)


def run_step(
    tmp_path: Path, event_name: str, event: dict[str, object], *argv: str, **more: str
) -> tuple[int, dict[str, str], str]:
    """The step's exit code, outputs and job summary."""
    (tmp_path / "event.json").write_text(json.dumps(event))
    out, summary = tmp_path / "output", tmp_path / "summary.md"
    env = {
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_OUTPUT": str(out),
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_WORKSPACE": str(tmp_path),
        "RUNNER_TEMP": str(tmp_path / "temp"),
        **more,
    }
    code = main(["run", "--out", str(tmp_path / "out"), *argv], env=env)
    outputs = parse_output_file(out.read_text()) if out.exists() else {}
    return code, outputs, summary.read_text() if summary.exists() else ""


def task_file(tmp_path: Path, sandbox: str = "workspace-write") -> str:
    path = tmp_path / "tasks.yaml"
    path.write_text(TASKS.replace("SANDBOX", sandbox))
    return str(path)


PR = {
    "pull_request": {"number": 7, "head": {"sha": "abc", "repo": {"full_name": REPO}}},
    "sender": {"login": "alice"},
}
FORK = {**PR, "pull_request": {"number": 7, "head": {"sha": "abc", "repo": {"full_name": "m/w"}}}}


def test_a_bad_key_variable_name_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--task-file", task_file(tmp_path), "--api-key-env", "A-B; rm"]
    assert run_step(tmp_path, "schedule", {}, *argv)[0] == 2
    assert "api-key-env must be a variable name, got 'A-B; rm'" in capsys.readouterr().out


def test_push_on_a_pull_request_is_refused_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, outputs, _ = run_step(tmp_path, "pull_request", PR, "--push", "true", "--prompt", "x")
    assert (code, outputs) == (2, {})
    assert 'push: "true" is refused on pull_request events' in capsys.readouterr().out


@pytest.mark.parametrize(
    ("event", "why"),
    [
        (FORK, "GitHub passes no secrets to workflows of pull requests from forks"),
        ({"sender": {"login": "Dependabot[bot]"}}, "GitHub passes Dependabot's runs only"),
    ],
    ids=["fork", "dependabot"],
)
def test_a_run_without_its_key_where_github_gives_none_is_skipped(
    tmp_path: Path, event: dict[str, object], why: str
) -> None:
    code, outputs, summary = run_step(
        tmp_path, "pull_request", event, "--task-file", task_file(tmp_path)
    )
    assert code == 0 and outputs["skipped"].startswith(f"P_KEY is not set: {why}")
    assert summary.startswith("**runner** did not run: P\\_KEY is not set")


def test_the_pull_request_that_adds_the_runner_config_is_skipped(tmp_path: Path) -> None:
    argv = ["--task-file", ".github/runner/t.yaml", "--trusted-config", str(tmp_path / "base")]
    code, outputs, _ = run_step(tmp_path, "pull_request", PR, *argv)
    assert code == 0
    assert outputs["skipped"].startswith("the base branch has no .github/runner/t.yaml")


def test_a_prompt_file_outside_the_trusted_config_is_not_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "base").mkdir()
    (tmp_path / "prompt.md").write_text("review this\n")
    argv = [
        "--prompt-file",
        str(tmp_path / "prompt.md"),
        "--trusted-config",
        str(tmp_path / "base"),
    ]
    code, outputs, summary = run_step(tmp_path, "pull_request", PR, *argv)
    assert (code, outputs) == (0, {"exit-code": "2"})
    assert f"the prompt file {tmp_path / 'prompt.md'} is not inside" in capsys.readouterr().out
    assert "did not run: the task file reaches outside" in summary


def test_a_missing_prompt_file_off_pull_requests_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "nope.md")
    assert run_step(tmp_path, "schedule", {}, "--prompt-file", missing)[0] == 2
    assert f"prompt-file {missing}: no such file" in capsys.readouterr().out


def test_a_comment_command_runs_read_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--prompt", "x", "--pr-head", str(tmp_path), "--sandbox", "workspace-write"]
    argv += ["--pr-context", str(tmp_path / "context.md")]
    (tmp_path / "context.md").write_text("\n")
    assert run_step(tmp_path, "issue_comment", {}, *argv)[0] == 2
    assert "a comment command runs on the pull request's code, read-only" in (
        capsys.readouterr().out
    )


def test_no_unsandboxed_run_off_schedule_and_dispatch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--task-file", task_file(tmp_path, "danger-full-access")]
    assert run_step(tmp_path, "issues", {}, *argv, P_KEY="k")[0] == 2
    assert "sandbox: danger-full-access (a" in capsys.readouterr().out


def test_no_unsandboxed_run_with_the_key_in_the_steps_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--task-file", task_file(tmp_path, "danger-full-access"), "--keep-sudo", "true"]
    assert run_step(tmp_path, "schedule", {}, *argv, P_KEY="sk-secret-value")[0] == 2
    out = capsys.readouterr().out
    assert "P_KEY is in this step's environment" in out and "sk-secret-value" not in out


def test_an_unsandboxed_run_refuses_to_push_before_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--task-file", task_file(tmp_path, "danger-full-access"), "--keep-sudo", "true"]
    code, outputs, _ = run_step(tmp_path, "schedule", {}, *argv, "--push", "true")
    assert (code, outputs) == (2, {"unsandboxed": "true", "conclusion": "failure"})
    assert "push with a run without a sandbox (a" in capsys.readouterr().out
    assert not (tmp_path / "out").exists()
