"""What the summaries say about a batch, before it is rendered: per-group statistics, the
task x model matrix, the headline's cost and skip reasons, and what a partial merge lacks.

Shared by the Markdown summary, the HTML page and `report compare`, so all three count the
same way.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from runner.frozen import frozen
from runner.reports.fmt import duration, money, tokens
from runner.reports.model import RedoneReport, Report, RunReport
from runner.reports.stats import mean_pass_at_k, wilson_interval
from runner.reports.totals import finished_runs, mean_reward, sum_cost, task_rewards
from runner.vocabulary import RunStatus, Verdict


@frozen
class GroupStats:
    """What one row of a comparison says about a set of runs. Rates, medians and
    intervals are over finished runs only; skipped and errored runs are counted apart."""

    runs: int
    """Finished runs (passed or failed): the denominator."""
    skipped: int
    errored: int
    passed: int
    interval: tuple[float, float] | None
    """95% Wilson score interval of passed / runs."""
    repeats: int
    """The fewest runs of any one task (same model and variant) in the group: the n of
    pass@n, so every task has enough samples for it."""
    pass_at_1: float | None
    pass_at_n: float | None
    median_tokens: float
    cache_hit: float | None
    ideal_hit: float | None
    """Token-weighted prefix reuse: the share of input that repeats the thread's previous
    request (the server may cache more, across threads)."""
    cost_per_pass: float | None
    """Total cost over passed runs; None when a cost is unknown or nothing passed."""
    median_time: float
    input_tokens: int
    output_tokens: int
    cost: float | None
    """Total over every run of the group that sent a request (errored ones cost too)."""
    time: float
    """Total run time of every run of the group."""
    rewarded: int = 0
    """Finished runs with a reward (suite runs graded by their verifier)."""
    reward_tasks: int = 0
    """Tasks among them: the n of the mean reward (`totals.mean_reward`)."""
    mean_reward: float | None = None
    reward_interval: tuple[float, float] | None = None
    """95% interval of the mean reward over task means (`totals.mean_reward`)."""


def group_stats(every: Sequence[RunReport]) -> GroupStats:
    """Pass rate over finished runs, and pass@k over tasks: each task (id, model, variant)
    is one problem sampled `n` times, as in the pass@k literature."""
    tasks = finished_runs(every)
    kinds = [t.status.verdict for t in every]
    samples: dict[tuple[str, str, str | None], list[bool]] = {}
    for t in tasks:
        samples.setdefault((t.id, t.model, t.variant), []).append(t.status is RunStatus.COMPLETED)
    counts = [(len(v), sum(v)) for v in samples.values()]
    n = min((c[0] for c in counts), default=0)
    passed = sum(1 for t in tasks if t.status is RunStatus.COMPLETED)
    cached = sum(t.usage.cached_tokens for t in tasks)
    sent = sum(t.usage.input_tokens for t in tasks)
    cost = sum_cost(t.cost_usd for t in tasks)
    reward_tasks, reward, reward_ci = mean_reward(tasks)
    return GroupStats(
        runs=len(tasks),
        passed=passed,
        interval=wilson_interval(passed, len(tasks)),
        repeats=n,
        pass_at_1=mean_pass_at_k(counts, 1) if n else None,
        pass_at_n=mean_pass_at_k(counts, n) if n else None,
        median_tokens=statistics.median(t.usage.total_tokens for t in tasks) if tasks else 0,
        cache_hit=cached / sent if sent else None,
        ideal_hit=sum(t.usage.ideal_cached_tokens or 0 for t in tasks) / sent
        if sent and all(t.usage.ideal_cached_tokens is not None for t in tasks)
        else None,
        cost_per_pass=cost / passed if cost is not None and passed else None,
        median_time=statistics.median(t.duration_s for t in tasks) if tasks else 0.0,
        skipped=kinds.count(Verdict.SKIPPED),
        errored=kinds.count(Verdict.ERRORED),
        input_tokens=sum(t.usage.input_tokens for t in every),
        output_tokens=sum(t.usage.output_tokens for t in every),
        cost=sum_cost(t.cost_usd for t in every if t.requests),
        time=sum(t.duration_s for t in every),
        rewarded=task_rewards(tasks)[0],
        reward_tasks=reward_tasks,
        mean_reward=reward,
        reward_interval=reward_ci,
    )


def reward_text(g: GroupStats) -> str:
    """`0.67 (0.21-0.94) n=3`: the mean reward of graded runs with its 95% interval, n
    the tasks; `n=4 tasks (16 runs)` when tasks ran more than once."""
    if g.mean_reward is None:
        return "-"
    i = g.reward_interval
    ci = "" if i is None else f" ({i[0]:.2f}-{i[1]:.2f})"
    n = g.reward_tasks
    many = f"n={n}" if g.rewarded == n else f"n={n} tasks ({g.rewarded} runs)"
    return f"{g.mean_reward:.2f}{ci} {many}"


def environment_label(t: RunReport) -> str:
    """`podman: image` for a run in a container or Pod, `local` for one on the host."""
    e = t.environment
    return "local" if e is None or e.backend == "local" else f"{e.backend}: {e.image or '?'}"


def in_environment(t: RunReport) -> bool:
    """The run's commands ran in a container or Pod (a host run with artifacts has an
    `environment` too, of backend `local`)."""
    return t.environment is not None and t.environment.backend != "local"


def column_name(t: RunReport) -> str:
    """A task x model matrix column: the model, with the variant when there is one."""
    return t.model if t.variant is None else f"{t.model} / {t.variant}"


@dataclass
class Cell:
    passed: int = 0
    finished: int = 0
    skipped: int = 0
    errored: int = 0

    def text(self) -> str:
        """`2/3` (passed of finished), plus what was left out: `2/3 +1 skipped`."""
        out = [f"{self.passed}/{self.finished}"] if self.finished else []
        extra = [
            f"{'+' if out else ''}{n} {what}"
            for n, what in ((self.skipped, "skipped"), (self.errored, "errored"))
            if n
        ]
        return " ".join([*out, *extra]) or "-"


def task_matrix(
    tasks: Sequence[RunReport],
) -> tuple[list[str], list[str], dict[tuple[str, str], Cell]]:
    """Which model (and variant) solved which task: rows are task ids and columns
    model/variant, both in report order; each cell counts that pair's runs."""
    rows: dict[str, None] = {}
    cols: dict[str, None] = {}
    cells: dict[tuple[str, str], Cell] = {}
    for t in tasks:
        rows[t.id] = None
        cols[column_name(t)] = None
        c = cells.setdefault((t.id, column_name(t)), Cell())
        kind = t.status.verdict
        if kind is Verdict.SKIPPED:
            c.skipped += 1
        elif kind is Verdict.ERRORED:
            c.errored += 1
        else:
            c.finished += 1
            c.passed += kind is Verdict.PASSED
    return list(rows), list(cols), cells


def headline_cost(tasks: Sequence[RunReport], redone: RedoneReport | None = None) -> str:
    """`$0.41` when every run that sent a request has a price; `>= $0.41` when some do not
    (the known part, marked as a lower bound); `n/a` when none does. `redone`: what
    attempts `--resume` ran again spent, part of the batch's cost."""
    costs = [t.cost_usd for t in tasks if t.requests]
    if redone is not None:
        costs.append(redone.cost_usd)
    known = [c for c in costs if c is not None]
    if not known:
        return "n/a"
    return ("" if len(known) == len(costs) else ">= ") + money(sum(known))


def spend_notes(report: Report) -> list[str]:
    """What the headline says besides the runs' own spend: the retries and waits, and the
    redone attempts' part of the tokens and cost (shown apart, counted in the totals)."""
    t = report.totals
    notes = []
    if t.retries or t.retry_wait_s:
        notes.append(f"{t.retries:,} retries, {duration(t.retry_wait_s)} waiting")
    if t.redone is not None:
        r = t.redone
        notes.append(
            f"of which redone: {r.attempts:,} earlier attempt(s), "
            f"{tokens(r.usage.total_tokens)} tokens, cost {money(r.cost_usd)}"
            + (f", {r.retries:,} retries" if r.retries else "")
            + (f", {duration(r.retry_wait_s)} waiting" if r.retry_wait_s else "")
        )
    return notes


def runner_text(report: Report) -> str:
    """`Runner 0.1.0, commit <sha>`: which code made the report (the version alone is the
    same on every commit)."""
    who = report.runner
    version = (who.version if who else None) or "of unknown version"
    commit = who.commit if who else None
    return f"Runner {version}, " + (f"commit {commit}" if commit else "commit unknown")


def skip_reasons(tasks: Sequence[RunReport]) -> str:
    """`budget 2, interrupted 1`: why runs never started."""
    counts: dict[str, int] = {}
    for t in tasks:
        if t.status is RunStatus.SKIPPED:
            reason = t.skip_reason or "not started"
            counts[reason] = counts.get(reason, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def partial_text(report: Report) -> str:
    """What a partial merge lacks, in the words every output uses."""
    parts = []
    if report.missing_shards:
        total = f" of {report.batch.shards}" if report.batch else ""
        parts.append(f"shard(s) {', '.join(map(str, report.missing_shards))}{total} missing")
    if report.pending:
        parts.append(
            f"{report.pending:,} run(s) of shards cut short (killed, or a checkpoint) missing"
        )
    return "; ".join(parts) or "shards missing"
