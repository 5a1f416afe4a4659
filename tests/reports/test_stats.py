"""Tests for runner.reports.stats against values computed by hand and published ones, and
the exact tests against brute-force enumeration."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner.errors import ReportError
from runner.reports.stats import (
    Table,
    fisher_exact,
    holm,
    mean_pass_at_k,
    pass_at_k,
    stratified_chi2,
    stratified_exact,
    stratified_test,
    wilson_interval,
)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (1, 0, 1, 0.0),
        (1, 1, 1, 1.0),
        (5, 2, 1, 0.4),
        (5, 2, 5, 1.0),
        (3, 1, 2, 2 / 3),  # 1 - C(2,2)/C(3,2) = 1 - 1/3
        (10, 3, 5, 1 - 21 / 252),  # 1 - C(7,5)/C(10,5)
        (200, 0, 100, 0.0),
        (200, 1, 100, 0.5),  # one pass in 200: half of all 100-subsets hold it
    ],
)
def test_pass_at_k_known_values(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


@given(n=st.integers(1, 60), data=st.data())
def test_pass_at_k_matches_the_product_form(n: int, data: st.DataObject) -> None:
    """The numerically stable form from the Codex paper gives the same numbers."""
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, n))
    product = 1.0 if n - c < k else 1.0 - math.prod(1 - k / i for i in range(n - c + 1, n + 1))
    assert pass_at_k(n, c, k) == pytest.approx(product, abs=1e-9)
    assert pass_at_k(n, c, 1) == pytest.approx(c / n)


@pytest.mark.parametrize(("n", "c", "k"), [(0, 0, 1), (3, 4, 1), (3, 1, 0), (3, 1, 4), (3, -1, 1)])
def test_pass_at_k_rejects_impossible_counts(n: int, c: int, k: int) -> None:
    with pytest.raises(ReportError, match="pass@k needs"):
        pass_at_k(n, c, k)


def test_mean_pass_at_k() -> None:
    assert mean_pass_at_k([], 1) is None
    assert mean_pass_at_k([(3, 3), (3, 2)], 1) == pytest.approx(5 / 6)
    assert mean_pass_at_k([(3, 3), (3, 2)], 3) == 1.0
    assert mean_pass_at_k([(3, 1), (3, 0)], 3) == 0.5


@pytest.mark.parametrize(
    ("passed", "runs", "low", "high"),
    [
        # Values from the Wilson formula as tabulated by e.g. Newcombe (1998), 4 decimals.
        (0, 10, 0.0, 0.2775),
        (5, 10, 0.2366, 0.7634),
        (10, 10, 0.7225, 1.0),
        (1, 1, 0.2065, 1.0),
        (81, 263, 0.2553, 0.3662),  # Newcombe's example: 81/263, 0.2553 to 0.3662
        (15, 148, 0.0624, 0.1605),  # Newcombe's example: 15/148, 0.0624 to 0.1605
    ],
)
def test_wilson_known_values(passed: int, runs: int, low: float, high: float) -> None:
    interval = wilson_interval(passed, runs)
    assert interval is not None
    assert interval[0] == pytest.approx(low, abs=5e-5)
    assert interval[1] == pytest.approx(high, abs=5e-5)


@given(runs=st.integers(1, 10_000), data=st.data())
def test_wilson_contains_the_rate_and_stays_in_bounds(runs: int, data: st.DataObject) -> None:
    passed = data.draw(st.integers(0, runs))
    interval = wilson_interval(passed, runs)
    assert interval is not None
    low, high = interval
    assert 0.0 <= low <= passed / runs <= high <= 1.0
    assert high - low > 0


def test_wilson_without_runs_and_bad_counts() -> None:
    assert wilson_interval(0, 0) is None
    with pytest.raises(ReportError, match="passed must be within 0..runs"):
        wilson_interval(3, 2)


# The exact stratified (Cochran-Mantel-Haenszel) test and Holm's adjustment.

RABBITS = [(0, 6, 0, 5), (3, 3, 0, 6), (6, 0, 2, 4), (5, 1, 6, 0), (2, 0, 5, 0)]
"""Agresti's penicillin data (cured/died, immediate vs 1.5 h delayed injection, five
penicillin levels), the example of R's `mantelhaen.test`, whose documentation gives the
exact conditional test's two-sided p as 0.040."""


def test_stratified_exact_textbook_value() -> None:
    assert stratified_exact(RABBITS) == pytest.approx(0.040, abs=5e-4)


def _brute_force(tables: list[Table]) -> float:
    """The same test by enumerating every combination of tables with the observed margins,
    in floating point: an independent route to the number."""
    ranges, probs = [], []
    for a, b, c, d in tables:
        row1, row2, col1 = a + b, c + d, a + c
        xs = range(max(0, col1 - row2), min(col1, row1) + 1)
        total = math.comb(row1 + row2, col1)
        ranges.append(list(xs))
        probs.append({x: math.comb(row1, x) * math.comb(row2, col1 - x) / total for x in xs})
    law: dict[int, float] = {}
    for combo in itertools.product(*ranges):
        p = math.prod(probs[k][x] for k, x in enumerate(combo))
        law[sum(combo)] = law.get(sum(combo), 0.0) + p
    at = law[sum(t[0] for t in tables)]
    return min(1.0, sum(p for p in law.values() if p <= at * (1 + 1e-7)))


_TABLE = st.tuples(*[st.integers(0, 4)] * 4)


@given(st.lists(_TABLE, min_size=1, max_size=4))
def test_stratified_exact_equals_enumeration(tables: list[Table]) -> None:
    assert stratified_exact(tables) == pytest.approx(_brute_force(tables), abs=1e-9)


@given(_TABLE)
def test_one_stratum_is_fishers_test(table: Table) -> None:
    assert stratified_exact([table]) == fisher_exact(*table)


def test_strata_without_information_change_nothing() -> None:
    """All passed, all failed, or no run on one side: the margins fix the table."""
    p = stratified_exact([(3, 0, 0, 3), (2, 1, 0, 3)])
    assert p == stratified_exact([(3, 0, 0, 3), (3, 0, 2, 0), (2, 1, 0, 3), (0, 3, 0, 2)])
    assert p == stratified_exact([(3, 0, 0, 3), (0, 0, 2, 1), (2, 1, 0, 3)])
    assert stratified_exact([(3, 0, 3, 0), (0, 0, 1, 1)]) == 1.0
    assert stratified_exact([]) == 1.0
    with pytest.raises(ReportError, match="counts must be >= 0"):
        stratified_exact([(1, 1, 1, 1), (0, -1, 0, 0)])


def test_stratification_keeps_easy_and_hard_tasks_apart() -> None:
    """Every run of the easy task passes, every run of the hard one fails, on both sides;
    BASE ran the easy task 8 times and the hard one 2, NEW the reverse. Pooled, BASE passes
    8/10 and NEW 2/10: "significant". Task by task, nothing differs."""
    easy, hard = (8, 0, 2, 0), (0, 2, 0, 8)
    # [[8, 2], [2, 8]]: weights C(10, x)^2 over C(20, 10) = 184756; the tables at most as
    # likely as x = 8 (2025) are x = 0, 1, 2, 8, 9, 10: 2 * (1 + 100 + 2025) = 4252.
    assert fisher_exact(8, 2, 2, 8) == 4252 / 184756
    assert stratified_exact([easy, hard]) == 1.0


@pytest.mark.parametrize(
    ("p", "adjusted"),
    [
        # Holm (1979) by hand: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1, then the
        # running maximum, put back in the given order.
        ([0.01, 0.04, 0.03, 0.005], [0.03, 0.06, 0.06, 0.02]),
        # R: p.adjust(c(0.01, 0.02, 0.03, 0.04, 0.05), "holm")
        ([0.01, 0.02, 0.03, 0.04, 0.05], [0.05, 0.08, 0.09, 0.09, 0.09]),
        ([0.5, 0.9], [1.0, 1.0]),
        ([0.2], [0.2]),
        ([], []),
    ],
)
def test_holm_known_values(p: list[float], adjusted: list[float]) -> None:
    assert holm(p) == pytest.approx(adjusted, abs=1e-12)


@given(st.lists(st.floats(0, 1), max_size=12))
def test_holm_between_raw_and_bonferroni_and_monotone(p: list[float]) -> None:
    q = holm(p)
    for raw, adj in zip(p, q, strict=True):
        assert raw <= adj <= min(1.0, raw * len(p)) + 1e-12
    ranked = [adj for _, adj in sorted(zip(p, q, strict=True))]
    assert ranked == sorted(ranked)


def test_stratified_chi2_textbook_value() -> None:
    """Agresti's penicillin data again: sum a = 16, sum E(a) = 13, sum Var(a) = 35/22, so
    the corrected statistic is 2.5^2 / (35/22) = 3.93 (Agresti), p = 0.047 (R's example)."""
    statistic = 2.5**2 / (35 / 22)
    assert statistic == pytest.approx(3.9286, abs=1e-4)
    assert stratified_chi2(RABBITS) == pytest.approx(math.erfc(math.sqrt(statistic / 2)))
    assert stratified_chi2(RABBITS) == pytest.approx(0.047, abs=5e-4)
    assert stratified_chi2([(3, 0, 3, 0), (1, 0, 0, 0)]) == 1.0  # no variance at all


def test_stratified_test_is_exact_until_too_costly() -> None:
    moderate = [(30, 20, 25, 25)] * 10
    p, exact = stratified_test(moderate)
    assert exact and p == stratified_exact(moderate)
    # Large counts: the chi-squared form, which agrees there.
    assert stratified_chi2(moderate) == pytest.approx(p, rel=0.05)
    p, exact = stratified_test([(40, 10, 30, 20)] * 200)
    assert not exact and p == stratified_chi2([(40, 10, 30, 20)] * 200)
