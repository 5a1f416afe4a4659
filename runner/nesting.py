"""How deep the files a user or a suite hands the runner may nest: MAX_DEPTH levels of
lists and mappings, in YAML, JSON and TOML alike.

Every reader past the parser walks data recursively (pydantic's dump for a run's
fingerprint, jsonschema for an output schema, the composer), and PyYAML's pure-Python
scanner revisits every open level at every token, so nesting costs the square of its
depth: 1,000 levels of `[` took 4 s and 20,000 over a minute, in a file well under its
size limit, and a few hundred levels of TOML or JSON ended in a RecursionError. No real
file nests past a dozen levels: deeper input is a located problem, found before that
cost. YAML is stopped while it is scanned (`DepthBoundLoader`), and aliases, which repeat
a node wherever they stand, are counted on the composed tree (`node_too_deep`); parsed
JSON and TOML are measured (`too_deep`) before anything else reads them."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Iterable
from typing import Any

import yaml
from yaml.scanner import ScannerError

MAX_DEPTH = 100
"""Open lists and mappings at once, at most."""
TOO_DEEP = f"nested too deeply (more than {MAX_DEPTH} levels of lists and mappings)"


class DepthBoundLoader(yaml.SafeLoader):
    def _deeper(self) -> None:
        if len(self.indents) + self.flow_level >= MAX_DEPTH:
            raise ScannerError(None, None, TOO_DEEP, self.get_mark())

    def fetch_flow_collection_start(self, TokenClass: type[yaml.Token]) -> None:  # noqa: N803
        self._deeper()
        super().fetch_flow_collection_start(TokenClass)

    def add_indent(self, column: int) -> bool:
        if column > self.indent:
            self._deeper()
        return bool(super().add_indent(column))


def _first_too_deep(root: object, children: Callable[[Any], Iterable[Any] | None]) -> Any:
    """The first container found below MAX_DEPTH levels, or None. A value reached again
    (an alias, a shared object) is walked again only when reached deeper than before, so
    each is walked at most MAX_DEPTH times however often it repeats; a container inside
    itself goes ever deeper and is found."""
    deepest: dict[int, int] = {}
    stack: list[tuple[Any, int]] = [(root, 1)]
    while stack:
        value, depth = stack.pop()
        kids = children(value)
        if kids is None:
            continue
        if depth > MAX_DEPTH:
            return value
        if deepest.get(id(value), 0) >= depth:
            continue
        deepest[id(value)] = depth
        stack.extend((kid, depth + 1) for kid in reversed(list(kids)))
    return None


def _data_children(value: object) -> Iterable[object] | None:
    if isinstance(value, dict):
        return value.values()
    if isinstance(value, (list, tuple)):
        return value
    return None


def too_deep(value: object) -> bool:
    """Parsed data (dicts and lists) nested past MAX_DEPTH."""
    return _first_too_deep(value, _data_children) is not None


def _node_children(node: yaml.Node) -> Iterable[yaml.Node] | None:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return None


def node_too_deep(root: yaml.Node) -> yaml.Node | None:
    """The node of a composed YAML tree that lies below MAX_DEPTH levels once aliases
    are counted where they stand, or None."""
    found: yaml.Node | None = _first_too_deep(root, _node_children)
    return found


def json_loads(text: str | bytes, **options: Any) -> Any:
    """`json.loads`, with deep nesting a ValueError saying so (json recurses per level)."""
    try:
        value = json.loads(text, **options)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None
    if too_deep(value):
        raise ValueError(TOO_DEEP)
    return value


def toml_loads(text: str) -> dict[str, Any]:
    """`tomllib.loads`, with deep nesting a ValueError saying so (tomllib recurses per
    level)."""
    try:
        value = tomllib.loads(text)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None
    if too_deep(value):
        raise ValueError(TOO_DEEP)
    return value
