"""`list_suite`: one door to the three format readers, each given only what it takes."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.errors import ConfigError
from runner.suites.model import SuiteFormat
from runner.suites.read import list_suite
from tests.support import paths
from tests.support.suites import SWE_INSTANCES

SUITES = paths.FIXTURES / "suites"


@pytest.mark.parametrize(
    ("fmt", "path", "ids"),
    [
        ("harbor", SUITES / "harbor", ["broken-verifier", "hello"]),
        ("terminal-bench", SUITES / "terminal-bench", ["broken-verifier", "hello"]),
        ("swe-bench", SWE_INSTANCES, ["runner-fixtures__tinycalc-1"]),
    ],
)
def test_each_format_lists_its_tasks_by_id(fmt: SuiteFormat, path: Path, ids: list[str]) -> None:
    listing = list_suite(fmt, path)
    assert [t.id for t in listing.tasks] == ids
    task, problems = listing.tasks[-1].read()
    assert problems == [] and task is not None and task.format == fmt


def test_the_templates_reach_the_swe_bench_reader() -> None:
    (listed,) = list_suite(
        "swe-bench",
        SWE_INSTANCES,
        prompt_template="Fix {instance_id}",
        image_template="reg.example/{instance_id}:v1",
    ).tasks
    task, _ = listed.read()
    assert task is not None and task.instruction == "Fix runner-fixtures__tinycalc-1"
    assert task.environment.image == "reg.example/runner-fixtures__tinycalc-1:v1"


@pytest.mark.parametrize("fmt", ["harbor", "terminal-bench", "swe-bench"])
def test_a_path_that_is_no_suite_is_a_config_error_naming_it(
    fmt: SuiteFormat, tmp_path: Path
) -> None:
    missing = tmp_path / "nothing-here"
    with pytest.raises(ConfigError) as err:
        list_suite(fmt, missing)
    assert err.value.problems and all(str(missing) in str(p) for p in err.value.problems)


def test_a_bad_template_is_refused_before_any_instance_is_read() -> None:
    with pytest.raises(ConfigError, match="prompt_template"):
        list_suite("swe-bench", SWE_INSTANCES, prompt_template="Fix {no_such_field}")
