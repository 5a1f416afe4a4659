"""Fixtures more than one suites test module uses."""

from __future__ import annotations

import pytest

from runner.suites.model import SuiteTask
from tests.support.suites import swe_fixture_task


@pytest.fixture(scope="module")
def swe_task() -> SuiteTask:
    """The fixture's one SWE-bench task (`swe_fixture_task`)."""
    return swe_fixture_task()
