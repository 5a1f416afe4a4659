"""runner/config/runs.py: the one config pass lists every located problem at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.config import load, load_runs
from runner.errors import ConfigError
from tests.support.fixtures import make_git_repo

TASKS = (
    "version: 1\n"
    "providers:\n  p: {base_url: 'http://127.0.0.1:9/v1', env_key: P_KEY}\n"
    "tasks:\n  - {id: a, prompt: p, model: p/m, repo: repo, git: {branch: 'x/{nope}'}}\n"
)


def _file(tmp_path: Path, repo: bool = True) -> Path:
    if repo:
        make_git_repo(tmp_path / "repo")
    else:
        (tmp_path / "repo").mkdir()  # a folder, but no repository
    path = tmp_path / "t.yaml"
    path.write_text(TASKS)
    return path


def _problems(exc: pytest.ExceptionInfo[ConfigError]) -> list[str]:
    return [f"{p.file}:{p.line}: {p.field}" for p in exc.value.problems]


def test_every_check_of_the_pass_is_reported_in_one_error(tmp_path: Path) -> None:
    path = _file(tmp_path, repo=False)
    with pytest.raises(ConfigError) as err:
        load_runs(path, env={})
    assert _problems(err) == [
        f"{path}:5: tasks[0].git.branch",
        f"{path}:5: tasks[0].model",
        f"{path}:5: tasks[0].repo",
    ]
    assert "P_KEY" in err.value.problems[1].message


def test_offline_skips_what_needs_this_machine(tmp_path: Path) -> None:
    path = _file(tmp_path, repo=False)
    with pytest.raises(ConfigError) as err:
        load_runs(path, env={}, offline=True)
    assert _problems(err) == [f"{path}:5: tasks[0].git.branch"]


def test_a_clean_file_gives_its_checked_runs(tmp_path: Path) -> None:
    path = _file(tmp_path)
    path.write_text(TASKS.replace("x/{nope}", "x/{batch}/{name}"))
    [run] = load_runs(path, env={"P_KEY": "k"})
    assert (run.name, run.at("git", "branch").line) == ("a", 5)


def test_bad_flags_are_listed_with_the_file_s_problems(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("version: 1\ntasks: []\nnope: 1\n")
    with pytest.raises(ConfigError) as err:
        load(path, models=["no-slash"], current_date="2024-13-01", concurrency=0, env={})
    fields = [p.field for p in err.value.problems]
    assert fields[:3] == ["--date", "--model", "--concurrency"]
    assert len(fields) > 3 and all(p.file == str(path) for p in err.value.problems[3:])


def test_selection_is_part_of_the_pass(tmp_path: Path) -> None:
    path = _file(tmp_path)
    path.write_text(TASKS.replace("x/{nope}", "x/{batch}/{name}"))
    with pytest.raises(ConfigError) as err:
        load(path, only=["zzz"], env={"P_KEY": "k"})
    assert _problems(err) == ["(command line):None: --only"]
    loaded = load(path, shard="1/1", env={"P_KEY": "k"})
    assert [r.name for r in loaded.runs] == ["a"] and loaded.selection.shards == 1
