"""A docker-compose file reduced to the one container runner starts, or every reason it
does not reduce, each located by line and field."""

from __future__ import annotations

import pytest

from runner.suites.compose import ComposeService, reduce_compose
from tests.support import paths

TEMPLATE = paths.FIXTURES / "suites" / "terminal-bench" / "hello" / "docker-compose.yaml"
LOGS = frozenset({"${T_BENCH_TASK_LOGS_PATH}", "${T_BENCH_TASK_AGENT_LOGS_PATH}"})


def test_terminal_bench_s_template_is_build_this_dockerfile_with_these_variables() -> None:
    service, problems = reduce_compose(
        TEMPLATE.read_text(), "dc.yaml", {"T_BENCH_TEST_DIR": "/tests"}, log_mounts=LOGS
    )
    assert problems == []
    assert service == ComposeService(
        name="client",
        context=".",
        dockerfile="Dockerfile",
        image=None,  # only the tag the harness gives the build
        env=(("TEST_DIR", "/tests"),),
        working_dir=None,
    )


def test_a_named_image_is_expanded_and_values_become_text() -> None:
    text = (
        "services:\n  app:\n    image: ${REG:-example.org}/tb:1\n    working_dir: /srv\n"
        "    environment: {DEBUG: false, LEVEL: 3, RATIO: 0.5, FROM_HOST: null}\n"
    )
    service, problems = reduce_compose(text, "dc.yaml", {})
    assert problems[0].field == "services.app.environment.FROM_HOST"
    assert "has no value; give it as a suite variable" in problems[0].message
    service, problems = reduce_compose(text, "dc.yaml", {"FROM_HOST": "given"})
    assert problems == [] and service is not None
    assert (service.image, service.context, service.working_dir) == (
        "example.org/tb:1",
        None,
        "/srv",
    )
    assert service.env == (
        ("DEBUG", "false"),
        ("LEVEL", "3"),
        ("RATIO", "0.5"),
        ("FROM_HOST", "given"),
    )


@pytest.mark.parametrize(
    ("service", "line", "field", "words"),
    [
        ("    build: ..\n", 3, "services.c.build", "only the task folder itself"),
        ("    build: {context: ., dockerfile: ../Dockerfile}\n", 3, "services.c.build.dockerfile",
         "only the task folder's own `Dockerfile`"),
        ("    build: /\n", 3, "services.c.build", "only the task folder itself"),
        ("    image: a\n    ports: ['80:80']\n", 4, "services.c.ports", "not supported"),
        ("    image: a\n    command: python serve.py\n", 4, "services.c.command", "sleeps"),
        ("    image: a\n    volumes: ['/:/host']\n", 4, "services.c.volumes[0]", "log folders"),
        ("    image: a\n    network_mode: host\n", 4, "services.c.network_mode", "only `none`"),
        ("    image: a\n    working_dir: ../up\n", 4, "services.c.working_dir", "absolute"),
        ("    image: 'bad image!'\n", 3, "services.c.image", "not an image reference"),
        ("    image: a\n    environment: ['X=${NOT_GIVEN}']\n", 4, "services.c.environment[0]",
         "${NOT_GIVEN} is not set"),
        ("    image: a\n    environment: {'1BAD': x}\n", 4, "services.c.environment.1BAD",
         "not a variable name"),
        ("    image: a\n    environment: {X: '${MULTI}'}\n", 4, "services.c.environment.X",
         "line break"),
        ("    container_name: only\n", 2, "services.c", "neither `build` nor an `image`"),
    ],
)  # fmt: skip
def test_what_does_not_reduce_is_one_located_problem(
    service: str, line: int, field: str, words: str
) -> None:
    text = "services:\n  c:\n" + service
    got, problems = reduce_compose(text, "dc.yaml", {"MULTI": "a\nb"})
    assert got is None and len(problems) == 1, problems
    (problem,) = problems
    assert (problem.file, problem.line, problem.field) == ("dc.yaml", line, field)
    assert words in problem.message


@pytest.mark.parametrize(
    ("text", "line", "field", "words"),
    [
        (
            "services:\n  a: {image: x}\n  b: {image: y}\n",
            3,
            "services.b",
            "this file has 2 (a, b)",
        ),
        ("services: {}\n", 1, "services", "the task's one service"),
        ("- services\n", 1, "(top level)", "must be a mapping"),
        ("services:\n  a: {image: x}\nnetworks: {n: {}}\n", 3, "networks", "one container"),
        ("services:\n  a: {image: x}\nservice: 1\n", 3, "service", "not a key of a compose file"),
        ("services:\n  a: &s {image: x}\n  b: *s\n", 3, "(syntax)", "aliases"),
    ],
)
def test_a_file_that_is_no_single_service_is_refused(
    text: str, line: int, field: str, words: str
) -> None:
    service, problems = reduce_compose(text, "dc.yaml", {})
    assert service is None and len(problems) == 1, problems
    assert (problems[0].line, problems[0].field) == (line, field) and words in problems[0].message


def test_every_problem_of_the_service_is_told_at_once() -> None:
    text = "services:\n  c:\n    build: ..\n    ports: [1]\n    command: run\n"
    service, problems = reduce_compose(text, "dc.yaml", {})
    assert service is None
    assert [(p.line, p.field) for p in problems] == [
        (4, "services.c.ports"),
        (3, "services.c.build"),
        (5, "services.c.command"),
    ]
