"""Every bad value in a suite's own files is named in that file, at its line, as the suite
spells the field, with what is allowed: by the readers, through the config pass, and by
`runner validate` and `runner run` (exit 2, no traceback). A value the readers let through
passes the task file's models too (the limits agree), and random values in each numeric
field of task.toml give a located problem or a task, never anything else."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from runner.config import Limits, load
from runner.config.environment import EnvironmentSettings
from runner.errors import ConfigError, Problem
from runner.suites import bounds
from runner.suites.harbor import read_harbor
from runner.suites.swe_bench import read_swe_bench
from runner.suites.terminal_bench import read_terminal_bench
from tests.support import paths
from tests.support.cli import run_cli

HEAD = """version: 1
providers:
  p: {base_url: "http://127.0.0.1:9/v1"}
defaults:
  model: p/m
"""
SWE = paths.ROOT / "tests" / "fixtures" / "suites" / "swe-bench" / "instances.jsonl"


def _takes(model: type[BaseModel], field: str, value: object) -> bool:
    try:
        model.model_validate({field: value})
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize(
    ("model", "field", "least", "most"),
    [
        (Limits, "timeout_s", 0.0, float(bounds.MAX_AGENT_S)),
        (EnvironmentSettings, "timeout_s", 0.0, float(bounds.MAX_BUILD_S)),
        (EnvironmentSettings, "cpus", 0.0, float(bounds.MAX_CPUS)),
        (EnvironmentSettings, "memory_mb", bounds.MIN_MEMORY_MB, bounds.MAX_MEMORY_MB),
    ],
)
def test_the_suite_limits_are_the_task_file_s(
    model: type[BaseModel], field: str, least: float, most: float
) -> None:
    """What the readers let through, the task file's models take, and no more."""
    assert _takes(model, field, most)
    if isinstance(most, int):
        assert _takes(model, field, least) and not _takes(model, field, least - 1)
        assert not _takes(model, field, most + 1)
    else:
        assert not _takes(model, field, least) and _takes(model, field, 1e-9)
        assert not _takes(model, field, math.nextafter(most, math.inf))


# -- Harbor ------------------------------------------------------------------------------


def harbor_task(root: Path, toml: str) -> Path:
    """A task with a named image (so no Dockerfile is read) and `toml` as its task.toml."""
    root.mkdir(parents=True)
    (root / "instruction.md").write_text("Do the thing.\n")
    if "docker_image" not in toml:  # last in its table, so the lines above stay put
        image = 'docker_image = "localhost/x"\n'
        toml += image if "[environment]" in toml else "[environment]\n" + image
    (root / "task.toml").write_text(toml)
    (root / "tests").mkdir()
    (root / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    return root


MAX_A, MAX_B = "604800", "86400"
# (table, key as written, value as written, what the message says). The key's line is 2.
HARBOR: list[tuple[str, str, str, str]] = [
    ("agent", "timeout_sec", "1e12", f"1e12 is over the limit of {MAX_A} seconds"),
    ("agent", "timeout_sec", "604800.5", f"604800.5 is over the limit of {MAX_A} seconds"),
    ("agent", "timeout_sec", "nan", "nan is not a finite number; allowed: a number of seconds"),
    ("agent", "timeout_sec", "inf", "inf is not a finite number"),
    ("agent", "timeout_sec", "-inf", "-inf is not a finite number"),
    ("agent", "timeout_sec", "-1", "-1 is not above 0"),
    ("agent", "timeout_sec", "0", f"0 is not above 0; allowed: a number of seconds above 0, "
     f"at most {MAX_A}"),
    ("agent", "timeout_sec", "0.0", "0.0 is not above 0"),
    ("agent", "timeout_sec", '"600"', "must be a number of seconds, got the string '600'"),
    ("agent", "timeout_sec", '"1e12"', "got the string '1e12'"),
    ("agent", "timeout_sec", "true", "got true"),
    ("agent", "timeout_sec", "[1]", "got a list"),
    ("agent", "timeout_sec", "9" * 40, f"a number over 2**63 is over the limit of {MAX_A}"),
    ("verifier", "timeout_sec", "1e12", f"1e12 is over the limit of {MAX_B} seconds"),
    ("verifier", "timeout_sec", "nan", "nan is not a finite number"),
    ("verifier", "timeout_sec", '"soon"', "got the string 'soon'"),
    ("environment", "build_timeout_sec", "1e300", f"1e300 is over the limit of {MAX_B} seconds"),
    ("environment", "build_timeout_sec", "-0.5", "-0.5 is not above 0"),
    ("environment", "cpus", "1e9", "1e9 is over the limit of 1024 cpus"),
    ("environment", "cpus", "1025", "1025 is over the limit of 1024 cpus"),
    ("environment", "cpus", "0", "0 is not above 0; allowed: a number of cpus above 0, "
     "at most 1024"),
    ("environment", "cpus", "-1", "-1 is not above 0"),
    ("environment", "cpus", "nan", "nan is not a finite number"),
    ("environment", "cpus", '"2"', "must be a number of cpus, got the string '2'"),
    ("environment", "memory", '"999999G"', "'999999G' is over the limit of 16777216 MB (16 TiB)"),
    ("environment", "memory", '"abc"', 'must be a size such as "2G", "512M" (or write '
     "memory_mb), got 'abc'"),
    ("environment", "memory", "0", "got 0"),
    ("environment", "memory", '"0G"', "'0G' is under the least runner gives a container, 16 MB"),
    ("environment", "memory", '"512K"', "under the least"),
    ("environment", "memory", '"' + "9" * 400 + 'G"', "is over the limit of 16777216 MB"),
    ("environment", "memory_mb", "0", "must be a whole number of MB above 0, got 0"),
    ("environment", "memory_mb", "8", "8 is under the least runner gives a container, 16 MB"),
    ("environment", "memory_mb", "99999999999", "99999999999 is over the limit of 16777216 MB"),
    ("environment", "memory_mb", "1.5", "must be a whole number of MB above 0, got 1.5"),
    ("environment", "docker_image", '"--privileged"', "'--privileged' is not an image reference"),
    ("environment", "docker_image", '"-x"', "starting with a letter or digit"),
    ("environment", "docker_image", '"ubuntu latest"', "'ubuntu latest' is not an image reference"),
    ("environment", "docker_image", '"ubuntu\\tx"', "'ubuntu\\tx' is not an image reference"),
    ("environment", "docker_image", '"ubuntu\\u0000"', "is not an image reference"),
    ("environment", "docker_image", '"ubuntu\\n"', "is not an image reference"),
    ("environment", "docker_image", '""', "is not an image reference"),
    ("environment", "docker_image", "5", "must be an image name, got 5"),
    ("environment", "workdir", '"/app/"', "must be written plainly"),
    ("environment", "workdir", '"/"', "not /"),
    ("environment", "workdir", '"app"', "is not an absolute POSIX path"),
    ("agent", "user", '"root user"', "'root user' is not a user name or uid"),
    ("agent", "user", "-1", "'-1' is not a user name or uid"),
    ("verifier", "user", '"--privileged"', "is not a user name or uid"),
]  # fmt: skip
ENV: list[tuple[str, str, str]] = [
    ('"A B"', 'environment.env."A B"', "'A B' is not a variable name"),
    ('"A=B"', 'environment.env."A=B"', "'A=B' is not a variable name"),
    ('"1A"', "environment.env.1A", "not starting with a digit"),
    ('""', 'environment.env.""', "is not a variable name"),
    ("A", "environment.env.A", "must not hold a NUL or a line break"),  # with "x\ny" below
]


@pytest.mark.parametrize(("table", "key", "value", "says"), HARBOR,
                         ids=[f"{t}.{k}={v[:20]}" for t, k, v, _ in HARBOR])  # fmt: skip
def test_a_bad_task_toml_value_is_named_in_task_toml(
    tmp_path: Path, table: str, key: str, value: str, says: str
) -> None:
    root = harbor_task(tmp_path / "t1", f"[{table}]\n{key} = {value}\n")
    with pytest.raises(ConfigError) as caught:
        read_harbor(root)
    assert [str(p) for p in caught.value.problems] == [
        f"{root / 'task.toml'}:2: {table}.{key}: " + caught.value.problems[0].message
    ]
    assert says in caught.value.problems[0].message


@pytest.mark.parametrize(("name", "field", "says"), ENV, ids=[e[0] for e in ENV])
@pytest.mark.parametrize("table", ["environment", "verifier", "solution"])
def test_env_names_and_values_are_checked_where_written(
    tmp_path: Path, name: str, field: str, says: str, table: str
) -> None:
    value = '"x\\ny"' if name == "A" else '"x"'
    root = harbor_task(tmp_path / "t1", f"[{table}]\nenv = {{ {name} = {value} }}\n")
    (root / "solution").mkdir()
    (root / "solution" / "solve.sh").write_text("true\n")
    with pytest.raises(ConfigError) as caught:
        read_harbor(root)
    (problem,) = caught.value.problems
    assert (problem.file, problem.line) == (str(root / "task.toml"), 2)
    assert problem.field == field.replace("environment.", f"{table}.", 1)
    assert says in problem.message and "run_args" not in problem.message


def suite_file(tmp_path: Path, fmt: str, path: str) -> Path:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(HEAD + f"suites:\n  - format: {fmt}\n    path: {path}\n")
    return tasks


def config_problems(tasks: Path) -> list[Problem]:
    with pytest.raises(ConfigError) as caught:
        load(tasks, offline=True)
    return caught.value.problems


PASSED_ON: list[tuple[str, str, str, str]] = [
    ("agent", "timeout_sec", "1e12", "1e12 is over the limit of 604800 seconds"),
    ("agent", "timeout_sec", "nan", "nan is not a finite number"),
    ("environment", "memory", '"999999G"', "over the limit of 16777216 MB"),
    ("environment", "cpus", "1e9", "1e9 is over the limit of 1024 cpus"),
    ("environment", "build_timeout_sec", "1e300", "1e300 is over the limit of 86400 seconds"),
    ("environment", "docker_image", '"--privileged"', "is not an image reference"),
    ("environment", "workdir", '"/app/../etc"', "must be written plainly"),
]


@pytest.mark.parametrize(("table", "key", "value", "says"), PASSED_ON,
                         ids=[f"{t}.{k}={v}" for t, k, v, _ in PASSED_ON])  # fmt: skip
def test_the_config_pass_names_task_toml_not_the_task_file(
    tmp_path: Path, table: str, key: str, value: str, says: str
) -> None:
    root = harbor_task(tmp_path / "suite" / "t1", f"[{table}]\n{key} = {value}\n")
    (problem,) = config_problems(suite_file(tmp_path, "harbor", "suite"))
    assert (problem.file, problem.line, problem.field) == (
        str(root / "task.toml"),
        2,
        f"{table}.{key}",
    )
    assert says in problem.message


def test_the_limits_themselves_pass_the_config_pass(tmp_path: Path) -> None:
    harbor_task(
        tmp_path / "suite" / "t1",
        "[agent]\ntimeout_sec = 604800\n[verifier]\ntimeout_sec = 86400\n"
        "[environment]\nbuild_timeout_sec = 86400.0\ncpus = 1024\nmemory_mb = 16777216\n",
    )
    harbor_task(tmp_path / "suite" / "t2", '[environment]\ncpus = 0.01\nmemory = "16M"\n')
    runs = {r.id: r for r in load(suite_file(tmp_path, "harbor", "suite"), offline=True).runs}
    t1, t2 = runs["t1"], runs["t2"]
    assert (t1.limits.timeout_s, t1.environment.timeout_s) == (604800.0, 86400.0)
    assert (t1.environment.cpus, t1.environment.memory_mb) == (1024.0, 16777216)
    assert (t2.environment.cpus, t2.environment.memory_mb) == (0.01, 16)


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize(
    ("toml", "where"),
    [
        ("[agent]\ntimeout_sec = 1e12\n", ":2: agent.timeout_sec: 1e12 is over the limit"),
        ("[agent]\ntimeout_sec = inf\n", ":2: agent.timeout_sec: inf is not a finite number"),
        ('[environment]\nenv = { "A B" = "x" }\n', ':2: environment.env."A B": '),
        ("[environment]\ncpus = -1\n", ":2: environment.cpus: -1 is not above 0"),
    ],
)
def test_validate_and_run_exit_2_naming_task_toml(
    tmp_path: Path, command: str, toml: str, where: str
) -> None:
    root = harbor_task(tmp_path / "suite" / "t1", toml)
    tasks = suite_file(tmp_path, "harbor", "suite")
    args = ("--out", tmp_path / "out") if command == "run" else ("--offline",)
    res = run_cli(command, tasks, *args)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stdout + res.stderr
    assert res.stderr.splitlines() == [f"error: {root / 'task.toml'}{where}" + _rest(res, where)]


def _rest(res: Any, where: str) -> str:
    return res.stderr.split(where, 1)[1].rstrip("\n")


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    return json.dumps(value)


FIELDS = [
    ("agent", "timeout_sec"),
    ("verifier", "timeout_sec"),
    ("environment", "build_timeout_sec"),
    ("environment", "cpus"),
    ("environment", "memory_mb"),
    ("environment", "memory"),
    ("environment", "storage_mb"),
    ("environment", "storage"),
]
VALUES = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.integers(min_value=-(10**600), max_value=10**600),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.from_regex(r"[0-9]{1,40}(\.[0-9]{1,5})?[GMKgmk]?", fullmatch=True),
    st.booleans(),
)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(field=st.sampled_from(FIELDS), value=VALUES)
def test_random_numbers_in_task_toml_never_traceback(
    tmp_path: Path, field: tuple[str, str], value: Any
) -> None:
    suite = tmp_path / "fuzz"
    shutil.rmtree(suite, ignore_errors=True)
    root = harbor_task(suite / "t1", f"[{field[0]}]\n{field[1]} = {_toml_value(value)}\n")
    tasks = suite_file(tmp_path, "harbor", "fuzz")
    try:
        load(tasks, offline=True)
    except ConfigError as exc:
        for p in exc.problems:  # every problem is the suite's, in task.toml
            assert p.file == str(root / "task.toml"), p
            assert p.line == 2 or p.field == "(syntax)", p


# -- Terminal-Bench ----------------------------------------------------------------------


def tb_task(root: Path, task_yaml: str, compose: str | None = None) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "task.yaml").write_text(task_yaml)
    (root / "run-tests.sh").write_text("pytest -rA $TEST_DIR\n")
    (root / "tests" / "test_outputs.py").write_text("def test_x():\n    pass\n")
    (root / "Dockerfile").write_text("FROM scratch\n")
    if compose is not None:
        (root / "docker-compose.yaml").write_text(compose)
    return root


SVC = "services:\n  client:\n"
# (task.yaml, compose, file, line, field, what the message says)
TB: list[tuple[str, str | None, str, int, str, str]] = [
    ("instruction: x\nmax_agent_timeout_sec: 1.0e+12\n", None, "task.yaml", 2,
     "max_agent_timeout_sec", "1000000000000.0 is over the limit of 604800 seconds"),
    ("instruction: x\nmax_agent_timeout_sec: 1e12\n", None, "task.yaml", 2,
     "max_agent_timeout_sec", "got the string '1e12'; allowed: a number of seconds above 0, "
     "at most 604800; YAML 1.1 reads a number in e-notation as text"),
    ("instruction: x\nmax_agent_timeout_sec: .nan\n", None, "task.yaml", 2,
     "max_agent_timeout_sec", "nan is not a finite number"),
    ("instruction: x\nmax_test_timeout_sec: .inf\n", None, "task.yaml", 2,
     "max_test_timeout_sec", "inf is not a finite number"),
    ("instruction: x\nmax_test_timeout_sec: 0\n", None, "task.yaml", 2,
     "max_test_timeout_sec", "0 is not above 0"),
    ("instruction: x\nmax_test_timeout_sec: 90000\n", None, "task.yaml", 2,
     "max_test_timeout_sec", "90000 is over the limit of 86400 seconds"),
    ("instruction: x\ntags: [a]\ninstruction: y\n", None, "task.yaml", 3,
     "instruction", "written twice in one mapping (first at line 1)"),
    ("instruction: x\n", SVC + "    build:\n      context: /\n", "docker-compose.yaml", 4,
     "services.client.build.context", "'/' is refused: only the task folder itself"),
    ("instruction: x\n", SVC + "    build: /\n", "docker-compose.yaml", 3,
     "services.client.build", "'/' is refused"),
    ("instruction: x\n", SVC + "    build: /srv/task\n", "docker-compose.yaml", 3,
     "services.client.build", "'/srv/task' is refused"),
    ("instruction: x\n", SVC + "    build: ''\n", "docker-compose.yaml", 3,
     "services.client.build", "'' is refused"),
    ("instruction: x\n", SVC + "    build: {context: ../other}\n", "docker-compose.yaml", 3,
     "services.client.build.context", "'../other' is refused"),
    ("instruction: x\n", SVC + "    build: .\n    volumes: []\n    volumes: [/:/host]\n",
     "docker-compose.yaml", 5, "services.client.volumes",
     "written twice in one mapping (first at line 4)"),
    ("instruction: x\n", SVC + "    build: .\n    environment: {A: 1, A: 2}\n",
     "docker-compose.yaml", 4, "services.client.environment.A", "written twice"),
    ("instruction: x\n", SVC + "    image: --privileged\n", "docker-compose.yaml", 3,
     "services.client.image", "'--privileged' is not an image reference"),
    ("instruction: x\n", SVC + "    image: 'ubuntu latest'\n", "docker-compose.yaml", 3,
     "services.client.image", "is not an image reference"),
    ("instruction: x\n", SVC + "    build: .\n    working_dir: /app/\n", "docker-compose.yaml", 4,
     "services.client.working_dir", "must be written plainly"),
    ("instruction: x\n", SVC + "    build: .\n    environment: {'A B': x}\n",
     "docker-compose.yaml", 4, "services.client.environment.A B", "'A B' is not a variable name"),
    ("instruction: x\n", SVC + "    build: .\n    environment: ['A=B=C', 'X Y=1']\n",
     "docker-compose.yaml", 4, "services.client.environment[1]", "'X Y' is not a variable name"),
    ("instruction: x\n", SVC + "    build: .\n    environment: {A: \"x\\ny\"}\n",
     "docker-compose.yaml", 4, "services.client.environment.A", "a NUL or a line break"),
]  # fmt: skip


@pytest.mark.parametrize(("task_yaml", "compose", "file", "line", "field", "says"), TB,
                         ids=[f"{t[2]}:{t[4]}:{t[5][:24]}" for t in TB])  # fmt: skip
def test_a_bad_terminal_bench_value_is_named_where_written(
    tmp_path: Path, task_yaml: str, compose: str | None, file: str, line: int, field: str, says: str
) -> None:
    root = tb_task(tmp_path / "t", task_yaml, compose)
    with pytest.raises(ConfigError) as caught:
        read_terminal_bench(root)
    (problem,) = caught.value.problems
    assert (problem.file, problem.line, problem.field) == (str(root / file), line, field)
    assert says in problem.message, problem.message


def test_a_compose_build_of_the_task_folder_is_read(tmp_path: Path) -> None:
    for i, build in enumerate((".", "./", "{context: ., dockerfile: ./Dockerfile}")):
        root = tb_task(tmp_path / f"t{i}", "instruction: x\n", SVC + f"    build: {build}\n")
        (task,) = read_terminal_bench(root)
        assert task.environment.build_dir == root


def test_terminal_bench_problems_exit_2_from_validate(tmp_path: Path) -> None:
    root = tb_task(
        tmp_path / "tb" / "t", "instruction: x\n", SVC + "    build:\n      context: /\n"
    )
    res = run_cli("validate", suite_file(tmp_path, "terminal-bench", "tb"), "--offline")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.startswith(
        f"error: {root / 'docker-compose.yaml'}:4: services.client.build.context: '/' is refused"
    )


# -- SWE-bench ---------------------------------------------------------------------------

GOOD: dict[str, Any] = json.loads(SWE.read_text())


@pytest.mark.parametrize(
    ("instance", "field", "says"),
    [
        ({**GOOD, "image": "--privileged"}, "image", "'--privileged' is not an image reference"),
        ({**GOOD, "image": "a b"}, "image", "'a b' is not an image reference"),
    ],
)
def test_a_bad_swe_bench_image_is_located(
    tmp_path: Path, instance: dict[str, Any], field: str, says: str
) -> None:
    path = tmp_path / "i.jsonl"
    path.write_text(json.dumps({**GOOD, "instance_id": "a__b-1"}) + "\n" + json.dumps(instance))
    with pytest.raises(ConfigError) as caught:
        read_swe_bench(path)
    (problem,) = caught.value.problems
    assert (problem.file, problem.line, problem.field) == (str(path), 2, field)
    assert says in problem.message


def test_an_image_template_that_makes_a_bad_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        read_swe_bench(SWE, image_template="-{image_id}")
    (problem,) = caught.value.problems
    assert problem.field == "image_template" and "is not an image reference" in problem.message


def test_a_key_written_twice_is_refused_naming_it(tmp_path: Path) -> None:
    line = json.dumps(GOOD)
    twice = line[:-1] + ', "patch": "x"}'
    path = tmp_path / "i.jsonl"
    path.write_text(line.replace(GOOD["instance_id"], "a__b-1") + "\n" + twice + "\n")
    with pytest.raises(ConfigError) as caught:
        read_swe_bench(path)
    (problem,) = caught.value.problems
    assert (problem.file, problem.line) == (str(path), 2)
    assert "the key 'patch' is written twice in one object" in problem.message
    listed = tmp_path / "i.json"
    listed.write_text("[\n" + twice + "\n]\n")
    with pytest.raises(ConfigError) as caught:
        read_swe_bench(listed)
    assert "the key 'patch' is written twice" in caught.value.problems[0].message


def test_public_dataset_columns_are_read_and_others_kept_as_metadata(tmp_path: Path) -> None:
    """The columns of SWE-bench and SWE-bench Verified read as they are; a column no
    dataset runner knows of (a newer dataset's) is accepted and kept for the report, not
    refused: a user must be able to run a newer dataset without waiting on runner."""
    row = {
        **GOOD,
        "hints_text": "see the docs",
        "created_at": "2024-01-01T00:00:00Z",
        "version": "1.0",
        "environment_setup_commit": GOOD["base_commit"],
        "difficulty": "15 min - 1 hour",
        "FAIL_TO_PASS": json.loads(GOOD["FAIL_TO_PASS"]),  # a real list reads too
        "foo": 7,
        "nested": {"kept": False},
    }
    path = tmp_path / "verified.jsonl"
    path.write_text(json.dumps(row) + "\n")
    (task,) = read_swe_bench(path)
    meta = dict(task.metadata)
    assert meta["difficulty"] == "15 min - 1 hour" and meta["foo"] == "7"
    assert meta["version"] == "1.0" and "nested" not in meta
    path.write_text(json.dumps({**row, "hint_text": "x"}) + "\n")
    with pytest.raises(ConfigError) as caught:
        read_swe_bench(path)
    (problem,) = caught.value.problems
    assert (problem.line, problem.field) == (1, "hint_text")
    assert "did you mean hints_text?" in problem.message
