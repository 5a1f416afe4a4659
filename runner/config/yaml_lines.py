"""YAML text to plain data plus a map from field path to line.

PyYAML's node tree carries a position for every key and value; the text is composed
once into that tree (duplicate keys, non-string keys, alias cycles and alias bombs are
checked on it) and constructed from the same tree, so every later message can name the
line a field was written on. Pure: no I/O."""

from __future__ import annotations

import bisect
import re
from typing import Any

import yaml

from runner.config.text import Path_, dotted, esc, line_for, short
from runner.errors import Problem
from runner.nesting import DepthBoundLoader

_TAG = "tag:yaml.org,2002:"
_STR_TAGS = {_TAG + "str", _TAG + "value"}
_MERGE_TAG = _TAG + "merge"
_KEY_KINDS = {
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean",
    "null": "null",
    "timestamp": "a date",
    "binary": "binary data",
}
ALIAS_EXPANSION_LIMIT = 100_000
"""How many values aliases may add to a file once expanded (a "billion laughs" guard)."""


def _short_tag(tag: str) -> str:
    return "!!" + tag[len(_TAG) :] if tag.startswith(_TAG) else tag


class LineIndex:
    """Line numbers as editors, `grep -n` and `wc -l` count them: only "\\n" ends a line.

    PyYAML also counts U+0085, U+2028 and U+2029 (and a lone CR), so its `mark.line` drifts
    after such a character; the character index of a mark is exact.
    """

    def __init__(self, text: str) -> None:
        self._newlines = [m.start() for m in re.finditer("\n", text)]

    def __call__(self, index: int) -> int:
        # == text.count("\n", 0, index) + 1, in O(log n)
        return bisect.bisect_left(self._newlines, index) + 1


class _BadValue(yaml.constructor.ConstructorError):
    """A scalar whose explicit tag does not fit it, e.g. `!!int ten`."""


class TaskYamlLoader(DepthBoundLoader):
    """SafeLoader that remembers anchor names and where aliases stand in sequences, and
    turns the constructor's own ValueError/KeyError/... on bad tagged values into a
    located error."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.anchor_names: dict[int, str] = {}
        self.alias_marks: dict[tuple[int, int], yaml.Mark] = {}

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        # An alias is the anchored node itself in the tree; keep where the alias stands.
        if parent is not None and isinstance(index, int) and self.check_event(yaml.AliasEvent):
            event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]
            if isinstance(event.start_mark, yaml.Mark):
                self.alias_marks[(id(parent), index)] = event.start_mark
        node = super().compose_node(parent, index)
        if parent is None:  # the root: every anchor of the document is known now
            self.anchor_names = {id(n): name for name, n in self.anchors.items()}
        return node

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, TypeError, LookupError, AttributeError, ArithmeticError):
            value = node.value if isinstance(node, yaml.ScalarNode) else ""
            shown = f"`{esc(short(value))}`" if value else "an empty value"
            raise _BadValue(
                None, None, f"{shown} is not a valid {_short_tag(node.tag)}", node.start_mark
            ) from None


# `=` resolves to the YAML 1.1 "value" tag, which SafeLoader cannot construct: read it as text.
def _construct_text(loader: TaskYamlLoader, node: yaml.Node) -> str:
    return loader.construct_yaml_str(node)


TaskYamlLoader.add_constructor(_TAG + "value", _construct_text)


class TreeWalker:
    """One pass over the node tree: line map, duplicate and non-string keys.

    Aliases reuse node objects, so each node is walked once (remembered by id); a
    self-referencing alias therefore ends, and a "billion laughs" file stays linear.
    """

    def __init__(self, file: str, at: LineIndex, alias_marks: dict[tuple[int, int], yaml.Mark]):
        self.file = file
        self.at = at
        self.alias_marks = alias_marks
        self.lines: dict[Path_, int] = {}
        self.paths: dict[int, Path_] = {}  # node id -> the path it was first seen at
        self.by_index: dict[int, Path_] = {}  # text index -> deepest path starting there
        self.problems: list[Problem] = []

    def line(self, node: yaml.Node) -> int:
        return self.at(node.start_mark.index)

    def walk(self, node: yaml.Node, path: Path_) -> None:
        self.lines.setdefault(path, self.line(node))
        if id(node) in self.paths:
            return
        self.paths[id(node)] = path
        self.by_index[node.start_mark.index] = path
        if isinstance(node, yaml.MappingNode):
            self._mapping(node, path)
        elif isinstance(node, yaml.SequenceNode):
            for i, child in enumerate(node.value):
                mark = self.alias_marks.get((id(node), i))
                if mark is not None:
                    self.lines.setdefault(path + (i,), self.at(mark.index))
                self.walk(child, path + (i,))

    def _mapping(self, node: yaml.MappingNode, path: Path_) -> None:
        seen: dict[str, int] = {}
        merged: list[yaml.Node] = []
        for knode, vnode in node.value:
            if knode.tag == _MERGE_TAG:
                merged.append(vnode)
                self.walk(vnode, path + ("<<",))
                continue
            if not (isinstance(knode, yaml.ScalarNode) and knode.tag in _STR_TAGS):
                self._non_string_key(knode, path)
                continue
            key = str(knode.value)
            kpath = path + (key,)
            line = self.line(knode)
            if key in seen:
                self.problems.append(
                    Problem(
                        self.file,
                        line,
                        dotted(kpath),
                        f"duplicate key; each key may appear once (first at line {seen[key]})",
                    )
                )
            else:
                seen[key] = line
            self.lines[kpath] = line
            self.walk(vnode, kpath)
        # Keys brought in by `<<: *base` point at their line in the merged mapping.
        for m in merged:
            sources = m.value if isinstance(m, yaml.SequenceNode) else [m]
            for src in sources:
                if isinstance(src, yaml.MappingNode):
                    for knode, _ in src.value:
                        if isinstance(knode, yaml.ScalarNode) and knode.tag in _STR_TAGS:
                            self.lines.setdefault(path + (str(knode.value),), self.line(knode))

    def _non_string_key(self, knode: yaml.Node, path: Path_) -> None:
        if isinstance(knode, yaml.ScalarNode):
            text = esc(short(str(knode.value)))
            kind = _KEY_KINDS.get(knode.tag[len(_TAG) :], _short_tag(knode.tag))
            name = text or "~"
            message = (
                f"keys must be strings; `{name}` reads as {kind}: quote it, as in "
                f"'{text}', if it is meant as a name"
            )
        else:
            name = "(list)" if isinstance(knode, yaml.SequenceNode) else "(mapping)"
            message = f"keys must be strings, not a {name[1:-1]}"
        self.problems.append(Problem(self.file, self.line(knode), dotted(path + (name,)), message))


def alias_problems(
    root: yaml.Node, walker: TreeWalker, anchor_names: dict[int, str]
) -> list[Problem]:
    """A node that contains itself through an alias, or aliases that expand the file
    beyond ALIAS_EXPANSION_LIMIT values: neither can be a task file."""
    size: dict[int, int] = {}
    active: set[int] = set()
    cycles: list[yaml.Node] = []

    def children(node: yaml.Node) -> list[yaml.Node]:
        if isinstance(node, yaml.MappingNode):
            return [n for pair in node.value for n in pair]
        if isinstance(node, yaml.SequenceNode):
            return list(node.value)
        return []

    def expanded(node: yaml.Node) -> int:
        key = id(node)
        if key in size:
            return size[key]
        if key in active:
            cycles.append(node)
            return 0
        active.add(key)
        total = 1 + sum(expanded(child) for child in children(node))
        active.discard(key)
        size[key] = total
        return total

    total = expanded(root)
    file, lines = walker.file, walker.lines
    if cycles:
        node = cycles[0]
        path = walker.paths.get(id(node), ())
        name = anchor_names.get(id(node))
        through = f"the alias *{esc(name)}" if name else "an alias"
        return [
            Problem(
                file,
                line_for(path, lines),
                dotted(path),
                f"contains itself through {through}; recursive structures are not allowed",
            )
        ]
    if total - len(size) > ALIAS_EXPANSION_LIMIT:
        node = root  # blame the smallest node that is still too big
        while True:
            big = [c for c in children(node) if size.get(id(c), 0) > ALIAS_EXPANSION_LIMIT]
            if not big:
                break
            node = max(big, key=lambda c: size[id(c)])
        path = walker.paths.get(id(node), ())
        return [
            Problem(
                file,
                line_for(path, lines),
                dotted(path),
                f"aliases expand this to more than {ALIAS_EXPANSION_LIMIT:,} values; "
                f"refusing to load it",
            )
        ]
    return []


def yaml_problem(
    exc: yaml.YAMLError, file: str, at: LineIndex, by_index: dict[int, Path_] | None = None
) -> Problem:
    """One readable line for a PyYAML error: problem, then its context with a line."""
    if isinstance(exc, yaml.reader.ReaderError):
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        escape = f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
        return Problem(
            file,
            at(exc.position),
            "(syntax)",
            f"not valid YAML: character U+{code:04X} is not allowed; inside a "
            f"double-quoted string write it as {escape}",
        )
    if not isinstance(exc, yaml.MarkedYAMLError):
        reason = esc(" ".join(str(exc).split()))
        return Problem(file, None, "(syntax)", f"not valid YAML: {reason}")
    mark = exc.problem_mark or exc.context_mark
    line = at(mark.index) if mark is not None else None
    field = "(syntax)"
    if by_index is not None and isinstance(exc, yaml.constructor.ConstructorError) and mark:
        field = dotted(by_index.get(mark.index, ())) if mark.index in by_index else field
    problem, context = exc.problem, exc.context
    reason = problem or context or "unreadable"
    if problem and context:  # PyYAML's order: "while parsing X" (where it began), the problem
        where = f" at line {at(exc.context_mark.index)}" if exc.context_mark else ""
        reason = f"{context}{where}, {problem}"
    reason = esc(" ".join(reason.split()))
    if isinstance(exc, _BadValue):
        return Problem(file, line, field, reason)
    return Problem(file, line, field, f"not valid YAML: {reason}")
