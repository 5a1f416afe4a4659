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
    RunReport,
    Totals,
    UsageReport,
)
from tests.support import golden_files, paths

GOLDEN = paths.GOLDEN / "reports"


def check_golden(name: str, actual: str) -> None:
    golden_files.check_golden(GOLDEN / name, actual)


def usage(input_tokens: int, cached: int, output: int, reasoning: int = 0) -> UsageReport:
    return UsageReport(
        input_tokens=input_tokens,
        cached_tokens=cached,
        uncached_tokens=input_tokens - cached,
        output_tokens=output,
        reasoning_tokens=reasoning,
        total_tokens=input_tokens + output,
        cache_hit_ratio=round(cached / input_tokens, 4) if input_tokens else None,
    )


def request(index: int, u: UsageReport | None = None) -> RequestReport:
    return RequestReport(
        index=index,
        turn=0,
        input_items=3,
        request_bytes=1200,
        duration_ms=850.0,
        response_id=f"resp_{index}",
        output_types=["message"],
        usage=u,
        prefix=PrefixReport(extends_previous=index > 1, reused_items=0, ideal_cache_ratio=None),
    )


def result(branch: str | None, violations: list[str] | None = None) -> ResultReport:
    return ResultReport(
        commit="c0ffee" * 6 + "abcd",
        branch=branch,
        patch="a.patch",
        files_changed=2,
        insertions=10,
        deletions=3,
        files=["a.py", "b.py"],
        violations=violations or [],
    )


def run_name(task_id: str, model: str, variant: str | None, repeat: int) -> str:
    """The batch's naming: `<task>.<provider>-<model>[.<variant>].r<n>`."""
    parts = [task_id, model.replace("/", "-")] + ([variant] if variant else [])
    return ".".join(parts) + f".r{repeat}"


def task(
    task_id: str,
    model: str,
    status: str,
    *,
    error: str | None = None,
    final_message: str | None = None,
    u: UsageReport | None = None,
    requests: int = 2,
    tool_calls: int = 4,
    duration_s: float = 12.5,
    res: ResultReport | None = None,
    check: CheckReport | None = None,
    run: str = "",
    repeat: int = 1,
    variant: str | None = None,
    cost_usd: float | None = None,
    fingerprint: str = "",
    prefix_breaks: int = 0,
    skip_reason: str | None = None,
) -> RunReport:
    reqs = [request(i + 1) for i in range(requests)]
    for i in range(min(prefix_breaks, max(requests - 1, 0))):
        reqs[i + 1] = reqs[i + 1].model_copy(
            update={
                "prefix": PrefixReport(
                    extends_previous=False,
                    reused_items=2,
                    ideal_cache_ratio=0.4,
                    break_index=2,
                    break_reason="instructions changed",
                )
            }
        )
    return RunReport(
        id=task_id,
        run=run,
        repeat=repeat,
        variant=variant,
        model=model,
        fingerprint=fingerprint,
        cost_usd=cost_usd,
        status=status,
        error=error,
        skip_reason=skip_reason,
        final_message=final_message,
        turns_completed=max(requests - 1, 0),
        tool_calls=tool_calls,
        duration_s=duration_s,
        usage=u if u is not None else usage(1000, 600, 200),
        prefix_breaks=sum(not r.prefix.extends_previous for r in reqs[1:]),
        requests=reqs,
        events_file=f"threads/{run or task_id}.jsonl",
        result=res,
        check=check,
    )


def report(
    tasks: list[RunReport], *, batch_id: str = "20260314-101500-ab12", duration_s: float = 95.123456
) -> Report:
    total = UsageReport()
    for t in tasks:
        total = UsageReport(
            input_tokens=total.input_tokens + t.usage.input_tokens,
            cached_tokens=total.cached_tokens + t.usage.cached_tokens,
            uncached_tokens=total.uncached_tokens + t.usage.uncached_tokens,
            output_tokens=total.output_tokens + t.usage.output_tokens,
            reasoning_tokens=total.reasoning_tokens + t.usage.reasoning_tokens,
            total_tokens=total.total_tokens + t.usage.total_tokens,
        )
    if total.input_tokens:
        total.cache_hit_ratio = round(total.cached_tokens / total.input_tokens, 4)
    done = sum(1 for t in tasks if t.status == "completed")
    skipped = sum(1 for t in tasks if t.status == "skipped")
    errored = sum(
        1 for t in tasks if t.status in ("error", "interrupted", "rate_limited", "quota_exhausted")
    )
    finished = len(tasks) - skipped - errored
    costs = [t.cost_usd for t in tasks]
    cost = None if None in costs else round(sum(c for c in costs if c is not None), 6)
    return Report(
        batch_id=batch_id,
        task_file="tasks.yaml",
        started_at="2026-03-14T10:15:00+01:00",
        finished_at="2026-03-14T10:16:35+01:00",
        duration_s=duration_s,
        totals=Totals(
            tasks=len(tasks),
            completed=done,
            not_completed=len(tasks) - done,
            requests=sum(len(t.requests) for t in tasks),
            tool_calls=sum(t.tool_calls for t in tasks),
            usage=total,
            finished=finished,
            skipped=skipped,
            errored=errored,
            pass_rate=round(done / finished, 4) if finished else None,
            cost_usd=cost,
        ),
        runs=tasks,
    )


def mixed_report() -> Report:
    """Five runs: one passed, one failed its check, one errored, two skipped (budget and
    interrupt), so passed, failed and skipped counts all differ."""
    return report(
        [
            task("a", "p/m", "completed"),
            task("a", "p/m", "check_failed"),
            task("b", "p/m", "error"),
            task("b", "p/m", "skipped", requests=0, skip_reason="budget"),
            task("c", "p/m", "skipped", requests=0, skip_reason="interrupted"),
        ]
    )


def sample_report() -> Report:
    """Two models, every status, a branch, a scope violation, a prefix break, costs known
    for one model only, and awkward text."""
    gpt, local = "openai/gpt-5", "local/smollm2"
    return report(
        [
            task(
                "fix-parser",
                gpt,
                "completed",
                final_message="Fixed the parser.",
                u=usage(12000, 9000, 800, 300),
                requests=5,
                tool_calls=9,
                duration_s=41.25,
                res=result("runner/fix-parser"),
                run=run_name("fix-parser", gpt, None, 1),
                cost_usd=0.0421,
                fingerprint="f3",
            ),
            task(
                "add_tests",
                gpt,
                "max_requests",
                error="stopped after 20 turns",
                final_message="I still need to | run the tests\nand fix <things> & more",
                u=usage(30000, 27000, 1500),
                requests=20,
                tool_calls=31,
                duration_s=120.0,
                run=run_name("add_tests", gpt, None, 1),
                cost_usd=0.0911,
                fingerprint="a1",
                prefix_breaks=2,
            ),
            task(
                "refactor",
                gpt,
                "scope_violation",
                error="scope violation: forbidden path secrets/key.pem",
                res=result(None, ["forbidden path secrets/key.pem"]),
                duration_s=8.0004,
                run=run_name("refactor", gpt, None, 1),
                cost_usd=0.0043,
                fingerprint="c7",
            ),
            task(
                "fix-parser",
                local,
                "failed",
                error="tests failed: " + "x" * 400 + "\nsecond line",
                u=usage(5000, 0, 100),
                duration_s=3.3333333,
                run=run_name("fix-parser", local, None, 1),
                fingerprint="e2",
            ),
            task(
                "add_tests",
                local,
                "timeout",
                error="timed out after 600s",
                u=usage(0, 0, 0),
                requests=0,
                tool_calls=0,
                duration_s=600.0,
                run=run_name("add_tests", local, None, 1),
                fingerprint="0b",
            ),
            task(
                "docs",
                local,
                "error",
                error="provider error: HTTP 500 <html>&nbsp;</html>\x00\x1b[31m\ud800\ufffe",
                final_message=None,
                requests=1,
                duration_s=0.0,
                run=run_name("docs", local, None, 1),
                fingerprint="9d",
            ),
            task(
                "docs",
                local,
                "completed",
                final_message="Done | twice",
                res=result("runner/docs-2"),
                duration_s=7.5,
                repeat=2,
                run=run_name("docs", local, None, 2),
                fingerprint="5e",
                check=CheckReport(
                    command="make docs", exit_code=0, passed=True, duration_s=1.0, output_tail="ok"
                ),
            ),
            task(
                "lint",
                gpt,
                "check_failed",
                final_message="All clean, I think.",
                res=result("runner/lint"),
                duration_s=30.0,
                run=run_name("lint", gpt, None, 1),
                cost_usd=0.0102,
                fingerprint="77",
                check=CheckReport(
                    command="ruff check .",
                    exit_code=1,
                    passed=False,
                    duration_s=0.5,
                    output_tail="E501 line too long\nFound 1 error.",
                ),
            ),
            task(
                "bump",
                gpt,
                "interrupted",
                error="interrupted by a signal; the work done so far is kept",
                requests=1,
                run=run_name("bump", gpt, None, 1),
                cost_usd=0.001,
                fingerprint="d4",
            ),
            task(
                "bump",
                local,
                "budget",
                error="token budget of 5000 input tokens reached",
                u=usage(5200, 4000, 50),
                run=run_name("bump", local, None, 1),
                fingerprint="b0",
            ),
            task(
                "lint",
                local,
                "max_tool_calls",
                error="stopped after 50 tool calls",
                tool_calls=50,
                run=run_name("lint", local, None, 1),
                fingerprint="3a",
            ),
            task(
                "refactor",
                local,
                "skipped",
                error="not started: the batch budget is spent",
                u=usage(0, 0, 0),
                requests=0,
                tool_calls=0,
                duration_s=0.0,
                run=run_name("refactor", local, None, 1),
                fingerprint="f1",
                skip_reason="budget",
            ),
        ]
    )


def benchmark_report() -> Report:
    """Two tasks x two models x two variants x three repeats, with known pass counts:
    gpt-5/terse passes 3+2 of 6, gpt-5/plain 1+0, smollm2/terse 0+0, smollm2/plain 3+3."""
    passes = {
        ("openai/gpt-5", "terse"): (3, 2),
        ("openai/gpt-5", "plain"): (1, 0),
        ("local/smollm2", "terse"): (0, 0),
        ("local/smollm2", "plain"): (3, 3),
    }
    tasks = []
    for (model, variant), counts in passes.items():
        for task_id, passed in zip(("alpha", "beta"), counts, strict=True):
            for r in range(1, 4):
                ok = r <= passed
                tasks.append(
                    task(
                        task_id,
                        model,
                        "completed" if ok else "check_failed",
                        u=usage(1000 * r, 500 * r, 100),
                        duration_s=10.0 * r,
                        run=run_name(task_id, model, variant, r),
                        repeat=r,
                        variant=variant,
                        cost_usd=0.01 * r if model.startswith("openai") else None,
                        fingerprint=f"{task_id}-{model}-{variant}-{r}",
                    )
                )
    return report(tasks)


def report_dir(directory: Path, r: Report) -> Path:
    """A finished out dir as the report commands read it: its report.json alone."""
    directory.mkdir(parents=True)
    (directory / "report.json").write_text(r.model_dump_json())
    return directory
