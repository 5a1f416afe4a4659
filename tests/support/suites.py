"""A task file beside copies of the suites written for the tests (harbor/, tb/), and the
SWE-bench fixture's instance as a task."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from runner.suites.model import SuiteTask
from runner.suites.swe_bench import read_swe_bench
from runner.suites.swe_grading import swebench_problem
from tests.support import paths

HEAD = """version: 1
providers:
  p: {base_url: "http://127.0.0.1:9/v1"}
defaults:
  model: p/m
"""
"""A provider nobody listens on: these task files are read, never run."""


def suite_task_file(tmp_path: Path, text: str) -> Path:
    """`tasks.yaml` (HEAD + `text`) in `tmp_path`, with the fixture suites copied beside
    it as `harbor/` and `tb/`."""
    shutil.copytree(paths.FIXTURES / "suites" / "harbor", tmp_path / "harbor")
    shutil.copytree(paths.FIXTURES / "suites" / "terminal-bench", tmp_path / "tb")
    path = tmp_path / "tasks.yaml"
    path.write_text(HEAD + text)
    return path


SWE_BENCH = paths.FIXTURES / "suites" / "swe-bench"
"""The SWE-bench fixture: tinycalc's instance, its image's folder and recorded test logs."""
SWE_INSTANCES = SWE_BENCH / "instances.jsonl"
SWE_LOGS = SWE_BENCH / "logs"


def swe_fixture_task() -> SuiteTask:
    """The fixture's instance, for grading its logs; the dev lock installs the swebench
    package that grades them, so its absence fails the test rather than skipping it."""
    if (problem := swebench_problem()) is not None:
        pytest.fail(f"the dev lock installs swebench's grading: {problem}")
    return read_swe_bench(SWE_INSTANCES, build_dir=Path("."))[0]
