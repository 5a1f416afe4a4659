"""Totals of a report, derived from its runs alone.

One function for the batch and for `runner report merge`, so merged shards get the same
totals as one unsharded batch, number for number.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence

from runner.reports.model import MeanReward, RedoneReport, RunReport, Totals, UsageReport
from runner.reports.stats import mean_interval
from runner.vocabulary import RunStatus, Verdict

NO_VARIANT = "(none)"
"""The variant of runs without one, where variants are compared (no variant name has
parentheses)."""


def cache_hit_ratio(cached: int, sent: int) -> float | None:
    """cached / sent rounded to 4 places, as every usage in report.json; None when nothing
    was sent (0/0 is unknown, not a 0% hit rate)."""
    return round(cached / sent, 4) if sent else None


def sum_usage(usages: Iterable[UsageReport]) -> UsageReport:
    """Token counts add up; the ratio is recomputed from the sums, never averaged."""
    keys = (
        "input_tokens",
        "cached_tokens",
        "uncached_tokens",
        "output_tokens",
        "reasoning_tokens",
        "total_tokens",
        "cache_write_tokens",
        "unreported_responses",
    )
    sums = dict.fromkeys(keys, 0)
    ideal: int | None = None
    for u in usages:
        for k in keys:
            sums[k] += getattr(u, k)
        if u.ideal_cached_tokens is not None:
            ideal = (ideal or 0) + u.ideal_cached_tokens
    return UsageReport(
        **sums,
        cache_hit_ratio=cache_hit_ratio(sums["cached_tokens"], sums["input_tokens"]),
        ideal_cached_tokens=ideal,
        ideal_cache_ratio=None if ideal is None else cache_hit_ratio(ideal, sums["input_tokens"]),
    )


def sum_cost(costs: Iterable[float | None]) -> float | None:
    """A sum of prices, or None as soon as one is unknown: a partial sum would read as the
    whole cost. Rounded to 6 places so the order of addition (shards) cannot show."""
    total = 0.0
    for c in costs:
        if c is None:
            return None
        total += c
    return round(total, 6)


def finished_runs(tasks: Iterable[RunReport]) -> list[RunReport]:
    """Runs with a verdict (passed or failed): what rates, medians and intervals use."""
    return [t for t in tasks if t.status.verdict in (Verdict.PASSED, Verdict.FAILED)]


def task_rewards(tasks: Iterable[RunReport]) -> tuple[int, list[float]]:
    """(graded runs, the mean reward of each task): rewards of finished runs the verifier
    graded, averaged per task id over its repeats (and variants or models, when a group
    holds several), in report order."""
    per_task: dict[str, list[float]] = {}
    for t in finished_runs(tasks):
        if t.reward is not None:
            per_task.setdefault(t.id, []).append(t.reward)
    runs = sum(len(v) for v in per_task.values())
    return runs, [statistics.fmean(v) for v in per_task.values()]


def mean_reward(tasks: Iterable[RunReport]) -> tuple[int, float | None, tuple[float, float] | None]:
    """(n tasks, mean, 95% interval) of the rewards of finished runs the verifier graded:
    one computation for report.json, the summaries and JUnit. The task is the unit: runs
    of one task (repeats, variants) are not independent samples of the benchmark, so each
    task's runs are averaged first and the mean and its interval are over those task
    means, with n the number of tasks. Each task weighs the same, however many of its runs
    finished."""
    _, means = task_rewards(tasks)
    return len(means), statistics.fmean(means) if means else None, mean_interval(means)


def _mean_reward(tasks: Sequence[RunReport]) -> MeanReward:
    n, mean, ci = mean_reward(tasks)
    return MeanReward(
        rewarded=task_rewards(tasks)[0],
        tasks=n,
        mean=None if mean is None else round(mean, 4),
        ci_low=None if ci is None else round(ci[0], 4),
        ci_high=None if ci is None else round(ci[1], 4),
    )


def reward_groups(
    tasks: Sequence[RunReport], key: Callable[[RunReport], str]
) -> dict[str, MeanReward]:
    """The mean reward of each group of suite runs, in report order."""
    groups: dict[str, list[RunReport]] = {}
    for t in tasks:
        if t.suite is not None:
            groups.setdefault(key(t), []).append(t)
    return {name: _mean_reward(runs) for name, runs in groups.items()}


def sum_redone(parts: Iterable[RedoneReport | None]) -> RedoneReport | None:
    """Redone attempts added up; None when there are none."""
    got = [p for p in parts if p is not None and p.attempts]
    if not got:
        return None
    return RedoneReport(
        attempts=sum(p.attempts for p in got),
        usage=sum_usage(p.usage for p in got),
        cost_usd=sum_cost(p.cost_usd for p in got),
        retries=sum(p.retries for p in got),
        retry_wait_s=round(sum(p.retry_wait_s for p in got), 3),
    )


def compute_totals(tasks: Sequence[RunReport]) -> Totals:
    """The batch's counts. Its usage, cost, retries and waits hold what redone attempts
    spent too (`redone`, shown apart): money paid and time waited do not vanish because a
    run was run again."""
    done = sum(1 for t in tasks if t.status is RunStatus.COMPLETED)
    redone = sum_redone(t.redone for t in tasks)
    spent = [redone] if redone is not None else []
    kinds = [t.status.verdict for t in tasks]
    finished = kinds.count(Verdict.PASSED) + kinds.count(Verdict.FAILED)
    return Totals(
        runs=len(tasks),
        completed=done,
        not_completed=len(tasks) - done,
        finished=finished,
        skipped=kinds.count(Verdict.SKIPPED),
        errored=kinds.count(Verdict.ERRORED),
        pass_rate=round(done / finished, 4) if finished else None,
        requests=sum(len(t.requests) for t in tasks),
        tool_calls=sum(t.tool_calls for t in tasks),
        usage=sum_usage([*(t.usage for t in tasks), *(r.usage for r in spent)]),
        cost_usd=sum_cost([*(t.cost_usd for t in tasks), *(r.cost_usd for r in spent)]),
        retries=sum(t.retries for t in tasks) + sum(r.retries for r in spent),
        retry_wait_s=round(
            sum(t.retry_wait_s for t in tasks) + sum(r.retry_wait_s for r in spent), 3
        ),
        redone=redone,
        reward_by_model=reward_groups(tasks, lambda t: t.model),
        reward_by_variant=reward_groups(tasks, lambda t: t.variant or NO_VARIANT)
        if any(t.variant is not None for t in tasks if t.suite is not None)
        else {},
    )
