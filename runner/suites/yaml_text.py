"""A suite's YAML (Terminal-Bench's task.yaml and docker-compose.yaml) to plain data and
the line of each key. Pure: no I/O.

The task file's loader (runner/config/yaml_lines.py) sits in a layer above the suites,
so this is the small version a suite needs: a suite's YAML has no business with anchors
and aliases, so they are refused outright rather than bounded. A key written twice in one
mapping is refused too: YAML loaders keep the last silently, and which of two `volumes:`
a harness honours is not for runner to guess."""

from __future__ import annotations

from typing import Any

import yaml

from runner.errors import Problem
from runner.nesting import TOO_DEEP, DepthBoundLoader, node_too_deep

KeyPath = tuple[str | int, ...]


_LOADER: type = getattr(yaml, "CSafeLoader", DepthBoundLoader)
"""libyaml's parser where PyYAML has it (its wheels do): a suite's 1 MiB task.yaml took 35 s
and 700 MB in the pure-Python one, 1.7 s in C. libyaml stops nesting at 1,000 levels;
`node_too_deep` holds the tree to MAX_DEPTH as the task file is held."""


def load_yaml(text: str, file: str) -> tuple[Any, dict[KeyPath, int], list[Problem]]:
    """The data, a map from key path to line, and what is wrong (then the data is None)."""
    try:
        for event in yaml.parse(text, Loader=_LOADER):
            if isinstance(event, yaml.AliasEvent):
                line = event.start_mark.line + 1 if event.start_mark else None
                return None, {}, [Problem(file, line, "(syntax)", "aliases are not allowed")]
        node = yaml.compose(text, Loader=_LOADER)
        if node is not None and (deep := node_too_deep(node)) is not None:
            line = deep.start_mark.line + 1
            return None, {}, [Problem(file, line, "(syntax)", f"not valid YAML: {TOO_DEEP}")]
        data = None if node is None else yaml.constructor.SafeConstructor().construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        reason = " ".join(str(exc.problem or exc.context or "unreadable").split())
        if "maximum nesting depth" in reason:  # libyaml's own bound, past ours
            reason = TOO_DEEP
        return None, {}, [Problem(file, line, "(syntax)", f"not valid YAML: {reason}")]
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        if _LOADER is DepthBoundLoader:
            line = text.count("\n", 0, exc.position) + 1
        else:  # libyaml counts bytes of UTF-8
            line = text.encode()[: exc.position].count(b"\n") + 1
        why = f"not valid YAML: character U+{code:04X} is not allowed"
        return None, {}, [Problem(file, line, "(syntax)", why)]
    except (yaml.YAMLError, RecursionError, ValueError, TypeError) as exc:
        reason = " ".join(str(exc).split())[:200]
        return None, {}, [Problem(file, None, "(syntax)", f"not valid YAML: {reason}")]
    lines: dict[KeyPath, int] = {}
    if node is None:
        return data, lines, []
    twice = _walk(node, lines, file)
    return (None, {}, twice) if twice else (data, lines, [])


_LINES_DEPTH = 8
"""Deep enough for any field a reader names; duplicates are looked for at every depth."""


def _walk(root: yaml.Node, lines: dict[KeyPath, int], file: str) -> list[Problem]:
    """Fill `lines`; a Problem for each key written twice in one mapping."""
    twice: list[Problem] = []
    make = yaml.constructor.SafeConstructor()
    stack: list[tuple[yaml.Node, KeyPath]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        deep = len(path) > _LINES_DEPTH
        if not deep:
            lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            first: dict[object, int] = {}
            for key, value in node.value:
                kpath = (*path, str(key.value))
                line = key.start_mark.line + 1
                same = _identity(key, make)
                if same in first:
                    twice.append(
                        Problem(
                            file,
                            line,
                            dotted(kpath),
                            f"written twice in one mapping (first at line {first[same]}); "
                            "a YAML loader silently keeps only the last: keep one",
                        )
                    )
                first.setdefault(same, line)
                if not deep:
                    lines.setdefault(kpath, line)
                stack.append((value, kpath))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, (*path, i)) for i, item in enumerate(node.value))
    twice.sort(key=lambda p: p.line or 0)
    return twice


def _identity(key: yaml.Node, make: yaml.constructor.SafeConstructor) -> object:
    """The key as the loader makes it (`yes` and `true` are one key), or its text."""
    if isinstance(key, yaml.ScalarNode):
        try:
            value = make.construct_object(key, deep=True)
            hash(value)
            return (type(value).__name__, value)
        except (yaml.YAMLError, TypeError, ValueError):
            pass
    return ("node", key.tag, str(key.value))


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
