"""Token and cost limits of a run and of the whole batch.

The loop asks `RunBudget.exceeded` before every request; `BatchSpend` sums what every run
has spent so far, fed from the runs' `request.completed` events. A limit is checked before
a request, so the request that crosses it still completes and is counted: limits stop
spending, they cannot take back a response already paid for.
"""

from __future__ import annotations

from runner.config import BatchLimits, Limits
from runner.items import Usage
from runner.models import Price


def cost_usd(price: Price | None, usage: Usage, *, digits: int = 6) -> float | None:
    """The one cost rule: US dollars for `usage`, or None when it is unknown (no price,
    or an answer came without usage, which would make any sum too low)."""
    if price is None or usage.unreported:
        return None
    return round(price.cost(usage), digits)


def _unenforceable(limits: Limits | BatchLimits, section: str) -> str | None:
    """Why a token or cost limit cannot be kept once an answer came without usage: the
    sums would be too low, so the limit could be passed unseen."""
    for name in ("max_input_tokens", "max_output_tokens", "max_cost_usd"):
        if getattr(limits, name) is not None:
            return (
                f"the server sent an answer without token usage, so {section}.{name} "
                "cannot be enforced"
            )
    return None


class BatchSpend:
    """What all runs of the batch have used; the cost is None once any cost is unknown (no
    price: a batch cost limit was refused at start; an answer without usage: every batch
    limit stops the batch, as it could no longer be enforced)."""

    def __init__(self, limits: BatchLimits | None) -> None:
        self.limits = limits
        self.usage = Usage()
        self.cost: float | None = 0.0

    def add(self, usage: Usage, cost: float | None) -> None:
        self.usage = self.usage + usage
        self.cost = None if cost is None or self.cost is None else self.cost + cost

    def exceeded(self) -> str | None:
        b = self.limits
        if b is None:
            return None
        u = self.usage
        if u.unreported and (why := _unenforceable(b, "budget")):
            return why
        if b.max_input_tokens is not None and u.input_tokens >= b.max_input_tokens:
            return (
                f"the batch used {u.input_tokens} input tokens, its limit is "
                f"{b.max_input_tokens} (budget.max_input_tokens)"
            )
        if b.max_output_tokens is not None and u.output_tokens >= b.max_output_tokens:
            return (
                f"the batch used {u.output_tokens} output tokens, its limit is "
                f"{b.max_output_tokens} (budget.max_output_tokens)"
            )
        if b.max_cost_usd is not None and self.cost is not None and self.cost >= b.max_cost_usd:
            return (
                f"the batch spent ${self.cost:.4f}, its limit is ${b.max_cost_usd:g} "
                "(budget.max_cost_usd)"
            )
        return None


class RunBudget:
    """Implements the loop's `Budget` protocol for one run."""

    def __init__(self, limits: Limits, price: Price | None, batch: BatchSpend) -> None:
        self.limits = limits
        self.price = price
        self.batch = batch

    def exceeded(self, usage: Usage) -> str | None:
        lim = self.limits
        if usage.unreported and (why := _unenforceable(lim, "limits")):
            return why + "; stopped"
        if lim.max_input_tokens is not None and usage.input_tokens >= lim.max_input_tokens:
            return (
                f"stopped after {usage.input_tokens} input tokens, the limit is "
                f"{lim.max_input_tokens} (limits.max_input_tokens)"
            )
        if lim.max_output_tokens is not None and usage.output_tokens >= lim.max_output_tokens:
            return (
                f"stopped after {usage.output_tokens} output tokens, the limit is "
                f"{lim.max_output_tokens} (limits.max_output_tokens)"
            )
        cost = cost_usd(self.price, usage, digits=8)
        if lim.max_cost_usd is not None and cost is not None and cost >= lim.max_cost_usd:
            return (
                f"stopped after spending ${cost:.4f}, the limit is "
                f"${lim.max_cost_usd:g} (limits.max_cost_usd)"
            )
        return self.batch.exceeded()
