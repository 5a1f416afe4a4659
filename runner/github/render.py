"""Everything the action writes for people: step outputs, the sticky PR comment, pull
request bodies, the job summary and the README's inputs/outputs table. Whatever a task
produced goes in only through `inline`/`cell` or `safe_markdown.render`."""

from __future__ import annotations

import html
import json
import secrets
from collections.abc import Mapping
from typing import Any

from runner import safe_markdown
from runner.errors import RunnerError
from runner.github.context import (
    COMMENT_LIMIT,
    MARKER,
    MESSAGE_LIMIT,
    OPEN_MESSAGES,
    REPLY_MARKER,
    TABLE_ROWS,
    TASK_MARKER,
    Context,
)
from runner.reports import fmt
from runner.reports.fmt import mark, percent, tokens, truncate
from runner.reports.model import Report, RunReport
from runner.vocabulary import RunStatus


def inline(text: str) -> str:
    """Run-derived text for a list item: Markdown-escaped, then made inert (no mention,
    cross-repository reference or autolink; see `safe_markdown.inert_line`)."""
    return safe_markdown.inert_line(fmt.inline(text))


def cell(text: str) -> str:
    """Run-derived text for a table cell, made inert like `inline`."""
    return safe_markdown.inert_line(fmt.cell(text))


def _cost(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def outputs_for(report: Report, report_path: str) -> dict[str, str]:
    """The action's outputs. Numbers are plain (no thousands separators) so that workflow
    expressions can compare them; unknown values (no price, nothing sent) are empty."""
    t = report.totals
    ratio = t.usage.cache_hit_ratio
    # Only branches that outlive the job: the ones the runner pushed (`git.push`). The
    # pull-requests step reports the branches it keeps; local ones go with the machine.
    branches = {
        r.run or r.id: r.result.pushed.removeprefix("refs/heads/")
        for r in report.runs
        if r.result is not None and r.result.pushed
    }
    return {
        "runs": str(t.runs),
        "passed": str(t.completed),
        "failed": str(t.not_completed - t.skipped),
        "tokens": str(t.usage.total_tokens),
        "cached-tokens": str(t.usage.cached_tokens),
        "cache-hit-ratio": "" if ratio is None else f"{ratio:.4f}",
        "cost": _cost(t.cost_usd),
        "branches": json.dumps(branches, sort_keys=True),
        "branch": next(iter(branches.values())) if len(branches) == 1 else "",
        "final-message": final_message(report),
        "report": report_path,
    }


def final_message(report: Report) -> str:
    """The `final-message` output: the only run's message, or each run's under its name."""
    said = [
        (t.run or t.id, t.final_message)
        for t in report.runs
        if t.final_message and t.final_message.strip()
    ]
    if len(report.runs) == 1:
        return said[0][1] if said else ""
    return "\n\n".join(f"## {name}\n\n{text}" for name, text in said)


def format_outputs(values: Mapping[str, str]) -> str:
    """`$GITHUB_OUTPUT` text in the heredoc form, which takes any value, newlines included.
    The delimiter is random and checked against the value, so a value cannot end it early
    and set another output."""
    lines = []
    for name, value in values.items():
        delimiter = f"runner_{secrets.token_hex(16)}"
        while delimiter in value:  # pragma: no cover - 128 random bits
            delimiter = f"runner_{secrets.token_hex(16)}"
        lines += [f"{name}<<{delimiter}", value, delimiter]
    return "\n".join(lines) + "\n"


def _changes(t: RunReport) -> str:
    r = t.result
    if r is None:
        return "-"
    where = f"`{cell(r.branch)}`" if r.branch else "no branch (scope)"
    return f"{where} +{r.insertions} -{r.deletions} in {r.files_changed} file(s)"


def _why(t: RunReport) -> str:
    why = t.error or ""
    if not why and t.check is not None and not t.check.passed:
        why = f"check {t.check.command} exited {t.check.exit_code}: {t.check.output_tail}"
    # The text is the model server's or the agent's: `inline` makes it inert.
    return inline(truncate(why)) if why.strip() else ""


def _cost_cell(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def _totals_line(report: Report) -> str:
    t = report.totals
    ratio = percent(t.usage.cache_hit_ratio)
    cost = "cost unknown" if t.cost_usd is None else f"cost ${t.cost_usd:.4f}"
    return (
        f"**Totals:** {t.runs} run(s), {t.requests} request(s), {t.tool_calls} tool "
        f"call(s), {tokens(t.usage.total_tokens)} tokens, {tokens(t.usage.cached_tokens)} "
        f"cached ({ratio}), {cost}."
    )


def _footer(report: Report, ctx: Context, artifact: str) -> str:
    parts = [f"batch id `{inline(report.batch_id)}`"]
    if ctx.run_url:
        parts.insert(0, f"[workflow run]({ctx.run_url})")
    if artifact:
        parts.append(f"artifact `{inline(artifact)}`")
    return "<sub>" + " · ".join(parts) + "</sub>"


def rendered(message: str, ctx: Context, artifact: str) -> str:
    """A final message as safe HTML (see runner/safe_markdown.py), cut at MESSAGE_LIMIT
    with a pointer to the report artifact of this workflow run."""
    where = (
        f"the report artifact <code>{html.escape(artifact)}</code>" if artifact else "the report"
    )
    if ctx.run_url:
        where += f' of <a href="{html.escape(ctx.run_url)}">this workflow run</a>'
    return safe_markdown.render(
        message,
        server_url=ctx.server_url,
        repository=ctx.repository,
        limit=MESSAGE_LIMIT,
        more=f"The full text is in {where}.",
    )


def answering(ctx: Context) -> str:
    """The line a reply starts with: a link to the comment command it answers, when
    GitHub's address for it is inside this repository."""
    url = str(ctx.comment.get("html_url") or "")
    prefix = safe_markdown.repo_prefix(ctx.server_url, ctx.repository)
    if not url or not safe_markdown.allowed_url(url, prefix) or ")" in url:
        return "In answer to a comment."
    return f"In answer to [this comment]({url})."


def render_comment(
    report: Report, ctx: Context, *, artifact: str = "", marker: str = MARKER
) -> str:
    """The PR comment: headline, one row per run, why runs failed, and each run's final
    message (a review, an explanation) rendered from its Markdown, made safe. `marker`
    says which comment it is: a tag's sticky comment, or `REPLY_MARKER` for an answer to
    a comment command (which then says which comment it answers)."""
    t = report.totals
    head = [marker, f"### runner: {t.completed} of {t.runs} run(s) passed", ""]
    if marker == REPLY_MARKER:
        head[2:2] = ["", answering(ctx)]
    if report.runs:
        head += [
            "| Run | Model | Status | Tokens | Cached | Cost | Changes |",
            "|---|---|---|--:|--:|--:|---|",
        ]
        head += [
            f"| {cell(r.run or r.id)} | {cell(r.model)} | {mark(r.status, r.stopped_by)} | "
            f"{tokens(r.usage.total_tokens)} | {percent(r.usage.cache_hit_ratio)} | "
            f"{_cost_cell(r.cost_usd)} | {_changes(r)} |"
            for r in report.runs[:TABLE_ROWS]
        ]
        if len(report.runs) > TABLE_ROWS:
            head.append(f"\n{len(report.runs) - TABLE_ROWS} more run(s) in the report.")
        head.append("")
    head.append(_totals_line(report))
    failed = [
        f"- **{inline(r.run or r.id)}** {mark(r.status, r.stopped_by)}"
        + (f": {w}" if (w := _why(r)) else "")
        for r in report.runs
        if r.status is not RunStatus.COMPLETED
    ][:TABLE_ROWS]
    if failed:
        head += ["", "#### Not completed", "", *failed]
    footer = _footer(report, ctx, artifact)
    body = "\n".join(head)
    said = [r for r in report.runs if r.final_message and r.final_message.strip()]
    for r in said:
        shown = rendered(r.final_message or "", ctx, artifact)
        fold = " open" if len(said) <= OPEN_MESSAGES else ""
        block = (
            f"\n\n<details{fold}><summary>{inline(r.run or r.id)}: final message"
            f"</summary>\n\n{shown}\n\n</details>"
        )
        if len(body) + len(block) + len(footer) > COMMENT_LIMIT:
            body += "\n\nMore final messages are in the report artifact."
            break
        body += block
    return f"{body}\n\n{footer}\n"


def render_pr_body(task: RunReport, report: Report, ctx: Context) -> str:
    """A nightly PR's description: what ran, how it went, what the agent said."""
    lines = [
        TASK_MARKER.format(run=task.run or task.id),
        f"Automated change by **runner**: task **{inline(task.id)}** on {inline(task.model)}.",
        "",
        f"- Status: {mark(task.status, task.stopped_by)}",
        f"- Tokens: {tokens(task.usage.total_tokens)}, cached "
        f"{percent(task.usage.cache_hit_ratio)}, cost {_cost_cell(task.cost_usd)}",
        f"- Changes: {_changes(task)}",
    ]
    if task.check is not None:
        verdict = "passed" if task.check.passed else f"failed (exit {task.check.exit_code})"
        lines.append(f"- Check `{cell(task.check.command)}`: {verdict}")
    if task.final_message and task.final_message.strip():
        lines += ["", "Final message:", "", rendered(task.final_message, ctx, "")]
    lines += ["", _footer(report, ctx, "")]
    return "\n".join(lines) + "\n"


DOCS_START = "<!-- action-docs:start (make action-docs writes this from action.yml) -->"
DOCS_END = "<!-- action-docs:end -->"


def _doc_cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def action_docs(action: Mapping[str, Any]) -> str:
    """README's tables of the Action's inputs and outputs: action.yml is the one source,
    `make action-docs` copies it and a test checks that the README is up to date."""
    lines = [DOCS_START, "", "| Input | Default | What it is for |", "|---|---|---|"]
    for name, spec in action["inputs"].items():
        default = str(spec.get("default", ""))
        lines.append(
            f"| `{name}` | {f'`{default}`' if default else ''} | "
            f"{_doc_cell(spec.get('description', ''))} |"
        )
    lines += ["", "| Output | What it holds |", "|---|---|"]
    for name, spec in action["outputs"].items():
        lines.append(f"| `{name}` | {_doc_cell(spec.get('description', ''))} |")
    return "\n".join([*lines, "", DOCS_END])


def readme_with_docs(readme: str, action: Mapping[str, Any]) -> str:
    ordered = readme.find(DOCS_START) < readme.find(DOCS_END)
    if readme.count(DOCS_START) != 1 or readme.count(DOCS_END) != 1 or not ordered:
        raise RunnerError(f"README needs one {DOCS_START!r} and, after it, one {DOCS_END!r} line")
    head, rest = readme.split(DOCS_START, 1)
    return head + action_docs(action) + rest.split(DOCS_END, 1)[1]
