"""`python -m runner.github <command>`: the command line the composite action's steps call.

Why thin: each step lives in a module of its own concern (gate, prhead, run_step,
outcome, comments, pulls); this one only names the steps and their flags, so the action's
YAML and this parser can be read side by side.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path

from runner.errors import RunnerError
from runner.github.comments import cmd_comment
from runner.github.gate import ANY_USER_ACK, cmd_can_write
from runner.github.outcome import cmd_finish, cmd_outputs
from runner.github.prhead import cmd_pr_head
from runner.github.pulls import cmd_pull_requests
from runner.github.render import readme_with_docs
from runner.github.run_step import cmd_run
from runner.github.workflow_io import annotate
from runner.vocabulary import EXIT_BAD_INPUT, RunStatus


def cmd_docs(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    import yaml

    action = yaml.safe_load(Path(args.action).read_text(encoding="utf-8"))
    readme = Path(args.readme)
    readme.write_text(
        readme_with_docs(readme.read_text(encoding="utf-8"), action), encoding="utf-8"
    )
    return 0


def _statuses(text: str) -> frozenset[RunStatus]:
    """`--statuses`: run statuses from the one vocabulary; a misspelt one is an error, not
    a filter that silently matches nothing."""
    try:
        return frozenset(RunStatus(s.strip()) for s in text.split(",") if s.strip())
    except ValueError:
        allowed = ", ".join(s.value for s in RunStatus)
        raise argparse.ArgumentTypeError(f"{text!r}: each must be one of {allowed}") from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m runner.github", description="GitHub Actions steps of actions/run."
    )
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the runner with the action's inputs")
    run.add_argument("--task-file", default="")
    run.add_argument("--tasks", default="", help="a task file's YAML, inline")
    run.add_argument("--merge", default="", help="globs of shard report directories")
    run.add_argument("--out", required=True)
    run.add_argument("--models", default="")
    run.add_argument("--shard", default="")
    run.add_argument("--sandbox", default="auto")
    run.add_argument("--concurrency", default="")
    run.add_argument("--api-key-env", default="OPENAI_API_KEY")
    run.add_argument(
        "--api-key-fd", type=int, default=None, help="read the API key from this descriptor"
    )
    run.add_argument(
        "--keep-sudo",
        type=lambda v: v.strip().lower() == "true",
        default=False,
        help='"true": leave sudo to an unsandboxed agent',
    )
    run.add_argument(
        "--trusted-config",
        default="",
        help="a directory from the base branch the task file must stay inside",
    )
    run.add_argument("--prompt", default="", help="one task with this prompt")
    run.add_argument("--prompt-file", default="", help="one task with this file's prompt")
    run.add_argument("--model", default="", help="one provider/model (added to --models)")
    run.add_argument("--base-url", default="", help="endpoint of the prompt's provider")
    run.add_argument("--reasoning-effort", default="")
    run.add_argument("--extra-args", default="", help="more `runner run` flags")
    run.add_argument("--pr-head", default="", help="a comment command's PR checkout")
    run.add_argument("--pr-context", default="", help="text added to its prompt")
    run.add_argument("--push", default="false", help='the push input ("true": refused on PRs)')
    run.add_argument("--comment", default="auto", help="the comment input")
    run.add_argument(
        "--fail-on-task-failure",
        default="true",
        help="how an unsandboxed run, which no finish step follows, ends on exit 1",
    )
    run.set_defaults(func=cmd_run)
    head = sub.add_parser("pr-head", help="check out the PR of a comment command")
    head.add_argument("--token-env", default="GITHUB_TOKEN")
    head.set_defaults(func=cmd_pr_head)
    gate = sub.add_parser("can-write", help="the write-access gate of every event")
    gate.add_argument(
        "--mode", default="auto", help="auto (all but schedule, dispatch, push), true or false"
    )
    gate.add_argument("--token-env", default="GITHUB_TOKEN")
    gate.add_argument("--comment-tag", default="", help="checked here, used by the comment")
    gate.add_argument("--allow-users", default="", help="logins allowed without write access")
    gate.add_argument("--allow-bots", default="", help="bot logins allowed to trigger a run")
    gate.add_argument(
        "--allow-any-user", default="", help=f"{ANY_USER_ACK!r}: accept allow-users '*'"
    )
    gate.set_defaults(func=cmd_can_write)
    out = sub.add_parser("outputs", help="report.json -> $GITHUB_OUTPUT")
    out.add_argument("--report", required=True)
    out.add_argument("--allowed", default="true", help="the gate's output")
    out.add_argument("--reason", default="", help="why the gate refused")
    out.add_argument("--skipped", default="", help="why the run step skipped")
    out.add_argument("--exit-code", default="", help="the runner's exit code")
    out.add_argument("--batch-id", default=None, help="use a report of this batch only")
    out.set_defaults(func=cmd_outputs)
    com = sub.add_parser("comment", help="create or edit the PR comment")
    com.add_argument("--report", required=True)
    com.add_argument("--mode", default="auto", help="auto (on PR events), true or false")
    com.add_argument("--pr", type=int, default=None)
    com.add_argument("--artifact", default="")
    com.add_argument(
        "--author", default="", help="only edit a comment by this account (default: the token's)"
    )
    com.add_argument("--token-env", default="GITHUB_TOKEN")
    com.add_argument("--write", default="", help="also write the body to this file")
    com.add_argument("--notice", default="", help="the run was skipped: write nothing")
    com.add_argument("--tag", default="", help="which sticky comment (comment-tag)")
    com.add_argument("--batch-id", default=None, help="use a report of this batch only")
    com.set_defaults(func=cmd_comment)
    prs = sub.add_parser("pull-requests", help="push result branches, one PR per task")
    prs.add_argument("--report", required=True)
    prs.add_argument("--repo-dir", default=".")
    prs.add_argument(
        "--remote",
        default="",
        help="where to push (default: GITHUB_SERVER_URL/GITHUB_REPOSITORY.git, never the "
        "checkout's own config)",
    )
    prs.add_argument(
        "--author", default="", help="whose notices to edit (default: the token's login)"
    )
    prs.add_argument("--batch-id", default=None, help="use a report of this batch only")
    prs.add_argument("--base", default="")
    prs.add_argument("--branch-prefix", default="runner/nightly/")
    prs.add_argument(
        "--statuses",
        type=_statuses,
        default=frozenset({RunStatus.COMPLETED}),
        help="comma-separated run statuses that get a PR (default: completed)",
    )
    prs.add_argument("--token-env", default="GITHUB_TOKEN")
    prs.add_argument(
        "--reopen-closed", default="false", help='"true": a new PR after one closed unmerged'
    )
    prs.set_defaults(func=cmd_pull_requests)
    fin = sub.add_parser("finish", help="exit with the runner's code")
    fin.add_argument("--exit-code", default="")
    fin.add_argument("--fail-on-task-failure", default="true")
    fin.add_argument("--skipped", default="", help="why the run was skipped (exit 0)")
    fin.add_argument("--allowed", default="true", help="the gate's output")
    fin.add_argument("--conclusion", default="", help="the outputs step's conclusion")
    fin.add_argument("--outcomes", default="", help="step=outcome of the action's steps")
    fin.set_defaults(func=cmd_finish)
    docs = sub.add_parser("docs", help="write README's input and output tables")
    docs.add_argument("--action", required=True)
    docs.add_argument("--readme", required=True)
    docs.set_defaults(func=cmd_docs)
    return p


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args, os.environ if env is None else env)
    except RunnerError as exc:
        annotate("error", "runner", str(exc))
        return EXIT_BAD_INPUT
    return code
