"""Builds `report.json` from the runs' entries (pure but for the runner's own version and
commit, read once per process; the caller writes it atomically). A run makes its own
entry (`report_entry.run_report`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from runner.items import Usage
from runner.reports.inputs import runner_identity
from runner.reports.model import (
    BatchIdentity,
    Report,
    RunnerIdentity,
    RunReport,
    UsageReport,
)
from runner.reports.totals import cache_hit_ratio, compute_totals


def usage_report(u: Usage | None, ideal: int | None = None) -> UsageReport | None:
    """`ideal`: the tokens a perfect prefix cache would have served (see UsageReport)."""
    if u is None:
        return None
    return UsageReport(
        **u.as_dict(),
        cache_hit_ratio=round(u.cached_tokens / u.input_tokens, 4) if u.input_tokens else None,
        ideal_cached_tokens=ideal,
        ideal_cache_ratio=None if ideal is None else cache_hit_ratio(ideal, u.input_tokens),
    )


def build_report(
    *,
    runs: Sequence[RunReport],
    batch_id: str,
    task_file: str,
    started: dt.datetime,
    finished: dt.datetime,
    pending: int = 0,
    batch: dict[str, Any] | None = None,
) -> Report:
    return Report(
        batch=None if batch is None else BatchIdentity(**batch),
        batch_id=batch_id,
        task_file=task_file,
        started_at=started.isoformat(),
        finished_at=finished.isoformat(),
        duration_s=round((finished - started).total_seconds(), 3),
        totals=compute_totals(runs),
        runs=list(runs),
        pending=pending,
        runner=RunnerIdentity(**runner_identity()),
    )
