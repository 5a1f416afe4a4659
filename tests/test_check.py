"""The task's `check` decides a run by its exit code: run in the run's workspace under the
agent's sandbox, its output's tail kept; a check that timed out says so in that tail."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.check import CHECK_TAIL_BYTES, check_result, renv_check, run_check
from runner.envrun import Environments, RunEnvironment
from runner.sandbox.environment import ExecResult
from tests.support.fixtures import make_git_repo
from tests.support.records import a_task

pytestmark = pytest.mark.anyio


def _workspace(tmp_path: Path) -> Path:
    """A run's workspace among the batch's runs (the sandbox hides its siblings)."""
    work = make_git_repo(tmp_path / "runs" / "work", {"a.txt": "a\n"})
    (tmp_path / "runs" / "other").mkdir()
    (tmp_path / "runs" / "other" / "secret.txt").write_text("another run's file\n")
    return work


async def test_no_check_is_no_result(tmp_path: Path) -> None:
    t = a_task(tmp_path)
    assert await run_check(t, tmp_path, dict(os.environ)) is None
    renv = RunEnvironment(Environments("b", 1, env={}), t, tmp_path)
    assert await renv_check(t, renv) is None


async def test_the_check_runs_sandboxed_in_the_workspace_and_its_exit_code_decides(
    tmp_path: Path,
) -> None:
    work = _workspace(tmp_path)
    script = (
        "cat a.txt; echo ${GREETING:-unset} ${OPENAI_API_KEY:-unset}; "
        "cat ../other/secret.txt 2>/dev/null; exit 3"
    )
    t = a_task(tmp_path, f", check: '{script}'")
    env = {"PATH": os.environ["PATH"], "GREETING": "hi", "OPENAI_API_KEY": "sk-live-0123456789"}
    got = await run_check(t, work, env)
    assert got is not None
    assert (got.command, got.exit_code, got.passed) == (script, 3, False)
    # Only the sandbox's allowlist reaches it, and the other run's file is hidden.
    assert got.output_tail == "a\nunset unset\n"


def test_only_the_outputs_tail_is_kept_and_bad_utf8_is_replaced(tmp_path: Path) -> None:
    t = a_task(tmp_path, ", check: 'true'")
    output = b"\xff" + b"x" * (CHECK_TAIL_BYTES + 10) + b"end\xfe"
    got = check_result(t, ExecResult(0, output, 1.23456))
    assert got.passed and got.duration_s == 1.235
    assert len(got.output_tail) == CHECK_TAIL_BYTES and got.output_tail.endswith("xend\ufffd")


def test_a_check_that_timed_out_fails_and_says_so(tmp_path: Path) -> None:
    t = a_task(tmp_path, ", check: 'sleep 9', check_timeout_s: 2.5")
    got = check_result(t, ExecResult(-9, b"started\n", 2.5, timed_out=True))
    assert not got.passed and got.exit_code == -9
    assert got.output_tail == "started\n\n[check timed out after 2.5 s]"


async def test_no_check_in_an_environment_that_never_started(tmp_path: Path) -> None:
    """The run is then an error naming the backend, never a score."""
    t = a_task(tmp_path, ", check: 'true', environment: {backend: podman, image: x}")
    renv = RunEnvironment(Environments("b", 1, env={}), t, tmp_path)
    assert renv.inner is None
    assert await renv_check(t, renv) is None
