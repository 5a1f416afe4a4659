"""Tests for runner.reports.markdown: the GitHub summary, its goldens and its escaping."""

from __future__ import annotations

import re

from runner.reports.markdown import cell, duration, inline, render_markdown, truncate
from tests.reports import check_golden, report, sample_report, task, usage


def _rows(md: str, heading: str) -> list[list[str]]:
    """The body rows of the table under `heading`, split on unescaped pipes."""
    section = md.split(f"## {heading}\n\n", 1)[1].split("\n\n", 1)[0]
    lines = section.splitlines()[2:]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]


def test_sample_golden() -> None:
    check_golden("report.md", render_markdown(sample_report()))


def test_empty_golden() -> None:
    check_golden("empty.md", render_markdown(report([], duration_s=0.0)))


def test_headline() -> None:
    md = render_markdown(sample_report())
    assert "**2 of 8 tasks completed** - " in md
    assert " - 54,200 tokens - cache hit 75.3% - 1m 35s\n" in md
    assert md.splitlines()[0] == "# Run 20260314-101500-ab12"


def test_every_row_has_every_column() -> None:
    md = render_markdown(sample_report())
    runs = _rows(md, "Runs")
    assert len(runs) == 8 and all(len(r) == 9 for r in runs)
    assert runs[0] == ["fix-parser", "openai/gpt-5", "PASS", "5", "12,800", "75.0%", "9",
                       "41.2s", "runner/fix-parser"]
    assert [r[2] for r in runs] == ["PASS", "FAIL (turns)", "FAIL (scope)", "FAIL",
                                    "FAIL (timeout)", "ERROR", "PASS", "FAIL (check)"]
    assert runs[2][8] == "-"
    assert runs[4][5] == "-"
    models = _rows(md, "Models")
    assert [m[0] for m in models] == ["openai/gpt-5", "local/smollm2"]
    assert all(len(m) == 7 for m in models)
    assert models[0][1:3] == ["4", "1/4 (25%)"]
    assert models[1][1:3] == ["4", "1/4 (25%)"]


def test_not_completed_section_truncates_and_escapes() -> None:
    md = render_markdown(sample_report())
    section = md.split("## Not completed\n\n", 1)[1]
    items = section.strip().splitlines()
    assert len(items) == 6 and all(i.startswith("- **") for i in items)
    long = next(i for i in items if "tests failed" in i)
    message = long.split(": ", 1)[1]
    assert len(message) <= 200 and message.endswith("\u2026")
    html = next(i for i in items if "HTTP 500" in i)
    # The visible escapes' backslashes are escaped too, so they render as `\x00`.
    assert "\\<html\\>\\&nbsp;\\</html\\>\\\\x00\\\\x1b\\[31m\\\\ud800" in html
    check = next(i for i in items if "FAIL (check)" in i)
    assert "check ruff check . exited 1: E501 line too long Found 1 error." in check


def test_cell_escapes_pipes_newlines_and_markup() -> None:
    assert cell("a | b") == "a \\| b"
    assert cell("one\ntwo\r\nthree") == "one<br>two<br>three"
    assert cell("<script>") == "\\<script\\>"
    assert cell("`x` *y* _z_ [l](u) ~s~ &amp; \\") == (
        "\\`x\\` \\*y\\* \\_z\\_ \\[l\\](u) \\~s\\~ \\&amp; \\\\")
    assert cell("") == " "
    assert inline("a\n|b") == "a \\|b"
    assert inline("\x00\x1b[0m\ud800") == "\\\\x00\\\\x1b\\[0m\\\\ud800"


def test_pipes_in_task_text_do_not_add_columns() -> None:
    md = render_markdown(report([task("a|b", "p/m|x", "failed", error="e|\n|f")]))
    runs = _rows(md, "Runs")
    assert len(runs) == 1 and len(runs[0]) == 9
    assert runs[0][0] == "a\\|b"


def test_truncate() -> None:
    assert truncate("short") == "short"
    assert truncate("a\n\n b") == "a b"
    cut = truncate("word " * 100)
    assert len(cut) <= 200 and cut.endswith("\u2026")


def test_duration() -> None:
    assert duration(0) == "0.0s"
    assert duration(59.94) == "59.9s"
    assert duration(61) == "1m 01s"
    assert duration(3599.6) == "1h 00m"
    assert duration(3725) == "1h 02m"
    assert duration(float("nan")) == "-" and duration(float("inf")) == "-"


def test_no_cache_data_and_median() -> None:
    r = report([task("a", "p/m", "completed", u=usage(0, 0, 0)),
                task("b", "p/m", "completed", u=usage(100, 0, 1)),
                task("c", "p/m", "error", u=usage(200, 50, 2))])
    models = _rows(render_markdown(r), "Models")
    assert models == [["p/m", "3", "2/3 (67%)", "101", "16.7%", "12.5s", "37.5s"]]
