"""The task file: a corpus of broken files run through `runner validate`, unit tests of
`parse_task_file` / `resolve`, and a fuzz test of the loader.

Corpus files live in tests/config_corpus/. Each bad file starts with comment lines saying
what `runner validate` must report:

    # expect-file: suites/t1/task.toml      the file the problems are in, relative to
                                            this one (omit: this file; a suite's own
                                            files are named themselves)
    # expect-line: 7                        the problem's line (omit: any or none)
    # expect-field: tasks[0].limits.max_requests
    # expect-message: greater than or equal to 1      substring; may repeat
    # expect-no-message: instance of        must appear nowhere on stderr; may repeat
    # xfail: why                            a known bug: the test must fail until it is fixed
    # env: NAME=value ...                   environment `runner validate` runs with (keys)

`good_*.yaml` files must validate. A file that cannot carry comments (the empty file) has
its expectation in HEADERLESS below.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.config import (
    DEFAULT_TOOLS,
    Limits,
    ModelOptions,
    TaskFile,
    fingerprint,
    parse_task_file,
    resolve,
)
from runner.errors import ConfigError
from tests.support import paths
from tests.support.cli import run_cli
from tests.support.taskfiles import parse, problems

CORPUS = paths.TESTS / "config_corpus"


# ---------------------------------------------------------------- the corpus


@dataclass(frozen=True)
class Expect:
    file: str | None = None
    line: int | None = None
    field: str | None = None
    messages: tuple[str, ...] = ()
    forbidden: tuple[str, ...] = ()
    xfail: str | None = None


HEADERLESS = {
    "empty.yaml": Expect(line=1, field="(top level)", messages=("the file is empty",)),
}

_HEADER = re.compile(
    r"#\s*(expect-file|expect-line|expect-field|expect-message|expect-no-message|xfail):"
    r"\s?(.*)"
)


def read_expect(path: Path) -> Expect:
    if path.name in HEADERLESS:
        return HEADERLESS[path.name]
    # latin-1 never fails, so the header of the non-UTF-8 file reads too.
    text = path.read_bytes().decode("latin-1").removeprefix("\xef\xbb\xbf")
    got: dict[str, Any] = {"messages": [], "forbidden": []}
    for raw in text.splitlines():
        if not raw.startswith("#"):
            break
        m = _HEADER.fullmatch(raw.rstrip())
        if m is None:
            continue
        key, value = m.group(1), m.group(2)
        if key == "expect-file":
            got["file"] = value
        elif key == "expect-line":
            got["line"] = int(value)
        elif key == "expect-field":
            got["field"] = value
        elif key == "expect-message":
            got["messages"].append(value)
        elif key == "expect-no-message":
            got["forbidden"].append(value)
        else:
            got["xfail"] = value
    got["messages"], got["forbidden"] = tuple(got["messages"]), tuple(got["forbidden"])
    exp = Expect(**got)
    assert exp.field or exp.messages or exp.line, f"{path.name}: no expectation in its header"
    return exp


GOOD = sorted(CORPUS.glob("good_*.yaml"))
BAD = sorted(p for p in CORPUS.glob("*.yaml") if not p.name.startswith("good_"))


def _params(paths: list[Path]) -> list[Any]:
    out = []
    for p in paths:
        reason = read_expect(p).xfail if p in BAD else None
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        out.append(pytest.param(p, id=p.stem, marks=marks))
    return out


def file_env(path: Path) -> dict[str, str]:
    """The `# env:` header of a corpus file: the key variables its providers need."""
    if not path.is_file() or path.name in HEADERLESS:
        return {}
    found: dict[str, str] = {}
    for raw in path.read_bytes().decode("latin-1").splitlines():
        if not raw.startswith("#"):
            break
        if raw.startswith("# env:"):
            found.update(pair.split("=", 1) for pair in raw[6:].split())
    return found


def run_validate(
    target: Path | str, cwd: Path | None = None, *flags: str
) -> subprocess.CompletedProcess[str]:
    keys = tuple(k for k in os.environ if k.endswith("_API_KEY")) + ("FAKE_API_KEY",)
    return run_cli("validate", str(target), *flags, env=file_env(Path(target)), unset=keys, cwd=cwd)


@pytest.fixture(scope="module")
def validated() -> dict[Path, subprocess.CompletedProcess[str]]:
    """`runner validate` on every corpus file, once for the module."""
    return {path: run_validate(path) for path in GOOD + BAD}


def test_corpus_is_big_enough() -> None:
    assert len(BAD) >= 25 and len(GOOD) >= 3


def _no_traceback(res: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in res.stdout + res.stderr, res.stderr


@pytest.mark.timeout(600)  # the first one waits for every file of the corpus
@pytest.mark.parametrize("path", _params(BAD))
def test_bad_file(path: Path, validated: dict[Path, subprocess.CompletedProcess[str]]) -> None:
    exp = read_expect(path)
    res = validated[path]
    _no_traceback(res)
    assert res.returncode == 2, f"exit {res.returncode}\nstdout: {res.stdout}\n{res.stderr}"
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert lines, "no error printed"
    named = path.parent / exp.file if exp.file else path
    for line in lines:  # every line is one located problem, nothing else
        assert line.startswith(f"error: {named}"), f"stray stderr line: {line!r}"
    where = re.escape(str(named)) + (f":{exp.line}" if exp.line else r"(:\d+)?")
    what = re.escape(exp.field) if exp.field else r"[^:]+"
    head = re.compile(rf"error: {where}: {what}: ")
    matching = [ln for ln in lines if head.match(ln)]
    assert matching, f"no problem at {where}: {exp.field}; got:\n{res.stderr}"
    assert any(all(m in ln for m in exp.messages) for ln in matching), (
        f"expected {exp.messages} in one of:\n" + "\n".join(matching)
    )
    for bad in exp.forbidden:
        assert bad not in res.stderr


@pytest.mark.timeout(600)
@pytest.mark.parametrize("path", _params(GOOD))
def test_good_file(path: Path, validated: dict[Path, subprocess.CompletedProcess[str]]) -> None:
    res = validated[path]
    _no_traceback(res)
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    tf = parse_task_file(path.read_text(encoding="utf-8-sig"), str(path))
    assert res.stdout.endswith(f"{path}: ok, {len(tf.tasks)} task(s), {len(tf.tasks)} run(s)\n")
    for task in tf.tasks:
        assert f"{task.id}: " in res.stdout


def test_validate_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    res = run_validate(missing)
    _no_traceback(res)
    assert res.returncode == 2
    assert res.stderr == f"error: {missing}: (file): cannot read: No such file or directory\n"


def test_validate_directory(tmp_path: Path) -> None:
    res = run_validate(tmp_path)
    _no_traceback(res)
    assert res.returncode == 2
    assert res.stderr == f"error: {tmp_path}: (file): cannot read: Is a directory\n"


@pytest.mark.parametrize("kind", ["fifo", "device", "huge"])
def test_a_task_file_that_is_no_regular_file_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    """A FIFO would block the read forever and /dev/zero would fill memory: both are
    refused before anything is read; a huge regular file is read only up to the cap."""
    target = tmp_path / "tasks.yaml"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "device":
        target = Path("/dev/zero")
    else:
        with target.open("wb") as f:
            f.truncate(64 * 1024 * 1024)  # sparse: 64 MiB of NULs
    t0 = time.monotonic()
    res = run_validate(target, None, "--offline")
    assert time.monotonic() - t0 < 30
    _no_traceback(res)
    assert res.returncode == 2
    says = "larger than" if kind == "huge" else "not a regular file"
    assert res.stderr.startswith(f"error: {target}: (file): ") and says in res.stderr


def test_validate_resolves_paths_against_the_file_not_the_cwd(tmp_path: Path) -> None:
    (tmp_path / "proj" / "src").mkdir(parents=True)
    (tmp_path / "proj" / "base.md").write_text("base\n", encoding="utf-8")
    (tmp_path / "elsewhere").mkdir()
    task_file = tmp_path / "proj" / "tasks.yaml"
    task_file.write_text(
        "version: 1\ndefaults: {instructions_file: base.md}\n"
        "tasks: [{id: a, prompt: p, repo: src}]\n",
        encoding="utf-8",
    )
    res = run_validate(Path("..") / "proj" / "tasks.yaml", tmp_path / "elsewhere", "--offline")
    assert res.returncode == 0, res.stderr
    assert f"repo {tmp_path / 'proj' / 'src'}\n" in res.stdout


LATE_REFUSALS = [
    "key_not_set",
    "repo_not_git",
    "max_cost_without_price",
    "branch_template_unknown_field",
    "run_names_collide",
    "run_names_collide_sanitised",
    "instructions_file_not_utf8",
    "instructions_file_blank",
]


@pytest.mark.parametrize("name", LATE_REFUSALS)
def test_run_refuses_what_validate_refuses_before_any_work(name: str, tmp_path: Path) -> None:
    """`run` makes the same checks first, with the same located message, and starts
    nothing: no report, no journal, no engine."""
    path = CORPUS / f"{name}.yaml"
    checked = run_validate(path)
    out = tmp_path / "out"
    keys = tuple(k for k in os.environ if k.endswith("_API_KEY")) + ("FAKE_API_KEY",)
    ran = run_cli("run", path, "--out", out, unset=keys)
    assert checked.returncode == ran.returncode == 2, ran.stderr
    assert ran.stderr == checked.stderr and ran.stderr.startswith(f"error: {path}:")
    assert not out.exists()


def test_offline_validate_skips_only_what_needs_this_machine() -> None:
    for name in ("key_not_set", "repo_not_git"):
        res = run_validate(CORPUS / f"{name}.yaml", None, "--offline")
        assert res.returncode == 0, res.stderr
    res = run_validate(CORPUS / "branch_template_unknown_field.yaml", None, "--offline")
    assert res.returncode == 2 and "unknown field {nope}" in res.stderr


def test_run_model_override_with_unknown_provider_names_the_flag(tmp_path: Path) -> None:
    task_file = tmp_path / "t.yaml"
    task_file.write_text("version: 1\ntasks: [{id: a, prompt: p}]\n", encoding="utf-8")
    res = run_cli("run", task_file, "--model", "nosuch/x", "--out", tmp_path / "out")
    _no_traceback(res)
    assert res.returncode == 2
    assert "--model" in res.stderr and "tasks[0].model" not in res.stderr


# ---------------------------------------------------------------- parse_task_file


def test_parse_unknown_provider_knows_declared_providers() -> None:
    tf = parse(
        "version: 1\nproviders: {mine: {base_url: 'http://h/v1'}}\n"
        "tasks: [{id: a, prompt: p, model: mine/m}]\n"
    )
    assert "mine" in tf.providers
    [p] = problems(
        "version: 1\nproviders: {mine: {base_url: 'http://h/v1'}}\n"
        "tasks: [{id: a, prompt: p, model: theirs/m}]\n"
    )
    assert (p.line, p.field) == (3, "tasks[0].model")
    assert "unknown provider 'theirs'" in p.message and "mine" in p.message


def test_parse_top_level_not_a_mapping_points_at_the_document() -> None:
    [p] = problems("# comment\n\n- id: a\n  prompt: p\n")
    assert (p.line, p.field) == (3, "(top level)")


def test_parse_top_level_scalar_points_at_the_document() -> None:
    [p] = problems("# comment\n---\njust words\n")
    assert (p.line, p.field) == (3, "(top level)")


def test_parse_deep_nesting_is_a_problem() -> None:
    [p] = problems("version: 1\ntasks: [{id: a, prompt: p}]\nx: " + "[" * 3000 + "]" * 3000)
    assert p.field == "(syntax)" and "nested too deeply" in p.message


def test_parse_task_files_compare_by_content_not_layout() -> None:
    a = parse("version: 1\ntasks: [{id: a, prompt: p}]\n")
    b = parse("# a comment\nversion: 1\ntasks:\n  - id: a\n    prompt: p\n")
    assert a == b


# ---------------------------------------------------------------- resolve

EVERY_FIELD_DEFAULTS = """\
version: 1
providers: {mine: {base_url: "http://127.0.0.1:9/v1"}}
defaults:
  model: openai/gpt-5.5
  instructions_file: base.md
  developer_instructions: be brief
  tools: [shell]
  sandbox: read-only
  limits: {max_requests: 5, timeout_s: 60}
  model_options: {temperature: 0.5}
  shell_timeout_ms: 2000
tasks:
  - id: inherits
    prompt: p
  - id: overrides
    prompt: p
    repo: sub
    model: mine/qwen
    instructions_file: sub/own.md
    developer_instructions: be thorough
    tools: [apply_patch, update_plan]
    sandbox: workspace-write
    limits: {max_requests: 9, timeout_s: 90}
    model_options: {top_p: 0.3}
    shell_timeout_ms: 3000
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "sub").mkdir()
    (tmp_path / "base.md").write_text("base\n", encoding="utf-8")
    (tmp_path / "sub" / "own.md").write_text("own\n", encoding="utf-8")
    return tmp_path


def test_resolve_defaults_apply_and_task_values_win(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir("/")  # relative paths must not depend on the working directory
    inherits, overrides = resolve(parse(EVERY_FIELD_DEFAULTS), project, file="t.yaml")

    assert (inherits.provider_name, inherits.model) == ("openai", "gpt-5.5")
    assert inherits.provider.base_url == "https://api.openai.com/v1"
    assert inherits.repo == project
    assert inherits.instructions_file == project / "base.md"
    assert inherits.developer_instructions == "be brief"
    assert inherits.tools == ("shell",)
    assert inherits.sandbox == "read-only"
    assert inherits.limits == Limits(max_requests=5, timeout_s=60)
    # openai/gpt-5.5 gets Codex's defaults under the task file's options.
    assert inherits.model_options == ModelOptions(
        temperature=0.5, reasoning_effort="medium", verbosity="low", parallel_tool_calls=True
    )
    assert inherits.shell_timeout_ms == 2000

    assert (overrides.provider_name, overrides.model) == ("mine", "qwen")
    assert overrides.provider.base_url == "http://127.0.0.1:9/v1"
    assert overrides.repo == project / "sub"
    assert overrides.instructions_file == project / "sub" / "own.md"
    assert overrides.developer_instructions == "be thorough"
    assert overrides.tools == ("apply_patch", "update_plan")
    assert overrides.sandbox == "workspace-write"
    assert overrides.limits == Limits(max_requests=9, timeout_s=90)
    # model_options merge field by field, like limits: the default temperature stays.
    assert overrides.model_options == ModelOptions(temperature=0.5, top_p=0.3)
    assert overrides.shell_timeout_ms == 3000


def test_resolve_builtin_defaults(tmp_path: Path) -> None:
    [t] = resolve(parse("version: 1\ntasks: [{id: a, prompt: p, turns: [more]}]\n"), tmp_path)
    assert (t.provider_name, t.model) == ("local", "smollm2")
    assert t.provider.wire_api == "chat"
    assert t.repo == tmp_path and t.instructions_file is None
    assert t.developer_instructions is None
    assert t.tools == DEFAULT_TOOLS
    assert t.sandbox == "workspace-write"
    assert t.network_access is False and t.writable_roots == ()
    assert t.limits == Limits() and t.limits.max_requests == 500 and t.limits.timeout_s == 1800
    assert t.model_options == ModelOptions()
    assert t.shell_timeout_ms == 10_000
    assert (t.prompt, t.turns) == ("p", ("more",))


def test_resolve_task_tools_empty_list_means_no_tools(tmp_path: Path) -> None:
    [t] = resolve(
        parse("version: 1\ndefaults: {tools: [shell]}\ntasks: [{id: a, prompt: p, tools: []}]\n"),
        tmp_path,
    )
    assert t.tools == ()


def test_resolve_defaults_tools_empty_list_means_no_tools(tmp_path: Path) -> None:
    [t] = resolve(
        parse("version: 1\ndefaults: {tools: []}\ntasks: [{id: a, prompt: p}]\n"), tmp_path
    )
    assert t.tools == ()


def test_resolve_limits_merge_field_by_field(tmp_path: Path) -> None:
    [t] = resolve(
        parse(
            "version: 1\ndefaults: {limits: {timeout_s: 60}}\n"
            "tasks: [{id: a, prompt: p, limits: {max_requests: 5}}]\n"
        ),
        tmp_path,
    )
    assert t.limits == Limits(max_requests=5, timeout_s=60)


def test_resolve_relative_paths_against_base_dir(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project / "sub")
    [t] = resolve(
        parse(
            "version: 1\ntasks: [{id: a, prompt: p, repo: sub/.., "
            "instructions_file: ./sub/own.md}]\n"
        ),
        project,
    )
    assert t.repo == project
    assert t.instructions_file == project / "sub" / "own.md"


def test_resolve_absolute_paths_are_kept(project: Path) -> None:
    [t] = resolve(
        parse(
            f"version: 1\ntasks: [{{id: a, prompt: p, repo: '{project / 'sub'}', "
            f"instructions_file: '{project / 'base.md'}'}}]\n"
        ),
        Path("/"),
    )
    assert t.repo == project / "sub" and t.instructions_file == project / "base.md"


def test_resolve_missing_paths_are_problems(project: Path) -> None:
    with pytest.raises(ConfigError) as info:
        resolve(
            parse(
                "version: 1\ntasks:\n"
                "  - {id: a, prompt: p, repo: nowhere}\n"
                "  - {id: b, prompt: p, instructions_file: sub}\n"
            ),
            project,
            file="t.yaml",
        )
    got = {(p.file, p.field, p.message) for p in info.value.problems}
    assert got == {
        ("t.yaml", "tasks[0].repo", f"{project / 'nowhere'} is not a directory"),
        ("t.yaml", "tasks[1].instructions_file", f"{project / 'sub'} is not a file"),
    }


def test_resolve_missing_default_instructions_file_names_defaults(project: Path) -> None:
    with pytest.raises(ConfigError) as info:
        resolve(
            parse(
                "version: 1\ndefaults: {instructions_file: gone.md}\n"
                "tasks: [{id: a, prompt: p}, {id: b, prompt: p}]\n"
            ),
            project,
        )
    assert [p.field for p in info.value.problems] == ["defaults.instructions_file"]


def test_resolve_symlink_loop_is_a_problem(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(ConfigError) as info:
        resolve(parse("version: 1\ntasks: [{id: t, prompt: p, repo: a}]\n"), tmp_path)
    assert info.value.problems[0].field == "tasks[0].repo"


def test_resolve_model_override(tmp_path: Path) -> None:
    tf = parse(
        "version: 1\nproviders: {mine: {base_url: 'http://h/v1'}}\n"
        "defaults: {model: openai/gpt-5.5}\n"
        "tasks: [{id: a, prompt: p, model: ollama/llama3}, {id: b, prompt: p}]\n"
    )
    a, b = resolve(tf, tmp_path, model_override="mine/big/model:1")
    for t in (a, b):
        assert (t.provider_name, t.model) == ("mine", "big/model:1")
        assert t.provider.base_url == "http://h/v1"
    a, b = resolve(tf, tmp_path)
    assert (a.provider_name, a.model, b.provider_name, b.model) == (
        "ollama",
        "llama3",
        "openai",
        "gpt-5.5",
    )
    with pytest.raises(ConfigError) as info:
        resolve(tf, tmp_path, model_override="nosuch/x")
    assert all("unknown provider 'nosuch'" in p.message for p in info.value.problems)


def test_declared_provider_overrides_builtin(tmp_path: Path) -> None:
    tf = parse(
        "version: 1\nproviders: {openai: {base_url: 'http://proxy/v1'}}\n"
        "tasks: [{id: a, prompt: p, model: openai/x}]\n"
    )
    [t] = resolve(tf, tmp_path)
    # Field by field: the built-in key variable, headers and compaction stay.
    assert t.provider.base_url == "http://proxy/v1" and t.provider.env_key == "OPENAI_API_KEY"
    assert t.provider.remote_compaction is True


def test_resolve_model_options_merge_field_by_field(tmp_path: Path) -> None:
    tf = parse(
        "version: 1\ndefaults: {model_options: {temperature: 0.5, seed: 1}}\n"
        "tasks:\n  - {id: a, prompt: p, model_options: {seed: 7}}\n"
        "  - {id: b, prompt: p, model_options: {temperature: null}}\n"
        "  - {id: c, prompt: p}\n"
    )
    a, b, c = resolve(tf, tmp_path)
    assert a.model_options == ModelOptions(temperature=0.5, seed=7)
    assert b.model_options == ModelOptions(seed=1)  # an explicit null unsets the default
    assert c.model_options == ModelOptions(temperature=0.5, seed=1)


def test_resolve_problems_carry_lines(project: Path) -> None:
    with pytest.raises(ConfigError) as info:
        resolve(
            parse(
                "version: 1\ntasks:\n  - id: a\n    prompt: p\n    repo: nowhere\n"
                "  - id: b\n    prompt: p\n    instructions_file: gone.md\n"
            ),
            project,
            file="t.yaml",
        )
    assert {(p.line, p.field) for p in info.value.problems} == {
        (5, "tasks[0].repo"),
        (8, "tasks[1].instructions_file"),
    }


def test_resolve_missing_default_instructions_file_has_its_line(project: Path) -> None:
    with pytest.raises(ConfigError) as info:
        resolve(
            parse(
                "version: 1\ndefaults:\n  instructions_file: gone.md\n"
                "tasks: [{id: a, prompt: p}, {id: b, prompt: p, instructions_file: "
                "base.md}, {id: c, prompt: p}]\n"
            ),
            project,
            file="t.yaml",
        )
    [p] = info.value.problems
    assert (p.file, p.line, p.field) == ("t.yaml", 3, "defaults.instructions_file")
    assert p.message == f"{project / 'gone.md'} is not a file"


def test_resolve_reads_the_compaction_prompt(project: Path) -> None:
    """A run gets the compaction prompt as text, read here; a file it cannot use is a
    problem of the task file, on the field's line."""
    (project / "handoff.md").write_text("  Summarise tersely.\r\n", encoding="utf-8")
    text = (
        "version: 1\ndefaults:\n  compact_prompt_file: handoff.md\n"
        "tasks: [{id: a, prompt: p}, {id: b, prompt: p}]\n"
    )
    a, b = resolve(parse(text), project, file="t.yaml")
    assert a.compact_prompt == b.compact_prompt == "Summarise tersely."
    assert a.compact_prompt_file == project / "handoff.md"
    # The file counts by its bytes, as before; the text is not counted twice.
    assert fingerprint(a) == fingerprint(a.model_copy(update={"compact_prompt": None}))
    [plain] = resolve(parse("version: 1\ntasks: [{id: a, prompt: p}]\n"), project)
    assert plain.compact_prompt is None
    (project / "handoff.md").write_text("\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        resolve(parse(text), project, file="t.yaml")
    [p] = info.value.problems
    assert (p.file, p.line, p.field) == ("t.yaml", 3, "defaults.compact_prompt_file")
    assert p.message == (
        f"{project / 'handoff.md'} is empty; write the instructions or leave the field out"
    )


@pytest.mark.parametrize("repo", ["src\0dir", "x" * 300, "a/" + "y" * 300 + "/b"])
def test_resolve_unusable_paths_are_problems(tmp_path: Path, repo: str) -> None:
    tf = parse(
        f"version: 1\ntasks:\n  - id: a\n    prompt: p\n    repo: {repo!r}\n".replace(
            "\\x00", "\\0"
        ).replace("'", '"')
    )
    with pytest.raises(ConfigError) as info:
        resolve(tf, tmp_path, file="t.yaml")
    [p] = info.value.problems
    assert (p.line, p.field) == (5, "tasks[0].repo")
    assert p.message.startswith("cannot use path ") or p.message.endswith("is not a directory")
    assert "\0" not in p.message and "\n" not in p.message


def test_resolve_unknown_override_provider_blames_the_flag_once(tmp_path: Path) -> None:
    tf = parse("version: 1\ntasks: [{id: a, prompt: p}, {id: b, prompt: p}]\n")
    with pytest.raises(ConfigError) as info:
        resolve(tf, tmp_path, file="t.yaml", model_override="nosuch/x")
    [p] = info.value.problems
    assert (p.file, p.line, p.field) == ("(command line)", None, "--model")
    assert p.message.startswith("unknown provider 'nosuch'; allowed: ")
    with pytest.raises(ConfigError) as info:
        resolve(tf, tmp_path, file="t.yaml", model_override="no-slash")
    assert [p.field for p in info.value.problems] == ["--model"]


# ---------------------------------------------------------------- fuzz


def check_outcome(text: str) -> None:
    """Either a TaskFile or a ConfigError whose every problem is located and explained."""
    try:
        tf = parse_task_file(text, "fuzz.yaml")
    except ConfigError as exc:
        assert exc.problems
        # Lines are counted as editors count them: "\n" only (PyYAML also counts U+0085,
        # U+2028 and U+2029, see config_corpus/line_separator_in_prompt.yaml).
        n_lines = text.count("\n") + 1
        for p in exc.problems:
            assert p.file == "fuzz.yaml"
            assert isinstance(p.field, str) and p.field, p
            assert isinstance(p.message, str) and p.message.strip(), p
            assert p.line is None or 1 <= p.line <= n_lines, p
    else:
        assert isinstance(tf, TaskFile)


# YAML-ish fragments, anchors with (possibly self-referencing) aliases and explicit tags
# on values that may not fit them included.
FRAGMENTS = [
    "version: 1\n",
    "tasks:\n",
    "  - id: a\n",
    "    prompt: p\n",
    "  - ",
    "    ",
    "defaults:\n",
    "limits: ",
    "max_requests: ",
    "tools: ",
    "providers:\n",
    "model: ",
    "[",
    "]",
    "{",
    "}",
    ", ",
    ": ",
    "- ",
    "\n",
    "\t",
    "'",
    '"',
    "#",
    "? ",
    "|\n",
    "&a ",
    "*a",
    "!!str ",
    "!!int ",
    "~",
    "null",
    "yes",
    "-1",
    "1e3",
    ".nan",
    "a/b",
    "x",
]
yamlish_text = st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join)


# database=None: the shared example database would replay inputs of the known bugs above
# on every run (found while writing these tests); a new failure is printed with its input.
FUZZ = settings(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


@settings(FUZZ, max_examples=100)
@given(st.one_of(st.text(max_size=200), yamlish_text))
def test_fuzz_text(text: str) -> None:
    check_outcome(text)


FIELD_NAMES = [
    "version",
    "tasks",
    "defaults",
    "providers",
    "id",
    "prompt",
    "repo",
    "turns",
    "model",
    "tools",
    "sandbox",
    "limits",
    "max_requests",
    "timeout_s",
    "model_options",
    "temperature",
    "top_p",
    "seed",
    "shell_timeout_ms",
    "base_url",
    "env_key",
    "instructions_file",
    "developer_instructions",
    "wire_api",
    "reasoning_effort",
]
VALUES = [
    "shell",
    "apply_patch",
    "read-only",
    "local/smollm2",
    "openai/x",
    "nope/x",
    "",
    ".",
    "http://h/v1",
    "ftp://h",
    "high",
    "chat",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.sampled_from(VALUES),
    st.text(max_size=12),
)
keys = st.one_of(st.sampled_from(FIELD_NAMES), st.text(max_size=8), st.integers(), st.none())
structures = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=5)
    ),
    max_leaves=25,
)
task_like = st.fixed_dictionaries(
    {
        "id": st.one_of(st.sampled_from(["a", "b", "x.y-z"]), scalars),
        "prompt": st.one_of(st.just("do it"), scalars),
    },
    optional={name: structures for name in FIELD_NAMES[6:]},
)
file_like = st.fixed_dictionaries(
    {"version": st.one_of(st.just(1), scalars), "tasks": st.lists(task_like, max_size=3)},
    optional={
        "defaults": st.one_of(task_like, structures),
        "providers": structures,
        "extra": structures,
    },
)


class _NoAliasDumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


@settings(FUZZ, max_examples=150)
@given(st.one_of(file_like, structures))
def test_fuzz_structures(data: Any) -> None:
    check_outcome(yaml.dump(data, Dumper=_NoAliasDumper, sort_keys=False, allow_unicode=True))


@pytest.mark.parametrize("depth", [150, 100_000])
def test_an_output_schema_file_nested_too_deeply_is_located(tmp_path: Path, depth: int) -> None:
    """jsonschema checks a schema recursively, json reads it so: 150 levels once ended in a
    RecursionError traceback, 100,000 in json.loads."""
    (tmp_path / "d.json").write_text('{"items": ' * depth + "{}" + "}" * depth)
    text = "version: 1\ntasks:\n  - {id: a, prompt: p, output_schema: d.json}\n"
    with pytest.raises(ConfigError) as caught:
        resolve(parse(text), tmp_path, file="t.yaml")
    [p] = caught.value.problems
    assert (p.file, p.line, p.field) == ("t.yaml", 3, "tasks[0].output_schema")
    assert "nested too deeply" in p.message
