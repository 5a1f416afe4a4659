"""A suite's listing read in full: every task, or one error with every problem of all."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.errors import ConfigError, Problem
from runner.suites.model import (
    Listed,
    Read,
    SuiteEnvironment,
    SuiteListing,
    SuiteTask,
    Verifier,
)


def task(name: str, *solution_problems: Problem) -> SuiteTask:
    return SuiteTask(
        id=name,
        format="harbor",
        source=Path(name),
        instruction="do it",
        environment=SuiteEnvironment(image="alpine:3"),
        verifier=Verifier("reward-file", None, ("bash", "/tests/test.sh")),
        solution_problems=solution_problems,
    )


def listed(name: str, read: Read) -> Listed:
    return Listed(name, lambda: ((), []), read)


def test_a_clean_listing_reads_every_task_in_order() -> None:
    listing = SuiteListing(
        (listed("b", lambda: (task("b"), [])), listed("a", lambda: (task("a"), [])))
    )
    assert [t.id for t in listing.read_all()] == ["b", "a"]


def test_every_problem_of_every_task_comes_in_one_error() -> None:
    """Unlisted folders first, then each task's own and its solution's, in suite order."""
    stray = Problem("suite/x", None, "(folder)", "not a harbor task")
    bad = Problem("suite/a/task.toml", 3, "verifier.timeout_sec", "must be a number")
    solution = Problem("suite/b/solution.yaml", None, "(file)", "not supported")
    listing = SuiteListing(
        (
            listed("a", lambda: (None, [bad])),
            listed("b", lambda: (task("b", solution), [])),
            listed("c", lambda: (task("c"), [])),
        ),
        (stray,),
    )
    with pytest.raises(ConfigError) as err:
        listing.read_all()
    assert err.value.problems == [stray, bad, solution]
    assert str(err.value).splitlines()[1] == (
        "suite/a/task.toml:3: verifier.timeout_sec: must be a number"
    )


def test_a_task_is_read_only_when_asked() -> None:
    reads: list[str] = []

    def read() -> tuple[SuiteTask | None, list[Problem]]:
        reads.append("a")
        return task("a"), []

    listing = SuiteListing((listed("a", read),))
    assert reads == []
    listing.read_all()
    assert reads == ["a"]


def test_a_task_that_asks_for_nothing_gets_no_network_and_the_usual_places() -> None:
    env, verifier = SuiteEnvironment(), Verifier("pytest-summary", None, ("bash", "t.sh"))
    assert (env.network, env.workdir, env.image, env.build_dir) == ("none", "/app", None, None)
    assert (verifier.tests_at, verifier.timeout_s, verifier.test_patch) == ("/tests", 600.0, None)
