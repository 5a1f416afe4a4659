"""The agents that call no model: `nop` leaves the environment as it found it at no cost,
and `oracle` brings in the task's own solution; a solution the environment refuses to take
is the environment's fault (the run is an error naming it), never a score."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from runner.config import Run, load
from runner.errors import EnvironmentFault
from runner.items import Usage
from runner.sandbox.local import LocalExecutor
from runner.sandbox.localenv import LocalEnvironment
from runner.sandbox.policy import PROTECTED_NAMES
from runner.sanity import run_sanity_agent
from runner.vocabulary import RunStatus
from tests.support import paths

pytestmark = pytest.mark.anyio

SUITES = paths.FIXTURES / "suites"


def _run(tmp_path: Path, agent: str, entry: str) -> Run:
    shutil.copytree(SUITES / "harbor", tmp_path / "harbor")
    shutil.copytree(SUITES / "swe-bench", tmp_path / "swe")
    path = tmp_path / "tasks.yaml"
    path.write_text(
        "version: 1\nproviders:\n  p: {base_url: 'http://127.0.0.1:9/v1'}\n"
        f"defaults: {{model: p/m}}\nsuites:\n  - {{{entry}, agent: {agent}}}\n"
    )
    (run,) = load(path, offline=True).runs
    assert run.agent == agent
    return run


HELLO = "format: harbor, path: harbor, select: {ids: [hello]}"
SWE = "format: swe-bench, path: swe/instances.jsonl, environment: {build: swe}"


def _host_env(tmp_path: Path) -> LocalEnvironment:
    """An environment over a host folder: it refuses every path outside it, as the
    solution's `/solution` and the gold patch's place are."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "kept.txt").write_text("as it was\n")
    return LocalEnvironment(LocalExecutor(), work, protected=PROTECTED_NAMES)


async def test_nop_does_nothing_at_no_cost(tmp_path: Path) -> None:
    env = _host_env(tmp_path)
    said: list[dict[str, Any]] = []
    got = await run_sanity_agent(_run(tmp_path, "nop", HELLO), env, said.append)
    assert (got.status, got.final_message, got.error) == (
        RunStatus.COMPLETED,
        "nop: did nothing",
        None,
    )
    assert got.usage == Usage() and got.requests == () and got.history == ()
    assert (got.tool_calls, got.turns_completed) == (0, 0) and 0 <= got.duration_s < 1
    assert said == []
    assert [p.name async for p in anyio.Path(env.workdir).iterdir()] == ["kept.txt"]


@pytest.mark.parametrize(
    ("entry", "what"), [(HELLO, "solve.sh"), (SWE, "gold patch")], ids=["script", "patch"]
)
async def test_a_solution_the_environment_refuses_is_its_fault(
    tmp_path: Path, entry: str, what: str
) -> None:
    t = _run(tmp_path, "oracle", entry)
    assert t.suite is not None and t.suite.solution is not None
    assert (t.suite.solution.script is None) == (what == "gold patch")
    said: list[dict[str, Any]] = []
    with pytest.raises(EnvironmentFault, match="^oracle could not copy the solution in: "):
        await run_sanity_agent(t, _host_env(tmp_path), said.append)
    assert said == []  # nothing ran
