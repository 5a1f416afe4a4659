"""The `pr-head` step: a comment command's pull request fetched read-only into a
repository of its own, and its diff fenced for the prompt."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.github import main
from runner.github.prhead import DIFF_LIMIT, _fence
from tests.support.gha import GITHUB_TOKEN, FakeGitHub, parse_output_file
from tests.support.threads import PR_EVENT, comment_event, git, pr_remote, step_env

WRITER = {"login": "alice", "type": "User"}


def pr_head(tmp_path: Path, env: dict[str, str]) -> tuple[int, dict[str, str]]:
    out = tmp_path / "output"
    env = {**env, "GITHUB_OUTPUT": str(out), "RUNNER_TEMP": str(tmp_path / "temp")}
    code = main(["pr-head"], env=env)
    return code, parse_output_file(out.read_text()) if out.exists() else {}


def test_the_fence_is_longer_than_any_backtick_run() -> None:
    assert _fence("no backticks") == "```"
    assert _fence("a ``` b ````` c `") == "``````"


@pytest.mark.parametrize(
    ("event_name", "event"),
    [
        ("pull_request", PR_EVENT),
        ("issue_comment", {"issue": {"number": 3}, "comment": {"body": "/runner x"}}),
    ],
    ids=["not a comment", "a comment on an issue"],
)
def test_only_a_comment_on_a_pull_request_checks_anything_out(
    github: FakeGitHub, tmp_path: Path, event_name: str, event: dict[str, object]
) -> None:
    env = step_env(tmp_path, github, event_name, event)
    assert pr_head(tmp_path, env) == (0, {}) and not github.log


def test_the_pull_requests_head_is_checked_out_with_its_diff(
    github: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout, _, _, head = pr_remote(tmp_path)
    diff = "diff --git a/src/app.py b/src/app.py\n+x = 2 ```` fence\n" + "y" * DIFF_LIMIT
    github.pr_details[7] = {"head": {"sha": head}, "base": {"ref": "main"}, "diff": diff}
    env = {**step_env(tmp_path, github, "issue_comment", comment_event(WRITER))}
    env["GITHUB_WORKSPACE"] = str(checkout)
    monkeypatch.chdir(checkout)
    code, outputs = pr_head(tmp_path, env)
    assert code == 0, outputs
    folder = Path(outputs["dir"])
    assert (
        git(folder, "rev-parse", "HEAD") == head
        and git(checkout, "branch", "--show-current") == "main"
    )
    assert "changed by the pull request" in (folder / "src/app.py").read_text()
    assert git(folder, "remote") == ""
    assert GITHUB_TOKEN not in (folder / ".git/config").read_text()
    context = Path(outputs["context"]).read_text()
    assert (
        f"pull request #7. Your working directory is that pull request's head (commit {head})"
        in context
    )
    assert f"Its diff against `main` (cut at {DIFF_LIMIT:,} characters):" in context
    assert "\n`````diff\n" in context and context.endswith("\n`````\n")


def test_an_answer_without_a_head_commit_is_exit_2(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    github.pr_details[7] = {"head": {"sha": "--upload-pack=x"}, "base": {}, "diff": ""}
    env = step_env(tmp_path, github, "issue_comment", comment_event(WRITER))
    assert pr_head(tmp_path, env) == (2, {})
    assert "GitHub GET /repos/octo/widgets/pulls/7: no head commit in the answer" in (
        capsys.readouterr().out
    )


def test_a_pull_request_that_moved_is_refused(
    github: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    checkout, _, base, _ = pr_remote(tmp_path)
    github.pr_details[7] = {"head": {"sha": base}, "base": {"ref": "main"}, "diff": ""}
    env = {**step_env(tmp_path, github, "issue_comment", comment_event(WRITER))}
    env["GITHUB_WORKSPACE"] = str(checkout)
    monkeypatch.chdir(checkout)
    assert pr_head(tmp_path, env) == (2, {})
    assert f"pull request #7 moved while the run started (GitHub says {base[:12]}" in (
        capsys.readouterr().out
    )
