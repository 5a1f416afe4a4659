"""Tests for runner.reports.markdown: the GitHub summary, its goldens, its comparisons, its
size cap and its escaping."""

from __future__ import annotations

import re

import pytest

from runner.reports.fmt import PR_COMMENT_MAX_CHARS
from runner.reports.markdown import render_markdown
from runner.reports.model import RunReport
from tests.support.reports import (
    benchmark_report,
    check_golden,
    report,
    run_name,
    sample_report,
    task,
)
from tests.support.reports import usage as make_usage


def _rows(md: str, heading: str) -> list[list[str]]:
    """The body rows of the table under `heading`, split on unescaped pipes."""
    section = md.split(f"## {heading}\n\n", 1)[1].split("\n\n", 1)[0]
    lines = section.splitlines()[2:]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]


def _header(md: str, heading: str) -> list[str]:
    section = md.split(f"## {heading}\n\n", 1)[1]
    return [c.strip() for c in section.splitlines()[0].split("|")[1:-1]]


def test_sample_golden() -> None:
    check_golden("report.md", render_markdown(sample_report()))


def test_benchmark_golden() -> None:
    check_golden("benchmark.md", render_markdown(benchmark_report()))


def test_empty_golden() -> None:
    check_golden("empty.md", render_markdown(report([], duration_s=0.0)))


def test_headline() -> None:
    md = render_markdown(sample_report())
    assert md.splitlines()[0] == "# Run 20260314-101500-ab12"
    # Hand count: 12 runs; docs.r1 (error) and bump/gpt (interrupted) errored, refactor/local
    # skipped; of the 9 finished, fix-parser/gpt and docs.r2 passed. Costs: gpt runs known,
    # local unknown, so the headline cost is a lower bound.
    assert (
        "**2 of 9 finished runs passed (22.2%)** - 12 runs: 9 finished, 1 skipped "
        "(budget 1), 2 errored - 61,850 tokens - cache hit 74.9% - cost >= $0.1487"
        " - 1m 35s\n"
    ) in md
    assert "1 run(s) never started; `runner run ... --resume`" in md
    known = report(
        [task("a", "p/m", "completed", cost_usd=0.25), task("b", "p/m", "failed", cost_usd=1.5)]
    )
    assert " - cost $1.75 - " in render_markdown(known)


def test_merged_report_names_its_shards() -> None:
    r = sample_report().model_copy(update={"shards": ["aaa111", "bbb222"]})
    assert "Merged from 2 shards: aaa111, bbb222." in render_markdown(r)


def test_every_run_row_has_every_column() -> None:
    md = render_markdown(sample_report())
    assert _header(md, "Runs") == [
        "Run",
        "Model",
        "Status",
        "User turns",
        "Requests",
        "Tool calls",
        "Tokens",
        "Cached / prefix reuse",
        "Cost",
        "Time",
        "Branch",
    ]
    runs = _rows(md, "Runs")
    assert len(runs) == 12 and all(len(r) == 11 for r in runs)
    assert runs[0] == [
        "fix-parser.openai-gpt-5.r1",
        "openai/gpt-5",
        "PASS",
        "4",
        "5",
        "9",
        "12,800",
        "75.0%",
        "$0.0421",
        "41.2s",
        "runner/fix-parser",
    ]
    assert [r[2] for r in runs] == [
        "PASS",
        "FAIL (requests)",
        "FAIL (scope)",
        "FAIL",
        "FAIL (timeout)",
        "ERROR",
        "PASS",
        "FAIL (check)",
        "STOPPED",
        "FAIL (budget)",
        "FAIL (tool calls)",
        "NOT STARTED",
    ]
    assert runs[2][10] == "-"
    assert runs[4][7] == "-"
    assert runs[3][8] == "n/a"


def test_ideal_cache_ratio_and_compactions_are_shown() -> None:
    from runner.reports.model import CompactionReport

    report = sample_report()
    first = report.runs[0]
    usage = first.usage.model_copy(update={"ideal_cache_ratio": 0.8})
    comp = CompactionReport(
        kind="local",
        reason="pre-turn",
        tokens_before=9000,
        tokens_after=2000,
        items_before=80,
        items_after=4,
        dropped_items=0,
        requests=[7],
    )
    report.runs[0] = first.model_copy(update={"usage": usage, "compactions": [comp, comp]})
    md = render_markdown(report)
    header = _header(md, "Runs")
    row = _rows(md, "Runs")[0]
    assert row[header.index("Cached / prefix reuse")] == "75.0% / 80.0%"
    assert row[header.index("Compactions")] == "2"
    assert _rows(md, "Runs")[1][header.index("Compactions")] == "0"


def test_variant_column_only_with_variants() -> None:
    md = render_markdown(benchmark_report())
    assert _header(md, "Runs")[:4] == ["Run", "Model", "Variant", "Status"]
    assert _rows(md, "Runs")[0][:4] == [
        "alpha.openai-gpt-5.terse.r1",
        "openai/gpt-5",
        "terse",
        "PASS",
    ]
    assert "Variant" not in _header(render_markdown(sample_report()), "Runs")
    assert "## By variant" not in render_markdown(sample_report())


def test_comparison_by_model_variant_and_both() -> None:
    md = render_markdown(benchmark_report())
    assert _header(md, "By model") == [
        "Model",
        "Finished",
        "Skipped",
        "Errored",
        "Pass rate (95% CI)",
        "pass@1",
        "pass@n",
        "Median tokens",
        "Cache hit / prefix reuse",
        "Cost / pass",
        "Median time",
        "Tokens in / out",
        "Cost",
        "Time",
    ]
    assert _rows(md, "By model") == [
        [
            "openai/gpt-5",
            "12",
            "0",
            "0",
            "6/12 50% (25%-75%)",
            "50%",
            "75% (n=3)",
            "2,100",
            "50.0%",
            "$0.0400",
            "20.0s",
            "24,000 / 1,200",
            "$0.2400",
            "4m 00s",
        ],
        [
            "local/smollm2",
            "12",
            "0",
            "0",
            "6/12 50% (25%-75%)",
            "50%",
            "50% (n=3)",
            "2,100",
            "50.0%",
            "n/a",
            "20.0s",
            "24,000 / 1,200",
            "n/a",
            "4m 00s",
        ],
    ]
    assert [r[:7] for r in _rows(md, "By variant")] == [
        ["terse", "12", "0", "0", "5/12 42% (19%-68%)", "42%", "50% (n=3)"],
        ["plain", "12", "0", "0", "7/12 58% (32%-81%)", "58%", "75% (n=3)"],
    ]
    assert _rows(md, "Task x model")[0] == ["alpha", "3/3", "1/3", "0/3", "3/3"]
    both = _rows(md, "By model and variant")
    assert [r[0] for r in both] == [
        "openai/gpt-5 / terse",
        "openai/gpt-5 / plain",
        "local/smollm2 / terse",
        "local/smollm2 / plain",
    ]
    assert both[0][4:7] == ["5/6 83% (44%-97%)", "83%", "100% (n=3)"]
    assert both[0][9] == "$0.0240"
    assert both[2][4:7] == ["0/6 0% (0%-39%)", "0%", "0% (n=3)"]
    assert both[2][9] == "n/a"
    assert "95% Wilson score interval" in md and "1 - C(n-c, k) / C(n, k)" in md


def test_no_repeats_means_no_pass_at_k_columns() -> None:
    r = report([task("a", "p/m", "completed", run="a.r1"), task("b", "p/m", "failed", run="b.r1")])
    md = render_markdown(r)
    assert "pass@" not in md
    assert _rows(md, "By model") == [
        [
            "p/m",
            "2",
            "0",
            "0",
            "1/2 50% (9%-91%)",
            "1,200",
            "60.0%",
            "n/a",
            "12.5s",
            "2,000 / 400",
            "n/a",
            "25.0s",
        ]
    ]


def test_single_run_has_no_comparison() -> None:
    md = render_markdown(report([task("a", "p/m", "completed")]))
    assert "## By model" not in md and "## Runs" in md


def test_not_completed_section_truncates_and_escapes() -> None:
    md = render_markdown(sample_report())
    section = md.split("## Not completed\n\n", 1)[1].split("\n\n## ", 1)[0]
    items = section.strip().splitlines()
    assert len(items) == 10 and all(i.startswith("- **") for i in items)
    long = next(i for i in items if "tests failed" in i)
    message = long.split(": ", 1)[1]
    assert len(message) <= 200 and message.endswith("\u2026")
    html = next(i for i in items if "HTTP 500" in i)
    # The visible escapes' backslashes are escaped too, so they render as `\x00`.
    assert "\\<html\\>\\&nbsp;\\</html\\>\\\\x00\\\\x1b\\[31m\\\\ud800" in html
    check = next(i for i in items if "FAIL (check)" in i)
    assert "check ruff check . exited 1: E501 line too long Found 1 error." in check


def test_prefix_breaks_section() -> None:
    md = render_markdown(sample_report())
    section = md.split("## Prefix breaks\n\n", 1)[1]
    assert section.strip().splitlines()[-1] == (
        "- **add\\_tests.openai-gpt-5.r1**: 2 (first at request 2, item 2: instructions changed)"
    )
    assert "## Prefix breaks" not in render_markdown(benchmark_report())


def _big_report(n: int) -> list[RunReport]:
    return [
        task(
            f"task-{i:04d}",
            "openai/gpt-5" if i % 2 else "local/smollm2",
            "completed" if i % 3 else "failed",
            error=None if i % 3 else "e" * 300,
            run=run_name(f"task-{i:04d}", "p/m", None, 1),
            cost_usd=0.01,
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("limit", [PR_COMMENT_MAX_CHARS, 20_000, 5_000])
def test_max_chars_cuts_runs_first_and_says_so(limit: int) -> None:
    r = report(_big_report(1500))
    full = render_markdown(r)
    assert len(full) > PR_COMMENT_MAX_CHARS
    cut = render_markdown(r, max_chars=limit)
    assert len(cut) <= limit
    # The comparisons are always whole.
    assert _rows(cut, "By model") == _rows(full, "By model")
    assert re.search(
        r"_[\d,]+ more runs not shown, to keep this summary under "
        rf"{limit:,} characters; report.json has them all._",
        cut,
    )
    shown = len(_rows(cut, "Runs"))
    assert 0 <= shown < 1500
    # Every shown row is a real row, in order.
    assert _rows(cut, "Runs") == _rows(full, "Runs")[:shown]
    # Failures are kept before run rows.
    failures = cut.split("## Not completed\n\n", 1)[1].splitlines()
    assert failures[0].startswith("- **task-0000")


def test_max_chars_not_needed_changes_nothing() -> None:
    r = sample_report()
    assert render_markdown(r, max_chars=10**6) == render_markdown(r)


@pytest.mark.parametrize("limit", [40, 300, 900])
def test_max_chars_below_the_comparisons_still_holds(limit: int) -> None:
    cut = render_markdown(benchmark_report(), max_chars=limit)
    assert len(cut) <= limit


def test_pipes_in_task_text_do_not_add_columns() -> None:
    md = render_markdown(
        report(
            [
                task("a|b", "p/m|x", "failed", error="e|\n|f"),
                task("c", "p/m|x", "completed", variant="v|w"),
            ]
        )
    )
    runs = _rows(md, "Runs")
    assert len(runs) == 2 and all(len(r) == 12 for r in runs)
    assert runs[0][0] == "a\\|b"
    assert all(len(r) == 12 for r in _rows(md, "By variant"))


def test_no_cache_data_and_median() -> None:
    r = report(
        [
            task("a", "p/m", "completed", u=make_usage(0, 0, 0)),
            task("b", "p/m", "completed", u=make_usage(100, 0, 1)),
            task("c", "p/m", "error", u=make_usage(200, 50, 2)),
        ]
    )
    models = _rows(render_markdown(r), "By model")
    # The errored run is out of the rate and the medians, in the totals.
    assert models == [
        [
            "p/m",
            "2",
            "0",
            "1",
            "2/2 100% (34%-100%)",
            "50",
            "0.0%",
            "n/a",
            "12.5s",
            "300 / 3",
            "n/a",
            "37.5s",
        ]
    ]


def test_user_turns_count_the_turn_a_limit_or_an_error_cut_short() -> None:
    """Review 27b #11: a run stopped by a limit or an error in its first turn showed "User
    turns 0" (turns finished). The column counts the prompts the model was given."""
    first = task("a", "p/m", "max_requests", requests=3)
    first = first.model_copy(update={"turns_completed": 0})
    second = task("b", "p/m", "error", requests=2)
    second = second.model_copy(
        update={
            "turns_completed": 1,
            "requests": [second.requests[0], second.requests[1].model_copy(update={"turn": 1})],
        }
    )
    never = task("c", "p/m", "skipped", requests=0)
    assert [t.user_turns for t in (first, second, never)] == [1, 2, 0]
    md = render_markdown(report([first, second, never]))
    assert "| a | p/m | FAIL (requests) | 1 | 3 |" in md
    assert "| b | p/m | ERROR | 2 | 2 |" in md
