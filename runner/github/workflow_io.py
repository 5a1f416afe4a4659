"""How a step of the Action talks to the job: workflow commands, $GITHUB_OUTPUT, the job
summary, and the report and token most steps start from.

Why one module: every step writes through these, and the escaping they do (a message
cannot start a workflow command, a summary line cannot mention or link) must be the same
for all of them.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from runner.errors import RunnerError
from runner.github.render import format_outputs
from runner.reports.fmt import truncate
from runner.reports.model import Report


def annotate(kind: str, title: str, message: str) -> None:
    """A workflow command (`::warning` / `::error`); newlines and `%` escaped so a message
    cannot start a command of its own on the next line."""
    esc = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    print(f"::{kind} title={title}::{esc}", flush=True)


def write_outputs(values: Mapping[str, str], env: Mapping[str, str]) -> None:
    path = env.get("GITHUB_OUTPUT")
    text = format_outputs(values)
    if not path:
        sys.stdout.write(text)
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)


def append_summary(text: str, env: Mapping[str, str]) -> None:
    """Every line the action adds to the job summary, made inert here (one gate for all
    callers): it holds run-derived text, escaped by the callers, that must not mention,
    link across repositories, autolink or start a workflow command."""
    from runner.safe_markdown import inert_text

    path = env.get("GITHUB_STEP_SUMMARY")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(inert_text(text))


def load_report(path: Path, batch_id: str | None = None) -> Report | None:
    """The report, or None (with a warning) when the runner stopped before writing one:
    the runner's own exit code already fails the job, later steps need not fail too.

    `batch_id`: the one the run step output (None: not checked; "": the run wrote no
    report). A report of another batch was not written by this run (a pull request can
    commit a `runner-out/report.json`): it is never published."""
    if batch_id is not None and not batch_id.strip():
        annotate("warning", "runner", f"no report: the run step wrote none to {path}")
        return None
    if not path.is_file():
        annotate("warning", "runner", f"no report at {path}")
        return None
    try:
        report = Report.model_validate_json(path.read_bytes())
    except ValueError as exc:
        raise RunnerError(f"{path} is not a runner report: {truncate(str(exc))}") from None
    if batch_id is not None and report.batch_id != batch_id.strip():
        raise RunnerError(
            f"{path} is not the report of this run (its batch is not {batch_id.strip()!r}); "
            "it is not used"
        )
    return report


def github_token(env: Mapping[str, str], name: str) -> str:
    token = env.get(name, "")
    if not token:
        raise RunnerError(f"{name} is empty: pass github-token (needs pull-requests: write)")
    return token
