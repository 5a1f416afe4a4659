"""`runner report compare BASE NEW`: an A/B comparison of two batches (or of two variants
of one batch), per model/variant and per task, for people (Markdown) and CI (JSON, exit
code).

Pass rates are compared with Fisher's exact test (two-sided): with the handful of runs a
benchmark affords, a normal approximation (z-test, chi-squared) is wrong exactly where it
matters, while Fisher's test conditions on the margins and stays valid at any count. It is
computed exactly here, in integers (numerators of hypergeometric probabilities over one
common denominator), so no tolerance decides which tables count as "as extreme".
Every rate is over finished runs; skipped and errored runs are counted, never compared.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict

from runner.errors import ReportError
from runner.reports.fmt import cell, duration, money, percent, table
from runner.reports.model import Report, RunReport
from runner.reports.summary import column_name, partial_text
from runner.reports.totals import finished_runs
from runner.vocabulary import Verdict

DEFAULT_ALPHA = 0.05


def fisher_exact(a: int, b: int, c: int, d: int) -> float:
    """Two-sided p-value of Fisher's exact test for the table [[a, b], [c, d]]: the
    probability, given the margins, of a table at most as likely as this one."""
    if min(a, b, c, d) < 0:
        raise ReportError("counts must be >= 0")
    row1, row2, col1 = a + b, c + d, a + c
    n = row1 + row2
    lo, hi = max(0, col1 - row2), min(col1, row1)

    def weight(x: int) -> int:
        return math.comb(row1, x) * math.comb(row2, col1 - x)

    observed = weight(a)
    extreme = sum(w for w in (weight(x) for x in range(lo, hi + 1)) if w <= observed)
    return min(1.0, extreme / math.comb(n, col1))


class Side(BaseModel):
    model_config = ConfigDict(extra="forbid")

    runs: int
    finished: int
    passed: int
    skipped: int
    errored: int
    pass_rate: float | None
    """passed / finished."""
    mean_tokens: float | None
    """Mean total tokens per finished run."""
    cache_hit: float | None
    """Cached / input tokens over finished runs."""
    mean_cost_usd: float | None
    """Mean cost per finished run; null when a price is unknown."""
    median_time_s: float | None


class Row(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    base: Side
    new: Side
    pass_rate_change: float | None
    """new.pass_rate - base.pass_rate (percentage points / 100)."""
    p_value: float | None
    """Fisher's exact test, two-sided; null when a side has no finished run."""
    significant: bool
    verdict: str
    """`regression`, `improvement`, `no significant change` or `not comparable`."""


class Comparison(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base: str
    new: str
    alpha: float
    test: str = "Fisher's exact test, two-sided, on passed/failed of finished runs"
    overall: Row
    groups: list[Row]
    """Per model, or per model / variant."""
    tasks: list[Row]
    """Per task and model (/ variant)."""
    inconclusive: list[str] = []
    """Why the comparison cannot clear a CI gate: a partial report (missing shards, or a
    checkpoint of a batch still running), or a model/variant with runs on both sides but
    none finished on one (all errored or skipped). `--fail-on-regression` exits 3 then."""

    @property
    def regressions(self) -> list[Row]:
        return [r for r in [self.overall, *self.groups] if r.verdict == "regression"]


def _side(runs: Sequence[RunReport]) -> Side:
    done = finished_runs(runs)
    kinds = [t.status.verdict for t in runs]
    passed = kinds.count(Verdict.PASSED)
    sent = sum(t.usage.input_tokens for t in done)
    costs = [t.cost_usd for t in done]
    return Side(
        runs=len(runs),
        finished=len(done),
        passed=passed,
        skipped=kinds.count(Verdict.SKIPPED),
        errored=kinds.count(Verdict.ERRORED),
        pass_rate=round(passed / len(done), 4) if done else None,
        mean_tokens=round(statistics.fmean(t.usage.total_tokens for t in done), 1)
        if done
        else None,
        cache_hit=round(sum(t.usage.cached_tokens for t in done) / sent, 4) if sent else None,
        mean_cost_usd=round(statistics.fmean(c for c in costs if c is not None), 6)
        if done and None not in costs
        else None,
        median_time_s=round(statistics.median(t.duration_s for t in done), 3) if done else None,
    )


def _row(name: str, base: Sequence[RunReport], new: Sequence[RunReport], alpha: float) -> Row:
    b, n = _side(base), _side(new)
    if not b.finished or not n.finished:
        return Row(
            name=name,
            base=b,
            new=n,
            pass_rate_change=None,
            p_value=None,
            significant=False,
            verdict="not comparable",
        )
    p = fisher_exact(b.passed, b.finished - b.passed, n.passed, n.finished - n.passed)
    change = round(n.passed / n.finished - b.passed / b.finished, 4)
    significant = p < alpha
    word = (
        "no significant change"
        if not significant
        else "regression"
        if change < 0
        else "improvement"
    )
    return Row(
        name=name,
        base=b,
        new=n,
        pass_rate_change=change,
        p_value=round(p, 6),
        significant=significant,
        verdict=word,
    )


def _select(report: Report, variant: str | None) -> list[RunReport]:
    return [t for t in report.runs if variant is None or t.variant == variant]


def compare(
    base: Report,
    new: Report,
    *,
    base_name: str = "BASE",
    new_name: str = "NEW",
    base_variant: str | None = None,
    new_variant: str | None = None,
    alpha: float = DEFAULT_ALPHA,
) -> Comparison:
    """Match runs by model (and variant, unless variants are being compared) and by task."""
    a, b = _select(base, base_variant), _select(new, new_variant)
    by_variant = base_variant is None and new_variant is None
    group: Callable[[RunReport], str] = column_name if by_variant else (lambda t: t.model)

    def grouped(key: Callable[[RunReport], str]) -> list[Row]:
        names: dict[str, None] = {}
        for t in [*a, *b]:
            names[key(t)] = None
        return [
            _row(k, [t for t in a if key(t) == k], [t for t in b if key(t) == k], alpha)
            for k in names
        ]

    overall, groups = _row("all runs", a, b, alpha), grouped(group)
    why = [
        f"{name} is partial ({_partial(r)})"
        for name, r in ((base_name, base), (new_name, new))
        if _partial(r)
    ]
    why += [
        f"{r.name}: no finished run in {base_name if not r.base.finished else new_name} "
        f"({_unfinished(r.base if not r.base.finished else r.new)})"
        for r in [overall, *groups]
        if r.base.runs and r.new.runs and not (r.base.finished and r.new.finished)
    ]
    return Comparison(
        base=base_name,
        new=new_name,
        alpha=alpha,
        overall=overall,
        groups=groups,
        tasks=grouped(lambda t: f"{t.id} ({group(t)})"),
        inconclusive=why,
    )


def _partial(r: Report) -> str:
    if r.partial:
        return partial_text(r)
    return f"{r.pending} run(s) not finished yet" if r.pending else ""


def _unfinished(s: Side) -> str:
    return f"{s.errored} errored, {s.skipped} skipped"


def _rate(s: Side) -> str:
    return "-" if s.pass_rate is None else f"{s.passed}/{s.finished} {s.pass_rate:.0%}"


def _delta(x: float | None, y: float | None, fmt: Callable[[float], str]) -> str:
    if x is None or y is None:
        return "-"
    d = y - x
    return f"{fmt(y)} ({'+' if d >= 0 else '-'}{fmt(abs(d))})"


def _excluded(s: Side) -> str:
    return f"{s.skipped}/{s.errored}"


def render_compare(c: Comparison) -> str:
    """The comparison as Markdown: the verdict first, then per group and per task."""
    header = [
        "",
        "Base pass",
        "New pass",
        "Change",
        "p",
        "Verdict",
        "Skipped/errored",
        "Mean tokens",
        "Cache hit",
        "Mean cost",
        "Median time",
    ]
    align = ["---", "--:", "--:", "--:", "--:", "---", "--:", "--:", "--:", "--:", "--:"]

    def line(r: Row) -> list[str]:
        change = "-" if r.pass_rate_change is None else f"{r.pass_rate_change * 100:+.1f} pp"
        p = "-" if r.p_value is None else f"{r.p_value:.3f}"
        verdict_text = f"**{r.verdict}**" if r.significant else r.verdict
        return [
            cell(r.name),
            _rate(r.base),
            _rate(r.new),
            change,
            p,
            verdict_text,
            f"{_excluded(r.base)} -> {_excluded(r.new)}",
            _delta(r.base.mean_tokens, r.new.mean_tokens, lambda v: f"{v:,.0f}"),
            _delta(r.base.cache_hit, r.new.cache_hit, lambda v: percent(v)),
            _delta(r.base.mean_cost_usd, r.new.mean_cost_usd, lambda v: money(v)),
            _delta(r.base.median_time_s, r.new.median_time_s, duration),
        ]

    regressions = c.regressions
    head = (
        f"**{len(regressions)} significant regression(s)**"
        if regressions
        else "**Inconclusive**"
        if c.inconclusive
        else "**No significant regression**"
    )
    if c.inconclusive:
        head += " (" + "; ".join(cell(w) for w in c.inconclusive) + ")"
    return "\n".join(
        [
            f"# Compare {cell(c.base)} -> {cell(c.new)}",
            "",
            f"{head} at alpha {c.alpha:g} ({c.test}). Rates are over finished runs; skipped "
            "(never started) and errored runs are counted apart. Deltas: new value (change).",
            "",
            "## Overall",
            "",
            *table(header, align, [line(c.overall)]),
            "",
            "## By model / variant",
            "",
            *table(header, align, [line(r) for r in c.groups]),
            "",
            "## By task",
            "",
            *table(header, align, [line(r) for r in c.tasks]),
            "",
        ]
    )
