"""A suite's YAML (Terminal-Bench's task.yaml and docker-compose.yaml) to plain data and
the line of each key. Pure: no I/O.

The task file's loader (runner/config/yaml_lines.py) sits in a layer above the suites,
so this is the small version a suite needs: a suite's YAML has no business with anchors
and aliases, so they are refused outright rather than bounded."""

from __future__ import annotations

from typing import Any

import yaml

from runner.errors import Problem

KeyPath = tuple[str | int, ...]


def load_yaml(text: str, file: str) -> tuple[Any, dict[KeyPath, int], list[Problem]]:
    """The data, a map from key path to line, and what is wrong (then the data is None)."""
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                line = event.start_mark.line + 1 if event.start_mark else None
                return None, {}, [Problem(file, line, "(syntax)", "aliases are not allowed")]
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        reason = " ".join(str(exc.problem or exc.context or "unreadable").split())
        return None, {}, [Problem(file, line, "(syntax)", f"not valid YAML: {reason}")]
    except (yaml.YAMLError, RecursionError, ValueError, TypeError) as exc:
        reason = " ".join(str(exc).split())[:200]
        return None, {}, [Problem(file, None, "(syntax)", f"not valid YAML: {reason}")]
    lines: dict[KeyPath, int] = {}
    if node is not None:
        _walk(node, (), lines, 0)
    return data, lines, []


def _walk(node: yaml.Node, path: KeyPath, lines: dict[KeyPath, int], depth: int) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if depth > 8:  # deep enough for any field a reader names
        return
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            kpath = (*path, str(key.value))
            lines.setdefault(kpath, key.start_mark.line + 1)
            _walk(value, kpath, lines, depth + 1)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*path, i), lines, depth + 1)


def line_of(path: KeyPath, lines: dict[KeyPath, int]) -> int | None:
    """The line of `path`, or of its nearest written parent."""
    for n in range(len(path), -1, -1):
        if path[:n] in lines:
            return lines[path[:n]]
    return None


def dotted(path: KeyPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "(top level)"
