"""`runner report compare` on suite runs: mean reward per task, paired by task, beside the
pass rates; the CI gate on a significant drop and on too few paired tasks; named rewards;
and nothing new when no run has a reward."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Any

from runner.reports.compare import compare, render_compare
from runner.reports.model import Report, RunReport
from runner.reports.paired import t_quantile
from tests.support.cli import run_cli
from tests.support.reports import report, report_dir, run_name, task

GOOD, BAD = "openai/good", "openai/bad"


def graded(
    task_id: str,
    model: str,
    reward: float | None,
    *,
    status: str = "check_failed",
    repeat: int = 1,
    variant: str | None = None,
    named: dict[str, float] | None = None,
) -> RunReport:
    """A Harbor-like run: its reward, and `reward` among its named rewards."""
    t = task(
        task_id,
        model,
        status,
        run=run_name(task_id, model, variant, repeat),
        repeat=repeat,
        variant=variant,
        fingerprint=f"{task_id} {model} {variant} {repeat}",
    )
    rewards = {} if reward is None else {"reward": reward, **(named or {})}
    return t.model_copy(update={"suite": f"harbor:{task_id}", "reward": reward, "rewards": rewards})


def _cli(*args: object) -> subprocess.CompletedProcess[str]:
    return run_cli("report", "compare", *map(str, args))


def _models(base: dict[str, float], new: dict[str, float]) -> Report:
    """One batch of two models, one run per task, every run failing its pass check."""
    return report(
        [graded(k, GOOD, v) for k, v in base.items()] + [graded(k, BAD, v) for k, v in new.items()]
    )


def test_the_reviewers_case_shows_the_mean_reward(tmp_path: Path) -> None:
    """Reward 0.25 for one model and 0.75 for the other on 2 tasks: the pass rates are
    0/2 against 0/2, the rewards are not."""
    d = report_dir(tmp_path / "suite", _models({"a": 0.25, "b": 0.25}, {"a": 0.75, "b": 0.75}))
    flags = ["--base-model", GOOD, "--new-model", BAD]
    md = _cli(d, d, *flags)
    assert md.returncode == 0, md.stderr
    assert "| all runs | 0/2 0% | 0/2 0% | +0.0 pp |" in md.stdout
    assert "## Mean reward" in md.stdout
    # Both tasks rose by 0.5: the exact p is 2/4; the t interval has no spread to use.
    assert (
        "| all runs | reward | 0.25 | 0.75 | +0.50 | - | 2, 2 changed | 0.500 | too few tasks |"
        in md.stdout
    )
    data = json.loads(_cli(d, d, *flags, "--format", "json").stdout)
    row = data["reward"]["rows"][0]
    assert (row["base_mean"], row["new_mean"], row["change"]) == (0.25, 0.75, 0.5)
    assert (row["tasks_paired"], row["tasks_changed"], row["p_value"]) == (2, 2, 0.5)
    assert row["exact"] is True and row["verdict"] == "too few tasks"
    # Two tasks can never reach 0.05 (the smallest p is 0.5): a gate cannot pass on them.
    gate = _cli(d, d, *flags, "--fail-on-regression")
    assert gate.returncode == 3, gate.stderr
    assert (
        "inconclusive: all runs: mean reward: 2 paired task(s), too few for the signed-rank "
        "test to reach alpha 0.05 (it needs 6)"
    ) in gate.stderr


def test_a_significant_drop_fails_the_gate(tmp_path: Path) -> None:
    """8 tasks, each lower on NEW: the exact p is 2/2^8; the pass rates are equal."""
    base = {k: 0.5 + i / 20 for i, k in enumerate("abcdefgh")}
    new = {k: v - 0.1 - (i % 3) / 10 for i, (k, v) in enumerate(base.items())}
    diffs = [new[k] - base[k] for k in base]
    d = report_dir(tmp_path / "suite", _models(base, new))
    flags = ["--base-model", GOOD, "--new-model", BAD]
    res = _cli(d, d, *flags, "--fail-on-regression", "--format", "json")
    assert res.returncode == 1, res.stderr
    data = json.loads(res.stdout)
    assert data["overall"]["verdict"] == "no significant change"  # 0/8 against 0/8
    row = data["reward"]["rows"][0]
    assert row["p_value"] == round(2 / 256, 6) and row["verdict"] == "regression"
    mean = sum(diffs) / 8
    half = t_quantile(0.95, 7) * _stdev(diffs) / math.sqrt(8)
    assert math.isclose(row["change"], mean, abs_tol=1e-4)
    assert math.isclose(row["ci_low"], mean - half, abs_tol=1e-4)
    assert math.isclose(row["ci_high"], mean + half, abs_tol=1e-4)
    assert row["ci_high"] < 0
    assert data["inconclusive"] == []
    md = _cli(d, d, *flags, "--fail-on-regression")
    assert md.returncode == 1
    assert md.stdout.count("**1 significant regression(s)**") == 1
    assert "finished runs; mean reward: Wilcoxon signed-rank test, two-sided" in md.stdout
    assert "| 8, 8 changed | 0.008 | **regression** |" in md.stdout
    # The other way round it is an improvement, and the gate passes.
    assert (
        _cli(d, d, "--base-model", BAD, "--new-model", GOOD, "--fail-on-regression").returncode == 0
    )


def _stdev(xs: list[float]) -> float:
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def test_one_paired_task_is_inconclusive(tmp_path: Path) -> None:
    d = report_dir(tmp_path / "suite", _models({"a": 1.0}, {"a": 0.0}))
    res = _cli(d, d, "--base-model", GOOD, "--new-model", BAD, "--fail-on-regression")
    assert res.returncode == 3, res.stderr
    assert "mean reward: 1 paired task(s), too few" in res.stderr
    assert "| all runs | reward | 1.00 | 0.00 | -1.00 | - | 1, 1 changed | 1.000 |" in res.stdout


def test_repeats_are_averaged_per_task_and_unscored_runs_left_out() -> None:
    """BASE: task a 1.0 three times, b 0.0 once (run mean 0.75, task mean 0.5), and an
    errored run of c with no reward. NEW: a 1.0, b 0.0, c 0.5. Only a and b pair, and
    neither changed."""
    base = [graded("a", GOOD, 1.0, status="completed", repeat=r) for r in (1, 2, 3)]
    base += [graded("b", GOOD, 0.0), graded("c", GOOD, None, status="error")]
    new = [graded("a", BAD, 1.0, status="completed"), graded("b", BAD, 0.0)]
    new += [graded("c", BAD, 0.5)]
    r = report(base + new)
    c = compare(r, r, base_model=GOOD, new_model=BAD)
    assert c.reward is not None
    row = c.reward.rows[0]
    assert (row.base_graded, row.new_graded, row.tasks_paired) == (4, 3, 2)
    assert (row.base_mean, row.new_mean, row.change, row.tasks_changed) == (0.5, 0.5, 0.0, 0)
    assert row.p_value == 1.0 and row.ci_low is None


def test_repeats_are_one_task_not_many_samples() -> None:
    """Six tasks, each up by 0.5 on NEW, run 5 times a side: n is 6 tasks, not 30 runs,
    so p = 2/2^6 = 0.03125 and not the p of 30 samples."""
    runs = [
        graded(k, m, v, repeat=rep)
        for k in "abcdef"
        for m, v in ((GOOD, 0.25), (BAD, 0.75))
        for rep in range(1, 6)
    ]
    r = report(runs)
    c = compare(r, r, base_model=GOOD, new_model=BAD)
    assert c.reward is not None
    row = c.reward.rows[0]
    assert (row.base_graded, row.tasks_paired, row.p_value) == (30, 6, 0.03125)
    assert row.verdict == "improvement" and row.significant


def test_named_rewards_are_compared_by_name() -> None:
    """SWE-bench-like named shares: both sides have fail_to_pass and pass_to_pass;
    `extra` only on NEW is not compared; `reward` is not repeated among the named."""
    base = [graded(k, GOOD, 0.0, named={"fail_to_pass": 0.5, "pass_to_pass": 1.0}) for k in "abc"]
    new = [
        graded(k, BAD, 1.0, named={"fail_to_pass": 1.0, "pass_to_pass": 0.5 + i / 4, "extra": 1})
        for i, k in enumerate("abc")
    ]
    r = report(base + new)
    c = compare(r, r, base_model=GOOD, new_model=BAD)
    assert c.reward is not None
    named = {row.reward: row for row in c.reward.named}
    assert sorted(named) == ["fail_to_pass", "pass_to_pass"]
    f2p, p2p = named["fail_to_pass"], named["pass_to_pass"]
    assert (f2p.base_mean, f2p.new_mean, f2p.change, f2p.tasks_paired) == (0.5, 1.0, 0.5, 3)
    assert (p2p.base_mean, p2p.new_mean, p2p.change) == (1.0, 0.75, -0.25)
    assert p2p.p_value == 0.5  # ranks 1, 2 down of 1 + 2 (one task unchanged): 2 * 1/4
    md = render_compare(c)
    assert "| all runs | fail\\_to\\_pass | 0.50 | 1.00 | +0.50 | - | 3, 3 changed |" in md
    # Named rewards are shown, not gated on: only runs[].reward decides a regression.
    assert c.reward_regressions == []


def test_rows_per_model_when_variants_are_compared(tmp_path: Path) -> None:
    """Two variants over two models: a reward row per model; one model's drop over 6
    tasks is a regression and fails the gate; the other did not move."""
    runs = [
        graded(k, m, v, variant=var)
        for k in "abcdef"
        for m in (GOOD, BAD)
        for var, v in (("plain", 0.8), ("terse", 0.8 if m == GOOD else 0.3))
    ]
    d = report_dir(tmp_path / "suite", report(runs))
    res = _cli(
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
    assert res.returncode == 1, res.stderr
    rows = {r["name"]: r for r in json.loads(res.stdout)["reward"]["rows"]}
    assert list(rows) == ["all runs", GOOD, BAD]
    assert rows[BAD]["verdict"] == "regression" and rows[BAD]["p_value"] == 0.03125
    assert rows[GOOD]["verdict"] == "no significant change" and rows[GOOD]["change"] == 0.0
    assert rows["all runs"]["tasks_paired"] == 12  # a task per model: (a, openai/good), ...


def test_no_graded_run_on_one_side_is_inconclusive(tmp_path: Path) -> None:
    """BASE ran the tasks outside a suite (no reward at all); NEW is graded."""
    base = report_dir(tmp_path / "base", report([task(k, "p/m", "completed") for k in "abcdef"]))
    new = report_dir(
        tmp_path / "new", report([graded(k, "p/m", 1.0, status="completed") for k in "abcdef"])
    )
    res = _cli(base, new, "--fail-on-regression", "--format", "json")
    assert res.returncode == 3, res.stderr
    data = json.loads(res.stdout)
    assert data["reward"]["rows"][0]["verdict"] == "not comparable"
    assert data["inconclusive"] == [
        f"{row}: mean reward: no task graded on both sides (no graded run in base)"
        for row in ("all runs", "p/m")
    ]


def test_without_rewards_nothing_is_added(tmp_path: Path) -> None:
    r = report([task(k, "p/m", "completed") for k in "ab"])
    d = report_dir(tmp_path / "plain", r)
    data: dict[str, Any] = json.loads(_cli(d, d, "--format", "json").stdout)
    assert "reward" not in data
    c = compare(r, r)
    assert c.reward is None and "reward" not in render_compare(c).lower()
