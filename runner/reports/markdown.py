"""Renders a `Report` as a GitHub-flavoured Markdown summary (a PR comment, a job summary).

Pure: returns the text; the caller writes it atomically. Every value that comes from a task
(ids, models, branches, error messages) goes through `cell` or `inline`, so a `|`, a newline
or markup in an agent's message cannot break the tables or inject HTML.
"""

from __future__ import annotations

import math
import re
import statistics

from runner.reports.model import Report, TaskReport

ERROR_LIMIT = 200
"""Error messages are cut to about this many characters; report.json has the full text."""

MARKS = {
    "completed": "PASS",
    "failed": "FAIL",
    "check_failed": "FAIL (check)",
    "max_turns": "FAIL (turns)",
    "timeout": "FAIL (timeout)",
    "scope_violation": "FAIL (scope)",
    "error": "ERROR",
}
"""Short, emoji-free status marks: readable in plain text and in a terminal."""

# CommonMark lets any ASCII punctuation be backslash-escaped; these are the ones that can
# start markup inside a table cell or list item (`|` splits cells even inside code spans).
_MARKUP = re.compile(r"([\\`*_\[\]<>|~&])")
_SPACE = re.compile(r"\s+")
# Control characters (terminal escapes) and lone surrogates, which UTF-8 cannot even encode.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def _visible(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inline(text: str) -> str:
    """Text safe inside a list item: whitespace runs (newlines too) become one space, control
    characters become a visible escape, markup characters are backslash-escaped."""
    return _MARKUP.sub(r"\\\1", _UNPRINTABLE.sub(_visible, _SPACE.sub(" ", text).strip()))


def cell(text: str) -> str:
    """Text safe inside a table cell: escaped like `inline`, newlines kept as `<br>`."""
    lines = [inline(line) for line in text.splitlines()]
    return "<br>".join(line for line in lines if line) or " "


def truncate(text: str, limit: int = ERROR_LIMIT) -> str:
    """Shorten to `limit` characters (whitespace collapsed first) with an ellipsis."""
    flat = _SPACE.sub(" ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "\u2026"


def mark(status: str) -> str:
    return MARKS.get(status, status.upper())


def tokens(n: float) -> str:
    return f"{n:,.0f}"


def percent(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio * 100:.1f}%"


def duration(seconds: float) -> str:
    """Seconds below a minute, then `1m 05s`, then `1h 02m`: compact yet unambiguous."""
    if not math.isfinite(seconds):
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


def _ratio(cached: int, sent: int) -> float | None:
    return cached / sent if sent else None


def _branch(task: TaskReport) -> str:
    if task.result is None or task.result.branch is None:
        return "-"
    return cell(task.result.branch)


def _table(header: list[str], align: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def _headline(report: Report) -> list[str]:
    t = report.totals
    ratio = "n/a" if t.usage.cache_hit_ratio is None else percent(t.usage.cache_hit_ratio)
    return [
        f"# Run {inline(report.run_id)}",
        "",
        f"**{t.completed} of {t.tasks} tasks completed** - {tokens(t.usage.total_tokens)} tokens"
        f" - cache hit {ratio} - {duration(report.duration_s)}",
        "",
        f"Task file {inline(report.task_file)}, started {inline(report.started_at)},"
        f" finished {inline(report.finished_at)}.",
    ]


def _runs(report: Report) -> list[str]:
    rows = [[cell(t.id), cell(t.model), mark(t.status), str(len(t.requests)),
             tokens(t.usage.total_tokens), percent(t.usage.cache_hit_ratio), str(t.tool_calls),
             duration(t.duration_s), _branch(t)] for t in report.tasks]
    return ["## Runs", "", *_table(
        ["Task", "Model", "Status", "Requests", "Tokens", "Cached", "Tool calls", "Time",
         "Branch"],
        ["---", "---", "---", "--:", "--:", "--:", "--:", "--:", "---"], rows)]


def _models(report: Report) -> list[str]:
    by_model: dict[str, list[TaskReport]] = {}
    for task in report.tasks:
        by_model.setdefault(task.model, []).append(task)
    rows = []
    for model, tasks in by_model.items():
        passed = sum(1 for t in tasks if t.status == "completed")
        cached = sum(t.usage.cached_tokens for t in tasks)
        sent = sum(t.usage.input_tokens for t in tasks)
        rows.append([
            cell(model), str(len(tasks)), f"{passed}/{len(tasks)} ({passed / len(tasks):.0%})",
            tokens(statistics.median(t.usage.total_tokens for t in tasks)),
            percent(_ratio(cached, sent)),
            duration(statistics.median(t.duration_s for t in tasks)),
            duration(sum(t.duration_s for t in tasks)),
        ])
    return ["## Models", "", *_table(
        ["Model", "Runs", "Pass rate", "Median tokens", "Cache hit", "Median time",
         "Total time"],
        ["---", "--:", "--:", "--:", "--:", "--:", "--:"], rows)]


def _problems(report: Report) -> list[str]:
    """Why each run did not complete; the first place a reader looks after the headline."""
    items = []
    for t in report.tasks:
        if t.status == "completed":
            continue
        why = t.error or ""
        if not why and t.check is not None and not t.check.passed:
            why = f"check {t.check.command} exited {t.check.exit_code}: {t.check.output_tail}"
        why = why or t.final_message or ""
        text = f": {inline(truncate(why))}" if why.strip() else ""
        items.append(f"- **{inline(t.id)}** ({inline(t.model)}) {mark(t.status)}{text}")
    return ["## Not completed", "", *items] if items else []


def render_markdown(report: Report) -> str:
    """The summary as Markdown: headline, per-run table, per-model comparison, failures."""
    sections = [_headline(report)]
    if report.tasks:
        sections += [_runs(report), _models(report)]
        problems = _problems(report)
        if problems:
            sections.append(problems)
    else:
        sections.append(["No tasks ran."])
    return "\n\n".join("\n".join(s) for s in sections) + "\n"
