"""`report.html`: one self-contained page to look at a batch in a browser, offline.

Charts are SVG generated here, with no JavaScript and no external file: the page must open
from a CI artifact or an e-mail attachment with no network, a JavaScript charting library
would have to be inlined (hundreds of kilobytes, and a script next to hostile agent text),
and the few chart kinds needed (bars with interval whiskers, a scatter, stacked bars) are a
few lines of SVG each. Drill-downs are `<details>` elements, which browsers open without
script. A Content-Security-Policy forbids any fetch and any script, so even an escaping bug
could not make the page load or run anything.

Every string from a run (ids, messages, commands, outputs, patches) goes through
`html.escape`; transcripts, outputs and patches are cut to a readable size with a note.

Why one module: one self-contained page (its CSS, SVG charts and escaping) that must be
reviewed as a whole for what it fetches and escapes.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from runner.reports.fmt import MARKS, duration, money, percent, printable, tokens
from runner.reports.model import Report, RunReport
from runner.reports.named import EVENTS_DIR, PATCHES_DIR, named_lines, read_named
from runner.reports.stats import wilson_interval
from runner.reports.summary import (
    column_name,
    group_stats,
    headline_cost,
    partial_text,
    skip_reasons,
    task_matrix,
)
from runner.sizes import size as size_text
from runner.vocabulary import RunStatus

TEXT_LIMIT = 4000
"""Characters kept of one message or command output (head and tail)."""
PATCH_LIMIT = 30_000
PATCH_BYTES = 1 << 20
"""The head of a patch the page reads (it shows at most PATCH_LIMIT characters of it)."""
ITEMS_LIMIT = 120
"""Transcript entries kept per run (first and last halves)."""
TRANSCRIPT_CHARS = 40_000
"""Characters of HTML kept of one run's transcript, so a big batch stays a page a browser
opens (the events file has everything)."""
RUN_DETAILS_LIMIT = 500
"""Runs given a drill-down; report.json and threads/ have the rest."""

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d1d1f;max-width:1200px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;
text-align:right}td:first-child,th:first-child{text-align:left}
.partial{background:#fde2e1;border:2px solid #c62828;padding:8px;font-weight:bold}
.pass{background:#c8e6c9}.fail{background:#ffcdd2}.mixed{background:#fff3c4}
.none{color:#888}details{margin:4px 0;border:1px solid #ddd;padding:4px 8px}
summary{cursor:pointer}pre{white-space:pre-wrap;word-break:break-word;background:#f6f6f6;
padding:6px;max-height:400px;overflow:auto}.note{color:#666;font-size:12px}
.item{border-left:3px solid #bbb;padding-left:8px;margin:6px 0}.cmd{border-color:#1565c0}
.msg{border-color:#2e7d32}.err{border-color:#c62828}
"""

_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "script-src 'none'; base-uri 'none'; form-action 'none'"
)


def esc(text: object) -> str:
    """Escaped for HTML text and attributes; control characters and lone surrogates (from
    a model's output) shown as visible escapes."""
    return html.escape(printable(str(text)), quote=True)


def cut(text: str, limit: int = TEXT_LIMIT) -> str:
    """Head and tail of a long text with the number of characters left out between."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half:,} characters cut ...]\n{text[-half:]}"


def _svg(width: int, height: int, body: list[str], label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(label)}">'
        + "".join(body)
        + "</svg>"
    )


def pass_rate_chart(report: Report) -> str:
    """Horizontal bars: pass rate over finished runs per model/variant, with the 95% Wilson
    interval as a whisker and `passed/finished` as the label."""
    groups: dict[str, list[RunReport]] = {}
    for t in report.runs:
        groups.setdefault(column_name(t), []).append(t)
    left, bar_w, row_h = 260, 420, 28
    height = 30 + row_h * len(groups)
    body = [f'<line x1="{left}" y1="8" x2="{left}" y2="{height - 20}" stroke="#555"/>']
    for pct in (0, 25, 50, 75, 100):
        x = left + bar_w * pct / 100
        body.append(
            f'<line x1="{x}" y1="8" x2="{x}" y2="{height - 20}" stroke="#eee"/>'
            f'<text x="{x}" y="{height - 6}" font-size="11" text-anchor="middle">'
            f"{pct}%</text>"
        )
    for i, (name, runs) in enumerate(groups.items()):
        g = group_stats(runs)
        y = 10 + i * row_h
        body.append(
            f'<text x="{left - 6}" y="{y + 15}" font-size="12" text-anchor="end">'
            f"{esc(name[:40])}</text>"
        )
        if g.passed:
            w = bar_w * g.passed / g.runs
            body.append(
                f'<rect class="bar" x="{left}" y="{y + 3}" width="{w:.1f}" '
                f'height="{row_h - 10}" fill="#4c8bf5"/>'
            )
        ci = wilson_interval(g.passed, g.runs)
        if ci is not None:
            x1, x2 = left + bar_w * ci[0], left + bar_w * ci[1]
            mid = y + row_h / 2 - 1
            body.append(
                f'<line x1="{x1:.1f}" y1="{mid}" x2="{x2:.1f}" y2="{mid}" '
                f'stroke="#111" stroke-width="2"/><line x1="{x1:.1f}" y1="{mid - 6}" '
                f'x2="{x1:.1f}" y2="{mid + 6}" stroke="#111"/><line x1="{x2:.1f}" '
                f'y1="{mid - 6}" x2="{x2:.1f}" y2="{mid + 6}" stroke="#111"/>'
            )
        label = f"{g.passed}/{g.runs}" if g.runs else "no finished run"
        if g.skipped or g.errored:
            label += f" (+{g.skipped} skipped, {g.errored} errored)"
        body.append(f'<text x="{left + bar_w + 8}" y="{y + 15}" font-size="12">{label}</text>')
    return _svg(left + bar_w + 200, height, body, "pass rate per model and variant")


def cost_chart(report: Report) -> str:
    """Scatter: pass rate against mean cost per finished run, or mean tokens when a price is
    unknown (local models), with the axis saying which."""
    groups: dict[str, list[RunReport]] = {}
    for t in report.runs:
        groups.setdefault(column_name(t), []).append(t)
    points = []
    use_cost = all(t.cost_usd is not None for t in report.runs if t.requests) and any(
        t.cost_usd for t in report.runs
    )  # free local models: tokens say more than $0
    for name, runs in groups.items():
        g = group_stats(runs)
        if not g.runs:
            continue
        done = [t for t in runs if t.status is not RunStatus.SKIPPED and t.requests]
        if use_cost:
            x = sum(t.cost_usd or 0.0 for t in done) / g.runs
        else:
            x = sum(t.usage.total_tokens for t in done) / g.runs
        points.append((name, x, g.passed / g.runs))
    width, height, left, bottom = 760, 320, 60, 40
    span = (max((p[1] for p in points), default=0.0) or 1.0) * 1.1
    body = [
        f'<line x1="{left}" y1="10" x2="{left}" y2="{height - bottom}" stroke="#555"/>',
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - 20}" y2="{height - bottom}" '
        'stroke="#555"/>',
        f'<text x="{width / 2}" y="{height - 6}" font-size="12" text-anchor="middle">'
        + (
            "mean cost per finished run (USD)"
            if use_cost
            else "mean tokens per finished run (cost unknown or zero)"
        )
        + "</text>",
        f'<text x="14" y="{height / 2}" font-size="12" transform="rotate(-90 14 '
        f'{height / 2})" text-anchor="middle">pass rate</text>',
    ]
    plot_w, plot_h = width - left - 220, height - bottom - 30
    for pct in (0, 50, 100):
        y = 20 + plot_h * (1 - pct / 100)
        body.append(
            f'<text x="{left - 4}" y="{y + 4}" font-size="11" text-anchor="end">{pct}%</text>'
        )
    body.append(
        f'<text x="{left + plot_w}" y="{height - bottom + 14}" font-size="11" '
        f'text-anchor="middle">{esc(money(span) if use_cost else tokens(span))}</text>'
    )
    for i, (name, x, rate) in enumerate(points):
        cx, cy = left + plot_w * x / span, 20 + plot_h * (1 - rate)
        body.append(
            f'<circle class="point" cx="{cx:.1f}" cy="{cy:.1f}" r="6" '
            f'fill="hsl({(i * 67) % 360},70%,45%)"><title>{esc(name)}</title></circle>'
            f'<text x="{cx + 8:.1f}" y="{cy + 4:.1f}" font-size="11">{esc(name[:34])}'
            "</text>"
        )
    return _svg(width, height, body, "pass rate against cost")


def token_chart(task: RunReport) -> str:
    """Per request: cached (dark) and uncached (light) input tokens stacked, output tokens
    beside; compaction requests outlined red and marked C."""
    reqs = task.requests
    if not reqs:
        return '<p class="note">No request was made.</p>'
    top = max((r.usage.input_tokens + r.usage.output_tokens) if r.usage else 0 for r in reqs) or 1
    bar, gap, height, bottom = 14, 4, 160, 20
    width = max(200, 50 + len(reqs) * (bar + gap))
    plot = height - bottom - 10
    body = [f'<text x="4" y="12" font-size="11">{tokens(top)} tokens</text>']
    for i, r in enumerate(reqs):
        u = r.usage
        x = 40 + i * (bar + gap)
        base = height - bottom
        if u is not None:
            ch = plot * u.cached_tokens / top
            uh = plot * u.uncached_tokens / top
            oh = plot * u.output_tokens / top
            body.append(
                f'<rect class="cached" x="{x}" y="{base - ch:.1f}" width="{bar}" '
                f'height="{ch:.1f}" fill="#1565c0"/>'
                f'<rect class="uncached" x="{x}" y="{base - ch - uh:.1f}" '
                f'width="{bar}" height="{uh:.1f}" fill="#90caf9"/>'
                f'<rect class="output" x="{x}" y="{base - ch - uh - oh:.1f}" '
                f'width="{bar}" height="{oh:.1f}" fill="#ffb74d"/>'
            )
        if r.kind == "compaction":
            body.append(
                f'<rect class="compaction" x="{x - 1}" y="10" width="{bar + 2}" '
                f'height="{plot}" fill="none" stroke="#c62828" stroke-width="2"/>'
                f'<text x="{x + 3}" y="{height - 4}" font-size="11" fill="#c62828">C'
                "</text>"
            )
        tip = (
            f"request {r.index}: {u.input_tokens} in ({u.cached_tokens} cached), "
            f"{u.output_tokens} out"
            if u
            else f"request {r.index}: no usage"
        )
        body.append(f"<title>{esc(tip)}</title>")
    return (
        _svg(width, height, body, f"tokens per request of {task.run}")
        + '<p class="note">Per request: dark blue cached input, light blue uncached '
        "input, orange output; C (red outline) a compaction request.</p>"
    )


def _events(out_dir: Path, name: str) -> Iterator[dict[str, Any]]:
    """The events of the file `name` under `threads/`, read as data (`reports.named`)."""
    for line in named_lines(out_dir, name, EVENTS_DIR):
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(event, dict):
            yield event


def _item_html(event: dict[str, Any]) -> str | None:
    kind = event.get("type")
    if kind == "turn.started":
        return '<div class="note">-- turn started --</div>'
    if kind in ("error", "turn.failed"):
        msg = event.get("message") or (event.get("error") or {}).get("message") or ""
        return f'<div class="item err"><b>error</b><pre>{esc(cut(str(msg)))}</pre></div>'
    if kind == "compaction":
        return '<div class="note">-- history compacted --</div>'
    if kind != "item.completed":
        return None
    item = event.get("item")
    if not isinstance(item, dict):
        return None
    it = item.get("type")
    if it == "agent_message":
        text = esc(cut(str(item.get("text", ""))))
        return f'<div class="item msg"><b>assistant</b><pre>{text}</pre></div>'
    if it == "command_execution":
        return (
            f'<div class="item cmd"><b>$ {esc(cut(str(item.get("command", "")), 400))}</b>'
            f' <span class="note">exit {esc(item.get("exit_code"))}</span>'
            f"<pre>{esc(cut(str(item.get('aggregated_output', ''))))}</pre></div>"
        )
    if it == "reasoning":
        text = esc(cut(str(item.get("text", "")), 1000))
        return f'<div class="item"><i>reasoning</i><pre>{text}</pre></div>'
    body = {k: v for k, v in item.items() if k != "id"}
    return (
        f'<div class="item"><b>{esc(it)}</b><pre>'
        f"{esc(cut(json.dumps(body, ensure_ascii=False)))}</pre></div>"
    )


def transcript(out_dir: Path, task: RunReport) -> str:
    entries = [
        h for h in (_item_html(e) for e in _events(out_dir, task.events_file)) if h is not None
    ]
    if not entries:
        return '<p class="note">No transcript (the run did not start or wrote no events).</p>'
    head: list[str] = []
    tail: list[str] = []
    size = 0
    for i in range(min(len(entries), ITEMS_LIMIT)):
        # Alternate from both ends: the start and the end of a thread matter most.
        entry = entries[i // 2] if i % 2 == 0 else entries[-1 - i // 2]
        if size + len(entry) > TRANSCRIPT_CHARS:
            break
        size += len(entry)
        (head if i % 2 == 0 else tail).append(entry)
    left = len(entries) - len(head) - len(tail)
    cut_note = (
        [f'<p class="note">[{left} entries cut; {esc(task.events_file)} has them all]</p>']
        if left
        else []
    )
    return "".join([*head, *cut_note, *reversed(tail)])


def _patch(out_dir: Path, task: RunReport) -> str:
    if task.result is None:
        return '<p class="note">No change.</p>'
    read = read_named(out_dir, task.result.patch, PATCHES_DIR, PATCH_BYTES)
    if read is None:
        return (
            f'<p class="note">Patch {esc(task.result.patch)} not shown: missing, or not a '
            "plain file under patches/.</p>"
        )
    data, size = read
    more = (
        f'<p class="note">Only the first {size_text(len(data))} of {size_text(size)} read; '
        f"the whole patch is {esc(task.result.patch)}.</p>"
        if size > len(data)
        else ""
    )
    return f"<pre>{esc(cut(data.decode('utf-8', errors='replace'), PATCH_LIMIT))}</pre>{more}"


def _run_details(out_dir: Path, t: RunReport) -> str:
    u = t.usage
    facts = [
        f"status {MARKS[t.status]}" + (f" ({t.skip_reason})" if t.skip_reason else ""),
        f"{len(t.requests)} requests",
        f"{t.turns_completed} user turns",
        f"{t.tool_calls} tool calls",
        f"{tokens(u.input_tokens)} input tokens ({percent(u.cache_hit_ratio)} cached)",
        f"{tokens(u.output_tokens)} output",
        f"cost {money(t.cost_usd)}",
        duration(t.duration_s),
    ]
    if t.result is not None and t.result.branch:
        facts.append(f"branch {t.result.branch}")
    parts = [f"<p>{esc(' - '.join(facts))}</p>"]
    if t.error:
        parts.append(f"<p><b>Error:</b></p><pre>{esc(cut(t.error))}</pre>")
    if t.check is not None:
        tail = t.check.output_tail.strip()
        parts.append(
            f"<p><b>Check</b> <code>{esc(t.check.command)}</code> exited "
            f"{t.check.exit_code}</p>" + (f"<pre>{esc(cut(tail, 2000))}</pre>" if tail else "")
        )
    parts += [
        "<h4>Tokens per request</h4>",
        token_chart(t),
        "<h4>Final message</h4>",
        f"<pre>{esc(cut(t.final_message or '(none)'))}</pre>",
        "<details><summary>Transcript</summary>",
        transcript(out_dir, t),
        "</details>",
        "<details><summary>Patch</summary>",
        _patch(out_dir, t),
        "</details>",
    ]
    return "".join(parts)


def _matrix(report: Report) -> str:
    rows, cols, cells = task_matrix(report.runs)
    head = "".join(f"<th>{esc(c)}</th>" for c in cols)
    body = []
    for r in rows:
        tds = []
        for c in cols:
            cl = cells.get((r, c))
            if cl is None:
                tds.append('<td class="none"></td>')
                continue
            kind = (
                "none"
                if not cl.finished
                else "pass"
                if cl.passed == cl.finished
                else "fail"
                if cl.passed == 0
                else "mixed"
            )
            tds.append(f'<td class="{kind}">{esc(cl.text())}</td>')
        body.append(f"<tr><td>{esc(r)}</td>{''.join(tds)}</tr>")
    return (
        f'<table class="matrix"><tr><th>Task</th>{head}</tr>{"".join(body)}</table>'
        '<p class="note">Passed of finished runs; skipped and errored runs apart.</p>'
    )


def _totals(report: Report) -> str:
    groups: dict[str, list[RunReport]] = {}
    for t in report.runs:
        groups.setdefault(column_name(t), []).append(t)
    rows = []
    for name, runs in groups.items():
        g = group_stats(runs)
        ci = "-" if g.interval is None else f"{g.interval[0]:.0%}-{g.interval[1]:.0%}"
        rate = f"{g.passed}/{g.runs} {g.passed / g.runs:.0%}" if g.runs else "-"
        rows.append(
            [
                name,
                str(g.runs),
                str(g.skipped),
                str(g.errored),
                rate,
                ci,
                tokens(g.input_tokens),
                tokens(g.output_tokens),
                percent(g.cache_hit),
                money(g.cost),
                duration(g.time),
            ]
        )
    head = [
        "Model / variant",
        "Finished",
        "Skipped",
        "Errored",
        "Pass rate",
        "95% CI",
        "Input tokens",
        "Output tokens",
        "Cache hit",
        "Cost",
        "Time",
    ]
    return (
        "<table><tr>"
        + "".join(f"<th>{h}</th>" for h in head)
        + "</tr>"
        + "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
        + "</table>"
    )


def render_html(report: Report, out_dir: Path) -> str:
    """The page for `report`, reading transcripts and patches from `out_dir`."""
    t = report.totals
    why = skip_reasons(report.runs)
    head = (
        f"{t.completed} of {t.finished} finished runs passed"
        + (f" ({percent(t.pass_rate)})" if t.pass_rate is not None else "")
        + f" - {t.runs} runs: {t.finished} finished, {t.skipped} skipped"
        + (f" ({why})" if why else "")
        + f", {t.errored} errored - "
        f"{tokens(t.usage.total_tokens)} tokens - cache hit {percent(t.usage.cache_hit_ratio)}"
        f" - cost {headline_cost(report.runs) if report.runs else 'n/a'} - "
        f"{duration(report.duration_s)}"
    )
    parts = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        f"<title>runner {esc(report.batch_id)}</title><style>{_CSS}</style></head><body>",
        f"<h1>Run {esc(report.batch_id)}</h1>",
    ]
    if report.partial:
        parts.append(
            f'<p class="partial">PARTIAL: {esc(partial_text(report))}; '
            "those runs are in no number on this page.</p>"
        )
    elif report.pending:
        parts.append(
            f'<p class="partial">Written while the batch runs: {report.pending} runs '
            "not finished yet.</p>"
        )
    parts += [
        f'<p id="headline"><b>{esc(head)}</b></p>',
        f'<p class="note">Task file {esc(report.task_file)}, started '
        f"{esc(report.started_at)}, finished {esc(report.finished_at)}"
        + (f"; merged from {len(report.shards)} shards" if report.shards else "")
        + ". Rates, intervals and medians are over finished runs (passed or failed); "
        "skipped runs never started and errored runs were broken or stopped by the "
        "infrastructure.</p>",
    ]
    if not report.runs:
        parts.append("<p>No runs.</p></body></html>")
        return "".join(parts) + "\n"
    parts += [
        "<h2>Pass rate per model / variant (95% Wilson interval)</h2>",
        pass_rate_chart(report),
        "<h2>Pass rate against cost</h2>",
        cost_chart(report),
        "<h2>Task x model / variant</h2>",
        _matrix(report),
        "<h2>Totals per model / variant</h2>",
        _totals(report),
        "<h2>Runs</h2>",
    ]
    for i, task in enumerate(report.runs):
        summary = (
            f"{task.run or task.id} - {task.model}"
            + (f" / {task.variant}" if task.variant else "")
            + f" - {MARKS[task.status]}"
        )
        if i >= RUN_DETAILS_LIMIT:
            parts.append(
                f'<p class="note">{len(report.runs) - i} more runs: see '
                "report.json and threads/.</p>"
            )
            break
        parts.append(
            f'<details class="run"><summary>{esc(summary)}</summary>'
            f"{_run_details(out_dir, task)}</details>"
        )
    parts.append("</body></html>")
    return "".join(parts) + "\n"
