"""How a suite run ends, from its record alone: the verifier's grade decides a completed
run, and a verifier that gave no grade is an error, never a score."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from runner.config import Run, load
from runner.record import (
    AGENT_STOPS,
    EnvironmentInfo,
    Grade,
    RunRecord,
    error_of,
    status_of,
    stopped_by,
)
from runner.vocabulary import RunStatus, Verdict
from tests.support.records import outcome

FIXTURES = Path(__file__).parent.parent / "fixtures" / "suites"
S = RunStatus


@pytest.fixture(scope="module")
def suite_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    tmp = tmp_path_factory.mktemp("suite")
    shutil.copytree(FIXTURES / "harbor", tmp / "harbor")
    path = tmp / "tasks.yaml"
    path.write_text(
        "version: 1\nproviders:\n  p: {base_url: 'http://127.0.0.1:9/v1'}\n"
        "defaults: {model: p/m}\nsuites:\n"
        "  - {format: harbor, path: harbor, select: {ids: [hello]}}\n"
    )
    (run,) = load(path, offline=True).runs
    return run


ONE = Grade(1.0, (("reward", 1.0),))
HALF = Grade(0.5, (("reward", 0.5),))
SEVERAL = Grade(None, (("a", 1.0), ("b", 1.0)))
RESOLVED = Grade(1.0, (), "resolved")
PARTIAL = Grade(0.0, (), "partial")
NOT = Grade(0.0, (), "not")


@pytest.mark.parametrize(
    ("loop", "changes", "status", "reason"),
    [
        (S.COMPLETED, {"grade": ONE}, S.COMPLETED, None),
        (S.COMPLETED, {"grade": Grade(1.5)}, S.COMPLETED, None),
        (S.COMPLETED, {"grade": HALF}, S.CHECK_FAILED, "graded reward 0.5"),
        (S.COMPLETED, {"grade": SEVERAL}, S.CHECK_FAILED, "no main reward"),
        (S.COMPLETED, {"grade": RESOLVED}, S.COMPLETED, None),
        (S.COMPLETED, {"grade": PARTIAL}, S.CHECK_FAILED, "graded partial"),
        (S.COMPLETED, {"grade": NOT}, S.CHECK_FAILED, "graded not"),
        (S.COMPLETED, {"verifier_error": "no reward file"}, S.ERROR, "verifier failed: no reward"),
        (S.COMPLETED, {}, S.ERROR, "the verifier did not run"),
        (S.COMPLETED, {"grade": ONE, "stopped_before_check": True}, S.INTERRUPTED, "interrupted"),
        (
            S.COMPLETED,
            {"grade": ONE, "environment": EnvironmentInfo("podman", fault="podman lost: gone")},
            S.ERROR,
            "podman lost",
        ),
        (S.TIMEOUT, {"grade": ONE}, S.COMPLETED, None),
        (S.MAX_REQUESTS, {"grade": NOT}, S.CHECK_FAILED, "graded not"),
        (S.MAX_REQUESTS, {"grade": RESOLVED}, S.COMPLETED, None),
        (S.MAX_REQUESTS, {"verifier_error": "timed out"}, S.ERROR, "verifier failed"),
        (S.ERROR, {"grade": RESOLVED}, S.ERROR, None),
        (S.INTERRUPTED, {"stopped_before_check": True}, S.INTERRUPTED, None),
    ],
)
def test_status_table(
    suite_run: Run,
    loop: RunStatus,
    changes: dict[str, object],
    status: RunStatus,
    reason: str | None,
) -> None:
    rec = RunRecord(run=suite_run, events_file="e.jsonl", outcome=outcome(loop)).but(**changes)
    assert status_of(rec) is status
    if reason is not None:
        assert reason in (error_of(rec) or "")


def test_a_grade_passes_at_one_or_resolved() -> None:
    assert [g.passed for g in (ONE, Grade(1.5), HALF, SEVERAL, RESOLVED, PARTIAL, NOT)] == [
        True,
        True,
        False,
        False,
        True,
        False,
        False,
    ]


LOOP_ENDS = [s for s in RunStatus if s not in (S.CHECK_FAILED, S.SCOPE_VIOLATION, S.SKIPPED)]
"""Every way the agent loop can end."""
GRADES: dict[str, dict[str, object]] = {
    "one": {"grade": ONE},
    "above one": {"grade": Grade(1.5)},
    "half": {"grade": HALF},
    "several": {"grade": SEVERAL},
    "resolved": {"grade": RESOLVED},
    "partial": {"grade": PARTIAL},
    "not": {"grade": NOT},
    "verifier error": {"verifier_error": "no reward file"},
    "no grade": {},
}


def test_the_whole_table_of_loop_ends_and_grades(suite_run: Run) -> None:
    """The rule, walked over every loop end x every grade: when the agent stopped by
    itself or at a limit, the grade alone decides (passed exactly when resolved or reward
    >= 1, so pass rate and resolved rate agree) and `stopped_by` keeps the limit; a missing
    grade is an error; the infrastructure's stops and signals keep their status."""
    assert set(LOOP_ENDS) == AGENT_STOPS | {
        S.ERROR,
        S.RATE_LIMITED,
        S.QUOTA_EXHAUSTED,
        S.INTERRUPTED,
    }
    for loop in LOOP_ENDS:
        for name, changes in GRADES.items():
            rec = RunRecord(
                run=suite_run, events_file="e.jsonl", outcome=outcome(loop, error=f"{loop} hit")
            ).but(**changes)
            status, g = status_of(rec), rec.grade
            where = (loop, name)
            if loop not in AGENT_STOPS:
                assert status is loop, where
                assert stopped_by(rec) is None, where
                continue
            if g is None:
                assert status is S.ERROR, where
                assert stopped_by(rec) is None, where
                continue
            assert status is (S.COMPLETED if g.passed else S.CHECK_FAILED), where
            assert (status.verdict is Verdict.PASSED) == (
                g.resolution == "resolved" if g.resolution else (g.reward or 0) >= 1
            ), where
            assert stopped_by(rec) is (None if loop is S.COMPLETED else loop), where
            if loop is not S.COMPLETED and not g.passed:
                assert f"{loop} hit" in (error_of(rec) or ""), where  # the stop is said


def test_a_signal_before_the_agent_began_is_interrupted_whatever_the_build_said(
    suite_run: Run,
) -> None:
    killed = EnvironmentInfo("podman", fault="podman environment failed: build exit 143")
    for rec in (
        RunRecord(run=suite_run, events_file="e.jsonl", stopped_before_start=True),
        RunRecord(
            run=suite_run, events_file="e.jsonl", stopped_before_start=True, environment=killed
        ),
    ):
        assert status_of(rec) is S.INTERRUPTED
        assert "before its agent started" in (error_of(rec) or "")
    never = RunRecord(run=suite_run, events_file="e.jsonl")
    assert status_of(never) is S.ERROR  # no signal: still an error, as before
