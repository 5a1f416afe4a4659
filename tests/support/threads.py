"""Issue and PR thread scenarios: the events GitHub sends and a bare remote with a PR."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from runner.reports.model import Report
from tests.support.fixtures import make_git_repo
from tests.support.gha import GITHUB_TOKEN, REPO, FakeGitHub


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def comment_event(sender: dict[str, Any], body: str = "/runner explain this") -> dict[str, Any]:
    """`issue_comment` on PR #7: GitHub sends the PR as an issue with a `pull_request` key."""
    return {
        "action": "created",
        "issue": {"number": 7, "pull_request": {"url": "x"}, "user": {"login": "alice"}},
        "comment": {
            "id": 55,
            "body": body,
            "user": sender,
            "html_url": f"https://github.test/{REPO}/pull/7#issuecomment-55",
        },
        "sender": sender,
        "repository": {"full_name": REPO, "default_branch": "main"},
    }


def pr_remote(tmp: Path) -> tuple[Path, Path, str, str]:
    """A bare "GitHub" remote whose default branch is `main` and whose PR #7 (in
    refs/pull/7/head, as GitHub keeps it) changes src/app.py; the job's checkout is main,
    as `actions/checkout` makes it on `issue_comment`. (checkout, remote, base, head)"""
    origin = tmp / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True)
    author = make_git_repo(tmp / "author", {"README.md": "# widgets\n", "src/app.py": "x = 1\n"})
    base = git(author, "rev-parse", "HEAD")
    git(author, "push", "-q", str(origin), "HEAD:refs/heads/main")
    (author / "src/app.py").write_text("x = 2  # changed by the pull request\n")
    git(author, "commit", "-qam", "the change")
    head = git(author, "rev-parse", "HEAD")
    git(author, "push", "-q", str(origin), "HEAD:refs/pull/7/head")
    checkout = tmp / "ws"
    subprocess.run(["git", "clone", "-q", str(origin), str(checkout)], check=True)
    return checkout, origin, base, head


HOSTILE = "see acme/victim#1 and www.evil.example or https://evil.example/x, ask @octocat"


def report_file(path: Path, error: str = HOSTILE) -> Path:
    """A report with one failed run whose error text is the model server's."""
    task: dict[str, Any] = {
        "id": "review",
        "model": "p/m",
        "status": "failed",
        "error": error,
        "final_message": None,
        "turns_completed": 0,
        "tool_calls": 0,
        "duration_s": 1.0,
        "usage": {},
        "requests": [],
        "events_file": "e",
    }
    totals = {
        "tasks": 1,
        "completed": 0,
        "not_completed": 1,
        "requests": 1,
        "tool_calls": 0,
        "usage": {},
    }
    report = {
        "batch_id": "r1",
        "task_file": "t.yaml",
        "started_at": "s",
        "finished_at": "f",
        "duration_s": 1.0,
        "tasks": [task],
        "totals": totals,
    }
    path.write_text(Report.model_validate(report).model_dump_json())
    return path


PR_EVENT: dict[str, Any] = {
    "number": 7,
    "action": "synchronize",
    "pull_request": {
        "number": 7,
        "user": {"login": "alice"},
        "head": {"sha": "abc", "repo": {"full_name": REPO}},
    },
    "sender": {"login": "alice"},
    "repository": {"full_name": REPO, "default_branch": "main"},
}
"""A pull request from a branch of this repository: the write-access gate needs no API."""


def step_env(
    tmp: Path, github: FakeGitHub, event_name: str, event: dict[str, Any]
) -> dict[str, str]:
    """The variables GitHub gives a step for `event`, with the fake GitHub as the API."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "event.json").write_text(json.dumps(event))
    return {
        "GITHUB_EVENT_PATH": str(tmp / "event.json"),
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_API_URL": github.url,
        "GITHUB_SERVER_URL": "https://github.test",
        "GITHUB_TOKEN": GITHUB_TOKEN,
    }
