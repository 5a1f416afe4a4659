"""The `pr-head` step: a comment command's pull request, checked out read-only with its
diff for the prompt.

Why its own step and module: on `issue_comment` the job's checkout is the default branch,
and it must stay so (the trusted config comes from it); the PR's code goes to a
repository of its own that keeps no credentials.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path

from runner.errors import RunnerError
from runner.github.context import Context
from runner.github.rest import GitHub
from runner.github.workflow_io import annotate, github_token, write_outputs

DIFF_LIMIT = 100_000
"""Characters of a pull request's diff put into a comment command's prompt."""


def _fence(text: str) -> str:
    """A backtick fence longer than any backtick run in `text`, so it cannot close early."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def cmd_pr_head(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """A comment command on a pull request (`issue_comment`, for which the job's checkout
    is the default branch): the PR's head, fetched into a new repository of its own that
    keeps no credentials and no remote, and its diff (as GitHub shows it) for the prompt.
    The job's checkout stays as it is, so a `prompt-file` or `trusted-config` is still
    the default branch's. Outputs `dir` (the checkout) and `context` (a file with the
    text added to the prompt); nothing on other events."""
    from runner.safe_markdown import cut
    from runner.workspace import fetch_detached_sync
    from runner.workspace.git import read_git

    ctx = Context.from_env(env)
    number = ctx.pr_number
    if ctx.event_name != "issue_comment" or number is None:
        return 0
    token = github_token(env, args.token_env)
    gh = GitHub(ctx.api_url, token)
    path = f"/repos/{ctx.repository}/pulls/{number}"
    try:
        pr = gh.request("GET", path)
        try:
            diff: str | None = gh.request("GET", path, media="application/vnd.github.diff")
        except RunnerError as exc:  # GitHub gives no diff for a very large PR (406)
            annotate("warning", "runner", f"the diff of #{number} is not in the prompt: {exc}")
            diff = None
    finally:
        gh.close()
    head = str(((pr or {}).get("head") or {}).get("sha") or "")
    base = str(((pr or {}).get("base") or {}).get("ref") or "the base branch")
    if not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", head):
        raise RunnerError(f"GitHub GET {path}: no head commit in the answer")
    workspace = Path(env.get("GITHUB_WORKSPACE") or os.getcwd())
    origin = read_git(workspace, "remote", "get-url", "origin")
    url = origin.stdout.strip() if origin.returncode == 0 else ""
    url = url or f"{ctx.server_url}/{ctx.repository}.git"
    folder = Path(env.get("RUNNER_TEMP") or os.getcwd()) / f"runner-pr-{secrets.token_hex(4)}"
    got = fetch_detached_sync(folder / str(number), url, f"refs/pull/{number}/head", token=token)
    if got != head:
        raise RunnerError(
            f"pull request #{number} moved while the run started (GitHub says {head[:12]}, "
            f"its head ref is {got[:12]}); send the command again"
        )
    lines = [
        "",
        "",
        "---",
        f"This comment is on pull request #{number}. Your working directory is that pull "
        f"request's head (commit {head}), read-only.",
    ]
    if diff is not None:
        shown, was_cut = cut(diff, DIFF_LIMIT)
        fence = _fence(shown)
        lines += [
            f"Its diff against `{base}`"
            + (f" (cut at {DIFF_LIMIT:,} characters)" if was_cut else "")
            + ":",
            "",
            f"{fence}diff",
            shown,
            fence,
        ]
    context = folder / "context.md"
    context.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"pull request #{number}: head {head} checked out read-only")
    write_outputs({"dir": str(folder / str(number)), "context": str(context)}, env)
    return 0
