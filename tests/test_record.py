"""A run's record and the rule that decides its status (runner/record.py): the status
table over every combination that matters, with no run executed; notes that all reach
the error."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from runner.config import Run
from runner.record import (
    CheckResult,
    EnvironmentInfo,
    RunRecord,
    error_of,
    left_out_note,
    status_of,
    verdict,
)
from runner.redact import Redactor
from runner.vocabulary import RunStatus
from runner.workspace import Result
from tests.support.records import a_task, outcome


def result(violations: tuple[str, ...] = ()) -> Result:
    return Result("c0ffee", "base", None, (), 0, 0, Path("x.patch"), violations)


PASS = CheckResult("make test", 0, True, 0.5, "ok")
FAIL = CheckResult("make test", 2, False, 0.5, "no")
AFTER_THE_LOOP = {RunStatus.CHECK_FAILED, RunStatus.SCOPE_VIOLATION, RunStatus.SKIPPED}
LOOP_ENDS = [(s, None if s is RunStatus.COMPLETED else f"{s} because") for s in RunStatus]
LOOP_ENDS = [(s, why) for s, why in LOOP_ENDS if s not in AFTER_THE_LOOP]
"""Every way the loop ends: ok, failed, limits, size_limit, rate_limited, quota,
interrupted, error..."""


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return a_task(tmp_path_factory.mktemp("t"))


def expected(
    loop: RunStatus,
    check: CheckResult | None,
    not_kept: bool,
    violation: bool,
    output_error: bool,
    stopped: bool,
) -> RunStatus:
    """The precedence rule, written once more as a plain table walk."""
    if not_kept:
        return RunStatus.ERROR
    if violation:
        return RunStatus.SCOPE_VIOLATION
    if loop is not RunStatus.COMPLETED:
        return loop
    if output_error:
        return RunStatus.FAILED
    if stopped:
        return RunStatus.INTERRUPTED
    if check is FAIL:
        return RunStatus.CHECK_FAILED
    return RunStatus.COMPLETED


def test_the_status_table_over_every_combination(task: Run) -> None:
    seen: set[RunStatus] = set()
    for (loop, why), check, not_kept, violation, output_error, stopped in itertools.product(
        LOOP_ENDS, (None, PASS, FAIL), *[(False, True)] * 4
    ):
        rec = RunRecord(
            task,
            "threads/t.jsonl",
            outcome=outcome(loop, why),
            check=check,
            not_kept=not_kept,
            result=result(("a.yml: forbidden",) if violation else ()),
            output_error="output: not an object" if output_error else None,
            stopped_before_check=stopped,
        )
        want = expected(loop, check, not_kept, violation, output_error, stopped)
        assert status_of(rec) is want, (loop, check, not_kept, violation, output_error, stopped)
        seen.add(want)
    assert seen == set(RunStatus) - {RunStatus.SKIPPED}
    assert len(LOOP_ENDS) == 12


LOST = EnvironmentInfo(
    "podman", image="localhost/x", fault="podman: the container runner-x is gone: exec failed"
)


def test_a_dead_or_unstartable_environment_is_an_error_whatever_else_happened(task: Run) -> None:
    """inspect_ai#4709: a dead sandbox scored as a pass. Here every row of the table, a
    passing check and a clean loop included, is an error naming the backend."""
    for (loop, why), check, violation, stopped in itertools.product(
        LOOP_ENDS, (None, PASS, FAIL), (False, True), (False, True)
    ):
        rec = RunRecord(
            task,
            "f",
            outcome=outcome(loop, why),
            check=check,
            result=result(("a.yml: forbidden",) if violation else ()),
            stopped_before_check=stopped,
            environment=LOST,
        )
        assert verdict(rec)[0] is RunStatus.ERROR, (loop, check, violation, stopped)
        assert (error_of(rec) or "").startswith("podman: the container runner-x is gone")
    never = RunRecord(
        task, "f", environment=EnvironmentInfo("docker", fault="docker: build failed")
    )
    assert verdict(never) == (RunStatus.ERROR, "docker: build failed")


def test_a_healthy_environment_changes_nothing_in_the_table(task: Run) -> None:
    fine = EnvironmentInfo("podman", image="localhost/x", start_s=0.3)
    for (loop, why), check in itertools.product(LOOP_ENDS, (None, PASS, FAIL)):
        rec = RunRecord(task, "f", outcome=outcome(loop, why), check=check)
        assert verdict(rec.but(environment=fine)) == verdict(rec)


def test_a_run_that_never_ran_is_skipped_or_an_error(task: Run) -> None:
    budget = RunRecord(task, "f", skipped="budget", notes=("not started: $1 spent",))
    assert verdict(budget) == (RunStatus.SKIPPED, None)
    assert error_of(budget) == "not started: $1 spent"
    broken = RunRecord(task, "f", notes=("repo is not a git repository",))
    assert status_of(broken) is RunStatus.ERROR
    assert error_of(broken) == "repo is not a git repository"
    assert error_of(RunRecord(task, "f")) is None


def test_the_reason_of_each_status_comes_first_then_every_note(task: Run) -> None:
    base = RunRecord(task, "f", outcome=outcome(RunStatus.COMPLETED), check=FAIL)
    rec = base.noted("AGENTS.md is a link: ignored").noted("push failed: rejected")
    assert error_of(rec) == (
        "check failed with exit code 2: make test; AGENTS.md is a link: ignored; "
        "push failed: rejected"
    )
    assert base.notes == ()  # a new record, the old one untouched
    stopped = RunRecord(task, "f", outcome=outcome(RunStatus.COMPLETED), stopped_before_check=True)
    assert "before its check finished" in (error_of(stopped) or "")
    scope = RunRecord(task, "f", outcome=outcome(RunStatus.COMPLETED), result=result(("a", "b")))
    assert error_of(scope) == "scope violation: a; b"


def test_notes_the_old_rule_dropped_now_reach_the_error(task: Run) -> None:
    """The loop's own error used to hide what the wind-up noted (`o.error or run.error`),
    and "could not keep" overwrote the notes before it."""
    rec = RunRecord(task, "f", outcome=outcome(RunStatus.MAX_REQUESTS, "max_requests reached"))
    rec = rec.noted("not captured in the result: .git/x").but(not_kept=True)
    rec = rec.noted("could not keep the result: disk full")
    assert status_of(rec) is RunStatus.ERROR
    assert error_of(rec) == (
        "max_requests reached; not captured in the result: .git/x; "
        "could not keep the result: disk full"
    )


def test_the_same_note_twice_is_said_once(task: Run) -> None:
    rec = RunRecord(task, "f", outcome=outcome(RunStatus.FAILED, "boom")).noted("boom", "x")
    assert error_of(rec) == "boom; x"


def test_left_out_entries_are_redacted_and_counted() -> None:
    entries = [f"dir/secret-abcdefghijkl-{i}" for i in range(25)]
    note = left_out_note(entries, Redactor(["secret-abcdefghijkl"]), "result")
    assert "secret-abcdefghijkl" not in note
    assert note.startswith("not captured in the result: dir/")
    assert note.endswith("; and 5 more")
