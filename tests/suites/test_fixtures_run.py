"""The fixture suites work as their formats mean them to, proven by hand with the real
container environment (podman): each image built from its Dockerfile, the solution or
nothing run, then the tests copied in after and graded. The oracle solves `hello` and
nothing does not; `broken-verifier` leaves nothing to grade.

This is the verifier's flow written out in a test, not runner's verifier (which the
`suites:` work brings); it keeps the fixtures honest meanwhile."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from runner.errors import VerifierFailed
from runner.sandbox.container import ContainerEnvironment
from runner.sandbox.engine import Engine
from runner.sandbox.images import Builder
from runner.sandbox.orphans import live_batch
from runner.suites.grading import pytest_summary, reward_from_files
from runner.suites.harbor import read_harbor
from runner.suites.model import SuiteTask
from runner.suites.terminal_bench import read_terminal_bench
from tests.support.environments import base_image, engine_answers

FIXTURES = Path(__file__).parent.parent / "fixtures" / "suites"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.anyio,
    pytest.mark.timeout(900),
    pytest.mark.skipif(not engine_answers("podman"), reason="podman is not answering"),
]


@asynccontextmanager
async def environment(engine: Engine, task: SuiteTask) -> AsyncIterator[ContainerEnvironment]:
    assert task.environment.build_dir is not None
    image = await Builder(engine, network="none").image(task.environment.build_dir)
    batch_id = f"test-{uuid.uuid4().hex[:12]}"
    with live_batch(batch_id):
        env = ContainerEnvironment(
            engine=engine,
            image=image,
            workdir=task.environment.workdir,
            batch_id=batch_id,
            run_name=task.id,
            network=task.environment.network,
            cpus=task.environment.cpus,
            memory_mb=task.environment.memory_mb,
        )
        try:
            await env.start()
            yield env
        finally:
            with anyio.CancelScope(shield=True):
                await env.stop()


async def run_task(engine: Engine, task: SuiteTask, *, oracle: bool) -> tuple[int, bytes]:
    """The solution (oracle) or nothing (nop), then the verifier: its exit and output."""
    async with environment(engine, task) as env:
        base = dict(task.environment.env)
        if oracle:
            assert task.solution is not None and task.solution.script is not None
            await env.put_dir(task.solution.script.parent, "/solution")
            name = task.solution.script.name
            done = await env.exec(
                ["bash", f"/solution/{name}"],
                env={**base, **dict(task.solution.env)},
                timeout_s=60,
            )
            assert done.exit_code == 0, done.output
        verifier = task.verifier
        assert verifier.tests_dir is not None
        await env.put_dir(verifier.tests_dir, verifier.tests_at)
        for host, inside in verifier.extra_files:
            await env.write_file(inside, host.read_bytes())
        done = await env.exec(
            list(verifier.command),
            env={**base, **dict(verifier.env)},
            timeout_s=verifier.timeout_s,
        )
        assert not done.timed_out
        if verifier.grading == "reward-file":
            reward_json = await env.read_file("/logs/verifier/reward.json", max_bytes=1 << 16)
            reward_txt = await env.read_file("/logs/verifier/reward.txt", max_bytes=1 << 16)
            return done.exit_code, (reward_json or b"") + b"\0" + (reward_txt or b"")
        return done.exit_code, done.output


def harbor_reward(blob: bytes) -> float | None:
    reward_json, reward_txt = blob.split(b"\0", 1)
    return reward_from_files(reward_json or None, reward_txt or None).value


async def test_the_harbor_fixtures() -> None:
    engine = Engine("podman")
    await base_image(engine)
    tasks = {t.id: t for t in read_harbor(FIXTURES / "harbor")}
    _, blob = await run_task(engine, tasks["hello"], oracle=True)
    assert harbor_reward(blob) == 1.0
    _, blob = await run_task(engine, tasks["hello"], oracle=False)
    assert harbor_reward(blob) == 0.0
    code, blob = await run_task(engine, tasks["broken-verifier"], oracle=True)
    assert code == 3
    with pytest.raises(VerifierFailed, match="neither"):
        harbor_reward(blob)


async def test_the_terminal_bench_fixtures() -> None:
    engine = Engine("podman")
    await base_image(engine)
    tasks = {t.id: t for t in read_terminal_bench(FIXTURES / "terminal-bench")}
    code, log = await run_task(engine, tasks["hello"], oracle=True)
    assert (code, pytest_summary(log.decode())) == (0, (2, 0, True))
    code, log = await run_task(engine, tasks["hello"], oracle=False)
    assert (code, pytest_summary(log.decode())) == (1, (0, 2, False))
    code, log = await run_task(engine, tasks["broken-verifier"], oracle=True)
    assert code == 2
    with pytest.raises(VerifierFailed, match="short test summary"):
        pytest_summary(log.decode())
