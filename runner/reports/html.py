"""`report.html`: one self-contained page to look at a batch in a browser, offline.

The page must open from a CI artifact or an e-mail attachment with no network, so nothing
is loaded from elsewhere. Its two halves:

- a summary drawn here as HTML and SVG (headline, charts, the task x model matrix, totals),
  readable with script off; every string from a run goes through `html.escape`;
- a viewer of the runs (filter, sort, search the transcripts, side by side, CSV export,
  one run's detail) drawn by the page's own script (`runner/data/viewer.js`) from the
  runs' data embedded as JSON (`viewer_data`), read with `JSON.parse` and shown only
  through `textContent`: no run text is ever parsed as markup.

The Content-Security-Policy allows no source at all (`default-src 'none'`) and only the
page's own script and style, by their sha256: an escaping bug could still not make the page
run a script someone else wrote, or fetch anything.
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections import Counter
from functools import cache
from importlib import resources
from pathlib import Path

from runner.reports.fmt import duration, money, percent, printable, tokens
from runner.reports.model import Report, RunReport
from runner.reports.stats import wilson_interval
from runner.reports.summary import (
    column_name,
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
from runner.reports.viewer_data import embed_json, viewer_data
from runner.vocabulary import RunStatus


@cache
def asset(name: str) -> str:
    """The page's own script or style, from the package's data files."""
    return resources.files("runner").joinpath("data", name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def csp() -> str:
    """The page's policy: nothing from anywhere, except its own script and style."""
    return (
        f"default-src 'none'; script-src {_sha256(asset('viewer.js'))}; "
        f"style-src {_sha256(asset('viewer.css'))}; img-src data:; base-uri 'none'; "
        "form-action 'none'"
    )


def esc(text: object) -> str:
    """Escaped for HTML text and attributes; control characters and lone surrogates (from
    a model's output) shown as visible escapes."""
    return html.escape(printable(str(text)), quote=True)


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
    for quarter in range(5):
        value = span * quarter / 4
        body.append(
            f'<text class="xtick" x="{left + plot_w * quarter / 4:.1f}" '
            f'y="{height - bottom + 14}" font-size="11" text-anchor="middle">'
            f"{esc(money(value) if use_cost else tokens(value))}</text>"
        )
    placed: list[tuple[float, float]] = []
    for i, (name, x, rate) in enumerate(points):
        cx, cy = left + plot_w * x / span, 20 + plot_h * (1 - rate)
        ly = cy + 4
        # Close configurations: each label moves down until it overlaps no earlier one.
        while any(abs(ly - py) < 12 and abs(cx - px) < 200 for px, py in placed):
            ly += 12
        placed.append((cx, ly))
        body.append(
            f'<circle class="point" cx="{cx:.1f}" cy="{cy:.1f}" r="6" '
            f'fill="hsl({(i * 67) % 360},70%,45%)"><title>{esc(name)}</title></circle>'
            f'<text x="{cx + 8:.1f}" y="{ly:.1f}" font-size="11">{esc(name[:34])}'
            "</text>"
        )
    return _svg(width, height, body, "pass rate against cost")


def _matrix(report: Report) -> str:
    rows, cols, cells = task_matrix(report.runs)
    head = "".join(f"<th>{esc(c)}</th>" for c in cols)
    body = []
    for ri, r in enumerate(rows):
        tds = []
        for ci, c in enumerate(cols):
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
            # Indices, not names, in the link: the viewer maps them to the filters.
            tds.append(f'<td class="{kind}"><a href="#cell={ri}.{ci}">{esc(cl.text())}</a></td>')
        body.append(f"<tr><td>{esc(r)}</td>{''.join(tds)}</tr>")
    return (
        f'<table class="matrix"><tr><th>Task</th>{head}</tr>{"".join(body)}</table>'
        '<p class="note">Passed of finished runs; skipped and errored runs apart. A cell '
        "lists its runs below.</p>"
    )


def _totals(report: Report) -> str:
    groups: dict[str, list[RunReport]] = {}
    for t in report.runs:
        groups.setdefault(column_name(t), []).append(t)
    rows = []
    rewards = any(t.reward is not None for t in report.runs)
    for name, runs in groups.items():
        g = group_stats(runs)
        ci = "-" if g.interval is None else f"{g.interval[0]:.0%}-{g.interval[1]:.0%}"
        rate = f"{g.passed}/{g.runs} {g.passed / g.runs:.0%}" if g.runs else "-"
        reward = [reward_text(g)] if rewards else []
        rows.append(
            [
                name,
                str(g.runs),
                str(g.skipped),
                str(g.errored),
                rate,
                ci,
                *reward,
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
        *(["Mean reward (95% CI)"] if rewards else []),
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
        f" - cost {headline_cost(report.runs, t.redone) if report.runs else 'n/a'} - "
        f"{duration(report.duration_s)}" + "".join(f" - {n}" for n in spend_notes(report))
    )
    parts = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{csp()}">',
        f"<title>runner {esc(report.batch_id)}</title><style>{asset('viewer.css')}</style>"
        "</head><body>",
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
        + f"; {esc(runner_text(report))}"
        + (f"; merged from {len(report.shards)} shards" if report.shards else "")
        + ". Rates, intervals and medians are over finished runs (passed or failed); "
        "skipped runs never started and errored runs were broken or stopped by the "
        "infrastructure.</p>",
    ]
    envs = Counter(environment_label(r) for r in report.runs if in_environment(r))
    if envs:
        shown = ", ".join(f"{label} ({n} runs)" for label, n in sorted(envs.items()))
        parts.append(f'<p class="note">Commands ran in: {esc(shown)}; the others on the host.</p>')
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
        _VIEWER,
        '<script type="application/json" id="runner-data">',
        embed_json(viewer_data(report, out_dir)),
        "</script>",
        f"<script>{asset('viewer.js')}</script></body></html>",
    ]
    return "".join(parts) + "\n"


_VIEWER = """
<h2 id="runs">Runs</h2>
<noscript><p class="note">The list of runs is drawn by the page's script; report.json and
threads/ hold every run.</p></noscript>
<div id="viewer" hidden>
<div class="controls">
<label>Status <select id="f-status"></select></label>
<label>Model <select id="f-model"></select></label>
<label>Variant <select id="f-variant"></select></label>
<label>Task <select id="f-task"></select></label>
<label>Search transcripts <input id="f-q" type="search" size="24"></label>
<button type="button" id="f-reset">Reset</button>
<button type="button" id="f-csv">Export CSV</button>
<span id="f-count" class="note"></span>
</div>
<table id="runs-table"><thead><tr></tr></thead><tbody></tbody></table>
<p id="runs-more" class="note"></p>
<h2 id="side">Side by side</h2>
<div class="controls">
<label>Task <select id="s-task"></select></label>
<label>Across <select id="s-by"><option value="col">model / variant</option>
<option value="model">model</option><option value="variant">variant</option></select></label>
</div>
<div id="side-grid" class="grid"></div>
<h2 id="detail-head">Run</h2>
<div id="detail"><p class="note">Choose a run in the list.</p></div>
</div>
"""
