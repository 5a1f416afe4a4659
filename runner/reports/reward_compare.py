"""The mean reward of suite runs in `runner report compare`, beside the pass rates.

A pass rate cannot see a reward of 0.25 becoming 0.75: both runs fail. So when either side
has rewards, each row (overall, per model/variant) also compares mean rewards, and each
named reward the same way when both sides have it.

The unit is the task: on each side a task's reward is the mean over its graded repeats,
so a task repeated five times weighs what a task run once does, and repeats are not taken
for independent samples. The tasks graded on both sides are then paired: the change is the
mean of the per-task changes, with Student's t interval, and the verdict is Wilcoxon's
signed-rank test of those changes (`reports.paired`). Only finished runs the verifier
graded count: an errored verifier gives no score.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from runner.reports.fmt import cell, table
from runner.reports.model import RunReport
from runner.reports.paired import paired_interval, signed_rank
from runner.reports.totals import finished_runs

MAIN = "reward"
"""The name of `runs[].reward` in the rows, and the named reward it repeats (left out of
the named rows)."""

Key = Callable[[RunReport], str]
Value = Callable[[RunReport], float | None]


class RewardRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    """The row: `all runs`, or a model / variant."""
    reward: str
    """`reward` (runs[].reward), or the name of a named reward (runs[].rewards)."""
    base_graded: int
    new_graded: int
    """Finished runs of the row with this reward, per side."""
    tasks_paired: int
    """Tasks graded on both sides: the n of the means, the interval and the test."""
    base_mean: float | None = None
    new_mean: float | None = None
    """Per side, the mean over the paired tasks of each task's mean over its repeats."""
    change: float | None = None
    """new_mean - base_mean: the mean of the per-task changes."""
    ci_low: float | None = None
    ci_high: float | None = None
    """The 95% t interval of `change`; null with fewer than 2 paired tasks, or when every
    paired task changed by the same amount (no spread to measure)."""
    tasks_changed: int | None = None
    """Paired tasks whose mean changed: the n of the signed-rank test."""
    p_value: float | None = None
    """Wilcoxon's signed-rank test, two-sided, over the paired tasks."""
    exact: bool | None = None
    """False when the test used its normal form (many changed tasks)."""
    significant: bool = False
    verdict: str
    """`regression`, `improvement`, `no significant change`, `too few tasks` (no outcome
    on this few paired tasks could reach alpha) or `not comparable` (no task graded on
    both sides)."""


class RewardComparison(BaseModel):
    model_config = ConfigDict(extra="forbid")

    unit: str = "task: a task's reward is the mean over its graded repeats on each side"
    test: str = "Wilcoxon signed-rank test, two-sided, on per-task rewards paired by task"
    interval: str = "Student's t interval (95%) of the mean per-task change"
    rows: list[RewardRow]
    """runs[].reward: overall, then per model / variant."""
    named: list[RewardRow] = []
    """Each named reward both sides have (but `reward` itself), the same way."""
    inconclusive: list[str] = Field(default=[], exclude=True)
    """Rows of `rows` that ran on both sides but cannot be tested: too few paired tasks,
    or none graded on one side. Written once, in the comparison's own `inconclusive`."""

    @property
    def regressions(self) -> list[RewardRow]:
        """The rows that fail `--fail-on-regression`: runs[].reward only; the named
        rewards are its parts, shown for reading, not gated on."""
        return [r for r in self.rows if r.verdict == "regression"]


def _per_task(runs: Sequence[RunReport], value: Value, unit: Key) -> tuple[int, dict[str, float]]:
    """(graded runs, each task's mean reward over its graded repeats)."""
    found: dict[str, list[float]] = {}
    for t in finished_runs(runs):
        v = value(t)
        if v is not None:
            found.setdefault(unit(t), []).append(v)
    graded = sum(len(v) for v in found.values())
    return graded, {k: statistics.fmean(v) for k, v in found.items()}


def fewest_tasks(alpha: float) -> int:
    """The fewest paired tasks on which the signed-rank test can reach `alpha`: with n
    tasks its smallest p is 2 / 2^n (every task changed the same way), 6 at 0.05."""
    n = 1
    while 2 / 2**n >= alpha:
        n += 1
    return n


def _row(
    name: str,
    reward: str,
    base: Sequence[RunReport],
    new: Sequence[RunReport],
    value: Value,
    unit: Key,
    alpha: float,
) -> RewardRow | None:
    """One row; None when neither side has this reward in the row."""
    (nb, x), (nn, y) = _per_task(base, value, unit), _per_task(new, value, unit)
    if not nb and not nn:
        return None
    paired = [k for k in x if k in y]
    row = RewardRow(
        name=name,
        reward=reward,
        base_graded=nb,
        new_graded=nn,
        tasks_paired=len(paired),
        verdict="not comparable",
    )
    if not paired:
        return row
    diffs = [y[k] - x[k] for k in paired]
    test = signed_rank(diffs)
    ci = paired_interval(diffs)
    change = statistics.fmean(diffs)
    significant = test.p_value < alpha
    verdict = (
        "too few tasks"
        if len(paired) < fewest_tasks(alpha)
        else "no significant change"
        if not significant
        else "regression"
        if change < 0
        else "improvement"
    )
    return row.model_copy(
        update={
            "base_mean": round(statistics.fmean(x[k] for k in paired), 4),
            "new_mean": round(statistics.fmean(y[k] for k in paired), 4),
            "change": round(change, 4),
            "ci_low": None if ci is None else round(ci[0], 4),
            "ci_high": None if ci is None else round(ci[1], 4),
            "tasks_changed": test.n,
            "p_value": round(test.p_value, 6),
            "exact": test.exact,
            "significant": significant,
            "verdict": verdict,
        }
    )


def _named(name: str) -> Value:
    return lambda t: t.rewards.get(name)


def _names(runs: Sequence[RunReport]) -> list[str]:
    return list(dict.fromkeys(k for t in runs for k in t.rewards if k != MAIN))


def compare_rewards(
    base: Sequence[RunReport],
    new: Sequence[RunReport],
    group: Key,
    unit: Key,
    alpha: float,
    names: tuple[str, str],
) -> RewardComparison | None:
    """The reward rows of a comparison; None when neither side has a reward, so a
    comparison of runs of no suite stays as it was.

    `group` names the model/variant row of a run ("" when there is none), `unit` its
    task (with its model/variant when the overall row spans several)."""
    if not any(t.reward is not None or t.rewards for t in [*base, *new]):
        return None
    keys = list(dict.fromkeys(group(t) for t in [*base, *new]))
    parts = [("all runs", base, new)]
    if any(keys):
        parts += [
            (k, [t for t in base if group(t) == k], [t for t in new if group(t) == k]) for k in keys
        ]

    def rows(reward: str, value: Value) -> list[RewardRow]:
        made = (_row(name, reward, b, n, value, unit, alpha) for name, b, n in parts)
        return [r for r in made if r is not None]

    main = rows(MAIN, lambda t: t.reward)
    shared = [k for k in _names(base) if k in set(_names(new))]
    named = [r for k in shared for r in rows(k, _named(k))]
    ran = {name for name, b, n in parts if b and n}
    why = []
    for r in main:
        if r.name not in ran:
            continue  # a model/variant only one side ran changes the matrix, nothing more
        if r.verdict == "not comparable":
            side = names[0] if not r.base_graded else names[1] if not r.new_graded else ""
            why.append(
                f"{r.name}: mean reward: no task graded on both sides"
                + (f" (no graded run in {side})" if side else "")
            )
        elif r.verdict == "too few tasks":
            why.append(
                f"{r.name}: mean reward: {r.tasks_paired} paired task(s), too few for the "
                f"signed-rank test to reach alpha {alpha:g} (it needs {fewest_tasks(alpha)})"
            )
    return RewardComparison(rows=main, named=named, inconclusive=why)


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _signed(v: float | None) -> str:
    return "-" if v is None else f"{v:+.2f}"


def _ci(r: RewardRow) -> str:
    if r.ci_low is None or r.ci_high is None:
        return "-"
    return f"{r.ci_low:+.2f} to {r.ci_high:+.2f}"


def _p(r: RewardRow) -> str:
    if r.p_value is None:
        return "-"
    return f"{r.p_value:.3f}" + ("" if r.exact else " (normal)")


def render_rewards(c: RewardComparison) -> list[str]:
    """The Markdown section: one table, runs[].reward rows first, then named ones."""
    header = ["", "Reward", "Base mean", "New mean", "Change", "95% CI", "Tasks", "p", "Verdict"]
    align = ["---", "---", "--:", "--:", "--:", "--:", "--:", "--:", "---"]

    def line(r: RewardRow) -> list[str]:
        tasks = str(r.tasks_paired)
        if r.tasks_changed is not None:
            tasks += f", {r.tasks_changed} changed"
        verdict = f"**{r.verdict}**" if r.significant else r.verdict
        cells = [cell(r.name), cell(r.reward), _num(r.base_mean), _num(r.new_mean)]
        return [*cells, _signed(r.change), _ci(r), tasks, _p(r), verdict]

    return [
        "## Mean reward",
        "",
        f"Per {c.unit}; the means are over the tasks graded on both sides (*Tasks*: paired, "
        f"of which changed). *p*: {c.test}. *95% CI*: {c.interval}.",
        "",
        *table(header, align, [line(r) for r in [*c.rows, *c.named]]),
        "",
    ]
