"""Nesting is refused while scanning, at the place it goes too deep (runner/yaml_depth.py)."""

from __future__ import annotations

import pytest
import yaml

from runner.config import parse_task_file
from runner.errors import ConfigError
from runner.suites.yaml_text import load_yaml
from runner.yaml_depth import MAX_DEPTH, DepthBoundLoader


def _load(text: str) -> object:
    return yaml.load(text, Loader=DepthBoundLoader)


def flow(depth: int) -> str:
    return "[" * depth + "]" * depth


def block(depth: int) -> str:
    return "".join(" " * i + f"k{i}:\n" for i in range(depth - 1)) + " " * depth + "v: 1\n"


def test_the_deepest_allowed_nesting_loads_and_one_more_is_refused() -> None:
    data = _load(flow(MAX_DEPTH))
    for _ in range(MAX_DEPTH - 1):
        assert isinstance(data, list) and len(data) == 1
        data = data[0]
    assert data == []
    with pytest.raises(yaml.scanner.ScannerError, match="nested too deeply") as caught:
        _load(flow(MAX_DEPTH + 1))
    assert caught.value.problem_mark is not None
    assert caught.value.problem_mark.column == MAX_DEPTH  # the first `[` too many


def test_block_mappings_count_as_levels_too() -> None:
    data = _load(block(MAX_DEPTH))
    for i in range(MAX_DEPTH - 1):
        assert isinstance(data, dict)
        data = data[f"k{i}"]
    assert data == {"v": 1}
    with pytest.raises(yaml.scanner.ScannerError, match="nested too deeply") as caught:
        _load(block(MAX_DEPTH + 1))
    assert caught.value.problem_mark is not None
    assert caught.value.problem_mark.line == MAX_DEPTH  # 0-based: the line that opens it


def test_block_and_flow_levels_add_up() -> None:
    half = MAX_DEPTH // 2
    assert _load(block(half).replace("v: 1", "v: " + flow(half - 1))) is not None
    with pytest.raises(yaml.scanner.ScannerError, match="nested too deeply"):
        _load(block(half).replace("v: 1", "v: " + flow(half + 1)))


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 20_000])
def test_a_task_file_nested_too_deeply_is_a_located_syntax_problem(depth: int) -> None:
    text = "version: 1\ntasks: [{id: a, prompt: p}]\nx:\n  " + flow(depth) + "\n"
    with pytest.raises(ConfigError) as caught:
        parse_task_file(text, "tasks.yaml")
    [p] = caught.value.problems
    assert (p.file, p.line, p.field) == ("tasks.yaml", 4, "(syntax)")
    assert "nested too deeply" in p.message


def test_a_suite_yaml_nested_too_deeply_is_a_located_syntax_problem() -> None:
    data, lines, problems = load_yaml("instruction: hi\nx: " + flow(20_000) + "\n", "task.yaml")
    assert data is None and lines == {}
    [p] = problems
    assert (p.file, p.line, p.field) == ("task.yaml", 2, "(syntax)")
    assert "nested too deeply" in p.message


def test_ordinary_documents_load_as_safe_load_does() -> None:
    text = "a:\n  b:\n    - [1, {c: 2}]\n    - !!str 3\nd: &x [1]\ne: *x\n"
    assert _load(text) == yaml.safe_load(text)
    with pytest.raises(yaml.constructor.ConstructorError):
        _load("!!python/object/apply:os.system ['true']\n")
