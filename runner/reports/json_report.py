"""Builds `report.json` from thread outcomes (pure; the caller writes it atomically)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.items import Usage
from runner.reports.model import (
    BatchIdentity,
    CheckReport,
    CompactionReport,
    PrefixReport,
    Report,
    RequestReport,
    ResultReport,
    TaskReport,
    UsageReport,
    WorkspaceReport,
)
from runner.reports.totals import cache_hit_ratio, compute_totals
from runner.usage import ideal_cached_tokens

if TYPE_CHECKING:
    from runner.run import TaskRun


def usage_report(u: Usage | None, ideal: int | None = None) -> UsageReport | None:
    """`ideal`: the tokens a perfect prefix cache would have served (see UsageReport)."""
    if u is None:
        return None
    return UsageReport(**u.as_dict(),
                       cache_hit_ratio=round(u.cached_tokens / u.input_tokens, 4)
                       if u.input_tokens else None,
                       ideal_cached_tokens=ideal,
                       ideal_cache_ratio=None if ideal is None
                       else cache_hit_ratio(ideal, u.input_tokens))


def task_report(run: TaskRun, out_dir: Path) -> TaskReport:
    task, o = run.task, run.outcome
    name = f"{task.provider_name}/{task.model}"
    ws = run.ws
    wsr = (WorkspaceReport(base=ws.base, base_dirty=ws.base_dirty, setup_s=round(ws.setup_s, 3))
           if ws is not None else None)
    res = run.result
    rr = None
    if res is not None:
        patch = res.patch_path
        rr = ResultReport(commit=res.commit, branch=res.branch,
                          patch=str(patch.relative_to(out_dir)) if patch.is_relative_to(out_dir)
                          else str(patch),
                          files_changed=len(res.files), insertions=res.insertions,
                          deletions=res.deletions, files=[f.path for f in res.files],
                          violations=list(res.violations), pushed=run.pushed)
    ck = run.check
    cr = (CheckReport(command=ck.command, exit_code=ck.exit_code, passed=ck.passed,
                      duration_s=ck.duration_s, output_tail=ck.output_tail)
          if ck is not None else None)
    status, error = run.verdict()
    options = task.model_options.model_dump(exclude_none=True)
    if o is None:
        return TaskReport(id=task.id, run=task.run, repeat=task.repeat, model=name,
                          model_options=options, status=status, error=error,
                          final_message=None, turns_completed=0, tool_calls=0, duration_s=0.0,
                          usage=UsageReport(), requests=[], events_file=run.events_file,
                          workspace=wsr, result=rr, check=cr,
                          current_date=run.current_date, timezone=run.timezone)
    requests = [RequestReport(index=r.index, turn=r.turn, input_items=r.input_items,
                              request_bytes=r.request_bytes,
                              duration_ms=round(r.duration_s * 1000, 1),
                              response_id=r.response_id, output_types=r.output_types,
                              usage=usage_report(r.usage, ideal_cached_tokens(
                                  r.usage.input_tokens, r.prefix) if r.usage else None),
                              prefix=PrefixReport(**dataclasses.asdict(r.prefix)), kind=r.kind,
                              error=r.error)
                for r in o.requests]
    ideal = sum(r.usage.ideal_cached_tokens or 0 for r in requests if r.usage) \
        if requests else None
    compactions = [CompactionReport(**{**dataclasses.asdict(c), "requests": list(c.requests)})
                   for c in o.compactions]
    return TaskReport(id=task.id, run=task.run, repeat=task.repeat, model=name,
                      model_options=options, status=status, error=error,
                      final_message=o.final_message, turns_completed=o.turns_completed,
                      tool_calls=o.tool_calls, duration_s=round(o.duration_s, 3),
                      usage=usage_report(o.usage, ideal) or UsageReport(), requests=requests,
                      prefix_breaks=sum(not r.prefix.extends_previous for r in requests),
                      compactions=compactions,
                      events_file=run.events_file, workspace=wsr, result=rr, check=cr,
                      output=run.output, truncated_output=o.truncated_output,
                      current_date=run.current_date,
                      timezone=run.timezone)


def build_report(*, tasks: Sequence[TaskReport], run_id: str, task_file: str,
                 started: dt.datetime, finished: dt.datetime, pending: int = 0,
                 batch: dict[str, Any] | None = None) -> Report:
    return Report(batch=None if batch is None else BatchIdentity(**batch),
                  run_id=run_id, task_file=task_file, started_at=started.isoformat(),
                  finished_at=finished.isoformat(),
                  duration_s=round((finished - started).total_seconds(), 3),
                  totals=compute_totals(tasks), tasks=list(tasks), pending=pending)
