"""Which task file the run step runs: `task-file`, a one-task file from `prompt` or
`prompt-file`, the inline `tasks` YAML, or the shard reports to merge; and whether a
config file the base branch lacks is one the pull request adds."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from runner.errors import RunnerError
from runner.github.commands import build_parser
from runner.github.context import Context
from runner.github.task_input import (
    inline_tasks,
    merge_argv,
    not_in_config,
    pr_adds,
    task_source,
)
from tests.support.fixtures import make_git_repo


def source(tmp_path: Path, *flags: str, event: str = "") -> tuple[str, str]:
    args = build_parser().parse_args(["run", "--out", "o", *flags])
    env = {"RUNNER_TEMP": str(tmp_path / "temp"), "GITHUB_WORKSPACE": str(tmp_path / "ws")}
    if event:
        (tmp_path / "event.json").write_text(event)
        env["GITHUB_EVENT_PATH"] = str(tmp_path / "event.json")
    return task_source(args, env)


def test_exactly_one_source_is_given(tmp_path: Path) -> None:
    with pytest.raises(RunnerError, match=r"^give one of .*; got task-file and prompt$"):
        source(tmp_path, "--task-file", "t.yaml", "--prompt", "p")
    with pytest.raises(RunnerError, match=r"^one of task-file, tasks, prompt or prompt-file is"):
        source(tmp_path, "--prompt", " \n")
    assert source(tmp_path, "--task-file", "t.yaml") == ("t.yaml", "t.yaml")


def test_a_prompt_becomes_a_task_file_named_after_its_thread(tmp_path: Path) -> None:
    path, guarded = source(
        tmp_path, "--prompt", "explain", "--model", "p/m", event='{"issue": {"number": 4}}'
    )
    assert guarded == "" and Path(path).parent.parent == tmp_path / "temp"
    data = yaml.safe_load(Path(path).read_text())
    assert data["tasks"] == [{"id": "issue-4", "prompt": "explain", "repo": str(tmp_path / "ws")}]
    assert data["defaults"] == {"model": "p/m"}


def test_a_prompt_file_that_is_missing_or_not_text(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.md")
    assert source(tmp_path, "--prompt-file", missing) == ("", missing)
    bad = tmp_path / "bad.md"
    bad.write_bytes(b"\xff\xfe review")
    with pytest.raises(RunnerError, match=rf"^prompt-file {bad}: 'utf-8' codec can't decode"):
        source(tmp_path, "--prompt-file", str(bad))


def test_inline_tasks_keep_their_repos_in_the_checkout(tmp_path: Path) -> None:
    text = "version: 1\ntasks:\n  - {id: a, prompt: p}\n  - {id: b, prompt: q, repo: sub/dir}\n"
    env = {"RUNNER_TEMP": str(tmp_path / "temp"), "GITHUB_WORKSPACE": str(tmp_path / "ws")}
    path = Path(inline_tasks(text, env))
    assert path.name == "tasks.yaml" and path.parent.parent == tmp_path / "temp"
    repos = [(path.parent / t["repo"]).resolve() for t in yaml.safe_load(path.read_text())["tasks"]]
    assert repos == [tmp_path / "ws", tmp_path / "ws/sub/dir"]
    assert inline_tasks(text, env) == str(path)  # shards of one input agree on the path
    assert inline_tasks(text + "# other\n", env) != str(path)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("tasks: [oops", r"tasks input line 1: not YAML"),
        ("- a\n", r"tasks input: a task file's YAML, a mapping with a `tasks` list"),
        ("tasks: {a: 1}", r"tasks input: a task file's YAML"),
        ("tasks: [{id: a}, x]", r"tasks input: tasks\[1\] is not a mapping"),
        ("tasks: [{id: a, repo: [x]}]", r"tasks input: tasks\[0\].repo is not a path"),
    ],
    ids=["not yaml", "a list", "tasks a mapping", "a task a string", "repo a list"],
)
def test_bad_inline_tasks_are_named(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(RunnerError, match="^" + says):
        inline_tasks(text, {"RUNNER_TEMP": str(tmp_path)})
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_merge_takes_the_directories_its_globs_match(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("shard-2", "shard-1", "shard-1/inner"):
        (tmp_path / name).mkdir()
    (tmp_path / "shard-3").write_text("a file, not a shard")
    argv = merge_argv("shard-* shard-1", "merged")
    assert argv[argv.index("merge") + 1 :] == ["shard-1", "shard-2", "--out", "merged"]
    with pytest.raises(RunnerError, match=r"^merge: no directory matches 'none-\*'$"):
        merge_argv("none-*", "merged")


def test_a_missing_config_file_counts_as_added_only_if_the_pr_has_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = make_git_repo(tmp_path / "ws", {".github/runner/new.yaml": "version: 1\n"})
    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ws, capture_output=True, text=True, check=True
    ).stdout.strip()
    monkeypatch.chdir(ws)
    env = {"GITHUB_WORKSPACE": str(ws)}
    trusted = str(tmp_path / "base/.github/runner")

    def pr(head_sha: object) -> Context:
        return Context(event={"pull_request": {"head": {"sha": head_sha}}})

    assert pr_adds(".github/runner/new.yaml", trusted, pr("zz"), env)  # no base config at all
    Path(trusted).mkdir(parents=True)
    (Path(trusted) / "nightly.yaml").write_text("")
    assert pr_adds(".github/runner/new.yaml", trusted, pr(sha), env)
    assert not pr_adds(".github/runner/typo.yaml", trusted, pr(sha), env)
    assert not pr_adds(".github/runner/new.yaml", trusted, pr("--all"), env)
    assert not pr_adds("../outside.yaml", trusted, pr(sha), env)
    assert not_in_config("typo.yaml", trusted) == (
        f"typo.yaml: no such file, in the base branch or in this pull request; {trusted} has "
        "nightly.yaml: check the task-file / prompt-file input"
    )
