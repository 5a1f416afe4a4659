"""Renders a `Report` as a GitHub-flavoured Markdown summary (a PR comment, a job summary).

Pure: returns the text; the caller writes it atomically. Every value that comes from a task
(ids, models, branches, error messages) goes through `cell` or `inline`, so a `|`, a newline
or markup in an agent's message cannot break the tables or inject HTML.

Sections: a headline; comparisons per model and per variant (pass rate with a 95% Wilson
interval, pass@k over repeats, median tokens, cache hit, cost per passed run, median time);
one row per run; why each failed run failed; runs whose prompt prefix broke. GitHub caps a
job summary at 1 MiB and a comment at 65,536 characters: with `max_chars` the per-run table,
then the failure and prefix lists, are cut (with a note) so the comparisons always fit.

Why one module: one renderer per section of one document, whose size caps
are shared across sections.
"""

from __future__ import annotations

from collections.abc import Callable

from runner.reports.fmt import (
    cell,
    duration,
    inline,
    mark,
    money,
    percent,
    table,
    tokens,
    truncate,
)
from runner.reports.model import Report, RunReport
from runner.reports.summary import (
    environment_label,
    group_stats,
    headline_cost,
    in_environment,
    partial_text,
    reward_text,
    runner_text,
    skip_reasons,
    spend_notes,
    task_matrix,
)
from runner.reports.totals import NO_VARIANT
from runner.vocabulary import RunStatus


def _name(task: RunReport) -> str:
    return task.run or task.id


def _branch(task: RunReport) -> str:
    if task.result is None or task.result.branch is None:
        return "-"
    return cell(task.result.branch)


def _has_repeats(report: Report) -> bool:
    seen: set[tuple[str, str, str | None]] = set()
    for t in report.runs:
        key = (t.id, t.model, t.variant)
        if key in seen:
            return True
        seen.add(key)
    return False


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _comparison(
    title: str, label: str, report: Report, key: Callable[[RunReport], str], repeats: bool
) -> list[str]:
    groups: dict[str, list[RunReport]] = {}
    for t in report.runs:
        groups.setdefault(key(t), []).append(t)
    rows = []
    rewards = any(t.reward is not None for t in report.runs)
    for name, tasks in groups.items():
        g = group_stats(tasks)
        ci = "" if g.interval is None else f" ({_pct(g.interval[0])}-{_pct(g.interval[1])})"
        rate = f"{g.passed}/{g.runs} {_pct(g.passed / g.runs)}{ci}" if g.runs else "-"
        row = [cell(name), str(g.runs), str(g.skipped), str(g.errored), rate]
        if rewards:
            row.append(reward_text(g))
        if repeats:
            row += [_pct(g.pass_at_1), f"{_pct(g.pass_at_n)} (n={g.repeats})"]
        hit = percent(g.cache_hit)
        if g.ideal_hit is not None:
            hit += f" / {percent(g.ideal_hit)}"
        row += [
            tokens(g.median_tokens),
            hit,
            money(g.cost_per_pass),
            duration(g.median_time),
            f"{tokens(g.input_tokens)} / {tokens(g.output_tokens)}",
            money(g.cost),
            duration(g.time),
        ]
        rows.append(row)
    header = [label, "Finished", "Skipped", "Errored", "Pass rate (95% CI)"]
    header += (["Mean reward (95% CI)"] if rewards else []) + (
        ["pass@1", "pass@n"] if repeats else []
    )
    header += [
        "Median tokens",
        "Cache hit / prefix reuse",
        "Cost / pass",
        "Median time",
        "Tokens in / out",
        "Cost",
        "Time",
    ]
    extra = (2 if repeats else 0) + (1 if rewards else 0)
    align = ["---", "--:", "--:", "--:", "--:"] + ["--:"] * extra + ["--:"] * 7
    return [f"## {title}", "", *table(header, align, rows)]


def _variant(t: RunReport) -> str:
    return t.variant or NO_VARIANT


MATRIX_ROWS = 30
"""Tasks shown in the summary's matrix; report.html has every one."""


def _matrix_section(report: Report) -> list[str]:
    rows, cols, cells = task_matrix(report.runs)
    body = [
        [cell(r), *(cells[(r, c)].text() if (r, c) in cells else " " for c in cols)]
        for r in rows[:MATRIX_ROWS]
    ]
    more = (
        [f"_{len(rows) - MATRIX_ROWS:,} more tasks in report.html._"]
        if len(rows) > MATRIX_ROWS
        else []
    )
    return [
        "## Task x model",
        "",
        *table(["Task", *(cell(c) for c in cols)], ["---"] + ["--:"] * len(cols), body),
        "",
        "Passed of finished runs per task and model/variant.",
        *more,
    ]


def _comparisons(report: Report) -> list[list[str]]:
    """Per model; per variant and per model and variant when the matrix has variants."""
    repeats = _has_repeats(report)
    out = [_comparison("By model", "Model", report, lambda t: t.model, repeats)]
    if any(t.variant is not None for t in report.runs):
        out.append(_comparison("By variant", "Variant", report, _variant, repeats))
        if len({t.model for t in report.runs}) > 1:
            out.append(
                _comparison(
                    "By model and variant",
                    "Model / variant",
                    report,
                    lambda t: f"{t.model} / {_variant(t)}",
                    repeats,
                )
            )
    notes = [
        "Pass rate: passed runs of finished runs (passed or failed), with a 95% Wilson "
        "score interval; skipped runs (never started) and errored runs (provider, "
        "workspace, interruption) are excluded from it and from the medians. Prefix "
        "reuse: the share of input tokens repeating the thread's previous request; the "
        "server also caches across threads, so its cache hit can exceed it. Tokens, "
        "cost and time (last three columns): totals over every run."
    ]
    if repeats:
        notes.append(
            "pass@1, pass@n: the unbiased estimator 1 - C(n-c, k) / C(n, k) for each "
            "task (n runs, c passed), averaged over tasks; n is the fewest runs of any "
            "task in the row."
        )
    notes.append(
        "Cost / pass: total cost over passed runs; n/a when a price is unknown or nothing passed."
    )
    out.append([" ".join(notes)])
    out.append(_matrix_section(report))
    return out


def _headline(report: Report) -> list[str]:
    t = report.totals
    ratio = "n/a" if t.usage.cache_hit_ratio is None else percent(t.usage.cache_hit_ratio)
    if t.usage.ideal_cache_ratio is not None:
        ratio += f" (prefix reuse {percent(t.usage.ideal_cache_ratio)})"
    cost = f" - cost {headline_cost(report.runs, t.redone)}" if report.runs else ""
    rate = "" if t.pass_rate is None else f" ({percent(t.pass_rate)})"
    why = skip_reasons(report.runs)
    lines = [
        f"# Run {inline(report.batch_id)}",
        "",
        f"**{t.completed} of {t.finished} finished runs passed{rate}** - {t.runs} runs: "
        f"{t.finished} finished, {t.skipped} skipped{f' ({why})' if why else ''}, "
        f"{t.errored} errored - {tokens(t.usage.total_tokens)} tokens"
        f" - cache hit {ratio}{cost} - {duration(report.duration_s)}"
        + "".join(f" - {n}" for n in spend_notes(report)),
        "",
        f"Task file {inline(report.task_file)}, started {inline(report.started_at)},"
        f" finished {inline(report.finished_at)}. {inline(runner_text(report))}.",
    ]
    if report.batch is not None and report.batch.not_selected:
        lines[-1] += (
            f" {report.batch.not_selected} runs of the task file were not selected "
            "(--only, --tag) and are not counted."
        )
    if t.skipped:
        lines += [
            "",
            f"_{t.skipped} run(s) never started; `runner run ... --resume` with the "
            "same --out runs them and keeps the finished ones._",
        ]
    if report.pending and not report.shards:
        lines += [
            "",
            f"**PARTIAL: written while the batch runs: {report.pending:,} "
            "more runs not finished yet.**",
        ]
    if report.shards:
        lines[-1] += (
            f" Merged from {len(report.shards)} shards: {inline(', '.join(report.shards))}."
        )
    if report.partial:
        lines += [
            "",
            f"**PARTIAL: {partial_text(report)}; those runs are not in any number below.**",
        ]
    return lines


def _cut_note(hidden: int, what: str, max_chars: int | None) -> list[str]:
    if not hidden:
        return []
    return [
        "",
        f"_{hidden:,} more {what} not shown, to keep this summary under "
        f"{max_chars or 0:,} characters; report.json has them all._",
    ]


def _run_rows(report: Report) -> list[list[str]]:
    variants = any(t.variant is not None for t in report.runs)
    compacted = any(t.compactions for t in report.runs)
    retried = any(t.retries for t in report.runs)
    envs = any(in_environment(t) for t in report.runs)
    graded = any(t.suite is not None for t in report.runs)
    rows = []
    for t in report.runs:
        row = [cell(_name(t)), cell(t.model)]
        if variants:
            row.append(cell(t.variant or "-"))
        if envs:
            row.append(cell(environment_label(t)))
        cached = percent(t.usage.cache_hit_ratio)
        if t.usage.ideal_cache_ratio is not None:
            cached += f" / {percent(t.usage.ideal_cache_ratio)}"
        row.append(mark(t.status, t.stopped_by))
        if graded:
            row.append(_grade(t))
        row += [
            str(t.user_turns),
            str(len(t.requests)),
            str(t.tool_calls),
            tokens(t.usage.total_tokens),
            cached,
        ]
        if compacted:
            row.append(str(len(t.compactions)))
        if retried:
            row.append(f"{t.retries} ({duration(t.retry_wait_s)})")
        cost = money(t.cost_usd)
        if t.redone is not None:
            cost += f" (+{money(t.redone.cost_usd)} redone)"
        row += [cost, duration(t.duration_s), _branch(t)]
        rows.append(row)
    return rows


def _grade(t: RunReport) -> str:
    """`1`, `0.5`, `resolved (1)`; `-` without a grade (the error says why)."""
    if t.reward is None and t.resolution is None:
        return "-"
    value = "?" if t.reward is None else f"{t.reward:g}"
    return value if t.resolution is None else f"{t.resolution} ({value})"


def _runs(report: Report, rows: list[list[str]], keep: int, max_chars: int | None) -> list[str]:
    variants = any(t.variant is not None for t in report.runs)
    compacted = any(t.compactions for t in report.runs)
    retried = any(t.retries for t in report.runs)
    envs = any(in_environment(t) for t in report.runs)
    graded = any(t.suite is not None for t in report.runs)
    header = (
        ["Run", "Model"]
        + (["Variant"] if variants else [])
        + (["Environment"] if envs else [])
        + ["Status"]
        + (["Reward"] if graded else [])
        + ["User turns", "Requests", "Tool calls", "Tokens", "Cached / prefix reuse"]
        + (["Compactions"] if compacted else [])
        + (["Retries (waiting)"] if retried else [])
        + ["Cost", "Time", "Branch"]
    )
    align = (
        ["---", "---"]
        + (["---"] if variants else [])
        + (["---"] if envs else [])
        + ["---"]
        + (["--:"] if graded else [])
        + ["--:", "--:", "--:", "--:", "--:"]
        + (["--:"] if compacted else [])
        + (["--:"] if retried else [])
        + ["--:", "--:", "---"]
    )
    return [
        "## Runs",
        "",
        *table(header, align, rows[:keep]),
        *_cut_note(len(rows) - keep, "runs", max_chars),
    ]


def _problem_items(report: Report) -> list[str]:
    """Why each run did not complete; the first place a reader looks after the headline."""
    items = []
    for t in report.runs:
        if t.status is RunStatus.COMPLETED:
            continue
        why = t.error or ""
        if not why and t.check is not None and not t.check.passed:
            why = f"check {t.check.command} exited {t.check.exit_code}: {t.check.output_tail}"
        why = why or t.final_message or ""
        text = f": {inline(truncate(why))}" if why.strip() else ""
        items.append(
            f"- **{inline(_name(t))}** ({inline(t.model)}) {mark(t.status, t.stopped_by)}{text}"
        )
    return items


def _break_items(report: Report) -> list[str]:
    """The prefix audit: each break makes the server's prompt cache miss from there on."""
    items = []
    for t in report.runs:
        if t.prefix_breaks <= 0:
            continue
        first = next((r for r in t.requests[1:] if not r.prefix.extends_previous), None)
        where = ""
        if first is not None:
            item = "" if first.prefix.break_index is None else f", item {first.prefix.break_index}"
            reason = (
                f": {inline(truncate(first.prefix.break_reason))}"
                if first.prefix.break_reason
                else ""
            )
            where = f" (first at request {first.index}{item}{reason})"
        items.append(f"- **{inline(_name(t))}**: {t.prefix_breaks}{where}")
    return items


def _listed(
    title: str, intro: str, items: list[str], keep: int, what: str, max_chars: int | None
) -> list[str]:
    if not items:
        return []
    return [
        f"## {title}",
        "",
        *([intro, ""] if intro else []),
        *items[:keep],
        *_cut_note(len(items) - keep, what, max_chars),
    ]


def render_markdown(report: Report, max_chars: int | None = None) -> str:
    """The summary as Markdown, at most `max_chars` characters long when that is given."""
    if not report.runs:
        return "\n\n".join("\n".join(s) for s in [_headline(report), ["No tasks ran."]]) + "\n"
    fixed = [_headline(report)] + (_comparisons(report) if len(report.runs) > 1 else [])
    rows = _run_rows(report)
    problems = _problem_items(report)
    breaks = _break_items(report)

    def compose(keep_rows: int, keep_problems: int, keep_breaks: int) -> str:
        sections = [
            *fixed,
            _runs(report, rows, keep_rows, max_chars),
            _listed("Not completed", "", problems, keep_problems, "runs", max_chars),
            _listed(
                "Prefix breaks",
                "Requests that did not extend the previous one: "
                "the prompt cache misses from there on.",
                breaks,
                keep_breaks,
                "runs",
                max_chars,
            ),
        ]
        return "\n\n".join("\n".join(s) for s in sections if s) + "\n"

    keep = [len(rows), len(problems), len(breaks)]
    text = compose(*keep)
    if max_chars is None or len(text) <= max_chars:
        return text
    # Failures first, then prefix breaks, then as many run rows as still fit.
    keep = [0, 0, 0]
    for i in (1, 2, 0):
        full = (len(rows), len(problems), len(breaks))[i]
        lo, hi = 0, full
        while lo < hi:
            mid = (lo + hi + 1) // 2
            trial = list(keep)
            trial[i] = mid
            if len(compose(*trial)) <= max_chars:
                lo = mid
            else:
                hi = mid - 1
        keep[i] = lo
    text = compose(*keep)
    if len(text) <= max_chars:
        return text
    return _hard_cut(text, max_chars)


def _hard_cut(text: str, max_chars: int) -> str:
    """Last resort when even the comparisons do not fit: cut at a line break, say so."""
    note = "\n\n_Summary cut here; report.json has everything._\n"
    if max_chars <= len(note):
        return note[:max_chars]
    head = text[: max_chars - len(note)]
    if "\n" in head:
        head = head[: head.rindex("\n")]
    return head + note
