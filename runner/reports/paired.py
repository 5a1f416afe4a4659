"""Paired statistics for rewards: one number per task on each side, compared task by task.

Rewards are bounded, often 0, 1 or a few steps between, and a benchmark has tens of tasks,
not thousands. So the test is Wilcoxon's signed-rank test, which needs no normal law of
the differences, computed exactly (in integers, over every sign assignment) whenever that
is affordable; its normal form with the tie and continuity corrections only for many
tasks. The interval is Student's t interval of the mean difference, the textbook one, with
the t quantile from its closed form (no scipy in the runtime).

Kept apart from `reports.stats` (pass counts and 2x2 tables): these work on real-valued
differences, and they change for different reasons.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import NamedTuple

from runner.errors import ReportError

DIGITS = 9
"""Differences are rounded to this many decimals before ranking, so 0.1 + 0.2 and 0.3
tie as the rewards they came from do."""

EXACT_WORK = 1_000_000
"""Steps of the exact signed-rank law (tasks x the largest rank sum) above which the
normal form is used: up to 99 changed tasks stay exact, in about a tenth of a second."""


class SignedRank(NamedTuple):
    """Wilcoxon's signed-rank test of paired differences against none."""

    n: int
    """Non-zero differences: the tasks that changed. Zeros are dropped (Wilcoxon's own
    rule): a task that did equally well on both sides says nothing about the direction."""
    statistic: float
    """W+, the sum of the ranks of the positive differences (ties share their mean rank)."""
    p_value: float
    """Two-sided; 1.0 without a non-zero difference."""
    exact: bool
    """True: the exact law of W+ given the ranks (with ties, over the midranks);
    False: the normal approximation with tie and continuity corrections."""


def _ranks(values: Sequence[float]) -> list[int]:
    """Twice the midrank of each value: integers even when values tie, so the exact law
    can be counted in integers."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    doubled = [0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            doubled[order[k]] = i + j + 2  # ranks i+1..j+1, twice their mean
        i = j + 1
    return doubled


def _exact(doubled: Sequence[int], observed: int) -> float:
    """Two-sided p: each of the 2^n sign assignments is equally likely under no change;
    count those whose doubled W+ is at most (and at least) the observed one."""
    counts = [1]
    for r in doubled:
        grown = counts + [0] * r
        for s, c in enumerate(counts):
            grown[s + r] += c
        counts = grown
    total = 1 << len(doubled)
    low, high = sum(counts[: observed + 1]), sum(counts[observed:])
    return min(1.0, 2 * min(low, high) / total)


def _normal(doubled: Sequence[int], observed: int) -> float:
    n = len(doubled)
    mean = n * (n + 1) / 4
    ties: dict[int, int] = {}
    for r in doubled:
        ties[r] = ties.get(r, 0) + 1
    var = n * (n + 1) * (2 * n + 1) / 24 - sum(t**3 - t for t in ties.values()) / 48
    if var <= 0:
        return 1.0
    z = max(0.0, abs(observed / 2 - mean) - 0.5) / math.sqrt(var)
    return min(1.0, math.erfc(z / math.sqrt(2)))


def signed_rank(differences: Sequence[float]) -> SignedRank:
    """Wilcoxon's signed-rank test, two-sided, of the differences (new - base per task)."""
    if any(not math.isfinite(d) for d in differences):
        raise ReportError("differences must be finite numbers")
    changed = [round(d, DIGITS) for d in differences if round(d, DIGITS) != 0]
    if not changed:
        return SignedRank(0, 0.0, 1.0, True)
    doubled = _ranks([abs(d) for d in changed])
    observed = sum(r for r, d in zip(doubled, changed, strict=True) if d > 0)
    n = len(changed)
    exact = n * n * (n + 1) <= EXACT_WORK
    p = _exact(doubled, observed) if exact else _normal(doubled, observed)
    return SignedRank(n, observed / 2, p, exact)


def _t_two_sided(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with `df` degrees of freedom: the closed forms for
    integer df (Abramowitz and Stegun 26.7.3 and 26.7.4)."""
    theta = math.atan(t / math.sqrt(df))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if df % 2:
        term, total = 1.0, 1.0 if df > 1 else 0.0
        for k in range(1, (df - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        return 2 / math.pi * (theta + s * math.cos(theta) * total)
    term = total = 1.0
    for k in range(1, df // 2):
        term *= c2 * (2 * k - 1) / (2 * k)
        total += term
    return s * total


def t_quantile(confidence: float, df: int) -> float:
    """The t such that P(|T| <= t) = confidence: 12.706 for 95% with 1 degree of freedom,
    1.984 with 100. Bisection on the closed form, to float precision."""
    if not 0 < confidence < 1 or df < 1:
        raise ReportError(f"t quantile needs 0 < confidence < 1 and df >= 1 ({confidence}, {df})")
    low, high = 0.0, 1.0
    while _t_two_sided(high, df) < confidence:
        low, high = high, high * 2
    for _ in range(200):
        mid = (low + high) / 2
        if mid in (low, high):
            break
        low, high = (mid, high) if _t_two_sided(mid, df) < confidence else (low, mid)
    return (low + high) / 2


def paired_interval(
    differences: Sequence[float], confidence: float = 0.95
) -> tuple[float, float] | None:
    """Student's t interval of the mean difference: mean +- t(n-1) * s / sqrt(n). None
    with fewer than two differences, and when they are all the same: the t interval would
    have no width, yet a few tasks that agree are no certainty (the test's n and p say how
    little they show)."""
    n = len(differences)
    if n < 2:
        return None
    spread = statistics.stdev(differences)
    if round(spread, DIGITS) == 0:
        return None
    mean = statistics.fmean(differences)
    half = t_quantile(confidence, n - 1) * spread / math.sqrt(n)
    return mean - half, mean + half
