"""A suite task's verifier: the format's grading over what the tests left (SWE-bench's
log read as its harness reads it), a run stopped before its grade never scored, and a
verifier that cannot prepare or grade raising `VerifierFailed` (an error, never a score)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import anyio
import pytest

from runner.config import Run, load
from runner.envrun import Environments, RunEnvironment
from runner.errors import VerifierFailed
from runner.record import RunRecord
from runner.redact import Redactor
from runner.reports.events import EventLog
from runner.sandbox import make_environment, make_policy
from runner.sandbox.env import child_env
from runner.suites.model import SuiteTask
from runner.verify import LOGS, graded, swe_log_grade, verify
from runner.vocabulary import RunStatus
from tests.support import paths
from tests.support.records import outcome
from tests.support.suites import SWE_BENCH, swe_fixture_task

LOGS_DIR = SWE_BENCH / "logs"


@pytest.fixture(scope="module")
def task() -> SuiteTask:
    return swe_fixture_task()


# -- SWE-bench's log ---------------------------------------------------------------------


def test_the_verifier_errs_when_the_test_patch_failed_and_gives_no_share_of_no_tests(
    task: SuiteTask,
) -> None:
    """The run's patch went in before the eval script, so a failed apply in its log is the
    instance's test_patch: an error naming the instance, never a score. A log whose tests
    the grading cannot trust is `not` resolved, with no FAIL_TO_PASS or PASS_TO_PASS share
    (no test counted), and says why."""
    log = (LOGS_DIR / "gold.log").read_text()
    for bad, said in (
        (">>>>> Patch Apply Failed\n" + log, "test_patch did not apply"),
        (log.replace(">>>>> Start Test Output", ""), "never reached its tests"),
    ):
        with pytest.raises(VerifierFailed, match=said) as caught:
            swe_log_grade(bad, task, 1, 0.1, bad[-100:])
        assert task.id in str(caught.value)
    start = ">>>>> Start Test Output\n"
    for untrusted in (
        log.replace(">>>>> Test Exit Code: 0", ">>>>> Test Exit Code: 1"),
        log.replace(">>>>> End Test Output", ""),  # cut short
        # Printed by the patch's own code while the tests ran: its failure, not an error.
        log.replace(start, start + ">>>>> Patch Apply Failed\n"),
    ):
        grade = swe_log_grade(untrusted, task, 1, 0.1, "")
        assert (grade.resolution, grade.rewards) == ("not", (("reward", 0.0),))
        assert grade.why is not None and "no test run the grading can trust" in grade.why
    good = swe_log_grade(log, task, 0, 0.1, "")
    assert good.rewards == (("reward", 1.0), ("fail_to_pass", 1.0), ("pass_to_pass", 1.0))
    assert good.passed and good.why is None


def test_a_partial_fix_is_graded_with_its_shares(task: SuiteTask) -> None:
    log = (LOGS_DIR / "partial.log").read_text()
    grade = swe_log_grade(log, task, 1, 0.25, "tail")
    assert (grade.resolution, grade.exit_code, grade.duration_s, grade.output_tail) == (
        "partial",
        1,
        0.25,
        "tail",
    )
    reward, f2p, p2p = grade.rewards
    assert reward == ("reward", grade.reward) and grade.reward == 0.0
    assert f2p == ("fail_to_pass", 0.5) and p2p == ("pass_to_pass", 1.0)


# -- the run's grade -----------------------------------------------------------------------


def _suite_run(tmp_path: Path) -> Run:
    shutil.copytree(paths.FIXTURES / "suites" / "harbor", tmp_path / "harbor")
    path = tmp_path / "tasks.yaml"
    path.write_text(
        "version: 1\nproviders:\n  p: {base_url: 'http://127.0.0.1:9/v1'}\n"
        "defaults: {model: p/m}\nsuites:\n"
        "  - {format: harbor, path: harbor, select: {ids: [hello]}}\n"
    )
    (run,) = load(path, offline=True).runs
    return run


@pytest.mark.anyio
async def test_a_run_stopped_or_never_started_is_not_graded(tmp_path: Path) -> None:
    t = _suite_run(tmp_path)
    renv = RunEnvironment(Environments("b", 1, env={}), t, tmp_path)
    log = EventLog(tmp_path / "events.jsonl", task=t.name, redact=Redactor())
    checks: set[anyio.CancelScope] = set()
    go, stop = anyio.Event(), anyio.Event()
    stop.set()
    try:
        for status, event, stopped in (
            (RunStatus.INTERRUPTED, go, True),  # the agent was stopped
            (RunStatus.COMPLETED, stop, True),  # the batch is stopping
            (RunStatus.COMPLETED, go, False),  # the environment never started
        ):
            rec = RunRecord(t, "events.jsonl", outcome=outcome(status))
            got = await graded(rec, renv, stop=event, checks=checks, redact=Redactor(), log=log)
            assert got == (rec.but(stopped_before_check=True) if stopped else rec)
            assert got.grade is None and got.verifier_error is None
    finally:
        log.close()
    assert checks == set() and (tmp_path / "events.jsonl").read_text() == ""


@pytest.mark.anyio
async def test_a_verifier_that_cannot_make_its_folders_fails_naming_them(
    tmp_path: Path,
) -> None:
    """The agent's sandbox: its root is read-only, so `/logs/verifier` cannot be made."""
    t = _suite_run(tmp_path)
    assert t.suite is not None
    work = tmp_path / "work"
    work.mkdir()
    policy = make_policy("workspace-write", workspace=work, hidden=[tmp_path])
    env = make_environment(policy, env=child_env(os.environ))
    await env.start()
    try:
        with pytest.raises(VerifierFailed) as failed:
            await verify(env, t.suite)
    finally:
        await env.stop()
    said = str(failed.value)
    assert said.startswith(f"cannot make {LOGS} and {t.suite.verifier.tests_at}: ")
    assert "Read-only file system" in said
    assert sorted(os.listdir(work)) == []
