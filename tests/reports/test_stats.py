"""Tests for runner.reports.stats against values computed by hand and published ones."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner.errors import ReportError
from runner.reports.stats import mean_pass_at_k, pass_at_k, wilson_interval


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
