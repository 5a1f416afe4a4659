"""The agents that call no model (issue 27): `oracle` applies the suite task's own
solution, `nop` does nothing. Each goes through the run's life as a model would (the
environment started, the work diffed, the verifier, the report) at no token's cost, so
`runner suite check` finds the tasks whose grading is broken before money is spent: the
oracle must score 1 and nop 0."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from runner.agent import Outcome
from runner.config import Run
from runner.errors import EnvironmentFault, UnsafeFileError
from runner.items import Usage
from runner.sandbox.environment import Environment, ExecResult
from runner.vocabulary import RunStatus

GOLD_PATCH_AT = "/tmp/runner-gold.patch"
"""Outside every workdir the suites use, so the patch is not part of the diff."""
OUTPUT_TAIL = 2000


async def run_sanity_agent(
    t: Run, env: Environment, emit: Callable[[dict[str, Any]], None]
) -> Outcome:
    """What `t.agent` (oracle or nop) did in the started environment `env`, as an outcome
    with no request, no token and no tool call. A solution that fails is said, not
    judged: the verifier grades what it left, as Harbor does."""
    began = time.monotonic()
    if t.agent == "nop":
        return _outcome(RunStatus.COMPLETED, "nop: did nothing", None, began)
    assert t.suite is not None and t.suite.solution is not None  # the config pass checked
    sol = t.suite.solution
    try:
        if sol.script is not None:
            await env.put_dir(sol.script.parent, "/solution")
            res = await env.exec(
                ["bash", f"/solution/{sol.script.name}"],
                cwd=env.workdir,
                env={**dict(t.suite.environment.env), **dict(sol.env)},
                timeout_s=t.limits.timeout_s,
            )
            what = f"oracle: ran {sol.script.name}"
        else:
            assert sol.patch is not None
            await env.write_file(GOLD_PATCH_AT, sol.patch.encode("utf-8", "surrogateescape"))
            res = await env.exec(
                ["bash", "-c", _APPLY],
                cwd=env.workdir,
                timeout_s=t.limits.timeout_s,
            )
            await env.remove_file(GOLD_PATCH_AT)
            what = "oracle: applied the gold patch"
    except UnsafeFileError as exc:
        raise EnvironmentFault(f"oracle could not copy the solution in: {exc}") from None
    emit({"type": "note", "message": f"{what}: exit {res.exit_code}"})
    if res.timed_out:
        return _outcome(RunStatus.TIMEOUT, what, f"timed out after {t.limits.timeout_s:g} s", began)
    return _outcome(RunStatus.COMPLETED, _said(what, res), None, began)


_APPLY = f"""git apply --verbose {GOLD_PATCH_AT} \\
  || git apply --verbose --3way {GOLD_PATCH_AT} \\
  || patch --batch --forward --fuzz=5 -p1 -i {GOLD_PATCH_AT}"""
"""The official harness's order of tries for a patch."""


def _said(what: str, res: ExecResult) -> str:
    tail = res.output.decode("utf-8", "replace").strip()[-OUTPUT_TAIL:]
    return f"{what} (exit {res.exit_code})" + (f"\n\n{tail}" if tail else "")


def _outcome(status: RunStatus, said: str, error: str | None, began: float) -> Outcome:
    return Outcome(
        status=status,
        final_message=said,
        error=error,
        history=(),
        requests=(),
        usage=Usage(),
        tool_calls=0,
        turns_completed=0,
        duration_s=time.monotonic() - began,
    )
