"""Terminal-Bench 1.x task folders read into `SuiteTask`s: the fixtures, the compose
file reduced to one container or refused where it cannot be, and every refused field
named and located."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.errors import ConfigError
from runner.suites.terminal_bench import read_terminal_bench

SUITE = Path(__file__).parent.parent / "fixtures" / "suites" / "terminal-bench"
TEMPLATE = (SUITE / "hello" / "docker-compose.yaml").read_text()


def test_the_fixture_suite_reads() -> None:
    tasks = read_terminal_bench(SUITE)
    assert [t.id for t in tasks] == ["broken-verifier", "hello"]
    hello = tasks[1]
    root = SUITE / "hello"
    assert hello.format == "terminal-bench" and hello.source == root
    assert hello.instruction == (
        'Create the file /app/hello.txt holding exactly the line "Hello, world!".'
    )
    env = hello.environment
    assert (env.build_dir, env.image, env.workdir, env.network) == (root, None, "/app", "none")
    assert env.env == (("TEST_DIR", "/tests"),)  # the template's ${T_BENCH_TEST_DIR}
    v = hello.verifier
    assert v.grading == "pytest-summary" and v.tests_dir == root / "tests"
    assert v.command == ("bash", "/tests/run-tests.sh") and v.env == (("TEST_DIR", "/tests"),)
    assert v.extra_files == ((root / "run-tests.sh", "/tests/run-tests.sh"),)
    assert v.timeout_s == 30.0 and hello.agent_timeout_s == 120.0
    assert hello.solution is not None and hello.solution.script == root / "solution.sh"
    assert hello.tags == ("hello", "files")
    assert hello.metadata == (
        ("difficulty", "easy"),
        ("category", "file-operations"),
        ("author_name", "runner tests"),
    )
    broken = tasks[0]  # no compose file: the Dockerfile alone; Terminal-Bench's timeouts
    assert broken.environment.build_dir == SUITE / "broken-verifier"
    assert broken.environment.env == () and broken.agent_timeout_s == 360.0
    assert broken.verifier.timeout_s == 30.0


def make_task(
    root: Path,
    task_yaml: str = "instruction: Do the thing.\n",
    *,
    compose: str | None = None,
    dockerfile: bool = True,
) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "task.yaml").write_text(task_yaml)
    (root / "run-tests.sh").write_text("pytest -rA $TEST_DIR\n")
    (root / "tests" / "test_outputs.py").write_text("def test_x():\n    pass\n")
    if dockerfile:
        (root / "Dockerfile").write_text("FROM scratch\nWORKDIR /srv\n")
    if compose is not None:
        (root / "docker-compose.yaml").write_text(compose)
    return root


def test_defaults(tmp_path: Path) -> None:
    (task,) = read_terminal_bench(make_task(tmp_path / "t"))
    assert task.agent_timeout_s == 360.0 and task.verifier.timeout_s == 60.0
    assert task.environment.workdir == "/srv"  # the Dockerfile's WORKDIR
    assert task.solution is None and task.tags == () and task.metadata == ()


COMPOSES: list[tuple[str, dict[str, str], tuple[tuple[str, str], ...], str]] = [
    (TEMPLATE, {}, (("TEST_DIR", "/tests"),), "/srv"),
    (
        "services:\n  client:\n    build: .\n    working_dir: /work\n"
        "    environment:\n      LEVEL: 3\n      DEBUG: false\n"
        "      HOME_DIR: ${HOME_DIR:-/root}\n",
        {},
        (("LEVEL", "3"), ("DEBUG", "false"), ("HOME_DIR", "/root")),
        "/work",
    ),
    (
        "version: '3.8'\nservices:\n  client:\n    build:\n      context: ./\n"
        "    environment: ['MODE=${MODE}', PASSED]\n    network_mode: none\n"
        "    command: [sleep, infinity]\n",
        {"MODE": "fast", "PASSED": "through"},
        (("MODE", "fast"), ("PASSED", "through")),
        "/srv",
    ),
]


@pytest.mark.parametrize(("compose", "given", "env", "workdir"), COMPOSES)
def test_one_service_composes_reduce(
    tmp_path: Path,
    compose: str,
    given: dict[str, str],
    env: tuple[tuple[str, str], ...],
    workdir: str,
) -> None:
    root = make_task(tmp_path / "t", compose=compose)
    (task,) = read_terminal_bench(root, given)
    assert task.environment.build_dir == root and task.environment.image is None
    assert (task.environment.env, task.environment.workdir) == (env, workdir)


def test_a_compose_with_a_named_image_builds_nothing(tmp_path: Path) -> None:
    compose = "services:\n  client:\n    image: ${REGISTRY:-example.org}/tb:1\n"
    root = make_task(tmp_path / "t", compose=compose, dockerfile=False)
    (task,) = read_terminal_bench(root)
    assert (task.environment.image, task.environment.build_dir) == ("example.org/tb:1", None)


# (task.yaml, compose, file, field, line, words): each gives exactly one problem.
REFUSED: list[tuple[str, str | None, str, str, int | None, str]] = [
    ("instruction: x\nsolution_steps: 3\n", None, "task.yaml", "solution_steps", 2, "unknown"),
    ("difficulty: easy\n", None, "task.yaml", "instruction", 1, "required"),
    ("instruction: ''\n", None, "task.yaml", "instruction", 1, "required"),
    ("instruction: x\nparser_name: swebench\n", None, "task.yaml", "parser_name", 2, "pytest"),
    (
        "instruction: x\n\nrun_tests_in_same_shell: true\n",
        None,
        "task.yaml",
        "run_tests_in_same_shell",
        3,
        "fresh shell",
    ),  # fmt: skip
    (
        "instruction: x\nmax_agent_timeout_sec: -5\n",
        None,
        "task.yaml",
        "max_agent_timeout_sec",
        2,
        "seconds",
    ),  # fmt: skip
    (
        "instruction: x\nmax_test_timeout_sec: soon\n",
        None,
        "task.yaml",
        "max_test_timeout_sec",
        2,
        "seconds",
    ),  # fmt: skip
    ("instruction: x\ntags: hello\n", None, "task.yaml", "tags", 2, "list of strings"),
    ("- instruction: x\n", None, "task.yaml", "(top level)", 1, "mapping"),
    ("instruction: [x\n", None, "task.yaml", "(syntax)", 2, "not valid YAML"),
    ("a: &x 1\ninstruction: *x\n", None, "task.yaml", "(syntax)", 2, "aliases"),
    (
        "instruction: x\n",
        TEMPLATE + "  db:\n    image: postgres\n",
        "docker-compose.yaml",
        "services.db",
        13,
        "only one service",
    ),  # fmt: skip
    (
        "instruction: x\n",
        TEMPLATE.replace("    environment:", "    ports:\n      - 8080:80\n    environment:"),
        "docker-compose.yaml",
        "services.client.ports",
        8,
        "one container",
    ),  # fmt: skip
    (
        "instruction: x\n",
        TEMPLATE + "      - ./data:/data\n",
        "docker-compose.yaml",
        "services.client.volumes[2]",
        13,
        "log folders",
    ),  # fmt: skip
    (
        "instruction: x\n",
        TEMPLATE.replace('[ "sh", "-c", "sleep infinity" ]', "[python3, server.py]"),
        "docker-compose.yaml",
        "services.client.command",
        7,
        "sleep infinity",
    ),  # fmt: skip
    (
        "instruction: x\n",
        TEMPLATE + "networks:\n  default: {}\n",
        "docker-compose.yaml",
        "networks",
        13,
        "one container",
    ),  # fmt: skip
    (
        "instruction: x\n",
        "services:\n  client:\n    build: .\n    network_mode: host\n",
        "docker-compose.yaml",
        "services.client.network_mode",
        4,
        "none",
    ),  # fmt: skip
    (
        "instruction: x\n",
        "services:\n  client:\n    build:\n      context: ../shared\n",
        "docker-compose.yaml",
        "services.client.build.context",
        4,
        "only the task folder itself can be the build context",
    ),  # fmt: skip
    (
        "instruction: x\n",
        "services:\n  client:\n    build:\n      dockerfile: Dockerfile.gpu\n",
        "docker-compose.yaml",
        "services.client.build.dockerfile",
        4,
        "own `Dockerfile`",
    ),  # fmt: skip
    (
        "instruction: x\n",
        "services:\n  client:\n    build:\n      args: {A: 1}\n",
        "docker-compose.yaml",
        "services.client.build.args",
        4,
        "context, dockerfile",
    ),  # fmt: skip
    (
        "instruction: x\n",
        "services:\n  client:\n    build: .\n    environment:\n      - KEY=${SECRET}\n",
        "docker-compose.yaml",
        "services.client.environment[0]",
        5,
        "${SECRET} is not set",
    ),  # fmt: skip
    (
        "instruction: x\n",
        "services:\n  client:\n    build: .\n    environment: [UNGIVEN]\n",
        "docker-compose.yaml",
        "services.client.environment[0]",
        4,
        "UNGIVEN has no value",
    ),  # fmt: skip
    (
        "instruction: x\n",
        "services:\n  client:\n    container_name: x\n",
        "docker-compose.yaml",
        "services.client",
        2,
        "neither `build` nor an `image`",
    ),  # fmt: skip
    ("instruction: x\n", "services: []\n", "docker-compose.yaml", "services", 1, "one service"),
]


@pytest.mark.parametrize(("task_yaml", "compose", "file", "field", "line", "words"), REFUSED,
                         ids=[f"{r[2]}:{r[3]}:{r[5]}" for r in REFUSED])  # fmt: skip
def test_each_unsupported_field_is_one_located_problem(
    tmp_path: Path,
    task_yaml: str,
    compose: str | None,
    file: str,
    field: str,
    line: int | None,
    words: str,
) -> None:
    root = make_task(tmp_path / "t", task_yaml, compose=compose)
    with pytest.raises(ConfigError) as caught:
        read_terminal_bench(root)
    problems = caught.value.problems
    assert len(problems) == 1, problems
    (problem,) = problems
    assert problem.file == str(root / file)
    assert (problem.field, problem.line) == (field, line)
    assert words in problem.message


def test_solution_yaml_is_refused_unless_solution_sh_is_there(tmp_path: Path) -> None:
    root = make_task(tmp_path / "t")
    (root / "solution.yaml").write_text("- command: echo hi\n")
    with pytest.raises(ConfigError) as caught:
        read_terminal_bench(root)
    (problem,) = caught.value.problems
    assert problem.file == str(root / "solution.yaml") and "solution.sh" in problem.message
    (root / "solution.sh").write_text("echo hi\n")
    (task,) = read_terminal_bench(root)  # Terminal-Bench itself runs solution.sh then
    assert task.solution is not None and task.solution.script == root / "solution.sh"


@pytest.mark.parametrize(("rel", "words"), [("run-tests.sh", "runs the task's tests"),
                                            ("Dockerfile", "built from it")])  # fmt: skip
def test_missing_files_are_named(tmp_path: Path, rel: str, words: str) -> None:
    root = make_task(tmp_path / "t")
    (root / rel).unlink()
    with pytest.raises(ConfigError) as caught:
        read_terminal_bench(root)
    (problem,) = caught.value.problems
    assert problem.file == str(root / rel) and words in problem.message


def test_a_link_out_of_the_build_context_is_refused(tmp_path: Path) -> None:
    root = make_task(tmp_path / "t")
    (root / "secrets").symlink_to("/etc/passwd")
    with pytest.raises(ConfigError, match="secrets: \\(file\\): a symbolic link out"):
        read_terminal_bench(root)


def test_problems_of_every_task_come_together(tmp_path: Path) -> None:
    make_task(tmp_path / "suite" / "a", "instruction: x\nbogus: 1\n")
    make_task(tmp_path / "suite" / "b", "instruction: x\nparser_name: other\n")
    with pytest.raises(ConfigError) as caught:
        read_terminal_bench(tmp_path / "suite")
    assert [(Path(p.file).parent.name, p.field) for p in caught.value.problems] == [
        ("a", "bogus"),
        ("b", "parser_name"),
    ]
