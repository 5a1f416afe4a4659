"""The `comment` step: the run's one sticky comment on the pull request or issue, or a
new comment answering a comment command.

Why apart: it writes into the thread people read, so it holds the rules for when to
stay silent (a skipped run, an event with nowhere to write) and for when GitHub's refusal
is expected (a fork's read-only token).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from runner.config.secrets import secrets_from_env
from runner.errors import RunnerError
from runner.github.context import REPLY_MARKER, Context, summary_marker
from runner.github.render import render_comment
from runner.github.rest import GitHub, add_comment, token_login, upsert_comment
from runner.github.workflow_io import annotate, github_token, load_report
from runner.redact import Redactor


def cmd_comment(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """The run's comment. On a comment command (an event with a `comment`) a new comment
    answers it; otherwise the sticky comment of `--tag` is edited or created. A skipped
    run writes nothing: its reason (a refused stranger, a bot) is in the log and in the
    `notice` output, never in the thread, where it would bury the review. With `auto`
    an event with no issue or pull request to write to (a discussion, a commit comment)
    gets no comment and stays green; `true` there is a configuration error. A comment
    GitHub refuses fails the step (so `conclusion` is failure), except on a fork's pull
    request, whose token GitHub makes read-only whatever the workflow asks."""
    ctx = Context.from_env(env)
    mode = args.mode.strip().lower()
    if mode not in ("auto", "true", "false"):
        raise RunnerError(f"comment must be auto, true or false; got {args.mode!r}")
    marker = summary_marker(args.tag)
    reply = bool(ctx.comment)
    number = args.pr or ctx.issue_number
    if mode == "false" or (mode == "auto" and ctx.pr_number is None and not reply):
        return 0
    if number is None:
        if mode == "true":
            raise RunnerError(
                f"comment: true, but this {ctx.event_name or 'unnamed'} event is not about "
                "a pull request or issue; set comment to auto or false"
            )
        annotate(
            "notice",
            "runner comment",
            f"no comment: a {ctx.event_name or 'unnamed'} event has no pull request or "
            "issue to write to (the summary is in the job summary)",
        )
        return 0
    if args.notice.strip():
        print("comment: none for a skipped run (the reason is the notice output)")
        return 0
    report = load_report(Path(args.report), args.batch_id)
    if report is None:
        return 0
    body = render_comment(
        report, ctx, artifact=args.artifact, marker=REPLY_MARKER if reply else marker
    )
    body = Redactor(secrets_from_env(env))(body)
    if args.write:
        Path(args.write).write_text(body, encoding="utf-8")
    gh = GitHub(ctx.api_url, github_token(env, args.token_env))
    try:
        if reply:
            how, comment_id = "created", add_comment(gh, ctx.repository, number, body)
        else:
            author = args.author.strip() or token_login(gh)
            how, comment_id = upsert_comment(
                gh, ctx.repository, number, body, author=author, marker=marker
            )
    except RunnerError as exc:
        if ctx.from_fork:  # expected: the summary is still in the job summary
            annotate("warning", "runner comment", f"{exc} (a fork's token is read-only)")
            return 0
        raise RunnerError(
            f"comment: could not write to #{number}: {exc}. Give the job `permissions: "
            "pull-requests: write` (and `issues: write` for issues), or a github-token "
            "that has them; or set comment: false"
        ) from None
    finally:
        gh.close()
    print(f"comment {comment_id} {how} on #{number}")
    return 0
