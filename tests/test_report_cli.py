"""`runner report merge|compare|branches` as commands: the exit code a CI gate reads
(merge exits as `runner run` would, compare gates on a regression and cannot pass what it
cannot tell), what they print, and a bad flag or input as a located problem (exit 2)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support.cli import run_cli
from tests.support.fixtures import make_git_repo
from tests.support.reports import benchmark_report, report, report_dir, task


def _cli(*args: object) -> subprocess.CompletedProcess[str]:
    return run_cli("report", "compare", *map(str, args))


# -- compare -----------------------------------------------------------------------------


def test_compare_gates_on_a_significant_regression(tmp_path: Path) -> None:
    d = report_dir(tmp_path / "bench", benchmark_report())
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


def test_compare_bad_input_exits_2(tmp_path: Path) -> None:
    d = report_dir(tmp_path / "bench", benchmark_report())
    res = _cli(d, d, "--base-variant", "nope")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "--base-variant: no run of variant 'nope'; variants there: plain, terse" in res.stderr
    res = _cli(d, tmp_path / "missing")
    assert res.returncode == 2 and "report.json" in res.stderr
    assert _cli(d, d, "--alpha", "2").returncode == 2


def test_compare_gate_does_not_pass_errored_only_or_partial_inputs(tmp_path: Path) -> None:
    passed = [task("a", "p/m", "completed"), task("b", "p/m", "completed")]
    base = report_dir(tmp_path / "base", report(passed))
    broken = report_dir(
        tmp_path / "broken", report([task("a", "p/m", "error"), task("b", "p/m", "rate_limited")])
    )
    res = _cli(base, broken, "--fail-on-regression")
    assert res.returncode == 3, res.stderr
    assert "inconclusive: all runs: no finished run in broken (2 errored, 0 skipped)" in res.stderr
    assert "**Inconclusive**" in res.stdout
    assert _cli(base, broken).returncode == 0  # no gate asked for: a report only
    half = report(passed).model_copy(update={"partial": True, "missing_shards": [2]})
    part = report_dir(tmp_path / "part", half)
    res = _cli(part, base, "--fail-on-regression", "--format", "json")
    assert res.returncode == 3
    assert json.loads(res.stdout)["inconclusive"] == ["part is partial (shard(s) 2 missing)"]
    # A model only one side ran is a change of the matrix, not a broken input.
    more = report_dir(tmp_path / "more", report([*passed, task("a", "p/other", "completed")]))
    assert _cli(base, more, "--fail-on-regression").returncode == 0
    # A real regression still says so with 1, whatever else is inconclusive.
    failing = report([task(i, "p/m", "check_failed") for i in "abcdefgh"])
    good = report_dir(tmp_path / "good", report([task(i, "p/m", "completed") for i in "abcdefgh"]))
    bad = report_dir(tmp_path / "bad", failing.model_copy(update={"pending": 3}))
    assert _cli(good, bad, "--fail-on-regression").returncode == 1


def test_compare_refuses_an_alpha_outside_zero_and_one(tmp_path: Path) -> None:
    d = report_dir(tmp_path / "bench", benchmark_report())
    for alpha in ("0", "1", "-0.1", "nan"):
        res = _cli(d, d, "--alpha", alpha)
        assert res.returncode == 2 and "Traceback" not in res.stderr, alpha
        assert "(command line): --alpha: must be between 0 and 1, e.g. 0.05" in res.stderr


# -- merge -------------------------------------------------------------------------------


def test_merge_exits_as_run_would_and_says_what_it_merged(tmp_path: Path) -> None:
    green = report_dir(tmp_path / "green", report([task("a", "p/m", "completed", run="a.r1")]))
    red = report_dir(tmp_path / "red", report([task("b", "p/m", "check_failed", run="b.r1")]))
    ok = run_cli("report", "merge", green, "--out", tmp_path / "one")
    assert ok.returncode == 0, ok.stderr
    assert "merged 1 shard(s): 1 run(s): 1 finished (1 passed), 0 skipped, 0 errored" in ok.stderr
    assert f"report: {tmp_path / 'one' / 'report.json'}" in ok.stderr
    both = run_cli("report", "merge", green, red, "--out", tmp_path / "two")
    assert both.returncode == 1, both.stderr
    assert "2 run(s): 2 finished (1 passed)" in both.stderr
    assert json.loads((tmp_path / "two" / "report.json").read_text())["totals"]["runs"] == 2


# -- branches ----------------------------------------------------------------------------


def test_branches_needs_a_repository_directory(no_git_above: Path) -> None:
    tmp_path = no_git_above
    out = report_dir(tmp_path / "out", report([task("a", "p/m", "completed", run="a.r1")]))
    (tmp_path / "file").write_text("not a folder\n")
    for repo, says in (
        (tmp_path / "file", "is not a directory; give the repository the runs used"),
        (tmp_path / "missing", "is not a directory"),
        (tmp_path, ""),  # a folder, but no git repository
    ):
        res = run_cli("report", "branches", out, "--repo", repo)
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        assert res.stderr.startswith("error: (command line): --repo: "), res.stderr
        assert says in res.stderr


def test_branches_of_a_batch_that_recorded_none(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    out = report_dir(tmp_path / "out", report([task("a", "p/m", "completed", run="a.r1")]))
    res = run_cli("report", "branches", out, "--repo", repo)
    assert res.returncode == 0, res.stderr
    assert res.stdout == ""
    assert f"{out}: no branches (batch " in res.stderr
