"""SWE-bench instances read into SuiteTasks (the fixture and a table of broken ones), and
the verifier's verdict on their logs (the grading itself is in test_swe_grading.py).

The fixture (tests/fixtures/suites/swe-bench) is a tiny repository, tinycalc, whose
instance has two FAIL_TO_PASS and five PASS_TO_PASS unittest ids (read by swebench's
`parse_log_django`, the parser of unittest's verbose output). Its logs under `logs/` were
recorded by running the instance's eval script in the fixture's image (the slow test of
test_swe_grading.py does the same and grades live).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runner.errors import ConfigError
from runner.suites.swe_bench import (
    DEFAULT_IMAGE_TEMPLATE,
    MAX_SCRIPT_BYTES,
    image_id,
    read_swe_bench,
)
from tests.support import paths
from tests.support.suites import SWE_BENCH as FIXTURE
from tests.support.suites import SWE_INSTANCES as INSTANCES

GOOD: dict[str, Any] = json.loads(INSTANCES.read_text())
F2P = tuple(json.loads(GOOD["FAIL_TO_PASS"]))
P2P = tuple(json.loads(GOOD["PASS_TO_PASS"]))


def write_jsonl(tmp_path: Path, *instances: object) -> Path:
    path = tmp_path / "instances.jsonl"
    path.write_text("".join(json.dumps(i) + "\n" for i in instances))
    return path


def problems_of(path: Path, **kwargs: Any) -> list[str]:
    with pytest.raises(ConfigError) as err:
        read_swe_bench(path, **kwargs)
    return [str(p) for p in err.value.problems]


# -- reading -----------------------------------------------------------------------------


def test_the_fixture_reads_as_one_task() -> None:
    (task,) = read_swe_bench(INSTANCES, build_dir=Path("."))
    assert task.id == "runner-fixtures__tinycalc-1" and task.format == "swe-bench"
    assert task.source == INSTANCES
    assert task.environment.workdir == "/testbed"
    assert task.environment.build_dir == FIXTURE and task.environment.image is None
    assert task.environment.network == "none"
    assert GOOD["problem_statement"] in task.instruction
    assert "runner-fixtures/tinycalc" in task.instruction
    v = task.verifier
    assert v.grading == "swe-bench" and v.tests_dir is None and v.timeout_s == 1800
    assert v.fail_to_pass == F2P and v.pass_to_pass == P2P
    assert v.test_patch == GOOD["test_patch"] and v.repo == GOOD["repo"]
    assert v.log_parser == "parse_log_django" and v.eval_type is None
    assert v.command[:2] == ("bash", "-c")
    assert task.solution is not None and task.solution.patch == GOOD["patch"]
    assert ("version", "1.0") in task.metadata and task.tags == (GOOD["repo"],)


def test_images_official_naming_template_and_instance_field(tmp_path: Path) -> None:
    (task,) = read_swe_bench(INSTANCES)
    assert (
        task.environment.image == "swebench/sweb.eval.x86_64.runner-fixtures_1776_tinycalc-1:latest"
    )
    assert DEFAULT_IMAGE_TEMPLATE.format(image_id=image_id("Django__Django-11099")) == (
        "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
    )
    (task,) = read_swe_bench(INSTANCES, image_template="registry.example/{repo}:{version}")
    assert task.environment.image == "registry.example/runner-fixtures/tinycalc:1.0"
    # swebench 5 datasets name the image per instance; a user's template still wins.
    path = write_jsonl(tmp_path, {**GOOD, "image": "mirror.example/sweb:tinycalc"})
    assert read_swe_bench(path)[0].environment.image == "mirror.example/sweb:tinycalc"
    assert read_swe_bench(path, image_template="x/{image_id}")[0].environment.image == (
        "x/runner-fixtures_1776_tinycalc-1"
    )


def test_the_prompt_template_is_the_user_s(tmp_path: Path) -> None:
    template = "Fix {instance_id} in {workdir} ({repo}@{base_commit}):\n{problem_statement}{{x}}"
    (task,) = read_swe_bench(INSTANCES, prompt_template=template)
    assert task.instruction == (
        f"Fix runner-fixtures__tinycalc-1 in /testbed (runner-fixtures/tinycalc@"
        f"{GOOD['base_commit']}):\n{GOOD['problem_statement']}{{x}}"
    )
    # A placeholder's text is never read as a template itself.
    path = write_jsonl(tmp_path, {**GOOD, "problem_statement": "{hints_text} {0} {"})
    assert read_swe_bench(path)[0].instruction.count("{hints_text} {0} {") == 1


@pytest.mark.parametrize(
    ("template", "says"),
    [
        ("{nope}", "{nope} is not a placeholder here"),
        ("{repo.__class__}", "{repo.__class__} is not a placeholder"),
        ("{repo!r}", "{repo!r} is not a placeholder"),
        ("{repo:>9}", "{repo:>9} is not a placeholder"),
        ("{0}", "{0} is not a placeholder"),
        ("{repo", "not a valid template"),
    ],
)
def test_templates_take_only_their_placeholders(template: str, says: str) -> None:
    (found,) = problems_of(INSTANCES, prompt_template=template)
    assert found.startswith("prompt_template: prompt_template: ") and says in found
    assert "{problem_statement}" in found or "not a valid template" in found
    (found,) = problems_of(INSTANCES, image_template=template)
    assert "image_template" in found and says in found


def test_a_json_list_reads_as_well(tmp_path: Path) -> None:
    path = tmp_path / "instances.json"
    second = {**GOOD, "instance_id": "runner-fixtures__tinycalc-2"}
    path.write_text(json.dumps([GOOD, second], indent=2))
    assert [t.id for t in read_swe_bench(path)] == [GOOD["instance_id"], second["instance_id"]]
    path.write_text(json.dumps([GOOD, {**second, "repo": 3}]))
    assert problems_of(path) == [f"{path}: [1].repo: expected a string, got a number"]


def test_real_lists_of_test_ids_are_read_too(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path, {**GOOD, "FAIL_TO_PASS": list(F2P), "PASS_TO_PASS": []})
    (task,) = read_swe_bench(path)
    assert task.verifier.fail_to_pass == F2P and task.verifier.pass_to_pass == ()


def _without(key: str) -> dict[str, Any]:
    return {k: v for k, v in GOOD.items() if k != key}


BROKEN: list[tuple[str, dict[str, Any], str, str]] = [
    ("missing repo", _without("repo"), "repo", "missing"),
    ("missing patch", _without("patch"), "patch", "missing"),
    ("no parser for the repo", _without("log_parser"), "log_parser",
     "maps no parser to 'runner-fixtures/tinycalc'"),
    ("repo shape", {**GOOD, "repo": "tinycalc"}, "repo", "is not owner/name"),
    ("id shape", {**GOOD, "instance_id": "../x"}, "instance_id", "letters, digits"),
    ("commit", {**GOOD, "base_commit": "HEAD"}, "base_commit", "commit id"),
    ("f2p not json", {**GOOD, "FAIL_TO_PASS": "[oops"}, "FAIL_TO_PASS", "not a JSON list"),
    ("f2p numbers", {**GOOD, "FAIL_TO_PASS": "[1, 2]"}, "FAIL_TO_PASS", "got a list"),
    ("p2p object", {**GOOD, "PASS_TO_PASS": {"a": 1}}, "PASS_TO_PASS", "got an object"),
    ("p2p missing", _without("PASS_TO_PASS"), "PASS_TO_PASS", "missing"),
    ("null text", {**GOOD, "problem_statement": None}, "problem_statement", "missing"),
    ("misspelt field", {**GOOD, "test_cmdd": "x"}, "test_cmdd", "did you mean test_cmd?"),
    ("misspelt list", {**GOOD, "PASS_TO_PAS": "[]"}, "PASS_TO_PAS", "did you mean PASS_TO_PASS?"),
    ("parser name", {**GOOD, "log_parser": "pytest"}, "log_parser", "PARSER_REGISTRY"),
    ("eval type", {**GOOD, "eval_type": "both"}, "eval_type", "pass_and_fail, fail_only"),
    ("no way to test", _without("test_cmd"), "eval_script",
     "no longer derives the test command from the repo and version"),
    ("both ways", {**GOOD, "eval_script": "echo '>>>>> End Test Output'"}, "test_cmd", "not both"),
    ("unmarked script", {**_without("test_cmd"), "eval_script": "pytest"}, "eval_script",
     "does not print '>>>>> End Test Output'"),
    ("test patch", {**GOOD, "test_patch": "not a diff"}, "test_patch", "not a git diff"),
    ("assets", {**GOOD, "image_assets": '{"test_patch": []}'}, "image_assets", "not supported"),
    ("too big", {**GOOD, "test_patch": GOOD["test_patch"] + "+x\n" * (MAX_SCRIPT_BYTES // 3)},
     "test_patch", f"of at most {MAX_SCRIPT_BYTES}"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "instance", "field", "says"), BROKEN, ids=[b[0] for b in BROKEN])
def test_a_broken_instance_is_located(
    tmp_path: Path, case: str, instance: dict[str, Any], field: str, says: str
) -> None:
    other = {**GOOD, "instance_id": "runner-fixtures__tinycalc-0"}
    path = write_jsonl(tmp_path, other, instance)
    found = problems_of(path)
    assert len(found) == 1, found
    assert found[0].startswith(f"{path}:2: {field}: ") and says in found[0], found[0]


@pytest.mark.parametrize(
    ("repo", "parser"),
    [
        ("django/django", "parse_log_django"),
        ("sympy/sympy", "parse_log_sympy"),
        ("pytest-dev/pytest", "parse_log_pytest"),
        ("redis/redis", "parse_log_redis"),
        ("burntsushi/ripgrep", "parse_log_cargo"),
    ],
)
def test_a_classic_instance_gets_the_parser_its_repo_maps_to(
    tmp_path: Path, repo: str, parser: str
) -> None:
    """The classic datasets name no parser; the swebench package's own per-language maps
    give it by repo (its name as PARSER_REGISTRY files that function)."""
    (task,) = read_swe_bench(write_jsonl(tmp_path, {**_without("log_parser"), "repo": repo}))
    assert task.verifier.log_parser == parser


def test_an_aliased_parser_is_named_as_the_registry_files_it(tmp_path: Path) -> None:
    """astropy's parser is an alias of another function: whichever registry name comes
    back, it is the very function the package's map gives for the repo."""
    from swebench.harness.log_parsers import PARSER_REGISTRY
    from swebench.harness.log_parsers.python import MAP_REPO_TO_PARSER_PY

    instance = {**_without("log_parser"), "repo": "astropy/astropy"}
    (task,) = read_swe_bench(write_jsonl(tmp_path, instance))
    assert task.verifier.log_parser is not None
    assert PARSER_REGISTRY[task.verifier.log_parser] is MAP_REPO_TO_PARSER_PY["astropy/astropy"]


def test_an_instance_naming_its_parser_keeps_it(tmp_path: Path) -> None:
    instance = {**GOOD, "repo": "django/django", "log_parser": "parse_log_pytest"}
    (task,) = read_swe_bench(write_jsonl(tmp_path, instance))
    assert task.verifier.log_parser == "parse_log_pytest"


def test_without_swebench_a_classic_instance_says_how_to_get_its_parser(tmp_path: Path) -> None:
    """A fresh interpreter in which the swebench package cannot be imported."""
    path = write_jsonl(tmp_path, {**_without("log_parser"), "repo": "django/django"})
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "sys.modules['swebench'] = None\n"
        "from runner.errors import ConfigError\n"
        "from runner.suites.swe_bench import read_swe_bench\n"
        "try:\n"
        f"    read_swe_bench(Path({str(path)!r}))\n"
        "except ConfigError as exc:\n"
        "    print(*exc.problems, sep='\\n')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True,
        timeout=120, check=True, cwd=paths.ROOT,
    )  # fmt: skip
    (line,) = done.stdout.splitlines()
    assert line.startswith(f"{path}:1: log_parser: missing, and runner takes the default"), line
    assert "swebench package is not installed" in line and "pip install" in line


def test_every_problem_of_a_file_is_told_at_once(tmp_path: Path) -> None:
    path = tmp_path / "instances.jsonl"
    other = {**_without("repo"), "version": 1.0, "instance_id": "other-1"}
    lines = [json.dumps(GOOD), "", json.dumps(other), "[]"]
    path.write_text("\n".join(lines) + "\n")
    assert problems_of(path) == [  # one without an id first: it names no instance
        f"{path}:4: (instance): expected an object with the SWE-bench fields, got a list",
        f"{path}:3: repo: missing",
        f"{path}:3: version: expected a string, got a number",
    ]
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(GOOD) + "\n")
    assert problems_of(path) == [
        f"{path}:2: instance_id: 'runner-fixtures__tinycalc-1' is already the id of line 1"
    ]


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"", ": (instances): holds no instance"),
        (b"\n  \n", ": (instances): holds no instance"),
        (b'{"repo": 1}\n{oops\n', ":2: (line): not a JSON object"),
        (b'[{"repo": 1},\n oops]', ":2: (file): not valid JSON"),
        (b"\n\xff\n", ":2: (file): not UTF-8 text"),
        (b"[" * 100_000 + b"]" * 100_000, ": (file): nested too deeply"),
    ],
)
def test_a_broken_file_is_located(tmp_path: Path, content: bytes, says: str) -> None:
    path = tmp_path / "instances.jsonl"
    path.write_bytes(content)
    (found,) = problems_of(path)
    assert found.startswith(f"{path}{says}"), found


def test_a_missing_file_a_fifo_and_a_build_dir_without_dockerfile(tmp_path: Path) -> None:
    assert problems_of(tmp_path / "none.jsonl") == [
        f"{tmp_path / 'none.jsonl'}: (file): cannot read: No such file or directory"
    ]
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    (found,) = problems_of(fifo)  # refused, never waited on
    assert "FIFO" in found
    (found,) = problems_of(INSTANCES, build_dir=Path("repo"))
    assert found == f"{INSTANCES}: build_dir: repo is not a folder with a Dockerfile"


# -- the fixture is what its instance says ------------------------------------------------


def _git(cwd: Path, *args: str, stdin: str | None = None) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(
        ["git", *args], cwd=cwd, input=stdin, capture_output=True, text=True, env=env,
        timeout=60, check=True,
    )  # fmt: skip
    return done.stdout


def test_the_fixture_repository_is_at_base_commit_and_both_patches_apply(tmp_path: Path) -> None:
    repo = tmp_path / "testbed"
    shutil.copytree(FIXTURE / "repo", repo)
    built = subprocess.run(
        ["sh", str(FIXTURE / "build_repo.sh"), str(repo)], capture_output=True, text=True,
        timeout=60, check=True, env={**os.environ, "HOME": str(tmp_path)},
    ).stdout.strip()  # fmt: skip
    assert built == GOOD["base_commit"]
    assert f'test "$(sh /build_repo.sh /testbed)" = {built}' in (
        (FIXTURE / "Dockerfile").read_text()
    )
    _git(repo, "apply", "--check", "-", stdin=GOOD["patch"])
    _git(repo, "apply", "-", stdin=GOOD["test_patch"])
    _git(repo, "apply", "--check", "-", stdin=(FIXTURE / "partial.diff").read_text())


def test_dataset_columns_runner_does_not_read_are_kept_as_metadata(tmp_path: Path) -> None:
    """SWE-bench Verified's rows carry `difficulty`; a public dataset must read as it is."""
    path = tmp_path / "verified.jsonl"
    row = {**GOOD, "difficulty": "15 min - 1 hour", "nested": {"a": 1}}
    path.write_text(json.dumps(row) + "\n")
    (task,) = read_swe_bench(path)
    assert ("difficulty", "15 min - 1 hour") in task.metadata
    assert all(key != "nested" for key, _ in task.metadata)
