"""Harbor task folders read into `SuiteTask`s: the fixtures of tests/fixtures/suites,
every refused field named and located, and `${VAR:-default}` from the given variables
only."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from runner.errors import ConfigError
from runner.suites.harbor import read_harbor, toml_lines

SUITE = Path(__file__).parent.parent / "fixtures" / "suites" / "harbor"


def test_the_fixture_suite_reads() -> None:
    tasks = read_harbor(SUITE)
    assert [t.id for t in tasks] == ["broken-verifier", "hello"]
    hello = tasks[1]
    assert hello.format == "harbor" and hello.source == SUITE / "hello"
    assert hello.instruction.startswith("Create the file `/app/hello.txt`")
    env = hello.environment
    assert env.build_dir == SUITE / "hello" / "environment" and env.image is None
    assert (env.workdir, env.cpus, env.memory_mb, env.network) == ("/app", 1.0, 512, "none")
    assert env.env == (("LANG", "C.UTF-8"),)  # the default: SUITE_LANG was not given
    v = hello.verifier
    assert v.grading == "reward-file" and v.tests_dir == SUITE / "hello" / "tests"
    assert v.command == ("bash", "/tests/test.sh") and v.tests_at == "/tests"
    assert v.timeout_s == 60.0 and v.env == (("GREETING", "Hello, world!"),)
    assert hello.solution is not None
    assert hello.solution.script == SUITE / "hello" / "solution" / "solve.sh"
    assert hello.solution.env == (("TARGET", "/app/hello.txt"),)
    assert (hello.agent_timeout_s, hello.build_timeout_s) == (120.0, 300.0)
    assert hello.tags == ("hello", "files")
    assert hello.metadata == (("difficulty", "easy"), ("category", "file-operations"))
    broken = tasks[0]
    assert broken.verifier.timeout_s == 30.0 and broken.agent_timeout_s is None
    assert broken.build_timeout_s == 600.0  # Harbor's default


def test_one_task_folder_reads_alone() -> None:
    assert [t.id for t in read_harbor(SUITE / "hello")] == ["hello"]


def test_variables_come_from_the_given_mapping_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUITE_LANG", "from-the-host")
    (hello,) = read_harbor(SUITE / "hello", {"SUITE_LANG": "en_US.UTF-8"})
    assert hello.environment.env == (("LANG", "en_US.UTF-8"),)
    (hello,) = read_harbor(SUITE / "hello")
    assert hello.environment.env == (("LANG", "C.UTF-8"),)


def make_task(root: Path, toml: str, *, dockerfile: bool = True) -> Path:
    root.mkdir(parents=True)
    (root / "instruction.md").write_text("Do the thing.\n")
    (root / "task.toml").write_text(toml)
    (root / "tests").mkdir()
    (root / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    if dockerfile:
        (root / "environment").mkdir()
        (root / "environment" / "Dockerfile").write_text("FROM scratch\nWORKDIR /srv/work\n")
    return root


EXPANSIONS: list[tuple[str, dict[str, str], str]] = [
    ("${A}", {"A": "x"}, "x"),
    ("${A:-d}", {}, "d"),
    ("${A:-d}", {"A": ""}, "d"),  # empty takes the default, as in the shell
    ("${A:-}", {}, ""),
    ("pre-${A}-${B:-b}-post", {"A": "a"}, "pre-a-b-post"),
    ("$A and $$ and ${not-a-name}", {"A": "x"}, "$A and $$ and ${not-a-name}"),
    ("${A:-has spaces, and = signs}", {}, "has spaces, and = signs"),
]


@pytest.mark.parametrize(("written", "given", "value"), EXPANSIONS)
def test_env_expansion(tmp_path: Path, written: str, given: dict[str, str], value: str) -> None:
    toml = f"[environment]\nenv = {{ X = '{written}' }}\n[verifier]\nenv = {{ Y = '{written}' }}\n"
    (task,) = read_harbor(make_task(tmp_path / "t", toml), given)
    assert task.environment.env == (("X", value),)
    assert task.verifier.env == (("Y", value),)


def test_an_unset_variable_without_default_is_refused(tmp_path: Path) -> None:
    toml = '[environment]\nbuild_timeout_sec = 10\n\nenv = { TOKEN = "${API_TOKEN}" }\n'
    with pytest.raises(ConfigError) as caught:
        read_harbor(make_task(tmp_path / "t", toml))
    (problem,) = caught.value.problems
    assert (problem.line, problem.field) == (4, "environment.env.TOKEN")
    assert "${API_TOKEN} is not set" in problem.message


def test_defaults_and_the_dockerfile_workdir(tmp_path: Path) -> None:
    (task,) = read_harbor(make_task(tmp_path / "t", ""))
    assert task.environment.workdir == "/srv/work"  # the Dockerfile's WORKDIR
    assert task.environment.network == "none" and task.environment.cpus is None
    assert task.verifier.timeout_s == 600.0 and task.solution is None


NETWORKS: list[tuple[str, str]] = [
    ("", "none"),
    ("[environment]\nallow_internet = true\n", "bridge"),
    ("[environment]\nallow_internet = false\n", "none"),
    ('[environment]\nnetwork_mode = "public"\n', "bridge"),
    ('[environment]\nnetwork_mode = "public"\n[agent]\nnetwork_mode = "no-network"\n', "none"),
    ('[agent]\nnetwork_mode = "public"\n', "bridge"),
]


@pytest.mark.parametrize(("toml", "network"), NETWORKS)
def test_the_agent_network(tmp_path: Path, toml: str, network: str) -> None:
    (task,) = read_harbor(make_task(tmp_path / "t", toml))
    assert task.environment.network == network


def test_a_named_image_and_other_accepted_fields(tmp_path: Path) -> None:
    toml = """schema_version = "1.3"
source = "upstream"

[task]
name = "org/thing"
keywords = ["kw"]

[metadata]
tags = ["t"]
verified = true

[agent]
user = 1000

[verifier]
user = "tester"
environment_mode = "shared"

[environment]
docker_image = "example.org/img:1"
os = "linux"
memory = "1.5G"
gpus = 0
mcp_servers = []
"""
    (task,) = read_harbor(make_task(tmp_path / "t", toml, dockerfile=False))
    env = task.environment
    assert (env.image, env.build_dir, env.workdir) == ("example.org/img:1", None, "/app")
    assert (env.user, env.memory_mb, task.verifier.user) == ("1000", 1536, "tester")
    assert task.tags == ("t", "kw")
    assert dict(task.metadata) == {"verified": "true", "package": "org/thing", "source": "upstream"}


# Each broken task.toml gives exactly one problem: (task.toml, field, line, words).
REFUSED: list[tuple[str, str, int, str]] = [
    ('version = "1.0"\n\n[[steps]]\ninstruction = "a"\n', "steps", 3, "multi-step"),
    ("[environment]\ncpus = 1\ngpus = 1\n", "environment.gpus", 3, "GPUs"),
    ('[environment]\ngpu_types = ["H100"]\n', "environment.gpu_types", 2, "GPUs"),
    ('[environment]\nnetwork_mode = "allowlist"\n', "environment.network_mode", 2, "allowlist"),
    ('[agent]\nnetwork_mode = "allowlist"\n', "agent.network_mode", 2, "allowlist"),
    ('[agent]\nnetwork_mode = "internet"\n', "agent.network_mode", 2, "public, no-network"),
    ('[environment]\nallowed_hosts = ["pypi.org"]\n', "environment.allowed_hosts", 2, "allow"),
    ('[verifier]\nenvironment_mode = "separate"\n', "verifier.environment_mode", 2, "shared"),
    ('[verifier]\nnetwork_mode = "public"\n', "verifier.network_mode", 2, "verifier's own"),
    (
        '[environment]\n\n[[environment.mcp_servers]]\nname = "x"\n',
        "environment.mcp_servers",
        3,
        "MCP",
    ),  # fmt: skip
    ('[environment]\nskills_dir = "/skills"\n', "environment.skills_dir", 2, "skills"),
    ('[environment.healthcheck]\ncommand = "true"\n', "environment.healthcheck", 1, "health"),
    ('[[artifacts]]\npath = "/app/out"\n', "artifacts", 1, "artifact"),
    ('colour = "blue"\n', "colour", 1, "unknown field"),
    ("[agent]\ntimeout_sec = 10\nretries = 3\n", "agent.retries", 3, "unknown field"),
    ('[environment]\n"quoted key" = 1\n', 'environment."quoted key"', 2, "unknown field"),
    ('[agent]\ntimeout_sec = "ten"\n', "agent.timeout_sec", 2, "seconds above 0"),
    ("[verifier]\ntimeout_sec = 0\n", "verifier.timeout_sec", 2, "seconds above 0"),
    ("[environment]\ncpus = -1\n", "environment.cpus", 2, "above 0"),
    ("[environment]\nmemory_mb = 1.5\n", "environment.memory_mb", 2, "whole number"),
    ('[environment]\nmemory = "lots"\n', "environment.memory", 2, "size"),
    ('[environment]\nworkdir = "app"\n', "environment.workdir", 2, "absolute"),
    ('[environment]\nos = "windows"\n', "environment.os", 2, "linux"),
    ("[environment]\nenv = { A = 1 }\n", "environment.env.A", 2, "string"),
    ("[agent]\nuser = true\n", "agent.user", 2, "user name or a uid"),
    ("agent = 3\n", "agent", 1, "table"),
    ('[metadata]\ntags = "one"\n', "metadata.tags", 2, "list of strings"),
    ('description = """\nnot = a key\n"""\nbogus = 1\n', "description", 1, "unknown field"),
    ("[agent\n", "(syntax)", 1, "not valid TOML"),
]


@pytest.mark.parametrize(("toml", "field", "line", "words"), REFUSED,
                         ids=[r[1] + ":" + r[3] for r in REFUSED])  # fmt: skip
def test_each_unsupported_field_is_one_located_problem(
    tmp_path: Path, toml: str, field: str, line: int, words: str
) -> None:
    root = make_task(tmp_path / "t", toml)
    with pytest.raises(ConfigError) as caught:
        read_harbor(root)
    problems = caught.value.problems
    if field == "description":  # both unknown top-level keys are named, each on its line
        assert [(p.field, p.line) for p in problems] == [("description", 1), ("bogus", 4)]
        return
    assert len(problems) == 1, problems
    (problem,) = problems
    assert problem.file == str(root / "task.toml")
    assert (problem.field, problem.line) == (field, line)
    assert words in problem.message


FILES: list[tuple[str, str, str]] = [
    ("environment/docker-compose.yaml", "services: {main: {}, db: {}}\n", "compose"),
    ("environment/Dockerfile", "", "docker_image"),  # removed below
    ("tests/test.sh", "", "verifier"),  # removed below
    ("instruction.md", "", "instruction"),  # removed below
]


@pytest.mark.parametrize(("rel", "text", "words"), FILES)
def test_missing_or_refused_files_are_named(
    tmp_path: Path, rel: str, text: str, words: str
) -> None:
    root = make_task(tmp_path / "t", "")
    if text:
        (root / rel).write_text(text)
    else:
        (root / rel).unlink()
    with pytest.raises(ConfigError) as caught:
        read_harbor(root)
    (problem,) = caught.value.problems
    assert problem.file == str(root / rel) and words in problem.message


def test_an_empty_instruction_is_refused(tmp_path: Path) -> None:
    root = make_task(tmp_path / "t", "")
    (root / "instruction.md").write_text(" \n")
    with pytest.raises(ConfigError, match="instruction.md: \\(file\\): empty"):
        read_harbor(root)


def test_links_out_of_the_task_are_refused(tmp_path: Path) -> None:
    root = make_task(tmp_path / "t", "")
    (root / "tests" / "data").symlink_to("/etc")
    (root / "instruction.md").unlink()
    (root / "instruction.md").symlink_to(tmp_path / "elsewhere.md")
    with pytest.raises(ConfigError) as caught:
        read_harbor(root)
    said = sorted(str(p) for p in caught.value.problems)
    assert said == [
        f"{root}/instruction.md: (file): a symbolic link; a task's files must be real files",
        f"{root}/tests/data: (file): a symbolic link out of the task folder",
    ]


def test_every_task_of_a_suite_is_checked_and_a_stray_folder_named(tmp_path: Path) -> None:
    shutil.copytree(SUITE / "hello", tmp_path / "suite" / "a")
    make_task(tmp_path / "suite" / "b", "steps = []\nbogus = 1\n")
    (tmp_path / "suite" / "notes").mkdir()
    (tmp_path / "suite" / ".git").mkdir()
    (tmp_path / "suite" / "README.md").write_text("a suite\n")
    with pytest.raises(ConfigError) as caught:
        read_harbor(tmp_path / "suite")
    said = [(Path(p.file).name, p.field) for p in caught.value.problems]
    assert said[0] == ("notes", "(folder)") and ("task.toml", "steps") in said
    shutil.rmtree(tmp_path / "suite" / "notes")
    with pytest.raises(ConfigError) as caught:
        read_harbor(tmp_path / "suite")
    assert [p.field for p in caught.value.problems] == ["steps", "bogus"]


def test_an_empty_or_missing_suite_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="holds no Harbor task"):
        read_harbor(tmp_path)
    with pytest.raises(ConfigError, match="not a folder of Harbor tasks"):
        read_harbor(tmp_path / "nothing")


def test_toml_lines() -> None:
    text = """# a comment
top = 1
[a]
x = 1
"y.z" = 2
b.c = 3
s = '''
[not]
k = 1
'''
t = 4
[[arr]]
[ d . e ]  # spaced
f={ g = 1 }
"""
    assert toml_lines(text) == {
        ("top",): 2, ("a",): 3, ("a", "x"): 4, ("a", "y.z"): 5, ("a", "b", "c"): 6,
        ("a", "s"): 7, ("a", "t"): 11, ("arr",): 12, ("d", "e"): 13, ("d", "e", "f"): 14,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("environment", "refused"),
    [
        # the review's case: a sound memory_mb hid an absurd memory
        ('memory_mb = 512\nmemory = "999999G"\n', ["3: environment.memory: '999999G' is over"]),
        ('memory_mb = 99999999999\nmemory = "1G"\n', ["2: environment.memory_mb: 99999999999"]),
        ('memory_mb = 8\nmemory = "lots"\n', ["3: environment.memory: must be a size",
                                              "2: environment.memory_mb: 8 is under"]),
        ('memory_mb = 512\nmemory = "1G"\n', ["3: environment.memory: says 1024 MB and "
                                              "memory_mb says 512 MB: keep one of them"]),
        ('storage_mb = 512\nstorage = "x"\n', ["3: environment.storage: must be a size"]),
        ('storage_mb = 512\nstorage = "1G"\n', ["3: environment.storage: says 1024 MB"]),
    ],
)  # fmt: skip
def test_both_spellings_of_a_size_are_checked(
    tmp_path: Path, environment: str, refused: list[str]
) -> None:
    root = make_task(tmp_path / "t", "[environment]\n" + environment)
    with pytest.raises(ConfigError) as caught:
        read_harbor(root)
    said = [str(p) for p in caught.value.problems]
    assert len(said) == len(refused), said
    for got, want in zip(said, refused, strict=True):
        assert got.startswith(f"{root}/task.toml:{want}"), got


def test_two_spellings_of_one_size_agree(tmp_path: Path) -> None:
    root = make_task(tmp_path / "t", '[environment]\nmemory_mb = 1024\nmemory = "1G"\n')
    (task,) = read_harbor(root)
    assert task.environment.memory_mb == 1024


def test_a_task_toml_nested_too_deeply_is_located(tmp_path: Path) -> None:
    """A suite is a stranger's: 600 levels of `[` once ended tomllib in a RecursionError."""
    root = make_task(tmp_path / "t", "x = " + "[" * 600 + "]" * 600 + "\n")
    with pytest.raises(ConfigError) as caught:
        read_harbor(root)
    (problem,) = caught.value.problems
    assert problem.file == str(root / "task.toml") and "nested too deeply" in problem.message
