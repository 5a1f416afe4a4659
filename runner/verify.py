"""A suite task's verifier, run in the run's environment after the agent's phase (issue 27).

The tests reach the environment only now, so the agent never saw them; whatever the agent
left at the tests' place or in `/logs/verifier` is removed first, so it cannot plant a
reward. The command runs with its own timeout and a pinned zone, locale and hash seed, so
the same work is graded the same way twice. It runs as the task's verifier user when the
task names one (Harbor's `[verifier].user`; podman and docker only), else as the
environment's. Then the format's grading reads the result:
Harbor's reward files, Terminal-Bench's pytest summary, SWE-bench's test log.

SWE-bench is graded as its harness grades a prediction, not in the agent's environment:
the run's recorded patch (the gold patch for `agent: oracle`) applied in a fresh one of the
same image, then the eval script (`swe_graded`, runner/swe_fresh.py). A run whose patch
left a file out is never resolved; a test_patch that does not apply is the verifier's
failure.

A verifier that gives nothing to grade (no reward file, no summary, a timeout, a lost
container) raises `VerifierFailed`: the run is an error, never a score.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time

import anyio

from runner import exec_events as ev
from runner import swe_fresh
from runner.envrun import RunEnvironment
from runner.errors import ConfigError, EnvironmentFault, UnsafeFileError, VerifierFailed
from runner.record import Grade, RunRecord
from runner.redact import Redactor
from runner.reports.events import EventLog
from runner.sandbox.container import ContainerEnvironment
from runner.sandbox.environment import Environment
from runner.suites.grading import pytest_summary, reward_from_files
from runner.suites.model import SuiteTask
from runner.vocabulary import RunStatus

PINNED_ENV = {"TZ": "UTC", "LC_ALL": "C.UTF-8", "PYTHONHASHSEED": "0"}
"""Set for every verifier run, over the task's own variables: grading must not depend on
the machine's zone, locale or Python's hash order."""
LOGS = "/logs/verifier"
REWARD_MAX_BYTES = 1 << 16
OUTPUT_CAP = 8 << 20
"""The verifier's output kept for grading (SWE-bench logs of big suites run to MBs)."""
TAIL_CHARS = 4000


async def graded(
    rec: RunRecord,
    renv: RunEnvironment,
    *,
    stop: anyio.Event,
    checks: set[anyio.CancelScope],
    redact: Redactor,
    log: EventLog,
) -> RunRecord:
    """`rec` with its grade or why there is none. Called in the shielded wind-up after
    the diff was taken (the tests are not part of the work), in a scope a signal cancels,
    as the check is: a run stopped before its grade is `interrupted`, never scored."""
    assert rec.outcome is not None and rec.run.suite is not None
    if rec.outcome.status is RunStatus.INTERRUPTED or stop.is_set():
        return rec.but(stopped_before_check=True)
    if renv.inner is None or renv.fault is not None or renv.snapshot is None:
        return rec  # an error naming the backend already
    began = time.monotonic()
    with anyio.CancelScope() as scope:
        checks.add(scope)
        try:
            if rec.run.suite.verifier.grading == "swe-bench":
                grade = await swe_graded(rec, renv)
            else:
                grade = await verify(renv.inner, rec.run.suite)
        except VerifierFailed as exc:
            note = redact(str(exc))
            took = round(time.monotonic() - began, 3)
            log.emit(ev.verifier_completed(error=note))
            spent = Grade(None, duration_s=took, fresh=exc.fresh, start_s=exc.start_s)
            return rec.but(verifier_error=note, verifier_spent=spent)
        finally:
            checks.discard(scope)
    if scope.cancelled_caught:
        return rec.but(stopped_before_check=True)
    log.emit(
        ev.verifier_completed(
            reward=grade.reward,
            rewards=grade.rewards,
            resolution=grade.resolution,
            exit_code=grade.exit_code,
            duration_s=grade.duration_s,
        )
    )
    return rec.but(grade=dataclasses.replace(grade, output_tail=redact(grade.output_tail)))


async def verify(env: Environment, task: SuiteTask) -> Grade:
    """The grade of the work now in `env`; VerifierFailed when there is none."""
    v = task.verifier
    began = time.monotonic()
    try:
        await _prepare(env, task)
        argv = list(v.command)
        run_env = {**dict(task.environment.env), **dict(v.env), **PINNED_ENV}
        if v.user is None:
            res = await env.exec(
                argv, cwd=env.workdir, env=run_env, timeout_s=v.timeout_s, output_cap=OUTPUT_CAP
            )
        else:
            container = await _hand_over(env, v.user, v.tests_at)
            res = await container.exec(
                argv,
                cwd=env.workdir,
                env=run_env,
                timeout_s=v.timeout_s,
                output_cap=OUTPUT_CAP,
                user=v.user,
            )
    except (EnvironmentFault, UnsafeFileError, OSError) as exc:
        raise VerifierFailed(f"the tests could not run: {exc}") from None
    log = res.output.decode("utf-8", "replace")
    tail = log[-TAIL_CHARS:]
    if res.timed_out:
        raise VerifierFailed(f"the tests timed out after {v.timeout_s:g} s; output: {tail[-500:]}")
    took = round(time.monotonic() - began, 3)
    if v.grading == "reward-file":
        got = reward_from_files(
            await _reward_file(env, "reward.json"), await _reward_file(env, "reward.txt")
        )
        return Grade(got.value, got.named, None, res.exit_code, took, tail)
    if v.grading == "pytest-summary":
        summary = pytest_summary(log)
        resolution = "resolved" if summary.resolved else "not"
        reward = 1.0 if summary.resolved else 0.0
        return Grade(reward, (("reward", reward),), resolution, res.exit_code, took, tail)
    return swe_log_grade(log, task, res.exit_code, took, tail)


async def swe_graded(rec: RunRecord, renv: RunEnvironment) -> Grade:
    """SWE-bench as its harness grades a prediction: a fresh environment of the run's
    image, the instance's test_patch checked (one that does not apply is the verifier's
    failure, never a score), the run's recorded patch applied (one that does not is `not`
    resolved, no test run, as the harness says), then the eval script. A patch that left
    a file out is not the whole work: graded as recorded, and never resolved."""
    task = rec.run.suite
    assert task is not None
    began = time.monotonic()
    patch, left_out = await swe_fresh.recorded_patch(rec, renv.out_dir)
    if (gold := swe_fresh.gold_patch(rec.run)) is not None:
        # The gold prediction, as the harness evaluates it: one that does not apply is
        # said so, not hidden behind the empty diff its failed apply left.
        patch, left_out = gold, ()
    env = renv.fresh()
    start_s: float | None = None
    try:
        try:
            await env.start()
        except EnvironmentFault as exc:
            raise VerifierFailed(f"{task.id}: no fresh environment to grade in: {exc}") from None
        start_s = round(time.monotonic() - began, 3)
        try:
            problem = await swe_fresh.test_patch_problem(env, task)
            if problem is not None:
                raise VerifierFailed(
                    f"{task.id}: the instance's test_patch does not apply at its "
                    f"base_commit, so its tests cannot run: {problem}"
                )
            applied, said = (True, "") if not patch else await swe_fresh.apply_patch(env, patch)
        except (EnvironmentFault, UnsafeFileError, OSError) as exc:
            raise VerifierFailed(f"{task.id}: the patch could not be applied: {exc}") from None
        if not applied:
            why = swe_fresh.not_applied("gold" if rec.run.agent == "oracle" else "run's", said)
            took = round(time.monotonic() - began, 3)
            return Grade(
                0.0,
                (("reward", 0.0),),
                "not",
                None,
                took,
                said[-TAIL_CHARS:],
                fresh=True,
                start_s=start_s,
                patch_applied=False,
                why=why,
            )
        grade = await verify(env, task)
    except VerifierFailed as exc:
        raise VerifierFailed(str(exc), fresh=True, start_s=start_s) from None
    finally:
        await _stopped(env)
    took = round(time.monotonic() - began, 3)
    grade = dataclasses.replace(
        grade, duration_s=took, fresh=True, start_s=start_s, patch_applied=bool(patch) or None
    )
    if left_out:
        return dataclasses.replace(
            grade,
            reward=0.0,
            rewards=(("reward", 0.0), *[(k, v) for k, v in grade.rewards if k != "reward"]),
            resolution="not",
            why=f"the patch is not the whole work ({'; '.join(left_out[:5])}), so the run "
            "cannot be resolved",
        )
    return grade


async def _stopped(env: Environment) -> None:
    with anyio.CancelScope(shield=True), contextlib.suppress(EnvironmentFault):
        await env.stop()  # else the next batch reaps it (labelled as the run's)


async def _prepare(env: Environment, task: SuiteTask) -> None:
    """Fresh `/logs/verifier` and tests folder, then the tests copied in."""
    v = task.verifier
    fresh = ["rm", "-rf", "--", LOGS, v.tests_at]
    done = await env.exec([*fresh], cwd="/", timeout_s=60, output_cap=1 << 16)
    if done.exit_code == 0:
        done = await env.exec(
            ["mkdir", "-p", "--", LOGS, v.tests_at], cwd="/", timeout_s=60, output_cap=1 << 16
        )
    if done.exit_code != 0:
        said = done.output.decode(errors="replace").strip()[-300:]
        raise VerifierFailed(f"cannot make {LOGS} and {v.tests_at}: {said}")
    if v.tests_dir is not None:
        await env.put_dir(v.tests_dir, v.tests_at)
    for host, inside in v.extra_files:
        data = await anyio.to_thread.run_sync(host.read_bytes)
        await env.write_file(inside, data)


async def _hand_over(env: Environment, user: str, tests_at: str) -> ContainerEnvironment:
    """The tests and `/logs/verifier` given to the task's verifier user (by root, since
    the agent's user may not own them), for a backend that can run one command as another
    user; `validate` refuses a verifier user on kubernetes before any run."""
    if not isinstance(env, ContainerEnvironment):
        raise VerifierFailed(
            f"the task's verifier runs as user {user!r}, which backend {env.backend} "
            "cannot do (podman and docker can)"
        )
    done = await env.exec(
        ["chown", "-R", "--", user, LOGS, tests_at],
        cwd="/",
        timeout_s=60,
        output_cap=1 << 16,
        user="0",
    )
    if done.exit_code != 0:
        said = done.output.decode(errors="replace").strip()[-300:]
        raise VerifierFailed(f"cannot give {LOGS} and {tests_at} to user {user!r}: {said}")
    return env


async def _reward_file(env: Environment, name: str) -> bytes | None:
    path = f"{LOGS}/{name}"
    try:
        return await env.read_file(path, max_bytes=REWARD_MAX_BYTES)
    except (UnsafeFileError, EnvironmentFault) as exc:
        said = str(exc)  # the environments name the file they refuse or fail to read
        raise VerifierFailed(said if path in said else f"{path}: {said}") from None


def swe_log_grade(log: str, task: SuiteTask, exit_code: int, took: float, tail: str) -> Grade:
    """SWE-bench: the official grading over the eval script's log (the run's patch was
    applied before it). A log the harness reads as a broken environment, or whose tests
    never started (the test_patch did not apply), is a verifier failure; one whose test
    run the grading cannot trust is `not` resolved, as the harness says, with no share of
    tests it could not count."""
    from runner.suites.swe_eval import APPLY_PATCH_FAIL, START_TEST_OUTPUT
    from runner.suites.swe_grading import grade_swe_log

    try:
        g = grade_swe_log(log, task)
    except ConfigError as exc:  # the swebench package is missing (validate says so first)
        raise VerifierFailed("; ".join(p.message for p in exc.problems)) from None
    if g.infra_failure is not None:
        raise VerifierFailed(f"the test environment broke: {g.infra_failure}")
    if not g.tests_ran:
        # Before the tests start, no code of the patch has run: what fails there is the
        # instance's. After, the patch's code could print any marker, so the harness's
        # reading stands (not resolved) and the patch cannot turn its failure into an error.
        before_tests = log.split(START_TEST_OUTPUT, 1)[0]
        if APPLY_PATCH_FAIL in before_tests:
            raise VerifierFailed(
                f"{task.id}: the instance's test_patch did not apply, so its tests did not run"
            )
        if START_TEST_OUTPUT not in log:
            raise VerifierFailed(
                f"{task.id}: the eval script never reached its tests (no "
                f"{START_TEST_OUTPUT!r} in its log)"
            )
        why = (
            "the log holds no test run the grading can trust (cut short, no test parsed, or "
            "the test command's exit status contradicts it): not resolved, as the harness says"
        )
        return Grade(0.0, (("reward", 0.0),), "not", exit_code, took, tail, why=why)
    named = (
        ("reward", g.reward),
        ("fail_to_pass", _share(g.fail_to_pass)),
        ("pass_to_pass", _share(g.pass_to_pass)),
    )
    return Grade(g.reward, named, g.resolution, exit_code, took, tail)


def _share(split: tuple[tuple[str, ...], tuple[str, ...]]) -> float:
    passed, failed = len(split[0]), len(split[1])
    return round(passed / (passed + failed), 6) if passed + failed else 1.0
