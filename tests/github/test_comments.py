"""The `comment` step: one sticky comment per tag, edited by the account that wrote it;
a refused comment fails the step except on a fork; an event with nowhere to write sends
nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.github import ACTIONS_BOT, MARKER, main
from runner.reports.model import Report
from tests.support.gha import PAT, REPO, FakeGitHub
from tests.support.threads import PR_EVENT, report_file, step_env


def test_comment_without_write_access_fails_the_step_except_on_a_fork(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A comment GitHub refuses is the Action's own failure (exit 2, an error saying
    which permission to give); a fork's PR, whose token GitHub makes read-only, only
    warns and the job goes on."""
    report = empty_report(tmp_path / "report.json")
    event = tmp_path / "event.json"
    event.write_text(json.dumps(PR_EVENT))
    env = {
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_API_URL": github.url,
        "GITHUB_TOKEN": "ghs_wrongtoken123456",
    }
    assert main(["comment", "--report", str(report)], env=env) == 2
    out = capsys.readouterr().out
    assert "::error title=runner::comment: could not write to #7: " in out
    assert "HTTP 401" in out and "permissions: pull-requests: write" in out
    assert "ghs_wrongtoken123456" not in out and not github.comments
    fork = {**PR_EVENT, "pull_request": {"number": 7, "head": {"repo": {"full_name": "m/w"}}}}
    event.write_text(json.dumps(fork))
    assert main(["comment", "--report", str(report)], env=env) == 0
    out = capsys.readouterr().out
    assert "::warning title=runner comment::" in out and "a fork's token is read-only" in out
    event.write_text(json.dumps(PR_EVENT))
    # Not a PR event and comment: auto: nothing is sent at all.
    env["GITHUB_EVENT_PATH"] = ""
    github.log.clear()
    assert main(["comment", "--report", str(report)], env=env) == 0 and not github.log
    # A broken event file is bad input, not a traceback.
    event.write_text("{not json")
    env["GITHUB_EVENT_PATH"] = str(event)
    assert main(["comment", "--report", str(report)], env=env) == 2


def empty_report(path: Path) -> Path:
    path.write_text(
        Report.model_validate(
            {
                "batch_id": "r1",
                "task_file": "t.yaml",
                "started_at": "s",
                "finished_at": "f",
                "duration_s": 1.0,
                "tasks": [],
                "totals": {
                    "tasks": 0,
                    "completed": 0,
                    "not_completed": 0,
                    "requests": 0,
                    "tool_calls": 0,
                    "usage": {},
                },
            }
        ).model_dump_json()
    )
    return path


def test_comment_with_a_personal_token_is_edited_not_reposted(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With a custom github-token the comment is written by that account, not by
    github-actions[bot]: the next run must find it by that login."""
    report = empty_report(tmp_path / "report.json")
    event = tmp_path / "event.json"
    event.write_text(json.dumps(PR_EVENT))
    # An old comment of ours written with the workflow's token: not this token's.
    github.comments[1] = {
        "id": 1,
        "issue": 7,
        "body": f"{MARKER} old",
        "user": {"login": ACTIONS_BOT},
    }
    env = {
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_API_URL": github.url,
        "GITHUB_TOKEN": PAT,
    }
    for _ in range(3):
        assert main(["comment", "--report", str(report)], env=env) == 0
    assert len(github.calls("POST", r"/comments$")) == 1
    ours = max(github.comments)
    assert github.comments[ours]["user"]["login"] == "octo-bot"
    assert [c[1] for c in github.calls("PATCH")] == [f"/repos/{REPO}/issues/comments/{ours}"] * 2
    assert len(github.calls("GET", "^/user$")) == 3
    assert github.comments[1]["body"] == f"{MARKER} old"
    # comment-author given: no `GET /user`, that login's comment is the one edited.
    github.log.clear()
    assert main(["comment", "--report", str(report), "--author", ACTIONS_BOT], env=env) == 0
    assert not github.calls("GET", "^/user$")
    assert [c[1] for c in github.calls("PATCH")] == [f"/repos/{REPO}/issues/comments/1"]
    assert PAT not in capsys.readouterr().out


def test_each_comment_tag_keeps_its_own_sticky_comment(github: FakeGitHub, tmp_path: Path) -> None:
    report = report_file(tmp_path / "report.json")
    env = step_env(tmp_path, github, "pull_request", PR_EVENT)
    # A comment from before tags existed: the default tag still finds it.
    github.comments[1] = {
        "id": 1,
        "issue": 7,
        "body": f"{MARKER}\nold",
        "user": {"login": ACTIONS_BOT},
    }
    for tag in ("", "review", "explain", "review", ""):
        assert main(["comment", "--report", str(report), "--tag", tag], env=env) == 0
    bodies = {c["id"]: c["body"].split("\n", 1)[0] for c in github.comments.values()}
    assert sorted(bodies.values()) == sorted(
        [MARKER, "<!-- runner:summary:review -->", "<!-- runner:summary:explain -->"]
    )
    assert bodies[1] == MARKER
    # Two new comments (review, explain); every later run edited its own.
    assert len(github.calls("POST", r"/comments$")) == 2
    patched = [c[1].rsplit("/", 1)[1] for c in github.calls("PATCH")]
    review = next(i for i, b in bodies.items() if b.endswith(":review -->"))
    assert patched == ["1", str(review), "1"]


@pytest.mark.parametrize("tag", ["a b", "x-->", "-x", "é", "a" * 65])
def test_a_bad_comment_tag_is_refused_with_exit_2(
    github: FakeGitHub, tmp_path: Path, tag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    report = report_file(tmp_path / "report.json")
    env = step_env(tmp_path, github, "pull_request", PR_EVENT)
    # As the step passes it: --tag="$TAG" (a value may start with "-").
    assert main(["comment", "--report", str(report), f"--tag={tag}"], env=env) == 2
    out = capsys.readouterr().out
    assert "::error title=runner::comment-tag must be 1-64 letters" in out
    assert not github.log


def test_a_bad_mode_or_true_with_nowhere_to_write_is_exit_2(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = str(report_file(tmp_path / "report.json"))
    env = step_env(tmp_path, github, "schedule", {})
    assert main(["comment", "--report", report, "--mode", "sometimes"], env=env) == 2
    assert main(["comment", "--report", report, "--mode", "true"], env=env) == 2
    out = capsys.readouterr().out
    assert "::error title=runner::comment must be auto, true or false; got 'sometimes'" in out
    assert "comment: true, but this schedule event is not about a pull request or issue" in out
    assert main(["comment", "--report", report, "--mode", "auto"], env=env) == 0
    assert not github.log


def test_a_skipped_run_writes_nothing_into_the_thread(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = step_env(tmp_path, github, "pull_request", PR_EVENT)
    argv = ["comment", "--report", str(tmp_path / "none.json"), "--notice", "bob is a reader"]
    assert main(argv, env=env) == 0 and not github.log
    assert "bob" not in capsys.readouterr().out  # the reason is the notice output's


def test_a_comment_command_is_answered_anew_each_time(github: FakeGitHub, tmp_path: Path) -> None:
    event = {
        "issue": {"number": 7, "pull_request": {}},
        "comment": {"html_url": f"https://github.test/{REPO}/pull/7#issuecomment-5"},
        "sender": {"login": "alice"},
    }
    env = step_env(tmp_path, github, "issue_comment", event)
    report = str(report_file(tmp_path / "report.json"))
    for _ in range(2):
        assert main(["comment", "--report", report], env=env) == 0
    assert len(github.calls("POST", rf"^/repos/{REPO}/issues/7/comments$")) == 2
    assert not github.calls("PATCH") and not github.calls("GET", "^/user$")
    assert all(c["body"].startswith("<!-- runner:reply -->") for c in github.comments.values())


def test_a_secret_in_the_report_never_reaches_the_comment(
    github: FakeGitHub, tmp_path: Path
) -> None:
    key = "sk-comment-canary-0123456789abcdef"
    report = str(report_file(tmp_path / "report.json", error=f"upstream echoed {key}"))
    env = {**step_env(tmp_path, github, "pull_request", PR_EVENT), "OPENAI_API_KEY": key}
    written = tmp_path / "body.md"
    assert main(["comment", "--report", report, "--write", str(written)], env=env) == 0
    (posted,) = github.comments.values()
    assert "upstream echoed" in posted["body"] and key not in posted["body"]
    assert written.read_text() == posted["body"]
