"""Nesting is refused while scanning, at the place it goes too deep (runner.nesting.py)."""

from __future__ import annotations

import pytest
import yaml

from runner.config import parse_task_file
from runner.errors import ConfigError
from runner.nesting import (
    MAX_DEPTH,
    DepthBoundLoader,
    json_loads,
    node_too_deep,
    toml_loads,
    too_deep,
)
from runner.suites.yaml_text import load_yaml


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


def nested(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_parsed_data_deeper_than_the_bound_is_too_deep() -> None:
    assert not too_deep(nested(MAX_DEPTH)) and too_deep(nested(MAX_DEPTH + 1))
    assert not too_deep({"a": {"b": [1, "x", None]}}) and not too_deep("text")
    assert too_deep({"k": nested(MAX_DEPTH)})  # a mapping is a level too
    loop: list[object] = []
    loop.append(loop)
    assert too_deep(loop)


def test_shared_values_are_walked_once_per_depth_not_once_per_path() -> None:
    """61 levels of a list holding the level below twice: 2**60 paths, one object each."""
    value: list[object] = [1]
    for _ in range(60):
        value = [value, value]
    assert not too_deep(value)
    for _ in range(MAX_DEPTH - 61 + 1):
        value = [value, value]
    assert too_deep(value)


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 100_000])
def test_json_and_toml_deeper_than_the_bound_are_a_value_error(depth: int) -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        json_loads("[" * depth + "]" * depth)
    with pytest.raises(ValueError, match="nested too deeply"):
        toml_loads("x = " + "[" * depth + "]" * depth)
    assert json_loads("[" * MAX_DEPTH + "]" * MAX_DEPTH) == nested(MAX_DEPTH)
    assert toml_loads("x = " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)) == {
        "x": nested(MAX_DEPTH - 1)
    }


def test_aliases_count_where_they_stand_in_a_task_file() -> None:
    """Each anchor is 88 levels and holds the one before: every line is shallow, the
    data 30 x 88 deep. pydantic's dump of the run (its fingerprint) once failed on it."""
    lines = [
        f"  x{i}: &a{i} " + "{a: " * 88 + (f"*a{i - 1}" if i else "1") + "}" * 88 for i in range(30)
    ]
    text = "version: 1\ntasks: [{id: a, prompt: p}]\nx:\n" + "\n".join(lines) + "\n"
    with pytest.raises(ConfigError) as caught:
        parse_task_file(text, "tasks.yaml")
    [p] = caught.value.problems
    assert (p.file, p.field) == ("tasks.yaml", "(syntax)") and p.line is not None
    assert "nested too deeply" in p.message and "aliases" in p.message
    node = yaml.compose("a: &x [[1]]\nb: [*x, *x]\n", Loader=DepthBoundLoader)
    assert node is not None and node_too_deep(node) is None
