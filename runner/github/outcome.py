"""The `outputs` and `finish` steps: what the job learns from a run.

Why together: both read the same facts (the gate's answer, a skip, the runner's exit
code, the report) and must agree, so that `conclusion` and the step's exit code never
tell two stories.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from runner.github.render import outputs_for
from runner.github.workflow_io import annotate, load_report, write_outputs
from runner.vocabulary import EXIT_BAD_INPUT, EXIT_RUNNER


def cmd_outputs(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """Every output the Action documents, also when nothing ran: `conclusion` is
    `skipped` (with the reason as `notice`) when the gate or the run step skipped,
    `success` when the runner exited 0, `failure` otherwise."""
    values = {
        "conclusion": "failure",
        "notice": "",
        "final-message": "",
        "report": "",
        "branch": "",
        "branches": "{}",
    }
    notice = args.reason if args.allowed != "true" else args.skipped
    if notice.strip():
        values.update(conclusion="skipped", notice=notice)
        write_outputs(values, env)
        return 0
    if args.exit_code.strip() == "0":
        values["conclusion"] = "success"
    report = load_report(Path(args.report), args.batch_id) if args.exit_code.strip() else None
    if report is not None:
        values.update(outputs_for(report, args.report))
    write_outputs(values, env)
    return 0


def cmd_finish(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """The step's exit code (the runner's; a skip is 0; exit 1 only with
    fail-on-task-failure) and the action's final `conclusion`: the report's, but
    failure when a step of the action itself failed (`--outcomes`: step=outcome), so a
    comment that could not be written or a refused push never ends `success`."""
    steps = dict(p.partition("=")[::2] for p in args.outcomes.split())
    failed = [name for name, outcome in steps.items() if outcome == "failure"]
    conclusion = args.conclusion.strip() or "failure"
    if failed:
        conclusion = "failure"
        print(f"conclusion: failure (the {', '.join(failed)} step failed)")
    write_outputs({"conclusion": conclusion}, env)
    if {"gate", "run"} & set(failed):
        return EXIT_BAD_INPUT  # that step's error is in the log already
    if args.allowed.strip() != "true" or args.skipped.strip():
        return 0
    if not args.exit_code.strip().isdigit():
        annotate("error", "runner", "the run step did not finish")
        return EXIT_RUNNER
    return step_exit(int(args.exit_code), args.fail_on_task_failure)


def step_exit(code: int, fail_on_task_failure: str) -> int:
    """The Action's exit code for the runner's `code`: the same, but 1 (a task failed)
    only with fail-on-task-failure. Shared with the run step, which ends an unsandboxed
    run itself because no later step of that job is trusted to."""
    if code == 1 and fail_on_task_failure.strip().lower() != "true":
        return 0
    return code
