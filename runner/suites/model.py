"""What a benchmark suite's task is, whatever format it came in (issue 27).

Each format reader (harbor.py, terminal_bench.py, swe_bench.py) turns its folders or
instances into `SuiteTask`s; the task file's `suites:` entries expand them into ordinary
runs, and the verifier grades a run by the task's `Verifier`. Readers are pure of runs and
models: they read the suite's files (bounded, never following a link out of the suite)
and say what they refuse with a `Problem` naming the file, line and field.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

from runner.errors import ConfigError, Problem
from runner.frozen import frozen

SuiteFormat = Literal["harbor", "terminal-bench", "swe-bench"]

Grading = Literal["reward-file", "pytest-summary", "swe-bench"]
"""How a verifier's result is read:
- `reward-file`: Harbor's `/logs/verifier/reward.json` (named floats) or `reward.txt` (one
  float); neither is an error, and the script's exit code is ignored;
- `pytest-summary`: Terminal-Bench's test run; resolved (reward 1) when every test in
  pytest's short summary passed, else 0;
- `swe-bench`: the instance's FAIL_TO_PASS and PASS_TO_PASS ids graded from the test log
  as the official harness grades them (resolved, partial or not)."""


@frozen
class SuiteEnvironment:
    """Where the task's work is: an image by name, or a folder with a Dockerfile."""

    image: str | None = None
    build_dir: Path | None = None
    workdir: str = "/app"
    cpus: float | None = None
    memory_mb: int | None = None
    network: Literal["none", "bridge"] = "none"
    """The agent phase's network; `none` unless the task asks for more."""
    env: tuple[tuple[str, str], ...] = ()
    user: str | None = None


@frozen
class Verifier:
    """How a finished run is graded, after the agent's phase and out of its sight."""

    grading: Grading
    tests_dir: Path | None
    """Copied into the environment at `tests_at` only once the agent has finished."""
    command: tuple[str, ...]
    """What runs the tests inside the environment (e.g. `bash /tests/test.sh`)."""
    tests_at: str = "/tests"
    timeout_s: float = 600.0
    env: tuple[tuple[str, str], ...] = ()
    user: str | None = None
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    test_patch: str | None = None
    """SWE-bench: applied before the tests run."""
    extra_files: tuple[tuple[Path, str], ...] = ()
    """Files copied in beside the tests (host path, path inside), e.g. Terminal-Bench's
    `run-tests.sh`, which lives beside `tests/` but runs as `/tests/run-tests.sh`."""
    repo: str | None = None
    """SWE-bench: `owner/name` (some grading rules go by repo: FAIL_ONLY_REPOS)."""
    log_parser: str | None = None
    """SWE-bench: the name of the official log parser in swebench's `PARSER_REGISTRY`
    (swebench 5 names it per instance instead of deriving it from the repo)."""
    eval_type: str | None = None
    """SWE-bench: `pass_and_fail` or `fail_only`; None → by repo, as the harness does."""


@frozen
class Solution:
    """What `agent: oracle` does instead of a model."""

    script: Path | None = None
    """A folder's `solve.sh` (Harbor `solution/`, Terminal-Bench `solution.sh`), copied to
    `/solution` and run with bash."""
    patch: str | None = None
    """SWE-bench's gold `patch`, applied in the workdir."""
    env: tuple[tuple[str, str], ...] = ()
    """Harbor's `[solution].env`: set for the solution script only."""


@frozen
class SuiteTask:
    id: str
    format: SuiteFormat
    source: Path
    """The task's folder, or the instances file."""
    instruction: str
    environment: SuiteEnvironment
    verifier: Verifier
    solution: Solution | None = None
    agent_timeout_s: float | None = None
    build_timeout_s: float | None = None
    tags: tuple[str, ...] = ()
    metadata: tuple[tuple[str, str], ...] = ()
    """What the format says about the task that runner does not use (difficulty,
    category, SWE-bench's repo and version), kept for the report."""
    solution_problems: tuple[Problem, ...] = ()
    """Why the task has no solution runner can run (Terminal-Bench's `solution.yaml`):
    refused for `agent: oracle` only, since a model or nop never runs the solution."""


Read = Callable[[], tuple[SuiteTask | None, list[Problem]]]


@frozen
class Listed:
    """A task as its suite names it, before its files are read in full: selection is
    decided on this, so a task that is not selected never has to be one runner reads."""

    id: str
    tags: Callable[[], tuple[tuple[str, ...], list[Problem]]]
    """The suite's own tags, read from as little as gives them (task.toml's tables)."""
    read: Read


@frozen
class SuiteListing:
    tasks: tuple[Listed, ...]
    """Every task the suite names, in its order, whether or not runner can read it."""
    unlisted: tuple[Problem, ...] = ()
    """What the suite holds that names no task (a folder without the format's marker
    file, an instance without a usable id): a problem when the whole suite is wanted."""

    def read_all(self) -> list[SuiteTask]:
        """Every task, or one ConfigError listing every problem of every task: a user
        fixes a whole suite in one pass, not one task a run. Solution problems count."""
        tasks, problems = [], list(self.unlisted)
        for listed in self.tasks:
            task, found = listed.read()
            problems += found
            if task is not None:
                problems += task.solution_problems
                tasks.append(task)
        if problems:
            raise ConfigError(problems)
        return tasks
