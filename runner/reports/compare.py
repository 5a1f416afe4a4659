"""`runner report compare BASE NEW`: an A/B comparison of two batches, of two variants or
of two models (in one batch or across two), per model/variant and per task, for people
(Markdown) and CI (JSON, exit code).

Three tests, for three questions (README, "A/B comparisons"):
- pooled: Fisher's exact test on passed/failed of every finished run of a row. Is the pass
  rate over these runs different? It treats every run alike, so tasks with more runs weigh
  more, and a side that ran more of the hard tasks looks worse.
- stratified: the exact conditional Cochran-Mantel-Haenszel test, one stratum per task. Is
  there a consistent difference task by task? Each task is compared only with itself.
- per task: Fisher's exact test on one task's repeats, Holm-adjusted over all task rows.
  Which tasks differ?

All are exact, computed in integers (`reports.stats`): with the handful of runs a benchmark
affords, a normal approximation (z-test, chi-squared) is wrong exactly where it matters.
Every rate is over finished runs; skipped and errored runs are counted, never compared.
Suite runs also compare mean rewards, task by task (`reports.reward_compare`).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict

from runner.errors import ConfigError, Problem
from runner.reports.fmt import cell, duration, money, percent, table
from runner.reports.model import Report, RunReport
from runner.reports.reward_compare import (
    RewardComparison,
    RewardRow,
    compare_rewards,
    render_rewards,
)
from runner.reports.stats import fisher_exact, holm, stratified_test
from runner.reports.summary import column_name, partial_text
from runner.reports.task_drift import changed_tasks
from runner.reports.totals import finished_runs
from runner.vocabulary import Verdict

DEFAULT_ALPHA = 0.05


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
    """new.pass_rate - base.pass_rate, as a fraction (0.05 is 5 percentage points)."""
    pass_rate_change_pp: float | None = None
    """The same change in percentage points."""
    p_value: float | None
    """Pooled: Fisher's exact test, two-sided, on all finished runs of the row; null when a
    side has no finished run."""
    stratified_p_value: float | None = None
    """Per task: the exact conditional Cochran-Mantel-Haenszel test, one stratum per task
    (and model/variant); on the overall and model/variant rows only. Null when no task
    has finished runs on both sides (`tasks_compared` 0): then there is no test."""
    stratified_exact: bool | None = None
    """False when the counts were too large for the exact law (see `reports.stats`): then
    `stratified_p_value` is the classic chi-squared CMH test, continuity-corrected."""
    tasks_compared: int | None = None
    """Task rows (task, and model/variant when the row spans several) with finished runs
    on both sides: the strata that can tell the sides apart."""
    mean_task_change_pp: float | None = None
    """The change of pass rate task by task, averaged over `tasks_compared` tasks, in
    percentage points: every task weighs the same, however many runs it has."""
    p_adjusted: float | None = None
    """On task rows: `p_value` Holm-adjusted over all task rows; their verdict uses it."""
    significant: bool
    verdict: str
    """`regression`, `improvement`, `no significant change` or `not comparable`."""


class Comparison(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base: str
    new: str
    alpha: float
    test: str = "Fisher's exact test, two-sided, on passed/failed of finished runs"
    stratified_test: str = (
        "exact conditional Cochran-Mantel-Haenszel test, two-sided, one stratum per task"
    )
    task_test: str = "Fisher's exact test per task, Holm-adjusted over all task rows"
    overall: Row
    groups: list[Row]
    """Per model, or per model / variant; what is being compared (models, variants) is
    not a group. Empty when nothing is left to group by."""
    tasks: list[Row]
    """Per task and model (/ variant)."""
    common_tasks: int = 0
    """Task ids on both sides: the only tasks compared."""
    tasks_only_in_base: list[str] = []
    tasks_only_in_new: list[str] = []
    """Task ids one side lacks (compared only with `allow_different_tasks`, and then left
    out)."""
    notes: list[str] = []
    """What a reader must know to read the numbers right (tasks left out, nothing paired)."""
    inconclusive: list[str] = []
    """Why the comparison cannot clear a CI gate: a partial report (missing shards, or a
    checkpoint of a batch still running), or a model/variant with runs on both sides but
    none finished on one (all errored or skipped). `--fail-on-regression` exits 3 then."""
    reward: RewardComparison | None = None
    """Mean rewards, when either side has any (suite runs); absent from the JSON without."""

    @property
    def regressions(self) -> list[Row]:
        return [r for r in [self.overall, *self.groups] if r.verdict == "regression"]

    @property
    def reward_regressions(self) -> list[RewardRow]:
        return self.reward.regressions if self.reward else []

    def to_json(self) -> str:
        """Without rewards, the same document as before there were any."""
        return self.model_dump_json(indent=2, exclude={"reward"} if self.reward is None else None)


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


def _word(significant: bool, change: float) -> str:
    if not significant:
        return "no significant change"
    return "regression" if change < 0 else "improvement"


def _counts(s: Side) -> tuple[int, int]:
    return s.passed, s.finished - s.passed


def _buckets(
    runs: Sequence[RunReport], key: Callable[[RunReport], str]
) -> dict[str, list[RunReport]]:
    """Runs by key, keys in first-seen order: one pass, however many keys."""
    out: dict[str, list[RunReport]] = {}
    for t in runs:
        out.setdefault(key(t), []).append(t)
    return out


def _pass_fail(runs: Sequence[RunReport]) -> tuple[int, int]:
    """(passed, failed) among finished runs."""
    done = finished_runs(runs)
    passed = sum(t.status.verdict == Verdict.PASSED for t in done)
    return passed, len(done) - passed


def _row(
    name: str,
    base: Sequence[RunReport],
    new: Sequence[RunReport],
    alpha: float,
    stratum: Callable[[RunReport], str] | None = None,
) -> Row:
    """One row; with `stratum`, also the stratified test over the row's tasks."""
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
    p = fisher_exact(*_counts(b), *_counts(n))
    change = n.passed / n.finished - b.passed / b.finished
    row = Row(
        name=name,
        base=b,
        new=n,
        pass_rate_change=round(change, 4),
        pass_rate_change_pp=round(change * 100, 2),
        p_value=round(p, 6),
        significant=p < alpha,
        verdict=_word(p < alpha, change),
    )
    return row if stratum is None else row.model_copy(update=_stratified(base, new, stratum))


def _stratified(
    base: Sequence[RunReport], new: Sequence[RunReport], stratum: Callable[[RunReport], str]
) -> dict[str, float | int | bool | None]:
    """The per-task (paired) numbers of a row: each task compared only with itself."""
    x, y = _buckets(base, stratum), _buckets(new, stratum)
    tables = [
        (*_pass_fail(x.get(k, [])), *_pass_fail(y.get(k, []))) for k in dict.fromkeys([*x, *y])
    ]
    both = [(a, b, c, d) for a, b, c, d in tables if a + b and c + d]
    if not both:  # no stratum can tell the sides apart: there is no test, not p = 1
        return {"stratified_p_value": None, "stratified_exact": None, "tasks_compared": 0}
    mean = statistics.fmean(c / (c + d) - a / (a + b) for a, b, c, d in both)
    p, exact = stratified_test(tables)
    return {
        "stratified_p_value": round(p, 6),
        "stratified_exact": exact,
        "tasks_compared": len(both),
        "mean_task_change_pp": round(mean * 100, 2),
    }


def _adjust(rows: list[Row], alpha: float) -> list[Row]:
    """Task rows judged on Holm-adjusted p-values: many tasks, one family of tests."""
    tested = [i for i, r in enumerate(rows) if r.p_value is not None]
    adjusted = holm([rows[i].p_value or 0.0 for i in tested])
    out = list(rows)
    for i, q in zip(tested, adjusted, strict=True):
        change = rows[i].pass_rate_change or 0.0
        out[i] = rows[i].model_copy(
            update={
                "p_adjusted": round(q, 6),
                "significant": q < alpha,
                "verdict": _word(q < alpha, change),
            }
        )
    return out


def _select(report: Report, variant: str | None, model: str | None) -> list[RunReport]:
    return [
        t
        for t in report.runs
        if (variant is None or t.variant == variant) and (model is None or t.model == model)
    ]


def _task_sets(
    a: Sequence[RunReport], b: Sequence[RunReport], names: tuple[str, str], allow: bool
) -> tuple[list[str], list[str], list[str]]:
    """(common, only in base, only in new) task ids, in first-seen order; refuses a
    difference unless allowed, and a comparison with no common task at all."""
    ids_a, ids_b = dict.fromkeys(t.id for t in a), dict.fromkeys(t.id for t in b)
    common = [i for i in ids_a if i in ids_b]
    only_a = [i for i in ids_a if i not in ids_b]
    only_b = [i for i in ids_b if i not in ids_a]
    if (only_a or only_b) and (not allow or not common):
        parts = [
            f"only in {name}: {', '.join(ids)}"
            for name, ids in zip(names, (only_a, only_b), strict=True)
            if ids
        ]
        hint = (
            "no task is on both sides"
            if not common
            else f"--allow-different-tasks compares the {len(common)} common task(s) only"
        )
        raise ConfigError(
            [
                Problem(
                    "(command line)",
                    None,
                    "BASE/NEW",
                    f"task ids differ ({'; '.join(parts)}); {hint}",
                )
            ]
        )
    return common, only_a, only_b


def check_selection(
    base: Report,
    new: Report,
    base_variant: str | None,
    new_variant: str | None,
    base_model: str | None,
    new_model: str | None,
) -> None:
    """Refuses (ConfigError, naming the flag) a variant or model a side never ran, and one
    model flag alone against a side of several models, which would pool them."""

    def refuse(flag: str, message: str) -> ConfigError:
        return ConfigError([Problem("(command line)", None, flag, message)])

    for flag, report, name in (
        ("--base-variant", base, base_variant),
        ("--new-variant", new, new_variant),
    ):
        known = sorted({t.variant for t in report.runs if t.variant is not None})
        if name is not None and name not in known:
            raise refuse(
                flag, f"no run of variant {name!r}; variants there: {', '.join(known) or 'none'}"
            )
    for flag, side, report, name, other in (
        ("--base-model", "BASE", base, base_model, new_model),
        ("--new-model", "NEW", new, new_model, base_model),
    ):
        models = sorted({t.model for t in report.runs})
        if name is not None and name not in models:
            raise refuse(flag, f"no run of model {name!r}; models there: {', '.join(models)}")
        if name is None and other is not None and len(models) > 1:
            raise refuse(flag, f"{side} ran several models ({', '.join(models)}); name one")


def compare(
    base: Report,
    new: Report,
    *,
    base_name: str = "BASE",
    new_name: str = "NEW",
    base_variant: str | None = None,
    new_variant: str | None = None,
    base_model: str | None = None,
    new_model: str | None = None,
    allow_different_tasks: bool = False,
    alpha: float = DEFAULT_ALPHA,
) -> Comparison:
    """Match runs by model and variant (whichever is not being compared) and by task.

    Raises ConfigError when the two sides ran different task ids, unless
    `allow_different_tasks`: then only the common tasks are compared, and a note says so.
    """
    a, b = _select(base, base_variant, base_model), _select(new, new_variant, new_model)
    common, only_a, only_b = _task_sets(a, b, (base_name, new_name), allow_different_tasks)
    keep = set(common)
    a, b = [t for t in a if t.id in keep], [t for t in b if t.id in keep]
    by_variant = base_variant is None and new_variant is None
    by_model = base_model is None and new_model is None
    group: Callable[[RunReport], str] = (
        column_name
        if by_variant and by_model
        else (lambda t: t.model)
        if by_model
        else (lambda t: t.variant or "")
        if by_variant
        else (lambda t: "")
    )

    def task_key(t: RunReport) -> str:
        return f"{t.id} ({group(t)})" if group(t) else t.id

    def grouped(key: Callable[[RunReport], str], strata: bool) -> list[Row]:
        x, y = _buckets(a, key), _buckets(b, key)
        return [
            _row(k, x.get(k, []), y.get(k, []), alpha, task_key if strata else None)
            for k in dict.fromkeys([*x, *y])
        ]

    overall = _row("all runs", a, b, alpha, task_key)
    groups = grouped(group, True) if any(group(t) for t in [*a, *b]) else []
    notes = []
    if only_a or only_b:
        notes.append(
            f"compared on the {len(common)} task(s) both sides ran; left out: "
            + "; ".join(
                f"only in {name}: {', '.join(ids)}"
                for name, ids in ((base_name, only_a), (new_name, only_b))
                if ids
            )
        )
    if by_model and by_variant and not any(r.base.runs and r.new.runs for r in groups):
        notes.append(
            "no model/variant ran on both sides, so no row is comparable; "
            "to compare two models give --base-model and --new-model"
        )
    notes += [
        f"{r.name}: no per-task test, as no task has finished runs on both sides "
        "(the pooled test compares different tasks)"
        for r in [overall, *groups]
        if r.tasks_compared == 0
    ]
    changed = changed_tasks(a, b, by_variant=by_variant)
    if changed:
        notes.append(
            f"task(s) {', '.join(changed)}: the same id ran another prompt or check on each "
            "side (another task file?), so their rows compare different tasks"
        )
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
    reward = compare_rewards(a, b, group, task_key, alpha, (base_name, new_name))
    why += reward.inconclusive if reward else []
    return Comparison(
        base=base_name,
        new=new_name,
        alpha=alpha,
        overall=overall,
        groups=groups,
        tasks=_adjust(grouped(task_key, False), alpha),
        common_tasks=len(common),
        tasks_only_in_base=only_a,
        tasks_only_in_new=only_b,
        notes=notes,
        inconclusive=why,
        reward=reward,
    )


def _partial(r: Report) -> str:
    if r.partial:
        return partial_text(r)
    return f"{r.pending} run(s) not finished yet" if r.pending else ""


def _unfinished(s: Side) -> str:
    return f"{s.errored} errored, {s.skipped} skipped"


def _rate(s: Side) -> str:
    return "-" if s.pass_rate is None else f"{s.passed}/{s.finished} {s.pass_rate:.0%}"


def _pp(change: float | None) -> str:
    return "-" if change is None else f"{change:+.1f} pp"


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _delta(x: float | None, y: float | None, fmt: Callable[[float], str]) -> str:
    """New value, then the change: absolute, and relative in percent of the base."""
    if x is None or y is None:
        return "-"
    d = y - x
    rel = f", {d / x * 100:+.0f}%" if x else ""
    return f"{fmt(y)} ({'+' if d >= 0 else '-'}{fmt(abs(d))}{rel})"


def _ratio_delta(x: float | None, y: float | None) -> str:
    """A ratio shown as a percent changes by percentage points, never by percent."""
    if x is None or y is None:
        return "-"
    return f"{percent(y)} ({(y - x) * 100:+.1f} pp)"


def _excluded(s: Side) -> str:
    return f"{s.skipped}/{s.errored}"


_COSTS = ["Skipped/errored", "Mean tokens", "Cache hit", "Mean cost", "Median time"]


def _costs(r: Row) -> list[str]:
    return [
        f"{_excluded(r.base)} -> {_excluded(r.new)}",
        _delta(r.base.mean_tokens, r.new.mean_tokens, lambda v: f"{v:,.0f}"),
        _ratio_delta(r.base.cache_hit, r.new.cache_hit),
        _delta(r.base.mean_cost_usd, r.new.mean_cost_usd, lambda v: money(v)),
        _delta(r.base.median_time_s, r.new.median_time_s, duration),
    ]


def _strata(r: Row) -> str:
    if not r.tasks_compared:
        return ""
    return f" ({r.tasks_compared} strata{'' if r.stratified_exact else ', chi-squared'})"


def _verdict(r: Row) -> str:
    return f"**{r.verdict}**" if r.significant else r.verdict


def _reward_test(c: Comparison) -> str:
    return f"; mean reward: {c.reward.test}" if c.reward else ""


def render_compare(c: Comparison) -> str:
    """The comparison as Markdown: the verdict first, then per group and per task."""
    header = ["", "Base pass", "New pass", "Change", "p pooled", "Verdict", "p per task"]
    header += ["Mean task change", *_COSTS]
    align = ["---", "--:", "--:", "--:", "--:", "---", "--:", "--:"] + ["--:"] * len(_COSTS)

    def line(r: Row) -> list[str]:
        return [
            cell(r.name),
            _rate(r.base),
            _rate(r.new),
            _pp(r.pass_rate_change_pp),
            _p(r.p_value),
            _verdict(r),
            _p(r.stratified_p_value) + _strata(r),
            _pp(r.mean_task_change_pp),
            *_costs(r),
        ]

    task_header = ["", "Base pass", "New pass", "Change", "p", "p Holm", "Verdict", *_COSTS]
    task_align = ["---", "--:", "--:", "--:", "--:", "--:", "---"] + ["--:"] * len(_COSTS)

    def task_line(r: Row) -> list[str]:
        return [
            cell(r.name),
            _rate(r.base),
            _rate(r.new),
            _pp(r.pass_rate_change_pp),
            _p(r.p_value),
            _p(r.p_adjusted),
            _verdict(r),
            *_costs(r),
        ]

    regressions = len(c.regressions) + len(c.reward_regressions)
    head = (
        f"**{regressions} significant regression(s)**"
        if regressions
        else "**Inconclusive**"
        if c.inconclusive
        else "**No significant regression**"
    )
    if c.inconclusive:
        head += " (" + "; ".join(cell(w) for w in c.inconclusive) + ")"
    groups = (
        ["## By model / variant", "", *table(header, align, [line(r) for r in c.groups]), ""]
        if c.groups
        else []
    )
    return "\n".join(
        [
            f"# Compare {cell(c.base)} -> {cell(c.new)}",
            "",
            f"{head} at alpha {c.alpha:g} ({c.test}{_reward_test(c)}).",
            "",
            *[f"> {cell(n)}" for n in c.notes],
            *([""] if c.notes else []),
            "Rates are over finished runs; skipped (never started) and errored runs are "
            "counted apart. Changes of a pass rate or cache hit are in percentage points "
            "(pp); other changes are the new value (absolute change, relative change in %).",
            "",
            f"- *p pooled*: {c.test}. Is the pass rate over these runs different?",
            f"- *p per task*: {c.stratified_test}. Is there a consistent difference task by "
            "task? Strata: tasks with finished runs on both sides.",
            f"- *p Holm*: {c.task_test}. Which tasks differ?",
            "",
            "## Overall",
            "",
            *table(header, align, [line(c.overall)]),
            "",
            *(render_rewards(c.reward) if c.reward else []),
            *groups,
            "## By task",
            "",
            *table(task_header, task_align, [task_line(r) for r in c.tasks]),
            "",
        ]
    )
