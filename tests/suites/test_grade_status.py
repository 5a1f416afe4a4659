"""How a suite run ends, from its record alone: the verifier's grade decides a completed
run, and a verifier that gave no grade is an error, never a score."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from runner.config import Run, load
from runner.record import EnvironmentInfo, Grade, RunRecord, error_of, status_of
from runner.vocabulary import RunStatus
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
        (S.TIMEOUT, {"grade": ONE}, S.TIMEOUT, None),
        (S.MAX_REQUESTS, {"grade": NOT}, S.MAX_REQUESTS, None),
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
