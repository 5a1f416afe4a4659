"""Shared helpers for the report renderer tests: sample reports and golden-file checks.

Goldens live in tests/golden/reports/. Regenerate them with `UPDATE_GOLDEN=1 pytest
tests/reports` and review the diff; without it the tests only compare.
"""

from __future__ import annotations

from pathlib import Path

from runner.reports.model import (
    CheckReport,
    PrefixReport,
    Report,
    RequestReport,
    ResultReport,
    TaskReport,
    Totals,
    UsageReport,
)
from tests import golden_files

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "reports"


def check_golden(name: str, actual: str) -> None:
    golden_files.check_golden(GOLDEN / name, actual)


def usage(input_tokens: int, cached: int, output: int, reasoning: int = 0) -> UsageReport:
    return UsageReport(
        input_tokens=input_tokens, cached_tokens=cached, uncached_tokens=input_tokens - cached,
        output_tokens=output, reasoning_tokens=reasoning, total_tokens=input_tokens + output,
        cache_hit_ratio=round(cached / input_tokens, 4) if input_tokens else None)


def request(index: int, u: UsageReport | None = None) -> RequestReport:
    return RequestReport(index=index, turn=0, input_items=3, request_bytes=1200,
                         duration_ms=850.0, response_id=f"resp_{index}",
                         output_types=["message"], usage=u,
                         prefix=PrefixReport(extends_previous=index > 1, reused_items=0,
                                             ideal_cache_ratio=None))


def result(branch: str | None, violations: list[str] | None = None) -> ResultReport:
    return ResultReport(commit="c0ffee" * 6 + "abcd", branch=branch, patch="a.patch",
                        files_changed=2, insertions=10, deletions=3,
                        files=["a.py", "b.py"], violations=violations or [])


def task(task_id: str, model: str, status: str, *, error: str | None = None,
         final_message: str | None = None, u: UsageReport | None = None, requests: int = 2,
         tool_calls: int = 4, duration_s: float = 12.5,
         res: ResultReport | None = None, check: CheckReport | None = None) -> TaskReport:
    return TaskReport(id=task_id, model=model, status=status, error=error,
                      final_message=final_message, turns_completed=max(requests - 1, 0),
                      tool_calls=tool_calls, duration_s=duration_s,
                      usage=u if u is not None else usage(1000, 600, 200),
                      requests=[request(i + 1) for i in range(requests)],
                      events_file=f"events/{task_id}.jsonl", result=res, check=check)


def report(tasks: list[TaskReport], *, run_id: str = "20260314-101500-ab12",
           duration_s: float = 95.123456) -> Report:
    total = UsageReport()
    for t in tasks:
        total = UsageReport(
            input_tokens=total.input_tokens + t.usage.input_tokens,
            cached_tokens=total.cached_tokens + t.usage.cached_tokens,
            uncached_tokens=total.uncached_tokens + t.usage.uncached_tokens,
            output_tokens=total.output_tokens + t.usage.output_tokens,
            reasoning_tokens=total.reasoning_tokens + t.usage.reasoning_tokens,
            total_tokens=total.total_tokens + t.usage.total_tokens)
    if total.input_tokens:
        total.cache_hit_ratio = round(total.cached_tokens / total.input_tokens, 4)
    done = sum(1 for t in tasks if t.status == "completed")
    return Report(run_id=run_id, task_file="tasks.yaml", started_at="2026-03-14T10:15:00+01:00",
                  finished_at="2026-03-14T10:16:35+01:00", duration_s=duration_s,
                  totals=Totals(tasks=len(tasks), completed=done, not_completed=len(tasks) - done,
                                requests=sum(len(t.requests) for t in tasks),
                                tool_calls=sum(t.tool_calls for t in tasks), usage=total),
                  tasks=tasks)


def sample_report() -> Report:
    """Two models, every status, a branch, a scope violation and awkward text."""
    return report([
        task("fix-parser", "openai/gpt-5", "completed", final_message="Fixed the parser.",
             u=usage(12000, 9000, 800, 300), requests=5, tool_calls=9, duration_s=41.25,
             res=result("runner/fix-parser")),
        task("add_tests", "openai/gpt-5", "max_turns", error="stopped after 20 turns",
             final_message="I still need to | run the tests\nand fix <things> & more",
             u=usage(30000, 27000, 1500), requests=20, tool_calls=31, duration_s=120.0),
        task("refactor", "openai/gpt-5", "scope_violation",
             error="scope violation: forbidden path secrets/key.pem",
             res=result(None, ["forbidden path secrets/key.pem"]), duration_s=8.0004),
        task("fix-parser", "local/smollm2", "failed",
             error="tests failed: " + "x" * 400 + "\nsecond line",
             u=usage(5000, 0, 100), duration_s=3.3333333),
        task("add_tests", "local/smollm2", "timeout", error="timed out after 600s",
             u=usage(0, 0, 0), requests=0, tool_calls=0, duration_s=600.0),
        task("docs", "local/smollm2", "error",
             error="provider error: HTTP 500 <html>&nbsp;</html>\x00\x1b[31m\ud800\ufffe",
             final_message=None, requests=1, duration_s=0.0),
        task("docs", "local/smollm2", "completed", final_message="Done | twice",
             res=result("runner/docs-2"), duration_s=7.5,
             check=CheckReport(command="make docs", exit_code=0, passed=True, duration_s=1.0,
                               output_tail="ok")),
        task("lint", "openai/gpt-5", "check_failed", final_message="All clean, I think.",
             res=result("runner/lint"), duration_s=30.0,
             check=CheckReport(command="ruff check .", exit_code=1, passed=False,
                               duration_s=0.5, output_tail="E501 line too long\nFound 1 error.")),
    ])
