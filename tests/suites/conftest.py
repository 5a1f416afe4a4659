"""Fixtures more than one suites test module uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.suites.model import SuiteTask
from runner.suites.swe_bench import read_swe_bench
from runner.suites.swe_grading import swebench_problem
from tests.support.suites import SWE_INSTANCES


@pytest.fixture(scope="module")
def swe_task() -> SuiteTask:
    """The fixture's one SWE-bench task; the dev lock installs swebench's grading, so its
    absence is a failure, not a skip."""
    if (problem := swebench_problem()) is not None:
        pytest.fail(f"the dev lock installs swebench's grading: {problem}")
    return read_swe_bench(SWE_INSTANCES, build_dir=Path("."))[0]
