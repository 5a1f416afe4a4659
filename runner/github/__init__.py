"""GitHub Actions glue for `actions/run`: what the composite action does besides installing.

It lives here rather than in the action's YAML so that it is typed, linted and tested like
the rest: the YAML only passes inputs through `env:` and calls `python -m runner.github`.

One module per step; `commands.py` only parses the command line (and holds `docs`, which
writes README's tables of the action's inputs and outputs):

    can-write      gate.py: the write-access gate of every event but schedule,
                   workflow_dispatch and push: the event's sender and the author of the
                   PR, issue, discussion or comment (a workflow_run's actors) have write
                   permission (or are in allow-users); a bot only when in allow-bots;
                   pull_request_target refused
    pr-head        prhead.py: a comment command's pull request, checked out read-only,
                   and its diff for the prompt
    run            run_step.py: the `runner run` command line from the action's inputs (a
                   one-task file made from `prompt`/`prompt-file`, or `runner report
                   merge` of shard reports; task_input.py); the API key comes in on a
                   pipe and goes on to the runner on its stdin (`--secret-fd`), in no
                   process's environment (launch.py); a run without a sandbox is refused
                   except on schedule and workflow_dispatch, and sudo is dropped before
                   one (sudo.py); with `--trusted-config` it first refuses a task file
                   that makes the runner read or start anything from outside that
                   (base-branch) directory. Expected situations (a fork's or Dependabot's
                   PR without the key, the PR that adds the runner config) skip the run
                   with a notice
    outputs        outcome.py: report.json -> $GITHUB_OUTPUT (conclusion, final-message,
                   runs, cost, ...)
    comment        comments.py: one sticky PR comment: found by its marker and edited,
                   else created once
    pull-requests  pulls.py: push result branches; one PR per task, opened once and then
                   updated
    finish         outcome.py: the runner's exit code -> the step's (exit 1 is optional; a
                   skip is 0), and the final `conclusion` (failure when a step of the
                   action failed)

What every step writes to the job (annotations, outputs, the summary) goes through
workflow_io.py.

Everything a task produced (ids, messages, branches) is untrusted: it goes into Markdown only
through `inline`/`cell`, or, for final messages, through `safe_markdown.render`, so a model
cannot add links, images, HTML or mentions.

Every Python this module starts runs with `-I`: the step's working directory is the checked
out repository (on pull requests, the PR's code), and plain `python -m runner` would import a
`runner/` package from there before the installed one.
"""

from runner.github.commands import main
from runner.github.context import (
    ACTIONS_BOT,
    MARKER,
    Context,
    parse_models,
    sandbox_for,
    trust_problems,
)
from runner.github.render import format_outputs, outputs_for, readme_with_docs, render_comment

__all__ = [
    "ACTIONS_BOT",
    "MARKER",
    "Context",
    "format_outputs",
    "main",
    "outputs_for",
    "parse_models",
    "readme_with_docs",
    "render_comment",
    "sandbox_for",
    "trust_problems",
]
