"""SWE-bench test logs graded by the swebench package's own grading (`grade_swe_log`).

The fixture's logs under `logs/` were recorded by running tinycalc's eval script in the
fixture's image (the slow test at the end does the same and grades live): two FAIL_TO_PASS
and five PASS_TO_PASS unittest ids, read by swebench's `parse_log_django`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runner.suites.model import SuiteTask
from runner.suites.swe_bench import read_swe_bench
from runner.suites.swe_grading import SweGrade, default_log_parser, grade_swe_log
from tests.support import paths
from tests.support.suites import SWE_BENCH as FIXTURE
from tests.support.suites import SWE_INSTANCES as INSTANCES
from tests.support.suites import SWE_LOGS as LOGS

GOOD: dict[str, Any] = json.loads(INSTANCES.read_text())
F2P = tuple(json.loads(GOOD["FAIL_TO_PASS"]))
P2P = tuple(json.loads(GOOD["PASS_TO_PASS"]))


def test_the_gold_patch_is_resolved(swe_task: SuiteTask) -> None:
    grade = grade_swe_log((LOGS / "gold.log").read_text(), swe_task)
    assert grade == SweGrade("resolved", True, (F2P, ()), (P2P, ()))
    assert grade.reward == 1.0


def test_half_a_fix_is_partial(swe_task: SuiteTask) -> None:
    grade = grade_swe_log((LOGS / "partial.log").read_text(), swe_task)
    assert grade.resolution == "partial" and grade.tests_ran and grade.reward == 0.0
    assert grade.fail_to_pass == ((F2P[0],), (F2P[1],)) and grade.pass_to_pass == (P2P, ())


def test_no_change_is_not_resolved(swe_task: SuiteTask) -> None:
    grade = grade_swe_log((LOGS / "nop.log").read_text(), swe_task)
    assert grade == SweGrade("not", True, ((), F2P), (P2P, ()))


def test_a_broken_maintained_test_is_not_resolved(swe_task: SuiteTask) -> None:
    """A fix that breaks a PASS_TO_PASS test is not even partial (the official rule)."""
    log = (LOGS / "gold.log").read_text()
    broken = log.replace(f"{P2P[0]} ... ok", f"{P2P[0]} ... FAIL")
    assert broken != log
    grade = grade_swe_log(broken, swe_task)
    assert grade.resolution == "not" and grade.pass_to_pass == (P2P[1:], P2P[:1])


def test_a_log_without_its_markers_or_with_a_failed_apply_is_not_graded(
    swe_task: SuiteTask,
) -> None:
    log = (LOGS / "gold.log").read_text()
    for bad in (
        log.replace(">>>>> End Test Output", ""),
        ">>>>> Patch Apply Failed\n" + log,
        # The recorded exit status says the tests failed, the log says all passed.
        log.replace(">>>>> Test Exit Code: 0", ">>>>> Test Exit Code: 1"),
        "",
    ):
        assert grade_swe_log(bad, swe_task) == SweGrade("not", False), bad[-300:]


def test_the_same_log_grades_the_same_twice(swe_task: SuiteTask) -> None:
    for name in ("gold", "partial", "nop"):
        log = (LOGS / f"{name}.log").read_text()
        assert grade_swe_log(log, swe_task) == grade_swe_log(log, swe_task)


def test_grading_does_not_load_the_harness_heavy_dependencies(swe_task: SuiteTask) -> None:
    """What the package's harness __init__ would import (docker, datasets, modal) and the
    `.env` it would load are not touched; a fresh interpreter proves it."""
    code = (
        "import sys, json\n"
        "from pathlib import Path\n"
        "from runner.suites.swe_bench import read_swe_bench\n"
        "from runner.suites.swe_grading import grade_swe_log\n"
        f"task = read_swe_bench(Path({str(INSTANCES)!r}))[0]\n"
        f"print(grade_swe_log(Path({str(LOGS / 'gold.log')!r}).read_text(), task).resolution)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('docker', 'datasets', 'modal', 'dotenv', 'tqdm'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True,
        timeout=120, check=True, cwd=paths.ROOT,
    )  # fmt: skip
    assert done.stdout.split("\n")[:2] == ["resolved", "[]"], done.stderr


def test_the_default_parser_is_the_package_s_for_the_repo_and_none_for_a_stranger() -> None:
    assert default_log_parser("django/django") == "parse_log_django"
    assert default_log_parser("pytest-dev/pytest") == "parse_log_pytest"
    assert default_log_parser("nobody/nothing-at-all") is None


# -- live, in the fixture's image ----------------------------------------------------------

VERIFY_ENV = {"TZ": "UTC", "LC_ALL": "C.UTF-8", "PYTHONHASHSEED": "0"}


async def verify_in_image(patch: str | None) -> str:
    """The official flow on the fixture's image: the prediction applied in /testbed, then
    the instance's eval script; its whole output is the log."""
    from runner.sandbox.container import ContainerEnvironment
    from runner.sandbox.engine import Engine
    from runner.sandbox.images import Builder
    from tests.support.environments import base_image

    engine = Engine("podman")
    await base_image(engine)
    tag = await Builder(engine, network="none").image(FIXTURE)
    (task,) = read_swe_bench(INSTANCES, build_dir=Path("."))
    env = ContainerEnvironment(
        engine=engine, image=tag, workdir="/testbed", batch_id="swe-bench", run_name="tinycalc"
    )
    await env.start()
    try:
        if patch is not None:
            applied = await env.exec(
                ["git", "apply", "--verbose", "-"], stdin=patch.encode(), timeout_s=60
            )
            assert applied.exit_code == 0, applied.output
        done = await env.exec(list(task.verifier.command), env=VERIFY_ENV, timeout_s=300)
        assert not done.timed_out
        return done.output.decode()
    finally:
        await env.stop()


@pytest.mark.anyio
@pytest.mark.timeout(900)
@pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman")
async def test_gold_partial_and_nop_graded_live_in_the_fixture_image(swe_task: SuiteTask) -> None:
    patches = {
        "gold": GOOD["patch"],
        "partial": (FIXTURE / "partial.diff").read_text(),
        "nop": None,
    }
    want = {"gold": "resolved", "partial": "partial", "nop": "not"}
    for name, patch in patches.items():
        log = await verify_in_image(patch)
        if os.environ.get("RUNNER_RECORD_SWE_LOGS") == "1":
            (LOGS / f"{name}.log").write_text(log)
        assert grade_swe_log(log, swe_task).resolution == want[name], log
        # Recorded from the same run: only the time unittest reports may differ.
        assert _untimed(log) == _untimed((LOGS / f"{name}.log").read_text())


def _untimed(log: str) -> str:
    return "\n".join(line for line in log.splitlines() if not line.startswith("Ran "))
