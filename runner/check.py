"""The task's `check`: a command whose exit code, not the model's word, decides whether a
run passed. Run in the run's workspace under the agent's sandbox, or inside the run's
container; the report keeps its exit code and the tail of its output."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from runner.config import Run
from runner.record import CheckResult
from runner.sandbox import make_environment
from runner.sandbox.env import child_env
from runner.sandbox.environment import EXECUTOR_OUTPUT_CAP, ExecResult
from runner.wiring import sandbox_policy

if TYPE_CHECKING:
    from runner.envrun import RunEnvironment

CHECK_TAIL_BYTES = 4000


async def run_check(
    t: Run,
    cwd: Path,
    env: dict[str, str],
    objects: Sequence[Path] | None = None,
    hidden: Sequence[Path] = (),
) -> CheckResult | None:
    """The task's `check`, in the run's workspace with the agent's environment and in the
    agent's sandbox: its exit code, not the model's word, decides whether the run passed."""
    if t.check is None:
        return None
    policy = sandbox_policy(t, cwd, hidden)
    environment = make_environment(policy, workdir=cwd, objects=objects)
    await environment.start()
    try:
        res = await environment.exec(
            ["bash", "-c", t.check],
            env=child_env(env),
            timeout_s=t.check_timeout_s,
            output_cap=EXECUTOR_OUTPUT_CAP,
        )
    finally:
        with anyio.CancelScope(shield=True):
            await environment.stop()
    return check_result(t, res)


def check_result(t: Run, res: ExecResult) -> CheckResult:
    """What the report keeps of the check's run: its exit code and output's tail."""
    assert t.check is not None
    text = res.output.decode("utf-8", "replace")
    if res.timed_out:
        text += f"\n[check timed out after {t.check_timeout_s:g} s]"
    tail = text[-CHECK_TAIL_BYTES:]
    return CheckResult(t.check, res.exit_code, res.exit_code == 0, round(res.duration_s, 3), tail)


async def renv_check(t: Run, renv: RunEnvironment) -> CheckResult | None:
    """The task's check inside the run's container: None when there is no check or the
    environment is gone (the run is then an error, never a score)."""
    if t.check is None:
        return None
    res = await renv.check(t.check, t.check_timeout_s)
    return None if res is None else check_result(t, res)
