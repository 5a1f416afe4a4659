"""Tests for runner.reports.summary: what every summary says about a batch (group
statistics, the task x model matrix, the headline's cost, skip reasons, what a partial
merge lacks), before any renderer formats it."""

from __future__ import annotations

import dataclasses

import pytest

from runner.reports.model import (
    BatchIdentity,
    EnvironmentReport,
    RedoneReport,
    RunnerIdentity,
    UsageReport,
)
from runner.reports.summary import (
    Cell,
    environment_label,
    group_stats,
    headline_cost,
    in_environment,
    partial_text,
    reward_text,
    runner_text,
    skip_reasons,
    spend_notes,
    task_matrix,
)
from tests.support.reports import report, task
from tests.support.reports import usage as make_usage


def test_group_stats_are_null_safe() -> None:
    g = group_stats(
        [
            task("a", "p/m", "failed", cost_usd=0.5, u=make_usage(0, 0, 0)),
            task("a", "p/m", "failed", cost_usd=0.5, u=make_usage(0, 0, 0)),
        ]
    )
    assert (g.runs, g.passed, g.repeats) == (2, 0, 2)
    assert g.cost_per_pass is None  # nothing passed
    assert g.cache_hit is None  # nothing sent
    assert g.pass_at_1 == 0.0 and g.pass_at_n == 0.0
    unknown = group_stats(
        [task("a", "p/m", "completed", cost_usd=0.5), task("b", "p/m", "completed", cost_usd=None)]
    )
    assert unknown.cost_per_pass is None  # one price unknown: no number at all
    known = group_stats(
        [task("a", "p/m", "completed", cost_usd=0.5), task("b", "p/m", "failed", cost_usd=0.25)]
    )
    assert known.cost_per_pass == pytest.approx(0.75)


def test_uneven_repeats_use_the_fewest() -> None:
    g = group_stats(
        [
            task("a", "p/m", "completed", repeat=1),
            task("a", "p/m", "failed", repeat=2),
            task("a", "p/m", "failed", repeat=3),
            task("b", "p/m", "completed"),
            task("b", "p/m", "failed", repeat=2),
        ]
    )
    assert g.repeats == 2
    # a: n=3, c=1 -> pass@2 = 1 - C(2,2)/C(3,2) = 2/3; b: n=2, c=1 -> 1.
    assert g.pass_at_n == pytest.approx((2 / 3 + 1) / 2)
    assert g.pass_at_1 == pytest.approx((1 / 3 + 1 / 2) / 2)


def test_an_empty_group_has_no_rates() -> None:
    g = group_stats([])
    assert (g.runs, g.passed, g.repeats, g.interval) == (0, 0, 0, None)
    assert (g.pass_at_1, g.pass_at_n, g.median_tokens, g.cost) == (None, None, 0, 0.0)


def test_skipped_and_errored_runs_are_counted_apart_from_the_rate() -> None:
    g = group_stats(
        [
            task("a", "p/m", "completed", duration_s=2.0),
            task("b", "p/m", "skipped", requests=0, duration_s=0.0),
            task("c", "p/m", "error", duration_s=4.0),
            task("d", "p/m", "interrupted", duration_s=8.0),
        ]
    )
    assert (g.runs, g.passed, g.skipped, g.errored) == (1, 1, 1, 2)
    assert g.median_time == 2.0 and g.time == 14.0  # the median over finished runs only


def test_reward_text_names_tasks_and_runs() -> None:
    g = group_stats([task("a", "p/m", "completed")])
    assert reward_text(g) == "-"  # nothing graded
    graded = dataclasses.replace(
        g, mean_reward=0.6666, reward_interval=(0.2, 0.94), rewarded=3, reward_tasks=3
    )
    assert reward_text(graded) == "0.67 (0.20-0.94) n=3"
    repeated = dataclasses.replace(graded, rewarded=16, reward_tasks=4, reward_interval=None)
    assert reward_text(repeated) == "0.67 n=4 tasks (16 runs)"


def test_the_matrix_counts_each_task_and_model_pair_in_report_order() -> None:
    runs = [
        task("b", "p/x", "completed"),
        task("b", "p/x", "failed", repeat=2),
        task("b", "p/x", "skipped", repeat=3),
        task("a", "p/x", "error"),
        task("b", "p/y", "completed", variant="terse"),
    ]
    rows, cols, cells = task_matrix(runs)
    assert (rows, cols) == (["b", "a"], ["p/x", "p/y / terse"])
    assert cells[("b", "p/x")] == Cell(passed=1, finished=2, skipped=1)
    assert cells[("b", "p/x")].text() == "1/2 +1 skipped"
    assert cells[("a", "p/x")].text() == "1 errored"
    assert ("a", "p/y / terse") not in cells
    assert Cell().text() == "-"


def test_the_headline_cost_is_exact_a_lower_bound_or_unknown() -> None:
    priced = [
        task("a", "p/m", "completed", cost_usd=0.25),
        task("b", "p/m", "failed", cost_usd=1.5),
    ]
    assert headline_cost(priced) == "$1.75"
    unpriced = task("c", "p/n", "failed", cost_usd=None)
    assert headline_cost([*priced, unpriced]) == ">= $1.75"
    assert headline_cost([unpriced]) == "n/a"
    # A run that sent no request costs nothing, priced or not.
    assert headline_cost([*priced, task("d", "p/n", "skipped", requests=0)]) == "$1.75"
    redone = RedoneReport(attempts=1, usage=UsageReport(), cost_usd=0.5)
    assert headline_cost(priced, redone) == "$2.25"
    assert headline_cost(priced, redone.model_copy(update={"cost_usd": None})) == ">= $1.75"


def test_spend_notes_say_retries_and_redone_attempts() -> None:
    r = report([task("a", "p/m", "completed")])
    assert spend_notes(r) == []
    redone = RedoneReport(
        attempts=2, usage=make_usage(1000, 0, 234), cost_usd=0.01, retries=3, retry_wait_s=75
    )
    totals = r.totals.model_copy(update={"retries": 1200, "retry_wait_s": 4.0, "redone": redone})
    assert spend_notes(r.model_copy(update={"totals": totals})) == [
        "1,200 retries, 4.0s waiting",
        "of which redone: 2 earlier attempt(s), 1,234 tokens, cost $0.0100, 3 retries, "
        "1m 15s waiting",
    ]


def test_skip_reasons_are_counted_by_name() -> None:
    runs = [
        task("a", "p/m", "skipped", skip_reason="interrupted"),
        task("b", "p/m", "skipped", skip_reason="budget"),
        task("c", "p/m", "skipped", skip_reason="budget"),
        task("d", "p/m", "skipped"),
        task("e", "p/m", "failed"),
    ]
    assert skip_reasons(runs) == "budget 2, interrupted 1, not started 1"
    assert skip_reasons(runs[4:]) == ""


def test_runner_and_partial_texts_name_what_is_unknown_or_missing() -> None:
    r = report([task("a", "p/m", "completed")])
    assert runner_text(r) == "Runner of unknown version, commit unknown"
    who = RunnerIdentity(version="0.1.0", commit="abc123")
    assert runner_text(r.model_copy(update={"runner": who})) == "Runner 0.1.0, commit abc123"
    assert partial_text(r) == "shards missing"
    batch = BatchIdentity(task_file_sha256="0" * 64, run_set="x", runs=9, shard=1, shards=3)
    cut = r.model_copy(update={"missing_shards": [2, 3], "batch": batch, "pending": 1500})
    assert partial_text(cut) == (
        "shard(s) 2, 3 of 3 missing; 1,500 run(s) of shards cut short (killed, or a "
        "checkpoint) missing"
    )


@pytest.mark.parametrize(
    ("environment", "label", "inside"),
    [
        (None, "local", False),
        (EnvironmentReport(backend="local", artifacts="artifacts/a"), "local", False),
        (EnvironmentReport(backend="podman", image="x:1"), "podman: x:1", True),
        (EnvironmentReport(backend="kubernetes"), "kubernetes: ?", True),
    ],
)
def test_where_a_run_ran(environment: EnvironmentReport | None, label: str, inside: bool) -> None:
    run = task("a", "p/m", "completed").model_copy(update={"environment": environment})
    assert (environment_label(run), in_environment(run)) == (label, inside)
