"""Writes a report's files; the batch and `runner report merge` share it, so a merged
directory looks exactly like one written by a single `runner run`."""

from __future__ import annotations

from pathlib import Path

from runner.fsutil import atomic_write_text
from runner.redact import Redactor
from runner.reports.fmt import STEP_SUMMARY_MAX_CHARS
from runner.reports.junit import render_junit
from runner.reports.markdown import render_markdown
from runner.reports.model import Report


def write_reports(
    report: Report,
    out_dir: Path,
    *,
    redact: Redactor,
    step_summary: str | None = None,
    page: bool = True,
) -> Path:
    """`report.json`, `junit.xml` for CI systems, `summary.md` and (with `page`)
    `report.html` for people, each written atomically, and (with `page`) the files
    the suites' own tools take (`suite_outputs`); the summary is also appended to
    GitHub's step summary file when one is given, cut to fit its 1 MiB limit. Returns the
    path of `report.json`."""
    path = out_dir / "report.json"
    atomic_write_text(path, redact(report.model_dump_json(indent=2)) + "\n")
    atomic_write_text(out_dir / "junit.xml", redact(render_junit(report)))
    summary = render_markdown(report)
    atomic_write_text(out_dir / "summary.md", redact(summary))
    if page:
        from runner.reports.html import render_html
        from runner.reports.suite_outputs import write_suite_outputs

        write_suite_outputs(report, out_dir, redact)
        atomic_write_text(out_dir / "report.html", redact(render_html(report, out_dir)))
    if step_summary:
        if len(summary) > STEP_SUMMARY_MAX_CHARS:
            summary = render_markdown(report, max_chars=STEP_SUMMARY_MAX_CHARS)
        with open(step_summary, "a", encoding="utf-8") as f:
            f.write(redact(summary) + "\n")
    return path
