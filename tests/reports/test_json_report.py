"""Tests for runner.reports.json_report: a run's usage as report.json gives it, and the
report built from the runs' entries (times, totals, identities)."""

from __future__ import annotations

import datetime as dt

from runner.items import Usage
from runner.reports.json_report import build_report, usage_report
from runner.reports.model import Report
from runner.version import VERSION
from tests.support.reports import task
from tests.support.reports import usage as make_usage

START = dt.datetime(2026, 3, 14, 10, 15, tzinfo=dt.timezone(dt.timedelta(hours=1)))


def test_usage_gets_its_ratios_rounded_and_its_uncached_part() -> None:
    assert usage_report(None) is None
    u = usage_report(Usage(input_tokens=3000, cached_tokens=1000, output_tokens=7, unreported=1))
    assert u is not None
    assert (u.uncached_tokens, u.cache_hit_ratio, u.unreported_responses) == (2000, 0.3333, 1)
    assert (u.ideal_cached_tokens, u.ideal_cache_ratio) == (None, None)
    ideal = usage_report(Usage(input_tokens=3000, cached_tokens=1000), ideal=2000)
    assert ideal is not None and (ideal.ideal_cached_tokens, ideal.ideal_cache_ratio) == (
        2000,
        0.6667,
    )


def test_nothing_sent_is_an_unknown_ratio_not_zero() -> None:
    u = usage_report(Usage(), ideal=0)
    assert u is not None and (u.cache_hit_ratio, u.ideal_cache_ratio) == (None, None)


def test_the_report_holds_its_runs_times_totals_and_who_wrote_it() -> None:
    runs = [
        task("a", "p/m", "completed", u=make_usage(100, 40, 10), cost_usd=0.5),
        task("b", "p/m", "skipped", requests=0, u=make_usage(0, 0, 0), cost_usd=0.0),
    ]
    batch = {"task_file_sha256": "0" * 64, "run_set": "s", "runs": 3, "shard": 2, "shards": 3}
    r = build_report(
        runs=runs,
        batch_id="b1",
        task_file="tasks.yaml",
        started=START,
        finished=START + dt.timedelta(seconds=95, microseconds=123456),
        pending=1,
        batch=batch,
    )
    assert (r.started_at, r.finished_at) == (
        "2026-03-14T10:15:00+01:00",
        "2026-03-14T10:16:35.123456+01:00",
    )
    assert (r.duration_s, r.pending, r.runs) == (95.123, 1, runs)
    assert (r.totals.runs, r.totals.completed, r.totals.skipped, r.totals.finished) == (2, 1, 1, 1)
    assert r.totals.usage.input_tokens == 100 and r.totals.cost_usd == 0.5
    assert r.batch is not None and (r.batch.shard, r.batch.runs) == (2, 3)
    assert r.runner is not None and r.runner.version == VERSION
    assert Report.model_validate_json(r.model_dump_json()) == r


def test_a_batch_without_identity_or_runs_still_makes_a_report() -> None:
    r = build_report(runs=[], batch_id="b", task_file="t.yaml", started=START, finished=START)
    assert (r.batch, r.duration_s, r.totals.runs, r.totals.pass_rate) == (None, 0.0, 0, None)
