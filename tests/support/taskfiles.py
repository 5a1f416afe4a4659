"""A task file parsed from text, and the located problems of one that fails: the two
helpers of the config tests that feed the loader a snippet."""

from __future__ import annotations

import pytest

from runner.config import TaskFile, parse_task_file
from runner.errors import ConfigError, Problem


def parse(text: str) -> TaskFile:
    return parse_task_file(text, "t.yaml")


def problems(text: str) -> list[Problem]:
    """The problems `parse` reports; the test fails if the text loads."""
    with pytest.raises(ConfigError) as info:
        parse(text)
    return info.value.problems
