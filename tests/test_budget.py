"""Token and cost limits (runner/budget.py): what a run or the batch has spent, checked
before each request, and the one cost rule. Every limit at, below and past its value."""

from __future__ import annotations

import pytest

from runner.budget import BatchSpend, RunBudget, cost_usd
from runner.config import BatchLimits, Limits
from runner.items import Usage
from runner.models import Price

PRICE = Price(input=2.0, cached_input=0.5, output=8.0)


def test_cost_counts_cached_input_instead_of_input_not_on_top() -> None:
    usage = Usage(input_tokens=1_000_000, cached_tokens=400_000, output_tokens=100_000)
    # 600k uncached at $2, 400k cached at $0.5, 100k output at $8 (per million)
    assert cost_usd(PRICE, usage) == pytest.approx(1.2 + 0.2 + 0.8)


@pytest.mark.parametrize(
    ("price", "usage"),
    [(None, Usage(input_tokens=10)), (PRICE, Usage(input_tokens=10, unreported=1))],
    ids=["no price", "an answer without usage"],
)
def test_an_unknown_cost_is_none_never_a_low_number(price: Price | None, usage: Usage) -> None:
    assert cost_usd(price, usage) is None


@pytest.mark.parametrize(
    ("field", "limit", "usage", "said"),
    [
        ("max_input_tokens", 100, Usage(input_tokens=100), "100 input tokens"),
        ("max_output_tokens", 50, Usage(output_tokens=50), "50 output tokens"),
        ("max_cost_usd", 0.001, Usage(output_tokens=125), "$0.0010"),
    ],
)
def test_a_run_limit_stops_at_its_value_and_names_itself(
    field: str, limit: float, usage: Usage, said: str
) -> None:
    budget = RunBudget(Limits(**{field: limit}), PRICE, BatchSpend(None))
    below = Usage(
        input_tokens=max(usage.input_tokens - 1, 0), output_tokens=max(usage.output_tokens - 1, 0)
    )
    assert budget.exceeded(below) is None
    why = budget.exceeded(usage)
    assert why is not None and said in why and f"limits.{field}" in why, why


def test_a_run_without_limits_never_stops() -> None:
    budget = RunBudget(Limits(), None, BatchSpend(None))
    assert budget.exceeded(Usage(input_tokens=10**12, output_tokens=10**12, unreported=5)) is None


@pytest.mark.parametrize("field", ["max_input_tokens", "max_output_tokens", "max_cost_usd"])
def test_a_token_or_cost_limit_cannot_be_kept_once_usage_is_missing(field: str) -> None:
    value = 1.0 if field == "max_cost_usd" else 10**9
    budget = RunBudget(Limits(**{field: value}), PRICE, BatchSpend(None))
    why = budget.exceeded(Usage(input_tokens=1, unreported=1))
    assert why is not None and "without token usage" in why and f"limits.{field}" in why


def test_the_batch_sums_every_run_and_stops_all_of_them() -> None:
    spend = BatchSpend(BatchLimits(max_input_tokens=1000))
    a = RunBudget(Limits(), PRICE, spend)
    b = RunBudget(Limits(), PRICE, spend)
    spend.add(Usage(input_tokens=600), 0.0012)
    assert a.exceeded(Usage()) is None and b.exceeded(Usage()) is None
    spend.add(Usage(input_tokens=400), 0.0008)
    for run in (a, b):
        why = run.exceeded(Usage())
        assert why is not None and "the batch used 1000 input tokens" in why
        assert "budget.max_input_tokens" in why
    assert spend.cost == pytest.approx(0.002)


def test_one_unknown_cost_makes_the_batch_cost_unknown() -> None:
    spend = BatchSpend(BatchLimits(max_cost_usd=0.01))
    spend.add(Usage(input_tokens=10), 0.001)
    spend.add(Usage(input_tokens=10), None)
    spend.add(Usage(input_tokens=10), 5.0)
    assert spend.cost is None
    assert spend.exceeded() is None, "an unknown sum is not compared with the limit"


def test_the_batch_cost_limit_names_what_was_spent() -> None:
    spend = BatchSpend(BatchLimits(max_cost_usd=0.5))
    spend.add(Usage(output_tokens=10), 0.25)
    assert spend.exceeded() is None
    spend.add(Usage(output_tokens=10), 0.25)
    why = spend.exceeded()
    assert why == "the batch spent $0.5000, its limit is $0.5 (budget.max_cost_usd)"


def test_a_batch_limit_cannot_be_kept_once_an_answer_had_no_usage() -> None:
    spend = BatchSpend(BatchLimits(max_output_tokens=10**9))
    spend.add(Usage(unreported=1), None)
    why = spend.exceeded()
    assert why is not None and "budget.max_output_tokens cannot be enforced" in why
