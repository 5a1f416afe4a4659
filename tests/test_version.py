"""The version is written once: the distribution, `runner.__version__` and every report
read the same string, and it is one pip and PyPI accept."""

from __future__ import annotations

import tomllib

from packaging.version import Version

import runner
from runner.reports.inputs import runner_identity
from runner.version import VERSION
from tests.support import paths


def test_the_distribution_reads_its_version_from_this_module() -> None:
    project = tomllib.loads((paths.ROOT / "pyproject.toml").read_text())
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "runner.version.VERSION"}


def test_the_package_and_the_reports_name_the_same_version() -> None:
    assert runner.__version__ == VERSION
    assert runner_identity()["version"] == VERSION


def test_the_version_is_a_canonical_pep_440_one() -> None:
    assert str(Version(VERSION)) == VERSION
