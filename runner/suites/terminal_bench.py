"""Terminal-Bench 1.x task folders read as `SuiteTask`s.

A task is `task.yaml` (the instruction and timeouts), a `Dockerfile` or a one-service
`docker-compose.yaml`, `run-tests.sh` with `tests/` (copied to `/tests` after the agent's
phase and run as `bash /tests/run-tests.sh`, graded by pytest's short summary) and
`solution.sh` for the oracle. What runner cannot run as Terminal-Bench would is refused,
located: `solution.yaml` (a tmux keystroke script), tests in the agent's own shell, a
parser other than pytest, a compose file that is more than one plain container."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runner.errors import Problem
from runner.suites import bounds
from runner.suites.compose import ComposeService, reduce_compose
from runner.suites.folder import TaskFolder, apart, dockerfile_workdir, list_tasks
from runner.suites.model import Solution, SuiteEnvironment, SuiteListing, SuiteTask, Verifier
from runner.suites.yaml_text import KeyPath, dotted, line_of, load_yaml

AGENT_TIMEOUT_S = 360.0
TEST_TIMEOUT_S = 60.0
TESTS_AT = "/tests"
DEFAULT_WORKDIR = "/app"

HARNESS_VARIABLES = {
    "T_BENCH_TEST_DIR": TESTS_AT,
    "T_BENCH_CONTAINER_LOGS_PATH": "/logs",
    "T_BENCH_CONTAINER_AGENT_LOGS_PATH": "/agent-logs",
}
"""What Terminal-Bench's harness sets for a compose file and means inside the container."""
_COMPOSE_NAMES = ("docker-compose.yaml", "docker-compose.yml")
LOG_MOUNTS = frozenset({"${T_BENCH_TASK_LOGS_PATH}", "${T_BENCH_TASK_AGENT_LOGS_PATH}"})

_METADATA = (
    "difficulty",
    "category",
    "author_name",
    "estimated_duration_sec",
    "expert_time_estimate_min",
    "junior_time_estimate_min",
)
_ACCEPTED = {
    "instruction",
    "author_email",
    "tags",
    "parser_name",
    "max_agent_timeout_sec",
    "max_test_timeout_sec",
    "run_tests_in_same_shell",
    "disable_asciinema",  # recording only: runner records its own transcript
    *_METADATA,
}


def read_terminal_bench(path: Path, variables: Mapping[str, str] | None = None) -> list[SuiteTask]:
    """Every task under `path` (a task folder, or a folder of them), or one ConfigError
    listing every problem of every task. `variables` fill `${VAR}` in compose files."""
    return list_terminal_bench(path, variables).read_all()


def list_terminal_bench(path: Path, variables: Mapping[str, str] | None = None) -> SuiteListing:
    """The tasks under `path` by folder name, each read only when asked."""
    given = dict(variables or {})
    return list_tasks(
        path, "task.yaml", "Terminal-Bench", lambda folder: _read_task(folder, given), _tags
    )


def _tags(root: Path) -> tuple[tuple[str, ...], list[Problem]]:
    """The task's `tags:` from its task.yaml alone: what `select: {tags: ...}` needs."""
    folder = TaskFolder(root)
    doc = _parsed(folder)
    if doc is None:
        return (), folder.problems
    return doc.tags(), folder.problems


def _parsed(folder: TaskFolder) -> _Yaml | None:
    """task.yaml read and parsed to a mapping; None (its problem kept) when it cannot be."""
    text = folder.text("task.yaml")
    if text is None:
        if not folder.problems:
            folder.refuse("task.yaml", None, "(file)", "missing")
        return None
    data, lines, problems = load_yaml(text, str(folder.root / "task.yaml"))
    if problems:
        folder.problems += problems
        return None
    if not isinstance(data, dict):
        folder.refuse("task.yaml", 1, "(top level)", "must be a mapping with `instruction:`")
        return None
    return _Yaml(folder, data, lines)


class _Yaml:
    def __init__(self, folder: TaskFolder, data: dict[str, Any], lines: dict[KeyPath, int]):
        self.folder = folder
        self.data = data
        self.lines = lines

    def refuse(self, key: str, message: str) -> None:
        path: KeyPath = (key,)
        self.folder.refuse("task.yaml", line_of(path, self.lines), dotted(path), message)

    def tags(self) -> tuple[str, ...]:
        tags = self.data.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            self.refuse("tags", "must be a list of strings")
            return ()
        return tuple(tags)

    def seconds(self, key: str, default: float, most: float) -> float:
        value = self.data.get(key, default)
        wrong = bounds.seconds_problem(value, most)
        if wrong is not None:
            if isinstance(value, str) and _E_NOTATION.fullmatch(value.strip()):
                wrong += (
                    "; YAML 1.1 reads a number in e-notation as text unless it has a '.' "
                    "and a signed exponent: write 1.0e+3, or the number in full"
                )
            self.refuse(key, wrong)
            return default
        return float(value)


_E_NOTATION = re.compile(r"[-+]?([0-9][0-9_]*(\.[0-9_]*)?|\.[0-9][0-9_]*)[eE][-+]?[0-9]+")


def _read_task(root: Path, variables: dict[str, str]) -> tuple[SuiteTask | None, list[Problem]]:
    folder = TaskFolder(root)
    doc = _parsed(folder)
    if doc is None:
        return None, folder.problems
    data = doc.data
    for key in data:
        if str(key) not in _ACCEPTED:
            doc.refuse(str(key), "unknown field; allowed: " + ", ".join(sorted(_ACCEPTED)))
    instruction = data.get("instruction")
    if not isinstance(instruction, str) or not instruction.strip():
        doc.refuse("instruction", "required: the task's instruction, as text")
    parser = data.get("parser_name", "pytest")
    if parser != "pytest":
        doc.refuse("parser_name", "only `pytest` is supported")
    if data.get("run_tests_in_same_shell", False) is not False:
        doc.refuse(
            "run_tests_in_same_shell",
            "only `false` is supported: runner runs the tests in a fresh shell after the "
            "agent's phase, never in the agent's own",
        )
    tags = doc.tags()
    agent_s = doc.seconds("max_agent_timeout_sec", AGENT_TIMEOUT_S, bounds.MAX_AGENT_S)
    test_s = doc.seconds("max_test_timeout_sec", TEST_TIMEOUT_S, bounds.MAX_VERIFY_S)
    environment = _environment(folder, variables)
    verifier = _verifier(folder, test_s)
    solution, solution_problems = apart(folder, lambda: _solution(folder))
    if folder.problems or environment is None or verifier is None:
        return None, folder.problems
    metadata = tuple((key, str(data[key])) for key in _METADATA if data.get(key) not in (None, ""))
    return (
        SuiteTask(
            id=root.name,
            format="terminal-bench",
            source=root,
            instruction=str(instruction),
            environment=environment,
            verifier=verifier,
            solution=None if solution_problems else solution,
            agent_timeout_s=agent_s,
            tags=tags,
            metadata=metadata,
            solution_problems=solution_problems,
        ),
        [],
    )


def _environment(folder: TaskFolder, variables: dict[str, str]) -> SuiteEnvironment | None:
    service: ComposeService | None = None
    name = next((n for n in _COMPOSE_NAMES if folder.lexists(n)), None)
    compose = folder.text(name) if name else None
    if name is not None and compose is not None:
        service, problems = reduce_compose(
            compose,
            str(folder.root / name),
            {**variables, **HARNESS_VARIABLES},
            log_mounts=LOG_MOUNTS,
        )
        folder.problems += problems
    if name is not None and service is None:
        return None
    env = service.env if service else ()
    if service is not None and service.context is None and service.image is not None:
        # a named image, nothing built
        return SuiteEnvironment(
            image=service.image, workdir=service.working_dir or DEFAULT_WORKDIR, env=env
        )
    dockerfile = folder.text("Dockerfile")
    if dockerfile is None:
        if not folder.problems:
            folder.refuse(
                "Dockerfile", None, "(file)", "missing: the task's image is built from it"
            )
        return None
    if folder.folder(".") is None:  # the build context: no link out of the task
        return None
    workdir = (service.working_dir if service else None) or dockerfile_workdir(dockerfile)
    return SuiteEnvironment(build_dir=folder.root, workdir=workdir or DEFAULT_WORKDIR, env=env)


def _verifier(folder: TaskFolder, timeout_s: float) -> Verifier | None:
    run_tests = folder.file("run-tests.sh")
    if run_tests is None:
        if not folder.lexists("run-tests.sh"):
            folder.refuse("run-tests.sh", None, "(file)", "missing: it runs the task's tests")
        return None
    tests = folder.folder("tests")
    return Verifier(
        grading="pytest-summary",
        tests_dir=tests,
        command=("bash", f"{TESTS_AT}/run-tests.sh"),
        tests_at=TESTS_AT,
        timeout_s=timeout_s,
        env=(("TEST_DIR", TESTS_AT),),
        extra_files=((run_tests, f"{TESTS_AT}/run-tests.sh"),),
    )


def _solution(folder: TaskFolder) -> Solution | None:
    script = folder.file("solution.sh")
    if script is not None:
        return Solution(script=script)
    if folder.lexists("solution.yaml"):
        folder.refuse(
            "solution.yaml",
            None,
            "(file)",
            "not supported: it scripts keystrokes into Terminal-Bench's tmux session; give "
            "the solution as solution.sh",
        )
    return None
