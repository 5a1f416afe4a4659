"""Small statistics for comparing models and prompt variants over repeated runs.

Pure functions of counts. Agent runs flip between identical repeats often enough that a bare
pass rate over a handful of runs says little; these put a number on how little.

The exact tests work in integers: every probability is a numerator over one common
denominator (products of binomial coefficients), so no floating-point tolerance decides
which outcomes count as "at most as likely" as the observed one.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence

from runner.errors import ReportError

Z_95 = 1.959963984540054
"""The two-sided 95% quantile of the standard normal distribution."""


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chance that at least one of `k` runs passes, estimated without bias from `n` runs
    of which `c` passed: 1 - C(n-c, k) / C(n, k) (Chen et al., 2021).

    Plain `1 - (1 - c/n) ** k` is biased low for small `n`; exact integer binomials keep
    the estimator exact for the repeat counts a benchmark uses.
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ReportError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def mean_pass_at_k(samples: Iterable[tuple[int, int]], k: int) -> float | None:
    """pass@k averaged over tasks, each given as (n runs, c passed); None without tasks."""
    values = [pass_at_k(n, c, k) for n, c in samples]
    return statistics.fmean(values) if values else None


def wilson_interval(passed: int, runs: int, z: float = Z_95) -> tuple[float, float] | None:
    """The Wilson score interval for a pass rate (95% by default); None without runs.

    Unlike the normal approximation it stays inside [0, 1] and is not zero-width at 0 or
    n passes, which are the common outcomes of a few repeats.
    """
    if runs <= 0:
        return None
    if not 0 <= passed <= runs:
        raise ReportError(f"passed must be within 0..runs (passed={passed}, runs={runs})")
    p = passed / runs
    z2 = z * z
    denom = 1 + z2 / runs
    centre = (p + z2 / (2 * runs)) / denom
    half = z * math.sqrt(p * (1 - p) / runs + z2 / (4 * runs * runs)) / denom
    # At 0 or n passes the bounds are exactly 0 and 1; rounding would leave 1e-17 off.
    low = 0.0 if passed == 0 else max(0.0, centre - half)
    high = 1.0 if passed == runs else min(1.0, centre + half)
    return low, high


def mean_interval(values: Sequence[float], z: float = Z_95) -> tuple[float, float] | None:
    """A 95% interval for the mean of rewards in [0, 1]: the Wilson score interval with
    the mean in place of a pass rate. For 0/1 rewards it is exactly the pass rate's
    Wilson interval; for rewards in between the true variance is at most m(1 - m), so the
    interval is conservative (wider than it needs to be), never too narrow. No t or
    bootstrap: a few repeats give no usable variance estimate. None without values, or
    when a reward lies outside [0, 1] (the bound would not hold)."""
    n = len(values)
    if n == 0 or any(not 0.0 <= v <= 1.0 for v in values):
        return None
    m = statistics.fmean(values)
    z2 = z * z
    denom = 1 + z2 / n
    centre = (m + z2 / (2 * n)) / denom
    half = z * math.sqrt(m * (1 - m) / n + z2 / (4 * n * n)) / denom
    low = 0.0 if m == 0.0 else max(0.0, centre - half)
    high = 1.0 if m == 1.0 else min(1.0, centre + half)
    return low, high


Table = tuple[int, int, int, int]
"""A 2x2 table [[a, b], [c, d]]: (base passed, base failed, new passed, new failed)."""


def _weights(table: Table) -> tuple[int, list[int]]:
    """The hypergeometric law of `a` given the table's margins, as (lowest possible a,
    integer weights C(a+b, x) * C(c+d, a+c-x) for x from there up); the weights sum to
    C(n, a+c)."""
    a, b, c, d = table
    if min(table) < 0:
        raise ReportError("counts must be >= 0")
    row1, row2, col1 = a + b, c + d, a + c
    lo, hi = max(0, col1 - row2), min(col1, row1)
    return lo, [math.comb(row1, x) * math.comb(row2, col1 - x) for x in range(lo, hi + 1)]


def _two_sided(lo: int, weights: Sequence[int], observed: int) -> float:
    """The share of the weight on outcomes at most as likely as the observed one."""
    at = weights[observed - lo]
    return min(1.0, sum(w for w in weights if w <= at) / sum(weights))


def fisher_exact(a: int, b: int, c: int, d: int) -> float:
    """Two-sided p-value of Fisher's exact test for the table [[a, b], [c, d]]: the
    probability, given the margins, of a table at most as likely as this one."""
    lo, weights = _weights((a, b, c, d))
    return _two_sided(lo, weights, a)


def stratified_exact(tables: Iterable[Table]) -> float:
    """Two-sided p-value of the exact conditional Cochran-Mantel-Haenszel test over 2x2
    tables, one per stratum (here: per task, its repeats on each side).

    The statistic is the total of `a` over the strata; given every stratum's margins it
    follows the convolution of the strata's hypergeometric laws, so each task is compared
    only with itself and easy and hard tasks cannot masquerade as a difference between the
    sides. With one stratum this is Fisher's exact test. A stratum where every run passed,
    or every run failed, or one side has no run carries no information and changes nothing.
    """
    lo, dist, observed = 0, [1], 0
    for table in tables:
        low, weights = _weights(table)
        merged = [0] * (len(dist) + len(weights) - 1)
        for i, p in enumerate(dist):
            for j, w in enumerate(weights):
                merged[i + j] += p * w
        lo, dist, observed = lo + low, merged, observed + table[0]
    return _two_sided(lo, dist, observed)


def stratified_chi2(tables: Iterable[Table]) -> float:
    """Two-sided p-value of the classic Cochran-Mantel-Haenszel test with continuity
    correction: (|sum a - sum E(a)| - 1/2)^2 / sum Var(a), chi-squared with 1 degree of
    freedom. The large-sample form of `stratified_exact`, for counts where the exact law
    would cost too much and the approximation is good."""
    diff = var = 0.0
    for a, b, c, d in tables:
        if min(a, b, c, d) < 0:
            raise ReportError("counts must be >= 0")
        n = a + b + c + d
        if n < 2:
            continue
        row1, row2, col1, col2 = a + b, c + d, a + c, b + d
        diff += a - row1 * col1 / n
        var += row1 * row2 * col1 * col2 / (n * n * (n - 1))
    if var == 0:
        return 1.0
    statistic = max(0.0, abs(diff) - 0.5) ** 2 / var
    return math.erfc(math.sqrt(statistic / 2))


EXACT_WORK = 1_000_000
"""Products of the exact convolution (about a second of big integers) above which
`stratified_test` uses the chi-squared form: e.g. 50 tasks with 20 repeats a side stay
exact."""


def stratified_test(tables: Sequence[Table]) -> tuple[float, bool]:
    """(p-value, exact?): the exact test when affordable, else the chi-squared one."""
    work = length = 0
    for a, b, c, d in tables:
        size = max(1, min(a + b, a + c) - max(0, a - d) + 1)  # a's possible values
        work += (length + 1) * size
        length += size - 1
    if work <= EXACT_WORK:
        return stratified_exact(tables), True
    return stratified_chi2(tables), False


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of p-values tested together, in their given order.

    Comparing each of m per-task p-values with alpha would find about alpha * m
    differences by chance alone; Holm keeps the chance of any false finding at alpha,
    and never finds less than Bonferroni does.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
