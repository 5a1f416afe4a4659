"""Tests for runner.reports.entries: an edited report that lists a run twice is caught,
by fingerprint, by run name in reports without fingerprints, and not at all in reports
that name neither."""

from __future__ import annotations

from runner.reports.entries import repeated_runs
from tests.support.reports import report, task


def test_a_fingerprint_seen_twice_names_both_places() -> None:
    runs = [
        task("a", "p/m", "completed", run="a.r1", fingerprint="f1"),
        task("b", "p/m", "completed", run="b.r1", fingerprint="f2"),
        task("a", "p/m", "failed", run="a.copy", fingerprint="f1"),
    ]
    (problem,) = repeated_runs(report(runs), "out/report.json")
    assert str(problem) == (
        "out/report.json: runs[2]: is run 'a.copy' again (first at runs[0], same "
        "fingerprint); a report lists each run once, so it would be counted twice: remove one"
    )


def test_without_fingerprints_the_run_name_tells_runs_apart() -> None:
    runs = [task("a", "p/m", "completed", run="a.r1") for _ in range(3)]
    problems = repeated_runs(report(runs), "r.json")
    assert [p.field for p in problems] == ["runs[1]", "runs[2]"]
    assert all("(first at runs[0], same run name)" in p.message for p in problems)
    # Repeats of one task are different runs: different names, no problem.
    apart = [task("a", "p/m", "completed", run=f"a.r{i}", repeat=i) for i in (1, 2)]
    assert repeated_runs(report(apart), "r.json") == []


def test_a_name_equal_to_another_runs_fingerprint_is_no_repeat() -> None:
    runs = [
        task("a", "p/m", "completed", run="x", fingerprint="x"),
        task("b", "p/m", "completed", run="x"),
    ]
    assert repeated_runs(report(runs), "r.json") == []


def test_reports_that_name_neither_are_left_alone() -> None:
    runs = [task("a", "p/m", "completed"), task("a", "p/m", "completed")]
    assert repeated_runs(report(runs), "r.json") == []
