"""runner/config/select.py: `--only`, `--tag`, `--shard` as a function of the runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.config import expand, parse_shard, parse_task_file, select
from runner.errors import ConfigError

TEXT = """\
version: 1
matrix: {repeat: 3}
tasks:
  - {id: a, prompt: p, tags: [fast]}
  - {id: b, prompt: p, tags: [slow]}
  - {id: c, prompt: p}
"""


def _runs(tmp_path: Path):  # type: ignore[no-untyped-def]
    return expand(parse_task_file(TEXT, "t.yaml"), tmp_path, file="t.yaml")


def test_only_and_tag_keep_matching_runs_and_count_the_rest(tmp_path: Path) -> None:
    runs = _runs(tmp_path)
    got = select(runs, file="t.yaml", only=["a", "b"], tags=["slow"])
    assert [t.name for t in got.runs] == ["b.r1", "b.r2", "b.r3"]
    assert got.not_selected == 6 and (got.shard, got.shards) == (1, 1)


def test_shards_are_disjoint_and_cover_the_selection(tmp_path: Path) -> None:
    runs = _runs(tmp_path)
    parts = [select(runs, file="t.yaml", shard=f"{k}/4").runs for k in range(1, 5)]
    names = [t.name for part in parts for t in part]
    assert sorted(names) == sorted(t.name for t in runs)
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    assert all(select(runs, file="t.yaml", shard="2/4").selected == tuple(runs) for _ in "x")


@pytest.mark.parametrize(
    ("kw", "flag", "words"),
    [
        ({"only": ["zz"]}, "--only", "no task with id zz; ids in t.yaml: a, b, c"),
        ({"tags": ["zz"]}, "--tag", "no task has tag zz; tags in t.yaml: fast, slow"),
        ({"shard": "5/4"}, "--shard", "must be K/N with 1 <= K <= N"),
        ({"shard": "auto/4"}, "--shard", "JOB_COMPLETION_INDEX"),
    ],
)
def test_bad_flags_name_the_flag(tmp_path: Path, kw: dict, flag: str, words: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ConfigError) as err:
        select(_runs(tmp_path), file="t.yaml", env={}, **kw)
    [problem] = err.value.problems
    assert (problem.file, problem.field) == ("(command line)", flag)
    assert words in problem.message


def test_auto_shard_reads_the_job_index() -> None:
    assert parse_shard("auto/4", {"JOB_COMPLETION_INDEX": "2"}) == (3, 4)
