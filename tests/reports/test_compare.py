"""`runner report compare`: Fisher's exact test against published values, the comparison of
two variants with hand-counted pass rates, and the CLI's exit code for CI gating."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest

from runner.errors import ReportError
from runner.reports.compare import compare, fisher_exact, render_compare
from runner.reports.model import Report
from tests.support.cli import run_cli
from tests.support.reports import benchmark_report, report, task


@pytest.mark.parametrize(
    ("table", "p"),
    [
        # R: fisher.test(matrix(c(a, c, b, d), 2))$p.value
        ((3, 1, 1, 3), 0.4857142857),
        ((1, 9, 11, 3), 0.0027594562),  # the tea-tasting-like textbook table
        ((10, 0, 0, 10), 1.0825088224e-05),
        ((8, 2, 1, 5), 0.0349650350),
        ((5, 1, 1, 5), 0.0800865801),
        ((0, 6, 6, 0), 0.00216450216),
        ((2, 2, 2, 2), 1.0),
        ((0, 0, 3, 1), 1.0),
    ],
)
def test_fisher_exact_matches_published_values(table: tuple[int, int, int, int], p: float) -> None:
    assert math.isclose(fisher_exact(*table), p, rel_tol=1e-8)


def test_fisher_is_symmetric_and_refuses_negative_counts() -> None:
    assert fisher_exact(8, 2, 1, 5) == fisher_exact(1, 5, 8, 2) == fisher_exact(2, 8, 5, 1)
    with pytest.raises(ReportError, match="counts must be >= 0"):
        fisher_exact(-1, 0, 0, 0)


def test_two_variants_of_one_batch() -> None:
    """benchmark_report: gpt-5 terse 5/6, plain 1/6; smollm2 terse 0/6, plain 6/6."""
    r = benchmark_report()
    c = compare(r, r, base_variant="terse", new_variant="plain")
    assert [g.name for g in c.groups] == ["openai/gpt-5", "local/smollm2"]
    gpt, small = c.groups
    assert (gpt.base.passed, gpt.base.finished, gpt.new.passed, gpt.new.finished) == (5, 6, 1, 6)
    assert gpt.pass_rate_change == round(1 / 6 - 5 / 6, 4)
    assert gpt.verdict == "no significant change" and math.isclose(
        gpt.p_value or 0, 0.080087, abs_tol=1e-6
    )
    assert small.verdict == "improvement" and small.pass_rate_change == 1.0
    assert c.overall.base.passed == 5 and c.overall.new.passed == 7
    assert c.overall.verdict == "no significant change"
    assert len(c.tasks) == 4 and c.tasks[0].name == "alpha (openai/gpt-5)"
    # Token means over finished runs: r=1..3 -> 1100, 2100, 3100 tokens; mean 2100.
    assert gpt.base.mean_tokens == 2100.0
    assert gpt.base.mean_cost_usd == 0.02 and small.base.mean_cost_usd is None
    md = render_compare(c)
    assert "**No significant regression** at alpha 0.05 (Fisher's exact test" in md
    assert "| local/smollm2 | 0/6 0% | 6/6 100% | +100.0 pp | 0.002 | **improvement** |" in md


def test_skipped_and_errored_runs_are_not_compared() -> None:
    base = report(
        [
            task("a", "p/m", "completed"),
            task("a", "p/m", "skipped", requests=0),
            task("a", "p/m", "error"),
        ]
    )
    new = report([task("a", "p/m", "check_failed")])
    c = compare(base, new)
    assert (c.overall.base.finished, c.overall.base.skipped, c.overall.base.errored) == (1, 1, 1)
    assert c.overall.base.pass_rate == 1.0 and c.overall.new.pass_rate == 0.0
    assert "1/1 -> 0/0" in render_compare(c)


def _write(directory: Path, r: Report) -> Path:
    directory.mkdir(parents=True)
    (directory / "report.json").write_text(r.model_dump_json())
    return directory


def _cli(*args: object) -> subprocess.CompletedProcess[str]:
    return run_cli("report", "compare", *map(str, args))


def test_cli_gates_on_a_significant_regression(tmp_path: Path) -> None:
    d = _write(tmp_path / "bench", benchmark_report())
    ok = _cli(d, d, "--base-variant", "terse", "--new-variant", "plain", "--fail-on-regression")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("# Compare bench \\[terse\\] -> bench \\[plain\\]")
    bad = _cli(
        d,
        d,
        "--base-variant",
        "plain",
        "--new-variant",
        "terse",
        "--fail-on-regression",
        "--format",
        "json",
    )
    assert bad.returncode == 1
    data = json.loads(bad.stdout)
    assert [g["verdict"] for g in data["groups"]] == ["no significant change", "regression"]
    assert _cli(d, d, "--base-variant", "plain", "--new-variant", "terse").returncode == 0


def test_cli_bad_input_exits_2(tmp_path: Path) -> None:
    d = _write(tmp_path / "bench", benchmark_report())
    res = _cli(d, d, "--base-variant", "nope")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "--base-variant: no run of variant 'nope'; variants there: plain, terse" in res.stderr
    res = _cli(d, tmp_path / "missing")
    assert res.returncode == 2 and "report.json" in res.stderr
    assert _cli(d, d, "--alpha", "2").returncode == 2


def test_cli_gate_does_not_pass_errored_only_or_partial_inputs(tmp_path: Path) -> None:
    passed = [task("a", "p/m", "completed"), task("b", "p/m", "completed")]
    base = _write(tmp_path / "base", report(passed))
    broken = _write(
        tmp_path / "broken", report([task("a", "p/m", "error"), task("b", "p/m", "rate_limited")])
    )
    res = _cli(base, broken, "--fail-on-regression")
    assert res.returncode == 3, res.stderr
    assert "inconclusive: all runs: no finished run in broken (2 errored, 0 skipped)" in res.stderr
    assert "**Inconclusive**" in res.stdout
    assert _cli(base, broken).returncode == 0  # no gate asked for: a report only
    half = report(passed).model_copy(update={"partial": True, "missing_shards": [2]})
    part = _write(tmp_path / "part", half)
    res = _cli(part, base, "--fail-on-regression", "--format", "json")
    assert res.returncode == 3
    assert json.loads(res.stdout)["inconclusive"] == ["part is partial (shard(s) 2 missing)"]
    # A model only one side ran is a change of the matrix, not a broken input.
    more = _write(tmp_path / "more", report([*passed, task("a", "p/other", "completed")]))
    assert _cli(base, more, "--fail-on-regression").returncode == 0
    # A real regression still says so with 1, whatever else is inconclusive.
    failing = report([task(i, "p/m", "check_failed") for i in "abcdefgh"])
    good = _write(tmp_path / "good", report([task(i, "p/m", "completed") for i in "abcdefgh"]))
    bad = _write(tmp_path / "bad", failing.model_copy(update={"pending": 3}))
    assert _cli(good, bad, "--fail-on-regression").returncode == 1
