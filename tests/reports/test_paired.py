"""Tests for runner.reports.paired against published values, values worked out by hand, and
the exact signed-rank law against brute-force enumeration of every sign assignment."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.errors import ReportError
from runner.reports.paired import paired_interval, signed_rank, t_quantile

# Darwin's Zea mays data as Fisher gave it (crossed minus self-fertilised heights, eighths
# of an inch), the example of scipy.stats.wilcoxon's documentation: W- = 10 + 14 = 24,
# W+ = 120 - 24 = 96, exact two-sided p = 0.041259765625 (= 1352 / 32768).
ZEA_MAYS = [6, 8, 14, 16, 23, 24, 28, 29, 41, -48, 49, 56, 60, -67, 75]


def brute_force(differences: Sequence[float]) -> float:
    """Two-sided p by listing all 2^n sign assignments over the (mid)ranks of the non-zero
    differences: the definition, with no counting trick."""
    d = [x for x in differences if x != 0]
    mags = sorted(abs(x) for x in d)
    rank = {m: (mags.index(m) + 1 + len(mags) - mags[::-1].index(m)) / 2 for m in mags}
    ranks = [rank[abs(x)] for x in d]
    observed = sum(r for r, x in zip(ranks, d, strict=True) if x > 0)
    sums = [
        sum(r for r, s in zip(ranks, signs, strict=True) if s)
        for signs in itertools.product((0, 1), repeat=len(d))
    ]
    low = sum(s <= observed + 1e-9 for s in sums)
    high = sum(s >= observed - 1e-9 for s in sums)
    return min(1.0, 2 * min(low, high) / len(sums))


def test_signed_rank_matches_the_published_example() -> None:
    res = signed_rank(ZEA_MAYS)
    assert (res.n, res.statistic, res.exact) == (15, 96.0, True)
    assert res.p_value == 0.041259765625 == brute_force(ZEA_MAYS)


@pytest.mark.parametrize("n", range(1, 9))
def test_every_task_changed_one_way_gives_the_smallest_p(n: int) -> None:
    """Only the two assignments 'all up' and 'all down' are as extreme: p = 2 / 2^n."""
    assert signed_rank([0.5] * n).p_value == min(1.0, 2 / 2**n)
    assert signed_rank([-0.25 * (i + 1) for i in range(n)]).p_value == min(1.0, 2 / 2**n)


def test_zeros_are_dropped_and_ties_share_their_rank() -> None:
    # Non-zero: 0.5, 0.5, -0.25, 1.0, 0.25, -0.5: |0.25| x2 -> 1.5, |0.5| x3 -> 4, 1.0 -> 6.
    d = [0.5, 0.5, -0.25, 1.0, 0.0, 0.25, -0.5, 0.0]
    res = signed_rank(d)
    assert (res.n, res.statistic) == (6, 4 + 4 + 6 + 1.5)
    assert math.isclose(res.p_value, brute_force(d), rel_tol=1e-12)
    # Sums of floats that tie as the rewards did: 0.1 + 0.2 against 0.3.
    assert signed_rank([0.1 + 0.2, -0.3]).statistic == 1.5
    assert signed_rank([0.0, 0.0]) == (0, 0.0, 1.0, True)
    assert signed_rank([]).p_value == 1.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([-1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0]), max_size=10))
def test_exact_law_equals_enumeration(d: list[float]) -> None:
    assert math.isclose(signed_rank(d).p_value, brute_force(d), rel_tol=1e-12)


def test_many_tasks_use_the_normal_form_with_corrections() -> None:
    """Worked by hand. 120 distinct differences, the odd ones up: W+ = 60^2 = 3600, mean
    120 * 121 / 4 = 3630, variance 120 * 121 * 241 / 24 = 145805."""
    d = [float(i if i % 2 else -i) for i in range(1, 121)]
    res = signed_rank(d)
    assert (res.n, res.statistic, res.exact) == (120, 3600.0, False)
    z = (30 - 0.5) / math.sqrt(145805)
    assert math.isclose(res.p_value, math.erfc(z / math.sqrt(2)), rel_tol=1e-12)
    # Ties: 60 x +1 and 40 x -1 share rank 50.5, 30 x +2 share 115.5; W+ = 60 * 50.5 +
    # 30 * 115.5 = 6495, mean 130 * 131 / 4 = 4257.5, variance 130 * 131 * 261 / 24 -
    # ((100^3 - 100) + (30^3 - 30)) / 48 = 185201.25 - 21393.125 = 163808.125.
    tied = [1.0] * 60 + [-1.0] * 40 + [2.0] * 30
    res = signed_rank(tied)
    assert (res.n, res.statistic, res.exact) == (130, 6495.0, False)
    z = (6495 - 4257.5 - 0.5) / math.sqrt(163808.125)
    assert math.isclose(res.p_value, math.erfc(z / math.sqrt(2)), rel_tol=1e-12)
    assert res.p_value < 1e-7


def test_exact_up_to_99_changed_tasks() -> None:
    assert signed_rank([float(i) for i in range(1, 100)]).exact
    assert not signed_rank([float(i) for i in range(1, 101)]).exact


def test_signed_rank_refuses_non_finite_differences() -> None:
    with pytest.raises(ReportError, match="finite"):
        signed_rank([0.5, math.nan])


@pytest.mark.parametrize(
    ("confidence", "df", "t"),
    [
        # Student's t table, two-sided 95% and 99% (any statistics textbook's appendix).
        (0.95, 1, 12.706),
        (0.95, 2, 4.303),
        (0.95, 3, 3.182),
        (0.95, 5, 2.571),
        (0.95, 10, 2.228),
        (0.95, 30, 2.042),
        (0.95, 100, 1.984),
        (0.99, 4, 4.604),
        (0.99, 10, 3.169),
        (0.90, 7, 1.895),
    ],
)
def test_t_quantile_matches_the_table(confidence: float, df: int, t: float) -> None:
    assert round(t_quantile(confidence, df), 3) == t


def test_t_quantile_approaches_the_normal_one() -> None:
    """For large df, t = z + (z^3 + z) / (4 df) to within 1/df^2 (Cornish-Fisher)."""
    z, df = 1.959963984540054, 20000
    assert math.isclose(t_quantile(0.95, df), z + (z**3 + z) / (4 * df), abs_tol=1e-7)
    with pytest.raises(ReportError):
        t_quantile(0.95, 0)


def test_paired_interval_by_hand() -> None:
    """[0.5, 0, 1]: mean 0.5, s = 0.5, t(2) = 4.302653: 0.5 +- 4.302653 * 0.5 / sqrt(3)."""
    ci = paired_interval([0.5, 0.0, 1.0])
    assert ci is not None
    half = 4.302653 * 0.5 / math.sqrt(3)
    assert math.isclose(ci[0], 0.5 - half, abs_tol=1e-6)
    assert math.isclose(ci[1], 0.5 + half, abs_tol=1e-6)
    assert paired_interval([0.5]) is None  # one task: no spread at all
    assert paired_interval([0.5, 0.5, 0.5]) is None  # all the same: no width is no answer
