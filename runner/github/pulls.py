"""The `pull-requests` step: nightly results pushed to one branch per task, each with one
pull request, opened once and then updated.

Why apart: it is the step that writes to the repository, so the rules that keep it from
overwriting a person's work (compare-and-swap from a commit the runner wrote, a PR closed
unmerged not reopened) stay together.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runner.config.secrets import secrets_from_env
from runner.errors import RunnerError
from runner.github.context import MOVED_MARKER, Context
from runner.github.render import inline as inert
from runner.github.render import render_pr_body
from runner.github.rest import GitHub, pulls_from, token_login, upsert_comment, upsert_pull_request
from runner.github.workflow_io import (
    annotate,
    append_summary,
    github_token,
    load_report,
    write_outputs,
)
from runner.redact import Redactor
from runner.reports.fmt import inline

PRS_FORBIDDEN = "GitHub Actions is not permitted to create or approve pull requests"
"""GitHub's 403 message when the repository does not let workflows open pull requests."""
PUSH_RIGHTS = (
    "; if GitHub refused it, give the job `permissions: contents: write` and "
    "`pull-requests: write`, or a github-token that has them"
)
"""What to fix when a push or a pull request failed (the step then fails)."""
PRS_SETTING = (
    'Settings > Actions > General > "Allow GitHub Actions to create and approve pull requests"'
)


def _tell_pr(
    gh: GitHub, repo: str, pr: Mapping[str, Any] | None, run: str, text: str, author: str
) -> None:
    """A notice on the task's open PR, one per PR (edited, not repeated every night):
    found among the comments of `author` (comment-author), else of the token's login."""
    if pr is None:
        return
    marker = MOVED_MARKER.format(run=run)
    try:
        upsert_comment(
            gh,
            repo,
            int(pr["number"]),
            f"{marker}\n{text}\n",
            author=author.strip() or token_login(gh),
            marker=marker,
        )
    except RunnerError as exc:
        annotate("warning", "runner pull request", f"{run}: {exc}")


def cmd_pull_requests(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """One branch `branch-prefix + run` and one PR per task. The branch moves only by
    compare-and-swap from a commit the runner wrote (a person's commits on it are never
    overwritten), a PR closed without merging is not opened again unless
    `--reopen-closed true`, and the outputs name what was actually pushed, PR or not."""
    from runner.workspace import WorkspaceError, remote_tip, swap_branch_sync

    ctx = Context.from_env(env)
    if ctx.foreign_code:
        raise RunnerError(
            f"push: runs on a pull request's code ({ctx.event_name}) never push; the "
            "patches are in the report artifact"
        )
    reopen = args.reopen_closed.strip().lower()
    if reopen not in ("true", "false"):
        raise RunnerError(f'reopen-closed must be "true" or "false"; got {args.reopen_closed!r}')
    report = load_report(Path(args.report), args.batch_id)
    if report is None:
        return 0
    token = github_token(env, args.token_env)
    # Never the checkout's remote: whatever ran in the job could have pointed its push URL
    # at a server of its own, and the token goes wherever we push.
    remote = args.remote or f"{ctx.server_url.rstrip('/')}/{ctx.repository}.git"
    redact = Redactor(secrets_from_env(env))
    base = args.base or str(
        ((ctx.event or {}).get("repository") or {}).get("default_branch") or "main"
    )
    repo_dir = Path(args.repo_dir)
    gh = GitHub(ctx.api_url, token)
    made: dict[str, str] = {}
    kept: dict[str, str] = {}
    failures = 0
    try:
        for t in report.runs:
            r = t.result
            if r is None or r.branch is None or t.status not in args.statuses:
                continue
            run = t.run or t.id
            stable = f"{args.branch_prefix}{run}"
            try:
                prs = pulls_from(gh, ctx.repository, stable, base)
                open_pr = next((p for p in prs if p.get("state") == "open"), None)
                if open_pr is None and prs and not prs[0].get("merged_at") and reopen != "true":
                    annotate(
                        "notice",
                        "runner pull request",
                        f"{run}: pull request #{prs[0]['number']} was closed without merging, "
                        f'so {stable} is left as it is (reopen-closed: "true" opens a new one)',
                    )
                    continue
                tip, recorded = remote_tip(repo_dir, stable, remote=remote, token=token)
                moved = tip is not None and tip != recorded
                if not moved:
                    try:
                        swap_branch_sync(
                            repo_dir,
                            r.commit,
                            stable,
                            remote=remote,
                            expected=tip,
                            recorded=recorded,
                            token=token,
                        )
                    except WorkspaceError:
                        if remote_tip(repo_dir, stable, remote=remote, token=token)[0] == tip:
                            raise
                        moved = True  # a push came in between: the lease refused ours
                if moved:
                    text = (
                        f"**runner** left `{stable}` alone: someone else moved it (its tip is "
                        f"not the commit runner last pushed there), so the result of "
                        f"**{inert(run)}** was not pushed. Runner updates the branch again once "
                        "its tip is that commit again, or after the branch is deleted (merging "
                        "this pull request with branch deletion does that)."
                    )
                    annotate(
                        "notice",
                        "runner pull request",
                        f"{run}: {stable} moved by someone else; left alone",
                    )
                    _tell_pr(gh, ctx.repository, open_pr, run, text, args.author)
                    continue
                kept[run] = stable
                if r.pushed and stable != r.branch:
                    gh.request(
                        "DELETE",
                        f"/repos/{ctx.repository}/git/refs/heads/{r.branch}",
                        ok=(404, 422),
                    )
                try:
                    how, url = upsert_pull_request(
                        gh,
                        ctx.repository,
                        head=stable,
                        base=base,
                        title=f"runner: {run}",
                        body=redact(render_pr_body(t, report, ctx)),
                    )
                except RunnerError as exc:
                    if PRS_FORBIDDEN not in str(exc):
                        raise
                    why = (
                        f"{run}: pushed {stable}, but this repository does not let GitHub "
                        f"Actions open pull requests; enable {PRS_SETTING}, or open it by hand"
                    )
                    # The setting is optional: the branch and the outputs are the result.
                    annotate("notice", "runner pull request", why)
                    append_summary(f"**runner**: {inline(why)}.\n", env)
                    continue
            except RunnerError as exc:  # WorkspaceError included
                failures += 1
                annotate("error", "runner pull request", f"{run}: {redact(str(exc))}{PUSH_RIGHTS}")
                continue
            made[run] = url
            print(f"{run}: pull request {how}: {url}")
    finally:
        gh.close()
    write_outputs(
        {
            "pull-requests": json.dumps(made, sort_keys=True),
            "branches": json.dumps(kept, sort_keys=True),
            "branch": next(iter(kept.values())) if len(kept) == 1 else "",
            "pr-url": next(iter(made.values())) if len(made) == 1 else "",
        },
        env,
    )
    return 1 if failures else 0
