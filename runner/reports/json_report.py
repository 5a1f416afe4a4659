"""Builds `report.json` from thread outcomes (pure; the caller writes it atomically)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from runner.agent import Outcome
from runner.config import ResolvedTask
from runner.items import Usage
from runner.reports.model import Report, RequestReport, TaskReport, Totals, UsageReport


def usage_report(u: Usage | None) -> UsageReport | None:
    if u is None:
        return None
    return UsageReport(**u.as_dict(),
                       cache_hit_ratio=round(u.cached_tokens / u.input_tokens, 4)
                       if u.input_tokens else None)


def task_report(task: ResolvedTask, o: Outcome | None, events_file: str,
                error: str | None) -> TaskReport:
    name = f"{task.provider_name}/{task.model}"
    if o is None:
        return TaskReport(id=task.id, model=name, status="error", error=error,
                          final_message=None, turns_completed=0, tool_calls=0, duration_s=0.0,
                          usage=UsageReport(), requests=[], events_file=events_file)
    requests = [RequestReport(index=r.index, turn=r.turn, input_items=r.input_items,
                              request_bytes=r.request_bytes,
                              duration_ms=round(r.duration_s * 1000, 1),
                              response_id=r.response_id, output_types=r.output_types,
                              usage=usage_report(r.usage)) for r in o.requests]
    return TaskReport(id=task.id, model=name, status=o.status, error=o.error,
                      final_message=o.final_message, turns_completed=o.turns_completed,
                      tool_calls=o.tool_calls, duration_s=round(o.duration_s, 3),
                      usage=usage_report(o.usage) or UsageReport(), requests=requests,
                      events_file=events_file)


def build_report(*, runs: Sequence[tuple[ResolvedTask, Outcome | None, str, str | None]],
                 run_id: str, task_file: str, started: dt.datetime,
                 finished: dt.datetime) -> Report:
    tasks = [task_report(*r) for r in runs]
    total = Usage()
    for _, o, _, _ in runs:
        if o is not None:
            total = total + o.usage
    done = sum(1 for t in tasks if t.status == "completed")
    totals = Totals(tasks=len(tasks), completed=done, not_completed=len(tasks) - done,
                    requests=sum(len(t.requests) for t in tasks),
                    tool_calls=sum(t.tool_calls for t in tasks),
                    usage=usage_report(total) or UsageReport())
    return Report(run_id=run_id, task_file=task_file, started_at=started.isoformat(),
                  finished_at=finished.isoformat(),
                  duration_s=round((finished - started).total_seconds(), 3),
                  totals=totals, tasks=tasks)
