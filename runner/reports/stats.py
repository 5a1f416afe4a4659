"""Small statistics for comparing models and prompt variants over repeated runs.

Pure functions of counts. Agent runs flip between identical repeats often enough that a bare
pass rate over a handful of runs says little; these put a number on how little.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable

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
