"""One status vocabulary: every report reads a run's bucket from `RunStatus.verdict`, and
the Markdown and JUnit words cover every status (a new one cannot fall through)."""

from __future__ import annotations

from runner.reports.fmt import MARKS
from runner.reports.junit import REASONS
from runner.vocabulary import RunStatus, Verdict

EXPECTED = {
    "completed": "passed",
    "skipped": "skipped",
    "error": "errored",
    "rate_limited": "errored",
    "quota_exhausted": "errored",
    "interrupted": "errored",
    "failed": "failed",
    "check_failed": "failed",
    "max_requests": "failed",
    "max_tool_calls": "failed",
    "max_output_tokens": "failed",
    "size_limit": "failed",
    "timeout": "failed",
    "budget": "failed",
    "scope_violation": "failed",
}


def test_every_status_has_one_verdict() -> None:
    assert {s.value: s.verdict.value for s in RunStatus} == EXPECTED


def test_every_status_has_a_mark_and_every_unpassed_one_a_reason() -> None:
    assert set(MARKS) == set(RunStatus)
    assert set(REASONS) == {s for s in RunStatus if s.verdict in (Verdict.FAILED, Verdict.ERRORED)}
